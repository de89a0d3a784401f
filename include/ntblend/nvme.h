/*
 * ntblend NVMe: a userspace NVMe driver library, libntbnvme (smartio-tocs-2021 §6.2, §7.4).
 * It owns a controller's admin queue and hands out I/O queue pairs whose queues can live
 * anywhere the device can reach — this host's RAM, the device's host's RAM, another device's
 * BAR — so the device fetches commands and posts completions over the NTB with no software
 * in between. Reads and writes move data by DMA straight into buffers of the application.
 *
 * Backends: the library drives the controller through a small ops table. Two backends, one
 * queue-pair core: the SmartIO device-driver API (ntblend/smartio.h) — nvme_open() borrows
 * the device by name, nvme_open_sio() takes one the caller borrowed — and the driver model
 * (ntblend/pci.h), for an NVMe function of this host's PCIe tree, the host's own or one lent
 * to it (Device Lending): nvme_open("pci:0000:80:00.0"), or nvme_open_pci() from a driver's
 * probe().
 *
 * Many hosts, one NVMe (smartio-tocs-2021 §6.2): a manager (nvme_manager_start(), or
 * `ntblend nvme manager DEVICE`) owns the controller and its admin queue; any number of
 * processes on any hosts then open the device as its clients (nvme_open() finds the manager)
 * and get I/O queue pairs of their own, created by the manager at the addresses they give.
 * Clients use the same calls as an owner; their I/O goes straight to the device. See
 * docs/nvme-driver.md.
 *
 * Conventions: functions return 0 or a negative errno unless stated otherwise; pointer
 * returns are NULL with errno set. After a failure, nvme_errmsg() says in words what went
 * wrong in this thread and what to do about it.
 *
 * Thread safety: an nvme_dev_t may be used from several threads at once (admin commands,
 * queue pair creation and deletion, memory allocation are serialised inside). An
 * nvme_qpair_t is used by one thread at a time — give each thread its own queue pair (that is
 * what NVMe queues are for); completion callbacks run in the thread that polls.
 */
#ifndef NTBLEND_NVME_H
#define NTBLEND_NVME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What this header declares is libntbnvme's API, the symbols it exports (it is built with
 * -fvisibility=hidden; docs/install.md). */
#pragma GCC visibility push(default)

typedef struct nvme_dev nvme_dev_t;     /* one controller */
typedef struct nvme_qpair nvme_qpair_t; /* one I/O submission queue and its completion queue */
typedef struct nvme_mem nvme_mem_t;     /* memory the device can reach by DMA */
struct sio_dev;
struct pci_dev;

/* Called (from the driver model's thread) when a function opened by nvme_open("pci:...") is
 * hot-removed: I/O on @d fails from then on; close it (nvme_close) — the function's memory is
 * released only after that. */
typedef void (*nvme_remove_cb_t)(nvme_dev_t *d, void *arg);

/**
 * enum nvme_place - where memory the library allocates is placed.
 * @NVME_PLACE_LOCAL: this host's RAM. Right for what the CPU reads: completion queues, data
 *                    read from the device.
 * @NVME_PLACE_DEVICE: the RAM of the device's host. Right for what the device reads and the
 *                     CPU only writes (submission queues, PRP lists): the CPU's writes cross
 *                     the NTB as posted writes, the device's reads stay local. The same as
 *                     NVME_PLACE_LOCAL when the device is in this host.
 */
enum nvme_place { NVME_PLACE_LOCAL = 0, NVME_PLACE_DEVICE = 1 };

/* How nvme_open() gets the controller. */
enum nvme_open_mode {
    NVME_OPEN_AUTO = 0, /* a client when a manager serves the device, else own it */
    NVME_OPEN_OWN,      /* borrow it exclusively and bring it up */
    NVME_OPEN_CLIENT,   /* only as a client of its manager */
};

