/*
 * SmartIO: the device registry, borrowing (exclusive, shared, leases), BARs through the NTB,
 * memory mapped for a device in the three places smartio §4.4 names (the borrower, the
 * lender, another lender's device), MSI-X routed to the borrower, IOMMU isolation on the
 * lender, and mappings at an I/O address the borrower chooses (a VM's IOVA = GPA). Where a test needs the device to act, the parent performs the device's DMA or MSI-X
 * through the fabric model as the device's own requester (what the device models do). Last, the
 * CPU a driver's register writes publish for the model's doorbell wait.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "fixture.h"
#include "fabric.h"
#include "ntblend/smartio.h"

static struct fx FX;
static const struct fx_opts FX_OPTS = {
    .topo = "examples/topologies/smartio3.ini",
    .attach = fx_attach
};
static int setup(void **state) { return fx_setup(state, &FX, "sio", &FX_OPTS); }
/* The fabric of the tests that need the lenders' IOMMUs on. */
static const struct fx_opts IOMMU_OPTS = {
    .topo = "tests/system/topologies/smartio3-iommu.ini",
    .attach = fx_attach
};
#define NODE_A 4u
#define NODE_B 8u
#define NODE_C 12u

/* On a lender: make its devices available (or not), then wait for the parent. */
static void lender(void *arg)
{
    bool on = arg != NULL;
    struct sio_info info[8];
    int n = sio_list(info, 8);
    CHECK_EQ(n, 3);
    uint32_t node;
    CHECK_EQ(seg_local_node_id(&node), 0);
    for (int i = 0; i < n; i++) {
        if (info[i].node_id == node)
            CHECK_EQ(sio_set_available(info[i].id, on), 0);
        else
            CHECK_EQ(sio_set_available(info[i].id, on), -EREMOTE);
    }
    h_put(1);
}

static void make_available(const char *host, bool on)
{
    struct h_proc p = h_spawn(FX.name, host, lender, on ? (void *)1 : NULL);
    h_from(&p);
    assert_int_equal(h_join(&p), 0);
}

static void borrower(void *arg)
{
    struct sio_info info[8];
    CHECK_EQ(sio_list(info, 8), 3);
    int nvme = sio_find("nvme0"), acc = sio_find("accel0");
    CHECK(nvme >= 0 && acc >= 0);
    CHECK_EQ(sio_find("nope"), -ENOENT);
    CHECK_EQ(info[nvme].class_code, 0x010802);
    CHECK_EQ(info[nvme].node_id, NODE_A);
    CHECK(info[nvme].available);
    sio_dev_t *d, *again;
    CHECK_EQ(sio_borrow((uint32_t)acc, SIO_EXCLUSIVE, &d), 0);
    CHECK_EQ(sio_borrow((uint32_t)acc, SIO_SHARED, &again), -EALREADY);
    CHECK_EQ(sio_borrow(999, SIO_SHARED, &again), -ENODEV);
    h_put(1);
    h_get(); /* c tried while exclusive */
    CHECK_EQ(sio_share(d), 0);
    h_put(1);
    h_get(); /* c borrowed it shared */
    sio_list(info, 8);
    CHECK_EQ(info[acc].borrowers, 2);
    CHECK(!info[acc].exclusive);
    CHECK_EQ(sio_return(d), 0);
    h_put(1);
}

static void refused(void *arg)
{
    sio_dev_t *d;
    CHECK_EQ(sio_borrow((uint32_t)sio_find("accel1"), SIO_SHARED, &d), -EACCES);
}

static void again(void *arg)
{
    sio_dev_t *d;
    CHECK_EQ(sio_borrow((uint32_t)sio_find("accel0"), SIO_EXCLUSIVE, &d), 0);
    CHECK_EQ(sio_return(d), 0);
}

static void other(void *arg)
{
    int acc = sio_find("accel0");
    sio_dev_t *d;
    h_get();
    CHECK_EQ(sio_borrow((uint32_t)acc, SIO_SHARED, &d), -EBUSY); /* held exclusively */
    h_put(1);
    h_get();
    CHECK_EQ(sio_borrow((uint32_t)acc, SIO_SHARED, &d), 0);
    CHECK_EQ(sio_borrow((uint32_t)acc, SIO_EXCLUSIVE, &d), -EALREADY);
    h_put(1);
    h_get();
    CHECK_EQ(sio_return(d), 0);
    h_put(1);
}

