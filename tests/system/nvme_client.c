/*
 * nvme_client: a libntbnvme client for the shared-NVMe tests (test_nvme_shared.sh). Every
 * action opens the device by name (a client of its manager when one runs), does its work on
 * namespace 1 and reports failures with nvme_errmsg(). Blocks carry a pattern made of their
 * LBA and a seed, so any process can check what another wrote.
 *
 *   nvme_client DEV write FIRST COUNT SEED    write the blocks, then flush
 *   nvme_client DEV verify FIRST COUNT SEED   read them back and compare
 *   nvme_client DEV io SECONDS FIRST COUNT    write, read and check its blocks in a loop
 *                                             (8 commands in flight) for SECONDS
 *   nvme_client DEV hold                      take a queue pair, print "ready", wait
 *   nvme_client DEV outage FIRST COUNT        I/O until a command fails; print how long it
 *                                             took; reopen (every 200 ms, up to 60 s) and
 *                                             check I/O works again
 *   nvme_client DEV bad                       every checked bad request must fail cleanly
 *   nvme_client DEV stale FILE                take a queue pair, print "ready", wait until
 *                                             FILE exists, delete the queue pair and print
 *                                             how that went ("delete: ERRNO: MESSAGE")
 *
 * Exit status: 0 success; 1 a failure (message on stderr); 3 (io) the I/O went on but the
 * manager was gone when the queue pair was deleted.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ntblend/nvme.h"

#define BS 4096u
#define INFLIGHT 8u

static const char *dev_name;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int fail(const char *what)
{
    fprintf(stderr, "nvme_client %s: %s: %s\n", dev_name, what, nvme_errmsg());
    return 1;
}

static void fill(uint8_t *b, uint64_t lba, uint64_t seed)
{
    for (size_t i = 0; i < BS / 8; i++) {
        uint64_t v = (lba + 1) * 0x9e3779b97f4a7c15ull ^ seed ^ i;
        memcpy(b + i * 8, &v, 8);
    }
}

static bool check(const uint8_t *b, uint64_t lba, uint64_t seed)
{
    for (size_t i = 0; i < BS / 8; i++) {
        uint64_t v;
        memcpy(&v, b + i * 8, 8);
        if (v != ((lba + 1) * 0x9e3779b97f4a7c15ull ^ seed ^ i))
            return false;
    }
    return true;
}

struct ctx {
    nvme_dev_t *d;
    nvme_qpair_t *qp;
    uint8_t *buf; /* INFLIGHT blocks */
};

static int open_dev(struct ctx *c)
{
    memset(c, 0, sizeof *c);
    if (nvme_open(dev_name, NULL, &c->d))
        return fail("open");
    struct nvme_qpair_opts qo = { .depth = 64, .sq_place = NVME_PLACE_DEVICE };
    if (nvme_qpair_create(c->d, &qo, &c->qp))
        return fail("queue pair");
    if (!(c->buf = nvme_buf_alloc(c->d, NULL, INFLIGHT * BS)))
        return fail("buffer");
    return 0;
}

static int close_dev(struct ctx *c)
{
    int rc = 0;
    if (c->qp && nvme_qpair_delete(c->qp)) {
        fprintf(stderr, "nvme_client %s: deleting the queue pair: %s\n", dev_name, nvme_errmsg());
        rc = 3;
    }
    if (c->buf)
        nvme_buf_free(c->d, c->buf);
    nvme_close(c->d);
    return rc;
}

static int do_write(struct ctx *c, uint64_t first, uint64_t count, uint64_t seed)
{
    for (uint64_t l = first; l < first + count; l++) {
        fill(c->buf, l, seed);
        if (nvme_write(c->qp, 1, l, 1, c->buf))
            return fail("write");
    }
    return nvme_flush(c->qp, 1) ? fail("flush") : 0;
}

