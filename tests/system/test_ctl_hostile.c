/*
 * A hostile (or buggy) application against its host's agent: the control socket gets
 * thousands of requests of random operation and arguments (biased towards small numbers, so
 * handlers get past their first checks) and packets of the wrong size. The agent must answer
 * or drop each, stay alive (under the sanitizer build any stray access would abort it), keep
 * serving other clients, and release everything the client got once it hangs up. Then the
 * things an application must not get its agent to do for another host or another client:
 * lend out another host's device, free memory or remove a segment it does not own, return a
 * device another process holds. A process's holdings stay while any of its connections is
 * open (the library opens and closes its own as it is used).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "fabric.h"
#include "fab_tables.h"
#include "agent_proto.h"
#include "ntblend/seg.h"
#include "ntblend/smartio.h"

static struct fx FX;
static const struct fx_opts FX_OPTS = { .topo = "tests/system/topologies/smartio3-iommu.ini",
                                        .attach = fx_attach };

#define REQUESTS 20000

static char DIR_[128];

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static uint64_t small_or_any(void)
{
    switch (next_rand() % 5) {
    case 0: return next_rand();
    case 1: return next_rand() % 4096 * 4096; /* page-aligned addresses and sizes */
    case 2: return 4096ull << next_rand() % 6; /* sizes and alignments that are accepted */
    default: return next_rand() % 8;
    }
}

static int call(int fd, uint32_t op, uint32_t flags, uint64_t a, uint64_t b, uint64_t c,
                struct agent_rsp *rsp)
{
    struct agent_req req = { .op = op, .flags = flags, .a = a, .b = b, .c = c };
    struct agent_rsp tmp;
    return agent_call(fd, &req, rsp ? rsp : &tmp, 2000);
}

/* One storm of REQUESTS random requests on a fresh connection, then hang up. Runs in a
 * process of its own, so its holdings are its own and go when it exits. */
static void storm_in_child(uint32_t host, int32_t agent_pid)
{
    rng = 0x2545f4914f6cdd1dull; /* the same storm every time */
    int fd = agent_connect(DIR_, host);
    CHECK(fd >= 0);
    uint32_t answered = 0, accepted = 0, dropped = 0;
    for (int i = 0; i < REQUESTS; i++) {
        if (next_rand() % 64 == 0) { /* a packet of the wrong size */
            uint8_t junk[64];
            for (size_t k = 0; k < sizeof junk; k++)
                junk[k] = (uint8_t)next_rand();
            size_t len = next_rand() % sizeof junk;
            if (send(fd, junk, len, MSG_NOSIGNAL) < 0 || len != sizeof(struct agent_req)) {
                /* the agent may hang up on a malformed client: reconnect and go on */
                close(fd);
                fd = agent_connect(DIR_, host);
                CHECK(fd >= 0);
                dropped++;
            }
            continue;
        }
        uint32_t op = next_rand() % 5 ? 1 + next_rand() % 22 : (uint32_t)next_rand() % 64;
        if (op == AGENT_PEER_PING)
            continue; /* legitimate and slow; not what this test is about */
        struct agent_rsp rsp;
        int rc = call(fd, op, (uint32_t)small_or_any(), small_or_any(), small_or_any(),
                      small_or_any(), &rsp);
        if (rc == -ECONNRESET || rc == -EPIPE) {
            close(fd);
            fd = agent_connect(DIR_, host);
            CHECK(fd >= 0);
            dropped++;
            continue;
        }
        answered += rc != -ETIMEDOUT;
        accepted += rc == 0;
        if (!(i % 1000))
            CHECK_EQ(kill(agent_pid, 0), 0);
    }
    printf("%d requests: %u answered, %u accepted, %u connections dropped\n", REQUESTS,
           answered, accepted, dropped);
    CHECK(accepted > 0); /* some requests got past the checks */
    close(fd);
}

static void storm_main(void *arg)
{
    uint32_t host = (uint32_t)(uintptr_t)arg;
    storm_in_child(host, atomic_load(&fab_host(FX.f, host)->agent_pid));
}

