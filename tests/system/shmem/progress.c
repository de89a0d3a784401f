/* Progress without the target calling the library. A target PE T sleeps (nanosleep, no
 * OpenSHMEM call) while PE 0 does a chunked put, gets (of that data and of data T wrote before
 * sleeping), fetch-adds, compare-swaps (succeeding and failing), an atomic fetch, p/g and a
 * put-with-signal on it, checking every value it gets back; then PE 0 sets T's `done` word.
 * T sleeps at least SLEEP_MS and then on, still without library calls (10 ms naps reading its
 * own `done` word), until `done` lands: it fails if that takes longer than CAP_MS, so PE 0's
 * gets and AMOs must have come back while T slept. PE 0 checks its elapsed time is below the
 * cap; after a barrier T checks its memory.
 *
 * T is the first PE that PE 0 does not map (shmem_ptr NULL: a non-neighbour on a ring, served
 * by the relays), else (every PE direct, e.g. a switch) PE n-1. */
#define _POSIX_C_SOURCE 200809L
#include <shmem.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "check.h"

#define LEN (300u << 10) /* several routed chunks */
#define NADD 200
#define SLEEP_MS 1000
#define CAP_MS 30000

struct area {
    unsigned char data[LEN]; /* PE 0's put */
    unsigned char pre[LEN];  /* T's pattern, read by PE 0's gets */
    unsigned char sigdata[4096];
    long counter, cas;
    int small;
    uint64_t sig;
    int done;
};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static unsigned char pat(size_t i, int k) { return (unsigned char)(i * 7 + (i >> 8) + k * 31); }

int main(void)
{
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();
    CHECK(n >= 2, "needs 2 PEs or more");
    struct area *a = shmem_calloc(1, sizeof *a);
    CHECK(a, "shmem_calloc");
    int t = n - 1;
    for (int pe = 1; pe < n; pe++)
        if (!shmem_ptr(a, pe)) {
            t = pe;
            break;
        }
    if (me == 0) /* PE 0's choice, for everyone */
        for (int pe = 1; pe < n; pe++)
            shmem_int_p(&a->small, t, pe);
    shmem_barrier_all();
    if (me)
        t = a->small;
    a->small = 0;
    if (me == t)
        for (size_t i = 0; i < LEN; i++)
            a->pre[i] = pat(i, 2);
    shmem_barrier_all();

    if (me == t) {
        /* No library call from here to the barrier. */
        double t0 = now_ms(), slept;
        struct timespec nap = { 0, 10 * 1000000L };
        for (;;) {
            slept = now_ms() - t0;
            if ((slept >= SLEEP_MS && atomic_load((_Atomic int *)&a->done)) || slept > CAP_MS)
                break;
            nanosleep(&nap, NULL);
        }
        CHECK(atomic_load((_Atomic int *)&a->done) == 1,
              "PE 0 did not finish within %d ms while this PE slept: no progress without the "
              "target", CAP_MS);
    } else if (me == 0) {
        double t0 = now_ms();
        static unsigned char buf[LEN];
        for (size_t i = 0; i < LEN; i++)
            buf[i] = pat(i, 1);
        shmem_putmem(a->data, buf, LEN, t);
        memset(buf, 0, LEN);
        shmem_getmem(buf, a->data, LEN, t); /* behind the put on the same way */
        for (size_t i = 0; i < LEN; i++)
            CHECK(buf[i] == pat(i, 1), "get after put: byte %zu is %#x", i, buf[i]);
        shmem_getmem(buf, a->pre, LEN, t);
        for (size_t i = 0; i < LEN; i++)
            CHECK(buf[i] == pat(i, 2), "get of the sleeper's data: byte %zu is %#x", i, buf[i]);
        for (long i = 0; i < NADD; i++) {
            long old = shmem_long_atomic_fetch_add(&a->counter, 3, t);
            CHECK(old == 3 * i, "fetch_add %ld returned %ld", i, old);
        }
        CHECK(shmem_long_atomic_compare_swap(&a->cas, 0, 5, t) == 0, "cswap 0->5");
        CHECK(shmem_long_atomic_compare_swap(&a->cas, 0, 7, t) == 5, "failing cswap");
        CHECK(shmem_long_atomic_compare_swap(&a->cas, 5, 9, t) == 5, "cswap 5->9");
        CHECK(shmem_long_atomic_fetch(&a->cas, t) == 9, "atomic_fetch");
        shmem_int_p(&a->small, 77, t);
        CHECK(shmem_int_g(&a->small, t) == 77, "g after p");
        unsigned char s[sizeof a->sigdata];
        for (size_t i = 0; i < sizeof s; i++)
            s[i] = pat(i, 3);
        shmem_putmem_signal(a->sigdata, s, sizeof s, &a->sig, 42, SHMEM_SIGNAL_SET, t);
        CHECK(shmem_uint64_atomic_fetch(&a->sig, t) == 42, "signal word");
        memset(s, 0, sizeof s);
        shmem_getmem(s, a->sigdata, sizeof s, t);
        for (size_t i = 0; i < sizeof s; i++)
            CHECK(s[i] == pat(i, 3), "put_signal data: byte %zu is %#x", i, s[i]);
        shmem_quiet();
        shmem_int_atomic_set(&a->done, 1, t);
        double el = now_ms() - t0;
        CHECK(el < CAP_MS, "PE 0 took %.0f ms", el);
    }
    shmem_barrier_all();
    if (me == t) {
        for (size_t i = 0; i < LEN; i++)
            CHECK(a->data[i] == pat(i, 1), "put data: byte %zu is %#x", i, a->data[i]);
        for (size_t i = 0; i < sizeof a->sigdata; i++)
            CHECK(a->sigdata[i] == pat(i, 3), "put_signal data: byte %zu", i);
        CHECK(a->counter == 3L * NADD, "counter %ld", a->counter);
        CHECK(a->cas == 9 && a->small == 77 && a->sig == 42, "cas %ld small %d sig %llu", a->cas,
              a->small, (unsigned long long)a->sig);
    }
    shmem_free(a);
    shmem_finalize();
    return 0;
}
