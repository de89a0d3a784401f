/*
 * Helpers shared by the tools (ntb_tool, ntb_perf, ntb_pingpong): number parsing, opening an
 * adapter with messages that say what to do, peer lookup, doorbell waits that sleep, a futex
 * wrapper, and starting the peer half of a two-host tool with `ntblend run`. Every tools/NAME.c
 * becomes an executable, so this is a header of static functions, not a .c file.
 */
#ifndef NTBLEND_TOOLUTIL_H
#define NTBLEND_TOOLUTIL_H

#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <json-c/json.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fabric.h"
#include "ntblend/ntb.h"

static const char *tu_prog __attribute__((unused)) = "tool";

#define tu_err(...)                                                                         \
    do {                                                                                    \
        fprintf(stderr, "%s: ", tu_prog);                                                   \
        fprintf(stderr, __VA_ARGS__);                                                       \
        fputc('\n', stderr);                                                                \
    } while (0)

/* ---------------------------------------------------------------- numbers */

/* Decimal, or hex with a 0x prefix (a leading 0 is not octal: "010" is ten). */
static inline int tu_parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s || *s == '-')
        return -EINVAL;
    int base = (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) ? 16 : 10;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, base);
    if (errno || end == s || *end)
        return -EINVAL;
    *out = v;
    return 0;
}

static inline int tu_parse_int(const char *s, int lo, int hi, int *out)
{
    uint64_t v;
    if (tu_parse_u64(s, &v) || v < (uint64_t)lo || v > (uint64_t)hi)
        return -EINVAL;
    *out = (int)v;
    return 0;
}

/* A size: a number with an optional K, M or G suffix (binary multiples). */
static inline int tu_parse_size(const char *s, uint64_t *out)
{
    char buf[64];
    size_t n = s ? strlen(s) : 0;
    if (!n || n >= sizeof buf)
        return -EINVAL;
    memcpy(buf, s, n + 1);
    unsigned shift = 0;
    char last = buf[n - 1];
    if ((last == 'b' || last == 'B') && n > 1 && strchr("kKmMgG", buf[n - 2]))
        buf[--n] = 0, last = buf[n - 1]; /* "4MB" as well as "4M" */
    switch (last) {
    case 'k': case 'K': shift = 10; break;
    case 'm': case 'M': shift = 20; break;
    case 'g': case 'G': shift = 30; break;
    default: break;
    }
    if (shift)
        buf[n - 1] = 0;
    uint64_t v;
    if (tu_parse_u64(buf, &v) || (shift && v > (UINT64_MAX >> shift)))
        return -EINVAL;
    *out = v << shift;
    return 0;
}

/* "512 KiB", "4 MiB", "1000 B": for humans; exact sizes are in --json. */
static inline const char *tu_fmt_size(uint64_t v, char *buf, size_t len)
{
    static const char *unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    int u = 0;
    while (u < 4 && v >= 1024 && v % 1024 == 0) {
        v /= 1024;
        u++;
    }
    snprintf(buf, len, "%" PRIu64 " %s", v, unit[u]);
    return buf;
}

static inline uint64_t tu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void tu_sleep_ms(int ms)
{
    struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000l };
    while (nanosleep(&ts, &ts) && errno == EINTR)
        ;
}

/* ---------------------------------------------------------------- futexes */

/* Shared (not PRIVATE) futexes: the two sides are different processes. 0, -ETIMEDOUT, -EINTR. */
static inline int tu_futex_wait(_Atomic uint32_t *addr, uint32_t expected, int timeout_ms)
{
    struct timespec ts, *tp = NULL;
    if (timeout_ms >= 0) {
        ts.tv_sec = timeout_ms / 1000;
        ts.tv_nsec = (long)(timeout_ms % 1000) * 1000000l;
        tp = &ts;
    }
    long r = syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT, expected, tp, NULL, 0);
    return (r == 0 || errno == EAGAIN) ? 0 : -errno;
}

