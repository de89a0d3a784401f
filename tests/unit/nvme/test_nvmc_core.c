/*
 * The NVMe controller model's core (src/devices/nvmc_*.c) on its own, with this test as the
 * host behind its backend: host memory is a buffer here and every DMA write is recorded. It
 * checks how completions reach the host: one 16-byte posted write per entry, whose last dword
 * holds the phase tag (the fabric lands such a write with that dword last, docs/fabric.md),
 * the phase flipping when the queue wraps, and an error's status with DNR.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "nvmc_ctrl.h"

#define MEM_BASE 0x10000000ull /* the host memory's bus address */
#define MEM_SIZE (64u << 10)
#define ASQ (MEM_BASE + 0x0000)
#define ACQ (MEM_BASE + 0x1000)
#define DATA (MEM_BASE + 0x2000)
#define ACQ_ENTRIES 2u /* the smallest: the phase flips every second completion */

struct host {
    uint8_t mem[MEM_SIZE];
    struct { uint64_t addr, len; } w[64]; /* DMA writes, in order */
    unsigned nw;
};

static void *at(struct host *h, uint64_t addr, uint64_t len)
{
    if (addr < MEM_BASE || addr - MEM_BASE > MEM_SIZE || len > MEM_SIZE - (addr - MEM_BASE))
        return NULL;
    return h->mem + (addr - MEM_BASE);
}

static int h_read(void *ctx, uint64_t addr, void *buf, uint64_t len)
{
    void *p = at(ctx, addr, len);
    if (!p) {
        memset(buf, 0xff, len);
        return -EIO;
    }
    memcpy(buf, p, len);
    return 0;
}

static int h_write(void *ctx, uint64_t addr, const void *buf, uint64_t len)
{
    struct host *h = ctx;
    void *p = at(h, addr, len);
    if (!p)
        return -EIO;
    memcpy(p, buf, len);
    assert_true(h->nw < sizeof h->w / sizeof h->w[0]);
    h->w[h->nw].addr = addr;
    h->w[h->nw].len = len;
    h->nw++;
    return 0;
}

struct rig {
    struct host h;
    struct nvmc_ctrl c;
    _Alignas(64) uint8_t regs[NVMC_REGS_SIZE];
    uint32_t sq_tail, cq_head;
};

static void reg32(struct rig *r, uint32_t off, uint32_t v) { memcpy(r->regs + off, &v, 4); }

static void reg64(struct rig *r, uint32_t off, uint64_t v) { memcpy(r->regs + off, &v, 8); }

static int setup(void **state)
{
    struct rig *r = aligned_alloc(64, (sizeof *r + 63) & ~(size_t)63);
    assert_non_null(r);
    memset(r, 0, sizeof *r);
    const struct nvmc_params p = { .queues = 2, .namespaces = 1, .ns_size = 1u << 20,
                                   .mdts = 5, .vid = 0x8086, .serial = "core" };
    const struct nvmc_backend be = { .ctx = &r->h, .dma_read = h_read, .dma_write = h_write };
    assert_int_equal(nvmc_ctrl_init(&r->c, &p, &be, r->regs), 0);
    reg32(r, NVME_REG_AQA, (ACQ_ENTRIES - 1) << 16 | 3); /* 4 SQ entries, 2 CQ entries */
    reg64(r, NVME_REG_ASQ, ASQ);
    reg64(r, NVME_REG_ACQ, ACQ);
    reg32(r, NVME_REG_CC, NVME_CC_EN);
    assert_true(nvmc_regs_update(&r->c));
    *state = r;
    return 0;
}

static int teardown(void **state)
{
    struct rig *r = *state;
    nvmc_ctrl_fini(&r->c);
    free(r);
    return 0;
}

/* Submit one admin command, let the controller take it, check that its completion came as one
 * 16-byte write into the next CQ slot, and return that completion. */
static struct nvme_cqe submit(struct rig *r, const struct nvme_sqe *sqe)
{
    memcpy(at(&r->h, ASQ + r->sq_tail * 64ull, 64), sqe, 64);
    r->sq_tail = (r->sq_tail + 1) % 4;
    reg32(r, NVME_REG_DBS, r->sq_tail); /* SQ 0 tail doorbell (stride 4) */
    r->h.nw = 0;
    assert_true(nvmc_regs_update(&r->c));
    assert_int_equal(nvmc_process(&r->c), 1);
    uint64_t slot = ACQ + 16ull * (r->cq_head % ACQ_ENTRIES);
    unsigned to_cq = 0;
    for (unsigned i = 0; i < r->h.nw; i++)
        if (r->h.w[i].addr >= ACQ && r->h.w[i].addr < ACQ + 16 * ACQ_ENTRIES) {
            assert_int_equal(r->h.w[i].addr, slot);
            assert_int_equal(r->h.w[i].len, 16);
            to_cq++;
        }
    assert_int_equal(to_cq, 1);
    struct nvme_cqe cqe;
    memcpy(&cqe, at(&r->h, slot, 16), 16);
    r->cq_head = (r->cq_head + 1) % ACQ_ENTRIES;
    reg32(r, NVME_REG_DBS + 4, r->cq_head); /* CQ 0 head doorbell: the entry is taken */
    return cqe;
}

static void test_completion_is_one_write(void **state)
{
    struct rig *r = *state;
    struct nvme_sqe id = { .opc = NVME_ADM_IDENTIFY, .prp1 = DATA, .cdw10 = NVME_CNS_CTRL };
    uint8_t phase = 1;
    for (uint16_t cid = 1; cid <= 5; cid++) {
        id.cid = cid;
        struct nvme_cqe cqe = submit(r, &id);
        assert_int_equal(cqe.cid, cid);
        assert_int_equal(cqe.sqid, 0);
        assert_int_equal(cqe.sqhd, cid % 4);
        assert_int_equal(cqe.status, phase); /* success, with the phase tag */
        if (cid % ACQ_ENTRIES == 0)
            phase ^= 1; /* the queue wrapped */
    }
    /* The data came before its completion. */
    uint16_t vid;
    memcpy(&vid, at(&r->h, DATA, 2), 2);
    assert_int_equal(vid, 0x8086);
}

static void test_error_completion(void **state)
{
    struct rig *r = *state;
    struct nvme_sqe bad = { .opc = NVME_ADM_IDENTIFY, .cid = 9, .prp1 = DATA, .cdw10 = 0xee };
    struct nvme_cqe cqe = submit(r, &bad);
    assert_int_equal(cqe.cid, 9);
    assert_int_equal(cqe.status, NVME_DNR | NVME_INVALID_FIELD << 1 | 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_completion_is_one_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_completion, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
