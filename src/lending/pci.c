/*
 * The driver model (include/ntblend/pci.h) over this host's PCIe tree: its own functions and
 * the functions lent to it (shadows, hot-added by the agent), as SmartIO lists them
 * (ntblend/smartio_tree.h). Binding a function is sio_bind (its own function alone, a shadow
 * under the host's hot-add borrow), and everything a driver does then goes through SmartIO,
 * which resolves where things are: configuration accesses, BARs (a shadow's through the
 * window its hot-add set up), memory mapped for the device, streaming DMA through the DMA
 * window, MSI-X pointed at this host's interrupt region. Nothing here reaches the backend or
 * the agent around SmartIO. What the papers' lending driver intercepts is intercepted here: a
 * shadow's legacy INTx stays masked (Interrupt Disable forced on, Interrupt Pin read as none),
 * and its MSI-X table entries are written with the address that reaches this host through the
 * lender's NTB. Nothing here is visible to the driver: the same calls work the same way on
 * both kinds of function.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ntblend/pci.h"
#include "ntblend/smartio.h"
#include "ntblend/smartio_tree.h"

#define MAX_DEVS 64
#define MAX_MAPS 64
#define TREE_WAIT_MS 200
#define IRQ_WAIT_MS 100
#define PCI_BARS SIO_BARS
#define PCI_STATUS_CAP_LIST 0x10u
#define PCI_CAPABILITY_LIST 0x34
#define PCI_CAP_ID_MSIX 0x11u

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

struct irq {
    struct pci_dev *dev;
    unsigned vector;
    uint32_t host_vector;
    irq_handler_t handler;
    void *arg;
    uint32_t seen;        /* the vector's count when the handler was installed */
    pthread_t thread;
    atomic_bool stop, running;
    pthread_mutex_t lock; /* armed: the thread is waiting for the vector */
    pthread_cond_t cond;
    bool armed;
};

struct pci_dev {
    uint32_t fn;
    bool shadow;          /* lent to this host (the driver never asks; the layer does) */
    char name[16];
    uint16_t vendor, device;
    uint32_t class_code;
    uint64_t bar_start[PCI_BARS], bar_len[PCI_BARS];
    uint32_t msix_cap;    /* found on the first pci_alloc_irq_vectors; 0: not yet */
    sio_dev_t *sio;
    void *drvdata;
    atomic_bool present;
    pthread_mutex_t lock; /* coherent memory and vectors */
    struct coherent *coh;
    struct peer_map *peers;
    struct irq *irqs;
    unsigned nirqs;
};

struct iomap {
    volatile char *base;
    size_t len;
    sio_bar_t *bar;
    struct pci_dev *dev;
};

static struct {
    pthread_mutex_t lock;  /* the driver and its devices; recursive: probe() may map a peer */
    struct pci_driver *drv;
    sio_tree_t *tree;      /* this host's tree, from pci_register_driver to unregistering */
    uint32_t seen;         /* the tree's generation when it was last looked at */
    struct pci_dev *devs[MAX_DEVS];
    pthread_t watcher;
    atomic_bool stop;
    pthread_cond_t changed;
    pthread_rwlock_t maps_lock;
    struct iomap maps[MAX_MAPS];
} bus = { .lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP, .changed = PTHREAD_COND_INITIALIZER,
          .maps_lock = PTHREAD_RWLOCK_INITIALIZER };

/* ---------------------------------------------------------------- the tree */

