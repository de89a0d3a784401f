/*
 * The driver-model backend: the controller is a function of this host's PCIe tree
 * (include/ntblend/pci.h) — the host's own NVMe, or one another host lends it; nothing here
 * knows which. Registers and doorbells through BAR0 (pci_iomap, ioread32/iowrite32), memory
 * by dma_alloc_coherent, interrupts by pci_alloc_irq_vectors + request_irq, whose handlers
 * count per host vector and wake waiters on a futex.
 *
 * Two ways in: nvme_open_pci() on a function the caller's own driver bound (its remove()
 * closes the handle, as a Linux driver's does), or nvme_open("pci:BDF"), for which the library
 * registers a driver of its own that binds the NVMe functions (class 01:08:02) of the tree
 * and serves them to nvme_open in this process. On a hot-remove that driver's remove() marks
 * the handle removed (every register reads all ones, submissions fail with -ENODEV, waits
 * end with -EIO), tells the program (nvme_open_opts.on_remove), and returns once the program
 * has closed the handle, so no memory goes while the library may still touch it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ntblend/pci.h"
#include "nvme_int.h"

#define MAX_VECTORS 64   /* device vectors asked for: the admin queue and 63 I/O queues */
#define HOST_VECTORS 256 /* host vector labels, as SmartIO's (1..255) */
#define MAX_FNS 16       /* NVMe functions the library's driver keeps */

struct pci_ctx;

struct vec {
    struct pci_ctx *c;
    uint32_t host;  /* the host vector label the queue waits on */
    bool requested;
};

struct pci_ctx {
    struct pci_dev *dev;
    volatile uint8_t *bar;
    int nvec;                   /* vectors pci_alloc_irq_vectors gave; 0: none yet */
    struct vec vec[MAX_VECTORS];
    _Atomic uint32_t count[HOST_VECTORS]; /* interrupts seen per host vector */
    atomic_bool gone;           /* hot-removed: nothing of the device may be touched */
    bool registered;            /* opened through the library's driver */
    pthread_mutex_t lock;       /* vectors */
};

/* The library's driver (nvme_open("pci:...")): the functions it bound, and their handles. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t closed;
    bool on;
    pid_t pid;                       /* the process that registered (not a fork's child) */
    int rc;                          /* pci_register_driver's error, if it failed */
    struct pci_dev *fns[MAX_FNS];
    struct pci_ctx *open[MAX_FNS];   /* the handle's backend on fns[i], or NULL */
    nvme_dev_t *handle[MAX_FNS];
    nvme_remove_cb_t cb[MAX_FNS];
    void *cb_arg[MAX_FNS];
} lib = { .lock = PTHREAD_MUTEX_INITIALIZER, .closed = PTHREAD_COND_INITIALIZER };

static void futex_wake_all(_Atomic uint32_t *w) { wpol_futex_wake(w, 1 << 30, true); }

static void futex_wait(_Atomic uint32_t *w, uint32_t seen, int timeout_ms)
{
    wpol_futex_wait(w, seen, (int64_t)timeout_ms * 1000000, true);
}

/* ---------------------------------------------------------------- the ops */

/* Removed: the library's driver saw it go, or the caller's driver is in its remove(). */
static bool dead(struct pci_ctx *c)
{
    return atomic_load(&c->gone) || !pci_device_is_present(c->dev);
}

static uint32_t pci_rd32(void *ctx, uint32_t off)
{
    struct pci_ctx *c = ctx;
    if (dead(c))
        return UINT32_MAX; /* what a removed function's registers read */
    return ioread32((const void *)(c->bar + off));
}

static void pci_wr32(void *ctx, uint32_t off, uint32_t val)
{
    struct pci_ctx *c = ctx;
    if (!dead(c))
        iowrite32(val, (void *)(c->bar + off));
}

