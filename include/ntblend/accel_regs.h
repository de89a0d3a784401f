/*
 * ntblend accelerator: the programming interface of the accelerator ("GPU-like") device
 * model, what a driver or test sees in its BARs. Drivers reach the device through the SmartIO
 * API (ntblend/smartio.h: sio_map_bar, sio_write32, sio_map_local, sio_enable_vector, ...)
 * and this register map. BAR0 (64 KiB) holds the registers, a ring of copy descriptors and
 * the MSI-X table and PBA; BAR2 is the device memory (plain memory, any size the topology's
 * mem= gives, rounded up to a power of two). The model is src/devices/accel.c;
 * docs/accel-model.md says how to drive it.
 *
 * All registers are 32-bit, little-endian, naturally aligned. Register stores go through
 * sio_write32(), which notifies the model as a posted MMIO write would; the device owns the
 * registers marked RO and rewrites them, so a driver's stores into them do not stick.
 */
#ifndef NTBLEND_ACCEL_REGS_H
#define NTBLEND_ACCEL_REGS_H

#include <stdint.h>

#define ACCEL_BAR_REGS 0 /* BAR index of the registers */
#define ACCEL_BAR_MEM 2  /* BAR index of the device memory */

/* ---- registers (offsets in BAR0) ---- */
#define ACCEL_REG_ID 0x000        /* RO: ACCEL_ID */
#define ACCEL_REG_VERSION 0x004   /* RO: ACCEL_VERSION (major << 16 | minor) */
#define ACCEL_REG_CAPS 0x008      /* RO: ring entries (bits 0-15), MSI-X vectors (16-23) */
#define ACCEL_REG_STATUS 0x00c    /* RO: ACCEL_STATUS_* */
#define ACCEL_REG_CONTROL 0x010   /* RW: ACCEL_CTRL_* */
#define ACCEL_REG_VECTOR 0x014    /* RW: MSI-X vector for completions (reset 0) */
#define ACCEL_REG_MEM_LO 0x018    /* RO: device memory (BAR2) size, low dword */
#define ACCEL_REG_MEM_HI 0x01c    /* RO: high dword */
#define ACCEL_REG_HEAD 0x020      /* RW (driver): descriptors [TAIL, HEAD) are submitted */
#define ACCEL_REG_TAIL 0x024      /* RO: next descriptor the engine takes; before it: done */
#define ACCEL_REG_COMPLETED 0x028 /* RO: descriptors completed, successfully or not */
#define ACCEL_REG_ERRORS 0x02c    /* RO: descriptors that failed */
#define ACCEL_REG_LAST_ERR 0x030  /* RO: ACCEL_ERR_* of the latest failure (0: none yet) */
#define ACCEL_REG_LAST_IDX 0x034  /* RO: ring index (free-running) of the latest failure */
#define ACCEL_REG_BYTES_LO 0x038  /* RO: bytes copied so far, low dword */
#define ACCEL_REG_BYTES_HI 0x03c  /* RO: high dword */

/* HEAD, TAIL and COMPLETED are free-running 32-bit counters: descriptor i lives in ring slot
 * i % ACCEL_RING_ENTRIES; HEAD - TAIL (mod 2^32) is the number queued and must not exceed
 * ACCEL_RING_ENTRIES (the engine halts with ACCEL_ERR_RING if it does). */

#define ACCEL_ID 0x4c454341u      /* "ACEL" */
#define ACCEL_VERSION 0x00010000u /* 1.0 */

#define ACCEL_STATUS_READY 0x1u   /* the model serves the function */
#define ACCEL_STATUS_BUSY 0x2u    /* descriptors queued or executing */
#define ACCEL_STATUS_ERROR 0x4u   /* a descriptor failed since the last reset */
#define ACCEL_STATUS_HALTED 0x8u  /* the engine stopped on ACCEL_ERR_RING; reset to recover */
#define ACCEL_STATUS_WAITING 0x10u /* executing an ACCEL_OP_WAIT */

#define ACCEL_CTRL_ENABLE 0x1u /* the engine executes descriptors (reset: clear) */
#define ACCEL_CTRL_RESET 0x2u  /* write 1: abandon queued work, zero HEAD, TAIL and the
                                * counters and clear ERROR/HALTED; reads back 0 when done */

/* ---- descriptor ring (in BAR0) ---- */
#define ACCEL_RING_OFF 0x1000
#define ACCEL_RING_ENTRIES 256u

