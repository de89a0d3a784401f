/*
 * Device-initiated I/O (ntblend/nvme_devq.h; smartio-tocs-2021 §6.4, Figs. 18-19): the CPU's
 * part. An I/O queue pair of the NVMe is created (by the owner's admin queue, or by the
 * device's manager for a client) at addresses in an accelerator's memory, as libntbnvme's own
 * queue pairs are (nvme_qpair_create over nvme_mem_wrap of that memory); the accelerator gets
 * the NVMe's doorbells mapped for it and a block describing the queues (struct
 * accel_nvme_queue), and each job is one ACCEL_OP_NVME descriptor on its engine. From then on
 * the library never touches the queues: the accelerator's engine (src/devices/accel_nvme.c)
 * writes the commands, rings, and takes the completions.
 *
 * Layout at opts.mem_off of the accelerator's memory: a 4 KiB control page (the queue block
 * at +0, the job block at +256), then the SQ, its PRP lists and the CQ; data after that.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ntblend/accel_regs.h"
#include "ntblend/nvme_devq.h"
#include "ntblend/smartio.h"
#include "nvme_int.h"

#define PAGE 4096u
#define CTL_BYTES PAGE
#define JOB_OFF 256u

struct nvme_devq {
    nvme_dev_t *d;
    sio_dev_t *accel;
    sio_bar_t *regs_map, *mem_map;
    volatile uint8_t *regs, *mem;
    size_t mem_size;
    sio_dma_t *mem_dma, *db_dma;  /* the NVMe -> accelerator memory; accelerator -> doorbells */
    uint64_t mem_io, db_io;
    nvme_mem_t *qmem;
    nvme_qpair_t *qp;
    uint32_t depth;
    uint64_t ctl_off, data_off;
    uint32_t head;                /* the accelerator's ring: descriptors submitted */
    bool running, broken;
    unsigned job_timeout_ms;
};

static size_t pageup(size_t n) { return (n + PAGE - 1) & ~(size_t)(PAGE - 1); }

size_t nvme_devq_layout(nvme_dev_t *d, uint32_t depth)
{
    if (!d || depth < 2)
        return 0;
    return CTL_BYTES + pageup(64ull * depth) + pageup((size_t)(depth - 1) * d->prp_bytes) +
           pageup(16ull * depth);
}

/* Copy to the accelerator's memory or BAR0 (through a window when it is another host's):
 * plain stores, as a driver's memcpy_toio. */
static void to_dev(volatile uint8_t *dst, const void *src, size_t n)
{
    memcpy((void *)(uintptr_t)dst, src, n);
}

static int engine_reset(nvme_devq_t *q)
{
    sio_write32(q->regs_map, ACCEL_REG_CONTROL, ACCEL_CTRL_RESET);
    uint64_t end = nvl_now_ns() + 2000000000ull;
    while (sio_read32(q->regs_map, ACCEL_REG_CONTROL) & ACCEL_CTRL_RESET)
        if (nvl_now_ns() > end)
            return nvl_fail(-ETIMEDOUT, "the accelerator did not finish its reset (is its host "
                                        "up? ntblend status)");
    q->head = 0;
    sio_write32(q->regs_map, ACCEL_REG_CONTROL, ACCEL_CTRL_ENABLE);
    return 0;
}

static int map_fail(int rc, const char *what, const char *nvme)
{
    return nvl_fail(rc, "%s: %s (%s)%s", nvme, what, strerror(-rc),
                    rc == -EHOSTUNREACH || rc == -ENOLINK || rc == -EIO
                        ? ": no path joins the NVMe's host and the accelerator's; the queues must "
                          "be where the NVMe can fetch them (ntblend status shows the paths)"
                        : rc == -ENOSPC ? ": out of LUT or requester-ID entries" : "");
}

