/*
 * Setup and teardown: read the job from the environment oshrun sets, create this PE's
 * symmetric heap as a segment on its host, connect to and map every other PE's heap, and
 * the query routines (my_pe, n_pes, info, accessibility, shmem_ptr).
 *
 * No MPI and no sockets: the fabric's segment service is the bootstrap. A PE's heap is
 * segment shm_seg_id(job, pe) on its host; seg_connect waits for it to become available,
 * which is the "everyone has started" rendezvous, and the first barrier completes it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ntblend/ntb.h>

#include "shmem.h"
#include "shmem_internal.h"

struct shm_state shm;

#define DEFAULT_HEAP_SIZE (64u << 20)
#define DEFAULT_BOOT_TIMEOUT_MS 60000

void shm_require_init(const char *who)
{
    if (!shm.initialized || shm.finalized)
        shm_fatal("%s called %s", who, shm.finalized ? "after shmem_finalize" : "before shmem_init");
}

/* "64M", "3.1m", "1g", "4096", "2kB": binary multiples, fractions allowed. */
int shm_parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || v < 0)
        return -EINVAL;
    double mul = 1;
    switch (*end) {
    case 'k': case 'K': mul = 1024.0; end++; break;
    case 'm': case 'M': mul = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    case 't': case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (*end == 'i')
        end++;
    if (*end == 'b' || *end == 'B')
        end++;
    if (*end)
        return -EINVAL;
    double bytes = v * mul;
    if (bytes < 1 || bytes > (double)(SIZE_MAX / 2))
        return -ERANGE;
    *out = (size_t)(bytes + 0.5);
    return 0;
}

static uint32_t seg_id_of(uint32_t job, int pe)
{
    return 0x40000000u | ((job & 0x3ffffu) << 12) | (uint32_t)pe;
}

static void parse_nodes(uint32_t self, bool relay)
{
    const char *list = shm_env_text(SHM_ENV_PE_NODES);
    if (!list) {
        if (shm.npes != 1)
            shm_fatal("SHMEM_PE_NODES is not set: start the program with oshrun");
        shm.pes[0].node = self;
        return;
    }
    const char *p = list;
    for (int i = 0; i < shm.npes; i++) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(p, &end, 10);
        if (end == p || errno || (*end && *end != ','))
            shm_fatal("SHMEM_PE_NODES=\"%s\" is malformed (one node id per PE, comma-separated)", list);
        shm.pes[i].node = (uint32_t)v;
        p = *end ? end + 1 : end;
        if (!*end && i + 1 < shm.npes)
            shm_fatal("SHMEM_PE_NODES=\"%s\" names fewer than %d PEs", list, shm.npes);
    }
    if (!relay && shm.pes[shm.me].node != self)
        shm_fatal("SHMEM_PE_NODES places PE %d on node %u, but it runs on node %u", shm.me,
                  shm.pes[shm.me].node, self);
}

static void print_info(void)
{
    printf("OpenSHMEM %d.%d, %s\n", SHMEM_MAJOR_VERSION, SHMEM_MINOR_VERSION, SHMEM_VENDOR_STRING);
    shm_env_help(stdout);
}

void shm_job_env(uint32_t *self, bool relay)
{
    shm.debug = shm_env_flag(SHM_ENV_DEBUG);
    shm.copy_helper = (int[]){ 1, 0, 2 }[shm_env_word(SHM_ENV_COPY_HELPER)]; /* 1|0|slow */
    shm.npes = (int)shm_env_num(SHM_ENV_NPES, 1);
    shm.me = relay ? -1 : (int)shm_env_num_in(SHM_ENV_PE, 0, 0, shm.npes - 1);
    /* For tests: a node holds every routed put it delivers to this PE for 2 ms first, so that
     * acknowledgements of puts to other PEs overtake it (tests/system/shmem/quietmt.c). */
    shm.relay_slow_pe = relay ? (int)shm_env_num_in(SHM_ENV_RELAY_SLOW_PE, -1, -1, shm.npes - 1) : -1;
    shm.job = (uint32_t)shm_env_num(SHM_ENV_JOB, (long long)getpid());
    bool heap_given = shm_env_text(SHM_ENV_SYMMETRIC_SIZE) != NULL;
    shm.heap_size = (size_t)shm_env_num(SHM_ENV_SYMMETRIC_SIZE, DEFAULT_HEAP_SIZE);
    shm.heap_size = (shm.heap_size + 4095) & ~(size_t)4095;
    shm.timeout_ms = (int)shm_env_num(SHM_ENV_BOOTSTRAP_TIMEOUT, DEFAULT_BOOT_TIMEOUT_MS);
    if (!getenv("NTBLEND_HOST"))
        shm_fatal("not running on a host of a fabric: start the program with oshrun (or "
                  "'ntblend run --host H -- prog' for one PE)");
    int rc = seg_open(&shm.sd);
    if (rc)
        shm_fatal("cannot attach to host %s: %s", getenv("NTBLEND_HOST"), seg_strerror(rc));
    if ((rc = seg_local_node_id(self)))
        shm_fatal("cannot find this host's node id: %s", seg_strerror(rc));
    shm.pes = calloc((size_t)shm.npes, sizeof *shm.pes);
    if (!shm.pes)
        shm_fatal("out of memory");
    if (relay && !shm_env_text(SHM_ENV_PE_NODES))
        shm_fatal("oshrelay is started by oshrun, not by hand");
    parse_nodes(*self, relay);
    shm.initialized = true; /* for messages from here on */
    shm_xport_init(*self);
    /* The heap the placement can map (plan.c): the default, or less; or a clear stop. */
    shm_plan(heap_given, relay ? 0 : shm_globals_size());
    shm.rbuf_off = SHM_CTRL_SIZE + shm.heap_size;
    shm.globals_off = shm.rbuf_off + shm.rbuf_size;
    shm.seg_size = shm.globals_off + (relay ? 0 : shm_globals_size()); /* relay: learnt later */
}

