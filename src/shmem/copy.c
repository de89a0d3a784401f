/*
 * Large copies to and from a mapped PE (a put or get through an NTB window, or to a PE on our
 * own host): the calling thread and one helper thread copy COPY_PIECE pieces, the caller
 * taking them from the front and the helper from the back (cp.left), so a large put moves at
 * the rate of two CPUs instead of one when the machine has a CPU to spare (not with more PEs
 * than CPUs, where the helper would only take the CPU of a PE). Work is taken, not handed
 * out: when the helper is late, or asleep, the caller copies every piece itself.
 *
 * A job's state word holds its generation and where the helper stands: the caller opens the
 * job; the helper joins it (OPEN -> JOINED) or finds it closed; the caller, once no piece is
 * left to take, closes an unjoined job (OPEN -> CLOSED) or waits until the helper has left
 * (LEFT): the copy into the target is complete when the call returns, as a put's source may
 * be reused and the target rewritten at once. The helper keeps off the caller's CPU (its
 * affinity leaves that one out: a wake-up would often put it next to its waker), where it
 * could only take turns with the caller. After a job it waits by the wait policy (src/wait),
 * spinning up to COPY_SPIN_NS, so a stream of large puts keeps it awake, and then sleeps on a
 * futex; a job of COPY_WAKE_MIN bytes or more wakes it. SHMEM_COPY_HELPER=0 turns it off; =slow makes the helper pause 2 ms before
 * each piece it takes, so that tests see callers wait for it.
 *
 * Whether the helper helps is measured, not assumed. Two threads can copy a large block more
 * slowly than one: when another program keeps the second CPU busy, and when the two run on
 * the two hardware threads of one core, where a VM's host may put its two CPUs for a few
 * seconds. So every job is timed, per size class of puts and of gets (struct pick: a get
 * reads through the window, a put writes into it), and now and then the other way is tried.
 * With the helper, one job in PICK_ALONE_EVERY is copied alone, and when it beats the helped
 * jobs' moving average by PICK_GO_ALONE the class goes alone. Alone, the helper is tried
 * PICK_HELP_FIRST jobs later, then ever more rarely (the interval doubles up to
 * PICK_HELP_MAX), for two jobs: the first wakes it, the second is timed (or a later one while
 * it is still waking, up to PICK_WAKE_JOBS), and the helper takes the class back when it
 * beats the moving average alone by PICK_TAKE_BACK: a tie stays alone. While a class goes
 * alone the helper does not spin (cp.spin) on a hardware thread the caller may need. Where the
 * helper wins, it wins by far (1.6-1.9x), so a wrong choice is undone at the next try, and a
 * try alone costs the class about one job's worth of time in PICK_ALONE_EVERY.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "copy_pick.h"
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
    _Atomic bool spin;      /* the helper spins after a job (false while copies go alone) */
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
    struct pick pick[2][PICK_CLASSES]; /* puts, gets */
    unsigned long jobs, shared, solo, turns; /* for SHMEM_DEBUG */
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

/* The helper's waits: for the next job of a stream, spinning for COPY_SPIN_NS (while copies
 * take the helper, cp.spin) and never on the caller's CPU; then asleep on cp.wake. The spin is
 * fixed, not learnt: whether the helper spins at all is the size classes' measured choice,
 * and their tries of the helper count on it being awake for the job after the one that woke it. */
static struct wpol_site helper_spin_site = WPOL_SITE_FIXED("shmem copy helper", COPY_SPIN_NS, 0);
static struct wpol_site helper_sleep_site = WPOL_SITE("shmem copy helper (copies alone)", 0, 0);
/* The caller's wait for the helper's last piece: a microsecond or two, unless the scheduler
 * has put the helper on the caller's CPU since it joined; nothing wakes the caller. */
static struct wpol_site join_site = WPOL_SITE("shmem copy join", 20000, 10000000);

struct helper_wait {
    uint64_t done_gen;
    int caller;
};

static bool job_or_stop(void *arg)
{
    struct helper_wait *h = arg;
    return atomic_load_explicit(&cp.state, memory_order_acquire) >> 2 != h->done_gen ||
           atomic_load(&cp.stop);
}

static bool on_caller_cpu(void *arg) { return sched_getcpu() == ((struct helper_wait *)arg)->caller; }

