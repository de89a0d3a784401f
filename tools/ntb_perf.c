/*
 * ntb_perf: NTB window bandwidth between this host and a peer, like Linux's ntb_perf. The
 * client (default) copies chunks from a local buffer into a buffer on the peer, through an
 * outbound window, by CPU memcpy or by the adapter's DMA engine, with up to 32 threads; the
 * server (--serve, started on the peer with `ntblend run` unless --no-spawn) exposes that
 * buffer through an inbound window and checks the data at the end. The two meet over
 * scratchpads and doorbells only (tools/lib/ntbtool.h). --baseline measures the same copy pattern into
 * a second, local buffer in the same run, interleaved, so the ratio is fair on a noisy machine.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ntbtool.h"

#define MAX_THREADS 32
#define DMA_DEPTH 32              /* descriptors in flight per channel */
#define DMA_TIMEOUT_MS 30000
#define HELLO_TIMEOUT_MS 20000
#define RESULT_TIMEOUT_MS 30000
#define WINDOW_CAP (1ull << 31)   /* sizes travel in 32-bit scratchpads */

/* Server scratchpads after NONCE/CMD: the VERIFY arguments. Client's: window index, size. */
enum { SP_SEED = TU_SP_ARG0, SP_THREADS, SP_REGION, SP_COVER };
enum { SPC_WIDX = TU_SPC_ARG0, SPC_SIZE_KB };

struct opts {
    struct tu_common c;
    int threads, repeats;
    uint64_t chunk, total;
    bool dma, baseline;
};

/* ---------------------------------------------------------------- the data check */

/* Words that lie wholly in [base, base+cover) of each thread's region must hold the pattern. */
static uint32_t check(const uint64_t *buf, uint64_t size, uint32_t seed, uint32_t threads,
                      uint64_t region, uint64_t cover)
{
    uint32_t bad = 0;
    for (uint32_t t = 0; t < threads; t++) {
        uint64_t base = (uint64_t)t * region;
        for (uint64_t off = base; off + 8 <= base + cover && off + 8 <= size; off += 8)
            if (buf[off / 8] != tu_pattern(seed, off) && bad < UINT32_MAX)
                bad++;
    }
    return bad;
}

/* ---------------------------------------------------------------- server */

/* Point an inbound window of the client at buf: the highest free entry (the host agents take
 * entries from the bottom for their mailboxes). */
static int expose(struct ntb_dev *ntb, int pidx, uint64_t dma, uint64_t size)
{
    int rc = -ENOSPC;
    for (int w = ntb_mw_count(ntb, pidx) - 1; w >= 0; w--) {
        rc = ntb_mw_set_trans(ntb, pidx, w, dma, size);
        if (rc == 0)
            return w;
        if (rc != -EBUSY)
            return rc;
    }
    return rc;
}

