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

#define CMP_OP(v, cmp, ref)                                                                    \
    ((cmp) == SHMEM_CMP_EQ   ? (v) == (ref)                                                    \
     : (cmp) == SHMEM_CMP_NE ? (v) != (ref)                                                    \
     : (cmp) == SHMEM_CMP_GT ? (v) > (ref)                                                     \
     : (cmp) == SHMEM_CMP_GE ? (v) >= (ref)                                                    \
     : (cmp) == SHMEM_CMP_LT ? (v) < (ref)                                                     \
                             : (v) <= (ref))

static void check_cmp(int cmp)
{
    if (cmp < SHMEM_CMP_EQ || cmp > SHMEM_CMP_LE)
        shm_fatal("wait_until/test: %d is not a SHMEM_CMP_* operator", cmp);
}

/* The _all/_any/_some forms share one scan: ref is cmp_values[i] (vector) or *cmp_value. */
#define DEF_P2P(T, N)                                                                          \
    int shmem_##N##_test(T *ivar, int cmp, T cmp_value)                                        \
    {                                                                                          \
        check_cmp(cmp);                                                                        \
        T v = atomic_load((_Atomic T *)ivar);                                                  \
        return CMP_OP(v, cmp, cmp_value);                                                      \
    }                                                                                          \
    void shmem_##N##_wait_until(T *ivar, int cmp, T cmp_value)                                 \
    {                                                                                          \
        unsigned round = 0;                                                                    \
        while (!shmem_##N##_test(ivar, cmp, cmp_value))                                        \
            backoff(&round);                                                                   \
        atomic_thread_fence(memory_order_acquire);                                             \
    }                                                                                          \
    void shmem_##N##_wait(T *ivar, T value) { shmem_##N##_wait_until(ivar, SHMEM_CMP_NE, value); } \
    /* How many of the elements not excluded by status satisfy the comparison (their indices  \
     * to idx if given; stop at the first if first); *active: how many are not excluded. */   \
    static size_t scan_##N(T *ivars, size_t nelems, const int *status, int cmp,               \
                           const T *refs, int vec, size_t *idx, int first, size_t *active)     \
    {                                                                                          \
        check_cmp(cmp);                                                                        \
        size_t hits = 0, act = 0;                                                              \
        for (size_t i = 0; i < nelems; i++) {                                                  \
            if (status && status[i])                                                           \
                continue;                                                                      \
            act++;                                                                             \
            T v = atomic_load((_Atomic T *)&ivars[i]);                                         \
            T ref = vec ? refs[i] : refs[0];                                                   \
            if (CMP_OP(v, cmp, ref)) {                                                         \
                if (idx)                                                                       \
                    idx[hits] = i;                                                             \
                hits++;                                                                        \
                if (first)                                                                     \
                    break;                                                                     \
            }                                                                                  \
        }                                                                                      \
        *active = act;                                                                         \
        return hits;                                                                           \
    }                                                                                          \
    static int all_##N(T *ivars, size_t nelems, const int *status, int cmp, const T *refs,     \
                       int vec)                                                                \
    {                                                                                          \
        size_t act, hits = scan_##N(ivars, nelems, status, cmp, refs, vec, NULL, 0, &act);     \
        return hits == act;                                                                    \
    }                                                                                          \
    static size_t any_##N(T *ivars, size_t nelems, const int *status, int cmp, const T *refs,  \
                          int vec, int wait)                                                   \
    {                                                                                          \
        unsigned round = 0;                                                                    \
        for (;;) {                                                                             \
            size_t i, act;                                                                     \
            if (scan_##N(ivars, nelems, status, cmp, refs, vec, &i, 1, &act)) {                \
                atomic_thread_fence(memory_order_acquire);                                     \
                return i;                                                                      \
            }                                                                                  \
            if (!wait || act == 0)                                                             \
                return SIZE_MAX;                                                               \
            backoff(&round);                                                                   \
        }                                                                                      \
    }                                                                                          \
    static size_t some_##N(T *ivars, size_t nelems, size_t *indices, const int *status,        \
                           int cmp, const T *refs, int vec, int wait)                          \
    {                                                                                          \
        unsigned round = 0;                                                                    \
        for (;;) {                                                                             \
            size_t act, hits = scan_##N(ivars, nelems, status, cmp, refs, vec, indices, 0, &act); \
            if (hits || !wait || act == 0) {                                                   \
                atomic_thread_fence(memory_order_acquire);                                     \
                return hits;                                                                   \
            }                                                                                  \
            backoff(&round);                                                                   \
        }                                                                                      \
    }                                                                                          \
    static void wait_all_##N(T *ivars, size_t nelems, const int *status, int cmp,              \
                             const T *refs, int vec)                                           \
    {                                                                                          \
        unsigned round = 0;                                                                    \
        while (!all_##N(ivars, nelems, status, cmp, refs, vec))                                \
            backoff(&round);                                                                   \
        atomic_thread_fence(memory_order_acquire);                                             \
    }                                                                                          \
    void shmem_##N##_wait_until_all(T *ivars, size_t nelems, const int *status, int cmp,       \
                                    T cmp_value)                                               \
    {                                                                                          \
        wait_all_##N(ivars, nelems, status, cmp, &cmp_value, 0);                               \
    }                                                                                          \
    size_t shmem_##N##_wait_until_any(T *ivars, size_t nelems, const int *status, int cmp,     \
                                      T cmp_value)                                             \
    {                                                                                          \
        return any_##N(ivars, nelems, status, cmp, &cmp_value, 0, 1);                          \
    }                                                                                          \
    size_t shmem_##N##_wait_until_some(T *ivars, size_t nelems, size_t *indices,               \
                                       const int *status, int cmp, T cmp_value)                \
    {                                                                                          \
        return some_##N(ivars, nelems, indices, status, cmp, &cmp_value, 0, 1);                \
    }                                                                                          \
    void shmem_##N##_wait_until_all_vector(T *ivars, size_t nelems, const int *status,         \
                                           int cmp, T *cmp_values)                             \
    {                                                                                          \
        wait_all_##N(ivars, nelems, status, cmp, cmp_values, 1);                               \
    }                                                                                          \
    size_t shmem_##N##_wait_until_any_vector(T *ivars, size_t nelems, const int *status,       \
                                             int cmp, T *cmp_values)                           \
    {                                                                                          \
        return any_##N(ivars, nelems, status, cmp, cmp_values, 1, 1);                          \
    }                                                                                          \
    size_t shmem_##N##_wait_until_some_vector(T *ivars, size_t nelems, size_t *indices,        \
                                              const int *status, int cmp, T *cmp_values)       \
    {                                                                                          \
        return some_##N(ivars, nelems, indices, status, cmp, cmp_values, 1, 1);                \
    }                                                                                          \
    int shmem_##N##_test_all(T *ivars, size_t nelems, const int *status, int cmp, T cmp_value) \
    {                                                                                          \
        return all_##N(ivars, nelems, status, cmp, &cmp_value, 0);                             \
    }                                                                                          \
    size_t shmem_##N##_test_any(T *ivars, size_t nelems, const int *status, int cmp,           \
                                T cmp_value)                                                   \
    {                                                                                          \
        return any_##N(ivars, nelems, status, cmp, &cmp_value, 0, 0);                          \
    }                                                                                          \
    size_t shmem_##N##_test_some(T *ivars, size_t nelems, size_t *indices, const int *status,  \
                                 int cmp, T cmp_value)                                         \
    {                                                                                          \
        return some_##N(ivars, nelems, indices, status, cmp, &cmp_value, 0, 0);                \
    }                                                                                          \
    int shmem_##N##_test_all_vector(T *ivars, size_t nelems, const int *status, int cmp,       \
                                    T *cmp_values)                                             \
    {                                                                                          \
        return all_##N(ivars, nelems, status, cmp, cmp_values, 1);                             \
    }                                                                                          \
    size_t shmem_##N##_test_any_vector(T *ivars, size_t nelems, const int *status, int cmp,    \
                                       T *cmp_values)                                          \
    {                                                                                          \
        return any_##N(ivars, nelems, status, cmp, cmp_values, 1, 0);                          \
    }                                                                                          \
    size_t shmem_##N##_test_some_vector(T *ivars, size_t nelems, size_t *indices,              \
                                        const int *status, int cmp, T *cmp_values)             \
    {                                                                                          \
        return some_##N(ivars, nelems, indices, status, cmp, cmp_values, 1, 0);                \
    }
