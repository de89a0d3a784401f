/*
 * The queue-pair core: one submission queue and the completion queue it posts to, in memory
 * the caller hands over (CPU pointer + device address) with doorbells and interrupts reached
 * through the backend ops. Owns the ring indices and phase tag, command identifiers (a FIFO
 * free list, with a generation in the high bits, so a completion for a command that is not
 * outstanding is recognised and dropped), PRP and PRP-list building, completion status
 * decoding, command timeouts, and waiting for completions (the wait policy of src/wait: spin,
 * yield, then the queue's interrupt or a nap).
 *
 * Memory shared with the device: SQ entries and PRP lists are plain stores published by a
 * release fence before the doorbell write; a CQ entry is read by an acquire load of the dword
 * holding the phase tag first, then the rest. NVMe structures are little endian, as the host.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nvme_int.h"

uint64_t nvl_now_ns(void) { return wpol_now_ns(); }

static uint32_t db_off(uint16_t qid, bool cq, uint32_t dstrd)
{
    return NVME_REG_DBS + (2u * qid + (cq ? 1u : 0u)) * (4u << dstrd);
}

int nvl_q_init(struct nvl_queue *q, const struct nvl_queue_params *p)
{
    memset(q, 0, sizeof *q);
    if (p->depth < 2 || p->depth > 65536 || !p->sq.cpu || !p->cq.cpu || !p->prp.cpu ||
        p->prp_bytes < 64 || (p->prp_bytes & (p->prp_bytes - 1)) ||
        p->prp.size < (size_t)(p->depth - 1) * p->prp_bytes)
        return -EINVAL;
    q->p = *p;
    q->sq = (volatile struct nvme_sqe *)p->sq.cpu;
    q->cq = (volatile struct nvme_cqe *)p->cq.cpu;
    q->sq_db = db_off(p->qid, false, p->dstrd);
    q->cq_db = db_off(p->qid, true, p->dstrd);
    q->phase = 1;
    q->nslots = p->depth - 1; /* a full SQ has one entry empty */
    /* Completions come within the spin (spin_us) at QD 1; without an interrupt to sleep in, a
     * waiter yields for up to 2 ms (the device model may need this CPU) before it naps. Yields
     * that run nobody go on for WPOL_PEER_YIELDS (60-100 us), not the policy's 8 (~2 us): the
     * device model runs on another CPU and its completion comes soon, where a sleep costs a
     * wake-up here and, since the next command is late, one of the model's as well, tens of us
     * each. At QD 1 with 8, 2-3 % of the waits slept (p99 27 us instead of 2, a third of the
     * IOPS gone); with 64 (~15 us), 0.3 % still did, after the hiccups of a shared VM, and
     * cost 10-20 %. */
    q->wait = (struct wpol_site)WPOL_SITE("nvme completion",
                                          p->spin_ns < UINT32_MAX ? (uint32_t)p->spin_ns : UINT32_MAX,
                                          p->irq && p->ops->irq_wait ? 0 : 2000000);
    q->wait.fast_yields = WPOL_PEER_YIELDS;
    while ((1u << q->slot_bits) < q->nslots)
        q->slot_bits++;
    q->slots = calloc(q->nslots, sizeof *q->slots);
    if (!q->slots)
        return -ENOMEM;
    for (uint32_t i = 0; i < q->nslots; i++) {
        struct nvl_slot *s = &q->slots[i];
        s->cid = (uint16_t)i;
        s->state = NVL_FREE;
        s->next = i + 1;
        s->prp = (volatile uint64_t *)(p->prp.cpu + (size_t)i * p->prp_bytes);
        s->prp_io = p->prp.io + (uint64_t)i * p->prp_bytes;
    }
    q->free_head = 0;
    q->free_tail = q->nslots - 1;
    q->nfree = q->nslots;
    q->next_expire = UINT64_MAX;
    if (p->irq && p->ops->irq_wait)
        p->ops->irq_wait(p->ctx, p->irq, &q->irq_seen, 0); /* take the current count */
    return 0;
}

void nvl_q_fini(struct nvl_queue *q)
{
    wpol_site_done(&q->wait);
    free(q->slots);
    q->slots = NULL;
}

