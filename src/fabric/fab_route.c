/*
 * Routing and reachability: which adapters an NTB port reaches (its peers), over which cables,
 * and whether that path works right now (hosts powered, ports enabled, every cable up). Also
 * the administrative changes that alter reachability: link up/down and host power.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fabric.h"

static bool end_is(const struct topo_end *e, enum topo_end_kind k, uint32_t idx)
{
    return e->kind == k && e->index == idx;
}

/* The other end of link l, seen from (k, idx). */
static const struct topo_end *other_end(const struct fab_link *l, enum topo_end_kind k, uint32_t idx)
{
    return end_is(&l->a, k, idx) ? &l->b : &l->a;
}

struct walk {
    uint16_t path[FAB_PATH_MAX];
    uint32_t n, sw_ns;
};

static int add_peer(struct fab *f, struct fab_adapter *a, uint32_t b, const struct walk *w)
{
    if (a->npeers >= TOPO_MAX_PEERS) {
        fprintf(stderr, "ntblend: adapter %s reaches more than %d peers\n", a->name, TOPO_MAX_PEERS);
        return -E2BIG;
    }
    uint32_t p = a->npeers++;
    a->peers[p] = b;
    a->peer_nlinks[p] = (uint8_t)w->n;
    memcpy(a->peer_path[p], w->path, w->n * sizeof w->path[0]);
    a->peer_sw_ns[p] = w->sw_ns;
    return 0;
}

/* Depth-first over the switch tree from switch s (entered over link `from`). */
static int walk_switch(struct fab *f, uint32_t self, uint32_t s, int from, struct walk *w)
{
    struct fab_adapter *a = fab_adapter(f, self);
    if (w->n + 1 >= FAB_PATH_MAX) {
        fprintf(stderr, "ntblend: a path from adapter %s crosses more than %d cables; "
                "cascade fewer switches\n", a->name, FAB_PATH_MAX - 1);
        return -ELOOP;
    }
    w->sw_ns += fab_switch(f, s)->latency_ns;
    for (uint32_t l = 0; l < f->ctl->nlinks; l++) {
        if ((int)l == from)
            continue;
        struct fab_link *lk = fab_link(f, l);
        if (!end_is(&lk->a, TOPO_END_SWITCH, s) && !end_is(&lk->b, TOPO_END_SWITCH, s))
            continue;
        const struct topo_end *o = other_end(lk, TOPO_END_SWITCH, s);
        w->path[w->n++] = (uint16_t)l;
        int rc = 0;
        if (o->kind == TOPO_END_ADAPTER) {
            if (o->index != self)
                rc = add_peer(f, a, o->index, w);
        } else {
            rc = walk_switch(f, self, o->index, (int)l, w);
        }
        w->n--;
        if (rc)
            return rc;
    }
    w->sw_ns -= fab_switch(f, s)->latency_ns;
    return 0;
}

static uint32_t peer_key(struct fab *f, uint32_t adapter)
{
    return fab_host(f, fab_adapter(f, adapter)->host)->node_id;
}

int route_build(struct fab *f)
{
    for (uint32_t i = 0; i < f->ctl->nadapters; i++) {
        struct fab_adapter *a = fab_adapter(f, i);
        a->link = -1;
        a->npeers = 0;
        for (uint32_t l = 0; l < f->ctl->nlinks; l++) {
            struct fab_link *lk = fab_link(f, l);
            if (end_is(&lk->a, TOPO_END_ADAPTER, i) || end_is(&lk->b, TOPO_END_ADAPTER, i)) {
                a->link = (int32_t)l;
                break;
            }
        }
        if (a->link < 0)
            continue;
        struct fab_link *lk = fab_link(f, (uint32_t)a->link);
        const struct topo_end *o = other_end(lk, TOPO_END_ADAPTER, i);
        struct walk w = { .path = { (uint16_t)a->link }, .n = 1 };
        int rc = o->kind == TOPO_END_ADAPTER ? add_peer(f, a, o->index, &w)
                                             : walk_switch(f, i, o->index, a->link, &w);
        if (rc)
            return rc;
        /* Peers by node id, so pidx order is the same on every host (insertion sort: <= 64). */
        for (uint32_t x = 1; x < a->npeers; x++)
            for (uint32_t y = x; y > 0 && peer_key(f, a->peers[y - 1]) > peer_key(f, a->peers[y]); y--) {
                uint32_t tp = a->peers[y];
                a->peers[y] = a->peers[y - 1];
                a->peers[y - 1] = tp;
                uint8_t tn = a->peer_nlinks[y];
                a->peer_nlinks[y] = a->peer_nlinks[y - 1];
                a->peer_nlinks[y - 1] = tn;
                uint16_t pp[FAB_PATH_MAX];
                memcpy(pp, a->peer_path[y], sizeof pp);
                memcpy(a->peer_path[y], a->peer_path[y - 1], sizeof pp);
                memcpy(a->peer_path[y - 1], pp, sizeof pp);
                uint32_t ns = a->peer_sw_ns[y];
                a->peer_sw_ns[y] = a->peer_sw_ns[y - 1];
                a->peer_sw_ns[y - 1] = ns;
            }
    }
    return 0;
}