static void test_registry_and_borrowing(void **state)
{
    make_available("a", true);
    make_available("c", true);
    struct h_proc p;
    /* In the child: the registry from a borrower's point of view, and the borrow rules. */
    p = h_spawn(FX.name, "b", borrower, NULL);
    struct h_proc q = h_spawn(FX.name, "c", other, NULL);
    h_from(&p);
    h_to(&q, 1);
    h_from(&q);
    h_to(&p, 1);
    h_from(&p);
    h_to(&q, 1);
    h_from(&q);
    h_to(&p, 1);
    h_from(&p);
    h_to(&q, 1);
    h_from(&q);
    assert_int_equal(h_join(&p), 0);
    assert_int_equal(h_join(&q), 0);
    uint32_t acc = (uint32_t)fab_func_by_name(FX.f, "accel0");
    assert_int_equal(atomic_load(&fab_func(FX.f, acc)->lend_borrowers[0]), 0);
    /* Withdrawn: nobody may borrow. */
    make_available("c", false);
    p = h_spawn(FX.name, "b", refused, NULL);
    assert_int_equal(h_join(&p), 0);
    make_available("c", true);
}

/* ---------------------------------------------------------------- BARs and device memory */

struct where {
    uint64_t io_b, io_a, io_c; /* I/O addresses for accel0: b's segment, a's segment, accel1 */
    uint64_t pat_b, pat_a;
};

static void bar_and_map_user(void *arg)
{
    sio_dev_t *acc, *acc1;
    CHECK_EQ(sio_borrow((uint32_t)sio_find("accel0"), SIO_EXCLUSIVE, &acc), 0);
    CHECK_EQ(sio_borrow((uint32_t)sio_find("accel1"), SIO_SHARED, &acc1), 0);
    CHECK_EQ(sio_enable(acc), 0);
    CHECK_EQ(sio_cfg_read(acc, 0x04, 2) & FAB_CMD_BME, FAB_CMD_BME);
    /* BAR2 (device memory) through the NTB: stores land in the device. */
    size_t size;
    sio_bar_t *bar;
    volatile uint8_t *mem = sio_map_bar(acc, 2, &size, &bar);
    CHECK(mem);
    CHECK_EQ(size, 256u << 20);
    for (int i = 0; i < 4096; i++)
        mem[i] = (uint8_t)(i * 5);
    sio_bar_t *regs;
    CHECK(sio_map_bar(acc, 0, NULL, &regs));
    sio_write32(regs, 0x100, 0xabcd1234); /* a register write the device sees */
    CHECK_EQ(sio_read32(regs, 0x100), 0xabcd1234);
    /* Memory for the device: in the borrower (here), in the lender, in a third host's
     * device. */
    seg_desc_t *sd;
    CHECK_EQ(seg_open(&sd), 0);
    seg_local_t *mine;
    CHECK_EQ(seg_create(sd, &mine, 0, 65536), 0);
    seg_map_t *mm;
    volatile uint8_t *mp = seg_map_local(mine, 0, 0, 0, &mm);
    CHECK(mp);
    struct where w = { 0 };
    sio_dma_t *m1, *m2, *m3;
    CHECK_EQ(sio_map_local(acc, mine, 0, 65536, &w.io_b, &m1), 0);
    h_put(1);
    h_get(); /* a's owner process exported segment 9 */
    seg_remote_t *theirs;
    CHECK_EQ(seg_connect(sd, &theirs, NODE_A, 9, 0, 5000), 0);
    CHECK_EQ(sio_map_remote(acc, theirs, 0, 65536, &w.io_a, &m2), 0);
    CHECK_EQ(sio_map_peer_bar(acc, acc1, 2, &w.io_c, &m3), 0);
    h_put(w.io_b);
    h_put(w.io_a);
    h_put(w.io_c);
    h_get(); /* the device wrote all three */
    for (int i = 0; i < 256; i++)
        CHECK_EQ(mp[i], (uint8_t)(i ^ 0x5a));
    /* MSI-X vector 1 of the device, to this host's vector 77. */
    uint32_t seen = atomic_load(&fab_host(FX.f, 0)->msi_seq[0]); /* any start value works */
    seen = 0;
    CHECK_EQ(sio_enable_vector(acc, 1, 77), 0);
    uint32_t cur = 0;
    sio_wait_vector(77, &cur, 0); /* take the current count */
    h_put(1);
    CHECK_EQ(sio_wait_vector(77, &cur, 5000), 0);
    (void)seen;
    CHECK_EQ(sio_unmap(m1), 0);
    CHECK_EQ(sio_unmap(m2), 0);
    CHECK_EQ(sio_unmap(m3), 0);
    seg_unmap(mm);
    seg_remove(mine);
    seg_disconnect(theirs);
    sio_unmap_bar(bar);
    sio_unmap_bar(regs);
    CHECK_EQ(sio_return(acc1), 0);
    CHECK_EQ(sio_return(acc), 0);
    seg_close(sd);
    h_put(1);
}

