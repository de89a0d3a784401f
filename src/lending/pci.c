/*
 * The driver model (include/ntblend/pci.h) over this host's PCIe tree: its own functions and
 * the functions lent to it (shadows, hot-added by the agent). Binding a function is a borrow
 * of it through the agent (AGENT_BORROW_BIND: its own function exclusively, a shadow under
 * the host's hot-add borrow), and everything a driver does then goes through the SmartIO
 * device-driver layer, which resolves where things are: configuration accesses, BAR windows,
 * memory mapped for the device, MSI-X pointed at this host's interrupt region. What the
 * papers' lending driver intercepts is intercepted here: a shadow's legacy INTx stays masked
 * (Interrupt Disable forced on, Interrupt Pin read as none), and its MSI-X table entries are
 * written with the address that reaches this host through the lender's NTB. Nothing here is
 * visible to the driver: the same calls work the same way on both kinds of function.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_proto.h"
#include "ntb_backend.h"
#include "ntblend/pci.h"
#include "ntblend/smartio.h"
#include "runtime.h"

#define MAX_DEVS 64
#define MAX_MAPS 64
#define TREE_WAIT_NS 200000000ll
#define IRQ_WAIT_MS 100

struct coherent {
    struct coherent *next;
    void *cpu;
    sio_mem_t *mem;
};

struct peer_map {
    struct peer_map *next;
    dma_addr_t addr;     /* what the driver got */
    sio_dma_t *map;
};

/* An I/O virtual address range of one IOMMU domain this process maps streaming buffers into:
 * a local function's own domain, or its slice of the DMA aperture of a lender (the domain of
 * this host's adapter facing it), shared by every function of that lender bound here. */
struct dom {
    struct dom *next;
    uint32_t lender;      /* UINT32_MAX: a local function's own */
    uint16_t rid;         /* the domain: the requester ID the device's traffic arrives with */
    uint64_t iova, io;    /* the range in the domain, and where the device reaches its start */
    uint32_t pages;
    unsigned refs;        /* functions using it */
    pthread_mutex_t lock;
    uint64_t *busy;       /* a bit per page */
    struct dom_run { struct pci_dev *dev; uint32_t pages; } *runs; /* by first page */
    uint32_t hint;        /* where the next search starts */
};

enum dma_mode { DMA_UNSET = 0, DMA_IOMMU, DMA_PHYS, DMA_BY_LENDER };

struct irq {
    struct pci_dev *dev;
    unsigned vector;
    uint32_t host_vector;
    irq_handler_t handler;
    void *arg;
    uint32_t seen;        /* the vector's count when the handler was installed */
    pthread_t thread;
    atomic_bool stop, running;
};

struct pci_dev {
    uint32_t fn;
    bool shadow;          /* lent to this host (the driver never asks; the layer does) */
    char name[16];
    uint16_t vendor, device;
    uint32_t class_code;
    uint64_t bar_start[NTB_BK_BARS], bar_len[NTB_BK_BARS];
    uint32_t msix_cap;
    sio_dev_t *sio;
    void *drvdata;
    atomic_bool present;
    pthread_mutex_t lock; /* coherent memory and vectors */
    struct coherent *coh;
    struct peer_map *peers;
    struct peer_map *streams; /* DMA_BY_LENDER: each streaming mapping the lender made */
    enum dma_mode dma;        /* how streaming mappings are made, decided on the first */
    struct dom *dom;          /* DMA_IOMMU */
    atomic_uint streaming;    /* its streaming mappings now */
    struct irq *irqs;
    unsigned nirqs;
};

struct iomap {
    volatile char *base;
    size_t len;
    sio_bar_t *bar;       /* a local function's BAR (SmartIO), or NULL: */
    void *win;            /* ... a lent one's, through the window its hot-add set up */
    uint32_t adapter, peer;
    struct pci_dev *dev;
};

static struct {
    pthread_mutex_t lock;  /* the driver and its devices; recursive: probe() may map a peer */
    struct rt *rt;
    struct pci_driver *drv;
    struct pci_dev *devs[MAX_DEVS];
    pthread_t watcher;
    atomic_bool stop;
    pthread_cond_t changed;
    pthread_rwlock_t maps_lock;
    struct iomap maps[MAX_MAPS];
    pthread_mutex_t doms_lock;
    struct dom *doms;
} bus = { .doms_lock = PTHREAD_MUTEX_INITIALIZER, .lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP, .changed = PTHREAD_COND_INITIALIZER,
          .maps_lock = PTHREAD_RWLOCK_INITIALIZER };

/* ---------------------------------------------------------------- the tree */

/* A function of this host's tree, as the driver will see it. */
struct found {
    uint32_t fn;
    bool shadow, present;
    uint16_t bdf;
    uint64_t bar_start[NTB_BK_BARS];
    struct ntb_func_info info;
};

static int scan(struct rt *rt, struct found *out, int max)
{
    int n = 0;
    struct ntb_func_info x;
    for (uint32_t fn = 0; rt->ops->func_info(rt, fn, &x) == 0; fn++) {
        if (x.host != rt->host || n >= max)
            continue;
        out[n] = (struct found){ .fn = fn, .present = true, .bdf = x.bdf, .info = x };
        for (int b = 0; b < NTB_BK_BARS; b++)
            out[n].bar_start[b] = x.bar[b].addr;
        n++;
    }
    if (!rt->ops->tree)
        return n;
    struct ntb_shadow_info sh[32];
    int ns = rt->ops->tree(rt, rt->host, sh, 32);
    for (int i = 0; i < ns && i < 32 && n < max; i++) {
        if (rt->ops->func_info(rt, sh[i].fn, &x))
            continue;
        out[n] = (struct found){ .fn = sh[i].fn, .shadow = true, .present = sh[i].present,
                                 .bdf = sh[i].bdf, .info = x };
        memcpy(out[n].bar_start, sh[i].bar_addr, sizeof out[n].bar_start);
        n++;
    }
    return n;
}

