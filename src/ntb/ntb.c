/*
 * The low-level NTB API (include/ntblend/ntb.h) over the emulated fabric: ports and peers,
 * link state and events, memory windows (inbound and outbound), DMA-able memory, doorbells
 * and scratchpads. Registers are read and written in shared memory directly, as a driver does
 * through MMIO; only allocation goes through the host agent.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ntb_int.h"

/* ---------------------------------------------------------------- opening */

int ntb_adapter_count(void)
{
    struct rt *rt = rt_get();
    if (!rt)
        return -errno;
    int n = (int)fab_host(rt->f, rt->host)->nadapters;
    rt_put(rt);
    return n;
}

struct ntb_dev *ntb_open(int index)
{
    struct rt *rt = rt_get();
    if (!rt)
        return NULL;
    struct fab_host *h = fab_host(rt->f, rt->host);
    if (index < 0 || (uint32_t)index >= h->nadapters) {
        rt_put(rt);
        errno = ENOENT;
        return NULL;
    }
    struct ntb_dev *ntb = calloc(1, sizeof *ntb);
    if (!ntb) {
        rt_put(rt);
        errno = ENOMEM;
        return NULL;
    }
    ntb->rt = rt;
    ntb->f = rt->f;
    ntb->ai = h->adapter_first + (uint32_t)index;
    ntb->a = fab_adapter(rt->f, ntb->ai);
    ntb->pid = getpid();
    pthread_mutex_init(&ntb->lock, NULL);
    return ntb;
}

void ntb_close(struct ntb_dev *ntb)
{
    if (!ntb)
        return;
    while (ntb->bufs)
        ntb_dma_free(ntb, ntb->bufs->ptr);
    rt_put(ntb->rt);
    free(ntb);
}

const char *ntb_name(const struct ntb_dev *ntb) { return ntb->a->name; }
uint32_t ntb_node_id(const struct ntb_dev *ntb) { return fab_host(ntb->f, ntb->a->host)->node_id; }

/* ---------------------------------------------------------------- ports */

int ntb_port_number(const struct ntb_dev *ntb) { return (int)ntb_node_id(ntb); }
int ntb_peer_port_count(const struct ntb_dev *ntb) { return (int)ntb->a->npeers; }

static bool pidx_ok(const struct ntb_dev *ntb, int pidx)
{
    return pidx >= 0 && (uint32_t)pidx < ntb->a->npeers;
}

static struct fab_adapter *peer(const struct ntb_dev *ntb, int pidx)
{
    return fab_adapter(ntb->f, ntb->a->peers[pidx]);
}

int ntb_peer_port_number(const struct ntb_dev *ntb, int pidx)
{
    if (!pidx_ok(ntb, pidx))
        return -EINVAL;
    return (int)fab_host(ntb->f, peer(ntb, pidx)->host)->node_id;
}

int ntb_fabric_peers(uint32_t node, uint32_t *peers, int max)
{
    struct rt *rt = rt_get();
    if (!rt)
        return -errno;
    int n = -ENOENT;
    for (uint32_t h = 0; h < rt->f->ctl->nhosts && n < 0; h++) {
        const struct fab_host *host = fab_host(rt->f, h);
        if (host->node_id != node)
            continue;
        n = 0;
        for (uint32_t i = 0; i < host->nadapters; i++) {
            const struct fab_adapter *a = fab_adapter(rt->f, host->adapter_first + i);
            for (uint32_t p = 0; p < a->npeers; p++, n++)
                if (n < max)
                    peers[n] = fab_host(rt->f, fab_adapter(rt->f, a->peers[p])->host)->node_id;
        }
    }
    rt_put(rt);
    return n;
}

int ntb_fabric_host(uint32_t node, uint64_t *ram_size, struct ntb_fabric_adapter *adapters,
                    int max)
{
    struct rt *rt = rt_get();
    if (!rt)
        return -errno;
    int n = -ENOENT;
    for (uint32_t h = 0; h < rt->f->ctl->nhosts && n < 0; h++) {
        const struct fab_host *host = fab_host(rt->f, h);
        if (host->node_id != node)
            continue;
        *ram_size = host->ram_size;
        n = (int)host->nadapters;
        for (int i = 0; i < n && i < max; i++) {
            const struct fab_adapter *a = fab_adapter(rt->f, host->adapter_first + (uint32_t)i);
            adapters[i] = (struct ntb_fabric_adapter){ a->lut_entries, a->lut_size, (int)a->npeers };
        }
    }
    rt_put(rt);
    return n;
}

int ntb_peer_port_idx(const struct ntb_dev *ntb, int port)
{
    for (uint32_t p = 0; p < ntb->a->npeers; p++)
        if (ntb_peer_port_number(ntb, (int)p) == port)
            return (int)p;
    return -EINVAL;
}

