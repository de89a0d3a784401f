/*
 * accel_bench: the accelerator experiments of smartio-tocs-2021 §7.1.4-7.1.5 on the emulated
 * fabric, through the SmartIO device-driver API only (include/ntblend/smartio.h): the tool
 * borrows the accelerators exclusively, maps their BARs and memory for them, and drives their
 * descriptor rings (include/ntblend/accel_regs.h) as a device driver would.
 *
 *   accel_bench bandwidth [--device NAME] [--size 64M] [--block 4M] [--repeat 3] [--json]
 *     Like CUDA's bandwidthTest: the device's DMA engine copies --size bytes between a segment
 *     of this host's memory (seg_create + sio_map_local: the device-side I/O address) and the
 *     device's memory (BAR2), in --block descriptors, host-to-device (DMA reads) and then
 *     device-to-host (DMA writes, into a cleared second half of the segment). Run on the
 *     device's own host it is local; run on another host the device is borrowed and its DMA
 *     crosses the NTB. Best and mean MB/s of --repeat runs after an unmeasured warm-up run;
 *     every measured run is verified.
 *
 *   accel_bench pingpong [--device A] [--peer B] [--rounds 10000] [--repeat 3] [--json]
 *     Device-to-device ping-pong (§7.1.4): each round A copies the next counter value into B's
 *     memory (a COPY to the address sio_map_peer_bar gives), B WAITs for it and copies it back
 *     into A's memory, A WAITs for the echo. The devices run the rounds by themselves; the CPU
 *     only keeps both rings filled (woken by A's MSI-X vector every --batch rounds) and takes
 *     the time: mean = total / rounds (over --repeat runs, and of the best run), median over
 *     the batches' per-round times. Every run is verified.
 *
 * Completion is signalled by MSI-X (sio_enable_vector + sio_wait_vector), with a short
 * timeout after which the COMPLETED register is polled: nothing spins. A device that is not
 * lent out yet is lent out by the tool when it runs on the device's own host
 * (sio_set_available); elsewhere, lend it first with `ntblend device add NAME`.
 * Exit status: 0 ok, 1 failure or data mismatch, 2 usage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "ntblend/accel_regs.h"
#include "ntblend/seg.h"
#include "ntblend/smartio.h"
#include "ntbtool.h"

#define OP_TIMEOUT_MS 60000 /* no progress for this long: the device is stuck */
#define WAKE_MS 20          /* sio_wait_vector timeout before polling the registers */
#define INTR_EVERY 32       /* bandwidth: an interrupt every this many descriptors */
#define PP_FLAG 0x0         /* ping-pong: the counter word each device receives */
#define PP_TABLE 0x1000     /* ping-pong: A's counter values 1..rounds (the "increment") */

struct accel {
    const char *name;
    struct sio_info info;
    sio_dev_t *dev;
    sio_bar_t *regs, *mem;
    volatile uint8_t *regp, *memp;
    size_t mem_size;
    uint32_t head;       /* next descriptor index (free-running, HEAD register) */
    uint32_t hvec, seen; /* this host's MSI-X vector for it, and the count seen so far */
    bool borrowed, lent_by_us;
};

struct opts {
    const char *device, *peer;
    uint64_t size, block, rounds;
    int repeats, batch, vector;
    bool json;
};

static volatile sig_atomic_t g_stop;
static void on_signal(int sig) { (void)sig; g_stop = 1; }

static const char *err_name(uint32_t e)
{
    static const char *n[] = { "none", "BUS_MASTER", "RANGE", "OPCODE", "FAULT",
                               "ABORT", "LINK", "ACCESS", "RING", "OTHER" };
    return e < sizeof n / sizeof n[0] ? n[e] : "?";
}

/* ---------------------------------------------------------------- the device */

static uint32_t rd(struct accel *a, size_t off) { return sio_read32(a->regs, off); }

static int find_info(const char *name, struct sio_info *out)
{
    int n = sio_list(NULL, 0);
    if (n < 0)
        return n;
    struct sio_info *all = calloc((size_t)n + 1, sizeof *all);
    if (!all)
        return -ENOMEM;
    n = sio_list(all, n);
    int rc = -ENOENT;
    for (int i = 0; i < n; i++)
        if (!strcmp(all[i].name, name)) {
            *out = all[i];
            rc = 0;
            break;
        }
    free(all);
    return rc;
}

