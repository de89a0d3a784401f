/*
 * The accelerator's engine without threads or a fabric: the device-owned registers, the
 * descriptor ring and the execution of one descriptor at a time, with everything that leaves
 * the device (DMA as its requester, a copy between two bus addresses, Bus Master Enable,
 * MSI-X delivery) behind a small table of host operations. The model (accel.c) binds it to a
 * function of the fabric and runs it on a thread; the fuzzer binds it to plain memory.
 */
#ifndef NTBLEND_ACCEL_CORE_H
#define NTBLEND_ACCEL_CORE_H

#include <stdbool.h>
#include <stdint.h>

#include "ntblend/accel_regs.h"

/* What the engine asks of the host side. Errors are -errno as the fabric reports them
 * (-EIO master abort, -EFAULT IOMMU fault, -EACCES requester-ID table, -ENOLINK link down). */
struct accel_host_ops {
    bool (*bus_master)(void *ctx);                 /* Command register BME */
    bool (*msix_enabled)(void *ctx);               /* MSI-X Enable set and Function Mask clear */
    void (*msix)(void *ctx, uint32_t vector);      /* raise a vector (masking is the host's) */
    /* DMA read of [bus, bus+len) into dst; all or nothing: on error nothing was written. */
    int (*dma_read)(void *ctx, uint64_t bus, void *dst, uint64_t len);
    int (*dma_write)(void *ctx, uint64_t bus, const void *src, uint64_t len);
    int (*bus_copy)(void *ctx, uint64_t dst, uint64_t src, uint64_t len);
};

/* An ACCEL_OP_NVME job under way (accel_nvme.c): copies of its job and queue blocks, and
 * which command each identifier carries. */
struct accel_nvme_run {
    bool active;
    uint32_t err;               /* a failure that ends the job (ACCEL_ERR_*) */
    uint64_t job_off;
    struct accel_nvme_job job;
    struct accel_nvme_queue q;
    uint32_t submitted, completed, failed, inflight, next_cid;
    uint64_t bytes_per_cmd;
    uint64_t timeout_ns, deadline_ns;
    uint32_t cmd[ACCEL_NVME_MAX_DEPTH]; /* command identifier -> command index + 1; 0: free */
};

struct accel_core {
    const struct accel_host_ops *ops;
    void *ctx;
    uint8_t *regs;     /* BAR0: at least ACCEL_MSIX_PBA + 8 bytes */
    uint8_t *mem;      /* BAR2: device memory */
    uint64_t mem_size;
    /* Device-owned state, published into the read-only registers. */
    uint32_t tail, completed, errors, last_err, last_idx;
    uint64_t bytes;
    bool error, halted, waiting;
    struct accel_nvme_run nvme;
};

enum accel_step {
    ACCEL_STEP_IDLE,    /* nothing to do: disabled, halted or the ring is empty */
    ACCEL_STEP_RAN,     /* a reset or a descriptor was handled; call again */
    ACCEL_STEP_WAITING, /* the descriptor at TAIL is a WAIT whose word is not there yet */
};

enum accel_nvme_state {
    ACCEL_NVME_DONE,     /* the job ended (*err says how) */
    ACCEL_NVME_PROGRESS, /* commands went out or completions came in: step again */
    ACCEL_NVME_WAITING,  /* waiting for the NVMe's completions */
};
/* The ACCEL_ERR_* of a fabric error; whether [off, off + len) is inside device memory. */
uint32_t accel_err_of(int rc);
bool accel_mem_range_ok(const struct accel_core *a, uint64_t off, uint64_t len);
/* accel_nvme.c: advance the NVMe job of descriptor d. */
enum accel_nvme_state accel_nvme_step(struct accel_core *a, const struct accel_desc *d,
                                      uint32_t *err);
/* A reset while a job runs: it ends, and its queue is left broken (commands in flight). */
void accel_nvme_abort(struct accel_core *a);

/* Power-on state: engine disabled, ring empty, registers published. */
void accel_core_init(struct accel_core *a);
/* A function-level reset cleared the registers: forget the ring's progress and any error. */
void accel_core_flr(struct accel_core *a);

/* Handle a pending reset, deliver pending MSI-X vectors, and execute at most one descriptor. */
enum accel_step accel_core_step(struct accel_core *a);

/* Rewrite every register the device owns (a driver's stores into them do not stick). */
void accel_core_publish(struct accel_core *a);

/* HEAD as the driver last wrote it (for the idle poll). */
uint32_t accel_core_head(const struct accel_core *a);

#endif
