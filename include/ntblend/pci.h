/*
 * ntblend driver model: PCIe drivers shaped like Linux's, for the functions in this host's
 * PCIe tree — its own devices, and devices other hosts lend it (Device Lending,
 * device-lending-2016/-2019, smartio-tocs-2021 §4). A lent device is hot-added into the
 * borrower's tree as a function of its own (`ntblend device lend NAME --to H`, `ntblend lspci
 * --host H`), and a driver cannot tell it from a local one: the same calls, the same results.
 * Behind them the lending layer does what the papers' driver does: it forwards configuration
 * accesses to the lender (masking legacy INTx), maps BARs through the borrower's NTB windows,
 * gives DMA memory the address the device reaches it by through the lender's NTB, and points
 * MSI-X at this host's interrupt region across the NTB. docs/lending.md has a complete driver.
 *
 * A driver is a process on a host (`ntblend run --host H -- DRIVER`): pci_register_driver()
 * binds it to every matching function of that host's tree and calls probe(); functions
 * hot-added later are probed as they come, and remove() runs when one is hot-removed (a
 * surprise removal: the device is gone by then — registers read all ones, writes and DMA go
 * nowhere) or when the driver unregisters. Functions return 0 or a negative errno unless
 * stated otherwise; pointer returns are NULL with errno set.
 *
 * Threads: probe() and remove() run in the thread that registers the driver, or in the
 * driver model's watcher thread for hot-plug events; interrupt handlers run in a thread per
 * vector. A struct pci_dev may be used from several threads; its calls are single accesses
 * or serialised inside.
 */
#ifndef NTBLEND_PCI_H
#define NTBLEND_PCI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PCI_ANY_ID 0xffffffffu

/* Configuration space offsets and bits a driver needs (PCI Local Bus 3.0, PCIe 4.0 §7.5). */
#define PCI_VENDOR_ID 0x00
#define PCI_DEVICE_ID 0x02
#define PCI_COMMAND 0x04
#define PCI_COMMAND_MEMORY 0x0002u
#define PCI_COMMAND_MASTER 0x0004u
#define PCI_COMMAND_INTX_DISABLE 0x0400u
#define PCI_STATUS 0x06
#define PCI_CLASS_REVISION 0x08
#define PCI_INTERRUPT_PIN 0x3d

/**
 * struct pci_device_id - a function a driver drives.
 * @vendor: PCI vendor id, or PCI_ANY_ID.
 * @device: PCI device id, or PCI_ANY_ID.
 * @class_code: class code (base class << 16 | subclass << 8 | programming interface) ...
 * @class_mask: ... compared under this mask (0: any class).
 * A table of them ends with an entry whose vendor is 0.
 */
struct pci_device_id {
    uint32_t vendor, device;
    uint32_t class_code, class_mask;
};

struct pci_dev;

/**
 * struct pci_driver - a driver.
 * @name: its name (in messages).
 * @id_table: the functions it drives.
 * @probe: a matching function was found; set it up. A non-zero return leaves it unbound.
 * @remove: the function goes (unregistering, or hot-removed): stop using it, free what
 *          probe() set up. After it returns the struct pci_dev is gone.
 */
struct pci_driver {
    const char *name;
    const struct pci_device_id *id_table;
    int (*probe)(struct pci_dev *dev, const struct pci_device_id *id);
    void (*remove)(struct pci_dev *dev);
};

/**
 * pci_register_driver() - bind the driver to every matching function in this host's tree
 * (calling probe() for each), then keep watching the tree for hot-add and hot-remove.
 * @drv: the driver; it must stay valid until pci_unregister_driver().
 *
 * A function another process drives already is skipped (with a message). One driver per
 * process.
 * Return: how many functions were bound (>= 0), or -errno (-EBUSY: a driver is registered
 * already; -ENOENT/-ECONNREFUSED: not running on a host, see `ntblend run`).
 */
int pci_register_driver(struct pci_driver *drv);

/* Call remove() for every bound function, release them, stop watching. */
void pci_unregister_driver(struct pci_driver *drv);

/**
 * pci_wait_removed() - wait until no function is bound to the driver any more (all were
 * hot-removed), or timeout_ms (< 0: forever). Return: 0, or -ETIMEDOUT.
 */
int pci_wait_removed(struct pci_driver *drv, int timeout_ms);