/* Reset the engine and enable it, completions on vector 0 -> this host's vector a->hvec. */
static int accel_reset(struct accel *a)
{
    sio_write32(a->regs, ACCEL_REG_CONTROL, ACCEL_CTRL_RESET);
    uint64_t until = tu_now_ns() + 5000000000ull;
    while (rd(a, ACCEL_REG_CONTROL) & ACCEL_CTRL_RESET) {
        if (tu_now_ns() > until) {
            tu_err("%s: reset did not complete (CONTROL 0x%x, STATUS 0x%x)", a->name,
                   rd(a, ACCEL_REG_CONTROL), rd(a, ACCEL_REG_STATUS));
            return -ETIMEDOUT;
        }
        tu_sleep_ms(1);
    }
    a->head = 0;
    sio_write32(a->regs, ACCEL_REG_VECTOR, 0);
    sio_write32(a->regs, ACCEL_REG_CONTROL, ACCEL_CTRL_ENABLE);
    return 0;
}

static int accel_open(struct accel *a, const char *name, uint32_t hvec)
{
    memset(a, 0, sizeof *a);
    a->name = name;
    a->hvec = hvec;
    int rc = find_info(name, &a->info);
    if (rc) {
        tu_err("no device '%s' in this fabric (see 'ntblend device list')", name);
        return rc;
    }
    if (strcmp(a->info.type, "accel")) {
        tu_err("'%s' is a %s, not an accelerator", name, a->info.type);
        return -ENODEV;
    }
    const char *self = getenv("NTBLEND_HOST");
    a->borrowed = strcmp(a->info.host, self) != 0;
    rc = sio_borrow(a->info.id, SIO_EXCLUSIVE, &a->dev);
    if (rc == -EACCES && !a->borrowed) {
        /* Our own device, not lent out yet: lend it (to ourselves). */
        rc = sio_set_available(a->info.id, true);
        if (!rc) {
            a->lent_by_us = true;
            rc = sio_borrow(a->info.id, SIO_EXCLUSIVE, &a->dev);
        }
    }
    if (rc) {
        if (rc == -EACCES)
            tu_err("cannot borrow %s: host %s has not lent it out (run 'ntblend device add %s')",
                   name, a->info.host, name);
        else
            tu_err("cannot borrow %s exclusively: %s", name, strerror(-rc));
        return rc;
    }
    if ((rc = sio_enable(a->dev))) {
        tu_err("%s: cannot enable memory space and bus mastering: %s", name, strerror(-rc));
        return rc;
    }
    a->regp = sio_map_bar(a->dev, ACCEL_BAR_REGS, NULL, &a->regs);
    if (!a->regp) {
        tu_err("%s: cannot map BAR0: %s", name, strerror(errno));
        return -errno;
    }
    if (rd(a, ACCEL_REG_ID) != ACCEL_ID) {
        tu_err("%s: BAR0 ID reads 0x%08x, not an accelerator (0x%08x)", name,
               rd(a, ACCEL_REG_ID), ACCEL_ID);
        return -ENODEV;
    }
    a->memp = sio_map_bar(a->dev, ACCEL_BAR_MEM, &a->mem_size, &a->mem);
    if (!a->memp) {
        tu_err("%s: cannot map BAR2 (device memory): %s", name, strerror(errno));
        return -errno;
    }
    if ((rc = accel_reset(a)))
        return rc;
    if ((rc = sio_enable_vector(a->dev, 0, hvec))) {
        tu_err("%s: cannot route MSI-X vector 0 to this host's vector %u: %s", name, hvec,
               strerror(-rc));
        return rc;
    }
    sio_wait_vector(hvec, &a->seen, 0); /* take the current count */
    return 0;
}

static void accel_close(struct accel *a)
{
    if (!a->dev)
        return;
    if (a->regs) {
        sio_write32(a->regs, ACCEL_REG_CONTROL, 0); /* stop the engine */
        sio_unmap_bar(a->regs);
    }
    if (a->mem)
        sio_unmap_bar(a->mem);
    sio_return(a->dev);
    if (a->lent_by_us)
        sio_set_available(a->info.id, false);
    a->dev = NULL;
}

