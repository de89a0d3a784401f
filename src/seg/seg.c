/*
 * Shared-memory segments (include/ntblend/seg.h): descriptors, local segments, connections to
 * segments of any host, mappings, events and sequences. The owner's agent keeps the segment;
 * a connection is a set of LUT entries on the connecting adapter pointing at the owner's
 * memory, so a mapping of it is a plain window mapping: loads and stores go straight there.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "seg_int.h"
#include "wpol.h"

/* ---------------------------------------------------------------- helpers */

/* The segment API's waits (src/wait): for a connection's events; and for a segment or an
 * interrupt to appear, where nothing wakes us (each look is a request to the agent): naps that
 * grow from 2 us to 5 ms, so one that appears at once is found at once. */
static struct wpol_site event_site = WPOL_SITE("segment event", 20000, 50000);
struct wpol_site seg_intr_site = WPOL_SITE("segment interrupt", 20000, 50000);
struct wpol_site seg_appear_site = WPOL_SITE("segment or interrupt to appear", 0, 0);
const struct wpol_how seg_appear_naps = { .sleep_ns = 5000000 };

uint64_t seg_deadline(int timeout_ms)
{
    return timeout_ms < 0 ? UINT64_MAX : ntb_backend()->now_ns() + (uint64_t)timeout_ms * 1000000ull;
}

struct moved {
    _Atomic uint32_t *w;
    uint32_t seen;
};

static bool moved(void *arg)
{
    const struct moved *m = arg;
    return atomic_load(m->w) != m->seen;
}

/* The backend's own sleep on the word (a futex on the emulated fabric). */
static int word_sleep(void *arg, uint64_t max_ns)
{
    const struct moved *m = arg;
    ntb_backend()->wait(m->w, m->seen, (int64_t)max_ns);
    return 0;
}

int seg_futex_wait_ms(struct wpol_site *site, _Atomic uint32_t *w, uint32_t seen, uint64_t deadline)
{
    struct moved m = { w, seen };
    if (!site) { /* one sleep: the caller looks at more than the word between them */
        uint64_t now = ntb_backend()->now_ns();
        if (now >= deadline)
            return -ETIMEDOUT;
        word_sleep(&m, deadline == UINT64_MAX ? 1000000000ull : deadline - now);
        return 0;
    }
    const struct wpol_how how = { .ready = moved, .arg = &m, .sleep = word_sleep,
                                  .deadline_ns = deadline == UINT64_MAX ? 0 : deadline,
                                  .sleep_ns = 1000000000ull };
    return wpol_wait(site, &how) == -ETIMEDOUT ? -ETIMEDOUT : 0;
}

const char *seg_strerror(int err)
{
    switch (err < 0 ? -err : err) {
    case 0: return "success";
    case ENOENT: return "no such segment or interrupt (yet): check the node and id, or wait longer";
    case ECONNREFUSED: return "the segment exists but is not available on that adapter";
    case EHOSTUNREACH: return "no path to that node through this adapter (link down, or not a peer)";
    case ENOSPC: return "out of LUT entries or requester IDs on the adapter";
    case ENOMEM: return "out of memory on the host (make RAM larger in the topology)";
    case EEXIST: return "that id is taken on this host";
    case EPERM: return "only the process that created it may do that";
    case EPROTO: return "prepare the segment on the adapter first";
    case ENODEV: return "this host has no such adapter";
    case ETIMEDOUT: return "timed out";
    case EINVAL: return "invalid argument (offset, size, flags or id)";
    case ENOLINK: return "the link is down";
    case EFAULT: return "IOMMU fault: the device may not access that memory";
    case EIO: return "master abort or unsupported request: nothing answers at that address";
    case ECANCELED: return "aborted";
    case EBUSY: return "the connection is still mapped: unmap it first";
    default: return strerror(err < 0 ? -err : err);
    }
}

