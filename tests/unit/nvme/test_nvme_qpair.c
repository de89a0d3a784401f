/*
 * The queue-pair core of libntbnvme (src/nvme/qpair.c) on its own, with this test playing
 * the controller through the backend ops table: queues in plain memory, doorbell writes
 * recorded. What a real controller will not do on request is done here: completions out of
 * order, a completion delivered twice, one for another queue, one for an identifier never
 * issued, one after its command timed out — and the doorbell offsets for a stride other than
 * 4 bytes, PRP entries for every buffer shape, the phase tag over several laps, status
 * decoding.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "nvme_int.h"

#define PAGE 4096u
#define IO_SQ 0x100000000ull /* device addresses of the test's memory */
#define IO_CQ 0x200000000ull
#define IO_PRP 0x300000000ull

/* ---------------------------------------------------------------- the pretend controller */

struct dev {
    uint32_t regs[0x4000 / 4];
    uint32_t writes; /* register writes seen */
    /* its view of the queues */
    uint32_t sq_head, cq_tail;
    uint8_t phase;
};

static uint32_t d_rd32(void *ctx, uint32_t off) { return ((struct dev *)ctx)->regs[off / 4]; }

static void d_wr32(void *ctx, uint32_t off, uint32_t val)
{
    struct dev *d = ctx;
    d->regs[off / 4] = val;
    d->writes++;
}

static int d_alloc(void *ctx, size_t size, enum nvme_place where, struct nvl_dma *out)
{
    (void)ctx, (void)size, (void)where, (void)out;
    return -ENOMEM; /* the core never allocates */
}

static void d_free(void *ctx, struct nvl_dma *dma) { (void)ctx, (void)dma; }

static const struct nvme_backend_ops dev_ops = {
    .name = "test", .read32 = d_rd32, .write32 = d_wr32, .dma_alloc = d_alloc,
    .dma_free = d_free,
};

struct fixture {
    struct dev dev;
    struct nvl_queue q;
    void *sq, *cq, *prp;
};

static struct fixture *make(uint16_t qid, uint32_t depth, uint32_t dstrd, uint64_t timeout_ns)
{
    struct fixture *f = calloc(1, sizeof *f);
    f->sq = aligned_alloc(PAGE, 64 * PAGE);
    f->cq = aligned_alloc(PAGE, 16 * PAGE);
    f->prp = aligned_alloc(PAGE, 64 * PAGE);
    memset(f->sq, 0, 64 * PAGE);
    memset(f->cq, 0, 16 * PAGE);
    f->dev.phase = 1;
    struct nvl_queue_params p = {
        .ops = &dev_ops, .ctx = &f->dev, .qid = qid, .depth = depth, .dstrd = dstrd,
        .page = PAGE, .prp_bytes = 256,
        .sq = { .cpu = f->sq, .io = IO_SQ, .size = 64ull * depth },
        .cq = { .cpu = f->cq, .io = IO_CQ, .size = 16ull * depth },
        .prp = { .cpu = f->prp, .io = IO_PRP, .size = 64 * PAGE },
        .timeout_ns = timeout_ns, .spin_ns = 1000,
    };
    assert_int_equal(nvl_q_init(&f->q, &p), 0);
    return f;
}

static void destroy(struct fixture *f)
{
    nvl_q_fini(&f->q);
    free(f->sq);
    free(f->cq);
    free(f->prp);
    free(f);
}

static uint32_t sq_db(const struct fixture *f)
{
    return NVME_REG_DBS + 2u * f->q.p.qid * (4u << f->q.p.dstrd);
}

/* Fetch the next command the doorbell made visible (asserts there is one). */
static struct nvme_sqe fetch(struct fixture *f)
{
    uint32_t tail = f->dev.regs[sq_db(f) / 4];
    assert_int_not_equal(f->dev.sq_head, tail);
    struct nvme_sqe e;
    memcpy(&e, (char *)f->sq + 64u * f->dev.sq_head, sizeof e);
    f->dev.sq_head = (f->dev.sq_head + 1) % f->q.p.depth;
    return e;
}

