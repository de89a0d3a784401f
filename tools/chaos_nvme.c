/*
 * chaos_nvme: the NVMe workload of `scripts/chaos.sh`. A client of the device's manager
 * (libntbnvme, NVME_OPEN_CLIENT) writes blocks of its own LBA range, each carrying its LBA, a
 * generation and a checksum, and keeps an honest account of them in a state file: before a
 * batch it records each block's new generation as attempted, after the batch's writes and a
 * Flush have all succeeded it records them as acknowledged — one pwrite of a fixed-width
 * record per block, so a SIGKILL at any moment leaves an account that is true. After every
 * acknowledged batch it reads the blocks back: they must hold exactly what was acknowledged;
 * and before it overwrites blocks it reads them: they must still hold what the account allows
 * (below), so a lost write is caught before the next round hides it.
 * Any failure (-EIO when the path or controller is gone, -ETIMEDOUT, -ENOTCONN when the
 * manager is gone, ...) closes the device and opens it again with backoff; nothing that
 * failed is ever counted as acknowledged. Every 200 ms the client asks its manager something
 * (Get Features), so it notices a dead manager even while its own queue pair still works.
 *
 *   chaos_nvme client --dev NAME --state FILE --first LBA --count N [--batch B] [--pause-us U]
 *   chaos_nvme verify --state FILE (--dev NAME | --file NAMESPACE_IMAGE)
 *
 * Generations are per block, 1, 2, 3, ...; a block's record says the last generation
 * acknowledged (A) and the last attempted (T >= A). What a block may hold, afterwards:
 *   T == A      exactly generation A (A == 0: never written, all zeroes);
 *   T > A       a write of A+1..T failed (or the writer was killed) and may or may not have
 *               landed: generation A (zeroes when A == 0) or any of A+1..T, intact.
 * Anything else — an older generation, a record of another LBA, a damaged block — is a lost or
 * corrupted acknowledged write. verify reads every block of the account through the device
 * (--dev, as a client of its manager) or from the namespace's backing file (--file) and
 * checks that; it exits 0 when the account holds, 1 on a violation, 2 on bad input.
 * client runs until SIGTERM/SIGINT; it exits 1 when a read ever returned wrong data ("WRONG:"
 * after a write, "LOST:" before one).
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
#include <time.h>
#include <unistd.h>

#include "ntblend/nvme.h"
#include "tool_util.h"

#define BLK_MAGIC 0x4e564d45424c4b31ull /* "NVMEBLK1" */
#define HDR_LEN 128                     /* the state file's first line */
#define REC_LEN 40                      /* one block's record */
#define MAX_BATCH 64
#define CHECK_MS 200    /* how often the client asks its manager whether it is there */
#define TIMEOUT_MS 3000 /* command timeout: a stuck command is an error, not a hang */

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static uint64_t now_ms(void) { return tu_now_ns() / 1000000; }