struct ntb_dev *seg_ntb(seg_desc_t *sd, int index, int *err)
{
    if (index < 0 || index >= SEG_MAX_ADAPTERS || sd->rt->ops->adapter(sd->rt, sd->rt->host, index) < 0) {
        *err = -ENODEV;
        return NULL;
    }
    pthread_mutex_lock(&sd->lock);
    if (!sd->ntb[index])
        sd->ntb[index] = ntb_open(index);
    struct ntb_dev *n = sd->ntb[index];
    pthread_mutex_unlock(&sd->lock);
    *err = n ? 0 : -errno;
    return n;
}

/* A read-only view of [phys, phys+size) of a host's RAM: a mapping of its own, so that stores
 * fault as they do through a read-only window. *base is what seg_unmap releases. */
static void *ram_view_readonly(struct rt *rt, uint32_t host, uint64_t phys, size_t size,
                               void **base)
{
    int fd = rt->ops->ram_fd(rt, host);
    if (fd < 0) {
        errno = -fd;
        return NULL;
    }
    uint64_t start = phys & ~4095ull;
    void *p = mmap(NULL, phys - start + size, PROT_READ, MAP_SHARED, fd, (off_t)start);
    if (p == MAP_FAILED)
        return NULL;
    *base = p;
    return (char *)p + (phys - start);
}


/* ---------------------------------------------------------------- descriptors */

int seg_open(seg_desc_t **out)
{
    seg_desc_t *sd = calloc(1, sizeof *sd);
    if (!sd)
        return -ENOMEM;
    sd->rt = rt_get();
    if (!sd->rt) {
        int e = -errno;
        free(sd);
        return e;
    }
    pthread_mutex_init(&sd->lock, NULL);
    *out = sd;
    return 0;
}

void seg_close(seg_desc_t *sd)
{
    if (!sd)
        return;
    for (int i = 0; i < SEG_MAX_ADAPTERS; i++)
        ntb_close(sd->ntb[i]);
    rt_put(sd->rt);
    free(sd);
}

int seg_local_node_id(uint32_t *node_id)
{
    struct rt *rt = rt_get();
    if (!rt)
        return -errno;
    *node_id = rt->ops->node_id(rt, rt->host);
    rt_put(rt);
    return 0;
}

/* ---------------------------------------------------------------- local segments */

static int create(seg_desc_t *sd, seg_local_t **out, uint32_t id, uint64_t attach, size_t size)
{
    if (!sd || !out || !size)
        return -EINVAL;
    seg_local_t *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    struct agent_rsp r;
    struct agent_req q = { .op = AGENT_SEG_CREATE, .a = id, .b = size, .c = attach };
    int rc = rt_request(sd->rt, &q, &r);
    if (rc) {
        free(s);
        return rc;
    }
    *s = (seg_local_t){ .sd = sd, .id = (uint32_t)r.a, .phys = r.b, .size = size };
    *out = s;
    return 0;
}

int seg_create(seg_desc_t *sd, seg_local_t **seg, uint32_t id, size_t size)
{
    return create(sd, seg, id, 0, size);
}

int seg_create_attached(seg_desc_t *sd, seg_local_t **seg, uint32_t id, uint64_t bus_addr,
                        size_t size)
{
    if (!bus_addr)
        return -EINVAL;
    /* The identity IOVAs ntb_dma_alloc hands out are physical addresses on this host. */
    return create(sd, seg, id, bus_addr, size);
}

int seg_create_registered(seg_desc_t *sd, seg_local_t **seg, uint32_t id, void *addr,
                          size_t size)
{
    long page = sysconf(_SC_PAGESIZE);
    if (!sd || !seg || !addr || !size || (uintptr_t)addr % (uintptr_t)page || size % (size_t)page)
        return -EINVAL;
    unsigned char vec;
    if (mincore(addr, 1, &vec) && errno == ENOMEM)
        return -EFAULT; /* nothing mapped there */
    seg_local_t *s;
    int rc = create(sd, &s, id, 0, size);
    if (rc)
        return rc;
    struct rt *rt = sd->rt;
    int fd = rt->ops->ram_fd(rt, rt->host);
    void *ram = rt->ops->ram(rt, rt->host, s->phys, size);
    if (fd < 0 || !ram) {
        seg_remove(s);
        return fd < 0 ? fd : -ENOMEM;
    }
    /* Copy first, then put host memory in the pages' place: the caller sees no change. */
    memcpy(ram, addr, size);
    if (mmap(addr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, (off_t)s->phys) ==
        MAP_FAILED) {
        rc = -errno;
        seg_remove(s);
        return rc;
    }
    s->registered = addr;
    *seg = s;
    return 0;
}

