/*
 * The low-level NTB API (include/ntblend/ntb.h): ports and peers, link state and events,
 * memory windows (inbound and outbound), DMA-able memory. Registers are the backend's
 * (ntb_backend.h): on the emulated fabric they are read and written in shared memory directly,
 * as a driver does through MMIO; only allocation goes through the host agent.
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
    int n = 0;
    while (rt->ops->adapter(rt, rt->host, n) >= 0)
        n++;
    rt_put(rt);
    return n;
}

struct ntb_dev *ntb_open(int index)
{
    struct rt *rt = rt_get();
    if (!rt)
        return NULL;
    if (!rt->ops->adapter_info) { /* a backend without the NTB device operations */
        rt_put(rt);
        errno = EOPNOTSUPP;
        return NULL;
    }
    int ai = rt->ops->adapter(rt, rt->host, index);
    if (ai < 0) {
        rt_put(rt);
        errno = ENOENT;
        return NULL;
    }
    struct ntb_dev *ntb = calloc(1, sizeof *ntb);
    int rc = ntb ? rt->ops->adapter_info(rt, (uint32_t)ai, &ntb->a) : -ENOMEM;
    if (rc) {
        free(ntb);
        rt_put(rt);
        errno = -rc;
        return NULL;
    }
    ntb->rt = rt;
    ntb->ops = rt->ops;
    ntb->ai = (uint32_t)ai;
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

const char *ntb_name(const struct ntb_dev *ntb) { return ntb->a.name; }
uint32_t ntb_node_id(const struct ntb_dev *ntb) { return ntb->ops->node_id(ntb->rt, ntb->a.host); }

/* ---------------------------------------------------------------- ports */

int ntb_port_number(const struct ntb_dev *ntb) { return (int)ntb_node_id(ntb); }
int ntb_peer_port_count(const struct ntb_dev *ntb) { return (int)ntb->a.npeers; }

static bool pidx_ok(const struct ntb_dev *ntb, int pidx)
{
    return pidx >= 0 && (uint32_t)pidx < ntb->a.npeers;
}

/* What peer pidx's adapter is (pidx checked by the caller). */
static struct ntb_adapter_info peer(const struct ntb_dev *ntb, int pidx)
{
    struct ntb_adapter_info b = { 0 };
    ntb->ops->adapter_info(ntb->rt, ntb->a.peers[pidx], &b);
    return b;
}

int ntb_peer_port_number(const struct ntb_dev *ntb, int pidx)
{
    if (!pidx_ok(ntb, pidx))
        return -EINVAL;
    return (int)ntb->ops->node_id(ntb->rt, peer(ntb, pidx).host);
}

int ntb_fabric_peers(uint32_t node, uint32_t *peers, int max)
{
    struct rt *rt = rt_get();
    if (!rt)
        return -errno;
    if (!rt->ops->adapter_info) {
        rt_put(rt);
        return -EOPNOTSUPP;
    }
    int h = rt->ops->host_by_node(rt, node);
    int n = h < 0 ? -ENOENT : 0;
    struct ntb_adapter_info a, b;
    for (int i = 0, ai; n >= 0 && (ai = rt->ops->adapter(rt, (uint32_t)h, i)) >= 0; i++) {
        if (rt->ops->adapter_info(rt, (uint32_t)ai, &a))
            break;
        for (uint32_t p = 0; p < a.npeers; p++, n++)
            if (n < max && !rt->ops->adapter_info(rt, a.peers[p], &b))
                peers[n] = rt->ops->node_id(rt, b.host);
    }
    rt_put(rt);
    return n;
}

int ntb_fabric_link_up(uint32_t node_a, uint32_t node_b, uint64_t *signature)
{
    struct rt *rt = rt_get();
    if (!rt)
        return -errno;
    if (!rt->ops->adapter_info) { /* no NTB device (path_up is required: backend.c) */
        rt_put(rt);
        return -EOPNOTSUPP;
    }
    int ha = rt->ops->host_by_node(rt, node_a), hb = rt->ops->host_by_node(rt, node_b);
    int rc = ha < 0 || hb < 0 ? -ENOENT : -ENOLINK;
    struct ntb_adapter_info a, b;
    for (int i = 0, ai; rc == -ENOLINK && (ai = rt->ops->adapter(rt, (uint32_t)ha, i)) >= 0; i++) {
        if (rt->ops->adapter_info(rt, (uint32_t)ai, &a))
            break;
        for (uint32_t p = 0; p < a.npeers; p++)
            if (!rt->ops->adapter_info(rt, a.peers[p], &b) && (int)b.host == hb) {
                rc = rt->ops->path_up(rt, (uint32_t)ai, a.peers[p]) ? 1 : 0;
                if (signature)
                    *signature = rt->ops->path_signature
                                     ? rt->ops->path_signature(rt, (uint32_t)ai, a.peers[p]) : 0;
                break;
            }
    }
    rt_put(rt);
    return rc;
}