int fab_peer_index(const struct fab *f, uint32_t a, uint32_t b)
{
    const struct fab_adapter *ad = fab_adapter(f, a);
    for (uint32_t p = 0; p < ad->npeers; p++)
        if (ad->peers[p] == b)
            return (int)p;
    return -1;
}

static bool path_up_read(const struct fab *f, uint32_t a, uint32_t b, uint32_t *hops)
{
    int p = fab_peer_index(f, a, b);
    if (p < 0)
        return false;
    const struct fab_adapter *aa = fab_adapter(f, a), *ab = fab_adapter(f, b);
    if (atomic_load(&fab_host(f, aa->host)->state) != FAB_HOST_UP ||
        atomic_load(&fab_host(f, ab->host)->state) != FAB_HOST_UP ||
        !atomic_load(&aa->link_enabled) || !atomic_load(&ab->link_enabled))
        return false;
    for (uint32_t i = 0; i < aa->peer_nlinks[p]; i++)
        if (!atomic_load(&fab_link(f, aa->peer_path[p][i])->up))
            return false;
    *hops = aa->peer_nlinks[p] - 1u; /* switches crossed */
    return true;
}

/*
 * Asked at every posted write through a window (a lent function's doorbells: two per I/O).
 * The hosts', adapters' and links' words it reads share their cache lines with words that
 * other traffic writes (a host's MSI counts and mailbox doorbell, an adapter's doorbell bits
 * and the latency model's link times), so each call would fetch lines another CPU just wrote.
 * Instead each thread keeps its last answers with the path_gen they were read under: while no
 * host, link or port changed (path_gen even and the same), an answer costs one read of
 * path_gen, a line nothing writes then. An odd path_gen is a change in progress (or one whose
 * writer died half-way): read the words themselves.
 */
#define PATH_CACHE 4
static _Thread_local struct {
    uint64_t open_id;
    uint32_t gen, a, b, hops;
    bool up, valid;
} path_cache[PATH_CACHE];
static _Thread_local uint32_t path_next;

bool fab_path_up(const struct fab *f, uint32_t a, uint32_t b, uint32_t *hops)
{
    uint32_t gen = atomic_load_explicit(&f->ctl->path_gen, memory_order_acquire), h = 0;
    for (uint32_t i = 0; !(gen & 1) && i < PATH_CACHE; i++)
        if (path_cache[i].valid && path_cache[i].open_id == f->open_id && path_cache[i].gen == gen &&
            path_cache[i].a == a && path_cache[i].b == b) {
            if (hops && path_cache[i].up)
                *hops = path_cache[i].hops;
            return path_cache[i].up;
        }
    bool up = path_up_read(f, a, b, &h);
    if (!(gen & 1) && atomic_load_explicit(&f->ctl->path_gen, memory_order_acquire) == gen) {
        uint32_t i = path_next++ % PATH_CACHE;
        path_cache[i].open_id = f->open_id;
        path_cache[i].gen = gen;
        path_cache[i].a = a;
        path_cache[i].b = b;
        path_cache[i].hops = h;
        path_cache[i].up = up;
        path_cache[i].valid = true;
    }
    if (hops && up)
        *hops = h;
    return up;
}

uint64_t fab_path_signature(const struct fab *f, uint32_t a, uint32_t b)
{
    int p = fab_peer_index(f, a, b);
    const struct fab_adapter *aa = fab_adapter(f, a), *ab = fab_adapter(f, b);
    uint64_t sig = (uint64_t)atomic_load(&fab_host(f, aa->host)->boot_gen) << 32 |
                   atomic_load(&fab_host(f, ab->host)->boot_gen);
    sig += atomic_load(&aa->enable_changes) + atomic_load(&ab->enable_changes);
    for (uint32_t i = 0; p >= 0 && i < aa->peer_nlinks[p]; i++)
        sig += (uint64_t)atomic_load(&fab_link(f, aa->peer_path[p][i])->changes) << 8;
    return sig;
}

/* Every port may see a different set of peers now: wake all link-event waiters, then make
 * every process re-resolve its windows. */
void fab_reachability_changed(struct fab *f)
{
    for (uint32_t i = 0; i < f->ctl->nadapters; i++) {
        struct fab_adapter *a = fab_adapter(f, i);
        atomic_fetch_add(&a->link_seq, 1);
        fab_futex_wake(&a->link_seq, INT_MAX);
    }
    fab_map_changed(f);
}

