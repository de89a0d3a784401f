/*
 * Fabric and host life cycle: `up` (create a fabric and boot every host's agent), `down`
 * (stop the agents, remove the shared memory) and `host kill|start` (crash a host, boot it
 * again). Booting starts every agent first and then polls the hosts' states, so a 60-host
 * fabric boots in parallel even on two cores.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "cli.h"
#include "registry.h"

#define UP_TIMEOUT_MS 60000
#define START_TIMEOUT_MS 30000
#define POLL_MS 15
#define STOP_GRACE_MS 5000
#define LOG_TAIL_LINES 15

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    interrupted = sig;
}

/* While we boot hosts, Ctrl-C must undo the half-booted state rather than leave it behind. */
static void catch_signals(void)
{
    struct sigaction sa = { .sa_handler = on_signal };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* Wait until hosts[i] are all UP. -ETIMEDOUT or -ECHILD (agent exited, *wstatus) name the
 * culprit in *bad; -EINTR after a signal. */
static int wait_up(struct fab *f, const uint32_t *hosts, const pid_t *pids, size_t n,
                   int timeout_ms, size_t *bad, int *wstatus)
{
    for (int waited = 0;; waited += POLL_MS) {
        size_t pending = 0;
        for (size_t i = 0; i < n; i++) {
            if (atomic_load(&fab_host(f, hosts[i])->state) == FAB_HOST_UP)
                continue;
            if (waitpid(pids[i], wstatus, WNOHANG) == pids[i]) {
                *bad = i;
                return -ECHILD;
            }
            if (!pending++)
                *bad = i;
        }
        if (!pending)
            return 0;
        if (interrupted)
            return -EINTR;
        if (waited >= timeout_ms)
            return -ETIMEDOUT;
        cli_sleep_ms(POLL_MS);
    }
}

static void report_boot_failure(struct fab *f, int rc, uint32_t host, int wstatus, int timeout_ms)
{
    const char *name = fab_host(f, host)->name;
    if (rc == -ECHILD && WIFEXITED(wstatus))
        cli_err("host %s did not come up: its agent exited with status %d", name,
                WEXITSTATUS(wstatus));
    else if (rc == -ECHILD && WIFSIGNALED(wstatus))
        cli_err("host %s did not come up: its agent was killed by signal %d (%s)", name,
                WTERMSIG(wstatus), strsignal(WTERMSIG(wstatus)));
    else if (rc == -EINTR)
        cli_err("interrupted while host %s was booting", name);
    else
        cli_err("host %s did not come up within %d s", name, timeout_ms / 1000);
    cli_log_tail(f->dir, host, LOG_TAIL_LINES);
}

/* Undo a failed `up`: stop what we started, then remove the fabric. */
static void teardown(struct fab *f, const char *fabric, const pid_t *pids, size_t n)
{
    cli_stop_pids(pids, n, STOP_GRACE_MS);
    atomic_store(&f->ctl->down, 1);
    fab_detach(f);
    fab_destroy_files(fabric);
}

/* Is anything still running the fabric, or did a crash leave its files behind? */
static void explain_exists(const char *fabric)
{
    struct fab *f;
    if (fab_attach(fabric, -1, &f) < 0) {
        cli_err("fabric '%s' exists but is half-created (another 'ntblend up' running, or a "
                "crash); if nothing is using it, clear it with: ntblend down --fabric %s",
                fabric, fabric);
        return;
    }
    bool alive = false;
    for (uint32_t i = 0; i < f->ctl->nhosts && !alive; i++) {
        pid_t pid = atomic_load(&fab_host(f, i)->agent_pid);
        alive = pid > 0 && !cli_pid_gone(pid);
    }
    if (alive)
        cli_err("fabric '%s' is already up (ntblend down --fabric %s)", fabric, fabric);
    else
        cli_err("fabric '%s' exists but none of its agents is running (left over from a "
                "crash?); clear it with: ntblend down --fabric %s", fabric, fabric);
    fab_detach(f);
}

/* --dma-cpus LIST (taskset -c style: 1 or 0,2-3) into the fabric's dma_cpus words; every CPU
 * must be one this process may run on. Returns -1 to go on, else the exit status after a
 * message. */
static int parse_dma_cpus(const char *list, uint64_t words[FAB_CPU_WORDS])
{
    cpu_set_t set;
    uint64_t allowed[FAB_CPU_WORDS] = { 0 };
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int c = 0; c < FAB_CPU_WORDS * 64 && c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set))
                allowed[c / 64] |= UINT64_C(1) << (c % 64);
    memset(words, 0, FAB_CPU_WORDS * sizeof *words);
    const char *p = list;
    for (;;) {
        char *end;
        errno = 0;
        unsigned long lo = strtoul(p, &end, 10), hi = lo;
        bool ok = end != p && isdigit((unsigned char)*p) && !errno;
        if (ok && *end == '-') {
            p = end + 1;
            hi = strtoul(p, &end, 10);
            ok = end != p && isdigit((unsigned char)*p) && !errno && hi >= lo;
        }
        if (!ok || (*end != ',' && *end != '\0'))
            return cli_usage_error("up", "--dma-cpus '%s': expected CPU numbers and ranges, "
                                   "e.g. 1 or 0,2-3", list);
        for (unsigned long cpu = lo; cpu <= hi; cpu++) {
            if (cpu >= FAB_CPU_WORDS * 64 || !(allowed[cpu / 64] >> (cpu % 64) & 1)) {
                char avail[256];
                cli_cpu_list(allowed, avail, sizeof avail);
                return cli_usage_error("up", "--dma-cpus: CPU %lu is not one this machine lets "
                                       "ntblend use (CPUs: %s)", cpu, avail);
            }
            words[cpu / 64] |= UINT64_C(1) << (cpu % 64);
        }
        if (*end == '\0')
            return -1;
        p = end + 1;
    }
}