int ntb_node_name(uint32_t node, char *name, size_t len)
{
    struct rt *rt = rt_get();
    if (!rt)
        return -errno;
    int h = rt->ops->host_by_node(rt, node);
    int rc = h < 0 ? -ENOENT
             : !rt->ops->host_name ? -EOPNOTSUPP
                                   : rt->ops->host_name(rt, (uint32_t)h, name, len);
    rt_put(rt);
    return rc;
}

int ntb_fabric_host(uint32_t node, uint64_t *ram_size, struct ntb_fabric_adapter *adapters,
                    int max)
{
    struct rt *rt = rt_get();
    if (!rt)
        return -errno;
    int h = rt->ops->host_by_node(rt, node);
    int n = h < 0 ? -ENOENT : 0;
    if (h >= 0) {
        *ram_size = rt->ops->ram_size ? rt->ops->ram_size(rt, (uint32_t)h) : 0;
        struct ntb_adapter_info a;
        for (int ai; (ai = rt->ops->adapter(rt, (uint32_t)h, n)) >= 0; n++) {
            if (!rt->ops->adapter_info || rt->ops->adapter_info(rt, (uint32_t)ai, &a)) {
                n = -EOPNOTSUPP;
                break;
            }
            if (n < max)
                adapters[n] = (struct ntb_fabric_adapter){ a.mw_count, a.mw_size, (int)a.npeers };
        }
    }
    rt_put(rt);
    return n;
}

int ntb_fabric_latency_model(void)
{
    struct rt *rt = rt_get();
    if (!rt)
        return -errno;
    int rc = rt->ops->latency_model ? rt->ops->latency_model(rt) : -EOPNOTSUPP;
    rt_put(rt);
    return rc;
}

int ntb_peer_port_idx(const struct ntb_dev *ntb, int port)
{
    for (uint32_t p = 0; p < ntb->a.npeers; p++)
        if (ntb_peer_port_number(ntb, (int)p) == port)
            return (int)p;
    return -EINVAL;
}

/* ---------------------------------------------------------------- link */

static bool path_up(struct ntb_dev *ntb, int pidx)
{
    return ntb->ops->path_up(ntb->rt, ntb->ai, ntb->a.peers[pidx]);
}

uint64_t ntb_link_is_up(struct ntb_dev *ntb, int *speed, int *width)
{
    uint64_t up = 0;
    for (uint32_t p = 0; p < ntb->a.npeers; p++)
        if (path_up(ntb, (int)p))
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
    ntb->ops->link_set(ntb->rt, ntb->ai, true);
    return 0;
}

int ntb_link_disable(struct ntb_dev *ntb)
{
    ntb->ops->link_set(ntb->rt, ntb->ai, false); /* returns after every mapping acknowledged */
    return 0;
}

int ntb_link_event_wait(struct ntb_dev *ntb, uint64_t *seen, int timeout_ms)
{
    const struct ntb_backend_ops *ops = ntb->ops;
    _Atomic uint32_t *w = ops->link_word(ntb->rt, ntb->ai);
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : ops->now_ns() + (uint64_t)timeout_ms * 1000000ull;
    for (;;) {
        uint32_t cur = atomic_load(w);
        if (cur != *seen) {
            *seen = cur;
            return 0;
        }
        uint64_t now = ops->now_ns();
        if (now >= deadline)
            return -ETIMEDOUT;
        ops->wait(w, cur, deadline == UINT64_MAX ? -1 : (int64_t)(deadline - now));
    }
}

/* ---------------------------------------------------------------- inbound windows */

int ntb_mw_count(struct ntb_dev *ntb, int pidx)
{
    return pidx_ok(ntb, pidx) ? (int)peer(ntb, pidx).mw_count : -EINVAL;
}

