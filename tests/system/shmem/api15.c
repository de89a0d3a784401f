/* The rest of the 1.5 C API, byte-exact at any number of PEs: shmem_init_thread/query_thread
 * (and threads of every PE doing AMOs and puts at once), shmem_malloc_with_hints (every hint,
 * same offset everywhere, the blocks used for AMOs and signals), shmem_team_ptr, complex
 * sum/prod reductions (exact values against a fold in team order, inexact ones identical on
 * every member, in place, bytes past the result untouched) and their deprecated _to_all forms,
 * the _Generic collectives and reductions, the _Generic RMA/AMO forms with and without a
 * leading context (a team context too), the _Generic multi-variable wait/test forms, the
 * deprecated alltoalls32/64 with strides, and the deprecated cache routines. */
#include <complex.h>
#include <pthread.h>
#include <shmem.h>
#include <string.h>

#include "check.h"

#define M 7
#define BUF 65536
#define SENT 0x5a

static unsigned char *src, *dst; /* symmetric scratch */
static unsigned char expect[BUF];
static const char *team_name;
static int me, n;

static void check_bytes(size_t len, size_t guard, const char *what)
{
    for (size_t i = 0; i < len; i++)
        CHECK(dst[i] == expect[i], "%s on %s: byte %zu is %#x, expected %#x", what, team_name, i,
              dst[i], expect[i]);
    for (size_t i = len; i < len + guard; i++)
        CHECK(dst[i] == SENT, "%s on %s: byte %zu past the result was written", what, team_name,
              i);
}

/* ---- threads: SHMEM_THREAD_MULTIPLE ---- */
#define ITERS 500
static long *counter, *slots;

static void *thread_main(void *arg)
{
    int t = (int)(long)arg;
    shmem_ctx_t c = SHMEM_CTX_DEFAULT;
    if (t == 1)
        CHECK(shmem_ctx_create(SHMEM_CTX_PRIVATE, &c) == 0, "ctx_create in a thread");
    for (int i = 0; i < ITERS; i++) {
        if (t == 0)
            shmem_atomic_inc(counter, 0);
        else
            shmem_atomic_fetch_add(c, counter, 1L, 0);
    }
    long v = 1000L * me + t;
    if (t == 0)
        shmem_put(&slots[2 * me + t], &v, 1, 0);
    else
        shmem_put(c, &slots[2 * me + t], &v, 1, 0);
    if (c != SHMEM_CTX_DEFAULT)
        shmem_ctx_destroy(c);
    shmem_quiet();
    return NULL;
}

static void test_threads(void)
{
    CHECK(SHMEM_THREAD_SINGLE < SHMEM_THREAD_FUNNELED &&
              SHMEM_THREAD_FUNNELED < SHMEM_THREAD_SERIALIZED &&
              SHMEM_THREAD_SERIALIZED < SHMEM_THREAD_MULTIPLE,
          "thread levels are not in increasing order");
    counter = shmem_calloc(1, sizeof(long));
    slots = shmem_calloc(2 * (size_t)n, sizeof(long));
    pthread_t th[2];
    for (long t = 0; t < 2; t++)
        CHECK(pthread_create(&th[t], NULL, thread_main, (void *)t) == 0, "pthread_create");
    for (int t = 0; t < 2; t++)
        pthread_join(th[t], NULL);
    shmem_barrier_all();
    long total = shmem_atomic_fetch(counter, 0);
    CHECK(total == 2L * ITERS * n, "counter %ld from 2 threads on %d PEs, expected %ld", total, n,
          2L * ITERS * n);
    if (me == 0)
        for (int p = 0; p < n; p++)
            for (int t = 0; t < 2; t++)
                CHECK(slots[2 * p + t] == 1000L * p + t, "slot of PE %d thread %d: %ld", p, t,
                      slots[2 * p + t]);
    shmem_free(slots);
    shmem_free(counter);
}

