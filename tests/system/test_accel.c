/*
 * The accelerator model (src/devices/accel.c) driven through the fabric model directly, as a
 * driver's accessors will: config space through fab_cfg_*, registers and the descriptor ring
 * by storing into BAR0 and notifying the model, device memory through BAR2. Covers reset
 * values, config space, device memory <-> host RAM copies (bandwidthTest), Bus Master Enable,
 * MSI-X (delivery, masking, pending bits), peer-to-peer copies between accelerators in
 * different hosts through NTB windows, a device-only ping-pong, faults and many descriptors
 * in flight. One fabric (smartio3.ini) serves every test; the tests run in order.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>
#include <time.h>

#include "fixture.h"
#include "fabric.h"
#include "ntblend/accel_regs.h"

#define MiB (1ull << 20)
#define RAM_AT (300 * MiB) /* host RAM the tests copy to/from: nobody allocates there */
#define HOST_VEC 200u      /* host MSI vectors the tests program into the MSI-X table */

static struct {
    struct fx fx; /* the fabric; its state is T.fx.f */
    struct fab *f;
    uint32_t a, c;   /* hosts */
    uint32_t acc0, acc1;
    uint32_t ad_a, ad_c; /* adapters a.ntb0, c.ntb0 */
} T;

/* ---------------------------------------------------------------- driver-style accessors */

static uint8_t *regs(uint32_t fn)
{
    const struct fab_function *fx = fab_func(T.f, fn);
    uint8_t *p = fab_bar_mem(T.f, fn, fx->bar[ACCEL_BAR_REGS].off, fx->bar[ACCEL_BAR_REGS].size);
    assert_non_null(p);
    return p;
}

static uint8_t *dmem(uint32_t fn, uint64_t off, uint64_t len)
{
    const struct fab_function *fx = fab_func(T.f, fn);
    uint8_t *p = fab_bar_mem(T.f, fn, fx->bar[ACCEL_BAR_MEM].off + off, len);
    assert_non_null(p);
    return p;
}

static uint32_t rd(uint32_t fn, uint32_t off)
{
    return __atomic_load_n((uint32_t *)(regs(fn) + off), __ATOMIC_ACQUIRE);
}

static void wr(uint32_t fn, uint32_t off, uint32_t v)
{
    __atomic_store_n((uint32_t *)(regs(fn) + off), v, __ATOMIC_RELEASE);
    fab_fn_notify(T.f, fn);
}

static uint64_t ms_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Wait (bounded: a hang fails the test, nothing times anything) until COMPLETED reaches n. */
static void wait_completed(uint32_t fn, uint32_t n)
{
    uint64_t until = ms_now() + 20000;
    while ((int32_t)(rd(fn, ACCEL_REG_COMPLETED) - n) < 0) {
        if (ms_now() > until)
            fail_msg("%s: COMPLETED %u, expected %u (TAIL %u HEAD %u STATUS %#x)",
                     fab_func(T.f, fn)->name, rd(fn, ACCEL_REG_COMPLETED), n,
                     rd(fn, ACCEL_REG_TAIL), rd(fn, ACCEL_REG_HEAD), rd(fn, ACCEL_REG_STATUS));
        usleep(50);
    }
}

/* Queue one descriptor (not yet visible to the device) and return its ring index. */
static uint32_t queue(uint32_t fn, uint32_t *head, uint64_t src, uint64_t dst, uint32_t len,
                      uint32_t ctrl, uint32_t value)
{
    struct accel_desc *d = (struct accel_desc *)(regs(fn) + ACCEL_RING_OFF) +
                           *head % ACCEL_RING_ENTRIES;
    d->src = src;
    d->dst = dst;
    d->len = len;
    d->ctrl = ctrl;
    d->value = value;
    __atomic_store_n(&d->status, 0, __ATOMIC_RELEASE);
    return (*head)++;
}

static uint32_t desc_status(uint32_t fn, uint32_t idx)
{
    struct accel_desc *d = (struct accel_desc *)(regs(fn) + ACCEL_RING_OFF) +
                           idx % ACCEL_RING_ENTRIES;
    return __atomic_load_n(&d->status, __ATOMIC_ACQUIRE);
}

/* Submit one descriptor and wait for it; returns its status. */
static uint32_t run1(uint32_t fn, uint64_t src, uint64_t dst, uint32_t len, uint32_t ctrl)
{
    uint32_t head = rd(fn, ACCEL_REG_HEAD), done = rd(fn, ACCEL_REG_COMPLETED);
    uint32_t idx = queue(fn, &head, src, dst, len, ctrl, 0);
    wr(fn, ACCEL_REG_HEAD, head);
    wait_completed(fn, done + 1);
    return desc_status(fn, idx);
}

