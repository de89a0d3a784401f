/*
 * The vhost-user back end (vhost_user.h): message checks, the session's state (features,
 * guest memory, vrings) and when a queue starts and stops being served.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "vhost_user.h"

static int refuse(struct vhu *s, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof s->err, fmt, ap);
    va_end(ap);
    return rc;
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

void vhu_init(struct vhu *s, const struct vhu_device *dev)
{
    memset(s, 0, sizeof *s);
    s->dev = dev;
    for (uint32_t i = 0; i < VHU_MAX_QUEUES; i++) {
        s->vq[i].index = i;
        s->vq[i].kick_fd = -1;
        s->vq[i].call_fd = -1;
    }
}

static void vq_stop(struct vhu *s, struct vq *q)
{
    if (q->running) {
        s->dev->stop(s->dev->arg, q);
        q->running = false;
    }
}

/* Serve the queue if everything it needs is there. */
static int vq_try_start(struct vhu *s, struct vq *q)
{
    if (q->running || !q->num || !q->desc || q->kick_fd < 0 || !q->enabled || q->broken)
        return 0;
    int rc = s->dev->start(s->dev->arg, q, &s->mem);
    if (rc)
        return refuse(s, rc, "the device could not serve queue %u (%s)", q->index, strerror(-rc));
    q->running = true;
    return 0;
}

static void mem_unmap(struct vhu *s)
{
    for (uint32_t i = 0; i < s->mem.n; i++)
        if (s->mem.r[i].map_base)
            munmap(s->mem.r[i].map_base, s->mem.r[i].map_len);
    memset(&s->mem, 0, sizeof s->mem);
}

void vhu_reset(struct vhu *s)
{
    for (uint32_t i = 0; i < VHU_MAX_QUEUES; i++) {
        struct vq *q = &s->vq[i];
        vq_stop(s, q);
        close_fd(&q->kick_fd);
        close_fd(&q->call_fd);
        *q = (struct vq){ .index = i, .kick_fd = -1, .call_fd = -1 };
    }
    mem_unmap(s);
    s->features = 0;
    s->protocol_features = 0;
    s->features_set = false;
}

static uint64_t offered(const struct vhu *s)
{
    return s->dev->features | 1ull << VHU_F_PROTOCOL_FEATURES;
}

static uint64_t protocol_offered(const struct vhu *s)
{
    return 1ull << VHU_PROTOCOL_F_CONFIG | (s->dev->queues > 1 ? 1ull << VHU_PROTOCOL_F_MQ : 0);
}

/* Replace the guest memory table; every queue stops meanwhile and starts again after. */
static int set_mem_table(struct vhu *s, const struct vhu_mem_msg *m, int *fds, int nfds)
{
    bool was[VHU_MAX_QUEUES];
    for (uint32_t i = 0; i < VHU_MAX_QUEUES; i++) {
        was[i] = s->vq[i].running;
        vq_stop(s, &s->vq[i]);
    }
    mem_unmap(s);
    int rc = 0;
    for (uint32_t i = 0; i < m->nregions; i++) {
        const struct vhu_region_msg *r = &m->r[i];
        uint64_t len = r->mmap_offset + r->size;
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fds[i], 0);
        if (p == MAP_FAILED) {
            rc = refuse(s, -errno, "cannot map guest memory region %u (%s)", i, strerror(errno));
            break;
        }
        s->mem.r[i] = (struct vq_region){
            .gpa = r->gpa, .size = r->size, .uva = r->uva, .file_off = r->mmap_offset,
            .map = (uint8_t *)p + r->mmap_offset, .map_base = p, .map_len = len,
            .guest_ram = s->dev->is_guest_ram && s->dev->is_guest_ram(s->dev->arg, fds[i]) };
        s->mem.n = i + 1;
    }
    for (int i = 0; i < nfds; i++)
        close_fd(&fds[i]);
    if (rc) {
        mem_unmap(s);
        return rc;
    }
    for (uint32_t i = 0; i < VHU_MAX_QUEUES; i++) {
        struct vq *q = &s->vq[i];
        if (q->num && q->desc_uva && vq_map_rings(q, &s->mem))
            q->desc = NULL; /* its rings are not in the new memory: not served */
        if (was[i] && (rc = vq_try_start(s, q)))
            return rc;
    }
    return 0;
}

