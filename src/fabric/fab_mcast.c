/*
 * Multicast groups of the cluster switches (smartio-tocs-2021 §6.5): a group is what the PCIe
 * Multicast capability of a switch chip programs — a window of addresses whose writes leave
 * the switch on every subscribed port — set in every switch of a cascade at once, as the
 * cluster's switch software does. Each member's port has an overlay that moves the group's
 * window to where the member wants it (RAM or a device's memory BAR), since NTB adapters and
 * most endpoints do not decode multicast addresses themselves. This file owns the group table
 * (creating, removing, joining, leaving, reaping); resolve.c replicates the writes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "fabric.h"
#include "fab_mcast.h"

/* ---------------------------------------------------------------- switches */

/* Is switch s joined to switch root by switch-to-switch cables (the same cascade)? Cables are
 * counted whether up or down: a cable that is down breaks paths, not the group's programming. */
static bool same_cascade(const struct fab *f, uint32_t root, uint32_t s)
{
    uint64_t seen = 1ull << root; /* TOPO_MAX_SWITCHES is 64 */
    for (bool grew = true; grew;) {
        grew = false;
        for (uint32_t l = 0; l < f->ctl->nlinks; l++) {
            const struct fab_link *k = fab_link(f, l);
            if (k->a.kind != TOPO_END_SWITCH || k->b.kind != TOPO_END_SWITCH)
                continue;
            bool ia = seen >> k->a.index & 1, ib = seen >> k->b.index & 1;
            if (ia != ib) {
                seen |= 1ull << k->a.index | 1ull << k->b.index;
                grew = true;
            }
        }
    }
    return seen >> s & 1;
}

static bool group_used(const struct fab *f, uint32_t g)
{
    return g < FAB_MCAST_GROUPS &&
           atomic_load_explicit(&fab_mcast(f, g)->state, memory_order_acquire) == FAB_MCAST_USED;
}

int fab_mcast_adapter(const struct fab *f, uint32_t g, uint32_t host)
{
    if (!group_used(f, g) || host >= f->ctl->nhosts)
        return -ENOENT;
    const struct fab_host *h = fab_host(f, host);
    for (uint32_t i = 0; i < h->nadapters; i++) {
        const struct fab_adapter *a = fab_adapter(f, h->adapter_first + i);
        if (a->link < 0)
            continue;
        const struct fab_link *k = fab_link(f, (uint32_t)a->link);
        const struct topo_end *o = k->a.kind == TOPO_END_ADAPTER &&
                                           k->a.index == h->adapter_first + i ? &k->b : &k->a;
        if (o->kind == TOPO_END_SWITCH && same_cascade(f, fab_mcast(f, g)->sw, o->index))
            return (int)(h->adapter_first + i);
    }
    return -EHOSTUNREACH;
}

bool fab_mcast_port_up(const struct fab *f, uint32_t ai)
{
    const struct fab_adapter *a = fab_adapter(f, ai);
    return a->link >= 0 && atomic_load(&fab_host(f, a->host)->state) == FAB_HOST_UP &&
           atomic_load(&a->link_enabled) && atomic_load(&fab_link(f, (uint32_t)a->link)->up);
}

/* ---------------------------------------------------------------- groups */

int fab_mcast_find(const struct fab *f, const char *name)
{
    for (uint32_t g = 0; name && g < FAB_MCAST_GROUPS; g++)
        if (group_used(f, g) && strcmp(fab_mcast(f, g)->name, name) == 0)
            return (int)g;
    return -ENOENT;
}

