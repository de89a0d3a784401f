/*
 * Device lending, the lender's side (smartio-tocs-2021 §4): the lender's agent owns its
 * devices' lending state — who borrows what (exclusive or shared), the mappings it prepared so
 * a device can reach memory elsewhere (a LUT entry on the lender's adapter facing the target,
 * the device's requester ID in that adapter's table, lender IOMMU mappings, a borrower's DMA
 * aperture) — and serves the requests about them, by mailbox from borrowers and directly from
 * its own host's processes. A device taken back from an exclusive borrower is reset. What the
 * files of lending share is in lend_int.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lend_int.h"

struct lend_state lending = { .lock = PTHREAD_MUTEX_INITIALIZER,
                               .borrow_lock = PTHREAD_MUTEX_INITIALIZER };

static void set_borrower(uint32_t fn, uint32_t host, bool on)
{
    _Atomic uint64_t *w = &lend_func(fn)->lend_borrowers[host / 64];
    if (on)
        atomic_fetch_or(w, 1ull << (host % 64));
    else
        atomic_fetch_and(w, ~(1ull << (host % 64)));
}

static uint32_t borrower_count(uint32_t fn)
{
    uint32_t n = 0;
    for (int k = 0; k < 4; k++)
        n += (uint32_t)__builtin_popcountll(atomic_load(&lend_func(fn)->lend_borrowers[k]));
    return n;
}

/* ---------------------------------------------------------------- lender */

static void bars_inbound(uint32_t fn, bool map);

/* Undo what lend_map set up for m, which is no longer on lending.lmaps. The device's requester-ID
 * entry on the adapter is shared by all its windows there: it goes with the last. Lock held. */
static void drop_lmap(struct lmap *m)
{
    struct fab *f = agent.f;
    bool shared = false;
    for (const struct lmap *o = lending.lmaps; o && (m->aperture || m->at) && !shared; o = o->next)
        shared = (o->aperture || o->at) && o->win.count && o->win.adapter == m->win.adapter &&
                 o->win.first == m->win.first;
    if (m->win.count) {
        if (!shared)
            fab_window_unmap(f, &m->win, getpid());
        bool last = true;
        for (const struct lmap *o = lending.lmaps; o && last; o = o->next)
            last = !(o->fn == m->fn && o->rid_held && o->win.adapter == m->win.adapter);
        if (last && m->rid_held)
            fab_rid_remove(f, m->win.adapter, lend_func(m->fn)->rid);
    }
    if (m->iommu)
        fab_iommu_unmap(f, agent.host, lend_func(m->fn)->rid, m->ioaddr & ~4095ull, m->size);
}

/* Remove host's borrow of fn and its mappings; reset an exclusively held device once free.
 * Lock held. */
