/*
 * SmartIO device-driver API (include/ntblend/smartio.h): the device registry as the fabric
 * enumerates it, borrowing through the lender's agent, BARs mapped through the borrower's NTB
 * window, register accessors that notify the device (writel), memory mapped for the device
 * with the address resolved by the lender (smartio §4.4), MSI-X routed to the borrower, and
 * memory placed by access hints. This host's PCIe tree and binding are pcie_tree.c's, RAM
 * for device DMA ram.c's, streaming DMA stream.c's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "seg_int.h"
#include "sio_int.h"

/* PCI command register bits (config offset 0x04). */
#define PCI_CMD_MEM 0x2u
#define PCI_CMD_BME 0x4u

int sio_list(struct sio_info *out, int max)
{
    struct rt *rt = rt_get();
    if (!rt)
        return -errno;
    int n = 0;
    struct ntb_func_info x;
    for (; rt->ops->func_info(rt, (uint32_t)n, &x) == 0; n++) {
        if (n >= max)
            continue;
        struct sio_info *o = &out[n];
        memset(o, 0, sizeof *o);
        o->id = (uint32_t)n;
        snprintf(o->name, sizeof o->name, "%s", x.name);
        snprintf(o->type, sizeof o->type, "%s", x.type);
        snprintf(o->host, sizeof o->host, "%s", x.host_name);
        o->node_id = rt->ops->node_id(rt, x.host);
        o->vendor = x.vendor;
        o->device = x.device;
        o->class_code = x.class_code;
        o->vf = x.vf;
        o->available = x.available;
        o->exclusive = x.exclusive;
        o->borrowers = x.borrowers;
        o->managed = x.managed;
        if (x.managed) {
            o->manager_node = rt->ops->node_id(rt, x.manager_host);
            o->manager_pid = x.manager_pid;
        }
    }
    rt_put(rt);
    return n;
}

int sio_find(const char *name)
{
    struct rt *rt = rt_get();
    if (!rt)
        return -errno;
    int i = rt->ops->func_by_name(rt, name);
    rt_put(rt);
    return i;
}

int smartio_call(struct rt *rt, uint32_t op, uint32_t flags, uint64_t a, uint64_t b, uint64_t c,
             struct agent_rsp *rsp)
{
    struct agent_req q = { .op = op, .flags = flags, .a = a, .b = b, .c = c };
    return rt_request(rt, &q, rsp);
}

int sio_set_available(uint32_t id, bool available)
{
    struct rt *rt = rt_get();
    if (!rt)
        return -errno;
    int rc = smartio_call(rt, AGENT_DEV_AVAILABLE, 0, id, available, 0, NULL);
    rt_put(rt);
    return rc;
}

int smartio_borrow(uint32_t id, unsigned mode, sio_dev_t **out)
{
    sio_dev_t *d = calloc(1, sizeof *d);
    if (!d)
        return -ENOMEM;
    d->rt = rt_get();
    if (!d->rt) {
        int e = -errno;
        free(d);
        return e;
    }
    struct rt *rt = d->rt;
    int rc = rt->ops->func_info(rt, id, &d->info);
    if (!rc)
        rc = smartio_call(rt, AGENT_DEV_BORROW, 0, id, mode, 0, NULL);
    if (rc) {
        rt_put(d->rt);
        free(d);
        return rc;
    }
    d->fn = id;
    d->mode = mode;
    d->lender = d->info.host;
    d->ai = d->peer_ai = -1;
    uint32_t peer_ai;
    int ai = d->lender == rt->host ? -1 : rt->ops->adapter_toward(rt, rt->host, d->lender, &peer_ai);
    if (ai >= 0) {
        d->ai = ai;
        d->peer_ai = (int)peer_ai;
    }
    smartio_path_init(d);
    smartio_stream_init(d);
    *out = d;
    return 0;
}

int sio_borrow(uint32_t id, unsigned mode, sio_dev_t **out)
{
    if (!out || (mode != SIO_EXCLUSIVE && mode != SIO_SHARED))
        return -EINVAL; /* a function of this host's tree is bound with sio_bind */
    return smartio_borrow(id, mode, out);
}

