/*
 * The remote-device side of QEMU 7.2's multi-process protocol (`-device x-pci-proxy-dev,fd=N`,
 * QEMU's docs/devel/multi-process.rst): QEMU's proxy device forwards a guest's configuration
 * and BAR accesses of one PCI function over a Unix socket to the process that owns the
 * function, hands it the guest's RAM (file descriptors and where they sit in the guest's
 * physical space) and the eventfds of the function's INTx. This file owns the messages: their
 * layout, checking them, and turning each into a call on the device (struct mpq_device); the
 * device is the caller's (vm_proxy.c: a lent NVMe). Nothing here trusts QEMU's sizes.
 */
#ifndef NTBLEND_MPQ_H
#define NTBLEND_MPQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Commands, in QEMU 7.2's order (MPQemuCmd). */
enum {
    MPQ_SYNC_SYSMEM,   /* the guest's RAM: one fd per region; no reply */
    MPQ_RET,           /* the reply to every command that waits: a u64 */
    MPQ_CFG_WRITE,
    MPQ_CFG_READ,
    MPQ_BAR_WRITE,
    MPQ_BAR_READ,
    MPQ_SET_IRQFD,     /* INTx: fds[0] raises it, fds[1] is KVM's resample; no reply */
    MPQ_DEVICE_RESET,
    MPQ_CMD_MAX,
};

#define MPQ_MAX_FDS 8          /* REMOTE_MAX_FDS */
#define MPQ_HDR_SIZE 16        /* int cmd, padding, size_t size (x86-64) */
#define MPQ_SYSMEM_SIZE 192    /* three arrays of MPQ_MAX_FDS 64-bit values */
#define MPQ_CFG_SIZE 12        /* u32 addr, u32 val, int len */
#define MPQ_BAR_SIZE 24        /* u64 addr, u64 val, unsigned size, bool memory, padding */
#define MPQ_MAX_BODY MPQ_SYSMEM_SIZE

struct mpq_region {            /* guest-physical [gpa, gpa + size) is fd at offset */
    uint64_t gpa, size, offset;
    int fd;
};

/* What the protocol does to the device. Each returns 0 or -errno; a failed read answers the
 * guest all ones, as a bus does for a function that does not answer. sysmem and irqfd take the
 * fds they are given (they close them, or keep them). */
struct mpq_device {
    void *arg;
    int (*cfg_read)(void *arg, uint32_t off, uint32_t len, uint32_t *val);
    int (*cfg_write)(void *arg, uint32_t off, uint32_t len, uint32_t val);
    int (*bar_read)(void *arg, uint64_t gpa, uint32_t len, uint64_t *val);
    int (*bar_write)(void *arg, uint64_t gpa, uint32_t len, uint64_t val);
    int (*sysmem)(void *arg, const struct mpq_region *r, int n);
    int (*irqfd)(void *arg, int intx, int resample);
    int (*reset)(void *arg);
};

struct mpq {
    const struct mpq_device *dev;
    char err[200];             /* why the last message was refused */
    unsigned refused;          /* messages refused (answered as a bus would) */
};

void mpq_init(struct mpq *s, const struct mpq_device *dev);

/* A message's header: its command and the size of its body, checked (-EPROTO, s->err says
 * what was wrong). */
int mpq_parse_hdr(struct mpq *s, const uint8_t hdr[MPQ_HDR_SIZE], uint32_t *cmd, size_t *size);
/* Handle one message: its body (size bytes, checked by mpq_parse_hdr) and the fds that came
 * with it, which are the handler's whatever happens (closed unless a device call keeps them).
 * *reply is set when the command wants MPQ_RET; *out is its value. 0 or -errno. */
int mpq_handle(struct mpq *s, uint32_t cmd, const uint8_t *body, size_t size, int *fds, int nfds,
               bool *reply, uint64_t *out);
/* The MPQ_RET message carrying val, as QEMU reads it. */
size_t mpq_ret(uint8_t buf[MPQ_HDR_SIZE + 8], uint64_t val);

/* Read one message from socket fd, handle it and send its reply: 0 (a message refused counts in
 * s->refused, s->err says why), -EPIPE when QEMU hung up, -EPROTO for a header that puts the
 * stream out of step (s->err), or another -errno. */
int mpq_serve_one(struct mpq *s, int fd);

#endif
