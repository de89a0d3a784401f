/*
 * The emulated PCIe NTB fabric: the hardware state every host agent, application and the CLI
 * share. It lives in /dev/shm/ntblend.<fabric>/: "ctl" holds registers and tables (struct
 * fab_ctl and the arrays it points to by offset), "host<N>.ram" is host N's RAM (sparse).
 *
 * Register-like fields are atomics that any attached process reads and writes directly, as a
 * driver would through MMIO. Changes that alter what a CPU mapping resolves to (LUT entries,
 * IOMMU mappings, link state) bump ctl->map_gen; every attached process has a watcher thread
 * that re-resolves its window mappings and acknowledges, and the change returns only after
 * all live processes acknowledged, so "after link down returns, no store crosses" holds.
 */
#ifndef NTBLEND_FABRIC_H
#define NTBLEND_FABRIC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "topo.h"

#define FAB_MAGIC 0x4e54424cu /* "NTBL" */
#define FAB_VERSION 1
#define FAB_NAME_MAX 64
#define FAB_MAX_PROCS 512
#define FAB_IOMMU_MAPS 4096   /* per host */
#define FAB_FAULT_RING 64     /* per host */
#define FAB_DMA_RING 256      /* descriptors per DMA channel */
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

/* Agent mailboxes: the first FAB_MBOX_SIZE bytes of every host's RAM are reserved. */
#define FAB_ONES_SIZE (1ull << 20) /* the all-ones file that reads through dead windows map */
#define FAB_MBOX_SLOT 4096u
#define FAB_MBOX_SLOTS TOPO_MAX_HOSTS
#define FAB_MBOX_SIZE ((uint64_t)FAB_MBOX_SLOT * FAB_MBOX_SLOTS)
/* Agents reserve the top doorbell bit of every adapter (db_bits - 1) for their mailboxes. */
#define FAB_CPU_RIDS 2u      /* requester-ID entries each CPU reserves per adapter (smartio §8) */

enum fab_host_state { FAB_HOST_DOWN = 0, FAB_HOST_BOOTING = 1, FAB_HOST_UP = 2 };

enum fab_region { FAB_REGION_NONE, FAB_REGION_RAM, FAB_REGION_MSI, FAB_REGION_WINDOW,
                  FAB_REGION_DEVICE };

/* ---- PCIe functions (devices declared in the topology; see devices.c) ---- */
#define FAB_MAX_FUNCS 512
#define FAB_BARS 6 /* BAR register slots; ntblend's BARs are 64-bit, so 0, 2 and 4 are used */
enum fab_bar_kind { FAB_BAR_NONE = 0, FAB_BAR_MEM, FAB_BAR_REGS };

struct fab_bar {
    uint32_t kind;   /* enum fab_bar_kind: plain memory, or registers a model serves */
    uint32_t pad;
    uint64_t size;   /* power of two >= 4 KiB */
    uint64_t addr;   /* assigned at enumeration, in the host's physical map */
    uint64_t off;    /* where it lives in the function's BAR file */
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
    uint16_t pad;
    struct fab_bar bar[FAB_BARS];
    uint64_t file_size;        /* of fn<N>.bars */
    uint8_t cfg[4096];         /* configuration space */
    _Atomic uint32_t cfg_lock;
    uint32_t bar_sizing;       /* BAR slots written all-ones: reads return the size mask */
    _Atomic uint32_t reg_seq;  /* futex: a register write (doorbell) wakes the model */
    _Atomic uint32_t model_up; /* the model is serving this function */
    _Atomic uint32_t reset_gen; /* bumps on a function-level reset: models drop all state */
    /* SmartIO lending state, written only by the lender's agent. */
    _Atomic uint32_t lend_available;
    _Atomic uint32_t lend_exclusive;      /* the borrower holds it alone */
    _Atomic uint64_t lend_borrowers[4];   /* bit per host index */
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
    _Atomic uint64_t msi_pending[FAB_MSI_VECTORS / 64];
    _Atomic uint32_t msi_seq[FAB_MSI_VECTORS];   /* futex per vector */
    /* IOMMU: mappings (rid, iova, phys, size, perms) in a flat table; faults in a ring. */
    _Atomic uint32_t iommu_lock;
    uint32_t iommu_nmaps;
    _Atomic uint64_t fault_count;
    _Atomic uint32_t fault_seq; /* futex */
};

struct fab_iommu_map {
    uint32_t used;
    uint16_t rid;
    uint16_t perm; /* FAB_PERM_* */
    uint64_t iova, phys, size;
    int32_t owner_pid; /* freed when the owner dies */
};

