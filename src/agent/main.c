/*
 * ntblend-agent: the process that is one emulated host. Serves the host's control socket
 * (allocation of DMA-able memory, pings, peer pings over the NTB), runs the mailbox and DMA
 * engine threads, and releases whatever a client held when it hangs up. It sleeps in poll()
 * and futex waits when nothing happens. Started by `ntblend up` / `ntblend host start`.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent.h"
#include "agent_proto.h"
#include "models.h"

#define MAX_CLIENTS 1024

struct client {
    int fd;
    int32_t pid;
};

struct agent agent = { .alloc_lock = PTHREAD_MUTEX_INITIALIZER };
static size_t nclients;

static void logmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logmsg(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ntblend-agent[%s/%s]: ", agent.fabric, fab_host(agent.f, agent.host)->name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static int listen_socket(void)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int n = snprintf(sa.sun_path, sizeof sa.sun_path, "%s/host%u.sock", agent.f->dir, agent.host);
    if (n < 0 || (size_t)n >= sizeof sa.sun_path)
        return -ENAMETOOLONG; /* NTBLEND_SHM_DIR too long for a Unix socket path */
    unlink(sa.sun_path);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 64) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    return fd;
}

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

static void serve(struct client *c, const struct agent_req *req)
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
        rsp.rc = amem_alloc(req->a, req->b, c->pid, &rsp.a);
        break;
    case AGENT_FREE:
        rsp.rc = amem_free(req->a, c->pid);
        break;
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
        if (j && (j->fd = dup(c->fd)) >= 0) {
            j->peer = (uint32_t)req->a;
            if (pthread_create(&t, NULL, peer_ping_thread, j) == 0) {
                pthread_detach(t);
                return;
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
        rsp.a = nclients;
        rsp.b = atomic_load(&agent.mbox_handled);
        rsp.c = atomic_load(&agent.dma_done);
        break;
    case AGENT_SEG_CREATE:
        rsp.rc = aseg_create(c->pid, (uint32_t)req->a, req->b, req->c, &rsp.a, &rsp.b, &rsp.c);
        break;
    case AGENT_SEG_PREPARE:
        rsp.rc = aseg_prepare(c->pid, (uint32_t)req->a, (uint32_t)req->b);
        break;
    case AGENT_SEG_AVAILABLE:
        rsp.rc = aseg_available(c->pid, (uint32_t)req->a, (uint32_t)req->b, req->c != 0);
        break;
    case AGENT_SEG_REMOVE:
        rsp.rc = aseg_remove(c->pid, (uint32_t)req->a);
        break;
    case AGENT_SEG_CONNECT:
        rsp.rc = aseg_connect(c->pid, req->flags, (uint32_t)req->a, (uint32_t)req->b, req->c,
                              &rsp.a, &rsp.b, &rsp.c);
        break;
    case AGENT_SEG_DISCONNECT:
        rsp.rc = aseg_disconnect(c->pid, (uint32_t)req->a, (uint32_t)req->b);
        break;
    case AGENT_INTR_CREATE:
        rsp.rc = aintr_create(c->pid, (uint32_t)req->a, &rsp.a, &rsp.b);
        break;
    case AGENT_INTR_REMOVE:
        rsp.rc = aintr_remove(c->pid, (uint32_t)req->a);
        break;
    case AGENT_DEV_AVAILABLE:
        rsp.rc = alend_available(c->pid, (uint32_t)req->a, req->b != 0);
        break;
    case AGENT_DEV_BORROW:
        rsp.rc = alend_borrow(c->pid, (uint32_t)req->a, (uint32_t)req->b, req->c != 0);
        break;
    case AGENT_DEV_SHARE:
        rsp.rc = alend_share(c->pid, (uint32_t)req->a);
        break;
    case AGENT_DEV_RETURN:
        rsp.rc = alend_return(req->c ? 0 : c->pid, (uint32_t)req->a);
        break;
    case AGENT_DEV_MAP:
        rsp.rc = alend_map(c->pid, (uint32_t)req->a, (uint32_t)req->b, req->c,
                         (uint64_t)req->flags * 4096, &rsp.a, &rsp.b);
        break;
    case AGENT_DEV_UNMAP:
        rsp.rc = alend_unmap(c->pid, (uint32_t)req->a, (uint32_t)req->b);
        break;
    case AGENT_SEG_ALLOC_AT:
        rsp.rc = aplace_alloc_at(c->pid, (uint32_t)req->a, req->b, &rsp.a);
        break;
    case AGENT_SEG_FREE_AT:
        rsp.rc = aplace_free_at(c->pid, (uint32_t)req->a, (uint32_t)req->b);
        break;
    case AGENT_INTR_CONNECT:
        rsp.rc = aintr_connect(req->flags, (uint32_t)req->a, (uint32_t)req->b, &rsp.a, &rsp.b);
        break;
    default:
        rsp.rc = -EOPNOTSUPP;
    }
    send(c->fd, &rsp, sizeof rsp, MSG_NOSIGNAL);
}