/* CONTROL.RESET, then enable the engine. */
static void dev_reset(uint32_t fn)
{
    wr(fn, ACCEL_REG_CONTROL, ACCEL_CTRL_RESET);
    uint64_t until = ms_now() + 10000;
    while (rd(fn, ACCEL_REG_CONTROL) & ACCEL_CTRL_RESET) {
        if (ms_now() > until)
            fail_msg("reset did not complete");
        usleep(50);
    }
    assert_int_equal(rd(fn, ACCEL_REG_HEAD), 0);
    assert_int_equal(rd(fn, ACCEL_REG_TAIL), 0);
    assert_int_equal(rd(fn, ACCEL_REG_COMPLETED), 0);
    wr(fn, ACCEL_REG_CONTROL, ACCEL_CTRL_ENABLE);
}

static void cmd(uint32_t fn, uint32_t bits)
{
    assert_int_equal(fab_cfg_write(T.f, fn, 0x04, 2, bits), 0);
}

static void fill(uint8_t *p, uint64_t len, uint32_t seed)
{
    for (uint64_t i = 0; i < len; i++)
        p[i] = (uint8_t)((i * 131 + seed * 7 + (i >> 8)) & 0xff);
}

static void check_zero(const uint8_t *p, uint64_t len)
{
    for (uint64_t i = 0; i < len; i++)
        if (p[i])
            fail_msg("byte %llu is %#x, expected 0", (unsigned long long)i, p[i]);
}

/* Program MSI-X table entry v of fn to raise host vector hv (masked or not). */
static void msix_entry(uint32_t fn, uint32_t v, uint32_t hv, bool masked)
{
    uint32_t *e = (uint32_t *)(regs(fn) + ACCEL_MSIX_TABLE + 16 * v);
    e[0] = (uint32_t)FAB_MSI_BASE;
    e[1] = 0;
    e[2] = hv;
    __atomic_store_n(&e[3], masked ? 1u : 0u, __ATOMIC_RELEASE);
    fab_fn_notify(T.f, fn);
}

static void msix_enable(uint32_t fn)
{
    uint32_t cur = fab_cfg_read(T.f, fn, FAB_CFG_MSIX + 2, 2);
    assert_int_equal(fab_cfg_write(T.f, fn, FAB_CFG_MSIX + 2, 2, 0x8000 | cur), 0);
}

static uint32_t msi_seq(uint32_t host, uint32_t hv)
{
    return atomic_load(&fab_host(T.f, host)->msi_seq[hv]);
}

/* Bus address, on host `from`, of `off` in fn's device memory on another host: a LUT entry of
 * adapter `ad` points at the entry-aligned part of fn's BAR2. */
static uint64_t window_to(uint32_t ad, uint32_t fn, uint64_t off)
{
    struct fab_adapter *A = fab_adapter(T.f, ad);
    const struct fab_function *fx = fab_func(T.f, fn);
    uint64_t target = fx->bar[ACCEL_BAR_MEM].addr + off;
    uint64_t base = target & ~(A->lut_size - 1);
    int idx = fab_lut_alloc(T.f, ad, getpid(), 0);
    assert_true(idx >= 0);
    assert_int_equal(fab_lut_set(T.f, ad, (uint32_t)idx, fx->host, base, getpid(), 0), 0);
    return A->bar_addr + (uint64_t)idx * A->lut_size + (target - base);
}

/* ---------------------------------------------------------------- setup */

static int group_setup(void **state)
{
    static const struct fx_opts o = { .topo = "examples/topologies/smartio3.ini",
                                      .attach = fx_attach };
    if (fx_setup(state, &T.fx, "accel", &o))
        return -1;
    T.f = T.fx.f;
    int a = fab_host_by_name(T.f, "a"), c = fab_host_by_name(T.f, "c");
    int x0 = fab_func_by_name(T.f, "accel0"), x1 = fab_func_by_name(T.f, "accel1");
    int ada = fab_adapter_by_name(T.f, "a.ntb0"), adc = fab_adapter_by_name(T.f, "c.ntb0");
    if (a < 0 || c < 0 || x0 < 0 || x1 < 0 || ada < 0 || adc < 0)
        return -1;
    T.a = (uint32_t)a;
    T.c = (uint32_t)c;
    T.acc0 = (uint32_t)x0;
    T.acc1 = (uint32_t)x1;
    T.ad_a = (uint32_t)ada;
    T.ad_c = (uint32_t)adc;
    /* The agents start the models as the hosts boot: wait until both serve. */
    uint64_t until = ms_now() + 10000;
    while (!(rd(T.acc0, ACCEL_REG_STATUS) & ACCEL_STATUS_READY) ||
           !(rd(T.acc1, ACCEL_REG_STATUS) & ACCEL_STATUS_READY)) {
        if (ms_now() > until)
            return -1;
        usleep(1000);
    }
    return 0;
}

/* ---------------------------------------------------------------- tests */

