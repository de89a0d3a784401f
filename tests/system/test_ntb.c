/*
 * The low-level NTB API between two hosts back to back, as applications see it: windows,
 * LUT limits, doorbells, scratchpads, link failure, the DMA engine, and host crashes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>
#include <sys/mman.h>

#include "fixture.h"
#include "fabric.h"
#include "ntblend/ntb.h"

static struct fx FX;
static const struct fx_opts FX_OPTS = { .topo = "examples/topologies/two-hosts.ini" };
static int setup(void **state) { return fx_setup(state, &FX, "ntb", &FX_OPTS); }
#define BUF (64 * 1024)

/* Receiver: a buffer behind inbound window 0, its bus address reported to the parent. */
static struct ntb_dev *expose(uint8_t **buf, uint64_t *dma)
{
    struct ntb_dev *ntb = ntb_open(0);
    CHECK(ntb);
    *buf = ntb_dma_alloc(ntb, BUF, dma);
    CHECK(*buf);
    CHECK_EQ(ntb_mw_set_trans(ntb, 0, 0, *dma, BUF), 0);
    return ntb;
}

/* ---------------------------------------------------------------- stores land remotely */

static void store_receiver(void *arg)
{
    uint8_t *buf;
    uint64_t dma;
    struct ntb_dev *ntb = expose(&buf, &dma);
    h_put(dma);
    h_get(); /* the sender stored */
    for (int i = 0; i < BUF; i++)
        CHECK_EQ(buf[i], (uint8_t)(i * 7 + 1));
    buf[100] = 0x5a; /* for the sender's load */
    h_put(1);
    h_get();
    ntb_close(ntb);
}

static void store_sender(void *arg)
{
    struct ntb_dev *ntb = ntb_open(0);
    CHECK(ntb);
    CHECK_EQ(ntb_peer_port_count(ntb), 1);
    CHECK(ntb_link_is_up(ntb, NULL, NULL) & 1);
    uint8_t *w = ntb_peer_mw_map(ntb, 0, 1);
    CHECK(w);
    h_get();
    for (int i = 0; i < BUF; i++)
        w[i] = (uint8_t)(i * 7 + 1);
    h_put(1);
    h_get();
    CHECK_EQ(w[100], 0x5a);
    CHECK_EQ(w[BUF], 0); /* beyond the buffer: the peer's (zeroed) RAM, same entry */
    h_put(1);
    ntb_close(ntb);
}

static void test_store_lands_in_peer_ram(void **state)
{
    struct h_proc b = h_spawn(FX.name, "b", store_receiver, NULL);
    struct h_proc a = h_spawn(FX.name, "a", store_sender, NULL);
    uint64_t dma = h_from(&b);
    h_to(&a, dma);
    h_to(&b, h_from(&a));
    h_to(&a, h_from(&b));
    /* Check the translated address through the hardware model: b's RAM at dma. */
    struct fab *f;
    assert_int_equal(fab_attach(FX.name, -1, &f), 0);
    uint8_t *ram = fab_ram(f, (uint32_t)fab_host_by_name(f, "b"), dma, BUF);
    assert_non_null(ram);
    assert_int_equal(ram[3], (uint8_t)(3 * 7 + 1));
    fab_detach(f);
    h_to(&b, h_from(&a));
    assert_int_equal(h_join(&a), 0);
    assert_int_equal(h_join(&b), 0);
}

/* ---------------------------------------------------------------- LUT and window limits */