int sio_share(sio_dev_t *d)
{
    int rc = smartio_call(d->rt, AGENT_DEV_SHARE, 0, d->fn, 0, 0, NULL);
    if (!rc)
        d->mode = SIO_SHARED;
    return rc;
}

int sio_return(sio_dev_t *d)
{
    if (!d)
        return -EINVAL;
    smartio_stream_release(d);
    int rc = smartio_call(d->rt, AGENT_DEV_RETURN, 0, d->fn, 0, 0, NULL); /* drops its mappings */
    free(d->msi);
    pthread_mutex_destroy(&d->stream_lock);
    rt_put(d->rt);
    free(d);
    return rc;
}

uint32_t sio_id(const sio_dev_t *d) { return d->fn; }

uint32_t sio_cfg_read(sio_dev_t *d, uint32_t off, uint32_t len)
{
    return d->rt->ops->cfg_read(d->rt, d->fn, off, len);
}

int sio_cfg_write(sio_dev_t *d, uint32_t off, uint32_t len, uint32_t val)
{
    return d->rt->ops->cfg_write(d->rt, d->fn, off, len, val);
}

int sio_enable(sio_dev_t *d)
{
    uint32_t cmd = sio_cfg_read(d, 0x04, 2);
    return sio_cfg_write(d, 0x04, 2, cmd | PCI_CMD_MEM | PCI_CMD_BME);
}

/* ---------------------------------------------------------------- BARs */

volatile void *sio_map_bar(sio_dev_t *d, int bar, size_t *size, sio_bar_t **out)
{
    struct rt *rt = d->rt;
    if (bar < 0 || bar >= NTB_BK_BARS || !d->info.bar[bar].size || !out) {
        errno = EINVAL;
        return NULL;
    }
    const typeof(d->info.bar[0]) *b = &d->info.bar[bar];
    sio_bar_t *m = calloc(1, sizeof *m);
    if (!m) {
        errno = ENOMEM;
        return NULL;
    }
    *m = (sio_bar_t){ .dev = d, .size = b->size, .ai = d->ai, .peer_ai = d->peer_ai, .bar = bar };
    if (d->lender == d->rt->host) {
        m->ptr = rt->ops->bar_mem(rt, d->fn, bar);
    } else if (d->tree_bar[bar]) {
        /* Bound in this host's tree: where its hot-add mapped it, not a second window (LUT
         * entries are scarce). */
        int rc = smartio_tree_bar_map(d, bar, m);
        if (rc) {
            free(m);
            errno = -rc;
            return NULL;
        }
    } else if (d->ai >= 0) {
        int rc = rt_window_open(rt, (uint32_t)d->ai, d->lender, b->addr, b->size, false, &m->win);
        if (rc) {
            free(m);
            errno = -rc;
            return NULL;
        }
        m->ptr = (volatile char *)m->win.ptr;
    } else {
        errno = EHOSTUNREACH;
    }
    if (!m->ptr) {
        free(m);
        return NULL;
    }
    if (size)
        *size = b->size;
    *out = m;
    return m->ptr;
}

int sio_unmap_bar(sio_bar_t *m)
{
    if (!m)
        return -EINVAL;
    if (m->tree_base)
        m->dev->rt->ops->window_cpu_unmap(m->dev->rt, m->tree_base);
    rt_window_close(m->dev->rt, &m->win);
    if (m->alt.count)
        m->dev->rt->ops->window_unmap(m->dev->rt, &m->alt);
    free(m);
    return 0;
}

/* The device sees a register write (its model wakes) only if the write reached it: over the
 * mapping's path, or over its second path while the first is down. */
static void notify(sio_bar_t *m)
{
    sio_dev_t *d = m->dev;
    if ((m->win.map || m->tree_base) &&
        !d->rt->ops->path_up(d->rt, (uint32_t)m->ai, (uint32_t)m->peer_ai) &&
        !(m->alt.count &&
          d->rt->ops->path_up(d->rt, (uint32_t)m->alt_ai, (uint32_t)m->alt_peer_ai)))
        return;
    d->rt->ops->fn_notify(d->rt, d->fn);
}

