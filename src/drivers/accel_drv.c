/*
 * accel_drv: a driver for the accelerator (include/ntblend/accel_regs.h), written only
 * against the driver model (include/ntblend/pci.h). It binds every accelerator in its host's
 * PCIe tree — the host's own and those lent to it — and for each runs a bandwidthTest-style
 * check: a pattern copied host -> device memory -> host by the device's DMA engine, each copy
 * completing with an MSI-X interrupt, the data compared byte for byte, and the copy rates
 * measured. Nothing in it knows whether a device is local or lent.
 *
 *   ntblend run --host a -- accel_drv                 # every accelerator of host a
 *   ntblend run --host c -- accel_drv --size 4M --dump out    # results and data to out.*
 *   ntblend run --host c -- accel_drv --stay          # ... then wait until it is hot-removed
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "accel_engine.h"

static struct {
    size_t size;
    int iters;
    const char *dump;
    bool stay, p2p;
    int map_bench, irq_bench;
    int probed, failed;
} opt = { .size = 1u << 20, .iters = 8 };

#define MAX_ACCELS 16
static struct accel *accels[MAX_ACCELS]; /* bound ones, for the peer-to-peer copies */
static pthread_mutex_t accels_lock = PTHREAD_MUTEX_INITIALIZER;

struct accel {
    struct accel_eng eng; /* BAR0, the coherent buffer (the host side of the copies), the IRQ */
    volatile uint8_t *mem;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* `count` copies by the device's engine, queued at once, the last one raising the interrupt:
 * done when COMPLETED reads the last and its interrupt has reached the handler (the device
 * raises it after publishing COMPLETED), as a driver that sleeps until the interrupt sees it;
 * a copy whose interrupt never comes is an error. */
static int copies(struct accel *a, uint64_t src, uint64_t dst, uint32_t len, uint32_t flags,
                  uint32_t count)
{
    static const struct accel_wait w = { .timeout_ms = 10000, .poll_us = 20000, .need_irq = true };
    struct accel_eng *e = &a->eng;
    uint32_t target = accel_eng_copies(e, src, dst, len, flags, true, count);
    int rc = accel_eng_wait(e, target, &w);
    if (rc == -ETIME) {
        fprintf(stderr, "accel_drv: %s: copy %u completed, but its interrupt never came\n",
                pci_name(a->eng.dev), target);
        return rc;
    }
    if (rc) {
        fprintf(stderr, "accel_drv: %s: copy %u not completed: status %#x, completed %u, "
                "errors %u, last error %u\n", pci_name(a->eng.dev), target,
                accel_eng_reg(e, ACCEL_REG_STATUS), accel_eng_reg(e, ACCEL_REG_COMPLETED),
                accel_eng_reg(e, ACCEL_REG_ERRORS), accel_eng_reg(e, ACCEL_REG_LAST_ERR));
        return -ETIMEDOUT;
    }
    if (accel_eng_reg(e, ACCEL_REG_ERRORS))
        return -EIO; /* the engine counts every descriptor that failed */
    return (accel_eng_status(e, target - 1) & ACCEL_ERR_MASK) ? -EIO : 0;
}

static int copy(struct accel *a, uint64_t src, uint64_t dst, uint32_t len, uint32_t flags)
{
    return copies(a, src, dst, len, flags, 1);
}

static int run(struct accel *a)
{
    size_t n = opt.size;
    uint64_t memsz = (uint64_t)accel_eng_reg(&a->eng, ACCEL_REG_MEM_LO) |
                     (uint64_t)accel_eng_reg(&a->eng, ACCEL_REG_MEM_HI) << 32;
    if (n > memsz || n > UINT32_MAX)
        return -EINVAL;
    uint8_t *want = malloc(n);
    if (!want)
        return -ENOMEM;
    uint64_t t_h2d = 0, t_d2h = 0;
    /* A copy each way first, not timed (as bandwidthTest warms up): the first touches of the
     * buffer and of the device's memory fault their pages in. */
    memset(a->eng.buf, 0, n);
    int rc = copy(a, a->eng.buf_io, 0, (uint32_t)n, ACCEL_DESC_SRC_BUS);
    if (!rc)
        rc = copy(a, 0, a->eng.buf_io, (uint32_t)n, ACCEL_DESC_DST_BUS);
    for (int it = 0; it < opt.iters && !rc; it++) {
        accel_eng_pattern(want, n, (uint32_t)it);
        memcpy(a->eng.buf, want, n);
        uint64_t t0 = now_ns();
        rc = copy(a, a->eng.buf_io, 0, (uint32_t)n, ACCEL_DESC_SRC_BUS); /* host -> device */
        uint64_t t1 = now_ns();
        memset(a->eng.buf, 0, n);
        if (!rc)
            rc = copy(a, 0, a->eng.buf_io, (uint32_t)n, ACCEL_DESC_DST_BUS); /* device -> host */
        uint64_t t2 = now_ns();
        t_h2d += t1 - t0;
        t_d2h += t2 - t1;
        if (!rc && memcmp(a->eng.buf, want, n)) {
            fprintf(stderr, "accel_drv: %s: data read back differs (iteration %d)\n",
                    pci_name(a->eng.dev), it);
            rc = -EILSEQ;
        }
        /* The device memory holds what the CPU reads through BAR2 too. */
        if (!rc && memcmp((const void *)a->mem, want, n < 4096 ? n : 4096)) {
            fprintf(stderr, "accel_drv: %s: BAR2 differs from what was copied in\n",
                    pci_name(a->eng.dev));
            rc = -EILSEQ;
        }
    }
    if (!rc) {
        double h2d = (double)n * opt.iters / ((double)t_h2d / 1e9) / 1e6;
        double d2h = (double)n * opt.iters / ((double)t_d2h / 1e9) / 1e6;
        printf("%s %04x:%04x: %d x %zu bytes host->device %.0f MB/s, device->host %.0f MB/s, "
               "%u interrupts, data verified\n", pci_name(a->eng.dev), pci_vendor(a->eng.dev),
               pci_device(a->eng.dev), opt.iters, n, h2d, d2h, atomic_load(&a->eng.irqs));
        if (opt.dump) {
            /* What the device gave back, for comparing runs on a local and a lent device. */
            char path[512];
            snprintf(path, sizeof path, "%s.%s.bin", opt.dump, pci_name(a->eng.dev) + 5);
            FILE *f = fopen(path, "w");
            if (!f || fwrite(a->eng.buf, 1, n, f) != n)
                rc = -EIO;
            if (f)
                fclose(f);
        }
    } else {
        fprintf(stderr, "accel_drv: %s: %s\n", pci_name(a->eng.dev), strerror(-rc));
    }
    free(want);
    return rc;
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

/* The p-th fraction of n sorted times (the largest for p beyond what n samples can tell). */
static double pct_us(const uint64_t *sorted, int n, double p)
{
    size_t i = (size_t)(p * n);
    return (double)sorted[i < (size_t)n ? i : (size_t)n - 1] / 1e3;
}

/* Peer to peer: a's engine copies from its own memory straight into b's memory BAR, through
 * whatever path joins them; b's memory is then read through b's BAR and compared. */
static int p2p(struct accel *a, struct accel *b)
{
    size_t n = opt.size;
    uint8_t *want = malloc(n);
    if (!want)
        return -ENOMEM;
    accel_eng_pattern(want, n, 0x5a ^ (uint32_t)(uintptr_t)b);
    memcpy(a->eng.buf, want, n);
    int rc = copy(a, a->eng.buf_io, 0, (uint32_t)n, ACCEL_DESC_SRC_BUS); /* the data into a */
    for (size_t i = 0; !rc && i < n; i += 4096)
        *(volatile uint8_t *)(b->mem + i) = 0; /* b's memory cleared first */
    dma_addr_t dst = rc ? DMA_MAPPING_ERROR
                        : dma_map_resource(a->eng.dev, pci_resource_start(b->eng.dev, ACCEL_BAR_MEM), n);
    if (!rc && dma_mapping_error(a->eng.dev, dst))
        rc = -errno;
    uint64_t t = 0, *each = calloc((size_t)opt.iters, sizeof *each);
    if (!each && !rc)
        rc = -ENOMEM;
    for (int it = 0; !rc && it < opt.iters; it++) {
        uint64_t t0 = now_ns();
        rc = copy(a, 0, dst, (uint32_t)n, ACCEL_DESC_DST_BUS);
        each[it] = now_ns() - t0;
        t += each[it];
    }
    /* The same copies queued back to back, one interrupt for all: the engine's time per copy
     * over the path, without a wake-up per copy. */
    uint32_t queued = opt.iters < (int)ACCEL_RING_ENTRIES ? (uint32_t)opt.iters : ACCEL_RING_ENTRIES;
    uint64_t tq = now_ns();
    if (!rc)
        rc = copies(a, 0, dst, (uint32_t)n, ACCEL_DESC_DST_BUS, queued);
    tq = now_ns() - tq;
    if (!dma_mapping_error(a->eng.dev, dst))
        dma_unmap_resource(a->eng.dev, dst, n);
    if (!rc && memcmp((const void *)b->mem, want, n))
        rc = -EILSEQ;
    if (!rc) {
        /* Each copy as the driver sees it: from the doorbell to its interrupt. */
        qsort(each, (size_t)opt.iters, sizeof *each, cmp_u64);
        printf("p2p %s -> %s: %d x %zu bytes %.0f MB/s, median %.1f us per copy (p99 %.1f, "
               "p99.99 %.1f us), %.2f us per queued copy, data verified\n", pci_name(a->eng.dev),
               pci_name(b->eng.dev), opt.iters, n, (double)n * opt.iters / ((double)t / 1e9) / 1e6,
               pct_us(each, opt.iters, 0.5), pct_us(each, opt.iters, 0.99),
               pct_us(each, opt.iters, 0.9999), (double)tq / queued / 1e3);
    } else {
        fprintf(stderr, "accel_drv: p2p %s -> %s: %s\n", pci_name(a->eng.dev), pci_name(b->eng.dev),
                strerror(-rc));
    }
    free(each);
    free(want);
    return rc;
}

/* The same data from a to b via this host's RAM (device-lending-kvm-multidevice-2019 Fig. 12,
 * bottom): a's engine writes it into a buffer, then b's engine reads it into b's memory; each
 * copy pair timed from a's doorbell to b's interrupt. */
static int via_ram(struct accel *a, struct accel *b)
{
    size_t n = opt.size;
    uint8_t *want = malloc(n), *bounce = dma_host_alloc(n);
    uint64_t t = 0, *each = calloc((size_t)opt.iters, sizeof *each);
    dma_addr_t wa = DMA_MAPPING_ERROR, rb = DMA_MAPPING_ERROR;
    int rc = want && bounce && each ? 0 : -ENOMEM;
    if (!rc) {
        accel_eng_pattern(want, n, 0xa5 ^ (uint32_t)(uintptr_t)b);
        memcpy(a->eng.buf, want, n);
        rc = copy(a, a->eng.buf_io, 0, (uint32_t)n, ACCEL_DESC_SRC_BUS); /* the data into a */
    }
    if (!rc) {
        wa = dma_map_single(a->eng.dev, bounce, n, DMA_FROM_DEVICE);
        rb = dma_map_single(b->eng.dev, bounce, n, DMA_TO_DEVICE);
        if (dma_mapping_error(a->eng.dev, wa) || dma_mapping_error(b->eng.dev, rb))
            rc = -errno;
    }
    for (size_t i = 0; !rc && i < n; i += 4096)
        *(volatile uint8_t *)(b->mem + i) = 0;
    for (int it = 0; !rc && it < opt.iters; it++) {
        uint64_t t0 = now_ns();
        rc = copy(a, 0, wa, (uint32_t)n, ACCEL_DESC_DST_BUS);
        if (!rc)
            rc = copy(b, rb, 0, (uint32_t)n, ACCEL_DESC_SRC_BUS);
        each[it] = now_ns() - t0;
        t += each[it];
    }
    if (!dma_mapping_error(a->eng.dev, wa))
        dma_unmap_single(a->eng.dev, wa, n, DMA_FROM_DEVICE);
    if (!dma_mapping_error(b->eng.dev, rb))
        dma_unmap_single(b->eng.dev, rb, n, DMA_TO_DEVICE);
    if (!rc && memcmp((const void *)b->mem, want, n))
        rc = -EILSEQ;
    if (!rc) {
        qsort(each, (size_t)opt.iters, sizeof *each, cmp_u64);
        printf("via-ram %s -> %s: %d x %zu bytes %.0f MB/s, median %.1f us per copy (p99 %.1f, "
               "p99.99 %.1f us), data verified\n", pci_name(a->eng.dev), pci_name(b->eng.dev),
               opt.iters, n, (double)n * opt.iters / ((double)t / 1e9) / 1e6,
               pct_us(each, opt.iters, 0.5), pct_us(each, opt.iters, 0.99),
               pct_us(each, opt.iters, 0.9999));
    } else {
        fprintf(stderr, "accel_drv: via-ram %s -> %s: %s\n", pci_name(a->eng.dev),
                pci_name(b->eng.dev), strerror(-rc));
    }
    free(each);
    free(want);
    dma_host_free(bounce);
    return rc;
}

/* The cost of streaming DMA: n dma_map_single + dma_unmap_single of 4 KiB, the median. */
static int map_bench(struct accel *a, int n)
{
    uint64_t *t = malloc((size_t)n * sizeof *t);
    void *buf = dma_host_alloc(4096);
    if (!t || !buf) {
        free(t);
        dma_host_free(buf);
        return -ENOMEM;
    }
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        uint64_t t0 = now_ns();
        dma_addr_t io = dma_map_single(a->eng.dev, buf, 4096, DMA_BIDIRECTIONAL);
        if (dma_mapping_error(a->eng.dev, io)) {
            rc = -errno;
            break;
        }
        dma_unmap_single(a->eng.dev, io, 4096, DMA_BIDIRECTIONAL);
        t[i] = now_ns() - t0;
    }
    if (!rc) {
        qsort(t, (size_t)n, sizeof *t, cmp_u64);
        printf("map-bench %s: %d x dma_map_single+dma_unmap_single 4 KiB: median %llu ns\n",
               pci_name(a->eng.dev), n, (unsigned long long)t[n / 2]);
    } else {
        fprintf(stderr, "accel_drv: map-bench %s: %s\n", pci_name(a->eng.dev), strerror(-rc));
    }
    free(t);
    dma_host_free(buf);
    return rc;
}

/* The interrupt path: n copies of 64 bytes inside the device's own memory (no DMA across
 * anything), each timed from its doorbell to its MSI-X interrupt reaching the handler and the
 * waiter it wakes; the median. */
static int irq_bench(struct accel *a, int n)
{
    uint64_t *t = malloc((size_t)n * sizeof *t);
    if (!t)
        return -ENOMEM;
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        uint64_t t0 = now_ns();
        rc = copy(a, 0, 4096, 64, 0);
        t[i] = now_ns() - t0;
    }
    if (!rc) {
        qsort(t, (size_t)n, sizeof *t, cmp_u64);
        printf("irq-bench %s: %d x 64-byte copy, doorbell to its MSI-X interrupt in the handler: "
               "median %llu ns\n", pci_name(a->eng.dev), n, (unsigned long long)t[n / 2]);
    } else {
        fprintf(stderr, "accel_drv: irq-bench %s: %s\n", pci_name(a->eng.dev), strerror(-rc));
    }
    free(t);
    return rc;
}

