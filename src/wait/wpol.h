/*
 * The wait policy (wpol.c): how every thread of ntblend waits for memory that another thread,
 * process or device model changes — barriers, quiet, the relays, NVMe completions, the device
 * models' doorbells, the DMA engines, the agent's event words. One policy, in three phases:
 *
 *   spin   look at the condition with a pause in between, for as long as waits at this site
 *          have recently taken (learnt per site, at most spin_max_ns); none with one CPU to run
 *          on, or when the thread waited for needs this CPU (how->needs_cpu);
 *          the first few looks are pauses alone, with no clock (most short waits end there);
 *   yield  sched_yield between looks while that lets someone else run (the thread waited for
 *          may be the one); yields that come straight back say nobody wanted the CPU, and a
 *          few that ran others without the change coming say it is not the one: the wait
 *          moves on;
 *   sleep  a futex on a word the waker bumps (or the caller's own sleep, or a nap that grows,
 *          from a quarter of what such waits at this site lately took when others want the
 *          CPU), counted in a sleepers
 *          word so that a waker makes the system call only when someone sleeps.
 *
 * It lives below every layer (a static library of its own: the fabric, libntblend, libshmem,
 * libntbnvme and the agent link it) and knows nothing of them. docs/benchmarks.md, *The wait
 * policy*, says why each threshold is what it is.
 */
#ifndef NTBLEND_WPOL_H
#define NTBLEND_WPOL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* A place that waits, with what it has learnt: one per call site (static), process-local.
 * WPOL_SITE fills in the name and ceilings; the rest starts at zero. */
struct wpol_site {
    const char *name;
    uint32_t spin_max_ns;  /* the spin's ceiling (0: never spin) */
    uint32_t yield_max_ns; /* how long at most to yield before sleeping (0: never yield) */
    uint32_t fast_yields;  /* yields in a row that ran nobody and end the phase (0: 8); more
                            * where the thread waited for runs on another CPU and will come
                            * soon, so that a wait does not sleep (a wake-up costs both sides
                            * tens of µs in a VM) for want of a few µs */
    uint32_t slow_yields;  /* yields in one wait that ran others without the change coming
                            * and end the phase (0: 4); more where the threads that run are
                            * the ones waited for, each needing a turn (PEs crowded on a CPU
                            * at a barrier), so that a wait does not sleep while they take it */
    bool fixed;            /* spin to the ceiling every time, learn nothing: for a caller that
                            * decides itself whether this site spins (its own measurements) */
    /* learnt */
    _Atomic uint32_t spin_ns; /* the spin budget now */
    _Atomic uint32_t waits;   /* waits so far (wraps): every 16th spins longer, every 64th to
                               * the ceiling */
    _Atomic uint32_t nap_ns;  /* a waker-less wait's first nap when others want the CPU: a
                               * quarter of how long those waits lately took, so that a crowd of
                               * nappers waiting for a thread that needs their CPUs does not
                               * wake every few µs */
    /* what happened, for tests and NTBLEND_WAIT_DEBUG */
    _Atomic uint64_t n_waits, n_spun, n_yielded, n_slept, n_yields, n_sleeps;
    _Atomic uint64_t n_timed_out; /* futex sleeps that ran their full length: nobody woke them */
};
/* fast_yields for a wait whose peer runs on another CPU and answers within µs, and which
 * would make that peer sleep too by sleeping (an NVMe driver and its device model: the next
 * command comes late): 256 yields that run nobody, 60-100 µs on a 2-CPU VM, about what a
 * sleep costs the two of them together. */
#define WPOL_PEER_YIELDS 256u
#define WPOL_SITE(nm, spin_max, yield_max) { .name = (nm), .spin_max_ns = (spin_max), .yield_max_ns = (yield_max) }
#define WPOL_SITE_FIXED(nm, spin, yield_max) { .name = (nm), .spin_max_ns = (spin), .yield_max_ns = (yield_max), .fixed = true }

/* How a wait sleeps and what else it looks at. Everything may be 0 / NULL. */
struct wpol_how {
    /* The condition, for wpol_wait, and for the sleep phase's last look after the waiter has
     * counted itself in *sleepers (needed when the waker bumps *word only for sleepers). */
    bool (*ready)(void *arg);
    void *arg;
    /* Sleep on this futex word (shared between processes unless private is set); the waker
     * bumps it and wakes. *sleepers is incremented around the sleep. */
    _Atomic uint32_t *word;
    _Atomic uint32_t *sleepers;
    bool private_futex;
    /* Or sleep this way (at most max_ns; returns early when woken): an interrupt wait. A
     * negative return ends the wait with it. */
    int (*sleep)(void *arg, uint64_t max_ns);
    /* Does the thread we wait for need this CPU to get on (it runs here, or last did)? Then the
     * wait yields at once instead of spinning. */
    bool (*needs_cpu)(void *arg);
    /* needs_cpu says more: that thread is on this CPU's run queue now (its hint is withdrawn
     * while it sleeps: how->asleep on its side). Then a yield that runs nobody means the
     * scheduler will not pick it while this thread is runnable (EEVDF runs only threads that
     * have not had more than their share, and one that spun waiting for this CPU has), and
     * the wait sleeps, which leaves it the CPU at once. */
    bool needs_cpu_sleep;
    /* Told just before each sleep of the sleep phase (true) and just after it (false): for a
     * waiter whose own hint others read (a driver's CPU, which its device model yields to). */
    void (*asleep)(void *arg, bool asleep);
    /* Called between sleeps (a health check, a look for an exit); non-zero ends the wait with
     * that value. */
    int (*idle)(void *arg);
    /* Some wakers publish the change and look at *sleepers with no store-load fence between
     * (wpol_asym_init): after counting itself a sleeper, the waiter fences every CPU that runs
     * one of them (wpol_asym_fence) before its last look. */
    bool asym;
    /* Pauses between two looks in the spin (0: 1; a power of two up to 16, others rounded
     * down). A look at a line that another CPU keeps writing takes it back from the writer,
     * which pays a transfer for its next write: where several writes are coming (an NVMe CQ at
     * queue depth 32, four entries a line), looking at every pause made the device model's
     * writes that much slower. */
    uint8_t look_pauses;
    uint64_t deadline_ns; /* absolute (wpol_now_ns); 0: none. Past it: -ETIMEDOUT */
    uint64_t sleep_ns;    /* longest single sleep (0: 100 ms), so that idle and the deadline are seen */
};

