/*
 * The manager of an NVMe shared by many hosts (smartio-tocs-2021 §6.2): it owns the
 * controller and its admin queue and serves clients over the fabric (mgr_wire.h). One thread
 * serves requests in order; it sleeps in its interrupt when there are none, and every
 * check_ms looks at its clients' segments: a client whose segment was removed (its process
 * died) or lost (its host is cut off) has its queues deleted on the device and their
 * identifiers freed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mgr_wire.h"
#include "ntblend/seg.h"
#include "ntblend/smartio.h"
#include "nvme_int.h"

#define MAX_CLIENTS 1024u
#define ADAPTERS 8

struct mclient {
    bool used;
    uint32_t token, node, pid, seg_id, intr_id;
    uint32_t last_seq;
    bool answered;           /* last_seq has been answered (a repeat is answered again) */
    seg_remote_t *seg;
    seg_map_t *map;
    volatile struct nvl_mgr_rsp *rsp;
    seg_rintr_t *intr;
    int adapter;             /* ours that the connections to it go through */
    uint32_t qpairs;
    uint64_t requests;
};

struct nvme_manager {
    nvme_dev_t *d;
    uint32_t dev_id;
    seg_desc_t *sd;
    seg_intr_t *intr;
    pthread_t thread;
    atomic_bool stop;
    pthread_mutex_t lock;    /* the tables below, for nvme_manager_status() */
    struct mclient *clients; /* [max_clients + 1]; slot 0 unused */
    uint32_t max_clients;
    uint16_t *owner;         /* [max_qpairs + 1]: slot owning each qid, 0 free */
    void *buf;               /* data of the clients' admin commands, in the device's memory */
    unsigned check_ms;
    bool log;
    struct nvme_manager_status st;
    struct nvl_mgr_hello *hello;
};

static int admin(struct nvme_manager *m, struct nvme_sqe *s, uint64_t io, size_t len,
                 struct nvme_cpl *cpl)
{
    return nvl_admin(m->d, s, io, len, cpl);
}

/* Delete queue pair qid on the device (SQ first: it aborts what it holds into the CQ). */
static int delete_qpair(struct nvme_manager *m, uint16_t qid) { return nvl_hw_delete(m->d, qid); }

static void disconnect_client(struct mclient *c)
{
    if (c->intr)
        seg_intr_disconnect(c->intr);
    if (c->map)
        seg_unmap(c->map);
    if (c->seg)
        seg_disconnect(c->seg);
    c->intr = NULL;
    c->map = NULL;
    c->seg = NULL;
}

/* Delete what slot owns and forget it. */
static void drop_client(struct nvme_manager *m, uint32_t slot, bool reclaimed, const char *why)
{
    struct mclient *c = &m->clients[slot];
    uint32_t n = 0;
    if (m->log)
        fprintf(stderr, "nvme manager: client pid %u on node %u (slot %u) %s\n", c->pid, c->node,
                slot, why);
    for (uint32_t q = 1; q <= m->d->info.max_qpairs; q++)
        if (m->owner[q] == slot) {
            delete_qpair(m, (uint16_t)q);
            pthread_mutex_lock(&m->lock);
            m->owner[q] = 0;
            m->st.qpairs--;
            pthread_mutex_unlock(&m->lock);
            n++;
        }
    disconnect_client(c);
    pthread_mutex_lock(&m->lock);
    *c = (struct mclient){ 0 };
    m->st.clients--;
    if (reclaimed) {
        m->st.reclaimed_clients++;
        m->st.reclaimed_qpairs += n;
    }
    pthread_mutex_unlock(&m->lock);
}

/* Store the answer into the client's segment, sequence number last, and wake it. */
static void answer(struct mclient *c, uint32_t seq, int rc, uint32_t dw0, uint16_t status,
                   const void *data, uint32_t len, const char *fmt, ...)
    __attribute__((format(printf, 8, 9)));