/* The one CPU this process may run on (oshrun --bind-to core), -1 if more or unknown. */
static int pinned_cpu(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) || CPU_COUNT(&set) != 1)
        return -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            return c;
    return -1;
}

/* A PE that leaves with status 0 without shmem_finalize (after its last barrier, say) is no
 * loss to the others still finishing theirs (health.c): it says so as it exits. */
static void exit_hook(int status, void *arg)
{
    (void)arg;
    if (status == 0 && shm.initialized && !shm.finalized && shm.me >= 0 && shm.pes &&
        shm.pes[shm.me].base)
        atomic_store(&shm_ctrl_of(shm.me)->finished, 1);
}

void shmem_init(void)
{
    if (shm.initialized)
        return; /* 1.5: calling it again has no effect */
    uint32_t self;
    shm_job_env(&self, false);
    if (shm.me == 0 && shm_env_flag(SHM_ENV_VERSION))
        printf("OpenSHMEM %d.%d (%s)\n", SHMEM_MAJOR_VERSION, SHMEM_MINOR_VERSION, SHMEM_VENDOR_STRING);
    if (shm.me == 0 && shm_env_flag(SHM_ENV_INFO))
        print_info();

    /* Our segment: created, made reachable through every adapter, and then available. */
    uint32_t myid = seg_id_of(shm.job, shm.me);
    int rc = seg_create(shm.sd, &shm.local, myid, shm.seg_size);
    if (rc)
        shm_fatal("cannot create the symmetric heap (%zu bytes) on host %s: %s%s", shm.seg_size,
                  getenv("NTBLEND_HOST"), seg_strerror(rc),
                  rc == -ENOMEM || rc == -ENOSPC
                      ? "; use a smaller SHMEM_SYMMETRIC_SIZE or fewer PEs per host"
                      : "");
    struct shm_pe *mine = &shm.pes[shm.me];
    mine->base = seg_map_local(shm.local, 0, 0, 0, &mine->map);
    if (!mine->base)
        shm_fatal("cannot map the symmetric heap: %s", seg_strerror(-errno));
    mine->base = shm_heap_place(mine->base);
    memset(mine->base, 0, SHM_CTRL_SIZE);
    atomic_store(&shm_ctrl_of(shm.me)->magic, SHM_MAGIC);
    shm_ctrl_of(shm.me)->pin_cpu = pinned_cpu();
    atomic_store(&shm_ctrl_of(shm.me)->bar_cpu, -1); /* not known until the first barrier */
    shm.asym = wpol_asym_init(); /* before any PE can signal us: everyone registers first */
    shm_globals_init();
    int nad = ntb_adapter_count();
    for (int a = 0; a < nad; a++) {
        if ((rc = seg_prepare(shm.local, a)) || (rc = seg_set_available(shm.local, a)))
            shm_fatal("cannot export the symmetric heap on adapter %d: %s", a, seg_strerror(rc));
    }

    /* Every PE on this host or on a host one of our adapters reaches is mapped; the others
     * (on a ring) are reached through the nodes in between. With failover, only the PEs on
     * this host: a store through a window that a failing link cuts may or may not have
     * landed, a message in an inbox has (its consumer knows). */
    for (int i = 1; i < shm.npes; i++) {
        int pe = (shm.me + i) % shm.npes; /* spread the connects */
        struct shm_pe *p = &shm.pes[pe];
        int ad = p->host == shm.myhost ? 0 : shm.hosts[p->host].adapter;
        if (ad < 0 || (shm.failover && p->host != shm.myhost))
            continue;
        rc = shm_connect(shm.sd, &p->remote, p->node, seg_id_of(shm.job, pe), ad);
        if (rc == -ENOENT || rc == -ECONNREFUSED)
            shm_fatal("PE %d (node %u) did not publish its symmetric heap within %d ms: did it "
                      "start? (set SHMEM_BOOTSTRAP_TIMEOUT to wait longer)", pe, p->node,
                      shm.timeout_ms);
        if (rc)
            shm_fatal("cannot connect to PE %d's symmetric heap on node %u: %s%s", pe, p->node,
                      seg_strerror(rc),
                      rc == -ENOSPC ? "; a smaller SHMEM_SYMMETRIC_SIZE needs fewer LUT entries" : "");
        if (seg_remote_size(p->remote) != shm.seg_size)
            shm_fatal("PE %d has a %zu-byte symmetric heap, this PE %zu: give every PE the same "
                      "SHMEM_SYMMETRIC_SIZE (and SHMEM_RING_CHUNK)", pe,
                      seg_remote_size(p->remote), shm.seg_size);
        p->base = seg_map_remote(p->remote, 0, 0, 0, &p->map);
        if (!p->base)
            shm_fatal("cannot map PE %d's symmetric heap: %s", pe, seg_strerror(-errno));
        if ((rc = seg_seq_create(p->map, &p->seq)))
            shm_fatal("cannot check the path to PE %d: %s", pe, seg_strerror(rc));
        shm_debug("PE %d: node %u, adapter %d, mapped at %p", pe, p->node, ad, p->base);
    }
    shm_xport_connect();
    shm_heap_init();
    shm_team_init();
    on_exit(exit_hook, NULL);
    shm_barrier();
    shm_barrier_setup();
    shm_debug("initialized: %d PEs, heap %zu bytes%s", shm.npes, shm.heap_size,
              shm.routed ? ", routed around the ring" : "");
}