SHMEM_P2P_TYPE_TABLE(DEF_P2P)

/* The signal word is a local uint64_t updated by put_signal's remote atomic: poll it with the
 * same backoff as wait_until. */
uint64_t shmem_signal_wait_until(uint64_t *sig_addr, int cmp, uint64_t cmp_value)
{
    check_cmp(cmp);
    unsigned round = 0;
    for (;;) {
        uint64_t v = atomic_load((_Atomic uint64_t *)sig_addr);
        if (CMP_OP(v, cmp, cmp_value)) {
            atomic_thread_fence(memory_order_acquire);
            return v;
        }
        backoff(&round);
    }
}

/*
 * Locks: a ticket lock in PE 0's copy of the symmetric long. The upper 32 bits are the next
 * ticket, the lower 32 the ticket being served (each wraps on its own). set_lock takes a ticket
 * with a remote fetch-add and waits (backoff, reading PE 0's word) until it is served.
 */
#define LOCK_TICKET (UINT64_C(1) << 32)
static _Atomic uint64_t *lock_word(const char *who, long *lock)
{
    shm_require_init(who);
    return (_Atomic uint64_t *)shm_translate(who, lock, 0);
}

void shmem_set_lock(long *lock)
{
    _Atomic uint64_t *w = lock_word("shmem_set_lock", lock);
    uint32_t t = (uint32_t)(atomic_fetch_add(w, LOCK_TICKET) >> 32);
    unsigned round = 0;
    while ((uint32_t)atomic_load(w) != t)
        backoff(&round);
    atomic_thread_fence(memory_order_seq_cst);
}

int shmem_test_lock(long *lock)
{
    _Atomic uint64_t *w = lock_word("shmem_test_lock", lock);
    uint64_t v = atomic_load(w);
    if ((uint32_t)(v >> 32) != (uint32_t)v)
        return 1; /* held (or waited for) */
    if (!atomic_compare_exchange_strong(w, &v, v + LOCK_TICKET))
        return 1;
    atomic_thread_fence(memory_order_seq_cst);
    return 0;
}

void shmem_clear_lock(long *lock)
{
    _Atomic uint64_t *w = lock_word("shmem_clear_lock", lock);
    atomic_thread_fence(memory_order_seq_cst); /* quiet: the critical section's stores first */
    uint64_t v = atomic_load(w), nv;
    do
        nv = (v & ~(LOCK_TICKET - 1)) | (uint32_t)((uint32_t)v + 1);
    while (!atomic_compare_exchange_weak(w, &v, nv));
}