int nvme_devq_create(nvme_dev_t *d, struct sio_dev *accel, const struct nvme_devq_opts *opts,
                     nvme_devq_t **out)
{
    static const struct nvme_devq_opts defaults;
    const struct nvme_devq_opts *o = opts ? opts : &defaults;
    if (!d || !accel || !out)
        return nvl_fail(-EINVAL, "nvme_devq_create: needs an NVMe, an accelerator and out");
    *out = NULL;
    uint32_t depth = o->depth ? o->depth : 64;
    if (depth < 2 || depth > ACCEL_NVME_MAX_DEPTH || depth > d->info.max_depth)
        return nvl_fail(-EINVAL, "queue depth %u: device-driven queues take 2..%u entries", depth,
                        d->info.max_depth < ACCEL_NVME_MAX_DEPTH ? d->info.max_depth
                                                                 : ACCEL_NVME_MAX_DEPTH);
    sio_dev_t *nv = nvme_sio_dev(d);
    if (!nv)
        return nvl_fail(-EOPNOTSUPP, "%s was opened through the driver model (pci:): "
                                     "device-driven queues need it opened by name (SmartIO)", d->name);
    nvme_devq_t *q = calloc(1, sizeof *q);
    if (!q)
        return -ENOMEM;
    q->d = d;
    q->accel = accel;
    q->depth = depth;
    q->ctl_off = o->mem_off;
    q->job_timeout_ms = d->timeout_ms;
    int rc;
    size_t rsize;
    q->regs = sio_map_bar(accel, ACCEL_BAR_REGS, &rsize, &q->regs_map);
    if (!q->regs) {
        rc = nvl_fail(-errno, "cannot map the accelerator's registers: %s", strerror(errno));
        goto fail;
    }
    if (rsize < ACCEL_MSIX_TABLE || sio_read32(q->regs_map, ACCEL_REG_ID) != ACCEL_ID) {
        rc = nvl_fail(-EOPNOTSUPP, "the device given as accelerator is not one (type accel in "
                                   "ntblend device list)");
        goto fail;
    }
    q->mem = sio_map_bar(accel, ACCEL_BAR_MEM, &q->mem_size, &q->mem_map);
    if (!q->mem) {
        rc = nvl_fail(-errno, "cannot map the accelerator's memory: %s", strerror(errno));
        goto fail;
    }
    size_t need = nvme_devq_layout(d, depth);
    if (o->mem_off % PAGE || o->mem_off > q->mem_size || need > q->mem_size - o->mem_off) {
        rc = nvl_fail(o->mem_off % PAGE ? -EINVAL : -ENOSPC,
                      "queues of depth %u take %zu bytes at a 4 KiB-aligned offset of the "
                      "accelerator's memory; offset %#llx of its %zu bytes cannot hold them",
                      depth, need, (unsigned long long)o->mem_off, q->mem_size);
        goto fail;
    }
    q->data_off = o->mem_off + need;
    /* The NVMe fetches commands from and posts completions and data to the accelerator's
     * memory; the accelerator rings the NVMe's doorbells. Both peer to peer. */
    if ((rc = sio_map_peer_bar(nv, accel, ACCEL_BAR_MEM, &q->mem_io, &q->mem_dma))) {
        map_fail(rc, "cannot reach the accelerator's memory, where the queues would be", d->name);
        goto fail;
    }
    if ((rc = sio_map_peer_bar(accel, nv, 0, &q->db_io, &q->db_dma))) {
        map_fail(rc, "the accelerator cannot reach its doorbells", d->name);
        goto fail;
    }
    if ((rc = sio_enable(accel))) {
        nvl_fail(rc, "cannot enable the accelerator (bus mastering): %s", strerror(-rc));
        goto fail;
    }
    if ((rc = engine_reset(q)))
        goto fail;
    uint64_t qoff = o->mem_off + CTL_BYTES;
    q->qmem = nvme_mem_wrap(d, q->mem + qoff, q->mem_io + qoff, need - CTL_BYTES);
    if (!q->qmem) {
        rc = -errno;
        goto fail;
    }
    struct nvme_qpair_opts qo = { .depth = depth, .sq_mem = q->qmem, .cq_mem = q->qmem };
    if ((rc = nvme_qpair_create(d, &qo, &q->qp)))
        goto fail;
    uint16_t qid = nvme_qpair_id(q->qp);
    uint32_t stride = 4u << d->dstrd;
    struct accel_nvme_queue blk = {
        .sq_off = (uint64_t)(q->qp->sqm.cpu - q->mem),
        .cq_off = (uint64_t)(q->qp->cqm.cpu - q->mem),
        .prp_off = (uint64_t)(q->qp->sqm.cpu - q->mem) + pageup(64ull * depth),
        .sq_db = q->db_io + NVME_REG_DBS + 2u * qid * stride,
        .cq_db = q->db_io + NVME_REG_DBS + (2u * qid + 1u) * stride,
        .mem_io = q->mem_io, .depth = depth, .prp_bytes = d->prp_bytes, .page = PAGE,
        .phase = 1, /* the first pass through the CQ */
    };
    to_dev(q->mem + q->ctl_off, &blk, sizeof blk);
    *out = q;
    return 0;
fail:
    nvme_devq_delete(q);
    return rc;
}