static void storm(uint32_t host, int32_t agent_pid)
{
    (void)agent_pid;
    struct h_proc p =
        h_spawn(FX.name, fab_host(FX.f, host)->name, storm_main, (void *)(uintptr_t)host);
    assert_int_equal(h_join(&p), 0);
    /* Borrows it asked the host to hold (what `ntblend device borrow` does) and devices it
     * had hot-added into the host's tree (`ntblend device lend`) stay until returned or
     * reclaimed: undo those. */
    h_cli(FX.name, "device reclaim nvme0 >/dev/null 2>&1");
    h_cli(FX.name, "device reclaim accel0 >/dev/null 2>&1");
    h_cli(FX.name, "device return nvme0 --host b >/dev/null 2>&1");
    h_cli(FX.name, "device return accel0 --host b >/dev/null 2>&1");
    h_cli(FX.name, "device add nvme0 >/dev/null 2>&1"); /* reclaim withdrew them */
    h_cli(FX.name, "device add accel0 >/dev/null 2>&1");
}

/* Wait until the tables are back to `want` and no process or segment holds memory of
 * `host` any more (the interrupt-page pool stays: its pages are reused, never freed). */
static void settle(uint32_t host, const struct fab_tables *want)
{
    int fd = agent_connect(DIR_, host);
    assert_true(fd >= 0);
    struct fab_tables now;
    struct agent_rsp rsp = { 0 };
    for (int i = 0; i < 300; i++) {
        fab_tables_snapshot(FX.f, &now);
        assert_int_equal(call(fd, AGENT_MEMORY, 0, 0, 0, 0, &rsp), 0); /* served meanwhile */
        if (!memcmp(&now, want, sizeof now) && rsp.a == 0 && rsp.b == 0)
            break;
        usleep(10000);
    }
    assert_memory_equal(&now, want, sizeof now);
    if (rsp.a || rsp.b)
        fail_msg("host b still has %llu bytes held by processes and %llu by segments",
                 (unsigned long long)rsp.a, (unsigned long long)rsp.b);
    close(fd);
}

static void test_random_requests_from_an_application(void **state)
{
    (void)state;
    uint32_t hb = (uint32_t)fab_host_by_name(FX.f, "b");
    int32_t pid = atomic_load(&fab_host(FX.f, hb)->agent_pid);
    assert_int_equal(h_cli(FX.name, "device add nvme0 >/dev/null"), 0);
    assert_int_equal(h_cli(FX.name, "device add accel0 >/dev/null"), 0);
    struct fab_tables before;
    fab_tables_snapshot(FX.f, &before);
    storm(hb, pid);
    /* Hanging up released what the client got: windows, requester IDs, IOMMU mappings, memory
     * and segments. And again, on an agent that has been through one storm already. */
    settle(hb, &before);
    storm(hb, pid);
    settle(hb, &before);
    assert_int_equal(kill(pid, 0), 0);
    assert_int_equal(atomic_load(&fab_host(FX.f, hb)->agent_pid), pid);
}

/* On host b: hold a device, a segment and memory, then wait. */
static void holder(void *arg)
{
    (void)arg;
    int fd = agent_connect(getenv("NTBLEND_TEST_DIR"), (uint32_t)atoi(getenv("NTBLEND_TEST_HOST")));
    CHECK(fd >= 0);
    struct agent_rsp rsp;
    CHECK_EQ(call(fd, AGENT_ALLOC, 0, 4096, 4096, 0, &rsp), 0);
    h_put(rsp.a);
    sio_dev_t *d;
    CHECK_EQ(sio_borrow((uint32_t)sio_find("accel0"), SIO_EXCLUSIVE, &d), 0);
    seg_desc_t *sd;
    seg_local_t *seg;
    CHECK_EQ(seg_open(&sd), 0);
    CHECK_EQ(seg_create(sd, &seg, 77, 65536), 0);
    h_put(1);
    h_get();
    CHECK_EQ(sio_return(d), 0);
    CHECK_EQ(seg_remove(seg), 0);
    seg_close(sd);
    close(fd);
    h_put(1);
}

