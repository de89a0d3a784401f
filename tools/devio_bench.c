/*
 * devio_bench: NVMe reads started by an accelerator (device-initiated I/O, smartio-tocs-2021
 * §6.4, Figs. 18-19: ntblend/nvme_devq.h) beside the same reads started by this CPU
 * (libntbnvme's own queue pair), the data landing in the accelerator's memory both ways.
 * Rounds interleave the two modes, so the machine's changes of speed hit both alike; the
 * figures are medians over the rounds. scripts/bench-devio.sh runs it for docs/devio.md.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ntblend/nvme.h"
#include "ntblend/nvme_devq.h"
#include "ntblend/smartio.h"
#include "ntbtool.h"

#define BS 4096u

struct opts {
    const char *nvme, *accel;
    int modes;          /* bit 0: accel, bit 1: cpu */
    uint32_t qd, ios, rounds;
    uint64_t first, count;
    bool verify, json, quiet;
};

static void usage(FILE *f)
{
    fprintf(f,
        "usage: ntblend run --host H -- devio_bench [options]\n"
        "4 KiB NVMe reads into an accelerator's memory, started by the accelerator itself\n"
        "(device-initiated: its engine writes the commands into queues in its memory and rings\n"
        "the NVMe's doorbell) and by this CPU, in interleaved rounds.\n"
        "  --nvme NAME          the NVMe (default nvme0)\n"
        "  --accel NAME         the accelerator (default accel0); both must be lent out by\n"
        "                       their hosts (ntblend device add NAME) unless they are this host's\n"
        "  --mode accel|cpu|both  who starts the reads (default both)\n"
        "  --qd N               reads in flight, 1..255 (default 1)\n"
        "  --ios N              reads per mode and round (default 4000)\n"
        "  --rounds N           rounds (default 5)\n"
        "  --lba FIRST:COUNT    the blocks of namespace 1 read, in turn (default 0:4096)\n"
        "  --verify             write the blocks with a pattern of their LBA first and check\n"
        "                       every block read; a mismatch fails the run\n"
        "  --json               one JSON object on stdout\n"
        "  -q                   no progress messages\n"
        "example (the NVMe of host a, the accelerator of host b, run on c):\n"
        "  ntblend run --host c -- devio_bench --nvme nvme0 --accel accel1 --qd 32\n");
}

static uint64_t pattern(uint64_t lba, size_t i) { return (lba + 1) * 0x9e3779b97f4a7c15ull ^ i; }

static bool check(const volatile uint8_t *b, uint64_t lba)
{
    for (size_t i = 0; i < BS / 8; i++) {
        uint64_t v;
        memcpy(&v, (const void *)(uintptr_t)(b + i * 8), 8);
        if (v != pattern(lba, i))
            return false;
    }
    return true;
}

struct cpu_run {
    uint32_t inflight, done;
    int err;
};

static void on_cpl(void *arg, const struct nvme_cpl *c)
{
    struct cpu_run *r = arg;
    r->inflight--;
    r->done++;
    if (c->rc && !r->err)
        r->err = c->rc;
}

/* ios reads (or writes) by the CPU at qd, block i of the range into buf + i * BS. */
static int cpu_io(nvme_qpair_t *qp, const struct opts *o, enum nvme_op op, uint8_t *buf,
                  uint32_t ios)
{
    struct cpu_run r = { 0 };
    uint32_t sent = 0;
    while (r.done < ios && !r.err) {
        while (sent < ios && r.inflight < o->qd) {
            uint64_t lba = o->first + sent % o->count;
            int rc = nvme_submit(qp, op, 1, lba, 1, buf + (size_t)(sent % o->count) * BS, 0,
                                 on_cpl, &r);
            if (rc == -EAGAIN)
                break;
            if (rc)
                return rc;
            sent++;
            r.inflight++;
        }
        int rc = nvme_qpair_wait(qp, -1);
        if (rc < 0)
            return rc;
    }
    return r.err;
}

