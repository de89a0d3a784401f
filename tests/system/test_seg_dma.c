/*
 * The segment API's data movers and signals between two hosts back to back
 * (examples/topologies/two-hosts.ini: a = node 4, b = node 8): DMA queues in both directions,
 * completion callbacks, timeouts and abort; remote interrupts and data interrupts; sequences
 * across link failures and an owner reboot; DMA by a host whose IOMMU is on
 * (tests/system/topologies/iommu-pair.ini).
 *
 * Where a test needs the DMA engine to hold still (a timeout, an abort), the parent stops the
 * host's agent (which runs the engine) with SIGSTOP and continues it once the state it waits for
 * is visible in the fabric: no sleeps, no timing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dirent.h>
#include <pthread.h>
#include <semaphore.h>
#include <string.h>

#include "fixture.h"
#include "seg_util.h"
#include "seg_pair.h"
#include "fabric.h"
#include "ntblend/ntb.h"
#include "ntblend/seg.h"

static struct fx FX;
#define NODE_A 4u
#define NODE_B 8u
#define KIB 1024u
#define MIB (1024u * 1024u)

static const struct fx_opts FX_OPTS = { .topo = "examples/topologies/two-hosts.ini" };
static int setup(void **state) { return fx_setup(state, &FX, "segdma", &FX_OPTS); }

/* ---------------------------------------------------------------- helpers (children) */

/* A completion callback that records its status and posts a semaphore. */
struct done {
    sem_t sem;
    _Atomic int status, calls;
    seg_dma_queue_t *q;
};

static void on_done(seg_dma_queue_t *q, int status, void *arg)
{
    struct done *d = arg;
    d->q = q;
    atomic_store(&d->status, status);
    atomic_fetch_add(&d->calls, 1);
    sem_post(&d->sem);
}

static int done_wait(struct done *d)
{
    while (sem_wait(&d->sem) < 0 && errno == EINTR)
        ;
    return atomic_load(&d->status);
}

/* ---------------------------------------------------------------- helpers (parent) */

static struct fab *attach(const char *fab)
{
    struct fab *f = NULL;
    assert_int_equal(fab_attach(fab, -1, &f), 0);
    return f;
}

/* Has every thread of process pid stopped (state T)? */
static bool all_stopped(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    assert_non_null(d);
    bool stopped = true;
    struct dirent *e;
    while (stopped && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char stat[384], buf[512];
        snprintf(stat, sizeof stat, "%s/%s/stat", path, e->d_name);
        FILE *fp = fopen(stat, "r");
        if (!fp)
            continue; /* the thread is gone */
        size_t n = fread(buf, 1, sizeof buf - 1, fp);
        fclose(fp);
        buf[n] = 0;
        const char *st = strrchr(buf, ')'); /* "pid (comm) S ..." */
        stopped = st && st[1] == ' ' && (st[2] == 'T' || st[2] == 't');
    }
    closedir(d);
    return stopped;
}

/* Stop / continue the agent of `host`: its DMA engines hold still meanwhile. A stop returns
 * once every thread of the agent has stopped. */
static void agent_signal(struct fab *f, const char *host, int sig)
{
    pid_t pid = atomic_load(&fab_host(f, (uint32_t)fab_host_by_name(f, host))->agent_pid);
    assert_true(pid > 0);
    assert_int_equal(kill(pid, sig), 0);
    while (sig == SIGSTOP && !all_stopped(pid))
        sched_yield();
}

/* The DMA channel of `adapter` that process `pid` holds. */
static struct fab_dma_chan *chan_of(struct fab *f, const char *adapter, pid_t pid)
{
    struct fab_adapter *a = fab_adapter(f, (uint32_t)fab_adapter_by_name(f, adapter));
    for (uint32_t c = 0; c < a->dma_channels; c++)
        if (atomic_load(&fab_dma(f, a)[c].owner_pid) == pid)
            return &fab_dma(f, a)[c];
    fail_msg("process %d holds no DMA channel on %s", (int)pid, adapter);
    return NULL;
}

struct cli_job {
    const char *fab, *cmd;
    int rc;
};

static void *cli_thread(void *arg)
{
    struct cli_job *j = arg;
    j->rc = h_cli(j->fab, "%s", j->cmd);
    return NULL;
}

/* Run a CLI command that kills the application `victim` (host kill), reaping it meanwhile: the
 * fabric waits for every live process to acknowledge the change, and an unreaped child is a
 * zombie that never would. Returns the victim's exit status. */
static int cli_killing(const char *fab, const char *cmd, struct h_proc *victim)
{
    struct cli_job j = { fab, cmd, -1 };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, cli_thread, &j), 0);
    int st = h_join(victim);
    pthread_join(t, NULL);
    assert_int_equal(j.rc, 0);
    return st;
}

/* ---------------------------------------------------------------- DMA both ways */

#define RSEG (1u * MIB)
#define LSEG (2u * MIB)