/* Write descriptor a->head into its ring slot (I/O stores; the doorbell follows). */
static void put_desc(struct accel *a, uint64_t src, uint64_t dst, uint32_t len, uint32_t ctrl,
                     uint32_t value)
{
    volatile struct accel_desc *d =
        (volatile struct accel_desc *)(a->regp + ACCEL_RING_OFF) + a->head % ACCEL_RING_ENTRIES;
    d->src = src;
    d->dst = dst;
    d->len = len;
    d->ctrl = ctrl;
    d->status = 0;
    d->value = value;
    a->head++;
}

static void doorbell(struct accel *a)
{
    atomic_thread_fence(memory_order_release);
    sio_write32(a->regs, ACCEL_REG_HEAD, a->head);
}

static uint32_t ring_free(struct accel *a) { return ACCEL_RING_ENTRIES - (a->head - rd(a, ACCEL_REG_TAIL)); }

/* A failed descriptor: say which and why. */
static int check_errors(struct accel *a)
{
    uint32_t st = rd(a, ACCEL_REG_STATUS);
    if (!(st & (ACCEL_STATUS_ERROR | ACCEL_STATUS_HALTED)) && !rd(a, ACCEL_REG_ERRORS))
        return 0;
    uint32_t e = rd(a, ACCEL_REG_LAST_ERR);
    tu_err("%s: descriptor %u failed: %s (%u); %u error(s), STATUS 0x%x", a->name,
           rd(a, ACCEL_REG_LAST_IDX), err_name(e), e, rd(a, ACCEL_REG_ERRORS), st);
    return -EIO;
}

/* Sleep until the device interrupts (or WAKE_MS passes). */
static void wait_wake(struct accel *a) { sio_wait_vector(a->hvec, &a->seen, WAKE_MS); }

/* Wait until COMPLETED reaches `target` (free-running); fails on a descriptor error or when
 * nothing progresses for OP_TIMEOUT_MS. */
static int wait_completed(struct accel *a, uint32_t target)
{
    uint32_t last = rd(a, ACCEL_REG_COMPLETED);
    uint64_t stall = tu_now_ns();
    for (;;) {
        uint32_t c = rd(a, ACCEL_REG_COMPLETED);
        if ((int32_t)(c - target) >= 0)
            return check_errors(a);
        if (check_errors(a))
            return -EIO;
        if (c != last) {
            last = c;
            stall = tu_now_ns();
        } else if (tu_now_ns() - stall > OP_TIMEOUT_MS * 1000000ull) {
            tu_err("%s: stuck at descriptor %u of %u (STATUS 0x%x)", a->name, c, target,
                   rd(a, ACCEL_REG_STATUS));
            return -ETIMEDOUT;
        }
        if (g_stop)
            return -EINTR;
        wait_wake(a);
    }
}

/* ---------------------------------------------------------------- bandwidth */

static void fill(volatile uint64_t *p, uint64_t bytes, uint64_t seed)
{
    for (uint64_t i = 0; i < bytes / 8; i++)
        p[i] = (seed ^ (i * 0x9e3779b97f4a7c15ull)) + i;
}

/* Copy `size` bytes in `block` descriptors, host -> device (h2d) or device -> host, between
 * ioaddr (bus) and device memory offset 0. Time from the first doorbell to the last
 * completion, in *ns. */
static int copy_run(struct accel *a, uint64_t io, uint64_t size, uint64_t block, bool h2d,
                    uint64_t *ns)
{
    uint64_t n = (size + block - 1) / block;
    uint32_t base = a->head;
    uint64_t t0 = tu_now_ns(), k = 0;
    while (k < n) {
        uint32_t room = ring_free(a);
        if (!room) {
            if (check_errors(a))
                return -EIO;
            if (g_stop)
                return -EINTR;
            wait_wake(a);
            continue;
        }
        for (; room && k < n; room--, k++) {
            uint64_t off = k * block, len = size - off < block ? size - off : block;
            uint32_t ctrl = ACCEL_OP_COPY | (h2d ? ACCEL_DESC_SRC_BUS : ACCEL_DESC_DST_BUS);
            if (k == n - 1 || k % INTR_EVERY == INTR_EVERY - 1)
                ctrl |= ACCEL_DESC_INTR;
            if (h2d)
                put_desc(a, io + off, off, (uint32_t)len, ctrl, 0);
            else
                put_desc(a, off, io + off, (uint32_t)len, ctrl, 0);
        }
        doorbell(a);
    }
    int rc = wait_completed(a, base + (uint32_t)n);
    *ns = tu_now_ns() - t0;
    return rc;
}

