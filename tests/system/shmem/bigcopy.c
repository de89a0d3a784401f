/* Large puts and gets, as the library splits them between the calling thread and its copy
 * helper (src/shmem/copy.c; with fewer PEs than CPUs): odd sizes and odd offsets, from the
 * symmetric heap and from private memory, and two puts in a row to the same bytes, where the
 * second must win (no piece of the first may land after the call returned). Every byte is
 * checked. */
#include <shmem.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static unsigned char pattern(int round, int pe, size_t i)
{
    return (unsigned char)((i * 131u) ^ (size_t)(round * 29 + pe * 7) ^ (i >> 12));
}

/* The largest block: 6 MiB, or a quarter of a smaller heap (SHMEM_SYMMETRIC_SIZE, as the
 * placements with several PEs per host give), so that both blocks fit. */
static size_t block_size(void)
{
    const char *e = getenv("SHMEM_SYMMETRIC_SIZE");
    char *end;
    double v = e ? strtod(e, &end) : 0;
    if (e && v > 0) {
        size_t heap = (size_t)(v * (*end == 'k' || *end == 'K'   ? 1024.0
                                    : *end == 'm' || *end == 'M' ? 1048576.0
                                    : *end == 'g' || *end == 'G' ? 1073741824.0
                                                                 : 1.0));
        if (heap / 4 < (6u << 20))
            return heap / 4;
    }
    return 6u << 20;
}

int main(void)
{
    static const size_t sizes[] = { 256u << 10, (256u << 10) + 13, (1u << 20) + 4097,
                                    (3u << 20) + 1, (5u << 20) - 3 };
    const size_t max = block_size();
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes(), right = (me + 1) % n, left = (me + n - 1) % n;
    unsigned char *sym = shmem_malloc(max), *dst = shmem_malloc(max);
    unsigned char *priv = malloc(max), *got = malloc(max);
    CHECK(sym && dst && priv && got, "two blocks of %zu bytes", max);
    for (int round = 0; round < 10; round++) {
        size_t soff = (size_t)round % 7, doff = (size_t)(round * 3) % 11;
        size_t len = sizes[round % 5] < max - 16 ? sizes[round % 5] : max - 16 - (size_t)round;
        unsigned char *from = round & 1 ? priv : sym;
        for (size_t i = 0; i < len; i++)
            from[soff + i] = pattern(round + 100, me, i); /* overwritten below: must not land */
        shmem_putmem(dst + doff, from + soff, len, right);
        for (size_t i = 0; i < len; i++)
            from[soff + i] = pattern(round, me, i);
        shmem_putmem(dst + doff, from + soff, len, right);
        shmem_barrier_all();
        for (size_t i = 0; i < len; i++)
            CHECK(dst[doff + i] == pattern(round, left, i), "round %d, %zu bytes: byte %zu", round,
                  len, i);
        /* What we sent, read back from the right neighbour. */
        shmem_getmem(got, dst + doff, len, right);
        for (size_t i = 0; i < len; i++)
            CHECK(got[i] == pattern(round, me, i),
                  "getmem, round %d, %zu bytes: byte %zu", round, len, i);
        shmem_barrier_all();
    }
    free(got);
    free(priv);
    shmem_free(dst);
    shmem_free(sym);
    if (me == 0)
        printf("bigcopy: ok at %d PEs\n", n);
    shmem_finalize();
    return 0;
}
