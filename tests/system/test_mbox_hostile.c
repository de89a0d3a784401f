/*
 * A hostile (or buggy) peer host against an agent's mailbox. Host b's slot in host a's
 * mailbox area gets thousands of requests of random type, length and contents (words biased
 * towards small numbers, so handlers get past their first checks), each announced with the
 * agent doorbell as a real peer would. Host a's agent must answer every one (or ignore it), must
 * stay alive — under the sanitizer build any stray access aborts it — and must still serve the
 * other hosts. Before the storm, two requests check isolation: b may not open a's IOMMU for
 * a requester that is not one of a's adapters, nor beyond a's RAM. When b then crashes,
 * whatever b's requests got a to hold (borrows, windows, requester IDs, IOMMU mappings,
 * segments) must be released: the tables return to where they were before the storm.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "fabric.h"
#include "fab_tables.h"
#include "ntblend/seg.h"
#include "ntblend/smartio.h"

static struct fx FX;
static const struct fx_opts FX_OPTS = { .topo = "tests/system/topologies/smartio3-iommu.ini",
                                        .attach = fx_attach };

#define MESSAGES 20000
#define SLOT_HALF (FAB_MBOX_SLOT / 2)
#define DATA_MAX (SLOT_HALF - 8)

/* The mailbox half as the agents lay it out (src/agent/mbox.c). */
struct half {
    _Atomic uint32_t seq;
    uint32_t len;
    uint8_t data[DATA_MAX];
};

/* Request types and the INBOUND_MAP payload, as src/agent/agent.h and dev.c define them. */
#define MBOX_TYPE_INBOUND_MAP 11u
struct inbound_req {
    uint64_t addr, size;
    uint32_t rid;
};

static struct half *REQ, *RSP;
static uint32_t SEQ, FROM, TO;

/* Post one request into b's slot in a's mailbox and ring a's agent, as host b's agent would.
 * Returns the handler's result, or 1 when no answer came within 2 s. */
static int post(const void *msg, uint32_t len)
{
    uint32_t seq = ++SEQ;
    memcpy(REQ->data, msg, len < DATA_MAX ? len : DATA_MAX);
    REQ->len = len; /* may claim more than the slot holds */
    atomic_store_explicit(&REQ->seq, seq, memory_order_release);
    assert_int_equal(fab_db_ring(FX.f, FROM, TO, fab_agent_bit(fab_adapter(FX.f, TO))), 0);
    for (int spin = 0; spin < 200000 && atomic_load(&RSP->seq) != seq; spin++)
        if (spin > 1000)
            usleep(10);
    if (atomic_load(&RSP->seq) != seq)
        return 1;
    int32_t rc;
    memcpy(&rc, RSP->data + 4, 4);
    return rc;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)rng;
}

