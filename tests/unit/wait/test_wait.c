/*
 * The wait policy (src/wait/wpol.c): no wake-up is lost under any waker protocol (a bump for
 * sleepers only, a bump always, and a waker with no fence whose sleepers fence for it), waits end
 * at their deadline or when idle or their own sleep says so, a waiter whose peer needs its CPU
 * does not spin, sites learn from their waits (a fixed one does not), a wait's first looks are
 * pauses alone (spaced as the caller asks), a site's counts of yields that run nobody and of
 * yields that run others end its yield phase, and with one CPU to run on
 * (tests/system/test_wait_pinned.sh runs this under taskset) a waiter never spins, however long
 * its site's ceiling, so the thread it waits for gets the CPU. Behaviour only: no timing is
 * asserted.
 *
 * `test_wait mode` prints wpol_mode() (for NTBLEND_WAIT's check in test_wait_pinned.sh).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "wpol.h"

#define ROUNDS 2000

static void nap_us(long us)
{
    struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };
    nanosleep(&ts, NULL);
}

/* ---------------------------------------------------------------- ping-pong */

/* Two threads take turns: `turn` says whose (0 or 1); each waits for its own. */
enum waker { BUMP_FOR_SLEEPERS, BUMP_ALWAYS, NO_FENCE };

struct pp {
    _Atomic uint64_t turn;   /* round * 2 + side */
    _Atomic uint32_t word;   /* futex word */
    /* In a line of its own, as shmem's: a waker's look at it then hits its cache while its
     * store to turn is still on its way, the widest window a missing fence leaves. */
    _Alignas(64) _Atomic uint32_t sleepers;
    _Alignas(64) bool bump_always; /* the waker bumps word every time (no sleepers counted) */
    bool no_fence;           /* the waker stores turn and looks at sleepers with no fence
                              * between (wpol_asym_init); the waiter fences for it (how->asym) */
    struct wpol_site *site;
    uint64_t want[2];
};

struct pp_arg {
    struct pp *p;
    int side;
};

static struct pp_arg *ready_arg; /* unused: each waiter has its own */

static bool my_turn(void *arg)
{
    struct pp_arg *a = arg;
    uint64_t t = atomic_load(&a->p->turn);
    return t % 2 == (uint64_t)a->side && t >= a->p->want[a->side];
}

static void pass(struct pp *p, uint64_t next)
{
    if (p->no_fence) {
        atomic_store_explicit(&p->turn, next, memory_order_release);
        atomic_signal_fence(memory_order_seq_cst);
        if (atomic_load_explicit(&p->sleepers, memory_order_relaxed)) {
            atomic_fetch_add(&p->word, 1);
            wpol_futex_wake(&p->word, 1 << 30, true);
        }
        return;
    }
    atomic_store(&p->turn, next);
    if (p->bump_always) {
        wpol_wake(&p->word, NULL, true);
    } else {
        /* Bump only for sleepers, as shmem's wake-ups do: the waiter counts itself first. */
        if (atomic_load(&p->sleepers)) {
            atomic_fetch_add(&p->word, 1);
            wpol_futex_wake(&p->word, 1 << 30, true);
        }
    }
}

static void *player(void *arg)
{
    struct pp_arg *a = arg;
    struct pp *p = a->p;
    struct wpol_how how = { .ready = my_turn, .arg = a, .word = &p->word,
                            .sleepers = p->bump_always ? NULL : &p->sleepers,
                            .private_futex = true, .asym = p->no_fence,
                            .sleep_ns = 10000000000ull };
    for (uint64_t r = 0; r < ROUNDS; r++) {
        p->want[a->side] = r * 2 + (uint64_t)a->side;
        int rc;
        if (p->bump_always) {
            /* The caller's own loop: the word read before each look. */
            struct wpol w;
            wpol_begin(&w, p->site, &how);
            for (rc = 0; !rc;) {
                uint32_t seen = atomic_load(&p->word);
                if (my_turn(a))
                    break;
                rc = wpol_pause(&w, seen);
            }
            wpol_end(&w);
        } else {
            rc = wpol_wait(p->site, &how);
        }
        if (rc)
            return (void *)(intptr_t)rc;
        pass(p, r * 2 + (uint64_t)a->side + 1);
    }
    return NULL;
}

