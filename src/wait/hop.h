/*
 * Hop timestamps (hop.c): where the time of one request goes as it crosses threads and
 * processes — a vhost-user back end seeing the guest's kick, the NVMe model fetching the
 * command, the completion seen, the guest's interrupt signalled. Off unless the environment
 * names a directory in NTBLEND_HOP_TRACE; then every process that marks hops keeps its last
 * HOP_MAX marks in memory and appends them to DIR/hop.<program>.<pid> (when half the ring is
 * new, at hop_flush, and at exit), a line per mark: time (ns), what, tag, and the CPU it was
 * made on (-1: not known), which tells where two threads shared a CPU;
 * and scripts/hop-report.sh lines the processes' files up (one CLOCK_MONOTONIC for all) and
 * gives the median of each hop. Off, a mark costs one load and a branch the CPU predicts.
 */
#ifndef NTBLEND_HOP_H
#define NTBLEND_HOP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define HOP_MAX 262144u /* marks kept in memory per process (6 MiB, only when on) */

/* -1: not looked at yet, 0: off, 1: on. */
extern _Atomic int hop_state;
int hop_init(void);
void hop_record(const char *what, uint32_t tag);

/* Mark that `what` (a string literal: the pointer is kept) happened now to request `tag`. */
static inline void hop_mark(const char *what, uint32_t tag)
{
    int s = atomic_load_explicit(&hop_state, memory_order_acquire);
    if (__builtin_expect(s != 0, 0) && (s > 0 || hop_init() > 0))
        hop_record(what, tag);
}

/* Append the marks made since the last flush to this process's file (when on): where a
 * thread that marks stops (a queue, a device model), so that the file is whole when it ends. */
void hop_flush(void);

#endif
