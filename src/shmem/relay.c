/*
 * The node of a host in a routed job (xport.h): oshrun starts it as `oshrelay` on every host
 * of the fabric; it stays only where the job needs it (every host of a switchless ring, or,
 * with SHMEM_ATOMICS=software, every host with PEs) and is ended by oshrun after the PEs.
 *
 * It creates the host's inbox, maps the segments of the PEs on its own host and on the hosts
 * its adapters reach, connects to the neighbours' inboxes, and runs SHMEM_RING_THREADS
 * transfer threads per adapter. Thread t of an adapter consumes the rings whose messages
 * arrive through that adapter and whose doorbell bit is t; it sleeps on that bit (a
 * per-vector interrupt) when they are empty. For each message it either does the work, when
 * the PE concerned is mapped here (a put's data into a neighbour's heap, a get's data read
 * from it, an AMO in place — with SHMEM_ATOMICS=software only on the target's own host — a
 * reply into the PE's control page), or passes it on to the next host's inbox in the same
 * ring. Puts of at least SHMEM_DMA_MIN go on by the adapter's DMA engine (relay_thread.c);
 * acks are sent in batches, one message per source. Work that produces a reply first reserves
 * room for it, so an AMO is never done twice; a message whose next ring is full stays where it
 * is and the thread serves its other rings meanwhile. This file: the node's setup, the work
 * each message asks for, failover's bookkeeping (and SHMEM_RELAY_HOLD, a test's congested
 * ring); relay_thread.c: the transfer threads.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "relay_int.h"

void *relay_inbox;
seg_local_t *relay_inbox_seg;
uint32_t relay_nrings;
static struct xp_link *nlinks;  /* by host: neighbours' inboxes */
static struct xp_prod *nprods;  /* [host * nrings + ring] */
_Atomic bool relay_stop;

/* Failover (SHMEM_RING_FAILOVER): this node applies the requests to its own host's PEs, each
 * (source, target) stream's numbers once and in order, and delivers the replies to them; under
 * fo_mu, as both adapters' threads do it. By [src * npes + dst]: the last number applied, the
 * last AMO's number and old value (a resent AMO gets the same answer), an acknowledgement due. */
static pthread_mutex_t fo_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t *fo_applied, *fo_amo_seq, *fo_amo_val;
static uint8_t *fo_ackdue;
static bool fo_any_due;

static struct xp_prod *prod_for(int host, uint32_t ring)
{
    struct xp_prod *p = &nprods[(size_t)host * relay_nrings + ring];
    return p->link ? p : NULL;
}

/* Failover: a reply to a PE of this host; a late copy of one (sent again) changes nothing. */
static void fo_apply_reply(const struct xp_msg *m, const void *data)
{
    int pe = (int)m->dst_pe;
    struct shm_ctrl *c = shm_ctrl_of(pe);
    _Atomic uint64_t *acked = (_Atomic uint64_t *)((char *)shm.pes[pe].base + shm_fo_acks_off());
    pthread_mutex_lock(&fo_mu);
    uint64_t done = m->type == XP_ACK ? m->v : m->sseq;
    switch (m->type) {
    case XP_GET_DATA:
        if (atomic_load(&c->rbuf_seq[m->token]) < m->seq) {
            memcpy((char *)shm.pes[pe].base + shm.rbuf_off + (size_t)m->token * shm.chunk, data, m->len);
            atomic_store_explicit(&c->rbuf_seq[m->token], m->seq, memory_order_release);
        }
        break;
    case XP_AMO_VAL:
        if (atomic_load(&c->amo_seq) < m->seq) {
            c->amo_val = m->v;
            atomic_store_explicit(&c->amo_seq, m->seq, memory_order_release);
        }
        break;
    }
    if (atomic_load(&acked[m->src_pe]) < done)
        atomic_store_explicit(&acked[m->src_pe], done, memory_order_release);
    pthread_mutex_unlock(&fo_mu);
    shm_poke_direct(pe);
}