static int probe(struct pci_dev *dev, const struct pci_device_id *id)
{
    (void)id;
    struct accel *a = calloc(1, sizeof *a);
    if (!a)
        return -ENOMEM;
    int rc = accel_eng_open(&a->eng, dev, opt.size, true);
    if (!rc && !(a->mem = pci_iomap(dev, ACCEL_BAR_MEM, 0)))
        rc = -errno;
    if (!rc) {
        pci_set_drvdata(dev, a);
        pthread_mutex_lock(&accels_lock);
        for (int i = 0; i < MAX_ACCELS; i++)
            if (!accels[i]) {
                accels[i] = a;
                break;
            }
        pthread_mutex_unlock(&accels_lock);
        opt.probed++;
        rc = run(a);
        if (rc)
            opt.failed++;
        fflush(stdout);
        return 0; /* stays bound (and is removed) even when the check failed */
    }
    fprintf(stderr, "accel_drv: %s: cannot set it up: %s\n", pci_name(dev), strerror(-rc));
    accel_eng_close(&a->eng);
    free(a);
    return rc;
}

static void remove_dev(struct pci_dev *dev)
{
    struct accel *a = pci_get_drvdata(dev);
    pthread_mutex_lock(&accels_lock);
    for (int i = 0; i < MAX_ACCELS; i++)
        if (accels[i] == a)
            accels[i] = NULL;
    pthread_mutex_unlock(&accels_lock);
    accel_eng_remove(&a->eng);
    free(a);
}

