/*
 * libsisci core: the handle table, SCIInitialize/SCITerminate, descriptors, error codes and
 * their sentences, node ids and SCIProbeNode (SCIQuery is query.c's). Handles are table entries, not
 * pointers: a handle's value names a slot, its kind and the slot's generation, so one that
 * was freed, is of another kind or was never made is refused without touching memory.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ntblend/ntb.h"
#include "sisci_int.h"

/* ---------------------------------------------------------------- handles */

/* The table (struct sci_slot, sci_pages) is declared in sisci_int.h, where sci_get reads it
 * inline: a look-up compares a slot's tag with the handle's, with no lock (it is on the data
 * path: a trigger, a wait, a DMA transfer); making and freeing handles take the table's lock.
 * Pages of slots are never freed or moved, so a look-up may read any slot at any time. */
#define SLOT_BITS SCI_SLOT_BITS
#define PAGE_SLOTS SCI_PAGE_SLOTS
#define PAGES SCI_PAGES
struct sci_slot *_Atomic sci_pages[SCI_PAGES];
static struct {
    pthread_mutex_t lock;
    uint32_t n, free_hint; /* slots in use so far; the lowest that may be free */
} table = { .lock = PTHREAD_MUTEX_INITIALIZER };

static uintptr_t make_handle(uint32_t idx, uint32_t gen, enum sci_kind kind)
{
    return (uintptr_t)((uint64_t)gen << 32 | (uint64_t)kind << SLOT_BITS | (idx + 1));
}

static struct sci_slot *slot_at(uint32_t i)
{
    struct sci_slot *p = i / PAGE_SLOTS < PAGES ? atomic_load_explicit(&sci_pages[i / PAGE_SLOTS], memory_order_acquire) : NULL;
    return p ? &p[i % PAGE_SLOTS] : NULL;
}

void *sci_new(enum sci_kind kind, size_t size, struct sci_desc_obj *owner)
{
    struct sci_obj *o = calloc(1, size);
    if (!o)
        return NULL;
    pthread_mutex_lock(&table.lock);
    uint32_t i = table.free_hint;
    while (i < table.n && (atomic_load(&slot_at(i)->tag) & 0xff))
        i++;
    if (i == table.n) {
        if (i % PAGE_SLOTS == 0) { /* a new page */
            struct sci_slot *p = i / PAGE_SLOTS < PAGES ? calloc(PAGE_SLOTS, sizeof *p) : NULL;
            if (!p) {
                pthread_mutex_unlock(&table.lock);
                free(o);
                return NULL;
            }
            atomic_store_explicit(&sci_pages[i / PAGE_SLOTS], p, memory_order_release);
        }
        table.n++;
    }
    struct sci_slot *s = slot_at(i);
    uint32_t gen = (uint32_t)(atomic_load(&s->tag) >> 8) + 1;
    gen = gen ? gen : 1;
    o->kind = kind;
    o->handle = make_handle(i, gen, kind);
    o->owner = owner;
    atomic_store(&s->obj, o);
    atomic_store_explicit(&s->tag, (uint64_t)gen << 8 | kind, memory_order_release);
    table.free_hint = i + 1;
    pthread_mutex_unlock(&table.lock);
    if (owner)
        atomic_fetch_add(&owner->nobjs, 1);
    return o;
}

void sci_free(void *obj)
{
    struct sci_obj *o = obj;
    if (!o)
        return;
    uint32_t idx = (uint32_t)(o->handle & ((1u << SLOT_BITS) - 1)) - 1;
    struct sci_slot *s = slot_at(idx);
    pthread_mutex_lock(&table.lock);
    atomic_store(&s->tag, atomic_load(&s->tag) & ~0xffull); /* the generation stays */
    atomic_store(&s->obj, NULL);
    if (idx < table.free_hint)
        table.free_hint = idx;
    pthread_mutex_unlock(&table.lock);
    if (o->owner)
        atomic_fetch_sub(&o->owner->nobjs, 1);
    free(o);
}

/* ---------------------------------------------------------------- errors */

