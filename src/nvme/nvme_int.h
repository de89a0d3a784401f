/*
 * libntbnvme internals: the backend ops table (how the library reaches registers, DMA memory
 * and interrupts), the queue-pair core (qpair.c: rings, phase, doorbells, command
 * identifiers, PRPs, completions, waiting), memory pools (iomem.c) and the device and queue
 * pair handles (ctrl.c, io.c). Spec definitions come from the public ntblend/nvme_spec.h.
 */
#ifndef NTBLEND_NVME_INT_H
#define NTBLEND_NVME_INT_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ntblend/nvme.h"
#include "ntblend/nvme_spec.h"
#include "wpol.h"

#define NVL_CID_NONE 0xffffu /* no command: never used as an identifier */

/* ---- backends ---- */

/* DMA memory: the CPU's view and the device's. */
struct nvl_dma {
    volatile uint8_t *cpu;
    uint64_t io;
    size_t size;
    void *handle; /* the backend's, for dma_free */
    uint64_t io_alt; /* the device's address of the same memory over path 1 (0: none) */
};

/*
 * What the library needs from whatever gives it the device: register access (doorbells
 * included: write32 must reach the device as a posted write, after the stores before it),
 * memory the device reaches, and interrupts. SmartIO is backend_sio.c, the driver model
 * (include/ntblend/pci.h) backend_pci.c.
 */
struct nvme_backend_ops {
    const char *name;
    uint32_t (*read32)(void *ctx, uint32_t off);
    void (*write32)(void *ctx, uint32_t off, uint32_t val);
    /* A register store the device need not act on at once: it sees the value when it next
     * reads the register, as hardware does, and is not woken for it (an emulated device's
     * model otherwise is, for every register write). NULL: write32. */
    void (*write32_lazy)(void *ctx, uint32_t off, uint32_t val);
    int (*dma_alloc)(void *ctx, size_t size, enum nvme_place where, struct nvl_dma *out);
    void (*dma_free)(void *ctx, struct nvl_dma *dma);
    /* Route device MSI-X vector dev_vector to host vector host_vector; may be NULL. */
    int (*irq_enable)(void *ctx, uint32_t dev_vector, uint32_t host_vector);
    /* Sleep until host vector's count differs from *seen (stores it) or timeout_ms:
     * 0 or -ETIMEDOUT. seen 0 with timeout 0 takes the current count. */
    int (*irq_wait)(void *ctx, uint32_t host_vector, uint32_t *seen, int timeout_ms);
    /* Whether the device was hot-removed (submissions then fail with -ENODEV); may be NULL. */
    bool (*gone)(void *ctx);
    void (*close)(void *ctx);
    /* Multipath (failover.c); NULL for a backend with one path. How many paths failover may
     * use (2; fewer: none), whether one works now, and queue memory the device reaches over
     * that path only (what dma_alloc gives is reached over both: io and io_alt). */
    int (*paths)(void *ctx);
    bool (*path_up)(void *ctx, int path);
    int (*dma_alloc_path)(void *ctx, size_t size, enum nvme_place where, int path,
                          struct nvl_dma *out);
    /* Registers through this path's mapping from now on. */
    void (*use_path)(void *ctx, int path);
    /* The CPU the device's model thread last ran on (-1: not known); NULL where the device is
     * hardware and uses no CPU: a completion wait on that CPU yields instead of spinning. */
    int (*device_cpu)(void *ctx);
    /* The calling thread, which waits for the device, goes to sleep (true) or woke (false):
     * for the model's doorbell wait (sio_driver_asleep); may be NULL. */
    void (*driver_asleep)(void *ctx, bool asleep);
};

/* SmartIO: borrow by name (exclusive: to own it; shared: as a client of its manager) or use
 * a borrowed device. */
int nvl_sio_backend(const char *name, struct sio_dev *dev, bool shared, bool one_path,
                    const struct nvme_backend_ops **ops, void **ctx);
/* The device's SmartIO id, and whether (and where) a manager serves it. -ENODEV: no such
 * device, or not an NVMe (the message says which). */
int nvl_sio_lookup(const char *name, uint32_t *id, bool *managed, uint32_t *mgr_node,
                   uint32_t *mgr_pid);
