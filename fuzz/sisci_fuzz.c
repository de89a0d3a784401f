/*
 * libFuzzer harness for the SISCI API (libsisci): what a buggy SISCI program can do. Each
 * input is a run of calls on a pool of 32 handle slots; a call takes its handle from a slot
 * the input names, so it gets live handles, freed ones, handles of another kind and empty
 * slots alike, with flags, sizes, offsets, ids and numbers from the input. The harness is an
 * application on host b of a fabric it boots once (examples/topologies/smartio3.ini, nvme0
 * lent out; name in $NTBLEND_FUZZ_FABRIC, else its own). Stores and copies go only through
 * maps the library returned, within their size: a crash, a sanitizer report or a wait that
 * does not end is a finding. After each input everything still open is closed again, in
 * whatever order succeeds; something that can never be closed is a finding too.
 *
 * Input: records of [op u8][slot u8][slot u8][slot u8][a u32][b u32][c u32] (16 bytes), at
 * most 64; run() says what each op makes of them. fuzz/corpus-sisci holds seeds that walk
 * through every call with valid handles first (made by fuzz/sisci_seeds.py);
 * NTBLEND_FUZZ_TRACE=1 prints what each record did.
 */
#define _GNU_SOURCE
#include <libgen.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sisci_api.h"

#define SLOTS 32
#define REC 16
#define BUF (64u * 1024u)

enum kind { K_NONE, K_DESC, K_LSEG, K_RSEG, K_MAP, K_SEQ, K_DMAQ, K_LI, K_RI, K_LDI, K_RDI, K_DEV };
static struct slot {
    enum kind kind;
    void *h;
    bool readonly; /* a map made with SCI_FLAG_READONLY_MAP: a store through it faults */
} slot[SLOTS];
static char fabric[64];
static bool own;
static uint8_t *buf; /* page-aligned memory of ours: registered, copied from and to */
static bool trace;