static void ping_pong(struct wpol_site *site, enum waker how)
{
    struct pp p = { .bump_always = how == BUMP_ALWAYS, .no_fence = how == NO_FENCE, .site = site };
    struct pp_arg a[2] = { { &p, 0 }, { &p, 1 } };
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, player, &a[i]), 0);
    for (int i = 0; i < 2; i++) {
        void *rc;
        pthread_join(t[i], &rc);
        assert_int_equal((int)(intptr_t)rc, 0);
    }
    assert_int_equal(atomic_load(&p.turn), 2 * ROUNDS);
    (void)ready_arg;
}

/* Sleep at once, every time: a lost wake-up would leave a waiter asleep for 10 s per loss,
 * and its sleep counted as one that ran out. */
static void test_sleepers_protocol(void **state)
{
    (void)state;
    static struct wpol_site s = WPOL_SITE("test sleepers", 0, 0);
    ping_pong(&s, BUMP_FOR_SLEEPERS);
    assert_true(s.n_sleeps > 0);
    assert_int_equal(s.n_spun, 0);
    assert_int_equal(s.n_yields, 0);
    assert_int_equal(s.n_timed_out, 0);
}

static void test_bump_always_protocol(void **state)
{
    (void)state;
    static struct wpol_site s = WPOL_SITE("test bump", 0, 0);
    ping_pong(&s, BUMP_ALWAYS);
    assert_true(s.n_sleeps > 0);
    assert_int_equal(s.n_timed_out, 0);
}

/* The fence-less wakers' tests skip where the kernel cannot fence for them. */
static void need_asym(void)
{
    if (!wpol_asym_init()) {
        print_message("membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) is not available here\n");
        skip();
    }
}

/* Wakers with no fence of their own (wpol_asym_init), whose waiters all sleep at once. */
static void test_no_fence_protocol(void **state)
{
    (void)state;
    need_asym();
    static struct wpol_site s = WPOL_SITE("test no fence", 0, 0);
    ping_pong(&s, NO_FENCE);
    assert_true(s.n_sleeps > 0);
    assert_int_equal(s.n_timed_out, 0);
}

/* The same race, made likely: the waiter says it is about to wait for round r, and the waker
 * sees that, pauses 0-2 times (the spread that lines the two up most often on a 2-CPU VM),
 * stores r and looks at the sleepers word with no fence, while the waiter counts itself a
 * sleeper and looks at the value. Each sleep lasts 1 s at most: one that runs out was a lost
 * wake-up. The waiter's fence keeps their count at 0; RACE_FENCE=0 leaves it out, and then
 * 2-25 of the 20 000 rounds lose their wake-up (measured on a 2-CPU VM). */
#define RACE_ROUNDS 20000

struct race {
    _Atomic uint64_t armed, value;
    _Alignas(64) _Atomic uint32_t word;
    _Alignas(64) _Atomic uint32_t sleepers;
};

static bool race_ready(void *arg)
{
    struct race *r = arg;
    return atomic_load_explicit(&r->value, memory_order_acquire) >= atomic_load(&r->armed);
}

static void *race_waker(void *arg)
{
    struct race *r = arg;
    unsigned seed = 1;
    for (uint64_t i = 1; i <= RACE_ROUNDS; i++) {
        while (atomic_load_explicit(&r->armed, memory_order_acquire) < i)
            wpol_relax();
        seed = seed * 1103515245u + 12345u;
        for (unsigned d = (seed >> 16) % 3; d; d--)
            wpol_relax();
        atomic_store_explicit(&r->value, i, memory_order_release);
        atomic_signal_fence(memory_order_seq_cst);
        if (atomic_load_explicit(&r->sleepers, memory_order_relaxed)) {
            atomic_fetch_add(&r->word, 1);
            wpol_futex_wake(&r->word, 1 << 30, true);
        }
    }
    return NULL;
}

