/*
 * Segments, interrupts and placement, the agent's part (seg.c, intr.c, place.c): the types
 * and the one table they share. The table holds this host's segments and interrupts, the
 * connections other hosts hold to them, and the connections this host's processes hold
 * elsewhere; its lock guards all of it.
 */
#ifndef NTBLEND_AGENT_SEG_INT_H
#define NTBLEND_AGENT_SEG_INT_H

#include "agent.h"

#define SEG_OWNER (-1) /* allocation owner tag: held by a segment or an interrupt */
#define NOTIFY_TIMEOUT_MS 200

struct aseg {
    struct aseg *next;
    uint32_t id;
    uint64_t phys, size;  /* the memory: size rounded up to whole LUT entries */
    uint64_t user_size;   /* the size the creator asked for: what connections see */
    int32_t creator;
    uint64_t prepared, available; /* bit per adapter index on this host */
    uint64_t iommu_mapped;        /* adapters whose inbound domain maps it */
    bool removed;
    uint32_t nconn;
};

struct conn_in { /* another host's connection to one of our segments */
    struct conn_in *next;
    struct aseg *seg; /* stays allocated while connected (quarantine) */
    uint32_t conn_id, from_host, from_boot, via; /* via: our adapter index on host */
};

struct conn_out { /* one of our processes' connections to another host's segment */
    struct conn_out *next;
    uint32_t owner_host, conn_id;
    int32_t client;
    uint64_t event_phys;
    uint32_t adapter, peer_adapter; /* global adapter indices of the path */
    uint32_t owner_boot;            /* the owner's life the segment belongs to */
    bool lost, gone;                /* gone: the owner rebooted, the segment with it */
};

struct aintr {
    struct aintr *next;
    uint32_t id;
    uint64_t phys;
    int32_t creator; /* 0 once removed: the page waits in the free list */
};

/* Connections to our segments one host may hold (each costs us memory; a host's windows run
 * out long before: 256 LUT entries an adapter). */
#define SEG_CONN_PER_HOST 4096u

struct seg_req { /* MBOX_SEG_CONNECT, MBOX_INTR_CONNECT */
    uint32_t id, from_adapter, boot_gen;
};
struct seg_rsp {
    uint64_t bus, size;
    uint32_t conn_id;
};
struct seg_note { /* MBOX_SEG_DISCONNECT, MBOX_SEG_NOTIFY */
    uint32_t conn_id, event;
};

/* Segments created here for another host carry this creator tag instead of a pid. */
#define FOR_HOST(h) (-100 - (int32_t)(h))

struct seg_table {
    pthread_mutex_t lock;
    struct aseg *segs;
    struct conn_in *in;
    struct conn_out *out;
    struct aintr *intrs;
    uint32_t next_conn;
    pthread_t watcher;
};

extern struct seg_table segments;

/* ---- seg.c ---- */
struct fab_host *seg_self(void);
int seg_host_of_node(uint32_t node);
struct aseg *seg_find(uint32_t id);
int seg_adapter_facing(uint32_t remote_adapter);
uint64_t seg_granule(void);
void seg_reap(void);
void seg_post_event(uint64_t event_phys, uint32_t ev);

/* ---- intr.c ---- */
void aintr_retire(struct aintr *it);
void aintr_register(void);

/* ---- place.c ---- */
void aplace_client_gone(int32_t client);
void aplace_register(void);

#endif