static struct pci_driver driver = {
    .name = "accel_drv", .id_table = accel_eng_ids, .probe = probe, .remove = remove_dev,
};

static void usage(FILE *f)
{
    fprintf(f, "usage: ntblend run --host H -- accel_drv [--size BYTES] [--iters N] [--dump PREFIX] [--p2p]\n"
               "       [--map-bench N] [--irq-bench N] [--stay]\n"
               "       (in an emulated VM: ntblend vm run NAME -- accel_drv ...)\n"
               "Binds every accelerator in host H's PCIe tree (its own and lent ones) and checks\n"
               "each: a pattern copied host -> device -> host by its DMA engine, completions by\n"
               "MSI-X, data compared, rates measured.\n"
               "  --size BYTES   bytes per copy (default 1M; k/M suffixes)\n"
               "  --iters N      copies each way (default 8)\n"
               "  --dump PREFIX  write the data read back to PREFIX.BUS:DEV.FN.bin\n"
               "  --p2p          then copy between every pair of them peer to peer (one's engine\n"
               "                 writing into the other's memory BAR; --iters copies of --size),\n"
               "                 verify, and print the rate, the median, p99 and p99.99 time per copy\n"
               "                 (doorbell to interrupt) and the time per copy of as many queued at\n"
               "                 once; then the same data via this host's RAM (one engine writes a\n"
               "                 buffer, the other reads it: line 'via-ram')\n"
               "  --map-bench N  then time N dma_map_single+dma_unmap_single of 4 KiB on each\n"
               "                 function (the first maps set up its windows) and print the median\n"
               "  --irq-bench N  then time N 64-byte copies inside each device's memory, each from\n"
               "                 its doorbell to its MSI-X interrupt in the handler: the median\n"
               "  --stay         stay bound until every device is hot-removed\n"
               "Exit status: 0 all checks passed, 1 a check failed or nothing was found.\n");
}

