/*
 * The optional latency model (off by default): per-hop delays for device DMA, doorbells and
 * interrupts, with reads paying a round trip per request and a bounded number of requests in
 * flight, so reads are slower than writes and every extra hop costs. Hops inside a host go
 * through its in-host switches and expansion chassis, or through the root complex when the
 * host's IOMMU translates (which also costs a look-up, a page walk on an IOTLB miss, and splits
 * reads bound for a device or an NTB). Constants come from the topology's [latency] and
 * [hostswitch] sections; docs/topology.md cites the seeds they are taken from.
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

uint64_t fab_lat_xfer_ns(const struct topo_latency *l, uint64_t lat, uint64_t len, bool read,
                         bool split)
{
    uint64_t mbps = l->link_mbps ? l->link_mbps : 6000;
    uint64_t wire_ns = len * 1000ull / mbps; /* bytes / (MB/s) = us; * 1000 = ns */
    if (!read)
        return lat + wire_ns; /* posted writes stream at link rate after the first arrives */
    /* Reads: each request waits a round trip; at most max_read_requests in flight. */
    uint64_t rtt = 2 * lat;
    uint64_t rrb = l->read_request_bytes ? l->read_request_bytes : 512;
    uint64_t inflight = l->max_read_requests ? l->max_read_requests : 8;
    uint64_t per_rtt = rrb * inflight;
    if (split) {
        /* The root complex re-issues each request as root_read_bytes requests and keeps only
         * root_max_reads of them open (device-lending-kvm-multidevice-2019 §7.1: 256-byte
         * requests leave a Xeon's IOMMU as 4 x 64 bytes). */
        uint64_t rb = l->root_read_bytes ? l->root_read_bytes : 64;
        uint64_t rn = l->root_max_reads ? l->root_max_reads : 16;
        if (rb * rn < per_rtt)
            per_rtt = rb * rn;
    }
    uint64_t window_ns = len * rtt / per_rtt; /* request-limited time */
    return rtt + (window_ns > wire_ns ? window_ns : wire_ns);
}

uint64_t fab_lat_dma_ns(const struct fab *f, uint64_t lat, uint64_t len, bool read, bool split)
{
    const struct topo_latency *l = &f->ctl->latency;
    return l->enabled ? fab_lat_xfer_ns(l, lat, len, read, split) : 0;
}

/* From switch `from` (+1) up to, not including, its ancestor `to` (+1; 0 the root ports): each
 * switch on the way and the link above it. */
static uint32_t climb_ns(const struct fab_hswitch *sw, uint32_t from, uint32_t to)
{
    uint32_t ns = 0;
    for (uint32_t s = from; s && s != to; s = sw[s - 1].parent)
        ns += sw[s - 1].latency_ns + sw[s - 1].link_ns;
    return ns;
}

static bool is_ancestor(const struct fab_hswitch *sw, uint32_t anc, uint32_t s)
{
    for (; s; s = sw[s - 1].parent)
        if (s == anc)
            return true;
    return anc == 0;
}

uint32_t fab_lat_tree_ns(const struct fab_hswitch *sw, uint32_t root_ns, uint32_t a, uint32_t b,
                         bool via_root)
{
    uint32_t lca = 0;
    if (!via_root)
        for (lca = a; lca && !is_ancestor(sw, lca, b); lca = sw[lca - 1].parent)
            ;
    return climb_ns(sw, a, lca) + climb_ns(sw, b, lca) + (lca ? sw[lca - 1].latency_ns : root_ns);
}

uint32_t fab_lat_iommu_ns(const struct topo_latency *l, uint32_t walks, bool hit)
{
    return walks * (l->iotlb_hit_ns + (hit ? 0 : l->page_walk_ns));
}

uint64_t fab_lat_doorbell_ns(const struct fab *f, uint32_t a, uint32_t b)
{
    const struct topo_latency *l = &f->ctl->latency;
    if (!l->enabled)
        return 0;
    const struct fab_adapter *ad = fab_adapter(f, a);
    int p = fab_peer_index(f, a, b);
    uint64_t sw = p >= 0 ? ad->peer_sw_ns[p] : 0;
    /* Root complex, the in-host switches above both adapters, the NTB with the switch chips of
     * both adapters, the cluster switches, and the interrupt's delivery. */
    const struct fab_hswitch *hs = f->ctl->hswitches;
    uint64_t in_host = fab_lat_tree_ns(hs, 0, 0, ad->at, false) +
                       (p >= 0 ? fab_lat_tree_ns(hs, 0, 0, fab_adapter(f, b)->at, false) : 0);
    return l->root_ns + in_host + l->ntb_ns + 2ull * l->adapter_switch_ns + sw + l->doorbell_ns;
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
