/*
 * libntblend's per-process runtime: see runtime.h. The CPU data path is plain memory: a window
 * entry is an mmap of the final target's RAM file at the translated offset, so a store lands
 * in the peer's memory with no software in between. An entry that does not resolve (not
 * programmed, link down, IOMMU fault) maps a file of 0xff bytes privately: loads read all
 * ones and stores never reach anyone.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "fabric.h"
#include "runtime.h"

#define DEAD_SCRUB_NS (50ll * 1000000ll)

struct rt_map {
    struct rt_map *next;
    uint32_t adapter, first, count;
    int prot;
    char *base;
    uint64_t *sig; /* what each entry resolved to last time */
    bool *dead;
};

static pthread_mutex_t rt_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rt *the_rt;

/* ---------------------------------------------------------------- window mappings */

static uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull; }

static int map_ones(struct rt *rt, char *at, uint64_t len, int prot)
{
    for (uint64_t off = 0; off < len; off += rt->f->ones_size) {
        uint64_t n = len - off < rt->f->ones_size ? len - off : rt->f->ones_size;
        if (mmap(at + off, n, prot, MAP_PRIVATE | MAP_FIXED, rt->f->ones_fd, 0) ==
            MAP_FAILED)
            return -errno;
    }
    return 0;
}

/* Re-resolve entry k of map m; remap it only if what it reaches changed. */
static int remap_entry(struct rt *rt, struct rt_map *m, uint32_t k, bool force)
{
    struct fab *f = rt->f;
    struct fab_adapter *a = fab_adapter(f, m->adapter);
    uint64_t bus = a->bar_addr + (uint64_t)(m->first + k) * a->lut_size;
    char *at = m->base + (uint64_t)k * a->lut_size;
    struct fab_target ext[64];
    int n = 0;
    uint64_t sig = 0xcbf29ce484222325ull;
    bool dead = false;
    for (uint64_t off = 0; off < a->lut_size && n < 64; n++) {
        int rc = fab_resolve_probe(f, rt->host, FAB_RID_CPU, bus + off, a->lut_size - off, true,
                                   &ext[n]);
        if (rc)
            return rc;
        if (ext[n].err || (ext[n].region != FAB_REGION_RAM && ext[n].region != FAB_REGION_DEVICE)) {
            ext[n].region = FAB_REGION_NONE; /* CPU stores to an MSI region are not modelled */
            dead = true;
        }
        sig = mix(mix(mix(mix(sig, ext[n].region), ext[n].host), ext[n].fn),
                  ext[n].addr ^ (ext[n].len << 1));
        off += ext[n].len;
    }
    if (!force && sig == m->sig[k]) {
        /* Unchanged; a dead entry drops whatever was stored into it since (scrub). */
        if (dead)
            madvise(at, a->lut_size, MADV_DONTNEED);
        return 0;
    }
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        int rc = 0;
        if (ext[i].region == FAB_REGION_RAM || ext[i].region == FAB_REGION_DEVICE) {
            /* The peer's RAM, or a device BAR (registers are uncached I/O on hardware; here
             * memory the model reads). */
            uint64_t foff = ext[i].addr;
            int fd = ext[i].region == FAB_REGION_DEVICE ? fab_bar_fd(f, ext[i].fn)
                                                         : fab_phys_fd(f, ext[i].host,
                                                                       ext[i].addr, &foff);
            if (fd < 0 || mmap(at + off, ext[i].len, m->prot, MAP_SHARED | MAP_FIXED,
                               fd, (off_t)foff) == MAP_FAILED)
                rc = fd < 0 ? fd : -errno;
        } else {
            rc = map_ones(rt, at + off, ext[i].len, m->prot);
        }
        if (rc)
            return rc;
        off += ext[i].len;
    }
    if (off < a->lut_size) /* more fragments than we track: the rest reads as a master abort */
        map_ones(rt, at + off, a->lut_size - off, m->prot);
    m->sig[k] = sig;
    m->dead[k] = dead;
    return 0;
}

static bool remap_all(struct rt *rt)
{
    bool any_dead = false;
    pthread_mutex_lock(&rt->map_lock);
    for (struct rt_map *m = rt->maps; m; m = m->next)
        for (uint32_t k = 0; k < m->count; k++) {
            remap_entry(rt, m, k, false);
            any_dead |= m->dead[k];
        }
    pthread_mutex_unlock(&rt->map_lock);
    return any_dead;
}

