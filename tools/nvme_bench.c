/*
 * nvme_bench: 4 KiB random reads from a SmartIO NVMe, driven by a userspace driver in this
 * process (src/nvme/nvme_sio.h: smartio.h and seg.h only) — on the device's own host (local) or
 * on a borrower (the device's registers, DMA and completions cross the NTB). Reports IOPS and
 * per-command latency (submission to completion seen): at --qd 1 the latency, at a deep queue
 * what one device thread sustains.
 *
 * The I/O SQ and CQ live in the driver's host RAM ("borrower") or in the device's host RAM
 * ("lender": a segment a helper process on that host exports, reached by the CPU through the
 * NTB and by the device locally) — smartio-tocs-2021 §7.4.1, Fig. 34. Data buffers and admin
 * queues stay in the driver's host RAM.
 *
 *   ntblend run --host b -- nvme_bench --device nvme0 --qd 1 --seconds 3 --json
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ntbtool.h"
#include "nvme_sio.h"

struct opts {
    const char *device;
    uint32_t qd;
    double seconds;
    uint64_t ios;
    int sq_lender, cq_lender; /* 1: in the device's host RAM */
    const char *sq_bar;       /* the SQ in BAR2 of this device instead (a peer, Fig. 34 GPU) */
    bool json, quiet;
    uint64_t warmup;
};

enum { O_DEVICE = 256, O_QD, O_SECONDS, O_IOS, O_QUEUES_IN, O_SQ_IN, O_CQ_IN, O_JSON, O_SERVE,
       O_WARMUP };

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
        "                       device's host's RAM (a segment a helper exports there)\n"
        "  --sq-in, --cq-in borrower|lender   the same for one of them\n"
        "  --sq-in bar:DEV      the SQ in BAR2 of device DEV (borrowed too; e.g. accel0 next to\n"
        "                       the NVMe: the device fetches commands peer to peer)\n"
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

