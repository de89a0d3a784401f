/* put/get/p/g byte-exact, for every type and the mem forms, to the right neighbour. */
#include <shmem.h>
#include <string.h>

#include "check.h"

#define N 1000

#define TEST_TYPE(T, NAME)                                                                     \
    do {                                                                                       \
        T *dst = shmem_malloc(N * sizeof(T));                                                  \
        T src[N];                                                                              \
        for (int i = 0; i < N; i++)                                                            \
            src[i] = (T)(me * 1000 + i % 100);                                                 \
        shmem_##NAME##_put(dst, src, N, right);                                                \
        shmem_##NAME##_p(&dst[N - 1], (T)(me + 7), right);                                     \
        shmem_barrier_all();                                                                   \
        for (int i = 0; i < N - 1; i++)                                                        \
            CHECK(dst[i] == (T)(left * 1000 + i % 100), #NAME " put: element %d wrong", i);    \
        CHECK(dst[N - 1] == (T)(left + 7), #NAME " p wrong");                                  \
        T back[N];                                                                             \
        shmem_##NAME##_get(back, dst, N, right);                                               \
        CHECK(memcmp(back, src, (N - 1) * sizeof(T)) == 0, #NAME " get wrong");                \
        CHECK(shmem_##NAME##_g(&dst[N - 1], right) == (T)(me + 7), #NAME " g wrong");          \
        shmem_##NAME##_get_nbi(back, dst, N, right);                                           \
        shmem_quiet();                                                                         \
        CHECK(memcmp(back, src, (N - 1) * sizeof(T)) == 0, #NAME " get_nbi wrong");            \
        shmem_free(dst);                                                                       \
    } while (0)

int main(void)
{
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();
    int right = (me + 1) % n, left = (me + n - 1) % n;

    TEST_TYPE(char, char);
    TEST_TYPE(short, short);
    TEST_TYPE(int, int);
    TEST_TYPE(long, long);
    TEST_TYPE(long long, longlong);
    TEST_TYPE(float, float);
    TEST_TYPE(double, double);

    /* putmem of odd sizes at odd offsets: byte-exact, nothing around it touched. */
    enum { SZ = 1 << 20 };
    unsigned char *buf = shmem_calloc(SZ, 1);
    unsigned char *src = malloc(SZ);
    for (int i = 0; i < SZ; i++)
        src[i] = (unsigned char)(i * 31 + me * 7 + 1);
    shmem_putmem_nbi(buf + 3, src, SZ - 10, right);
    shmem_quiet();
    shmem_barrier_all();
    CHECK(buf[0] == 0 && buf[1] == 0 && buf[2] == 0, "bytes before the put touched");
    for (int i = SZ - 7; i < SZ; i++)
        CHECK(buf[i] == 0, "byte %d after the put touched", i);
    for (int i = 0; i < SZ - 10; i++)
        CHECK(buf[3 + i] == (unsigned char)(i * 31 + left * 7 + 1), "putmem byte %d wrong", i);
    unsigned char *got = malloc(SZ);
    shmem_getmem(got, buf + 3, SZ - 10, right);
    CHECK(memcmp(got, src, SZ - 10) == 0, "getmem wrong");

    /* C11 generic forms. */
    long *gl = shmem_malloc(sizeof(long));
    shmem_p(gl, (long)(me * 3), right);
    shmem_barrier_all();
    CHECK(*gl == left * 3, "generic p");
    CHECK(shmem_g(gl, right) == me * 3, "generic g");

    /* shmem_ptr: the heap of a PE this one maps (same host or one NTB link away) is directly
     * addressable; one reached through the ring's relays has no address (NULL). */
    long *rp = shmem_ptr(gl, right);
    CHECK(rp == NULL || *rp == me * 3, "shmem_ptr");
    CHECK(shmem_ptr(gl, me) == gl, "shmem_ptr to ourselves");
    CHECK(shmem_addr_accessible(gl, right), "addr_accessible");
    shmem_free(gl);
    shmem_free(buf);
    free(src);
    free(got);
    shmem_finalize();
    return 0;
}
