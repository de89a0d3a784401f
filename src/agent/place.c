/*
 * Placement, the agent's part: segments this agent creates in its host's memory on behalf of
 * a process on another host (smartio §4.4: memory near the device or near the CPU), the
 * requests for them in both directions, and their end when the requester or its host goes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "aseg_int.h"
#include "seg_shared.h"
#include "ntblend/seg.h"

/* ---------------------------------------------------------------- placement */


struct placed { /* a segment another host's agent created for one of our processes */
    struct placed *next;
    int32_t client;
    uint32_t host, id;
    uint32_t boot; /* the life of host's the segment belongs to */
};
static struct placed *placed;

struct seg_for { /* MBOX_SEG_CREATE_FOR / MBOX_SEG_REMOVE_FOR */
    uint64_t size;
    uint32_t id;
    uint32_t token; /* CREATE_FOR: the request's token (struct seg_req), 0: none */
};

static int h_seg_create_for(uint32_t from, const void *req, uint32_t len,
                            void *rsp, uint32_t *rsp_len)
{
    struct seg_for r;
    if (len < sizeof r)
        return -EINVAL;
    memcpy(&r, req, sizeof r);
    /* Available on whichever of our adapters faces the requester. */
    int ai = fab_adapter_toward(agent.f, agent.host, from, NULL);
    if (ai < 0)
        return ai;
    int via = ai - (int)aseg_self()->adapter_first;
    uint64_t id = 0, phys, size = 0;
    /* The same request once more (a mailbox message read twice): the same segment. */
    pthread_mutex_lock(&segments.lock);
    for (const struct aseg *s = segments.segs; r.token && s; s = s->next)
        if (s->creator == FOR_HOST(from) && s->token == r.token && !s->removed) {
            id = s->id;
            size = s->size;
        }
    pthread_mutex_unlock(&segments.lock);
    int rc = 0;
    if (!id) {
        rc = aseg_create(FOR_HOST(from), 0, r.size, 0, &id, &phys, &size);
        if (!rc)
            rc = aseg_prepare(FOR_HOST(from), (uint32_t)id, (uint32_t)via);
        if (!rc) {
            pthread_mutex_lock(&segments.lock);
            struct aseg *s = aseg_find((uint32_t)id);
            s->available |= 1ull << via;
            s->token = r.token;
            pthread_mutex_unlock(&segments.lock);
        }
    }
    if (rc)
        return rc;
    struct seg_for out = { .size = size, .id = (uint32_t)id };
    memcpy(rsp, &out, sizeof out);
    *rsp_len = sizeof out;
    return 0;
}

static int h_seg_remove_for(uint32_t from, const void *req, uint32_t len,
                            void *rsp, uint32_t *rsp_len)
{
    struct seg_for r;
    if (len < sizeof r)
        return -EINVAL;
    memcpy(&r, req, sizeof r);
    /* From the mailbox thread: no notifications to send (the requester disconnected first). */
    pthread_mutex_lock(&segments.lock);
    struct aseg *s = aseg_find(r.id);
    int rc = !s ? -ENOENT : s->creator != FOR_HOST(from) ? -EPERM : 0;
    if (!rc) {
        s->removed = true;
        s->available = 0;
        aseg_reap();
    }
    pthread_mutex_unlock(&segments.lock);
    return rc;
}

int aplace_cancel(uint32_t from, uint32_t token)
{
    for (struct aseg *s = segments.segs; s; s = s->next)
        if (s->creator == FOR_HOST(from) && s->token == token && !s->removed) {
            s->removed = true;
            s->available = 0;
            aseg_reap();
            return 0;
        }
    return -ENOENT;
}

int aplace_alloc_at(int32_t client, uint32_t host, uint64_t size, uint64_t *id)
{
    if (host >= agent.f->ctl->nhosts || host == agent.host || !size)
        return -EINVAL;
    struct seg_for q = { .size = size, .token = aseg_new_token() }, out;
    uint32_t got = 0, boot = atomic_load(&fab_host(agent.f, host)->boot_gen);
    bool posted;
    int rc = mbox_call_posted(host, MBOX_SEG_CREATE_FOR, &q, sizeof q, &out, sizeof out, &got,
                              1000, &posted);
    if (!rc && got != sizeof out)
        rc = -EPROTO;
    /* Asked, but no answer: the host may have made a segment for us that nobody knows of. */
    if (posted && (aseg_unanswered(rc) || rc == -EPROTO)) {
        struct seg_cancel n = { .token = q.token, .boot_gen = atomic_load(&aseg_self()->boot_gen) };
        aseg_defer(host, boot, MBOX_SEG_CANCEL, &n, sizeof n);
    }
    if (aseg_unanswered(rc))
        rc = -EHOSTUNREACH;
    if (rc)
        return rc;
    struct placed *p = calloc(1, sizeof *p);
    if (!p) {
        struct seg_for r = { .id = out.id };
        if (aseg_unanswered(mbox_call(host, MBOX_SEG_REMOVE_FOR, &r, sizeof r, NULL, 0, NULL, 1000)))
            aseg_defer(host, boot, MBOX_SEG_REMOVE_FOR, &r, sizeof r);
        return -ENOMEM;
    }
    pthread_mutex_lock(&segments.lock);
    *p = (struct placed){ .next = placed, .client = client, .host = host, .id = out.id,
                          .boot = boot };
    placed = p;
    pthread_mutex_unlock(&segments.lock);
    *id = out.id;
    return 0;
}

int aplace_free_at(int32_t client, uint32_t host, uint32_t id)
{
    struct placed *found = NULL;
    pthread_mutex_lock(&segments.lock);
    for (struct placed **pp = &placed; *pp; pp = &(*pp)->next)
        if ((*pp)->host == host && (*pp)->id == id && (*pp)->client == client) {
            found = *pp;
            *pp = found->next;
            break;
        }
    pthread_mutex_unlock(&segments.lock);
    if (!found)
        return -ENOENT;
    uint32_t boot = found->boot;
    free(found);
    struct seg_for q = { .id = id };
    int rc = mbox_call(host, MBOX_SEG_REMOVE_FOR, &q, sizeof q, NULL, 0, NULL, 1000);
    if (!aseg_unanswered(rc))
        return rc;
    aseg_defer(host, boot, MBOX_SEG_REMOVE_FOR, &q, sizeof q); /* it goes once host hears */
    return 0;
}

/* Segments we created for `host` go with its borrows (its host died or gave them back). */
void aplace_host_gone(uint32_t host)
{
    aseg_client_gone(FOR_HOST(host));
}

/* Our process is gone: the segments we asked others to create for it too. */
void aplace_client_gone(int32_t client)
{
    for (;;) {
        uint32_t host = 0, id = 0;
        bool any = false;
        pthread_mutex_lock(&segments.lock);
        for (struct placed *p = placed; p; p = p->next)
            if (p->client == client) {
                host = p->host;
                id = p->id;
                any = true;
            }
        pthread_mutex_unlock(&segments.lock);
        if (!any || aplace_free_at(client, host, id) == -ENOENT)
            break;
    }
}

void aplace_register(void)
{
    mbox_register(MBOX_SEG_CREATE_FOR, h_seg_create_for);
    mbox_register(MBOX_SEG_REMOVE_FOR, h_seg_remove_for);
}
