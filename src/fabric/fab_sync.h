/*
 * The fabric's floor (fab_sync.c): the clock, futexes on shared memory, and locks that hold their
 * owner's pid so that a lock of a dead process can be taken over. Nothing else of the fabric.
 */
#ifndef NTBLEND_FAB_SYNC_H
#define NTBLEND_FAB_SYNC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* ---- futex helpers (waits return 0, -ETIMEDOUT, -EINTR) ---- */
int fab_futex_wait(_Atomic uint32_t *addr, uint32_t expected, int64_t timeout_ns);
void fab_futex_wake(_Atomic uint32_t *addr, int n);
uint64_t fab_now_ns(void);

/* Is pid a live process (not gone, not a zombie)? */
bool fab_pid_alive(int32_t pid);
/* getpid() without a system call after the first (read again in a forked child). */
int32_t fab_self_pid(void);
/* Shared-memory locks: hold the owner's pid, so a lock of a dead process can be taken over. */
void fab_lock(_Atomic uint32_t *l);
void fab_unlock(_Atomic uint32_t *l);

#endif
