/*
 * The accelerator's engine (accel_core.h): registers, descriptor ring, COPY and WAIT, error
 * reporting and completion interrupts, one descriptor per step (an NVMe job, accel_nvme.c,
 * takes many). No threads, no fabric: the
 * host operations do every access that leaves the device.
 */
#include <errno.h>
#include <string.h>

#include "accel_core.h"

static inline uint32_t rd32(const struct accel_core *a, uint32_t off)
{
    return __atomic_load_n((uint32_t *)(a->regs + off), __ATOMIC_ACQUIRE);
}

static inline void wr32(struct accel_core *a, uint32_t off, uint32_t v)
{
    __atomic_store_n((uint32_t *)(a->regs + off), v, __ATOMIC_RELEASE);
}

static struct accel_desc *ring_slot(struct accel_core *a, uint32_t idx)
{
    return (struct accel_desc *)(a->regs + ACCEL_RING_OFF) + idx % ACCEL_RING_ENTRIES;
}

uint32_t accel_core_head(const struct accel_core *a)
{
    return rd32(a, ACCEL_REG_HEAD);
}

void accel_core_publish(struct accel_core *a)
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

static void do_reset(struct accel_core *a)
{
    accel_nvme_abort(a);
    a->tail = a->completed = a->errors = a->last_err = a->last_idx = 0;
    a->bytes = 0;
    a->error = a->halted = a->waiting = false;
    wr32(a, ACCEL_REG_HEAD, 0);
    accel_core_publish(a);
    __atomic_fetch_and((uint32_t *)(a->regs + ACCEL_REG_CONTROL), ~ACCEL_CTRL_RESET,
                       __ATOMIC_ACQ_REL);
}

void accel_core_flr(struct accel_core *a) { do_reset(a); }

void accel_core_init(struct accel_core *a)
{
    wr32(a, ACCEL_REG_CONTROL, 0);
    wr32(a, ACCEL_REG_VECTOR, 0);
    do_reset(a);
}

/* MSI-X: a vector whose pending bit is set and that is no longer masked is delivered now. */
static void deliver_pending(struct accel_core *a)
{
    uint64_t *pba = (uint64_t *)(void *)(a->regs + ACCEL_MSIX_PBA);
    uint64_t pend = __atomic_load_n(pba, __ATOMIC_ACQUIRE);
    if (!pend || !a->ops->msix_enabled(a->ctx))
        return;
    for (uint32_t v = 0; v < ACCEL_MSIX_VECTORS; v++)
        if ((pend & (1ull << v)) && !(rd32(a, ACCEL_MSIX_TABLE + 16 * v + 12) & 1u))
            a->ops->msix(a->ctx, v);
}

uint32_t accel_err_of(int rc)
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

bool accel_mem_range_ok(const struct accel_core *a, uint64_t off, uint64_t len)
{
    return off <= a->mem_size && len <= a->mem_size - off;
}

static uint32_t exec_copy(struct accel_core *a, const struct accel_desc *d)
{
    bool sbus = d->ctrl & ACCEL_DESC_SRC_BUS, dbus = d->ctrl & ACCEL_DESC_DST_BUS;
    uint64_t len = d->len;
    if (!len || (!sbus && !accel_mem_range_ok(a, d->src, len)) || (!dbus && !accel_mem_range_ok(a, d->dst, len)))
        return ACCEL_ERR_RANGE;
    if ((sbus || dbus) && !a->ops->bus_master(a->ctx))
        return ACCEL_ERR_BUS_MASTER;
    int rc;
    if (!sbus && !dbus) {
        memmove(a->mem + d->dst, a->mem + d->src, len);
        rc = 0;
    } else if (!sbus) {
        rc = a->ops->dma_write(a->ctx, d->dst, a->mem + d->src, len);
    } else if (!dbus) {
        rc = a->ops->dma_read(a->ctx, d->src, a->mem + d->dst, len);
    } else {
        rc = a->ops->bus_copy(a->ctx, d->dst, d->src, len);
    }
    if (!rc)
        a->bytes += len;
    return accel_err_of(rc);
}

/* ACCEL_OP_WAIT: true when the descriptor is done (the word reached the value, or *err). */
static bool wait_ready(struct accel_core *a, const struct accel_desc *d, uint32_t *err)
{
    if (d->src % 4 || !accel_mem_range_ok(a, d->src, 4)) {
        *err = ACCEL_ERR_RANGE;
        return true;
    }
    uint32_t w = __atomic_load_n((uint32_t *)(a->mem + d->src), __ATOMIC_ACQUIRE);
    *err = ACCEL_ERR_NONE;
    return (int32_t)(w - d->value) >= 0;
}

static void complete(struct accel_core *a, uint32_t idx, uint32_t ctrl, uint32_t err)
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
    accel_core_publish(a);
    if (ctrl & ACCEL_DESC_INTR) /* without MSI-X enabled nobody is told */
        a->ops->msix(a->ctx, rd32(a, ACCEL_REG_VECTOR));
}

enum accel_step accel_core_step(struct accel_core *a)
{
    uint32_t ctl = rd32(a, ACCEL_REG_CONTROL);
    if (ctl & ACCEL_CTRL_RESET) {
        do_reset(a);
        return ACCEL_STEP_RAN;
    }
    deliver_pending(a);
    uint32_t head = rd32(a, ACCEL_REG_HEAD);
    if (!(ctl & ACCEL_CTRL_ENABLE) || a->halted || head == a->tail) {
        a->waiting = false; /* disabled or reset under a WAIT */
        accel_core_publish(a);
        return ACCEL_STEP_IDLE;
    }
    if (head - a->tail > ACCEL_RING_ENTRIES) {
        a->halted = a->error = true;
        a->last_err = ACCEL_ERR_RING;
        a->last_idx = a->tail;
        accel_core_publish(a);
        return ACCEL_STEP_RAN;
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
                accel_core_publish(a);
            }
            return ACCEL_STEP_WAITING;
        }
        a->waiting = false;
        break;
    case ACCEL_OP_NVME:
        switch (accel_nvme_step(a, &d, &err)) {
        case ACCEL_NVME_PROGRESS:
            return ACCEL_STEP_RAN;
        case ACCEL_NVME_WAITING:
            if (!a->waiting) {
                a->waiting = true;
                accel_core_publish(a);
            }
            return ACCEL_STEP_WAITING;
        case ACCEL_NVME_DONE:
            a->waiting = false;
            break;
        }
        break;
    default:
        err = ACCEL_ERR_OPCODE;
    }
    complete(a, a->tail, d.ctrl, err);
    return ACCEL_STEP_RAN;
}
