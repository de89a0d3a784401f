/*
 * The I/O calls of a queue pair: checks that keep bad requests from the device (namespace,
 * LBA range, size against MDTS, buffer alignment and reach), the NVM commands (read, write,
 * flush, write zeroes, dataset management deallocate), asynchronous submission with
 * completion callbacks, polling and waiting, and the synchronous forms built on them.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "nvme_int.h"

static const char *const op_name[] = { "read", "write", "flush", "write-zeroes", "deallocate" };

/* A checked command, ready for a slot. */
struct prep {
    struct nvme_sqe sqe;
    uint64_t io;  /* data */
    size_t len;
    bool dsm;     /* the range goes in the slot's scratch */
    uint64_t lba;
    uint32_t nblocks;
};

/* Data in buf (found in the device's memories), or at the device address *io. */
static int prep(nvme_qpair_t *qp, enum nvme_op op, uint32_t nsid, uint64_t lba,
                uint32_t nblocks, const void *buf, const uint64_t *io, unsigned flags,
                struct prep *p)
{
    nvme_dev_t *d = qp->dev;
    if ((unsigned)op > NVME_OP_DEALLOCATE)
        return nvl_fail(-EINVAL, "unknown operation %d", (int)op);
    if (d->ops->gone && d->ops->gone(d->ctx))
        return nvl_fail(-ENODEV, "%s was removed (hot-unplugged): close it", d->name);
    int rc;
    if (qp->mp && (rc = nvl_mp_ready(qp)))
        return rc; /* no path to the device is up */
    const struct nvl_ns *ns = nvl_ns_find(d, nsid);
    if (!ns)
        return nvl_fail(-ENXIO, "%s: %s on namespace %u, which %s does not have (active: %u; "
                                "nvme_ns_info)", d->name, op_name[op], nsid, d->name, d->nns);
    memset(p, 0, sizeof *p);
    p->sqe.nsid = nsid;
    if (op == NVME_OP_FLUSH) {
        p->sqe.opc = NVME_CMD_FLUSH;
        return 0;
    }
    if (!nblocks)
        return nvl_fail(-EINVAL, "%s: %s of 0 blocks", d->name, op_name[op]);
    if (lba >= ns->blocks || nblocks > ns->blocks - lba)
        return nvl_fail(-ERANGE, "%s: %s of blocks %" PRIu64 "..%" PRIu64 " is past the end of "
                        "namespace %u (%" PRIu64 " blocks of %u bytes)", d->name, op_name[op],
                        lba, lba + nblocks - 1, nsid, ns->blocks, 1u << ns->lba_shift);
    p->lba = lba;
    p->nblocks = nblocks;
    p->sqe.cdw10 = (uint32_t)lba;
    p->sqe.cdw11 = (uint32_t)(lba >> 32);
    switch (op) {
    case NVME_OP_READ:
    case NVME_OP_WRITE: {
        size_t len = (size_t)nblocks << ns->lba_shift;
        if (len > d->info.max_transfer || nblocks > 65536)
            return nvl_fail(-EINVAL, "%s: %s of %u blocks (%zu bytes) is more than one command "
                            "moves (%zu bytes): split it", d->name, op_name[op], nblocks, len,
                            d->info.max_transfer);
        if (io) {
            if (*io & 3)
                return nvl_fail(-EINVAL, "%s: %s at device address %#" PRIx64 ": not 4-byte "
                                "aligned", d->name, op_name[op], *io);
            p->io = *io;
        } else if (!buf) {
            return nvl_fail(-EINVAL, "%s: %s without a buffer", d->name, op_name[op]);
        } else if ((uintptr_t)buf & 3) {
            return nvl_fail(-EINVAL, "%s: %s buffer %p is not 4-byte aligned (nvme_buf_alloc "
                            "gives page-aligned ones)", d->name, op_name[op], buf);
        } else if (nvl_mem_find(d, buf, len, &p->io) ||
                   (qp->mp && nvl_mp_io(qp, &p->io))) {
            return nvl_fail(-EFAULT, "%s: %s buffer %p (%zu bytes) is not in memory the device "
                            "reaches: take it from nvme_buf_alloc (or nvme_mem_wrap)", d->name,
                            op_name[op], buf, len);
        }
        p->len = len;
        p->sqe.opc = op == NVME_OP_READ ? NVME_CMD_READ : NVME_CMD_WRITE;
        p->sqe.cdw12 = (nblocks - 1) | ((flags & NVME_SUBMIT_FUA) ? NVME_RW_FUA : 0);
        return 0;
    }
    case NVME_OP_WRITE_ZEROES:
        if (!(d->oncs & NVME_ONCS_WRITE_ZEROES))
            return nvl_fail(-EOPNOTSUPP, "%s does not support Write Zeroes (ONCS)", d->name);
        if (nblocks > 65536)
            return nvl_fail(-EINVAL, "%s: write-zeroes of %u blocks: at most 65536 per "
                            "command", d->name, nblocks);
        p->sqe.opc = NVME_CMD_WRITE_ZEROES;
        p->sqe.cdw12 = (nblocks - 1) | ((flags & NVME_SUBMIT_FUA) ? NVME_RW_FUA : 0);
        return 0;
    default:
        if (!(d->oncs & NVME_ONCS_DSM))
            return nvl_fail(-EOPNOTSUPP, "%s does not support Dataset Management (ONCS)",
                            d->name);
        p->sqe.opc = NVME_CMD_DSM;
        p->sqe.cdw10 = 0; /* one range */
        p->sqe.cdw11 = NVME_DSM_AD;
        p->dsm = true;
        return 0;
    }
}

