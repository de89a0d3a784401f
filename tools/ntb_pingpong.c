/*
 * ntb_pingpong: doorbell round trips between this host and a peer, like Linux's ntb_pingpong:
 * each round writes a counter into the peer's scratchpad and rings its doorbell; the peer
 * (--serve, started with `ntblend run` unless --no-spawn) echoes the counter into ours and
 * rings back. Both sides sleep in ntb_db_event_wait (a futex), never spin. --baseline runs a
 * plain futex ping-pong between two processes over a shared-memory word in the same run,
 * interleaved in blocks, and reports the ratio of the medians.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "ntbtool.h"

#define WAIT_MS TU_LAT_WAIT_MS /* one round trip longer than this is a failure */

enum { SP_COUNT = TU_SP_ARG0 };   /* server's scratchpad: the client's counter */
enum { SPC_COUNT = TU_SPC_ARG0 }; /* client's scratchpad: the echo */

struct opts {
    struct tu_common c;
    int cpu;
    enum tu_pin pin;
    uint64_t rounds;
    bool baseline;
};

/* ---------------------------------------------------------------- server */

static int serve(const struct opts *o)
{
    int rc = 1;
    if (o->cpu >= 0 && tu_pin(o->cpu)) /* before the library starts its thread */
        tu_err("cannot run on CPU %d (%s); running unpinned", o->cpu, strerror(errno));
    struct tu_server sv = { 0 };
    if (tu_server_start(&sv, &o->c, TU_DB_HELLO | TU_DB_CMD | TU_DB_PING))
        goto out;
    struct ntb_dev *ntb = sv.ntb;
    int pidx = sv.pidx;
    for (;;) {
        uint64_t bits = tu_server_wait(&sv, TU_DB_HELLO | TU_DB_CMD | TU_DB_PING);
        if (!bits)
            goto out;
        if (bits & TU_DB_PING) {
            /* Clear before answering, so the next ping (after our pong) is never lost. */
            ntb_db_clear(ntb, TU_DB_PING);
            ntb_peer_spad_write(ntb, pidx, SPC_COUNT, ntb_spad_read(ntb, SP_COUNT));
            ntb_peer_db_set(ntb, pidx, TU_DB_PONG);
        }
        if (bits & TU_DB_HELLO) {
            ntb_db_clear(ntb, TU_DB_HELLO);
            tu_answer(ntb, pidx, ntb_spad_read(ntb, TU_SP_NONCE), 0);
        }
        if (bits & TU_DB_CMD) {
            ntb_db_clear(ntb, TU_DB_CMD);
            uint32_t cmd = ntb_spad_read(ntb, TU_SP_CMD);
            ntb_spad_write(ntb, TU_SP_CMD, TU_CMD_NONE);
            if (cmd == TU_CMD_DONE && o->c.once) {
                rc = 0;
                goto out;
            }
        }
    }
out:
    tu_server_finish(&sv);
    return rc;
}

/* ---------------------------------------------------------------- the doorbell rounds */

/* Rounds [first, first + n): write the counter into the server's scratchpad, ring, sleep until
 * it rings back with the counter in ours. */
static int db_rounds(void *ctx, uint64_t first, uint64_t n, uint64_t *ns)
{
    struct tu_client *cl = ctx;
    struct ntb_dev *ntb = cl->ntb;
    struct tu_db *db = &cl->db;
    int pidx = cl->pidx;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t count = (uint32_t)(first + i + 1);
        uint64_t t0 = tu_now_ns();
        ntb_peer_spad_write(ntb, pidx, SP_COUNT, count);
        ntb_peer_db_set(ntb, pidx, TU_DB_PING);
        int64_t bits = tu_db_wait(db, TU_DB_PONG, WAIT_MS);
        uint64_t t1 = tu_now_ns();
        if (bits <= 0) {
            tu_err("round %" PRIu32 ": no doorbell back within %d ms%s", count, WAIT_MS,
                   ntb_link_is_up(ntb, NULL, NULL) & (1ull << pidx) ? "" : " (the link is down)");
            return bits < 0 ? (int)bits : -ETIMEDOUT;
        }
        ntb_db_clear(ntb, TU_DB_PONG);
        uint32_t echo = ntb_spad_read(ntb, SPC_COUNT);
        if (echo != count) {
            tu_err("round %" PRIu32 ": the peer echoed counter %" PRIu32, count, echo);
            return -EIO;
        }
        ns[i] = t1 - t0;
    }
    return 0;
}

/* ---------------------------------------------------------------- client */