static void limits_app(void *arg)
{
    struct ntb_dev *ntb = ntb_open(0);
    CHECK(ntb);
    CHECK(ntb_open(5) == NULL && errno == ENOENT);
    int total = ntb_peer_mw_count(ntb), got = 0, last = -1, rc;
    uint64_t lut;
    CHECK_EQ(ntb_peer_mw_get_addr(ntb, 0, NULL, &lut), 0);
    while ((rc = ntb_peer_mw_alloc(ntb)) >= 0) {
        got++;
        last = rc;
    }
    CHECK_EQ(rc, -ENOSPC);
    CHECK(got > 0 && got <= total);
    /* A freed entry can be claimed again. */
    CHECK_EQ(ntb_peer_mw_clear_trans(ntb, 0, last), 0);
    CHECK_EQ(ntb_peer_mw_alloc(ntb), last);
    /* Window size and alignment limits. */
    uint64_t align, size_max;
    CHECK_EQ(ntb_mw_get_align(ntb, 0, 0, &align, NULL, &size_max), 0);
    CHECK_EQ(size_max, lut);
    uint64_t dma;
    void *buf = ntb_dma_alloc(ntb, 4096, &dma);
    CHECK(buf);
    CHECK_EQ(ntb_mw_set_trans(ntb, 0, 1, dma, lut + 4096), -EINVAL);
    CHECK_EQ(ntb_mw_set_trans(ntb, 0, 1, dma + 4096, 4096), -EINVAL);
    CHECK_EQ(ntb_mw_set_trans(ntb, 0, 1 << 20, dma, 4096), -EINVAL);
    CHECK_EQ(ntb_peer_mw_set_trans(ntb, 3, 0, 0, 4096), -EINVAL); /* no such peer */
    CHECK(ntb_peer_mw_map(ntb, total - 1, 2) == NULL && errno == EINVAL);
    CHECK(ntb_peer_mw_map(ntb, 0, total) != NULL);
    ntb_close(ntb);
}

static void test_lut_and_window_limits(void **state)
{
    struct h_proc a = h_spawn(FX.name, "a", limits_app, NULL);
    assert_int_equal(h_join(&a), 0);
    /* The process is gone: the agent released its LUT entries. */
    struct fab *f;
    assert_int_equal(fab_attach(FX.name, -1, &f), 0);
    int ai = fab_adapter_by_name(f, "a.ntb0");
    for (int i = 0; i < 100 && fab_lut_used(f, (uint32_t)ai) > 1; i++)
        usleep(20000);
    assert_true(fab_lut_used(f, (uint32_t)ai) <= 1); /* at most the agent's mailbox entry */
    fab_detach(f);
}

/* ---------------------------------------------------------------- doorbells */

static void db_target(void *arg)
{
    struct ntb_dev *ntb = ntb_open(0);
    CHECK(ntb);
    uint64_t valid = ntb_db_valid_mask(ntb);
    CHECK_EQ(valid, 0x7fff); /* 16 bits, the top one reserved for the agent */
    CHECK_EQ(ntb_db_set(ntb, 1u << 15), -EINVAL);
    CHECK_EQ(ntb_db_set_mask(ntb, 0x3), 0);
    CHECK_EQ(ntb_db_read_mask(ntb), 0x3);
    h_put(1);
    h_get(); /* peer rang bits 0 and 2 */
    CHECK_EQ(ntb_db_read(ntb), 0x5);
    /* Bit 2 is unmasked: an event. Bit 0 is masked: pending but silent. */
    CHECK_EQ(ntb_db_event_wait(ntb, 1000), 0x4);
    CHECK_EQ(ntb_db_clear(ntb, 0x4), 0);
    CHECK_EQ(ntb_db_event_wait(ntb, 50), 0); /* only the masked bit is left: no event */
    CHECK_EQ(ntb_db_read(ntb), 0x1);
    /* Unmasking a pending bit raises the event. */
    CHECK_EQ(ntb_db_clear_mask(ntb, 0x1), 0);
    CHECK_EQ(ntb_db_event_wait(ntb, 1000), 0x1);
    CHECK_EQ(ntb_db_clear(ntb, 0x1), 0);
    CHECK_EQ(ntb_db_read(ntb), 0);
    /* Local set raises the local event. */
    CHECK_EQ(ntb_db_set(ntb, 0x100), 0);
    CHECK_EQ(ntb_db_event_wait(ntb, 1000), 0x100);
    CHECK_EQ(ntb_db_clear(ntb, 0x100), 0);
    h_put(1);
    ntb_close(ntb);
}

static void db_ringer(void *arg)
{
    struct ntb_dev *ntb = ntb_open(0);
    CHECK(ntb);
    h_get();
    CHECK_EQ(ntb_peer_db_set(ntb, 0, 0x5), 0);
    CHECK_EQ(ntb_peer_db_set(ntb, 0, 1u << 15), -EINVAL); /* the agent's bit */
    CHECK_EQ(ntb_peer_db_set(ntb, 1, 0x1), -EINVAL);       /* no such peer */
    h_put(1);
    ntb_close(ntb);
}