sci_error_t sci_err(int e)
{
    switch (e < 0 ? -e : e) {
    case 0: return SCI_ERR_OK;
    case EINVAL: return SCI_ERR_ILLEGAL_PARAMETER;
    case ENOENT: return SCI_ERR_NO_SUCH_SEGMENT;
    case ECONNREFUSED: return SCI_ERR_CONNECTION_REFUSED;
    case EHOSTUNREACH: case ENOLINK: return SCI_ERR_NO_LINK_ACCESS;
    case ENOSPC: case EUSERS: return SCI_ERR_HW_NOSPC;
    case ENOMEM: return SCI_ERR_NOSPC;
    case EEXIST: return SCI_ERR_SEGMENTID_USED;
    case EPROTO: return SCI_ERR_SEGMENT_NOT_PREPARED;
    case ENODEV: return SCI_ERR_NO_SUCH_ADAPTERNO;
    case ETIMEDOUT: return SCI_ERR_TIMEOUT;
    case EFAULT: case EIO: return SCI_ERR_TRANSFER_FAILED;
    case ECANCELED: return SCI_ERR_CANCELLED;
    case EBUSY: return SCI_ERR_BUSY;
    case EACCES: case EPERM: return SCI_ERR_ACCESS;
    case ENOTCONN: return SCI_ERR_NOT_CONNECTED;
    case EOPNOTSUPP: return SCI_ERR_NOT_SUPPORTED;
    case EHOSTDOWN: return SCI_ERR_NODE_NOT_RESPONDING;
    default: return SCI_ERR_SYSTEM;
    }
}

const char *SCIGetErrorString(sci_error_t e)
{
    switch (e) {
    case SCI_ERR_OK: return "success";
    case SCI_ERR_BUSY: return "still in use: unmap, disconnect or wait for it first, then retry";
    case SCI_ERR_FLAG_NOT_IMPLEMENTED: return "a flag ntblend does not implement (docs/sisci.md)";
    case SCI_ERR_ILLEGAL_FLAG: return "a flag this call does not take";
    case SCI_ERR_NOSPC: case SCI_ERR_API_NOSPC: return "out of memory on the host (make its RAM larger in the topology)";
    case SCI_ERR_HW_NOSPC: return "out of adapter resources (LUT entries, requester IDs or connections)";
    case SCI_ERR_NOT_IMPLEMENTED: return "not implemented by ntblend (docs/sisci.md)";
    case SCI_ERR_ILLEGAL_ADAPTERNO: case SCI_ERR_NO_SUCH_ADAPTERNO: return "this host has no adapter with that number (`ntblend status` lists them)";
    case SCI_ERR_TIMEOUT: return "timed out";
    case SCI_ERR_OUT_OF_RANGE: return "offset or size reaches past the end of the segment";
    case SCI_ERR_NO_SUCH_SEGMENT: return "no such segment on that node (yet): check the node id and segment id, or wait longer";
    case SCI_ERR_ILLEGAL_NODEID: case SCI_ERR_NO_SUCH_NODEID: return "no node with that id in the fabric (the topology's node_id values)";
    case SCI_ERR_CONNECTION_REFUSED: return "the segment exists but is not available on that adapter (SCISetSegmentAvailable)";
    case SCI_ERR_SEGMENT_NOT_CONNECTED: case SCI_ERR_NOT_CONNECTED: return "not connected: the owner removed it, or the path to it is down";
    case SCI_ERR_SIZE_ALIGNMENT: return "the size is not a multiple of the page size";
    case SCI_ERR_OFFSET_ALIGNMENT: return "the address or offset is not page-aligned";
    case SCI_ERR_ILLEGAL_PARAMETER: return "an argument is invalid: a NULL, freed or foreign handle, a NULL pointer, a zero size or a value out of range";
    case SCI_ERR_MAX_ENTRIES: return "the DMA queue holds as many transfers as it was created for: wait for it first";
    case SCI_ERR_SEGMENT_NOT_PREPARED: return "prepare the segment on that adapter first (SCIPrepareSegment)";
    case SCI_ERR_ILLEGAL_ADDRESS: return "that address cannot be used for this";
    case SCI_ERR_ILLEGAL_OPERATION: return "not allowed on this object or in its state";
    case SCI_ERR_ILLEGAL_QUERY: return "unknown SCIQuery command or subcommand";
    case SCI_ERR_SEGMENTID_USED: return "that id is taken on this node: pick another";
    case SCI_ERR_SYSTEM: return "the system refused the request";
    case SCI_ERR_CANCELLED: return "cancelled";
    case SCI_ERR_NOT_AVAILABLE: return "the segment was set unavailable by its owner";
    case SCI_ERR_INCONSISTENT_VERSIONS: return "inconsistent versions";
    case SCI_ERR_COND_INTERRUPT: return "interrupted";
    case SCI_ERR_OVERFLOW: return "the data did not fit the buffer given";
    case SCI_ERR_NOT_INITIALIZED: return "SISCI is not initialized, or this is not an ntblend host: call SCIInitialize() first, in a program started with `ntblend run --host H -- PROGRAM`";
    case SCI_ERR_ACCESS: return "not allowed: the device is not borrowed by this host, or the object is another process's";
    case SCI_ERR_NOT_SUPPORTED: return "ntblend cannot do this (docs/sisci.md lists what is not supported and why)";
    case SCI_ERR_DEPRECATED: return "deprecated";
    case SCI_ERR_DEVICE_NOT_FOUND: return "no SmartIO device with that fabric device id (`ntblend device list`)";
    case SCI_ERR_DEVICE_BUSY: return "the device is borrowed in a way that excludes this (exclusively, or by this host already)";
    case SCI_ERR_NO_LINK_ACCESS: case SCI_ERR_NO_REMOTE_LINK_ACCESS: return "no path to that node through this adapter (link down, or not a peer)";
    case SCI_ERR_NODE_NOT_RESPONDING: return "that node's host is down";
    case SCI_ERR_NO_SUCH_INTNO: return "no interrupt with that number on that node (yet)";
    case SCI_ERR_DMA_NOT_AVAILABLE: return "every DMA channel of the adapter is taken";
    case SCI_ERR_DMA_DISABLED: return "DMA is disabled";
    case SCI_ERR_NOT_BORROWED: return "the device is not borrowed through this handle";
    case SCI_ERR_TRANSFER_FAILED: return "the transfer failed (IOMMU fault, master abort, or the link went down)";
    case SCI_ERR_SEGMENT_REMOVED: return "the owner removed the segment: disconnect";
    }
    return "unknown SISCI error code";
}

