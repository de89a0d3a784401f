/*
 * ntblend SmartIO: use any PCIe device in the cluster from any host (smartio-tocs-2021 §4,
 * §6.1). Devices are PCIe functions with fabric-wide ids; a lender makes its devices
 * available, a borrower borrows one (exclusively, or shared by several hosts), maps its BARs
 * through the NTB, and maps memory *for the device*: it gets the I/O address to program into
 * the device, wherever the memory is — in the lender, in the borrower, in a third host, or in
 * another device's BAR — resolved as smartio §4.4 describes. No software sits in the data
 * path: the device's DMA and the CPU's register accesses cross the NTB directly. Buffers of
 * this host's RAM are mapped for the device around each I/O (streaming DMA) through a DMA
 * window set up once (§4.3).
 *
 * For applications started with `ntblend run --host H -- prog`. Functions return 0 or a
 * negative errno unless stated otherwise. A driver model, which drives the functions of this
 * host's PCIe tree rather than devices borrowed by id, also uses ntblend/smartio_tree.h.
 *
 * Threads: every function may be called from any thread. A borrowed device (sio_dev_t) may be
 * used by several threads: configuration-space and BAR accesses are single accesses, as on
 * hardware, mapping calls are serialized by the agent, and streaming mappings may be made and
 * undone from many threads at once. Do not return a device, unmap a BAR or free memory while
 * another thread still uses it. sio_wait_vector() keeps its position in *seen: give each
 * waiting thread its own.
 */
#ifndef NTBLEND_SMARTIO_H
#define NTBLEND_SMARTIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ntblend/seg.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What this header declares is libntblend's API, the symbols it exports (it is built with
 * -fvisibility=hidden; docs/install.md). */
#pragma GCC visibility push(default)

#define SIO_EXCLUSIVE 1u /* only this host may use the device */
#define SIO_SHARED 2u    /* several hosts at once (e.g. each owns separate NVMe queues) */

struct sio_info {
    uint32_t id;            /* fabric-wide device id */
    char name[32];          /* "nvme0", "accel0.vf1" */
    char type[32];          /* model: "nvme", "accel" */
    char host[32];          /* lender host */
    uint32_t node_id;       /* lender node id */
    uint16_t vendor, device;
    uint32_t class_code;
    uint32_t vf;            /* 0: physical function */
    bool available;         /* lent out by its host */
    bool exclusive;
    uint32_t borrowers;     /* hosts borrowing it now */
    bool managed;           /* a borrower set it up and shares it (sio_share), e.g. an NVMe
                             * manager that hands out queues to the other borrowers */
    uint32_t manager_node;  /* ... on this node */
    uint32_t manager_pid;   /* ... in this process */
};

/* A device's SISCI fabric device id (fdid, what SCIBorrowDevice and libnvm's --ctrl= take):
 * its lender's node id and its id + 1, never 0 (SISCI programs read 0 as "none"). */
#define SIO_FDID(node_id, id) ((unsigned long long)(node_id) << 16 | ((unsigned long long)(id) + 1))

/** sio_list() - All devices of the fabric; returns how many there are (copies at most max). */
int sio_list(struct sio_info *out, int max);
/** sio_find() - The id of a device by name, or -ENOENT. */
int sio_find(const char *name);
/** sio_set_available() - On the lender's host: lend the device out, or stop lending it
 * (-EREMOTE elsewhere).
 */
int sio_set_available(uint32_t id, bool available);

typedef struct sio_dev sio_dev_t;
typedef struct sio_bar sio_bar_t;
typedef struct sio_dma sio_dma_t;

/** sio_borrow() - Borrow: -EACCES not available, -EBUSY held exclusively (or shared when asking
 * exclusive), -EALREADY this host borrows it already, -EHOSTUNREACH lender unreachable.
 * Returned when the process exits.
 */
int sio_borrow(uint32_t id, unsigned mode, sio_dev_t **dev);
/** sio_share() - Exclusive -> shared, after setting the device up (smartio's NVMe driver does
 * this). The device's record then names this process as its manager (struct sio_info), until
 * it returns the device or exits.
 */
int sio_share(sio_dev_t *dev);
int sio_return(sio_dev_t *dev);
uint32_t sio_id(const sio_dev_t *dev);

/** sio_cfg_read() - Configuration space (through the lender: a control operation, not a data
 * path).
 */
uint32_t sio_cfg_read(sio_dev_t *dev, uint32_t off, uint32_t len);
int sio_cfg_write(sio_dev_t *dev, uint32_t off, uint32_t len, uint32_t val);
/** sio_enable() - Set Memory Space and Bus Master Enable: needed before the device does DMA. */
int sio_enable(sio_dev_t *dev);