/**
 * struct nvme_open_opts - how to bring a controller up; zero fields take the defaults.
 * @timeout_ms: command timeout: a command without a completion after this long fails with
 *              -ETIMEDOUT (default 10000).
 * @spin_us: how long a waiting thread polls a completion queue before it yields the CPU and
 *           then sleeps (default 20).
 * @admin_depth: entries in the admin queues (default 32).
 * @admin_irq: host interrupt vector (1..) that MSI-X vector 0 of the device raises; waits
 *             for admin completions then sleep in the interrupt. 0: poll.
 * @mem: optional memory the caller has already mapped for the device (@mem_ioaddr is its
 *       address as the device sees it, 4 KiB aligned; @mem_size bytes). When set, the admin
 *       queues and the library's own buffers come from it, and nvme_dev_mem() returns it so
 *       queue pairs and data buffers can use it too.
 * @mem_ioaddr: see @mem.
 * @mem_size: see @mem.
 * @mode: own the controller or be a client of its manager (enum nvme_open_mode).
 * @on_remove: "pci:" devices: called when the function is hot-removed (may be NULL; the
 *             program can also ask nvme_removed()).
 * @remove_arg: passed to @on_remove.
 * @flags: NVME_OPEN_ONE_PATH. By default a SmartIO device with two paths to its host
 *         (docs/multipath.md) gets, for every queue pair, a twin on the second path; a cut
 *         of the path in use, registers reading all ones or a command timeout move what is
 *         outstanding there and issue it again, and the queue pair returns to path 0 once it
 *         works again. Reads and writes of the same data are safe to issue twice.
 */
struct nvme_open_opts {
    unsigned timeout_ms;
    unsigned spin_us;
    uint32_t admin_depth;
    uint32_t admin_irq;
    volatile void *mem;
    uint64_t mem_ioaddr;
    size_t mem_size;
    enum nvme_open_mode mode;
    nvme_remove_cb_t on_remove;
    void *remove_arg;
    unsigned flags;
};
/* nvme_open_opts.flags: on a device with two paths, use only the one it was borrowed on (no
 * queue pair twins, no failover: a cut fails what is outstanding with -EIO, as with one). */
#define NVME_OPEN_ONE_PATH 1u

/**
 * nvme_open() - borrow an NVMe by name (exclusively, through SmartIO) and bring it up; or
 * drive an NVMe function of this host's PCIe tree through the driver model.
 * @name: the device's fabric-wide name ("nvme0"; `ntblend device list`); or "pci:BDF"
 *        ("pci:0000:80:00.0", "pci:80:00.0") for that function of this host's tree (its own,
 *        or one lent to it: `ntblend lspci --host H`), "pci:" for the first NVMe function.
 *        For "pci:" the library registers a driver that binds every NVMe function (class
 *        01:08:02) of the tree, for this process, until it exits; the process must not
 *        register a driver of its own (use nvme_open_pci() there).
 * @opts: NULL for the defaults.
 * @out: the handle.
 *
 * Owner: resets and enables the controller, sets up the admin queues, identifies the
 * controller and its active namespaces, and asks for as many I/O queues as it grants.
 * Client (a manager serves the device): borrows it shared, maps its doorbells and takes the
 * controller's and namespaces' identity from the manager; queue pairs, nvme_admin() and
 * nvme_close() then go through the manager. The process must run on an emulated host
 * (`ntblend run --host H -- prog`).
 *
 * Return: 0; -ENODEV no such device or not an NVMe; -EACCES not lent out by its host;
 * -EBUSY borrowed by someone else (NVME_OPEN_OWN while a manager runs); -ENOTCONN
 * (NVME_OPEN_CLIENT) no manager serves it, or it does not answer; -EIO controller fatal
 * status; -ETIMEDOUT the controller did not become ready. "pci:": -ENODEV no such NVMe
 * function bound; -EBUSY open already in this process, or the process has a driver of its own.
 */
int nvme_open(const char *name, const struct nvme_open_opts *opts, nvme_dev_t **out);

