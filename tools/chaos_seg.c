/*
 * chaos_seg: the segment workload of `scripts/chaos.sh`. An owner keeps a segment of
 * checksummed, numbered records; a writer on another host fills it through the NTB in
 * batches, each inside a sequence (seg_seq_*), and counts a batch as acknowledged only when
 * the sequence says nothing was lost. The writer records what it attempted and what was
 * acknowledged in a state file before and after every batch, so a kill at any moment leaves
 * an honest account. Given that account (--state), the owner checks the live segment against
 * it every 10 ms, so a record lost during a fault is caught before later records
 * overwrite its slot; it exits 1 when it found one. At the end the owner dumps the segment and
 * `verify` checks that every acknowledged record is there, intact, and that nothing is there
 * that was never written.
 *
 *   chaos_seg owner  --id ID --dump FILE [--slots N] [--state FILE]
 *   chaos_seg writer --node NODE --id ID --state FILE [--batch N] [--pause-us U]
 *   chaos_seg verify --dump FILE --state FILE
 *
 * owner and writer run until SIGTERM/SIGINT. A writer that loses its path reconnects; one that
 * finds the owner rebooted (a new epoch) starts a new account: records in a crashed host's
 * memory are gone with it, and the writer was told so by its sequence. A writer started again
 * on an existing state file carries on with that account.
 * verify exits 0 when the account holds, 1 on a violation (printed), 2 on bad input.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "ntblend/seg.h"

#define HDR_MAGIC 0x4348414f53534547ull /* "CHAOSSEG" */
#define REC_MAGIC 0x5245434f52443031ull /* "RECORD01" */
#define MAX_ADAPTERS 8
#define CONNECT_TIMEOUT_MS 200

struct header {
    uint64_t magic, epoch, nslots, pad[5];
};

struct record {
    uint64_t magic, seq;
    uint8_t payload[40];
    uint64_t sum;
};
_Static_assert(sizeof(struct record) == 64, "record layout");

/* What the writer reports: the owner's epoch it writes into, the highest sequence number
 * acknowledged (all below it too), and the highest it may have written. */
