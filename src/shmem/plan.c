/*
 * What a job's placement can map, decided before anything is created: every PE (and node)
 * maps the segments of the PEs it reaches through an NTB window, one window per segment, and
 * each window takes ⌈segment / lut_size⌉ entries of the adapter's LUT; every segment also
 * takes its size, rounded to the LUT granule, of its host's RAM. shm_plan() works out the
 * largest segment every host's adapters and RAM can hold for this placement, from the fabric
 * manager's inventory (ntb_fabric_host) and the placement every PE and node knows (oshrun's
 * SHMEM_PE_NODES), so all of them come to the same figure without talking to each other.
 *
 * Without SHMEM_SYMMETRIC_SIZE the heap is the default (64 MiB) or less, so that the segment
 * fits; a placement that cannot hold even a small heap, or a SHMEM_SYMMETRIC_SIZE that does
 * not fit, stops with a message that says what does. oshrun runs the same check once
 * (`oshrelay --check`) before it starts any PE.
 *
 * A ring job without SHMEM_RING_CHUNK also gets its chunk here: XP_LARGE_CHUNK when the
 * adapters' LUTs and the hosts' RAM hold the inboxes and staging it needs next to the heap
 * (given, or the default) with a granule to spare for the program's globals, else
 * XP_DEFAULT_CHUNK. Larger chunks mean fewer messages, thread wake-ups and DMA set-ups per
 * byte on every hop (docs/openshmem.md, Benchmarks). The choice depends only on the fabric's
 * inventory and the job's environment, so every PE and node makes the same one.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ntblend/ntb.h>

#include "shmem_internal.h"
#include "xport.h"

#define PLAN_MAX_ADAPTERS 16
#define PLAN_MAX_PEERS 1024
#define MIN_HEAP (64u << 10) /* below this a default heap is no use to anybody */

struct plan_host {
    uint64_t ram;
    int nad, npeers;
    struct ntb_fabric_adapter ad[PLAN_MAX_ADAPTERS];
    uint32_t peers[PLAN_MAX_PEERS];
};

/* Why the segment can be no larger: for the messages. */
struct plan_limit {
    size_t seg;      /* bytes */
    int host, adapter; /* adapter -1: the host's RAM */
    long windows, entries, inboxes;
};

static void fetch_host(int h, struct plan_host *ph)
{
    uint32_t node = shm.hosts[h].node;
    int n = ntb_fabric_host(node, &ph->ram, ph->ad, PLAN_MAX_ADAPTERS);
    if (n < 0)
        shm_fatal("node %u is not on this fabric: %s", node, strerror(-n));
    ph->nad = n < PLAN_MAX_ADAPTERS ? n : PLAN_MAX_ADAPTERS;
    n = ntb_fabric_peers(node, ph->peers, PLAN_MAX_PEERS);
    ph->npeers = n < 0 ? 0 : n < PLAN_MAX_PEERS ? n : PLAN_MAX_PEERS;
}

/* The adapter of host ph that reaches node: the first whose peers include it (what the
 * connect uses, xport.c), or -1. */
static int adapter_to(const struct plan_host *ph, uint32_t node)
{
    int first = 0;
    for (int a = 0; a < ph->nad; a++) {
        for (int i = first; i < first + ph->ad[a].npeers && i < ph->npeers; i++)
            if (ph->peers[i] == node)
                return a;
        first += ph->ad[a].npeers;
    }
    return -1;
}

static size_t round_up(size_t v, size_t g) { return (v + g - 1) / g * g; }

/* Does the job run a node (oshrelay) on host h? As shmemi_relay_main decides. */
static bool node_on(int h, const int *pes)
{
    if (shm.routed)
        return shm.hosts[h].ring_pos >= 0;
    return shm.sw_atomics && shm.nhosts > 1 && pes[h] > 0;
}

/* The largest segment every host can hold: by LUT entries, adapter by adapter, and by RAM. */
static struct plan_limit largest_segment(size_t *granule)
{
    struct plan_host *ph = calloc((size_t)shm.nhosts, sizeof *ph);
    int *pes = calloc((size_t)shm.nhosts, sizeof *pes);
    if (!ph || !pes)
        shm_fatal("out of memory");
    for (int pe = 0; pe < shm.npes; pe++)
        pes[shm.pes[pe].host]++;
    size_t g = 4096;
    for (int h = 0; h < shm.nhosts; h++) {
        fetch_host(h, &ph[h]);
        for (int a = 0; a < ph[h].nad; a++)
            if (ph[h].ad[a].lut_size > g)
                g = ph[h].ad[a].lut_size;
    }
    *granule = g;
    size_t inbox = shm_xport_needed() ? round_up(xp_inbox_size(xp_nrings(), shm.chunk), g) : 0;
    struct plan_limit lim = { .seg = SIZE_MAX, .host = -1, .adapter = -1 };
    for (int h = 0; h < shm.nhosts; h++) {
        long segs[PLAN_MAX_ADAPTERS] = { 0 }, inb[PLAN_MAX_ADAPTERS] = { 0 },
             rsv[PLAN_MAX_ADAPTERS] = { 0 };
        int mappers = pes[h] + node_on(h, pes); /* processes of h that map other hosts */
        for (int o = 0; o < shm.nhosts; o++) {
            if (o == h || !xp_direct(h, o))
                continue;
            int a = adapter_to(&ph[h], shm.hosts[o].node);
            if (a < 0)
                continue;
            rsv[a]++; /* h's agent's mailbox window toward o's agent */
            if (!shm.failover)
                segs[a] += (long)mappers * pes[o];
            if (shm_xport_needed()) {
                if (shm.routed || pes[o] > 0)
                    inb[a] += pes[h]; /* each PE's link to o's node */
                if (shm.routed && node_on(h, pes))
                    inb[a]++; /* h's node passes messages on to o's */
            }
        }
        for (int a = 0; a < ph[h].nad; a++) {
            const struct ntb_fabric_adapter *ad = &ph[h].ad[a];
            if (!segs[a] && !inb[a])
                continue;
            long inboxe = (long)(round_up(inbox, ad->lut_size) / ad->lut_size);
            long left = (long)ad->lut_entries - rsv[a] - inb[a] * inboxe;
            size_t seg = left < 0 ? 0 : segs[a] ? (size_t)(left / segs[a]) * ad->lut_size : SIZE_MAX;
            seg = seg == SIZE_MAX ? seg : seg / g * g;
            if (seg < lim.seg)
                lim = (struct plan_limit){ seg, h, a, segs[a], (long)ad->lut_entries - rsv[a],
                                           inb[a] };
        }
        if (pes[h] > 0) {
            /* The agents' mailboxes (1 MiB) and a granule for small allocations stay free. */
            size_t reserve = round_up(1u << 20, g) + g + (node_on(h, pes) ? inbox : 0);
            size_t seg = ph[h].ram > reserve ? (size_t)(ph[h].ram - reserve) / (size_t)pes[h] / g * g : 0;
            if (seg < lim.seg)
                lim = (struct plan_limit){ seg, h, -1, pes[h], 0, 0 };
        }
    }
    free(ph);
    free(pes);
    return lim;
}

static void explain(char *buf, size_t len, const struct plan_limit *l)
{
    uint32_t node = shm.hosts[l->host].node;
    if (l->adapter < 0)
        snprintf(buf, len, "host node %u holds %ld PEs' segments in its RAM", node, l->windows);
    else
        snprintf(buf, len,
                 "adapter %d of host node %u maps %ld segments%s of other hosts' PEs with the "
                 "%ld LUT entries its agent leaves free",
                 l->adapter, node, l->windows, l->inboxes ? " (and their nodes' inboxes)" : "",
                 l->entries);
}

