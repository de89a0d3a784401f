/*
 * The node's transfer threads (relay_int.h): each serves its rings (drain), does the work of
 * each message (relay_handle), and carries large puts on by the adapter's DMA engine.
 *
 * Waiting costs more than working here: on a machine with more busy threads than CPUs a
 * futex wake-up of a sleeping thread takes tens of microseconds, and a relayed put used to
 * cross one more of them per node than it needed. So a transfer thread waits for its own DMA
 * while puts come one at a time (the DMA's end is work that is sure to come: the wait policy
 * spins briefly for it or for a new message, then sleeps on the DMA) and hands the put on
 * itself — a doorbell and a DMA completion per relayed put, nothing more. Only while puts
 * stream (one arrives while another's DMA is in flight, or soon after one ended) does its
 * completer thread take the DMAs over, so that the engine is given each chunk the moment it
 * arrives instead of when the transfer thread next wakes; once nothing is in flight the
 * completer gives them back.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "relay_int.h"

/* Hand a message's slots back: the ring's tail moves to `end`, the position after it. */
static void advance(struct xp_ring *ring, uint64_t end)
{
    atomic_store_explicit(&ring->tail, end, memory_order_release);
}

/* The positions the message at pos takes (1 for one that is not from this job's library), no
 * more than are published. */
static uint64_t span_at(const struct xp_msg *m, uint64_t pos, uint64_t head)
{
    uint64_t n = relay_msg_sane(m) ? xp_span(m, shm.chunk) : 1;
    return n > head - pos ? head - pos : n;
}

/* Hand on the oldest DMA in flight, which ended with rc: publish its message on (a forward) or
 * owe its ack (a delivery), and hand its slots back. With t->mu held. */
static void land(struct rthread *t, int rc)
{
    struct xp_pend *e = xp_fifo_first(&t->fifo);
    bool lost = false;
    if (rc == -ENOLINK && shm.failover && e->fwd) {
        /* The link to the next host went down: the message is dropped here and its source
         * sends it again the other way (it is routed around once the fabric says which link
         * it was). */
        xp_route_refresh(true);
        lost = true;
    } else if (rc == -ENOLINK) { /* the link to the next hop (or to the PE's host) went down */
        shm_path_lost(e->fwd ? e->fwd->link->host : shm.pes[e->m.dst_pe].host);
    } else if (rc) {
        shm_fatal("relay: DMA of a forwarded put failed: %s", seg_strerror(rc));
    }
    if (e->fwd && (lost || xp_link_dead(shm.myhost, e->fwd->link->host))) {
        ; /* not published: that ring is not used again */
    } else if (e->fwd) {
        if (t->psum) /* SHMEM_PROFILE: every put in flight has its stamp */
            xp_stamp_to(&e->st, SHM_ST_DMA);
        pthread_mutex_lock(&e->fwd->lock);
        if (t->psum)
            xp_stamp_put(e->fwd, e->idx, &e->st);
        xp_publish(e->fwd, e->idx, &e->m);
        pthread_mutex_unlock(&e->fwd->lock);
    } else {
        t->owed[e->m.src_pe]++;
        if (t->psum)
            xp_prof_delivered(&t->psum[e->m.src_pe], &e->st, e->m.len);
    }
    advance(xp_ring_at(relay_inbox, t->pring), e->pos);
    xp_fifo_pop(&t->fifo);
    t->landed_ns = wpol_now_ns();
    atomic_store(&t->inflight, t->fifo.n);
    wpol_wake(&t->gone, &t->gone_sl, true);
}

static bool completer_called(void *arg)
{
    struct rthread *t = arg;
    return (atomic_load(&t->inflight) && atomic_load(&t->helper)) || atomic_load(&relay_stop);
}

/* The completer of a transfer thread, while puts stream: waits for the oldest DMA in flight
 * and hands it on, and once none is left gives the work back (helper off) and pays the acks. */
