/*
 * libsisci segments: local segments (created, empty then attached or registered, prepared,
 * made available), connections to segments of any node with their events and callbacks, and
 * maps of both into the process. Each is the ntblend segment of include/ntblend/seg.h: a map
 * of a remote segment is the NTB window itself, so loads and stores go straight through.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ntblend/ntb.h"
#include "sisci_int.h"

#define LSEG_FLAGS (SCI_FLAG_EMPTY | SCI_FLAG_PRIVATE | SCI_FLAG_AUTO_ID | SCI_FLAG_USE_CALLBACK)

static struct sci_desc_obj *desc(sci_desc_t sd) { return sci_get(sd, SCI_K_DESC); }

/* ---------------------------------------------------------------- local segments */

/* What a connection event of a local segment is to SISCI. */
static sci_segment_cb_reason_t local_reason(int ev, sci_error_t *status)
{
    *status = SCI_ERR_OK;
    switch (ev) {
    case SEG_EVENT_CONNECT: return SCI_CB_CONNECT;
    case SEG_EVENT_DISCONNECT: return SCI_CB_DISCONNECT;
    case SEG_EVENT_LOST: *status = SCI_ERR_NO_LINK_ACCESS; return SCI_CB_NOT_OPERATIONAL;
    case SEG_EVENT_RESTORED: return SCI_CB_OPERATIONAL;
    }
    return 0;
}

/* The callback thread of a local segment: reports each connection event until told to stop
 * or the callback says cancel. It looks at the stop flag at least every 100 ms. */
static void *lseg_events(void *arg)
{
    struct sci_lseg_obj *s = arg;
    while (!atomic_load(&s->cb_stop)) {
        struct seg_conn_event ev;
        int e = seg_local_wait_event(s->seg, &ev, 100);
        if (e <= 0 || atomic_load(&s->cb_stop))
            continue;
        sci_error_t status;
        sci_segment_cb_reason_t why = local_reason(e, &status);
        if (why && s->cb(s->cb_arg, (sci_local_segment_t)s->o.handle, why, ev.node_id, ev.adapter,
                         status) == SCI_CALLBACK_CANCEL)
            break;
    }
    return NULL;
}

/* The segment has memory now (created, attached or registered): from here on its
 * connections are recorded (before it can be made available, so none is missed), and its
 * callback, if it has one, starts reporting them. */
static int got_memory(struct sci_lseg_obj *s, seg_local_t *seg)
{
    int rc = seg_local_watch(seg);
    if (!rc) {
        s->seg = seg;
        if (s->cb) {
            rc = -pthread_create(&s->cb_thread, NULL, lseg_events, s);
            s->cb_running = !rc;
        }
    }
    if (rc) {
        s->seg = NULL;
        seg_remove(seg);
    }
    return rc;
}

static void stop_events(struct sci_lseg_obj *s)
{
    if (!s->cb_running)
        return;
    atomic_store(&s->cb_stop, true);
    if (!pthread_equal(pthread_self(), s->cb_thread))
        pthread_join(s->cb_thread, NULL);
    else
        pthread_detach(s->cb_thread); /* removed from its own callback */
    s->cb_running = false;
}

void SCICreateSegment(sci_desc_t sd, sci_local_segment_t *segment, unsigned int segmentId,
                      size_t size, sci_cb_local_segment_t callback, void *callbackArg,
                      unsigned int flags, sci_error_t *error)
{
    struct sci_desc_obj *d = desc(sd);
    if (!d || !segment || !size) {
        sci_set(error, SCI_ERR_ILLEGAL_PARAMETER);
        return;
    }
    if (flags & ~LSEG_FLAGS) {
        sci_set(error, SCI_ERR_ILLEGAL_FLAG);
        return;
    }
    if ((flags & SCI_FLAG_USE_CALLBACK) && !callback) {
        sci_set(error, SCI_ERR_ILLEGAL_PARAMETER);
        return;
    }
    struct sci_lseg_obj *s = sci_new(SCI_K_LSEG, sizeof *s, d);
    if (!s) {
        sci_set(error, SCI_ERR_NOSPC);
        return;
    }
    pthread_mutex_init(&s->lock, NULL);
    s->size = size;
    s->id = segmentId;
    if (flags & SCI_FLAG_USE_CALLBACK) {
        s->cb = callback;
        s->cb_arg = callbackArg;
    }
    int rc = 0;
    if (!(flags & SCI_FLAG_EMPTY)) {
        uint32_t want = flags & (SCI_FLAG_AUTO_ID | SCI_FLAG_PRIVATE) ? SEG_ID_AUTO
                                                                      : sci_id_to_native(segmentId);
        seg_local_t *seg;
        rc = seg_create(d->sd, &seg, want, size);
        if (!rc)
            rc = got_memory(s, seg);
        if (!rc)
            s->id = sci_id_from_native(seg_local_id(s->seg));
    }
    if (rc) {
        sci_free(s);
        /* The size is checked: what the host refuses is more memory than it has. */
        sci_set(error, rc == -EINVAL || rc == -ENOMEM ? SCI_ERR_NOSPC : sci_err(rc));
        return;
    }
    *segment = (sci_local_segment_t)s->o.handle;
    sci_set(error, SCI_ERR_OK);
}

