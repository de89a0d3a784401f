/*
 * chaos_mcast: the multicast workload of `scripts/chaos.sh`. A sender's DMA engine writes
 * numbered, checksummed 64-byte records into a multicast group, one slot after the other
 * (slot = number % slots); a member on every other host holds a buffer of its RAM subscribed
 * to the group and checks it every 10 ms: each slot is empty or a whole record that belongs
 * there and that the sender may have written (at most the bound in its state file). Whatever
 * the faults, a member never sees a torn, foreign or never-written record; once the fabric is
 * whole, every member sees new records again (its state file tells the last one it saw).
 *
 *   chaos_mcast sender --group NAME --state FILE
 *   chaos_mcast member --group NAME --state FILE --sender-state FILE
 *
 * Both run until SIGTERM/SIGINT (a member leaves the group then). The sender keeps its count
 * in its state file across restarts: it reserves numbers in blocks, writing the bound before
 * it uses them. A member exits 1 after printing "WRONG: ..." when it finds a bad record.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ntblend/ntb.h"
#include "ntblend/seg.h"
#include "ntblend/smartio_mcast.h"

#define MAGIC 0x4d43415354524543ull /* "MCASTREC" */
#define BLOCK 1000                  /* numbers reserved at a time */

struct record {
    uint64_t magic, seq, sum, pad[5];
};
_Static_assert(sizeof(struct record) == 64, "record layout");

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

static uint64_t sum_of(uint64_t seq) { return (seq ^ MAGIC) * 0x9e3779b97f4a7c15ull + 1; }

static void nap_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* "NAME VALUE" in a state file, written whole (rename). */
static void state_put(const char *path, const char *name, uint64_t v)
{
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return;
    fprintf(f, "chaos_mcast %s %" PRIu64 "\n", name, v);
    if (fclose(f) == 0)
        rename(tmp, path);
}

static uint64_t state_get(const char *path, const char *name)
{
    FILE *f = fopen(path, "r");
    uint64_t v = 0;
    char want[64], got[64];
    snprintf(want, sizeof want, "%s", name);
    if (f) {
        if (fscanf(f, "chaos_mcast %63s %" SCNu64, got, &v) != 2 || strcmp(got, want))
            v = 0;
        fclose(f);
    }
    return v;
}

static int sender(const char *group, const char *state)
{
    uint64_t seq = state_get(state, "bound"), bound = seq;
    struct ntb_dev *ntb = ntb_open(0);
    uint64_t src = 0;
    struct record *rec = ntb ? ntb_dma_alloc(ntb, 4096, &src) : NULL;
    struct ntb_dma_chan *ch = ntb ? ntb_dma_chan_request(ntb) : NULL;
    if (!rec || !ch) {
        fprintf(stderr, "chaos_mcast sender: no DMA engine: %s\n", strerror(errno));
        return 1;
    }
    sio_mcast_map_t *map = NULL;
    uint64_t bus = 0, slots = 0;
    while (!stop) {
        if (!map) { /* (again) after a failure: the group may have no members for a while */
            struct sio_mcast_info info;
            int g = sio_mcast_find(group);
            if (g < 0 || sio_mcast_info((uint32_t)g, &info) ||
                sio_mcast_map((uint32_t)g, 0, info.size, &bus, &map)) {
                map = NULL;
                nap_ms(50);
                continue;
            }
            slots = info.size / sizeof *rec;
        }
        if (seq >= bound) {
            bound = seq + BLOCK;
            state_put(state, "bound", bound);
        }
        *rec = (struct record){ .magic = MAGIC, .seq = seq, .sum = sum_of(seq) };
        int64_t c = ntb_dma_submit(ch, bus + (seq % slots) * sizeof *rec, src, sizeof *rec, true);
        int rc = c < 0 ? (int)c : ntb_dma_wait(ch, c, 2000);
        seq++; /* attempted: it may have landed somewhere */
        if (rc) {
            /* A link down (-ENOLINK) or the mapping gone: map again after a pause. */
            sio_mcast_unmap(map);
            map = NULL;
            nap_ms(20);
            continue;
        }
        usleep(200);
    }
    if (map)
        sio_mcast_unmap(map);
    return 0;
}

static int member(const char *group, const char *state, const char *sender_state)
{
    int g;
    struct sio_mcast_info info;
    uint32_t node;
    while ((g = sio_mcast_find(group)) < 0 || sio_mcast_info((uint32_t)g, &info)) {
        if (stop)
            return 0;
        nap_ms(50);
    }
    volatile struct record *buf = sio_ram_alloc(info.size);
    uint64_t bus;
    if (!buf || sio_ram_addr((void *)buf, info.size, &bus) || seg_local_node_id(&node)) {
        fprintf(stderr, "chaos_mcast member: no buffer: %s\n", strerror(errno));
        return 1;
    }
    int rc = sio_mcast_join((uint32_t)g, node, bus, 0);
    if (rc) {
        fprintf(stderr, "chaos_mcast member: cannot join %s: %s\n", group, strerror(-rc));
        return 1;
    }
    uint64_t slots = info.size / sizeof *buf, seen = 0;
    bool any = false;
    while (!stop) {
        uint64_t bound = state_get(sender_state, "bound");
        for (uint64_t i = 0; i < slots; i++) {
            struct record r = buf[i];
            bool empty = !r.magic && !r.seq && !r.sum;
            bool good = r.magic == MAGIC && r.sum == sum_of(r.seq) && r.seq % slots == i &&
                        r.seq < bound;
            if (!empty && !good) {
                nap_ms(1); /* a copy landing right now: look again */
                r = buf[i];
                bound = state_get(sender_state, "bound");
                empty = !r.magic && !r.seq && !r.sum;
                good = r.magic == MAGIC && r.sum == sum_of(r.seq) && r.seq % slots == i &&
                       r.seq < bound;
            }
            if (!empty && !good) {
                printf("WRONG: slot %" PRIu64 ": magic %016" PRIx64 " seq %" PRIu64 " sum %016"
                       PRIx64 " (sender's bound %" PRIu64 ")\n", i, r.magic, r.seq, r.sum, bound);
                fflush(stdout);
                return 1;
            }
            if (!empty && (!any || r.seq > seen)) {
                seen = r.seq;
                any = true;
            }
        }
        if (any)
            state_put(state, "seen", seen + 1);
        nap_ms(10);
    }
    sio_mcast_leave((uint32_t)g, node);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option longs[] = {
        { "group", required_argument, NULL, 'g' }, { "state", required_argument, NULL, 's' },
        { "sender-state", required_argument, NULL, 'S' }, { "help", no_argument, NULL, 'h' },
        { 0 },
    };
    const char *group = NULL, *state = NULL, *sstate = NULL;
    int ch;
    while ((ch = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
        switch (ch) {
        case 'g': group = optarg; break;
        case 's': state = optarg; break;
        case 'S': sstate = optarg; break;
        case 'h':
            printf("usage: chaos_mcast sender --group NAME --state FILE\n"
                   "       chaos_mcast member --group NAME --state FILE --sender-state FILE\n");
            return 0;
        default: return 2;
        }
    }
    const char *role = optind < argc ? argv[optind] : "";
    bool send = strcmp(role, "sender") == 0, recv = strcmp(role, "member") == 0;
    if ((!send && !recv) || !group || !state || (recv && !sstate)) {
        fprintf(stderr, "chaos_mcast: sender --group NAME --state FILE, or member --group NAME "
                        "--state FILE --sender-state FILE (see --help)\n");
        return 2;
    }
    struct sigaction sa = { .sa_handler = on_signal };
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    return send ? sender(group, state) : member(group, state, sstate);
}
