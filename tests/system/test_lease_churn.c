/*
 * Leases under churn: 100 times, a process on host b borrows the accelerator that host a
 * lends, enables it, maps its BARs, allocates memory for its DMA both here and near the
 * device, and then host b crashes. Each time the lender must notice, take the device back and
 * reset it, and every table the borrow used must return to what it was before the first
 * cycle: LUT and requester-ID entries of every adapter, IOMMU mappings of every host, and the
 * device's borrower set. The last cycle's borrower checks the device still works end to end.
 * The orderly path (free, return) is checked the same way. And a host that did not borrow the
 * device cannot reach its registers through a window of its own.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <signal.h>
#include <string.h>

#include "harness.h"
#include "fabric.h"
#include "fab_tables.h"
#include "ntblend/accel_regs.h"
#include "ntblend/ntb.h"
#include "ntblend/smartio.h"

static struct fx FX;
static const struct fx_opts FX_OPTS = { .topo = "tests/system/topologies/smartio3-iommu.ini",
                                        .attach = fx_attach };

#define CYCLES 100

static void lender(void *arg)
{
    (void)arg;
    CHECK_EQ(sio_set_available((uint32_t)sio_find("accel0"), true), 0);
    h_put(1);
}

/* Borrow, enable, map BAR2, and allocate DMA memory on this host and near the device. With
 * `verify`, also have the device copy from one to the other and check the data. */
static void borrower(void *arg)
{
    bool verify = arg != NULL;
    sio_dev_t *d;
    CHECK_EQ(sio_borrow((uint32_t)sio_find("accel0"), SIO_EXCLUSIVE, &d), 0);
    CHECK_EQ(sio_enable(d), 0);
    size_t size;
    sio_bar_t *bar;
    CHECK(sio_map_bar(d, 2, &size, &bar) != NULL);
    volatile uint8_t *here, *there;
    uint64_t here_io, there_io;
    sio_mem_t *mhere, *mthere;
    CHECK_EQ(sio_alloc(d, 65536, SIO_HINT_DEVICE_WRITE | SIO_HINT_HOST_READ,
                       (volatile void **)&here, &here_io, &mhere), 0);
    CHECK_EQ(sio_alloc(d, 65536, SIO_HINT_DEVICE_READ | SIO_HINT_HOST_WRITE,
                       (volatile void **)&there, &there_io, &mthere), 0);
    if (verify) {
        for (int i = 0; i < 4096; i++)
            there[i] = (uint8_t)(i * 7 + 1);
        h_put(here_io);
        h_put(there_io);
        h_get(); /* the parent had the device copy there -> here */
        for (int i = 0; i < 4096; i++)
            CHECK_EQ(here[i], (uint8_t)(i * 7 + 1));
    }
    h_put(1);
    pause(); /* until the host dies under us */
}

static void test_borrower_host_crash_100_times(void **state)
{
    (void)state;
    uint32_t acc = (uint32_t)fab_func_by_name(FX.f, "accel0");
    struct fab_function *A = fab_func(FX.f, acc);
    struct fab_tables before, after;
    fab_tables_snapshot(FX.f, &before);

    for (int cycle = 0; cycle < CYCLES; cycle++) {
        bool verify = cycle == CYCLES - 1;
        uint32_t resets = atomic_load(&A->reset_gen);
        struct h_proc p = h_spawn(FX.name, "b", borrower, verify ? (void *)1 : NULL);
        if (verify) {
            uint64_t here_io = h_from(&p), there_io = h_from(&p);
            /* The device's copy, performed through the fabric as the device's own DMA. */
            uint8_t buf[4096];
            assert_int_equal(fab_fn_dma_read(FX.f, acc, there_io, buf, sizeof buf), 0);
            assert_int_equal(fab_fn_dma_write(FX.f, acc, here_io, buf, sizeof buf), 0);
            h_to(&p, 1);
        }
        h_from(&p); /* borrowed, mapped, allocated */
        assert_true(atomic_load(&A->lend_borrowers[0]) != 0);
        assert_int_equal(h_cli(FX.name, "host kill b >/dev/null"), 0);
        assert_int_equal(h_join(&p), 128 + SIGKILL);
        /* The lender clears the borrower, then resets the device: wait for both. */
        for (int i = 0; i < 500 && (atomic_load(&A->lend_borrowers[0]) ||
                                    atomic_load(&A->reset_gen) == resets); i++)
            usleep(10000);
        assert_int_equal(atomic_load(&A->lend_borrowers[0]), 0);
        assert_true(atomic_load(&A->reset_gen) > resets);
        assert_int_equal(fab_cfg_read(FX.f, acc, 0x04, 2), 0); /* reset: no memory, no bus master */
        assert_int_equal(h_cli(FX.name, "host start b >/dev/null"), 0);
        /* The lender releases what the borrow held once it sees the host gone; give it time. */
        fab_tables_settle(FX.f, &before, &after);
        for (uint32_t a = 0; a < FX.f->ctl->nadapters; a++) {
            if (after.lut[a] != before.lut[a] || after.rid[a] != before.rid[a])
                fail_msg("cycle %d: adapter %s uses %u LUT / %u requester-ID entries, %u / %u "
                         "before", cycle, fab_adapter(FX.f, a)->name, after.lut[a], after.rid[a],
                         before.lut[a], before.rid[a]);
        }
        for (uint32_t h = 0; h < FX.f->ctl->nhosts; h++)
            if (after.iommu[h] != before.iommu[h])
                fail_msg("cycle %d: host %s has %u IOMMU mappings, %u before", cycle,
                         fab_host(FX.f, h)->name, after.iommu[h], before.iommu[h]);
    }
}

