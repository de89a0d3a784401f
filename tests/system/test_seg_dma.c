/*
 * The segment API's data movers between two hosts back to back
 * (examples/topologies/two-hosts.ini: a = node 4, b = node 8): DMA queues in both directions,
 * completion callbacks, errors and limits, timeouts and abort; DMA by a host whose IOMMU is on
 * (tests/system/topologies/iommu-pair.ini). The signals (interrupts, sequences) are
 * test_seg_intr's.
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
#include <sched.h>
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
        cmocka_unit_test_setup_teardown(test_dma_with_iommu, setup_iommu, fx_teardown),
    };
    return cmocka_run_group_tests(tests, setup, fx_teardown);
}
