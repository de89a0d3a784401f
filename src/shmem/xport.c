/*
 * Remote access, the PE's operations (see shmem_internal.h): direct loads, stores and atomics
 * on every segment that is mapped here, and the routed transport for the rest: a PE that is
 * not reachable through any of our adapters gets messages through the nodes of the hosts in
 * between (the ring's geometry is route.c, the rings themselves wire.c, the format xport.h).
 *
 * The job's hosts: every host with a PE. When some pair of them is not directly connected the
 * fabric must be a switchless ring (each host two adapters, one neighbour each): the ring is
 * discovered from the fabric, and every host of it, with PEs or not, joins the job with a node.
 * Traffic then takes the shorter way around. A PE writes its messages into the next host's
 * inbox itself; large put chunks are staged and handed to a sender thread per neighbour that
 * moves them by DMA (shm_put). quiet waits for the nodes' acknowledgements; replies to gets and
 * fetching AMOs arrive in the control page and reply buffer of the PE's segment.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shmem_internal.h"
#include "xport.h"

/* PE side of the routed transport. */
static struct xp_link *links; /* by host */
static struct xp_prod *prods; /* our ring in each host's inbox, by host */
static struct xp_dmaq *pe_dmaq; /* DMA queues of the adapter reaching each host */

/* Puts by DMA: the caller copies each chunk into a staging chunk of our segment and hands it
 * to the hop's sender thread, which queues the DMAs and publishes each message the moment its
 * data has landed; the put returns as soon as its data is staged, so the next put's chunks
 * are queued before the link goes idle. */
struct xp_sender {
    pthread_t tid;
    bool started, stop;
    pthread_cond_t cond; /* new chunks (for the thread); a chunk done (for the callers) */
    struct xp_fifo fifo; /* chunks staged and queued on the DMA engine, in order */
    uint64_t staged;     /* chunks staged so far: the next takes staging chunk staged % SHM_PUT_STAGES */
    int host;
};
static struct xp_sender *senders; /* by host */
static _Atomic uint64_t issued; /* routed puts and posted AMOs sent */
/* Acks come back as counts, in no particular order between destinations: a quiet that counted
 * while other threads sent puts could take the ack of a later put, gone a shorter way, for that
 * of an earlier one. So routed puts are sent under the read side of this lock and a quiet
 * counts under the write side (writers first: a stream of puts cannot hold a quiet off). */
static pthread_rwlock_t issue_gate = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
static pthread_mutex_t get_lock = PTHREAD_MUTEX_INITIALIZER, amo_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t get_seq, amo_seq;

/* With prods[host].lock held: wait until the sender thread has published every staged chunk
 * (in_order: messages go behind them) and the ring has room for dlen bytes of data (the node
 * drains it on its own). */
static void wait_room(int host, bool in_order, size_t dlen)
{
    struct xp_prod *p = &prods[host];
    struct xp_sender *sd = senders ? &senders[host] : NULL;
    while (in_order && sd && sd->fifo.n)
        pthread_cond_wait(&sd->cond, &p->lock);
    /* The node drains the ring on its own, and wakes nobody: a wait with naps. */
    struct wpol w;
    shm_poll_begin(&w);
    while (!xp_has_room(p, dlen)) {
        if (sd && sd->fifo.n) /* our own chunks hold slots: they will be published */
            pthread_cond_wait(&sd->cond, &p->lock);
        else
            shm_poll_pause(&w);
    }
    wpol_end(&w);
}

/* A PE's send: wait for room (the node drains the ring on its own). */
static void send_msg(int host, const struct xp_msg *m, const void *data, size_t len)
{
    struct xp_prod *p = &prods[host];
    if (!p->link)
        shm_fatal("no connection to the node of host node %u", shm.hosts[host].node);
    pthread_mutex_lock(&p->lock);
    wait_room(host, true, len);
    xp_push(p, m, data, len);
    pthread_mutex_unlock(&p->lock);
}

/* Where a PE sends a message for PE pe: its host's node for AMOs on a direct host, else the
 * next hop on the way. */
static int first_hop(int pe) { return xp_next_hop(shm.myhost, shm.pes[pe].host); }

