/*
 * What the topology reader's tests (test_topo_examples, test_topo_rules) share: loading a file
 * (an example under $NTBLEND_SRC/examples/topologies, or text written to a temporary directory
 * of the test's own) with what topo_load prints captured, finding a located message in it, and
 * the adapters an adapter reaches, computed from the links independently of the router.
 */
#ifndef NTBLEND_TEST_TOPO_LOAD_H
#define NTBLEND_TEST_TOPO_LOAD_H

#include <setjmp.h> /* cmocka.h needs these first */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h> /* tl_expect_msg fails the test */

#include "topo.h"

struct tl {
    struct topo *t;       /* the last file loaded */
    char *err;            /* what topo_load printed for it ("" when nothing) */
    char path[512];       /* its path */
    char tmpdir[256];     /* tl_load_text's files; removed by tl_teardown */
    int ncase;
};

/* cmocka group set-up and tear-down: tl_setup makes l's temporary directory (under $TMPDIR,
 * named after `test`) and hands l to tl_teardown through *state. */
int tl_setup(void **state, struct tl *l, const char *test);
int tl_teardown(void **state);

/* Load a file into l->t; topo_load's return. */
int tl_load_path(struct tl *l, const char *path);
int tl_load_example(struct tl *l, const char *name);
/* Write text to a fresh file in the temporary directory and load it. */
int tl_load_text(struct tl *l, const char *text);

/* Is there a message "PATH:LINE: ...needle..." for the last file loaded? */
bool tl_has_msg(const struct tl *l, int line, const char *needle);
/* How many messages (lines) topo_load printed. */
int tl_count_msgs(const struct tl *l);

/* A macro, so that a failure names the test's line. */
#define tl_expect_msg(l, line, needle)                                                        \
    do {                                                                                      \
        if (!tl_has_msg(l, line, needle))                                                     \
            fail_msg("no message at line %d containing \"%s\"; got:\n%s", line, needle,       \
                     (l)->err ? (l)->err : "");                                               \
    } while (0)

/* Load text that must be refused (-EINVAL) with a message at `line` containing `needle`. */
void tl_expect_invalid(struct tl *l, const char *text, int line, const char *needle);

/* The adapters `adapter` reaches (the other end of its cable, or every other adapter on the
 * switch tree it leads to), and whether b is one of a's. */
uint32_t tl_npeers(const struct tl *l, const char *adapter);
bool tl_is_peer(const struct tl *l, const char *a, const char *b);

#endif