/* Into slot and onto the SQ. */
static void issue(nvme_qpair_t *qp, struct prep *p, int slot, unsigned flags, nvme_cb_t cb,
                  void *arg)
{
    struct nvl_queue *q = &qp->q;
    if (p->dsm) {
        /* The range (attributes, length, start LBA) in the slot's scratch. */
        volatile uint64_t *r = q->slots[slot].prp;
        r[0] = (uint64_t)p->nblocks << 32;
        r[1] = p->lba;
        p->sqe.prp1 = q->slots[slot].prp_io;
    } else if (p->len) {
        nvl_q_prp(q, slot, &p->sqe, p->io, p->len);
    }
    nvl_q_post(q, slot, &p->sqe, cb, arg, flags & NVME_SUBMIT_DEFER);
}

static int submit(nvme_qpair_t *qp, enum nvme_op op, uint32_t nsid, uint64_t lba,
                  uint32_t nblocks, const void *buf, const uint64_t *io, unsigned flags,
                  nvme_cb_t cb, void *arg)
{
    if (!qp)
        return -EINVAL;
    struct prep p;
    int rc = prep(qp, op, nsid, lba, nblocks, buf, io, flags, &p);
    if (rc)
        return rc;
    int slot = nvl_q_get(&qp->q);
    if (slot < 0)
        return nvl_fail(slot, "queue pair %u is full (%u outstanding): poll, then submit again",
                        qp->q.p.qid, qp->q.nslots - qp->q.nfree);
    issue(qp, &p, slot, flags, cb, arg);
    return 0;
}

int nvme_submit(nvme_qpair_t *qp, enum nvme_op op, uint32_t nsid, uint64_t lba,
                uint32_t nblocks, void *buf, unsigned flags, nvme_cb_t cb, void *arg)
{
    return submit(qp, op, nsid, lba, nblocks, buf, NULL, flags, cb, arg);
}

int nvme_submit_dma(nvme_qpair_t *qp, enum nvme_op op, uint32_t nsid, uint64_t lba,
                    uint32_t nblocks, uint64_t ioaddr, unsigned flags, nvme_cb_t cb, void *arg)
{
    return submit(qp, op, nsid, lba, nblocks, NULL, &ioaddr, flags, cb, arg);
}

static int sync_io(nvme_qpair_t *qp, enum nvme_op op, uint32_t nsid, uint64_t lba,
                   uint32_t nblocks, const void *buf)
{
    if (!qp)
        return -EINVAL;
    struct prep p;
    int rc = prep(qp, op, nsid, lba, nblocks, buf, NULL, 0, &p);
    if (rc)
        return rc;
    int slot = nvl_q_get_wait(&qp->q);
    if (slot < 0)
        return nvl_fail(slot, "queue pair %u stayed full for the command timeout",
                        qp->q.p.qid);
    struct nvl_sync w = { 0 };
    issue(qp, &p, slot, 0, nvl_sync_cb, &w);
    rc = nvl_q_finish(&qp->q, slot, &w);
    if (rc == -ETIMEDOUT)
        return nvl_fail(rc, "%s: %s at block %" PRIu64 " got no completion within %u ms",
                        qp->dev->name, op_name[op], lba, qp->dev->timeout_ms);
    if (rc == -EIO && qp->mp && nvl_mp_ready(qp))
        return nvl_fail(rc, "%s: %s at block %" PRIu64 " failed: no path to the device is up "
                        "(ntblend status shows the paths); it works again once one is back",
                        qp->dev->name, op_name[op], lba);
    if (rc)
        return nvl_fail(rc, "%s: %s at block %" PRIu64 " failed: status %#x (%s)",
                        qp->dev->name, op_name[op], lba, w.cpl.status, strerror(-rc));
    return 0;
}

