/*
 * The NTB backend seam: everything the runtime, the NTB API, the segment layer and SmartIO
 * need from the hardware underneath, as one table of operations. The emulated fabric
 * (src/ntb/emu) is the
 * implementation libntblend uses; another one (real adapters through a kernel or userspace
 * driver, or a test double) plugs in with ntb_backend_use() before the runtime starts.
 * docs/backends.md says what each operation must do and how it maps onto Linux's ntb.h and
 * DPDK's NTB raw device. Internal to libntblend: not in the public headers.
 *
 * Conventions: int returns are 0 (or an index >= 0) on success, -errno on failure; pointer
 * returns are NULL with errno set. Adapters are the backend's own ids (what adapter() and
 * adapter_toward() return); hosts are indices 0..host_count()-1. Every operation may be called
 * from any thread of the process, concurrently, unless its comment says otherwise.
 */
#ifndef NTBLEND_NTB_BACKEND_H
#define NTBLEND_NTB_BACKEND_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent_proto.h"
#include "ntblend/ntb.h"

struct rt;

#define NTB_BK_BARS 6        /* BAR slots of a device function */
#define NTB_BK_NAME_MAX 32
#define NTB_BK_MAX_PEERS 64  /* ntb_link_is_up returns a 64-bit mask of peers */
#define NTB_BK_MAX_HOSTS 256

/* What the NTB API needs to know about an adapter. */
struct ntb_adapter_info {
    char name[NTB_BK_NAME_MAX];
    uint32_t host;
    uint32_t npeers;
    uint32_t peers[NTB_BK_MAX_PEERS]; /* the adapters its port reaches (pidx order) */
    uint32_t mw_count;      /* outbound translation entries */
    uint64_t mw_size;       /* bytes each */
    uint64_t mw_base;       /* bus address of entry 0 on its host */
    uint64_t db_valid;      /* doorbell bits applications may use */
    uint32_t spads, dma_channels;
    uint16_t rid;           /* requester ID of the port: what traffic entering its host
                             * through it carries (its IOMMU domain there) */
};

/* A function lent to a host and hot-added into its PCIe tree (Device Lending). */
struct ntb_shadow_info {
    uint32_t fn;            /* the lent function */
    uint16_t bdf;           /* its place in the borrower's tree */
    bool present;           /* false while it is being hot-removed */
    uint64_t bar_addr[NTB_BK_BARS]; /* its BARs in the borrower's address map, 0: none */
};

/* A range of a peer host's address space made reachable through an adapter. */
struct ntb_window {
    uint32_t adapter;       /* ours */
    uint32_t peer_host;
    uint64_t peer_addr, len;
    uint64_t bus;           /* where peer_addr appears in this host's physical address space */
    uint32_t first, count;  /* translation entries held; count 0: no window */
    uint64_t offset;        /* of peer_addr within the first entry */
};

/* iommu_map permissions: what the device may do */
#define NTB_IOMMU_READ 1u
#define NTB_IOMMU_WRITE 2u

/* window_map flags */
#define NTB_WIN_DMA 1u /* also reachable by this host's DMA engines (through its IOMMU) */
#define NTB_WIN_MCAST 2u /* peer_host is a multicast group, peer_addr an offset in its window */

/* Multicast groups of the cluster switches (docs/multicast.md): one operation (mcast). */
enum ntb_mcast_verb { NTB_MCAST_CREATE, NTB_MCAST_REMOVE, NTB_MCAST_JOIN, NTB_MCAST_LEAVE };
struct ntb_mcast_op {
    enum ntb_mcast_verb verb;
    const char *name;   /* CREATE: the group's name */
    const char *sw;     /* CREATE: the switch (NULL: the fabric's first) */
    uint64_t size;      /* CREATE: its window, a power of two */
    uint32_t group;     /* REMOVE, JOIN, LEAVE */
    uint32_t host;      /* JOIN, LEAVE: the member */
    uint64_t addr;      /* JOIN: the overlay, an address of the member's map */
    bool keep;          /* CREATE, JOIN: held by no process (until removed / left) */
};
/* A group as mcast_info reports it. */
struct ntb_mcast_info {
    char name[NTB_BK_NAME_MAX], sw[NTB_BK_NAME_MAX];
    uint64_t size;
    uint32_t members, senders; /* hosts subscribed; translation entries that target it */
    int32_t owner_pid;         /* 0: kept */
    uint64_t overlay[NTB_BK_MAX_HOSTS]; /* by host index: the member's overlay, or UINT64_MAX */
};