static const struct pci_device_id *match(const struct pci_driver *drv,
                                         const struct ntb_func_info *x)
{
    for (const struct pci_device_id *id = drv->id_table; id && id->vendor; id++)
        if ((id->vendor == PCI_ANY_ID || id->vendor == x->vendor) &&
            (id->device == PCI_ANY_ID || id->device == x->device) &&
            ((x->class_code ^ id->class_code) & id->class_mask) == 0)
            return id;
    return NULL;
}

static struct pci_dev **slot_of(uint32_t fn)
{
    for (int i = 0; i < MAX_DEVS; i++)
        if (bus.devs[i] && bus.devs[i]->fn == fn)
            return &bus.devs[i];
    return NULL;
}

static void release(struct pci_dev *d);

/* Bind and probe one function (bus.lock held). */
static int attach(const struct found *f, const struct pci_device_id *id)
{
    struct pci_dev **slot = NULL;
    for (int i = 0; i < MAX_DEVS && !slot; i++)
        if (!bus.devs[i])
            slot = &bus.devs[i];
    if (!slot)
        return -ENOSPC;
    struct pci_dev *d = calloc(1, sizeof *d);
    if (!d)
        return -ENOMEM;
    d->fn = f->fn;
    d->shadow = f->shadow;
    snprintf(d->name, sizeof d->name, "0000:%02x:%02x.%x", f->bdf >> 8, (f->bdf >> 3) & 0x1f,
             f->bdf & 7);
    d->vendor = f->info.vendor;
    d->device = f->info.device;
    d->class_code = f->info.class_code;
    d->msix_cap = f->info.msix_cap;
    for (int b = 0; b < NTB_BK_BARS; b++) {
        d->bar_start[b] = f->info.bar[b].size ? f->bar_start[b] : 0;
        d->bar_len[b] = f->info.bar[b].size;
    }
    pthread_mutex_init(&d->lock, NULL);
    atomic_store(&d->present, true);
    int rc = sio_borrow(f->fn, AGENT_BORROW_BIND, &d->sio);
    if (rc) {
        fprintf(stderr, "%s: %s (%s): cannot bind it: %s\n", bus.drv->name, d->name,
                f->info.name, rc == -EBUSY ? "another driver, or another host, has it"
                                           : strerror(-rc));
        pthread_mutex_destroy(&d->lock);
        free(d);
        return rc;
    }
    *slot = d;
    rc = bus.drv->probe ? bus.drv->probe(d, id) : 0;
    if (rc) {
        fprintf(stderr, "%s: probe of %s failed: %s\n", bus.drv->name, d->name, strerror(rc < 0 ? -rc : rc));
        *slot = NULL;
        release(d);
        return rc;
    }
    pthread_cond_broadcast(&bus.changed);
    return 0;
}

static void unmap_slot(struct iomap *m)
{
    if (m->bar)
        sio_unmap_bar(m->bar);
    else if (m->win)
        bus.rt->ops->window_cpu_unmap(bus.rt, m->win);
    *m = (struct iomap){ 0 };
}

static void dma_release(struct pci_dev *d);

/* Undo what the layer set up for d and free it (after remove() or a failed probe). */
static void release(struct pci_dev *d)
{
    pthread_rwlock_wrlock(&bus.maps_lock);
    for (int i = 0; i < MAX_MAPS; i++)
        if (bus.maps[i].dev == d)
            unmap_slot(&bus.maps[i]);
    pthread_rwlock_unlock(&bus.maps_lock);
    pci_free_irq_vectors(d);
    while (d->peers) {
        struct peer_map *p = d->peers;
        d->peers = p->next;
        sio_unmap(p->map);
        free(p);
    }
    while (d->coh) {
        struct coherent *c = d->coh;
        d->coh = c->next;
        sio_free(c->mem);
        free(c);
    }
    dma_release(d);
    sio_return(d->sio); /* after a hot-remove the agent has dropped the binding already */
    pthread_mutex_destroy(&d->lock);
    free(d);
}

static void detach(struct pci_dev **slot, bool gone)
{
    struct pci_dev *d = *slot;
    if (gone)
        atomic_store(&d->present, false);
    if (bus.drv->remove)
        bus.drv->remove(d);
    *slot = NULL;
    release(d);
    pthread_cond_broadcast(&bus.changed);
}

/* Bring the bound set in line with the tree (bus.lock held); returns how many were bound. */
static int sync_tree(void)
{
    struct found f[MAX_DEVS];
    int n = scan(bus.rt, f, MAX_DEVS), bound = 0;
    /* Gone, or going: remove first. */
    for (int i = 0; i < MAX_DEVS; i++) {
        struct pci_dev *d = bus.devs[i];
        if (!d || !d->shadow)
            continue;
        bool there = false;
        for (int k = 0; k < n; k++)
            there |= f[k].fn == d->fn && f[k].present;
        if (!there)
            detach(&bus.devs[i], true);
    }
    for (int k = 0; k < n; k++) {
        if (!f[k].present || slot_of(f[k].fn))
            continue;
        const struct pci_device_id *id = match(bus.drv, &f[k].info);
        if (id && attach(&f[k], id) == 0)
            bound++;
    }
    return bound;
}

static _Atomic uint32_t no_tree; /* stands in for a tree word when the backend has none */

static void *watch(void *arg)
{
    (void)arg;
    _Atomic uint32_t *word = bus.rt->ops->tree_word ? bus.rt->ops->tree_word(bus.rt, bus.rt->host) : NULL;
    while (!atomic_load(&bus.stop)) {
        uint32_t seen = word ? atomic_load(word) : 0;
        pthread_mutex_lock(&bus.lock);
        if (!atomic_load(&bus.stop))
            sync_tree();
        pthread_mutex_unlock(&bus.lock);
        if (word)
            bus.rt->ops->wait(word, seen, TREE_WAIT_NS);
        else
            bus.rt->ops->wait(&no_tree, 0, TREE_WAIT_NS); /* no lending: look again later */
    }
    return NULL;
}

