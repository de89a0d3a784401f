/*
 * libntbtool: numbers, clocks, futexes and the futex ping-pong baseline, CPU placement,
 * latency statistics, JSON output and the data pattern (declared in ntbtool.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ntbtool.h"

const char *tu_prog = "tool";

void tu_err(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", tu_prog);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---------------------------------------------------------------- numbers */

int tu_parse_u64(const char *s, uint64_t *out)
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

int tu_parse_int(const char *s, int lo, int hi, int *out)
{
    uint64_t v;
    if (tu_parse_u64(s, &v) || v < (uint64_t)lo || v > (uint64_t)hi)
        return -EINVAL;
    *out = (int)v;
    return 0;
}

int tu_parse_size(const char *s, uint64_t *out)
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

const char *tu_fmt_size(uint64_t v, char *buf, size_t len)
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

bool tu_pow2(uint64_t v) { return v && !(v & (v - 1)); }

double tu_mbps(uint64_t bytes, uint64_t ns) { return ns ? (double)bytes * 1e3 / (double)ns : 0; }

/* ---------------------------------------------------------------- time and futexes */

uint64_t tu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void tu_sleep_ms(int ms)
{
    struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000l };
    while (nanosleep(&ts, &ts) && errno == EINTR)
        ;
}

/* Shared (not PRIVATE) futexes: the two sides are different processes. */
int tu_futex_wait(_Atomic uint32_t *addr, uint32_t expected, int timeout_ms)
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

void tu_futex_wake(_Atomic uint32_t *addr)
{
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* ---------------------------------------------------------------- the futex baseline */

/* The partner process: answer every odd value v of the word with v + 1. */
static void futex_partner(_Atomic uint32_t *word)
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

pid_t tu_futex_partner_start(_Atomic uint32_t **word, int cpu)
{
    *word = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (*word == MAP_FAILED) {
        *word = NULL;
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
        futex_partner(*word);
    }
    return pid;
}

int tu_futex_rounds(_Atomic uint32_t *word, uint64_t first, uint64_t n, uint64_t *ns, int wait_ms)
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

void tu_futex_partner_stop(pid_t partner, _Atomic uint32_t *word)
{
    if (partner > 0 && word) {
        atomic_store(word, TU_FUTEX_STOP);
        tu_futex_wake(word);
    }
    if (partner > 0)
        tu_reap_peer(partner, 2000);
    if (word)
        munmap((void *)word, 4096);
}

/* ---------------------------------------------------------------- CPU placement */

static const char *const pin_names[] = { "split", "same", "none" };

const char *tu_pin_name(enum tu_pin pin) { return pin_names[pin]; }

int tu_parse_pin(const char *s, enum tu_pin *out)
{
    for (int i = 0; i < 3; i++)
        if (!strcmp(s, pin_names[i])) {
            *out = (enum tu_pin)i;
            return 0;
        }
    return -EINVAL;
}

int tu_pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set) ? -errno : 0;
}

void tu_two_cpus(int *first, int *second)
{
    cpu_set_t set;
    *first = *second = -1;
    if (sched_getaffinity(0, sizeof set, &set))
        return;
    for (int c = 0; c < CPU_SETSIZE && *second < 0; c++)
        if (CPU_ISSET(c, &set)) {
            if (*first < 0)
                *first = c;
            else
                *second = c;
        }
}

void tu_pick_cpus(enum tu_pin pin, int *self, int *peer)
{
    int first, second;
    *self = *peer = -1;
    if (pin == TU_PIN_NONE)
        return;
    tu_two_cpus(&first, &second);
    if (first < 0 || (pin == TU_PIN_SPLIT && second < 0))
        return; /* one CPU only: nothing to choose */
    *self = first;
    *peer = pin == TU_PIN_SPLIT ? second : first;
}

/* ---------------------------------------------------------------- statistics */

int tu_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