void shm_xport_connect(void)
{
    if (!shm_xport_needed())
        return;
    links = calloc((size_t)shm.nhosts, sizeof *links);
    prods = calloc((size_t)shm.nhosts, sizeof *prods);
    pe_dmaq = calloc((size_t)shm.nhosts, sizeof *pe_dmaq);
    senders = calloc((size_t)shm.nhosts, sizeof *senders);
    if (!links || !prods || !pe_dmaq || !senders)
        shm_fatal("out of memory");
    for (int h = 0; h < shm.nhosts; h++) {
        if (h == shm.myhost || shm.hosts[h].adapter < 0)
            continue;
        /* Ring: our neighbours forward for us. Switched with software atomics: every host
         * with PEs does them for its PEs. */
        if (!shm.routed && shm.hosts[h].first_pe < 0)
            continue;
        int rc = xp_link_open(&links[h], shm.sd, h);
        if (rc == -ENOSPC)
            shm_fatal("cannot map the inbox of host node %u (%zu KiB): %s; a smaller "
                      "SHMEM_RING_CHUNK or SHMEM_SYMMETRIC_SIZE needs fewer LUT entries",
                      shm.hosts[h].node, xp_inbox_size(xp_nrings(), shm.chunk) >> 10,
                      seg_strerror(rc));
        if (rc)
            shm_fatal("cannot reach the node of host node %u (%s): is oshrelay running there? "
                      "(oshrun starts it)", shm.hosts[h].node, seg_strerror(rc));
        prods[h].link = &links[h];
        prods[h].ring = xp_ring_of((uint32_t)shm.me, shm.myhost, h);
        pthread_mutex_init(&prods[h].lock, NULL);
        pthread_cond_init(&senders[h].cond, NULL);
        senders[h].host = h;
        shm_debug("routed transport: node on host node %u via adapter %d", shm.hosts[h].node,
                  shm.hosts[h].adapter);
    }
}

static void fo_fini(void);

void shm_xport_fini(void)
{
    if (links)
        for (int h = 0; h < shm.nhosts; h++) {
            struct xp_sender *sd = &senders[h];
            if (sd->started) { /* it publishes what is left, then ends */
                pthread_mutex_lock(&prods[h].lock);
                sd->stop = true;
                pthread_cond_broadcast(&sd->cond);
                pthread_mutex_unlock(&prods[h].lock);
                pthread_join(sd->tid, NULL);
            }
            xp_dmaq_put(&pe_dmaq[h]);
            if (links[h].remote)
                xp_link_close(&links[h]);
        }
    fo_fini();
    free(pe_dmaq);
    pe_dmaq = NULL;
    free(senders);
    senders = NULL;
    free(links);
    free(prods);
    links = NULL;
    prods = NULL;
}

/* ------------------------------------------------------------------------ addressing */

bool shm_off_ok(const void *addr, size_t *off)
{
    const char *a = addr, *h = shm_heap_of(shm.me);
    if (a < h || a >= h + shm.heap_size)
        return shm_globals_off(addr, off);
    *off = (size_t)(a - (const char *)shm.pes[shm.me].base);
    return true;
}

size_t shm_off(const char *who, const void *addr, int pe)
{
    shm_require_init(who);
    if (pe < 0 || pe >= shm.npes)
        shm_fatal("%s: PE %d does not exist (there are %d)", who, pe, shm.npes);
    size_t off;
    if (!shm_off_ok(addr, &off))
        shm_fatal("%s: %p is not symmetric: allocate remotely accessed objects with "
                  "shmem_malloc", who, addr);
    return off;
}

/* ------------------------------------------------------------------------ operations */

static size_t stage_off(int host, uint64_t n)
{
    unsigned side = (unsigned)shm.hosts[host].adapter & 1u;
    return shm.rbuf_off + (SHM_RBUF_SLOTS + side * SHM_PUT_STAGES + n % SHM_PUT_STAGES) * shm.chunk;
}

/* How the oldest chunk's DMA ended (rc): false when it is not to be published (the link went
 * down and failover sends the request again the other way round); other failures end the job. */
static bool sender_landed(struct xp_sender *sd, int rc)
{
    if (rc == -ENOLINK && shm.failover) {
        xp_route_refresh(true);
        return false;
    }
    if (rc == -ENOLINK)
        shm_path_lost(sd->host);
    else if (rc)
        shm_fatal("DMA to the node of host node %u failed: %s", shm.hosts[sd->host].node,
                  seg_strerror(rc));
    return true;
}