int pci_register_driver(struct pci_driver *drv)
{
    if (!drv || !drv->name || !drv->id_table)
        return -EINVAL;
    pthread_mutex_lock(&bus.lock);
    if (bus.drv) {
        pthread_mutex_unlock(&bus.lock);
        return -EBUSY;
    }
    bus.rt = rt_get();
    if (!bus.rt) {
        int e = -errno;
        pthread_mutex_unlock(&bus.lock);
        return e;
    }
    bus.drv = drv;
    atomic_store(&bus.stop, false);
    int n = sync_tree();
    int rc = pthread_create(&bus.watcher, NULL, watch, NULL);
    pthread_mutex_unlock(&bus.lock);
    if (rc) {
        pci_unregister_driver(drv);
        return -rc;
    }
    return n;
}

void pci_unregister_driver(struct pci_driver *drv)
{
    pthread_mutex_lock(&bus.lock);
    if (!drv || bus.drv != drv) {
        pthread_mutex_unlock(&bus.lock);
        return;
    }
    atomic_store(&bus.stop, true);
    pthread_mutex_unlock(&bus.lock);
    _Atomic uint32_t *word = bus.rt->ops->tree_word ? bus.rt->ops->tree_word(bus.rt, bus.rt->host) : NULL;
    if (word)
        bus.rt->ops->wake(word, 1 << 30); /* a spurious wake: the watcher sees stop */
    pthread_join(bus.watcher, NULL);
    pthread_mutex_lock(&bus.lock);
    for (int i = 0; i < MAX_DEVS; i++)
        if (bus.devs[i])
            detach(&bus.devs[i], false);
    bus.drv = NULL;
    rt_put(bus.rt);
    bus.rt = NULL;
    pthread_mutex_unlock(&bus.lock);
}

int pci_wait_removed(struct pci_driver *drv, int timeout_ms)
{
    struct timespec end;
    clock_gettime(CLOCK_REALTIME, &end);
    if (timeout_ms >= 0) {
        end.tv_sec += timeout_ms / 1000;
        end.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (end.tv_nsec >= 1000000000L) {
            end.tv_sec++;
            end.tv_nsec -= 1000000000L;
        }
    }
    int rc = 0;
    pthread_mutex_lock(&bus.lock);
    for (;;) {
        bool any = false;
        for (int i = 0; i < MAX_DEVS; i++)
            any |= bus.devs[i] != NULL;
        if (!any || bus.drv != drv)
            break;
        if (timeout_ms < 0)
            pthread_cond_wait(&bus.changed, &bus.lock);
        else if (pthread_cond_timedwait(&bus.changed, &bus.lock, &end) == ETIMEDOUT) {
            rc = -ETIMEDOUT;
            break;
        }
    }
    pthread_mutex_unlock(&bus.lock);
    return rc;
}

/* ---------------------------------------------------------------- identity */

const char *pci_name(const struct pci_dev *d) { return d->name; }
uint16_t pci_vendor(const struct pci_dev *d) { return d->vendor; }
uint16_t pci_device(const struct pci_dev *d) { return d->device; }
uint32_t pci_class(const struct pci_dev *d) { return d->class_code; }
void pci_set_drvdata(struct pci_dev *d, void *data) { d->drvdata = data; }
void *pci_get_drvdata(const struct pci_dev *d) { return d->drvdata; }
bool pci_device_is_present(const struct pci_dev *d) { return atomic_load(&d->present); }

/* ---------------------------------------------------------------- configuration space */

static int cfg_check(const struct pci_dev *d, int where, int len)
{
    if (!d || where < 0 || where + len > 4096 || (where & (len - 1)))
        return -EINVAL;
    return atomic_load(&d->present) ? 0 : -ENODEV;
}

static uint32_t cfg_read(struct pci_dev *d, int where, int len)
{
    uint32_t v = sio_cfg_read(d->sio, (uint32_t)where, (uint32_t)len);
    /* A lent function's legacy interrupt cannot cross the NTB: it has none. */
    if (d->shadow && where <= PCI_INTERRUPT_PIN && where + len > PCI_INTERRUPT_PIN)
        v &= ~(0xffu << (8 * (PCI_INTERRUPT_PIN - where)));
    return v;
}

static int cfg_write(struct pci_dev *d, int where, int len, uint32_t v)
{
    if (d->shadow && where <= PCI_COMMAND + 1 && where + len > PCI_COMMAND + 1)
        v |= PCI_COMMAND_INTX_DISABLE >> (8 * (where - PCI_COMMAND)); /* INTx stays masked */
    return sio_cfg_write(d->sio, (uint32_t)where, (uint32_t)len, v);
}

int pci_read_config_byte(struct pci_dev *d, int where, uint8_t *val)
{
    int rc = cfg_check(d, where, 1);
    *val = rc ? 0xff : (uint8_t)cfg_read(d, where, 1);
    return rc;
}

int pci_read_config_word(struct pci_dev *d, int where, uint16_t *val)
{
    int rc = cfg_check(d, where, 2);
    *val = rc ? 0xffff : (uint16_t)cfg_read(d, where, 2);
    return rc;
}

int pci_read_config_dword(struct pci_dev *d, int where, uint32_t *val)
{
    int rc = cfg_check(d, where, 4);
    *val = rc ? UINT32_MAX : cfg_read(d, where, 4);
    return rc;
}

int pci_write_config_byte(struct pci_dev *d, int where, uint8_t val)
{
    int rc = cfg_check(d, where, 1);
    return rc ? rc : cfg_write(d, where, 1, val);
}

int pci_write_config_word(struct pci_dev *d, int where, uint16_t val)
{
    int rc = cfg_check(d, where, 2);
    return rc ? rc : cfg_write(d, where, 2, val);
}

int pci_write_config_dword(struct pci_dev *d, int where, uint32_t val)
{
    int rc = cfg_check(d, where, 4);
    return rc ? rc : cfg_write(d, where, 4, val);
}

static int command(struct pci_dev *d, uint16_t set, uint16_t clear)
{
    uint16_t cmd;
    int rc = pci_read_config_word(d, PCI_COMMAND, &cmd);
    return rc ? rc : pci_write_config_word(d, PCI_COMMAND, (uint16_t)((cmd | set) & ~clear));
}