static void test_reset_values(void **state)
{
    (void)state;
    uint32_t fns[2] = { T.acc0, T.acc1 };
    for (int i = 0; i < 2; i++) {
        uint32_t fn = fns[i];
        assert_int_equal(fab_func(T.f, fn)->model_up, 1);
        assert_int_equal(rd(fn, ACCEL_REG_ID), ACCEL_ID);
        assert_int_equal(rd(fn, ACCEL_REG_VERSION), ACCEL_VERSION);
        assert_int_equal(rd(fn, ACCEL_REG_CAPS), ACCEL_RING_ENTRIES | ACCEL_MSIX_VECTORS << 16);
        assert_int_equal(rd(fn, ACCEL_REG_STATUS), ACCEL_STATUS_READY);
        assert_int_equal(rd(fn, ACCEL_REG_CONTROL), 0);
        assert_int_equal(rd(fn, ACCEL_REG_VECTOR), 0);
        assert_int_equal(rd(fn, ACCEL_REG_MEM_LO), (uint32_t)(256 * MiB));
        assert_int_equal(rd(fn, ACCEL_REG_MEM_HI), 0);
        for (uint32_t r = ACCEL_REG_HEAD; r <= ACCEL_REG_BYTES_HI; r += 4)
            assert_int_equal(rd(fn, r), 0);
        /* Nothing runs while the engine is disabled, and the device owns its RO registers. */
        wr(fn, ACCEL_REG_ID, 0xdeadbeef);
        uint64_t until = ms_now() + 10000;
        while (rd(fn, ACCEL_REG_ID) != ACCEL_ID && ms_now() < until)
            usleep(50);
        assert_int_equal(rd(fn, ACCEL_REG_ID), ACCEL_ID);
        /* A function-level reset clears the registers and returns once the model has set
         * them again, as an FLR completes before software uses the function: the next
         * borrower's first read finds the device's ID, never zeroes. */
        for (int k = 0; k < 20; k++) {
            fab_fn_reset(T.f, fn);
            assert_int_equal(rd(fn, ACCEL_REG_ID), ACCEL_ID);
            assert_int_equal(rd(fn, ACCEL_REG_STATUS), ACCEL_STATUS_READY);
        }
        /* Power-on: memory space and bus mastering off, MSI-X disabled. */
        assert_int_equal(fab_cfg_read(T.f, fn, 0x04, 2) & (FAB_CMD_MEM | FAB_CMD_BME), 0);
        assert_int_equal(fab_cfg_read(T.f, fn, FAB_CFG_MSIX + 2, 2) & 0xc000, 0);
    }
}

static void test_config_space(void **state)
{
    (void)state;
    uint32_t fn = T.acc0;
    const struct fab_function *fx = fab_func(T.f, fn);
    assert_int_equal(fab_cfg_read(T.f, fn, 0x00, 2), 0x10de);
    assert_int_equal(fab_cfg_read(T.f, fn, 0x02, 2), 0x1bb1);
    assert_int_equal(fab_cfg_read(T.f, fn, 0x08, 4) >> 8, 0x030200); /* 3D controller */
    /* BAR0: 64-bit non-prefetchable registers, 64 KiB. */
    uint32_t lo = fab_cfg_read(T.f, fn, 0x10, 4), hi = fab_cfg_read(T.f, fn, 0x14, 4);
    assert_int_equal(((uint64_t)hi << 32 | (lo & ~0xfu)), fx->bar[0].addr);
    assert_int_equal(lo & 0xf, 0x4);
    assert_int_equal(fab_cfg_write(T.f, fn, 0x10, 4, 0xffffffff), 0);
    assert_int_equal(fab_cfg_write(T.f, fn, 0x14, 4, 0xffffffff), 0);
    assert_int_equal(fab_cfg_read(T.f, fn, 0x10, 4), (uint32_t)~(65536u - 1) | 0x4);
    assert_int_equal(fab_cfg_read(T.f, fn, 0x14, 4), 0xffffffff);
    assert_int_equal(fab_cfg_write(T.f, fn, 0x10, 4, lo), 0);
    assert_int_equal(fab_cfg_write(T.f, fn, 0x14, 4, hi), 0);
    assert_int_equal(fab_cfg_read(T.f, fn, 0x10, 4), lo);
    /* BAR2: 64-bit prefetchable memory, 256 MiB. */
    uint32_t lo2 = fab_cfg_read(T.f, fn, 0x18, 4);
    assert_int_equal(lo2 & 0xf, 0xc);
    assert_int_equal(fab_cfg_write(T.f, fn, 0x18, 4, 0xffffffff), 0);
    assert_int_equal(fab_cfg_read(T.f, fn, 0x18, 4), (uint32_t)~(256 * MiB - 1) | 0xc);
    assert_int_equal(fab_cfg_write(T.f, fn, 0x18, 4, lo2), 0);
    assert_int_equal(fab_cfg_read(T.f, fn, 0x18, 4), lo2);
    /* MSI-X: 4 vectors, table and PBA in BAR0 where accel_regs.h says. */
    assert_int_equal(fab_cfg_read(T.f, fn, 0x34, 1), FAB_CFG_MSIX);
    assert_int_equal(fab_cfg_read(T.f, fn, FAB_CFG_MSIX, 1), 0x11);
    assert_int_equal((fab_cfg_read(T.f, fn, FAB_CFG_MSIX + 2, 2) & 0x7ff) + 1, ACCEL_MSIX_VECTORS);
    assert_int_equal(fab_cfg_read(T.f, fn, FAB_CFG_MSIX + 4, 4), ACCEL_MSIX_TABLE); /* BIR 0 */
    assert_int_equal(fab_cfg_read(T.f, fn, FAB_CFG_MSIX + 8, 4), ACCEL_MSIX_PBA);
}