#define FAB_PERM_READ 1u
#define FAB_PERM_WRITE 2u

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

struct fab_switch {
    char name[TOPO_NAME_MAX];
    uint32_t ports, latency_ns;
};

struct fab_link {
    struct topo_end a, b;
    _Atomic uint32_t up;      /* administrative state: ntblend link down|up */
    _Atomic uint32_t changes; /* state changes so far: sequences compare these */
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
    struct fab_proc procs[FAB_MAX_PROCS];
    _Atomic uint32_t down;     /* the fabric is being torn down */
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
};

/* ---- lifecycle ---- */

/* Directory of a fabric: /dev/shm/ntblend.NAME (NTBLEND_SHM_DIR overrides /dev/shm). */
int fab_dir(const char *name, char *out, size_t len);
/* Fabric name from --fabric, else $NTBLEND_FABRIC, else "default" (fab_dir validates it). */
const char *fab_name_resolve(const char *arg);

/* Create a fabric from a validated topology. -EEXIST when it already exists. */
int fab_create(const char *name, const struct topo *t, struct fab **out);
/* Attach to a running fabric as a process on host `host` (-1 for an administrator). */
int fab_attach(const char *name, int host, struct fab **out);
void fab_detach(struct fab *f);
/* Remove the fabric's shared memory (after the agents are gone). */
int fab_destroy_files(const char *name);

/* ---- lookups ---- */
static inline struct fab_function *fab_func(const struct fab *f, uint32_t i)
{ return (struct fab_function *)((char *)f->ctl + f->ctl->off_funcs) + i; }
int fab_func_by_name(const struct fab *f, const char *name);
/* A function's BAR file (for mmap), opened on first use; -errno. */
int fab_bar_fd(struct fab *f, uint32_t fn);
/* Pointer into a function's BAR file at `off` (mapping it on first use); NULL + errno. */
void *fab_bar_mem(struct fab *f, uint32_t fn, uint64_t off, uint64_t len);
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
struct fab_iommu_map *fab_iommu_table(const struct fab *f, uint32_t host);
struct fab_fault *fab_fault_ring(const struct fab *f, uint32_t host);

int fab_host_by_name(const struct fab *f, const char *name); /* name or node id; -1 if none */
int fab_adapter_by_name(const struct fab *f, const char *name); /* "HOST.ADAPTER"; -1 if none */
/* Per-process lazily opened / mapped fabric files (RAM, BARs). */
int fab_lazy_fd(struct fab *f, int *slot, const char *name);
void *fab_lazy_map(_Atomic(char *) *slot, int fd, uint64_t size, uint64_t off, uint64_t len);
/* The RAM file of a host (for mmap), opened on first use; -errno. */
int fab_ram_fd(struct fab *f, uint32_t host);
static inline uint32_t fab_agent_bit(const struct fab_adapter *a) { return 1u << (a->db_bits - 1); }
/* Requester IDs: the CPU uses 0 and 1; adapter i's NTB function and DMA engine are on bus 1. */
#define FAB_RID_CPU 0u
static inline uint16_t fab_adapter_rid(uint32_t index_on_host) { return (uint16_t)(0x100u | (index_on_host << 3)); }
static inline uint16_t fab_dma_rid(uint32_t index_on_host) { return (uint16_t)(0x100u | (index_on_host << 3) | 1u); }
/* Shared-memory locks: hold the owner's pid, so a lock of a dead process can be taken over. */
/* Is pid a live process (not gone, not a zombie)? */
bool fab_pid_alive(int32_t pid);
void fab_lock(_Atomic uint32_t *l);
void fab_unlock(_Atomic uint32_t *l);
int fab_switch_by_name(const struct fab *f, const char *name);

/* ---- reachability ---- */
/* At creation: every adapter's link, peers (ordered by node id) and the path to each. */
int route_build(struct fab *f);
/* Power-on state of an adapter: LUT empty, requester IDs of the CPU and the adapter's DMA
 * engine (and the host's other adapters, for forwarding) present, registers zero. */
void fab_adapter_reset(struct fab *f, uint32_t a);
/* Is the path from adapter a to its peer adapter b usable right now (both hosts up, both
 * ports enabled, every link on the path up)? Hops = switches crossed (0 back to back). */
bool fab_path_up(const struct fab *f, uint32_t a, uint32_t b, uint32_t *hops);
/* Changes whenever anything on the path from a to b failed or recovered (links, ports, host
 * reboots): two equal signatures mean nothing happened in between. */
