/*
 * libntbnvme (ntblend/nvme.h) against the NVMe model, borrowed from host a by a program on
 * host b of smartio3.ini (and once on a itself): controller and namespace information, two
 * queue pairs with different queue placement, reads and writes verified byte for byte
 * (single pages, PRP pairs, PRP lists, a buffer starting mid-page), flush, write zeroes,
 * deallocate, many asynchronous commands in flight with callbacks, a full queue, interrupts,
 * every error the library checks for, a completion arriving after its command timed out, and
 * the CPU the model publishes for the completion wait.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"
#include "nvme_tests.h"
#include "ntblend/nvme.h"
#include "ntblend/smartio.h"

static struct fx FX;
#define BS 4096u
#define NSZE ((1ull << 30) / BS) /* smartio3.ini: 1 GiB namespace, 4 KiB blocks */

static int setup(void **state)
{
    static const struct fx_opts o = { .topo = "examples/topologies/smartio3.ini" };
    if (fx_setup(state, &FX, "nvl", &o))
        return -1;
    struct h_proc p = h_spawn(FX.name, "a", lender, NULL);
    h_from(&p);
    return h_join(&p);
}

static void run_on(const char *host, void (*fn)(void *))
{
    struct h_proc p = h_spawn(FX.name, host, fn, NULL);
    assert_int_equal(h_join(&p), 0);
}

static void fill(uint8_t *p, uint32_t tag, uint64_t lba, uint32_t nblocks)
{
    for (size_t i = 0; i < (size_t)nblocks * BS; i++)
        p[i] = pattern(tag, lba + i / BS, i % BS);
}

/* 0 when p holds fill(tag, lba, nblocks), else 1 + the first differing byte. */
static size_t differs(const uint8_t *p, uint32_t tag, uint64_t lba, uint32_t nblocks)
{
    for (size_t i = 0; i < (size_t)nblocks * BS; i++)
        if (p[i] != pattern(tag, lba + i / BS, i % BS))
            return i + 1;
    return 0;
}

static bool all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

static nvme_dev_t *open_nvme0(unsigned timeout_ms)
{
    struct nvme_open_opts o = { .timeout_ms = timeout_ms };
    nvme_dev_t *d = NULL;
    int rc = nvme_open("nvme0", &o, &d);
    if (rc)
        fprintf(stderr, "nvme_open: %s\n", nvme_errmsg());
    CHECK_EQ(rc, 0);
    return d;
}

/* ---------------------------------------------------------------- information */

static void info_child(void *arg)
{
    (void)arg;
    nvme_dev_t *d = open_nvme0(0);
    struct nvme_ctrl_info ci;
    CHECK_EQ(nvme_ctrl_info(d, &ci), 0);
    CHECK(ci.vid != 0 && ci.vid != 0xffff);
    CHECK(ci.serial[0] && ci.model[0] && ci.firmware[0]);
    CHECK(ci.version >= 0x00010000u);
    CHECK_EQ(ci.namespaces, 1);
    CHECK_EQ(ci.max_qpairs, 32);         /* smartio3.ini: queues = 32 */
    CHECK_EQ(ci.max_transfer, 32 * BS);  /* the model's MDTS 5 */
    CHECK(ci.max_depth >= 64);
    CHECK_EQ(ci.doorbell_stride, 4);
    struct nvme_ns_info ns;
    CHECK_EQ(nvme_ns_info(d, 1, &ns), 0);
    CHECK_EQ(ns.block_size, BS);
    CHECK_EQ(ns.blocks, NSZE);
    CHECK_EQ(ns.capacity, 1ull << 30);
    CHECK_EQ(nvme_ns_info(d, 2, &ns), -ENXIO);
    CHECK(strstr(nvme_errmsg(), "namespace 2"));
    CHECK(nvme_sio_dev(d) != NULL);
    /* Raw Identify Controller: the same serial number as the parsed one. */
    uint8_t *id = nvme_buf_alloc(d, NULL, 4096);
    CHECK(id);
    struct nvme_cmd c = { .opc = 0x06, .cdw10 = 1 };
    struct nvme_cpl cpl;
    CHECK_EQ(nvme_admin(d, &c, id, 4096, &cpl), 0);
    CHECK_EQ(cpl.status, 0);
    CHECK(memcmp(id + 4, ci.serial, strlen(ci.serial)) == 0);
    CHECK_EQ(nvme_buf_free(d, id), 0);
    CHECK_EQ(nvme_close(d), 0);
}

