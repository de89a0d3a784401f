/*
 * Device lending, the borrower's side: what this host's processes hold (borrows, driver
 * bindings of functions in the host's tree, the host's own holds from the CLI) and the
 * mappings made for their devices, relayed to each device's lender over the NTB mailboxes,
 * with the target host's IOMMU told when a device's traffic must reach memory there. What a
 * process held goes when it hangs up; what was held under a lender that died is forgotten.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lend_int.h"

/* Send a lending request to fn's lender (or handle it here when we are the lender). */
int lend_to_lender(uint32_t type, const struct lend_req *r, struct lend_rsp *out)
{
    if (r->fn >= agent.f->ctl->nfuncs)
        return -ENODEV;
    uint32_t lender = lend_func(r->fn)->host;
    *out = (struct lend_rsp){ .via = -1 };
    if (lender == agent.host)
        return lend_call(type, agent.host, r, out);
    uint32_t got = 0;
    int rc = mbox_call(lender, type, r, sizeof *r, out, sizeof *out, &got, 1000);
    if (rc == -ENOLINK || rc == -ETIMEDOUT || rc == -ENOTCONN)
        rc = -EHOSTUNREACH;
    return rc;
}

int alend_available(int32_t client, uint32_t fn, bool on)
{
    if (!lend_is_lender(fn))
        return fn < agent.f->ctl->nfuncs ? -EREMOTE : -ENODEV; /* ask the lender's host */
    atomic_store(&lend_func(fn)->lend_available, on);
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
        if (lend_func(fn)->host != agent.host)
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
        rc = lend_to_lender(MBOX_DEV_BORROW, &r, &out);
    }
    struct hold *h = rc ? NULL : calloc(1, sizeof *h);
    if (!rc && !h) {
        if (!any) {
            struct lend_req r = { .fn = fn };
            struct lend_rsp out;
            lend_to_lender(MBOX_DEV_RETURN, &r, &out);
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

struct hold *lend_find_hold(int32_t client, uint32_t fn, bool any_client)
{
    for (struct hold *h = lending.holds; h; h = h->next)
        if (h->fn == fn && (h->client == client || any_client))
            return h;
    return NULL;
}

bool alend_held(uint32_t fn)
{
    pthread_mutex_lock(&lending.lock);
    bool held = lend_find_hold(0, fn, true) != NULL;
    pthread_mutex_unlock(&lending.lock);
    return held;
}

int alend_share(int32_t client, uint32_t fn)
{
    pthread_mutex_lock(&lending.lock);
    struct hold *h = lend_find_hold(client, fn, false);
    if (!h)
        h = lend_find_hold(client, fn, true);
    pthread_mutex_unlock(&lending.lock);
    if (!h)
        return -ENOENT;
    bool was_exclusive = h->mode == SIO_EXCLUSIVE;
    struct lend_req r = { .fn = fn, .mode = 1, .pid = (uint32_t)h->client };
    struct lend_rsp out;
    int rc = lend_to_lender(MBOX_DEV_SHARE, &r, &out);
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

/* The IOMMU mapping made on m's target for its device's traffic goes (if one was made). */
static void inbound_unmap(const struct bmap *m)
{
    if (!m->rid)
        return;
    struct inbound_req q = { .addr = m->addr, .size = m->size, .rid = m->rid };
    if (m->target == agent.host) /* counted: another device's mapping of it may stay */
        lend_inbound(agent.host, &q, false);
    else
        mbox_call(m->target, MBOX_INBOUND_UNMAP, &q, sizeof q, NULL, 0, NULL, 1000);
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
    int rc = lend_to_lender(MBOX_DEV_UNMAP, &r, &out);
    inbound_unmap(found);
    free(found);
    return rc == -ENOENT ? 0 : rc;
}

int alend_return(int32_t client, uint32_t fn)
{
    pthread_mutex_lock(&lending.borrow_lock);
    lend_aperture_put(client, fn);
    pthread_mutex_lock(&lending.lock);
    struct hold *h = lend_find_hold(client, fn, false);
    if (!h && client == 0)
        h = lend_find_hold(client, fn, true);
    if (h) {
        for (struct hold **pp = &lending.holds; *pp; pp = &(*pp)->next)
            if (*pp == h) {
                *pp = h->next;
                break;
            }
    }
    bool last = h && !lend_find_hold(0, fn, true);
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
        rc = lend_to_lender(MBOX_DEV_RETURN, &r, &out);
    } else if (manager) { /* others of this host still use it: it just has no manager now */
        struct lend_req r = { .fn = fn, .mode = 0, .pid = (uint32_t)who };
        lend_to_lender(MBOX_DEV_SHARE, &r, &out);
    }
    pthread_mutex_unlock(&lending.borrow_lock);
    return rc;
}

static int map_for(int32_t client, uint32_t fn, uint32_t target, uint64_t addr, uint64_t size,
                   bool at, uint64_t iova, int via, uint64_t *ioaddr, uint64_t *id)
{
    struct fab *f = agent.f;
    /* A multicast group (AGENT_MAP_MCAST | group): the lender checks it. */
    bool mcast = target & AGENT_MAP_MCAST;
    if (!size || size > (1ull << 44) || (!mcast && target >= f->ctl->nhosts))
        return -EINVAL;
    pthread_mutex_lock(&lending.lock);
    bool held = lend_find_hold(client, fn, true);
    pthread_mutex_unlock(&lending.lock);
    if (!held)
        return -EPERM; /* borrow it first */
    uint64_t first = addr & ~4095ull, pages = (addr - first + size + 4095) / 4096;
    struct lend_req r = { .fn = fn, .target = target, .addr = addr, .pages = (uint32_t)pages,
                          .mode = at ? LEND_MAP_AT : 0, .iova = iova,
                          .via = via >= 0 ? (uint32_t)via + 1 : 0 };
    struct lend_rsp out;
    int rc = lend_to_lender(MBOX_DEV_MAP, &r, &out);
    if (rc)
        return rc;
    struct bmap *m = calloc(1, sizeof *m);
    if (!m) {
        r.id = out.id;
        lend_to_lender(MBOX_DEV_UNMAP, &r, &out);
        return -ENOMEM;
    }
    *m = (struct bmap){ .client = client, .fn = fn, .id = out.id, .lender = lend_func(fn)->host,
                        .target = target, .addr = first, .size = pages * 4096 };
    /* The device's traffic enters the target through the target's adapter facing the
     * lender's: with the target's IOMMU on, that adapter's domain must map the memory. A
     * BAR of another host (peer to peer) is its lender's to map, for every adapter, while
     * it is lent out (lend.c): that host maps only RAM for others. */
    if (!mcast && out.via >= 0 && fab_host(f, target)->iommu &&
        (target == agent.host || fab_host_ram_range(f, target, addr, size))) {
        int peer = fab_peer_on(f, (uint32_t)out.via, target);
        if (peer >= 0)
            m->rid = fab_adapter(f, (uint32_t)peer)->rid;
        struct inbound_req q = { .addr = m->addr, .size = m->size, .rid = m->rid };
        if (target == agent.host) /* counted: two devices of one lender may map the same */
            rc = lend_inbound(agent.host, &q, true);
        else
            rc = mbox_call(target, MBOX_INBOUND_MAP, &q, sizeof q, NULL, 0, NULL, 1000);
        if (rc == -EEXIST)
            rc = 0;
        if (rc) {
            r.id = out.id;
            lend_to_lender(MBOX_DEV_UNMAP, &r, &out);
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

int alend_map(int32_t client, uint32_t fn, uint32_t target, uint64_t addr, uint64_t size,
              int via, uint64_t *ioaddr, uint64_t *id)
{
    return map_for(client, fn, target, addr, size, false, 0, via, ioaddr, id);
}

int alend_map_at(int32_t client, uint32_t fn, uint32_t target, uint64_t addr, uint64_t size,
                 uint64_t iova, uint64_t *id)
{
    uint64_t io;
    if ((iova & 4095) != (addr & 4095))
        return -EINVAL;
    return map_for(client, fn, target, addr, size, true, iova, -1, &io, id);
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
        lend_aperture_put(client, fn);
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
        if (m->fn == fn && !lend_find_hold(m->client, fn, false)) {
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
        lend_aperture_put(h->client, fn);
        free(h);
    }
    while (gone) {
        struct bmap *m = gone;
        gone = m->next;
        inbound_unmap(m);
        free(m);
    }
    pthread_mutex_unlock(&lending.borrow_lock);
}