uint32_t seg_local_id(const seg_local_t *seg) { return seg->id; }
size_t seg_local_size(const seg_local_t *seg) { return seg->size; }

int seg_prepare(seg_local_t *seg, int adapter)
{
    return rt_call(seg->sd->rt, AGENT_SEG_PREPARE, seg->id, (uint64_t)adapter, NULL);
}

static int set_available(seg_local_t *seg, int adapter, bool on)
{
    struct agent_req q = { .op = AGENT_SEG_AVAILABLE, .a = seg->id, .b = (uint64_t)adapter, .c = on };
    return rt_request(seg->sd->rt, &q, NULL);
}

int seg_set_available(seg_local_t *seg, int adapter) { return set_available(seg, adapter, true); }
int seg_set_unavailable(seg_local_t *seg, int adapter) { return set_available(seg, adapter, false); }

int seg_remove(seg_local_t *seg)
{
    if (!seg)
        return -EINVAL;
    if (atomic_load(&seg->nmaps))
        return -EBUSY; /* unmap first: the memory may be handed out again once removed */
    if (seg->registered) { /* the caller's own pages again, before the memory can go */
        struct rt *rt = seg->sd->rt;
        void *ram = rt->ops->ram(rt, rt->host, seg->phys, seg->size);
        void *p = ram ? mmap(seg->registered, seg->size, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0)
                      : MAP_FAILED;
        if (p == MAP_FAILED)
            return -ENOMEM;
        memcpy(p, ram, seg->size);
        seg->registered = NULL;
    }
    int rc = rt_call(seg->sd->rt, AGENT_SEG_REMOVE, seg->id, 0, NULL);
    if (!rc && seg->events_phys) /* the agent posts no more there */
        rt_call(seg->sd->rt, AGENT_FREE, seg->events_phys, 0, NULL);
    if (!rc)
        free(seg);
    return rc;
}

void *seg_map_local(seg_local_t *seg, size_t offset, size_t size, unsigned flags, seg_map_t **map)
{
    if (!size && offset < seg->size)
        size = seg->size - offset;
    if (!map || offset > seg->size || size > seg->size - offset || !size ||
        (flags & ~SEG_MAP_READONLY)) {
        errno = EINVAL;
        return NULL;
    }
    struct rt *rt = seg->sd->rt;
    seg_map_t *m = calloc(1, sizeof *m);
    void *base = NULL, *p = NULL;
    if (m && (flags & SEG_MAP_READONLY))
        p = ram_view_readonly(rt, rt->host, seg->phys + offset, size, &base);
    else if (m)
        p = rt->ops->ram(rt, rt->host, seg->phys + offset, size);
    if (!p) {
        free(m);
        errno = errno ? errno : ENOMEM;
        return NULL;
    }
    *m = (seg_map_t){ .local = seg, .window = base, .ptr = p, .size = size };
    atomic_fetch_add(&seg->nmaps, 1);
    *map = m;
    return p;
}

/* ---------------------------------------------------------------- connections */

static void release_lut(seg_remote_t *r)
{
    r->sd->rt->ops->window_unmap(r->sd->rt, &r->win);
}

/* Point a fresh window of our adapter at the owner's segment, reachable by this host's DMA
 * engines too (segment DMA queues copy through it). */
static int program_lut(seg_remote_t *r)
{
    struct rt *rt = r->sd->rt;
    return rt->ops->window_map(rt, r->ai, r->owner, r->bus, r->size, NTB_WIN_DMA, &r->win);
}

