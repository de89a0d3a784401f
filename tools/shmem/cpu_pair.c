/*
 * cpu_pair: what the machine's first two CPUs give a copy right now. A large put is copied by
 * two threads on two CPUs (src/shmem/copy.c), and on two CPUs of their own they copy nearly
 * twice as fast as one. A virtual machine's host may however run its two CPUs on the two
 * hardware threads of one core, for a few seconds at a time; then two threads copy no faster
 * than one, and no library can beat one plain memcpy. scripts/bench-shmem-oshmem.sh runs this
 * around every run, so that its report shows the rounds in which that happened, and every
 * scripts/bench-*.sh prints its round trip and copy rate as the machine's floor next to its
 * figures (scripts/bench-floor.sh).
 *
 * Measured, REPS times in turn, on the first two CPUs of the affinity mask (the threads are
 * pinned, one per CPU):
 *   copy_one    one thread copies SIZE bytes, again and again (MB/s: 10^6 bytes per second)
 *   copy_two    two threads copy the two halves of SIZE bytes at the same time (MB/s)
 *   line_rtt    a cache line passed back and forth between the two CPUs (ns per round trip;
 *               a few tens of ns between the hardware threads of one core, 100 ns or more
 *               between cores)
 * and copy_speedup, the median over the repetitions of copy_two / copy_one (each repetition
 * measures the two a few ms apart: what a busy host takes comes and goes within a few ms).
 * The copy rates reported are the best of the repetitions, the round trip the median.
 *
 * Output: one JSON line, e.g.
 *   {"cpus":[0,1],"size":1048576,"reps":5,"copy_one_mbps":46000.0,"copy_two_mbps":88000.0,
 *    "copy_speedup":1.91,"line_rtt_ns":150.2}
 * With fewer than two CPUs it prints {"cpus":[N],"size":...,"copy_speedup":null} and succeeds.
 * Uses only the C library (build/bin/cpu_pair).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

#define COPY_BYTES (32u << 20) /* copied per timed measurement, at least 8 copies */
#define RTT_ROUNDS 2000

static const char usage[] =
    "usage: cpu_pair [--size BYTES] [--reps N]\n"
    "How much a second CPU adds to a copy right now, and a cache line's round trip between\n"
    "the first two CPUs this process may run on; one JSON line on stdout.\n"
    "  --size BYTES  bytes per copy, K/M suffixes, 64K to 64M (default 1M)\n"
    "  --reps N      repetitions (1 to 101, default 5): the median speedup is reported\n"
    "  -h, --help    this text\n";

static struct {
    int cpu[2];
    char *src, *dst;
    size_t size, copies;
    _Alignas(64) _Atomic long ping;
    _Alignas(64) _Atomic long pong;
    _Alignas(64) _Atomic int ready;
    _Atomic int go, done;
} p;

static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static int pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

/* The second CPU's part: echo the ping (mode 0) or copy the back half (mode 1). */
static void *second(void *arg)
{
    long mode = (long)arg;
    pin(p.cpu[1]);
    atomic_store(&p.ready, 1);
    if (mode == 0) {
        for (long i = 1; i <= RTT_ROUNDS; i++) {
            while (atomic_load_explicit(&p.ping, memory_order_acquire) < i)
                relax();
            atomic_store_explicit(&p.pong, i, memory_order_release);
        }
        return NULL;
    }
    while (!atomic_load_explicit(&p.go, memory_order_acquire))
        relax();
    size_t half = p.size / 2;
    for (size_t i = 0; i < p.copies; i++)
        memcpy(p.dst + half, p.src + half, p.size - half);
    atomic_store_explicit(&p.done, 1, memory_order_release);
    return NULL;
}

static int start_second(pthread_t *t, long mode)
{
    atomic_store(&p.ready, 0);
    int rc = pthread_create(t, NULL, second, (void *)mode);
    if (rc) {
        fprintf(stderr, "cpu_pair: cannot start a thread: %s\n", strerror(rc));
        return -1;
    }
    while (!atomic_load(&p.ready))
        relax();
    return 0;
}

static int line_rtt(double *ns)
{
    pthread_t t;
    atomic_store(&p.ping, 0);
    atomic_store(&p.pong, 0);
    if (start_second(&t, 0))
        return -1;
    double t0 = now_ns();
    for (long i = 1; i <= RTT_ROUNDS; i++) {
        atomic_store_explicit(&p.ping, i, memory_order_release);
        while (atomic_load_explicit(&p.pong, memory_order_acquire) < i)
            relax();
    }
    *ns = (now_ns() - t0) / RTT_ROUNDS;
    pthread_join(t, NULL);
    return 0;
}

