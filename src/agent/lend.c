/*
 * Device lending, the agents' part (smartio-tocs-2021 §4). The lender's agent owns its
 * devices' lending state: who borrows what (exclusive or shared), the mappings it prepared so
 * a device can reach memory elsewhere (a LUT entry on the lender's adapter facing the target,
 * the device's requester ID in that adapter's table, lender IOMMU mappings), and leases: when
 * a borrower's host dies, its mappings go and an exclusively borrowed device is reset and
 * taken back. The borrower's agent relays its processes' requests over the NTB mailboxes and
 * maps the target memory into the target host's IOMMU when that is on.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "agent_proto.h"
#include "ntblend/smartio.h"

struct lend_req {
    uint32_t fn, mode, target, pages; /* MBOX_DEV_MAP: mode 1 = a DMA aperture (dma_map_single) */
    uint64_t addr;
    uint32_t id, boot;
    uint32_t pid;            /* MBOX_DEV_SHARE: the sharing process (mode 0: it stops managing) */
};

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
};

/* Borrower side: a DMA aperture (smartio §4.3 "DMA Window"): a window of the lender's adapter
 * facing us onto an I/O virtual range of our IOMMU domain for traffic from that lender (the
 * requester ID of our adapter facing it), prepared once and shared by every device we borrow
 * from it. Drivers map buffers into that domain themselves (dma_map_single): no request to
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

static struct {
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
} lending = { .lock = PTHREAD_MUTEX_INITIALIZER, .borrow_lock = PTHREAD_MUTEX_INITIALIZER };

/* A PCIe function of the fabric by index. */
static struct fab_function *func(uint32_t fn) { return fab_func(agent.f, fn); }

static void set_borrower(uint32_t fn, uint32_t host, bool on)
{
    _Atomic uint64_t *w = &func(fn)->lend_borrowers[host / 64];
    if (on)
        atomic_fetch_or(w, 1ull << (host % 64));
    else
        atomic_fetch_and(w, ~(1ull << (host % 64)));
}

static uint32_t borrower_count(uint32_t fn)
{
    uint32_t n = 0;
    for (int k = 0; k < 4; k++)
        n += (uint32_t)__builtin_popcountll(atomic_load(&func(fn)->lend_borrowers[k]));
    return n;
}

static bool lender_of(uint32_t fn) { return fn < agent.f->ctl->nfuncs && func(fn)->host == agent.host; }

/* ---------------------------------------------------------------- lender */

static void bars_inbound(uint32_t fn, bool map);

/* Undo what lend_map set up for m, which is no longer on lending.lmaps. The device's requester-ID
 * entry on the adapter is shared by all its windows there: it goes with the last. Lock held. */
static void drop_lmap(struct lmap *m)
{
    struct fab *f = agent.f;
    bool shared = false;
    for (const struct lmap *o = lending.lmaps; o && m->aperture && !shared; o = o->next)
        shared = o->aperture && o->win.count && o->win.adapter == m->win.adapter &&
                 o->win.first == m->win.first;
    if (m->win.count) {
        if (!shared)
            fab_window_unmap(f, &m->win, getpid());
        bool last = true;
        for (const struct lmap *o = lending.lmaps; o && last; o = o->next)
            last = !(o->fn == m->fn && o->rid_held && o->win.adapter == m->win.adapter);
        if (last && m->rid_held)
            fab_rid_remove(f, m->win.adapter, func(m->fn)->rid);
    }
    if (m->iommu)
        fab_iommu_unmap(f, agent.host, func(m->fn)->rid, m->ioaddr & ~4095ull, m->size);
}

/* Remove host's borrow of fn and its mappings; reset an exclusively held device once free.
 * Lock held. */
static void lend_drop(uint32_t fn, uint32_t host)
{
    for (struct lend **pp = &lending.lends; *pp;) {
        struct lend *l = *pp;
        if (l->fn == fn && l->host == host) {
            *pp = l->next;
            free(l);
        } else {
            pp = &l->next;
        }
    }
    for (struct lmap **pp = &lending.lmaps; *pp;) {
        struct lmap *m = *pp;
        if (m->fn == fn && m->host == host) {
            *pp = m->next;
            drop_lmap(m);
            free(m);
        } else {
            pp = &m->next;
        }
    }
    set_borrower(fn, host, false);
    if (atomic_load(&func(fn)->lend_manager) == host + 1)
        atomic_store(&func(fn)->lend_manager, 0);
    if (borrower_count(fn) == 0) {
        bars_inbound(fn, false);
        adevseg_idle(fn);
        /* Taken back: whatever the borrowers left in it (queues pointing into their memory)
         * must not reach the next one. */
        bool setup = atomic_exchange(&func(fn)->lend_setup, 0);
        if (atomic_exchange(&func(fn)->lend_exclusive, 0) || setup)
            fab_fn_reset(agent.f, fn);
    }
}

/* With the lender's IOMMU on, a borrower's loads and stores reach the device's BARs as the
 * lender's NTB functions: their domains must map the BARs while the device is lent out. */
