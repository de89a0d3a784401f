/*
 * The layout of the emulated PCIe NTB fabric's shared state: the hardware every host agent,
 * application and the CLI share, and the address map of a host. It lives in
 * /dev/shm/ntblend.<fabric>/: "ctl" holds registers and tables (struct fab_ctl and the arrays
 * it points to by offset), "host<N>.ram" is host N's RAM (sparse), "fn<N>.bars" a function's
 * BARs. Register-like fields are atomics that any attached process reads and writes directly,
 * as a driver would through MMIO.
 */
#ifndef NTBLEND_FAB_STATE_H
#define NTBLEND_FAB_STATE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "topo.h"

#define FAB_MAGIC 0x4e54424cu /* "NTBL" */
#define FAB_VERSION 18
#define FAB_CPU_WORDS 16 /* dma_cpus: CPUs 0..1023, as cpu_set_t */
#define FAB_NAME_MAX 64
#define FAB_MAX_PROCS 512
#define FAB_IOMMU_MAPS 4096   /* per host */
#define FAB_FAULT_RING 64     /* per host */
#define FAB_DMA_RING 256      /* descriptors per DMA channel */
/* Copies shorter than this end within microseconds, so waiting for one (the submitter for its
 * completion, the engine for the next descriptor after one) polls before it sleeps; longer
 * ones take longer than such a poll, which would only take the CPU from everybody else. */
#define FAB_DMA_POLL_MAX (64u << 10)
#define FAB_MSI_VECTORS 256   /* per host */
#define FAB_PATH_MAX 16       /* links on one adapter-to-adapter path */
#define FAB_MAX_CHAIN 8       /* windows one access may chain through */

/* Physical address map of every host (bus addresses when the IOMMU is off). */
#define FAB_RAM_BASE 0x0ull
#define FAB_MSI_BASE 0xfee00000ull /* writes of a vector number raise it */
#define FAB_MSI_SIZE 0x100000ull
#define FAB_ADAPTER_BASE (1ull << 40) /* adapter i's window BAR at BASE + i * STRIDE */
#define FAB_ADAPTER_STRIDE (1ull << 36)
#define FAB_DEVICE_BASE (1ull << 44) /* device BARs, assigned at enumeration (later layers) */
/* Guest RAM of the VM in slot s, in its host's map: VM_BASE + s * VM_STRIDE, mem bytes. */
#define FAB_VM_BASE (1ull << 43)
#define FAB_VM_STRIDE (1ull << 38) /* the largest guest: 256 GiB */

/* Agent mailboxes: the first FAB_MBOX_SIZE bytes of every host's RAM are reserved. */
#define FAB_ONES_SIZE (1ull << 20) /* the all-ones file that reads through dead windows map */
#define FAB_MBOX_SLOT 4096u
#define FAB_MBOX_SLOTS TOPO_MAX_HOSTS
#define FAB_MBOX_SIZE ((uint64_t)FAB_MBOX_SLOT * FAB_MBOX_SLOTS)
/* Agents reserve the top doorbell bit of every adapter (db_bits - 1) for their mailboxes. */
#define FAB_CPU_RIDS 2u      /* requester-ID entries each CPU reserves per adapter (smartio §8) */

enum fab_host_state { FAB_HOST_DOWN = 0, FAB_HOST_BOOTING = 1, FAB_HOST_UP = 2 };

enum fab_region { FAB_REGION_NONE, FAB_REGION_RAM, FAB_REGION_MSI, FAB_REGION_WINDOW,
                  FAB_REGION_DEVICE, FAB_REGION_MCAST };

/* ---- PCIe functions (devices declared in the topology; see devices.c) ---- */
#define FAB_MAX_FUNCS 512
#define FAB_BARS 6 /* BAR register slots; ntblend's BARs are 64-bit, so 0, 2 and 4 are used */
enum fab_bar_kind { FAB_BAR_NONE = 0, FAB_BAR_MEM, FAB_BAR_REGS };