int fab_mcast_create(struct fab *f, const char *name, int sw, uint64_t size, int32_t owner)
{
    if (!name || !*name || strlen(name) >= FAB_MCAST_NAME || size < FAB_MCAST_MIN_SIZE ||
        size > FAB_MCAST_MAX_SIZE || (size & (size - 1)))
        return -EINVAL;
    if (!f->ctl->nswitches)
        return -EOPNOTSUPP;
    if (sw >= (int)f->ctl->nswitches)
        return -ENOENT;
    int rc = -ENOSPC;
    fab_lock(&f->ctl->ctl_lock);
    if (fab_mcast_find(f, name) >= 0) {
        rc = -EEXIST;
        goto out;
    }
    for (uint32_t g = 0; g < FAB_MCAST_GROUPS; g++) {
        struct fab_mcast *m = fab_mcast(f, g);
        if (atomic_load(&m->state) != FAB_MCAST_FREE)
            continue;
        /* Nobody reads a free group's fields: fill them, then publish it. */
        memset(m->member, 0, sizeof m->member);
        m->sw = sw < 0 ? 0 : (uint32_t)sw;
        snprintf(m->name, sizeof m->name, "%s", name);
        m->size = size;
        m->owner_pid = owner;
        atomic_store(&m->writers[0], 0);
        atomic_store(&m->writers[1], 0);
        atomic_store(&m->leavers, 0);
        atomic_store(&m->leave_lock, 0);
        atomic_fetch_add(&m->gen, 1);
        atomic_store_explicit(&m->state, FAB_MCAST_USED, memory_order_release);
        rc = (int)g;
        break;
    }
out:
    fab_unlock(&f->ctl->ctl_lock);
    return rc;
}

uint32_t fab_mcast_members(const struct fab *f, uint32_t g)
{
    uint32_t n = 0;
    for (uint32_t h = 0; group_used(f, g) && h < f->ctl->nhosts; h++)
        n += atomic_load(&fab_mcast(f, g)->member[h].joined) == 1;
    return n;
}

uint32_t fab_mcast_senders(const struct fab *f, uint32_t g)
{
    uint32_t n = 0;
    for (uint32_t ai = 0; ai < f->ctl->nadapters; ai++) {
        const struct fab_adapter *a = fab_adapter(f, ai);
        const struct fab_lut_entry *e = fab_lut(f, a);
        for (uint32_t i = 0; i < a->lut_entries; i++)
            n += atomic_load(&e[i].valid) && (e[i].flags & FAB_LUT_MCAST) && e[i].peer_host == g;
    }
    return n;
}

/* May `owner` act on something `holder` holds? The administrator (0) may; a process may act on
 * its own, on what is kept (holder 0), and on what a dead process left. */
static bool may(int32_t holder, int32_t owner)
{
    if (holder < 0)
        return false; /* a group being removed */
    return owner == 0 || holder == 0 || holder == owner || !fab_pid_alive(holder);
}

/* ---------------------------------------------------------------- members */

/* Is [overlay, overlay + size) of host one region a multicast write may land in? */
static bool overlay_ok(const struct fab *f, uint32_t host, uint64_t overlay, uint64_t size)
{
    const struct fab_host *h = fab_host(f, host);
    if (overlay % 4096)
        return false;
    if (overlay >= FAB_MBOX_SIZE && overlay < h->ram_size && size <= h->ram_size - overlay)
        return true;
    for (uint32_t i = 0; i < h->nfuncs; i++) {
        const struct fab_function *fn = fab_func(f, h->func_first + i);
        for (int b = 0; b < FAB_BARS; b += 2) {
            const struct fab_bar *bar = &fn->bar[b];
            if (bar->kind == FAB_BAR_MEM && overlay >= bar->addr &&
                overlay - bar->addr < bar->size && size <= bar->size - (overlay - bar->addr))
                return true;
        }
    }
    return false;
}