static void test_no_fence_race(void **state)
{
    (void)state;
    need_asym();
    const char *e = getenv("RACE_FENCE");
    static struct wpol_site s = WPOL_SITE("test no fence race", 0, 0);
    static struct race r;
    struct wpol_how how = { .ready = race_ready, .arg = &r, .word = &r.word,
                            .sleepers = &r.sleepers, .private_futex = true,
                            .asym = !(e && !strcmp(e, "0")), .sleep_ns = 1000000000ull };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, race_waker, &r), 0);
    for (uint64_t i = 1; i <= RACE_ROUNDS; i++) {
        atomic_store(&r.armed, i);
        assert_int_equal(wpol_wait(&s, &how), 0);
    }
    pthread_join(t, NULL);
    print_message("%llu of %d waits slept, %llu sleeps ran out\n", (unsigned long long)s.n_slept,
                  RACE_ROUNDS, (unsigned long long)s.n_timed_out);
    assert_int_equal(s.n_timed_out, 0);
}

/* The whole policy, spin and yield included. */
static void test_adaptive_ping_pong(void **state)
{
    (void)state;
    static struct wpol_site s = WPOL_SITE("test adaptive", 20000, 200000);
    ping_pong(&s, BUMP_FOR_SLEEPERS);
    assert_true(s.n_waits > 0);
    if (wpol_mode() == WPOL_ADAPTIVE)
        assert_true(s.spin_ns >= 1000 && s.spin_ns <= 20000);
}

/* ---------------------------------------------------------------- endings */

static bool never(void *arg)
{
    (void)arg;
    return false;
}

static void test_deadline(void **state)
{
    (void)state;
    static struct wpol_site s = WPOL_SITE("test deadline", 2000, 2000);
    _Atomic uint32_t word = 0;
    struct wpol_how how = { .ready = never, .word = &word, .private_futex = true,
                            .deadline_ns = wpol_now_ns() + 20000000u };
    assert_int_equal(wpol_wait(&s, &how), -ETIMEDOUT);
    assert_true(wpol_now_ns() >= how.deadline_ns);
    assert_int_equal(s.n_waits, 1);
}

static int idles;
static int idle_cancel(void *arg)
{
    (void)arg;
    return ++idles == 3 ? -ECANCELED : 0;
}

static void test_idle_ends(void **state)
{
    (void)state;
    static struct wpol_site s = WPOL_SITE("test idle", 0, 0);
    struct wpol_how how = { .ready = never, .idle = idle_cancel, .sleep_ns = 2000000 };
    idles = 0;
    assert_int_equal(wpol_wait(&s, &how), -ECANCELED);
    assert_int_equal(idles, 3);
}

static int slept;
static int my_sleep(void *arg, uint64_t max_ns)
{
    (void)arg;
    assert_true(max_ns > 0 && max_ns <= 5000000u);
    return ++slept == 4 ? -EIO : 0;
}

static void test_own_sleep(void **state)
{
    (void)state;
    static struct wpol_site s = WPOL_SITE("test own sleep", 1000, 0);
    struct wpol_how how = { .ready = never, .sleep = my_sleep, .sleep_ns = 5000000 };
    slept = 0;
    assert_int_equal(wpol_wait(&s, &how), -EIO);
    assert_int_equal(slept, 4);
    assert_int_equal(s.n_sleeps, 4);
}

/* ---------------------------------------------------------------- a flag set later */

struct later {
    _Atomic uint32_t flag, word, sleepers;
    long after_us;
};

static bool flag_set(void *arg) { return atomic_load(&((struct later *)arg)->flag) != 0; }

static void *set_later(void *arg)
{
    struct later *l = arg;
    nap_us(l->after_us);
    atomic_store(&l->flag, 1);
    wpol_wake(&l->word, &l->sleepers, true);
    return NULL;
}

static int wait_flag(struct wpol_site *s, struct wpol_how *how, long after_us)
{
    struct later l = { .after_us = after_us };
    how->ready = flag_set;
    how->arg = &l;
    if (how->word) {
        how->word = &l.word;
        how->sleepers = &l.sleepers;
        how->private_futex = true;
    }
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, set_later, &l), 0);
    int rc = wpol_wait(s, how);
    pthread_join(t, NULL);
    assert_true(flag_set(&l));
    return rc;
}

static bool always(void *arg)
{
    (void)arg;
    return true;
}

