/*
 * libFuzzer harness for the NVMe command path (src/devices/nvme_*.c, the controller core): arbitrary 64-byte
 * submission queue entries, with the rest of the input as host memory contents (PRP lists,
 * data, DSM ranges), executed by the thread-free controller core against an in-memory DMA
 * backend and a memfd namespace. Both entry points are fuzzed: nvmc_exec directly, and the
 * full register path (SQ in memory, doorbell, nvmc_process, CQ posting).
 *
 * Input: byte 0 selects the mode (bit 0: I/O queue instead of admin, bit 1: through the
 * doorbell and nvmc_process, bits 2-3: memory page size 4K/8K/16K/64K via CC.MPS); bytes 1..64
 * are the SQE; the rest is copied to host memory at DATA (MEM_BASE + 0x40000).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "nvmc_ctrl.h"

#define MEM_BASE 0x100000ull
#define MEM_SIZE (1ull << 20)
#define ASQ (MEM_BASE)
#define ACQ (MEM_BASE + 0x10000) /* 64 KiB apart: aligned for every page size */
#define IOSQ (MEM_BASE + 0x20000)
#define IOCQ (MEM_BASE + 0x30000)
#define SCRATCH (MEM_BASE + 0x40000)
#define DATA (MEM_BASE + 0x40000)

static uint8_t *mem;
static uint8_t regs[NVMC_REGS_SIZE] __attribute__((aligned(64)));
static struct nvmc_ctrl ctrl;
static int fds[2];

static int in_mem(uint64_t addr, uint64_t len)
{
    return addr >= MEM_BASE && len <= MEM_SIZE && addr - MEM_BASE <= MEM_SIZE - len;
}

static int dma_read(void *ctx, uint64_t addr, void *buf, uint64_t len)
{
    (void)ctx;
    if (!in_mem(addr, len)) {
        memset(buf, 0xff, len);
        return -5;
    }
    memcpy(buf, mem + (addr - MEM_BASE), len);
    return 0;
}

static int dma_write(void *ctx, uint64_t addr, const void *buf, uint64_t len)
{
    (void)ctx;
    if (!in_mem(addr, len))
        return -5;
    memcpy(mem + (addr - MEM_BASE), buf, len);
    return 0;
}

static void irq(void *ctx, uint32_t v)
{
    (void)ctx;
    if (v >= ctrl.p.vectors)
        abort(); /* the core must never raise a vector the function does not have */
}

static void w32(uint32_t off, uint32_t v) { memcpy(regs + off, &v, 4); }

static void init_once(void)
{
    mem = mmap(NULL, MEM_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (int i = 0; i < 2; i++) {
        fds[i] = memfd_create("nvme-fuzz-ns", 0);
        if (fds[i] < 0 || ftruncate(fds[i], 1 << 20))
            abort();
    }
    struct nvmc_params p = { .queues = 4, .namespaces = 2, .ns_size = 1 << 20, .mdts = 3,
                             .vectors = 5, .vid = 0x8086, .ssvid = 0x8086, .serial = "FUZZ" };
    struct nvmc_backend be = { NULL, dma_read, dma_write, irq, NULL };
    ctrl.ns_fd = fds;
    if (nvmc_ctrl_init(&ctrl, &p, &be, regs))
        abort();
}

/* Reset, enable with admin queues of 16 entries, create I/O queue pair 1. */
static void bring_up(uint32_t mps)
{
    w32(NVME_REG_CC, 0);
    nvmc_regs_update(&ctrl);
    memset(mem, 0, SCRATCH - MEM_BASE);
    w32(NVME_REG_AQA, 15u << 16 | 15u);
    w32(NVME_REG_ASQ, (uint32_t)ASQ);
    w32(NVME_REG_ASQ + 4, 0);
    w32(NVME_REG_ACQ, (uint32_t)ACQ);
    w32(NVME_REG_ACQ + 4, 0);
    w32(NVME_REG_CC, NVME_CC_EN | mps << 7 | 6u << 16 | 4u << 20);
    if (!nvmc_regs_update(&ctrl))
        abort();
    struct nvme_sqe s = { 0 };
    struct nvme_cqe c;
    s.opc = NVME_ADM_CREATE_CQ;
    s.prp1 = IOCQ;
    s.cdw10 = 15u << 16 | 1;
    s.cdw11 = 1u << 16 | 3;
    if (!nvmc_exec(&ctrl, 0, &s, &c) || c.status)
        abort();
    s.opc = NVME_ADM_CREATE_SQ;
    s.prp1 = IOSQ;
    s.cdw11 = 1u << 16 | 1;
    if (!nvmc_exec(&ctrl, 0, &s, &c) || c.status)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int inited;
    if (!inited) {
        init_once();
        inited = 1;
    }
    if (size < 65)
        return 0;
    uint8_t mode = data[0];
    uint32_t mps = (uint32_t[]){ 0, 1, 2, 4 }[(mode >> 2) & 3];
    bring_up(mps);
    struct nvme_sqe sqe;
    memcpy(&sqe, data + 1, 64);
    size_t rest = size - 65;
    if (rest > MEM_SIZE - (DATA - MEM_BASE))
        rest = MEM_SIZE - (DATA - MEM_BASE);
    memset(mem + (SCRATCH - MEM_BASE), 0, MEM_SIZE - (SCRATCH - MEM_BASE));
    memcpy(mem + (DATA - MEM_BASE), data + 65, rest);
    uint16_t sqid = mode & 1;
    if (!(mode & 2)) {
        struct nvme_cqe cqe;
        if (nvmc_exec(&ctrl, sqid, &sqe, &cqe) && (cqe.status & 0x8000))
            abort(); /* status values fit SCT/SC */
        return 0;
    }
    /* Through the queues: the command, then a second copy, both announced by doorbell. */
    uint64_t sq = sqid ? ctrl.sq[1].base : ASQ;
    memcpy(mem + (sq - MEM_BASE), &sqe, 64);
    sqe.cid ^= 0x5a5a;
    memcpy(mem + (sq - MEM_BASE) + 64, &sqe, 64);
    w32(NVME_REG_DBS + 8u * sqid, 2);
    for (int i = 0; i < 4 && nvmc_process(&ctrl); i++)
        ;
    return 0;
}
