/*
 * SmartIO for driver models and streaming DMA: this host's PCIe tree (its own functions and
 * one lent to it, with their places and BARs in its map), waiting for hot-add and being woken
 * from the wait, binding (alone, once, only what the tree holds), a bound lent function's BARs
 * through its hot-add window (no new LUT entry); RAM for DMA; streaming mappings on a lent
 * device (the DMA window, this host's IOMMU on), on this host's own device (its own domain),
 * and with the IOMMU off (a window of the lender's per mapping), checked by the device's own
 * DMA as the fabric performs it: data lands, the direction holds, an unmapped address faults.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <pthread.h>
#include <string.h>

#include "fabric.h"
#include "fixture.h"
#include "ntblend/smartio.h"
#include "ntblend/smartio_tree.h"

static struct fx FX;
static const struct fx_opts FX_OPTS = {
    .topo = "tests/system/topologies/lend-dma.ini",
    .attach = fx_attach
};
static int setup(void **state) { return fx_setup(state, &FX, "siohost", &FX_OPTS); }

static uint32_t adapter_of(const char *host)
{
    return fab_host(FX.f, fx_host(&FX, host))->adapter_first;
}

/* LUT entries of adapter `a` in use, but for the agents' mailbox routes (kept once made). */
static uint32_t lut_used(uint32_t a)
{
    const struct fab_adapter *x = fab_adapter(FX.f, a);
    const struct fab_lut_entry *e = fab_lut(FX.f, x);
    uint32_t n = fab_lut_used(FX.f, a);
    for (uint32_t i = 0; i < x->lut_entries; i++)
        n -= (e[i].flags & FAB_LUT_AGENT) != 0;
    return n;
}

/* ---------------------------------------------------------------- the tree */

static void *wait_forever(void *arg)
{
    uint32_t seen = 0;
    sio_tree_wait(arg, &seen, 0);
    return (void *)(intptr_t)sio_tree_wait(arg, &seen, -1);
}

static void tree_user(void *arg)
{
    sio_tree_t *t;
    CHECK_EQ(sio_tree_open(&t), 0);
    struct sio_tree_fn f[4];
    /* c's own accelerator first, then a's accel0, lent to c and hot-added at 80:00.0. */
    CHECK_EQ(sio_tree_list(t, f, 4), 2);
    CHECK_EQ(sio_tree_list(t, NULL, 0), 2);
    CHECK_EQ(sio_tree_list(t, f, 1), 2);
    CHECK_EQ(sio_tree_list(t, f, 4), 2);
    CHECK_EQ(f[0].id, sio_find("accel1"));
    CHECK(!f[0].lent && f[0].present);
    CHECK_EQ(f[1].id, sio_find("accel0"));
    CHECK(f[1].lent && f[1].present);
    CHECK_EQ(f[1].bdf, 0x8000);
    CHECK(!strcmp(f[1].name, "accel0"));
    CHECK_EQ(f[1].vendor, 0x10de);
    CHECK_EQ(f[1].bar_size[2], 16u << 20);
    CHECK(f[1].bar_addr[2] && !f[1].bar_addr[1]);
    for (int b = 0; b < SIO_BARS; b++)
        h_put(f[1].bar_addr[b]);
    /* Bound: c's own function alone, the lent one once; what the tree lacks, not at all. */
    sio_dev_t *own, *lent, *x;
    CHECK_EQ(sio_bind(t, f[0].id, &own), 0);
    CHECK_EQ(sio_bind(t, f[1].id, &lent), 0);
    CHECK_EQ(sio_bind(t, f[1].id, &x), -EBUSY);
    CHECK_EQ(sio_bind(t, (uint32_t)sio_find("accel2"), &x), -ENOENT); /* a's, not lent to c */
    CHECK_EQ(sio_bind(t, 999, &x), -ENODEV);
    CHECK_EQ(sio_borrow(f[1].id, 3, &x), -EINVAL); /* binding is sio_bind's */
    CHECK_EQ(sio_enable(lent), 0);
    h_put(1);
    h_get(); /* the parent counted c's LUT entries */
    /* The lent BAR maps through the hot-add's window: a store lands in the device. */
    size_t size;
    sio_bar_t *bar, *regs;
    volatile uint8_t *mem = sio_map_bar(lent, 2, &size, &bar);
    CHECK(mem);
    CHECK_EQ(size, 16u << 20);
    for (int i = 0; i < 256; i++)
        mem[i] = (uint8_t)(i * 7);
    CHECK(sio_map_bar(lent, 0, NULL, &regs));
    sio_write32(regs, 0x100, 0x5eed);
    h_put(1);
    h_get(); /* the parent looked */
    sio_unmap_bar(bar);
    sio_unmap_bar(regs);
    /* A wait sees the next hot-add. */
    uint32_t seen = 0;
    sio_tree_wait(t, &seen, 0); /* takes the generation */
    CHECK(seen != 0);
    CHECK_EQ(sio_tree_wait(t, &seen, 0), -ETIMEDOUT);
    h_put(1);
    CHECK_EQ(sio_tree_wait(t, &seen, 60000), 0); /* accel2 lent to c (however busy the machine) */
    CHECK_EQ(sio_tree_list(t, f, 4), 3);
    /* A thread asleep in a wait is woken, and every wait from then on returns at once. */
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, wait_forever, t), 0);
    struct timespec ts = { 0, 20 * 1000000 };
    nanosleep(&ts, NULL);
    sio_tree_wake(t);
    void *rc;
    CHECK_EQ(pthread_join(th, &rc), 0);
    CHECK_EQ((intptr_t)rc, -EINTR);
    CHECK_EQ(sio_tree_wait(t, &seen, 10000), -EINTR);
    CHECK_EQ(sio_return(lent), 0);
    CHECK_EQ(sio_return(own), 0);
    sio_tree_close(t);
    h_put(1);
}

