/*
 * nvme_bench: 4 KiB random reads from a SmartIO NVMe, driven by the userspace driver library
 * in this process (libntbnvme, ntblend/nvme.h, over the SmartIO API) — on the device's own
 * host (local) or on a borrower (the device's registers, DMA and completions cross the NTB).
 * Reports IOPS and per-command latency (submission to completion seen): at --qd 1 the
 * latency, at a deep queue what one device thread sustains.
 *
 * The I/O SQ and CQ live in the driver's host RAM ("borrower") or in the device's host RAM
 * ("lender": memory the library places there, reached by the CPU through the NTB and by the
 * device locally) — smartio-tocs-2021 §7.4.1, Fig. 34. Data buffers and admin queues stay in
 * the driver's host RAM.
 *
 *   ntblend run --host b -- nvme_bench --device nvme0 --qd 1 --seconds 3 --json
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ntbtool.h"
#include "ntblend/nvme.h"
#include "ntblend/smartio.h"

struct opts {
    const char *device;
    uint32_t qd;
    double seconds;
    uint64_t ios;
    int sq_lender, cq_lender; /* 1: in the device's host RAM */
    const char *sq_bar;       /* the SQ in BAR2 of this device instead (a peer, Fig. 34 GPU) */
    bool json, quiet;
    uint64_t warmup;
    uint64_t lba_first, lba_count; /* the range used (count 0: to the namespace's end) */
    bool verify;                   /* write the range first, check every block read */
    double start_at;               /* wall-clock second to start measuring at (0: now) */
    int irq;                       /* host vector the queue pair's interrupts raise (0: poll) */
    int spin_us;                   /* poll this long before sleeping (0: the library's) */
};

enum { O_DEVICE = 256, O_QD, O_SECONDS, O_IOS, O_QUEUES_IN, O_SQ_IN, O_CQ_IN, O_JSON, O_WARMUP,
       O_LBA, O_VERIFY, O_START_AT, O_IRQ, O_SPIN };

static void usage(FILE *f)
{
    fprintf(f,
        "usage: ntblend run --host H -- nvme_bench [options]\n"
        "4 KiB random reads from a (borrowed) NVMe with a userspace driver in this process.\n"
        "  --device NAME        the NVMe (default nvme0); must be lent out by its host\n"
        "                       (ntblend device add NAME) unless this is that host\n"
        "  --qd N               commands in flight, 1..1024 (default 1)\n"
        "  --seconds S          measure for S seconds (default 3)\n"
        "  --ios N              ... or stop after N commands (whichever comes first)\n"
        "  --warmup N           commands before measuring (default 1000)\n"
        "  --queues-in borrower|lender\n"
        "                       where the I/O SQ and CQ live: this host's RAM (default) or the\n"
        "                       device's host's RAM\n"
        "  --sq-in, --cq-in borrower|lender   the same for one of them\n"
        "  --sq-in bar:DEV      the SQ in BAR2 of device DEV (borrowed too; e.g. accel0 next to\n"
        "                       the NVMe: the device fetches commands peer to peer)\n"
        "  --lba FIRST:COUNT    use only these blocks of namespace 1 (default: all of it)\n"
        "  --verify             first write every block of the range with a pattern made of\n"
        "                       its LBA, then check each block read; mismatches fail the run\n"
        "  --start-at T         after setting up, wait until wall-clock time T (seconds since\n"
        "                       the epoch, as date +%%s.%%N prints) to start: runs on many hosts\n"
        "                       measure the same interval\n"
        "  --irq V              completions raise this host's interrupt vector V (1..): after\n"
        "                       polling for --spin-us, a waiting thread sleeps in it instead of\n"
        "                       polling on (right when more threads than CPUs wait)\n"
        "  --spin-us N          poll this long before yielding or sleeping (default 20)\n"
        "  --json               one JSON object on stdout\n"
        "  -q                   no progress messages\n"
        "example (the SQ near the device, the CQ near the CPU, smartio-tocs-2021 Fig. 34):\n"
        "  ntblend run --host b -- nvme_bench --qd 1 --sq-in lender --cq-in borrower\n"
        "  ntblend run --host b -- nvme_bench --qd 1 --sq-in bar:accel0\n");
}

