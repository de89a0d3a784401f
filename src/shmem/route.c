/*
 * The routed transport's geometry: which hosts a job spans, which of them reach each other
 * directly, the switchless ring when some do not (discovered from the fabric), the next and
 * previous hop on the shorter way around, and the transport's settings from the environment.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shmem_internal.h"
#include "xport.h"

static uint8_t *adj;  /* adj[a * nhosts + b]: host a reaches host b directly */
static int ring_n;    /* hosts around the ring (0: not routed) */
static int *ring_host; /* ring position -> host index */

/* ------------------------------------------------------------------------ job geometry */

int shm_host_of_node(uint32_t node)
{
    for (int h = 0; h < shm.nhosts; h++)
        if (shm.hosts[h].node == node)
            return h;
    return -1;
}

static int add_host(uint32_t node)
{
    int h = shm_host_of_node(node);
    if (h >= 0)
        return h;
    struct shm_host *nh = realloc(shm.hosts, (size_t)(shm.nhosts + 1) * sizeof *nh);
    if (!nh)
        shm_fatal("out of memory");
    shm.hosts = nh;
    nh[shm.nhosts] = (struct shm_host){ .node = node, .ring_pos = -1, .first_pe = -1, .adapter = -1 };
    return shm.nhosts++;
}

/* Which of our adapters reaches node: -1 if none. */
static int adapter_for(uint32_t node)
{
    int n = ntb_adapter_count();
    for (int i = 0; i < n; i++) {
        struct ntb_dev *d = ntb_open(i);
        if (!d)
            continue;
        int found = ntb_peer_port_idx(d, (int)node) >= 0;
        ntb_close(d);
        if (found)
            return i;
    }
    return -1;
}

static int fabric_peers(uint32_t node, uint32_t *out, int max)
{
    int n = ntb_fabric_peers(node, out, max);
    if (n < 0)
        shm_fatal("node %u is not on this fabric: %s", node, strerror(-n));
    return n < max ? n : max;
}

/* Walk the ring from our host: each host of a switchless ring has exactly two peers. */
static void discover_ring(uint32_t self, int a, int b)
{
    uint32_t peers[8];
    int cap = 64;
    uint32_t *order = malloc((size_t)cap * sizeof *order);
    if (!order)
        shm_fatal("out of memory");
    int n = 0;
    uint32_t prev = UINT32_MAX, cur = self;
    for (;;) {
        int np = fabric_peers(cur, peers, 8);
        if (np != 2)
            shm_fatal("PE hosts on nodes %u and %u do not reach each other and host node %u has "
                      "%d peers: routing is supported on switched fabrics (every host reaches "
                      "every other) and on switchless rings (two neighbours each)",
                      shm.hosts[a].node, shm.hosts[b].node, cur, np);
        if (n == cap && !(order = realloc(order, (size_t)(cap *= 2) * sizeof *order)))
            shm_fatal("out of memory");
        order[n++] = cur;
        /* Go right: the second adapter's peer, then onwards away from where we came. */
        uint32_t next = prev == UINT32_MAX ? peers[1] : (peers[0] == prev ? peers[1] : peers[0]);
        prev = cur;
        cur = next;
        if (cur == self)
            break;
        if (n > 4096)
            shm_fatal("the fabric's ring does not close");
    }
    ring_n = n;
    ring_host = malloc((size_t)n * sizeof *ring_host);
    if (!ring_host)
        shm_fatal("out of memory");
    for (int i = 0; i < n; i++) {
        int h = add_host(order[i]);
        ring_host[i] = h;
        shm.hosts[h].ring_pos = i;
    }
    free(order);
    for (int h = 0; h < shm.nhosts; h++)
        if (shm.hosts[h].ring_pos < 0)
            shm_fatal("host node %u is not on the ring of this host (node %u)", shm.hosts[h].node,
                      self);
}

static void build_adjacency(void)
{
    free(adj);
    adj = calloc((size_t)shm.nhosts * (size_t)shm.nhosts, 1);
    if (!adj)
        shm_fatal("out of memory");
    uint32_t peers[256];
    for (int a = 0; a < shm.nhosts; a++) {
        adj[a * shm.nhosts + a] = 1;
        int np = fabric_peers(shm.hosts[a].node, peers, 256);
        for (int i = 0; i < np; i++) {
            int b = shm_host_of_node(peers[i]);
            if (b >= 0)
                adj[a * shm.nhosts + b] = 1;
        }
    }
}

