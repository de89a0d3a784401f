/* Collectives, byte-exact, on several teams (WORLD, SHARED, the even PEs, the rows of a 2-D
 * split): broadcast from every root, collect with a different count per PE, fcollect,
 * alltoall and strided alltoalls for every RMA type and the mem forms; reductions
 * (and/or/xor/max/min/sum/prod) for a spread of types, in place too; and the deprecated
 * active-set forms with pSync/pWrk. Bytes a collective must not write are checked to be
 * untouched. */
#include <shmem.h>
#include <string.h>

#include "check.h"

#define M 7
#define BUF 65536
#define SENT 0x5a

static unsigned char *src, *dst; /* symmetric scratch for every test */
static unsigned char expect[BUF];
static const char *team_name;

static void check_bytes(size_t n, size_t guard, const char *what)
{
    for (size_t i = 0; i < n; i++)
        CHECK(dst[i] == expect[i], "%s on %s: byte %zu is %#x, expected %#x", what, team_name, i,
              dst[i], expect[i]);
    for (size_t i = n; i < n + guard; i++)
        CHECK(dst[i] == SENT, "%s on %s: byte %zu past the result was written", what, team_name, i);
}

#define V(i, k) ((i) * 37 + (k) * 3 + 1)
#define V2(i, j, k) ((i) * 50 + (j) * 7 + (k) + 1)