static void *completer_thread(void *arg)
{
    struct rthread *t = arg;
    const struct wpol_how how = { .ready = completer_called, .arg = t, .word = &t->work,
                                  .sleepers = &t->work_sl, .private_futex = true,
                                  .sleep_ns = 100000000 };
    for (;;) {
        wpol_wait(&t->cwait, &how);
        pthread_mutex_lock(&t->mu);
        if (!t->fifo.n || !t->helper) {
            pthread_mutex_unlock(&t->mu);
            if (atomic_load(&relay_stop))
                break;
            continue;
        }
        seg_dma_queue_t *q = t->pdq->q;
        pthread_mutex_unlock(&t->mu);
        int rc = seg_dma_wait_first(q, -1);
        pthread_mutex_lock(&t->mu);
        land(t, rc);
        if (!t->fifo.n) {
            atomic_store(&t->helper, false);
            if (!relay_pay_acks(t))
                ntb_db_set(t->dev, t->bit); /* a reply ring is full: the transfer thread retries */
        }
        pthread_mutex_unlock(&t->mu);
    }
    return NULL;
}

/* Has the oldest DMA in flight ended? (Only the transfer thread, while it lands its own DMAs:
 * the look reaps it, so its status is kept for land.) */
static bool dma_landed(struct rthread *t)
{
    if (t->landed)
        return true;
    if (!t->fifo.n)
        return false;
    int rc = seg_dma_wait_first(t->pdq->q, 0);
    if (rc == -ETIMEDOUT)
        return false;
    t->landed = true;
    t->landed_rc = rc;
    return true;
}

static bool fifo_shorter(void *arg)
{
    struct rthread *t = arg;
    return !atomic_load(&t->inflight);
}

/* The transfer thread hands on the DMAs that have ended (all: waits for every one in flight;
 * messages are handled in order). How many. */
static int reap(struct rthread *t, bool all)
{
    int n = 0;
    pthread_mutex_lock(&t->mu);
    if (t->helper) { /* the completer's: only wait for it */
        pthread_mutex_unlock(&t->mu);
        if (all) {
            const struct wpol_how how = { .ready = fifo_shorter, .arg = t, .word = &t->gone,
                                          .sleepers = &t->gone_sl, .private_futex = true };
            wpol_wait(&t->fwait, &how);
        }
        return 0;
    }
    while (t->fifo.n) {
        if (!dma_landed(t)) {
            if (!all)
                break;
            seg_dma_queue_t *q = t->pdq->q;
            pthread_mutex_unlock(&t->mu);
            int rc = seg_dma_wait_first(q, -1); /* on the wait policy (ntb_dma_wait) */
            pthread_mutex_lock(&t->mu);
            t->landed = true;
            t->landed_rc = rc;
        }
        t->landed = false;
        land(t, t->landed_rc);
        n++;
    }
    pthread_mutex_unlock(&t->mu);
    return n;
}

static void flush(struct rthread *t) { reap(t, true); }

/* Puts stream through this thread: the completer lands the DMAs from now on. */
static void call_completer(struct rthread *t)
{
    if (!t->cstarted) {
        int rc = pthread_create(&t->ctid, NULL, completer_thread, t);
        if (rc)
            shm_fatal("relay: cannot start a completion thread: %s", strerror(rc));
        t->cstarted = true;
    }
    pthread_mutex_lock(&t->mu);
    if (t->fifo.n && !t->landed)
        atomic_store(&t->helper, true);
    pthread_mutex_unlock(&t->mu);
    wpol_wake(&t->work, &t->work_sl, true);
}

/* A put of at least SHMEM_DMA_MIN whose data can go by DMA: queued and left to the completer
 * (0), or -EAGAIN (no room ahead) / 1 (do it the ordinary way; nothing is in flight then).
 * The message is at pos of ring r; end is the position after it. */
