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
};

enum accel_step {
    ACCEL_STEP_IDLE,    /* nothing to do: disabled, halted or the ring is empty */
    ACCEL_STEP_RAN,     /* a reset or a descriptor was handled; call again */
    ACCEL_STEP_WAITING, /* the descriptor at TAIL is a WAIT whose word is not there yet */
};

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
