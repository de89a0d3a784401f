/*
 * NTB adapter registers and tables: LUT entries, the requester-ID table, doorbells (with mask
 * and pending-on-unmask), MSI vectors, power-on reset, and releasing what a dead process held.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <string.h>

#include "fabric.h"

void fab_adapter_reset(struct fab *f, uint32_t ai)
{
    struct fab_adapter *a = fab_adapter(f, ai);
    struct fab_host *h = fab_host(f, a->host);
    memset(fab_lut(f, a), 0, a->lut_entries * sizeof(struct fab_lut_entry));
    struct fab_rid_entry *rid = fab_rid(f, a);
    memset(rid, 0, a->rid_entries * sizeof *rid);
    /* The CPU's two entries (smartio-tocs-2021 §8) and the adapter's DMA engine. */
    uint32_t n = 0;
    for (uint32_t c = 0; c < FAB_CPU_RIDS && n < a->rid_entries; c++, n++)
        rid[n] = (struct fab_rid_entry){ .used = 1, .rid = (uint16_t)(FAB_RID_CPU + c) };
    if (a->dma_channels && n < a->rid_entries)
        rid[n++] = (struct fab_rid_entry){ .used = 1, .rid = fab_dma_rid(a->index_on_host) };
    /* Traffic entering through a sibling adapter may be forwarded out of this one (chained
     * windows, as a ring host does); it carries the sibling's requester ID. */
    for (uint32_t s = 0; s < h->nadapters && n < a->rid_entries; s++) {
        const struct fab_adapter *sib = fab_adapter(f, h->adapter_first + s);
        if (sib != a)
            rid[n++] = (struct fab_rid_entry){ .used = 1, .rid = sib->rid };
    }
    atomic_fetch_add(&f->ctl->tlb_gen, 1);
    atomic_store(&a->db, 0);
    atomic_store(&a->db_mask, 0);
    for (uint32_t i = 0; i < TOPO_MAX_SPADS; i++)
        atomic_store(&a->spad[i], 0);
    struct fab_dma_chan *ch = fab_dma(f, a);
    for (uint32_t c = 0; c < a->dma_channels; c++) {
        atomic_store(&ch[c].head, 0);
        atomic_store(&ch[c].tail, 0);
        atomic_store(&ch[c].owner_pid, 0);
        atomic_store(&ch[c].lock, 0);
        ch[c].rid = fab_dma_rid(a->index_on_host);
        atomic_fetch_add(&ch[c].done_seq, 1);
        fab_futex_wake(&ch[c].done_seq, INT_MAX);
    }
}

/* ---------------------------------------------------------------- LUT */

uint32_t fab_lut_used(const struct fab *f, uint32_t ai)
{
    const struct fab_adapter *a = fab_adapter(f, ai);
    const struct fab_lut_entry *e = fab_lut(f, a);
    uint32_t n = 0;
    for (uint32_t i = 0; i < a->lut_entries; i++)
        n += e[i].owner_pid != 0 || (e[i].flags & FAB_LUT_AGENT) || atomic_load(&e[i].valid);
    return n;
}

int fab_lut_alloc(struct fab *f, uint32_t ai, int32_t owner, uint32_t flags)
{
    struct fab_adapter *a = fab_adapter(f, ai);
    struct fab_lut_entry *e = fab_lut(f, a);
    int rc = -ENOSPC;
    fab_lock(&f->ctl->ctl_lock);
    /* The agents' mailbox entries, which live as long as the fabric, come from the top of the
     * table: taken from the bottom, in between the ranges of the applications of the moment,
     * they would split the table and keep large windows from ever fitting again. */
    bool top = flags & FAB_LUT_AGENT;
    for (uint32_t k = 0; k < a->lut_entries; k++) {
        uint32_t i = top ? a->lut_entries - 1 - k : k;
        if (e[i].owner_pid == 0 && !(e[i].flags & FAB_LUT_AGENT) && !atomic_load(&e[i].valid)) {
            e[i].owner_pid = owner;
            e[i].flags = flags;
            rc = (int)i;
            break;
        }
    }
    fab_unlock(&f->ctl->ctl_lock);
    return rc;
}