int pci_enable_device(struct pci_dev *d) { return command(d, PCI_COMMAND_MEMORY, 0); }
void pci_disable_device(struct pci_dev *d) { command(d, 0, PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER); }
void pci_set_master(struct pci_dev *d) { command(d, PCI_COMMAND_MASTER, 0); }

/* ---------------------------------------------------------------- BARs */

uint64_t pci_resource_start(const struct pci_dev *d, int bar)
{
    return bar >= 0 && bar < NTB_BK_BARS ? d->bar_start[bar] : 0;
}

uint64_t pci_resource_len(const struct pci_dev *d, int bar)
{
    return bar >= 0 && bar < NTB_BK_BARS ? d->bar_len[bar] : 0;
}

/* A lent function's BAR: the window of this host's adapter its hot-add mapped it through
 * (pci_resource_start), into this process. No second window: LUT entries are scarce. */
static int map_shadow_bar(struct pci_dev *d, int bar, struct iomap *m)
{
    struct rt *rt = bus.rt;
    struct ntb_func_info x;
    uint32_t peer;
    int rc = rt->ops->func_info(rt, d->fn, &x);
    int ai = rc ? rc : rt->ops->adapter_toward(rt, rt->host, x.host, &peer);
    struct ntb_adapter_info a;
    if (ai < 0 || rt->ops->adapter_info(rt, (uint32_t)ai, &a) || !a.mw_size ||
        d->bar_start[bar] < a.mw_base)
        return ai < 0 ? ai : -EFAULT;
    uint64_t rel = d->bar_start[bar] - a.mw_base;
    struct ntb_window w = { .adapter = (uint32_t)ai, .peer_host = x.host,
                            .peer_addr = x.bar[bar].addr, .len = d->bar_len[bar],
                            .bus = d->bar_start[bar], .first = (uint32_t)(rel / a.mw_size),
                            .offset = rel % a.mw_size };
    w.count = (uint32_t)((w.offset + w.len + a.mw_size - 1) / a.mw_size);
    void *base;
    void *p = rt->ops->window_cpu_map(rt, &w, false, &base);
    if (!p)
        return -errno;
    *m = (struct iomap){ .base = p, .len = d->bar_len[bar], .win = base, .adapter = (uint32_t)ai,
                         .peer = peer, .dev = d };
    return 0;
}

void *pci_iomap(struct pci_dev *d, int bar, size_t maxlen)
{
    if (!d || bar < 0 || bar >= NTB_BK_BARS || !d->bar_len[bar]) {
        errno = EINVAL;
        return NULL;
    }
    struct iomap m;
    if (d->shadow) {
        int rc = map_shadow_bar(d, bar, &m);
        if (rc) {
            errno = -rc;
            return NULL;
        }
    } else {
        size_t size = 0;
        sio_bar_t *b;
        volatile void *p = sio_map_bar(d->sio, bar, &size, &b);
        if (!p)
            return NULL;
        m = (struct iomap){ .base = p, .len = size, .bar = b, .dev = d };
    }
    if (maxlen && maxlen < m.len)
        m.len = maxlen;
    pthread_rwlock_wrlock(&bus.maps_lock);
    int i = 0;
    while (i < MAX_MAPS && bus.maps[i].base)
        i++;
    if (i == MAX_MAPS) {
        unmap_slot(&m);
        pthread_rwlock_unlock(&bus.maps_lock);
        errno = ENOSPC;
        return NULL;
    }
    bus.maps[i] = m;
    pthread_rwlock_unlock(&bus.maps_lock);
    return (void *)m.base;
}

void pci_iounmap(struct pci_dev *d, void *addr)
{
    pthread_rwlock_wrlock(&bus.maps_lock);
    for (int i = 0; i < MAX_MAPS; i++)
        if (bus.maps[i].dev == d && bus.maps[i].base == addr)
            unmap_slot(&bus.maps[i]);
    pthread_rwlock_unlock(&bus.maps_lock);
}

uint32_t ioread32(const void *addr) { return *(const volatile uint32_t *)addr; }
uint64_t ioread64(const void *addr) { return *(const volatile uint64_t *)addr; }

/* A store into a mapped BAR is a posted write the device sees (its model is told). */
static bool mmio_write(void *addr, uint64_t val, int len)
{
    bool done = false;
    pthread_rwlock_rdlock(&bus.maps_lock);
    for (int i = 0; i < MAX_MAPS && !done; i++) {
        const struct iomap *m = &bus.maps[i];
        if (m->base && (volatile char *)addr >= m->base &&
            (volatile char *)addr + len <= m->base + m->len) {
            size_t off = (size_t)((volatile char *)addr - m->base);
            if (m->bar) {
                if (len == 4)
                    sio_write32(m->bar, off, (uint32_t)val);
                else
                    sio_write64(m->bar, off, val);
            } else {
                if (len == 4)
                    *(volatile uint32_t *)addr = (uint32_t)val;
                else
                    *(volatile uint64_t *)addr = val;
                /* A posted write across a downed link never arrives. */
                if (bus.rt->ops->path_up(bus.rt, m->adapter, m->peer))
                    bus.rt->ops->fn_notify(bus.rt, m->dev->fn);
            }
            done = true;
        }
    }
    pthread_rwlock_unlock(&bus.maps_lock);
    return done;
}

void iowrite32(uint32_t val, void *addr)
{
    if (!mmio_write(addr, val, 4))
        *(volatile uint32_t *)addr = val;
}

void iowrite64(uint64_t val, void *addr)
{
    if (!mmio_write(addr, val, 8))
        *(volatile uint64_t *)addr = val;
}

/* ---------------------------------------------------------------- DMA */

void *dma_alloc_coherent(struct pci_dev *d, size_t size, dma_addr_t *handle)
{
    if (!d || !size || !handle) {
        errno = EINVAL;
        return NULL;
    }
    struct coherent *c = calloc(1, sizeof *c);
    if (!c) {
        errno = ENOMEM;
        return NULL;
    }
    volatile void *cpu;
    uint64_t io;
    /* Here, in this host's RAM: the CPU reads it; the device reaches it by DMA (through the
     * lender's NTB for a lent function, with this host's IOMMU told). */
    int rc = sio_alloc(d->sio, size, SIO_HINT_HOST_READ | SIO_HINT_DEVICE_WRITE, &cpu, &io,
                       &c->mem);
    if (rc) {
        free(c);
        errno = -rc;
        return NULL;
    }
    c->cpu = (void *)cpu;
    memset(c->cpu, 0, size);
    pthread_mutex_lock(&d->lock);
    c->next = d->coh;
    d->coh = c;
    pthread_mutex_unlock(&d->lock);
    *handle = io;
    return c->cpu;
}

