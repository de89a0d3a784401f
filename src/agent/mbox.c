/*
 * Agent-to-agent mailboxes over the NTB. Host X's RAM holds one 4 KiB slot per peer S at
 * S * FAB_MBOX_SLOT: its `req` half carries S's requests to X, its `rsp` half S's replies to
 * X's requests. A sender writes the payload, then the sequence number, through a LUT window it
 * keeps onto that peer, and rings the peer adapter's reserved doorbell bit. Nothing here uses a
 * socket, so a downed cable cuts agents off exactly as it cuts off applications; where a second
 * adapter reaches the peer, the window moves to it while the first path is down.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include <time.h>

#include "agent.h"

#define MBOX_HALF (FAB_MBOX_SLOT / 2)
#define MBOX_DATA (MBOX_HALF - 8)
#define MBOX_TIMEOUT_NS (1000000000ll)

struct mbox_half {
    _Atomic uint32_t seq;
    uint32_t len;
    uint8_t data[MBOX_DATA];
};

struct mbox_slot {
    struct mbox_half req; /* the peer's request to us */
    struct mbox_half rsp; /* the peer's reply to our request */
};
_Static_assert(sizeof(struct mbox_slot) == FAB_MBOX_SLOT, "slot layout");

/* Every message starts with this header; the payload follows. */
struct mbox_hdr {
    uint32_t type;
    int32_t rc; /* replies: the handler's result */
};

static mbox_handler handlers[MBOX_TYPES];

struct mbox_peer {
    pthread_mutex_t call_lock; /* one request in flight per peer */
    int adapter, peer_adapter; /* our port that reaches the peer, and its port */
    int lut;                   /* our LUT entry onto the peer's mailbox area, -1 until needed */
    uint64_t window;           /* bus address of our slot in the peer's RAM, through the window */
    struct fab_window win;     /* that window, to move it to another path */
    uint32_t next_seq;         /* last request sequence we sent */
    uint32_t req_seen;         /* last request sequence we handled from this peer */
    uint32_t rsp_seen;
};

static struct {
    struct mbox_peer *peers;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* responses arrived */
    pthread_mutex_t route_lock;
} mailbox = { .route_lock = PTHREAD_MUTEX_INITIALIZER };

static struct mbox_slot *local_slot(uint32_t sender)
{
    return fab_ram(agent.f, agent.host, (uint64_t)sender * FAB_MBOX_SLOT, FAB_MBOX_SLOT);
}

/*
 * Find our port that reaches `peer` directly — the first whose path is up — and set up the
 * window onto its mailbox. With two adapters on two switches (smartio-tocs-2021 §6.3) a route
 * whose path went down moves to one that is up, so agents keep talking while a cable is out;
 * it stays where it is when no other path is better (the caller then sees it down).
 */
static int peer_route_locked(uint32_t peer, struct mbox_peer *p)
{
    struct fab *f = agent.f;
    if (p->lut >= 0 && fab_path_up(f, (uint32_t)p->adapter, (uint32_t)p->peer_adapter, NULL))
        return 0;
    uint32_t peer_ai;
    int ai = fab_adapter_toward(f, agent.host, peer, &peer_ai);
    if (ai < 0)
        return p->lut >= 0 ? 0 : -ENOTCONN;
    if (p->lut >= 0 && ai == p->adapter)
        return 0;
    struct fab_window w;
    int rc = fab_window_map(f, (uint32_t)ai, peer, (uint64_t)agent.host * FAB_MBOX_SLOT,
                            FAB_MBOX_SLOT, 0, FAB_LUT_AGENT, &w);
    if (rc)
        return p->lut >= 0 ? 0 : rc; /* keep the old route; it may come back */
    if (p->lut >= 0)
        fab_window_unmap(f, &p->win, 0);
    p->win = w;
    p->adapter = ai;
    p->peer_adapter = (int)peer_ai;
    p->lut = (int)w.first;
    p->window = w.bus;
    return 0;
}

