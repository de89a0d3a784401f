/*
 * Windows, the base primitive every layer maps remote memory with: a range of a peer host's
 * address space mapped through consecutive LUT entries of an adapter (allocated, programmed,
 * acknowledged once, rolled back on failure). Which adapter reaches a host is fab_route.c's.
 * The NTB API (src/ntb) and the host agents stand on these; nothing above them programs LUT
 * entries one by one.
 */
#include <errno.h>
#include <stdbool.h>

#include "fabric.h"

int fab_window_map(struct fab *f, uint32_t ai, uint32_t peer_host, uint64_t peer_addr,
                   uint64_t len, int32_t owner, uint32_t flags, struct fab_window *w)
{
    const struct fab_adapter *a = fab_adapter(f, ai);
    if (!len || !w)
        return -EINVAL;
    /* With FAB_LUT_MCAST, peer_host is a multicast group: fab_lut_set checks it. */
    if (!(flags & FAB_LUT_MCAST) && fab_peer_on(f, ai, peer_host) < 0)
        return -ENOTCONN;
    uint64_t base = peer_addr & ~(a->lut_size - 1);
    uint64_t span = peer_addr - base + len;
    uint64_t count = (span + a->lut_size - 1) / a->lut_size;
    if (count > a->lut_entries)
        return -ENOSPC;
    int first = fab_lut_alloc_range(f, ai, (uint32_t)count, owner, flags);
    if (first < 0)
        return first;
    int rc = 0;
    uint32_t k = 0;
    for (; k < count && !rc; k++)
        rc = fab_lut_set_noack(f, ai, (uint32_t)first + k, peer_host,
                               base + (uint64_t)k * a->lut_size, owner, flags);
    *w = (struct fab_window){ .adapter = ai, .first = (uint32_t)first, .count = (uint32_t)count,
                              .offset = peer_addr - base,
                              .bus = a->bar_addr + (uint64_t)first * a->lut_size + (peer_addr - base),
                              .peer_host = peer_host, .peer_addr = peer_addr, .len = len };
    if (rc) {
        fab_window_unmap(f, w, owner);
        return rc;
    }
    fab_map_changed(f);
    return 0;
}

void fab_window_unmap(struct fab *f, const struct fab_window *w, int32_t owner)
{
    bool changed = false;
    for (uint32_t k = 0; k < w->count; k++)
        changed |= fab_lut_clear_noack(f, w->adapter, w->first + k, owner) > 0;
    if (changed)
        fab_map_changed(f);
}