int nvl_q_get(struct nvl_queue *q)
{
    if (!q->nfree || (q->sq_tail + 1) % q->p.depth == q->sq_head)
        return -EAGAIN;
    uint32_t i = q->free_head;
    q->free_head = q->slots[i].next;
    q->nfree--;
    q->slots[i].data_len = 0;
    q->slots[i].moved = false;
    return (int)i;
}

/* Back on the free list's tail with the next generation of its identifier. */
static void slot_free(struct nvl_queue *q, uint32_t i)
{
    struct nvl_slot *s = &q->slots[i];
    uint32_t gen = ((uint32_t)s->cid >> q->slot_bits) + 1;
    uint32_t cid = (i | gen << q->slot_bits) & 0xffffu;
    if (cid == NVL_CID_NONE || (cid & ((1u << q->slot_bits) - 1)) != i)
        cid = i; /* wrapped: generation 0 */
    s->cid = (uint16_t)cid;
    s->state = NVL_FREE;
    s->cb = NULL;
    s->next = UINT32_MAX;
    if (q->nfree)
        q->slots[q->free_tail].next = i;
    else
        q->free_head = i;
    q->free_tail = i;
    q->nfree++;
}

void nvl_q_prp(struct nvl_queue *q, int slot, struct nvme_sqe *sqe, uint64_t io, size_t len)
{
    uint64_t page = q->p.page;
    q->slots[slot].data_io = io;
    q->slots[slot].data_len = (uint32_t)len;
    sqe->prp1 = io;
    sqe->prp2 = 0;
    uint64_t first = page - (io & (page - 1));
    if (len <= first)
        return;
    uint64_t rest = len - first, next = io + first;
    if (rest <= page) {
        sqe->prp2 = next;
        return;
    }
    /* A list of the pages after the first; the caller kept len within one list (max_xfer). */
    struct nvl_slot *s = &q->slots[slot];
    uint32_t n = 0;
    for (uint64_t a = next; a < io + len; a += page)
        s->prp[n++] = a;
    sqe->prp2 = s->prp_io;
}

void nvl_q_ring(struct nvl_queue *q)
{
    if (!q->unrung)
        return;
    /* The entries (and PRP lists) are visible before the device learns of them. */
    atomic_thread_fence(memory_order_release);
    q->p.ops->write32(q->p.ctx, q->sq_db, q->sq_tail);
    q->unrung = 0;
}

void nvl_q_post(struct nvl_queue *q, int slot, struct nvme_sqe *sqe, nvme_cb_t cb, void *arg,
                bool defer)
{
    struct nvl_slot *s = &q->slots[slot];
    sqe->cid = s->cid;
    if (q->p.watch)
        s->sqe = *sqe; /* to issue it again on the other path */
    uint64_t w[8];
    memcpy(w, sqe, sizeof w);
    volatile uint64_t *dst = (volatile uint64_t *)(q->sq + q->sq_tail);
    for (int i = 0; i < 8; i++)
        dst[i] = w[i];
    q->sq_tail = (q->sq_tail + 1) % q->p.depth;
    s->state = NVL_BUSY;
    s->cb = cb;
    s->arg = arg;
    s->t_submit = nvl_now_ns();
    if (!q->busy)
        q->next_expire = s->t_submit + q->p.timeout_ns;
    q->busy++;
    q->st.submitted++;
    q->unrung++;
    if (!defer)
        nvl_q_ring(q);
}

/* Fail commands past their timeout: the slot stays taken (LOST) until the device answers,
 * since the device may still read its PRP list and move its data. */
static int expire(struct nvl_queue *q, uint64_t now)
{
    /* With a second path, what is outstanding moves there instead (failover.c). */
    if (q->p.watch) {
        int w = q->p.watch(q->p.owner, -ETIMEDOUT, now);
        if (w >= 0)
            return w;
    }
    int n = 0;
    uint64_t oldest = UINT64_MAX;
    for (uint32_t i = 0; i < q->nslots && q->busy; i++) {
        struct nvl_slot *s = &q->slots[i];
        if (s->state != NVL_BUSY)
            continue;
        if (now - s->t_submit < q->p.timeout_ns) {
            if (s->t_submit < oldest)
                oldest = s->t_submit;
            continue;
        }
        s->state = NVL_LOST;
        q->busy--;
        q->st.timeouts++;
        q->st.completed++;
        n++;
        if (s->cb) {
            struct nvme_cpl cpl = { .rc = -ETIMEDOUT };
            s->cb(s->arg, &cpl);
        }
    }
    q->next_expire = oldest == UINT64_MAX ? UINT64_MAX : oldest + q->p.timeout_ns;
    if (q->busy && oldest == UINT64_MAX) /* callbacks above submitted again */
        q->next_expire = now + q->p.timeout_ns;
    return n;
}

