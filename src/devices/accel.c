/*
 * The accelerator model ("GPU-like"): a large memory BAR and a DMA copy engine driven by a
 * ring of descriptors in BAR0 (include/ntblend/accel_regs.h has the register map,
 * docs/accel-model.md how to use it). Enough to reproduce the papers' bandwidthTest (device memory <-> host RAM) and
 * peer-to-peer ping-pong (device memory -> another device's BAR, possibly through NTB
 * windows) experiments (smartio-tocs-2021 §7.1.4-7.1.5), and to drive an NVMe itself
 * (device-initiated I/O, §6.4: accel_nvme.c).
 *
 * The engine (registers, ring, descriptors) is accel_core.c; this file binds it to a function
 * of the fabric. One thread per function executes descriptors in order. Copies that touch a
 * bus address are DMA as the function's own requester (IOMMU, address map, windows; only
 * while Bus Master Enable is set); device-memory-to-device-memory copies are a memmove. The
 * thread sleeps on the function's reg_seq futex when idle, after a short bounded poll.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "accel_core.h"
#include "models.h"

#define IDLE_POLL_NS 20000 /* a streaming driver usually rings again within microseconds */

struct accel {
    struct accel_core core;
    struct fab *f;
    uint32_t fn;
    pthread_t thread;
    _Atomic int stop;
};

/* ---- the engine's host operations, on the fabric ---- */

static bool host_bus_master(void *ctx)
{
    struct accel *a = ctx;
    return fab_cfg_read(a->f, a->fn, 0x04, 2) & FAB_CMD_BME;
}

static bool host_msix_enabled(void *ctx)
{
    struct accel *a = ctx;
    uint32_t ctrl = fab_cfg_read(a->f, a->fn, FAB_CFG_MSIX + 2, 2);
    return (ctrl & 0x8000u) && !(ctrl & 0x4000u);
}

static void host_msix(void *ctx, uint32_t vector)
{
    struct accel *a = ctx;
    fab_fn_msix(a->f, a->fn, vector);
}

/* Resolved first, so a fault writes nothing (hardware would land partial data; tests and
 * drivers prefer all-or-nothing, and the fabric's own engines behave that way). */
static int host_dma_read(void *ctx, uint64_t src, void *dst, uint64_t len)
{
    struct accel *a = ctx;
    const struct fab_function *fx = fab_func(a->f, a->fn);
    for (uint64_t off = 0; off < len;) {
        struct fab_target t;
        int rc = fab_resolve_probe(a->f, fx->host, fx->rid, src + off, len - off, false, &t);
        if (rc)
            return rc;
        if (t.err || (t.region != FAB_REGION_RAM && t.region != FAB_REGION_DEVICE) || !t.len) {
            /* Repeat the failing access for real: the fault is recorded as the fabric does. */
            uint8_t scratch[64];
            uint64_t n = t.len && t.len < sizeof scratch ? t.len : sizeof scratch;
            if (n > len - off)
                n = len - off;
            rc = fab_fn_dma_read(a->f, a->fn, src + off, scratch, n);
            return rc ? rc : (t.err ? t.err : -EIO);
        }
        off += t.len;
    }
    return fab_fn_dma_read(a->f, a->fn, src, dst, len);
}

static int host_dma_write(void *ctx, uint64_t dst, const void *src, uint64_t len)
{
    struct accel *a = ctx;
    return fab_fn_dma_write(a->f, a->fn, dst, src, len);
}

static int host_bus_copy(void *ctx, uint64_t dst, uint64_t src, uint64_t len)
{
    struct accel *a = ctx;
    const struct fab_function *fx = fab_func(a->f, a->fn);
    return fab_dev_copy(a->f, fx->host, fx->rid, dst, src, len);
}

static const struct accel_host_ops fabric_host_ops = {
    .bus_master = host_bus_master,
    .msix_enabled = host_msix_enabled,
    .msix = host_msix,
    .dma_read = host_dma_read,
    .dma_write = host_dma_write,
    .bus_copy = host_bus_copy,
};

struct ring_wait {
    struct accel *a;
    struct fab_function *fx;
    uint32_t seen, head;
};

/* A register write (reg_seq), a descriptor queued (the ring's head) or the end. */
static bool rang(void *arg)
{
    struct ring_wait *r = arg;
    return atomic_load(&r->fx->reg_seq) != r->seen || accel_core_head(&r->a->core) != r->head ||
           atomic_load(&r->a->stop);
}