struct fab_bar {
    uint32_t kind;   /* enum fab_bar_kind: plain memory, or registers a model serves */
    /* A memory BAR: its model is waiting for a device's write into it (an accelerator's WAIT
     * or NVMe job), so such writes bump reg_seq as register writes do (fab_fn_written). */
    _Atomic uint32_t watched;
    uint64_t size;   /* power of two >= 4 KiB */
    uint64_t addr;   /* assigned at enumeration, in the host's physical map */
    uint64_t off;    /* where it lives in the function's BAR file */
};

/* A process's CPU mappings of one function's registers (fab_function.raw_maps). */
#define FAB_RAW_OWNERS 32
struct fab_raw_owner {
    int32_t pid; /* 0: free */
    uint32_t n;
};

struct fab_function {
    char name[TOPO_NAME_MAX];  /* "nvme0", "nvme0.f1" (multi-function), "accel0.vf2" (SR-IOV) */
    char type[TOPO_NAME_MAX];  /* model: "nvme", "accel" */
    char params[512];          /* the topology's key=value; pairs for the model */
    uint32_t device;           /* index of the [device] section */
    uint32_t host;
    uint32_t fn;               /* function number within the device */
    uint32_t vf;               /* 0 for a physical function, else the VF number (1..) */
    uint16_t rid;              /* requester ID: bus 2 + device index, device, function */
    uint16_t at;               /* the in-host switch it sits below + 1; 0: a root port */
    struct fab_bar bar[FAB_BARS];
    uint64_t file_size;        /* of fn<N>.bars */
    uint8_t cfg[4096];         /* configuration space */
    _Atomic uint32_t cfg_lock;
    uint32_t bar_sizing;       /* BAR slots written all-ones: reads return the size mask */
    _Atomic uint32_t reg_seq;  /* futex: a register write (doorbell) wakes the model */
    _Atomic uint32_t reg_waiters; /* model threads asleep on reg_seq (fab_fn_wait) */
    _Atomic uint32_t model_up; /* the model is serving this function */
    _Atomic uint32_t reset_gen; /* bumps on a function-level reset: models drop all state */
    /* The reset_gen the model has finished its reset for (its registers are as at power-on
     * again): fab_fn_reset returns once it is, as software waits for an FLR to complete. */
    _Atomic uint32_t reset_done;
    /* The CPU the model's thread last ran on, + 1 (0: not known): emulator state, no register.
     * Written only when it changes, so an I/O writes no line for it; a driver that finds it
     * equal to its own CPU yields instead of spinning (the model needs that CPU). */
    _Atomic uint32_t model_cpu;
    /* The other direction: the CPU the program that last wrote a register of this function
     * through the emulated backend (its driver, fab_fn_note_driver_cpu) ran on, + 1 (0: not
     * known). Also emulator state, on the line reg_seq's bump writes anyway, and written only
     * when it changes; the model's doorbell wait yields instead of spinning when it finds its
     * own CPU here (the driver needs that CPU to ring again). */
    _Atomic uint32_t driver_cpu;
    /* SmartIO lending state, written only by the lender's agent. */
    _Atomic uint32_t lend_available;
    _Atomic uint32_t lend_exclusive;      /* the borrower holds it alone */
    _Atomic uint64_t lend_borrowers[4];   /* bit per host index */
    /* The borrower that set the device up and then shared it (sio_share: an NVMe manager),
     * host index + 1 (0: none), and its process id there. */
    _Atomic uint32_t lend_manager;
    _Atomic uint32_t lend_manager_pid;
    _Atomic uint32_t lend_setup;          /* shared after an exclusive set-up: reset when the
                                           * last borrower leaves */
    /* CPU mappings of a register BAR whose stores come without fab_fn_notify (a SISCI
     * program's plain stores to a mapped BAR): while there are any, the model looks at its
     * registers on its own (fab_fn_wait wakes every FAB_RAW_TICK_NS), as hardware sees a
     * store without being told. raw_maps is the sum of raw_owner[].n, kept for the models'
     * hot checks; each process's share is counted under its pid (rawmap.c) so that it goes
     * with the process, as its LUT entries do. A reset leaves them: it unmaps nobody. */
    _Atomic uint32_t raw_maps;
    _Atomic uint32_t raw_lock;
    struct fab_raw_owner raw_owner[FAB_RAW_OWNERS];
};