int seg_connect(seg_desc_t *sd, seg_remote_t **out, uint32_t node_id, uint32_t id, int adapter,
                int timeout_ms)
{
    if (!sd || !out || adapter < 0)
        return -EINVAL;
    struct rt *rt = sd->rt;
    seg_remote_t *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    *r = (seg_remote_t){ .sd = sd, .node = node_id, .id = id };
    struct agent_rsp rsp;
    int rc = rt_call(rt, AGENT_ALLOC, 4096, 4096, &rsp); /* the event word */
    if (rc)
        goto fail;
    r->event_phys = rsp.a;
    r->ev = rt->ops->ram(rt, rt->host, r->event_phys, sizeof *r->ev);
    if (!r->ev) {
        rc = -EFAULT;
        goto fail_ev;
    }
    uint64_t deadline = seg_deadline(timeout_ms);
    struct wpol w;
    wpol_begin(&w, &seg_appear_site, &seg_appear_naps);
    for (;;) {
        struct agent_req q = { .op = AGENT_SEG_CONNECT, .flags = (uint32_t)adapter, .a = node_id,
                               .b = id, .c = r->event_phys };
        rc = rt_request(rt, &q, &rsp);
        /* Not there yet, or not available yet: the owner may still be setting it up. */
        if ((rc != -ENOENT && rc != -ECONNREFUSED) || rt->ops->now_ns() >= deadline)
            break;
        wpol_pause(&w, 0);
    }
    wpol_end(&w);
    if (rc)
        goto fail_ev;
    r->bus = rsp.a;
    r->size = rsp.b;
    r->owner = (uint32_t)(rsp.c >> 32);
    r->conn_id = (uint32_t)rsp.c;
    r->local = r->owner == rt->host;
    r->ev_seen = atomic_load(&r->ev->head);
    if (!r->local) {
        int ai = rt->ops->adapter(rt, rt->host, adapter);
        int peer = ai < 0 ? ai : rt->ops->peer_on(rt, (uint32_t)ai, r->owner);
        r->ai = ai < 0 ? 0 : (uint32_t)ai;
        rc = peer < 0 ? peer : program_lut(r);
        r->peer_ai = peer < 0 ? 0 : (uint32_t)peer;
        if (rc) {
            rt_call(rt, AGENT_SEG_DISCONNECT, r->owner, r->conn_id, NULL);
            goto fail_ev;
        }
    }
    *out = r;
    return 0;
fail_ev:
    rt_call(rt, AGENT_FREE, r->event_phys, 0, NULL);
fail:
    free(r);
    return rc;
}

int seg_connect_phys(seg_desc_t *sd, uint32_t owner, uint64_t bus, uint64_t size, int adapter,
                     seg_remote_t **out)
{
    if (!sd || !out || !size || adapter < 0)
        return -EINVAL;
    struct rt *rt = sd->rt;
    seg_remote_t *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    *r = (seg_remote_t){ .sd = sd, .node = rt->ops->node_id(rt, owner), .owner = owner,
                         .local = owner == rt->host, .bus = bus, .size = size, .dev = true };
    int rc = 0;
    if (!r->local) {
        int ai = rt->ops->adapter(rt, rt->host, adapter);
        int peer = ai < 0 ? -ENODEV : rt->ops->peer_on(rt, (uint32_t)ai, owner);
        r->ai = ai < 0 ? 0 : (uint32_t)ai;
        r->peer_ai = peer < 0 ? 0 : (uint32_t)peer;
        rc = peer < 0 ? peer : program_lut(r);
    }
    if (rc) {
        free(r);
        return rc;
    }
    *out = r;
    return 0;
}

