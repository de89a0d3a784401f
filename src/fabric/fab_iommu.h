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
int fab_iommu_map(struct fab *f, uint32_t host, uint16_t rid, uint64_t iova, uint64_t phys,
                  uint64_t size, uint32_t perm, int32_t owner);
int fab_iommu_unmap(struct fab *f, uint32_t host, uint16_t rid, uint64_t iova, uint64_t size);
/* Translate (iommu on) or pass through (off). -EFAULT/-EACCES record a fault. */
int fab_iommu_translate(struct fab *f, uint32_t host, uint16_t rid, uint64_t iova,
                        uint64_t len, bool write, uint64_t *phys, uint64_t *contig);
void fab_fault_record(struct fab *f, uint32_t host, uint16_t rid, uint64_t addr, bool write,
                      int reason);
/* Drop everything a dead process held: IOMMU maps, LUT and RID entries, DMA channels. */
void fab_reap_owner(struct fab *f, int32_t pid);


struct fab_iommu_map *fab_iommu_table(const struct fab *f, uint32_t host);
struct fab_fault *fab_fault_ring(const struct fab *f, uint32_t host);

#endif
