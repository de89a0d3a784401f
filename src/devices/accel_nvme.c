/*
 * The accelerator's NVMe jobs (ACCEL_OP_NVME): device-initiated I/O as a long-running GPU
 * kernel does it in smartio-tocs-2021 §6.4 (Figs. 18-19). The submission and completion
 * queues live in the accelerator's own memory; the engine writes commands there, rings the
 * NVMe's SQ doorbell with a peer-to-peer write, takes the completions the NVMe posts into its
 * memory, and rings the CQ doorbell. Data moves between the NVMe and the accelerator's memory;
 * no CPU is involved once the descriptor is queued.
 *
 * A job keeps up to qd commands in flight. It ends when every command completed (errors are
 * counted, the first one kept), or with the queue marked broken when something left commands
 * of unknown fate: a doorbell that did not arrive (link down, master abort, IOMMU fault) or no
 * completion within the job's timeout. A broken queue refuses jobs until the driver creates it
 * again (deleting the SQ on the NVMe aborts whatever it still held), so a late completion can
 * never be taken for a later job's: the driver sees errors, never wrong data.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "accel_core.h"
#include "ntblend/nvme_spec.h"

#define DEFAULT_TIMEOUT_MS 10000u

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static bool pow2(uint64_t v) { return v && !(v & (v - 1)); }

/* The queue's block and the job's results go back into device memory, where the driver
 * reads them once the descriptor is done. */
static void save(struct accel_core *a)
{
    struct accel_nvme_run *r = &a->nvme;
    struct accel_nvme_queue *q = (struct accel_nvme_queue *)(a->mem + r->job.queue_off);
    __atomic_store_n(&q->sq_tail, r->q.sq_tail, __ATOMIC_RELAXED);
    __atomic_store_n(&q->cq_head, r->q.cq_head, __ATOMIC_RELAXED);
    __atomic_store_n(&q->phase, r->q.phase, __ATOMIC_RELAXED);
    __atomic_store_n(&q->broken, r->q.broken, __ATOMIC_RELAXED);
    struct accel_nvme_job *j = (struct accel_nvme_job *)(a->mem + r->job_off);
    __atomic_store_n(&j->done, r->completed - r->failed, __ATOMIC_RELAXED);
    __atomic_store_n(&j->failed, r->failed, __ATOMIC_RELAXED);
    __atomic_store_n(&j->status, r->job.status, __ATOMIC_RELAXED);
    __atomic_store_n(&j->first_failed, r->job.first_failed, __ATOMIC_RELAXED);
    __atomic_store_n(&j->bytes, (uint64_t)(r->completed - r->failed) * r->bytes_per_cmd,
                     __ATOMIC_RELEASE);
}

static uint32_t finish(struct accel_core *a)
{
    struct accel_nvme_run *r = &a->nvme;
    if (r->err) /* a doorbell lost or commands unanswered: their fate is unknown */
        r->q.broken = 1;
    save(a);
    r->active = false;
    a->bytes += (uint64_t)(r->completed - r->failed) * r->bytes_per_cmd;
    return r->err ? r->err : r->failed ? ACCEL_ERR_NVME : ACCEL_ERR_NONE;
}

void accel_nvme_abort(struct accel_core *a)
{
    struct accel_nvme_run *r = &a->nvme;
    if (!r->active)
        return;
    r->err = ACCEL_ERR_OTHER;
    r->q.broken = 1;
    finish(a);
}