/* ---- blocks */

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t checksum(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* A block: magic, LBA, generation, then words made of both, then a checksum of the rest. */
static void make_block(uint8_t *b, uint32_t bs, uint64_t lba, uint64_t gen)
{
    uint64_t *w = (uint64_t *)b, n = bs / 8;
    w[0] = BLK_MAGIC;
    w[1] = lba;
    w[2] = gen;
    for (uint64_t i = 3; i < n - 1; i++)
        w[i] = mix(lba * 0x100000001b3ull ^ gen << 20 ^ i);
    w[n - 1] = checksum(b, bs - 8);
}

enum blk_kind { BLK_ZERO, BLK_VALID, BLK_DAMAGED };

/* What a block holds: all zeroes, a valid block (*lba, *gen), or something else. */
static enum blk_kind read_block(const uint8_t *b, uint32_t bs, uint64_t *lba, uint64_t *gen)
{
    const uint64_t *w = (const uint64_t *)b;
    uint64_t n = bs / 8;
    bool zero = true;
    for (uint64_t i = 0; i < n && zero; i++)
        zero = !w[i];
    if (zero)
        return BLK_ZERO;
    if (w[0] != BLK_MAGIC || w[n - 1] != checksum(b, bs - 8))
        return BLK_DAMAGED;
    *lba = w[1];
    *gen = w[2];
    for (uint64_t i = 3; i < n - 1; i++)
        if (w[i] != mix(*lba * 0x100000001b3ull ^ *gen << 20 ^ i))
            return BLK_DAMAGED;
    return BLK_VALID;
}

/* What a block of LBA lba may hold when generation A was acknowledged there and A..T
 * attempted: NULL when it is allowed, else what is wrong with it. */
static const char *judge(enum blk_kind kind, uint64_t lba, uint64_t gen, uint64_t want_lba,
                         uint64_t A, uint64_t T)
{
    if (kind == BLK_DAMAGED)
        return "damaged";
    if (kind == BLK_ZERO)
        return A > 0 ? "zeroes" : NULL;
    if (lba != want_lba)
        return "a block of another LBA";
    if (gen < A)
        return "an older generation";
    if (gen > T || !gen)
        return "a generation never written";
    return NULL;
}

/* ---- the account */

struct account {
    int fd;
    uint64_t first, count, batches;
    uint32_t bs;
    uint64_t *acked, *attempted; /* per block of the range */
};

static int save_header(struct account *a)
{
    char line[HDR_LEN];
    int n = snprintf(line, sizeof line, "chaos_nvme first %" PRIu64 " count %" PRIu64
                     " bs %u batches %" PRIu64, a->first, a->count, a->bs, a->batches);
    memset(line + n, ' ', sizeof line - 1 - (size_t)n);
    line[sizeof line - 1] = '\n';
    return pwrite(a->fd, line, sizeof line, 0) == (ssize_t)sizeof line ? 0 : -errno;
}

/* One pwrite of a fixed-width record: a kill never leaves half of it. */
static int save_block(struct account *a, uint64_t k)
{
    char line[REC_LEN];
    int n = snprintf(line, sizeof line, "%016" PRIx64 " %016" PRIx64, a->acked[k],
                     a->attempted[k]);
    memset(line + n, ' ', sizeof line - 1 - (size_t)n);
    line[sizeof line - 1] = '\n';
    off_t at = HDR_LEN + (off_t)k * REC_LEN;
    return pwrite(a->fd, line, sizeof line, at) == (ssize_t)sizeof line ? 0 : -errno;
}

/* The account's memory and file go when the function that holds it returns, whichever return
 * (a verify that refuses an account it loaded half of included). */
static void account_free(struct account *a)
{
    free(a->acked);
    free(a->attempted);
    if (a->fd > 0)
        close(a->fd);
}

/* Load an account; 0, -ENOENT (no file or empty), or -EINVAL (not an account). */
static int load(const char *path, struct account *a, bool writable)
{
    a->fd = open(path, writable ? O_RDWR | O_CREAT : O_RDONLY, 0644);
    if (a->fd < 0)
        return -errno;
    char line[HDR_LEN + 1] = "";
    ssize_t n = pread(a->fd, line, HDR_LEN, 0);
    if (n <= 0)
        return -ENOENT;
    uint64_t first, count, batches;
    uint32_t bs;
    if (n != HDR_LEN || sscanf(line, "chaos_nvme first %" SCNu64 " count %" SCNu64 " bs %u batches %"
                               SCNu64, &first, &count, &bs, &batches) != 4 ||
        !count || count > 1u << 22 || bs < 512 || bs % 8)
        return -EINVAL;
    if (a->count && (a->first != first || a->count != count))
        return -EINVAL; /* the range given differs from the account's */
    a->first = first;
    a->count = count;
    a->bs = bs;
    a->batches = batches;
    a->acked = calloc(count, sizeof *a->acked);
    a->attempted = calloc(count, sizeof *a->attempted);
    if (!a->acked || !a->attempted)
        return -ENOMEM;
    for (uint64_t k = 0; k < count; k++) {
        char rec[REC_LEN + 1] = "";
        if (pread(a->fd, rec, REC_LEN, HDR_LEN + (off_t)k * REC_LEN) != REC_LEN)
            break; /* never written: 0, 0 */
        if (sscanf(rec, "%" SCNx64 " %" SCNx64, &a->acked[k], &a->attempted[k]) != 2 ||
            a->acked[k] > a->attempted[k])
            return -EINVAL;
    }
    return 0;
}

/* ---- the client */

struct conn {
    nvme_dev_t *d;
    nvme_qpair_t *qp;
    uint8_t *buf; /* MAX_BATCH blocks */
    uint8_t *admin;
};

static void disconnect(struct conn *c)
{
    if (c->qp)
        nvme_qpair_delete(c->qp);
    if (c->buf)
        nvme_buf_free(c->d, c->buf);
    if (c->admin)
        nvme_buf_free(c->d, c->admin);
    if (c->d)
        nvme_close(c->d);
    *c = (struct conn){0};
}

static int connect_dev(struct conn *c, const char *dev, uint32_t *bs, uint64_t *blocks)
{
    struct nvme_open_opts oo = {.timeout_ms = TIMEOUT_MS, .mode = NVME_OPEN_CLIENT};
    struct nvme_ns_info ns;
    int rc = nvme_open(dev, &oo, &c->d);
    if (rc)
        return rc;
    struct nvme_qpair_opts qo = {.depth = MAX_BATCH + 2, .sq_place = NVME_PLACE_DEVICE};
    if ((rc = nvme_ns_info(c->d, 1, &ns)) || (rc = nvme_qpair_create(c->d, &qo, &c->qp)))
        goto fail;
    c->buf = nvme_buf_alloc(c->d, NULL, (size_t)MAX_BATCH * ns.block_size);
    c->admin = nvme_buf_alloc(c->d, NULL, 4096);
    if (!c->buf || !c->admin) {
        rc = -ENOMEM;
        goto fail;
    }
    *bs = ns.block_size;
    *blocks = ns.blocks;
    return 0;
fail:
    disconnect(c);
    return rc;
}

struct batch_io {
    uint32_t done;
    int rc;
};

static void on_done(void *arg, const struct nvme_cpl *cpl)
{
    struct batch_io *io = arg;
    io->done++;
    if (cpl->rc && !io->rc)
        io->rc = cpl->rc;
}

/* n single-block commands at once (one per block: a failure is per block), then wait for all. */
static int run_batch(struct conn *c, enum nvme_op op, uint64_t lba, uint32_t n, uint32_t bs)
{
    struct batch_io io = {0};
    uint32_t queued = 0;
    for (uint32_t k = 0; k < n; k++) {
        int rc = nvme_submit(c->qp, op, 1, lba + k, 1, c->buf + (size_t)k * bs,
                             k + 1 < n ? NVME_SUBMIT_DEFER : 0, on_done, &io);
        if (rc) {
            io.rc = rc;
            break;
        }
        queued++;
    }
    while (io.done < queued) {
        int rc = nvme_qpair_wait(c->qp, -1);
        if (rc < 0 && !io.rc)
            io.rc = rc;
        if (rc < 0 && rc != -EIO && io.done < queued)
            break; /* nothing more will come: deleting the queue pair cancels the rest */
    }
    return io.rc;
}

struct tally {
    uint64_t eio, etimedout, enotconn, other, reopens, wrong, lost, acked_blocks;
};

static void count_error(struct tally *t, int rc, const char *what)
{
    uint64_t *slot = rc == -EIO ? &t->eio : rc == -ETIMEDOUT ? &t->etimedout
                   : rc == -ENOTCONN ? &t->enotconn : &t->other;
    (*slot)++;
    uint64_t all = t->eio + t->etimedout + t->enotconn + t->other;
    /* A command's completion leaves no message; a call that failed does. */
    bool cmd = strcmp(what, "flush") && strcmp(what, "asking the manager");
    if (all <= 20 || all % 100 == 0)
        printf("client: %s failed: %s%s%s%s\n", what, strerror(-rc), cmd ? "" : " (",
               cmd ? "" : nvme_errmsg(), cmd ? "" : ")");
}

static int client(const char *dev, const char *state, uint64_t first, uint64_t count,
                  uint32_t batch, uint32_t pause_us)
{
    struct account a __attribute__((cleanup(account_free))) = {.first = first, .count = count};
    int rc = load(state, &a, true);
    if (rc == -ENOENT) {
        a.acked = calloc(count, sizeof *a.acked);
        a.attempted = calloc(count, sizeof *a.attempted);
        if (!a.acked || !a.attempted)
            return 2;
    } else if (rc) {
        fprintf(stderr, "chaos_nvme: %s: %s\n", state,
                rc == -EINVAL ? "not an account of this range" : strerror(-rc));
        return 2;
    }
    if (batch > count)
        batch = (uint32_t)count;
    struct conn c = {0};
    struct tally t = {0};
    uint64_t cursor = 0, last_check = 0;
    unsigned backoff_ms = 0;
    bool opened_once = false;
    printf("client: %s blocks %" PRIu64 "..%" PRIu64 ", %" PRIu64 " batches acknowledged before\n",
           dev, first, first + count - 1, a.batches);
    fflush(stdout);
    while (!stop) {
        if (!c.d) {
            if (backoff_ms)
                usleep(backoff_ms * 1000u);
            backoff_ms = backoff_ms ? (backoff_ms * 2 > 1000 ? 1000 : backoff_ms * 2) : 50;
            uint32_t bs;
            uint64_t blocks;
            if ((rc = connect_dev(&c, dev, &bs, &blocks)))
                continue; /* no manager, no path, no queue pair yet: try again */
            if (first + count > blocks || (a.bs && a.bs != bs) || bs % 8 || bs < 512) {
                fprintf(stderr, "chaos_nvme: blocks %" PRIu64 "..%" PRIu64 " do not fit namespace 1"
                        " (%" PRIu64 " blocks of %u bytes)\n", first, first + count - 1, blocks, bs);
                disconnect(&c);
                return 2;
            }
            if (!a.bs) {
                a.bs = bs;
                if (save_header(&a))
                    return 2;
            }
            t.reopens += opened_once;
            opened_once = true;
            printf("client: opened %s (queue pair %u)\n", dev, nvme_qpair_id(c.qp));
            fflush(stdout);
        }
        uint32_t bs = a.bs, n = batch;
        if (cursor + n > count)
            n = (uint32_t)(count - cursor);
        /* Before overwriting them, the blocks must still hold what the account allows: a lost
         * acknowledged write is caught here, a round after it, before it is overwritten. */
        const char *what = "read before write";
        rc = run_batch(&c, NVME_OP_READ, first + cursor, n, bs);
        for (uint32_t k = 0; k < n && !rc; k++) {
            uint64_t lba = 0, gen = 0, A = a.acked[cursor + k], T = a.attempted[cursor + k];
            enum blk_kind kind = read_block(c.buf + (size_t)k * bs, bs, &lba, &gen);
            const char *why = judge(kind, lba, gen, first + cursor + k, A, T);
            if (why && ++t.lost <= 10)
                printf("client: LOST: block %" PRIu64 " (acknowledged generation %" PRIu64
                       ", attempted up to %" PRIu64 ") holds %s (lba %" PRIu64 ", generation %"
                       PRIu64 ")\n", first + cursor + k, A, T, why, lba, gen);
        }
        /* The account first: these generations may land from now on. */
        for (uint32_t k = 0; k < n && !rc; k++) {
            a.attempted[cursor + k]++;
            save_block(&a, cursor + k);
            make_block(c.buf + (size_t)k * bs, bs, first + cursor + k, a.attempted[cursor + k]);
        }
        if (!rc) {
            what = "write";
            rc = run_batch(&c, NVME_OP_WRITE, first + cursor, n, bs);
        }
        if (!rc) {
            what = "flush";
            rc = nvme_flush(c.qp, 1);
        }
        if (!rc) { /* written and flushed: acknowledged */
            for (uint32_t k = 0; k < n; k++) {
                a.acked[cursor + k] = a.attempted[cursor + k];
                save_block(&a, cursor + k);
            }
            a.batches++;
            t.acked_blocks += n;
            save_header(&a);
            memset(c.buf, 0, (size_t)n * bs);
            what = "read back";
            rc = run_batch(&c, NVME_OP_READ, first + cursor, n, bs);
        }
        if (!rc) {
            for (uint32_t k = 0; k < n; k++) {
                uint64_t lba = 0, gen = 0, want = a.acked[cursor + k];
                enum blk_kind kind = read_block(c.buf + (size_t)k * bs, bs, &lba, &gen);
                if (kind != BLK_VALID || lba != first + cursor + k || gen != want) {
                    if (++t.wrong <= 10)
                        printf("client: WRONG: block %" PRIu64 " acknowledged at generation %"
                               PRIu64 " reads back as %s (lba %" PRIu64 ", generation %" PRIu64
                               ")\n", first + cursor + k, want,
                               kind == BLK_ZERO ? "zeroes" : kind == BLK_DAMAGED ? "damaged" : "a block",
                               lba, gen);
                }
            }
            backoff_ms = 0;
        }
        /* On, also after a failure: those blocks are checked with their failed write when the
         * round comes back to them. */
        cursor = (cursor + n) % count;
        if (!rc && now_ms() - last_check >= CHECK_MS) {
            /* Get Features, Number of Queues: through the manager, so a dead one is noticed. */
            struct nvme_cmd gf = {.opc = 0x0a, .cdw10 = 0x07};
            what = "asking the manager";
            rc = nvme_admin(c.d, &gf, NULL, 0, NULL);
            last_check = now_ms();
        }
        if (rc) {
            count_error(&t, rc, what);
            fflush(stdout);
            disconnect(&c);
            continue;
        }
        if (pause_us)
            usleep(pause_us);
    }
    disconnect(&c);
    printf("client: %" PRIu64 " batches acknowledged (%" PRIu64 " blocks this run), errors: "
           "%" PRIu64 " EIO, %" PRIu64 " ETIMEDOUT, %" PRIu64 " ENOTCONN, %" PRIu64 " other; %"
           PRIu64 " reopens; %" PRIu64 " wrong read-backs, %" PRIu64 " blocks lost\n", a.batches,
           t.acked_blocks, t.eio, t.etimedout, t.enotconn, t.other, t.reopens, t.wrong, t.lost);
    close(a.fd);
    a.fd = -1;
    return t.wrong || t.lost ? 1 : 0;
}

/* ---- verify */

static int verify(const char *state, const char *dev, const char *file)
{
    struct account a __attribute__((cleanup(account_free))) = {0};
    int rc = load(state, &a, false);
    if (rc) {
        fprintf(stderr, "chaos_nvme: %s: %s\n", state,
                rc == -ENOENT ? "empty: the client never opened the device" :
                rc == -EINVAL ? "not an account" : strerror(-rc));
        return 2;
    }
    struct conn c = {0};
    int fd = -1;
    uint8_t *buf = NULL;
    uint32_t bs = a.bs;
    if (dev) {
        uint64_t blocks;
        if ((rc = connect_dev(&c, dev, &bs, &blocks))) {
            fprintf(stderr, "chaos_nvme: %s: %s\n", dev, nvme_errmsg());
            return 2;
        }
        buf = c.buf;
    } else {
        if ((fd = open(file, O_RDONLY)) < 0 || !(buf = malloc((size_t)MAX_BATCH * bs))) {
            fprintf(stderr, "chaos_nvme: %s: %s\n", file, strerror(errno));
            return 2;
        }
    }
    if (bs != a.bs) {
        fprintf(stderr, "chaos_nvme: the namespace has blocks of %u bytes, the account %u\n", bs, a.bs);
        return 2;
    }
    uint64_t checked = 0, exact = 0, later = 0, unlanded = 0, inflight = 0;
    uint64_t lost = 0, damaged = 0;
    for (uint64_t k0 = 0; k0 < a.count; k0 += MAX_BATCH) {
        uint32_t n = a.count - k0 < MAX_BATCH ? (uint32_t)(a.count - k0) : MAX_BATCH;
        if (dev)
            rc = run_batch(&c, NVME_OP_READ, a.first + k0, n, bs);
        else
            rc = pread(fd, buf, (size_t)n * bs, (off_t)((a.first + k0) * bs)) == (ssize_t)n * bs
                     ? 0 : -EIO;
        if (rc) {
            fprintf(stderr, "chaos_nvme: reading blocks %" PRIu64 "..: %s\n", a.first + k0,
                    strerror(-rc));
            return 2;
        }
        for (uint32_t j = 0; j < n; j++) {
            uint64_t k = k0 + j, A = a.acked[k], T = a.attempted[k], lba = 0, gen = 0;
            enum blk_kind kind = read_block(buf + (size_t)j * bs, bs, &lba, &gen);
            checked++;
            inflight += T > A;
            const char *why = judge(kind, lba, gen, a.first + k, A, T);
            if (why) {
                if (kind == BLK_DAMAGED || lba != a.first + k)
                    damaged++;
                else
                    lost++;
                if (lost + damaged <= 10)
                    printf("FAIL: block %" PRIu64 " (acknowledged generation %" PRIu64
                           ", attempted up to %" PRIu64 ") holds %s (lba %" PRIu64
                           ", generation %" PRIu64 ")\n", a.first + k, A, T, why, lba, gen);
            } else if (kind == BLK_ZERO || gen == A) {
                exact++;
                unlanded += T > A;
            } else {
                later++;
            }
        }
    }
    if (dev)
        disconnect(&c);
    else {
        close(fd);
        free(buf);
    }
    bool ok = !lost && !damaged;
    printf("%s: %" PRIu64 " blocks checked (%" PRIu64 " batches acknowledged), %" PRIu64
           " with a failed write: %" PRIu64 " kept the acknowledged generation, %" PRIu64
           " a later attempted one; %" PRIu64 " lost, %" PRIu64 " damaged\n",
           ok ? "ok" : "FAIL", checked, a.batches, inflight, unlanded, later, lost, damaged);
    return ok ? 0 : 1;
}

static void usage(FILE *to)
{
    fprintf(to,
            "usage: chaos_nvme client --dev NAME --state FILE --first LBA --count N [--batch B] [--pause-us U]\n"
            "       chaos_nvme verify --state FILE (--dev NAME | --file NAMESPACE_IMAGE)\n"
            "The NVMe workload of scripts/chaos.sh: a client of the device's manager writes\n"
            "blocks (LBA, generation, checksum) of its range, accounts for every write in FILE\n"
            "before and after it is acknowledged (written and flushed), and reopens the device\n"
            "after any error. verify checks namespace 1 against the account.\n"
            "client runs until SIGTERM; verify exits 0 ok, 1 violation, 2 bad input.\n");
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"dev", required_argument, NULL, 'd'},   {"state", required_argument, NULL, 's'},
        {"first", required_argument, NULL, 'f'}, {"count", required_argument, NULL, 'n'},
        {"batch", required_argument, NULL, 'b'}, {"pause-us", required_argument, NULL, 'p'},
        {"file", required_argument, NULL, 'F'},  {"help", no_argument, NULL, 'h'},
        {0},
    };
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *mode = argv[1], *dev = NULL, *state = NULL, *file = NULL;
    long long first = -1, count = -1, batch = 8, pause_us = 1000;
    int ch;
    optind = 2;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        char *end = NULL;
        long long v = optarg ? strtoll(optarg, &end, 0) : 0;
        bool num_ok = optarg && *optarg && !*end && v >= 0;
        switch (ch) {
        case 'd': dev = optarg; break;
        case 's': state = optarg; break;
        case 'F': file = optarg; break;
        case 'f': first = num_ok ? v : -2; break;
        case 'n': count = num_ok && v >= 1 && v <= 1 << 22 ? v : -2; break;
        case 'b': batch = num_ok && v >= 1 && v <= MAX_BATCH ? v : -2; break;
        case 'p': pause_us = num_ok && v <= 1000000 ? v : -2; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (first == -2 || count == -2 || batch == -2 || pause_us == -2) {
        fprintf(stderr, "chaos_nvme: a number is out of range (--first >= 0, --count "
                        "1..4194304, --batch 1..%d, --pause-us 0..1000000)\n", MAX_BATCH);
        return 2;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    if (!strcmp(mode, "client") && dev && state && first >= 0 && count > 0)
        return client(dev, state, (uint64_t)first, (uint64_t)count, (uint32_t)batch,
                      (uint32_t)pause_us);
    if (!strcmp(mode, "verify") && state && !dev != !file)
        return verify(state, dev, file);
    usage(stderr);
    return 2;
}