/**
 * nvme_open_pci() - bring up the NVMe function @dev that the caller's driver bound (from its
 * probe(), or later). The driver's remove() must close the handle (nvme_close) before it
 * returns; I/O on a function being hot-removed fails (-ENODEV before submission, -EIO for
 * what was outstanding), so threads doing I/O see it promptly.
 * Return: as nvme_open().
 */
int nvme_open_pci(struct pci_dev *dev, const struct nvme_open_opts *opts, nvme_dev_t **out);

/* The PCI function under a handle opened through the driver model, else NULL. */
struct pci_dev *nvme_pci_dev(nvme_dev_t *d);

/**
 * nvme_pci_list() - the NVMe functions of this host's tree that this process binds (the
 * library's driver registers on the first call, as for nvme_open("pci:")).
 * @names: up to @max names ("0000:80:00.0") go here; may be NULL.
 * Return: how many are bound (may be more than @max), or -errno.
 */
int nvme_pci_list(char (*names)[16], int max);

/* Whether the device under @d was hot-removed (driver model); its I/O fails from then on. */
bool nvme_removed(const nvme_dev_t *d);

/**
 * nvme_open_sio() - bring up an NVMe the caller has borrowed (and enabled) through SmartIO.
 * @dev: the borrowed device; it stays the caller's (nvme_close() does not return it).
 * @opts: NULL for the defaults.
 * @out: the handle.
 *
 * Return: as nvme_open().
 */
int nvme_open_sio(struct sio_dev *dev, const struct nvme_open_opts *opts, nvme_dev_t **out);

/**
 * nvme_close() - delete every queue pair left, shut the controller down (CC.SHN, then
 * CC.EN=0), free the library's memory and return the device if nvme_open() borrowed it.
 * @d: the handle (NULL is ignored).
 *
 * Return: 0, or the first error of the shutdown (the handle is freed anyway).
 */
int nvme_close(nvme_dev_t *d);

/* The SmartIO device under a handle opened by nvme_open()/nvme_open_sio(), else NULL. */
struct sio_dev *nvme_sio_dev(nvme_dev_t *d);

/* Whether the handle is a client of the device's manager (else it owns the controller). */
bool nvme_is_client(const nvme_dev_t *d);

/**
 * struct nvme_ctrl_info - what Identify Controller and the registers said.
 * @vid: PCI vendor id.
 * @serial: serial number (SN), trailing spaces removed.
 * @model: model number (MN), trailing spaces removed.
 * @firmware: firmware revision (FR).
 * @version: VS register: major << 16 | minor << 8 | tertiary.
 * @namespaces: number of namespaces (NN).
 * @max_transfer: bytes one read or write may move (MDTS, and one PRP list page).
 * @max_qpairs: I/O queue pairs the controller granted.
 * @max_depth: entries a queue may have (CAP.MQES + 1).
 * @doorbell_stride: bytes between doorbell registers (4 << CAP.DSTRD).
 */
struct nvme_ctrl_info {
    uint16_t vid;
    char serial[21];
    char model[41];
    char firmware[9];
    uint32_t version;
    uint32_t namespaces;
    size_t max_transfer;
    uint32_t max_qpairs;
    uint32_t max_depth;
    uint32_t doorbell_stride;
};
int nvme_ctrl_info(nvme_dev_t *d, struct nvme_ctrl_info *out);

/**
 * struct nvme_ns_info - an active namespace.
 * @nsid: its id (1..).
 * @block_size: bytes per logical block.
 * @blocks: size in blocks (NSZE); LBAs are 0..blocks-1.
 * @capacity: size in bytes.
 */
struct nvme_ns_info {
    uint32_t nsid;
    uint32_t block_size;
    uint64_t blocks;
    uint64_t capacity;
};
/* Return: 0, or -ENXIO when @nsid is not an active namespace. */
int nvme_ns_info(nvme_dev_t *d, uint32_t nsid, struct nvme_ns_info *out);

