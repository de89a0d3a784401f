/*
 * mcast_bench: smartio-tocs-2021 §7.4.2's multicast experiment — one NVMe read whose data
 * lands in the memory of N hosts at once, against N ordinary reads, one into each host.
 * Run on the host that drives the NVMe (`ntblend run --host h01 -- mcast_bench ...`): it
 * starts one process per member host (each holds a buffer of its host's RAM and joins the
 * groups), borrows the NVMe, writes a known pattern, then for every N of --counts in
 * interleaved rounds times one read into a group of the first N members (sio_map_mcast) and N
 * reads, one per member (sio_map_addr, all queued at once), and checks after each that every
 * member holds the data. Prints one JSON line per N: the median times and their ratio.
 *
 *   mcast_bench --device NVME --members H1,H2,... [--counts 1,2,4,...] [--rounds R]
 *               [--bytes B]
 *
 * Exits 0 when every read reached every member, 1 otherwise, 2 on bad input.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ntblend/nvme.h"
#include "ntblend/seg.h"
#include "ntblend/smartio_mcast.h"

#define MAX_MEMBERS 255
#define MAX_COUNTS 32

struct member {
    char host[32];
    pid_t pid;
    int to, from;    /* pipes to and from its process */
    uint32_t node;
    uint64_t bus;    /* its buffer on its host */
    uint64_t io;     /* the NVMe's address of it (unicast) */
    sio_dma_t *map;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t fnv(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static bool put(int fd, uint64_t v) { return write(fd, &v, sizeof v) == (ssize_t)sizeof v; }
static bool get(int fd, uint64_t *v) { return read(fd, v, sizeof *v) == (ssize_t)sizeof *v; }

/* A member's process: a buffer of its host's RAM; answers 1 (its checksum), 2 (zero it),
 * 0 or EOF (exit). */
static void member_main(const char *host, int in, int out, size_t bytes)
{
    setenv("NTBLEND_HOST", host, 1);
    uint8_t *buf = sio_ram_alloc(bytes);
    uint64_t bus = 0;
    uint32_t node = 0;
    if (!buf || sio_ram_addr(buf, bytes, &bus) || seg_local_node_id(&node)) {
        fprintf(stderr, "mcast_bench: host %s: no buffer: %s\n", host, strerror(errno));
        put(out, 0);
        _exit(1);
    }
    put(out, node);
    put(out, bus);
    uint64_t cmd;
    while (get(in, &cmd) && cmd) {
        if (cmd == 2)
            memset(buf, 0, bytes);
        put(out, cmd == 1 ? fnv(buf, bytes) : 0);
    }
    _exit(0);
}

/* Start member i's process (it keeps none of the earlier members' pipes). */
static int start_member(struct member *all, int i, size_t bytes)
{
    struct member *m = &all[i];
    int a[2], b[2];
    if (pipe(a) || pipe(b))
        return -errno;
    fflush(NULL);
    m->pid = fork();
    if (m->pid < 0)
        return -errno;
    if (m->pid == 0) {
        close(a[1]);
        close(b[0]);
        for (int k = 0; k < i; k++) {
            close(all[k].to);
            close(all[k].from);
        }
        member_main(m->host, a[0], b[1], bytes);
    }
    close(a[0]);
    close(b[1]);
    m->to = a[1];
    m->from = b[0];
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* [0]: reads outstanding, [1]: the first failure. */
static void on_done(void *arg, const struct nvme_cpl *cpl)
{
    int *st = arg;
    if (cpl->rc && !st[1])
        st[1] = cpl->rc;
    st[0]--;
}

/* Submit reads of `nblocks` at lba into each of ios[0..n), all queued, and wait for them. */
static int reads(nvme_qpair_t *qp, uint64_t lba, uint32_t nblocks, const uint64_t *ios, int n,
                 int depth)
{
    int st[2] = { n, 0 }, next = 0;
    while (st[0] > 0) {
        while (next < n && n - st[0] + depth > next) {
            int rc = nvme_submit_dma(qp, NVME_OP_READ, 1, lba, nblocks, ios[next], 0, on_done, st);
            if (rc == -EAGAIN)
                break;
            if (rc)
                return rc;
            next++;
        }
        int rc = nvme_qpair_wait(qp, -1);
        if (rc < 0)
            return rc;
    }
    return st[1];
}

/* Every member's checksum equals want (each zeroed again after). */
static bool all_hold(struct member *m, int n, uint64_t want)
{
    bool ok = true;
    for (int i = 0; i < n; i++) {
        uint64_t sum = 0, z;
        if (!put(m[i].to, 1) || !get(m[i].from, &sum) || !put(m[i].to, 2) || !get(m[i].from, &z))
            return false;
        if (sum != want) {
            fprintf(stderr, "mcast_bench: %s does not hold the data\n", m[i].host);
            ok = false;
        }
    }
    return ok;
}

static int run(const char *dev, struct member *m, int nm, const int *cnt, int nc, int rounds,
               size_t bytes)
{
    int rc = 0, groups[MAX_COUNTS], failed = 0;
    nvme_dev_t *d = NULL;
    nvme_qpair_t *qp = NULL;
    uint8_t *pat = NULL;
    sio_dma_t *gmap[MAX_COUNTS] = { 0 };
    uint64_t gio[MAX_COUNTS];
    uint64_t *ios = calloc((size_t)nm, sizeof *ios);
    uint64_t *mc = calloc((size_t)(nc * rounds), sizeof *mc);
    uint64_t *uc = calloc((size_t)(nc * rounds), sizeof *uc);
    for (int i = 0; i < nc; i++)
        groups[i] = -1;
    /* The members' processes first: a process forks before it uses the library. */
    for (int i = 0; i < nm && !rc; i++)
        rc = start_member(m, i, bytes);
    for (int i = 0; i < nm && !rc; i++) {
        uint64_t node;
        if (!get(m[i].from, &node) || !node || !get(m[i].from, &m[i].bus))
            rc = -EIO;
        m[i].node = (uint32_t)node;
    }
    if (rc || !ios || !mc || !uc) {
        fprintf(stderr, "mcast_bench: the members' processes did not start\n");
        rc = rc ? rc : -ENOMEM;
        goto out;
    }
    struct nvme_ns_info ns;
    if ((rc = nvme_open(dev, NULL, &d)) || (rc = nvme_ns_info(d, 1, &ns)) ||
        (rc = nvme_qpair_create(d, NULL, &qp))) {
        fprintf(stderr, "mcast_bench: %s: %s (is it lent out? 'ntblend device add %s')\n", dev,
                strerror(-rc), dev);
        goto out;
    }
    uint32_t nblocks = (uint32_t)(bytes / ns.block_size);
    sio_dev_t *sd = nvme_sio_dev(d);
    /* The NVMe's address of each member's buffer, and one group per count: its first N. */
    for (int i = 0; i < nm && !rc; i++)
        rc = sio_map_addr(sd, m[i].node, m[i].bus, bytes, &m[i].io, &m[i].map);
    for (int c = 0; c < nc && !rc; c++) {
        char name[32];
        snprintf(name, sizeof name, "mcb%d.%d", (int)getpid(), cnt[c]);
        size_t gsize = bytes < SIO_MCAST_MIN_SIZE ? SIO_MCAST_MIN_SIZE : bytes;
        rc = groups[c] = sio_mcast_create(name, gsize, NULL, 0);
        for (int i = 0; rc >= 0 && i < cnt[c]; i++)
            rc = sio_mcast_join((uint32_t)groups[c], m[i].node, m[i].bus, 0);
        if (rc >= 0)
            rc = sio_map_mcast(sd, (uint32_t)groups[c], 0, bytes, &gio[c], &gmap[c]);
    }
    if (rc) {
        fprintf(stderr, "mcast_bench: setting up the mappings: %s\n", strerror(-rc));
        goto out;
    }
    for (int i = 0; i < nm; i++)
        ios[i] = m[i].io;
    /* The data: one pattern per round, at its own blocks. */
    pat = nvme_buf_alloc(d, NULL, bytes);
    uint64_t *sums = calloc((size_t)rounds, sizeof *sums);
    for (int r = 0; r < rounds && pat && sums && !rc; r++) {
        for (size_t k = 0; k < bytes; k++)
            pat[k] = (uint8_t)(k * 7 + (size_t)r * 13 + 1);
        sums[r] = fnv(pat, bytes);
        rc = nvme_write(qp, 1, (uint64_t)r * nblocks, nblocks, pat);
    }
    if (!pat || !sums || rc) {
        fprintf(stderr, "mcast_bench: writing the data: %s\n", strerror(rc ? -rc : ENOMEM));
        rc = rc ? rc : -ENOMEM;
        free(sums);
        goto out;
    }
    /* Interleaved: every round times every count both ways, the order alternating. */
    for (int r = 0; r < rounds && !rc; r++) {
        uint64_t lba = (uint64_t)r * nblocks;
        for (int c = 0; c < nc && !rc; c++) {
            for (int k = 0; k < 2 && !rc; k++) {
                bool multi = (k == 0) == (r % 2 == 0);
                uint64_t t0 = now_ns();
                rc = multi ? reads(qp, lba, nblocks, &gio[c], 1, 1)
                           : reads(qp, lba, nblocks, ios, cnt[c], 63);
                uint64_t t = now_ns() - t0;
                (multi ? mc : uc)[c * rounds + r] = t;
                if (!rc && !all_hold(m, cnt[c], sums[r]))
                    failed++;
            }
        }
    }
    free(sums);
    if (rc) {
        fprintf(stderr, "mcast_bench: a read failed: %s\n", strerror(-rc));
        goto out;
    }
    for (int c = 0; c < nc; c++) {
        qsort(mc + c * rounds, (size_t)rounds, sizeof *mc, cmp_u64);
        qsort(uc + c * rounds, (size_t)rounds, sizeof *uc, cmp_u64);
        double tm = (double)mc[c * rounds + rounds / 2] / 1000.0;
        double tu = (double)uc[c * rounds + rounds / 2] / 1000.0;
        printf("{\"hosts\": %d, \"bytes\": %zu, \"rounds\": %d, \"multicast_us\": %.1f, "
               "\"unicast_us\": %.1f, \"unicast_over_multicast\": %.2f, "
               "\"multicast_us_p25\": %.1f, \"multicast_us_p75\": %.1f, "
               "\"unicast_us_p25\": %.1f, \"unicast_us_p75\": %.1f}\n",
               cnt[c], bytes, rounds, tm, tu, tu / tm,
               (double)mc[c * rounds + rounds / 4] / 1000.0,
               (double)mc[c * rounds + rounds * 3 / 4] / 1000.0,
               (double)uc[c * rounds + rounds / 4] / 1000.0,
               (double)uc[c * rounds + rounds * 3 / 4] / 1000.0);
    }
    if (failed)
        fprintf(stderr, "mcast_bench: %d reads did not reach every member\n", failed);
out:
    for (int c = 0; c < nc; c++) {
        if (gmap[c])
            sio_unmap(gmap[c]);
        if (groups[c] >= 0)
            sio_mcast_remove((uint32_t)groups[c]);
    }
    for (int i = 0; i < nm; i++)
        if (m[i].map)
            sio_unmap(m[i].map);
    if (pat)
        nvme_buf_free(d, pat);
    if (qp)
        nvme_qpair_delete(qp);
    if (d)
        nvme_close(d);
    for (int i = 0; i < nm; i++)
        if (m[i].pid > 0) {
            put(m[i].to, 0);
            waitpid(m[i].pid, NULL, 0);
        }
    free(ios);
    free(mc);
    free(uc);
    return rc || failed ? 1 : 0;
}

static void usage(FILE *to)
{
    fprintf(to, "usage: mcast_bench --device NVME --members H1,H2,... [--counts 1,2,4,...] "
                "[--rounds R] [--bytes B]\n");
}

int main(int argc, char **argv)
{
    static const struct option longs[] = {
        { "device", required_argument, NULL, 'd' }, { "members", required_argument, NULL, 'm' },
        { "counts", required_argument, NULL, 'c' }, { "rounds", required_argument, NULL, 'r' },
        { "bytes", required_argument, NULL, 'b' },  { "help", no_argument, NULL, 'h' },
        { 0 },
    };
    const char *dev = NULL;
    char *members = NULL, *counts = NULL;
    int rounds = 100;
    size_t bytes = 4096;
    int ch;
    while ((ch = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
        switch (ch) {
        case 'd': dev = optarg; break;
        case 'm': members = optarg; break;
        case 'c': counts = optarg; break;
        case 'r': rounds = atoi(optarg); break;
        case 'b': bytes = strtoul(optarg, NULL, 0); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    static struct member m[MAX_MEMBERS];
    int nm = 0, nc = 0, cnt[MAX_COUNTS];
    for (char *s = members ? strtok(members, ",") : NULL; s && nm < MAX_MEMBERS; s = strtok(NULL, ","))
        snprintf(m[nm++].host, sizeof m[0].host, "%s", s);
    for (char *s = counts ? strtok(counts, ",") : NULL; s && nc < MAX_COUNTS; s = strtok(NULL, ","))
        cnt[nc++] = atoi(s);
    if (!counts)
        cnt[nc++] = nm;
    bool bad = !dev || !nm || rounds < 1 || bytes < 512 || bytes > (1u << 20) || (bytes & (bytes - 1));
    for (int i = 0; i < nc; i++)
        bad |= cnt[i] < 1 || cnt[i] > nm;
    if (bad) {
        fprintf(stderr, "mcast_bench: give --device and --members; each count 1..members; "
                        "--bytes a power of two, 512..1M; --rounds >= 1\n");
        usage(stderr);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    return run(dev, m, nm, cnt, nc, rounds, bytes);
}