/* Device Lending: a function lent to this host and hot-added into its PCIe tree ("shadow").
 * Written only by this host's agent; read by lspci and by drivers enumerating the host. */
#define FAB_SHADOWS 16       /* per host */
#define FAB_SHADOW_BUS 0x80u /* shadows sit on buses 0x80.. of the borrower's tree */
enum fab_shadow_state { FAB_SHADOW_FREE = 0, FAB_SHADOW_PRESENT, FAB_SHADOW_REMOVING };
struct fab_shadow {
    _Atomic uint32_t state;  /* enum fab_shadow_state */
    _Atomic uint32_t gen;    /* futex: bumps on hot-add and hot-remove */
    uint32_t fn;             /* the lent function (fabric-wide index) */
    uint16_t bdf;            /* where it sits in this host's tree */
    uint16_t pad;
    uint64_t bar_addr[FAB_BARS]; /* its BARs in this host's physical map (NTB windows), 0: none */
};

/* Virtual machines (src/vm, docs/vm.md): a guest's RAM is a region of its host's physical map
 * backed by the file vm<slot>-<gen>.ram (QEMU maps that file as the guest's memory), and the
 * devices given to it. Written only by the VM's process (ntblend-vm on the host), read by
 * everyone: the fabric resolves device DMA into the RAM, the CLI and drivers in the guest read
 * the device table. */
#define FAB_MAX_VMS 16
#define FAB_VM_DEVS 8
#define FAB_VM_NAME 32
enum fab_vm_state { FAB_VM_FREE = 0, FAB_VM_STARTING, FAB_VM_RUNNING, FAB_VM_STOPPING };
enum fab_vmdev_state {
    FAB_VMDEV_NONE = 0,
    FAB_VMDEV_OFFERED,  /* in the guest's tree, still with its lender (no Bus Master yet) */
    FAB_VMDEV_HELD,     /* borrowed for the guest, guest RAM mapped for it */
    FAB_VMDEV_GONE,     /* its lender died or withdrew it: the guest sees a surprise removal */
};
enum fab_vmdev_kind { FAB_VMDEV_PASS = 0, FAB_VMDEV_VHOST_BLK = 1 };
#define FAB_VMDEV_IOVA_GPA 1u /* the lender's IOMMU maps the guest's RAM at I/O address = GPA */
struct fab_vm_dev {
    _Atomic uint32_t state;   /* enum fab_vmdev_state */
    uint32_t fn;              /* the function (fabric-wide index) */
    uint32_t kind;            /* enum fab_vmdev_kind: how the guest sees it */
    uint16_t guest_bdf;       /* where it sits in the guest's tree (bus 0) */
    uint16_t flags;           /* FAB_VMDEV_IOVA_GPA: ram_io is 0, I/O address = guest-physical */
    uint64_t guest_bar[FAB_BARS]; /* its BARs at guest-physical addresses, 0: none */
    uint64_t ram_io;          /* the device's I/O address of guest-physical address 0 */
    uint32_t luts;            /* LUT entries of the window that maps it on the lender's
                               * adapter (one window per lender: its devices share it) */
    uint32_t pad2;
};
struct fab_vm {
    _Atomic uint32_t state;   /* enum fab_vm_state */
    _Atomic int32_t pid;      /* the VM's process on its host */
    _Atomic uint32_t seq;     /* futex: bumps on every change of the record */
    uint32_t host;
    uint32_t gen;             /* names the RAM file; a reused slot gets a new one */
    int32_t qemu_pid;         /* 0: an emulated guest (no QEMU) */
    char name[FAB_VM_NAME];
    char guest[16];           /* "qemu", "emulated" */
    uint64_t mem;             /* guest RAM bytes, at guest-physical 0 */
    uint64_t hold;            /* the host RAM accounted to it (an allocation of its agent) */
    struct fab_vm_dev dev[FAB_VM_DEVS];
};