static int where(const char *s)
{
    if (!strcmp(s, "borrower") || !strcmp(s, "local"))
        return 0;
    if (!strcmp(s, "lender") || !strcmp(s, "device"))
        return 1;
    return -1;
}

static uint64_t rng_state = 0x853c49e6748fea9bull;
static uint64_t rng(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

#define FAIL(...)                                                                           \
    do {                                                                                    \
        tu_err(__VA_ARGS__);                                                                \
        goto out;                                                                           \
    } while (0)

/* One command slot of the benchmark: its buffer and when it was submitted. */
struct req {
    struct run *run;
    uint8_t *buf;
    uint64_t t_sub;
    uint64_t lba;
};

/* The pattern of a block: 64-bit words made of its LBA and their index. */
static uint64_t pattern(uint64_t lba, size_t i) { return (lba + 1) * 0x9e3779b97f4a7c15ull ^ i; }
static void fill_block(uint8_t *buf, uint64_t lba)
{
    for (size_t i = 0; i < 4096 / 8; i++) {
        uint64_t v = pattern(lba, i);
        memcpy(buf + i * 8, &v, 8);
    }
}
static bool check_block(const uint8_t *buf, uint64_t lba)
{
    for (size_t i = 0; i < 4096 / 8; i++) {
        uint64_t v;
        memcpy(&v, buf + i * 8, 8);
        if (v != pattern(lba, i))
            return false;
    }
    return true;
}

struct run {
    const struct opts *o;
    uint64_t done, measured, cap;
    uint64_t t0, deadline;
    uint64_t *lat;
    struct req **idle; /* free slots */
    uint32_t nidle;
    int failed;        /* a command's error */
    uint16_t fail_status;
    uint64_t verify_errors, first_bad_lba;
};

static void on_read(void *arg, const struct nvme_cpl *c)
{
    struct req *r = arg;
    struct run *b = r->run;
    uint64_t now = tu_now_ns();
    if (c->rc && !b->failed) {
        b->failed = c->rc;
        b->fail_status = c->status;
    }
    b->done++;
    if (!c->rc && b->o->verify && !check_block(r->buf, r->lba) && !b->verify_errors++)
        b->first_bad_lba = r->lba;
    if (b->done == b->o->warmup) {
        b->t0 = now;
        if (!b->o->ios)
            b->deadline = b->t0 + (uint64_t)(b->o->seconds * 1e9);
    } else if (b->done > b->o->warmup && b->measured < b->cap) {
        b->lat[b->measured++] = now - r->t_sub;
    }
    b->idle[b->nidle++] = r;
}

/* Writes of the range before a --verify run: counted, the first error kept. */
struct wctx { uint64_t *done; uint32_t *inflight; int *err; };
static void on_write(void *arg, const struct nvme_cpl *c)
{
    struct wctx *w = arg;
    (*w->done)++;
    (*w->inflight)--;
    if (c->rc && !*w->err)
        *w->err = c->rc;
}

static int bench(const struct opts *o)
{
    int ret = 1;
    nvme_dev_t *d = NULL;
    nvme_qpair_t *qp = NULL;
    nvme_mem_t *pmem = NULL;
    sio_dma_t *pdma = NULL;
    sio_dev_t *peer = NULL;
    sio_bar_t *pbar = NULL;
    struct req *reqs = NULL;
    struct run b = { .o = o, .deadline = UINT64_MAX };
    bool verified = false;
    struct nvme_qpair_stats qst = { 0 };

    int id = sio_find(o->device);
    if (id < 0)
        FAIL("no device '%s' in this fabric (ntblend device list)", o->device);
    struct sio_info info[64];
    int n = sio_list(info, 64);
    if (n <= id)
        FAIL("sio_list: %s", strerror(n < 0 ? -n : EIO));
    const struct sio_info *inf = &info[id];
    if (strcmp(inf->type, "nvme"))
        FAIL("'%s' is a %s, not an nvme", o->device, inf->type);
    uint32_t self;
    seg_local_node_id(&self);
    bool local = inf->node_id == self;
    struct nvme_open_opts oo = { .spin_us = (unsigned)o->spin_us };
    int rc = nvme_open(o->device, &oo, &d);
    if (rc)
        FAIL("%s", nvme_errmsg());

    /* Queue memory: entries for qd commands in flight. */
    uint32_t entries = 64;
    while (entries < o->qd + 1)
        entries *= 2;
    struct nvme_qpair_opts qo = { .depth = entries,
                                  .sq_place = o->sq_lender ? NVME_PLACE_DEVICE : NVME_PLACE_LOCAL,
                                  .cq_place = o->cq_lender ? NVME_PLACE_DEVICE : NVME_PLACE_LOCAL,
                                  .irq = (uint32_t)o->irq };
    if (o->sq_bar) {
        int pid = sio_find(o->sq_bar);
        if (pid < 0)
            FAIL("no device '%s'", o->sq_bar);
        if ((rc = sio_borrow((uint32_t)pid, SIO_SHARED, &peer)) || (rc = sio_enable(peer)))
            FAIL("cannot borrow %s: %s%s", o->sq_bar, strerror(-rc),
                 rc == -EACCES ? " (lend it out first: ntblend device add NAME)" : "");
        size_t bsize;
        volatile uint8_t *pcpu = sio_map_bar(peer, 2, &bsize, &pbar);
        if (!pcpu)
            FAIL("BAR2 of %s: %s", o->sq_bar, strerror(errno));
        uint64_t pio;
        if ((rc = sio_map_peer_bar(nvme_sio_dev(d), peer, 2, &pio, &pdma)))
            FAIL("mapping BAR2 of %s for %s: %s", o->sq_bar, o->device, strerror(-rc));
        /* The SQ and its PRP lists: a few MiB of the BAR at most. */
        if (!(pmem = nvme_mem_wrap(d, pcpu, pio, bsize < (16u << 20) ? bsize : 16u << 20)))
            FAIL("BAR2 of %s: %s", o->sq_bar, nvme_errmsg());
        qo.sq_mem = pmem;
    }
    struct nvme_ns_info ns;
    if (nvme_ns_info(d, 1, &ns) || ns.block_size != 4096)
        FAIL("namespace 1 of %s: %s", o->device,
             ns.block_size != 4096 ? "not 4 KiB blocks" : nvme_errmsg());
    if (o->lba_first >= ns.blocks || o->lba_count > ns.blocks - o->lba_first)
        FAIL("--lba %" PRIu64 ":%" PRIu64 " is past the end of namespace 1 (%" PRIu64
             " blocks)", o->lba_first, o->lba_count, ns.blocks);
    uint64_t base = o->lba_first, nlba = o->lba_count ? o->lba_count : ns.blocks - base;
    if (nlba < 2)
        FAIL("namespace 1 has %" PRIu64 " blocks", nlba);
    if ((rc = nvme_qpair_create(d, &qo, &qp)))
        FAIL("creating the I/O queue pair (%u entries): %s", entries, nvme_errmsg());
    uint8_t *bufs = nvme_buf_alloc(d, NULL, (size_t)o->qd * 4096), *chk = nvme_buf_alloc(d, NULL, 4096);
    if (!bufs || !chk)
        FAIL("out of memory for the device: %s", nvme_errmsg());

    /* Check the path once: a block written and read back. */
    uint64_t clba = base + (rng() % nlba);
    for (size_t i = 0; i < 4096; i++)
        bufs[i] = (uint8_t)(i * 7 + getpid());
    if ((rc = nvme_write(qp, 1, clba, 1, bufs)))
        FAIL("write: %s", nvme_errmsg());
    if ((rc = nvme_read(qp, 1, clba, 1, chk)))
        FAIL("read: %s", nvme_errmsg());
    verified = memcmp(chk, bufs, 4096) == 0;
    if (!verified)
        FAIL("a block read back differs from what was written");
    if (o->verify) { /* the whole range, up to qd writes at a time */
        uint64_t donew = 0;
        uint32_t inflight = 0;
        int werr = 0;
        struct wctx wc = { &donew, &inflight, &werr };
        for (uint64_t next = 0; next < nlba && !werr;) {
            for (uint32_t k = 0; k < o->qd && next < nlba; k++, next++) {
                uint8_t *wb = bufs + (size_t)k * 4096;
                fill_block(wb, base + next);
                if ((rc = nvme_submit(qp, NVME_OP_WRITE, 1, base + next, 1, wb, 0, on_write, &wc)))
                    FAIL("write: %s", nvme_errmsg());
                inflight++;
            }
            while (inflight)
                if ((rc = nvme_qpair_wait(qp, 5000)) < 0)
                    FAIL("writing the range: %s",
                         rc == -ETIMEDOUT ? "no completion in 5 s" : strerror(-rc));
        }
        if (werr)
            FAIL("writing the range: %s", strerror(-werr));
    }
    if (o->start_at > 0) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        double wait = o->start_at - ((double)now.tv_sec + now.tv_nsec / 1e9);
        if (wait > 600)
            FAIL("--start-at is %.0f s away (more than 10 minutes): a typo?", wait);
        if (wait > 0) {
            struct timespec ts = { (time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9) };
            nanosleep(&ts, NULL);
        }
    }

    /* Random 4 KiB reads, qd in flight. */
    b.cap = o->ios ? (size_t)o->ios : (size_t)(o->seconds * 2e6) + 1024;
    if (b.cap > (64u << 20))
        b.cap = 64u << 20;
    b.lat = malloc(b.cap * sizeof *b.lat);
    reqs = calloc(o->qd, sizeof *reqs);
    b.idle = calloc(o->qd, sizeof *b.idle);
    if (!b.lat || !reqs || !b.idle)
        FAIL("out of memory");
    for (uint32_t i = 0; i < o->qd; i++) {
        reqs[i] = (struct req){ .run = &b, .buf = bufs + (size_t)i * 4096 };
        b.idle[b.nidle++] = &reqs[i];
    }
    if (!o->quiet)
        fprintf(stderr, "nvme_bench: %s of host %s (%s), qd %u, SQ in %s, CQ in %s\n",
                o->device, inf->host, local ? "local" : "borrowed", o->qd,
                o->sq_bar ? o->sq_bar : o->sq_lender && !local ? "lender RAM" : "this host's RAM",
                o->cq_lender && !local ? "lender RAM" : "this host's RAM");
    uint64_t submitted = 0, limit = o->ios ? o->warmup + o->ios : UINT64_MAX;
    uint64_t t_end = 0, idle_limit_ms = 5000;
    bool stop = false;
    if (!o->warmup) {
        b.t0 = tu_now_ns();
        if (!o->ios)
            b.deadline = b.t0 + (uint64_t)(o->seconds * 1e9);
    }
    for (;;) {
        /* Fill the queue; one doorbell for the lot (the wait below rings it). */
        while (!stop && b.nidle && submitted < limit) {
            struct req *r = b.idle[--b.nidle];
            r->t_sub = tu_now_ns();
            r->lba = base + rng() % nlba;
            rc = nvme_submit(qp, NVME_OP_READ, 1, r->lba, 1, r->buf, NVME_SUBMIT_DEFER,
                             on_read, r);
            if (rc) {
                b.idle[b.nidle++] = r;
                if (rc == -EAGAIN)
                    break;
                FAIL("submit: %s", nvme_errmsg());
            }
            submitted++;
        }
        if (b.done == submitted)
            break;
        /* Take what completed: polls, then yields, then sleeps while nothing has. */
        rc = nvme_qpair_wait(qp, (int)idle_limit_ms);
        if (rc == -ETIMEDOUT)
            FAIL("no completion in %" PRIu64 " s (%" PRIu64 " outstanding)",
                 idle_limit_ms / 1000, submitted - b.done);
        if (rc < 0)
            FAIL("polling: %s", strerror(-rc));
        if (b.failed)
            FAIL("read failed: status %#x (%s)", b.fail_status, strerror(-b.failed));
        uint64_t now = tu_now_ns();
        if (b.done >= limit || now >= b.deadline || b.measured >= b.cap) {
            stop = true;
            if (!t_end)
                t_end = now;
        }
    }
    if (!t_end)
        t_end = tu_now_ns();
    nvme_qpair_stats(qp, &qst);
    if (b.verify_errors)
        FAIL("%" PRIu64 " block(s) read back wrong, the first at LBA %" PRIu64, b.verify_errors,
             b.first_bad_lba);
    uint64_t measured = b.measured, *lat = b.lat;
    double secs = (double)(t_end - b.t0) / 1e9;
    double iops = secs > 0 ? (double)measured / secs : 0;
    qsort(lat, measured, sizeof *lat, tu_cmp_u64);
    double mean = 0;
    for (size_t i = 0; i < measured; i++)
        mean += (double)lat[i];
    mean = measured ? mean / (double)measured : 0;
    int model = tu_latency_model();
    char sqb[48];
    snprintf(sqb, sizeof sqb, "bar:%s", o->sq_bar ? o->sq_bar : "");
    const char *sqw = o->sq_bar ? sqb : o->sq_lender || local ? "lender" : "borrower";
    const char *cqw = o->cq_lender || local ? "lender" : "borrower";
    if (o->json) {
        struct json_object *j = tu_json_begin("nvme_bench");
        json_object_object_add(j, "host", json_object_new_string(getenv("NTBLEND_HOST") ? getenv("NTBLEND_HOST") : ""));
        json_object_object_add(j, "device", json_object_new_string(o->device));
        json_object_object_add(j, "lender", json_object_new_string(inf->host));
        json_object_object_add(j, "local", json_object_new_boolean(local));
        json_object_object_add(j, "latency_model", model < 0 ? NULL : json_object_new_boolean(model));
        json_object_object_add(j, "qd", json_object_new_int((int)o->qd));
        json_object_object_add(j, "block", json_object_new_int(4096));
        json_object_object_add(j, "sq_in", json_object_new_string(sqw));
        json_object_object_add(j, "cq_in", json_object_new_string(cqw));
        json_object_object_add(j, "ios", json_object_new_int64((int64_t)measured));
        json_object_object_add(j, "seconds", tu_jdouble(secs, 3));
        json_object_object_add(j, "iops", tu_jdouble(iops, 0));
        json_object_object_add(j, "mbps", tu_jdouble(iops * 4096 / 1e6, 1));
        json_object_object_add(j, "lat_min_ns", json_object_new_int64(measured ? (int64_t)lat[0] : 0));
        json_object_object_add(j, "lat_median_ns", json_object_new_int64((int64_t)tu_percentile(lat, measured, 50)));
        json_object_object_add(j, "lat_mean_ns", tu_jdouble(mean, 0));
        json_object_object_add(j, "lat_p99_ns", json_object_new_int64((int64_t)tu_percentile(lat, measured, 99)));
        json_object_object_add(j, "lat_max_ns", json_object_new_int64(measured ? (int64_t)lat[measured - 1] : 0));
        json_object_object_add(j, "empty_polls", json_object_new_int64((int64_t)qst.empty_polls));
        json_object_object_add(j, "verified", json_object_new_boolean(verified));
        json_object_object_add(j, "lba_first", json_object_new_int64((int64_t)base));
        json_object_object_add(j, "lba_count", json_object_new_int64((int64_t)nlba));
        json_object_object_add(j, "verify", json_object_new_boolean(o->verify));
        json_object_object_add(j, "verify_errors", json_object_new_int64((int64_t)b.verify_errors));
        json_object_object_add(j, "client", json_object_new_boolean(nvme_is_client(d)));
        tu_json_print(j);
    } else {
        printf("%s on %s (%s), 4 KiB random reads, qd %u, SQ in %s, CQ in %s%s\n",
               o->device, inf->host, local ? "local" : "borrowed", o->qd, sqw, cqw,
               model == 1 ? ", latency model on" : "");
        printf("  wrote a 4 KiB block and read it back: identical\n");
        if (o->verify)
            printf("  wrote blocks %" PRIu64 "..%" PRIu64 " first; every block read matched\n",
                   base, base + nlba - 1);
        printf("  %" PRIu64 " reads in %.2f s: %.0f IOPS (%.1f MB/s)\n", (uint64_t)measured, secs,
               iops, iops * 4096 / 1e6);
        printf("  latency ns: min %" PRIu64 "  median %" PRIu64 "  mean %.0f  p99 %" PRIu64
               "  max %" PRIu64 "\n", measured ? lat[0] : 0, tu_percentile(lat, measured, 50), mean,
               tu_percentile(lat, measured, 99), measured ? lat[measured - 1] : 0);
    }
    ret = 0;
out:
    /* The queue pair before the BAR it may sit in, the device before the peer. */
    if (qp)
        nvme_qpair_delete(qp);
    if (pmem)
        nvme_mem_free(pmem);
    if (pdma)
        sio_unmap(pdma);
    nvme_close(d);
    if (pbar)
        sio_unmap_bar(pbar);
    if (peer)
        sio_return(peer);
    free(b.lat);
    free(b.idle);
    free(reqs);
    return ret;
}

