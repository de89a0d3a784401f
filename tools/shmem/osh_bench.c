/*
 * osh_bench: one portable OpenSHMEM micro-benchmark, built unchanged with ntblend's oshcc and
 * with Open MPI's (OSHMEM) oshcc, so the two implementations are measured by the same code.
 * scripts/bench-shmem-oshmem.sh builds it with both and alternates them.
 *
 * Only the OpenSHMEM 1.4 API is used (Open MPI 4.1's OSHMEM implements 1.4; ntblend's libshmem
 * 1.5), and only plain C11 + POSIX besides: no json-c, the JSON is printed with printf.
 *
 * Tests (PE 0 -> PE 1 unless said otherwise; every other PE waits in the final barrier):
 *   put      shmem_putmem of SIZE bytes, ITERS times back to back, then shmem_quiet: MB/s
 *            (10^6 bytes per second), per size
 *   p        shmem_long_p + shmem_quiet: ns per pair
 *   g        shmem_long_g: ns per call
 *   fadd     shmem_long_atomic_fetch_add: ns per call (the total is checked at PE 1)
 *   barrier  shmem_barrier_all on every PE: ns per barrier (timed on PE 0)
 * Each test is warmed up, then timed REPS times (clock_gettime(CLOCK_MONOTONIC), no sleeps);
 * the JSON has the median and the best of the REPS for each figure.
 *
 * Output: one flat JSON object on PE 0's stdout, e.g.
 *   {"impl":"...","spec":"1.4","npes":2,"tests":"put,p","reps":5,
 *    "put_1048576_mbps":12345.6,"put_1048576_best_mbps":13000.1,...,"p_quiet_ns":80.1,...,
 *    "verified":true}
 */
#define _POSIX_C_SOURCE 200809L
#include <shmem.h>

#include "bench_util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_SIZES 16
#define MAX_REPS BENCH_MAX_REPS

static const char *usage_text =
    "usage: osh_bench [--test LIST] [--sizes LIST] [--iters N] [--put-iters N] [--reps N]\n"
    "                 [--warmup N] [--label NAME]\n"
    "\n"
    "One OpenSHMEM program for any implementation (OpenSHMEM 1.4 API only). Start it with the\n"
    "implementation's launcher with at least 2 PEs (barrier: any number); PE 0 prints one JSON\n"
    "object on stdout.\n"
    "\n"
    "  --test LIST     comma-separated, from put,p,g,fadd,barrier (default put,p,g,fadd,barrier)\n"
    "                    put      shmem_putmem PE 0 -> PE 1, ITERS puts then shmem_quiet (MB/s)\n"
    "                    p        shmem_long_p + shmem_quiet latency (ns)\n"
    "                    g        shmem_long_g latency (ns)\n"
    "                    fadd     shmem_long_atomic_fetch_add latency (ns)\n"
    "                    barrier  shmem_barrier_all latency on all PEs (ns)\n"
    "  --sizes LIST    put sizes, with K/M suffixes (binary; default 1M,4M)\n"
    "  --iters N       latency operations per timed repetition (default 20000; barrier: N/10)\n"
    "  --put-iters N   puts per timed repetition at each size (default: 256 MiB / size, >= 8)\n"
    "  --reps N        timed repetitions per figure; the median and best are reported (default 5)\n"
    "  --warmup N      untimed operations before each test (default iters / 10)\n"
    "  --label NAME    \"impl\" in the JSON (default: shmem_info_get_name)\n"
    "  -h, --help      this text\n";


static int parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return -1;
    switch (*end) {
    case 'k': case 'K': v <<= 10; end++; break;
    case 'm': case 'M': v <<= 20; end++; break;
    case 'g': case 'G': v <<= 30; end++; break;
    default: break;
    }
    if (*end == 'i' || *end == 'B')
        end += (*end == 'i' && end[1] == 'B') ? 2 : 1;
    if (*end || v == 0)
        return -1;
    *out = (size_t)v;
    return 0;
}

