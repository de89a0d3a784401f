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
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>

#include "toolutil.h"

#define WAIT_MS 5000       /* one round trip longer than this is a failure */
#define BLOCKS 4           /* doorbell and futex rounds alternate in this many blocks */

enum { SP_COUNT = TU_SP_ARG0 };   /* server's scratchpad: the client's counter */
enum { SPC_COUNT = TU_SPC_ARG0 }; /* client's scratchpad: the echo */

enum pin { PIN_SPLIT, PIN_SAME, PIN_NONE };
static const char *pin_name[] = { "split", "same", "none" };

struct opts {
    int adapter, pidx, port, timeout_s, cpu;
    enum pin pin;
    uint64_t rounds;
    bool json, baseline, no_spawn, serve, once, quiet;
};

/* ---------------------------------------------------------------- CPU placement */

/*
 * A round trip here is two futex wake-ups, and what one costs depends on where the two
 * processes run: on this kind of machine a wake-up on another CPU can cost ten times one on
 * the same CPU. The scheduler places the doorbell pair and the futex pair differently from
 * run to run, which would make the ratio meaningless, so by default both pairs get the same
 * placement: this side on one CPU, the peer side (server and futex partner) on another.
 * pick_cpus gives the CPUs for this side and the peer side, or -1/-1 when not pinning.
 */
static void pick_cpus(enum pin pin, int *self, int *peer)
{
    cpu_set_t set;
    *self = *peer = -1;
    if (pin == PIN_NONE || sched_getaffinity(0, sizeof set, &set))
        return;
    int first = -1, second = -1;
    for (int c = 0; c < CPU_SETSIZE && second < 0; c++)
        if (CPU_ISSET(c, &set)) {
            if (first < 0)
                first = c;
            else
                second = c;
        }
    if (first < 0 || (pin == PIN_SPLIT && second < 0))
        return; /* one CPU only: nothing to choose */
    *self = first;
    *peer = pin == PIN_SPLIT ? second : first;
}

/* ---------------------------------------------------------------- server */

static int serve(const struct opts *o)
{
    int pidx = o->pidx, rc = 1;
    if (o->cpu >= 0 && tu_pin(o->cpu)) /* before the library starts its thread */
        tu_err("cannot run on CPU %d (%s); running unpinned", o->cpu, strerror(errno));
    struct ntb_dev *ntb = o->port >= 0 ? tu_open_for_port(o->adapter, o->port, &pidx)
                                       : tu_open(o->adapter < 0 ? 0 : o->adapter);
    if (!ntb)
        return 1;
    struct tu_db db = { .ntb = ntb };
    if (tu_check_peer(ntb, pidx) || tu_check_hw(ntb, pidx))
        goto out;
    ntb_db_clear(ntb, TU_DB_HELLO | TU_DB_CMD | TU_DB_PING);
    ntb_spad_write(ntb, TU_SP_CMD, TU_CMD_NONE);
    if (!o->quiet) {
        printf("ntb_pingpong: serving peer %d (port %d) on %s; Ctrl-C to stop\n", pidx,
               ntb_peer_port_number(ntb, pidx), ntb_name(ntb));
        fflush(stdout);
    }
    int idle_ms = o->once ? o->timeout_s * 1000 * 10 : -1;
    for (;;) {
        int64_t bits = tu_db_wait(&db, TU_DB_HELLO | TU_DB_CMD | TU_DB_PING, idle_ms);
        if (bits < 0) {
            tu_err("waiting for doorbells: %s", strerror((int)-bits));
            goto out;
        }
        if (bits == 0) {
            tu_err("no word from the client for %d s; giving up", idle_ms / 1000);
            goto out;
        }
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
            if (cmd == TU_CMD_DONE && o->once) {
                rc = 0;
                goto out;
            }
        }
    }
out:
    tu_db_restore(&db);
    ntb_close(ntb);
    return rc;
}

/* ---------------------------------------------------------------- the doorbell rounds */

