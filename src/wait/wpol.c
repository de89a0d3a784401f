/*
 * The wait policy (wpol.h): spin as long as waits at a site have lately taken, yield while that
 * lets another thread run, then sleep; the futex calls and the clock under it; what the policy
 * observes of the machine (the CPUs it may use, spins that lost their CPU) and what each site
 * learnt (NTBLEND_WAIT_DEBUG=1 prints it at exit).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "wpol.h"

/* The least spin a site keeps (a change a few hundred ns away is caught without a system
 * call), and how often a site whose waits went long spins to its ceiling again to find out
 * whether they are short once more (a sleep's wake-up hides how soon the change came). */
#define SPIN_MIN_NS 1000u
#define PROBE_EVERY 16u
/* A spin whose clock jumps this far between two looks lost its CPU (another thread, or the
 * hypervisor running another virtual CPU there): spins stay short for CONTENDED_NS after. */
#define LOST_CPU_NS 30000u
#define CONTENDED_NS 50000000u
/* A sched_yield that returns sooner ran nobody else (a no-op yield costs ~0.3 us in a VM, a
 * switch away and back several); FAST_YIELDS of them in a row end the yield phase, unless the
 * site asks for more (struct wpol_site fast_yields). */
#define FAST_YIELD_NS 1500u
#define FAST_YIELDS 8u
/* Yields that did run others, this many in one wait without the change coming, end the phase
 * too: the thread we wait for is not among those that ran (under CFS a yielding thread keeps
 * its place, so a crowd of yielders starves the busy thread they wait for, a device model
 * serving them all); sleeping gives it the CPU. One or two suffice where it is. A site may
 * ask for more (struct wpol_site slow_yields). */
#define SLOW_YIELDS 4u
#define SLEEP_DEFAULT_NS 100000000ull
/* Naps start at NAP_FIRST_NS, or, when others want the CPU (a yield of this wait ran another
 * thread, or spins lately lost their CPU), at a quarter of what the site's waits that napped
 * lately took (NAP_LEARN_SHIFT; the start itself at most NAP_MAX_NS), and double up to
 * NAP_MAX_NS. Without the learnt start, thirty clients polling an emulated NVMe on two CPUs
 * each napped 2, 4, 8 ... µs per completion: some 300 000 wake-ups a second, which took the
 * CPUs from the device model they all waited for, so its completions came later still and the
 * nappers woke more: a collapse to a twentieth of the IOPS that held for whole runs. An eighth
 * kept more wake-ups and fewer IOPS, a half let clients oversleep their completions
 * (slowest/fastest 0.24-0.44). */
#define NAP_FIRST_NS 2000u
#define NAP_LEARN_SHIFT 2
#define NAP_MAX_NS 1000000u
#define IDLE_EVERY_NS 1000000u
/* The first QUICK_LOOKS pauses of a wait that may spin (a look after each, or after every
 * how->look_pauses) are pauses and looks and nothing else: no clock and no budget. Most waits
 * of a barrier or a doorbell end there, a few hundred ns in, and the clock reads around them
 * made a 2-PE barrier a third slower; such a wait is learnt as one of no length (wpol_end).
 * They are below the least spin a site keeps (SPIN_MIN_NS), so they change no decision of the
 * policy. */
#define QUICK_LOOKS 16u

enum { PH_SPIN, PH_YIELD, PH_SLEEP };

uint64_t wpol_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int wpol_futex_wait(_Atomic uint32_t *addr, uint32_t expected, int64_t timeout_ns, bool private_futex)
{
    struct timespec ts, *tp = NULL;
    if (timeout_ns >= 0) {
        ts.tv_sec = timeout_ns / 1000000000ll;
        ts.tv_nsec = timeout_ns % 1000000000ll;
        tp = &ts;
    }
    /* Shared futexes unless told: waiters and wakers are usually different processes. */
    long r = syscall(SYS_futex, (uint32_t *)addr, private_futex ? FUTEX_WAIT_PRIVATE : FUTEX_WAIT,
                     expected, tp, NULL, 0);
    if (r == 0 || errno == EAGAIN)
        return 0;
    return -errno;
}