void SCIRemoveSegment(sci_local_segment_t segment, unsigned int flags, sci_error_t *error)
{
    struct sci_lseg_obj *s = sci_get(segment, SCI_K_LSEG);
    if (!s || (flags & ~SCI_FLAG_FORCE_DISCONNECT)) {
        sci_set(error, !s ? SCI_ERR_ILLEGAL_PARAMETER : SCI_ERR_ILLEGAL_FLAG);
        return;
    }
    if (atomic_load(&s->nmaps)) {
        sci_set(error, SCI_ERR_BUSY); /* SCIUnmapSegment first */
        return;
    }
    stop_events(s);
    sci_devmaps_drop(&s->devmaps, &s->lock);
    int rc = s->seg ? seg_remove(s->seg) : 0; /* registered memory: the caller's again */
    if (rc) {
        sci_set(error, sci_err(rc));
        return;
    }
    pthread_mutex_destroy(&s->lock);
    sci_free(s);
    sci_set(error, SCI_ERR_OK);
}

static struct sci_lseg_obj *adapter_call(sci_local_segment_t segment, unsigned adapter,
                                         unsigned flags, sci_error_t *error)
{
    struct sci_lseg_obj *s = sci_get(segment, SCI_K_LSEG);
    if (!s) {
        sci_set(error, SCI_ERR_ILLEGAL_PARAMETER);
        return NULL;
    }
    if (flags) {
        sci_set(error, SCI_ERR_ILLEGAL_FLAG);
        return NULL;
    }
    if (adapter >= 64 || (int)adapter >= sci_adapter_count()) {
        sci_set(error, SCI_ERR_NO_SUCH_ADAPTERNO);
        return NULL;
    }
    if (!s->seg) {
        sci_set(error, SCI_ERR_ILLEGAL_OPERATION); /* empty: attach memory first */
        return NULL;
    }
    return s;
}

void SCIPrepareSegment(sci_local_segment_t segment, unsigned int localAdapterNo,
                       unsigned int flags, sci_error_t *error)
{
    struct sci_lseg_obj *s = adapter_call(segment, localAdapterNo, flags, error);
    if (!s)
        return;
    int rc = seg_prepare(s->seg, (int)localAdapterNo);
    if (!rc)
        s->prepared |= 1ull << localAdapterNo;
    sci_set(error, sci_err(rc));
}

static void set_available(sci_local_segment_t segment, unsigned adapter, unsigned flags,
                          sci_error_t *error, bool on)
{
    struct sci_lseg_obj *s = adapter_call(segment, adapter, flags, error);
    if (!s)
        return;
    if (!(s->prepared & (1ull << adapter))) {
        sci_set(error, SCI_ERR_SEGMENT_NOT_PREPARED);
        return;
    }
    int rc = on ? seg_set_available(s->seg, (int)adapter) : seg_set_unavailable(s->seg, (int)adapter);
    sci_set(error, sci_err(rc));
}

void SCISetSegmentAvailable(sci_local_segment_t segment, unsigned int localAdapterNo,
                            unsigned int flags, sci_error_t *error)
{
    set_available(segment, localAdapterNo, flags, error, true);
}

void SCISetSegmentUnavailable(sci_local_segment_t segment, unsigned int localAdapterNo,
                              unsigned int flags, sci_error_t *error)
{
    set_available(segment, localAdapterNo, flags, error, false);
}

