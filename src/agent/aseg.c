/*
 * Segments, the agent's part: the table of this host's segments, the connections other hosts
 * hold to them (over the NTB mailboxes), the connections this host's processes hold
 * elsewhere, the events those connections get, and what goes when a process hangs up.
 * Interrupts are in intr.c, segments created for other hosts in place.c.
 *
 * A segment's memory belongs to the agent, not to the process that created it: it is freed
 * only when the segment is removed *and* no connection is left, so nothing a stale mapping
 * writes can land in memory handed out again (quarantine).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "aseg_int.h"
#include "seg_shared.h"
#include "ntblend/seg.h"

struct seg_table segments = { .lock = PTHREAD_MUTEX_INITIALIZER };

struct fab_host *aseg_self(void) { return fab_host(agent.f, agent.host); }

/* Host index of a node id, or -1. */
int aseg_host_of_node(uint32_t node)
{
    for (uint32_t h = 0; h < agent.f->ctl->nhosts; h++)
        if (fab_host(agent.f, h)->node_id == node)
            return (int)h;
    return -1;
}

struct aseg *aseg_find(uint32_t id)
{
    for (struct aseg *s = segments.segs; s; s = s->next)
        if (s->id == id && !s->removed)
            return s;
    return NULL;
}

/* Our adapter (index on host) whose peer is the given global adapter, or -1. */
int aseg_adapter_facing(uint32_t remote_adapter)
{
    struct fab *f = agent.f;
    for (uint32_t i = 0; i < aseg_self()->nadapters; i++)
        if (fab_peer_index(f, aseg_self()->adapter_first + i, remote_adapter) >= 0)
            return (int)i;
    return -1;
}

/* Segment memory must cover whole LUT entries of any adapter that may map it, or a window
 * onto it would also expose its neighbours. */
uint64_t aseg_granule(void)
{
    struct fab *f = agent.f;
    uint64_t g = 4096;
    for (uint32_t i = 0; i < aseg_self()->nadapters; i++) {
        const struct fab_adapter *a = fab_adapter(f, aseg_self()->adapter_first + i);
        for (uint32_t p = 0; p < a->npeers; p++)
            if (fab_adapter(f, a->peers[p])->lut_size > g)
                g = fab_adapter(f, a->peers[p])->lut_size;
    }
    return g;
}

static void seg_free_memory(struct aseg *s)
{
    struct fab *f = agent.f;
    for (uint32_t i = 0; i < aseg_self()->nadapters; i++) {
        const struct fab_adapter *a = fab_adapter(f, aseg_self()->adapter_first + i);
        if (s->iommu_mapped & (1ull << i))
            fab_iommu_unmap(f, agent.host, a->rid, s->phys, s->size);
        if (aseg_self()->iommu && a->dma_channels)
            fab_iommu_unmap(f, agent.host, fab_dma_rid(a->index_on_host), s->phys, s->size);
    }
    amem_free(s->phys, SEG_OWNER);
}

/* Drop a removed segment whose last connection is gone. Called with the lock held. */
void aseg_reap(void)
{
    for (struct aseg **pp = &segments.segs; *pp;) {
        struct aseg *s = *pp;
        if (s->removed && s->nconn == 0) {
            *pp = s->next;
            seg_free_memory(s);
            free(s);
        } else {
            pp = &s->next;
        }
    }
}

uint32_t aseg_new_token(void)
{
    pthread_mutex_lock(&segments.lock);
    if (!++segments.next_token)
        ++segments.next_token;
    uint32_t t = segments.next_token;
    pthread_mutex_unlock(&segments.lock);
    return t;
}

/* ---------------------------------------------------------------- events */

void aseg_post_event(uint64_t event_phys, uint32_t ev)
{
    struct seg_event_word *w = fab_ram(agent.f, agent.host, event_phys, sizeof *w);
    if (!w)
        return;
    if (ev == SEG_EVENT_LOST || ev == SEG_EVENT_RESTORED)
        atomic_store(&w->lost, ev == SEG_EVENT_LOST);
    else
        atomic_store(&w->state, ev);
    uint32_t h = atomic_load(&w->head);
    w->ring[h % SEG_EVENT_RING] = ev;
    atomic_store(&w->head, h + 1);
    atomic_fetch_add(&w->seq, 1);
    fab_futex_wake(&w->seq, INT_MAX);
}

