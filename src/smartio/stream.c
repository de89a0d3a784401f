/*
 * Streaming DMA (sio_stream_map in include/ntblend/smartio.h; smartio-tocs-2021 §4.3 "DMA
 * Window"): a buffer of sio_ram_alloc memory mapped for a device around one I/O, with no
 * request to the agent or the lender per mapping. A device's way is decided once, on its
 * first mapping: with this host's IOMMU on, an I/O virtual range of a domain this process
 * inserts pages into (the backend's iommu_map) — for a device of this host its own requester
 * ID's domain, for a device of another host its slice of that lender's DMA aperture
 * (AGENT_DEV_APERTURE: a window of the lender's adapter onto a range of the domain of our
 * adapter facing it, shared by every device of that lender this process maps for); with it
 * off, the physical address (a device of this host), or a window the lender makes for each
 * mapping (sio_map_addr: the paper's fallback, a request per mapping).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>

#include "sio_int.h"

#define PAGE 4096ull
/* A device of this host maps into its own domain, this process's alone. */
#define LOCAL_IOVA (1ull << 45)
#define LOCAL_PAGES 16384u /* 64 MiB */

/* An I/O virtual range of one IOMMU domain this process maps buffers into: a local device's
 * own, or this process's slice of a lender's aperture, shared by that lender's devices. */
struct sio_dom {
    struct sio_dom *next;
    uint32_t lender;      /* UINT32_MAX: a device of this host's own */
    uint16_t rid;         /* the domain: the requester ID the device's traffic arrives with */
    uint64_t iova, io;    /* the range in the domain, and where the device reaches its start */
    uint32_t pages;
    unsigned refs;        /* devices using it */
    pthread_mutex_t lock;
    uint64_t *busy;       /* a bit per page */
    struct dom_run { sio_dev_t *dev; uint32_t pages; } *runs; /* by first page */
    uint32_t hint;        /* where the next search starts */
};

/* A mapping the lender made (SIO_STREAM_BY_LENDER). */
struct sio_stream_map {
    struct sio_stream_map *next;
    uint64_t io;          /* what the caller got */
    sio_dma_t *map;
};

static struct {
    pthread_mutex_t lock; /* the device list */
    sio_dev_t *devs;
    pthread_mutex_t doms_lock;
    struct sio_dom *doms; /* the apertures' domains */
} streams = { .lock = PTHREAD_MUTEX_INITIALIZER, .doms_lock = PTHREAD_MUTEX_INITIALIZER };

void smartio_stream_init(sio_dev_t *d)
{
    pthread_mutex_init(&d->stream_lock, NULL);
    pthread_mutex_lock(&streams.lock);
    d->next = streams.devs;
    streams.devs = d;
    pthread_mutex_unlock(&streams.lock);
}

static struct sio_dom *dom_new(uint32_t lender, uint16_t rid, uint64_t iova, uint64_t io,
                               uint64_t size)
{
    struct sio_dom *m = calloc(1, sizeof *m);
    uint32_t pages = (uint32_t)(size / PAGE);
    if (m) {
        *m = (struct sio_dom){ .lender = lender, .rid = rid, .iova = iova, .io = io,
                               .pages = pages, .refs = 1, .busy = calloc((pages + 63) / 64, 8),
                               .runs = calloc(pages, sizeof *m->runs) };
        pthread_mutex_init(&m->lock, NULL);
    }
    if (m && (!m->busy || !m->runs || !pages)) {
        pthread_mutex_destroy(&m->lock);
        free(m->busy);
        free(m->runs);
        free(m);
        m = NULL;
    }
    return m;
}

static void dom_free(struct sio_dom *m)
{
    pthread_mutex_destroy(&m->lock);
    free(m->busy);
    free(m->runs);
    free(m);
}

/* d leaves its domain (its mappings gone): its hold on the lender's aperture goes, and the
 * domain with its last device. */
static void dom_leave(sio_dev_t *d)
{
    struct sio_dom *m = d->dom;
    if (m->lender != UINT32_MAX)
        smartio_call(d->rt, AGENT_DEV_APERTURE, 0, d->fn, 0, 0, NULL);
    pthread_mutex_lock(&streams.doms_lock);
    bool last = --m->refs == 0;
    for (struct sio_dom **pp = &streams.doms; *pp && last; pp = &(*pp)->next)
        if (*pp == m) {
            *pp = m->next;
            break;
        }
    pthread_mutex_unlock(&streams.doms_lock);
    if (last)
        dom_free(m);
    d->dom = NULL;
    d->stream = SIO_STREAM_UNSET;
}

/* The lender has no requester-ID (or LUT) entry left for d: let go of the aperture holds of
 * this process's other devices of that lender that have nothing mapped now (they take them
 * again on their next mapping). Returns how many went. */