/** sio_map_bar() - Map BAR `bar` (0, 2, 4) into this process: through the NTB when the lender
 * is another host. Registers are I/O: use sio_write32/64 so the device sees the write.
 */
volatile void *sio_map_bar(sio_dev_t *dev, int bar, size_t *size, sio_bar_t **map);
int sio_unmap_bar(sio_bar_t *map);
void sio_write32(sio_bar_t *map, size_t off, uint32_t val);
void sio_write64(sio_bar_t *map, size_t off, uint64_t val);
uint32_t sio_read32(sio_bar_t *map, size_t off);
uint64_t sio_read64(sio_bar_t *map, size_t off);

/* ---- multipath (smartio-tocs-2021 §6.3, Fig. 16) ----
 * A host with two NTB adapters on two switches reaches a lender over two independent paths.
 * Path 0 goes through this host's first adapter that reaches the lender, path 1 through the
 * next, and so on (`ntblend status` lists them). A device is borrowed on the first of its paths
 * that is up. The path chosen with sio_set_path() is the one later calls set up mappings over:
 * sio_map_bar() maps the BAR through that path's adapter, and the sio_map_*() calls, sio_alloc()
 * and sio_enable_vector() have the lender make the device's DMA windows through its adapter
 * at the other end of that path ("specifying which of the local adapters it is using to reach
 * the NVMe device, our SmartIO system will automatically resolve which of the lender-side NTB
 * adapters to configure DMA windows through"). A mapping keeps the path it was made on. So a
 * driver sets up what it needs on each path in advance and moves to the other when one fails.
 * A BAR mapping can also fail over by itself (sio_bar_failover).
 */
/** sio_paths() - How many paths lead from this host to the device's lender: 0 for a device of
 * this host, 1 for most, 2 or more with several adapters on separate switches. */
int sio_paths(sio_dev_t *dev);
/** sio_set_path() - Set up later mappings over path `path` (0 .. sio_paths() - 1). 0;
 * -ENOENT no such path (a host with one adapter toward the lender has path 0 only: give it a
 * second adapter on a second switch, examples/topologies/two-paths.ini); -EINVAL a device of
 * this host (no NTB between); -EOPNOTSUPP a function bound in this host's tree (sio_bind), which
 * keeps the path its hot-add used. Streaming mappings (sio_stream_map) go over the lender's
 * first path that is up, whatever the path. */
int sio_set_path(sio_dev_t *dev, int path);
/** sio_get_path() - The path mappings are set up over now; -1 for a device of this host. */
int sio_get_path(const sio_dev_t *dev);
/** sio_path_up() - Whether path `path` works now (both hosts up, both ports enabled, every
 * cable on it up). false for no such path. */
bool sio_path_up(sio_dev_t *dev, int path);
/** sio_device_cpu() - The CPU the device's model last ran on, for a driver that waits for it
 * (an emulated device is a thread that needs a CPU; a driver spinning on that CPU holds it
 * up): -1 when not known, or the device is hardware. Cheap: one load of shared memory. */
int sio_device_cpu(const sio_dev_t *dev);
/** sio_driver_asleep() - The calling thread, which drives the device, goes to sleep (true) or
 * woke (false). An emulated device's model gives its CPU up to a driver that rang from that
 * CPU and is waiting to run there; while the driver sleeps it should not. Nothing where the
 * device is hardware. Cheap: a store to shared memory when the state changes. */
void sio_driver_asleep(sio_dev_t *dev, bool asleep);
/** sio_bar_failover() - Also map BAR mapping `map` through another path (the first other than
 * its own), so that while its own path is down its addresses reach the device over that one —
 * no all-ones reads, no lost stores — and return when it heals. Costs the other adapter's LUT
 * entries for the BAR. 0; -ENOENT no other path; -ENOSPC no entries left on the other adapter;
 * -EOPNOTSUPP the device is in this host or bound in its tree; -EALREADY done before. A
 * driver that relies on all-ones reads to notice a cut must check sio_path_up() instead. */
int sio_bar_failover(sio_bar_t *map);

/* Memory for the device. Each returns the device-side I/O address of the memory: */
/** sio_map_addr() - ... bus address `addr` on host `node_id` (RAM, or a BAR there) */
int sio_map_addr(sio_dev_t *dev, uint32_t node_id, uint64_t addr, size_t size,
                 uint64_t *ioaddr, sio_dma_t **map);
/** sio_map_local() - ... a segment of this host */
int sio_map_local(sio_dev_t *dev, seg_local_t *seg, size_t off, size_t size, uint64_t *ioaddr,
                  sio_dma_t **map);
