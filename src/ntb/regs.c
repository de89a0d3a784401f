/*
 * Doorbells, scratchpads and the DMA engine of the NTB API (include/ntblend/ntb.h), on the
 * backend's registers (ntb_backend.h). Bits outside adapter_info.db_valid (on the emulated
 * fabric, the agent's mailbox bit) are never visible to applications.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>

#include "ntb_int.h"

/* ---------------------------------------------------------------- doorbells */

uint64_t ntb_db_valid_mask(struct ntb_dev *ntb) { return ntb->a.db_valid; }

int ntb_db_vector_count(struct ntb_dev *ntb) { return 1; }

uint64_t ntb_db_vector_mask(struct ntb_dev *ntb, int vector)
{
    return vector == 0 ? ntb_db_valid_mask(ntb) : 0;
}

uint64_t ntb_db_read(struct ntb_dev *ntb)
{
    return ntb->ops->db_read(ntb->rt, ntb->ai) & ntb_db_valid_mask(ntb);
}

static int db_bits_ok(struct ntb_dev *ntb, uint64_t bits)
{
    return (bits & ~ntb_db_valid_mask(ntb)) ? -EINVAL : 0;
}

int ntb_db_set(struct ntb_dev *ntb, uint64_t bits)
{
    int rc = db_bits_ok(ntb, bits);
    if (!rc)
        ntb->ops->db_set(ntb->rt, ntb->ai, bits);
    return rc;
}

int ntb_db_clear(struct ntb_dev *ntb, uint64_t bits)
{
    int rc = db_bits_ok(ntb, bits);
    if (!rc)
        ntb->ops->db_clear(ntb->rt, ntb->ai, bits);
    return rc;
}

uint64_t ntb_db_read_mask(struct ntb_dev *ntb)
{
    return ntb->ops->db_mask_read(ntb->rt, ntb->ai) & ntb_db_valid_mask(ntb);
}

int ntb_db_set_mask(struct ntb_dev *ntb, uint64_t bits)
{
    int rc = db_bits_ok(ntb, bits);
    if (!rc)
        ntb->ops->db_mask_set(ntb->rt, ntb->ai, bits);
    return rc;
}

int ntb_db_clear_mask(struct ntb_dev *ntb, uint64_t bits)
{
    int rc = db_bits_ok(ntb, bits);
    if (!rc)
        ntb->ops->db_mask_clear(ntb->rt, ntb->ai, bits);
    return rc;
}

int ntb_peer_db_set(struct ntb_dev *ntb, int pidx, uint64_t bits)
{
    if (pidx < 0 || (uint32_t)pidx >= ntb->a.npeers)
        return -EINVAL;
    int rc = db_bits_ok(ntb, bits);
    if (!rc)
        rc = ntb->ops->peer_db_set(ntb->rt, ntb->ai, ntb->a.peers[pidx], bits);
    return rc;
}

int64_t ntb_db_event_wait(struct ntb_dev *ntb, int timeout_ms)
{
    return ntb_db_vector_wait(ntb, UINT64_MAX, timeout_ms);
}

int64_t ntb_db_vector_wait(struct ntb_dev *ntb, uint64_t bits, int timeout_ms)
{
    const struct ntb_backend_ops *ops = ntb->ops;
    _Atomic uint32_t *w = ops->db_word(ntb->rt, ntb->ai);
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : ops->now_ns() + (uint64_t)timeout_ms * 1000000ull;
    for (;;) {
        uint32_t seq = atomic_load(w);
        uint64_t pending = ops->db_read(ntb->rt, ntb->ai) & ~ops->db_mask_read(ntb->rt, ntb->ai) &
                           ntb_db_valid_mask(ntb) & bits;
        if (pending)
            return (int64_t)pending;
        uint64_t now = ops->now_ns();
        if (now >= deadline)
            return 0;
        int rc = ops->wait(w, seq, deadline == UINT64_MAX ? -1 : (int64_t)(deadline - now));
        if (rc && rc != -ETIMEDOUT && rc != -EINTR)
            return rc;
    }
}

