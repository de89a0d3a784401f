/*
 * Internals of libsisci: the handle table that turns SISCI handles into objects (so that a
 * NULL, freed or foreign handle is refused, never used), the objects behind the handles, and
 * the translation of ntblend's errno results into SISCI error codes.
 */
#ifndef NTBLEND_SISCI_INT_H
#define NTBLEND_SISCI_INT_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "ntblend/seg.h"
#include "ntblend/smartio.h"
#include "sisci_api.h"

enum sci_kind {
    SCI_K_DESC = 1, SCI_K_LSEG, SCI_K_RSEG, SCI_K_MAP, SCI_K_SEQ, SCI_K_DMAQ,
    SCI_K_LINTR, SCI_K_RINTR, SCI_K_LDINTR, SCI_K_RDINTR, SCI_K_DEV, SCI_K_KINDS
};

/* Every object starts with this: its kind, its handle, and the descriptor it counts in. */
struct sci_obj {
    enum sci_kind kind;
    uintptr_t handle;
    struct sci_desc_obj *owner; /* NULL for a descriptor */
};

struct sci_desc_obj {
    struct sci_obj o;
    seg_desc_t *sd;
    _Atomic uint32_t nobjs; /* objects made through it: SCIClose refuses while any remain */
};

/* A mapping of a segment for a device (SCIMap*SegmentForDevice), until unmapped. */
struct sci_devmap {
    struct sci_devmap *next;
    uintptr_t device;  /* the device handle it was made with */
    unsigned adapter;  /* local segments: the adapter it was made on */
    sio_dma_t *dma;
};

struct sci_lseg_obj {
    struct sci_obj o;
    seg_local_t *seg;      /* NULL while empty (SCI_FLAG_EMPTY) */
    unsigned id;           /* the SISCI id */
    size_t size;
    uint64_t prepared;     /* bit per adapter */
    void *registered;      /* SCIRegisterSegmentMemory: the caller's memory */
    _Atomic uint32_t nmaps;
    pthread_mutex_t lock;  /* devmaps */
    struct sci_devmap *devmaps;
    /* SCI_FLAG_USE_CALLBACK: a thread that reports connections (from when it has memory) */
    sci_cb_local_segment_t cb;
    void *cb_arg;
    pthread_t cb_thread;
    _Atomic bool cb_stop;
    bool cb_running;
};

struct sci_rseg_obj {
    struct sci_obj o;
    seg_remote_t *seg;
    unsigned id, node;
    struct sci_dev_obj *dev; /* device memory: the device handle it came through */
    _Atomic uint32_t nmaps;
    pthread_mutex_t lock;
    struct sci_devmap *devmaps;
    /* SCI_FLAG_USE_CALLBACK: a thread that reports the connection's events */
    sci_cb_remote_segment_t cb;
    void *cb_arg;
    pthread_t cb_thread;
    _Atomic bool cb_stop;
    bool cb_running;
};

struct sci_map_obj {
    struct sci_obj o;
    seg_map_t *map;
    void *ptr;
    size_t size;
    struct sci_lseg_obj *lseg; /* one of the two */
    struct sci_rseg_obj *rseg;
    _Atomic uint32_t nseqs;
};

struct sci_seq_obj {
    struct sci_obj o;
    seg_seq_t *seq;
    struct sci_map_obj *map;
};

struct sci_dmaq_obj {
    struct sci_obj o;
    seg_dma_queue_t *q;
    unsigned max_entries;
    unsigned queued;              /* transfers since the queue was last idle */
    sci_cb_dma_t cb;
    void *cb_arg;
    _Atomic int state;            /* sci_dma_queue_state_t */
    _Atomic int cb_pending;       /* a completion callback is yet to run */
};

/* Interrupts, plain and with data, share one object: data says which. */
struct sci_lintr_obj {
    struct sci_obj o;
    seg_intr_t *intr;
    unsigned number;              /* the SISCI number */
    bool data;
    sci_cb_interrupt_t cb;
    sci_cb_data_interrupt_t dcb;
    void *cb_arg;
    pthread_t cb_thread;
    bool cb_running;
    _Atomic bool cb_stop;
    seg_rintr_t *self;            /* a connection to itself, to wake the callback thread */
};

struct sci_rintr_obj {
    struct sci_obj o;
    seg_rintr_t *r;
    bool data;
};

/* A device this process borrows: one native borrow however many handles share it. */
struct sci_borrow {
    struct sci_borrow *next;
    unsigned long long fdid;
    sio_dev_t *dev;
    unsigned refs;
};

struct sci_dev_obj {
    struct sci_obj o;
    struct sci_borrow *b;
    _Atomic uint32_t nuses; /* device memory connections and mappings made through it */
};