void dma_free_coherent(struct pci_dev *d, size_t size, void *cpu, dma_addr_t handle)
{
    (void)size;
    (void)handle;
    pthread_mutex_lock(&d->lock);
    for (struct coherent **pp = &d->coh; *pp; pp = &(*pp)->next)
        if ((*pp)->cpu == cpu) {
            struct coherent *c = *pp;
            *pp = c->next;
            sio_free(c->mem);
            free(c);
            break;
        }
    pthread_mutex_unlock(&d->lock);
}

dma_addr_t dma_map_resource(struct pci_dev *d, uint64_t phys, size_t size)
{
    /* Whose BAR is it? Only functions this driver has bound are known here. */
    struct pci_dev *peer = NULL;
    int bar = -1;
    pthread_mutex_lock(&bus.lock);
    for (int i = 0; i < MAX_DEVS && !peer; i++) {
        struct pci_dev *x = bus.devs[i];
        for (int b = 0; x && b < NTB_BK_BARS && !peer; b++)
            if (x->bar_len[b] && phys >= x->bar_start[b] &&
                phys - x->bar_start[b] + size <= x->bar_len[b]) {
                peer = x;
                bar = b;
            }
    }
    pthread_mutex_unlock(&bus.lock);
    struct peer_map *p = peer && size ? calloc(1, sizeof *p) : NULL;
    if (!p) {
        errno = peer && size ? ENOMEM : EINVAL;
        return DMA_MAPPING_ERROR;
    }
    uint64_t io;
    int rc = sio_map_peer_bar(d->sio, peer->sio, bar, &io, &p->map);
    if (rc) {
        free(p);
        errno = -rc;
        return DMA_MAPPING_ERROR;
    }
    p->addr = io + (phys - peer->bar_start[bar]);
    pthread_mutex_lock(&d->lock);
    p->next = d->peers;
    d->peers = p;
    pthread_mutex_unlock(&d->lock);
    return p->addr;
}

void dma_unmap_resource(struct pci_dev *d, dma_addr_t addr, size_t size)
{
    (void)size;
    pthread_mutex_lock(&d->lock);
    for (struct peer_map **pp = &d->peers; *pp; pp = &(*pp)->next)
        if ((*pp)->addr == addr) {
            struct peer_map *p = *pp;
            *pp = p->next;
            sio_unmap(p->map);
            free(p);
            break;
        }
    pthread_mutex_unlock(&d->lock);
}


/* ---------------------------------------------------------------- streaming DMA */

/*
 * Host RAM for streaming buffers: pieces of this host's RAM the agent allocates for the
 * process (gone with it), carved into page runs. Mapped for no device until dma_map_*.
 */
#define POOL_PIECE (16ull << 20)
#define POOL_PIECES 64

static struct {
    pthread_mutex_t lock;
    struct rt *rt;
    struct piece {
        char *cpu;
        uint64_t phys, pages;
        uint64_t *busy;    /* a bit per page */
        uint32_t *run;     /* pages of the allocation starting at a page, 0: none */
    } p[POOL_PIECES];
    int n;
} pool = { .lock = PTHREAD_MUTEX_INITIALIZER };

static bool bit(const uint64_t *b, uint64_t i) { return b[i / 64] >> (i % 64) & 1; }

static void bits(uint64_t *b, uint64_t i, uint64_t n, bool on)
{
    for (uint64_t k = i; k < i + n; k++)
        if (on)
            b[k / 64] |= 1ull << (k % 64);
        else
            b[k / 64] &= ~(1ull << (k % 64));
}

/* The first run of n clear bits in [0, total), searching from `from` and wrapping; or -1. */
static int64_t find_run(const uint64_t *b, uint64_t total, uint64_t n, uint64_t from)
{
    if (n > total)
        return -1;
    for (int pass = 0; pass < 2; pass++) {
        uint64_t i = pass ? 0 : from, end = pass ? from : total;
        while (i + n <= total && i < end + n) {
            if (b[i / 64] == UINT64_MAX && i % 64 == 0) {
                i += 64;
                continue;
            }
            uint64_t k = 0;
            while (k < n && !bit(b, i + k))
                k++;
            if (k == n)
                return (int64_t)i;
            i += k + 1;
        }
    }
    return -1;
}

static struct rt *dma_rt(void)
{
    if (!pool.rt)
        pool.rt = rt_get(); /* kept: the pool's pieces are the process's until it ends */
    return pool.rt;
}

void *dma_host_alloc(size_t size)
{
    if (!size || size > (1ull << 40)) {
        errno = size ? ENOMEM : EINVAL;
        return NULL;
    }
    uint64_t n = (size + 4095) / 4096;
    pthread_mutex_lock(&pool.lock);
    struct rt *rt = dma_rt();
    void *out = NULL;
    int err = rt ? ENOMEM : errno;
    for (int i = 0; rt && !out; i++) {
        if (i == pool.n) { /* grow by a piece of at least POOL_PIECE */
            if (pool.n == POOL_PIECES)
                break;
            uint64_t len = n * 4096 > POOL_PIECE ? n * 4096 : POOL_PIECE;
            struct agent_rsp r;
            int rc = rt_call(rt, AGENT_ALLOC, len, 4096, &r);
            struct piece *p = &pool.p[pool.n];
            p->cpu = rc ? NULL : rt->ops->ram(rt, rt->host, r.a, len);
            p->busy = p->cpu ? calloc((len / 4096 + 63) / 64, 8) : NULL;
            p->run = p->busy ? calloc(len / 4096, sizeof *p->run) : NULL;
            if (!p->run) {
                free(p->busy);
                if (!rc)
                    rt_call(rt, AGENT_FREE, r.a, 0, NULL);
                err = rc == -ENOMEM || !rc ? ENOMEM : -rc;
                *p = (struct piece){ 0 };
                break;
            }
            p->phys = r.a;
            p->pages = len / 4096;
            pool.n++;
        }
        struct piece *p = &pool.p[i];
        int64_t at = find_run(p->busy, p->pages, n, 0);
        if (at < 0)
            continue;
        bits(p->busy, (uint64_t)at, n, true);
        p->run[at] = (uint32_t)n;
        out = p->cpu + (uint64_t)at * 4096;
    }
    pthread_mutex_unlock(&pool.lock);
    if (out)
        memset(out, 0, n * 4096);
    else
        errno = err;
    return out;
}