/* Apply a reply to a PE mapped here. */
static void apply_reply(const struct xp_msg *m, const void *data)
{
    int pe = (int)m->dst_pe;
    struct shm_ctrl *c = shm_ctrl_of(pe);
    if (shm.failover) {
        fo_apply_reply(m, data);
        return;
    }
    switch (m->type) {
    case XP_ACK:
        if (m->len == sizeof(struct xp_prof_sums) && data) /* SHMEM_PROFILE: before the count */
            shm_prof_ack(c, data);
        atomic_fetch_add(&c->acks, m->v);
        break;
    case XP_GET_DATA:
        memcpy((char *)shm.pes[pe].base + shm.rbuf_off + (size_t)m->token * shm.chunk, data, m->len);
        atomic_store_explicit(&c->rbuf_seq[m->token], m->seq, memory_order_release);
        break;
    case XP_AMO_VAL:
        c->amo_val = m->v;
        atomic_store_explicit(&c->amo_seq, m->seq, memory_order_release);
        break;
    }
    shm_poke_direct(pe);
}

/* Room for a reply of ours to PE pe: NULL with 0 when pe is mapped here (the reply is applied
 * directly), else the locked producer; -EAGAIN when its ring is full. */
static int reply_begin(int pe, size_t dlen, struct xp_prod **pp)
{
    *pp = NULL;
    if (shm.pes[pe].base)
        return 0;
    if (shm.failover)
        xp_route_refresh(false);
    int h = xp_next_hop(shm.myhost, shm.pes[pe].host);
    struct xp_prod *p = h >= 0 ? prod_for(h, xp_ring_of((uint32_t)shm.npes + (uint32_t)shm.myhost,
                                                        shm.myhost, h)) : NULL;
    if (!p)
        shm_fatal("relay: no way to host node %u", shm.hosts[shm.pes[pe].host].node);
    pthread_mutex_lock(&p->lock);
    if (!xp_has_room(p, dlen)) {
        pthread_mutex_unlock(&p->lock);
        return -EAGAIN;
    }
    *pp = p;
    return 0;
}

static void reply_end(struct xp_prod *p, struct xp_msg *rm, const void *data)
{
    rm->origin = (uint32_t)shm.myhost;
    if (!p) {
        apply_reply(rm, data);
        return;
    }
    xp_push(p, rm, data, xp_data_len(rm));
    pthread_mutex_unlock(&p->lock);
}

/* Failover: send the acknowledgements due (the last number applied, by stream). false if
 * some must wait. */
static bool fo_pay_acks(void)
{
    bool all = true;
    pthread_mutex_lock(&fo_mu);
    if (fo_any_due) {
        fo_any_due = false;
        for (size_t i = 0; i < (size_t)shm.npes * (size_t)shm.npes; i++) {
            if (!fo_ackdue[i])
                continue;
            int src = (int)(i / (size_t)shm.npes), dst = (int)(i % (size_t)shm.npes);
            struct xp_prod *p;
            if (reply_begin(src, 0, &p)) {
                all = false;
                fo_any_due = true;
                continue;
            }
            struct xp_msg rm = { .type = XP_ACK, .src_pe = (uint32_t)dst, .dst_pe = (uint32_t)src,
                                 .v = fo_applied[i] };
            fo_ackdue[i] = 0;
            reply_end(p, &rm, NULL); /* p is not NULL: src is on another host (fo_perform) */
        }
    }
    pthread_mutex_unlock(&fo_mu);
    return all;
}

/* Send the acks we owe (batched: one message per source), with t->mu held. false if some
 * must wait. */
bool relay_pay_acks(struct rthread *t)
{
    if (shm.failover)
        return fo_pay_acks();
    bool all = true;
    for (int pe = 0; pe < shm.npes; pe++) {
        if (!t->owed[pe])
            continue;
        struct xp_prod *p;
        /* SHMEM_PROFILE: the delivered puts' times go with their ack. */
        struct xp_prof_sums *sum = t->psum && t->psum[pe].chunks ? &t->psum[pe] : NULL;
        uint32_t dlen = sum ? (uint32_t)sizeof *sum : 0;
        if (reply_begin(pe, dlen, &p)) {
            all = false;
            continue;
        }
        struct xp_msg rm = { .type = XP_ACK, .src_pe = (uint32_t)pe, .dst_pe = (uint32_t)pe,
                             .len = dlen, .v = t->owed[pe] };
        t->owed[pe] = 0;
        reply_end(p, &rm, sum);
        if (sum)
            memset(sum, 0, sizeof *sum);
    }
    return all;
}

