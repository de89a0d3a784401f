/*
 * Multipath (smartio-tocs-2021 §6.3) on examples/topologies/two-paths.ini, where every two hosts
 * are joined through two adapters on two switches: `ntblend status` shows both paths; agents
 * keep talking over the second while the first cable is out; a borrower's BAR and DMA-window
 * mappings exist on the path it chose, a BAR mapping with failover moves to the surviving path
 * and back (one without reads all ones while its path is down), and
 * mappings asked for while a path is down are made on the one that works; every byte written
 * through a BAR while the primary cable is pulled and replugged arrives; a segment connection
 * whose path goes down is told so, and the user connects again through its other adapter.
 * Where the device must act, the parent performs its DMA through the fabric model as the
 * device's requester.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "fixture.h"
#include "fabric.h"
#include "ntblend/seg.h"
#include "ntblend/smartio.h"

static struct fx FX;
static const struct fx_opts FX_OPTS = {
    .topo = "examples/topologies/two-paths.ini",
    .add = { "accel0" },
    .attach = fx_attach
};
static int setup(void **state) { return fx_setup(state, &FX, "mpath", &FX_OPTS); }

static void cable(const char *adapter, bool up)
{
    assert_int_equal(h_cli(FX.name, "link %s %s sw%c", up ? "up" : "down", adapter,
                           adapter[strlen(adapter) - 1]),
                     0);
}

/* Which of a's adapters' window BARs the device-side address io is in (-1: none). */
static int lender_adapter_of(uint64_t io)
{
    const struct fab_host *a = fab_host(FX.f, (uint32_t)fab_host_by_name(FX.f, "a"));
    for (uint32_t i = 0; i < a->nadapters; i++) {
        const struct fab_adapter *ad = fab_adapter(FX.f, a->adapter_first + i);
        if (io >= ad->bar_addr && io < ad->bar_addr + (uint64_t)ad->lut_entries * ad->lut_size)
            return (int)i;
    }
    return -1;
}

/* LUT entries the agents hold (their mailbox routes), over all adapters. */
static unsigned agent_luts(void)
{
    unsigned n = 0;
    for (uint32_t i = 0; i < FX.f->ctl->nadapters; i++) {
        struct fab_adapter *a = fab_adapter(FX.f, i);
        const struct fab_lut_entry *e = fab_lut(FX.f, a);
        for (uint32_t k = 0; k < a->lut_entries; k++)
            n += (e[k].flags & FAB_LUT_AGENT) != 0;
    }
    return n;
}

/* ---------------------------------------------------------------- topology and agents */

static void test_status_shows_both_paths(void **state)
{
    (void)state;
    const char *grep = "%s/ntblend --fabric %s status | grep -q '%s'";
    assert_int_equal(h_sh(grep, h_bin(), FX.name, "^PATHS (3 pairs"), 0);
    assert_int_equal(h_sh(grep, h_bin(), FX.name, "path 0  a.ntb0 --- b.ntb0  via sw0  up"), 0);
    assert_int_equal(h_sh(grep, h_bin(), FX.name, "path 1  a.ntb1 --- b.ntb1  via sw1  up"), 0);
    /* The agents' routes between a, b and c are set up over sw0, the first path. */
    assert_int_equal(h_cli(FX.name, "agent-ping b a >/dev/null"), 0);
    assert_int_equal(h_cli(FX.name, "agent-ping a c >/dev/null"), 0);
    unsigned routes = agent_luts();
    cable("a.ntb0", false);
    assert_int_equal(h_sh(grep, h_bin(), FX.name, "path 0  a.ntb0 --- b.ntb0  via sw0  down"), 0);
    assert_int_equal(h_sh("%s/ntblend --fabric %s status --json | jq -e '.paths | length == 3 "
                          "and .[0].from == \"a\" and .[0].to == \"b\" and .[0].paths[1].via == "
                          "\"sw1\" and ([.[0].paths[].state] == [\"down\", \"up\"])' >/dev/null",
                          h_bin(), FX.name),
                     0);
    /* They move to sw1 while a's sw0 cable is out, and still work after it is back. */
    assert_int_equal(h_cli(FX.name, "agent-ping b a >/dev/null"), 0);
    assert_int_equal(h_cli(FX.name, "agent-ping a c >/dev/null"), 0);
    assert_int_equal(agent_luts(), routes); /* moved, not added: the old entries went */
    cable("a.ntb0", true);
    assert_int_equal(h_cli(FX.name, "agent-ping b a >/dev/null"), 0);
}

