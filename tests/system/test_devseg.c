/*
 * Device segments and registered memory, the native calls the SISCI layer is built on
 * (examples/topologies/smartio3.ini: nvme0 in host a): a borrowed NVMe's BAR 0 as a connected
 * segment whose plain stores reach the controller (it comes ready with no sio_write32 to tell
 * it), device memory shared by number between two borrowers and private to one connection,
 * and a segment of the caller's own pages (seg_create_registered) given back on removal; a
 * register mapping watched across a function reset and given back when its process dies.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "fabric.h"
#include "fixture.h"
#include "ntblend/seg.h"
#include "ntblend/smartio.h"

/* The fabric; its state (FX.f) shows what a mapping told the model. */
static struct fx FX;
static const struct fx_opts FX_OPTS = {
    .topo = "examples/topologies/smartio3.ini",
    .add = { "nvme0" },
    .attach = fx_attach
};
static int setup(void **state) { return fx_setup(state, &FX, "devseg", &FX_OPTS); }
#define NODE_A 4u
#define NODE_B 8u

static sio_dev_t *borrow_nvme(void)
{
    sio_dev_t *d;
    CHECK_EQ(sio_borrow((uint32_t)sio_find("nvme0"), SIO_SHARED, &d), 0);
    CHECK_EQ(sio_enable(d), 0);
    return d;
}

/* ---------------------------------------------------------------- a BAR as a segment */

/* Plain stores to mapped registers are watched for while such a mapping exists. */
static uint32_t raw_maps(void)
{
    return atomic_load(&fab_func(FX.f, 0)->raw_maps); /* nvme0 is function 0 */
}

static void bar_user(void *arg)
{
    seg_desc_t *sd;
    seg_remote_t *bar;
    seg_map_t *m;
    CHECK_EQ(seg_open(&sd), 0);
    sio_dev_t *d = borrow_nvme();
    CHECK_EQ(sio_connect_bar(sd, d, 1, 0, &bar), -EINVAL); /* no BAR 1 */
    CHECK_EQ(sio_connect_bar(sd, d, 7, 0, &bar), -EINVAL);
    CHECK_EQ(sio_connect_bar(sd, d, 0, 0, &bar), 0);
    CHECK(seg_remote_size(bar) >= 16384);
    CHECK_EQ(seg_remote_node_id(bar), NODE_A);
    CHECK_EQ(seg_remote_state(bar), SEG_EVENT_AVAILABLE);
    CHECK_EQ(seg_wait_event(bar, 0), SEG_EVENT_NONE);
    seg_map_t *ro;
    CHECK_EQ(raw_maps(), 0);
    CHECK(seg_map_remote(bar, 0, 0, SEG_MAP_READONLY, &ro)); /* loads only: nothing to watch */
    CHECK_EQ(raw_maps(), 0);
    CHECK_EQ(seg_unmap(ro), 0);
    volatile uint32_t *r = seg_map_remote(bar, 0, 0, 0, &m);
    CHECK(r);
    CHECK_EQ(raw_maps(), 1);
    CHECK_EQ(r[0x08 / 4], 0x10400); /* VS: 1.4 */
    /* the admin queues in memory of ours the device can reach, then enable: plain stores */
    seg_local_t *q;
    CHECK_EQ(seg_create(sd, &q, SEG_ID_AUTO, 8192), 0);
    uint64_t io;
    sio_dma_t *dma;
    CHECK_EQ(sio_map_local(d, q, 0, 8192, &io, &dma), 0);
    r[0x24 / 4] = 31u << 16 | 31u;           /* AQA: 32 entries each */
    *(volatile uint64_t *)&r[0x28 / 4] = io; /* ASQ */
    *(volatile uint64_t *)&r[0x30 / 4] = io + 4096; /* ACQ */
    r[0x14 / 4] = 0x460001;                  /* CC: IOSQES 6, IOCQES 4, EN */
    struct timespec ts = { 0, 1000000 };
    int i = 0;
    while (!(r[0x1c / 4] & 1) && i++ < 10000) /* CSTS.RDY, within 10 s */
        nanosleep(&ts, NULL);
    CHECK_EQ(r[0x1c / 4] & 1, 1);
    r[0x14 / 4] = 0; /* and disabled again */
    for (i = 0; (r[0x1c / 4] & 1) && i < 10000; i++)
        nanosleep(&ts, NULL);
    CHECK_EQ(r[0x1c / 4] & 1, 0);
    CHECK_EQ(seg_disconnect(bar), -EBUSY); /* still mapped */
    CHECK_EQ(seg_unmap(m), 0);
    CHECK_EQ(raw_maps(), 0);
    CHECK_EQ(seg_disconnect(bar), 0);
    CHECK_EQ(sio_unmap(dma), 0);
    CHECK_EQ(seg_remove(q), 0);
    CHECK_EQ(sio_return(d), 0);
    seg_close(sd);
}