static void test_random_requests_from_a_peer(void **state)
{
    (void)state;
    uint32_t ha = (uint32_t)fab_host_by_name(FX.f, "a"), hb = (uint32_t)fab_host_by_name(FX.f, "b");
    int32_t pid = atomic_load(&fab_host(FX.f, ha)->agent_pid);
    /* Make a's devices available, so borrow and map requests can get somewhere. */
    assert_int_equal(h_cli(FX.name, "device add nvme0 >/dev/null"), 0);
    assert_int_equal(h_cli(FX.name, "device add accel0 >/dev/null"), 0);
    struct fab_tables before, after;
    fab_tables_snapshot(FX.f, &before);

    REQ = fab_ram(FX.f, ha, (uint64_t)hb * FAB_MBOX_SLOT, SLOT_HALF);
    RSP = fab_ram(FX.f, hb, (uint64_t)ha * FAB_MBOX_SLOT + SLOT_HALF, SLOT_HALF);
    assert_non_null(REQ);
    assert_non_null(RSP);
    FROM = fab_host(FX.f, hb)->adapter_first;
    TO = fab_host(FX.f, ha)->adapter_first;
    SEQ = atomic_load(&REQ->seq) + 1000;

    /* Isolation first: a peer may open a's IOMMU only for traffic through a's own adapters,
     * only onto a's RAM. */
    uint8_t msg[DATA_MAX];
    struct inbound_req in = { .addr = 1 << 20, .size = 1 << 20,
                              .rid = fab_func(FX.f, (uint32_t)fab_func_by_name(FX.f, "nvme0"))->rid };
    uint32_t hdr[2] = { MBOX_TYPE_INBOUND_MAP, 0 };
    memcpy(msg, hdr, sizeof hdr);
    memcpy(msg + sizeof hdr, &in, sizeof in);
    assert_int_equal(post(msg, sizeof hdr + sizeof in), -EINVAL); /* a device's own rid */
    in.rid = fab_adapter(FX.f, TO)->rid;
    in.addr = fab_host(FX.f, ha)->ram_size;
    memcpy(msg + sizeof hdr, &in, sizeof in);
    assert_int_equal(post(msg, sizeof hdr + sizeof in), -EINVAL); /* beyond a's RAM */
    fab_tables_snapshot(FX.f, &after);
    assert_memory_equal(&after, &before, sizeof after);

    uint32_t answered = 0, accepted = 0, refused = 0;
    for (int i = 0; i < MESSAGES; i++) {
        uint32_t len = next_rand() % 8 ? next_rand() % 128 : next_rand() % (DATA_MAX + 64);
        for (uint32_t w = 0; w < DATA_MAX / 4; w++) {
            uint32_t v = next_rand() % 3 ? next_rand() % 8 : next_rand();
            memcpy(msg + 4 * w, &v, 4);
        }
        uint32_t type = next_rand() % 4 ? 1 + next_rand() % 14 : next_rand() % 40;
        memcpy(msg, &type, 4);
        int rc = post(msg, len);
        answered += rc != 1;
        accepted += rc == 0;
        refused += rc < 0 && rc != -EOPNOTSUPP;
        if (!(i % 500))
            assert_int_equal(kill(pid, 0), 0); /* a's agent is alive */
    }
    assert_int_equal(kill(pid, 0), 0);
    assert_int_equal(atomic_load(&fab_host(FX.f, ha)->agent_pid), pid);
    print_message("%u requests, %u answered: %u accepted, %u refused by a handler\n", MESSAGES,
                  answered, accepted, refused);
    assert_true(answered > MESSAGES / 2);
    assert_true(refused > 0); /* the handlers saw the requests, not just the dispatcher */
    /* a still serves the others. */
    assert_int_equal(h_cli(FX.name, "agent-ping c a >/dev/null"), 0);

    /* b goes down: whatever its requests made a hold is released. */
    assert_int_equal(h_cli(FX.name, "host kill b >/dev/null"), 0);
    assert_int_equal(h_cli(FX.name, "host start b >/dev/null"), 0);
    fab_tables_settle(FX.f, &before, &after);
    assert_memory_equal(&after, &before, sizeof after);
    assert_int_equal(h_cli(FX.name, "agent-ping b a >/dev/null"), 0);
}

/* ------------------------------------------------- stale requests, and too many of them */

#define MBOX_TYPE_SEG_CONNECT 2u
#define MBOX_TYPE_DEV_BORROW 6u
#define MBOX_TYPE_DEV_RETURN 8u
#define SEG_ID 4711u
#define CONN_CAP 4096u /* SEG_CONN_PER_HOST, src/agent/aseg_int.h */
struct lend_req { /* src/agent/lend_int.h */
    uint32_t fn, mode, target, pages;
    uint64_t addr;
    uint32_t id, boot;
    uint32_t pid, pad;
    uint64_t iova;
};
struct seg_req { /* src/agent/aseg_int.h */
    uint32_t id, from_adapter, boot_gen;
};

static int post_typed(uint32_t type, const void *payload, uint32_t len)
{
    uint8_t msg[64];
    uint32_t hdr[2] = { type, 0 };
    memcpy(msg, hdr, sizeof hdr);
    memcpy(msg + sizeof hdr, payload, len);
    return post(msg, (uint32_t)sizeof hdr + len);
}

/* A process of host a with a segment available on a's adapter. */
static void seg_holder(void *arg)
{
    (void)arg;
    seg_desc_t *sd;
    seg_local_t *seg;
    CHECK_EQ(seg_open(&sd), 0);
    CHECK_EQ(seg_create(sd, &seg, SEG_ID, 4096), 0);
    CHECK_EQ(seg_prepare(seg, 0), 0);
    CHECK_EQ(seg_set_available(seg, 0), 0);
    h_put(1);
    h_get();
    seg_remove(seg);
    seg_close(sd);
}

/* A request carries the boot count of the host that sent it: one from a previous life of b
 * (b has rebooted since it was written) is refused, for a borrow and for a segment
 * connection alike. And b may hold only so many connections to a's segments: one more is
 * refused with -EUSERS, and they all go when b goes. */