int main(int argc, char **argv)
{
    tu_prog = "nvme_bench";
    struct opts o = { .device = "nvme0", .qd = 1, .seconds = 3, .warmup = 1000 };
    static const struct option lo[] = {
        { "device", 1, NULL, O_DEVICE }, { "qd", 1, NULL, O_QD },
        { "seconds", 1, NULL, O_SECONDS }, { "ios", 1, NULL, O_IOS },
        { "queues-in", 1, NULL, O_QUEUES_IN }, { "sq-in", 1, NULL, O_SQ_IN },
        { "cq-in", 1, NULL, O_CQ_IN }, { "json", 0, NULL, O_JSON },
        { "warmup", 1, NULL, O_WARMUP }, { "lba", 1, NULL, O_LBA },
        { "verify", 0, NULL, O_VERIFY }, { "start-at", 1, NULL, O_START_AT },
        { "irq", 1, NULL, O_IRQ }, { "spin-us", 1, NULL, O_SPIN },
        { "help", 0, NULL, 'h' }, { 0 } };
    int c;
    while ((c = getopt_long(argc, argv, "qh", lo, NULL)) != -1) {
        int w;
        char *end;
        switch (c) {
        case O_DEVICE: o.device = optarg; break;
        case O_QD:
            if (tu_parse_int(optarg, 1, 1024, &w)) {
                tu_err("--qd takes 1..1024");
                return 2;
            }
            o.qd = (uint32_t)w;
            break;
        case O_SECONDS:
            o.seconds = strtod(optarg, &end);
            if (*end || !(o.seconds > 0 && o.seconds <= 3600)) {
                tu_err("--seconds takes a number of seconds (0..3600]");
                return 2;
            }
            break;
        case O_IOS:
            if (tu_parse_u64(optarg, &o.ios) || !o.ios) {
                tu_err("--ios takes a positive count");
                return 2;
            }
            break;
        case O_WARMUP:
            if (tu_parse_u64(optarg, &o.warmup)) {
                tu_err("--warmup takes a count");
                return 2;
            }
            break;
        case O_QUEUES_IN: case O_SQ_IN: case O_CQ_IN:
            if (c == O_SQ_IN && !strncmp(optarg, "bar:", 4) && optarg[4]) {
                o.sq_bar = optarg + 4;
                break;
            }
            if ((w = where(optarg)) < 0) {
                tu_err("%s takes borrower or lender",
                       c == O_QUEUES_IN ? "--queues-in" : c == O_SQ_IN ? "--sq-in" : "--cq-in");
                return 2;
            }
            if (c != O_CQ_IN)
                o.sq_lender = w;
            if (c != O_SQ_IN)
                o.cq_lender = w;
            break;
        case O_LBA: {
            char *colon = strchr(optarg, ':');
            if (!colon || (*colon = 0, tu_parse_u64(optarg, &o.lba_first)) ||
                tu_parse_u64(colon + 1, &o.lba_count) || o.lba_count < 2) {
                tu_err("--lba takes FIRST:COUNT (COUNT >= 2), e.g. --lba 4096:1024");
                return 2;
            }
            break;
        }
        case O_VERIFY: o.verify = true; break;
        case O_IRQ:
            if (tu_parse_int(optarg, 1, 63, &o.irq)) {
                tu_err("--irq takes a host interrupt vector, 1..63");
                return 2;
            }
            break;
        case O_SPIN:
            if (tu_parse_int(optarg, 1, 1000000, &o.spin_us)) {
                tu_err("--spin-us takes 1..1000000");
                return 2;
            }
            break;
        case O_START_AT:
            o.start_at = strtod(optarg, &end);
            if (*end || o.start_at <= 0) {
                tu_err("--start-at takes seconds since the epoch (date +%%s.%%N)");
                return 2;
            }
            break;
        case O_JSON: o.json = true; break;
        case 'q': o.quiet = true; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        tu_err("unexpected argument '%s' (see --help)", argv[optind]);
        return 2;
    }
    if (tu_check_env())
        return 1;
    return bench(&o);
}