int nvl_q_reap(struct nvl_queue *q, unsigned max)
{
    nvl_q_ring(q);
    int n = 0;
    uint32_t consumed = 0;
    volatile uint32_t *cq = (volatile uint32_t *)q->cq;
    while (!max || (unsigned)n < max) {
        volatile uint32_t *e = cq + 4u * q->cq_head;
        /* DW3: CID 15:0, status 31:17, phase 16 — the dword the device writes last. */
        uint32_t dw3 = __atomic_load_n(&e[3], __ATOMIC_ACQUIRE);
        if (((dw3 >> 16) & 1u) != q->phase)
            break;
        uint32_t dw0 = e[0], dw2 = e[2];
        if (++q->cq_head == q->p.depth) {
            q->cq_head = 0;
            q->phase ^= 1;
        }
        consumed++;
        uint16_t cid = (uint16_t)dw3, sqid = (uint16_t)(dw2 >> 16), sqhd = (uint16_t)dw2;
        uint32_t i = cid & ((1u << q->slot_bits) - 1);
        struct nvl_slot *s = i < q->nslots ? &q->slots[i] : NULL;
        if (sqid != q->p.qid || !s || s->state == NVL_FREE || s->cid != cid) {
            q->st.stale++; /* a duplicate, or not ours: nothing waits for it */
            continue;
        }
        if (sqhd < q->p.depth)
            q->sq_head = sqhd;
        if (s->state == NVL_LOST) {
            q->st.late++;
            slot_free(q, i);
            continue;
        }
        struct nvme_cpl cpl;
        nvl_status((uint16_t)(dw3 >> 16), dw0, &cpl);
        nvme_cb_t cb = s->cb;
        void *arg = s->arg;
        q->busy--;
        slot_free(q, i); /* before the callback: it may submit again */
        q->st.completed++;
        n++;
        if (cb)
            cb(arg, &cpl);
    }
    if (consumed) {
        /* The device waits for room in this CQ only while it holds more completions than the
         * CQ has room for: more than depth - 1 entries not yet released or not yet posted,
         * which only callbacks that submitted during this batch can bring about (consumed +
         * busy >= depth). Short of that the head goes in without waking the device's model
         * (write32_lazy): a QD 1 driver woke it after every completion, and on a CPU the two
         * shared the model then held the CPU the driver needed for tens of microseconds. */
        if (q->p.ops->write32_lazy && consumed + q->busy < q->p.depth)
            q->p.ops->write32_lazy(q->p.ctx, q->cq_db, q->cq_head);
        else
            q->p.ops->write32(q->p.ctx, q->cq_db, q->cq_head);
    } else
        q->st.empty_polls++;
    if (q->p.watch) {
        /* Multipath: the path's state, the other path's queue (it may swap q's contents). */
        uint64_t now = nvl_now_ns();
        int w = q->p.watch(q->p.owner, 0, now);
        n += w > 0 ? w : 0;
        if (q->busy && now >= q->next_expire)
            n += expire(q, now);
    } else if (q->busy && q->next_expire != UINT64_MAX && (!max || (unsigned)n < max)) {
        uint64_t now = nvl_now_ns();
        if (now >= q->next_expire)
            n += expire(q, now);
    }
    return n;
}

/* Its identifier stays reserved: the device may still answer, and that late completion is
 * dropped. */
int nvl_q_fail_busy(struct nvl_queue *q, int rc)
{
    int n = 0;
    for (uint32_t i = 0; i < q->nslots && q->busy; i++) {
        struct nvl_slot *s = &q->slots[i];
        if (s->state != NVL_BUSY)
            continue;
        s->state = NVL_LOST;
        q->busy--;
        q->st.completed++;
        n++;
        if (s->cb) {
            struct nvme_cpl cpl = { .rc = rc };
            s->cb(s->arg, &cpl);
        }
    }
    return n;
}

