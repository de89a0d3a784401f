/*
 * SmartIO device segments (include/ntblend/smartio.h, smartio-tocs-2021 §6.1): a borrowed
 * device's BARs as connected segments, and device memory (memory in the device's lender kept
 * for its borrowers, shared by number or private to one connection). Once connected they are
 * plain seg_remote_t: mapping, mapping for a device, DMA and disconnecting are the segment
 * library's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>

#include "seg_int.h"
#include "sio_int.h"

int sio_connect_bar(seg_desc_t *sd, sio_dev_t *dev, int bar, int adapter, seg_remote_t **out)
{
    if (!sd || !dev || !out || bar < 0 || bar >= NTB_BK_BARS || !dev->info.bar[bar].size)
        return -EINVAL;
    const typeof(dev->info.bar[0]) *b = &dev->info.bar[bar];
    seg_remote_t *r;
    int rc = seg_connect_phys(sd, dev->lender, b->addr, b->size, adapter, &r);
    if (rc)
        return rc;
    r->id = (uint32_t)bar;
    r->dev_fn = dev->fn;
    r->dev_bar = bar;
    r->dev_regs = b->regs;
    *out = r;
    return 0;
}

/* Private device memory in this very host: a segment of our own, connected like a remote
 * one so that it maps and unmaps the same way. */
static int private_here(seg_desc_t *sd, size_t size, int adapter, seg_remote_t **out)
{
    uint32_t node = sd->rt->ops->node_id(sd->rt, sd->rt->host);
    seg_local_t *l;
    int rc = seg_create(sd, &l, SEG_ID_AUTO, size);
    if (rc)
        return rc;
    rc = seg_prepare(l, adapter);
    if (!rc)
        rc = seg_set_available(l, adapter);
    if (!rc)
        rc = seg_connect(sd, out, node, seg_local_id(l), adapter, 0);
    if (rc) {
        seg_remove(l);
        return rc;
    }
    (*out)->placed_local = l;
    return 0;
}

int sio_connect_devmem(seg_desc_t *sd, sio_dev_t *dev, uint32_t number, size_t size,
                       unsigned flags, int adapter, seg_remote_t **out)
{
    if (!sd || !dev || !out || !size || size > SIO_DEVMEM_MAX_SIZE ||
        (flags != SIO_DEVMEM_SHARED && flags != SIO_DEVMEM_PRIVATE) || adapter < 0)
        return -EINVAL;
    struct rt *rt = dev->rt;
    uint32_t node = rt->ops->node_id(rt, dev->lender);
    struct agent_rsp rsp;
    if (flags == SIO_DEVMEM_PRIVATE && dev->lender == rt->host)
        return private_here(sd, size, adapter, out);
    struct agent_req q = { .op = flags == SIO_DEVMEM_SHARED ? AGENT_DEV_SEGMENT : AGENT_SEG_ALLOC_AT,
                           .a = flags == SIO_DEVMEM_SHARED ? dev->fn : dev->lender,
                           .b = flags == SIO_DEVMEM_SHARED ? number : size,
                           .c = size };
    int rc = rt_request(rt, &q, &rsp);
    if (rc)
        return rc;
    uint32_t id = (uint32_t)rsp.a;
    rc = seg_connect(sd, out, node, id, adapter, 2000);
    if (flags == SIO_DEVMEM_PRIVATE) {
        if (rc)
            rt_call(rt, AGENT_SEG_FREE_AT, dev->lender, id, NULL);
        else
            (*out)->placed_host = dev->lender, (*out)->placed_id = id;
    }
    return rc;
}
