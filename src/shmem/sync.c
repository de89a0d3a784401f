/*
 * Ordering and synchronisation: quiet/fence, the barrier, wait_until/test, global_exit, locks.
 *
 * A store through an NTB window is globally visible once it retires, so to a mapped PE quiet
 * is a store fence; routed puts (xport.c) are complete when their acknowledgements are back.
 * fence is a store fence: routed messages to one PE travel in order in one ring anyway.
 *
 * The barrier is a dissemination barrier over the control pages: in round k each PE stores the
 * barrier's number in bar_flag[k] of PE (me + 2^k) mod n, the word's only writer, and waits
 * until its own bar_flag[k] holds this barrier; ceil(log2 n) rounds, no central counter, and
 * every PE waits on its own page (the wait policy, wait.c: a spin unless the PE that signals
 * it shares its CPU, yields, then FUTEX_WAIT; the waker's FUTEX_WAKE reaches it through the
 * same host RAM page). The store needs no fence before the look at whether its target sleeps
 * (signal_store): a sleeper fences for it (wpol_asym_fence), so a 2-PE barrier costs about
 * one cache-line transfer each way, the two in flight at once. Waits time out every 100 ms to
 * look for a global exit. When the PE that signals us keeps running on our CPU although we may
 * run on others, we move off it (spread.h): the two would otherwise hand one CPU over at every
 * barrier.
 * With more PEs than CPUs it is a counter in PE 0's control page instead (counter_barrier),
 * or, when every PE is pinned to one CPU, a count of arrivals per CPU and one of CPUs
 * (cpu_barrier).
 * Either way it ends with shm_check_paths (health.c): a path that failed meanwhile may have
 * lost a store before the barrier, or let a wait read all ones.
 *
 * wait_until/test poll the local variable (a put from another PE is a plain store into our
 * memory, which wakes nobody): the wait policy's spin and yields, then naps (wait.c).
 * signal_wait_until sleeps on our notify word, which put-with-signal wakes.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shmem.h"
#include "shmem_internal.h"
#include "spread.h"

/* shmem_global_exit is telling the PEs: those that leave meanwhile are no loss. */
static _Atomic bool exiting;

void shm_check_exit(void)
{
    struct shm_ctrl *c = shm_ctrl_of(shm.me);
    int32_t code = atomic_load(&c->exit_code);
    if (code) {
        fflush(NULL);
        atomic_store(&c->finished, 1); /* leaving as asked: our heap's removal is no loss */
        _exit(code - 1);
    }
    shm_check_launcher();
    if (atomic_load(&exiting))
        return;
    shm_check_peers();
    if (shm.failover)
        shm_xport_poll();
}

/* With more PEs than CPUs a waiting PE must give its CPU to the PE it waits for, and every
 * round of the dissemination barrier needs the partner to have run: a central counter needs
 * each PE to run once per barrier (arrive; see the release and arrive at the next one).
 *
 * When every PE maps every other (no ring) and atomics are done in place, the waiters read
 * the counter in PE 0's page itself, so the last PE to arrive releases everyone with its one
 * increment and only wakes those that went to sleep (the others see the count the next time
 * they run): no release is written into every PE's page while they wait for the CPU.
 * Otherwise (a ring, or software atomics between hosts) the last one sets bar_release in
 * every PE. Every PE takes the same path. */

/* Does a PE that has not arrived at this barrier yet last run on our CPU? Then it needs our
 * CPU to arrive, and we give it up; otherwise the PEs we wait for run on other CPUs, and a
 * short spin sees them arrive without the cost of a switch (on a 2-CPU VM a sched_yield that
 * switches costs over a microsecond, the better part of a barrier). */
static bool mate_pending(uint64_t epoch)
{
    int cpu = sched_getcpu();
    for (int pe = 0; pe < shm.npes; pe++) {
        struct shm_ctrl *o = shm_ctrl_of(pe);
        if (pe != shm.me && atomic_load_explicit(&o->bar_arrived, memory_order_relaxed) < epoch &&
            (cpu < 0 || atomic_load_explicit(&o->bar_cpu, memory_order_relaxed) == cpu))
            return true;
    }
    return false;
}

