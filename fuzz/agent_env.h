/*
 * What the agent harnesses (mbox_fuzz.c, ctl_fuzz.c) share: host "a"'s agent of the fabric in
 * fuzz/agent.ini, run inside the harness process. The fabric is created once, in a temporary
 * directory, and this process attaches as host a's agent; its modules are set up without
 * their threads (mbox_init, *_register), so each input runs start to end on one thread and
 * the harness runs the watchers' passes itself (*_sweep).
 *
 * What the agent must not write is made read-only in this process: other hosts' RAM (except,
 * for the mailbox harness, the one page of each peer's where our replies go) and our own
 * mailbox area (requests arrive there; the harness writes them through a mapping of its own).
 * A stray write there is a SEGV, i.e. a finding. The tables the agent does not own (other
 * adapters' LUT and requester-ID tables, other hosts' IOMMU tables and shadow functions, other
 * hosts' functions) are compared with their state at startup after every input, and the
 * allocator's invariants are checked after every request (amem_check). Include once, from the harness.
 */
#ifndef NTBLEND_FUZZ_AGENT_ENV_H
#define NTBLEND_FUZZ_AGENT_ENV_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent.h"
#include "aseg_int.h"
#include "registry.h"
#include "topo.h"

#define ENV_FABRIC "fuzz"

static struct fab *env_admin;      /* the creator's handle: only for cleanup */
static char env_dir[96];           /* the temporary NTBLEND_SHM_DIR */
static uint8_t *env_mbox;          /* our mailbox area, writable (the harness's own mapping) */
static uint32_t env_peers[TOPO_MAX_HOSTS], env_npeers;

/* Snapshots of what the agent does not own. */
static void *env_foreign;
static size_t env_foreign_len;

static void env_cleanup(void);

#define ENV_FAIL(...)                                                                       \
    do {                                                                                    \
        fprintf(stderr, "agent harness: " __VA_ARGS__);                                     \
        fputc('\n', stderr);                                                                \
        env_cleanup();                                                                      \
        abort();                                                                            \
    } while (0)

static void env_cleanup(void)
{
    if (env_admin) {
        fab_detach(env_admin);
        env_admin = NULL;
        fab_destroy_files(ENV_FABRIC);
    }
    if (env_dir[0])
        rmdir(env_dir);
}

/* Under the sanitizers a finding still cleans up (replay.c runs without them). */
void __sanitizer_set_death_callback(void (*cb)(void)) __attribute__((weak));

/* The foreign tables, serialised into buf (NULL: just the length). */
static size_t env_foreign_collect(uint8_t *buf)
{
    struct fab *f = agent.f;
    size_t n = 0;
#define PUT(p, len)                                                                         \
    do {                                                                                    \
        if (buf)                                                                            \
            memcpy(buf + n, (p), (len));                                                    \
        n += (len);                                                                         \
    } while (0)
    for (uint32_t i = 0; i < f->ctl->nadapters; i++) {
        const struct fab_adapter *a = fab_adapter(f, i);
        if (a->host == agent.host)
            continue;
        PUT(fab_lut(f, a), a->lut_entries * sizeof(struct fab_lut_entry));
        PUT(fab_rid(f, a), a->rid_entries * sizeof(struct fab_rid_entry));
    }
    for (uint32_t h = 0; h < f->ctl->nhosts; h++) {
        if (h == agent.host)
            continue;
        const struct fab_host *hs = fab_host(f, h);
        /* The count and the first entries: the agent never maps anything for another host's
         * IOMMU, and comparing all FAB_IOMMU_MAPS entries after every message costs more
         * than the message. */
        PUT(&hs->iommu_nmaps, sizeof hs->iommu_nmaps);
        PUT(fab_iommu_table(f, h), 64 * sizeof(struct fab_iommu_map));
        PUT(hs->shadows, sizeof hs->shadows);
    }
    for (uint32_t i = 0; i < f->ctl->nfuncs; i++)
        if (fab_func(f, i)->host != agent.host)
            PUT(fab_func(f, i), sizeof(struct fab_function));
#undef PUT
    return n;
}

static void env_check_foreign(const char *when)
{
    static uint8_t *now;
    if (!now && !(now = malloc(env_foreign_len)))
        abort();
    env_foreign_collect(now);
    if (memcmp(now, env_foreign, env_foreign_len))
        ENV_FAIL("%s: the agent changed another host's tables (LUT, requester IDs, IOMMU, "
                 "shadows or functions)", when);
    if (!amem_check())
        ENV_FAIL("%s: the allocator's invariants do not hold", when);
}