/* The piece holding [cpu, cpu + len), or NULL. */
static struct piece *piece_of(const void *cpu, size_t len)
{
    for (int i = 0; i < pool.n; i++) {
        struct piece *p = &pool.p[i];
        if ((const char *)cpu >= p->cpu && (uint64_t)((const char *)cpu - p->cpu) < p->pages * 4096 &&
            len <= p->pages * 4096 - (uint64_t)((const char *)cpu - p->cpu))
            return p;
    }
    return NULL;
}

void dma_host_free(void *cpu)
{
    if (!cpu)
        return;
    pthread_mutex_lock(&pool.lock);
    struct piece *p = piece_of(cpu, 1);
    uint64_t at = p ? (uint64_t)((char *)cpu - p->cpu) / 4096 : 0;
    if (p && (uint64_t)((char *)cpu - p->cpu) % 4096 == 0 && p->run[at]) {
        bits(p->busy, at, p->run[at], false);
        p->run[at] = 0;
    } else {
        fprintf(stderr, "dma_host_free: %p is not memory of dma_host_alloc\n", cpu);
    }
    pthread_mutex_unlock(&pool.lock);
}

/* This host's physical address of [cpu, cpu + len) if dma_host_alloc gave it, else -EINVAL. */
static int host_phys(const void *cpu, size_t len, uint64_t *phys)
{
    pthread_mutex_lock(&pool.lock);
    const struct piece *p = piece_of(cpu, len);
    if (p)
        *phys = p->phys + (uint64_t)((const char *)cpu - p->cpu);
    pthread_mutex_unlock(&pool.lock);
    return p ? 0 : -EINVAL;
}

/* A local function's own range: its domain is its alone, and this process's. */
#define LOCAL_IOVA (1ull << 45)
#define LOCAL_PAGES 16384u /* 64 MiB */

static struct dom *dom_new(uint32_t lender, uint16_t rid, uint64_t iova, uint64_t io,
                           uint64_t size)
{
    struct dom *m = calloc(1, sizeof *m);
    uint32_t pages = (uint32_t)(size / 4096);
    if (m) {
        *m = (struct dom){ .lender = lender, .rid = rid, .iova = iova, .io = io, .pages = pages,
                           .refs = 1, .busy = calloc((pages + 63) / 64, 8),
                           .runs = calloc(pages, sizeof *m->runs) };
        pthread_mutex_init(&m->lock, NULL);
    }
    if (m && (!m->busy || !m->runs || !pages)) {
        free(m->busy);
        free(m->runs);
        free(m);
        m = NULL;
    }
    return m;
}

static void dom_free(struct dom *m)
{
    pthread_mutex_destroy(&m->lock);
    free(m->busy);
    free(m->runs);
    free(m);
}

/* d leaves its domain (its mappings gone): its hold on the lender's aperture goes, and the
 * domain with its last function. */
static void dom_leave(struct pci_dev *d)
{
    struct dom *m = d->dom;
    if (m->lender != UINT32_MAX) {
        struct agent_req req = { .op = AGENT_DEV_APERTURE, .a = d->fn, .b = 0 };
        struct agent_rsp r;
        rt_request(bus.rt, &req, &r);
    }
    pthread_mutex_lock(&bus.doms_lock);
    bool last = --m->refs == 0;
    for (struct dom **pp = &bus.doms; *pp && last; pp = &(*pp)->next)
        if (*pp == m) {
            *pp = m->next;
            break;
        }
    pthread_mutex_unlock(&bus.doms_lock);
    if (last)
        dom_free(m);
    d->dom = NULL;
    d->dma = DMA_UNSET;
}

/* The lender has no requester-ID (or LUT) entry left for d: let go of the aperture holds of
 * this process's other functions of that lender that have nothing mapped now (they take them
 * again on their next mapping). Returns how many went. */
static int reclaim_idle(struct pci_dev *d)
{
    struct ntb_func_info x;
    if (bus.rt->ops->func_info(bus.rt, d->fn, &x))
        return 0;
    uint32_t lender = x.host;
    int n = 0;
    pthread_mutex_lock(&bus.lock);
    for (int i = 0; i < MAX_DEVS; i++) {
        struct pci_dev *o = bus.devs[i];
        if (!o || o == d)
            continue;
        pthread_mutex_lock(&o->lock);
        if (o->dma == DMA_IOMMU && o->dom->lender == lender && !atomic_load(&o->streaming)) {
            dom_leave(o);
            n++;
        }
        pthread_mutex_unlock(&o->lock);
    }
    pthread_mutex_unlock(&bus.lock);
    return n;
}

/* Decide, on the first streaming mapping of d, how it maps: into an IOMMU domain (its own,
 * or for a lent function the lender's aperture into ours, taken once), by physical address
 * (a local function, IOMMU off), or by the lender per mapping (a lent function, IOMMU off). */