static void answer(struct mclient *c, uint32_t seq, int rc, uint32_t dw0, uint16_t status,
                   const void *data, uint32_t len, const char *fmt, ...)
{
    volatile struct nvl_mgr_rsp *r = c->rsp;
    if (len)
        memcpy((void *)r->data, data, len);
    char msg[NVL_MGR_MSG] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
    }
    memcpy((void *)r->msg, msg, sizeof msg);
    r->rc = rc;
    r->dw0 = dw0;
    r->status = status;
    r->len = len;
    seg_store_barrier();
    __atomic_store_n(&r->seq, seq, __ATOMIC_RELEASE);
    seg_flush();
    seg_intr_trigger(c->intr);
    c->answered = true;
}

/* The client's answer segment and interrupt, through our first adapter that reaches its host
 * (but `skip`: the one whose path went down). */
static int connect_client(struct nvme_manager *m, struct mclient *c, int skip)
{
    int rc = -EHOSTUNREACH, a;
    for (a = 0; a < ADAPTERS && rc; a++)
        if (a != skip)
            rc = seg_connect(m->sd, &c->seg, c->node, c->seg_id, a, 1000);
    if (rc)
        return rc;
    c->adapter = a - 1;
    c->rsp = seg_map_remote(c->seg, 0, sizeof(struct nvl_mgr_rsp), 0, &c->map);
    if (!c->rsp)
        return -errno;
    return seg_intr_connect(m->sd, &c->intr, c->node, c->intr_id, c->adapter, 1000);
}

/* A client cut off on one path may be reachable over another (docs/multipath.md): its
 * connections made again through another adapter of ours. 0: it is served on. */
static int reconnect_client(struct nvme_manager *m, struct mclient *c)
{
    struct mclient t = { .node = c->node, .seg_id = c->seg_id, .intr_id = c->intr_id };
    int rc = connect_client(m, &t, c->adapter);
    if (!rc && seg_remote_state(t.seg) == SEG_EVENT_LOST)
        rc = -EHOSTUNREACH;
    if (rc) {
        disconnect_client(&t);
        return rc;
    }
    disconnect_client(c);
    c->seg = t.seg;
    c->map = t.map;
    c->rsp = t.rsp;
    c->intr = t.intr;
    c->adapter = t.adapter;
    return 0;
}

static void hello(struct nvme_manager *m, const struct nvl_mgr_req *q)
{
    /* A repeat of a HELLO already answered (same token from the same process). */
    for (uint32_t s = 1; s <= m->max_clients; s++) {
        struct mclient *c = &m->clients[s];
        if (c->used && c->token == q->token && c->node == q->u.hello.node &&
            c->pid == q->u.hello.pid && c->seg_id == q->u.hello.seg) {
            if (c->last_seq == q->seq)
                answer(c, q->seq, 0, s, 0, m->hello, sizeof *m->hello, NULL);
            if (m->log)
                fprintf(stderr, "nvme manager: client pid %u on node %u (slot %u) said hello "
                                "again\n", c->pid, c->node, s);
            return;
        }
    }
    uint32_t slot = 0;
    for (uint32_t s = 1; s <= m->max_clients && !slot; s++)
        if (!m->clients[s].used)
            slot = s;
    struct mclient c = { .used = true, .token = q->token, .node = q->u.hello.node,
                         .pid = q->u.hello.pid, .seg_id = q->u.hello.seg,
                         .intr_id = q->u.hello.intr, .last_seq = q->seq };
    int rc = connect_client(m, &c, -1);
    if (rc) {
        /* Nowhere to answer: the client times out and says so. */
        fprintf(stderr, "nvme manager: client pid %u on node %u: cannot reach its segment "
                        "and interrupt (%s)\n", c.pid, c.node, seg_strerror(rc));
        disconnect_client(&c);
        return;
    }
    if (!slot) {
        answer(&c, q->seq, -EUSERS, 0, 0, NULL, 0,
               "the manager serves %u clients already (its limit)", m->max_clients);
        disconnect_client(&c);
        return;
    }
    pthread_mutex_lock(&m->lock);
    m->clients[slot] = c;
    m->st.clients++;
    pthread_mutex_unlock(&m->lock);
    if (m->log)
        fprintf(stderr, "nvme manager: client pid %u on node %u (slot %u) connected\n", c.pid,
                c.node, slot);
    answer(&m->clients[slot], q->seq, 0, slot, 0, m->hello, sizeof *m->hello, NULL);
}

