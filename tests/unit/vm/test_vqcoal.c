/*
 * Interrupt coalescing for a virtqueue (src/vm/vqcoal.c), on made-up clocks: a guest at queue
 * depth 1 (its next request only after the call for the last) is called at once for every
 * completion but the probes, which come one in VQ_COAL_PROBE batches and are held one window;
 * a guest that keeps sending requests whatever the calls (deep) gets several completions per
 * call, never more than VQ_COAL_MAX, never held longer than the window; a deep guest that
 * goes back to waiting for each completion is called at once again after VQ_COAL_MISSES held
 * batches; a hold ends once the guest stops sending for VQ_COAL_IDLE of its busy gaps, and
 * not while it keeps sending; nothing is held before the guest's pace is known. Behaviour only: no timing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "vqcoal.h"

#define US 1000ull

/* A guest at queue depth 1: each request is answered `service` later, and the guest sends the
 * next `think` after it is called. Runs n requests from *t; returns how many batches were held. */
static uint32_t run_qd1(struct vq_coal *c, uint64_t *t, uint32_t n, uint64_t service, uint64_t think)
{
    uint32_t held = 0;
    for (uint32_t i = 0; i < n; i++) {
        vq_coal_request(c, *t);
        *t += service;
        vq_coal_completion(c, *t);
        if (!vq_coal_due(c, *t)) {
            held++;
            assert_true(c->until > *t);
            assert_true(c->until - *t <= VQ_COAL_HOLD_MAX_NS);
            assert_false(vq_coal_due(c, c->until - 1));
            *t = c->until;
            assert_true(vq_coal_due(c, *t));
        }
        vq_coal_called(c);
        *t += think;
    }
    return held;
}

static void test_qd1(void **state)
{
    (void)state;
    struct vq_coal c = { 0 };
    uint64_t t = 1000 * US;
    uint32_t held = run_qd1(&c, &t, 100 * VQ_COAL_PROBE, 5 * US, 50 * US);
    /* One probe in VQ_COAL_PROBE batches (the first request has no pace yet: no hold). */
    assert_int_equal(held, 100);
    assert_int_equal(c.n_probes, 100);
    assert_int_equal(c.n_held, 100);
    assert_int_equal(c.n_calls, 100 * VQ_COAL_PROBE);
    assert_int_equal(c.n_completions, 100 * VQ_COAL_PROBE);
    assert_false(c.deep);
}

/* A guest that sends a request every `every` whatever the calls, each answered `service`
 * later; the back end calls as soon as vq_coal_due says so. Runs until `end`; returns the
 * largest batch one call carried. Every request is answered and called for at the end. */
static uint32_t run_open(struct vq_coal *c, uint64_t *t, uint64_t end, uint64_t every, uint64_t service)
{
    uint64_t next_req = *t, done_at[64];
    uint32_t out = 0, most = 0;
    while (out || c->waiting || next_req < end) {
        /* The next event: a request (until the end), a completion, or the end of a hold. */
        uint64_t next = next_req < end ? next_req : UINT64_MAX;
        for (uint32_t i = 0; i < out; i++)
            if (done_at[i] < next)
                next = done_at[i];
        if (c->waiting && c->until && c->until < next)
            next = c->until;
        *t = next;
        if (next_req < end && next == next_req) {
            vq_coal_request(c, *t);
            assert_true(out < 64);
            done_at[out++] = *t + service;
            next_req += every;
        }
        for (uint32_t i = 0; i < out;) {
            if (done_at[i] <= *t) {
                vq_coal_completion(c, *t);
                done_at[i] = done_at[--out];
            } else {
                i++;
            }
        }
        if (vq_coal_due(c, *t)) {
            if (c->waiting > most)
                most = c->waiting;
            if (c->until) /* never before the hold ends: full, over, or the guest idle */
                assert_true(c->waiting >= VQ_COAL_MAX || *t >= c->until ||
                            (c->arrived && c->busy_gap_ns &&
                             *t - c->last_held_request > VQ_COAL_IDLE * c->busy_gap_ns));
            vq_coal_called(c);
        }
    }
    return most;
}

