/*
 * chaos_accel: the lent-device workload of `scripts/chaos.sh`. A driver written only against
 * the driver model (include/ntblend/pci.h), run on the host a device is lent to: it binds the
 * accelerators of its host's tree (the lent one; a local one the same way) and keeps copying
 * data through one of them — a pattern host -> device memory -> host by the device's DMA
 * engine — and checks every copy the device said it completed.
 *
 *   chaos_accel driver --state FILE [--size BYTES] [--timeout-ms MS] [--pause-us U]
 *
 * A round is two copies (in, out) of a fresh pattern, each waited for by its MSI-X interrupt
 * (with a recheck every 20 ms) up to --timeout-ms. Outcomes:
 *   ok      both copies completed without error and the data read back is the pattern;
 *   error   a copy failed (ACCEL_ERR_* in its descriptor, the device gone, the timeout): the
 *           driver reports it (-EIO, -ENODEV, -ETIMEDOUT) and resets the engine;
 *   WRONG   both copies completed without error and the data differs — never allowed.
 * A round longer than twice --timeout-ms plus a second counts as a HANG (never allowed). The
 * device may go at any moment (reclaimed, its lender crashed): remove() waits for the round in
 * progress, which ends as soon as the function reads as gone; a device lent again is probed
 * and used again. A killed driver started again carries on with its counts.
 *
 * The state file is one fixed-width line, each update one pwrite, so a SIGKILL leaves it
 * whole:
 *   chaos_accel rounds R ok K errors E wrong W hangs H longest_ms L probes P removes Q
 * Runs until SIGTERM/SIGINT; exit status 0 when no round was WRONG or a HANG, 1 otherwise,
 * 2 on bad input.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "accel_engine.h"
#include "tool_util.h"

#define STATE_LEN 160
#define MAX_ACCELS 8

static volatile sig_atomic_t stop;

static struct {
    size_t size;
    unsigned timeout_ms, pause_us;
    const char *state;
    int fd;
    uint64_t rounds, ok, errors, wrong, hangs, longest_ms, probes, removes;
    uint64_t err_by[ACCEL_ERR_OTHER + 3]; /* ACCEL_ERR_*, then gone, then timeout */
} g = { .size = 64u << 10, .timeout_ms = 3000, .pause_us = 2000, .fd = -1 };

struct accel {
    struct accel_eng eng; /* BAR0, the coherent buffer (the host side of the copies), the IRQ */
    pthread_mutex_t use; /* held for a round; remove() waits for it */
};

/* The bound accelerators; the main thread uses the first. */
static struct accel *accels[MAX_ACCELS];
static pthread_cond_t accels_changed = PTHREAD_COND_INITIALIZER;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static uint64_t now_ms(void) { return tu_now_ns() / 1000000; }

static pthread_mutex_t accels_lock = PTHREAD_MUTEX_INITIALIZER;

/* Main thread only (probe() and remove() count under accels_lock). */
static void state_write(void)
{
    char line[STATE_LEN + 1];
    pthread_mutex_lock(&accels_lock);
    uint64_t probes = g.probes, removes = g.removes;
    pthread_mutex_unlock(&accels_lock);
    int n = snprintf(line, sizeof line,
                     "chaos_accel rounds %" PRIu64 " ok %" PRIu64 " errors %" PRIu64
                     " wrong %" PRIu64 " hangs %" PRIu64 " longest_ms %" PRIu64
                     " probes %" PRIu64 " removes %" PRIu64,
                     g.rounds, g.ok, g.errors, g.wrong, g.hangs, g.longest_ms, probes, removes);
    memset(line + n, ' ', (size_t)(STATE_LEN - 1 - n));
    line[STATE_LEN - 1] = '\n';
    if (pwrite(g.fd, line, STATE_LEN, 0) != STATE_LEN)
        fprintf(stderr, "chaos_accel: writing %s: %s\n", g.state, strerror(errno));
}

/* Carry on with the counts a previous life left (a missing or empty file: from zero). */
static int state_load(void)
{
    char line[STATE_LEN + 1] = { 0 };
    ssize_t r = pread(g.fd, line, STATE_LEN, 0);
    if (r <= 0)
        return 0;
    if (sscanf(line,
               "chaos_accel rounds %" SCNu64 " ok %" SCNu64 " errors %" SCNu64 " wrong %" SCNu64
               " hangs %" SCNu64 " longest_ms %" SCNu64 " probes %" SCNu64 " removes %" SCNu64,
               &g.rounds, &g.ok, &g.errors, &g.wrong, &g.hangs, &g.longest_ms, &g.probes,
               &g.removes) != 8) {
        fprintf(stderr, "chaos_accel: %s is not a state file of chaos_accel\n", g.state);
        return -1;
    }
    return 0;
}

/* One copy by the engine, waited for by its interrupt. 0, or -errno with *why the reason's
 * index in g.err_by. */