/* bandwidthTest's two directions: device memory -> host RAM (DMA write) and back (DMA read). */
static void test_copy_ram_roundtrip(void **state)
{
    (void)state;
    uint32_t fn = T.acc0;
    cmd(fn, FAB_CMD_MEM | FAB_CMD_BME);
    dev_reset(fn);
    const uint64_t len = 3 * MiB + 123;
    uint8_t *src = dmem(fn, 1 * MiB, len);
    fill(src, len, 1);
    uint8_t *ram = fab_ram(T.f, T.a, RAM_AT, len);
    assert_non_null(ram);
    memset(ram, 0, len);
    assert_int_equal(run1(fn, 1 * MiB, RAM_AT, (uint32_t)len, ACCEL_DESC_DST_BUS),
                     ACCEL_DESC_DONE);
    assert_memory_equal(ram, src, len);
    /* Change RAM, copy it back into a different place in device memory. */
    fill(ram, len, 2);
    uint8_t *back = dmem(fn, 64 * MiB, len);
    memset(back, 0, len);
    assert_int_equal(run1(fn, RAM_AT, 64 * MiB, (uint32_t)len, ACCEL_DESC_SRC_BUS),
                     ACCEL_DESC_DONE);
    assert_memory_equal(back, ram, len);
    /* Device memory to device memory, and RAM to RAM through the engine. */
    assert_int_equal(run1(fn, 64 * MiB, 128 * MiB, (uint32_t)len, 0), ACCEL_DESC_DONE);
    assert_memory_equal(dmem(fn, 128 * MiB, len), ram, len);
    uint8_t *ram2 = fab_ram(T.f, T.a, RAM_AT + 16 * MiB, len);
    memset(ram2, 0, len);
    assert_int_equal(run1(fn, RAM_AT, RAM_AT + 16 * MiB, (uint32_t)len,
                          ACCEL_DESC_SRC_BUS | ACCEL_DESC_DST_BUS),
                     ACCEL_DESC_DONE);
    assert_memory_equal(ram2, ram, len);
    /* The CPU stores into BAR2 directly (a memory BAR) and the engine copies it out. */
    memcpy(dmem(fn, 200 * MiB, 8), "cpustore", 8);
    assert_int_equal(run1(fn, 200 * MiB, RAM_AT, 8, ACCEL_DESC_DST_BUS), ACCEL_DESC_DONE);
    assert_memory_equal(ram, "cpustore", 8);
    assert_int_equal(rd(fn, ACCEL_REG_COMPLETED), 5);
    assert_int_equal(rd(fn, ACCEL_REG_ERRORS), 0);
    uint64_t bytes = (uint64_t)rd(fn, ACCEL_REG_BYTES_HI) << 32 | rd(fn, ACCEL_REG_BYTES_LO);
    assert_int_equal(bytes, 4 * len + 8);
    assert_int_equal(rd(fn, ACCEL_REG_STATUS), ACCEL_STATUS_READY);
    /* Out of device memory: a range error, nothing done. */
    assert_int_equal(run1(fn, 256 * MiB - 4096, 0, 8192, 0), ACCEL_DESC_DONE | ACCEL_ERR_RANGE);
    assert_int_equal(run1(fn, 0, 0, 0, 0), ACCEL_DESC_DONE | ACCEL_ERR_RANGE);
    assert_int_equal(run1(fn, 0, 0, 4, 0xe), ACCEL_DESC_DONE | ACCEL_ERR_OPCODE);
    assert_int_equal(rd(fn, ACCEL_REG_ERRORS), 3);
}

