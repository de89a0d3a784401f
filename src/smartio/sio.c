/*
 * SmartIO device-driver API (include/ntblend/smartio.h): the device registry as the fabric
 * enumerates it, borrowing through the lender's agent, BARs mapped through the borrower's NTB
 * window, register accessors that notify the device (writel), memory mapped for the device
 * with the address resolved by the lender (smartio §4.4), and MSI-X routed to the borrower.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ntblend/smartio.h"
#include "runtime.h"
#include "seg_int.h"

struct sio_dev {
    struct rt *rt;
    sio_dma_t *msi;  /* this host's MSI region, mapped for the device once */
    uint64_t msi_io;
    uint32_t fn, lender;
    int ai, peer_ai; /* our adapter facing the lender and the lender's, -1 when local */
};

struct sio_bar {
    sio_dev_t *dev;
    struct rt_window win; /* through our adapter; win.map is NULL when the device is here */
    volatile char *ptr;
    size_t size;
};

struct sio_dma {
    sio_dev_t *dev;
    uint32_t id;
};

static struct fab_function *FN(const sio_dev_t *d) { return fab_func(d->rt->f, d->fn); }

int sio_list(struct sio_info *out, int max)
{
    struct rt *rt = rt_get();
    if (!rt)
        return -errno;
    struct fab *f = rt->f;
    int n = (int)f->ctl->nfuncs;
    for (int i = 0; i < n && i < max; i++) {
        const struct fab_function *x = fab_func(f, (uint32_t)i);
        const struct fab_host *h = fab_host(f, x->host);
        struct sio_info *o = &out[i];
        memset(o, 0, sizeof *o);
        o->id = (uint32_t)i;
        snprintf(o->name, sizeof o->name, "%s", x->name);
        snprintf(o->type, sizeof o->type, "%s", x->type);
        snprintf(o->host, sizeof o->host, "%s", h->name);
        o->node_id = h->node_id;
        memcpy(&o->vendor, x->cfg, 2);
        memcpy(&o->device, x->cfg + 2, 2);
        o->class_code = (uint32_t)x->cfg[0x0b] << 16 | (uint32_t)x->cfg[0x0a] << 8 | x->cfg[0x09];
        o->vf = x->vf;
        o->available = atomic_load(&x->lend_available);
        o->exclusive = atomic_load(&x->lend_exclusive);
        for (int k = 0; k < 4; k++)
            o->borrowers += (uint32_t)__builtin_popcountll(atomic_load(&x->lend_borrowers[k]));
    }
    rt_put(rt);
    return n;
}

int sio_find(const char *name)
{
    struct rt *rt = rt_get();
    if (!rt)
        return -errno;
    int i = fab_func_by_name(rt->f, name);
    rt_put(rt);
    return i < 0 ? -ENOENT : i;
}

static int call(struct rt *rt, uint32_t op, uint32_t flags, uint64_t a, uint64_t b, uint64_t c,
                struct agent_rsp *rsp)
{
    struct agent_req q = { .op = op, .flags = flags, .a = a, .b = b, .c = c };
    struct agent_rsp tmp;
    pthread_mutex_lock(&rt->agent_lock);
    int rc = agent_call(rt->agent_fd, &q, rsp ? rsp : &tmp, 10000);
    pthread_mutex_unlock(&rt->agent_lock);
    return rc;
}

int sio_set_available(uint32_t id, bool available)
{
    struct rt *rt = rt_get();
    if (!rt)
        return -errno;
    int rc = call(rt, AGENT_DEV_AVAILABLE, 0, id, available, 0, NULL);
    rt_put(rt);
    return rc;
}

int sio_borrow(uint32_t id, unsigned mode, sio_dev_t **out)
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
    struct fab *f = d->rt->f;
    int rc = id < f->ctl->nfuncs ? call(d->rt, AGENT_DEV_BORROW, 0, id, mode, 0, NULL) : -ENODEV;
    if (rc) {
        rt_put(d->rt);
        free(d);
        return rc;
    }
    d->fn = id;
    d->lender = fab_func(f, id)->host;
    d->ai = d->peer_ai = -1;
    uint32_t peer_ai;
    int ai = d->lender == d->rt->host ? -1 : fab_adapter_toward(f, d->rt->host, d->lender, &peer_ai);
    if (ai >= 0) {
        d->ai = ai;
        d->peer_ai = (int)peer_ai;
    }
    *out = d;
    return 0;
}