static void seg_owner(void *arg)
{
    seg_desc_t *sd;
    CHECK_EQ(seg_open(&sd), 0);
    seg_local_t *s;
    CHECK_EQ(seg_create(sd, &s, 9, 65536), 0);
    CHECK_EQ(seg_prepare(s, 0), 0);
    CHECK_EQ(seg_set_available(s, 0), 0);
    seg_map_t *m;
    volatile uint8_t *p = seg_map_local(s, 0, 0, 0, &m);
    h_put(1);
    h_get(); /* the device wrote */
    for (int i = 0; i < 256; i++)
        CHECK_EQ(p[i], (uint8_t)(i ^ 0xa5));
    h_put(1);
    h_get();
    seg_unmap(m);
    seg_close(sd);
}

static void test_bars_and_memory_for_the_device(void **state)
{
    uint32_t acc = (uint32_t)fab_func_by_name(FX.f, "accel0"), acc1 = (uint32_t)fab_func_by_name(FX.f, "accel1");
    struct fab_function *A = fab_func(FX.f, acc), *C = fab_func(FX.f, acc1);
    struct h_proc u = h_spawn(FX.name, "b", bar_and_map_user, NULL);
    h_from(&u);
    struct h_proc o = h_spawn(FX.name, "a", seg_owner, NULL);
    h_from(&o);
    h_to(&u, 1);
    uint64_t io_b = h_from(&u), io_a = h_from(&u), io_c = h_from(&u);
    /* What the borrower stored through its BAR mapping is in the device. */
    uint8_t *dm = fab_bar_mem(FX.f, acc, A->bar[2].off, 4096);
    assert_int_equal(dm[7], (uint8_t)35);
    assert_true(atomic_load(&A->reg_seq) > 0);
    /* The device writes to each I/O address it was given (bus master enabled by the borrower). */
    uint8_t pb[256], pa[256], pc[256];
    for (int i = 0; i < 256; i++) {
        pb[i] = (uint8_t)(i ^ 0x5a);
        pa[i] = (uint8_t)(i ^ 0xa5);
        pc[i] = (uint8_t)(i ^ 0x3c);
    }
    assert_int_equal(fab_fn_dma_write(FX.f, acc, io_b, pb, sizeof pb), 0); /* through a's NTB to b */
    assert_int_equal(fab_fn_dma_write(FX.f, acc, io_a, pa, sizeof pa), 0); /* local to the lender */
    assert_int_equal(fab_fn_dma_write(FX.f, acc, io_c, pc, sizeof pc), 0); /* to c's device */
    assert_memory_equal(fab_bar_mem(FX.f, acc1, C->bar[2].off, sizeof pc), pc, sizeof pc);
    /* ... and reads back through the NTB (its requester ID is in the lender's table). */
    uint8_t back[256];
    assert_int_equal(fab_fn_dma_read(FX.f, acc, io_c, back, sizeof back), 0);
    assert_memory_equal(back, pc, sizeof pc);
    h_to(&o, 1);
    h_from(&o);
    h_to(&u, 1);
    h_from(&u);
    /* MSI-X: the device raises vector 1; it arrives at b's vector 77. */
    assert_int_equal(fab_fn_msix(FX.f, acc, 1), 0);
    h_from(&u);
    h_to(&o, 1);
    assert_int_equal(h_join(&u), 0);
    assert_int_equal(h_join(&o), 0);
    /* Returned: the lender removed its mappings; the device was reset (it was exclusive). */
    assert_int_equal(fab_cfg_read(FX.f, acc, 0x04, 2), 0);
}