static void test_bar_segment(void **state)
{
    struct h_proc b = h_spawn(FX.name, "b", bar_user, NULL);
    assert_int_equal(h_join(&b), 0);
}

/* ---------------------------------------------------------------- across a reset, and a death */

/* Enable the controller with plain stores (admin queues at io: SQ, CQ, a data page), and wait
 * up to 10 s for CSTS.RDY. */
static uint32_t enable_by_stores(volatile uint32_t *r, uint64_t io)
{
    r[0x14 / 4] = 0;
    r[0x24 / 4] = 31u << 16 | 31u;
    *(volatile uint64_t *)&r[0x28 / 4] = io;
    *(volatile uint64_t *)&r[0x30 / 4] = io + 4096;
    r[0x14 / 4] = 0x460001;
    struct timespec ts = { 0, 1000000 };
    for (int i = 0; !(r[0x1c / 4] & 1) && i < 10000; i++)
        nanosleep(&ts, NULL);
    return r[0x1c / 4] & 1;
}

/* A held mapping is what the model watches, not the function's state: a function-level reset
 * (a guest's FLR, a lender reclaiming) unmaps nobody, so stores through the mapping after it,
 * an enable and an admin doorbell, must still reach the controller. */
static void reset_user(void *arg)
{
    seg_desc_t *sd;
    seg_remote_t *bar;
    seg_map_t *m, *qm;
    seg_local_t *q;
    uint64_t io;
    sio_dma_t *dma;
    CHECK_EQ(seg_open(&sd), 0);
    sio_dev_t *d = borrow_nvme();
    CHECK_EQ(sio_connect_bar(sd, d, 0, 0, &bar), 0);
    volatile uint32_t *r = seg_map_remote(bar, 0, 0, 0, &m);
    CHECK(r);
    CHECK_EQ(seg_create(sd, &q, SEG_ID_AUTO, 3 * 4096), 0);
    volatile uint32_t *mem = seg_map_local(q, 0, 0, 0, &qm);
    CHECK(mem);
    CHECK_EQ(sio_map_local(d, q, 0, 3 * 4096, &io, &dma), 0);
    CHECK_EQ(enable_by_stores(r, io), 1);
    h_put(1);
    h_get(); /* the function was reset meanwhile */
    CHECK_EQ(raw_maps(), 1);
    CHECK_EQ(r[0x1c / 4] & 1, 0); /* the reset disabled it */
    CHECK_EQ(sio_enable(d), 0);   /* bus mastering back, as a driver does after an FLR */
    memset((void *)mem, 0, 3 * 4096);
    CHECK_EQ(enable_by_stores(r, io), 1);
    /* Identify Controller through the admin doorbell, a plain store */
    mem[0] = 0x06 | 7u << 16;                        /* opcode, command id 7 */
    *(volatile uint64_t *)&mem[6] = io + 2 * 4096;   /* PRP1 */
    mem[10] = 1;                                     /* CNS: the controller */
    r[0x1000 / 4] = 1;                               /* SQ 0 tail */
    volatile uint32_t *cqe = mem + 4096 / 4;
    struct timespec ts = { 0, 1000000 };
    for (int i = 0; !(cqe[3] & 0x10000) && i < 10000; i++)
        nanosleep(&ts, NULL);
    CHECK_EQ(cqe[3] & 0xffff, 7);       /* phase set, command 7 ... */
    CHECK_EQ(cqe[3] >> 17, 0);          /* ... with success */
    CHECK(mem[2 * 1024] != 0);          /* the identify data (PCI vendor id) landed */
    r[0x1004 / 4] = 1;                  /* CQ 0 head */
    r[0x14 / 4] = 0;
    CHECK_EQ(seg_unmap(m), 0);
    CHECK_EQ(raw_maps(), 0);
    CHECK_EQ(seg_disconnect(bar), 0);
    CHECK_EQ(sio_unmap(dma), 0);
    CHECK_EQ(seg_unmap(qm), 0);
    CHECK_EQ(seg_remove(q), 0);
    CHECK_EQ(sio_return(d), 0);
    seg_close(sd);
}