/* A peer that needs our CPU gets it: the wait does not spin. */
static void test_needs_cpu(void **state)
{
    (void)state;
    static struct wpol_site s = WPOL_SITE("test needs cpu", 50000000, 200000);
    _Atomic uint32_t dummy;
    /* A wait whose flag is already set at its first look (this thread ran late on a busy
     * machine) returns without waiting and is not counted: go on until five were waits. */
    for (int i = 0; s.n_waits < 5 && i < 1000; i++) {
        struct wpol_how how = { .word = &dummy, .needs_cpu = always };
        assert_int_equal(wait_flag(&s, &how, 2000), 0);
    }
    assert_int_equal(s.n_waits, 5);
    assert_int_equal(s.n_spun, 0);
}

/* needs_cpu_sleep: needs_cpu says the peer is queued on this CPU (a device model's driver,
 * which withdraws the hint while it sleeps), so a yield that runs nobody means the scheduler
 * passed the peer over, and the wait sleeps at once rather than yield on (here up to 256
 * yields that run nobody, the site's fast_yields, where nothing else wants the CPU). A yield
 * that runs others is not that, and the wait goes on yielding (at most the policy's 4 of those
 * before it sleeps anyway): so at most 5 yields per wait, where without the flag a quiet
 * machine makes hundreds. The asleep hook is told of every sleep, before and after. */
struct asleep_count {
    int in, out;
    bool now;
};

static struct asleep_count sleeps_told; /* how->arg is wait_flag's */

static void count_asleep(void *arg, bool asleep)
{
    (void)arg;
    struct asleep_count *c = &sleeps_told;
    assert_true(c->now != asleep); /* in pairs: true, then false */
    c->now = asleep;
    *(asleep ? &c->in : &c->out) += 1;
}


static void test_needs_cpu_sleep(void **state)
{
    (void)state;
    static struct wpol_site s = WPOL_SITE("test needs cpu sleep", 50000000, 20000000);
    s.fast_yields = WPOL_PEER_YIELDS;
    _Atomic uint32_t dummy;
    struct asleep_count *c = &sleeps_told;
    /* (A wait whose flag was set before its first look is not counted: see test_needs_cpu.) */
    for (int i = 0; s.n_waits < 5 && i < 1000; i++) {
        struct wpol_how how = { .word = &dummy, .needs_cpu = always, .needs_cpu_sleep = true,
                                .asleep = count_asleep };
        assert_int_equal(wait_flag(&s, &how, 2000), 0);
    }
    printf("needs_cpu_sleep: %llu waits, %llu yields, %llu sleeps\n",
           (unsigned long long)s.n_waits, (unsigned long long)s.n_yields,
           (unsigned long long)s.n_sleeps);
    assert_int_equal(s.n_waits, 5);
    assert_int_equal(s.n_spun, 0);
    assert_true(s.n_yields <= 5 * s.n_waits);
    /* (Not every wait sleeps: on a busy machine a yield that runs others may outlast the
     * 2 ms, and the wait ends awake.) */
    assert_int_equal(c->in, (int)s.n_sleeps);
    assert_int_equal(c->out, c->in);
    assert_false(c->now);
}

/* Nothing to sleep on: naps. */
static void test_nap(void **state)
{
    (void)state;
    static struct wpol_site s = WPOL_SITE("test nap", 1000, 0);
    struct wpol_how how = { 0 };
    assert_int_equal(wait_flag(&s, &how, 5000), 0);
    assert_true(s.n_sleeps > 0);
}

/* A site whose waits nap for long starts its next naps later: at a quarter of what they took
 * (at most the longest nap, 1 ms), smoothed (a quarter of the new figure joins three quarters
 * of the old), so from nothing a wait of 8 ms or more leaves a first nap of 250 us. Each nap
 * starting at 2 us instead is what
 * made thirty NVMe clients on two CPUs wake some 300 000 times a second and starve the device
 * model they waited for. A wait that ends before any nap teaches the naps nothing. */
