/*
 * The NVMe controller core, admin commands: identify, get log page, get/set features, create
 * and delete I/O queues, abort and asynchronous event requests (NVMe 1.4 §5).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nvmc_int.h"

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

static uint16_t cntlid(const struct nvmc_ctrl *c) { return c->p.cntlid ? c->p.cntlid : 1; }

/* A namespace's globally unique identifier (NGUID): the same for the same controller serial
 * (and, for a VF, controller id) and namespace, different for different ones (FNV-1a). */
static void nguid(const struct nvmc_ctrl *c, uint32_t nsid, uint8_t out[16])
{
    const char *s = c->p.serial ? c->p.serial : "NTBLEND0";
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    if (c->p.vfn) /* a VF shares its PF's serial, not its namespaces */
        h = (h ^ cntlid(c)) * 0x100000001b3ull;
    memcpy(out, "ntbl", 4);
    put64(out + 4, h);
    put32(out + 12, nsid);
}

static uint16_t identify(struct nvmc_ctrl *c, const struct nvme_sqe *sqe)
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
        /* CMIC: the subsystem may hold two or more controllers (a PF with VFs), and this one
         * is a VF's. */
        d[76] = (uint8_t)((c->p.nsec ? 0x2 : 0) | (c->p.vfn ? 0x4 : 0));
        d[77] = (uint8_t)c->p.mdts;
        put16(d + 78, cntlid(c));
        put32(d + 80, NVME_VS_1_4);
        put16(d + 256, 0);     /* OACS: none of the optional admin commands */
        d[258] = 3;            /* ACL (0-based) */
        d[259] = NVMC_AERL;
        d[260] = 0x3;          /* FRMW: slot 1 read-only, 1 slot */
        d[261] = 0x0;          /* LPA */
        d[262] = NVMC_ERR_LOG - 1;
        d[512] = 0x66;         /* SQES */
        d[513] = 0x44;         /* CQES */
        put16(d + 514, (uint16_t)NVMC_MQES);
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
        nguid(c, sqe->nsid, d + 104); /* NGUID */
        put16(d + 128, 0);      /* LBAF0: MS */
        d[130] = NVMC_LBA_SHIFT;
        break;
    case NVME_CNS_NS_DESCS:
        /* Mandatory since NVMe 1.3 (a 1.3+ host's driver asks before it adds the namespace):
         * one descriptor, the NGUID. */
        if (sqe->nsid == 0 || sqe->nsid > c->p.namespaces) {
            st = NVME_INVALID_NAMESPACE;
            break;
        }
        d[0] = 2;  /* NIDT: NGUID */
        d[1] = 16; /* NIDL */
        nguid(c, sqe->nsid, d + 4);
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
    case NVME_CNS_CTRL_LIST: {
        /* The subsystem's controllers from CNTID on: the primary (1) and its secondaries. */
        uint32_t from = sqe->cdw10 >> 16, k = 0;
        for (uint32_t id = 1; id <= 1u + c->p.nsec && k < 2047; id++)
            if (id >= from)
                put16(d + 2 + 2 * k++, (uint16_t)id);
        put16(d, (uint16_t)k);
        break;
    }
    case NVME_CNS_PRIMARY_CAPS:
        if (c->p.vfn) { /* only a primary controller reports them */
            st = NVME_INVALID_FIELD;
            break;
        }
        put16(d + 0, cntlid(c));
        put16(d + 2, 0);                       /* PORTID */
        d[4] = 0;                              /* CRT: no flexible resources */
        put16(d + 42, (uint16_t)c->p.queues);  /* VQPRT: private I/O queue resources */
        put16(d + 74, (uint16_t)c->p.vectors); /* VIPRT: private interrupt resources */
        break;
    case NVME_CNS_SECONDARY_LIST: {
        if (c->p.vfn) {
            st = NVME_INVALID_FIELD;
            break;
        }
        /* Entries from CNTID on: SCID, PCID, SCS (online: each VF's controller has its
         * resources from the start), VFN; NVQ and NVI stay 0, no flexible resources. */
        uint32_t from = sqe->cdw10 >> 16, k = 0;
        for (uint32_t vf = 1; vf <= c->p.nsec && k < 127; vf++) {
            if (vf + 1 < from)
                continue;
            uint8_t *e = d + 32 + 32 * k++;
            put16(e + 0, (uint16_t)(vf + 1));
            put16(e + 2, 1);
            e[4] = 1;
            put16(e + 8, (uint16_t)vf);
        }
        d[0] = (uint8_t)k;
        break;
    }
    default:
        st = NVME_INVALID_FIELD;
    }
    if (!st)
        st = nvmc_prp_xfer(c, sqe, d, 4096, true);
    free(d);
    return st;
}