static void *accel_thread(void *arg)
{
    struct accel *a = arg;
    struct fab_function *fx = fab_func(a->f, a->fn);
    /* Idle: the wait policy (src/wait), spinning up to IDLE_POLL_NS, then asleep on reg_seq. */
    struct wpol_site site = WPOL_SITE("accel model", IDLE_POLL_NS, 0);
    /* Waiting under a WAIT or an NVMe job: the word or the completion is usually a peer's DMA
     * into BAR2 a few microseconds away, so poll as long as those have lately taken, then
     * sleep until the DMA's notification (CPU stores are seen at the recheck). */
    struct wpol_site waiting = WPOL_SITE("accel model (waiting)", IDLE_POLL_NS, 0);
    struct ring_wait r = { a, fx, 0, 0 };
    struct wpol_how how = { .ready = rang, .arg = &r, .word = &fx->reg_seq,
                            .sleepers = &fx->reg_waiters, .sleep_ns = 1000000000 };
    uint64_t swept = 0;
    bool watching = false;
    fab_fn_watch(a->f, a->fn, ACCEL_BAR_MEM, false); /* a model before us may have left it */
    uint32_t gen = atomic_load(&fx->reset_gen);
    fab_fn_reset_done(fx, gen);
    while (!atomic_load(&a->stop)) {
        uint32_t seen = atomic_load(&fx->reg_seq);
        if (atomic_load(&fx->reset_gen) != gen) { /* an FLR: the registers are cleared */
            gen = atomic_load(&fx->reset_gen);
            accel_core_flr(&a->core);
            fab_fn_reset_done(fx, gen);
        }
        uint32_t head = accel_core_head(&a->core);
        switch (accel_core_step(&a->core)) {
        case ACCEL_STEP_RAN:
            continue;
        case ACCEL_STEP_WAITING:
            /* A peer's DMA into BAR2 wakes us once BAR2 is watched (look again first: a
             * write before the watch was not announced), as does any register write; CPU
             * stores into BAR2 are seen at the next recheck. */
            if (!watching) {
                fab_fn_watch(a->f, a->fn, ACCEL_BAR_MEM, true);
                watching = true;
                continue;
            }
            r.seen = seen;
            r.head = head;
            how.deadline_ns = wpol_now_ns() + ACCEL_WAIT_RECHECK_US * 1000ull;
            how.sleep_ns = ACCEL_WAIT_RECHECK_US * 1000ull;
            wpol_wait(&waiting, &how);
            continue;
        case ACCEL_STEP_IDLE:
            break;
        }
        if (watching) { /* nothing waits for BAR2: devices' writes into it need not wake us */
            fab_fn_watch(a->f, a->fn, ACCEL_BAR_MEM, false);
            watching = false;
        }
        r.seen = seen;
        r.head = head;
        /* A mapped BAR0 (a SISCI program's) moves HEAD and CTRL with plain stores, which bump
         * no reg_seq: rang sees HEAD while spinning, and no sleep is longer than a tick. */
        bool raw = fab_fn_raw_watch(a->f, a->fn, &swept);
        how.deadline_ns = raw ? wpol_now_ns() + FAB_RAW_TICK_NS : 0;
        how.sleep_ns = raw ? FAB_RAW_TICK_NS : 1000000000;
        wpol_wait(&site, &how);
    }
    if (watching)
        fab_fn_watch(a->f, a->fn, ACCEL_BAR_MEM, false);
    wpol_site_done(&site);
    wpol_site_done(&waiting);
    return NULL;
}

static int accel_start(struct fab *f, uint32_t fn, void **state)
{
    const struct fab_function *fx = fab_func(f, fn);
    const struct fab_bar *b0 = &fx->bar[ACCEL_BAR_REGS], *b2 = &fx->bar[ACCEL_BAR_MEM];
    if (b0->kind != FAB_BAR_REGS || b0->size < ACCEL_MSIX_PBA + 4096 || b2->kind != FAB_BAR_MEM) {
        fprintf(stderr, "accel %s: unexpected BAR layout\n", fx->name);
        return -EINVAL;
    }
    struct accel *a = calloc(1, sizeof *a);
    if (!a)
        return -ENOMEM;
    a->f = f;
    a->fn = fn;
    a->core.ops = &fabric_host_ops;
    a->core.ctx = a;
    a->core.regs = fab_bar_mem(f, fn, b0->off, b0->size);
    a->core.mem = fab_bar_mem(f, fn, b2->off, b2->size);
    a->core.mem_size = b2->size;
    if (!a->core.regs || !a->core.mem) {
        int rc = -errno;
        fprintf(stderr, "accel %s: cannot map BARs: %s\n", fx->name, strerror(errno));
        free(a);
        return rc;
    }
    accel_core_init(&a->core);
    int rc = pthread_create(&a->thread, NULL, accel_thread, a);
    if (rc) {
        free(a);
        return -rc;
    }
    char name[16];
    snprintf(name, sizeof name, "%.15s", fx->name);
    pthread_setname_np(a->thread, name);
    *state = a;
    return 0;
}

static void accel_stop(void *state)
{
    struct accel *a = state;
    if (!a)
        return;
    atomic_store(&a->stop, 1);
    fab_fn_notify(a->f, a->fn);
    pthread_join(a->thread, NULL);
    __atomic_store_n((uint32_t *)(a->core.regs + ACCEL_REG_STATUS), 0, __ATOMIC_RELEASE);
    free(a);
}

const struct model_ops accel_model_ops = { accel_start, accel_stop };
