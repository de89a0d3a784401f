/*
 * The back end of the vhost-user protocol (QEMU's docs/interop/vhost-user.rst): the messages a
 * front end (QEMU) sends over a Unix socket to hand a device's virtqueues and the guest's memory
 * to another process, checked and applied here; the device behind it (virtio-blk over
 * libntbnvme: vblk.c) is reached through struct vhu_device. The parser is fuzzed
 * (fuzz/fuzz_vhost_user.c): every message is checked whole before it changes anything.
 */
#ifndef NTBLEND_VHOST_USER_H
#define NTBLEND_VHOST_USER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "virtq.h"

enum vhu_request {
    VHU_GET_FEATURES = 1,
    VHU_SET_FEATURES = 2,
    VHU_SET_OWNER = 3,
    VHU_RESET_OWNER = 4,
    VHU_SET_MEM_TABLE = 5,
    VHU_SET_LOG_BASE = 6,
    VHU_SET_LOG_FD = 7,
    VHU_SET_VRING_NUM = 8,
    VHU_SET_VRING_ADDR = 9,
    VHU_SET_VRING_BASE = 10,
    VHU_GET_VRING_BASE = 11,
    VHU_SET_VRING_KICK = 12,
    VHU_SET_VRING_CALL = 13,
    VHU_SET_VRING_ERR = 14,
    VHU_GET_PROTOCOL_FEATURES = 15,
    VHU_SET_PROTOCOL_FEATURES = 16,
    VHU_GET_QUEUE_NUM = 17,
    VHU_SET_VRING_ENABLE = 18,
    VHU_GET_CONFIG = 24,
    VHU_SET_CONFIG = 25,
};

#define VHU_VERSION 0x1u
#define VHU_FLAG_REPLY 0x4u
#define VHU_FLAG_NEED_REPLY 0x8u
#define VHU_F_PROTOCOL_FEATURES 30
#define VHU_PROTOCOL_F_MQ 0
#define VHU_PROTOCOL_F_CONFIG 9
#define VHU_VRING_NOFD 0x100u   /* SET_VRING_KICK/CALL/ERR: no descriptor comes (polling) */
#define VHU_MAX_FDS 8
#define VHU_MAX_PAYLOAD 4096
#define VHU_MAX_QUEUES 4
#define VHU_CONFIG_MAX 256

struct vhu_hdr {
    uint32_t request;
    uint32_t flags;
    uint32_t size;
} __attribute__((packed));

struct vhu_state { uint32_t index, num; };
struct vhu_addr {
    uint32_t index, flags;
    uint64_t desc, used, avail, log;
};
struct vhu_region_msg { uint64_t gpa, size, uva, mmap_offset; };
struct vhu_mem_msg {
    uint32_t nregions, padding;
    struct vhu_region_msg r[VQ_MAX_REGIONS];
};
struct vhu_config_msg {
    uint32_t offset, size, flags;
    uint8_t payload[VHU_CONFIG_MAX];
};

/* The device behind the protocol. start/stop are called with the queue ready (rings mapped,
 * kick descriptor set, enabled) and before anything of it changes; the session's memory does
 * not change while any queue runs. */
struct vhu_device {
    uint64_t features;            /* virtio feature bits the device offers */
    uint32_t queues;              /* at most VHU_MAX_QUEUES */
    uint32_t config_size;         /* bytes of its configuration space */
    void *arg;
    void (*config)(void *arg, uint8_t *buf);   /* fill config_size bytes */
    /* serve the queue, whose rings and buffers are in mem: 0 or -errno */
    int (*start)(void *arg, struct vq *q, const struct vq_mem *mem);
    void (*stop)(void *arg, struct vq *q);     /* stop serving it; returns when it stopped */
    /* Is this descriptor (a region's file) the VM's RAM file? Devices DMA only into that. */
    bool (*is_guest_ram)(void *arg, int fd);
};

struct vhu {
    const struct vhu_device *dev;
    uint64_t features;            /* negotiated */
    uint64_t protocol_features;
    bool features_set;
    struct vq_mem mem;
    struct vq vq[VHU_MAX_QUEUES];
    char err[160];                /* why the last message was refused */
    uint8_t payload[VHU_MAX_PAYLOAD], reply[VHU_MAX_PAYLOAD]; /* vhu_serve_one's buffers */
};

void vhu_init(struct vhu *s, const struct vhu_device *dev);
/* Stop every queue and let go of the memory and descriptors (the front end hung up). */
void vhu_reset(struct vhu *s);

/*
 * Check one message whole and apply it. fds are the descriptors that came with it (taken
 * over: closed here when not kept). On a reply, *reply and *reply_len are set (payload only).
 * Return 0; 1 when a reply is to be sent; -EINVAL / -EPROTO a malformed message (s->err says
 * what; the session should end), -errno when applying it failed.
 */
int vhu_handle(struct vhu *s, const struct vhu_hdr *h, const uint8_t *payload, int *fds,
               int nfds, uint8_t *reply, uint32_t *reply_len);

/* Read one message from the socket, handle it and send the reply: 0, or -errno (-EPIPE: the
 * front end hung up). */
int vhu_serve_one(struct vhu *s, int sock);

#endif
