/*
 * The NVMe controller core: registers, queues, round-robin arbitration and command execution,
 * without threads. nvme.c runs it as a device model on the fabric; fuzz/nvme_fuzz.c runs it
 * against an in-memory DMA backend. Everything here follows the NVMe base specification 1.4
 * (see docs/nvme-model.md for what is modelled and what is not).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nvme_spec.h"

/* ---------------------------------------------------------------- registers */

static uint32_t rd32(const struct nvme_ctrl *c, uint32_t off)
{
    return __atomic_load_n((uint32_t *)(uintptr_t)(c->regs + off), __ATOMIC_ACQUIRE);
}

static void wr32(struct nvme_ctrl *c, uint32_t off, uint32_t v)
{
    __atomic_store_n((uint32_t *)(uintptr_t)(c->regs + off), v, __ATOMIC_RELEASE);
}

static uint64_t rd64(const struct nvme_ctrl *c, uint32_t off)
{
    return (uint64_t)rd32(c, off + 4) << 32 | rd32(c, off);
}

static uint32_t sq_db(uint32_t qid) { return NVME_REG_DBS + 8u * qid; }
static uint32_t cq_db(uint32_t qid) { return NVME_REG_DBS + 8u * qid + 4u; }

static uint64_t cap_value(const struct nvme_ctrl *c)
{
    return (uint64_t)NVME_MQES | 1ull << 16 /* CQR */ | 20ull << 24 /* TO: 10 s */ |
           1ull << 37 /* CSS: NVM */ | 0ull << 48 /* MPSMIN 4K */ | 4ull << 52 /* MPSMAX 64K */ |
           (c->p.cmb_size ? 1ull << 57 : 0);
}

static void write_ro_regs(struct nvme_ctrl *c)
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

static void feat_defaults(struct nvme_ctrl *c)
{
    memset(c->feat, 0, sizeof c->feat);
    c->feat[NVME_FEAT_TEMP] = 0x0157; /* 343 K */
    c->feat[NVME_FEAT_VWC] = 1;
    c->nsq_alloc = c->ncq_alloc = c->p.queues;
    c->feat[NVME_FEAT_NUM_QUEUES] = (c->p.queues - 1) << 16 | (c->p.queues - 1);
}

void nvme_reset(struct nvme_ctrl *c)
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
    feat_defaults(c);
    for (uint32_t i = 0; i <= c->p.queues; i++) {
        wr32(c, sq_db(i), 0);
        wr32(c, cq_db(i), 0);
    }
    wr32(c, NVME_REG_CSTS, 0);
}

int nvme_ctrl_init(struct nvme_ctrl *c, const struct nvme_params *p,
                   const struct nvme_backend *be, volatile uint8_t *regs)
{
    int *fds = c->ns_fd;
    memset(c, 0, sizeof *c);
    c->ns_fd = fds;
    c->p = *p;
    if (c->p.queues < 1 || c->p.queues > NVME_MAX_QUEUES || c->p.namespaces < 1 ||
        c->p.ns_size < NVME_LBA_SIZE || c->p.mdts > 16)
        return -EINVAL;
    if (!c->p.vectors)
        c->p.vectors = c->p.queues + 1;
    c->be = *be;
    c->regs = regs;
    c->nlba = c->p.ns_size >> NVME_LBA_SHIFT;
    c->sq = calloc(c->p.queues + 1, sizeof *c->sq);
    c->cq = calloc(c->p.queues + 1, sizeof *c->cq);
    if (!c->sq || !c->cq) {
        free(c->sq);
        free(c->cq);
        return -ENOMEM;
    }
    c->page = 4096;
    nvme_reset(c);
    write_ro_regs(c);
    return 0;
}

void nvme_ctrl_fini(struct nvme_ctrl *c)
{
    free(c->sq);
    free(c->cq);
    c->sq = NULL;
    c->cq = NULL;
}

static void flush_all(struct nvme_ctrl *c)
{
    for (uint32_t i = 0; i < c->p.namespaces; i++)
        if (c->ns_fd && c->ns_fd[i] >= 0)
            fsync(c->ns_fd[i]);
}

static void set_fatal(struct nvme_ctrl *c)
{
    c->fatal = true;
    wr32(c, NVME_REG_CSTS, rd32(c, NVME_REG_CSTS) | NVME_CSTS_CFS);
}

