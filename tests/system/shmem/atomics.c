/* Every PE hammers PE 0's counters with remote atomics; the totals must be exact. Then
 * compare_swap elects exactly one winner, swap/fetch/set, and the deprecated names. */
#include <shmem.h>

#include "check.h"

#define ITERS 2000

int main(void)
{
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();
    long *cnt = shmem_calloc(1, sizeof(long));
    int *icnt = shmem_calloc(1, sizeof(int));
    long long *llcnt = shmem_calloc(1, sizeof(long long));
    long *winner = shmem_malloc(sizeof(long));
    long *seen = shmem_calloc((size_t)n, sizeof(long));
    long *tmp = shmem_calloc(1, sizeof(long));
    *winner = -1;
    shmem_barrier_all();

    for (int i = 0; i < ITERS; i++) {
        long old = shmem_long_atomic_fetch_add(cnt, 2, 0);
        CHECK(old >= 0 && old < 2L * ITERS * n && old % 2 == 0, "fetch_add returned %ld", old);
        shmem_int_atomic_inc(icnt, 0);
        shmem_longlong_atomic_add(llcnt, 3, 0);
        if (i % 4 == 0)
            shmem_long_atomic_fetch_inc(tmp, 0), shmem_long_atomic_add(tmp, -1, 0);
    }
    shmem_barrier_all();
    if (me == 0) {
        CHECK(*cnt == 2L * ITERS * n, "long counter %ld, expected %ld", *cnt, 2L * ITERS * n);
        CHECK(*icnt == ITERS * n, "int counter %d", *icnt);
        CHECK(*llcnt == 3LL * ITERS * n, "long long counter %lld", *llcnt);
        CHECK(*tmp == 0, "inc/add(-1) counter %ld", *tmp);
    }
    CHECK(shmem_long_atomic_fetch(cnt, 0) == 2L * ITERS * n, "atomic_fetch");

    /* One winner of compare_swap(-1 -> me) on PE n-1. */
    long old = shmem_long_atomic_compare_swap(winner, -1, me, n - 1);
    if (old == -1)
        shmem_long_atomic_inc(&seen[0], 0); /* count winners at PE 0 */
    shmem_barrier_all();
    if (me == 0)
        CHECK(seen[0] == 1, "%ld compare_swap winners", seen[0]);
    long w = shmem_long_g(winner, n - 1);
    CHECK(w >= 0 && w < n, "winner %ld", w);
    shmem_barrier_all();

    /* swap/set/fetch on our own slot of PE 0, then the deprecated names. */
    shmem_long_atomic_set(&seen[me], 100 + me, 0);
    CHECK(shmem_long_atomic_swap(&seen[me], 7, 0) == 100 + me, "swap old value");
    CHECK(shmem_long_atomic_fetch(&seen[me], 0) == 7, "fetch after swap");
    CHECK(shmem_long_cswap(&seen[me], 7, 8, 0) == 7, "cswap");
    CHECK(shmem_long_cswap(&seen[me], 7, 9, 0) == 8, "failed cswap returns the old value");
    CHECK(shmem_long_fadd(&seen[me], 2, 0) == 8, "fadd");
    CHECK(shmem_long_finc(&seen[me], 0) == 10, "finc");
    CHECK(shmem_long_swap(&seen[me], 1, 0) == 11, "swap");
    CHECK(shmem_int_atomic_compare_swap(icnt, ITERS * n, -5, 0) == ITERS * n ||
              shmem_int_atomic_fetch(icnt, 0) == -5,
          "int compare_swap");
    CHECK(shmem_atomic_fetch_add(llcnt, 0LL, 0) == 3LL * ITERS * n, "generic fetch_add");
    shmem_barrier_all();
    if (me == 0)
        for (int pe = 0; pe < n; pe++)
            CHECK(seen[pe] == 1, "PE %d's slot is %ld", pe, seen[pe]);
    shmem_finalize();
    return 0;
}
