/*
 * scibench: remote-segment latency and bandwidth, in the style of Dolphin's scibench. For each
 * size (powers of two, 4 B .. 4 MiB by default) it times memcpy into a segment of the peer host
 * (remote store) and out of it (remote load), through a mapping made with the segment API, and
 * the same copies on a segment of this host in the same run, interleaved, so the ratio
 * remote/local is fair on a noisy machine. Latency is the time per copy averaged over many
 * copies; bandwidth is size / that time. The server half (--serve) owns the remote segment,
 * started on the peer with `ntblend run` unless --no-spawn (tools/lib/ntbtool.h). At the end the server
 * checks that its segment holds the data stored, and this side checks the data it loaded.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ntbtool.h"

#define TAG 0x51        /* session ids 0x51xxxxxx */
#define VERIFY_MS 30000 /* a command answered later than this is a failure */
/* The private buffers start this far into a page. Copying between two addresses with the same
 * offset in their pages makes every load look as if it might depend on the previous copy's
 * stores (4K aliasing), and the CPU then stalls or not depending on where the mappings happen
 * to lie: 2-3x noise at 64 B-2 KiB that has nothing to do with the segment. */
#define PRIV_SKEW 2112

struct opts {
    struct tu_common c;
    int repeats, time_ms;
    uint64_t min, max, seg_size;
};

/* What is measured, in the order of the columns. */
enum kind { STORE_REMOTE, STORE_LOCAL, LOAD_REMOTE, LOAD_LOCAL, NKINDS };
static const char *kind_name[NKINDS] = { "store_remote", "store_local", "load_remote", "load_local" };

struct point {
    uint64_t size, reps;
    uint64_t best_ns[NKINDS];
};

/* Stores go to [0, max) of a segment, loads come from [max, 2 max): the server checks the
 * stored data against one pattern and this side the loaded data against another. */
struct bench {
    uint64_t max;
    volatile uint8_t *remote, *local; /* segment mappings */
    uint8_t *src, *dst;               /* private buffers of this process */
    void *src_mem, *dst_mem;
};

static uint64_t run(const struct bench *b, enum kind k, uint64_t size, uint64_t reps)
{
    uint8_t *seg = (uint8_t *)(k == STORE_REMOTE || k == LOAD_REMOTE ? b->remote : b->local);
    bool store = k == STORE_REMOTE || k == STORE_LOCAL;
    uint8_t *to = store ? seg : b->dst;
    const uint8_t *from = store ? b->src : seg + b->max;
    uint64_t t0 = tu_now_ns();
    for (uint64_t i = 0; i < reps; i++) {
        memcpy(to, from, size);
        __asm__ volatile("" ::: "memory"); /* every copy happens */
    }
    if (store)
        seg_flush();
    return tu_now_ns() - t0;
}

/* Copies per measurement so that one takes about time_ms (on the local segment). */
static uint64_t calibrate(const struct bench *b, uint64_t size, int time_ms)
{
    uint64_t reps = 1, ns;
    while ((ns = run(b, STORE_LOCAL, size, reps)) < 1000000ull && reps < (1ull << 40))
        reps *= 2;
    uint64_t want = (uint64_t)time_ms * 1000000ull;
    uint64_t r = (uint64_t)((double)reps * (double)want / (double)(ns ? ns : 1));
    return r ? r : 1;
}

static double ns_per_op(const struct point *p, enum kind k)
{
    return (double)p->best_ns[k] / (double)p->reps;
}

static double mbps(const struct point *p, enum kind k)
{
    return p->best_ns[k] ? (double)p->size * (double)p->reps * 1e3 / (double)p->best_ns[k] : 0;
}