int sio_device_cpu(const sio_dev_t *d)
{
    const _Atomic uint32_t *w = d && d->rt->ops->fn_cpu_word ? d->rt->ops->fn_cpu_word(d->rt, d->fn)
                                                            : NULL;
    return w ? (int)atomic_load_explicit(w, memory_order_relaxed) - 1 : -1;
}

void sio_driver_asleep(sio_dev_t *d, bool asleep)
{
    if (d && d->rt->ops->fn_driver_asleep)
        d->rt->ops->fn_driver_asleep(d->rt, d->fn, asleep);
}

void sio_write32(sio_bar_t *m, size_t off, uint32_t v)
{
    *(volatile uint32_t *)(m->ptr + off) = v;
    notify(m);
}

void sio_write64(sio_bar_t *m, size_t off, uint64_t v)
{
    *(volatile uint64_t *)(m->ptr + off) = v;
    notify(m);
}

uint32_t sio_read32(sio_bar_t *m, size_t off) { return *(volatile uint32_t *)(m->ptr + off); }
uint64_t sio_read64(sio_bar_t *m, size_t off) { return *(volatile uint64_t *)(m->ptr + off); }

/* ---------------------------------------------------------------- memory for the device */

/* at: at the I/O address *ioaddr (AGENT_DEV_MAP_AT). */
static int map_host_as(sio_dev_t *d, uint32_t host, uint64_t addr, size_t size, bool at,
                       uint64_t *ioaddr, sio_dma_t **out)
{
    if (!size || !ioaddr || !out)
        return -EINVAL;
    sio_dma_t *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    uint64_t pages = ((addr & 4095) + size + 4095) / 4096;
    struct agent_rsp rsp;
    /* The lender's end of the path chosen (sio_set_path): its window goes through that adapter. */
    uint64_t via = d->peer_ai >= 0 ? (uint64_t)d->peer_ai + 1 : 0;
    int rc = pages > UINT32_MAX ? -EINVAL
             : at ? smartio_call(d->rt, AGENT_DEV_MAP_AT, (uint32_t)pages,
                                 d->fn | (uint64_t)host << 32, addr, *ioaddr, &rsp)
                  : smartio_call(d->rt, AGENT_DEV_MAP, (uint32_t)pages, d->fn | via << 32, host,
                                 addr, &rsp);
    if (rc) {
        free(m);
        return rc;
    }
    m->dev = d;
    m->id = (uint32_t)rsp.b;
    *ioaddr = rsp.a;
    *out = m;
    return 0;
}

int smartio_map_host(sio_dev_t *d, uint32_t host, uint64_t addr, size_t size, uint64_t *ioaddr,
                     sio_dma_t **out)
{
    return map_host_as(d, host, addr, size, false, ioaddr, out);
}

int sio_map_addr_at(sio_dev_t *d, uint32_t node_id, uint64_t addr, size_t size, uint64_t ioaddr,
                    sio_dma_t **out)
{
    int h = d->rt->ops->host_by_node(d->rt, node_id);
    return h < 0 ? h : map_host_as(d, (uint32_t)h, addr, size, true, &ioaddr, out);
}

int sio_map_peer_bar_at(sio_dev_t *d, sio_dev_t *peer, int bar, uint64_t ioaddr, sio_dma_t **out)
{
    if (!peer || bar < 0 || bar >= NTB_BK_BARS || !peer->info.bar[bar].size)
        return -EINVAL;
    return map_host_as(d, peer->lender, peer->info.bar[bar].addr, peer->info.bar[bar].size, true,
                       &ioaddr, out);
}

int sio_map_addr(sio_dev_t *d, uint32_t node_id, uint64_t addr, size_t size, uint64_t *ioaddr,
                 sio_dma_t **out)
{
    int h = d->rt->ops->host_by_node(d->rt, node_id);
    return h < 0 ? h : smartio_map_host(d, (uint32_t)h, addr, size, ioaddr, out);
}

