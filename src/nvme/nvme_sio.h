/*
 * A small borrower-side NVMe driver over the SmartIO API only (ntblend/smartio.h and seg.h,
 * no fabric internals): registers through sio_map_bar + sio_read32/sio_write32, queues and
 * data in "regions" — memory with a CPU pointer and a device-side I/O address, wherever it is
 * (a segment of this host, a segment of another host, another device's BAR) — completions by
 * polling the phase bit or by MSI-X (sio_enable_vector + sio_wait_vector).
 *
 * Shared by tests/test_nvme_borrow.c and tools/nvme_bench.c (CMake target ntbnvme_sio).
 * Header of static functions.
 * The NVMe definitions are the few this driver needs, from the NVMe base specification 1.4.
 */
#ifndef NTBLEND_NVME_SIO_H
#define NTBLEND_NVME_SIO_H

#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ntblend/seg.h"
#include "ntblend/smartio.h"

/* ---- NVMe definitions (base specification 1.4) ---- */
#define NVS_REG_CAP 0x00
#define NVS_REG_VS 0x08
#define NVS_REG_CC 0x14
#define NVS_REG_CSTS 0x1c
#define NVS_REG_AQA 0x24
#define NVS_REG_ASQ 0x28
#define NVS_REG_ACQ 0x30
#define NVS_REG_DBS 0x1000
#define NVS_CSTS_RDY 0x1u
#define NVS_CSTS_CFS 0x2u
#define NVS_PAGE 4096u

enum { NVS_ADM_CREATE_SQ = 0x01, NVS_ADM_CREATE_CQ = 0x05, NVS_ADM_IDENTIFY = 0x06,
       NVS_ADM_DELETE_SQ = 0x00, NVS_ADM_DELETE_CQ = 0x04 };
enum { NVS_CMD_WRITE = 0x01, NVS_CMD_READ = 0x02 };

struct nvs_sqe {
    uint8_t opc, flags;
    uint16_t cid;
    uint32_t nsid, cdw2, cdw3;
    uint64_t mptr, prp1, prp2;
    uint32_t cdw10, cdw11, cdw12, cdw13, cdw14, cdw15;
};
struct nvs_cqe {
    uint32_t dw0, dw1;
    uint16_t sqhd, sqid, cid, status; /* status: P bit 0, SC 8:1, SCT 11:9, DNR 15 */
};
_Static_assert(sizeof(struct nvs_sqe) == 64, "SQE");
_Static_assert(sizeof(struct nvs_cqe) == 16, "CQE");

/* ---- memory the device can reach ---- */
struct nvs_region {
    volatile uint8_t *cpu; /* where this process loads and stores */
    uint64_t io;           /* what the device puts on its bus for cpu[0] */
    size_t size, brk;
};

static inline void nvs_region_init(struct nvs_region *r, volatile void *cpu, uint64_t io,
                                   size_t size)
{
    r->cpu = cpu;
    r->io = io;
    r->size = size;
    r->brk = 0;
}

/* Page-aligned bump allocation, zeroed; returns the offset into the region or -ENOMEM. */
static inline int64_t nvs_alloc(struct nvs_region *r, size_t size)
{
    size_t at = (r->brk + NVS_PAGE - 1) & ~(size_t)(NVS_PAGE - 1);
    if (at > r->size || size > r->size - at)
        return -ENOMEM;
    r->brk = at + size;
    for (size_t i = 0; i < size; i += 8)
        *(volatile uint64_t *)(r->cpu + at + i) = 0;
    return (int64_t)at;
}

/* ---- the driver ---- */
#define NVS_QMAX 8

struct nvs_queue {
    bool live;
    uint16_t qid;
    uint32_t size;
    volatile struct nvs_sqe *sq;
    volatile struct nvs_cqe *cq;
    uint64_t sq_io, cq_io;
    uint32_t sq_tail, sq_head, cq_head;
    uint8_t phase;
    int irq;          /* host vector, -1: poll */
    uint32_t seen;    /* interrupts taken */
    uint32_t inflight;
};

struct nvs {
    sio_dev_t *dev;
    sio_bar_t *regs;
    uint32_t dstrd;
    uint16_t next_cid;
    struct nvs_queue q[NVS_QMAX];
    uint64_t polls; /* CQ looks that found nothing */
};

static inline uint64_t nvs_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Between polls: the device model needs a core too (two-core machines). */
static inline void nvs_pause(uint32_t spins)
{
    if (spins < 64)
        sched_yield();
    else
        usleep(spins < 10000 ? 1 : 100);
}

