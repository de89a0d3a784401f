/*
 * Each host's IOMMU: its mapping table (requester ID, I/O virtual address -> physical, with
 * permissions), translation of a device's access, and the ring of faults it records.
 */
#define _GNU_SOURCE
#include <errno.h>
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

int fab_iommu_map(struct fab *f, uint32_t host, uint16_t rid, uint64_t iova, uint64_t phys,
                  uint64_t size, uint32_t perm, int32_t owner)
{
    if (host >= f->ctl->nhosts || !size || (iova | phys | size) & 4095 || iova + size < iova ||
        !(perm & (FAB_PERM_READ | FAB_PERM_WRITE)))
        return -EINVAL;
    struct fab_host *h = fab_host(f, host);
    struct fab_iommu_map *m = fab_iommu_table(f, host);
    int rc = -ENOSPC, free_slot = -1;
    fab_lock(&h->iommu_lock);
    for (uint32_t i = 0; i < h->iommu_nmaps; i++) {
        if (!m[i].used) {
            if (free_slot < 0)
                free_slot = (int)i;
            continue;
        }
        if (m[i].rid == rid && iova < m[i].iova + m[i].size && m[i].iova < iova + size) {
            rc = -EEXIST;
            goto out;
        }
    }
    if (free_slot < 0 && h->iommu_nmaps < FAB_IOMMU_MAPS)
        free_slot = (int)h->iommu_nmaps++;
    if (free_slot >= 0) {
        m[free_slot] = (struct fab_iommu_map){ .used = 1, .rid = rid, .perm = (uint16_t)perm,
                                               .iova = iova, .phys = phys, .size = size,
                                               .owner_pid = owner };
        rc = 0;
    }
out:
    fab_unlock(&h->iommu_lock);
    if (rc == 0 && h->iommu)
        fab_map_changed(f); /* a CPU window into this host may resolve now */
    return rc;
}

int fab_iommu_unmap(struct fab *f, uint32_t host, uint16_t rid, uint64_t iova, uint64_t size)
{
    if (host >= f->ctl->nhosts)
        return -EINVAL;
    struct fab_host *h = fab_host(f, host);
    struct fab_iommu_map *m = fab_iommu_table(f, host);
    int rc = -ENOENT;
    fab_lock(&h->iommu_lock);
    for (uint32_t i = 0; i < h->iommu_nmaps; i++)
        if (m[i].used && m[i].rid == rid && m[i].iova == iova && m[i].size == size) {
            m[i].used = 0;
            rc = 0;
            break;
        }
    fab_unlock(&h->iommu_lock);
    if (rc == 0 && h->iommu)
        fab_map_changed(f); /* nothing may reach the old pages after unmap returns */
    return rc;
}

int fab_iommu_translate(struct fab *f, uint32_t host, uint16_t rid, uint64_t iova, uint64_t len,
                        bool write, uint64_t *phys, uint64_t *contig)
{
    struct fab_host *h = fab_host(f, host);
    if (!h->iommu) {
        *phys = iova;
        *contig = len;
        return 0;
    }
    struct fab_iommu_map *m = fab_iommu_table(f, host);
    int rc = -EFAULT;
    uint64_t gap = len; /* on a miss: up to the next mapping of this requester */
    fab_lock(&h->iommu_lock);
    for (uint32_t i = 0; i < h->iommu_nmaps; i++) {
        if (m[i].used && m[i].rid == rid && m[i].iova > iova && m[i].iova - iova < gap)
            gap = m[i].iova - iova;
        if (!m[i].used || m[i].rid != rid || iova < m[i].iova || iova - m[i].iova >= m[i].size)
            continue;
        if (!(m[i].perm & (write ? FAB_PERM_WRITE : FAB_PERM_READ))) {
            rc = -EACCES;
            break;
        }
        *phys = m[i].phys + (iova - m[i].iova);
        uint64_t left = m[i].size - (iova - m[i].iova);
        *contig = left < len ? left : len;
        rc = 0;
        break;
    }
    fab_unlock(&h->iommu_lock);
    if (rc)
        *contig = gap;
    if (rc && !probing)
        fab_fault_record(f, host, rid, iova, write, rc);
    return rc;
}

