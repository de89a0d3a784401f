/*
 * DMA queues and interrupts of the segment API (include/ntblend/seg.h).
 *
 * A DMA queue is a channel of the adapter's DMA engine; transfers name segments and offsets,
 * and become engine descriptors between bus addresses (a connected segment's is its window).
 * An interrupt is a page of the owner's RAM: triggering it from another host is an atomic
 * increment and a futex wake *through an NTB window* onto that page, so a trigger across a
 * downed link is lost like any other posted write.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "seg_int.h"
#include "wpol.h"

/* ---------------------------------------------------------------- DMA queues */

/* Outstanding transfers per queue: the emulated engine's ring depth. A shallower engine is
 * fine too: a full ring (-EAGAIN) reaps the oldest transfer first. */
#define QUEUE_MAX 256

struct seg_dma_queue {
    seg_desc_t *sd;
    struct ntb_dma_chan *ch;
    /* Held briefly around the cookie ring, never while waiting: one thread may queue while
     * another waits (seg.h). */
    pthread_mutex_t lock;
    int64_t cookies[QUEUE_MAX];
    unsigned head, tail; /* outstanding cookies */
    int first_err;
    int state;
    pthread_t cb_thread;
    bool cb_running;
};

int seg_dma_queue_create(seg_desc_t *sd, seg_dma_queue_t **out, int adapter)
{
    int rc;
    struct ntb_dev *ntb = seg_ntb(sd, adapter, &rc);
    if (!ntb)
        return rc;
    seg_dma_queue_t *q = calloc(1, sizeof *q);
    if (!q)
        return -ENOMEM;
    q->ch = ntb_dma_chan_request(ntb);
    if (!q->ch) {
        rc = -errno;
        free(q);
        return rc == -EBUSY ? -ENOSPC : rc;
    }
    q->sd = sd;
    q->state = SEG_DMA_IDLE;
    pthread_mutex_init(&q->lock, NULL);
    *out = q;
    return 0;
}

/* Wait for the oldest transfer: -ETIMEDOUT, else 0 with its status in *status (if given).
 * The wait is outside the lock; when two threads reap the same transfer, it is counted once. */
static int reap_one_status(seg_dma_queue_t *q, int timeout_ms, int *status)
{
    pthread_mutex_lock(&q->lock);
    if (q->tail == q->head) {
        pthread_mutex_unlock(&q->lock);
        if (status)
            *status = 0;
        return 0;
    }
    unsigned idx = q->tail;
    int64_t cookie = q->cookies[idx % QUEUE_MAX];
    pthread_mutex_unlock(&q->lock);
    int rc = ntb_dma_wait(q->ch, cookie, timeout_ms);
    if (rc == -ETIMEDOUT)
        return rc;
    pthread_mutex_lock(&q->lock);
    if (q->tail == idx) {
        q->tail++;
        if (rc && !q->first_err)
            q->first_err = rc;
    }
    pthread_mutex_unlock(&q->lock);
    if (status)
        *status = rc;
    return 0;
}

/* Everything reaped: the queue's state says how it went. */
static void settle(seg_dma_queue_t *q)
{
    pthread_mutex_lock(&q->lock);
    if (q->tail == q->head && q->state == SEG_DMA_POSTED)
        q->state = q->first_err == -ECANCELED ? SEG_DMA_ABORTED : q->first_err ? SEG_DMA_ERROR : SEG_DMA_DONE;
    pthread_mutex_unlock(&q->lock);
}

static bool queue_empty(seg_dma_queue_t *q)
{
    pthread_mutex_lock(&q->lock);
    bool e = q->tail == q->head;
    pthread_mutex_unlock(&q->lock);
    return e;
}

static int reap_one(seg_dma_queue_t *q, int timeout_ms) { return reap_one_status(q, timeout_ms, NULL); }

int seg_dma_transfer(seg_dma_queue_t *q, seg_local_t *local, size_t loff, seg_remote_t *remote,
                     size_t roff, size_t size, unsigned flags)
{
    if (!q || !local || !remote || !size || loff > local->size || size > local->size - loff ||
        roff > remote->size || size > remote->size - roff || (flags & ~SEG_DMA_FROM_REMOTE))
        return -EINVAL;
    if (q->cb_running)
        return -EBUSY;
    uint64_t l = local->phys + loff, r = seg_remote_bus(remote, roff);
    bool read = flags & SEG_DMA_FROM_REMOTE;
    pthread_mutex_lock(&q->lock);
    int64_t c = -EAGAIN;
    while (q->head - q->tail == QUEUE_MAX ||
           (c = ntb_dma_submit(q->ch, read ? l : r, read ? r : l, size, true)) == -EAGAIN) {
        /* Full (our ring or the engine's): the oldest transfer makes room. */
        pthread_mutex_unlock(&q->lock);
        int rc = reap_one(q, -1);
        if (rc)
            return rc;
        pthread_mutex_lock(&q->lock);
    }
    if (c >= 0) {
        if (q->head == q->tail)
            q->first_err = 0;
        q->cookies[q->head++ % QUEUE_MAX] = c;
        q->state = SEG_DMA_POSTED;
    }
    pthread_mutex_unlock(&q->lock);
    return c < 0 ? (int)c : 0;
}