static void dma_owner(void *arg)
{
    seg_desc_t *sd = sd_open();
    seg_local_t *r = export_seg(sd, 1, RSEG);
    seg_map_t *m;
    volatile uint8_t *p = map_local(r, &m);
    fill(p, RSEG, 11);
    h_put(1);
    h_get(); /* the connector wrote 512 KiB at 256 KiB */
    expect_pat(p, 256 * KIB, 11);
    expect_pat(p + 256 * KIB, 512 * KIB, 12);
    for (size_t i = 768 * KIB; i < RSEG; i++)
        CHECK_EQ(p[i], pat(11, i));
    owner_finish(sd, r, m);
}

static void dma_user(void *arg)
{
    seg_desc_t *sd = sd_open();
    seg_local_t *l;
    seg_map_t *m;
    volatile uint8_t *p = local_segment(sd, 2, LSEG, &l, &m);
    fill(p, 512 * KIB, 12);
    h_get();
    seg_remote_t *r;
    CHECK_EQ(seg_connect(sd, &r, NODE_B, 1, 0, 5000), 0);
    seg_dma_queue_t *q;
    CHECK_EQ(seg_dma_queue_create(sd, &q, 0), 0);
    CHECK_EQ(seg_dma_state(q), SEG_DMA_IDLE);
    CHECK_EQ(seg_dma_queue_create(sd, &q, 7), -ENODEV);
    /* Local -> remote, remote -> local, and the written range read back: one queue runs in
     * order, so the last read sees the first write. */
    CHECK_EQ(seg_dma_transfer(q, l, 0, r, 256 * KIB, 512 * KIB, 0), 0);
    CHECK_EQ(seg_dma_transfer(q, l, 1 * MIB, r, 0, 256 * KIB, SEG_DMA_FROM_REMOTE), 0);
    CHECK_EQ(seg_dma_transfer(q, l, 1536 * KIB, r, 256 * KIB, 512 * KIB, SEG_DMA_FROM_REMOTE), 0);
    CHECK_EQ(seg_dma_wait(q, 20000), 0);
    CHECK_EQ(seg_dma_state(q), SEG_DMA_DONE);
    expect_pat(p + 1 * MIB, 256 * KIB, 11);
    expect_pat(p + 1536 * KIB, 512 * KIB, 12);
    expect_pat(p, 512 * KIB, 12); /* the source is untouched */
    /* Out of range, empty, unknown flags: refused before anything is queued. */
    CHECK_EQ(seg_dma_transfer(q, l, 0, r, RSEG - 4096, 8192, 0), -EINVAL);
    CHECK_EQ(seg_dma_transfer(q, l, LSEG - 4096, r, 0, 8192, 0), -EINVAL);
    CHECK_EQ(seg_dma_transfer(q, l, 0, r, 0, 0, 0), -EINVAL);
    CHECK_EQ(seg_dma_transfer(q, l, 0, r, 0, 4096, 0x10), -EINVAL);
    CHECK_EQ(seg_dma_state(q), SEG_DMA_DONE);
    h_put(1);
    h_get(); /* the owner checked */
    /* More transfers than the engine's ring holds: 300 writes of 2 KiB, then 300 reads. */
    fill(p, 600 * KIB, 13);
    for (size_t i = 0; i < 300; i++)
        CHECK_EQ(seg_dma_transfer(q, l, i * 2 * KIB, r, i * 2 * KIB, 2 * KIB, 0), 0);
    for (size_t i = 0; i < 300; i++)
        CHECK_EQ(seg_dma_transfer(q, l, 1 * MIB + i * 2 * KIB, r, i * 2 * KIB, 2 * KIB,
                                  SEG_DMA_FROM_REMOTE), 0);
    CHECK_EQ(seg_dma_wait(q, 20000), 0);
    expect_pat(p + 1 * MIB, 600 * KIB, 13);
    seg_dma_queue_remove(q);
    seg_unmap(m);
    CHECK_EQ(seg_disconnect(r), 0);
    seg_remove(l);
    seg_close(sd);
    h_put(1);
}

static void test_dma_both_directions(void **state)
{
    struct seg_pair p = pair_start(FX.name, dma_owner, dma_user);
    pair_exchange(&p, 1);
    pair_finish(&p);
}

/* ---------------------------------------------------------------- callbacks, errors, limits */

static void cb_owner(void *arg)
{
    seg_desc_t *sd = sd_open();
    seg_local_t *r = export_seg(sd, 3, 256 * KIB);
    seg_map_t *m;
    volatile uint8_t *p = map_local(r, &m);
    h_put(1);
    h_get();
    expect_pat(p, 64 * KIB, 21);          /* before the link went down */
    expect_byte(p + 64 * KIB, 64 * KIB, 0); /* while it was down: nothing */
    expect_pat(p + 128 * KIB, 64 * KIB, 22); /* after it came back */
    owner_finish(sd, r, m);
}

