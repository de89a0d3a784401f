/*
 * A client of the device's manager (mgr_wire.h has the protocol): this process borrowed the
 * NVMe shared and drives its own I/O queue pairs, but the admin queue is the manager's, so
 * queue creation and deletion and admin commands are requests to the manager. The client
 * owns a small segment the manager stores answers into, and an interrupt the manager
 * triggers after each answer; it waits for the answer by the wait policy (src/wait), asleep
 * in that interrupt once it sleeps.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "mgr_wire.h"
#include "ntblend/seg.h"
#include "nvme_int.h"

#define ADAPTERS 8       /* adapters tried for the connection to the manager */
#define ATTEMPT_MS 1000u /* resend a request not answered within this */
#define ATTEMPTS 3u

/* The answer: polled briefly (the manager answers within microseconds when it runs), yielded
 * for while that runs another thread (it may be the manager), then slept for in the interrupt. */
static struct wpol_site answer_site = WPOL_SITE("nvme manager answer", 20000, 200000);

struct nvl_client {
    pthread_mutex_t lock;   /* one request at a time */
    seg_desc_t *sd;
    seg_local_t *seg;
    seg_map_t *map;
    volatile struct nvl_mgr_rsp *rsp;
    seg_intr_t *intr;
    seg_rintr_t *mgr;
    int mgr_adapter;        /* ours that the manager's interrupt is reached through */
    uint32_t intr_id, mgr_node, dev_id, node;
    uint16_t slot;
    uint32_t token, seq;
    bool gone;              /* the manager removed its interrupt */
};

static const char *op_name(uint16_t op)
{
    switch (op) {
    case NVL_MGR_HELLO: return "connect";
    case NVL_MGR_BYE: return "disconnect";
    case NVL_MGR_CREATE: return "create queue pair";
    case NVL_MGR_DELETE: return "delete queue pair";
    default: return "admin command";
    }
}

struct answer {
    struct nvl_client *c;
    uint32_t seq;
};

static bool answered(void *arg)
{
    struct answer *a = arg;
    return __atomic_load_n(&a->c->rsp->seq, __ATOMIC_ACQUIRE) == a->seq;
}

static int answer_sleep(void *arg, uint64_t max_ns)
{
    seg_intr_wait(((struct answer *)arg)->c->intr, (int)(max_ns / 1000000u) + 1);
    return 0;
}

/* The manager's interrupt through our first adapter that reaches it (but `skip`). */
static int connect_mgr(struct nvl_client *c, int skip, seg_rintr_t **out)
{
    int rc = -EHOSTUNREACH;
    for (int a = 0; a < ADAPTERS && rc; a++)
        if (a != skip && !(rc = seg_intr_connect(c->sd, out, c->mgr_node,
                                                 NVL_MGR_INTR(c->dev_id), a, 1000)))
            c->mgr_adapter = a;
    return rc;
}

/* After a request went unanswered: the manager's interrupt through another adapter, when one
 * reaches it (two paths: docs/multipath.md); the old connection stays otherwise. */
static void reconnect(struct nvl_client *c)
{
    seg_rintr_t *r;
    int was = c->mgr_adapter;
    if (connect_mgr(c, was, &r)) {
        c->mgr_adapter = was;
        return;
    }
    seg_intr_disconnect(c->mgr);
    c->mgr = r;
}