static void test_open_and_info(void **state)
{
    (void)state;
    run_on("b", info_child);
}

/* ---------------------------------------------------------------- data */

static void rw_child(void *arg)
{
    (void)arg;
    nvme_dev_t *d = open_nvme0(0);
    /* Two queue pairs: the SQ near the device and the CQ here (smartio §7.4.1), and both
     * here with MSI-X interrupts. */
    nvme_qpair_t *q1, *q2;
    struct nvme_qpair_opts o1 = { .depth = 32, .sq_place = NVME_PLACE_DEVICE };
    struct nvme_qpair_opts o2 = { .depth = 16, .irq = 40 };
    CHECK_EQ(nvme_qpair_create(d, &o1, &q1), 0);
    CHECK_EQ(nvme_qpair_create(d, &o2, &q2), 0);
    CHECK(nvme_qpair_id(q1) != nvme_qpair_id(q2));
    CHECK(nvme_qpair_id(q1) >= 1 && nvme_qpair_id(q2) >= 1);

    /* One block, two blocks (PRP1 + PRP2), 32 blocks (a PRP list: the most one command
     * takes), and 3 blocks from a buffer starting 512 bytes into a page (PRP1 with an
     * offset, then a list). Written on one queue pair, read on the other. */
    static const struct { uint64_t lba; uint32_t n; size_t off; } cases[] = {
        { 100, 1, 0 }, { 200, 2, 0 }, { 300, 32, 0 }, { 400, 3, 512 }, { NSZE - 1, 1, 0 },
    };
    uint8_t *w = nvme_buf_alloc(d, NULL, 33 * BS), *r = nvme_buf_alloc(d, NULL, 33 * BS);
    CHECK(w && r);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        uint64_t lba = cases[k].lba;
        uint32_t n = cases[k].n;
        fill(w + cases[k].off, 7, lba, n);
        memset(r, 0xee, 33 * BS);
        CHECK_EQ(nvme_write(q1, 1, lba, n, w + cases[k].off), 0);
        CHECK_EQ(nvme_read(q2, 1, lba, n, r + cases[k].off), 0);
        size_t bad = differs(r + cases[k].off, 7, lba, n);
        if (bad)
            fprintf(stderr, "case %zu: byte %zu differs\n", k, bad - 1);
        CHECK_EQ(bad, 0);
    }
    CHECK_EQ(nvme_flush(q1, 1), 0);
    CHECK_EQ(nvme_flush(q2, 1), 0);

    /* Write zeroes: the middle two of four written blocks read back as zeroes. */
    fill(w, 8, 500, 4);
    CHECK_EQ(nvme_write(q1, 1, 500, 4, w), 0);
    CHECK_EQ(nvme_write_zeroes(q1, 1, 501, 2), 0);
    memset(r, 0xee, 4 * BS);
    CHECK_EQ(nvme_read(q2, 1, 500, 4, r), 0);
    CHECK_EQ(differs(r, 8, 500, 1), 0);
    CHECK(all_zero(r + BS, 2 * BS));
    CHECK_EQ(differs(r + 3 * BS, 8, 503, 1), 0);

    /* Deallocate the same way. */
    fill(w, 9, 600, 4);
    CHECK_EQ(nvme_write(q2, 1, 600, 4, w), 0);
    CHECK_EQ(nvme_deallocate(q2, 1, 601, 2), 0);
    memset(r, 0xee, 4 * BS);
    CHECK_EQ(nvme_read(q1, 1, 600, 4, r), 0);
    CHECK_EQ(differs(r, 9, 600, 1), 0);
    CHECK(all_zero(r + BS, 2 * BS));
    CHECK_EQ(differs(r + 3 * BS, 9, 603, 1), 0);

    /* Queues and data in memory the caller placed: all in one region near the device. */
    nvme_mem_t *m = nvme_mem_alloc(d, 1 << 20, NVME_PLACE_DEVICE);
    CHECK(m);
    nvme_qpair_t *q3;
    struct nvme_qpair_opts o3 = { .depth = 8, .sq_mem = m, .cq_mem = m };
    CHECK_EQ(nvme_qpair_create(d, &o3, &q3), 0);
    uint8_t *mb = nvme_buf_alloc(d, m, 4 * BS);
    CHECK(mb);
    fill(mb, 10, 700, 4);
    CHECK_EQ(nvme_write(q3, 1, 700, 4, mb), 0);
    memset(r, 0, 4 * BS);
    CHECK_EQ(nvme_read(q1, 1, 700, 4, r), 0);
    CHECK_EQ(differs(r, 10, 700, 4), 0);
    CHECK_EQ(nvme_mem_free(m), -EBUSY); /* the queue pair and the buffer are in it */
    CHECK_EQ(nvme_qpair_delete(q3), 0);
    CHECK_EQ(nvme_buf_free(d, mb), 0);
    CHECK_EQ(nvme_mem_free(m), 0);

    struct nvme_qpair_stats st;
    nvme_qpair_stats(q1, &st);
    CHECK(st.submitted >= 8 && st.completed == st.submitted);
    CHECK_EQ(st.stale, 0);
    CHECK_EQ(st.timeouts, 0);
    CHECK_EQ(nvme_qpair_delete(q1), 0);
    CHECK_EQ(nvme_qpair_delete(q2), 0);
    CHECK_EQ(nvme_close(d), 0);
}