static int copy(struct accel *a, uint64_t src, uint64_t dst, uint32_t len, uint32_t flags,
                int *why)
{
    const struct accel_wait w = { .timeout_ms = g.timeout_ms, .poll_us = 20000 };
    uint32_t target = accel_eng_copies(&a->eng, src, dst, len, flags, true, 1);
    int rc = accel_eng_wait(&a->eng, target, &w);
    if (rc) {
        *why = rc == -ENODEV ? ACCEL_ERR_OTHER + 1 : ACCEL_ERR_OTHER + 2;
        return rc;
    }
    /* Read after COMPLETED: the device wrote the status before it counted the descriptor. An
     * unreachable device reads all ones, an error too. */
    uint32_t st = accel_eng_status(&a->eng, target - 1);
    if (!pci_device_is_present(a->eng.dev)) {
        *why = ACCEL_ERR_OTHER + 1;
        return -ENODEV;
    }
    if (!(st & ACCEL_DESC_DONE) || (st & ACCEL_ERR_MASK)) {
        uint32_t e = st & ACCEL_ERR_MASK;
        *why = e && e <= ACCEL_ERR_OTHER ? (int)e : ACCEL_ERR_OTHER;
        return -EIO;
    }
    return 0;
}

static void pattern(uint8_t *p, size_t n, uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(p + i, &x, n - i < 8 ? n - i : 8);
    }
}

static const char *why_name(int why)
{
    static const char *names[] = { "none", "bus master", "range", "opcode", "IOMMU fault",
                                   "master abort", "link down", "access", "ring", "other",
                                   "device gone", "timeout" };
    return why >= 0 && why < (int)(sizeof names / sizeof *names) ? names[why] : "?";
}

/* One round on a (its use lock held): in, out, compare. */
static void round_on(struct accel *a, uint8_t *want, uint64_t seq)
{
    size_t n = g.size;
    uint64_t t0 = now_ms();
    int why = 0;
    pattern(want, n, seq);
    memcpy(a->eng.buf, want, n);
    int rc = copy(a, a->eng.buf_io, 0, (uint32_t)n, ACCEL_DESC_SRC_BUS, &why); /* host -> device */
    if (!rc) {
        memset(a->eng.buf, 0xee, n);
        rc = copy(a, 0, a->eng.buf_io, (uint32_t)n, ACCEL_DESC_DST_BUS, &why); /* device -> host */
    }
    uint64_t took = now_ms() - t0;
    g.rounds++;
    if (took > g.longest_ms)
        g.longest_ms = took;
    if (took > 2ull * g.timeout_ms + 1000) {
        g.hangs++;
        printf("HANG: round %" PRIu64 " on %s took %" PRIu64 " ms\n", g.rounds, pci_name(a->eng.dev),
               took);
    }
    if (!rc) {
        size_t off = 0;
        while (off < n && a->eng.buf[off] == want[off])
            off++;
        if (off == n) {
            g.ok++;
        } else {
            g.wrong++;
            printf("WRONG: round %" PRIu64 " on %s: both copies completed without error, but "
                   "the data read back differs from byte %zu on\n", g.rounds, pci_name(a->eng.dev),
                   off);
        }
    } else {
        g.errors++;
        g.err_by[why]++;
        if (pci_device_is_present(a->eng.dev))
            accel_eng_reset(&a->eng, 1000); /* a failed copy may leave the engine halted */
    }
    state_write();
    fflush(stdout);
}

static int probe(struct pci_dev *dev, const struct pci_device_id *id)
{
    (void)id;
    struct accel *a = calloc(1, sizeof *a);
    if (!a)
        return -ENOMEM;
    pthread_mutex_init(&a->use, NULL);
    int rc = accel_eng_open(&a->eng, dev, g.size, true);
    if (rc) {
        fprintf(stderr, "chaos_accel: %s: cannot set it up: %s\n", pci_name(dev), strerror(-rc));
        accel_eng_close(&a->eng);
        pthread_mutex_destroy(&a->use);
        free(a);
        return rc;
    }
    pci_set_drvdata(dev, a);
    pthread_mutex_lock(&accels_lock);
    int i = 0;
    while (i < MAX_ACCELS && accels[i])
        i++;
    if (i < MAX_ACCELS)
        accels[i] = a;
    g.probes++;
    pthread_cond_broadcast(&accels_changed);
    pthread_mutex_unlock(&accels_lock);
    printf("%s: bound\n", pci_name(dev));
    fflush(stdout);
    return 0;
}

static void remove_dev(struct pci_dev *dev)
{
    struct accel *a = pci_get_drvdata(dev);
    pthread_mutex_lock(&accels_lock);
    for (int i = 0; i < MAX_ACCELS; i++)
        if (accels[i] == a)
            accels[i] = NULL;
    g.removes++;
    pthread_mutex_unlock(&accels_lock);
    /* The round in progress ends as soon as the function reads as gone. */
    pthread_mutex_lock(&a->use);
    pthread_mutex_unlock(&a->use);
    accel_eng_remove(&a->eng);
    pthread_mutex_destroy(&a->use);
    free(a);
}

