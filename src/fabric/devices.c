/*
 * PCIe functions: how the devices a topology declares appear on their host's PCIe bus — the
 * functions (multi-function, SR-IOV virtual functions), their BARs (placed in the host's
 * physical map at enumeration and backed by a shared file), their configuration space
 * (standard header, MSI-X and PCIe capabilities, SR-IOV), and what a function does as a bus
 * master: DMA through its host's IOMMU and address map, and MSI-X writes. The behaviour
 * behind register BARs is the device models' (src/devices).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "fabric.h"

int fab_func_by_name(const struct fab *f, const char *name)
{
    for (uint32_t i = 0; i < f->ctl->nfuncs; i++)
        if (strcmp(fab_func(f, i)->name, name) == 0)
            return (int)i;
    return -1;
}

/* ---------------------------------------------------------------- BAR memory */

int fab_bar_fd(struct fab *f, uint32_t fn)
{
    if (fn >= f->ctl->nfuncs)
        return -EINVAL;
    char name[32];
    snprintf(name, sizeof name, "fn%u.bars", fn);
    return fab_lazy_fd(f, &f->bar_fd[fn], name);
}

void *fab_bar_mem(struct fab *f, uint32_t fn, uint64_t off, uint64_t len)
{
    if (fn >= f->ctl->nfuncs) {
        errno = EINVAL;
        return NULL;
    }
    uint64_t size = fab_func(f, fn)->file_size;
    if (atomic_load(&f->bars[fn]) && off <= size && len <= size - off)
        return atomic_load(&f->bars[fn]) + off;
    return fab_lazy_map(&f->bars[fn], fab_bar_fd(f, fn), size, off, len);
}

/* ---------------------------------------------------------------- configuration space */

static uint32_t get32(const uint8_t *c, uint32_t off)
{
    uint32_t v;
    memcpy(&v, c + off, 4);
    return v;
}

uint32_t fab_cfg_read(struct fab *f, uint32_t fni, uint32_t off, uint32_t len)
{
    if (fni >= f->ctl->nfuncs || (len != 1 && len != 2 && len != 4) || off + len > 4096 ||
        off % len)
        return UINT32_MAX;
    struct fab_function *fn = fab_func(f, fni);
    fab_lock(&fn->cfg_lock);
    uint32_t dw = get32(fn->cfg, off & ~3u);
    uint32_t slot = ((off & ~3u) - 0x10) / 4;
    if (off >= 0x10 && off < 0x28 && (fn->bar_sizing & (1u << slot))) {
        /* Sizing: the low dword of a 64-bit BAR returns ~(size-1) | flags, the high one the
         * upper bits of the mask. */
        bool high = slot % 2;
        const struct fab_bar *b = &fn->bar[high ? slot - 1 : slot];
        uint64_t mask = b->kind ? ~(b->size - 1) : 0;
        dw = high ? (uint32_t)(mask >> 32) : ((uint32_t)mask | (dw & 0xf));
    }
    fab_unlock(&fn->cfg_lock);
    uint32_t shift = (off & 3u) * 8;
    return len == 4 ? dw : (dw >> shift) & ((1u << (len * 8)) - 1);
}

int fab_cfg_write(struct fab *f, uint32_t fni, uint32_t off, uint32_t len, uint32_t val)
{
    if (fni >= f->ctl->nfuncs || (len != 1 && len != 2 && len != 4) || off + len > 4096 ||
        off % len)
        return -EINVAL;
    struct fab_function *fn = fab_func(f, fni);
    fab_lock(&fn->cfg_lock);
    uint32_t base = off & ~3u, shift = (off & 3u) * 8;
    uint32_t bytes = len == 4 ? UINT32_MAX : ((1u << (len * 8)) - 1) << shift;
    uint32_t in = val << shift, dw = get32(fn->cfg, base), writable = 0;
    if (base == 0x04) {
        writable = 0x0406; /* memory space, bus master, INTx disable */
    } else if (base >= 0x10 && base < 0x28) {
        /* BARs are placed at enumeration and stay there; all-ones sizes them. */
        uint32_t slot = (base - 0x10) / 4;
        if ((in & bytes) == bytes && len == 4)
            fn->bar_sizing |= 1u << slot;
        else
            fn->bar_sizing &= ~(1u << slot);
    } else if (base == FAB_CFG_MSIX) {
        writable = 0xc0000000u; /* message control: enable, function mask */
    }
    writable &= bytes;
    dw = (dw & ~writable) | (in & writable);
    memcpy(fn->cfg + base, &dw, 4);
    fab_unlock(&fn->cfg_lock);
    fab_fn_notify(f, fni); /* enable/disable and masking matter to the model */
    return 0;
}

