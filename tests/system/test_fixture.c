/*
 * The tests' fabric fixture (tests/lib/fixture.h) keeps its promises: a test that ends without
 * taking its fabric down — it returns, fails, aborts, is stopped by SIGTERM or killed outright
 * — leaves no fabric behind; fx_down is safe on any path and twice; a topology given as text
 * boots; devices are made available; an NVMe directory of the fixture's own goes with it; bad
 * options and a failing step are refused with a message and leave nothing up.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>
#include <sys/stat.h>

#include "fixture.h"
#include "fabric.h"

#define TWO_HOSTS "examples/topologies/two-hosts.ini"

/* Is a fabric of that name up? (`status` fails on one that is not.) */
static bool is_up(const char *name) { return h_cli(name, "status >/dev/null 2>&1") == 0; }

/* Wait (up to 30 s: the reaper and the CLI on a busy machine) for the fabric to be gone. */
static bool gone(const char *name)
{
    for (int i = 0; i < 600; i++) {
        if (!is_up(name))
            return true;
        usleep(50000);
    }
    return false;
}

/* ---------------------------------------------------------------- a test that ends badly */

enum how { RETURNS, ABORTS, TERMINATED, KILLED };

/* A test process of its own: boots a fixture, says so, then ends as told without fx_down. */
static void doomed(void *arg)
{
    enum how how = (enum how)(uintptr_t)arg;
    unsetenv("NTBLEND_FABRIC"); /* a test's main process, not an application on a host */
    unsetenv("NTBLEND_HOST");
    static struct fx fx;
    const struct fx_opts o = { .topo = TWO_HOSTS };
    CHECK_EQ(fx_up(&fx, "fxdoomed", &o), 0);
    h_put(1);
    if (how == RETURNS || how == ABORTS)
        h_get(); /* the parent has seen the fabric up */
    if (how == RETURNS)
        exit(3); /* a failed check's exit, atexit handlers run */
    if (how == ABORTS)
        abort();
    pause(); /* signalled by the parent */
    _exit(0);
}

static void ends(enum how how, int want_status)
{
    struct h_proc p = h_spawn("none", "none", doomed, (void *)(uintptr_t)how);
    h_from(&p);
    char name[64];
    snprintf(name, sizeof name, "t-fxdoomed-%d", (int)p.pid);
    assert_true(is_up(name));
    if (how == RETURNS || how == ABORTS)
        h_to(&p, 1);
    if (how == TERMINATED)
        kill(p.pid, SIGTERM);
    if (how == KILLED)
        kill(p.pid, SIGKILL);
    assert_int_equal(h_join(&p), want_status);
    if (!gone(name)) {
        h_cli(name, "down >/dev/null 2>&1");
        fail_msg("fabric %s outlived its test", name);
    }
}

static void test_returns_without_fx_down(void **state) { ends(RETURNS, 3); }
static void test_aborts(void **state) { ends(ABORTS, 128 + SIGABRT); }
static void test_terminated(void **state) { ends(TERMINATED, 128 + SIGTERM); }
static void test_killed(void **state) { ends(KILLED, 128 + SIGKILL); }

/* ---------------------------------------------------------------- what fx_up does */

static const char TEXT[] = "[host a]\nnode_id = 4\nadapters = ntb0\n"
                           "[host b]\nnode_id = 8\nadapters = ntb0\n"
                           "[links]\na.ntb0 = b.ntb0\n"
                           "[device nvme0]\nhost = a\ntype = nvme\nqueues = 2\nnamespaces = 1\n"
                           "ns_size = 16M\n";

static void test_text_devices_attach_and_down(void **state)
{
    const char *before = getenv("NTBLEND_NVME_DIR");
    char was[256] = "";
    snprintf(was, sizeof was, "%s", before ? before : "");
    struct fx fx;
    const struct fx_opts o = { .ini = TEXT, .add = { "nvme0" }, .nvme_dir = true,
                               .attach = fx_attach };
    assert_int_equal(fx_up(&fx, "fxtext", &o), 0);
    assert_non_null(fx.f);
    assert_int_equal(fx.f->ctl->nhosts, 2);
    assert_int_equal(fab_func(fx.f, fx_func(&fx, "nvme0"))->host, fx_host(&fx, "a"));
    assert_true(fx_adapter(&fx, "b.ntb0") < fx.f->ctl->nadapters);
    /* Made available: b can borrow it. */
    assert_int_equal(h_cli(fx.name, "device borrow nvme0 --host b >/dev/null"), 0);
    assert_int_equal(h_cli(fx.name, "device return nvme0 --host b >/dev/null"), 0);
    /* The models' images in the fixture's own directory, which goes with it. */
    struct stat st;
    assert_string_equal(getenv("NTBLEND_NVME_DIR"), fx.nvme_dir);
    assert_int_equal(stat(fx.nvme_dir, &st), 0);
    char name[64];
    snprintf(name, sizeof name, "%s", fx.name);
    fx_down(&fx);
    assert_false(is_up(name));
    assert_null(fx.f);
    assert_int_not_equal(stat(fx.nvme_dir, &st), 0);
    assert_string_equal(getenv("NTBLEND_NVME_DIR") ? getenv("NTBLEND_NVME_DIR") : "", was);
    fx_down(&fx); /* twice: nothing */
    struct fx never;
    memset(&never, 0, sizeof never);
    fx_down(&never); /* never up: nothing */
}

static void test_bad_options_and_failed_steps(void **state)
{
    struct fx fx;
    const struct fx_opts neither = { .attach = NULL };
    assert_int_equal(fx_up(&fx, "fxbad", &neither), -1);
    assert_false(is_up(fx.name));
    const struct fx_opts both = { .topo = TWO_HOSTS, .ini = TEXT };
    assert_int_equal(fx_up(&fx, "fxbad", &both), -1);
    assert_false(is_up(fx.name));
    fx_down(&fx);
    const struct fx_opts missing = { .topo = "tests/system/topologies/no-such.ini" };
    assert_int_equal(fx_up(&fx, "fxbad", &missing), -1);
    fx_down(&fx);
    assert_false(is_up(fx.name));
    /* A step after the boot fails: the fabric is up until fx_down, then gone. */
    const struct fx_opts no_dev = { .topo = TWO_HOSTS, .add = { "nvme9" } };
    assert_int_equal(fx_up(&fx, "fxbad", &no_dev), -1);
    assert_true(is_up(fx.name));
    fx_down(&fx);
    assert_false(is_up(fx.name));
}

/* cmocka's set-up and tear-down pair: the tear-down gets the fixture the set-up booted. */
static struct fx GROUP;
static const struct fx_opts GROUP_OPTS = { .topo = TWO_HOSTS, .attach = fx_attach };
static int setup(void **state) { return fx_setup(state, &GROUP, "fxgroup", &GROUP_OPTS); }

static void test_group_fixture(void **state)
{
    assert_true(is_up(GROUP.name));
    assert_int_equal(fx_host(&GROUP, "b"), (uint32_t)fab_host_by_name(GROUP.f, "b"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_returns_without_fx_down),
        cmocka_unit_test(test_aborts),
        cmocka_unit_test(test_terminated),
        cmocka_unit_test(test_killed),
        cmocka_unit_test(test_text_devices_attach_and_down),
        cmocka_unit_test(test_bad_options_and_failed_steps),
        cmocka_unit_test_setup_teardown(test_group_fixture, setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
