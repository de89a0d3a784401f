/*
 * Each host's IOMMU: its mapping table (requester ID, I/O virtual address -> physical, with
 * permissions), translation of a device's access, and the ring of faults it records.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "fabric.h"

struct fab_iommu_map *fab_iommu_table(const struct fab *f, uint32_t host)
{
    return (struct fab_iommu_map *)((char *)f->ctl + f->ctl->off_iommu) +
           (size_t)host * FAB_IOMMU_MAPS;
}

struct fab_fault *fab_fault_ring(const struct fab *f, uint32_t host)
{
    char *after_maps = (char *)f->ctl + f->ctl->off_iommu +
                       (size_t)f->ctl->nhosts * FAB_IOMMU_MAPS * sizeof(struct fab_iommu_map);
    return (struct fab_fault *)after_maps + (size_t)host * FAB_FAULT_RING;
}


/* ---------------------------------------------------------------- IOMMU */

/* Set while fab_resolve_probe runs: resolution without recording faults. */
static _Thread_local bool probing;

void fab_iommu_set_probing(bool on) { probing = on; }
bool fab_iommu_probing(void) { return probing; }

void fab_fault_record(struct fab *f, uint32_t host, uint16_t rid, uint64_t addr, bool write,
                      int reason)
{
    struct fab_host *h = fab_host(f, host);
    uint64_t n = atomic_fetch_add(&h->fault_count, 1);
    struct fab_fault *slot = &fab_fault_ring(f, host)[n % FAB_FAULT_RING];
    *slot = (struct fab_fault){ .rid = rid, .write = write, .reason = reason, .addr = addr,
                                .when_ns = fab_now_ns() };
    atomic_fetch_add(&h->fault_seq, 1);
    fab_futex_wake(&h->fault_seq, 64);
}

/* (rid, iova) order of the index. */
static int key_cmp(uint16_t rid_a, uint64_t iova_a, const struct fab_iommu_map *b)
{
    if (rid_a != b->rid)
        return rid_a < b->rid ? -1 : 1;
    return iova_a < b->iova ? -1 : iova_a > b->iova;
}