/* Check the job and its queue against device memory; ACCEL_ERR_* or 0. */
static uint32_t start(struct accel_core *a, const struct accel_desc *d)
{
    struct accel_nvme_run *r = &a->nvme;
    if (d->src % 8 || !accel_mem_range_ok(a, d->src, sizeof r->job))
        return ACCEL_ERR_RANGE;
    memset(r, 0, sizeof *r);
    r->job_off = d->src;
    memcpy(&r->job, a->mem + d->src, sizeof r->job);
    const struct accel_nvme_job *j = &r->job;
    if (j->queue_off % 8 || !accel_mem_range_ok(a, j->queue_off, sizeof r->q))
        return ACCEL_ERR_JOB;
    memcpy(&r->q, a->mem + j->queue_off, sizeof r->q);
    struct accel_nvme_queue *q = &r->q;
    if (q->broken)
        return ACCEL_ERR_BROKEN;
    uint64_t bytes = (uint64_t)j->nlb * j->block;
    /* A command's PRP list holds at most one entry per page after its first. */
    uint64_t entries = pow2(q->page) ? (bytes + q->page - 1) / q->page : UINT64_MAX;
    if (q->depth < 2 || q->depth > ACCEL_NVME_MAX_DEPTH || !pow2(q->page) || q->page < 4096 ||
        q->page > 65536 || !pow2(q->prp_bytes) || q->prp_bytes < 8 || q->prp_bytes > q->page ||
        q->sq_tail >= q->depth || q->cq_head >= q->depth || q->phase > 1 ||
        !accel_mem_range_ok(a, q->sq_off, 64ull * q->depth) ||
        !accel_mem_range_ok(a, q->cq_off, 16ull * q->depth) ||
        !accel_mem_range_ok(a, q->prp_off, (uint64_t)(q->depth - 1) * q->prp_bytes) ||
        (j->opc != NVME_CMD_READ && j->opc != NVME_CMD_WRITE) || !j->nlb || j->nlb > 65536 ||
        !pow2(j->block) || j->block < 512 || j->block > 65536 || !j->count || !j->qd ||
        j->qd >= q->depth || j->data_off % 4 || entries > q->prp_bytes / 8 ||
        j->count > a->mem_size / bytes ||
        !accel_mem_range_ok(a, j->data_off, bytes * j->count) ||
        (j->status_off && (j->status_off % 2 || !accel_mem_range_ok(a, j->status_off, 2ull * j->count))))
        return ACCEL_ERR_JOB;
    if (!a->ops->bus_master(a->ctx))
        return ACCEL_ERR_BUS_MASTER;
    r->bytes_per_cmd = bytes;
    r->timeout_ns = (uint64_t)(j->timeout_ms ? j->timeout_ms : DEFAULT_TIMEOUT_MS) * 1000000ull;
    r->deadline_ns = now_ns() + r->timeout_ns;
    r->job.status = 0;
    r->job.first_failed = 0;
    if (j->status_off)
        memset(a->mem + j->status_off, 0xff, 2ull * j->count);
    r->active = true;
    return ACCEL_ERR_NONE;
}

/* PRP1/PRP2 for command identifier cid moving bytes at the NVMe's address io. */
static void prp(struct accel_core *a, uint32_t cid, struct nvme_sqe *s, uint64_t io, uint64_t len)
{
    const struct accel_nvme_queue *q = &a->nvme.q;
    uint64_t page = q->page, first = page - (io & (page - 1));
    s->prp1 = io;
    if (len <= first)
        return;
    if (len - first <= page) {
        s->prp2 = io + first;
        return;
    }
    uint64_t off = q->prp_off + (uint64_t)cid * q->prp_bytes, n = 0;
    for (uint64_t p = io + first; p < io + len; p += page, n++)
        memcpy(a->mem + off + 8 * n, &p, 8);
    s->prp2 = q->mem_io + off;
}