static void test_bus_master_disabled(void **state)
{
    (void)state;
    uint32_t fn = T.acc0;
    cmd(fn, FAB_CMD_MEM);
    dev_reset(fn);
    const uint64_t len = 64 * 1024;
    fill(dmem(fn, 0, len), len, 3);
    uint8_t *ram = fab_ram(T.f, T.a, RAM_AT + 32 * MiB, len);
    memset(ram, 0, len);
    assert_int_equal(run1(fn, 0, RAM_AT + 32 * MiB, (uint32_t)len, ACCEL_DESC_DST_BUS),
                     ACCEL_DESC_DONE | ACCEL_ERR_BUS_MASTER);
    check_zero(ram, len);
    /* A DMA read into device memory fails the same way and leaves the memory alone. */
    uint8_t *dst = dmem(fn, 8 * MiB, len);
    memset(dst, 0x5a, len);
    assert_int_equal(run1(fn, RAM_AT, 8 * MiB, (uint32_t)len, ACCEL_DESC_SRC_BUS),
                     ACCEL_DESC_DONE | ACCEL_ERR_BUS_MASTER);
    for (uint64_t i = 0; i < len; i++)
        assert_int_equal(dst[i], 0x5a);
    assert_int_equal(rd(fn, ACCEL_REG_ERRORS), 2);
    assert_int_equal(rd(fn, ACCEL_REG_LAST_ERR), ACCEL_ERR_BUS_MASTER);
    assert_int_equal(rd(fn, ACCEL_REG_LAST_IDX), 1);
    assert_true(rd(fn, ACCEL_REG_STATUS) & ACCEL_STATUS_ERROR);
    /* Local copies need no bus mastering. */
    assert_int_equal(run1(fn, 0, 8 * MiB, (uint32_t)len, 0), ACCEL_DESC_DONE);
    /* Bus mastering back on: the same copy works. */
    cmd(fn, FAB_CMD_MEM | FAB_CMD_BME);
    assert_int_equal(run1(fn, 0, RAM_AT + 32 * MiB, (uint32_t)len, ACCEL_DESC_DST_BUS),
                     ACCEL_DESC_DONE);
    assert_memory_equal(ram, dmem(fn, 0, len), len);
    /* Reset clears the error state. */
    dev_reset(fn);
    assert_int_equal(rd(fn, ACCEL_REG_STATUS), ACCEL_STATUS_READY);
    assert_int_equal(rd(fn, ACCEL_REG_ERRORS), 0);
}

static void wait_seq(uint32_t host, uint32_t hv, uint32_t want)
{
    uint64_t until = ms_now() + 10000;
    while ((int32_t)(msi_seq(host, hv) - want) < 0) {
        if (ms_now() > until)
            fail_msg("host vector %u: seq %u, expected %u", hv, msi_seq(host, hv), want);
        usleep(50);
    }
}

static void test_msix(void **state)
{
    (void)state;
    uint32_t fn = T.acc0;
    cmd(fn, FAB_CMD_MEM | FAB_CMD_BME);
    dev_reset(fn);
    for (uint32_t v = 0; v < ACCEL_MSIX_VECTORS; v++)
        msix_entry(fn, v, HOST_VEC + v, false);
    /* MSI-X disabled: completion without an interrupt. */
    uint32_t s0 = msi_seq(T.a, HOST_VEC);
    assert_int_equal(run1(fn, 0, 4096, 64, ACCEL_DESC_INTR), ACCEL_DESC_DONE);
    usleep(10000);
    assert_int_equal(msi_seq(T.a, HOST_VEC), s0);
    msix_enable(fn);
    /* Enabled: the descriptor's completion raises vector 0 -> host vector HOST_VEC. */
    assert_int_equal(run1(fn, 0, 4096, 64, ACCEL_DESC_INTR), ACCEL_DESC_DONE);
    wait_seq(T.a, HOST_VEC, s0 + 1);
    /* No INTR flag, no interrupt. */
    assert_int_equal(run1(fn, 0, 4096, 64, 0), ACCEL_DESC_DONE);
    usleep(10000);
    assert_int_equal(msi_seq(T.a, HOST_VEC), s0 + 1);
    /* The VECTOR register selects the vector. */
    uint32_t s2 = msi_seq(T.a, HOST_VEC + 2);
    wr(fn, ACCEL_REG_VECTOR, 2);
    assert_int_equal(run1(fn, 0, 4096, 64, ACCEL_DESC_INTR), ACCEL_DESC_DONE);
    wait_seq(T.a, HOST_VEC + 2, s2 + 1);
    assert_int_equal(msi_seq(T.a, HOST_VEC), s0 + 1);
    /* Masked vector 1: the pending bit is set, no interrupt. */
    msix_entry(fn, 1, HOST_VEC + 1, true);
    wr(fn, ACCEL_REG_VECTOR, 1);
    uint32_t s1 = msi_seq(T.a, HOST_VEC + 1);
    assert_int_equal(run1(fn, 0, 4096, 64, ACCEL_DESC_INTR), ACCEL_DESC_DONE);
    _Atomic uint64_t *pba = (_Atomic uint64_t *)(void *)(regs(fn) + ACCEL_MSIX_PBA);
    uint64_t until = ms_now() + 10000; /* the message follows the COMPLETED update */
    while (!(atomic_load(pba) & 0x2) && ms_now() < until)
        usleep(50);
    assert_int_equal(atomic_load(pba) & 0xf, 0x2);
    usleep(10000);
    assert_int_equal(msi_seq(T.a, HOST_VEC + 1), s1);
    /* Unmasking delivers the pending message and clears the bit. */
    msix_entry(fn, 1, HOST_VEC + 1, false);
    wait_seq(T.a, HOST_VEC + 1, s1 + 1);
    until = ms_now() + 10000;
    while ((atomic_load(pba) & 0x2) && ms_now() < until)
        usleep(50);
    assert_int_equal(atomic_load(pba) & 0xf, 0);
    /* A failed descriptor interrupts too (the driver learns of the error). */
    assert_int_equal(run1(fn, 256 * MiB, 0, 64, ACCEL_DESC_INTR), ACCEL_DESC_DONE | ACCEL_ERR_RANGE);
    wait_seq(T.a, HOST_VEC + 1, s1 + 2);
    wr(fn, ACCEL_REG_VECTOR, 0);
}