/* ---------------------------------------------------------------- mappings on both paths */

#define PAT(i, pass) ((uint8_t)((i) * 7 + (pass)))

static void borrower(void *arg)
{
    (void)arg;
    sio_dev_t *d;
    CHECK_EQ(sio_borrow((uint32_t)sio_find("accel0"), SIO_EXCLUSIVE, &d), 0);
    CHECK_EQ(sio_enable(d), 0);
    CHECK_EQ(sio_paths(d), 2);
    CHECK_EQ(sio_get_path(d), 0);
    CHECK_EQ(sio_set_path(d, 2), -ENOENT); /* a second path exists, a third does not */
    CHECK_EQ(sio_set_path(d, -1), -ENOENT);
    CHECK(sio_path_up(d, 0) && sio_path_up(d, 1) && !sio_path_up(d, 2));
    /* BAR2 over path 0 and over path 1; memory for the device over each path. */
    size_t size;
    sio_bar_t *b0, *b1, *plain;
    volatile uint8_t *m0 = sio_map_bar(d, 2, &size, &b0);
    CHECK(m0);
    CHECK_EQ(sio_bar_failover(b0), 0);
    CHECK_EQ(sio_bar_failover(b0), -EALREADY);
    volatile uint8_t *mp = sio_map_bar(d, 2, NULL, &plain); /* path 0 alone */
    CHECK(mp);
    CHECK_EQ(sio_set_path(d, 1), 0);
    CHECK_EQ(sio_get_path(d), 1);
    volatile uint8_t *m1 = sio_map_bar(d, 2, NULL, &b1);
    CHECK(m1 && m1 != m0);
    seg_desc_t *sd;
    seg_local_t *seg;
    seg_map_t *sm;
    CHECK_EQ(seg_open(&sd), 0);
    CHECK_EQ(seg_create(sd, &seg, 0, 3 * 4096), 0);
    volatile uint8_t *mem = seg_map_local(seg, 0, 0, 0, &sm);
    CHECK(mem);
    uint64_t io0, io1, io2;
    sio_dma_t *d0, *d1, *d2;
    CHECK_EQ(sio_map_local(d, seg, 4096, 4096, &io1, &d1), 0);
    CHECK_EQ(sio_set_path(d, 0), 0);
    CHECK_EQ(sio_map_local(d, seg, 0, 4096, &io0, &d0), 0);
    for (int i = 0; i < 4096; i++)
        m0[i] = PAT(i, 1);
    for (int i = 0; i < 4096; i++)
        CHECK_EQ(m1[i], PAT(i, 1)); /* one device memory, two paths */
    h_put(io0);
    h_put(io1);
    h_get(); /* a's cable to sw0 is out */
    CHECK(!sio_path_up(d, 0) && sio_path_up(d, 1));
    /* The path-0 mapping of the BAR goes over path 1 now: no all-ones, stores arrive. The one
     * without failover reads all ones, as hardware does through a downed cable. */
    for (int i = 0; i < 4096; i++) {
        CHECK_EQ(m0[i], PAT(i, 1));
        CHECK_EQ(mp[i], 0xff);
    }
    for (int i = 0; i < 4096; i++)
        m0[i] = PAT(i, 2);
    for (int i = 0; i < 4096; i++)
        CHECK_EQ(m1[i], PAT(i, 2));
    /* Asked for over path 0 while it is down: the lender makes it over the path that works. */
    CHECK_EQ(sio_map_local(d, seg, 8192, 4096, &io2, &d2), 0);
    h_put(io2);
    h_get(); /* the device wrote through io1 and io2 */
    for (int i = 0; i < 4096; i++) {
        CHECK_EQ(mem[4096 + i], (uint8_t)(i ^ 0x5a));
        CHECK_EQ(mem[8192 + i], (uint8_t)(i ^ 0xa5));
    }
    h_put(1);
    h_get(); /* the cable is back */
    CHECK(sio_path_up(d, 0));
    for (int i = 0; i < 4096; i++) {
        CHECK_EQ(m0[i], PAT(i, 2));
        CHECK_EQ(mp[i], PAT(i, 2));
    }
    h_put(1);
    h_get(); /* the device wrote through io0 again */
    for (int i = 0; i < 4096; i++)
        CHECK_EQ(mem[i], (uint8_t)(i ^ 0x3c));
    CHECK_EQ(sio_unmap(d0), 0);
    CHECK_EQ(sio_unmap(d1), 0);
    CHECK_EQ(sio_unmap(d2), 0);
    CHECK_EQ(sio_unmap_bar(b0), 0);
    CHECK_EQ(sio_unmap_bar(b1), 0);
    CHECK_EQ(sio_unmap_bar(plain), 0);
    seg_unmap(sm);
    seg_remove(seg);
    seg_close(sd);
    CHECK_EQ(sio_return(d), 0);
}