static inline void tu_futex_wake(_Atomic uint32_t *addr)
{
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* ---------------------------------------------------------------- opening */

/* Refuse early, with the command to use, when not started by `ntblend run`. */
static inline int tu_check_env(void)
{
    const char *host = getenv("NTBLEND_HOST");
    if (!host || !*host) {
        tu_err("not running on an emulated host: use 'ntblend run --host H -- %s ...'", tu_prog);
        return -ENOENT;
    }
    return 0;
}

static inline struct ntb_dev *tu_open(int index)
{
    if (tu_check_env())
        return NULL;
    int n = ntb_adapter_count(); /* on failure the library has said why (fabric down, ...) */
    if (n < 0) {
        tu_err("cannot attach to fabric '%s' as host '%s' (%s)", fab_name_resolve(NULL),
               getenv("NTBLEND_HOST"), strerror(-n));
        return NULL;
    }
    if (index < 0 || index >= n) {
        if (n == 0)
            tu_err("host '%s' has no NTB adapter", getenv("NTBLEND_HOST"));
        else
            tu_err("host '%s' has %d NTB adapter%s (index 0..%d); pick one with -a",
                   getenv("NTBLEND_HOST"), n, n == 1 ? "" : "s", n - 1);
        errno = ENOENT;
        return NULL;
    }
    struct ntb_dev *ntb = ntb_open(index);
    if (!ntb)
        tu_err("cannot open adapter %d: %s", index, strerror(errno));
    return ntb;
}

/* Open the adapter through which node `port` is a peer (any adapter of this host when
 * adapter < 0); its peer index in *pidx. */
static inline struct ntb_dev *tu_open_for_port(int adapter, int port, int *pidx)
{
    if (tu_check_env())
        return NULL;
    int n = ntb_adapter_count();
    if (n < 0) {
        tu_err("cannot attach to fabric '%s' as host '%s' (%s)", fab_name_resolve(NULL),
               getenv("NTBLEND_HOST"), strerror(-n));
        return NULL;
    }
    for (int i = adapter < 0 ? 0 : adapter; i < (adapter < 0 ? n : adapter + 1); i++) {
        struct ntb_dev *ntb = tu_open(i);
        if (!ntb)
            return NULL;
        int p = ntb_peer_port_idx(ntb, port);
        if (p >= 0) {
            *pidx = p;
            return ntb;
        }
        ntb_close(ntb);
    }
    tu_err("node %d is not a peer of %s on host '%s' (see 'ntb_tool info')", port,
           adapter < 0 ? "any adapter" : "this adapter", getenv("NTBLEND_HOST"));
    errno = ENOENT;
    return NULL;
}

/* The name of the host whose node id is `port`, from the fabric's host table. */
static inline int tu_host_name(int port, char *out, size_t len)
{
    struct fab *f;
    int rc = fab_attach(fab_name_resolve(NULL), -1, &f);
    if (rc)
        return rc;
    rc = -ENOENT;
    for (uint32_t i = 0; i < f->ctl->nhosts; i++)
        if ((int)fab_host(f, i)->node_id == port) {
            snprintf(out, len, "%s", fab_host(f, i)->name);
            rc = 0;
            break;
        }
    fab_detach(f);
    return rc;
}

static inline int tu_check_peer(struct ntb_dev *ntb, int pidx)
{
    int n = ntb_peer_port_count(ntb);
    if (pidx < 0 || pidx >= n) {
        tu_err("%s has %d peer%s (pidx 0..%d); see 'ntb_tool info'", ntb_name(ntb), n,
               n == 1 ? "" : "s", n - 1);
        return -EINVAL;
    }
    return 0;
}

/* Wait up to timeout_ms for the link to peer pidx. */
static inline int tu_wait_link(struct ntb_dev *ntb, int pidx, int timeout_ms)
{
    uint64_t seq = 0;
    uint64_t deadline = tu_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    while (!(ntb_link_is_up(ntb, NULL, NULL) & (1ull << pidx))) {
        uint64_t now = tu_now_ns();
        if (now >= deadline)
            return -ENOTCONN;
        ntb_link_event_wait(ntb, &seq, (int)((deadline - now) / 1000000ull) + 1);
    }
    return 0;
}

/* ---------------------------------------------------------------- doorbells */

/* Waiting for some doorbell bits while other users' bits may be pending: a pending unmasked
 * bit we do not consume would make every wait return at once (a spin), so bits that are not
 * ours get masked while we wait, and the mask is restored at the end (tu_db_restore), which
 * raises their event again for whoever owns them. */
struct tu_db {
    struct ntb_dev *ntb;
    uint64_t masked; /* bits we masked */
};

/* Wait for any of `want`; returns the pending wanted bits (not cleared), 0 on timeout, -errno. */
static inline int64_t tu_db_wait(struct tu_db *d, uint64_t want, int timeout_ms)
{
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : tu_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    for (;;) {
        uint64_t now = tu_now_ns();
        int left = deadline == UINT64_MAX ? -1
                   : now >= deadline      ? 0
                                          : (int)((deadline - now + 999999) / 1000000);
        int64_t bits = ntb_db_event_wait(d->ntb, left);
        if (bits <= 0)
            return bits;
        if ((uint64_t)bits & want)
            return (int64_t)((uint64_t)bits & want);
        uint64_t foreign = (uint64_t)bits & ~want & ~d->masked;
        if (foreign) {
            ntb_db_set_mask(d->ntb, foreign);
            d->masked |= foreign;
        }
        if (left == 0)
            return 0;
    }
}

static inline void tu_db_restore(struct tu_db *d)
{
    if (d->masked)
        ntb_db_clear_mask(d->ntb, d->masked);
    d->masked = 0;
}

/* ---------------------------------------------------------------- the peer process */

/* Start `ntblend run --host HOST -- <this program> ARGS...` (the peer half of a two-host tool).
 * `ntblend` is looked for next to this executable. Its stdout goes to our stderr, so --json
 * output stays one object. Returns the child's pid, or -errno after saying what to do. */
static inline pid_t tu_spawn_peer(const char *host, const char *const *args)
{
    char self[PATH_MAX], dir[PATH_MAX], cli[PATH_MAX + 16];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        tu_err("cannot find this executable (/proc/self/exe): %s", strerror(errno));
        return -ENOENT;
    }
    self[n] = 0;
    snprintf(dir, sizeof dir, "%s", self);
    snprintf(cli, sizeof cli, "%s/ntblend", dirname(dir));
    if (access(cli, X_OK)) {
        tu_err("cannot find '%s' to start the peer side; start '%s --serve' on host '%s' "
               "yourself and pass --no-spawn", cli, tu_prog, host);
        return -ENOENT;
    }
    const char *argv[48];
    int k = 0;
    argv[k++] = cli;
    argv[k++] = "--fabric";
    argv[k++] = fab_name_resolve(NULL);
    argv[k++] = "run";
    argv[k++] = "--host";
    argv[k++] = host;
    argv[k++] = "--";
    argv[k++] = self;
    for (int i = 0; args[i] && k < 47; i++)
        argv[k++] = args[i];
    argv[k] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        tu_err("fork: %s", strerror(e));
        return -e;
    }
    if (pid == 0) {
        /* If we die, the peer side should not linger (when `ntblend run` execs it). */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        dup2(STDERR_FILENO, STDOUT_FILENO);
        execv(cli, (char *const *)argv);
        fprintf(stderr, "%s: cannot run %s: %s\n", tu_prog, cli, strerror(errno));
        _exit(127);
    }
    return pid;
}