void *rt_map_window(struct rt *rt, uint32_t adapter, uint32_t first, uint32_t count, bool readonly)
{
    struct fab_adapter *a = fab_adapter(rt->f, adapter);
    if (!count || first >= a->lut_entries || count > a->lut_entries - first) {
        errno = EINVAL;
        return NULL;
    }
    struct rt_map *m = calloc(1, sizeof *m);
    uint64_t len = (uint64_t)count * a->lut_size;
    if (!m || !(m->sig = calloc(count, sizeof *m->sig)) || !(m->dead = calloc(count, 1)))
        goto nomem;
    m->base = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m->base == MAP_FAILED)
        goto nomem;
    m->adapter = adapter;
    m->prot = readonly ? PROT_READ : PROT_READ | PROT_WRITE;
    m->first = first;
    m->count = count;
    pthread_mutex_lock(&rt->map_lock);
    int rc = 0;
    for (uint32_t k = 0; k < count && !rc; k++)
        rc = remap_entry(rt, m, k, true);
    if (!rc) {
        m->next = rt->maps;
        rt->maps = m;
    }
    pthread_mutex_unlock(&rt->map_lock);
    if (rc) {
        munmap(m->base, len);
        free(m->sig);
        free(m->dead);
        free(m);
        errno = -rc;
        return NULL;
    }
    return m->base;
nomem:
    if (m) {
        free(m->sig);
        free(m->dead);
    }
    free(m);
    errno = ENOMEM;
    return NULL;
}

int rt_window_open(struct rt *rt, uint32_t adapter, uint32_t peer_host, uint64_t peer_addr,
                   uint64_t len, bool readonly, struct rt_window *out)
{
    *out = (struct rt_window){ 0 };
    int rc = rt->ops->window_map(rt, adapter, peer_host, peer_addr, len, 0, &out->w);
    if (rc)
        return rc;
    out->ptr = rt->ops->window_cpu_map(rt, &out->w, readonly, &out->map);
    if (!out->ptr) {
        rc = -errno;
        rt->ops->window_unmap(rt, &out->w);
        out->map = NULL;
        return rc;
    }
    return 0;
}

void rt_window_close(struct rt *rt, struct rt_window *w)
{
    if (!w->map)
        return;
    rt->ops->window_cpu_unmap(rt, w->map);
    rt->ops->window_unmap(rt, &w->w);
    w->map = NULL;
    w->ptr = NULL;
}

int rt_unmap_window(struct rt *rt, void *base)
{
    pthread_mutex_lock(&rt->map_lock);
    for (struct rt_map **pp = &rt->maps; *pp; pp = &(*pp)->next) {
        struct rt_map *m = *pp;
        if (m->base != base)
            continue;
        *pp = m->next;
        pthread_mutex_unlock(&rt->map_lock);
        munmap(m->base, (uint64_t)m->count * fab_adapter(rt->f, m->adapter)->lut_size);
        free(m->sig);
        free(m->dead);
        free(m);
        return 0;
    }
    pthread_mutex_unlock(&rt->map_lock);
    return -EINVAL;
}

/* ---------------------------------------------------------------- watcher */

static void *watcher(void *arg)
{
    struct rt *rt = arg;
    struct fab *f = rt->f;
    struct fab_host *h = fab_host(f, rt->host);
    struct fab_proc *me = &f->ctl->procs[f->proc_slot];
    while (!atomic_load(&rt->stop)) {
        uint32_t gen = atomic_load(&f->ctl->map_gen);
        /* The host lost power, or the fabric is gone: so are its processes. */
        if (atomic_load(&f->ctl->down) || atomic_load(&h->state) == FAB_HOST_DOWN ||
            atomic_load(&h->boot_gen) != rt->boot_gen) {
            fprintf(stderr, "ntblend: host %s went down; process %d stops with it\n", h->name,
                    getpid());
            kill(getpid(), SIGKILL);
        }
        bool dead = remap_all(rt);
        atomic_store(&me->acked_gen, gen);
        fab_futex_wake(&me->acked_gen, INT_MAX);
        fab_futex_wait(&f->ctl->map_gen, gen, dead ? DEAD_SCRUB_NS : -1);
    }
    return NULL;
}

/* ---------------------------------------------------------------- lifetime */

int rt_request(struct rt *rt, const struct agent_req *req, struct agent_rsp *rsp)
{
    struct agent_rsp tmp;
    return rt->ops->agent_call(rt, req, rsp ? rsp : &tmp);
}

int rt_call(struct rt *rt, uint32_t op, uint64_t a, uint64_t b, struct agent_rsp *rsp)
{
    struct agent_req req = { .op = op, .a = a, .b = b };
    return rt_request(rt, &req, rsp);
}

int rt_fabric_agent_call(struct rt *rt, const struct agent_req *req, struct agent_rsp *rsp)
{
    pthread_mutex_lock(&rt->agent_lock);
    int rc = agent_call(rt->agent_fd, req, rsp, 10000);
    pthread_mutex_unlock(&rt->agent_lock);
    return rc;
}

/* A process belongs to one life of its host: the one `ntblend run` started it in
 * (NTBLEND_HOST_BOOT), else the one it first attached in. When that host has gone down since,
 * the process went down with it — also when it held no handle at that moment, so that no
 * watcher was there to end it — and must not carry on in the host's next life. Called with
 * rt_lock held (rt_get). */