static void test_what_an_application_may_not_do(void **state)
{
    (void)state;
    uint32_t hb = (uint32_t)fab_host_by_name(FX.f, "b");
    char hs[16];
    snprintf(hs, sizeof hs, "%u", hb);
    setenv("NTBLEND_TEST_DIR", DIR_, 1);
    setenv("NTBLEND_TEST_HOST", hs, 1);
    struct h_proc p = h_spawn(FX.name, "b", holder, NULL);
    uint64_t theirs = h_from(&p);
    int fd = agent_connect(DIR_, hb);
    assert_true(fd >= 0);
    assert_int_equal(call(fd, AGENT_FREE, 0, theirs, 0, 0, NULL), -EPERM);
    h_from(&p); /* it has used the library since (which opens and closes its own connection) */
    struct agent_rsp rsp;
    assert_int_equal(call(fd, AGENT_HELLO, 0, AGENT_PROTO_VERSION, 0, 0, &rsp), 0);
    int nvme = fab_func_by_name(FX.f, "nvme0"), acc = fab_func_by_name(FX.f, "accel0");
    /* Lend out (or withdraw) a device of another host. */
    assert_int_equal(call(fd, AGENT_DEV_AVAILABLE, 0, (uint64_t)nvme, 0, 0, NULL), -EREMOTE);
    /* Return a device another process on this host holds. */
    assert_true(call(fd, AGENT_DEV_RETURN, 0, (uint64_t)acc, 0, 0, NULL) < 0);
    assert_true(atomic_load(&fab_func(FX.f, (uint32_t)acc)->lend_borrowers[0]) & (1ull << hb));
    /* Remove another process's segment. */
    assert_true(call(fd, AGENT_SEG_REMOVE, 0, 77, 0, 0, NULL) < 0);
    /* Free memory it did not allocate: the agents' mailboxes, another process's block (still
     * that process's: a connection it closed does not take the others' holdings along). */
    assert_true(call(fd, AGENT_FREE, 0, 0, 0, 0, NULL) < 0);
    assert_int_equal(call(fd, AGENT_FREE, 0, theirs, 0, 0, NULL), -EPERM);
    /* Have its connection's events posted into memory it does not own (the agent writes
     * there): the mailboxes, another process's block. Nor free its event word while the
     * connection lasts (the memory would go to someone else, the events still to it). */
    uint32_t node = fab_host(FX.f, hb)->node_id;
    assert_int_equal(call(fd, AGENT_SEG_CREATE, 0, 78, 4096, 0, &rsp), 0);
    assert_int_equal(call(fd, AGENT_SEG_PREPARE, 0, 78, 0, 0, NULL), 0);
    assert_int_equal(call(fd, AGENT_SEG_AVAILABLE, 0, 78, 0, 1, NULL), 0);
    assert_int_equal(call(fd, AGENT_SEG_CONNECT, 0, node, 78, 0, NULL), -EINVAL);
    assert_int_equal(call(fd, AGENT_SEG_CONNECT, 0, node, 78, 8192, NULL), -EINVAL);
    assert_int_equal(call(fd, AGENT_SEG_CONNECT, 0, node, 78, theirs, NULL), -EINVAL);
    assert_int_equal(call(fd, AGENT_ALLOC, 0, 4096, 4096, 0, &rsp), 0);
    uint64_t ev = rsp.a;
    assert_int_equal(call(fd, AGENT_SEG_CONNECT, 0, node, 78, ev + 64, &rsp), 0);
    uint64_t conn = rsp.c;
    assert_int_equal(call(fd, AGENT_FREE, 0, ev, 0, 0, NULL), -EBUSY);
    assert_int_equal(call(fd, AGENT_SEG_DISCONNECT, 0, conn >> 32, (uint32_t)conn, 0, NULL), 0);
    assert_int_equal(call(fd, AGENT_FREE, 0, ev, 0, 0, NULL), 0);
    assert_int_equal(call(fd, AGENT_SEG_REMOVE, 0, 78, 0, 0, NULL), 0);
    close(fd);
    h_to(&p, 1);
    h_from(&p);
    assert_int_equal(h_join(&p), 0);
}

static int setup(void **state)
{
    if (fx_setup(state, &FX, "ctlhostile", &FX_OPTS))
        return -1;
    return fab_dir(FX.name, DIR_, sizeof DIR_);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_requests_from_an_application),
        cmocka_unit_test(test_what_an_application_may_not_do),
    };
    return cmocka_run_group_tests(tests, setup, fx_teardown);
}