static int client(const struct opts *o)
{
    struct su_side s = { .timeout_s = o->c.timeout_s, .quiet = o->c.quiet || o->c.json };
    seg_local_t *lseg = NULL;
    seg_remote_t *rseg = NULL;
    seg_map_t *lmap = NULL, *rmap = NULL;
    struct bench b = { .max = o->max };
    struct point *pts = NULL;
    int rc = 1, npts = 0;
    bool loaded_ok = false, stored_ok = false;
    char s1[32], s2[32];
    uint64_t need = 2 * o->max;

    if (su_find_peer(&s, o->c.adapter, o->c.node))
        return 1;
    if (su_client_segment(&s, su_session_of(&o->c, TAG, o->c.no_spawn), o->c.no_spawn, need,
                          &rseg))
        goto out;
    uint32_t rid = s.ctl->seg_id;
    b.remote = seg_map_remote(rseg, 0, need, 0, &rmap);
    if (!b.remote) {
        tu_err("cannot map segment %u of host %s: %s", rid, s.peer_host, seg_strerror(-errno));
        goto out;
    }
    if (!(b.local = su_local_segment(&s, need, &lseg, &lmap)))
        goto out;
    b.src_mem = aligned_alloc(4096, o->max + 4096);
    b.dst_mem = aligned_alloc(4096, o->max + 4096);
    b.src = b.src_mem ? (uint8_t *)b.src_mem + PRIV_SKEW : NULL;
    b.dst = b.dst_mem ? (uint8_t *)b.dst_mem + PRIV_SKEW : NULL;
    int nsizes = 0;
    for (uint64_t z = o->min; z <= o->max; z *= 2)
        nsizes++;
    pts = calloc((size_t)nsizes, sizeof *pts);
    if (!b.src || !b.dst || !pts) {
        tu_err("out of memory");
        goto out;
    }

    /* The patterns: stored data from src, loaded data from the server's [max, 2 max) (and
     * the same on the local segment, so both are real, written pages). */
    uint32_t store_seed = tu_nonce(), load_seed = tu_nonce() ^ 0x5a5a5a5au;
    tu_fill(b.src, o->max, store_seed);
    tu_fill(b.local + o->max, o->max, load_seed);
    s.ctl->arg[0] = load_seed;
    s.ctl->arg[1] = o->max;
    s.ctl->arg[2] = o->max;
    if (su_cmd(&s, SU_CMD_FILL, VERIFY_MS) != 0) {
        tu_err("host %s could not fill its segment", s.peer_host);
        goto out;
    }

    /* Warm up: every page of both segments and both buffers, untimed. */
    for (int k = 0; k < NKINDS; k++)
        run(&b, (enum kind)k, o->max, 2);

    for (uint64_t z = o->min; z <= o->max; z *= 2, npts++) {
        struct point *p = &pts[npts];
        p->size = z;
        p->reps = calibrate(&b, z, o->time_ms);
        for (int k = 0; k < NKINDS; k++)
            p->best_ns[k] = UINT64_MAX;
        for (int r = 0; r < o->repeats; r++)
            for (int k = 0; k < NKINDS; k++) {
                uint64_t ns = run(&b, (enum kind)k, z, p->reps);
                p->best_ns[k] = ns < p->best_ns[k] ? ns : p->best_ns[k];
            }
    }

    /* The last store copied src[0, largest) to the server's segment; the last load brought
     * its [max, max + largest) here. */
    uint64_t largest = pts[npts - 1].size & ~7ull;
    uint64_t bad_load = tu_check(b.dst, largest, load_seed);
    loaded_ok = bad_load == 0;
    if (!loaded_ok)
        tu_err("the data loaded from host %s is wrong: %" PRIu64 " of %" PRIu64 " words differ",
               s.peer_host, bad_load, largest / 8);
    s.ctl->arg[0] = store_seed;
    s.ctl->arg[1] = 0;
    s.ctl->arg[2] = largest;
    int bad_store = su_cmd(&s, SU_CMD_VERIFY, VERIFY_MS);
    stored_ok = bad_store == 0;
    if (bad_store > 0)
        tu_err("host %s's segment does not hold the data stored: %d of %" PRIu64 " words differ",
               s.peer_host, bad_store, largest / 8);

    if (o->c.json) {
        struct json_object *j = tu_json_begin("scibench");
        tu_json_endpoints(j, s.self_node, s.peer_host, s.peer_node, s.adapter);
        json_object_object_add(j, "segment_id", json_object_new_int64(rid));
        json_object_object_add(j, "segment_size", json_object_new_int64((int64_t)seg_remote_size(rseg)));
        json_object_object_add(j, "repeats", json_object_new_int(o->repeats));
        json_object_object_add(j, "time_ms", json_object_new_int(o->time_ms));
        struct json_object *arr = json_object_new_array();
        for (int i = 0; i < npts; i++) {
            const struct point *p = &pts[i];
            struct json_object *r = json_object_new_object();
            json_object_object_add(r, "size", json_object_new_int64((int64_t)p->size));
            json_object_object_add(r, "reps", json_object_new_int64((int64_t)p->reps));
            char key[48];
            for (int k = 0; k < NKINDS; k++) {
                snprintf(key, sizeof key, "%s_ns", kind_name[k]);
                json_object_object_add(r, key, tu_jdouble(ns_per_op(p, (enum kind)k), 2));
                snprintf(key, sizeof key, "%s_mbps", kind_name[k]);
                json_object_object_add(r, key, tu_jdouble(mbps(p, (enum kind)k), 1));
            }
            double sr = mbps(p, STORE_LOCAL) ? mbps(p, STORE_REMOTE) / mbps(p, STORE_LOCAL) : 0;
            double lr = mbps(p, LOAD_LOCAL) ? mbps(p, LOAD_REMOTE) / mbps(p, LOAD_LOCAL) : 0;
            json_object_object_add(r, "store_ratio", tu_jdouble(sr, 3));
            json_object_object_add(r, "load_ratio", tu_jdouble(lr, 3));
            json_object_array_add(arr, r);
        }
        json_object_object_add(j, "results", arr);
        json_object_object_add(j, "verified", json_object_new_boolean(loaded_ok && stored_ok));
        tu_json_print(j);
    } else {
        printf("scibench: host %s (node %u) -> segment %u of host %s (node %u), %s, mapped "
               "through adapter %d; best of %d, ~%d ms per point\n",
               getenv("NTBLEND_HOST"), s.self_node, rid, s.peer_host, s.peer_node,
               tu_fmt_size(seg_remote_size(rseg), s1, sizeof s1), s.adapter, o->repeats,
               o->time_ms);
        printf("ratio = remote MB/s / local MB/s (a segment on this host, same run)\n\n");
        printf("%9s | %27s %11s %6s | %27s %11s %6s\n", "", "store: memcpy into segment",
               "", "", "load: memcpy out of segment", "", "");
        printf("%9s | %9s %9s %9s %9s %6s | %9s %9s %9s %9s %6s\n", "size", "remote ns",
               "local ns", "rem MB/s", "loc MB/s", "ratio", "remote ns", "local ns", "rem MB/s",
               "loc MB/s", "ratio");
        for (int i = 0; i < npts; i++) {
            const struct point *p = &pts[i];
            printf("%9s | %9.1f %9.1f %9.0f %9.0f %6.2f | %9.1f %9.1f %9.0f %9.0f %6.2f\n",
                   tu_fmt_size(p->size, s2, sizeof s2), ns_per_op(p, STORE_REMOTE),
                   ns_per_op(p, STORE_LOCAL), mbps(p, STORE_REMOTE), mbps(p, STORE_LOCAL),
                   mbps(p, STORE_REMOTE) / mbps(p, STORE_LOCAL), ns_per_op(p, LOAD_REMOTE),
                   ns_per_op(p, LOAD_LOCAL), mbps(p, LOAD_REMOTE), mbps(p, LOAD_LOCAL),
                   mbps(p, LOAD_REMOTE) / mbps(p, LOAD_LOCAL));
        }
        if (loaded_ok && stored_ok)
            printf("\nverified: host %s's segment holds the data stored, and the data loaded "
                   "is what it holds\n", s.peer_host);
    }
    rc = loaded_ok && stored_ok ? 0 : 1;
out:
    if (rmap)
        seg_unmap(rmap);
    if (rseg)
        seg_disconnect(rseg);
    if (lmap)
        seg_unmap(lmap);
    if (lseg)
        seg_remove(lseg);
    free(b.src_mem);
    free(b.dst_mem);
    free(pts);
    return su_client_end(&s, rc);
}