static int side_host[2]; /* failover: our neighbours, by the side of ours they are on */

/* Failover: the host a message in ring r goes on to (away from the side it came from). */
int relay_onward(uint32_t ring)
{
    return side_host[1 - ring / ((uint32_t)shm.npes + (uint32_t)shm.nhosts)];
}

struct xp_prod *relay_next_prod(const struct xp_msg *m, uint32_t ring)
{
    int h = shm.failover ? relay_onward(ring) : xp_next_hop(shm.myhost, shm.pes[m->dst_pe].host);
    struct xp_prod *p = prod_for(h, ring);
    if (!p)
        shm_fatal("relay: no way to host node %u", shm.hosts[h].node);
    return p;
}

/* Pass a message on to the next host's inbox (st: a put's stamp, SHMEM_PROFILE). */
static int forward(const struct xp_msg *m, const void *data, uint32_t ring, struct xp_stamp *st)
{
    /* Failover: not across a link that is down; its source sends it again the other way. */
    if (shm.failover && xp_link_dead(shm.myhost, relay_onward(ring)))
        return 0;
    struct xp_prod *p = relay_next_prod(m, ring);
    pthread_mutex_lock(&p->lock);
    if (!xp_has_room(p, xp_data_len(m))) {
        pthread_mutex_unlock(&p->lock);
        return -EAGAIN;
    }
    if (st)
        xp_stamp_to(st, SHM_ST_RELAY);
    xp_push_stamped(p, m, data, xp_data_len(m), st);
    pthread_mutex_unlock(&p->lock);
    return 0;
}

bool relay_msg_sane(const struct xp_msg *m)
{
    return m->dst_pe < (uint32_t)shm.npes && m->src_pe < (uint32_t)shm.npes &&
           m->len <= shm.chunk && m->lead < XP_SLOTS;
}

/* Failover: a request for a PE of this host, applied if it is the next of its stream (one
 * that came early is dropped: its source sends the ones before it again first); one applied
 * before is acknowledged again, or answered again (a get re-read, an AMO's old value kept). */
static int fo_perform(const struct xp_msg *m, const void *data)
{
    int dst = (int)m->dst_pe, src = (int)m->src_pe;
    if (shm.pes[src].host == shm.myhost)
        return 0; /* PEs of one host map each other: not a message */
    size_t i = (size_t)src * (size_t)shm.npes + (size_t)dst;
    char *base = shm.pes[dst].base;
    pthread_mutex_lock(&fo_mu);
    uint64_t applied = fo_applied[i];
    bool fresh = m->sseq == applied + 1;
    int rc = 0;
    if (m->type == XP_PUT) {
        if (fresh) {
            if (m->off + m->len <= shm.seg_size)
                memcpy(base + m->off, data, m->len);
            fo_applied[i] = m->sseq;
        }
        if (m->sseq <= fo_applied[i]) {
            fo_ackdue[i] = 1;
            fo_any_due = true;
        }
    } else if (m->type == XP_GET || m->type == XP_AMO) {
        bool again = m->type == XP_GET ? m->sseq <= applied : m->sseq == fo_amo_seq[i] && m->sseq <= applied;
        struct xp_prod *p;
        if (!fresh && !again) {
            ;
        } else if (reply_begin(src, m->type == XP_GET ? m->len : 0, &p)) {
            rc = -EAGAIN;
        } else {
            struct xp_msg rm = { .src_pe = (uint32_t)dst, .dst_pe = (uint32_t)src, .seq = m->seq,
                                 .sseq = m->sseq };
            const void *rdata = NULL;
            if (m->type == XP_GET) {
                rm.type = XP_GET_DATA;
                rm.token = m->token;
                if (m->off + m->len <= shm.seg_size && m->token < SHM_RBUF_SLOTS) {
                    rm.len = m->len;
                    rdata = base + m->off;
                }
            } else {
                rm.type = XP_AMO_VAL;
                if (fresh && m->off + m->size <= shm.seg_size && (m->size == 4 || m->size == 8) &&
                    m->off % m->size == 0) {
                    fo_amo_val[i] = shm_amo_at(base + m->off, m->op, m->size, m->v, m->cond);
                    if (m->op & SHM_AMO_WAKE)
                        shm_poke_direct(dst);
                }
                if (fresh)
                    fo_amo_seq[i] = m->sseq;
                rm.v = fo_amo_val[i];
            }
            if (fresh)
                fo_applied[i] = m->sseq;
            reply_end(p, &rm, rdata);
        }
    }
    pthread_mutex_unlock(&fo_mu);
    return rc;
}

