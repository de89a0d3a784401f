/*
 * SISCI segment events on examples/topologies/smartio3.ini (a, b, c are nodes 4, 8, 12 on one
 * switch): the owner's side (SCIWaitForLocalSegmentEvent and local segment callbacks) hears
 * of each connection and disconnection with the connecting node and its own adapter, and of a
 * connector's path going down and coming back; the connector's side (remote segment waits
 * and callbacks) hears of the same link and of the owner removing the segment.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <semaphore.h>
#include <stdatomic.h>

#include "sisci_util.h"

#define WAITED 1000u  /* segment id: the owner waits for its events */
#define CALLED 1001u  /* ... the owner has a callback */
#define T_MS 20000u

static int setup(void **state) { return sisci_setup(state, "sisci_events"); }

/* What a callback was told, in order. */
struct told {
    sem_t sem;
    _Atomic unsigned n;
    unsigned reason[16], node[16], adapter[16];
    sci_error_t status[16];
};

static void tell(struct told *t, unsigned reason, unsigned node, unsigned adapter, sci_error_t st)
{
    unsigned i = atomic_load(&t->n);
    if (i < 16) {
        t->reason[i] = reason;
        t->node[i] = node;
        t->adapter[i] = adapter;
        t->status[i] = st;
    }
    atomic_fetch_add(&t->n, 1);
    sem_post(&t->sem);
}

static sci_callback_action_t on_local(void *arg, sci_local_segment_t seg,
                                      sci_segment_cb_reason_t reason, unsigned int node,
                                      unsigned int adapter, sci_error_t status)
{
    tell(arg, reason, node, adapter, status);
    return SCI_CALLBACK_CONTINUE;
}

static sci_callback_action_t on_remote(void *arg, sci_remote_segment_t seg,
                                       sci_segment_cb_reason_t reason, sci_error_t status)
{
    tell(arg, reason, 0, 0, status);
    return SCI_CALLBACK_CONTINUE;
}

/* The next event of a segment the owner waits on: its reason, node and adapter checked. */
static void expect_local(sci_local_segment_t s, unsigned reason, unsigned node)
{
    unsigned n = 0, a = 9;
    sci_segment_cb_reason_t why;
    SCI_OK(why = SCIWaitForLocalSegmentEvent(s, &n, &a, T_MS, 0, &err));
    CHECK_EQ(why, reason);
    CHECK_EQ(n, node);
    CHECK_EQ(a, 0);
}

static void owner(void *arg)
{
    sci_desc_t sd = sci_start();
    sci_local_segment_t w, c;
    struct told t = { 0 };
    sem_init(&t.sem, 0, 0);
    SCI_OK(SCICreateSegment(sd, &w, WAITED, 8192, NULL, NULL, 0, &err));
    SCI_OK(SCICreateSegment(sd, &c, CALLED, 8192, on_local, &t, SCI_FLAG_USE_CALLBACK, &err));
    sci_error_t err;
    unsigned n, a;
    SCIWaitForLocalSegmentEvent(w, &n, &a, 0, 0, &err);
    CHECK_EQ(err, SCI_ERR_TIMEOUT); /* nobody connected yet */
    SCIWaitForLocalSegmentEvent(c, &n, &a, 0, 0, &err);
    CHECK_EQ(err, SCI_ERR_ILLEGAL_OPERATION); /* its callback has them */
    SCI_OK(SCIPrepareSegment(w, 0, 0, &err));
    SCI_OK(SCISetSegmentAvailable(w, 0, 0, &err));
    SCI_OK(SCIPrepareSegment(c, 0, 0, &err));
    SCI_OK(SCISetSegmentAvailable(c, 0, 0, &err));
    h_put(1);
    /* b and c connected to w, b to c as well */
    CHECK_EQ(h_get(), 1);
    unsigned first = 0, second = 0;
    sci_segment_cb_reason_t why;
    SCI_OK(why = SCIWaitForLocalSegmentEvent(w, &first, &a, T_MS, 0, &err));
    CHECK_EQ(why, SCI_CB_CONNECT);
    SCI_OK(why = SCIWaitForLocalSegmentEvent(w, &second, &a, T_MS, 0, &err));
    CHECK_EQ(why, SCI_CB_CONNECT);
    CHECK_EQ(first + second, NODE_B + NODE_C);
    CHECK(first != second);
    sem_wait(&t.sem);
    CHECK_EQ(t.reason[0], SCI_CB_CONNECT);
    CHECK_EQ(t.node[0], NODE_B);
    CHECK_EQ(t.adapter[0], 0);
    CHECK_EQ(t.status[0], SCI_ERR_OK);
    h_put(2);
    CHECK_EQ(h_get(), 2); /* c's cable is down */
    expect_local(w, SCI_CB_NOT_OPERATIONAL, NODE_C);
    h_put(3);
    CHECK_EQ(h_get(), 3); /* ... and up again */
    expect_local(w, SCI_CB_OPERATIONAL, NODE_C);
    h_put(4);
    CHECK_EQ(h_get(), 4); /* c disconnected from w, b from c */
    expect_local(w, SCI_CB_DISCONNECT, NODE_C);
    sem_wait(&t.sem);
    CHECK_EQ(atomic_load(&t.n), 2);
    CHECK_EQ(t.reason[1], SCI_CB_DISCONNECT);
    CHECK_EQ(t.node[1], NODE_B);
    /* removed while b is connected: b hears of it */
    SCI_OK(SCIRemoveSegment(w, 0, &err));
    SCI_OK(SCIRemoveSegment(c, 0, &err));
    h_put(5);
    sci_end(sd);
}