int sio_map_local(sio_dev_t *d, seg_local_t *seg, size_t off, size_t size, uint64_t *ioaddr,
                  sio_dma_t **out)
{
    if (!seg || off > seg->size || size > seg->size - off)
        return -EINVAL;
    return smartio_map_host(d, d->rt->host, seg->phys + off, size, ioaddr, out);
}

int sio_map_remote(sio_dev_t *d, seg_remote_t *seg, size_t off, size_t size, uint64_t *ioaddr,
                   sio_dma_t **out)
{
    if (!seg || off > seg->size || size > seg->size - off)
        return -EINVAL;
    return smartio_map_host(d, seg->owner, seg->bus + off, size, ioaddr, out);
}

int sio_map_peer_bar(sio_dev_t *d, sio_dev_t *peer, int bar, uint64_t *ioaddr, sio_dma_t **out)
{
    if (!peer || bar < 0 || bar >= NTB_BK_BARS || !peer->info.bar[bar].size)
        return -EINVAL;
    return smartio_map_host(d, peer->lender, peer->info.bar[bar].addr, peer->info.bar[bar].size, ioaddr, out);
}

int sio_unmap(sio_dma_t *m)
{
    if (!m)
        return -EINVAL;
    int rc = smartio_call(m->dev->rt, AGENT_DEV_UNMAP, 0, m->dev->fn, m->id, 0, NULL);
    free(m);
    return rc;
}

/* ---------------------------------------------------------------- interrupts */

int sio_msi_at(sio_dev_t *d, uint64_t ioaddr)
{
    if (d->msi)
        return -EALREADY;
    int rc = map_host_as(d, d->rt->host, d->rt->ops->msi_addr, 4096, true, &ioaddr, &d->msi);
    if (rc)
        d->msi = NULL;
    else
        d->msi_io = ioaddr;
    return rc;
}

int sio_enable_vector(sio_dev_t *d, uint32_t vector, uint32_t host_vector)
{
    const struct ntb_backend_ops *ops = d->rt->ops;
    if (host_vector >= ops->msi_vectors)
        return -EINVAL;
    uint32_t msix = d->info.msix_cap;
    uint16_t ctrl = (uint16_t)sio_cfg_read(d, msix + 2, 2);
    if (vector > (ctrl & 0x7ffu))
        return -EINVAL;
    /* The device's MSI write must reach this host's MSI region: map it for the device (once;
     * the mapping lives until the device is returned). */
    if (!d->msi) {
        int rc = smartio_map_host(d, d->rt->host, ops->msi_addr, 4096, &d->msi_io, &d->msi);
        if (rc)
            return rc;
    }
    uint64_t io = d->msi_io;
    uint32_t table = sio_cfg_read(d, msix + 4, 4) & ~7u;
    sio_bar_t *regs;
    if (!sio_map_bar(d, 0, NULL, &regs))
        return -errno;
    volatile uint32_t *e = (volatile uint32_t *)(regs->ptr + table + 16ull * vector);
    e[0] = (uint32_t)io;
    e[1] = (uint32_t)(io >> 32);
    e[2] = host_vector;
    e[3] = 0;
    sio_unmap_bar(regs);
    return sio_cfg_write(d, msix + 2, 2, ctrl | 0x8000u);
}

int sio_host_vectors(void)
{
    struct rt *rt = rt_get();
    if (!rt)
        return -errno;
    int n = (int)rt->ops->msi_vectors;
    rt_put(rt);
    return n;
}

int sio_wait_vector(uint32_t host_vector, uint32_t *seen, int timeout_ms)
{
    if (!seen)
        return -EINVAL;
    struct rt *rt = rt_get();
    if (!rt)
        return -errno;
    if (host_vector >= rt->ops->msi_vectors) {
        rt_put(rt);
        return -EINVAL;
    }
    _Atomic uint32_t *w = rt->ops->msi_word(rt, host_vector);
    uint64_t deadline = seg_deadline(timeout_ms);
    int rc = 0;
    for (;;) {
        uint32_t now = atomic_load(w);
        if (now != *seen) {
            *seen = now;
            break;
        }
        if (seg_futex_wait_ms(&seg_intr_site, w, now, deadline)) {
            rc = -ETIMEDOUT;
            break;
        }
    }
    rt_put(rt);
    return rc;
}

