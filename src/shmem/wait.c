/*
 * How a PE waits (the wait policy of src/wait, with the PE's own words): on its notify word,
 * which remote wake-ups bump when it sleeps (replies, acknowledgements, barrier arrivals,
 * put-with-signal), and with naps where nothing wakes it (wait_until on a variable that puts
 * change, a lock word, room in a node's ring). Every wait looks for a global exit while it
 * sleeps. With more PEs than CPUs, or when the PE that will end the wait last ran on this
 * CPU, a wait does not spin: the PE it waits for needs the CPU.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>

#include "shmem_internal.h"

/* The spin's ceiling matches what a cross-CPU hand-over costs on a busy VM (a few us) with
 * room to spare; the site learns the rest. Yields last at most 200 us before a sleep. A PE
 * waits for another that runs elsewhere (one on our CPU makes its yields slow), so yields that
 * run nobody go on for 64 (~15 us) before a sleep, not 8: a 2-PE barrier's waits that slept
 * after 8 cost ~80 us each (the sleeper's wake-up and the waker's FUTEX_WAKE in a VM), 300-600
 * sleeps in 40 000 barriers took it from ~300 to 650-1800 ns, with 64 it slept 1-3 times. */
static struct wpol_site notify_site = { .name = "shmem notify", .spin_max_ns = 20000,
                                        .yield_max_ns = 200000, .fast_yields = 64 };
/* With more PEs than CPUs the PEs still to come need CPUs, and a sleep gives one up where
 * yields that run nobody keep it (the 4-PE barrier on 2 CPUs: 3.0 µs with 64, 2.5 with 8).
 * The yields that do run someone run the PEs we wait for, each of which needs a turn, so up to
 * 64 of them go by before a sleep, not 4: after 4, one wait in 40 slept (~50 µs to wake), and
 * the 4-PE barrier on 2 CPUs took 2.7 µs instead of 2.0, 8 PEs 5.6 instead of 5.3 (16: 2.0 and
 * 6.0). */
static struct wpol_site crowded_site = { .name = "shmem notify, crowded", .spin_max_ns = 20000,
                                         .yield_max_ns = 200000, .slow_yields = 64 };
static struct wpol_site poll_site = WPOL_SITE("shmem poll", 20000, 200000);

void shm_futex_wait(_Atomic uint32_t *w, uint32_t seen, long ms)
{
    /* Not private: the waiters are different processes sharing the page. */
    wpol_futex_wait(w, seen, (int64_t)ms * 1000000, false);
}

void shm_futex_wake(_Atomic uint32_t *w) { wpol_futex_wake(w, 1 << 30, false); }

static int look_for_exit(void *arg)
{
    (void)arg;
    shm_check_exit();
    return 0;
}

struct notify_wait {
    bool (*pred)(void *);
    bool (*needs_cpu)(void *);
    void *arg;
    int pe;
};

static bool nw_ready(void *a)
{
    struct notify_wait *n = a;
    return n->pred(n->arg);
}

/* The PE we wait for last arrived at a barrier on this CPU (it publishes that, shm_note_cpu):
 * if it has not moved since, it can only get on while we do not. */
bool shm_pe_here(int pe)
{
    if (pe < 0 || pe == shm.me || !shm.pes[pe].base)
        return false;
    int cpu = atomic_load_explicit(&shm_ctrl_of(pe)->bar_cpu, memory_order_relaxed);
    return cpu >= 0 && cpu == sched_getcpu();
}

static bool nw_needs_cpu(void *a)
{
    struct notify_wait *n = a;
    if (n->needs_cpu)
        return n->needs_cpu(n->arg);
    return shm.crowded || shm_pe_here(n->pe);
}

static void wait_for(bool (*pred)(void *), void *arg, bool (*needs_cpu)(void *), int pe, bool asym)
{
    struct shm_ctrl *c = shm_ctrl_of(shm.me);
    struct notify_wait n = { pred, needs_cpu, arg, pe };
    struct wpol_how how = { .ready = nw_ready, .arg = &n, .word = &c->notify,
                            .sleepers = &c->sleeping, .needs_cpu = nw_needs_cpu,
                            .idle = look_for_exit, .asym = asym, .sleep_ns = 100000000 };
    wpol_wait(shm.crowded ? &crowded_site : &notify_site, &how);
}

void shm_wait_for(bool (*pred)(void *), void *arg, bool (*needs_cpu)(void *), int pe)
{
    wait_for(pred, arg, needs_cpu, pe, false);
}

void shm_wait_notify(bool (*pred)(void *), void *arg) { wait_for(pred, arg, NULL, -1, false); }

bool shm_u64_reached(void *arg)
{
    struct shm_u64_wait *w = arg;
    return atomic_load_explicit(w->word, memory_order_acquire) >= w->want;
}

void shm_wait_signal(_Atomic uint64_t *word, uint64_t want, int pe)
{
    struct shm_u64_wait w = { word, want };
    wait_for(shm_u64_reached, &w, NULL, pe, shm.asym);
}

void shm_wait_u64(_Atomic uint64_t *word, uint64_t want)
{
    struct shm_u64_wait w = { word, want };
    wait_for(shm_u64_reached, &w, NULL, -1, false);
}

/* Publish the CPU we run on, for PEs that wait for us (only when it changed: the line stays
 * shared in their caches otherwise). */
void shm_note_cpu(void)
{
    struct shm_ctrl *c = shm_ctrl_of(shm.me);
    int cpu = sched_getcpu();
    if (atomic_load_explicit(&c->bar_cpu, memory_order_relaxed) != cpu)
        atomic_store_explicit(&c->bar_cpu, cpu, memory_order_relaxed);
}

static bool poll_needs_cpu(void *arg)
{
    (void)arg;
    return shm.crowded;
}

static const struct wpol_how poll_how = { .needs_cpu = poll_needs_cpu, .idle = look_for_exit,
                                          .sleep_ns = 1000000 };

void shm_poll_begin(struct wpol *w) { wpol_begin(w, &poll_site, &poll_how); }

void shm_poll_pause(struct wpol *w) { wpol_pause(w, 0); }
