/*
 * The emulated fabric's multicast groups (the backend's mcast operations): the switches' group
 * table of src/fabric/fab_mcast.c, on behalf of this process (what it creates or joins is held by
 * its pid, and goes with it, unless kept).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "emu.h"

int emu_mcast(struct rt *rt, const struct ntb_mcast_op *op)
{
    struct fab *f = emu_fab(rt);
    int32_t owner = op->keep ? 0 : getpid();
    switch (op->verb) {
    case NTB_MCAST_CREATE: {
        int sw = -1;
        if (op->sw && (sw = fab_switch_by_name(f, op->sw)) < 0)
            return -ENOENT;
        return fab_mcast_create(f, op->name, sw, op->size, owner);
    }
    case NTB_MCAST_REMOVE:
        return fab_mcast_remove(f, op->group, getpid());
    case NTB_MCAST_JOIN:
        return fab_mcast_join(f, op->group, op->host, op->addr, owner);
    case NTB_MCAST_LEAVE:
        return fab_mcast_leave(f, op->group, op->host, getpid());
    }
    return -EINVAL;
}

int emu_mcast_info(struct rt *rt, uint32_t group, struct ntb_mcast_info *out)
{
    struct fab *f = emu_fab(rt);
    if (group >= FAB_MCAST_GROUPS || atomic_load(&fab_mcast(f, group)->state) != FAB_MCAST_USED)
        return -ENOENT;
    const struct fab_mcast *m = fab_mcast(f, group);
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", m->name);
    snprintf(out->sw, sizeof out->sw, "%s", fab_switch(f, m->sw)->name);
    out->size = m->size;
    out->owner_pid = m->owner_pid;
    out->senders = fab_mcast_senders(f, group);
    for (uint32_t h = 0; h < NTB_BK_MAX_HOSTS; h++) {
        bool in = h < f->ctl->nhosts && atomic_load(&m->member[h].joined) == 1;
        out->overlay[h] = in ? m->member[h].overlay : UINT64_MAX;
        out->members += in;
    }
    return 0;
}

int emu_mcast_find(struct rt *rt, const char *name)
{
    return fab_mcast_find(emu_fab(rt), name);
}