static void test_mapping_across_reset(void **state)
{
    struct h_proc b = h_spawn(FX.name, "b", reset_user, NULL);
    assert_int_equal(h_from(&b), 1);
    assert_int_equal(raw_maps(), 1);
    fab_fn_reset(FX.f, 0);
    assert_int_equal(raw_maps(), 1);
    h_to(&b, 1);
    assert_int_equal(h_join(&b), 0);
}

/* A process killed with its mapping gives its count back, as it does its LUT entries. */
static void dying_user(void *arg)
{
    seg_desc_t *sd;
    seg_remote_t *bar;
    seg_map_t *m;
    CHECK_EQ(seg_open(&sd), 0);
    sio_dev_t *d = borrow_nvme();
    CHECK_EQ(sio_connect_bar(sd, d, 0, 0, &bar), 0);
    CHECK(seg_map_remote(bar, 0, 0, 0, &m));
    CHECK(seg_map_remote(bar, 0, 4096, 0, &m)); /* two: counted twice, both given back */
    h_put(1);
    h_get(); /* killed here */
}

static void test_mapping_dies_with_process(void **state)
{
    struct h_proc b = h_spawn(FX.name, "b", dying_user, NULL);
    assert_int_equal(h_from(&b), 1);
    assert_int_equal(raw_maps(), 2);
    kill(b.pid, SIGKILL);
    h_join(&b);
    struct timespec ts = { 0, 10000000 };
    for (int i = 0; raw_maps() && i < 3000; i++) /* the agent reaps it: up to 30 s */
        nanosleep(&ts, NULL);
    assert_int_equal(raw_maps(), 0);
}

/* ---------------------------------------------------------------- device memory */

static void devmem_user(void *arg)
{
    bool first = arg != NULL;
    seg_desc_t *sd;
    seg_remote_t *s, *p;
    seg_map_t *m, *pm;
    CHECK_EQ(seg_open(&sd), 0);
    sio_dev_t *d = borrow_nvme();
    CHECK_EQ(sio_connect_devmem(sd, d, 5, 0, SIO_DEVMEM_SHARED, 0, &s), -EINVAL);
    CHECK_EQ(sio_connect_devmem(sd, d, 5, (size_t)SIO_DEVMEM_MAX_SIZE + 1, SIO_DEVMEM_SHARED, 0, &s), -EINVAL);
    CHECK_EQ(sio_connect_devmem(sd, d, 5, 4096, 3, 0, &s), -EINVAL);
    if (first) {
        CHECK_EQ(sio_connect_devmem(sd, d, 5, 8192, SIO_DEVMEM_SHARED, 0, &s), 0);
        h_put(1);
    } else {
        h_get(); /* the first made it with 8 KiB: a later borrower gets it as it is */
        CHECK_EQ(sio_connect_devmem(sd, d, 5, 4096, SIO_DEVMEM_SHARED, 0, &s), 0);
    }
    CHECK_EQ(seg_remote_size(s), 8192);
    CHECK_EQ(seg_remote_node_id(s), NODE_A);
    volatile uint32_t *w = seg_map_remote(s, 0, 0, 0, &m);
    CHECK(w);
    if (first) {
        w[100] = 0xfeed;
        h_put(2);
        h_get();
    } else {
        CHECK_EQ(h_get(), 2);
        CHECK_EQ(w[100], 0xfeed);
        h_put(3);
    }
    /* private: this connection's own, zeroed, and gone with it */
    for (int k = 0; k < 2; k++) {
        CHECK_EQ(sio_connect_devmem(sd, d, 0, 4096, SIO_DEVMEM_PRIVATE, 0, &p), 0);
        volatile uint32_t *x = seg_map_remote(p, 0, 0, 0, &pm);
        CHECK(x);
        CHECK_EQ(x[7], 0);
        x[7] = 0x1234;
        uint64_t io;
        sio_dma_t *dma;
        CHECK_EQ(sio_map_remote(d, p, 0, 4096, &io, &dma), 0);
        CHECK_EQ(sio_unmap(dma), 0);
        CHECK_EQ(seg_unmap(pm), 0);
        CHECK_EQ(seg_disconnect(p), 0);
    }
    CHECK_EQ(seg_unmap(m), 0);
    CHECK_EQ(seg_disconnect(s), 0);
    CHECK_EQ(sio_return(d), 0);
    seg_close(sd);
}

