/*
 * The owner's view of its segments' connections (SISCI's local segment events): a process that
 * watches a segment (seg_local_watch) hands its agent a page of its own, and the agent posts
 * there each connection made to the segment, each one dropped (disconnected, or gone with its
 * host), and each connector whose path went down or came back. The connections themselves
 * are the ones the agents already keep (aseg.c, over the mailboxes): nothing is sent for this.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>

#include "aseg_int.h"
#include "seg_shared.h"
#include "ntblend/seg.h"

int aseg_watch(int32_t client, uint32_t id, uint64_t phys)
{
    /* Only into memory of the client's own, as with a connection's event word. */
    if (!amem_owned(phys, sizeof(struct seg_conn_events), client, NULL, NULL))
        return -EINVAL;
    int rc = 0;
    pthread_mutex_lock(&segments.lock);
    struct aseg *s = aseg_find(id);
    if (!s)
        rc = -ENOENT;
    else if (s->creator != client)
        rc = -EPERM;
    else
        s->events = phys;
    pthread_mutex_unlock(&segments.lock);
    return rc;
}

void aseg_post_conn(const struct aseg *s, const struct conn_in *c, uint32_t ev)
{
    if (!s->events || s->removed)
        return;
    struct fab *f = agent.f;
    struct seg_conn_events *w = fab_ram(f, agent.host, s->events, sizeof *w);
    if (!w)
        return;
    uint32_t h = atomic_load(&w->head);
    w->ring[h % SEG_CONN_RING].event = ev;
    w->ring[h % SEG_CONN_RING].node_id = fab_host(f, c->from_host)->node_id;
    w->ring[h % SEG_CONN_RING].adapter = c->via == UINT32_MAX ? 0 : c->via; /* ours */
    atomic_store(&w->head, h + 1);
    atomic_fetch_add(&w->seq, 1);
    fab_futex_wake(&w->seq, INT_MAX);
}

void aseg_watch_paths(void)
{
    struct fab *f = agent.f;
    for (struct conn_in *c = segments.in; c; c = c->next) {
        if (c->via == UINT32_MAX || c->from_adapter == UINT32_MAX)
            continue; /* a process of this host: no path to lose */
        bool up = fab_path_up(f, aseg_self()->adapter_first + c->via, c->from_adapter, NULL);
        if (up == c->lost) {
            c->lost = !up;
            aseg_post_conn(c->seg, c, up ? SEG_EVENT_RESTORED : SEG_EVENT_LOST);
        }
    }
}