struct account {
    uint64_t epoch;
    int64_t acked, attempted;
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static uint64_t checksum(const struct record *r)
{
    const uint8_t *p = (const uint8_t *)r;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < offsetof(struct record, sum); i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static void make_record(struct record *r, uint64_t epoch, uint64_t seq)
{
    r->magic = REC_MAGIC;
    r->seq = seq;
    for (size_t i = 0; i < sizeof r->payload; i++)
        r->payload[i] = (uint8_t)(epoch * 31 + seq * 7 + i);
    r->sum = checksum(r);
}

static bool record_ok(const struct record *r, uint64_t epoch)
{
    struct record want;
    make_record(&want, epoch, r->seq);
    return r->magic == REC_MAGIC && !memcmp(r, &want, sizeof want);
}

static int die(const char *what, int rc)
{
    fprintf(stderr, "chaos_seg: %s: %s\n", what, rc < 0 ? seg_strerror(rc) : strerror(errno));
    return 2;
}

/* ---- owner ---- */

static int load(const char *path, struct account *a);

/* The record acknowledged last in a slot, or -1 (none yet), for an account with acked A. */
static int64_t last_acked(int64_t slot, int64_t n, int64_t A)
{
    return A < 0 || slot > A ? -1 : A - ((A - slot) % n);
}

/* May unacknowledged stores (A, T] have hit this slot? */
static bool in_flight(int64_t slot, int64_t n, int64_t A, int64_t T)
{
    return T > A && (T - A >= n || ((slot - (A + 1)) % n + n) % n < T - A);
}

/* Check the live segment against the writer's account, while the writer goes on: every slot
 * must hold a valid record at least as new as the last one acknowledged there. A slot being
 * rewritten may read torn, so a doubtful slot is read again (with a fresh account) before it
 * counts. Returns the number of violations found. */
static uint64_t check_live(volatile uint8_t *mem, const struct header *h, const char *state)
{
    struct account acc;
    if (load(state, &acc) || acc.epoch != h->epoch)
        return 0;
    const volatile struct record *recs = (const volatile struct record *)(mem + sizeof *h);
    int64_t n = (int64_t)h->nslots;
    uint64_t bad = 0;
    for (int64_t slot = 0; slot < n; slot++) {
        for (int attempt = 0;; attempt++) {
            int64_t want = last_acked(slot, n, acc.acked);
            if (want < 0 || in_flight(slot, n, acc.acked, acc.attempted))
                break;
            struct record r;
            memcpy(&r, (const void *)&recs[slot], sizeof r);
            if (record_ok(&r, h->epoch) && (int64_t)r.seq % n == slot && (int64_t)r.seq >= want)
                break;
            if (attempt == 3) {
                if (++bad <= 5)
                    printf("owner: LOST: slot %" PRId64 " should hold record %" PRId64
                           " or newer, holds %s %" PRIu64 "\n", slot, want,
                           record_ok(&r, h->epoch) ? "record" : "damaged", r.seq);
                break;
            }
            usleep(1000);
            if (load(state, &acc) || acc.epoch != h->epoch)
                return bad;
        }
    }
    return bad;
}

static int owner(uint32_t id, const char *dump, uint64_t nslots, const char *state)
{
    seg_desc_t *sd;
    seg_local_t *seg;
    seg_map_t *map;
    int rc = seg_open(&sd);
    if (rc)
        return die("open", rc);
    size_t size = sizeof(struct header) + nslots * sizeof(struct record);
    if ((rc = seg_create(sd, &seg, id, size)))
        return die("create the segment", rc);
    volatile uint8_t *mem = seg_map_local(seg, 0, 0, 0, &map);
    if (!mem)
        return die("map the segment", -errno);
    struct header h = {.magic = HDR_MAGIC, .nslots = nslots};
    if (getrandom(&h.epoch, sizeof h.epoch, 0) != sizeof h.epoch)
        h.epoch = (uint64_t)time(NULL) ^ (uint64_t)getpid() << 32;
    memset((void *)mem, 0, size);
    memcpy((void *)mem, &h, sizeof h);
    int prepared = 0;
    for (int a = 0; a < MAX_ADAPTERS; a++)
        if (seg_prepare(seg, a) == 0 && seg_set_available(seg, a) == 0)
            prepared++;
    if (!prepared)
        return die("make the segment available on any adapter", -ENODEV);
    uint32_t self = 0;
    seg_local_node_id(&self);
    printf("owner: node %u, segment %u, %" PRIu64 " slots, epoch %016" PRIx64 "\n", self, id,
           nslots, h.epoch);
    fflush(stdout);
    uint64_t scans = 0, violations = 0;
    while (!stop) {
        if (!state) {
            pause();
            continue;
        }
        violations += check_live(mem, &h, state);
        scans++;
        /* A writer takes ~100 ms to come round to a slot again: 10 ms catches a loss. */
        usleep(10000);
    }
    if (state)
        printf("owner: %" PRIu64 " live checks, %" PRIu64 " acknowledged records found lost\n",
               scans, violations);
    FILE *out = fopen(dump, "w");
    if (!out || fwrite((const void *)mem, 1, size, out) != size || fclose(out))
        return die(dump, -errno);
    seg_unmap(map);
    seg_remove(seg);
    seg_close(sd);
    return violations ? 1 : 0;
}

/* ---- writer ---- */

static int save(int fd, const struct account *a)
{
    char line[96];
    int n = snprintf(line, sizeof line, "%016" PRIx64 " %" PRId64 " %" PRId64 "\n", a->epoch,
                     a->acked, a->attempted);
    /* One pwrite of a fixed-width line: a kill never leaves half of it. */
    memset(line + n, ' ', sizeof line - 1 - (size_t)n);
    line[sizeof line - 1] = '\n';
    return pwrite(fd, line, sizeof line, 0) == (ssize_t)sizeof line ? 0 : -errno;
}

static int load(const char *path, struct account *a)
{
    FILE *in = fopen(path, "r");
    if (!in)
        return -errno;
    int n = fscanf(in, "%" SCNx64 " %" SCNd64 " %" SCNd64, &a->epoch, &a->acked, &a->attempted);
    fclose(in);
    return n == 3 ? 0 : -EINVAL;
}

struct conn {
    seg_desc_t *sd;
    seg_remote_t *seg;
    seg_map_t *map;
    seg_seq_t *seq;
    volatile uint8_t *mem;
};

static void disconnect(struct conn *c)
{
    if (c->seq)
        seg_seq_remove(c->seq);
    if (c->map)
        seg_unmap(c->map);
    if (c->seg)
        seg_disconnect(c->seg);
    c->seq = NULL;
    c->map = NULL;
    c->seg = NULL;
    c->mem = NULL;
}

/* Connect through whichever adapter reaches the owner; 0 or -errno. */
static int connect_owner(struct conn *c, uint32_t node, uint32_t id, struct header *h)
{
    int rc = -EHOSTUNREACH;
    for (int a = 0; a < MAX_ADAPTERS && !stop; a++) {
        rc = seg_connect(c->sd, &c->seg, node, id, a, CONNECT_TIMEOUT_MS);
        if (rc == 0)
            break;
        if (rc == -ENODEV || rc == -EINVAL)
            break; /* no more adapters */
    }
    if (rc)
        return rc;
    c->mem = seg_map_remote(c->seg, 0, 0, 0, &c->map);
    if (!c->mem || (rc = seg_seq_create(c->map, &c->seq))) {
        rc = c->mem ? rc : -errno;
        disconnect(c);
        return rc;
    }
    memcpy(h, (const void *)c->mem, sizeof *h);
    if (h->magic != HDR_MAGIC || !h->nslots) { /* all ones: the path broke while we read */
        disconnect(c);
        return -EIO;
    }
    return 0;
}

static int writer(uint32_t node, uint32_t id, const char *state, int batch, int pause_us)
{
    /* A restarted writer carries on with its account (if the owner is still the same). */
    struct account acc = {.acked = -1, .attempted = -1};
    if (load(state, &acc))
        acc = (struct account){.acked = -1, .attempted = -1};
    int fd = open(state, O_WRONLY | O_CREAT, 0644);
    if (fd < 0)
        return die(state, -errno);
    struct conn c = {0};
    int rc = seg_open(&c.sd);
    if (rc)
        return die("open", rc);
    save(fd, &acc);
    uint32_t self = 0;
    seg_local_node_id(&self);
    printf("writer: node %u, into segment %u of node %u\n", self, id, node);
    fflush(stdout);
    uint64_t batches = 0, retries = 0, reconnects = 0;
    struct header h = {0};
    while (!stop) {
        if (!c.mem) {
            if (connect_owner(&c, node, id, &h)) {
                usleep(20000);
                continue;
            }
            reconnects++;
            if (h.epoch != acc.epoch) /* a new segment: a new account */
                acc = (struct account){.epoch = h.epoch, .acked = -1, .attempted = -1};
        }
        int64_t first = acc.acked + 1;
        if (first + batch - 1 > acc.attempted)
            acc.attempted = first + batch - 1;
        save(fd, &acc); /* before the stores: a kill mid-batch is accounted for */
        seg_seq_start(c.seq);
        volatile struct record *recs =
            (volatile struct record *)(c.mem + sizeof(struct header));
        for (int k = 0; k < batch; k++) {
            struct record r;
            make_record(&r, acc.epoch, (uint64_t)(first + k));
            memcpy((void *)&recs[(uint64_t)(first + k) % h.nslots], &r, sizeof r);
        }
        switch (seg_seq_check(c.seq)) {
        case SEG_SEQ_OK:
            acc.acked = first + batch - 1;
            save(fd, &acc);
            batches++;
            break;
        case SEG_SEQ_RETRIABLE:
            retries++; /* the same batch again */
            break;
        default:
            disconnect(&c);
            break;
        }
        if (pause_us)
            usleep((useconds_t)pause_us);
    }
    disconnect(&c);
    seg_close(c.sd);
    close(fd);
    printf("writer: epoch %016" PRIx64 ", %" PRIu64 " batches acknowledged (up to record %" PRId64
           "), %" PRIu64 " retried, %" PRIu64 " connections\n", acc.epoch, batches, acc.acked,
           retries, reconnects);
    return 0;
}

/* ---- verify ---- */

static int verify(const char *dump, const char *state)
{
    struct account acc;
    int rc = load(state, &acc);
    if (rc)
        return die(state, rc);
    FILE *in = fopen(dump, "r");
    if (!in)
        return die(dump, -errno);
    struct header h;
    if (fread(&h, sizeof h, 1, in) != 1 || h.magic != HDR_MAGIC || !h.nslots || h.nslots > 1u << 24) {
        fclose(in);
        fprintf(stderr, "chaos_seg: %s is not a segment dump\n", dump);
        return 2;
    }
    struct record *recs = calloc(h.nslots, sizeof *recs);
    if (!recs || fread(recs, sizeof *recs, h.nslots, in) != h.nslots) {
        fclose(in);
        free(recs);
        fprintf(stderr, "chaos_seg: %s is truncated\n", dump);
        return 2;
    }
    fclose(in);
    if (acc.epoch != h.epoch) {
        printf("FAIL: the writer's last account is for epoch %016" PRIx64 ", the segment is "
               "epoch %016" PRIx64 ": the writer never reconnected after the owner restarted\n",
               acc.epoch, h.epoch);
        free(recs);
        return 1;
    }
    int64_t n = (int64_t)h.nslots, A = acc.acked, T = acc.attempted;
    uint64_t lost = 0, corrupt = 0, phantom = 0, checked = 0;
    for (int64_t slot = 0; slot < n; slot++) {
        /* Written but unacknowledged records may have overwritten this slot (fully or not). */
        bool maybe_torn = in_flight(slot, n, A, T);
        int64_t want = last_acked(slot, n, A);
        const struct record *r = &recs[slot];
        bool valid = record_ok(r, h.epoch);
        if (valid && (int64_t)r->seq % n != slot) {
            corrupt++; /* a well-formed record in the wrong place */
            continue;
        }
        if (valid && (int64_t)r->seq > T) {
            phantom++; /* never written by the writer */
            continue;
        }
        if (maybe_torn)
            continue;
        if (want >= 0) {
            checked++;
            if (!valid || (int64_t)r->seq != want) {
                lost++;
                if (lost <= 5)
                    printf("FAIL: slot %" PRId64 ": acknowledged record %" PRId64 " is %s\n", slot,
                           want, valid ? "replaced by an older one" : "missing or damaged");
            }
        } else if (r->magic && !valid) {
            corrupt++;
        }
    }
    free(recs);
    printf("%s: %" PRIu64 " acknowledged records checked (up to %" PRId64 ", %" PRId64
           " in flight), %" PRIu64 " lost, %" PRIu64 " corrupt, %" PRIu64 " never written\n",
           lost || corrupt || phantom ? "FAIL" : "ok", checked, A, T - A, lost, corrupt, phantom);
    return lost || corrupt || phantom ? 1 : 0;
}

static void usage(FILE *to)
{
    fprintf(to,
            "usage: chaos_seg owner  --id ID --dump FILE [--slots N] [--state FILE]\n"
            "       chaos_seg writer --node NODE --id ID --state FILE [--batch N] [--pause-us U]\n"
            "       chaos_seg verify --dump FILE --state FILE\n"
            "The segment workload of scripts/chaos.sh: an owner's segment of numbered, checksummed\n"
            "records, a writer that fills it in batches checked by sequences and accounts for\n"
            "every batch in FILE, and a check of the account against the owner's dump.\n"
            "owner and writer run until SIGTERM; verify exits 0 ok, 1 violation, 2 bad input.\n");
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"id", required_argument, NULL, 'i'},     {"dump", required_argument, NULL, 'd'},
        {"slots", required_argument, NULL, 'n'},  {"node", required_argument, NULL, 'N'},
        {"state", required_argument, NULL, 's'},  {"batch", required_argument, NULL, 'b'},
        {"pause-us", required_argument, NULL, 'p'}, {"help", no_argument, NULL, 'h'},
        {0},
    };
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *mode = argv[1], *dump = NULL, *state = NULL;
    long id = -1, node = -1, slots = 4096, batch = 16, pause_us = 100;
    int ch;
    optind = 2;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        char *end = NULL;
        long v = optarg ? strtol(optarg, &end, 0) : 0;
        bool num_ok = optarg && *optarg && !*end && v >= 0;
        switch (ch) {
        case 'i': id = num_ok ? v : -2; break;
        case 'N': node = num_ok ? v : -2; break;
        case 'n': slots = num_ok && v >= 16 && v <= 1 << 20 ? v : -2; break;
        case 'b': batch = num_ok && v >= 1 && v <= 1024 ? v : -2; break;
        case 'p': pause_us = num_ok && v <= 1000000 ? v : -2; break;
        case 'd': dump = optarg; break;
        case 's': state = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (id == -2 || node == -2 || slots == -2 || batch == -2 || pause_us == -2) {
        fprintf(stderr, "chaos_seg: a number is out of range (ids and nodes >= 0, --slots "
                        "16..1048576, --batch 1..1024, --pause-us 0..1000000)\n");
        return 2;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    if (!strcmp(mode, "owner") && id >= 0 && dump)
        return owner((uint32_t)id, dump, (uint64_t)slots, state);
    if (!strcmp(mode, "writer") && id >= 0 && node >= 0 && state)
        return writer((uint32_t)node, (uint32_t)id, state, (int)batch, (int)pause_us);
    if (!strcmp(mode, "verify") && dump && state)
        return verify(dump, state);
    usage(stderr);
    return 2;
}