/* ---------------------------------------------------------------- link */

uint64_t ntb_link_is_up(struct ntb_dev *ntb, int *speed, int *width)
{
    uint64_t up = 0;
    for (uint32_t p = 0; p < ntb->a->npeers; p++)
        if (fab_path_up(ntb->f, ntb->ai, ntb->a->peers[p], NULL))
            up |= 1ull << p;
    /* The PXH830 the seeds use is a PCIe Gen3 x16 adapter. */
    if (speed)
        *speed = up ? 3 : 0;
    if (width)
        *width = up ? 16 : 0;
    return up;
}

int ntb_link_enable(struct ntb_dev *ntb)
{
    fab_port_enable(ntb->f, ntb->ai, true);
    return 0;
}

int ntb_link_disable(struct ntb_dev *ntb)
{
    fab_port_enable(ntb->f, ntb->ai, false); /* returns after every mapping acknowledged */
    return 0;
}

int ntb_link_event_wait(struct ntb_dev *ntb, uint64_t *seen, int timeout_ms)
{
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : fab_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    for (;;) {
        uint32_t cur = atomic_load(&ntb->a->link_seq);
        if (cur != *seen) {
            *seen = cur;
            return 0;
        }
        uint64_t now = fab_now_ns();
        if (now >= deadline)
            return -ETIMEDOUT;
        fab_futex_wait(&ntb->a->link_seq, cur,
                       deadline == UINT64_MAX ? -1 : (int64_t)(deadline - now));
    }
}

/* ---------------------------------------------------------------- inbound windows */

int ntb_mw_count(struct ntb_dev *ntb, int pidx)
{
    return pidx_ok(ntb, pidx) ? (int)peer(ntb, pidx)->lut_entries : -EINVAL;
}

int ntb_mw_get_align(struct ntb_dev *ntb, int pidx, int widx, uint64_t *addr_align,
                     uint64_t *size_align, uint64_t *size_max)
{
    if (!pidx_ok(ntb, pidx) || widx < 0 || (uint32_t)widx >= peer(ntb, pidx)->lut_entries)
        return -EINVAL;
    if (!fab_path_up(ntb->f, ntb->ai, ntb->a->peers[pidx], NULL))
        return -ENOTCONN; /* as Linux: alignment is known once the link is up */
    uint64_t lut = peer(ntb, pidx)->lut_size;
    if (addr_align)
        *addr_align = lut;
    if (size_align)
        *size_align = 4096;
    if (size_max)
        *size_max = lut;
    return 0;
}

int ntb_mw_set_trans(struct ntb_dev *ntb, int pidx, int widx, uint64_t dma_addr, uint64_t size)
{
    if (!pidx_ok(ntb, pidx) || widx < 0)
        return -EINVAL;
    struct fab_adapter *b = peer(ntb, pidx);
    if ((uint32_t)widx >= b->lut_entries || dma_addr % b->lut_size || !size || size > b->lut_size)
        return -EINVAL;
    return fab_lut_set(ntb->f, ntb->a->peers[pidx], (uint32_t)widx, ntb->a->host, dma_addr,
                       ntb->pid, 0);
}

int ntb_mw_clear_trans(struct ntb_dev *ntb, int pidx, int widx)
{
    if (!pidx_ok(ntb, pidx) || widx < 0)
        return -EINVAL;
    return fab_lut_clear(ntb->f, ntb->a->peers[pidx], (uint32_t)widx, ntb->pid);
}

/* ---------------------------------------------------------------- outbound windows */

int ntb_peer_mw_count(struct ntb_dev *ntb) { return (int)ntb->a->lut_entries; }

int ntb_peer_mw_get_addr(struct ntb_dev *ntb, int widx, uint64_t *phys, uint64_t *size)
{
    if (widx < 0 || (uint32_t)widx >= ntb->a->lut_entries)
        return -EINVAL;
    if (phys)
        *phys = ntb->a->bar_addr + (uint64_t)widx * ntb->a->lut_size;
    if (size)
        *size = ntb->a->lut_size;
    return 0;
}

int ntb_peer_mw_set_trans(struct ntb_dev *ntb, int pidx, int widx, uint64_t addr, uint64_t size)
{
    if (!pidx_ok(ntb, pidx) || widx < 0 || (uint32_t)widx >= ntb->a->lut_entries ||
        addr % ntb->a->lut_size || !size || size > ntb->a->lut_size)
        return -EINVAL;
    return fab_lut_set(ntb->f, ntb->ai, (uint32_t)widx, peer(ntb, pidx)->host, addr, ntb->pid, 0);
}

int ntb_peer_mw_clear_trans(struct ntb_dev *ntb, int pidx, int widx)
{
    if (widx < 0)
        return -EINVAL;
    return fab_lut_clear(ntb->f, ntb->ai, (uint32_t)widx, ntb->pid);
}