static void create(struct nvme_manager *m, uint32_t slot, const struct nvl_mgr_req *q)
{
    struct mclient *c = &m->clients[slot];
    nvme_dev_t *d = m->d;
    uint32_t depth = q->u.create.depth;
    if (depth < 2 || depth > d->info.max_depth) {
        answer(c, q->seq, -EINVAL, 0, 0, NULL, 0, "queue depth %u: the controller takes 2..%u",
               depth, d->info.max_depth);
        return;
    }
    if ((q->u.create.sq | q->u.create.cq) & 4095u) {
        answer(c, q->seq, -EINVAL, 0, 0, NULL, 0, "queue addresses must be 4 KiB aligned");
        return;
    }
    pthread_mutex_lock(&d->lock);
    uint16_t qid = 0;
    for (uint32_t i = 1; i <= d->info.max_qpairs && !qid; i++)
        if (!d->qid_used[i])
            qid = (uint16_t)i;
    if (qid)
        d->qid_used[qid] = 1;
    pthread_mutex_unlock(&d->lock);
    if (!qid) {
        answer(c, q->seq, -EBUSY, 0, 0, NULL, 0,
               "no free I/O queue pair (device has %u, all in use): close another client's",
               d->info.max_qpairs);
        return;
    }
    struct nvme_cpl cpl = { 0 };
    struct nvme_sqe s = { .opc = NVME_ADM_CREATE_CQ, .prp1 = q->u.create.cq,
                          .cdw10 = (depth - 1) << 16 | qid,
                          .cdw11 = (q->u.create.irq ? (uint32_t)qid << 16 | NVME_CQ_IEN : 0) |
                                   NVME_QUEUE_PC };
    int rc = admin(m, &s, 0, 0, &cpl);
    if (!rc) {
        s = (struct nvme_sqe){ .opc = NVME_ADM_CREATE_SQ, .prp1 = q->u.create.sq,
                               .cdw10 = (depth - 1) << 16 | qid,
                               .cdw11 = (uint32_t)qid << 16 | NVME_QUEUE_PC };
        rc = admin(m, &s, 0, 0, &cpl);
        if (rc) {
            struct nvme_sqe del = { .opc = NVME_ADM_DELETE_CQ, .cdw10 = qid };
            admin(m, &del, 0, 0, NULL);
        }
    }
    if (rc) {
        pthread_mutex_lock(&d->lock);
        d->qid_used[qid] = 0;
        pthread_mutex_unlock(&d->lock);
        answer(c, q->seq, rc, 0, cpl.status, NULL, 0, "the controller refused the queue pair "
               "(status %#x: %s)", cpl.status, strerror(-rc));
        return;
    }
    pthread_mutex_lock(&m->lock);
    m->owner[qid] = (uint16_t)slot;
    m->st.qpairs++;
    c->qpairs++;
    pthread_mutex_unlock(&m->lock);
    if (m->log)
        fprintf(stderr, "nvme manager: client pid %u on node %u (slot %u): queue pair %u "
                        "(depth %u)\n", c->pid, c->node, slot, qid, depth);
    answer(c, q->seq, 0, qid, 0, NULL, 0, NULL);
}

static void destroy(struct nvme_manager *m, uint32_t slot, const struct nvl_mgr_req *q)
{
    struct mclient *c = &m->clients[slot];
    uint32_t qid = q->u.del.qid;
    if (!qid || qid > m->d->info.max_qpairs || m->owner[qid] != slot) {
        answer(c, q->seq, -ENOENT, 0, 0, NULL, 0, "queue pair %u is not this client's", qid);
        return;
    }
    int rc = delete_qpair(m, (uint16_t)qid);
    pthread_mutex_lock(&m->lock);
    m->owner[qid] = 0;
    m->st.qpairs--;
    c->qpairs--;
    pthread_mutex_unlock(&m->lock);
    answer(c, q->seq, rc, 0, 0, NULL, 0, rc ? "deleting queue pair %u: %s" : NULL, qid,
           strerror(-rc));
}