/* What SmartIO needs to know about a device function. */
struct ntb_func_info {
    uint32_t host;          /* the host it sits in (its lender) */
    char name[NTB_BK_NAME_MAX], type[NTB_BK_NAME_MAX], host_name[NTB_BK_NAME_MAX];
    uint16_t vendor, device;
    uint32_t class_code;    /* config bytes 0x0b:0x0a:0x09 */
    uint32_t vf;            /* 0: a physical function, else its VF number */
    bool available, exclusive;
    uint32_t borrowers;
    bool managed;           /* a borrower set it up and shares it (sio_share) */
    uint32_t manager_host, manager_pid;
    uint32_t msix_cap;      /* config-space offset of its MSI-X capability */
    uint16_t bdf;           /* its place in its own host's PCIe tree (bus << 8 | dev << 3 | fn) */
    struct {
        uint64_t size;      /* 0: no BAR in this slot */
        uint64_t addr;      /* in the lender's physical address space */
        bool regs;          /* registers a model serves (else plain memory) */
    } bar[NTB_BK_BARS];
};

/* A virtual machine as its guest sees it (docs/vm.md "For guests of the driver model"). */
#define NTB_VM_DEVS 8
enum ntb_vm_dev_state { NTB_VMDEV_NONE = 0, NTB_VMDEV_OFFERED, NTB_VMDEV_HELD, NTB_VMDEV_GONE };
struct ntb_vm_info {
    uint32_t slot, host;    /* the VM's slot on the fabric, the host it runs on */
    bool running;           /* started, not stopping */
    bool emulated;          /* a guest of the driver model (no QEMU) */
    uint64_t mem;           /* guest RAM: guest-physical 0 .. mem */
    uint64_t ram_base;      /* where guest-physical 0 is in the host's map */
    char ctl[160];          /* its control socket (mediated config space and the rest) */
    struct {
        uint32_t state;     /* enum ntb_vm_dev_state */
        uint32_t fn;        /* the function (a func_info index) */
        uint16_t bdf;       /* in the guest's tree */
        uint64_t bar[NTB_BK_BARS]; /* guest-physical BAR addresses, 0: none */
        uint64_t ram_io;    /* the device's I/O address of guest-physical 0 */
    } dev[NTB_VM_DEVS];
};

struct ntb_backend_ops {
    const char *name;

    /* ---- lifetime and control ----
     * start: attach this process to its host: set rt->host and rt->boot_gen, and whatever
     * private state the backend keeps (rt->bk). -ENOENT no such fabric or host,
     * -ECONNREFUSED no host agent, -EHOSTDOWN host down. Called once, under the runtime lock.
     * stop: undo start, after the last reference is gone (no other call is running).
     * agent_call: one request to this host's control service (src/lib/agent_proto.h), which
     * owns memory allocation, segments, interrupts and device lending. The reply's status:
     * 0 or -errno. Calls are serialised by the backend. */
    int (*start)(struct rt *rt);
    void (*stop)(struct rt *rt);
    int (*agent_call)(struct rt *rt, const struct agent_req *req, struct agent_rsp *rsp);