static long parse_count(const char *opt, const char *s, long min)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min) {
        fprintf(stderr, "osh_bench: %s needs a number >= %ld, not '%s'\n", opt, min, s);
        exit(2);
    }
    return v;
}

struct opts {
    int put, p, g, fadd, barrier;
    size_t sizes[MAX_SIZES];
    int nsizes;
    long iters, put_iters, reps, warmup;
    const char *label;
};

static int parse_args(int argc, char **argv, struct opts *o)
{
    char tests[256] = "put,p,g,fadd,barrier", sizes[256] = "1M,4M";
    memset(o, 0, sizeof *o);
    o->iters = 20000;
    o->put_iters = 0;
    o->reps = 5;
    o->warmup = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            return 1;
        if (i + 1 >= argc) {
            fprintf(stderr, "osh_bench: unknown option or missing value: '%s' (see --help)\n", a);
            exit(2);
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--test"))
            snprintf(tests, sizeof tests, "%s", v);
        else if (!strcmp(a, "--sizes"))
            snprintf(sizes, sizeof sizes, "%s", v);
        else if (!strcmp(a, "--iters"))
            o->iters = parse_count(a, v, 1);
        else if (!strcmp(a, "--put-iters"))
            o->put_iters = parse_count(a, v, 1);
        else if (!strcmp(a, "--reps"))
            o->reps = parse_count(a, v, 1);
        else if (!strcmp(a, "--warmup"))
            o->warmup = parse_count(a, v, 0);
        else if (!strcmp(a, "--label"))
            o->label = v;
        else {
            fprintf(stderr, "osh_bench: unknown option '%s' (see --help)\n", a);
            exit(2);
        }
    }
    if (o->reps > MAX_REPS) {
        fprintf(stderr, "osh_bench: at most %d --reps\n", MAX_REPS);
        exit(2);
    }
    if (o->warmup < 0)
        o->warmup = o->iters / 10;
    for (char *save = NULL, *t = strtok_r(tests, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!strcmp(t, "put")) o->put = 1;
        else if (!strcmp(t, "p")) o->p = 1;
        else if (!strcmp(t, "g")) o->g = 1;
        else if (!strcmp(t, "fadd")) o->fadd = 1;
        else if (!strcmp(t, "barrier")) o->barrier = 1;
        else if (!strcmp(t, "all")) o->put = o->p = o->g = o->fadd = o->barrier = 1;
        else {
            fprintf(stderr, "osh_bench: unknown test '%s' (put, p, g, fadd, barrier)\n", t);
            exit(2);
        }
    }
    for (char *save = NULL, *t = strtok_r(sizes, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (o->nsizes == MAX_SIZES || parse_size(t, &o->sizes[o->nsizes]) != 0) {
            fprintf(stderr, "osh_bench: bad size '%s' (at most %d sizes, e.g. 64K,1M,4M)\n", t,
                    MAX_SIZES);
            exit(2);
        }
        o->nsizes++;
    }
    return 0;
}

/* A check that failed: says which and how on stderr (the JSON line says only "verified":false);
 * returns 0, the new verdict. */
static int unverified(int me, const char *what, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "osh_bench: PE %d: %s not verified: ", me, what);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 0;
}

/* Print "key":median,"key_best":best for one figure (low = smaller is better). */
static void emit(const char *key, double *v, int n, int low)
{
    char best_key[128];
    snprintf(best_key, sizeof best_key, "%s", key);
    /* "put_1048576_mbps" -> "put_1048576_best_mbps"; "p_quiet_ns" -> "p_quiet_best_ns" */
    char *u = strrchr(best_key, '_');
    char unit[32] = "";
    if (u) {
        snprintf(unit, sizeof unit, "%s", u);
        *u = '\0';
    }
    printf(",\"%s\":%.1f,\"%s_best%s\":%.1f", key, median(v, n), best_key, unit,
           low ? best_low(v, n) : best_high(v, n));
}

