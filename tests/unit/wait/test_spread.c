/*
 * Spreading a pair of threads off a shared CPU (src/wait/spread.c): when a move is due (after
 * WSPREAD_FIRST hand-overs in a row on one CPU, twice as many after each move, from the start
 * again once the pair stayed apart), that a move lands on another CPU and leaves the affinity
 * as it was, that a due move is made or counted as finding no idle CPU, and that with one CPU allowed nothing moves and later tries stay possible.
 * Behaviour only: no timing is asserted.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "spread.h"

/* Hand-overs together until a move is due: how many it took (0: none within max). */
static uint32_t until_due(struct wspread *s, uint32_t max)
{
    for (uint32_t i = 1; i <= max; i++)
        if (wspread_due(s, true))
            return i;
    return 0;
}

static void test_due(void **state)
{
    (void)state;
    struct wspread s = { 0 };
    assert_int_equal(until_due(&s, 1000), WSPREAD_FIRST);
    assert_int_equal(until_due(&s, 1000), 2 * WSPREAD_FIRST);
    /* A hand-over apart starts the count again, without undoing the backoff. */
    for (uint32_t i = 0; i < 3 * WSPREAD_FIRST; i++)
        assert_false(wspread_due(&s, i != 2 * WSPREAD_FIRST));
    assert_int_equal(until_due(&s, 1000), 4 * WSPREAD_FIRST - WSPREAD_FIRST + 1);
    /* The backoff stops at WSPREAD_MAX. */
    while (s.need < WSPREAD_MAX)
        assert_true(until_due(&s, WSPREAD_MAX) > 0);
    assert_int_equal(until_due(&s, WSPREAD_MAX), WSPREAD_MAX);
    assert_int_equal(until_due(&s, WSPREAD_MAX), WSPREAD_MAX);
    /* A pair that stayed apart long enough: the first try comes early again. */
    for (uint32_t i = 0; i < WSPREAD_SETTLED; i++)
        assert_false(wspread_due(&s, false));
    assert_int_equal(until_due(&s, 1000), WSPREAD_FIRST);
    /* Once moving failed for good, never again. */
    s.off = true;
    assert_int_equal(until_due(&s, 4 * WSPREAD_MAX), 0);
}

static void test_move(void **state)
{
    (void)state;
    cpu_set_t before, after;
    assert_int_equal(sched_getaffinity(0, sizeof before, &before), 0);
    if (CPU_COUNT(&before) < 2)
        skip(); /* (test_one_cpu covers this) */
    for (int i = 0; i < 20; i++) {
        int from = -1, to = wspread_move(&from);
        assert_true(to >= 0);
        assert_true(from >= 0);
        assert_int_not_equal(to, from);
        assert_true(CPU_ISSET(to, &before));
        assert_int_equal(sched_getaffinity(0, sizeof after, &after), 0);
        assert_true(CPU_EQUAL(&before, &after));
    }
    /* Due, it moves and counts it, or counts that no CPU looked idle (other programs run). */
    struct wspread s = { 0 };
    int moved = 0;
    for (uint32_t i = 0; i < WSPREAD_FIRST; i++)
        moved += wspread_note(&s, true);
    assert_int_equal(s.moves, (uint64_t)moved);
    assert_int_equal(s.moves + s.busy, 1);
    assert_false(s.off);
}

static void test_one_cpu(void **state)
{
    (void)state;
    cpu_set_t before, one;
    assert_int_equal(sched_getaffinity(0, sizeof before, &before), 0);
    int cpu = sched_getcpu();
    assert_true(cpu >= 0);
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
    assert_int_equal(wspread_move(NULL), -EINVAL);
    struct wspread s = { 0 };
    int moved = 0;
    for (uint32_t i = 0; i < 4 * WSPREAD_FIRST; i++)
        moved += wspread_note(&s, true);
    assert_int_equal(moved, 0);
    assert_int_equal(s.moves, 0);
    assert_false(s.off); /* the affinity may widen later */
    cpu_set_t now;
    assert_int_equal(sched_getaffinity(0, sizeof now, &now), 0);
    assert_true(CPU_EQUAL(&now, &one));
    assert_int_equal(sched_setaffinity(0, sizeof before, &before), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_due),
        cmocka_unit_test(test_move),
        cmocka_unit_test(test_one_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