/* Send *q and wait for its answer (c->lock held); the manager's rc. */
static int call(nvme_dev_t *d, struct nvl_mgr_req *q)
{
    struct nvl_client *c = d->client;
    if (c->gone)
        return nvl_fail(-ENOTCONN, "the manager of %s is gone: restart it (ntblend nvme "
                                   "manager %s), then open the device again", d->name, d->name);
    q->magic = NVL_MGR_MAGIC;
    q->slot = c->slot;
    q->token = c->token;
    q->seq = ++c->seq;
    q->from_node = c->node;
    q->from_seg = seg_local_id(c->seg);
    q->from_intr = c->intr_id;
    for (uint32_t attempt = 0; attempt < ATTEMPTS; attempt++) {
        if (attempt)
            reconnect(c); /* the path to the manager may be down, and another up */
        int rc = seg_intr_trigger_data(c->mgr, q, sizeof *q);
        if (rc == -ENOENT) {
            c->gone = true;
            return nvl_fail(-ENOTCONN, "the manager of %s is gone: restart it (ntblend nvme "
                                       "manager %s), then open the device again",
                            d->name, d->name);
        }
        struct answer a = { c, q->seq };
        struct wpol_how how = { .ready = answered, .arg = &a, .sleep = answer_sleep,
                                .deadline_ns = nvl_now_ns() + (uint64_t)ATTEMPT_MS * 1000000u,
                                .sleep_ns = 10000000 };
        if (wpol_wait(&answer_site, &how))
            continue; /* not within ATTEMPT_MS: send it again */
        int r = c->rsp->rc;
        if (r) {
            if (r == -ENOTCONN && q->op != NVL_MGR_HELLO)
                c->gone = true; /* dropped: nothing more to ask it */
            char msg[NVL_MGR_MSG];
            memcpy(msg, (const void *)c->rsp->msg, sizeof msg);
            msg[sizeof msg - 1] = 0;
            return nvl_fail(r, "%s: %s", d->name, msg[0] ? msg : strerror(-r));
        }
        return 0;
    }
    return nvl_fail(-ETIMEDOUT, "the manager of %s (node %u) did not answer a %s request "
                                "within %u s: is it running, and is the path to it up?",
                    d->name, c->mgr_node, op_name(q->op), ATTEMPTS * ATTEMPT_MS / 1000);
}