static void cb_user(void *arg)
{
    seg_desc_t *sd = sd_open();
    seg_local_t *l;
    seg_map_t *m;
    volatile uint8_t *p = local_segment(sd, 4, 256 * KIB, &l, &m);
    h_get();
    seg_remote_t *r;
    CHECK_EQ(seg_connect(sd, &r, NODE_B, 3, 0, 5000), 0);
    seg_dma_queue_t *q;
    CHECK_EQ(seg_dma_queue_create(sd, &q, 0), 0);
    struct done d;
    sem_init(&d.sem, 0, 0);
    atomic_store(&d.calls, 0);
    /* A callback instead of a wait. */
    fill(p, 64 * KIB, 21);
    CHECK_EQ(seg_dma_transfer(q, l, 0, r, 0, 64 * KIB, 0), 0);
    CHECK_EQ(seg_dma_on_done(q, on_done, &d), 0);
    CHECK_EQ(done_wait(&d), 0);
    CHECK(d.q == q);
    CHECK_EQ(seg_dma_state(q), SEG_DMA_DONE);
    /* Nothing queued: called back at once, with success. */
    CHECK_EQ(seg_dma_on_done(q, on_done, &d), 0);
    CHECK_EQ(done_wait(&d), 0);
    CHECK_EQ(d.calls, 2);
    CHECK_EQ(seg_dma_on_done(q, NULL, &d), -EINVAL);
    h_put(1);
    h_get(); /* the link is down */
    fill(p + 64 * KIB, 64 * KIB, 23);
    CHECK_EQ(seg_dma_transfer(q, l, 64 * KIB, r, 64 * KIB, 64 * KIB, 0), 0);
    CHECK_EQ(seg_dma_wait(q, 20000), -ENOLINK);
    CHECK_EQ(seg_dma_state(q), SEG_DMA_ERROR);
    CHECK_EQ(seg_dma_transfer(q, l, 128 * KIB, r, 0, 64 * KIB, SEG_DMA_FROM_REMOTE), 0);
    CHECK_EQ(seg_dma_on_done(q, on_done, &d), 0);
    CHECK_EQ(done_wait(&d), -ENOLINK);
    h_put(1);
    h_get(); /* the link is back */
    fill(p + 128 * KIB, 64 * KIB, 22);
    CHECK_EQ(seg_dma_transfer(q, l, 128 * KIB, r, 128 * KIB, 64 * KIB, 0), 0);
    CHECK_EQ(seg_dma_wait(q, 20000), 0);
    CHECK_EQ(seg_dma_state(q), SEG_DMA_DONE);
    /* The adapter has 4 DMA channels: a fifth queue is a clean -ENOSPC. */
    seg_dma_queue_t *more[4];
    int n = 0, rc;
    while (n < 4 && (rc = seg_dma_queue_create(sd, &more[n], 0)) == 0)
        n++;
    CHECK_EQ(n, 3);
    CHECK_EQ(rc, -ENOSPC);
    seg_dma_queue_remove(more[0]);
    CHECK_EQ(seg_dma_queue_create(sd, &more[0], 0), 0);
    for (int i = 0; i < n; i++)
        seg_dma_queue_remove(more[i]);
    seg_dma_queue_remove(q);
    seg_unmap(m);
    CHECK_EQ(seg_disconnect(r), 0);
    seg_close(sd);
    h_put(1);
}

static void test_dma_callback_errors_and_limits(void **state)
{
    struct seg_pair p = pair_start(FX.name, cb_owner, cb_user);
    h_from(&p.user);
    assert_int_equal(h_cli(FX.name, "link down a b >/dev/null"), 0);
    h_to(&p.user, 1);
    h_from(&p.user);
    assert_int_equal(h_cli(FX.name, "link up a b >/dev/null"), 0);
    h_to(&p.user, 1);
    h_from(&p.user);
    h_to(&p.owner, 1);
    h_from(&p.owner);
    h_to(&p.owner, 1);
    pair_join(&p);
}

/* ---------------------------------------------------------------- timeout and abort */

#define CHUNK (64u * KIB)

static void abort_owner(void *arg)
{
    seg_desc_t *sd = sd_open();
    seg_local_t *r = export_seg(sd, 5, 8 * CHUNK);
    seg_map_t *m;
    volatile uint8_t *p = map_local(r, &m);
    h_put(1);
    h_get(); /* the connector aborted 4 transfers while the engine held still */
    /* The one at the engine's tail may have counted as started: whole or not at all. */
    if (p[0] == 0)
        expect_byte(p, CHUNK, 0);
    else
        expect_pat(p, CHUNK, 31);
    expect_byte(p + CHUNK, 3 * CHUNK, 0); /* the others never ran */
    h_put(1);
    h_get(); /* the queue was used again */
    expect_pat(p + 4 * CHUNK, CHUNK, 32);
    owner_finish(sd, r, m);
}

