/*
 * The NVMe controller core, registers and queues: CAP/VS and the other read-only registers,
 * CC (enable, shutdown, reset), doorbells, round-robin arbitration over the submission
 * queues, completion posting, asynchronous events and interrupts (NVMe 1.4 §3, §4).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hop.h"
#include "nvmc_int.h"

/* ---------------------------------------------------------------- registers */

static uint64_t cap_value(const struct nvmc_ctrl *c)
{
    return (uint64_t)NVMC_MQES | 1ull << 16 /* CQR */ | 20ull << 24 /* TO: 10 s */ |
           1ull << 37 /* CSS: NVM */ | 0ull << 48 /* MPSMIN 4K */ | 4ull << 52 /* MPSMAX 64K */ |
           (c->p.cmb_size ? 1ull << 57 : 0);
}

static void write_ro_regs(struct nvmc_ctrl *c)
{
    uint64_t cap = cap_value(c);
    wr32(c, NVME_REG_CAP, (uint32_t)cap);
    wr32(c, NVME_REG_CAP + 4, (uint32_t)(cap >> 32));
    wr32(c, NVME_REG_VS, NVME_VS_1_4);
    if (c->p.cmb_size) {
        wr32(c, NVME_REG_CMBLOC, 2u); /* BIR 2, offset 0 */
        /* SQS, LISTS, RDS, WDS; SZU 4 KiB */
        wr32(c, NVME_REG_CMBSZ, 0x1du | (uint32_t)(c->p.cmb_size >> 12) << 12);
    } else {
        wr32(c, NVME_REG_CMBLOC, 0);
        wr32(c, NVME_REG_CMBSZ, 0);
    }
}

void nvmc_feat_defaults(struct nvmc_ctrl *c)
{
    memset(c->feat, 0, sizeof c->feat);
    c->feat[NVME_FEAT_TEMP] = 0x0157; /* 343 K */
    c->feat[NVME_FEAT_VWC] = 1;
    c->nsq_alloc = c->ncq_alloc = c->p.queues;
    c->feat[NVME_FEAT_NUM_QUEUES] = (c->p.queues - 1) << 16 | (c->p.queues - 1);
}

void nvmc_reset(struct nvmc_ctrl *c)
{
    for (uint32_t i = 0; i <= c->p.queues; i++) {
        memset(&c->sq[i], 0, sizeof c->sq[i]);
        memset(&c->cq[i], 0, sizeof c->cq[i]);
    }
    c->naer = 0;
    c->aer_pending = c->aer_masked = 0;
    c->naborts = 0;
    c->io_queue_created = false;
    c->enabled = c->fatal = c->shut = false;
    nvmc_feat_defaults(c);
    for (uint32_t i = 0; i <= c->p.queues; i++) {
        wr32(c, sq_db(i), 0);
        wr32(c, cq_db(i), 0);
    }
    wr32(c, NVME_REG_CSTS, 0);
}

int nvmc_ctrl_init(struct nvmc_ctrl *c, const struct nvmc_params *p,
                   const struct nvmc_backend *be, volatile uint8_t *regs)
{
    int *fds = c->ns_fd;
    const uint8_t **maps = c->ns_map;
    memset(c, 0, sizeof *c);
    c->ns_fd = fds;
    c->ns_map = maps;
    c->p = *p;
    if (c->p.queues < 1 || c->p.queues > NVMC_MAX_QUEUES || c->p.namespaces < 1 ||
        c->p.ns_size < NVMC_LBA_SIZE || c->p.mdts > 16)
        return -EINVAL;
    if (!c->p.vectors)
        c->p.vectors = c->p.queues + 1;
    c->be = *be;
    c->regs = regs;
    c->nlba = c->p.ns_size >> NVMC_LBA_SHIFT;
    c->sq = calloc(c->p.queues + 1, sizeof *c->sq);
    c->cq = calloc(c->p.queues + 1, sizeof *c->cq);
    if (!c->sq || !c->cq) {
        free(c->sq);
        free(c->cq);
        return -ENOMEM;
    }
    c->page = 4096;
    nvmc_reset(c);
    write_ro_regs(c);
    return 0;
}