static void test_nap_learns(void **state)
{
    (void)state;
    static struct wpol_site s = WPOL_SITE("test nap learns", 0, 0);
    struct wpol_how how = { 0 };
    assert_int_equal(s.nap_ns, 0);
    assert_int_equal(wait_flag(&s, &how, 8000), 0);
    uint32_t learnt = s.nap_ns;
    assert_int_equal(learnt, 1000000 / 4);
    /* Already set: the wait never pauses, and nothing is learnt. */
    struct later done = { .after_us = 0 };
    atomic_store(&done.flag, 1);
    how.ready = flag_set;
    how.arg = &done;
    assert_int_equal(wpol_wait(&s, &how), 0);
    assert_int_equal(s.nap_ns, learnt);
}

/* A thread that keeps a CPU busy until told to stop. */
static _Atomic bool burn_stop;
static void *burn(void *arg)
{
    (void)arg;
    while (!atomic_load_explicit(&burn_stop, memory_order_relaxed))
        wpol_relax();
    return NULL;
}

/* Long waits that sleep while nobody wants the CPU keep the budget (they say nothing about how
 * soon the change came, and a driver and its device model that both shortened their spins for
 * them would end up waking each other for every command); waits whose yields run another
 * thread bring it down; short ones that the spin catches keep it at least at its floor. */
static void test_learns(void **state)
{
    (void)state;
    if (wpol_mode() != WPOL_ADAPTIVE || wpol_cpus() < 2)
        skip();
    static struct wpol_site s = WPOL_SITE("test learn", 4000, 0);
    _Atomic uint32_t dummy;
    bool crowded = false; /* a spin of ours lost its CPU: then the budget may come down */
    for (int i = 0; i < 12; i++) {
        struct wpol_how how = { .word = &dummy };
        assert_int_equal(wait_flag(&s, &how, 3000), 0);
        crowded |= wpol_contended();
    }
    assert_true(s.n_slept > 0);
    if (!crowded)
        assert_int_equal(s.spin_ns, 4000);
    /* Now every CPU has a busy thread beside ours: a yield runs one of them. */
    int n = wpol_cpus();
    pthread_t b[64];
    n = n < 64 ? n : 64;
    atomic_store(&burn_stop, false);
    for (int i = 0; i < n; i++)
        assert_int_equal(pthread_create(&b[i], NULL, burn, NULL), 0);
    static struct wpol_site y = WPOL_SITE("test learn crowded", 4000, 100000000);
    for (int i = 0; i < 12; i++) {
        struct wpol_how how = { .word = &dummy };
        assert_int_equal(wait_flag(&y, &how, 3000), 0);
    }
    atomic_store(&burn_stop, true);
    for (int i = 0; i < n; i++)
        pthread_join(b[i], NULL);
    assert_true(y.n_yields > 0);
    assert_true(y.spin_ns < 4000);
    /* A condition that holds after a few looks ends in the spin. */
    static struct wpol_site q = WPOL_SITE("test quick", 1000000, 0);
    for (int i = 0; i < 20; i++) {
        struct wpol w;
        struct wpol_how how = { 0 };
        wpol_begin(&w, &q, &how);
        for (int looks = 0; looks < 40; looks++)
            assert_int_equal(wpol_pause(&w, 0), 0);
        wpol_end(&w);
    }
    /* A wait whose spin lost its CPU to another program yields, or naps once its budget is
     * gone (a busy machine): every one is counted, and some end in the spin. */
    assert_int_equal(q.n_waits, 20);
    assert_true(q.n_spun > 0);
    assert_true(q.spin_ns >= 1000);
}

/* A fixed site spins to its ceiling every time and learns nothing, however its waits end. */
static void test_fixed(void **state)
{
    (void)state;
    if (wpol_mode() != WPOL_ADAPTIVE || wpol_cpus() < 2)
        skip();
    static struct wpol_site s = WPOL_SITE_FIXED("test fixed", 4000, 0);
    _Atomic uint32_t dummy;
    for (int i = 0; i < 8; i++) {
        struct wpol_how how = { .word = &dummy };
        assert_int_equal(wait_flag(&s, &how, 3000), 0);
    }
    assert_true(s.n_slept > 0);
    assert_int_equal(s.spin_ns, 0);
}

