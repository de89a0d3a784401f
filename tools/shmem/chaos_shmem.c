/*
 * chaos_shmem: the OpenSHMEM job of `scripts/chaos.sh` (built there with oshcc, run with
 * oshrun). Every round each PE puts a block derived from (round, PE) into every other PE —
 * small ones as stores, a large one that is forwarded in chunks (by DMA) on a ring — adds to a
 * counter on PE 0 with an atomic, and the job sums the PEs' numbers with a reduction; after a
 * barrier every PE checks everything it received. A mismatch prints "WRONG:" and exits 1; a
 * job that ends cleanly has PE 0 print "ok: ...".
 *
 *   oshrun -np N chaos_shmem [ROUNDS]
 */
#include <shmem.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SMALL 64                 /* words */
#define LARGE (96 * 1024 / 8)    /* words: above the DMA threshold of forwarded puts */

static uint64_t word(int round, int from, int to, size_t i)
{
    uint64_t x = (uint64_t)round << 40 ^ (uint64_t)from << 24 ^ (uint64_t)to << 16 ^ i;
    x = (x ^ (x >> 31)) * 0x9e3779b97f4a7c15ull;
    return x ^ (x >> 29);
}

static void wrong(const char *what, int round, int from, size_t i, uint64_t got, uint64_t want)
{
    fprintf(stderr, "chaos_shmem: WRONG: PE %d, round %d, %s from PE %d, word %zu: %#llx, "
            "not %#llx\n", shmem_my_pe(), round, what, from, i, (unsigned long long)got,
            (unsigned long long)want);
    exit(1);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 20;
    shmem_init();
    int me = shmem_my_pe(), npes = shmem_n_pes();
    uint64_t *small = shmem_malloc((size_t)npes * SMALL * sizeof *small);
    uint64_t *large = shmem_malloc((size_t)npes * LARGE * sizeof *large);
    uint64_t *src = malloc(LARGE * sizeof *src);
    long long *counter = shmem_calloc(1, sizeof *counter);
    long long *mine = shmem_malloc(sizeof *mine), *sum = shmem_malloc(sizeof *sum);
    if (!small || !large || !src || !counter || !mine || !sum) {
        fprintf(stderr, "chaos_shmem: PE %d: out of symmetric memory\n", me);
        shmem_global_exit(2);
    }
    for (int r = 1; r <= rounds; r++) {
        for (int k = 1; k < npes; k++) {
            int to = (me + k) % npes;
            for (size_t i = 0; i < SMALL; i++)
                src[i] = word(r, me, to, i);
            shmem_putmem(small + (size_t)me * SMALL, src, SMALL * sizeof *src, to);
            for (size_t i = 0; i < LARGE; i++)
                src[i] = word(r, me, to, i + SMALL);
            shmem_putmem(large + (size_t)me * LARGE, src, LARGE * sizeof *src, to);
        }
        shmem_longlong_atomic_add(counter, me + 1, 0);
        *mine = (long long)r * (me + 1);
        shmem_barrier_all();
        for (int from = 0; from < npes; from++) {
            if (from == me)
                continue;
            for (size_t i = 0; i < SMALL; i++)
                if (small[(size_t)from * SMALL + i] != word(r, from, me, i))
                    wrong("small put", r, from, i, small[(size_t)from * SMALL + i], word(r, from, me, i));
            for (size_t i = 0; i < LARGE; i++)
                if (large[(size_t)from * LARGE + i] != word(r, from, me, i + SMALL))
                    wrong("large put", r, from, i, large[(size_t)from * LARGE + i],
                          word(r, from, me, i + SMALL));
        }
        shmem_longlong_sum_reduce(SHMEM_TEAM_WORLD, sum, mine, 1);
        long long want = (long long)r * npes * (npes + 1) / 2;
        if (*sum != want)
            wrong("sum", r, -1, 0, (uint64_t)*sum, (uint64_t)want);
        shmem_barrier_all(); /* nobody overwrites a block before its owner checked it */
    }
    long long want = (long long)rounds * npes * (npes + 1) / 2;
    if (me == 0 && *counter != want)
        wrong("atomic counter", rounds, -1, 0, (uint64_t)*counter, (uint64_t)want);
    if (me == 0)
        printf("ok: %d PEs, %d rounds of puts (%d and %d bytes to every PE), atomics and "
               "reductions checked\n", npes, rounds, (int)(SMALL * 8), (int)(LARGE * 8));
    shmem_free(small);
    shmem_free(large);
    shmem_free(counter);
    shmem_free(mine);
    shmem_free(sum);
    free(src);
    shmem_finalize();
    return 0;
}