/* Tell every host connected to segment s (outside the lock: mailbox calls block). */
static void notify_connections(struct aseg *s, uint32_t ev)
{
    struct { uint32_t host, conn; } to[256];
    size_t n = 0;
    pthread_mutex_lock(&segments.lock);
    for (struct conn_in *c = segments.in; c; c = c->next) {
        if (c->seg != s)
            continue;
        if (c->from_host != agent.host) {
            if (n < 256)
                to[n++] = (typeof(to[0])){ c->from_host, c->conn_id };
            continue;
        }
        /* A process on this host: no mailbox to go through, its event word is ours. */
        for (struct conn_out *o = segments.out; o; o = o->next)
            if (o->owner_host == agent.host && o->conn_id == c->conn_id)
                aseg_post_event(o->event_phys, ev);
    }
    pthread_mutex_unlock(&segments.lock);
    for (size_t i = 0; i < n; i++) {
        struct seg_note note = { .conn_id = to[i].conn, .event = ev };
        mbox_call(to[i].host, MBOX_SEG_NOTIFY, &note, sizeof note, NULL, 0, NULL,
                  NOTIFY_TIMEOUT_MS);
    }
}

/* Does a connection of client, or a segment it watches, post its events into [phys,
 * phys+len)? Lock held. */
static bool events_in(int32_t client, uint64_t phys, uint64_t len)
{
    for (struct conn_out *c = segments.out; c; c = c->next)
        if (c->client == client && c->event_phys < phys + len &&
            c->event_phys + sizeof(struct seg_event_word) > phys)
            return true;
    for (struct aseg *s = segments.segs; s; s = s->next)
        if (s->creator == client && s->events && s->events < phys + len &&
            s->events + sizeof(struct seg_conn_events) > phys)
            return true;
    return false;
}

bool aseg_events_in(int32_t client, uint64_t phys, uint64_t len)
{
    pthread_mutex_lock(&segments.lock);
    bool in = events_in(client, phys, len);
    pthread_mutex_unlock(&segments.lock);
    return in;
}

/* ---------------------------------------------------------------- owner side */

int aseg_create(int32_t client, uint32_t id, uint64_t size, uint64_t attach, uint64_t *out_id,
                uint64_t *phys, uint64_t *out_size)
{
    if (!size)
        return -EINVAL;
    int rc = 0;
    pthread_mutex_lock(&segments.lock);
    if (id == 0) {
        for (id = 1; aseg_find(id); id++)
            ;
    } else if (aseg_find(id)) {
        rc = -EEXIST;
        goto out;
    }
    uint64_t g = aseg_granule(), p;
    uint64_t len = (size + g - 1) & ~(g - 1);
    if (attach && events_in(client, attach, len)) {
        rc = -EBUSY; /* a connection's event word is in it: disconnect first */
        goto out;
    }
    if (attach) {
        /* The process hands one of its own allocations over to the segment. */
        rc = amem_retag(attach, size, client, SEG_OWNER, &len);
        p = attach;
    } else {
        rc = amem_alloc(len, g, SEG_OWNER, &p);
    }
    if (rc)
        goto out;
    struct aseg *s = calloc(1, sizeof *s);
    if (!s) {
        amem_free(p, SEG_OWNER);
        rc = -ENOMEM;
        goto out;
    }
    *s = (struct aseg){ .next = segments.segs, .id = id, .phys = p, .size = len, .user_size = size,
                        .creator = client };
    segments.segs = s;
    /* The adapters' DMA engines reach local segments through the IOMMU when it is on. */
    struct fab *f = agent.f;
    for (uint32_t i = 0; i < aseg_self()->nadapters && aseg_self()->iommu; i++) {
        const struct fab_adapter *a = fab_adapter(f, aseg_self()->adapter_first + i);
        if (a->dma_channels)
            fab_iommu_map(f, agent.host, fab_dma_rid(a->index_on_host), p, p, len,
                          FAB_PERM_READ | FAB_PERM_WRITE, 0);
    }
    *out_id = id;
    *phys = p;
    *out_size = len;
out:
    pthread_mutex_unlock(&segments.lock);
    return rc;
}