static int start_dma(struct rthread *t, uint32_t r, uint64_t pos, uint64_t end, const struct xp_msg *m)
{
    if (!xp_dma_min || m->type != XP_PUT || m->len < xp_dma_min || !relay_msg_sane(m))
        return 1;
    int dst = (int)m->dst_pe;
    struct xp_prod *fwd = NULL;
    seg_remote_t *to;
    size_t roff = 0;
    int out;
    if (shm.pes[dst].base) {
        if (m->off + m->len > shm.seg_size)
            return 1;
        to = shm.pes[dst].remote;
        roff = m->off;
        out = shm.pes[dst].host == shm.myhost ? -1 : shm.hosts[shm.pes[dst].host].adapter;
    } else {
        if (shm.failover && xp_link_dead(shm.myhost, relay_onward(r)))
            return 1; /* dropped by handle */
        fwd = relay_next_prod(m, r);
        to = fwd->link->remote;
        out = shm.hosts[fwd->link->host].adapter;
    }
    if (out < 0 || !to)
        return 1; /* on our own host: a memcpy */
    struct xp_dmaq *dq = &t->dq[out];
    pthread_mutex_lock(&t->mu);
    bool other = t->fifo.n && t->pdq != dq;
    pthread_mutex_unlock(&t->mu);
    if (other)
        flush(t);
    if (!xp_dmaq_get(dq, shm.sd, out))
        return 1;
    uint64_t idx = 0;
    struct xp_msg out_m = *m; /* as it goes on: with its lead in the next ring */
    if (fwd) {
        pthread_mutex_lock(&fwd->lock);
        if (!xp_has_room(fwd, m->len)) { /* the next host is busy: try again shortly */
            pthread_mutex_unlock(&fwd->lock);
            return -EAGAIN;
        }
        idx = xp_reserve(fwd, m->len, &out_m.lead);
        pthread_mutex_unlock(&fwd->lock);
        roff = xp_slot_off(fwd->ring, idx + out_m.lead);
    }
    pthread_mutex_lock(&t->mu);
    int rc = seg_dma_transfer(dq->q, relay_inbox_seg, xp_slot_off(r, pos + m->lead), to, roff, m->len, 0);
    if (rc == -ENOLINK && shm.failover && fwd) {
        /* As in land: dropped, and that ring is not used again. */
        pthread_mutex_unlock(&t->mu);
        xp_route_refresh(true);
        flush(t);
        advance(xp_ring_at(relay_inbox, r), end);
        return 0;
    }
    if (rc == -ENOLINK)
        shm_path_lost(fwd ? fwd->link->host : shm.pes[dst].host);
    if (rc)
        shm_fatal("relay: cannot queue a DMA: %s", seg_strerror(rc));
    struct xp_pend *e = xp_fifo_add(&t->fifo);
    *e = (struct xp_pend){ .pos = end, .fwd = fwd, .idx = idx, .m = out_m };
    if (t->arrived) {
        xp_stamp_to(t->arrived, SHM_ST_RELAY);
        e->st = *t->arrived;
    }
    t->pdq = dq;
    t->pring = r;
    t->next_pos = end;
    /* Behind another in flight, or soon after the last ended: they stream. */
    t->stream = t->stream || t->fifo.n > 1 || wpol_now_ns() - t->landed_ns < RELAY_STREAM_NS;
    atomic_store(&t->inflight, t->fifo.n);
    bool helper = t->helper;
    pthread_mutex_unlock(&t->mu);
    if (helper)
        wpol_wake(&t->work, &t->work_sl, true);
    return 0;
}

/* Where ring r's next new message is: past what is in flight, else at its tail. */
static uint64_t next_new(struct rthread *t, uint32_t r, struct xp_ring *ring, bool *other)
{
    pthread_mutex_lock(&t->mu);
    *other = t->fifo.n && t->pring != r;
    uint64_t pos = t->fifo.n && t->pring == r ? t->next_pos
                                              : atomic_load_explicit(&ring->tail, memory_order_relaxed);
    pthread_mutex_unlock(&t->mu);
    return pos;
}

/* SHMEM_PROFILE: a put taken from ring r at pos, its stamp copied into *st: its doorbell
 * stage ends now, or when the thread first saw it if a full ring held it up since (that wait
 * is the node's: relay). */
static struct xp_stamp *arrive(struct rthread *t, struct xp_ring *ring, uint32_t r, uint64_t pos,
                               struct xp_stamp *st)
{
    uint64_t now = shm_now_ns();
    if (t->held && t->held_ring == r && t->held_pos == pos)
        now = t->held_ns;
    *st = ring->stamp[pos % XP_SLOTS];
    st->hops++;
    xp_stamp_at(st, SHM_ST_DOORBELL, now);
    return st;
}