static void abort_user(void *arg)
{
    seg_desc_t *sd = sd_open();
    seg_local_t *l;
    seg_map_t *m;
    volatile uint8_t *p = local_segment(sd, 6, 8 * CHUNK, &l, &m);
    fill(p, 4 * CHUNK, 31);
    fill(p + 4 * CHUNK, CHUNK, 32);
    h_get();
    seg_remote_t *r;
    CHECK_EQ(seg_connect(sd, &r, NODE_B, 5, 0, 5000), 0);
    seg_dma_queue_t *q;
    CHECK_EQ(seg_dma_queue_create(sd, &q, 0), 0);
    h_put(1);
    h_get(); /* our agent (the engine) is stopped */
    for (int i = 0; i < 4; i++)
        CHECK_EQ(seg_dma_transfer(q, l, (size_t)i * CHUNK, r, (size_t)i * CHUNK, CHUNK, 0), 0);
    CHECK_EQ(seg_dma_state(q), SEG_DMA_POSTED);
    CHECK_EQ(seg_dma_wait(q, 30), -ETIMEDOUT);
    CHECK_EQ(seg_dma_wait(q, 0), -ETIMEDOUT);
    CHECK_EQ(seg_dma_state(q), SEG_DMA_POSTED);
    h_put(1);
    /* The parent continues the engine once it sees our cancellations in the ring. */
    CHECK_EQ(seg_dma_abort(q), 0);
    CHECK_EQ(seg_dma_state(q), SEG_DMA_ABORTED);
    h_put(1);
    h_get(); /* the owner checked */
    /* The queue works again after an abort. */
    CHECK_EQ(seg_dma_transfer(q, l, 4 * CHUNK, r, 4 * CHUNK, CHUNK, 0), 0);
    CHECK_EQ(seg_dma_wait(q, 20000), 0);
    CHECK_EQ(seg_dma_state(q), SEG_DMA_DONE);
    h_put(1);
    h_get(); /* the engine is stopped again */
    /* While a callback is pending the queue takes no more transfers. */
    struct done d;
    sem_init(&d.sem, 0, 0);
    CHECK_EQ(seg_dma_transfer(q, l, 5 * CHUNK, r, 5 * CHUNK, CHUNK, 0), 0);
    CHECK_EQ(seg_dma_on_done(q, on_done, &d), 0);
    CHECK_EQ(seg_dma_transfer(q, l, 6 * CHUNK, r, 6 * CHUNK, CHUNK, 0), -EBUSY);
    CHECK_EQ(seg_dma_on_done(q, on_done, &d), -EINVAL);
    h_put(1);
    CHECK_EQ(done_wait(&d), 0);
    seg_dma_queue_remove(q);
    seg_unmap(m);
    CHECK_EQ(seg_disconnect(r), 0);
    seg_close(sd);
    h_put(1);
}

static void test_dma_timeout_and_abort(void **state)
{
    struct fab *f = attach(FX.name);
    struct seg_pair p = pair_start(FX.name, abort_owner, abort_user);
    h_from(&p.user); /* connected, queue created */
    struct fab_dma_chan *ch = chan_of(f, "a.ntb0", p.user.pid);
    agent_signal(f, "a", SIGSTOP);
    h_to(&p.user, 1);
    h_from(&p.user); /* 4 transfers queued, the waits timed out; a aborts now */
    assert_int_equal(atomic_load(&ch->head) - atomic_load(&ch->tail), 4);
    /* ntb_dma_abort cancels all but the descriptor at the engine's tail. */
    uint64_t tail = atomic_load(&ch->tail), head = atomic_load(&ch->head);
    for (uint64_t i = tail + 1; i < head; i++)
        while (!(atomic_load(&ch->ring[i % FAB_DMA_RING].flags) & FAB_DMA_CANCEL))
            fab_futex_wait(&ch->done_seq, atomic_load(&ch->done_seq), 1000000); /* 1 ms */
    agent_signal(f, "a", SIGCONT);
    h_to(&p.owner, h_from(&p.user));
    h_to(&p.user, h_from(&p.owner));
    h_from(&p.user);
    h_to(&p.owner, 1);
    h_from(&p.owner);
    agent_signal(f, "a", SIGSTOP);
    h_to(&p.user, 1);
    h_from(&p.user); /* a callback is pending */
    agent_signal(f, "a", SIGCONT);
    h_from(&p.user);
    h_to(&p.owner, 1);
    pair_join(&p);
    fab_detach(f);
}

/* ---------------------------------------------------------------- interrupts */

