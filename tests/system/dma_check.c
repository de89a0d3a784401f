/*
 * A driver that checks streaming DMA (dma_map_single, dma_map_sg) on every accelerator of its
 * host's tree, local or lent, by what the device's own engine does (test_lending_dma):
 *
 *   dma_check           data through mapped buffers; a DMA outside them, into a buffer
 *                       unmapped again, or against the mapping's direction fails and changes
 *                       no byte; memory that is not from dma_host_alloc is EINVAL
 *   dma_check --no-iommu  the data checks only (the host has no IOMMU: devices reach all of
 *                       its RAM)
 *   dma_check --exhaust on the first lent function: coherent buffers until the lender's adapter has
 *                       no LUT entry left, then dma_map_single is ENOSPC; after one is freed it
 *                       maps
 *   dma_check --each    one dma_map_single per function, in tree order: "mapped" or the error
 *   dma_check --rid     two lent functions whose lender has one requester-ID entry left:
 *                       the second cannot map while the first has a mapping, and can once the
 *                       first has unmapped; then the first cannot
 *   dma_check --hold    map a buffer on each function, say "holding PID", wait to be killed
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "accel_engine.h"

#define PAGE 4096u
#define MAX_COH 64

static enum { CHECK, EXHAUST, EACH, HOLD, RID } mode;
static struct pci_dev *lent[2]; /* RID: the first two lent functions */
static int failed;
static bool exhausted, isolation = true;

#define FAIL(dev, ...)                                                                       \
    do {                                                                                     \
        printf("%s: FAIL: ", pci_name(dev));                                                 \
        printf(__VA_ARGS__);                                                                 \
        printf("\n");                                                                        \
        failed++;                                                                            \
    } while (0)

/* One copy by the engine, polled; 0, or the descriptor's ACCEL_ERR_*. */
static int copy(struct pci_dev *dev, struct accel_eng *a, uint64_t src, uint64_t dst,
                uint32_t len, uint32_t flags)
{
    static const struct accel_wait w = { .timeout_ms = 10000, .poll_us = 100 };
    uint32_t target = accel_eng_copies(a, src, dst, len, flags, false, 1);
    if (accel_eng_wait(a, target, &w)) {
        FAIL(dev, "copy %u did not complete", target);
        return -1;
    }
    return (int)(accel_eng_status(a, target - 1) & ACCEL_ERR_MASK);
}

static bool all(const uint8_t *p, size_t n, uint8_t v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v)
            return false;
    return true;
}