    /* ---- hosts ---- node_id: the host's node id (what users address); host_by_node: the
     * host with that node id, -EHOSTUNREACH if none; boot_gen: bumped when the host reboots
     * (a changed value means every mapping into it is stale). */
    uint32_t (*node_id)(struct rt *rt, uint32_t host);
    int (*host_by_node)(struct rt *rt, uint32_t node_id);
    uint32_t (*boot_gen)(struct rt *rt, uint32_t host);
    /* host_name: the host's name (what a cluster manager calls it), copied into buf; may be
     * NULL (ntb_node_name then answers -EOPNOTSUPP). latency_model: 1 when the fabric adds
     * modelled delays to every access (an emulation's feature), 0 when not; NULL on
     * hardware. ram_size: bytes of RAM the host has (what a cluster manager's inventory
     * says); may be NULL (ntb_fabric_host then reports 0). */
    int (*host_name)(struct rt *rt, uint32_t host, char *buf, size_t len);
    int (*latency_model)(struct rt *rt);
    uint64_t (*ram_size)(struct rt *rt, uint32_t host);

    /* ---- adapters, paths, link state ----
     * adapter: adapter number `index` (0-based) of `host` as an adapter id, -ENODEV if
     * there is none. adapter_toward: the adapter of `host` that reaches host `target`
     * (directly or through switches), its peer adapter in *peer; -EHOSTUNREACH if none.
     * peer_on: the adapter on `host` that `adapter`'s link reaches, -ENOTCONN if none.
     * path_up: the link(s) between adapter and peer are up. path_signature: a value that
     * changes whenever the path goes down and up again (segment sequences compare it).
     * path_word: a word that changes before and after every change of what path_up,
     * path_signature or boot_gen answer for any path, so a reader that finds it the same
     * before and after reading them knows nothing changed (a sequence check reads only it);
     * may be NULL (sequence checks then read the path every time). */
    int (*adapter)(struct rt *rt, uint32_t host, int index);
    int (*adapter_toward)(struct rt *rt, uint32_t host, uint32_t target, uint32_t *peer);
    int (*peer_on)(struct rt *rt, uint32_t adapter, uint32_t host);
    bool (*path_up)(struct rt *rt, uint32_t adapter, uint32_t peer);
    uint64_t (*path_signature)(struct rt *rt, uint32_t adapter, uint32_t peer);
    _Atomic uint32_t *(*path_word)(struct rt *rt);

    /* ---- windows ----
     * window_map: make [peer_addr, peer_addr+len) of peer_host reachable through `adapter`
     * (program translation entries owned by this process; NTB_WIN_DMA: map the window for
     * this host's DMA engines too); fill *w. All or nothing. -ENOSPC out of entries,
     * -EHOSTUNREACH / -ENOTCONN no path, -EINVAL bad range.
     * window_unmap: release them (w->count becomes 0); a no-op on an empty window.
     * window_cpu_map: map a window into this process; returns the address of peer_addr and
     * in *base what window_cpu_unmap takes. readonly: stores fault. Loads and stores must
     * reach the peer's memory with no software in the path.
     * window_cpu_unmap: 0, or -EINVAL if base is not a mapping of ours. */
    int (*window_map)(struct rt *rt, uint32_t adapter, uint32_t peer_host, uint64_t peer_addr,
                      uint64_t len, unsigned flags, struct ntb_window *w);
    void (*window_unmap)(struct rt *rt, struct ntb_window *w);
    void *(*window_cpu_map)(struct rt *rt, const struct ntb_window *w, bool readonly,
                            void **base);
    int (*window_cpu_unmap)(struct rt *rt, void *base);
    /* window_cpu_failover (may be NULL): `alt` is a window onto the same range through
     * another adapter (another path, smartio-tocs-2021 §6.3); while the path of the mapping at
     * `base` is down and alt's is up, its addresses reach the target through alt, and return
     * when it heals. -EINVAL when alt's geometry differs (entry size, count). */
    int (*window_cpu_failover)(struct rt *rt, void *base, const struct ntb_window *alt);

