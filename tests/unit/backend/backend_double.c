/*
 * The test double of the NTB backend seam (backend_double.h): its state, the call log, and
 * the operations, each doing what docs/backends.md asks of a backend over plain memory.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "backend_double.h"

struct double_state D;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER; /* the call log: the driver
                                                               * model calls from its threads */

void rec(const char *op, uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
    pthread_mutex_lock(&log_lock);
    bool room = D.ncalls < (int)(sizeof D.calls / sizeof D.calls[0]);
    if (room) {
        struct call *x = &D.calls[D.ncalls++];
        snprintf(x->op, sizeof x->op, "%s", op);
        x->a = a, x->b = b, x->c = c, x->d = d;
    }
    pthread_mutex_unlock(&log_lock);
    if (!room) {
        fprintf(stderr, "backend double: the call log is full\n");
        abort();
    }
}

int count(const char *op)
{
    int n = 0;
    pthread_mutex_lock(&log_lock);
    for (int i = 0; i < D.ncalls; i++)
        n += !strcmp(D.calls[i].op, op);
    pthread_mutex_unlock(&log_lock);
    return n;
}

/* The last call of that name; fails the test if there is none. */
int count_prefix(const char *prefix)
{
    int n = 0;
    pthread_mutex_lock(&log_lock);
    for (int i = 0; i < D.ncalls; i++)
        n += !strncmp(D.calls[i].op, prefix, strlen(prefix));
    pthread_mutex_unlock(&log_lock);
    return n;
}

const struct call *last(const char *op)
{
    const struct call *c = NULL;
    pthread_mutex_lock(&log_lock);
    for (int i = D.ncalls - 1; i >= 0 && !c; i--)
        if (!strcmp(D.calls[i].op, op))
            c = &D.calls[i];
    pthread_mutex_unlock(&log_lock);
    if (!c)
        fail_msg("no call to %s recorded", op);
    return c;
}

/* Where [addr, addr+len) of host h's address space lives, or NULL. */
uint8_t *resolve(uint32_t h, uint64_t addr, uint64_t len)
{
    if (h >= HOSTS)
        return NULL;
    if (addr < RAM_SIZE && len <= RAM_SIZE - addr)
        return D.ram[h] + addr;
    if (h == 1 && addr >= BAR_ADDR && addr - BAR_ADDR < BAR_SIZE && len <= BAR_SIZE - (addr - BAR_ADDR))
        return D.bar + (addr - BAR_ADDR);
    return NULL;
}

static uint64_t alloc(uint32_t h, uint64_t size)
{
    uint64_t p = (D.brk[h] + 4095) & ~4095ull;
    if (p + size > RAM_SIZE)
        return 0;
    D.brk[h] = p + size;
    return p;
}

/* A segment on host b, as a process there would have created it. */
uint32_t seg_on_b(uint32_t id, uint64_t size)
{
    uint64_t phys = alloc(1, size);
    assert_int_not_equal(phys, 0);
    D.segs[D.nsegs++] = (typeof(D.segs[0])){ 1, id, phys, size };
    return id;
}

/* ---------------------------------------------------------------- the ops */

static int d_start(struct rt *rt)
{
    rec("start", 0, 0, 0, 0);
    rt->host = 0;
    rt->boot_gen = 1;
    rt->bk = &D;
    return 0;
}

static void d_stop(struct rt *rt) { rec("stop", 0, 0, 0, 0); }