static int bandwidth(const struct opts *o)
{
    struct accel a;
    seg_desc_t *sd = NULL;
    seg_local_t *seg = NULL;
    seg_map_t *map = NULL;
    sio_dma_t *dma = NULL;
    int rc = 1;
    bool verified = true;
    uint64_t best[2] = { UINT64_MAX, UINT64_MAX }, sum[2] = { 0, 0 };
    char s1[32], s2[32];

    if (o->block > UINT32_MAX || !o->block || !o->size || o->size % 8) {
        tu_err("--size must be a multiple of 8 and --block between 1 and 4G-1");
        return 2;
    }
    if (accel_open(&a, o->device, (uint32_t)o->vector))
        goto out;
    if (o->size > a.mem_size) {
        tu_err("--size %s is larger than %s's memory (%s)", tu_fmt_size(o->size, s1, sizeof s1),
               a.name, tu_fmt_size(a.mem_size, s2, sizeof s2));
        goto out;
    }
    int e;
    if ((e = seg_open(&sd)) || (e = seg_create(sd, &seg, SEG_ID_AUTO, 2 * o->size))) {
        tu_err("cannot create a %s segment on this host: %s",
               tu_fmt_size(2 * o->size, s1, sizeof s1), seg_strerror(e));
        goto out;
    }
    volatile uint8_t *buf = seg_map_local(seg, 0, 0, 0, &map);
    if (!buf) {
        tu_err("cannot map the segment: %s", strerror(errno));
        goto out;
    }
    uint64_t io;
    if ((e = sio_map_local(a.dev, seg, 0, 2 * o->size, &io, &dma))) {
        tu_err("cannot map the segment for %s: %s", a.name, strerror(-e));
        goto out;
    }
    volatile uint8_t *src = buf, *dst = buf + o->size;
    /* One unmeasured run each way first: it touches the device memory and the segment, and
     * builds the mappings, as bandwidthTest's warm-up does. */
    uint64_t warm;
    fill((volatile uint64_t *)src, o->size, 1);
    if (copy_run(&a, io, o->size, o->block, true, &warm) ||
        copy_run(&a, io + o->size, o->size, o->block, false, &warm))
        goto out;
    for (int r = 0; r < o->repeats && !g_stop; r++) {
        uint64_t seed = 0x5eed0000ull + (uint64_t)r * 0x1234567ull + (uint64_t)getpid();
        fill((volatile uint64_t *)src, o->size, seed);
        memset((void *)dst, 0, o->size);
        uint64_t ns[2];
        if (copy_run(&a, io, o->size, o->block, true, &ns[0]) ||
            copy_run(&a, io + o->size, o->size, o->block, false, &ns[1]))
            goto out;
        for (int d = 0; d < 2; d++) {
            best[d] = ns[d] < best[d] ? ns[d] : best[d];
            sum[d] += ns[d];
        }
        /* The round trip must bring the data back, and the device memory must hold it (a few
         * KiB read by the CPU through BAR2). */
        bool ok = !memcmp((const void *)src, (const void *)dst, o->size);
        uint64_t spot = o->size < 4096 ? o->size : 4096;
        volatile uint8_t *m = a.memp;
        for (uint64_t i = 0; ok && i < spot; i++)
            ok = m[i] == src[i] && m[o->size - spot + i] == src[o->size - spot + i];
        if (!ok) {
            tu_err("run %d: data mismatch after host->%s->host", r + 1, a.name);
            verified = false;
        }
    }
    if (g_stop)
        goto out;
    uint64_t bytes = o->size;
    double h2d = tu_mbps(bytes, best[0]), d2h = tu_mbps(bytes, best[1]);
    double h2d_mean = tu_mbps(bytes * (uint64_t)o->repeats, sum[0]);
    double d2h_mean = tu_mbps(bytes * (uint64_t)o->repeats, sum[1]);
    if (o->json) {
        struct json_object *j = tu_json_begin("accel_bench");
        json_object_object_add(j, "test", json_object_new_string("bandwidth"));
        json_object_object_add(j, "host", json_object_new_string(getenv("NTBLEND_HOST")));
        json_object_object_add(j, "device", json_object_new_string(a.name));
        json_object_object_add(j, "lender", json_object_new_string(a.info.host));
        json_object_object_add(j, "borrowed", json_object_new_boolean(a.borrowed));
        json_object_object_add(j, "size", json_object_new_int64((int64_t)o->size));
        json_object_object_add(j, "block", json_object_new_int64((int64_t)o->block));
        json_object_object_add(j, "repeats", json_object_new_int(o->repeats));
        json_object_object_add(j, "io_addr", json_object_new_int64((int64_t)io));
        json_object_object_add(j, "h2d_mbps", tu_jdouble(h2d, 1));
        json_object_object_add(j, "d2h_mbps", tu_jdouble(d2h, 1));
        json_object_object_add(j, "h2d_mean_mbps", tu_jdouble(h2d_mean, 1));
        json_object_object_add(j, "d2h_mean_mbps", tu_jdouble(d2h_mean, 1));
        json_object_object_add(j, "h2d_best_ns", json_object_new_int64((int64_t)best[0]));
        json_object_object_add(j, "d2h_best_ns", json_object_new_int64((int64_t)best[1]));
        json_object_object_add(j, "verified", json_object_new_boolean(verified));
        puts(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PRETTY));
        json_object_put(j);
    } else {
        printf("accel_bench bandwidth: %s (lender %s, %s from host %s), %s in %s blocks, "
               "best of %d\n", a.name, a.info.host, a.borrowed ? "borrowed" : "local",
               getenv("NTBLEND_HOST"), tu_fmt_size(o->size, s1, sizeof s1),
               tu_fmt_size(o->block, s2, sizeof s2), o->repeats);
        printf("  host-to-device %10.1f MB/s   (mean %.1f)\n", h2d, h2d_mean);
        printf("  device-to-host %10.1f MB/s   (mean %.1f)\n", d2h, d2h_mean);
        printf("  data verified: %s\n", verified ? "yes" : "NO");
    }
    rc = verified ? 0 : 1;