static const struct pci_device_id *match(const struct pci_driver *drv,
                                         const struct sio_tree_fn *x)
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
static int attach(const struct sio_tree_fn *f, const struct pci_device_id *id)
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
    d->fn = f->id;
    d->shadow = f->lent;
    snprintf(d->name, sizeof d->name, "0000:%02x:%02x.%x", f->bdf >> 8, (f->bdf >> 3) & 0x1f,
             f->bdf & 7);
    d->vendor = f->vendor;
    d->device = f->device;
    d->class_code = f->class_code;
    for (int b = 0; b < PCI_BARS; b++) {
        d->bar_start[b] = f->bar_addr[b];
        d->bar_len[b] = f->bar_size[b];
    }
    pthread_mutex_init(&d->lock, NULL);
    atomic_store(&d->present, true);
    int rc = sio_bind(bus.tree, f->id, &d->sio);
    if (rc) {
        fprintf(stderr, "%s: %s (%s): cannot bind it: %s\n", bus.drv->name, d->name,
                f->name, rc == -EBUSY ? "another driver, or another host, has it"
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
    sio_unmap_bar(m->bar);
    *m = (struct iomap){ 0 };
}

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
    /* Its streaming mappings and DMA window hold go with it; after a hot-remove the agent
     * has dropped the binding already. */
    sio_return(d->sio);
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
    struct sio_tree_fn f[MAX_DEVS];
    int n = sio_tree_list(bus.tree, f, MAX_DEVS), bound = 0;
    n = n < MAX_DEVS ? n : MAX_DEVS;
    /* Gone, or going: remove first. */
    for (int i = 0; i < MAX_DEVS; i++) {
        struct pci_dev *d = bus.devs[i];
        if (!d || !d->shadow)
            continue;
        bool there = false;
        for (int k = 0; k < n; k++)
            there |= f[k].id == d->fn && f[k].present;
        if (!there)
            detach(&bus.devs[i], true);
    }
    for (int k = 0; k < n; k++) {
        if (!f[k].present || slot_of(f[k].id))
            continue;
        const struct pci_device_id *id = match(bus.drv, &f[k]);
        if (id && attach(&f[k], id) == 0)
            bound++;
    }
    return bound;
}