/* Peer to peer across hosts (smartio-tocs-2021 §7.1.5): accel0 in a writes into accel1's
 * memory in c through a's NTB window, and accel1 back into accel0's through c's window. */
static void test_p2p_across_hosts(void **state)
{
    (void)state;
    cmd(T.acc0, FAB_CMD_MEM | FAB_CMD_BME);
    cmd(T.acc1, FAB_CMD_MEM | FAB_CMD_BME);
    dev_reset(T.acc0);
    dev_reset(T.acc1);
    const uint64_t len = 512 * 1024 + 7, at1 = 40 * MiB + 0x1234, at0 = 72 * MiB + 0x10;
    uint64_t w01 = window_to(T.ad_a, T.acc1, at1);
    uint64_t w10 = window_to(T.ad_c, T.acc0, at0);
    fill(dmem(T.acc0, 0, len), len, 4);
    memset(dmem(T.acc1, at1, len), 0, len);
    assert_int_equal(run1(T.acc0, 0, w01, (uint32_t)len, ACCEL_DESC_DST_BUS), ACCEL_DESC_DONE);
    assert_memory_equal(dmem(T.acc1, at1, len), dmem(T.acc0, 0, len), len);
    fill(dmem(T.acc1, 0, len), len, 5);
    memset(dmem(T.acc0, at0, len), 0, len);
    assert_int_equal(run1(T.acc1, 0, w10, (uint32_t)len, ACCEL_DESC_DST_BUS), ACCEL_DESC_DONE);
    assert_memory_equal(dmem(T.acc0, at0, len), dmem(T.acc1, 0, len), len);
    /* Reading through a window needs the device's requester ID in the egress adapter's
     * table: without it the read fails (and writes nothing), with it the data arrives. */
    uint8_t *dst = dmem(T.acc0, 100 * MiB, len);
    memset(dst, 0x5a, len);
    assert_int_equal(run1(T.acc0, w01, 100 * MiB, (uint32_t)len, ACCEL_DESC_SRC_BUS),
                     ACCEL_DESC_DONE | ACCEL_ERR_ACCESS);
    for (uint64_t i = 0; i < len; i++)
        assert_int_equal(dst[i], 0x5a);
    assert_int_equal(fab_rid_add(T.f, T.ad_a, fab_func(T.f, T.acc0)->rid, getpid()), 0);
    assert_int_equal(run1(T.acc0, w01, 100 * MiB, (uint32_t)len, ACCEL_DESC_SRC_BUS),
                     ACCEL_DESC_DONE);
    assert_memory_equal(dst, dmem(T.acc1, at1, len), len);
    assert_int_equal(fab_rid_remove(T.f, T.ad_a, fab_func(T.f, T.acc0)->rid), 0);
}

/* The ping-pong program (smartio-tocs-2021 §7.1.4, Fig. 25) with no CPU in the loop: each
 * device's ring alternates "write the counter into the peer's memory" and "wait for the
 * peer's counter in my memory". */