int cmd_up(struct cli *c)
{
    struct cli_opts o;
    int first;
    int rc = cli_parse(c, CLI_OPT_DMA_CPUS, false, &o, &first);
    if (rc >= 0)
        return rc;
    uint64_t dma_cpus[FAB_CPU_WORDS] = { 0 };
    if (o.dma_cpus && (rc = parse_dma_cpus(o.dma_cpus, dma_cpus)) >= 0)
        return rc;
    if (c->argc - first != 1)
        return cli_usage_error("up", c->argc == first ? "which topology file? (see "
                               "examples/topologies/)" : "expected one topology file");
    const char *file = c->argv[first];

    struct topo *t = cli_load_topology(file);
    if (!t)
        return CLI_FAIL;
    /* Record the absolute path, so `status` means something from any directory. */
    char abs[PATH_MAX];
    if (realpath(file, abs) && strlen(abs) < sizeof t->path)
        memcpy(t->path, abs, strlen(abs) + 1);

    struct fab *f;
    rc = fab_create(o.fabric, t, devreg_layout, &f);
    if (rc) {
        char dir[128] = "";
        fab_dir(o.fabric, dir, sizeof dir);
        if (rc == -EEXIST)
            explain_exists(o.fabric);
        else if (rc == -EINVAL) /* the lines above said what is wrong with the topology */
            cli_err("%s is not a valid topology; fix the lines above (see docs/topology.md)", file);
        else
            cli_err("cannot create fabric '%s' in %s: %s (is NTBLEND_SHM_DIR a writable "
                    "directory with enough space?)", o.fabric, dir, strerror(-rc));
        free(t);
        return CLI_FAIL;
    }
    memcpy(f->ctl->dma_cpus, dma_cpus, sizeof dma_cpus);
    uint32_t n = f->ctl->nhosts;
    uint32_t *hosts = calloc(n ? n : 1, sizeof *hosts);
    pid_t *pids = calloc(n ? n : 1, sizeof *pids);
    size_t started = 0;
    if (!hosts || !pids) {
        cli_err("out of memory");
        rc = -ENOMEM;
        goto fail;
    }
    catch_signals();

    /* Power every host on before any agent runs (so no state change waits for a booting
     * agent's acknowledgement), then start every agent before waiting for any: they boot in
     * parallel. */
    for (uint32_t i = 0; i < n && !rc; i++) {
        hosts[i] = i;
        rc = fab_host_set_state(f, i, FAB_HOST_BOOTING);
        if (rc)
            cli_err("cannot power on host %s: %s", fab_host(f, i)->name, strerror(-rc));
    }
    for (uint32_t i = 0; i < n && !rc; i++)
        if ((rc = cli_spawn_agent(o.fabric, f->dir, i, &pids[i])) == 0)
            started++;
    size_t bad = 0;
    int wstatus = 0;
    if (!rc) {
        rc = wait_up(f, hosts, pids, n, UP_TIMEOUT_MS, &bad, &wstatus);
        if (rc)
            report_boot_failure(f, rc, hosts[bad], wstatus, UP_TIMEOUT_MS);
    }
    if (rc)
        goto fail;

    printf("fabric '%s' is up: %u host%s, %u adapter%s, %u switch%s, %u link%s\n", o.fabric,
           n, n == 1 ? "" : "s", f->ctl->nadapters, f->ctl->nadapters == 1 ? "" : "s",
           f->ctl->nswitches, f->ctl->nswitches == 1 ? "" : "es", f->ctl->nlinks,
           f->ctl->nlinks == 1 ? "" : "s");
    printf("  topology:   %s\n", f->ctl->topo_path);
    printf("  state:      %s (agent logs: host<N>.log)\n", f->dir);
    printf("  next:       ntblend status --fabric %s\n", o.fabric);
    fab_detach(f);
    goto out;

fail:
    teardown(f, o.fabric, pids, started);
    fprintf(stderr, "ntblend: fabric '%s' was taken down again\n", o.fabric);
out:
    free(t);
    free(hosts);
    free(pids);
    return rc ? CLI_FAIL : CLI_OK;
}