int seg_dma_wait_first(seg_dma_queue_t *q, int timeout_ms)
{
    if (!q || q->cb_running)
        return -EINVAL;
    if (queue_empty(q))
        return -ENOENT;
    int status;
    if (reap_one_status(q, timeout_ms, &status))
        return -ETIMEDOUT;
    settle(q);
    return status;
}

int seg_dma_wait(seg_dma_queue_t *q, int timeout_ms)
{
    uint64_t deadline = seg_deadline(timeout_ms);
    while (!queue_empty(q)) {
        uint64_t now = ntb_backend()->now_ns();
        int left = deadline == UINT64_MAX ? -1 : now >= deadline ? 0 : (int)((deadline - now) / 1000000);
        if (reap_one(q, left))
            return -ETIMEDOUT;
    }
    settle(q);
    pthread_mutex_lock(&q->lock);
    int rc = q->first_err;
    pthread_mutex_unlock(&q->lock);
    return rc;
}

struct cb_job {
    seg_dma_queue_t *q;
    seg_dma_cb cb;
    void *arg;
};

static void *cb_thread(void *p)
{
    struct cb_job *j = p;
    int rc = seg_dma_wait(j->q, -1);
    j->q->cb_running = false;
    j->cb(j->q, rc, j->arg);
    free(j);
    return NULL;
}

int seg_dma_on_done(seg_dma_queue_t *q, seg_dma_cb cb, void *arg)
{
    if (!q || !cb || q->cb_running)
        return -EINVAL;
    struct cb_job *j = malloc(sizeof *j);
    if (!j)
        return -ENOMEM;
    *j = (struct cb_job){ q, cb, arg };
    if (q->cb_thread)
        pthread_join(q->cb_thread, NULL);
    q->cb_running = true;
    int rc = -pthread_create(&q->cb_thread, NULL, cb_thread, j);
    if (rc) {
        q->cb_running = false;
        q->cb_thread = 0;
        free(j);
    }
    return rc;
}

int seg_dma_abort(seg_dma_queue_t *q)
{
    ntb_dma_abort(q->ch);
    int rc = seg_dma_wait(q, -1);
    pthread_mutex_lock(&q->lock);
    if (q->tail == q->head)
        q->state = SEG_DMA_ABORTED;
    pthread_mutex_unlock(&q->lock);
    return rc == -ECANCELED ? 0 : rc;
}

int seg_dma_state(seg_dma_queue_t *q)
{
    /* Posted transfers may have finished since: look without waiting. */
    while (!queue_empty(q) && reap_one(q, 0) == 0)
        ;
    settle(q);
    pthread_mutex_lock(&q->lock);
    int st = q->state;
    pthread_mutex_unlock(&q->lock);
    return st;
}

void seg_dma_queue_remove(seg_dma_queue_t *q)
{
    if (!q)
        return;
    if (q->cb_thread)
        pthread_join(q->cb_thread, NULL);
    seg_dma_wait(q, -1);
    ntb_dma_chan_release(q->ch);
    pthread_mutex_destroy(&q->lock);
    free(q);
}

/* ---------------------------------------------------------------- interrupts */

struct seg_intr {
    seg_desc_t *sd;
    uint32_t id;
    struct seg_intr_page *page;
    uint32_t seen, dseen;
};

struct seg_rintr {
    seg_desc_t *sd;
    struct seg_intr_page *page;
    struct rt_window win; /* onto the owner's page; win.map NULL when the owner is here */
    uint32_t gen; /* the page's generation when we connected: it changes on remove */
};

int seg_intr_create(seg_desc_t *sd, seg_intr_t **out, uint32_t *id)
{
    if (!sd || !out || !id)
        return -EINVAL;
    seg_intr_t *it = calloc(1, sizeof *it);
    if (!it)
        return -ENOMEM;
    struct agent_rsp r;
    int rc = rt_call(sd->rt, AGENT_INTR_CREATE, *id, 0, &r);
    if (rc) {
        free(it);
        return rc;
    }
    it->sd = sd;
    it->id = (uint32_t)r.a;
    it->page = sd->rt->ops->ram(sd->rt, sd->rt->host, r.b, sizeof *it->page);
    if (!it->page) {
        rc = -errno;
        rt_call(sd->rt, AGENT_INTR_REMOVE, it->id, 0, NULL);
        free(it);
        return rc;
    }
    it->seen = atomic_load(&it->page->count);
    it->dseen = atomic_load(&it->page->head);
    *id = it->id;
    *out = it;
    return 0;
}

void seg_intr_remove(seg_intr_t *it)
{
    if (!it)
        return;
    rt_call(it->sd->rt, AGENT_INTR_REMOVE, it->id, 0, NULL);
    free(it);
}

