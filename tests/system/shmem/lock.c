/* Locks: every PE increments a counter on PE 0 non-atomically (get, add, put) inside
 * set_lock/clear_lock; the total must be exact. Then test_lock: exactly one holder at a time. */
#include <sched.h>
#include <shmem.h>

#include "check.h"

#define ITERS 200

int main(void)
{
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();
    long *lock = shmem_calloc(2, sizeof(long));
    long *cnt = shmem_calloc(1, sizeof(long));
    int *holders = shmem_calloc(1, sizeof(int));
    shmem_barrier_all();
    for (int i = 0; i < ITERS; i++) {
        shmem_set_lock(&lock[0]);
        long v = shmem_long_g(cnt, 0);
        shmem_long_p(cnt, v + 1, 0);
        shmem_clear_lock(&lock[0]);
    }
    shmem_barrier_all();
    if (me == 0)
        CHECK(*cnt == (long)ITERS * n, "locked counter %ld, expected %ld", *cnt, (long)ITERS * n);
    for (int i = 0; i < ITERS; i++) {
        while (shmem_test_lock(&lock[1]))
            sched_yield();
        int h = shmem_int_atomic_fetch_inc(holders, 0);
        CHECK(h == 0, "%d other holders of the lock", h);
        shmem_int_atomic_add(holders, -1, 0);
        shmem_clear_lock(&lock[1]);
    }
    shmem_barrier_all();
    CHECK(shmem_test_lock(&lock[1]) == 0 || n > 1, "free lock not acquired");
    shmem_finalize();
    return 0;
}
