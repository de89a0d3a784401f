/*
 * The NTB backend seam (src/ntb/ntb_backend.h): a second backend — a test double over
 * malloc'd memory that records every call — selected with ntb_backend_use(), under the
 * segment layer and SmartIO. No fabric, no agent: if either layer still reached around the
 * ops table, it would crash or its data would not land where the double put the memory.
 *
 * The NTB API runs over it too (scratchpads, doorbells, inbound windows).
 *
 * The double: two hosts, a (node 4, index 0, this process) and b (node 8), 1 MiB of RAM each;
 * one adapter per host (ids 0 and 1), linked to each other; one device function "dev0" in b
 * with a 16 KiB BAR 0 at 0x100000 of b's address space. Its agent keeps a segment table and
 * hands out device mappings with I/O addresses IOVA_BASE + n * 0x10000.
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

#include "ntb_backend.h"
#include "ntblend/seg.h"
#include "ntblend/smartio.h"
#include "runtime.h"

#define HOSTS 2
#define RAM_SIZE (1u << 20)
#define BAR_ADDR 0x100000ull
#define BAR_SIZE 0x4000ull
#define IOVA_BASE 0x7000000000ull
#define NODE(h) (4u + 4u * (h))

/* ---------------------------------------------------------------- the double's state */

struct call {
    char op[32];
    uint64_t a, b, c, d;
};

static struct {
    uint8_t *ram[HOSTS];
    uint64_t brk[HOSTS]; /* bump allocator over each host's RAM */
    uint8_t *bar;        /* dev0's BAR 0 */
    uint8_t cfg[4096];   /* dev0's config space */
    struct { uint32_t owner, id; uint64_t phys, size; } segs[16];
    int nsegs;
    struct { uint32_t host; uint64_t addr; } maps[16]; /* device mappings by id - 1 */
    int nmaps;
    uint32_t next_win;
    struct call calls[512];
    int ncalls;
    int cpu_maps; /* window CPU mappings outstanding */
    /* Each host's adapter's registers. */
    _Atomic uint32_t spad[HOSTS][4];
    _Atomic uint64_t db[HOSTS], db_mask[HOSTS];
    _Atomic uint32_t db_seq[HOSTS], link_seq[HOSTS];
} D;

static void rec(const char *op, uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
    assert_true(D.ncalls < (int)(sizeof D.calls / sizeof D.calls[0]));
    struct call *x = &D.calls[D.ncalls++];
    snprintf(x->op, sizeof x->op, "%s", op);
    x->a = a, x->b = b, x->c = c, x->d = d;
}

static int count(const char *op)
{
    int n = 0;
    for (int i = 0; i < D.ncalls; i++)
        n += !strcmp(D.calls[i].op, op);
    return n;
}

/* The last call of that name; fails the test if there is none. */
static const struct call *last(const char *op)
{
    for (int i = D.ncalls - 1; i >= 0; i--)
        if (!strcmp(D.calls[i].op, op))
            return &D.calls[i];
    fail_msg("no call to %s recorded", op);
    return NULL;
}

/* Where [addr, addr+len) of host h's address space lives, or NULL. */
static uint8_t *resolve(uint32_t h, uint64_t addr, uint64_t len)
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
static uint32_t seg_on_b(uint32_t id, uint64_t size)
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
        if (!resolve((uint32_t)q->b, q->c, (uint64_t)q->flags * 4096 - (q->c & 4095)))
            return -EFAULT;
        D.maps[D.nmaps] = (typeof(D.maps[0])){ (uint32_t)q->b, q->c & ~4095ull };
        r->a = IOVA_BASE + (uint64_t)D.nmaps * 0x10000 + (q->c & 4095);
        r->b = (uint64_t)++D.nmaps;
        return 0;
    case AGENT_DEV_UNMAP:
        rec("agent:dev_unmap", q->a, q->b, 0, 0);
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

static _Atomic uint32_t msi[8];
static _Atomic uint32_t *d_msi_word(struct rt *rt, uint32_t v) { return &msi[v]; }

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
                                    .db_valid = 0xff, .spads = 4 };
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

static const struct ntb_backend_ops double_ops = {
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
    .now_ns = d_now_ns, .wait = d_wait, .wake = d_wake,
    .adapter_info = d_adapter_info, .mw_set = d_mw_set, .mw_clear = d_mw_clear,
    .link_word = d_link_word, .db_read = d_db_read, .db_set = d_db_set, .db_clear = d_db_clear,
    .db_mask_read = d_db_mask_read, .db_mask_set = d_db_mask_set,
    .db_mask_clear = d_db_mask_clear, .peer_db_set = d_peer_db_set, .db_word = d_db_word,
    .spad_read = d_spad_read, .spad_write = d_spad_write,
};