/* The NVMe models keep namespace images in $NTBLEND_NVME_DIR/<fabric> (default
 * /var/tmp/ntblend/<fabric>) unless a device names its own backing= directory: those go with
 * the fabric. */
static void remove_namespace_images(const char *fabric)
{
    const char *root = getenv("NTBLEND_NVME_DIR");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", root && *root ? root : "/var/tmp/ntblend", fabric);
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".img"))
            unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
    rmdir(dir);
}

int cmd_down(struct cli *c)
{
    struct cli_opts o;
    int first;
    int rc = cli_parse(c, 0, false, &o, &first);
    if (rc >= 0)
        return rc;
    if (first != c->argc)
        return cli_usage_error("down", "unexpected argument '%s'", c->argv[first]);

    char dir[128];
    struct stat st;
    fab_dir(o.fabric, dir, sizeof dir);
    if (stat(dir, &st) < 0) {
        cli_err("fabric '%s' is not up (nothing to take down)", o.fabric);
        return CLI_FAIL;
    }
    struct fab *f;
    if (fab_attach(o.fabric, -1, &f) < 0) {
        /* No usable state: a crash during `up`, or a fabric of another ntblend version, whose
         * agents may still run: found by their command lines instead. */
        pid_t found[TOPO_MAX_HOSTS];
        size_t nfound = cli_find_agents(o.fabric, found, TOPO_MAX_HOSTS);
        cli_stop_pids(found, nfound, STOP_GRACE_MS);
        rc = fab_destroy_files(o.fabric);
        if (rc) {
            cli_err("cannot remove %s: %s", dir, strerror(-rc));
            return CLI_FAIL;
        }
        printf("fabric '%s': removed what was left in %s (a failed 'ntblend up', or another "
               "ntblend version's fabric; %zu agent%s stopped)\n", o.fabric, dir, nfound,
               nfound == 1 ? "" : "s");
        return CLI_OK;
    }
    uint32_t n = f->ctl->nhosts;
    pid_t *pids = calloc(n ? n : 1, sizeof *pids);
    if (!pids) {
        fab_detach(f);
        cli_err("out of memory");
        return CLI_FAIL;
    }
    size_t npids = 0;
    for (uint32_t i = 0; i < n; i++) {
        pid_t pid = atomic_load(&fab_host(f, i)->agent_pid);
        if (cli_is_agent(pid, o.fabric, i))
            pids[npids++] = pid;
    }
    size_t killed = cli_stop_pids(pids, npids, STOP_GRACE_MS);

    /* Tell applications the fabric is going away, and power every host off. One state change
     * through the fabric API publishes them all (wakes link waiters, remaps windows). */
    atomic_store(&f->ctl->down, 1);
    for (uint32_t i = 0; i < n; i++) {
        atomic_store(&fab_host(f, i)->state, FAB_HOST_DOWN);
        atomic_store(&fab_host(f, i)->agent_pid, 0);
    }
    if (n)
        fab_host_set_state(f, 0, FAB_HOST_DOWN);
    fab_detach(f);
    free(pids);
    rc = fab_destroy_files(o.fabric);
    remove_namespace_images(o.fabric);
    if (rc) {
        cli_err("agents stopped, but cannot remove %s: %s", dir, strerror(-rc));
        return CLI_FAIL;
    }
    printf("fabric '%s' is down (%zu agent%s stopped", o.fabric, npids, npids == 1 ? "" : "s");
    if (killed)
        printf(", %zu of them with SIGKILL after %d s", killed, STOP_GRACE_MS / 1000);
    printf(")\n");
    return CLI_OK;
}

