/* The default heap at a placement where 64 MiB cannot be mapped (e.g. 2 PEs per host): still
 * room for what the test suites ask (two 16 MiB blocks, as tests-sos's bigput and mandelbrot
 * need), and a 16 MiB put to the next PE arrives whole. argv[1]: the MiB to allocate in each
 * of the two blocks (default 16). */
#include <shmem.h>
#include <stdint.h>
#include <string.h>

#include "check.h"

int main(int argc, char **argv)
{
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();
    size_t len = (size_t)(argc > 1 ? atoi(argv[1]) : 16) << 20;
    uint32_t *src = shmem_malloc(len), *dst = shmem_malloc(len);
    CHECK(src && dst, "two blocks of %zu MiB in the default heap", len >> 20);
    for (size_t i = 0; i < len / 4; i++)
        src[i] = (uint32_t)(i * 2654435761u) ^ (uint32_t)me;
    shmem_barrier_all();
    shmem_putmem(dst, src, len, (me + 1) % n);
    shmem_barrier_all();
    int left = (me + n - 1) % n;
    for (size_t i = 0; i < len / 4; i++)
        CHECK(dst[i] == ((uint32_t)(i * 2654435761u) ^ (uint32_t)left), "word %zu", i);
    shmem_free(dst);
    shmem_free(src);
    if (me == 0)
        printf("bigheap: ok at %d PEs\n", n);
    shmem_finalize();
    return 0;
}
