/*
 * Internals of the emulated fabric's backend (backend_emu.c, backend_emu_ntb.c): the NTB
 * device operations the table in backend_emu.c points at.
 */
#ifndef NTBLEND_BACKEND_EMU_H
#define NTBLEND_BACKEND_EMU_H

#include "fabric.h"
#include "runtime.h"

int emu_adapter_info(struct rt *rt, uint32_t adapter, struct ntb_adapter_info *o);
int emu_mw_set(struct rt *rt, uint32_t adapter, uint32_t widx, uint32_t peer_host, uint64_t addr);
int emu_mw_clear(struct rt *rt, uint32_t adapter, uint32_t widx);
int emu_mw_alloc(struct rt *rt, uint32_t adapter);
void *emu_mw_cpu_map(struct rt *rt, uint32_t adapter, uint32_t first, uint32_t count);
void emu_link_set(struct rt *rt, uint32_t adapter, bool on);
_Atomic uint32_t *emu_link_word(struct rt *rt, uint32_t adapter);
uint64_t emu_db_read(struct rt *rt, uint32_t a);
void emu_db_set(struct rt *rt, uint32_t a, uint64_t bits);
void emu_db_clear(struct rt *rt, uint32_t a, uint64_t bits);
uint64_t emu_db_mask_read(struct rt *rt, uint32_t a);
void emu_db_mask_set(struct rt *rt, uint32_t a, uint64_t bits);
void emu_db_mask_clear(struct rt *rt, uint32_t a, uint64_t bits);
int emu_peer_db_set(struct rt *rt, uint32_t a, uint32_t peer, uint64_t bits);
_Atomic uint32_t *emu_db_word(struct rt *rt, uint32_t a);
uint32_t emu_spad_read(struct rt *rt, uint32_t a, uint32_t i);
void emu_spad_write(struct rt *rt, uint32_t a, uint32_t i, uint32_t v);
void *emu_dma_chan_get(struct rt *rt, uint32_t adapter);
void emu_dma_chan_put(struct rt *rt, void *chan);
int64_t emu_dma_submit(struct rt *rt, void *chan, uint64_t dst, uint64_t src, uint64_t len,
                       bool interrupt);
int emu_dma_abort(struct rt *rt, void *chan);
int emu_dma_wait(struct rt *rt, void *chan, int64_t cookie, int timeout_ms);
int emu_dma_buf_map(struct rt *rt, uint32_t adapter, uint64_t phys, uint64_t len, bool on);
int emu_iommu_on(struct rt *rt, uint32_t host);
int emu_iommu_map(struct rt *rt, uint16_t rid, uint64_t iova, uint64_t phys, uint64_t len,
                  unsigned perm);
int emu_iommu_unmap(struct rt *rt, uint16_t rid, uint64_t iova, uint64_t len);
int emu_iommu_faults(struct rt *rt, uint32_t host, struct ntb_fault *out, int max, uint64_t *total);

#endif