/* A client hung up (or died): everything it held goes back. */
static void release_client(struct client *c)
{
    close(c->fd);
    alend_client_gone(c->pid);
    aseg_client_gone(c->pid); /* before its memory goes: segments outlive it if connected */
    amem_free_owner(c->pid);
    fab_reap_owner(agent.f, c->pid);
}

static int usage(FILE *to, int rc)
{
    fprintf(to, "usage: ntblend-agent --fabric NAME --host INDEX\n"
                "Runs one emulated host of a fabric created by 'ntblend up'. Normally started\n"
                "by 'ntblend up' and 'ntblend host start', not by hand.\n");
    return rc;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = { { "fabric", required_argument, NULL, 'f' },
                                          { "host", required_argument, NULL, 'H' },
                                          { "help", no_argument, NULL, 'h' },
                                          { 0 } };
    const char *fabric = NULL;
    long host = -1;
    int o;
    while ((o = getopt_long(argc, argv, "f:H:h", opts, NULL)) != -1) {
        switch (o) {
        case 'f': fabric = optarg; break;
        case 'H': host = strtol(optarg, NULL, 10); break;
        case 'h': return usage(stdout, 0);
        default: return usage(stderr, 2);
        }
    }
    if (host < 0)
        return usage(stderr, 2);
    agent.fabric = fab_name_resolve(fabric);
    int rc = fab_attach(agent.fabric, (int)host, &agent.f);
    if (rc) {
        fprintf(stderr, "ntblend-agent: cannot attach to fabric '%s' host %ld: %s\n", agent.fabric,
                host, strerror(-rc));
        return 1;
    }
    agent.host = (uint32_t)host;
    struct fab_host *h = fab_host(agent.f, agent.host);

    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_BLOCK, &set, NULL); /* before threads start, so they inherit the mask */
    int sfd = signalfd(-1, &set, SFD_CLOEXEC);
    int lfd = listen_socket();
    if (sfd < 0 || lfd < 0) {
        logmsg("cannot create the control socket: %s", strerror(lfd < 0 ? -lfd : errno));
        return 1;
    }
    if ((rc = mbox_start()) || (rc = adma_start()) || (rc = aseg_start()) ||
        (rc = alend_start()) ||
        (rc = models_start(agent.f, agent.host))) {
        logmsg("cannot start: %s", strerror(-rc));
        return 1;
    }
    atomic_store(&h->agent_pid, getpid());
    fab_host_set_state(agent.f, agent.host, FAB_HOST_UP);

    static struct pollfd pfd[MAX_CLIENTS + 2];
    static struct client cl[MAX_CLIENTS];
    size_t ncl = 0;
    while (!atomic_load(&agent.stop)) {
        pfd[0] = (struct pollfd){ .fd = sfd, .events = POLLIN };
        pfd[1] = (struct pollfd){ .fd = lfd, .events = POLLIN };
        for (size_t i = 0; i < ncl; i++)
            pfd[i + 2] = (struct pollfd){ .fd = cl[i].fd, .events = POLLIN };
        nclients = ncl;
        if (poll(pfd, ncl + 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            logmsg("poll: %s", strerror(errno));
            break;
        }
        if (pfd[0].revents)
            break; /* SIGTERM / SIGINT */
        for (size_t i = ncl; i-- > 0;) {
            if (!pfd[i + 2].revents)
                continue;
            struct agent_req req;
            ssize_t n = recv(cl[i].fd, &req, sizeof req, MSG_DONTWAIT);
            if (n == (ssize_t)sizeof req) {
                serve(&cl[i], &req);
                continue;
            }
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            /* What a client holds is its process's (owners are pids): it goes back when the
             * process's last connection closes, not with any one of them. */
            bool last = true;
            for (size_t j = 0; j < ncl && last; j++)
                last = j == i || cl[j].pid != cl[i].pid;
            if (last)
                release_client(&cl[i]);
            else
                close(cl[i].fd);
            cl[i] = cl[--ncl];
        }
        if (pfd[1].revents & POLLIN) {
            int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
            struct ucred cred;
            socklen_t len = sizeof cred;
            if (fd >= 0 && (ncl == MAX_CLIENTS ||
                            getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)) {
                close(fd);
                fd = -1;
            }
            if (fd >= 0)
                cl[ncl++] = (struct client){ .fd = fd, .pid = cred.pid };
        }
    }
    atomic_store(&agent.stop, 1);
    fab_host_set_state(agent.f, agent.host, FAB_HOST_DOWN);
    atomic_store(&h->agent_pid, 0);
    models_stop();
    ahot_stop();
    alend_stop();
    aseg_stop();
    mbox_stop();
    adma_stop();
    char path[192];
    snprintf(path, sizeof path, "%s/host%u.sock", agent.f->dir, agent.host);
    unlink(path);
    fab_detach(agent.f);
    return 0;
}