/* ---- shmem_malloc_with_hints ---- */
static void test_hints(void)
{
    CHECK(SHMEM_MALLOC_ATOMICS_REMOTE && SHMEM_MALLOC_SIGNAL_REMOTE &&
              !(SHMEM_MALLOC_ATOMICS_REMOTE & SHMEM_MALLOC_SIGNAL_REMOTE),
          "hints are not distinct bits");
    const long hints[] = { 0, SHMEM_MALLOC_ATOMICS_REMOTE, SHMEM_MALLOC_SIGNAL_REMOTE,
                           SHMEM_MALLOC_ATOMICS_REMOTE | SHMEM_MALLOC_SIGNAL_REMOTE, 1L << 40 };
    enum { NH = sizeof hints / sizeof hints[0] };
    char *p[NH];
    long *offs = shmem_malloc((size_t)n * NH * sizeof(long)), *mine = shmem_malloc(NH * sizeof(long));
    for (int h = 0; h < NH; h++) {
        p[h] = shmem_malloc_with_hints(100 + (size_t)h * 64, hints[h]);
        CHECK(p[h] != NULL, "malloc_with_hints(%ld) returned NULL", hints[h]);
        CHECK(((uintptr_t)p[h] & 63) == 0, "block %d not aligned", h);
        CHECK(shmem_addr_accessible(p[h], n - 1), "block %d not symmetric", h);
        mine[h] = (long)(p[h] - (char *)offs);
    }
    CHECK(shmem_malloc_with_hints(0, SHMEM_MALLOC_ATOMICS_REMOTE) == NULL, "size 0 not NULL");
    shmem_fcollect(SHMEM_TEAM_WORLD, offs, mine, NH);
    for (int q = 0; q < n; q++)
        for (int h = 0; h < NH; h++)
            CHECK(offs[q * NH + h] == mine[h], "block %d at offset %ld on PE %d, %ld here", h,
                  offs[q * NH + h], q, mine[h]);
    /* use them: AMOs on the ATOMICS block, a put with signal into the SIGNAL block */
    long *a = (long *)p[1];
    uint64_t *sig = (uint64_t *)p[2], *data = sig + 1;
    *a = 0;
    *sig = 0;
    shmem_barrier_all();
    shmem_atomic_add(a, (long)me + 1, 0);
    uint64_t v = 0x1122334455667788ULL + (uint64_t)me;
    shmem_put_signal(data, &v, 1, sig, 1, SHMEM_SIGNAL_ADD, (me + 1) % n);
    shmem_signal_wait_until(sig, SHMEM_CMP_EQ, 1);
    CHECK(*data == 0x1122334455667788ULL + (uint64_t)((me + n - 1) % n), "signal block data");
    shmem_barrier_all();
    CHECK(shmem_atomic_fetch(a, 0) == (long)n * (n + 1) / 2, "atomics block total");
    shmem_barrier_all();
    for (int h = NH - 1; h >= 0; h--)
        shmem_free(p[h]);
    shmem_free(mine);
    shmem_free(offs);
}

/* ---- shmem_team_ptr ---- */
static void test_team_ptr(shmem_team_t even)
{
    int *x = shmem_calloc(1, sizeof(int));
    for (int q = 0; q < n; q++)
        CHECK(shmem_team_ptr(SHMEM_TEAM_WORLD, x, q) == shmem_ptr(x, q), "team_ptr(WORLD, %d)", q);
    CHECK(shmem_team_ptr(SHMEM_TEAM_WORLD, x, n) == NULL, "team_ptr past the team");
    CHECK(shmem_team_ptr(SHMEM_TEAM_WORLD, x, -1) == NULL, "team_ptr(-1)");
    CHECK(shmem_team_ptr(SHMEM_TEAM_INVALID, x, 0) == NULL, "team_ptr(INVALID)");
    if (even != SHMEM_TEAM_INVALID) {
        int en = shmem_team_n_pes(even);
        for (int i = 0; i < en; i++)
            CHECK(shmem_team_ptr(even, x, i) == shmem_ptr(x, 2 * i), "team_ptr(even, %d)", i);
        CHECK(shmem_team_ptr(even, x, en) == NULL, "team_ptr past the even team");
    }
    /* a store through the pointer (NULL would mean: not load/store accessible from here) */
    int *r = shmem_team_ptr(SHMEM_TEAM_WORLD, x, (me + 1) % n);
    if (r)
        *r = 7000 + me;
    else
        shmem_p(x, 7000 + me, (me + 1) % n);
    shmem_barrier_all();
    CHECK(*x == 7000 + (me + n - 1) % n, "store through team_ptr: %d", *x);
    shmem_barrier_all();
    shmem_free(x);
}

