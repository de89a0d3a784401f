/*
 * intr_bench: remote-interrupt round trips with the segment API. This host triggers an
 * interrupt of the peer (seg_intr_trigger), the peer's server (--serve, started with
 * `ntblend run` unless --no-spawn) wakes in seg_intr_wait and triggers one of ours back; both
 * sides sleep, neither spins. With --data every trigger carries the round's counter
 * (seg_intr_trigger_data) and the server echoes it, so a lost or doubled interrupt shows.
 * --baseline also runs a plain futex ping-pong between two processes of this host over a
 * shared-memory word, in the same run, interleaved in blocks, and reports the ratio of the
 * medians. Both pairs get the same CPU placement (--pin), as a wake-up's cost depends on it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "ntbtool.h"

#define TAG 0x1b
#define WAIT_MS TU_LAT_WAIT_MS /* one round trip longer than this is a failure */

struct opts {
    struct tu_common c;
    int cpu;
    enum tu_pin pin;
    uint64_t rounds;
    bool baseline, data;
};

/* ---------------------------------------------------------------- server */

static int serve(const struct opts *o)
{
    if (o->cpu >= 0 && tu_pin(o->cpu)) /* before the library starts its threads */
        tu_err("cannot run on CPU %d (%s); running unpinned", o->cpu, strerror(errno));
    struct su_side s = { .timeout_s = o->c.timeout_s, .quiet = o->c.quiet };
    int rc = su_server_start(&s, o->c.adapter, o->c.node, su_session_of(&o->c, TAG, true));
    if (rc)
        goto out;
    su_server_ready(&s, 0, 0, NULL);
    if (!o->c.quiet) {
        printf("intr_bench: echoing interrupts of host %s; Ctrl-C to stop\n", s.peer_host);
        fflush(stdout);
    }
    uint64_t idle_ns = 0;
    for (;;) {
        uint8_t buf[SEG_INTR_DATA_MAX];
        size_t len = 0;
        rc = o->data ? seg_intr_wait_data(s.intr, buf, sizeof buf, &len, SU_SLICE_MS)
                     : seg_intr_wait(s.intr, SU_SLICE_MS);
        /* DONE comes with a plain trigger, which a data wait does not take: look at the
         * command word on every wake-up and every slice. */
        if (atomic_load(&s.ctl->cmd) == SU_CMD_DONE ||
            seg_remote_state(s.ctl_remote) != SEG_EVENT_AVAILABLE) {
            rc = 0;
            break;
        }
        if (rc == -ETIMEDOUT) {
            idle_ns += SU_SLICE_MS * 1000000ull;
            if (idle_ns > (uint64_t)o->c.timeout_s * 10 * 1000000000ull) {
                tu_err("no word from the client on host %s for %d s; giving up", s.peer_host,
                       o->c.timeout_s * 10);
                break;
            }
            continue;
        }
        if (rc)
            break;
        idle_ns = 0;
        rc = o->data ? seg_intr_trigger_data(s.rintr, buf, len) : seg_intr_trigger(s.rintr);
        if (rc)
            break;
    }
out:
    su_server_finish(&s);
    return rc ? 1 : 0;
}

/* ---------------------------------------------------------------- interrupt rounds */

struct rounds {
    struct su_side *s;
    bool data;
};

/* Rounds [first, first + n): trigger the server's interrupt, sleep until it triggers back. */
static int intr_rounds(void *ctx, uint64_t first, uint64_t n, uint64_t *ns)
{
    struct su_side *s = ((struct rounds *)ctx)->s;
    bool data = ((struct rounds *)ctx)->data;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t count = first + i + 1, echo = 0;
        size_t len = 0;
        uint64_t t0 = tu_now_ns();
        int rc = data ? seg_intr_trigger_data(s->rintr, &count, sizeof count)
                      : seg_intr_trigger(s->rintr);
        if (!rc)
            rc = data ? seg_intr_wait_data(s->intr, &echo, sizeof echo, &len, WAIT_MS)
                      : seg_intr_wait(s->intr, WAIT_MS);
        uint64_t t1 = tu_now_ns();
        if (rc) {
            tu_err("round %" PRIu64 ": %s%s", count, rc == -ETIMEDOUT ? "no interrupt back within "
                   "5 s" : seg_strerror(rc), s->peer_pid > 0 && tu_child_done(s->peer_pid) >= 0
                   ? " (the server exited)" : "");
            return rc;
        }
        if (data && (len != sizeof echo || echo != count)) {
            tu_err("round %" PRIu64 ": the server echoed %" PRIu64 " (%zu bytes)", count, echo, len);
            return -EIO;
        }
        ns[i] = t1 - t0;
    }
    return 0;
}

/* ---------------------------------------------------------------- client */