/* The hop's sender thread: the callers queue each staged chunk's DMA themselves (so the engine
 * goes on to the next chunk without waiting for this thread to wake up); the thread waits for
 * the oldest and publishes its message the moment its data has landed, with every later one
 * whose data has landed too, and then rings the node's doorbell once, without the lock. */
static void *sender_thread(void *arg)
{
    struct xp_sender *sd = arg;
    struct xp_prod *p = &prods[sd->host];
    seg_dma_queue_t *q = pe_dmaq[sd->host].q;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        if (sd->fifo.n) {
            pthread_mutex_unlock(&p->lock);
            int rc = seg_dma_wait_first(q, -1);
            uint64_t landed = shm.profile ? shm_now_ns() : 0; /* SHMEM_PROFILE: its dma ends */
            pthread_mutex_lock(&p->lock);
            bool published = false;
            for (;;) {
                struct xp_pend *e = xp_fifo_first(&sd->fifo);
                if (sender_landed(sd, rc) && !xp_link_dead(shm.myhost, sd->host)) {
                    if (shm.profile) {
                        xp_stamp_at(&e->st, SHM_ST_DMA, landed);
                        xp_stamp_put(p, e->idx, &e->st);
                    }
                    xp_publish_silent(p, e->idx, &e->m);
                    published = true;
                }
                xp_fifo_pop(&sd->fifo);
                if (!sd->fifo.n || (rc = seg_dma_wait_first(q, 0)) == -ETIMEDOUT)
                    break;
                if (shm.profile)
                    landed = shm_now_ns();
            }
            pthread_cond_broadcast(&sd->cond);
            if (published) {
                pthread_mutex_unlock(&p->lock);
                xp_doorbell(p);
                pthread_mutex_lock(&p->lock);
            }
            continue;
        }
        if (sd->stop)
            break;
        pthread_cond_wait(&sd->cond, &p->lock);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* With p->lock held: can this hop's chunks go by DMA (its queue and sender thread exist)? */
static bool sender_ready(int hop)
{
    struct xp_sender *sd = &senders[hop];
    if (sd->started)
        return true;
    if (!xp_dmaq_get(&pe_dmaq[hop], shm.sd, shm.hosts[hop].adapter))
        return false;
    if (pthread_create(&sd->tid, NULL, sender_thread, sd))
        return false;
    sd->started = true;
    return true;
}

/* ------------------------------------------------------------------------ failover */

/* With SHMEM_RING_FAILOVER every request to another host carries the next number of its
 * (us, target PE) stream and stays here, with a copy of its data, until the target's node has
 * acknowledged it (the node writes the last number it applied into fo_acked[target] of our
 * segment, also on a get's or AMO's reply), or, for a get or an AMO, until its reply is here
 * (fo_done). The node applies each number
 * once and in order, and drops one that comes early. When a ring link is found down, or when
 * nothing was acknowledged for a while after a failure (an acknowledgement can be lost too),
 * every request not yet acknowledged is sent again the way that is up. */
struct fo_ent {
    struct xp_msg m;
    char *data;
    int slot; /* its pool chunk (data there), or -1 (data malloc'd, or none) */
};
static struct {
    pthread_mutex_t lock; /* every routed send, and the list */
    struct fo_ent *e;
    size_t cap, head, n, bytes;
    uint64_t *sent;     /* last number sent, by target PE */
    int *free_slots, nfree; /* pool chunks not in use */
    uint32_t gen;       /* the routes the sends took (xp_route_gen) */
    uint64_t progress;  /* sum of the acknowledgements last seen */
    uint64_t quiet_ns;  /* when they last moved, or when we last sent again */
    uint64_t backoff_ns; /* how long nothing may move before we send again */
} fo = { .lock = PTHREAD_MUTEX_INITIALIZER };
#define FO_MAX_BYTES (16u << 20) /* small puts' data kept for resending, at most */
/* No acknowledgement this long after a failure: send again; each time in vain, wait twice as
 * long (up to 5 s), so that a slow ring (a loaded machine) is not flooded with copies. */
#define FO_RESEND_NS 200000000u
#define FO_RESEND_MAX_NS 5000000000u

static void fo_fini(void)
{
    pthread_mutex_lock(&fo.lock);
    for (size_t i = 0; fo.e && i < fo.n; i++) { /* none after the finalize's quiet */
        struct fo_ent *e = &fo.e[(fo.head + i) % fo.cap];
        if (e->slot < 0)
            free(e->data);
    }
    free(fo.e);
    free(fo.sent);
    free(fo.free_slots);
    fo.e = NULL;
    fo.sent = NULL;
    fo.free_slots = NULL;
    fo.head = fo.n = fo.bytes = 0;
    fo.nfree = 0;
    pthread_mutex_unlock(&fo.lock);
}

static _Atomic uint64_t *fo_acked(void)
{
    return (_Atomic uint64_t *)((char *)shm.pes[shm.me].base + shm_fo_acks_off());
}

static size_t fo_pool_off(int slot) { return shm_fo_pool_off() + (size_t)slot * shm.chunk; }

/* Send (or send again) one request the way that is up now, waiting for room. Data in a pool
 * chunk goes by DMA the first time (dma), as the ordinary transport's staged chunks do: the
 * hop's sender thread publishes it; anything else is copied into the slot here. fo.lock held.
 *
 * Room in the hop's ring is waited for here, not in wait_room: room comes only from the node
 * across the link, and a link that goes down meanwhile never gives it (its tail then reads all
 * ones), so each look that finds none asks the fabric again (xp_route_refresh) and the request
 * goes the other way round once the link is found down. Waiting for our own DMA'd chunks is
 * bounded: a DMA ends whether the link is up or not (-ENOLINK). */
static void fo_transmit(struct fo_ent *e, bool dma)
{
    int dh = shm.pes[e->m.dst_pe].host;
    struct wpol w;
    shm_poll_begin(&w);
    for (;;) {
        xp_route_refresh(false);
        int hop = xp_next_hop(shm.myhost, dh);
        struct xp_prod *p = hop >= 0 ? &prods[hop] : NULL;
        if (!p || !p->link)
            shm_fatal("no connection to the node of host node %u", shm.hosts[dh].node);
        struct xp_sender *sd = &senders[hop];
        pthread_mutex_lock(&p->lock);
        bool by_dma = dma && e->slot >= 0 && sender_ready(hop);
        if (by_dma)
            while (sd->fifo.n == SHM_PUT_STAGES)
                pthread_cond_wait(&sd->cond, &p->lock);
        /* A message copied here goes behind our DMA'd chunks, in order. */
        if (!(by_dma || !sd->fifo.n) || !xp_has_room(p, e->m.len)) {
            bool ours = sd->fifo.n > 0; /* our chunks will be published, and may free room */
            if (ours)
                pthread_cond_wait(&sd->cond, &p->lock);
            pthread_mutex_unlock(&p->lock);
            if (!ours)
                shm_poll_pause(&w);
            continue;
        }
        if (!by_dma) {
            xp_push(p, &e->m, e->data, xp_data_len(&e->m));
            pthread_mutex_unlock(&p->lock);
            break;
        }
        struct xp_msg m = e->m;
        uint64_t idx = xp_reserve(p, m.len, &m.lead);
        int rc = seg_dma_transfer(pe_dmaq[hop].q, shm.local, fo_pool_off(e->slot), p->link->remote,
                                  xp_slot_off(p->ring, idx + m.lead), m.len, 0);
        if (rc == -ENOLINK) { /* that ring is not used again: the other way round */
            pthread_mutex_unlock(&p->lock);
            xp_route_refresh(true);
            dma = false;
            shm_poll_pause(&w);
            continue;
        }
        if (rc)
            shm_fatal("cannot queue a DMA to the node of host node %u: %s",
                      shm.hosts[hop].node, seg_strerror(rc));
        *xp_fifo_add(&sd->fifo) = (struct xp_pend){ .idx = idx, .m = m };
        pthread_cond_broadcast(&sd->cond);
        pthread_mutex_unlock(&p->lock);
        break;
    }
    wpol_end(&w);
}

/* Whether request e is done with: a put once acknowledged; a get or an AMO once its reply is
 * here. An acknowledgement's number covers every request of the stream the node applied, gets
 * and AMOs too, but their replies travel apart from it: one lost at a link that went down
 * while the acknowledgement came the other way round must still be asked for again. */
static bool fo_done(const struct fo_ent *e, _Atomic uint64_t *acked)
{
    struct shm_ctrl *c = shm_ctrl_of(shm.me);
    switch (e->m.type) {
    case XP_GET:
        return atomic_load_explicit(&c->rbuf_seq[e->m.token], memory_order_acquire) >= e->m.seq;
    case XP_AMO:
        return atomic_load_explicit(&c->amo_seq, memory_order_acquire) >= e->m.seq;
    default:
        return atomic_load_explicit(&acked[e->m.dst_pe], memory_order_acquire) >= e->m.sseq;
    }
}

/* Drop the requests done with at the front of the list. fo.lock held. */
static void fo_reap(void)
{
    _Atomic uint64_t *acked = fo_acked();
    while (fo.n) {
        struct fo_ent *e = &fo.e[fo.head % fo.cap];
        if (!fo_done(e, acked))
            break;
        if (e->slot >= 0)
            fo.free_slots[fo.nfree++] = e->slot;
        else if (e->data) {
            fo.bytes -= e->m.len;
            free(e->data);
        }
        e->data = NULL;
        fo.head++;
        fo.n--;
    }
}

/* Resend what is not acknowledged after a route change, or after FO_RESEND_NS without any
 * acknowledgement once a link has failed. fo.lock held. */
static void fo_maintain(void)
{
    xp_route_refresh(false);
    uint32_t gen = xp_route_gen();
    bool resend = gen != fo.gen;
    if (!resend && gen && fo.n) {
        _Atomic uint64_t *acked = fo_acked();
        uint64_t sum = 0;
        for (int pe = 0; pe < shm.npes; pe++)
            sum += atomic_load_explicit(&acked[pe], memory_order_relaxed);
        uint64_t now = shm_now_ns();
        if (sum != fo.progress || !fo.quiet_ns) {
            fo.progress = sum;
            fo.quiet_ns = now;
            fo.backoff_ns = FO_RESEND_NS;
        } else if (now - fo.quiet_ns > fo.backoff_ns) {
            resend = true;
            fo.quiet_ns = now;
            fo.backoff_ns = fo.backoff_ns * 2 < FO_RESEND_MAX_NS ? fo.backoff_ns * 2 : FO_RESEND_MAX_NS;
        }
    }
    if (!resend)
        return;
    fo.gen = gen;
    fo_reap();
    _Atomic uint64_t *acked = fo_acked();
    size_t again = 0;
    for (size_t i = 0; i < fo.n; i++) {
        struct fo_ent *e = &fo.e[(fo.head + i) % fo.cap];
        if (!fo_done(e, acked)) {
            fo_transmit(e, false);
            again++;
        }
    }
    shm_debug("failover: %zu requests sent again", again);
}

/* Room in the list for a request with len bytes of data (a pool chunk for a large one). */
static bool fo_has_room(size_t len)
{
    if (fo.n == fo.cap)
        return false;
    if (len >= xp_dma_min && xp_dma_min)
        return fo.nfree > 0;
    return fo.bytes + len <= FO_MAX_BYTES || !fo.bytes;
}

static bool fo_room(void *arg)
{
    size_t len = *(size_t *)arg;
    pthread_mutex_lock(&fo.lock);
    fo_reap();
    fo_maintain();
    bool ok = fo_has_room(len);
    pthread_mutex_unlock(&fo.lock);
    return ok;
}

/* Number, keep and send one request to PE pe (data: a put's, copied). */
static void fo_send(int pe, struct xp_msg *m, const void *data)
{
    size_t len = data ? m->len : 0;
    pthread_mutex_lock(&fo.lock);
    if (!fo.e) {
        fo.cap = 4096;
        fo.e = calloc(fo.cap, sizeof *fo.e);
        fo.sent = calloc((size_t)shm.npes, sizeof *fo.sent);
        fo.free_slots = calloc(SHM_FO_POOL, sizeof *fo.free_slots);
        if (!fo.e || !fo.sent || !fo.free_slots)
            shm_fatal("out of memory");
        for (int i = SHM_FO_POOL - 1; i >= 0; i--)
            fo.free_slots[fo.nfree++] = i;
    }
    fo_reap();
    fo_maintain();
    while (!fo_has_room(len)) {
        pthread_mutex_unlock(&fo.lock);
        shm_wait_notify(fo_room, &len);
        pthread_mutex_lock(&fo.lock);
    }
    struct fo_ent *e = &fo.e[(fo.head + fo.n) % fo.cap];
    e->m = *m;
    e->m.sseq = ++fo.sent[pe];
    e->data = NULL;
    e->slot = -1;
    bool dma = len >= xp_dma_min && xp_dma_min;
    if (dma) {
        e->slot = fo.free_slots[--fo.nfree];
        e->data = (char *)shm.pes[shm.me].base + fo_pool_off(e->slot);
    } else if (len) {
        if (!(e->data = malloc(len)))
            shm_fatal("out of memory");
        fo.bytes += len;
    }
    if (len)
        memcpy(e->data, data, len);
    fo.n++;
    *m = e->m;
    fo_transmit(e, dma);
    pthread_mutex_unlock(&fo.lock);
}

/* From any wait about to sleep: resend if it is time (unless another thread is sending). */
void shm_xport_poll(void)
{
    if (pthread_mutex_trylock(&fo.lock))
        return;
    if (fo.e) {
        fo_reap();
        fo_maintain();
    }
    pthread_mutex_unlock(&fo.lock);
}

/* Wait until *word >= want, resending as above meanwhile. */
struct fo_wait {
    _Atomic uint64_t *word;
    uint64_t want;
};

static bool fo_reached(void *arg)
{
    struct fo_wait *w = arg;
    if (atomic_load_explicit(w->word, memory_order_acquire) >= w->want)
        return true;
    pthread_mutex_lock(&fo.lock);
    fo_maintain();
    pthread_mutex_unlock(&fo.lock);
    return atomic_load_explicit(w->word, memory_order_acquire) >= w->want;
}

static void fo_wait_u64(_Atomic uint64_t *word, uint64_t want)
{
    struct fo_wait w = { word, want };
    shm_wait_notify(fo_reached, &w);
}

static bool fo_all_acked(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&fo.lock);
    fo_reap();
    if (fo.n)
        fo_maintain();
    bool done = fo.n == 0;
    pthread_mutex_unlock(&fo.lock);
    return done;
}

