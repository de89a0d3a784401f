/*
 * Device lending in the agent (smartio-tocs-2021 §4), what its files share: the requests
 * agents send each other about devices, the records each side keeps, and the locks over them.
 * lend.c is the lender's side (borrows, mappings it prepares for a device, the reset when a
 * device is taken back), lend_inbound.c a target's IOMMU for traffic from borrowed devices,
 * lend_borrow.c the borrower's side (its processes' holds and mappings, relayed to lenders),
 * lend_aperture.c the borrower's DMA apertures, lend_lease.c the leases (what goes when a
 * host dies or reboots) and the start of it all. agent.h declares what the rest of the agent
 * calls (alend_*).
 */
#ifndef NTBLEND_AGENT_LEND_INT_H
#define NTBLEND_AGENT_LEND_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "agent.h"
#include "agent_proto.h"
#include "ntblend/smartio.h"

struct lend_req {
    uint32_t fn, mode, target, pages; /* MBOX_DEV_MAP: mode 1 = a DMA aperture (sio_stream_map) */
    uint64_t addr;
    uint32_t id, boot;
    uint32_t pid;            /* MBOX_DEV_SHARE: the sharing process (mode 0: it stops managing) */
    uint32_t via;            /* MBOX_DEV_MAP: lender adapter + 1 to map through (0: any) */
    uint64_t iova;           /* MBOX_DEV_MAP mode LEND_MAP_AT: the device-side address chosen */
};
#define LEND_MAP_APERTURE 1u /* MBOX_DEV_MAP modes */
#define LEND_MAP_AT 2u

struct lend_rsp {
    uint64_t ioaddr;
    uint32_t id;
    int32_t via; /* lender adapter (global index) the device's traffic leaves by, -1 local */
};

struct inbound_req { /* MBOX_INBOUND_MAP / UNMAP: let `rid` reach [addr, addr+size) */
    uint64_t addr, size;
    uint32_t rid;
};

/* Lender side. */
struct lend {
    struct lend *next;
    uint32_t fn, host, boot; /* who borrows it */
};

struct lmap {
    struct lmap *next;
    uint32_t id, fn, host;   /* mapping id, device, borrower */
    struct fab_window win;   /* win.count 0 when the target is on the lender */
    uint64_t ioaddr, size;
    bool iommu;
    bool rid_held;           /* relies on fn's requester-ID entry on win.adapter (shared) */
    bool aperture;           /* a borrower's DMA aperture: the window is shared by every
                              * device it borrows from us, and goes with the last of them */
    bool at;                 /* at an I/O address the borrower chose (a VM's RAM at IOVA =
                              * GPA): the window is shared by every device of ours that maps
                              * the same range for that borrower, and goes with the last */
};

/* Borrower side: a DMA aperture (smartio §4.3 "DMA Window"): a window of the lender's adapter
 * facing us onto an I/O virtual range of our IOMMU domain for traffic from that lender (the
 * requester ID of our adapter facing it), prepared once and shared by every device we borrow
 * from it. Processes map buffers into that domain themselves (sio_stream_map): no request to
 * anyone per mapping. Each process drives its own slice of the range. */
#define APERTURE_IOVA (1ull << 46)   /* above every RAM, MSI region and BAR of a host */
#define APERTURE_STRIDE (1ull << 36) /* one range per lender: apart by the largest window */
#define APERTURE_BYTES (32ull << 20)
#define APERTURE_SLICES 4

struct aperture {
    struct aperture *next;
    uint32_t lender;
    uint64_t iova, size, io;   /* the range, and where the lender's devices reach its start */
    int32_t slice[APERTURE_SLICES]; /* the process driving each slice, 0: free */
};

struct ahold {                 /* a device of a process's that reaches the aperture */
    struct ahold *next;
    int32_t client;
    uint32_t fn, id;           /* the lender's mapping for it (its requester ID let through) */
};

/* Borrower side: what our processes hold. */
struct hold {
    struct hold *next;
    int32_t client;          /* 0: held for the host (ntblend borrow) */
    uint32_t fn;
    uint32_t mode;           /* SIO_EXCLUSIVE, SIO_SHARED or AGENT_BORROW_BIND */
    bool manager;            /* shared it after setting it up: the device's manager */
};

/* Target side: IOMMU mappings a peer asked for (MBOX_INBOUND_MAP), so a borrowed device's
 * traffic arriving through one of our adapters reaches our memory. Kept per asking host, and
 * counted, so a repeated request does not stack and a host that dies loses them. */
struct inbound {
    struct inbound *next;
    uint32_t host, boot, count; /* who asked, its boot generation then, how many times */
    uint32_t rid;
    uint64_t addr, size;
};

struct bmap {
    struct bmap *next;
    int32_t client;
    uint32_t fn, id, lender;
    uint32_t target, rid;    /* inbound IOMMU mapping made on the target, rid 0 if none */
    uint64_t addr, size;
};

struct lend_state {
    pthread_mutex_t lock;
    pthread_mutex_t borrow_lock; /* one borrow or return of this host's at a time */
    struct lend *lends;
    struct lmap *lmaps;
    struct hold *holds;
    struct bmap *bmaps;
    struct inbound *inbounds;
    struct aperture *apertures;
    struct ahold *aholds;
    uint32_t next_id;
    pthread_t watcher;
};

/* The records above, under lending.lock; borrow_lock orders a borrow or return as a whole. */
extern struct lend_state lending;

/* A PCIe function of the fabric by index. */
static inline struct fab_function *lend_func(uint32_t fn) { return fab_func(agent.f, fn); }

/* Is fn one of this host's own functions (are we its lender)? */
static inline bool lend_is_lender(uint32_t fn)
{
    return fn < agent.f->ctl->nfuncs && lend_func(fn)->host == agent.host;
}

/* lend.c: remove host's borrow of fn and its mappings (lock held); the dispatcher of requests
 * a lender serves, from the mailboxes and from this host's own processes; its handlers. */
void lend_drop(uint32_t fn, uint32_t host);
int lend_call(uint32_t type, uint32_t from, const struct lend_req *r, struct lend_rsp *out);
void lend_register_lender(void);

/* lend_inbound.c: drop one record of an inbound mapping, and the mapping with the last (lock
 * held); its handlers. */
void lend_inbound_put(struct inbound **pp);
/* Map (or unmap) q for requests of host `from` (this host's own borrows: agent.host), counted:
 * the mapping goes with the last who asked for it. Lock not held. 0 or -errno. */
int lend_inbound(uint32_t from, const struct inbound_req *q, bool map);
void lend_register_inbound(void);

/* lend_borrow.c: send a lending request to fn's lender (or serve it here when we are the
 * lender); a hold of client on fn (any client's with any_client), lock held. */
int lend_to_lender(uint32_t type, const struct lend_req *r, struct lend_rsp *out);
struct hold *lend_find_hold(int32_t client, uint32_t fn, bool any_client);

/* lend_aperture.c: client's device fn no longer reaches its lender's aperture (borrow_lock
 * held). */
void lend_aperture_put(int32_t client, uint32_t fn);

/* lend_lease.c: is a host that had boot generation `boot` when it asked us for something
 * gone since? */
bool lend_host_gone(const struct fab *f, uint32_t host, uint32_t boot);

#endif