/* Post a completion as a controller does: the dword with the phase tag last. */
static void post(struct fixture *f, uint16_t cid, uint16_t sqid, uint16_t status)
{
    uint32_t *e = (uint32_t *)f->cq + 4u * f->dev.cq_tail;
    e[0] = 0x1234;
    e[1] = 0;
    e[2] = f->dev.sq_head | (uint32_t)sqid << 16;
    __atomic_store_n(&e[3], cid | (uint32_t)(status << 1 | f->dev.phase) << 16, __ATOMIC_RELEASE);
    if (++f->dev.cq_tail == f->q.p.depth) {
        f->dev.cq_tail = 0;
        f->dev.phase ^= 1;
    }
}

struct seen {
    int calls;
    struct nvme_cpl cpl;
};

static void cb(void *arg, const struct nvme_cpl *cpl)
{
    struct seen *s = arg;
    s->calls++;
    s->cpl = *cpl;
}

static int submit(struct fixture *f, struct seen *s, bool defer)
{
    int slot = nvl_q_get(&f->q);
    if (slot < 0)
        return slot;
    struct nvme_sqe e = { .opc = NVME_CMD_READ, .nsid = 1 };
    nvl_q_post(&f->q, slot, &e, cb, s, defer);
    return slot;
}

/* ---------------------------------------------------------------- tests */

static void test_doorbell_stride(void **state)
{
    (void)state;
    struct fixture *f = make(3, 8, 2, 1000000000ull); /* DSTRD 2: 16-byte doorbells */
    struct seen s = { 0 };
    assert_true(submit(f, &s, false) >= 0);
    assert_int_equal(f->dev.regs[(0x1000 + 6 * 16) / 4], 1); /* SQ 3 tail */
    struct nvme_sqe e = fetch(f);
    post(f, e.cid, 3, 0);
    assert_int_equal(nvl_q_reap(&f->q, 0), 1);
    assert_int_equal(f->dev.regs[(0x1000 + 7 * 16) / 4], 1); /* CQ 3 head */
    assert_int_equal(s.calls, 1);
    destroy(f);
}

static void test_prp_shapes(void **state)
{
    (void)state;
    struct fixture *f = make(1, 8, 0, 1000000000ull);
    int slot = nvl_q_get(&f->q);
    struct nvme_sqe e;
    const uint64_t io = 0x40000000ull;
    /* One page, and a short piece inside one page: PRP1 only. */
    memset(&e, 0, sizeof e);
    nvl_q_prp(&f->q, slot, &e, io, PAGE);
    assert_true(e.prp1 == io && e.prp2 == 0);
    nvl_q_prp(&f->q, slot, &e, io + 100, 512);
    assert_true(e.prp1 == io + 100 && e.prp2 == 0);
    /* Two pages: PRP2 is the second page. From an offset, 4 KiB still spans two pages. */
    nvl_q_prp(&f->q, slot, &e, io, 2 * PAGE);
    assert_true(e.prp1 == io && e.prp2 == io + PAGE);
    nvl_q_prp(&f->q, slot, &e, io + 512, PAGE);
    assert_true(e.prp1 == io + 512 && e.prp2 == io + PAGE);
    /* More: PRP2 is the slot's list, holding every page after the first. */
    nvl_q_prp(&f->q, slot, &e, io, 5 * PAGE);
    assert_true(e.prp1 == io);
    assert_true(e.prp2 == f->q.slots[slot].prp_io);
    for (int i = 0; i < 4; i++)
        assert_true(f->q.slots[slot].prp[i] == io + (uint64_t)(i + 1) * PAGE);
    nvl_q_prp(&f->q, slot, &e, io + 512, 3 * PAGE); /* spans 4 pages */
    assert_true(e.prp1 == io + 512 && e.prp2 == f->q.slots[slot].prp_io);
    for (int i = 0; i < 3; i++)
        assert_true(f->q.slots[slot].prp[i] == io + (uint64_t)(i + 1) * PAGE);
    /* Slots have lists of their own, inside one page each. */
    assert_true(f->q.slots[1].prp_io - f->q.slots[0].prp_io == 256);
    destroy(f);
}

