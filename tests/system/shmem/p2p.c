/* Point-to-point: wait_until/test on every 1.5 type, and the _all/_any/_some (+vector) forms
 * of wait_until and test, with status masks; repeated _any calls visit every satisfied
 * element; the left neighbour sets our flags. */
#include <shmem.h>

#include "check.h"

#define K 8

static int me, n, right, left;

#define P2P(T, NAME)                                                                           \
    do {                                                                                       \
        T *v = shmem_calloc(K, sizeof(T));                                                     \
        int status[K] = { 0 };                                                                 \
        size_t idx[K];                                                                         \
        T refs[K];                                                                             \
        CHECK(shmem_##NAME##_test(&v[0], SHMEM_CMP_EQ, (T)0), #NAME " test EQ");               \
        CHECK(!shmem_##NAME##_test(&v[0], SHMEM_CMP_GT, (T)0), #NAME " test GT");              \
        CHECK(shmem_##NAME##_test_any(v, K, NULL, SHMEM_CMP_NE, (T)0) == SIZE_MAX,             \
              #NAME " test_any none");                                                         \
        CHECK(shmem_##NAME##_test_some(v, K, idx, NULL, SHMEM_CMP_NE, (T)0) == 0,              \
              #NAME " test_some none");                                                        \
        CHECK(shmem_##NAME##_test_all(v, K, NULL, SHMEM_CMP_EQ, (T)0), #NAME " test_all");     \
        shmem_barrier_all();                                                                   \
        shmem_##NAME##_p(&v[3], (T)5, right);                                                  \
        shmem_##NAME##_wait_until(&v[3], SHMEM_CMP_EQ, (T)5);                                  \
        CHECK(shmem_##NAME##_wait_until_any(v, K, NULL, SHMEM_CMP_GE, (T)5) == 3,              \
              #NAME " wait_until_any");                                                        \
        CHECK(shmem_##NAME##_wait_until_some(v, K, idx, NULL, SHMEM_CMP_GT, (T)4) == 1 &&      \
                  idx[0] == 3,                                                                 \
              #NAME " wait_until_some");                                                       \
        status[3] = 1;                                                                         \
        CHECK(shmem_##NAME##_test_any(v, K, status, SHMEM_CMP_GE, (T)5) == SIZE_MAX,           \
              #NAME " test_any masks");                                                        \
        CHECK(shmem_##NAME##_test_all(v, K, status, SHMEM_CMP_LT, (T)5), #NAME " test_all mask"); \
        shmem_barrier_all();                                                                   \
        for (int i = 0; i < K; i++)                                                            \
            if (i != 3)                                                                        \
                shmem_##NAME##_p(&v[i], (T)(i + 1), right);                                    \
        for (int i = 0; i < K; i++)                                                            \
            refs[i] = (T)(i + 1);                                                              \
        refs[3] = (T)5;                                                                        \
        shmem_##NAME##_wait_until_all(v, K, status, SHMEM_CMP_GT, (T)0);                       \
        shmem_##NAME##_wait_until_all_vector(v, K, NULL, SHMEM_CMP_EQ, refs);                  \
        CHECK(shmem_##NAME##_test_all_vector(v, K, NULL, SHMEM_CMP_GE, refs), #NAME " tav");   \
        /* every element satisfies: _any returns each of them in turn, not the lowest one      \
         * every time (a loop over test_any with no status array must see them all) */         \
        int seen[K] = { 0 }, nseen = 0;                                                        \
        for (int i = 0; i < 2 * K; i++) {                                                      \
            size_t a = i % 2 ? shmem_##NAME##_wait_until_any_vector(v, K, NULL, SHMEM_CMP_EQ,  \
                                                                    refs)                      \
                             : shmem_##NAME##_test_any(v, K, NULL, SHMEM_CMP_GT, (T)0);        \
            CHECK(a < K && v[a] == refs[a], #NAME " _any returned %zu", a);                    \
            nseen += !seen[a];                                                                 \
            seen[a] = 1;                                                                       \
        }                                                                                      \
        CHECK(nseen == K, #NAME " _any returned %d of %d satisfied elements", nseen, K);       \
        CHECK(shmem_##NAME##_test_any_vector(v, K, NULL, SHMEM_CMP_NE, refs) == SIZE_MAX,      \
              #NAME " test_any_vector");                                                       \
        refs[2] = (T)3;                                                                        \
        refs[5] = (T)0;                                                                        \
        CHECK(shmem_##NAME##_test_some_vector(v, K, idx, NULL, SHMEM_CMP_LE, refs) == K - 1 && \
                  idx[5] == 6,                                                                 \
              #NAME " test_some_vector");                                                      \
        CHECK(shmem_##NAME##_wait_until_some_vector(v, K, idx, NULL, SHMEM_CMP_GT, refs) == 1 \
                  && idx[0] == 5,                                                              \
              #NAME " wait_until_some_vector");                                                \
        CHECK(shmem_##NAME##_test_some(v, K, idx, status, SHMEM_CMP_GE, (T)6) == 3 &&          \
                  idx[0] == 5 && idx[2] == 7,                                                  \
              #NAME " test_some");                                                             \
        shmem_barrier_all();                                                                   \
        shmem_free(v);                                                                         \
    } while (0)

int main(void)
{
    shmem_init();
    me = shmem_my_pe(), n = shmem_n_pes();
    right = (me + 1) % n, left = (me + n - 1) % n;
    (void)left;
#define X(T, NAME) P2P(T, NAME);
    SHMEM_P2P_TYPE_TABLE(X)
#undef X
    /* unsigned compare: a value above LLONG_MAX is greater, not negative */
    unsigned long long *u = shmem_calloc(1, sizeof *u);
    shmem_ulonglong_p(u, ~0ULL, right);
    shmem_ulonglong_wait_until(u, SHMEM_CMP_GT, 1ULL);
    CHECK(shmem_ulonglong_test(u, SHMEM_CMP_GT, 1ULL << 63), "unsigned compare");
    shmem_finalize();
    return 0;
}