static int db_rounds(struct ntb_dev *ntb, struct tu_db *db, int pidx, uint64_t first, uint64_t n,
                     uint64_t *ns)
{
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
    int rc = 1, pidx = o->pidx;
    pid_t peer_pid = -1, partner = -1;
    bool session = false;
    char peer_host[64] = "?";
    _Atomic uint32_t *word = NULL;
    uint64_t n = o->rounds;
    uint64_t *db_ns = calloc(n, sizeof *db_ns), *fx_ns = calloc(n, sizeof *fx_ns);
    if (!db_ns || !fx_ns) {
        tu_err("out of memory for %" PRIu64 " rounds", n);
        free(db_ns);
        free(fx_ns);
        return 1;
    }
    int self_cpu, peer_cpu;
    pick_cpus(o->pin, &self_cpu, &peer_cpu);
    if (self_cpu >= 0 && tu_pin(self_cpu)) {
        tu_err("cannot run on CPU %d (%s); use --pin none", self_cpu, strerror(errno));
        free(db_ns);
        free(fx_ns);
        return 1;
    }
    /* The futex partner first, before the library starts threads in this process. */
    if (o->baseline && (partner = tu_futex_partner_start(&word, peer_cpu)) < 0) {
        free(db_ns);
        free(fx_ns);
        return 1;
    }
    struct ntb_dev *ntb = o->port >= 0 ? tu_open_for_port(o->adapter, o->port, &pidx)
                                       : tu_open(o->adapter < 0 ? 0 : o->adapter);
    if (!ntb)
        goto out_partner;
    struct tu_db db = { .ntb = ntb };
    if (tu_check_peer(ntb, pidx) || tu_check_hw(ntb, pidx))
        goto out;
    int peer_port = ntb_peer_port_number(ntb, pidx);
    tu_host_name(peer_port, peer_host, sizeof peer_host);
    if (tu_wait_link(ntb, pidx, 5000)) {
        tu_err("the link to peer %d (host %s) is down; bring it up ('ntblend link up ...')", pidx,
               peer_host);
        goto out;
    }
    ntb_db_clear(ntb, TU_DB_READY | TU_DB_RESULT | TU_DB_PONG);
    ntb_spad_write(ntb, TU_SPC_NONCE, 0);
    if (!o->no_spawn) {
        char port[16], timeout[16], cpu[16];
        snprintf(port, sizeof port, "%d", ntb_port_number(ntb));
        snprintf(timeout, sizeof timeout, "%d", o->timeout_s);
        snprintf(cpu, sizeof cpu, "%d", peer_cpu);
        const char *args[] = { "--serve", "--port", port, "--once", "--quiet", "--timeout",
                               timeout, peer_cpu >= 0 ? "--cpu" : NULL, cpu, NULL };
        peer_pid = tu_spawn_peer(peer_host, args);
        if (peer_pid < 0)
            goto out;
    }
    int hrc = tu_hello(ntb, &db, pidx, tu_nonce(), peer_pid, o->timeout_s * 1000);
    if (hrc) {
        if (hrc == -ETIMEDOUT)
            tu_err("no answer from host %s within %d s%s", peer_host, o->timeout_s,
                   o->no_spawn ? ": start 'ntb_pingpong --serve' there first "
                                 "(ntblend run --host B -- ntb_pingpong --serve)" : "");
        goto out;
    }
    session = true;

    /* A few untimed rounds wake everything up (page faults, the server's first wait). */
    uint64_t warm[16];
    if (db_rounds(ntb, &db, pidx, 0, 16, warm) || (o->baseline && tu_futex_rounds(word, 0, 16, warm, WAIT_MS)))
        goto out;
    int blocks = o->baseline ? BLOCKS : 1;
    for (int b = 0; b < blocks; b++) {
        uint64_t first = n * (uint64_t)b / (uint64_t)blocks;
        uint64_t cnt = n * (uint64_t)(b + 1) / (uint64_t)blocks - first;
        if (db_rounds(ntb, &db, pidx, 16 + first, cnt, db_ns + first))
            goto out;
        if (o->baseline && tu_futex_rounds(word, 16 + first, cnt, fx_ns + first, WAIT_MS))
            goto out;
    }

    struct tu_stats d = tu_summarize(db_ns, n), f = { 0 };
    if (o->baseline)
        f = tu_summarize(fx_ns, n);
    double ratio = o->baseline && f.median ? (double)d.median / (double)f.median : 0;
    if (o->json) {
        struct json_object *j = json_object_new_object();
        json_object_object_add(j, "tool", json_object_new_string("ntb_pingpong"));
        json_object_object_add(j, "adapter", json_object_new_string(ntb_name(ntb)));
        json_object_object_add(j, "peer_host", json_object_new_string(peer_host));
        json_object_object_add(j, "peer_port", json_object_new_int(peer_port));
        json_object_object_add(j, "rounds", json_object_new_int64((int64_t)n));
        json_object_object_add(j, "pin", json_object_new_string(self_cpu >= 0 ? pin_name[o->pin] : "none"));
        json_object_object_add(j, "cpu", self_cpu >= 0 ? json_object_new_int(self_cpu) : NULL);
        json_object_object_add(j, "peer_cpu", self_cpu >= 0 ? json_object_new_int(peer_cpu) : NULL);
        tu_jstats(j, "", &d);
        if (o->baseline) {
            tu_jstats(j, "baseline_", &f);
            char s[32];
            snprintf(s, sizeof s, "%.3f", ratio);
            json_object_object_add(j, "ratio", json_object_new_double_s(ratio, s));
        } else {
            json_object_object_add(j, "baseline_median_ns", NULL);
            json_object_object_add(j, "ratio", NULL);
        }
        json_object_object_add(j, "verified", json_object_new_boolean(1));
        printf("%s\n", json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN));
        json_object_put(j);
    } else {
        char where[64] = "unpinned";
        if (self_cpu >= 0)
            snprintf(where, sizeof where, "this side on CPU %d, the peer side on CPU %d", self_cpu,
                     peer_cpu);
        printf("ntb_pingpong: %s <-> host %s (port %d), %" PRIu64 " round trips "
               "(scratchpad counter + doorbell, both sides sleeping; %s)\n", ntb_name(ntb),
               peer_host, peer_port, n, where);
        printf("doorbell: min %" PRIu64 " ns, median %" PRIu64 " ns, p99 %" PRIu64 " ns, max %"
               PRIu64 " ns\n", d.min, d.median, d.p99, d.max);
        if (o->baseline) {
            printf("futex:    min %" PRIu64 " ns, median %" PRIu64 " ns, p99 %" PRIu64 " ns, max %"
                   PRIu64 " ns (two processes, a shared-memory word)\n", f.min, f.median, f.p99,
                   f.max);
            printf("ratio doorbell/futex (median): %.2f\n", ratio);
        }
        printf("counter: every round's value came back from host %s\n", peer_host);
    }
    rc = 0;