/* ---- identity ---- */
/* "0000:80:00.0": domain, bus, device, function in this host's tree. */
const char *pci_name(const struct pci_dev *dev);
uint16_t pci_vendor(const struct pci_dev *dev);
uint16_t pci_device(const struct pci_dev *dev);
uint32_t pci_class(const struct pci_dev *dev);
void pci_set_drvdata(struct pci_dev *dev, void *data);
void *pci_get_drvdata(const struct pci_dev *dev);
/* false once the function is being hot-removed: its registers read all ones from then on. */
bool pci_device_is_present(const struct pci_dev *dev);

/* ---- configuration space ---- */
int pci_read_config_byte(struct pci_dev *dev, int where, uint8_t *val);
int pci_read_config_word(struct pci_dev *dev, int where, uint16_t *val);
int pci_read_config_dword(struct pci_dev *dev, int where, uint32_t *val);
int pci_write_config_byte(struct pci_dev *dev, int where, uint8_t val);
int pci_write_config_word(struct pci_dev *dev, int where, uint16_t val);
int pci_write_config_dword(struct pci_dev *dev, int where, uint32_t val);
/* Memory space on (pci_enable_device) / off; bus mastering (DMA) on. */
int pci_enable_device(struct pci_dev *dev);
void pci_disable_device(struct pci_dev *dev);
void pci_set_master(struct pci_dev *dev);

/* ---- BARs ---- */
/* Where BAR `bar` sits in this host's address map, and its size (0: no such BAR). */
uint64_t pci_resource_start(const struct pci_dev *dev, int bar);
uint64_t pci_resource_len(const struct pci_dev *dev, int bar);
/**
 * pci_iomap() - map BAR `bar` (its first maxlen bytes; 0: all) into this process. Access it
 * with ioread32()/iowrite32() (a store the device must see as a register write goes through
 * iowrite*, as with Linux); plain loads and stores reach memory BARs directly.
 */
void *pci_iomap(struct pci_dev *dev, int bar, size_t maxlen);
void pci_iounmap(struct pci_dev *dev, void *addr);
uint32_t ioread32(const void *addr);
void iowrite32(uint32_t val, void *addr);
uint64_t ioread64(const void *addr);
void iowrite64(uint64_t val, void *addr);

/* ---- DMA ---- */
typedef uint64_t dma_addr_t;
/**
 * dma_alloc_coherent() - memory this process and the device share: *handle is the address
 * the device reaches it by (give it to the device), the return value where the CPU does.
 * Zeroed, page aligned. NULL + errno (ENOMEM; ENOSPC when the NTB has no window left for it).
 */
void *dma_alloc_coherent(struct pci_dev *dev, size_t size, dma_addr_t *handle);
void dma_free_coherent(struct pci_dev *dev, size_t size, void *cpu, dma_addr_t handle);
/**
 * dma_map_resource() - let the device reach [phys, phys + size) of another function's BAR
 * (peer to peer: phys as pci_resource_start() of a function this driver has bound gives it).
 * The path is the shortest there is: inside a lender when both functions are there, through
 * one NTB when one of them is this host's, across the fabric between two lenders.
 * Return: the address to give the device, or DMA_MAPPING_ERROR (errno: EINVAL not a BAR of a
 * function this driver has bound; ENOSPC no window left).
 */
#define DMA_MAPPING_ERROR (~(dma_addr_t)0)
dma_addr_t dma_map_resource(struct pci_dev *dev, uint64_t phys, size_t size);
void dma_unmap_resource(struct pci_dev *dev, dma_addr_t addr, size_t size);
static inline int dma_mapping_error(struct pci_dev *dev, dma_addr_t addr)
{
    (void)dev;
    return addr == DMA_MAPPING_ERROR;
}

/* ---- interrupts (MSI-X) ---- */
/**
 * pci_alloc_irq_vectors() - enable MSI-X with up to @max vectors (at least @min).
 * Return: the number of vectors (the function's table may have fewer than @max), or -errno.
 */
int pci_alloc_irq_vectors(struct pci_dev *dev, unsigned min, unsigned max);
void pci_free_irq_vectors(struct pci_dev *dev);
typedef void (*irq_handler_t)(int vector, void *arg);
/**
 * request_irq() - run handler(vector, arg) in a thread of its own whenever the function
 * raises MSI-X vector @vector (several interrupts in between may be seen as one, as with
 * real MSI coalescing: a handler looks at the device's state).
 */
int request_irq(struct pci_dev *dev, unsigned vector, irq_handler_t handler, void *arg);
void free_irq(struct pci_dev *dev, unsigned vector);

#ifdef __cplusplus
}
#endif
#endif