static void client_free(struct nvl_client *c)
{
    if (c->mgr)
        seg_intr_disconnect(c->mgr);
    if (c->intr)
        seg_intr_remove(c->intr);
    if (c->map)
        seg_unmap(c->map);
    if (c->seg)
        seg_remove(c->seg);
    if (c->sd)
        seg_close(c->sd);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

int nvl_client_open(nvme_dev_t *d, uint32_t dev_id, uint32_t mgr_node)
{
    struct nvl_client *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    pthread_mutex_init(&c->lock, NULL);
    c->dev_id = dev_id;
    c->mgr_node = mgr_node;
    int rc = seg_open(&c->sd);
    if (!rc)
        rc = seg_create(c->sd, &c->seg, SEG_ID_AUTO, sizeof(struct nvl_mgr_rsp));
    if (rc) {
        client_free(c);
        return nvl_fail(rc, "%s: cannot create the segment the manager answers into: %s",
                        d->name, seg_strerror(rc));
    }
    c->rsp = seg_map_local(c->seg, 0, 0, 0, &c->map);
    if (!c->rsp) {
        rc = -errno;
        client_free(c);
        return nvl_fail(rc, "%s: cannot map the answer segment", d->name);
    }
    int ready = 0;
    for (int a = 0; a < ADAPTERS; a++)
        if (seg_prepare(c->seg, a) == 0 && seg_set_available(c->seg, a) == 0)
            ready++;
    c->intr_id = SEG_ID_AUTO;
    if (!ready || (rc = seg_intr_create(c->sd, &c->intr, &c->intr_id))) {
        rc = ready ? rc : -ENODEV;
        client_free(c);
        return nvl_fail(rc, "%s: cannot offer the answer segment and interrupt to the "
                            "manager: %s", d->name, seg_strerror(rc));
    }
    if ((rc = connect_mgr(c, -1, &c->mgr))) {
        client_free(c);
        return nvl_fail(rc == -ENOENT ? -ENOTCONN : rc,
                        "%s: cannot reach its manager on node %u (%s): is it still running?",
                        d->name, mgr_node, seg_strerror(rc));
    }
    if (getrandom(&c->token, sizeof c->token, 0) != sizeof c->token)
        c->token = (uint32_t)getpid() ^ (uint32_t)nvl_now_ns();
    c->token |= 1; /* never 0 */
    if (getrandom(&c->seq, sizeof c->seq, 0) != sizeof c->seq)
        c->seq = (uint32_t)nvl_now_ns();
    d->client = c;

    uint32_t node = 0;
    seg_local_node_id(&node);
    c->node = node;
    struct nvl_mgr_req q = { .op = NVL_MGR_HELLO,
                             .u.hello = { .node = node, .pid = (uint32_t)getpid(),
                                          .seg = seg_local_id(c->seg), .intr = c->intr_id } };
    pthread_mutex_lock(&c->lock);
    rc = call(d, &q);
    pthread_mutex_unlock(&c->lock);
    if (rc) {
        d->client = NULL;
        client_free(c);
        return rc;
    }
    c->slot = (uint16_t)c->rsp->dw0;
    struct nvl_mgr_hello *h = malloc(sizeof *h);
    if (!h) {
        nvl_client_close(d);
        return -ENOMEM;
    }
    memcpy(h, (const void *)c->rsp->data, sizeof *h);
    rc = nvl_apply_regs(d, h->cap, h->vs);
    if (!rc) {
        nvl_apply_id_ctrl(d, h->id_ctrl);
        d->info.max_qpairs = h->max_qpairs;
        uint32_t n = h->nns < NVL_MGR_NS_MAX ? h->nns : NVL_MGR_NS_MAX;
        d->ns = calloc(n ? n : 1, sizeof *d->ns);
        if (!d->ns)
            rc = -ENOMEM;
        for (uint32_t i = 0; !rc && i < n; i++)
            d->ns[d->nns++] = (struct nvl_ns){ .nsid = h->ns[i].nsid,
                                               .lba_shift = h->ns[i].lba_shift,
                                               .blocks = h->ns[i].blocks };
    }
    free(h);
    if (rc)
        nvl_client_close(d);
    return rc;
}

int nvl_client_create(nvme_dev_t *d, uint64_t sq, uint64_t cq, uint32_t depth, bool irq,
                      uint16_t *qid)
{
    struct nvl_client *c = d->client;
    struct nvl_mgr_req q = { .op = NVL_MGR_CREATE,
                             .u.create = { .sq = sq, .cq = cq, .depth = depth, .irq = irq } };
    pthread_mutex_lock(&c->lock);
    int rc = call(d, &q);
    if (!rc)
        *qid = (uint16_t)c->rsp->dw0;
    pthread_mutex_unlock(&c->lock);
    return rc;
}

int nvl_client_delete(nvme_dev_t *d, uint16_t qid)
{
    struct nvl_client *c = d->client;
    struct nvl_mgr_req q = { .op = NVL_MGR_DELETE, .u.del = { .qid = qid } };
    pthread_mutex_lock(&c->lock);
    int rc = call(d, &q);
    pthread_mutex_unlock(&c->lock);
    return rc;
}

int nvl_client_admin(nvme_dev_t *d, const struct nvme_sqe *sqe, void *buf, size_t len,
                     struct nvme_cpl *cpl)
{
    struct nvl_client *c = d->client;
    if (len > NVL_MGR_DATA)
        return nvl_fail(-EINVAL, "%s: a client's admin command moves at most %u bytes",
                        d->name, NVL_MGR_DATA);
    struct nvl_mgr_req q = { .op = NVL_MGR_ADMIN,
                             .u.admin = { .opc = sqe->opc, .nsid = sqe->nsid,
                                          .cdw10 = sqe->cdw10, .cdw11 = sqe->cdw11,
                                          .cdw12 = sqe->cdw12, .cdw13 = sqe->cdw13,
                                          .cdw14 = sqe->cdw14, .cdw15 = sqe->cdw15 } };
    pthread_mutex_lock(&c->lock);
    int rc = call(d, &q);
    struct nvme_cpl out = { .rc = rc };
    if (!rc || c->rsp->seq == q.seq) {
        out.status = c->rsp->status;
        out.dnr = false;
        out.dw0 = c->rsp->dw0;
        if (!rc && buf && len) {
            size_t n = c->rsp->len < len ? c->rsp->len : len;
            memcpy(buf, (const void *)c->rsp->data, n);
        }
    }
    pthread_mutex_unlock(&c->lock);
    if (cpl)
        *cpl = out;
    return rc;
}

void nvl_client_close(nvme_dev_t *d)
{
    struct nvl_client *c = d->client;
    if (!c)
        return;
    if (!c->gone && c->slot) {
        struct nvl_mgr_req q = { .op = NVL_MGR_BYE };
        pthread_mutex_lock(&c->lock);
        call(d, &q); /* if it fails, the manager sees our segment go and cleans up */
        pthread_mutex_unlock(&c->lock);
    }
    d->client = NULL;
    client_free(c);
}