struct tu_stats tu_summarize(uint64_t *ns, uint64_t n)
{
    qsort(ns, n, sizeof *ns, tu_cmp_u64);
    double sum = 0;
    for (uint64_t i = 0; i < n; i++)
        sum += (double)ns[i];
    uint64_t p99 = (n * 99 + 99) / 100; /* nearest rank */
    return (struct tu_stats){ .min = ns[0], .median = ns[n / 2], .p99 = ns[p99 ? p99 - 1 : 0],
                              .max = ns[n - 1], .mean = sum / (double)n };
}

uint64_t tu_percentile(const uint64_t *v, size_t n, double p)
{
    if (!n)
        return 0;
    size_t i = (size_t)(p / 100.0 * (double)n);
    if ((double)i < p / 100.0 * (double)n)
        i++; /* ceil */
    return v[i ? i - 1 : 0];
}

/* ---------------------------------------------------------------- JSON output */

struct json_object *tu_jdouble(double v, int digits)
{
    char s[48];
    snprintf(s, sizeof s, "%.*f", digits, v);
    return json_object_new_double_s(v, s);
}

void tu_jstats(struct json_object *j, const char *prefix, const struct tu_stats *s)
{
    static const char *name[] = { "min_ns", "median_ns", "p99_ns", "max_ns", "mean_ns" };
    uint64_t v[] = { s->min, s->median, s->p99, s->max, (uint64_t)s->mean };
    char key[48];
    for (int i = 0; i < 5; i++) {
        snprintf(key, sizeof key, "%s%s", prefix, name[i]);
        json_object_object_add(j, key, json_object_new_int64((int64_t)v[i]));
    }
}

struct json_object *tu_json_begin(const char *tool)
{
    struct json_object *j = json_object_new_object();
    json_object_object_add(j, "tool", json_object_new_string(tool));
    return j;
}

void tu_json_endpoints(struct json_object *j, uint32_t self_node, const char *peer_host,
                       uint32_t peer_node, int adapter)
{
    json_object_object_add(j, "host", json_object_new_string(getenv("NTBLEND_HOST")));
    json_object_object_add(j, "node", json_object_new_int((int)self_node));
    json_object_object_add(j, "peer_host", json_object_new_string(peer_host));
    json_object_object_add(j, "peer_node", json_object_new_int((int)peer_node));
    json_object_object_add(j, "adapter", json_object_new_int(adapter));
}

void tu_json_print(struct json_object *j)
{
    printf("%s\n", json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN));
    json_object_put(j);
}

/* ---------------------------------------------------------------- data patterns */