int seg_disconnect(seg_remote_t *r)
{
    if (!r)
        return -EINVAL;
    struct rt *rt = r->sd->rt;
    if (atomic_load(&r->nmaps))
        return -EBUSY; /* unmap it first */
    if (r->dev) { /* nothing at the owner to tell */
        if (!r->local)
            release_lut(r);
        free(r);
        return 0;
    }
    release_lut(r); /* first: from here on nothing we store can reach the owner */
    int rc = rt_call(rt, AGENT_SEG_DISCONNECT, r->owner, r->conn_id, NULL);
    rt_call(rt, AGENT_FREE, r->event_phys, 0, NULL);
    if (r->placed_id) /* private device memory: it goes with its one connection */
        rt_call(rt, AGENT_SEG_FREE_AT, r->placed_host, r->placed_id, NULL);
    if (r->placed_local)
        seg_remove(r->placed_local);
    free(r);
    return rc == -ENOENT ? 0 : rc;
}

size_t seg_remote_size(const seg_remote_t *r) { return r->size; }
uint32_t seg_remote_node_id(const seg_remote_t *r) { return r->node; }

uint64_t seg_remote_bus(const seg_remote_t *r, size_t off)
{
    if (r->local)
        return r->bus + off;
    return r->win.bus + off;
}

void *seg_map_remote(seg_remote_t *r, size_t offset, size_t size, unsigned flags, seg_map_t **map)
{
    if (!size && offset < r->size)
        size = r->size - offset;
    if (!map || offset > r->size || size > r->size - offset || !size ||
        (flags & ~SEG_MAP_READONLY)) {
        errno = EINVAL;
        return NULL;
    }
    struct rt *rt = r->sd->rt;
    seg_map_t *m = calloc(1, sizeof *m);
    if (!m) {
        errno = ENOMEM;
        return NULL;
    }
    /* Stores through it reach the registers with no sio_write32 to tell the model: counted
     * first, so that a model never misses a store through a mapping it was not told of. */
    m->raw = r->dev_regs && !(flags & SEG_MAP_READONLY) && rt->ops->fn_raw;
    if (m->raw) {
        int rc = rt->ops->fn_raw(rt, r->dev_fn, +1);
        if (rc) {
            free(m);
            errno = -rc;
            return NULL;
        }
    }
    if (r->dev && r->local) { /* the BAR of a device in this host: its own mapping */
        volatile char *bar = rt->ops->bar_mem(rt, r->dev_fn, r->dev_bar);
        m->ptr = bar ? (char *)bar + offset : NULL;
    } else if (r->local && (flags & SEG_MAP_READONLY)) {
        m->ptr = ram_view_readonly(rt, r->owner, r->bus + offset, size, &m->window);
    } else if (r->local) {
        m->ptr = rt->ops->ram(rt, r->owner, r->bus + offset, size);
    } else {
        char *p = rt->ops->window_cpu_map(rt, &r->win, flags & SEG_MAP_READONLY, &m->window);
        m->ptr = p ? p + offset : NULL;
    }
    if (!m->ptr) {
        int e = errno;
        if (m->raw)
            rt->ops->fn_raw(rt, r->dev_fn, -1);
        free(m);
        errno = e;
        return NULL;
    }
    m->remote = r;
    m->size = size;
    atomic_fetch_add(&r->nmaps, 1);
    *map = m;
    return m->ptr;
}

int seg_unmap(seg_map_t *m)
{
    if (!m)
        return -EINVAL;
    int rc = 0;
    if (m->raw)
        m->remote->sd->rt->ops->fn_raw(m->remote->sd->rt, m->remote->dev_fn, -1);
    if (m->remote && !m->remote->local)
        rc = m->remote->sd->rt->ops->window_cpu_unmap(m->remote->sd->rt, m->window);
    else if (m->window) /* a read-only view of local RAM */
        rc = munmap(m->window, (size_t)((char *)m->ptr - (char *)m->window) + m->size) ? -errno : 0;
    if (m->remote)
        atomic_fetch_sub(&m->remote->nmaps, 1);
    if (m->local)
        atomic_fetch_sub(&m->local->nmaps, 1);
    free(m);
    return rc;
}