int nvme_devq_delete(nvme_devq_t *q)
{
    if (!q)
        return 0;
    int rc = 0;
    if (q->regs_map && sio_read32(q->regs_map, ACCEL_REG_ID) == ACCEL_ID)
        sio_write32(q->regs_map, ACCEL_REG_CONTROL, ACCEL_CTRL_RESET); /* stops a running job */
    if (q->qp) {
        /* Where the accelerator left the queues, so that the library's reap during the
         * deletion takes only what the deletion itself posts. */
        struct accel_nvme_queue blk;
        memcpy(&blk, (const void *)(uintptr_t)(q->mem + q->ctl_off), sizeof blk);
        if (blk.cq_head < q->depth && blk.sq_tail < q->depth && blk.phase <= 1) {
            q->qp->q.cq_head = blk.cq_head;
            q->qp->q.phase = (uint8_t)blk.phase;
            q->qp->q.sq_tail = blk.sq_tail;
        }
        rc = nvme_qpair_delete(q->qp);
    }
    if (q->qmem) {
        int r = nvme_mem_free(q->qmem);
        rc = rc ? rc : r;
    }
    if (q->db_dma)
        sio_unmap(q->db_dma);
    if (q->mem_dma)
        sio_unmap(q->mem_dma);
    if (q->mem_map)
        sio_unmap_bar(q->mem_map);
    if (q->regs_map)
        sio_unmap_bar(q->regs_map);
    free(q);
    return rc;
}

volatile uint8_t *nvme_devq_mem(nvme_devq_t *q, uint64_t *data_off, uint64_t *data_size)
{
    if (!q)
        return NULL;
    if (data_off)
        *data_off = q->data_off;
    if (data_size)
        *data_size = q->mem_size - q->data_off;
    return q->mem;
}

uint64_t nvme_devq_mem_ioaddr(const nvme_devq_t *q) { return q ? q->mem_io : 0; }

static volatile struct accel_desc *slot(nvme_devq_t *q, uint32_t idx)
{
    return (volatile struct accel_desc *)(q->regs + ACCEL_RING_OFF) + idx % ACCEL_RING_ENTRIES;
}

static bool in_data(const nvme_devq_t *q, uint64_t off, uint64_t len)
{
    return off >= q->data_off && off <= q->mem_size && len <= q->mem_size - off;
}

