/*
 * PCIe functions (devices.c, fn_dma.c): the functions a topology's devices have, their
 * configuration space and BARs, and a function as a bus master (DMA, MSI-X).
 */
#ifndef NTBLEND_FAB_DEVICES_H
#define NTBLEND_FAB_DEVICES_H

#include <stdio.h>

#include "fab_state.h"

/* ---- PCIe functions (devices.c, fn_dma.c) ---- */
/* Configuration space access as a host's root complex performs it: BAR sizing, writable
 * command/MSI-X bits, read-only everything else. */
uint32_t fab_cfg_read(struct fab *f, uint32_t fn, uint32_t off, uint32_t len);
int fab_cfg_write(struct fab *f, uint32_t fn, uint32_t off, uint32_t len, uint32_t val);
#define FAB_CMD_MEM 0x2u
#define FAB_CMD_BME 0x4u
#define FAB_CFG_MSIX 0x40u /* offset of the MSI-X capability */
/* DMA by function fn as its own requester: -EIO when Bus Master Enable is clear. */
int fab_fn_dma_read(struct fab *f, uint32_t fn, uint64_t addr, void *dst, uint64_t len);
int fab_fn_dma_write(struct fab *f, uint32_t fn, uint64_t addr, const void *src, uint64_t len);
/* Raise MSI-X vector v of fn: a DMA write of the table entry's data to its address (which may
 * be another host's MSI region, through an NTB). Masked: the pending bit is set instead.
 * -EINVAL no such vector, -ENODEV MSI-X disabled. */
int fab_fn_msix(struct fab *f, uint32_t fn, uint32_t vector);
/* Function-level reset: bus mastering and MSI-X off, register BARs cleared, reset_gen bumped
 * so the model drops its state (what a lender does when it reclaims a device). Returns once
 * the model has set its registers again (fab_fn_reset_done), 100 ms at most. */
void fab_fn_reset(struct fab *f, uint32_t fn);
/* A model: its reset for reset_gen `gen` is done (also at start, for the gen it found). */
void fab_fn_reset_done(struct fab_function *fx, uint32_t gen);
/* Tell a function's model that a register changed (what a write to a register BAR does). */
void fab_fn_notify(struct fab *f, uint32_t fn);
/* A device wrote into fn's BAR file at `off` (peer to peer): for a register BAR the writer's
 * CPU is the driver's (fab_fn_note_driver_cpu) and the model is told (fab_fn_notify); for
 * a memory BAR the model is told only while it watches it (fab_fn_watch). */
void fab_fn_written(struct fab *f, uint32_t fn, uint64_t off);
/* A model starts (on) or stops watching its memory BAR `bar` for devices' writes. After
 * turning it on, the model looks at the memory once more before it waits: a write that
 * landed before that look was not announced. */
void fab_fn_watch(struct fab *f, uint32_t fn, int bar, bool on);
/* rawmap.c: a CPU mapping of fn's registers that stores without fab_fn_notify was made
 * (delta > 0) or dropped (delta < 0) by this process: models then look at their registers
 * every FAB_RAW_TICK_NS. Counted per process (-ENOSPC: FAB_RAW_OWNERS processes hold such
 * mappings of fn already); a reset keeps the counts, the holder's death gives them back. */
#define FAB_RAW_TICK_NS 200000
#define FAB_RAW_SWEEP_NS 1000000000ull
int fab_fn_raw(struct fab *f, uint32_t fn, int delta);
/* Give back the mappings that process pid (dead) held. */
void fab_fn_raw_reap(struct fab *f, int32_t pid);
/* A model: are there plain-store mappings of fn to watch? Every FAB_RAW_SWEEP_NS (by
 * *swept_ns, the caller's) it also gives back those of processes that died unreaped. */
bool fab_fn_raw_watch(struct fab *f, uint32_t fn, uint64_t *swept_ns);
/* A model's thread publishes the CPU it runs on (fab_function.model_cpu), storing only when
 * it changed: a load of a line the thread already holds, per turn of its loop. */
void fab_fn_note_cpu(struct fab_function *fx);
/* The other direction, for the emulated backend's register-write notice (fn_notify): the
 * writing program, fn's driver, publishes its CPU (fab_function.driver_cpu) the same way. A
 * model's wait asks fab_fn_driver_here whether that is the CPU it runs on: then the driver
 * needs it to ring again, and the wait yields instead of spinning. */
void fab_fn_note_driver_cpu(struct fab *f, uint32_t fni);
bool fab_fn_driver_here(const struct fab_function *fx);
/* fn's driver goes to sleep (its CPU withdrawn: fab_fn_driver_here is false) or woke (its
 * CPU published again), each a store only on a change. */
void fab_fn_driver_asleep(struct fab *f, uint32_t fni, bool asleep);
/* A model thread: sleep until a register write of fn changes reg_seq from `seen`, or
 * timeout_ns (< 0: none) passes. As fab_futex_wait. */
int fab_fn_wait(struct fab *f, uint32_t fn, uint32_t seen, int64_t timeout_ns);
/* Power-on state of a host's functions: config space as enumerated, BAR contents zero. */
void fab_funcs_reset(struct fab *f, uint32_t host);


int fab_func_by_name(const struct fab *f, const char *name);
/* A function's BAR file (for mmap), opened on first use; -errno. */
int fab_bar_fd(struct fab *f, uint32_t fn);
/* Pointer into a function's BAR file at `off` (mapping it on first use); NULL + errno. */
void *fab_bar_mem(struct fab *f, uint32_t fn, uint64_t off, uint64_t len);

#endif
