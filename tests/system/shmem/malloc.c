/* The symmetric allocator gives the same offsets on every PE; sizes 0, align, realloc, calloc,
 * and a clean NULL (with a message) when the heap is exhausted. */
#include <shmem.h>
#include <stdint.h>
#include <string.h>

#include "check.h"

static long *offs; /* symmetric: PE 0 collects everyone's offsets */

static void same_everywhere(void *p, void *base, int slot)
{
    long off = (long)((char *)p - (char *)base);
    int me = shmem_my_pe(), n = shmem_n_pes();
    shmem_long_p(&offs[slot * n + me], off, 0);
    shmem_barrier_all();
    if (me == 0)
        for (int pe = 0; pe < n; pe++)
            CHECK(offs[slot * n + pe] == offs[slot * n], "slot %d: PE %d offset %ld, PE 0 %ld",
                  slot, pe, offs[slot * n + pe], offs[slot * n]);
}

int main(void)
{
    shmem_init();
    int n = shmem_n_pes();
    offs = shmem_calloc((size_t)n * 16, sizeof(long));
    CHECK(offs != NULL, "calloc");
    void *base = offs;
    CHECK(shmem_malloc(0) == NULL, "malloc(0) must be NULL");
    void *a = shmem_malloc(100);
    void *b = shmem_align(4096, 10);
    CHECK(((uintptr_t)b & 4095) == 0, "align 4096: %p", b);
    void *c = shmem_malloc(1 << 16);
    same_everywhere(a, base, 0);
    same_everywhere(b, base, 1);
    same_everywhere(c, base, 2);
    shmem_free(a);
    void *d = shmem_malloc(50); /* reuses a's hole */
    CHECK(d == a, "first fit should reuse the freed block");
    same_everywhere(d, base, 3);
    memset(c, 0x5a, 1 << 16);
    void *e = shmem_realloc(c, 1 << 20);
    CHECK(e != NULL, "realloc");
    CHECK(((unsigned char *)e)[(1 << 16) - 1] == 0x5a, "realloc lost the contents");
    same_everywhere(e, base, 4);
    int *z = shmem_calloc(1000, sizeof(int));
    for (int i = 0; i < 1000; i++)
        CHECK(z[i] == 0, "calloc not zeroed at %d", i);
    same_everywhere(z, base, 5);
    /* Too large: NULL on every PE (with a message saying how to enlarge the heap). */
    void *huge = shmem_malloc((size_t)1 << 40);
    CHECK(huge == NULL, "a 1 TiB allocation succeeded");
    shmalloc(0);
    void *f = shmalloc(8);
    same_everywhere(f, base, 6);
    shfree(f);
    shmem_free(z);
    shmem_free(e);
    shmem_free(d);
    shmem_free(b);
    shmem_free(offs);
    shmem_finalize();
    return 0;
}