void shmem_finalize(void)
{
    if (!shm.initialized || shm.finalized)
        return;
    shm_barrier(); /* nobody touches a heap after this */
    shm_prof_report(); /* SHMEM_PROFILE: every ack is in after the barrier's quiet */
    atomic_store(&shm_ctrl_of(shm.me)->finished, 1); /* our heap's removal is no loss */
    shm_heap_fini();
    shm_team_fini();
    shm_xport_fini();
    shm_copy_fini();
    for (int pe = 0; pe < shm.npes; pe++) {
        struct shm_pe *p = &shm.pes[pe];
        if (p->seq)
            seg_seq_remove(p->seq);
        if (p->map)
            seg_unmap(p->map);
        if (p->remote)
            seg_disconnect(p->remote);
    }
    shm_heap_unplace();
    shm_globals_fini();
    seg_remove(shm.local);
    seg_close(shm.sd);
    free(shm.pes);
    shm.pes = NULL;
    shm.finalized = true;
}

int shmem_my_pe(void)
{
    shm_require_init("shmem_my_pe");
    return shm.me;
}

int shmem_n_pes(void)
{
    shm_require_init("shmem_n_pes");
    return shm.npes;
}

void shmem_info_get_version(int *major, int *minor)
{
    *major = SHMEM_MAJOR_VERSION;
    *minor = SHMEM_MINOR_VERSION;
}

void shmem_info_get_name(char *name)
{
    snprintf(name, SHMEM_MAX_NAME_LEN, "%s", SHMEM_VENDOR_STRING);
}

int shmem_pe_accessible(int pe)
{
    shm_require_init("shmem_pe_accessible");
    if (pe < 0 || pe >= shm.npes)
        return 0;
    if (pe == shm.me || shm.pes[pe].host == shm.myhost)
        return 1;
    if (!shm.pes[pe].remote)
        return shm.routed; /* reached through the ring's nodes */
    return seg_remote_state(shm.pes[pe].remote) == SEG_EVENT_AVAILABLE;
}

void *shm_translate_or_null(const void *addr, int pe)
{
    if (pe < 0 || pe >= shm.npes)
        return NULL;
    size_t off;
    if (!shm.pes[pe].base || !shm_off_ok(addr, &off))
        return NULL;
    if (pe == shm.me)
        return (void *)addr; /* the object itself (a global has a second mapping in our segment) */
    return (char *)shm.pes[pe].base + off;
}

int shmem_addr_accessible(const void *addr, int pe)
{
    shm_require_init("shmem_addr_accessible");
    size_t off;
    return shm_off_ok(addr, &off) && shmem_pe_accessible(pe);
}

/* Every heap this PE maps is a plain pointer, across an NTB window too; PEs reached through
 * the ring's nodes have none (NULL). */
void *shmem_ptr(const void *dest, int pe)
{
    shm_require_init("shmem_ptr");
    return shm_translate_or_null(dest, pe);
}

/* ---- deprecated ---- */
void start_pes(int npes)
{
    (void)npes; /* the job size comes from oshrun, as in every implementation */
    shmem_init();
}
int _my_pe(void) { return shmem_my_pe(); }
int _num_pes(void) { return shmem_n_pes(); }
