/*
 * The NVMe controller model's core (nvmc_regs.c, nvmc_prp.c, nvmc_admin.c, nvmc_io.c): its
 * state and the API the device model (nvmc.c) and the fuzz harness (fuzz/nvme_fuzz.c) drive.
 * Thread-free: the caller serializes every call on one controller.
 */
#ifndef NTBLEND_NVME_CTRL_H
#define NTBLEND_NVME_CTRL_H

#include <stdbool.h>
#include <stdint.h>

#include "ntblend/nvme_spec.h"

/* The model's choices where the specification leaves one to the controller. */
#define NVMC_REGS_SIZE 0x4000   /* BAR0: registers, doorbells, MSI-X table */
#define NVMC_MSIX_TABLE 0x2000  /* the MSI-X table's offset in BAR0 */
#define NVMC_MQES 4095u         /* CAP.MQES, 0-based: 4096 entries per queue */
#define NVMC_MAX_QUEUES 255u    /* I/O queue pairs the BAR layout allows (MSI-X table size) */
#define NVMC_LBA_SHIFT 12u
#define NVMC_LBA_SIZE 4096u
#define NVMC_AERL 3u            /* 0-based: 4 outstanding AERs */
#define NVMC_ERR_LOG 64u        /* error log entries kept */
#define NVMC_DEFAULT_QUEUES 32u /* I/O queue pairs unless the device sets queues= */

/* How the core reaches the outside world: DMA as the function's own requester, and MSI-X.
 * A dma_write of up to 16 bytes, 4-byte aligned, must land with its last dword last, as a TLP
 * does (completions are posted that way). */
struct nvmc_backend {
    void *ctx;
    int (*dma_read)(void *ctx, uint64_t addr, void *buf, uint64_t len);
    int (*dma_write)(void *ctx, uint64_t addr, const void *buf, uint64_t len);
    void (*irq)(void *ctx, uint32_t vector); /* may be NULL */
    bool (*bus_master)(void *ctx);           /* may be NULL: always enabled */
};

struct nvmc_params {
    uint32_t queues;     /* I/O queue pairs (32) */
    uint32_t namespaces; /* 1 */
    uint64_t ns_size;    /* bytes per namespace (1 GiB) */
    uint32_t mdts;       /* max transfer = 2^mdts * 4 KiB (5) */
    uint64_t cmb_size;   /* 0: no controller memory buffer */
    uint32_t vectors;    /* MSI-X vectors (queues + 1) */
    uint16_t vid, ssvid;
    const char *serial;  /* up to 20 chars */
    bool alloc_all;      /* Number of Queues allocates every queue, whatever was asked: the
                          * specification lets a controller allocate more than requested, and
                          * drivers written for such controllers (libnvm) rely on it */
    /* SR-IOV (NVMe 1.4 §8.5): the PF is the primary controller (CNTLID 1) of an NVM subsystem
     * whose secondary controllers are its VFs (VF n: CNTLID n + 1), each with private queues
     * and namespaces; they share the subsystem's serial number and NQN. */
    uint16_t cntlid;     /* 0 is taken as 1 */
    uint16_t vfn;        /* 0: the primary (or only) controller; else this secondary's VF number */
    uint16_t nsec;       /* secondary controllers in the subsystem (the PF's VFs) */
};

struct nvmc_sq {
    bool used;
    uint16_t cqid;
    uint32_t size; /* entries */
    uint32_t head, tail;
    uint32_t db; /* last doorbell value acted on */
    uint64_t base;
    bool stalled; /* an entry could not be fetched: nothing more until it is deleted */
};

struct nvmc_cq {
    bool used;
    bool ien;
    uint16_t iv;
    uint32_t size;
    uint32_t head, tail;
    uint8_t phase;
    uint32_t nsq; /* SQs bound to it */
    uint32_t db;
    bool irq_due;
    uint64_t base;
};

struct nvmc_err_entry {
    uint64_t count;
    uint16_t sqid, cid, status, loc;
    uint64_t lba;
    uint32_t nsid;
};

struct nvmc_ctrl {
    struct nvmc_params p;
    struct nvmc_backend be;
    volatile uint8_t *regs; /* BAR0: 16 KiB */
    int *ns_fd;             /* per namespace; -1 = not backed */
    const uint8_t **ns_map; /* per namespace: its backing file mapped read-only, or NULL
                             * (reads then go through ns_fd) */
    uint64_t nlba;          /* blocks per namespace */
    /* state */
    bool enabled;           /* CC.EN seen as 1 and the controller became ready */
    bool fatal;             /* CSTS.CFS */
    bool shut;              /* shutdown complete */
    uint32_t page;          /* memory page size from CC.MPS */
    uint32_t nsq_alloc, ncq_alloc; /* Number of Queues (1-based counts) */
    bool io_queue_created;
    struct nvmc_sq *sq;     /* [queues + 1] */
    struct nvmc_cq *cq;
    uint16_t aer_cid[NVMC_AERL + 1];
    uint32_t naer;
    uint32_t aer_pending;   /* events waiting for an AER: bitmask of info codes */
    uint32_t aer_masked;    /* event types reported, awaiting Get Log Page (RAE=0) */
    uint32_t feat[0x10];    /* current feature values */
    struct nvmc_err_entry errlog[NVMC_ERR_LOG];
    uint64_t err_count;
    uint32_t aborts[8][2];  /* (sqid, cid) marked aborted before fetch */
    uint32_t naborts;
    /* SMART counters */
    uint64_t units_read, units_written, read_cmds, write_cmds, media_errors;
};

/* Set up state and (for nvme.c) open namespace files before; regs must be NVMC_REGS_SIZE. */
int nvmc_ctrl_init(struct nvmc_ctrl *c, const struct nvmc_params *p,
                   const struct nvmc_backend *be, volatile uint8_t *regs);
void nvmc_ctrl_fini(struct nvmc_ctrl *c);
/* Write the read-only registers (CAP, VS, CMB*) and act on CC changes (enable, reset,
 * shutdown). Returns true when the controller is ready to process commands. */
bool nvmc_regs_update(struct nvmc_ctrl *c);
/* One round-robin pass: up to the Arbitration Burst (one command by default) from every
 * non-empty SQ whose CQ has room, admin SQ first. Raises the interrupts of CQs that got
 * entries. Returns the number of commands handled. */
int nvmc_process(struct nvmc_ctrl *c);
/* A doorbell of a queue in use holds another value than last taken: a driver that stores to
 * the registers without announcing it (a SISCI program) rang it. */
bool nvmc_doorbells_moved(const struct nvmc_ctrl *c);
/* Execute one command from SQ sqid; fills *cqe (dw0, status without phase). Returns false when
 * the command stays outstanding (an Asynchronous Event Request). */
bool nvmc_exec(struct nvmc_ctrl *c, uint16_t sqid, const struct nvme_sqe *sqe,
               struct nvme_cqe *cqe);
/* Controller reset (CC.EN 1->0): every queue and outstanding AER freed, CSTS cleared. */
void nvmc_reset(struct nvmc_ctrl *c);

#endif
