/*
 * The hardware model underneath the API: requester-ID tables, IOMMU faults and the IOMMU
 * table's index, devices' cached translations against unmaps, the shared locks, chained windows
 * across a ring, and fabrics side by side. Uses the fabric model directly where a test needs
 * a requester other than the CPU (a device), and applications where the CPU path matters.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>

#include "fixture.h"
#include "fabric.h"
#include "ntblend/ntb.h"

#define DEV_RID 0x0300 /* a device function on bus 3 */

/* Boot a fabric of the test's own from topo, attached; fx_down takes it down. */
static struct fab *up(struct fx *fx, const char *name, const char *topo)
{
    const struct fx_opts o = { .topo = topo, .attach = fx_attach };
    assert_int_equal(fx_up(fx, name, &o), 0);
    return fx->f;
}

/* ---------------------------------------------------------------- requester IDs */

static void test_requester_id_table(void **state)
{
    struct fx fx;
    struct fab *f = up(&fx, "rid", "examples/topologies/two-hosts.ini");
    uint32_t a = (uint32_t)fab_host_by_name(f, "a"), b = (uint32_t)fab_host_by_name(f, "b");
    uint32_t ai = (uint32_t)fab_adapter_by_name(f, "a.ntb0");
    struct fab_adapter *ad = fab_adapter(f, ai);
    int idx = fab_lut_alloc(f, ai, getpid(), 0);
    assert_true(idx >= 0);
    uint64_t target = 16ull << 20; /* in b's RAM, above the mailboxes */
    assert_int_equal(fab_lut_set(f, ai, (uint32_t)idx, b, target, getpid(), 0), 0);
    uint64_t win = ad->bar_addr + (uint64_t)idx * ad->lut_size;
    memset(fab_ram(f, b, target, 64), 0x42, 64);

    uint8_t buf[64];
    /* A device not in the table: its read cannot complete (all ones), its write is posted. */
    assert_int_equal(fab_dev_read(f, a, DEV_RID, win, buf, sizeof buf), -EACCES);
    for (size_t i = 0; i < sizeof buf; i++)
        assert_int_equal(buf[i], 0xff);
    uint8_t w[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
    assert_int_equal(fab_dev_write(f, a, DEV_RID, win + 64, w, sizeof w), 0);
    assert_memory_equal(fab_ram(f, b, target + 64, 8), w, 8);
    /* In the table: reads complete. */
    assert_int_equal(fab_rid_add(f, ai, DEV_RID, getpid()), 0);
    assert_int_equal(fab_rid_add(f, ai, DEV_RID, getpid()), -EEXIST);
    assert_int_equal(fab_dev_read(f, a, DEV_RID, win, buf, sizeof buf), 0);
    assert_int_equal(buf[0], 0x42);
    /* The table is finite (32 entries on a PXH830): the next one is a clean error. */
    uint32_t free_entries = ad->rid_entries - fab_rid_used(f, ai);
    for (uint32_t i = 0; i < free_entries; i++)
        assert_int_equal(fab_rid_add(f, ai, (uint16_t)(0x400 + i), getpid()), 0);
    assert_int_equal(fab_rid_add(f, ai, 0x7ff, getpid()), -ENOSPC);
    assert_int_equal(fab_rid_used(f, ai), ad->rid_entries);
    assert_int_equal(fab_rid_remove(f, ai, DEV_RID), 0);
    assert_int_equal(fab_dev_read(f, a, DEV_RID, win, buf, sizeof buf), -EACCES);
    fab_reap_owner(f, getpid());
    fx_down(&fx);
}

/* ---------------------------------------------------------------- IOMMU */

static void iommu_app(void *arg)
{
    struct ntb_dev *ntb = ntb_open(0);
    CHECK(ntb);
    struct ntb_dma_chan *ch = ntb_dma_chan_request(ntb);
    CHECK(ch);
    uint64_t src;
    uint8_t *p = ntb_dma_alloc(ntb, 4096, &src);
    CHECK(p);
    memset(p, 0xab, 4096);
    uint64_t before;
    struct ntb_fault fl[4];
    ntb_iommu_faults(ntb, fl, 0, &before);
    uint64_t unmapped = 64ull << 20; /* RAM the engine has no IOMMU mapping for */
    int64_t c = ntb_dma_submit(ch, unmapped, src, 4096, true);
    CHECK(c > 0);
    CHECK_EQ(ntb_dma_wait(ch, c, 5000), -EFAULT);
    uint64_t after;
    int n = ntb_iommu_faults(ntb, fl, 4, &after);
    CHECK_EQ(after, before + 1);
    CHECK(n >= 1);
    CHECK_EQ(fl[n - 1].addr, unmapped);
    CHECK(fl[n - 1].write);
    CHECK_EQ(fl[n - 1].reason, -EFAULT);
    /* Mapped memory works through the same engine. */
    uint64_t dst;
    uint8_t *q = ntb_dma_alloc(ntb, 4096, &dst);
    CHECK(q);
    c = ntb_dma_submit(ch, dst, src, 4096, true);
    CHECK_EQ(ntb_dma_wait(ch, c, 5000), 0);
    CHECK_EQ(q[4095], 0xab);
    h_put(unmapped);
    ntb_close(ntb);
}

static void test_iommu_fault(void **state)
{
    struct fx fx;
    struct fab *f = up(&fx, "iommu", "tests/system/topologies/iommu-pair.ini");
    struct h_proc p = h_spawn(fx.name, "b", iommu_app, NULL);
    uint64_t unmapped = h_from(&p);
    assert_int_equal(h_join(&p), 0);
    uint32_t a = (uint32_t)fab_host_by_name(f, "a"), b = (uint32_t)fab_host_by_name(f, "b");
    /* Nothing was written where the faulting DMA pointed. */
    uint8_t *ram = fab_ram(f, b, unmapped, 4096);
    for (int i = 0; i < 4096; i++)
        assert_int_equal(ram[i], 0);
    /* Inbound: a window from a into b's RAM that b never mapped for its NTB faults on b. */
    uint32_t ai = (uint32_t)fab_adapter_by_name(f, "a.ntb0");
    int idx = fab_lut_alloc(f, ai, getpid(), 0);
    assert_true(idx >= 0);
    assert_int_equal(fab_lut_set(f, ai, (uint32_t)idx, b, 0, getpid(), 0), 0);
    struct fab_adapter *ad = fab_adapter(f, ai);
    assert_true(ad->lut_size >= (4u << 20)); /* the entry covers b's [0, 4 MiB) */
    uint64_t faults = atomic_load(&fab_host(f, b)->fault_count);
    uint32_t v = 0x12345678;
    uint64_t off = 2ull << 20; /* above b's mailboxes, below its first allocation */
    assert_int_equal(fab_dev_write(f, a, FAB_RID_CPU, ad->bar_addr + idx * ad->lut_size + off,
                                   &v, sizeof v),
                     -EFAULT);
    assert_int_equal(atomic_load(&fab_host(f, b)->fault_count), faults + 1);
    fab_reap_owner(f, getpid());
    fx_down(&fx);
}

/* ---------------------------------------------------------------- cached translations */

/*
 * A device of a writing through a's NTB into b, whose IOMMU maps each page for b's NTB as a
 * lent device's queue and per-I/O buffers are: once a page is unmapped, nothing the device
 * cached of it lets a write land (the fault is b's), while its translation of the page still
 * mapped serves on; the I/O address mapped again elsewhere reaches the new page only.
 */
#define TLB_IOVA (64ull << 20) /* a multiple of the topology's 4 MiB LUT entries */
#define TLB_PHYS (200ull << 20)

static uint32_t ram32(struct fab *f, uint32_t host, uint64_t phys)
{
    uint32_t v;
    memcpy(&v, fab_ram(f, host, phys, 4), 4);
    return v;
}

/* Two hosts a and b back to back (TOPO), a's adapter with a LUT entry onto TLB_IOVA of b. */
struct pair {
    struct fx fx;
    struct fab *f;
    uint32_t a, b, ai;
    uint16_t nrid; /* b's adapter: what arrives through it is its requester */
    struct fab_adapter *ad;
    int idx;
    uint64_t win; /* a's address of the LUT entry */
};

static struct pair pair_up(const char *name, const char *topo)
{
    struct pair p;
    p.f = up(&p.fx, name, topo);
    p.a = (uint32_t)fab_host_by_name(p.f, "a");
    p.b = (uint32_t)fab_host_by_name(p.f, "b");
    p.ai = (uint32_t)fab_adapter_by_name(p.f, "a.ntb0");
    p.nrid = fab_adapter(p.f, (uint32_t)fab_adapter_by_name(p.f, "b.ntb0"))->rid;
    p.ad = fab_adapter(p.f, p.ai);
    p.idx = fab_lut_alloc(p.f, p.ai, getpid(), 0);
    assert_true(p.idx >= 0);
    assert_int_equal(fab_lut_set(p.f, p.ai, (uint32_t)p.idx, p.b, TLB_IOVA, getpid(), 0), 0);
    p.win = p.ad->bar_addr + (uint64_t)p.idx * p.ad->lut_size;
    return p;
}

static void test_iotlb_streaming_unmap(void **state)
{
    struct pair p = pair_up("iotlb", "tests/system/topologies/iommu-pair.ini");
    struct fab *f = p.f;
    uint32_t a = p.a, b = p.b;
    uint16_t nrid = p.nrid;
    uint64_t win = p.win;
    uint64_t q = TLB_PHYS, d = TLB_PHYS + 4 * 4096, d2 = TLB_PHYS + 8 * 4096;
    uint32_t perm = FAB_PERM_READ | FAB_PERM_WRITE | FAB_PERM_STREAM;
    assert_int_equal(fab_iommu_map(f, b, nrid, TLB_IOVA, q, 4096, perm, getpid()), 0);
    assert_int_equal(fab_iommu_map(f, b, nrid, TLB_IOVA + 4096, d, 4096, perm, getpid()), 0);
    uint32_t v = 1;
    assert_int_equal(fab_dev_write(f, a, DEV_RID, win, &v, 4), 0);
    assert_int_equal(fab_dev_write(f, a, DEV_RID, win + 4096, &v, 4), 0);
    assert_int_equal(ram32(f, b, q), 1);
    assert_int_equal(ram32(f, b, d), 1);
    /* The buffer unmapped: its cached translation is gone, the write faults and lands nowhere. */
    assert_int_equal(fab_iommu_unmap(f, b, nrid, TLB_IOVA + 4096, 4096), 0);
    uint64_t faults = atomic_load(&fab_host(f, b)->fault_count);
    v = 2;
    assert_int_equal(fab_dev_write(f, a, DEV_RID, win + 4096, &v, 4), -EFAULT);
    assert_int_equal(ram32(f, b, d), 1);
    assert_int_equal(atomic_load(&fab_host(f, b)->fault_count), faults + 1);
    /* The queue's mapping was not touched. */
    assert_int_equal(fab_dev_write(f, a, DEV_RID, win, &v, 4), 0);
    assert_int_equal(ram32(f, b, q), 2);
    /* The same I/O address mapped again onto another page: the write goes there. */
    assert_int_equal(fab_iommu_map(f, b, nrid, TLB_IOVA + 4096, d2, 4096, perm, getpid()), 0);
    v = 3;
    assert_int_equal(fab_dev_write(f, a, DEV_RID, win + 4096, &v, 4), 0);
    assert_int_equal(ram32(f, b, d2), 3);
    assert_int_equal(ram32(f, b, d), 1);
    /* And with the queue unmapped too, nothing reaches b. */
    assert_int_equal(fab_iommu_unmap(f, b, nrid, TLB_IOVA, 4096), 0);
    assert_int_equal(fab_iommu_unmap(f, b, nrid, TLB_IOVA + 4096, 4096), 0);
    v = 4;
    assert_int_equal(fab_dev_write(f, a, DEV_RID, win, &v, 4), -EFAULT);
    assert_int_equal(fab_dev_write(f, a, DEV_RID, win + 4096, &v, 4), -EFAULT);
    assert_int_equal(ram32(f, b, q), 2);
    assert_int_equal(ram32(f, b, d2), 3);
    fab_reap_owner(f, getpid());
    fx_down(&p.fx);
}

/* A lent device's DMA: its lender's IOMMU maps an aperture onto a window, the window reaches
 * the borrower, whose IOMMU maps each buffer. A device model resumes its walks on the far side
 * of a crossing it has made before; what it caches of the crossing must go with the lender's
 * aperture mapping and with the LUT entry, and each buffer's unmap with the buffer. */
#define AP_IOVA 0x40000000ull

static void test_cached_crossing(void **state)
{
    struct pair p = pair_up("hop", "tests/system/topologies/iommu-both.ini");
    struct fab *f = p.f;
    uint32_t a = p.a, b = p.b, ai = p.ai;
    uint16_t nrid = p.nrid;
    struct fab_adapter *ad = p.ad;
    int idx = p.idx, idx2 = fab_lut_alloc(f, ai, getpid(), 0);
    assert_true(idx2 >= 0);
    uint64_t win = p.win;
    uint32_t rw = FAB_PERM_READ | FAB_PERM_WRITE, stream = rw | FAB_PERM_STREAM;
    /* A streaming mapping: its unmap changes nothing but its own generation. */
    assert_int_equal(fab_iommu_map(f, a, DEV_RID, AP_IOVA, win, ad->lut_size, stream, getpid()), 0);
    uint64_t d[6];
    for (int k = 1; k < 6; k++) {
        d[k] = TLB_PHYS + (uint64_t)k * 4 * 4096;
        assert_int_equal(fab_iommu_map(f, b, nrid, TLB_IOVA + (uint64_t)k * 4096, d[k], 4096,
                                       stream, getpid()), 0);
    }
    /* Page after page through the same crossing, each to its own buffer. */
    for (uint32_t k = 1; k < 6; k++)
        assert_int_equal(fab_dev_write(f, a, DEV_RID, AP_IOVA + k * 4096ull + 8, &k, 4), 0);
    for (uint32_t k = 1; k < 6; k++)
        assert_int_equal(ram32(f, b, d[k] + 8), k);
    /* A buffer unmapped on the far side faults there, though the crossing is known. */
    assert_int_equal(fab_iommu_unmap(f, b, nrid, TLB_IOVA + 2 * 4096, 4096), 0);
    uint64_t bf = atomic_load(&fab_host(f, b)->fault_count);
    uint32_t v = 20;
    assert_int_equal(fab_dev_write(f, a, DEV_RID, AP_IOVA + 2 * 4096 + 16, &v, 4), -EFAULT);
    assert_int_equal(ram32(f, b, d[2] + 16), 0);
    assert_int_equal(atomic_load(&fab_host(f, b)->fault_count), bf + 1);
    /* The LUT entry pointed elsewhere: the next access follows it. */
    uint64_t moved = TLB_PHYS + 64 * 4096, far = TLB_IOVA + ad->lut_size;
    assert_int_equal(fab_iommu_map(f, b, nrid, far + 4 * 4096, moved, 4096, stream, getpid()), 0);
    assert_int_equal(fab_lut_set(f, ai, (uint32_t)idx, b, far, getpid(), 0), 0);
    v = 30;
    assert_int_equal(fab_dev_write(f, a, DEV_RID, AP_IOVA + 4 * 4096 + 24, &v, 4), 0);
    assert_int_equal(ram32(f, b, moved + 24), 30);
    assert_int_equal(ram32(f, b, d[4] + 24), 0);
    /* The lender's aperture unmapped: the device faults on its own host and reaches nothing,
     * on a page it has not touched before as on one it has. */
    assert_int_equal(fab_iommu_unmap(f, a, DEV_RID, AP_IOVA, ad->lut_size), 0);
    uint64_t af = atomic_load(&fab_host(f, a)->fault_count);
    v = 40;
    assert_int_equal(fab_dev_write(f, a, DEV_RID, AP_IOVA + 5 * 4096 + 32, &v, 4), -EFAULT);
    assert_int_equal(fab_dev_write(f, a, DEV_RID, AP_IOVA + 1 * 4096 + 32, &v, 4), -EFAULT);
    assert_int_equal(atomic_load(&fab_host(f, a)->fault_count), af + 2);
    for (int k = 1; k < 6; k++)
        assert_int_equal(ram32(f, b, d[k] + 32), 0);
    /* Mapped again onto the other LUT entry (the same far-side addresses): it goes there. */
    assert_int_equal(fab_lut_set(f, ai, (uint32_t)idx2, b, TLB_IOVA, getpid(), 0), 0);
    uint64_t win2 = ad->bar_addr + (uint64_t)idx2 * ad->lut_size;
    assert_int_equal(fab_iommu_map(f, a, DEV_RID, AP_IOVA, win2, ad->lut_size, rw, getpid()), 0);
    v = 50;
    assert_int_equal(fab_dev_write(f, a, DEV_RID, AP_IOVA + 5 * 4096 + 40, &v, 4), 0);
    assert_int_equal(ram32(f, b, d[5] + 40), 50);
    fab_reap_owner(f, getpid());
    fx_down(&p.fx);
}

/* ---------------------------------------------------------------- shared locks */

/* Threads of one process contend for a fabric lock (the holder and the waiters share a pid):
 * every increment under it counts, and the lock ends free. */
struct lock_run {
    _Atomic uint32_t lock;
    uint64_t count;
};

static void *lock_worker(void *arg)
{
    struct lock_run *r = arg;
    for (int i = 0; i < 20000; i++) {
        fab_lock(&r->lock);
        uint64_t c = r->count;
        if (i % 64 == 0)
            sched_yield(); /* held across a yield: the others sleep on it */
        r->count = c + 1;
        fab_unlock(&r->lock);
    }
    return NULL;
}

static void test_lock_contended(void **state)
{
    static struct lock_run r;
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&t[i], NULL, lock_worker, &r), 0);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(r.count, 3 * 20000);
    assert_int_equal(atomic_load(&r.lock), 0);
    /* A lock its dead holder left, waiters announced or not, is taken over. */
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    assert_true(child > 0);
    assert_int_equal(waitpid(child, NULL, 0), child);
    atomic_store(&r.lock, (uint32_t)child | 0x80000000u);
    fab_lock(&r.lock);
    assert_int_equal(atomic_load(&r.lock) & 0x7fffffffu, (uint32_t)getpid());
    fab_unlock(&r.lock);
    atomic_store(&r.lock, (uint32_t)child);
    fab_lock(&r.lock);
    fab_unlock(&r.lock);
    assert_int_equal(atomic_load(&r.lock), 0);
}