int nvme_devq_submit(nvme_devq_t *q, const struct nvme_devq_job *job)
{
    if (!q || !job)
        return nvl_fail(-EINVAL, "nvme_devq_submit: needs a queue pair and a job");
    if (q->running)
        return nvl_fail(-EBUSY, "a job is running on this queue pair: nvme_devq_wait for it first");
    if (q->broken)
        return nvl_fail(-EPIPE, "this queue pair is broken by an earlier failure (commands of "
                                "unknown fate): delete it and create another");
    const struct nvl_ns *ns = nvl_ns_find(q->d, job->nsid);
    if (!ns)
        return nvl_fail(-ENXIO, "%s has no namespace %u", q->d->name, job->nsid);
    if (job->op != NVME_OP_READ && job->op != NVME_OP_WRITE)
        return nvl_fail(-EINVAL, "device-driven jobs read or write (NVME_OP_READ, NVME_OP_WRITE)");
    uint64_t block = 1ull << ns->lba_shift, bytes = (uint64_t)job->nblocks * block;
    uint32_t qd = job->qd ? job->qd : 1;
    if (!job->nblocks || bytes > q->d->info.max_transfer)
        return nvl_fail(-EINVAL, "%u blocks per command: %s moves 1..%zu blocks per command",
                        job->nblocks, q->d->name, q->d->info.max_transfer / block);
    if (!job->count || qd >= q->depth)
        return nvl_fail(-EINVAL, "a job needs commands (count %u), at most %u in flight (qd %u)",
                        job->count, q->depth - 1, qd);
    uint64_t nblk = (uint64_t)job->count * job->nblocks;
    if (job->lba > ns->blocks || nblk > ns->blocks - job->lba)
        return nvl_fail(-ERANGE, "blocks %llu..%llu are past the end of namespace %u (%llu blocks)",
                        (unsigned long long)job->lba, (unsigned long long)(job->lba + nblk - 1),
                        job->nsid, (unsigned long long)ns->blocks);
    if (job->data_off % 4 || !in_data(q, job->data_off, nblk * block) ||
        (job->status_off && (job->status_off % 2 || !in_data(q, job->status_off, 2ull * job->count))))
        return nvl_fail(-EINVAL, "the job's data (%llu bytes at %#llx, 4-byte aligned) and "
                        "statuses must be in the accelerator's memory after the queues: "
                        "%#llx..%#zx", (unsigned long long)(nblk * block),
                        (unsigned long long)job->data_off, (unsigned long long)q->data_off,
                        q->mem_size);
    unsigned tmo = job->timeout_ms ? job->timeout_ms : q->job_timeout_ms;
    struct accel_nvme_job j = {
        .queue_off = q->ctl_off, .data_off = job->data_off, .slba = job->lba,
        .status_off = job->status_off, .nsid = job->nsid,
        .opc = job->op == NVME_OP_READ ? NVME_CMD_READ : NVME_CMD_WRITE, .nlb = job->nblocks,
        .block = (uint32_t)block, .count = job->count, .qd = qd, .timeout_ms = tmo,
    };
    q->job_timeout_ms = tmo;
    to_dev(q->mem + q->ctl_off + JOB_OFF, &j, sizeof j);
    struct accel_desc dsc = { .src = q->ctl_off + JOB_OFF, .ctrl = ACCEL_OP_NVME };
    to_dev((volatile uint8_t *)slot(q, q->head), &dsc, sizeof dsc);
    /* The descriptor and the job are in place before the engine learns of them. */
    __atomic_thread_fence(__ATOMIC_RELEASE);
    sio_write32(q->regs_map, ACCEL_REG_HEAD, ++q->head);
    q->running = true;
    return 0;
}

struct done_wait {
    volatile struct accel_desc *dsc;
};

static bool job_done(void *arg)
{
    const struct done_wait *w = arg;
    return __atomic_load_n(&w->dsc->status, __ATOMIC_ACQUIRE) & ACCEL_DESC_DONE;
}

static int engine_errno(uint32_t err)
{
    switch (err) {
    case ACCEL_ERR_NONE: return 0;
    case ACCEL_ERR_NVME: return -EIO;
    case ACCEL_ERR_TIMEOUT: return -ETIMEDOUT;
    case ACCEL_ERR_LINK: return -ENOLINK;
    case ACCEL_ERR_FAULT: return -EFAULT;
    case ACCEL_ERR_ABORT: case ACCEL_ERR_ACCESS: return -EHOSTUNREACH;
    case ACCEL_ERR_BROKEN: return -EPIPE;
    case ACCEL_ERR_JOB: case ACCEL_ERR_RANGE: return -EINVAL;
    default: return -EIO;
    }
}