/* The payload size each request must have (UINT32_MAX: any up to VHU_MAX_PAYLOAD). */
static uint32_t payload_size(uint32_t request)
{
    switch (request) {
    case VHU_GET_FEATURES: case VHU_SET_OWNER: case VHU_RESET_OWNER:
    case VHU_GET_PROTOCOL_FEATURES: case VHU_GET_QUEUE_NUM:
        return 0;
    case VHU_SET_FEATURES: case VHU_SET_PROTOCOL_FEATURES: case VHU_SET_VRING_KICK:
    case VHU_SET_VRING_CALL: case VHU_SET_VRING_ERR: case VHU_SET_LOG_BASE:
        return 8;
    case VHU_SET_VRING_NUM: case VHU_SET_VRING_BASE: case VHU_GET_VRING_BASE:
    case VHU_SET_VRING_ENABLE:
        return sizeof(struct vhu_state);
    case VHU_SET_VRING_ADDR:
        return sizeof(struct vhu_addr);
    default:
        return UINT32_MAX;
    }
}

static int fd_message(struct vhu *s, uint64_t u, int *fds, int nfds, struct vq **q, int *fd)
{
    uint32_t idx = (uint32_t)(u & 0xff);
    bool nofd = u & VHU_VRING_NOFD;
    if (idx >= s->dev->queues || (u & ~0x1ffull))
        return refuse(s, -EINVAL, "vring %u does not exist (the device has %u)", idx,
                      s->dev->queues);
    if (nofd ? nfds != 0 : nfds != 1)
        return refuse(s, -EINVAL, "a vring descriptor message came with %d descriptors", nfds);
    *q = &s->vq[idx];
    *fd = nofd ? -1 : fds[0];
    fds[0] = -1;
    return 0;
}