void wpol_futex_wake(_Atomic uint32_t *addr, int n, bool private_futex)
{
    syscall(SYS_futex, (uint32_t *)addr, private_futex ? FUTEX_WAKE_PRIVATE : FUTEX_WAKE, n, NULL,
            NULL, 0);
}

void wpol_wake(_Atomic uint32_t *word, _Atomic uint32_t *sleepers, bool private_futex)
{
    atomic_fetch_add(word, 1);
    if (!sleepers || atomic_load(sleepers))
        wpol_futex_wake(word, INT_MAX, private_futex);
}

bool wpol_asym_init(void)
{
    static _Atomic int done = -1;
    int d = atomic_load(&done);
    if (d >= 0)
        return d;
    long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    d = cmds > 0 && (cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED) &&
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0;
    atomic_store(&done, d);
    return d;
}

int wpol_asym_fence(void)
{
    return syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) ? -errno : 0;
}

/* ---------------------------------------------------------------- what the policy sees */

static _Atomic int ncpus;
static _Atomic uint64_t ncpus_until, contended_until;

/* wpol_cpus, given the time (a wait has just read the clock). */
static int cpus_at(uint64_t now)
{
    int n = atomic_load_explicit(&ncpus, memory_order_relaxed);
    if (n && now < atomic_load_explicit(&ncpus_until, memory_order_relaxed))
        return n;
    /* Re-read now and then: `taskset -p` may change it under a running process. */
    cpu_set_t set;
    n = sched_getaffinity(0, sizeof set, &set) ? 2 : CPU_COUNT(&set);
    atomic_store_explicit(&ncpus, n > 0 ? n : 1, memory_order_relaxed);
    atomic_store_explicit(&ncpus_until, now + 100000000ull, memory_order_relaxed);
    return n > 0 ? n : 1;
}

int wpol_cpus(void) { return cpus_at(wpol_now_ns()); }

/* wpol_cpus as last read, without a look at the clock (0: not read yet). */
static int cpus_known(void) { return atomic_load_explicit(&ncpus, memory_order_relaxed); }

bool wpol_contended(void)
{
    return wpol_now_ns() < atomic_load_explicit(&contended_until, memory_order_relaxed);
}

enum wpol_mode wpol_mode(void)
{
    static _Atomic int mode = -1;
    int m = atomic_load_explicit(&mode, memory_order_relaxed);
    if (m >= 0)
        return (enum wpol_mode)m;
    const char *e = getenv("NTBLEND_WAIT");
    m = WPOL_ADAPTIVE;
    if (e && !strcmp(e, "spin"))
        m = WPOL_SPIN;
    else if (e && !strcmp(e, "sleep"))
        m = WPOL_SLEEP;
    else if (e && *e && strcmp(e, "adaptive"))
        fprintf(stderr, "ntblend: NTBLEND_WAIT=%s is not adaptive, spin or sleep; waiting "
                "adaptively\n", e);
    atomic_store_explicit(&mode, m, memory_order_relaxed);
    return (enum wpol_mode)m;
}

/* ---------------------------------------------------------------- the debug report */

/* Sites carry no link of their own (WPOL_SITE stays a plain initialiser): a small table. */
#define REPORT_SITES 64
static struct wpol_site *_Atomic reported[REPORT_SITES];
static struct wpol_site done_mark;
#define DONE (&done_mark) /* a slot whose site was reported and is gone: free for another */

static void report_line(const struct wpol_site *s)
{
    char line[256];
    int n = snprintf(line, sizeof line,
                     "ntblend[%d] wait %s: %llu waits (%llu in the spin, %llu yielding, "
                     "%llu asleep), %llu yields, %llu sleeps (%llu ran out), "
                     "spin now %u ns of %u\n",
                     (int)getpid(), s->name, (unsigned long long)s->n_waits,
                     (unsigned long long)s->n_spun, (unsigned long long)s->n_yielded,
                     (unsigned long long)s->n_slept, (unsigned long long)s->n_yields,
                     (unsigned long long)s->n_sleeps, (unsigned long long)s->n_timed_out,
                     (unsigned)s->spin_ns, s->spin_max_ns);
    if (n > 0 && write(STDERR_FILENO, line, (size_t)n) < 0)
        return; /* stderr is gone: nothing to tell */
}

