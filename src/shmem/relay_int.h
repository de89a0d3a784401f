/*
 * Inside the node (oshrelay): relay.c owns the inbox, the connections, the messages' work
 * (relay_handle) and the acknowledgements; relay_thread.c owns the transfer threads — how they
 * wait, and the DMAs that carry large puts on. This header is what the two share.
 */
#ifndef SHMEM_RELAY_INT_H
#define SHMEM_RELAY_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "shmem_internal.h"
#include "xport.h"

/* A put that comes within this of the last DMA's end is part of a stream (a wake-up of the
 * transfer thread on a busy 2-CPU machine takes tens of microseconds). */
#define RELAY_STREAM_NS 100000u

struct rthread {
    pthread_t tid;
    struct ntb_dev *dev;
    uint64_t bit;
    uint32_t *rings;
    int nrings;
    uint64_t *owed;      /* acks owed, by source PE: sent in batches */
    struct xp_dmaq *dq;  /* by adapter: our DMA queue for data leaving through it */
    /* Puts whose data a DMA is moving on: all of one ring (pring), through one queue (pdq),
     * oldest first. mu guards fifo, pdq, pring, next_pos, owed and helper. Who hands each on
     * as its DMA ends (land): the transfer thread itself while puts come one at a time — it
     * would only wake another thread to do it — and the completer thread (ctid) while they
     * stream (helper), so that the engine is given the next chunk the moment it arrives. */
    pthread_mutex_t mu;
    struct xp_fifo fifo;
    uint32_t pring;
    struct xp_dmaq *pdq;
    uint64_t next_pos;   /* the next message of pring to look at */
    _Atomic bool helper;
    bool stream;         /* puts of pring come close together: call the completer */
    uint64_t landed_ns;  /* when the last DMA was handed on */
    bool landed;         /* the oldest DMA ended (landed_rc), found by a look that reaped it */
    int landed_rc;
    pthread_t ctid;
    bool cstarted;
    _Atomic uint32_t inflight;      /* fifo.n, for waits that look without the lock */
    _Atomic uint32_t work, work_sl; /* bumped for the completer (a DMA for it, or the end) */
    _Atomic uint32_t gone, gone_sl; /* bumped by the completer when the fifo got shorter */
    /* SHMEM_PROFILE (prof.h): the stamp of the put being handled (NULL: none), the sums of
     * the puts delivered, sent with the acks (by source PE; under mu), and the message a full
     * ring held up last (its arrival counts from when it was first seen). */
    struct xp_stamp *arrived;
    struct xp_prof_sums *psum;
    bool held;
    uint32_t held_ring;
    uint64_t held_pos, held_ns;
    /* What each wait learnt: for messages, for our own DMA, for room ahead, the completer's */
    struct wpol_site wait, dma_wait, full_wait, cwait, fwait;
};

extern void *relay_inbox;
extern seg_local_t *relay_inbox_seg;
extern uint32_t relay_nrings;
extern _Atomic bool relay_stop;

/* relay.c: the work for a message of ring `ring` (0, or -EAGAIN: its next ring is full, try
 * again); the acks owed, with t->mu held (false: some must wait); where a message of `ring`
 * goes on; failover: the host a message of `ring` goes on to; is it from this job's library? */
int relay_handle(struct rthread *t, const struct xp_msg *m, const void *data, uint32_t ring);
bool relay_pay_acks(struct rthread *t);
struct xp_prod *relay_next_prod(const struct xp_msg *m, uint32_t ring);
int relay_onward(uint32_t ring);
bool relay_msg_sane(const struct xp_msg *m);
/* SHMEM_RELAY_HOLD (for tests): is ring r held at its message m (NULL: at whatever comes
 * next)? Only the thread that consumes r asks. */
bool relay_held(uint32_t r, const struct xp_msg *m);

/* relay_thread.c: a transfer thread's wait sites and lock (before it starts); its body; once
 * it has ended, its completer's end. */
void relay_thread_init(struct rthread *t);
void *relay_transfer_thread(void *arg);
void relay_thread_join(struct rthread *t);
/* Before its storage is freed: its wait sites' lines for NTBLEND_WAIT_DEBUG. */
void relay_thread_fini(struct rthread *t);

#endif