/* ---------------------------------------------------------------- leases */

static void crashing_borrower(void *arg)
{
    sio_dev_t *d;
    CHECK_EQ(sio_borrow((uint32_t)sio_find("accel0"), SIO_EXCLUSIVE, &d), 0);
    CHECK_EQ(sio_enable(d), 0);
    h_put(1);
    pause();
}

static void test_lease_reclaim_after_host_kill(void **state)
{
    uint32_t acc = (uint32_t)fab_func_by_name(FX.f, "accel0");
    struct fab_function *A = fab_func(FX.f, acc);
    uint32_t hb = (uint32_t)fab_host_by_name(FX.f, "b");
    uint32_t resets = atomic_load(&A->reset_gen);
    struct h_proc p = h_spawn(FX.name, "b", crashing_borrower, NULL);
    h_from(&p);
    assert_true(atomic_load(&A->lend_borrowers[0]) & (1ull << hb));
    assert_int_equal(h_cli(FX.name, "host kill b >/dev/null"), 0);
    assert_int_equal(h_join(&p), 128 + SIGKILL);
    /* The lender notices the borrower's host is gone, resets the device and takes it back. */
    for (int i = 0; i < 200 && (atomic_load(&A->lend_borrowers[0]) ||
                                atomic_load(&A->reset_gen) == resets); i++)
        usleep(10000);
    assert_int_equal(atomic_load(&A->lend_borrowers[0]), 0);
    assert_true(atomic_load(&A->reset_gen) > resets);
    assert_int_equal(fab_cfg_read(FX.f, acc, 0x04, 2), 0);
    assert_int_equal(h_cli(FX.name, "host start b >/dev/null"), 0);
    p = h_spawn(FX.name, "c", again, NULL);
    assert_int_equal(h_join(&p), 0);
}

/* ---------------------------------------------------------------- placement by hints */

static void placing_user(void *arg)
{
    sio_dev_t *acc;
    CHECK_EQ(sio_borrow((uint32_t)sio_find("accel0"), SIO_EXCLUSIVE, &acc), 0);
    CHECK_EQ(sio_enable(acc), 0);
    volatile uint8_t *sq, *cq;
    uint64_t sq_io, cq_io;
    sio_mem_t *msq, *mcq, *bad;
    /* An SQ: the device reads it, we write it -> near the device (the lender, node 4). */
    CHECK_EQ(sio_alloc(acc, 65536, SIO_HINT_DEVICE_READ | SIO_HINT_HOST_WRITE, (volatile void **)&sq,
                       &sq_io, &msq), 0);
    CHECK_EQ(sio_mem_node(msq), NODE_A);
    /* A CQ: the device writes it, we poll it -> here (node 8). */
    CHECK_EQ(sio_alloc(acc, 65536, SIO_HINT_DEVICE_WRITE | SIO_HINT_HOST_READ, (volatile void **)&cq,
                       &cq_io, &mcq), 0);
    CHECK_EQ(sio_mem_node(mcq), NODE_B);
    CHECK_EQ(sio_alloc(acc, 4096, 0x100, (volatile void **)&cq, &cq_io, &bad), -EINVAL);
    for (int i = 0; i < 64; i++)
        sq[i] = (uint8_t)(i + 1);
    h_put(sq_io);
    h_put(cq_io);
    h_get(); /* the device read the SQ and wrote the CQ */
    for (int i = 0; i < 64; i++)
        CHECK_EQ(cq[i], (uint8_t)(2 * i + 2));
    CHECK_EQ(sio_free(msq), 0);
    CHECK_EQ(sio_free(mcq), 0);
    CHECK_EQ(sio_return(acc), 0);
    h_put(1);
}

