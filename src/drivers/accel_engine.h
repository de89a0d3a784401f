/*
 * accel_engine: the accelerator's DMA engine (include/ntblend/accel_regs.h) as the drivers
 * written against the driver model (include/ntblend/pci.h) use it: setting a function up
 * (enable, bus master, BAR0 mapped, the ID awaited, a coherent buffer), the completion
 * interrupt, an engine reset, descriptors submitted and waited for, the teardown. Nothing in
 * it knows whether a function is local or lent. How long to wait, how to wait (sleeping on
 * the interrupt or polling) and whether a completion needs its interrupt too are the
 * caller's: the drivers differ there on purpose.
 */
#ifndef NTBLEND_ACCEL_ENGINE_H
#define NTBLEND_ACCEL_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ntblend/accel_regs.h"
#include "ntblend/pci.h"

struct accel_eng {
    struct pci_dev *dev;
    volatile uint8_t *regs; /* BAR0 */
    uint8_t *buf;           /* coherent, buf_size bytes (none when 0): the host side */
    dma_addr_t buf_io;
    size_t buf_size;
    uint32_t head;          /* descriptors submitted since the last reset */
    uint32_t irqs_before;   /* interrupts seen when the latest doorbell was rung */
    atomic_uint irqs;       /* interrupts that reached the handler */
    pthread_mutex_t lock;
    pthread_cond_t done;    /* broadcast by the interrupt handler */
    bool enabled, vectors, irq;
};

/**
 * struct accel_wait - how accel_eng_wait() waits.
 * @timeout_ms: give up after this long
 * @poll_us:    recheck period: the sleep on the interrupt (with accel_eng_irq()) or between
 *              polls of COMPLETED (without)
 * @need_irq:   done only once the completion's interrupt has reached the handler too
 */
struct accel_wait {
    unsigned timeout_ms;
    unsigned poll_us;
    bool need_irq;
};

/* The accelerator model's PCI ID, for a driver's id_table. */
extern const struct pci_device_id accel_eng_ids[];

/* Enable dev, set bus master, map BAR0, wait up to a second for the ID (a function just reset
 * by its previous user reads zeros for a moment), allocate buf_size coherent bytes (none
 * when 0), with irq one MSI-X vector whose handler counts interrupts and wakes
 * accel_eng_wait(), and reset the engine. 0, or -errno (-ENODEV: not an accelerator);
 * accel_eng_close() undoes a failure. */
int accel_eng_open(struct accel_eng *e, struct pci_dev *dev, size_t buf_size, bool irq);
/* Reset the engine (queued work abandoned, counters zero), completions on vector 0, enable
 * it. -ETIMEDOUT when the reset is not done within timeout_ms or the function is gone. */
int accel_eng_reset(struct accel_eng *e, unsigned timeout_ms);
/* Queue count copies of len bytes, the last with ACCEL_DESC_INTR when intr, and ring the
 * doorbell; flags are ACCEL_DESC_SRC_BUS / _DST_BUS. Returns the COMPLETED value that means
 * all are done. */
uint32_t accel_eng_copies(struct accel_eng *e, uint64_t src, uint64_t dst, uint32_t len,
                          uint32_t flags, bool intr, uint32_t count);
/* Wait until COMPLETED reads target (and, with need_irq, an interrupt came after the
 * doorbell). 0; -ENODEV: the function went first; -ETIMEDOUT: not completed in time; -ETIME:
 * completed but its interrupt never came (in time or before the function went). */
int accel_eng_wait(struct accel_eng *e, uint32_t target, const struct accel_wait *w);
/* The status word the device wrote into descriptor idx (free-running, from 0). */
uint32_t accel_eng_status(const struct accel_eng *e, uint32_t idx);
uint32_t accel_eng_reg(const struct accel_eng *e, unsigned off);
/* Undo accel_eng_open(): the interrupt freed, the engine stopped (when the function is
 * still there), the buffer freed, the function disabled. */
void accel_eng_close(struct accel_eng *e);
/* A driver's remove(): say "NAME: removed" (" (hot-unplugged)" when the function is gone),
 * then accel_eng_close(). */
void accel_eng_remove(struct accel_eng *e);
/* A --size argument: bytes with an optional k or M suffix, 1..max. 0, or -EINVAL. */
int accel_eng_parse_size(const char *arg, size_t max, size_t *size);
/* The test pattern of the copy checks: (i * 131 + seed * 7) ^ (i >> 9). */
void accel_eng_pattern(uint8_t *p, size_t n, uint32_t seed);

#endif