static void test_stale_and_excess_requests(void **state)
{
    (void)state;
    uint32_t ha = (uint32_t)fab_host_by_name(FX.f, "a"), hb = (uint32_t)fab_host_by_name(FX.f, "b");
    REQ = fab_ram(FX.f, ha, (uint64_t)hb * FAB_MBOX_SLOT, SLOT_HALF);
    RSP = fab_ram(FX.f, hb, (uint64_t)ha * FAB_MBOX_SLOT + SLOT_HALF, SLOT_HALF);
    FROM = fab_host(FX.f, hb)->adapter_first;
    TO = fab_host(FX.f, ha)->adapter_first;
    SEQ = atomic_load(&REQ->seq) + 1000;
    assert_int_equal(h_cli(FX.name, "device add accel0 >/dev/null 2>&1"), 0);
    struct fab_tables base, before, after;
    fab_tables_snapshot(FX.f, &base);
    struct h_proc p = h_spawn(FX.name, "a", seg_holder, NULL);
    h_from(&p);
    fab_tables_snapshot(FX.f, &before);
    uint32_t boot = atomic_load(&fab_host(FX.f, hb)->boot_gen);
    uint32_t acc = (uint32_t)fab_func_by_name(FX.f, "accel0");

    struct lend_req lr = { .fn = acc, .mode = SIO_SHARED, .boot = boot - 1 };
    assert_int_equal(post_typed(MBOX_TYPE_DEV_BORROW, &lr, sizeof lr), -ESTALE);
    assert_int_equal(atomic_load(&fab_func(FX.f, acc)->lend_borrowers[0]), 0);
    struct seg_req sr = { .id = SEG_ID, .from_adapter = FROM, .boot_gen = boot - 1 };
    assert_int_equal(post_typed(MBOX_TYPE_SEG_CONNECT, &sr, sizeof sr), -ESTALE);
    fab_tables_snapshot(FX.f, &after);
    assert_memory_equal(&after, &before, sizeof after);
    /* The same requests of b's current life act. */
    lr.boot = boot;
    assert_int_equal(post_typed(MBOX_TYPE_DEV_BORROW, &lr, sizeof lr), 0);
    assert_true(atomic_load(&fab_func(FX.f, acc)->lend_borrowers[0]) & (1ull << hb));
    assert_int_equal(post_typed(MBOX_TYPE_DEV_RETURN, &lr, sizeof lr), 0);
    sr.boot_gen = boot;
    for (uint32_t i = 0; i < CONN_CAP; i++)
        assert_int_equal(post_typed(MBOX_TYPE_SEG_CONNECT, &sr, sizeof sr), 0);
    assert_int_equal(post_typed(MBOX_TYPE_SEG_CONNECT, &sr, sizeof sr), -EUSERS);
    /* c is another host: it may still connect. */
    assert_int_equal(h_cli(FX.name, "agent-ping c a >/dev/null"), 0);

    /* b goes: its connections go with it (its next life may connect again: were they kept,
     * the cap would refuse it). */
    assert_int_equal(h_cli(FX.name, "host kill b >/dev/null"), 0);
    assert_int_equal(h_cli(FX.name, "host start b >/dev/null"), 0);
    sr.boot_gen = atomic_load(&fab_host(FX.f, hb)->boot_gen);
    SEQ = atomic_load(&REQ->seq) + 1000;
    int rc = 1;
    for (int i = 0; i < 100 && rc; i++) { /* once a has seen b's reboot */
        rc = post_typed(MBOX_TYPE_SEG_CONNECT, &sr, sizeof sr);
        if (rc)
            usleep(20000);
    }
    assert_int_equal(rc, 0);
    /* The segment removed, and b gone once more: nothing is left of any of it. */
    h_to(&p, 1);
    assert_int_equal(h_join(&p), 0);
    assert_int_equal(h_cli(FX.name, "host kill b >/dev/null"), 0);
    assert_int_equal(h_cli(FX.name, "host start b >/dev/null"), 0);
    fab_tables_settle(FX.f, &base, &after);
    assert_memory_equal(&after, &base, sizeof after);
}

static int setup(void **state) { return fx_setup(state, &FX, "hostile", &FX_OPTS); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_requests_from_a_peer),
        cmocka_unit_test(test_stale_and_excess_requests),
    };
    return cmocka_run_group_tests(tests, setup, fx_teardown);
}
