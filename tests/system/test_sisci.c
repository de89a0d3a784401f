/*
 * The SISCI API (libsisci, docs/sisci.md) between hosts of examples/topologies/smartio3.ini,
 * as a SISCI program uses it: segments created, prepared and made available on one host,
 * connected and mapped on another (loads and stores both ways, events, a callback told of the
 * owner's removal), sequences, SCIMemCpy, DMA queues (one transfer, a vector, a callback, a
 * read), plain and data interrupts (waited for, and through callbacks), memory registered
 * from the caller's pages and given back, and SmartIO: borrowing by fabric device id, a
 * device's BAR as a segment, device memory shared between hosts and private, segments mapped
 * for the device. test_sisci_bad.c feeds every call bad input.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#include "sisci_util.h"

#define SEG_ID 5u
#define SEG_SIZE (256u * 1024u)
#define INTR_NO 9u
#define DINTR_NO 10u

static int setup(void **state) { return sisci_setup(state, "sisci"); }

static uint8_t pat(unsigned seed, size_t i) { return (uint8_t)(seed * 131u + i * 7u + (i >> 9)); }

/* ---------------------------------------------------------------- segments, DMA, interrupts */

struct got {
    sem_t sem;
    _Atomic unsigned calls;
    unsigned len[2];
    uint8_t data[2][SCI_MAX_DATA_INTERRUPT_SIZE];
};

static sci_callback_action_t on_data(void *arg, sci_local_data_interrupt_t intr, void *data,
                                     unsigned int length, sci_error_t status)
{
    struct got *g = arg;
    unsigned i = atomic_load(&g->calls);
    if (i < 2) {
        memcpy(g->data[i], data, length);
        g->len[i] = length;
    }
    atomic_fetch_add(&g->calls, 1);
    sem_post(&g->sem);
    return SCI_CALLBACK_CONTINUE;
}

/* Host a: a segment with a pattern, an interrupt and a data interrupt; checks what b did. */
static void owner(void *arg)
{
    sci_error_t err;
    sci_desc_t sd = sci_start();
    sci_local_segment_t seg;
    sci_map_t map;
    sci_local_interrupt_t intr;
    sci_local_data_interrupt_t dintr;
    unsigned intr_no = INTR_NO, dintr_no = DINTR_NO;
    struct got g = { 0 };
    sem_init(&g.sem, 0, 0);
    SCI_OK(SCICreateSegment(sd, &seg, SEG_ID, SEG_SIZE, NULL, NULL, 0, &err));
    CHECK_EQ(SCIGetLocalSegmentId(seg), SEG_ID);
    CHECK_EQ(SCIGetLocalSegmentSize(seg), SEG_SIZE);
    volatile uint8_t *p = SCIMapLocalSegment(seg, &map, 0, SEG_SIZE, NULL, 0, &err);
    CHECK(p);
    for (size_t i = 0; i < SEG_SIZE; i++)
        p[i] = pat(1, i);
    SCI_OK(SCIPrepareSegment(seg, 0, 0, &err));
    SCI_OK(SCICreateInterrupt(sd, &intr, 0, &intr_no, NULL, NULL, SCI_FLAG_FIXED_INTNO, &err));
    CHECK_EQ(intr_no, INTR_NO);
    CHECK_EQ(SCIGetLocalInterruptNo(intr), INTR_NO);
    SCI_OK(SCICreateDataInterrupt(sd, &dintr, 0, &dintr_no, on_data, &g,
                                  SCI_FLAG_FIXED_INTNO | SCI_FLAG_USE_CALLBACK, &err));
    SCI_OK(SCISetSegmentAvailable(seg, 0, 0, &err));
    h_put(1);
    /* b stored its pattern over the first half and triggers the interrupt */
    SCI_OK(SCIWaitForInterrupt(intr, 10000, 0, &err));
    for (size_t i = 0; i < SEG_SIZE / 2; i++)
        CHECK_EQ(p[i], pat(2, i));
    /* b's DMA wrote the third quarter from its own segment */
    sem_wait(&g.sem);
    CHECK_EQ(g.len[0], 5);
    CHECK(memcmp(g.data[0], "hello", 5) == 0);
    for (size_t i = SEG_SIZE / 2; i < SEG_SIZE * 3 / 4; i++)
        CHECK_EQ(p[i], pat(3, i));
    /* a data interrupt of the largest size */
    sem_wait(&g.sem);
    CHECK_EQ(g.len[1], SCI_MAX_DATA_INTERRUPT_SIZE);
    for (unsigned i = 0; i < g.len[1]; i++)
        CHECK_EQ(g.data[1][i], (uint8_t)i);
    h_put(2);
    h_get(); /* b is done with its checks: remove, so that its callback hears of it */
    SCI_OK(SCIUnmapSegment(map, 0, &err));
    SCI_OK(SCISetSegmentUnavailable(seg, 0, 0, &err));
    SCI_OK(SCIRemoveSegment(seg, 0, &err));
    SCI_OK(SCIRemoveInterrupt(intr, 0, &err));
    SCI_OK(SCIRemoveDataInterrupt(dintr, 0, &err));
    CHECK_EQ(g.calls, 2);
    sci_end(sd);
    h_put(3);
}

