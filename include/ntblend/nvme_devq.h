/*
 * ntblend NVMe, device-initiated I/O (smartio-tocs-2021 §6.4, Figs. 18-19): an NVMe I/O
 * queue pair whose queues live in an accelerator's memory, driven by the accelerator itself.
 * The CPU only sets it up — it creates the queue pair on the NVMe (as its owner, or through
 * the device's manager as a client) at addresses in the accelerator's memory, maps the NVMe's
 * doorbells for the accelerator and the accelerator's memory for the NVMe (peer to peer, along
 * the shortest path, wherever the two devices are) — and then hands the accelerator jobs: "read
 * COUNT commands of NLB blocks from LBA into your memory at OFFSET, QD at a time". The
 * accelerator writes the commands, rings the doorbell, takes the completions and rings again;
 * the data lands in its memory. The NVMe and the accelerator may be in this host or lent by
 * others, together or apart. docs/devio.md has the details.
 *
 * Part of libntbnvme (link ntbnvme); conventions as ntblend/nvme.h: 0 or a negative errno,
 * nvme_errmsg() says what went wrong and what to do.
 */
#ifndef NTBLEND_NVME_DEVQ_H
#define NTBLEND_NVME_DEVQ_H

#include <stddef.h>
#include <stdint.h>

#include "ntblend/nvme.h"

#ifdef __cplusplus
extern "C" {
#endif

#pragma GCC visibility push(default)

typedef struct nvme_devq nvme_devq_t;

/**
 * struct nvme_devq_opts - a device-driven queue pair; zero fields take the defaults.
 * @depth: entries per queue, 2..1024 and the controller's limit (default 64); a job keeps at
 *         most depth - 1 commands in flight.
 * @mem_off: where in the accelerator's memory (BAR2) the queues go, 4 KiB aligned (default
 *           0). They take nvme_devq_layout()'s bytes; the rest of the memory is for data.
 */
struct nvme_devq_opts {
    uint32_t depth;
    uint64_t mem_off;
};

/**
 * nvme_devq_create() - create an I/O queue pair of @d in the memory of @accel, for @accel to
 * drive. The caller keeps both devices; the queue pair owns @accel's descriptor engine
 * (reset and enabled here) until nvme_devq_delete().
 * @d: the NVMe, opened by name (nvme_open, nvme_open_sio: SmartIO), as owner or client.
 * @accel: an accelerator (type accel) the caller borrowed (sio_borrow) or bound.
 * @opts: NULL for the defaults.
 * @out: the queue pair.
 *
 * Return: 0; -EHOSTUNREACH the NVMe cannot reach the accelerator's memory, or the accelerator
 * the NVMe's doorbells (no path between their hosts: the queues would be where the NVMe cannot
 * fetch them); -ENOSPC the memory cannot hold the queues at @mem_off, or no LUT entries for the
 * mappings; -EOPNOTSUPP @d was opened through the driver model ("pci:"), or @accel is not an
 * accelerator; -EBUSY no free queue pair on the NVMe; -EINVAL bad options.
 */
int nvme_devq_create(nvme_dev_t *d, struct sio_dev *accel, const struct nvme_devq_opts *opts,
                     nvme_devq_t **out);

/**
 * nvme_devq_delete() - delete the queues on the NVMe (which aborts anything they still held),
 * undo the mappings and stop the accelerator's engine.
 * Return: 0, or the first error (the queue pair is freed anyway).
 */
int nvme_devq_delete(nvme_devq_t *q);

/**
 * nvme_devq_mem() - the accelerator's memory as this process maps it, and the part the
 * queues leave for data: @data_off (4 KiB aligned) and @data_size bytes. Jobs' data and
 * status offsets are offsets in this memory.
 */
volatile uint8_t *nvme_devq_mem(nvme_devq_t *q, uint64_t *data_off, uint64_t *data_size);

/* The address at which the NVMe reaches offset 0 of the accelerator's memory (for commands a
 * CPU submits with nvme_submit_dma, or nvme_mem_wrap, to compare with the device's own). */
uint64_t nvme_devq_mem_ioaddr(const nvme_devq_t *q);

/**
 * struct nvme_devq_job - what the accelerator does.
 * @op: NVME_OP_READ (into the accelerator's memory) or NVME_OP_WRITE.
 * @nsid: the namespace.
 * @lba: first block; command i moves blocks @lba + i * @nblocks ...
 * @nblocks: blocks per command (up to the controller's max_transfer).
 * @count: commands.
 * @qd: commands in flight at most, 1..depth - 1 (default 1).
 * @data_off: offset in the accelerator's memory of the data, @count * @nblocks blocks; 4-byte
 *            aligned, in the data part (nvme_devq_mem).
 * @status_off: 0, or the offset of @count 16-bit words where the accelerator stores each
 *              command's NVMe status as it completes (0 success, 0xffff never completed).
 * @timeout_ms: the job fails when no completion comes for this long (default: the device
 *              handle's command timeout).
 */
struct nvme_devq_job {
    enum nvme_op op;
    uint32_t nsid;
    uint64_t lba;
    uint32_t nblocks;
    uint32_t count;
    uint32_t qd;
    uint64_t data_off;
    uint64_t status_off;
    unsigned timeout_ms;
};

/**
 * struct nvme_devq_result - how a job ended.
 * @done: commands that completed successfully.
 * @failed: commands that completed with an error status.
 * @status: the first error's NVMe status (SCT << 8 | SC), 0 if none.
 * @first_failed: that command's index.
 * @bytes: bytes moved by successful commands.
 * @engine_err: the accelerator's error code (ACCEL_ERR_*, ntblend/accel_regs.h), 0 if none.
 */
struct nvme_devq_result {
    uint32_t done, failed;
    uint16_t status;
    uint32_t first_failed;
    uint64_t bytes;
    uint32_t engine_err;
};

/**
 * nvme_devq_submit() - hand the accelerator a job (one at a time per queue pair).
 * Return: 0; -EINVAL bad job (message says which field); -EBUSY a job is running; -EPIPE the
 * queue pair is broken by an earlier failure (delete it and create another).
 */
int nvme_devq_submit(nvme_devq_t *q, const struct nvme_devq_job *job);

/**
 * nvme_devq_wait() - wait for the job to end (@timeout_ms < 0: as long as it takes).
 * @res: may be NULL.
 * Return: 0 every command succeeded; -EIO some completed with an error status (@res says
 * which first); -ETIMEDOUT the NVMe stopped answering, -ENOLINK a link on the path is down,
 * -EFAULT an IOMMU fault, -EHOSTUNREACH a master abort — after these the queue pair is broken
 * (commands of unknown fate: delete it and create another); -EAGAIN @timeout_ms passed with
 * the job still running.
 */
int nvme_devq_wait(nvme_devq_t *q, int timeout_ms, struct nvme_devq_result *res);

/* nvme_devq_submit() then nvme_devq_wait() until it ends. */
int nvme_devq_run(nvme_devq_t *q, const struct nvme_devq_job *job, struct nvme_devq_result *res);

/* Bytes of the accelerator's memory the queues of a pair of this depth take at mem_off. */
size_t nvme_devq_layout(nvme_dev_t *d, uint32_t depth);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif
