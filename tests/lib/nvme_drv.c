/*
 * Bodies of the test helpers declared in nvme_drv.h (what that header says).
 */
#include "nvme_drv.h"

uint32_t nvd_r32(struct nvd *d, uint32_t off)
{
    return __atomic_load_n((uint32_t *)(uintptr_t)(d->regs + off), __ATOMIC_ACQUIRE);
}

uint64_t nvd_r64(struct nvd *d, uint32_t off)
{
    return (uint64_t)nvd_r32(d, off + 4) << 32 | nvd_r32(d, off);
}

void nvd_w32(struct nvd *d, uint32_t off, uint32_t v)
{
    __atomic_store_n((uint32_t *)(uintptr_t)(d->regs + off), v, __ATOMIC_RELEASE);
    fab_fn_notify(d->f, d->fn);
}

void nvd_w64(struct nvd *d, uint32_t off, uint64_t v)
{
    __atomic_store_n((uint32_t *)(uintptr_t)(d->regs + off), (uint32_t)v, __ATOMIC_RELEASE);
    nvd_w32(d, off + 4, (uint32_t)(v >> 32));
}

void *nvd_ptr(struct nvd *d, uint64_t phys)
{
    return d->mem + (phys - NVD_MEM_BASE);
}

uint64_t nvd_alloc(struct nvd *d, uint64_t size, uint64_t align)
{
    d->brk = (d->brk + align - 1) & ~(align - 1);
    uint64_t p = NVD_MEM_BASE + d->brk;
    d->brk += size;
    if (d->brk > NVD_MEM_SIZE)
        return 0;
    memset(nvd_ptr(d, p), 0, size);
    return p;
}

uint64_t nvd_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void nvd_pause(uint32_t spins)
{
    if (spins < 100)
        sched_yield();
    else
        usleep(100);
}

int nvd_open(struct nvd *d, struct fab *f, const char *name)
{
    memset(d, 0, sizeof *d);
    int fn = fab_func_by_name(f, name);
    if (fn < 0)
        return -ENODEV;
    d->f = f;
    d->fn = (uint32_t)fn;
    d->host = fab_func(f, d->fn)->host;
    fab_cfg_write(f, d->fn, 0x04, 2, FAB_CMD_MEM | FAB_CMD_BME);
    d->regs = fab_bar_mem(f, d->fn, fab_func(f, d->fn)->bar[0].off, fab_func(f, d->fn)->bar[0].size);
    d->mem = fab_ram(f, d->host, NVD_MEM_BASE, NVD_MEM_SIZE);
    return d->regs && d->mem ? 0 : -EIO;
}

int nvd_wait_csts(struct nvd *d, uint32_t mask, uint32_t want, uint32_t ms)
{
    uint64_t end = nvd_ms() + ms;
    for (uint32_t i = 0;; i++) {
        if ((nvd_r32(d, NVME_REG_CSTS) & mask) == want)
            return 0;
        if (nvd_ms() > end)
            return -ETIMEDOUT;
        nvd_pause(i);
    }
}

int nvd_disable(struct nvd *d)
{
    nvd_w32(d, NVME_REG_CC, 0);
    int rc = nvd_wait_csts(d, NVME_CSTS_RDY | NVME_CSTS_CFS, 0, 5000);
    memset(d->q, 0, sizeof d->q);
    d->nstash = 0;
    return rc;
}

int nvd_enable_at(struct nvd *d, uint32_t entries, uint64_t asq, uint64_t acq)
{
    d->q[0] = (struct nvd_queue){ .live = true, .sq = asq, .cq = acq, .sq_size = entries,
                                  .cq_size = entries, .phase = 1 };
    nvd_w32(d, NVME_REG_AQA, (entries - 1) << 16 | (entries - 1));
    nvd_w64(d, NVME_REG_ASQ, asq);
    nvd_w64(d, NVME_REG_ACQ, acq);
    nvd_w32(d, NVME_REG_CC, NVME_CC_EN | 6u << 16 | 4u << 20);
    uint64_t end = nvd_ms() + 5000;
    for (uint32_t i = 0;; i++) {
        uint32_t csts = nvd_r32(d, NVME_REG_CSTS);
        if (csts & NVME_CSTS_CFS)
            return -EIO;
        if (csts & NVME_CSTS_RDY)
            return 0;
        if (nvd_ms() > end)
            return -ETIMEDOUT;
        nvd_pause(i);
    }
}

int nvd_reset(struct nvd *d)
{
    int rc = nvd_disable(d);
    if (rc)
        return rc;
    d->brk = 0;
    uint64_t asq = nvd_alloc(d, 64 * 64, NVD_PAGE), acq = nvd_alloc(d, 64 * 16, NVD_PAGE);
    return nvd_enable_at(d, 64, asq, acq);
}

struct nvme_sqe nvd_sqe(uint8_t opc, uint32_t nsid)
{
    struct nvme_sqe s;
    memset(&s, 0, sizeof s);
    s.opc = opc;
    s.nsid = nsid;
    return s;
}

uint16_t nvd_queue_cmd(struct nvd *d, uint16_t qid, struct nvme_sqe *s, bool ring)
{
    struct nvd_queue *q = &d->q[qid];
    s->cid = ++d->next_cid;
    memcpy((char *)nvd_ptr(d, q->sq) + 64ull * q->sq_tail, s, 64);
    q->sq_tail = (q->sq_tail + 1) % q->sq_size;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (ring)
        nvd_w32(d, NVME_REG_DBS + 8u * qid, q->sq_tail);
    return s->cid;
}

void nvd_ring(struct nvd *d, uint16_t qid)
{
    nvd_w32(d, NVME_REG_DBS + 8u * qid, d->q[qid].sq_tail);
}

int nvd_reap(struct nvd *d, uint16_t qid, struct nvme_cqe *out, uint32_t ms)
{
    struct nvd_queue *q = &d->q[qid];
    uint64_t end = nvd_ms() + ms;
    for (uint32_t i = 0;; i++) {
        struct nvme_cqe *e = (struct nvme_cqe *)nvd_ptr(d, q->cq) + q->cq_head;
        uint16_t st = __atomic_load_n(&e->status, __ATOMIC_ACQUIRE);
        if ((st & 1) == q->phase) {
            memcpy(out, e, sizeof *out);
            if (++q->cq_head == q->cq_size) {
                q->cq_head = 0;
                q->phase ^= 1;
            }
            nvd_w32(d, NVME_REG_DBS + 8u * qid + 4u, q->cq_head);
            return 0;
        }
        if (nvd_ms() > end)
            return -ETIMEDOUT;
        nvd_pause(i);
    }
}

int nvd_wait_cid(struct nvd *d, uint16_t qid, uint16_t cid, struct nvme_cqe *out, uint32_t ms)
{
    for (uint32_t i = 0; i < d->nstash; i++)
        if (d->stash[i].qid == qid && d->stash[i].cqe.cid == cid) {
            *out = d->stash[i].cqe;
            d->stash[i] = d->stash[--d->nstash];
            return 0;
        }
    for (;;) {
        int rc = nvd_reap(d, qid, out, ms);
        if (rc)
            return rc;
        if (out->cid == cid)
            return 0;
        if (d->nstash < NVD_STASH)
            d->stash[d->nstash++] = (typeof(d->stash[0])){ qid, *out };
    }
}

uint16_t nvd_status(const struct nvme_cqe *c) { return (c->status >> 1) & 0x7ff; }

bool nvd_dnr(const struct nvme_cqe *c) { return c->status & NVME_DNR; }

int nvd_cmd_on(struct nvd *d, uint16_t qid, uint16_t cqid, struct nvme_sqe *s,
               struct nvme_cqe *cqe)
{
    struct nvme_cqe tmp;
    cqe = cqe ? cqe : &tmp;
    uint16_t cid = nvd_queue_cmd(d, qid, s, true);
    int rc = nvd_wait_cid(d, cqid, cid, cqe, 5000);
    return rc ? rc : nvd_status(cqe);
}

int nvd_admin(struct nvd *d, struct nvme_sqe *s, struct nvme_cqe *cqe)
{
    return nvd_cmd_on(d, 0, 0, s, cqe);
}

int nvd_io(struct nvd *d, uint16_t qid, struct nvme_sqe *s, struct nvme_cqe *cqe)
{
    return nvd_cmd_on(d, qid, qid, s, cqe);
}