/* Fill the free SQ slots up to qd, then ring once. True when commands went out. */
static bool submit(struct accel_core *a)
{
    struct accel_nvme_run *r = &a->nvme;
    struct accel_nvme_queue *q = &r->q;
    const struct accel_nvme_job *j = &r->job;
    uint32_t n = 0;
    while (r->submitted < j->count && r->inflight < j->qd) {
        uint32_t cid = r->next_cid;
        while (r->cmd[cid]) /* qd < depth: a free one exists */
            cid = (cid + 1) % (q->depth - 1);
        r->next_cid = (cid + 1) % (q->depth - 1);
        uint32_t i = r->submitted;
        uint64_t lba = j->slba + (uint64_t)i * j->nlb;
        struct nvme_sqe s = { .opc = (uint8_t)j->opc, .cid = (uint16_t)cid, .nsid = j->nsid,
                              .cdw10 = (uint32_t)lba, .cdw11 = (uint32_t)(lba >> 32),
                              .cdw12 = j->nlb - 1 };
        prp(a, cid, &s, q->mem_io + j->data_off + (uint64_t)i * r->bytes_per_cmd, r->bytes_per_cmd);
        memcpy(a->mem + q->sq_off + 64ull * q->sq_tail, &s, sizeof s);
        r->cmd[cid] = i + 1;
        q->sq_tail = (q->sq_tail + 1) % q->depth;
        r->submitted++;
        r->inflight++;
        n++;
    }
    if (!n)
        return false;
    /* The entries are in memory before the doorbell's write leaves the device. */
    __atomic_thread_fence(__ATOMIC_RELEASE);
    uint32_t tail = q->sq_tail;
    int rc = a->ops->dma_write(a->ctx, q->sq_db, &tail, sizeof tail);
    if (rc)
        r->err = accel_err_of(rc);
    return true;
}

/* Take what the NVMe posted, then ring the CQ doorbell once. True when something came. */
static bool reap(struct accel_core *a)
{
    struct accel_nvme_run *r = &a->nvme;
    struct accel_nvme_queue *q = &r->q;
    const struct accel_nvme_job *j = &r->job;
    uint32_t n = 0;
    for (;;) {
        struct nvme_cqe *e = (struct nvme_cqe *)(a->mem + q->cq_off + 16ull * q->cq_head);
        /* The dword with the phase tag is written last: read it first. */
        uint32_t dw3 = __atomic_load_n((uint32_t *)&e->cid, __ATOMIC_ACQUIRE);
        if (((dw3 >> 16) & 1u) != q->phase)
            break;
        uint32_t cid = dw3 & 0xffffu;
        uint16_t st = (uint16_t)((dw3 >> 17) & 0x7ffu); /* SCT << 8 | SC */
        if (++q->cq_head == q->depth) {
            q->cq_head = 0;
            q->phase ^= 1u;
        }
        n++;
        if (cid >= q->depth - 1 || !r->cmd[cid])
            continue; /* not one of ours: a stale entry is ignored, as a driver would */
        uint32_t i = r->cmd[cid] - 1;
        r->cmd[cid] = 0;
        r->inflight--;
        r->completed++;
        if (st && !r->failed++) {
            r->job.status = st;
            r->job.first_failed = i;
        }
        if (j->status_off)
            __atomic_store_n((uint16_t *)(a->mem + j->status_off + 2ull * i), st, __ATOMIC_RELEASE);
    }
    if (!n)
        return false;
    uint32_t head = q->cq_head;
    int rc = a->ops->dma_write(a->ctx, q->cq_db, &head, sizeof head);
    if (rc && !r->err)
        r->err = accel_err_of(rc);
    r->deadline_ns = now_ns() + r->timeout_ns;
    return true;
}

enum accel_nvme_state accel_nvme_step(struct accel_core *a, const struct accel_desc *d,
                                      uint32_t *err)
{
    struct accel_nvme_run *r = &a->nvme;
    if (!r->active) {
        uint32_t e = start(a, d);
        if (e) {
            r->active = false;
            *err = e;
            return ACCEL_NVME_DONE;
        }
    }
    bool moved = reap(a);
    if (!r->err)
        moved |= submit(a);
    if (r->err || r->completed == r->job.count) {
        *err = finish(a);
        return ACCEL_NVME_DONE;
    }
    if (!moved && now_ns() > r->deadline_ns) {
        r->err = ACCEL_ERR_TIMEOUT;
        *err = finish(a);
        return ACCEL_NVME_DONE;
    }
    return moved ? ACCEL_NVME_PROGRESS : ACCEL_NVME_WAITING;
}
