/*
 * dma_bench: DMA bandwidth between a segment of this host and a segment of the peer, in the
 * style of Dolphin's dma_bench. For each block size (powers of two, 4 KiB .. 4 MiB by default)
 * it queues enough seg_dma_transfer()s on a DMA queue (the adapter's DMA engine) to move
 * --total bytes, local -> remote (write) and remote -> local (read, SEG_DMA_FROM_REMOTE),
 * interleaved, and reports the best of --repeat runs of each. Every run is verified: before a
 * write this side fills its segment with a fresh pattern and afterwards the owner of the
 * remote segment checks it; the read then brings that data back into a cleared local segment
 * and this side checks it. With the fabric's latency model on, reads pay a round trip per
 * request and come out slower than writes (device-lending-2016 Fig. 4a).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ntbtool.h"

#define TAG 0xd4
#define CMD_MS 30000
#define DMA_TIMEOUT_MS 60000

struct opts {
    struct tu_common c;
    int repeats;
    uint64_t min, max, total, seg_size;
};

struct point {
    uint64_t block, count;      /* transfers per run */
    uint64_t best_ns[2];        /* write, read */
    bool verified;
};

/* Move count blocks (wrapping around the segments) in one direction; ns, or -errno. */
static int64_t run(seg_dma_queue_t *q, seg_local_t *l, seg_remote_t *r, uint64_t seg_size,
                   uint64_t block, uint64_t count, bool read)
{
    uint64_t t0 = tu_now_ns();
    for (uint64_t k = 0; k < count; k++) {
        uint64_t off = (k * block) % seg_size;
        int rc = seg_dma_transfer(q, l, off, r, off, block, read ? SEG_DMA_FROM_REMOTE : 0);
        if (rc)
            return rc;
    }
    int rc = seg_dma_wait(q, DMA_TIMEOUT_MS);
    if (rc)
        return rc;
    return (int64_t)(tu_now_ns() - t0);
}