struct fab_host {
    char name[TOPO_NAME_MAX];
    uint32_t node_id;
    uint32_t iommu;            /* 0/1 */
    uint64_t ram_size;
    uint32_t adapter_first, nadapters;
    uint32_t func_first, nfuncs;      /* the host's PCIe functions, consecutive */
    _Atomic int32_t agent_pid;
    _Atomic uint32_t state;    /* enum fab_host_state */
    _Atomic uint32_t boot_gen; /* bumps on every start: stale users see a reboot */
    _Atomic uint32_t agent_wake;   /* futex: agent mailbox doorbells on any adapter */
    _Atomic uint32_t tree_gen;     /* futex: bumps on every hot-add and hot-remove */
    _Atomic uint64_t msi_pending[FAB_MSI_VECTORS / 64];
    _Atomic uint32_t msi_seq[FAB_MSI_VECTORS];   /* futex per vector */
    /* IOMMU: mappings (rid, iova, phys, size, perms) in slots of a flat table (iommu_nmaps:
     * the high-water mark of used slots), found through an index of the used slots sorted by
     * (rid, iova). The index is derived: iommu_idx_dirty is set while it is being changed, so
     * whoever takes the lock over from a process that died half-way rebuilds it from the
     * slots. Faults in a ring. */
    _Atomic uint32_t iommu_lock;
    uint32_t iommu_nmaps;
    uint32_t iommu_nidx, iommu_idx_dirty;
    uint16_t iommu_idx[FAB_IOMMU_MAPS];
    _Atomic uint64_t fault_count;
    _Atomic uint32_t fault_seq; /* futex */
    struct fab_shadow shadows[FAB_SHADOWS];
};

/* One cache line per slot: a device's cached translation checks the generation of each
 * mapping it went through at every access, and a queue's mapping must not share its line with
 * the slot that per-I/O mappings take and free (the driver's writes would move it to the
 * driver's CPU and back at every I/O; docs/lending.md). */
struct fab_iommu_map {
    _Alignas(64) uint32_t used;
    uint16_t rid;
    uint16_t perm; /* FAB_PERM_* */
    uint64_t iova, phys, size;
    int32_t owner_pid; /* freed when the owner dies */
    uint32_t gen; /* bumped when the slot's mapping goes: what devices cached of it is stale */
};

#define FAB_PERM_READ 1u
#define FAB_PERM_WRITE 2u
/* A streaming DMA mapping (dma_map_single): reached by device DMA only, so that inserting and
 * removing it invalidates only the devices' cached translations of it (its slot's gen), no
 * process's CPU windows. */
#define FAB_PERM_STREAM 4u

struct fab_fault {
    uint16_t rid;
    uint16_t write;
    int32_t reason; /* -EFAULT unmapped, -EACCES permission, -EIO master abort */
    uint64_t addr;
    uint64_t when_ns;
};

struct fab_lut_entry {
    _Atomic uint32_t valid;
    uint32_t peer_host;   /* host index of the target */
    uint32_t peer_adapter; /* the target's adapter the traffic enters through */
    uint64_t peer_addr;   /* bus address on the target, aligned to lut_size */
    int32_t owner_pid;    /* process that holds the entry; 0 = agent */
    uint32_t flags;       /* FAB_LUT_* */
};
#define FAB_LUT_AGENT 1u   /* reserved by the agent (mailboxes) */
/* The entry targets a multicast group (fab_mcast.c): peer_host is the group's index, peer_addr an
 * offset in the group's window, peer_adapter unused. */
#define FAB_LUT_MCAST 2u

struct fab_rid_entry {
    _Atomic uint32_t used;
    uint16_t rid;
    int32_t owner_pid;
};

/* A DMA descriptor: copies len bytes from src to dst, both bus addresses on the engine's host
 * (so either may be this adapter's window, i.e. remote memory). */