static int client(const struct opts *o)
{
    int rc = 1;
    struct tu_lat L;
    struct tu_client cl = { 0 };
    char where[64];
    /* Placement and the futex partner first, before the library starts threads here. */
    if (tu_lat_start(&L, o->rounds, o->pin, o->baseline))
        goto out;
    char cpu[16];
    snprintf(cpu, sizeof cpu, "%d", L.peer_cpu);
    const char *args[] = { L.peer_cpu >= 0 ? "--cpu" : NULL, cpu, NULL };
    if (tu_client_start(&cl, &o->c, TU_DB_READY | TU_DB_RESULT | TU_DB_PONG, args))
        goto out;
    if (tu_lat_run(&L, db_rounds, &cl))
        goto out;

    if (o->c.json) {
        struct json_object *j = tu_json_begin("ntb_pingpong");
        json_object_object_add(j, "adapter", json_object_new_string(ntb_name(cl.ntb)));
        json_object_object_add(j, "peer_host", json_object_new_string(cl.peer_host));
        json_object_object_add(j, "peer_port", json_object_new_int(cl.peer_port));
        json_object_object_add(j, "rounds", json_object_new_int64((int64_t)L.n));
        tu_lat_json(j, &L);
        tu_json_print(j);
    } else {
        printf("ntb_pingpong: %s <-> host %s (port %d), %" PRIu64 " round trips "
               "(scratchpad counter + doorbell, both sides sleeping; %s)\n", ntb_name(cl.ntb),
               cl.peer_host, cl.peer_port, L.n, tu_lat_placement(&L, where, sizeof where));
        tu_lat_print(&L, "doorbell");
        printf("counter: every round's value came back from host %s\n", cl.peer_host);
    }
    rc = 0;
out:
    rc = tu_client_finish(&cl, rc);
    tu_lat_finish(&L);
    return rc;
}

/* ---------------------------------------------------------------- main */

static void help(FILE *out)
{
    fprintf(out,
        "usage: ntblend run --host A -- ntb_pingpong [options]          (client, on host A)\n"
        "       ntblend run --host B -- ntb_pingpong --serve [options]  (server, on the peer)\n"
        "\n"
        "Doorbell round trips between this host and a peer, like Linux's ntb_pingpong: each round\n"
        "writes a counter into the peer's scratchpad and rings its doorbell; the peer echoes the\n"
        "counter into ours and rings back. Both sides sleep while waiting. Reports min, median,\n"
        "p99 and max round-trip time. The client starts the server on the peer itself unless\n"
        "--no-spawn.\n"
        "\n"
        "client options:\n"
        "  -a, --adapter N    adapter index on this host (default 0)\n"
        "  --peer PIDX        peer index (default 0; see 'ntb_tool info')\n"
        "  --port NODE        the peer by port number (node id) instead of --peer\n"
        "  -n, --rounds N     round trips (default 20000)\n"
        "  --baseline         also a futex ping-pong between two processes over a shared-memory\n"
        "                     word (same rounds, interleaved), and the ratio of the medians\n"
        "  --json             one JSON object: rounds, min_ns, median_ns, p99_ns, max_ns,\n"
        "                     baseline_median_ns, ratio, ...\n"
        "  --pin MODE         CPU placement of this side and the peer side (the server and the\n"
        "                     futex partner alike): split (default: two CPUs), same (one CPU),\n"
        "                     none (let the scheduler choose; results then vary run to run)\n"
        "  --no-spawn         do not start the server; run 'ntb_pingpong --serve' on the peer\n"
        "  --timeout S        seconds to wait for the server to answer (default 20)\n"
        "server options:\n"
        "  --serve            answer pings until Ctrl-C; --once: exit after one client\n"
        "  --cpu N            run on CPU N\n"
        "  -a N, --peer PIDX, --port NODE   which adapter and client\n"
        "\n"
        "examples:\n"
        "  ntblend run --host a -- ntb_pingpong --baseline\n"
        "  ntblend run --host a -- ntb_pingpong -n 200 --json\n"
        "output:\n"
        "  doorbell: min 9000 ns, median 14000 ns, p99 40000 ns, max 200000 ns\n"
        "  futex:    min 7000 ns, median 11000 ns, p99 30000 ns, max 150000 ns (...)\n"
        "  ratio doorbell/futex (median): 1.27\n");
}

enum { O_BASE = TU_O_TOOL, O_PIN, O_CPU };

static int option(void *ctx, int opt, const char *arg)
{
    struct opts *o = ctx;
    switch (opt) {
    case 'n': return tu_parse_u64(arg, &o->rounds) || !o->rounds || o->rounds > 100000000;
    case O_BASE: o->baseline = true; return 0;
    case O_CPU: return tu_parse_int(arg, 0, CPU_SETSIZE - 1, &o->cpu) != 0;
    case O_PIN: return tu_parse_pin(arg, &o->pin) != 0;
    default: return 1;
    }
}

int main(int argc, char **argv)
{
    tu_prog = "ntb_pingpong";
    struct opts o = { .cpu = -1, .pin = TU_PIN_SPLIT, .rounds = 20000 };
    tu_common_init(&o.c);
    static const struct option lo[] = {
        { "rounds", 1, 0, 'n' }, { "baseline", 0, 0, O_BASE }, { "pin", 1, 0, O_PIN },
        { "cpu", 1, 0, O_CPU }, { 0, 0, 0, 0 }
    };
    const struct tu_cmdline cl = { .common = TU_OPTS_NTB, .adapter_max = 1 << 16,
                                   .shortopts = "n:", .options = lo, .option = option, .ctx = &o,
                                   .help = help,
                                   .bad_hint = "; rounds 1..100000000, --pin split|same|none" };
    int st = tu_getopt(argc, argv, &cl, &o.c);
    if (st >= 0)
        return st;
    return o.c.serve ? serve(&o) : client(&o);
}