/* The message at pos of ring r must wait for room ahead: remember when it arrived. */
static void hold(struct rthread *t, uint32_t r, uint64_t pos)
{
    if (!t->arrived)
        return;
    t->held = true;
    t->held_ring = r;
    t->held_pos = pos;
    t->held_ns = t->arrived->mark;
}

/* One pass over a thread's rings; how many messages were started or handled, and whether one
 * is stuck. DMAs may stay in flight after it, with the completer. */
static int drain(struct rthread *t, bool *stuck)
{
    int done = 0;
    struct xp_stamp st; /* SHMEM_PROFILE: the put being handled (t->arrived) */
    *stuck = false;
    for (int i = 0; i < t->nrings; i++) {
        uint32_t r = t->rings[i];
        struct xp_ring *ring = xp_ring_at(relay_inbox, r);
        bool other;
        uint64_t pos = next_new(t, r, ring, &other);
        if (pos == atomic_load_explicit(&ring->head, memory_order_acquire))
            continue; /* nothing new here (another ring's DMAs stay in flight) */
        if (other) {
            flush(t);
            pos = atomic_load_explicit(&ring->tail, memory_order_relaxed);
        }
        uint64_t head;
        while (pos < (head = atomic_load_explicit(&ring->head, memory_order_acquire))) {
            const struct xp_msg *m = &ring->msg[pos % XP_SLOTS];
            if (relay_held(r, m))
                break; /* SHMEM_RELAY_HOLD: until the link goes down */
            uint64_t end = pos + span_at(m, pos, head);
            t->arrived = t->psum && m->type == XP_PUT && relay_msg_sane(m) ? arrive(t, ring, r, pos, &st)
                                                                            : NULL;
            int rc = start_dma(t, r, pos, end, m);
            if (rc == 0) {
                pos = end;
                done++;
                continue;
            }
            if (rc < 0) {
                hold(t, r, pos);
                *stuck = true;
                break;
            }
            flush(t); /* in order: what is in flight goes first */
            pthread_mutex_lock(&t->mu);
            rc = relay_handle(t, m, xp_slot_data(relay_inbox, relay_nrings, shm.chunk, r, pos + m->lead), r);
            pthread_mutex_unlock(&t->mu);
            if (rc) {
                hold(t, r, pos);
                *stuck = true;
                break;
            }
            advance(ring, end);
            pos = end;
            done++;
        }
        /* A ring whose next message must wait does not hold up the thread's other rings. */
    }
    pthread_mutex_lock(&t->mu);
    if (!relay_pay_acks(t))
        *stuck = true;
    pthread_mutex_unlock(&t->mu);
    return done;
}

/* A producer streaming small messages has the next one ready within microseconds, one
 * streaming large ones (a 256 KiB put takes 44 us at 6 GB/s) has not, and polling through its
 * gaps takes the CPU the DMA engines need: the wait policy learns which (per thread), spinning
 * up to RELAY_POLL_NS, then sleeping on the doorbell bit, whose ring ends the wait. The same
 * while our own DMA is in flight (its end is work that is sure to come), sleeping on the DMA
 * then, for at most RELAY_DMA_NAP_MS between looks at the rings. A message whose next ring is
 * full waits by naps (the next node frees room without a word), at most RELAY_FULL_NAP_NS. */
#define RELAY_POLL_NS 20000u
#define RELAY_DMA_NAP_MS 1
#define RELAY_FULL_NAP_NS 100000u

static bool any_new(void *arg)
{
    struct rthread *t = arg;
    bool other, busy = false;
    for (int k = 0; k < t->nrings && !busy; k++)
        busy = next_new(t, t->rings[k], xp_ring_at(relay_inbox, t->rings[k]), &other) <
                   atomic_load(&xp_ring_at(relay_inbox, t->rings[k])->head) &&
               !relay_held(t->rings[k], NULL);
    return busy;
}