/* A route as one sender uses it: the mailbox thread answering and a caller asking may move it
 * at the same time, so each posts through the copy it took. */
struct mbox_route {
    uint32_t adapter, peer_adapter;
    uint64_t window;
};

static int peer_route(uint32_t peer, struct mbox_peer *p, struct mbox_route *r)
{
    pthread_mutex_lock(&mailbox.route_lock);
    int rc = peer_route_locked(peer, p);
    if (!rc)
        *r = (struct mbox_route){ (uint32_t)p->adapter, (uint32_t)p->peer_adapter, p->window };
    pthread_mutex_unlock(&mailbox.route_lock);
    return rc;
}

/* Write one half (payload first, then the sequence) into the peer's slot and ring it. */
static int post(const struct mbox_route *p, size_t half_off, uint32_t seq, const void *data,
                uint32_t len)
{
    struct fab *f = agent.f;
    uint64_t at = p->window + half_off;
    int rc = fab_dev_write(f, agent.host, FAB_RID_CPU, at + offsetof(struct mbox_half, data),
                           data, len);
    if (!rc)
        rc = fab_dev_write(f, agent.host, FAB_RID_CPU, at + offsetof(struct mbox_half, len),
                           &len, sizeof len);
    atomic_thread_fence(memory_order_release);
    if (!rc)
        rc = fab_dev_write(f, agent.host, FAB_RID_CPU, at, &seq, sizeof seq);
    if (!rc)
        rc = fab_db_ring(f, p->adapter, p->peer_adapter,
                         fab_agent_bit(fab_adapter(f, p->peer_adapter)));
    return rc;
}

static int ping_handler(uint32_t from, const void *req, uint32_t len,
                        void *rsp, uint32_t *rsp_len)
{
    *rsp_len = 0;
    return 0;
}

void mbox_register(uint32_t type, mbox_handler h)
{
    if (type < MBOX_TYPES)
        handlers[type] = h;
}

static void handle_request(uint32_t sender, struct mbox_peer *p, struct mbox_slot *s)
{
    uint32_t seq = atomic_load_explicit(&s->req.seq, memory_order_acquire);
    uint32_t len = s->req.len < MBOX_DATA ? s->req.len : MBOX_DATA;
    static uint8_t msg[MBOX_DATA], out[MBOX_DATA]; /* only the mailbox thread gets here */
    memcpy(msg, s->req.data, len);
    p->req_seen = seq;
    atomic_fetch_add(&agent.mbox_handled, 1);
    struct mbox_hdr in = { 0 }, *reply = (struct mbox_hdr *)out;
    uint32_t rsp_len = 0;
    if (len >= sizeof in)
        memcpy(&in, msg, sizeof in);
    reply->type = in.type;
    if (len < sizeof in || in.type >= MBOX_TYPES || !handlers[in.type])
        reply->rc = -EOPNOTSUPP;
    else
        reply->rc = handlers[in.type](sender, msg + sizeof in, len - (uint32_t)sizeof in,
                                      out + sizeof *reply, &rsp_len);
    if (rsp_len > MBOX_MAX_PAYLOAD)
        rsp_len = 0;
    struct mbox_route r;
    if (peer_route(sender, p, &r) == 0)
        post(&r, offsetof(struct mbox_slot, rsp), seq, out, (uint32_t)sizeof *reply + rsp_len);
}

