/*
 * The synchronisation every layer of the fabric uses, and nothing above it: the clock and
 * futexes on shared memory (the wait policy's, src/wait), and locks that hold their owner's
 * pid so that a lock of a dead process can be taken over.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>

#include "fab_sync.h"
#include "wpol.h"

/* ---------------------------------------------------------------- time and futexes */

/* The wait policy's (src/wait) clock and futexes, under the fabric's names. */
uint64_t fab_now_ns(void) { return wpol_now_ns(); }

int fab_futex_wait(_Atomic uint32_t *addr, uint32_t expected, int64_t timeout_ns)
{
    /* Shared (not PRIVATE) futexes: waiters and wakers are different processes. */
    return wpol_futex_wait(addr, expected, timeout_ns, false);
}

void fab_futex_wake(_Atomic uint32_t *addr, int n) { wpol_futex_wake(addr, n, false); }

/* A zombie (dead, not yet reaped by its parent) counts as dead: it will never acknowledge. */
bool fab_pid_alive(int32_t pid)
{
    if (pid <= 0 || (kill(pid, 0) < 0 && errno == ESRCH))
        return false;
    char path[32], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return true; /* no procfs: trust kill() */
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = 0;
    const char *paren = strrchr(buf, ')'); /* the command name may hold spaces and parens */
    return !(paren && (paren[2] == 'Z' || paren[2] == 'X'));
}

/*
 * The lock word holds the owner's pid, with LOCK_WAITERS set once someone sleeps on it: an
 * uncontended lock and unlock are one atomic operation each, no system call (pids stay below
 * 2^22, Linux's PID_MAX_LIMIT). The pid is read once per process, again in a forked child.
 */
#define LOCK_WAITERS 0x80000000u

static _Atomic uint32_t my_pid;

static void forget_pid(void) { atomic_store_explicit(&my_pid, 0, memory_order_relaxed); }
static void register_atfork(void) { pthread_atfork(NULL, NULL, forget_pid); }

int32_t fab_self_pid(void)
{
    uint32_t me = atomic_load_explicit(&my_pid, memory_order_relaxed);
    if (!me) {
        static pthread_once_t once = PTHREAD_ONCE_INIT;
        pthread_once(&once, register_atfork);
        me = (uint32_t)getpid();
        atomic_store_explicit(&my_pid, me, memory_order_relaxed);
    }
    return (int32_t)me;
}

void fab_lock(_Atomic uint32_t *l)
{
    uint32_t me = (uint32_t)fab_self_pid(), cur = 0;
    if (atomic_compare_exchange_strong(l, &cur, me))
        return;
    for (;;) {
        if (cur == 0) {
            /* Taken after a wait: others may still sleep, so the unlock must wake. */
            if (atomic_compare_exchange_strong(l, &cur, me | LOCK_WAITERS))
                return;
            continue;
        }
        uint32_t owner = cur & ~LOCK_WAITERS;
        /* A lock held by a dead process (a crashed host) is taken over. */
        if (owner != me && !fab_pid_alive((int32_t)owner)) {
            if (atomic_compare_exchange_strong(l, &cur, me | LOCK_WAITERS))
                return;
            continue;
        }
        if (!(cur & LOCK_WAITERS) && !atomic_compare_exchange_strong(l, &cur, cur | LOCK_WAITERS))
            continue;
        fab_futex_wait(l, cur | LOCK_WAITERS, 1000000); /* 1 ms: re-checks the holder's liveness */
        cur = atomic_load(l);
    }
}

void fab_unlock(_Atomic uint32_t *l)
{
    if (atomic_exchange(l, 0) & LOCK_WAITERS)
        fab_futex_wake(l, 1);
}