/* The helper on the device's host: export a segment for the queues until terminated. */
static int serve(uint32_t id, uint64_t size)
{
    seg_desc_t *sd;
    seg_local_t *s;
    int rc = seg_open(&sd);
    if (!rc)
        rc = seg_create(sd, &s, id, size);
    if (!rc)
        rc = seg_prepare(s, 0);
    if (!rc)
        rc = seg_set_available(s, 0);
    if (rc) {
        tu_err("helper: cannot export segment %u: %s", id, seg_strerror(rc));
        return 1;
    }
    for (;;)
        pause();
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

static int bench(const struct opts *o)
{
    int ret = 1;
    pid_t helper = -1;
    sio_dev_t *dev = NULL;
    seg_desc_t *sd = NULL;
    seg_local_t *lseg = NULL;
    seg_remote_t *rseg = NULL;
    seg_map_t *lmap = NULL, *rmap = NULL;
    sio_dma_t *ldma = NULL, *rdma = NULL, *pdma = NULL;
    sio_dev_t *peer = NULL;
    sio_bar_t *pbar = NULL;
    uint64_t *lat = NULL, *t_sub = NULL;
    struct nvs d = { 0 };
    bool verified = false;

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
    int rc = sio_borrow((uint32_t)id, SIO_EXCLUSIVE, &dev);
    if (rc)
        FAIL("cannot borrow %s from host %s: %s%s", o->device, inf->host, strerror(-rc),
             rc == -EACCES ? " (lend it out first: ntblend device add NAME)" : "");
    if ((rc = sio_enable(dev)))
        FAIL("sio_enable: %s", strerror(-rc));

    /* Queue memory: entries for qd commands in flight. */
    uint32_t entries = 64;
    while (entries < o->qd + 1)
        entries *= 2;
    size_t qbytes = ((64ull * entries + 4095) & ~4095ull) + ((16ull * entries + 4095) & ~4095ull);
    size_t lsize = 16 * 4096 + 2 * qbytes + (size_t)o->qd * 4096 + 4096;
    if ((rc = seg_open(&sd)) || (rc = seg_create(sd, &lseg, SEG_ID_AUTO, lsize)))
        FAIL("local segment of %zu bytes: %s", lsize, seg_strerror(rc));
    volatile uint8_t *lcpu = seg_map_local(lseg, 0, 0, 0, &lmap);
    uint64_t lio;
    if (!lcpu || (rc = sio_map_local(dev, lseg, 0, lsize, &lio, &ldma)))
        FAIL("mapping the local segment for the device: %s", strerror(lcpu ? -rc : errno));
    struct nvs_region lr, rr, *sqr = &lr, *cqr = &lr;
    nvs_region_init(&lr, lcpu, lio, lsize);
    if ((o->sq_lender || o->cq_lender) && !local) {
        uint32_t sid = 0x4e560000u | ((uint32_t)getpid() & 0xffffu);
        char ids[16], sizes[24];
        snprintf(ids, sizeof ids, "%u", sid);
        snprintf(sizes, sizeof sizes, "%zu", qbytes);
        const char *args[] = { "--serve-seg", ids, "--size", sizes, NULL };
        helper = tu_spawn_peer(inf->host, args);
        if (helper < 0)
            goto out;
        if ((rc = seg_connect(sd, &rseg, inf->node_id, sid, 0, 10000)))
            FAIL("segment %u of host %s (the helper's): %s", sid, inf->host, seg_strerror(rc));
        volatile uint8_t *rcpu = seg_map_remote(rseg, 0, 0, 0, &rmap);
        uint64_t rio;
        if (!rcpu || (rc = sio_map_remote(dev, rseg, 0, qbytes, &rio, &rdma)))
            FAIL("mapping host %s's segment: %s", inf->host, strerror(rcpu ? -rc : errno));
        nvs_region_init(&rr, rcpu, rio, qbytes);
        if (o->sq_lender)
            sqr = &rr;
        if (o->cq_lender)
            cqr = &rr;
    }

    struct nvs_region pr;
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
        if (bsize < qbytes || (rc = sio_map_peer_bar(dev, peer, 2, &pio, &pdma)))
            FAIL("mapping BAR2 of %s for %s: %s", o->sq_bar, o->device,
                 bsize < qbytes ? "too small" : strerror(-rc));
        nvs_region_init(&pr, pcpu, pio, qbytes);
        sqr = &pr;
    }
    if ((rc = nvs_open(&d, dev)))
        FAIL("BAR0 of %s: %s", o->device, strerror(-rc));
    if ((rc = nvs_reset(&d, &lr, &lr, 32)))
        FAIL("controller reset/enable: %s", rc == -EIO ? "controller fatal status" : strerror(-rc));
    int64_t idn = nvs_alloc(&lr, 4096);
    if (idn < 0 || (rc = nvs_identify(&d, 0, 1, &lr, idn)))
        FAIL("Identify namespace 1: status %#x", rc);
    uint64_t nlba = 0;
    for (int i = 7; i >= 0; i--)
        nlba = nlba << 8 | lr.cpu[idn + i];
    if (nlba < 2)
        FAIL("namespace 1 has %" PRIu64 " blocks", nlba);
    if ((rc = nvs_create_pair(&d, 1, entries, sqr, cqr, false, 0)))
        FAIL("creating the I/O queue pair (%u entries): status %#x", entries, rc);
    int64_t bufs = nvs_alloc(&lr, (size_t)o->qd * 4096), chk = nvs_alloc(&lr, 4096);
    if (bufs < 0 || chk < 0)
        FAIL("out of segment memory");

    /* Check the path once: a block written and read back. */
    uint64_t clba = (rng() % nlba);
    for (size_t i = 0; i < 4096; i++)
        lr.cpu[bufs + (int64_t)i] = (uint8_t)(i * 7 + getpid());
    struct nvs_sqe s = nvs_rw(NVS_CMD_WRITE, 1, clba, 1, &lr, bufs, NULL, 0);
    if ((rc = nvs_cmd(&d, 1, 1, &s, NULL)))
        FAIL("write: status %#x", rc);
    s = nvs_rw(NVS_CMD_READ, 1, clba, 1, &lr, chk, NULL, 0);
    if ((rc = nvs_cmd(&d, 1, 1, &s, NULL)))
        FAIL("read: status %#x", rc);
    verified = true;
    for (size_t i = 0; i < 4096; i++)
        verified &= lr.cpu[chk + (int64_t)i] == lr.cpu[bufs + (int64_t)i];
    if (!verified)
        FAIL("a block read back differs from what was written");

    /* Random 4 KiB reads, qd in flight. */
    size_t cap = o->ios ? (size_t)o->ios : (size_t)(o->seconds * 2e6) + 1024;
    if (cap > (64u << 20))
        cap = 64u << 20;
    lat = malloc(cap * sizeof *lat);
    t_sub = calloc(65536, sizeof *t_sub);
    if (!lat || !t_sub)
        FAIL("out of memory");
    if (!o->quiet)
        fprintf(stderr, "nvme_bench: %s of host %s (%s), qd %u, SQ in %s, CQ in %s\n",
                o->device, inf->host, local ? "local" : "borrowed", o->qd,
                o->sq_bar ? o->sq_bar : o->sq_lender && !local ? "lender RAM" : "this host's RAM",
                o->cq_lender && !local ? "lender RAM" : "this host's RAM");
    uint64_t done = 0, measured = 0, submitted = 0, limit = o->ios ? o->warmup + o->ios : UINT64_MAX;
    uint64_t t0 = 0, t_end = 0, deadline = UINT64_MAX;
    uint64_t idle_limit = 5000000000ull, last_progress = tu_now_ns();
    bool stop = false;
    uint32_t spins = 0;
    if (!o->warmup) {
        t0 = tu_now_ns();
        if (!o->ios)
            deadline = t0 + (uint64_t)(o->seconds * 1e9);
    }
    for (;;) {
        /* Fill the queue. */
        uint32_t put = 0;
        while (!stop && submitted - done < o->qd && submitted < limit) {
            struct nvs_sqe r = nvs_rw(NVS_CMD_READ, 1, rng() % nlba, 1, &lr,
                                      bufs + (int64_t)(submitted % o->qd) * 4096, NULL, 0);
            int cid = nvs_put(&d, 1, &r);
            if (cid < 0)
                break;
            t_sub[cid] = tu_now_ns();
            submitted++;
            put++;
        }
        if (put)
            nvs_ring(&d, 1);
        if (done == submitted)
            break;
        /* Take what completed. */
        struct nvs_cqe e;
        uint32_t took = 0;
        while (nvs_take(&d, 1, &e)) {
            uint64_t now = tu_now_ns();
            if (nvs_status(&e))
                FAIL("read failed: status %#x", nvs_status(&e));
            done++;
            took++;
            if (done == o->warmup) {
                t0 = now;
                if (!o->ios)
                    deadline = t0 + (uint64_t)(o->seconds * 1e9);
            } else if (done > o->warmup && measured < cap) {
                lat[measured++] = now - t_sub[e.cid];
            }
        }
        if (took) {
            nvs_cq_ring(&d, 1);
            spins = 0;
            last_progress = tu_now_ns();
            if (done >= limit || last_progress >= deadline || measured >= cap) {
                stop = true;
                if (!t_end)
                    t_end = last_progress;
            }
            continue;
        }
        if (tu_now_ns() - last_progress > idle_limit)
            FAIL("no completion in %" PRIu64 " s (%" PRIu64 " outstanding)",
                 (uint64_t)(idle_limit / 1000000000ull), submitted - done);
        /* Poll again; the device model runs on another core (or shares ours). */
        if (++spins > 1000000)
            usleep(1);
        else
            sched_yield();
    }
    if (!t_end)
        t_end = tu_now_ns();
    double secs = (double)(t_end - t0) / 1e9;
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
        json_object_object_add(j, "empty_polls", json_object_new_int64((int64_t)d.polls));
        json_object_object_add(j, "verified", json_object_new_boolean(verified));
        tu_json_print(j);
    } else {
        printf("%s on %s (%s), 4 KiB random reads, qd %u, SQ in %s, CQ in %s%s\n",
               o->device, inf->host, local ? "local" : "borrowed", o->qd, sqw, cqw,
               model == 1 ? ", latency model on" : "");
        printf("  wrote a 4 KiB block and read it back: identical\n");
        printf("  %" PRIu64 " reads in %.2f s: %.0f IOPS (%.1f MB/s)\n", (uint64_t)measured, secs,
               iops, iops * 4096 / 1e6);
        printf("  latency ns: min %" PRIu64 "  median %" PRIu64 "  mean %.0f  p99 %" PRIu64
               "  max %" PRIu64 "\n", measured ? lat[0] : 0, tu_percentile(lat, measured, 50), mean,
               tu_percentile(lat, measured, 99), measured ? lat[measured - 1] : 0);
    }
    ret = 0;