static void intr_b(void *arg)
{
    seg_desc_t *sd = sd_open();
    uint32_t fixed = 5, picked = SEG_ID_AUTO, dup = 5;
    seg_intr_t *i5, *ia, *idup;
    CHECK_EQ(seg_intr_create(sd, &i5, &fixed), 0);
    CHECK_EQ(fixed, 5);
    CHECK_EQ(seg_intr_create(sd, &ia, &picked), 0);
    CHECK(picked != SEG_ID_AUTO && picked != 5);
    CHECK_EQ(seg_intr_create(sd, &idup, &dup), -EEXIST);
    CHECK_EQ(seg_intr_wait(i5, 0), -ETIMEDOUT); /* nothing yet */
    h_put(picked);
    uint32_t aid = (uint32_t)h_get(); /* a triggered i5 3 times, sent 5 data interrupts to ia */
    for (int k = 0; k < 3; k++)
        CHECK_EQ(seg_intr_wait(i5, 10000), 0);
    CHECK_EQ(seg_intr_wait(i5, 30), -ETIMEDOUT); /* one wake-up per trigger */
    char buf[SEG_INTR_DATA_MAX];
    size_t len = 0;
    for (int k = 0; k < 3; k++) {
        char want[32];
        snprintf(want, sizeof want, "message %d", k);
        CHECK_EQ(seg_intr_wait_data(ia, buf, sizeof buf, &len, 10000), 0);
        CHECK_EQ(len, strlen(want) + 1);
        CHECK_EQ(memcmp(buf, want, len), 0);
    }
    CHECK_EQ(seg_intr_wait_data(ia, buf, sizeof buf, &len, 10000), 0); /* the largest payload */
    CHECK_EQ(len, SEG_INTR_DATA_MAX);
    for (size_t k = 0; k < len; k++)
        CHECK_EQ((uint8_t)buf[k], (uint8_t)(k * 3 + 1));
    memset(buf, 0, sizeof buf);
    CHECK_EQ(seg_intr_wait_data(ia, buf, 4, &len, 10000), 0); /* truncated to what fits */
    CHECK_EQ(len, 10);
    CHECK_EQ(memcmp(buf, "0123", 4), 0);
    CHECK_EQ(buf[4], 0);
    CHECK_EQ(seg_intr_wait_data(ia, buf, sizeof buf, &len, 30), -ETIMEDOUT);
    /* The other way round: b triggers an interrupt of a. */
    seg_rintr_t *toa;
    CHECK_EQ(seg_intr_connect(sd, &toa, NODE_A, aid, 0, 5000), 0);
    CHECK_EQ(seg_intr_trigger(toa), 0);
    CHECK_EQ(seg_intr_trigger_data(toa, "from b", 7), 0);
    seg_intr_disconnect(toa);
    h_put(1);
    /* Removal: new connections fail, and the old one triggers nothing that a newer interrupt
     * (which may get the same memory) would see. */
    h_get();
    seg_intr_remove(i5);
    uint32_t fresh_id = SEG_ID_AUTO;
    seg_intr_t *fresh;
    CHECK_EQ(seg_intr_create(sd, &fresh, &fresh_id), 0);
    h_put(1);
    h_get(); /* a triggered through its stale connection */
    CHECK_EQ(seg_intr_wait(fresh, 50), -ETIMEDOUT);
    CHECK_EQ(seg_intr_wait_data(fresh, buf, sizeof buf, &len, 0), -ETIMEDOUT);
    seg_intr_remove(fresh);
    seg_intr_remove(ia);
    seg_close(sd);
    h_put(1);
}

static void intr_a(void *arg)
{
    seg_desc_t *sd = sd_open();
    uint32_t picked = (uint32_t)h_get();
    seg_rintr_t *r5, *ra, *none;
    CHECK_EQ(seg_intr_connect(sd, &r5, NODE_B, 5, 0, 5000), 0);
    CHECK_EQ(seg_intr_connect(sd, &ra, NODE_B, picked, 0, 5000), 0);
    CHECK_EQ(seg_intr_connect(sd, &none, NODE_B, 777, 0, 50), -ENOENT);
    CHECK_EQ(seg_intr_connect(sd, &none, 1000, 5, 0, 50), -EHOSTUNREACH);
    CHECK_EQ(seg_intr_connect(sd, &none, NODE_B, 5, 4, 50), -ENODEV);
    for (int k = 0; k < 3; k++)
        CHECK_EQ(seg_intr_trigger(r5), 0);
    for (int k = 0; k < 3; k++) {
        char msg[32];
        snprintf(msg, sizeof msg, "message %d", k);
        CHECK_EQ(seg_intr_trigger_data(ra, msg, strlen(msg) + 1), 0);
    }
    uint8_t big[SEG_INTR_DATA_MAX + 1];
    for (size_t k = 0; k < sizeof big; k++)
        big[k] = (uint8_t)(k * 3 + 1);
    CHECK_EQ(seg_intr_trigger_data(ra, big, sizeof big), -EINVAL);
    CHECK_EQ(seg_intr_trigger_data(ra, big, SEG_INTR_DATA_MAX), 0);
    CHECK_EQ(seg_intr_trigger_data(ra, "0123456789", 10), 0);
    /* Our own interrupt, for b to trigger. */
    uint32_t mine = SEG_ID_AUTO;
    seg_intr_t *it;
    CHECK_EQ(seg_intr_create(sd, &it, &mine), 0);
    h_put(mine);
    CHECK_EQ(seg_intr_wait(it, 10000), 0);
    char buf[16];
    size_t len;
    CHECK_EQ(seg_intr_wait_data(it, buf, sizeof buf, &len, 10000), 0);
    CHECK_EQ(len, 7);
    CHECK_EQ(strcmp(buf, "from b"), 0);
    h_put(1);
    h_get(); /* b removed interrupt 5 and created another */
    CHECK_EQ(seg_intr_connect(sd, &none, NODE_B, 5, 0, 50), -ENOENT);
    CHECK_EQ(seg_intr_trigger(r5), -ENOENT); /* stale: the interrupt is gone */
    CHECK_EQ(seg_intr_trigger_data(r5, "stale", 6), -ENOENT);
    h_put(1);
    seg_intr_disconnect(r5);
    seg_intr_disconnect(ra);
    seg_intr_remove(it);
    seg_close(sd);
}

