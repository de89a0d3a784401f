/*
 * What the NVMe controller core's files share (nvmc_regs.c, nvmc_prp.c, nvmc_admin.c,
 * nvmc_io.c): register access and the few steps one file does for another.
 */
#ifndef NTBLEND_NVME_INT_H
#define NTBLEND_NVME_INT_H

#include <string.h>

#include "nvmc_ctrl.h"

static inline uint32_t rd32(const struct nvmc_ctrl *c, uint32_t off)
{
    return __atomic_load_n((uint32_t *)(uintptr_t)(c->regs + off), __ATOMIC_ACQUIRE);
}

static inline void wr32(struct nvmc_ctrl *c, uint32_t off, uint32_t v)
{
    __atomic_store_n((uint32_t *)(uintptr_t)(c->regs + off), v, __ATOMIC_RELEASE);
}

static inline uint64_t rd64(const struct nvmc_ctrl *c, uint32_t off)
{
    return (uint64_t)rd32(c, off + 4) << 32 | rd32(c, off);
}

static inline uint32_t sq_db(uint32_t qid) { return NVME_REG_DBS + 8u * qid; }
static inline uint32_t cq_db(uint32_t qid) { return NVME_REG_DBS + 8u * qid + 4u; }

/* nvmc_regs.c */
void nvmc_feat_defaults(struct nvmc_ctrl *c);
void nvmc_flush_all(struct nvmc_ctrl *c);
bool nvmc_post_cqe(struct nvmc_ctrl *c, uint16_t cqid, struct nvme_cqe *cqe);
bool nvmc_take_abort(struct nvmc_ctrl *c, uint32_t sqid, uint32_t cid);
/* nvmc_prp.c */
uint16_t nvmc_prp_xfer(struct nvmc_ctrl *c, const struct nvme_sqe *sqe, void *buf,
                       uint64_t len, bool to_host);
uint64_t nvmc_max_xfer(const struct nvmc_ctrl *c);
/* nvmc_admin.c */
bool nvmc_admin(struct nvmc_ctrl *c, const struct nvme_sqe *sqe, struct nvme_cqe *cqe);

#endif
