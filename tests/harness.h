/*
 * Test harness: boot a fabric with the CLI (as a user would), run code as an application on an
 * emulated host (a forked child with NTBLEND_FABRIC/NTBLEND_HOST set, since the runtime is per
 * process), and pass small messages between those children over pipes.
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

static inline const char *h_src(void)
{
    const char *s = getenv("NTBLEND_SRC");
    return s ? s : ".";
}

static inline const char *h_bin(void)
{
    const char *s = getenv("NTBLEND_BIN");
    return s ? s : "./bin";
}

/* Run a shell command line; returns its exit status (or -1). */
static inline int h_sh(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int st = system(cmd);
    return (st >= 0 && WIFEXITED(st)) ? WEXITSTATUS(st) : -1;
}

/* `ntblend --fabric NAME ARGS` */
static inline int h_cli(const char *fabric, const char *fmt, ...)
{
    char args[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    return h_sh("%s/ntblend --fabric %s %s", h_bin(), fabric, args);
}

/* Fabrics this test booted and has not shut down: taken down at exit, even after a failure. */
static char h_booted[16][64];

static inline void h_down(const char *fabric)
{
    h_cli(fabric, "down >/dev/null 2>&1");
    for (int i = 0; i < 16; i++)
        if (strcmp(h_booted[i], fabric) == 0)
            h_booted[i][0] = 0;
}

static void h_down_all(void)
{
    for (int i = 0; i < 16; i++)
        if (h_booted[i][0])
            h_cli(h_booted[i], "down >/dev/null 2>&1");
}

/* SIGTERM or SIGINT (a test out of time: tests/CMakeLists.txt's guard) in the process that
 * booted the fabrics takes them down, then dies of the signal; its children just die. Not
 * async-signal-safe (h_cli runs system()), which a process about to die can afford. */
static pid_t h_booter;

static void h_on_signal(int sig)
{
    if (getpid() == h_booter)
        h_down_all();
    signal(sig, SIG_DFL);
    raise(sig);
}

static inline int h_up(const char *fabric, const char *topo)
{
    static bool registered;
    if (!registered) {
        atexit(h_down_all);
        h_booter = getpid();
        signal(SIGTERM, h_on_signal);
        signal(SIGINT, h_on_signal);
        registered = true;
    }
    h_cli(fabric, "down >/dev/null 2>&1");
    for (int i = 0; i < 16; i++)
        if (!h_booted[i][0]) {
            snprintf(h_booted[i], sizeof h_booted[i], "%s", fabric);
            break;
        }
    return h_cli(fabric, "up %s/%s >/dev/null", h_src(), topo);
}

/* A two-way pipe between the parent and one child. */
struct h_chan {
    int to_child[2], to_parent[2];
};

struct h_proc {
    pid_t pid;
    struct h_chan ch;
};

static inline void h_send(int fd, uint64_t v)
{
    if (write(fd, &v, sizeof v) != sizeof v)
        _exit(3);
}

static inline uint64_t h_recv(int fd, bool parent)
{
    uint64_t v;
    ssize_t n;
    do
        n = read(fd, &v, sizeof v);
    while (n < 0 && errno == EINTR);
    if (n != sizeof v) {
        /* The other side died: its own failure is the one reported. The parent exits through
         * atexit, which shuts down the fabrics it booted; a child must not run it. */
        fprintf(stderr, "harness: the other side of a pipe is gone\n");
        if (parent)
            exit(4);
        _exit(4);
    }
    return v;
}

/* Child side: receive from / send to the parent. */
static struct h_chan *h_self;
static inline uint64_t h_get(void) { return h_recv(h_self->to_child[0], false); }
static inline void h_put(uint64_t v) { h_send(h_self->to_parent[1], v); }
/* Parent side. */
static inline uint64_t h_from(struct h_proc *p) { return h_recv(p->ch.to_parent[0], true); }
static inline void h_to(struct h_proc *p, uint64_t v) { h_send(p->ch.to_child[1], v); }

/* Run fn as an application on `host` of `fabric`. */
static inline struct h_proc h_spawn(const char *fabric, const char *host, void (*fn)(void *),
                                    void *arg)
{
    struct h_proc p;
    if (pipe(p.ch.to_child) || pipe(p.ch.to_parent))
        abort();
    fflush(NULL);
    p.pid = fork();
    if (p.pid == 0) {
        setenv("NTBLEND_FABRIC", fabric, 1);
        setenv("NTBLEND_HOST", host, 1);
        close(p.ch.to_child[1]);
        close(p.ch.to_parent[0]);
        h_self = &p.ch;
        fn(arg);
        _exit(0);
    }
    close(p.ch.to_child[0]);
    close(p.ch.to_parent[1]);
    return p;
}

/* Wait for a child; returns its exit code (128+signal when killed). */
static inline int h_join(struct h_proc *p)
{
    int st;
    while (waitpid(p->pid, &st, 0) < 0 && errno == EINTR)
        ;
    close(p->ch.to_child[1]);
    close(p->ch.to_parent[0]);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static inline const char *h_fabric_name(const char *test)
{
    static char name[64];
    snprintf(name, sizeof name, "t-%s-%d", test, (int)getpid());
    return name;
}

#endif