static void test_out_of_order_and_phase_laps(void **state)
{
    (void)state;
    struct fixture *f = make(1, 4, 0, 1000000000ull); /* 3 commands in flight at most */
    struct seen s[3];
    for (int lap = 0; lap < 5; lap++) {
        memset(s, 0, sizeof s);
        for (int i = 0; i < 3; i++)
            assert_true(submit(f, &s[i], true) >= 0);
        assert_int_equal(submit(f, &s[0], true), -EAGAIN); /* full */
        nvl_q_ring(&f->q);
        struct nvme_sqe e[3];
        for (int i = 0; i < 3; i++)
            e[i] = fetch(f);
        /* Completed in reverse: each callback gets its own command's argument. */
        for (int i = 2; i >= 0; i--)
            post(f, e[i].cid, 1, i == 1 ? NVME_LBA_RANGE | NVME_DNR >> 1 : 0);
        assert_int_equal(nvl_q_reap(&f->q, 0), 3);
        for (int i = 0; i < 3; i++)
            assert_int_equal(s[i].calls, 1);
        assert_int_equal(s[0].cpl.rc, 0);
        assert_int_equal(s[1].cpl.rc, -ERANGE);
        assert_int_equal(s[1].cpl.status, NVME_LBA_RANGE);
        assert_true(s[1].cpl.dnr);
        assert_int_equal(s[2].cpl.dw0, 0x1234);
    }
    assert_int_equal(f->q.st.completed, 15);
    assert_int_equal(f->q.st.stale, 0);
    assert_int_equal(nvl_q_reap(&f->q, 0), 0);
    destroy(f);
}

static void test_stale_completions_are_dropped(void **state)
{
    (void)state;
    struct fixture *f = make(2, 16, 0, 1000000000ull);
    struct seen a = { 0 }, b = { 0 };
    assert_true(submit(f, &a, false) >= 0);
    assert_true(submit(f, &b, false) >= 0);
    struct nvme_sqe ea = fetch(f), eb = fetch(f);
    assert_int_not_equal(ea.cid, eb.cid);
    post(f, ea.cid, 2, 0);
    post(f, ea.cid, 2, 0);          /* the same completion again */
    post(f, eb.cid, 7, 0);          /* b's identifier, another queue's completion */
    post(f, (uint16_t)(eb.cid + 1), 2, 0); /* an identifier never issued */
    assert_int_equal(nvl_q_reap(&f->q, 0), 1);
    assert_int_equal(a.calls, 1);
    assert_int_equal(b.calls, 0);
    assert_int_equal(f->q.st.stale, 3);
    assert_int_equal(f->q.busy, 1);
    post(f, eb.cid, 2, 0);          /* b's own */
    assert_int_equal(nvl_q_reap(&f->q, 0), 1);
    assert_int_equal(b.calls, 1);
    assert_int_equal(a.calls, 1);
    /* b's CQ entry was the 5th taken; the head doorbell followed every entry, stale ones
     * included. */
    assert_int_equal(f->dev.regs[(0x1000 + 5 * 4) / 4], 5);
    destroy(f);

    /* One slot only: its next command gets another identifier, so a late duplicate of the
     * previous one is still recognised. */
    f = make(1, 2, 0, 1000000000ull);
    struct seen c = { 0 }, e = { 0 };
    assert_true(submit(f, &c, false) >= 0);
    struct nvme_sqe ec = fetch(f);
    post(f, ec.cid, 1, 0);
    assert_int_equal(nvl_q_reap(&f->q, 0), 1);
    assert_true(submit(f, &e, false) >= 0);
    struct nvme_sqe ee = fetch(f);
    assert_int_not_equal(ee.cid, ec.cid);
    post(f, ec.cid, 1, 0);
    assert_int_equal(nvl_q_reap(&f->q, 0), 0);
    assert_int_equal(e.calls, 0);
    assert_int_equal(f->q.st.stale, 1);
    post(f, ee.cid, 1, 0);
    assert_int_equal(nvl_q_reap(&f->q, 0), 1);
    assert_int_equal(e.calls, 1);
    assert_int_equal(c.calls, 1);
    destroy(f);
}

