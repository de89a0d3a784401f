/* shmem_align: every power of two from 2 to 2^23 (8 MiB, what tests-sos asks of a 64 MiB heap;
 * a quarter of SHMEM_SYMMETRIC_SIZE if that is less) gives an address aligned to it on every PE, at the same offset everywhere (a put to the
 * right neighbour lands in its block), with malloc'd blocks in between so that the blocks do
 * not start at the heap's beginning. An alignment above the heap's is refused (NULL, on every
 * PE), and the heap is still usable afterwards. */
#include <shmem.h>
#include <stdint.h>
#include <string.h>

#include "check.h"

int main(void)
{
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes(), right = (me + 1) % n, left = (me + n - 1) % n;
    char *pad = shmem_malloc(100);
    /* Up to 8 MiB, or a quarter of a smaller heap that a placement is given. */
    size_t most = (size_t)1 << 23, given = 0;
    const char *hs = getenv("SHMEM_SYMMETRIC_SIZE");
    if (hs && sscanf(hs, "%zuM", &given) == 1 && (given << 20) / 4 < most)
        most = (given << 20) / 4;
    for (size_t a = 2; a <= most; a *= 2) {
        long *p = shmem_align(a, 1000 * sizeof(long));
        CHECK(p, "shmem_align(%zu) returned NULL", a);
        CHECK((uintptr_t)p % a == 0, "shmem_align(%zu) returned %p", a, (void *)p);
        char *small = shmem_malloc(a / 3 + 1); /* the next alignment starts past it */
        CHECK(small, "malloc after align(%zu)", a);
        long v[1000];
        for (int i = 0; i < 1000; i++)
            v[i] = (long)a * 1000 + me * 7 + i;
        shmem_long_put(p, v, 1000, right);
        shmem_barrier_all();
        for (int i = 0; i < 1000; i++)
            CHECK(p[i] == (long)a * 1000 + left * 7 + i, "align(%zu): p[%d] = %ld", a, i, p[i]);
        shmem_barrier_all();
        shmem_free(small);
        shmem_free(p);
    }
    /* More than the heap's alignment: refused everywhere, nothing allocated. */
    CHECK(shmem_align((size_t)1 << 40, 64) == NULL, "align(2^40) succeeded");
    long *q = shmem_align(4096, 64 * sizeof(long));
    CHECK(q && (uintptr_t)q % 4096 == 0, "align after a refusal");
    shmem_long_p(q, me, right);
    shmem_barrier_all();
    CHECK(*q == left, "after refusal: %ld", *q);
    shmem_free(q);
    shmem_free(pad);
    if (me == 0)
        printf("align: ok at %d PEs\n", n);
    shmem_finalize();
    return 0;
}