static void down(void)
{
    char cmd[512];
    if (own && fabric[0]) {
        snprintf(cmd, sizeof cmd, "ntblend --fabric %s down >/dev/null 2>&1", fabric);
        if (system(cmd)) { /* nothing more to do */ }
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    char exe[512], cmd[1200];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n < 0)
        abort();
    exe[n] = 0;
    /* the CLI beside the harness (in the build's bin/) */
    char path[2048];
    snprintf(path, sizeof path, "%s:%s", dirname(exe), getenv("PATH") ? getenv("PATH") : "");
    setenv("PATH", path, 1);
    const char *f = getenv("NTBLEND_FUZZ_FABRIC");
    own = !f || !*f; /* named by the caller, who brings it down; else ours, down at exit */
    snprintf(fabric, sizeof fabric, "%s", own ? "" : f);
    if (own) {
        snprintf(fabric, sizeof fabric, "fuzz-sisci-%d", (int)getpid());
        atexit(down);
    }
    snprintf(cmd, sizeof cmd,
             "ntblend --fabric %s up %s >/dev/null && ntblend --fabric %s device add nvme0 >/dev/null",
             fabric, NTBLEND_FUZZ_SISCI_TOPO, fabric);
    if (system(cmd)) {
        fprintf(stderr, "sisci harness: cannot boot fabric %s\n", fabric);
        abort();
    }
    trace = getenv("NTBLEND_FUZZ_TRACE") != NULL;
    setenv("NTBLEND_FABRIC", fabric, 1);
    setenv("NTBLEND_HOST", "b", 1);
    buf = mmap(NULL, BUF, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    sci_error_t err;
    SCIInitialize(0, &err);
    if (buf == MAP_FAILED || err != SCI_ERR_OK)
        abort();
    return 0;
}

/* Close what a slot holds: 0 (or the handle was not live), or the call's error. */
static sci_error_t close_slot(struct slot *s)
{
    sci_error_t err = SCI_ERR_OK;
    switch (s->kind) {
    case K_SEQ: SCIRemoveSequence(s->h, 0, &err); break;
    case K_MAP: SCIUnmapSegment(s->h, 0, &err); break;
    case K_DMAQ: SCIAbortDMAQueue(s->h, 0, &err); SCIRemoveDMAQueue(s->h, 0, &err); break;
    case K_RI: SCIDisconnectInterrupt(s->h, 0, &err); break;
    case K_RDI: SCIDisconnectDataInterrupt(s->h, 0, &err); break;
    case K_LI: SCIRemoveInterrupt(s->h, 0, &err); break;
    case K_LDI: SCIRemoveDataInterrupt(s->h, 0, &err); break;
    case K_RSEG: SCIDisconnectSegment(s->h, 0, &err); break;
    case K_LSEG: SCIRemoveSegment(s->h, 0, &err); break;
    case K_DEV: SCIReturnDevice(s->h, 0, &err); break;
    case K_DESC: SCIClose(s->h, 0, &err); break;
    default: break;
    }
    if (err == SCI_ERR_OK || err == SCI_ERR_ILLEGAL_PARAMETER)
        s->kind = K_NONE; /* closed, or closed already through the library's own order */
    return s->kind == K_NONE ? SCI_ERR_OK : err;
}

/* A new handle into slot i, or the first free one: none is ever lost from the pool. A
 * closed slot keeps its handle, so later calls get it as a freed one. */
static struct slot *put(int i, enum kind k, void *h)
{
    struct slot *s = &slot[i % SLOTS];
    for (int j = 0; s->kind != K_NONE && j < SLOTS; j++)
        s = &slot[j];
    if (s->kind != K_NONE) { /* full: this one goes at once */
        struct slot t = { k, h, false };
        close_slot(&t);
        return NULL;
    }
    *s = (struct slot){ k, h, false };
    return s;
}

/* A new map: whether a store through it may be tried (not through a read-only one, which
 * faults by design, as a store to a read-only SISCI map does on the hardware). */
static void put_map(int i, void *h, unsigned flags)
{
    struct slot *s = put(i, K_MAP, h);
    if (s)
        s->readonly = flags & SCI_FLAG_READONLY_MAP;
}

/* Sizes and offsets: mostly small, sometimes at the edges. */
static size_t size_of(uint32_t v)
{
    switch (v >> 28) {
    case 0: return 0;
    case 1: return SIZE_MAX - (v & 0xff);
    case 2: return (size_t)1 << (v & 63);
    default: return v & 0x3ffff;
    }
}

static unsigned node_of(uint32_t v)
{
    static const unsigned nodes[] = { 4, 8, 12, 999 };
    return nodes[v & 3];
}

/* A local segment's callback: it only has to be called safely (and stop with the segment). */
static sci_callback_action_t on_lseg(void *arg, sci_local_segment_t seg, sci_segment_cb_reason_t why,
                                     unsigned int node, unsigned int adapter, sci_error_t status)
{
    return SCI_CALLBACK_CONTINUE;
}

static void run(const uint8_t *r)
{
    uint8_t op = r[0];
    struct slot *s1 = &slot[r[1] % SLOTS], *s2 = &slot[r[2] % SLOTS], *s3 = &slot[r[3] % SLOTS];
    uint32_t a, b, c;
    memcpy(&a, r + 4, 4);
    memcpy(&b, r + 8, 4);
    memcpy(&c, r + 12, 4);
    void *h1 = s1->h, *h2 = s2->h, *h3 = s3->h;
    unsigned fl = c & ~SCI_FLAG_USE_CALLBACK, n = a & 0xffff, adapter = (b >> 24) & 3;
    sci_error_t err = SCI_ERR_OK;
    void *o = NULL;
    switch (op % 40) {
    case 0: SCIOpen((sci_desc_t *)&o, fl & 1 ? SCI_FLAG_THREAD_SAFE : fl, &err); if (!err) put(r[3], K_DESC, o); break;
    case 1: SCIClose(h1, fl & 1, &err); if (!err) s1->kind = K_NONE; break;
    case 2: SCICreateSegment(h1, (sci_local_segment_t *)&o, n, size_of(b), a & 0x10000 ? on_lseg : NULL, NULL,
                             fl | (c & SCI_FLAG_USE_CALLBACK), &err); if (!err) put(r[3], K_LSEG, o); break;
    case 3: SCIRemoveSegment(h1, fl & 1, &err); if (!err) s1->kind = K_NONE; break;
    case 4: SCIPrepareSegment(h1, adapter, fl & 1, &err); break;
    case 5: SCISetSegmentAvailable(h1, adapter, fl & 1, &err); break;
    case 6: SCISetSegmentUnavailable(h1, adapter, fl & 1, &err); break;
    case 7: SCIConnectSegment(h1, (sci_remote_segment_t *)&o, node_of(b), n, adapter, NULL, NULL, b & 3, fl, &err); if (!err) put(r[3], K_RSEG, o); break;
    case 8: SCIDisconnectSegment(h1, fl & 1, &err); if (!err) s1->kind = K_NONE; break;
    case 9: SCIMapRemoteSegment(h1, (sci_map_t *)&o, size_of(a), size_of(b), NULL, fl, &err); if (!err) put_map(r[3], o, fl); break;
    case 10: SCIMapLocalSegment(h1, (sci_map_t *)&o, size_of(a), size_of(b), NULL, fl, &err); if (!err) put_map(r[3], o, fl); break;
    case 11: SCIUnmapSegment(h1, fl & 1, &err); if (!err) s1->kind = K_NONE; break;
    case 12: SCICreateMapSequence(h1, (sci_sequence_t *)&o, fl & 1, &err); if (!err) put(r[3], K_SEQ, o); break;
    case 13: SCIRemoveSequence(h1, fl & 1, &err); if (!err) s1->kind = K_NONE; break;
    case 14: SCIStartSequence(h1, fl & 1, &err); break;
    case 15: SCICheckSequence(h1, fl & 1, &err); break;
    case 16: SCIMemCpy(h2, buf, h1, size_of(a), size_of(b) % BUF, fl, &err); break;
    case 17: SCICreateDMAQueue(h1, (sci_dma_queue_t *)&o, adapter, a & 7, fl & 1 ? SCI_FLAG_DMA_ADAPTER : fl, &err); if (!err) put(r[3], K_DMAQ, o); break;
    case 18: SCIRemoveDMAQueue(h1, fl & 1, &err); if (!err) s1->kind = K_NONE; break;
    case 19: SCIStartDmaTransfer(h1, h2, h3, size_of(a), size_of(b), size_of(c), NULL, NULL, fl & (SCI_FLAG_DMA_READ | SCI_FLAG_DMA_WAIT | 1u << 30), &err); break;
    case 20: { dis_dma_vec_t v[4];
        for (int i = 0; i < 4; i++)
            v[i] = (dis_dma_vec_t){ size_of(a >> i), size_of(b >> i), size_of(c >> i), i == 3 ? fl : 0 };
        SCIStartDmaTransferVec(h1, h2, h3, a & 7 ? (a & 3) + 1 : 0, v, NULL, NULL, fl & SCI_FLAG_DMA_READ, &err);
        break; }
    case 21: SCIWaitForDMAQueue(h1, b & 3, fl & 1, &err); break;
    case 22: SCIAbortDMAQueue(h1, fl & 1, &err); break;
    case 23: SCICreateInterrupt(h1, (sci_local_interrupt_t *)&o, adapter, &n, NULL, NULL, fl, &err); if (!err) put(r[3], K_LI, o); break;
    case 24: SCIRemoveInterrupt(h1, fl & 1, &err); if (!err) s1->kind = K_NONE; break;
    case 25: SCIConnectInterrupt(h1, (sci_remote_interrupt_t *)&o, node_of(b), adapter, s2->kind == K_LI ? SCIGetLocalInterruptNo(h2) : n, b & 3, fl & 1, &err); if (!err) put(r[3], K_RI, o); break;
    case 26: SCIDisconnectInterrupt(h1, fl & 1, &err); if (!err) s1->kind = K_NONE; break;
    case 27: SCITriggerInterrupt(h1, fl & 1, &err); break;
    case 28: {
        unsigned node, ad;
        if (a & 0x100)
            SCIWaitForLocalSegmentEvent(h1, a & 0x200 ? NULL : &node, &ad, b & 3, fl & 1, &err);
        else
            SCIWaitForInterrupt(h1, b & 3, fl & 1, &err);
        break; }
    case 29: SCICreateDataInterrupt(h1, (sci_local_data_interrupt_t *)&o, adapter, &n, NULL, NULL, fl, &err); if (!err) put(r[3], K_LDI, o); break;
    case 30: SCIConnectDataInterrupt(h1, (sci_remote_data_interrupt_t *)&o, node_of(b), adapter, n, b & 3, fl & 1, &err); if (!err) put(r[3], K_RDI, o); break;
    case 31: SCITriggerDataInterrupt(h1, a & 1 ? buf : NULL, b & 0xff, fl & 1, &err); break;
    case 32: { unsigned len = b & 0xff;
        SCIWaitForDataInterrupt(h1, a & 1 ? buf : NULL, a & 2 ? &len : NULL, b & 3, fl & 1, &err);
        if (!err && len > 0xff)
            abort(); /* more than room was reported as copied */
        break; }
    case 33: SCIBorrowDevice(h1, (sci_device_t *)&o, a & 1 ? 0x40001ull : (unsigned long long)b << 8 | a, fl & SCI_FLAG_EXCLUSIVE, &err); if (!err) put(r[3], K_DEV, o); break;
    case 34: SCIReturnDevice(h1, fl & 1, &err); if (!err) s1->kind = K_NONE; break;
    case 35: SCIConnectDeviceMemory(h1, (sci_remote_segment_t *)&o, adapter, h2, a & 7, b & 1 ? 0 : b, fl, &err); if (!err) put(r[3], K_RSEG, o); break;
    case 36: { sci_ioaddr_t io;
        if (a & 1)
            SCIMapLocalSegmentForDevice(h1, adapter, h2, &io, size_of(b), fl & 1, &err);
        else
            SCIMapRemoteSegmentForDevice(h1, h2, &io, size_of(b), fl & 1, &err);
        break; }
    case 37:
        if (a & 1)
            SCIUnmapLocalSegmentForDevice(h1, adapter, h2, fl & 1, &err);
        else
            SCIUnmapRemoteSegmentForDevice(h1, h2, fl & 1, &err);
        break;
    case 38:
        if (a & 1)
            SCIRegisterSegmentMemory(buf + (b & 0xffff) % BUF, size_of(c) % (BUF - (b & 0xffff) % BUF + 1), h1, a & ~1u, &err);
        else
            SCIAttachPhysicalMemory((sci_ioaddr_t)b << 12 | (a >> 20), NULL, 0, size_of(c), h1, fl, &err);
        break;
    case 39: { /* a store and a load through a map, inside it */
        volatile uint8_t *p = SCIGetMapPointer(h1);
        size_t sz = SCIGetMapSize(h1);
        if (p && sz && !(fl & 1)) {
            if (!(s1->kind == K_MAP && s1->readonly))
                p[b % sz] = (uint8_t)a;
            (void)p[c % sz];
        }
        /* SCIQuery: the data of the command's own type (a caller's to get right), its
         * fields from the input; strings and results land in buf */
        buf[BUF - 1] = 0;
        sci_query_string_t qs = { (char *)buf, b >> 16 };
        sci_query_adapter_t qa = { .subcommand = a & 15, .localAdapterNo = adapter, .data = a & 16 ? NULL : buf };
        sci_query_system_t qy = { .subcommand = a & 7, .data = a & 16 ? NULL : buf };
        sci_smartio_device_name_t nm = { .name = a & 32 ? "nvme0" : (char *)buf + 1 };
        sci_smartio_query_device_t qd = { .fdid = a & 64 ? 0x40001 : c, .subcommand = a & 3,
                                          .data = a & 3 ? (void *)buf : (void *)&nm };
        if ((a & 3) == SCI_Q_DEVICE_FDID_BY_NAME)
            qd.data = &nm;
        unsigned cmd = b & 7;
        void *data = cmd <= SCI_Q_API ? (void *)&qs : cmd == SCI_Q_ADAPTER ? (void *)&qa
                   : cmd == SCI_Q_SYSTEM ? (void *)&qy : cmd == SCI_Q_DEVICE ? (void *)&qd : buf;
        if (qs.length > BUF)
            qs.length = BUF;
        SCIQuery(cmd, b & 8 ? NULL : data, fl & 1, &err);
        break; }
    }
    if (trace) /* NTBLEND_FUZZ_TRACE=1: what each record did, for writing seeds */
        fprintf(stderr, "op %2u slots %2u %2u %2u: %s\n", op % 40, r[1] % SLOTS, r[2] % SLOTS,
                r[3] % SLOTS, err ? SCIGetErrorString(err) : "ok");
}

/* Close everything still open, children first; what never closes is a finding (the
 * library keeps something alive that it should not, or refuses to let it go). */
static void teardown(void)
{
    static const enum kind order[] = { K_SEQ, K_MAP, K_DMAQ, K_RI, K_RDI, K_LI, K_LDI, K_RSEG,
                                       K_LSEG, K_DEV, K_DESC };
    for (int round = 0; round < 100; round++) {
        bool left = false;
        for (size_t k = 0; k < sizeof order / sizeof order[0]; k++)
            for (int i = 0; i < SLOTS; i++)
                if (slot[i].kind == order[k] && close_slot(&slot[i]))
                    left = true;
        if (!left)
            return;
        usleep(1000);
    }
    for (int i = 0; i < SLOTS; i++)
        if (slot[i].kind != K_NONE)
            fprintf(stderr, "sisci harness: slot %d (kind %d) cannot be closed\n", i, slot[i].kind);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    memset(slot, 0, sizeof slot);
    for (size_t i = 0; i + REC <= size && i < 64 * REC; i += REC)
        run(data + i);
    teardown();
    return 0;
}