static int d_agent(struct rt *rt, const struct agent_req *q, struct agent_rsp *r)
{
    memset(r, 0, sizeof *r);
    switch (q->op) {
    case AGENT_ALLOC:
        rec("agent:alloc", q->a, q->b, 0, 0);
        r->a = alloc(rt->host, q->a);
        return r->a ? 0 : -ENOMEM;
    case AGENT_FREE:
        rec("agent:free", q->a, 0, 0, 0);
        return 0;
    case AGENT_SEG_CREATE: {
        rec("agent:seg_create", q->a, q->b, q->c, 0);
        uint64_t phys = alloc(rt->host, q->b);
        if (!phys)
            return -ENOMEM;
        uint32_t id = q->a ? (uint32_t)q->a : 100u + (uint32_t)D.nsegs;
        D.segs[D.nsegs++] = (typeof(D.segs[0])){ rt->host, id, phys, q->b };
        r->a = id, r->b = phys, r->c = q->b;
        return 0;
    }
    case AGENT_SEG_REMOVE:
        rec("agent:seg_remove", q->a, 0, 0, 0);
        return 0;
    case AGENT_SEG_CONNECT:
        rec("agent:seg_connect", q->flags, q->a, q->b, q->c);
        for (int i = 0; i < D.nsegs; i++)
            if (NODE(D.segs[i].owner) == q->a && D.segs[i].id == q->b) {
                r->a = D.segs[i].phys, r->b = D.segs[i].size;
                r->c = (uint64_t)D.segs[i].owner << 32 | (uint32_t)(i + 1);
                return 0;
            }
        return -ENOENT;
    case AGENT_SEG_DISCONNECT:
        rec("agent:seg_disconnect", q->a, q->b, 0, 0);
        return 0;
    case AGENT_SEG_ALLOC_AT:
        rec("agent:seg_alloc_at", q->a, q->b, 0, 0);
        r->a = seg_on_b(200u + (uint32_t)D.nsegs, q->b);
        return q->a == 1 ? 0 : -EINVAL;
    case AGENT_SEG_FREE_AT:
        rec("agent:seg_free_at", q->a, q->b, 0, 0);
        return 0;
    case AGENT_DEV_BORROW:
        rec("agent:dev_borrow", q->a, q->b, 0, 0);
        return q->a == 0 ? 0 : -ENODEV;
    case AGENT_DEV_RETURN:
        rec("agent:dev_return", q->a, 0, 0, 0);
        return 0;
    case AGENT_DEV_MAP:
        rec("agent:dev_map", q->a, q->b, q->c, q->flags);
        if (D.nmaps == (int)(sizeof D.maps / sizeof D.maps[0]))
            return -ENOSPC;
        if (!(q->b == 0 && q->c == double_ops.msi_addr) && /* a's MSI region, or memory */
            !resolve((uint32_t)q->b, q->c, (uint64_t)q->flags * 4096 - (q->c & 4095)))
            return -EFAULT;
        D.maps[D.nmaps] = (typeof(D.maps[0])){ (uint32_t)q->b, q->c & ~4095ull };
        r->a = IOVA_BASE + (uint64_t)D.nmaps * 0x10000 + (q->c & 4095);
        r->b = (uint64_t)++D.nmaps;
        return 0;
    case AGENT_DEV_UNMAP:
        rec("agent:dev_unmap", q->a, q->b, 0, 0);
        return 0;
    case AGENT_DEV_APERTURE:
        rec("agent:dev_aperture", q->a, q->b, 0, 0);
        if (!D.iommu)
            return -EOPNOTSUPP;
        r->a = APERTURE_IO, r->b = APERTURE_IOVA, r->c = APERTURE_SIZE;
        return 0;
    default:
        rec("agent:other", q->op, 0, 0, 0);
        return -EOPNOTSUPP;
    }
}

static uint32_t d_node_id(struct rt *rt, uint32_t host) { return NODE(host); }

static int d_host_by_node(struct rt *rt, uint32_t node)
{
    for (uint32_t h = 0; h < HOSTS; h++)
        if (NODE(h) == node)
            return (int)h;
    return -EHOSTUNREACH;
}

static uint32_t d_boot_gen(struct rt *rt, uint32_t host) { return 1; }
static int d_adapter(struct rt *rt, uint32_t host, int index)
{
    return host < HOSTS && index == 0 ? (int)host : -ENODEV;
}

static int d_adapter_toward(struct rt *rt, uint32_t host, uint32_t target, uint32_t *peer)
{
    rec("adapter_toward", host, target, 0, 0);
    if (host >= HOSTS || target >= HOSTS || host == target)
        return -EHOSTUNREACH;
    *peer = target;
    return (int)host;
}

static int d_peer_on(struct rt *rt, uint32_t adapter, uint32_t host)
{
    rec("peer_on", adapter, host, 0, 0);
    return adapter < HOSTS && host < HOSTS && host != adapter ? (int)host : -ENOTCONN;
}

static bool d_path_up(struct rt *rt, uint32_t a, uint32_t b) { return a < HOSTS && b < HOSTS; }
static uint64_t d_path_signature(struct rt *rt, uint32_t a, uint32_t b) { return 42; }

static int d_window_map(struct rt *rt, uint32_t adapter, uint32_t peer_host, uint64_t peer_addr,
                        uint64_t len, unsigned flags, struct ntb_window *w)
{
    rec("window_map", adapter, peer_host, peer_addr, len);
    if (flags & NTB_WIN_DMA)
        rec("window_map:dma", adapter, 0, 0, 0);
    if (adapter != 0 || peer_host != 1 || !resolve(peer_host, peer_addr, len))
        return -EINVAL;
    *w = (struct ntb_window){ .adapter = adapter, .peer_host = peer_host, .peer_addr = peer_addr,
                              .len = len, .bus = 0x40000000ull + peer_addr, .first = D.next_win,
                              .count = 1 };
    D.next_win++;
    return 0;
}