static void bars_inbound(uint32_t fn, bool map)
{
    struct fab *f = agent.f;
    const struct fab_host *self = fab_host(f, agent.host);
    if (!self->iommu)
        return;
    const struct fab_function *x = func(fn);
    for (uint32_t i = 0; i < self->nadapters; i++) {
        uint16_t rid = fab_adapter(f, self->adapter_first + i)->rid;
        for (int b = 0; b < FAB_BARS; b++) {
            if (x->bar[b].kind == FAB_BAR_NONE)
                continue;
            if (map)
                fab_iommu_map(f, agent.host, rid, x->bar[b].addr, x->bar[b].addr, x->bar[b].size,
                              FAB_PERM_READ | FAB_PERM_WRITE, 0);
            else
                fab_iommu_unmap(f, agent.host, rid, x->bar[b].addr, x->bar[b].size);
        }
    }
}

static int lend_borrow(uint32_t fn, uint32_t host, uint32_t boot, uint32_t mode)
{
    if (!lender_of(fn))
        return -ENODEV;
    bool bind = mode == AGENT_BORROW_BIND && host == agent.host;
    if (mode != SIO_EXCLUSIVE && mode != SIO_SHARED && !bind)
        return -EINVAL;
    struct fab_function *x = func(fn);
    if (!bind && !atomic_load(&x->lend_available))
        return -EACCES; /* the lender has not made it available (its own drivers need not) */
    for (struct lend *l = lending.lends; l; l = l->next)
        if (l->fn == fn && l->host == host)
            return -EALREADY;
    if (atomic_load(&x->lend_exclusive) || (mode != SIO_SHARED && borrower_count(fn)))
        return -EBUSY;
    struct lend *l = calloc(1, sizeof *l);
    if (!l)
        return -ENOMEM;
    *l = (struct lend){ .next = lending.lends, .fn = fn, .host = host, .boot = boot };
    lending.lends = l;
    if (borrower_count(fn) == 0)
        bars_inbound(fn, true);
    set_borrower(fn, host, true);
    atomic_store(&x->lend_exclusive, mode != SIO_SHARED);
    return 0;
}

static bool borrows(uint32_t fn, uint32_t host)
{
    for (struct lend *l = lending.lends; l; l = l->next)
        if (l->fn == fn && l->host == host)
            return true;
    return false;
}

/* Prepare an I/O address through which fn reaches `addr` on `target` (smartio §4.4: on the
 * lender itself, or through the lender's adapter facing the target). Lock held. */
static int lend_map(uint32_t fn, uint32_t host, uint32_t target, uint64_t addr, uint64_t size,
                    bool aperture, struct lend_rsp *out)
{
    struct fab *f = agent.f;
    if (!lender_of(fn) || !size || target >= f->ctl->nhosts)
        return -EINVAL;
    if (!borrows(fn, host))
        return -EPERM;
    struct lmap *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    *m = (struct lmap){ .id = ++lending.next_id, .fn = fn, .host = host, .aperture = aperture };
    int rc = 0;
    const struct fab_host *self = fab_host(f, agent.host);
    const struct lmap *same = NULL; /* the aperture's window, if another device has it */
    for (const struct lmap *o = lending.lmaps; o && aperture && !same; o = o->next)
        if (o->aperture && o->host == host && o->win.count && o->win.peer_host == target &&
            o->win.peer_addr == addr && o->win.len == size)
            same = o;
    if (target == agent.host && aperture) {
        rc = -EINVAL; /* an aperture is in the borrower's domain */
    } else if (target == agent.host) {
        m->ioaddr = addr;
        out->via = -1;
    } else {
        int ai = same ? (int)same->win.adapter : fab_adapter_toward(f, agent.host, target, NULL);
        /* Held by the agent process itself, so nobody else takes them in between. */
        if (same)
            m->win = same->win;
        else
            rc = ai < 0 ? ai
                        : fab_window_map(f, (uint32_t)ai, target, addr, size, getpid(), 0, &m->win);
        /* Reads come back by requester ID: the device needs an entry (smartio §8). */
        int r = rc ? 0 : fab_rid_add(f, (uint32_t)ai, func(fn)->rid, 0);
        if (r && r != -EEXIST)
            rc = r;
        m->rid_held = !rc;
        m->ioaddr = m->win.bus;
        out->via = ai;
    }
    m->size = ((m->ioaddr & 4095) + size + 4095) & ~4095ull;
    if (!rc && self->iommu) {
        /* The device reaches only what is mapped for it (identity I/O virtual addresses). */
        rc = fab_iommu_map(f, agent.host, func(fn)->rid, m->ioaddr & ~4095ull, m->ioaddr & ~4095ull,
                           m->size, FAB_PERM_READ | FAB_PERM_WRITE, 0);
        m->iommu = rc == 0;
    }
    if (rc) {
        drop_lmap(m);
        free(m);
        return rc;
    }
    m->next = lending.lmaps;
    lending.lmaps = m;
    out->ioaddr = m->ioaddr;
    out->id = m->id;
    return 0;
}

static int lend_unmap(uint32_t fn, uint32_t host, uint32_t id)
{
    for (struct lmap **pp = &lending.lmaps; *pp; pp = &(*pp)->next) {
        struct lmap *m = *pp;
        if (m->id == id && m->fn == fn && m->host == host) {
            *pp = m->next;
            drop_lmap(m);
            free(m);
            return 0;
        }
    }
    return -ENOENT;
}

/* One dispatcher for requests arriving by mailbox and from this host's own processes. */
static bool host_gone(const struct fab *f, uint32_t host, uint32_t boot);

