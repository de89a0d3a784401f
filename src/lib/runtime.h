/*
 * The per-process runtime of libntblend: the attachment to the fabric of the host this process
 * runs on ($NTBLEND_FABRIC, $NTBLEND_HOST), the control connection to that host's agent, and
 * the watcher thread that keeps CPU window mappings true to the hardware state (re-resolving
 * them whenever a LUT entry, IOMMU mapping or link changes, and acknowledging the change).
 * A process on a host that crashes (ntblend host kill) dies with it.
 * All of that is the emulated fabric's backend (ntb_backend_emu): the runtime starts whichever
 * backend ntb_backend_use() chose, and the layers above reach hardware only through rt->ops.
 */
#ifndef NTBLEND_RUNTIME_H
#define NTBLEND_RUNTIME_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent_proto.h"
#include "ntb_backend.h"

struct fab;
struct rt_map;

struct rt {
    const struct ntb_backend_ops *ops; /* the backend this runtime runs on */
    void *bk;                          /* a backend's own state */
    struct fab *f;                     /* the emulated fabric's attachment (NULL otherwise) */
    uint32_t host;
    uint32_t boot_gen;
    int agent_fd;
    pthread_mutex_t agent_lock;
    pthread_mutex_t map_lock;
    struct rt_map *maps;
    pthread_t watcher;
    _Atomic int stop;
    int refs;
};

/* Take a reference on the runtime, starting it on first use. NULL + errno (ENOENT: no such
 * fabric or host; ECONNREFUSED: the agent is not running; EHOSTDOWN: the host is down). */
struct rt *rt_get(void);
void rt_put(struct rt *rt);
/* One request to this host's agent, through the backend: 0 or -errno. rt_call for the
 * requests that need only a and b; rsp may be NULL. */
int rt_request(struct rt *rt, const struct agent_req *req, struct agent_rsp *rsp);
int rt_call(struct rt *rt, uint32_t op, uint64_t a, uint64_t b, struct agent_rsp *rsp);

/* The emulated fabric's start and stop (ntb_backend_emu): attach the fabric and the agent and
 * run the watcher; detach. */
int rt_fabric_start(struct rt *rt);
void rt_fabric_stop(struct rt *rt);
int rt_fabric_agent_call(struct rt *rt, const struct agent_req *req, struct agent_rsp *rsp);

/* Map LUT entries [first, first+count) of adapter `adapter` into this process (read-only:
 * stores fault, as through a read-only mapping of a BAR). */
void *rt_map_window(struct rt *rt, uint32_t adapter, uint32_t first, uint32_t count, bool readonly);
int rt_unmap_window(struct rt *rt, void *base);

/* A peer host's memory mapped into this process: the window (the backend's window_map) and
 * the CPU mapping of it. ptr points at peer_addr. */
struct rt_window {
    struct ntb_window w;
    void *map;           /* start of the mapping (the first entry), for rt_unmap_window */
    volatile void *ptr;  /* peer_addr */
};
/* Map [peer_addr, peer_addr + len) of peer_host through `adapter` for this process (entries
 * owned by its pid); everything is undone on failure. 0 or -errno. */
int rt_window_open(struct rt *rt, uint32_t adapter, uint32_t peer_host, uint64_t peer_addr,
                   uint64_t len, bool readonly, struct rt_window *out);
void rt_window_close(struct rt *rt, struct rt_window *w);

#endif