static void test_interrupts(void **state)
{
    struct seg_pair p = pair_start(FX.name, intr_b, intr_a); /* b's automatic interrupt id */
    h_to(&p.owner, h_from(&p.user)); /* a's interrupt id; a has triggered b's by now */
    h_from(&p.owner);           /* b triggered a's */
    h_from(&p.user);           /* a got them */
    h_to(&p.owner, 1);          /* b removes interrupt 5 and creates another */
    h_from(&p.owner);
    h_to(&p.user, 1);          /* a triggers through its stale connection */
    h_from(&p.user);
    h_to(&p.owner, 1);          /* b's new interrupt saw nothing */
    h_from(&p.owner);
    pair_join(&p);
}

/* A host holds at most 1024 interrupts: one more is -ENOSPC, and a removed one's page serves
 * the next. (The pool of interrupt pages only grows, so it must be bounded.) */
static void intr_hog(void *arg)
{
    (void)arg;
    seg_desc_t *sd = sd_open();
    static seg_intr_t *its[1024];
    int n = 0;
    for (;;) {
        uint32_t id = SEG_ID_AUTO;
        seg_intr_t *it;
        int rc = seg_intr_create(sd, &it, &id);
        if (rc) {
            CHECK_EQ(rc, -ENOSPC);
            break;
        }
        CHECK(n < 1024);
        its[n++] = it;
    }
    CHECK_EQ(n, 1024);
    seg_intr_remove(its[--n]);
    uint32_t id = SEG_ID_AUTO;
    CHECK_EQ(seg_intr_create(sd, &its[n++], &id), 0);
    while (n)
        seg_intr_remove(its[--n]);
    seg_close(sd);
}

static void test_interrupts_are_bounded(void **state)
{
    struct h_proc a = h_spawn(FX.name, "a", intr_hog, NULL);
    assert_int_equal(h_join(&a), 0);
}

/* ---------------------------------------------------------------- sequences */

/* More data triggers than the owner holds: the waiter skips to the oldest payload still held
 * and continues in order, instead of stalling. Plain waits take their payload with them. */
#define OVERRUN 40
#define HELD 32 /* payloads the owner holds (include/ntblend/seg.h) */

static void overrun_owner(void *arg)
{
    seg_desc_t *sd = sd_open();
    uint32_t id = 31;
    seg_intr_t *it;
    CHECK_EQ(seg_intr_create(sd, &it, &id), 0);
    h_put(1);
    h_get(); /* OVERRUN data triggers sent */
    uint32_t v;
    size_t len;
    for (uint32_t k = OVERRUN - HELD; k < OVERRUN; k++) {
        CHECK_EQ(seg_intr_wait_data(it, &v, sizeof v, &len, 5000), 0);
        CHECK_EQ(len, sizeof v);
        CHECK_EQ(v, k);
    }
    CHECK_EQ(seg_intr_wait_data(it, &v, sizeof v, &len, 50), -ETIMEDOUT);
    h_put(1);
    h_get(); /* a plain trigger, then a data trigger: consumed in order by either wait */
    CHECK_EQ(seg_intr_wait_data(it, &v, sizeof v, &len, 5000), 0);
    CHECK_EQ(len, 0);
    CHECK_EQ(seg_intr_wait(it, 5000), 0); /* takes the data trigger, payload dropped */
    CHECK_EQ(seg_intr_wait_data(it, &v, sizeof v, &len, 50), -ETIMEDOUT);
    h_put(1);
    seg_intr_remove(it);
    seg_close(sd);
}

static void overrun_user(void *arg)
{
    seg_desc_t *sd = sd_open();
    h_get();
    seg_rintr_t *r;
    CHECK_EQ(seg_intr_connect(sd, &r, NODE_B, 31, 0, 5000), 0);
    for (uint32_t k = 0; k < OVERRUN; k++)
        CHECK_EQ(seg_intr_trigger_data(r, &k, sizeof k), 0);
    h_put(1);
    h_get();
    uint32_t b = 1001;
    CHECK_EQ(seg_intr_trigger(r), 0);
    CHECK_EQ(seg_intr_trigger_data(r, &b, sizeof b), 0);
    h_put(1);
    seg_intr_disconnect(r);
    seg_close(sd);
}

static void test_data_interrupt_overrun(void **state)
{
    struct seg_pair p = pair_start(FX.name, overrun_owner, overrun_user);
    pair_exchange(&p, 1);
    pair_to_owner(&p);
    h_from(&p.owner);
    pair_join(&p);
}

#define SEQ_SIZE (1u * MIB)
#define TRIALS 5

struct writer {
    volatile uint8_t *p;
    uint32_t seed;
    _Atomic int stop, passes;
};

/* Traffic: store the pattern over and over until told to stop. */
static void *writer_thread(void *arg)
{
    struct writer *w = arg;
    while (!atomic_load(&w->stop)) {
        fill(w->p, SEQ_SIZE, w->seed);
        seg_flush();
        atomic_fetch_add(&w->passes, 1);
    }
    return NULL;
}

