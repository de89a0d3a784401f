/*
 * Device-initiated I/O (smartio-tocs-2021 §6.4, Figs. 18-19; ntblend/nvme_devq.h): an
 * accelerator drives an NVMe with queues in its own memory. Reads land in the accelerator's
 * memory and writes come from it, byte-exact, with the NVMe and the accelerator in one host,
 * in two, and lent (borrowed by a program on another host) together or apart; a cable pulled
 * under a job gives errors and never wrong data; queues the NVMe cannot reach are refused at
 * set-up with a clear error; bad jobs are refused before they reach the device.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "fixture.h"
#include "ntblend/nvme.h"
#include "ntblend/nvme_devq.h"
#include "ntblend/smartio.h"

static struct fx FX;
#define BS 4096u
#define NBLK 512u /* blocks the CPU writes with a pattern first */

static uint64_t pattern(uint64_t lba, size_t i) { return (lba + 7) * 0x9e3779b97f4a7c15ull ^ i; }

static bool block_ok(const volatile uint8_t *b, uint64_t lba)
{
    for (size_t i = 0; i < BS / 8; i++) {
        uint64_t v;
        memcpy(&v, (const void *)(uintptr_t)(b + i * 8), 8);
        if (v != pattern(lba, i))
            return false;
    }
    return true;
}

static void fill(volatile uint8_t *b, uint64_t lba)
{
    for (size_t i = 0; i < BS / 8; i++) {
        uint64_t v = pattern(lba, i);
        memcpy((void *)(uintptr_t)(b + i * 8), &v, 8);
    }
}

struct pair {
    const char *nvme, *accel;
    bool client; /* the NVMe's manager serves it */
};

struct setup {
    nvme_dev_t *d;
    sio_dev_t *acc;
    nvme_devq_t *q;
    volatile uint8_t *mem;
    uint64_t data, size;
};

static void cpl(void *arg, const struct nvme_cpl *c) { *(int *)arg = c->rc ? c->rc : 1; }

/* The CPU reads or writes n blocks at lba with its own queue pair and buffer. */
static int cpu_rw(nvme_dev_t *d, enum nvme_op op, uint64_t lba, uint32_t n, uint8_t *buf)
{
    nvme_qpair_t *qp;
    int rc = nvme_qpair_create(d, NULL, &qp);
    for (uint32_t i = 0; !rc && i < n; i += 32) {
        int done = 0;
        uint32_t k = n - i < 32 ? n - i : 32;
        rc = nvme_submit(qp, op, 1, lba + i, k, buf + (size_t)i * BS, 0, cpl, &done);
        while (!rc && !done)
            rc = nvme_qpair_wait(qp, -1) < 0 ? -EIO : 0;
        rc = rc ? rc : done < 0 ? done : 0;
    }
    nvme_qpair_delete(qp);
    return rc;
}

static void open_pair(const struct pair *p, struct setup *s, unsigned timeout_ms)
{
    memset(s, 0, sizeof *s);
    struct nvme_open_opts oo = { .timeout_ms = timeout_ms };
    int rc = nvme_open(p->nvme, &oo, &s->d);
    if (rc)
        fprintf(stderr, "nvme_open: %s\n", nvme_errmsg());
    CHECK_EQ(rc, 0);
    CHECK_EQ(nvme_is_client(s->d), p->client);
    int id = sio_find(p->accel);
    CHECK(id >= 0);
    CHECK_EQ(sio_borrow((uint32_t)id, SIO_EXCLUSIVE, &s->acc), 0);
    struct nvme_devq_opts qo = { .depth = 64 };
    rc = nvme_devq_create(s->d, s->acc, &qo, &s->q);
    if (rc)
        fprintf(stderr, "nvme_devq_create: %s\n", nvme_errmsg());
    CHECK_EQ(rc, 0);
    s->mem = nvme_devq_mem(s->q, &s->data, &s->size);
    CHECK(s->mem && s->size >= 8u << 20);
}

static void close_pair(struct setup *s)
{
    nvme_devq_delete(s->q);
    nvme_close(s->d);
    sio_return(s->acc);
}