    /* ---- local memory and interrupts ----
     * ram: a pointer to [phys, phys+len) of a host's RAM as this process may reach it
     * directly (this host's, or any host's when memory is shared), NULL + EFAULT otherwise.
     * ram_fd: a file whose offsets are that host's physical addresses (for read-only views),
     * -EOPNOTSUPP if the backend has none. msi_word: the futex word counting interrupts of
     * this host's MSI vector (bumped by every write to msi_addr + vector). */
    void *(*ram)(struct rt *rt, uint32_t host, uint64_t phys, uint64_t len);
    int (*ram_fd)(struct rt *rt, uint32_t host);
    _Atomic uint32_t *(*msi_word)(struct rt *rt, uint32_t vector);
    uint64_t msi_addr;     /* bus address of this host's MSI region (one 4 KiB page) */
    uint32_t msi_vectors;  /* vectors per host */

    /* ---- device functions ----
     * func_info: what function `fn` is; -ENODEV if fn is past the last one. func_by_name:
     * its index, -ENOENT if none. cfg_read/cfg_write: its config space (as the lender's root
     * complex does it; cfg_write -EINVAL on a bad offset/length). bar_mem: BAR `bar` of a
     * function in this host, mapped into this process (NULL + EINVAL if none). fn_notify:
     * tell the function's model a register was written (a doorbell write on hardware needs
     * nothing: the write itself is the notification), and where the writer runs (the
     * emulated backend publishes the caller's CPU for the model's doorbell wait). fn_raw: a CPU mapping of fn's
     * registers whose stores come without fn_notify was made (+1) or dropped (-1), so the
     * model must watch them itself (-ENOSPC: too many processes hold such mappings of fn);
     * NULL where a store needs no notification (hardware). */
    int (*func_info)(struct rt *rt, uint32_t fn, struct ntb_func_info *out);
    int (*func_by_name)(struct rt *rt, const char *name);
    uint32_t (*cfg_read)(struct rt *rt, uint32_t fn, uint32_t off, uint32_t len);
    int (*cfg_write)(struct rt *rt, uint32_t fn, uint32_t off, uint32_t len, uint32_t val);
    volatile void *(*bar_mem)(struct rt *rt, uint32_t fn, int bar);
    void (*fn_notify)(struct rt *rt, uint32_t fn);
    int (*fn_raw)(struct rt *rt, uint32_t fn, int delta);
    /* fn_cpu_word: where fn's model publishes the CPU its thread last ran on, + 1 (0: not
     * known), for drivers that would otherwise spin on the CPU the model needs. NULL (the op
     * or its result) where the device is hardware and uses no CPU of ours. */
    const _Atomic uint32_t *(*fn_cpu_word)(struct rt *rt, uint32_t fn);
    /* fn_driver_asleep: the calling thread, fn's driver, goes to sleep (true) or woke (false):
     * the CPU fn_notify published for it is withdrawn while it sleeps, and published again
     * when it wakes, so that fn's model does not give up its CPU to a driver that is on no
     * run queue. NULL where the device is hardware. */
    void (*fn_driver_asleep)(struct rt *rt, uint32_t fn, bool asleep);
    /* tree: the functions lent to `host` and hot-added into its PCIe tree, at most max into
     * out; returns how many there are. tree_word: a word that changes on every hot-add and
     * hot-remove in host's tree (wait on it with wait()). Both may be NULL (no lending). */
    int (*tree)(struct rt *rt, uint32_t host, struct ntb_shadow_info *out, int max);
    _Atomic uint32_t *(*tree_word)(struct rt *rt, uint32_t host);