out:
    if (d.regs) {
        nvs_disable(&d);
        nvs_close(&d);
    }
    if (rdma)
        sio_unmap(rdma);
    if (pdma)
        sio_unmap(pdma);
    if (pbar)
        sio_unmap_bar(pbar);
    if (peer)
        sio_return(peer);
    if (ldma)
        sio_unmap(ldma);
    if (dev)
        sio_return(dev);
    if (rmap)
        seg_unmap(rmap);
    if (rseg)
        seg_disconnect(rseg);
    if (lmap)
        seg_unmap(lmap);
    if (lseg)
        seg_remove(lseg);
    if (sd)
        seg_close(sd);
    if (helper > 0)
        tu_reap_peer(helper, 0);
    free(lat);
    free(t_sub);
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
        { "serve-seg", 1, NULL, O_SERVE }, { "warmup", 1, NULL, O_WARMUP },
        { "size", 1, NULL, 's' }, { "help", 0, NULL, 'h' }, { 0 } };
    int c;
    int64_t serve_id = -1;
    uint64_t serve_size = 0;
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
        case O_JSON: o.json = true; break;
        case O_SERVE: {
            uint64_t v;
            if (tu_parse_u64(optarg, &v) || v > UINT32_MAX)
                return 2;
            serve_id = (int64_t)v;
            break;
        }
        case 's':
            if (tu_parse_size(optarg, &serve_size))
                return 2;
            break;
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
    if (serve_id >= 0)
        return serve((uint32_t)serve_id, serve_size ? serve_size : 1u << 20);
    return bench(&o);
}