/* Has the child exited? Returns its status (>= 0) once it has, -EAGAIN while it runs. */
static inline int tu_child_done(pid_t pid)
{
    int st;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == 0)
        return -EAGAIN;
    if (r < 0)
        return 255;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Wait up to timeout_ms for the peer process to finish (sleeping in 10 ms steps); then
 * terminate it. Returns its exit status. */
static inline int tu_reap_peer(pid_t pid, int timeout_ms)
{
    for (int waited = 0;; waited += 10) {
        int st = tu_child_done(pid);
        if (st >= 0)
            return st;
        if (waited >= timeout_ms)
            break;
        tu_sleep_ms(10);
    }
    kill(pid, SIGTERM);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return 128 + SIGTERM;
}

/* ---------------------------------------------------------------- rendezvous */

/*
 * The two-host tools meet like Linux ntb_perf: over scratchpads and doorbells only. The
 * client writes a nonce into the server's HELLO scratchpad and rings DB_HELLO, repeating
 * every 100 ms until the server answers (it may start later); the server echoes the nonce
 * into the client's scratchpad and rings DB_READY. Commands go the same way (CMD scratchpad
 * + DB_CMD). Doorbell bits are per adapter, so both directions may use the same numbers.
 */
#define TU_DB_HELLO (1ull << 0)  /* client -> server */
#define TU_DB_CMD (1ull << 1)    /* client -> server */
#define TU_DB_READY (1ull << 2)  /* server -> client */
#define TU_DB_RESULT (1ull << 3) /* server -> client */
#define TU_DB_PING (1ull << 4)   /* client -> server (pingpong) */
#define TU_DB_PONG (1ull << 5)   /* server -> client (pingpong) */
#define TU_DB_ALL 0x3full