static int lender_call(uint32_t type, uint32_t from, const struct lend_req *r, struct lend_rsp *out)
{
    pthread_mutex_lock(&lending.lock);
    int rc;
    switch (type) {
    case MBOX_DEV_BORROW:
        /* Sent by a previous life of the borrower (it has rebooted since): it acts no more. */
        rc = from != agent.host && host_gone(agent.f, from, r->boot)
                 ? -ESTALE
                 : lend_borrow(r->fn, from, r->boot, r->mode);
        break;
    case MBOX_DEV_SHARE:
        rc = !lender_of(r->fn) ? -ENODEV : !borrows(r->fn, from) ? -EPERM : 0;
        if (!rc && r->mode) {
            if (atomic_exchange(&func(r->fn)->lend_exclusive, 0)) {
                /* The exclusive borrower set it up: it manages it from now on. */
                atomic_store(&func(r->fn)->lend_setup, 1);
                atomic_store(&func(r->fn)->lend_manager_pid, r->pid);
                atomic_store(&func(r->fn)->lend_manager, from + 1);
            }
        } else if (!rc && atomic_load(&func(r->fn)->lend_manager) == from + 1 &&
                   atomic_load(&func(r->fn)->lend_manager_pid) == r->pid) {
            atomic_store(&func(r->fn)->lend_manager, 0);
        }
        break;
    case MBOX_DEV_RETURN:
        rc = !lender_of(r->fn) ? -ENODEV : !borrows(r->fn, from) ? -ENOENT : 0;
        if (!rc)
            lend_drop(r->fn, from);
        break;
    case MBOX_DEV_MAP:
        rc = lend_map(r->fn, from, r->target, r->addr, (uint64_t)r->pages * 4096, r->mode == 1,
                      out);
        break;
    case MBOX_DEV_UNMAP:
        rc = lend_unmap(r->fn, from, r->id);
        break;
    default:
        rc = -EOPNOTSUPP;
    }
    pthread_mutex_unlock(&lending.lock);
    return rc;
}

static int h_dev(uint32_t type, uint32_t from, const void *req, uint32_t len, void *rsp,
                 uint32_t *rsp_len)
{
    struct lend_req r;
    struct lend_rsp out = { .via = -1 };
    if (len < sizeof r)
        return -EINVAL;
    memcpy(&r, req, sizeof r);
    int rc = lender_call(type, from, &r, &out);
    memcpy(rsp, &out, sizeof out);
    *rsp_len = sizeof out;
    return rc;
}

#define HANDLER(name, type)                                                                  \
    static int name(uint32_t from, const void *req, uint32_t len, void *rsp, \
                    uint32_t *rsp_len)                                                       \
    {                                                                                        \
        return h_dev(type, from, req, len, rsp, rsp_len);                                    \
    }
HANDLER(h_borrow, MBOX_DEV_BORROW)
HANDLER(h_share, MBOX_DEV_SHARE)
HANDLER(h_return, MBOX_DEV_RETURN)
HANDLER(h_map, MBOX_DEV_MAP)
HANDLER(h_unmap, MBOX_DEV_UNMAP)

/* Is rid one of our own adapters' (the requester traffic through an NTB arrives as)? */
static bool own_adapter_rid(uint32_t rid)
{
    const struct fab_host *self = fab_host(agent.f, agent.host);
    for (uint32_t i = 0; i < self->nadapters; i++)
        if (fab_adapter(agent.f, self->adapter_first + i)->rid == rid)
            return true;
    return false;
}

static bool same_inbound(const struct inbound *i, uint32_t rid, uint64_t addr, uint64_t size)
{
    return i->rid == rid && i->addr == addr && i->size == size;
}

/* Remove one record and, when no host needs that mapping any more, the mapping. Lock held. */
static void inbound_put(struct inbound **pp)
{
    struct inbound *i = *pp;
    if (--i->count)
        return;
    *pp = i->next;
    bool shared = false;
    for (const struct inbound *o = lending.inbounds; o && !shared; o = o->next)
        shared = same_inbound(o, i->rid, i->addr, i->size);
    if (!shared)
        fab_iommu_unmap(agent.f, agent.host, (uint16_t)i->rid, i->addr, i->size);
    free(i);
}

/* A peer's request to open (or close) our IOMMU for traffic entering through one of our
 * adapters. Only our adapters' requester IDs and only our RAM: a peer cannot open the IOMMU
 * for anything else, and what it opened goes with it (dev_inbound_host_gone). */
