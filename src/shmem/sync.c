/*
 * Ordering and synchronisation: quiet/fence, the barrier, wait_until/test, global_exit.
 *
 * Stores through an NTB window are globally visible once they retire, so quiet and fence are
 * store fences. The barrier is a central counter in PE 0's control region: each PE increments
 * it with a remote atomic; the last one resets it and bumps the generation word, then wakes
 * the sleepers with a FUTEX_WAKE through its mapping of that page. The others sleep in
 * FUTEX_WAIT on their own mapping of the same page (a MAP_SHARED page of PE 0's host RAM file:
 * one futex key for all of them, the mechanism the segment interrupts use). The waits time
 * out every 100 ms to look for a global exit, so nobody spins on the 2-core machines.
 *
 * wait_until/test poll the local variable (a put from another PE is a plain store into our
 * memory, which wakes nobody): a short spin, then sleeps from 1 us doubling to 1 ms.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shmem.h"
#include "shmem_internal.h"

static void futex_wait(_Atomic uint32_t *w, uint32_t seen, long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    /* Not FUTEX_PRIVATE: the waiters are different processes sharing the page. */
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT, seen, &ts, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *w)
{
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

void shm_check_exit(void)
{
    int32_t code = atomic_load(&shm_ctrl_of(shm.me)->exit_code);
    if (code) {
        fflush(NULL);
        _exit(code - 1);
    }
}

void shm_barrier(void)
{
    atomic_thread_fence(memory_order_seq_cst); /* quiet: our puts are done before we arrive */
    struct shm_ctrl *c = shm_ctrl_of(0);
    uint32_t gen = atomic_load(&c->bar_gen);
    if (atomic_fetch_add(&c->bar_count, 1) + 1 == (uint32_t)shm.npes) {
        atomic_store(&c->bar_count, 0);
        atomic_fetch_add(&c->bar_gen, 1);
        futex_wake(&c->bar_gen);
        return;
    }
    int spins = 0;
    while (atomic_load(&c->bar_gen) == gen) {
        if (++spins < 64)
            continue; /* a barrier among PEs that arrive together: no syscall */
        shm_check_exit();
        futex_wait(&c->bar_gen, gen, 100);
    }
    atomic_thread_fence(memory_order_seq_cst);
}

void shmem_barrier_all(void)
{
    shm_require_init("shmem_barrier_all");
    shm_barrier();
}

void shmem_sync_all(void)
{
    shm_require_init("shmem_sync_all");
    shm_barrier();
}

void shmem_quiet(void) { atomic_thread_fence(memory_order_seq_cst); }
void shmem_fence(void) { atomic_thread_fence(memory_order_release); }

/* Tell every PE, wake the barrier sleepers, and leave; oshrun ends the stragglers too. */
void shmem_global_exit(int status)
{
    fflush(NULL);
    if (shm.initialized && !shm.finalized) {
        for (int pe = 0; pe < shm.npes; pe++)
            if (shm.pes[pe].base)
                atomic_store(&shm_ctrl_of(pe)->exit_code, (int32_t)(status & 0xff) + 1);
        if (shm.pes[0].base)
            futex_wake(&shm_ctrl_of(0)->bar_gen);
    }
    _exit(status);
}

/* Sleep a little more each time: 1 us doubling to 1 ms (after a short spin). */
static void backoff(unsigned *round)
{
    if (++*round < 100)
        return;
    unsigned n = *round - 100;
    long ns = 1000L << (n < 10 ? n : 10);
    if (ns > 1000000L)
        ns = 1000000L;
    struct timespec ts = { 0, ns };
    nanosleep(&ts, NULL);
    if ((*round & 63) == 0)
        shm_check_exit();
}

static int compare(long long v, int cmp, long long ref)
{
    switch (cmp) {
    case SHMEM_CMP_EQ: return v == ref;
    case SHMEM_CMP_NE: return v != ref;
    case SHMEM_CMP_GT: return v > ref;
    case SHMEM_CMP_GE: return v >= ref;
    case SHMEM_CMP_LT: return v < ref;
    case SHMEM_CMP_LE: return v <= ref;
    default: shm_fatal("wait_until/test: %d is not a SHMEM_CMP_* operator", cmp);
    }
}

#define DEF_P2P(T, N)                                                                          \
    int shmem_##N##_test(T *ivar, int cmp, T cmp_value)                                        \
    {                                                                                          \
        T v = atomic_load((_Atomic T *)ivar);                                                  \
        return compare((long long)v, cmp, (long long)cmp_value);                               \
    }                                                                                          \
    void shmem_##N##_wait_until(T *ivar, int cmp, T cmp_value)                                 \
    {                                                                                          \
        unsigned round = 0;                                                                    \
        while (!shmem_##N##_test(ivar, cmp, cmp_value))                                        \
            backoff(&round);                                                                   \
        atomic_thread_fence(memory_order_acquire);                                             \
    }                                                                                          \
    void shmem_##N##_wait(T *ivar, T value) { shmem_##N##_wait_until(ivar, SHMEM_CMP_NE, value); }
SHMEM_P2P_TYPE_TABLE(DEF_P2P)