int fab_lut_alloc_range(struct fab *f, uint32_t ai, uint32_t count, int32_t owner,
                        uint32_t flags)
{
    struct fab_adapter *a = fab_adapter(f, ai);
    struct fab_lut_entry *e = fab_lut(f, a);
    int rc = -ENOSPC;
    if (!count || count > a->lut_entries)
        return count ? -ENOSPC : -EINVAL;
    fab_lock(&f->ctl->ctl_lock);
    /* Agent ranges from the top of the table, as in fab_lut_alloc. */
    bool top = flags & FAB_LUT_AGENT;
    uint32_t run = 0;
    for (uint32_t k = 0; k < a->lut_entries; k++) {
        uint32_t i = top ? a->lut_entries - 1 - k : k;
        bool is_free = e[i].owner_pid == 0 && !(e[i].flags & FAB_LUT_AGENT) && !atomic_load(&e[i].valid);
        run = is_free ? run + 1 : 0;
        if (run == count) {
            uint32_t first = top ? i : i + 1 - count;
            for (uint32_t j = first; j < first + count; j++) {
                e[j].owner_pid = owner;
                e[j].flags = flags;
            }
            rc = (int)first;
            break;
        }
    }
    fab_unlock(&f->ctl->ctl_lock);
    return rc;
}

/* May `owner` program entry e? The agent (owner 0) may touch all; a process may take a free
 * entry or one it holds, never one the agent reserved for its mailboxes. */
static bool lut_may(const struct fab_lut_entry *e, int32_t owner)
{
    if (owner == 0)
        return true;
    return !(e->flags & FAB_LUT_AGENT) && (e->owner_pid == 0 || e->owner_pid == owner);
}

/* Program one entry without waiting for the mapping acknowledgements (the caller does, once
 * for a whole window). */
int fab_lut_set_noack(struct fab *f, uint32_t ai, uint32_t idx, uint32_t peer_host,
                      uint64_t peer_addr, int32_t owner, uint32_t flags)
{
    struct fab_adapter *a = fab_adapter(f, ai);
    if (idx >= a->lut_entries || peer_addr % a->lut_size)
        return -EINVAL;
    /* A multicast group (peer_host is its index) is checked under the lock, which its
     * removal takes to see that no entry targets it. */
    bool mcast = flags & FAB_LUT_MCAST;
    int peer = mcast ? -1 : fab_peer_on(f, ai, peer_host);
    if (peer < 0 && !mcast)
        return -ENOTCONN;
    struct fab_lut_entry *e = &fab_lut(f, a)[idx];
    fab_lock(&f->ctl->ctl_lock);
    if (mcast && fab_mcast_adapter(f, peer_host, a->host) != (int)ai) {
        fab_unlock(&f->ctl->ctl_lock);
        return -ENOTCONN;
    }
    if (!lut_may(e, owner)) {
        fab_unlock(&f->ctl->ctl_lock);
        return -EBUSY;
    }
    atomic_store(&e->valid, 0);
    e->peer_host = peer_host;
    e->peer_adapter = mcast ? UINT32_MAX : (uint32_t)peer;
    e->peer_addr = peer_addr;
    e->owner_pid = owner;
    e->flags = flags;
    atomic_store(&e->valid, 1);
    fab_unlock(&f->ctl->ctl_lock);
    return 0;
}

int fab_lut_set(struct fab *f, uint32_t ai, uint32_t idx, uint32_t peer_host, uint64_t peer_addr,
                int32_t owner, uint32_t flags)
{
    int rc = fab_lut_set_noack(f, ai, idx, peer_host, peer_addr, owner, flags);
    if (!rc)
        fab_map_changed(f);
    return rc;
}

/* Clear one entry; 1 when it was valid (mappings changed: the caller acknowledges), 0 when not,
 * or -errno. */
