/*
 * Device lending, a target's side: IOMMU mappings a peer asks for (MBOX_INBOUND_MAP) so that a
 * device it borrowed, whose traffic arrives through one of our adapters, reaches our memory.
 * Only our adapters' requester IDs and only our RAM; kept per asking host and counted, so a
 * repeated request does not stack and a host that dies loses them (lend_lease.c). Our own
 * borrows' mappings here (this host's RAM, MSI region or a VM's RAM, for devices this host
 * borrows) are kept and counted the same way, as this host's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lend_int.h"

/* Is rid one of our own adapters' (the requester traffic through an NTB arrives as)? */
static bool own_adapter_rid(uint32_t rid)
{
    const struct fab_host *self = fab_host(agent.f, agent.host);
    for (uint32_t i = 0; i < self->nadapters; i++)
        if (fab_adapter(agent.f, self->adapter_first + i)->rid == rid)
            return true;
    return false;
}

static bool same_inbound(const struct inbound *i, uint32_t rid, uint64_t addr, uint64_t size)
{
    return i->rid == rid && i->addr == addr && i->size == size;
}

/* Remove one record and, when no host needs that mapping any more, the mapping. Lock held. */
void lend_inbound_put(struct inbound **pp)
{
    struct inbound *i = *pp;
    if (--i->count)
        return;
    *pp = i->next;
    bool shared = false;
    for (const struct inbound *o = lending.inbounds; o && !shared; o = o->next)
        shared = same_inbound(o, i->rid, i->addr, i->size);
    if (!shared)
        fab_iommu_unmap(agent.f, agent.host, (uint16_t)i->rid, i->addr, i->size);
    free(i);
}

int lend_inbound(uint32_t from, const struct inbound_req *q, bool map)
{
    struct inbound_req r = *q;
    int rc = 0;
    pthread_mutex_lock(&lending.lock);
    struct inbound **pp = &lending.inbounds, *mine = NULL;
    bool mapped = false;
    for (; *pp; pp = &(*pp)->next) {
        if (!same_inbound(*pp, r.rid, r.addr, r.size))
            continue;
        mapped = true;
        if ((*pp)->host == from) {
            mine = *pp;
            break;
        }
    }
    if (!map) {
        if (mine)
            lend_inbound_put(pp);
        else
            rc = -ENOENT;
        goto out;
    }
    if (mine) {
        mine->count++;
        goto out;
    }
    if (!mapped) {
        rc = fab_iommu_map(agent.f, agent.host, (uint16_t)r.rid, r.addr, r.addr, r.size,
                           FAB_PERM_READ | FAB_PERM_WRITE, 0);
        if (rc) /* -EEXIST: overlaps a different mapping of that requester; refuse */
            goto out;
    }
    mine = calloc(1, sizeof *mine);
    if (!mine) {
        if (!mapped)
            fab_iommu_unmap(agent.f, agent.host, (uint16_t)r.rid, r.addr, r.size);
        rc = -ENOMEM;
        goto out;
    }
    *mine = (struct inbound){ .next = lending.inbounds, .host = from, .count = 1, .rid = r.rid,
                              .addr = r.addr, .size = r.size,
                              .boot = atomic_load(&fab_host(agent.f, from)->boot_gen) };
    lending.inbounds = mine;
out:
    pthread_mutex_unlock(&lending.lock);
    return rc;
}

/* A peer's request to open (or close) our IOMMU for traffic entering through one of our
 * adapters. Only our adapters' requester IDs and only our RAM: a peer cannot open the IOMMU
 * for anything else, and what it opened goes with it (dev_inbound_host_gone). */
static int h_inbound(uint32_t from, const void *req, uint32_t len, void *rsp,
                     uint32_t *rsp_len, bool map)
{
    (void)rsp;
    (void)rsp_len;
    struct inbound_req r;
    if (len < sizeof r)
        return -EINVAL;
    memcpy(&r, req, sizeof r);
    if (!r.size || (r.addr | r.size) & 4095 ||
        !fab_host_ram_range(agent.f, agent.host, r.addr, r.size) || !own_adapter_rid(r.rid))
        return -EINVAL;
    return lend_inbound(from, &r, map);
}

static int h_inbound_map(uint32_t from, const void *req, uint32_t len,
                         void *rsp, uint32_t *rsp_len)
{
    return h_inbound(from, req, len, rsp, rsp_len, true);
}

static int h_inbound_unmap(uint32_t from, const void *req, uint32_t len,
                           void *rsp, uint32_t *rsp_len)
{
    return h_inbound(from, req, len, rsp, rsp_len, false);
}

void lend_register_inbound(void)
{
    mbox_register(MBOX_INBOUND_MAP, h_inbound_map);
    mbox_register(MBOX_INBOUND_UNMAP, h_inbound_unmap);
}
