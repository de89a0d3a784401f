/*
 * Reachability (fab_route.c, power.c): which adapters an NTB port reaches and over which cables,
 * whether a path works right now, which adapter of a host reaches another host, and the
 * administrative changes that alter it (link up/down, port enable, host power).
 */
#ifndef NTBLEND_FAB_ROUTE_H
#define NTBLEND_FAB_ROUTE_H

#include "fab_state.h"

/* ---- reachability ---- */
/* At creation: every adapter's link, peers (ordered by node id) and the path to each. */
int route_build(struct fab *f);

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
/* Bump path_gen: call before and after changing what fab_path_up or fab_path_signature read. */
static inline void fab_path_bump(struct fab *f) { atomic_fetch_add(&f->ctl->path_gen, 1); }


/* The paths from one host to another: each adapter of `host` that reaches `target` directly
 * (back to back or over its switch tree) and the target's adapter at the other end, in the
 * order of host's adapters (path 0 is the primary). Fills up to max; returns how many there
 * are. Two adapters on two switches give two independent paths (smartio-tocs-2021 §6.3). */
#define FAB_HPATH_MAX 8
struct fab_hpath {
    uint32_t adapter, peer;
};
int fab_host_paths(const struct fab *f, uint32_t host, uint32_t target, struct fab_hpath *out,
                   int max);
/* The adapter of a host's that reaches host `target` directly — the first of its paths that is
 * up, else the first — and the target's adapter at the other end in *peer_ai; -EHOSTUNREACH
 * when no port does. */
int fab_adapter_toward(const struct fab *f, uint32_t host, uint32_t target, uint32_t *peer_ai);
/* The adapter on host `host` that adapter a's port reaches, or -1. */
int fab_peer_on(const struct fab *f, uint32_t a, uint32_t host);

#endif