/* SHMEM_RELAY_HOLD=S:T, for tests (test_shmem_failover.sh): this node (PE T's host) leaves the
 * ring of PE S's requests that come straight from S's host (a neighbour) unread from S's
 * first put of a whole chunk on, as a node too busy to take them would, so that S fills the
 * ring and waits for room; it says so on stderr once the ring is full. The hold ends when the
 * link between the two hosts is found down: a PE waiting for room across a link that goes
 * down must then go the other way round. */
static uint32_t hold_ring = UINT32_MAX;
static int hold_pe, hold_host;
static bool hold_on, hold_told, hold_over; /* only the thread that consumes hold_ring */

static void hold_init(void)
{
    const char *v = shm_env_text(SHM_ENV_RELAY_HOLD);
    if (!v)
        return;
    int s, t, end = 0;
    if (sscanf(v, "%d:%d%n", &s, &t, &end) != 2 || v[end] || s < 0 || t < 0 || s >= shm.npes ||
        t >= shm.npes)
        shm_fatal("SHMEM_RELAY_HOLD=\"%s\": give S:T, two PEs of the job (0-%d) on neighbouring "
                  "hosts", v, shm.npes - 1);
    int hs = shm.pes[s].host, ht = shm.pes[t].host;
    if (!shm.failover)
        shm_fatal("SHMEM_RELAY_HOLD needs SHMEM_RING_FAILOVER=on on a ring (only a link going "
                  "down ends the hold)");
    if (hs == ht || xp_next_hop(hs, ht) != ht)
        shm_fatal("SHMEM_RELAY_HOLD=%s: PEs %d and %d are not on neighbouring hosts of the ring",
                  v, s, t);
    if (ht != shm.myhost)
        return;
    hold_pe = s;
    hold_host = hs;
    hold_ring = xp_ring_of((uint32_t)s, hs, ht);
}

bool relay_held(uint32_t r, const struct xp_msg *m)
{
    if (r != hold_ring || hold_over)
        return false;
    xp_route_refresh(false);
    if (xp_link_dead(shm.myhost, hold_host)) {
        hold_over = true; /* for good: the ring is not written again */
        return false;
    }
    if (!hold_on && m && m->type == XP_PUT && m->len == shm.chunk && relay_msg_sane(m))
        hold_on = true;
    /* Full: no room for one more whole chunk, as the sender counts it (xp_fits), once
     * everything reserved is published. */
    struct xp_ring *ring = xp_ring_at(relay_inbox, r);
    if (hold_on && !hold_told &&
        !xp_fits(atomic_load(&ring->head), atomic_load(&ring->tail), shm.chunk)) {
        char name[64];
        if (ntb_node_name(shm.hosts[hold_host].node, name, sizeof name))
            snprintf(name, sizeof name, "node %u", shm.hosts[hold_host].node);
        fprintf(stderr, "shmem: relay: SHMEM_RELAY_HOLD: the ring of PE %d's requests from host "
                "%s is full\n", hold_pe, name);
        hold_told = true;
    }
    return hold_on;
}

