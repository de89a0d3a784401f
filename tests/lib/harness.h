/*
 * Test harness: boot a fabric with the CLI (as a user would), run code as an application on an
 * emulated host (a forked child with NTBLEND_FABRIC/NTBLEND_HOST set, since the runtime is per
 * process), and pass small messages between those children over pipes. Part of the tests'
 * helper library (tests/lib).
 */
#ifndef NTBLEND_TEST_HARNESS_H
#define NTBLEND_TEST_HARNESS_H

#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* In a child: report and exit non-zero; the parent's assertion on the exit status fails. */
#define CHECK(cond)                                                                         \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);        \
            _exit(1);                                                                       \
        }                                                                                   \
    } while (0)
#define CHECK_EQ(a, b)                                                                      \
    do {                                                                                    \
        long long _a = (long long)(a), _b = (long long)(b);                                 \
        if (_a != _b) {                                                                     \
            fprintf(stderr, "%s:%d: %s == %lld, expected %s == %lld\n", __FILE__, __LINE__, \
                    #a, _a, #b, _b);                                                        \
            _exit(1);                                                                       \
        }                                                                                   \
    } while (0)

/* The source tree and the build's bin directory ($NTBLEND_SRC, $NTBLEND_BIN). */
const char *h_src(void);
const char *h_bin(void);

/* Run a shell command line; returns its exit status (or -1). */
int h_sh(const char *fmt, ...);

/* `ntblend --fabric NAME ARGS` */
int h_cli(const char *fabric, const char *fmt, ...);

/* Boot `fabric` from topology file `topo` (from the root when it starts with '/', else relative
 * to the source tree), after taking down any leftover of that name; h_down takes it down. A
 * fabric booted here and not taken down goes however the test ends: at exit, even after a
 * failure; on SIGTERM or SIGINT (its guard in tests/CMakeLists.txt); and, through a reaper
 * process that waits for the test, when it is killed outright or dies of a crash or a
 * sanitizer's report. 0, or the CLI's exit status. Tests use the fixture (fixture.h). */
int h_up(const char *fabric, const char *topo);
void h_down(const char *fabric);

/* A two-way pipe between the parent and one child. */
struct h_chan {
    int to_child[2], to_parent[2];
};

struct h_proc {
    pid_t pid;
    struct h_chan ch;
};

/* One word over a pipe; a side whose other side is gone exits 4 (its failure is the one
 * reported). */
void h_send(int fd, uint64_t v);
uint64_t h_recv(int fd, bool parent);

/* Child side: receive from / send to the parent. */
uint64_t h_get(void);
void h_put(uint64_t v);
/* Parent side. */
uint64_t h_from(struct h_proc *p);
void h_to(struct h_proc *p, uint64_t v);

/* Run fn as an application on `host` of `fabric`. */
struct h_proc h_spawn(const char *fabric, const char *host, void (*fn)(void *), void *arg);

/* Wait for a child; returns its exit code (128+signal when killed). */
int h_join(struct h_proc *p);

/* A fabric name of the test's own: t-TEST-PID. */
const char *h_fabric_name(const char *test);

#endif