static void seq_owner(void *arg)
{
    seg_desc_t *sd = sd_open();
    seg_local_t *s = export_seg(sd, 70, SEQ_SIZE);
    seg_map_t *m;
    volatile uint8_t *p = map_local(s, &m);
    seg_seq_t *local_seq;
    CHECK_EQ(seg_seq_create(m, &local_seq), 0);
    h_put(1);
    for (int t = 0; t < TRIALS; t++) {
        h_get(); /* the connector redid its transfer after the link came back */
        expect_pat(p, SEQ_SIZE, 200 + (uint32_t)t);
        h_put(1);
    }
    /* A local mapping crosses no link: its sequence never reports a failure. */
    CHECK_EQ(seg_seq_check(local_seq), SEG_SEQ_OK);
    seg_seq_remove(local_seq);
    h_get();
    seg_unmap(m);
    seg_remove(s);
    seg_close(sd);
}

static void seq_user(void *arg)
{
    seg_desc_t *sd = sd_open();
    h_get();
    seg_remote_t *r;
    CHECK_EQ(seg_connect(sd, &r, NODE_B, 70, 0, 5000), 0);
    seg_map_t *m;
    volatile uint8_t *p = seg_map_remote(r, 0, 0, 0, &m);
    CHECK(p);
    seg_seq_t *seq;
    CHECK_EQ(seg_seq_create(m, &seq), 0);
    fill(p, SEQ_SIZE, 99);
    CHECK_EQ(seg_seq_check(seq), SEG_SEQ_OK);
    for (int t = 0; t < TRIALS; t++) {
        struct writer w = { .p = p, .seed = 100 + (uint32_t)t };
        pthread_t th;
        CHECK_EQ(seg_seq_start(seq), 0);
        CHECK_EQ(pthread_create(&th, NULL, writer_thread, &w), 0);
        while (atomic_load(&w.passes) < 1)
            sched_yield();
        h_put(1); /* traffic is flowing: take the link down */
        h_get();
        CHECK_EQ(seg_wait_event(r, 10000), SEG_EVENT_LOST);
        CHECK_EQ(seg_seq_check(seq), SEG_SEQ_NOT_RETRIABLE);
        h_put(1);
        h_get(); /* the link is back */
        CHECK_EQ(seg_wait_event(r, 10000), SEG_EVENT_RESTORED);
        atomic_store(&w.stop, 1);
        CHECK_EQ(pthread_join(th, NULL), 0);
        /* The link failed and recovered since the start: the transfer must be redone. */
        CHECK_EQ(seg_seq_check(seq), SEG_SEQ_RETRIABLE);
        CHECK_EQ(seg_seq_check(seq), SEG_SEQ_RETRIABLE); /* until a new start */
        CHECK_EQ(seg_seq_start(seq), 0);
        fill(p, SEQ_SIZE, 200 + (uint32_t)t);
        CHECK_EQ(seg_seq_check(seq), SEG_SEQ_OK);
        expect_pat(p, SEQ_SIZE, 200 + (uint32_t)t); /* loads through the recovered link */
        h_put(1);
        h_get(); /* the owner found the redone data */
    }
    seg_seq_remove(seq);
    CHECK_EQ(seg_unmap(m), 0);
    CHECK_EQ(seg_disconnect(r), 0);
    seg_close(sd);
    h_put(1);
}

static void test_sequence_reports_link_failure(void **state)
{
    struct seg_pair p = pair_start(FX.name, seq_owner, seq_user);
    for (int t = 0; t < TRIALS; t++) {
        h_from(&p.user);
        assert_int_equal(h_cli(FX.name, "link down a b >/dev/null"), 0);
        h_to(&p.user, 1);
        h_from(&p.user);
        assert_int_equal(h_cli(FX.name, "link up a b >/dev/null"), 0);
        h_to(&p.user, 1);
        h_to(&p.owner, h_from(&p.user));
        h_to(&p.user, h_from(&p.owner));
    }
    h_from(&p.user);
    h_to(&p.owner, 1);
    pair_join(&p);
}

/* The owner's host crashes and boots again: the path is back, the memory is not. */
static void reboot_owner(void *arg)
{
    seg_desc_t *sd = sd_open();
    seg_local_t *s = export_seg(sd, 71, 64 * KIB);
    (void)s;
    h_put(1);
    pause(); /* dies with its host */
}

static void reboot_user(void *arg)
{
    seg_desc_t *sd = sd_open();
    h_get();
    seg_remote_t *r;
    CHECK_EQ(seg_connect(sd, &r, NODE_B, 71, 0, 5000), 0);
    seg_map_t *m;
    volatile uint8_t *p = seg_map_remote(r, 0, 0, 0, &m);
    CHECK(p);
    seg_seq_t *seq;
    CHECK_EQ(seg_seq_create(m, &seq), 0);
    p[0] = 1;
    CHECK_EQ(seg_seq_check(seq), SEG_SEQ_OK);
    h_put(1);
    h_get(); /* b was killed */
    CHECK_EQ(seg_wait_event(r, 10000), SEG_EVENT_LOST);
    CHECK_EQ(seg_remote_state(r), SEG_EVENT_LOST);
    CHECK_EQ(seg_seq_check(seq), SEG_SEQ_NOT_RETRIABLE);
    h_put(1);
    h_get(); /* b is up again */
    CHECK_EQ(seg_wait_event(r, 10000), SEG_EVENT_RESTORED);
    CHECK_EQ(seg_seq_check(seq), SEG_SEQ_NOT_RETRIABLE); /* reconnect, do not retry */
    CHECK_EQ(seg_seq_start(seq), 0);
    CHECK_EQ(seg_seq_check(seq), SEG_SEQ_OK);
    seg_remote_t *again;
    CHECK_EQ(seg_connect(sd, &again, NODE_B, 71, 0, 50), -ENOENT); /* it died with b */
    seg_seq_remove(seq);
    CHECK_EQ(seg_unmap(m), 0);
    CHECK_EQ(seg_disconnect(r), 0);
    seg_close(sd);
    h_put(1);
}