static void test_two_qpairs_read_write_flush_zeroes_deallocate(void **state)
{
    (void)state;
    run_on("b", rw_child);
}

/* The same on the device's own host: the library's memory and queues are all local. */
static void local_child(void *arg)
{
    (void)arg;
    nvme_dev_t *d = open_nvme0(0);
    nvme_qpair_t *q;
    struct nvme_qpair_opts o = { .sq_place = NVME_PLACE_DEVICE };
    CHECK_EQ(nvme_qpair_create(d, &o, &q), 0);
    uint8_t *b = nvme_buf_alloc(d, NULL, 8 * BS);
    CHECK(b);
    fill(b, 11, 800, 8);
    CHECK_EQ(nvme_write(q, 1, 800, 8, b), 0);
    memset(b, 0, 8 * BS);
    CHECK_EQ(nvme_read(q, 1, 800, 8, b), 0);
    CHECK_EQ(differs(b, 11, 800, 8), 0);
    CHECK_EQ(nvme_close(d), 0); /* deletes the queue pair */
}

static void test_on_the_device_host(void **state)
{
    (void)state;
    run_on("a", local_child);
}

/* ---------------------------------------------------------------- asynchronous */

#define NASYNC 200

struct io_ctx {
    int done;
    int rc;
    uint32_t order;
};

static uint32_t completions;

static void on_done(void *arg, const struct nvme_cpl *cpl)
{
    struct io_ctx *c = arg;
    c->done++;
    c->rc = cpl->rc;
    c->order = completions++;
}

