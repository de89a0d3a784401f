/*
 * Multicast groups of the switches, in the hardware model (src/fabric/fab_mcast.c, resolve.c): a
 * device's write and a DMA engine's copy into a group reach every member (RAM, a device's
 * memory BAR, a member behind an IOMMU) and not the sender's own port; reads of a group fail
 * as unsupported requests; a member that leaves while writes flow gets no write after its
 * leave returned, and none torn; a member whose link is down gets nothing while the others
 * do; bad input is refused with the error the API documents; a dead process's groups and
 * memberships go. Uses the fabric model directly where the requester is a device.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>

#include "fixture.h"
#include "fabric.h"

#define TOPO "tests/system/topologies/mcast.ini"
#define DEV_RID 0x0300      /* a device function of host a (bus 3) */
#define GSIZE (64u << 10)   /* the groups' windows */
#define OVL (8ull << 20)    /* where members put the window in RAM (above the mailboxes) */
#define SRC (16ull << 20)   /* a's RAM the DMA engine copies from */

static struct fx FX;
static struct fab *f; /* FX.f */
static uint32_t A, B, C, D, E, AI; /* hosts, and a's adapter */
static uint64_t accel_mem;          /* c's accelerator memory BAR in c's map */
static uint32_t accel_fn;

static int setup(void **state)
{
    static const struct fx_opts o = { .topo = TOPO, .attach = fx_attach };
    if (fx_setup(state, &FX, "mcast", &o))
        return -1;
    f = FX.f;
    A = (uint32_t)fab_host_by_name(f, "a");
    B = (uint32_t)fab_host_by_name(f, "b");
    C = (uint32_t)fab_host_by_name(f, "c");
    D = (uint32_t)fab_host_by_name(f, "d");
    E = (uint32_t)fab_host_by_name(f, "e");
    AI = (uint32_t)fab_adapter_by_name(f, "a.ntb0");
    accel_fn = (uint32_t)fab_func_by_name(f, "accel0");
    for (int b = 0; b < FAB_BARS; b += 2)
        if (fab_func(f, accel_fn)->bar[b].kind == FAB_BAR_MEM)
            accel_mem = fab_func(f, accel_fn)->bar[b].addr;
    return accel_mem ? 0 : -1;
}

static uint8_t *ram(uint32_t host, uint64_t at) { return fab_ram(f, host, at, GSIZE); }
static uint8_t *accel(uint64_t off)
{
    const struct fab_bar *bar = NULL;
    for (int b = 0; b < FAB_BARS; b += 2)
        if (fab_func(f, accel_fn)->bar[b].kind == FAB_BAR_MEM)
            bar = &fab_func(f, accel_fn)->bar[b];
    return fab_bar_mem(f, accel_fn, bar->off + off, GSIZE);
}

static bool all(const uint8_t *p, size_t n, uint8_t v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v)
            return false;
    return true;
}

/* A group "name" with b (IOMMU on), c (accelerator memory), d and the sender a itself as
 * members, and a window of a's adapter onto it; its bus address in a's map. */
static uint64_t group_up(const char *name, int *g, struct fab_window *w)
{
    *g = fab_mcast_create(f, name, -1, GSIZE, getpid());
    assert_true(*g >= 0);
    memset(ram(B, OVL), 0, GSIZE);
    memset(accel(0), 0, GSIZE);
    memset(ram(D, OVL), 0, GSIZE);
    memset(ram(A, OVL), 0, GSIZE);
    assert_int_equal(fab_mcast_join(f, (uint32_t)*g, B, OVL, getpid()), 0);
    assert_int_equal(fab_mcast_join(f, (uint32_t)*g, C, accel_mem, getpid()), 0);
    assert_int_equal(fab_mcast_join(f, (uint32_t)*g, D, OVL, getpid()), 0);
    assert_int_equal(fab_mcast_join(f, (uint32_t)*g, A, OVL, getpid()), 0);
    assert_int_equal(fab_mcast_members(f, (uint32_t)*g), 4);
    assert_int_equal(fab_window_map(f, AI, (uint32_t)*g, 0, GSIZE, getpid(), FAB_LUT_MCAST, w), 0);
    assert_int_equal(fab_mcast_senders(f, (uint32_t)*g), 1);
    return w->bus;
}