static struct pci_driver driver = {
    .name = "chaos_accel", .id_table = accel_eng_ids, .probe = probe, .remove = remove_dev,
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ntblend run --host H -- chaos_accel driver --state FILE [--size BYTES]\n"
            "                                  [--timeout-ms MS] [--pause-us U]\n"
            "A driver (include/ntblend/pci.h) that binds the accelerators of host H's tree (a\n"
            "lent one as a local one) and keeps copying a fresh pattern host -> device -> host\n"
            "through the first, checking every copy the device completed without error. The\n"
            "device may be removed and added again at any time.\n"
            "  --state FILE     counts, one fixed-width line (carried on by a restarted driver)\n"
            "  --size BYTES     bytes per copy (default 64k; k/M suffixes, up to 16M)\n"
            "  --timeout-ms MS  a copy not completed by then is an error (default 3000)\n"
            "  --pause-us U     pause between rounds (default 2000)\n"
            "Prints WRONG: for a completed copy with wrong data, HANG: for a round longer than\n"
            "2 x timeout + 1 s. Runs until SIGTERM; exit status 0 none of either, 1 otherwise,\n"
            "2 bad input.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "driver")) {
        usage(argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) ? stdout : stderr);
        return argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) ? 0 : 2;
    }
    static const struct option lo[] = { { "state", 1, NULL, 'f' }, { "size", 1, NULL, 's' },
                                        { "timeout-ms", 1, NULL, 't' },
                                        { "pause-us", 1, NULL, 'p' }, { "help", 0, NULL, 'h' },
                                        { 0 } };
    int c;
    optind = 2;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        char *end;
        unsigned long v;
        switch (c) {
        case 'f': g.state = optarg; break;
        case 's':
            if (accel_eng_parse_size(optarg, 16u << 20, &g.size)) {
                fprintf(stderr, "chaos_accel: --size takes 1..16M bytes\n");
                return 2;
            }
            break;
        case 't':
        case 'p':
            errno = 0;
            v = strtoul(optarg, &end, 10);
            if (errno || *end || end == optarg || v > 600000 || (c == 't' && v < 10)) {
                fprintf(stderr, "chaos_accel: --%s takes a number (%s)\n",
                        c == 't' ? "timeout-ms" : "pause-us",
                        c == 't' ? "10..600000" : "0..600000");
                return 2;
            }
            if (c == 't')
                g.timeout_ms = (unsigned)v;
            else
                g.pause_us = (unsigned)v;
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!g.state || optind != argc) {
        fprintf(stderr, "chaos_accel: %s (see --help)\n",
                g.state ? "unexpected arguments" : "driver needs --state FILE");
        return 2;
    }
    g.fd = open(g.state, O_RDWR | O_CREAT, 0644);
    if (g.fd < 0) {
        fprintf(stderr, "chaos_accel: %s: %s\n", g.state, strerror(errno));
        return 2;
    }
    if (state_load())
        return 2;
    uint64_t before = g.ok;
    uint8_t *want = malloc(g.size);
    if (!want)
        return 1;
    struct sigaction sa = { .sa_handler = on_signal };
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    int n = pci_register_driver(&driver);
    if (n < 0) {
        fprintf(stderr, "chaos_accel: %s (run it on a host: ntblend run --host H -- chaos_accel "
                "driver ...)\n", strerror(-n));
        return 1;
    }
    printf("chaos_accel: %d bound at start, %" PRIu64 " rounds ok before\n", n, before);
    fflush(stdout);
    uint64_t seq = ((uint64_t)getpid() << 32) ^ (uint64_t)time(NULL) << 8;
    while (!stop) {
        pthread_mutex_lock(&accels_lock);
        struct accel *a = NULL;
        for (int i = 0; i < MAX_ACCELS && !a; i++)
            a = accels[i];
        if (!a) { /* none bound: the device is away; wait for it to be lent again */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 100000000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&accels_changed, &accels_lock, &ts);
            pthread_mutex_unlock(&accels_lock);
            state_write(); /* the removes and probes meanwhile */
            continue;
        }
        pthread_mutex_lock(&a->use);
        pthread_mutex_unlock(&accels_lock);
        round_on(a, want, ++seq);
        pthread_mutex_unlock(&a->use);
        if (g.pause_us)
            usleep(g.pause_us);
    }
    pci_unregister_driver(&driver);
    printf("chaos_accel: %" PRIu64 " rounds: %" PRIu64 " ok, %" PRIu64 " errors", g.rounds, g.ok,
           g.errors);
    const char *sep = " (this run: ";
    for (int i = 1; i < (int)(sizeof g.err_by / sizeof *g.err_by); i++)
        if (g.err_by[i]) {
            printf("%s%s x%" PRIu64, sep, why_name(i), g.err_by[i]);
            sep = ", ";
        }
    printf("%s, %" PRIu64 " wrong, %" PRIu64 " hangs, longest round %" PRIu64 " ms\n",
           *sep == ',' ? ")" : "", g.wrong, g.hangs, g.longest_ms);
    state_write();
    close(g.fd);
    free(want);
    return g.wrong || g.hangs ? 1 : 0;
}