static void async_child(void *arg)
{
    (void)arg;
    nvme_dev_t *d = open_nvme0(0);
    nvme_qpair_t *q;
    struct nvme_qpair_opts o = { .depth = 256 };
    CHECK_EQ(nvme_qpair_create(d, &o, &q), 0);
    uint8_t *buf = nvme_buf_alloc(d, NULL, (size_t)NASYNC * BS);
    CHECK(buf);
    static struct io_ctx ctx[NASYNC];

    /* NASYNC writes in flight at once, one doorbell for all. */
    for (int i = 0; i < NASYNC; i++) {
        fill(buf + (size_t)i * BS, 12, 1000 + 3 * i, 1);
        CHECK_EQ(nvme_submit(q, NVME_OP_WRITE, 1, 1000 + 3 * i, 1, buf + (size_t)i * BS,
                             NVME_SUBMIT_DEFER, on_done, &ctx[i]), 0);
    }
    CHECK_EQ(nvme_qpair_outstanding(q), NASYNC);
    while (nvme_qpair_outstanding(q))
        CHECK(nvme_qpair_wait(q, -1) > 0);
    CHECK_EQ(nvme_qpair_wait(q, -1), 0); /* nothing outstanding */
    for (int i = 0; i < NASYNC; i++) {
        CHECK_EQ(ctx[i].done, 1);
        CHECK_EQ(ctx[i].rc, 0);
    }

    /* Read them back the same way, into a cleared buffer. */
    memset(buf, 0, (size_t)NASYNC * BS);
    memset(ctx, 0, sizeof ctx);
    for (int i = 0; i < NASYNC; i++)
        CHECK_EQ(nvme_submit(q, NVME_OP_READ, 1, 1000 + 3 * i, 1, buf + (size_t)i * BS,
                             i % 16 == 15 ? 0 : NVME_SUBMIT_DEFER, on_done, &ctx[i]), 0);
    int got = 0;
    while (got < NASYNC) {
        int n = nvme_qpair_wait(q, -1);
        CHECK(n > 0);
        got += n;
    }
    for (int i = 0; i < NASYNC; i++) {
        CHECK_EQ(ctx[i].done, 1);
        CHECK_EQ(ctx[i].rc, 0);
        CHECK_EQ(differs(buf + (size_t)i * BS, 12, 1000 + 3 * i, 1), 0);
    }

    /* A full queue: depth 8 holds 7 commands; deferred, so none can complete yet. */
    nvme_qpair_t *small;
    struct nvme_qpair_opts so = { .depth = 8 };
    CHECK_EQ(nvme_qpair_create(d, &so, &small), 0);
    memset(ctx, 0, sizeof ctx);
    for (int i = 0; i < 7; i++)
        CHECK_EQ(nvme_submit(small, NVME_OP_READ, 1, 1000 + 3 * i, 1, buf + (size_t)i * BS,
                             NVME_SUBMIT_DEFER, on_done, &ctx[i]), 0);
    CHECK_EQ(nvme_submit(small, NVME_OP_READ, 1, 0, 1, buf, 0, on_done, &ctx[7]), -EAGAIN);
    CHECK(strstr(nvme_errmsg(), "full"));
    /* A synchronous command on the full queue waits for room, handling the others. */
    CHECK_EQ(nvme_read(small, 1, 1000, 1, buf + 7 * BS), 0);
    for (int i = 0; i < 7; i++)
        CHECK_EQ(ctx[i].done, 1);
    CHECK_EQ(ctx[7].done, 0);
    CHECK_EQ(nvme_qpair_poll(small, 0), 0);

    /* Outstanding at deletion: the callbacks still run, once. */
    memset(ctx, 0, sizeof ctx);
    for (int i = 0; i < 4; i++)
        CHECK_EQ(nvme_submit(small, NVME_OP_READ, 1, 1000, 1, buf + (size_t)i * BS,
                             NVME_SUBMIT_DEFER, on_done, &ctx[i]), 0);
    CHECK_EQ(nvme_qpair_delete(small), 0);
    for (int i = 0; i < 4; i++)
        CHECK_EQ(ctx[i].done, 1);

    struct nvme_qpair_stats st;
    nvme_qpair_stats(q, &st);
    CHECK_EQ(st.submitted, 2 * NASYNC);
    CHECK_EQ(st.completed, 2 * NASYNC);
    CHECK_EQ(st.stale, 0);
    CHECK_EQ(nvme_close(d), 0);
}

static void test_async_many_outstanding(void **state)
{
    (void)state;
    run_on("b", async_child);
}

/* ---------------------------------------------------------------- errors */

