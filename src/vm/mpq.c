/*
 * QEMU's multi-process remote-device messages (mpq.h): the header and body layouts of QEMU 7.2
 * (include/hw/remote/mpqemu-link.h), checked field by field before anything acts on them, and
 * the socket I/O of one message with its descriptors (SCM_RIGHTS). The values are read with
 * memcpy from fixed offsets, so a short or odd body never reads past what arrived.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mpq.h"

static int refuse(struct mpq *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int refuse(struct mpq *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof s->err, fmt, ap);
    va_end(ap);
    return -EPROTO;
}

void mpq_init(struct mpq *s, const struct mpq_device *dev)
{
    memset(s, 0, sizeof *s);
    s->dev = dev;
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static uint32_t get32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* The body each command must have: its exact size, and how many fds come with it (-1: 1..7). */
static const struct { size_t size; int fds; const char *name; } shape[MPQ_CMD_MAX] = {
    [MPQ_SYNC_SYSMEM] = { MPQ_SYSMEM_SIZE, -1, "SYNC_SYSMEM" },
    [MPQ_RET] = { 8, 0, "RET" },
    [MPQ_CFG_WRITE] = { MPQ_CFG_SIZE, 0, "PCI_CFGWRITE" },
    [MPQ_CFG_READ] = { MPQ_CFG_SIZE, 0, "PCI_CFGREAD" },
    [MPQ_BAR_WRITE] = { MPQ_BAR_SIZE, 0, "BAR_WRITE" },
    [MPQ_BAR_READ] = { MPQ_BAR_SIZE, 0, "BAR_READ" },
    [MPQ_SET_IRQFD] = { 0, 2, "SET_IRQFD" },
    [MPQ_DEVICE_RESET] = { 0, 0, "DEVICE_RESET" },
};

int mpq_parse_hdr(struct mpq *s, const uint8_t hdr[MPQ_HDR_SIZE], uint32_t *cmd, size_t *size)
{
    uint32_t c = get32(hdr);
    uint64_t n = get64(hdr + 8);
    if (c >= MPQ_CMD_MAX)
        return refuse(s, "unknown command %u", c);
    if (n != shape[c].size)
        return refuse(s, "%s with a body of %llu bytes (it has %zu)", shape[c].name,
                      (unsigned long long)n, shape[c].size);
    *cmd = c;
    *size = (size_t)n;
    return 0;
}

static void close_fds(int *fds, int nfds)
{
    for (int i = 0; i < nfds; i++)
        if (fds[i] >= 0) {
            close(fds[i]);
            fds[i] = -1;
        }
}

static int sysmem(struct mpq *s, const uint8_t *b, int *fds, int nfds)
{
    struct mpq_region r[MPQ_MAX_FDS];
    for (int i = 0; i < nfds; i++) {
        r[i] = (struct mpq_region){ .gpa = get64(b + 8 * i), .size = get64(b + 64 + 8 * i),
                                    .offset = get64(b + 128 + 8 * i), .fd = fds[i] };
        if (!r[i].size || r[i].gpa + r[i].size < r[i].gpa ||
            r[i].offset + r[i].size < r[i].offset || r[i].offset >> 63) {
            close_fds(fds, nfds);
            return refuse(s, "SYNC_SYSMEM region %d: %llu bytes at %#llx, file offset %#llx", i,
                          (unsigned long long)r[i].size, (unsigned long long)r[i].gpa,
                          (unsigned long long)r[i].offset);
        }
    }
    return s->dev->sysmem(s->dev->arg, r, nfds); /* the fds are its now */
}