static void test_device_memory(void **state)
{
    struct h_proc b = h_spawn(FX.name, "b", devmem_user, (void *)1);
    struct h_proc c = h_spawn(FX.name, "c", devmem_user, NULL);
    assert_int_equal(h_from(&b), 1);
    h_to(&c, 1);
    assert_int_equal(h_from(&b), 2);
    h_to(&c, 2);
    assert_int_equal(h_from(&c), 3);
    h_to(&b, 3);
    assert_int_equal(h_join(&b), 0);
    assert_int_equal(h_join(&c), 0);
}

/* ---------------------------------------------------------------- registered memory */

static void registrar(void *arg)
{
    seg_desc_t *sd;
    seg_local_t *s;
    seg_map_t *m;
    CHECK_EQ(seg_open(&sd), 0);
    size_t size = 3 * 4096;
    uint8_t *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(mem != MAP_FAILED);
    for (size_t i = 0; i < size; i++)
        mem[i] = (uint8_t)(i * 7);
    CHECK_EQ(seg_create_registered(sd, &s, 61, mem + 1, 4096), -EINVAL);
    CHECK_EQ(seg_create_registered(sd, &s, 61, mem, 100), -EINVAL);
    CHECK_EQ(seg_create_registered(sd, &s, 61, (void *)0x10000, 4096), -EFAULT);
    CHECK_EQ(seg_create_registered(sd, &s, 61, mem, size), 0);
    CHECK_EQ(seg_local_size(s), size);
    volatile uint8_t *p = seg_map_local(s, 0, 0, 0, &m);
    CHECK(p);
    for (size_t i = 0; i < size; i++)
        CHECK_EQ(p[i], (uint8_t)(i * 7));
    p[5] = 0xaa; /* one memory: the segment's mapping and the caller's pointer */
    CHECK_EQ(mem[5], 0xaa);
    CHECK_EQ(seg_prepare(s, 0), 0);
    CHECK_EQ(seg_set_available(s, 0), 0);
    h_put(1);
    h_get();
    CHECK_EQ(mem[4097], 0xbb); /* stored by host c */
    CHECK_EQ(seg_remove(s), -EBUSY);
    CHECK_EQ(seg_unmap(m), 0);
    CHECK_EQ(seg_remove(s), 0);
    CHECK_EQ(mem[5], 0xaa); /* the caller's own again, with the last contents */
    CHECK_EQ(mem[4097], 0xbb);
    CHECK_EQ(mem[9000], (uint8_t)(9000 * 7));
    mem[9000] = 1;
    CHECK_EQ(munmap(mem, size), 0);
    seg_close(sd);
}

static void reg_writer(void *arg)
{
    seg_desc_t *sd;
    seg_remote_t *r;
    seg_map_t *m;
    CHECK_EQ(seg_open(&sd), 0);
    h_get();
    CHECK_EQ(seg_connect(sd, &r, NODE_B, 61, 0, 5000), 0);
    volatile uint8_t *p = seg_map_remote(r, 0, 0, 0, &m);
    CHECK(p);
    CHECK_EQ(p[5], 0xaa);
    p[4097] = 0xbb;
    CHECK_EQ(seg_unmap(m), 0);
    CHECK_EQ(seg_disconnect(r), 0);
    seg_close(sd);
}

static void test_registered(void **state)
{
    struct h_proc b = h_spawn(FX.name, "b", registrar, NULL);
    struct h_proc c = h_spawn(FX.name, "c", reg_writer, NULL);
    assert_int_equal(h_from(&b), 1);
    h_to(&c, 1);
    assert_int_equal(h_join(&c), 0);
    h_to(&b, 1);
    assert_int_equal(h_join(&b), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bar_segment),
        cmocka_unit_test(test_mapping_across_reset),
        cmocka_unit_test(test_mapping_dies_with_process),
        cmocka_unit_test(test_device_memory),
        cmocka_unit_test(test_registered),
    };
    return cmocka_run_group_tests(tests, setup, fx_teardown);
}