/* Bytes of data an admin command a client may ask for moves to the host; -1: not allowed. */
static long admin_len(const struct nvl_mgr_req *q)
{
    switch (q->u.admin.opc) {
    case NVME_ADM_IDENTIFY:
    case NVME_ADM_GET_FEATURES:
        return 4096;
    case NVME_ADM_GET_LOG: {
        uint32_t numd = (q->u.admin.cdw10 >> 16 | (q->u.admin.cdw11 & 0xffff) << 16) + 1;
        return numd * 4ul <= NVL_MGR_DATA ? (long)numd * 4 : -2;
    }
    case NVME_ADM_SET_FEATURES:
        return (q->u.admin.cdw10 & 0xff) == NVME_FEAT_NUM_QUEUES ? -1 : 0;
    default:
        return -1;
    }
}

static void admin_cmd(struct nvme_manager *m, uint32_t slot, const struct nvl_mgr_req *q)
{
    struct mclient *c = &m->clients[slot];
    long len = admin_len(q);
    if (len == -2) {
        answer(c, q->seq, -EINVAL, 0, 0, NULL, 0, "a log page read through the manager is at "
               "most %u bytes", NVL_MGR_DATA);
        return;
    }
    if (len < 0) {
        answer(c, q->seq, -EPERM, 0, 0, NULL, 0, "admin command %#x is the manager's alone "
               "(clients may Identify, Get Log Page, Get and Set Features)", q->u.admin.opc);
        return;
    }
    uint64_t io = 0;
    if (len)
        nvme_buf_ioaddr(m->d, m->buf, &io);
    memset(m->buf, 0, (size_t)len);
    struct nvme_sqe s = { .opc = (uint8_t)q->u.admin.opc, .nsid = q->u.admin.nsid,
                          .cdw10 = q->u.admin.cdw10, .cdw11 = q->u.admin.cdw11,
                          .cdw12 = q->u.admin.cdw12, .cdw13 = q->u.admin.cdw13,
                          .cdw14 = q->u.admin.cdw14, .cdw15 = q->u.admin.cdw15 };
    struct nvme_cpl cpl = { 0 };
    int rc = admin(m, &s, io, (size_t)len, &cpl);
    answer(c, q->seq, rc, cpl.dw0, cpl.status, rc ? NULL : m->buf, rc ? 0 : (uint32_t)len,
           rc ? "admin command %#x: status %#x (%s)" : NULL, q->u.admin.opc, cpl.status,
           strerror(-rc));
}

/* A request from a client this manager no longer knows (it was cut off and reclaimed, or
 * the manager restarted): answer -ENOTCONN at the address the request gives, so it reopens
 * at once instead of timing out while it holds the device. */
static void refuse_stale(struct nvme_manager *m, const struct nvl_mgr_req *q)
{
    if (!q->from_node && !q->from_seg)
        return;
    struct mclient t = { .node = q->from_node, .seg_id = q->from_seg, .intr_id = q->from_intr };
    if (!connect_client(m, &t, -1))
        answer(&t, q->seq, -ENOTCONN, 0, 0, NULL, 0, "the manager no longer serves this "
               "client (it was cut off, and its queues were deleted): open the device again");
    disconnect_client(&t);
}

static void serve(struct nvme_manager *m, const struct nvl_mgr_req *q)
{
    if (q->magic != NVL_MGR_MAGIC)
        return;
    if (q->op == NVL_MGR_HELLO) {
        hello(m, q);
        return;
    }
    uint32_t slot = q->slot;
    if (!slot || slot > m->max_clients || !m->clients[slot].used ||
        m->clients[slot].token != q->token) {
        refuse_stale(m, q); /* not a client (any more) */
        return;
    }
    struct mclient *c = &m->clients[slot];
    if (q->seq == c->last_seq) {
        if (c->answered) /* the answer's trigger was lost: ring again */
            seg_intr_trigger(c->intr);
        return;
    }
    c->last_seq = q->seq;
    c->answered = false;
    pthread_mutex_lock(&m->lock);
    c->requests++;
    m->st.requests++;
    pthread_mutex_unlock(&m->lock);
    switch (q->op) {
    case NVL_MGR_BYE:
        answer(c, q->seq, 0, 0, 0, NULL, 0, NULL);
        drop_client(m, slot, false, "left");
        break;
    case NVL_MGR_CREATE:
        create(m, slot, q);
        break;
    case NVL_MGR_DELETE:
        destroy(m, slot, q);
        break;
    case NVL_MGR_ADMIN:
        admin_cmd(m, slot, q);
        break;
    default:
        answer(c, q->seq, -EOPNOTSUPP, 0, 0, NULL, 0, "unknown request %u", q->op);
    }
}