/* Scratchpads on the server's adapter (written by the client)... */
enum { TU_SP_NONCE = 0, TU_SP_CMD = 1, TU_SP_ARG0 = 2 };
/* ... and on the client's adapter (written by the server). */
enum { TU_SPC_NONCE = 0, TU_SPC_STATUS = 1, TU_SPC_ARG0 = 2 };
#define TU_SPADS_NEEDED 6

enum { TU_CMD_NONE = 0, TU_CMD_DONE = 1, TU_CMD_VERIFY = 2 };

static inline int tu_check_hw(struct ntb_dev *ntb, int pidx)
{
    int ns = ntb_spad_count(ntb);
    if (ns < TU_SPADS_NEEDED) {
        tu_err("%s has %d scratchpads; this tool needs %d (set 'scratchpads' in the topology)",
               ntb_name(ntb), ns, TU_SPADS_NEEDED);
        return -ENOSPC;
    }
    if ((ntb_db_valid_mask(ntb) & TU_DB_ALL) != TU_DB_ALL) {
        tu_err("%s has too few doorbell bits (valid mask 0x%" PRIx64 "); this tool needs bits 0-5",
               ntb_name(ntb), ntb_db_valid_mask(ntb));
        return -ENOSPC;
    }
    return 0;
}

static inline uint32_t tu_nonce(void)
{
    uint64_t x = tu_now_ns() ^ ((uint64_t)getpid() << 32);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (uint32_t)x | 1u; /* never 0: 0 is "no session" */
}

/* Client: say hello until the server answers with our nonce; give up after timeout_ms, or
 * early when the spawned peer process (peer_pid > 0) exits. */
static inline int tu_hello(struct ntb_dev *ntb, struct tu_db *db, int pidx, uint32_t nonce,
                    pid_t peer_pid, int timeout_ms)
{
    uint64_t deadline = tu_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    while (tu_now_ns() < deadline) {
        if (peer_pid > 0 && tu_child_done(peer_pid) >= 0) {
            tu_err("the peer side exited before answering (see its message above)");
            return -ECHILD;
        }
        ntb_peer_spad_write(ntb, pidx, TU_SP_NONCE, nonce);
        ntb_peer_db_set(ntb, pidx, TU_DB_HELLO);
        int64_t bits = tu_db_wait(db, TU_DB_READY, 100);
        if (bits < 0)
            return (int)bits;
        if (bits) {
            ntb_db_clear(ntb, TU_DB_READY);
            if (ntb_spad_read(ntb, TU_SPC_NONCE) == nonce)
                return 0;
        }
    }
    return -ETIMEDOUT;
}

/* Client: send a command (args already in the server's scratchpads). */
static inline void tu_send_cmd(struct ntb_dev *ntb, int pidx, uint32_t cmd)
{
    ntb_peer_spad_write(ntb, pidx, TU_SP_CMD, cmd);
    ntb_peer_db_set(ntb, pidx, TU_DB_CMD);
}

/* Server: echo the nonce, with a status, and ring READY. */
static inline void tu_answer(struct ntb_dev *ntb, int pidx, uint32_t nonce, uint32_t status)
{
    ntb_peer_spad_write(ntb, pidx, TU_SPC_STATUS, status);
    ntb_peer_spad_write(ntb, pidx, TU_SPC_NONCE, nonce); /* last: it makes the answer valid */
    ntb_peer_db_set(ntb, pidx, TU_DB_READY);
}

/* ---------------------------------------------------------------- output */