out:
    if (dma)
        sio_unmap(dma);
    if (map)
        seg_unmap(map);
    if (seg)
        seg_remove(seg);
    if (sd)
        seg_close(sd);
    accel_close(&a);
    return rc;
}

/* ---------------------------------------------------------------- ping-pong */

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* Queue rounds [*next, upto) on both rings: B first (its WAIT for the value, then the echo),
 * then A (the value, then its WAIT for the echo). */
static void pp_queue(struct accel *A, struct accel *B, uint64_t ioA, uint64_t ioB,
                     uint64_t *next, uint64_t upto, uint64_t rounds, int batch)
{
    if (*next >= upto)
        return;
    for (uint64_t i = *next; i < upto; i++) {
        uint32_t v = (uint32_t)(i + 1);
        put_desc(B, PP_FLAG, 0, 0, ACCEL_OP_WAIT, v);
        put_desc(B, PP_FLAG, ioA + PP_FLAG, 4, ACCEL_OP_COPY | ACCEL_DESC_DST_BUS, 0);
    }
    doorbell(B);
    for (uint64_t i = *next; i < upto; i++) {
        uint32_t v = (uint32_t)(i + 1);
        uint32_t intr = (v % (uint32_t)batch == 0 || i + 1 == rounds) ? ACCEL_DESC_INTR : 0;
        put_desc(A, PP_TABLE + 4 * i, ioB + PP_FLAG, 4, ACCEL_OP_COPY | ACCEL_DESC_DST_BUS, 0);
        put_desc(A, PP_FLAG, 0, 0, ACCEL_OP_WAIT | intr, v);
    }
    doorbell(A);
    *next = upto;
}

/* One ping-pong of `rounds` rounds on freshly reset devices: the time in *ns, the per-round
 * time of every batch appended to per[*nper] (at most cap), *verified. 0, or -1 on a failure
 * (said). */