size_t SCIGetLocalSegmentSize(sci_local_segment_t segment)
{
    struct sci_lseg_obj *s = sci_get(segment, SCI_K_LSEG);
    return s ? s->size : 0;
}

unsigned int SCIGetLocalSegmentId(sci_local_segment_t segment)
{
    struct sci_lseg_obj *s = sci_get(segment, SCI_K_LSEG);
    return s ? s->id : 0;
}

sci_segment_cb_reason_t SCIWaitForLocalSegmentEvent(sci_local_segment_t segment,
                                                    unsigned int *sourcenodeId,
                                                    unsigned int *localAdapterNo,
                                                    unsigned int timeout, unsigned int flags,
                                                    sci_error_t *error)
{
    struct sci_lseg_obj *s = sci_get(segment, SCI_K_LSEG);
    if (!s || !sourcenodeId || !localAdapterNo || flags || !s->seg || s->cb_running) {
        sci_set(error, !s || !sourcenodeId || !localAdapterNo ? SCI_ERR_ILLEGAL_PARAMETER
                       : flags ? SCI_ERR_ILLEGAL_FLAG
                               : SCI_ERR_ILLEGAL_OPERATION); /* empty, or its callback has them */
        return 0;
    }
    struct seg_conn_event ev;
    int e = seg_local_wait_event(s->seg, &ev, sci_timeout(timeout));
    if (e <= 0) {
        sci_set(error, e ? sci_err(e) : SCI_ERR_TIMEOUT);
        return 0;
    }
    *sourcenodeId = ev.node_id;
    *localAdapterNo = ev.adapter;
    sci_error_t status; /* a callback's to see; the wait itself went well */
    sci_segment_cb_reason_t why = local_reason(e, &status);
    sci_set(error, SCI_ERR_OK);
    return why;
}

/* An empty segment gets memory: the checks both attach calls share. */
static struct sci_lseg_obj *empty_segment(sci_local_segment_t segment, size_t size,
                                          sci_error_t *error)
{
    struct sci_lseg_obj *s = sci_get(segment, SCI_K_LSEG);
    if (!s || !size) {
        sci_set(error, SCI_ERR_ILLEGAL_PARAMETER);
        return NULL;
    }
    if (s->seg) {
        sci_set(error, SCI_ERR_ILLEGAL_OPERATION); /* it has memory already */
        return NULL;
    }
    if (size > s->size) {
        sci_set(error, SCI_ERR_OUT_OF_RANGE);
        return NULL;
    }
    return s;
}

void SCIAttachPhysicalMemory(sci_ioaddr_t ioaddress, void *address, unsigned int busNo,
                             size_t size, sci_local_segment_t segment, unsigned int flags,
                             sci_error_t *error)
{
    struct sci_lseg_obj *s = empty_segment(segment, size, error);
    if (!s)
        return;
    if (flags & ~SCI_FLAG_CUDA_BUFFER) {
        sci_set(error, SCI_ERR_ILLEGAL_FLAG);
        return;
    }
    if (flags & SCI_FLAG_CUDA_BUFFER) {
        sci_set(error, SCI_ERR_NOT_SUPPORTED); /* no CUDA devices on the fabric */
        return;
    }
    if (!ioaddress || (ioaddress & 4095)) {
        sci_set(error, !ioaddress ? SCI_ERR_ILLEGAL_ADDRESS : SCI_ERR_OFFSET_ALIGNMENT);
        return;
    }
    seg_local_t *seg;
    int rc = seg_create_attached(s->o.owner->sd, &seg, sci_id_to_native(s->id), ioaddress, size);
    if (!rc)
        rc = got_memory(s, seg);
    if (!rc)
        s->size = size;
    sci_set(error, rc == -EINVAL || rc == -ENOENT ? SCI_ERR_ILLEGAL_ADDRESS : sci_err(rc));
}