static void test_placement_by_access_hints(void **state)
{
    make_available("a", true);
    uint32_t acc = (uint32_t)fab_func_by_name(FX.f, "accel0");
    struct h_proc u = h_spawn(FX.name, "b", placing_user, NULL);
    uint64_t sq_io = h_from(&u), cq_io = h_from(&u);
    uint8_t cmd[64], done[64];
    /* The device fetches the SQ (a read) and posts to the CQ (a write), as an NVMe would. */
    assert_int_equal(fab_fn_dma_read(FX.f, acc, sq_io, cmd, sizeof cmd), 0);
    for (int i = 0; i < 64; i++) {
        assert_int_equal(cmd[i], (uint8_t)(i + 1));
        done[i] = (uint8_t)(2 * cmd[i]);
    }
    /* The SQ is in the lender's own RAM: no NTB in the device's read path. */
    struct fab_target t;
    assert_int_equal(fab_resolve(FX.f, fab_func(FX.f, acc)->host, fab_func(FX.f, acc)->rid, sq_io, 64, false, &t), 0);
    assert_int_equal(t.ntbs, 0);
    assert_int_equal(fab_fn_dma_write(FX.f, acc, cq_io, done, sizeof done), 0);
    assert_int_equal(fab_resolve(FX.f, fab_func(FX.f, acc)->host, fab_func(FX.f, acc)->rid, cq_io, 64, true, &t), 0);
    assert_int_equal(t.ntbs, 1);
    h_to(&u, 1);
    h_from(&u);
    assert_int_equal(h_join(&u), 0);
}

/* ---------------------------------------------------------------- limits */

static void limit_user(void *arg)
{
    sio_dev_t *acc;
    CHECK_EQ(sio_borrow((uint32_t)sio_find("accel0"), SIO_EXCLUSIVE, &acc), 0);
    /* Each mapping of memory in b takes LUT entries on the lender's adapter: 256 of 4 MiB. */
    static sio_dma_t *maps[300];
    uint64_t io;
    int n = 0, rc = 0;
    while (n < 300 && (rc = sio_map_addr(acc, NODE_B, (uint64_t)(n % 100) << 22, 4096, &io, &maps[n])) == 0)
        n++;
    CHECK_EQ(rc, -ENOSPC);
    CHECK(n > 200 && n < 256); /* less the entries others hold (mailboxes) */
    CHECK_EQ(sio_unmap(maps[--n]), 0);
    CHECK_EQ(sio_map_addr(acc, NODE_B, 0, 4096, &io, &maps[n++]), 0); /* one freed, one taken */
    while (n > 0)
        CHECK_EQ(sio_unmap(maps[--n]), 0);
    CHECK_EQ(sio_return(acc), 0);
}

static void test_mapping_limits(void **state)
{
    make_available("a", true);
    struct h_proc u = h_spawn(FX.name, "b", limit_user, NULL);
    assert_int_equal(h_join(&u), 0);
    /* Everything it took is back. */
    uint32_t ad = fab_host(FX.f, (uint32_t)fab_host_by_name(FX.f, "a"))->adapter_first;
    assert_true(fab_lut_used(FX.f, ad) < 8);
}

/* ---------------------------------------------------------------- IOMMU isolation */

static void iso_user(void *arg)
{
    sio_dev_t *acc;
    CHECK_EQ(sio_borrow((uint32_t)sio_find("accel0"), SIO_EXCLUSIVE, &acc), 0);
    CHECK_EQ(sio_enable(acc), 0);
    /* The lender's IOMMU lets our loads and stores reach the borrowed device's BARs. */
    sio_bar_t *bar;
    volatile uint32_t *mem = sio_map_bar(acc, 2, NULL, &bar);
    CHECK(mem);
    mem[5] = 0x600df00d;
    CHECK_EQ(mem[5], 0x600df00d);
    sio_unmap_bar(bar);
    seg_desc_t *sd;
    CHECK_EQ(seg_open(&sd), 0);
    seg_local_t *s;
    CHECK_EQ(seg_create(sd, &s, 0, 65536), 0);
    uint64_t io;
    sio_dma_t *m;
    CHECK_EQ(sio_map_local(acc, s, 0, 65536, &io, &m), 0);
    h_put(io);
    h_get();
    CHECK_EQ(sio_unmap(m), 0);
    h_put(1);
    h_get();
    seg_remove(s);
    seg_close(sd);
    sio_return(acc);
}