/* One wait in progress, on the waiter's stack (wpol_begin ... wpol_pause ... wpol_end). */
struct wpol {
    struct wpol_site *site;
    const struct wpol_how *how;
    uint64_t t0, now, phase_end, nap_ns, next_idle;
    uint32_t budget, n, fast_yields, slow_yields;
    uint32_t look_pauses, clock_mask; /* how->look_pauses (1..16); a clock read when
                                       * (n & clock_mask) == 0 */
    uint8_t phase;
    bool spun, yielded, slept, ran_other, napped;
    bool quick; /* in the first looks, before the clock starts */
    bool cpu_skip; /* the spin was skipped for needs_cpu, with needs_cpu_sleep */
};

/* The clock every layer uses (CLOCK_MONOTONIC, ns). */
uint64_t wpol_now_ns(void);
/* A spin loop's pause instruction. */
static inline void wpol_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* The whole wait: until how->ready(how->arg) holds (0), the deadline passes (-ETIMEDOUT), or
 * sleep or idle end it with their value. */
int wpol_wait(struct wpol_site *s, const struct wpol_how *how);

/* The same, for loops the caller keeps: wpol_begin, then per turn read the word (seen, when
 * there is one), look at the condition, and wpol_pause(seen) if it does not hold yet (non-zero:
 * the wait ends with that); wpol_end once it holds (the site learns how long it took). */
void wpol_begin(struct wpol *w, struct wpol_site *s, const struct wpol_how *how);
int wpol_pause(struct wpol *w, uint32_t seen);
void wpol_end(struct wpol *w);

/* A site's storage ends (a thread's stack, a freed queue): with NTBLEND_WAIT_DEBUG its line is
 * printed now rather than at exit, when it would be read from memory that is gone. A site that
 * waited in no wait, or with the report off, costs nothing here. */
void wpol_site_done(struct wpol_site *s);

/* The waker's side: bump *word, and FUTEX_WAKE it when *sleepers says someone sleeps (a NULL
 * sleepers: always). The caller's change comes first, seq_cst. */
void wpol_wake(_Atomic uint32_t *word, _Atomic uint32_t *sleepers, bool private_futex);

/* Asymmetric fences, for a waker on a hot path. A waker publishes its change and then looks
 * at the sleepers word; between the two, a store-load fence (a locked instruction) stalls it
 * until the line it stored to is its own, a cache-line transfer (~70 ns of a 2-PE barrier of
 * ~260 on a 2-CPU VM). A waker may leave that fence out, with no more than a compiler barrier
 * between the store and the look, if its process called wpol_asym_init (true: registered) and
 * every sleeper it may have to wake waits with how->asym: a sleeper that counted itself then
 * runs wpol_asym_fence, a full barrier on every CPU that runs a registered thread (Linux's
 * membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED; a thread that is not running passed one when
 * it was switched out). Either the waker's store came before that barrier, and the sleeper's
 * last look sees it, or its look at the sleepers word came after, and sees the sleeper.
 * wpol_asym_init is false where the kernel lacks the command (Linux < 4.16, or a seccomp
 * filter): wakers keep their fence then. wpol_asym_fence returns 0 or -errno; a sleeper whose
 * fence failed sleeps at most 1 ms at a time. */
bool wpol_asym_init(void);
int wpol_asym_fence(void);

/* Futexes on shared (or private) memory: waits return 0 (woken, or the word was not `expected`),
 * -ETIMEDOUT or -EINTR; timeout_ns < 0 waits for ever. */
int wpol_futex_wait(_Atomic uint32_t *addr, uint32_t expected, int64_t timeout_ns, bool private_futex);
void wpol_futex_wake(_Atomic uint32_t *addr, int n, bool private_futex);

/* What the policy sees of the machine: CPUs this thread may run on (re-read every 100 ms),
 * and whether a spin lately lost its CPU for a while (then spins stay short for 50 ms). */
int wpol_cpus(void);
bool wpol_contended(void);

/* NTBLEND_WAIT=adaptive (the default) | spin (spin to each site's ceiling, never learn) |
 * sleep (no spin, no yield): read once per process. */
enum wpol_mode { WPOL_ADAPTIVE, WPOL_SPIN, WPOL_SLEEP };
enum wpol_mode wpol_mode(void);

#endif