void SCIRegisterSegmentMemory(void *address, size_t size, sci_local_segment_t segment,
                              unsigned int flags, sci_error_t *error)
{
    struct sci_lseg_obj *s = empty_segment(segment, size, error);
    if (!s)
        return;
    if (!address) {
        sci_set(error, SCI_ERR_ILLEGAL_ADDRESS);
        return;
    }
    if (flags & ~SCI_FLAG_LOCK_USER_MEM) {
        sci_set(error, SCI_ERR_ILLEGAL_FLAG);
        return;
    }
    long page = sysconf(_SC_PAGESIZE);
    if ((uintptr_t)address % (uintptr_t)page || size % (size_t)page) {
        sci_set(error, (uintptr_t)address % (uintptr_t)page ? SCI_ERR_OFFSET_ALIGNMENT
                                                             : SCI_ERR_SIZE_ALIGNMENT);
        return;
    }
    seg_local_t *seg;
    int rc = seg_create_registered(s->o.owner->sd, &seg, sci_id_to_native(s->id), address, size);
    if (!rc)
        rc = got_memory(s, seg);
    if (rc) {
        sci_set(error, rc == -EFAULT ? SCI_ERR_ILLEGAL_ADDRESS : sci_err(rc));
        return;
    }
    s->size = size;
    s->registered = address;
    sci_set(error, SCI_ERR_OK);
}

/* ---------------------------------------------------------------- remote segments */

static sci_segment_cb_reason_t reason_of(int ev, sci_error_t *status)
{
    *status = SCI_ERR_OK;
    switch (ev) {
    case SEG_EVENT_UNAVAILABLE: *status = SCI_ERR_NOT_AVAILABLE; return SCI_CB_DISCONNECT;
    case SEG_EVENT_AVAILABLE: return SCI_CB_CONNECT;
    case SEG_EVENT_REMOVED: *status = SCI_ERR_SEGMENT_REMOVED; return SCI_CB_LOST;
    case SEG_EVENT_LOST: *status = SCI_ERR_NO_LINK_ACCESS; return SCI_CB_NOT_OPERATIONAL;
    case SEG_EVENT_RESTORED: return SCI_CB_OPERATIONAL;
    }
    return 0;
}

/* The callback thread of a connection: reports each event until told to stop or the
 * callback says cancel. It looks at the stop flag at least every 100 ms. */
static void *rseg_events(void *arg)
{
    struct sci_rseg_obj *r = arg;
    while (!atomic_load(&r->cb_stop)) {
        int ev = seg_wait_event(r->seg, 100);
        if (ev <= 0 || atomic_load(&r->cb_stop))
            continue;
        sci_error_t status;
        sci_segment_cb_reason_t why = reason_of(ev, &status);
        if (why && r->cb(r->cb_arg, (sci_remote_segment_t)r->o.handle, why, status) ==
                       SCI_CALLBACK_CANCEL)
            break;
    }
    return NULL;
}

struct sci_rseg_obj *sci_rseg_new(struct sci_desc_obj *d, sci_error_t *error)
{
    struct sci_rseg_obj *r = sci_new(SCI_K_RSEG, sizeof *r, d);
    if (r)
        pthread_mutex_init(&r->lock, NULL);
    else
        sci_set(error, SCI_ERR_NOSPC);
    return r;
}

void SCIConnectSegment(sci_desc_t sd, sci_remote_segment_t *segment, unsigned int nodeId,
                       unsigned int segmentId, unsigned int localAdapterNo,
                       sci_cb_remote_segment_t callback, void *callbackArg,
                       unsigned int timeout, unsigned int flags, sci_error_t *error)
{
    struct sci_desc_obj *d = desc(sd);
    if (!d || !segment || ((flags & SCI_FLAG_USE_CALLBACK) && !callback)) {
        sci_set(error, SCI_ERR_ILLEGAL_PARAMETER);
        return;
    }
    if (flags & ~SCI_FLAG_USE_CALLBACK) {
        sci_set(error, SCI_ERR_ILLEGAL_FLAG);
        return;
    }
    if (!sci_adapter_ok(localAdapterNo, error))
        return;
    struct sci_rseg_obj *r = sci_rseg_new(d, error);
    if (!r)
        return;
    uint64_t deadline = sci_deadline(timeout);
    int rc;
    do
        rc = seg_connect(d->sd, &r->seg, nodeId, sci_id_to_native(segmentId), (int)localAdapterNo,
                         sci_remaining(deadline));
    while (sci_retry_unreachable(rc, nodeId, deadline));
    if (!rc && (flags & SCI_FLAG_USE_CALLBACK)) {
        r->cb = callback;
        r->cb_arg = callbackArg;
        rc = -pthread_create(&r->cb_thread, NULL, rseg_events, r);
        r->cb_running = !rc;
        if (rc)
            seg_disconnect(r->seg);
    }
    if (rc) {
        char name[8];
        sci_free(r);
        /* An unknown node reads as unreachable to the agent: say which it was. */
        sci_set(error, ntb_node_name(nodeId, name, sizeof name) == -ENOENT ? SCI_ERR_NO_SUCH_NODEID
                                                                           : sci_err(rc));
        return;
    }
    r->id = segmentId;
    r->node = nodeId;
    *segment = (sci_remote_segment_t)r->o.handle;
    sci_set(error, SCI_ERR_OK);
}

