/*
 * The emulated fabric's side of the NTB device operations (ntb_backend.h): adapters' LUTs,
 * link enables, doorbell and scratchpad registers, DMA channels and IOMMU domains, read and
 * written in the fabric's shared memory as a driver does through MMIO.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "emu.h"
#include "wpol.h"

static struct fab_adapter *A(struct rt *rt, uint32_t a) { return fab_adapter(emu_fab(rt), a); }

int emu_adapter_info(struct rt *rt, uint32_t adapter, struct ntb_adapter_info *o)
{
    if (adapter >= emu_fab(rt)->ctl->nadapters)
        return -ENODEV;
    const struct fab_adapter *a = A(rt, adapter);
    *o = (struct ntb_adapter_info){ .host = a->host, .npeers = a->npeers,
                                    .mw_count = a->lut_entries, .mw_size = a->lut_size,
                                    .mw_base = a->bar_addr, .spads = a->spads,
                                    .dma_channels = a->dma_channels, .rid = a->rid };
    snprintf(o->name, sizeof o->name, "%s", a->name);
    for (uint32_t p = 0; p < a->npeers && p < NTB_BK_MAX_PEERS; p++)
        o->peers[p] = a->peers[p];
    uint32_t all = a->db_bits >= 32 ? UINT32_MAX : (1u << a->db_bits) - 1;
    o->db_valid = all & ~fab_agent_bit(a); /* the agent's mailbox bit is never the app's */
    return 0;
}

int emu_mw_set(struct rt *rt, uint32_t adapter, uint32_t widx, uint32_t peer_host, uint64_t addr)
{
    return fab_lut_set(emu_fab(rt), adapter, widx, peer_host, addr, getpid(), 0);
}

int emu_mw_clear(struct rt *rt, uint32_t adapter, uint32_t widx)
{
    return fab_lut_clear(emu_fab(rt), adapter, widx, getpid());
}

int emu_mw_alloc(struct rt *rt, uint32_t adapter)
{
    return fab_lut_alloc(emu_fab(rt), adapter, getpid(), 0);
}

void *emu_mw_cpu_map(struct rt *rt, uint32_t adapter, uint32_t first, uint32_t count)
{
    return emu_map_window(rt, adapter, first, count, false);
}

void emu_link_set(struct rt *rt, uint32_t adapter, bool on)
{
    fab_port_enable(emu_fab(rt), adapter, on);
}
_Atomic uint32_t *emu_link_word(struct rt *rt, uint32_t adapter) { return &A(rt, adapter)->link_seq; }

/* ---------------------------------------------------------------- doorbells, scratchpads */

uint64_t emu_db_read(struct rt *rt, uint32_t a) { return atomic_load(&A(rt, a)->db); }
void emu_db_set(struct rt *rt, uint32_t a, uint64_t bits)
{
    fab_db_raise(emu_fab(rt), a, (uint32_t)bits);
}
void emu_db_clear(struct rt *rt, uint32_t a, uint64_t bits) { atomic_fetch_and(&A(rt, a)->db, ~(uint32_t)bits); }
uint64_t emu_db_mask_read(struct rt *rt, uint32_t a) { return atomic_load(&A(rt, a)->db_mask); }
void emu_db_mask_set(struct rt *rt, uint32_t a, uint64_t bits) { atomic_fetch_or(&A(rt, a)->db_mask, (uint32_t)bits); }
void emu_db_mask_clear(struct rt *rt, uint32_t a, uint64_t bits)
{
    fab_db_unmask(emu_fab(rt), a, (uint32_t)bits);
}

int emu_peer_db_set(struct rt *rt, uint32_t a, uint32_t peer, uint64_t bits)
{
    return fab_db_ring(emu_fab(rt), a, peer, (uint32_t)bits);
}

_Atomic uint32_t *emu_db_word(struct rt *rt, uint32_t a) { return &A(rt, a)->db_seq; }
uint32_t emu_spad_read(struct rt *rt, uint32_t a, uint32_t i) { return atomic_load(&A(rt, a)->spad[i]); }
void emu_spad_write(struct rt *rt, uint32_t a, uint32_t i, uint32_t v) { atomic_store(&A(rt, a)->spad[i], v); }

/* ---------------------------------------------------------------- DMA engine */

void *emu_dma_chan_get(struct rt *rt, uint32_t adapter)
{
    struct fab_adapter *a = A(rt, adapter);
    struct fab_dma_chan *ch = fab_dma(emu_fab(rt), a);
    for (uint32_t c = 0; c < a->dma_channels; c++) {
        int32_t free_ = 0;
        if (atomic_compare_exchange_strong(&ch[c].owner_pid, &free_, getpid()))
            return &ch[c];
    }
    errno = a->dma_channels ? EBUSY : ENODEV;
    return NULL;
}

void emu_dma_chan_put(struct rt *rt, void *chan)
{
    atomic_store(&((struct fab_dma_chan *)chan)->owner_pid, 0);
}