/* ---- complex reductions ---- */
#define R(i, k) (((i) * 5 + (k) * 3) % 11 + 1)
#define CEXACT(i, k) CMPLX((double)R(i, k), (double)(R(i, (k) + 1) - 6))
#define CINEXACT(i, k) CMPLX(0.1 * ((i) + 1) + (k) / 7.0, 1.0 / ((i) + 3) - 0.3 * (k))
#define TEST_CRED(T, NAME, OP, OPER, GEN, MK)                                                  \
    do {                                                                                       \
        T *s = (T *)src, *d = (T *)dst, *e = (T *)expect;                                      \
        memset(dst, SENT, BUF);                                                                \
        memset(expect, SENT, BUF);                                                             \
        for (int k = 0; k < M; k++) {                                                          \
            s[k] = (T)GEN(ti, k);                                                              \
            T acc = (T)GEN(0, k);                                                              \
            for (int j = 1; j < tn; j++)                                                       \
                acc = acc OPER(T) GEN(j, k);                                                   \
            e[k] = acc;                                                                        \
        }                                                                                      \
        CHECK(MK == 0, #NAME "_" #OP " rc");                                                   \
        check_bytes(M * sizeof(T), 64, #NAME "_" #OP "_reduce (" #GEN ")");                    \
    } while (0)

/* Every member got the same bytes: collect everyone's result and compare (in src, which the
 * reduction no longer needs: its last sync has passed on every member). */
static void same_everywhere(shmem_team_t t, size_t bytes, const char *what)
{
    int tn = shmem_team_n_pes(t);
    unsigned char *mine = src, *all = src + BUF / 2;
    memcpy(mine, dst, bytes);
    CHECK(shmem_fcollectmem(t, all, mine, bytes) == 0, "fcollectmem rc");
    for (int j = 0; j < tn; j++)
        CHECK(memcmp(all + (size_t)j * bytes, mine, bytes) == 0,
              "%s on %s: team PE %d got different bits", what, team_name, j);
}

static void test_complex(shmem_team_t t)
{
    int ti = shmem_team_my_pe(t), tn = shmem_team_n_pes(t);
    TEST_CRED(double _Complex, complexd, sum, +, CEXACT,
              shmem_complexd_sum_reduce(t, d, s, M));
    TEST_CRED(double _Complex, complexd, prod, *, CEXACT,
              shmem_complexd_prod_reduce(t, d, s, M));
    TEST_CRED(float _Complex, complexf, sum, +, CEXACT,
              shmem_complexf_sum_reduce(t, d, s, M));
    TEST_CRED(float _Complex, complexf, prod, *, CEXACT,
              shmem_complexf_prod_reduce(t, d, s, M));
    /* inexact values: the same fold order everywhere gives the same bits everywhere */
    TEST_CRED(double _Complex, complexd, prod, *, CINEXACT,
              shmem_complexd_prod_reduce(t, d, s, M));
    same_everywhere(t, M * sizeof(double _Complex), "complexd_prod_reduce (inexact)");
    TEST_CRED(float _Complex, complexf, sum, +, CINEXACT,
              shmem_complexf_sum_reduce(t, d, s, M));
    same_everywhere(t, M * sizeof(float _Complex), "complexf_sum_reduce (inexact)");
    /* the generic forms */
    TEST_CRED(double _Complex, complexd, sum, +, CINEXACT, shmem_sum_reduce(t, d, s, M));
    TEST_CRED(float _Complex, complexf, prod, *, CEXACT, shmem_prod_reduce(t, d, s, M));
    /* in place */
    double _Complex *s = (double _Complex *)src, e[M];
    for (int k = 0; k < M; k++) {
        s[k] = CEXACT(ti, k);
        e[k] = CEXACT(0, k);
        for (int j = 1; j < tn; j++)
            e[k] *= CEXACT(j, k);
    }
    CHECK(shmem_complexd_prod_reduce(t, s, s, M) == 0, "in-place rc");
    CHECK(memcmp(s, e, sizeof e) == 0, "in-place complexd_prod_reduce on %s", team_name);
}

/* The deprecated forms on the active set (start, 2^logstride, size); pSync left as it was. */
static double _Complex *wd; /* pWrk: symmetric, as the spec requires */
static float _Complex *wf;
static void test_complex_to_all(int start, int logstride, int size, long *psync)
{
    int ti = (me - start) >> logstride, tn = size;
    TEST_CRED(double _Complex, complexd, sum, +, CEXACT,
              (shmem_complexd_sum_to_all(d, s, M, start, logstride, size, wd, psync), 0));
    TEST_CRED(double _Complex, complexd, prod, *, CINEXACT,
              (shmem_complexd_prod_to_all(d, s, M, start, logstride, size, wd, psync), 0));
    TEST_CRED(float _Complex, complexf, sum, +, CINEXACT,
              (shmem_complexf_sum_to_all(d, s, M, start, logstride, size, wf, psync), 0));
    TEST_CRED(float _Complex, complexf, prod, *, CEXACT,
              (shmem_complexf_prod_to_all(d, s, M, start, logstride, size, wf, psync), 0));
    for (int i = 0; i < SHMEM_REDUCE_SYNC_SIZE; i++)
        CHECK(psync[i] == SHMEM_SYNC_VALUE, "pSync[%d] changed", i);
}

/* ---- generic collectives ---- */
#define V(i, k) ((i) * 37 + (k) * 3 + 1)
#define V2(i, j, k) ((i) * 50 + (j) * 7 + (k) + 1)
#define TEST_GCOLL(T)                                                                          \
    do {                                                                                       \
        T *s = (T *)src, *d = (T *)dst, *e = (T *)expect;                                      \
        for (int root = 0; root < tn; root++) {                                                \
            memset(dst, SENT, BUF);                                                            \
            memset(expect, SENT, BUF);                                                         \
            for (int k = 0; k < M; k++)                                                        \
                s[k] = (T)V(ti + root, k), e[k] = (T)V(2 * root, k);                           \
            CHECK(shmem_broadcast(t, d, s, M, root) == 0, "broadcast rc");                     \
            check_bytes(M * sizeof(T), 64, "shmem_broadcast(" #T ")");                         \
        }                                                                                      \
        memset(dst, SENT, BUF);                                                                \
        memset(expect, SENT, BUF);                                                             \
        size_t off = 0;                                                                        \
        for (int j = 0; j < tn; j++)                                                           \
            for (int k = 0; k <= j; k++)                                                       \
                e[off++] = (T)V(j, k);                                                         \
        for (int k = 0; k <= ti; k++)                                                          \
            s[k] = (T)V(ti, k);                                                                \
        CHECK(shmem_collect(t, d, s, (size_t)ti + 1) == 0, "collect rc");                      \
        check_bytes(off * sizeof(T), 64, "shmem_collect(" #T ")");                             \
        memset(dst, SENT, BUF);                                                                \
        for (int k = 0; k < M; k++)                                                            \
            s[k] = (T)V(ti, k);                                                                \
        for (int j = 0; j < tn; j++)                                                           \
            for (int k = 0; k < M; k++)                                                        \
                e[j * M + k] = (T)V(j, k);                                                     \
        CHECK(shmem_fcollect(t, d, s, M) == 0, "fcollect rc");                                 \
        check_bytes((size_t)tn * M * sizeof(T), 64, "shmem_fcollect(" #T ")");                 \
        memset(dst, SENT, BUF);                                                                \
        for (int j = 0; j < tn; j++)                                                           \
            for (int k = 0; k < M; k++)                                                        \
                s[j * M + k] = (T)V2(ti, j, k), e[j * M + k] = (T)V2(j, ti, k);                \
        CHECK(shmem_alltoall(t, d, s, M) == 0, "alltoall rc");                                 \
        check_bytes((size_t)tn * M * sizeof(T), 64, "shmem_alltoall(" #T ")");                 \
        memset(dst, SENT, BUF);                                                                \
        memset(expect, SENT, BUF);                                                             \
        for (int j = 0; j < tn; j++)                                                           \
            for (int k = 0; k < M; k++)                                                        \
                s[(j * M + k) * 3] = (T)V2(ti, j, k), e[(j * M + k) * 2] = (T)V2(j, ti, k);    \
        CHECK(shmem_alltoalls(t, d, s, 2, 3, M) == 0, "alltoalls rc");                         \
        check_bytes(((size_t)tn * M * 2 - 1) * sizeof(T), 64, "shmem_alltoalls(" #T ")");      \
    } while (0)

/* ---- generic reductions: value compare (long double has padding bytes), guard bytes ---- */
#define TEST_GRED(T, OP, FOLD)                                                                 \
    do {                                                                                       \
        T *s = (T *)src, *d = (T *)dst, ev[M];                                                 \
        memset(dst, SENT, BUF);                                                                \
        for (int k = 0; k < M; k++) {                                                          \
            s[k] = (T)R(ti, k);                                                                \
            T acc = (T)R(0, k);                                                                \
            for (int j = 1; j < tn; j++) {                                                     \
                T a = acc, b = (T)R(j, k);                                                     \
                acc = (T)(FOLD);                                                               \
            }                                                                                  \
            ev[k] = acc;                                                                       \
        }                                                                                      \
        CHECK(shmem_##OP##_reduce(t, d, s, M) == 0, "shmem_" #OP "_reduce rc");                \
        for (int k = 0; k < M; k++)                                                            \
            CHECK(d[k] == ev[k], "shmem_" #OP "_reduce(" #T ") on %s: element %d wrong",       \
                  team_name, k);                                                               \
        for (size_t i = M * sizeof(T); i < M * sizeof(T) + 64; i++)                            \
            CHECK(dst[i] == SENT, "shmem_" #OP "_reduce(" #T ") wrote past the result");       \
    } while (0)
#define TEST_GBIT(T)                                                                           \
    TEST_GRED(T, and, a & b);                                                                  \
    TEST_GRED(T, or, a | b);                                                                   \
    TEST_GRED(T, xor, a ^ b)
#define TEST_GARITH(T)                                                                         \
    TEST_GRED(T, max, a > b ? a : b);                                                          \
    TEST_GRED(T, min, a < b ? a : b);                                                          \
    TEST_GRED(T, sum, a + b);                                                                  \
    TEST_GRED(T, prod, a * b)

static void test_generic_coll(shmem_team_t t)
{
    int ti = shmem_team_my_pe(t), tn = shmem_team_n_pes(t);
    TEST_GCOLL(char);
    TEST_GCOLL(signed char);
    TEST_GCOLL(short);
    TEST_GCOLL(int);
    TEST_GCOLL(long);
    TEST_GCOLL(long long);
    TEST_GCOLL(unsigned char);
    TEST_GCOLL(unsigned short);
    TEST_GCOLL(unsigned int);
    TEST_GCOLL(unsigned long);
    TEST_GCOLL(unsigned long long);
    TEST_GCOLL(float);
    TEST_GCOLL(double);
    TEST_GCOLL(uint8_t);
    TEST_GCOLL(int64_t);
    TEST_GCOLL(size_t);
    {   /* long double: by value (padding bytes) */
        long double *s = (long double *)src, *d = (long double *)dst;
        for (int root = 0; root < tn; root++) {
            for (int k = 0; k < M; k++)
                s[k] = (long double)V(ti + root, k) / 3, d[k] = 0;
            CHECK(shmem_broadcast(t, d, s, M, root) == 0, "broadcast rc");
            for (int k = 0; k < M; k++)
                CHECK(d[k] == (long double)V(2 * root, k) / 3, "long double broadcast");
        }
    }
    TEST_GBIT(unsigned char);
    TEST_GBIT(unsigned short);
    TEST_GBIT(unsigned int);
    TEST_GBIT(unsigned long);
    TEST_GBIT(unsigned long long);
    TEST_GBIT(int8_t);
    TEST_GBIT(int16_t);
    TEST_GBIT(int32_t);
    TEST_GBIT(int64_t);
    TEST_GBIT(uint64_t);
    TEST_GBIT(size_t);
    TEST_GARITH(char);
    TEST_GARITH(signed char);
    TEST_GARITH(short);
    TEST_GARITH(int);
    TEST_GARITH(long);
    TEST_GARITH(long long);
    TEST_GARITH(unsigned char);
    TEST_GARITH(unsigned int);
    TEST_GARITH(unsigned long long);
    TEST_GARITH(ptrdiff_t);
    TEST_GARITH(float);
    TEST_GARITH(double);
    TEST_GARITH(long double);
}

/* ---- generic RMA/AMO, with and without a leading context ---- */
static void test_generic_rma(shmem_ctx_t c)
{
    int right = (me + 1) % n, left = (me + n - 1) % n;
    int *ri = shmem_calloc(64, sizeof(int)), vi[8], gi[8];
    double *rd = shmem_calloc(16, sizeof(double)), vd[4];
    uint64_t *sig = shmem_calloc(1, sizeof(uint64_t));
    for (int k = 0; k < 8; k++)
        vi[k] = me * 100 + k;
    for (int k = 0; k < 4; k++)
        vd[k] = me + k / 8.0;
    shmem_put(ri + 0, vi, 4, right);
    shmem_put(c, ri + 4, vi, 4, right);
    shmem_put_nbi(ri + 8, vi, 2, right);
    shmem_put_nbi(c, ri + 10, vi + 2, 2, right);
    shmem_p(ri + 12, me + 1000, right);
    shmem_p(c, ri + 13, me + 2000, right);
    shmem_iput(ri + 16, vi, 2, 1, 3, right); /* 16, 18, 20 */
    shmem_iput(c, ri + 22, vi, 2, 3, 3, right); /* 22, 24, 26 <- vi[0], vi[3], vi[6] */
    shmem_ctx_quiet(c);
    shmem_quiet();
    shmem_put_signal(rd + 0, vd, 2, sig, 1, SHMEM_SIGNAL_ADD, right);
    shmem_put_signal(c, rd + 2, vd + 2, 2, sig, 1, SHMEM_SIGNAL_ADD, right);
    shmem_put_signal_nbi(rd + 4, vd, 1, sig, 1, SHMEM_SIGNAL_ADD, right);
    shmem_put_signal_nbi(c, rd + 5, vd + 1, 1, sig, 1, SHMEM_SIGNAL_ADD, right);
    shmem_signal_wait_until(sig, SHMEM_CMP_EQ, 4);
    for (int k = 0; k < 6; k++)
        CHECK(rd[k] == left + (k < 4 ? k : k - 4) / 8.0, "put_signal rd[%d] = %g", k, rd[k]);
    shmem_barrier_all();
    int L = left * 100;
    const int want[27] = { L, L + 1, L + 2, L + 3, L, L + 1, L + 2, L + 3, L, L + 1, L + 2,
                           L + 3, left + 1000, left + 2000, 0, 0, L, 0, L + 1, 0, L + 2, 0,
                           L, 0, L + 3, 0, L + 6 };
    for (int k = 0; k < 27; k++)
        CHECK(ri[k] == want[k], "generic put: ri[%d] = %d, expected %d", k, ri[k], want[k]);
    /* gets from the right neighbour read back what this PE put there */
    memset(gi, 0, sizeof gi);
    shmem_get(gi, ri, 2, right);
    shmem_get(c, gi + 2, ri + 2, 2, right);
    shmem_get_nbi(gi + 4, ri + 4, 1, right);
    shmem_get_nbi(c, gi + 5, ri + 5, 1, right);
    shmem_quiet();
    shmem_ctx_quiet(c);
    for (int k = 0; k < 6; k++)
        CHECK(gi[k] == me * 100 + k % 4, "generic get gi[%d] = %d", k, gi[k]);
    CHECK(shmem_g(ri + 12, right) == me + 1000, "generic g");
    CHECK(shmem_g(c, ri + 13, right) == me + 2000, "generic ctx g");
    CHECK(shmem_g(c, rd + 1, right) == me + 1 / 8.0, "generic ctx g (double)");
    memset(gi, 0, sizeof gi);
    shmem_iget(gi, ri + 16, 2, 2, 3, right);
    shmem_iget(c, gi + 1, ri + 22, 2, 2, 3, right);
    const int wg[6] = { me * 100, me * 100, me * 100 + 1, me * 100 + 3, me * 100 + 2,
                        me * 100 + 6 };
    for (int k = 0; k < 6; k++)
        CHECK(gi[k] == wg[k], "generic iget gi[%d] = %d, expected %d", k, gi[k], wg[k]);
    shmem_barrier_all();

    /* atomics on the right neighbour's words (only this PE touches them) */
    long *al = shmem_calloc(4, sizeof(long)), fl = 0;
    double *ad = shmem_calloc(4, sizeof(double)), fd = 0;
    unsigned long *au = shmem_calloc(4, sizeof(unsigned long)), fu = 0;
    int *ai = shmem_calloc(4, sizeof(int));
    unsigned int *ab = shmem_calloc(4, sizeof(unsigned int)), fb = 0;
    uint64_t *a64 = shmem_calloc(2, sizeof(uint64_t)), f64[3] = { 1, 1, 1 };
    shmem_atomic_set(&al[0], 5L, right);
    shmem_atomic_set(c, &al[1], 6L, right);
    CHECK(shmem_atomic_fetch(&al[0], right) == 5 && shmem_atomic_fetch(c, &al[1], right) == 6,
          "generic fetch/set");
    CHECK(shmem_atomic_swap(&al[0], 7L, right) == 5 && shmem_atomic_swap(c, &al[1], 8L, right) == 6,
          "generic swap");
    shmem_atomic_fetch_nbi(&fl, &al[0], right);
    shmem_quiet();
    CHECK(fl == 7, "generic fetch_nbi");
    shmem_atomic_fetch_nbi(c, &fl, &al[1], right);
    shmem_ctx_quiet(c);
    CHECK(fl == 8, "generic ctx fetch_nbi");
    shmem_atomic_swap_nbi(&fl, &al[0], 9L, right);
    shmem_quiet();
    CHECK(fl == 7, "generic swap_nbi");
    shmem_atomic_swap_nbi(c, &fl, &al[1], 10L, right);
    shmem_ctx_quiet(c);
    CHECK(fl == 8, "generic ctx swap_nbi");
    shmem_atomic_set(&ad[0], -0.0, right);
    shmem_atomic_set(c, &ad[1], 2.5, right);
    CHECK(shmem_atomic_swap(&ad[0], 1.25, right) == 0.0 && shmem_atomic_fetch(c, &ad[1], right) == 2.5,
          "generic double set/swap/fetch");
    shmem_atomic_swap_nbi(c, &fd, &ad[1], 3.75, right);
    shmem_ctx_quiet(c);
    CHECK(fd == 2.5, "generic ctx double swap_nbi");

    CHECK(shmem_atomic_compare_swap(&au[0], 0UL, 10UL, right) == 0, "generic compare_swap");
    CHECK(shmem_atomic_compare_swap(&au[0], 0UL, 99UL, right) == 10, "compare_swap, wrong cond");
    CHECK(shmem_atomic_compare_swap(c, &au[1], 0UL, 20UL, right) == 0, "generic ctx compare_swap");
    CHECK(shmem_atomic_fetch_inc(&au[0], right) == 10, "generic fetch_inc");
    CHECK(shmem_atomic_fetch_inc(c, &au[1], right) == 20, "generic ctx fetch_inc");
    shmem_atomic_inc(&au[0], right);   /* 12 */
    shmem_atomic_inc(c, &au[1], right); /* 22 */
    CHECK(shmem_atomic_fetch_add(&au[0], 5UL, right) == 12, "generic fetch_add");
    CHECK(shmem_atomic_fetch_add(c, &au[1], 5UL, right) == 22, "generic ctx fetch_add");
    shmem_atomic_add(&au[0], 3UL, right);   /* 20 */
    shmem_atomic_add(c, &au[1], 3UL, right); /* 30 */
    shmem_atomic_compare_swap_nbi(&fu, &au[0], 20UL, 40UL, right);
    shmem_quiet();
    CHECK(fu == 20, "generic compare_swap_nbi");
    shmem_atomic_compare_swap_nbi(c, &fu, &au[1], 30UL, 60UL, right);
    shmem_ctx_quiet(c);
    CHECK(fu == 30, "generic ctx compare_swap_nbi");
    shmem_atomic_fetch_inc_nbi(&fu, &au[0], right);
    shmem_quiet();
    CHECK(fu == 40, "generic fetch_inc_nbi");
    shmem_atomic_fetch_inc_nbi(c, &fu, &au[1], right);
    shmem_ctx_quiet(c);
    CHECK(fu == 60, "generic ctx fetch_inc_nbi");
    shmem_atomic_fetch_add_nbi(&fu, &au[0], 100UL, right);
    shmem_quiet();
    CHECK(fu == 41, "generic fetch_add_nbi");
    shmem_atomic_fetch_add_nbi(c, &fu, &au[1], 100UL, right);
    shmem_ctx_quiet(c);
    CHECK(fu == 61, "generic ctx fetch_add_nbi");
    shmem_atomic_add(&ai[0], 3, right);
    shmem_atomic_add(c, &ai[1], 4, right);
    CHECK(shmem_atomic_fetch_add(c, &ai[0], 1, right) == 3, "generic ctx int fetch_add");

    CHECK(shmem_atomic_fetch_or(&ab[0], 0xf0u, right) == 0, "generic fetch_or");
    shmem_atomic_or(&ab[0], 0x0fu, right); /* 0xff */
    CHECK(shmem_atomic_fetch_and(&ab[0], 0x3cu, right) == 0xff, "generic fetch_and");
    shmem_atomic_and(&ab[0], 0x1cu, right); /* 0x1c */
    CHECK(shmem_atomic_fetch_xor(&ab[0], 0x101u, right) == 0x1c, "generic fetch_xor");
    shmem_atomic_xor(&ab[0], 0x1000u, right); /* 0x111d */
    CHECK(shmem_atomic_fetch_or(c, &ab[1], 0xf0u, right) == 0, "generic ctx fetch_or");
    shmem_atomic_or(c, &ab[1], 0x0fu, right);
    CHECK(shmem_atomic_fetch_and(c, &ab[1], 0x3cu, right) == 0xff, "generic ctx fetch_and");
    shmem_atomic_and(c, &ab[1], 0x1cu, right);
    CHECK(shmem_atomic_fetch_xor(c, &ab[1], 0x101u, right) == 0x1c, "generic ctx fetch_xor");
    shmem_atomic_xor(c, &ab[1], 0x1000u, right);
    shmem_atomic_fetch_or_nbi(&fb, &ab[2], 0x30u, right);
    shmem_quiet();
    CHECK(fb == 0, "generic fetch_or_nbi");
    shmem_atomic_fetch_and_nbi(c, &fb, &ab[2], 0x10u, right);
    shmem_ctx_quiet(c);
    CHECK(fb == 0x30, "generic ctx fetch_and_nbi");
    shmem_atomic_fetch_xor_nbi(&fb, &ab[2], 0x3u, right);
    shmem_quiet();
    CHECK(fb == 0x10, "generic fetch_xor_nbi"); /* 0x13 */
    shmem_atomic_fetch_or_nbi(c, &f64[0], &a64[0], (uint64_t)1 << 63, right);
    shmem_atomic_fetch_and_nbi(&f64[1], &a64[1], 0, right);
    shmem_ctx_quiet(c);
    shmem_atomic_fetch_xor_nbi(c, &f64[2], &a64[0], 1, right);
    shmem_ctx_quiet(c);
    shmem_quiet();
    CHECK(f64[0] == 0 && f64[1] == 0 && f64[2] == (uint64_t)1 << 63,
          "generic fetch_or/and/xor_nbi (uint64_t)");
    shmem_barrier_all();
    CHECK(al[0] == 9 && al[1] == 10, "final long words %ld %ld", al[0], al[1]);
    CHECK(ad[0] == 1.25 && ad[1] == 3.75, "final double words");
    CHECK(au[0] == 141 && au[1] == 161, "final ulong words %lu %lu", au[0], au[1]);
    CHECK(ai[0] == 4 && ai[1] == 4, "final int words");
    CHECK(ab[0] == 0x111d && ab[1] == 0x111d && ab[2] == 0x13, "final uint words %#x %#x %#x",
          ab[0], ab[1], ab[2]);
    CHECK(a64[0] == ((1ULL << 63) | 1) && a64[1] == 0, "final uint64 words");
    shmem_barrier_all();
    shmem_free(a64);
    shmem_free(ab);
    shmem_free(ai);
    shmem_free(au);
    shmem_free(ad);
    shmem_free(al);
    shmem_free(sig);
    shmem_free(rd);
    shmem_free(ri);
}

/* A team context through the generic forms: team-relative PE numbers. */
static void test_team_ctx(shmem_team_t even)
{
    long *x = shmem_calloc(2, sizeof(long));
    if (even != SHMEM_TEAM_INVALID) {
        int ei = shmem_team_my_pe(even), en = shmem_team_n_pes(even);
        shmem_ctx_t tc;
        CHECK(shmem_team_create_ctx(even, 0, &tc) == 0, "team_create_ctx");
        shmem_p(tc, &x[0], 500L + ei, (ei + 1) % en);
        shmem_atomic_add(tc, &x[1], (long)me + 1, 0);
        shmem_ctx_quiet(tc);
        shmem_team_sync(even);
        CHECK(x[0] == 500L + (ei + en - 1) % en, "team ctx p: %ld", x[0]);
        if (ei == 0)
            CHECK(x[1] == (long)en * en, "team ctx add at team PE 0: %ld", x[1]); /* sum 2i+1 */
        CHECK(shmem_g(tc, &x[0], (ei + 1) % en) == 500L + ei, "team ctx g");
        shmem_team_sync(even);
        shmem_ctx_destroy(tc);
    }
    shmem_barrier_all();
    shmem_free(x);
}

/* ---- generic multi-variable wait/test ---- */
static void test_generic_p2p(void)
{
    long *iv = shmem_calloc(4, sizeof(long));
    long vals[4] = { 1, 2, 3, 4 }, cmpv[4] = { 1, 0, 3, 9 };
    size_t idx[4];
    int status[4] = { 0, 0, 1, 0 };
    shmem_barrier_all();
    shmem_put(iv, vals, 4, (me + 1) % n);
    shmem_wait_until_all(iv, 4, NULL, SHMEM_CMP_NE, 0L);
    CHECK(shmem_test_all(iv, 4, NULL, SHMEM_CMP_GT, 0L) == 1, "test_all");
    CHECK(shmem_test_any(iv, 4, NULL, SHMEM_CMP_EQ, 3L) == 2, "test_any");
    CHECK(shmem_test_any(iv, 4, status, SHMEM_CMP_EQ, 3L) == SIZE_MAX, "test_any masked");
    CHECK(shmem_wait_until_any(iv, 4, status, SHMEM_CMP_EQ, 4L) == 3, "wait_until_any");
    CHECK(shmem_wait_until_some(iv, 4, idx, NULL, SHMEM_CMP_GE, 2L) == 3 && idx[0] == 1 &&
              idx[2] == 3,
          "wait_until_some");
    CHECK(shmem_test_some(iv, 4, idx, status, SHMEM_CMP_LT, 3L) == 2 && idx[1] == 1, "test_some");
    shmem_wait_until_all_vector(iv, 4, status, SHMEM_CMP_LE, vals);
    size_t r = shmem_wait_until_any_vector(iv, 4, NULL, SHMEM_CMP_EQ, cmpv);
    CHECK(r == 0 || r == 2, "wait_until_any_vector gave %zu", r);
    CHECK(shmem_wait_until_some_vector(iv, 4, idx, NULL, SHMEM_CMP_EQ, cmpv) == 2 && idx[1] == 2,
          "wait_until_some_vector");
    CHECK(shmem_test_all_vector(iv, 4, NULL, SHMEM_CMP_LT, cmpv) == 0, "test_all_vector");
    CHECK(shmem_test_any_vector(iv, 4, NULL, SHMEM_CMP_LT, cmpv) == 3, "test_any_vector");
    CHECK(shmem_test_some_vector(iv, 4, idx, NULL, SHMEM_CMP_GT, cmpv) == 1 && idx[0] == 1,
          "test_some_vector");
    CHECK(shmem_test(iv, SHMEM_CMP_EQ, 1L) == 1, "test");
    shmem_wait_until(iv + 3, SHMEM_CMP_EQ, 4L);
    shmem_barrier_all();
    shmem_free(iv);
}

/* ---- deprecated alltoalls32/64 on an active set ---- */
#define TEST_ALLTOALLS(B, T)                                                                   \
    do {                                                                                       \
        T *s = (T *)src, *e = (T *)expect;                                                     \
        memset(src, SENT, BUF);                                                                \
        memset(dst, SENT, BUF);                                                                \
        memset(expect, SENT, BUF);                                                             \
        for (int j = 0; j < size; j++)                                                         \
            for (int k = 0; k < M; k++)                                                        \
                s[(j * M + k) * 2] = (T)V2(ai, j, k), e[(j * M + k) * 3] = (T)V2(j, ai, k);    \
        shmem_alltoalls##B(dst, src, 3, 2, M, start, logstride, size, psync);                  \
        check_bytes(((size_t)size * M * 3 - 2) * sizeof(T), 64, "shmem_alltoalls" #B);        \
        memset(dst, SENT, BUF);                                                                \
        for (int j = 0; j < size; j++)                                                         \
            for (int k = 0; k < M; k++)                                                        \
                s[j * M + k] = (T)V2(ai, j, k), e[j * M + k] = (T)V2(j, ai, k);                \
        shmem_alltoalls##B(dst, src, 1, 1, M, start, logstride, size, psync);                  \
        check_bytes((size_t)size * M * sizeof(T), 64, "shmem_alltoalls" #B " (unit strides)"); \
    } while (0)

static void test_alltoalls(int start, int logstride, int size, long *psync)
{
    int ai = (me - start) >> logstride;
    TEST_ALLTOALLS(32, uint32_t);
    TEST_ALLTOALLS(64, uint64_t);
    for (int i = 0; i < SHMEM_ALLTOALLS_SYNC_SIZE; i++)
        CHECK(psync[i] == SHMEM_SYNC_VALUE, "pSync[%d] changed by alltoalls", i);
}

int main(void)
{
    int provided = -1, q = -1;
    CHECK(shmem_init_thread(SHMEM_THREAD_MULTIPLE, &provided) == 0, "shmem_init_thread rc");
    me = shmem_my_pe();
    n = shmem_n_pes();
    CHECK(provided == SHMEM_THREAD_MULTIPLE, "provided %d", provided);
    shmem_query_thread(&q);
    CHECK(q == provided, "query_thread %d, init_thread gave %d", q, provided);
    src = shmem_malloc(BUF);
    dst = shmem_malloc(BUF);
    long *psync = shmem_malloc(SHMEM_SYNC_SIZE * sizeof(long));
    for (int i = 0; i < SHMEM_SYNC_SIZE; i++)
        psync[i] = SHMEM_SYNC_VALUE;
    wd = shmem_malloc(SHMEM_REDUCE_MIN_WRKDATA_SIZE * M * sizeof *wd);
    wf = shmem_malloc(SHMEM_REDUCE_MIN_WRKDATA_SIZE * M * sizeof *wf);
    shmem_barrier_all();

    test_threads();
    test_hints();
    shmem_team_t even;
    shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, (n + 1) / 2, NULL, 0, &even);
    test_team_ptr(even);

    team_name = "WORLD";
    test_complex(SHMEM_TEAM_WORLD);
    test_generic_coll(SHMEM_TEAM_WORLD);
    if (even != SHMEM_TEAM_INVALID) {
        team_name = "even";
        test_complex(even);
        test_generic_coll(even);
    }
    shmem_barrier_all();

    team_name = "active set (all)";
    test_complex_to_all(0, 0, n, psync);
    test_alltoalls(0, 0, n, psync);
    shmem_barrier_all();
    if (me % 2 == 0) {
        team_name = "active set (even)";
        test_complex_to_all(0, 1, (n + 1) / 2, psync);
        test_alltoalls(0, 1, (n + 1) / 2, psync);
    }
    shmem_barrier_all();

    shmem_ctx_t c;
    CHECK(shmem_ctx_create(SHMEM_CTX_SERIALIZED, &c) == 0, "ctx_create");
    test_generic_rma(SHMEM_CTX_DEFAULT);
    test_generic_rma(c);
    shmem_ctx_destroy(c);
    test_team_ctx(even);
    test_generic_p2p();

    shmem_clear_cache_inv();
    shmem_set_cache_inv();
    shmem_clear_cache_line_inv(src);
    shmem_set_cache_line_inv(src);
    shmem_udcflush();
    shmem_udcflush_line(src);

    if (even != SHMEM_TEAM_INVALID)
        shmem_team_destroy(even);
    shmem_barrier_all();
    shmem_free(wf);
    shmem_free(wd);
    shmem_free(psync);
    shmem_free(dst);
    shmem_free(src);
    if (me == 0)
        printf("api15: ok on %d PEs\n", n);
    shmem_finalize();
    return 0;
}