void nvmc_ctrl_fini(struct nvmc_ctrl *c)
{
    free(c->sq);
    free(c->cq);
    c->sq = NULL;
    c->cq = NULL;
}

void nvmc_flush_all(struct nvmc_ctrl *c)
{
    for (uint32_t i = 0; i < c->p.namespaces; i++)
        if (c->ns_fd && c->ns_fd[i] >= 0)
            fsync(c->ns_fd[i]);
}

static void set_fatal(struct nvmc_ctrl *c)
{
    c->fatal = true;
    wr32(c, NVME_REG_CSTS, rd32(c, NVME_REG_CSTS) | NVME_CSTS_CFS);
}

bool nvmc_regs_update(struct nvmc_ctrl *c)
{
    write_ro_regs(c);
    uint32_t cc = rd32(c, NVME_REG_CC);
    if (!(cc & NVME_CC_EN)) {
        if (c->enabled || c->fatal || rd32(c, NVME_REG_CSTS))
            nvmc_reset(c);
        return false;
    }
    if (!c->enabled && !c->fatal) {
        uint32_t aqa = rd32(c, NVME_REG_AQA);
        uint64_t asq = rd64(c, NVME_REG_ASQ), acq = rd64(c, NVME_REG_ACQ);
        uint32_t mps = NVME_CC_MPS(cc), page = 4096u << (mps > 4 ? 0 : mps);
        uint32_t asqs = (aqa & 0xfff) + 1, acqs = ((aqa >> 16) & 0xfff) + 1;
        if (NVME_CC_CSS(cc) != 0 || mps > 4 || NVME_CC_AMS(cc) != 0 || asqs < 2 || acqs < 2 ||
            (asq & (page - 1)) || (acq & (page - 1))) {
            set_fatal(c);
            return false;
        }
        c->page = page;
        for (uint32_t i = 0; i <= c->p.queues; i++) {
            wr32(c, sq_db(i), 0);
            wr32(c, cq_db(i), 0);
        }
        c->sq[0] = (struct nvmc_sq){ .used = true, .cqid = 0, .size = asqs, .base = asq };
        c->cq[0] = (struct nvmc_cq){ .used = true, .ien = true, .iv = 0, .size = acqs,
                                     .phase = 1, .nsq = 1, .base = acq };
        c->enabled = true;
        wr32(c, NVME_REG_CSTS, NVME_CSTS_RDY);
    }
    if (c->enabled && !c->shut && NVME_CC_SHN(cc)) {
        wr32(c, NVME_REG_CSTS, (rd32(c, NVME_REG_CSTS) & ~NVME_CSTS_SHST_MASK) |
                                   NVME_CSTS_SHST_OCCURRING);
        nvmc_flush_all(c);
        c->shut = true;
        wr32(c, NVME_REG_CSTS, (rd32(c, NVME_REG_CSTS) & ~NVME_CSTS_SHST_MASK) |
                                   NVME_CSTS_SHST_COMPLETE);
    }
    return c->enabled && !c->fatal && !c->shut;
}

/* ---------------------------------------------------------------- queues */

static void raise_event(struct nvmc_ctrl *c, uint32_t info)
{
    c->aer_pending |= 1u << info;
}

/* Doorbells: take valid new values; invalid writes are ignored and raise an error event. */
static void refresh_doorbells(struct nvmc_ctrl *c)
{
    for (uint32_t q = 0; q <= c->p.queues; q++) {
        uint32_t v = rd32(c, sq_db(q));
        struct nvmc_sq *sq = &c->sq[q];
        if (!sq->used) {
            if (v) {
                raise_event(c, NVME_AER_INFO_INVALID_DB);
                wr32(c, sq_db(q), 0);
            }
        } else if (v != sq->db) {
            sq->db = v;
            if (v < sq->size)
                sq->tail = v;
            else
                raise_event(c, NVME_AER_INFO_INVALID_DB_VALUE);
        }
        v = rd32(c, cq_db(q));
        struct nvmc_cq *cq = &c->cq[q];
        if (!cq->used) {
            if (v) {
                raise_event(c, NVME_AER_INFO_INVALID_DB);
                wr32(c, cq_db(q), 0);
            }
        } else if (v != cq->db) {
            cq->db = v;
            if (v < cq->size)
                cq->head = v;
            else
                raise_event(c, NVME_AER_INFO_INVALID_DB_VALUE);
        }
    }
}