static void errors_child(void *arg)
{
    (void)arg;
    nvme_dev_t *bad = NULL;
    CHECK_EQ(nvme_open("nvme9", NULL, &bad), -ENODEV);
    CHECK(strstr(nvme_errmsg(), "nvme9"));
    CHECK(bad == NULL);
    CHECK_EQ(nvme_open("accel0", NULL, &bad), -ENODEV);
    CHECK(strstr(nvme_errmsg(), "not an NVMe"));

    nvme_dev_t *d = open_nvme0(0);
    nvme_dev_t *again = NULL;
    CHECK(nvme_open("nvme0", NULL, &again) < 0); /* borrowed already */
    CHECK(again == NULL);

    struct nvme_qpair_opts deep = { .depth = 1u << 20 };
    nvme_qpair_t *q;
    CHECK_EQ(nvme_qpair_create(d, &deep, &q), -EINVAL);
    CHECK(strstr(nvme_errmsg(), "depth"));
    CHECK_EQ(nvme_qpair_create(d, NULL, &q), 0);
    uint8_t *b = nvme_buf_alloc(d, NULL, 40 * BS);
    CHECK(b);

    /* Past the end of the namespace: refused before the device sees it. */
    struct nvme_qpair_stats st0, st1;
    nvme_qpair_stats(q, &st0);
    CHECK_EQ(nvme_read(q, 1, NSZE, 1, b), -ERANGE);
    CHECK(strstr(nvme_errmsg(), "past the end"));
    CHECK_EQ(nvme_write(q, 1, NSZE - 1, 2, b), -ERANGE);
    CHECK_EQ(nvme_write_zeroes(q, 1, NSZE, 1), -ERANGE);
    CHECK_EQ(nvme_deallocate(q, 1, NSZE - 2, 3), -ERANGE);
    CHECK_EQ(nvme_submit(q, NVME_OP_READ, 1, UINT64_MAX, 2, b, 0, NULL, NULL), -ERANGE);
    /* Sizes and buffers. */
    CHECK_EQ(nvme_read(q, 1, 0, 0, b), -EINVAL);
    CHECK_EQ(nvme_read(q, 1, 0, 33, b), -EINVAL); /* over MDTS */
    CHECK(strstr(nvme_errmsg(), "split"));
    CHECK_EQ(nvme_write(q, 1, 0, 1, b + 1), -EINVAL);
    CHECK(strstr(nvme_errmsg(), "aligned"));
    CHECK_EQ(nvme_read(q, 1, 0, 1, NULL), -EINVAL);
    static uint8_t plain[2 * BS];
    CHECK_EQ(nvme_read(q, 1, 0, 1, plain), -EFAULT);
    CHECK(strstr(nvme_errmsg(), "nvme_buf_alloc"));
    nvme_mem_t *m = nvme_mem_alloc(d, 2 * BS, NVME_PLACE_LOCAL);
    CHECK(m);
    uint8_t *mb = nvme_buf_alloc(d, m, 2 * BS);
    CHECK(mb);
    CHECK_EQ(nvme_read(q, 1, 0, 3, mb), -EFAULT); /* runs off the end of its memory */
    CHECK(nvme_buf_alloc(d, m, BS) == NULL);      /* full */
    CHECK_EQ(errno, ENOMEM);
    CHECK_EQ(nvme_buf_free(d, mb), 0);
    CHECK_EQ(nvme_mem_free(m), 0);
    /* Namespaces. */
    CHECK_EQ(nvme_read(q, 2, 0, 1, b), -ENXIO);
    CHECK_EQ(nvme_flush(q, 0), -ENXIO);
    nvme_qpair_stats(q, &st1);
    CHECK_EQ(st1.submitted, st0.submitted); /* none of it reached the device */

    /* The controller's own checks, through raw commands: status and errno both. */
    struct nvme_cmd rd = { .opc = 0x02, .nsid = 1, .cdw10 = (uint32_t)NSZE };
    struct nvme_cpl cpl;
    CHECK_EQ(nvme_qpair_cmd(q, &rd, b, BS, &cpl), -ERANGE);
    CHECK_EQ(cpl.status, 0x0080);
    CHECK(cpl.dnr);
    struct nvme_cmd idn = { .opc = 0x06, .nsid = 2, .cdw10 = 0 };
    CHECK_EQ(nvme_admin(d, &idn, b, BS, &cpl), -ENXIO);
    CHECK_EQ(cpl.status, 0x000b);
    struct nvme_cmd nop = { .opc = 0x7f, .nsid = 1 };
    CHECK_EQ(nvme_qpair_cmd(q, &nop, NULL, 0, &cpl), -EOPNOTSUPP);
    CHECK_EQ(cpl.status, 0x0001);

    /* No free queue pair: the controller grants max_qpairs; all taken, one more fails. */
    struct nvme_ctrl_info ci;
    CHECK_EQ(nvme_ctrl_info(d, &ci), 0);
    nvme_mem_t *qm = nvme_mem_alloc(d, (size_t)ci.max_qpairs * 3 * BS, NVME_PLACE_LOCAL);
    CHECK(qm);
    nvme_qpair_t *qs[64];
    struct nvme_qpair_opts small = { .depth = 2, .sq_mem = qm, .cq_mem = qm };
    uint32_t n = 1; /* q */
    while (n < ci.max_qpairs)
        CHECK_EQ(nvme_qpair_create(d, &small, &qs[n++]), 0);
    nvme_qpair_t *extra = NULL;
    CHECK_EQ(nvme_qpair_create(d, &small, &extra), -EBUSY);
    CHECK(strstr(nvme_errmsg(), "in use"));
    CHECK(extra == NULL);
    /* One back, and it can be had again. */
    CHECK_EQ(nvme_qpair_delete(qs[1]), 0);
    CHECK_EQ(nvme_qpair_create(d, &small, &qs[1]), 0);
    CHECK_EQ(nvme_read(qs[1], 1, 1000, 1, b), 0);
    for (uint32_t i = 1; i < n; i++)
        CHECK_EQ(nvme_qpair_delete(qs[i]), 0);
    CHECK_EQ(nvme_mem_free(qm), 0);
    CHECK_EQ(nvme_close(d), 0);
}