static int pci_dalloc(void *ctx, size_t size, enum nvme_place where, struct nvl_dma *out)
{
    (void)where; /* the driver model places coherent memory in this host's RAM */
    struct pci_ctx *c = ctx;
    if (atomic_load(&c->gone))
        return -ENODEV;
    dma_addr_t io;
    void *cpu = dma_alloc_coherent(c->dev, size, &io);
    if (!cpu)
        return errno ? -errno : -ENOMEM;
    *out = (struct nvl_dma){ .cpu = cpu, .io = io, .size = size, .handle = cpu };
    return 0;
}

static void pci_dfree(void *ctx, struct nvl_dma *dma)
{
    struct pci_ctx *c = ctx;
    /* After a hot-remove the driver model frees it with the function. */
    if (dma->handle && !atomic_load(&c->gone))
        dma_free_coherent(c->dev, dma->size, dma->handle, dma->io);
    dma->handle = NULL;
}

static void on_irq(int vector, void *arg)
{
    (void)vector;
    struct vec *v = arg;
    _Atomic uint32_t *w = &v->c->count[v->host % HOST_VECTORS];
    atomic_fetch_add(w, 1);
    futex_wake_all(w);
}

static int pci_irq_on(void *ctx, uint32_t dev_vector, uint32_t host_vector)
{
    struct pci_ctx *c = ctx;
    if (atomic_load(&c->gone))
        return -ENODEV;
    if (!host_vector || host_vector >= HOST_VECTORS)
        return nvl_fail(-EINVAL, "host vector %u: take 1..%d", host_vector, HOST_VECTORS - 1);
    pthread_mutex_lock(&c->lock);
    int rc = 0;
    if (!c->nvec) {
        rc = pci_alloc_irq_vectors(c->dev, 1, MAX_VECTORS);
        if (rc > 0) {
            c->nvec = rc;
            rc = 0;
        }
    }
    if (!rc && dev_vector >= (uint32_t)c->nvec)
        rc = -ENOSPC;
    struct vec *v = rc ? NULL : &c->vec[dev_vector];
    if (v && v->requested) {
        free_irq(c->dev, dev_vector); /* a queue identifier used again */
        v->requested = false;
    }
    if (v) {
        v->c = c;
        v->host = host_vector;
        if (!(rc = request_irq(c->dev, dev_vector, on_irq, v)))
            v->requested = true;
    }
    pthread_mutex_unlock(&c->lock);
    if (rc == -ENOSPC)
        return nvl_fail(rc, "%s has %d MSI-X vectors: none for queue %u", pci_name(c->dev),
                        c->nvec, dev_vector);
    return rc;
}

static int pci_irq_wait(void *ctx, uint32_t host_vector, uint32_t *seen, int timeout_ms)
{
    struct pci_ctx *c = ctx;
    _Atomic uint32_t *w = &c->count[host_vector % HOST_VECTORS];
    uint32_t now = atomic_load(w);
    if (*seen == 0 && timeout_ms == 0) {
        *seen = now;
        return 0;
    }
    if (now == *seen && timeout_ms > 0) {
        /* A removed function raises nothing: sleep a little, the caller's checks end it. */
        futex_wait(w, now, dead(c) && timeout_ms > 1 ? 1 : timeout_ms);
        now = atomic_load(w);
    }
    if (now == *seen)
        return -ETIMEDOUT;
    *seen = now;
    return 0;
}

static bool pci_gone(void *ctx) { return dead(ctx); }