static void check(struct pci_dev *dev, struct accel_eng *a)
{
    /* in: guard page, data page, guard page; out likewise. */
    uint8_t *in = dma_host_alloc(3 * PAGE), *out = dma_host_alloc(3 * PAGE);
    uint8_t *want = malloc(PAGE);
    if (!in || !out || !want) {
        FAIL(dev, "dma_host_alloc: %s", strerror(errno));
        return;
    }
    memset(in, 0xee, 3 * PAGE);
    memset(out, 0xee, 3 * PAGE);
    accel_eng_pattern(in + PAGE, PAGE, 1);
    memcpy(want, in + PAGE, PAGE);
    dma_addr_t src = dma_map_single(dev, in + PAGE, PAGE, DMA_TO_DEVICE);
    dma_addr_t dst = dma_map_single(dev, out + PAGE, PAGE, DMA_FROM_DEVICE);
    if (dma_mapping_error(dev, src) || dma_mapping_error(dev, dst)) {
        FAIL(dev, "dma_map_single: %s", strerror(errno));
        return;
    }
    int e1 = copy(dev, a, src, 0, PAGE, ACCEL_DESC_SRC_BUS);
    int e2 = copy(dev, a, 0, dst, PAGE, ACCEL_DESC_DST_BUS);
    if (e1 || e2 || memcmp(out + PAGE, want, PAGE) || !all(out, PAGE, 0xee) ||
        !all(out + 2 * PAGE, PAGE, 0xee))
        FAIL(dev, "data through the mappings (errors %d %d)", e1, e2);
    else
        printf("%s: map/unmap data verified\n", pci_name(dev));

    if (!isolation)
        goto sg;
    /* Outside the mapped buffers: the pages after out's mapping (no mapping there). */
    memset(out + PAGE, 0x55, PAGE);
    int e3 = copy(dev, a, 0, dst + PAGE, PAGE, ACCEL_DESC_DST_BUS);
    int e4 = copy(dev, a, 0, dst + 2 * PAGE - 64, 128, ACCEL_DESC_DST_BUS);
    if (e3 != ACCEL_ERR_FAULT || e4 != ACCEL_ERR_FAULT || !all(out, PAGE, 0xee) ||
        !all(out + PAGE, PAGE, 0x55) || !all(out + 2 * PAGE, PAGE, 0xee) ||
        !all(in, PAGE, 0xee) || !all(in + 2 * PAGE, PAGE, 0xee))
        FAIL(dev, "a DMA outside the mapped buffers: errors %d %d, or memory changed", e3, e4);
    else
        printf("%s: outside the buffers: IOMMU fault, nothing written\n", pci_name(dev));

    /* Against the direction: the device may only read `in` (a permission fault, which the
     * model reports as ACCEL_ERR_ACCESS). */
    int e5 = copy(dev, a, 0, src, PAGE, ACCEL_DESC_DST_BUS);
    if ((e5 != ACCEL_ERR_FAULT && e5 != ACCEL_ERR_ACCESS) || memcmp(in + PAGE, want, PAGE))
        FAIL(dev, "a write into a DMA_TO_DEVICE mapping: error %d, or memory changed", e5);
    else
        printf("%s: against the direction: IOMMU fault, nothing written\n", pci_name(dev));

    /* Unmapped again: nothing reaches the buffer any more. */
    dma_unmap_single(dev, dst, PAGE, DMA_FROM_DEVICE);
    int e6 = copy(dev, a, 0, dst, PAGE, ACCEL_DESC_DST_BUS);
    if (e6 != ACCEL_ERR_FAULT || !all(out + PAGE, PAGE, 0x55))
        FAIL(dev, "a DMA into an unmapped buffer: error %d, or memory changed", e6);
    else
        printf("%s: unmapped again: IOMMU fault, nothing written\n", pci_name(dev));
sg:
    if (!isolation)
        dma_unmap_single(dev, dst, PAGE, DMA_FROM_DEVICE);
    dma_unmap_single(dev, src, PAGE, DMA_TO_DEVICE);

    /* Scatter-gather: three pieces of in into device memory, back into out. */
    struct scatterlist sg[3], sg2[3];
    sg_init_table(sg, 3);
    sg_init_table(sg2, 3);
    accel_eng_pattern(in, 3 * PAGE, 9);
    memset(out, 0, 3 * PAGE);
    for (int i = 0; i < 3; i++) {
        sg_set_buf(&sg[i], in + i * PAGE + 100u * (unsigned)i, PAGE - 100u * (unsigned)i);
        sg_set_buf(&sg2[i], out + i * PAGE + 100u * (unsigned)i, PAGE - 100u * (unsigned)i);
    }
    int n = dma_map_sg(dev, sg, 3, DMA_TO_DEVICE), n2 = dma_map_sg(dev, sg2, 3, DMA_FROM_DEVICE);
    int e = n && n2 ? 0 : -1;
    for (int i = 0; !e && i < n; i++)
        e = copy(dev, a, sg_dma_address(&sg[i]), (uint64_t)i * PAGE, sg_dma_len(&sg[i]),
                 ACCEL_DESC_SRC_BUS);
    for (int i = 0; !e && i < n2; i++)
        e = copy(dev, a, (uint64_t)i * PAGE, sg_dma_address(&sg2[i]), sg_dma_len(&sg2[i]),
                 ACCEL_DESC_DST_BUS);
    bool same = !e;
    for (int i = 0; same && i < 3; i++)
        same = !memcmp(sg[i].buf, sg2[i].buf, sg[i].length);
    if (n)
        dma_unmap_sg(dev, sg, 3, DMA_TO_DEVICE);
    if (n2)
        dma_unmap_sg(dev, sg2, 3, DMA_FROM_DEVICE);
    if (!same)
        FAIL(dev, "scatter-gather: %d and %d segments, error %d", n, n2, e);
    else
        printf("%s: scatter-gather data verified\n", pci_name(dev));

    /* Only host RAM from dma_host_alloc can be mapped. */
    dma_addr_t bad = dma_map_single(dev, want, PAGE, DMA_TO_DEVICE);
    if (!dma_mapping_error(dev, bad) || errno != EINVAL)
        FAIL(dev, "dma_map_single of malloc'd memory did not fail with EINVAL");
    else
        printf("%s: not host RAM: EINVAL\n", pci_name(dev));
    free(want);
    dma_host_free(in);
    dma_host_free(out);
}

static void exhaust(struct pci_dev *dev)
{
    void *coh[MAX_COH];
    dma_addr_t io[MAX_COH];
    int n = 0;
    while (n < MAX_COH && (coh[n] = dma_alloc_coherent(dev, PAGE, &io[n])))
        n++;
    if (n == MAX_COH || errno != ENOSPC) {
        FAIL(dev, "dma_alloc_coherent did not run out of windows (%d, %s)", n, strerror(errno));
        return;
    }
    void *buf = dma_host_alloc(PAGE);
    dma_addr_t a = dma_map_single(dev, buf, PAGE, DMA_BIDIRECTIONAL);
    if (!dma_mapping_error(dev, a) || errno != ENOSPC) {
        FAIL(dev, "dma_map_single with no LUT entry left: %s", strerror(errno));
        return;
    }
    dma_free_coherent(dev, PAGE, coh[n - 1], io[n - 1]);
    a = dma_map_single(dev, buf, PAGE, DMA_BIDIRECTIONAL);
    if (dma_mapping_error(dev, a)) {
        FAIL(dev, "dma_map_single after a window was freed: %s", strerror(errno));
        return;
    }
    dma_unmap_single(dev, a, PAGE, DMA_BIDIRECTIONAL);
    printf("%s: out of LUT entries after %d coherent buffers: ENOSPC; after a free: mapped\n",
           pci_name(dev), n);
    while (--n > 0)
        dma_free_coherent(dev, PAGE, coh[n - 1], io[n - 1]);
    dma_host_free(buf);
}