/* A wait at s on a condition that never holds, ended at its first sleep: what it did. */
static struct wpol to_first_sleep(struct wpol_site *s)
{
    struct wpol w;
    wpol_begin(&w, s, NULL);
    while (!w.slept)
        assert_int_equal(wpol_pause(&w, 0), 0);
    wpol_end(&w);
    return w;
}

/* Yields that run nobody end the yield phase after the site's fast_yields in a row (8 when
 * 0): a wait that reached its first sleep made exactly that many if none of its yields ran
 * another thread, and at least that many unless 4 of them did (which also ends the phase). */
static void test_fast_yields(void **state)
{
    (void)state;
    if (wpol_mode() != WPOL_ADAPTIVE)
        skip();
    static struct wpol_site def = { .name = "test fast yields 8", .yield_max_ns = 4000000000u };
    static struct wpol_site many = { .name = "test fast yields 40", .yield_max_ns = 4000000000u,
                                     .fast_yields = 40 };
    struct wpol_site *sites[] = { &def, &many };
    const uint64_t want[] = { 8, 40 };
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < 10; i++) {
            uint64_t before = sites[k]->n_yields;
            struct wpol w = to_first_sleep(sites[k]);
            uint64_t yields = sites[k]->n_yields - before;
            assert_false(w.spun); /* no spin budget: straight to the yields */
            if (!w.ran_other)
                assert_int_equal(yields, want[k]);
            else if (w.slow_yields < 4)
                assert_true(yields >= want[k]);
        }
    }
}

/* The first looks of a wait that may spin are pauses alone: a wait that ends within them reads
 * no clock, is counted as spun and brings the budget an eighth of the way down to the floor
 * (a wait of no length); one that goes past them starts the policy (and is learnt from), and
 * one that may not spin starts it at once. */
static void test_quick(void **state)
{
    (void)state;
    if (wpol_mode() != WPOL_ADAPTIVE || wpol_cpus() < 2)
        skip();
    static struct wpol_site s = WPOL_SITE("test quick looks", 20000, 0);
    for (int i = 0; i < 10; i++) {
        struct wpol w;
        wpol_begin(&w, &s, NULL);
        for (int looks = 0; looks < 5; looks++)
            assert_int_equal(wpol_pause(&w, 0), 0);
        assert_int_equal(w.t0, 0);
        wpol_end(&w);
    }
    assert_int_equal(s.n_waits, 10);
    assert_int_equal(s.n_spun, 10);
    uint32_t b = 20000;
    for (int i = 0; i < 10; i++)
        b -= (b - 1000) / 8;
    assert_int_equal(s.spin_ns, b);
    struct wpol w;
    wpol_begin(&w, &s, NULL);
    for (int looks = 0; looks < 40; looks++)
        assert_int_equal(wpol_pause(&w, 0), 0);
    assert_true(w.t0 != 0);
    wpol_end(&w);
    assert_int_equal(s.n_waits, 11);
    assert_true(s.spin_ns != 0);
    static struct wpol_site y = WPOL_SITE("test quick, peer here", 20000, 200000);
    struct wpol_how how = { .needs_cpu = always };
    wpol_begin(&w, &y, &how);
    assert_int_equal(wpol_pause(&w, 0), 0);
    assert_true(w.t0 != 0);
    assert_false(w.spun);
    wpol_end(&w);
}

/* how->look_pauses spaces the looks: the quick looks are 16 pauses in all (16 looks of one
 * pause, 4 of four, one of 16), then the clock starts; 0 means 1, more than 16 means 16, and
 * others are rounded down to a power of two. */
static void test_look_pauses(void **state)
{
    (void)state;
    if (wpol_mode() != WPOL_ADAPTIVE || wpol_cpus() < 2)
        skip();
    static struct wpol_site s = WPOL_SITE("test look pauses", 20000, 0);
    const uint8_t lp[] = { 0, 1, 4, 5, 16, 200 };
    const uint32_t spacing[] = { 1, 1, 4, 4, 16, 16 }, quick[] = { 16, 16, 4, 4, 1, 1 };
    for (size_t i = 0; i < sizeof lp; i++) {
        struct wpol_how how = { .look_pauses = lp[i] };
        struct wpol w;
        wpol_begin(&w, &s, &how);
        assert_int_equal(w.look_pauses, spacing[i]);
        for (uint32_t looks = 0; looks < quick[i]; looks++) {
            assert_int_equal(wpol_pause(&w, 0), 0);
            assert_int_equal(w.t0, 0);
        }
        assert_int_equal(wpol_pause(&w, 0), 0);
        assert_true(w.t0 != 0);
        for (int looks = 0; looks < 40; looks++)
            assert_int_equal(wpol_pause(&w, 0), 0);
        wpol_end(&w);
    }
    assert_int_equal(s.n_waits, sizeof lp);
}