static struct aseg *own_seg(int32_t client, uint32_t id, int *rc)
{
    struct aseg *s = aseg_find(id);
    *rc = !s ? -ENOENT : s->creator != client ? -EPERM : 0;
    return *rc ? NULL : s;
}

int aseg_prepare(int32_t client, uint32_t id, uint32_t adapter)
{
    if (adapter >= aseg_self()->nadapters)
        return -ENODEV;
    int rc;
    pthread_mutex_lock(&segments.lock);
    struct aseg *s = own_seg(client, id, &rc);
    if (s)
        s->prepared |= 1ull << adapter;
    pthread_mutex_unlock(&segments.lock);
    return rc;
}

int aseg_available(int32_t client, uint32_t id, uint32_t adapter, bool on)
{
    if (adapter >= aseg_self()->nadapters)
        return -ENODEV;
    int rc;
    pthread_mutex_lock(&segments.lock);
    struct aseg *s = own_seg(client, id, &rc);
    bool changed = false;
    if (s && !(s->prepared & (1ull << adapter)))
        rc = -EPROTO; /* prepare it on the adapter first */
    else if (s) {
        changed = !!(s->available & (1ull << adapter)) != on;
        s->available = on ? s->available | (1ull << adapter) : s->available & ~(1ull << adapter);
    }
    pthread_mutex_unlock(&segments.lock);
    if (!rc && changed)
        notify_connections(s, on ? SEG_EVENT_AVAILABLE : SEG_EVENT_UNAVAILABLE);
    return rc;
}

int aseg_remove(int32_t client, uint32_t id)
{
    int rc;
    pthread_mutex_lock(&segments.lock);
    struct aseg *s = own_seg(client, id, &rc);
    if (s) {
        s->removed = true;
        s->available = 0;
        s->events = 0; /* the creator frees the page once this returns */
    }
    pthread_mutex_unlock(&segments.lock);
    if (rc)
        return rc;
    notify_connections(s, SEG_EVENT_REMOVED); /* s lives on while connections hold it */
    pthread_mutex_lock(&segments.lock);
    aseg_reap();
    pthread_mutex_unlock(&segments.lock);
    return 0;
}

/* The checks and bookkeeping of a connection to our segment `id` from `from_host`, entering
 * through our adapter `via` (-1: a process on this host), made by the connector's request
 * `token` (0: none). */
static int accept_connection(uint32_t id, uint32_t from_host, uint32_t from_boot, int via,
                             uint32_t from_adapter, uint32_t token, struct seg_rsp *rsp)
{
    struct aseg *s = aseg_find(id);
    if (!s)
        return -ENOENT;
    /* The same request once more (a mailbox message read twice): the same connection, not a
     * second one that nobody would ever disconnect. */
    for (const struct conn_in *c = segments.in; token && c; c = c->next)
        if (c->token == token && c->from_host == from_host && c->from_boot == from_boot &&
            c->seg == s) {
            *rsp = (struct seg_rsp){ .bus = s->phys, .size = s->user_size, .conn_id = c->conn_id };
            return 0;
        }
    if (via >= 0 && !(s->available & (1ull << via)))
        return -ECONNREFUSED;
    if (via < 0 && !s->available)
        return -ECONNREFUSED;
    struct fab *f = agent.f;
    uint32_t held = 0;
    for (const struct conn_in *c = segments.in; c; c = c->next)
        held += c->from_host == from_host;
    if (held >= SEG_CONN_PER_HOST)
        return -EUSERS; /* a peer cannot grow our memory without bound */
    if (via >= 0 && aseg_self()->iommu && !(s->iommu_mapped & (1ull << via))) {
        /* Inbound NTB traffic carries the adapter's requester ID: map the segment there. */
        int rc = fab_iommu_map(f, agent.host, fab_adapter(f, aseg_self()->adapter_first + (uint32_t)via)->rid,
                               s->phys, s->phys, s->size, FAB_PERM_READ | FAB_PERM_WRITE, 0);
        if (rc && rc != -EEXIST)
            return rc;
        s->iommu_mapped |= 1ull << via;
    }
    struct conn_in *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    *c = (struct conn_in){ .next = segments.in, .conn_id = ++segments.next_conn, .seg = s,
                           .from_host = from_host, .from_boot = from_boot, .token = token,
                           .via = via < 0 ? UINT32_MAX : (uint32_t)via,
                           .from_adapter = from_adapter };
    segments.in = c;
    s->nconn++;
    aseg_post_conn(s, c, SEG_EVENT_CONNECT);
    *rsp = (struct seg_rsp){ .bus = s->phys, .size = s->user_size, .conn_id = c->conn_id };
    return 0;
}

