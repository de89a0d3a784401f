/*
 * Timing and statistics shared by the OpenSHMEM benchmarks in tools/shmem (each built by a
 * script with whichever oshcc it measures, so this header uses only the C library).
 * Repetitions are at most BENCH_MAX_REPS.
 */
#ifndef NTBLEND_SHMEM_BENCH_UTIL_H
#define NTBLEND_SHMEM_BENCH_UTIL_H

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_MAX_REPS 101

static inline double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static inline double median(const double *v, int n)
{
    double s[BENCH_MAX_REPS];
    memcpy(s, v, (size_t)n * sizeof *v);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/* The best of n: the lowest (latencies) or the highest (bandwidths). */
static inline double best_low(const double *v, int n)
{
    double b = v[0];
    for (int i = 1; i < n; i++)
        b = v[i] < b ? v[i] : b;
    return b;
}

static inline double best_high(const double *v, int n)
{
    double b = v[0];
    for (int i = 1; i < n; i++)
        b = v[i] > b ? v[i] : b;
    return b;
}

#endif