int ntb_peer_mw_alloc(struct ntb_dev *ntb) { return fab_lut_alloc(ntb->f, ntb->ai, ntb->pid, 0); }

void *ntb_peer_mw_map(struct ntb_dev *ntb, int widx, int count)
{
    if (widx < 0 || count <= 0) {
        errno = EINVAL;
        return NULL;
    }
    return rt_map_window(ntb->rt, ntb->ai, (uint32_t)widx, (uint32_t)count, false);
}

int ntb_peer_mw_unmap(struct ntb_dev *ntb, void *addr) { return rt_unmap_window(ntb->rt, addr); }

/* ---------------------------------------------------------------- DMA-able memory */

void *ntb_dma_alloc(struct ntb_dev *ntb, size_t size, uint64_t *dma_addr)
{
    if (!size) {
        errno = EINVAL;
        return NULL;
    }
    uint64_t len = (size + 4095) & ~4095ull;
    struct agent_rsp rsp;
    /* Aligned to the LUT entry size, so the buffer can back an inbound window by itself. */
    int rc = rt_call(ntb->rt, AGENT_ALLOC, len, ntb->a->lut_size, &rsp);
    struct ntb_buf *b = rc ? NULL : calloc(1, sizeof *b);
    if (!b) {
        if (!rc)
            rt_call(ntb->rt, AGENT_FREE, rsp.a, 0, NULL);
        errno = rc ? -rc : ENOMEM;
        return NULL;
    }
    b->phys = rsp.a;
    b->len = len;
    b->ptr = fab_ram(ntb->f, ntb->a->host, b->phys, len);
    struct fab_host *h = fab_host(ntb->f, ntb->a->host);
    if (b->ptr && h->iommu) {
        /* Identity IOVAs in the domains of this port's inbound traffic and its DMA engine. */
        uint32_t rw = FAB_PERM_READ | FAB_PERM_WRITE;
        rc = fab_iommu_map(ntb->f, ntb->a->host, ntb->a->rid, b->phys, b->phys, len, rw, ntb->pid);
        if (!rc && ntb->a->dma_channels) {
            rc = fab_iommu_map(ntb->f, ntb->a->host, fab_dma_rid(ntb->a->index_on_host), b->phys,
                               b->phys, len, rw, ntb->pid);
            if (rc)
                fab_iommu_unmap(ntb->f, ntb->a->host, ntb->a->rid, b->phys, len);
        }
    }
    if (!b->ptr || rc) {
        rc = b->ptr ? rc : -errno;
        rt_call(ntb->rt, AGENT_FREE, b->phys, 0, NULL);
        free(b);
        errno = -rc;
        return NULL;
    }
    pthread_mutex_lock(&ntb->lock);
    b->next = ntb->bufs;
    ntb->bufs = b;
    pthread_mutex_unlock(&ntb->lock);
    *dma_addr = b->phys;
    return b->ptr;
}

void ntb_dma_free(struct ntb_dev *ntb, void *ptr)
{
    pthread_mutex_lock(&ntb->lock);
    struct ntb_buf *b = NULL;
    for (struct ntb_buf **pp = &ntb->bufs; *pp; pp = &(*pp)->next)
        if ((*pp)->ptr == ptr) {
            b = *pp;
            *pp = b->next;
            break;
        }
    pthread_mutex_unlock(&ntb->lock);
    if (!b)
        return;
    if (fab_host(ntb->f, ntb->a->host)->iommu) {
        fab_iommu_unmap(ntb->f, ntb->a->host, ntb->a->rid, b->phys, b->len);
        if (ntb->a->dma_channels)
            fab_iommu_unmap(ntb->f, ntb->a->host, fab_dma_rid(ntb->a->index_on_host), b->phys, b->len);
    }
    rt_call(ntb->rt, AGENT_FREE, b->phys, 0, NULL);
    free(b);
}

/* ---------------------------------------------------------------- faults */

int ntb_iommu_faults(struct ntb_dev *ntb, struct ntb_fault *out, int max, uint64_t *total)
{
    struct fab_host *h = fab_host(ntb->f, ntb->a->host);
    uint64_t n = atomic_load(&h->fault_count);
    if (total)
        *total = n;
    uint64_t have = n < FAB_FAULT_RING ? n : FAB_FAULT_RING;
    if (max < 0 || (uint64_t)max < have)
        have = max < 0 ? 0 : (uint64_t)max;
    const struct fab_fault *ring = fab_fault_ring(ntb->f, ntb->a->host);
    for (uint64_t i = 0; i < have; i++) {
        const struct fab_fault *x = &ring[(n - have + i) % FAB_FAULT_RING];
        out[i] = (struct ntb_fault){ .requester = x->rid, .write = x->write != 0,
                                     .reason = x->reason, .addr = x->addr };
    }
    return (int)have;
}