static int host_kill(struct fab *f, const char *fabric, uint32_t h)
{
    struct fab_host *host = fab_host(f, h);
    if (atomic_load(&host->state) == FAB_HOST_DOWN) {
        cli_err("host %s is already down; boot it with: ntblend host start %s --fabric %s",
                host->name, host->name, fabric);
        return CLI_FAIL;
    }
    pid_t pid = atomic_load(&host->agent_pid);
    bool killed = false;
    if (cli_is_agent(pid, fabric, h)) {
        kill(pid, SIGKILL); /* a crash: no chance to clean up, as when a machine loses power */
        for (int waited = 0; !cli_pid_gone(pid); waited += 10) {
            if (waited >= STOP_GRACE_MS) {
                cli_err("the agent of host %s (pid %d) does not die; is it stuck in the "
                        "kernel? check 'ps -l %d'", host->name, (int)pid, (int)pid);
                return CLI_FAIL;
            }
            cli_sleep_ms(10);
        }
        killed = true;
    }
    atomic_store(&host->agent_pid, 0);
    int rc = fab_host_set_state(f, h, FAB_HOST_DOWN);
    if (rc) {
        cli_err("cannot power off host %s: %s", host->name, strerror(-rc));
        return CLI_FAIL;
    }
    if (killed)
        printf("host %s crashed (agent pid %d killed); its peers see their links down\n",
               host->name, (int)pid);
    else
        printf("host %s is down (it had no running agent)\n", host->name);
    return CLI_OK;
}

static int host_start(struct fab *f, const char *fabric, uint32_t h)
{
    struct fab_host *host = fab_host(f, h);
    uint32_t st = atomic_load(&host->state);
    pid_t old = atomic_load(&host->agent_pid);
    /* A host stuck in "booting" whose agent died may be started again. */
    if (st == FAB_HOST_UP || (st == FAB_HOST_BOOTING && cli_is_agent(old, fabric, h))) {
        cli_err("host %s is %s; to reboot it: ntblend host kill %s && ntblend host start %s",
                host->name, cli_state_name(st), host->name, host->name);
        return CLI_FAIL;
    }
    int rc = fab_host_set_state(f, h, FAB_HOST_BOOTING);
    if (rc) {
        cli_err("cannot power on host %s: %s", host->name, strerror(-rc));
        return CLI_FAIL;
    }
    catch_signals();
    pid_t pid;
    rc = cli_spawn_agent(fabric, f->dir, h, &pid);
    size_t bad;
    int wstatus = 0;
    if (!rc) {
        rc = wait_up(f, &h, &pid, 1, START_TIMEOUT_MS, &bad, &wstatus);
        if (rc) {
            report_boot_failure(f, rc, h, wstatus, START_TIMEOUT_MS);
            cli_stop_pids(&pid, 1, STOP_GRACE_MS);
        }
    }
    if (rc) {
        atomic_store(&host->agent_pid, 0);
        fab_host_set_state(f, h, FAB_HOST_DOWN);
        fprintf(stderr, "ntblend: host %s stays down\n", host->name);
        return CLI_FAIL;
    }
    printf("host %s is up (agent pid %d, boot %u)\n", host->name, (int)pid,
           atomic_load(&host->boot_gen));
    return CLI_OK;
}

int cmd_host(struct cli *c)
{
    struct cli_opts o;
    int first;
    int rc = cli_parse(c, 0, false, &o, &first);
    if (rc >= 0)
        return rc;
    if (c->argc - first != 2)
        return cli_usage_error("host", "expected an action (kill or start) and a host");
    const char *action = c->argv[first], *name = c->argv[first + 1];
    bool kill_it = strcmp(action, "kill") == 0;
    if (!kill_it && strcmp(action, "start") != 0)
        return cli_usage_error("host", "unknown action '%s' (kill or start)", action);
    struct fab *f;
    if (cli_attach(o.fabric, &f) < 0)
        return CLI_FAIL;
    int h = cli_host(f, name);
    rc = h < 0 ? CLI_FAIL
               : kill_it ? host_kill(f, o.fabric, (uint32_t)h) : host_start(f, o.fabric, (uint32_t)h);
    fab_detach(f);
    return rc;
}
