/*
 * A process's attachment to the emulated fabric (emu.h): the fabric's shared state, its
 * host's agent, and the watcher thread that follows route changes (remapping this process's
 * CPU windows, emu_map.c) and ends the process when its host goes down.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "emu.h"

#define DEAD_SCRUB_NS (50ll * 1000000ll)

static struct emu *E(struct rt *rt) { return rt->bk; }

static void *watcher(void *arg)
{
    struct rt *rt = arg;
    struct fab *f = emu_fab(rt);
    struct fab_host *h = fab_host(f, rt->host);
    struct fab_proc *me = &f->ctl->procs[f->proc_slot];
    while (!atomic_load(&E(rt)->stop)) {
        uint32_t gen = atomic_load(&f->ctl->map_gen);
        /* The host lost power, or the fabric is gone: so are its processes. */
        if (atomic_load(&f->ctl->down) || atomic_load(&h->state) == FAB_HOST_DOWN ||
            atomic_load(&h->boot_gen) != rt->boot_gen) {
            fprintf(stderr, "ntblend: host %s went down; process %d stops with it\n", h->name,
                    getpid());
            kill(getpid(), SIGKILL);
        }
        bool dead = emu_remap_all(rt);
        atomic_store(&me->acked_gen, gen);
        fab_futex_wake(&me->acked_gen, INT_MAX);
        fab_futex_wait(&f->ctl->map_gen, gen, dead ? DEAD_SCRUB_NS : -1);
    }
    return NULL;
}

int emu_agent_call(struct rt *rt, const struct agent_req *req, struct agent_rsp *rsp)
{
    pthread_mutex_lock(&E(rt)->agent_lock);
    int rc = agent_call(E(rt)->agent_fd, req, rsp, 10000);
    pthread_mutex_unlock(&E(rt)->agent_lock);
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

/* Attach to the fabric NTBLEND_FABRIC names as host NTBLEND_HOST, and to its agent. */
static int attach(struct rt *rt)
{
    const char *name = fab_name_resolve(NULL);
    const char *host = getenv("NTBLEND_HOST");
    if (!host || !*host) {
        fprintf(stderr, "ntblend: NTBLEND_HOST is not set; run the program with "
                        "'ntblend run --host HOST -- PROGRAM'\n");
        return -ENOENT;
    }
    int rc = fab_attach(name, -1, &E(rt)->f);
    if (rc) {
        fprintf(stderr, "ntblend: fabric '%s' is not up (%s); start it with 'ntblend up FILE'\n",
                name, strerror(-rc));
        return rc == -EPROTO ? rc : -ENOENT;
    }
    int hi = fab_host_by_name(E(rt)->f, host);
    if (hi < 0) {
        fprintf(stderr, "ntblend: fabric '%s' has no host '%s'\n", name, host);
        rc = -ENOENT;
        goto fail;
    }
    rt->host = (uint32_t)hi;
    E(rt)->f->self_host = hi;
    struct fab_host *h = fab_host(E(rt)->f, rt->host);
    if (atomic_load(&h->state) != FAB_HOST_UP) {
        fprintf(stderr, "ntblend: host '%s' is down; start it with 'ntblend host start %s'\n",
                host, host);
        rc = -EHOSTDOWN;
        goto fail;
    }
    E(rt)->agent_fd = agent_connect(E(rt)->f->dir, rt->host);
    if (E(rt)->agent_fd < 0) {
        rc = E(rt)->agent_fd;
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
    rc = fab_proc_register(E(rt)->f, rt->host);
    if (rc < 0) {
        fprintf(stderr, "ntblend: too many processes attached to fabric '%s'\n", name);
        goto fail_fd;
    }
    rc = -pthread_create(&E(rt)->watcher, NULL, watcher, rt);
    if (rc)
        goto fail_fd;
    return 0;
fail_fd:
    close(E(rt)->agent_fd);
fail:
    fab_detach(E(rt)->f);
    return rc;
}

int emu_start(struct rt *rt)
{
    struct emu *e = calloc(1, sizeof *e);
    if (!e)
        return -ENOMEM;
    pthread_mutex_init(&e->agent_lock, NULL);
    pthread_mutex_init(&e->map_lock, NULL);
    rt->bk = e;
    int rc = attach(rt);
    if (rc) {
        rt->bk = NULL;
        free(e);
    }
    return rc;
}

void emu_stop(struct rt *rt)
{
    atomic_store(&E(rt)->stop, 1);
    /* Wake the watcher without bumping map_gen (that would make every process remap); the
     * futex word is shared, so others wake too, find nothing changed and sleep again. Repeat
     * until it is gone, in case it was between its check and its wait. */
    for (;;) {
        fab_futex_wake(&E(rt)->f->ctl->map_gen, INT_MAX);
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_nsec += 20 * 1000000;
        if (dl.tv_nsec >= 1000000000) {
            dl.tv_sec++;
            dl.tv_nsec -= 1000000000;
        }
        if (pthread_timedjoin_np(E(rt)->watcher, NULL, &dl) == 0)
            break;
    }
    emu_unmap_all(rt);
    close(E(rt)->agent_fd);
    fab_detach(E(rt)->f);
    free(rt->bk);
    rt->bk = NULL;
}
