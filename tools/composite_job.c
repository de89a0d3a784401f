/*
 * composite_job: the composite workload of device-lending-kvm-multidevice-2019 §7.5 (Fig. 21)
 * and smartio-tocs-2021 §7.2 (Fig. 30) as its data movement: each epoch loads data from an
 * NVMe into two accelerators, has them exchange it peer to peer, and writes what each
 * received back to the NVMe. A driver on the driver model (include/ntblend/pci.h), like
 * accel_drv and nvme_drv, through the same code: libntbnvme's queue pairs (nvme_open_pci) and
 * the accelerator engine library (src/drivers/accel_engine.h). It binds the first NVMe and
 * the first two accelerators of its host's PCIe tree (or the three --use names), its own or
 * lent to it alike, so one binary gives the papers' cases: all devices local, one lender, two.
 *
 *   ntblend run --host H -- composite_job [--epochs 5] [--size 4M] [--lba 0] [--use N,A,A] [--json]
 *
 * One epoch, each stage timed (the epoch is their sum):
 *   load   the NVMe reads 2 x SIZE bytes of input into a buffer in this host's RAM
 *   h2d    accelerator k's engine copies half k of it into its memory (both at once)
 *   p2p    each engine copies its half into the other's memory, peer to peer (both at once)
 *   d2h    each engine copies what it received into an output buffer in RAM
 *   store  the NVMe writes the output (2 x SIZE bytes) after the input on the namespace
 * A warm-up epoch runs first, checked but not reported. Before each epoch (not timed) fresh input, a pattern of the epoch, is written to the NVMe
 * and the buffers are cleared; after it the output is read back from the NVMe and must be the
 * input with its halves swapped, or the job fails (exit status 1).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accel_engine.h"
#include "ntblend/nvme.h"
#include "ntblend/pci.h"

#define MAX_ACCELS 8
#define NSTAGES 5
#define CHUNK_MAX (128u << 10) /* bytes per NVMe command (or the controller's limit) */
#define IO_TIMEOUT_MS 30000

static const char *const stage_name[NSTAGES] = { "load", "h2d", "p2p", "d2h", "store" };

static struct {
    unsigned epochs;
    size_t size;
    uint64_t lba;
    uint32_t nsid;
    bool json;
    const char *use[3]; /* --use: the NVMe's and the accelerators' slots, or none */
} opt = { .epochs = 5, .size = 4u << 20, .nsid = 1 };

/* What probe() found; the job takes the NVMe and the first two accelerators. The lock is held
 * by the job while it uses them: a remove() waits for the job to give up (its I/O fails at
 * once on a removed function) and to close everything. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct pci_dev *nvme_fn, *accel_fn[MAX_ACCELS];
static int naccels;

/* With --use, whether dev is one of the named (its slot "03:00.0" or name "0000:03:00.0"). */
static bool chosen(const struct pci_dev *dev, int from, int to)
{
    if (!opt.use[0])
        return true;
    const char *name = pci_name(dev);
    for (int i = from; i < to; i++)
        if (!strcmp(name, opt.use[i]) || (strlen(name) > 5 && !strcmp(name + 5, opt.use[i])))
            return true;
    return false;
}

#define NVME_CLASS 0x010802

/* One driver per process (the driver model's rule): it takes the NVMe and the accelerators. */
static int probe(struct pci_dev *dev, const struct pci_device_id *id)
{
    (void)id;
    bool nvme = pci_class(dev) == NVME_CLASS;
    if (!chosen(dev, nvme ? 0 : 1, nvme ? 1 : 3))
        return 0; /* not one of --use: bound (quietly) and left idle */
    pthread_mutex_lock(&lock);
    int rc = 0;
    if (nvme && nvme_fn)
        rc = -EBUSY; /* one is enough: the others stay free for other drivers */
    else if (nvme)
        nvme_fn = dev;
    else if (naccels < MAX_ACCELS)
        accel_fn[naccels++] = dev;
    else
        rc = -ENOSPC;
    pthread_mutex_unlock(&lock);
    return rc;
}

