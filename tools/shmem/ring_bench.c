/*
 * ring_bench: the OpenSHMEM side of the ring seed's Figs. 4-7 (openshmem-switchless-ntb-ring
 * §5.1-5.2) on a switchless ring (examples/topologies/ring*.ini). scripts/bench-ring.sh builds
 * it with build/bin/oshcc and runs it next to ntb_perf (the raw neighbour link). It is not part
 * of the CMake build (it lives in tools/shmem/, which the glob over tools/ does not reach).
 *
 * Modes (one per run; PE i is on host i of the ring with oshrun's round-robin placement):
 *   bw          shmem_putmem (or shmem_double_put with --double) from a symmetric source on
 *               PE 0 to PE --target (default: the farthest PE), for each size: N puts back to
 *               back, then shmem_quiet; MB/s (10^6 bytes/s). Fig. 4a and Fig. 6.
 *   lat         latency of one put + shmem_quiet, and of one shmem_getmem, PE 0 -> --target
 *               (default the farthest PE), for each size; us. Fig. 5.
 *   turnaround  every PE at once puts SIZE bytes to the PE at ring distance --distance
 *               (default: the farthest, npes / 2) and waits in shmem_quiet until the
 *               completion comes back; a barrier between rounds; the mean over rounds of each
 *               PE's time, and the mean over PEs. Fig. 7.
 * Each figure is measured REPS times after a warm-up; the median is reported (and the best).
 * The destination is verified once per run: a fresh pattern is put at the largest size and
 * the target(s) compare every byte.
 *
 * Output: one JSON object on PE 0's stdout (plain printf), e.g.
 *   {"bench":"ring_bench","mode":"bw","npes":5,"target":2,"hops":2,"threads":"2",
 *    "chunk":"default","op":"putmem","results":[{"size":4096,"mbps":...,"best_mbps":...},...],
 *    "verified":true}
 */
#define _POSIX_C_SOURCE 200809L
#include <shmem.h>

#include "bench_util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_SIZES 32
#define MAX_REPS BENCH_MAX_REPS

static const char *usage_text =
    "usage: ring_bench --mode bw|lat|turnaround [--target PE] [--distance D] [--sizes LIST]\n"
    "                  [--bytes N] [--iters N] [--reps N] [--double]\n"
    "\n"
    "Start with oshrun on a ring fabric (scripts/bench-ring.sh does); PE 0 prints one JSON\n"
    "object on stdout.\n"
    "\n"
    "  --mode bw          putmem throughput PE 0 -> target (MB/s), N puts then shmem_quiet\n"
    "  --mode lat         put + shmem_quiet and getmem latency PE 0 -> target (us)\n"
    "  --mode turnaround  every PE puts to the PE D hops to its right, then shmem_quiet (us)\n"
    "  --target PE        bw/lat target (default: the farthest PE, npes / 2)\n"
    "  --distance D       turnaround ring distance, 1..npes-1 (default npes / 2)\n"
    "  --sizes LIST       sizes with K/M suffixes (default 4K..1M doubling; turnaround: 64K)\n"
    "  --bytes N          bw: bytes per timed repetition, N / size puts, at least 4 (default 16M)\n"
    "  --iters N          lat/turnaround: operations per timed repetition (default 50)\n"
    "  --reps N           timed repetitions; median and best are reported (default 5)\n"
    "  --double           bw: shmem_double_put (size / 8 doubles) instead of shmem_putmem\n"
    "  -h, --help         this text\n";


static int me, npes;

static void die(const char *msg)
{
    if (me == 0)
        fprintf(stderr, "ring_bench: %s\n", msg);
    shmem_global_exit(2);
    exit(2);
}

static long parse_size(const char *s)
{
    char *end;
    long v = strtol(s, &end, 0);
    if (end == s || v <= 0)
        return -1;
    if (*end == 'K' || *end == 'k')
        v *= 1024, end++;
    else if (*end == 'M' || *end == 'm')
        v *= 1048576, end++;
    return *end ? -1 : v;
}

static int parse_sizes(const char *list, size_t *out)
{
    char buf[512];
    int n = 0;
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        long v = parse_size(t);
        if (v <= 0 || n == MAX_SIZES)
            return -1;
        out[n++] = (size_t)v;
    }
    return n;
}

static int ring_dist(int a, int b)
{
    int d = ((b - a) % npes + npes) % npes;
    return d < npes - d ? d : npes - d;
}

static unsigned char pattern(size_t i, unsigned seed)
{
    return (unsigned char)((i * 131u + seed * 17u + (i >> 12)) & 0xff);
}

/* Symmetric state. */
static unsigned char *src, *dst;
static long *errors; /* on PE 0: mismatches reported by the targets */