static int serve(const struct opts *o)
{
    int rc = 1, widx = -1;
    uint64_t *buf = NULL, dma = 0, size = 0;
    struct tu_server sv = { 0 };
    if (tu_server_start(&sv, &o->c, TU_DB_HELLO | TU_DB_CMD))
        goto out;
    struct ntb_dev *ntb = sv.ntb;
    int pidx = sv.pidx;
    for (;;) {
        uint64_t bits = tu_server_wait(&sv, TU_DB_HELLO | TU_DB_CMD);
        if (!bits)
            goto out;
        if (bits & TU_DB_HELLO) {
            ntb_db_clear(ntb, TU_DB_HELLO);
            uint32_t nonce = ntb_spad_read(ntb, TU_SP_NONCE), status = 0;
            if (!buf) {
                int r = ntb_mw_get_align(ntb, pidx, 0, NULL, NULL, &size);
                if (!r) {
                    size = size > WINDOW_CAP ? WINDOW_CAP : size;
                    buf = ntb_dma_alloc(ntb, size, &dma);
                    r = buf ? expose(ntb, pidx, dma, size) : -errno;
                }
                if (r < 0) {
                    tu_err("cannot expose a %" PRIu64 "-byte buffer to peer %d: %s", size, pidx,
                           strerror(-r));
                    status = (uint32_t)-r;
                    if (buf)
                        ntb_dma_free(ntb, buf);
                    buf = NULL;
                } else {
                    widx = r;
                }
            }
            ntb_peer_spad_write(ntb, pidx, SPC_WIDX, (uint32_t)widx);
            ntb_peer_spad_write(ntb, pidx, SPC_SIZE_KB, (uint32_t)(size >> 10));
            tu_answer(ntb, pidx, nonce, status);
        }
        if (bits & TU_DB_CMD) {
            ntb_db_clear(ntb, TU_DB_CMD);
            uint32_t cmd = ntb_spad_read(ntb, TU_SP_CMD);
            ntb_spad_write(ntb, TU_SP_CMD, TU_CMD_NONE);
            if (cmd == TU_CMD_VERIFY) {
                uint32_t bad = UINT32_MAX;
                if (buf)
                    bad = check(buf, size, ntb_spad_read(ntb, SP_SEED),
                                ntb_spad_read(ntb, SP_THREADS), ntb_spad_read(ntb, SP_REGION),
                                ntb_spad_read(ntb, SP_COVER));
                ntb_peer_spad_write(ntb, pidx, TU_SPC_STATUS, bad);
                ntb_peer_db_set(ntb, pidx, TU_DB_RESULT);
            } else if (cmd == TU_CMD_DONE) {
                if (buf) {
                    ntb_mw_clear_trans(ntb, pidx, widx);
                    ntb_dma_free(ntb, buf);
                    buf = NULL;
                }
                if (o->c.once) {
                    rc = 0;
                    goto out;
                }
                if (!o->c.quiet) {
                    printf("ntb_perf: session done; waiting for the next client\n");
                    fflush(stdout);
                }
            }
        }
    }
out:
    if (buf) {
        ntb_mw_clear_trans(sv.ntb, sv.pidx, widx);
        ntb_dma_free(sv.ntb, buf);
    }
    tu_server_finish(&sv);
    return rc;
}

/* ---------------------------------------------------------------- client: workers */

enum phase { PH_WINDOW, PH_LOCAL, PH_STOP };

struct perf;

struct worker {
    struct perf *p;
    int id;
    pthread_t thread;
    struct ntb_dma_chan *ch;
    uint64_t nchunks; /* this phase */
    uint64_t t0, t1;
    int err;
};

struct perf {
    const struct opts *o;
    struct ntb_dev *ntb;
    int nthreads;
    uint64_t window, region, chunk;
    uint8_t *win, *src, *local;   /* window mapping, local source, local baseline target */
    uint64_t win_bus, src_bus;
    /* Phases: main bumps gen and broadcasts `go`; the last worker to finish signals `fin`. */
    pthread_mutex_t mu;
    pthread_cond_t go, fin;
    unsigned gen;
    int running;
    enum phase phase;
    struct worker w[MAX_THREADS];
};

static int dma_copy(struct worker *w, uint64_t dst, uint64_t src, uint64_t len, int64_t *ring,
                    int *inflight, uint64_t *head)
{
    int64_t c;
    while ((c = ntb_dma_submit(w->ch, dst, src, len, true)) == -EAGAIN) {
        if (!*inflight)
            return -EAGAIN;
        int rc = ntb_dma_wait(w->ch, ring[(*head - (uint64_t)*inflight) % DMA_DEPTH], DMA_TIMEOUT_MS);
        (*inflight)--;
        if (rc)
            return rc;
    }
    if (c < 0)
        return (int)c;
    ring[*head % DMA_DEPTH] = c;
    (*head)++;
    if (++*inflight == DMA_DEPTH) {
        int rc = ntb_dma_wait(w->ch, ring[(*head - DMA_DEPTH) % DMA_DEPTH], DMA_TIMEOUT_MS);
        (*inflight)--;
        return rc;
    }
    return 0;
}