/* The orderly path: free and return, and nothing stays behind either. */
static void tidy_borrower(void *arg)
{
    (void)arg;
    sio_dev_t *d;
    CHECK_EQ(sio_borrow((uint32_t)sio_find("accel0"), SIO_EXCLUSIVE, &d), 0);
    CHECK_EQ(sio_enable(d), 0);
    volatile void *here, *there;
    uint64_t here_io, there_io;
    sio_mem_t *mhere, *mthere;
    CHECK_EQ(sio_alloc(d, 65536, SIO_HINT_DEVICE_WRITE | SIO_HINT_HOST_READ, &here, &here_io,
                       &mhere), 0);
    CHECK_EQ(sio_alloc(d, 65536, SIO_HINT_DEVICE_WRITE | SIO_HINT_HOST_READ, &there, &there_io,
                       &mthere), 0);
    CHECK_EQ(sio_free(mhere), 0);
    h_put(1); /* one of two windows through the lender's adapter gone */
    h_get();
    CHECK_EQ(sio_free(mthere), 0);
    CHECK_EQ(sio_return(d), 0);
    h_put(1);
}

static void test_free_and_return_leave_nothing(void **state)
{
    (void)state;
    struct fab_tables before, after;
    fab_tables_snapshot(FX.f, &before);
    uint32_t rid = fab_func(FX.f, (uint32_t)fab_func_by_name(FX.f, "accel0"))->rid;
    uint32_t la = fab_host(FX.f, (uint32_t)fab_host_by_name(FX.f, "a"))->adapter_first;
    struct h_proc p = h_spawn(FX.name, "b", tidy_borrower, NULL);
    h_from(&p);
    /* The remaining window still needs the device's requester ID on the lender's adapter. */
    bool found = false;
    for (uint32_t e = 0; e < fab_adapter(FX.f, la)->rid_entries; e++)
        found |= atomic_load(&fab_rid(FX.f, fab_adapter(FX.f, la))[e].used) &&
                 fab_rid(FX.f, fab_adapter(FX.f, la))[e].rid == rid;
    assert_true(found);
    h_to(&p, 1);
    h_from(&p);
    assert_int_equal(h_join(&p), 0);
    fab_tables_snapshot(FX.f, &after);
    assert_memory_equal(&after, &before, sizeof after);
}

/* Isolation on a lender with its IOMMU on: a process on b that points an NTB window straight
 * at a's accelerator, without borrowing it, reads all ones (the lender's IOMMU stops the
 * access, as a master abort); once b borrows the device, the same window reaches its
 * registers. */
static void window_prober(void *arg)
{
    uint64_t bar0 = (uint64_t)(uintptr_t)arg;
    struct ntb_dev *ntb = ntb_open(0);
    CHECK(ntb);
    int pidx = ntb_peer_port_idx(ntb, 4); /* node 4: host a */
    CHECK(pidx >= 0);
    uint64_t phys, size;
    int widx = ntb_peer_mw_alloc(ntb);
    CHECK(widx >= 0);
    CHECK_EQ(ntb_peer_mw_get_addr(ntb, widx, &phys, &size), 0);
    uint64_t base = bar0 & ~(size - 1);
    CHECK_EQ(ntb_peer_mw_set_trans(ntb, pidx, widx, base, size), 0);
    volatile uint8_t *w = ntb_peer_mw_map(ntb, widx, 1);
    CHECK(w);
    volatile uint32_t *id = (volatile uint32_t *)(w + (bar0 - base) + ACCEL_REG_ID);
    CHECK_EQ(*id, 0xffffffffu); /* not borrowed: the lender's IOMMU stops it */
    h_put(1);
    h_get();
    sio_dev_t *d;
    CHECK_EQ(sio_borrow((uint32_t)sio_find("accel0"), SIO_EXCLUSIVE, &d), 0);
    CHECK_EQ(*id, ACCEL_ID); /* borrowed: the lender lets our adapter reach its BARs */
    CHECK_EQ(sio_return(d), 0);
    ntb_peer_mw_unmap(ntb, (void *)w);
    ntb_close(ntb);
    h_put(1);
}

static void test_bars_unreachable_without_a_borrow(void **state)
{
    (void)state;
    uint32_t acc = (uint32_t)fab_func_by_name(FX.f, "accel0");
    struct h_proc p = h_spawn(FX.name, "b", window_prober,
                              (void *)(uintptr_t)fab_func(FX.f, acc)->bar[0].addr);
    h_from(&p); /* it read all ones */
    assert_int_equal(atomic_load(&fab_func(FX.f, acc)->lend_borrowers[0]), 0);
    h_to(&p, 1);
    h_from(&p);
    assert_int_equal(h_join(&p), 0);
}

static int setup(void **state)
{
    if (fx_setup(state, &FX, "churn", &FX_OPTS))
        return -1;
    struct h_proc p = h_spawn(FX.name, "a", lender, NULL);
    h_from(&p);
    return h_join(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_free_and_return_leave_nothing),
        cmocka_unit_test(test_borrower_host_crash_100_times),
        cmocka_unit_test(test_bars_unreachable_without_a_borrow),
    };
    return cmocka_run_group_tests(tests, setup, fx_teardown);
}