int main(int argc, char **argv)
{
    struct opts o;
    int help = parse_args(argc, argv, &o);

    shmem_init();
    int me = shmem_my_pe(), npes = shmem_n_pes();
    if (help) {
        if (me == 0)
            fputs(usage_text, stdout);
        shmem_finalize();
        return 0;
    }
    int needs_two = o.put || o.p || o.g || o.fadd;
    if (needs_two && npes < 2) {
        if (me == 0)
            fprintf(stderr, "osh_bench: put, p, g and fadd need at least 2 PEs (have %d)\n", npes);
        shmem_finalize();
        return 2;
    }

    size_t maxsize = 8;
    for (int i = 0; i < o.nsizes; i++)
        if (o.sizes[i] > maxsize)
            maxsize = o.sizes[i];
    if (!o.put)
        maxsize = 8;

    /* Symmetric objects: the put target, and three longs for p, g and fadd. */
    char *dst = shmem_malloc(maxsize);
    long *words = shmem_malloc(4 * sizeof(long));
    char *src = malloc(maxsize);
    if (!dst || !words || !src) {
        fprintf(stderr, "osh_bench: PE %d: cannot allocate %zu bytes (symmetric heap too small?)\n",
                me, maxsize);
        shmem_global_exit(1);
    }
    memset(src, 0xa5, maxsize);
    memset(dst, 0, maxsize);
    words[0] = words[1] = words[2] = words[3] = 0;
    shmem_barrier_all();

    int verified = 1;
    double v[MAX_REPS];
    int reps = (int)o.reps;

    char name[SHMEM_MAX_NAME_LEN + 1] = "";
    int major = 0, minor = 0;
    shmem_info_get_name(name);
    shmem_info_get_version(&major, &minor);
    if (me == 0) {
        printf("{\"impl\":\"%s\",\"spec\":\"%d.%d\",\"npes\":%d,\"reps\":%d,\"iters\":%ld",
               o.label ? o.label : name, major, minor, npes, reps, o.iters);
        fflush(stdout);
    }

    /* ---- put bandwidth */
    if (o.put) {
        for (int s = 0; s < o.nsizes; s++) {
            size_t size = o.sizes[s];
            long n = o.put_iters ? o.put_iters : (long)((256u << 20) / size);
            if (n < 8)
                n = 8;
            if (me == 0) {
                for (long i = 0; i < (o.warmup ? n / 4 + 1 : 0); i++)
                    shmem_putmem(dst, src, size, 1);
                shmem_quiet();
                for (int r = 0; r < reps; r++) {
                    src[0] = (char)r; /* something changes in every repetition */
                    double t0 = now_ns();
                    for (long i = 0; i < n; i++)
                        shmem_putmem(dst, src, size, 1);
                    shmem_quiet();
                    double t = now_ns() - t0;
                    v[r] = (double)size * (double)n / t * 1e3; /* bytes/ns * 1e3 = MB/s */
                }
            }
            shmem_barrier_all();
            if (me == 1) {
                if ((unsigned char)dst[size - 1] != 0xa5 || dst[0] != (char)(reps - 1))
                    verified = unverified(me, "put", "last byte 0x%02x (want 0xa5), first %d (want %d) "
                                          "of %zu", (unsigned char)dst[size - 1], dst[0], reps - 1, size);
            }
            shmem_barrier_all(); /* checked before the next size's puts rewrite dst */
            if (me == 0) {
                char key[64];
                snprintf(key, sizeof key, "put_%zu_mbps", size);
                emit(key, v, reps, 0);
                printf(",\"put_%zu_iters\":%ld", size, n);
                fflush(stdout);
            }
        }
    }

    /* ---- shmem_long_p + shmem_quiet */
    if (o.p) {
        if (me == 0) {
            for (long i = 0; i < o.warmup; i++) {
                shmem_long_p(&words[0], i, 1);
                shmem_quiet();
            }
            long val = 0;
            for (int r = 0; r < reps; r++) {
                double t0 = now_ns();
                for (long i = 0; i < o.iters; i++) {
                    shmem_long_p(&words[0], ++val, 1);
                    shmem_quiet();
                }
                v[r] = (now_ns() - t0) / (double)o.iters;
            }
            emit("p_quiet_ns", v, reps, 1);
            fflush(stdout);
        }
        shmem_barrier_all();
        if (me == 1 && words[0] != (long)reps * o.iters)
            verified = unverified(me, "long_p", "%ld (want %ld)", words[0], (long)reps * o.iters);
    }

    /* ---- shmem_long_g */
    if (o.g) {
        if (me == 1)
            words[1] = 42;
        shmem_barrier_all();
        if (me == 0) {
            long sum = 0;
            for (long i = 0; i < o.warmup; i++)
                sum += shmem_long_g(&words[1], 1);
            for (int r = 0; r < reps; r++) {
                double t0 = now_ns();
                for (long i = 0; i < o.iters; i++)
                    sum += shmem_long_g(&words[1], 1);
                v[r] = (now_ns() - t0) / (double)o.iters;
            }
            if (sum != 42 * (o.warmup + (long)reps * o.iters))
                verified = unverified(me, "long_g", "sum %ld (want %ld)", sum,
                                      42 * (o.warmup + (long)reps * o.iters));
            emit("g_ns", v, reps, 1);
            fflush(stdout);
        }
        shmem_barrier_all();
    }

    /* ---- shmem_long_atomic_fetch_add */
    if (o.fadd) {
        if (me == 0) {
            long expect = 0, last = -1;
            for (long i = 0; i < o.warmup; i++)
                if (shmem_long_atomic_fetch_add(&words[2], 1, 1) != expect++ && verified)
                    verified = unverified(me, "fetch_add (warm-up)", "not %ld", expect - 1);
            for (int r = 0; r < reps; r++) {
                double t0 = now_ns();
                for (long i = 0; i < o.iters; i++)
                    last = shmem_long_atomic_fetch_add(&words[2], 1, 1);
                v[r] = (now_ns() - t0) / (double)o.iters;
            }
            if (last != o.warmup + (long)reps * o.iters - 1)
                verified = unverified(me, "fetch_add", "last %ld (want %ld)", last,
                                      o.warmup + (long)reps * o.iters - 1);
            emit("fadd_ns", v, reps, 1);
            fflush(stdout);
        }
        shmem_barrier_all();
        if (me == 1 && words[2] != o.warmup + (long)reps * o.iters)
            verified = unverified(me, "fetch_add", "counter %ld (want %ld)", words[2],
                                  o.warmup + (long)reps * o.iters);
    }

    /* ---- shmem_barrier_all on every PE */
    if (o.barrier) {
        long n = o.iters / 10 > 0 ? o.iters / 10 : 1;
        for (long i = 0; i < o.warmup / 10 + 1; i++)
            shmem_barrier_all();
        for (int r = 0; r < reps; r++) {
            double t0 = now_ns();
            for (long i = 0; i < n; i++)
                shmem_barrier_all();
            v[r] = (now_ns() - t0) / (double)n;
        }
        if (me == 0) {
            emit("barrier_ns", v, reps, 1);
            printf(",\"barrier_iters\":%ld", n);
            fflush(stdout);
        }
    }

    /* Gather the verdicts at PE 0 (PE 1 checked what landed in its memory). */
    words[3] = verified;
    shmem_barrier_all();
    if (me == 0) {
        for (int pe = 1; pe < npes; pe++)
            if (shmem_long_g(&words[3], pe) != 1)
                verified = 0;
        printf(",\"verified\":%s}\n", verified ? "true" : "false");
        fflush(stdout);
    }
    shmem_barrier_all();

    free(src);
    shmem_free(words);
    shmem_free(dst);
    shmem_finalize();
    return verified ? 0 : 3;
}