uint64_t fab_path_signature(const struct fab *f, uint32_t a, uint32_t b);
/* Index of adapter b in a's peer list, or -1. */
int fab_peer_index(const struct fab *f, uint32_t a, uint32_t b);
/* Set a link's administrative state; bumps generations, wakes link waiters, waits for acks. */
int fab_link_set(struct fab *f, uint32_t link, bool up);
/* ntb_link_enable/disable: a port's own switch for all its paths. */
void fab_port_enable(struct fab *f, uint32_t a, bool on);
/* Find the link joining two named ends (hosts, adapters or switches); -1 if none/ambiguous. */
int fab_link_between(const struct fab *f, const char *a, const char *b, char *why, size_t len);
/* Host power: mark down (links of its adapters drop) or up (RAM cleared, links restored). */
int fab_host_set_state(struct fab *f, uint32_t host, enum fab_host_state st); /* power.c */
/* Bump the reachability generation and wake everyone who watches it (link_seq futexes). */
void fab_reachability_changed(struct fab *f);

/* ---- memory and address resolution ---- */
/* Pointer to host h's RAM at phys (mapping it on first use); NULL + errno. */
void *fab_ram(struct fab *f, uint32_t host, uint64_t phys, uint64_t len);

/* Result of resolving a bus/physical address range. */
struct fab_target {
    enum fab_region region;
    uint32_t host;       /* host whose RAM (or MSI region) is the final target */
    uint64_t addr;       /* physical address there */
    uint64_t len;        /* how much of the request this extent covers */
    uint32_t hops;       /* NTB crossings + switches, for the latency model */
    uint32_t ntbs;       /* NTB crossings */
    uint32_t path_ns;    /* one-way latency of the path (latency model; 0 when off) */
    uint32_t egress;     /* 1 + the adapter of the first NTB crossing (0: none) */
    uint32_t fn;         /* FAB_REGION_DEVICE: the function; addr is then the offset in its
                          * BAR file */
    int err;             /* 0, or why it failed: -ENOLINK link down, -EFAULT IOMMU fault,
                          * -EIO master abort / unmapped LUT entry, -EACCES requester not in table */
};

/*
 * Resolve [addr, addr+len) as seen by requester `rid` on host `host` (rid 0 = CPU: no IOMMU).
 * Follows windows through LUT entries to peer hosts (IOMMU of the inbound adapter's domain on
 * each target), recursively for chained windows. Returns the first extent in *t (t->len may
 * be shorter than len: call again for the rest). `write` selects permission and RID checks
 * (reads through an NTB need the requester in the egress adapter's requester-ID table).
 * Returns 0 with t->err set on a fabric error, or -EINVAL for nonsense arguments.
 */
int fab_resolve(struct fab *f, uint32_t host, uint16_t rid, uint64_t addr, uint64_t len,
                bool write, struct fab_target *t);

/* What a CPU mapping would reach, without side effects: no faults are recorded (nothing was
 * accessed yet; the access itself reads all ones or is dropped). */
int fab_resolve_probe(struct fab *f, uint32_t host, uint16_t rid, uint64_t addr, uint64_t len,
                      bool write, struct fab_target *t);

/*
 * Device-style DMA on host `host` by requester `rid`: copy len bytes between a local buffer
 * and bus address `addr`, through the IOMMU, address map and NTB windows. Nothing is written
 * unless the whole range resolves. Faults are recorded in the host's fault ring. Reads of
 * unreachable ranges fill all ones. MSI-region writes raise vectors. Returns 0 or -errno.
 */
int fab_dev_write(struct fab *f, uint32_t host, uint16_t rid, uint64_t addr, const void *src,
                  uint64_t len);
int fab_dev_read(struct fab *f, uint32_t host, uint16_t rid, uint64_t addr, void *dst,
                 uint64_t len);
/* Bus-to-bus copy as a DMA engine does it (both addresses on `host`). */
int fab_dev_copy(struct fab *f, uint32_t host, uint16_t rid, uint64_t dst, uint64_t src,
                 uint64_t len);
/* The same for a descriptor queued at `queued_ns` on a DMA engine: with the latency model, its
 * data goes on the wire as soon as the link is free after that time, however late the
 * emulating thread gets to it (the hardware engine would have started it then). */
int fab_dev_copy_queued(struct fab *f, uint32_t host, uint16_t rid, uint64_t dst, uint64_t src,
                        uint64_t len, uint64_t queued_ns);