static void fo_put(int pe, size_t off, const void *src, size_t len)
{
    for (size_t done = 0; done < len;) {
        size_t n = len - done < shm.chunk ? len - done : shm.chunk;
        struct xp_msg m = { .type = XP_PUT, .src_pe = (uint32_t)shm.me, .dst_pe = (uint32_t)pe,
                            .len = (uint32_t)n, .off = off + done };
        fo_send(pe, &m, (const char *)src + done);
        done += n;
    }
}

void shm_put(int pe, size_t off, const void *src, size_t len)
{
    if (!len)
        return;
    void *d = shm_direct(pe, off);
    if (d) {
        shm_copy(d, src, len, false);
        return;
    }
    if (shm.failover) {
        fo_put(pe, off, src, len);
        return;
    }
    int hop = first_hop(pe);
    struct xp_prod *p = &prods[hop];
    if (!p->link)
        shm_fatal("no connection to the node of host node %u", shm.hosts[hop].node);
    struct xp_sender *sd = &senders[hop];
    pthread_rwlock_rdlock(&issue_gate);
    pthread_mutex_lock(&p->lock);
    for (size_t done = 0; done < len;) {
        size_t n = len - done < shm.chunk ? len - done : shm.chunk;
        struct xp_msg m = { .type = XP_PUT, .src_pe = (uint32_t)shm.me, .dst_pe = (uint32_t)pe,
                            .len = (uint32_t)n, .off = off + done };
        struct xp_stamp st; /* SHMEM_PROFILE: the chunk's times (prof.h) */
        if (shm.profile)
            xp_stamp_start(&st);
        /* Chunks of at least SHMEM_DMA_MIN go by the adapter's DMA engine; smaller ones are
         * CPU stores into the slot, behind any chunk still on its way. */
        bool dma = xp_dma_min && n >= xp_dma_min && sender_ready(hop);
        if (dma)
            while (sd->fifo.n == SHM_PUT_STAGES)
                pthread_cond_wait(&sd->cond, &p->lock);
        wait_room(hop, !dma, n);
        if (shm.profile)
            xp_stamp_to(&st, SHM_ST_WAIT);
        atomic_fetch_add(&issued, 1);
        if (!dma) {
            xp_push_stamped(p, &m, (const char *)src + done, n, shm.profile ? &st : NULL);
        } else {
            /* The sender's fifo holds at most SHM_PUT_STAGES chunks, so the staging chunks of
             * those in flight are distinct. */
            uint64_t idx = xp_reserve(p, n, &m.lead), stage = sd->staged++;
            memcpy((char *)shm.pes[shm.me].base + stage_off(hop, stage), (const char *)src + done, n);
            int rc = seg_dma_transfer(pe_dmaq[hop].q, shm.local, stage_off(hop, stage), p->link->remote,
                                      xp_slot_off(p->ring, idx + m.lead), n, 0);
            if (rc == -ENOLINK)
                shm_path_lost(hop);
            if (rc)
                shm_fatal("cannot queue a DMA to the node of host node %u: %s",
                          shm.hosts[hop].node, seg_strerror(rc));
            struct xp_pend *e = xp_fifo_add(&sd->fifo);
            *e = (struct xp_pend){ .pos = stage, .idx = idx, .m = m };
            if (shm.profile) {
                xp_stamp_to(&st, SHM_ST_STAGE);
                e->st = st;
            }
            pthread_cond_broadcast(&sd->cond);
        }
        done += n;
    }
    pthread_mutex_unlock(&p->lock);
    pthread_rwlock_unlock(&issue_gate);
}