int mpq_handle(struct mpq *s, uint32_t cmd, const uint8_t *b, size_t size, int *fds, int nfds,
               bool *reply, uint64_t *out)
{
    const struct mpq_device *d = s->dev;
    *reply = false;
    *out = 0;
    int want = cmd < MPQ_CMD_MAX ? shape[cmd].fds : 0;
    if (cmd >= MPQ_CMD_MAX || size != shape[cmd].size || nfds < 0 || nfds >= MPQ_MAX_FDS ||
        (want >= 0 ? nfds != want : nfds < 1)) {
        close_fds(fds, nfds > 0 && nfds <= MPQ_MAX_FDS ? nfds : 0);
        if (cmd >= MPQ_CMD_MAX || size != shape[cmd].size)
            return refuse(s, "command %u with a body of %zu bytes", cmd, size);
        return refuse(s, "%s with %d file descriptors", shape[cmd].name, nfds);
    }
    int rc = 0;
    switch (cmd) {
    case MPQ_SYNC_SYSMEM:
        return sysmem(s, b, fds, nfds);
    case MPQ_SET_IRQFD:
        return d->irqfd(d->arg, fds[0], fds[1]);
    case MPQ_RET:
        return refuse(s, "a reply (RET) where a command belongs");
    case MPQ_CFG_READ:
    case MPQ_CFG_WRITE: {
        uint32_t off = get32(b), val = get32(b + 4), len = get32(b + 8);
        *reply = true;
        if ((len != 1 && len != 2 && len != 4) || off % len || off > 4096 - len) {
            *out = cmd == MPQ_CFG_READ ? UINT32_MAX : 0;
            return refuse(s, "a config access of %u bytes at %#x", len, off);
        }
        if (cmd == MPQ_CFG_WRITE)
            return d->cfg_write(d->arg, off, len, val);
        rc = d->cfg_read(d->arg, off, len, &val);
        *out = rc ? (len == 4 ? UINT32_MAX : (1u << (8 * len)) - 1) : val;
        return rc;
    }
    case MPQ_BAR_READ:
    case MPQ_BAR_WRITE: {
        uint64_t gpa = get64(b), val = get64(b + 8);
        uint32_t len = get32(b + 16);
        bool memory = b[20] != 0;
        *reply = true;
        if (!memory || (len != 1 && len != 2 && len != 4 && len != 8) || gpa % len) {
            *out = UINT64_MAX;
            return refuse(s, "a %s %s of %u bytes at %#llx", memory ? "memory" : "port I/O",
                          cmd == MPQ_BAR_READ ? "read" : "write", len, (unsigned long long)gpa);
        }
        if (cmd == MPQ_BAR_WRITE)
            return d->bar_write(d->arg, gpa, len, val);
        rc = d->bar_read(d->arg, gpa, len, &val);
        *out = rc ? (len == 8 ? UINT64_MAX : (1ull << (8 * len)) - 1) : val;
        return rc;
    }
    case MPQ_DEVICE_RESET:
        *reply = true;
        return d->reset(d->arg);
    }
    return -EPROTO;
}

size_t mpq_ret(uint8_t buf[MPQ_HDR_SIZE + 8], uint64_t val)
{
    uint32_t cmd = MPQ_RET;
    uint64_t size = 8;
    memset(buf, 0, MPQ_HDR_SIZE);
    memcpy(buf, &cmd, 4);
    memcpy(buf + 8, &size, 8);
    memcpy(buf + MPQ_HDR_SIZE, &val, 8);
    return MPQ_HDR_SIZE + 8;
}

/* Read exactly len bytes; the first read also takes the descriptors that came with them. */
static int read_full(int fd, uint8_t *buf, size_t len, int *fds, int *nfds)
{
    size_t got = 0;
    while (got < len) {
        union {
            char buf[CMSG_SPACE(MPQ_MAX_FDS * sizeof(int))];
            struct cmsghdr align;
        } ctl;
        struct iovec iov = { buf + got, len - got };
        struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
        if (fds) {
            m.msg_control = ctl.buf;
            m.msg_controllen = sizeof ctl.buf;
        }
        ssize_t r = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r == 0 || errno == ECONNRESET ? -EPIPE : -errno;
        for (struct cmsghdr *c = fds ? CMSG_FIRSTHDR(&m) : NULL; c; c = CMSG_NXTHDR(&m, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                continue;
            int n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            for (int i = 0; i < n; i++) {
                int x;
                memcpy(&x, CMSG_DATA(c) + i * sizeof(int), sizeof x);
                if (*nfds < MPQ_MAX_FDS)
                    fds[(*nfds)++] = x;
                else
                    close(x);
            }
        }
        got += (size_t)r;
    }
    return 0;
}

int mpq_serve_one(struct mpq *s, int fd)
{
    uint8_t hdr[MPQ_HDR_SIZE], body[MPQ_MAX_BODY];
    int fds[MPQ_MAX_FDS], nfds = 0;
    uint32_t cmd = 0;
    size_t size = 0;
    int rc = read_full(fd, hdr, sizeof hdr, fds, &nfds);
    if (!rc && !(rc = mpq_parse_hdr(s, hdr, &cmd, &size)))
        rc = read_full(fd, body, size, NULL, NULL);
    if (rc) {
        close_fds(fds, nfds);
        return rc;
    }
    bool reply;
    uint64_t val;
    rc = mpq_handle(s, cmd, body, size, fds, nfds, &reply, &val);
    if (reply) {
        /* QEMU's vCPU waits for every reply: it gets one even for what was refused. */
        uint8_t out[MPQ_HDR_SIZE + 8];
        size_t n = mpq_ret(out, val);
        if (send(fd, out, n, MSG_NOSIGNAL) != (ssize_t)n)
            return -EPIPE;
    }
    if (rc == -EPROTO)
        s->refused++; /* answered (all ones) and counted; the stream is still in step */
    return 0;
}