/** sio_map_remote() - ... a connected segment of any host */
int sio_map_remote(sio_dev_t *dev, seg_remote_t *seg, size_t off, size_t size,
                   uint64_t *ioaddr, sio_dma_t **map);
/** sio_map_peer_bar() - ... another borrowed device's BAR (peer to peer, shortest path) */
int sio_map_peer_bar(sio_dev_t *dev, sio_dev_t *peer, int bar, uint64_t *ioaddr,
                     sio_dma_t **map);
int sio_unmap(sio_dma_t *map);
/* The same, at a device-side I/O address the caller chooses (`ioaddr`): the lender's IOMMU
 * maps it (as a hypervisor maps a guest's device so that its I/O addresses are the guest's
 * physical ones, device-lending-kvm-2019 §5). -EOPNOTSUPP when the lender's IOMMU is off (the
 * device's addresses are then the window's: use the calls above); -EEXIST when the range
 * overlaps another mapping of the device; -EINVAL when ioaddr is not at addr's offset in its
 * 4 KiB page. */
int sio_map_addr_at(sio_dev_t *dev, uint32_t node_id, uint64_t addr, size_t size,
                    uint64_t ioaddr, sio_dma_t **map);
int sio_map_peer_bar_at(sio_dev_t *dev, sio_dev_t *peer, int bar, uint64_t ioaddr,
                        sio_dma_t **map);

/* ---- device segments (smartio-tocs-2021 §6.1): a device's memory as segments ----
 * A borrowed device's BARs, and memory kept in its lender for its borrowers, as connected
 * segments (seg_remote_t) of descriptor sd through local adapter `adapter`: map them for the
 * CPU (seg_map_remote), for another device (sio_map_remote: peer to peer), DMA to them
 * (seg_dma_transfer), and end them with seg_disconnect, like any other connected segment. */
/** sio_connect_bar() - BAR `bar` of the device. The CPU reaches it directly through a
 * mapping; stores to a register BAR need no sio_write32: while such a mapping exists, the
 * device's model watches its registers itself (as hardware sees any store), at the cost of a
 * wake-up every 200 µs while it is idle. -EINVAL no such BAR, -EHOSTUNREACH no path.
 */
int sio_connect_bar(seg_desc_t *sd, sio_dev_t *dev, int bar, int adapter, seg_remote_t **seg);
#define SIO_DEVMEM_SHARED 1u  /* one segment per number that all borrowers of the device share */
#define SIO_DEVMEM_PRIVATE 2u /* this connection's own, gone when it is disconnected */
#define SIO_DEVMEM_MAX_SIZE (64u << 20)
/** sio_connect_devmem() - Device memory `number` of the device: memory in its lender, near
 * the device. SIO_DEVMEM_SHARED: the first borrower to ask creates it with `size` bytes
 * (later ones get it as it is, whatever size they ask); it lives until the device's last
 * borrower returns it. SIO_DEVMEM_PRIVATE: `size` bytes for this connection alone (number
 * unused). -EINVAL size 0 or over SIO_DEVMEM_MAX_SIZE, -EACCES the device is not borrowed.
 */
int sio_connect_devmem(seg_desc_t *sd, sio_dev_t *dev, uint32_t number, size_t size,
                       unsigned flags, int adapter, seg_remote_t **seg);

/* Memory placed by access pattern (smartio-tocs-2021 §6.1, §7.4.1): reads across the NTB cost
 * a round trip, posted writes do not, so memory goes where it is read. A queue the device
 * reads (an NVMe SQ: SIO_HINT_DEVICE_READ) or that several hosts read (SIO_HINT_MULTI_HOST)
 * is placed in the device's lender; one the CPU polls (a CQ: SIO_HINT_HOST_READ) here. The
 * CPU reaches it through *cpu, the device through *ioaddr. */
#define SIO_HINT_DEVICE_READ 1u
#define SIO_HINT_DEVICE_WRITE 2u
#define SIO_HINT_HOST_READ 4u
#define SIO_HINT_HOST_WRITE 8u
#define SIO_HINT_MULTI_HOST 16u
typedef struct sio_mem sio_mem_t;
int sio_alloc(sio_dev_t *dev, size_t size, unsigned hints, volatile void **cpu, uint64_t *ioaddr,
              sio_mem_t **mem);
/** sio_mem_node() - Node id of the host the memory was placed in. */
uint32_t sio_mem_node(const sio_mem_t *mem);
int sio_free(sio_mem_t *mem);