static int run_chunks(struct worker *w)
{
    struct perf *p = w->p;
    uint64_t base = (uint64_t)w->id * p->region, pos = 0;
    bool dma = p->phase == PH_WINDOW && p->o->dma;
    uint8_t *dst = p->phase == PH_WINDOW ? p->win : p->local;
    int64_t ring[DMA_DEPTH];
    int inflight = 0, rc = 0;
    uint64_t head = 0;
    for (uint64_t k = 0; k < w->nchunks && !rc; k++) {
        uint64_t off = base + pos;
        if (dma)
            rc = dma_copy(w, p->win_bus + off, p->src_bus + off, p->chunk, ring, &inflight, &head);
        else
            memcpy(dst + off, p->src + off, p->chunk);
        pos += p->chunk;
        if (pos + p->chunk > p->region)
            pos = 0; /* wrap around this thread's part of the window */
    }
    while (inflight > 0) {
        int r = ntb_dma_wait(w->ch, ring[(head - (uint64_t)inflight) % DMA_DEPTH], DMA_TIMEOUT_MS);
        rc = rc ? rc : r;
        inflight--;
    }
    return rc;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct perf *p = w->p;
    unsigned seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->gen == seen)
            pthread_cond_wait(&p->go, &p->mu);
        seen = p->gen;
        if (p->phase == PH_STOP)
            break;
        pthread_mutex_unlock(&p->mu);
        w->t0 = tu_now_ns();
        w->err = run_chunks(w);
        w->t1 = tu_now_ns();
        pthread_mutex_lock(&p->mu);
        if (--p->running == 0)
            pthread_cond_signal(&p->fin);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void start_phase(struct perf *p, enum phase ph, int nthreads)
{
    pthread_mutex_lock(&p->mu);
    p->phase = ph;
    p->running = nthreads;
    p->gen++;
    pthread_cond_broadcast(&p->go);
    while (ph != PH_STOP && p->running > 0)
        pthread_cond_wait(&p->fin, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

/* Run one phase on all workers; its duration (first start to last end) in ns, or -errno. */
static int64_t run_phase(struct perf *p, enum phase ph, uint64_t total_chunks)
{
    for (int t = 0; t < p->nthreads; t++)
        p->w[t].nchunks = total_chunks / (uint64_t)p->nthreads +
                          ((uint64_t)t < total_chunks % (uint64_t)p->nthreads);
    start_phase(p, ph, p->nthreads);
    uint64_t t0 = UINT64_MAX, t1 = 0;
    for (int t = 0; t < p->nthreads; t++) {
        if (p->w[t].err)
            return p->w[t].err;
        t0 = p->w[t].t0 < t0 ? p->w[t].t0 : t0;
        t1 = p->w[t].t1 > t1 ? p->w[t].t1 : t1;
    }
    return (int64_t)(t1 - t0);
}

/* ---------------------------------------------------------------- client */

static int client(const struct opts *o)
{
    int rc = 1, nstarted = 0;
    char s1[32], s2[32], s3[32];
    struct tu_client cl = { 0 };
    struct perf *p = calloc(1, sizeof *p);
    if (!p) {
        tu_err("out of memory");
        return 1;
    }
    p->o = o;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->fin, NULL);
    if (tu_client_start(&cl, &o->c, TU_DB_READY | TU_DB_RESULT, NULL))
        goto out;
    struct ntb_dev *ntb = p->ntb = cl.ntb;
    int pidx = cl.pidx;
    const char *peer_host = cl.peer_host;
    uint32_t status = ntb_spad_read(ntb, TU_SPC_STATUS);
    if (status) {
        tu_err("host %s could not expose a buffer: %s", peer_host, strerror((int)status));
        goto out;
    }
    int widx = (int)ntb_spad_read(ntb, SPC_WIDX);
    p->window = (uint64_t)ntb_spad_read(ntb, SPC_SIZE_KB) << 10;
    uint64_t wsize;
    if (ntb_peer_mw_get_addr(ntb, widx, &p->win_bus, &wsize) || p->window > wsize || !p->window) {
        tu_err("the server answered with a bad window (%d, %" PRIu64 " bytes)", widx, p->window);
        goto out;
    }
    p->win = ntb_peer_mw_map(ntb, widx, 1);
    if (!p->win) {
        tu_err("cannot map outbound window %d: %s", widx, strerror(errno));
        goto out;
    }
    p->src = ntb_dma_alloc(ntb, p->window, &p->src_bus);
    uint64_t local_bus;
    if (p->src && o->baseline)
        p->local = ntb_dma_alloc(ntb, p->window, &local_bus);
    if (!p->src || (o->baseline && !p->local)) {
        tu_err("cannot allocate 2 x %s of this host's memory: %s",
               tu_fmt_size(p->window, s1, sizeof s1), strerror(errno));
        goto out;
    }

    /* Threads, and for --dma one channel each (fewer threads if fewer channels are free). */
    p->nthreads = o->threads;
    if (o->dma) {
        int n = 0;
        for (; n < o->threads; n++)
            if (!(p->w[n].ch = ntb_dma_chan_request(ntb)))
                break;
        if (n == 0) {
            tu_err("no DMA channel on %s (%s)%s", ntb_name(ntb), strerror(errno),
                   errno == EBUSY ? ": all are in use" : "");
            goto out;
        }
        if (n < o->threads && !o->c.json)
            fprintf(stderr, "ntb_perf: %d DMA channel%s: using %d thread%s\n", n, n == 1 ? "" : "s",
                    n, n == 1 ? "" : "s");
        p->nthreads = n;
    }
    p->region = (p->window / (uint64_t)p->nthreads) & ~63ull;
    p->chunk = o->chunk;
    if (p->chunk > p->region) {
        p->chunk = p->region;
        if (!o->c.json)
            fprintf(stderr, "ntb_perf: chunk limited to %s (the window's %s shared by %d thread%s)\n",
                    tu_fmt_size(p->chunk, s1, sizeof s1), tu_fmt_size(p->window, s2, sizeof s2),
                    p->nthreads, p->nthreads == 1 ? "" : "s");
    }
    uint64_t nchunks = o->total / p->chunk;
    if (nchunks < (uint64_t)p->nthreads)
        nchunks = (uint64_t)p->nthreads; /* every thread copies at least one chunk */
    uint64_t copied = nchunks * p->chunk;

    for (; nstarted < p->nthreads; nstarted++) {
        p->w[nstarted].p = p;
        p->w[nstarted].id = nstarted;
        if (pthread_create(&p->w[nstarted].thread, NULL, worker_main, &p->w[nstarted])) {
            tu_err("cannot start thread %d", nstarted);
            goto out;
        }
    }

    /* Warm up (page mappings on both sides, the DMA engine), untimed: one pass over the
     * regions. Then measure window and baseline interleaved, keeping the best of each. */
    uint64_t per_region = p->region / p->chunk;
    int64_t ns = run_phase(p, PH_WINDOW, per_region * (uint64_t)p->nthreads);
    if (ns >= 0 && o->baseline)
        ns = run_phase(p, PH_LOCAL, per_region * (uint64_t)p->nthreads);
    uint64_t best_win = UINT64_MAX, best_local = UINT64_MAX;
    uint32_t seed = 0;
    for (int r = 0; r < o->repeats && ns >= 0; r++) {
        seed = tu_nonce(); /* a fresh pattern per run: the check sees the last run's data */
        tu_fill(p->src, p->window, seed);
        ns = run_phase(p, PH_WINDOW, nchunks);
        if (ns < 0)
            break;
        best_win = (uint64_t)ns < best_win ? (uint64_t)ns : best_win;
        if (o->baseline) {
            ns = run_phase(p, PH_LOCAL, nchunks);
            if (ns >= 0)
                best_local = (uint64_t)ns < best_local ? (uint64_t)ns : best_local;
        }
    }
    if (ns < 0) {
        tu_err("copy failed: %s%s", strerror((int)-ns),
               ns == -ENOLINK ? " (the link went down)" : ns == -EFAULT ? " (IOMMU fault: see "
               "'ntb_tool faults')" : "");
        goto out;
    }

    /* The server checks what arrived: every word each thread wrote in the last run. */
    uint64_t min_chunks = nchunks / (uint64_t)p->nthreads;
    uint64_t cover = (min_chunks < per_region ? min_chunks : per_region) * p->chunk;
    ntb_peer_spad_write(ntb, pidx, SP_SEED, seed);
    ntb_peer_spad_write(ntb, pidx, SP_THREADS, (uint32_t)p->nthreads);
    ntb_peer_spad_write(ntb, pidx, SP_REGION, (uint32_t)p->region);
    ntb_peer_spad_write(ntb, pidx, SP_COVER, (uint32_t)cover);
    ntb_spad_write(ntb, TU_SPC_STATUS, UINT32_MAX);
    tu_send_cmd(ntb, pidx, TU_CMD_VERIFY);
    int64_t got = tu_db_wait(&cl.db, TU_DB_RESULT, RESULT_TIMEOUT_MS);
    ntb_db_clear(ntb, TU_DB_RESULT);
    uint32_t bad = ntb_spad_read(ntb, TU_SPC_STATUS);
    bool verified = got > 0 && bad == 0;

    double w_mbps = tu_mbps(copied, best_win), l_mbps = tu_mbps(copied, best_local);
    double ratio = o->baseline && l_mbps > 0 ? w_mbps / l_mbps : 0;
    if (o->c.json) {
        struct json_object *j = tu_json_begin("ntb_perf");
        json_object_object_add(j, "mode", json_object_new_string(o->dma ? "dma" : "cpu"));
        json_object_object_add(j, "adapter", json_object_new_string(ntb_name(ntb)));
        json_object_object_add(j, "peer_host", json_object_new_string(peer_host));
        json_object_object_add(j, "peer_port", json_object_new_int(cl.peer_port));
        json_object_object_add(j, "window_index", json_object_new_int(widx));
        json_object_object_add(j, "window_size", json_object_new_int64((int64_t)p->window));
        json_object_object_add(j, "threads", json_object_new_int(p->nthreads));
        json_object_object_add(j, "chunk", json_object_new_int64((int64_t)p->chunk));
        json_object_object_add(j, "total", json_object_new_int64((int64_t)copied));
        json_object_object_add(j, "repeats", json_object_new_int(o->repeats));
        json_object_object_add(j, "usecs", tu_jdouble((double)best_win / 1e3, 3));
        json_object_object_add(j, "mbps", tu_jdouble(w_mbps, 3));
        json_object_object_add(j, "baseline_usecs", o->baseline ? tu_jdouble((double)best_local / 1e3, 3) : NULL);
        json_object_object_add(j, "baseline_mbps", o->baseline ? tu_jdouble(l_mbps, 3) : NULL);
        json_object_object_add(j, "ratio", o->baseline ? tu_jdouble(ratio, 3) : NULL);
        json_object_object_add(j, "verified", json_object_new_boolean(verified));
        tu_json_print(j);
    } else {
        printf("ntb_perf: %s -> host %s (port %d) through window %d (%s), %s, %d thread%s, "
               "chunk %s, total %s, best of %d\n", ntb_name(ntb), peer_host, cl.peer_port, widx,
               tu_fmt_size(p->window, s1, sizeof s1), o->dma ? "DMA engine" : "CPU memcpy",
               p->nthreads, p->nthreads == 1 ? "" : "s", tu_fmt_size(p->chunk, s2, sizeof s2),
               tu_fmt_size(copied, s3, sizeof s3), o->repeats);
        printf("window:   copied %" PRIu64 " bytes in %" PRIu64 " usecs, %.0f MBytes/s\n", copied,
               best_win / 1000, w_mbps);
        if (o->baseline) {
            printf("local:    copied %" PRIu64 " bytes in %" PRIu64 " usecs, %.0f MBytes/s "
                   "(memcpy into this host's RAM)\n", copied, best_local / 1000, l_mbps);
            printf("ratio window/local: %.2f\n", ratio);
        }
        if (verified)
            printf("verified: host %s's buffer holds the last data written\n", peer_host);
    }
    if (!verified) {
        if (got <= 0)
            tu_err("host %s did not report its check within %d s", peer_host, RESULT_TIMEOUT_MS / 1000);
        else
            tu_err("host %s's buffer does not hold the data written: %" PRIu32 " of %" PRIu64
                   " words differ", peer_host, bad, cover / 8 * (uint64_t)p->nthreads);
        goto out;
    }
    rc = 0;
out:
    if (nstarted) {
        start_phase(p, PH_STOP, nstarted);
        for (int t = 0; t < nstarted; t++)
            pthread_join(p->w[t].thread, NULL);
    }
    for (int t = 0; t < MAX_THREADS; t++)
        ntb_dma_chan_release(p->w[t].ch);
    if (p->win)
        ntb_peer_mw_unmap(cl.ntb, p->win);
    rc = tu_client_finish(&cl, rc); /* closing the adapter frees the DMA buffers */
    free(p);
    return rc;
}

/* ---------------------------------------------------------------- main */

static void help(FILE *out)
{
    fprintf(out,
        "usage: ntblend run --host A -- ntb_perf [options]          (client, on host A)\n"
        "       ntblend run --host B -- ntb_perf --serve [options]  (server, on the peer)\n"
        "\n"
        "Measure NTB window bandwidth from this host to a peer, like Linux's ntb_perf: threads\n"
        "copy chunks from a local buffer into a buffer on the peer through an outbound window,\n"
        "by CPU memcpy (default) or the adapter's DMA engine (--dma), until the total is copied.\n"
        "The client starts the server on the peer itself (ntblend run --host PEER -- ntb_perf\n"
        "--serve) unless --no-spawn; they meet over scratchpads and doorbells only. At the end\n"
        "the server checks that its buffer holds the last data written (exit 1 if not).\n"
        "\n"
        "client options:\n"
        "  -a, --adapter N    adapter index on this host (default 0)\n"
        "  --peer PIDX        peer index (default 0; see 'ntb_tool info')\n"
        "  --port NODE        the peer by port number (node id) instead of --peer\n"
        "  -T, --threads N    copy threads, 1..32 (default 1); each has its own part of the window\n"
        "  -c, --chunk SIZE   bytes per copy (default 512K); at most the window size / threads\n"
        "  -s, --total SIZE   bytes to copy per measurement (default 256M)\n"
        "  -r, --repeat N     measurements of each kind; the best is reported (default 3)\n"
        "  --dma              copy with the DMA engine, one channel per thread\n"
        "  --baseline         also copy into a second, local buffer (CPU memcpy) in the same run,\n"
        "                     interleaved, and report the ratio window/local\n"
        "  --json             one JSON object: mode, threads, chunk, total, usecs, mbps,\n"
        "                     baseline_mbps, ratio, verified, ...\n"
        "  --no-spawn         do not start the server; run 'ntb_perf --serve' on the peer yourself\n"
        "  --timeout S        seconds to wait for the server to answer (default 20)\n"
        "server options:\n"
        "  --serve            expose a window-sized buffer to the client; serve until Ctrl-C\n"
        "  -a N, --peer PIDX, --port NODE   which adapter and client (default adapter 0, peer 0)\n"
        "  --once             exit after one client session\n"
        "\n"
        "Sizes take K, M, G suffixes; numbers may be 0x hex.\n"
        "examples:\n"
        "  ntblend run --host a -- ntb_perf --baseline\n"
        "  ntblend run --host a -- ntb_perf --dma -T 4 -c 1M --baseline --json\n"
        "  ntblend run --host b -- ntb_perf --serve &   ntblend run --host a -- ntb_perf --no-spawn\n"
        "output:\n"
        "  window:   copied 268435456 bytes in 45000 usecs, 5965 MBytes/s\n"
        "  local:    copied 268435456 bytes in 42000 usecs, 6391 MBytes/s (memcpy into this host's RAM)\n"
        "  ratio window/local: 0.93\n");
}

enum { O_DMA = TU_O_TOOL, O_BASE };

static int option(void *ctx, int opt, const char *arg)
{
    struct opts *o = ctx;
    switch (opt) {
    case 'T': return tu_parse_int(arg, 1, MAX_THREADS, &o->threads) != 0;
    case 'c': return tu_parse_size(arg, &o->chunk) || !o->chunk;
    case 's': return tu_parse_size(arg, &o->total) || !o->total;
    case 'r': return tu_parse_int(arg, 1, 1000, &o->repeats) != 0;
    case O_DMA: o->dma = true; return 0;
    case O_BASE: o->baseline = true; return 0;
    default: return 1;
    }
}

int main(int argc, char **argv)
{
    tu_prog = "ntb_perf";
    struct opts o = { .threads = 1, .repeats = 3, .chunk = 512 << 10, .total = 256ull << 20 };
    tu_common_init(&o.c);
    static const struct option lo[] = {
        { "threads", 1, 0, 'T' }, { "chunk", 1, 0, 'c' }, { "total", 1, 0, 's' },
        { "repeat", 1, 0, 'r' }, { "dma", 0, 0, O_DMA }, { "baseline", 0, 0, O_BASE },
        { 0, 0, 0, 0 }
    };
    const struct tu_cmdline cl = { .common = TU_OPTS_NTB, .adapter_max = 1 << 16,
                                   .shortopts = "T:c:s:r:", .options = lo, .option = option,
                                   .ctx = &o, .help = help,
                                   .bad_hint = "; threads 1..32, sizes > 0" };
    int st = tu_getopt(argc, argv, &cl, &o.c);
    if (st >= 0)
        return st;
    return o.c.serve ? serve(&o) : client(&o);
}