void mbox_poll(void)
{
    struct fab *f = agent.f;
    struct fab_host *h = fab_host(f, agent.host);
    uint32_t n = f->ctl->nhosts;
    /* Acknowledge the doorbell bit on every port before scanning, so a ring that arrives
     * during the scan is not lost. */
    for (uint32_t i = 0; i < h->nadapters; i++) {
        struct fab_adapter *a = fab_adapter(f, h->adapter_first + i);
        atomic_fetch_and(&a->db, ~fab_agent_bit(a));
    }
    bool got_rsp = false;
    for (uint32_t s = 0; s < n; s++) {
        if (s == agent.host)
            continue;
        struct mbox_slot *slot = local_slot(s);
        struct mbox_peer *p = &mailbox.peers[s];
        if (atomic_load_explicit(&slot->req.seq, memory_order_acquire) != p->req_seen)
            handle_request(s, p, slot);
        if (atomic_load_explicit(&slot->rsp.seq, memory_order_acquire) != p->rsp_seen)
            got_rsp = true;
    }
    if (got_rsp) {
        pthread_mutex_lock(&mailbox.lock);
        pthread_cond_broadcast(&mailbox.cond);
        pthread_mutex_unlock(&mailbox.lock);
    }
}

struct word_wait {
    _Atomic uint32_t *word;
    uint32_t seen;
};

/* The word moved on (a doorbell, a link event), or the agent stops. */
static bool moved(void *arg)
{
    struct word_wait *w = arg;
    return atomic_load(w->word) != w->seen || atomic_load(&agent.stop);
}

int agent_wait_word(struct wpol_site *site, _Atomic uint32_t *word, uint32_t seen, uint64_t max_ns)
{
    struct word_wait w = { word, seen };
    struct wpol_how how = { .ready = moved, .arg = &w, .word = word, .sleep_ns = max_ns,
                            .deadline_ns = max_ns ? wpol_now_ns() + max_ns : 0 };
    return wpol_wait(site, &how);
}

/* Requests and answers come in bursts (a job connecting to every PE): the wait policy spins
 * for the next doorbell while they come that soon, and otherwise sleeps until one rings. */
static void *mbox_thread(void *arg)
{
    static struct wpol_site site = WPOL_SITE("agent mailbox", 20000, 0);
    struct fab_host *h = fab_host(agent.f, agent.host);
    while (!atomic_load(&agent.stop)) {
        uint32_t wake = atomic_load(&h->agent_wake);
        mbox_poll();
        agent_wait_word(&site, &h->agent_wake, wake, 0);
    }
    return NULL;
}

int mbox_call(uint32_t peer, uint32_t type, const void *req, uint32_t len,
              void *rsp, uint32_t rsp_max, uint32_t *rsp_len, int timeout_ms)
{
    return mbox_call_posted(peer, type, req, len, rsp, rsp_max, rsp_len, timeout_ms, NULL);
}

int mbox_call_posted(uint32_t peer, uint32_t type, const void *req, uint32_t len, void *rsp,
                     uint32_t rsp_max, uint32_t *rsp_len, int timeout_ms, bool *posted)
{
    if (posted)
        *posted = false;
    if (peer >= agent.f->ctl->nhosts || peer == agent.host || len > MBOX_MAX_PAYLOAD)
        return -EINVAL;
    struct mbox_peer *p = &mailbox.peers[peer];
    static _Thread_local uint8_t msg[MBOX_DATA];
    struct mbox_hdr hdr = { .type = type };
    memcpy(msg, &hdr, sizeof hdr);
    if (len)
        memcpy(msg + sizeof hdr, req, len);
    pthread_mutex_lock(&p->call_lock);
    struct mbox_route r;
    int rc = peer_route(peer, p, &r);
    uint32_t seq = ++p->next_seq;
    if (!rc && !fab_path_up(agent.f, r.adapter, r.peer_adapter, NULL))
        rc = -ENOLINK;
    if (!rc) {
        /* From here the peer may act on it, even if we never learn the result. */
        if (posted)
            *posted = true;
        rc = post(&r, offsetof(struct mbox_slot, req), seq, msg, (uint32_t)sizeof hdr + len);
    }
    if (!rc) {
        struct mbox_slot *s = local_slot(peer);
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += timeout_ms / 1000;
        dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000l;
        if (dl.tv_nsec >= 1000000000l) {
            dl.tv_sec++;
            dl.tv_nsec -= 1000000000l;
        }
        pthread_mutex_lock(&mailbox.lock);
        while (atomic_load_explicit(&s->rsp.seq, memory_order_acquire) != seq && rc == 0)
            if (pthread_cond_timedwait(&mailbox.cond, &mailbox.lock, &dl) == ETIMEDOUT)
                rc = -ETIMEDOUT;
        pthread_mutex_unlock(&mailbox.lock);
        if (!rc) {
            struct mbox_hdr r;
            uint32_t got = s->rsp.len < MBOX_DATA ? s->rsp.len : MBOX_DATA;
            memcpy(&r, s->rsp.data, sizeof r);
            p->rsp_seen = seq;
            got = got > sizeof r ? got - (uint32_t)sizeof r : 0;
            if (got > rsp_max)
                got = rsp_max;
            if (rsp && got)
                memcpy(rsp, s->rsp.data + sizeof r, got);
            if (rsp_len)
                *rsp_len = got;
            rc = r.rc;
        }
    }
    pthread_mutex_unlock(&p->call_lock);
    return rc;
}

