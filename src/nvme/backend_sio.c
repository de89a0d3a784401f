/*
 * The SmartIO backend: the controller is a device borrowed through the SmartIO device-driver
 * API (ntblend/smartio.h). Registers through BAR0 mapped with sio_map_bar (across the NTB
 * when the device is in another host), memory by sio_alloc with access hints (placed in this
 * host or the device's), interrupts by sio_enable_vector / sio_wait_vector.
 *
 * With two paths to the device's host (docs/multipath.md) the backend serves failover.c:
 * BAR0 is mapped through both paths' adapters, and registers go through the one failover.c
 * says works (use_path), as the paper's driver maps "the NVMe device BAR through both its NTB
 * adapters"; data memory is this host's, mapped for the device over both paths (io and
 * io_alt); queue memory is placed as asked but mapped over one path (sio_set_path around
 * sio_alloc).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ntblend/seg.h"
#include "ntblend/smartio.h"
#include "nvme_int.h"

struct sio_ctx {
    sio_dev_t *dev;
    /* BAR0 over path 0 and path 1 (two paths), else bar[0] only: the mapping and where this
     * process sees it */
    struct sio_regs {
        sio_bar_t *map;
        volatile uint8_t *cpu;
    } bar[2];
    struct sio_regs *cur; /* registers go through this one: bar[0] or bar[1] */
    bool owned; /* borrowed by the library: returned on close */
    bool mp;    /* two paths, BAR0 on both */
    pthread_mutex_t path_lock; /* sio_set_path around one allocation */
};

/* DMA memory: SmartIO's placement, or this host's memory mapped over both paths. */
struct sio_buf {
    sio_mem_t *mem;
    seg_desc_t *sd;
    seg_local_t *seg;
    seg_map_t *map;
    sio_dma_t *dma[2];
};

static struct sio_regs *cur(struct sio_ctx *c) { return __atomic_load_n(&c->cur, __ATOMIC_RELAXED); }
static sio_bar_t *regs(struct sio_ctx *c) { return cur(c)->map; }

static uint32_t sio_rd32(void *ctx, uint32_t off) { return sio_read32(regs(ctx), off); }

static void sio_wr32(void *ctx, uint32_t off, uint32_t val) { sio_write32(regs(ctx), off, val); }

/* A plain store through the mapping: the model reads it when it next looks (sio_write32 also
 * tells it the register was written). */
static void sio_wr32_lazy(void *ctx, uint32_t off, uint32_t val)
{
    *(volatile uint32_t *)(cur(ctx)->cpu + off) = val;
}

static void sio_use_path(void *ctx, int path)
{
    struct sio_ctx *c = ctx;
    if (c->mp && path >= 0 && path < 2)
        __atomic_store_n(&c->cur, &c->bar[path], __ATOMIC_RELAXED);
}

static void buf_free(struct sio_buf *b)
{
    if (b->mem)
        sio_free(b->mem);
    for (int p = 1; p >= 0; p--)
        if (b->dma[p])
            sio_unmap(b->dma[p]);
    if (b->map)
        seg_unmap(b->map);
    if (b->seg)
        seg_remove(b->seg);
    if (b->sd)
        seg_close(b->sd);
    free(b);
}

/* Over the device's path now (path < 0), or over path `path`. */
static int placed(struct sio_ctx *c, size_t size, enum nvme_place where, int path,
                  struct nvl_dma *out)
{
    /* The device reads what goes near it; what the CPU reads stays here (smartio §7.4.1). */
    unsigned hints = where == NVME_PLACE_DEVICE ? SIO_HINT_DEVICE_READ
                                                : SIO_HINT_HOST_READ | SIO_HINT_DEVICE_WRITE;
    struct sio_buf *b = calloc(1, sizeof *b);
    if (!b)
        return -ENOMEM;
    volatile void *cpu;
    uint64_t io;
    pthread_mutex_lock(&c->path_lock);
    int was = sio_get_path(c->dev);
    int rc = path < 0 ? 0 : sio_set_path(c->dev, path);
    if (!rc)
        rc = sio_alloc(c->dev, size, hints, &cpu, &io, &b->mem);
    /* The lender offers the memory it places over its first path that works only: queue
     * memory for another path goes in this host (the device reads the SQ across the NTB). */
    if (rc == -ECONNREFUSED && path >= 0 && (hints & SIO_HINT_DEVICE_READ))
        rc = sio_alloc(c->dev, size, SIO_HINT_HOST_READ | SIO_HINT_DEVICE_WRITE, &cpu, &io,
                       &b->mem);
    if (path >= 0 && was >= 0)
        sio_set_path(c->dev, was);
    pthread_mutex_unlock(&c->path_lock);
    if (rc) {
        free(b);
        return rc;
    }
    *out = (struct nvl_dma){ .cpu = cpu, .io = io, .size = size, .handle = b };
    return 0;
}