static int client(const struct opts *o)
{
    struct su_side s = { .timeout_s = o->c.timeout_s, .quiet = o->c.quiet || o->c.json };
    seg_local_t *lseg = NULL;
    seg_remote_t *rseg = NULL;
    seg_map_t *lmap = NULL;
    seg_dma_queue_t *q = NULL;
    volatile uint8_t *local = NULL;
    struct point *pts = NULL;
    int rc = 1, npts = 0;
    bool all_ok = true;
    char s1[32], s2[32], s3[32];
    uint64_t seg_size = o->seg_size;

    if (su_find_peer(&s, o->c.adapter, o->c.node))
        return 1;
    if (su_client_segment(&s, su_session_of(&o->c, TAG, o->c.no_spawn), o->c.no_spawn, seg_size,
                          &rseg))
        goto out;
    uint32_t rid = s.ctl->seg_id;
    if (!(local = su_local_segment(&s, seg_size, &lseg, &lmap)))
        goto out;
    int e = seg_dma_queue_create(s.sd, &q, s.adapter);
    if (e) {
        tu_err("cannot create a DMA queue on adapter %d: %s%s", s.adapter, seg_strerror(e),
               e == -ENOSPC ? " (all DMA channels are in use)" : "");
        goto out;
    }
    int nsizes = 0;
    for (uint64_t z = o->min; z <= o->max; z *= 2)
        nsizes++;
    pts = calloc((size_t)nsizes, sizeof *pts);
    if (!pts) {
        tu_err("out of memory");
        goto out;
    }
    int model = tu_latency_model();

    /* Untimed: every page of both segments, and the engine awake. */
    memset((void *)local, 0, seg_size);
    int64_t ns = run(q, lseg, rseg, seg_size, seg_size, 1, false);
    if (ns >= 0)
        ns = run(q, lseg, rseg, seg_size, seg_size, 1, true);

    for (uint64_t z = o->min; z <= o->max && ns >= 0; z *= 2, npts++) {
        struct point *p = &pts[npts];
        p->block = z;
        /* At least one pass over the segment, so every run leaves a whole pattern to check. */
        uint64_t total = o->total < seg_size ? seg_size : o->total;
        p->count = (total + z - 1) / z;
        p->best_ns[0] = p->best_ns[1] = UINT64_MAX;
        p->verified = true;
        for (int r = 0; r < o->repeats && ns >= 0; r++) {
            uint32_t seed = tu_nonce();
            tu_fill(local, seg_size, seed);
            ns = run(q, lseg, rseg, seg_size, z, p->count, false);
            if (ns < 0)
                break;
            p->best_ns[0] = (uint64_t)ns < p->best_ns[0] ? (uint64_t)ns : p->best_ns[0];
            s.ctl->arg[0] = seed;
            s.ctl->arg[1] = 0;
            s.ctl->arg[2] = seg_size;
            int bad = su_cmd(&s, SU_CMD_VERIFY, CMD_MS);
            if (bad < 0)
                goto out;
            if (bad) {
                tu_err("block %s, write: host %s's segment does not hold the data written (%d "
                       "of %" PRIu64 " words differ)", tu_fmt_size(z, s1, sizeof s1),
                       s.peer_host, bad, seg_size / 8);
                p->verified = false;
            }
            memset((void *)local, 0, seg_size);
            ns = run(q, lseg, rseg, seg_size, z, p->count, true);
            if (ns < 0)
                break;
            p->best_ns[1] = (uint64_t)ns < p->best_ns[1] ? (uint64_t)ns : p->best_ns[1];
            uint64_t badr = tu_check(local, seg_size, seed);
            if (badr) {
                tu_err("block %s, read: the data read from host %s is wrong (%" PRIu64 " of %"
                       PRIu64 " words differ)", tu_fmt_size(z, s1, sizeof s1), s.peer_host, badr,
                       seg_size / 8);
                p->verified = false;
            }
        }
        all_ok &= p->verified;
    }
    if (ns < 0) {
        tu_err("DMA failed: %s", seg_strerror((int)ns));
        goto out;
    }

    if (o->c.json) {
        struct json_object *j = tu_json_begin("dma_bench");
        tu_json_endpoints(j, s.self_node, s.peer_host, s.peer_node, s.adapter);
        json_object_object_add(j, "latency_model", model < 0 ? NULL : json_object_new_boolean(model));
        json_object_object_add(j, "segment_id", json_object_new_int64(rid));
        json_object_object_add(j, "segment_size", json_object_new_int64((int64_t)seg_size));
        json_object_object_add(j, "repeats", json_object_new_int(o->repeats));
        struct json_object *arr = json_object_new_array();
        for (int i = 0; i < npts; i++) {
            const struct point *p = &pts[i];
            uint64_t bytes = p->block * p->count;
            double w = tu_mbps(bytes, p->best_ns[0]), rd = tu_mbps(bytes, p->best_ns[1]);
            struct json_object *r = json_object_new_object();
            json_object_object_add(r, "block", json_object_new_int64((int64_t)p->block));
            json_object_object_add(r, "count", json_object_new_int64((int64_t)p->count));
            json_object_object_add(r, "bytes", json_object_new_int64((int64_t)bytes));
            json_object_object_add(r, "write_mbps", tu_jdouble(w, 1));
            json_object_object_add(r, "read_mbps", tu_jdouble(rd, 1));
            json_object_object_add(r, "read_write_ratio", tu_jdouble(w ? rd / w : 0, 3));
            json_object_object_add(r, "write_us_per_block",
                                   tu_jdouble((double)p->best_ns[0] / 1e3 / (double)p->count, 3));
            json_object_object_add(r, "read_us_per_block",
                                   tu_jdouble((double)p->best_ns[1] / 1e3 / (double)p->count, 3));
            json_object_object_add(r, "verified", json_object_new_boolean(p->verified));
            json_object_array_add(arr, r);
        }
        json_object_object_add(j, "results", arr);
        json_object_object_add(j, "verified", json_object_new_boolean(all_ok));
        tu_json_print(j);
    } else {
        printf("dma_bench: host %s (node %u) <-> segment %u of host %s (node %u), %s segments, "
               "DMA engine of adapter %d; best of %d; latency model %s\n",
               getenv("NTBLEND_HOST"), s.self_node, rid, s.peer_host, s.peer_node,
               tu_fmt_size(seg_size, s1, sizeof s1), s.adapter, o->repeats,
               model < 0 ? "unknown" : model ? "on" : "off");
        printf("write = local -> remote, read = remote -> local (SEG_DMA_FROM_REMOTE)\n\n");
        printf("%9s %7s %9s | %11s %11s %10s | %11s %11s | %s\n", "block", "count", "per run",
               "write MB/s", "read MB/s", "read/write", "write us/bl", "read us/bl", "data");
        for (int i = 0; i < npts; i++) {
            const struct point *p = &pts[i];
            uint64_t bytes = p->block * p->count;
            double w = tu_mbps(bytes, p->best_ns[0]), rd = tu_mbps(bytes, p->best_ns[1]);
            printf("%9s %7" PRIu64 " %9s | %11.0f %11.0f %10.2f | %11.2f %11.2f | %s\n",
                   tu_fmt_size(p->block, s2, sizeof s2), p->count, tu_fmt_size(bytes, s3, sizeof s3),
                   w, rd, w ? rd / w : 0, (double)p->best_ns[0] / 1e3 / (double)p->count,
                   (double)p->best_ns[1] / 1e3 / (double)p->count, p->verified ? "ok" : "WRONG");
        }
        if (all_ok)
            printf("\nverified: every write reached host %s's segment and every read brought it "
                   "back\n", s.peer_host);
    }
    rc = all_ok ? 0 : 1;
out:
    seg_dma_queue_remove(q);
    if (rseg)
        seg_disconnect(rseg);
    if (lmap)
        seg_unmap(lmap);
    if (lseg)
        seg_remove(lseg);
    free(pts);
    return su_client_end(&s, rc);
}