static void report(void)
{
    for (int i = 0; i < REPORT_SITES; i++) {
        struct wpol_site *s = atomic_load(&reported[i]);
        if (s && s != DONE)
            report_line(s);
    }
}

void wpol_site_done(struct wpol_site *s)
{
    for (int i = 0; i < REPORT_SITES; i++) {
        struct wpol_site *cur = s;
        if (atomic_compare_exchange_strong(&reported[i], &cur, DONE)) {
            report_line(s);
            return;
        }
    }
}

static void note_site(struct wpol_site *s)
{
    static _Atomic int debug = -1;
    int d = atomic_load_explicit(&debug, memory_order_relaxed);
    if (d < 0) {
        const char *e = getenv("NTBLEND_WAIT_DEBUG");
        d = e && *e && strcmp(e, "0");
        atomic_store(&debug, d);
        if (d)
            atexit(report);
    }
    if (!d)
        return;
    for (int i = 0; i < REPORT_SITES; i++) {
        struct wpol_site *cur = NULL;
        if (atomic_compare_exchange_strong(&reported[i], &cur, s) || cur == s)
            return;
        if (cur == DONE && atomic_compare_exchange_strong(&reported[i], &cur, s))
            return;
    }
}

/* ---------------------------------------------------------------- the policy */

static uint32_t spin_budget(struct wpol_site *s, uint64_t now);

static uint32_t initial_budget(struct wpol *w, uint64_t now)
{
    struct wpol_site *s = w->site;
    const struct wpol_how *how = w->how;
    enum wpol_mode mode = wpol_mode();
    bool here = how->needs_cpu && how->needs_cpu(how->arg);
    w->cpu_skip = here && how->needs_cpu_sleep && s->yield_max_ns;
    if (mode == WPOL_SLEEP || !s->spin_max_ns || cpus_at(now) < 2 || here)
        return 0; /* one CPU (whatever we wait for needs it), or what we wait for needs this one */
    return spin_budget(s, now);
}

/* What the site's spin is now: learnt, with its probes. */
static uint32_t spin_budget(struct wpol_site *s, uint64_t now)
{
    enum wpol_mode mode = wpol_mode();
    if (mode == WPOL_SPIN || s->fixed)
        return s->spin_max_ns;
    uint32_t b = atomic_load_explicit(&s->spin_ns, memory_order_relaxed);
    if (!b)
        b = s->spin_max_ns; /* nothing learnt yet */
    if (now < atomic_load_explicit(&contended_until, memory_order_relaxed))
        return b / 4;
    /* A probe spins four times the budget (the ceiling at most): long enough to find out
     * whether waits got shorter, not so long that a probe costs what a sleep would. Every
     * fourth probe spins to the ceiling: waits of 7 µs (an NVMe read with the latency model
     * on) are never caught by a probe of 4 µs, and a budget brought down to its floor by a
     * busy spell would stay there, each such wait yielding and napping for 30-60 µs. */
    uint32_t k = atomic_fetch_add_explicit(&s->waits, 1, memory_order_relaxed);
    if (k % PROBE_EVERY == 0 && b < s->spin_max_ns) {
        uint64_t p = 4ull * (b > SPIN_MIN_NS ? b : SPIN_MIN_NS);
        b = p < s->spin_max_ns && k % (4 * PROBE_EVERY) ? (uint32_t)p : s->spin_max_ns;
    }
    return b;
}

void wpol_begin(struct wpol *w, struct wpol_site *s, const struct wpol_how *how)
{
    static const struct wpol_how none;
    *w = (struct wpol){ .site = s, .how = how ? how : &none };
    /* 0 or 1 (most waits): a look at every pause and the clock every 16th. Otherwise a power
     * of two up to 16 (rounded down), the clock read every 16 / look_pauses looks. */
    uint32_t lp = w->how->look_pauses;
    uint32_t log = lp < 2 ? 0 : lp >= 16 ? 4 : 31 - (uint32_t)__builtin_clz(lp);
    w->look_pauses = 1u << log;
    w->clock_mask = 15u >> log;
}