/* This host's memory, mapped for the device over path 0 (io) and path 1 (io_alt). */
static int both_paths(struct sio_ctx *c, size_t size, struct nvl_dma *out)
{
    struct sio_buf *b = calloc(1, sizeof *b);
    if (!b)
        return -ENOMEM;
    volatile void *cpu = NULL;
    uint64_t io[2] = { 0, 0 };
    int rc = seg_open(&b->sd);
    if (!rc)
        rc = seg_create(b->sd, &b->seg, SEG_ID_AUTO, size);
    if (!rc && !(cpu = seg_map_local(b->seg, 0, size, 0, &b->map)))
        rc = errno ? -errno : -ENOMEM;
    pthread_mutex_lock(&c->path_lock);
    int was = sio_get_path(c->dev);
    for (int p = 0; p < 2 && !rc; p++)
        if (!(rc = sio_set_path(c->dev, p)))
            rc = sio_map_local(c->dev, b->seg, 0, size, &io[p], &b->dma[p]);
    if (was >= 0)
        sio_set_path(c->dev, was);
    pthread_mutex_unlock(&c->path_lock);
    if (rc) {
        buf_free(b);
        return rc;
    }
    *out = (struct nvl_dma){ .cpu = cpu, .io = io[0], .size = size, .handle = b,
                             .io_alt = io[1] };
    return 0;
}

static int sio_dalloc(void *ctx, size_t size, enum nvme_place where, struct nvl_dma *out)
{
    struct sio_ctx *c = ctx;
    /* Two paths: memory the device must reach whichever path works is this host's (memory in
     * the device's host would be reached by the CPU over one path only). */
    return c->mp ? both_paths(c, size, out) : placed(c, size, where, -1, out);
}

static int sio_dalloc_path(void *ctx, size_t size, enum nvme_place where, int path,
                           struct nvl_dma *out)
{
    return placed(ctx, size, where, path, out);
}

static void sio_dfree(void *ctx, struct nvl_dma *dma)
{
    (void)ctx;
    if (dma->handle)
        buf_free(dma->handle);
    dma->handle = NULL;
}

static int sio_npaths(void *ctx) { return ((struct sio_ctx *)ctx)->mp ? 2 : 1; }

static bool sio_up(void *ctx, int path) { return sio_path_up(((struct sio_ctx *)ctx)->dev, path); }

static int sio_irq_on(void *ctx, uint32_t dev_vector, uint32_t host_vector)
{
    return sio_enable_vector(((struct sio_ctx *)ctx)->dev, dev_vector, host_vector);
}

static int sio_irq_wait(void *ctx, uint32_t host_vector, uint32_t *seen, int timeout_ms)
{
    (void)ctx;
    return sio_wait_vector(host_vector, seen, timeout_ms);
}

static int sio_dev_cpu(void *ctx)
{
    struct sio_ctx *c = ctx;
    return sio_device_cpu(c->dev);
}

static void sio_drv_asleep(void *ctx, bool asleep)
{
    struct sio_ctx *c = ctx;
    sio_driver_asleep(c->dev, asleep);
}

static void sio_close(void *ctx)
{
    struct sio_ctx *c = ctx;
    for (int p = 0; p < 2; p++)
        if (c->bar[p].map)
            sio_unmap_bar(c->bar[p].map);
    if (c->owned)
        sio_return(c->dev);
    pthread_mutex_destroy(&c->path_lock);
    free(c);
}

static const struct nvme_backend_ops sio_ops = {
    .name = "smartio",
    .read32 = sio_rd32,
    .write32 = sio_wr32,
    .write32_lazy = sio_wr32_lazy,
    .dma_alloc = sio_dalloc,
    .dma_free = sio_dfree,
    .irq_enable = sio_irq_on,
    .irq_wait = sio_irq_wait,
    .close = sio_close,
    .paths = sio_npaths,
    .path_up = sio_up,
    .dma_alloc_path = sio_dalloc_path,
    .use_path = sio_use_path,
    .device_cpu = sio_dev_cpu,
    .driver_asleep = sio_drv_asleep,
};