/* The pattern on blocks 0..n-1 of the NVMe, written by the CPU. */
static void write_pattern(nvme_dev_t *d, uint32_t n)
{
    uint8_t *buf = nvme_buf_alloc(d, NULL, (size_t)n * BS);
    CHECK(buf);
    for (uint32_t b = 0; b < n; b++)
        fill(buf + (size_t)b * BS, b);
    CHECK_EQ(cpu_rw(d, NVME_OP_WRITE, 0, n, buf), 0);
    nvme_buf_free(d, buf);
}

/* What every placement must do: reads into accelerator memory (one block and four blocks per
 * command: PRP2 as a list), writes from it, statuses, and bad jobs refused. */
static void devio_checks(void *arg)
{
    const struct pair *p = arg;
    struct setup s;
    open_pair(p, &s, 10000);
    write_pattern(s.d, NBLK);
    uint64_t st = s.data, data = s.data + BS;
    struct nvme_devq_result r;

    /* 1-block reads, 8 in flight, with their statuses. */
    memset((void *)(uintptr_t)(s.mem + s.data), 0xa5, (size_t)NBLK * BS + BS);
    struct nvme_devq_job j = { .op = NVME_OP_READ, .nsid = 1, .lba = 0, .nblocks = 1,
                               .count = NBLK, .qd = 8, .data_off = data, .status_off = st };
    int rc = nvme_devq_run(s.q, &j, &r);
    if (rc)
        fprintf(stderr, "read job: %s\n", nvme_errmsg());
    CHECK_EQ(rc, 0);
    CHECK_EQ(r.done, NBLK);
    CHECK_EQ(r.failed, 0);
    CHECK_EQ(r.bytes, (uint64_t)NBLK * BS);
    for (uint32_t b = 0; b < NBLK; b++) {
        CHECK(block_ok(s.mem + data + (size_t)b * BS, b));
        uint16_t w;
        memcpy(&w, (const void *)(uintptr_t)(s.mem + st + 2 * b), 2);
        CHECK_EQ(w, 0);
    }

    /* 4-block commands at a misaligned offset: PRP1 mid-page, a PRP list. */
    memset((void *)(uintptr_t)(s.mem + data), 0, (size_t)NBLK * BS + BS);
    j = (struct nvme_devq_job){ .op = NVME_OP_READ, .nsid = 1, .lba = 64, .nblocks = 4,
                                .count = 16, .qd = 4, .data_off = data + 512 };
    CHECK_EQ(nvme_devq_run(s.q, &j, &r), 0);
    for (uint32_t b = 0; b < 64; b++)
        CHECK(block_ok(s.mem + data + 512 + (size_t)b * BS, 64 + b));

    /* Writes from the accelerator's memory, read back by the CPU. */
    for (uint32_t b = 0; b < 64; b++)
        fill(s.mem + data + (size_t)b * BS, 1000 + b);
    j = (struct nvme_devq_job){ .op = NVME_OP_WRITE, .nsid = 1, .lba = 1000, .nblocks = 2,
                                .count = 32, .qd = 16, .data_off = data };
    CHECK_EQ(nvme_devq_run(s.q, &j, &r), 0);
    CHECK_EQ(r.done, 32);
    uint8_t *back = nvme_buf_alloc(s.d, NULL, 64 * BS);
    CHECK(back);
    CHECK_EQ(cpu_rw(s.d, NVME_OP_READ, 1000, 64, back), 0);
    for (uint32_t b = 0; b < 64; b++)
        CHECK(block_ok(back + (size_t)b * BS, 1000 + b));
    nvme_buf_free(s.d, back);

    /* Bad jobs never reach the device. */
    j = (struct nvme_devq_job){ .op = NVME_OP_READ, .nsid = 9, .nblocks = 1, .count = 1,
                                .data_off = data };
    CHECK_EQ(nvme_devq_submit(s.q, &j), -ENXIO);
    j.nsid = 1;
    j.lba = (64ull << 20) / BS - 1;
    j.count = 2;
    CHECK_EQ(nvme_devq_submit(s.q, &j), -ERANGE);
    j.lba = 0;
    j.data_off = s.data - BS; /* over the queues */
    CHECK_EQ(nvme_devq_submit(s.q, &j), -EINVAL);
    j.data_off = data;
    j.qd = 64; /* depth 64: at most 63 in flight */
    CHECK_EQ(nvme_devq_submit(s.q, &j), -EINVAL);
    CHECK_EQ(nvme_devq_wait(s.q, 0, NULL), -EINVAL); /* nothing submitted */
    /* ... and the queue pair still works after them. */
    j.qd = 1;
    CHECK_EQ(nvme_devq_run(s.q, &j, &r), 0);
    close_pair(&s);
}