int fab_link_set(struct fab *f, uint32_t link, bool up)
{
    if (link >= f->ctl->nlinks)
        return -EINVAL;
    struct fab_link *l = fab_link(f, link);
    fab_path_bump(f);
    if (atomic_exchange(&l->up, up ? 1u : 0u) != (up ? 1u : 0u))
        atomic_fetch_add(&l->changes, 1);
    fab_path_bump(f);
    fab_reachability_changed(f);
    return 0;
}

void fab_port_enable(struct fab *f, uint32_t a, bool on)
{
    struct fab_adapter *ad = fab_adapter(f, a);
    fab_path_bump(f);
    if (atomic_exchange(&ad->link_enabled, on ? 1u : 0u) != (on ? 1u : 0u))
        atomic_fetch_add(&ad->enable_changes, 1);
    fab_path_bump(f);
    fab_reachability_changed(f);
}

/* Does end e belong to what `name` names (a host: any of its adapters)? */
static bool end_named(const struct fab *f, const struct topo_end *e, int host, int adapter, int sw)
{
    if (e->kind == TOPO_END_SWITCH)
        return sw >= 0 && e->index == (uint32_t)sw;
    if (adapter >= 0)
        return e->index == (uint32_t)adapter;
    return host >= 0 && fab_adapter(f, e->index)->host == (uint32_t)host;
}

int fab_link_between(const struct fab *f, const char *a, const char *b, char *why, size_t len)
{
    int ha = fab_host_by_name(f, a), aa = fab_adapter_by_name(f, a), sa = fab_switch_by_name(f, a);
    int hb = fab_host_by_name(f, b), ab = fab_adapter_by_name(f, b), sb = fab_switch_by_name(f, b);
    if (ha < 0 && aa < 0 && sa < 0) {
        snprintf(why, len, "no host, adapter or switch named '%s' (see 'ntblend status')", a);
        return -1;
    }
    if (hb < 0 && ab < 0 && sb < 0) {
        snprintf(why, len, "no host, adapter or switch named '%s' (see 'ntblend status')", b);
        return -1;
    }
    int found = -1, count = 0;
    for (uint32_t l = 0; l < f->ctl->nlinks; l++) {
        const struct fab_link *lk = fab_link(f, l);
        if ((end_named(f, &lk->a, ha, aa, sa) && end_named(f, &lk->b, hb, ab, sb)) ||
            (end_named(f, &lk->b, ha, aa, sa) && end_named(f, &lk->a, hb, ab, sb))) {
            found = (int)l;
            count++;
        }
    }
    if (count == 0) {
        snprintf(why, len, "no cable joins '%s' and '%s' (see 'ntblend topology --dot')", a, b);
        return -1;
    }
    if (count > 1) {
        snprintf(why, len, "'%s' and '%s' are joined by %d cables; name the adapters "
                 "(HOST.ADAPTER) to pick one", a, b, count);
        return -1;
    }
    return found;
}

/* ---------------------------------------------------------------- which adapter reaches whom */

int fab_peer_on(const struct fab *f, uint32_t ai, uint32_t host)
{
    const struct fab_adapter *a = fab_adapter(f, ai);
    for (uint32_t p = 0; p < a->npeers; p++)
        if (fab_adapter(f, a->peers[p])->host == host)
            return (int)a->peers[p];
    return -1;
}

int fab_host_paths(const struct fab *f, uint32_t host, uint32_t target, struct fab_hpath *out,
                   int max)
{
    const struct fab_host *h = fab_host(f, host);
    int n = 0;
    for (uint32_t i = 0; i < h->nadapters; i++) {
        int p = fab_peer_on(f, h->adapter_first + i, target);
        if (p < 0)
            continue;
        if (n < max)
            out[n] = (struct fab_hpath){ .adapter = h->adapter_first + i, .peer = (uint32_t)p };
        n++;
    }
    return n;
}

/*
 * With two adapters reaching the target (two switches, smartio-tocs-2021 §6.3), the first whose
 * path works now: so whatever is set up while the primary cable is out (agent mailboxes, a
 * lender's window onto a borrower) goes over the path that survives. With none up, the first
 * (its path may come back).
 */
int fab_adapter_toward(const struct fab *f, uint32_t host, uint32_t target, uint32_t *peer_ai)
{
    struct fab_hpath p[FAB_HPATH_MAX];
    int n = fab_host_paths(f, host, target, p, FAB_HPATH_MAX);
    if (n <= 0)
        return -EHOSTUNREACH;
    int pick = 0;
    for (int i = 0; i < n && i < FAB_HPATH_MAX; i++)
        if (fab_path_up(f, p[i].adapter, p[i].peer, NULL)) {
            pick = i;
            break;
        }
    if (peer_ai)
        *peer_ai = p[pick].peer;
    return (int)p[pick].adapter;
}
