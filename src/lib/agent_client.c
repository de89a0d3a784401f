/*
 * Client side of the agent control socket (see agent_proto.h), shared by libntblend and the
 * CLI.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent_proto.h"

int agent_connect(const char *dir, uint32_t host)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int n = snprintf(sa.sun_path, sizeof sa.sun_path, "%s/host%u.sock", dir, host);
    if (n < 0 || (size_t)n >= sizeof sa.sun_path)
        return -ENAMETOOLONG;
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int e = errno == ENOENT ? ECONNREFUSED : errno; /* no socket: the agent is not running */
        close(fd);
        return -e;
    }
    return fd;
}

int agent_call(int fd, const struct agent_req *req, struct agent_rsp *rsp, int timeout_ms)
{
    if (send(fd, req, sizeof *req, MSG_NOSIGNAL) != (ssize_t)sizeof *req)
        return -errno;
    struct pollfd p = { .fd = fd, .events = POLLIN };
    int r;
    do
        r = poll(&p, 1, timeout_ms);
    while (r < 0 && errno == EINTR);
    if (r == 0)
        return -ETIMEDOUT;
    if (r < 0)
        return -errno;
    ssize_t got = recv(fd, rsp, sizeof *rsp, 0);
    if (got == 0)
        return -ECONNRESET;
    if (got != (ssize_t)sizeof *rsp)
        return got < 0 ? -errno : -EPROTO;
    return rsp->rc;
}