static void test_doorbells(void **state)
{
    struct h_proc b = h_spawn(FX.name, "b", db_target, NULL);
    struct h_proc a = h_spawn(FX.name, "a", db_ringer, NULL);
    h_to(&a, h_from(&b));
    h_to(&b, h_from(&a));
    h_from(&b);
    assert_int_equal(h_join(&a), 0);
    assert_int_equal(h_join(&b), 0);
}

/* ---------------------------------------------------------------- scratchpads */

static void spad_side(void *arg)
{
    int writer = arg != NULL;
    struct ntb_dev *ntb = ntb_open(0);
    CHECK(ntb);
    CHECK_EQ(ntb_spad_count(ntb), 8);
    CHECK_EQ(ntb_spad_read(ntb, 8), UINT32_MAX);
    CHECK_EQ(ntb_spad_write(ntb, 8, 1), -EINVAL);
    if (writer) {
        CHECK_EQ(ntb_peer_spad_write(ntb, 0, 3, 0xdeadbeef), 0);
        CHECK_EQ(ntb_spad_write(ntb, 5, 0x1234), 0);
        h_put(1);
        h_get();
        CHECK_EQ(ntb_spad_read(ntb, 6), 0xabcd); /* the peer wrote ours */
    } else {
        h_get();
        CHECK_EQ(ntb_spad_read(ntb, 3), 0xdeadbeef);
        CHECK_EQ(ntb_peer_spad_read(ntb, 0, 5), 0x1234);
        CHECK_EQ(ntb_peer_spad_write(ntb, 0, 6, 0xabcd), 0);
        h_put(1);
    }
    ntb_close(ntb);
}

static void test_scratchpads(void **state)
{
    struct h_proc a = h_spawn(FX.name, "a", spad_side, (void *)1);
    struct h_proc b = h_spawn(FX.name, "b", spad_side, NULL);
    h_to(&b, h_from(&a));
    h_to(&a, h_from(&b));
    assert_int_equal(h_join(&a), 0);
    assert_int_equal(h_join(&b), 0);
}

/* ---------------------------------------------------------------- link failure */

static void link_receiver(void *arg)
{
    uint8_t *buf;
    uint64_t dma;
    struct ntb_dev *ntb = expose(&buf, &dma);
    memset(buf, 0x11, BUF);
    uint64_t seen = 0;
    ntb_link_event_wait(ntb, &seen, 0); /* take the current state */
    h_put(dma);
    h_get(); /* link is down now */
    CHECK_EQ(ntb_link_event_wait(ntb, &seen, 2000), 0);
    CHECK_EQ(ntb_link_is_up(ntb, NULL, NULL), 0);
    CHECK_EQ(ntb_peer_spad_read(ntb, 0, 0), UINT32_MAX);
    h_put(1);
    h_get(); /* the sender stored through the dead link */
    for (int i = 0; i < BUF; i++)
        CHECK_EQ(buf[i], 0x11);
    h_put(1);
    h_get(); /* link is up again, sender stored 0x22 */
    CHECK(ntb_link_is_up(ntb, NULL, NULL) & 1);
    for (int i = 0; i < BUF; i++)
        CHECK_EQ(buf[i], 0x22);
    h_put(1);
    ntb_close(ntb);
}

static void link_sender(void *arg)
{
    struct ntb_dev *ntb = ntb_open(0);
    CHECK(ntb);
    volatile uint8_t *w = ntb_peer_mw_map(ntb, 0, 1);
    CHECK(w);
    uint64_t seen = 0;
    ntb_link_event_wait(ntb, &seen, 0);
    h_get();
    CHECK_EQ(w[0], 0x11);
    h_put(1);
    h_get(); /* link is down now */
    CHECK_EQ(ntb_link_event_wait(ntb, &seen, 2000), 0);
    CHECK_EQ(ntb_link_is_up(ntb, NULL, NULL), 0);
    for (int i = 0; i < BUF; i += 4096)
        CHECK_EQ(w[i], 0xff); /* reads return all ones */
    CHECK_EQ(*(volatile uint32_t *)(w + 64), UINT32_MAX);
    for (int i = 0; i < BUF; i++)
        w[i] = 0x99; /* dropped */
    CHECK_EQ(ntb_peer_db_set(ntb, 0, 1), 0); /* dropped too, no error: a posted write */
    h_put(1);
    h_get(); /* link is up again */
    CHECK(ntb_link_is_up(ntb, NULL, NULL) & 1);
    CHECK_EQ(w[5], 0x11);
    for (int i = 0; i < BUF; i++)
        w[i] = 0x22;
    h_put(1);
    ntb_close(ntb);
}