static int bell_wait(void *arg, uint64_t max_ns)
{
    struct rthread *t = arg;
    return ntb_db_vector_wait(t->dev, t->bit, (int)(max_ns / 1000000u) + 1) > 0 ? -EINTR : 0;
}

static bool landed_or_new(void *arg)
{
    struct rthread *t = arg;
    return dma_landed(t) || any_new(t);
}

static int dma_sleep(void *arg, uint64_t max_ns)
{
    struct rthread *t = arg;
    if (dma_landed(t))
        return -EINTR;
    int rc = seg_dma_wait_first(t->pdq->q, (int)(max_ns / 1000000u));
    if (rc == -ETIMEDOUT)
        return 0;
    t->landed = true;
    t->landed_rc = rc;
    return -EINTR;
}

void *relay_transfer_thread(void *arg)
{
    struct rthread *t = arg;
    const struct wpol_how idle = { .ready = any_new, .arg = t, .sleep = bell_wait,
                                   .sleep_ns = 100000000 };
    const struct wpol_how busy = { .ready = landed_or_new, .arg = t, .sleep = dma_sleep,
                                   .sleep_ns = RELAY_DMA_NAP_MS * 1000000u };
    const struct wpol_how full = { .sleep_ns = RELAY_FULL_NAP_NS };
    struct wpol fw;
    bool full_wait = false;
    while (!atomic_load(&relay_stop)) {
        xp_route_refresh(false);
        ntb_db_clear(t->dev, t->bit);
        bool stuck;
        int done = reap(t, false);
        done += drain(t, &stuck);
        if (stuck) { /* the next host is busy: try again shortly */
            if (!full_wait)
                wpol_begin(&fw, &t->full_wait, &full);
            full_wait = true;
            if (!done)
                wpol_pause(&fw, 0);
            continue;
        }
        if (full_wait)
            wpol_end(&fw);
        full_wait = false;
        if (t->stream && atomic_load(&t->inflight) && !atomic_load(&t->helper))
            call_completer(t);
        t->stream = false;
        if (done)
            continue;
        if (!atomic_load(&t->inflight) || atomic_load(&t->helper)) {
            wpol_wait(&t->wait, &idle);
            continue;
        }
        /* Our own DMA in flight. A message of its ring that came meanwhile says they stream:
         * the completer takes the DMAs over once the next is queued. */
        wpol_wait(&t->dma_wait, &busy);
        pthread_mutex_lock(&t->mu);
        t->stream = t->fifo.n && t->next_pos < atomic_load(&xp_ring_at(relay_inbox, t->pring)->head);
        pthread_mutex_unlock(&t->mu);
    }
    if (full_wait)
        wpol_end(&fw);
    reap(t, true);
    pthread_mutex_lock(&t->mu);
    relay_pay_acks(t);
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

void relay_thread_init(struct rthread *x)
{
    x->wait = (struct wpol_site)WPOL_SITE("shmem relay transfer", RELAY_POLL_NS, 0);
    x->dma_wait = (struct wpol_site)WPOL_SITE("shmem relay: own DMA", RELAY_POLL_NS, 0);
    x->full_wait = (struct wpol_site)WPOL_SITE("shmem relay: next ring full", RELAY_POLL_NS, 0);
    x->cwait = (struct wpol_site)WPOL_SITE("shmem relay completer", RELAY_POLL_NS, 0);
    x->fwait = (struct wpol_site)WPOL_SITE("shmem relay: DMAs handed on", RELAY_POLL_NS, 0);
    pthread_mutex_init(&x->mu, NULL);
}

void relay_thread_fini(struct rthread *x)
{
    wpol_site_done(&x->wait);
    wpol_site_done(&x->dma_wait);
    wpol_site_done(&x->full_wait);
    wpol_site_done(&x->cwait);
    wpol_site_done(&x->fwait);
}

void relay_thread_join(struct rthread *t)
{
    if (!t->cstarted)
        return;
    wpol_wake(&t->work, &t->work_sl, true); /* nothing is in flight any more: it ends */
    pthread_join(t->ctid, NULL);
}