int64_t emu_dma_submit(struct rt *rt, void *chan, uint64_t dst, uint64_t src, uint64_t len,
                       bool interrupt)
{
    struct fab_dma_chan *ch = chan;
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

int emu_dma_abort(struct rt *rt, void *chan)
{
    struct fab_dma_chan *ch = chan;
    fab_lock(&ch->lock);
    uint64_t head = atomic_load(&ch->head);
    /* The engine may be executing the descriptor at tail: that one completes. */
    for (uint64_t i = atomic_load(&ch->tail) + 1; i < head; i++)
        atomic_fetch_or(&ch->ring[i % FAB_DMA_RING].flags, FAB_DMA_CANCEL);
    fab_unlock(&ch->lock);
    return 0;
}

struct done_wait {
    struct fab_dma_chan *ch;
    uint64_t idx;
};

static bool done(void *arg)
{
    struct done_wait *w = arg;
    return atomic_load(&w->ch->tail) > w->idx;
}

int emu_dma_wait(struct rt *rt, void *chan, int64_t cookie, int timeout_ms)
{
    /* Like Linux dma_sync_wait, poll a little first: most copies finish within microseconds,
     * and a futex sleep plus wake-up costs more than that. Not when FAB_DMA_POLL_MAX bytes or
     * more are still to be copied up to ours: that takes longer than the poll, which would
     * only take the CPU from the engines and everybody else. The wait policy (src/wait) learns
     * how long the short ones take; the completion interrupt (done_seq) wakes a sleeper. */
    static struct wpol_site short_site = WPOL_SITE("DMA wait", 10000, 0);
    static struct wpol_site long_site = WPOL_SITE("DMA wait (large)", 0, 0);
    struct fab_dma_chan *ch = chan;
    if (cookie <= 0 || (uint64_t)cookie > atomic_load(&ch->head))
        return -EINVAL;
    uint64_t idx = (uint64_t)cookie - 1;
    uint64_t ahead = 0;
    for (uint64_t i = atomic_load(&ch->tail); i <= idx && ahead < FAB_DMA_POLL_MAX; i++)
        ahead += ch->ring[i % FAB_DMA_RING].len;
    struct done_wait w = { ch, idx };
    struct wpol_how how = { .ready = done, .arg = &w, .word = &ch->done_seq, .sleepers = &ch->waiters,
                            .deadline_ns = timeout_ms < 0 ? 0 : fab_now_ns() + (uint64_t)timeout_ms * 1000000ull,
                            .sleep_ns = timeout_ms < 0 ? 1000000000ull : 0 };
    int rc = timeout_ms == 0 ? (done(&w) ? 0 : -ETIMEDOUT)
                             : wpol_wait(ahead >= FAB_DMA_POLL_MAX ? &long_site : &short_site, &how);
    if (rc)
        return rc;
    struct fab_dma_desc *d = &ch->ring[idx % FAB_DMA_RING];
    /* A descriptor overwritten by a newer one completed long ago. */
    return d->cookie == (uint64_t)cookie ? atomic_load(&d->status) : 0;
}

/* ---------------------------------------------------------------- IOMMU */

int emu_dma_buf_map(struct rt *rt, uint32_t adapter, uint64_t phys, uint64_t len, bool on)
{
    const struct fab_adapter *a = A(rt, adapter);
    if (!fab_host(emu_fab(rt), a->host)->iommu)
        return 0;
    uint16_t dma_rid = fab_dma_rid(a->index_on_host);
    if (!on) {
        fab_iommu_unmap(emu_fab(rt), a->host, a->rid, phys, len);
        if (a->dma_channels)
            fab_iommu_unmap(emu_fab(rt), a->host, dma_rid, phys, len);
        return 0;
    }
    /* Identity IOVAs in the domains of this port's inbound traffic and its DMA engine. */
    uint32_t rw = FAB_PERM_READ | FAB_PERM_WRITE;
    int rc = fab_iommu_map(emu_fab(rt), a->host, a->rid, phys, phys, len, rw, getpid());
    if (!rc && a->dma_channels) {
        rc = fab_iommu_map(emu_fab(rt), a->host, dma_rid, phys, phys, len, rw, getpid());
        if (rc)
            fab_iommu_unmap(emu_fab(rt), a->host, a->rid, phys, len);
    }
    return rc;
}

int emu_iommu_faults(struct rt *rt, uint32_t host, struct ntb_fault *out, int max, uint64_t *total)
{
    struct fab_host *h = fab_host(emu_fab(rt), host);
    uint64_t n = atomic_load(&h->fault_count);
    if (total)
        *total = n;
    uint64_t have = n < FAB_FAULT_RING ? n : FAB_FAULT_RING;
    if (max < 0 || (uint64_t)max < have)
        have = max < 0 ? 0 : (uint64_t)max;
    const struct fab_fault *ring = fab_fault_ring(emu_fab(rt), host);
    for (uint64_t i = 0; i < have; i++) {
        const struct fab_fault *x = &ring[(n - have + i) % FAB_FAULT_RING];
        out[i] = (struct ntb_fault){ .requester = x->rid, .write = x->write != 0,
                                     .reason = x->reason, .addr = x->addr };
    }
    return (int)have;
}

int emu_iommu_on(struct rt *rt, uint32_t host)
{
    return host < emu_fab(rt)->ctl->nhosts && fab_host(emu_fab(rt), host)->iommu;
}

int emu_iommu_map(struct rt *rt, uint16_t rid, uint64_t iova, uint64_t phys, uint64_t len,
                  unsigned perm)
{
    const struct fab_host *h = fab_host(emu_fab(rt), rt->host);
    if (!h->iommu)
        return -EOPNOTSUPP;
    if (!len || phys > h->ram_size || len > h->ram_size - phys ||
        (perm & ~(NTB_IOMMU_READ | NTB_IOMMU_WRITE)))
        return -EINVAL;
    uint32_t p = (perm & NTB_IOMMU_READ ? FAB_PERM_READ : 0) |
                 (perm & NTB_IOMMU_WRITE ? FAB_PERM_WRITE : 0) | FAB_PERM_STREAM;
    return fab_iommu_map(emu_fab(rt), rt->host, rid, iova, phys, len, p, fab_self_pid());
}

int emu_iommu_unmap(struct rt *rt, uint16_t rid, uint64_t iova, uint64_t len)
{
    return fab_iommu_unmap(emu_fab(rt), rt->host, rid, iova, len);
}