static inline uint32_t nvs_db_sq(const struct nvs *d, uint16_t qid)
{
    return NVS_REG_DBS + (2u * qid) * (4u << d->dstrd);
}
static inline uint32_t nvs_db_cq(const struct nvs *d, uint16_t qid)
{
    return NVS_REG_DBS + (2u * qid + 1u) * (4u << d->dstrd);
}

static inline int nvs_wait_csts(struct nvs *d, uint32_t mask, uint32_t want, uint32_t ms)
{
    uint64_t end = nvs_ns() + (uint64_t)ms * 1000000ull;
    for (uint32_t i = 0;; i++) {
        uint32_t c = sio_read32(d->regs, NVS_REG_CSTS);
        if ((c & mask) == want)
            return 0;
        if (want && (c & NVS_CSTS_CFS))
            return -EIO;
        if (nvs_ns() > end)
            return -ETIMEDOUT;
        nvs_pause(i);
    }
}

/* Borrowed and enabled device: map BAR0, check CAP/VS. */
static inline int nvs_open(struct nvs *d, sio_dev_t *dev)
{
    memset(d, 0, sizeof *d);
    d->dev = dev;
    size_t size;
    if (!sio_map_bar(dev, 0, &size, &d->regs))
        return -errno;
    if (size < 0x2000)
        return -ENODEV;
    uint64_t cap = (uint64_t)sio_read32(d->regs, NVS_REG_CAP + 4) << 32 |
                   sio_read32(d->regs, NVS_REG_CAP);
    d->dstrd = (uint32_t)(cap >> 32) & 0xf;
    uint32_t vs = sio_read32(d->regs, NVS_REG_VS);
    if (!(cap >> 37 & 1) || vs < 0x00010000u) /* NVM command set, version >= 1.0 */
        return -ENODEV;
    return 0;
}

static inline void nvs_close(struct nvs *d)
{
    if (d->regs)
        sio_unmap_bar(d->regs);
    d->regs = NULL;
}

static inline uint64_t nvs_cap(struct nvs *d)
{
    return (uint64_t)sio_read32(d->regs, NVS_REG_CAP + 4) << 32 | sio_read32(d->regs, NVS_REG_CAP);
}

/* Host vector of a queue's interrupts, -1: poll. (The caller did sio_enable_vector.) */
static inline void nvs_set_irq(struct nvs *d, uint16_t qid, int host_vector)
{
    struct nvs_queue *q = &d->q[qid];
    q->irq = host_vector;
    if (host_vector >= 0) {
        q->seen = 0;
        sio_wait_vector((uint32_t)host_vector, &q->seen, 0); /* take the current count */
    }
}

/* Reset (CC.EN=0, wait RDY=0), program the admin queues (entries each: SQ in sqr, CQ in cqr)
 * and enable (CC.EN=1, wait RDY=1). 0, -EIO (controller fatal status) or -ETIMEDOUT. */
static inline int nvs_reset(struct nvs *d, struct nvs_region *sqr, struct nvs_region *cqr,
                            uint32_t entries)
{
    sio_write32(d->regs, NVS_REG_CC, 0);
    int rc = nvs_wait_csts(d, NVS_CSTS_RDY, 0, 5000);
    if (rc)
        return rc;
    memset(d->q, 0, sizeof d->q);
    int64_t so = nvs_alloc(sqr, 64ull * entries), co = nvs_alloc(cqr, 16ull * entries);
    if (so < 0 || co < 0)
        return -ENOMEM;
    struct nvs_queue *q = &d->q[0];
    *q = (struct nvs_queue){ .live = true, .qid = 0, .size = entries,
                             .sq = (volatile struct nvs_sqe *)(sqr->cpu + so),
                             .cq = (volatile struct nvs_cqe *)(cqr->cpu + co),
                             .sq_io = sqr->io + (uint64_t)so, .cq_io = cqr->io + (uint64_t)co,
                             .phase = 1, .irq = -1 };
    sio_write32(d->regs, NVS_REG_AQA, (entries - 1) << 16 | (entries - 1));
    sio_write32(d->regs, NVS_REG_ASQ, (uint32_t)q->sq_io);
    sio_write32(d->regs, NVS_REG_ASQ + 4, (uint32_t)(q->sq_io >> 32));
    sio_write32(d->regs, NVS_REG_ACQ, (uint32_t)q->cq_io);
    sio_write32(d->regs, NVS_REG_ACQ + 4, (uint32_t)(q->cq_io >> 32));
    /* IOCQES 4 (16 B), IOSQES 6 (64 B), MPS 0 (4 KiB), CSS NVM, round robin. */
    sio_write32(d->regs, NVS_REG_CC, 1u | 6u << 16 | 4u << 20);
    return nvs_wait_csts(d, NVS_CSTS_RDY, NVS_CSTS_RDY, 5000);
}