/* The pauses between two looks. */
static void relax_look(const struct wpol *w)
{
    for (uint32_t i = 0; i < w->look_pauses; i++)
        wpol_relax();
}

static void enter(struct wpol *w, int phase)
{
    w->phase = (uint8_t)phase;
    if (phase == PH_YIELD)
        w->phase_end = w->now + w->site->yield_max_ns;
    w->fast_yields = 0;
}

/* The first pause of a wait: the clock starts, and the spin gets its budget. */
static void first(struct wpol *w)
{
    w->t0 = w->now = wpol_now_ns();
    w->budget = initial_budget(w, w->t0);
    w->phase_end = w->t0 + w->budget;
    w->nap_ns = NAP_FIRST_NS;
    if (!w->budget)
        enter(w, wpol_mode() == WPOL_SLEEP || !w->site->yield_max_ns ? PH_SLEEP : PH_YIELD);
}

static int sleep_once(struct wpol *w, uint32_t seen)
{
    const struct wpol_how *h = w->how;
    uint64_t max = h->sleep_ns ? h->sleep_ns : SLEEP_DEFAULT_NS;
    if (h->deadline_ns) {
        if (w->now >= h->deadline_ns)
            return -ETIMEDOUT;
        if (h->deadline_ns - w->now < max)
            max = h->deadline_ns - w->now;
    }
    int rc = 0;
    w->slept = true;
    atomic_fetch_add_explicit(&w->site->n_sleeps, 1, memory_order_relaxed);
    if (h->asleep)
        h->asleep(h->arg, true);
    if (h->word) {
        if (h->sleepers)
            atomic_fetch_add(h->sleepers, 1);
        /* Counted first, looked at second: a waker that bumps only for sleepers either sees
         * us here or changed the condition before this look. A waker with no fence of its own
         * gets one here (wpol_asym_fence); should that fail, the sleep is a short poll. */
        if (h->asym && h->sleepers && wpol_asym_fence() && max > 1000000)
            max = 1000000;
        if (!(h->sleepers && h->ready && h->ready(h->arg)) &&
            wpol_futex_wait(h->word, seen, (int64_t)max, h->private_futex) == -ETIMEDOUT)
            atomic_fetch_add_explicit(&w->site->n_timed_out, 1, memory_order_relaxed);
        if (h->sleepers)
            atomic_fetch_sub(h->sleepers, 1);
    } else if (h->sleep) {
        rc = h->sleep(h->arg, max);
    } else {
        /* Nobody wakes us: a nap that grows. The thread's timer slack (50 us by default)
         * would stretch a 2 us nap to 60-110 us, so a short nap asks for an eighth of its
         * length as slack, and the thread's own comes back after it. */
        if (!w->napped && (w->ran_other || wpol_contended())) {
            /* Others want the CPU: start where such waits lately ended (NAP_LEARN_SHIFT).
             * Alone, short naps cost nobody, and a late first nap would only add latency. */
            uint32_t learnt = atomic_load_explicit(&w->site->nap_ns, memory_order_relaxed);
            if (learnt > w->nap_ns)
                w->nap_ns = learnt;
        }
        uint64_t ns = w->nap_ns < max ? w->nap_ns : max;
        struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };
        int slack = ns < 400000 ? prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0) : -1;
        if (slack > 0)
            prctl(PR_SET_TIMERSLACK, ns / 8 > 1000 ? ns / 8 : 1000, 0, 0, 0);
        nanosleep(&ts, NULL);
        w->napped = true;
        if (slack > 0)
            prctl(PR_SET_TIMERSLACK, (unsigned long)slack, 0, 0, 0);
        if (w->nap_ns < NAP_MAX_NS)
            w->nap_ns *= 2;
    }
    if (h->asleep)
        h->asleep(h->arg, false);
    w->now = wpol_now_ns();
    return rc < 0 ? rc : 0;
}