static bool cq_full(const struct nvmc_cq *q) { return (q->tail + 1) % q->size == q->head; }

static bool dnr_for(uint16_t st)
{
    return st != NVME_SUCCESS && st != NVME_DATA_TRANSFER_ERROR && st != NVME_ABORT_REQUESTED &&
           st != NVME_ABORT_SQ_DELETION && st != NVME_INTERNAL_ERROR &&
           (st >> 8) != NVME_SCT_MEDIA;
}

static void log_error(struct nvmc_ctrl *c, uint16_t sqid, uint16_t cid, uint16_t st,
                      uint32_t nsid)
{
    memmove(&c->errlog[1], &c->errlog[0], sizeof c->errlog[0] * (NVMC_ERR_LOG - 1));
    c->errlog[0] = (struct nvmc_err_entry){ .count = ++c->err_count, .sqid = sqid, .cid = cid,
                                            .status = st, .loc = 0xffff, .nsid = nsid };
}

/* Post a completion (cqe->status holds SCT/SC and DNR, phase is added here). */
bool nvmc_post_cqe(struct nvmc_ctrl *c, uint16_t cqid, struct nvme_cqe *cqe)
{
    struct nvmc_cq *q = &c->cq[cqid];
    if (!q->used || cq_full(q))
        return false;
    uint16_t st = cqe->status;
    cqe->status = (uint16_t)((st << 1) | (dnr_for(st & 0x7ff) ? NVME_DNR : 0) | q->phase);
    uint64_t at = q->base + (uint64_t)q->tail * 16;
    /* One posted write, whose last dword (the phase tag the driver polls) lands last
     * (struct nvmc_backend). One that finds no memory (its host gone, its window torn down)
     * is lost on the way, and the controller, which cannot know, goes on. */
    (void)c->be.dma_write(c->be.ctx, at, cqe, sizeof *cqe);
    if (++q->tail == q->size) {
        q->tail = 0;
        q->phase ^= 1;
    }
    q->irq_due = true;
    return true;
}

static void deliver_events(struct nvmc_ctrl *c)
{
    while (c->naer && c->aer_pending && !(c->aer_masked & (1u << NVME_AER_TYPE_ERROR)) &&
           !cq_full(&c->cq[0])) {
        uint32_t info = (uint32_t)__builtin_ctz(c->aer_pending);
        c->aer_pending &= ~(1u << info);
        struct nvme_cqe cqe = { .dw0 = NVME_AER_TYPE_ERROR | info << 8 | NVME_LOG_ERROR << 16,
                                .sqhd = (uint16_t)c->sq[0].head, .sqid = 0,
                                .cid = c->aer_cid[0], .status = NVME_SUCCESS };
        memmove(&c->aer_cid[0], &c->aer_cid[1], sizeof c->aer_cid[0] * (NVMC_AERL));
        c->naer--;
        c->aer_masked |= 1u << NVME_AER_TYPE_ERROR;
        nvmc_post_cqe(c, 0, &cqe);
    }
}

static void fire_irqs(struct nvmc_ctrl *c)
{
    for (uint32_t q = 0; q <= c->p.queues; q++) {
        struct nvmc_cq *cq = &c->cq[q];
        if (cq->irq_due) {
            cq->irq_due = false;
            if (cq->used && cq->ien && c->be.irq)
                c->be.irq(c->be.ctx, cq->iv);
        }
    }
}

bool nvmc_take_abort(struct nvmc_ctrl *c, uint32_t sqid, uint32_t cid)
{
    for (uint32_t i = 0; i < c->naborts; i++)
        if (c->aborts[i][0] == sqid && c->aborts[i][1] == cid) {
            memmove(&c->aborts[i], &c->aborts[i + 1], sizeof c->aborts[0] * (c->naborts - i - 1));
            c->naborts--;
            return true;
        }
    return false;
}