static void test_p2p_ping_pong(void **state)
{
    (void)state;
    dev_reset(T.acc0);
    dev_reset(T.acc1);
    const uint32_t rounds = 100;
    const uint64_t flag = 16 * MiB, vals = 17 * MiB; /* same offsets in both devices */
    uint64_t ping = window_to(T.ad_a, T.acc1, flag), pong = window_to(T.ad_c, T.acc0, flag);
    uint32_t *v0 = (uint32_t *)dmem(T.acc0, vals, 4 * (rounds + 1));
    uint32_t *v1 = (uint32_t *)dmem(T.acc1, vals, 4 * (rounds + 1));
    for (uint32_t i = 0; i <= rounds; i++)
        v0[i] = v1[i] = i;
    *(uint32_t *)dmem(T.acc0, flag, 4) = 0;
    *(uint32_t *)dmem(T.acc1, flag, 4) = 0;
    uint32_t h0 = 0, h1 = 0;
    for (uint32_t i = 1; i <= rounds; i++) {
        queue(T.acc0, &h0, vals + 4 * i, ping, 4, ACCEL_OP_COPY | ACCEL_DESC_DST_BUS, 0);
        queue(T.acc0, &h0, flag, 0, 0, ACCEL_OP_WAIT, i);
        queue(T.acc1, &h1, flag, 0, 0, ACCEL_OP_WAIT, i);
        queue(T.acc1, &h1, vals + 4 * i, pong, 4, ACCEL_OP_COPY | ACCEL_DESC_DST_BUS, 0);
    }
    wr(T.acc1, ACCEL_REG_HEAD, h1); /* the pong side waits first */
    uint64_t until = ms_now() + 10000;
    while (!(rd(T.acc1, ACCEL_REG_STATUS) & ACCEL_STATUS_WAITING) && ms_now() < until)
        usleep(50);
    assert_true(rd(T.acc1, ACCEL_REG_STATUS) & ACCEL_STATUS_WAITING);
    assert_int_equal(rd(T.acc1, ACCEL_REG_COMPLETED), 0);
    wr(T.acc0, ACCEL_REG_HEAD, h0);
    wait_completed(T.acc0, 2 * rounds);
    wait_completed(T.acc1, 2 * rounds);
    for (uint32_t i = 0; i < 2 * rounds; i++) {
        assert_int_equal(desc_status(T.acc0, i), ACCEL_DESC_DONE);
        assert_int_equal(desc_status(T.acc1, i), ACCEL_DESC_DONE);
    }
    assert_int_equal(*(uint32_t *)dmem(T.acc0, flag, 4), rounds);
    assert_int_equal(*(uint32_t *)dmem(T.acc1, flag, 4), rounds);
    assert_false(rd(T.acc0, ACCEL_REG_STATUS) & (ACCEL_STATUS_WAITING | ACCEL_STATUS_BUSY));
    /* A wait on a word the CPU stores (no notification) still completes. */
    uint32_t head = rd(T.acc0, ACCEL_REG_HEAD), done = rd(T.acc0, ACCEL_REG_COMPLETED);
    uint32_t idx = queue(T.acc0, &head, flag, 0, 0, ACCEL_OP_WAIT, rounds + 1);
    wr(T.acc0, ACCEL_REG_HEAD, head);
    usleep(5000);
    assert_int_equal(rd(T.acc0, ACCEL_REG_COMPLETED), done);
    __atomic_store_n((uint32_t *)dmem(T.acc0, flag, 4), rounds + 1, __ATOMIC_RELEASE);
    wait_completed(T.acc0, done + 1);
    assert_int_equal(desc_status(T.acc0, idx), ACCEL_DESC_DONE);
}

static void test_unmapped_bus_address(void **state)
{
    (void)state;
    uint32_t fn = T.acc0;
    dev_reset(fn);
    const uint64_t len = 8192;
    fill(dmem(fn, 0, len), len, 6);
    /* A window entry claimed but never programmed: unsupported request, nothing lands. */
    struct fab_adapter *A = fab_adapter(T.f, T.ad_a);
    int idx = fab_lut_alloc(T.f, T.ad_a, getpid(), 0);
    assert_true(idx >= 0);
    uint64_t dead = A->bar_addr + (uint64_t)idx * A->lut_size;
    uint64_t faults = atomic_load(&fab_host(T.f, T.a)->fault_count);
    assert_int_equal(run1(fn, 0, dead, (uint32_t)len, ACCEL_DESC_DST_BUS),
                     ACCEL_DESC_DONE | ACCEL_ERR_ABORT);
    /* An address nothing decodes, in either direction. */
    uint64_t nowhere = FAB_DEVICE_BASE - MiB;
    assert_int_equal(run1(fn, 0, nowhere, (uint32_t)len, ACCEL_DESC_DST_BUS),
                     ACCEL_DESC_DONE | ACCEL_ERR_ABORT);
    uint8_t *dst = dmem(fn, 32 * MiB, len);
    memset(dst, 0x5a, len);
    assert_int_equal(run1(fn, nowhere, 32 * MiB, (uint32_t)len, ACCEL_DESC_SRC_BUS),
                     ACCEL_DESC_DONE | ACCEL_ERR_ABORT);
    for (uint64_t i = 0; i < len; i++)
        assert_int_equal(dst[i], 0x5a);
    /* A copy that starts in RAM and runs off its end: nothing is written either. */
    uint64_t ram_end = fab_host(T.f, T.a)->ram_size;
    assert_int_equal(run1(fn, 0, ram_end - 4096, (uint32_t)len, ACCEL_DESC_DST_BUS),
                     ACCEL_DESC_DONE | ACCEL_ERR_ABORT);
    check_zero(fab_ram(T.f, T.a, ram_end - 4096, 4096), 4096);
    assert_int_equal(run1(fn, ram_end - 4096, 32 * MiB, (uint32_t)len, ACCEL_DESC_SRC_BUS),
                     ACCEL_DESC_DONE | ACCEL_ERR_ABORT);
    for (uint64_t i = 0; i < len; i++)
        assert_int_equal(dst[i], 0x5a);
    assert_true(atomic_load(&fab_host(T.f, T.a)->fault_count) > faults);
    assert_int_equal(rd(fn, ACCEL_REG_ERRORS), 5);
    assert_int_equal(rd(fn, ACCEL_REG_LAST_ERR), ACCEL_ERR_ABORT);
    /* The engine carries on after errors. */
    assert_int_equal(run1(fn, 0, RAM_AT, (uint32_t)len, ACCEL_DESC_DST_BUS), ACCEL_DESC_DONE);
    assert_memory_equal(fab_ram(T.f, T.a, RAM_AT, len), dmem(fn, 0, len), len);
    assert_int_equal(fab_lut_clear(T.f, T.ad_a, (uint32_t)idx, getpid()), 0);
}