static int setup(void **state)
{
    memset(&D, 0, sizeof D);
    for (int h = 0; h < HOSTS; h++) {
        D.ram[h] = calloc(1, RAM_SIZE);
        D.brk[h] = 0x10000; /* keep 0 free: 0 means "no allocation" */
    }
    D.bar = calloc(1, BAR_SIZE);
    ntb_backend_use(&double_ops);
    return 0;
}

static int teardown(void **state)
{
    ntb_backend_use(NULL);
    for (int h = 0; h < HOSTS; h++)
        free(D.ram[h]);
    free(D.bar);
    return 0;
}

/* ---------------------------------------------------------------- segments */

static void test_segments(void **state)
{
    seg_desc_t *sd;
    assert_int_equal(seg_open(&sd), 0);
    assert_int_equal(count("start"), 1);
    uint32_t node;
    assert_int_equal(seg_local_node_id(&node), 0);
    assert_int_equal(node, 4);

    /* A local segment: its memory is this host's RAM where the agent put it. */
    seg_local_t *loc;
    assert_int_equal(seg_create(sd, &loc, 7, 8192), 0);
    const struct call *c = last("agent:seg_create");
    assert_int_equal(c->a, 7);
    assert_int_equal(c->b, 8192);
    uint64_t loc_phys = D.segs[D.nsegs - 1].phys;
    assert_int_equal(D.segs[D.nsegs - 1].owner, 0);
    seg_map_t *lm;
    char *lp = seg_map_local(loc, 0, 0, 0, &lm);
    assert_non_null(lp);
    assert_ptr_equal(lp, D.ram[0] + loc_phys);

    /* Connecting to it from this host: no window, the same memory. */
    seg_remote_t *self;
    assert_int_equal(seg_connect(sd, &self, 4, 7, 0, 100), 0);
    assert_int_equal(count("window_map"), 0);
    seg_map_t *sm;
    char *sp = seg_map_remote(self, 0, 0, 0, &sm);
    assert_ptr_equal(sp, lp);

    /* A segment of host b, through a window of adapter 0. */
    seg_on_b(9, 3 * 4096);
    uint64_t b_phys = D.segs[D.nsegs - 1].phys;
    memcpy(D.ram[1] + b_phys + 4096, "from b", 7);
    seg_remote_t *r;
    assert_int_equal(seg_connect(sd, &r, 8, 9, 0, 100), 0);
    c = last("agent:seg_connect");
    assert_int_equal(c->a, 0);  /* adapter index */
    assert_int_equal(c->b, 8);  /* owner node */
    assert_int_equal(c->c, 9);  /* id */
    assert_true(c->d >= 0x10000 && c->d < RAM_SIZE); /* the event word, in our RAM */
    c = last("peer_on");
    assert_int_equal(c->a, 0);
    assert_int_equal(c->b, 1);
    assert_int_equal(count("window_map"), 1);
    c = last("window_map");
    assert_int_equal(c->a, 0);
    assert_int_equal(c->b, 1);
    assert_int_equal(c->c, b_phys);
    assert_int_equal(c->d, 3 * 4096);
    assert_int_equal(count("window_map:dma"), 1); /* segment DMA copies through it */
    assert_int_equal(seg_remote_size(r), 3 * 4096);

    seg_map_t *rm;
    char *rp = seg_map_remote(r, 4096, 4096, 0, &rm);
    assert_non_null(rp);
    c = last("window_cpu_map");
    assert_int_equal(c->a, 1);
    assert_int_equal(c->b, b_phys);
    assert_int_equal(c->d, 0); /* writable */
    assert_string_equal(rp, "from b");              /* b's store, read through the window */
    memcpy(rp + 100, "from a", 7);                  /* our store, seen in b's memory */
    assert_string_equal((char *)D.ram[1] + b_phys + 4096 + 100, "from a");
    assert_int_equal(D.ram[0][b_phys + 4096 + 100], 0); /* not in ours */

    /* A sequence over a live path checks out. */
    seg_seq_t *seq;
    assert_int_equal(seg_seq_create(rm, &seq), 0);
    assert_int_equal(seg_seq_check(seq), SEG_SEQ_OK);
    seg_seq_remove(seq);

    /* Disconnecting while mapped is refused; after unmapping, the window goes. */
    assert_int_equal(seg_disconnect(r), -EBUSY);
    assert_int_equal(count("window_unmap"), 0);
    assert_int_equal(seg_unmap(rm), 0);
    assert_int_equal(D.cpu_maps, 0);
    assert_int_equal(seg_disconnect(r), 0);
    assert_int_equal(count("window_unmap"), 1);
    c = last("window_unmap");
    assert_int_equal(c->c, b_phys);
    c = last("agent:seg_disconnect");
    assert_int_equal(c->a, 1); /* owner host */

    /* Not on b: the double's agent says so, and so does seg_connect. */
    seg_remote_t *none;
    assert_int_equal(seg_connect(sd, &none, 8, 12345, 0, 0), -ENOENT);
    /* No adapter 1 on this host. */
    assert_int_equal(seg_connect(sd, &none, 8, 9, 1, 0), -ENODEV);

    assert_int_equal(seg_unmap(sm), 0);
    assert_int_equal(seg_disconnect(self), 0);
    assert_int_equal(seg_remove(loc), -EBUSY);
    assert_int_equal(seg_unmap(lm), 0);
    assert_int_equal(seg_remove(loc), 0);
    assert_int_equal(last("agent:seg_remove")->a, 7);
    assert_int_equal(count("stop"), 0);
    seg_close(sd);
    assert_int_equal(count("stop"), 1); /* the last reference stops the backend */
}