struct ev {
    sem_t sem;
    _Atomic int lost;
};

static sci_callback_action_t on_segment(void *arg, sci_remote_segment_t segment,
                                        sci_segment_cb_reason_t reason, sci_error_t status)
{
    struct ev *e = arg;
    if (reason == SCI_CB_LOST || reason == SCI_CB_DISCONNECT) {
        atomic_store(&e->lost, 1);
        sem_post(&e->sem);
        return SCI_CALLBACK_CANCEL;
    }
    return SCI_CALLBACK_CONTINUE;
}

struct dma_done {
    sem_t sem;
    _Atomic int status;
};

static sci_callback_action_t on_dma(void *arg, sci_dma_queue_t q, sci_error_t status)
{
    struct dma_done *d = arg;
    atomic_store(&d->status, (int)status);
    sem_post(&d->sem);
    return SCI_CALLBACK_CONTINUE;
}

/* Host b: connects, checks, stores, copies, DMAs and triggers. */
static void user(void *arg)
{
    sci_error_t err;
    sci_desc_t sd = sci_start();
    sci_remote_segment_t rseg;
    sci_map_t map, lmap;
    sci_sequence_t seq;
    struct ev ev = { 0 };
    sem_init(&ev.sem, 0, 0);
    unsigned node;
    SCI_OK(SCIGetLocalNodeId(0, &node, 0, &err));
    CHECK_EQ(node, NODE_B);
    SCI_OK(SCIConnectSegment(sd, &rseg, NODE_A, SEG_ID, 0, on_segment, &ev, 10000,
                             SCI_FLAG_USE_CALLBACK, &err));
    CHECK_EQ(SCIGetRemoteSegmentSize(rseg), SEG_SIZE);
    CHECK_EQ(SCIGetRemoteSegmentId(rseg), SEG_ID);
    CHECK_EQ(SCIGetRemoteSegmentNodeId(rseg), NODE_A);
    volatile uint8_t *p = SCIMapRemoteSegment(rseg, &map, 0, 0, NULL, 0, &err);
    CHECK(p);
    CHECK_EQ(SCIGetMapSize(map), SEG_SIZE);
    CHECK(SCIGetMapPointer(map) == p);
    for (size_t i = 0; i < SEG_SIZE; i++)
        CHECK_EQ(p[i], pat(1, i));
    SCI_OK(SCICreateMapSequence(map, &seq, 0, &err));
    sci_sequence_status_t st;
    SCI_OK(st = SCIStartSequence(seq, 0, &err));
    CHECK_EQ(st, SCI_SEQ_OK);
    for (size_t i = 0; i < SEG_SIZE / 2; i++)
        p[i] = pat(2, i);
    SCIStoreBarrier(seq, 0);
    SCIFlush(seq, 0);
    SCI_OK(st = SCICheckSequence(seq, 0, &err));
    CHECK_EQ(st, SCI_SEQ_OK);
    /* SCIMemCpy both ways, checked */
    uint8_t buf[4096], back[4096];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = pat(2, SEG_SIZE / 4 + i);
    SCI_OK(SCIMemCpy(seq, buf, map, SEG_SIZE / 4, sizeof buf, SCI_FLAG_ERROR_CHECK, &err));
    SCI_OK(SCIMemCpy(seq, back, map, SEG_SIZE / 4, sizeof back, SCI_FLAG_BLOCK_READ | SCI_FLAG_ERROR_CHECK, &err));
    CHECK(memcmp(buf, back, sizeof buf) == 0);
    sci_remote_interrupt_t rintr;
    SCI_OK(SCIConnectInterrupt(sd, &rintr, NODE_A, 0, INTR_NO, 10000, 0, &err));
    h_get(); /* a is ready */
    SCI_OK(SCITriggerInterrupt(rintr, 0, &err));

    /* DMA from a segment of b's into the third quarter: one transfer waited for... */
    sci_local_segment_t lseg;
    SCI_OK(SCICreateSegment(sd, &lseg, 0, SEG_SIZE, NULL, NULL, SCI_FLAG_AUTO_ID, &err));
    volatile uint8_t *l = SCIMapLocalSegment(lseg, &lmap, 0, 0, NULL, 0, &err);
    CHECK(l);
    for (size_t i = 0; i < SEG_SIZE; i++)
        l[i] = pat(3, i);
    sci_dma_queue_t q;
    SCI_OK(SCICreateDMAQueue(sd, &q, 0, 4, 0, &err));
    CHECK_EQ(SCIDMAQueueState(q), SCI_DMAQUEUE_IDLE);
    SCI_OK(SCIStartDmaTransfer(q, lseg, rseg, SEG_SIZE / 2, SEG_SIZE / 16, SEG_SIZE / 2, NULL, NULL,
                               SCI_FLAG_DMA_WAIT, &err));
    CHECK_EQ(SCIDMAQueueState(q), SCI_DMAQUEUE_DONE);
    /* ... a vector, waited for with SCIWaitForDMAQueue ... */
    dis_dma_vec_t vec[3];
    for (int i = 0; i < 3; i++)
        vec[i] = (dis_dma_vec_t){ .size = SEG_SIZE / 16,
                                  .local_offset = SEG_SIZE / 2 + (size_t)(i + 1) * SEG_SIZE / 16,
                                  .remote_offset = SEG_SIZE / 2 + (size_t)(i + 1) * SEG_SIZE / 16 };
    SCI_OK(SCIStartDmaTransferVec(q, lseg, rseg, 2, vec, NULL, NULL, 0, &err));
    sci_dma_queue_state_t qs;
    SCI_OK(qs = SCIWaitForDMAQueue(q, SCI_INFINITE_TIMEOUT, 0, &err));
    CHECK_EQ(qs, SCI_DMAQUEUE_DONE);
    /* ... and one with a callback */
    struct dma_done dd = { .status = -1 };
    sem_init(&dd.sem, 0, 0);
    SCI_OK(SCIStartDmaTransferVec(q, lseg, rseg, 1, &vec[2], on_dma, &dd, SCI_FLAG_USE_CALLBACK, &err));
    sem_wait(&dd.sem);
    CHECK_EQ(dd.status, SCI_ERR_OK);
    /* a read back into b's segment, over the start */
    SCI_OK(SCIStartDmaTransfer(q, lseg, rseg, 0, SEG_SIZE / 2, 0, NULL, NULL,
                               SCI_FLAG_DMA_READ | SCI_FLAG_DMA_WAIT, &err));
    for (size_t i = 0; i < SEG_SIZE / 2; i++)
        CHECK_EQ(l[i], pat(2, i));
    SCI_OK(SCIRemoveDMAQueue(q, 0, &err));

    sci_remote_data_interrupt_t rd;
    SCI_OK(SCIConnectDataInterrupt(sd, &rd, NODE_A, 0, DINTR_NO, 10000, 0, &err));
    SCI_OK(SCITriggerDataInterrupt(rd, "hello", 5, 0, &err));
    uint8_t big[SCI_MAX_DATA_INTERRUPT_SIZE];
    for (unsigned i = 0; i < sizeof big; i++)
        big[i] = (uint8_t)i;
    SCI_OK(SCITriggerDataInterrupt(rd, big, sizeof big, 0, &err));
    CHECK_EQ(h_get(), 2);
    SCI_OK(SCIDisconnectDataInterrupt(rd, 0, &err));
    SCI_OK(SCIDisconnectInterrupt(rintr, 0, &err));
    SCI_OK(SCIRemoveSequence(seq, 0, &err));
    SCI_OK(SCIUnmapSegment(map, 0, &err));
    /* the owner removes its segment: the callback hears of it */
    h_put(1);
    sem_wait(&ev.sem);
    CHECK_EQ(ev.lost, 1);
    SCI_OK(SCIDisconnectSegment(rseg, 0, &err));
    SCI_OK(SCIUnmapSegment(lmap, 0, &err));
    SCI_OK(SCIRemoveSegment(lseg, 0, &err));
    sci_end(sd);
}