/* May this wait start with its quick looks? Not where it would not spin at all. */
static bool quick_ok(const struct wpol *w)
{
    const struct wpol_how *h = w->how;
    return w->site->spin_max_ns >= SPIN_MIN_NS && cpus_known() >= 2 && wpol_mode() != WPOL_SLEEP &&
           !(h->needs_cpu && h->needs_cpu(h->arg));
}

int wpol_pause(struct wpol *w, uint32_t seen)
{
    const struct wpol_how *h = w->how;
    if (!w->n++)
        w->quick = quick_ok(w);
    if (w->quick) {
        if (w->n * w->look_pauses <= QUICK_LOOKS) {
            relax_look(w);
            return 0;
        }
        w->quick = false;
        w->n = 1;
        first(w);
    } else if (w->n == 1) {
        first(w);
    }
    switch (w->phase) {
    case PH_SPIN: {
        w->spun = true;
        /* A few pauses per look at the clock (~30 ns) keep the look cheap. */
        if (w->n & w->clock_mask) {
            relax_look(w);
            return 0;
        }
        if (w->look_pauses > 1) /* (one pause: the clock read stands in for it, as before) */
            relax_look(w);
        uint64_t prev = w->now;
        w->now = wpol_now_ns();
        if (w->now - prev > LOST_CPU_NS) {
            /* This spin lost its CPU for a while: the CPUs are shared, and a spin may be
             * keeping the thread we wait for from running. Yield from here on. */
            atomic_store_explicit(&contended_until, w->now + CONTENDED_NS, memory_order_relaxed);
            enter(w, w->site->yield_max_ns ? PH_YIELD : PH_SLEEP);
        } else if (w->now >= w->phase_end) {
            enter(w, w->site->yield_max_ns && wpol_mode() != WPOL_SLEEP ? PH_YIELD : PH_SLEEP);
        }
        break;
    }
    case PH_YIELD: {
        w->yielded = true;
        atomic_fetch_add_explicit(&w->site->n_yields, 1, memory_order_relaxed);
        uint64_t t = w->now;
        sched_yield();
        w->now = wpol_now_ns();
        if (w->now - t < FAST_YIELD_NS && w->cpu_skip) {
            /* The thread we wait for is queued here and the scheduler passed it over: only a
             * sleep gives it the CPU (needs_cpu_sleep). */
            w->cpu_skip = false;
            enter(w, PH_SLEEP);
            break;
        } else if (w->now - t < FAST_YIELD_NS) {
            w->fast_yields++;
        } else {
            w->fast_yields = 0;
            w->slow_yields++;
            w->ran_other = true;
        }
        /* Yields that come straight back ran nobody: what we wait for is not on this CPU's
         * queue, and sleeping frees the CPU (a VM's virtual CPU halts, and the host may run
         * the other one there). */
        uint32_t fast_max = w->site->fast_yields ? w->site->fast_yields : FAST_YIELDS;
        uint32_t slow_max = w->site->slow_yields ? w->site->slow_yields : SLOW_YIELDS;
        if (w->now >= w->phase_end || w->fast_yields >= fast_max || w->slow_yields >= slow_max)
            enter(w, PH_SLEEP);
        break;
    }
    default: {
        if (h->idle && w->now >= w->next_idle) {
            w->next_idle = w->now + IDLE_EVERY_NS;
            int rc = h->idle(h->arg);
            if (rc)
                return rc;
        }
        int rc = sleep_once(w, seen);
        if (rc)
            return rc;
        break;
    }
    }
    if (h->deadline_ns && w->now >= h->deadline_ns)
        return -ETIMEDOUT;
    return 0;
}

/* The site's spin budget as learnt so far (its ceiling before anything is). */
static uint32_t budget_now(const struct wpol_site *s)
{
    uint32_t b = atomic_load_explicit(&s->spin_ns, memory_order_relaxed);
    return b ? b : s->spin_max_ns;
}

/* The budget b after a wait the spin caught in d ns: twice that (and SPIN_MIN_NS) at once if
 * it is more, else an eighth of the way down to it. */