#define TEST_COLL(T, NAME)                                                                     \
    do {                                                                                       \
        T *s = (T *)src, *d = (T *)dst, *e = (T *)expect;                                      \
        for (int root = 0; root < tn; root++) {                                                \
            memset(dst, SENT, BUF);                                                            \
            memset(expect, SENT, BUF);                                                         \
            for (int k = 0; k < M; k++)                                                        \
                s[k] = (T)V(ti + root, k), e[k] = (T)V(2 * root, k);                           \
            CHECK(shmem_##NAME##_broadcast(t, d, s, M, root) == 0, "broadcast rc");            \
            check_bytes(M * sizeof(T), 64, #NAME "_broadcast");                               \
        }                                                                                      \
        memset(dst, SENT, BUF);                                                                \
        memset(expect, SENT, BUF);                                                             \
        size_t off = 0;                                                                        \
        for (int j = 0; j < tn; j++)                                                           \
            for (int k = 0; k <= j; k++)                                                       \
                e[off++] = (T)V(j, k);                                                         \
        for (int k = 0; k <= ti; k++)                                                          \
            s[k] = (T)V(ti, k);                                                                \
        CHECK(shmem_##NAME##_collect(t, d, s, (size_t)ti + 1) == 0, "collect rc");             \
        check_bytes(off * sizeof(T), 64, #NAME "_collect");                                    \
        memset(dst, SENT, BUF);                                                                \
        for (int k = 0; k < M; k++)                                                            \
            s[k] = (T)V(ti, k);                                                                \
        for (int j = 0; j < tn; j++)                                                           \
            for (int k = 0; k < M; k++)                                                        \
                e[j * M + k] = (T)V(j, k);                                                     \
        CHECK(shmem_##NAME##_fcollect(t, d, s, M) == 0, "fcollect rc");                        \
        check_bytes((size_t)tn * M * sizeof(T), 64, #NAME "_fcollect");                        \
        memset(dst, SENT, BUF);                                                                \
        for (int j = 0; j < tn; j++)                                                           \
            for (int k = 0; k < M; k++)                                                        \
                s[j * M + k] = (T)V2(ti, j, k), e[j * M + k] = (T)V2(j, ti, k);                \
        CHECK(shmem_##NAME##_alltoall(t, d, s, M) == 0, "alltoall rc");                        \
        check_bytes((size_t)tn * M * sizeof(T), 64, #NAME "_alltoall");                        \
        memset(dst, SENT, BUF);                                                                \
        memset(expect, SENT, BUF);                                                             \
        for (int j = 0; j < tn; j++)                                                           \
            for (int k = 0; k < M; k++)                                                        \
                s[(j * M + k) * 3] = (T)V2(ti, j, k), e[(j * M + k) * 2] = (T)V2(j, ti, k);    \
        CHECK(shmem_##NAME##_alltoalls(t, d, s, 2, 3, M) == 0, "alltoalls rc");                \
        check_bytes(((size_t)tn * M * 2 - 1) * sizeof(T), 64, #NAME "_alltoalls");             \
    } while (0)

static void test_mem(shmem_team_t t, int ti, int tn)
{
    for (int root = 0; root < tn; root++) {
        memset(dst, SENT, BUF);
        memset(expect, SENT, BUF);
        for (int k = 0; k < 13; k++)
            src[k] = (unsigned char)V(ti + root, k), expect[k] = (unsigned char)V(2 * root, k);
        CHECK(shmem_broadcastmem(t, dst, src, 13, root) == 0, "broadcastmem rc");
        check_bytes(13, 64, "broadcastmem");
    }
    memset(dst, SENT, BUF);
    size_t off = 0;
    for (int j = 0; j < tn; j++)
        for (int k = 0; k < 2 * j + 1; k++)
            expect[off++] = (unsigned char)V(j, k);
    for (int k = 0; k < 2 * ti + 1; k++)
        src[k] = (unsigned char)V(ti, k);
    CHECK(shmem_collectmem(t, dst, src, 2 * (size_t)ti + 1) == 0, "collectmem rc");
    check_bytes(off, 64, "collectmem");
    memset(dst, SENT, BUF);
    for (int j = 0; j < tn; j++)
        for (int k = 0; k < 5; k++)
            expect[j * 5 + k] = (unsigned char)V(j, k);
    for (int k = 0; k < 5; k++)
        src[k] = (unsigned char)V(ti, k);
    CHECK(shmem_fcollectmem(t, dst, src, 5) == 0, "fcollectmem rc");
    check_bytes((size_t)tn * 5, 64, "fcollectmem");
    memset(dst, SENT, BUF);
    for (int j = 0; j < tn; j++)
        for (int k = 0; k < 5; k++)
            src[j * 5 + k] = (unsigned char)V2(ti, j, k), expect[j * 5 + k] = (unsigned char)V2(j, ti, k);
    CHECK(shmem_alltoallmem(t, dst, src, 5) == 0, "alltoallmem rc");
    check_bytes((size_t)tn * 5, 64, "alltoallmem");
    memset(dst, SENT, BUF);
    memset(expect, SENT, BUF);
    for (int j = 0; j < tn; j++)
        for (int k = 0; k < 5; k++)
            src[(j * 5 + k) * 2] = (unsigned char)V2(ti, j, k),
                         expect[(j * 5 + k) * 4] = (unsigned char)V2(j, ti, k);
    CHECK(shmem_alltoallsmem(t, dst, src, 4, 2, 5) == 0, "alltoallsmem rc");
    check_bytes(((size_t)tn * 5 - 1) * 4 + 1, 64, "alltoallsmem");
}

/* Reductions: the expected value folds every member's contribution in team order. */
#define R(i, k) (((i) + (k)) % 5 + 1 + (k) % 3)
#define B(i, k) (0x0123456789abcdefULL >> ((((i) + (k)) % 8) * 4) ^ (unsigned long long)((i) * 131 + (k)))
#define TEST_RED(T, NAME, OP, GEN, FOLD)                                                       \
    do {                                                                                       \
        T *s = (T *)src, *d = (T *)dst, *e = (T *)expect;                                      \
        memset(dst, SENT, BUF);                                                                \
        memset(expect, SENT, BUF);                                                             \
        for (int k = 0; k < M; k++) {                                                          \
            s[k] = (T)GEN(ti, k);                                                              \
            T acc = (T)GEN(0, k);                                                              \
            for (int j = 1; j < tn; j++) {                                                     \
                T a = acc, b = (T)GEN(j, k);                                                   \
                acc = (T)(FOLD);                                                               \
            }                                                                                  \
            e[k] = acc;                                                                        \
        }                                                                                      \
        CHECK(shmem_##NAME##_##OP##_reduce(t, d, s, M) == 0, #NAME "_" #OP "_reduce rc");      \
        check_bytes(M * sizeof(T), 64, #NAME "_" #OP "_reduce");                               \
    } while (0)
#define TEST_ARITH(T, NAME)                                                                    \
    do {                                                                                       \
        TEST_RED(T, NAME, sum, R, a + b);                                                      \
        TEST_RED(T, NAME, prod, R, a * b);                                                     \
        TEST_RED(T, NAME, max, R, a > b ? a : b);                                              \
        TEST_RED(T, NAME, min, R, a < b ? a : b);                                              \
    } while (0)
#define TEST_BIT(T, NAME)                                                                      \
    do {                                                                                       \
        TEST_RED(T, NAME, and, B, a & b);                                                      \
        TEST_RED(T, NAME, or, B, a | b);                                                       \
        TEST_RED(T, NAME, xor, B, a ^ b);                                                      \
    } while (0)

static void test_team(shmem_team_t t, const char *name)
{
    if (t == SHMEM_TEAM_INVALID)
        return;
    team_name = name;
    int ti = shmem_team_my_pe(t), tn = shmem_team_n_pes(t);
    TEST_COLL(float, float);
    TEST_COLL(double, double);
    TEST_COLL(char, char);
    TEST_COLL(short, short);
    TEST_COLL(int, int);
    TEST_COLL(long, long);
    TEST_COLL(long long, longlong);
    TEST_COLL(unsigned char, uchar); /* types added with the 1.5 RMA table */
    TEST_COLL(uint64_t, uint64);
    TEST_COLL(ptrdiff_t, ptrdiff);
    test_mem(t, ti, tn);
    TEST_ARITH(int, int);
    TEST_ARITH(long, long);
    TEST_ARITH(long long, longlong);
    TEST_ARITH(float, float);
    TEST_ARITH(double, double);
    TEST_ARITH(short, short);
    TEST_ARITH(unsigned int, uint);
    TEST_ARITH(uint64_t, uint64);
    TEST_ARITH(size_t, size);
    TEST_BIT(unsigned char, uchar);
    TEST_BIT(unsigned int, uint);
    TEST_BIT(unsigned long, ulong);
    TEST_BIT(unsigned long long, ulonglong);
    TEST_BIT(int32_t, int32);
    TEST_BIT(int64_t, int64);
    TEST_BIT(uint16_t, uint16);

    /* In place: dest == source. */
    int *s = (int *)src;
    for (int k = 0; k < M; k++)
        s[k] = ti + k;
    CHECK(shmem_int_sum_reduce(t, s, s, M) == 0, "in-place rc");
    for (int k = 0; k < M; k++)
        CHECK(s[k] == tn * (tn - 1) / 2 + tn * k, "in-place sum on %s: %d", name, s[k]);
    shmem_team_sync(t);
}

/* Deprecated active-set forms on (start, logstride, size); this PE is member ti of tn. */
static void test_aset(int start, int logs, int size, int ti, long *psync, void *pwrk)
{
    int tn = size;
    team_name = "active set";
    for (int root = 0; root < tn; root++) {
        memset(dst, SENT, BUF);
        memset(expect, SENT, BUF);
        int32_t *s = (int32_t *)src, *e = (int32_t *)expect;
        for (int k = 0; k < M; k++)
            s[k] = V(ti + root, k), e[k] = ti == root ? (int32_t)0x5a5a5a5a : V(2 * root, k);
        shmem_broadcast32(dst, src, M, root, start, logs, size, psync);
        check_bytes(M * 4, 64, "broadcast32 (root's dest unchanged)");
        int64_t *s64 = (int64_t *)src, *e64 = (int64_t *)expect;
        for (int k = 0; k < M; k++)
            s64[k] = V(ti + root, k) * 1000003LL, e64[k] = ti == root ? 0x5a5a5a5a5a5a5a5aLL
                                                                    : V(2 * root, k) * 1000003LL;
        shmem_broadcast64(dst, src, M, root, start, logs, size, psync);
        check_bytes(M * 8, 64, "broadcast64");
    }
    memset(dst, SENT, BUF);
    int64_t *s64 = (int64_t *)src, *e64 = (int64_t *)expect;
    size_t off = 0;
    for (int j = 0; j < tn; j++)
        for (int k = 0; k <= j; k++)
            e64[off++] = V(j, k) * 99991LL;
    for (int k = 0; k <= ti; k++)
        s64[k] = V(ti, k) * 99991LL;
    shmem_collect64(dst, src, (size_t)ti + 1, start, logs, size, psync);
    check_bytes(off * 8, 64, "collect64");
    memset(dst, SENT, BUF);
    int32_t *s = (int32_t *)src, *e = (int32_t *)expect;
    off = 0;
    for (int j = 0; j < tn; j++)
        for (int k = 0; k <= j; k++)
            e[off++] = V(j, k);
    for (int k = 0; k <= ti; k++)
        s[k] = V(ti, k);
    shmem_collect32(dst, src, (size_t)ti + 1, start, logs, size, psync);
    check_bytes(off * 4, 64, "collect32");
    memset(dst, SENT, BUF);
    for (int k = 0; k < M; k++)
        s[k] = V(ti, k);
    for (int j = 0; j < tn; j++)
        for (int k = 0; k < M; k++)
            e[j * M + k] = V(j, k);
    shmem_fcollect32(dst, src, M, start, logs, size, psync);
    check_bytes((size_t)tn * M * 4, 64, "fcollect32");
    memset(dst, SENT, BUF);
    for (int k = 0; k < M; k++)
        s64[k] = V(ti, k) * 7LL;
    for (int j = 0; j < tn; j++)
        for (int k = 0; k < M; k++)
            e64[j * M + k] = V(j, k) * 7LL;
    shmem_fcollect64(dst, src, M, start, logs, size, psync);
    check_bytes((size_t)tn * M * 8, 64, "fcollect64");
    memset(dst, SENT, BUF);
    for (int j = 0; j < tn; j++)
        for (int k = 0; k < M; k++)
            s[j * M + k] = V2(ti, j, k), e[j * M + k] = V2(j, ti, k);
    shmem_alltoall32(dst, src, M, start, logs, size, psync);
    check_bytes((size_t)tn * M * 4, 64, "alltoall32");
    memset(dst, SENT, BUF);
    for (int j = 0; j < tn; j++)
        for (int k = 0; k < M; k++)
            s64[j * M + k] = V2(ti, j, k) * 3LL, e64[j * M + k] = V2(j, ti, k) * 3LL;
    shmem_alltoall64(dst, src, M, start, logs, size, psync);
    check_bytes((size_t)tn * M * 8, 64, "alltoall64");

    /* *_to_all */
    int *si = (int *)src, *di = (int *)dst;
    long *sl = (long *)src, *dl = (long *)dst;
    double *sd = (double *)src, *dd = (double *)dst;
    for (int k = 0; k < M; k++)
        si[k] = R(ti, k);
    shmem_int_sum_to_all(di, si, M, start, logs, size, pwrk, psync);
    for (int k = 0; k < M; k++) {
        int x = 0;
        for (int j = 0; j < tn; j++)
            x += R(j, k);
        CHECK(di[k] == x, "int_sum_to_all: %d, expected %d", di[k], x);
    }
    shmem_int_xor_to_all(di, si, M, start, logs, size, pwrk, psync);
    for (int k = 0; k < M; k++) {
        int x = 0;
        for (int j = 0; j < tn; j++)
            x ^= R(j, k);
        CHECK(di[k] == x, "int_xor_to_all: %d, expected %d", di[k], x);
    }
    for (int k = 0; k < M; k++)
        sl[k] = (long)R(ti, k) * (ti % 2 ? -1 : 1);
    shmem_long_max_to_all(dl, sl, M, start, logs, size, pwrk, psync);
    for (int k = 0; k < M; k++) {
        long x = sl[k];
        for (int j = 0; j < tn; j++)
            x = (long)R(j, k) * (j % 2 ? -1 : 1) > x ? (long)R(j, k) * (j % 2 ? -1 : 1) : x;
        CHECK(dl[k] == x, "long_max_to_all: %ld, expected %ld", dl[k], x);
    }
    for (int k = 0; k < M; k++)
        sd[k] = R(ti, k) * 0.5;
    shmem_double_sum_to_all(dd, sd, M, start, logs, size, pwrk, psync);
    for (int k = 0; k < M; k++) {
        double x = R(0, k) * 0.5;
        for (int j = 1; j < tn; j++)
            x += R(j, k) * 0.5;
        CHECK(memcmp(&dd[k], &x, sizeof x) == 0, "double_sum_to_all: %g, expected %g", dd[k], x);
    }
    shmem_double_prod_to_all(dd, sd, M, start, logs, size, pwrk, psync);
    for (int k = 0; k < M; k++) {
        double x = R(0, k) * 0.5;
        for (int j = 1; j < tn; j++)
            x *= R(j, k) * 0.5;
        CHECK(memcmp(&dd[k], &x, sizeof x) == 0, "double_prod_to_all: %g, expected %g", dd[k], x);
    }
    shmem_barrier(start, logs, size, psync);
}

int main(void)
{
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();
    src = shmem_malloc(BUF);
    dst = shmem_malloc(BUF);
    long *psync = shmem_malloc(SHMEM_REDUCE_SYNC_SIZE * sizeof(long));
    double *pwrk = shmem_malloc(SHMEM_REDUCE_MIN_WRKDATA_SIZE * sizeof(double) * 64);
    for (int i = 0; i < SHMEM_REDUCE_SYNC_SIZE; i++)
        psync[i] = SHMEM_SYNC_VALUE;
    shmem_barrier_all();

    test_team(SHMEM_TEAM_WORLD, "world");
    shmem_barrier_all();
    test_team(SHMEM_TEAM_SHARED, "shared");
    shmem_barrier_all();

    shmem_team_t even, odd, xt, yt;
    shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, (n + 1) / 2, NULL, 0, &even);
    shmem_team_split_strided(SHMEM_TEAM_WORLD, 1, 2, n / 2 ? n / 2 : 1, NULL, 0, &odd);
    /* The even and odd teams run their collectives at the same time. */
    test_team(me % 2 ? odd : even, me % 2 ? "odd" : "even");
    shmem_barrier_all();
    shmem_team_split_2d(SHMEM_TEAM_WORLD, 2, NULL, 0, &xt, NULL, 0, &yt);
    test_team(xt, "2d x");
    test_team(yt, "2d y");
    shmem_barrier_all();

    test_aset(0, 0, n, me, psync, pwrk);
    shmem_barrier_all();
    if (me % 2 == 0)
        test_aset(0, 1, (n + 1) / 2, me / 2, psync, pwrk);
    shmem_barrier_all();
    for (int i = 0; i < SHMEM_REDUCE_SYNC_SIZE; i++)
        CHECK(psync[i] == SHMEM_SYNC_VALUE, "pSync[%d] not restored", i);

    shmem_team_destroy(even);
    shmem_team_destroy(odd);
    shmem_team_destroy(xt);
    shmem_team_destroy(yt);
    shmem_free(pwrk);
    shmem_free(psync);
    shmem_free(dst);
    shmem_free(src);
    if (me == 0)
        printf("coll: ok at %d PEs\n", n);
    shmem_finalize();
    return 0;
}