static void test_segments_dma_interrupts(void **state)
{
    struct h_proc a = h_spawn(FX.name, "a", owner, NULL);
    struct h_proc b = h_spawn(FX.name, "b", user, NULL);
    assert_int_equal(h_from(&a), 1);
    h_to(&b, 1);
    assert_int_equal(h_from(&a), 2);
    h_to(&b, 2);
    assert_int_equal(h_from(&b), 1);
    h_to(&a, 1);
    assert_int_equal(h_from(&a), 3);
    assert_int_equal(h_join(&b), 0);
    assert_int_equal(h_join(&a), 0);
}

/* ---------------------------------------------------------------- registered memory */

static void registrar(void *arg)
{
    sci_error_t err;
    sci_desc_t sd = sci_start();
    size_t size = 64 * 1024;
    uint8_t *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(mem != MAP_FAILED);
    for (size_t i = 0; i < size; i++)
        mem[i] = pat(4, i);
    sci_local_segment_t seg;
    sci_map_t map;
    SCI_OK(SCICreateSegment(sd, &seg, 77, size, NULL, NULL, SCI_FLAG_EMPTY, &err));
    SCI_OK(SCIRegisterSegmentMemory(mem, size, seg, SCI_FLAG_LOCK_USER_MEM, &err));
    /* the segment holds the caller's bytes, and the caller's pointer reaches the segment */
    volatile uint8_t *p = SCIMapLocalSegment(seg, &map, 0, 0, NULL, 0, &err);
    CHECK(p);
    for (size_t i = 0; i < size; i++)
        CHECK_EQ(p[i], pat(4, i));
    mem[100] = 0xab;
    CHECK_EQ(p[100], 0xab);
    SCI_OK(SCIPrepareSegment(seg, 0, 0, &err));
    SCI_OK(SCISetSegmentAvailable(seg, 0, 0, &err));
    h_put(1);
    h_get(); /* c wrote through its connection */
    CHECK_EQ(mem[200], 0xcd);
    SCI_OK(SCIUnmapSegment(map, 0, &err));
    SCI_OK(SCIRemoveSegment(seg, 0, &err));
    /* given back: the caller's memory again, with what the segment held last */
    CHECK_EQ(mem[100], 0xab);
    CHECK_EQ(mem[200], 0xcd);
    CHECK_EQ(mem[300], pat(4, 300));
    mem[300] = 1;
    munmap(mem, size);
    sci_end(sd);
}

