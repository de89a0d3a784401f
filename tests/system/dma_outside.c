/*
 * dma_outside: a driver for test_lending_iso.sh, written only against include/ntblend/pci.h.
 * For every accelerator in its host's tree it maps one 64 KiB buffer for the device
 * (dma_alloc_coherent) and then has the device's engine write where it was not given
 * anything: just past the buffer, just before it, and 64 MiB away. Each such copy must end
 * with an error in its descriptor (the IOMMU of the buffer's host faults it, or nothing on the
 * path decodes the address) and must leave the buffer as it was; a copy into the buffer
 * itself must then still work. One line per function:
 *
 *   NAME inside ok; past the buffer: ERR; before it: ERR; 64 MiB away: ERR; buffer untouched
 *
 * Exit status 0 when every function behaved so, 1 otherwise.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <stdlib.h>

#include "accel_engine.h"

#define BUF (64u << 10)
#define LEN 4096u

static int failed;

static const char *err_name(uint32_t e)
{
    static const char *names[] = { "none", "bus master", "range", "opcode", "IOMMU fault",
                                   "master abort", "link down", "access", "ring", "other" };
    return e < sizeof names / sizeof *names ? names[e] : "?";
}

/* One copy, polled; returns its descriptor's status (ACCEL_DESC_DONE | ACCEL_ERR_*), or 0
 * when it did not complete within 5 s. */
static uint32_t copy(struct accel_eng *e, uint64_t src, uint64_t dst, uint32_t flags)
{
    static const struct accel_wait w = { .timeout_ms = 5000, .poll_us = 1000 };
    uint32_t target = accel_eng_copies(e, src, dst, LEN, flags, false, 1);
    return accel_eng_wait(e, target, &w) ? 0 : accel_eng_status(e, target - 1);
}

static int probe(struct pci_dev *dev, const struct pci_device_id *id)
{
    (void)id;
    struct accel_eng *e = calloc(1, sizeof *e);
    if (!e)
        return -ENOMEM;
    int rc = accel_eng_open(e, dev, BUF, false);
    if (rc) {
        fprintf(stderr, "dma_outside: %s: cannot set it up: %s\n", pci_name(dev), strerror(-rc));
        accel_eng_close(e);
        free(e);
        failed = 1;
        return rc;
    }
    pci_set_drvdata(dev, e);
    uint8_t *buf = e->buf;
    dma_addr_t io = e->buf_io;

    /* Into the device's memory from the buffer: allowed. */
    memset(buf, 0x5a, BUF);
    uint32_t st = copy(e, io, 0, ACCEL_DESC_SRC_BUS);
    bool ok = st == ACCEL_DESC_DONE;
    printf("%s inside %s", pci_name(dev), ok ? "ok" : err_name(st & ACCEL_ERR_MASK));
    /* Out of the device's memory to where it was given nothing. */
    memset(buf, 0x11, BUF);
    const struct { const char *what; uint64_t dst; } out[] = {
        { "past the buffer", io + BUF }, { "before it", io - LEN }, { "64 MiB away", io + (64u << 20) },
    };
    for (size_t k = 0; k < sizeof out / sizeof *out; k++) {
        st = copy(e, 0, out[k].dst, ACCEL_DESC_DST_BUS);
        uint32_t e = st & ACCEL_ERR_MASK;
        printf("; %s: %s", out[k].what, !st ? "not completed" : e ? err_name(e) : "WRITTEN");
        ok &= st && e;
    }
    bool untouched = true;
    for (uint32_t i = 0; i < BUF; i++)
        untouched &= buf[i] == 0x11;
    /* The device still works, for what it was given. */
    st = copy(e, 0, io, ACCEL_DESC_DST_BUS);
    bool back = st == ACCEL_DESC_DONE && buf[0] == 0x5a && buf[LEN - 1] == 0x5a;
    printf("; buffer %s; inside again %s\n", untouched ? "untouched" : "WRITTEN",
           back ? "ok" : "FAILED");
    if (!ok || !untouched || !back)
        failed = 1;
    return 0;
}

static void remove_dev(struct pci_dev *dev)
{
    struct accel_eng *e = pci_get_drvdata(dev);
    accel_eng_close(e); /* the engine stopped, the buffer freed, the function disabled */
    free(e);
}

static struct pci_driver driver = { .name = "dma_outside", .id_table = accel_eng_ids,
                                    .probe = probe, .remove = remove_dev };

int main(void)
{
    int n = pci_register_driver(&driver);
    pci_unregister_driver(&driver);
    if (n <= 0)
        fprintf(stderr, "dma_outside: no accelerator bound (%d)\n", n);
    return n > 0 && !failed ? 0 : 1;
}