static int drop_connection(uint32_t from_host, uint32_t conn_id)
{
    for (struct conn_in **pp = &segments.in; *pp; pp = &(*pp)->next) {
        struct conn_in *c = *pp;
        if (c->conn_id != conn_id || c->from_host != from_host)
            continue;
        *pp = c->next;
        c->seg->nconn--;
        aseg_post_conn(c->seg, c, SEG_EVENT_DISCONNECT);
        free(c);
        aseg_reap();
        return 0;
    }
    return -ENOENT;
}

static int h_seg_connect(uint32_t from, const void *req, uint32_t len,
                         void *rsp, uint32_t *rsp_len)
{
    struct seg_req r = { 0 };
    if (len < SEG_REQ_MIN)
        return -EINVAL;
    memcpy(&r, req, len < sizeof r ? len : sizeof r);
    /* Sent by a previous life of the peer (it has rebooted since): it acts no more. */
    const struct fab_host *fh = fab_host(agent.f, from);
    if (atomic_load(&fh->state) == FAB_HOST_DOWN || atomic_load(&fh->boot_gen) != r.boot_gen)
        return -ESTALE;
    int via = aseg_adapter_facing(r.from_adapter);
    if (via < 0)
        return -EHOSTUNREACH;
    struct seg_rsp out;
    pthread_mutex_lock(&segments.lock);
    int rc = accept_connection(r.id, from, r.boot_gen, via, r.from_adapter, r.token, &out);
    pthread_mutex_unlock(&segments.lock);
    if (!rc) {
        memcpy(rsp, &out, sizeof out);
        *rsp_len = sizeof out;
    }
    return rc;
}

static int h_seg_disconnect(uint32_t from, const void *req, uint32_t len,
                            void *rsp, uint32_t *rsp_len)
{
    struct seg_note n;
    if (len < sizeof n)
        return -EINVAL;
    memcpy(&n, req, sizeof n);
    pthread_mutex_lock(&segments.lock);
    int rc = drop_connection(from, n.conn_id);
    pthread_mutex_unlock(&segments.lock);
    return rc;
}

/* The connector never learnt whether its request `token` connected (the answer was lost): if
 * it did, that connection goes. The same for a segment a host asked us to create (place.c). */
static int h_seg_cancel(uint32_t from, const void *req, uint32_t len,
                        void *rsp, uint32_t *rsp_len)
{
    struct seg_cancel n;
    if (len < sizeof n)
        return -EINVAL;
    memcpy(&n, req, sizeof n);
    if (!n.token)
        return -EINVAL;
    int rc = -ENOENT;
    pthread_mutex_lock(&segments.lock);
    for (const struct conn_in *c = segments.in; c; c = c->next)
        if (c->from_host == from && c->from_boot == n.boot_gen && c->token == n.token) {
            rc = drop_connection(from, c->conn_id);
            break;
        }
    if (rc == -ENOENT)
        rc = aplace_cancel(from, n.token);
    pthread_mutex_unlock(&segments.lock);
    return rc;
}

/* ---------------------------------------------------------------- connector side */

static int h_seg_notify(uint32_t from, const void *req, uint32_t len,
                        void *rsp, uint32_t *rsp_len)
{
    struct seg_note n;
    if (len < sizeof n)
        return -EINVAL;
    memcpy(&n, req, sizeof n);
    int rc = -ENOENT;
    pthread_mutex_lock(&segments.lock);
    for (struct conn_out *c = segments.out; c; c = c->next)
        if (c->owner_host == from && c->conn_id == n.conn_id) {
            aseg_post_event(c->event_phys, n.event);
            rc = 0;
        }
    pthread_mutex_unlock(&segments.lock);
    return rc;
}

