/*
 * The driver model's insides (src/pci, include/ntblend/pci.h): a bound function (struct
 * pci_dev), what the files share, and the seam under them — struct pdm_host_ops, the platform
 * the driver model runs on: the tree of functions a driver may bind, their configuration
 * space and BARs, the addresses devices reach memory by, and interrupt delivery.
 *
 * The files: bus.c (registration, binding, hot-add and hot-remove, identity), config.c
 * (configuration space with what lending intercepts, BARs and register writes), dma_api.c
 * (coherent memory, host memory, streaming and peer-to-peer mappings), irq.c (MSI-X vectors
 * and their handler threads), host_sio.c (the platform of a host's own PCIe tree, through
 * SmartIO), host_vm.c (the platform inside an emulated VM: the guest's tree, BARs where the
 * guest sees them, guest-physical DMA addresses, guest MSI-X; chosen by $NTBLEND_VM, which
 * `ntblend vm run` sets). Nothing above the table knows which. Internal to libntblend.
 */
#ifndef NTBLEND_PDM_INT_H
#define NTBLEND_PDM_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ntblend/pci.h"

#define PDM_BARS 6
#define PDM_MAX_DEVS 64 /* functions one driver binds */

/* A function of the platform's tree, as the driver will see it. */
struct pdm_fn {
    uint32_t id;          /* the platform's name for it (host_sio: the SmartIO device id) */
    char name[32];        /* what it is, for messages ("accel0") */
    uint16_t bdf;         /* its place in the tree: bus << 8 | device << 3 | function */
    bool lent;            /* lent to this host: config accesses are intercepted (config.c) */
    bool present;         /* false once its hot-remove has begun */
    bool hotplug;         /* may go while bound (lent functions are so without saying) */
    uint16_t vendor, device;
    uint32_t class_code;
    uint64_t bar_start[PDM_BARS], bar_len[PDM_BARS]; /* where the tree has its BARs */
};

struct pdm_coherent;
struct pdm_peer_map;
struct pdm_irq;

struct pci_dev {
    struct pdm_fn fn;
    char name[16];        /* "0000:80:00.0" */
    void *h;              /* the platform's handle of the bound function */
    void *drvdata;
    atomic_bool present;
    uint32_t msix_cap;    /* found on the first pci_alloc_irq_vectors; 0: not yet */
    pthread_mutex_t lock; /* its coherent memory, peer mappings and vectors */
    struct pdm_coherent *coh;
    struct pdm_peer_map *peers;
    struct pdm_irq *irqs;
    unsigned nirqs;
};

/*
 * The platform. Each group is used by one file of the driver model; functions return 0 or
 * -errno, pointers NULL with errno set, as the driver model's own calls do.
 */
struct pdm_host_ops {
    /* ---- the tree (bus.c) ----
     * open/close: from pci_register_driver to pci_unregister_driver. scan: the functions of
     * the tree (at most max into out; returns how many there are). wait: until the tree may
     * have changed, timeout_ms at most; *seen is the platform's cursor (start at 0). wake:
     * end a wait under way and every one after it (the watcher stops). bind: take the
     * function d->fn.id for this process, set d->h; unbind: give it back, with whatever
     * streaming mappings it still has. */
    int (*open)(void);
    void (*close)(void);
    int (*scan)(struct pdm_fn *out, int max);
    int (*wait)(uint32_t *seen, int timeout_ms);
    void (*wake)(void);
    int (*bind)(struct pci_dev *d);
    void (*unbind)(struct pci_dev *d);

    /* ---- configuration space and BARs (config.c) ----
     * bar_map: BAR `bar` into this process (*len: its size, *map: what bar_unmap and
     * bar_write take); bar_write: a posted register write the device sees. */
    uint32_t (*cfg_read)(struct pci_dev *d, uint32_t off, uint32_t len);
    int (*cfg_write)(struct pci_dev *d, uint32_t off, uint32_t len, uint32_t val);
    volatile void *(*bar_map)(struct pci_dev *d, int bar, size_t *len, void **map);
    void (*bar_unmap)(void *map);
    void (*bar_write)(void *map, size_t off, uint64_t val, int len);

    /* ---- DMA (dma_api.c) ----
     * coherent_alloc: zeroed memory the CPU and the device share, *addr the device's address
     * of it, *mem what coherent_free takes. host_alloc/host_free: memory streaming mappings
     * may take (dma_host_alloc; host_free: -EINVAL not such memory). map/unmap: a streaming
     * mapping of [cpu, cpu + size) (unmap: -ENOENT no such mapping). map_peer/unmap_peer:
     * BAR `bar` of another bound function, for d's DMA (*addr: the BAR's start). */
    void *(*coherent_alloc)(struct pci_dev *d, size_t size, dma_addr_t *addr, void **mem);
    void (*coherent_free)(void *mem);
    void *(*host_alloc)(size_t size);
    int (*host_free)(void *cpu);
    int (*map)(struct pci_dev *d, void *cpu, size_t size, enum dma_data_direction dir,
               dma_addr_t *addr);
    int (*unmap)(struct pci_dev *d, dma_addr_t addr, size_t size);
    int (*map_peer)(struct pci_dev *d, struct pci_dev *peer, int bar, dma_addr_t *addr,
                    void **map);
    void (*unmap_peer)(void *map);

    /* ---- interrupts (irq.c) ----
     * irq_vector: the host vector MSI-X vector `vector` of d will raise (one per vector where
     * it can; a shared one only wakes a handler spuriously). irq_route: point the vector at
     * it, and enable MSI-X. irq_wait: as sio_wait_vector. */
    int (*irq_vector)(struct pci_dev *d, unsigned vector, uint32_t *hv);
    int (*irq_route)(struct pci_dev *d, unsigned vector, uint32_t hv);
    int (*irq_wait)(uint32_t hv, uint32_t *seen, int timeout_ms);
};

/* The platform of this host's own PCIe tree (host_sio.c), and of an emulated VM's guest
 * (host_vm.c). */
extern const struct pdm_host_ops pdm_host_sio;
extern const struct pdm_host_ops pdm_host_vm;

/* The platform this process's driver model runs on: chosen on first use, by $NTBLEND_VM
 * (host_vm.c), for the process's life. */
extern const struct pdm_host_ops *pdm_host_chosen;
const struct pdm_host_ops *pdm_host_choose(void);
static inline const struct pdm_host_ops *pdm_host(void)
{
    const struct pdm_host_ops *h = pdm_host_chosen;
    return h ? h : pdm_host_choose();
}

/* bus.c: the bound function one of whose BARs holds [phys, phys + size), and which BAR;
 * NULL if none. */
struct pci_dev *pdm_find_bar(uint64_t phys, size_t size, int *bar);

/* What a function leaves behind when it is unbound (after remove(), or a failed probe):
 * config.c its BAR mappings, dma_api.c its coherent memory and peer mappings. */
void pdm_release_bars(struct pci_dev *d);
void pdm_release_dma(struct pci_dev *d);

#endif