static void test_deep(void **state)
{
    (void)state;
    struct vq_coal c = { 0 };
    uint64_t t = 1000 * US;
    /* Long enough for the first probe, then as long again. */
    run_open(&c, &t, t + 2 * VQ_COAL_PROBE * 100 * US, 100 * US, 5 * US);
    assert_true(c.deep);
    uint64_t comp = c.n_completions, calls = c.n_calls;
    uint32_t most = run_open(&c, &t, t + 1000 * 100 * US, 100 * US, 5 * US);
    assert_true(c.deep);
    comp = c.n_completions - comp;
    calls = c.n_calls - calls;
    /* A window of two mean gaps: about two completions per call, at most VQ_COAL_MAX. */
    assert_true(calls * 3 <= comp * 2);
    assert_true(most >= 2 && most <= VQ_COAL_MAX);
    /* A guest faster than the window allows: VQ_COAL_MAX completions end a hold. */
    most = run_open(&c, &t, t + 1000 * US * 100, 1 * US, 1 * US);
    assert_true(c.deep);
    assert_int_equal(most, VQ_COAL_MAX);

    /* Back to waiting for each completion: deep for VQ_COAL_MISSES held batches, then every
     * completion is called at once but the probes (the drain at the end of the last run may
     * have counted one already). */
    uint32_t misses = c.misses;
    uint32_t held = run_qd1(&c, &t, VQ_COAL_MISSES, 5 * US, 50 * US);
    assert_int_equal(held + misses, VQ_COAL_MISSES);
    assert_false(c.deep);
    held = run_qd1(&c, &t, VQ_COAL_PROBE - 1, 5 * US, 50 * US);
    assert_true(held <= 1); /* at most the probe */
    assert_false(c.deep);
}

static void test_no_pace(void **state)
{
    (void)state;
    struct vq_coal c = { .deep = true };
    /* Deep, but no gap between requests measured yet: nothing to size a hold by. */
    vq_coal_request(&c, 5 * US);
    vq_coal_completion(&c, 10 * US);
    assert_true(vq_coal_due(&c, 10 * US));
    vq_coal_called(&c);
    /* Called with nothing waiting: no call counted, nothing changes. */
    vq_coal_called(&c);
    assert_int_equal(c.n_calls, 1);
    assert_false(vq_coal_due(&c, 20 * US));
    /* A slow guest's hold stops at VQ_COAL_HOLD_MAX_NS. */
    vq_coal_request(&c, 10000 * US);
    vq_coal_completion(&c, 10005 * US);
    assert_int_equal(c.until, 10005 * US + VQ_COAL_HOLD_MAX_NS);
}

/* A held batch ends early once the guest, having sent requests during the hold, stops for
 * longer than VQ_COAL_IDLE of its busy gaps (several QD1 streams: all now wait for the call). */
static void test_idle(void **state)
{
    (void)state;
    struct vq_coal c = { .deep = true };
    uint64_t t = 1000 * US;
    for (int i = 0; i < 64; i++) /* the guest's pace: a request every 100 us */
        vq_coal_request(&c, t += 100 * US);
    vq_coal_completion(&c, t += 5 * US);
    assert_true(c.until >= t + 150 * US); /* a window of about two gaps */
    uint64_t t0 = t;
    for (int i = 1; i <= 3; i++) /* three requests 10 us apart, during the hold */
        vq_coal_request(&c, t0 + (uint64_t)i * 10 * US);
    uint64_t last = t0 + 30 * US;
    assert_int_equal(c.busy_gap_ns, 10 * US);
    assert_false(vq_coal_due(&c, last + VQ_COAL_IDLE * 10 * US));
    assert_true(vq_coal_due(&c, last + VQ_COAL_IDLE * 10 * US + 1));
    assert_true(last + VQ_COAL_IDLE * 10 * US + 1 < c.until);
    vq_coal_called(&c);
    assert_true(c.deep); /* it sent requests while they waited */

    /* A guest that keeps sending at that pace is held to the window's end. */
    vq_coal_completion(&c, t = last + 100 * US);
    uint64_t until = c.until;
    for (t += 10 * US; t < until; t += 10 * US) {
        vq_coal_request(&c, t);
        assert_false(vq_coal_due(&c, t));
    }
    assert_true(vq_coal_due(&c, until));
    vq_coal_called(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qd1),
        cmocka_unit_test(test_deep),
        cmocka_unit_test(test_no_pace),
        cmocka_unit_test(test_idle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
