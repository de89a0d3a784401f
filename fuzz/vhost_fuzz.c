/*
 * libFuzzer harness for the vhost-user back end (src/vm/vhost_user.c, src/vm/virtq.c): what a
 * front end sends over the socket. The input is a sequence of messages, each a 12-byte header
 * and its payload (as much as the input has left). Messages that carry descriptors get them as
 * the real protocol would: an eventfd for a vring's kick, call or error, a memfd the size of
 * each region of a memory table (regions over 1 MiB get none, so the table is refused). A
 * queue that starts is served once: its available ring walked and every chain returned.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "vhost_user.h"

static bool served;

static void config(void *arg, uint8_t *buf)
{
    (void)arg;
    memset(buf, 0x5a, 60);
}

static int start(void *arg, struct vq *q, const struct vq_mem *mem)
{
    (void)arg;
    struct vq_elem e;
    for (int i = 0; i < 64 && vq_pop(q, &e) > 0; i++) {
        for (uint32_t s = 0; s < e.nseg; s++) {
            uint8_t *p = vq_gpa(mem, e.seg[s].gpa, e.seg[s].len);
            uint64_t off;
            if (p && e.seg[s].len && e.seg[s].write)
                p[e.seg[s].len - 1] = 0; /* a status byte */
            vq_gpa_file(mem, e.seg[s].gpa, e.seg[s].len, &off);
        }
        vq_push(q, e.head, 1);
    }
    served = true;
    return 0;
}

static void stop(void *arg, struct vq *q)
{
    (void)arg;
    (void)q;
}

static bool is_guest_ram(void *arg, int fd)
{
    (void)arg;
    (void)fd;
    return true;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct vhu_device dev = {
        .features = 1ull << 32 | 1ull << 9, .queues = 2, .config_size = 60, .arg = NULL,
        .config = config, .start = start, .stop = stop, .is_guest_ram = is_guest_ram };
    static struct vhu s;
    static uint8_t payload[VHU_MAX_PAYLOAD], reply[VHU_MAX_PAYLOAD];
    vhu_init(&s, &dev);
    while (size >= sizeof(struct vhu_hdr)) {
        struct vhu_hdr h;
        memcpy(&h, data, sizeof h);
        data += sizeof h;
        size -= sizeof h;
        size_t n = h.size < size ? h.size : size;
        if (n > sizeof payload)
            n = sizeof payload;
        memset(payload, 0, sizeof payload);
        memcpy(payload, data, n);
        data += n;
        size -= n;
        int fds[VHU_MAX_FDS], nfds = 0;
        uint64_t u = 0;
        memcpy(&u, payload, sizeof u);
        if ((h.request == VHU_SET_VRING_KICK || h.request == VHU_SET_VRING_CALL ||
             h.request == VHU_SET_VRING_ERR) && !(u & VHU_VRING_NOFD))
            fds[nfds++] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (h.request == VHU_SET_MEM_TABLE) {
            struct vhu_mem_msg m;
            memcpy(&m, payload, sizeof m);
            for (uint32_t i = 0; i < m.nregions && i < VQ_MAX_REGIONS; i++) {
                uint64_t len = m.r[i].mmap_offset + m.r[i].size;
                if (m.r[i].size > (1u << 20) || m.r[i].mmap_offset > (1u << 20))
                    break;
                int fd = memfd_create("guest", MFD_CLOEXEC);
                if (fd < 0 || ftruncate(fd, (off_t)len)) {
                    if (fd >= 0)
                        close(fd);
                    break;
                }
                fds[nfds++] = fd;
            }
        }
        uint32_t rlen;
        if (vhu_handle(&s, &h, payload, fds, nfds, reply, &rlen) < 0)
            break; /* a malformed message ends the session, as vhu_serve_one's caller does */
    }
    vhu_reset(&s);
    (void)served;
    return 0;
}