static void test_link_down_and_up(void **state)
{
    struct h_proc b = h_spawn(FX.name, "b", link_receiver, NULL);
    struct h_proc a = h_spawn(FX.name, "a", link_sender, NULL);
    h_to(&a, h_from(&b));
    h_from(&a);
    assert_int_equal(h_cli(FX.name, "link down a b >/dev/null"), 0);
    h_to(&b, 1);
    h_to(&a, 1);
    h_from(&b);
    h_from(&a);
    h_to(&b, 1); /* receiver checks nothing landed */
    h_from(&b);
    assert_int_equal(h_cli(FX.name, "link up a b >/dev/null"), 0);
    h_to(&a, 1);
    h_from(&a);
    h_to(&b, 1);
    h_from(&b);
    assert_int_equal(h_join(&a), 0);
    assert_int_equal(h_join(&b), 0);
}

/* ---------------------------------------------------------------- DMA engine */

static void dma_receiver(void *arg)
{
    uint8_t *buf;
    uint64_t dma;
    struct ntb_dev *ntb = expose(&buf, &dma);
    for (int i = 0; i < BUF; i++)
        buf[i] = (uint8_t)(255 - i % 251);
    h_put(dma);
    h_get();
    ntb_close(ntb);
}

static void dma_sender(void *arg)
{
    struct ntb_dev *ntb = ntb_open(0);
    CHECK(ntb);
    CHECK(ntb_dma_chan_count(ntb) > 0);
    struct ntb_dma_chan *ch = ntb_dma_chan_request(ntb);
    CHECK(ch);
    uint64_t src_bus, dst_bus, win;
    uint8_t *src = ntb_dma_alloc(ntb, 2 * BUF, &src_bus);
    CHECK(src);
    dst_bus = src_bus + BUF;
    uint8_t *back = src + BUF;
    h_get();
    CHECK_EQ(ntb_peer_mw_get_addr(ntb, 0, &win, NULL), 0);
    /* Remote -> local (a DMA read through the window). */
    int64_t c = ntb_dma_submit(ch, dst_bus, win, BUF, true);
    CHECK(c > 0);
    CHECK_EQ(ntb_dma_wait(ch, c, 5000), 0);
    for (int i = 0; i < BUF; i++)
        CHECK_EQ(back[i], (uint8_t)(255 - i % 251));
    /* Local -> remote (a DMA write), then read it back through the window by DMA too. */
    for (int i = 0; i < BUF; i++)
        src[i] = (uint8_t)(i % 253);
    c = ntb_dma_submit(ch, win, src_bus, BUF, true);
    CHECK(c > 0);
    CHECK_EQ(ntb_dma_wait(ch, c, 5000), 0);
    memset(back, 0, BUF);
    c = ntb_dma_submit(ch, dst_bus, win, BUF, false);
    CHECK_EQ(ntb_dma_wait(ch, c, 5000), 0);
    for (int i = 0; i < BUF; i++)
        CHECK_EQ(back[i], (uint8_t)(i % 253));
    /* A copy into no region at all: a master abort, reported; nothing written. */
    c = ntb_dma_submit(ch, 0x7000000000ull, src_bus, 4096, true);
    CHECK_EQ(ntb_dma_wait(ch, c, 5000), -EIO);
    ntb_dma_chan_release(ch);
    h_put(1);
    ntb_close(ntb);
}

static void test_dma_copy_with_completion(void **state)
{
    struct h_proc b = h_spawn(FX.name, "b", dma_receiver, NULL);
    struct h_proc a = h_spawn(FX.name, "a", dma_sender, NULL);
    h_to(&a, h_from(&b));
    h_to(&b, h_from(&a));
    assert_int_equal(h_join(&a), 0);
    assert_int_equal(h_join(&b), 0);
}