/* A ring job's chunk, unless SHMEM_RING_CHUNK gave it (see the top of the file). */
static void choose_chunk(void)
{
    if (!shm.routed || shm.chunk_given)
        return;
    shm_set_chunk(XP_LARGE_CHUNK);
    size_t g;
    struct plan_limit l = largest_segment(&g);
    size_t need = round_up(SHM_CTRL_SIZE + shm.rbuf_size + shm.heap_size, g) + g;
    if (l.seg == SIZE_MAX || need <= l.seg) {
        shm_debug("ring chunk %zu KiB (the adapters can map its inboxes)", shm.chunk >> 10);
        return;
    }
    shm_set_chunk(XP_DEFAULT_CHUNK);
    shm_debug("ring chunk %zu KiB (%zu KiB ones would leave no room for the heap)",
              shm.chunk >> 10, (size_t)XP_LARGE_CHUNK >> 10);
}

void shm_plan(bool heap_given, size_t globals)
{
    choose_chunk();
    size_t g;
    struct plan_limit l = largest_segment(&g);
    if (l.seg == SIZE_MAX)
        l.seg = (size_t)1 << 46; /* every PE on one host and no RAM limit found: no bound */
    size_t fixed = SHM_CTRL_SIZE + shm.rbuf_size;
    char why[256];
    if (heap_given) {
        size_t need = round_up(fixed + shm.heap_size + round_up(globals ? globals : 4096, 4096), g);
        if (need > l.seg) {
            explain(why, sizeof why, &l);
            size_t most = l.seg > fixed + 2 * g ? (l.seg - fixed - g) >> 20 : 0;
            if (most)
                shm_fatal("SHMEM_SYMMETRIC_SIZE=%zuM does not fit this placement of %d PEs: %s, "
                          "enough for segments of %zu MiB; give SHMEM_SYMMETRIC_SIZE=%zuM or less, "
                          "or leave it unset for the largest heap that fits, or use fewer PEs per "
                          "host", shm.heap_size >> 20, shm.npes, why, l.seg >> 20, most);
            shm_fatal("SHMEM_SYMMETRIC_SIZE=%zuK does not fit this placement of %d PEs: %s, "
                      "enough for segments of %zu KiB; use fewer PEs per host or fewer PEs",
                      shm.heap_size >> 10, shm.npes, why, l.seg >> 10);
        }
        return;
    }
    /* What the segment holds besides the heap: the control page and the program's globals
     * (known to a PE whose job has no nodes, which therefore need not agree with it; else a
     * granule, or half of a one-granule segment), and the routed transport's buffers. */
    size_t other = globals && !shm_xport_needed() ? round_up(SHM_CTRL_SIZE + globals, 4096)
                   : l.seg >= 2 * g                ? g
                                                   : l.seg / 2;
    size_t heap = l.seg > other + shm.rbuf_size ? l.seg - other - shm.rbuf_size : 0;
    heap &= ~(size_t)4095;
    if (heap > shm.heap_size)
        heap = shm.heap_size; /* the default is the most */
    if (heap < MIN_HEAP + shm_scratch_size()) {
        explain(why, sizeof why, &l);
        shm_fatal("this fabric cannot hold %d PEs placed like this: %s, which leaves no room "
                  "for a symmetric heap; use fewer PEs, or fewer per host (oshrun --ppn, --hosts)",
                  shm.npes, why);
    }
    if (heap < shm.heap_size) {
        explain(why, sizeof why, &l);
        shm_debug("symmetric heap %zu KiB instead of %zu KiB: %s", heap >> 10, shm.heap_size >> 10,
                  why);
    }
    shm.heap_size = heap;
}

/* oshrun runs this once before it starts anything (`oshrelay --check` on the first PE's
 * host, with the job's environment): whatever the PEs would stop at here, it reports once. */
int shmemi_check_main(void)
{
    uint32_t self;
    shm_job_env(&self, true);
    return 0;
}