/* ---------------------------------------------------------------- memory for the device */

/**
 * nvme_mem_alloc() - memory the device can reach, placed as @where says.
 * @d: the device.
 * @size: bytes (rounded up to 4 KiB pages).
 * @where: see enum nvme_place.
 *
 * Queue pairs (struct nvme_qpair_opts) and buffers (nvme_buf_alloc()) can be taken from it.
 * Return: the memory, or NULL with errno (-ENOMEM: the host has no room).
 */
nvme_mem_t *nvme_mem_alloc(nvme_dev_t *d, size_t size, enum nvme_place where);

/**
 * nvme_mem_wrap() - use memory the caller has already mapped for the device: a segment
 * (sio_map_local/sio_map_remote), another device's BAR (sio_map_peer_bar)...
 * @d: the device.
 * @cpu: where this process reaches it.
 * @ioaddr: where the device reaches @cpu[0]; 4 KiB aligned.
 * @size: bytes.
 *
 * The caller keeps the mapping until nvme_mem_free().
 * Return: the memory, or NULL with errno.
 */
nvme_mem_t *nvme_mem_wrap(nvme_dev_t *d, volatile void *cpu, uint64_t ioaddr, size_t size);

/* The memory given in nvme_open_opts.mem, or NULL. */
nvme_mem_t *nvme_dev_mem(nvme_dev_t *d);

/* Return: 0; -EBUSY while buffers or queues are still in it. */
int nvme_mem_free(nvme_mem_t *m);

/**
 * nvme_buf_alloc() - a data buffer the device can reach: page aligned, zeroed.
 * @d: the device.
 * @m: the memory to take it from; NULL: this host's RAM, managed by the library.
 * @size: bytes.
 *
 * Any address inside memory of @d (nvme_mem_alloc, nvme_mem_wrap, nvme_buf_alloc) may be
 * passed to the I/O calls; this is the easy way to get one.
 * Return: the buffer, or NULL with errno (ENOMEM: @m is full).
 */
void *nvme_buf_alloc(nvme_dev_t *d, nvme_mem_t *m, size_t size);
int nvme_buf_free(nvme_dev_t *d, void *buf);
/* The device-side address of @buf (any address in the device's memory), or -EFAULT. */
int nvme_buf_ioaddr(nvme_dev_t *d, const void *buf, uint64_t *ioaddr);

/* ---------------------------------------------------------------- queue pairs */

/**
 * struct nvme_qpair_opts - an I/O queue pair; zero fields take the defaults.
 * @depth: entries in each queue, 2..max_depth (default 64); up to @depth - 1 commands can
 *         be outstanding.
 * @sq_place: where the library puts the submission queue (and the PRP lists, which the
 *            device reads too): NVME_PLACE_DEVICE is the fast choice for a borrowed device.
 * @cq_place: where the completion queue goes; the CPU polls it, so NVME_PLACE_LOCAL.
 * @sq_mem: instead of @sq_place: take the submission queue from this memory.
 * @cq_mem: instead of @cq_place: take the completion queue from this memory.
 * @irq: host interrupt vector (1..) that the queue's MSI-X vector (its queue id) raises;
 *       waits then sleep in the interrupt after the spin. 0: poll.
 */
struct nvme_qpair_opts {
    uint32_t depth;
    enum nvme_place sq_place, cq_place;
    nvme_mem_t *sq_mem, *cq_mem;
    uint32_t irq;
};

/**
 * nvme_qpair_create() - create an I/O completion queue and submission queue on the device.
 * @d: the device.
 * @opts: NULL for the defaults.
 * @out: the queue pair.
 *
 * Return: 0; -EBUSY all queue pairs the controller grants are in use; -EINVAL bad depth;
 * -ENOMEM no memory for the queues; -EIO the controller refused (nvme_errmsg() has its
 * status).
 */
int nvme_qpair_create(nvme_dev_t *d, const struct nvme_qpair_opts *opts, nvme_qpair_t **out);