/* Clients whose process died (segment removed) or whose host is cut off (lost). */
static void check_clients(struct nvme_manager *m)
{
    for (uint32_t s = 1; s <= m->max_clients; s++) {
        struct mclient *c = &m->clients[s];
        if (!c->used)
            continue;
        int st = seg_remote_state(c->seg);
        if (st == SEG_EVENT_LOST && !reconnect_client(m, c)) {
            if (m->log)
                fprintf(stderr, "nvme manager: client pid %u on node %u (slot %u): its path "
                                "is down, reached over another\n", c->pid, c->node, s);
            continue;
        }
        if (st == SEG_EVENT_REMOVED || st == SEG_EVENT_LOST)
            drop_client(m, s, true, st == SEG_EVENT_REMOVED ? "is gone (its process ended): "
                                                              "its queues are deleted"
                                                            : "is cut off (no path to its "
                                                              "host): its queues are deleted");
    }
}

static void *run(void *arg)
{
    struct nvme_manager *m = arg;
    uint64_t next = nvl_now_ns() + m->check_ms * 1000000ull;
    while (!atomic_load(&m->stop)) {
        struct nvl_mgr_req q;
        size_t len = 0;
        memset(&q, 0, sizeof q);
        int rc = seg_intr_wait_data(m->intr, &q, sizeof q, &len, (int)m->check_ms);
        if (!rc && len >= offsetof(struct nvl_mgr_req, u))
            serve(m, &q);
        uint64_t now = nvl_now_ns();
        if (now >= next) {
            check_clients(m);
            next = now + m->check_ms * 1000000ull;
        }
    }
    return NULL;
}

static int fill_hello(struct nvme_manager *m)
{
    nvme_dev_t *d = m->d;
    struct nvl_mgr_hello *h = calloc(1, sizeof *h);
    if (!h)
        return -ENOMEM;
    h->cap = d->cap;
    h->vs = d->info.version;
    h->max_qpairs = d->info.max_qpairs;
    h->nns = d->nns < NVL_MGR_NS_MAX ? d->nns : NVL_MGR_NS_MAX;
    for (uint32_t i = 0; i < h->nns; i++) {
        h->ns[i].nsid = d->ns[i].nsid;
        h->ns[i].lba_shift = d->ns[i].lba_shift;
        h->ns[i].blocks = d->ns[i].blocks;
    }
    struct nvme_cmd id = { .opc = NVME_ADM_IDENTIFY, .cdw10 = NVME_CNS_CTRL };
    int rc = nvme_admin(d, &id, m->buf, 4096, NULL);
    if (!rc)
        memcpy(h->id_ctrl, m->buf, sizeof h->id_ctrl);
    m->hello = h;
    return rc;
}