static void test_errors(void **state)
{
    (void)state;
    run_on("b", errors_child);
}

/* ---------------------------------------------------------------- timeouts */

/*
 * A command the controller holds (an Asynchronous Event Request) times out; then an event
 * (a doorbell write for a queue that was never created) makes the controller complete it. That
 * completion is for a command nobody waits for any more: it is counted and dropped, and the
 * admin queue goes on working.
 */
static void late_child(void *arg)
{
    (void)arg;
    nvme_dev_t *d = open_nvme0(1000);
    struct nvme_cmd aer = { .opc = 0x0c };
    struct nvme_cpl cpl;
    CHECK_EQ(nvme_admin(d, &aer, NULL, 0, &cpl), -ETIMEDOUT);
    CHECK_EQ(cpl.rc, -ETIMEDOUT);
    CHECK(strstr(nvme_errmsg(), "no completion"));
    struct nvme_qpair_stats st;
    nvme_admin_stats(d, &st);
    CHECK_EQ(st.timeouts, 1);
    CHECK_EQ(st.late, 0);

    size_t size;
    sio_bar_t *bar;
    CHECK(sio_map_bar(nvme_sio_dev(d), 0, &size, &bar));
    sio_write32(bar, 0x1000 + 8 * 31, 1); /* SQ 31's doorbell: no such queue (yet) */
    CHECK_EQ(sio_unmap_bar(bar), 0);

    /* The AER's completion lands in the admin CQ; Identify gets past it. */
    uint8_t *id = nvme_buf_alloc(d, NULL, BS);
    struct nvme_cmd ic = { .opc = 0x06, .cdw10 = 1 };
    for (int i = 0; i < 200; i++) {
        CHECK_EQ(nvme_admin(d, &ic, id, BS, &cpl), 0);
        nvme_admin_stats(d, &st);
        if (st.late)
            break;
        usleep(10000);
    }
    CHECK_EQ(st.late, 1);
    CHECK_EQ(st.stale, 0);
    CHECK_EQ(nvme_close(d), 0);
}

static void test_completion_after_timeout_is_dropped(void **state)
{
    (void)state;
    run_on("b", late_child);
}

/* The model publishes the CPU its thread runs on (sio_device_cpu), which the completion wait
 * reads to yield instead of spinning on that CPU: after a register write wakes the model, it
 * is one of this machine's CPUs. */
static void cpu_child(void *arg)
{
    (void)arg;
    int id = sio_find("nvme0");
    CHECK(id >= 0);
    sio_dev_t *dev;
    CHECK_EQ(sio_borrow((uint32_t)id, SIO_EXCLUSIVE, &dev), 0);
    CHECK_EQ(sio_device_cpu(NULL), -1);
    sio_bar_t *bar;
    size_t size;
    CHECK(sio_map_bar(dev, 0, &size, &bar));
    sio_write32(bar, 0x0c, 0); /* INTMS: writing 0 masks nothing; the model wakes and turns */
    int cpu = -1;
    for (int i = 0; i < 5000 && cpu < 0; i++) {
        cpu = sio_device_cpu(dev);
        if (cpu < 0)
            usleep(1000);
    }
    CHECK(cpu >= 0 && cpu < sysconf(_SC_NPROCESSORS_CONF));
    CHECK_EQ(sio_unmap_bar(bar), 0);
    CHECK_EQ(sio_return(dev), 0);
}

static void test_model_publishes_its_cpu(void **state)
{
    (void)state;
    run_on("b", cpu_child);
}

/* The example of docs/nvme-driver.md runs and says what it should. */
static void test_example(void **state)
{
    (void)state;
    assert_int_equal(h_cli(FX.name, "run --host b -- %s/nvme_hello nvme0 | "
                                "grep -q 'reads back: \"hello from nvme0\"'", h_bin()), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_and_info),
        cmocka_unit_test(test_two_qpairs_read_write_flush_zeroes_deallocate),
        cmocka_unit_test(test_on_the_device_host),
        cmocka_unit_test(test_async_many_outstanding),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_completion_after_timeout_is_dropped),
        cmocka_unit_test(test_example),
        cmocka_unit_test(test_model_publishes_its_cpu),
    };
    return cmocka_run_group_tests(tests, setup, fx_teardown);
}