static void reg_user(void *arg)
{
    sci_error_t err;
    sci_desc_t sd = sci_start();
    sci_remote_segment_t r;
    sci_map_t map;
    h_get();
    SCI_OK(SCIConnectSegment(sd, &r, NODE_B, 77, 0, NULL, NULL, 10000, 0, &err));
    volatile uint8_t *p = SCIMapRemoteSegment(r, &map, 0, 0, NULL, 0, &err);
    CHECK(p);
    CHECK_EQ(p[100], 0xab);
    CHECK_EQ(p[101], pat(4, 101));
    p[200] = 0xcd;
    SCI_OK(SCIUnmapSegment(map, 0, &err));
    SCI_OK(SCIDisconnectSegment(r, 0, &err));
    sci_end(sd);
}

static void test_registered_memory(void **state)
{
    struct h_proc b = h_spawn(FX.name, "b", registrar, NULL);
    struct h_proc c = h_spawn(FX.name, "c", reg_user, NULL);
    assert_int_equal(h_from(&b), 1);
    h_to(&c, 1);
    assert_int_equal(h_join(&c), 0);
    h_to(&b, 1);
    assert_int_equal(h_join(&b), 0);
}

/* ---------------------------------------------------------------- SmartIO */

/* Host b or c: borrow nvme0 by fabric device id, read its registers through its BAR as a
 * segment, share device memory with the other host, map segments for the device. */