int aseg_connect(int32_t client, uint32_t adapter, uint32_t node, uint32_t id,
                 uint64_t event_phys, uint64_t *bus, uint64_t *size, uint64_t *conn)
{
    struct fab *f = agent.f;
    int owner = aseg_host_of_node(node);
    if (owner < 0)
        return -EHOSTUNREACH;
    /* The agent writes the connection's events there: only into memory of the client's own,
     * never into the mailboxes, another process's memory or a segment. */
    if (!amem_owned(event_phys, sizeof(struct seg_event_word), client, NULL, NULL))
        return -EINVAL;
    /* Before asking: a reboot of the owner while we ask leaves the connection gone at once. */
    uint32_t owner_boot = atomic_load(&fab_host(f, (uint32_t)owner)->boot_gen);
    struct seg_rsp r;
    int rc;
    uint32_t ai = 0, peer = 0;
    if ((uint32_t)owner == agent.host) {
        pthread_mutex_lock(&segments.lock);
        rc = accept_connection(id, agent.host, atomic_load(&aseg_self()->boot_gen), -1, UINT32_MAX,
                               0, &r);
        pthread_mutex_unlock(&segments.lock);
    } else {
        if (adapter >= aseg_self()->nadapters)
            return -ENODEV;
        ai = aseg_self()->adapter_first + adapter;
        int p = fab_peer_on(f, ai, (uint32_t)owner);
        /* Our agents may reach each other over another path (two adapters per host): this
         * adapter's own path must work, or the connection would read all ones from the start. */
        if (p < 0 || !fab_path_up(f, ai, (uint32_t)p, NULL))
            return -EHOSTUNREACH;
        peer = (uint32_t)p;
        struct seg_req q = { .id = id, .from_adapter = ai, .boot_gen = atomic_load(&aseg_self()->boot_gen) };
        q.token = aseg_new_token();
        uint32_t got = 0;
        bool posted;
        rc = mbox_call_posted((uint32_t)owner, MBOX_SEG_CONNECT, &q, sizeof q, &r, sizeof r, &got,
                              1000, &posted);
        if (!rc && got != sizeof r)
            rc = -EPROTO;
        /* Asked, but no answer (the link went down on the way, or the owner was slow): it may
         * hold a connection for us that nobody knows of. It goes once the owner hears of it. */
        if (posted && (aseg_unanswered(rc) || rc == -EPROTO)) {
            struct seg_cancel n = { .token = q.token, .boot_gen = q.boot_gen };
            aseg_defer((uint32_t)owner, owner_boot, MBOX_SEG_CANCEL, &n, sizeof n);
        }
        if (aseg_unanswered(rc))
            rc = -EHOSTUNREACH;
    }
    if (rc)
        return rc;
    struct conn_out *c = calloc(1, sizeof *c);
    if (!c) {
        if ((uint32_t)owner != agent.host) {
            struct seg_note n = { .conn_id = r.conn_id };
            aseg_defer((uint32_t)owner, owner_boot, MBOX_SEG_DISCONNECT, &n, sizeof n);
        } else {
            pthread_mutex_lock(&segments.lock);
            drop_connection(agent.host, r.conn_id);
            pthread_mutex_unlock(&segments.lock);
        }
        return -ENOMEM;
    }
    *c = (struct conn_out){ .owner_host = (uint32_t)owner, .conn_id = r.conn_id, .client = client,
                            .event_phys = event_phys, .adapter = ai, .peer_adapter = peer,
                            .owner_boot = owner_boot };
    struct seg_event_word *w = fab_ram(f, agent.host, event_phys, sizeof *w);
    atomic_store(&w->state, SEG_EVENT_AVAILABLE);
    pthread_mutex_lock(&segments.lock);
    c->next = segments.out;
    segments.out = c;
    pthread_mutex_unlock(&segments.lock);
    *bus = r.bus;
    *size = r.size;
    *conn = (uint64_t)owner << 32 | r.conn_id;
    return 0;
}