static int pp_run(struct accel *A, struct accel *B, uint64_t ioA, uint64_t ioB, uint64_t rounds,
                  int batch, double *per, int cap, int *nper, uint64_t *ns, bool *verified)
{
    /* The counters start at 0; A's "increment" is a table of the values it sends. */
    *(volatile uint32_t *)(A->memp + PP_FLAG) = 0;
    *(volatile uint32_t *)(B->memp + PP_FLAG) = 0;
    volatile uint32_t *table = (volatile uint32_t *)(A->memp + PP_TABLE);
    for (uint64_t i = 0; i < rounds; i++)
        table[i] = (uint32_t)(i + 1);
    atomic_thread_fence(memory_order_seq_cst);
    if (table[rounds - 1] != (uint32_t)rounds || *(volatile uint32_t *)(B->memp + PP_FLAG)) {
        tu_err("%s: CPU stores into BAR2 did not land", A->name);
        return -1;
    }
    uint64_t next = 0, done = 0, done_last = 0;
    const uint64_t window = ACCEL_RING_ENTRIES / 2; /* rounds a ring holds */
    uint64_t t0 = tu_now_ns(), t_last = t0, stall = t0;
    pp_queue(A, B, ioA, ioB, &next, rounds < window ? rounds : window, rounds, batch);
    while (done < rounds) {
        if (g_stop)
            return -1;
        wait_wake(A);
        uint64_t now = tu_now_ns();
        uint64_t d = (uint64_t)(rd(A, ACCEL_REG_COMPLETED) / 2);
        if (check_errors(A) || check_errors(B))
            return -1;
        if (d > done) {
            /* Per-round time over this batch (or these batches, if wake-ups coalesced). */
            per[*nper < cap ? (*nper)++ : cap - 1] =
                (double)(now - t_last) / (double)(d - done_last);
            t_last = now;
            done_last = d;
            done = d;
            stall = now;
        } else if (now - stall > OP_TIMEOUT_MS * 1000000ull) {
            tu_err("ping-pong stuck after %" PRIu64 " of %" PRIu64 " rounds (%s STATUS 0x%x "
                   "flag %u, %s STATUS 0x%x flag %u)", done, rounds, A->name,
                   rd(A, ACCEL_REG_STATUS), *(volatile uint32_t *)(A->memp + PP_FLAG), B->name,
                   rd(B, ACCEL_REG_STATUS), *(volatile uint32_t *)(B->memp + PP_FLAG));
            return -1;
        }
        /* Keep both rings filled: room for whole rounds on both. */
        uint64_t ra = ring_free(A) / 2, rb = ring_free(B) / 2, room = ra < rb ? ra : rb;
        uint64_t upto = next + room > rounds ? rounds : next + room;
        if (upto - next >= (uint64_t)batch || upto == rounds)
            pp_queue(A, B, ioA, ioB, &next, upto, rounds, batch);
    }
    *ns = tu_now_ns() - t0;
    if (wait_completed(B, (uint32_t)(2 * rounds)))
        return -1;

    /* Verify: both counters reached the last value, every descriptor completed cleanly. */
    uint32_t fa = *(volatile uint32_t *)(A->memp + PP_FLAG);
    uint32_t fb = *(volatile uint32_t *)(B->memp + PP_FLAG);
    *verified = fa == (uint32_t)rounds && fb == (uint32_t)rounds &&
                rd(A, ACCEL_REG_COMPLETED) == 2 * rounds &&
                rd(B, ACCEL_REG_COMPLETED) == 2 * rounds && !rd(A, ACCEL_REG_ERRORS) &&
                !rd(B, ACCEL_REG_ERRORS);
    if (!*verified)
        tu_err("verification failed: %s's counter %u, %s's %u (expected %" PRIu64
               "), completed %u/%u, errors %u/%u", A->name, fa, B->name, fb, rounds,
               rd(A, ACCEL_REG_COMPLETED), rd(B, ACCEL_REG_COMPLETED),
               rd(A, ACCEL_REG_ERRORS), rd(B, ACCEL_REG_ERRORS));
    return 0;
}

