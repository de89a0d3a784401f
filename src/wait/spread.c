/*
 * Spreading two threads that wait for each other (spread.h): the count of hand-overs made on
 * one CPU, the backoff between moves, whether a CPU looks idle, and the move itself (the
 * affinity without this CPU, then the affinity as it was).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>

#include "spread.h"

bool wspread_due(struct wspread *s, bool together)
{
    if (s->off)
        return false;
    if (!together) {
        s->together = 0;
        /* A long run apart: the last move stuck, and a later pairing starts the count again. */
        if (++s->apart >= WSPREAD_SETTLED)
            s->need = 0;
        return false;
    }
    s->apart = 0;
    uint32_t need = s->need ? s->need : WSPREAD_FIRST;
    if (++s->together < need)
        return false;
    s->together = 0;
    /* Should the scheduler put us back, the next try waits twice as long: it keeps a pair
     * together when the other CPUs are busy, and then the hand-over is the best there is. */
    s->need = need < WSPREAD_MAX ? 2 * need : WSPREAD_MAX;
    return true;
}

/* Some CPU likely has nothing to run: the threads runnable right now (/proc/loadavg's fourth
 * field, system-wide, this one and the one sharing its CPU among them) leave one free. When it
 * cannot be read, assume so. */
static bool idle_cpu_likely(void)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    FILE *f = fopen("/proc/loadavg", "re");
    if (!f)
        return true;
    double l1, l5, l15;
    long running = 0;
    int n = fscanf(f, "%lf %lf %lf %ld/", &l1, &l5, &l15, &running);
    fclose(f);
    return n != 4 || online < 1 || running <= online;
}

int wspread_note(struct wspread *s, bool together)
{
    if (!wspread_due(s, together))
        return 0;
    if (!idle_cpu_likely()) {
        s->busy++;
        return 0;
    }
    int rc = wspread_move(NULL);
    if (rc >= 0) {
        s->moves++;
        return 1;
    }
    if (rc != -EINVAL)
        s->off = true; /* not ours to change (a seccomp filter, a container's policy) */
    return 0;
}

int wspread_move(int *from)
{
    cpu_set_t all, others;
    if (sched_getaffinity(0, sizeof all, &all))
        return -errno;
    int cpu = sched_getcpu();
    if (from)
        *from = cpu;
    if (cpu < 0 || CPU_COUNT(&all) < 2 || !CPU_ISSET(cpu, &all))
        return -EINVAL;
    others = all;
    CPU_CLR(cpu, &others);
    /* The kernel moves us before the call returns; the second call only widens the mask
     * again, and leaves us where we are now. */
    if (sched_setaffinity(0, sizeof others, &others))
        return -errno;
    int now = sched_getcpu();
    if (sched_setaffinity(0, sizeof all, &all))
        return -errno; /* (cannot be: the same mask was accepted a moment ago) */
    return now;
}