/* Binds what is hot-added, removes what goes; looks again every TREE_WAIT_MS in any case. */
static void *watch(void *arg)
{
    (void)arg;
    while (!atomic_load(&bus.stop)) {
        sio_tree_wait(bus.tree, &bus.seen, TREE_WAIT_MS);
        pthread_mutex_lock(&bus.lock);
        if (!atomic_load(&bus.stop))
            sync_tree();
        pthread_mutex_unlock(&bus.lock);
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
    int rc = sio_tree_open(&bus.tree);
    if (rc) {
        pthread_mutex_unlock(&bus.lock);
        return rc;
    }
    bus.seen = 0;
    sio_tree_wait(bus.tree, &bus.seen, 0); /* the generation, before the first look */
    bus.drv = drv;
    atomic_store(&bus.stop, false);
    int n = sync_tree();
    rc = pthread_create(&bus.watcher, NULL, watch, NULL);
    if (rc) { /* no watcher to stop: undo the rest here */
        for (int i = 0; i < MAX_DEVS; i++)
            if (bus.devs[i])
                detach(&bus.devs[i], false);
        bus.drv = NULL;
        sio_tree_close(bus.tree);
        bus.tree = NULL;
    }
    pthread_mutex_unlock(&bus.lock);
    return rc ? -rc : n;
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
    sio_tree_wake(bus.tree); /* the watcher sees stop */
    pthread_join(bus.watcher, NULL);
    pthread_mutex_lock(&bus.lock);
    for (int i = 0; i < MAX_DEVS; i++)
        if (bus.devs[i])
            detach(&bus.devs[i], false);
    bus.drv = NULL;
    sio_tree_close(bus.tree);
    bus.tree = NULL;
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
    return bar >= 0 && bar < PCI_BARS ? d->bar_start[bar] : 0;
}

uint64_t pci_resource_len(const struct pci_dev *d, int bar)
{
    return bar >= 0 && bar < PCI_BARS ? d->bar_len[bar] : 0;
}

void *pci_iomap(struct pci_dev *d, int bar, size_t maxlen)
{
    if (!d || bar < 0 || bar >= PCI_BARS || !d->bar_len[bar]) {
        errno = EINVAL;
        return NULL;
    }
    /* A lent function's BAR is mapped through the window its hot-add set up (where
     * pci_resource_start says it is): no second window, LUT entries are scarce. */
    size_t size = 0;
    sio_bar_t *b;
    volatile void *p = sio_map_bar(d->sio, bar, &size, &b);
    if (!p)
        return NULL;
    struct iomap m = { .base = p, .len = size, .bar = b, .dev = d };
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

/* A store into a mapped BAR is a posted write the device sees (SmartIO tells its model;
 * across a downed link it never arrives). */
static bool mmio_write(void *addr, uint64_t val, int len)
{
    bool done = false;
    pthread_rwlock_rdlock(&bus.maps_lock);
    for (int i = 0; i < MAX_MAPS && !done; i++) {
        const struct iomap *m = &bus.maps[i];
        if (m->base && (volatile char *)addr >= m->base &&
            (volatile char *)addr + len <= m->base + m->len) {
            size_t off = (size_t)((volatile char *)addr - m->base);
            if (len == 4)
                sio_write32(m->bar, off, (uint32_t)val);
            else
                sio_write64(m->bar, off, val);
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
        for (int b = 0; x && b < PCI_BARS && !peer; b++)
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

/* Memory devices may be given: SmartIO's RAM for DMA (sio_ram_alloc), mapped for none until
 * dma_map_single maps it for one. */
void *dma_host_alloc(size_t size) { return sio_ram_alloc(size); }

void dma_host_free(void *cpu)
{
    if (sio_ram_free(cpu))
        fprintf(stderr, "dma_host_free: %p is not memory of dma_host_alloc\n", cpu);
}

static dma_addr_t map_error(int rc)
{
    errno = rc < 0 ? -rc : rc;
    return DMA_MAPPING_ERROR;
}

/* SmartIO's streaming DMA: through the DMA window, set up on the function's first mapping,
 * with no request to the agent or the lender per mapping (smartio-tocs-2021 §4.3). */
dma_addr_t dma_map_single(struct pci_dev *d, void *cpu, size_t size, enum dma_data_direction dir)
{
    static const unsigned access[] = {
        [DMA_BIDIRECTIONAL] = SIO_DMA_READ | SIO_DMA_WRITE,
        [DMA_TO_DEVICE] = SIO_DMA_READ,
        [DMA_FROM_DEVICE] = SIO_DMA_WRITE,
    };
    if (!d || !size || (unsigned)dir > DMA_FROM_DEVICE)
        return map_error(-EINVAL);
    uint64_t io;
    int rc = sio_stream_map(d->sio, cpu, size, access[dir], &io);
    return rc ? map_error(rc) : io;
}

void dma_unmap_single(struct pci_dev *d, dma_addr_t addr, size_t size, enum dma_data_direction dir)
{
    (void)dir;
    if (d && sio_stream_unmap(d->sio, addr, size) == -ENOENT)
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

/* The MSI-X capability in the function's capability list, as Linux's pci_find_capability
 * walks it; 0 if it has none. */
static uint32_t find_msix(struct pci_dev *d)
{
    uint16_t status;
    uint8_t at;
    if (pci_read_config_word(d, PCI_STATUS, &status) || !(status & PCI_STATUS_CAP_LIST) ||
        pci_read_config_byte(d, PCI_CAPABILITY_LIST, &at))
        return 0;
    for (int hops = 0; at >= 0x40 && hops < 48; hops++) { /* 48: no list loops forever */
        uint8_t id, next;
        at &= ~3u;
        if (pci_read_config_byte(d, at, &id) || pci_read_config_byte(d, at + 1, &next))
            return 0;
        if (id == PCI_CAP_ID_MSIX)
            return at;
        at = next;
    }
    return 0;
}

int pci_alloc_irq_vectors(struct pci_dev *d, unsigned min, unsigned max)
{
    if (!d || !min || min > max)
        return -EINVAL;
    if (!d->msix_cap)
        d->msix_cap = find_msix(d);
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
    pthread_mutex_lock(&q->lock);
    q->armed = true;
    pthread_cond_signal(&q->cond);
    pthread_mutex_unlock(&q->lock);
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
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->cond, NULL);
    if ((rc = pthread_create(&q->thread, NULL, irq_thread, q))) {
        pthread_cond_destroy(&q->cond);
        pthread_mutex_destroy(&q->lock);
        return -rc;
    }
    /* As request_irq() promises, the handler is live when we return: a new thread can wait
     * many milliseconds for a CPU on a busy machine (while a sleeping one that is woken is
     * run at once), and the device's first interrupts would reach no handler until then. */
    pthread_mutex_lock(&q->lock);
    while (!q->armed)
        pthread_cond_wait(&q->cond, &q->lock);
    pthread_mutex_unlock(&q->lock);
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
    pthread_cond_destroy(&q->cond);
    pthread_mutex_destroy(&q->lock);
    atomic_store(&q->running, false);
}
