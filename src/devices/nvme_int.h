/*
 * What the NVMe controller core's files share (nvme_regs.c, nvme_prp.c, nvme_admin.c,
 * nvme_io.c): register access and the few steps one file does for another.
 */
#ifndef NTBLEND_NVME_INT_H
#define NTBLEND_NVME_INT_H

#include <string.h>

#include "nvme_ctrl.h"

static inline uint32_t rd32(const struct nvme_ctrl *c, uint32_t off)
{
    return __atomic_load_n((uint32_t *)(uintptr_t)(c->regs + off), __ATOMIC_ACQUIRE);
}

static inline void wr32(struct nvme_ctrl *c, uint32_t off, uint32_t v)
{
    __atomic_store_n((uint32_t *)(uintptr_t)(c->regs + off), v, __ATOMIC_RELEASE);
}

static inline uint64_t rd64(const struct nvme_ctrl *c, uint32_t off)
{
    return (uint64_t)rd32(c, off + 4) << 32 | rd32(c, off);
}

static inline uint32_t sq_db(uint32_t qid) { return NVME_REG_DBS + 8u * qid; }
static inline uint32_t cq_db(uint32_t qid) { return NVME_REG_DBS + 8u * qid + 4u; }

/* nvme_regs.c */
void nvme_feat_defaults(struct nvme_ctrl *c);
void nvme_flush_all(struct nvme_ctrl *c);
bool nvme_post_cqe(struct nvme_ctrl *c, uint16_t cqid, struct nvme_cqe *cqe);
bool nvme_take_abort(struct nvme_ctrl *c, uint32_t sqid, uint32_t cid);
/* nvme_prp.c */
uint16_t nvme_prp_xfer(struct nvme_ctrl *c, const struct nvme_sqe *sqe, void *buf,
                       uint64_t len, bool to_host);
uint64_t nvme_max_xfer(const struct nvme_ctrl *c);
/* nvme_admin.c */
bool nvme_admin(struct nvme_ctrl *c, const struct nvme_sqe *sqe, struct nvme_cqe *cqe);

#endif