int sio_share(sio_dev_t *d) { return call(d->rt, AGENT_DEV_SHARE, 0, d->fn, 0, 0, NULL); }

int sio_return(sio_dev_t *d)
{
    if (!d)
        return -EINVAL;
    int rc = call(d->rt, AGENT_DEV_RETURN, 0, d->fn, 0, 0, NULL); /* drops its mappings */
    free(d->msi);
    rt_put(d->rt);
    free(d);
    return rc;
}

uint32_t sio_id(const sio_dev_t *d) { return d->fn; }

uint32_t sio_cfg_read(sio_dev_t *d, uint32_t off, uint32_t len)
{
    return fab_cfg_read(d->rt->f, d->fn, off, len);
}

int sio_cfg_write(sio_dev_t *d, uint32_t off, uint32_t len, uint32_t val)
{
    return fab_cfg_write(d->rt->f, d->fn, off, len, val);
}

int sio_enable(sio_dev_t *d)
{
    uint32_t cmd = sio_cfg_read(d, 0x04, 2);
    return sio_cfg_write(d, 0x04, 2, cmd | FAB_CMD_MEM | FAB_CMD_BME);
}

/* ---------------------------------------------------------------- BARs */

volatile void *sio_map_bar(sio_dev_t *d, int bar, size_t *size, sio_bar_t **out)
{
    struct fab *f = d->rt->f;
    if (bar < 0 || bar >= FAB_BARS || FN(d)->bar[bar].kind == FAB_BAR_NONE || !out) {
        errno = EINVAL;
        return NULL;
    }
    const struct fab_bar *b = &FN(d)->bar[bar];
    sio_bar_t *m = calloc(1, sizeof *m);
    if (!m) {
        errno = ENOMEM;
        return NULL;
    }
    *m = (sio_bar_t){ .dev = d, .size = b->size };
    if (d->lender == d->rt->host) {
        m->ptr = fab_bar_mem(f, d->fn, b->off, b->size);
    } else if (d->ai >= 0) {
        int rc = rt_window_open(d->rt, (uint32_t)d->ai, d->lender, b->addr, b->size, false, &m->win);
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
    rt_window_close(m->dev->rt, &m->win);
    free(m);
    return 0;
}

/* The device sees a register write (its model wakes) only if the write reached it. */
static void notify(sio_bar_t *m)
{
    sio_dev_t *d = m->dev;
    if (m->win.map && !fab_path_up(d->rt->f, (uint32_t)d->ai, (uint32_t)d->peer_ai, NULL))
        return;
    fab_fn_notify(d->rt->f, d->fn);
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

static int map_host(sio_dev_t *d, uint32_t host, uint64_t addr, size_t size, uint64_t *ioaddr,
                    sio_dma_t **out)
{
    if (!size || !ioaddr || !out)
        return -EINVAL;
    sio_dma_t *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    uint64_t pages = ((addr & 4095) + size + 4095) / 4096;
    struct agent_rsp rsp;
    int rc = pages > UINT32_MAX ? -EINVAL
                                : call(d->rt, AGENT_DEV_MAP, (uint32_t)pages, d->fn, host, addr, &rsp);
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

int sio_map_addr(sio_dev_t *d, uint32_t node_id, uint64_t addr, size_t size, uint64_t *ioaddr,
                 sio_dma_t **out)
{
    struct fab *f = d->rt->f;
    for (uint32_t h = 0; h < f->ctl->nhosts; h++)
        if (fab_host(f, h)->node_id == node_id)
            return map_host(d, h, addr, size, ioaddr, out);
    return -EHOSTUNREACH;
}

int sio_map_local(sio_dev_t *d, seg_local_t *seg, size_t off, size_t size, uint64_t *ioaddr,
                  sio_dma_t **out)
{
    if (!seg || off > seg->size || size > seg->size - off)
        return -EINVAL;
    return map_host(d, d->rt->host, seg->phys + off, size, ioaddr, out);
}

int sio_map_remote(sio_dev_t *d, seg_remote_t *seg, size_t off, size_t size, uint64_t *ioaddr,
                   sio_dma_t **out)
{
    if (!seg || off > seg->size || size > seg->size - off)
        return -EINVAL;
    return map_host(d, seg->owner, seg->bus + off, size, ioaddr, out);
}

int sio_map_peer_bar(sio_dev_t *d, sio_dev_t *peer, int bar, uint64_t *ioaddr, sio_dma_t **out)
{
    if (!peer || bar < 0 || bar >= FAB_BARS || FN(peer)->bar[bar].kind == FAB_BAR_NONE)
        return -EINVAL;
    const struct fab_bar *b = &FN(peer)->bar[bar];
    return map_host(d, peer->lender, b->addr, b->size, ioaddr, out);
}

int sio_unmap(sio_dma_t *m)
{
    if (!m)
        return -EINVAL;
    int rc = call(m->dev->rt, AGENT_DEV_UNMAP, 0, m->dev->fn, m->id, 0, NULL);
    free(m);
    return rc;
}

/* ---------------------------------------------------------------- interrupts */

int sio_enable_vector(sio_dev_t *d, uint32_t vector, uint32_t host_vector)
{
    if (host_vector >= FAB_MSI_VECTORS)
        return -EINVAL;
    uint16_t ctrl = (uint16_t)sio_cfg_read(d, FAB_CFG_MSIX + 2, 2);
    if (vector > (ctrl & 0x7ffu))
        return -EINVAL;
    /* The device's MSI write must reach this host's MSI region: map it for the device (once;
     * the mapping lives until the device is returned). */
    if (!d->msi) {
        int rc = map_host(d, d->rt->host, FAB_MSI_BASE, 4096, &d->msi_io, &d->msi);
        if (rc)
            return rc;
    }
    uint64_t io = d->msi_io;
    uint32_t table = sio_cfg_read(d, FAB_CFG_MSIX + 4, 4) & ~7u;
    sio_bar_t *regs;
    if (!sio_map_bar(d, 0, NULL, &regs))
        return -errno;
    volatile uint32_t *e = (volatile uint32_t *)(regs->ptr + table + 16ull * vector);
    e[0] = (uint32_t)io;
    e[1] = (uint32_t)(io >> 32);
    e[2] = host_vector;
    e[3] = 0;
    sio_unmap_bar(regs);
    return sio_cfg_write(d, FAB_CFG_MSIX + 2, 2, ctrl | 0x8000u);
}

int sio_wait_vector(uint32_t host_vector, uint32_t *seen, int timeout_ms)
{
    if (host_vector >= FAB_MSI_VECTORS || !seen)
        return -EINVAL;
    struct rt *rt = rt_get();
    if (!rt)
        return -errno;
    _Atomic uint32_t *w = &fab_host(rt->f, rt->host)->msi_seq[host_vector];
    uint64_t deadline = seg_deadline(timeout_ms);
    int rc = 0;
    for (;;) {
        uint32_t now = atomic_load(w);
        if (now != *seen) {
            *seen = now;
            break;
        }
        if (seg_futex_wait_ms(w, now, deadline)) {
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
    struct fab *f = d->rt->f;
    if (place_at_lender(d, hints)) {
        struct agent_rsp r;
        m->host = d->lender;
        rc = call(d->rt, AGENT_SEG_ALLOC_AT, 0, d->lender, size, 0, &r);
        if (!rc) {
            m->id = (uint32_t)r.a;
            int adapter = (int)((uint32_t)d->ai - fab_host(f, d->rt->host)->adapter_first);
            rc = seg_connect(m->sd, &m->remote, fab_host(f, d->lender)->node_id, m->id, adapter, 2000);
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

uint32_t sio_mem_node(const sio_mem_t *m) { return fab_host(m->dev->rt->f, m->host)->node_id; }

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
        call(m->dev->rt, AGENT_SEG_FREE_AT, 0, m->host, m->id, 0, NULL);
    seg_close(m->sd);
    free(m);
    return rc;
}