/* ---- core.c */
/* A new object of `kind` (size bytes, zeroed) counted in owner (NULL for a descriptor);
 * NULL when out of memory or handles. */
void *sci_new(enum sci_kind kind, size_t size, struct sci_desc_obj *owner);
/* The handle table: a handle is the generation << 32 | kind << SCI_SLOT_BITS | slot + 1; a
 * slot's tag is its generation << 8 | the kind it holds (0: nothing). Pages of slots are
 * never freed or moved. */
#define SCI_SLOT_BITS 24u
#define SCI_PAGE_SLOTS 1024u
#define SCI_PAGES 4096u /* 4 Mi handles at once */
struct sci_slot {
    _Atomic uint64_t tag;
    void *_Atomic obj;
};
extern struct sci_slot *_Atomic sci_pages[SCI_PAGES] __attribute__((visibility("hidden")));
/* The object of a live handle of that kind, or NULL. Inline and lock-free: every call on the
 * data path starts with it. */
static inline void *sci_get(const void *handle, enum sci_kind kind)
{
    uint64_t h = (uint64_t)(uintptr_t)handle;
    uint32_t idx = (uint32_t)(h & ((1u << SCI_SLOT_BITS) - 1)) - 1, gen = (uint32_t)(h >> 32);
    if (idx >= SCI_PAGES * SCI_PAGE_SLOTS || ((h >> SCI_SLOT_BITS) & 0xffu) != (uint64_t)kind)
        return NULL; /* also slot 0 (idx wraps) */
    struct sci_slot *p = atomic_load_explicit(&sci_pages[idx / SCI_PAGE_SLOTS], memory_order_acquire);
    if (!p || atomic_load_explicit(&p[idx % SCI_PAGE_SLOTS].tag, memory_order_acquire) !=
                  ((uint64_t)gen << 8 | kind))
        return NULL;
    return atomic_load_explicit(&p[idx % SCI_PAGE_SLOTS].obj, memory_order_relaxed);
}
/* Forget the handle (later uses are refused) and free the object. */
void sci_free(void *obj);
bool sci_initialized(void);
sci_error_t sci_err(int negerrno);
/* Set *error if the caller gave one (most calls must have it; some accessors do not). */
static inline void sci_set(sci_error_t *error, sci_error_t e)
{
    if (error)
        *error = e;
}
/* SISCI ids and interrupt numbers <-> ntblend's: the same, but that ntblend reads id 0 as
 * "pick one", so SISCI's 0 is ntblend's SCI_ID_ZERO. */
#define SCI_ID_ZERO 0x80000000u
static inline uint32_t sci_id_to_native(unsigned id) { return id ? id : SCI_ID_ZERO; }
static inline unsigned sci_id_from_native(uint32_t id) { return id == SCI_ID_ZERO ? 0 : id; }
/* Milliseconds as ntblend takes them: SCI_INFINITE_TIMEOUT is forever (-1). */
static inline int sci_timeout(unsigned ms) { return ms == SCI_INFINITE_TIMEOUT || ms > INT32_MAX ? -1 : (int)ms; }
int sci_adapter_count(void);
/* Connections wait up to a SISCI timeout: its deadline, and the milliseconds left of it as
 * ntblend takes them (-1 forever). */
uint64_t sci_deadline(unsigned timeout);
int sci_remaining(uint64_t deadline);
/* After a connection attempt failed with rc: whether to try again, having waited a little.
 * -EHOSTUNREACH while the fabric manager sees the link to node up is a peer's agent slow to
 * answer (a busy host), not a path that is gone. */
bool sci_retry_unreachable(int rc, unsigned node, uint64_t deadline);
/* Whether this host has adapter `adapter`; if not, SCI_ERR_NO_SUCH_ADAPTERNO in *error. */
bool sci_adapter_ok(unsigned adapter, sci_error_t *error);

/* ---- segment.c */
/* A new remote segment object counted in d (SCI_ERR_NOSPC in *error when none). */
struct sci_rseg_obj *sci_rseg_new(struct sci_desc_obj *d, sci_error_t *error);

/* ---- smartio.c */
/* Fabric device ids (fdid) as SISCI programs see them: the lender's node id in bits 16 and
 * up, ntblend's device id + 1 below (never 0: programs take 0 for "none"). nvme0 (device 0)
 * lent by node 4 is 0x40001. sci_fdid_device: ntblend's device id, or -1 if no such device. */
unsigned long long sci_fdid(uint32_t device, uint32_t node);
int sci_fdid_device(unsigned long long fdid);
/* Drop a device mapping list (the segment goes). */
void sci_devmaps_drop(struct sci_devmap **list, pthread_mutex_t *lock);

#endif
