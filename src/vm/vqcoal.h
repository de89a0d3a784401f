/*
 * Interrupt coalescing for a virtqueue's completions (vqcoal.c): when to call the guest.
 *
 * Each call is an interrupt the guest's vCPU takes; under TCG that is the vCPU thread's time,
 * and at queue depth 32 the guest's vCPU is what limits a virtio-blk disk (docs/vm.md). A
 * guest that keeps submitting while its completions wait has work without them, and gains
 * when several come with one interrupt; a guest at queue depth 1 waits for each, and any
 * hold is its latency. The back end cannot see the guest's queue depth (requests it finished
 * and the guest has not reaped look the same as none), so it finds out the way adaptive
 * interrupt moderation in NICs does: it holds a batch of completions now and then (a probe),
 * and whether the guest sent a request while they waited says which kind of guest it is.
 *
 *   not deep  every completion is signalled at once, except every VQ_COAL_PROBE-th batch,
 *             which is held for one hold window;
 *   deep      every batch is held for a window, or until VQ_COAL_MAX completions wait, or
 *             until the guest, having sent requests during the hold, sends none for
 *             VQ_COAL_IDLE of the gaps between those (its busy pace): then it is waiting for
 *             these completions (several processes at queue depth 1 each, all now blocked);
 *
 * and each held batch decides: deep when the guest sent a request while it waited (or
 * VQ_COAL_MAX completions waited); not deep when it did not, once VQ_COAL_MISSES held batches
 * in a row had no request (a guest at queue depth 32 under TCG does wait for one now and
 * then, and leaving at the first made it batch one time in eight). The window is VQ_COAL_WINDOW times the mean gap between the guest's
 * requests (the guest's own pace: tens of µs under TCG, microseconds under KVM), at most
 * VQ_COAL_HOLD_MAX_NS. At queue depth 1 a probe costs one request one window in
 * VQ_COAL_PROBE, below the 99th percentile.
 *
 * Pure bookkeeping on the caller's clock (no thread, no system call): the caller pushes to
 * the used ring, tells vq_coal_completion, and calls the guest when vq_coal_due says so.
 */
#ifndef NTBLEND_VQCOAL_H
#define NTBLEND_VQCOAL_H

#include <stdbool.h>
#include <stdint.h>

#define VQ_COAL_PROBE 128u             /* batches between two probes while not deep */
#define VQ_COAL_MAX 16u                /* completions one interrupt carries at most */
#define VQ_COAL_MISSES 4u              /* deep until this many held batches in a row had no request */
#define VQ_COAL_WINDOW 2u              /* a hold: this many mean request gaps */
#define VQ_COAL_HOLD_MAX_NS 300000ull  /* and at most this long */
#define VQ_COAL_IDLE 2u                /* a hold ends when no request came for this many of
                                        * the gaps between requests that come during holds */

struct vq_coal {
    uint64_t gap_ns;       /* the mean gap between the guest's requests (1/8 of each new) */
    uint64_t last_request; /* when the last came (0: none yet) */
    uint64_t until;        /* the waiting batch is held until then (0: not held) */
    uint64_t busy_gap_ns;  /* the mean gap between requests that come during one hold */
    uint64_t last_held_request; /* when the last request came during this hold */
    uint32_t waiting;      /* completions on the used ring the guest has not been called for */
    uint32_t probe;        /* batches since the last probe */
    uint32_t misses;       /* held batches in a row that the guest waited for, while deep */
    bool deep;             /* the guest sends requests while completions wait: hold them */
    bool arrived;          /* a request came while the waiting batch was held */
    /* what happened, for the back end's report */
    uint64_t n_completions, n_calls, n_held, n_probes;
};

/* The guest sent a request (taken from the available ring at `now`, ns). */
void vq_coal_request(struct vq_coal *c, uint64_t now);
/* A completion was pushed to the used ring at `now`. */
void vq_coal_completion(struct vq_coal *c, uint64_t now);
/* Call the guest now? (Completions wait, and they are not held or their hold is over.) */
bool vq_coal_due(const struct vq_coal *c, uint64_t now);
/* The guest was called (or needed no call) for every completion that waited. */
void vq_coal_called(struct vq_coal *c);

#endif
