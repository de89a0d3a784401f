/*
 * libFuzzer harness for QEMU's multi-process remote-device messages (src/vm/mpq.c): what QEMU's
 * x-pci-proxy-dev sends over its socket. The input is a sequence of messages, each a 16-byte
 * header and its body (as much as the input has left, at most the body the header names).
 * Descriptors come as the header's padding byte says: SYNC_SYSMEM 1 + p % 8 memfds (8 is one too
 * many), SET_IRQFD p % 4 eventfds (2 is right), anything else p % 2 memfds (none is right).
 * The device behind it checks that every access it is handed is one it can serve, and every
 * descriptor must be closed once its message is handled: the handler owns them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mpq.h"

static uint8_t cfg[4096], bar[16384];

static int cfg_read(void *arg, uint32_t off, uint32_t len, uint32_t *val)
{
    (void)arg;
    if ((len != 1 && len != 2 && len != 4) || off + len > sizeof cfg)
        abort();
    *val = 0;
    memcpy(val, cfg + off, len);
    return off == 0x100 ? -EIO : 0;
}

static int cfg_write(void *arg, uint32_t off, uint32_t len, uint32_t val)
{
    (void)arg;
    if ((len != 1 && len != 2 && len != 4) || off + len > sizeof cfg)
        abort();
    memcpy(cfg + off, &val, len);
    return 0;
}

/* The BAR sits at guest-physical 0x80000000; outside it the access is the device's to refuse. */
static int bar_read(void *arg, uint64_t gpa, uint32_t len, uint64_t *val)
{
    (void)arg;
    if (len != 1 && len != 2 && len != 4 && len != 8)
        abort();
    if (gpa < 0x80000000u || gpa - 0x80000000u + len > sizeof bar)
        return -ENXIO;
    *val = 0;
    memcpy(val, bar + (gpa - 0x80000000u), len);
    return 0;
}

static int bar_write(void *arg, uint64_t gpa, uint32_t len, uint64_t val)
{
    (void)arg;
    if (len != 1 && len != 2 && len != 4 && len != 8)
        abort();
    if (gpa < 0x80000000u || gpa - 0x80000000u + len > sizeof bar)
        return -ENXIO;
    memcpy(bar + (gpa - 0x80000000u), &val, len);
    return 0;
}

static int sysmem(void *arg, const struct mpq_region *r, int n)
{
    (void)arg;
    if (n < 1 || n >= MPQ_MAX_FDS)
        abort();
    for (int i = 0; i < n; i++) {
        if (!r[i].size || r[i].gpa + r[i].size < r[i].gpa)
            abort();
        close(r[i].fd);
    }
    return 0;
}

static int irqfd(void *arg, int intx, int resample)
{
    (void)arg;
    close(intx);
    close(resample);
    return 0;
}

static int reset(void *arg)
{
    (void)arg;
    memset(cfg, 0, sizeof cfg);
    return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct mpq_device dev = { .cfg_read = cfg_read, .cfg_write = cfg_write,
                                           .bar_read = bar_read, .bar_write = bar_write,
                                           .sysmem = sysmem, .irqfd = irqfd, .reset = reset };
    struct mpq s;
    mpq_init(&s, &dev);
    while (size >= MPQ_HDR_SIZE) {
        uint8_t hdr[MPQ_HDR_SIZE], body[MPQ_MAX_BODY] = { 0 };
        memcpy(hdr, data, sizeof hdr);
        data += sizeof hdr;
        size -= sizeof hdr;
        uint32_t cmd;
        size_t len;
        if (mpq_parse_hdr(&s, hdr, &cmd, &len))
            break; /* the stream is out of step: the session ends */
        if (len > sizeof body)
            abort();
        size_t n = len < size ? len : size;
        memcpy(body, data, n);
        data += n;
        size -= n;
        int fds[MPQ_MAX_FDS], nfds = 0, want;
        uint8_t p = hdr[4];
        want = cmd == MPQ_SYNC_SYSMEM ? 1 + p % 8 : cmd == MPQ_SET_IRQFD ? p % 4 : p % 2;
        for (int i = 0; i < want; i++) {
            int fd = cmd == MPQ_SET_IRQFD ? eventfd(0, EFD_CLOEXEC)
                                          : memfd_create("guest", MFD_CLOEXEC);
            if (fd >= 0)
                fds[nfds++] = fd;
        }
        int kept[MPQ_MAX_FDS];
        memcpy(kept, fds, sizeof kept);
        bool reply;
        uint64_t val;
        mpq_handle(&s, cmd, body, len, fds, nfds, &reply, &val);
        for (int i = 0; i < nfds; i++)
            if (fcntl(kept[i], F_GETFD) != -1)
                abort(); /* a descriptor the handler did not close */
        uint8_t out[MPQ_HDR_SIZE + 8];
        if (reply && mpq_ret(out, val) != sizeof out)
            abort();
    }
    return 0;
}