static void manager_free(struct nvme_manager *m)
{
    if (m->intr)
        seg_intr_remove(m->intr);
    if (m->sd)
        seg_close(m->sd);
    if (m->buf)
        nvme_buf_free(m->d, m->buf);
    if (m->d)
        nvme_close(m->d);
    free(m->clients);
    free(m->owner);
    free(m->hello);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

int nvme_manager_start(const char *name, const struct nvme_manager_opts *opts,
                       nvme_manager_t **out)
{
    static const struct nvme_manager_opts defaults;
    const struct nvme_manager_opts *o = opts ? opts : &defaults;
    if (!name || !out)
        return nvl_fail(-EINVAL, "nvme_manager_start: needs a device name (e.g. nvme0)");
    *out = NULL;
    if (o->max_clients > MAX_CLIENTS)
        return nvl_fail(-EINVAL, "max_clients %u: at most %u", o->max_clients, MAX_CLIENTS);
    if (!strncmp(name, "pci:", 4))
        return nvl_fail(-EINVAL, "%s: a manager shares a SmartIO device (by its name, e.g. "
                                 "nvme0); a PCI function of a host's tree is driven by one "
                                 "process", name);
    struct nvme_manager *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    pthread_mutex_init(&m->lock, NULL);
    m->max_clients = o->max_clients ? o->max_clients : MAX_CLIENTS;
    m->check_ms = o->check_ms ? o->check_ms : 100;
    m->log = o->log;
    uint32_t node, pid;
    bool managed = false;
    int rc = nvl_sio_lookup(name, &m->dev_id, &managed, &node, &pid);
    if (!rc && managed)
        rc = nvl_fail(-EBUSY, "%s has a manager already: process %u on node %u (stop it "
                              "first; clients need only one)", name, pid, node);
    struct nvme_open_opts oo = { .timeout_ms = o->timeout_ms, .mode = NVME_OPEN_OWN };
    if (!rc)
        rc = nvme_open(name, &oo, &m->d);
    if (rc) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", nvme_errmsg());
        manager_free(m);
        return nvl_fail(rc, "%s", msg);
    }
    m->clients = calloc(m->max_clients + 1, sizeof *m->clients);
    m->owner = calloc(m->d->info.max_qpairs + 1, sizeof *m->owner);
    m->buf = nvme_buf_alloc(m->d, NULL, NVL_MGR_DATA);
    if (!m->clients || !m->owner || !m->buf) {
        manager_free(m);
        return -ENOMEM;
    }
    m->st.max_qpairs = m->d->info.max_qpairs;
    uint32_t iid = NVL_MGR_INTR(m->dev_id);
    if ((rc = fill_hello(m)) || (rc = seg_open(&m->sd)) ||
        (rc = seg_intr_create(m->sd, &m->intr, &iid))) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s: cannot set up the manager's interrupt %#x: %s", name,
                 iid, rc == -EEXIST ? "another manager of it runs on this host"
                                    : seg_strerror(rc));
        manager_free(m);
        return nvl_fail(rc, "%s", msg);
    }
    /* Clients may come now: the device's record names us (struct sio_info). */
    if ((rc = sio_share(nvme_sio_dev(m->d)))) {
        manager_free(m);
        return nvl_fail(rc, "%s: cannot share the device: %s", name, strerror(-rc));
    }
    if ((rc = -pthread_create(&m->thread, NULL, run, m))) {
        manager_free(m);
        return nvl_fail(rc, "%s: cannot start the manager's thread", name);
    }
    *out = m;
    return 0;
}

int nvme_manager_stop(nvme_manager_t *m)
{
    if (!m)
        return 0;
    atomic_store(&m->stop, true);
    pthread_join(m->thread, NULL);
    for (uint32_t s = 1; s <= m->max_clients; s++)
        if (m->clients[s].used)
            drop_client(m, s, false, "disconnected: the manager stops");
    /* Clients that ask now find the interrupt gone. */
    seg_intr_remove(m->intr);
    m->intr = NULL;
    nvme_buf_free(m->d, m->buf);
    m->buf = NULL;
    int rc = nvme_close(m->d);
    m->d = NULL;
    manager_free(m);
    return rc;
}

int nvme_manager_status(nvme_manager_t *m, struct nvme_manager_status *st,
                        struct nvme_manager_client *clients, uint32_t max)
{
    if (!m)
        return -EINVAL;
    pthread_mutex_lock(&m->lock);
    if (st)
        *st = m->st;
    uint32_t n = 0;
    for (uint32_t s = 1; s <= m->max_clients; s++) {
        const struct mclient *c = &m->clients[s];
        if (!c->used)
            continue;
        if (clients && n < max)
            clients[n] = (struct nvme_manager_client){ .node = c->node, .pid = c->pid,
                                                       .qpairs = c->qpairs,
                                                       .requests = c->requests };
        n++;
    }
    pthread_mutex_unlock(&m->lock);
    return (int)n;
}

nvme_dev_t *nvme_manager_dev(nvme_manager_t *m) { return m ? m->d : NULL; }