static int do_verify(struct ctx *c, uint64_t first, uint64_t count, uint64_t seed)
{
    for (uint64_t l = first; l < first + count; l++) {
        if (nvme_read(c->qp, 1, l, 1, c->buf))
            return fail("read");
        if (!check(c->buf, l, seed)) {
            fprintf(stderr, "nvme_client %s: block %" PRIu64 " reads back wrong\n", dev_name, l);
            return 1;
        }
    }
    return 0;
}

struct io {
    int rc;
    uint32_t done;
};
static void on_done(void *arg, const struct nvme_cpl *cpl)
{
    struct io *io = arg;
    io->done++;
    if (cpl->rc && !io->rc)
        io->rc = cpl->rc;
}

/* One round: write INFLIGHT blocks at once, read them back at once, check. */
static int round_trip(struct ctx *c, uint64_t first, uint64_t count, uint64_t seed,
                      uint64_t *round)
{
    struct io io = { 0 };
    for (int pass = 0; pass < 2; pass++) {
        io.done = 0;
        for (uint32_t k = 0; k < INFLIGHT; k++) {
            uint64_t l = first + (*round * INFLIGHT + k) % count;
            if (!pass)
                fill(c->buf + k * BS, l, seed);
            else
                memset(c->buf + k * BS, 0, BS);
            if (nvme_submit(c->qp, pass ? NVME_OP_READ : NVME_OP_WRITE, 1, l, 1,
                            c->buf + k * BS, 0, on_done, &io))
                return -1;
        }
        while (io.done < INFLIGHT) {
            int rc = nvme_qpair_wait(c->qp, -1);
            if (rc < 0 && !io.rc)
                io.rc = rc;
            if (rc < 0 && io.done < INFLIGHT && rc != -EIO)
                break;
        }
        if (io.rc)
            return io.rc;
    }
    for (uint32_t k = 0; k < INFLIGHT; k++) {
        uint64_t l = first + (*round * INFLIGHT + k) % count;
        if (!check(c->buf + k * BS, l, seed)) {
            fprintf(stderr, "nvme_client %s: block %" PRIu64 " reads back wrong\n", dev_name, l);
            return -EILSEQ;
        }
    }
    (*round)++;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: nvme_client DEV write|verify|io|hold|outage|bad ...\n");
        return 2;
    }
    dev_name = argv[1];
    const char *act = argv[2];
    uint64_t a[3] = { 0 };
    for (int i = 3; i < argc && i < 6; i++)
        a[i - 3] = strtoull(argv[i], NULL, 0);
    struct ctx c;
    if (!strcmp(act, "write") || !strcmp(act, "verify")) {
        if (open_dev(&c))
            return 1;
        int rc = act[0] == 'w' ? do_write(&c, a[0], a[1], a[2]) : do_verify(&c, a[0], a[1], a[2]);
        int r = close_dev(&c);
        return rc ? rc : r ? 1 : 0;
    }
    if (!strcmp(act, "io")) {
        if (open_dev(&c))
            return 1;
        uint64_t end = now_ns() + a[0] * 1000000000ull, round = 0;
        while (now_ns() < end) {
            int rc = round_trip(&c, a[1], a[2], getpid(), &round);
            if (rc) {
                fprintf(stderr, "nvme_client %s: I/O failed after %" PRIu64 " rounds: %s\n",
                        dev_name, round, strerror(-rc));
                close_dev(&c);
                return 1;
            }
        }
        printf("%" PRIu64 " rounds of %u writes and reads, all verified\n", round, INFLIGHT);
        return close_dev(&c);
    }
    if (!strcmp(act, "hold")) {
        if (open_dev(&c))
            return 1;
        printf("ready qid %u pid %d\n", nvme_qpair_id(c.qp), (int)getpid());
        fflush(stdout);
        for (;;)
            pause();
    }
    if (!strcmp(act, "outage")) {
        if (open_dev(&c))
            return 1;
        printf("ready\n");
        fflush(stdout);
        uint64_t round = 0, t0 = 0;
        int rc = 0;
        while (!rc) {
            t0 = now_ns();
            rc = round_trip(&c, a[0], a[1], getpid(), &round);
        }
        printf("failed after %" PRIu64 " ms with %s\n", (now_ns() - t0) / 1000000,
               strerror(-rc));
        fflush(stdout);
        close_dev(&c);
        uint64_t deadline = now_ns() + 60000000000ull;
        while (open_dev(&c)) {
            if (c.d)
                close_dev(&c);
            if (now_ns() > deadline)
                return 1;
            usleep(200000);
        }
        round = 0;
        for (int i = 0; i < 10; i++)
            if ((rc = round_trip(&c, a[0], a[1], getpid(), &round))) {
                fprintf(stderr, "nvme_client %s: after reopening: %s\n", dev_name,
                        strerror(-rc));
                close_dev(&c);
                return 1;
            }
        printf("reopened: I/O works again\n");
        return close_dev(&c);
    }
    if (!strcmp(act, "stale")) {
        if (argc < 4 || open_dev(&c))
            return 1;
        printf("ready\n");
        fflush(stdout);
        while (access(argv[3], F_OK))
            usleep(20000);
        int rc = nvme_qpair_delete(c.qp);
        c.qp = NULL;
        printf("delete: %s: %s\n", rc ? strerror(-rc) : "ok", rc ? nvme_errmsg() : "");
        fflush(stdout);
        close_dev(&c);
        return 0;
    }
    if (!strcmp(act, "bad")) {
        if (open_dev(&c))
            return 1;
        struct nvme_ns_info ns;
        struct nvme_ctrl_info ci;
        if (nvme_ns_info(c.d, 1, &ns) || nvme_ctrl_info(c.d, &ci))
            return fail("namespace 1");
        uint32_t too_many = (uint32_t)(ci.max_transfer / BS) + 1;
        struct {
            const char *what;
            int got, want;
        } t[] = {
            { "read past the end", nvme_read(c.qp, 1, ns.blocks, 1, c.buf), -ERANGE },
            { "read across the end", nvme_read(c.qp, 1, ns.blocks - 1, 2, c.buf), -ERANGE },
            { "no such namespace", nvme_read(c.qp, 9, 0, 1, c.buf), -ENXIO },
            { "misaligned buffer", nvme_read(c.qp, 1, 0, 1, c.buf + 1), -EINVAL },
            { "buffer not the device's", nvme_read(c.qp, 1, 0, 1, &ns), -EFAULT },
            { "too many blocks", nvme_read(c.qp, 1, 0, too_many, c.buf), -EINVAL },
            { "zero blocks", nvme_read(c.qp, 1, 0, 0, c.buf), -EINVAL },
            { "depth too big", nvme_qpair_create(c.d, &(struct nvme_qpair_opts){ .depth = 1u << 20 }, &(nvme_qpair_t *){ 0 }), -EINVAL },
            { "a manager's admin command", nvme_admin(c.d, &(struct nvme_cmd){ .opc = 0x04 }, NULL, 0, NULL), nvme_is_client(c.d) ? -EPERM : -EINVAL },
        };
        int bad = 0;
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
            if (t[i].got != t[i].want) {
                fprintf(stderr, "nvme_client: %s: got %d, want %d\n", t[i].what, t[i].got,
                        t[i].want);
                bad = 1;
            }
        /* Identify through the manager works, and says what the handle says. */
        struct nvme_cmd id = { .opc = 0x06, .cdw10 = 1 };
        uint8_t *idb = nvme_buf_alloc(c.d, NULL, 4096);
        if (!idb || nvme_admin(c.d, &id, idb, 4096, NULL) || strncmp((char *)idb + 4, ci.serial, strlen(ci.serial))) {
            fprintf(stderr, "nvme_client: Identify: %s\n", nvme_errmsg());
            bad = 1;
        }
        nvme_buf_free(c.d, idb);
        if (!bad)
            printf("every bad request failed as it should (client: %s)\n",
                   nvme_is_client(c.d) ? "yes" : "no");
        int r = close_dev(&c);
        return bad ? 1 : r;
    }
    fprintf(stderr, "nvme_client: unknown action '%s'\n", act);
    return 2;
}
