/*
 * nvme_drv: an NVMe block driver written only against the driver model
 * (include/ntblend/pci.h) and libntbnvme's queue-pair core (nvme_open_pci: the same code
 * that drives an NVMe through SmartIO). It binds every NVMe function (class 01:08:02) of its
 * host's PCIe tree — the host's own and those lent to it, which it cannot tell apart —
 * brings each up, prints what it is, and then, as asked, writes a deterministic pattern and
 * reads it back (a checksum, and the data to a file, for comparing runs byte for byte), stays
 * until the functions are hot-removed, or runs I/O until they are.
 *
 *   ntblend run --host a -- nvme_drv                         # what is there, and a check
 *   ntblend run --host c -- nvme_drv --range 0:256 --dump out  # data read back to out.*.bin
 *   ntblend run --host c -- nvme_drv --loop                  # I/O until the NVMe is removed
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ntblend/nvme.h"
#include "ntblend/pci.h"

#define MAX_FNS 16

static struct {
    uint32_t nsid;
    uint64_t lba, blocks;
    uint32_t seed;
    bool no_write, no_check, stay, loop, poll;
    unsigned seconds;
    const char *dump;
} opt = { .nsid = 1, .blocks = 256, .seed = 1 };

struct fn {
    struct pci_dev *dev;
    nvme_dev_t *nd;
    nvme_qpair_t *qp;
    bool busy;    /* the main thread is using nd/qp */
    bool removed; /* remove() ran: nd and qp are closed */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static struct fn fns[MAX_FNS];
static int nfns;
static bool looping; /* --loop runs: its I/O meets a removal and closes the handle itself */
static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---------------------------------------------------------------- the driver */

static int probe(struct pci_dev *dev, const struct pci_device_id *id)
{
    (void)id;
    pthread_mutex_lock(&lock);
    int rc = nfns < MAX_FNS ? 0 : -ENOSPC;
    if (!rc)
        fns[nfns++] = (struct fn){ .dev = dev };
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
    return rc;
}

/* The function goes: wait until the I/O on it has given up (it fails at once on a removed
 * function; under --loop the I/O thread reports that and closes the handle), then close
 * what is left, as a block driver tears its disk down. */
static void remove_fn(struct pci_dev *dev)
{
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nfns; i++) {
        struct fn *f = &fns[i];
        if (f->dev != dev || f->removed)
            continue;
        bool hot = !pci_device_is_present(dev);
        if (hot) {
            printf("%s: removed (hot-unplugged)\n", pci_name(dev));
            fflush(stdout);
        }
        while (f->busy || (looping && f->nd))
            pthread_cond_wait(&changed, &lock);
        nvme_qpair_delete(f->qp);
        nvme_close(f->nd);
        f->qp = NULL;
        f->nd = NULL;
        f->removed = true;
        pthread_cond_broadcast(&changed);
    }
    pthread_mutex_unlock(&lock);
}

static const struct pci_device_id ids[] = {
    { .vendor = PCI_ANY_ID, .device = PCI_ANY_ID, .class_code = 0x010802, .class_mask = 0xffffff },
    { 0 },
};

static struct pci_driver driver = {
    .name = "nvme_drv",
    .id_table = ids,
    .probe = probe,
    .remove = remove_fn,
};

/* Functions probed so far (probe() may add one from the watcher thread). */
static int fn_count(void)
{
    pthread_mutex_lock(&lock);
    int n = nfns;
    pthread_mutex_unlock(&lock);
    return n;
}

/* Take a function for I/O (NULL: it was removed). */
static struct fn *take(int i)
{
    pthread_mutex_lock(&lock);
    struct fn *f = fns[i].removed ? NULL : &fns[i];
    if (f)
        f->busy = true;
    pthread_mutex_unlock(&lock);
    return f;
}

static void put(struct fn *f)
{
    pthread_mutex_lock(&lock);
    f->busy = false;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
}

/* ---------------------------------------------------------------- the work */

/* The pattern: a function of the seed and the byte's place on the namespace only, so any
 * run over the same range writes, and expects, the same bytes. */
static void pattern(uint8_t *p, size_t n, uint64_t off)
{
    for (size_t i = 0; i < n; i += 8) {
        uint64_t x = (off + i) * 0x9e3779b97f4a7c15ull ^ (uint64_t)opt.seed * 0xbf58476d1ce4e5b9ull;
        x ^= x >> 31;
        memcpy(p + i, &x, n - i < 8 ? n - i : 8);
    }
}