/* ---------------------------------------------------------------- chained windows */

struct chain {
    uint64_t entry0; /* bus address on h0 that reaches h2 through h1 */
};

static void chain_app(void *arg)
{
    struct ntb_dev *right = NULL;
    for (int i = 0; i < ntb_adapter_count(); i++) {
        struct ntb_dev *n = ntb_open(i);
        CHECK(n);
        if (strstr(ntb_name(n), "right"))
            right = n;
        else
            ntb_close(n);
    }
    CHECK(right);
    int widx = (int)h_get();
    uint32_t *w = ntb_peer_mw_map(right, widx, 1);
    CHECK(w);
    w[10] = 0xc0ffee;
    h_put(w[10]); /* a load through two NTBs */
    h_get();
    CHECK_EQ(w[10], UINT32_MAX); /* h1-h2 down: the far end is unreachable */
    h_put(1);
    ntb_close(right);
}

static void test_chained_windows_ring(void **state)
{
    struct fx fx;
    struct fab *f = up(&fx, "chain", "examples/topologies/ring5.ini");
    uint32_t h0 = 0, h1 = 1, h2 = 2;
    struct fab_host *H1 = fab_host(f, h1);
    int r0 = -1, r1 = -1;
    for (uint32_t i = 0; i < f->ctl->nadapters; i++) {
        struct fab_adapter *ad = fab_adapter(f, i);
        if (strstr(ad->name, "right") && ad->host == h0)
            r0 = (int)i;
        if (strstr(ad->name, "right") && ad->host == h1)
            r1 = (int)i;
    }
    assert_true(r0 >= 0 && r1 >= 0);
    (void)H1;
    struct fab_adapter *A0 = fab_adapter(f, (uint32_t)r0), *A1 = fab_adapter(f, (uint32_t)r1);
    uint64_t target = 8ull << 20;
    int j = fab_lut_alloc(f, (uint32_t)r1, getpid(), 0);
    int k = fab_lut_alloc(f, (uint32_t)r0, getpid(), 0);
    assert_true(j >= 0 && k >= 0);
    assert_int_equal(fab_lut_set(f, (uint32_t)r1, (uint32_t)j, h2, target, getpid(), 0), 0);
    uint64_t via = A1->bar_addr + (uint64_t)j * A1->lut_size; /* h1's window, in h1's map */
    assert_int_equal(fab_lut_set(f, (uint32_t)r0, (uint32_t)k, h1, via, getpid(), 0), 0);

    struct fab_target t;
    uint64_t bus = A0->bar_addr + (uint64_t)k * A0->lut_size + 40;
    assert_int_equal(fab_resolve(f, h0, FAB_RID_CPU, bus, 4, true, &t), 0);
    assert_int_equal(t.err, 0);
    assert_int_equal(t.region, FAB_REGION_RAM);
    assert_int_equal(t.host, h2);
    assert_int_equal(t.addr, target + 40);
    assert_int_equal(t.ntbs, 2);

    /* The CPU path: an application on h0 stores and loads through both windows. */
    struct h_proc p = h_spawn(fx.name, fab_host(f, h0)->name, chain_app, NULL);
    h_to(&p, (uint64_t)k);
    assert_int_equal(h_from(&p), 0xc0ffee);
    uint32_t *ram = fab_ram(f, h2, target, 64);
    assert_int_equal(ram[10], 0xc0ffee);
    /* Cut the second hop. */
    int l = -1;
    char why[256];
    l = fab_link_between(f, A1->name, fab_adapter(f, A1->peers[0])->name, why, sizeof why);
    assert_true(l >= 0);
    assert_int_equal(fab_link_set(f, (uint32_t)l, false), 0);
    assert_int_equal(fab_resolve(f, h0, FAB_RID_CPU, bus, 4, true, &t), 0);
    assert_int_equal(t.err, -ENOLINK);
    h_to(&p, 1);
    h_from(&p);
    assert_int_equal(h_join(&p), 0);
    fab_reap_owner(f, getpid());
    fx_down(&fx);
}