/* The same reads by the accelerator: jobs of up to the range's blocks each. */
static int accel_io(nvme_devq_t *q, const struct opts *o, uint64_t data_off, uint32_t ios)
{
    for (uint32_t done = 0; done < ios;) {
        uint32_t n = ios - done < o->count ? ios - done : (uint32_t)o->count;
        struct nvme_devq_job j = { .op = NVME_OP_READ, .nsid = 1, .lba = o->first,
                                   .nblocks = 1, .count = n, .qd = o->qd, .data_off = data_off };
        int rc = nvme_devq_run(q, &j, NULL);
        if (rc)
            return rc;
        done += n;
    }
    return 0;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, uint32_t n)
{
    qsort(v, n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int bench(const struct opts *o)
{
    int ret = 1, rc, aid = sio_find(o->accel);
    nvme_dev_t *d = NULL;
    nvme_devq_t *q = NULL;
    nvme_qpair_t *qp = NULL;
    nvme_mem_t *dmem = NULL;
    sio_dev_t *acc = NULL;
    double *us[2] = { calloc(o->rounds, sizeof(double)), calloc(o->rounds, sizeof(double)) };
    if (!us[0] || !us[1]) {
        tu_err("out of memory");
        goto out;
    }
    if (aid < 0) {
        tu_err("no device '%s' in this fabric (ntblend device list)", o->accel);
        goto out;
    }
    if ((rc = nvme_open(o->nvme, NULL, &d))) {
        tu_err("%s", nvme_errmsg());
        goto out;
    }
    if ((rc = sio_borrow((uint32_t)aid, SIO_EXCLUSIVE, &acc))) {
        tu_err("cannot borrow %s: %s%s", o->accel, strerror(-rc),
               rc == -EACCES ? " (lend it out first: ntblend device add NAME)" : "");
        goto out;
    }
    struct nvme_ns_info ns;
    if (nvme_ns_info(d, 1, &ns) || ns.block_size != BS) {
        tu_err("namespace 1 of %s: needs 4 KiB blocks", o->nvme);
        goto out;
    }
    if (o->first + o->count > ns.blocks) {
        tu_err("--lba %" PRIu64 ":%" PRIu64 " is past the end of namespace 1 (%" PRIu64 " blocks)",
               o->first, o->count, ns.blocks);
        goto out;
    }
    uint32_t depth = 64;
    while (depth < o->qd + 1)
        depth *= 2;
    struct nvme_devq_opts qo = { .depth = depth };
    if ((rc = nvme_devq_create(d, acc, &qo, &q))) {
        tu_err("%s", nvme_errmsg());
        goto out;
    }
    uint64_t data_off, data_size;
    volatile uint8_t *mem = nvme_devq_mem(q, &data_off, &data_size);
    if ((uint64_t)o->count * BS > data_size) {
        tu_err("--lba's %" PRIu64 " blocks do not fit in %s's memory (%" PRIu64 " bytes free)",
               o->count, o->accel, data_size);
        goto out;
    }
    /* The CPU's reads land in the same memory, through the same mapping for the NVMe. */
    uint8_t *buf = (uint8_t *)(uintptr_t)(mem + data_off);
    dmem = nvme_mem_wrap(d, buf, nvme_devq_mem_ioaddr(q) + data_off, (size_t)o->count * BS);
    struct nvme_qpair_opts cqo = { .depth = depth, .sq_place = NVME_PLACE_DEVICE };
    if (!dmem || (rc = nvme_qpair_create(d, &cqo, &qp))) {
        tu_err("%s", nvme_errmsg());
        goto out;
    }
    if (o->verify) {
        for (uint64_t b = 0; b < o->count; b++)
            for (size_t i = 0; i < BS / 8; i++) {
                uint64_t v = pattern(o->first + b, i);
                memcpy(buf + b * BS + i * 8, &v, 8);
            }
        struct opts w = *o;
        w.qd = 32 < depth - 1 ? 32 : depth - 1;
        if ((rc = cpu_io(qp, &w, NVME_OP_WRITE, buf, (uint32_t)o->count))) {
            tu_err("writing the pattern: %s", nvme_errmsg());
            goto out;
        }
    }
    static const char *name[2] = { "accel", "cpu" };
    uint64_t bad = 0;
    for (uint32_t r = 0; r < o->rounds; r++)
        for (int k = 0; k < 2; k++) {
            int m = r % 2 ? 1 - k : k; /* ABBA: neither goes first every time */
            if (!(o->modes & (1 << m)))
                continue;
            if (o->verify)
                memset(buf, 0, (size_t)o->count * BS);
            uint64_t t0 = tu_now_ns();
            rc = m == 0 ? accel_io(q, o, data_off, o->ios) : cpu_io(qp, o, NVME_OP_READ, buf, o->ios);
            uint64_t t = tu_now_ns() - t0;
            if (rc) {
                tu_err("%s-initiated reads: %s", name[m], nvme_errmsg());
                goto out;
            }
            us[m][r] = (double)t / 1000.0 / o->ios;
            for (uint64_t b = 0; o->verify && b < o->count && b < o->ios; b++)
                bad += !check(buf + b * BS, o->first + b);
            if (!o->quiet && !o->json)
                fprintf(stderr, "round %u %s: %.2f us per read\n", r + 1, name[m], us[m][r]);
        }
    if (bad) {
        tu_err("%" PRIu64 " block(s) read back wrong", bad);
        goto out;
    }
    double med[2] = { 0, 0 };
    for (int m = 0; m < 2; m++)
        if (o->modes & (1 << m))
            med[m] = median(us[m], o->rounds);
    if (o->json) {
        json_object *j = json_object_new_object();
        json_object_object_add(j, "nvme", json_object_new_string(o->nvme));
        json_object_object_add(j, "accel", json_object_new_string(o->accel));
        json_object_object_add(j, "qd", json_object_new_int((int)o->qd));
        json_object_object_add(j, "ios", json_object_new_int((int)o->ios));
        json_object_object_add(j, "rounds", json_object_new_int((int)o->rounds));
        json_object_object_add(j, "verify", json_object_new_boolean(o->verify));
        for (int m = 0; m < 2; m++) {
            if (!(o->modes & (1 << m)))
                continue;
            json_object *a = json_object_new_object(), *rs = json_object_new_array();
            for (uint32_t r = 0; r < o->rounds; r++)
                json_object_array_add(rs, json_object_new_double(us[m][r]));
            json_object_object_add(a, "us_per_io", json_object_new_double(med[m]));
            json_object_object_add(a, "iops", json_object_new_double(1e6 / med[m]));
            json_object_object_add(a, "rounds_us_per_io", rs);
            json_object_object_add(j, name[m], a);
        }
        printf("%s\n", json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN));
        json_object_put(j);
    } else {
        printf("%-6s %12s %12s\n", "mode", "us per read", "IOPS");
        for (int m = 0; m < 2; m++)
            if (o->modes & (1 << m))
                printf("%-6s %12.2f %12.0f\n", name[m], med[m], 1e6 / med[m]);
        if (o->modes == 3)
            printf("accel/cpu time per read: %.3f (median of %u rounds, qd %u)\n",
                   med[0] / med[1], o->rounds, o->qd);
    }
    ret = 0;
out:
    if (qp)
        nvme_qpair_delete(qp);
    if (dmem)
        nvme_mem_free(dmem);
    nvme_devq_delete(q);
    nvme_close(d);
    if (acc)
        sio_return(acc);
    free(us[0]);
    free(us[1]);
    return ret;
}

int main(int argc, char **argv)
{
    tu_prog = "devio_bench";
    struct opts o = { .nvme = "nvme0", .accel = "accel0", .modes = 3, .qd = 1, .ios = 4000,
                      .rounds = 5, .first = 0, .count = 4096 };
    enum { O_NVME = 256, O_ACCEL, O_MODE, O_QD, O_IOS, O_ROUNDS, O_LBA, O_VERIFY, O_JSON };
    static const struct option lo[] = {
        { "nvme", 1, NULL, O_NVME }, { "accel", 1, NULL, O_ACCEL }, { "mode", 1, NULL, O_MODE },
        { "qd", 1, NULL, O_QD }, { "ios", 1, NULL, O_IOS }, { "rounds", 1, NULL, O_ROUNDS },
        { "lba", 1, NULL, O_LBA }, { "verify", 0, NULL, O_VERIFY }, { "json", 0, NULL, O_JSON },
        { "help", 0, NULL, 'h' }, { 0 } };
    int c, w;
    while ((c = getopt_long(argc, argv, "qh", lo, NULL)) != -1) {
        switch (c) {
        case O_NVME: o.nvme = optarg; break;
        case O_ACCEL: o.accel = optarg; break;
        case O_MODE:
            o.modes = !strcmp(optarg, "accel") ? 1 : !strcmp(optarg, "cpu") ? 2
                      : !strcmp(optarg, "both") ? 3 : 0;
            if (!o.modes) {
                tu_err("--mode takes accel, cpu or both");
                return 2;
            }
            break;
        case O_QD:
            if (tu_parse_int(optarg, 1, 255, &w)) {
                tu_err("--qd takes 1..255");
                return 2;
            }
            o.qd = (uint32_t)w;
            break;
        case O_IOS:
            if (tu_parse_int(optarg, 1, 1 << 24, &w)) {
                tu_err("--ios takes a positive count");
                return 2;
            }
            o.ios = (uint32_t)w;
            break;
        case O_ROUNDS:
            if (tu_parse_int(optarg, 1, 1000, &w)) {
                tu_err("--rounds takes 1..1000");
                return 2;
            }
            o.rounds = (uint32_t)w;
            break;
        case O_LBA: {
            char *end;
            o.first = strtoull(optarg, &end, 0);
            if (*end != ':' || !(o.count = strtoull(end + 1, &end, 0)) || *end) {
                tu_err("--lba takes FIRST:COUNT, e.g. --lba 0:4096");
                return 2;
            }
            break;
        }
        case O_VERIFY: o.verify = true; break;
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
    if (o.count > (1u << 20)) {
        tu_err("--lba COUNT takes at most %u blocks", 1u << 20);
        return 2;
    }
    if (tu_check_env()) /* not on an emulated host: it says to use ntblend run */
        return 1;
    return bench(&o);
}