static void borrower(void *arg)
{
    sci_error_t err;
    bool first = arg != NULL;
    sci_desc_t sd = sci_start();
    sci_device_t dev, dev2;
    sci_error_t e;
    SCIBorrowDevice(sd, &dev, 0x40002, 0, &e); /* accel0 is not lent out */
    CHECK_EQ(e, SCI_ERR_ACCESS);
    SCIBorrowDevice(sd, &dev, 0x90001, 0, &e);
    CHECK_EQ(e, SCI_ERR_DEVICE_NOT_FOUND);
    sci_smartio_device_name_t byname = { .name = "nvme0" };
    sci_smartio_query_device_t q = { .subcommand = SCI_Q_DEVICE_FDID_BY_NAME, .data = &byname };
    SCI_OK(SCIQuery(SCI_Q_DEVICE, &q, 0, &err));
    CHECK_EQ(byname.fdid, NVME_FDID);
    sci_smartio_device_info_t info;
    q = (sci_smartio_query_device_t){ .fdid = NVME_FDID, .subcommand = SCI_Q_DEVICE_INFO, .data = &info };
    SCI_OK(SCIQuery(SCI_Q_DEVICE, &q, 0, &err));
    CHECK_EQ(info.node_id, NODE_A);
    CHECK(strcmp(info.name, "nvme0") == 0 && strcmp(info.type, "nvme") == 0);
    /* two handles, one borrow */
    SCI_OK(SCIBorrowDevice(sd, &dev, NVME_FDID, 0, &err));
    SCI_OK(SCIBorrowDevice(sd, &dev2, NVME_FDID, 0, &err));
    CHECK_EQ(SCIGetFabricDeviceId(dev), NVME_FDID);

    /* BAR 0 as a segment: the controller's CAP and VS registers */
    sci_remote_segment_t bar;
    sci_map_t bmap;
    SCI_OK(SCIConnectDeviceMemory(sd, &bar, 0, dev, 0, 0, SCI_FLAG_BAR, &err));
    CHECK(SCIGetRemoteSegmentSize(bar) >= 16384);
    CHECK_EQ(SCIGetRemoteSegmentNodeId(bar), NODE_A);
    volatile uint32_t *regs = SCIMapRemoteSegment(bar, &bmap, 0, 4096, NULL, SCI_FLAG_IO_MAP_IOSPACE, &err);
    CHECK(regs);
    CHECK_EQ(regs[2], 0x10400); /* VS: NVMe 1.4 */
    sci_error_t e2;
    SCIReturnDevice(dev, 0, &e2);
    CHECK_EQ(e2, SCI_ERR_BUSY); /* its BAR is still connected through it */

    /* device memory 3, shared: b writes, c reads */
    sci_remote_segment_t shared;
    sci_map_t smap;
    SCI_OK(SCIConnectDeviceMemory(sd, &shared, 0, dev2, 3, 0, SCI_FLAG_SHARED, &err));
    volatile uint32_t *s = SCIMapRemoteSegment(shared, &smap, 0, 4096, NULL, 0, &err);
    CHECK(s);
    if (first) {
        s[10] = 0x5a5a1234;
        h_put(1);
        h_get();
    } else {
        h_get();
        CHECK_EQ(s[10], 0x5a5a1234);
        h_put(1);
    }
    /* private device memory: this process's own */
    sci_remote_segment_t priv;
    SCI_OK(SCIConnectDeviceMemory(sd, &priv, 0, dev2, 0, 0, SCI_FLAG_PRIVATE, &err));
    sci_ioaddr_t io_priv, io_local;
    SCI_OK(SCIMapRemoteSegmentForDevice(priv, dev2, &io_priv, 0, 0, &err));
    /* a local segment for the device, and the BAR for the device (peer to peer to itself) */
    sci_local_segment_t l;
    SCI_OK(SCICreateSegment(sd, &l, 0, 65536, NULL, NULL, SCI_FLAG_AUTO_ID, &err));
    sci_error_t e3;
    SCIMapLocalSegmentForDevice(l, 0, dev2, &io_local, 0, 0, &e3);
    CHECK_EQ(e3, SCI_ERR_SEGMENT_NOT_PREPARED);
    SCI_OK(SCIPrepareSegment(l, 0, 0, &err));
    SCI_OK(SCIMapLocalSegmentForDevice(l, 0, dev2, &io_local, 0, 0, &err));
    CHECK(io_local != 0 && io_priv != 0 && io_local != io_priv);
    SCI_OK(SCIUnmapLocalSegmentForDevice(l, 0, dev2, 0, &err));
    SCIUnmapLocalSegmentForDevice(l, 0, dev2, 0, &e3);
    CHECK_EQ(e3, SCI_ERR_ILLEGAL_OPERATION); /* not mapped any more */
    SCI_OK(SCIUnmapRemoteSegmentForDevice(priv, dev2, 0, &err));
    SCI_OK(SCIDisconnectSegment(priv, 0, &err));
    SCI_OK(SCIRemoveSegment(l, 0, &err));
    SCI_OK(SCIUnmapSegment(smap, 0, &err));
    SCI_OK(SCIDisconnectSegment(shared, 0, &err));
    SCI_OK(SCIUnmapSegment(bmap, 0, &err));
    SCI_OK(SCIDisconnectSegment(bar, 0, &err));
    SCI_OK(SCIReturnDevice(dev, 0, &err));
    SCI_OK(SCIReturnDevice(dev2, 0, &err));
    sci_end(sd);
}

static void test_smartio(void **state)
{
    struct h_proc b = h_spawn(FX.name, "b", borrower, (void *)1);
    struct h_proc c = h_spawn(FX.name, "c", borrower, NULL);
    assert_int_equal(h_from(&b), 1);
    h_to(&c, 1);
    assert_int_equal(h_from(&c), 1);
    h_to(&b, 1);
    assert_int_equal(h_join(&b), 0);
    assert_int_equal(h_join(&c), 0);
    /* returned by both: nobody borrows it */
    assert_int_equal(h_cli(FX.name, "device list | grep -q 'nvme0 .* yes *-$'"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_segments_dma_interrupts),
        cmocka_unit_test(test_registered_memory),
        cmocka_unit_test(test_smartio),
    };
    return cmocka_run_group_tests(tests, setup, fx_teardown);
}