/* Fetch and execute the command at the head of SQ q and post its completion. false when the
 * fetch failed: the admin SQ's makes the controller fatal; an I/O SQ's stops that SQ only (its
 * memory is gone: a client host died or its window was torn down), so one host's failure does
 * not take the device from the others. The error is logged; deleting the SQ clears it. */
static bool serve_one(struct nvmc_ctrl *c, uint32_t q)
{
    struct nvmc_sq *sq = &c->sq[q];
    struct nvme_sqe sqe;
    if (c->be.dma_read(c->be.ctx, sq->base + (uint64_t)sq->head * 64, &sqe, sizeof sqe)) {
        if (q == 0) {
            set_fatal(c);
        } else {
            sq->stalled = true;
            log_error(c, (uint16_t)q, 0xffff, NVME_DATA_TRANSFER_ERROR, 0);
        }
        return false;
    }
    sq->head = (sq->head + 1) % sq->size;
    if (q)
        hop_mark("fetch", q << 16 | sqe.cid);
    struct nvme_cqe cqe = { 0 };
    bool done = true;
    if (nvmc_take_abort(c, q, sqe.cid))
        cqe.status = NVME_ABORT_REQUESTED;
    else
        done = nvmc_exec(c, (uint16_t)q, &sqe, &cqe);
    if (!done)
        return true; /* an AER: completes later */
    if (cqe.status && cqe.status != NVME_ABORT_REQUESTED && cqe.status != NVME_ABORT_SQ_DELETION)
        log_error(c, (uint16_t)q, sqe.cid, cqe.status, sqe.nsid);
    cqe.sqhd = (uint16_t)sq->head;
    cqe.sqid = (uint16_t)q;
    cqe.cid = sqe.cid;
    /* An admin command may have deleted queues, but never the admin SQ itself. */
    nvmc_post_cqe(c, sq->used ? sq->cqid : 0, &cqe);
    if (q)
        hop_mark("post", q << 16 | sqe.cid);
    return true;
}

/* Arbitration Burst (§5.21.1.1): at most 2^AB commands from one SQ per turn; 7: no limit. */
static uint32_t arb_burst(const struct nvmc_ctrl *c)
{
    uint32_t ab = NVME_ARB_AB(c->feat[NVME_FEAT_ARB]);
    return ab == NVME_ARB_AB_NO_LIMIT ? UINT32_MAX : 1u << ab;
}

bool nvmc_doorbells_moved(const struct nvmc_ctrl *c)
{
    for (uint32_t q = 0; c->enabled && q <= c->p.queues; q++)
        if ((c->sq[q].used && rd32(c, sq_db(q)) != c->sq[q].db) ||
            (c->cq[q].used && rd32(c, cq_db(q)) != c->cq[q].db))
            return true;
    return false;
}

/* Round robin arbitration (the specification's Command Arbitration): the admin SQ and the I/O
 * SQs in turn, each giving up to a burst of commands before the next one's turn, so a full SQ delays another SQ's command by at most one
 * burst, not by its whole depth. An SQ whose CQ is full waits for the host to free entries. */
int nvmc_process(struct nvmc_ctrl *c)
{
    if (!c->enabled || c->fatal || c->shut)
        return 0;
    if (c->be.bus_master && !c->be.bus_master(c->be.ctx))
        return 0; /* no bus mastering: nothing can be fetched or completed */
    refresh_doorbells(c);
    uint32_t burst = arb_burst(c);
    int n = 0;
    for (uint32_t q = 0; q <= c->p.queues && !c->fatal; q++) {
        struct nvmc_sq *sq = &c->sq[q];
        for (uint32_t k = 0; k < burst && !c->fatal; k++) {
            if (!sq->used || sq->stalled || sq->head == sq->tail || cq_full(&c->cq[sq->cqid]))
                break;
            if (!serve_one(c, q))
                break;
            n++;
        }
    }
    deliver_events(c);
    fire_irqs(c);
    return n;
}