static inline void tu_hexdump(FILE *out, const volatile uint8_t *p, uint64_t len, uint64_t base)
{
    for (uint64_t off = 0; off < len; off += 16) {
        uint8_t line[16];
        uint64_t n = len - off < 16 ? len - off : 16;
        for (uint64_t i = 0; i < n; i++)
            line[i] = p[off + i];
        fprintf(out, "%08" PRIx64 "  ", base + off);
        for (uint64_t i = 0; i < 16; i++) {
            if (i < n)
                fprintf(out, "%02x ", line[i]);
            else
                fputs("   ", out);
            if (i == 7)
                fputc(' ', out);
        }
        fputs(" |", out);
        for (uint64_t i = 0; i < n; i++)
            fputc(line[i] >= 0x20 && line[i] < 0x7f ? line[i] : '.', out);
        fputs("|\n", out);
    }
}

static inline int tu_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* ---------------------------------------------------------------- the futex baseline */

/* What the benchmarks compare a round trip with: two processes ping-ponging a word in
 * shared memory, each sleeping on a futex until the other answers. */
#define TU_FUTEX_STOP UINT32_MAX

/* Pin the calling thread to one CPU. */
static inline int tu_pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set) ? -errno : 0;
}


/* The partner process: answer every odd value v of the word with v + 1. */
static inline void tu_futex_partner(_Atomic uint32_t *word)
{
    uint32_t want = 1;
    for (;;) {
        uint32_t cur;
        while ((cur = atomic_load(word)) != want && cur != TU_FUTEX_STOP)
            tu_futex_wait(word, cur, -1);
        if (cur == TU_FUTEX_STOP)
            _exit(0);
        atomic_store(word, want + 1);
        tu_futex_wake(word);
        want += 2;
    }
}

static inline pid_t tu_futex_partner_start(_Atomic uint32_t **word, int cpu)
{
    *word = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (*word == MAP_FAILED) {
        tu_err("mmap: %s", strerror(errno));
        return -1;
    }
    atomic_store(*word, 0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        tu_err("fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (cpu >= 0)
            tu_pin(cpu);
        tu_futex_partner(*word);
    }
    return pid;
}

/* Rounds [first, first+n): store 2k+1, sleep until the partner stored 2k+2. */
static inline int tu_futex_rounds(_Atomic uint32_t *word, uint64_t first, uint64_t n, uint64_t *ns,
                                  int wait_ms)
{
    for (uint64_t i = 0; i < n; i++) {
        uint32_t k = (uint32_t)(first + i);
        uint64_t t0 = tu_now_ns();
        atomic_store(word, 2 * k + 1);
        tu_futex_wake(word);
        uint32_t cur;
        while ((cur = atomic_load(word)) != 2 * k + 2)
            if (tu_futex_wait(word, cur, wait_ms) == -ETIMEDOUT && atomic_load(word) == cur) {
                tu_err("the futex partner did not answer within %d ms", wait_ms);
                return -ETIMEDOUT;
            }
        ns[i] = tu_now_ns() - t0;
    }
    return 0;
}


/* ---------------------------------------------------------------- latency statistics */

/* min / median / p99 (nearest rank) / max / mean of n samples (sorts them). */
struct tu_stats {
    uint64_t min, median, p99, max;
    double mean;
};

static inline struct tu_stats tu_summarize(uint64_t *ns, uint64_t n)
{
    qsort(ns, n, sizeof *ns, tu_cmp_u64);
    double sum = 0;
    for (uint64_t i = 0; i < n; i++)
        sum += (double)ns[i];
    uint64_t p99 = (n * 99 + 99) / 100; /* nearest rank */
    return (struct tu_stats){ .min = ns[0], .median = ns[n / 2], .p99 = ns[p99 ? p99 - 1 : 0],
                           .max = ns[n - 1], .mean = sum / (double)n };
}

static inline void tu_jstats(struct json_object *j, const char *prefix, const struct tu_stats *s)
{
    static const char *name[] = { "min_ns", "median_ns", "p99_ns", "max_ns", "mean_ns" };
    uint64_t v[] = { s->min, s->median, s->p99, s->max, (uint64_t)s->mean };
    char key[48];
    for (int i = 0; i < 5; i++) {
        snprintf(key, sizeof key, "%s%s", prefix, name[i]);
        json_object_object_add(j, key, json_object_new_int64((int64_t)v[i]));
    }
}

#endif