int fab_lut_clear_noack(struct fab *f, uint32_t ai, uint32_t idx, int32_t owner)
{
    struct fab_adapter *a = fab_adapter(f, ai);
    if (idx >= a->lut_entries)
        return -EINVAL;
    struct fab_lut_entry *e = &fab_lut(f, a)[idx];
    fab_lock(&f->ctl->ctl_lock);
    if (!lut_may(e, owner)) {
        fab_unlock(&f->ctl->ctl_lock);
        return -EBUSY;
    }
    bool was_valid = atomic_exchange(&e->valid, 0);
    e->owner_pid = 0;
    e->flags = 0;
    fab_unlock(&f->ctl->ctl_lock);
    return was_valid;
}

int fab_lut_clear(struct fab *f, uint32_t ai, uint32_t idx, int32_t owner)
{
    int rc = fab_lut_clear_noack(f, ai, idx, owner);
    if (rc > 0)
        fab_map_changed(f);
    return rc < 0 ? rc : 0;
}

/* ---------------------------------------------------------------- requester IDs */

bool fab_rid_present(const struct fab *f, uint32_t ai, uint16_t rid)
{
    const struct fab_adapter *a = fab_adapter(f, ai);
    const struct fab_rid_entry *r = fab_rid(f, a);
    for (uint32_t i = 0; i < a->rid_entries; i++)
        if (atomic_load(&r[i].used) && r[i].rid == rid)
            return true;
    return false;
}

uint32_t fab_rid_used(const struct fab *f, uint32_t ai)
{
    const struct fab_adapter *a = fab_adapter(f, ai);
    const struct fab_rid_entry *r = fab_rid(f, a);
    uint32_t n = 0;
    for (uint32_t i = 0; i < a->rid_entries; i++)
        n += atomic_load(&r[i].used) != 0;
    return n;
}

int fab_rid_add(struct fab *f, uint32_t ai, uint16_t rid, int32_t owner)
{
    struct fab_adapter *a = fab_adapter(f, ai);
    struct fab_rid_entry *r = fab_rid(f, a);
    int rc = -ENOSPC;
    fab_lock(&f->ctl->ctl_lock);
    for (uint32_t i = 0; i < a->rid_entries; i++)
        if (atomic_load(&r[i].used) && r[i].rid == rid) {
            rc = -EEXIST;
            goto out;
        }
    for (uint32_t i = 0; i < a->rid_entries; i++)
        if (!atomic_load(&r[i].used)) {
            r[i].rid = rid;
            r[i].owner_pid = owner;
            atomic_store(&r[i].used, 1);
            atomic_fetch_add(&f->ctl->tlb_gen, 1);
            rc = 0;
            break;
        }
out:
    fab_unlock(&f->ctl->ctl_lock);
    return rc;
}

int fab_rid_remove(struct fab *f, uint32_t ai, uint16_t rid)
{
    struct fab_adapter *a = fab_adapter(f, ai);
    struct fab_rid_entry *r = fab_rid(f, a);
    int rc = -ENOENT;
    fab_lock(&f->ctl->ctl_lock);
    for (uint32_t i = 0; i < a->rid_entries; i++)
        if (atomic_load(&r[i].used) && r[i].rid == rid) {
            atomic_store(&r[i].used, 0);
            r[i].owner_pid = 0;
            atomic_fetch_add(&f->ctl->tlb_gen, 1); /* cached reads by that requester go */
            rc = 0;
            break;
        }
    fab_unlock(&f->ctl->ctl_lock);
    return rc;
}

/* ---------------------------------------------------------------- doorbells and MSI */

/* Raise the events for newly pending bits on adapter a: the application vector and, for the
 * agent's bit, the host agent's mailbox wake-up. */
static void db_notify(struct fab *f, struct fab_adapter *a, uint32_t bits)
{
    uint32_t agent = fab_agent_bit(a);
    if (bits & ~agent & ~atomic_load(&a->db_mask)) {
        atomic_fetch_add(&a->db_seq, 1);
        fab_futex_wake(&a->db_seq, INT_MAX);
    }
    if (bits & agent) {
        struct fab_host *h = fab_host(f, a->host);
        atomic_fetch_add(&h->agent_wake, 1);
        fab_futex_wake(&h->agent_wake, 1);
    }
}

