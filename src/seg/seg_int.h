/*
 * Internals of the segment library: the objects behind the opaque handles of ntblend/seg.h.
 */
#ifndef NTBLEND_SEG_INT_H
#define NTBLEND_SEG_INT_H

#include <pthread.h>

#include "ntblend/ntb.h"
#include "ntblend/seg.h"
#include "runtime.h"
#include "seg_shared.h"

#define SEG_MAX_ADAPTERS 32

struct seg_desc {
    struct rt *rt;
    pthread_mutex_t lock;
    struct ntb_dev *ntb[SEG_MAX_ADAPTERS]; /* opened on first use */
};

struct seg_local {
    seg_desc_t *sd;
    uint32_t id;
    uint64_t phys, size;
    _Atomic uint32_t nmaps; /* remove refuses while mapped: the memory could be reused */
    void *registered;       /* seg_create_registered: the caller's address it replaced */
    uint64_t events_phys;   /* seg_local_watch: its agent posts connections there (0: none) */
    struct seg_conn_events *events;
    uint32_t events_seen;
};

struct seg_remote {
    seg_desc_t *sd;
    uint32_t node, id, owner, conn_id;
    bool local;            /* the owner is this host: no window, direct RAM */
    uint64_t bus, size;    /* the segment's bus address at the owner */
    uint32_t ai, peer_ai;  /* global adapter indices of the path (remote only) */
    struct ntb_window win; /* our window onto the segment; win.count 0 when none */
    uint64_t event_phys;
    struct seg_event_word *ev;
    uint32_t ev_seen;
    _Atomic uint32_t nmaps; /* disconnect refuses while mapped: the LUT entries could be reused */
    /* A device's BAR (sio_connect_bar), not a segment the owner's agent keeps: no event
     * word (ev NULL), and a CPU mapping of a register BAR stores without notifying. */
    bool dev;
    bool dev_regs;
    uint32_t dev_fn;
    int dev_bar;
    /* A process's own device memory (sio_connect_devmem SIO_DEVMEM_PRIVATE), which goes with
     * the connection: placed at host placed_host by its agent (placed_id), or created here. */
    uint32_t placed_host, placed_id;
    seg_local_t *placed_local;
};

struct seg_map {
    seg_remote_t *remote; /* NULL for a local segment */
    seg_local_t *local;
    void *window;         /* the window mapping to release, NULL if direct RAM */
    void *ptr;
    size_t size;
    bool raw;             /* counted in the device's raw_maps (ntb_backend fn_raw) */
};

struct seg_seq {
    seg_map_t *map;
    uint64_t sig;
    uint32_t owner_boot;
    /* The backend's path word (NULL if it has none), and SEQ_SEEN | its value read before the
     * path was last found up and as at the start (0: not found so yet). While the word stays
     * the same, a check reads only it. */
    _Atomic uint32_t *word;
    _Atomic uint64_t seen;
};

/* Open (once) and return this descriptor's handle on adapter `index` of this host. */
struct ntb_dev *seg_ntb(seg_desc_t *sd, int index, int *err);
/* A connection to [bus, bus+size) of host `owner`'s physical map (a device's BAR) through
 * local adapter `adapter`, with no segment behind it: the owner's agent is not involved. */
int seg_connect_phys(seg_desc_t *sd, uint32_t owner, uint64_t bus, uint64_t size, int adapter,
                     seg_remote_t **out);
/* Bus address, on this host, of byte `off` of a connected segment (what a DMA engine uses). */
uint64_t seg_remote_bus(const seg_remote_t *r, size_t off);
/* Wait until *w is no longer `seen` (an event, an interrupt), by the wait policy of `site`
 * (src/wait: a short spin, then a sleep on the word), or until the deadline (UINT64_MAX:
 * none); 0 or -ETIMEDOUT. A NULL site sleeps once (a wake-up without a change of the word
 * returns too), for a caller that looks at more than the word between sleeps. */
struct wpol_site;
int seg_futex_wait_ms(struct wpol_site *site, _Atomic uint32_t *w, uint32_t seen, uint64_t deadline_ns);
uint64_t seg_deadline(int timeout_ms);
/* seg.c's wait sites (wpol.h) that segdma.c shares. */
extern struct wpol_site seg_intr_site, seg_appear_site;
extern const struct wpol_how seg_appear_naps;

#endif
