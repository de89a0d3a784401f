/*
 * Large copies to and from a mapped PE (a put or get through an NTB window, or to a PE on our
 * own host): the calling thread and one helper thread copy COPY_PIECE pieces, the caller
 * taking them from the front and the helper from the back (cp.left), so a large put moves at
 * the rate of two CPUs instead of one when the machine has a CPU to spare (not with more PEs
 * than CPUs, where the helper would only take the CPU of a PE). On the two hardware threads
 * of one core, where a VM's host may put its two CPUs at any time, the two copy no faster
 * than one. Work is taken, not handed out: when the helper is late,
 * or asleep, the caller copies every piece itself and nothing waits for the helper.
 *
 * A job's state word holds its generation and where the helper stands: the caller opens the
 * job; the helper joins it (OPEN -> JOINED) or finds it closed; the caller, once no piece is
 * left to take, closes an unjoined job (OPEN -> CLOSED) or waits until the helper has left
 * (LEFT): the copy into the target is complete when the call returns, as a put's source may
 * be reused and the target rewritten at once. The helper keeps off the caller's CPU (its
 * affinity leaves that one out: a wake-up would often put it next to its waker), where it
 * could only take turns with the caller. It spins for COPY_SPIN_NS after a job, so a stream
 * of large puts keeps it awake, and then sleeps on a futex; a job of COPY_WAKE_MIN bytes or
 * more wakes it. SHMEM_COPY_HELPER=0 turns it off; =slow makes the helper pause 2 ms before
 * each piece it takes, so that tests see callers wait for it.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shmem_internal.h"

#define COPY_PIECE (64u << 10)
#define COPY_MIN (256u << 10)     /* smaller copies are one memcpy */
#define COPY_WAKE_MIN (1u << 20)  /* worth a futex wake of a sleeping helper */
#define COPY_SPIN_NS 20000u

enum { ST_OPEN, ST_JOINED, ST_CLOSED, ST_LEFT };

static struct {
    pthread_mutex_t lock; /* one job at a time; another thread's job means a plain memcpy */
    pthread_t tid;
    bool started, failed;
    _Atomic uint64_t state; /* gen << 2 | ST_* */
    _Atomic uint32_t wake;  /* futex: bumped to wake the helper */
    _Atomic uint32_t sleeping;
    _Atomic bool stop;
    char *dst;
    const char *src;
    size_t len, pieces;
    _Atomic int cpu;     /* the caller's: a helper on the same CPU would only slow it down */
    /* The pieces not taken yet: [front, back) as front << 32 | back. The caller takes from
     * the front and the helper from the back, so from one put of a stream to the next each
     * copies about the same half, whose source and target lines are still in its own CPU's
     * cache; pieces handed out in turn would have the lines of the target move between the
     * CPUs' caches at every put (slow whenever the VM's CPUs reach each other's caches
     * slowly, see the 2-PE barrier). */
    _Atomic uint64_t left;
    unsigned long jobs, shared; /* for SHMEM_DEBUG */
} cp = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void take_pieces(bool helper)
{
    for (;;) {
        uint64_t l = atomic_load_explicit(&cp.left, memory_order_relaxed), front, back, i;
        do {
            front = l >> 32;
            back = l & UINT32_MAX;
            if (front >= back)
                return;
            i = helper ? back - 1 : front;
        } while (!atomic_compare_exchange_weak(&cp.left, &l, helper ? l - 1 : l + (UINT64_C(1) << 32)));
        size_t off = i * COPY_PIECE, n = cp.len - off < COPY_PIECE ? cp.len - off : COPY_PIECE;
        if (helper && shm.copy_helper == 2) { /* SHMEM_COPY_HELPER=slow, for the tests */
            struct timespec ts = { 0, 2000000 };
            nanosleep(&ts, NULL);
        }
        memcpy(cp.dst + off, cp.src + off, n);
    }
}

/* Keep off the caller's CPU: a wake-up would otherwise often put us there (next to the
 * thread that woke us), where we could only take turns with it. false: no other CPU. */
static bool avoid_cpu(int cpu, const cpu_set_t *allowed, int *avoided)
{
    if (cpu == *avoided)
        return true;
    cpu_set_t set = *allowed;
    if (cpu >= 0)
        CPU_CLR(cpu, &set);
    if (!CPU_COUNT(&set))
        return false;
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    *avoided = cpu;
    return true;
}