int relay_handle(struct rthread *t, const struct xp_msg *m, const void *data, uint32_t ring)
{
    if (!relay_msg_sane(m))
        return 0; /* not from this job's library: dropped */
    if (shm.failover) {
        if (shm.pes[m->dst_pe].host != shm.myhost)
            return forward(m, data, ring, NULL);
        if (xp_is_reply(m->type)) {
            apply_reply(m, data);
            return 0;
        }
        return fo_perform(m, data);
    }
    int dst = (int)m->dst_pe, src = (int)m->src_pe;
    char *base = shm.pes[dst].base;
    struct xp_prod *p;
    struct xp_msg rm = { .src_pe = (uint32_t)dst, .dst_pe = (uint32_t)src };
    if (xp_is_reply(m->type))
        return base ? (apply_reply(m, data), 0) : forward(m, data, ring, NULL);
    switch (m->type) {
    case XP_PUT:
        if (!base)
            return forward(m, data, ring, t->arrived);
        if (m->off + m->len <= shm.seg_size) {
            if (dst == shm.relay_slow_pe) { /* SHMEM_RELAY_SLOW_PE, for tests */
                struct timespec ts = { 0, 2000000 };
                nanosleep(&ts, NULL);
            }
            if (t->arrived)
                xp_stamp_to(t->arrived, SHM_ST_RELAY);
            memcpy(base + m->off, data, m->len);
            t->owed[src]++;
            if (t->arrived)
                xp_prof_delivered(&t->psum[src], t->arrived, m->len);
        }
        return 0;
    case XP_GET:
        if (!base)
            return forward(m, data, ring, NULL);
        if (m->off + m->len > shm.seg_size || m->token >= SHM_RBUF_SLOTS)
            return 0;
        if (reply_begin(src, m->len, &p))
            return -EAGAIN;
        rm.type = XP_GET_DATA;
        rm.len = m->len;
        rm.token = m->token;
        rm.seq = m->seq;
        reply_end(p, &rm, base + m->off);
        return 0;
    case XP_AMO:
        /* In place through our window when the target's host is ours or a neighbour (PCIe
         * AtomicOps on that link), unless software AMOs are asked for: then only its own
         * host's node does it. */
        if (!base || (shm.sw_atomics && shm.pes[dst].host != shm.myhost))
            return forward(m, data, ring, NULL);
        if (m->off + m->size > shm.seg_size || (m->size != 4 && m->size != 8) || (m->off % m->size))
            return 0;
        if (reply_begin(src, 0, &p))
            return -EAGAIN;
        rm.type = XP_AMO_VAL;
        rm.seq = m->seq;
        rm.v = shm_amo_at(base + m->off, m->op, m->size, m->v, m->cond);
        if (m->op & SHM_AMO_WAKE)
            shm_poke_direct(dst);
        reply_end(p, &rm, NULL);
        return 0;
    }
    return 0;
}

static uint32_t seg_id_of(uint32_t job, int pe)
{
    return 0x40000000u | ((job & 0x3ffffu) << 12) | (uint32_t)pe;
}

