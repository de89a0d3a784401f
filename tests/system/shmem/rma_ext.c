/* Every 1.5 RMA type: put/get/p/g/iput/iget/put_nbi/get_nbi byte-exact to the right
 * neighbour; the sized forms put8..put128, get8..get128, iputN, igetN and nbi forms. */
#include <shmem.h>
#include <string.h>

#include "check.h"

#define N 64

#define TEST_TYPE(T, NAME)                                                                     \
    do {                                                                                       \
        T *dst = shmem_calloc(2 * N, sizeof(T));                                               \
        T src[2 * N], back[2 * N];                                                             \
        for (int i = 0; i < 2 * N; i++)                                                        \
            src[i] = (T)(me * 50 + i % 50 + 1);                                                \
        shmem_##NAME##_put_nbi(dst, src, N, right);                                            \
        shmem_##NAME##_p(&dst[N], (T)(me + 3), right);                                         \
        shmem_quiet();                                                                         \
        shmem_barrier_all();                                                                   \
        for (int i = 0; i < N; i++)                                                            \
            CHECK(dst[i] == (T)(left * 50 + i % 50 + 1), #NAME " put: element %d", i);         \
        CHECK(dst[N] == (T)(left + 3), #NAME " p");                                            \
        CHECK(dst[N + 1] == (T)0, #NAME " element past the put touched");                      \
        shmem_##NAME##_get(back, dst, N, right);                                               \
        CHECK(memcmp(back, src, N * sizeof(T)) == 0, #NAME " get");                            \
        shmem_##NAME##_get_nbi(back, dst, N, right);                                           \
        shmem_quiet();                                                                         \
        CHECK(memcmp(back, src, N * sizeof(T)) == 0, #NAME " get_nbi");                        \
        CHECK(shmem_##NAME##_g(&dst[N], right) == (T)(me + 3), #NAME " g");                    \
        shmem_barrier_all();                                                                   \
        /* iput: src[0], src[3], ... to dst[N], dst[N+2], ... (N/4 elements) */                \
        shmem_##NAME##_iput(&dst[N], src, 2, 3, N / 4, right);                                 \
        shmem_barrier_all();                                                                   \
        for (int k = 0; k < N / 4; k++) {                                                      \
            CHECK(dst[N + 2 * k] == (T)(left * 50 + (3 * k) % 50 + 1), #NAME " iput %d", k);   \
            CHECK(dst[N + 2 * k + 1] == (T)0, #NAME " iput gap %d touched", k);                \
        }                                                                                      \
        CHECK(dst[N] == (T)(left * 50 + 1), #NAME " iput first");                              \
        memset(back, 0, sizeof back);                                                          \
        shmem_##NAME##_iget(back, &dst[N], 3, 2, N / 4, right);                                \
        for (int i = 0; i < N / 4; i++)                                                        \
            CHECK(back[3 * i] == src[3 * i], #NAME " iget element %d", i);                     \
        CHECK(back[1] == (T)0 && back[2] == (T)0, #NAME " iget gap touched");                  \
        shmem_barrier_all();                                                                   \
        shmem_free(dst);                                                                       \
    } while (0)

static int me, n, right, left;

static void sized(size_t bytes, void (*put)(void *, const void *, size_t, int),
                  void (*get)(void *, const void *, size_t, int),
                  void (*iput)(void *, const void *, ptrdiff_t, ptrdiff_t, size_t, int),
                  void (*iget)(void *, const void *, ptrdiff_t, ptrdiff_t, size_t, int))
{
    enum { E = 40 };
    unsigned char *dst = shmem_calloc(4 * E, bytes);
    unsigned char src[4 * E * 16], exp[4 * E * 16], back[4 * E * 16];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (unsigned char)(i * 7 + me * 13 + bytes);
    put(dst, src, E, right);
    shmem_barrier_all();
    for (size_t i = 0; i < E * bytes; i++)
        CHECK(dst[i] == (unsigned char)(i * 7 + left * 13 + bytes), "put%zu byte %zu",
              bytes * 8, i);
    CHECK(dst[E * bytes] == 0, "put%zu wrote past the end", bytes * 8);
    get(back, dst, E, right);
    CHECK(memcmp(back, src, E * bytes) == 0, "get%zu", bytes * 8);
    shmem_barrier_all();
    /* iput: element i of src (stride 2) to element 3i of dst[E*bytes...] */
    iput(dst + E * bytes, src, 3, 2, E / 4, right);
    shmem_barrier_all();
    memset(exp, 0, sizeof exp);
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (unsigned char)(i * 7 + left * 13 + bytes); /* what left sent */
    for (size_t i = 0; i < E / 4; i++)
        memcpy(exp + 3 * i * bytes, src + 2 * i * bytes, bytes);
    CHECK(memcmp(dst + E * bytes, exp, 3 * E * bytes) == 0, "iput%zu", bytes * 8);
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (unsigned char)(i * 7 + me * 13 + bytes);
    memset(back, 0, sizeof back);
    iget(back, dst + E * bytes, 1, 3, E / 4, right); /* right holds what we iput */
    memset(exp, 0, sizeof exp);
    for (size_t i = 0; i < E / 4; i++)
        memcpy(exp + i * bytes, src + 2 * i * bytes, bytes);
    CHECK(memcmp(back, exp, E * bytes) == 0, "iget%zu", bytes * 8);
    shmem_barrier_all();
    shmem_free(dst);
}

int main(void)
{
    shmem_init();
    me = shmem_my_pe(), n = shmem_n_pes();
    right = (me + 1) % n, left = (me + n - 1) % n;
#define X(T, NAME) TEST_TYPE(T, NAME);
    SHMEM_RMA_TYPE_TABLE(X)
#undef X
    sized(1, shmem_put8, shmem_get8, shmem_iput8, shmem_iget8);
    sized(2, shmem_put16, shmem_get16, shmem_iput16, shmem_iget16);
    sized(4, shmem_put32, shmem_get32, shmem_iput32, shmem_iget32);
    sized(8, shmem_put64, shmem_get64, shmem_iput64, shmem_iget64);
    sized(16, shmem_put128, shmem_get128, shmem_iput128, shmem_iget128);
    sized(4, shmem_put32_nbi, shmem_get32_nbi, shmem_iput32, shmem_iget32);
    sized(16, shmem_put128_nbi, shmem_get128_nbi, shmem_iput128, shmem_iget128);
    /* C11 generic forms on types beyond the first seven. */
    unsigned *gu = shmem_calloc(4, sizeof(unsigned));
    long double *gld = shmem_calloc(4, sizeof(long double));
    unsigned short *gus = shmem_calloc(1, sizeof(unsigned short));
    unsigned us[4] = { 1u + me, 2u, 3u, 4u };
    long double lds[2] = { 0.5L + me, 1.25L };
    shmem_put(gu, us, 4, right);
    shmem_iput(gld, lds, 2, 1, 2, right);
    shmem_p(gus, (unsigned short)(60000 + me), right);
    shmem_barrier_all();
    CHECK(gu[0] == 1u + left && gu[3] == 4u, "generic put unsigned");
    CHECK(gld[0] == 0.5L + left && gld[1] == 0 && gld[2] == 1.25L, "generic iput long double");
    shmem_wait_until(gus, SHMEM_CMP_EQ, (unsigned short)(60000 + left));
    CHECK(shmem_g(gus, right) == 60000 + me, "generic g unsigned short");
    shmem_finalize();
    return 0;
}