void lend_drop(uint32_t fn, uint32_t host)
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
    if (atomic_load(&lend_func(fn)->lend_manager) == host + 1)
        atomic_store(&lend_func(fn)->lend_manager, 0);
    if (borrower_count(fn) == 0) {
        bars_inbound(fn, false);
        adevseg_idle(fn);
        /* Taken back: whatever the borrowers left in it (queues pointing into their memory)
         * must not reach the next one. */
        bool setup = atomic_exchange(&lend_func(fn)->lend_setup, 0);
        if (atomic_exchange(&lend_func(fn)->lend_exclusive, 0) || setup)
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
    const struct fab_function *x = lend_func(fn);
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
    if (!lend_is_lender(fn))
        return -ENODEV;
    bool bind = mode == AGENT_BORROW_BIND && host == agent.host;
    if (mode != SIO_EXCLUSIVE && mode != SIO_SHARED && !bind)
        return -EINVAL;
    struct fab_function *x = lend_func(fn);
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

/* The adapter a window onto `target` goes through: the one the borrower chose (via - 1, the
 * lender's end of its path: smartio-tocs-2021 §6.3) when it is ours, reaches the target and its
 * path is up; else our first path to the target that is up. */
static int via_or_toward(uint32_t via, uint32_t target)
{
    struct fab *f = agent.f;
    const struct fab_host *self = fab_host(f, agent.host);
    if (via && via - 1 >= self->adapter_first && via - 1 < self->adapter_first + self->nadapters) {
        int peer = fab_peer_on(f, via - 1, target);
        if (peer >= 0 && fab_path_up(f, via - 1, (uint32_t)peer, NULL))
            return (int)(via - 1);
    }
    return fab_adapter_toward(f, agent.host, target, NULL);
}

/* Prepare an I/O address through which fn reaches `addr` on `target` (smartio §4.4: on the
 * lender itself, or through the lender's adapter facing the target). With `at`, that address
 * is `iova`, chosen by the borrower: the lender's IOMMU maps it onto the window (a guest's
 * device, whose I/O addresses are the guest's physical ones: device-lending-kvm-2019 §5).
 * Lock held. */
static int lend_map(uint32_t fn, uint32_t host, uint32_t target, uint64_t addr, uint64_t size,
                    bool aperture, bool at, uint64_t iova, uint32_t via, struct lend_rsp *out)
{
    struct fab *f = agent.f;
    /* A multicast group of the switches (AGENT_MAP_MCAST | group, addr an offset in its
     * window): a window of the adapter on the group's switches whose entries target it. */
    bool mcast = target & AGENT_MAP_MCAST;
    uint32_t group = target & ~AGENT_MAP_MCAST;
    if (!lend_is_lender(fn) || !size || (!mcast && target >= f->ctl->nhosts) ||
        (mcast && aperture))
        return -EINVAL;
    if (!borrows(fn, host))
        return -EPERM;
    struct lmap *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    *m = (struct lmap){ .id = ++lending.next_id, .fn = fn, .host = host, .aperture = aperture,
                        .at = at };
    int rc = 0;
    const struct fab_host *self = fab_host(f, agent.host);
    if (at && (!self->iommu || aperture || (iova & 4095) != (addr & 4095))) {
        free(m);
        return !self->iommu ? -EOPNOTSUPP : -EINVAL; /* no IOMMU: addresses are the window's */
    }
    /* The aperture's window, if another device has it; a VM's RAM (at), if another device
     * of ours maps it for the same borrower through the same adapter: one window per lender
     * for all of a guest's devices (device-lending-kvm-multidevice-2019 §5), each device's
     * own IOMMU domain mapping it. */
    const struct lmap *same = NULL;
    int toward = at && !mcast && target != agent.host ? via_or_toward(via, target) : -1;
    for (const struct lmap *o = lending.lmaps; o && (aperture || at) && !same; o = o->next)
        if (o->aperture == aperture && o->at == at && o->host == host && o->win.count &&
            o->win.peer_host == target && o->win.peer_addr == addr && o->win.len == size &&
            (aperture || (int)o->win.adapter == toward))
            same = o;
    if (target == agent.host && aperture) {
        rc = -EINVAL; /* an aperture is in the borrower's domain */
    } else if (target == agent.host) {
        m->ioaddr = addr;
        out->via = -1;
    } else if (mcast) {
        int ai = fab_mcast_adapter(f, group, agent.host);
        rc = ai < 0 ? ai
                    : fab_window_map(f, (uint32_t)ai, group, addr, size, getpid(), FAB_LUT_MCAST,
                                     &m->win);
        m->ioaddr = m->win.bus; /* writes only: no requester-ID entry (reads fail anyway) */
        out->via = ai;
    } else {
        int ai = same ? (int)same->win.adapter : via_or_toward(via, target);
        /* Held by the agent process itself, so nobody else takes them in between. */
        if (same)
            m->win = same->win;
        else
            rc = ai < 0 ? ai
                        : fab_window_map(f, (uint32_t)ai, target, addr, size, getpid(), 0, &m->win);
        /* Reads come back by requester ID: the device needs an entry (smartio §8). */
        int r = rc ? 0 : fab_rid_add(f, (uint32_t)ai, lend_func(fn)->rid, 0);
        if (r && r != -EEXIST)
            rc = r;
        m->rid_held = !rc;
        m->ioaddr = m->win.bus;
        out->via = ai;
    }
    m->size = ((m->ioaddr & 4095) + size + 4095) & ~4095ull;
    uint64_t phys = m->ioaddr;
    if (at)
        m->ioaddr = iova; /* what drop_lmap unmaps */
    if (!rc && self->iommu) {
        /* The device reaches only what is mapped for it (identity I/O virtual addresses, but
         * where the borrower chose them). */
        rc = fab_iommu_map(f, agent.host, lend_func(fn)->rid, m->ioaddr & ~4095ull, phys & ~4095ull,
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
int lend_call(uint32_t type, uint32_t from, const struct lend_req *r, struct lend_rsp *out)
{
    pthread_mutex_lock(&lending.lock);
    int rc;
    switch (type) {
    case MBOX_DEV_BORROW:
        /* Sent by a previous life of the borrower (it has rebooted since): it acts no more. */
        rc = from != agent.host && lend_host_gone(agent.f, from, r->boot)
                 ? -ESTALE
                 : lend_borrow(r->fn, from, r->boot, r->mode);
        break;
    case MBOX_DEV_SHARE:
        rc = !lend_is_lender(r->fn) ? -ENODEV : !borrows(r->fn, from) ? -EPERM : 0;
        if (!rc && r->mode) {
            if (atomic_exchange(&lend_func(r->fn)->lend_exclusive, 0)) {
                /* The exclusive borrower set it up: it manages it from now on. */
                atomic_store(&lend_func(r->fn)->lend_setup, 1);
                atomic_store(&lend_func(r->fn)->lend_manager_pid, r->pid);
                atomic_store(&lend_func(r->fn)->lend_manager, from + 1);
            }
        } else if (!rc && atomic_load(&lend_func(r->fn)->lend_manager) == from + 1 &&
                   atomic_load(&lend_func(r->fn)->lend_manager_pid) == r->pid) {
            atomic_store(&lend_func(r->fn)->lend_manager, 0);
        }
        break;
    case MBOX_DEV_RETURN:
        rc = !lend_is_lender(r->fn) ? -ENODEV : !borrows(r->fn, from) ? -ENOENT : 0;
        if (!rc)
            lend_drop(r->fn, from);
        break;
    case MBOX_DEV_MAP:
        rc = lend_map(r->fn, from, r->target, r->addr, (uint64_t)r->pages * 4096,
                      r->mode == LEND_MAP_APERTURE, r->mode == LEND_MAP_AT, r->iova, r->via, out);
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
    int rc = lend_call(type, from, &r, &out);
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

void lend_register_lender(void)
{
    mbox_register(MBOX_DEV_BORROW, h_borrow);
    mbox_register(MBOX_DEV_SHARE, h_share);
    mbox_register(MBOX_DEV_RETURN, h_return);
    mbox_register(MBOX_DEV_MAP, h_map);
    mbox_register(MBOX_DEV_UNMAP, h_unmap);
}