/* ---------------------------------------------------------------- the IOMMU table's index */

#define IDX_N 600
#define IDX_BASE (1ull << 40)

/* Every mapping of both requesters translates, and the page after each is a miss that
 * reaches up to the next mapping (or, the last one, ends there). */
static void idx_check(struct fab *f, uint32_t h, const bool *mapped)
{
    for (uint32_t k = 0; k < IDX_N; k++) {
        for (uint16_t r = 0; r < 2; r++) {
            uint64_t phys = 0, contig = 0, iova = IDX_BASE + (uint64_t)k * 8192;
            int rc = fab_iommu_translate(f, h, (uint16_t)(0x500 + r), iova + 100, 10, false,
                                         false, &phys, &contig);
            if (!mapped[k]) {
                assert_int_equal(rc, -EFAULT);
                continue;
            }
            assert_int_equal(rc, 0);
            assert_int_equal(phys, (16ull << 20) + (uint64_t)(k * 2 + r) * 4096 + 100);
            assert_int_equal(contig, 10);
            rc = fab_iommu_translate(f, h, (uint16_t)(0x500 + r), iova + 4096, 8192, true,
                                     false, &phys, &contig);
            assert_int_equal(rc, -EFAULT);
            assert_int_equal(contig, k + 1 < IDX_N && mapped[k + 1] ? 4096 : 8192);
        }
    }
}

