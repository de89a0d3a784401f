/*
 * SmartIO multicast (include/ntblend/smartio_mcast.h): the switches' groups through the
 * backend's mcast operations, a borrowed device's mapping of a group (its lender's adapter
 * gets a translation entry that targets the group: AGENT_DEV_MAP with AGENT_MAP_MCAST), and
 * this host's own mapping of a group for its DMA engine.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ntblend/smartio_mcast.h"
#include "sio_int.h"

struct sio_mcast_map {
    struct rt *rt;
    struct ntb_window w;
};

/* The runtime, when its backend has multicast; NULL + errno (EOPNOTSUPP: it has none). */
static struct rt *mc_rt(void)
{
    struct rt *rt = rt_get();
    if (rt && !rt->ops->mcast) {
        rt_put(rt);
        errno = EOPNOTSUPP;
        return NULL;
    }
    return rt;
}

/* What a process creates or joins is its own while it is attached to its host (the agent gives
 * it back when the process goes): the first such thing keeps the runtime, for good. */
static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rt *hold;

static int run_op(struct rt *rt, const struct ntb_mcast_op *op)
{
    int rc = rt->ops->mcast(rt, op);
    if (rc >= 0 && !op->keep && (op->verb == NTB_MCAST_CREATE || op->verb == NTB_MCAST_JOIN)) {
        pthread_mutex_lock(&hold_lock);
        if (!hold)
            hold = rt_get();
        pthread_mutex_unlock(&hold_lock);
    }
    return rc;
}

static int mc_op(const struct ntb_mcast_op *op)
{
    struct rt *rt = mc_rt();
    if (!rt)
        return -errno;
    int rc = run_op(rt, op);
    rt_put(rt);
    return rc;
}

int sio_mcast_create(const char *name, size_t size, const char *sw, unsigned flags)
{
    if (!name || flags & ~SIO_MCAST_KEEP)
        return -EINVAL;
    struct ntb_mcast_op op = { .verb = NTB_MCAST_CREATE, .name = name, .sw = sw, .size = size,
                               .keep = flags & SIO_MCAST_KEEP };
    return mc_op(&op);
}

int sio_mcast_remove(uint32_t group)
{
    struct ntb_mcast_op op = { .verb = NTB_MCAST_REMOVE, .group = group };
    return mc_op(&op);
}

int sio_mcast_find(const char *name)
{
    struct rt *rt = mc_rt();
    if (!rt)
        return -errno;
    int rc = name ? rt->ops->mcast_find(rt, name) : -EINVAL;
    rt_put(rt);
    return rc;
}

/* Group `group`'s record from the backend into *info (may be NULL). */
static int mc_info(struct rt *rt, uint32_t group, struct ntb_mcast_info *info)
{
    struct ntb_mcast_info *i = info ? info : malloc(sizeof *i);
    if (!i)
        return -ENOMEM;
    int rc = rt->ops->mcast_info(rt, group, i);
    if (i != info)
        free(i);
    return rc;
}

static void to_public(uint32_t id, const struct ntb_mcast_info *i, struct sio_mcast_info *o)
{
    memset(o, 0, sizeof *o);
    o->id = id;
    memcpy(o->name, i->name, sizeof o->name - 1);
    memcpy(o->sw, i->sw, sizeof o->sw - 1);
    o->size = i->size;
    o->members = i->members;
    o->senders = i->senders;
    o->owner_pid = i->owner_pid > 0 ? (uint32_t)i->owner_pid : 0;
}

int sio_mcast_info(uint32_t group, struct sio_mcast_info *out)
{
    struct rt *rt = mc_rt();
    if (!rt)
        return -errno;
    struct ntb_mcast_info *i = malloc(sizeof *i);
    int rc = !out ? -EINVAL : !i ? -ENOMEM : rt->ops->mcast_info(rt, group, i);
    if (!rc)
        to_public(group, i, out);
    free(i);
    rt_put(rt);
    return rc;
}

int sio_mcast_list(struct sio_mcast_info *out, int max)
{
    struct rt *rt = mc_rt();
    if (!rt)
        return -errno;
    struct ntb_mcast_info *i = malloc(sizeof *i);
    int n = 0;
    for (uint32_t g = 0; i && g < SIO_MCAST_GROUPS; g++)
        if (rt->ops->mcast_info(rt, g, i) == 0) {
            if (out && n < max)
                to_public(g, i, &out[n]);
            n++;
        }
    rt_put(rt);
    int rc = i ? n : -ENOMEM;
    free(i);
    return rc;
}