int nvl_sio_lookup(const char *name, uint32_t *id, bool *managed, uint32_t *mgr_node,
                   uint32_t *mgr_pid)
{
    int n = sio_list(NULL, 0);
    if (n < 0)
        return nvl_fail(n, "cannot reach the fabric (%s): run the program on a host, with "
                           "ntblend run --host H", strerror(-n));
    struct sio_info *info = n > 0 ? calloc((size_t)n, sizeof *info) : NULL;
    if (n > 0 && !info)
        return -ENOMEM;
    n = n > 0 ? sio_list(info, n) : n;
    int rc = nvl_fail(-ENODEV, "no device '%s' in this fabric (see ntblend device list; run "
                               "the program with ntblend run --host H)", name);
    for (int i = 0; i < n; i++) {
        if (strcmp(info[i].name, name))
            continue;
        if (strcmp(info[i].type, "nvme")) {
            rc = nvl_fail(-ENODEV, "'%s' is a %s device, not an NVMe", name, info[i].type);
            break;
        }
        *id = info[i].id;
        *managed = info[i].managed;
        *mgr_node = info[i].manager_node;
        *mgr_pid = info[i].manager_pid;
        rc = 0;
        break;
    }
    free(info);
    return rc;
}

/* Borrow by name: the device must exist, be an NVMe and be lent out (or be in this host). */
static int borrow(const char *name, bool shared, sio_dev_t **dev)
{
    uint32_t id, node, pid;
    bool managed;
    int rc = nvl_sio_lookup(name, &id, &managed, &node, &pid);
    if (rc)
        return rc;
    rc = sio_borrow(id, shared ? SIO_SHARED : SIO_EXCLUSIVE, dev);
    if (rc == -EACCES)
        return nvl_fail(rc, "%s is not lent out by its host: ntblend device add %s", name, name);
    if ((rc == -EBUSY || rc == -EALREADY) && managed && !shared)
        return nvl_fail(-EBUSY, "%s is managed by process %u on node %u: open it as a client "
                                "of that manager (the default mode), or stop the manager first",
                        name, pid, node);
    if (rc == -EBUSY && shared)
        return nvl_fail(rc, "%s is held exclusively (by a program that owns it, or a manager "
                            "still starting): try again, or stop that program", name);
    if (rc == -EBUSY || rc == -EALREADY)
        return nvl_fail(rc, "%s is borrowed already (by another host, or this one): close "
                            "the other user first", name);
    if (rc)
        return nvl_fail(rc, "cannot borrow %s: %s", name, strerror(-rc));
    if (shared)
        return 0; /* its manager set it up */
    if ((rc = sio_enable(*dev))) {
        sio_return(*dev);
        return nvl_fail(rc, "cannot enable memory space and bus mastering of %s: %s", name,
                        strerror(-rc));
    }
    return 0;
}

int nvl_sio_backend(const char *name, struct sio_dev *dev, bool shared, bool one_path,
                    const struct nvme_backend_ops **ops, void **ctx)
{
    struct sio_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    pthread_mutex_init(&c->path_lock, NULL);
    if (name) {
        int rc = borrow(name, shared, &c->dev);
        if (rc) {
            free(c);
            return rc;
        }
        c->owned = true;
    } else {
        c->dev = dev;
    }
    size_t size = 0;
    /* Failover needs both paths working now: the BAR over path 0, and over path 1. */
    bool mp = !one_path && sio_paths(c->dev) >= 2 && sio_path_up(c->dev, 0) &&
              sio_path_up(c->dev, 1) && sio_set_path(c->dev, 0) == 0;
    if (!(c->bar[0].cpu = sio_map_bar(c->dev, 0, &size, &c->bar[0].map))) {
        int rc = -errno;
        sio_close(c);
        return nvl_fail(rc ? rc : -EIO, "cannot map BAR0 of the NVMe: %s",
                        strerror(rc ? -rc : EIO));
    }
    if (size < NVME_REG_DBS + 0x1000) {
        sio_close(c);
        return nvl_fail(-ENODEV, "BAR0 of the device is %zu bytes: too small for an NVMe", size);
    }
    c->cur = &c->bar[0];
    if (mp && sio_set_path(c->dev, 1) == 0) {
        c->bar[1].cpu = sio_map_bar(c->dev, 0, NULL, &c->bar[1].map);
        c->mp = c->bar[1].cpu != NULL; /* else one path */
        sio_set_path(c->dev, 0);
    }
    *ops = &sio_ops;
    *ctx = c;
    return 0;
}

struct sio_dev *nvl_sio_dev(void *ctx) { return ((struct sio_ctx *)ctx)->dev; }