/**
 * nvme_qpair_delete() - delete the queues on the device and free them. Commands still
 * outstanding complete with -ECANCELED (their callbacks run here).
 * @qp: the queue pair (NULL is ignored).
 *
 * Return: 0, or the error of a delete command (the queue pair is freed anyway).
 */
int nvme_qpair_delete(nvme_qpair_t *qp);

uint16_t nvme_qpair_id(const nvme_qpair_t *qp);

/* ---------------------------------------------------------------- I/O */

/**
 * struct nvme_cpl - how a command ended.
 * @rc: 0 or a negative errno decoded from @status (-ERANGE LBA out of range, -ENXIO invalid
 *      namespace, -EINVAL invalid field, -EIO media or transfer error, -ECANCELED aborted,
 *      -ETIMEDOUT no completion within the command timeout...).
 * @status: the raw status: status code type << 8 | status code (0: success).
 * @dnr: the controller said retrying will not help (Do Not Retry).
 * @dw0: command-specific result (DW0 of the completion entry).
 */
struct nvme_cpl {
    int rc;
    uint16_t status;
    bool dnr;
    uint32_t dw0;
};

/* A completion callback: runs in the thread polling the queue pair, once per command. */
typedef void (*nvme_cb_t)(void *arg, const struct nvme_cpl *cpl);

enum nvme_op {
    NVME_OP_READ,         /* blocks at lba into buf */
    NVME_OP_WRITE,        /* buf to the blocks at lba */
    NVME_OP_FLUSH,        /* make written data durable (lba, nblocks, buf unused) */
    NVME_OP_WRITE_ZEROES, /* zero nblocks (1..65536) at lba; no buf */
    NVME_OP_DEALLOCATE,   /* deallocate (trim) nblocks at lba; they then read as zeroes */
};

#define NVME_SUBMIT_DEFER 1u /* do not ring the doorbell yet (a later submit or poll does) */
#define NVME_SUBMIT_FUA 2u   /* write: force unit access (durable on completion) */

/**
 * nvme_submit() - queue a command on @qp and return; @cb runs when it completes.
 * @qp: the queue pair.
 * @op: the operation.
 * @nsid: the namespace.
 * @lba: first block.
 * @nblocks: blocks (read/write: up to max_transfer bytes).
 * @buf: read/write data: in the device's memory (see nvme_buf_alloc()), 4-byte aligned,
 *       nblocks * block_size bytes.
 * @flags: NVME_SUBMIT_*.
 * @cb: called once with the outcome (may be NULL).
 * @arg: passed to @cb.
 *
 * Checked before anything reaches the device: -ERANGE blocks past the end of the namespace;
 * -ENXIO no such namespace; -EINVAL zero or too many blocks, or a misaligned buffer; -EFAULT
 * the buffer is not in the device's memory; -EOPNOTSUPP the controller lacks the command;
 * -EAGAIN the queue is full (poll, then submit again).
 * Return: 0 when queued (@cb will run), else the error (@cb will not run).
 */
int nvme_submit(nvme_qpair_t *qp, enum nvme_op op, uint32_t nsid, uint64_t lba,
                uint32_t nblocks, void *buf, unsigned flags, nvme_cb_t cb, void *arg);

/**
 * nvme_submit_dma() - nvme_submit() with the data at a device address the caller mapped
 * itself (a read or write: @ioaddr, contiguous for nblocks * block_size bytes as the device
 * sees them, 4-byte aligned) — e.g. dma_map_single() of the buffer's PCI function
 * (nvme_pci_dev()), mapped before and unmapped after each I/O, as Linux's streaming DMA API
 * does for O_DIRECT. Other operations ignore @ioaddr. Checks and return as nvme_submit()
 * (no -EFAULT: the library cannot check the address).
 */