int seg_intr_wait(seg_intr_t *it, int timeout_ms)
{
    uint64_t deadline = seg_deadline(timeout_ms);
    for (;;) {
        uint32_t c = atomic_load(&it->page->count);
        if (c != it->seen) {
            it->seen++; /* one trigger, one wake-up, and its slot (payload dropped) */
            it->dseen++;
            return 0;
        }
        if (seg_futex_wait_ms(&seg_intr_site, &it->page->count, c, deadline))
            return -ETIMEDOUT;
    }
}

int seg_intr_wait_data(seg_intr_t *it, void *data, size_t max, size_t *len, int timeout_ms)
{
    uint64_t deadline = seg_deadline(timeout_ms);
    for (;;) {
        uint32_t c = atomic_load(&it->page->count);
        /* More than SEG_INTR_SLOTS payloads behind: the oldest were overwritten. Skip to the
         * oldest one still held (and their wake-ups with them) rather than stall. */
        uint32_t head = atomic_load(&it->page->head);
        if (head - it->dseen > SEG_INTR_SLOTS) {
            uint32_t lost = head - SEG_INTR_SLOTS - it->dseen;
            it->dseen += lost;
            it->seen += lost;
        }
        typeof(it->page->slot[0]) *s = &it->page->slot[it->dseen % SEG_INTR_SLOTS];
        if (atomic_load_explicit(&s->seq, memory_order_acquire) == it->dseen + 1) {
            size_t n = s->len < max ? s->len : max;
            memcpy(data, s->data, n);
            if (len)
                *len = s->len;
            it->dseen++;
            it->seen++;
            return 0;
        }
        if (seg_futex_wait_ms(&seg_intr_site, &it->page->count, c, deadline))
            return -ETIMEDOUT;
    }
}

int seg_intr_connect(seg_desc_t *sd, seg_rintr_t **out, uint32_t node_id, uint32_t id, int adapter,
                     int timeout_ms)
{
    if (!sd || !out || adapter < 0)
        return -EINVAL;
    struct rt *rt = sd->rt;
    struct agent_rsp r;
    int rc;
    uint64_t deadline = seg_deadline(timeout_ms);
    struct wpol w;
    wpol_begin(&w, &seg_appear_site, &seg_appear_naps);
    for (;;) {
        struct agent_req q = { .op = AGENT_INTR_CONNECT, .flags = (uint32_t)adapter, .a = node_id, .b = id };
        rc = rt_request(rt, &q, &r);
        if (rc != -ENOENT || rt->ops->now_ns() >= deadline)
            break;
        wpol_pause(&w, 0);
    }
    wpol_end(&w);
    if (rc)
        return rc;
    seg_rintr_t *ri = calloc(1, sizeof *ri);
    if (!ri)
        return -ENOMEM;
    ri->sd = sd;
    uint32_t owner = (uint32_t)r.b;
    if (owner == rt->host) {
        ri->page = rt->ops->ram(rt, owner, r.a, sizeof *ri->page);
        if (!ri->page) {
            free(ri);
            return -EFAULT;
        }
    } else {
        int ai = rt->ops->adapter(rt, rt->host, adapter);
        rc = ai < 0 ? ai : rt_window_open(rt, (uint32_t)ai, owner, r.a, sizeof *ri->page, false, &ri->win);
        if (rc) {
            free(ri);
            return rc;
        }
        ri->page = (struct seg_intr_page *)ri->win.ptr;
    }
    ri->gen = atomic_load(&ri->page->gen);
    *out = ri;
    return 0;
}

void seg_intr_disconnect(seg_rintr_t *ri)
{
    if (!ri)
        return;
    rt_window_close(ri->sd->rt, &ri->win);
    free(ri);
}

/* The owner removed the interrupt (its page may serve a newer one by now): a stale connection
 * must not wake that one. A dead link reads all ones: then the trigger is lost anyway. */
static bool intr_gone(const seg_rintr_t *ri)
{
    uint32_t gen = atomic_load(&ri->page->gen);
    return gen != ri->gen && gen != UINT32_MAX;
}

static void trigger(seg_rintr_t *ri)
{
    /* The increment and the wake are writes through the window: across a dead link they land
     * in a private page and wake no one. */
    atomic_fetch_add(&ri->page->count, 1);
    ntb_backend()->wake(&ri->page->count, INT_MAX);
}

/* Every trigger takes the next slot (a plain one with no payload), so waits of either kind
 * consume triggers in order. */
int seg_intr_trigger(seg_rintr_t *ri)
{
    return seg_intr_trigger_data(ri, NULL, 0);
}

int seg_intr_trigger_data(seg_rintr_t *ri, const void *data, size_t len)
{
    if (len > SEG_INTR_DATA_MAX || (len && !data))
        return -EINVAL;
    if (intr_gone(ri))
        return -ENOENT;
    uint32_t i = atomic_fetch_add(&ri->page->head, 1);
    typeof(ri->page->slot[0]) *s = &ri->page->slot[i % SEG_INTR_SLOTS];
    if (len)
        memcpy(s->data, data, len);
    s->len = (uint32_t)len;
    atomic_store_explicit(&s->seq, i + 1, memory_order_release);
    trigger(ri);
    return 0;
}
