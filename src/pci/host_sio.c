/*
 * The driver model's platform for this host's own PCIe tree (struct pdm_host_ops), through
 * SmartIO and nothing else: the tree as sio_tree_list reports it (this host's functions and
 * those lent to it), a function bound with sio_bind (a lent one under the host's hot-add
 * borrow), its configuration space, BARs (a lent function's through its hot-add window),
 * coherent memory placed here (sio_alloc), host RAM and streaming mappings through the DMA
 * window (sio_ram_alloc, sio_stream_map: no request to anyone per mapping), peer BARs by the
 * shortest path (sio_map_peer_bar), and MSI-X aimed at this host (sio_enable_vector).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "ntblend/smartio.h"
#include "ntblend/smartio_tree.h"
#include "pci_int.h"

_Static_assert(PDM_BARS == SIO_BARS, "a function's BAR slots");

static sio_tree_t *tree; /* while a driver is registered */

static int s_open(void) { return sio_tree_open(&tree); }

static void s_close(void)
{
    sio_tree_close(tree);
    tree = NULL;
}

static int s_scan(struct pdm_fn *out, int max)
{
    struct sio_tree_fn f[PDM_MAX_DEVS];
    int n = sio_tree_list(tree, f, max < PDM_MAX_DEVS ? max : PDM_MAX_DEVS);
    for (int i = 0; i < n && i < max && i < PDM_MAX_DEVS; i++) {
        struct pdm_fn *o = &out[i];
        *o = (struct pdm_fn){ .id = f[i].id, .bdf = f[i].bdf, .lent = f[i].lent,
                                   .present = f[i].present, .vendor = f[i].vendor,
                                   .device = f[i].device, .class_code = f[i].class_code };
        memcpy(o->name, f[i].name, sizeof o->name);
        memcpy(o->bar_start, f[i].bar_addr, sizeof o->bar_start);
        memcpy(o->bar_len, f[i].bar_size, sizeof o->bar_len);
    }
    return n;
}

static int s_wait(uint32_t *seen, int timeout_ms) { return sio_tree_wait(tree, seen, timeout_ms); }
static void s_wake(void) { sio_tree_wake(tree); }

static int s_bind(struct pci_dev *d)
{
    sio_dev_t *dev;
    int rc = sio_bind(tree, d->fn.id, &dev);
    if (!rc)
        d->h = dev;
    return rc;
}

/* Its streaming mappings and its hold on the DMA window go with it. */
static void s_unbind(struct pci_dev *d) { sio_return(d->h); }

static uint32_t s_cfg_read(struct pci_dev *d, uint32_t off, uint32_t len)
{
    return sio_cfg_read(d->h, off, len);
}

static int s_cfg_write(struct pci_dev *d, uint32_t off, uint32_t len, uint32_t val)
{
    return sio_cfg_write(d->h, off, len, val);
}

static volatile void *s_bar_map(struct pci_dev *d, int bar, size_t *len, void **map)
{
    sio_bar_t *b;
    volatile void *p = sio_map_bar(d->h, bar, len, &b);
    if (p)
        *map = b;
    return p;
}

static void s_bar_unmap(void *map) { sio_unmap_bar(map); }

static void s_bar_write(void *map, size_t off, uint64_t val, int len)
{
    if (len == 4)
        sio_write32(map, off, (uint32_t)val);
    else
        sio_write64(map, off, val);
}

static void *s_coherent_alloc(struct pci_dev *d, size_t size, dma_addr_t *addr, void **mem)
{
    volatile void *cpu;
    sio_mem_t *m;
    /* Here, in this host's RAM: the CPU reads it; the device reaches it by DMA (through the
     * lender's NTB for a lent function, with this host's IOMMU told). */
    int rc = sio_alloc(d->h, size, SIO_HINT_HOST_READ | SIO_HINT_DEVICE_WRITE, &cpu, addr, &m);
    if (rc) {
        errno = -rc;
        return NULL;
    }
    memset((void *)cpu, 0, size);
    *mem = m;
    return (void *)cpu;
}

static void s_coherent_free(void *mem) { sio_free(mem); }

static int s_map(struct pci_dev *d, void *cpu, size_t size, enum dma_data_direction dir,
                 dma_addr_t *addr)
{
    static const unsigned access[] = {
        [DMA_BIDIRECTIONAL] = SIO_DMA_READ | SIO_DMA_WRITE,
        [DMA_TO_DEVICE] = SIO_DMA_READ,
        [DMA_FROM_DEVICE] = SIO_DMA_WRITE,
    };
    return sio_stream_map(d->h, cpu, size, access[dir], addr);
}

static int s_unmap(struct pci_dev *d, dma_addr_t addr, size_t size)
{
    return sio_stream_unmap(d->h, addr, size);
}

static int s_map_peer(struct pci_dev *d, struct pci_dev *peer, int bar, dma_addr_t *addr,
                      void **map)
{
    sio_dma_t *m;
    int rc = sio_map_peer_bar(d->h, peer->h, bar, addr, &m);
    if (!rc)
        *map = m;
    return rc;
}

static void s_unmap_peer(void *map) { sio_unmap(map); }

/* Spread by place in the tree, so drivers of different functions rarely share one. */
static int s_irq_vector(struct pci_dev *d, unsigned vector, uint32_t *hv)
{
    int n = sio_host_vectors();
    if (n < 2)
        return n < 0 ? n : -ENOSPC;
    *hv = 1 + ((d->fn.id * 37u + vector) % (uint32_t)(n - 1));
    return 0;
}

static int s_irq_route(struct pci_dev *d, unsigned vector, uint32_t hv)
{
    return sio_enable_vector(d->h, vector, hv);
}

const struct pdm_host_ops pdm_host_sio = {
    .open = s_open,
    .close = s_close,
    .scan = s_scan,
    .wait = s_wait,
    .wake = s_wake,
    .bind = s_bind,
    .unbind = s_unbind,
    .cfg_read = s_cfg_read,
    .cfg_write = s_cfg_write,
    .bar_map = s_bar_map,
    .bar_unmap = s_bar_unmap,
    .bar_write = s_bar_write,
    .coherent_alloc = s_coherent_alloc,
    .coherent_free = s_coherent_free,
    .host_alloc = sio_ram_alloc,
    .host_free = sio_ram_free,
    .map = s_map,
    .unmap = s_unmap,
    .map_peer = s_map_peer,
    .unmap_peer = s_unmap_peer,
    .irq_vector = s_irq_vector,
    .irq_route = s_irq_route,
    .irq_wait = sio_wait_vector,
};