/* ---------------------------------------------------------------- SmartIO */

static void test_smartio(void **state)
{
    assert_int_equal(sio_find("dev0"), 0);
    assert_int_equal(sio_find("nope"), -ENOENT);
    struct sio_info info[4];
    assert_int_equal(sio_list(info, 4), 1);
    assert_string_equal(info[0].host, "b");
    assert_int_equal(info[0].node_id, 8);
    assert_int_equal(info[0].vendor, 0x1234);

    sio_dev_t *d;
    assert_int_equal(sio_borrow(0, SIO_EXCLUSIVE, &d), 0);
    const struct call *c = last("agent:dev_borrow");
    assert_int_equal(c->a, 0);
    assert_int_equal(c->b, SIO_EXCLUSIVE);
    c = last("adapter_toward");
    assert_int_equal(c->a, 0);
    assert_int_equal(c->b, 1);

    /* Config space goes to the backend. */
    assert_int_equal(sio_enable(d), 0);
    c = last("cfg_write");
    assert_int_equal(c->b, 0x04);
    assert_int_equal(D.cfg[4] & 0x6, 0x6); /* memory space and bus master */

    /* BAR 0 through a window onto the lender: stores land in the BAR, and notify it. */
    sio_bar_t *bar;
    size_t size = 0;
    volatile uint8_t *regs = sio_map_bar(d, 0, &size, &bar);
    assert_non_null(regs);
    assert_int_equal(size, BAR_SIZE);
    assert_int_equal(count("bar_mem"), 0); /* not ours: not mapped locally */
    c = last("window_map");
    assert_int_equal(c->a, 0);
    assert_int_equal(c->b, 1);
    assert_int_equal(c->c, BAR_ADDR);
    assert_int_equal(c->d, BAR_SIZE);
    int notifies = count("fn_notify");
    sio_write32(bar, 0x20, 0xfeedf00d);
    uint32_t v;
    memcpy(&v, D.bar + 0x20, 4);
    assert_int_equal(v, 0xfeedf00d);
    assert_int_equal(count("fn_notify"), notifies + 1);
    memcpy(D.bar + 0x30, &(uint32_t){ 0xabcd }, 4);
    assert_int_equal(sio_read32(bar, 0x30), 0xabcd);
    int unmaps = count("window_unmap");
    assert_int_equal(sio_unmap_bar(bar), 0);
    assert_int_equal(count("window_unmap"), unmaps + 1);
    assert_int_equal(D.cpu_maps, 0);
    assert_null((void *)sio_map_bar(d, 2, NULL, &bar)); /* no BAR 2 */
    assert_int_equal(errno, EINVAL);

    /* Memory the CPU polls: here, mapped for the device by the agent. */
    volatile void *cpu;
    uint64_t io;
    sio_mem_t *m;
    assert_int_equal(sio_alloc(d, 8192, SIO_HINT_HOST_READ, &cpu, &io, &m), 0);
    assert_int_equal(sio_mem_node(m), 4);
    c = last("agent:dev_map");
    assert_int_equal(c->a, 0);   /* fn */
    assert_int_equal(c->b, 0);   /* target host: this one */
    assert_int_equal(c->d, 2);   /* pages */
    assert_ptr_equal(cpu, D.ram[0] + c->c);
    assert_int_equal(io, IOVA_BASE + 0x10000 * (uint64_t)(D.nmaps - 1));
    /* What the device would read at io is what the CPU wrote. */
    memcpy((void *)cpu, "queue", 6);
    int k = (int)((io - IOVA_BASE) / 0x10000);
    assert_string_equal((char *)resolve(D.maps[k].host, D.maps[k].addr, 6), "queue");
    assert_int_equal(sio_free(m), 0);
    assert_int_equal(last("agent:dev_unmap")->b, (uint64_t)k + 1);

    /* Memory the device reads: at the lender, reached through a window. */
    int wins = count("window_map");
    assert_int_equal(sio_alloc(d, 4096, SIO_HINT_DEVICE_READ, &cpu, &io, &m), 0);
    assert_int_equal(sio_mem_node(m), 8);
    assert_int_equal(last("agent:seg_alloc_at")->a, 1);
    assert_int_equal(count("window_map"), wins + 1);
    c = last("agent:dev_map");
    assert_int_equal(c->b, 1); /* the lender's own memory */
    uint64_t b_phys = c->c;
    memcpy((void *)cpu, "sq entry", 9);
    assert_string_equal((char *)D.ram[1] + b_phys, "sq entry");
    assert_int_equal(sio_free(m), 0);
    assert_int_equal(count("agent:seg_free_at"), 1);
    assert_int_equal(D.cpu_maps, 0);

    assert_int_equal(sio_return(d), 0);
    assert_int_equal(last("agent:dev_return")->a, 0);
    /* sio_find and sio_list start and stop the runtime for themselves; the device held it
     * from borrow to return. */
    assert_int_equal(count("stop"), count("start"));
    assert_string_equal(D.calls[D.ncalls - 1].op, "stop");
    assert_int_equal(count("agent:other"), 0); /* nothing asked of the agent we did not model */
}