int main(int argc, char **argv)
{
    static const struct option lo[] = { { "size", 1, NULL, 's' }, { "iters", 1, NULL, 'i' },
                                        { "dump", 1, NULL, 'd' }, { "stay", 0, NULL, 'S' },
                                        { "p2p", 0, NULL, 'p' }, { "map-bench", 1, NULL, 'm' },
                                        { "irq-bench", 1, NULL, 'I' },
                                        { "help", 0, NULL, 'h' }, { 0 } };
    int c;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (c) {
        case 's':
            if (accel_eng_parse_size(optarg, 256u << 20, &opt.size)) {
                fprintf(stderr, "accel_drv: --size takes 1..256M bytes\n");
                return 2;
            }
            break;
        case 'i':
            opt.iters = atoi(optarg);
            if (opt.iters < 1 || opt.iters > 100000) {
                fprintf(stderr, "accel_drv: --iters takes 1..100000\n");
                return 2;
            }
            break;
        case 'd': opt.dump = optarg; break;
        case 'S': opt.stay = true; break;
        case 'p': opt.p2p = true; break;
        case 'I':
            opt.irq_bench = atoi(optarg);
            if (opt.irq_bench < 1 || opt.irq_bench > 10000000) {
                fprintf(stderr, "accel_drv: --irq-bench takes 1..10000000\n");
                return 2;
            }
            break;
        case 'm':
            opt.map_bench = atoi(optarg);
            if (opt.map_bench < 1 || opt.map_bench > 10000000) {
                fprintf(stderr, "accel_drv: --map-bench takes 1..10000000\n");
                return 2;
            }
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    int n = pci_register_driver(&driver);
    if (n < 0) {
        fprintf(stderr, "accel_drv: %s (run it on a host: ntblend run --host H -- accel_drv)\n",
                strerror(-n));
        return 1;
    }
    if (!n)
        fprintf(stderr, "accel_drv: no accelerator in this host's PCIe tree (ntblend lspci)\n");
    if (opt.p2p) {
        pthread_mutex_lock(&accels_lock);
        for (int i = 0; i < MAX_ACCELS; i++)
            for (int k = 0; k < MAX_ACCELS; k++)
                if (i != k && accels[i] && accels[k] &&
                    (p2p(accels[i], accels[k]) || via_ram(accels[i], accels[k])))
                    opt.failed++;
        pthread_mutex_unlock(&accels_lock);
    }
    if (opt.map_bench) {
        pthread_mutex_lock(&accels_lock);
        for (int i = 0; i < MAX_ACCELS; i++)
            if (accels[i] && map_bench(accels[i], opt.map_bench))
                opt.failed++;
        pthread_mutex_unlock(&accels_lock);
    }
    if (opt.irq_bench) {
        pthread_mutex_lock(&accels_lock);
        for (int i = 0; i < MAX_ACCELS; i++)
            if (accels[i] && irq_bench(accels[i], opt.irq_bench))
                opt.failed++;
        pthread_mutex_unlock(&accels_lock);
    }
    if (opt.stay && n) {
        printf("bound %d; waiting until hot-removed\n", n);
        fflush(stdout);
        pci_wait_removed(&driver, -1);
    }
    pci_unregister_driver(&driver);
    return n > 0 && !opt.failed ? 0 : 1;
}
