/*
 * ntblend driver model: PCIe drivers shaped like Linux's, for the functions in this host's
 * PCIe tree — its own devices, and devices other hosts lend it (Device Lending,
 * device-lending-2016/-2019, smartio-tocs-2021 §4). A lent device is hot-added into the
 * borrower's tree as a function of its own (`ntblend device lend NAME --to H`, `ntblend lspci
 * --host H`), and a driver cannot tell it from a local one: the same calls, the same results.
 * Behind them the lending layer does what the papers' driver does: it forwards configuration
 * accesses to the lender (masking legacy INTx), maps BARs through the borrower's NTB windows,
 * gives DMA memory the address the device reaches it by through the lender's NTB (streaming
 * mappings through one window of the lender's, set up once, into this host's IOMMU), and
 * points MSI-X at this host's interrupt region across the NTB. docs/lending.md has a complete
 * driver.
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

/* What this header declares is libntblend's API, the symbols it exports (it is built with
 * -fvisibility=hidden; docs/install.md). */
#pragma GCC visibility push(default)

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

/*
 * Streaming DMA, as Linux's DMA API: map a buffer for the device around one I/O.
 *
 * Memory a device may reach is this host's RAM: dma_host_alloc() gives it (what a kernel
 * driver gets from kmalloc, or a buffer pinned for O_DIRECT), page aligned and in whole pages,
 * and it is mapped for no device until dma_map_single()/dma_map_sg() map it for one. Other
 * memory (malloc, the stack, dma_alloc_coherent's) cannot be mapped: EINVAL.
 *
 * dma_map_single() returns the address the device reaches [cpu, cpu + size) by, from where
 * it sits (for a lent function: through the lender's NTB into this host's IOMMU), allowed
 * what dir says (DMA_TO_DEVICE: the device reads it; DMA_FROM_DEVICE: it writes it;
 * DMA_BIDIRECTIONAL: both); anything else the device tries there, or anywhere not mapped, is
 * an IOMMU fault (`ntblend faults`) and reaches nothing. dma_unmap_single() takes the same
 * addr, size and dir; when it returns the device reaches nothing there any more. Neither
 * asks the agent or the lender anything: the windows they need are set up once per function
 * (on its first mapping) and the mapping is this host's IOMMU alone. Mappings are the
 * process's: they go with remove() of their function, and with the process.
 * Return: the address, or DMA_MAPPING_ERROR with errno EINVAL (not memory from
 * dma_host_alloc, size 0, bad dir) or ENOSPC (no I/O virtual address space, IOMMU entry,
 * NTB window or requester-ID entry left: unmap something and try again).
 */
enum dma_data_direction {
    DMA_BIDIRECTIONAL = 0,
    DMA_TO_DEVICE = 1,
    DMA_FROM_DEVICE = 2,
};

/* dma_host_alloc() - size bytes (rounded up to whole pages) of this host's RAM for buffers
 * devices will reach by dma_map_*; page aligned, zeroed. NULL + errno (ENOMEM). Carved from
 * a pool of host RAM the process obtains once and grows in large pieces. */
void *dma_host_alloc(size_t size);
/* dma_host_free() - return memory of dma_host_alloc (NULL: nothing). Unmap it first. */
void dma_host_free(void *cpu);

dma_addr_t dma_map_single(struct pci_dev *dev, void *cpu, size_t size,
                          enum dma_data_direction dir);
void dma_unmap_single(struct pci_dev *dev, dma_addr_t addr, size_t size,
                      enum dma_data_direction dir);

/**
 * struct scatterlist - one piece of a buffer for dma_map_sg(): set buf and length (sg_set_buf),
 * read sg_dma_address() and sg_dma_len() of the first n pieces after mapping.
 */
struct scatterlist {
    void *buf;
    unsigned int length;
    dma_addr_t dma_address;
    unsigned int dma_length;
};
static inline void sg_init_table(struct scatterlist *sg, unsigned int nents)
{
    for (unsigned int i = 0; i < nents; i++)
        sg[i] = (struct scatterlist){ 0 };
}
static inline void sg_set_buf(struct scatterlist *sg, void *buf, unsigned int length)
{
    sg->buf = buf;
    sg->length = length;
}
#define sg_dma_address(sg) ((sg)->dma_address)
#define sg_dma_len(sg) ((sg)->dma_length)
#define for_each_sg(sgl, sg, nents, i) for ((i) = 0, (sg) = (sgl); (i) < (nents); (i)++, (sg)++)

/**
 * dma_map_sg() - map nents pieces (each as dma_map_single would) for the device.
 * Return: the number of DMA segments to give the device (sg_dma_address/sg_dma_len of the
 * first that many entries), or 0 with errno set (as dma_map_single; nothing stays mapped).
 * dma_unmap_sg() takes the nents given to dma_map_sg, not its return value.
 */
int dma_map_sg(struct pci_dev *dev, struct scatterlist *sg, int nents, enum dma_data_direction dir);
void dma_unmap_sg(struct pci_dev *dev, struct scatterlist *sg, int nents,
                  enum dma_data_direction dir);

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
 * real MSI coalescing: a handler looks at the device's state). The handler is live when it
 * returns: every interrupt raised from then on reaches it.
 */
int request_irq(struct pci_dev *dev, unsigned vector, irq_handler_t handler, void *arg);
void free_irq(struct pci_dev *dev, unsigned vector);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
