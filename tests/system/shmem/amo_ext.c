/* Atomics on every 1.5 AMO type: extended (fetch/set/swap, incl. float and double), standard
 * (compare_swap, fetch_inc, inc, fetch_add, add) exact under contention on PE 0, bitwise
 * (each PE owns one bit), and the _nbi fetching forms. */
#include <shmem.h>
#include <string.h>

#include "check.h"

#define ITERS 300

#define EXT(T, NAME)                                                                           \
    do {                                                                                       \
        T *x = shmem_calloc((size_t)n, sizeof(T));                                             \
        shmem_##NAME##_atomic_set(&x[me], (T)(me + 10), right);                                \
        shmem_barrier_all();                                                                   \
        CHECK(x[left] == (T)(left + 10), #NAME " set");                                        \
        shmem_barrier_all();                                                                   \
        CHECK(shmem_##NAME##_atomic_fetch(&x[me], right) == (T)(me + 10), #NAME " fetch");     \
        CHECK(shmem_##NAME##_atomic_swap(&x[me], (T)(me + 20), right) == (T)(me + 10),         \
              #NAME " swap");                                                                  \
        T f = (T)0;                                                                            \
        shmem_##NAME##_atomic_swap_nbi(&f, &x[me], (T)(me + 30), right);                       \
        shmem_quiet();                                                                         \
        CHECK(f == (T)(me + 20), #NAME " swap_nbi");                                           \
        shmem_##NAME##_atomic_fetch_nbi(&f, &x[me], right);                                    \
        shmem_quiet();                                                                         \
        CHECK(f == (T)(me + 30), #NAME " fetch_nbi");                                          \
        shmem_barrier_all();                                                                   \
        shmem_free(x);                                                                         \
    } while (0)

#define STD(T, NAME)                                                                           \
    do {                                                                                       \
        T *c = shmem_calloc(2, sizeof(T));                                                     \
        shmem_barrier_all();                                                                   \
        for (int i = 0; i < ITERS; i++) {                                                      \
            shmem_##NAME##_atomic_add(&c[0], (T)2, 0);                                         \
            shmem_##NAME##_atomic_inc(&c[0], 0);                                               \
            T o = shmem_##NAME##_atomic_fetch_add(&c[1], (T)1, 0);                             \
            CHECK(o < (T)(ITERS * n * 2 + n), #NAME " fetch_add");                                 \
            o = shmem_##NAME##_atomic_fetch_inc(&c[1], 0);                                     \
            CHECK(o < (T)(ITERS * n * 2 + n), #NAME " fetch_inc");                                 \
        }                                                                                      \
        T f = (T)0;                                                                            \
        shmem_##NAME##_atomic_fetch_add_nbi(&f, &c[0], (T)0, 0);                               \
        shmem_##NAME##_atomic_fetch_inc_nbi(&f, &c[1], 0);                                     \
        shmem_quiet();                                                                         \
        shmem_barrier_all();                                                                   \
        CHECK(shmem_##NAME##_atomic_fetch(&c[0], 0) == (T)(3 * ITERS * n), #NAME " total");    \
        CHECK(shmem_##NAME##_atomic_fetch(&c[1], 0) == (T)(2 * ITERS * n + n),                 \
              #NAME " fetch total");                                                           \
        shmem_barrier_all();                                                                   \
        /* one compare_swap winner: 0 -> me+1 on c[0] of PE n-1 (reset first) */              \
        if (me == 0)                                                                           \
            shmem_##NAME##_atomic_set(&c[0], (T)0, n - 1);                                     \
        shmem_barrier_all();                                                                   \
        T o = shmem_##NAME##_atomic_compare_swap(&c[0], (T)0, (T)(me + 1), n - 1);             \
        shmem_##NAME##_atomic_compare_swap_nbi(&f, &c[0], (T)0, (T)(me + 1), n - 1);           \
        shmem_quiet();                                                                         \
        CHECK(f != (T)0, #NAME " compare_swap_nbi after a winner");                            \
        if (o == (T)0)                                                                         \
            shmem_int_atomic_inc(wins, 0);                                                     \
        shmem_barrier_all();                                                                   \
        if (me == 0) {                                                                         \
            CHECK(*wins == 1, #NAME " %d compare_swap winners", *wins);                        \
            *wins = 0;                                                                         \
        }                                                                                      \
        shmem_barrier_all();                                                                   \
        shmem_free(c);                                                                         \
    } while (0)

#define BIT(T, NAME)                                                                           \
    do {                                                                                       \
        T *b = shmem_calloc(3, sizeof(T));                                                     \
        if (me == 0)                                                                           \
            b[1] = (T)~(T)0;                                                                   \
        shmem_barrier_all();                                                                   \
        T bit = (T)((T)1 << (me % 30));                                                        \
        shmem_##NAME##_atomic_or(&b[0], bit, 0);                                               \
        shmem_##NAME##_atomic_and(&b[1], (T)~bit, 0);                                          \
        shmem_##NAME##_atomic_xor(&b[2], bit, 0);                                              \
        shmem_barrier_all();                                                                   \
        T all = (T)0;                                                                          \
        for (int p = 0; p < n; p++)                                                            \
            all |= (T)((T)1 << (p % 30));                                                      \
        CHECK(shmem_##NAME##_atomic_fetch(&b[0], 0) == all, #NAME " or");                      \
        CHECK(shmem_##NAME##_atomic_fetch(&b[1], 0) == (T)~all, #NAME " and");                 \
        CHECK(shmem_##NAME##_atomic_fetch(&b[2], 0) == all, #NAME " xor");                     \
        shmem_barrier_all();                                                                   \
        T o = shmem_##NAME##_atomic_fetch_xor(&b[2], bit, 0);                                  \
        CHECK((o & bit) == bit, #NAME " fetch_xor");                                           \
        o = shmem_##NAME##_atomic_fetch_and(&b[0], (T)~bit, 0);                                \
        CHECK((o & bit) == bit, #NAME " fetch_and");                                           \
        o = shmem_##NAME##_atomic_fetch_or(&b[1], bit, 0);                                     \
        CHECK((o & bit) == 0, #NAME " fetch_or");                                              \
        T f;                                                                                   \
        shmem_##NAME##_atomic_fetch_or_nbi(&f, &b[0], (T)0, 0);                                \
        shmem_##NAME##_atomic_fetch_and_nbi(&f, &b[1], (T)~(T)0, 0);                           \
        shmem_##NAME##_atomic_fetch_xor_nbi(&f, &b[2], (T)0, 0);                               \
        shmem_quiet();                                                                         \
        shmem_barrier_all();                                                                   \
        if (me == 0)                                                                           \
            CHECK(b[0] == 0 && b[1] == (T)~(T)0 && b[2] == 0, #NAME " after fetch ops");      \
        shmem_barrier_all();                                                                   \
        shmem_free(b);                                                                         \
    } while (0)

static int me, n, right, left;
static int *wins;

int main(void)
{
    shmem_init();
    me = shmem_my_pe(), n = shmem_n_pes();
    right = (me + 1) % n, left = (me + n - 1) % n;
    wins = shmem_calloc(1, sizeof(int));
#define X(T, NAME) EXT(T, NAME);
    SHMEM_EXT_AMO_TYPE_TABLE(X)
#undef X
#define X(T, NAME) STD(T, NAME);
    SHMEM_AMO_TYPE_TABLE(X)
#undef X
#define X(T, NAME) BIT(T, NAME);
    SHMEM_BITWISE_AMO_TYPE_TABLE(X)
#undef X
    /* float/double: exact bit patterns through swap (incl. a NaN payload and -0.0). */
    double *d = shmem_calloc(1, sizeof(double));
    double nz = -0.0, got;
    shmem_double_atomic_set(d, nz, right);
    got = shmem_double_atomic_swap(d, 1.5, right);
    CHECK(memcmp(&got, &nz, sizeof got) == 0, "double -0.0 bit pattern");
    shmem_barrier_all();
    CHECK(*d == 1.5, "double swap value");
    shmem_barrier_all();
    CHECK(shmem_atomic_swap(d, 2.5, right) == 1.5, "generic double swap");
    CHECK(shmem_double_swap(d, 3.5, right) == 2.5 && shmem_double_fetch(d, right) == 3.5,
          "deprecated double swap/fetch");
    float *fl = shmem_calloc(1, sizeof *fl);
    shmem_float_set(fl, 0.25f, right);
    CHECK(shmem_float_fetch(fl, right) == 0.25f && shmem_float_swap(fl, 1.0f, right) == 0.25f,
          "deprecated float set/fetch/swap");
    unsigned long *ul = shmem_calloc(1, sizeof *ul);
    shmem_atomic_or(ul, 1UL << me, 0);
    shmem_barrier_all();
    CHECK(shmem_atomic_fetch_xor(ul, 0UL, 0) == (1UL << n) - 1, "generic or/fetch_xor");
    CHECK(shmem_atomic_compare_swap(ul, 12345UL, 1UL, 0) != 12345UL, "generic compare_swap");
    shmem_finalize();
    return 0;
}