void shm_get(int pe, void *dst, size_t off, size_t len)
{
    if (!len)
        return;
    void *s = shm_direct(pe, off);
    if (s) {
        shm_copy(dst, s, len, true);
        return;
    }
    struct shm_ctrl *c = shm_ctrl_of(shm.me);
    char *rbuf = (char *)shm.pes[shm.me].base + shm.rbuf_off;
    int hop = shm.failover ? -1 : first_hop(pe);
    pthread_mutex_lock(&get_lock);
    /* Up to SHM_RBUF_SLOTS requests in flight, each with its own reply slot. */
    size_t nchunks = (len + shm.chunk - 1) / shm.chunk, sent = 0, recvd = 0;
    uint64_t first = get_seq + 1;
    while (recvd < nchunks) {
        while (sent < nchunks && sent - recvd < SHM_RBUF_SLOTS) {
            size_t o = sent * shm.chunk, n = len - o < shm.chunk ? len - o : shm.chunk;
            struct xp_msg m = { .type = XP_GET, .src_pe = (uint32_t)shm.me, .dst_pe = (uint32_t)pe,
                                .len = (uint32_t)n, .off = off + o,
                                .token = (uint32_t)(sent % SHM_RBUF_SLOTS), .seq = first + sent };
            if (shm.failover)
                fo_send(pe, &m, NULL);
            else
                send_msg(hop, &m, NULL, 0);
            sent++;
        }
        unsigned slot = (unsigned)(recvd % SHM_RBUF_SLOTS);
        if (shm.failover)
            fo_wait_u64(&c->rbuf_seq[slot], first + recvd);
        else
            shm_wait_u64(&c->rbuf_seq[slot], first + recvd);
        size_t o = recvd * shm.chunk, n = len - o < shm.chunk ? len - o : shm.chunk;
        memcpy((char *)dst + o, rbuf + (size_t)slot * shm.chunk, n);
        recvd++;
    }
    get_seq = first + nchunks - 1;
    pthread_mutex_unlock(&get_lock);
}