/* b: connected to both, told of w's removal by its callback. */
static void user_b(void *arg)
{
    sci_desc_t sd = sci_start();
    sci_remote_segment_t rw, rc;
    struct told t = { 0 };
    sem_init(&t.sem, 0, 0);
    h_get();
    SCI_OK(SCIConnectSegment(sd, &rw, NODE_A, WAITED, 0, on_remote, &t, T_MS,
                             SCI_FLAG_USE_CALLBACK, &err));
    SCI_OK(SCIConnectSegment(sd, &rc, NODE_A, CALLED, 0, NULL, NULL, T_MS, 0, &err));
    h_put(1);
    CHECK_EQ(h_get(), 4);
    SCI_OK(SCIDisconnectSegment(rc, 0, &err));
    h_put(4);
    CHECK_EQ(h_get(), 5);
    for (;;) { /* c's link came and went meanwhile: b's path did not */
        sem_wait(&t.sem);
        unsigned i = atomic_load(&t.n) - 1;
        CHECK(i < 16);
        CHECK(t.reason[i] != SCI_CB_NOT_OPERATIONAL);
        if (t.reason[i] == SCI_CB_LOST) {
            CHECK_EQ(t.status[i], SCI_ERR_SEGMENT_REMOVED);
            break;
        }
    }
    SCI_OK(SCIDisconnectSegment(rw, 0, &err));
    sci_end(sd);
}

/* c: connected to w, waits for its events: its own link going down and coming back. */
static void user_c(void *arg)
{
    sci_desc_t sd = sci_start();
    sci_remote_segment_t rw;
    h_get();
    SCI_OK(SCIConnectSegment(sd, &rw, NODE_A, WAITED, 0, NULL, NULL, T_MS, 0, &err));
    h_put(1);
    CHECK_EQ(h_get(), 2);
    sci_error_t status = 0;
    sci_segment_cb_reason_t why;
    SCI_OK(why = SCIWaitForRemoteSegmentEvent(rw, &status, T_MS, 0, &err));
    CHECK_EQ(why, SCI_CB_NOT_OPERATIONAL);
    CHECK_EQ(status, SCI_ERR_NO_LINK_ACCESS);
    h_put(2);
    CHECK_EQ(h_get(), 3);
    SCI_OK(why = SCIWaitForRemoteSegmentEvent(rw, &status, T_MS, 0, &err));
    CHECK_EQ(why, SCI_CB_OPERATIONAL);
    CHECK_EQ(status, SCI_ERR_OK);
    h_put(3);
    /* Not before the owner has seen the path back: its agent notices the link in its own
     * time, and a connection dropped first is only ever reported dropped. */
    CHECK_EQ(h_get(), 4);
    SCI_OK(SCIDisconnectSegment(rw, 0, &err));
    h_put(4);
    sci_end(sd);
}

static void test_segment_events(void **state)
{
    struct h_proc a = h_spawn(FX.name, "a", owner, NULL);
    struct h_proc b = h_spawn(FX.name, "b", user_b, NULL);
    struct h_proc c = h_spawn(FX.name, "c", user_c, NULL);
    assert_int_equal(h_from(&a), 1);
    h_to(&b, 1);
    h_to(&c, 1);
    assert_int_equal(h_from(&b), 1);
    assert_int_equal(h_from(&c), 1);
    h_to(&a, 1);
    assert_int_equal(h_from(&a), 2);
    assert_int_equal(h_cli(FX.name, "link down c sw0 >/dev/null"), 0);
    h_to(&a, 2);
    h_to(&c, 2);
    assert_int_equal(h_from(&a), 3);
    assert_int_equal(h_from(&c), 2);
    assert_int_equal(h_cli(FX.name, "link up c sw0 >/dev/null"), 0);
    h_to(&a, 3);
    h_to(&c, 3);
    assert_int_equal(h_from(&a), 4);
    assert_int_equal(h_from(&c), 3);
    h_to(&c, 4);
    assert_int_equal(h_from(&c), 4);
    h_to(&b, 4);
    assert_int_equal(h_from(&b), 4);
    h_to(&a, 4);
    assert_int_equal(h_from(&a), 5);
    h_to(&b, 5);
    assert_int_equal(h_join(&a), 0);
    assert_int_equal(h_join(&b), 0);
    assert_int_equal(h_join(&c), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_segment_events),
    };
    return cmocka_run_group_tests(tests, setup, fx_teardown);
}