static void test_iommu_isolation_on_the_lender(void **state)
{
    struct fx fx;
    assert_int_equal(fx_up(&fx, "sioiso", &IOMMU_OPTS), 0);
    struct fab *f = fx.f;
    const char *fab = fx.name;
    struct h_proc l = h_spawn(fab, "a", lender, (void *)1);
    h_from(&l);
    assert_int_equal(h_join(&l), 0);
    uint32_t acc = (uint32_t)fab_func_by_name(f, "accel0");
    uint32_t ha = fab_func(f, acc)->host;
    struct h_proc u = h_spawn(fab, "b", iso_user, NULL);
    uint64_t io = h_from(&u);
    assert_int_equal(((uint32_t *)fab_bar_mem(f, acc, fab_func(f, acc)->bar[2].off, 32))[5], 0x600df00d);
    uint8_t v[64];
    memset(v, 0x42, sizeof v);
    /* Mapped for it: the write goes through (to b, through a's NTB). */
    assert_int_equal(fab_fn_dma_write(f, acc, io, v, sizeof v), 0);
    /* Anything else is a fault on the lender, and nothing is written: a's own RAM ... */
    uint64_t faults = atomic_load(&fab_host(f, ha)->fault_count);
    uint64_t ram = 300ull << 20;
    memset(fab_ram(f, ha, ram, 64), 0, 64);
    assert_int_equal(fab_fn_dma_write(f, acc, ram, v, sizeof v), -EFAULT);
    assert_int_equal(((uint8_t *)fab_ram(f, ha, ram, 1))[0], 0);
    /* ... or beyond what was mapped. */
    assert_int_equal(fab_fn_dma_write(f, acc, io + (64u << 20), v, sizeof v), -EFAULT);
    assert_int_equal(atomic_load(&fab_host(f, ha)->fault_count), faults + 2);
    h_to(&u, 1);
    h_from(&u);
    /* Unmapped: the same address faults now. */
    assert_int_equal(fab_fn_dma_write(f, acc, io, v, sizeof v), -EFAULT);
    h_to(&u, 1);
    assert_int_equal(h_join(&u), 0);
    fx_down(&fx);
}

/* ---------------------------------------------------------------- a chosen I/O address */

#define AT_IO 0x100000ull /* where b asks for its buffer in accel0's domain (as a GPA would be) */

static void at_user(void *arg)
{
    (void)arg;
    sio_dev_t *acc, *other;
    CHECK_EQ(sio_borrow((uint32_t)sio_find("accel0"), SIO_EXCLUSIVE, &acc), 0);
    CHECK_EQ(sio_enable(acc), 0);
    volatile uint8_t *buf = sio_ram_alloc(65536);
    uint64_t phys;
    CHECK(buf);
    CHECK_EQ(sio_ram_addr((const void *)buf, 65536, &phys), 0);
    memset((void *)buf, 0, 65536);
    sio_dma_t *m, *m2;
    CHECK_EQ(sio_map_addr_at(acc, NODE_B, phys, 65536, AT_IO, &m), 0);
    /* The same range of the device's domain again: refused, nothing mapped. */
    CHECK_EQ(sio_map_addr_at(acc, NODE_B, phys, 4096, AT_IO + 4096, &m2), -EEXIST);
    /* Not at the memory's offset in its page. */
    CHECK_EQ(sio_map_addr_at(acc, NODE_B, phys, 4096, AT_IO + 0x200010, &m2), -EINVAL);
    /* accel1's lender (c) has no IOMMU: there is nothing to map a chosen address with. */
    CHECK_EQ(sio_borrow((uint32_t)sio_find("accel1"), SIO_EXCLUSIVE, &other), 0);
    CHECK_EQ(sio_map_addr_at(other, NODE_B, phys, 4096, AT_IO, &m2), -EOPNOTSUPP);
    sio_return(other);
    h_put(1);
    h_get(); /* the parent wrote through AT_IO */
    CHECK_EQ(buf[0], 0x42);
    CHECK_EQ(buf[63], 0x42);
    CHECK_EQ(sio_unmap(m), 0);
    h_put(1);
    h_get();
    sio_ram_free((void *)buf);
    sio_return(acc);
}

static void test_map_at_a_chosen_address(void **state)
{
    (void)state;
    struct fx fx;
    assert_int_equal(fx_up(&fx, "sioat", &IOMMU_OPTS), 0);
    struct fab *f = fx.f;
    const char *fab = fx.name;
    for (const char *h = "a"; h; h = *h == 'a' ? "c" : NULL) {
        struct h_proc l = h_spawn(fab, h, lender, (void *)1);
        h_from(&l);
        assert_int_equal(h_join(&l), 0);
    }
    uint32_t acc = (uint32_t)fab_func_by_name(f, "accel0");
    struct h_proc u = h_spawn(fab, "b", at_user, NULL);
    h_from(&u);
    uint8_t v[64];
    memset(v, 0x42, sizeof v);
    /* The device's DMA to the address b chose lands in b's buffer. */
    assert_int_equal(fab_fn_dma_write(f, acc, AT_IO, v, sizeof v), 0);
    h_to(&u, 1);
    h_from(&u);
    /* Unmapped: the same address faults now. */
    assert_int_equal(fab_fn_dma_write(f, acc, AT_IO, v, sizeof v), -EFAULT);
    h_to(&u, 1);
    assert_int_equal(h_join(&u), 0);
    fx_down(&fx);
}