static void *helper(void *arg)
{
    (void)arg;
    cpu_set_t allowed;
    if (pthread_getaffinity_np(pthread_self(), sizeof allowed, &allowed))
        return NULL;
    int avoided = -2;
    uint64_t done_gen = atomic_load(&cp.state) >> 2;
    uint64_t idle_since = shm_now_ns();
    while (!atomic_load(&cp.stop)) {
        uint32_t w = atomic_load(&cp.wake);
        uint64_t s = atomic_load_explicit(&cp.state, memory_order_acquire);
        int caller = atomic_load_explicit(&cp.cpu, memory_order_relaxed);
        if (s >> 2 != done_gen) {
            uint64_t open = s & ~UINT64_C(3);
            if ((s & 3) == ST_OPEN && avoid_cpu(caller, &allowed, &avoided) && sched_getcpu() != caller &&
                atomic_compare_exchange_strong(&cp.state, &open, open | ST_JOINED)) {
                take_pieces(true);
                atomic_store_explicit(&cp.state, open | ST_LEFT, memory_order_release);
            }
            done_gen = s >> 2;
            idle_since = shm_now_ns();
            continue;
        }
        /* Spin a little for the next job of a stream; then sleep. */
        if (shm_now_ns() - idle_since < COPY_SPIN_NS && sched_getcpu() != caller) {
            shm_relax();
            continue;
        }
        atomic_store(&cp.sleeping, 1);
        if (atomic_load(&cp.state) >> 2 == done_gen && !atomic_load(&cp.stop))
            shm_futex_wait(&cp.wake, w, 1000);
        atomic_store(&cp.sleeping, 0);
        idle_since = shm_now_ns();
    }
    return NULL;
}

void shm_copy(void *dst, const void *src, size_t len)
{
    if (len < COPY_MIN || shm.crowded || !shm.copy_helper || pthread_mutex_trylock(&cp.lock)) {
        memcpy(dst, src, len);
        return;
    }
    if (!cp.started && !cp.failed) {
        if (sysconf(_SC_NPROCESSORS_ONLN) < 2 || pthread_create(&cp.tid, NULL, helper, NULL))
            cp.failed = true;
        else
            cp.started = true;
    }
    if (!cp.started) {
        pthread_mutex_unlock(&cp.lock);
        memcpy(dst, src, len);
        return;
    }
    cp.dst = dst;
    cp.src = src;
    cp.len = len;
    cp.pieces = (len + COPY_PIECE - 1) / COPY_PIECE;
    atomic_store_explicit(&cp.cpu, sched_getcpu(), memory_order_relaxed);
    atomic_store(&cp.left, (uint64_t)cp.pieces); /* front 0, back pieces */
    uint64_t open = ((atomic_load(&cp.state) >> 2) + 1) << 2 | ST_OPEN;
    atomic_store_explicit(&cp.state, open, memory_order_release);
    if (len >= COPY_WAKE_MIN && atomic_load(&cp.sleeping)) {
        atomic_fetch_add(&cp.wake, 1);
        shm_futex_wake(&cp.wake);
    }
    take_pieces(false);
    uint64_t s = open;
    /* The helper finishes its last piece in a microsecond or two, unless the scheduler has
     * put it on our CPU since it joined: then it needs our CPU to finish. */
    cp.jobs++;
    if (!atomic_compare_exchange_strong(&cp.state, &s, (open & ~UINT64_C(3)) | ST_CLOSED) && ++cp.shared)
        for (unsigned spins = 0; (atomic_load_explicit(&cp.state, memory_order_acquire) & 3) != ST_LEFT; spins++) {
            if (spins < 2000)
                shm_relax();
            else
                sched_yield();
        }
    pthread_mutex_unlock(&cp.lock);
}

void shm_copy_fini(void)
{
    if (cp.jobs)
        shm_debug("large copies: %lu, %lu of them shared with the helper thread", cp.jobs, cp.shared);
    if (!cp.started)
        return;
    atomic_store(&cp.stop, true);
    atomic_fetch_add(&cp.wake, 1);
    shm_futex_wake(&cp.wake);
    pthread_join(cp.tid, NULL);
    cp.started = false;
    atomic_store(&cp.stop, false);
}