/**
 * struct accel_desc - one entry of the descriptor ring (32 bytes, at ACCEL_RING_OFF + 32 * slot
 *                     in BAR0).
 * @src:    device memory offset, or bus address with ACCEL_DESC_SRC_BUS (WAIT: the offset of
 *          the word to watch)
 * @dst:    device memory offset, or bus address with ACCEL_DESC_DST_BUS
 * @len:    bytes to copy (COPY); must be > 0
 * @ctrl:   opcode (ACCEL_OP_*, bits 0-3) | ACCEL_DESC_* flags
 * @status: written by the device: ACCEL_DESC_DONE | ACCEL_ERR_*; the driver zeroes it before
 *          submitting
 * @value:  WAIT: the value to wait for; COPY: ignored
 *
 * The driver writes the descriptor into its ring slot, then advances ACCEL_REG_HEAD past it.
 */
struct accel_desc {
    uint64_t src;
    uint64_t dst;
    uint32_t len;
    uint32_t ctrl;
    uint32_t status;
    uint32_t value;
};
_Static_assert(sizeof(struct accel_desc) == 32, "descriptor layout");

#define ACCEL_OP_MASK 0xfu
#define ACCEL_OP_COPY 0x0u /* copy len bytes from src to dst */
/* Wait until the 32-bit word at device memory offset src is >= value (wrap-around compare:
 * (int32_t)(word - value) >= 0), then complete; later descriptors wait behind it. What a
 * CUDA kernel spinning on a flag in GPU memory does in the peer-to-peer ping-pong program
 * (smartio-tocs-2021 §7.1.4). A peer's DMA write into BAR2 wakes the engine at once; CPU
 * stores into BAR2 are noticed within ACCEL_WAIT_RECHECK_US. */
#define ACCEL_OP_WAIT 0x1u
#define ACCEL_WAIT_RECHECK_US 1000
/* Run an NVMe job (struct accel_nvme_job at device memory offset src): what a long-running
 * GPU kernel does in smartio-tocs-2021 §6.4 (Figs. 18-19). The device builds read or write
 * commands in a submission queue in its own memory, rings the NVMe's doorbell peer to peer,
 * takes the completions the NVMe posts into a completion queue also in its memory, and rings
 * the completion doorbell; the data moves between the NVMe and this device's memory. No CPU
 * takes part after the descriptor is queued. Later descriptors wait behind it. */
#define ACCEL_OP_NVME 0x2u

#define ACCEL_DESC_INTR 0x100u    /* raise the completion vector when this one completes */
#define ACCEL_DESC_SRC_BUS 0x200u /* src is a bus address (DMA as the device's requester) */
#define ACCEL_DESC_DST_BUS 0x400u /* dst is a bus address */

#define ACCEL_DESC_DONE 0x80000000u /* in status: the device completed the descriptor */

/**
 * enum accel_err - why a descriptor failed: bits 0-7 of its status, and ACCEL_REG_LAST_ERR.
 * @ACCEL_ERR_NONE:        no failure
 * @ACCEL_ERR_BUS_MASTER:  a bus address, but Bus Master Enable is clear
 * @ACCEL_ERR_RANGE:       device memory offset + len beyond BAR2, or len 0
 * @ACCEL_ERR_OPCODE:      unknown opcode
 * @ACCEL_ERR_FAULT:       IOMMU fault (unmapped IOVA or permission)
 * @ACCEL_ERR_ABORT:       master abort: nothing decodes the address, LUT entry unmapped
 * @ACCEL_ERR_LINK:        an NTB link on the path is down
 * @ACCEL_ERR_ACCESS:      read through an NTB whose requester-ID table lacks the device
 * @ACCEL_ERR_RING:        HEAD - TAIL exceeded the ring (engine halted)
 * @ACCEL_ERR_OTHER:       anything else
 */
enum accel_err {
    ACCEL_ERR_NONE = 0,
    ACCEL_ERR_BUS_MASTER = 1, /* a bus address, but Bus Master Enable is clear */
    ACCEL_ERR_RANGE = 2,      /* device memory offset + len beyond BAR2, or len 0 */
    ACCEL_ERR_OPCODE = 3,     /* unknown opcode */
    ACCEL_ERR_FAULT = 4,      /* IOMMU fault (unmapped IOVA or permission) */
    ACCEL_ERR_ABORT = 5,      /* master abort: nothing decodes the address, LUT entry unmapped */
    ACCEL_ERR_LINK = 6,       /* an NTB link on the path is down */
    ACCEL_ERR_ACCESS = 7,     /* read through an NTB whose requester-ID table lacks the device */
    ACCEL_ERR_RING = 8,       /* HEAD - TAIL exceeded the ring (engine halted) */
    ACCEL_ERR_OTHER = 9,
    ACCEL_ERR_NVME = 10,      /* NVME: commands completed with an error status (see the job) */
    ACCEL_ERR_TIMEOUT = 11,   /* NVME: no completion within the job's timeout; queue broken */
    ACCEL_ERR_BROKEN = 12,    /* NVME: the queue is broken by an earlier failure: recreate it */
    ACCEL_ERR_JOB = 13,       /* NVME: a job or queue field out of range (see docs) */
};
#define ACCEL_ERR_MASK 0xffu