/* ---------------------------------------------------------------- the driver's CPU */

/* A register write tells the model where its driver runs (fab_function.driver_cpu), so that
 * the model's doorbell wait does not spin on the CPU the driver needs: after the driver moves
 * (sched_setaffinity), its next write publishes the new CPU. A driver that goes to sleep
 * withdraws it (sio_driver_asleep), so that the model does not give its CPU up for a thread on
 * no run queue, and publishes it again when it wakes. Only CPUs this test may use. Each
 * message is the step (DRV_*) << 32 | the CPU. */
enum { DRV_WROTE, DRV_ASLEEP, DRV_AWAKE };
static void moving_driver(void *arg)
{
    (void)arg;
    sio_dev_t *acc;
    CHECK_EQ(sio_borrow((uint32_t)sio_find("accel0"), SIO_EXCLUSIVE, &acc), 0);
    sio_bar_t *bar;
    CHECK(sio_map_bar(acc, 2, NULL, &bar));
    cpu_set_t was, one;
    CHECK_EQ(sched_getaffinity(0, sizeof was, &was), 0);
    for (int cpu = 0, moves = 0; cpu < CPU_SETSIZE && moves < 4; cpu++) {
        if (!CPU_ISSET(cpu, &was))
            continue;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        CHECK_EQ(sched_setaffinity(0, sizeof one, &one), 0);
        sio_write32(bar, 0x20, (uint32_t)cpu); /* BAR2 is the accelerator's memory: harmless */
        h_put((uint64_t)DRV_WROTE << 32 | (uint64_t)cpu);
        h_get();
        sio_driver_asleep(acc, true);
        h_put((uint64_t)DRV_ASLEEP << 32 | (uint64_t)cpu);
        h_get();
        sio_driver_asleep(acc, false);
        h_put((uint64_t)DRV_AWAKE << 32 | (uint64_t)cpu);
        h_get();
        moves++;
    }
    CHECK_EQ(sched_setaffinity(0, sizeof was, &was), 0);
    h_put(UINT64_MAX);
    CHECK_EQ(sio_unmap_bar(bar), 0);
    CHECK_EQ(sio_return(acc), 0);
}

static void test_driver_publishes_its_cpu(void **state)
{
    (void)state;
    make_available("a", true);
    const struct fab_function *fx = fab_func(FX.f, (uint32_t)fab_func_by_name(FX.f, "accel0"));
    struct h_proc u = h_spawn(FX.name, "b", moving_driver, NULL);
    int steps = 0;
    for (uint64_t m; (m = h_from(&u)) != UINT64_MAX; steps++) {
        uint64_t step = m >> 32, cpu = m & UINT32_MAX;
        printf("driver on CPU %llu, step %llu: published %u (CPU + 1; 0 asleep)\n",
               (unsigned long long)cpu, (unsigned long long)step, atomic_load(&fx->driver_cpu));
        assert_int_equal(atomic_load(&fx->driver_cpu), step == DRV_ASLEEP ? 0 : cpu + 1);
        h_to(&u, 1);
    }
    sio_driver_asleep(NULL, true); /* no device: nothing */
    assert_true(steps >= 3);
    assert_int_equal(h_join(&u), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry_and_borrowing),
        cmocka_unit_test(test_bars_and_memory_for_the_device),
        cmocka_unit_test(test_lease_reclaim_after_host_kill),
        cmocka_unit_test(test_placement_by_access_hints),
        cmocka_unit_test(test_mapping_limits),
        cmocka_unit_test(test_iommu_isolation_on_the_lender),
        cmocka_unit_test(test_map_at_a_chosen_address),
        cmocka_unit_test(test_driver_publishes_its_cpu),
    };
    return cmocka_run_group_tests(tests, setup, fx_teardown);
}
