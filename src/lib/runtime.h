/*
 * The per-process runtime of libntblend: one per process, started on first use (rt_get) on the
 * backend that ntb_backend() names (src/ntb/backend.c), and stopped when its last reference
 * goes. The layers above reach the hardware and this host's agent only through the backend's
 * table, rt->ops; what the backend keeps of its own (for the emulated fabric, src/ntb/emu: the
 * attachment to the fabric of the host this process runs on, the agent connection, the
 * watcher that keeps CPU window mappings true to the hardware state) is behind rt->bk.
 */
#ifndef NTBLEND_RUNTIME_H
#define NTBLEND_RUNTIME_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent_proto.h"
#include "ntb_backend.h"

struct rt {
    const struct ntb_backend_ops *ops; /* the backend this runtime runs on */
    void *bk;                          /* the backend's own state, opaque here */
    uint32_t host;                     /* this process's host (set by ops->start) */
    uint32_t boot_gen;                 /* that host's life it started in */
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

/* A peer host's memory mapped into this process: the window (the backend's window_map) and
 * the CPU mapping of it. ptr points at peer_addr. */
struct rt_window {
    struct ntb_window w;
    void *map;           /* start of the CPU mapping, for the backend's window_cpu_unmap */
    volatile void *ptr;  /* peer_addr */
};
/* Map [peer_addr, peer_addr + len) of peer_host through `adapter` for this process (entries
 * owned by its pid); everything is undone on failure. 0 or -errno. */
int rt_window_open(struct rt *rt, uint32_t adapter, uint32_t peer_host, uint64_t peer_addr,
                   uint64_t len, bool readonly, struct rt_window *out);
void rt_window_close(struct rt *rt, struct rt_window *w);

#endif