    /* ---- the NTB device (include/ntblend/ntb.h), on one adapter ----
     * adapter_info: what it is; -ENODEV no such adapter.
     * mw_set: point translation entry `widx` of `adapter` at [addr, addr + mw_size) of
     * peer_host, owned by this process; returns once stores through it reach the new target.
     * The inbound direction (ntb_mw_set_trans) is mw_set on the peer's adapter. -EINVAL bad
     * entry or address, -EBUSY entry owned by another process. mw_clear: release it (-EPERM
     * not ours). mw_alloc: a free entry, claimed for this process (-ENOSPC). mw_cpu_map:
     * entries [first, first+count) mapped into this process (window_cpu_unmap undoes it).
     * link_set: enable/disable the port; disable returns when no store crosses it any more.
     * link_word: a futex word that changes on every change of the adapter's reachability. */
    int (*adapter_info)(struct rt *rt, uint32_t adapter, struct ntb_adapter_info *out);
    int (*mw_set)(struct rt *rt, uint32_t adapter, uint32_t widx, uint32_t peer_host, uint64_t addr);
    int (*mw_clear)(struct rt *rt, uint32_t adapter, uint32_t widx);
    int (*mw_alloc)(struct rt *rt, uint32_t adapter);
    void *(*mw_cpu_map)(struct rt *rt, uint32_t adapter, uint32_t first, uint32_t count);
    void (*link_set)(struct rt *rt, uint32_t adapter, bool enable);
    _Atomic uint32_t *(*link_word)(struct rt *rt, uint32_t adapter);

    /* Doorbells: the adapter's register (db_read, db_set raises events as a peer's ring
     * does, db_clear), its mask (db_mask_clear raises pending unmasked bits), peer_db_set
     * (ring `peer`'s register from `adapter`; dropped silently if the path is down;
     * -EINVAL bad bits), db_word (a futex word bumped on every doorbell event). Bits are
     * within adapter_info.db_valid (callers check). */
    uint64_t (*db_read)(struct rt *rt, uint32_t adapter);
    void (*db_set)(struct rt *rt, uint32_t adapter, uint64_t bits);
    void (*db_clear)(struct rt *rt, uint32_t adapter, uint64_t bits);
    uint64_t (*db_mask_read)(struct rt *rt, uint32_t adapter);
    void (*db_mask_set)(struct rt *rt, uint32_t adapter, uint64_t bits);
    void (*db_mask_clear)(struct rt *rt, uint32_t adapter, uint64_t bits);
    int (*peer_db_set)(struct rt *rt, uint32_t adapter, uint32_t peer, uint64_t bits);
    _Atomic uint32_t *(*db_word)(struct rt *rt, uint32_t adapter);

    /* Scratchpads of any adapter (the caller checks the index against adapter_info.spads
     * and, for a peer's, that the path is up: a read across a dead link is all ones). */
    uint32_t (*spad_read)(struct rt *rt, uint32_t adapter, uint32_t idx);
    void (*spad_write)(struct rt *rt, uint32_t adapter, uint32_t idx, uint32_t val);

    /* DMA engine: dma_chan_get claims a free channel of the adapter for this process (NULL +
     * EBUSY all taken, ENODEV none); dma_submit queues a copy between bus addresses of this
     * host and returns its cookie (> 0; -EAGAIN ring full, -EINVAL); dma_abort cancels what
     * has not started; dma_wait waits for a cookie: its status (0 done, -errno failed),
     * -ETIMEDOUT, -EINVAL unknown cookie. One channel is used by one thread at a time. */
    void *(*dma_chan_get)(struct rt *rt, uint32_t adapter);
    void (*dma_chan_put)(struct rt *rt, void *chan);
    int64_t (*dma_submit)(struct rt *rt, void *chan, uint64_t dst, uint64_t src, uint64_t len,
                          bool interrupt);
    int (*dma_abort)(struct rt *rt, void *chan);
    int (*dma_wait)(struct rt *rt, void *chan, int64_t cookie, int timeout_ms);

