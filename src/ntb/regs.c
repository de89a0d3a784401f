/*
 * Doorbells, scratchpads and the DMA engine of the NTB API (include/ntblend/ntb.h). The
 * agent's mailbox bit (the top doorbell bit) is never visible to applications.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>

#include "ntb_int.h"

/* ---------------------------------------------------------------- doorbells */

uint64_t ntb_db_valid_mask(struct ntb_dev *ntb)
{
    uint32_t all = ntb->a->db_bits >= 32 ? UINT32_MAX : (1u << ntb->a->db_bits) - 1;
    return all & ~fab_agent_bit(ntb->a);
}

int ntb_db_vector_count(struct ntb_dev *ntb) { return 1; }

uint64_t ntb_db_vector_mask(struct ntb_dev *ntb, int vector)
{
    return vector == 0 ? ntb_db_valid_mask(ntb) : 0;
}

uint64_t ntb_db_read(struct ntb_dev *ntb) { return atomic_load(&ntb->a->db) & ntb_db_valid_mask(ntb); }

static int db_bits_ok(struct ntb_dev *ntb, uint64_t bits)
{
    return (bits & ~ntb_db_valid_mask(ntb)) ? -EINVAL : 0;
}

int ntb_db_set(struct ntb_dev *ntb, uint64_t bits)
{
    int rc = db_bits_ok(ntb, bits);
    if (!rc)
        fab_db_raise(ntb->f, ntb->ai, (uint32_t)bits);
    return rc;
}

int ntb_db_clear(struct ntb_dev *ntb, uint64_t bits)
{
    int rc = db_bits_ok(ntb, bits);
    if (!rc)
        atomic_fetch_and(&ntb->a->db, ~(uint32_t)bits);
    return rc;
}

uint64_t ntb_db_read_mask(struct ntb_dev *ntb)
{
    return atomic_load(&ntb->a->db_mask) & ntb_db_valid_mask(ntb);
}

int ntb_db_set_mask(struct ntb_dev *ntb, uint64_t bits)
{
    int rc = db_bits_ok(ntb, bits);
    if (!rc)
        atomic_fetch_or(&ntb->a->db_mask, (uint32_t)bits);
    return rc;
}

int ntb_db_clear_mask(struct ntb_dev *ntb, uint64_t bits)
{
    int rc = db_bits_ok(ntb, bits);
    if (!rc)
        fab_db_unmask(ntb->f, ntb->ai, (uint32_t)bits);
    return rc;
}

int ntb_peer_db_set(struct ntb_dev *ntb, int pidx, uint64_t bits)
{
    if (pidx < 0 || (uint32_t)pidx >= ntb->a->npeers)
        return -EINVAL;
    int rc = db_bits_ok(ntb, bits);
    if (!rc)
        rc = fab_db_ring(ntb->f, ntb->ai, ntb->a->peers[pidx], (uint32_t)bits);
    return rc;
}

int64_t ntb_db_event_wait(struct ntb_dev *ntb, int timeout_ms)
{
    return ntb_db_vector_wait(ntb, UINT64_MAX, timeout_ms);
}

int64_t ntb_db_vector_wait(struct ntb_dev *ntb, uint64_t bits, int timeout_ms)
{
    struct fab_adapter *a = ntb->a;
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : fab_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    for (;;) {
        uint32_t seq = atomic_load(&a->db_seq);
        uint64_t pending = atomic_load(&a->db) & ~atomic_load(&a->db_mask) & ntb_db_valid_mask(ntb) & bits;
        if (pending)
            return (int64_t)pending;
        uint64_t now = fab_now_ns();
        if (now >= deadline)
            return 0;
        int rc = fab_futex_wait(&a->db_seq, seq, deadline == UINT64_MAX ? -1 : (int64_t)(deadline - now));
        if (rc && rc != -ETIMEDOUT && rc != -EINTR)
            return rc;
    }
}

/* ---------------------------------------------------------------- scratchpads */

int ntb_spad_count(struct ntb_dev *ntb) { return (int)ntb->a->spads; }

uint32_t ntb_spad_read(struct ntb_dev *ntb, int sidx)
{
    if (sidx < 0 || (uint32_t)sidx >= ntb->a->spads)
        return UINT32_MAX;
    return atomic_load(&ntb->a->spad[sidx]);
}

int ntb_spad_write(struct ntb_dev *ntb, int sidx, uint32_t val)
{
    if (sidx < 0 || (uint32_t)sidx >= ntb->a->spads)
        return -EINVAL;
    atomic_store(&ntb->a->spad[sidx], val);
    return 0;
}

/* The peer's register, if the path to it is up. */
static _Atomic uint32_t *peer_spad(struct ntb_dev *ntb, int pidx, int sidx, int *err)
{
    *err = 0;
    if (pidx < 0 || (uint32_t)pidx >= ntb->a->npeers) {
        *err = -EINVAL;
        return NULL;
    }
    struct fab_adapter *b = fab_adapter(ntb->f, ntb->a->peers[pidx]);
    if (sidx < 0 || (uint32_t)sidx >= b->spads) {
        *err = -EINVAL;
        return NULL;
    }
    if (!fab_path_up(ntb->f, ntb->ai, ntb->a->peers[pidx], NULL))
        return NULL;
    return &b->spad[sidx];
}