static void test_iommu_index(void **state)
{
    struct fx fx;
    struct fab *f = up(&fx, "iommuidx", "tests/system/topologies/iommu-pair.ini");
    uint32_t h = (uint32_t)fab_host_by_name(f, "b");
    struct fab_host *hh = fab_host(f, h);
    uint32_t before = hh->iommu_nidx;
    static bool mapped[IDX_N];
    fab_iommu_set_probing(true); /* misses on purpose: no faults recorded */
    /* Inserted out of order, two requesters at the same I/O virtual addresses. */
    for (uint32_t i = 0; i < IDX_N; i++) {
        uint32_t k = (i * 397u) % IDX_N;
        for (uint16_t r = 0; r < 2; r++)
            assert_int_equal(fab_iommu_map(f, h, (uint16_t)(0x500 + r), IDX_BASE + (uint64_t)k * 8192,
                                           (16ull << 20) + (uint64_t)(k * 2 + r) * 4096, 4096,
                                           FAB_PERM_READ | FAB_PERM_WRITE, 0), 0);
        mapped[k] = true;
    }
    assert_int_equal(hh->iommu_nidx, before + 2 * IDX_N);
    idx_check(f, h, mapped);
    /* Overlaps of a requester's own mappings are refused, from either side. */
    assert_int_equal(fab_iommu_map(f, h, 0x500, IDX_BASE - 4096, 0, 8192, FAB_PERM_READ, 0), -EEXIST);
    assert_int_equal(fab_iommu_map(f, h, 0x500, IDX_BASE + 4096 - 4096, 0, 4096, FAB_PERM_READ, 0),
                     -EEXIST);
    assert_int_equal(fab_iommu_map(f, h, 0x500, IDX_BASE + 8192 * 5 - 4096, 0, 12288,
                                   FAB_PERM_READ, 0), -EEXIST);
    /* Every other one unmapped. */
    for (uint32_t k = 0; k < IDX_N; k += 2) {
        for (uint16_t r = 0; r < 2; r++)
            assert_int_equal(fab_iommu_unmap(f, h, (uint16_t)(0x500 + r),
                                             IDX_BASE + (uint64_t)k * 8192, 4096), 0);
        mapped[k] = false;
    }
    assert_int_equal(fab_iommu_unmap(f, h, 0x500, IDX_BASE, 4096), -ENOENT);
    idx_check(f, h, mapped);
    /* A process that died half-way through changing the index: the next user rebuilds it. */
    for (uint32_t i = 0, j = hh->iommu_nidx - 1; i < j; i++, j--) {
        uint16_t t = hh->iommu_idx[i];
        hh->iommu_idx[i] = hh->iommu_idx[j];
        hh->iommu_idx[j] = t;
    }
    hh->iommu_idx_dirty = 1;
    idx_check(f, h, mapped);
    assert_int_equal(hh->iommu_idx_dirty, 0);
    /* A streaming mapping serves devices, not a CPU's access through a window. */
    uint64_t phys, contig;
    assert_int_equal(fab_iommu_map(f, h, 0x500, IDX_BASE, 16ull << 20, 4096,
                                   FAB_PERM_READ | FAB_PERM_STREAM, 0), 0);
    assert_int_equal(fab_iommu_translate(f, h, 0x500, IDX_BASE, 4, false, false, &phys, &contig), 0);
    assert_int_equal(fab_iommu_translate(f, h, 0x500, IDX_BASE, 4, false, true, &phys, &contig),
                     -EFAULT);
    assert_int_equal(fab_iommu_translate(f, h, 0x500, IDX_BASE, 4, true, false, &phys, &contig),
                     -EACCES);
    assert_int_equal(fab_iommu_unmap(f, h, 0x500, IDX_BASE, 4096), 0);
    /* What a dead process owned goes, and the index with it. */
    assert_int_equal(fab_iommu_map(f, h, 0x500, IDX_BASE, 16ull << 20, 4096, FAB_PERM_READ, 999999), 0);
    fab_reap_owner(f, 999999);
    idx_check(f, h, mapped);
    for (uint32_t k = 1; k < IDX_N; k += 2)
        for (uint16_t r = 0; r < 2; r++)
            assert_int_equal(fab_iommu_unmap(f, h, (uint16_t)(0x500 + r),
                                             IDX_BASE + (uint64_t)k * 8192, 4096), 0);
    assert_int_equal(hh->iommu_nidx, before);
    fab_iommu_set_probing(false);
    fx_down(&fx);
}

