/*
 * The control requests of the processes on this host (src/lib/agent_proto.h), one at a time:
 * what each asks of the agent's modules, and what goes back when a process is gone. agent_main.c
 * owns the socket; this file knows nothing of it beyond the descriptor a peer ping answers on
 * from its own thread. Also the one `struct agent` of the process.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent.h"
#include "agent_proto.h"

struct agent agent = { .alloc_lock = PTHREAD_MUTEX_INITIALIZER };

struct peer_ping_job {
    int fd;
    uint32_t peer;
};

/* A peer ping may wait up to a second for a dead link: answer it from its own thread so the
 * control socket keeps serving everyone else. */
static void *peer_ping_thread(void *arg)
{
    struct peer_ping_job *j = arg;
    struct agent_rsp rsp = { 0 };
    uint64_t rtt = 0;
    rsp.rc = mbox_ping(j->peer, &rtt);
    rsp.a = rtt;
    send(j->fd, &rsp, sizeof rsp, MSG_NOSIGNAL);
    close(j->fd);
    free(j);
    return NULL;
}

bool agent_serve(int fd, int32_t pid, const struct agent_req *req, struct agent_rsp *out)
{
    struct agent_rsp rsp = { 0 };
    struct fab_host *h = fab_host(agent.f, agent.host);
    switch (req->op) {
    case AGENT_HELLO:
        rsp.rc = req->a == AGENT_PROTO_VERSION ? 0 : -EPROTO;
        rsp.a = agent.host;
        rsp.b = atomic_load(&h->boot_gen);
        break;
    case AGENT_ALLOC:
        rsp.rc = amem_alloc(req->a, req->b, pid, &rsp.a);
        break;
    case AGENT_FREE: {
        /* Not while a connection posts its events there: they would land in whatever the
         * memory becomes next. */
        uint64_t at = 0, len = 0;
        bool busy = amem_owned(req->a, 1, pid, &at, &len) && at == req->a &&
                    aseg_events_in(pid, at, len);
        rsp.rc = busy ? -EBUSY : amem_free(req->a, pid);
        break;
    }
    case AGENT_PING:
        rsp.a = (uint64_t)getpid();
        rsp.b = atomic_load(&h->boot_gen);
        pthread_mutex_lock(&agent.alloc_lock);
        rsp.c = agent.allocated;
        pthread_mutex_unlock(&agent.alloc_lock);
        break;
    case AGENT_PEER_PING: {
        struct peer_ping_job *j = malloc(sizeof *j);
        pthread_t t;
        if (j && (j->fd = dup(fd)) >= 0) {
            j->peer = (uint32_t)req->a;
            if (pthread_create(&t, NULL, peer_ping_thread, j) == 0) {
                pthread_detach(t);
                return false;
            }
            close(j->fd);
        }
        free(j);
        rsp.rc = -ENOMEM;
        break;
    }
    case AGENT_DEV_HOTADD:
        rsp.rc = ahot_add((uint32_t)req->a);
        break;
    case AGENT_DEV_HOTREMOVE:
        rsp.rc = ahot_remove((uint32_t)req->a);
        break;
    case AGENT_MEMORY: {
        uint64_t procs, tagged, pool = aintr_pool_bytes();
        amem_usage(&procs, &tagged);
        rsp.a = procs;
        rsp.b = tagged - pool;
        rsp.c = pool;
        break;
    }
    case AGENT_STATS:
        rsp.a = agent.nclients;
        rsp.b = atomic_load(&agent.mbox_handled);
        rsp.c = atomic_load(&agent.dma_done);
        break;
    case AGENT_SEG_CREATE:
        rsp.rc = aseg_create(pid, (uint32_t)req->a, req->b, req->c, &rsp.a, &rsp.b, &rsp.c);
        break;
    case AGENT_SEG_WATCH:
        rsp.rc = aseg_watch(pid, (uint32_t)req->a, req->b);
        break;
    case AGENT_SEG_PREPARE:
        rsp.rc = aseg_prepare(pid, (uint32_t)req->a, (uint32_t)req->b);
        break;
    case AGENT_SEG_AVAILABLE:
        rsp.rc = aseg_available(pid, (uint32_t)req->a, (uint32_t)req->b, req->c != 0);
        break;
    case AGENT_SEG_REMOVE:
        rsp.rc = aseg_remove(pid, (uint32_t)req->a);
        break;
    case AGENT_SEG_CONNECT:
        rsp.rc = aseg_connect(pid, req->flags, (uint32_t)req->a, (uint32_t)req->b, req->c,
                              &rsp.a, &rsp.b, &rsp.c);
        break;
    case AGENT_SEG_DISCONNECT:
        rsp.rc = aseg_disconnect(pid, (uint32_t)req->a, (uint32_t)req->b);
        break;
    case AGENT_INTR_CREATE:
        rsp.rc = aintr_create(pid, (uint32_t)req->a, &rsp.a, &rsp.b);
        break;
    case AGENT_INTR_REMOVE:
        rsp.rc = aintr_remove(pid, (uint32_t)req->a);
        break;
    case AGENT_DEV_AVAILABLE:
        rsp.rc = alend_available(pid, (uint32_t)req->a, req->b != 0);
        break;
    case AGENT_DEV_BORROW:
        rsp.rc = alend_borrow(pid, (uint32_t)req->a, (uint32_t)req->b, req->c != 0);
        break;
    case AGENT_DEV_SHARE:
        rsp.rc = alend_share(pid, (uint32_t)req->a);
        break;
    case AGENT_DEV_RETURN:
        rsp.rc = alend_return(req->c ? 0 : pid, (uint32_t)req->a);
        break;
    case AGENT_DEV_MAP: {
        uint32_t via = (uint32_t)(req->a >> 32); /* the lender's adapter + 1, 0: any */
        rsp.rc = via > UINT16_MAX ? -EINVAL
                                  : alend_map(pid, (uint32_t)req->a, (uint32_t)req->b, req->c,
                                              (uint64_t)req->flags * 4096, (int)via - 1, &rsp.a, &rsp.b);
        break;
    }
    case AGENT_DEV_MAP_AT:
        rsp.rc = alend_map_at(pid, (uint32_t)req->a, (uint32_t)(req->a >> 32), req->b,
                              (uint64_t)req->flags * 4096, req->c, &rsp.b);
        rsp.a = req->c;
        break;
    case AGENT_DEV_UNMAP:
        rsp.rc = alend_unmap(pid, (uint32_t)req->a, (uint32_t)req->b);
        break;
    case AGENT_DEV_APERTURE:
        rsp.rc = alend_aperture(pid, (uint32_t)req->a, req->b != 0, &rsp.a, &rsp.b, &rsp.c);
        break;
    case AGENT_DEV_SEGMENT:
        rsp.rc = req->b > UINT32_MAX ? -EINVAL
                                     : adevseg_request((uint32_t)req->a, (uint32_t)req->b, req->c, &rsp.a);
        break;
    case AGENT_SEG_ALLOC_AT:
        rsp.rc = aplace_alloc_at(pid, (uint32_t)req->a, req->b, &rsp.a);
        break;
    case AGENT_SEG_FREE_AT:
        rsp.rc = aplace_free_at(pid, (uint32_t)req->a, (uint32_t)req->b);
        break;
    case AGENT_INTR_CONNECT:
        rsp.rc = aintr_connect(req->flags, (uint32_t)req->a, (uint32_t)req->b, &rsp.a, &rsp.b);
        break;
    default:
        rsp.rc = -EOPNOTSUPP;
    }
    *out = rsp;
    return true;
}

void agent_client_gone(int32_t pid)
{
    alend_client_gone(pid);
    aseg_client_gone(pid); /* before its memory goes: segments outlive it if connected */
    amem_free_owner(pid);
    fab_reap_owner(agent.f, pid);
    fab_vm_reap(agent.f, pid); /* a VM whose process died leaves its host's map */
}