int aseg_disconnect(int32_t client, uint32_t owner, uint32_t conn_id)
{
    struct conn_out *found = NULL;
    pthread_mutex_lock(&segments.lock);
    for (struct conn_out **pp = &segments.out; *pp; pp = &(*pp)->next)
        if ((*pp)->owner_host == owner && (*pp)->conn_id == conn_id && (*pp)->client == client) {
            found = *pp;
            *pp = found->next;
            break;
        }
    int rc = found ? 0 : -ENOENT;
    if (found && owner == agent.host)
        drop_connection(owner, conn_id);
    pthread_mutex_unlock(&segments.lock);
    if (found && owner != agent.host) {
        struct seg_note n = { .conn_id = conn_id };
        /* If the owner cannot be told now (the link is down), it is told once it can be: it
         * holds the segment's memory while the connection lasts. A connection to a previous
         * life of the owner's went with it. */
        int r = mbox_call(owner, MBOX_SEG_DISCONNECT, &n, sizeof n, NULL, 0, NULL,
                          NOTIFY_TIMEOUT_MS);
        if (aseg_unanswered(r) && !found->gone)
            aseg_defer(owner, found->owner_boot, MBOX_SEG_DISCONNECT, &n, sizeof n);
    }
    free(found);
    return rc;
}

/* ---------------------------------------------------------------- lifetime */

/* A process hung up: its connections are closed, its segments removed, its interrupts freed. */
void aseg_client_gone(int32_t client)
{
    if (client > 0)
        aplace_client_gone(client);
    for (;;) {
        uint32_t owner = 0, conn = 0;
        bool any = false;
        pthread_mutex_lock(&segments.lock);
        for (struct conn_out *c = segments.out; c; c = c->next)
            if (c->client == client) {
                owner = c->owner_host;
                conn = c->conn_id;
                any = true;
                break;
            }
        pthread_mutex_unlock(&segments.lock);
        if (!any)
            break;
        aseg_disconnect(client, owner, conn);
    }
    for (;;) {
        uint32_t id = 0;
        pthread_mutex_lock(&segments.lock);
        for (struct aseg *s = segments.segs; s; s = s->next)
            if (s->creator == client && !s->removed) {
                id = s->id;
                break;
            }
        pthread_mutex_unlock(&segments.lock);
        if (!id)
            break;
        aseg_remove(client, id);
    }
    pthread_mutex_lock(&segments.lock);
    for (struct aintr *i = segments.intrs; i; i = i->next)
        if (i->creator == client)
            aintr_retire(i);
    pthread_mutex_unlock(&segments.lock);
}

/* Reachability changed somewhere: tell our connections whose path went down or came back, and
 * forget connections from hosts that rebooted (their windows were reset with them). */
void aseg_sweep(void)
{
    struct fab *f = agent.f;
    pthread_mutex_lock(&segments.lock);
    for (struct conn_out *c = segments.out; c; c = c->next) {
        if (c->owner_host == agent.host || c->gone)
            continue;
        bool up = fab_path_up(f, c->adapter, c->peer_adapter, NULL);
        if (up == c->lost) {
            c->lost = !up;
            aseg_post_event(c->event_phys, up ? SEG_EVENT_RESTORED : SEG_EVENT_LOST);
        }
        /* Back, but rebooted: the segment went with the owner's memory, however briefly it
         * was away (a reboot between two sweeps shows no path down). */
        if (up && atomic_load(&fab_host(f, c->owner_host)->boot_gen) != c->owner_boot) {
            c->gone = true;
            aseg_post_event(c->event_phys, SEG_EVENT_REMOVED);
        }
    }
    for (struct conn_in *c = segments.in, *next; c; c = next) {
        next = c->next;
        struct fab_host *h = fab_host(f, c->from_host);
        if (c->from_host != agent.host &&
            (atomic_load(&h->state) == FAB_HOST_DOWN || atomic_load(&h->boot_gen) != c->from_boot))
            drop_connection(c->from_host, c->conn_id);
    }
    aseg_watch_paths();
    pthread_mutex_unlock(&segments.lock);
}