static int h_inbound(uint32_t from, const void *req, uint32_t len, void *rsp,
                     uint32_t *rsp_len, bool map)
{
    (void)rsp;
    (void)rsp_len;
    struct inbound_req r;
    if (len < sizeof r)
        return -EINVAL;
    memcpy(&r, req, sizeof r);
    if (!r.size || (r.addr | r.size) & 4095 ||
        !fab_host_ram_range(agent.f, agent.host, r.addr, r.size) || !own_adapter_rid(r.rid))
        return -EINVAL;
    int rc = 0;
    pthread_mutex_lock(&lending.lock);
    struct inbound **pp = &lending.inbounds, *mine = NULL;
    bool mapped = false;
    for (; *pp; pp = &(*pp)->next) {
        if (!same_inbound(*pp, r.rid, r.addr, r.size))
            continue;
        mapped = true;
        if ((*pp)->host == from) {
            mine = *pp;
            break;
        }
    }
    if (!map) {
        if (mine)
            inbound_put(pp);
        else
            rc = -ENOENT;
        goto out;
    }
    if (mine) {
        mine->count++;
        goto out;
    }
    if (!mapped) {
        rc = fab_iommu_map(agent.f, agent.host, (uint16_t)r.rid, r.addr, r.addr, r.size,
                           FAB_PERM_READ | FAB_PERM_WRITE, 0);
        if (rc) /* -EEXIST: overlaps a different mapping of that requester; refuse */
            goto out;
    }
    mine = calloc(1, sizeof *mine);
    if (!mine) {
        if (!mapped)
            fab_iommu_unmap(agent.f, agent.host, (uint16_t)r.rid, r.addr, r.size);
        rc = -ENOMEM;
        goto out;
    }
    *mine = (struct inbound){ .next = lending.inbounds, .host = from, .count = 1, .rid = r.rid,
                              .addr = r.addr, .size = r.size,
                              .boot = atomic_load(&fab_host(agent.f, from)->boot_gen) };
    lending.inbounds = mine;
out:
    pthread_mutex_unlock(&lending.lock);
    return rc;
}

static int h_inbound_map(uint32_t from, const void *req, uint32_t len,
                         void *rsp, uint32_t *rsp_len)
{
    return h_inbound(from, req, len, rsp, rsp_len, true);
}

static int h_inbound_unmap(uint32_t from, const void *req, uint32_t len,
                           void *rsp, uint32_t *rsp_len)
{
    return h_inbound(from, req, len, rsp, rsp_len, false);
}

/* ---------------------------------------------------------------- borrower */

/* Send a lending request to fn's lender (or handle it here when we are the lender). */
static int to_lender(uint32_t type, const struct lend_req *r, struct lend_rsp *out)
{
    if (r->fn >= agent.f->ctl->nfuncs)
        return -ENODEV;
    uint32_t lender = func(r->fn)->host;
    *out = (struct lend_rsp){ .via = -1 };
    if (lender == agent.host)
        return lender_call(type, agent.host, r, out);
    uint32_t got = 0;
    int rc = mbox_call(lender, type, r, sizeof *r, out, sizeof *out, &got, 1000);
    if (rc == -ENOLINK || rc == -ETIMEDOUT || rc == -ENOTCONN)
        rc = -EHOSTUNREACH;
    return rc;
}

int alend_available(int32_t client, uint32_t fn, bool on)
{
    if (!lender_of(fn))
        return fn < agent.f->ctl->nfuncs ? -EREMOTE : -ENODEV; /* ask the lender's host */
    atomic_store(&func(fn)->lend_available, on);
    return 0;
}

/* A driver process binds a function its host holds for its PCIe tree (hot-added, or held with
 * `ntblend device borrow`): it drives it under the host's borrow, alone. */
static int bind_shadow(int32_t who, uint32_t fn)
{
    pthread_mutex_lock(&lending.borrow_lock);
    pthread_mutex_lock(&lending.lock);
    bool host = false, bound = false;
    for (struct hold *x = lending.holds; x; x = x->next)
        if (x->fn == fn) {
            host |= x->client == 0;
            bound |= x->mode == AGENT_BORROW_BIND;
        }
    int rc = !host ? -ENOENT : bound ? -EBUSY : 0;
    struct hold *h = rc ? NULL : calloc(1, sizeof *h);
    if (!rc && !h)
        rc = -ENOMEM;
    if (h) {
        *h = (struct hold){ .next = lending.holds, .client = who, .fn = fn,
                            .mode = AGENT_BORROW_BIND };
        lending.holds = h;
    }
    pthread_mutex_unlock(&lending.lock);
    pthread_mutex_unlock(&lending.borrow_lock);
    return rc;
}

void alend_unbind(uint32_t fn)
{
    for (;;) {
        int32_t who = -1;
        pthread_mutex_lock(&lending.lock);
        for (struct hold *x = lending.holds; x; x = x->next)
            if (x->fn == fn && x->mode == AGENT_BORROW_BIND)
                who = x->client;
        pthread_mutex_unlock(&lending.lock);
        if (who < 0 || alend_return(who, fn))
            return;
    }
}

/*
 * The lender knows hosts, not processes: the first process of this host to borrow a device
 * borrows it from the lender; more processes of this host may share a device the host
 * borrows shared (each NVMe client process with its own queues), and the host returns it when
 * the last of them does.
 */