/* Yields that run another thread end the yield phase after the site's slow_yields (4 when 0):
 * with a busy thread on our one CPU every yield runs it, and a wait reaches its first sleep
 * after exactly that many (unless fast_yields in a row ended the phase first). */
static void test_slow_yields(void **state)
{
    (void)state;
    if (wpol_mode() != WPOL_ADAPTIVE)
        skip();
    cpu_set_t old, one;
    int cpu = sched_getcpu();
    if (cpu < 0 || pthread_getaffinity_np(pthread_self(), sizeof old, &old))
        skip();
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (pthread_setaffinity_np(pthread_self(), sizeof one, &one))
        skip();
    atomic_store(&burn_stop, false);
    pthread_t b;
    assert_int_equal(pthread_create(&b, NULL, burn, NULL), 0);
    assert_int_equal(pthread_setaffinity_np(b, sizeof one, &one), 0);
    static struct wpol_site def = { .name = "test slow yields 4", .yield_max_ns = 4000000000u };
    static struct wpol_site many = { .name = "test slow yields 16", .yield_max_ns = 4000000000u,
                                     .slow_yields = 16 };
    struct wpol_site *sites[] = { &def, &many };
    const uint32_t want[] = { 4, 16 };
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < 3; i++) {
            struct wpol w = to_first_sleep(sites[k]);
            assert_true(w.ran_other);
            if (w.fast_yields < 8)
                assert_int_equal(w.slow_yields, want[k]);
        }
    }
    atomic_store(&burn_stop, true);
    pthread_join(b, NULL);
    assert_int_equal(pthread_setaffinity_np(pthread_self(), sizeof old, &old), 0);
}

/* ---------------------------------------------------------------- one CPU */

/* Pinned to one CPU (test_wait_pinned.sh): with a ceiling of 50 ms a spinning waiter would hold
 * the CPU from its peer for that long in every round; it must never spin at all. */
static void test_one_cpu(void **state)
{
    (void)state;
    if (wpol_cpus() != 1)
        skip();
    static struct wpol_site s = WPOL_SITE("test one cpu", 50000000, 200000);
    ping_pong(&s, BUMP_FOR_SLEEPERS);
    assert_int_equal(s.n_spun, 0);
    assert_true(s.n_waits > 0);
    static struct wpol_site b = WPOL_SITE("test one cpu bump", 50000000, 200000);
    ping_pong(&b, BUMP_ALWAYS);
    assert_int_equal(b.n_spun, 0);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "mode")) {
        static const char *names[] = { "adaptive", "spin", "sleep" };
        printf("%s\n", names[wpol_mode()]);
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sleepers_protocol),
        cmocka_unit_test(test_bump_always_protocol),
        cmocka_unit_test(test_no_fence_protocol),
        cmocka_unit_test(test_no_fence_race),
        cmocka_unit_test(test_adaptive_ping_pong),
        cmocka_unit_test(test_deadline),
        cmocka_unit_test(test_idle_ends),
        cmocka_unit_test(test_own_sleep),
        cmocka_unit_test(test_needs_cpu),
        cmocka_unit_test(test_needs_cpu_sleep),
        cmocka_unit_test(test_nap),
        cmocka_unit_test(test_nap_learns),
        cmocka_unit_test(test_learns),
        cmocka_unit_test(test_fixed),
        cmocka_unit_test(test_fast_yields),
        cmocka_unit_test(test_quick),
        cmocka_unit_test(test_look_pauses),
        cmocka_unit_test(test_slow_yields),
        cmocka_unit_test(test_one_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