static uint16_t get_log(struct nvmc_ctrl *c, const struct nvme_sqe *sqe)
{
    uint32_t lid = sqe->cdw10 & 0xff;
    bool rae = sqe->cdw10 & (1u << 15);
    uint64_t numd = ((uint64_t)(sqe->cdw11 & 0xffff) << 16 | sqe->cdw10 >> 16) + 1;
    uint64_t len = numd * 4, off = (uint64_t)sqe->cdw13 << 32 | sqe->cdw12;
    uint8_t log[NVMC_ERR_LOG * 64];
    uint64_t size;
    memset(log, 0, sizeof log);
    switch (lid) {
    case NVME_LOG_ERROR:
        size = NVMC_ERR_LOG * 64;
        for (uint32_t i = 0; i < NVMC_ERR_LOG; i++) {
            const struct nvmc_err_entry *e = &c->errlog[i];
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
    if ((off & 3) || off > size || len > nvmc_max_xfer(c))
        return NVME_INVALID_FIELD;
    uint8_t *buf = calloc(1, len);
    if (!buf)
        return NVME_INTERNAL_ERROR;
    uint64_t n = size - off < len ? size - off : len;
    memcpy(buf, log + off, n);
    uint16_t st = nvmc_prp_xfer(c, sqe, buf, len, true);
    free(buf);
    if (!st && lid == NVME_LOG_ERROR && !rae)
        c->aer_masked &= ~(1u << NVME_AER_TYPE_ERROR);
    return st;
}

static uint16_t features(struct nvmc_ctrl *c, const struct nvme_sqe *sqe, bool set,
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
            struct nvmc_ctrl tmp = *c;
            nvmc_feat_defaults(&tmp);
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
        c->nsq_alloc = nsqr + 1 < c->p.queues && !c->p.alloc_all ? nsqr + 1 : c->p.queues;
        c->ncq_alloc = ncqr + 1 < c->p.queues && !c->p.alloc_all ? ncqr + 1 : c->p.queues;
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
static void abort_pending(struct nvmc_ctrl *c, struct nvmc_sq *sq, uint16_t qid)
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
        if (!nvmc_post_cqe(c, sq->cqid, &cqe))
            break;
    }
}

static uint16_t queue_cmd(struct nvmc_ctrl *c, const struct nvme_sqe *sqe)
{
    uint32_t qid = sqe->cdw10 & 0xffff, qsize = sqe->cdw10 >> 16;
    switch (sqe->opc) {
    case NVME_ADM_CREATE_CQ: {
        bool pc = sqe->cdw11 & 1, ien = sqe->cdw11 & 2;
        uint32_t iv = sqe->cdw11 >> 16;
        if (qid == 0 || qid > c->ncq_alloc || c->cq[qid].used)
            return NVME_INVALID_QID;
        if (qsize == 0 || qsize > NVMC_MQES)
            return NVME_INVALID_QSIZE;
        if (!pc)
            return NVME_INVALID_FIELD;
        if (sqe->prp1 & (c->page - 1))
            return NVME_INVALID_PRP_OFFSET;
        if (ien && iv >= c->p.vectors)
            return NVME_INVALID_VECTOR;
        c->cq[qid] = (struct nvmc_cq){ .used = true, .ien = ien, .iv = (uint16_t)iv,
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
        if (qsize == 0 || qsize > NVMC_MQES)
            return NVME_INVALID_QSIZE;
        if (!pc)
            return NVME_INVALID_FIELD;
        if (sqe->prp1 & (c->page - 1))
            return NVME_INVALID_PRP_OFFSET;
        c->sq[qid] = (struct nvmc_sq){ .used = true, .cqid = (uint16_t)cqid, .size = qsize + 1,
                                       .base = sqe->prp1 };
        wr32(c, sq_db(qid), 0);
        c->cq[cqid].nsq++;
        c->io_queue_created = true;
        return NVME_SUCCESS;
    }
    case NVME_ADM_DELETE_SQ: {
        if (qid == 0 || qid > c->p.queues || !c->sq[qid].used)
            return NVME_INVALID_QID;
        struct nvmc_sq *sq = &c->sq[qid];
        abort_pending(c, sq, (uint16_t)qid);
        for (uint32_t i = 0; i < c->naborts;)
            if (c->aborts[i][0] == qid)
                nvmc_take_abort(c, qid, c->aborts[i][1]);
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

static uint16_t abort_cmd(struct nvmc_ctrl *c, const struct nvme_sqe *sqe, uint32_t *dw0)
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
                nvmc_post_cqe(c, 0, &cqe);
                *dw0 = 0;
                return NVME_SUCCESS;
            }
    /* Not yet fetched: look between head and the tail doorbell. */
    struct nvmc_sq *sq = &c->sq[sqid];
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

bool nvmc_admin(struct nvmc_ctrl *c, const struct nvme_sqe *sqe, struct nvme_cqe *cqe)
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
        if (c->naer > NVMC_AERL) {
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

