/*
 * The accelerator model ("GPU-like"): a large memory BAR and a DMA copy engine driven by a
 * ring of descriptors in BAR0 (include/ntblend/accel_regs.h has the register map,
 * docs/accel-model.md how to use it). Enough to reproduce the papers' bandwidthTest (device memory <-> host RAM) and
 * peer-to-peer ping-pong (device memory -> another device's BAR, possibly through NTB
 * windows) experiments (smartio-tocs-2021 §7.1.4-7.1.5).
 *
 * One thread per function executes descriptors in order. Copies that touch a bus address are
 * DMA as the function's own requester (IOMMU, address map, windows; only while Bus Master
 * Enable is set); device-memory-to-device-memory copies are a memmove. The thread sleeps on
 * the function's reg_seq futex when idle, after a short bounded poll.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ntblend/accel_regs.h"
#include "models.h"

#define IDLE_POLL_NS 20000 /* a streaming driver usually rings again within microseconds */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

struct accel {
    struct fab *f;
    uint32_t fn;
    pthread_t thread;
    _Atomic int stop;
    uint8_t *regs;     /* BAR0 */
    uint8_t *mem;      /* BAR2: device memory */
    uint64_t mem_size;
    /* Device-owned state, published into the RO registers. */
    uint32_t tail, completed, errors, last_err, last_idx;
    uint64_t bytes;
    bool error, halted, waiting;
};

static inline uint32_t rd32(const struct accel *a, uint32_t off)
{
    return __atomic_load_n((uint32_t *)(a->regs + off), __ATOMIC_ACQUIRE);
}

static inline void wr32(struct accel *a, uint32_t off, uint32_t v)
{
    __atomic_store_n((uint32_t *)(a->regs + off), v, __ATOMIC_RELEASE);
}

static struct accel_desc *ring_slot(struct accel *a, uint32_t idx)
{
    return (struct accel_desc *)(a->regs + ACCEL_RING_OFF) + idx % ACCEL_RING_ENTRIES;
}

/* Rewrite every register the device owns (a driver's stores into them do not stick). */
static void publish(struct accel *a)
{
    uint32_t head = rd32(a, ACCEL_REG_HEAD);
    uint32_t st = ACCEL_STATUS_READY | (head != a->tail ? ACCEL_STATUS_BUSY : 0) |
                  (a->error ? ACCEL_STATUS_ERROR : 0) | (a->halted ? ACCEL_STATUS_HALTED : 0) |
                  (a->waiting ? ACCEL_STATUS_WAITING : 0);
    wr32(a, ACCEL_REG_ID, ACCEL_ID);
    wr32(a, ACCEL_REG_VERSION, ACCEL_VERSION);
    wr32(a, ACCEL_REG_CAPS, ACCEL_RING_ENTRIES | ACCEL_MSIX_VECTORS << 16);
    wr32(a, ACCEL_REG_MEM_LO, (uint32_t)a->mem_size);
    wr32(a, ACCEL_REG_MEM_HI, (uint32_t)(a->mem_size >> 32));
    wr32(a, ACCEL_REG_TAIL, a->tail);
    wr32(a, ACCEL_REG_COMPLETED, a->completed);
    wr32(a, ACCEL_REG_ERRORS, a->errors);
    wr32(a, ACCEL_REG_LAST_ERR, a->last_err);
    wr32(a, ACCEL_REG_LAST_IDX, a->last_idx);
    wr32(a, ACCEL_REG_BYTES_LO, (uint32_t)a->bytes);
    wr32(a, ACCEL_REG_BYTES_HI, (uint32_t)(a->bytes >> 32));
    wr32(a, ACCEL_REG_STATUS, st);
}

