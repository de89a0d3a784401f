/* A stream of large puts, as the copy helper's choice sees it (src/shmem/copy.c: per size
 * class, a job now and then without the helper, and the helper tried again now and then when
 * the class goes without it): 200 puts of 1 MiB to the right neighbour, each with its own
 * pattern, into the same block; after every 50 the neighbour checks every byte of the last.
 * tests/system/test_shmem.sh also runs it with a helper that dawdles (SHMEM_COPY_HELPER=slow) and
 * SHMEM_DEBUG=1, where its correctness is checked and how many puts went alone reported. */
#include <shmem.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define LEN (1u << 20)
#define PUTS 200
#define CHECK_EVERY 50

static unsigned char pattern(int put, int pe, size_t i)
{
    return (unsigned char)((i * 151u) ^ (size_t)(put * 13 + pe * 5) ^ (i >> 10));
}

int main(void)
{
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes(), right = (me + 1) % n, left = (me + n - 1) % n;
    unsigned char *dst = shmem_malloc(LEN), *from = malloc(LEN);
    CHECK(dst && from, "a block of %u bytes", LEN);
    for (int put = 0; put < PUTS; put++) {
        for (size_t i = 0; i < LEN; i += 4096) /* a new pattern costs a little: one byte a page */
            from[i] = pattern(put, me, i);
        if (put == 0 || put % CHECK_EVERY == CHECK_EVERY - 1)
            for (size_t i = 0; i < LEN; i++)
                from[i] = pattern(put, me, i);
        shmem_putmem(dst, from, LEN, right);
        if (put % CHECK_EVERY == CHECK_EVERY - 1) {
            shmem_barrier_all();
            for (size_t i = 0; i < LEN; i++)
                CHECK(dst[i] == pattern(put, left, i), "put %d: byte %zu is 0x%02x, not 0x%02x",
                      put, i, dst[i], pattern(put, left, i));
            shmem_barrier_all();
        }
    }
    free(from);
    shmem_free(dst);
    if (me == 0)
        printf("putstream: ok at %d PEs\n", n);
    shmem_finalize();
    return 0;
}
