/*
 * Interrupts, the agent's part: this host's interrupt pages (one 4 KiB page each, which a
 * trigger writes into), their ids, and connections from other hosts to them. Pages are kept
 * in a pool and never handed back to the allocator, so a stale trigger through an old window
 * can only land on another interrupt page, whose generation tells it apart.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "aseg_int.h"

#define AINTR_MAX 1024u /* interrupt pages per host */
#include "seg_shared.h"
#include "ntblend/seg.h"

/* ---------------------------------------------------------------- interrupts */

static struct aintr *find_intr(uint32_t id)
{
    for (struct aintr *i = segments.intrs; i; i = i->next)
        if (i->id == id && i->creator)
            return i;
    return NULL;
}

/* The page waits in the free list; its generation tells connections it is gone. */
void aintr_retire(struct aintr *it)
{
    struct seg_intr_page *pg = fab_ram(agent.f, agent.host, it->phys, sizeof *pg);
    if (pg)
        atomic_fetch_add(&pg->gen, 1);
    it->creator = 0;
}

int aintr_create(int32_t client, uint32_t id, uint64_t *out_id, uint64_t *phys)
{
    int rc = 0;
    pthread_mutex_lock(&segments.lock);
    if (id == 0) {
        for (id = 1; find_intr(id); id++)
            ;
    } else if (find_intr(id)) {
        rc = -EEXIST;
        goto out;
    }
    /* Interrupt pages are never returned to the allocator: a stale trigger through an old
     * window can only reach another interrupt page (whose generation tells it apart). */
    struct aintr *it = NULL;
    uint32_t pooled = 0;
    for (struct aintr *i = segments.intrs; i; i = i->next, pooled++)
        if (!i->creator && !it)
            it = i;
    if (!it) {
        if (pooled >= AINTR_MAX) { /* the pool only grows: a bound keeps one process from
                                     * taking the host's memory with interrupts */
            rc = -ENOSPC;
            goto out;
        }
        uint64_t p;
        rc = amem_alloc(4096, 4096, SEG_OWNER, &p);
        if (!rc && !(it = calloc(1, sizeof *it))) {
            amem_free(p, SEG_OWNER);
            rc = -ENOMEM;
        }
        if (rc)
            goto out;
        it->phys = p;
        it->next = segments.intrs;
        segments.intrs = it;
        struct fab *f = agent.f;
        for (uint32_t i = 0; i < aseg_self()->nadapters && aseg_self()->iommu; i++)
            fab_iommu_map(f, agent.host, fab_adapter(f, aseg_self()->adapter_first + i)->rid, p, p,
                          4096, FAB_PERM_READ | FAB_PERM_WRITE, 0);
    }
    struct seg_intr_page *pg = fab_ram(agent.f, agent.host, it->phys, sizeof *pg);
    atomic_fetch_add(&pg->gen, 1);
    it->id = id;
    it->creator = client;
    *out_id = id;
    *phys = it->phys;
out:
    pthread_mutex_unlock(&segments.lock);
    return rc;
}

int aintr_remove(int32_t client, uint32_t id)
{
    pthread_mutex_lock(&segments.lock);
    struct aintr *it = find_intr(id);
    int rc = !it ? -ENOENT : it->creator != client ? -EPERM : 0;
    if (!rc)
        aintr_retire(it);
    pthread_mutex_unlock(&segments.lock);
    return rc;
}

static int intr_lookup(uint32_t id, uint64_t *bus)
{
    pthread_mutex_lock(&segments.lock);
    struct aintr *it = find_intr(id);
    if (it)
        *bus = it->phys;
    pthread_mutex_unlock(&segments.lock);
    return it ? 0 : -ENOENT;
}

static int h_intr_connect(uint32_t from, const void *req, uint32_t len,
                          void *rsp, uint32_t *rsp_len)
{
    struct seg_req r = { 0 };
    if (len < SEG_REQ_MIN)
        return -EINVAL;
    memcpy(&r, req, len < sizeof r ? len : sizeof r);
    struct seg_rsp out = { .size = 4096 };
    int rc = intr_lookup(r.id, &out.bus);
    if (!rc) {
        memcpy(rsp, &out, sizeof out);
        *rsp_len = sizeof out;
    }
    return rc;
}

int aintr_connect(uint32_t adapter, uint32_t node, uint32_t id, uint64_t *bus, uint64_t *owner_out)
{
    int owner = aseg_host_of_node(node);
    if (owner < 0)
        return -EHOSTUNREACH;
    *owner_out = (uint64_t)owner;
    if ((uint32_t)owner == agent.host)
        return intr_lookup(id, bus);
    if (adapter >= aseg_self()->nadapters)
        return -ENODEV;
    struct seg_req q = { .id = id, .from_adapter = aseg_self()->adapter_first + adapter };
    struct seg_rsp r;
    uint32_t got = 0;
    int rc = mbox_call((uint32_t)owner, MBOX_INTR_CONNECT, &q, sizeof q, &r, sizeof r, &got, 1000);
    if (rc == -ENOLINK || rc == -ETIMEDOUT || rc == -ENOTCONN)
        return -EHOSTUNREACH;
    if (!rc)
        *bus = r.bus;
    return rc;
}


void aintr_register(void)
{
    mbox_register(MBOX_INTR_CONNECT, h_intr_connect);
}

uint64_t aintr_pool_bytes(void)
{
    uint64_t n = 0;
    pthread_mutex_lock(&segments.lock);
    for (struct aintr *i = segments.intrs; i; i = i->next)
        n++;
    pthread_mutex_unlock(&segments.lock);
    return n * 4096;
}