void aseg_defer(uint32_t host, uint32_t boot, uint32_t type, const void *msg, uint32_t len)
{
    struct seg_deferred *d = calloc(1, sizeof *d);
    if (!d || len > sizeof d->msg) {
        free(d); /* then the peer holds it until we reboot, as without this */
        return;
    }
    *d = (struct seg_deferred){ .host = host, .boot = boot, .type = type, .len = len };
    memcpy(d->msg, msg, len);
    pthread_mutex_lock(&segments.lock);
    struct seg_deferred **pp = &segments.deferred;
    while (*pp)
        pp = &(*pp)->next;
    *pp = d; /* in order: a few at most, while a link is down */
    pthread_mutex_unlock(&segments.lock);
}

/* Send what was deferred (struct seg_deferred), in the order it was deferred; what still gets
 * no answer stays for the next pass, and so does the rest for a host that did not answer.
 * Link watcher only: it calls the mailboxes. Return: whether something stays. */
static bool seg_send_deferred(void)
{
    struct fab *f = agent.f;
    pthread_mutex_lock(&segments.lock);
    struct seg_deferred *todo = segments.deferred;
    segments.deferred = NULL;
    pthread_mutex_unlock(&segments.lock);
    struct seg_deferred *keep = NULL, **tail = &keep;
    uint64_t unanswered = 0; /* hosts (below 64) not answering in this pass: skip their rest */
    while (todo) {
        struct seg_deferred *d = todo;
        todo = d->next;
        d->next = NULL;
        const struct fab_host *h = fab_host(f, d->host);
        bool stale = atomic_load(&h->state) == FAB_HOST_DOWN || atomic_load(&h->boot_gen) != d->boot;
        bool skip = atomic_load(&agent.stop) || (d->host < 64 && (unanswered & (1ull << d->host)));
        int rc = stale || skip ? 0
                               : mbox_call(d->host, d->type, d->msg, d->len, NULL, 0, NULL,
                                           NOTIFY_TIMEOUT_MS);
        if (skip || aseg_unanswered(rc)) {
            if (d->host < 64)
                unanswered |= 1ull << d->host;
            *tail = d;
            tail = &d->next;
        } else {
            free(d); /* done, or refused: either way nothing is left to release */
        }
    }
    pthread_mutex_lock(&segments.lock);
    *tail = segments.deferred; /* what was deferred meanwhile comes after */
    segments.deferred = keep;
    bool more = segments.deferred != NULL;
    pthread_mutex_unlock(&segments.lock);
    return more;
}

/* Sweeps when reachability changes, and sends what was deferred: then, and every so often
 * while something waits (an owner that was only slow answers a little later; a deferral made
 * just after a link came back is sent within a second). */
static void *link_watcher(void *arg)
{
    static struct wpol_site site = WPOL_SITE("agent link watcher", 0, 0); /* sleeps only */
    if (!aseg_self()->nadapters)
        return NULL;
    _Atomic uint32_t *seq = &fab_adapter(agent.f, aseg_self()->adapter_first)->link_seq;
    while (!atomic_load(&agent.stop)) {
        uint32_t now = atomic_load(seq);
        aseg_sweep();
        bool more = seg_send_deferred();
        agent_wait_word(&site, seq, now, more ? 200000000ull : 1000000000ull);
    }
    return NULL;
}

void aseg_register(void)
{
    mbox_register(MBOX_SEG_CONNECT, h_seg_connect);
    mbox_register(MBOX_SEG_DISCONNECT, h_seg_disconnect);
    mbox_register(MBOX_SEG_NOTIFY, h_seg_notify);
    mbox_register(MBOX_SEG_CANCEL, h_seg_cancel);
    aintr_register();
    aplace_register();
    adevseg_register();
}

int aseg_start(void)
{
    aseg_register();
    return -pthread_create(&segments.watcher, NULL, link_watcher, NULL);
}

void aseg_stop(void)
{
    if (!fab_host(agent.f, agent.host)->nadapters)
        return;
    _Atomic uint32_t *seq = &fab_adapter(agent.f, fab_host(agent.f, agent.host)->adapter_first)->link_seq;
    atomic_fetch_add(seq, 1);
    fab_futex_wake(seq, INT_MAX);
    pthread_join(segments.watcher, NULL);
}