static void remove_fn(struct pci_dev *dev)
{
    pthread_mutex_lock(&lock); /* the job has closed what it had of dev */
    if (nvme_fn == dev)
        nvme_fn = NULL;
    for (int i = 0; i < naccels; i++)
        if (accel_fn[i] == dev)
            accel_fn[i] = NULL;
    pthread_mutex_unlock(&lock);
}

/* NVMe functions by class, and the accelerator model's IDs (accel_eng_ids). */
static struct pci_device_id ids[8] = {
    { .vendor = PCI_ANY_ID, .device = PCI_ANY_ID, .class_code = NVME_CLASS, .class_mask = 0xffffff },
};
static struct pci_driver driver = {
    .name = "composite_job", .id_table = ids, .probe = probe, .remove = remove_fn,
};

/* ---------------------------------------------------------------- the job's state */

struct job {
    nvme_dev_t *nd;
    nvme_qpair_t *qp;
    uint32_t block;   /* the namespace's block size */
    size_t chunk;     /* bytes per NVMe command */
    struct accel_eng eng[2];
    bool eng_open[2];
    uint8_t *in, *out;           /* 2 x size each, this host's RAM */
    dma_addr_t in_nv, out_nv;    /* ... as the NVMe reaches them */
    dma_addr_t in_ac[2], out_ac[2]; /* ... as accelerator k reaches them */
    dma_addr_t peer[2];          /* accelerator k's address of the other's memory */
    uint8_t *want;               /* the expected output */
    int io_err;                  /* the first failed NVMe command's error */
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void io_done(void *arg, const struct nvme_cpl *cpl)
{
    struct job *j = arg;
    if (cpl->rc && !j->io_err)
        j->io_err = cpl->rc;
}

/* bytes at ioaddr to or from the namespace at lba, in chunks, as many in flight as the queue
 * takes. 0 or -errno. */
static int nvme_xfer(struct job *j, enum nvme_op op, uint64_t lba, uint64_t ioaddr, size_t bytes)
{
    j->io_err = 0;
    for (size_t off = 0; off < bytes && !j->io_err;) {
        size_t n = bytes - off < j->chunk ? bytes - off : j->chunk;
        int rc = nvme_submit_dma(j->qp, op, opt.nsid, lba + off / j->block,
                                 (uint32_t)(n / j->block), ioaddr + off, 0, io_done, j);
        if (rc == -EAGAIN) { /* the queue is full: take completions, then again */
            if ((rc = nvme_qpair_wait(j->qp, IO_TIMEOUT_MS)) < 0)
                return rc;
            continue;
        }
        if (rc)
            return rc;
        off += n;
    }
    while (nvme_qpair_outstanding(j->qp)) {
        int rc = nvme_qpair_wait(j->qp, IO_TIMEOUT_MS);
        if (rc < 0)
            return rc;
    }
    return j->io_err;
}

/* One copy on each accelerator at once: accelerator k from src[k] to dst[k]; 0 or -errno. */
static int copy2(struct job *j, const uint64_t src[2], const uint64_t dst[2], uint32_t flags)
{
    static const struct accel_wait w = { .timeout_ms = 10000, .poll_us = 20000, .need_irq = true };
    uint32_t target[2];
    for (int k = 0; k < 2; k++)
        target[k] = accel_eng_copies(&j->eng[k], src[k], dst[k], (uint32_t)opt.size, flags, true, 1);
    int rc = 0;
    for (int k = 0; k < 2; k++) {
        int r = accel_eng_wait(&j->eng[k], target[k], &w);
        if (!r && (accel_eng_reg(&j->eng[k], ACCEL_REG_ERRORS) ||
                   (accel_eng_status(&j->eng[k], target[k] - 1) & ACCEL_ERR_MASK)))
            r = -EIO;
        if (r && !rc) {
            fprintf(stderr, "composite_job: %s: copy failed: %s (errors %u, last error %u)\n",
                    pci_name(j->eng[k].dev), strerror(-r), accel_eng_reg(&j->eng[k], ACCEL_REG_ERRORS),
                    accel_eng_reg(&j->eng[k], ACCEL_REG_LAST_ERR));
            rc = r;
        }
    }
    return rc;
}

/* One epoch, its stages' times into ns[]; then the output checked. 0, -EILSEQ (wrong data)
 * or -errno. */
static int epoch(struct job *j, unsigned e, uint64_t ns[NSTAGES])
{
    size_t s = opt.size;
    uint64_t in_lba = opt.lba, out_lba = opt.lba + 2 * s / j->block;
    /* Fresh input on the NVMe, the buffers cleared (not timed). */
    accel_eng_pattern(j->in, s, 2 * e + 1);
    accel_eng_pattern(j->in + s, s, 2 * e + 2);
    memcpy(j->want, j->in + s, s); /* output half k is input half 1 - k */
    memcpy(j->want + s, j->in, s);
    int rc = nvme_xfer(j, NVME_OP_WRITE, in_lba, j->in_nv, 2 * s);
    memset(j->in, 0, 2 * s);
    memset(j->out, 0, 2 * s);
    if (rc)
        return rc;

    uint64_t t = now_ns(), t1;
    rc = nvme_xfer(j, NVME_OP_READ, in_lba, j->in_nv, 2 * s);
    ns[0] = (t1 = now_ns()) - t, t = t1;
    if (!rc) {
        const uint64_t src[2] = { j->in_ac[0], j->in_ac[1] + s }, dst[2] = { 0, 0 };
        rc = copy2(j, src, dst, ACCEL_DESC_SRC_BUS);
        ns[1] = (t1 = now_ns()) - t, t = t1;
    }
    if (!rc) {
        const uint64_t src[2] = { 0, 0 }, dst[2] = { j->peer[0] + s, j->peer[1] + s };
        rc = copy2(j, src, dst, ACCEL_DESC_DST_BUS);
        ns[2] = (t1 = now_ns()) - t, t = t1;
    }
    if (!rc) {
        const uint64_t src[2] = { s, s }, dst[2] = { j->out_ac[0], j->out_ac[1] + s };
        rc = copy2(j, src, dst, ACCEL_DESC_DST_BUS);
        ns[3] = (t1 = now_ns()) - t, t = t1;
    }
    if (!rc) {
        rc = nvme_xfer(j, NVME_OP_WRITE, out_lba, j->out_nv, 2 * s);
        ns[4] = now_ns() - t;
    }
    if (rc)
        return rc;
    /* What the NVMe holds now, read back into the cleared output buffer (not timed). */
    memset(j->out, 0, 2 * s);
    if ((rc = nvme_xfer(j, NVME_OP_READ, out_lba, j->out_nv, 2 * s)))
        return rc;
    return memcmp(j->out, j->want, 2 * s) ? -EILSEQ : 0;
}

/* ---------------------------------------------------------------- set up, run, tear down */

static dma_addr_t map(struct pci_dev *dev, void *cpu, size_t n, int *rc)
{
    dma_addr_t a = *rc ? DMA_MAPPING_ERROR : dma_map_single(dev, cpu, n, DMA_BIDIRECTIONAL);
    if (!*rc && dma_mapping_error(dev, a))
        *rc = -errno;
    return a;
}

static void unmap(struct pci_dev *dev, dma_addr_t a, size_t n)
{
    if (dev && a != DMA_MAPPING_ERROR)
        dma_unmap_single(dev, a, n, DMA_BIDIRECTIONAL);
}

static int setup(struct job *j, struct pci_dev *nv, struct pci_dev *ac[2])
{
    size_t s = opt.size;
    int rc = nvme_open_pci(nv, &(struct nvme_open_opts){ .admin_irq = 1 }, &j->nd);
    if (rc) {
        fprintf(stderr, "composite_job: %s: %s\n", pci_name(nv), nvme_errmsg());
        return rc;
    }
    struct nvme_ctrl_info ci;
    struct nvme_ns_info ni;
    if ((rc = nvme_ctrl_info(j->nd, &ci)) || (rc = nvme_ns_info(j->nd, opt.nsid, &ni))) {
        fprintf(stderr, "composite_job: %s: no namespace %u\n", pci_name(nv), opt.nsid);
        return rc;
    }
    j->block = ni.block_size;
    j->chunk = ci.max_transfer && ci.max_transfer < CHUNK_MAX ? ci.max_transfer : CHUNK_MAX;
    if (s % j->block || opt.lba + 4 * s / j->block > ni.blocks) {
        fprintf(stderr, "composite_job: --size must be a multiple of the %u-byte block, and "
                "--lba + 4 x --size (input and output) within namespace %u's %" PRIu64 " blocks\n",
                j->block, opt.nsid, ni.blocks);
        return -EINVAL;
    }
    if ((rc = nvme_qpair_create(j->nd, &(struct nvme_qpair_opts){ .depth = 64, .irq = 2 }, &j->qp))) {
        fprintf(stderr, "composite_job: %s: %s\n", pci_name(nv), nvme_errmsg());
        return rc;
    }
    for (int k = 0; k < 2; k++) {
        rc = accel_eng_open(&j->eng[k], ac[k], 0, true);
        j->eng_open[k] = true;
        if (rc) {
            fprintf(stderr, "composite_job: %s: cannot set it up: %s\n", pci_name(ac[k]), strerror(-rc));
            return rc;
        }
        uint64_t mem = (uint64_t)accel_eng_reg(&j->eng[k], ACCEL_REG_MEM_LO) |
                       (uint64_t)accel_eng_reg(&j->eng[k], ACCEL_REG_MEM_HI) << 32;
        if (mem < 2 * s) {
            fprintf(stderr, "composite_job: %s has %" PRIu64 " bytes of memory; --size may be "
                    "at most half of it\n", pci_name(ac[k]), mem);
            return -EINVAL;
        }
    }
    j->in = dma_host_alloc(2 * s);
    j->out = dma_host_alloc(2 * s);
    j->want = malloc(2 * s);
    if (!j->in || !j->out || !j->want)
        return -ENOMEM;
    j->in_nv = map(nv, j->in, 2 * s, &rc);
    j->out_nv = map(nv, j->out, 2 * s, &rc);
    for (int k = 0; k < 2; k++) {
        j->in_ac[k] = map(ac[k], j->in, 2 * s, &rc);
        j->out_ac[k] = map(ac[k], j->out, 2 * s, &rc);
        j->peer[k] = rc ? DMA_MAPPING_ERROR
                        : dma_map_resource(ac[k], pci_resource_start(ac[1 - k], ACCEL_BAR_MEM), 2 * s);
        if (!rc && dma_mapping_error(ac[k], j->peer[k]))
            rc = -errno;
    }
    if (rc)
        fprintf(stderr, "composite_job: cannot map the buffers for the devices: %s\n", strerror(-rc));
    return rc;
}

static void teardown(struct job *j, struct pci_dev *nv, struct pci_dev *ac[2])
{
    size_t s = opt.size;
    for (int k = 0; k < 2; k++) {
        unmap(ac[k], j->in_ac[k], 2 * s);
        unmap(ac[k], j->out_ac[k], 2 * s);
        if (j->peer[k] != DMA_MAPPING_ERROR)
            dma_unmap_resource(ac[k], j->peer[k], 2 * s);
        if (j->eng_open[k])
            accel_eng_close(&j->eng[k]);
    }
    unmap(nv, j->in_nv, 2 * s);
    unmap(nv, j->out_nv, 2 * s);
    if (j->qp)
        nvme_qpair_delete(j->qp);
    if (j->nd)
        nvme_close(j->nd);
    dma_host_free(j->in);
    dma_host_free(j->out);
    free(j->want);
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

static void report(struct pci_dev *nv, struct pci_dev *ac[2], uint64_t (*ns)[NSTAGES + 1], unsigned n)
{
    uint64_t *tot = malloc(n * sizeof *tot);
    for (unsigned e = 0; tot && e < n; e++)
        tot[e] = ns[e][NSTAGES];
    if (tot)
        qsort(tot, n, sizeof *tot, cmp_u64);
    double med = tot ? (double)tot[n / 2] / 1e3 : 0;
    free(tot);
    if (!opt.json) {
        printf("median epoch %.1f us over %u epochs, data verified after each\n", med, n);
        return;
    }
    printf("{\"nvme\":\"%s\",\"accels\":[\"%s\",\"%s\"],\"size\":%zu,\"epochs\":[", pci_name(nv),
           pci_name(ac[0]), pci_name(ac[1]), opt.size);
    for (unsigned e = 0; e < n; e++) {
        printf("%s{\"epoch\":%u", e ? "," : "", e + 1);
        for (int k = 0; k < NSTAGES; k++)
            printf(",\"%s_us\":%.1f", stage_name[k], (double)ns[e][k] / 1e3);
        printf(",\"total_us\":%.1f}", (double)ns[e][NSTAGES] / 1e3);
    }
    printf("],\"median_epoch_us\":%.1f,\"verified\":true}\n", med);
}

static int run(void)
{
    struct job j = { .in_nv = DMA_MAPPING_ERROR, .out_nv = DMA_MAPPING_ERROR,
                     .in_ac = { DMA_MAPPING_ERROR, DMA_MAPPING_ERROR },
                     .out_ac = { DMA_MAPPING_ERROR, DMA_MAPPING_ERROR },
                     .peer = { DMA_MAPPING_ERROR, DMA_MAPPING_ERROR } };
    uint64_t (*ns)[NSTAGES + 1] = calloc(opt.epochs, sizeof *ns);
    pthread_mutex_lock(&lock);
    struct pci_dev *nv = nvme_fn, *ac[2] = { NULL, NULL };
    int found = 0;
    for (int i = 0; i < naccels && found < 2; i++)
        if (accel_fn[i])
            ac[found++] = accel_fn[i];
    int rc = ns ? 0 : -ENOMEM;
    if (!rc && (!nv || found < 2)) {
        fprintf(stderr, "composite_job: needs an NVMe and two accelerators in this host's PCIe "
                "tree%s, found %d and %d (ntblend lspci --host H; lend others' with ntblend device "
                "lend NAME --to H)\n", opt.use[0] ? " (of the --use slots)" : "", nv ? 1 : 0, found);
        rc = -ENODEV;
    }
    if (!rc)
        rc = setup(&j, nv, ac);
    if (!rc && !opt.json)
        printf("composite_job: %s, %s and %s; %u epochs of 2 x %zu bytes\n", pci_name(nv),
               pci_name(ac[0]), pci_name(ac[1]), opt.epochs, opt.size);
    /* One epoch first, checked but not reported (as bandwidthTest warms up): the first
     * touches of the buffers and of the devices' memory fault their pages in. */
    uint64_t warm[NSTAGES];
    if (!rc && (rc = epoch(&j, opt.epochs, warm)))
        fprintf(stderr, "composite_job: the warm-up epoch failed: %s\n",
                rc == -EILSEQ ? "the output on the NVMe is not the input with its halves swapped"
                              : strerror(-rc));
    for (unsigned e = 0; !rc && e < opt.epochs; e++) {
        rc = epoch(&j, e, ns[e]);
        for (int k = 0; k < NSTAGES; k++)
            ns[e][NSTAGES] += ns[e][k];
        if (rc == -EILSEQ)
            fprintf(stderr, "composite_job: epoch %u: the output on the NVMe is not the input "
                    "with its halves swapped\n", e + 1);
        else if (rc)
            fprintf(stderr, "composite_job: epoch %u: %s\n", e + 1, strerror(-rc));
        else if (!opt.json) {
            printf("epoch %u: %.1f us (", e + 1, (double)ns[e][NSTAGES] / 1e3);
            for (int k = 0; k < NSTAGES; k++)
                printf("%s%s %.1f", k ? ", " : "", stage_name[k], (double)ns[e][k] / 1e3);
            printf("), data verified\n");
        }
    }
    if (!rc)
        report(nv, ac, ns, opt.epochs);
    if (nv)
        teardown(&j, nv, ac);
    pthread_mutex_unlock(&lock);
    free(ns);
    return rc;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ntblend run --host H -- composite_job [--epochs N] [--size BYTES] [--lba L]\n"
            "                                              [--nsid N] [--use NVME,ACCEL,ACCEL] [--json]\n"
            "The composite workload (device-lending-kvm-multidevice-2019 §7.5, smartio-tocs-2021\n"
            "§7.2) on the first NVMe and the first two accelerators of host H, local or lent: per\n"
            "epoch the NVMe loads input into RAM, the accelerators copy it in, exchange it peer to\n"
            "peer and copy it out, and the NVMe stores it; each stage timed, the output checked.\n"
            "  --epochs N     epochs to run (default 5, at most 10000)\n"
            "  --size BYTES   per accelerator, k or M suffix (default 4M, at most 64M; the\n"
            "                 accelerators need twice that of memory)\n"
            "  --lba L        where the input starts on the namespace (default 0); the output\n"
            "                 follows it: 4 x --size bytes are overwritten\n"
            "  --nsid N       the namespace (default 1)\n"
            "  --use N,A,A    these functions only (slots as ntblend lspci shows them, e.g.\n"
            "                 80:00.0,81:00.0,82:00.0): the NVMe, then the two accelerators;\n"
            "                 the host's other NVMes and accelerators stay idle\n"
            "  --json         one JSON object: every epoch's stages and total in us, the median\n"
            "Exit status: 0 ok, 1 failure or wrong data, 2 usage.\n");
}

int main(int argc, char **argv)
{
    static const struct option lo[] = { { "epochs", 1, NULL, 'e' }, { "size", 1, NULL, 's' },
                                        { "lba", 1, NULL, 'l' }, { "nsid", 1, NULL, 'n' },
                                        { "json", 0, NULL, 'j' }, { "use", 1, NULL, 'u' }, { "help", 0, NULL, 'h' },
                                        { 0 } };
    int c;
    char *end;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (c) {
        case 'e':
            opt.epochs = (unsigned)strtoul(optarg, &end, 10);
            if (*end || opt.epochs < 1 || opt.epochs > 10000) {
                fprintf(stderr, "composite_job: --epochs takes 1..10000\n");
                return 2;
            }
            break;
        case 's':
            if (accel_eng_parse_size(optarg, 64u << 20, &opt.size)) {
                fprintf(stderr, "composite_job: --size takes 1..64M bytes (k or M suffix)\n");
                return 2;
            }
            break;
        case 'l':
            opt.lba = strtoull(optarg, &end, 0);
            if (*end || *optarg == '-') {
                fprintf(stderr, "composite_job: --lba takes a block number\n");
                return 2;
            }
            break;
        case 'n':
            opt.nsid = (uint32_t)strtoul(optarg, &end, 0);
            if (*end || !opt.nsid) {
                fprintf(stderr, "composite_job: --nsid takes a namespace number (1..)\n");
                return 2;
            }
            break;
        case 'j': opt.json = true; break;
        case 'u': {
            char *p = optarg;
            for (int i = 0; i < 3; i++) {
                opt.use[i] = strsep(&p, ",");
                if (!opt.use[i] || !*opt.use[i] || (i == 2 && p)) {
                    fprintf(stderr, "composite_job: --use takes three slots, the NVMe's and two "
                            "accelerators' (ntblend lspci --host H), e.g. 80:00.0,81:00.0,82:00.0\n");
                    return 2;
                }
            }
            break;
        }
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "composite_job: unexpected argument '%s' (see --help)\n", argv[optind]);
        return 2;
    }
    for (int i = 0, k = 1; accel_eng_ids[i].vendor && k < 7; i++)
        ids[k++] = accel_eng_ids[i];
    int n = pci_register_driver(&driver);
    if (n < 0) {
        fprintf(stderr, "composite_job: %s (run it on a host: ntblend run --host H -- composite_job)\n",
                strerror(-n));
        return 1;
    }
    int rc = run();
    pci_unregister_driver(&driver);
    return rc ? 1 : 0;
}