int nvme_read(nvme_qpair_t *qp, uint32_t nsid, uint64_t lba, uint32_t nblocks, void *buf)
{
    return sync_io(qp, NVME_OP_READ, nsid, lba, nblocks, buf);
}

int nvme_write(nvme_qpair_t *qp, uint32_t nsid, uint64_t lba, uint32_t nblocks,
               const void *buf)
{
    return sync_io(qp, NVME_OP_WRITE, nsid, lba, nblocks, buf);
}

int nvme_flush(nvme_qpair_t *qp, uint32_t nsid)
{
    return sync_io(qp, NVME_OP_FLUSH, nsid, 0, 0, NULL);
}

int nvme_write_zeroes(nvme_qpair_t *qp, uint32_t nsid, uint64_t lba, uint32_t nblocks)
{
    return sync_io(qp, NVME_OP_WRITE_ZEROES, nsid, lba, nblocks, NULL);
}

int nvme_deallocate(nvme_qpair_t *qp, uint32_t nsid, uint64_t lba, uint32_t nblocks)
{
    return sync_io(qp, NVME_OP_DEALLOCATE, nsid, lba, nblocks, NULL);
}

int nvme_qpair_cmd(nvme_qpair_t *qp, const struct nvme_cmd *cmd, void *buf, size_t len,
                   struct nvme_cpl *cpl)
{
    if (!qp || !cmd)
        return -EINVAL;
    nvme_dev_t *d = qp->dev;
    uint64_t io = 0;
    if (d->ops->gone && d->ops->gone(d->ctx))
        return nvl_fail(-ENODEV, "%s was removed (hot-unplugged): close it", d->name);
    int rc;
    if (qp->mp && (rc = nvl_mp_ready(qp)))
        return rc;
    if (len && (!buf || nvl_mem_find(d, buf, len, &io) || (qp->mp && nvl_mp_io(qp, &io))))
        return nvl_fail(-EFAULT, "nvme_qpair_cmd: the buffer is not in memory of %s "
                                 "(nvme_buf_alloc)", d->name);
    if (len > d->info.max_transfer || (io & 3))
        return nvl_fail(-EINVAL, "nvme_qpair_cmd: data must be 4-byte aligned and at most "
                                 "%zu bytes", d->info.max_transfer);
    struct nvme_sqe s = { .opc = cmd->opc, .nsid = cmd->nsid, .cdw10 = cmd->cdw10,
                          .cdw11 = cmd->cdw11, .cdw12 = cmd->cdw12, .cdw13 = cmd->cdw13,
                          .cdw14 = cmd->cdw14, .cdw15 = cmd->cdw15 };
    return nvl_q_sync(&qp->q, &s, io, len, cpl);
}

int nvme_qpair_poll(nvme_qpair_t *qp, unsigned max)
{
    return qp ? nvl_q_reap(&qp->q, max) : -EINVAL;
}

int nvme_qpair_wait(nvme_qpair_t *qp, int timeout_ms)
{
    if (!qp)
        return -EINVAL;
    uint64_t t = timeout_ms < 0 ? qp->q.p.timeout_ns : (uint64_t)timeout_ms * 1000000ull;
    int n = nvl_q_wait(&qp->q, NULL, t);
    if (n == 0 && qp->mp && nvl_mp_busy(qp))
        n = nvl_mp_wait(qp, t); /* what is left on the path the queue pair just left */
    return n;
}

uint32_t nvme_qpair_outstanding(const nvme_qpair_t *qp)
{
    return !qp ? 0 : qp->q.busy + (qp->mp ? nvl_mp_busy(qp) : 0);
}

void nvme_qpair_stats(const nvme_qpair_t *qp, struct nvme_qpair_stats *out)
{
    *out = qp->q.st;
    if (qp->mp)
        nvl_mp_stats(qp, out);
}
