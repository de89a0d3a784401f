/*
 * The optional latency model (off by default): per-hop delays for device DMA, doorbells and
 * interrupts, with reads paying a round trip per request and a bounded number of requests in
 * flight, so reads are slower than writes and every extra hop costs. Constants come from the
 * topology's [latency] section; docs/fabric.md cites the seeds they are taken from.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <time.h>

#include "fabric.h"

static inline void spin_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

uint64_t fab_lat_dma_ns(const struct fab *f, uint64_t lat, uint64_t len, bool read)
{
    const struct topo_latency *l = &f->ctl->latency;
    if (!l->enabled)
        return 0;
    uint64_t mbps = l->link_mbps ? l->link_mbps : 6000;
    uint64_t wire_ns = len * 1000ull / mbps; /* bytes / (MB/s) = us; * 1000 = ns */
    if (!read)
        return lat + wire_ns; /* posted writes stream at link rate after the first arrives */
    /* Reads: each request waits a round trip; at most max_read_requests in flight. */
    uint64_t rtt = 2 * lat;
    uint64_t rrb = l->read_request_bytes ? l->read_request_bytes : 512;
    uint64_t inflight = l->max_read_requests ? l->max_read_requests : 8;
    uint64_t window_ns = len * rtt / (rrb * inflight); /* request-limited time */
    return rtt + (window_ns > wire_ns ? window_ns : wire_ns);
}

uint64_t fab_lat_doorbell_ns(const struct fab *f, uint32_t a, uint32_t b)
{
    const struct topo_latency *l = &f->ctl->latency;
    if (!l->enabled)
        return 0;
    const struct fab_adapter *ad = fab_adapter(f, a);
    int p = fab_peer_index(f, a, b);
    uint64_t sw = p >= 0 ? ad->peer_sw_ns[p] : 0;
    /* Root complex, the NTB with the switch chips of both adapters, the cluster switches, and
     * the interrupt's delivery. */
    return l->root_ns + l->ntb_ns + 2ull * l->adapter_switch_ns + sw + l->doorbell_ns;
}

void fab_lat_delay(uint64_t ns)
{
    if (!ns)
        return;
    uint64_t end = fab_now_ns() + ns;
    /* Delays of 15 us or more sleep until 5 us before the end and spin the rest; shorter ones
     * only spin. A sleep can overshoot by tens of microseconds on a busy machine, which delays
     * that completion but not the link: a transfer queued behind it starts, in the model, when
     * the link was free (delay_for), so streams keep the modelled rate. Spinning through every
     * transfer instead would take a whole CPU per busy engine. An absolute deadline and no timer
     * slack: the default 50 us slack alone would stretch a modelled 70 us transfer to twice
     * that. */
    if (ns >= 15000) {
        static _Thread_local bool slack_set;
        if (!slack_set) {
            prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
            slack_set = true;
        }
        uint64_t wake = end - 5000;
        struct timespec ts = { .tv_sec = (time_t)(wake / 1000000000ull),
                               .tv_nsec = (long)(wake % 1000000000ull) };
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
            ;
    }
    while (fab_now_ns() < end)
        spin_pause();
}
