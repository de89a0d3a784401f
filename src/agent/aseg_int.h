/*
 * Segments, interrupts and placement, the agent's part (aseg.c, intr.c, place.c): the types
 * and the one table they share. The table holds this host's segments and interrupts, the
 * connections other hosts hold to them, and the connections this host's processes hold
 * elsewhere; its lock guards all of it.
 */
#ifndef NTBLEND_AGENT_SEG_INT_H
#define NTBLEND_AGENT_SEG_INT_H

#include <errno.h>
#include <stddef.h>

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
    uint64_t events; /* the creator's struct seg_conn_events (aseg_watch.c), 0: not watched */
    uint32_t token; /* created for a host (place.c): its request's token (struct seg_req) */
};

struct conn_in { /* another host's connection to one of our segments */
    struct conn_in *next;
    struct aseg *seg; /* stays allocated while connected (quarantine) */
    uint32_t conn_id, from_host, from_boot, via; /* via: our adapter index on host */
    uint32_t token; /* the connector's name for its request (struct seg_req), 0: none */
    uint32_t from_adapter; /* the connector's adapter (global index); its path to us */
    bool lost;             /* that path was down at the last sweep */
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
    /* MBOX_SEG_CONNECT: the connector's name for this request, unique in its life (0: none;
     * a sender may leave it out): a connection whose answer it never got is cancelled by it,
     * and a request handled twice yields one connection. */
    uint32_t token;
};
#define SEG_REQ_MIN offsetof(struct seg_req, token)
struct seg_cancel { /* MBOX_SEG_CANCEL: drop the connection made by request `token` */
    uint32_t token, boot_gen;
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

/* A request that releases something a peer holds for us (a disconnect, a cancelled connect,
 * a placed segment's removal) and that did not get through: sent again until the peer answers
 * it, or until the peer's life it was meant for is over (its state went with it). Without
 * this, a link down at the wrong moment would leave the peer holding memory for us until we
 * reboot. */
struct seg_deferred {
    struct seg_deferred *next;
    uint32_t host, boot; /* the peer and its life */
    uint32_t type, len;
    uint8_t msg[16];
};

struct seg_table {
    pthread_mutex_t lock;
    struct aseg *segs;
    struct conn_in *in;
    struct conn_out *out;
    struct aintr *intrs;
    struct seg_deferred *deferred;
    uint32_t next_conn, next_token;
    pthread_t watcher;
};

extern struct seg_table segments;

/* ---- aseg.c ---- */
struct fab_host *aseg_self(void);
int aseg_host_of_node(uint32_t node);
struct aseg *aseg_find(uint32_t id);
int aseg_adapter_facing(uint32_t remote_adapter);
uint64_t aseg_granule(void);
void aseg_reap(void);
void aseg_post_event(uint64_t event_phys, uint32_t ev);
/* ---- aseg_watch.c (lock held) ---- */
/* Tell s's creator (if it watches) of an event of connection c. */
void aseg_post_conn(const struct aseg *s, const struct conn_in *c, uint32_t ev);
/* Tell the creators of connected segments whose connector's path went down or came back. */
void aseg_watch_paths(void);
/* A new request token (struct seg_req): never 0. */
uint32_t aseg_new_token(void);
/* A mailbox call's result that is no answer of the peer's (no port, path down, no answer in
 * time): whether it acted on the request is not known. */
static inline bool aseg_unanswered(int rc)
{
    return rc == -ENOLINK || rc == -ETIMEDOUT || rc == -ENOTCONN;
}
/* Send request `type` to host `host` (in its life `boot`) from the link watcher until it gets
 * through (struct seg_deferred). Any thread; not under the lock. */
void aseg_defer(uint32_t host, uint32_t boot, uint32_t type, const void *msg, uint32_t len);

/* ---- intr.c ---- */
void aintr_retire(struct aintr *it);
void aintr_register(void);

/* ---- place.c ---- */
void aplace_client_gone(int32_t client);
void aplace_register(void);
/* devseg.c */
void adevseg_register(void);
/* MBOX_SEG_CANCEL of a placement request: remove the segment made for it. Lock held. */
int aplace_cancel(uint32_t from, uint32_t token);

#endif
