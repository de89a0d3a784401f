/*
 * The routed transport's rings, as a producer sees them (the wire format is xport.h): opening
 * a link to a host's inbox, room in a ring, slot offsets, publishing a message and its data,
 * and the DMA queue of the adapter a hop goes through. Used by the PEs (xport.c) and by the
 * nodes (relay.c) alike.
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

/* ------------------------------------------------------------------------ producing */

int shm_connect(seg_desc_t *sd, seg_remote_t **r, uint32_t node, uint32_t id, int adapter)
{
    /* LUT entries of a job that just ended come back as the agents process its processes'
     * exits, which can lag behind them; and an agent busy with many connects at once (every
     * PE connecting to every other on a large fabric) lets a request time out. Both pass: try
     * again for a while, backing off. */
    uint64_t until = shm_now_ns() + 10000000000ull;
    for (long ms = 20;; ms = ms < 500 ? ms * 2 : ms) {
        int rc = seg_connect(sd, r, node, id, adapter, shm.timeout_ms);
        if ((rc != -ENOSPC && rc != -EHOSTUNREACH) || shm_now_ns() > until)
            return rc;
        struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
        nanosleep(&ts, NULL);
    }
}

int xp_link_open(struct xp_link *l, seg_desc_t *sd, int host)
{
    struct shm_host *h = &shm.hosts[host];
    l->host = host;
    int rc = shm_connect(sd, &l->remote, h->node, xp_inbox_id(shm.job, h->node), h->adapter);
    if (rc)
        return rc;
    if (seg_remote_size(l->remote) != xp_inbox_size(xp_nrings(), shm.chunk)) {
        seg_disconnect(l->remote);
        l->remote = NULL;
        return -EPROTO;
    }
    l->base = seg_map_remote(l->remote, 0, 0, 0, &l->map);
    if (!l->base)
        return -errno;
    if (!(l->dev = ntb_open(h->adapter)))
        return -errno;
    l->pidx = ntb_peer_port_idx(l->dev, (int)h->node);
    return l->pidx < 0 ? l->pidx : 0;
}

void xp_link_close(struct xp_link *l)
{
    if (l->map)
        seg_unmap(l->map);
    if (l->remote)
        seg_disconnect(l->remote);
    if (l->dev)
        ntb_close(l->dev);
    memset(l, 0, sizeof *l);
}

size_t xp_dma_min;

/* Slots skipped before n data slots starting at position at, so that they do not wrap. */
static uint64_t lead_for(uint64_t at, uint64_t n)
{
    return at % XP_SLOTS + n > XP_SLOTS ? XP_SLOTS - at % XP_SLOTS : 0;
}

bool xp_fits(uint64_t head, uint64_t tail, size_t dlen)
{
    uint64_t n = xp_nslots(dlen, shm.chunk);
    return head + lead_for(head, n) + n - tail <= XP_SLOTS;
}

bool xp_has_room(struct xp_prod *p, size_t dlen)
{
    if (xp_fits(p->resv, p->tail_seen, dlen))
        return true;
    /* A read across the link: only when we think the ring is full. */
    p->tail_seen = atomic_load_explicit(&xp_ring_at(p->link->base, p->ring)->tail, memory_order_acquire);
    return xp_fits(p->resv, p->tail_seen, dlen);
}

uint64_t xp_reserve(struct xp_prod *p, size_t dlen, uint8_t *lead)
{
    uint64_t n = xp_nslots(dlen, shm.chunk), idx = p->resv;
    *lead = (uint8_t)lead_for(idx, n);
    p->resv += *lead + n;
    return idx;
}

size_t xp_slot_off(uint32_t r, uint64_t idx)
{
    return xp_data_off(xp_nrings()) + ((size_t)r * XP_SLOTS + idx % XP_SLOTS) * xp_slot_size(shm.chunk);
}

void xp_publish_silent(struct xp_prod *p, uint64_t idx, const struct xp_msg *m)
{
    struct xp_ring *r = xp_ring_at(p->link->base, p->ring);
    if (idx != p->head)
        shm_fatal("internal: ring %u published out of order (%llu, head %llu)", p->ring,
                  (unsigned long long)idx, (unsigned long long)p->head);
    r->msg[idx % XP_SLOTS] = *m;
    p->head += xp_span(m, shm.chunk);
    atomic_store_explicit(&r->head, p->head, memory_order_release);
}

void xp_doorbell(struct xp_prod *p)
{
    ntb_peer_db_set(p->link->dev, p->link->pidx, xp_bit(p->ring, shm.threads));
}

void xp_publish(struct xp_prod *p, uint64_t idx, const struct xp_msg *m)
{
    xp_publish_silent(p, idx, m);
    xp_doorbell(p);
}

void xp_stamp_put(struct xp_prod *p, uint64_t idx, struct xp_stamp *st)
{
    xp_stamp_to(st, SHM_ST_PUBLISH);
    xp_ring_at(p->link->base, p->ring)->stamp[idx % XP_SLOTS] = *st; /* before the head */
}

void xp_push_stamped(struct xp_prod *p, const struct xp_msg *m, const void *data, size_t len,
                     struct xp_stamp *st)
{
    struct xp_msg mm = *m;
    if (len > xp_data_len(m))
        shm_fatal("internal: a message of type %u with %zu bytes of data", m->type, len);
    uint64_t idx = xp_reserve(p, xp_data_len(m), &mm.lead);
    if (len)
        memcpy(xp_slot_data(p->link->base, xp_nrings(), shm.chunk, p->ring, idx + mm.lead), data, len);
    if (st) {
        xp_stamp_to(st, SHM_ST_DMA); /* CPU stores across the link */
        xp_stamp_put(p, idx, st);
    }
    xp_publish(p, idx, &mm);
}

void xp_push(struct xp_prod *p, const struct xp_msg *m, const void *data, size_t len)
{
    xp_push_stamped(p, m, data, len, NULL);
}

static pthread_mutex_t dmaq_lock = PTHREAD_MUTEX_INITIALIZER;

bool xp_dmaq_get(struct xp_dmaq *d, seg_desc_t *sd, int adapter)
{
    if (d->tried)
        return d->q != NULL;
    pthread_mutex_lock(&dmaq_lock);
    d->tried = true;
    if (xp_dma_min && seg_dma_queue_create(sd, &d->q, adapter))
        d->q = NULL;
    pthread_mutex_unlock(&dmaq_lock);
    shm_debug("DMA on adapter %d: %s", adapter, d->q ? "yes" : "no channel free: copies by CPU");
    return d->q != NULL;
}

void xp_dmaq_put(struct xp_dmaq *d)
{
    if (d->q)
        seg_dma_queue_remove(d->q);
    memset(d, 0, sizeof *d);
}

