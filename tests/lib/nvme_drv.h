/*
 * A small NVMe driver for tests: acts as the driver on the device's host, using the fabric
 * model directly (BAR0 through fab_bar_mem + fab_fn_notify after each register write, queues
 * and data in the host's RAM through fab_ram at physical addresses the agent does not hand
 * out). Controller reset/enable, admin and I/O queues, submission, completion polling by phase
 * bit, PRP list building; and what the NVMe model's tests (test_nvme_admin, test_nvme_io) share:
 * their fixture's set-up, an I/O queue pair, Get/Set Features, a data pattern.
 */
#ifndef NTBLEND_TEST_NVME_DRV_H
#define NTBLEND_TEST_NVME_DRV_H

#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fabric.h"
#include "fixture.h"
#include "ntblend/nvme_spec.h"

#define NVD_MEM_BASE (300ull << 20) /* host physical memory the tests own: 300..500 MiB */
#define NVD_MEM_SIZE (200ull << 20)
#define NVD_PAGE 4096u
#define NVD_QMAX 40
#define NVD_STASH 64

struct nvd_queue {
    bool live;
    uint64_t sq, cq;  /* physical addresses */
    uint32_t sq_size, cq_size;
    uint32_t sq_tail, cq_head;
    uint8_t phase;
};

struct nvd {
    struct fab *f;
    uint32_t fn, host;
    volatile uint8_t *regs;
    char *mem;
    uint64_t brk;
    uint16_t next_cid;
    struct nvd_queue q[NVD_QMAX];
    struct { uint16_t qid; struct nvme_cqe cqe; } stash[NVD_STASH];
    uint32_t nstash;
};

uint32_t nvd_r32(struct nvd *d, uint32_t off);

uint64_t nvd_r64(struct nvd *d, uint32_t off);

void nvd_w32(struct nvd *d, uint32_t off, uint32_t v);

void nvd_w64(struct nvd *d, uint32_t off, uint64_t v);

void *nvd_ptr(struct nvd *d, uint64_t phys);

/* Bump allocator over the test's memory; zeroed. */
uint64_t nvd_alloc(struct nvd *d, uint64_t size, uint64_t align);

uint64_t nvd_ms(void);

void nvd_pause(uint32_t spins);

int nvd_open(struct nvd *d, struct fab *f, const char *name);

/* Wait until (CSTS & mask) == want; 0 or -ETIMEDOUT. */
int nvd_wait_csts(struct nvd *d, uint32_t mask, uint32_t want, uint32_t ms);

int nvd_disable(struct nvd *d);

/* Program the admin queues (entries each) and enable; 0, -EIO (CFS) or -ETIMEDOUT. The memory
 * is reset first so every enable starts from fresh queues. */
int nvd_enable_at(struct nvd *d, uint32_t entries, uint64_t asq, uint64_t acq);

int nvd_reset(struct nvd *d);

struct nvme_sqe nvd_sqe(uint8_t opc, uint32_t nsid);

/* Put a command in SQ qid; ring the doorbell unless ring is false. Returns its CID. */
uint16_t nvd_queue_cmd(struct nvd *d, uint16_t qid, struct nvme_sqe *s, bool ring);

void nvd_ring(struct nvd *d, uint16_t qid);

/* Next completion of CQ qid within ms; 0 or -ETIMEDOUT. */
int nvd_reap(struct nvd *d, uint16_t qid, struct nvme_cqe *out, uint32_t ms);

/* The completion of command cid on CQ qid (others are stashed). */
int nvd_wait_cid(struct nvd *d, uint16_t qid, uint16_t cid, struct nvme_cqe *out, uint32_t ms);

uint16_t nvd_status(const struct nvme_cqe *c);
bool nvd_dnr(const struct nvme_cqe *c);

/* Submit on SQ qid (completing on CQ cqid) and wait; status (SCT << 8 | SC) or -ETIMEDOUT. */
int nvd_cmd_on(struct nvd *d, uint16_t qid, uint16_t cqid, struct nvme_sqe *s,
               struct nvme_cqe *cqe);

int nvd_admin(struct nvd *d, struct nvme_sqe *s, struct nvme_cqe *cqe);

int nvd_io(struct nvd *d, uint16_t qid, struct nvme_sqe *s, struct nvme_cqe *cqe);

int nvd_create_cq(struct nvd *d, uint16_t qid, uint32_t entries, bool ien, uint16_t iv);

int nvd_create_sq(struct nvd *d, uint16_t qid, uint32_t entries, uint16_t cqid);

int nvd_delete(struct nvd *d, uint8_t opc, uint16_t qid);

/* Point s at len bytes of (physically contiguous) buffer buf, building a PRP list when more
 * than two pages are touched. */
void nvd_prp(struct nvd *d, struct nvme_sqe *s, uint64_t buf, uint64_t len);

struct nvme_sqe nvd_rw(uint8_t opc, uint32_t nsid, uint64_t slba, uint32_t nlb);

/* cmocka set-up of the NVMe model's tests: boot fx for `test` from topology file `topo` with
 * the NVMe models' images in a directory of the fixture's own and the fabric model attached,
 * then open function `dev` as d. fx_teardown undoes it. */
int nvd_fx_setup(void **state, struct fx *fx, const char *test, const char *topo, struct nvd *d,
                 const char *dev);

/* Create I/O queue pair 1 of `entries` entries (CQ 1 with interrupts on vector 1); 0 or the
 * status of the create that failed. */
int nvd_io_pair(struct nvd *d, uint32_t entries);

/* Get or Set Features (opc) with cdw10 and cdw11; the status, and the completion's DW0 in *dw0
 * (when not NULL). */
int nvd_features(struct nvd *d, uint8_t opc, uint32_t cdw10, uint32_t cdw11, uint32_t *dw0);

/* A pseudo-random pattern of len bytes (whole 32-bit words) from seed. */
void nvd_fill(void *p, size_t len, uint32_t seed);

#endif