static int reclaim_idle(sio_dev_t *d)
{
    int n = 0;
    pthread_mutex_lock(&streams.lock);
    for (sio_dev_t *o = streams.devs; o; o = o->next) {
        if (o == d || o->lender != d->lender)
            continue;
        pthread_mutex_lock(&o->stream_lock);
        if (o->stream == SIO_STREAM_IOMMU && !atomic_load(&o->streaming)) {
            dom_leave(o);
            n++;
        }
        pthread_mutex_unlock(&o->stream_lock);
    }
    pthread_mutex_unlock(&streams.lock);
    return n;
}

/* Decide, on the first mapping of d, how it maps (d->stream_lock held). */
static int setup(sio_dev_t *d)
{
    if (d->stream != SIO_STREAM_UNSET)
        return 0;
    struct rt *rt = d->rt;
    const struct ntb_backend_ops *ops = rt->ops;
    bool iommu = ops->iommu_on && ops->iommu_on(rt, rt->host) == 1;
    bool local = d->lender == rt->host;
    if (!iommu) {
        d->stream = local ? SIO_STREAM_PHYS : SIO_STREAM_BY_LENDER;
        return 0;
    }
    if (local) {
        if (d->mode == SIO_SHARED)
            return -EBUSY; /* its domain is not this process's alone */
        d->dom = dom_new(UINT32_MAX, d->info.bdf, LOCAL_IOVA, LOCAL_IOVA, LOCAL_PAGES * PAGE);
        if (!d->dom)
            return -ENOMEM;
        d->stream = SIO_STREAM_IOMMU;
        return 0;
    }
    /* The lender lets d through onto its aperture (set up by the first of its devices):
     * one request, now, and none per mapping. */
    struct ntb_adapter_info a;
    if (d->ai < 0)
        return -EHOSTUNREACH;
    if (!ops->adapter_info)
        return -EOPNOTSUPP;
    int rc = ops->adapter_info(rt, (uint32_t)d->ai, &a);
    struct agent_rsp r;
    if (rc || (rc = smartio_call(rt, AGENT_DEV_APERTURE, 0, d->fn, 1, 0, &r)))
        return rc;
    pthread_mutex_lock(&streams.doms_lock);
    struct sio_dom *m = streams.doms;
    while (m && !(m->lender == d->lender && m->iova == r.b))
        m = m->next;
    if (m) {
        m->refs++;
    } else if ((m = dom_new(d->lender, a.rid, r.b, r.a, r.c))) {
        m->next = streams.doms;
        streams.doms = m;
    }
    pthread_mutex_unlock(&streams.doms_lock);
    if (!m) {
        smartio_call(rt, AGENT_DEV_APERTURE, 0, d->fn, 0, 0, NULL);
        return -ENOMEM;
    }
    d->dom = m;
    d->stream = SIO_STREAM_IOMMU;
    return 0;
}

/* Unmap the run at page `at` of the domain (its own mapping). */
static void dom_unmap(struct rt *rt, struct sio_dom *m, uint32_t at)
{
    uint32_t n = m->runs[at].pages;
    rt->ops->iommu_unmap(rt, m->rid, m->iova + (uint64_t)at * PAGE, (uint64_t)n * PAGE);
    pthread_mutex_lock(&m->lock);
    smartio_bits(m->busy, at, n, false);
    m->runs[at] = (struct dom_run){ 0 };
    pthread_mutex_unlock(&m->lock);
}

/* No IOMMU here to map into: the lender maps this buffer itself, a window of its adapter
 * onto it. */
static int map_by_lender(sio_dev_t *d, uint64_t phys, size_t size, uint64_t *ioaddr)
{
    struct sio_stream_map *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    struct rt *rt = d->rt;
    int rc = sio_map_addr(d, rt->ops->node_id(rt, rt->host), phys, size, &p->io, &p->map);
    if (rc) {
        free(p);
        return rc;
    }
    pthread_mutex_lock(&d->stream_lock);
    p->next = d->by_lender;
    d->by_lender = p;
    pthread_mutex_unlock(&d->stream_lock);
    *ioaddr = p->io;
    return 0;
}