/* ---------------------------------------------------------------- members */

/* Host index of node_id (-ENOENT none), then the operation. */
static int member_op(enum ntb_mcast_verb verb, uint32_t group, uint32_t node_id, uint64_t addr,
                     unsigned flags)
{
    struct rt *rt = mc_rt();
    if (!rt)
        return -errno;
    int h = rt->ops->host_by_node(rt, node_id);
    int rc = h < 0 ? -ENOENT : flags & ~SIO_MCAST_KEEP ? -EINVAL : 0;
    struct ntb_mcast_op op = { .verb = verb, .group = group, .host = (uint32_t)h, .addr = addr,
                               .keep = flags & SIO_MCAST_KEEP };
    if (!rc)
        rc = run_op(rt, &op);
    rt_put(rt);
    return rc;
}

int sio_mcast_join(uint32_t group, uint32_t node_id, uint64_t addr, unsigned flags)
{
    return member_op(NTB_MCAST_JOIN, group, node_id, addr, flags);
}

int sio_mcast_leave(uint32_t group, uint32_t node_id)
{
    return member_op(NTB_MCAST_LEAVE, group, node_id, 0, 0);
}

int sio_mcast_member(uint32_t group, uint32_t node_id, uint64_t *addr)
{
    struct rt *rt = mc_rt();
    if (!rt)
        return -errno;
    struct ntb_mcast_info *i = malloc(sizeof *i);
    int h = rt->ops->host_by_node(rt, node_id);
    int rc = !i ? -ENOMEM : h < 0 || h >= NTB_BK_MAX_HOSTS ? -ENOENT : mc_info(rt, group, i);
    if (!rc && i->overlay[h] == UINT64_MAX)
        rc = -ENOENT;
    if (!rc && addr)
        *addr = i->overlay[h];
    free(i);
    rt_put(rt);
    return rc;
}

/* ---------------------------------------------------------------- senders */

/* Is [off, off + size) in group's window, and has the group members? 0, -EINVAL, -ENXIO,
 * -ENOENT. */
static int sendable(struct rt *rt, uint32_t group, size_t off, size_t size)
{
    struct ntb_mcast_info *i = malloc(sizeof *i);
    int rc = i ? mc_info(rt, group, i) : -ENOMEM;
    if (!rc && (!size || off >= i->size || size > i->size - off))
        rc = -EINVAL;
    else if (!rc && !i->members)
        rc = -ENXIO;
    free(i);
    return rc;
}

int sio_map_mcast(sio_dev_t *d, uint32_t group, size_t off, size_t size, uint64_t *ioaddr,
                  sio_dma_t **out)
{
    if (!d || !ioaddr || !out)
        return -EINVAL;
    if (!d->rt->ops->mcast)
        return -EOPNOTSUPP;
    int rc = sendable(d->rt, group, off, size);
    if (rc)
        return rc;
    return smartio_map_host(d, AGENT_MAP_MCAST | group, off, size, ioaddr, out);
}

int sio_mcast_map(uint32_t group, size_t off, size_t size, uint64_t *bus, sio_mcast_map_t **out)
{
    if (!bus || !out)
        return -EINVAL;
    struct rt *rt = mc_rt();
    if (!rt)
        return -errno;
    struct sio_mcast_map *m = calloc(1, sizeof *m);
    int rc = m ? sendable(rt, group, off, size) : -ENOMEM;
    if (!rc)
        rc = -EHOSTUNREACH;
    /* The adapter whose cable leads to the group's switches takes the entries. */
    for (int i = 0, a; rc == -EHOSTUNREACH && (a = rt->ops->adapter(rt, rt->host, i)) >= 0; i++) {
        rc = rt->ops->window_map(rt, (uint32_t)a, group, off, size, NTB_WIN_MCAST | NTB_WIN_DMA,
                                 &m->w);
        if (rc == -ENOTCONN)
            rc = -EHOSTUNREACH;
    }
    if (rc) {
        free(m);
        rt_put(rt);
        return rc;
    }
    m->rt = rt; /* the reference goes with the mapping */
    *bus = m->w.bus;
    *out = m;
    return 0;
}

int sio_mcast_unmap(sio_mcast_map_t *m)
{
    if (!m)
        return -EINVAL;
    m->rt->ops->window_unmap(m->rt, &m->w);
    rt_put(m->rt);
    free(m);
    return 0;
}