static void test_tree_and_binding(void **state)
{
    assert_int_equal(h_cli(FX.name, "device lend accel0 --to c >/dev/null"), 0);
    uint32_t acc0 = fx_func(&FX, "accel0"), ac = adapter_of("c");
    struct h_proc u = h_spawn(FX.name, "c", tree_user, NULL);
    uint64_t bar[SIO_BARS];
    for (int b = 0; b < SIO_BARS; b++)
        bar[b] = h_from(&u);
    /* Where the tree says the BAR is: c's own shadow record of it. */
    const struct fab_host *c = fab_host(FX.f, (uint32_t)fab_host_by_name(FX.f, "c"));
    int slot = -1;
    for (int i = 0; i < FAB_SHADOWS; i++)
        if (atomic_load(&c->shadows[i].state) != FAB_SHADOW_FREE && c->shadows[i].fn == acc0)
            slot = i;
    assert_true(slot >= 0);
    assert_int_equal(bar[2], c->shadows[slot].bar_addr[2]);
    assert_int_equal(bar[0], c->shadows[slot].bar_addr[0]);
    h_from(&u);
    uint32_t lut = lut_used(ac), regs = atomic_load(&fab_func(FX.f, acc0)->reg_seq);
    h_to(&u, 1);
    h_from(&u);
    assert_int_equal(lut_used(ac), lut); /* no second window for the BARs */
    const uint8_t *dm = fab_bar_mem(FX.f, acc0, fab_func(FX.f, acc0)->bar[2].off, 256);
    for (int i = 0; i < 256; i++)
        assert_int_equal(dm[i], (uint8_t)(i * 7));
    assert_true(atomic_load(&fab_func(FX.f, acc0)->reg_seq) > regs); /* the register write told it */
    h_to(&u, 1);
    h_from(&u);
    assert_int_equal(h_cli(FX.name, "device lend accel2 --to c >/dev/null"), 0);
    h_from(&u);
    assert_int_equal(h_join(&u), 0);
    assert_int_equal(h_cli(FX.name, "device reclaim accel0 >/dev/null"), 0);
    assert_int_equal(h_cli(FX.name, "device reclaim accel2 >/dev/null"), 0);
}

/* ---------------------------------------------------------------- streaming DMA */

/* Maps for the device `name` (borrowed by id, or bound when lent to this host): one page the
 * device may write, one it may read (filled), and reports where; unmaps the first when told. */
