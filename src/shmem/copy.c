/*
 * Large copies to and from a mapped PE (a put or get through an NTB window, or to a PE on our
 * own host): the calling thread and one helper thread copy COPY_PIECE pieces taken from a
 * shared counter, so a large put moves at the rate of two CPUs instead of one when the
 * machine has a CPU to spare (not with more PEs than CPUs, where the helper would only take
 * the CPU of a PE). Work is taken, not handed out: when the helper is late, or asleep, the
 * caller copies every piece itself and nothing waits for the helper.
 *
 * A job's state word holds its generation and where the helper stands: the caller opens the
 * job; the helper joins it (OPEN -> JOINED) or finds it closed; the caller, once no piece is
 * left to take, closes an unjoined job (OPEN -> CLOSED) or waits until the helper has left
 * (LEFT): the copy into the target is complete when the call returns, as a put's source may
 * be reused and the target rewritten at once. The helper keeps off the caller's CPU (its
 * affinity leaves that one out: a wake-up would often put it next to its waker), where it
 * could only take turns with the caller. It spins for COPY_SPIN_NS after a job, so a stream
 * of large puts keeps it awake, and then sleeps on a futex; a job of COPY_WAKE_MIN bytes or
 * more wakes it. A helper that does not pay is left out for a while (COPY_PROBE).
 * SHMEM_COPY_HELPER=0 turns it off; =slow makes the helper pause 2 ms before each piece it
 * takes, so that tests see callers wait for it (and never leaves it out).
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
/* The helper is used while it pays. Every COPY_PROBE-th job the caller copies alone, which
 * keeps a running estimate of its own rate (solo_ps: picoseconds per byte). If the jobs shared
 * with the helper since the last probe took longer than the caller alone would have, the
 * helper is left out for COPY_OFF_NS (those jobs refresh the estimate). At times the two CPUs
 * of a VM reach each other's caches slowly, or the helper's CPU is busy with another process
 * and the helper loses it in the middle of a piece: the caller then waits for that piece, and
 * one CPU alone is faster. */
#define COPY_PROBE 64
#define COPY_OFF_NS 50000000u

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
    _Atomic size_t next; /* the next piece to take */
    uint64_t off_until; /* no helper before then */
    uint64_t solo_ps;   /* the caller's own copy rate, ps per byte (0: not known yet) */
    uint64_t win_ns, win_alone_ns; /* shared jobs since the last probe: took, alone would take */
    unsigned long jobs, shared, backoffs; /* for SHMEM_DEBUG */
} cp = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Copy pieces until none is left; how many bytes this thread copied. */
static size_t take_pieces(bool helper)
{
    size_t bytes = 0;
    for (size_t i; (i = atomic_fetch_add(&cp.next, 1)) < cp.pieces;) {
        size_t off = i * COPY_PIECE, n = cp.len - off < COPY_PIECE ? cp.len - off : COPY_PIECE;
        if (helper && shm.copy_helper == 2) { /* SHMEM_COPY_HELPER=slow, for the tests */
            struct timespec ts = { 0, 2000000 };
            nanosleep(&ts, NULL);
        }
        memcpy(cp.dst + off, cp.src + off, n);
        bytes += n;
    }
    return bytes;
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
    uint64_t t0 = shm_now_ns();
    if (!cp.started || t0 < cp.off_until || (shm.copy_helper != 2 && cp.jobs++ % COPY_PROBE == 0)) {
        memcpy(dst, src, len);
        if (cp.started) { /* a probe, or left out: how fast are we alone? */
            uint64_t now = shm_now_ns(), ps = (now - t0) * 1000 / len;
            cp.solo_ps = cp.solo_ps ? (3 * cp.solo_ps + ps) / 4 : ps;
            if (cp.win_ns > cp.win_alone_ns) { /* the helper did not pay since the last probe */
                cp.off_until = now + COPY_OFF_NS;
                cp.backoffs++;
            }
            cp.win_ns = cp.win_alone_ns = 0;
        }
        pthread_mutex_unlock(&cp.lock);
        return;
    }
    cp.dst = dst;
    cp.src = src;
    cp.len = len;
    cp.pieces = (len + COPY_PIECE - 1) / COPY_PIECE;
    atomic_store_explicit(&cp.cpu, sched_getcpu(), memory_order_relaxed);
    atomic_store(&cp.next, 0);
    uint64_t open = ((atomic_load(&cp.state) >> 2) + 1) << 2 | ST_OPEN;
    atomic_store_explicit(&cp.state, open, memory_order_release);
    if (len >= COPY_WAKE_MIN && atomic_load(&cp.sleeping)) {
        atomic_fetch_add(&cp.wake, 1);
        shm_futex_wake(&cp.wake);
    }
    size_t mine = take_pieces(false);
    uint64_t s = open;
    /* The helper finishes its last piece in a microsecond or two, unless the scheduler has
     * put it on our CPU since it joined: then it needs our CPU to finish. */
    if (!atomic_compare_exchange_strong(&cp.state, &s, (open & ~UINT64_C(3)) | ST_CLOSED) && ++cp.shared)
        for (unsigned spins = 0; (atomic_load_explicit(&cp.state, memory_order_acquire) & 3) != ST_LEFT; spins++) {
            if (spins < 2000)
                shm_relax();
            else
                sched_yield();
        }
    if (mine < len && cp.solo_ps) { /* the helper copied some: what did that save? */
        cp.win_ns += shm_now_ns() - t0;
        cp.win_alone_ns += cp.solo_ps * len / 1000;
    }
    pthread_mutex_unlock(&cp.lock);
}

void shm_copy_fini(void)
{
    if (cp.jobs)
        shm_debug("large copies: %lu, %lu of them shared with the helper thread; it was left "
                  "out %lu times for not paying", cp.jobs, cp.shared, cp.backoffs);
    if (!cp.started)
        return;
    atomic_store(&cp.stop, true);
    atomic_fetch_add(&cp.wake, 1);
    shm_futex_wake(&cp.wake);
    pthread_join(cp.tid, NULL);
    cp.started = false;
    atomic_store(&cp.stop, false);
}
