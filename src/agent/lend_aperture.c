/*
 * Device lending, the borrower's DMA apertures (smartio §4.3 "DMA Window"): a window of a
 * lender's adapter facing us onto an I/O virtual range of our IOMMU domain for traffic from
 * that lender, prepared once and shared by every device we borrow from it, a slice of it per
 * process; the process's streaming mappings then go into our IOMMU with no request per
 * mapping (SmartIO's sio_stream_map). The lender lets each device through onto it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lend_int.h"

static struct aperture *aperture_of(uint32_t lender)
{
    for (struct aperture *a = lending.apertures; a; a = a->next)
        if (a->lender == lender)
            return a;
    return NULL;
}

/* client's device fn no longer reaches the aperture; the client's slice goes with its last
 * device there, the aperture with the last device of any. borrow_lock held. */
void lend_aperture_put(int32_t client, uint32_t fn)
{
    pthread_mutex_lock(&lending.lock);
    struct ahold *h = NULL;
    for (struct ahold **pp = &lending.aholds; *pp; pp = &(*pp)->next)
        if ((*pp)->client == client && (*pp)->fn == fn) {
            h = *pp;
            *pp = h->next;
            break;
        }
    pthread_mutex_unlock(&lending.lock);
    if (!h)
        return;
    uint32_t lender = lend_func(fn)->host;
    struct lend_req r = { .fn = fn, .id = h->id };
    struct lend_rsp out;
    lend_to_lender(MBOX_DEV_UNMAP, &r, &out); /* the window goes with the lender's last device */
    free(h);
    pthread_mutex_lock(&lending.lock);
    bool client_left = false, any_left = false;
    for (const struct ahold *o = lending.aholds; o; o = o->next)
        if (lend_func(o->fn)->host == lender) {
            any_left = true;
            client_left |= o->client == client;
        }
    struct aperture *a = aperture_of(lender);
    for (int k = 0; a && !client_left && k < APERTURE_SLICES; k++)
        if (a->slice[k] == client)
            a->slice[k] = 0; /* its IOMMU mappings there are gone: unmapped, or reaped */
    if (a && !any_left)
        for (struct aperture **pp = &lending.apertures; *pp; pp = &(*pp)->next)
            if (*pp == a) {
                *pp = a->next;
                free(a);
                break;
            }
    pthread_mutex_unlock(&lending.lock);
}

int alend_aperture(int32_t client, uint32_t fn, bool take, uint64_t *io, uint64_t *iova,
                   uint64_t *size)
{
    struct fab *f = agent.f;
    if (fn >= f->ctl->nfuncs)
        return -ENODEV;
    uint32_t lender = lend_func(fn)->host;
    if (lender == agent.host)
        return -EINVAL; /* a function of our own reaches our domain directly */
    if (!fab_host(f, agent.host)->iommu)
        return -EOPNOTSUPP; /* no domain to map into: the lender maps each buffer */
    int lai = fab_adapter_toward(f, lender, agent.host, NULL);
    if (lai < 0)
        return lai;
    pthread_mutex_lock(&lending.borrow_lock);
    if (!take) {
        lend_aperture_put(client, fn);
        pthread_mutex_unlock(&lending.borrow_lock);
        return 0;
    }
    pthread_mutex_lock(&lending.lock);
    int rc = lend_find_hold(client, fn, false) ? 0 : -EPERM; /* bind it first */
    bool have = false;
    for (const struct ahold *o = lending.aholds; o && !rc && !have; o = o->next)
        have = o->client == client && o->fn == fn;
    struct aperture *a = rc ? NULL : aperture_of(lender);
    bool fresh = !rc && !a;
    if (fresh) {
        uint64_t lut = fab_adapter(f, (uint32_t)lai)->lut_size;
        a = calloc(1, sizeof *a);
        if (!a)
            rc = -ENOMEM;
        else
            *a = (struct aperture){ .lender = lender,
                                    .iova = APERTURE_IOVA + (uint64_t)lender * APERTURE_STRIDE,
                                    .size = (APERTURE_BYTES + lut - 1) / lut * lut };
    }
    int k = -1;
    for (int i = 0; !rc && i < APERTURE_SLICES && k < 0; i++)
        if (a->slice[i] == client)
            k = i;
    for (int i = 0; !rc && i < APERTURE_SLICES && k < 0; i++)
        if (!a->slice[i])
            k = i;
    if (!rc && k < 0)
        rc = -ENOSPC; /* as many processes as slices drive devices of that lender already */
    struct aperture snap = a ? *a : (struct aperture){ 0 };
    pthread_mutex_unlock(&lending.lock);
    struct ahold *h = NULL;
    if (!rc && !have) {
        /* The lender lets fn through onto the range: its window (the first device's, shared
         * by the rest), fn's requester ID in that adapter's table, its own IOMMU told. */
        struct lend_req r = { .fn = fn, .mode = LEND_MAP_APERTURE, .target = agent.host, .addr = snap.iova,
                              .pages = (uint32_t)(snap.size / 4096) };
        struct lend_rsp out;
        h = calloc(1, sizeof *h);
        rc = h ? lend_to_lender(MBOX_DEV_MAP, &r, &out) : -ENOMEM;
        if (!rc && !fresh && out.ioaddr != snap.io) {
            r.id = out.id;
            lend_to_lender(MBOX_DEV_UNMAP, &r, &out);
            rc = -EBUSY; /* a stale aperture: its devices are being removed */
        }
        if (!rc) {
            *h = (struct ahold){ .client = client, .fn = fn, .id = out.id };
            snap.io = out.ioaddr;
        }
    }
    if (rc) {
        free(h);
        if (fresh)
            free(a);
        pthread_mutex_unlock(&lending.borrow_lock);
        return rc;
    }
    pthread_mutex_lock(&lending.lock);
    if (fresh) {
        a->io = snap.io;
        a->next = lending.apertures;
        lending.apertures = a;
    }
    a->slice[k] = client;
    if (h) {
        h->next = lending.aholds;
        lending.aholds = h;
    }
    pthread_mutex_unlock(&lending.lock);
    pthread_mutex_unlock(&lending.borrow_lock);
    uint64_t slice = snap.size / APERTURE_SLICES & ~4095ull;
    *io = snap.io + (uint64_t)k * slice;
    *iova = snap.iova + (uint64_t)k * slice;
    *size = slice;
    return 0;
}
