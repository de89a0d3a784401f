/*
 * The NTB adapters' registers (fab_regs.c, window.c): LUT entries and the windows built on them,
 * requester-ID tables, doorbells, MSI, and power-on state.
 */
#ifndef NTBLEND_FAB_NTB_H
#define NTBLEND_FAB_NTB_H

#include "fab_state.h"

/* Power-on state of an adapter: LUT empty, requester IDs of the CPU and the adapter's DMA
 * engine (and the host's other adapters, for forwarding) present, registers zero. */
void fab_adapter_reset(struct fab *f, uint32_t a);

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

#endif
