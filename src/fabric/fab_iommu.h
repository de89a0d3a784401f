/*
 * Each host's IOMMU (iommu.c): the mapping table, translation of a device's access, and the
 * ring of faults it records.
 */
#ifndef NTBLEND_FAB_IOMMU_H
#define NTBLEND_FAB_IOMMU_H

#include "fab_state.h"

/* ---- IOMMU (iommu.c) ---- */
/* While set (this thread), translation faults are not recorded: resolution that only asks. */
void fab_iommu_set_probing(bool on);
bool fab_iommu_probing(void);
/* perm: FAB_PERM_READ and/or FAB_PERM_WRITE, and FAB_PERM_STREAM for a streaming mapping.
 * -EEXIST: overlaps a mapping of that requester; -ENOSPC: the table is full. */
int fab_iommu_map(struct fab *f, uint32_t host, uint16_t rid, uint64_t iova, uint64_t phys,
                  uint64_t size, uint32_t perm, int32_t owner);
int fab_iommu_unmap(struct fab *f, uint32_t host, uint16_t rid, uint64_t iova, uint64_t size);
/* Translate (iommu on) or pass through (off). -EFAULT/-EACCES record a fault. cpu: the
 * access started at a CPU (a load or store through a window), which streaming mappings do
 * not serve. O(log n) in the host's mappings. */
int fab_iommu_translate(struct fab *f, uint32_t host, uint16_t rid, uint64_t iova,
                        uint64_t len, bool write, bool cpu, uint64_t *phys, uint64_t *contig);
/* The mapping a translation went through: iova..iova+size to phys.. (the whole address space,
 * one to one, when the IOMMU is off). */
struct fab_iommu_span {
    uint64_t iova, phys, size;
};
/* The same, and for a translation by a mapping (iommu on) where its slot's generation is and
 * what it was (*gen_at NULL otherwise): the translation holds while *gen_at == *gen, until the
 * mapping is unmapped (cached translations check it; see resolve.c). span (may be NULL): the
 * mapping, on success. */
int fab_iommu_translate_gen(struct fab *f, uint32_t host, uint16_t rid, uint64_t iova,
                            uint64_t len, bool write, bool cpu, uint64_t *phys, uint64_t *contig,
                            const uint32_t **gen_at, uint32_t *gen, struct fab_iommu_span *span);
/* Rebuild the host's index of its mappings (after slots were changed behind it). */
void fab_iommu_reindex(struct fab *f, uint32_t host);
void fab_fault_record(struct fab *f, uint32_t host, uint16_t rid, uint64_t addr, bool write,
                      int reason);
/* Drop everything a dead process held: IOMMU maps, LUT and RID entries, DMA channels. */
void fab_reap_owner(struct fab *f, int32_t pid);


struct fab_iommu_map *fab_iommu_table(const struct fab *f, uint32_t host);
struct fab_fault *fab_fault_ring(const struct fab *f, uint32_t host);

#endif