bool nvme_regs_update(struct nvme_ctrl *c)
{
    write_ro_regs(c);
    uint32_t cc = rd32(c, NVME_REG_CC);
    if (!(cc & NVME_CC_EN)) {
        if (c->enabled || c->fatal || rd32(c, NVME_REG_CSTS))
            nvme_reset(c);
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
        c->sq[0] = (struct nvme_sq){ .used = true, .cqid = 0, .size = asqs, .base = asq };
        c->cq[0] = (struct nvme_cq){ .used = true, .ien = true, .iv = 0, .size = acqs,
                                     .phase = 1, .nsq = 1, .base = acq };
        c->enabled = true;
        wr32(c, NVME_REG_CSTS, NVME_CSTS_RDY);
    }
    if (c->enabled && !c->shut && NVME_CC_SHN(cc)) {
        wr32(c, NVME_REG_CSTS, (rd32(c, NVME_REG_CSTS) & ~NVME_CSTS_SHST_MASK) |
                                   NVME_CSTS_SHST_OCCURRING);
        flush_all(c);
        c->shut = true;
        wr32(c, NVME_REG_CSTS, (rd32(c, NVME_REG_CSTS) & ~NVME_CSTS_SHST_MASK) |
                                   NVME_CSTS_SHST_COMPLETE);
    }
    return c->enabled && !c->fatal && !c->shut;
}

/* ---------------------------------------------------------------- queues */

static void raise_event(struct nvme_ctrl *c, uint32_t info)
{
    c->aer_pending |= 1u << info;
}