/* What our own host's tables hold, compared before and after an input once its effects were
 * undone: non-agent LUT entries and requester IDs of our adapters, our IOMMU mappings other
 * than those of segments and of the interrupt-page pool (kept for good), memory held other
 * than the pool, segments, connections, lending state of our functions. */
struct env_own {
    uint32_t lut, rid, iommu, segs, conn_in, conn_out, lent;
    uint64_t held;
};

/* Is phys in an interrupt page or a segment? Their IOMMU mappings go with them (segments map
 * themselves for an adapter when the first connection through it arrives, and stay mapped
 * until they are freed), so the segment count and the memory held stand for them. */
static bool env_seg_or_pool(uint64_t phys)
{
    for (struct aintr *i = segments.intrs; i; i = i->next)
        if (phys >= i->phys && phys - i->phys < 4096)
            return true;
    for (struct aseg *g = segments.segs; g; g = g->next)
        if (phys >= g->phys && phys - g->phys < g->size)
            return true;
    return false;
}

static void env_own(struct env_own *o)
{
    struct fab *f = agent.f;
    const struct fab_host *self = fab_host(f, agent.host);
    memset(o, 0, sizeof *o);
    for (uint32_t i = 0; i < self->nadapters; i++) {
        const struct fab_adapter *a = fab_adapter(f, self->adapter_first + i);
        const struct fab_lut_entry *l = fab_lut(f, a);
        for (uint32_t e = 0; e < a->lut_entries; e++)
            o->lut += atomic_load(&l[e].valid) && !(l[e].flags & FAB_LUT_AGENT);
        o->rid += fab_rid_used(f, self->adapter_first + i);
    }
    pthread_mutex_lock(&segments.lock);
    const struct fab_iommu_map *m = fab_iommu_table(f, agent.host);
    for (uint32_t i = 0; i < self->iommu_nmaps; i++)
        o->iommu += m[i].used && !env_seg_or_pool(m[i].phys);
    for (struct aseg *s = segments.segs; s; s = s->next)
        o->segs++;
    for (struct conn_in *c = segments.in; c; c = c->next)
        o->conn_in++;
    for (struct conn_out *c = segments.out; c; c = c->next)
        o->conn_out++;
    pthread_mutex_unlock(&segments.lock);
    uint64_t procs, tagged;
    amem_usage(&procs, &tagged);
    o->held = procs + tagged - aintr_pool_bytes();
    for (uint32_t i = 0; i < self->nfuncs; i++) {
        const struct fab_function *x = fab_func(f, self->func_first + i);
        for (int k = 0; k < 4; k++)
            o->lent += (uint32_t)__builtin_popcountll(atomic_load(&x->lend_borrowers[k]));
        o->lent += atomic_load(&x->lend_exclusive) + atomic_load(&x->lend_manager);
    }
}

static void env_check_own(const struct env_own *want, const char *when)
{
    struct env_own now;
    env_own(&now);
    if (memcmp(&now, want, sizeof now))
        ENV_FAIL("%s: not back to where it was: LUT %u/%u, requester IDs %u/%u, IOMMU %u/%u, "
                 "segments %u/%u, connections in %u/%u out %u/%u, lent %u/%u, held %llu/%llu",
                 when, now.lut, want->lut, now.rid, want->rid, now.iommu, want->iommu, now.segs,
                 want->segs, now.conn_in, want->conn_in, now.conn_out, want->conn_out, now.lent,
                 want->lent, (unsigned long long)now.held, (unsigned long long)want->held);
}

static void env_protect(void *p, uint64_t len)
{
    if (mprotect(p, len, PROT_READ))
        ENV_FAIL("mprotect: %s", strerror(errno));
}

/*
 * Create the fabric and become host a's agent. @peers_up: the other hosts are powered on (the
 * mailbox harness: its replies travel to them), or stay down, so that every mailbox call the
 * agent makes to them fails at once with -ENOLINK instead of waiting for a timeout (the
 * control harness: nothing answers, and a request that calls a peer must not stall).
 */
