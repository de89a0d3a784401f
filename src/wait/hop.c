/*
 * Hop timestamps (hop.h): the environment read once, a ring of the newest marks per process,
 * and writing them out. Lives with the wait policy because every layer links it; it needs
 * nothing but the wait policy's clock (wpol_now_ns, CLOCK_MONOTONIC), so the marks of every
 * process on the machine line up.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hop.h"
#include "wpol.h"

struct hop_rec {
    uint64_t t;
    const char *what;
    uint32_t tag;
    int cpu; /* where the mark was made (sched_getcpu; -1: unknown) */
};

_Atomic int hop_state = -1;
static struct hop_rec *recs;
static _Atomic uint64_t made;    /* marks so far; recs holds the newest HOP_MAX */
static _Atomic uint64_t flushed; /* marks written out */
static const char *dir;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

int hop_init(void)
{
    pthread_mutex_lock(&lock);
    int s = atomic_load(&hop_state);
    if (s < 0) {
        const char *d = getenv("NTBLEND_HOP_TRACE");
        s = 0;
        if (d && *d) {
            recs = calloc(HOP_MAX, sizeof *recs);
            if (recs) {
                dir = d;
                s = 1;
                atexit(hop_flush);
            } else {
                fprintf(stderr, "ntblend: NTBLEND_HOP_TRACE: no memory for %u marks; not "
                        "tracing\n", HOP_MAX);
            }
        }
        atomic_store(&hop_state, s);
    }
    pthread_mutex_unlock(&lock);
    return s;
}

void hop_record(const char *what, uint32_t tag)
{
    uint64_t i = atomic_fetch_add_explicit(&made, 1, memory_order_relaxed);
    struct hop_rec *r = &recs[i % HOP_MAX];
    r->t = wpol_now_ns();
    r->what = what;
    r->tag = tag;
    r->cpu = sched_getcpu();
    /* Half the ring not yet written: write it now, before it is overwritten (a long run). */
    if (i + 1 - atomic_load_explicit(&flushed, memory_order_relaxed) == HOP_MAX / 2)
        hop_flush();
}

void hop_flush(void)
{
    if (atomic_load(&hop_state) <= 0)
        return;
    pthread_mutex_lock(&lock);
    uint64_t n = atomic_load(&made), from = atomic_load(&flushed);
    if (n - from > HOP_MAX)
        from = n - HOP_MAX; /* the older ones were overwritten */
    if (from == n)
        goto out;
    /* The pid at the time of writing: a forked child that marks writes a file of its own. */
    char path[4096];
    int len = snprintf(path, sizeof path, "%s/hop.%s.%d", dir, program_invocation_short_name,
                       (int)getpid());
    int fd = len > 0 && (size_t)len < sizeof path
                 ? open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : -1;
    FILE *f = fd >= 0 ? fdopen(fd, "a") : NULL;
    if (!f) {
        fprintf(stderr, "ntblend: NTBLEND_HOP_TRACE: cannot write %s: %s; the marks are lost\n",
                len > 0 ? path : dir, strerror(errno));
        if (fd >= 0)
            close(fd);
        goto out;
    }
    fprintf(f, "# %s %d\n", program_invocation_short_name, (int)getpid());
    for (uint64_t i = from; i < n; i++) {
        const struct hop_rec *r = &recs[i % HOP_MAX];
        fprintf(f, "%llu %s %u %d\n", (unsigned long long)r->t, r->what, r->tag, r->cpu);
    }
    fclose(f);
out:
    atomic_store(&flushed, n);
    pthread_mutex_unlock(&lock);
}