static void help(FILE *out)
{
    fprintf(out,
        "usage: ntblend run --host A -- scibench [options]\n"
        "       ntblend run --host B -- scibench --serve --node A_NODE [options]  (by hand)\n"
        "\n"
        "Remote-segment latency and bandwidth, scibench-style. A segment on the peer host is\n"
        "connected and mapped with the segment API; for each size (powers of two from --min to\n"
        "--max) the tool times memcpy into it (store) and out of it (load), and the same copies\n"
        "on a segment of this host, interleaved in the same run. Latency is the time per copy\n"
        "(ns), averaged over as many copies as fit in --time; bandwidth is size / latency;\n"
        "ratio is remote / local bandwidth. Every point is the best of --repeat measurements.\n"
        "The peer side is started automatically (ntblend run --host PEER -- scibench --serve\n"
        "...); at the end it checks the stored data, and this side checks the loaded data\n"
        "(exit 1 if either is wrong).\n"
        "\n"
        "options:\n"
        "  -a, --adapter N    adapter index on this host (default: the one facing --node, else 0)\n"
        "  --node NODE        the peer's node id (default: the adapter's first peer)\n"
        "  --min SIZE         smallest copy (default 4)\n"
        "  --max SIZE         largest copy (default 4M); the segments are 2 x --max\n"
        "  -t, --time MS      milliseconds per measurement (default 15)\n"
        "  -r, --repeat N     measurements per point; the best is reported (default 3)\n"
        "  --json             one JSON object: results[] with size, reps, store_remote_ns,\n"
        "                     store_local_ns, load_*_ns, *_mbps, store_ratio, load_ratio;\n"
        "                     verified, ...\n"
        "  --no-spawn         do not start the server; it prints the command to run on the peer\n"
        "  --session ID       session id (default: from the pid; 0x51000001 with --no-spawn)\n"
        "  --timeout S        seconds to wait for the server (default 20)\n"
        "server options (started automatically):\n"
        "  --serve --node N   serve the client on node N (with --session ID, --seg-size SIZE)\n"
        "\n"
        "Sizes take K, M, G suffixes. A default run takes about 5 s.\n"
        "example:\n"
        "  ntblend run --host a -- scibench --min 64K --max 4M\n");
}

