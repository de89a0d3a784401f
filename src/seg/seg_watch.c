/*
 * A local segment's connection events (seg_local_watch, seg_local_wait_event): the owner's
 * side of SISCI's local segment callbacks. The segment's host agent posts each connection,
 * disconnection and path change of a connector into a page of this process's
 * (struct seg_conn_events); this reads them in order.
 */
#include <errno.h>
#include <stdlib.h>

#include "agent_proto.h"
#include "seg_int.h"

int seg_local_watch(seg_local_t *seg)
{
    if (!seg)
        return -EINVAL;
    if (seg->events)
        return 0;
    struct rt *rt = seg->sd->rt;
    struct agent_rsp rsp;
    int rc = rt_call(rt, AGENT_ALLOC, 4096, 4096, &rsp);
    if (rc)
        return rc;
    struct seg_conn_events *w = rt->ops->ram(rt, rt->host, rsp.a, sizeof *w);
    rc = w ? rt_call(rt, AGENT_SEG_WATCH, seg->id, rsp.a, NULL) : -ENOMEM;
    if (rc) {
        rt_call(rt, AGENT_FREE, rsp.a, 0, NULL);
        return rc;
    }
    seg->events_phys = rsp.a;
    seg->events_seen = atomic_load(&w->head);
    seg->events = w;
    return 0;
}

int seg_local_wait_event(seg_local_t *seg, struct seg_conn_event *ev, int timeout_ms)
{
    if (!seg || !ev || !seg->events)
        return -EINVAL;
    struct seg_conn_events *w = seg->events;
    uint64_t deadline = seg_deadline(timeout_ms);
    for (;;) {
        uint32_t seq = atomic_load(&w->seq);
        uint32_t head = atomic_load(&w->head);
        if (head - seg->events_seen > SEG_CONN_RING) /* fallen behind: the oldest are gone */
            seg->events_seen = head - SEG_CONN_RING;
        if (head != seg->events_seen) {
            uint32_t i = seg->events_seen % SEG_CONN_RING;
            *ev = (struct seg_conn_event){ w->ring[i].event, w->ring[i].node_id,
                                           w->ring[i].adapter };
            /* Overwritten while read (more than a whole ring posted meanwhile): read again. */
            if (atomic_load(&w->head) - seg->events_seen > SEG_CONN_RING)
                continue;
            seg->events_seen++;
            return (int)ev->event;
        }
        if (seg_futex_wait_ms(NULL, &w->seq, seq, deadline))
            return 0;
    }
}
