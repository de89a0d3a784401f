/*
 * Multipath failover of I/O queue pairs (smartio-tocs-2021 §6.3, Fig. 16). On a device with
 * two paths, every queue pair has a twin on the other path: its own SQ, CQ and PRP lists,
 * mapped for the device over that path only, and its own queue id. Data buffers are mapped
 * for the device over both paths (the backend's dma_alloc gives io and io_alt), and so is the
 * BAR (the backend's use_path picks the mapping registers go through).
 *
 * Owns: noticing a fault (the path going down, registers reading all ones, a command timing
 * out), moving what is outstanding to the twin and issuing it there again (the caller sees
 * one completion per command, never the fault), the return to path 0 once it has worked for
 * a while, re-creating a queue abandoned after a fault before it is used again (its SQ may
 * have stopped at a fetch that failed; identifiers were left reserved), failing I/O with -EIO
 * while no path is up and taking it up again when one is, and the failover log
 * (NTBLEND_NVME_FAILOVER_LOG) that scripts/bench-multipath.sh reads.
 *
 * qp->q is always the queue that submissions go to: a failover or a return swaps the contents
 * of qp->q and of the twin, so a waiter holding &qp->q goes on with the other path's queue.
 * A command issued twice (it may have run before the fault hid its completion) is safe when
 * it is idempotent: reads, and writes of the same data to the same blocks (docs/multipath.md).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nvme_int.h"

#define WATCH_NS 1000000ull      /* a queue pair in use looks at its path this often */
#define SETTLE_NS 20000000ull    /* path 0 works this long before the queue pair returns */
#define RETRY_NS 1000000000ull   /* after a re-creation that failed, try again this much later */
#define ROOM_NS 2000000000ull    /* the twin drains to make room for the moved commands */

struct nvl_mp {
    struct nvl_queue q;          /* the twin */
    struct nvl_dma sqm, cqm;     /* its memory: SQ and PRP lists, CQ */
    int path[2];                 /* [0]: qp->q's path, [1]: the twin's */
    bool dirty[2];               /* abandoned after a fault: re-create before use */
    uint64_t next_watch, up_since, next_try;
    uint64_t fault_rt, fault_done; /* the last failover (CLOCK_REALTIME), till its first completion */
    uint64_t failovers, returns, reissued;
    uint64_t seen[2];            /* completions of qp->q and of the twin at the last look */
    bool down;                   /* no path was up: I/O fails until one is */
    bool in_watch;               /* the twin's reap must not come back in */
    bool running;                /* its first completion has been logged */
};

