/*
 * The NTB backend seam: everything the runtime, the segment layer and SmartIO need from the
 * hardware underneath, as one table of operations. The emulated fabric (backend_emu.c) is the
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

struct rt;

#define NTB_BK_BARS 6        /* BAR slots of a device function */
#define NTB_BK_NAME_MAX 32

/* A range of a peer host's address space made reachable through an adapter. */
struct ntb_window {
    uint32_t adapter;       /* ours */
    uint32_t peer_host;
    uint64_t peer_addr, len;
    uint64_t bus;           /* where peer_addr appears in this host's physical address space */
    uint32_t first, count;  /* translation entries held; count 0: no window */
    uint64_t offset;        /* of peer_addr within the first entry */
};

/* window_map flags */
#define NTB_WIN_DMA 1u /* also reachable by this host's DMA engines (through its IOMMU) */

/* What SmartIO needs to know about a device function. */
struct ntb_func_info {
    uint32_t host;          /* the host it sits in (its lender) */
    char name[NTB_BK_NAME_MAX], type[NTB_BK_NAME_MAX], host_name[NTB_BK_NAME_MAX];
    uint16_t vendor, device;
    uint32_t class_code;    /* config bytes 0x0b:0x0a:0x09 */
    uint32_t vf;            /* 0: a physical function, else its VF number */
    bool available, exclusive;
    uint32_t borrowers;
    uint32_t msix_cap;      /* config-space offset of its MSI-X capability */
    struct {
        uint64_t size;      /* 0: no BAR in this slot */
        uint64_t addr;      /* in the lender's physical address space */
    } bar[NTB_BK_BARS];
};

struct ntb_backend_ops {
    const char *name;

    /* ---- lifetime and control ----
     * start: attach this process to its host: set rt->host and rt->boot_gen, and whatever
     * private state the backend keeps (rt->f, rt->bk). -ENOENT no such fabric or host,
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

    /* ---- adapters, paths, link state ----
     * adapter: this host's adapter number `index` (0-based) as an adapter id, -ENODEV if
     * there is none. adapter_toward: the adapter of `host` that reaches host `target`
     * (directly or through switches), its peer adapter in *peer; -EHOSTUNREACH if none.
     * peer_on: the adapter on `host` that `adapter`'s link reaches, -ENOTCONN if none.
     * path_up: the link(s) between adapter and peer are up. path_signature: a value that
     * changes whenever the path goes down and up again (segment sequences compare it). */
    int (*adapter)(struct rt *rt, int index);
    int (*adapter_toward)(struct rt *rt, uint32_t host, uint32_t target, uint32_t *peer);
    int (*peer_on)(struct rt *rt, uint32_t adapter, uint32_t host);
    bool (*path_up)(struct rt *rt, uint32_t adapter, uint32_t peer);
    uint64_t (*path_signature)(struct rt *rt, uint32_t adapter, uint32_t peer);

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
     * nothing: the write itself is the notification). */
    int (*func_info)(struct rt *rt, uint32_t fn, struct ntb_func_info *out);
    int (*func_by_name)(struct rt *rt, const char *name);
    uint32_t (*cfg_read)(struct rt *rt, uint32_t fn, uint32_t off, uint32_t len);
    int (*cfg_write)(struct rt *rt, uint32_t fn, uint32_t off, uint32_t len, uint32_t val);
    volatile void *(*bar_mem)(struct rt *rt, uint32_t fn, int bar);
    void (*fn_notify)(struct rt *rt, uint32_t fn);

    /* ---- time and waiting (no rt: usable before start) ----
     * now_ns: a monotonic clock. wait: sleep while *w == seen, at most timeout_ns (<0:
     * forever); 0, or -ETIMEDOUT; spurious wake-ups allowed. wake: wake up to n waiters.
     * Words may be in memory other processes share. */
    uint64_t (*now_ns)(void);
    int (*wait)(_Atomic uint32_t *w, uint32_t seen, int64_t timeout_ns);
    void (*wake)(_Atomic uint32_t *w, int n);
};

/* The emulated PCIe NTB fabric (src/fabric), the default. */
extern const struct ntb_backend_ops ntb_backend_emu;

/* Use `ops` for runtimes started from now on (NULL: back to the emulated fabric). Call it
 * while no runtime is running. */
void ntb_backend_use(const struct ntb_backend_ops *ops);
const struct ntb_backend_ops *ntb_backend(void);

#endif