static void env_up(bool peers_up)
{
    /* In NTBLEND_SHM_DIR when set (as the tests run), else in /dev/shm. */
    const char *base = getenv("NTBLEND_SHM_DIR");
    if (!base || !*base)
        base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(env_dir, sizeof env_dir, "%s/ntbfuzz.XXXXXX", base);
    if (!mkdtemp(env_dir))
        ENV_FAIL("mkdtemp %s: %s", env_dir, strerror(errno));
    setenv("NTBLEND_SHM_DIR", env_dir, 1);
    atexit(env_cleanup);
    if (__sanitizer_set_death_callback)
        __sanitizer_set_death_callback(env_cleanup);

    struct topo *t = calloc(1, sizeof *t);
    if (!t || topo_load(NTBLEND_FUZZ_TOPO, t, stderr))
        ENV_FAIL("cannot load %s", NTBLEND_FUZZ_TOPO);
    int rc = fab_create(ENV_FABRIC, t, devreg_layout, &env_admin);
    free(t);
    if (rc)
        ENV_FAIL("cannot create the fabric in %s: %s", env_dir, strerror(-rc));
    struct fab *f = env_admin;
    int self = fab_host_by_name(f, "a");
    for (uint32_t h = 0; h < f->ctl->nhosts; h++) {
        if (fab_host_set_state(f, h, FAB_HOST_BOOTING))
            ENV_FAIL("cannot power on host %u", h);
        if ((h == (uint32_t)self || peers_up) && fab_host_set_state(f, h, FAB_HOST_UP))
            ENV_FAIL("cannot bring up host %u", h);
        if (h != (uint32_t)self)
            env_peers[env_npeers++] = h;
    }
    if ((rc = fab_attach(ENV_FABRIC, self, &agent.f)))
        ENV_FAIL("cannot attach: %s", strerror(-rc));
    agent.host = (uint32_t)self;
    agent.fabric = ENV_FABRIC;
    f = agent.f;
    if ((rc = mbox_init()) || (rc = alend_register()))
        ENV_FAIL("cannot start the agent's modules: %s", strerror(-rc));
    aseg_register();
    /* The devices of host a are lent out, as `ntblend device add` does. */
    const struct fab_host *hs = fab_host(f, agent.host);
    for (uint32_t i = 0; i < hs->nfuncs; i++)
        alend_available(0, hs->func_first + i, true);

    /* Our mailbox area: read-only for the agent, writable through a mapping of the harness. */
    char path[192];
    snprintf(path, sizeof path, "%s/host%u.ram", f->dir, agent.host);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    env_mbox = fd < 0 ? MAP_FAILED
                      : mmap(NULL, FAB_MBOX_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (fd >= 0)
        close(fd);
    if (env_mbox == MAP_FAILED)
        ENV_FAIL("cannot map %s: %s", path, strerror(errno));
    uint8_t *own = fab_ram(f, agent.host, 0, hs->ram_size);
    if (!own)
        ENV_FAIL("cannot map our RAM");
    env_protect(own, FAB_MBOX_SIZE);
    /* Other hosts' RAM: read-only, but for the page of each where our replies land. */
    for (uint32_t k = 0; k < env_npeers; k++) {
        uint32_t h = env_peers[k];
        uint64_t size = fab_host(f, h)->ram_size, slot = (uint64_t)agent.host * FAB_MBOX_SLOT;
        uint8_t *ram = fab_ram(f, h, 0, size);
        if (!ram)
            ENV_FAIL("cannot map host %u's RAM", h);
        if (peers_up) {
            env_protect(ram, slot);
            env_protect(ram + slot + FAB_MBOX_SLOT, size - slot - FAB_MBOX_SLOT);
        } else {
            env_protect(ram, size);
        }
    }
}

/* Call once the harness set up what it keeps for good: the foreign tables as they are now. */
static void env_baseline(void)
{
    env_foreign_len = env_foreign_collect(NULL);
    env_foreign = malloc(env_foreign_len);
    if (!env_foreign)
        abort();
    env_foreign_collect(env_foreign);
}

static inline uint32_t env_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Write a seed input (len bytes at buf) as DIR/NAME; stops the harness when it cannot. */
static inline void env_seed_write(const char *dir, const char *name, const uint8_t *buf,
                                  size_t len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *fp = fopen(path, "wb");
    if (!fp || fwrite(buf, 1, len, fp) != len || fclose(fp))
        ENV_FAIL("cannot write %s", path);
}

#endif
