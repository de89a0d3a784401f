/*
 * The fabric fixture of the C system tests: one set-up and one tear-down. fx_up boots a fabric
 * under a name of the test's own (t-TEST-PID) from a topology file, or from a topology the
 * test writes out, makes devices available to borrowers (`ntblend device add`), and for a
 * test that reads the hardware model's state attaches it (fx_attach). fx_down undoes all of
 * it; it may be called on any path, and again. A fixture not taken down goes however the test
 * ends (harness.h, h_up: at exit, on SIGTERM or SIGINT, and by a reaper when the test is
 * killed or crashes). Part of the tests' helper library (tests/lib).
 *
 *     static struct fx FX;
 *     static int setup(void **state)
 *     {
 *         return fx_setup(state, &FX, "dev", &(struct fx_opts){
 *             .topo = "examples/topologies/smartio3.ini", .add = { "nvme0" }, .attach = fx_attach });
 *     }
 *     ...
 *     return cmocka_run_group_tests(tests, setup, fx_teardown);
 */
#ifndef NTBLEND_TEST_FIXTURE_H
#define NTBLEND_TEST_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "harness.h"

struct fab;
struct fx;

#define FX_MAX_ADD 8

/* What to boot, and what to do once it is up. */
struct fx_opts {
    const char *topo;            /* a topology file: from the root, or relative to the source tree */
    const char *ini;             /* or the topology's text (one of the two) */
    const char *add[FX_MAX_ADD]; /* devices made available to borrowers, in this order */
    /* The NVMe models' namespace images in a directory of the fixture's own (NTBLEND_NVME_DIR,
     * which the agents inherit), removed by fx_down; else where the environment says. */
    bool nvme_dir;
    /* fx_attach (ntbtest_fab): the test reads and drives the fabric model (fx.f). */
    int (*attach)(struct fx *fx);
};

struct fx {
    char name[64];  /* the fabric: pass it to h_spawn, h_cli */
    struct fab *f;  /* the fabric model's state, when attached */
    void (*detach)(struct fx *fx);
    char nvme_dir[128];
    char *nvme_dir_was; /* NTBLEND_NVME_DIR before it (NULL: unset), set again by fx_down */
    bool up;
};

/* Boot the fixture for `test` (a short name of the test's own). 0, or -1 with the step that
 * failed said on stderr; what was done is undone by fx_down or at the test's end. */
int fx_up(struct fx *fx, const char *test, const struct fx_opts *o);

/* Detach, take the fabric down, remove the fixture's own files. Safe on a fixture that is
 * down, half up or was never up (zeroed). */
void fx_down(struct fx *fx);

/* cmocka set-up and tear-down: fx_setup boots fx and hands it to fx_teardown through *state. */
int fx_setup(void **state, struct fx *fx, const char *test, const struct fx_opts *o);
int fx_teardown(void **state);

/* With the fabric model (ntbtest_fab, fixture_fab.c): attach fx to its fabric's state (the
 * .attach of struct fx_opts); and look a host, function or adapter up by name in it, failing
 * the test (cmocka) when it names nothing. */
int fx_attach(struct fx *fx);
uint32_t fx_host(const struct fx *fx, const char *name);
uint32_t fx_func(const struct fx *fx, const char *name);
uint32_t fx_adapter(const struct fx *fx, const char *name);

#endif