/*
 * A waiter that has slept a while asks the controller whether it is still there: registers
 * that read all ones (the path to it is down, its host gone) or a fatal or disabled
 * controller (its manager shut it down) will never complete what is outstanding, so that
 * fails now with -EIO instead of at the command timeout. One register read per HEALTH_NS.
 */
#define HEALTH_NS 20000000ull
static int health(struct nvl_queue *q, uint64_t now)
{
    if (now < q->next_health)
        return 0;
    q->next_health = now + HEALTH_NS;
    uint32_t csts = q->p.ops->read32(q->p.ctx, NVME_REG_CSTS);
    if (csts != UINT32_MAX && !(csts & NVME_CSTS_CFS) && (csts & NVME_CSTS_RDY))
        return 0;
    if (csts == UINT32_MAX && q->p.watch) {
        int w = q->p.watch(q->p.owner, -ENOLINK, now); /* the other path, if it works */
        if (w >= 0)
            return 0; /* moved: the wait goes on, on the other path's queue */
    }
    int n = nvl_q_fail_busy(q, -EIO);
    return n ? n : -EIO;
}

static int q_health(void *arg)
{
    struct nvl_queue *q = arg;
    return health(q, nvl_now_ns());
}

/* Bounded, so that a timeout and the controller's health are still seen; returns at once if an
 * interrupt came since the last one taken. */
static int q_irq_sleep(void *arg, uint64_t max_ns)
{
    struct nvl_queue *q = arg;
    q->p.ops->irq_wait(q->p.ctx, q->p.irq, &q->irq_seen, (int)(max_ns / 1000000u) + 1);
    return 0;
}

/* The device's model thread last ran on this CPU: spinning here would hold it up. */
static bool q_needs_cpu(void *arg)
{
    struct nvl_queue *q = arg;
    int cpu = q->p.ops->device_cpu(q->p.ctx);
    return cpu >= 0 && cpu == sched_getcpu();
}

/* While this thread sleeps the model must not give its CPU up for it. */
static void q_asleep(void *arg, bool asleep)
{
    struct nvl_queue *q = arg;
    q->p.ops->driver_asleep(q->p.ctx, asleep);
}

int nvl_q_wait(struct nvl_queue *q, const bool *done, uint64_t timeout_ns)
{
    uint64_t start = nvl_now_ns();
    q->next_health = start + 2 * HEALTH_NS;
    bool irq = q->p.irq && q->p.ops->irq_wait;
    /* Without an interrupt, naps (from a quarter of what such waits lately took, up to 1 ms):
     * the completion comes when the device gets the CPU, which with many clients on few CPUs
     * is what the naps give it. A cap of 100 us kept 30 clients on 2 CPUs waking 300 000 times
     * a second, and the device model starved (docs/benchmarks.md, *The wait policy*). */
    struct wpol_how how = { .arg = q, .sleep = irq ? q_irq_sleep : NULL, .idle = q_health,
                            .needs_cpu = q->p.ops->device_cpu ? q_needs_cpu : NULL,
                            .asleep = q->p.ops->driver_asleep ? q_asleep : NULL,
                            .deadline_ns = start + timeout_ns, .sleep_ns = irq ? 10000000 : 1000000,
                            /* Several completions coming: fewer looks at the CQ's line, which
                             * the device writes an entry at a time (a look at every pause,
                             * some 19 per I/O at QD 32, cost the model's writes ~2 % of
                             * local QD 32 IOPS; one in 16, 4 per I/O). At QD 1 each look
                             * counts. */
                            .look_pauses = q->busy > 1 ? 16 : 1 };
    struct wpol w;
    wpol_begin(&w, &q->wait, &how);
    int n;
    for (;;) {
        n = nvl_q_reap(q, 0);
        if (done ? *done : n > 0)
            break;
        if (!done && !q->busy) {
            n = 0;
            break;
        }
        int rc = wpol_pause(&w, 0);
        if (rc) {
            n = rc;
            break;
        }
    }
    wpol_end(&w);
    return n;
}