static void run_as(const char *host, const char *nvme, const char *accel, bool client)
{
    struct pair p = { nvme, accel, client };
    struct h_proc c = h_spawn(FX.name, host, devio_checks, &p);
    assert_int_equal(h_join(&c), 0);
}

static void run_on(const char *host, const char *nvme, const char *accel)
{
    run_as(host, nvme, accel, false);
}

/* Both devices in host a, the program there too (Fig. 18). */
static void test_one_host(void **state)
{
    (void)state;
    run_on("a", "nvme0", "accel0");
}

/* The NVMe of a, driven by b's own accelerator: doorbells and data cross the NTB. */
static void test_two_hosts(void **state)
{
    (void)state;
    run_on("b", "nvme0", "accel1");
}

/* Lent (Fig. 19): host c borrows both of a's; host c borrows a's NVMe and b's accelerator;
 * host a uses its NVMe with b's accelerator borrowed. */
static void test_lent(void **state)
{
    (void)state;
    run_on("c", "nvme0", "accel0");
    run_on("c", "nvme0", "accel1");
    run_on("a", "nvme0", "accel1");
}

/* The NVMe shared by its manager (smartio-tocs-2021 §6.2): the device-driven queue pair is
 * one client's, created by the manager at the addresses in the accelerator's memory. */
static void test_manager_client(void **state)
{
    (void)state;
    assert_int_equal(h_cli(FX.name, "nvme manager nvme0 --host a >/dev/null"), 0);
    run_as("b", "nvme0", "accel1", true);
    assert_int_equal(h_cli(FX.name, "nvme stop nvme0 >/dev/null"), 0);
}

/* A cable pulled under a job: the job fails, and every command it reports done has the
 * right data; after the link is back the devices serve a new set-up. */
static void pulled(void *arg)
{
    (void)arg;
    struct pair p = { "nvme0", "accel1", false };
    struct setup s;
    open_pair(&p, &s, 1000);
    uint32_t n = 4096; /* commands enough to be under way when the cable goes */
    write_pattern(s.d, n);
    uint64_t st = s.data, data = s.data + 2 * BS;
    CHECK((uint64_t)n * BS + 2 * BS <= s.size);
    memset((void *)(uintptr_t)(s.mem + data), 0xa5, (size_t)n * BS);
    struct nvme_devq_job j = { .op = NVME_OP_READ, .nsid = 1, .lba = 0, .nblocks = 1,
                               .count = n, .qd = 1, .data_off = data, .status_off = st,
                               .timeout_ms = 500 };
    CHECK_EQ(nvme_devq_submit(s.q, &j), 0);
    h_put(1);  /* the parent pulls the cable now */
    (void)h_get();
    struct nvme_devq_result r;
    int rc = nvme_devq_wait(s.q, -1, &r);
    fprintf(stderr, "the job under the pulled cable: %s (%u of %u done)\n",
            rc ? nvme_errmsg() : "finished first", r.done, n);
    uint32_t ok = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint16_t w;
        memcpy(&w, (const void *)(uintptr_t)(s.mem + st + 2 * i), 2);
        if (w == 0) {
            ok++;
            if (!block_ok(s.mem + data + (size_t)i * BS, i)) {
                uint64_t got, want = pattern(i, 0);
                memcpy(&got, (const void *)(uintptr_t)(s.mem + data + (size_t)i * BS), 8);
                fprintf(stderr, "command %u: status 0 but block %u holds %#llx (want %#llx); "
                        "done %u\n", i, i, (unsigned long long)got, (unsigned long long)want, r.done);
            }
            CHECK(block_ok(s.mem + data + (size_t)i * BS, i)); /* never wrong data */
        }
    }
    if (rc == 0) { /* it all finished before the cable went: then the next job fails */
        CHECK_EQ(ok, n);
        j.count = 8;
        rc = nvme_devq_run(s.q, &j, &r);
    }
    CHECK(rc == -ENOLINK || rc == -ETIMEDOUT || rc == -EHOSTUNREACH);
    CHECK(r.done < n);
    CHECK(strlen(nvme_errmsg()) > 0);
    /* Broken now: it says so rather than run on queues of unknown state. */
    CHECK_EQ(nvme_devq_submit(s.q, &j), -EPIPE);
    h_put(2);  /* the parent puts the cable back */
    (void)h_get();
    close_pair(&s);
}