int alend_borrow(int32_t client, uint32_t fn, uint32_t mode, bool persist)
{
    int32_t who = persist ? 0 : client;
    if (mode == AGENT_BORROW_BIND) {
        if (fn >= agent.f->ctl->nfuncs)
            return -ENODEV;
        if (func(fn)->host != agent.host)
            return bind_shadow(who, fn);
        /* Our own function: the driver holds it alone, lent out or not. */
    }
    pthread_mutex_lock(&lending.borrow_lock);
    pthread_mutex_lock(&lending.lock);
    bool mine = false, exclusive = false, any = false;
    for (struct hold *x = lending.holds; x; x = x->next)
        if (x->fn == fn) {
            any = true;
            mine |= x->client == who;
            exclusive |= x->mode != SIO_SHARED;
        }
    pthread_mutex_unlock(&lending.lock);
    int rc = 0;
    if (mine)
        rc = -EALREADY;
    else if (any && (exclusive || mode != SIO_SHARED))
        rc = -EBUSY; /* another process of this host holds it in a way that excludes us */
    else if (!any) {
        struct lend_req r = { .fn = fn, .mode = mode, .boot = atomic_load(&fab_host(agent.f, agent.host)->boot_gen) };
        struct lend_rsp out;
        rc = to_lender(MBOX_DEV_BORROW, &r, &out);
    }
    struct hold *h = rc ? NULL : calloc(1, sizeof *h);
    if (!rc && !h) {
        if (!any) {
            struct lend_req r = { .fn = fn };
            struct lend_rsp out;
            to_lender(MBOX_DEV_RETURN, &r, &out);
        }
        rc = -ENOMEM;
    }
    if (h) {
        pthread_mutex_lock(&lending.lock);
        *h = (struct hold){ .next = lending.holds, .client = who, .fn = fn, .mode = mode };
        lending.holds = h;
        pthread_mutex_unlock(&lending.lock);
    }
    pthread_mutex_unlock(&lending.borrow_lock);
    return rc;
}

static struct hold *find_hold(int32_t client, uint32_t fn, bool any_client)
{
    for (struct hold *h = lending.holds; h; h = h->next)
        if (h->fn == fn && (h->client == client || any_client))
            return h;
    return NULL;
}

int alend_share(int32_t client, uint32_t fn)
{
    pthread_mutex_lock(&lending.lock);
    struct hold *h = find_hold(client, fn, false);
    if (!h)
        h = find_hold(client, fn, true);
    pthread_mutex_unlock(&lending.lock);
    if (!h)
        return -ENOENT;
    bool was_exclusive = h->mode == SIO_EXCLUSIVE;
    struct lend_req r = { .fn = fn, .mode = 1, .pid = (uint32_t)h->client };
    struct lend_rsp out;
    int rc = to_lender(MBOX_DEV_SHARE, &r, &out);
    if (!rc) {
        pthread_mutex_lock(&lending.lock);
        for (struct hold *x = lending.holds; x; x = x->next)
            if (x->fn == fn) {
                x->mode = SIO_SHARED;
                x->manager |= x == h && was_exclusive;
            }
        pthread_mutex_unlock(&lending.lock);
    }
    return rc;
}

int alend_unmap(int32_t client, uint32_t fn, uint32_t id)
{
    struct bmap *found = NULL;
    pthread_mutex_lock(&lending.lock);
    for (struct bmap **pp = &lending.bmaps; *pp; pp = &(*pp)->next)
        if ((*pp)->id == id && (*pp)->fn == fn && ((*pp)->client == client || !client)) {
            found = *pp;
            *pp = found->next;
            break;
        }
    pthread_mutex_unlock(&lending.lock);
    if (!found)
        return -ENOENT;
    struct lend_req r = { .fn = fn, .id = id };
    struct lend_rsp out;
    int rc = to_lender(MBOX_DEV_UNMAP, &r, &out);
    if (found->rid) {
        struct inbound_req q = { .addr = found->addr, .size = found->size, .rid = found->rid };
        if (found->target == agent.host)
            fab_iommu_unmap(agent.f, agent.host, (uint16_t)q.rid, q.addr, q.size);
        else
            mbox_call(found->target, MBOX_INBOUND_UNMAP, &q, sizeof q, NULL, 0, NULL, 1000);
    }
    free(found);
    return rc == -ENOENT ? 0 : rc;
}


/* ---------------------------------------------------------------- DMA apertures (borrower) */

static struct aperture *aperture_of(uint32_t lender)
{
    for (struct aperture *a = lending.apertures; a; a = a->next)
        if (a->lender == lender)
            return a;
    return NULL;
}

/* client's device fn no longer reaches the aperture; the client's slice goes with its last
 * device there, the aperture with the last device of any. borrow_lock held. */
static void aperture_put(int32_t client, uint32_t fn)
{
    pthread_mutex_lock(&lending.lock);
    struct ahold *h = NULL;
    for (struct ahold **pp = &lending.aholds; *pp; pp = &(*pp)->next)
        if ((*pp)->client == client && (*pp)->fn == fn) {
            h = *pp;
            *pp = h->next;
            break;
        }
    pthread_mutex_unlock(&lending.lock);
    if (!h)
        return;
    uint32_t lender = func(fn)->host;
    struct lend_req r = { .fn = fn, .id = h->id };
    struct lend_rsp out;
    to_lender(MBOX_DEV_UNMAP, &r, &out); /* the window goes with the lender's last device */
    free(h);
    pthread_mutex_lock(&lending.lock);
    bool client_left = false, any_left = false;
    for (const struct ahold *o = lending.aholds; o; o = o->next)
        if (func(o->fn)->host == lender) {
            any_left = true;
            client_left |= o->client == client;
        }
    struct aperture *a = aperture_of(lender);
    for (int k = 0; a && !client_left && k < APERTURE_SLICES; k++)
        if (a->slice[k] == client)
            a->slice[k] = 0; /* its IOMMU mappings there are gone: unmapped, or reaped */
    if (a && !any_left)
        for (struct aperture **pp = &lending.apertures; *pp; pp = &(*pp)->next)
            if (*pp == a) {
                *pp = a->next;
                free(a);
                break;
            }
    pthread_mutex_unlock(&lending.lock);
}