static int map_one(sio_dev_t *d, uint64_t phys, size_t size, unsigned access, uint64_t *ioaddr)
{
    uint64_t first = phys & ~(PAGE - 1), off = phys - first;
    uint64_t n = (off + size + PAGE - 1) / PAGE;
    if (d->stream == SIO_STREAM_PHYS) {
        *ioaddr = phys;
        return 0;
    }
    if (d->stream == SIO_STREAM_BY_LENDER)
        return map_by_lender(d, phys, size, ioaddr);
    struct sio_dom *m = d->dom;
    pthread_mutex_lock(&m->lock);
    int64_t at = smartio_find_run(m->busy, m->pages, n, m->hint);
    if (at >= 0) {
        smartio_bits(m->busy, (uint64_t)at, n, true);
        m->runs[at] = (struct dom_run){ .dev = d, .pages = (uint32_t)n };
        m->hint = (uint32_t)((uint64_t)at + n) % m->pages;
    }
    pthread_mutex_unlock(&m->lock);
    if (at < 0)
        return -ENOSPC; /* the range is full: unmap something */
    unsigned perm = (access & SIO_DMA_READ ? NTB_IOMMU_READ : 0) |
                    (access & SIO_DMA_WRITE ? NTB_IOMMU_WRITE : 0);
    struct rt *rt = d->rt;
    int rc = rt->ops->iommu_map(rt, m->rid, m->iova + (uint64_t)at * PAGE, first, n * PAGE, perm);
    if (rc) {
        pthread_mutex_lock(&m->lock);
        smartio_bits(m->busy, (uint64_t)at, n, false);
        m->runs[at] = (struct dom_run){ 0 };
        pthread_mutex_unlock(&m->lock);
        return rc == -EEXIST ? -ENOSPC : rc;
    }
    *ioaddr = m->io + (uint64_t)at * PAGE + off;
    return 0;
}

int sio_stream_map(sio_dev_t *d, void *cpu, size_t size, unsigned access, uint64_t *ioaddr)
{
    uint64_t phys;
    if (!d || !ioaddr || !size || !access || (access & ~(SIO_DMA_READ | SIO_DMA_WRITE)) ||
        smartio_ram_phys(cpu, size, &phys))
        return -EINVAL;
    /* A mapping in flight counts as one from here: its device's domain stays. */
    pthread_mutex_lock(&d->stream_lock);
    int rc = setup(d);
    if (!rc)
        atomic_fetch_add(&d->streaming, 1);
    pthread_mutex_unlock(&d->stream_lock);
    if (rc == -ENOSPC && d->lender != d->rt->host && reclaim_idle(d)) {
        pthread_mutex_lock(&d->stream_lock);
        if (!(rc = setup(d)))
            atomic_fetch_add(&d->streaming, 1);
        pthread_mutex_unlock(&d->stream_lock);
    }
    if (rc)
        return rc == -EOPNOTSUPP ? -ENOSPC : rc;
    rc = map_one(d, phys, size, access, ioaddr);
    if (rc || d->stream != SIO_STREAM_IOMMU)
        atomic_fetch_sub(&d->streaming, 1); /* counted are the domain's mappings */
    return rc;
}

int sio_stream_unmap(sio_dev_t *d, uint64_t ioaddr, size_t size)
{
    (void)size;
    if (!d)
        return -EINVAL;
    if (d->stream == SIO_STREAM_PHYS)
        return 0; /* nothing was mapped */
    if (d->stream == SIO_STREAM_BY_LENDER) {
        struct sio_stream_map *found = NULL;
        pthread_mutex_lock(&d->stream_lock);
        for (struct sio_stream_map **pp = &d->by_lender; *pp; pp = &(*pp)->next)
            if ((*pp)->io == ioaddr) {
                found = *pp;
                *pp = found->next;
                break;
            }
        pthread_mutex_unlock(&d->stream_lock);
        if (!found)
            return -ENOENT;
        sio_unmap(found->map);
        free(found);
        return 0;
    }
    struct sio_dom *m = d->stream == SIO_STREAM_IOMMU ? d->dom : NULL;
    uint64_t at = m && ioaddr >= m->io ? (ioaddr - m->io) / PAGE : UINT64_MAX;
    bool mine = false;
    if (m && at < m->pages) {
        pthread_mutex_lock(&m->lock);
        mine = m->runs[at].dev == d && m->runs[at].pages;
        pthread_mutex_unlock(&m->lock);
    }
    if (!mine)
        return -ENOENT;
    dom_unmap(d->rt, m, (uint32_t)at);
    atomic_fetch_sub(&d->streaming, 1);
    return 0;
}

void smartio_stream_release(sio_dev_t *d)
{
    pthread_mutex_lock(&streams.lock);
    for (sio_dev_t **pp = &streams.devs; *pp; pp = &(*pp)->next)
        if (*pp == d) {
            *pp = d->next;
            break;
        }
    pthread_mutex_unlock(&streams.lock);
    while (d->by_lender) {
        struct sio_stream_map *p = d->by_lender;
        d->by_lender = p->next;
        sio_unmap(p->map);
        free(p);
    }
    struct sio_dom *m = d->dom;
    if (!m)
        return;
    pthread_mutex_lock(&m->lock); /* other devices may be mapping into a shared domain */
    for (uint32_t i = 0; i < m->pages; i++)
        if (m->runs[i].dev == d && m->runs[i].pages) {
            pthread_mutex_unlock(&m->lock);
            dom_unmap(d->rt, m, i);
            pthread_mutex_lock(&m->lock);
        }
    pthread_mutex_unlock(&m->lock);
    dom_leave(d);
}