static void group_down(int g, struct fab_window *w)
{
    assert_int_equal(fab_mcast_remove(f, (uint32_t)g, getpid()), -EBUSY); /* a still sends */
    fab_window_unmap(f, w, getpid());
    assert_int_equal(fab_mcast_remove(f, (uint32_t)g, getpid()), 0);
    assert_int_equal(fab_mcast_find(f, "fan"), -ENOENT);
}

/* ---------------------------------------------------------------- fan-out */

static void test_fanout(void **state)
{
    (void)state;
    int g;
    struct fab_window w;
    uint64_t bus = group_up("fan", &g, &w);
    uint8_t buf[4096];
    /* A device of a writes 4 KiB at offset 4 KiB of the group. */
    memset(buf, 0x5a, sizeof buf);
    assert_int_equal(fab_dev_write(f, A, DEV_RID, bus + 4096, buf, sizeof buf), 0);
    assert_true(all(ram(B, OVL) + 4096, 4096, 0x5a));
    assert_true(all(accel(0) + 4096, 4096, 0x5a));
    assert_true(all(ram(D, OVL) + 4096, 4096, 0x5a));
    assert_true(all(ram(B, OVL), 4096, 0)); /* only where it was written */
    /* Not back out of the port it came in by: a's own overlay stays as it was. */
    assert_true(all(ram(A, OVL), GSIZE, 0));
    /* a's DMA engine copies a's RAM into the group: one copy, every member. */
    memset(fab_ram(f, A, SRC, 8192), 0xc3, 8192);
    uint16_t dma = fab_dma_rid(fab_adapter(f, AI)->index_on_host);
    assert_int_equal(fab_dev_copy(f, A, dma, bus + 16384, SRC, 8192), 0);
    assert_true(all(ram(B, OVL) + 16384, 8192, 0xc3));
    assert_true(all(accel(0) + 16384, 8192, 0xc3));
    assert_true(all(ram(D, OVL) + 16384, 8192, 0xc3));
    assert_true(all(ram(A, OVL), GSIZE, 0));
    /* Past the group's window (the LUT entry is larger): an unsupported request. */
    assert_int_equal(fab_dev_write(f, A, DEV_RID, bus + GSIZE, buf, 64), -EIO);
    group_down(g, &w);
}

/* Reads of a multicast address have no one to complete them: all ones, a fault on a. */
static void test_reads_fail(void **state)
{
    (void)state;
    int g;
    struct fab_window w;
    uint64_t bus = group_up("fan", &g, &w);
    uint64_t faults = atomic_load(&fab_host(f, A)->fault_count);
    uint8_t buf[256];
    memset(buf, 0, sizeof buf);
    assert_int_equal(fab_dev_read(f, A, DEV_RID, bus, buf, sizeof buf), -EIO);
    assert_true(all(buf, sizeof buf, 0xff));
    assert_true(atomic_load(&fab_host(f, A)->fault_count) > faults);
    uint16_t dma = fab_dma_rid(fab_adapter(f, AI)->index_on_host);
    assert_int_equal(fab_dev_copy(f, A, dma, SRC, bus, 4096), -EIO);
    group_down(g, &w);
}

/* ---------------------------------------------------------------- leave while writing */

struct writer {
    uint64_t bus;
    _Atomic uint32_t done; /* writes completed */
    _Atomic int stop, err;
};

/* Writes whole 4 KiB pages of one value each, the value counting up (1..255, again). */
static void *write_loop(void *arg)
{
    struct writer *wr = arg;
    uint8_t page[4096];
    for (uint32_t i = 0; !atomic_load(&wr->stop); i++) {
        memset(page, (int)(i % 255 + 1), sizeof page);
        int rc = fab_dev_write(f, A, DEV_RID, wr->bus, page, sizeof page);
        if (rc) {
            atomic_store(&wr->err, rc);
            break;
        }
        atomic_fetch_add(&wr->done, 1);
    }
    return NULL;
}