static uint64_t fnv1a(uint64_t h, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static int bring_up(struct fn *f)
{
    struct nvme_open_opts oo = { .admin_irq = opt.poll ? 0 : 1 };
    int rc = nvme_open_pci(f->dev, &oo, &f->nd);
    if (rc) {
        fprintf(stderr, "nvme_drv: %s: %s\n", pci_name(f->dev), nvme_errmsg());
        return rc;
    }
    struct nvme_qpair_opts qo = { .depth = 64, .irq = opt.poll ? 0 : 2 };
    if ((rc = nvme_qpair_create(f->nd, &qo, &f->qp))) {
        fprintf(stderr, "nvme_drv: %s: %s\n", pci_name(f->dev), nvme_errmsg());
        nvme_close(f->nd);
        f->nd = NULL;
        return rc;
    }
    struct nvme_ctrl_info ci;
    nvme_ctrl_info(f->nd, &ci);
    printf("%s %04x:%04x NVMe: model '%s', serial '%s', firmware '%s', %u namespace(s)\n",
           pci_name(f->dev), pci_vendor(f->dev), pci_device(f->dev), ci.model, ci.serial,
           ci.firmware, ci.namespaces);
    for (uint32_t ns = 1; ns <= ci.namespaces && ns <= 64; ns++) {
        struct nvme_ns_info ni;
        if (!nvme_ns_info(f->nd, ns, &ni))
            printf("%s   namespace %u: %" PRIu64 " blocks of %u bytes (%" PRIu64 " MiB)\n",
                   pci_name(f->dev), ns, ni.blocks, ni.block_size, ni.capacity >> 20);
    }
    return 0;
}

/* Write the pattern over the range (unless --no-write), read it back, checksum and compare. */
static int check(struct fn *f)
{
    struct nvme_ns_info ni;
    struct nvme_ctrl_info ci;
    int rc = nvme_ns_info(f->nd, opt.nsid, &ni);
    if (rc) {
        fprintf(stderr, "nvme_drv: %s: %s\n", pci_name(f->dev), nvme_errmsg());
        return rc;
    }
    nvme_ctrl_info(f->nd, &ci);
    if (opt.lba >= ni.blocks || opt.blocks > ni.blocks - opt.lba || !opt.blocks) {
        fprintf(stderr, "nvme_drv: %s: --range %" PRIu64 ":%" PRIu64 " is not within namespace "
                "%u (%" PRIu64 " blocks)\n", pci_name(f->dev), opt.lba, opt.blocks, opt.nsid,
                ni.blocks);
        return -ERANGE;
    }
    size_t total = (size_t)(opt.blocks * ni.block_size), chunk = ci.max_transfer;
    uint8_t *buf = nvme_buf_alloc(f->nd, NULL, chunk), *want = malloc(chunk);
    uint8_t *all = opt.dump ? malloc(total) : NULL;
    if (!buf || !want || (opt.dump && !all)) {
        rc = -ENOMEM;
        goto out;
    }
    uint64_t h = 0xcbf29ce484222325ull, bad = 0;
    for (size_t done = 0; done < total && !rc; done += chunk) {
        size_t n = total - done < chunk ? total - done : chunk;
        uint64_t lba = opt.lba + done / ni.block_size, off = lba * ni.block_size;
        uint32_t nb = (uint32_t)(n / ni.block_size);
        pattern(want, n, off);
        if (!opt.no_write) {
            memcpy(buf, want, n);
            rc = nvme_write(f->qp, opt.nsid, lba, nb, buf);
        }
        if (!rc) {
            memset(buf, 0, n);
            rc = nvme_read(f->qp, opt.nsid, lba, nb, buf);
        }
        if (rc) {
            fprintf(stderr, "nvme_drv: %s: blocks %" PRIu64 "+%u: %s\n", pci_name(f->dev), lba,
                    nb, nvme_errmsg());
            break;
        }
        h = fnv1a(h, buf, n);
        if (!opt.no_check && memcmp(buf, want, n))
            bad++;
        if (all)
            memcpy(all + done, buf, n);
    }
    if (!rc) {
        printf("%s: namespace %u blocks %" PRIu64 "..%" PRIu64 ": %s%zu bytes read back, "
               "fnv1a64 %016" PRIx64 "%s\n", pci_name(f->dev), opt.nsid, opt.lba,
               opt.lba + opt.blocks - 1, opt.no_write ? "" : "pattern written, ", total, h,
               opt.no_check ? "" : bad ? ", DATA DIFFERS from the pattern" : ", data verified");
        if (bad && !opt.no_check)
            rc = -EILSEQ;
    }
    if (!rc && all) {
        char path[512];
        snprintf(path, sizeof path, "%s.%s.bin", opt.dump, pci_name(f->dev) + 5);
        FILE *fp = fopen(path, "w");
        if (!fp || fwrite(all, 1, total, fp) != total) {
            fprintf(stderr, "nvme_drv: cannot write %s: %s\n", path, strerror(errno));
            rc = -EIO;
        }
        if (fp && fclose(fp) && !rc)
            rc = -EIO;
    }
out:
    if (buf)
        nvme_buf_free(f->nd, buf);
    free(want);
    free(all);
    return rc;
}

/* --loop: write and read back 64 KiB pieces over the range on every function, round robin,
 * until each is removed (or --seconds, or a signal). An error on a removed function ends its
 * part; an error on one still there is a failure. */
static int loop(void)
{
    uint64_t end = opt.seconds ? now_ns() + opt.seconds * 1000000000ull : 0;
    uint64_t ios = 0, step = 0;
    int failed = 0, live = 1;
    uint8_t *want = malloc(65536);
    if (!want)
        return -ENOMEM;
    pthread_mutex_lock(&lock);
    looping = true;
    pthread_mutex_unlock(&lock);
    while (!stop && live && (!end || now_ns() < end)) {
        live = 0;
        for (int i = 0, n = fn_count(); i < n; i++) {
            struct fn *f = take(i);
            if (!f)
                continue;
            if (!f->nd) { /* failed to come up */
                put(f);
                continue;
            }
            live++;
            struct nvme_ns_info ni;
            nvme_ns_info(f->nd, opt.nsid, &ni);
            uint32_t nb = 65536 / ni.block_size;
            uint64_t span = opt.blocks > nb ? opt.blocks / nb : 1;
            uint64_t lba = opt.lba + (step % span) * nb;
            uint8_t *buf = nvme_buf_alloc(f->nd, NULL, 65536);
            int rc = buf ? 0 : -errno;
            pattern(want, 65536, lba * ni.block_size);
            if (!rc) {
                memcpy(buf, want, 65536);
                rc = nvme_write(f->qp, opt.nsid, lba, nb, buf);
            }
            if (!rc) {
                memset(buf, 0, 65536);
                rc = nvme_read(f->qp, opt.nsid, lba, nb, buf);
            }
            if (!rc && memcmp(buf, want, 65536))
                rc = -EILSEQ;
            if (buf)
                nvme_buf_free(f->nd, buf);
            bool gone = nvme_removed(f->nd);
            if (rc) {
                printf("%s: I/O error after %" PRIu64 " I/Os: %s (%s)%s\n", pci_name(f->dev),
                       ios, strerror(-rc), nvme_errmsg(),
                       gone ? "; the function was removed" : "");
                fflush(stdout);
                if (!gone)
                    failed++;
                /* Done with it: close now, remove() finds nothing left to do. */
                nvme_qpair_delete(f->qp);
                nvme_close(f->nd);
                f->qp = NULL;
                f->nd = NULL;
            } else {
                ios += 2;
            }
            put(f);
        }
        step++;
    }
    pthread_mutex_lock(&lock);
    looping = false; /* a remove() from now on closes the handle itself */
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
    free(want);
    printf("loop: %" PRIu64 " I/Os done, %d function(s) failed while present\n", ios, failed);
    return failed ? -EIO : 0;
}

/* Bring up (and check) the functions probed since the last call; how many failed. */
static int serve(int *done)
{
    int failed = 0;
    for (int nf = fn_count(); *done < nf; (*done)++) {
        struct fn *f = take(*done);
        if (!f)
            continue;
        if (bring_up(f) || (!opt.loop && check(f)))
            failed++;
        put(f);
    }
    return failed;
}

static void usage(FILE *out)
{
    fprintf(out,
        "usage: ntblend run --host H -- nvme_drv [options]\n"
        "\n"
        "An NVMe driver on the driver model: binds every NVMe function of the host's PCIe\n"
        "tree (its own, and those lent to it: ntblend lspci --host H), brings each up with\n"
        "libntbnvme and prints its model and namespaces; then writes a deterministic pattern\n"
        "over a range of blocks, reads it back and prints its checksum.\n"
        "\n"
        "  --range START:BLOCKS  the blocks to check, of namespace --nsid (default 0:256)\n"
        "  --nsid N              the namespace (default 1)\n"
        "  --seed N              the pattern's seed (default 1): the same seed and range give\n"
        "                        the same bytes on any run, any host\n"
        "  --no-write            only read the range back (what an earlier run wrote) ...\n"
        "  --no-check            ... and print its checksum without comparing to the pattern\n"
        "  --dump PREFIX         write the data read back to PREFIX.BB:DD.F.bin\n"
        "  --poll                poll for completions instead of MSI-X interrupts\n"
        "  --stay                after the check, stay until every function is removed\n"
        "                        (prints 'BDF: removed (hot-unplugged)'); exits 0 then.\n"
        "                        Functions hot-added meanwhile are brought up and checked\n"
        "                        (with none at the start, it waits for one)\n"
        "  --loop                instead of the check: write and verify 64 KiB pieces over the\n"
        "                        range until the functions are removed (or --seconds N); exits\n"
        "                        0 when I/O failed only on functions that were removed\n"
        "  --seconds N           end --loop after N seconds\n"
        "  -h, --help            this text\n"
        "\n"
        "Exit status: 0 all went well; 1 a function failed (bring-up, I/O, data); 2 bad\n"
        "options; 3 no NVMe function could be bound (without --stay).\n"
        "\n"
        "  ntblend run --host a -- nvme_drv --range 0:256 --dump /tmp/a\n"
        "  ntblend device lend nvme0 --to c\n"
        "  ntblend run --host c -- nvme_drv --range 0:256 --dump /tmp/c --stay\n");
}

static bool parse_u64(const char *s, uint64_t *v)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 0);
    if (errno || end == s || *end || *s == '-')
        return false;
    *v = x;
    return true;
}

