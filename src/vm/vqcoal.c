/*
 * Interrupt coalescing for a virtqueue's completions (vqcoal.h).
 */
#include "vqcoal.h"

/* A running mean that takes 1/8 of each new gap (the first gap as it is). */
static void mean_gap(uint64_t *mean, uint64_t from, uint64_t now)
{
    if (from && now > from)
        *mean = *mean ? *mean - *mean / 8 + (now - from) / 8 : now - from;
}

void vq_coal_request(struct vq_coal *c, uint64_t now)
{
    mean_gap(&c->gap_ns, c->last_request, now);
    c->last_request = now;
    if (c->waiting && c->until) {
        if (c->arrived) /* the guest's pace while it is busy */
            mean_gap(&c->busy_gap_ns, c->last_held_request, now);
        c->arrived = true;
        c->last_held_request = now;
    }
}

void vq_coal_completion(struct vq_coal *c, uint64_t now)
{
    c->n_completions++;
    if (c->waiting++)
        return;
    /* The first of a batch: hold it (deep, or a probe) or not. */
    c->until = 0;
    c->arrived = false;
    bool probe = !c->deep && ++c->probe >= VQ_COAL_PROBE;
    if (!c->deep && !probe)
        return;
    uint64_t hold = c->gap_ns * VQ_COAL_WINDOW;
    if (hold > VQ_COAL_HOLD_MAX_NS)
        hold = VQ_COAL_HOLD_MAX_NS;
    if (!hold)
        return; /* no pace known yet */
    if (probe) {
        c->probe = 0;
        c->n_probes++;
    }
    c->until = now + hold;
    c->n_held++;
}

bool vq_coal_due(const struct vq_coal *c, uint64_t now)
{
    if (!c->waiting)
        return false;
    if (!c->until || c->waiting >= VQ_COAL_MAX || now >= c->until)
        return true;
    /* The guest sent requests during the hold and then stopped for longer than it takes
     * between two when busy: it waits for these now. */
    return c->arrived && c->busy_gap_ns && now - c->last_held_request > VQ_COAL_IDLE * c->busy_gap_ns;
}

void vq_coal_called(struct vq_coal *c)
{
    if (!c->waiting)
        return;
    if (c->until) {
        if (c->arrived || c->waiting >= VQ_COAL_MAX) { /* the guest had work without these */
            c->deep = true;
            c->misses = 0;
        } else if (!c->deep || ++c->misses >= VQ_COAL_MISSES) { /* it waited for them */
            c->deep = false;
            c->misses = 0;
        }
    }
    c->waiting = 0;
    c->until = 0;
    c->arrived = false;
    c->n_calls++;
}