/* The last arrival at a counter barrier whose waiters read the count itself: wake those that
 * went to sleep. Its increment was seq_cst, so it is ordered before these loads of the
 * sleepers' flags, as a sleeper's flag is before its last look at the count
 * (shm_wait_notify); shm_poke_direct wakes only a PE that sleeps. */
static void wake_sleepers(void)
{
    for (int i = 1; i < shm.npes; i++)
        shm_poke_direct((shm.me + i) % shm.npes);
}

/* Wait until w is reached, as every wait does (shm_wait_for), except that whether a PE still
 * to come needs our CPU (then we yield at once instead of spinning) is: mates > 0 yes, 0 no,
 * < 0 ask mate_pending(epoch). */
struct count_ctx {
    struct shm_u64_wait *w;
    int mates;
    uint64_t epoch;
};

static bool count_ready(void *arg) { return shm_u64_reached(((struct count_ctx *)arg)->w); }

static bool count_needs_cpu(void *arg)
{
    struct count_ctx *x = arg;
    return x->mates < 0 ? mate_pending(x->epoch) : x->mates > 0;
}

static void wait_count(struct shm_u64_wait *w, int mates, uint64_t epoch)
{
    struct count_ctx x = { w, mates, epoch };
    shm_wait_for(count_ready, &x, count_needs_cpu, -1);
}

static void counter_barrier(uint64_t epoch)
{
    struct shm_ctrl *c = shm_ctrl_of(shm.me);
    size_t off = offsetof(struct shm_ctrl, bar_count);
    uint64_t all = epoch * (uint64_t)shm.npes;
    if (!shm.routed && (!shm.sw_atomics || shm.nhosts == 1)) {
        _Atomic uint64_t *count = shm_direct(0, off);
        atomic_store_explicit(&c->bar_cpu, sched_getcpu(), memory_order_relaxed);
        atomic_store_explicit(&c->bar_arrived, epoch, memory_order_relaxed);
        if (atomic_fetch_add(count, 1) + 1 == all) {
            wake_sleepers();
            return;
        }
        struct shm_u64_wait w = { count, all };
        wait_count(&w, -1, epoch);
        return;
    }
    uint64_t arrived = shm_amo(0, off, SHM_AMO_ADD, 8, 1, 0) + 1;
    if (arrived == all) { /* the last one: release the others */
        for (int i = 1; i < shm.npes; i++)
            shm_amo((shm.me + i) % shm.npes, offsetof(struct shm_ctrl, bar_release),
                    SHM_AMO_SET | SHM_AMO_WAKE, 8, epoch, 0);
        return;
    }
    shm_wait_u64(&c->bar_release, epoch);
}

/* Pinned PEs (oshrun pins them when there are more than CPUs) count by CPU: a PE adds 1 to its
 * CPU's count, in the cache line of the CPU's first PE, and the last of the CPU's PEs adds 1 to
 * PE 0's count of CPUs; everyone waits for that to count all the CPUs. A PE that is not the
 * last of its CPU yields at once (the others need the CPU), the last one spins (the PEs it waits
 * for run elsewhere). Against one counter for all, the CPUs share one cache line touched once
 * by each per barrier, not one that every arrival and every spinning waiter pulls across. */
static struct {
    bool on;
    _Atomic uint64_t *local_count; /* bar_local of the first PE pinned to our CPU */
    _Atomic uint64_t *cpus_count;  /* PE 0's bar_cpus */
    uint64_t local; /* PEs pinned to our CPU */
    uint64_t cpus;  /* CPUs with PEs */
    uint64_t epoch; /* barriers counted this way */
} grp;