int nvd_create_cq(struct nvd *d, uint16_t qid, uint32_t entries, bool ien, uint16_t iv)
{
    uint64_t cq = nvd_alloc(d, 16ull * entries, NVD_PAGE);
    struct nvme_sqe s = nvd_sqe(NVME_ADM_CREATE_CQ, 0);
    s.prp1 = cq;
    s.cdw10 = (entries - 1) << 16 | qid;
    s.cdw11 = (uint32_t)iv << 16 | (ien ? 2u : 0u) | 1u;
    int st = nvd_admin(d, &s, NULL);
    if (st == 0 && qid < NVD_QMAX) {
        d->q[qid].cq = cq;
        d->q[qid].cq_size = entries;
        d->q[qid].cq_head = 0;
        d->q[qid].phase = 1;
    }
    return st;
}

int nvd_create_sq(struct nvd *d, uint16_t qid, uint32_t entries, uint16_t cqid)
{
    uint64_t sq = nvd_alloc(d, 64ull * entries, NVD_PAGE);
    struct nvme_sqe s = nvd_sqe(NVME_ADM_CREATE_SQ, 0);
    s.prp1 = sq;
    s.cdw10 = (entries - 1) << 16 | qid;
    s.cdw11 = (uint32_t)cqid << 16 | 1u;
    int st = nvd_admin(d, &s, NULL);
    if (st == 0 && qid < NVD_QMAX) {
        d->q[qid].live = true;
        d->q[qid].sq = sq;
        d->q[qid].sq_size = entries;
        d->q[qid].sq_tail = 0;
    }
    return st;
}

int nvd_delete(struct nvd *d, uint8_t opc, uint16_t qid)
{
    struct nvme_sqe s = nvd_sqe(opc, 0);
    s.cdw10 = qid;
    return nvd_admin(d, &s, NULL);
}

void nvd_prp(struct nvd *d, struct nvme_sqe *s, uint64_t buf, uint64_t len)
{
    s->prp1 = buf;
    uint64_t first = NVD_PAGE - (buf & (NVD_PAGE - 1));
    if (len <= first) {
        s->prp2 = 0;
        return;
    }
    uint64_t rem = len - first, next = buf + first;
    if (rem <= NVD_PAGE) {
        s->prp2 = next;
        return;
    }
    uint64_t n = (rem + NVD_PAGE - 1) / NVD_PAGE;
    uint64_t list = nvd_alloc(d, n * 8, NVD_PAGE);
    uint64_t *l = nvd_ptr(d, list);
    for (uint64_t i = 0; i < n; i++)
        l[i] = next + i * NVD_PAGE;
    s->prp2 = list;
}

struct nvme_sqe nvd_rw(uint8_t opc, uint32_t nsid, uint64_t slba, uint32_t nlb)
{
    struct nvme_sqe s = nvd_sqe(opc, nsid);
    s.cdw10 = (uint32_t)slba;
    s.cdw11 = (uint32_t)(slba >> 32);
    s.cdw12 = nlb - 1;
    return s;
}

int nvd_fx_setup(void **state, struct fx *fx, const char *test, const char *topo, struct nvd *d,
                 const char *dev)
{
    const struct fx_opts o = { .topo = topo, .nvme_dir = true, .attach = fx_attach };
    if (fx_setup(state, fx, test, &o))
        return -1;
    return nvd_open(d, fx->f, dev);
}

int nvd_io_pair(struct nvd *d, uint32_t entries)
{
    int st = nvd_create_cq(d, 1, entries, true, 1);
    return st ? st : nvd_create_sq(d, 1, entries, 1);
}

int nvd_features(struct nvd *d, uint8_t opc, uint32_t cdw10, uint32_t cdw11, uint32_t *dw0)
{
    struct nvme_sqe s = nvd_sqe(opc, 0);
    struct nvme_cqe cqe = { 0 };
    s.cdw10 = cdw10;
    s.cdw11 = cdw11;
    int st = nvd_admin(d, &s, &cqe);
    if (dw0)
        *dw0 = cqe.dw0;
    return st;
}

void nvd_fill(void *p, size_t len, uint32_t seed)
{
    uint32_t *w = p;
    for (size_t i = 0; i < len / 4; i++) {
        seed = seed * 1103515245u + 12345u;
        w[i] = seed;
    }
}