static uint32_t caught(const struct wpol_site *s, uint32_t b, uint64_t d)
{
    uint64_t want = 2 * d + SPIN_MIN_NS;
    uint32_t t = want < s->spin_max_ns ? (uint32_t)want : s->spin_max_ns;
    return t > b ? t : b - (b - t) / 8;
}

static void store_budget(struct wpol_site *s, uint32_t b)
{
    if (b < SPIN_MIN_NS)
        b = s->spin_max_ns < SPIN_MIN_NS ? s->spin_max_ns : SPIN_MIN_NS;
    atomic_store_explicit(&s->spin_ns, b, memory_order_relaxed);
}

void wpol_end(struct wpol *w)
{
    struct wpol_site *s = w->site;
    if (!w->n)
        return; /* held at the first look: nothing to learn */
    if (w->quick) {
        /* Within the quick looks: counted, and learnt as a wait the spin caught at once (no
         * clock: its length is a few hundred ns at most). Learning nothing from them would
         * leave a site's budget to its longer waits alone. */
        if (atomic_fetch_add_explicit(&s->n_waits, 1, memory_order_relaxed) == 0)
            note_site(s);
        atomic_fetch_add_explicit(&s->n_spun, 1, memory_order_relaxed);
        if (wpol_mode() == WPOL_ADAPTIVE && !s->fixed)
            store_budget(s, caught(s, budget_now(s), 0));
        return;
    }
    uint64_t d = wpol_now_ns() - w->t0;
    bool first_wait = atomic_fetch_add_explicit(&s->n_waits, 1, memory_order_relaxed) == 0;
    if (w->slept)
        atomic_fetch_add_explicit(&s->n_slept, 1, memory_order_relaxed);
    else if (w->yielded)
        atomic_fetch_add_explicit(&s->n_yielded, 1, memory_order_relaxed);
    else
        atomic_fetch_add_explicit(&s->n_spun, 1, memory_order_relaxed);
    if (first_wait)
        note_site(s);
    if (w->napped) {
        /* The first nap of the next such wait: a quarter of this one's length, smoothed. */
        uint64_t t = d >> NAP_LEARN_SHIFT;
        if (t > NAP_MAX_NS)
            t = NAP_MAX_NS;
        uint32_t cur = atomic_load_explicit(&s->nap_ns, memory_order_relaxed);
        atomic_store_explicit(&s->nap_ns, (uint32_t)(cur - cur / 4 + t / 4), memory_order_relaxed);
    }
    if (wpol_mode() != WPOL_ADAPTIVE || !s->spin_max_ns || s->fixed)
        return;
    /* Learn: a wait that a spin would have caught (it ended within the ceiling, awake, and no
     * yield of it ran another thread) sets the budget to twice its length at once. One that
     * found the CPU wanted (a yield ran another thread, or a spin lost its CPU lately) lowers
     * it by a quarter, towards SPIN_MIN_NS: that thread needed this CPU, and a longer spin
     * would only have kept it waiting. One that slept with nobody wanting the CPU teaches
     * nothing: how soon the change came is hidden behind the wake-up, and it is often long
     * only because the other side slept too (a driver and its device model, each waiting for
     * the other: were both to shorten their spins for that, both would end up asleep in every
     * round, a wake-up each way per command, where a spin on each side costs no one). */
    uint32_t b = budget_now(s);
    if (!w->slept && !w->ran_other && d <= s->spin_max_ns)
        b = caught(s, b, d);
    else if (w->ran_other || wpol_contended())
        b -= b / 4;
    store_budget(s, b);
}

int wpol_wait(struct wpol_site *s, const struct wpol_how *how)
{
    if (how->ready(how->arg))
        return 0;
    struct wpol w;
    wpol_begin(&w, s, how);
    for (;;) {
        uint32_t seen = how->word ? atomic_load(how->word) : 0;
        if (how->ready(how->arg))
            break;
        int rc = wpol_pause(&w, seen);
        if (rc) {
            if (how->ready(how->arg))
                break;
            wpol_end(&w);
            return rc;
        }
    }
    wpol_end(&w);
    return 0;
}
