/*
 * ntblend-agent: the process that is one emulated host. Serves the host's control socket
 * (allocation of DMA-able memory, pings, peer pings over the NTB), runs the mailbox and DMA
 * engine threads, and releases whatever a client held when it hangs up (ctl.c serves the
 * requests themselves). It sleeps in poll() and futex waits when nothing happens. Started by `ntblend up` / `ntblend host start`.
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

/* A client hung up (or died): everything its process held goes back. */
static void release_client(struct client *c)
{
    close(c->fd);
    agent_client_gone(c->pid);
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
        agent.nclients = ncl;
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
                struct agent_rsp rsp;
                if (agent_serve(cl[i].fd, cl[i].pid, &req, &rsp))
                    send(cl[i].fd, &rsp, sizeof rsp, MSG_NOSIGNAL);
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