int ntb_mw_get_align(struct ntb_dev *ntb, int pidx, int widx, uint64_t *addr_align,
                     uint64_t *size_align, uint64_t *size_max)
{
    if (!pidx_ok(ntb, pidx) || widx < 0 || (uint32_t)widx >= peer(ntb, pidx).mw_count)
        return -EINVAL;
    if (!path_up(ntb, pidx))
        return -ENOTCONN; /* as Linux: alignment is known once the link is up */
    uint64_t lut = peer(ntb, pidx).mw_size;
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
    struct ntb_adapter_info b = peer(ntb, pidx);
    if ((uint32_t)widx >= b.mw_count || dma_addr % b.mw_size || !size || size > b.mw_size)
        return -EINVAL;
    return ntb->ops->mw_set(ntb->rt, ntb->a.peers[pidx], (uint32_t)widx, ntb->a.host, dma_addr);
}

int ntb_mw_clear_trans(struct ntb_dev *ntb, int pidx, int widx)
{
    if (!pidx_ok(ntb, pidx) || widx < 0)
        return -EINVAL;
    return ntb->ops->mw_clear(ntb->rt, ntb->a.peers[pidx], (uint32_t)widx);
}

/* ---------------------------------------------------------------- outbound windows */

int ntb_peer_mw_count(struct ntb_dev *ntb) { return (int)ntb->a.mw_count; }

int ntb_peer_mw_get_addr(struct ntb_dev *ntb, int widx, uint64_t *phys, uint64_t *size)
{
    if (widx < 0 || (uint32_t)widx >= ntb->a.mw_count)
        return -EINVAL;
    if (phys)
        *phys = ntb->a.mw_base + (uint64_t)widx * ntb->a.mw_size;
    if (size)
        *size = ntb->a.mw_size;
    return 0;
}

int ntb_peer_mw_set_trans(struct ntb_dev *ntb, int pidx, int widx, uint64_t addr, uint64_t size)
{
    if (!pidx_ok(ntb, pidx) || widx < 0 || (uint32_t)widx >= ntb->a.mw_count ||
        addr % ntb->a.mw_size || !size || size > ntb->a.mw_size)
        return -EINVAL;
    return ntb->ops->mw_set(ntb->rt, ntb->ai, (uint32_t)widx, peer(ntb, pidx).host, addr);
}

int ntb_peer_mw_clear_trans(struct ntb_dev *ntb, int pidx, int widx)
{
    if (widx < 0)
        return -EINVAL;
    return ntb->ops->mw_clear(ntb->rt, ntb->ai, (uint32_t)widx);
}

int ntb_peer_mw_alloc(struct ntb_dev *ntb) { return ntb->ops->mw_alloc(ntb->rt, ntb->ai); }

void *ntb_peer_mw_map(struct ntb_dev *ntb, int widx, int count)
{
    if (widx < 0 || count <= 0) {
        errno = EINVAL;
        return NULL;
    }
    return ntb->ops->mw_cpu_map(ntb->rt, ntb->ai, (uint32_t)widx, (uint32_t)count);
}

int ntb_peer_mw_unmap(struct ntb_dev *ntb, void *addr)
{
    return ntb->ops->window_cpu_unmap(ntb->rt, addr);
}

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
    int rc = rt_call(ntb->rt, AGENT_ALLOC, len, ntb->a.mw_size, &rsp);
    struct ntb_buf *b = rc ? NULL : calloc(1, sizeof *b);
    if (!b) {
        if (!rc)
            rt_call(ntb->rt, AGENT_FREE, rsp.a, 0, NULL);
        errno = rc ? -rc : ENOMEM;
        return NULL;
    }
    b->phys = rsp.a;
    b->len = len;
    b->ptr = ntb->ops->ram(ntb->rt, ntb->a.host, b->phys, len);
    if (b->ptr)
        rc = ntb->ops->dma_buf_map(ntb->rt, ntb->ai, b->phys, len, true);
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
    ntb->ops->dma_buf_map(ntb->rt, ntb->ai, b->phys, b->len, false);
    rt_call(ntb->rt, AGENT_FREE, b->phys, 0, NULL);
    free(b);
}

/* ---------------------------------------------------------------- faults */

int ntb_iommu_faults(struct ntb_dev *ntb, struct ntb_fault *out, int max, uint64_t *total)
{
    return ntb->ops->iommu_faults(ntb->rt, ntb->a.host, out, max, total);
}
