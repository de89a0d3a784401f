/*
 * libFuzzer harness for the accelerator's descriptor engine (src/devices/accel_core.c): the
 * input fills the descriptor ring and drives the registers a driver writes (CONTROL, HEAD,
 * VECTOR, MSI-X table and PBA), with Bus Master Enable and MSI-X enable taken from it too.
 * The host side is plain memory: a "bus" of BUS_SIZE bytes at BUS_BASE, where anything
 * outside is a master abort. Findings: a crash or sanitizer report (e.g. a copy outside BAR2
 * or the bus), an engine that never goes idle, or published counters that contradict
 * themselves (TAIL != COMPLETED, ERRORS > COMPLETED, HEAD - TAIL beyond the ring unless the
 * engine halted).
 *
 * Input: byte 0 = flags (bit 0 BME, bit 1 MSI-X enabled, bit 2 reset first); bytes 1-4 HEAD;
 * bytes 5-8 VECTOR; byte 9 masks of the four MSI-X vectors; byte 10 pending bits; then
 * descriptors (32 bytes each) into ring slots 0.., then the rest into device memory.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "accel_core.h"

#define REGS_SIZE (ACCEL_MSIX_PBA + 4096)
#define MEM_SIZE (64u << 10)
#define BUS_BASE 0x100000ull
#define BUS_SIZE (64u << 10)
#define MAX_STEPS (4 * ACCEL_RING_ENTRIES)

static uint8_t *regs, *mem, *bus;
static bool bme, msix_on;
static uint32_t raised;

static bool on_bus(uint64_t addr, uint64_t len)
{
    return addr >= BUS_BASE && len <= BUS_SIZE && addr - BUS_BASE <= BUS_SIZE - len;
}

static bool h_bus_master(void *ctx) { (void)ctx; return bme; }
static bool h_msix_enabled(void *ctx) { (void)ctx; return msix_on; }

static void h_msix(void *ctx, uint32_t v)
{
    (void)ctx;
    if (v < ACCEL_MSIX_VECTORS)
        raised |= 1u << v;
}

static int h_dma_read(void *ctx, uint64_t src, void *dst, uint64_t len)
{
    (void)ctx;
    if (!on_bus(src, len))
        return -5; /* -EIO: master abort */
    memcpy(dst, bus + (src - BUS_BASE), len);
    return 0;
}

static int h_dma_write(void *ctx, uint64_t dst, const void *src, uint64_t len)
{
    (void)ctx;
    if (!on_bus(dst, len))
        return -5;
    memcpy(bus + (dst - BUS_BASE), src, len);
    return 0;
}

static int h_bus_copy(void *ctx, uint64_t dst, uint64_t src, uint64_t len)
{
    (void)ctx;
    if (!on_bus(src, len) || !on_bus(dst, len))
        return -14; /* -EFAULT */
    memmove(bus + (dst - BUS_BASE), bus + (src - BUS_BASE), len);
    return 0;
}

static const struct accel_host_ops ops = {
    h_bus_master, h_msix_enabled, h_msix, h_dma_read, h_dma_write, h_bus_copy,
};

static uint32_t reg(uint32_t off)
{
    uint32_t v;
    memcpy(&v, regs + off, 4);
    return v;
}

static void set_reg(uint32_t off, uint32_t v)
{
    memcpy(regs + off, &v, 4);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    regs = aligned_alloc(4096, REGS_SIZE);
    mem = aligned_alloc(4096, MEM_SIZE);
    bus = aligned_alloc(4096, BUS_SIZE);
    if (!regs || !mem || !bus)
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 11)
        return -1;
    memset(regs, 0, REGS_SIZE);
    memset(mem, 0, MEM_SIZE);
    memset(bus, 0xa5, BUS_SIZE);
    raised = 0;
    struct accel_core a = {.ops = &ops, .regs = regs, .mem = mem, .mem_size = MEM_SIZE};
    accel_core_init(&a);

    uint8_t flags = data[0];
    bme = flags & 1;
    msix_on = flags & 2;
    uint32_t head, vector;
    memcpy(&head, data + 1, 4);
    memcpy(&vector, data + 5, 4);
    for (uint32_t v = 0; v < ACCEL_MSIX_VECTORS; v++)
        set_reg(ACCEL_MSIX_TABLE + 16 * v + 12, (data[9] >> v) & 1);
    uint64_t pba = data[10] & 0xf;
    memcpy(regs + ACCEL_MSIX_PBA, &pba, sizeof pba);
    data += 11;
    size -= 11;
    size_t ring = ACCEL_RING_ENTRIES * sizeof(struct accel_desc);
    size_t n = size < ring ? size : ring;
    memcpy(regs + ACCEL_RING_OFF, data, n);
    if (size > n)
        memcpy(mem, data + n, size - n < MEM_SIZE ? size - n : MEM_SIZE);

    set_reg(ACCEL_REG_VECTOR, vector);
    set_reg(ACCEL_REG_HEAD, head);
    set_reg(ACCEL_REG_CONTROL, ACCEL_CTRL_ENABLE | (flags & 4 ? ACCEL_CTRL_RESET : 0));

    uint32_t steps = 0;
    while (accel_core_step(&a) == ACCEL_STEP_RAN)
        if (++steps > MAX_STEPS)
            abort(); /* every step consumes a descriptor or halts: the ring bounds them */

    uint32_t tail = reg(ACCEL_REG_TAIL), done = reg(ACCEL_REG_COMPLETED);
    if (tail != done || reg(ACCEL_REG_ERRORS) > done || reg(ACCEL_REG_ID) != ACCEL_ID)
        abort();
    bool halted = reg(ACCEL_REG_STATUS) & ACCEL_STATUS_HALTED;
    if (!halted && reg(ACCEL_REG_HEAD) - tail > ACCEL_RING_ENTRIES)
        abort();
    uint32_t completion_vec = vector < ACCEL_MSIX_VECTORS ? 1u << vector : 0;
    if (!msix_on && (raised & ~completion_vec))
        abort(); /* with MSI-X off only completion interrupts reach the host op */
    return 0;
}