uint32_t ntb_peer_spad_read(struct ntb_dev *ntb, int pidx, int sidx)
{
    int err;
    _Atomic uint32_t *r = peer_spad(ntb, pidx, sidx, &err);
    return r ? atomic_load(r) : UINT32_MAX; /* a read over a dead link returns all ones */
}

int ntb_peer_spad_write(struct ntb_dev *ntb, int pidx, int sidx, uint32_t val)
{
    int err;
    _Atomic uint32_t *r = peer_spad(ntb, pidx, sidx, &err);
    if (r)
        atomic_store(r, val);
    return err; /* dropped silently when the link is down: a posted write */
}

/* ---------------------------------------------------------------- DMA engine */

int ntb_dma_chan_count(struct ntb_dev *ntb) { return (int)ntb->a->dma_channels; }

struct ntb_dma_chan *ntb_dma_chan_request(struct ntb_dev *ntb)
{
    struct fab_dma_chan *ch = fab_dma(ntb->f, ntb->a);
    for (uint32_t c = 0; c < ntb->a->dma_channels; c++) {
        int32_t free_ = 0;
        if (!atomic_compare_exchange_strong(&ch[c].owner_pid, &free_, ntb->pid))
            continue;
        struct ntb_dma_chan *h = malloc(sizeof *h);
        if (!h) {
            atomic_store(&ch[c].owner_pid, 0);
            errno = ENOMEM;
            return NULL;
        }
        *h = (struct ntb_dma_chan){ .ntb = ntb, .ch = &ch[c] };
        return h;
    }
    errno = ntb->a->dma_channels ? EBUSY : ENODEV;
    return NULL;
}

void ntb_dma_chan_release(struct ntb_dma_chan *h)
{
    if (!h)
        return;
    atomic_store(&h->ch->owner_pid, 0);
    free(h);
}

int64_t ntb_dma_submit(struct ntb_dma_chan *h, uint64_t dst, uint64_t src, uint64_t len,
                       bool interrupt)
{
    struct fab_dma_chan *ch = h->ch;
    if (!len)
        return -EINVAL;
    fab_lock(&ch->lock);
    uint64_t head = atomic_load(&ch->head);
    if (head - atomic_load(&ch->tail) >= FAB_DMA_RING) {
        fab_unlock(&ch->lock);
        return -EAGAIN;
    }
    struct fab_dma_desc *d = &ch->ring[head % FAB_DMA_RING];
    d->src = src;
    d->dst = dst;
    d->len = len;
    d->cookie = head + 1;
    d->submitted_ns = fab_now_ns();
    d->flags = interrupt ? FAB_DMA_INTR : 0;
    atomic_store(&d->status, 1);
    atomic_store_explicit(&ch->head, head + 1, memory_order_release);
    fab_unlock(&ch->lock);
    atomic_fetch_add(&ch->submit_seq, 1);
    if (atomic_load(&ch->engine_idle)) /* a busy engine finds the descriptor by itself */
        fab_futex_wake(&ch->submit_seq, 1);
    return (int64_t)(head + 1);
}

int ntb_dma_abort(struct ntb_dma_chan *h)
{
    struct fab_dma_chan *ch = h->ch;
    fab_lock(&ch->lock);
    uint64_t head = atomic_load(&ch->head);
    /* The engine may be executing the descriptor at tail: that one completes. */
    for (uint64_t i = atomic_load(&ch->tail) + 1; i < head; i++)
        atomic_fetch_or(&ch->ring[i % FAB_DMA_RING].flags, FAB_DMA_CANCEL);
    fab_unlock(&ch->lock);
    return 0;
}

int ntb_dma_wait(struct ntb_dma_chan *h, int64_t cookie, int timeout_ms)
{
    struct fab_dma_chan *ch = h->ch;
    if (cookie <= 0 || (uint64_t)cookie > atomic_load(&ch->head))
        return -EINVAL;
    uint64_t idx = (uint64_t)cookie - 1;
    /* Like Linux dma_sync_wait, poll a little first: most copies finish within microseconds,
     * and a futex sleep plus wake-up costs more than that. */
    uint64_t poll_until = timeout_ms == 0 ? 0 : fab_now_ns() + 10000;
    while (atomic_load(&ch->tail) <= idx && fab_now_ns() < poll_until)
        ;
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : fab_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    for (;;) {
        uint32_t seq = atomic_load(&ch->done_seq);
        if (atomic_load(&ch->tail) > idx) {
            struct fab_dma_desc *d = &ch->ring[idx % FAB_DMA_RING];
            /* A descriptor overwritten by a newer one completed long ago. */
            return d->cookie == (uint64_t)cookie ? atomic_load(&d->status) : 0;
        }
        uint64_t now = fab_now_ns();
        if (now >= deadline)
            return -ETIMEDOUT;
        atomic_fetch_add(&ch->waiters, 1);
        if (atomic_load(&ch->tail) <= idx) /* re-check once the engine can see us waiting */
            fab_futex_wait(&ch->done_seq, seq, deadline == UINT64_MAX ? -1 : (int64_t)(deadline - now));
        atomic_fetch_sub(&ch->waiters, 1);
    }
}
