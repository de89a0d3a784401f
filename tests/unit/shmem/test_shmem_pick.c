/*
 * The large-copy helper's choice (src/shmem/copy_pick.h) driven with rates of the test's own
 * choosing: where the helper dawdles the copies go alone, where it helps they keep it, a tie
 * changes nothing, and a choice made in bad times is undone when they pass. The same choice
 * on a real machine depends on its load, so it is checked here and only reported by
 * test_shmem.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "copy_pick.h"

/* Runs n jobs of one class where a helped copy moves `helped` bytes per ns and one alone
 * moves `alone`; counts the jobs that went alone. asleep: the helper is asleep whenever a
 * job starts (the worst case for a try of the helper). */
static unsigned run(struct pick *pk, unsigned n, double helped, double alone, bool asleep)
{
    unsigned solo = 0;
    for (unsigned i = 0; i < n; i++) {
        struct pick_job j = pick_next(pk, asleep);
        solo += !j.helped;
        if (j.timed)
            pick_learn(pk, j.helped, j.helped ? helped : alone);
    }
    return solo;
}

static void slow_helper_goes_alone(void **state)
{
    (void)state;
    struct pick pk = { 0 };
    unsigned solo = run(&pk, 200, 0.1, 1.0, false);
    assert_true(pk.go_alone);
    /* The first try alone is job PICK_ALONE_FIRST; from then on only the helper's rare
     * tries (two jobs each, at growing intervals) go with it. */
    assert_true(solo >= 200 - PICK_ALONE_FIRST - 2 * 4);
}

static void fast_helper_keeps_helping(void **state)
{
    (void)state;
    struct pick pk = { 0 };
    unsigned solo = run(&pk, 1000, 1.8, 1.0, false);
    assert_false(pk.go_alone);
    /* One try alone at job PICK_ALONE_FIRST, then one in PICK_ALONE_EVERY. */
    assert_int_equal(solo, 1 + (1000 - PICK_ALONE_FIRST - 2) / PICK_ALONE_EVERY);
}

static void tie_changes_nothing(void **state)
{
    (void)state;
    struct pick pk = { 0 };
    run(&pk, 500, 1.0, 1.0, false);
    assert_false(pk.go_alone);
    /* Alone, the helper must win by PICK_TAKE_BACK to take a class back. */
    struct pick alone = { 0 };
    run(&alone, 100, 0.5, 1.0, false);
    assert_true(alone.go_alone);
    run(&alone, 1000, 1.0 * PICK_TAKE_BACK * 0.99, 1.0, false);
    assert_true(alone.go_alone);
}

static void bad_times_pass(void **state)
{
    (void)state;
    struct pick pk = { 0 };
    run(&pk, 100, 1.8, 1.0, false);
    assert_false(pk.go_alone);
    /* The other CPU is busy for a while: the class goes alone within a try's interval. */
    run(&pk, PICK_ALONE_EVERY + 1, 0.5, 1.0, false);
    assert_true(pk.go_alone);
    /* Quiet again: the helper is back within its longest interval and a wake-up. */
    unsigned solo = run(&pk, PICK_HELP_MAX + PICK_WAKE_JOBS + 2, 1.8, 1.0, false);
    assert_false(pk.go_alone);
    assert_true(solo < PICK_HELP_MAX + PICK_WAKE_JOBS + 2);
}

static void sleeping_helper_is_waited_for(void **state)
{
    (void)state;
    struct pick pk = { 0 };
    run(&pk, 40, 0.1, 1.0, false);
    assert_true(pk.go_alone);
    unsigned try_at = pk.next_try, jobs = pk.jobs;
    /* With the helper asleep at every job, its try is put off PICK_WAKE_JOBS times, and
     * then made anyway. */
    unsigned helped = 0;
    for (unsigned i = jobs; i <= try_at + PICK_WAKE_JOBS; i++) {
        struct pick_job j = pick_next(&pk, true);
        helped += j.helped;
        if (j.timed)
            pick_learn(&pk, j.helped, j.helped ? 0.1 : 1.0);
    }
    assert_int_equal(pk.waited, 0); /* the try was timed: the wait count starts anew */
    assert_true(helped >= PICK_WAKE_JOBS);
    assert_true(pk.go_alone);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(slow_helper_goes_alone),
        cmocka_unit_test(fast_helper_keeps_helping),
        cmocka_unit_test(tie_changes_nothing),
        cmocka_unit_test(bad_times_pass),
        cmocka_unit_test(sleeping_helper_is_waited_for),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