static void test_mappings_on_both_paths(void **state)
{
    (void)state;
    uint32_t acc = (uint32_t)fab_func_by_name(FX.f, "accel0");
    struct h_proc u = h_spawn(FX.name, "b", borrower, NULL);
    uint64_t io0 = h_from(&u), io1 = h_from(&u);
    /* Each DMA window goes through the lender's adapter at the far end of the path asked. */
    assert_int_equal(lender_adapter_of(io0), 0);
    assert_int_equal(lender_adapter_of(io1), 1);
    cable("a.ntb0", false);
    h_to(&u, 1);
    uint64_t io2 = h_from(&u);
    assert_int_equal(lender_adapter_of(io2), 1);
    uint8_t p0[4096], p1[4096], p2[4096];
    for (int i = 0; i < 4096; i++) {
        p0[i] = (uint8_t)(i ^ 0x3c);
        p1[i] = (uint8_t)(i ^ 0x5a);
        p2[i] = (uint8_t)(i ^ 0xa5);
    }
    /* Path 0 is down: the device's write through it fails (nothing lands); path 1 works. */
    assert_int_not_equal(fab_fn_dma_write(FX.f, acc, io0, p0, sizeof p0), 0);
    assert_int_equal(fab_fn_dma_write(FX.f, acc, io1, p1, sizeof p1), 0);
    assert_int_equal(fab_fn_dma_write(FX.f, acc, io2, p2, sizeof p2), 0);
    h_to(&u, 1);
    h_from(&u);
    cable("a.ntb0", true);
    h_to(&u, 1);
    h_from(&u);
    assert_int_equal(fab_fn_dma_write(FX.f, acc, io0, p0, sizeof p0), 0);
    h_to(&u, 1);
    assert_int_equal(h_join(&u), 0);
}

static void local_user(void *arg)
{
    (void)arg;
    sio_dev_t *d;
    CHECK_EQ(sio_borrow((uint32_t)sio_find("accel0"), SIO_EXCLUSIVE, &d), 0);
    CHECK_EQ(sio_paths(d), 0);
    CHECK_EQ(sio_get_path(d), -1);
    CHECK_EQ(sio_set_path(d, 0), -EINVAL); /* its own device: no NTB in between */
    CHECK(!sio_path_up(d, 0));
    sio_bar_t *b;
    CHECK(sio_map_bar(d, 2, NULL, &b));
    CHECK_EQ(sio_bar_failover(b), -EOPNOTSUPP);
    CHECK_EQ(sio_unmap_bar(b), 0);
    CHECK_EQ(sio_return(d), 0);
}

static void test_local_device_has_no_paths(void **state)
{
    (void)state;
    struct h_proc u = h_spawn(FX.name, "a", local_user, NULL);
    assert_int_equal(h_join(&u), 0);
}

/* ---------------------------------------------------------------- under load */