int nvme_devq_wait(nvme_devq_t *q, int timeout_ms, struct nvme_devq_result *res)
{
    if (!q)
        return nvl_fail(-EINVAL, "nvme_devq_wait: no queue pair");
    if (res)
        memset(res, 0, sizeof *res);
    if (!q->running)
        return nvl_fail(-EINVAL, "no job to wait for (nvme_devq_submit first)");
    static struct wpol_site site = WPOL_SITE("nvme device-driven job", 20000, 2000000);
    struct done_wait w = { slot(q, q->head - 1) };
    /* The engine ends a job that hears nothing for its timeout by itself; the bound here is
     * for an accelerator that is gone (its host down). */
    uint64_t limit = timeout_ms >= 0 ? (uint64_t)timeout_ms * 1000000ull
                                     : (uint64_t)q->job_timeout_ms * 2000000ull + 2000000000ull;
    struct wpol_how how = { .ready = job_done, .arg = &w, .deadline_ns = nvl_now_ns() + limit,
                            .sleep_ns = 1000000 };
    int rc = wpol_wait(&site, &how);
    if (rc == -ETIMEDOUT && timeout_ms >= 0)
        return nvl_fail(-EAGAIN, "the job is still running");
    q->running = false;
    if (rc) {
        q->broken = true;
        return nvl_fail(-ETIMEDOUT, "the accelerator did not end the job (is its host up and "
                                    "its link? ntblend status); the queue pair is broken");
    }
    uint32_t st = __atomic_load_n(&w.dsc->status, __ATOMIC_ACQUIRE);
    if (st == 0xffffffffu) { /* a read through a window whose link is down */
        q->broken = true;
        return nvl_fail(-EHOSTUNREACH, "the accelerator cannot be reached (its link is down?); "
                                       "the queue pair is broken");
    }
    struct accel_nvme_job j;
    memcpy(&j, (const void *)(uintptr_t)(q->mem + q->ctl_off + JOB_OFF), sizeof j);
    uint32_t err = st & ACCEL_ERR_MASK;
    if (res) {
        res->engine_err = err;
        if (err != ACCEL_ERR_JOB && err != ACCEL_ERR_RANGE && err != ACCEL_ERR_BROKEN &&
            err != ACCEL_ERR_BUS_MASTER) { /* the job ran: its results are there */
            res->done = j.done;
            res->failed = j.failed;
            res->status = (uint16_t)j.status;
            res->first_failed = j.first_failed;
            res->bytes = j.bytes;
        }
    }
    rc = engine_errno(err);
    if (!rc)
        return 0;
    if (err == ACCEL_ERR_NVME)
        return nvl_fail(rc, "%u of the job's commands failed; the first (command %u) with NVMe "
                        "status %#x", j.failed, j.first_failed, j.status);
    if (err != ACCEL_ERR_JOB && err != ACCEL_ERR_RANGE && err != ACCEL_ERR_BUS_MASTER)
        q->broken = true;
    return nvl_fail(rc, "the accelerator's job failed (engine error %u: %s)%s", err,
                    err == ACCEL_ERR_TIMEOUT ? "the NVMe stopped answering"
                    : err == ACCEL_ERR_LINK  ? "a link between the devices is down"
                    : err == ACCEL_ERR_FAULT ? "IOMMU fault on the doorbell"
                    : err == ACCEL_ERR_BROKEN ? "the queue was broken already"
                                              : "see docs/accel-model.md",
                    q->broken ? "; the queue pair is broken: delete it and create another" : "");
}

int nvme_devq_run(nvme_devq_t *q, const struct nvme_devq_job *job, struct nvme_devq_result *res)
{
    int rc = nvme_devq_submit(q, job);
    return rc ? rc : nvme_devq_wait(q, -1, res);
}