static void d_window_unmap(struct rt *rt, struct ntb_window *w)
{
    if (!w->count)
        return;
    rec("window_unmap", w->adapter, w->peer_host, w->peer_addr, w->len);
    w->count = 0;
}

static void *d_window_cpu_map(struct rt *rt, const struct ntb_window *w, bool readonly, void **base)
{
    rec("window_cpu_map", w->peer_host, w->peer_addr, w->len, readonly);
    uint8_t *p = w->count ? resolve(w->peer_host, w->peer_addr, w->len) : NULL;
    if (!p) {
        errno = EINVAL;
        return NULL;
    }
    D.cpu_maps++;
    *base = p;
    return p;
}

static int d_window_cpu_unmap(struct rt *rt, void *base)
{
    rec("window_cpu_unmap", (uint64_t)(uintptr_t)base, 0, 0, 0);
    D.cpu_maps--;
    return 0;
}

static void *d_ram(struct rt *rt, uint32_t host, uint64_t phys, uint64_t len)
{
    /* One process: every host's RAM is reachable directly (the layers only ask for their
     * own host's). */
    uint8_t *p = phys < RAM_SIZE ? resolve(host, phys, len) : NULL;
    if (!p)
        errno = EFAULT;
    return p;
}

static int d_ram_fd(struct rt *rt, uint32_t host) { return -EOPNOTSUPP; }

static _Atomic uint32_t *d_msi_word(struct rt *rt, uint32_t v) { return &D.msi[v]; }

static int d_func_info(struct rt *rt, uint32_t fn, struct ntb_func_info *o)
{
    if (fn != 0)
        return -ENODEV;
    memset(o, 0, sizeof *o);
    o->host = 1;
    snprintf(o->name, sizeof o->name, "dev0");
    snprintf(o->type, sizeof o->type, "test");
    snprintf(o->host_name, sizeof o->host_name, "b");
    o->vendor = 0x1234;
    o->device = 0x5678;
    o->available = true;
    o->msix_cap = 0x40;
    o->bdf = 0x0300; /* 03:00.0 of b's tree */
    o->bar[0].size = BAR_SIZE;
    o->bar[0].addr = BAR_ADDR;
    return 0;
}

static int d_func_by_name(struct rt *rt, const char *name)
{
    rec("func_by_name", 0, 0, 0, 0);
    return !strcmp(name, "dev0") ? 0 : -ENOENT;
}

static uint32_t d_cfg_read(struct rt *rt, uint32_t fn, uint32_t off, uint32_t len)
{
    rec("cfg_read", fn, off, len, 0);
    uint32_t v = 0;
    memcpy(&v, D.cfg + off, len);
    return v;
}

static int d_cfg_write(struct rt *rt, uint32_t fn, uint32_t off, uint32_t len, uint32_t val)
{
    rec("cfg_write", fn, off, len, val);
    memcpy(D.cfg + off, &val, len);
    return 0;
}

static volatile void *d_bar_mem(struct rt *rt, uint32_t fn, int bar)
{
    rec("bar_mem", fn, (uint64_t)bar, 0, 0);
    errno = EINVAL; /* dev0 is not in this host */
    return NULL;
}

static void d_fn_notify(struct rt *rt, uint32_t fn) { rec("fn_notify", fn, 0, 0, 0); }

/* dev0 hot-added into a's tree (D.lent). */
static int d_tree(struct rt *rt, uint32_t host, struct ntb_shadow_info *out, int max)
{
    if (host != 0 || !D.lent)
        return 0;
    if (max > 0)
        *out = (struct ntb_shadow_info){ .fn = 0, .bdf = 0x8000, .present = D.present,
                                         .bar_addr = { SHADOW_BAR } };
    return 1;
}

static _Atomic uint32_t *d_tree_word(struct rt *rt, uint32_t host)
{
    return host == 0 ? &D.tree_gen : NULL;
}

/* a's IOMMU (D.iommu): what the driver model maps for streaming DMA. */
static int d_iommu_on(struct rt *rt, uint32_t host) { return host == 0 && D.iommu; }