struct fab_dma_desc {
    uint64_t src, dst, len;
    uint64_t cookie;
    uint64_t submitted_ns;  /* when it was queued: the engine of the hardware starts it then */
    _Atomic uint32_t flags; /* FAB_DMA_INTR, FAB_DMA_CANCEL */
    _Atomic int32_t status; /* 1 pending, 0 done, -errno failed */
};
#define FAB_DMA_INTR 1u
#define FAB_DMA_CANCEL 2u /* set on a queued descriptor: the engine skips it (-ECANCELED) */

struct fab_dma_chan {
    _Atomic uint32_t lock;        /* producers serialise on this */
    _Atomic uint64_t head;        /* next descriptor to submit (producer) */
    _Atomic uint64_t tail;        /* next descriptor to execute (engine) */
    _Atomic uint32_t submit_seq;  /* futex: engine sleeps here */
    _Atomic uint32_t done_seq;    /* futex: completion interrupt */
    _Atomic uint32_t engine_idle; /* the engine is (about to be) asleep: submitters wake it */
    _Atomic uint32_t waiters;     /* processes asleep on done_seq: the engine wakes them */
    _Atomic int32_t owner_pid;    /* channel requested by a process, 0 = free */
    uint16_t rid;                 /* requester ID the engine uses for this channel */
    struct fab_dma_desc ring[FAB_DMA_RING];
};

struct fab_adapter {
    char name[TOPO_NAME_MAX];   /* "HOST.ADAPTER" */
    uint32_t host, index_on_host;
    uint64_t bar_addr;          /* window BAR in the host's physical map */
    uint64_t lut_size;
    uint32_t lut_entries, rid_entries, db_bits, spads, dma_channels;
    uint16_t rid;               /* the adapter's own requester ID (inbound traffic, DMA) */
    uint16_t at;                /* the in-host switch it sits below + 1; 0: a root port */
    int32_t link;               /* the cable at this adapter's port, -1 if unplugged */
    uint32_t npeers;
    uint32_t peers[TOPO_MAX_PEERS];   /* adapter indices reachable through this port, by node id */
    /* Per peer: the links a transaction crosses (precomputed: switches form trees). */
    uint8_t peer_nlinks[TOPO_MAX_PEERS];
    uint16_t peer_path[TOPO_MAX_PEERS][FAB_PATH_MAX];
    uint32_t peer_sw_ns[TOPO_MAX_PEERS]; /* sum of the switches' latencies on the path */
    _Atomic uint32_t link_enabled;    /* ntb_link_enable / disable */
    _Atomic uint32_t enable_changes;
    _Atomic uint32_t link_seq;        /* futex: any change of this adapter's peers' reachability */
    _Atomic uint32_t db;              /* doorbell bits */
    _Atomic uint32_t db_mask;
    _Atomic uint32_t db_seq;          /* futex: app doorbell vector (all but FAB_AGENT_DB_BIT) */
    /* Latency model: the link is busy carrying earlier DMA data until these times (ns), out
     * (writes) and in (read completions); DMA on every channel shares the link's rate. */
    _Atomic uint64_t wire_out_until, wire_in_until;
    _Atomic uint32_t spad[TOPO_MAX_SPADS];
    uint64_t off_lut, off_rid, off_dma; /* offsets from ctl base */
};

/* An in-host PCIe switch (topo_hswitch): the latency model's hops inside a host. */
struct fab_hswitch {
    char name[TOPO_NAME_MAX];
    uint32_t host;
    uint32_t parent;     /* + 1; 0: a root port */
    uint32_t latency_ns; /* per traversal */
    uint32_t link_ns;    /* its upstream link (an expansion chassis' cable and adapters) */
};

struct fab_switch {
    char name[TOPO_NAME_MAX];
    uint32_t ports, latency_ns;
};

struct fab_link {
    struct topo_end a, b;
    _Atomic uint32_t up;      /* administrative state: ntblend link down|up */
    _Atomic uint32_t changes; /* state changes so far: sequences compare these */
};

/* Multicast (fab_mcast.c, docs/multicast.md): groups programmed into the cluster switches, as the
 * PCIe Multicast capability of their switch chips has them (smartio-tocs-2021 §6.5): a group
 * has a window of `size` bytes; a LUT entry may target it; a write into it leaves the switch
 * on every member's port, where the member's overlay puts it at `overlay` + offset in the
 * member's address map (RAM or a device BAR). The whole cascade of switches joined to `sw`
 * carries the group. */