void SCIDisconnectSegment(sci_remote_segment_t segment, unsigned int flags, sci_error_t *error)
{
    struct sci_rseg_obj *r = sci_get(segment, SCI_K_RSEG);
    if (!r || flags) {
        sci_set(error, !r ? SCI_ERR_ILLEGAL_PARAMETER : SCI_ERR_ILLEGAL_FLAG);
        return;
    }
    if (atomic_load(&r->nmaps)) {
        sci_set(error, SCI_ERR_BUSY); /* SCIUnmapSegment first */
        return;
    }
    if (r->cb_running) {
        atomic_store(&r->cb_stop, true);
        if (!pthread_equal(pthread_self(), r->cb_thread))
            pthread_join(r->cb_thread, NULL);
        else
            pthread_detach(r->cb_thread);
        r->cb_running = false;
    }
    sci_devmaps_drop(&r->devmaps, &r->lock);
    int rc = seg_disconnect(r->seg);
    if (rc && rc != -ENOENT) {
        sci_set(error, sci_err(rc));
        return;
    }
    if (r->dev)
        atomic_fetch_sub(&r->dev->nuses, 1);
    pthread_mutex_destroy(&r->lock);
    sci_free(r);
    sci_set(error, SCI_ERR_OK);
}

size_t SCIGetRemoteSegmentSize(sci_remote_segment_t segment)
{
    struct sci_rseg_obj *r = sci_get(segment, SCI_K_RSEG);
    return r ? seg_remote_size(r->seg) : 0;
}

unsigned int SCIGetRemoteSegmentId(sci_remote_segment_t segment)
{
    struct sci_rseg_obj *r = sci_get(segment, SCI_K_RSEG);
    return r ? r->id : 0;
}

unsigned int SCIGetRemoteSegmentNodeId(sci_remote_segment_t segment)
{
    struct sci_rseg_obj *r = sci_get(segment, SCI_K_RSEG);
    return r ? r->node : 0;
}

sci_segment_cb_reason_t SCIWaitForRemoteSegmentEvent(sci_remote_segment_t segment,
                                                     sci_error_t *status, unsigned int timeout,
                                                     unsigned int flags, sci_error_t *error)
{
    struct sci_rseg_obj *r = sci_get(segment, SCI_K_RSEG);
    if (!r || !status || flags || r->cb_running) {
        sci_set(error, !r || !status ? SCI_ERR_ILLEGAL_PARAMETER
                       : flags       ? SCI_ERR_ILLEGAL_FLAG
                                     : SCI_ERR_ILLEGAL_OPERATION); /* its callback has them */
        return 0;
    }
    int ev = seg_wait_event(r->seg, sci_timeout(timeout));
    if (ev <= 0) {
        sci_set(error, SCI_ERR_TIMEOUT);
        return 0;
    }
    sci_set(error, SCI_ERR_OK);
    return reason_of(ev, status);
}

/* ---------------------------------------------------------------- maps */

static bool map_args(size_t total, size_t offset, size_t *size, void *addr, unsigned flags,
                     unsigned allowed, sci_error_t *error)
{
    if (flags & ~allowed) {
        sci_set(error, SCI_ERR_ILLEGAL_FLAG);
        return false;
    }
    if (addr || (flags & SCI_FLAG_FIXED_MAP_ADDR)) {
        sci_set(error, SCI_ERR_NOT_SUPPORTED); /* the window is where the system puts it */
        return false;
    }
    if (offset >= total || *size > total - offset) {
        sci_set(error, SCI_ERR_OUT_OF_RANGE);
        return false;
    }
    if (!*size)
        *size = total - offset;
    return true;
}