struct sio_dev *nvl_sio_dev(void *ctx);

/* The driver model: a function the caller's driver bound (dev), or through the library's own
 * driver the NVMe function bdf ("0000:80:00.0", "80:00.0"; "": the first) of this host's
 * tree. name gets the function's name. */
int nvl_pci_backend(const char *bdf, struct pci_dev *dev, const struct nvme_backend_ops **ops,
                    void **ctx, char *name, size_t name_len);
/* The handle opened on ctx, and whom to tell when the library's driver sees it removed. */
void nvl_pci_opened(void *ctx, nvme_dev_t *d, nvme_remove_cb_t cb, void *arg);
struct pci_dev *nvl_pci_dev(void *ctx);

/* ---- the queue-pair core (qpair.c) ---- */

enum { NVL_FREE, NVL_BUSY, NVL_LOST };

struct nvl_slot {
    uint16_t cid;     /* identifier of the command in it now */
    uint8_t state;
    uint32_t next;    /* free list */
    nvme_cb_t cb;
    void *arg;
    uint64_t t_submit;
    volatile uint64_t *prp; /* PRP list / DSM range page of this slot */
    uint64_t prp_io;
    /* What a failover needs to issue the command again on the other path (failover.c). */
    struct nvme_sqe sqe;
    uint64_t data_io;
    uint32_t data_len;
    bool moved;             /* issued again once already */
};

struct nvl_queue_params {
    const struct nvme_backend_ops *ops;
    void *ctx;
    uint16_t qid;
    uint32_t depth;
    uint32_t dstrd;
    uint32_t page;
    struct nvl_dma sq, cq;   /* depth * 64 and depth * 16 bytes, page aligned, zeroed */
    struct nvl_dma prp;      /* (depth - 1) * prp_bytes for the slots' PRP lists */
    uint32_t prp_bytes;      /* per slot: a power of two, 64..page */
    uint32_t irq;            /* host vector, 0: poll */
    uint64_t timeout_ns, spin_ns;
    /* Multipath (failover.c), NULL without: called at the end of every reap (why 0), and on
     * a fault before what is outstanding fails: why -ENOLINK (registers read all ones) or
     * -ETIMEDOUT (a command timed out). Completions it delivered (>= 0), or < 0: it could not
     * help (fail as without it). It may swap the queue's contents for the other path's. */
    int (*watch)(void *owner, int why, uint64_t now);
    void *owner;
};

struct nvl_queue {
    struct nvl_queue_params p;
    volatile struct nvme_sqe *sq;
    volatile struct nvme_cqe *cq;
    uint32_t sq_db, cq_db;    /* doorbell register offsets */
    uint32_t sq_tail, sq_head, cq_head;
    uint8_t phase;
    uint32_t unrung;          /* entries written, doorbell not rung yet */
    struct nvl_slot *slots;
    uint32_t nslots, slot_bits;
    uint32_t free_head, free_tail, nfree; /* FIFO: a freed identifier is reused last */
    uint32_t busy;            /* slots waiting for a completion the caller will see */
    uint32_t irq_seen;
    uint64_t next_expire;     /* when to look for timed-out commands */
    uint64_t next_health;     /* when a waiter next checks the controller (CSTS) */
    struct wpol_site wait;    /* how waits for this queue's completions went (the wait policy) */
    struct nvme_qpair_stats st;
};

int nvl_q_init(struct nvl_queue *q, const struct nvl_queue_params *p);
void nvl_q_fini(struct nvl_queue *q);
/* A free slot (index), or -EAGAIN when the queue is full. */
int nvl_q_get(struct nvl_queue *q);
/* Fill PRP1/PRP2 of sqe for len bytes at device address io, using slot's list. */
void nvl_q_prp(struct nvl_queue *q, int slot, struct nvme_sqe *sqe, uint64_t io, size_t len);
/* Write sqe (its CID set here) into the SQ for slot; ring unless defer. */
void nvl_q_post(struct nvl_queue *q, int slot, struct nvme_sqe *sqe, nvme_cb_t cb, void *arg,
                bool defer);