/* ---- device-initiated NVMe I/O (ACCEL_OP_NVME), in device memory ---- */

#define ACCEL_NVME_MAX_DEPTH 1024u /* entries per queue the engine drives */

/**
 * struct accel_nvme_queue - an NVMe I/O queue pair that lives in this device's memory, as the
 *                           driver set it up (128 bytes, 8-byte aligned, in device memory).
 * @sq_off:    device memory offset of the submission queue (@depth 64-byte entries)
 * @cq_off:    ... of the completion queue (@depth 16-byte entries), zeroed when created
 * @prp_off:   ... of the PRP lists: @depth - 1 lists of @prp_bytes, one per command identifier
 * @sq_db:     bus address of the queue's SQ tail doorbell, as this device reaches it
 * @cq_db:     ... of its CQ head doorbell
 * @mem_io:    the address at which the NVMe reaches offset 0 of this device's memory
 * @depth:     entries per queue, 2..ACCEL_NVME_MAX_DEPTH
 * @prp_bytes: bytes per PRP list, a power of two, 8..@page
 * @page:      the controller's memory page size (CC.MPS), a power of two, 4096..65536
 * @sq_tail, @cq_head, @phase, @broken: the device's (the SQ tail, the CQ head, the phase tag
 *             the next completion will carry, and whether a failure left commands of unknown
 *             fate: then every job on this queue fails until it is created again); the driver
 *             sets them to 0, 0, 1, 0 when it creates the queues.
 */
struct accel_nvme_queue {
    uint64_t sq_off, cq_off, prp_off;
    uint64_t sq_db, cq_db;
    uint64_t mem_io;
    uint32_t depth, prp_bytes, page;
    uint32_t sq_tail, cq_head, phase, broken;
    uint8_t rsvd[52];
};
_Static_assert(sizeof(struct accel_nvme_queue) == 128, "NVMe queue block layout");

/**
 * struct accel_nvme_job - what an ACCEL_OP_NVME descriptor runs (128 bytes, 8-byte aligned,
 *                         in device memory).
 * @queue_off:  device memory offset of its struct accel_nvme_queue
 * @data_off:   device memory offset of the data, @count * @nlb * @block bytes, 4-byte aligned:
 *              command i moves the blocks at @slba + i * @nlb to/from @data_off + i * bytes
 * @slba:       first block
 * @status_off: 0, or the device memory offset of @count 16-bit words (2-byte aligned) where
 *              the device writes each command's NVMe status (SCT << 8 | SC; 0 success) as it
 *              completes, 0xffff until then: which commands' data may be used after a failure
 * @nsid:       namespace
 * @opc:        NVMe opcode: 0x02 read (into device memory) or 0x01 write
 * @nlb:        blocks per command, 1..65536
 * @block:      bytes per block (the namespace's), a power of two, 512..65536
 * @count:      commands
 * @qd:         at most this many outstanding, 1..depth - 1
 * @timeout_ms: a job that sees no completion for this long fails (0: 10000)
 * @done:       written by the device: commands completed successfully
 * @failed:     ... commands completed with an error status
 * @status:     ... the first error's NVMe status (SCT << 8 | SC)
 * @first_failed: ... the first failed command's index
 * @bytes:      ... bytes moved by successful commands
 */
struct accel_nvme_job {
    uint64_t queue_off, data_off, slba, status_off;
    uint32_t nsid, opc, nlb, block, count, qd, timeout_ms;
    uint32_t done, failed, status, first_failed;
    uint32_t rsvd0;
    uint64_t bytes;
    uint8_t rsvd[40];
};
_Static_assert(sizeof(struct accel_nvme_job) == 128, "NVMe job layout");

/* ---- MSI-X (in BAR0; the capability points here too) ---- */
#define ACCEL_MSIX_TABLE 0x8000
#define ACCEL_MSIX_PBA 0x9000
#define ACCEL_MSIX_VECTORS 4u

#endif