static void test_many_in_flight(void **state)
{
    (void)state;
    uint32_t fn = T.acc0;
    cmd(fn, FAB_CMD_MEM | FAB_CMD_BME);
    dev_reset(fn);
    msix_entry(fn, 0, HOST_VEC, false);
    const uint32_t per = 200, chunk = 4096;
    uint8_t *ram = fab_ram(T.f, T.a, RAM_AT, (uint64_t)per * chunk);
    uint32_t head = 0, done = 0;
    /* Three batches of 200: the ring (256) wraps; one interrupt per batch, on its last. */
    for (uint32_t batch = 0; batch < 3; batch++) {
        fill(dmem(fn, 0, (uint64_t)per * chunk), (uint64_t)per * chunk, 10 + batch);
        memset(ram, 0, (uint64_t)per * chunk);
        uint32_t s = msi_seq(T.a, HOST_VEC), first = head;
        for (uint32_t i = 0; i < per; i++)
            queue(fn, &head, (uint64_t)i * chunk, RAM_AT + (uint64_t)(per - 1 - i) * chunk, chunk,
                  ACCEL_DESC_DST_BUS | (i == per - 1 ? ACCEL_DESC_INTR : 0), 0);
        wr(fn, ACCEL_REG_HEAD, head);
        wait_completed(fn, done += per);
        wait_seq(T.a, HOST_VEC, s + 1);
        assert_int_equal(msi_seq(T.a, HOST_VEC), s + 1);
        assert_int_equal(rd(fn, ACCEL_REG_TAIL), head);
        for (uint32_t i = first; i < head; i++)
            assert_int_equal(desc_status(fn, i), ACCEL_DESC_DONE);
        for (uint32_t i = 0; i < per; i++)
            assert_memory_equal(ram + (uint64_t)(per - 1 - i) * chunk, dmem(fn, (uint64_t)i * chunk, chunk),
                                chunk);
    }
    assert_int_equal(rd(fn, ACCEL_REG_ERRORS), 0);
    /* More than a ring's worth submitted at once: the engine halts until reset. */
    wr(fn, ACCEL_REG_HEAD, head + ACCEL_RING_ENTRIES + 1);
    uint64_t until = ms_now() + 10000;
    while (!(rd(fn, ACCEL_REG_STATUS) & ACCEL_STATUS_HALTED) && ms_now() < until)
        usleep(50);
    assert_true(rd(fn, ACCEL_REG_STATUS) & ACCEL_STATUS_HALTED);
    assert_int_equal(rd(fn, ACCEL_REG_LAST_ERR), ACCEL_ERR_RING);
    assert_int_equal(rd(fn, ACCEL_REG_TAIL), head);
    dev_reset(fn);
    assert_int_equal(rd(fn, ACCEL_REG_STATUS), ACCEL_STATUS_READY);
    assert_int_equal(run1(fn, 0, RAM_AT, 64, ACCEL_DESC_DST_BUS), ACCEL_DESC_DONE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reset_values),
        cmocka_unit_test(test_config_space),
        cmocka_unit_test(test_copy_ram_roundtrip),
        cmocka_unit_test(test_bus_master_disabled),
        cmocka_unit_test(test_msix),
        cmocka_unit_test(test_p2p_across_hosts),
        cmocka_unit_test(test_p2p_ping_pong),
        cmocka_unit_test(test_unmapped_bus_address),
        cmocka_unit_test(test_many_in_flight),
    };
    return cmocka_run_group_tests(tests, group_setup, fx_teardown);
}