/* Put a command in SQ qid (no doorbell yet); returns its CID, or -EAGAIN when the SQ is
 * full. */
static inline int nvs_put(struct nvs *d, uint16_t qid, struct nvs_sqe *s)
{
    struct nvs_queue *q = &d->q[qid];
    if ((q->sq_tail + 1) % q->size == q->sq_head)
        return -EAGAIN;
    s->cid = ++d->next_cid;
    if (s->cid == 0xffff)
        d->next_cid = 0;
    /* Copied out with memcpy, not read through a uint64_t pointer: that would be type
     * punning, and at -O3 the compiler may then read the entry before the CID store above
     * lands (strict aliasing), so the device would see a stale CID. */
    uint64_t words[8];
    memcpy(words, s, sizeof words);
    volatile uint64_t *dst = (volatile uint64_t *)(q->sq + q->sq_tail);
    for (int i = 0; i < 8; i++)
        dst[i] = words[i];
    q->sq_tail = (q->sq_tail + 1) % q->size;
    q->inflight++;
    return s->cid;
}

/* Ring SQ qid's doorbell: the stores of the commands are ordered before it (a fence, then the
 * register write, as a posted write after posted writes). */
static inline void nvs_ring(struct nvs *d, uint16_t qid)
{
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    seg_flush();
    sio_write32(d->regs, nvs_db_sq(d, qid), d->q[qid].sq_tail);
}

/* Take a completion from CQ qid if there is one: 1 taken, 0 none. Does not ring the CQ
 * doorbell (nvs_cq_ring does, so a batch costs one register write). */
static inline int nvs_take(struct nvs *d, uint16_t qid, struct nvs_cqe *out)
{
    struct nvs_queue *q = &d->q[qid];
    volatile struct nvs_cqe *e = q->cq + q->cq_head;
    uint16_t st = __atomic_load_n(&e->status, __ATOMIC_ACQUIRE);
    if ((st & 1u) != q->phase)
        return 0;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    out->dw0 = e->dw0;
    out->dw1 = e->dw1;
    out->sqhd = e->sqhd;
    out->sqid = e->sqid;
    out->cid = e->cid;
    out->status = st;
    q->sq_head = out->sqhd;
    if (++q->cq_head == q->size) {
        q->cq_head = 0;
        q->phase ^= 1;
    }
    q->inflight--;
    return 1;
}

static inline void nvs_cq_ring(struct nvs *d, uint16_t qid)
{
    sio_write32(d->regs, nvs_db_cq(d, qid), d->q[qid].cq_head);
}

/* The next completion of CQ qid within ms: by polling the phase bit (sleeping briefly between
 * looks) or, when the queue has a host vector, by sleeping in sio_wait_vector. 0 or
 * -ETIMEDOUT. Rings the CQ doorbell. */
static inline int nvs_reap(struct nvs *d, uint16_t qid, struct nvs_cqe *out, uint32_t ms)
{
    struct nvs_queue *q = &d->q[qid];
    uint64_t end = nvs_ns() + (uint64_t)ms * 1000000ull;
    for (uint32_t i = 0;; i++) {
        if (nvs_take(d, qid, out)) {
            nvs_cq_ring(d, qid);
            return 0;
        }
        uint64_t now = nvs_ns();
        if (now > end)
            return -ETIMEDOUT;
        d->polls++;
        if (q->irq >= 0) {
            int left = (int)((end - now) / 1000000ull) + 1;
            /* Returns at once if an interrupt came since the last one taken. */
            sio_wait_vector((uint32_t)q->irq, &q->seen, left);
        } else {
            nvs_pause(i);
        }
    }
}

static inline uint16_t nvs_status(const struct nvs_cqe *c) { return (c->status >> 1) & 0x7ff; }

/* Submit on SQ qid and wait for its completion on CQ cqid; status (SCT << 8 | SC), or
 * -ETIMEDOUT / -EAGAIN / -EPROTO (another command's completion came: this driver waits for
 * one command at a time here). */
static inline int nvs_cmd(struct nvs *d, uint16_t qid, uint16_t cqid, struct nvs_sqe *s,
                          struct nvs_cqe *cqe)
{
    struct nvs_cqe tmp;
    cqe = cqe ? cqe : &tmp;
    int cid = nvs_put(d, qid, s);
    if (cid < 0)
        return cid;
    nvs_ring(d, qid);
    int rc = nvs_reap(d, cqid, cqe, 5000);
    if (rc)
        return rc;
    if (cqe->cid != cid || cqe->sqid != qid)
        return -EPROTO;
    return nvs_status(cqe);
}

