/*
 * The routed transport's geometry: which hosts a job spans, which of them reach each other
 * directly, the switchless ring when some do not (discovered from the fabric), the next and
 * previous hop on the shorter way around, and the transport's settings from the environment.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
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
/* Failover: dead[p] says the link between ring positions p and p + 1 is down; route_gen bumps
 * whenever another one is found. Once down, a link stays out of the routes for the job. */
static _Atomic uint8_t *dead;
static uint64_t *link_sig; /* each ring link's signature when the job started */
static _Atomic uint32_t route_gen;
static _Atomic uint64_t route_next_check; /* ns: when the fabric is asked again */
static pthread_mutex_t route_lock = PTHREAD_MUTEX_INITIALIZER;

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
    shm.sw_atomics = shm_env_word(SHM_ENV_ATOMICS) == 1; /* hardware|software */
    bool fo_on = shm_env_flag(SHM_ENV_RING_FAILOVER);
    shm.failover = fo_on && shm.routed;
    if (shm.failover) {
        dead = calloc((size_t)ring_n, sizeof *dead);
        link_sig = calloc((size_t)ring_n, sizeof *link_sig);
        if (!dead || !link_sig)
            shm_fatal("out of memory");
        for (int p = 0; p < ring_n; p++) {
            int a = ring_host[p], b = ring_host[(p + 1) % ring_n];
            if (ntb_fabric_link_up(shm.hosts[a].node, shm.hosts[b].node, &link_sig[p]) != 1)
                atomic_store(&dead[p], 1);
        }
    }
    shm.threads = (int)shm_env_num_in(SHM_ENV_RING_THREADS, 2, 1, XP_MAX_THREADS);
    shm.profile = shm_prof_mode();
    shm.chunk_given = shm_env_text(SHM_ENV_RING_CHUNK) != NULL;
    shm_set_chunk((size_t)shm_env_num(SHM_ENV_RING_CHUNK, XP_DEFAULT_CHUNK));
    const char *dm = shm_env_text(SHM_ENV_DMA_MIN);
    xp_dma_min = dm && (!strcmp(dm, "off") || !strcmp(dm, "0")) ? 0
                                                                : (size_t)shm_env_num(SHM_ENV_DMA_MIN, 32 << 10);
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
    /* Failover: no staging (every put is kept until acknowledged, and sent from that copy),
     * and after the get replies the acknowledgements by target PE. */
    if (shm.failover)
        shm.rbuf_size = SHM_RBUF_SLOTS * shm.chunk + shm_fo_acks_size() + SHM_FO_POOL * shm.chunk;
    shm.rbuf_size = (shm.rbuf_size + 4095) & ~(size_t)4095; /* the globals after it: page aligned */
}

bool shm_xport_needed(void) { return shm.routed || (shm.sw_atomics && shm.nhosts > 1); }

/* Failover: does the way from ring position pf, dist hops to the right (dir 1) or left
 * (dir -1), use a link that is down? */
static bool way_blocked(int pf, int dist, int dir)
{
    for (int i = 0; i < dist; i++) {
        int link = dir > 0 ? (pf + i) % ring_n : (pf - 1 - i + 2 * ring_n) % ring_n;
        if (atomic_load_explicit(&dead[link], memory_order_relaxed))
            return true;
    }
    return false;
}

/* The direction from host `from` to host `to` around the ring (1 right, -1 left): the shorter
 * (ties go right), or the other when a link on it is down; 0 when both are cut. */
static int ring_dir(int from, int to)
{
    int pf = shm.hosts[from].ring_pos, pt = shm.hosts[to].ring_pos;
    int right = (pt - pf + ring_n) % ring_n, left = ring_n - right;
    bool r_ok = true, l_ok = true;
    if (shm.failover) {
        r_ok = !way_blocked(pf, right, 1);
        l_ok = !way_blocked(pf, left, -1);
    }
    if (r_ok && (right <= left || !l_ok))
        return 1;
    return l_ok ? -1 : 0;
}

int xp_next_hop(int from, int to)
{
    if (!shm.failover && xp_direct(from, to))
        return to;
    if (from == to)
        return to;
    int dir = ring_dir(from, to);
    if (!dir)
        return -1;
    int pf = shm.hosts[from].ring_pos;
    return ring_host[(pf + dir + ring_n) % ring_n];
}