/* ---- PCIe functions (devices.c) ---- */
/* The functions a topology's devices have, with their BARs and config space; fills the
 * function table of a fabric being created (and returns the count), or with out == NULL just
 * counts. -EINVAL with a message for a device the models cannot build. */
int fab_devices_layout(const struct topo *t, struct fab_function *out, size_t max, FILE *err);
/* A device's topology parameters ("key=value;..." in struct fab_function.params): the value
 * of key copied into buf, or NULL; and a size/number with k/M/G suffixes (default def when
 * absent; -EINVAL when malformed). */
const char *fab_param(const char *params, const char *key, char *buf, size_t len);
int fab_param_size(const char *params, const char *key, uint64_t def, uint64_t *out);
/* Configuration space access as a host's root complex performs it: BAR sizing, writable
 * command/MSI-X bits, read-only everything else. */
uint32_t fab_cfg_read(struct fab *f, uint32_t fn, uint32_t off, uint32_t len);
int fab_cfg_write(struct fab *f, uint32_t fn, uint32_t off, uint32_t len, uint32_t val);
#define FAB_CMD_MEM 0x2u
#define FAB_CMD_BME 0x4u
#define FAB_CFG_MSIX 0x40u /* offset of the MSI-X capability */
/* DMA by function fn as its own requester: -EIO when Bus Master Enable is clear. */
int fab_fn_dma_read(struct fab *f, uint32_t fn, uint64_t addr, void *dst, uint64_t len);
int fab_fn_dma_write(struct fab *f, uint32_t fn, uint64_t addr, const void *src, uint64_t len);
/* Raise MSI-X vector v of fn: a DMA write of the table entry's data to its address (which may
 * be another host's MSI region, through an NTB). Masked: the pending bit is set instead.
 * -EINVAL no such vector, -ENODEV MSI-X disabled. */
int fab_fn_msix(struct fab *f, uint32_t fn, uint32_t vector);
/* Function-level reset: bus mastering and MSI-X off, register BARs cleared, reset_gen bumped
 * so the model drops its state (what a lender does when it reclaims a device). */
void fab_fn_reset(struct fab *f, uint32_t fn);
/* Tell a function's model that a register changed (what a write to a register BAR does). */
void fab_fn_notify(struct fab *f, uint32_t fn);
/* Power-on state of a host's functions: config space as enumerated, BAR contents zero. */
void fab_funcs_reset(struct fab *f, uint32_t host);

/* ---- IOMMU (iommu.c) ---- */
/* While set (this thread), translation faults are not recorded: resolution that only asks. */
void fab_iommu_set_probing(bool on);
bool fab_iommu_probing(void);
int fab_iommu_map(struct fab *f, uint32_t host, uint16_t rid, uint64_t iova, uint64_t phys,
                  uint64_t size, uint32_t perm, int32_t owner);
int fab_iommu_unmap(struct fab *f, uint32_t host, uint16_t rid, uint64_t iova, uint64_t size);
/* Translate (iommu on) or pass through (off). -EFAULT/-EACCES record a fault. */
int fab_iommu_translate(struct fab *f, uint32_t host, uint16_t rid, uint64_t iova,
                        uint64_t len, bool write, uint64_t *phys, uint64_t *contig);
void fab_fault_record(struct fab *f, uint32_t host, uint16_t rid, uint64_t addr, bool write,
                      int reason);
/* Drop everything a dead process held: IOMMU maps, LUT and RID entries, DMA channels. */
void fab_reap_owner(struct fab *f, int32_t pid);

/* ---- LUT and requester IDs ---- */
/* Program entry idx of adapter a -> (peer host, peer_addr). -EINVAL alignment, -EBUSY owned by
 * someone else, -ENOTCONN peer not reachable from this port. Waits for mapping acks. */
int fab_lut_set(struct fab *f, uint32_t a, uint32_t idx, uint32_t peer_host,
                uint64_t peer_addr, int32_t owner, uint32_t flags);
int fab_lut_clear(struct fab *f, uint32_t a, uint32_t idx, int32_t owner);
/* First free entry, claimed for owner. -ENOSPC when the table is full. */
int fab_lut_alloc(struct fab *f, uint32_t a, int32_t owner, uint32_t flags);
/* `count` consecutive free entries (one window mapping), claimed; first index or -ENOSPC.
 * With FAB_LUT_AGENT in flags the range is taken from the top of the table. */
int fab_lut_alloc_range(struct fab *f, uint32_t a, uint32_t count, int32_t owner,
                        uint32_t flags);