int vhu_handle(struct vhu *s, const struct vhu_hdr *h, const uint8_t *payload, int *fds,
               int nfds, uint8_t *reply, uint32_t *reply_len)
{
    int rc = 0;
    uint64_t u = 0;
    struct vhu_state st = { 0, 0 };
    s->err[0] = 0;
    *reply_len = 0;
    if ((h->flags & 0x3) != VHU_VERSION) {
        rc = refuse(s, -EPROTO, "protocol version %u (this back end speaks 1)", h->flags & 3);
        goto out;
    }
    if (h->size > VHU_MAX_PAYLOAD || nfds < 0 || nfds > VHU_MAX_FDS) {
        rc = refuse(s, -EINVAL, "message %u: %u bytes, %d descriptors", h->request, h->size, nfds);
        goto out;
    }
    uint32_t want = payload_size(h->request);
    if (want != UINT32_MAX && h->size != want) {
        rc = refuse(s, -EINVAL, "message %u: %u bytes of payload, not %u", h->request, h->size,
                    want);
        goto out;
    }
    bool state = h->request == VHU_SET_VRING_NUM || h->request == VHU_SET_VRING_BASE ||
                 h->request == VHU_GET_VRING_BASE || h->request == VHU_SET_VRING_ENABLE;
    uint32_t ring = 0;
    if (want == 8)
        memcpy(&u, payload, 8);
    if (state)
        memcpy(&st, payload, sizeof st);
    ring = st.index;
    if (h->request == VHU_SET_VRING_ADDR)
        memcpy(&ring, payload, sizeof ring);
    if ((state || h->request == VHU_SET_VRING_ADDR) && ring >= s->dev->queues) {
        rc = refuse(s, -EINVAL, "message %u names a vring the device does not have", h->request);
        goto out;
    }
    if (h->request != VHU_SET_MEM_TABLE && h->request != VHU_SET_VRING_KICK &&
        h->request != VHU_SET_VRING_CALL && h->request != VHU_SET_VRING_ERR && nfds) {
        rc = refuse(s, -EINVAL, "message %u carries descriptors it should not", h->request);
        goto out;
    }
    switch (h->request) {
    case VHU_GET_FEATURES:
        u = offered(s);
        goto reply_u64;
    case VHU_SET_FEATURES:
        if (u & ~offered(s)) {
            rc = refuse(s, -EINVAL, "features %#llx were not offered",
                        (unsigned long long)(u & ~offered(s)));
            break;
        }
        s->features = u;
        s->features_set = true;
        /* Without protocol features a ring is enabled as soon as it is set up. */
        for (uint32_t i = 0; i < s->dev->queues; i++)
            if (!(u & 1ull << VHU_F_PROTOCOL_FEATURES) && !s->vq[i].enabled) {
                s->vq[i].enabled = true;
                if ((rc = vq_try_start(s, &s->vq[i])))
                    break;
            }
        break;
    case VHU_GET_PROTOCOL_FEATURES:
        u = protocol_offered(s);
        goto reply_u64;
    case VHU_SET_PROTOCOL_FEATURES:
        if (u & ~protocol_offered(s))
            rc = refuse(s, -EINVAL, "protocol features %#llx were not offered",
                        (unsigned long long)(u & ~protocol_offered(s)));
        else
            s->protocol_features = u;
        break;
    case VHU_GET_QUEUE_NUM:
        u = s->dev->queues;
        goto reply_u64;
    case VHU_SET_OWNER:
        break;
    case VHU_RESET_OWNER:
        vhu_reset(s);
        break;
    case VHU_SET_MEM_TABLE: {
        struct vhu_mem_msg m;
        memset(&m, 0, sizeof m);
        if (h->size < 8 || h->size > sizeof m) {
            rc = refuse(s, -EINVAL, "a memory table of %u bytes", h->size);
            break;
        }
        memcpy(&m, payload, h->size);
        if (m.nregions > VQ_MAX_REGIONS || h->size < 8 + m.nregions * sizeof m.r[0] ||
            (int)m.nregions != nfds) {
            rc = refuse(s, -EINVAL, "a memory table of %u regions with %d descriptors",
                        m.nregions, nfds);
            break;
        }
        for (uint32_t i = 0; i < m.nregions; i++) {
            const struct vhu_region_msg *r = &m.r[i];
            if (!r->size || r->gpa + r->size < r->gpa || r->uva + r->size < r->uva ||
                r->mmap_offset + r->size < r->mmap_offset || (r->mmap_offset & 4095)) {
                rc = refuse(s, -EINVAL, "memory region %u is malformed", i);
                break;
            }
        }
        if (!rc)
            rc = set_mem_table(s, &m, fds, nfds);
        break;
    }
    case VHU_SET_LOG_BASE:
        rc = refuse(s, -EOPNOTSUPP, "dirty logging was not offered");
        break;
    case VHU_SET_VRING_NUM:
        if (!st.num || st.num > VQ_MAX_SIZE || (st.num & (st.num - 1))) {
            rc = refuse(s, -EINVAL, "a vring of %u entries (1..%u, a power of two)", st.num,
                        VQ_MAX_SIZE);
            break;
        }
        vq_stop(s, &s->vq[st.index]);
        s->vq[st.index].num = st.num;
        s->vq[st.index].desc = NULL;
        break;
    case VHU_SET_VRING_ADDR: {
        struct vhu_addr a;
        memcpy(&a, payload, sizeof a);
        struct vq *q = &s->vq[a.index];
        vq_stop(s, q);
        q->desc_uva = a.desc;
        q->avail_uva = a.avail;
        q->used_uva = a.used;
        if ((rc = vq_map_rings(q, &s->mem)))
            rc = refuse(s, rc, "vring %u's rings are not in the guest's memory", a.index);
        else
            q->used_idx = atomic_load(&q->used->idx);
        break;
    }
    case VHU_SET_VRING_BASE:
        if (st.num > 0xffff) {
            rc = refuse(s, -EINVAL, "vring base %u", st.num);
            break;
        }
        vq_stop(s, &s->vq[st.index]);
        s->vq[st.index].last_avail = (uint16_t)st.num;
        s->vq[st.index].broken = false;
        break;
    case VHU_GET_VRING_BASE: {
        struct vq *q = &s->vq[st.index];
        vq_stop(s, q); /* returns once every request taken was answered */
        close_fd(&q->kick_fd);
        st.num = q->last_avail;
        memcpy(reply, &st, sizeof st);
        *reply_len = sizeof st;
        rc = 1;
        break;
    }
    case VHU_SET_VRING_KICK: case VHU_SET_VRING_CALL: case VHU_SET_VRING_ERR: {
        struct vq *q = NULL;
        int fd = -1;
        if ((rc = fd_message(s, u, fds, nfds, &q, &fd)))
            break;
        if (h->request == VHU_SET_VRING_ERR) {
            close_fd(&fd); /* errors are reported in the log, not to the front end */
            break;
        }
        if (h->request == VHU_SET_VRING_CALL) {
            /* The I/O thread reads call_fd: swap it while the queue is stopped. */
            bool was = q->running;
            vq_stop(s, q);
            close_fd(&q->call_fd);
            q->call_fd = fd;
            if (was)
                rc = vq_try_start(s, q);
            break;
        }
        vq_stop(s, q);
        close_fd(&q->kick_fd);
        q->kick_fd = fd;
        if (fd < 0) {
            rc = refuse(s, -EOPNOTSUPP, "polled vrings (no kick descriptor) are not supported");
            break;
        }
        if (s->features_set && !(s->features & 1ull << VHU_F_PROTOCOL_FEATURES))
            q->enabled = true;
        rc = vq_try_start(s, q);
        break;
    }
    case VHU_SET_VRING_ENABLE:
        if (st.num > 1) {
            rc = refuse(s, -EINVAL, "vring enable %u", st.num);
            break;
        }
        s->vq[st.index].enabled = st.num;
        if (st.num)
            rc = vq_try_start(s, &s->vq[st.index]);
        else
            vq_stop(s, &s->vq[st.index]);
        break;
    case VHU_GET_CONFIG: case VHU_SET_CONFIG: {
        struct vhu_config_msg c;
        if (h->size < 12 || h->size > sizeof c) {
            rc = refuse(s, -EINVAL, "a config message of %u bytes", h->size);
            break;
        }
        memset(&c, 0, sizeof c);
        memcpy(&c, payload, h->size);
        if (c.size > VHU_CONFIG_MAX || h->size != 12 + c.size || c.offset > s->dev->config_size ||
            c.size > s->dev->config_size - c.offset) {
            rc = refuse(s, -EINVAL, "config bytes %u..%u of %u", c.offset, c.offset + c.size,
                        s->dev->config_size);
            break;
        }
        if (h->request == VHU_SET_CONFIG)
            break; /* nothing of the configuration is writable */
        uint8_t cfg[VHU_CONFIG_MAX];
        memset(cfg, 0, sizeof cfg);
        s->dev->config(s->dev->arg, cfg);
        memcpy(c.payload, cfg + c.offset, c.size);
        memcpy(reply, &c, 12 + c.size);
        *reply_len = 12 + c.size;
        rc = 1;
        break;
    }
    default:
        rc = refuse(s, -EOPNOTSUPP, "message %u is not supported", h->request);
    }
    goto out;
reply_u64:
    memcpy(reply, &u, 8);
    *reply_len = 8;
    rc = 1;
out:
    for (int i = 0; i < nfds && fds; i++)
        close_fd(&fds[i]);
    return rc;
}