/* The map object for what seg_map_* returned (p NULL: its errno), counted in its segment. */
static void *new_map(struct sci_desc_obj *owner, void *p, seg_map_t *sm, size_t size,
                     struct sci_lseg_obj *l, struct sci_rseg_obj *r, sci_map_t *map,
                     sci_error_t *error)
{
    int e = errno;
    struct sci_map_obj *m = p ? sci_new(SCI_K_MAP, sizeof *m, owner) : NULL;
    if (!m) {
        if (p)
            seg_unmap(sm);
        sci_set(error, !p ? (e == EINVAL ? SCI_ERR_OUT_OF_RANGE : sci_err(e)) : SCI_ERR_NOSPC);
        return NULL;
    }
    *m = (struct sci_map_obj){ .o = m->o, .map = sm, .ptr = p, .size = size, .lseg = l, .rseg = r };
    atomic_fetch_add(l ? &l->nmaps : &r->nmaps, 1);
    *map = (sci_map_t)m->o.handle;
    sci_set(error, SCI_ERR_OK);
    return p;
}

volatile void *SCIMapRemoteSegment(sci_remote_segment_t segment, sci_map_t *map, size_t offset,
                                   size_t size, void *addr, unsigned int flags,
                                   sci_error_t *error)
{
    struct sci_rseg_obj *r = sci_get(segment, SCI_K_RSEG);
    if (!r || !map) {
        sci_set(error, SCI_ERR_ILLEGAL_PARAMETER);
        return NULL;
    }
    unsigned allowed = SCI_FLAG_READONLY_MAP | SCI_FLAG_IO_MAP_IOSPACE | SCI_FLAG_FIXED_MAP_ADDR;
    if (!map_args(seg_remote_size(r->seg), offset, &size, addr, flags, allowed, error))
        return NULL;
    /* Uncached (IOSPACE) or write-combined: the emulated window is ordinary shared memory,
     * whose stores are seen at once either way. */
    seg_map_t *sm;
    void *p = seg_map_remote(r->seg, offset, size, flags & SCI_FLAG_READONLY_MAP ? SEG_MAP_READONLY : 0,
                             &sm);
    return new_map(r->o.owner, p, sm, size, NULL, r, map, error);
}

void *SCIMapLocalSegment(sci_local_segment_t segment, sci_map_t *map, size_t offset,
                         size_t size, void *addr, unsigned int flags, sci_error_t *error)
{
    struct sci_lseg_obj *s = sci_get(segment, SCI_K_LSEG);
    if (!s || !map) {
        sci_set(error, SCI_ERR_ILLEGAL_PARAMETER);
        return NULL;
    }
    if (!s->seg) {
        sci_set(error, SCI_ERR_ILLEGAL_OPERATION); /* empty: no memory to map yet */
        return NULL;
    }
    unsigned allowed = SCI_FLAG_READONLY_MAP | SCI_FLAG_FIXED_MAP_ADDR;
    if (!map_args(s->size, offset, &size, addr, flags, allowed, error))
        return NULL;
    seg_map_t *sm;
    void *p = seg_map_local(s->seg, offset, size, flags & SCI_FLAG_READONLY_MAP ? SEG_MAP_READONLY : 0,
                            &sm);
    return new_map(s->o.owner, p, sm, size, s, NULL, map, error);
}

void SCIUnmapSegment(sci_map_t map, unsigned int flags, sci_error_t *error)
{
    struct sci_map_obj *m = sci_get(map, SCI_K_MAP);
    if (!m || flags) {
        sci_set(error, !m ? SCI_ERR_ILLEGAL_PARAMETER : SCI_ERR_ILLEGAL_FLAG);
        return;
    }
    if (atomic_load(&m->nseqs)) {
        sci_set(error, SCI_ERR_BUSY); /* SCIRemoveSequence first */
        return;
    }
    int rc = seg_unmap(m->map);
    atomic_fetch_sub(m->rseg ? &m->rseg->nmaps : &m->lseg->nmaps, 1);
    sci_free(m);
    sci_set(error, sci_err(rc));
}

volatile void *SCIGetMapPointer(sci_map_t map)
{
    struct sci_map_obj *m = sci_get(map, SCI_K_MAP);
    return m ? m->ptr : NULL;
}

size_t SCIGetMapSize(sci_map_t map)
{
    struct sci_map_obj *m = sci_get(map, SCI_K_MAP);
    return m ? m->size : 0;
}