/* ---------------------------------------------------------------- agent entries */

static void takeover_app(void *arg)
{
    struct ntb_dev *ntb = ntb_open(0);
    CHECK(ntb);
    uint64_t dma;
    void *buf = ntb_dma_alloc(ntb, 4096, &dma);
    CHECK(buf);
    int widx = (int)h_get(); /* the entry a's agent keeps onto b's mailboxes */
    CHECK_EQ(ntb_mw_set_trans(ntb, 0, widx, dma, 4096), -EBUSY);
    CHECK_EQ(ntb_mw_clear_trans(ntb, 0, widx), -EBUSY);
    h_put(1);
    ntb_close(ntb);
}

static void test_agent_lut_entries_are_protected(void **state)
{
    assert_int_equal(h_cli(FX.name, "agent-ping a b >/dev/null"), 0);
    struct fab *f;
    assert_int_equal(fab_attach(FX.name, -1, &f), 0);
    uint32_t ai = (uint32_t)fab_adapter_by_name(f, "a.ntb0");
    struct fab_adapter *a = fab_adapter(f, ai);
    int agent_entry = -1;
    for (uint32_t i = 0; i < a->lut_entries; i++)
        if (fab_lut(f, a)[i].flags & FAB_LUT_AGENT)
            agent_entry = (int)i;
    assert_true(agent_entry >= 0);
    struct h_proc b = h_spawn(FX.name, "b", takeover_app, NULL);
    h_to(&b, (uint64_t)agent_entry);
    h_from(&b);
    assert_int_equal(h_join(&b), 0);
    assert_true(fab_lut(f, a)[agent_entry].flags & FAB_LUT_AGENT);
    fab_detach(f);
    assert_int_equal(h_cli(FX.name, "agent-ping a b >/dev/null"), 0);
}

/* ---------------------------------------------------------------- host crash */

static void crash_victim(void *arg)
{
    struct ntb_dev *ntb = ntb_open(0);
    CHECK(ntb);
    h_put(1);
    pause(); /* killed with its host */
}

static void crash_peer(void *arg)
{
    struct ntb_dev *ntb = ntb_open(0);
    CHECK(ntb);
    uint64_t seen = 0;
    ntb_link_event_wait(ntb, &seen, 0);
    CHECK(ntb_link_is_up(ntb, NULL, NULL) & 1);
    h_put(1);
    h_get(); /* b was killed */
    CHECK_EQ(ntb_link_event_wait(ntb, &seen, 2000), 0);
    CHECK_EQ(ntb_link_is_up(ntb, NULL, NULL), 0);
    h_put(1);
    h_get(); /* b was started again */
    CHECK(ntb_link_is_up(ntb, NULL, NULL) & 1);
    h_put(1);
    ntb_close(ntb);
}

static void test_host_kill_and_start(void **state)
{
    struct h_proc v = h_spawn(FX.name, "b", crash_victim, NULL);
    struct h_proc a = h_spawn(FX.name, "a", crash_peer, NULL);
    h_from(&v);
    h_from(&a);
    assert_int_equal(h_cli(FX.name, "host kill b >/dev/null"), 0);
    h_to(&a, 1);
    h_from(&a);
    assert_int_equal(h_join(&v), 128 + SIGKILL); /* applications die with their host */
    assert_int_equal(h_cli(FX.name, "host start b >/dev/null"), 0);
    h_to(&a, 1);
    h_from(&a);
    assert_int_equal(h_join(&a), 0);
    assert_int_equal(h_cli(FX.name, "agent-ping a b >/dev/null"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_store_lands_in_peer_ram),
        cmocka_unit_test(test_lut_and_window_limits),
        cmocka_unit_test(test_doorbells),
        cmocka_unit_test(test_scratchpads),
        cmocka_unit_test(test_link_down_and_up),
        cmocka_unit_test(test_dma_copy_with_completion),
        cmocka_unit_test(test_agent_lut_entries_are_protected),
        cmocka_unit_test(test_host_kill_and_start),
    };
    return cmocka_run_group_tests(tests, setup, fx_teardown);
}