/* The register write is counted first, the sleepers looked at second; a model thread
 * announces itself first and looks at the count second (fab_fn_wait): one of the two always
 * sees the other, so no wake-up is lost, and a model that is polling costs the writer no
 * system call. */
void fab_fn_notify(struct fab *f, uint32_t fni)
{
    struct fab_function *fn = fab_func(f, fni);
    atomic_fetch_add(&fn->reg_seq, 1);
    if (atomic_load(&fn->reg_waiters))
        fab_futex_wake(&fn->reg_seq, INT_MAX);
}

/* Plain memory tells nobody it was written, on hardware and here, unless its model asked: an
 * idle accelerator woken by every NVMe read into its memory would cost the NVMe model a
 * system call per I/O, and the woken thread a CPU. The write came first and the watch is
 * read after a full fence; the model sets the watch and fences before it looks at the memory
 * (fab_fn_watch): one of the two sees the other. */
void fab_fn_written(struct fab *f, uint32_t fni, uint64_t off)
{
    struct fab_function *fn = fab_func(f, fni);
    for (int b = 0; b < FAB_BARS; b++) {
        struct fab_bar *bar = &fn->bar[b];
        if (bar->kind != FAB_BAR_MEM || off < bar->off || off - bar->off >= bar->size)
            continue;
        atomic_thread_fence(memory_order_seq_cst);
        if (!atomic_load(&bar->watched))
            return;
        fab_fn_notify(f, fni);
        return;
    }
    /* A register write by a device (an accelerator ringing an NVMe's doorbell): the device's
     * thread is the driver now, and the model must not take a CPU the last program's write
     * left behind for the driver's (it would yield to a driver that is elsewhere). */
    fab_fn_note_driver_cpu(f, fni);
    fab_fn_notify(f, fni);
}

void fab_fn_watch(struct fab *f, uint32_t fni, int bar, bool on)
{
    atomic_store(&fab_func(f, fni)->bar[bar].watched, on);
    atomic_thread_fence(memory_order_seq_cst);
}

int fab_fn_wait(struct fab *f, uint32_t fni, uint32_t seen, int64_t timeout_ns)
{
    struct fab_function *fn = fab_func(f, fni);
    if (atomic_load(&fn->raw_maps) && (timeout_ns < 0 || timeout_ns > FAB_RAW_TICK_NS))
        timeout_ns = FAB_RAW_TICK_NS; /* stores may come unannounced: look again soon */
    atomic_fetch_add(&fn->reg_waiters, 1);
    int rc = 0;
    if (atomic_load(&fn->reg_seq) == seen)
        rc = fab_futex_wait(&fn->reg_seq, seen, timeout_ns);
    atomic_fetch_sub(&fn->reg_waiters, 1);
    return rc;
}