int xp_prev_hop(int from, int at)
{
    if (xp_direct(from, at))
        return from;
    int pf = shm.hosts[from].ring_pos, pa = shm.hosts[at].ring_pos;
    int right = (pa - pf + ring_n) % ring_n;
    return ring_host[right <= ring_n - right ? (pa - 1 + ring_n) % ring_n : (pa + 1) % ring_n];
}

int xp_ring_side(int from, int at)
{
    int pa = shm.hosts[at].ring_pos;
    return ring_host[(pa - 1 + ring_n) % ring_n] == from ? 0 : 1;
}

uint32_t xp_ring_of(uint32_t base, int from, int at)
{
    if (!shm.failover)
        return base;
    return (uint32_t)xp_ring_side(from, at) * (uint32_t)(shm.npes + shm.nhosts) + base;
}

bool xp_link_dead(int a, int b)
{
    if (!shm.failover)
        return false;
    int pa = shm.hosts[a].ring_pos, pb = shm.hosts[b].ring_pos;
    int link = (pa + 1) % ring_n == pb ? pa : pb;
    return atomic_load_explicit(&dead[link], memory_order_relaxed) != 0;
}

uint32_t xp_route_gen(void) { return atomic_load_explicit(&route_gen, memory_order_acquire); }

static const char *host_label(int h, char *buf, size_t len)
{
    if (ntb_node_name(shm.hosts[h].node, buf, len))
        snprintf(buf, len, "node %u", shm.hosts[h].node);
    return buf;
}

bool xp_route_refresh(bool force)
{
    if (!shm.failover)
        return false;
    uint64_t now = shm_now_ns();
    if (!force && now < atomic_load_explicit(&route_next_check, memory_order_relaxed))
        return false;
    atomic_store_explicit(&route_next_check, now + 20000000u, memory_order_relaxed);
    pthread_mutex_lock(&route_lock);
    bool changed = false;
    for (int p = 0; p < ring_n; p++) {
        if (atomic_load(&dead[p]))
            continue;
        int a = ring_host[p], b = ring_host[(p + 1) % ring_n];
        uint64_t sig = 0;
        /* Down now, or down and up again since the job started: either way, what was in
         * flight across it may be lost and its rings' state is unknown. */
        if (ntb_fabric_link_up(shm.hosts[a].node, shm.hosts[b].node, &sig) == 1 && sig == link_sig[p])
            continue;
        atomic_store(&dead[p], 1);
        changed = true;
        char na[64], nb[64];
        if (shm.me == 0 || (shm.me < 0 && (a == shm.myhost || b == shm.myhost)))
            fprintf(stderr, "shmem: %s: the ring link between hosts %s and %s is down: traffic "
                    "goes the other way round\n", shm.me < 0 ? "relay" : "PE 0",
                    host_label(a, na, sizeof na), host_label(b, nb, sizeof nb));
    }
    if (changed) {
        /* Every host with PEs must still reach every other. */
        for (int a = 0; a < shm.nhosts; a++)
            for (int b = 0; b < shm.nhosts; b++)
                if (a != b && shm.hosts[a].first_pe >= 0 && shm.hosts[b].first_pe >= 0 &&
                    !ring_dir(a, b)) {
                    char na[64], nb[64], list[512] = "";
                    size_t n = 0;
                    for (int p = 0; p < ring_n && n < sizeof list; p++)
                        if (atomic_load(&dead[p]))
                            n += (size_t)snprintf(list + n, sizeof list - n, "%s%s---%s",
                                                  n ? ", " : "",
                                                  host_label(ring_host[p], na, sizeof na),
                                                  host_label(ring_host[(p + 1) % ring_n], nb,
                                                             sizeof nb));
                    shm_ring_cut(a, b, list);
                }
        atomic_fetch_add_explicit(&route_gen, 1, memory_order_release);
    }
    pthread_mutex_unlock(&route_lock);
    return changed;
}

bool xp_is_reply(uint8_t type) { return type >= XP_ACK; }

uint32_t xp_inbox_id(uint32_t job, uint32_t node)
{
    return 0x80000000u | ((job & 0x3ffffu) << 12) | (node & 0xfffu);
}

uint32_t xp_nrings(void)
{
    /* Failover: a ring per arrival side, so that each keeps one producer when routes change. */
    return (uint32_t)(shm.npes + shm.nhosts) * (shm.failover ? 2u : 1u);
}