static int dma_setup(struct pci_dev *d)
{
    if (d->dma != DMA_UNSET)
        return 0;
    struct rt *rt = bus.rt;
    const struct ntb_backend_ops *ops = rt->ops;
    bool iommu = ops->iommu_on && ops->iommu_on(rt, rt->host) == 1;
    if (!iommu) {
        d->dma = d->shadow ? DMA_BY_LENDER : DMA_PHYS;
        return 0;
    }
    struct ntb_func_info x;
    int rc = ops->func_info(rt, d->fn, &x);
    if (rc)
        return rc;
    if (!d->shadow) {
        d->dom = dom_new(UINT32_MAX, x.bdf, LOCAL_IOVA, LOCAL_IOVA, (uint64_t)LOCAL_PAGES * 4096);
        if (!d->dom)
            return -ENOMEM;
        d->dma = DMA_IOMMU;
        return 0;
    }
    /* The lender lets d through onto its aperture (set up by the first of its functions):
     * one request, now, and none per mapping. */
    uint32_t peer;
    int ai = ops->adapter_toward(rt, rt->host, x.host, &peer);
    struct ntb_adapter_info a;
    if (ai < 0 || (rc = ops->adapter_info(rt, (uint32_t)ai, &a)))
        return ai < 0 ? ai : rc;
    struct agent_req req = { .op = AGENT_DEV_APERTURE, .a = d->fn, .b = 1 };
    struct agent_rsp r;
    if ((rc = rt_request(rt, &req, &r)))
        return rc;
    pthread_mutex_lock(&bus.doms_lock);
    struct dom *m = bus.doms;
    while (m && !(m->lender == x.host && m->iova == r.b))
        m = m->next;
    if (m) {
        m->refs++;
    } else if ((m = dom_new(x.host, a.rid, r.b, r.a, r.c))) {
        m->next = bus.doms;
        bus.doms = m;
    }
    pthread_mutex_unlock(&bus.doms_lock);
    if (!m) {
        req.b = 0;
        rt_request(rt, &req, &r);
        return -ENOMEM;
    }
    d->dom = m;
    d->dma = DMA_IOMMU;
    return 0;
}

/* Unmap the run at page `at` of d's domain (its own mapping). */
static void dom_unmap(struct dom *m, uint32_t at)
{
    uint32_t n = m->runs[at].pages;
    bus.rt->ops->iommu_unmap(bus.rt, m->rid, m->iova + (uint64_t)at * 4096, (uint64_t)n * 4096);
    pthread_mutex_lock(&m->lock);
    bits(m->busy, at, n, false);
    m->runs[at] = (struct dom_run){ 0 };
    pthread_mutex_unlock(&m->lock);
}

/* What remove() left mapped goes, and d's hold on the aperture (release(), d unbound). */
static void dma_release(struct pci_dev *d)
{
    while (d->streams) {
        struct peer_map *p = d->streams;
        d->streams = p->next;
        sio_unmap(p->map);
        free(p);
    }
    struct dom *m = d->dom;
    if (!m)
        return;
    for (uint32_t i = 0; i < m->pages; i++)
        if (m->runs[i].dev == d && m->runs[i].pages)
            dom_unmap(m, i);
    dom_leave(d);
}

static dma_addr_t map_one(struct pci_dev *d, uint64_t phys, size_t size,
                          enum dma_data_direction dir);

static dma_addr_t map_error(int rc)
{
    errno = rc < 0 ? -rc : rc;
    return DMA_MAPPING_ERROR;
}

dma_addr_t dma_map_single(struct pci_dev *d, void *cpu, size_t size, enum dma_data_direction dir)
{
    uint64_t phys;
    if (!d || !size || (unsigned)dir > DMA_FROM_DEVICE || host_phys(cpu, size, &phys))
        return map_error(-EINVAL);
    /* A mapping in flight counts as one from here: its function's domain stays. */
    pthread_mutex_lock(&d->lock);
    int rc = dma_setup(d);
    if (!rc)
        atomic_fetch_add(&d->streaming, 1);
    pthread_mutex_unlock(&d->lock);
    if (rc == -ENOSPC && d->shadow && reclaim_idle(d)) {
        pthread_mutex_lock(&d->lock);
        if (!(rc = dma_setup(d)))
            atomic_fetch_add(&d->streaming, 1);
        pthread_mutex_unlock(&d->lock);
    }
    if (rc)
        return map_error(rc == -EOPNOTSUPP ? -ENOSPC : rc);
    dma_addr_t io = map_one(d, phys, size, dir);
    if (io == DMA_MAPPING_ERROR || d->dma != DMA_IOMMU)
        atomic_fetch_sub(&d->streaming, 1); /* counted are the domain's mappings */
    return io;
}

static dma_addr_t map_one(struct pci_dev *d, uint64_t phys, size_t size,
                          enum dma_data_direction dir)
{
    int rc;
    uint64_t first = phys & ~4095ull, off = phys - first;
    uint64_t n = (off + size + 4095) / 4096;
    if (d->dma == DMA_PHYS)
        return phys;
    if (d->dma == DMA_BY_LENDER) {
        /* No IOMMU here to map into: the lender maps this buffer itself, a window of its
         * adapter onto it (smartio §4.3's fallback: a request to the lender per mapping). */
        struct peer_map *p = calloc(1, sizeof *p);
        if (!p)
            return map_error(-ENOMEM);
        uint64_t io;
        struct rt *rt = bus.rt;
        rc = sio_map_addr(d->sio, rt->ops->node_id(rt, rt->host), phys, size, &io, &p->map);
        if (rc) {
            free(p);
            return map_error(rc);
        }
        p->addr = io;
        pthread_mutex_lock(&d->lock);
        p->next = d->streams;
        d->streams = p;
        pthread_mutex_unlock(&d->lock);
        return io;
    }
    struct dom *m = d->dom;
    pthread_mutex_lock(&m->lock);
    int64_t at = find_run(m->busy, m->pages, n, m->hint);
    if (at >= 0) {
        bits(m->busy, (uint64_t)at, n, true);
        m->runs[at] = (struct dom_run){ .dev = d, .pages = (uint32_t)n };
        m->hint = (uint32_t)((uint64_t)at + n) % m->pages;
    }
    pthread_mutex_unlock(&m->lock);
    if (at < 0)
        return map_error(-ENOSPC); /* the range is full: unmap something */
    unsigned perm = dir == DMA_TO_DEVICE ? NTB_IOMMU_READ
                    : dir == DMA_FROM_DEVICE ? NTB_IOMMU_WRITE
                                             : NTB_IOMMU_READ | NTB_IOMMU_WRITE;
    rc = bus.rt->ops->iommu_map(bus.rt, m->rid, m->iova + (uint64_t)at * 4096, first, n * 4096, perm);
    if (rc) {
        pthread_mutex_lock(&m->lock);
        bits(m->busy, (uint64_t)at, n, false);
        m->runs[at] = (struct dom_run){ 0 };
        pthread_mutex_unlock(&m->lock);
        return map_error(rc == -EEXIST ? -ENOSPC : rc);
    }
    return m->io + (uint64_t)at * 4096 + off;
}

