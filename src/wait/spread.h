/*
 * Spreading two threads that wait for each other (spread.c): when the thread we hand over to
 * keeps running on our CPU while this thread may run on others, move to another one.
 *
 * Two threads that wait for each other on one CPU hand it over at every turn (the wait policy
 * yields to a thread that needs our CPU, wpol.h), and that state keeps itself: both are always
 * runnable, each looks half-busy, and the scheduler sees no reason to pull either to another
 * CPU, even an idle one. A 2-PE barrier then costs two context switches (~1.2 µs on a 2-CPU
 * VM) instead of one cache line each way (~0.3-0.4 µs). Moving once breaks the pair up; if the
 * scheduler puts us back, or no CPU is idle to move to, each further try waits twice as long.
 */
#ifndef NTBLEND_SPREAD_H
#define NTBLEND_SPREAD_H

#include <stdbool.h>
#include <stdint.h>

/* Hand-overs in a row on one CPU before the first move; the most it backs off to; hand-overs
 * on different CPUs in a row after which a move counts as having stuck (the backoff restarts). */
#define WSPREAD_FIRST 8u
#define WSPREAD_MAX 65536u
#define WSPREAD_SETTLED 4096u

/* One per pair of threads (process-local, starts zeroed). */
struct wspread {
    uint32_t together; /* hand-overs in a row with the other thread on our CPU */
    uint32_t apart;    /* ... on another CPU */
    uint32_t need;     /* together before the next move (0: WSPREAD_FIRST) */
    uint64_t moves;    /* moves made */
    uint64_t busy;     /* moves due but not made: no CPU looked idle */
    bool off;          /* a move failed for good (the system forbids it): no more tries */
};

/* Count one hand-over (together: the other thread runs, or last ran, on our CPU) and say
 * whether it is time to move. Pure bookkeeping: wspread_note moves when this says so. */
bool wspread_due(struct wspread *s, bool together);

/* wspread_due, and the move when it is due and some CPU looks idle (fewer threads runnable
 * right now than CPUs online, /proc/loadavg, our pair among them): a move to a CPU that runs
 * another program would trade the hand-over for that program's time slices. 1 moved, 0 not
 * (not due, no idle CPU, or one CPU allowed). */
int wspread_note(struct wspread *s, bool together);

/* Leave this CPU for another one this thread may run on, keeping its affinity as it was: the
 * CPU it runs on now (>= 0), -EINVAL when it may run on one CPU only, or -errno. *from (when
 * not NULL) is the CPU it left. */
int wspread_move(int *from);

#endif