void shm_barrier_setup(void)
{
    if (!shm.crowded || shm.routed || (shm.sw_atomics && shm.nhosts > 1))
        return;
    int mine = shm_ctrl_of(shm.me)->pin_cpu;
    uint64_t cpus = 0, local = 0;
    int leader = -1;
    for (int pe = 0; pe < shm.npes; pe++) {
        int cpu = shm_ctrl_of(pe)->pin_cpu;
        if (cpu < 0)
            return; /* every PE takes the same path: the counter of all arrivals */
        bool first = true;
        for (int q = 0; q < pe && first; q++)
            first = shm_ctrl_of(q)->pin_cpu != cpu;
        cpus += first;
        if (cpu == mine) {
            local++;
            if (leader < 0)
                leader = pe;
        }
    }
    grp.local_count = shm_direct(leader, offsetof(struct shm_ctrl, bar_local));
    grp.cpus_count = shm_direct(0, offsetof(struct shm_ctrl, bar_cpus));
    grp.local = local;
    grp.cpus = cpus;
    grp.on = true;
    shm_debug("barrier: %" PRIu64 " PEs on our CPU %d, %" PRIu64 " CPUs", local, mine, cpus);
}

static void cpu_barrier(void)
{
    uint64_t e = ++grp.epoch;
    struct shm_u64_wait w = { grp.cpus_count, e * grp.cpus };
    if (atomic_fetch_add(grp.local_count, 1) + 1 < e * grp.local)
        wait_count(&w, 1, 0); /* PEs of our CPU still to come: they need it */
    else if (atomic_fetch_add(grp.cpus_count, 1) + 1 == w.want)
        wake_sleepers();
    else
        wait_count(&w, 0, 0); /* the PEs still to come run on other CPUs */
}

/* A barrier's arrival: store v at off in PE pe's control page, where only this PE writes, and
 * wake pe if it sleeps. With no fence where pe is mapped and shm.asym holds: a compiler
 * barrier keeps the store and the look at `sleeping` in program order, the CPU may still let
 * the look pass the store, and a sleeper's wpol_asym_fence covers that (wpol.h). Else an AMO
 * that wakes. */
static void signal_store(int pe, size_t off, uint64_t v)
{
    _Atomic uint64_t *p = shm_direct(pe, off);
    if (!p || !shm.asym || (shm.sw_atomics && shm.pes[pe].host != shm.myhost)) {
        shm_amo(pe, off, SHM_AMO_SET | SHM_AMO_WAKE, 8, v, 0);
        return;
    }
    atomic_store_explicit(p, v, memory_order_release);
    atomic_signal_fence(memory_order_seq_cst);
    shm_poke_direct(pe);
}

/* Two PEs that signal each other and share a CPU hand it over at every barrier: two context
 * switches a barrier, a state the scheduler does not end by itself (spread.h). */
static struct wspread spread;

