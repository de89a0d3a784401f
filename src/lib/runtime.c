/*
 * libntblend's per-process runtime: see runtime.h. One per process, started on first use on
 * the backend ntb_backend() names; what it knows of the hardware it knows through that
 * backend's table (rt->ops), whose own state is rt->bk.
 */
#include <errno.h>
#include <stdlib.h>

#include "runtime.h"

static pthread_mutex_t rt_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rt *the_rt;

/* ---------------------------------------------------------------- window mappings */

int rt_window_open(struct rt *rt, uint32_t adapter, uint32_t peer_host, uint64_t peer_addr,
                   uint64_t len, bool readonly, struct rt_window *out)
{
    *out = (struct rt_window){ 0 };
    int rc = rt->ops->window_map(rt, adapter, peer_host, peer_addr, len, 0, &out->w);
    if (rc)
        return rc;
    out->ptr = rt->ops->window_cpu_map(rt, &out->w, readonly, &out->map);
    if (!out->ptr) {
        rc = -errno;
        rt->ops->window_unmap(rt, &out->w);
        out->map = NULL;
        return rc;
    }
    return 0;
}

void rt_window_close(struct rt *rt, struct rt_window *w)
{
    if (!w->map)
        return;
    rt->ops->window_cpu_unmap(rt, w->map);
    rt->ops->window_unmap(rt, &w->w);
    w->map = NULL;
    w->ptr = NULL;
}

/* ---------------------------------------------------------------- lifetime */

int rt_request(struct rt *rt, const struct agent_req *req, struct agent_rsp *rsp)
{
    struct agent_rsp tmp;
    return rt->ops->agent_call(rt, req, rsp ? rsp : &tmp);
}

int rt_call(struct rt *rt, uint32_t op, uint64_t a, uint64_t b, struct agent_rsp *rsp)
{
    struct agent_req req = { .op = op, .a = a, .b = b };
    return rt_request(rt, &req, rsp);
}

struct rt *rt_get(void)
{
    pthread_mutex_lock(&rt_lock);
    if (!the_rt) {
        struct rt *rt = calloc(1, sizeof *rt);
        int rc = rt ? 0 : -ENOMEM;
        if (rt) {
            rt->ops = ntb_backend();
            rc = rt->ops->start(rt);
        }
        if (rc) {
            free(rt);
            pthread_mutex_unlock(&rt_lock);
            errno = -rc;
            return NULL;
        }
        the_rt = rt;
    }
    the_rt->refs++;
    struct rt *rt = the_rt;
    pthread_mutex_unlock(&rt_lock);
    return rt;
}

void rt_put(struct rt *rt)
{
    pthread_mutex_lock(&rt_lock);
    if (--rt->refs > 0) {
        pthread_mutex_unlock(&rt_lock);
        return;
    }
    the_rt = NULL;
    pthread_mutex_unlock(&rt_lock);
    rt->ops->stop(rt);
    free(rt);
}