bool xp_direct(int a, int b) { return adj[a * shm.nhosts + b] != 0; }

static long env_num(const char *name, long dflt, long min, long max)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return dflt;
    size_t x;
    if (shm_parse_size(v, &x) || (long)x < min || (long)x > max)
        shm_fatal("%s=\"%s\": give a number from %ld to %ld", name, v, min, max);
    return (long)x;
}

void shm_xport_init(uint32_t self)
{
    shm.nhosts = 0;
    for (int pe = 0; pe < shm.npes; pe++) {
        int h = add_host(shm.pes[pe].node);
        shm.pes[pe].host = h;
        if (shm.hosts[h].first_pe < 0)
            shm.hosts[h].first_pe = pe;
    }
    int me = add_host(self);
    shm.myhost = me;
    build_adjacency();
    int ha = -1, hb = -1;
    for (int a = 0; a < shm.nhosts && ha < 0; a++)
        for (int b = 0; b < shm.nhosts; b++)
            if (!xp_direct(a, b)) {
                ha = a;
                hb = b;
                break;
            }
    shm.routed = ha >= 0;
    if (shm.routed) {
        discover_ring(self, ha, hb);
        build_adjacency();
    }
    for (int h = 0; h < shm.nhosts; h++)
        shm.hosts[h].adapter = h == me ? -1 : adapter_for(shm.hosts[h].node);
    const char *at = getenv("SHMEM_ATOMICS");
    if (at && *at && strcmp(at, "hardware") && strcmp(at, "software"))
        shm_fatal("SHMEM_ATOMICS=\"%s\": give hardware (in place, PCIe AtomicOps through the "
                  "NTB) or software (done by the target host's node)", at);
    shm.sw_atomics = at && strcmp(at, "software") == 0;
    shm.threads = (int)env_num("SHMEM_RING_THREADS", 2, 1, XP_MAX_THREADS);
    const char *ck = getenv("SHMEM_RING_CHUNK");
    shm.chunk_given = ck && *ck;
    shm_set_chunk((size_t)env_num("SHMEM_RING_CHUNK", XP_DEFAULT_CHUNK, 4096, 1 << 20));
    const char *dm = getenv("SHMEM_DMA_MIN");
    xp_dma_min = dm && (!strcmp(dm, "off") || !strcmp(dm, "0"))
                     ? 0
                     : (size_t)env_num("SHMEM_DMA_MIN", 32 << 10, 1, 1L << 40);
    /* Every emulated host runs on this machine: more PEs than its CPUs means waiting PEs must
     * give theirs away. */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    shm.crowded = cpus > 0 && shm.npes > cpus;
}

void shm_set_chunk(size_t chunk)
{
    shm.chunk = (chunk + 63) & ~(size_t)63;
    /* Routed jobs: get replies, then staging for DMA'd put chunks (two sides). Only routed
     * puts and gets use them, so a job whose PEs all map each other has none. */
    shm.rbuf_size = shm.routed ? (SHM_RBUF_SLOTS + 2 * SHM_PUT_STAGES) * shm.chunk : 0;
}

bool shm_xport_needed(void) { return shm.routed || (shm.sw_atomics && shm.nhosts > 1); }

int xp_next_hop(int from, int to)
{
    if (xp_direct(from, to))
        return to;
    int pf = shm.hosts[from].ring_pos, pt = shm.hosts[to].ring_pos;
    int right = (pt - pf + ring_n) % ring_n;
    return ring_host[right <= ring_n - right ? (pf + 1) % ring_n : (pf - 1 + ring_n) % ring_n];
}

int xp_prev_hop(int from, int at)
{
    if (xp_direct(from, at))
        return from;
    int pf = shm.hosts[from].ring_pos, pa = shm.hosts[at].ring_pos;
    int right = (pa - pf + ring_n) % ring_n;
    return ring_host[right <= ring_n - right ? (pa - 1 + ring_n) % ring_n : (pa + 1) % ring_n];
}

bool xp_is_reply(uint8_t type) { return type >= XP_ACK; }

uint32_t xp_inbox_id(uint32_t job, uint32_t node)
{
    return 0x80000000u | ((job & 0x3ffffu) << 12) | (node & 0xfffu);
}

uint32_t xp_nrings(void) { return (uint32_t)(shm.npes + shm.nhosts); }