static void help(FILE *out)
{
    fprintf(out,
        "usage: ntblend run --host A -- dma_bench [options]\n"
        "       ntblend run --host B -- dma_bench --serve --node A_NODE [options]  (by hand)\n"
        "\n"
        "DMA bandwidth between a segment of this host and one of the peer, dma_bench-style. For\n"
        "each block size (powers of two from --min to --max) the tool queues seg_dma_transfer()s\n"
        "of that size on a DMA queue until --total bytes have moved, local -> remote (write)\n"
        "and remote -> local (read), interleaved, and reports the best of --repeat runs of each.\n"
        "Every run is checked: the peer checks what was written, this side what was read (exit\n"
        "1 if anything is wrong). The peer side is started automatically (ntblend run --host\n"
        "PEER -- dma_bench --serve ...). With the fabric's latency model on ([latency] enabled =\n"
        "yes in the topology), reads pay a round trip per request and are slower than writes.\n"
        "\n"
        "options:\n"
        "  -a, --adapter N    adapter index on this host (default: the one facing --node, else 0)\n"
        "  --node NODE        the peer's node id (default: the adapter's first peer)\n"
        "  --min SIZE         smallest block, a power of two (default 4K)\n"
        "  --max SIZE         largest block, a power of two (default 4M)\n"
        "  -s, --total SIZE   bytes per run (default 128M; at least the segment size)\n"
        "  --seg-size SIZE    size of both segments, a power of two >= --max (default 8M)\n"
        "  -r, --repeat N     runs per block size and direction; the best is reported (default 3)\n"
        "  --json             one JSON object: latency_model, results[] with block, count,\n"
        "                     write_mbps, read_mbps, read_write_ratio, verified, ...\n"
        "  --no-spawn         do not start the server; it prints the command to run on the peer\n"
        "  --session ID       session id (default: from the pid; 0xd4000001 with --no-spawn)\n"
        "  --timeout S        seconds to wait for the server (default 20)\n"
        "server options (started automatically):\n"
        "  --serve --node N   serve the client on node N (with --session ID, --seg-size SIZE)\n"
        "\n"
        "Sizes take K, M, G suffixes.\n"
        "examples:\n"
        "  ntblend run --host a -- dma_bench\n"
        "  ntblend up --fabric lat examples/topologies/two-hosts-latency.ini\n"
        "  ntblend run --fabric lat --host a -- dma_bench --json\n");
}

enum { O_MIN = TU_O_TOOL, O_MAX, O_SEGSIZE };

static int option(void *ctx, int opt, const char *arg)
{
    struct opts *o = ctx;
    switch (opt) {
    case O_MIN: return tu_parse_size(arg, &o->min) || !tu_pow2(o->min);
    case O_MAX: return tu_parse_size(arg, &o->max) || !tu_pow2(o->max) || o->max > (1ull << 30);
    case 's': return tu_parse_size(arg, &o->total) || !o->total;
    case 'r': return tu_parse_int(arg, 1, 1000, &o->repeats) != 0;
    case O_SEGSIZE: return tu_parse_size(arg, &o->seg_size) || !tu_pow2(o->seg_size);
    default: return 1;
    }
}

int main(int argc, char **argv)
{
    tu_prog = "dma_bench";
    struct opts o = { .repeats = 3, .min = 4 << 10, .max = 4 << 20, .total = 128 << 20,
                      .seg_size = 8 << 20 };
    tu_common_init(&o.c);
    static const struct option lo[] = {
        { "min", 1, 0, O_MIN }, { "max", 1, 0, O_MAX }, { "total", 1, 0, 's' },
        { "repeat", 1, 0, 'r' }, { "seg-size", 1, 0, O_SEGSIZE }, { 0, 0, 0, 0 }
    };
    const struct tu_cmdline cl = { .common = TU_OPTS_SEG, .adapter_max = 31, .shortopts = "s:r:",
                                   .options = lo, .option = option, .ctx = &o, .help = help,
                                   .bad_hint = "; block and segment sizes are powers of two" };
    int st = tu_getopt(argc, argv, &cl, &o.c);
    if (st >= 0)
        return st;
    if (o.c.serve)
        return su_serve_segment(o.c.adapter, o.c.node, su_session_of(&o.c, TAG, true), o.seg_size,
                                o.c.timeout_s, o.c.quiet);
    if (o.min > o.max) {
        tu_err("--min %" PRIu64 " is larger than --max %" PRIu64, o.min, o.max);
        return 2;
    }
    if (o.seg_size < o.max)
        o.seg_size = o.max; /* one block must fit */
    return client(&o);
}
