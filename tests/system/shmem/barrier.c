/* Puts before a barrier are visible after it: every round each PE writes its round number
 * into its slot on every PE, barriers, and checks every slot; then again with sync_all. */
#include <shmem.h>

#include "check.h"

#define ROUNDS 200

int main(int argc, char **argv)
{
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();
    int rounds = argc > 1 ? atoi(argv[1]) : ROUNDS;
    long *slots = shmem_calloc((size_t)n * 64, sizeof(long));
    for (int r = 1; r <= rounds; r++) {
        long vals[64];
        for (int k = 0; k < 64; k++)
            vals[k] = r * 1000L + me * 64 + k;
        for (int pe = 0; pe < n; pe++)
            shmem_long_put(&slots[me * 64], vals, 64, pe);
        if (r % 2)
            shmem_barrier_all();
        else
            shmem_sync_all();
        for (int pe = 0; pe < n; pe++)
            for (int k = 0; k < 64; k++)
                CHECK(slots[pe * 64 + k] == r * 1000L + pe * 64 + k,
                      "round %d: PE %d's word %d is %ld", r, pe, k, slots[pe * 64 + k]);
        shmem_barrier_all(); /* nobody overwrites before everyone has checked */
    }
    shmem_free(slots);
    shmem_finalize();
    return 0;
}