static void wait_writes(struct writer *wr, uint32_t more)
{
    uint32_t until = atomic_load(&wr->done) + more;
    while (atomic_load(&wr->done) < until) {
        assert_int_equal(atomic_load(&wr->err), 0);
        sched_yield();
    }
}

static void test_leave_while_writing(void **state)
{
    (void)state;
    int g;
    struct fab_window w;
    struct writer wr = { .bus = group_up("fan", &g, &w) };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, write_loop, &wr), 0);
    wait_writes(&wr, 200);
    assert_int_equal(fab_mcast_leave(f, (uint32_t)g, D, getpid()), 0);
    /* From here on nothing lands in d's overlay, and what is there is one whole write. */
    uint8_t snap[4096];
    memcpy(snap, ram(D, OVL), sizeof snap);
    assert_true(snap[0] != 0 && all(snap, sizeof snap, snap[0]));
    wait_writes(&wr, 500);
    assert_memory_equal(ram(D, OVL), snap, sizeof snap);
    /* ... while the members that stayed still receive: b's page is now a later write. */
    memset(ram(B, OVL), 0, 4096);
    wait_writes(&wr, 2);
    assert_true(ram(B, OVL)[0] != 0);
    /* Joining again while writes flow: the next writes reach d again. */
    assert_int_equal(fab_mcast_join(f, (uint32_t)g, D, OVL, getpid()), 0);
    memset(ram(D, OVL), 0, 4096);
    wait_writes(&wr, 50);
    atomic_store(&wr.stop, 1);
    pthread_join(t, NULL);
    assert_true(ram(D, OVL)[0] != 0);
    assert_true(all(ram(D, OVL), 4096, ram(D, OVL)[0]));
    group_down(g, &w);
}

/* ---------------------------------------------------------------- links */

static void test_link_down(void **state)
{
    (void)state;
    int g;
    struct fab_window w;
    uint64_t bus = group_up("fan", &g, &w);
    uint8_t buf[4096];
    assert_int_equal(h_cli(FX.name, "link down d.ntb0 sw0 >/dev/null"), 0);
    memset(buf, 0x11, sizeof buf);
    assert_int_equal(fab_dev_write(f, A, DEV_RID, bus, buf, sizeof buf), 0);
    assert_true(all(ram(B, OVL), 4096, 0x11));
    assert_true(all(accel(0), 4096, 0x11));
    assert_true(all(ram(D, OVL), 4096, 0)); /* its path is down: dropped */
    assert_int_equal(h_cli(FX.name, "link up d.ntb0 sw0 >/dev/null"), 0);
    memset(buf, 0x22, sizeof buf);
    assert_int_equal(fab_dev_write(f, A, DEV_RID, bus, buf, sizeof buf), 0);
    assert_true(all(ram(D, OVL), 4096, 0x22));
    /* The sender's own cable down: the write cannot leave (as a window's would). */
    assert_int_equal(h_cli(FX.name, "link down a.ntb0 sw0 >/dev/null"), 0);
    assert_int_equal(fab_dev_write(f, A, DEV_RID, bus, buf, sizeof buf), -ENOLINK);
    assert_int_equal(h_cli(FX.name, "link up a.ntb0 sw0 >/dev/null"), 0);
    group_down(g, &w);
}

/* ---------------------------------------------------------------- bad input */