int alend_aperture(int32_t client, uint32_t fn, bool take, uint64_t *io, uint64_t *iova,
                   uint64_t *size)
{
    struct fab *f = agent.f;
    if (fn >= f->ctl->nfuncs)
        return -ENODEV;
    uint32_t lender = func(fn)->host;
    if (lender == agent.host)
        return -EINVAL; /* a function of our own reaches our domain directly */
    if (!fab_host(f, agent.host)->iommu)
        return -EOPNOTSUPP; /* no domain to map into: the lender maps each buffer */
    int lai = fab_adapter_toward(f, lender, agent.host, NULL);
    if (lai < 0)
        return lai;
    pthread_mutex_lock(&lending.borrow_lock);
    if (!take) {
        aperture_put(client, fn);
        pthread_mutex_unlock(&lending.borrow_lock);
        return 0;
    }
    pthread_mutex_lock(&lending.lock);
    int rc = find_hold(client, fn, false) ? 0 : -EPERM; /* bind it first */
    bool have = false;
    for (const struct ahold *o = lending.aholds; o && !rc && !have; o = o->next)
        have = o->client == client && o->fn == fn;
    struct aperture *a = rc ? NULL : aperture_of(lender);
    bool fresh = !rc && !a;
    if (fresh) {
        uint64_t lut = fab_adapter(f, (uint32_t)lai)->lut_size;
        a = calloc(1, sizeof *a);
        if (!a)
            rc = -ENOMEM;
        else
            *a = (struct aperture){ .lender = lender,
                                    .iova = APERTURE_IOVA + (uint64_t)lender * APERTURE_STRIDE,
                                    .size = (APERTURE_BYTES + lut - 1) / lut * lut };
    }
    int k = -1;
    for (int i = 0; !rc && i < APERTURE_SLICES && k < 0; i++)
        if (a->slice[i] == client)
            k = i;
    for (int i = 0; !rc && i < APERTURE_SLICES && k < 0; i++)
        if (!a->slice[i])
            k = i;
    if (!rc && k < 0)
        rc = -ENOSPC; /* as many processes as slices drive devices of that lender already */
    struct aperture snap = a ? *a : (struct aperture){ 0 };
    pthread_mutex_unlock(&lending.lock);
    struct ahold *h = NULL;
    if (!rc && !have) {
        /* The lender lets fn through onto the range: its window (the first device's, shared
         * by the rest), fn's requester ID in that adapter's table, its own IOMMU told. */
        struct lend_req r = { .fn = fn, .mode = 1, .target = agent.host, .addr = snap.iova,
                              .pages = (uint32_t)(snap.size / 4096) };
        struct lend_rsp out;
        h = calloc(1, sizeof *h);
        rc = h ? to_lender(MBOX_DEV_MAP, &r, &out) : -ENOMEM;
        if (!rc && !fresh && out.ioaddr != snap.io) {
            r.id = out.id;
            to_lender(MBOX_DEV_UNMAP, &r, &out);
            rc = -EBUSY; /* a stale aperture: its devices are being removed */
        }
        if (!rc) {
            *h = (struct ahold){ .client = client, .fn = fn, .id = out.id };
            snap.io = out.ioaddr;
        }
    }
    if (rc) {
        free(h);
        if (fresh)
            free(a);
        pthread_mutex_unlock(&lending.borrow_lock);
        return rc;
    }
    pthread_mutex_lock(&lending.lock);
    if (fresh) {
        a->io = snap.io;
        a->next = lending.apertures;
        lending.apertures = a;
    }
    a->slice[k] = client;
    if (h) {
        h->next = lending.aholds;
        lending.aholds = h;
    }
    pthread_mutex_unlock(&lending.lock);
    pthread_mutex_unlock(&lending.borrow_lock);
    uint64_t slice = snap.size / APERTURE_SLICES & ~4095ull;
    *io = snap.io + (uint64_t)k * slice;
    *iova = snap.iova + (uint64_t)k * slice;
    *size = slice;
    return 0;
}

int alend_return(int32_t client, uint32_t fn)
{
    pthread_mutex_lock(&lending.borrow_lock);
    aperture_put(client, fn);
    pthread_mutex_lock(&lending.lock);
    struct hold *h = find_hold(client, fn, false);
    if (!h && client == 0)
        h = find_hold(client, fn, true);
    if (h) {
        for (struct hold **pp = &lending.holds; *pp; pp = &(*pp)->next)
            if (*pp == h) {
                *pp = h->next;
                break;
            }
    }
    bool last = h && !find_hold(0, fn, true);
    pthread_mutex_unlock(&lending.lock);
    if (!h) {
        pthread_mutex_unlock(&lending.borrow_lock);
        return -ENOENT;
    }
    int32_t who = h->client;
    bool manager = h->manager;
    free(h);
    for (;;) { /* the mappings go with the borrow: this process's, and all with the last */
        uint32_t id = 0;
        pthread_mutex_lock(&lending.lock);
        for (struct bmap *m = lending.bmaps; m; m = m->next)
            if (m->fn == fn && (last || m->client == who))
                id = m->id;
        pthread_mutex_unlock(&lending.lock);
        if (!id || alend_unmap(0, fn, id))
            break;
    }
    int rc = 0;
    struct lend_rsp out;
    if (last) {
        struct lend_req r = { .fn = fn };
        rc = to_lender(MBOX_DEV_RETURN, &r, &out);
    } else if (manager) { /* others of this host still use it: it just has no manager now */
        struct lend_req r = { .fn = fn, .mode = 0, .pid = (uint32_t)who };
        to_lender(MBOX_DEV_SHARE, &r, &out);
    }
    pthread_mutex_unlock(&lending.borrow_lock);
    return rc;
}