void nvl_q_ring(struct nvl_queue *q);
/* Completions handled (callbacks run), at most max (0: all); fails expired commands. */
int nvl_q_reap(struct nvl_queue *q, unsigned max);
/* Wait until *done or timeout_ns (then -ETIMEDOUT), by the wait policy (src/wait): spin up
 * to spin_ns, yield, then sleep in the queue's interrupt, or nap when it has none. */
int nvl_q_wait(struct nvl_queue *q, const bool *done, uint64_t timeout_ns);
/* Synchronous commands: nvl_sync_cb as the callback with a struct nvl_sync as its arg. */
struct nvl_sync {
    bool done;
    struct nvme_cpl cpl;
};
void nvl_sync_cb(void *arg, const struct nvme_cpl *cpl);
/* A free slot, waiting (bounded by the command timeout) while the queue is full. */
int nvl_q_get_wait(struct nvl_queue *q);
/* Wait for the command in slot to end; its rc. */
int nvl_q_finish(struct nvl_queue *q, int slot, struct nvl_sync *w);
/* Submit-and-wait: command in sqe with data (io, len); result in *cpl. */
int nvl_q_sync(struct nvl_queue *q, struct nvme_sqe *sqe, uint64_t io, size_t len,
               struct nvme_cpl *cpl);
/* Cancel what is still outstanding (-ECANCELED to the callbacks). */
void nvl_q_cancel_all(struct nvl_queue *q);
/* Fail every command still waiting with rc; its identifier stays reserved. How many. */
int nvl_q_fail_busy(struct nvl_queue *q, int rc);
/* Status field of a completion entry to struct nvme_cpl. */
void nvl_status(uint16_t status_field, uint32_t dw0, struct nvme_cpl *cpl);
int nvl_status_errno(uint16_t status);
uint64_t nvl_now_ns(void);

/* ---- memory (iomem.c) ---- */

struct nvme_mem {
    nvme_dev_t *dev;
    struct nvl_dma dma;
    bool owned;           /* the library allocated it (freed with dma_free) */
    bool listed;          /* on the device's list: buffers may be in it */
    bool internal;        /* the library's own (not freed by nvme_mem_free) */
    uint32_t npages;
    uint32_t *run;        /* run[i]: pages of the allocation that starts at page i */
    uint32_t users;       /* allocations in it */
    struct nvme_mem *next;
};

nvme_mem_t *nvl_mem_new(nvme_dev_t *d, const struct nvl_dma *dma, bool owned, bool listed);
void nvl_mem_destroy(nvme_mem_t *m);
/* Page-aligned zeroed bytes from m; 0 or -ENOMEM. (Caller holds d->lock.) */
int nvl_mem_take(nvme_mem_t *m, size_t size, struct nvl_dma *out);
void nvl_mem_put(nvme_mem_t *m, const struct nvl_dma *part);
/* Device address of [p, p + len) in one of d's listed memories: 0, or -EFAULT. */
int nvl_mem_find(nvme_dev_t *d, const void *p, size_t len, uint64_t *io);
/* Bytes for the queues of a pair / the admin queue and where they go. */
int nvl_mem_get(nvme_dev_t *d, nvme_mem_t *from, enum nvme_place where, size_t size,
                struct nvl_dma *out, nvme_mem_t **pool);
void nvl_mem_release(nvme_dev_t *d, nvme_mem_t *pool, struct nvl_dma *part);
/* The device address over path `to` of what is at device address io over path `from`, in a
 * memory mapped over both (multipath): 0, or -EFAULT. */
int nvl_mem_xlate(nvme_dev_t *d, uint64_t io, int from, int to, uint64_t *out);

/* ---- handles ---- */

struct nvl_ns {
    uint32_t nsid;
    uint32_t lba_shift;
    uint64_t blocks;
};