/* ---------------------------------------------------------------- the NTB API */

static void test_ntb_api(void **state)
{
    assert_int_equal(ntb_adapter_count(), 1);
    assert_null(ntb_open(1));
    struct ntb_dev *n = ntb_open(0);
    assert_non_null(n);
    assert_string_equal(ntb_name(n), "a.ntb0");
    assert_int_equal(ntb_port_number(n), 4);
    assert_int_equal(ntb_peer_port_count(n), 1);
    assert_int_equal(ntb_peer_port_number(n, 0), 8);
    assert_int_equal(ntb_peer_port_idx(n, 8), 0);
    assert_int_equal(ntb_link_is_up(n, NULL, NULL), 1);
    uint32_t peers[4];
    assert_int_equal(ntb_fabric_peers(8, peers, 4), 1);
    assert_int_equal(peers[0], 4);

    /* Scratchpads: ours and the peer's registers, as the backend keeps them. */
    assert_int_equal(ntb_spad_count(n), 4);
    assert_int_equal(ntb_spad_write(n, 1, 0x1111), 0);
    assert_int_equal(ntb_peer_spad_write(n, 0, 2, 0x2222), 0);
    assert_int_equal(D.spad[0][1], 0x1111);
    assert_int_equal(D.spad[1][2], 0x2222);
    assert_int_equal(ntb_peer_spad_read(n, 0, 2), 0x2222);
    assert_int_equal(ntb_spad_write(n, 4, 0), -EINVAL);

    /* Doorbells: ringing the peer sets its register; ours, masks and events here. */
    assert_int_equal(ntb_db_valid_mask(n), 0xff);
    assert_int_equal(ntb_peer_db_set(n, 0, 0x5), 0);
    assert_int_equal(D.db[1], 0x5);
    assert_int_equal(ntb_peer_db_set(n, 0, 0x100), -EINVAL); /* not a valid bit */
    assert_int_equal(count("peer_db_set"), 1);
    assert_int_equal(ntb_db_set(n, 0x3), 0);
    assert_int_equal(ntb_db_set_mask(n, 0x1), 0);
    assert_int_equal(ntb_db_vector_wait(n, UINT64_MAX, 0), 0x2);
    assert_int_equal(ntb_db_clear(n, 0x2), 0);
    assert_int_equal(ntb_db_read(n), 0x1);

    /* An inbound window is a translation on the peer's adapter toward this host. */
    assert_int_equal(ntb_mw_count(n, 0), 4);
    assert_int_equal(ntb_mw_set_trans(n, 0, 3, 0x20000, 0x10000), 0);
    const struct call *c = last("mw_set");
    assert_int_equal(c->a, 1);
    assert_int_equal(c->b, 3);
    assert_int_equal(c->c, 0);
    assert_int_equal(c->d, 0x20000);
    assert_int_equal(ntb_mw_set_trans(n, 0, 3, 0x20001, 0x10000), -EINVAL); /* unaligned */
    assert_int_equal(ntb_mw_clear_trans(n, 0, 3), 0);
    assert_int_equal(last("mw_clear")->a, 1);
    ntb_close(n);
    assert_int_equal(count("stop"), count("start"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_segments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_smartio, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ntb_api, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