/* fab_lut_set / fab_lut_clear without waiting for the mapping acknowledgements: for callers
 * that change several entries and then call fab_map_changed once. clear returns 1 when the
 * entry was valid. */
int fab_lut_set_noack(struct fab *f, uint32_t a, uint32_t idx, uint32_t peer_host,
                      uint64_t peer_addr, int32_t owner, uint32_t flags);
int fab_lut_clear_noack(struct fab *f, uint32_t a, uint32_t idx, int32_t owner);

/* ---- windows (window.c): what every layer maps remote memory with ---- */
/* The adapter of a host's that reaches host `target` directly (its first such port), and the
 * target's adapter at the other end in *peer_ai; -EHOSTUNREACH when no port does. */
int fab_adapter_toward(const struct fab *f, uint32_t host, uint32_t target, uint32_t *peer_ai);
/* The adapter on host `host` that adapter a's port reaches, or -1. */
int fab_peer_on(const struct fab *f, uint32_t a, uint32_t host);
/* A range of a peer host's bus addresses mapped through consecutive LUT entries. */
struct fab_window {
    uint32_t adapter;    /* fabric-wide adapter index */
    uint32_t first;      /* first LUT entry */
    uint32_t count;      /* entries */
    uint64_t offset;     /* of peer_addr within the first entry */
    uint64_t bus;        /* where peer_addr appears in this host's physical map */
    uint32_t peer_host;
    uint64_t peer_addr, len;
};
/* Map [peer_addr, peer_addr + len) of peer_host through adapter a: claims consecutive entries
 * for owner (FAB_LUT_AGENT in flags: from the top of the table, as the agents do), programs
 * them and waits once for every process's acknowledgement. On failure nothing stays claimed.
 * -ENOTCONN the port does not reach peer_host, -ENOSPC no such run of free entries. */
int fab_window_map(struct fab *f, uint32_t a, uint32_t peer_host, uint64_t peer_addr,
                   uint64_t len, int32_t owner, uint32_t flags, struct fab_window *w);
void fab_window_unmap(struct fab *f, const struct fab_window *w, int32_t owner);
int fab_rid_add(struct fab *f, uint32_t a, uint16_t rid, int32_t owner);  /* -ENOSPC full */
int fab_rid_remove(struct fab *f, uint32_t a, uint16_t rid);
bool fab_rid_present(const struct fab *f, uint32_t a, uint16_t rid);
uint32_t fab_lut_used(const struct fab *f, uint32_t a);
uint32_t fab_rid_used(const struct fab *f, uint32_t a);

/* ---- doorbells, scratchpads, interrupts ---- */
/* Ring bits on adapter `to` (what peer_db_set does from a peer). Dropped if the path is down. */
int fab_db_ring(struct fab *f, uint32_t from, uint32_t to, uint32_t bits);
/* Set bits in adapter a's own doorbell register and raise its events (ntb_db_set). */
void fab_db_raise(struct fab *f, uint32_t a, uint32_t bits);
void fab_db_unmask(struct fab *f, uint32_t a, uint32_t bits);
void fab_msi_raise(struct fab *f, uint32_t host, uint32_t vector);

/* ---- map generation: every mapping holder acknowledges changes ---- */
int fab_proc_register(struct fab *f, uint32_t host);   /* slot, or -ENOSPC */
void fab_proc_unregister(struct fab *f);
/* Bump map_gen and wake watchers; then wait (bounded) until every live process acked. */
void fab_map_changed(struct fab *f);

/* ---- latency model ---- */
/* Delay for a DMA of len bytes over a path whose one-way latency is one_way_ns (what
 * fab_resolve computes in path_ns: root complex, NTBs, adapter switch chips and the cluster
 * switches' own latency_ns), 0 when the model is off. */
uint64_t fab_lat_dma_ns(const struct fab *f, uint64_t one_way_ns, uint64_t len, bool read);
/* Delay for ringing a doorbell from adapter a on its peer b. */
uint64_t fab_lat_doorbell_ns(const struct fab *f, uint32_t a, uint32_t b);
void fab_lat_delay(uint64_t ns);

/* ---- futex helpers (waits return 0, -ETIMEDOUT, -EINTR) ---- */
int fab_futex_wait(_Atomic uint32_t *addr, uint32_t expected, int64_t timeout_ns);
void fab_futex_wake(_Atomic uint32_t *addr, int n);
uint64_t fab_now_ns(void);

#endif