static void test_sequence_owner_reboot(void **state)
{
    struct seg_pair p = pair_start(FX.name, reboot_owner, reboot_user);
    h_from(&p.user);
    assert_int_equal(cli_killing(FX.name, "host kill b >/dev/null", &p.owner), 128 + SIGKILL);
    h_to(&p.user, 1);
    h_from(&p.user);
    assert_int_equal(h_cli(FX.name, "host start b >/dev/null"), 0);
    h_to(&p.user, 1);
    h_from(&p.user);
    assert_int_equal(h_join(&p.user), 0);
}

/* ---------------------------------------------------------------- DMA with the IOMMU on */

static struct fx FX_IOMMU;
static const struct fx_opts IOMMU_OPTS = { .topo = "tests/system/topologies/iommu-pair.ini" };
static int setup_iommu(void **state)
{
    return fx_setup(state, &FX_IOMMU, "segdmaiommu", &IOMMU_OPTS);
}

/* Host `arg` ("a": IOMMU off, "b": on) connects the other's segment and moves data both ways
 * with its own DMA engine. */
static void iommu_exporter(void *arg)
{
    seg_desc_t *sd = sd_open();
    seg_local_t *s = export_seg(sd, 80, 512 * KIB);
    seg_map_t *m;
    volatile uint8_t *p = map_local(s, &m);
    fill(p, 256 * KIB, 41);
    h_put(1);
    h_get();
    expect_pat(p + 256 * KIB, 256 * KIB, 42);
    owner_finish(sd, s, m);
}

static void iommu_mover(void *arg)
{
    uint32_t other = strcmp((const char *)arg, "a") == 0 ? NODE_B : NODE_A;
    seg_desc_t *sd = sd_open();
    seg_local_t *l;
    seg_map_t *m;
    volatile uint8_t *p = local_segment(sd, 81, 512 * KIB, &l, &m);
    fill(p + 256 * KIB, 256 * KIB, 42);
    h_get();
    seg_remote_t *r;
    CHECK_EQ(seg_connect(sd, &r, other, 80, 0, 5000), 0);
    seg_dma_queue_t *q;
    CHECK_EQ(seg_dma_queue_create(sd, &q, 0), 0);
    CHECK_EQ(seg_dma_transfer(q, l, 0, r, 0, 256 * KIB, SEG_DMA_FROM_REMOTE), 0);
    CHECK_EQ(seg_dma_transfer(q, l, 256 * KIB, r, 256 * KIB, 256 * KIB, 0), 0);
    CHECK_EQ(seg_dma_wait(q, 20000), 0);
    expect_pat(p, 256 * KIB, 41);
    seg_dma_queue_remove(q);
    CHECK_EQ(seg_disconnect(r), 0);
    seg_unmap(m);
    seg_remove(l);
    seg_close(sd);
    h_put(1);
}

static void test_dma_with_iommu(void **state)
{
    struct fab *f = attach(FX_IOMMU.name);
    uint32_t b = (uint32_t)fab_host_by_name(f, "b");
    uint64_t faults = atomic_load(&fab_host(f, b)->fault_count);
    static const char *const movers[] = { "a", "b" };
    for (int i = 0; i < 2; i++) {
        const char *mover = movers[i], *exporter = movers[1 - i];
        struct h_proc e = h_spawn(FX_IOMMU.name, exporter, iommu_exporter, NULL);
        struct h_proc mv = h_spawn(FX_IOMMU.name, mover, iommu_mover, (void *)mover);
        h_to(&mv, h_from(&e));
        h_to(&e, h_from(&mv));
        h_from(&e);
        h_to(&e, 1);
        assert_int_equal(h_join(&mv), 0);
        assert_int_equal(h_join(&e), 0);
    }
    assert_int_equal(atomic_load(&fab_host(f, b)->fault_count), faults);
    fab_detach(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dma_both_directions),
        cmocka_unit_test(test_dma_callback_errors_and_limits),
        cmocka_unit_test(test_dma_timeout_and_abort),
        cmocka_unit_test(test_interrupts),
        cmocka_unit_test(test_interrupts_are_bounded),
        cmocka_unit_test(test_data_interrupt_overrun),
        cmocka_unit_test(test_sequence_reports_link_failure),
        cmocka_unit_test(test_sequence_owner_reboot),
        cmocka_unit_test_setup_teardown(test_dma_with_iommu, setup_iommu, fx_teardown),
    };
    return cmocka_run_group_tests(tests, setup, fx_teardown);
}