int main(int argc, char **argv)
{
    static const struct option lopts[] = {
        { "range", required_argument, NULL, 'r' }, { "nsid", required_argument, NULL, 'n' },
        { "seed", required_argument, NULL, 's' },  { "no-write", no_argument, NULL, 'W' },
        { "no-check", no_argument, NULL, 'C' },    { "dump", required_argument, NULL, 'd' },
        { "poll", no_argument, NULL, 'p' },        { "stay", no_argument, NULL, 'S' },
        { "loop", no_argument, NULL, 'l' },        { "seconds", required_argument, NULL, 't' },
        { "help", no_argument, NULL, 'h' },        { NULL, 0, NULL, 0 },
    };
    int c;
    uint64_t v;
    while ((c = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
        switch (c) {
        case 'r': {
            char *colon = strchr(optarg, ':');
            uint64_t a, b;
            if (!colon || (*colon = 0, !parse_u64(optarg, &a)) || !parse_u64(colon + 1, &b) ||
                !b) {
                fprintf(stderr, "nvme_drv: --range takes START:BLOCKS (e.g. 0:256)\n");
                return 2;
            }
            opt.lba = a;
            opt.blocks = b;
            break;
        }
        case 'n':
            if (!parse_u64(optarg, &v) || !v || v > UINT32_MAX) {
                fprintf(stderr, "nvme_drv: --nsid takes a namespace id (1..)\n");
                return 2;
            }
            opt.nsid = (uint32_t)v;
            break;
        case 's':
            if (!parse_u64(optarg, &v) || v > UINT32_MAX) {
                fprintf(stderr, "nvme_drv: --seed takes a number\n");
                return 2;
            }
            opt.seed = (uint32_t)v;
            break;
        case 'W': opt.no_write = true; break;
        case 'C': opt.no_check = true; break;
        case 'd': opt.dump = optarg; break;
        case 'p': opt.poll = true; break;
        case 'S': opt.stay = true; break;
        case 'l': opt.loop = true; break;
        case 't':
            if (!parse_u64(optarg, &v) || !v || v > 86400) {
                fprintf(stderr, "nvme_drv: --seconds takes 1..86400\n");
                return 2;
            }
            opt.seconds = (unsigned)v;
            break;
        case 'h': usage(stdout); return 0;
        default: fprintf(stderr, "see nvme_drv --help\n"); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "nvme_drv: unexpected '%s'; see nvme_drv --help\n", argv[optind]);
        return 2;
    }
    if (opt.no_check && !opt.no_write) {
        fprintf(stderr, "nvme_drv: --no-check goes with --no-write (a written pattern is "
                        "always checked)\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);

    int n = pci_register_driver(&driver);
    if (n < 0) {
        fprintf(stderr, "nvme_drv: cannot register on this host's PCIe tree: %s (run it on a "
                        "host: ntblend run --host H -- nvme_drv)\n", strerror(-n));
        return 3;
    }
    printf("bound %d NVMe function(s)%s\n", n, !n && opt.stay ? ": waiting for one" : "");
    if (!n && !opt.stay) {
        pci_unregister_driver(&driver);
        return 3;
    }
    int failed = 0, done = 0;
    failed += serve(&done);
    if (opt.loop && loop())
        failed++;
    if (opt.stay && !opt.loop) {
        /* Functions hot-added meanwhile (lent to this host) are probed by the watcher: serve
         * them as they come. */
        while (!stop) {
            if (!done) { /* none yet: one may be lent to this host */
                usleep(100000);
            } else if (pci_wait_removed(&driver, 200) == 0) {
                printf("all functions removed\n");
                break;
            }
            failed += serve(&done);
        }
    }
    pci_unregister_driver(&driver); /* remove() closes what is still open */
    return failed ? 1 : 0;
}