/* ---------------------------------------------------------------- scratchpads */

int ntb_spad_count(struct ntb_dev *ntb) { return (int)ntb->a.spads; }

uint32_t ntb_spad_read(struct ntb_dev *ntb, int sidx)
{
    if (sidx < 0 || (uint32_t)sidx >= ntb->a.spads)
        return UINT32_MAX;
    return ntb->ops->spad_read(ntb->rt, ntb->ai, (uint32_t)sidx);
}

int ntb_spad_write(struct ntb_dev *ntb, int sidx, uint32_t val)
{
    if (sidx < 0 || (uint32_t)sidx >= ntb->a.spads)
        return -EINVAL;
    ntb->ops->spad_write(ntb->rt, ntb->ai, (uint32_t)sidx, val);
    return 0;
}

/* The peer's adapter, if (pidx, sidx) are valid; *reachable: the path to it is up. */
static int peer_spad(struct ntb_dev *ntb, int pidx, int sidx, uint32_t *adapter, bool *reachable)
{
    if (pidx < 0 || (uint32_t)pidx >= ntb->a.npeers)
        return -EINVAL;
    struct ntb_adapter_info b;
    *adapter = ntb->a.peers[pidx];
    if (ntb->ops->adapter_info(ntb->rt, *adapter, &b) || sidx < 0 || (uint32_t)sidx >= b.spads)
        return -EINVAL;
    *reachable = ntb->ops->path_up(ntb->rt, ntb->ai, *adapter);
    return 0;
}

uint32_t ntb_peer_spad_read(struct ntb_dev *ntb, int pidx, int sidx)
{
    uint32_t b;
    bool up;
    if (peer_spad(ntb, pidx, sidx, &b, &up) || !up)
        return UINT32_MAX; /* a read over a dead link returns all ones */
    return ntb->ops->spad_read(ntb->rt, b, (uint32_t)sidx);
}

int ntb_peer_spad_write(struct ntb_dev *ntb, int pidx, int sidx, uint32_t val)
{
    uint32_t b;
    bool up;
    int rc = peer_spad(ntb, pidx, sidx, &b, &up);
    if (!rc && up)
        ntb->ops->spad_write(ntb->rt, b, (uint32_t)sidx, val);
    return rc; /* dropped silently when the link is down: a posted write */
}

/* ---------------------------------------------------------------- DMA engine */

int ntb_dma_chan_count(struct ntb_dev *ntb) { return (int)ntb->a.dma_channels; }

struct ntb_dma_chan *ntb_dma_chan_request(struct ntb_dev *ntb)
{
    void *ch = ntb->ops->dma_chan_get(ntb->rt, ntb->ai);
    if (!ch)
        return NULL;
    struct ntb_dma_chan *h = malloc(sizeof *h);
    if (!h) {
        ntb->ops->dma_chan_put(ntb->rt, ch);
        errno = ENOMEM;
        return NULL;
    }
    *h = (struct ntb_dma_chan){ .ntb = ntb, .ch = ch };
    return h;
}

void ntb_dma_chan_release(struct ntb_dma_chan *h)
{
    if (!h)
        return;
    h->ntb->ops->dma_chan_put(h->ntb->rt, h->ch);
    free(h);
}

int64_t ntb_dma_submit(struct ntb_dma_chan *h, uint64_t dst, uint64_t src, uint64_t len,
                       bool interrupt)
{
    return h->ntb->ops->dma_submit(h->ntb->rt, h->ch, dst, src, len, interrupt);
}

int ntb_dma_abort(struct ntb_dma_chan *h) { return h->ntb->ops->dma_abort(h->ntb->rt, h->ch); }

int ntb_dma_wait(struct ntb_dma_chan *h, int64_t cookie, int timeout_ms)
{
    return h->ntb->ops->dma_wait(h->ntb->rt, h->ch, cookie, timeout_ms);
}