/*
 * Streaming DMA: this host's RAM mapped for the device around one I/O (smartio-tocs-2021
 * §4.3, "DMA window"), as a kernel driver maps a buffer with the DMA API.
 *
 * sio_ram_alloc() gives RAM of this host that devices may be given (what a kernel driver gets
 * from kmalloc), mapped for none until sio_stream_map() maps a piece of it for one device.
 * With this host's IOMMU on, a device's first mapping sets up, once, a range of I/O virtual
 * addresses through which it reaches this host — for a device of another host, a window of
 * its lender's adapter onto that range (the lender's DMA window, shared by every device this
 * host uses of that lender) — and every mapping from then on only inserts pages into this
 * host's IOMMU: no request to the agent or the lender. With the IOMMU off, a device of this
 * host reaches RAM by its physical address (nothing to map), and a device of another host
 * needs a window of its lender's onto the buffer: a request to the lender per mapping, some
 * hundred times slower. A DMA by the device anywhere it was not given, or against `access`,
 * is an IOMMU fault that reaches nothing (where this host has an IOMMU).
 */
#define SIO_DMA_READ 1u  /* the device may read the memory (data to the device) */
#define SIO_DMA_WRITE 2u /* the device may write it (data from the device) */

/** sio_ram_alloc() - size bytes (rounded up to whole pages) of this host's RAM for device DMA;
 * page aligned, zeroed. Carved from pieces the process obtains from its agent in large steps
 * and keeps until it exits. NULL + errno (EINVAL size 0; ENOMEM). */
void *sio_ram_alloc(size_t size);
/** sio_ram_free() - give back memory of sio_ram_alloc (NULL: nothing). Unmap it first.
 * -EINVAL: not the start of memory sio_ram_alloc gave. */
int sio_ram_free(void *cpu);
/** sio_ram_addr() - the bus address of [cpu, cpu + size) of sio_ram_alloc memory on this host
 * (what sio_map_addr takes with this host's node id). -EINVAL: not such memory. */
int sio_ram_addr(const void *cpu, size_t size, uint64_t *addr);

/**
 * sio_stream_map() - map [cpu, cpu + size) of sio_ram_alloc memory for the device.
 * @access: SIO_DMA_READ, SIO_DMA_WRITE or both: what the device may do there.
 * @ioaddr: the address the device reaches cpu by, from where it is.
 * Mappings are this process's: they go with sio_return() of the device, and with the process.
 * Return: 0, -EINVAL (not sio_ram_alloc memory, size 0, bad access), -ENOSPC (no I/O virtual
 * address space, IOMMU entry, LUT entry or requester-ID entry left: unmap something and try
 * again), -EBUSY (a device of this host borrowed shared: its IOMMU domain is not this
 * process's alone; borrow it exclusively), -EHOSTUNREACH.
 */
int sio_stream_map(sio_dev_t *dev, void *cpu, size_t size, unsigned access, uint64_t *ioaddr);
/** sio_stream_unmap() - undo one sio_stream_map (the @ioaddr it gave, and its size); when it
 * returns the device reaches nothing there. -ENOENT: not a mapping of this device. */
int sio_stream_unmap(sio_dev_t *dev, uint64_t ioaddr, size_t size);

/** sio_enable_vector() - Interrupts: the MSI-X vector `vector` of the device wakes
 * sio_wait_vector on this host. The table entry is programmed to reach this host's MSI region
 * through the lender's NTB.
 */
int sio_enable_vector(sio_dev_t *dev, uint32_t vector, uint32_t host_vector);
/** sio_msi_at() - Before the first sio_enable_vector: the device reaches this host's MSI region
 * at I/O address `ioaddr` (sio_map_addr_at; a guest's MSI doorbell, 0xfee00000 on x86) instead
 * of where its lender's window puts it. 0, -EALREADY (vectors are enabled), or as
 * sio_map_addr_at. */
int sio_msi_at(sio_dev_t *dev, uint64_t ioaddr);
/** sio_host_vectors() - How many interrupt vectors this host's MSI region has: the host vectors
 * sio_enable_vector and sio_wait_vector take are below it. -errno when not on a host. */
int sio_host_vectors(void);
/** sio_wait_vector() - Wait for host vector v of this host (as an interrupt handler would run):
 * 0 or -ETIMEDOUT. *seen is a cursor of the vector's interrupt count: it returns when the count
 * differs from *seen and stores the new count (several interrupts in between wake it once).
 * Start with 0 and timeout 0 to take the current count. Host vectors are the host's: processes
 * sharing one wake each other.
 */
int sio_wait_vector(uint32_t host_vector, uint32_t *seen, int timeout_ms);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