out:
    if (session)
        tu_send_cmd(ntb, pidx, TU_CMD_DONE);
    if (peer_pid > 0) {
        int st = tu_reap_peer(peer_pid, session ? 5000 : 0);
        if (session && st != 0 && rc == 0) {
            tu_err("the peer side exited with status %d", st);
            rc = 1;
        }
    }
    tu_db_restore(&db);
    ntb_close(ntb);
out_partner:
    if (partner > 0) {
        atomic_store(word, TU_FUTEX_STOP);
        tu_futex_wake(word);
        tu_reap_peer(partner, 2000);
        munmap((void *)word, 4096);
    }
    free(db_ns);
    free(fx_ns);
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

int main(int argc, char **argv)
{
    tu_prog = "ntb_pingpong";
    struct opts o = { .adapter = -1, .pidx = 0, .port = -1, .timeout_s = 20, .cpu = -1,
                      .pin = PIN_SPLIT, .rounds = 20000 };
    enum { O_PEER = 256, O_PORT, O_JSON, O_BASE, O_NOSPAWN, O_SERVE, O_ONCE, O_QUIET, O_TIMEOUT,
           O_PIN, O_CPU };
    static const struct option lo[] = {
        { "adapter", 1, 0, 'a' }, { "peer", 1, 0, O_PEER },   { "port", 1, 0, O_PORT },
        { "rounds", 1, 0, 'n' },  { "json", 0, 0, O_JSON },   { "baseline", 0, 0, O_BASE },
        { "no-spawn", 0, 0, O_NOSPAWN }, { "serve", 0, 0, O_SERVE }, { "once", 0, 0, O_ONCE },
        { "quiet", 0, 0, O_QUIET }, { "timeout", 1, 0, O_TIMEOUT }, { "pin", 1, 0, O_PIN },
        { "cpu", 1, 0, O_CPU },     { "help", 0, 0, 'h' },
        { 0, 0, 0, 0 }
    };
    int c;
    while ((c = getopt_long(argc, argv, "a:n:h", lo, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'a': bad = tu_parse_int(optarg, 0, 1 << 16, &o.adapter); break;
        case O_PEER: bad = tu_parse_int(optarg, 0, 1 << 16, &o.pidx); break;
        case O_PORT: bad = tu_parse_int(optarg, 0, INT32_MAX, &o.port); break;
        case 'n': bad = tu_parse_u64(optarg, &o.rounds) || !o.rounds || o.rounds > 100000000; break;
        case O_JSON: o.json = true; break;
        case O_BASE: o.baseline = true; break;
        case O_NOSPAWN: o.no_spawn = true; break;
        case O_SERVE: o.serve = true; break;
        case O_ONCE: o.once = true; break;
        case O_QUIET: o.quiet = true; break;
        case O_TIMEOUT: bad = tu_parse_int(optarg, 1, 3600, &o.timeout_s); break;
        case O_CPU: bad = tu_parse_int(optarg, 0, CPU_SETSIZE - 1, &o.cpu); break;
        case O_PIN:
            bad = 1;
            for (int i = 0; i < 3; i++)
                if (!strcmp(optarg, pin_name[i])) {
                    o.pin = (enum pin)i;
                    bad = 0;
                }
            break;
        case 'h': help(stdout); return 0;
        default: fprintf(stderr, "ntb_pingpong: see 'ntb_pingpong --help'\n"); return 2;
        }
        if (bad) {
            tu_err("bad value '%s' for %s (see 'ntb_pingpong --help'; rounds 1..100000000, "
                   "--pin split|same|none)", optarg,
                   argv[optind - 1][0] == '-' ? argv[optind - 1] : argv[optind - 2]);
            return 2;
        }
    }
    if (optind < argc) {
        tu_err("unexpected argument '%s' (see 'ntb_pingpong --help')", argv[optind]);
        return 2;
    }
    return o.serve ? serve(&o) : client(&o);
}