static void *helper(void *arg)
{
    (void)arg;
    cpu_set_t allowed;
    if (pthread_getaffinity_np(pthread_self(), sizeof allowed, &allowed))
        return NULL;
    int avoided = -2;
    struct helper_wait h = { .done_gen = atomic_load(&cp.state) >> 2 };
    struct wpol_how how = { .ready = job_or_stop, .arg = &h, .word = &cp.wake,
                            .sleepers = &cp.sleeping, .private_futex = true,
                            .needs_cpu = on_caller_cpu, .sleep_ns = 1000000000 };
    while (!atomic_load(&cp.stop)) {
        uint64_t s = atomic_load_explicit(&cp.state, memory_order_acquire);
        int caller = atomic_load_explicit(&cp.cpu, memory_order_relaxed);
        if (s >> 2 != h.done_gen) {
            uint64_t open = s & ~UINT64_C(3);
            if ((s & 3) == ST_OPEN && avoid_cpu(caller, &allowed, &avoided) && sched_getcpu() != caller &&
                atomic_compare_exchange_strong(&cp.state, &open, open | ST_JOINED)) {
                take_pieces(true);
                atomic_store_explicit(&cp.state, open | ST_LEFT, memory_order_release);
            }
            h.done_gen = s >> 2;
            continue;
        }
        h.caller = caller;
        wpol_wait(atomic_load_explicit(&cp.spin, memory_order_relaxed) ? &helper_spin_site
                                                                        : &helper_sleep_site,
                  &how);
    }
    return NULL;
}

static bool helper_left(void *arg)
{
    (void)arg;
    return (atomic_load_explicit(&cp.state, memory_order_acquire) & 3) == ST_LEFT;
}

/* The copy with the helper: the caller's part of the job, and the wait for the helper's. */
static void copy_helped(void *dst, const void *src, size_t len, bool wake)
{
    cp.dst = dst;
    cp.src = src;
    cp.len = len;
    cp.pieces = (len + COPY_PIECE - 1) / COPY_PIECE;
    atomic_store_explicit(&cp.cpu, sched_getcpu(), memory_order_relaxed);
    atomic_store(&cp.left, (uint64_t)cp.pieces); /* front 0, back pieces */
    uint64_t open = ((atomic_load(&cp.state) >> 2) + 1) << 2 | ST_OPEN;
    /* seq_cst, not release: the helper counts itself in cp.sleeping and then looks at the
     * state, we store the state and then look at cp.sleeping; a release store could pass
     * that load (x86 lets a store wait in its buffer), both would miss the other, and the
     * helper would sleep through the job (up to its 1 s timeout). */
    atomic_store(&cp.state, open);
    if (wake && atomic_load(&cp.sleeping)) {
        atomic_fetch_add(&cp.wake, 1);
        wpol_futex_wake(&cp.wake, 1, true);
    }
    take_pieces(false);
    uint64_t s = open;
    if (!atomic_compare_exchange_strong(&cp.state, &s, (open & ~UINT64_C(3)) | ST_CLOSED) && ++cp.shared) {
        static const struct wpol_how join = { .ready = helper_left };
        wpol_wait(&join_site, &join);
    }
}

static struct pick *pick_of(size_t len, bool get)
{
    unsigned c = 0;
    for (size_t l = len / COPY_MIN; l > 1 && c < PICK_CLASSES - 1; l >>= 1)
        c++;
    return &cp.pick[get][c];
}

void shm_copy(void *dst, const void *src, size_t len, bool get)
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
    struct pick *pk = pick_of(len, get);
    struct pick_job job = pick_next(pk, atomic_load(&cp.sleeping));
    bool trying = job.trying, helped = job.helped, timed = job.timed;
    /* While the class goes alone the helper does not spin, which beside a copy alone would
     * slow it down on one core's two hardware threads (a try alone lets it spin: waking it
     * for the next job would cost that job the helper); one that did not spin may sleep. */
    bool spun = atomic_exchange_explicit(&cp.spin, !pk->go_alone || trying, memory_order_relaxed);
    cp.jobs++;
    uint64_t t0 = shm_now_ns();
    if (helped) {
        copy_helped(dst, src, len, len >= COPY_WAKE_MIN || !spun);
    } else {
        cp.solo++;
        memcpy(dst, src, len);
    }
    if (timed && pick_learn(pk, helped, (double)len / (double)(shm_now_ns() - t0 + 1)))
        cp.turns++;
    pthread_mutex_unlock(&cp.lock);
}

void shm_copy_fini(void)
{
    if (cp.jobs)
        shm_debug("large copies: %lu, %lu of them shared with the helper thread, %lu copied alone "
                  "(%lu changes of the choice)", cp.jobs, cp.shared, cp.solo, cp.turns);
    for (int g = 0; g < 2; g++)
        for (int c = 0; c < PICK_CLASSES; c++) {
            const struct pick *pk = &cp.pick[g][c];
            if (pk->jobs)
                shm_debug("large %s of %u KiB or more: %u, lately %.1f GB/s with the helper, "
                          "%.1f alone, now %s", g ? "gets" : "puts", (COPY_MIN >> 10) << c,
                          pk->jobs, pk->helped, pk->alone,
                          pk->go_alone ? "alone" : "with the helper");
        }
    if (!cp.started)
        return;
    atomic_store(&cp.stop, true);
    wpol_wake(&cp.wake, NULL, true);
    pthread_join(cp.tid, NULL);
    cp.started = false;
    atomic_store(&cp.stop, false);
}