int main(int argc, char **argv)
{
    const char *mode = NULL, *sizes_arg = NULL;
    int target = -1, distance = -1, reps = 5, iters = 50, use_double = 0;
    long bytes = 16L << 20;

    shmem_init();
    me = shmem_my_pe();
    npes = shmem_n_pes();

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            if (me == 0)
                fputs(usage_text, stdout);
            shmem_finalize();
            return 0;
        } else if (!strcmp(a, "--double")) {
            use_double = 1;
        } else if (!v) {
            die("an option is missing its value (see --help)");
        } else if (!strcmp(a, "--mode")) {
            mode = v, i++;
        } else if (!strcmp(a, "--target")) {
            target = atoi(v), i++;
        } else if (!strcmp(a, "--distance")) {
            distance = atoi(v), i++;
        } else if (!strcmp(a, "--sizes")) {
            sizes_arg = v, i++;
        } else if (!strcmp(a, "--bytes")) {
            bytes = parse_size(v), i++;
        } else if (!strcmp(a, "--iters")) {
            iters = atoi(v), i++;
        } else if (!strcmp(a, "--reps")) {
            reps = atoi(v), i++;
        } else {
            die("unknown option (see --help)");
        }
    }
    if (!mode || (strcmp(mode, "bw") && strcmp(mode, "lat") && strcmp(mode, "turnaround")))
        die("--mode bw, lat or turnaround is required (see --help)");
    if (npes < 2)
        die("needs at least 2 PEs");
    if (reps < 1 || reps > MAX_REPS || iters < 1 || bytes <= 0)
        die("--reps must be 1..101, --iters and --bytes positive");
    if (target < 0)
        target = npes / 2;
    if (distance < 0)
        distance = npes / 2;
    if (target < 1 || target >= npes || distance < 1 || distance >= npes)
        die("--target must be 1..npes-1 and --distance 1..npes-1");
    int turn = !strcmp(mode, "turnaround");

    size_t sizes[MAX_SIZES];
    int nsizes;
    if (sizes_arg) {
        nsizes = parse_sizes(sizes_arg, sizes);
        if (nsizes <= 0)
            die("bad --sizes (e.g. 4K,64K,1M)");
    } else if (turn) {
        sizes[0] = 64 << 10;
        nsizes = 1;
    } else {
        nsizes = 0;
        for (size_t s = 4096; s <= (1u << 20); s *= 2)
            sizes[nsizes++] = s;
    }
    size_t maxsize = 0;
    for (int i = 0; i < nsizes; i++) {
        if (use_double && sizes[i] % sizeof(double))
            die("--double needs sizes that are multiples of 8");
        maxsize = sizes[i] > maxsize ? sizes[i] : maxsize;
    }

    src = shmem_malloc(maxsize);
    dst = shmem_malloc(maxsize);
    errors = shmem_calloc(1, sizeof *errors);
    if (!src || !dst || !errors)
        die("shmem_malloc failed: give a larger SHMEM_SYMMETRIC_SIZE");
    for (size_t i = 0; i < maxsize; i++)
        src[i] = pattern(i, 1);
    memset(dst, 0, maxsize);

    /* Who sends to whom: bw/lat only PE 0 -> target; turnaround every PE -> me + distance. */
    int to = turn ? (me + distance) % npes : (me == 0 ? target : -1);
    int from = turn ? (me - distance + npes) % npes : (me == target ? 0 : -1);

    double res[MAX_SIZES][2], best[MAX_SIZES][2];
    double v1[MAX_REPS], v2[MAX_REPS];
    shmem_barrier_all();
    for (int si = 0; si < nsizes; si++) {
        size_t size = sizes[si];
        if (!strcmp(mode, "bw")) {
            long n = bytes / (long)size;
            n = n < 4 ? 4 : n;
            if (me == 0) {
                for (int r = -1; r < reps; r++) { /* r = -1: warm-up */
                    double t0 = now_ns();
                    for (long k = 0; k < n; k++) {
                        if (use_double)
                            shmem_double_put((double *)(void *)dst, (const double *)(void *)src,
                                             size / sizeof(double), target);
                        else
                            shmem_putmem(dst, src, size, target);
                    }
                    shmem_quiet();
                    double t = now_ns() - t0;
                    if (r >= 0)
                        v1[r] = (double)n * (double)size / t * 1e3; /* bytes/ns -> MB/s */
                }
                res[si][0] = median(v1, reps);
                best[si][0] = best_high(v1, reps);
            }
        } else if (!strcmp(mode, "lat")) {
            if (me == 0) {
                for (int r = -1; r < reps; r++) {
                    double t0 = now_ns();
                    for (int k = 0; k < iters; k++) {
                        shmem_putmem(dst, src, size, target);
                        shmem_quiet();
                    }
                    double t1 = now_ns();
                    for (int k = 0; k < iters; k++)
                        shmem_getmem(dst, dst, size, target); /* local dst <- target's dst */
                    double t2 = now_ns();
                    if (r >= 0) {
                        v1[r] = (t1 - t0) / iters / 1e3;
                        v2[r] = (t2 - t1) / iters / 1e3;
                    }
                }
                res[si][0] = median(v1, reps);
                res[si][1] = median(v2, reps);
                best[si][0] = best_low(v1, reps);
                best[si][1] = best_low(v2, reps);
            }
        } else {
            /* Turnaround: every PE at once; each round is one put + quiet per PE, timed on
             * each PE, a barrier between rounds. */
            for (int r = -1; r < reps; r++) {
                double tsum = 0;
                for (int k = 0; k < iters; k++) {
                    shmem_barrier_all();
                    double t0 = now_ns();
                    shmem_putmem(dst, src, size, to);
                    shmem_quiet();
                    tsum += now_ns() - t0;
                }
                if (r >= 0)
                    v1[r] = tsum / iters / 1e3;
            }
            /* Every PE's median and best into PE 0's copy of a symmetric array. */
            static double *all;
            if (!all)
                all = shmem_calloc((size_t)npes * 2, sizeof *all);
            if (!all)
                die("shmem_calloc failed");
            double mine[2] = { median(v1, reps), best_low(v1, reps) };
            shmem_barrier_all();
            shmem_double_put(all + 2 * me, mine, 2, 0);
            shmem_quiet();
            shmem_barrier_all();
            if (me == 0) {
                double m = 0, b = 0;
                for (int p = 0; p < npes; p++)
                    m += all[2 * p], b += all[2 * p + 1];
                res[si][0] = m / npes;
                best[si][0] = b / npes;
                res[si][1] = all[0]; /* the slowest PE's */
                for (int p = 0; p < npes; p++)
                    res[si][1] = all[2 * p] > res[si][1] ? all[2 * p] : res[si][1];
            }
        }
        shmem_barrier_all();
    }

    /* Verify the destination once, at the largest size, with a fresh pattern. */
    unsigned seed = 7;
    for (size_t i = 0; i < maxsize; i++)
        src[i] = pattern(i, seed + (unsigned)me);
    memset(dst, 0, maxsize);
    shmem_barrier_all();
    if (to >= 0) {
        if (use_double)
            shmem_double_put((double *)(void *)dst, (const double *)(void *)src,
                             maxsize / sizeof(double), to);
        else
            shmem_putmem(dst, src, maxsize, to);
    }
    shmem_quiet();
    shmem_barrier_all();
    if (from >= 0) {
        long bad = 0;
        for (size_t i = 0; i < maxsize; i++)
            bad += dst[i] != pattern(i, seed + (unsigned)from);
        if (bad)
            shmem_long_atomic_add(errors, bad, 0);
    }
    shmem_quiet();
    shmem_barrier_all();

    if (me == 0) {
        const char *th = getenv("SHMEM_RING_THREADS"), *ch = getenv("SHMEM_RING_CHUNK");
        printf("{\"bench\":\"ring_bench\",\"mode\":\"%s\",\"npes\":%d,", mode, npes);
        if (turn)
            printf("\"distance\":%d,\"hops\":%d,\"iters\":%d,", distance, ring_dist(0, distance), iters);
        else
            printf("\"target\":%d,\"hops\":%d,", target, ring_dist(0, target));
        if (!strcmp(mode, "bw"))
            printf("\"bytes\":%ld,", bytes);
        if (!strcmp(mode, "lat"))
            printf("\"iters\":%d,", iters);
        printf("\"reps\":%d,\"threads\":\"%s\",\"chunk\":\"%s\",\"op\":\"%s\",\"results\":[", reps,
               th ? th : "default", ch ? ch : "default",
               use_double ? "double_put" : "putmem");
        for (int si = 0; si < nsizes; si++) {
            printf("%s{\"size\":%zu,", si ? "," : "", sizes[si]);
            if (!strcmp(mode, "bw"))
                printf("\"mbps\":%.1f,\"best_mbps\":%.1f}", res[si][0], best[si][0]);
            else if (!strcmp(mode, "lat"))
                printf("\"put_us\":%.3f,\"get_us\":%.3f,\"best_put_us\":%.3f,\"best_get_us\":%.3f}",
                       res[si][0], res[si][1], best[si][0], best[si][1]);
            else
                printf("\"turnaround_us\":%.3f,\"best_us\":%.3f,\"max_pe_us\":%.3f}", res[si][0],
                       best[si][0], res[si][1]);
        }
        printf("],\"errors\":%ld,\"verified\":%s}\n", *errors, *errors ? "false" : "true");
        fflush(stdout);
    }
    long status = *errors ? 1 : 0;
    shmem_barrier_all();
    shmem_free(errors);
    shmem_free(dst);
    shmem_free(src);
    shmem_finalize();
    return (int)status;
}