static uint64_t amo_local(void *p, unsigned op, unsigned size, uint64_t v, uint64_t cond)
{
    op &= 0x7f;
    if (size == 4) {
        _Atomic uint32_t *w = p;
        uint32_t x = (uint32_t)v, c = (uint32_t)cond;
        switch (op) {
        case SHM_AMO_FETCH: return atomic_load(w);
        case SHM_AMO_SET: atomic_store(w, x); return 0;
        case SHM_AMO_SWAP: return atomic_exchange(w, x);
        case SHM_AMO_CSWAP: atomic_compare_exchange_strong(w, &c, x); return c;
        case SHM_AMO_ADD: return atomic_fetch_add(w, x);
        case SHM_AMO_AND: return atomic_fetch_and(w, x);
        case SHM_AMO_OR: return atomic_fetch_or(w, x);
        case SHM_AMO_XOR: return atomic_fetch_xor(w, x);
        }
    } else {
        _Atomic uint64_t *w = p;
        uint64_t c = cond;
        switch (op) {
        case SHM_AMO_FETCH: return atomic_load(w);
        case SHM_AMO_SET: atomic_store(w, v); return 0;
        case SHM_AMO_SWAP: return atomic_exchange(w, v);
        case SHM_AMO_CSWAP: atomic_compare_exchange_strong(w, &c, v); return c;
        case SHM_AMO_ADD: return atomic_fetch_add(w, v);
        case SHM_AMO_AND: return atomic_fetch_and(w, v);
        case SHM_AMO_OR: return atomic_fetch_or(w, v);
        case SHM_AMO_XOR: return atomic_fetch_xor(w, v);
        }
    }
    shm_fatal("internal: AMO op %u", op);
}

