/*
 * The NVMe controller model's core (nvme_regs.c, nvme_prp.c, nvme_admin.c, nvme_io.c): its
 * state and the API the device model (nvme.c) and the fuzz harness (fuzz/nvme_fuzz.c) drive.
 * Thread-free: the caller serializes every call on one controller.
 */
#ifndef NTBLEND_NVME_CTRL_H
#define NTBLEND_NVME_CTRL_H

#include <stdbool.h>
#include <stdint.h>

#include "ntblend/nvme_spec.h"

/* The model's choices where the specification leaves one to the controller. */
#define NVME_REGS_SIZE 0x4000   /* BAR0: registers, doorbells, MSI-X table */
#define NVME_MSIX_TABLE 0x2000  /* the MSI-X table's offset in BAR0 */
#define NVME_MQES 4095u         /* CAP.MQES, 0-based: 4096 entries per queue */
#define NVME_MAX_QUEUES 255u    /* I/O queue pairs the BAR layout allows (MSI-X table size) */
#define NVME_LBA_SHIFT 12u
#define NVME_LBA_SIZE 4096u
#define NVME_AERL 3u            /* 0-based: 4 outstanding AERs */
#define NVME_ERR_LOG 64u        /* error log entries kept */
#define NVME_DEFAULT_QUEUES 32u /* I/O queue pairs unless the device sets queues= */

/* How the core reaches the outside world: DMA as the function's own requester, and MSI-X. */
struct nvme_backend {
    void *ctx;
    int (*dma_read)(void *ctx, uint64_t addr, void *buf, uint64_t len);
    int (*dma_write)(void *ctx, uint64_t addr, const void *buf, uint64_t len);
    void (*irq)(void *ctx, uint32_t vector); /* may be NULL */
    bool (*bus_master)(void *ctx);           /* may be NULL: always enabled */
};

struct nvme_params {
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

struct nvme_sq {
    bool used;
    uint16_t cqid;
    uint32_t size; /* entries */
    uint32_t head, tail;
    uint32_t db; /* last doorbell value acted on */
    uint64_t base;
    bool stalled; /* an entry could not be fetched: nothing more until it is deleted */
};

struct nvme_cq {
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

struct nvme_err_entry {
    uint64_t count;
    uint16_t sqid, cid, status, loc;
    uint64_t lba;
    uint32_t nsid;
};

struct nvme_ctrl {
    struct nvme_params p;
    struct nvme_backend be;
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
    struct nvme_sq *sq;     /* [queues + 1] */
    struct nvme_cq *cq;
    uint16_t aer_cid[NVME_AERL + 1];
    uint32_t naer;
    uint32_t aer_pending;   /* events waiting for an AER: bitmask of info codes */
    uint32_t aer_masked;    /* event types reported, awaiting Get Log Page (RAE=0) */
    uint32_t feat[0x10];    /* current feature values */
    struct nvme_err_entry errlog[NVME_ERR_LOG];
    uint64_t err_count;
    uint32_t aborts[8][2];  /* (sqid, cid) marked aborted before fetch */
    uint32_t naborts;
    /* SMART counters */
    uint64_t units_read, units_written, read_cmds, write_cmds, media_errors;
};

/* Set up state and (for nvme.c) open namespace files before; regs must be NVME_REGS_SIZE. */
int nvme_ctrl_init(struct nvme_ctrl *c, const struct nvme_params *p,
                   const struct nvme_backend *be, volatile uint8_t *regs);
void nvme_ctrl_fini(struct nvme_ctrl *c);
/* Write the read-only registers (CAP, VS, CMB*) and act on CC changes (enable, reset,
 * shutdown). Returns true when the controller is ready to process commands. */
bool nvme_regs_update(struct nvme_ctrl *c);
/* One round-robin pass: up to the Arbitration Burst (one command by default) from every
 * non-empty SQ whose CQ has room, admin SQ first. Raises the interrupts of CQs that got
 * entries. Returns the number of commands handled. */
int nvme_process(struct nvme_ctrl *c);
/* A doorbell of a queue in use holds another value than last taken: a driver that stores to
 * the registers without announcing it (a SISCI program) rang it. */
bool nvme_doorbells_moved(const struct nvme_ctrl *c);
/* Execute one command from SQ sqid; fills *cqe (dw0, status without phase). Returns false when
 * the command stays outstanding (an Asynchronous Event Request). */
bool nvme_exec(struct nvme_ctrl *c, uint16_t sqid, const struct nvme_sqe *sqe,
               struct nvme_cqe *cqe);
/* Controller reset (CC.EN 1->0): every queue and outstanding AER freed, CSTS cleared. */
void nvme_reset(struct nvme_ctrl *c);

#endif