void nvl_sync_cb(void *arg, const struct nvme_cpl *cpl)
{
    struct nvl_sync *w = arg;
    w->cpl = *cpl;
    w->done = true;
}

int nvl_q_get_wait(struct nvl_queue *q)
{
    int slot;
    uint64_t start = nvl_now_ns();
    while ((slot = nvl_q_get(q)) < 0) {
        /* Full of asynchronous commands: let some complete. */
        if (nvl_now_ns() - start > q->p.timeout_ns)
            return -ETIMEDOUT;
        int rc = nvl_q_wait(q, NULL, q->p.timeout_ns);
        if (rc < 0 && rc != -ETIMEDOUT)
            return rc;
    }
    return slot;
}

int nvl_q_finish(struct nvl_queue *q, int slot, struct nvl_sync *w)
{
    /* The command's own timeout ends it (expire); the bound here is a backstop. */
    int rc = nvl_q_wait(q, &w->done, 2 * q->p.timeout_ns + 1000000000ull);
    if (rc < 0 && !w->done) {
        struct nvl_slot *s = &q->slots[slot];
        if (s->state == NVL_BUSY && s->arg == w) {
            s->state = NVL_LOST;
            q->busy--;
            q->st.timeouts++;
        }
        w->cpl = (struct nvme_cpl){ .rc = -ETIMEDOUT };
    }
    return w->cpl.rc;
}

int nvl_q_sync(struct nvl_queue *q, struct nvme_sqe *sqe, uint64_t io, size_t len,
               struct nvme_cpl *cpl)
{
    struct nvl_sync w = { 0 };
    int slot = nvl_q_get_wait(q);
    if (slot < 0) {
        if (cpl)
            *cpl = (struct nvme_cpl){ .rc = slot };
        return slot;
    }
    if (len)
        nvl_q_prp(q, slot, sqe, io, len);
    nvl_q_post(q, slot, sqe, nvl_sync_cb, &w, false);
    int rc = nvl_q_finish(q, slot, &w);
    if (cpl)
        *cpl = w.cpl;
    return rc;
}

void nvl_q_cancel_all(struct nvl_queue *q)
{
    for (uint32_t i = 0; i < q->nslots; i++) {
        struct nvl_slot *s = &q->slots[i];
        if (s->state == NVL_FREE)
            continue;
        nvme_cb_t cb = s->state == NVL_BUSY ? s->cb : NULL;
        void *arg = s->arg;
        if (s->state == NVL_BUSY) {
            q->busy--;
            q->st.completed++;
        }
        slot_free(q, i);
        if (cb) {
            struct nvme_cpl cpl = { .rc = -ECANCELED };
            cb(arg, &cpl);
        }
    }
}

int nvl_status_errno(uint16_t st)
{
    switch (st) {
    case NVME_SUCCESS: return 0;
    case NVME_INVALID_OPCODE: return -EOPNOTSUPP;
    case NVME_INVALID_FIELD: case NVME_INVALID_PRP_OFFSET: case NVME_CQ_INVALID:
    case NVME_INVALID_QID: case NVME_INVALID_QSIZE: case NVME_INVALID_VECTOR:
    case NVME_INVALID_LOG_PAGE: case NVME_FEAT_NOT_SAVEABLE:
        return -EINVAL;
    case NVME_CID_CONFLICT: case NVME_CMD_SEQ_ERROR: return -EPROTO;
    case NVME_ABORT_REQUESTED: case NVME_ABORT_SQ_DELETION: return -ECANCELED;
    case NVME_INVALID_NAMESPACE: return -ENXIO;
    case NVME_LBA_RANGE: return -ERANGE;
    case NVME_AERL_EXCEEDED: case NVME_INVALID_QUEUE_DELETION: return -EBUSY;
    default: return -EIO; /* transfer, internal, media errors and what this library lacks */
    }
}

void nvl_status(uint16_t field, uint32_t dw0, struct nvme_cpl *cpl)
{
    cpl->status = (uint16_t)((field >> 1) & 0x7ffu);
    cpl->dnr = (field & NVME_DNR) != 0;
    cpl->dw0 = dw0;
    cpl->rc = nvl_status_errno(cpl->status);
}