#define LOAD_BYTES (1u << 20)
#define STOP_AT (8u << 20) /* a word of device memory the parent sets to end the run */

static void writer(void *arg)
{
    (void)arg;
    sio_dev_t *d;
    CHECK_EQ(sio_borrow((uint32_t)sio_find("accel0"), SIO_EXCLUSIVE, &d), 0);
    sio_bar_t *b;
    volatile uint64_t *m = sio_map_bar(d, 2, NULL, &b);
    CHECK(m);
    CHECK_EQ(sio_bar_failover(b), 0);
    m[STOP_AT / 8] = 0;
    h_put(1);
    uint64_t pass = 0;
    /* Write a pass, read it back: every word must be what was written, through any cable. */
    while (m[STOP_AT / 8] != 0xd0e || pass < 2) {
        pass++;
        for (uint64_t i = 0; i < LOAD_BYTES / 8; i++)
            m[i] = pass << 32 | i;
        for (uint64_t i = 0; i < LOAD_BYTES / 8; i++)
            CHECK_EQ(m[i], pass << 32 | i);
    }
    h_put(pass);
    CHECK_EQ(sio_unmap_bar(b), 0);
    CHECK_EQ(sio_return(d), 0);
}

static void test_every_byte_while_the_cable_is_pulled(void **state)
{
    (void)state;
    uint32_t acc = (uint32_t)fab_func_by_name(FX.f, "accel0");
    struct fab_function *A = fab_func(FX.f, acc);
    struct h_proc u = h_spawn(FX.name, "b", writer, NULL);
    h_from(&u);
    for (int round = 0; round < 5; round++) {
        cable(round % 2 ? "b.ntb0" : "a.ntb0", false);
        cable(round % 2 ? "b.ntb0" : "a.ntb0", true);
    }
    *(volatile uint64_t *)fab_bar_mem(FX.f, acc, A->bar[2].off + STOP_AT, 8) = 0xd0e;
    uint64_t passes = h_from(&u);
    assert_true(passes >= 2);
    assert_int_equal(h_join(&u), 0);
    /* The last pass is in the device, word for word. */
    const uint64_t *dm = fab_bar_mem(FX.f, acc, A->bar[2].off, LOAD_BYTES);
    for (uint64_t i = 0; i < LOAD_BYTES / 8; i++)
        assert_int_equal(dm[i], passes << 32 | i);
}

/* ---------------------------------------------------------------- segments */

#define SEG_ID 0x26u
#define SEG_SIZE (64u << 10)
#define A_NODE 4u /* two-paths.ini */
#define B_NODE 8u

static void fill(volatile uint32_t *m, uint32_t pass)
{
    for (uint32_t i = 0; i < SEG_SIZE / 4; i++)
        m[i] = pass << 24 | i;
}

static bool holds(volatile const uint32_t *m, uint32_t pass)
{
    for (uint32_t i = 0; i < SEG_SIZE / 4; i++)
        if (m[i] != (pass << 24 | i))
            return false;
    return true;
}

/* The next connection event of b's through `adapter` other than a LOST or RESTORED. */
static void owner_sees_connect(seg_local_t *seg, uint32_t adapter)
{
    struct seg_conn_event ev;
    for (;;) {
        CHECK(seg_local_wait_event(seg, &ev, 10000) > 0);
        if (ev.event == SEG_EVENT_LOST || ev.event == SEG_EVENT_RESTORED)
            continue;
        CHECK_EQ(ev.event, SEG_EVENT_CONNECT);
        CHECK_EQ(ev.node_id, B_NODE);
        CHECK_EQ(ev.adapter, adapter);
        return;
    }
}

