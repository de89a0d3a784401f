/*
 * sisci_bench: what the SISCI layer costs over ntblend's native segment API, measured side
 * by side in one run, in interleaved rounds (native, SISCI, native, ...), between two hosts:
 * CPU store bandwidth into a remote segment, remote load latency, DMA bandwidth, and the
 * interrupt round trip. A round's figure is the median of its samples; the report gives
 * each side's median over rounds and the median of the per-round ratios SISCI / native
 * (time per operation: above 1 means SISCI is slower), with their spread. docs/sisci.md has
 * the figures, scripts/bench-sisci.sh runs it.
 *
 * DMA and interrupts, whose figures move with the machine's load (the DMA engine is a thread
 * of the host's agent, an interrupt wakes a thread on each side), are measured three ways in
 * the same rounds: native, SISCI, and native again through a second DMA queue and a second
 * pair of interrupts served by a second thread (and its own DMA source segment and
 * connection, as SISCI has its own). The second native side against the first (A/A, "aa" in
 * the report) is the noise floor the SISCI ratio is to be read against. DMA transfers take
 * turns one by one, so that each triple shares the moment's load; the order goes through all
 * six orders of the three (what ran just before counts), and the DMA queues are made anew each
 * round on rotated channels (each channel is a thread of the agent, not all equally quick).
 *
 *   ntblend run --host a -- sisci_bench serve PEER_NODE     (the other side; runs until killed)
 *   ntblend run --host b -- sisci_bench run PEER_NODE [ROUNDS]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ntblend/seg.h"
#include "sisci_api.h"
#include "tool_util.h"

#define SEG_ID 0x5b00u
#define SEG_SIZE (4u << 20)
#define SRV_NATIVE 0x5b01u /* interrupt numbers: the server's, then the client's */
#define SRV_SCI 0x5b02u
#define CLI_NATIVE 0x5b03u
#define CLI_SCI 0x5b04u
#define SRV_AA 0x5b05u /* a second native pair: the A/A check (aa) */
#define CLI_AA 0x5b06u
#define PINGS 2000
#define LOADS 20000
#define DMA_SIZE (1u << 20)
#define DMAS 24 /* transfers per side and round: every order of the three sides, 4 times */
#define STORES 64 /* MiB per store round */