uint64_t tu_pattern(uint32_t seed, uint64_t off)
{
    uint64_t x = ((uint64_t)seed << 32) ^ off ^ 0x9e3779b97f4a7c15ull;
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

void tu_fill(volatile void *buf, uint64_t len, uint32_t seed)
{
    volatile uint64_t *w = buf;
    for (uint64_t i = 0; i < len / 8; i++)
        w[i] = tu_pattern(seed, i * 8);
}

uint64_t tu_check(const volatile void *buf, uint64_t len, uint32_t seed)
{
    const volatile uint64_t *w = buf;
    uint64_t bad = 0;
    for (uint64_t i = 0; i < len / 8; i++)
        bad += w[i] != tu_pattern(seed, i * 8);
    return bad;
}

uint32_t tu_nonce(void)
{
    uint64_t x = tu_now_ns() ^ ((uint64_t)getpid() << 32);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (uint32_t)x | 1u; /* never 0: 0 is "no session" */
}

void tu_hexdump(FILE *out, const volatile uint8_t *p, uint64_t len, uint64_t base)
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

/* ---------------------------------------------------------------- latency runs */

int tu_lat_start(struct tu_lat *L, uint64_t rounds, enum tu_pin pin, bool baseline)
{
    memset(L, 0, sizeof *L);
    L->n = rounds;
    L->pin = pin;
    L->baseline = baseline;
    L->partner = -1;
    L->ns = calloc(rounds, sizeof *L->ns);
    L->fx_ns = calloc(rounds, sizeof *L->fx_ns);
    if (!L->ns || !L->fx_ns) {
        tu_err("out of memory for %" PRIu64 " rounds", rounds);
        return 1;
    }
    tu_pick_cpus(pin, &L->self_cpu, &L->peer_cpu);
    if (L->self_cpu >= 0 && tu_pin(L->self_cpu)) {
        tu_err("cannot run on CPU %d (%s); use --pin none", L->self_cpu, strerror(errno));
        return 1;
    }
    if (baseline && (L->partner = tu_futex_partner_start(&L->word, L->peer_cpu)) < 0)
        return 1;
    return 0;
}

int tu_lat_run(struct tu_lat *L, int (*rounds)(void *ctx, uint64_t first, uint64_t n,
                                                 uint64_t *ns), void *ctx)
{
    /* A few untimed rounds wake everything up (page faults, the server's first wait). */
    uint64_t warm[16];
    int rc = rounds(ctx, 0, 16, warm);
    if (!rc && L->baseline)
        rc = tu_futex_rounds(L->word, 0, 16, warm, TU_LAT_WAIT_MS);
    int blocks = L->baseline ? TU_LAT_BLOCKS : 1;
    for (int b = 0; b < blocks && !rc; b++) {
        uint64_t first = L->n * (uint64_t)b / (uint64_t)blocks;
        uint64_t cnt = L->n * (uint64_t)(b + 1) / (uint64_t)blocks - first;
        rc = rounds(ctx, 16 + first, cnt, L->ns + first);
        if (!rc && L->baseline)
            rc = tu_futex_rounds(L->word, 16 + first, cnt, L->fx_ns + first, TU_LAT_WAIT_MS);
    }
    if (rc)
        return rc;
    L->d = tu_summarize(L->ns, L->n);
    if (L->baseline)
        L->f = tu_summarize(L->fx_ns, L->n);
    L->ratio = L->baseline && L->f.median ? (double)L->d.median / (double)L->f.median : 0;
    return 0;
}

const char *tu_lat_placement(const struct tu_lat *L, char *buf, size_t len)
{
    if (L->self_cpu >= 0)
        snprintf(buf, len, "this side on CPU %d, the peer side on CPU %d", L->self_cpu,
                 L->peer_cpu);
    else
        snprintf(buf, len, "unpinned");
    return buf;
}

void tu_lat_print(const struct tu_lat *L, const char *what)
{
    int w = (int)strlen(what) + 2; /* the futex line's numbers start under the first line's */
    char label[40];
    snprintf(label, sizeof label, "%s:", what);
    printf("%-*smin %" PRIu64 " ns, median %" PRIu64 " ns, p99 %" PRIu64 " ns, max %" PRIu64
           " ns\n", w, label, L->d.min, L->d.median, L->d.p99, L->d.max);
    if (L->baseline) {
        printf("%-*smin %" PRIu64 " ns, median %" PRIu64 " ns, p99 %" PRIu64 " ns, max %" PRIu64
               " ns (two processes, a shared-memory word)\n", w, "futex:", L->f.min, L->f.median,
               L->f.p99, L->f.max);
        printf("ratio %s/futex (median): %.2f\n", what, L->ratio);
    }
}

void tu_lat_json(struct json_object *j, const struct tu_lat *L)
{
    json_object_object_add(j, "pin", json_object_new_string(L->self_cpu >= 0
                                                                ? tu_pin_name(L->pin) : "none"));
    json_object_object_add(j, "cpu", L->self_cpu >= 0 ? json_object_new_int(L->self_cpu) : NULL);
    json_object_object_add(j, "peer_cpu",
                           L->self_cpu >= 0 ? json_object_new_int(L->peer_cpu) : NULL);
    tu_jstats(j, "", &L->d);
    if (L->baseline) {
        tu_jstats(j, "baseline_", &L->f);
        json_object_object_add(j, "ratio", tu_jdouble(L->ratio, 3));
    } else {
        json_object_object_add(j, "baseline_median_ns", NULL);
        json_object_object_add(j, "ratio", NULL);
    }
    json_object_object_add(j, "verified", json_object_new_boolean(1));
}

void tu_lat_finish(struct tu_lat *L)
{
    tu_futex_partner_stop(L->partner, L->word);
    free(L->ns);
    free(L->fx_ns);
    memset(L, 0, sizeof *L);
}