static inline struct nvs_sqe nvs_sqe_new(uint8_t opc, uint32_t nsid)
{
    struct nvs_sqe s;
    memset(&s, 0, sizeof s);
    s.opc = opc;
    s.nsid = nsid;
    return s;
}

/* Identify (cns 1: controller, 0: namespace nsid) into 4 KiB at buf (offset in r). */
static inline int nvs_identify(struct nvs *d, uint32_t cns, uint32_t nsid, struct nvs_region *r,
                               int64_t off)
{
    struct nvs_sqe s = nvs_sqe_new(NVS_ADM_IDENTIFY, nsid);
    s.prp1 = r->io + (uint64_t)off;
    s.cdw10 = cns;
    return nvs_cmd(d, 0, 0, &s, NULL);
}

/* Create I/O CQ+SQ pair qid with entries each, in regions sqr / cqr; interrupts on MSI-X
 * vector iv (ien) or none. */
static inline int nvs_create_pair(struct nvs *d, uint16_t qid, uint32_t entries,
                                  struct nvs_region *sqr, struct nvs_region *cqr, bool ien,
                                  uint16_t iv)
{
    if (qid == 0 || qid >= NVS_QMAX)
        return -EINVAL;
    int64_t co = nvs_alloc(cqr, 16ull * entries), so = nvs_alloc(sqr, 64ull * entries);
    if (co < 0 || so < 0)
        return -ENOMEM;
    struct nvs_queue *q = &d->q[qid];
    *q = (struct nvs_queue){ .qid = qid, .size = entries,
                             .sq = (volatile struct nvs_sqe *)(sqr->cpu + so),
                             .cq = (volatile struct nvs_cqe *)(cqr->cpu + co),
                             .sq_io = sqr->io + (uint64_t)so, .cq_io = cqr->io + (uint64_t)co,
                             .phase = 1, .irq = -1 };
    struct nvs_sqe s = nvs_sqe_new(NVS_ADM_CREATE_CQ, 0);
    s.prp1 = q->cq_io;
    s.cdw10 = (entries - 1) << 16 | qid;
    s.cdw11 = (uint32_t)iv << 16 | (ien ? 2u : 0u) | 1u; /* physically contiguous */
    int st = nvs_cmd(d, 0, 0, &s, NULL);
    if (st)
        return st;
    s = nvs_sqe_new(NVS_ADM_CREATE_SQ, 0);
    s.prp1 = q->sq_io;
    s.cdw10 = (entries - 1) << 16 | qid;
    s.cdw11 = (uint32_t)qid << 16 | 1u;
    st = nvs_cmd(d, 0, 0, &s, NULL);
    if (st)
        return st;
    q->live = true;
    return 0;
}

/* A read or write of nlb 4 KiB blocks at slba, data at r + off (contiguous in the region):
 * PRP1, PRP2 for two pages, a PRP list (taken from list_r + list_off, 4 KiB) beyond. */
static inline struct nvs_sqe nvs_rw(uint8_t opc, uint32_t nsid, uint64_t slba, uint32_t nlb,
                                    const struct nvs_region *r, int64_t off,
                                    struct nvs_region *list_r, int64_t list_off)
{
    struct nvs_sqe s = nvs_sqe_new(opc, nsid);
    s.cdw10 = (uint32_t)slba;
    s.cdw11 = (uint32_t)(slba >> 32);
    s.cdw12 = nlb - 1;
    uint64_t io = r->io + (uint64_t)off;
    s.prp1 = io;
    if (nlb == 2) {
        s.prp2 = io + NVS_PAGE;
    } else if (nlb > 2 && list_r) {
        volatile uint64_t *l = (volatile uint64_t *)(list_r->cpu + list_off);
        for (uint32_t i = 1; i < nlb && i <= NVS_PAGE / 8; i++)
            l[i - 1] = io + (uint64_t)i * NVS_PAGE;
        s.prp2 = list_r->io + (uint64_t)list_off;
    }
    return s;
}

/* Disable the controller (CC.EN=0) and wait for RDY=0. */
static inline int nvs_disable(struct nvs *d)
{
    sio_write32(d->regs, NVS_REG_CC, 0);
    return nvs_wait_csts(d, NVS_CSTS_RDY, 0, 5000);
}

#endif
