/*
 * The choice between copying a large block with the helper thread and copying it alone
 * (src/shmem/copy.c explains why it is measured): which way the next job of a size class
 * goes, and what a timed job teaches the class. Pure arithmetic on struct pick, so that
 * tests/unit/shmem/test_shmem_pick.c can drive it with rates of its own choosing.
 */
#ifndef NTBLEND_SHMEM_COPY_PICK_H
#define NTBLEND_SHMEM_COPY_PICK_H

#include <stdbool.h>

#define PICK_CLASSES 8         /* 256 KiB, 512 KiB, ... 16 MiB, 32 MiB and more */
#define PICK_ALONE_FIRST 16    /* with the helper: the first try alone, once the average settles */
#define PICK_ALONE_EVERY 64    /* ... and then one job in this many */
#define PICK_HELP_FIRST 16     /* alone: the helper tried this many jobs after going alone */
#define PICK_HELP_MAX 128      /* ... then after twice as many each time, up to this many */
#define PICK_GO_ALONE 1.05     /* how much the other way must beat the moving average by */
#define PICK_TAKE_BACK 1.15
#define PICK_WAKE_JOBS 8       /* a try of the helper waits this many jobs at most for it */

/* What the two ways of copying a size class have given: bytes per ns, as a moving average for
 * the way in use and as the latest try for the other. */
struct pick {
    double helped, alone;
    unsigned jobs, next_try, help_every; /* the job that tries the other way next */
    unsigned waited;                     /* jobs the current try has waited for the helper */
    bool go_alone;
};

/* How the next job goes: with the helper or alone, whether it tries the way not in use,
 * and whether its time is learnt. */
struct pick_job {
    bool helped, trying, timed;
};

/* The next job of class pk. helper_asleep: the helper sleeps on its futex now. Alone, the
 * helper's try is two jobs: the first wakes it, the second is timed, or the next one while
 * the helper is still waking up (up to PICK_WAKE_JOBS more). */
static inline struct pick_job pick_next(struct pick *pk, bool helper_asleep)
{
    unsigned k = pk->jobs++;
    if (!k)
        pk->next_try = PICK_ALONE_FIRST;
    if (pk->go_alone && k == pk->next_try && helper_asleep && pk->waited < PICK_WAKE_JOBS) {
        pk->next_try++;
        pk->waited++;
    }
    struct pick_job j;
    j.trying = k == pk->next_try || (pk->go_alone && k + 1 == pk->next_try);
    j.helped = pk->go_alone == j.trying;
    j.timed = !(pk->go_alone && k + 1 == pk->next_try);
    return j;
}

/* A timed job's rate (bytes per ns) into its class, and the class's choice from then on.
 * Returns whether the choice changed. */
static inline bool pick_learn(struct pick *pk, bool helped, double rate)
{
    double *r = helped ? &pk->helped : &pk->alone;
    bool trial = helped == pk->go_alone;
    if (!trial && *r > 0)
        *r += (rate - *r) / 4;
    else
        *r = rate; /* a try of the other way, or the first job of the class */
    if (!trial)
        return false;
    bool turn = pk->go_alone ? pk->helped > pk->alone * PICK_TAKE_BACK
                             : pk->alone > pk->helped * PICK_GO_ALONE;
    if (turn) {
        pk->go_alone = !pk->go_alone;
        pk->help_every = PICK_HELP_FIRST;
    } else if (pk->go_alone && pk->help_every < PICK_HELP_MAX) {
        pk->help_every *= 2;
    }
    pk->next_try = pk->jobs + (pk->go_alone ? pk->help_every : PICK_ALONE_EVERY);
    pk->waited = 0;
    return turn;
}

#endif