int alend_map(int32_t client, uint32_t fn, uint32_t target, uint64_t addr, uint64_t size,
            uint64_t *ioaddr, uint64_t *id)
{
    struct fab *f = agent.f;
    if (!size || size > (1ull << 44) || target >= f->ctl->nhosts)
        return -EINVAL;
    pthread_mutex_lock(&lending.lock);
    bool held = find_hold(client, fn, true);
    pthread_mutex_unlock(&lending.lock);
    if (!held)
        return -EPERM; /* borrow it first */
    uint64_t first = addr & ~4095ull, pages = (addr - first + size + 4095) / 4096;
    struct lend_req r = { .fn = fn, .target = target, .addr = addr, .pages = (uint32_t)pages };
    struct lend_rsp out;
    int rc = to_lender(MBOX_DEV_MAP, &r, &out);
    if (rc)
        return rc;
    struct bmap *m = calloc(1, sizeof *m);
    if (!m) {
        r.id = out.id;
        to_lender(MBOX_DEV_UNMAP, &r, &out);
        return -ENOMEM;
    }
    *m = (struct bmap){ .client = client, .fn = fn, .id = out.id, .lender = func(fn)->host,
                        .target = target, .addr = first, .size = pages * 4096 };
    /* The device's traffic enters the target through the target's adapter facing the
     * lender's: with the target's IOMMU on, that adapter's domain must map the memory. */
    if (out.via >= 0 && fab_host(f, target)->iommu) {
        int peer = fab_peer_on(f, (uint32_t)out.via, target);
        if (peer >= 0)
            m->rid = fab_adapter(f, (uint32_t)peer)->rid;
        struct inbound_req q = { .addr = m->addr, .size = m->size, .rid = m->rid };
        if (target == agent.host)
            rc = fab_iommu_map(f, target, (uint16_t)q.rid, q.addr, q.addr, q.size,
                               FAB_PERM_READ | FAB_PERM_WRITE, 0);
        else
            rc = mbox_call(target, MBOX_INBOUND_MAP, &q, sizeof q, NULL, 0, NULL, 1000);
        if (rc == -EEXIST)
            rc = 0;
        if (rc) {
            r.id = out.id;
            to_lender(MBOX_DEV_UNMAP, &r, &out);
            free(m);
            return rc;
        }
    }
    pthread_mutex_lock(&lending.lock);
    m->next = lending.bmaps;
    lending.bmaps = m;
    pthread_mutex_unlock(&lending.lock);
    *ioaddr = out.ioaddr;
    *id = m->id;
    return 0;
}

void alend_client_gone(int32_t client)
{
    for (;;) {
        uint32_t fn = UINT32_MAX;
        pthread_mutex_lock(&lending.lock);
        for (const struct ahold *h = lending.aholds; h; h = h->next)
            if (h->client == client)
                fn = h->fn;
        pthread_mutex_unlock(&lending.lock);
        if (fn == UINT32_MAX)
            break;
        pthread_mutex_lock(&lending.borrow_lock);
        aperture_put(client, fn);
        pthread_mutex_unlock(&lending.borrow_lock);
    }
    for (;;) {
        uint32_t fn = UINT32_MAX, id = 0;
        pthread_mutex_lock(&lending.lock);
        for (struct bmap *m = lending.bmaps; m; m = m->next)
            if (m->client == client) {
                fn = m->fn;
                id = m->id;
            }
        pthread_mutex_unlock(&lending.lock);
        if (fn == UINT32_MAX || alend_unmap(client, fn, id))
            break;
    }
    for (;;) {
        pthread_mutex_lock(&lending.lock);
        struct hold *h = NULL;
        for (struct hold *x = lending.holds; x; x = x->next)
            if (x->client == client)
                h = x;
        uint32_t fn = h ? h->fn : 0;
        pthread_mutex_unlock(&lending.lock);
        if (!h || alend_return(client, fn))
            break;
    }
}

/* The lender of fn is gone (crashed, or rebooted): the host's own borrow of fn (client 0: a
 * hot-add, `ntblend device borrow`) and the driver bindings under it end here, without a word
 * to the lender, whose next life knows nothing of them; the IOMMU mappings made on a target
 * for their DMA go. */