int shmemi_relay_main(void)
{
    uint32_t self;
    shm_job_env(&self, true);
    struct shm_host *mine = &shm.hosts[shm.myhost];
    bool needed = shm.routed ? mine->ring_pos >= 0 : (shm.sw_atomics && shm.nhosts > 1 && mine->first_pe >= 0);
    if (!needed) {
        shm_debug("relay on node %u: not needed by this job", self);
        return 0;
    }
    relay_nrings = xp_nrings();
    size_t size = xp_inbox_size(relay_nrings, shm.chunk);
    seg_local_t *local;
    int rc = seg_create(shm.sd, &local, xp_inbox_id(shm.job, self), size);
    relay_inbox_seg = local;
    if (rc)
        shm_fatal("relay: cannot create the inbox (%zu bytes) on node %u: %s", size, self,
                  seg_strerror(rc));
    seg_map_t *lmap;
    relay_inbox = seg_map_local(local, 0, 0, 0, &lmap);
    if (!relay_inbox)
        shm_fatal("relay: cannot map the inbox: %s", seg_strerror(-errno));
    memset(relay_inbox, 0, xp_data_off(relay_nrings));
    struct xp_inbox *hdr = relay_inbox;
    hdr->nrings = relay_nrings;
    hdr->slots = XP_SLOTS;
    hdr->chunk = shm.chunk;
    hdr->data_off = xp_data_off(relay_nrings);
    atomic_store(&hdr->magic, XP_MAGIC);
    int nad = ntb_adapter_count();
    for (int a = 0; a < nad; a++)
        if ((rc = seg_prepare(local, a)) || (rc = seg_set_available(local, a)))
            shm_fatal("relay: cannot export the inbox on adapter %d: %s", a, seg_strerror(rc));

    /* The PEs' segments on this host and on the hosts our adapters reach. */
    for (int pe = 0; pe < shm.npes; pe++) {
        struct shm_pe *p = &shm.pes[pe];
        int ad = p->host == shm.myhost ? 0 : shm.hosts[p->host].adapter;
        if (ad < 0 || (shm.failover && p->host != shm.myhost))
            continue;
        rc = shm_connect(shm.sd, &p->remote, p->node, seg_id_of(shm.job, pe), ad);
        if (rc)
            shm_fatal("relay: cannot connect to PE %d's segment on node %u: %s%s", pe, p->node,
                      seg_strerror(rc),
                      rc == -ENOSPC ? "; a smaller SHMEM_SYMMETRIC_SIZE needs fewer LUT entries" : "");
        /* Its size includes the program's globals, which only the PEs know. */
        if (shm.seg_size == shm.globals_off)
            shm.seg_size = seg_remote_size(p->remote);
        if (seg_remote_size(p->remote) != shm.seg_size || shm.seg_size < shm.globals_off)
            shm_fatal("relay: PE %d's segment has another size: give every PE the same "
                      "program, SHMEM_SYMMETRIC_SIZE and SHMEM_RING_CHUNK", pe);
        if (!(p->base = seg_map_remote(p->remote, 0, 0, 0, &p->map)))
            shm_fatal("relay: cannot map PE %d's segment: %s", pe, seg_strerror(-errno));
    }
    /* The neighbours' inboxes, to pass messages on (only a ring forwards). */
    nlinks = calloc((size_t)shm.nhosts, sizeof *nlinks);
    nprods = calloc((size_t)shm.nhosts * relay_nrings, sizeof *nprods);
    if (!nlinks || !nprods)
        shm_fatal("out of memory");
    for (int h = 0; h < shm.nhosts; h++) {
        if (h == shm.myhost || shm.hosts[h].adapter < 0 || !shm.routed)
            continue;
        if ((rc = xp_link_open(&nlinks[h], shm.sd, h)))
            shm_fatal("relay: cannot reach the node of host node %u: %s%s", shm.hosts[h].node,
                      seg_strerror(rc),
                      rc == -ENOSPC ? "; a smaller SHMEM_RING_CHUNK or SHMEM_SYMMETRIC_SIZE needs "
                                      "fewer LUT entries" : "");
        for (uint32_t r = 0; r < relay_nrings; r++) {
            struct xp_prod *p = &nprods[(size_t)h * relay_nrings + r];
            p->link = &nlinks[h];
            p->ring = r;
            pthread_mutex_init(&p->lock, NULL);
        }
    }

    if (shm.failover) {
        for (int h = 0; h < shm.nhosts; h++)
            if (h != shm.myhost && shm.hosts[h].adapter >= 0)
                side_host[xp_ring_side(h, shm.myhost)] = h;
        size_t n = (size_t)shm.npes * (size_t)shm.npes;
        fo_applied = calloc(n, sizeof *fo_applied);
        fo_amo_seq = calloc(n, sizeof *fo_amo_seq);
        fo_amo_val = calloc(n, sizeof *fo_amo_val);
        fo_ackdue = calloc(n, 1);
        if (!fo_applied || !fo_amo_seq || !fo_amo_val || !fo_ackdue)
            shm_fatal("out of memory");
    }
    hold_init();

    /* Transfer threads: per adapter that faces a host of the job, SHMEM_RING_THREADS. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    int nthreads = nad * shm.threads;
    struct rthread *th = calloc((size_t)nthreads, sizeof *th);
    if (!th)
        shm_fatal("out of memory");
    int started = 0;
    for (int a = 0; a < nad; a++) {
        for (int t = 0; t < shm.threads; t++) {
            struct rthread *x = &th[a * shm.threads + t];
            x->bit = UINT64_C(1) << t;
            relay_thread_init(x);
            x->rings = calloc(relay_nrings, sizeof *x->rings);
            x->owed = calloc((size_t)shm.npes, sizeof *x->owed);
            x->dq = calloc((size_t)nad, sizeof *x->dq);
            if (shm.profile && !shm.failover && !(x->psum = calloc((size_t)shm.npes, sizeof *x->psum)))
                shm_fatal("out of memory");
            if (!x->rings || !x->owed || !x->dq)
                shm_fatal("out of memory");
            uint32_t nb = (uint32_t)(shm.npes + shm.nhosts);
            for (uint32_t r = 0; r < relay_nrings; r++) {
                uint32_t b = r % nb;
                int from = b < (uint32_t)shm.npes ? shm.pes[b].host : (int)(b - (uint32_t)shm.npes);
                if (from == shm.myhost || (r % (uint32_t)shm.threads) != (uint32_t)t)
                    continue;
                if (!shm.routed && !xp_direct(from, shm.myhost))
                    continue;
                /* Failover: the ring's side says which neighbour writes it. */
                int prev = shm.failover ? side_host[r / nb] : xp_prev_hop(from, shm.myhost);
                if (shm.hosts[prev].adapter == a)
                    x->rings[x->nrings++] = r;
            }
            if (!x->nrings)
                continue;
            if (!(x->dev = ntb_open(a)))
                shm_fatal("relay: cannot open adapter %d: %s", a, strerror(errno));
            if ((rc = pthread_create(&x->tid, NULL, relay_transfer_thread, x)))
                shm_fatal("relay: cannot start a transfer thread: %s", strerror(rc));
            started++;
        }
    }
    shm_debug("relay on node %u: %d transfer threads, %u rings of %u slots of %zu bytes (chunk %zu)",
              self, started, relay_nrings, XP_SLOTS, xp_slot_size(shm.chunk), shm.chunk);

    /* Until oshrun ends us (or goes away itself). */
    pid_t launcher = (pid_t)shm_env_num(SHM_ENV_LAUNCHER_PID, 0);
    for (;;) {
        struct timespec ts = { 0, 200 * 1000000L };
        int sig = sigtimedwait(&sigs, NULL, &ts);
        if (sig > 0)
            break;
        xp_route_refresh(false);
        if (launcher > 0 && kill(launcher, 0) && errno == ESRCH)
            break;
    }
    atomic_store(&relay_stop, true);
    for (int i = 0; i < nthreads; i++)
        if (th[i].dev) {
            ntb_db_set(th[i].dev, th[i].bit); /* wake it */
            pthread_join(th[i].tid, NULL);
            relay_thread_join(&th[i]);
            ntb_close(th[i].dev);
            for (int a = 0; a < nad; a++)
                xp_dmaq_put(&th[i].dq[a]);
        }
    for (int i = 0; i < nthreads; i++) {
        relay_thread_fini(&th[i]);
        free(th[i].rings);
        free(th[i].owed);
        free(th[i].dq);
        free(th[i].psum);
    }
    free(th);
    for (int h = 0; h < shm.nhosts; h++)
        if (nlinks[h].remote)
            xp_link_close(&nlinks[h]);
    for (int pe = 0; pe < shm.npes; pe++) {
        if (shm.pes[pe].map)
            seg_unmap(shm.pes[pe].map);
        if (shm.pes[pe].remote)
            seg_disconnect(shm.pes[pe].remote);
    }
    seg_unmap(lmap);
    seg_remove(local);
    seg_close(shm.sd);
    /* How often its threads slept (each is a wake-up someone paid for): what a relayed put
     * costs on a machine with more busy threads than CPUs, whatever its load. */
    struct rusage ru;
    if (!getrusage(RUSAGE_SELF, &ru))
        shm_debug("relay on node %u: its threads slept %ld times (voluntary context switches)",
                  self, ru.ru_nvcsw);
    return 0;
}
