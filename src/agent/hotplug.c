/*
 * Device Lending, the borrower's agent: hot-adding a lent function into this host's PCIe tree
 * as a shadow function, and hot-removing it. Hot-add borrows the function for the host
 * (exclusively), maps each of its BARs through a window of our adapter facing the lender, and
 * publishes the shadow (its place in our tree, its BARs in our address map) for lspci and the
 * drivers. Hot-remove first marks the shadow as going (drivers see a surprise removal), then
 * unmaps the windows and returns the function, which the lender resets.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "ntblend/smartio.h"

/* The windows behind one shadow; fabric-wide state says where, this says what to unmap. */
static struct {
    pthread_mutex_t lock;
    struct fab_window win[FAB_SHADOWS][FAB_BARS];
} hotplug = { .lock = PTHREAD_MUTEX_INITIALIZER };

static struct fab_host *self(void) { return fab_host(agent.f, agent.host); }

/* Drivers of this host watch one word for hot-add and hot-remove (the driver model). */
static void tree_changed(void)
{
    atomic_fetch_add(&self()->tree_gen, 1);
    fab_futex_wake(&self()->tree_gen, 1 << 30);
}

static int shadow_of(uint32_t fn)
{
    for (int i = 0; i < FAB_SHADOWS; i++)
        if (atomic_load(&self()->shadows[i].state) != FAB_SHADOW_FREE &&
            self()->shadows[i].fn == fn)
            return i;
    return -1;
}

static void unmap_bars(int slot)
{
    for (int b = 0; b < FAB_BARS; b++) {
        struct fab_window *w = &hotplug.win[slot][b];
        if (w->count)
            fab_window_unmap(agent.f, w, getpid());
        memset(w, 0, sizeof *w);
        self()->shadows[slot].bar_addr[b] = 0;
    }
}

int ahot_add(uint32_t fn)
{
    struct fab *f = agent.f;
    if (fn >= f->ctl->nfuncs)
        return -ENODEV;
    const struct fab_function *x = fab_func(f, fn);
    if (x->host == agent.host)
        return -EINVAL; /* already in our tree */
    uint32_t peer;
    int ai = fab_adapter_toward(f, agent.host, x->host, &peer);
    if (ai < 0)
        return -EHOSTUNREACH;
    pthread_mutex_lock(&hotplug.lock);
    int rc = 0, slot = shadow_of(fn);
    if (slot >= 0) {
        rc = -EALREADY;
        goto out;
    }
    for (slot = 0; slot < FAB_SHADOWS; slot++)
        if (atomic_load(&self()->shadows[slot].state) == FAB_SHADOW_FREE)
            break;
    if (slot == FAB_SHADOWS) {
        rc = -ENOSPC;
        goto out;
    }
    rc = alend_borrow(0, fn, SIO_EXCLUSIVE, true);
    if (rc)
        goto out;
    struct fab_shadow *s = &self()->shadows[slot];
    s->fn = fn;
    s->bdf = (uint16_t)((FAB_SHADOW_BUS + (uint32_t)slot) << 8 | (x->vf ? 0x10 + x->vf - 1 : x->fn));
    for (int b = 0; b < FAB_BARS && !rc; b++) {
        if (x->bar[b].kind == FAB_BAR_NONE)
            continue;
        rc = fab_window_map(f, (uint32_t)ai, x->host, x->bar[b].addr, x->bar[b].size, getpid(), 0,
                            &hotplug.win[slot][b]);
        if (!rc)
            s->bar_addr[b] = hotplug.win[slot][b].bus;
    }
    if (rc) {
        unmap_bars(slot);
        alend_return(0, fn);
        goto out;
    }
    atomic_store(&s->state, FAB_SHADOW_PRESENT);
    atomic_fetch_add(&s->gen, 1);
    fab_futex_wake(&s->gen, 1 << 30);
    tree_changed();
    fprintf(stderr, "ntblend-agent[%s]: hot-added %s (lent by %s) at %02x:%02x.%x\n",
            self()->name, x->name, fab_host(f, x->host)->name, s->bdf >> 8, (s->bdf >> 3) & 0x1f,
            s->bdf & 7);
out:
    pthread_mutex_unlock(&hotplug.lock);
    return rc;
}

/* Remove shadow `slot` (lock held): drivers are told first, then the windows go, then the
 * borrow (unless the lender is gone already). */
static void remove_slot(int slot, bool return_it)
{
    struct fab_shadow *s = &self()->shadows[slot];
    atomic_store(&s->state, FAB_SHADOW_REMOVING);
    atomic_fetch_add(&s->gen, 1);
    fab_futex_wake(&s->gen, 1 << 30);
    tree_changed();
    /* The driver bound to it loses it now (surprise removal): its mappings go with the
     * host's, and the device is returned however far its remove() has come. When the lender
     * is gone, so are the borrow and everything under it: forgotten here, as the lender's
     * next life knows nothing of them (kept, they refused the device lent again). */
    if (return_it)
        alend_unbind(s->fn);
    else
        alend_forget(s->fn);
    unmap_bars(slot);
    if (return_it)
        alend_return(0, s->fn);
    const struct fab_function *x = fab_func(agent.f, s->fn);
    fprintf(stderr, "ntblend-agent[%s]: hot-removed %s (lent by %s) from %02x:%02x.%x\n",
            self()->name, x->name, fab_host(agent.f, x->host)->name, s->bdf >> 8,
            (s->bdf >> 3) & 0x1f, s->bdf & 7);
    atomic_store(&s->state, FAB_SHADOW_FREE);
    atomic_fetch_add(&s->gen, 1);
    fab_futex_wake(&s->gen, 1 << 30);
    tree_changed();
}

int ahot_remove(uint32_t fn)
{
    pthread_mutex_lock(&hotplug.lock);
    int slot = shadow_of(fn);
    if (slot >= 0)
        remove_slot(slot, true);
    pthread_mutex_unlock(&hotplug.lock);
    return slot >= 0 ? 0 : -ENOENT;
}

void ahot_host_gone(uint32_t host)
{
    pthread_mutex_lock(&hotplug.lock);
    for (int i = 0; i < FAB_SHADOWS; i++)
        if (atomic_load(&self()->shadows[i].state) == FAB_SHADOW_PRESENT &&
            fab_func(agent.f, self()->shadows[i].fn)->host == host)
            remove_slot(i, false); /* its lender is gone: so is the device */
    pthread_mutex_unlock(&hotplug.lock);
}

void ahot_stop(void)
{
    pthread_mutex_lock(&hotplug.lock);
    for (int i = 0; i < FAB_SHADOWS; i++)
        if (atomic_load(&self()->shadows[i].state) == FAB_SHADOW_PRESENT)
            remove_slot(i, true);
    pthread_mutex_unlock(&hotplug.lock);
}