void alend_forget(uint32_t fn)
{
    pthread_mutex_lock(&lending.borrow_lock);
    pthread_mutex_lock(&lending.lock);
    struct hold *dropped = NULL;
    for (struct hold **pp = &lending.holds; *pp;) {
        struct hold *h = *pp;
        if (h->fn == fn && (h->client == 0 || h->mode == AGENT_BORROW_BIND)) {
            *pp = h->next;
            h->next = dropped;
            dropped = h;
        } else {
            pp = &h->next;
        }
    }
    struct bmap *gone = NULL;
    for (struct bmap **pp = &lending.bmaps; *pp;) {
        struct bmap *m = *pp;
        if (m->fn == fn && !find_hold(m->client, fn, false)) {
            *pp = m->next;
            m->next = gone;
            gone = m;
        } else {
            pp = &m->next;
        }
    }
    pthread_mutex_unlock(&lending.lock);
    while (dropped) { /* their hold on our DMA aperture for that lender goes too */
        struct hold *h = dropped;
        dropped = h->next;
        aperture_put(h->client, fn);
        free(h);
    }
    while (gone) {
        struct bmap *m = gone;
        gone = m->next;
        if (m->rid) {
            struct inbound_req q = { .addr = m->addr, .size = m->size, .rid = m->rid };
            if (m->target == agent.host)
                fab_iommu_unmap(agent.f, agent.host, (uint16_t)q.rid, q.addr, q.size);
            else
                mbox_call(m->target, MBOX_INBOUND_UNMAP, &q, sizeof q, NULL, 0, NULL, 1000);
        }
        free(m);
    }
    pthread_mutex_unlock(&lending.borrow_lock);
}

/* ---------------------------------------------------------------- leases */

/* Is a host that had boot generation `boot` when it asked us for something gone since? */
static bool host_gone(const struct fab *f, uint32_t host, uint32_t boot)
{
    const struct fab_host *h = fab_host(f, host);
    return atomic_load(&h->state) == FAB_HOST_DOWN || atomic_load(&h->boot_gen) != boot;
}

/* What the lease sweep last saw of each host: its boot generation and whether it was down. */
static uint32_t *lease_boot;
static bool *lease_dead;

/* A host died or rebooted: its borrows end (smartio: the lender resets and reclaims the
 * device), the IOMMU mappings it asked us for go, and so do the segments we created for it. */
void alend_sweep(void)
{
    struct fab *f = agent.f;
    uint32_t nhosts = f->ctl->nhosts;
    pthread_mutex_lock(&lending.lock);
    for (struct lend *l = lending.lends, *next; l; l = next) {
        next = l->next;
        if (l->host != agent.host && host_gone(f, l->host, l->boot))
            lend_drop(l->fn, l->host);
    }
    for (struct inbound **pp = &lending.inbounds; *pp;) {
        if (host_gone(f, (*pp)->host, (*pp)->boot)) {
            (*pp)->count = 1;
            inbound_put(pp); /* unlinks it */
        } else {
            pp = &(*pp)->next;
        }
    }
    pthread_mutex_unlock(&lending.lock);
    /* Memory placed here for a gone host goes too (outside the lock: it notifies). */
    for (uint32_t h = 0; h < nhosts; h++) {
        if (h == agent.host)
            continue;
        const struct fab_host *hs = fab_host(f, h);
        uint32_t gen = atomic_load(&hs->boot_gen);
        bool down = atomic_load(&hs->state) == FAB_HOST_DOWN;
        if ((down && !lease_dead[h]) || (!down && !lease_dead[h] && gen != lease_boot[h])) {
            aplace_host_gone(h); /* once per life */
            ahot_host_gone(h);
        }
        lease_dead[h] = down;
        if (!down)
            lease_boot[h] = gen;
    }
}

/* Runs the sweep when reachability of our first port changes, and every second in any case
 * (a host behind another port, a reboot quicker than a link event). */
static void *lease_watcher(void *arg)
{
    static struct wpol_site site = WPOL_SITE("agent lease watcher", 0, 0); /* sleeps only */
    (void)arg;
    const struct fab_host *self = fab_host(agent.f, agent.host);
    if (!self->nadapters)
        return NULL;
    _Atomic uint32_t *seq = &fab_adapter(agent.f, self->adapter_first)->link_seq;
    while (!atomic_load(&agent.stop)) {
        uint32_t now = atomic_load(seq);
        alend_sweep();
        agent_wait_word(&site, seq, now, 1000000000ull);
    }
    return NULL;
}

int alend_register(void)
{
    struct fab *f = agent.f;
    uint32_t nhosts = f->ctl->nhosts;
    lease_boot = calloc(nhosts, sizeof *lease_boot);
    lease_dead = calloc(nhosts, sizeof *lease_dead);
    if (!lease_boot || !lease_dead)
        return -ENOMEM;
    for (uint32_t h = 0; h < nhosts; h++) {
        lease_boot[h] = atomic_load(&fab_host(f, h)->boot_gen);
        lease_dead[h] = atomic_load(&fab_host(f, h)->state) == FAB_HOST_DOWN;
    }
    mbox_register(MBOX_DEV_BORROW, h_borrow);
    mbox_register(MBOX_DEV_SHARE, h_share);
    mbox_register(MBOX_DEV_RETURN, h_return);
    mbox_register(MBOX_DEV_MAP, h_map);
    mbox_register(MBOX_DEV_UNMAP, h_unmap);
    mbox_register(MBOX_INBOUND_MAP, h_inbound_map);
    mbox_register(MBOX_INBOUND_UNMAP, h_inbound_unmap);
    return 0;
}

int alend_start(void)
{
    int rc = alend_register();
    return rc ? rc : -pthread_create(&lending.watcher, NULL, lease_watcher, NULL);
}

void alend_stop(void)
{
    const struct fab_host *self = fab_host(agent.f, agent.host);
    if (self->nadapters) {
        _Atomic uint32_t *seq = &fab_adapter(agent.f, self->adapter_first)->link_seq;
        atomic_fetch_add(seq, 1);
        fab_futex_wake(seq, 64);
    }
    pthread_join(lending.watcher, NULL);
}