static void check_life(struct rt *rt, const char *host)
{
    static bool known;
    static uint32_t life;
    const char *env = getenv("NTBLEND_HOST_BOOT");
    char *end = NULL;
    unsigned long boot = env && *env ? strtoul(env, &end, 10) : 0;
    if (env && *env && !*end && !known) {
        life = (uint32_t)boot;
        known = true;
    }
    if (known && life != rt->boot_gen) {
        fprintf(stderr, "ntblend: host %s went down since process %d started on it; the "
                        "process stops with it\n", host, getpid());
        kill(getpid(), SIGKILL);
    }
    life = rt->boot_gen;
    known = true;
}

int rt_fabric_start(struct rt *rt)
{
    const char *name = fab_name_resolve(NULL);
    const char *host = getenv("NTBLEND_HOST");
    if (!host || !*host) {
        fprintf(stderr, "ntblend: NTBLEND_HOST is not set; run the program with "
                        "'ntblend run --host HOST -- PROGRAM'\n");
        return -ENOENT;
    }
    int rc = fab_attach(name, -1, &rt->f);
    if (rc) {
        fprintf(stderr, "ntblend: fabric '%s' is not up (%s); start it with 'ntblend up FILE'\n",
                name, strerror(-rc));
        return rc == -EPROTO ? rc : -ENOENT;
    }
    int hi = fab_host_by_name(rt->f, host);
    if (hi < 0) {
        fprintf(stderr, "ntblend: fabric '%s' has no host '%s'\n", name, host);
        rc = -ENOENT;
        goto fail;
    }
    rt->host = (uint32_t)hi;
    rt->f->self_host = hi;
    struct fab_host *h = fab_host(rt->f, rt->host);
    if (atomic_load(&h->state) != FAB_HOST_UP) {
        fprintf(stderr, "ntblend: host '%s' is down; start it with 'ntblend host start %s'\n",
                host, host);
        rc = -EHOSTDOWN;
        goto fail;
    }
    rt->agent_fd = agent_connect(rt->f->dir, rt->host);
    if (rt->agent_fd < 0) {
        rc = rt->agent_fd;
        fprintf(stderr, "ntblend: the agent of host '%s' does not answer (%s)\n", host,
                strerror(-rc));
        goto fail;
    }
    struct agent_rsp rsp;
    rc = rt_call(rt, AGENT_HELLO, AGENT_PROTO_VERSION, 0, &rsp);
    if (rc)
        goto fail_fd;
    rt->boot_gen = (uint32_t)rsp.b;
    check_life(rt, host);
    rc = fab_proc_register(rt->f, rt->host);
    if (rc < 0) {
        fprintf(stderr, "ntblend: too many processes attached to fabric '%s'\n", name);
        goto fail_fd;
    }
    rc = -pthread_create(&rt->watcher, NULL, watcher, rt);
    if (rc)
        goto fail_fd;
    return 0;
fail_fd:
    close(rt->agent_fd);
fail:
    fab_detach(rt->f);
    return rc;
}

struct rt *rt_get(void)
{
    pthread_mutex_lock(&rt_lock);
    if (!the_rt) {
        struct rt *rt = calloc(1, sizeof *rt);
        int rc = rt ? 0 : -ENOMEM;
        if (rt) {
            pthread_mutex_init(&rt->agent_lock, NULL);
            pthread_mutex_init(&rt->map_lock, NULL);
            rt->ops = ntb_backend();
            rc = rt->ops->start(rt);
        }
        if (rc) {
            free(rt);
            pthread_mutex_unlock(&rt_lock);
            errno = -rc;
            return NULL;
        }
        the_rt = rt;
    }
    the_rt->refs++;
    struct rt *rt = the_rt;
    pthread_mutex_unlock(&rt_lock);
    return rt;
}

void rt_put(struct rt *rt)
{
    pthread_mutex_lock(&rt_lock);
    if (--rt->refs > 0) {
        pthread_mutex_unlock(&rt_lock);
        return;
    }
    the_rt = NULL;
    pthread_mutex_unlock(&rt_lock);
    rt->ops->stop(rt);
    free(rt);
}

void rt_fabric_stop(struct rt *rt)
{
    atomic_store(&rt->stop, 1);
    /* Wake the watcher without bumping map_gen (that would make every process remap); the
     * futex word is shared, so others wake too, find nothing changed and sleep again. Repeat
     * until it is gone, in case it was between its check and its wait. */
    for (;;) {
        fab_futex_wake(&rt->f->ctl->map_gen, INT_MAX);
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_nsec += 20 * 1000000;
        if (dl.tv_nsec >= 1000000000) {
            dl.tv_sec++;
            dl.tv_nsec -= 1000000000;
        }
        if (pthread_timedjoin_np(rt->watcher, NULL, &dl) == 0)
            break;
    }
    while (rt->maps)
        rt_unmap_window(rt, rt->maps->base);
    close(rt->agent_fd);
    fab_detach(rt->f);
    rt->f = NULL;
}