static int pingpong(const struct opts *o)
{
    struct accel A = { 0 }, B = { 0 };
    sio_dma_t *mA = NULL, *mB = NULL;
    double *per = NULL;
    int rc = 1;
    uint64_t rounds = o->rounds;

    if (!strcmp(o->device, o->peer)) {
        tu_err("--device and --peer must be two different accelerators");
        return 2;
    }
    if (accel_open(&A, o->device, (uint32_t)o->vector) ||
        accel_open(&B, o->peer, (uint32_t)o->vector + 1))
        goto out;
    if (PP_TABLE + 4 * rounds > A.mem_size) {
        tu_err("--rounds %" PRIu64 " does not fit %s's memory", rounds, A.name);
        goto out;
    }
    uint64_t ioA, ioB; /* A's memory as B reaches it, B's as A reaches it */
    int e;
    if ((e = sio_map_peer_bar(A.dev, B.dev, ACCEL_BAR_MEM, &ioB, &mB)) ||
        (e = sio_map_peer_bar(B.dev, A.dev, ACCEL_BAR_MEM, &ioA, &mA))) {
        tu_err("cannot map %s's and %s's memory for each other: %s", A.name, B.name,
               strerror(-e));
        goto out;
    }
    uint64_t nbatch = (rounds + (uint64_t)o->batch - 1) / (uint64_t)o->batch;
    int cap = (int)((nbatch + 64) * (uint64_t)o->repeats);
    per = calloc((size_t)cap, sizeof *per);
    if (!per)
        goto out;
    int nper = 0;
    uint64_t total = 0, best = UINT64_MAX;
    bool verified = true;
    for (int r = 0; r < o->repeats; r++) {
        uint64_t ns;
        bool ok;
        if (r && (accel_reset(&A) || accel_reset(&B)))
            goto out;
        if (pp_run(&A, &B, ioA, ioB, rounds, o->batch, per, cap, &nper, &ns, &ok))
            goto out;
        total += ns;
        best = ns < best ? ns : best;
        verified = verified && ok;
    }

    double mean = (double)total / (double)(rounds * (uint64_t)o->repeats);
    double best_mean = (double)best / (double)rounds;
    qsort(per, (size_t)nper, sizeof *per, cmp_double);
    double median = nper ? (nper % 2 ? per[nper / 2] : (per[nper / 2 - 1] + per[nper / 2]) / 2) : mean;
    double mn = nper ? per[0] : mean, mx = nper ? per[nper - 1] : mean;
    bool same = !strcmp(A.info.host, B.info.host);
    if (o->json) {
        struct json_object *j = tu_json_begin("accel_bench");
        json_object_object_add(j, "test", json_object_new_string("pingpong"));
        json_object_object_add(j, "host", json_object_new_string(getenv("NTBLEND_HOST")));
        json_object_object_add(j, "device", json_object_new_string(A.name));
        json_object_object_add(j, "peer", json_object_new_string(B.name));
        json_object_object_add(j, "device_lender", json_object_new_string(A.info.host));
        json_object_object_add(j, "peer_lender", json_object_new_string(B.info.host));
        json_object_object_add(j, "same_lender", json_object_new_boolean(same));
        json_object_object_add(j, "rounds", json_object_new_int64((int64_t)rounds));
        json_object_object_add(j, "batch", json_object_new_int(o->batch));
        json_object_object_add(j, "total_ns", json_object_new_int64((int64_t)total));
        json_object_object_add(j, "repeats", json_object_new_int(o->repeats));
        json_object_object_add(j, "mean_ns", tu_jdouble(mean, 1));
        json_object_object_add(j, "best_mean_ns", tu_jdouble(best_mean, 1));
        json_object_object_add(j, "median_ns", tu_jdouble(median, 1));
        json_object_object_add(j, "min_batch_ns", tu_jdouble(mn, 1));
        json_object_object_add(j, "max_batch_ns", tu_jdouble(mx, 1));
        json_object_object_add(j, "batches", json_object_new_int(nper));
        json_object_object_add(j, "verified", json_object_new_boolean(verified));
        puts(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PRETTY));
        json_object_put(j);
    } else {
        printf("accel_bench pingpong: %s (lender %s) <-> %s (lender %s), %s, from host %s\n",
               A.name, A.info.host, B.name, B.info.host, same ? "same lender" : "different lenders",
               getenv("NTBLEND_HOST"));
        printf("  %d x %" PRIu64 " rounds: mean %.1f ns per round trip (best run %.1f), median "
               "%.1f ns (per-round time of %d batches of ~%d rounds; min %.1f, max %.1f)\n",
               o->repeats, rounds, mean, best_mean, median, nper, o->batch, mn, mx);
        printf("  data verified: %s\n", verified ? "yes" : "NO");
    }
    rc = verified ? 0 : 1;
