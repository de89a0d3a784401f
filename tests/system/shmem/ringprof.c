/*
 * Routed puts for SHMEM_PROFILE (tests/system/test_shmem_profile.sh): PE 0 puts each size of
 * SIZES (below SHMEM_DMA_MIN, above it, and more than one chunk) ROUNDS times to the farthest
 * PE, each put followed by shmem_quiet, and a get and a fetch-add between (replies, which are
 * not timed, must still arrive); the target checks every byte of the last put of each size.
 * PE 0 prints the routed put count and bytes on stdout ("puts N bytes B"), from which the test
 * works out how many chunks the profile must have counted.
 */
#include <shmem.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

#define ROUNDS 20
static const size_t sizes[] = { 1024, 48 << 10, 600 << 10 };
#define NSIZES (sizeof sizes / sizeof sizes[0])
#define MAXLEN (600u << 10)

static unsigned char pattern(size_t si, int round, size_t i)
{
    return (unsigned char)(i * 7u + si * 31u + (size_t)round * 3u);
}

int main(void)
{
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes(), far = n / 2;
    unsigned char *dst = shmem_malloc(MAXLEN), *src = shmem_malloc(MAXLEN);
    long *counter = shmem_calloc(1, sizeof *counter);
    CHECK(dst && src && counter, "symmetric buffers");
    unsigned long long puts = 0, bytes = 0;
    for (size_t si = 0; si < NSIZES; si++) {
        if (me == 0) {
            for (int r = 0; r < ROUNDS; r++) {
                for (size_t i = 0; i < sizes[si]; i++)
                    src[i] = pattern(si, r, i);
                shmem_putmem(dst, src, sizes[si], far);
                shmem_quiet();
                puts++;
                bytes += sizes[si];
                if (r % 5 == 0) {
                    long got;
                    shmem_getmem(&got, counter, sizeof got, far);
                    CHECK(shmem_long_atomic_fetch_add(counter, 1, far) == got,
                          "fetch-add after a get of %ld", got);
                }
            }
        }
        shmem_barrier_all();
        if (me == far)
            for (size_t i = 0; i < sizes[si]; i++)
                CHECK(dst[i] == pattern(si, ROUNDS - 1, i), "byte %zu of the %zu-byte put", i, sizes[si]);
        shmem_barrier_all();
    }
    if (me == 0)
        printf("puts %llu bytes %llu\n", puts, bytes);
    shmem_free(counter);
    shmem_free(src);
    shmem_free(dst);
    shmem_finalize();
    return 0;
}