    /* IOMMU: dma_buf_map maps [phys, phys+len) of this host at identity IOVAs for the
     * adapter's inbound traffic and its DMA engine (on), or unmaps it; 0 when the host has no
     * IOMMU. -ENOSPC table full. iommu_faults: the host's recent faults, newest last, as
     * ntb_iommu_faults returns them. */
    int (*dma_buf_map)(struct rt *rt, uint32_t adapter, uint64_t phys, uint64_t len, bool on);
    int (*iommu_faults)(struct rt *rt, uint32_t host, struct ntb_fault *out, int max,
                        uint64_t *total);
    /* Streaming DMA mappings (dma_map_single): iommu_on: 1 when `host` has an IOMMU in front
     * of its RAM, 0 when devices reach it by physical address. iommu_map: map [iova, iova +
     * len) of requester rid's domain on this host onto [phys, phys + len) of its RAM, owned
     * by this process (gone when it dies), for the device only (NTB_IOMMU_READ: it may read,
     * NTB_IOMMU_WRITE: write); the caller picks the IOVAs. Cheap: no process's CPU windows
     * are touched. -EEXIST overlaps a mapping of rid, -ENOSPC table full, -EINVAL bad range,
     * -EOPNOTSUPP no IOMMU. iommu_unmap: remove exactly what one iommu_map mapped; once it
     * returns the device reaches nothing there (-ENOENT no such mapping). */
    int (*iommu_on)(struct rt *rt, uint32_t host);
    int (*iommu_map)(struct rt *rt, uint16_t rid, uint64_t iova, uint64_t phys, uint64_t len,
                     unsigned perm);
    int (*iommu_unmap)(struct rt *rt, uint16_t rid, uint64_t iova, uint64_t len);

    /* ---- time and waiting (no rt: usable before start) ----
     * now_ns: a monotonic clock. wait: sleep while *w == seen, at most timeout_ns (<0:
     * forever); 0, or -ETIMEDOUT; spurious wake-ups allowed. wake: wake up to n waiters.
     * Words may be in memory other processes share. */
    uint64_t (*now_ns)(void);
    int (*wait)(_Atomic uint32_t *w, uint32_t seen, int64_t timeout_ns);
    void (*wake)(_Atomic uint32_t *w, int n);

    /* ---- virtual machines (may be NULL: no VMs) ----
     * vm_info: the live VM named `name`, -ENOENT none. vm_word: a word that changes on every
     * change of VM slot `slot`'s record (wait on it with wait()). */
    int (*vm_info)(struct rt *rt, const char *name, struct ntb_vm_info *out);
    _Atomic uint32_t *(*vm_word)(struct rt *rt, uint32_t slot);

    /* ---- multicast groups of the switches (may be NULL: no multicast) ----
     * mcast: create (returns the group's index), remove, join or leave, as struct
     * ntb_mcast_op says; held by this process unless op->keep. Errors as src/fabric/fab_mcast.h
     * documents them. mcast_info: group `group`'s record, -ENOENT when there is none.
     * mcast_find: the index of the group named `name`, or -ENOENT. A sender maps a group with
     * window_map(..., NTB_WIN_MCAST, ...). */
    int (*mcast)(struct rt *rt, const struct ntb_mcast_op *op);
    int (*mcast_info)(struct rt *rt, uint32_t group, struct ntb_mcast_info *out);
    int (*mcast_find)(struct rt *rt, const char *name);
};

/* The emulated PCIe NTB fabric (src/fabric, backend in src/ntb/emu), the default. */
extern const struct ntb_backend_ops ntb_backend_emu;

/* Whether a table can be used (src/ntb/backend.c says which operations are required, which
 * come as a group — the PCIe tree, the NTB device with its DMA engines: all or none — and
 * which may be NULL alone). 0, or -EINVAL with the first missing operation's name in *missing. */
int ntb_backend_ops_check(const struct ntb_backend_ops *ops, const char **missing);
/* Use `ops` for runtimes started from now on (NULL: back to the emulated fabric), once it
 * passes the check; -EINVAL (and a message naming the missing operation) if it does not. Call
 * it while no runtime is running. */
int ntb_backend_use(const struct ntb_backend_ops *ops);
const struct ntb_backend_ops *ntb_backend(void);

#endif