static int d_iommu_map(struct rt *rt, uint16_t rid, uint64_t iova, uint64_t phys, uint64_t len,
                       unsigned perm)
{
    rec("iommu_map", rid, iova, phys, len);
    if (!D.iommu || !resolve(0, phys, len) || !perm || (iova | len) & 4095)
        return -EINVAL;
    for (int i = 0; i < 64; i++)
        if (D.iommu_maps[i].len && D.iommu_maps[i].rid == rid &&
            iova < D.iommu_maps[i].iova + D.iommu_maps[i].len && D.iommu_maps[i].iova < iova + len)
            return -EEXIST;
    for (int i = 0; i < 64; i++)
        if (!D.iommu_maps[i].len) {
            D.iommu_maps[i] = (typeof(D.iommu_maps[0])){ rid, iova, phys, len, perm };
            return 0;
        }
    return -ENOSPC;
}

static int d_iommu_unmap(struct rt *rt, uint16_t rid, uint64_t iova, uint64_t len)
{
    rec("iommu_unmap", rid, iova, len, 0);
    for (int i = 0; i < 64; i++)
        if (D.iommu_maps[i].len == len && D.iommu_maps[i].rid == rid &&
            D.iommu_maps[i].iova == iova) {
            D.iommu_maps[i].len = 0;
            return 0;
        }
    return -ENOENT;
}

uint8_t *iommu_resolve(uint16_t rid, uint64_t iova, uint64_t len, unsigned perm)
{
    for (int i = 0; i < 64; i++) {
        const typeof(D.iommu_maps[0]) *m = &D.iommu_maps[i];
        if (m->len && m->rid == rid && iova >= m->iova && iova + len <= m->iova + m->len &&
            (m->perm & perm) == perm)
            return resolve(0, m->phys + (iova - m->iova), len);
    }
    return NULL;
}

static uint64_t d_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int d_wait(_Atomic uint32_t *w, uint32_t seen, int64_t timeout_ns)
{
    struct timespec ts = { 0, 1000000 }; /* spurious wake-ups are allowed */
    nanosleep(&ts, NULL);
    return atomic_load(w) == seen && timeout_ns >= 0 && timeout_ns <= 1000000 ? -ETIMEDOUT : 0;
}

static void d_wake(_Atomic uint32_t *w, int n) {}

/* The NTB device: adapter h of host h, one peer (the other host's), 4 windows of 64 KiB at
 * bus 0x40000000, 8 doorbell bits, 4 scratchpads, no DMA engine. */
static int d_adapter_info(struct rt *rt, uint32_t a, struct ntb_adapter_info *o)
{
    if (a >= HOSTS)
        return -ENODEV;
    *o = (struct ntb_adapter_info){ .host = a, .npeers = 1, .peers = { 1 - a }, .mw_count = 4,
                                    .mw_size = 0x10000, .mw_base = 0x40000000ull,
                                    .db_valid = 0xff, .spads = 4, .rid = (uint16_t)(0x100 << a) };
    snprintf(o->name, sizeof o->name, "%s.ntb0", a ? "b" : "a");
    return 0;
}

static int d_mw_set(struct rt *rt, uint32_t a, uint32_t widx, uint32_t host, uint64_t addr)
{
    rec("mw_set", a, widx, host, addr);
    return 0;
}

static int d_mw_clear(struct rt *rt, uint32_t a, uint32_t widx)
{
    rec("mw_clear", a, widx, 0, 0);
    return 0;
}

/* Entries are claimed and mapped by the tests through window_map and window_cpu_map; the
 * NTB API's own claiming, its link switch and its DMA engines are what a device without them
 * answers. */
static int d_mw_alloc(struct rt *rt, uint32_t a) { return -ENOSPC; }
static void *d_mw_cpu_map(struct rt *rt, uint32_t a, uint32_t first, uint32_t count)
{
    errno = EOPNOTSUPP;
    return NULL;
}
static void d_link_set(struct rt *rt, uint32_t a, bool on) { rec("link_set", a, on, 0, 0); }
static void *d_dma_chan_get(struct rt *rt, uint32_t a)
{
    errno = ENODEV; /* no DMA engine */
    return NULL;
}
static void d_dma_chan_put(struct rt *rt, void *chan) {}
static int64_t d_dma_submit(struct rt *rt, void *chan, uint64_t dst, uint64_t src, uint64_t len,
                            bool interrupt)
{
    return -EINVAL;
}
static int d_dma_abort(struct rt *rt, void *chan) { return -EINVAL; }
static int d_dma_wait(struct rt *rt, void *chan, int64_t cookie, int timeout_ms) { return -EINVAL; }
static int d_dma_buf_map(struct rt *rt, uint32_t a, uint64_t phys, uint64_t len, bool on)
{
    return 0; /* as a host without an IOMMU */
}
static int d_iommu_faults(struct rt *rt, uint32_t host, struct ntb_fault *out, int max,
                          uint64_t *total)
{
    *total = 0;
    return 0;
}