int fab_mcast_join(struct fab *f, uint32_t g, uint32_t host, uint64_t overlay, int32_t owner)
{
    if (!group_used(f, g) || host >= f->ctl->nhosts)
        return -ENOENT;
    struct fab_mcast *m = fab_mcast(f, g);
    int ai = fab_mcast_adapter(f, g, host);
    if (ai < 0)
        return ai;
    if (!overlay_ok(f, host, overlay, m->size))
        return -EINVAL;
    struct fab_mcast_member *mb = &m->member[host];
    uint16_t rid = fab_adapter(f, (uint32_t)ai)->rid;
    int rc = 0;
    fab_lock(&f->ctl->ctl_lock);
    if (!group_used(f, g))
        rc = -ENOENT;
    else if (atomic_load(&mb->joined))
        rc = -EALREADY;
    else
        atomic_store(&mb->joined, 2); /* claimed: not receiving yet */
    fab_unlock(&f->ctl->ctl_lock);
    if (rc)
        return rc;
    /* Traffic arriving through the adapter is translated in its domain: give it the overlay
     * (one to one), unless what is there already lets it write (memory the adapter was given
     * for DMA, ntb_dma_alloc). */
    uint32_t mapped = 0;
    if (fab_host(f, host)->iommu) {
        rc = fab_iommu_map(f, host, rid, overlay, overlay, m->size, FAB_PERM_WRITE, owner);
        if (rc == -EEXIST) {
            uint64_t phys, contig;
            fab_iommu_set_probing(true);
            rc = fab_iommu_translate(f, host, rid, overlay, m->size, true, false, &phys, &contig);
            fab_iommu_set_probing(false);
            rc = rc == 0 && phys == overlay && contig >= m->size ? 0 : -EEXIST;
        } else {
            mapped = rc == 0;
        }
        if (rc) {
            atomic_store(&mb->joined, 0);
            return rc;
        }
    }
    mb->adapter = (uint32_t)ai;
    mb->overlay = overlay;
    mb->owner_pid = owner;
    mb->iommu = mapped;
    atomic_fetch_add(&m->gen, 1);
    atomic_store(&mb->joined, 1); /* seq_cst: from here on writes see it */
    return 0;
}

/* Wait until no write of m that may have seen a member before it left is still being copied:
 * flip the phase (writes that start from now on read the member gone) and wait for the writes
 * of the old one. A writer that died inside (within microseconds of copying) leaves its count
 * up for good, so the wait is bounded: past a second, every live writer of the old phase has
 * long finished what it started. */
static void drain_writers(struct fab_mcast *m)
{
    fab_lock(&m->leave_lock);
    atomic_fetch_add(&m->leavers, 1);
    uint32_t old = atomic_fetch_add(&m->phase, 1) & 1;
    uint64_t deadline = fab_now_ns() + 1000000000ull;
    for (;;) {
        uint32_t w = atomic_load(&m->writers[old]);
        if (!w || fab_now_ns() >= deadline)
            break;
        fab_futex_wait(&m->writers[old], w, 10000000);
    }
    atomic_fetch_sub(&m->leavers, 1);
    fab_unlock(&m->leave_lock);
}

uint32_t fab_mcast_write_begin(struct fab_mcast *m)
{
    for (;;) {
        uint32_t p = atomic_load(&m->phase) & 1;
        atomic_fetch_add(&m->writers[p], 1); /* seq_cst: before the members are read */
        if ((atomic_load(&m->phase) & 1) == p)
            return p;
        fab_mcast_write_end(m, p); /* a leave flipped it meanwhile: count in the new one */
    }
}

void fab_mcast_write_end(struct fab_mcast *m, uint32_t phase)
{
    if (atomic_fetch_sub(&m->writers[phase], 1) == 1 && atomic_load(&m->leavers))
        fab_futex_wake(&m->writers[phase], INT_MAX);
}

/* Take host out of m (claimed by the caller: joined was 1, now 2 under the lock). */
static void leave_claimed(struct fab *f, struct fab_mcast *m, uint32_t host)
{
    struct fab_mcast_member *mb = &m->member[host];
    drain_writers(m);
    if (mb->iommu)
        fab_iommu_unmap(f, host, fab_adapter(f, mb->adapter)->rid, mb->overlay, m->size);
    mb->iommu = 0;
    mb->owner_pid = 0;
    atomic_fetch_add(&m->gen, 1);
    atomic_store(&mb->joined, 0);
}

/* Claim a membership for leaving: 0, or -ENOENT / -EPERM. Lock held. */
static int claim_leave(struct fab_mcast *m, uint32_t host, int32_t owner)
{
    struct fab_mcast_member *mb = &m->member[host];
    if (atomic_load(&mb->joined) != 1)
        return -ENOENT;
    if (!may(mb->owner_pid, owner))
        return -EPERM;
    atomic_store(&mb->joined, 2); /* seq_cst: writers that start now skip it */
    return 0;
}