static uint64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* One line per event, appended atomically, when NTBLEND_NVME_FAILOVER_LOG names a file. */
static void log_event(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void log_event(const char *fmt, ...)
{
    const char *path = getenv("NTBLEND_NVME_FAILOVER_LOG");
    if (!path || !*path)
        return;
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    if (write(fd, line, (size_t)(n < (int)sizeof line ? n : (int)sizeof line - 1)) < 0) {
        /* a log that cannot be written is not the I/O's failure */
    }
    close(fd);
}

static void swap_q(nvme_qpair_t *qp)
{
    struct nvl_mp *mp = qp->mp;
    /* Registers (doorbells, CSTS) through the BAR mapping of the path that works. */
    qp->dev->ops->use_path(qp->dev->ctx, mp->path[1]);
    struct nvl_queue q = qp->q;
    qp->q = mp->q;
    mp->q = q;
    struct nvl_dma m = qp->sqm;
    qp->sqm = mp->sqm;
    mp->sqm = m;
    m = qp->cqm;
    qp->cqm = mp->cqm;
    mp->cqm = m;
    int p = mp->path[0];
    mp->path[0] = mp->path[1];
    mp->path[1] = p;
    bool d = mp->dirty[0];
    mp->dirty[0] = mp->dirty[1];
    mp->dirty[1] = d;
}

/* The twin as new: deleted on the device, its memory zeroed, created again. */
static int rebuild_twin(nvme_qpair_t *qp)
{
    struct nvl_mp *mp = qp->mp;
    nvme_dev_t *d = qp->dev;
    struct nvl_queue_params p = mp->q.p;
    int rc = nvl_hw_delete(d, p.qid);
    if (rc && rc != -ENOENT && rc != -EINVAL)
        return rc;
    nvl_q_fini(&mp->q);
    memset((void *)mp->sqm.cpu, 0, mp->sqm.size);
    memset((void *)mp->cqm.cpu, 0, mp->cqm.size);
    uint16_t qid = d->client ? 0 : p.qid;
    if ((rc = nvl_hw_create(d, mp->sqm.io, mp->cqm.io, p.depth, p.irq, &qid)))
        goto lost;
    p.qid = qid;
    if (p.irq && d->ops->irq_enable && (rc = d->ops->irq_enable(d->ctx, qid, p.irq)))
        goto created;
    if ((rc = nvl_q_init(&mp->q, &p)))
        goto created;
    mp->dirty[1] = false;
    return 0;
created:
    nvl_hw_delete(d, qid);
lost:
    /* No twin now: a queue of no slots, re-created at the next attempt. */
    memset(&mp->q, 0, sizeof mp->q);
    mp->q.p = p;
    return rc;
}

/*
 * Every entry of the SQ being left becomes a Flush of no namespace (an error completion that
 * nobody waits for): an entry the device has not fetched yet must never run once the path is
 * back, since its buffer may by then hold other data (the command was issued again and has
 * completed, and the caller reused the buffer). The SQ is in this host (failover needs that),
 * so the CPU reaches it while the path is down, and the device does not: a command it fetched
 * before the cut moved its data then, or found the path down.
 */
static void neutralise(struct nvl_queue *q)
{
    struct nvme_sqe nop = { .opc = NVME_CMD_FLUSH, .nsid = 0, .cid = NVL_CID_NONE };
    uint64_t w[8];
    memcpy(w, &nop, sizeof w);
    for (uint32_t i = 0; i < q->p.depth; i++) {
        volatile uint64_t *dst = (volatile uint64_t *)(q->sq + i);
        for (int k = 0; k < 8; k++)
            dst[k] = w[k];
    }
    __atomic_thread_fence(__ATOMIC_RELEASE);
}

/* Issue what is outstanding on qp->q again on the twin, then make the twin qp->q. */
static int move_all(nvme_qpair_t *qp, uint64_t now, int why)
{
    struct nvl_mp *mp = qp->mp;
    nvme_dev_t *d = qp->dev;
    if (!d->ops->path_up(d->ctx, mp->path[1]))
        return -EHOSTUNREACH;
    if (mp->dirty[1] || !mp->q.slots) {
        if (now < mp->next_try || rebuild_twin(qp)) {
            mp->next_try = now + RETRY_NS;
            return -EIO;
        }
    }
    struct nvl_queue *from = &qp->q, *to = &mp->q;
    neutralise(from);
    /* The twin may still finish what it had when the queue pair last left it. */
    for (uint64_t end = now + ROOM_NS; to->nfree < from->busy && nvl_now_ns() < end;)
        nvl_q_reap(to, 0);
    if (to->nfree < from->busy)
        return -EAGAIN;
    uint32_t moved = 0;
    for (uint32_t i = 0; i < from->nslots && from->busy; i++) {
        struct nvl_slot *s = &from->slots[i];
        if (s->state != NVL_BUSY)
            continue;
        struct nvme_sqe sqe = s->sqe;
        uint64_t io = 0;
        int rc = s->data_len ? nvl_mem_xlate(d, s->data_io, mp->path[0], mp->path[1], &io) : 0;
        nvme_cb_t cb = s->cb;
        void *arg = s->arg;
        s->state = NVL_LOST; /* the identifier stays taken: that queue is re-created before reuse */
        from->busy--;
        if (rc) { /* data the library cannot find on the other path (nvme_submit_dma) */
            from->st.completed++;
            if (cb)
                cb(arg, &(struct nvme_cpl){ .rc = -EIO });
            continue;
        }
        int j = nvl_q_get(to);
        if (s->data_len) {
            nvl_q_prp(to, j, &sqe, io, s->data_len);
        } else if (sqe.opc == NVME_CMD_DSM) {
            to->slots[j].prp[0] = s->prp[0]; /* the range, in the slot's own page */
            to->slots[j].prp[1] = s->prp[1];
            sqe.prp1 = to->slots[j].prp_io;
        }
        nvl_q_post(to, j, &sqe, cb, arg, true);
        to->slots[j].moved = true;
        moved++;
    }
    nvl_q_ring(to);
    mp->dirty[0] = true;
    int from_path = mp->path[0];
    swap_q(qp);
    mp->failovers++;
    mp->reissued += moved;
    mp->down = false;
    mp->up_since = 0;
    mp->fault_rt = realtime_ns();
    mp->fault_done = qp->q.st.completed;
    log_event("failover %s path %d -> %d queue %u detected %" PRIu64 " reissued %u why %d "
              "outstanding %u\n", d->name, from_path, mp->path[0], qp->q.p.qid, mp->fault_rt,
              moved, -why, qp->q.busy);
    return 0;
}

/* Back to path 0 once it has worked for SETTLE_NS: new submissions go there, what is still
 * outstanding on the other path completes there (the twin is reaped until it is empty). */
static void maybe_return(nvme_qpair_t *qp, uint64_t now)
{
    struct nvl_mp *mp = qp->mp;
    nvme_dev_t *d = qp->dev;
    if (mp->path[0] == 0 || mp->q.busy)
        return;
    if (!d->ops->path_up(d->ctx, 0)) {
        mp->up_since = 0;
        return;
    }
    if (!mp->up_since)
        mp->up_since = now;
    if (now - mp->up_since < SETTLE_NS || now < mp->next_try)
        return;
    if ((mp->dirty[1] || !mp->q.slots) && rebuild_twin(qp)) {
        mp->next_try = now + RETRY_NS;
        return;
    }
    swap_q(qp);
    mp->returns++;
    log_event("return %s path %d -> %d queue %u at %" PRIu64 "\n", d->name, mp->path[1],
              mp->path[0], qp->q.p.qid, realtime_ns());
}

/*
 * Doorbells written again when a queue with commands out completed nothing since the last
 * look: one written through the path that had just gone down, before the failover, is lost,
 * and the device would never fetch what it announced. Writing the same tail or head again
 * tells the device nothing new otherwise.
 */
static void kick(struct nvl_queue *q, uint64_t *seen)
{
    if (q->busy && q->st.completed == *seen && !q->unrung) {
        q->p.ops->write32(q->p.ctx, q->sq_db, q->sq_tail);
        q->p.ops->write32(q->p.ctx, q->cq_db, q->cq_head);
    }
    *seen = q->st.completed;
}

/* Whether a command that timed out was issued again once already (then it fails). */
static bool moved_expired(const struct nvl_queue *q, uint64_t now)
{
    for (uint32_t i = 0; i < q->nslots; i++) {
        const struct nvl_slot *s = &q->slots[i];
        if (s->state == NVL_BUSY && s->moved && now - s->t_submit >= q->p.timeout_ns)
            return true;
    }
    return false;
}

static int watch(void *owner, int why, uint64_t now)
{
    nvme_qpair_t *qp = owner;
    struct nvl_mp *mp = qp->mp;
    if (mp->in_watch || mp->down)
        return why ? -1 : 0;
    mp->in_watch = true;
    nvme_dev_t *d = qp->dev;
    int n = 0;
    if (mp->q.busy) {
        int r = nvl_q_reap(&mp->q, 0); /* the twin finishes what it had */
        n += r > 0 ? r : 0;
    }
    if (!mp->running && qp->q.st.completed) {
        mp->running = true;
        log_event("running %s path %d queue %u at %" PRIu64 "\n", d->name, mp->path[0],
                  qp->q.p.qid, realtime_ns());
    }
    if (mp->fault_rt && qp->q.st.completed > mp->fault_done) {
        log_event("first-completion %s path %d queue %u at %" PRIu64 " after %" PRIu64
                  " ns\n", d->name, mp->path[0], qp->q.p.qid, realtime_ns(),
                  realtime_ns() - mp->fault_rt);
        mp->fault_rt = 0;
    }
    if (!why && now < mp->next_watch)
        goto out;
    mp->next_watch = now + WATCH_NS;
    kick(&qp->q, &mp->seen[0]);
    kick(&mp->q, &mp->seen[1]);
    bool up = d->ops->path_up(d->ctx, mp->path[0]);
    if (!why && up) {
        maybe_return(qp, now);
        goto out;
    }
    if (why == -ENOLINK && up) {
        n = -1; /* all ones over a path that works: the device is gone, not the path */
        goto out;
    }
    if (why == -ETIMEDOUT && moved_expired(&qp->q, now)) {
        n = -1; /* timed out on both paths: it fails */
        goto out;
    }
    int rc = move_all(qp, now, why);
    if (rc && !why) {
        /* The path is down and so is the other (or its queue cannot be had): what is
         * outstanding fails now, and so does I/O until a path is back (nvl_mp_ready). */
        if (!up && rc == -EHOSTUNREACH && (qp->q.busy || !d->ops->path_up(d->ctx, mp->path[1]))) {
            nvl_q_fail_busy(&qp->q, -EIO);
            mp->dirty[0] = true;
            mp->down = true;
            log_event("down %s queue %u: no path is up\n", d->name, qp->q.p.qid);
        }
    } else if (rc) {
        n = -1;
    }
out:
    mp->in_watch = false;
    return n;
}

int nvl_mp_ready(nvme_qpair_t *qp)
{
    struct nvl_mp *mp = qp->mp;
    if (!mp->down)
        return 0;
    nvme_dev_t *d = qp->dev;
    /* The primary first: put the queue of a path that works in the twin's place, re-create it
     * (it was abandoned), and make it the one submissions go to. */
    int rc = 0;
    char msg[256] = "";
    for (int want = 0; want < 2; want++) {
        if (!d->ops->path_up(d->ctx, want))
            continue;
        if (mp->path[0] == want)
            swap_q(qp);
        if ((mp->dirty[1] || !mp->q.slots) && (rc = rebuild_twin(qp))) {
            snprintf(msg, sizeof msg, "%s", nvme_errmsg());
            continue;
        }
        swap_q(qp);
        mp->down = false;
        mp->up_since = 0;
        log_event("up %s path %d queue %u at %" PRIu64 "\n", d->name, want, qp->q.p.qid,
                  realtime_ns());
        return 0;
    }
    if (rc) /* e.g. the manager reclaimed this client's queues while it was cut off */
        return nvl_fail(rc, "%s: a path is back, but the queue pair cannot be set up on it "
                            "again (%s)", d->name, msg);
    return nvl_fail(-EIO, "%s: no path to the device is up (ntblend status shows the paths): "
                          "I/O fails until a cable is back", d->name);
}

int nvl_mp_qpair_init(nvme_qpair_t *qp, const struct nvme_qpair_opts *o, size_t sqb,
                      size_t prpb, size_t cqb)
{
    nvme_dev_t *d = qp->dev;
    struct nvl_mp *mp = calloc(1, sizeof *mp);
    if (!mp)
        return -ENOMEM;
    /* The SQ in this host, whatever o asks: see neutralise(). */
    int rc = d->ops->dma_alloc_path(d->ctx, sqb + prpb, NVME_PLACE_LOCAL, 1, &mp->sqm);
    if (!rc && (rc = d->ops->dma_alloc_path(d->ctx, cqb, o->cq_place, 1, &mp->cqm)))
        d->ops->dma_free(d->ctx, &mp->sqm);
    if (rc) {
        free(mp);
        return nvl_fail(rc, "%s: no memory for the queue pair's twin on path 1: %s", d->name,
                        strerror(-rc));
    }
    memset((void *)mp->sqm.cpu, 0, mp->sqm.size);
    memset((void *)mp->cqm.cpu, 0, mp->cqm.size);
    struct nvl_queue_params p = qp->q.p;
    p.sq = (struct nvl_dma){ .cpu = mp->sqm.cpu, .io = mp->sqm.io, .size = sqb };
    p.prp = (struct nvl_dma){ .cpu = mp->sqm.cpu + sqb, .io = mp->sqm.io + sqb, .size = prpb };
    p.cq = mp->cqm;
    p.watch = watch;
    p.owner = qp;
    uint16_t qid = 0;
    if ((rc = nvl_hw_create(d, mp->sqm.io, mp->cqm.io, p.depth, p.irq, &qid)))
        goto fail;
    p.qid = qid;
    if (p.irq && d->ops->irq_enable && (rc = d->ops->irq_enable(d->ctx, qid, p.irq)))
        goto fail_created;
    if ((rc = nvl_q_init(&mp->q, &p)))
        goto fail_created;
    mp->path[0] = 0;
    mp->path[1] = 1;
    qp->mp = mp;
    qp->q.p.watch = watch;
    qp->q.p.owner = qp;
    return 0;
fail_created:
    nvl_hw_delete(d, qid);
fail:
    d->ops->dma_free(d->ctx, &mp->sqm);
    d->ops->dma_free(d->ctx, &mp->cqm);
    free(mp);
    return rc;
}

int nvl_mp_qpair_fini(nvme_qpair_t *qp)
{
    struct nvl_mp *mp = qp->mp;
    if (!mp)
        return 0;
    nvme_dev_t *d = qp->dev;
    mp->in_watch = true; /* no failover from here on */
    int rc = 0;
    if (mp->q.slots) {
        nvl_q_reap(&mp->q, 0);
        rc = nvl_hw_delete(d, mp->q.p.qid);
        nvl_q_reap(&mp->q, 0);
        nvl_q_cancel_all(&mp->q);
        nvl_q_fini(&mp->q);
    }
    qp->q.p.watch = NULL;
    qp->mp = NULL;
    d->ops->dma_free(d->ctx, &mp->sqm);
    d->ops->dma_free(d->ctx, &mp->cqm);
    free(mp);
    return rc;
}

int nvl_mp_io(const nvme_qpair_t *qp, uint64_t *io)
{
    return qp->mp->path[0] ? nvl_mem_xlate(qp->dev, *io, 0, qp->mp->path[0], io) : 0;
}

uint32_t nvl_mp_busy(const nvme_qpair_t *qp) { return qp->mp->q.busy; }

int nvl_mp_wait(nvme_qpair_t *qp, uint64_t timeout_ns) { return nvl_q_wait(&qp->mp->q, NULL, timeout_ns); }

void nvl_mp_stats(const nvme_qpair_t *qp, struct nvme_qpair_stats *out)
{
    const struct nvl_mp *mp = qp->mp;
    const struct nvme_qpair_stats *t = &mp->q.st;
    out->submitted += t->submitted;
    out->completed += t->completed;
    out->empty_polls += t->empty_polls;
    out->timeouts += t->timeouts;
    out->late += t->late;
    out->stale += t->stale;
    out->failovers = mp->failovers;
    out->returns = mp->returns;
    out->reissued = mp->reissued;
    out->path = mp->path[0];
}