static uint64_t d_db_read(struct rt *rt, uint32_t a) { return D.db[a]; }
static void d_db_clear(struct rt *rt, uint32_t a, uint64_t bits) { D.db[a] &= ~bits; }
static uint64_t d_db_mask_read(struct rt *rt, uint32_t a) { return D.db_mask[a]; }
static void d_db_mask_set(struct rt *rt, uint32_t a, uint64_t bits) { D.db_mask[a] |= bits; }
static void d_db_mask_clear(struct rt *rt, uint32_t a, uint64_t bits) { D.db_mask[a] &= ~bits; }
static _Atomic uint32_t *d_db_word(struct rt *rt, uint32_t a) { return &D.db_seq[a]; }
static _Atomic uint32_t *d_link_word(struct rt *rt, uint32_t a) { return &D.link_seq[a]; }

static void d_db_set(struct rt *rt, uint32_t a, uint64_t bits)
{
    D.db[a] |= bits;
    D.db_seq[a]++;
}

static int d_peer_db_set(struct rt *rt, uint32_t a, uint32_t peer, uint64_t bits)
{
    rec("peer_db_set", a, peer, bits, 0);
    d_db_set(rt, peer, bits);
    return 0;
}

static uint32_t d_spad_read(struct rt *rt, uint32_t a, uint32_t i) { return D.spad[a][i]; }

static void d_spad_write(struct rt *rt, uint32_t a, uint32_t i, uint32_t v)
{
    rec("spad_write", a, i, v, 0);
    D.spad[a][i] = v;
}

const struct ntb_backend_ops double_ops = {
    .name = "test double",
    .start = d_start, .stop = d_stop, .agent_call = d_agent,
    .node_id = d_node_id, .host_by_node = d_host_by_node, .boot_gen = d_boot_gen,
    .adapter = d_adapter, .adapter_toward = d_adapter_toward, .peer_on = d_peer_on,
    .path_up = d_path_up, .path_signature = d_path_signature,
    .window_map = d_window_map, .window_unmap = d_window_unmap,
    .window_cpu_map = d_window_cpu_map, .window_cpu_unmap = d_window_cpu_unmap,
    .ram = d_ram, .ram_fd = d_ram_fd, .msi_word = d_msi_word, .msi_addr = 0xfee00000ull,
    .msi_vectors = 8,
    .func_info = d_func_info, .func_by_name = d_func_by_name, .cfg_read = d_cfg_read,
    .cfg_write = d_cfg_write, .bar_mem = d_bar_mem, .fn_notify = d_fn_notify,
    .tree = d_tree, .tree_word = d_tree_word,
    .iommu_on = d_iommu_on, .iommu_map = d_iommu_map, .iommu_unmap = d_iommu_unmap,
    .now_ns = d_now_ns, .wait = d_wait, .wake = d_wake,
    .adapter_info = d_adapter_info, .mw_set = d_mw_set, .mw_clear = d_mw_clear,
    .link_word = d_link_word, .db_read = d_db_read, .db_set = d_db_set, .db_clear = d_db_clear,
    .db_mask_read = d_db_mask_read, .db_mask_set = d_db_mask_set,
    .db_mask_clear = d_db_mask_clear, .peer_db_set = d_peer_db_set, .db_word = d_db_word,
    .spad_read = d_spad_read, .spad_write = d_spad_write,
    .mw_alloc = d_mw_alloc, .mw_cpu_map = d_mw_cpu_map, .link_set = d_link_set,
    .dma_chan_get = d_dma_chan_get, .dma_chan_put = d_dma_chan_put, .dma_submit = d_dma_submit,
    .dma_abort = d_dma_abort, .dma_wait = d_dma_wait, .dma_buf_map = d_dma_buf_map,
    .iommu_faults = d_iommu_faults,
};

int double_setup(void **state)
{
    memset(&D, 0, sizeof D);
    for (int h = 0; h < HOSTS; h++) {
        D.ram[h] = calloc(1, RAM_SIZE);
        D.brk[h] = 0x10000; /* keep 0 free: 0 means "no allocation" */
    }
    D.bar = calloc(1, BAR_SIZE);
    return ntb_backend_use(&double_ops);
}

int double_teardown(void **state)
{
    ntb_backend_use(NULL);
    for (int h = 0; h < HOSTS; h++)
        free(D.ram[h]);
    free(D.bar);
    return 0;
}