static void stream_user(void *arg)
{
    const char *name = arg;
    sio_tree_t *t;
    sio_dev_t *d;
    CHECK_EQ(sio_tree_open(&t), 0);
    int rc = sio_bind(t, (uint32_t)sio_find(name), &d);
    if (rc == -ENOENT) /* not in this host's tree: borrowed by id */
        rc = sio_borrow((uint32_t)sio_find(name), SIO_EXCLUSIVE, &d);
    CHECK_EQ(rc, 0);
    CHECK_EQ(sio_enable(d), 0);
    uint8_t *buf = sio_ram_alloc(3 * 4096 + 1); /* four pages */
    CHECK(buf && ((uintptr_t)buf & 4095) == 0);
    for (int i = 0; i < 4 * 4096; i++)
        CHECK_EQ(buf[i], 0);
    uint64_t addr, io_w, io_r, x;
    CHECK_EQ(sio_ram_addr(buf + 100, 4 * 4096 - 100, &addr), 0);
    CHECK_EQ(addr & 4095, 100);
    CHECK_EQ(sio_ram_addr(buf, 4 * 4096 + 1 + (1 << 24), &x), -EINVAL);
    CHECK_EQ(sio_ram_addr(&x, 8, &x), -EINVAL);
    CHECK_EQ(sio_ram_free(buf + 4096), -EINVAL);
    CHECK_EQ(sio_stream_map(d, &x, 8, SIO_DMA_READ, &x), -EINVAL);   /* not its RAM */
    CHECK_EQ(sio_stream_map(d, buf, 0, SIO_DMA_READ, &x), -EINVAL);
    CHECK_EQ(sio_stream_map(d, buf, 64, 0, &x), -EINVAL);
    CHECK_EQ(sio_stream_map(d, buf, 64, 4, &x), -EINVAL);
    CHECK_EQ(sio_stream_map(d, buf + 4096 + 8, 64, SIO_DMA_WRITE, &io_w), 0);
    CHECK_EQ(io_w & 4095, 8);
    memcpy(buf + 2 * 4096, "to the device", 14);
    CHECK_EQ(sio_stream_map(d, buf + 2 * 4096, 4096, SIO_DMA_READ, &io_r), 0);
    h_put(io_w);
    h_put(io_r);
    h_get(); /* the device wrote */
    for (int i = 0; i < 64; i++)
        CHECK_EQ(buf[4096 + 8 + i], (uint8_t)(i + 1));
    CHECK_EQ(buf[4096 + 8 + 64], 0);
    CHECK_EQ(sio_stream_unmap(d, io_w, 64), 0);
    CHECK_EQ(sio_stream_unmap(d, io_w, 64), -ENOENT);
    memset(buf + 4096, 0, 4096);
    h_put(1);
    h_get(); /* the device tried again */
    for (int i = 0; i < 4096; i++)
        CHECK_EQ(buf[4096 + i], 0);
    /* io_r stays mapped: sio_return takes it. */
    CHECK_EQ(sio_return(d), 0);
    CHECK_EQ(sio_ram_free(buf), 0);
    sio_tree_close(t);
    h_put(1);
}

/* The device of `name` DMAs through what the child on `host` mapped; returns io_w. */
static uint64_t drive(const char *host, const char *name, bool iommu)
{
    uint32_t fn = fx_func(&FX, name);
    struct h_proc u = h_spawn(FX.name, host, stream_user, (void *)name);
    uint64_t io_w = h_from(&u), io_r = h_from(&u);
    uint8_t v[64], back[14];
    for (int i = 0; i < 64; i++)
        v[i] = (uint8_t)(i + 1);
    assert_int_equal(fab_fn_dma_write(FX.f, fn, io_w, v, sizeof v), 0);
    assert_int_equal(fab_fn_dma_read(FX.f, fn, io_r, back, sizeof back), 0);
    assert_string_equal((char *)back, "to the device");
    if (iommu) /* against the direction: a permission fault */
        assert_int_equal(fab_fn_dma_write(FX.f, fn, io_r, v, sizeof v), -EACCES);
    h_to(&u, 1);
    h_from(&u);
    /* Unmapped again: the device reaches nothing there. */
    assert_int_not_equal(fab_fn_dma_write(FX.f, fn, io_w, v, sizeof v), 0);
    h_to(&u, 1);
    h_from(&u);
    assert_int_equal(h_join(&u), 0);
    return io_w;
}

static void test_streaming_dma(void **state)
{
    uint32_t aa = adapter_of("a");
    uint32_t lut = lut_used(aa);
    /* Lent to c, whose IOMMU is on: the DMA window, one window on a for the function. */
    assert_int_equal(h_cli(FX.name, "device lend accel0 --to c >/dev/null"), 0);
    drive("c", "accel0", true);
    /* c's own function: its own domain, at I/O virtual addresses of c's choosing. */
    uint64_t io = drive("c", "accel1", true);
    assert_true(io >= 1ull << 45);
    assert_int_equal(h_cli(FX.name, "device reclaim accel0 >/dev/null"), 0);
    /* Borrowed by id from b, whose IOMMU is off: a window of a's per mapping. */
    assert_int_equal(h_cli(FX.name, "device add accel2 >/dev/null"), 0);
    drive("b", "accel2", false);
    assert_int_equal(lut_used(aa), lut); /* all of it gone with the mappings */
}

/* A device of this host borrowed shared: its IOMMU domain is not the process's alone. */
static void shared_user(void *arg)
{
    sio_dev_t *d;
    CHECK_EQ(sio_set_available((uint32_t)sio_find("accel1"), true), 0);
    CHECK_EQ(sio_borrow((uint32_t)sio_find("accel1"), SIO_SHARED, &d), 0);
    void *buf = sio_ram_alloc(4096);
    uint64_t io;
    CHECK_EQ(sio_stream_map(d, buf, 4096, SIO_DMA_READ, &io), -EBUSY);
    CHECK_EQ(sio_return(d), 0);
    CHECK_EQ(sio_set_available((uint32_t)sio_find("accel1"), false), 0);
}

static void test_streaming_shared_local(void **state)
{
    struct h_proc u = h_spawn(FX.name, "c", shared_user, NULL);
    assert_int_equal(h_join(&u), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tree_and_binding),
        cmocka_unit_test(test_streaming_dma),
        cmocka_unit_test(test_streaming_shared_local),
    };
    return cmocka_run_group_tests(tests, setup, fx_teardown);
}