/* Doorbells: take valid new values; invalid writes are ignored and raise an error event. */
static void refresh_doorbells(struct nvme_ctrl *c)
{
    for (uint32_t q = 0; q <= c->p.queues; q++) {
        uint32_t v = rd32(c, sq_db(q));
        struct nvme_sq *sq = &c->sq[q];
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
        struct nvme_cq *cq = &c->cq[q];
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

static bool cq_full(const struct nvme_cq *q) { return (q->tail + 1) % q->size == q->head; }

static bool dnr_for(uint16_t st)
{
    return st != NVME_SUCCESS && st != NVME_DATA_TRANSFER_ERROR && st != NVME_ABORT_REQUESTED &&
           st != NVME_ABORT_SQ_DELETION && st != NVME_INTERNAL_ERROR &&
           (st >> 8) != NVME_SCT_MEDIA;
}

static void log_error(struct nvme_ctrl *c, uint16_t sqid, uint16_t cid, uint16_t st,
                      uint32_t nsid)
{
    memmove(&c->errlog[1], &c->errlog[0], sizeof c->errlog[0] * (NVME_ERR_LOG - 1));
    c->errlog[0] = (struct nvme_err_entry){ .count = ++c->err_count, .sqid = sqid, .cid = cid,
                                            .status = st, .loc = 0xffff, .nsid = nsid };
}

/* Post a completion (cqe->status holds SCT/SC and DNR, phase is added here). */
static bool post_cqe(struct nvme_ctrl *c, uint16_t cqid, struct nvme_cqe *cqe)
{
    struct nvme_cq *q = &c->cq[cqid];
    if (!q->used || cq_full(q))
        return false;
    uint16_t st = cqe->status;
    cqe->status = (uint16_t)((st << 1) | (dnr_for(st & 0x7ff) ? NVME_DNR : 0) | q->phase);
    uint64_t at = q->base + (uint64_t)q->tail * 16;
    /* Everything but the dword holding the phase tag first: the driver polls that one. */
    if (c->be.dma_write(c->be.ctx, at, cqe, 12) ||
        c->be.dma_write(c->be.ctx, at + 12, (const char *)cqe + 12, 4)) {
        set_fatal(c);
        return false;
    }
    if (++q->tail == q->size) {
        q->tail = 0;
        q->phase ^= 1;
    }
    q->irq_due = true;
    return true;
}

static void deliver_events(struct nvme_ctrl *c)
{
    while (c->naer && c->aer_pending && !(c->aer_masked & (1u << NVME_AER_TYPE_ERROR)) &&
           !cq_full(&c->cq[0])) {
        uint32_t info = (uint32_t)__builtin_ctz(c->aer_pending);
        c->aer_pending &= ~(1u << info);
        struct nvme_cqe cqe = { .dw0 = NVME_AER_TYPE_ERROR | info << 8 | NVME_LOG_ERROR << 16,
                                .sqhd = (uint16_t)c->sq[0].head, .sqid = 0,
                                .cid = c->aer_cid[0], .status = NVME_SUCCESS };
        memmove(&c->aer_cid[0], &c->aer_cid[1], sizeof c->aer_cid[0] * (NVME_AERL));
        c->naer--;
        c->aer_masked |= 1u << NVME_AER_TYPE_ERROR;
        post_cqe(c, 0, &cqe);
    }
}

static void fire_irqs(struct nvme_ctrl *c)
{
    for (uint32_t q = 0; q <= c->p.queues; q++) {
        struct nvme_cq *cq = &c->cq[q];
        if (cq->irq_due) {
            cq->irq_due = false;
            if (cq->used && cq->ien && c->be.irq)
                c->be.irq(c->be.ctx, cq->iv);
        }
    }
}

static bool take_abort(struct nvme_ctrl *c, uint32_t sqid, uint32_t cid)
{
    for (uint32_t i = 0; i < c->naborts; i++)
        if (c->aborts[i][0] == sqid && c->aborts[i][1] == cid) {
            memmove(&c->aborts[i], &c->aborts[i + 1], sizeof c->aborts[0] * (c->naborts - i - 1));
            c->naborts--;
            return true;
        }
    return false;
}

int nvme_process(struct nvme_ctrl *c)
{
    if (!c->enabled || c->fatal || c->shut)
        return 0;
    if (c->be.bus_master && !c->be.bus_master(c->be.ctx))
        return 0; /* no bus mastering: nothing can be fetched or completed */
    refresh_doorbells(c);
    int n = 0;
    for (uint32_t q = 0; q <= c->p.queues && !c->fatal; q++) {
        struct nvme_sq *sq = &c->sq[q];
        if (!sq->used || sq->head == sq->tail || cq_full(&c->cq[sq->cqid]))
            continue;
        struct nvme_sqe sqe;
        if (c->be.dma_read(c->be.ctx, sq->base + (uint64_t)sq->head * 64, &sqe, sizeof sqe)) {
            set_fatal(c);
            break;
        }
        sq->head = (sq->head + 1) % sq->size;
        struct nvme_cqe cqe = { 0 };
        bool done = true;
        if (take_abort(c, q, sqe.cid))
            cqe.status = NVME_ABORT_REQUESTED;
        else
            done = nvme_exec(c, (uint16_t)q, &sqe, &cqe);
        n++;
        if (!done)
            continue;
        if (cqe.status && cqe.status != NVME_ABORT_REQUESTED &&
            cqe.status != NVME_ABORT_SQ_DELETION)
            log_error(c, (uint16_t)q, sqe.cid, cqe.status, sqe.nsid);
        cqe.sqhd = (uint16_t)sq->head;
        cqe.sqid = (uint16_t)q;
        cqe.cid = sqe.cid;
        /* An admin command may have deleted queues, but never the admin SQ itself. */
        post_cqe(c, sq->used ? sq->cqid : 0, &cqe);
    }
    deliver_events(c);
    fire_irqs(c);
    return n;
}

/* ---------------------------------------------------------------- PRPs */

struct seg {
    uint64_t addr;
    uint32_t len;
};

/* Walk PRP1/PRP2 (and PRP lists) for len bytes; *segs is malloc'd. Returns a status. */
static uint16_t prp_map(struct nvme_ctrl *c, uint64_t prp1, uint64_t prp2, uint64_t len,
                        struct seg **segs, uint32_t *nseg)
{
    uint64_t page = c->page;
    uint64_t max = len / page + 2;
    struct seg *s = calloc(max, sizeof *s);
    uint64_t *list = NULL;
    uint16_t st = NVME_SUCCESS;
    uint32_t n = 0;
    *segs = NULL;
    *nseg = 0;
    if (!s)
        return NVME_INTERNAL_ERROR;
    if (prp1 & 3) {
        st = NVME_INVALID_PRP_OFFSET;
        goto out;
    }
    uint64_t first = page - (prp1 & (page - 1));
    if (first > len)
        first = len;
    s[n++] = (struct seg){ prp1, (uint32_t)first };
    uint64_t rem = len - first;
    if (rem == 0)
        goto out;
    if (rem <= page) {
        if (prp2 & (page - 1)) {
            st = NVME_INVALID_PRP_OFFSET;
            goto out;
        }
        s[n++] = (struct seg){ prp2, (uint32_t)rem };
        goto out;
    }
    if (prp2 & 7) {
        st = NVME_INVALID_PRP_OFFSET;
        goto out;
    }
    list = malloc(page);
    if (!list) {
        st = NVME_INTERNAL_ERROR;
        goto out;
    }
    uint64_t lp = prp2, pages = 0;
    while (rem) {
        if (++pages > max) { /* list pages that only chain on: a loop */
            st = NVME_INVALID_FIELD;
            goto out;
        }
        uint64_t entries = (page - (lp & (page - 1))) / 8;
        uint64_t need = (rem + page - 1) / page;
        uint64_t take = need <= entries ? need : entries;
        if (c->be.dma_read(c->be.ctx, lp, list, take * 8)) {
            st = NVME_DATA_TRANSFER_ERROR;
            goto out;
        }
        for (uint64_t i = 0; i < take; i++) {
            uint64_t e = list[i];
            if (i == entries - 1 && need > entries) {
                if (e & (page - 1)) { /* chained list pointers start on a page */
                    st = NVME_INVALID_PRP_OFFSET;
                    goto out;
                }
                lp = e;
                break;
            }
            if (e & (page - 1)) {
                st = NVME_INVALID_PRP_OFFSET;
                goto out;
            }
            uint64_t l = rem < page ? rem : page;
            if (n >= max) {
                st = NVME_INTERNAL_ERROR;
                goto out;
            }
            s[n++] = (struct seg){ e, (uint32_t)l };
            rem -= l;
        }
    }
out:
    free(list);
    if (st) {
        free(s);
        return st;
    }
    *segs = s;
    *nseg = n;
    return NVME_SUCCESS;
}

/* Move len bytes between buf and the PRP-described host memory. */
static uint16_t prp_xfer(struct nvme_ctrl *c, const struct nvme_sqe *sqe, void *buf,
                         uint64_t len, bool to_host)
{
    struct seg *segs;
    uint32_t n;
    uint16_t st = prp_map(c, sqe->prp1, sqe->prp2, len, &segs, &n);
    if (st)
        return st;
    char *p = buf;
    for (uint32_t i = 0; i < n && !st; i++) {
        int rc = to_host ? c->be.dma_write(c->be.ctx, segs[i].addr, p, segs[i].len)
                         : c->be.dma_read(c->be.ctx, segs[i].addr, p, segs[i].len);
        if (rc)
            st = NVME_DATA_TRANSFER_ERROR;
        p += segs[i].len;
    }
    free(segs);
    return st;
}

static uint64_t max_xfer(const struct nvme_ctrl *c)
{
    return c->p.mdts ? (uint64_t)4096 << c->p.mdts : (uint64_t)NVME_LBA_SIZE << 16;
}

/* ---------------------------------------------------------------- admin commands */

static void put_str(uint8_t *d, const char *s, size_t len)
{
    memset(d, ' ', len);
    size_t l = strlen(s);
    memcpy(d, s, l < len ? l : len);
}

static void put16(uint8_t *d, uint16_t v) { memcpy(d, &v, 2); }
static void put32(uint8_t *d, uint32_t v) { memcpy(d, &v, 4); }
static void put64(uint8_t *d, uint64_t v) { memcpy(d, &v, 8); }

static uint16_t identify(struct nvme_ctrl *c, const struct nvme_sqe *sqe)
{
    uint8_t *d = calloc(1, 4096);
    if (!d)
        return NVME_INTERNAL_ERROR;
    uint16_t st = NVME_SUCCESS;
    switch (sqe->cdw10 & 0xff) {
    case NVME_CNS_CTRL:
        put16(d + 0, c->p.vid);
        put16(d + 2, c->p.ssvid);
        put_str(d + 4, c->p.serial ? c->p.serial : "NTBLEND0", 20);
        put_str(d + 24, "ntblend emulated NVMe (P4800X-like)", 40);
        put_str(d + 64, "1.0", 8);
        d[72] = 0;             /* RAB */
        d[77] = (uint8_t)c->p.mdts;
        put16(d + 78, 1);      /* CNTLID */
        put32(d + 80, NVME_VS_1_4);
        put16(d + 256, 0);     /* OACS: none of the optional admin commands */
        d[258] = 3;            /* ACL (0-based) */
        d[259] = NVME_AERL;
        d[260] = 0x3;          /* FRMW: slot 1 read-only, 1 slot */
        d[261] = 0x0;          /* LPA */
        d[262] = NVME_ERR_LOG - 1;
        d[512] = 0x66;         /* SQES */
        d[513] = 0x44;         /* CQES */
        put16(d + 514, (uint16_t)NVME_MQES);
        put32(d + 516, c->p.namespaces);
        put16(d + 520, 0x000c); /* ONCS: DSM, Write Zeroes */
        d[525] = 1;            /* VWC present */
        memcpy(d + 768, "nqn.2021-01.io.ntblend:nvme:", 28); /* SUBNQN, NUL padded */
        if (c->p.serial)
            memcpy(d + 796, c->p.serial, strnlen(c->p.serial, 20));
        break;
    case NVME_CNS_NS:
        if (sqe->nsid == 0 || sqe->nsid > c->p.namespaces) {
            st = NVME_INVALID_NAMESPACE;
            break;
        }
        put64(d + 0, c->nlba);  /* NSZE */
        put64(d + 8, c->nlba);  /* NCAP */
        put64(d + 16, c->nlba); /* NUSE */
        d[24] = 0x1;            /* NSFEAT: thin provisioning (deallocation) */
        d[25] = 0;              /* NLBAF: one format */
        d[26] = 0;              /* FLBAS */
        d[33] = 0x9;            /* DLFEAT: deallocated reads zeroes, Write Zeroes DEAC */
        put16(d + 128, 0);      /* LBAF0: MS */
        d[130] = NVME_LBA_SHIFT;
        break;
    case NVME_CNS_NS_LIST: {
        if (sqe->nsid >= 0xfffffffeu) {
            st = NVME_INVALID_NAMESPACE;
            break;
        }
        uint32_t k = 0;
        for (uint32_t ns = sqe->nsid + 1; ns <= c->p.namespaces && k < 1024; ns++)
            put32(d + 4 * k++, ns);
        break;
    }
    default:
        st = NVME_INVALID_FIELD;
    }
    if (!st)
        st = prp_xfer(c, sqe, d, 4096, true);
    free(d);
    return st;
}

static uint16_t get_log(struct nvme_ctrl *c, const struct nvme_sqe *sqe)
{
    uint32_t lid = sqe->cdw10 & 0xff;
    bool rae = sqe->cdw10 & (1u << 15);
    uint64_t numd = ((uint64_t)(sqe->cdw11 & 0xffff) << 16 | sqe->cdw10 >> 16) + 1;
    uint64_t len = numd * 4, off = (uint64_t)sqe->cdw13 << 32 | sqe->cdw12;
    uint8_t log[NVME_ERR_LOG * 64];
    uint64_t size;
    memset(log, 0, sizeof log);
    switch (lid) {
    case NVME_LOG_ERROR:
        size = NVME_ERR_LOG * 64;
        for (uint32_t i = 0; i < NVME_ERR_LOG; i++) {
            const struct nvme_err_entry *e = &c->errlog[i];
            uint8_t *p = log + 64 * i;
            if (!e->count)
                break;
            put64(p + 0, e->count);
            put16(p + 8, e->sqid);
            put16(p + 10, e->cid);
            put16(p + 12, (uint16_t)(e->status << 1));
            put16(p + 14, e->loc);
            put64(p + 16, e->lba);
            put32(p + 24, e->nsid);
        }
        break;
    case NVME_LOG_SMART:
        if (sqe->nsid != 0 && sqe->nsid != 0xffffffffu)
            return NVME_INVALID_FIELD; /* no per-namespace SMART (LPA bit 0 clear) */
        size = 512;
        log[0] = 0;                   /* critical warning */
        put16(log + 1, 308);          /* composite temperature, K */
        log[3] = 100;                 /* available spare */
        log[4] = 10;                  /* threshold */
        log[5] = 0;                   /* percentage used */
        put64(log + 32, (c->units_read + 999) / 1000);
        put64(log + 48, (c->units_written + 999) / 1000);
        put64(log + 64, c->read_cmds);
        put64(log + 80, c->write_cmds);
        put64(log + 112, 1);          /* power cycles */
        put64(log + 160, c->media_errors);
        put64(log + 176, c->err_count);
        break;
    case NVME_LOG_FW_SLOT:
        size = 512;
        log[0] = 1;                   /* active firmware: slot 1 */
        put_str(log + 8, "1.0", 8);
        break;
    default:
        return NVME_INVALID_LOG_PAGE;
    }
    if ((off & 3) || off > size || len > max_xfer(c))
        return NVME_INVALID_FIELD;
    uint8_t *buf = calloc(1, len);
    if (!buf)
        return NVME_INTERNAL_ERROR;
    uint64_t n = size - off < len ? size - off : len;
    memcpy(buf, log + off, n);
    uint16_t st = prp_xfer(c, sqe, buf, len, true);
    free(buf);
    if (!st && lid == NVME_LOG_ERROR && !rae)
        c->aer_masked &= ~(1u << NVME_AER_TYPE_ERROR);
    return st;
}

static uint16_t features(struct nvme_ctrl *c, const struct nvme_sqe *sqe, bool set,
                         uint32_t *dw0)
{
    uint32_t fid = sqe->cdw10 & 0xff;
    switch (fid) {
    case NVME_FEAT_ARB: case NVME_FEAT_POWER: case NVME_FEAT_TEMP: case NVME_FEAT_ERR_REC:
    case NVME_FEAT_VWC: case NVME_FEAT_NUM_QUEUES: case NVME_FEAT_IRQ_COALESCE:
    case NVME_FEAT_IRQ_CONFIG: case NVME_FEAT_WRITE_ATOMIC: case NVME_FEAT_ASYNC_EVENT:
        break;
    default:
        return NVME_INVALID_FIELD;
    }
    if (!set) {
        uint32_t sel = (sqe->cdw10 >> 8) & 7;
        if (sel > 3)
            return NVME_INVALID_FIELD;
        if (sel == 3) {
            *dw0 = fid == NVME_FEAT_IRQ_CONFIG ? 0x4 | 0x2 : 0x4; /* changeable (per vector) */
            return NVME_SUCCESS;
        }
        uint32_t cur = c->feat[fid];
        if (sel != 0) { /* default (and saved: nothing is saveable) */
            struct nvme_ctrl tmp = *c;
            feat_defaults(&tmp);
            cur = tmp.feat[fid];
        }
        if (fid == NVME_FEAT_IRQ_CONFIG) {
            uint32_t iv = sqe->cdw11 & 0xffff;
            if (iv >= c->p.vectors)
                return NVME_INVALID_FIELD;
            cur = iv;
        }
        *dw0 = cur;
        return NVME_SUCCESS;
    }
    if (sqe->cdw10 & (1u << 31))
        return NVME_FEAT_NOT_SAVEABLE;
    uint32_t v = sqe->cdw11;
    switch (fid) {
    case NVME_FEAT_NUM_QUEUES: {
        uint32_t nsqr = v & 0xffff, ncqr = v >> 16;
        if (nsqr == 0xffff || ncqr == 0xffff)
            return NVME_INVALID_FIELD;
        if (c->io_queue_created)
            return NVME_CMD_SEQ_ERROR;
        c->nsq_alloc = nsqr + 1 < c->p.queues ? nsqr + 1 : c->p.queues;
        c->ncq_alloc = ncqr + 1 < c->p.queues ? ncqr + 1 : c->p.queues;
        c->feat[fid] = (c->ncq_alloc - 1) << 16 | (c->nsq_alloc - 1);
        *dw0 = c->feat[fid];
        return NVME_SUCCESS;
    }
    case NVME_FEAT_IRQ_CONFIG:
        if ((v & 0xffff) >= c->p.vectors)
            return NVME_INVALID_FIELD;
        return NVME_SUCCESS; /* coalescing is not modelled */
    case NVME_FEAT_VWC:
        v &= 1;
        break;
    case NVME_FEAT_POWER:
        if ((v & 0x1f) != 0)
            return NVME_INVALID_FIELD; /* one power state */
        break;
    default:
        break;
    }
    c->feat[fid] = v;
    return NVME_SUCCESS;
}

/* Commands between head and the doorbell's tail of an SQ that is going away. */
static void abort_pending(struct nvme_ctrl *c, struct nvme_sq *sq, uint16_t qid)
{
    uint32_t v = rd32(c, sq_db(qid));
    if (v != sq->db && v < sq->size)
        sq->tail = v;
    while (sq->head != sq->tail) {
        struct nvme_sqe e;
        if (c->be.dma_read(c->be.ctx, sq->base + (uint64_t)sq->head * 64, &e, sizeof e))
            break;
        sq->head = (sq->head + 1) % sq->size;
        struct nvme_cqe cqe = { .sqhd = (uint16_t)sq->head, .sqid = qid, .cid = e.cid,
                                .status = NVME_ABORT_SQ_DELETION };
        if (!post_cqe(c, sq->cqid, &cqe))
            break;
    }
}

static uint16_t queue_cmd(struct nvme_ctrl *c, const struct nvme_sqe *sqe)
{
    uint32_t qid = sqe->cdw10 & 0xffff, qsize = sqe->cdw10 >> 16;
    switch (sqe->opc) {
    case NVME_ADM_CREATE_CQ: {
        bool pc = sqe->cdw11 & 1, ien = sqe->cdw11 & 2;
        uint32_t iv = sqe->cdw11 >> 16;
        if (qid == 0 || qid > c->ncq_alloc || c->cq[qid].used)
            return NVME_INVALID_QID;
        if (qsize == 0 || qsize > NVME_MQES)
            return NVME_INVALID_QSIZE;
        if (!pc)
            return NVME_INVALID_FIELD;
        if (sqe->prp1 & (c->page - 1))
            return NVME_INVALID_PRP_OFFSET;
        if (ien && iv >= c->p.vectors)
            return NVME_INVALID_VECTOR;
        c->cq[qid] = (struct nvme_cq){ .used = true, .ien = ien, .iv = (uint16_t)iv,
                                       .size = qsize + 1, .phase = 1, .base = sqe->prp1 };
        wr32(c, cq_db(qid), 0);
        c->io_queue_created = true;
        return NVME_SUCCESS;
    }
    case NVME_ADM_CREATE_SQ: {
        bool pc = sqe->cdw11 & 1;
        uint32_t cqid = sqe->cdw11 >> 16;
        if (qid == 0 || qid > c->nsq_alloc || c->sq[qid].used)
            return NVME_INVALID_QID;
        if (cqid == 0 || cqid > c->p.queues || !c->cq[cqid].used)
            return NVME_CQ_INVALID;
        if (qsize == 0 || qsize > NVME_MQES)
            return NVME_INVALID_QSIZE;
        if (!pc)
            return NVME_INVALID_FIELD;
        if (sqe->prp1 & (c->page - 1))
            return NVME_INVALID_PRP_OFFSET;
        c->sq[qid] = (struct nvme_sq){ .used = true, .cqid = (uint16_t)cqid, .size = qsize + 1,
                                       .base = sqe->prp1 };
        wr32(c, sq_db(qid), 0);
        c->cq[cqid].nsq++;
        c->io_queue_created = true;
        return NVME_SUCCESS;
    }
    case NVME_ADM_DELETE_SQ: {
        if (qid == 0 || qid > c->p.queues || !c->sq[qid].used)
            return NVME_INVALID_QID;
        struct nvme_sq *sq = &c->sq[qid];
        abort_pending(c, sq, (uint16_t)qid);
        for (uint32_t i = 0; i < c->naborts;)
            if (c->aborts[i][0] == qid)
                take_abort(c, qid, c->aborts[i][1]);
            else
                i++;
        c->cq[sq->cqid].nsq--;
        memset(sq, 0, sizeof *sq);
        wr32(c, sq_db(qid), 0);
        return NVME_SUCCESS;
    }
    case NVME_ADM_DELETE_CQ:
        if (qid == 0 || qid > c->p.queues || !c->cq[qid].used)
            return NVME_INVALID_QID;
        if (c->cq[qid].nsq)
            return NVME_INVALID_QUEUE_DELETION;
        memset(&c->cq[qid], 0, sizeof c->cq[qid]);
        wr32(c, cq_db(qid), 0);
        return NVME_SUCCESS;
    }
    return NVME_INVALID_OPCODE;
}

static uint16_t abort_cmd(struct nvme_ctrl *c, const struct nvme_sqe *sqe, uint32_t *dw0)
{
    uint32_t sqid = sqe->cdw10 & 0xffff, cid = sqe->cdw10 >> 16;
    *dw0 = 1; /* not aborted */
    if (sqid > c->p.queues || !c->sq[sqid].used)
        return NVME_INVALID_FIELD;
    if (sqid == 0)
        for (uint32_t i = 0; i < c->naer; i++)
            if (c->aer_cid[i] == cid) {
                struct nvme_cqe cqe = { .sqhd = (uint16_t)c->sq[0].head, .sqid = 0,
                                        .cid = (uint16_t)cid, .status = NVME_ABORT_REQUESTED };
                memmove(&c->aer_cid[i], &c->aer_cid[i + 1],
                        sizeof c->aer_cid[0] * (c->naer - i - 1));
                c->naer--;
                post_cqe(c, 0, &cqe);
                *dw0 = 0;
                return NVME_SUCCESS;
            }
    /* Not yet fetched: look between head and the tail doorbell. */
    struct nvme_sq *sq = &c->sq[sqid];
    uint32_t v = rd32(c, sq_db(sqid)), tail = v < sq->size ? v : sq->tail;
    for (uint32_t h = sq->head; h != tail && c->naborts < 8; h = (h + 1) % sq->size) {
        struct nvme_sqe e;
        if (c->be.dma_read(c->be.ctx, sq->base + (uint64_t)h * 64, &e, sizeof e))
            break;
        if (e.cid == cid) {
            c->aborts[c->naborts][0] = sqid;
            c->aborts[c->naborts][1] = cid;
            c->naborts++;
            *dw0 = 0;
            break;
        }
    }
    return NVME_SUCCESS;
}

static bool admin(struct nvme_ctrl *c, const struct nvme_sqe *sqe, struct nvme_cqe *cqe)
{
    uint16_t st;
    switch (sqe->opc) {
    case NVME_ADM_IDENTIFY:
        st = identify(c, sqe);
        break;
    case NVME_ADM_GET_LOG:
        st = get_log(c, sqe);
        break;
    case NVME_ADM_CREATE_CQ: case NVME_ADM_CREATE_SQ: case NVME_ADM_DELETE_CQ:
    case NVME_ADM_DELETE_SQ:
        st = queue_cmd(c, sqe);
        break;
    case NVME_ADM_SET_FEATURES:
    case NVME_ADM_GET_FEATURES:
        st = features(c, sqe, sqe->opc == NVME_ADM_SET_FEATURES, &cqe->dw0);
        break;
    case NVME_ADM_ABORT:
        st = abort_cmd(c, sqe, &cqe->dw0);
        break;
    case NVME_ADM_AER:
        if (c->naer > NVME_AERL) {
            st = NVME_AERL_EXCEEDED;
            break;
        }
        c->aer_cid[c->naer++] = sqe->cid;
        return false;
    default:
        st = NVME_INVALID_OPCODE;
    }
    cqe->status = st;
    return true;
}

/* ---------------------------------------------------------------- NVM commands */

static uint16_t lba_check(const struct nvme_ctrl *c, uint64_t slba, uint64_t nlb)
{
    return slba > c->nlba || nlb > c->nlba - slba ? NVME_LBA_RANGE : NVME_SUCCESS;
}

static int ns_fd(const struct nvme_ctrl *c, uint32_t nsid)
{
    return c->ns_fd ? c->ns_fd[nsid - 1] : -1;
}

static uint16_t zero_range(int fd, uint64_t slba, uint64_t nlb)
{
    off_t off = (off_t)(slba << NVME_LBA_SHIFT), len = (off_t)(nlb << NVME_LBA_SHIFT);
    if (fd < 0)
        return NVME_WRITE_FAULT;
    if (len == 0 || fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, len) == 0)
        return NVME_SUCCESS;
    static const char zeros[65536];
    while (len > 0) {
        size_t n = len < (off_t)sizeof zeros ? (size_t)len : sizeof zeros;
        ssize_t w = pwrite(fd, zeros, n, off);
        if (w <= 0)
            return NVME_WRITE_FAULT;
        off += w;
        len -= w;
    }
    return NVME_SUCCESS;
}

static uint16_t rw(struct nvme_ctrl *c, const struct nvme_sqe *sqe, bool write)
{
    uint64_t slba = (uint64_t)sqe->cdw11 << 32 | sqe->cdw10;
    uint64_t nlb = (sqe->cdw12 & 0xffff) + 1ull, len = nlb << NVME_LBA_SHIFT;
    bool fua = sqe->cdw12 & (1u << 30);
    if (len > max_xfer(c))
        return NVME_INVALID_FIELD;
    uint16_t st = lba_check(c, slba, nlb);
    if (st)
        return st;
    int fd = ns_fd(c, sqe->nsid);
    char *buf = malloc(len);
    if (!buf)
        return NVME_INTERNAL_ERROR;
    off_t off = (off_t)(slba << NVME_LBA_SHIFT);
    if (write) {
        st = prp_xfer(c, sqe, buf, len, false);
        if (!st) {
            if (fd < 0 || pwrite(fd, buf, len, off) != (ssize_t)len ||
                ((fua || !c->feat[NVME_FEAT_VWC]) && fdatasync(fd))) {
                st = NVME_WRITE_FAULT;
                c->media_errors++;
            } else {
                c->write_cmds++;
                c->units_written += nlb * (NVME_LBA_SIZE / 512);
            }
        }
    } else {
        if (fd < 0 || pread(fd, buf, len, off) != (ssize_t)len) {
            st = NVME_UNRECOVERED_READ;
            c->media_errors++;
        } else {
            st = prp_xfer(c, sqe, buf, len, true);
            if (!st) {
                c->read_cmds++;
                c->units_read += nlb * (NVME_LBA_SIZE / 512);
            }
        }
    }
    free(buf);
    return st;
}

static uint16_t dsm(struct nvme_ctrl *c, const struct nvme_sqe *sqe)
{
    uint32_t nr = (sqe->cdw10 & 0xff) + 1;
    bool ad = sqe->cdw11 & (1u << 2);
    uint8_t ranges[256 * 16];
    uint16_t st = prp_xfer(c, sqe, ranges, nr * 16ull, false);
    if (st || !ad)
        return st;
    for (uint32_t i = 0; i < nr; i++) {
        uint32_t nlb;
        uint64_t slba;
        memcpy(&nlb, ranges + 16 * i + 4, 4);
        memcpy(&slba, ranges + 16 * i + 8, 8);
        if ((st = lba_check(c, slba, nlb)))
            return st;
    }
    for (uint32_t i = 0; i < nr; i++) {
        uint32_t nlb;
        uint64_t slba;
        memcpy(&nlb, ranges + 16 * i + 4, 4);
        memcpy(&slba, ranges + 16 * i + 8, 8);
        if ((st = zero_range(ns_fd(c, sqe->nsid), slba, nlb)))
            return st;
    }
    return NVME_SUCCESS;
}

static uint16_t nvm(struct nvme_ctrl *c, const struct nvme_sqe *sqe)
{
    switch (sqe->opc) {
    case NVME_CMD_FLUSH: case NVME_CMD_WRITE: case NVME_CMD_READ: case NVME_CMD_WRITE_ZEROES:
    case NVME_CMD_DSM:
        break;
    default:
        return NVME_INVALID_OPCODE;
    }
    if (sqe->opc == NVME_CMD_FLUSH && sqe->nsid == 0xffffffffu) {
        flush_all(c);
        return NVME_SUCCESS;
    }
    if (sqe->nsid == 0 || sqe->nsid > c->p.namespaces)
        return NVME_INVALID_NAMESPACE;
    switch (sqe->opc) {
    case NVME_CMD_FLUSH: {
        int fd = ns_fd(c, sqe->nsid);
        return fd >= 0 && fsync(fd) ? NVME_WRITE_FAULT : NVME_SUCCESS;
    }
    case NVME_CMD_WRITE:
    case NVME_CMD_READ:
        return rw(c, sqe, sqe->opc == NVME_CMD_WRITE);
    case NVME_CMD_WRITE_ZEROES: {
        uint64_t slba = (uint64_t)sqe->cdw11 << 32 | sqe->cdw10;
        uint64_t nlb = (sqe->cdw12 & 0xffff) + 1ull;
        uint16_t st = lba_check(c, slba, nlb);
        if (st)
            return st;
        int fd = ns_fd(c, sqe->nsid);
        st = zero_range(fd, slba, nlb);
        if (!st && (sqe->cdw12 & (1u << 30)) && fdatasync(fd))
            st = NVME_WRITE_FAULT;
        return st;
    }
    default:
        return dsm(c, sqe);
    }
}

bool nvme_exec(struct nvme_ctrl *c, uint16_t sqid, const struct nvme_sqe *sqe,
               struct nvme_cqe *cqe)
{
    memset(cqe, 0, sizeof *cqe);
    cqe->cid = sqe->cid;
    cqe->sqid = sqid;
    /* No fused operations, PRPs only (PSDT 0). */
    if (sqe->flags & 0x03) {
        cqe->status = NVME_INVALID_FIELD;
        return true;
    }
    if (sqe->flags & 0xc0) {
        cqe->status = NVME_INVALID_FIELD;
        return true;
    }
    if (sqid == 0)
        return admin(c, sqe, cqe);
    cqe->status = nvm(c, sqe);
    return true;
}