static void pci_close(void *ctx)
{
    struct pci_ctx *c = ctx;
    if (!atomic_load(&c->gone)) {
        pthread_mutex_lock(&c->lock);
        for (int v = 0; v < c->nvec; v++)
            if (c->vec[v].requested)
                free_irq(c->dev, (unsigned)v);
        if (c->nvec)
            pci_free_irq_vectors(c->dev);
        pthread_mutex_unlock(&c->lock);
        pci_iounmap(c->dev, (void *)c->bar);
    }
    if (c->registered) {
        /* The library's remove() may be waiting for this. */
        pthread_mutex_lock(&lib.lock);
        for (int i = 0; i < MAX_FNS; i++)
            if (lib.open[i] == c) {
                lib.open[i] = NULL;
                lib.handle[i] = NULL;
                lib.cb[i] = NULL;
            }
        pthread_cond_broadcast(&lib.closed);
        pthread_mutex_unlock(&lib.lock);
    }
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static const struct nvme_backend_ops pci_ops = {
    .name = "pci",
    .read32 = pci_rd32,
    .write32 = pci_wr32,
    .dma_alloc = pci_dalloc,
    .dma_free = pci_dfree,
    .irq_enable = pci_irq_on,
    .irq_wait = pci_irq_wait,
    .gone = pci_gone,
    .close = pci_close,
};

/* ---------------------------------------------------------------- the library's driver */

static int lib_probe(struct pci_dev *dev, const struct pci_device_id *id)
{
    (void)id;
    pthread_mutex_lock(&lib.lock);
    int rc = -ENOSPC;
    for (int i = 0; i < MAX_FNS && rc; i++)
        if (!lib.fns[i]) {
            lib.fns[i] = dev;
            rc = 0;
        }
    pthread_mutex_unlock(&lib.lock);
    return rc;
}

static void lib_remove(struct pci_dev *dev)
{
    pthread_mutex_lock(&lib.lock);
    int i = 0;
    while (i < MAX_FNS && lib.fns[i] != dev)
        i++;
    if (i == MAX_FNS) {
        pthread_mutex_unlock(&lib.lock);
        return;
    }
    if (lib.open[i]) {
        /* Hot-removed under an open handle: I/O fails from now on; the program is told and
         * closes the handle, and only then may the function's memory go. */
        atomic_store(&lib.open[i]->gone, true);
        for (int v = 0; v < HOST_VECTORS; v++)
            futex_wake_all(&lib.open[i]->count[v]);
        nvme_remove_cb_t cb = lib.cb[i];
        nvme_dev_t *h = lib.handle[i];
        void *arg = lib.cb_arg[i];
        if (cb) {
            pthread_mutex_unlock(&lib.lock);
            cb(h, arg);
            pthread_mutex_lock(&lib.lock);
        }
        while (lib.open[i])
            pthread_cond_wait(&lib.closed, &lib.lock);
    }
    lib.fns[i] = NULL;
    pthread_mutex_unlock(&lib.lock);
}

static const struct pci_device_id lib_ids[] = {
    { .vendor = PCI_ANY_ID, .device = PCI_ANY_ID, .class_code = 0x010802, .class_mask = 0xffffff },
    { 0 },
};

static struct pci_driver lib_driver = {
    .name = "libntbnvme",
    .id_table = lib_ids,
    .probe = lib_probe,
    .remove = lib_remove,
};

/* Register the library's driver once per process. */
static int lib_register(void)
{
    pthread_mutex_lock(&lib.lock);
    bool on = lib.on;
    pid_t by = lib.pid;
    if (!on) {
        lib.on = true;
        lib.pid = getpid();
    }
    pthread_mutex_unlock(&lib.lock);
    if (on && by != getpid())
        return nvl_fail(-EBUSY, "the NVMe functions of this host are bound by process %d, of "
                                "which this one is a fork: open them in that process (with "
                                "fio: thread=1)", (int)by);
    if (on)
        return lib.rc;
    int rc = pci_register_driver(&lib_driver); /* probes run now: lib.lock not held */
    pthread_mutex_lock(&lib.lock);
    lib.rc = rc < 0 ? rc : 0;
    pthread_mutex_unlock(&lib.lock);
    if (rc == -EBUSY)
        return nvl_fail(rc, "this process has a PCI driver registered already (one per "
                            "process): open its functions with nvme_open_pci() from that "
                            "driver instead of nvme_open(\"pci:...\")");
    if (rc < 0)
        return nvl_fail(rc, "cannot register the NVMe driver on this host's PCIe tree (%s): "
                            "run the program on a host, with ntblend run --host H",
                        strerror(-rc));
    return 0;
}

int nvme_pci_list(char (*names)[16], int max)
{
    int rc = lib_register();
    if (rc)
        return rc;
    pthread_mutex_lock(&lib.lock);
    int n = 0;
    for (int i = 0; i < MAX_FNS; i++)
        if (lib.fns[i]) {
            if (names && n < max)
                snprintf(names[n], 16, "%s", pci_name(lib.fns[i]));
            n++;
        }
    pthread_mutex_unlock(&lib.lock);
    return n;
}

/* ---------------------------------------------------------------- opening */

static int ctx_new(struct pci_dev *dev, struct pci_ctx **out)
{
    if (pci_resource_len(dev, 0) < NVME_REG_DBS + 0x1000)
        return nvl_fail(-ENODEV, "BAR0 of %s is %llu bytes: too small for an NVMe",
                        pci_name(dev), (unsigned long long)pci_resource_len(dev, 0));
    struct pci_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->dev = dev;
    pthread_mutex_init(&c->lock, NULL);
    int rc = pci_enable_device(dev);
    if (!rc) {
        pci_set_master(dev);
        c->bar = pci_iomap(dev, 0, 0);
        if (!c->bar)
            rc = errno ? -errno : -EIO;
    }
    if (rc) {
        pthread_mutex_destroy(&c->lock);
        free(c);
        return nvl_fail(rc, "cannot enable %s and map its BAR0: %s", pci_name(dev),
                        strerror(-rc));
    }
    *out = c;
    return 0;
}

int nvl_pci_backend(const char *bdf, struct pci_dev *dev, const struct nvme_backend_ops **ops,
                    void **ctx, char *name, size_t name_len)
{
    struct pci_ctx *c = NULL;
    int rc;
    if (dev) {
        if ((rc = ctx_new(dev, &c)))
            return rc;
        snprintf(name, name_len, "%s", pci_name(dev));
        *ops = &pci_ops;
        *ctx = c;
        return 0;
    }
    if ((rc = lib_register()))
        return rc;
    /* "0000:80:00.0", "80:00.0" (domain 0), or "" for the first NVMe function. */
    char want[16] = "";
    if (*bdf)
        snprintf(want, sizeof want, "%s%s", strlen(bdf) <= 7 ? "0000:" : "", bdf);
    pthread_mutex_lock(&lib.lock);
    int i = 0;
    for (; i < MAX_FNS; i++)
        if (lib.fns[i] && (!*want || !strcasecmp(pci_name(lib.fns[i]), want)))
            break;
    if (i < MAX_FNS && lib.open[i]) {
        rc = nvl_fail(-EBUSY, "%s is open already in this process: close that handle first "
                              "(nvme_close)", pci_name(lib.fns[i]));
    } else if (i == MAX_FNS) {
        char have[128] = "";
        for (int k = 0; k < MAX_FNS; k++)
            if (lib.fns[k] && strlen(have) + 16 < sizeof have)
                snprintf(have + strlen(have), sizeof have - strlen(have), "%s%s",
                         *have ? ", " : "", pci_name(lib.fns[k]));
        rc = nvl_fail(-ENODEV, "no NVMe function %s in this host's PCIe tree that this "
                               "process could bind (NVMe functions bound: %s; see ntblend "
                               "lspci --host H)", *want ? want : "at all", *have ? have : "none");
    } else if (!(rc = ctx_new(lib.fns[i], &c))) {
        c->registered = true;
        lib.open[i] = c;
        snprintf(name, name_len, "%s", pci_name(lib.fns[i]));
    }
    pthread_mutex_unlock(&lib.lock);
    if (rc)
        return rc;
    *ops = &pci_ops;
    *ctx = c;
    return 0;
}

void nvl_pci_opened(void *ctx, nvme_dev_t *d, nvme_remove_cb_t cb, void *arg)
{
    pthread_mutex_lock(&lib.lock);
    for (int i = 0; i < MAX_FNS; i++)
        if (lib.open[i] == ctx) {
            lib.handle[i] = d;
            lib.cb[i] = cb;
            lib.cb_arg[i] = arg;
        }
    pthread_mutex_unlock(&lib.lock);
}

struct pci_dev *nvl_pci_dev(void *ctx) { return ((struct pci_ctx *)ctx)->dev; }