static int read_full(int fd, void *buf, size_t len)
{
    for (size_t got = 0; got < len;) {
        ssize_t n = read(fd, (char *)buf + got, len - got);
        if (n == 0)
            return -EPIPE;
        if (n < 0 && errno != EINTR)
            return -errno;
        got += n > 0 ? (size_t)n : 0;
    }
    return 0;
}

int vhu_serve_one(struct vhu *s, int sock)
{
    struct vhu_hdr h;
    uint8_t *payload = s->payload, *reply = s->reply;
    union {
        char buf[CMSG_SPACE(VHU_MAX_FDS * sizeof(int))];
        struct cmsghdr align;
    } cbuf;
    struct iovec iov = { &h, sizeof h };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf.buf,
                         .msg_controllen = sizeof cbuf.buf };
    ssize_t n;
    do
        n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_WAITALL);
    while (n < 0 && errno == EINTR);
    if (n == 0)
        return -EPIPE;
    if (n < 0)
        return -errno;
    int fds[VHU_MAX_FDS], nfds = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            for (int i = 0; i < k; i++) {
                int fd;
                memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
                if (nfds < VHU_MAX_FDS)
                    fds[nfds++] = fd;
                else
                    close(fd);
            }
        }
    int rc = (size_t)n < sizeof h || (mh.msg_flags & MSG_CTRUNC) ? -EPROTO : 0;
    if (!rc && h.size > VHU_MAX_PAYLOAD)
        rc = refuse(s, -EPROTO, "message %u of %u bytes", h.request, h.size);
    if (!rc && h.size)
        rc = read_full(sock, payload, h.size);
    if (rc) {
        for (int i = 0; i < nfds; i++)
            close(fds[i]);
        return rc;
    }
    uint32_t rlen = 0;
    rc = vhu_handle(s, &h, payload, fds, nfds, reply, &rlen);
    if (rc < 0)
        return rc;
    if (rc == 1) {
        struct vhu_hdr rh = { h.request, VHU_VERSION | VHU_FLAG_REPLY, rlen };
        struct iovec out[2] = { { &rh, sizeof rh }, { reply, rlen } };
        struct msghdr om = { .msg_iov = out, .msg_iovlen = 2 };
        if (sendmsg(sock, &om, MSG_NOSIGNAL) != (ssize_t)(sizeof rh + rlen))
            return -EPIPE;
    }
    return 0;
}