static double copy_one(void)
{
    double t0 = now_ns();
    for (size_t i = 0; i < p.copies; i++)
        memcpy(p.dst, p.src, p.size);
    return (double)p.size * (double)p.copies / (now_ns() - t0) * 1e3;
}

static int copy_two(double *mbps)
{
    pthread_t t;
    atomic_store(&p.go, 0);
    atomic_store(&p.done, 0);
    if (start_second(&t, 1))
        return -1;
    double t0 = now_ns();
    atomic_store_explicit(&p.go, 1, memory_order_release);
    size_t half = p.size / 2;
    for (size_t i = 0; i < p.copies; i++)
        memcpy(p.dst, p.src, half);
    while (!atomic_load_explicit(&p.done, memory_order_acquire))
        relax();
    *mbps = (double)p.size * (double)p.copies / (now_ns() - t0) * 1e3;
    pthread_join(t, NULL);
    return 0;
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *s == '-')
        return -1;
    if (*end == 'k' || *end == 'K')
        v <<= 10, end++;
    else if (*end == 'm' || *end == 'M')
        v <<= 20, end++;
    if (*end)
        return -1;
    *out = (size_t)v;
    return 0;
}

int main(int argc, char **argv)
{
    size_t size = 1u << 20;
    int reps = 5;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            return 0;
        }
        if ((strcmp(a, "--size") && strcmp(a, "--reps")) || i + 1 == argc) {
            fprintf(stderr, "cpu_pair: %s '%s'\n%s", i + 1 == argc && a[0] == '-' ?
                    "missing value after" : "unknown argument", a, usage);
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--size")) {
            if (parse_size(v, &size) || size < (64u << 10) || size > (64u << 20)) {
                fprintf(stderr, "cpu_pair: --size '%s': give 64K to 64M (e.g. 1M)\n", v);
                return 2;
            }
        } else {
            char *end;
            long n = strtol(v, &end, 10);
            if (*end || end == v || n < 1 || n > BENCH_MAX_REPS) {
                fprintf(stderr, "cpu_pair: --reps '%s': give 1 to %d\n", v, BENCH_MAX_REPS);
                return 2;
            }
            reps = (int)n;
        }
    }

    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set)) {
        fprintf(stderr, "cpu_pair: sched_getaffinity: %s\n", strerror(errno));
        return 1;
    }
    int n = 0;
    for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
        if (CPU_ISSET(c, &set))
            p.cpu[n++] = c;
    if (n < 2) {
        printf("{\"cpus\":[%d],\"size\":%zu,\"reps\":%d,\"copy_speedup\":null}\n", p.cpu[0], size, reps);
        return 0;
    }
    p.size = size;
    p.copies = COPY_BYTES / size < 8 ? 8 : COPY_BYTES / size;
    p.src = aligned_alloc(4096, size);
    p.dst = aligned_alloc(4096, size);
    if (!p.src || !p.dst) {
        fprintf(stderr, "cpu_pair: out of memory for two %zu-byte buffers\n", size);
        return 1;
    }
    memset(p.src, 0xa5, size);
    memset(p.dst, 0, size);
    if (pin(p.cpu[0])) {
        fprintf(stderr, "cpu_pair: cannot run on CPU %d\n", p.cpu[0]);
        return 1;
    }

    double one[BENCH_MAX_REPS], two[BENCH_MAX_REPS], rtt[BENCH_MAX_REPS];
    copy_one(); /* warm-up: the buffers' pages and both CPUs' caches */
    if (copy_two(&two[0]))
        return 1;
    for (int r = 0; r < reps; r++) {
        if (line_rtt(&rtt[r]) || copy_two(&two[r]))
            return 1;
        one[r] = copy_one();
    }
    double speedup[BENCH_MAX_REPS];
    for (int r = 0; r < reps; r++)
        speedup[r] = two[r] / one[r];
    printf("{\"cpus\":[%d,%d],\"size\":%zu,\"reps\":%d,\"copy_one_mbps\":%.1f,\"copy_two_mbps\":%.1f,"
           "\"copy_speedup\":%.2f,\"line_rtt_ns\":%.1f}\n",
           p.cpu[0], p.cpu[1], size, reps, best_high(one, reps), best_high(two, reps),
           median(speedup, reps), median(rtt, reps));
    free(p.src);
    free(p.dst);
    return 0;
}