static void seg_owner(void *arg)
{
    (void)arg;
    seg_desc_t *sd;
    seg_local_t *seg;
    seg_map_t *sm;
    CHECK_EQ(seg_open(&sd), 0);
    CHECK_EQ(seg_create(sd, &seg, SEG_ID, SEG_SIZE), 0);
    CHECK_EQ(seg_local_watch(seg), 0);
    for (int ad = 0; ad < 2; ad++) {
        CHECK_EQ(seg_prepare(seg, ad), 0);
        CHECK_EQ(seg_set_available(seg, ad), 0);
    }
    volatile uint32_t *m = seg_map_local(seg, 0, 0, 0, &sm);
    CHECK(m);
    h_put(1);
    h_get(); /* the user wrote pass 1 over path 0 */
    CHECK(holds(m, 1));
    owner_sees_connect(seg, 0);
    h_get(); /* ... and pass 2 over path 1, connected again while path 0 was down */
    CHECK(holds(m, 2));
    owner_sees_connect(seg, 1);
    h_get(); /* ... and pass 3 over path 0 again, once it was back */
    CHECK(holds(m, 3));
    h_put(1);
    h_get(); /* the user is gone */
    CHECK_EQ(seg_unmap(sm), 0);
    CHECK_EQ(seg_remove(seg), 0);
    seg_close(sd);
}

static void seg_user(void *arg)
{
    (void)arg;
    seg_desc_t *sd;
    seg_remote_t *r0, *r1, *again;
    seg_map_t *m0, *m1;
    CHECK_EQ(seg_open(&sd), 0);
    CHECK_EQ(seg_connect(sd, &r0, A_NODE, SEG_ID, 0, 10000), 0);
    volatile uint32_t *p0 = seg_map_remote(r0, 0, 0, 0, &m0);
    CHECK(p0);
    fill(p0, 1);
    CHECK(holds(p0, 1));
    seg_flush();
    h_put(1);
    h_get(); /* a's cable to sw0 is out */
    CHECK_EQ(seg_wait_event(r0, 10000), SEG_EVENT_LOST);
    CHECK_EQ(seg_remote_state(r0), SEG_EVENT_LOST);
    CHECK_EQ(seg_connect(sd, &again, A_NODE, SEG_ID, 0, 0), -EHOSTUNREACH);
    /* The other adapter's path works: connect again through it. */
    CHECK_EQ(seg_connect(sd, &r1, A_NODE, SEG_ID, 1, 10000), 0);
    CHECK_EQ(seg_remote_state(r1), SEG_EVENT_AVAILABLE);
    volatile uint32_t *p1 = seg_map_remote(r1, 0, 0, 0, &m1);
    CHECK(p1);
    CHECK(holds(p1, 1));
    fill(p1, 2);
    CHECK(holds(p1, 2));
    seg_flush();
    h_put(1);
    h_get(); /* the cable is back */
    CHECK_EQ(seg_wait_event(r0, 10000), SEG_EVENT_RESTORED);
    CHECK_EQ(seg_remote_state(r0), SEG_EVENT_AVAILABLE);
    CHECK(holds(p0, 2));
    fill(p0, 3);
    CHECK(holds(p1, 3));
    seg_flush();
    h_put(1);
    CHECK_EQ(seg_unmap(m0), 0);
    CHECK_EQ(seg_unmap(m1), 0);
    CHECK_EQ(seg_disconnect(r0), 0);
    CHECK_EQ(seg_disconnect(r1), 0);
    seg_close(sd);
}

static void test_segment_connects_again_over_the_other_path(void **state)
{
    (void)state;
    struct h_proc o = h_spawn(FX.name, "a", seg_owner, NULL);
    h_from(&o);
    struct h_proc u = h_spawn(FX.name, "b", seg_user, NULL);
    h_from(&u);
    h_to(&o, 1);
    cable("a.ntb0", false);
    h_to(&u, 1);
    h_from(&u);
    h_to(&o, 1);
    cable("a.ntb0", true);
    h_to(&u, 1);
    h_from(&u);
    h_to(&o, 1);
    h_from(&o);
    assert_int_equal(h_join(&u), 0);
    h_to(&o, 1);
    assert_int_equal(h_join(&o), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_shows_both_paths),
        cmocka_unit_test(test_mappings_on_both_paths),
        cmocka_unit_test(test_local_device_has_no_paths),
        cmocka_unit_test(test_every_byte_while_the_cable_is_pulled),
        cmocka_unit_test(test_segment_connects_again_over_the_other_path),
    };
    return cmocka_run_group_tests(tests, setup, fx_teardown);
}