static int probe(struct pci_dev *dev, const struct pci_device_id *id)
{
    (void)id;
    struct accel_eng *a = calloc(1, sizeof *a);
    if (!a)
        return -ENOMEM;
    int rc = accel_eng_open(a, dev, 0, false);
    if (rc) {
        fprintf(stderr, "dma_check: %s: cannot set it up: %s\n", pci_name(dev), strerror(-rc));
        accel_eng_close(a);
        free(a);
        return rc;
    }
    pci_set_drvdata(dev, a);
    void *buf;
    dma_addr_t io;
    switch (mode) {
    case CHECK:
        check(dev, a);
        break;
    case EXHAUST: /* the first lent function (bus 0x80 and up): its lender has no aperture yet */
        if (!exhausted && strncmp(pci_name(dev), "0000:8", 6) == 0) {
            exhausted = true;
            exhaust(dev);
        }
        break;
    case RID:
        if (strncmp(pci_name(dev), "0000:8", 6) == 0 && !lent[1])
            lent[lent[0] ? 1 : 0] = dev;
        break;
    case EACH:
    case HOLD:
        buf = dma_host_alloc(PAGE);
        io = dma_map_single(dev, buf, PAGE, DMA_BIDIRECTIONAL);
        if (dma_mapping_error(dev, io))
            printf("%s: %s\n", pci_name(dev), errno == ENOSPC ? "ENOSPC" : strerror(errno));
        else
            printf("%s: mapped\n", pci_name(dev));
        break;
    }
    fflush(stdout);
    return 0;
}

static void remove_dev(struct pci_dev *dev)
{
    struct accel_eng *a = pci_get_drvdata(dev);
    accel_eng_close(a);
    free(a);
}

static struct pci_driver driver = { .name = "dma_check", .id_table = accel_eng_ids,
                                    .probe = probe, .remove = remove_dev };

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--exhaust"))
        mode = EXHAUST;
    else if (argc > 1 && !strcmp(argv[1], "--each"))
        mode = EACH;
    else if (argc > 1 && !strcmp(argv[1], "--hold"))
        mode = HOLD;
    else if (argc > 1 && !strcmp(argv[1], "--rid"))
        mode = RID;
    else if (argc > 1 && !strcmp(argv[1], "--no-iommu"))
        isolation = false;
    else if (argc > 1) {
        fprintf(stderr, "usage: dma_check [--no-iommu | --exhaust | --each | --rid | --hold]\n");
        return 2;
    }
    int n = pci_register_driver(&driver);
    if (n <= 0) {
        fprintf(stderr, "dma_check: nothing bound (%d)\n", n);
        return 1;
    }
    if (mode == RID) {
        if (!lent[0] || !lent[1]) {
            fprintf(stderr, "dma_check: --rid needs two lent functions\n");
            return 1;
        }
        void *buf = dma_host_alloc(PAGE);
        const char *a = pci_name(lent[0]), *b = pci_name(lent[1]);
        dma_addr_t x = dma_map_single(lent[0], buf, PAGE, DMA_BIDIRECTIONAL);
        printf("%s: %s\n", a, dma_mapping_error(lent[0], x) ? strerror(errno) : "mapped");
        dma_addr_t y = dma_map_single(lent[1], buf, PAGE, DMA_BIDIRECTIONAL);
        printf("%s while %s has a mapping: %s\n", b, a,
               dma_mapping_error(lent[1], y) ? errno == ENOSPC ? "ENOSPC" : strerror(errno) : "mapped");
        dma_unmap_single(lent[0], x, PAGE, DMA_BIDIRECTIONAL);
        y = dma_map_single(lent[1], buf, PAGE, DMA_BIDIRECTIONAL);
        printf("%s once %s unmapped: %s\n", b, a,
               dma_mapping_error(lent[1], y) ? strerror(errno) : "mapped");
        x = dma_map_single(lent[0], buf, PAGE, DMA_BIDIRECTIONAL);
        printf("%s while %s has a mapping: %s\n", a, b,
               dma_mapping_error(lent[0], x) ? errno == ENOSPC ? "ENOSPC" : strerror(errno) : "mapped");
        fflush(stdout);
    }
    if (mode == HOLD) {
        printf("holding %d\n", (int)getpid());
        fflush(stdout);
        for (;;)
            pause();
    }
    pci_unregister_driver(&driver);
    return failed ? 1 : 0;
}