int nvme_submit_dma(nvme_qpair_t *qp, enum nvme_op op, uint32_t nsid, uint64_t lba,
                    uint32_t nblocks, uint64_t ioaddr, unsigned flags, nvme_cb_t cb, void *arg);

/**
 * nvme_qpair_poll() - take what has completed, without waiting, running the callbacks; rings
 * deferred submissions first and fails commands past their timeout (-ETIMEDOUT).
 * @qp: the queue pair.
 * @max: at most this many completions (0: all there are).
 *
 * Return: completions handled (>= 0), or a negative errno.
 */
int nvme_qpair_poll(nvme_qpair_t *qp, unsigned max);

/**
 * nvme_qpair_wait() - wait until at least one command completes (or times out), running the
 * callbacks of all that did: polls for spin_us, then yields, then sleeps (in the interrupt
 * with an irq).
 * @qp: the queue pair.
 * @timeout_ms: give up after this long (< 0: the command timeout).
 *
 * Return: completions handled (> 0); 0 when nothing is outstanding; -ETIMEDOUT.
 */
int nvme_qpair_wait(nvme_qpair_t *qp, int timeout_ms);

/* Commands submitted and not completed yet. */
uint32_t nvme_qpair_outstanding(const nvme_qpair_t *qp);

/*
 * Synchronous I/O: submit, then wait for that command (completions of earlier asynchronous
 * commands on @qp are handled meanwhile, their callbacks run). Same checks and errors as
 * nvme_submit(), plus the command's own (struct nvme_cpl.rc); -ETIMEDOUT after the command
 * timeout — the device may still write @buf until the queue pair is deleted.
 */
int nvme_read(nvme_qpair_t *qp, uint32_t nsid, uint64_t lba, uint32_t nblocks, void *buf);
int nvme_write(nvme_qpair_t *qp, uint32_t nsid, uint64_t lba, uint32_t nblocks,
               const void *buf);
int nvme_flush(nvme_qpair_t *qp, uint32_t nsid);
int nvme_write_zeroes(nvme_qpair_t *qp, uint32_t nsid, uint64_t lba, uint32_t nblocks);
int nvme_deallocate(nvme_qpair_t *qp, uint32_t nsid, uint64_t lba, uint32_t nblocks);

/**
 * struct nvme_cmd - a raw command for nvme_admin() and nvme_qpair_cmd(): the library adds
 * the command identifier and the PRPs for the data buffer.
 */
struct nvme_cmd {
    uint8_t opc;
    uint32_t nsid;
    uint32_t cdw10, cdw11, cdw12, cdw13, cdw14, cdw15;
};

/**
 * nvme_admin() - run an admin command and wait for it (no checks beyond the buffer).
 * @d: the device.
 * @cmd: the command.
 * @buf: data (in the device's memory), or NULL.
 * @len: bytes of data.
 * @cpl: the completion, or NULL.
 *
 * Return: cpl->rc (0 when the controller reported success), or an error before submission.
 */
int nvme_admin(nvme_dev_t *d, const struct nvme_cmd *cmd, void *buf, size_t len,
               struct nvme_cpl *cpl);
/* The same on an I/O queue pair (NVM command set). */
int nvme_qpair_cmd(nvme_qpair_t *qp, const struct nvme_cmd *cmd, void *buf, size_t len,
                   struct nvme_cpl *cpl);

/**
 * struct nvme_qpair_stats - counters of a queue pair (the admin queue's: nvme_admin_stats()).
 * @submitted: commands submitted.
 * @completed: completions delivered (including timeouts and cancellations).
 * @empty_polls: looks at the completion queue that found nothing.
 * @timeouts: commands failed with -ETIMEDOUT.
 * @late: completions that came after their command had timed out (dropped).
 * @stale: completion entries that matched no outstanding command (wrong identifier or queue;
 *         dropped).
 * @failovers: moves to the other path after a fault (a device with two paths: every queue
 *         pair has a twin on the other path; docs/multipath.md).
 * @returns: moves back to the primary path once it worked again.
 * @reissued: commands issued again on the other path at a failover (the caller saw one
 *         completion for each).
 * @path: the path the queue pair submits on now (0: the primary).
 */