void seg_store_barrier(void) { atomic_thread_fence(memory_order_seq_cst); }
void seg_flush(void) { atomic_thread_fence(memory_order_seq_cst); }

/* ---------------------------------------------------------------- events */

int seg_wait_event(seg_remote_t *r, int timeout_ms)
{
    uint64_t deadline = seg_deadline(timeout_ms);
    if (!r->ev) { /* a device's BAR: no owner to send events; sleep out the timeout */
        _Atomic uint32_t none = 0;
        static struct wpol_site no_event_site = WPOL_SITE("segment event (none to come)", 0, 0);
        while (!seg_futex_wait_ms(&no_event_site, &none, 0, deadline))
            ;
        return SEG_EVENT_NONE;
    }
    for (;;) {
        uint32_t seq = atomic_load(&r->ev->seq);
        if (atomic_load(&r->ev->head) != r->ev_seen)
            return (int)r->ev->ring[r->ev_seen++ % SEG_EVENT_RING];
        if (seg_futex_wait_ms(&event_site, &r->ev->seq, seq, deadline))
            return SEG_EVENT_NONE;
    }
}

int seg_remote_state(seg_remote_t *r)
{
    if (!r->ev) { /* a device's BAR: there while the path is */
        struct rt *rt = r->sd->rt;
        return r->local || rt->ops->path_up(rt, r->ai, r->peer_ai) ? SEG_EVENT_AVAILABLE
                                                                   : SEG_EVENT_LOST;
    }
    if (atomic_load(&r->ev->lost))
        return SEG_EVENT_LOST;
    return (int)atomic_load(&r->ev->state);
}

/* ---------------------------------------------------------------- sequences */

int seg_seq_create(seg_map_t *map, seg_seq_t **out)
{
    if (!map || !out)
        return -EINVAL;
    seg_seq_t *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->map = map;
    *out = s;
    return seg_seq_start(s);
}

void seg_seq_remove(seg_seq_t *s) { free(s); }

static bool seq_remote(const seg_seq_t *s) { return s->map->remote && !s->map->remote->local; }

/* A check that finds the path up and unchanged remembers the path word it read first: while
 * the word stays the same (ntb_backend.h: it changes before and after every path change), the
 * path is as found, and a check is a flush and one load. */
#define SEQ_SEEN (1ull << 32)

static uint64_t seq_word(const seg_seq_t *s) { return s->word ? SEQ_SEEN | atomic_load(s->word) : 0; }

int seg_seq_start(seg_seq_t *s)
{
    if (!seq_remote(s))
        return 0;
    const seg_remote_t *r = s->map->remote;
    struct rt *rt = r->sd->rt;
    s->word = rt->ops->path_word ? rt->ops->path_word(rt) : NULL;
    uint64_t word = seq_word(s);
    s->sig = rt->ops->path_signature(rt, r->ai, r->peer_ai);
    s->owner_boot = rt->ops->boot_gen(rt, r->owner);
    atomic_store(&s->seen, rt->ops->path_up(rt, r->ai, r->peer_ai) ? word : 0);
    return 0;
}

int seg_seq_check(seg_seq_t *s)
{
    atomic_thread_fence(memory_order_seq_cst); /* seg_flush, without a call through the PLT */
    uint64_t word = seq_word(s), seen = atomic_load(&s->seen);
    if (word && word == seen)
        return SEG_SEQ_OK;
    if (!seq_remote(s))
        return SEG_SEQ_OK;
    const seg_remote_t *r = s->map->remote;
    struct rt *rt = r->sd->rt;
    if (!rt->ops->path_up(rt, r->ai, r->peer_ai) || rt->ops->boot_gen(rt, r->owner) != s->owner_boot)
        return SEG_SEQ_NOT_RETRIABLE;
    if (rt->ops->path_signature(rt, r->ai, r->peer_ai) != s->sig)
        return SEG_SEQ_RETRIABLE;
    atomic_compare_exchange_strong(&s->seen, &seen, word);
    return SEG_SEQ_OK;
}