#define FAB_MCAST_GROUPS 64 /* the PCIe Multicast capability's MC_Max_Group is at most 64 */
#define FAB_MCAST_NAME 32
enum fab_mcast_state { FAB_MCAST_FREE = 0, FAB_MCAST_USED };
struct fab_mcast_member {
    _Atomic uint32_t joined;  /* receives the group's writes */
    uint32_t adapter;         /* the member's adapter on the group's switches */
    uint64_t overlay;         /* where offset 0 of the window lands in the member's map */
    int32_t owner_pid;        /* the process that joined it (0: kept until it leaves) */
    uint32_t iommu;           /* the join mapped the overlay in the member's IOMMU */
};
struct fab_mcast {
    _Atomic uint32_t state;   /* enum fab_mcast_state; changed under ctl_lock */
    uint32_t sw;              /* the switch it was created on */
    char name[FAB_MCAST_NAME];
    uint64_t size;            /* the window: a power of two, >= 4 KiB */
    int32_t owner_pid;        /* the creator (0: kept until removed) */
    /* Writes being replicated now, counted in the phase they started in (futexes): a leave
     * flips the phase and waits for the old one's writes, which may have seen the member;
     * later ones see it gone (resolve.c's write_mcast, fab_mcast.c's drain). */
    _Atomic uint32_t writers[2];
    _Atomic uint32_t phase;
    _Atomic uint32_t leavers;    /* leaves waiting: the last writer of a phase wakes them */
    _Atomic uint32_t leave_lock; /* one leave's phase flip and wait at a time */
    _Atomic uint32_t gen;     /* bumps on every change of the group or its members */
    struct fab_mcast_member member[TOPO_MAX_HOSTS]; /* by host index */
};

struct fab_proc {
    _Atomic int32_t pid;      /* 0 = free slot */
    uint32_t host;
    _Atomic uint32_t acked_gen;
};

struct fab_ctl {
    uint32_t magic, version;
    char name[FAB_NAME_MAX];
    char topo_path[256];
    uint64_t size;
    uint32_t nhosts, nadapters, nswitches, nlinks, nfuncs;
    uint64_t off_hosts, off_adapters, off_switches, off_links, off_iommu, off_funcs;
    struct topo_latency latency;
    _Atomic uint32_t map_gen;  /* futex: bump on any change of LUT, IOMMU or reachability */
    _Atomic uint32_t tlb_gen;  /* bumps on requester-ID table changes (cached translations) */
    _Atomic uint32_t ctl_lock; /* serialises map_gen changes (spin + futex) */
    /* Bumped before and after every change of a host's power state, a link or a port enable
     * (fab_path_bump): a reader that sees the same value before and after reading paths read
     * them unchanged. Segment sequences compare it instead of walking their path. */
    _Atomic uint32_t path_gen;
    struct fab_proc procs[FAB_MAX_PROCS];
    _Atomic uint32_t down;     /* the fabric is being torn down */
    /* CPUs the agents run the adapters' DMA engines on (bit c of word c / 64: CPU c), set
     * by `ntblend up --dma-cpus`; none set: wherever the scheduler likes. */
    uint64_t dma_cpus[FAB_CPU_WORDS];
    _Atomic uint32_t vm_gen;   /* the next VM RAM file's generation */
    struct fab_vm vms[FAB_MAX_VMS];
    uint32_t nhswitches;
    struct fab_hswitch hswitches[TOPO_MAX_HSWITCHES];
    uint64_t off_mcast;        /* the switches' FAB_MCAST_GROUPS multicast groups */
};