struct nvme_dev {
    const struct nvme_backend_ops *ops;
    void *ctx;
    char name[32];
    pthread_mutex_t lock;       /* admin queue, queue ids, memory allocation */
    pthread_rwlock_t mem_lock;  /* the list of memories (read on every I/O) */
    nvme_mem_t *mems;
    nvme_mem_t *user_mem;       /* nvme_open_opts.mem */
    nvme_mem_t *admin_pool;     /* where the admin queues' memory came from (NULL: backend) */
    struct nvl_dma admin_mem;
    struct nvl_queue admin;
    bool admin_live;
    struct nvl_dma id;          /* 4 KiB for Identify */
    unsigned timeout_ms, spin_us;
    uint64_t cap;
    uint32_t dstrd, page, to_ms;
    struct nvme_ctrl_info info;
    uint16_t oncs;
    uint32_t prp_bytes;
    struct nvl_ns *ns;
    uint32_t nns;
    uint8_t *qid_used;          /* [max_qpairs + 1] */
    struct nvme_qpair *qps;     /* live queue pairs */
    struct nvl_client *client;  /* a client of the device's manager (client.c), else NULL */
    bool multipath;             /* two paths: queue pairs fail over (failover.c) */
};

struct nvme_qpair {
    nvme_dev_t *dev;
    struct nvl_queue q;
    struct nvl_dma sqm, cqm;    /* SQ + PRP lists, CQ */
    nvme_mem_t *sq_pool, *cq_pool;
    struct nvl_mp *mp;          /* the queue pair on the other path (failover.c), or NULL */
    struct nvme_qpair *next;
};

const struct nvl_ns *nvl_ns_find(const nvme_dev_t *d, uint32_t nsid);
int nvl_apply_regs(nvme_dev_t *d, uint64_t cap, uint32_t vs);
void nvl_apply_id_ctrl(nvme_dev_t *d, const uint8_t *id);

/* ---- multipath failover of I/O queue pairs (failover.c) ---- */
/* Queue pair qp (created over path 0, q set up) gets its twin on path 1: sqb SQ and prpb
 * PRP-list bytes, cqb CQ bytes, placed as o says. Caller does not hold d->lock. */
int nvl_mp_qpair_init(nvme_qpair_t *qp, const struct nvme_qpair_opts *o, size_t sqb,
                      size_t prpb, size_t cqb);
/* *io (a buffer's device address over path 0) over the path qp submits on now: 0, or
 * -EFAULT (memory mapped over one path only: nvme_mem_wrap). */
int nvl_mp_io(const nvme_qpair_t *qp, uint64_t *io);
/* Before a submission: 0, or -EIO when no path to the device is up (message set). */
int nvl_mp_ready(nvme_qpair_t *qp);
/* Delete the twin on the device and free it (qp itself is the caller's). */
int nvl_mp_qpair_fini(nvme_qpair_t *qp);
/* Commands outstanding on the twin; the twin's counters and the failover counters added. */
uint32_t nvl_mp_busy(const nvme_qpair_t *qp);
/* Wait for completions on the twin (nvl_q_wait's return). */
int nvl_mp_wait(nvme_qpair_t *qp, uint64_t timeout_ns);
void nvl_mp_stats(const nvme_qpair_t *qp, struct nvme_qpair_stats *out);
/* Create / delete an I/O queue pair on the device (manager or admin queue). Caller does not
 * hold d->lock. */
int nvl_hw_create(nvme_dev_t *d, uint64_t sq, uint64_t cq, uint32_t depth, uint32_t irq,
                  uint16_t *qid);
int nvl_hw_delete(nvme_dev_t *d, uint16_t qid);

/* ---- a client of the device's manager (client.c) ---- */
int nvl_client_open(nvme_dev_t *d, uint32_t dev_id, uint32_t mgr_node);
/* Ask the manager to create an I/O queue pair at these device-side addresses: *qid. */
int nvl_client_create(nvme_dev_t *d, uint64_t sq, uint64_t cq, uint32_t depth, bool irq,
                      uint16_t *qid);
int nvl_client_delete(nvme_dev_t *d, uint16_t qid);
/* An admin command run by the manager; its data (up to NVL_MGR_DATA bytes) copied to buf. */
int nvl_client_admin(nvme_dev_t *d, const struct nvme_sqe *sqe, void *buf, size_t len,
                     struct nvme_cpl *cpl);
void nvl_client_close(nvme_dev_t *d);
/* Admin command under d->lock; data at (io, len). */
int nvl_admin(nvme_dev_t *d, struct nvme_sqe *sqe, uint64_t io, size_t len,
              struct nvme_cpl *cpl);

/* ---- errors (err.c) ---- */
/* Record this thread's message for nvme_errmsg() and return rc. */
int nvl_fail(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