int fab_db_ring(struct fab *f, uint32_t from, uint32_t to, uint32_t bits)
{
    uint32_t hops;
    if (!fab_path_up(f, from, to, &hops))
        return 0; /* a posted write into a dead link: dropped, no error */
    struct fab_adapter *b = fab_adapter(f, to);
    bits &= (b->db_bits >= 32) ? UINT32_MAX : ((1u << b->db_bits) - 1);
    if (!bits)
        return 0;
    if (f->ctl->latency.enabled)
        fab_lat_delay(fab_lat_doorbell_ns(f, from, to));
    fab_db_raise(f, to, bits);
    return 0;
}

void fab_db_raise(struct fab *f, uint32_t ai, uint32_t bits)
{
    struct fab_adapter *a = fab_adapter(f, ai);
    atomic_fetch_or(&a->db, bits);
    db_notify(f, a, bits);
}

void fab_db_unmask(struct fab *f, uint32_t ai, uint32_t bits)
{
    struct fab_adapter *a = fab_adapter(f, ai);
    uint32_t old = atomic_fetch_and(&a->db_mask, ~bits);
    /* Unmasking a bit that is already pending must raise the event (Linux ntb.h contract). */
    uint32_t now_live = old & bits & atomic_load(&a->db);
    if (now_live) {
        atomic_fetch_add(&a->db_seq, 1);
        fab_futex_wake(&a->db_seq, INT_MAX);
    }
}

void fab_msi_raise(struct fab *f, uint32_t host, uint32_t vector)
{
    if (host >= f->ctl->nhosts || vector >= FAB_MSI_VECTORS)
        return;
    struct fab_host *h = fab_host(f, host);
    atomic_fetch_or(&h->msi_pending[vector / 64], 1ull << (vector % 64));
    atomic_fetch_add(&h->msi_seq[vector], 1);
    fab_futex_wake(&h->msi_seq[vector], INT_MAX);
}

/* ---------------------------------------------------------------- reaping */

void fab_reap_owner(struct fab *f, int32_t pid)
{
    if (pid <= 0)
        return;
    bool changed = false;
    fab_lock(&f->ctl->ctl_lock);
    for (uint32_t ai = 0; ai < f->ctl->nadapters; ai++) {
        struct fab_adapter *a = fab_adapter(f, ai);
        struct fab_lut_entry *e = fab_lut(f, a);
        for (uint32_t i = 0; i < a->lut_entries; i++)
            if (e[i].owner_pid == pid) {
                changed |= atomic_exchange(&e[i].valid, 0) != 0;
                e[i].owner_pid = 0;
                e[i].flags = 0;
            }
        struct fab_rid_entry *r = fab_rid(f, a);
        for (uint32_t i = 0; i < a->rid_entries; i++)
            if (atomic_load(&r[i].used) && r[i].owner_pid == pid) {
                atomic_store(&r[i].used, 0);
                r[i].owner_pid = 0;
                atomic_fetch_add(&f->ctl->tlb_gen, 1);
            }
        struct fab_dma_chan *ch = fab_dma(f, a);
        for (uint32_t c = 0; c < a->dma_channels; c++) {
            int32_t p = pid;
            atomic_compare_exchange_strong(&ch[c].owner_pid, &p, 0);
        }
    }
    fab_unlock(&f->ctl->ctl_lock);
    for (uint32_t h = 0; h < f->ctl->nhosts; h++) {
        struct fab_host *hh = fab_host(f, h);
        struct fab_iommu_map *m = fab_iommu_table(f, h);
        fab_lock(&hh->iommu_lock);
        for (uint32_t i = 0; i < hh->iommu_nmaps; i++) /* the high-water mark: none above */
            if (m[i].used && m[i].owner_pid == pid) {
                hh->iommu_idx_dirty = 1; /* the next to take the lock rebuilds the index */
                atomic_signal_fence(memory_order_seq_cst);
                m[i].used = 0;
                __atomic_fetch_add(&m[i].gen, 1, __ATOMIC_RELEASE);
                changed = true;
            }
        fab_unlock(&hh->iommu_lock);
    }
    fab_fn_raw_reap(f, pid);
    fab_mcast_reap(f, pid); /* after its LUT entries: its own do not keep its groups */
    if (changed)
        fab_map_changed(f);
}