static void test_pulled_cable(void **state)
{
    (void)state;
    struct h_proc c = h_spawn(FX.name, "b", pulled, NULL);
    assert_int_equal(h_from(&c), 1);
    assert_int_equal(h_cli(FX.name, "link down a.ntb0 sw0 >/dev/null"), 0);
    h_to(&c, 1);
    assert_int_equal(h_from(&c), 2);
    assert_int_equal(h_cli(FX.name, "link up a.ntb0 sw0 >/dev/null"), 0);
    h_to(&c, 1);
    assert_int_equal(h_join(&c), 0);
}

/* Queues where the NVMe cannot reach them: refused at set-up, with what to do. */
static void unreachable(void *arg)
{
    (void)arg;
    nvme_dev_t *d;
    CHECK_EQ(nvme_open("nvme0", NULL, &d), 0);
    int id = sio_find("accel0");
    CHECK(id >= 0);
    sio_dev_t *acc;
    CHECK_EQ(sio_borrow((uint32_t)id, SIO_EXCLUSIVE, &acc), 0);
    nvme_devq_t *q = NULL;
    int rc = nvme_devq_create(d, acc, NULL, &q);
    fprintf(stderr, "expected: %s\n", nvme_errmsg());
    CHECK(rc < 0 && !q);
    CHECK(strstr(nvme_errmsg(), "cannot reach") != NULL);
    nvme_close(d);
    sio_return(acc);
}

static void too_small(void *arg)
{
    (void)arg;
    nvme_dev_t *d;
    CHECK_EQ(nvme_open("nvme0", NULL, &d), 0);
    sio_dev_t *acc;
    CHECK_EQ(sio_borrow((uint32_t)sio_find("accel1"), SIO_EXCLUSIVE, &acc), 0);
    nvme_devq_t *q = NULL;
    struct nvme_devq_opts o = { .depth = 64, .mem_off = (32u << 20) - 4096 };
    CHECK_EQ(nvme_devq_create(d, acc, &o, &q), -ENOSPC);
    CHECK(strstr(nvme_errmsg(), "cannot hold them") != NULL);
    o.mem_off = 100; /* not 4 KiB aligned */
    CHECK_EQ(nvme_devq_create(d, acc, &o, &q), -EINVAL);
    o = (struct nvme_devq_opts){ .depth = 4096 };
    CHECK_EQ(nvme_devq_create(d, acc, &o, &q), -EINVAL);
    CHECK_EQ(nvme_devq_create(d, NULL, NULL, &q), -EINVAL);
    nvme_close(d);
    sio_return(acc);
}

static void test_bad_setup(void **state)
{
    (void)state;
    struct h_proc c = h_spawn(FX.name, "b", too_small, NULL);
    assert_int_equal(h_join(&c), 0);
    struct fx line;
    const struct fx_opts o = { .topo = "tests/system/topologies/devio-line.ini",
                               .add = { "nvme0", "accel0" } };
    assert_int_equal(fx_up(&line, "devio-line", &o), 0);
    c = h_spawn(line.name, "b", unreachable, NULL);
    assert_int_equal(h_join(&c), 0);
    fx_down(&line);
}

static int setup(void **state)
{
    static const struct fx_opts o = { .topo = "tests/system/topologies/devio.ini",
                                      .add = { "nvme0", "accel0", "accel1" } };
    return fx_setup(state, &FX, "devio", &o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_host),
        cmocka_unit_test(test_two_hosts),
        cmocka_unit_test(test_lent),
        cmocka_unit_test(test_manager_client),
        cmocka_unit_test(test_bad_setup),
        cmocka_unit_test(test_pulled_cable),
    };
    return cmocka_run_group_tests(tests, setup, fx_teardown);
}
