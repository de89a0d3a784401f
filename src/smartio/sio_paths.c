/*
 * Multipath (smartio-tocs-2021 §6.3, Fig. 16): the paths from this host to a borrowed device's
 * lender — one per adapter of ours whose port reaches the lender, path 0 the first — which of
 * them a device's later mappings are made over (sio_set_path), and a BAR mapping's second path
 * (sio_bar_failover), onto which the backend moves the CPU mapping while its own is down.
 */
#include <errno.h>

#include "sio_int.h"

int smartio_path(const sio_dev_t *d, int k, int *ai, int *peer_ai)
{
    struct rt *rt = d->rt;
    if (d->lender == rt->host)
        return -EINVAL;
    for (int i = 0, n = 0;; i++) {
        int a = rt->ops->adapter(rt, rt->host, i);
        if (a < 0)
            return -ENOENT;
        int p = rt->ops->peer_on(rt, (uint32_t)a, d->lender);
        if (p < 0)
            continue;
        if (n++ == k) {
            *ai = a;
            *peer_ai = p;
            return 0;
        }
    }
}

void smartio_path_init(sio_dev_t *d)
{
    d->path = -1;
    for (int k = 0, ai, peer; d->ai >= 0 && !smartio_path(d, k, &ai, &peer); k++)
        if (ai == d->ai) {
            d->path = k;
            return;
        }
}

int sio_paths(sio_dev_t *d)
{
    if (!d)
        return -EINVAL;
    int n = 0, ai, peer;
    while (!smartio_path(d, n, &ai, &peer))
        n++;
    return n;
}

int sio_set_path(sio_dev_t *d, int path)
{
    if (!d || path < 0)
        return !d ? -EINVAL : -ENOENT;
    /* A function bound in this host's tree keeps the path its hot-add mapped it over. */
    if (d->mode != SIO_EXCLUSIVE && d->mode != SIO_SHARED)
        return -EOPNOTSUPP;
    int ai, peer;
    int rc = smartio_path(d, path, &ai, &peer);
    if (rc)
        return rc;
    d->ai = ai;
    d->peer_ai = peer;
    d->path = path;
    return 0;
}

int sio_get_path(const sio_dev_t *d) { return d ? d->path : -1; }

bool sio_path_up(sio_dev_t *d, int path)
{
    int ai, peer;
    return d && path >= 0 && !smartio_path(d, path, &ai, &peer) &&
           d->rt->ops->path_up(d->rt, (uint32_t)ai, (uint32_t)peer);
}

int sio_bar_failover(sio_bar_t *m)
{
    if (!m)
        return -EINVAL;
    sio_dev_t *d = m->dev;
    struct rt *rt = d->rt;
    if (!m->win.map || !rt->ops->window_cpu_failover)
        return -EOPNOTSUPP; /* the device is here, or bound in this host's tree */
    if (m->alt.count)
        return -EALREADY;
    for (int k = 0, ai, peer; !smartio_path(d, k, &ai, &peer); k++) {
        if (ai == m->ai)
            continue;
        const typeof(d->info.bar[0]) *b = &d->info.bar[m->bar];
        int rc = rt->ops->window_map(rt, (uint32_t)ai, d->lender, b->addr, b->size, 0, &m->alt);
        if (rc)
            return rc;
        rc = rt->ops->window_cpu_failover(rt, m->win.map, &m->alt);
        if (rc) {
            rt->ops->window_unmap(rt, &m->alt);
            return rc;
        }
        m->alt_ai = ai;
        m->alt_peer_ai = peer;
        return 0;
    }
    return -ENOENT;
}
