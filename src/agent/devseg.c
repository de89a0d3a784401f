/*
 * Device memory segments, the agent's part (smartio-tocs-2021 §6.1): memory in a device's
 * lender that every borrower of the device connects to by the device and a number, e.g. the
 * queues or the rendezvous area that several hosts sharing one NVMe agree on. The lender's
 * agent keeps the table (function, number) -> segment, creates a segment on the first request
 * and drops them all when the device's last borrower has returned it. Requests from another
 * host come over the mailbox; the requester then connects like to any other segment.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "aseg_int.h"

/* Segments of the table are created under this tag, not a process's: they outlive any one
 * borrower. */
#define DEVSEG_CREATOR (-50)
#define DEVSEG_MAX_SIZE (64ull << 20)

struct devseg {
    struct devseg *next;
    uint32_t fn, number, id;
};
static struct devseg *devsegs; /* under segments.lock */

struct devseg_req {
    uint32_t fn, number;
    uint64_t size;
};

static bool borrows(uint32_t fn, uint32_t host)
{
    uint64_t w = atomic_load(&fab_func(agent.f, fn)->lend_borrowers[host / 64]);
    return (w >> (host % 64)) & 1;
}

static bool borrowed(uint32_t fn)
{
    struct fab_function *f = fab_func(agent.f, fn);
    for (size_t i = 0; i < sizeof f->lend_borrowers / sizeof f->lend_borrowers[0]; i++)
        if (atomic_load(&f->lend_borrowers[i]))
            return true;
    return false;
}

/* The segment of (fn, number), made now with size bytes if there is none: its id. */
static int devseg_get(uint32_t fn, uint32_t number, uint64_t size, uint32_t *id)
{
    if (fn >= agent.f->ctl->nfuncs || fab_func(agent.f, fn)->host != agent.host)
        return -ENODEV;
    if (!size || size > DEVSEG_MAX_SIZE)
        return -EINVAL;
    pthread_mutex_lock(&segments.lock);
    for (const struct devseg *d = devsegs; d; d = d->next) {
        const struct aseg *s = d->fn == fn && d->number == number ? aseg_find(d->id) : NULL;
        if (s && !s->removed) {
            *id = d->id;
            pthread_mutex_unlock(&segments.lock);
            return 0;
        }
    }
    pthread_mutex_unlock(&segments.lock);
    struct devseg *d = calloc(1, sizeof *d);
    if (!d)
        return -ENOMEM;
    uint64_t sid, phys, got;
    int rc = aseg_create(DEVSEG_CREATOR, 0, size, 0, &sid, &phys, &got);
    for (uint32_t a = 0; !rc && a < aseg_self()->nadapters; a++) {
        rc = aseg_prepare(DEVSEG_CREATOR, (uint32_t)sid, a);
        if (!rc)
            rc = aseg_available(DEVSEG_CREATOR, (uint32_t)sid, a, true);
    }
    if (rc) {
        free(d);
        return rc;
    }
    *d = (struct devseg){ .fn = fn, .number = number, .id = (uint32_t)sid };
    pthread_mutex_lock(&segments.lock);
    d->next = devsegs;
    devsegs = d;
    pthread_mutex_unlock(&segments.lock);
    /* The last borrower may have returned the device while the segment was made: its
     * adevseg_idle() ran before the segment was in the table, so it goes now. */
    if (!borrowed(fn)) {
        adevseg_idle(fn);
        return -EACCES;
    }
    *id = d->id;
    return 0;
}

static int h_dev_segment(uint32_t from, const void *req, uint32_t len, void *rsp,
                         uint32_t *rsp_len)
{
    struct devseg_req r;
    if (len < sizeof r)
        return -EINVAL;
    memcpy(&r, req, sizeof r);
    if (r.fn >= agent.f->ctl->nfuncs || !borrows(r.fn, from))
        return -EACCES; /* only the device's borrowers share its memory */
    uint32_t id;
    int rc = devseg_get(r.fn, r.number, r.size, &id);
    if (rc)
        return rc;
    memcpy(rsp, &id, sizeof id);
    *rsp_len = sizeof id;
    return 0;
}

int adevseg_request(uint32_t fn, uint32_t number, uint64_t size, uint64_t *id)
{
    if (fn >= agent.f->ctl->nfuncs)
        return -ENODEV;
    uint32_t lender = fab_func(agent.f, fn)->host, got = 0, out = 0;
    int rc;
    if (!alend_held(fn))
        return -EACCES; /* only the device's borrowers share its memory */
    if (lender == agent.host) {
        rc = devseg_get(fn, number, size, &out);
    } else {
        struct devseg_req r = { .fn = fn, .number = number, .size = size };
        rc = mbox_call(lender, MBOX_DEV_SEGMENT, &r, sizeof r, &out, sizeof out, &got, 1000);
        if (!rc && got != sizeof out)
            rc = -EPROTO;
        if (rc == -ETIMEDOUT || rc == -ENOLINK || rc == -ENOTCONN)
            rc = -EHOSTUNREACH;
    }
    if (!rc)
        *id = out;
    return rc;
}

void adevseg_idle(uint32_t fn)
{
    pthread_mutex_lock(&segments.lock);
    for (struct devseg **pp = &devsegs; *pp;) {
        struct devseg *d = *pp;
        if (d->fn != fn) {
            pp = &d->next;
            continue;
        }
        *pp = d->next;
        /* No borrower is left to be told: the memory goes once the last mapping of it does. */
        struct aseg *s = aseg_find(d->id);
        if (s) {
            s->removed = true;
            s->available = 0;
        }
        free(d);
    }
    aseg_reap();
    pthread_mutex_unlock(&segments.lock);
}

void adevseg_register(void)
{
    mbox_register(MBOX_DEV_SEGMENT, h_dev_segment);
}