/* ---------------------------------------------------------------- the library */

static _Atomic int initialized;

bool sci_initialized(void) { return atomic_load(&initialized) > 0; }

void SCIInitialize(unsigned int flags, sci_error_t *error)
{
    uint32_t node;
    if (flags) {
        sci_set(error, SCI_ERR_ILLEGAL_FLAG);
        return;
    }
    if (seg_local_node_id(&node)) { /* not on a host of a running fabric */
        sci_set(error, SCI_ERR_NOT_INITIALIZED);
        return;
    }
    atomic_fetch_add(&initialized, 1);
    sci_set(error, SCI_ERR_OK);
}

void SCITerminate(void)
{
    int v = atomic_load(&initialized);
    while (v > 0 && !atomic_compare_exchange_weak(&initialized, &v, v - 1))
        ;
}

void SCIOpen(sci_desc_t *sd, unsigned int flags, sci_error_t *error)
{
    if (!sd || (flags & ~SCI_FLAG_THREAD_SAFE)) {
        sci_set(error, !sd ? SCI_ERR_ILLEGAL_PARAMETER : SCI_ERR_ILLEGAL_FLAG);
        return;
    }
    if (!sci_initialized()) {
        sci_set(error, SCI_ERR_NOT_INITIALIZED);
        return;
    }
    struct sci_desc_obj *d = sci_new(SCI_K_DESC, sizeof *d, NULL);
    if (!d) {
        sci_set(error, SCI_ERR_NOSPC);
        return;
    }
    int rc = seg_open(&d->sd);
    if (rc) {
        sci_free(d);
        sci_set(error, sci_err(rc));
        return;
    }
    *sd = (sci_desc_t)d->o.handle;
    sci_set(error, SCI_ERR_OK);
}