static void fail(const char *what, int e)
{
    fprintf(stderr, "sisci_bench: %s: %s\n", what, e < 0 ? seg_strerror(e) : SCIGetErrorString((sci_error_t)e));
    exit(1);
}
#define SCI(call)                                                                           \
    do {                                                                                    \
        sci_error_t err;                                                                    \
        call;                                                                               \
        if (err != SCI_ERR_OK)                                                              \
            fail(#call, (int)err);                                                          \
    } while (0)
#define NAT(call)                                                                           \
    do {                                                                                    \
        int rc_ = (call);                                                                   \
        if (rc_)                                                                            \
            fail(#call, rc_);                                                               \
    } while (0)

/* ---------------------------------------------------------------- the server */

static unsigned peer;

static void *pong_native(void *arg)
{
    seg_desc_t *sd = arg;
    seg_intr_t *in;
    seg_rintr_t *out;
    static _Atomic int second;
    bool aa = atomic_fetch_add(&second, 1) == 1; /* the second thread serves the A/A pair */
    uint32_t id = aa ? SRV_AA : SRV_NATIVE;
    NAT(seg_intr_create(sd, &in, &id));
    NAT(seg_intr_connect(sd, &out, peer, aa ? CLI_AA : CLI_NATIVE, 0, -1));
    for (;;) {
        if (seg_intr_wait(in, -1))
            continue;
        /* a client after the first: its interrupt is a new one, connect to that */
        while (seg_intr_trigger(out) == -ENOENT) {
            seg_intr_disconnect(out);
            NAT(seg_intr_connect(sd, &out, peer, aa ? CLI_AA : CLI_NATIVE, 0, -1));
        }
    }
    return NULL;
}

static void *pong_sci(void *arg)
{
    sci_desc_t sd = arg;
    sci_local_interrupt_t in;
    sci_remote_interrupt_t out;
    unsigned n = SRV_SCI;
    SCI(SCICreateInterrupt(sd, &in, 0, &n, NULL, NULL, SCI_FLAG_FIXED_INTNO, &err));
    SCI(SCIConnectInterrupt(sd, &out, peer, 0, CLI_SCI, SCI_INFINITE_TIMEOUT, 0, &err));
    for (;;) {
        sci_error_t err;
        SCIWaitForInterrupt(in, SCI_INFINITE_TIMEOUT, 0, &err);
        if (err != SCI_ERR_OK)
            continue;
        for (SCITriggerInterrupt(out, 0, &err); err == SCI_ERR_NOT_CONNECTED;
             SCITriggerInterrupt(out, 0, &err)) { /* a new client: connect to its interrupt */
            SCI(SCIDisconnectInterrupt(out, 0, &err));
            SCI(SCIConnectInterrupt(sd, &out, peer, 0, CLI_SCI, SCI_INFINITE_TIMEOUT, 0, &err));
        }
    }
    return NULL;
}

static int serve(void)
{
    sci_desc_t sd;
    seg_desc_t *nsd;
    sci_local_segment_t seg;
    SCI(SCIOpen(&sd, 0, &err));
    NAT(seg_open(&nsd));
    SCI(SCICreateSegment(sd, &seg, SEG_ID, SEG_SIZE, NULL, NULL, 0, &err));
    SCI(SCIPrepareSegment(seg, 0, 0, &err));
    SCI(SCISetSegmentAvailable(seg, 0, 0, &err));
    pthread_t a, b, c;
    pthread_create(&a, NULL, pong_native, nsd);
    pthread_create(&c, NULL, pong_native, nsd);
    pthread_create(&b, NULL, pong_sci, sd);
    printf("ready\n");
    fflush(stdout);
    pthread_join(a, NULL);
    return 0;
}

/* ---------------------------------------------------------------- the client */

struct side { /* what one API gave the client */
    volatile uint8_t *remote;  /* the segment, mapped */
    double store, load; /* this round: ns per MiB stored, per load */
};

enum { NATIVE, SISCI, NATIVE2, SIDES }; /* NATIVE2: the A/A side (DMA and interrupts) */

/* The six orders of the three sides, taken in turn: each side follows each other side as
 * often (what ran just before, its memory in the caches, its threads awake, counts). */
static const int order[6][SIDES] = { { 0, 1, 2 }, { 1, 2, 0 }, { 2, 0, 1 },
                                     { 0, 2, 1 }, { 2, 1, 0 }, { 1, 0, 2 } };

static double median(double *v, int n);

/* Each figure of a round is the median of its samples (one MiB stored, a chunk of 1000
 * dependent loads, one DMA transfer, one round trip): a sample that lost its CPU to another
 * process moves it little. */
static double samples[PINGS], dma_samples[SIDES][DMAS];

static void measure_cpu(struct side *s, uint8_t *src)
{
    for (int i = 0; i < STORES; i++) {
        uint64_t t = tu_now_ns();
        memcpy((void *)(s->remote + (size_t)(i % (SEG_SIZE >> 20)) * (1u << 20)), src, 1u << 20);
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        samples[i] = (double)(tu_now_ns() - t);
    }
    s->store = median(samples, STORES);
    volatile uint64_t *w = (volatile uint64_t *)s->remote;
    uint64_t x = 0, off = 12345;
    for (int c = 0; c < LOADS / 1000; c++) {
        uint64_t t = tu_now_ns();
        for (int i = 0; i < 1000; i++) { /* dependent loads: each waits for the one before */
            x += w[off];
            off = (off * 2654435761u + x) % (SEG_SIZE / 8);
        }
        samples[c] = (double)(tu_now_ns() - t) / 1000;
    }
    s->load = median(samples, LOADS / 1000);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int run(int rounds)
{
    sci_desc_t sd;
    seg_desc_t *nsd;
    SCI(SCIOpen(&sd, 0, &err));
    NAT(seg_open(&nsd));
    /* the remote segment through both APIs, and a local one each for DMA */
    sci_remote_segment_t rs;
    sci_map_t map;
    sci_local_segment_t ls;
    seg_remote_t *nrs, *nrs2; /* the A/A side connects on its own too, as SISCI does */
    seg_map_t *nmap;
    seg_local_t *nls, *nls2; /* each side's own source, as SISCI has its own */
    struct side sci = { 0 }, nat = { 0 };
    SCI(SCIConnectSegment(sd, &rs, peer, SEG_ID, 0, NULL, NULL, 10000, 0, &err));
    SCI(sci.remote = SCIMapRemoteSegment(rs, &map, 0, 0, NULL, 0, &err));
    NAT(seg_connect(nsd, &nrs, peer, SEG_ID, 0, 10000));
    NAT(seg_connect(nsd, &nrs2, peer, SEG_ID, 0, 10000));
    nat.remote = seg_map_remote(nrs, 0, 0, 0, &nmap);
    if (!nat.remote)
        fail("seg_map_remote", -errno);
    SCI(SCICreateSegment(sd, &ls, 0, DMA_SIZE, NULL, NULL, SCI_FLAG_AUTO_ID, &err));
    NAT(seg_create(nsd, &nls, SEG_ID_AUTO, DMA_SIZE));
    NAT(seg_create(nsd, &nls2, SEG_ID_AUTO, DMA_SIZE));
    /* Each queue is a channel of the engine, each channel a thread of the agent, and the
     * threads are not equally quick to wake (where the scheduler last ran them): a side on
     * one channel for the whole run would carry that channel's bias. So the queues are made
     * anew every round, in an order that rotates, and each side has each channel in turn. */
    sci_dma_queue_t dq = NULL;
    seg_dma_queue_t *nq = NULL, *nq2 = NULL;
    /* interrupts: ours for the answers, connections to the server's */
    sci_local_interrupt_t in;
    sci_remote_interrupt_t out;
    seg_intr_t *nin;
    seg_rintr_t *nout;
    unsigned n = CLI_SCI;
    uint32_t nid = CLI_NATIVE;
    SCI(SCICreateInterrupt(sd, &in, 0, &n, NULL, NULL, SCI_FLAG_FIXED_INTNO, &err));
    NAT(seg_intr_create(nsd, &nin, &nid));
    SCI(SCIConnectInterrupt(sd, &out, peer, 0, SRV_SCI, 10000, 0, &err));
    NAT(seg_intr_connect(nsd, &nout, peer, SRV_NATIVE, 0, 10000));
    seg_intr_t *ain; /* the A/A pair: native calls on both sides of the comparison */
    seg_rintr_t *aout;
    uint32_t aid = CLI_AA;
    NAT(seg_intr_create(nsd, &ain, &aid));
    NAT(seg_intr_connect(nsd, &aout, peer, SRV_AA, 0, 10000));

    /* Each server thread answers once it has connected back to us: ask until it does, then
     * take the answers to the extra asks, so that every later wait is for its own trigger. */
    seg_rintr_t *outs[] = { nout, aout };
    seg_intr_t *ins[] = { nin, ain };
    for (int p = 0; p < 3; p++) {
        int k = 0, ok = 0;
        for (; k < 1000 && !ok; k++) {
            sci_error_t err = SCI_ERR_OK;
            if (p == 2)
                SCITriggerInterrupt(out, 0, &err);
            else
                seg_intr_trigger(outs[p]);
            if (p == 2) {
                SCIWaitForInterrupt(in, 10, 0, &err);
                ok = err == SCI_ERR_OK;
            } else {
                ok = !seg_intr_wait(ins[p], 10);
            }
        }
        if (!ok)
            fail("no answer from the server", -ETIMEDOUT);
        for (;;) {
            sci_error_t err = SCI_ERR_OK;
            if (p == 2)
                SCIWaitForInterrupt(in, 50, 0, &err);
            if (p == 2 ? err != SCI_ERR_OK : seg_intr_wait(ins[p], 50) != 0)
                break;
        }
    }
    uint8_t *src = malloc(1u << 20);
    memset(src, 0x5a, 1u << 20);
    double *v[SIDES][4];
    for (int a = 0; a < SIDES; a++)
        for (int m = 0; m < 4; m++)
            v[a][m] = calloc((size_t)rounds, sizeof(double));
    for (int r = 0; r < rounds; r++) {
        for (int a = 0; a < 2; a++) { /* CPU: native and SISCI; the order alternates */
            int api = (r % 2) ^ a;
            struct side *s = api ? &sci : &nat;
            measure_cpu(s, src);
            v[api][0][r] = s->store;
            v[api][1][r] = s->load;
        }
        /* DMA: the queues on rotated channels, then one transfer of each side in turn, the
         * order rotating */
        if (dq)
            SCI(SCIRemoveDMAQueue(dq, 0, &err));
        seg_dma_queue_remove(nq);
        seg_dma_queue_remove(nq2);
        for (int k = 0; k < SIDES; k++)
            switch ((r + k) % SIDES) {
            case SISCI: SCI(SCICreateDMAQueue(sd, &dq, 0, 1, 0, &err)); break;
            case NATIVE: NAT(seg_dma_queue_create(nsd, &nq, 0)); break;
            default: NAT(seg_dma_queue_create(nsd, &nq2, 0)); break;
            }
        for (int i = 0; i < DMAS; i++)
            for (int k = 0; k < SIDES; k++) {
                int api = order[(i + r) % 6][k];
                uint64_t t = tu_now_ns();
                if (api == SISCI) {
                    SCI(SCIStartDmaTransfer(dq, ls, rs, 0, DMA_SIZE, 0, NULL, NULL, SCI_FLAG_DMA_WAIT, &err));
                } else {
                    seg_dma_queue_t *q = api == NATIVE ? nq : nq2;
                    NAT(seg_dma_transfer(q, api == NATIVE ? nls : nls2, 0, api == NATIVE ? nrs : nrs2,
                                         0, DMA_SIZE, 0));
                    NAT(seg_dma_wait(q, -1));
                }
                dma_samples[api][i] = (double)(tu_now_ns() - t);
            }
        for (int api = 0; api < SIDES; api++)
            v[api][2][r] = median(dma_samples[api], DMAS);
        /* interrupts: PINGS round trips of each side, in the round's order */
        for (int k = 0; k < SIDES; k++) {
            int api = order[r % 6][k];
            for (int i = 0; i < PINGS; i++) {
                uint64_t t = tu_now_ns();
                if (api == NATIVE2) {
                    NAT(seg_intr_trigger(aout));
                    NAT(seg_intr_wait(ain, 10000));
                } else if (api == SISCI) {
                    SCI(SCITriggerInterrupt(out, 0, &err));
                    SCI(SCIWaitForInterrupt(in, 10000, 0, &err));
                } else {
                    NAT(seg_intr_trigger(nout));
                    NAT(seg_intr_wait(nin, 10000));
                }
                samples[i] = (double)(tu_now_ns() - t);
            }
            v[api][3][r] = median(samples, PINGS);
        }
    }
    static const char *names[] = { "store_ns_per_mib", "load_ns", "dma_ns_per_mib", "intr_rtt_ns" };
    printf("{\"rounds\":%d", rounds);
    for (int m = 0; m < 4; m++) {
        double nm[rounds]; /* median() sorts: the rounds' order must stay for the ratios */
        memcpy(nm, v[NATIVE][m], sizeof nm);
        printf(",\"%s\":{\"native\":%.1f", names[m], median(nm, rounds));
        for (int api = SISCI; api < (m >= 2 ? SIDES : NATIVE2); api++) {
            double ratio[rounds];
            for (int r = 0; r < rounds; r++)
                ratio[r] = v[api][m][r] / v[NATIVE][m][r];
            double lo = ratio[0], hi = ratio[0];
            for (int r = 1; r < rounds; r++) {
                lo = ratio[r] < lo ? ratio[r] : lo;
                hi = ratio[r] > hi ? ratio[r] : hi;
            }
            double sm = median(v[api][m], rounds);
            const char *p = api == SISCI ? "" : "aa_";
            printf(",\"%s\":%.1f,\"%sround_ratio_min\":%.4f,\"%sround_ratio_max\":%.4f,"
                   "\"%sround_ratio_median\":%.4f",
                   api == SISCI ? "sisci" : "native2", sm, p, lo, p, hi, p, median(ratio, rounds));
        }
        printf("}");
    }
    printf("}\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3 || (strcmp(argv[1], "serve") && strcmp(argv[1], "run"))) {
        fprintf(stderr, "usage: ntblend run --host H -- sisci_bench serve PEER_NODE\n"
                        "       ntblend run --host H -- sisci_bench run PEER_NODE [ROUNDS]\n"
                        "Run the server first, on the peer's host. ROUNDS (default 12) is rounded\n"
                        "up to a multiple of 6. The report (JSON) gives per figure the native and\n"
                        "SISCI medians and the per-round ratios SISCI / native (their median and\n"
                        "spread); for DMA and interrupts also a second native side (native2,\n"
                        "aa_*): the noise floor (docs/sisci.md).\n");
        return 2;
    }
    peer = (unsigned)strtoul(argv[2], NULL, 0);
    sci_error_t err;
    SCIInitialize(0, &err);
    if (err != SCI_ERR_OK)
        fail("SCIInitialize", (int)err);
    if (!strcmp(argv[1], "serve"))
        return serve();
    int rounds = argc > 3 ? atoi(argv[3]) : 12;
    if (rounds < 6)
        rounds = 6;
    return run((rounds + 5) / 6 * 6); /* whole turns of the orders and the DMA channels */
}
