/*
 * The synchronisation every layer of the fabric uses, and nothing above it: the clock,
 * futexes on shared memory, and locks that hold their owner's pid so that a lock of a dead
 * process can be taken over.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#include "fab_sync.h"

/* ---------------------------------------------------------------- time and futexes */

uint64_t fab_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int fab_futex_wait(_Atomic uint32_t *addr, uint32_t expected, int64_t timeout_ns)
{
    struct timespec ts, *tp = NULL;
    if (timeout_ns >= 0) {
        ts.tv_sec = timeout_ns / 1000000000ll;
        ts.tv_nsec = timeout_ns % 1000000000ll;
        tp = &ts;
    }
    /* Shared (not PRIVATE) futexes: waiters and wakers are different processes. */
    long r = syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT, expected, tp, NULL, 0);
    if (r == 0 || errno == EAGAIN)
        return 0;
    return -errno;
}

void fab_futex_wake(_Atomic uint32_t *addr, int n)
{
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE, n, NULL, NULL, 0);
}

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

void fab_lock(_Atomic uint32_t *l)
{
    uint32_t me = (uint32_t)getpid();
    for (;;) {
        uint32_t cur = 0;
        if (atomic_compare_exchange_strong(l, &cur, me))
            return;
        /* A lock held by a dead process (a crashed host) is taken over. */
        if (cur != me && !fab_pid_alive((int32_t)cur)) {
            if (atomic_compare_exchange_strong(l, &cur, me))
                return;
            continue;
        }
        fab_futex_wait(l, cur, 1000000); /* 1 ms: also re-checks the holder's liveness */
    }
}

void fab_unlock(_Atomic uint32_t *l)
{
    atomic_store(l, 0);
    fab_futex_wake(l, 1);
}