/* ---------------------------------------------------------------- fabrics side by side */

static void test_two_fabrics_do_not_interfere(void **state)
{
    struct fx one, two;
    struct fab *f1 = up(&one, "side1", "examples/topologies/two-hosts.ini");
    struct fab *f2 = up(&two, "side2", "examples/topologies/two-hosts.ini");
    uint32_t b = (uint32_t)fab_host_by_name(f1, "b");
    uint64_t at = 4ull << 20;
    memset(fab_ram(f1, b, at, 4096), 0x77, 4096);
    assert_int_equal(((uint8_t *)fab_ram(f2, b, at, 4096))[0], 0);
    assert_int_equal(h_cli(one.name, "link down a b >/dev/null"), 0);
    uint32_t a1 = (uint32_t)fab_adapter_by_name(f1, "a.ntb0");
    uint32_t b1 = (uint32_t)fab_adapter_by_name(f1, "b.ntb0");
    assert_false(fab_path_up(f1, a1, b1, NULL));
    assert_true(fab_path_up(f2, a1, b1, NULL));
    assert_int_equal(h_cli(two.name, "agent-ping a b >/dev/null"), 0);
    assert_int_not_equal(h_cli(one.name, "agent-ping a b >/dev/null 2>&1"), 0);
    fx_down(&one);
    fx_down(&two);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_requester_id_table),
        cmocka_unit_test(test_iommu_fault),
        cmocka_unit_test(test_iommu_index),
        cmocka_unit_test(test_iotlb_streaming_unmap),
        cmocka_unit_test(test_cached_crossing),
        cmocka_unit_test(test_lock_contended),
        cmocka_unit_test(test_chained_windows_ring),
        cmocka_unit_test(test_two_fabrics_do_not_interfere),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