static void test_timeout_then_late_completion(void **state)
{
    (void)state;
    struct fixture *f = make(1, 4, 0, 2000000ull); /* 2 ms */
    struct seen a = { 0 };
    int slot = submit(f, &a, false);
    assert_true(slot >= 0);
    struct nvme_sqe ea = fetch(f);
    /* Nobody answers: the wait ends with the command's timeout, reported once. */
    assert_int_equal(nvl_q_wait(&f->q, NULL, 1000000000ull), 1);
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.cpl.rc, -ETIMEDOUT);
    assert_int_equal(f->q.st.timeouts, 1);
    assert_int_equal(f->q.busy, 0);
    assert_int_equal(nvl_q_wait(&f->q, NULL, 1000000000ull), 0); /* nothing outstanding */
    /* Its slot stays taken until the answer comes; then it is dropped, not delivered. */
    assert_int_equal(f->q.nfree, f->q.nslots - 1);
    post(f, ea.cid, 1, 0);
    assert_int_equal(nvl_q_reap(&f->q, 0), 0);
    assert_int_equal(a.calls, 1);
    assert_int_equal(f->q.st.late, 1);
    assert_int_equal(f->q.nfree, f->q.nslots);
    /* A synchronous command times out the same way. */
    struct nvme_sqe e = { .opc = NVME_CMD_FLUSH, .nsid = 1 };
    struct nvme_cpl cpl;
    assert_int_equal(nvl_q_sync(&f->q, &e, 0, 0, &cpl), -ETIMEDOUT);
    assert_int_equal(cpl.rc, -ETIMEDOUT);
    assert_int_equal(f->q.st.timeouts, 2);
    destroy(f);
}

static void test_status_decoding(void **state)
{
    (void)state;
    static const struct { uint16_t st; int rc; } map[] = {
        { NVME_SUCCESS, 0 }, { NVME_INVALID_OPCODE, -EOPNOTSUPP },
        { NVME_INVALID_FIELD, -EINVAL }, { NVME_INVALID_NAMESPACE, -ENXIO },
        { NVME_LBA_RANGE, -ERANGE }, { NVME_ABORT_SQ_DELETION, -ECANCELED },
        { NVME_INVALID_QID, -EINVAL }, { NVME_INVALID_QUEUE_DELETION, -EBUSY },
        { NVME_WRITE_FAULT, -EIO }, { NVME_UNRECOVERED_READ, -EIO },
        { NVME_DATA_TRANSFER_ERROR, -EIO },
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        struct nvme_cpl c;
        nvl_status((uint16_t)(map[i].st << 1 | 1u | NVME_DNR), 7, &c);
        assert_int_equal(c.status, map[i].st);
        assert_int_equal(c.rc, map[i].rc);
        assert_true(c.dnr);
        assert_int_equal(c.dw0, 7);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_doorbell_stride),
        cmocka_unit_test(test_prp_shapes),
        cmocka_unit_test(test_out_of_order_and_phase_laps),
        cmocka_unit_test(test_stale_completions_are_dropped),
        cmocka_unit_test(test_timeout_then_late_completion),
        cmocka_unit_test(test_status_decoding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