void dma_unmap_single(struct pci_dev *d, dma_addr_t addr, size_t size, enum dma_data_direction dir)
{
    (void)size;
    (void)dir;
    if (!d || d->dma == DMA_PHYS)
        return;
    if (d->dma == DMA_BY_LENDER) {
        struct peer_map *found = NULL;
        pthread_mutex_lock(&d->lock);
        for (struct peer_map **pp = &d->streams; *pp; pp = &(*pp)->next)
            if ((*pp)->addr == addr) {
                found = *pp;
                *pp = found->next;
                break;
            }
        pthread_mutex_unlock(&d->lock);
        if (found) {
            sio_unmap(found->map);
            free(found);
        }
        return;
    }
    struct dom *m = d->dom;
    uint64_t at = m && addr >= m->io ? (addr - m->io) / 4096 : UINT64_MAX;
    bool mine = false;
    if (m && at < m->pages) {
        pthread_mutex_lock(&m->lock);
        mine = m->runs[at].dev == d && m->runs[at].pages;
        pthread_mutex_unlock(&m->lock);
    }
    if (mine) {
        dom_unmap(m, (uint32_t)at);
        atomic_fetch_sub(&d->streaming, 1);
    } else
        fprintf(stderr, "%s: dma_unmap_single of %#llx, which is not mapped\n", d->name,
                (unsigned long long)addr);
}

int dma_map_sg(struct pci_dev *d, struct scatterlist *sg, int nents, enum dma_data_direction dir)
{
    if (!sg || nents <= 0) {
        errno = EINVAL;
        return 0;
    }
    for (int i = 0; i < nents; i++) {
        sg[i].dma_address = dma_map_single(d, sg[i].buf, sg[i].length, dir);
        if (sg[i].dma_address == DMA_MAPPING_ERROR) {
            int e = errno;
            while (i-- > 0)
                dma_unmap_single(d, sg[i].dma_address, sg[i].length, dir);
            errno = e;
            return 0;
        }
        sg[i].dma_length = sg[i].length;
    }
    return nents;
}

void dma_unmap_sg(struct pci_dev *d, struct scatterlist *sg, int nents, enum dma_data_direction dir)
{
    for (int i = 0; sg && i < nents; i++)
        dma_unmap_single(d, sg[i].dma_address, sg[i].dma_length, dir);
}

/* ---------------------------------------------------------------- MSI-X */

int pci_alloc_irq_vectors(struct pci_dev *d, unsigned min, unsigned max)
{
    if (!d || !min || min > max)
        return -EINVAL;
    if (!d->msix_cap)
        return -ENOTSUP;
    uint16_t ctrl;
    int rc = pci_read_config_word(d, (int)d->msix_cap + 2, &ctrl);
    if (rc)
        return rc;
    unsigned size = (ctrl & 0x7ffu) + 1, n = max < size ? max : size;
    if (n < min)
        return -ENOSPC;
    pthread_mutex_lock(&d->lock);
    if (d->irqs) {
        pthread_mutex_unlock(&d->lock);
        return -EBUSY;
    }
    d->irqs = calloc(n, sizeof *d->irqs);
    if (!d->irqs) {
        pthread_mutex_unlock(&d->lock);
        return -ENOMEM;
    }
    d->nirqs = n;
    pthread_mutex_unlock(&d->lock);
    rc = pci_write_config_word(d, (int)d->msix_cap + 2, (uint16_t)(ctrl | 0x8000u)); /* enable */
    return rc ? rc : (int)n;
}

void pci_free_irq_vectors(struct pci_dev *d)
{
    for (unsigned v = 0; d->irqs && v < d->nirqs; v++)
        free_irq(d, v);
    pthread_mutex_lock(&d->lock);
    free(d->irqs);
    d->irqs = NULL;
    d->nirqs = 0;
    pthread_mutex_unlock(&d->lock);
}

static void *irq_thread(void *arg)
{
    struct irq *q = arg;
    uint32_t seen = q->seen;
    while (!atomic_load(&q->stop))
        if (sio_wait_vector(q->host_vector, &seen, IRQ_WAIT_MS) == 0 && !atomic_load(&q->stop))
            q->handler((int)q->vector, q->arg);
    return NULL;
}

int request_irq(struct pci_dev *d, unsigned vector, irq_handler_t handler, void *arg)
{
    if (!d || !handler)
        return -EINVAL;
    if (!d->irqs || vector >= d->nirqs)
        return -EINVAL; /* pci_alloc_irq_vectors first */
    struct irq *q = &d->irqs[vector];
    if (atomic_load(&q->running))
        return -EBUSY;
    /* This host's vector for it: spread by place in the tree, so drivers of different
     * functions rarely share one (a shared one only wakes a handler spuriously). */
    uint32_t hv = 1 + (((uint32_t)d->fn * 37u + vector) % 255u);
    *q = (struct irq){ .dev = d, .vector = vector, .host_vector = hv, .handler = handler,
                       .arg = arg };
    sio_wait_vector(hv, &q->seen, 0); /* every interrupt from now on reaches the handler */
    int rc = sio_enable_vector(d->sio, vector, hv);
    if (rc)
        return rc;
    if ((rc = pthread_create(&q->thread, NULL, irq_thread, q)))
        return -rc;
    atomic_store(&q->running, true);
    return 0;
}

void free_irq(struct pci_dev *d, unsigned vector)
{
    if (!d || !d->irqs || vector >= d->nirqs)
        return;
    struct irq *q = &d->irqs[vector];
    if (!atomic_load(&q->running))
        return;
    atomic_store(&q->stop, true);
    pthread_join(q->thread, NULL);
    atomic_store(&q->running, false);
}