/* ---------------------------------------------------------------- placement */

struct sio_mem {
    sio_dev_t *dev;
    seg_desc_t *sd;
    seg_local_t *local;   /* placed here */
    seg_remote_t *remote; /* placed in the lender */
    seg_map_t *map;
    sio_dma_t *dma;
    uint32_t host, id;
};

static bool place_at_lender(const sio_dev_t *d, unsigned hints)
{
    if (d->lender == d->rt->host)
        return false;
    if (hints & SIO_HINT_MULTI_HOST)
        return true;
    /* Whoever reads it should have it close: the device reading a queue across the NTB pays a
     * round trip per fetch, the CPU writing it there only a posted write. */
    return (hints & SIO_HINT_DEVICE_READ) && !(hints & SIO_HINT_HOST_READ);
}

/* The number, on this host, of the adapter facing the lender; -EHOSTUNREACH if none. */
static int adapter_index(const sio_dev_t *d)
{
    for (int i = 0; d->ai >= 0; i++) {
        int a = d->rt->ops->adapter(d->rt, d->rt->host, i);
        if (a < 0)
            break;
        if (a == d->ai)
            return i;
    }
    return -EHOSTUNREACH;
}

int sio_alloc(sio_dev_t *d, size_t size, unsigned hints, volatile void **cpu, uint64_t *ioaddr,
              sio_mem_t **out)
{
    if (!d || !size || !cpu || !ioaddr || !out || (hints & ~0x1fu))
        return -EINVAL;
    sio_mem_t *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    m->dev = d;
    int rc = seg_open(&m->sd);
    if (rc) {
        free(m);
        return rc;
    }
    struct rt *rt = d->rt;
    if (place_at_lender(d, hints)) {
        struct agent_rsp r;
        m->host = d->lender;
        rc = smartio_call(d->rt, AGENT_SEG_ALLOC_AT, 0, d->lender, size, 0, &r);
        if (!rc) {
            m->id = (uint32_t)r.a;
            int adapter = adapter_index(d);
            rc = adapter < 0 ? adapter
                             : seg_connect(m->sd, &m->remote, rt->ops->node_id(rt, d->lender), m->id,
                                           adapter, 2000);
            if (!rc)
                *cpu = seg_map_remote(m->remote, 0, size, 0, &m->map);
            if (!rc && !*cpu)
                rc = -errno;
            if (!rc)
                rc = sio_map_remote(d, m->remote, 0, size, ioaddr, &m->dma);
        }
    } else {
        m->host = d->rt->host;
        rc = seg_create(m->sd, &m->local, 0, size);
        if (!rc)
            *cpu = seg_map_local(m->local, 0, size, 0, &m->map);
        if (!rc && !*cpu)
            rc = -errno;
        if (!rc)
            rc = sio_map_local(d, m->local, 0, size, ioaddr, &m->dma);
    }
    if (rc) {
        m->dma = NULL;
        sio_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

uint32_t sio_mem_node(const sio_mem_t *m) { return m->dev->rt->ops->node_id(m->dev->rt, m->host); }

int sio_free(sio_mem_t *m)
{
    if (!m)
        return -EINVAL;
    int rc = 0;
    if (m->dma)
        rc = sio_unmap(m->dma);
    if (m->map)
        seg_unmap(m->map);
    if (m->remote)
        seg_disconnect(m->remote);
    if (m->local)
        seg_remove(m->local);
    if (m->id)
        smartio_call(m->dev->rt, AGENT_SEG_FREE_AT, 0, m->host, m->id, 0, NULL);
    seg_close(m->sd);
    free(m);
    return rc;
}