int mbox_ping(uint32_t peer, uint64_t *rtt_ns)
{
    uint64_t t0 = fab_now_ns();
    int rc = mbox_call(peer, MBOX_PING, NULL, 0, NULL, 0, NULL, 1000);
    *rtt_ns = fab_now_ns() - t0;
    return rc;
}

int mbox_init(void)
{
    struct fab *f = agent.f;
    mbox_register(MBOX_PING, ping_handler);
    mailbox.peers = calloc(f->ctl->nhosts, sizeof *mailbox.peers);
    if (!mailbox.peers)
        return -ENOMEM;
    /* Our requests' sequence numbers start anywhere: a peer still remembers the last number our
     * previous life sent it, and a new request with that same number would look old to it. */
    uint32_t start;
    if (getrandom(&start, sizeof start, 0) != sizeof start)
        start = (uint32_t)getpid() * 0x9e3779b1u ^
                atomic_load(&fab_host(f, agent.host)->boot_gen) << 16;
    for (uint32_t i = 0; i < f->ctl->nhosts; i++) {
        pthread_mutex_init(&mailbox.peers[i].call_lock, NULL);
        mailbox.peers[i].lut = -1;
        mailbox.peers[i].next_seq = start + i * 0x10000u;
        /* Whatever a peer wrote before we booted is stale: start from what is there now. */
        struct mbox_slot *s = local_slot(i);
        if (!s)
            return -errno;
        mailbox.peers[i].req_seen = atomic_load(&s->req.seq);
        mailbox.peers[i].rsp_seen = atomic_load(&s->rsp.seq);
    }
    pthread_mutex_init(&mailbox.lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_cond_init(&mailbox.cond, &ca);
    /* Inbound NTB traffic reaches our mailboxes through the IOMMU when it is on. */
    struct fab_host *h = fab_host(f, agent.host);
    if (h->iommu)
        for (uint32_t i = 0; i < h->nadapters; i++) {
            int rc = fab_iommu_map(f, agent.host, fab_adapter(f, h->adapter_first + i)->rid, 0, 0,
                                   FAB_MBOX_SIZE, FAB_PERM_READ | FAB_PERM_WRITE, 0);
            if (rc && rc != -EEXIST)
                return rc;
        }
    return 0;
}

int mbox_start(void)
{
    int rc = mbox_init();
    return rc ? rc : -pthread_create(&mailbox.thread, NULL, mbox_thread, NULL);
}

void mbox_stop(void)
{
    struct fab_host *h = fab_host(agent.f, agent.host);
    atomic_fetch_add(&h->agent_wake, 1);
    fab_futex_wake(&h->agent_wake, 1);
    pthread_join(mailbox.thread, NULL);
}