static void do_reset(struct accel *a)
{
    a->tail = a->completed = a->errors = a->last_err = a->last_idx = 0;
    a->bytes = 0;
    a->error = a->halted = a->waiting = false;
    wr32(a, ACCEL_REG_HEAD, 0);
    publish(a);
    __atomic_fetch_and((uint32_t *)(a->regs + ACCEL_REG_CONTROL), ~ACCEL_CTRL_RESET,
                       __ATOMIC_ACQ_REL);
}

static bool bus_master(struct accel *a)
{
    return fab_cfg_read(a->f, a->fn, 0x04, 2) & FAB_CMD_BME;
}

/* MSI-X: a vector whose pending bit is set and that is no longer masked is delivered now. */
static void deliver_pending(struct accel *a)
{
    _Atomic uint64_t *pba = (_Atomic uint64_t *)(void *)(a->regs + ACCEL_MSIX_PBA);
    uint64_t pend = atomic_load(pba);
    if (!pend)
        return;
    uint32_t ctrl = fab_cfg_read(a->f, a->fn, FAB_CFG_MSIX + 2, 2);
    if (!(ctrl & 0x8000u) || (ctrl & 0x4000u))
        return;
    for (uint32_t v = 0; v < ACCEL_MSIX_VECTORS; v++)
        if ((pend & (1ull << v)) && !(rd32(a, ACCEL_MSIX_TABLE + 16 * v + 12) & 1u))
            fab_fn_msix(a->f, a->fn, v);
}

static uint32_t err_code(int rc)
{
    switch (rc) {
    case 0: return ACCEL_ERR_NONE;
    case -EIO: return ACCEL_ERR_ABORT;
    case -EFAULT: return ACCEL_ERR_FAULT;
    case -EACCES: return ACCEL_ERR_ACCESS;
    case -ENOLINK: return ACCEL_ERR_LINK;
    default: return ACCEL_ERR_OTHER;
    }
}

static bool mem_range_ok(const struct accel *a, uint64_t off, uint64_t len)
{
    return off <= a->mem_size && len <= a->mem_size - off;
}

/* DMA read of [src, src+len) into device memory. Resolved first, so a fault writes nothing
 * (hardware would land partial data; tests and drivers prefer all-or-nothing, and the
 * fabric's own engines behave that way). */
