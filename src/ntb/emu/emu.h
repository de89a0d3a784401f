/*
 * Internals of the emulated fabric's backend (src/ntb/emu): its state behind the runtime's
 * opaque handle (rt->bk), and what its files share — emu.c (the table of operations, hosts,
 * paths, windows, devices), emu_ntb.c (the NTB device operations), emu_rt.c (attaching to the
 * fabric and the agent, the watcher) and emu_map.c (CPU mappings of window entries). The only
 * part of libntblend that knows the fabric's shared state.
 */
#ifndef NTBLEND_BACKEND_EMU_H
#define NTBLEND_BACKEND_EMU_H

#include <pthread.h>
#include <stdatomic.h>

#include "fabric.h"
#include "runtime.h"

/* One process's attachment to the emulated fabric (rt->bk). */
struct emu {
    struct fab *f;
    int agent_fd;                /* this host's agent */
    pthread_mutex_t agent_lock;  /* one request at a time on agent_fd */
    pthread_mutex_t map_lock;    /* maps */
    struct emu_map *maps;        /* CPU mappings of window entries (emu_map.c) */
    pthread_t watcher;           /* remaps them when the fabric's routes change */
    _Atomic int stop;
};

/* The fabric of the runtime rt (which runs on this backend). */
static inline struct fab *emu_fab(const struct rt *rt) { return ((struct emu *)rt->bk)->f; }

/* emu_rt.c: the table's start, stop and agent_call. */
int emu_start(struct rt *rt);
void emu_stop(struct rt *rt);
int emu_agent_call(struct rt *rt, const struct agent_req *req, struct agent_rsp *rsp);

/* emu_map.c: map LUT entries [first, first+count) of adapter `adapter` into this process
 * (read-only: stores fault, as through a read-only mapping of a BAR), and undo it; remap
 * every mapping whose entries now reach something else (the watcher), true when an entry is
 * dead (reads all ones) so that stores into it must be scrubbed. */
void *emu_map_window(struct rt *rt, uint32_t adapter, uint32_t first, uint32_t count, bool readonly);
int emu_unmap_window(struct rt *rt, void *base);
void emu_unmap_all(struct rt *rt);
bool emu_remap_all(struct rt *rt);
/* The mapping at base falls back, entry by entry, on entries [first, first+count) of another
 * adapter (the same range over another path) while its own do not resolve. */
int emu_map_failover(struct rt *rt, void *base, uint32_t adapter, uint32_t first, uint32_t count);

int emu_adapter_info(struct rt *rt, uint32_t adapter, struct ntb_adapter_info *o);
int emu_mw_set(struct rt *rt, uint32_t adapter, uint32_t widx, uint32_t peer_host, uint64_t addr);
int emu_mw_clear(struct rt *rt, uint32_t adapter, uint32_t widx);
int emu_mw_alloc(struct rt *rt, uint32_t adapter);
void *emu_mw_cpu_map(struct rt *rt, uint32_t adapter, uint32_t first, uint32_t count);
void emu_link_set(struct rt *rt, uint32_t adapter, bool on);
_Atomic uint32_t *emu_link_word(struct rt *rt, uint32_t adapter);
uint64_t emu_db_read(struct rt *rt, uint32_t a);
void emu_db_set(struct rt *rt, uint32_t a, uint64_t bits);
void emu_db_clear(struct rt *rt, uint32_t a, uint64_t bits);
uint64_t emu_db_mask_read(struct rt *rt, uint32_t a);
void emu_db_mask_set(struct rt *rt, uint32_t a, uint64_t bits);
void emu_db_mask_clear(struct rt *rt, uint32_t a, uint64_t bits);
int emu_peer_db_set(struct rt *rt, uint32_t a, uint32_t peer, uint64_t bits);
_Atomic uint32_t *emu_db_word(struct rt *rt, uint32_t a);
uint32_t emu_spad_read(struct rt *rt, uint32_t a, uint32_t i);
void emu_spad_write(struct rt *rt, uint32_t a, uint32_t i, uint32_t v);
void *emu_dma_chan_get(struct rt *rt, uint32_t adapter);
void emu_dma_chan_put(struct rt *rt, void *chan);
int64_t emu_dma_submit(struct rt *rt, void *chan, uint64_t dst, uint64_t src, uint64_t len,
                       bool interrupt);
int emu_dma_abort(struct rt *rt, void *chan);
int emu_dma_wait(struct rt *rt, void *chan, int64_t cookie, int timeout_ms);
int emu_dma_buf_map(struct rt *rt, uint32_t adapter, uint64_t phys, uint64_t len, bool on);
int emu_iommu_on(struct rt *rt, uint32_t host);
int emu_iommu_map(struct rt *rt, uint16_t rid, uint64_t iova, uint64_t phys, uint64_t len,
                  unsigned perm);
int emu_iommu_unmap(struct rt *rt, uint16_t rid, uint64_t iova, uint64_t len);
int emu_iommu_faults(struct rt *rt, uint32_t host, struct ntb_fault *out, int max, uint64_t *total);
/* emu_mcast.c: the multicast groups of the switches. */
int emu_mcast(struct rt *rt, const struct ntb_mcast_op *op);
int emu_mcast_info(struct rt *rt, uint32_t group, struct ntb_mcast_info *out);
int emu_mcast_find(struct rt *rt, const char *name);

#endif