/* Done at the memory: used by the nodes for software AMOs too. */
uint64_t shm_amo_at(void *p, unsigned op, unsigned size, uint64_t v, uint64_t cond)
{
    return amo_local(p, op, size, v, cond);
}

/* Only a sleeper needs notify bumped: a waiter counts itself in `sleeping` before its last
 * look at what it waits for, and we changed that (seq_cst) before looking at `sleeping`, so
 * either it sees our change or we see it and bump the word it is about to sleep on. (A
 * barrier's arrival changes it with a plain store, and its waiter fences for it: sync.c's
 * signal_store.) A PE that spins finds the line it waits on changed once, not twice. */
void shm_poke_direct(int pe)
{
    struct shm_ctrl *c = shm_ctrl_of(pe);
    if (atomic_load(&c->sleeping)) {
        atomic_fetch_add(&c->notify, 1);
        shm_futex_wake(&c->notify);
    }
}

uint64_t shm_amo(int pe, size_t off, unsigned op, unsigned size, uint64_t v, uint64_t cond)
{
    void *p = shm_direct(pe, off);
    bool remote_host = shm.pes[pe].host != shm.myhost;
    if (p && !(shm.sw_atomics && remote_host)) {
        uint64_t old = amo_local(p, op, size, v, cond);
        if (op & SHM_AMO_WAKE)
            shm_poke_direct(pe);
        return old;
    }
    /* Software path: the target host's node does it and replies with the old value. */
    int hop = shm.failover ? -1 : xp_next_hop(shm.myhost, shm.pes[pe].host);
    struct xp_msg m = { .type = XP_AMO, .op = (uint8_t)op, .size = (uint8_t)size,
                        .src_pe = (uint32_t)shm.me, .dst_pe = (uint32_t)pe, .off = off, .v = v,
                        .cond = cond };
    pthread_mutex_lock(&amo_lock);
    m.seq = ++amo_seq;
    struct shm_ctrl *c = shm_ctrl_of(shm.me);
    if (shm.failover) {
        fo_send(pe, &m, NULL);
        fo_wait_u64(&c->amo_seq, m.seq);
    } else {
        send_msg(hop, &m, NULL, 0);
        shm_wait_u64(&c->amo_seq, m.seq);
    }
    uint64_t old = c->amo_val;
    pthread_mutex_unlock(&amo_lock);
    return old;
}

void shm_quiet_all(void)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (shm.failover) {
        if (!fo_all_acked(NULL))
            shm_wait_notify(fo_all_acked, NULL);
        return;
    }
    if (!atomic_load(&issued))
        return;
    uint64_t q0 = shm.profile ? shm_now_ns() : 0;
    pthread_rwlock_wrlock(&issue_gate);
    shm_wait_u64(&shm_ctrl_of(shm.me)->acks, atomic_load(&issued));
    pthread_rwlock_unlock(&issue_gate);
    if (shm.profile)
        shm_prof_quiet(q0);
}