static void fn_reset(struct fab *f, uint32_t fni, bool all_bars)
{
    struct fab_function *fn = fab_func(f, fni);
    fab_lock(&fn->cfg_lock);
    uint16_t zero = 0, ctrl;
    memcpy(fn->cfg + 0x04, &zero, 2);
    memcpy(&ctrl, fn->cfg + FAB_CFG_MSIX + 2, 2);
    ctrl &= 0x7ff;
    memcpy(fn->cfg + FAB_CFG_MSIX + 2, &ctrl, 2);
    fn->bar_sizing = 0;
    fab_unlock(&fn->cfg_lock);
    int fd = fab_bar_fd(f, fni);
    for (int b = 0; fd >= 0 && b < FAB_BARS; b++)
        if (fn->bar[b].kind == FAB_BAR_REGS || (all_bars && fn->bar[b].kind == FAB_BAR_MEM))
            fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)fn->bar[b].off,
                      (off_t)fn->bar[b].size);
    /* raw_maps stays: a reset unmaps nobody, and stores through a mapping held across it (a
     * guest's FLR, a reclaim racing a map) must still be seen. */
    atomic_fetch_add(&fn->reset_gen, 1);
    fab_fn_notify(f, fni);
}

/* A function-level reset completes within 100 ms (PCIe), and software may not use the
 * function before: the next borrower's first read (an ID register, an NVMe's CAP) must not
 * find the registers still cleared because the model had no CPU yet. */
#define FLR_DONE_NS 100000000ull

void fab_fn_reset(struct fab *f, uint32_t fni)
{
    if (fni >= f->ctl->nfuncs)
        return;
    struct fab_function *fn = fab_func(f, fni);
    fn_reset(f, fni, false);
    uint32_t gen = atomic_load(&fn->reset_gen);
    uint64_t until = fab_now_ns() + FLR_DONE_NS;
    const struct timespec nap = { 0, 20000 };
    /* A model that does not answer within the time: the caller goes on, as before. */
    while (atomic_load(&fn->model_up) && (int32_t)(atomic_load(&fn->reset_done) - gen) < 0 &&
           fab_now_ns() < until)
        nanosleep(&nap, NULL);
}

void fab_fn_reset_done(struct fab_function *fx, uint32_t gen)
{
    atomic_store(&fx->reset_done, gen);
}

void fab_funcs_reset(struct fab *f, uint32_t host)
{
    const struct fab_host *h = fab_host(f, host);
    for (uint32_t i = 0; i < h->nfuncs; i++) {
        uint32_t fni = h->func_first + i;
        struct fab_function *fn = fab_func(f, fni);
        atomic_store(&fn->lend_available, 0);
        atomic_store(&fn->lend_exclusive, 0);
        for (int k = 0; k < 4; k++)
            atomic_store(&fn->lend_borrowers[k], 0);
        /* A manager that shared the device died with its lender's lending state: a new one
         * must be able to take the device once it is lent out again. */
        atomic_store(&fn->lend_manager, 0);
        atomic_store(&fn->lend_manager_pid, 0);
        atomic_store(&fn->lend_setup, 0);
        fn_reset(f, fni, true);
    }
}

/* Both directions store only on a change: a load of a line the thread holds anyway (the
 * model's loop reads reg_seq, a driver's notice bumps it), no line written per I/O. */
static void note_cpu(_Atomic uint32_t *word)
{
    int cpu = sched_getcpu();
    uint32_t v = cpu < 0 ? 0 : (uint32_t)cpu + 1;
    if (atomic_load_explicit(word, memory_order_relaxed) != v)
        atomic_store_explicit(word, v, memory_order_relaxed);
}

void fab_fn_note_cpu(struct fab_function *fx)
{
    note_cpu(&fx->model_cpu);
}

void fab_fn_note_driver_cpu(struct fab *f, uint32_t fni)
{
    note_cpu(&fab_func(f, fni)->driver_cpu);
}

void fab_fn_driver_asleep(struct fab *f, uint32_t fni, bool asleep)
{
    _Atomic uint32_t *w = &fab_func(f, fni)->driver_cpu;
    if (!asleep)
        note_cpu(w);
    else if (atomic_load_explicit(w, memory_order_relaxed))
        atomic_store_explicit(w, 0, memory_order_relaxed);
}

bool fab_fn_driver_here(const struct fab_function *fx)
{
    uint32_t v = atomic_load_explicit(&fx->driver_cpu, memory_order_relaxed);
    return v && (int)v - 1 == sched_getcpu();
}
