/*
 * SmartIO for driver models (include/ntblend/smartio_tree.h): this host's PCIe tree as the
 * backend reports it — the functions in this host, and those lent to it and hot-added as
 * shadows (func_info, tree) — a wait on the tree's generation (tree_word) that a watcher can
 * be woken from, and binding one of its functions for a driver (a borrow the agent checks
 * against the tree: AGENT_BORROW_BIND). A bound lent function's BARs are mapped here through
 * the window its hot-add set up (sio_map_bar in sio.c comes here for them).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ntblend/smartio_tree.h"
#include "seg_int.h"
#include "sio_int.h"

#define TREE_SHADOWS 64 /* lent functions looked at per host (the fabric has 16 slots) */

_Static_assert(SIO_BARS == NTB_BK_BARS, "a function's BAR slots");

static void describe(struct sio_tree_fn *o, uint32_t fn, const struct ntb_func_info *x)
{
    memset(o, 0, sizeof *o);
    o->id = fn;
    snprintf(o->name, sizeof o->name, "%s", x->name);
    o->vendor = x->vendor;
    o->device = x->device;
    o->class_code = x->class_code;
    o->present = true;
    o->bdf = x->bdf;
    for (int b = 0; b < SIO_BARS; b++) {
        o->bar_size[b] = x->bar[b].size;
        o->bar_addr[b] = x->bar[b].size ? x->bar[b].addr : 0;
    }
}

/* The lent functions of this host's tree (at most TREE_SHADOWS). */
static int shadows(struct rt *rt, struct ntb_shadow_info *sh)
{
    int n = rt->ops->tree ? rt->ops->tree(rt, rt->host, sh, TREE_SHADOWS) : 0;
    return n < 0 ? n : n > TREE_SHADOWS ? TREE_SHADOWS : n;
}

struct sio_tree {
    struct rt *rt;
    _Atomic uint32_t *word;  /* the backend's tree word, or `still` */
    _Atomic uint32_t still;  /* a backend without Device Lending: a tree that never changes */
    atomic_bool woken;       /* sio_tree_wake was called */
    atomic_int waiting;      /* sio_tree_wait calls under way */
};

int sio_tree_open(sio_tree_t **out)
{
    if (!out)
        return -EINVAL;
    sio_tree_t *t = calloc(1, sizeof *t);
    if (!t)
        return -ENOMEM;
    t->rt = rt_get();
    if (!t->rt) {
        int e = -errno;
        free(t);
        return e;
    }
    struct rt *rt = t->rt;
    t->word = rt->ops->tree_word ? rt->ops->tree_word(rt, rt->host) : NULL;
    if (!t->word)
        t->word = &t->still;
    *out = t;
    return 0;
}

void sio_tree_close(sio_tree_t *t)
{
    if (!t)
        return;
    rt_put(t->rt);
    free(t);
}

int sio_tree_list(sio_tree_t *t, struct sio_tree_fn *out, int max)
{
    if (!t || max < 0 || (max && !out))
        return -EINVAL;
    struct rt *rt = t->rt;
    int n = 0;
    struct ntb_func_info x;
    for (uint32_t fn = 0; rt->ops->func_info(rt, fn, &x) == 0; fn++) {
        if (x.host != rt->host)
            continue;
        if (n < max)
            describe(&out[n], fn, &x);
        n++;
    }
    struct ntb_shadow_info sh[TREE_SHADOWS];
    int ns = shadows(rt, sh);
    for (int i = 0; i < ns; i++) {
        if (rt->ops->func_info(rt, sh[i].fn, &x))
            continue;
        if (n < max) {
            struct sio_tree_fn *o = &out[n];
            describe(o, sh[i].fn, &x);
            o->lent = true;
            o->present = sh[i].present;
            o->bdf = sh[i].bdf;
            for (int b = 0; b < SIO_BARS; b++)
                o->bar_addr[b] = x.bar[b].size ? sh[i].bar_addr[b] : 0;
        }
        n++;
    }
    return n;
}

int sio_tree_wait(sio_tree_t *t, uint32_t *seen, int timeout_ms)
{
    if (!t || !seen)
        return -EINVAL;
    uint64_t deadline = seg_deadline(timeout_ms);
    atomic_fetch_add(&t->waiting, 1);
    int rc;
    for (;;) {
        uint32_t now = atomic_load(t->word);
        if (now != *seen) {
            *seen = now;
            rc = 0;
            break;
        }
        if (atomic_load(&t->woken)) {
            rc = -EINTR;
            break;
        }
        /* One sleep at a time (no site): `woken` is looked at after each. */
        if (seg_futex_wait_ms(NULL, t->word, now, deadline)) {
            rc = -ETIMEDOUT;
            break;
        }
    }
    atomic_fetch_sub(&t->waiting, 1);
    return rc;
}

void sio_tree_wake(sio_tree_t *t)
{
    if (!t)
        return;
    atomic_store(&t->woken, true);
    /* The word is the host's: waiters of other processes wake too, find the tree as it was
     * and sleep again. A waiter of ours that was between its look at `woken` and its sleep
     * misses a wake-up, so wake until none is left. */
    while (atomic_load(&t->waiting)) {
        t->rt->ops->wake(t->word, 1 << 30);
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
}

int sio_bind(sio_tree_t *t, uint32_t id, sio_dev_t **out)
{
    if (!t || !out)
        return -EINVAL;
    sio_dev_t *d;
    int rc = smartio_borrow(id, AGENT_BORROW_BIND, &d);
    if (rc)
        return rc;
    struct rt *rt = t->rt;
    if (d->lender != rt->host) {
        /* Where its hot-add put its BARs in this host's map, if it was hot-added (a
         * function the host holds with `ntblend device borrow` has no place in the tree). */
        struct ntb_shadow_info sh[TREE_SHADOWS];
        int ns = shadows(rt, sh);
        for (int i = 0; i < ns; i++)
            if (sh[i].fn == id)
                for (int b = 0; b < NTB_BK_BARS; b++)
                    d->tree_bar[b] = d->info.bar[b].size ? sh[i].bar_addr[b] : 0;
    }
    *out = d;
    return 0;
}

int smartio_tree_bar_map(sio_dev_t *d, int bar, struct sio_bar *m)
{
    struct rt *rt = d->rt;
    struct ntb_adapter_info a;
    if (d->ai < 0)
        return -EHOSTUNREACH;
    if (!rt->ops->adapter_info)
        return -EOPNOTSUPP;
    if (rt->ops->adapter_info(rt, (uint32_t)d->ai, &a) || !a.mw_size ||
        d->tree_bar[bar] < a.mw_base)
        return -EFAULT;
    uint64_t rel = d->tree_bar[bar] - a.mw_base;
    struct ntb_window w = { .adapter = (uint32_t)d->ai, .peer_host = d->lender,
                            .peer_addr = d->info.bar[bar].addr, .len = d->info.bar[bar].size,
                            .bus = d->tree_bar[bar], .first = (uint32_t)(rel / a.mw_size),
                            .offset = rel % a.mw_size };
    w.count = (uint32_t)((w.offset + w.len + a.mw_size - 1) / a.mw_size);
    void *base;
    void *p = rt->ops->window_cpu_map(rt, &w, false, &base);
    if (!p)
        return -errno;
    m->ptr = p;
    m->tree_base = base;
    return 0;
}