static int client(const struct opts *o)
{
    struct su_side s = { .timeout_s = o->c.timeout_s, .quiet = o->c.quiet || o->c.json };
    struct tu_lat L;
    int rc = 1;
    char where[80];
    /* Placement and the futex partner first: threads the library starts inherit the one, and
     * the other must be forked before there are any. */
    if (tu_lat_start(&L, o->rounds, o->pin, o->baseline))
        goto out_lat;
    if (su_find_peer(&s, o->c.adapter, o->c.node))
        goto out_lat;
    char cpu[16];
    snprintf(cpu, sizeof cpu, "%d", L.peer_cpu);
    const char *args[4] = { NULL };
    int k = 0;
    if (o->data)
        args[k++] = "--data";
    if (L.peer_cpu >= 0) {
        args[k++] = "--cpu";
        args[k++] = cpu;
    }
    if (su_client_start(&s, su_session_of(&o->c, TAG, o->c.no_spawn), o->c.no_spawn, args))
        goto out;
    struct rounds r = { .s = &s, .data = o->data };
    if (tu_lat_run(&L, intr_rounds, &r))
        goto out;

    if (o->c.json) {
        struct json_object *j = tu_json_begin("intr_bench");
        tu_json_endpoints(j, s.self_node, s.peer_host, s.peer_node, s.adapter);
        json_object_object_add(j, "data", json_object_new_boolean(o->data));
        json_object_object_add(j, "rounds", json_object_new_int64((int64_t)L.n));
        tu_lat_json(j, &L);
        tu_json_print(j);
    } else {
        printf("intr_bench: host %s (node %u) <-> host %s (node %u), %" PRIu64 " round trips "
               "(%s, both sides sleeping; %s)\n", getenv("NTBLEND_HOST"), s.self_node,
               s.peer_host, s.peer_node, L.n,
               o->data ? "data interrupts carrying a counter" : "seg_intr_trigger",
               tu_lat_placement(&L, where, sizeof where));
        tu_lat_print(&L, "interrupt");
        if (o->data)
            printf("counter: every round's value came back from host %s\n", s.peer_host);
    }
    rc = 0;
out:
    rc = su_client_end(&s, rc);
out_lat:
    tu_lat_finish(&L);
    return rc;
}

/* ---------------------------------------------------------------- main */

static void help(FILE *out)
{
    fprintf(out,
        "usage: ntblend run --host A -- intr_bench [options]\n"
        "       ntblend run --host B -- intr_bench --serve --node A_NODE [options]  (by hand)\n"
        "\n"
        "Remote-interrupt round trips with the segment API: this host triggers an interrupt of\n"
        "the peer (seg_intr_trigger), the peer wakes in seg_intr_wait and triggers one of ours\n"
        "back; both sides sleep. Reports min, median, p99 and max over --rounds. The peer side\n"
        "is started automatically (ntblend run --host PEER -- intr_bench --serve ...).\n"
        "\n"
        "options:\n"
        "  -a, --adapter N    adapter index on this host (default: the one facing --node, else 0)\n"
        "  --node NODE        the peer's node id (default: the adapter's first peer)\n"
        "  -n, --rounds N     round trips (default 20000)\n"
        "  --data             data interrupts: each trigger carries the round's counter and the\n"
        "                     server echoes it (checked)\n"
        "  --baseline         also a futex ping-pong between two processes of this host over a\n"
        "                     shared-memory word, interleaved in %d blocks; ratio of the medians\n"
        "  --pin MODE         CPU placement of both pairs (this side / the peer side and the\n"
        "                     futex partner): split (default: two CPUs), same (one CPU), none\n"
        "  --json             one JSON object: min_ns, median_ns, p99_ns, max_ns, mean_ns,\n"
        "                     baseline_*_ns, ratio, ...\n"
        "  --no-spawn         do not start the server; it prints the command to run on the peer\n"
        "  --session ID       session id (default: from the pid; 0x1b000001 with --no-spawn)\n"
        "  --timeout S        seconds to wait for the server (default 20)\n"
        "server options (started automatically):\n"
        "  --serve --node N   serve the client on node N (with --session ID, --data, --cpu C)\n"
        "\n"
        "examples:\n"
        "  ntblend run --host a -- intr_bench --baseline\n"
        "  ntblend run --host a -- intr_bench --data -n 100000 --json\n", TU_LAT_BLOCKS);
}

enum { O_DATA = TU_O_TOOL, O_BASE, O_PIN, O_CPU };

static int option(void *ctx, int opt, const char *arg)
{
    struct opts *o = ctx;
    switch (opt) {
    case 'n': return tu_parse_u64(arg, &o->rounds) || !o->rounds || o->rounds > 100000000;
    case O_DATA: o->data = true; return 0;
    case O_BASE: o->baseline = true; return 0;
    case O_PIN: return tu_parse_pin(arg, &o->pin) != 0;
    case O_CPU: return tu_parse_int(arg, 0, CPU_SETSIZE - 1, &o->cpu) != 0;
    default: return 1;
    }
}

int main(int argc, char **argv)
{
    tu_prog = "intr_bench";
    struct opts o = { .cpu = -1, .pin = TU_PIN_SPLIT, .rounds = 20000 };
    tu_common_init(&o.c);
    static const struct option lo[] = {
        { "rounds", 1, 0, 'n' }, { "data", 0, 0, O_DATA }, { "baseline", 0, 0, O_BASE },
        { "pin", 1, 0, O_PIN }, { "cpu", 1, 0, O_CPU }, { 0, 0, 0, 0 }
    };
    const struct tu_cmdline cl = { .common = TU_OPTS_SEG, .adapter_max = 31, .shortopts = "n:",
                                   .options = lo, .option = option, .ctx = &o, .help = help };
    int st = tu_getopt(argc, argv, &cl, &o.c);
    if (st >= 0)
        return st;
    return o.c.serve ? serve(&o) : client(&o);
}