void shm_barrier(void)
{
    static uint64_t epoch;
    shm_quiet_all(); /* our puts are done before we arrive */
    epoch++;
    if (shm.crowded) {
        if (grp.on)
            cpu_barrier();
        else
            counter_barrier(epoch);
        shm_check_paths();
        return;
    }
    struct shm_ctrl *c = shm_ctrl_of(shm.me);
    /* Of a pair of PEs that keeps sharing a CPU, the higher-numbered one moves off it (were
     * both to move, they would swap CPUs and share again). Looked at every 16th barrier,
     * the first one included: the pairing lasts thousands of barriers when it happens, and
     * every barrier's arrival waits for what comes before it (the two looks and the CPU note
     * cost the 2-PE barrier 30-40 ns, a sixth of it, on a 2-CPU VM). A PE that moved is seen
     * here within 16 barriers; a waiter's stale hint costs it one yield (wpol's needs_cpu). */
    int src = (shm.me + shm.npes - 1) % shm.npes;
    if ((epoch & 15) == 1) { /* the first barrier too: until it, no PE's CPU is known */
        if (wspread_note(&spread, shm.me > src && shm_pe_here(src)) &&
            !(spread.moves & (spread.moves - 1)))
            shm_debug("barrier: PE %d shared our CPU; moved to CPU %d (%" PRIu64 " moves, %" PRIu64 " due with no CPU idle)", src,
                      sched_getcpu(), spread.moves, spread.busy);
        shm_note_cpu(); /* for the PEs that wait for us, in case we share their CPU */
    }
    for (int k = 0, dist = 1; dist < shm.npes; k++, dist <<= 1) {
        int to = (shm.me + dist) % shm.npes;
        signal_store(to, offsetof(struct shm_ctrl, bar_flag) + (size_t)k * sizeof(uint64_t), epoch);
        /* PE me - 2^k arrives here: a spin is no use while it waits for our CPU. */
        shm_wait_signal(&c->bar_flag[k], epoch, (shm.me - dist % shm.npes + shm.npes) % shm.npes);
    }
    shm_check_paths();
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

void shmem_quiet(void)
{
    shm_require_init("shmem_quiet");
    shm_quiet_all();
}

void shmem_fence(void) { atomic_thread_fence(memory_order_seq_cst); }

/* Tell every PE (waking it), and leave; oshrun ends the stragglers too. */
void shmem_global_exit(int status)
{
    fflush(NULL);
    if (shm.initialized && !shm.finalized) {
        /* The first PEs told may be gone before the last are (routed AMOs wait for replies):
         * not a loss to stop on. */
        atomic_store(&exiting, true);
        for (int pe = 0; pe < shm.npes; pe++)
            if (pe != shm.me)
                shm_amo(pe, offsetof(struct shm_ctrl, exit_code), SHM_AMO_SET | SHM_AMO_WAKE, 4,
                        (uint32_t)(status & 0xff) + 1, 0);
    }
    _exit(status);
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

/* Where the next _any scan starts: just after the element the previous one returned, so that
 * calling test_any / wait_until_any in a loop visits every satisfied element in turn instead
 * of returning the lowest one forever (1.5 leaves the choice open; a program that marks each
 * result done in a local array relies on seeing the others). Per thread. */
static _Thread_local size_t any_next;

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
        if (shmem_##N##_test(ivar, cmp, cmp_value))                                            \
            return; /* (test's load was seq_cst) */                                            \
        struct wpol w;                                                                         \
        shm_poll_begin(&w);                                                                    \
        while (!shmem_##N##_test(ivar, cmp, cmp_value))                                        \
            shm_poll_pause(&w);                                                                \
        wpol_end(&w);                                                                          \
        atomic_thread_fence(memory_order_acquire);                                             \
    }                                                                                          \
    void shmem_##N##_wait(T *ivar, T value) { shmem_##N##_wait_until(ivar, SHMEM_CMP_NE, value); } \
    /* How many of the elements not excluded by status satisfy the comparison (their indices  \
     * to idx if given); first: stop at the first, scanning from any_next round to it;        \
     * *active: how many are not excluded. */                                                  \
    static size_t scan_##N(T *ivars, size_t nelems, const int *status, int cmp,               \
                           const T *refs, int vec, size_t *idx, int first, size_t *active)     \
    {                                                                                          \
        check_cmp(cmp);                                                                        \
        size_t hits = 0, act = 0, from = first && nelems ? any_next % nelems : 0;              \
        for (size_t k = 0; k < nelems; k++) {                                                  \
            size_t i = from + k < nelems ? from + k : from + k - nelems;                       \
            if (status && status[i])                                                           \
                continue;                                                                      \
            act++;                                                                             \
            T v = atomic_load((_Atomic T *)&ivars[i]);                                         \
            T ref = vec ? refs[i] : refs[0];                                                   \
            if (CMP_OP(v, cmp, ref)) {                                                         \
                if (idx)                                                                       \
                    idx[hits] = i;                                                             \
                hits++;                                                                        \
                if (first) {                                                                   \
                    any_next = i + 1;                                                          \
                    break;                                                                     \
                }                                                                              \
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
        struct wpol w;                                                                         \
        size_t i, act, ret = SIZE_MAX;                                                         \
        shm_poll_begin(&w);                                                                    \
        for (;; shm_poll_pause(&w)) {                                                          \
            if (scan_##N(ivars, nelems, status, cmp, refs, vec, &i, 1, &act)) {                \
                atomic_thread_fence(memory_order_acquire);                                     \
                ret = i;                                                                       \
                break;                                                                         \
            }                                                                                  \
            if (!wait || act == 0)                                                             \
                break;                                                                         \
        }                                                                                      \
        wpol_end(&w);                                                                          \
        return ret;                                                                            \
    }                                                                                          \
    static size_t some_##N(T *ivars, size_t nelems, size_t *indices, const int *status,        \
                           int cmp, const T *refs, int vec, int wait)                          \
    {                                                                                          \
        struct wpol w;                                                                         \
        size_t act, hits;                                                                      \
        shm_poll_begin(&w);                                                                    \
        while (!(hits = scan_##N(ivars, nelems, status, cmp, refs, vec, indices, 0, &act)) &&  \
               wait && act)                                                                    \
            shm_poll_pause(&w);                                                                \
        wpol_end(&w);                                                                          \
        atomic_thread_fence(memory_order_acquire);                                             \
        return hits;                                                                           \
    }                                                                                          \
    static void wait_all_##N(T *ivars, size_t nelems, const int *status, int cmp,              \
                             const T *refs, int vec)                                           \
    {                                                                                          \
        struct wpol w;                                                                         \
        shm_poll_begin(&w);                                                                    \
        while (!all_##N(ivars, nelems, status, cmp, refs, vec))                                \
            shm_poll_pause(&w);                                                                \
        wpol_end(&w);                                                                          \
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

struct sig_wait {
    _Atomic uint64_t *sig;
    int cmp;
    uint64_t ref, seen;
};

static bool sig_ready(void *arg)
{
    struct sig_wait *w = arg;
    w->seen = atomic_load(w->sig);
    return CMP_OP(w->seen, w->cmp, w->ref);
}

/* The signal word is a local uint64_t updated by put-with-signal's remote atomic, which
 * wakes us. */
uint64_t shmem_signal_wait_until(uint64_t *sig_addr, int cmp, uint64_t cmp_value)
{
    check_cmp(cmp);
    struct sig_wait w = { (_Atomic uint64_t *)sig_addr, cmp, cmp_value, 0 };
    shm_wait_notify(sig_ready, &w);
    atomic_thread_fence(memory_order_acquire);
    return w.seen;
}

/*
 * Locks: a ticket lock in PE 0's copy of the symmetric long. The upper 32 bits are the next
 * ticket, the lower 32 the ticket being served (each wraps on its own). set_lock takes a ticket
 * with a remote fetch-add and waits (shm_poll_pause, reading PE 0's word) until it is served.
 */
#define LOCK_TICKET (UINT64_C(1) << 32)
static size_t lock_off(const char *who, long *lock) { return shm_off(who, lock, 0); }
static uint64_t lock_amo(size_t off, unsigned op, uint64_t v, uint64_t cond)
{
    return shm_amo(0, off, op, 8, v, cond);
}

void shmem_set_lock(long *lock)
{
    size_t off = lock_off("shmem_set_lock", lock);
    uint32_t t = (uint32_t)(lock_amo(off, SHM_AMO_ADD, LOCK_TICKET, 0) >> 32);
    struct wpol w;
    shm_poll_begin(&w);
    while ((uint32_t)lock_amo(off, SHM_AMO_FETCH, 0, 0) != t)
        shm_poll_pause(&w);
    wpol_end(&w);
    atomic_thread_fence(memory_order_seq_cst);
}

int shmem_test_lock(long *lock)
{
    size_t off = lock_off("shmem_test_lock", lock);
    uint64_t v = lock_amo(off, SHM_AMO_FETCH, 0, 0);
    if ((uint32_t)(v >> 32) != (uint32_t)v)
        return 1; /* held (or waited for) */
    if (lock_amo(off, SHM_AMO_CSWAP, v + LOCK_TICKET, v) != v)
        return 1;
    atomic_thread_fence(memory_order_seq_cst);
    return 0;
}

void shmem_clear_lock(long *lock)
{
    size_t off = lock_off("shmem_clear_lock", lock);
    shm_quiet_all(); /* the critical section's stores first */
    uint64_t v = lock_amo(off, SHM_AMO_FETCH, 0, 0);
    for (;;) {
        uint64_t nv = (v & ~(LOCK_TICKET - 1)) | (uint32_t)((uint32_t)v + 1);
        uint64_t old = lock_amo(off, SHM_AMO_CSWAP, nv, v);
        if (old == v)
            break;
        v = old;
    }
}