/* A process's attachment to a fabric. */
struct fab {
    struct fab_ctl *ctl;
    size_t ctl_size;
    char dir[128];
    int self_host;          /* host this process runs on, -1 for the CLI */
    _Atomic(char *) *ram;   /* lazily mapped RAM of each host (MAP_SHARED) */
    int *ram_fd;            /* RAM file of each host, opened on first use */
    int ones_fd;            /* a file of 0xff bytes: what a dead window maps to */
    _Atomic(char *) *bars;  /* lazily mapped BAR file of each function */
    int *bar_fd;
    uint64_t ones_size;
    int proc_slot;          /* slot in ctl->procs, -1 when not registered */
    uint64_t open_id;       /* this opening of a fabric, unique in the process (caches key on it) */
    struct fab_vm_maps *vm_maps; /* this process's mappings of guest RAM (shm.c) */
};


/* ---- the tables, by index ---- */
static inline struct fab_function *fab_func(const struct fab *f, uint32_t i)
{ return (struct fab_function *)((char *)f->ctl + f->ctl->off_funcs) + i; }
static inline struct fab_host *fab_host(const struct fab *f, uint32_t i)
{ return (struct fab_host *)((char *)f->ctl + f->ctl->off_hosts) + i; }
static inline struct fab_adapter *fab_adapter(const struct fab *f, uint32_t i)
{ return (struct fab_adapter *)((char *)f->ctl + f->ctl->off_adapters) + i; }
static inline struct fab_switch *fab_switch(const struct fab *f, uint32_t i)
{ return (struct fab_switch *)((char *)f->ctl + f->ctl->off_switches) + i; }
static inline struct fab_link *fab_link(const struct fab *f, uint32_t i)
{ return (struct fab_link *)((char *)f->ctl + f->ctl->off_links) + i; }
static inline struct fab_lut_entry *fab_lut(const struct fab *f, const struct fab_adapter *a)
{ return (struct fab_lut_entry *)((char *)f->ctl + a->off_lut); }
static inline struct fab_rid_entry *fab_rid(const struct fab *f, const struct fab_adapter *a)
{ return (struct fab_rid_entry *)((char *)f->ctl + a->off_rid); }
static inline struct fab_dma_chan *fab_dma(const struct fab *f, const struct fab_adapter *a)
{ return (struct fab_dma_chan *)((char *)f->ctl + a->off_dma); }
static inline struct fab_vm *fab_vm(const struct fab *f, uint32_t slot)
{ return &f->ctl->vms[slot]; }
static inline struct fab_mcast *fab_mcast(const struct fab *f, uint32_t group)
{ return (struct fab_mcast *)((char *)f->ctl + f->ctl->off_mcast) + group; }
/* The VM whose RAM region holds phys on host `host`, with the offset in it; NULL: none. */
static inline struct fab_vm *fab_vm_at(const struct fab *f, uint32_t host, uint64_t phys,
                                       uint64_t *off)
{
    if (phys < FAB_VM_BASE || phys - FAB_VM_BASE >= (uint64_t)FAB_MAX_VMS * FAB_VM_STRIDE)
        return NULL;
    struct fab_vm *v = fab_vm(f, (uint32_t)((phys - FAB_VM_BASE) / FAB_VM_STRIDE));
    *off = (phys - FAB_VM_BASE) % FAB_VM_STRIDE;
    uint32_t st = atomic_load_explicit(&v->state, memory_order_acquire);
    return st != FAB_VM_FREE && v->host == host && *off < v->mem ? v : NULL;
}
static inline uint64_t fab_vm_base(uint32_t slot) { return FAB_VM_BASE + slot * FAB_VM_STRIDE; }
static inline uint32_t fab_agent_bit(const struct fab_adapter *a) { return 1u << (a->db_bits - 1); }
static inline uint16_t fab_adapter_rid(uint32_t index_on_host) { return (uint16_t)(0x100u | (index_on_host << 3)); }
static inline uint16_t fab_dma_rid(uint32_t index_on_host) { return (uint16_t)(0x100u | (index_on_host << 3) | 1u); }
/* Requester IDs: the CPU uses 0 and 1; adapter i's NTB function and DMA engine are on bus 1. */
#define FAB_RID_CPU 0u
#define FAB_CMD_MEM 0x2u
#define FAB_CMD_BME 0x4u
#define FAB_CFG_MSIX 0x40u /* offset of the MSI-X capability */

#endif