out:
    free(per);
    if (mA)
        sio_unmap(mA);
    if (mB)
        sio_unmap(mB);
    accel_close(&B);
    accel_close(&A);
    return rc;
}

/* ---------------------------------------------------------------- main */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ntblend run --host H -- accel_bench bandwidth [--device NAME] [--size 64M]\n"
            "                                   [--block 4M] [--repeat 3] [--json]\n"
            "       ntblend run --host H -- accel_bench pingpong [--device A] [--peer B]\n"
            "                                   [--rounds 10000] [--repeat 3] [--batch 32] [--json]\n"
            "  bandwidth  host<->device copy bandwidth of NAME's DMA engine (default accel0),\n"
            "             between this host's memory and the device memory (BAR2)\n"
            "  pingpong   device-to-device ping-pong between A and B (default accel0, accel1),\n"
            "             run by the devices' WAIT descriptors; time per round trip\n"
            "  --vector V this host's MSI-X vector for the device (pingpong: V and V+1; default 200)\n"
            "A device must be lent out by its host ('ntblend device add NAME'); on its own host\n"
            "the tool lends it out itself. Exit 0 ok, 1 failure or wrong data, 2 usage.\n");
}

int main(int argc, char **argv)
{
    tu_prog = "accel_bench";
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *cmd = argv[1];
    bool bw = !strcmp(cmd, "bandwidth"), pp = !strcmp(cmd, "pingpong");
    if (!bw && !pp) {
        tu_err("unknown test '%s': bandwidth or pingpong (see --help)", cmd);
        return 2;
    }
    struct opts o = { .device = "accel0", .peer = "accel1", .size = 64ull << 20,
                      .block = 4ull << 20, .rounds = 10000, .repeats = 3, .batch = 32,
                      .vector = 200 };
    static const struct option lo[] = {
        { "device", required_argument, NULL, 'd' }, { "peer", required_argument, NULL, 'p' },
        { "size", required_argument, NULL, 's' },   { "block", required_argument, NULL, 'b' },
        { "rounds", required_argument, NULL, 'n' }, { "repeat", required_argument, NULL, 'r' },
        { "batch", required_argument, NULL, 'B' },  { "vector", required_argument, NULL, 'v' },
        { "json", no_argument, NULL, 'j' },         { "help", no_argument, NULL, 'h' },
        { 0 }
    };
    int c;
    optind = 2;
    while ((c = getopt_long(argc, argv, "d:p:s:b:n:r:B:v:jh", lo, NULL)) != -1) {
        bool bad = false;
        switch (c) {
        case 'd': o.device = optarg; break;
        case 'p': o.peer = optarg; break;
        case 's': bad = tu_parse_size(optarg, &o.size) || !o.size; break;
        case 'b': bad = tu_parse_size(optarg, &o.block) || !o.block; break;
        case 'n': bad = tu_parse_u64(optarg, &o.rounds) || !o.rounds || o.rounds > (1u << 30); break;
        case 'r': bad = tu_parse_int(optarg, 1, 1000, &o.repeats); break;
        case 'B': bad = tu_parse_int(optarg, 1, (int)ACCEL_RING_ENTRIES / 4, &o.batch); break;
        case 'v': bad = tu_parse_int(optarg, 0, 254, &o.vector); break;
        case 'j': o.json = true; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
        if (bad) {
            tu_err("bad value '%s' for --%s", optarg,
                   c == 'd' ? "device" : c == 's' ? "size" : c == 'b' ? "block" : c == 'n' ? "rounds"
                   : c == 'r' ? "repeat" : c == 'B' ? "batch (1..64)" : "vector (0..254)");
            return 2;
        }
    }
    if (optind < argc) {
        tu_err("unexpected argument '%s' (see --help)", argv[optind]);
        return 2;
    }
    if (tu_check_env())
        return 2;
    struct sigaction sa = { .sa_handler = on_signal };
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    return bw ? bandwidth(&o) : pingpong(&o);
}