static int dma_in(struct accel *a, uint64_t src, uint8_t *dst, uint64_t len)
{
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

static uint32_t exec_copy(struct accel *a, const struct accel_desc *d)
{
    bool sbus = d->ctrl & ACCEL_DESC_SRC_BUS, dbus = d->ctrl & ACCEL_DESC_DST_BUS;
    uint64_t len = d->len;
    if (!len || (!sbus && !mem_range_ok(a, d->src, len)) || (!dbus && !mem_range_ok(a, d->dst, len)))
        return ACCEL_ERR_RANGE;
    if ((sbus || dbus) && !bus_master(a))
        return ACCEL_ERR_BUS_MASTER;
    int rc;
    const struct fab_function *fx = fab_func(a->f, a->fn);
    if (!sbus && !dbus) {
        memmove(a->mem + d->dst, a->mem + d->src, len);
        rc = 0;
    } else if (!sbus) {
        rc = fab_fn_dma_write(a->f, a->fn, d->dst, a->mem + d->src, len);
    } else if (!dbus) {
        rc = dma_in(a, d->src, a->mem + d->dst, len);
    } else {
        rc = fab_dev_copy(a->f, fx->host, fx->rid, d->dst, d->src, len);
    }
    if (!rc)
        a->bytes += len;
    return err_code(rc);
}

/* ACCEL_OP_WAIT: true when the descriptor is done (the word reached the value, or *err). */
static bool wait_ready(struct accel *a, const struct accel_desc *d, uint32_t *err)
{
    if (d->src % 4 || !mem_range_ok(a, d->src, 4)) {
        *err = ACCEL_ERR_RANGE;
        return true;
    }
    uint32_t w = __atomic_load_n((uint32_t *)(a->mem + d->src), __ATOMIC_ACQUIRE);
    *err = ACCEL_ERR_NONE;
    return (int32_t)(w - d->value) >= 0;
}

static void complete(struct accel *a, uint32_t idx, uint32_t ctrl, uint32_t err)
{
    __atomic_store_n(&ring_slot(a, idx)->status, ACCEL_DESC_DONE | err, __ATOMIC_RELEASE);
    if (err) {
        a->errors++;
        a->last_err = err;
        a->last_idx = idx;
        a->error = true;
    }
    a->tail = idx + 1;
    a->completed++;
    publish(a);
    if (ctrl & ACCEL_DESC_INTR)
        fab_fn_msix(a->f, a->fn, rd32(a, ACCEL_REG_VECTOR)); /* no MSI-X: nobody to tell */
}

static void *accel_thread(void *arg)
{
    struct accel *a = arg;
    struct fab_function *fx = fab_func(a->f, a->fn);
    while (!atomic_load(&a->stop)) {
        uint32_t seen = atomic_load(&fx->reg_seq);
        uint32_t ctl = rd32(a, ACCEL_REG_CONTROL);
        if (ctl & ACCEL_CTRL_RESET) {
            do_reset(a);
            continue;
        }
        deliver_pending(a);
        uint32_t head = rd32(a, ACCEL_REG_HEAD);
        if ((ctl & ACCEL_CTRL_ENABLE) && !a->halted && head != a->tail) {
            if (head - a->tail > ACCEL_RING_ENTRIES) {
                a->halted = a->error = true;
                a->last_err = ACCEL_ERR_RING;
                a->last_idx = a->tail;
                publish(a);
                continue;
            }
            struct accel_desc d;
            memcpy(&d, ring_slot(a, a->tail), sizeof d);
            uint32_t err = ACCEL_ERR_NONE;
            switch (d.ctrl & ACCEL_OP_MASK) {
            case ACCEL_OP_COPY:
                err = exec_copy(a, &d);
                break;
            case ACCEL_OP_WAIT:
                if (!wait_ready(a, &d, &err)) {
                    if (!a->waiting) {
                        a->waiting = true;
                        publish(a);
                    }
                    /* A peer's DMA into BAR2 or any register write wakes us; CPU stores into
                     * BAR2 are seen at the next recheck. */
                    fab_futex_wait(&fx->reg_seq, seen, ACCEL_WAIT_RECHECK_US * 1000ll);
                    continue;
                }
                a->waiting = false;
                break;
            default:
                err = ACCEL_ERR_OPCODE;
            }
            complete(a, a->tail, d.ctrl, err);
            continue;
        }
        a->waiting = false; /* disabled or reset under a WAIT */
        publish(a);
        uint64_t until = fab_now_ns() + IDLE_POLL_NS;
        while (atomic_load(&fx->reg_seq) == seen && rd32(a, ACCEL_REG_HEAD) == head &&
               fab_now_ns() < until)
            cpu_relax();
        if (atomic_load(&fx->reg_seq) == seen && rd32(a, ACCEL_REG_HEAD) == head &&
            !atomic_load(&a->stop))
            fab_futex_wait(&fx->reg_seq, seen, -1);
    }
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
    a->regs = fab_bar_mem(f, fn, b0->off, b0->size);
    a->mem = fab_bar_mem(f, fn, b2->off, b2->size);
    a->mem_size = b2->size;
    if (!a->regs || !a->mem) {
        int rc = -errno;
        fprintf(stderr, "accel %s: cannot map BARs: %s\n", fx->name, strerror(errno));
        free(a);
        return rc;
    }
    /* Power-on: engine disabled, ring empty. */
    wr32(a, ACCEL_REG_CONTROL, 0);
    wr32(a, ACCEL_REG_VECTOR, 0);
    do_reset(a);
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
    wr32(a, ACCEL_REG_STATUS, 0);
    free(a);
}

const struct model_ops accel_model_ops = { "accel", accel_start, accel_stop };