int fab_mcast_leave(struct fab *f, uint32_t g, uint32_t host, int32_t owner)
{
    if (!group_used(f, g) || host >= f->ctl->nhosts)
        return -ENOENT;
    struct fab_mcast *m = fab_mcast(f, g);
    fab_lock(&f->ctl->ctl_lock);
    int rc = claim_leave(m, host, owner);
    fab_unlock(&f->ctl->ctl_lock);
    if (!rc)
        leave_claimed(f, m, host);
    return rc;
}

/* All members leave and the group goes (its slot free again). Lock not held; the group is
 * claimed (state USED, but the caller made sure no sender targets it). */
static void dissolve(struct fab *f, uint32_t g)
{
    struct fab_mcast *m = fab_mcast(f, g);
    for (uint32_t h = 0; h < f->ctl->nhosts; h++) {
        fab_lock(&f->ctl->ctl_lock);
        int rc = claim_leave(m, h, 0);
        fab_unlock(&f->ctl->ctl_lock);
        if (!rc)
            leave_claimed(f, m, h);
    }
    atomic_fetch_add(&m->gen, 1);
    atomic_store_explicit(&m->state, FAB_MCAST_FREE, memory_order_release);
}

int fab_mcast_remove(struct fab *f, uint32_t g, int32_t owner)
{
    if (!group_used(f, g))
        return -ENOENT;
    struct fab_mcast *m = fab_mcast(f, g);
    int rc = 0;
    fab_lock(&f->ctl->ctl_lock);
    /* Under the lock no LUT entry can start to target it (fab_lut_set checks under it). */
    if (!group_used(f, g) || m->owner_pid < 0)
        rc = -ENOENT;
    else if (!may(m->owner_pid, owner))
        rc = -EPERM;
    else if (fab_mcast_senders(f, g))
        rc = -EBUSY;
    else
        m->owner_pid = -1; /* being removed: no other remove, no reaping */
    fab_unlock(&f->ctl->ctl_lock);
    if (!rc)
        dissolve(f, g);
    return rc;
}

void fab_mcast_reap(struct fab *f, int32_t pid)
{
    if (pid <= 0)
        return;
    for (uint32_t g = 0; g < FAB_MCAST_GROUPS; g++) {
        if (!group_used(f, g))
            continue;
        struct fab_mcast *m = fab_mcast(f, g);
        for (uint32_t h = 0; h < f->ctl->nhosts; h++) {
            if (atomic_load(&m->member[h].joined) != 1 || m->member[h].owner_pid != pid)
                continue;
            fab_lock(&f->ctl->ctl_lock);
            int rc = claim_leave(m, h, 0);
            fab_unlock(&f->ctl->ctl_lock);
            if (!rc)
                leave_claimed(f, m, h);
        }
        bool gone = false;
        fab_lock(&f->ctl->ctl_lock);
        if (group_used(f, g) && m->owner_pid == pid) {
            /* Others still send into it: it stays, kept, so that no later group inherits
             * their entries. */
            gone = !fab_mcast_senders(f, g);
            m->owner_pid = gone ? -1 : 0;
        }
        fab_unlock(&f->ctl->ctl_lock);
        if (gone)
            dissolve(f, g);
    }
}

void fab_mcast_host_reset(struct fab *f, uint32_t host)
{
    for (uint32_t g = 0; g < FAB_MCAST_GROUPS && host < f->ctl->nhosts; g++) {
        if (!group_used(f, g))
            continue;
        struct fab_mcast *m = fab_mcast(f, g);
        if (atomic_load(&m->member[host].joined) != 1 || m->member[host].owner_pid == 0)
            continue;
        fab_lock(&f->ctl->ctl_lock);
        int rc = claim_leave(m, host, 0);
        fab_unlock(&f->ctl->ctl_lock);
        if (!rc)
            leave_claimed(f, m, host);
    }
}