struct nvme_qpair_stats {
    uint64_t submitted, completed, empty_polls, timeouts, late, stale;
    uint64_t failovers, returns, reissued;
    int path;
};
void nvme_qpair_stats(const nvme_qpair_t *qp, struct nvme_qpair_stats *out);
void nvme_admin_stats(nvme_dev_t *d, struct nvme_qpair_stats *out);

/* This thread's last failure in words, with what to do ("" if none yet). */
const char *nvme_errmsg(void);

/* ---------------------------------------------------------------- the manager */

typedef struct nvme_manager nvme_manager_t;

/**
 * struct nvme_manager_opts - how to run a manager; zero fields take the defaults.
 * @timeout_ms: admin command timeout (default 10000).
 * @max_clients: clients served at once (default and maximum 1024).
 * @check_ms: how often it looks for clients that died or were cut off (default 100).
 * @log: say on stderr when a client connects, leaves, or is reclaimed (and why).
 */
struct nvme_manager_opts {
    unsigned timeout_ms;
    uint32_t max_clients;
    unsigned check_ms;
    bool log;
};

/**
 * nvme_manager_start() - become the manager of an NVMe: borrow it exclusively, bring it up
 * (nvme_open()), share it, and serve its clients from a thread of this process until
 * nvme_manager_stop().
 * @name: the device ("nvme0").
 * @opts: NULL for the defaults.
 * @out: the manager.
 *
 * Clients talk to it over the fabric only: requests are interrupts with data
 * (seg_intr_trigger_data()) to the manager's interrupt, answers are stored into a segment of
 * the client's. It creates and deletes I/O queue pairs at the addresses clients give, runs
 * Identify, Get Log Page, Get Features and Set Features for them, and keeps which client owns
 * which queue identifiers: when a client process dies or its host is cut off, its queues are
 * deleted on the device and their identifiers reused.
 *
 * Return: 0; -EBUSY another process manages or uses the device (nvme_errmsg() names it);
 * else as nvme_open().
 */
int nvme_manager_start(const char *name, const struct nvme_manager_opts *opts,
                       nvme_manager_t **out);

/**
 * nvme_manager_stop() - stop serving: delete every client's queue pairs, shut the controller
 * down and return the device. Clients' next admin requests fail with -ENOTCONN; their I/O
 * fails (-EIO) once the controller is disabled.
 * Return: 0, or the first error of the shutdown.
 */
int nvme_manager_stop(nvme_manager_t *m);

/**
 * struct nvme_manager_client - one client, as the manager sees it.
 * @node: the client's node id.
 * @pid: its process id on that host.
 * @qpairs: I/O queue pairs it owns.
 * @requests: admin requests it made.
 */
struct nvme_manager_client {
    uint32_t node, pid, qpairs;
    uint64_t requests;
};

/**
 * struct nvme_manager_status - what a manager is doing.
 * @clients: clients connected now.
 * @qpairs: I/O queue pairs in use now; @max_qpairs: the controller's.
 * @requests: admin requests served.
 * @reclaimed_clients: clients found dead or cut off, whose queues were deleted.
 * @reclaimed_qpairs: queue pairs deleted for them.
 */
struct nvme_manager_status {
    uint32_t clients, qpairs, max_qpairs;
    uint64_t requests, reclaimed_clients, reclaimed_qpairs;
};

/**
 * nvme_manager_status() - counters, and up to @max clients into @clients (may be NULL).
 * Return: the number of clients connected.
 */
int nvme_manager_status(nvme_manager_t *m, struct nvme_manager_status *st,
                        struct nvme_manager_client *clients, uint32_t max);

/* The manager's own handle on the controller (for Identify and the like, not I/O). */
nvme_dev_t *nvme_manager_dev(nvme_manager_t *m);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