static void test_bad_input(void **state)
{
    (void)state;
    int me = getpid();
    assert_int_equal(fab_mcast_create(f, "", -1, GSIZE, me), -EINVAL);
    assert_int_equal(fab_mcast_create(f, "odd", -1, GSIZE + 4096, me), -EINVAL);
    assert_int_equal(fab_mcast_create(f, "tiny", -1, 1024, me), -EINVAL);
    assert_int_equal(fab_mcast_create(f, "where", 7, GSIZE, me), -ENOENT);
    int g = fab_mcast_create(f, "bad", -1, GSIZE, me);
    assert_true(g >= 0);
    assert_int_equal(fab_mcast_create(f, "bad", -1, GSIZE, me), -EEXIST);
    /* e has no cable to the switch: no path to the group, for members and senders alike. */
    assert_int_equal(fab_mcast_join(f, (uint32_t)g, E, OVL, me), -EHOSTUNREACH);
    struct fab_window w;
    uint32_t ei = (uint32_t)fab_adapter_by_name(f, "e.ntb0");
    assert_int_equal(fab_window_map(f, ei, (uint32_t)g, 0, GSIZE, me, FAB_LUT_MCAST, &w), -ENOTCONN);
    /* Overlays: the agents' mailboxes, unaligned, past the end of RAM, a register BAR. */
    assert_int_equal(fab_mcast_join(f, (uint32_t)g, B, 0, me), -EINVAL);
    assert_int_equal(fab_mcast_join(f, (uint32_t)g, B, OVL + 100, me), -EINVAL);
    assert_int_equal(fab_mcast_join(f, (uint32_t)g, B, fab_host(f, B)->ram_size - 4096, me), -EINVAL);
    uint64_t regs = 0;
    for (int b = 0; b < FAB_BARS; b += 2)
        if (fab_func(f, accel_fn)->bar[b].kind == FAB_BAR_REGS)
            regs = fab_func(f, accel_fn)->bar[b].addr;
    assert_int_equal(fab_mcast_join(f, (uint32_t)g, C, regs, me), -EINVAL);
    assert_int_equal(fab_mcast_join(f, (uint32_t)g, B, OVL, me), 0);
    assert_int_equal(fab_mcast_join(f, (uint32_t)g, B, OVL, me), -EALREADY);
    assert_int_equal(fab_mcast_leave(f, (uint32_t)g, C, me), -ENOENT);
    assert_int_equal(fab_mcast_leave(f, (uint32_t)g, B, me), 0);
    assert_int_equal(fab_mcast_remove(f, (uint32_t)g, me), 0);
    assert_int_equal(fab_mcast_remove(f, (uint32_t)g, me), -ENOENT);
    /* The switches hold FAB_MCAST_GROUPS groups. */
    char name[16];
    for (int i = 0; i < FAB_MCAST_GROUPS; i++) {
        snprintf(name, sizeof name, "g%d", i);
        assert_true(fab_mcast_create(f, name, -1, GSIZE, me) >= 0);
    }
    assert_int_equal(fab_mcast_create(f, "one-more", -1, GSIZE, me), -ENOSPC);
    for (int i = 0; i < FAB_MCAST_GROUPS; i++) {
        snprintf(name, sizeof name, "g%d", i);
        assert_int_equal(fab_mcast_remove(f, (uint32_t)fab_mcast_find(f, name), me), 0);
    }
}

/* ---------------------------------------------------------------- a dead process */

static void test_reap(void **state)
{
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct fab *cf;
        if (fab_attach(FX.name, -1, &cf))
            _exit(2);
        int g = fab_mcast_create(cf, "orphan", -1, GSIZE, getpid());
        _exit(g < 0 || fab_mcast_join(cf, (uint32_t)g, C, OVL, getpid()) ? 3 : 0);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    int g = fab_mcast_find(f, "orphan");
    assert_true(g >= 0);
    assert_int_equal(fab_mcast_members(f, (uint32_t)g), 1);
    assert_int_equal(fab_mcast_join(f, (uint32_t)g, B, OVL, getpid()), 0);
    fab_reap_owner(f, pid);
    /* The dead one's group goes, with every member (ours too). */
    assert_int_equal(fab_mcast_find(f, "orphan"), -ENOENT);
    assert_int_equal(fab_mcast_members(f, (uint32_t)g), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fanout),
        cmocka_unit_test(test_reads_fail),
        cmocka_unit_test(test_leave_while_writing),
        cmocka_unit_test(test_link_down),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_reap),
    };
    return cmocka_run_group_tests(tests, setup, fx_teardown);
}