/* The first index position whose mapping sorts after (rid, iova). Lock held. */
static uint32_t idx_upper(const struct fab_host *h, const struct fab_iommu_map *m, uint16_t rid,
                          uint64_t iova)
{
    uint32_t lo = 0, hi = h->iommu_nidx;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (key_cmp(rid, iova, &m[h->iommu_idx[mid]]) >= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static struct fab_iommu_map *sort_table; /* for idx_cmp (the lock serialises rebuilds) */

static int idx_cmp(const void *a, const void *b)
{
    const struct fab_iommu_map *y = &sort_table[*(const uint16_t *)b];
    const struct fab_iommu_map *x = &sort_table[*(const uint16_t *)a];
    return key_cmp(x->rid, x->iova, y);
}

/* Rebuild the index from the used slots (after a reap, or when its last writer died half-way).
 * Lock held. */
static void idx_rebuild(struct fab *f, uint32_t host)
{
    struct fab_host *h = fab_host(f, host);
    struct fab_iommu_map *m = fab_iommu_table(f, host);
    uint32_t n = 0, top = 0;
    for (uint32_t i = 0; i < h->iommu_nmaps && i < FAB_IOMMU_MAPS; i++)
        if (m[i].used) {
            h->iommu_idx[n++] = (uint16_t)i;
            top = i + 1;
        }
    static pthread_mutex_t sort_lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&sort_lock);
    sort_table = m;
    qsort(h->iommu_idx, n, sizeof h->iommu_idx[0], idx_cmp);
    pthread_mutex_unlock(&sort_lock);
    h->iommu_nidx = n;
    h->iommu_nmaps = top;
    atomic_signal_fence(memory_order_seq_cst);
    h->iommu_idx_dirty = 0;
}

/* Take the host's IOMMU lock; repair the index if the previous holder died changing it. */
static void iommu_lock(struct fab *f, uint32_t host)
{
    struct fab_host *h = fab_host(f, host);
    fab_lock(&h->iommu_lock);
    if (h->iommu_idx_dirty)
        idx_rebuild(f, host);
}

void fab_iommu_reindex(struct fab *f, uint32_t host)
{
    fab_lock(&fab_host(f, host)->iommu_lock);
    idx_rebuild(f, host);
    fab_unlock(&fab_host(f, host)->iommu_lock);
}

int fab_iommu_map(struct fab *f, uint32_t host, uint16_t rid, uint64_t iova, uint64_t phys,
                  uint64_t size, uint32_t perm, int32_t owner)
{
    if (host >= f->ctl->nhosts || !size || (iova | phys | size) & 4095 || iova + size < iova ||
        !(perm & (FAB_PERM_READ | FAB_PERM_WRITE)) ||
        (perm & ~(FAB_PERM_READ | FAB_PERM_WRITE | FAB_PERM_STREAM)))
        return -EINVAL;
    struct fab_host *h = fab_host(f, host);
    struct fab_iommu_map *m = fab_iommu_table(f, host);
    int rc = 0;
    iommu_lock(f, host);
    /* Overlaps only its neighbours in (rid, iova) order, if anything. */
    uint32_t pos = idx_upper(h, m, rid, iova);
    const struct fab_iommu_map *before = pos ? &m[h->iommu_idx[pos - 1]] : NULL;
    const struct fab_iommu_map *after = pos < h->iommu_nidx ? &m[h->iommu_idx[pos]] : NULL;
    if ((before && before->rid == rid && iova - before->iova < before->size) ||
        (after && after->rid == rid && after->iova - iova < size)) {
        rc = -EEXIST;
        goto out;
    }
    uint32_t slot = h->iommu_nmaps;
    if (h->iommu_nidx < h->iommu_nmaps) /* a hole below the high-water mark */
        for (slot = 0; m[slot].used; slot++)
            ;
    if (slot >= FAB_IOMMU_MAPS) {
        rc = -ENOSPC;
        goto out;
    }
    m[slot] = (struct fab_iommu_map){ .rid = rid, .perm = (uint16_t)perm, .iova = iova,
                                      .phys = phys, .size = size, .owner_pid = owner,
                                      .gen = m[slot].gen };
    h->iommu_idx_dirty = 1;
    atomic_signal_fence(memory_order_seq_cst);
    m[slot].used = 1;
    if (slot == h->iommu_nmaps)
        h->iommu_nmaps++;
    for (uint32_t i = h->iommu_nidx; i > pos; i--)
        h->iommu_idx[i] = h->iommu_idx[i - 1];
    h->iommu_idx[pos] = (uint16_t)slot;
    h->iommu_nidx++;
    atomic_signal_fence(memory_order_seq_cst);
    h->iommu_idx_dirty = 0;
out:
    fab_unlock(&h->iommu_lock);
    if (rc == 0 && h->iommu && !(perm & FAB_PERM_STREAM))
        fab_map_changed(f); /* a CPU window into this host may resolve now */
    /* A new streaming mapping changes no translation a device has cached (only successes are
     * cached, and mappings do not overlap): nothing to invalidate. */
    return rc;
}

int fab_iommu_unmap(struct fab *f, uint32_t host, uint16_t rid, uint64_t iova, uint64_t size)
{
    if (host >= f->ctl->nhosts)
        return -EINVAL;
    struct fab_host *h = fab_host(f, host);
    struct fab_iommu_map *m = fab_iommu_table(f, host);
    int rc = -ENOENT;
    uint32_t perm = 0;
    iommu_lock(f, host);
    uint32_t pos = idx_upper(h, m, rid, iova);
    struct fab_iommu_map *e = pos ? &m[h->iommu_idx[pos - 1]] : NULL;
    if (e && e->rid == rid && e->iova == iova && e->size == size) {
        perm = e->perm;
        h->iommu_idx_dirty = 1;
        atomic_signal_fence(memory_order_seq_cst);
        e->used = 0;
        /* Devices' cached translations through this slot are checked against its generation:
         * stale from here, before unmap returns. */
        __atomic_fetch_add(&e->gen, 1, __ATOMIC_RELEASE);
        for (uint32_t i = pos - 1; i + 1 < h->iommu_nidx; i++)
            h->iommu_idx[i] = h->iommu_idx[i + 1];
        h->iommu_nidx--;
        while (h->iommu_nmaps && !m[h->iommu_nmaps - 1].used)
            h->iommu_nmaps--;
        atomic_signal_fence(memory_order_seq_cst);
        h->iommu_idx_dirty = 0;
        rc = 0;
    }
    fab_unlock(&h->iommu_lock);
    /* Nothing may reach the old pages after unmap returns. A streaming mapping was reached by
     * devices only, whose cached translations of it its slot's generation ends (above); any
     * other may change what a CPU window reaches. */
    if (rc == 0 && h->iommu && !(perm & FAB_PERM_STREAM))
        fab_map_changed(f);
    return rc;
}

int fab_iommu_translate(struct fab *f, uint32_t host, uint16_t rid, uint64_t iova, uint64_t len,
                        bool write, bool cpu, uint64_t *phys, uint64_t *contig)
{
    return fab_iommu_translate_gen(f, host, rid, iova, len, write, cpu, phys, contig, NULL, NULL,
                                   NULL);
}

int fab_iommu_translate_gen(struct fab *f, uint32_t host, uint16_t rid, uint64_t iova,
                            uint64_t len, bool write, bool cpu, uint64_t *phys, uint64_t *contig,
                            const uint32_t **gen_at, uint32_t *gen, struct fab_iommu_span *span)
{
    struct fab_host *h = fab_host(f, host);
    if (gen_at)
        *gen_at = NULL;
    if (!h->iommu) {
        *phys = iova;
        *contig = len;
        if (span)
            *span = (struct fab_iommu_span){ .iova = 0, .phys = 0, .size = UINT64_MAX };
        return 0;
    }
    struct fab_iommu_map *m = fab_iommu_table(f, host);
    int rc = -EFAULT;
    uint64_t gap = len; /* on a miss: up to the next mapping of this requester */
    iommu_lock(f, host);
    uint32_t pos = idx_upper(h, m, rid, iova);
    const struct fab_iommu_map *e = pos ? &m[h->iommu_idx[pos - 1]] : NULL;
    /* What a CPU reaches through a window is mapped once; streaming mappings come and go
     * for devices only, so a CPU access does not see them. */
    if (e && e->rid == rid && iova - e->iova < e->size && !(cpu && (e->perm & FAB_PERM_STREAM))) {
        if (!(e->perm & (write ? FAB_PERM_WRITE : FAB_PERM_READ))) {
            rc = -EACCES;
        } else {
            *phys = e->phys + (iova - e->iova);
            uint64_t left = e->size - (iova - e->iova);
            *contig = left < len ? left : len;
            if (span)
                *span = (struct fab_iommu_span){ .iova = e->iova, .phys = e->phys, .size = e->size };
            if (gen_at) { /* read under the lock: an unmap after it bumps it */
                *gen_at = &e->gen;
                *gen = __atomic_load_n(&e->gen, __ATOMIC_RELAXED);
            }
            rc = 0;
        }
    } else if (pos < h->iommu_nidx) {
        const struct fab_iommu_map *next = &m[h->iommu_idx[pos]];
        if (next->rid == rid && next->iova - iova < gap)
            gap = next->iova - iova;
    }
    fab_unlock(&h->iommu_lock);
    if (rc)
        *contig = gap;
    if (rc && !probing)
        fab_fault_record(f, host, rid, iova, write, rc);
    return rc;
}