void SCIClose(sci_desc_t sd, unsigned int flags, sci_error_t *error)
{
    struct sci_desc_obj *d = sci_get(sd, SCI_K_DESC);
    if (!d || flags) {
        sci_set(error, !d ? SCI_ERR_ILLEGAL_PARAMETER : SCI_ERR_ILLEGAL_FLAG);
        return;
    }
    if (atomic_load(&d->nobjs)) {
        sci_set(error, SCI_ERR_BUSY); /* remove what was made through it first */
        return;
    }
    seg_close(d->sd);
    sci_free(d);
    sci_set(error, SCI_ERR_OK);
}

int sci_adapter_count(void) { return ntb_adapter_count(); }

uint64_t sci_deadline(unsigned timeout)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    uint64_t now = (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
    return timeout == SCI_INFINITE_TIMEOUT ? UINT64_MAX : now + (uint64_t)timeout * 1000000ull;
}

int sci_remaining(uint64_t deadline)
{
    if (deadline == UINT64_MAX)
        return -1;
    uint64_t now = sci_deadline(0);
    return now >= deadline ? 0 : (int)((deadline - now + 999999) / 1000000);
}

bool sci_retry_unreachable(int rc, unsigned node, uint64_t deadline)
{
    uint32_t self;
    if (rc != -EHOSTUNREACH || seg_local_node_id(&self) || sci_remaining(deadline) == 0 ||
        (node != self && ntb_fabric_link_up(self, node, NULL) != 1))
        return false;
    struct timespec ts = { 0, 5 * 1000000 };
    nanosleep(&ts, NULL);
    return true;
}

bool sci_adapter_ok(unsigned adapter, sci_error_t *error)
{
    if (adapter <= INT32_MAX && (int)adapter < sci_adapter_count())
        return true;
    sci_set(error, SCI_ERR_NO_SUCH_ADAPTERNO);
    return false;
}

void SCIGetLocalNodeId(unsigned int adapterNo, unsigned int *nodeId, unsigned int flags,
                       sci_error_t *error)
{
    uint32_t node;
    if (!nodeId || flags) {
        sci_set(error, !nodeId ? SCI_ERR_ILLEGAL_PARAMETER : SCI_ERR_ILLEGAL_FLAG);
        return;
    }
    int n = sci_adapter_count();
    if (n < 0 || seg_local_node_id(&node)) {
        sci_set(error, SCI_ERR_NOT_INITIALIZED);
        return;
    }
    if (adapterNo >= (unsigned)n) {
        sci_set(error, SCI_ERR_NO_SUCH_ADAPTERNO);
        return;
    }
    *nodeId = node;
    sci_set(error, SCI_ERR_OK);
}

int SCIProbeNode(sci_desc_t sd, unsigned int localAdapterNo, unsigned int nodeId,
                 unsigned int flags, sci_error_t *error)
{
    uint32_t self, peers[64];
    if (!sci_get(sd, SCI_K_DESC) || flags) {
        sci_set(error, flags ? SCI_ERR_ILLEGAL_FLAG : SCI_ERR_ILLEGAL_PARAMETER);
        return 0;
    }
    int n = sci_adapter_count();
    if (localAdapterNo >= (unsigned)(n < 0 ? 0 : n)) {
        sci_set(error, SCI_ERR_NO_SUCH_ADAPTERNO);
        return 0;
    }
    seg_local_node_id(&self);
    if (nodeId == self) {
        sci_set(error, SCI_ERR_OK);
        return 1;
    }
    char name[64];
    if (ntb_node_name(nodeId, name, sizeof name) == -ENOENT) {
        sci_set(error, SCI_ERR_NO_SUCH_NODEID);
        return 0;
    }
    /* Reachable when the adapter's link to the node (switched: everyone on the switch) is
     * up: the manager's view of the direct link, as a probe across the NTB would find it. */
    int np = ntb_fabric_peers(self, peers, 64);
    for (int i = 0; i < np && i < 64; i++)
        if (peers[i] == nodeId) {
            int up = ntb_fabric_link_up(self, nodeId, NULL);
            sci_set(error, up == 1 ? SCI_ERR_OK : SCI_ERR_NO_LINK_ACCESS);
            return up == 1;
        }
    sci_set(error, SCI_ERR_NO_LINK_ACCESS);
    return 0;
}