enum { O_MIN = TU_O_TOOL, O_MAX, O_SEGSIZE };

static int option(void *ctx, int opt, const char *arg)
{
    struct opts *o = ctx;
    switch (opt) {
    case O_MIN: return tu_parse_size(arg, &o->min) || !o->min;
    case O_MAX: return tu_parse_size(arg, &o->max) || !o->max || o->max > (1ull << 30);
    case 't': return tu_parse_int(arg, 1, 10000, &o->time_ms) != 0;
    case 'r': return tu_parse_int(arg, 1, 1000, &o->repeats) != 0;
    case O_SEGSIZE: return tu_parse_size(arg, &o->seg_size) || !o->seg_size;
    default: return 1;
    }
}

int main(int argc, char **argv)
{
    tu_prog = "scibench";
    struct opts o = { .repeats = 3, .time_ms = 15, .min = 4, .max = 4 << 20, .seg_size = 8 << 20 };
    tu_common_init(&o.c);
    static const struct option lo[] = {
        { "min", 1, 0, O_MIN }, { "max", 1, 0, O_MAX }, { "time", 1, 0, 't' },
        { "repeat", 1, 0, 'r' }, { "seg-size", 1, 0, O_SEGSIZE }, { 0, 0, 0, 0 }
    };
    const struct tu_cmdline cl = { .common = TU_OPTS_SEG, .adapter_max = 31, .shortopts = "t:r:",
                                   .options = lo, .option = option, .ctx = &o, .help = help };
    int st = tu_getopt(argc, argv, &cl, &o.c);
    if (st >= 0)
        return st;
    if (o.min > o.max) {
        tu_err("--min %" PRIu64 " is larger than --max %" PRIu64, o.min, o.max);
        return 2;
    }
    if (o.c.serve)
        return su_serve_segment(o.c.adapter, o.c.node, su_session_of(&o.c, TAG, true), o.seg_size,
                                o.c.timeout_s, o.c.quiet);
    return client(&o);
}
