/*
 * What several commands share: attaching to a running fabric with a helpful message when it
 * is not there, finding hosts by name, loading topology files, and starting, recognising and
 * stopping host agents.
 * Agents are daemons (own session, stdin /dev/null, output appended to host<N>.log in the
 * fabric directory); the fabric records their pids, which we verify through /proc before
 * signalling, so a pid the kernel has recycled is never hit.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "registry.h"

void cli_sleep_ms(int ms)
{
    struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

int cli_attach(const char *fabric, struct fab **out)
{
    int rc = fab_attach(fabric, -1, out);
    if (rc == 0 && atomic_load(&(*out)->ctl->down)) {
        fab_detach(*out);
        rc = -ESHUTDOWN;
    }
    switch (rc) {
    case 0:
        break;
    case -ENOENT: {
        char dir[128];
        struct stat st;
        if (fab_dir(fabric, dir, sizeof dir) == 0 && stat(dir, &st) == 0)
            cli_err("fabric '%s' is half-created (an 'ntblend up' still running, or a crash); "
                    "if nothing is using it, clear it with: ntblend down --fabric %s", fabric,
                    fabric);
        else
            cli_err("fabric '%s' is not up; start it with: ntblend up FILE --fabric %s", fabric,
                    fabric);
        break;
    }
    case -EPROTO:
        cli_err("fabric '%s' is half-created or from another ntblend version; clear it with: "
                "ntblend down --fabric %s", fabric, fabric);
        break;
    case -ESHUTDOWN:
        cli_err("fabric '%s' is being taken down; wait for 'ntblend down' to finish", fabric);
        break;
    default: {
        char dir[128] = "";
        fab_dir(fabric, dir, sizeof dir);
        cli_err("cannot open fabric '%s' (%s): %s", fabric, dir, strerror(-rc));
    }
    }
    return rc;
}

int cli_host(const struct fab *f, const char *name)
{
    int h = fab_host_by_name(f, name);
    if (h >= 0)
        return h;
    char list[512] = "";
    size_t used = 0;
    for (uint32_t i = 0; i < f->ctl->nhosts && used + 40 < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                                 fab_host(f, i)->name);
    if (used + 40 >= sizeof list)
        snprintf(list + used, sizeof list - used, ", ...");
    cli_err("fabric '%s' has no host named '%s' (hosts: %s; a node id works too)", f->ctl->name,
            name, list);
    return -ENOENT;
}

const char *cli_state_name(uint32_t st)
{
    switch (st) {
    case FAB_HOST_DOWN: return "down";
    case FAB_HOST_BOOTING: return "booting";
    case FAB_HOST_UP: return "up";
    default: return "?";
    }
}

/* ---------------------------------------------------------------- processes */

bool cli_is_agent(pid_t pid, const char *fabric, uint32_t host)
{
    if (pid <= 0)
        return false;
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return false; /* a zombie has no command line: nothing to signal */
    buf[n] = '\0';
    /* argv is NUL-separated: argv[0] must be the agent, with --fabric F and --host N. */
    const char *args[32];
    int argc = 0;
    for (char *p = buf; p < buf + n && argc < 32; p += strlen(p) + 1)
        args[argc++] = p;
    const char *base = strrchr(args[0], '/');
    if (strcmp(base ? base + 1 : args[0], "ntblend-agent") != 0)
        return false;
    char hostnum[16];
    snprintf(hostnum, sizeof hostnum, "%u", host);
    bool fab_ok = false, host_ok = host == CLI_ANY_HOST;
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(args[i], "--fabric") == 0 && strcmp(args[i + 1], fabric) == 0)
            fab_ok = true;
        if (strcmp(args[i], "--host") == 0 && strcmp(args[i + 1], hostnum) == 0)
            host_ok = true;
    }
    return fab_ok && host_ok;
}

size_t cli_find_agents(const char *fabric, pid_t *pids, size_t max)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    size_t n = 0;
    for (struct dirent *e; n < max && (e = readdir(d));) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0 || !cli_is_agent((pid_t)pid, fabric, CLI_ANY_HOST))
            continue;
        /* Ours only if it runs in our fabric directory ($NTBLEND_SHM_DIR, inherited). */
        char path[64], env[8192], *want = getenv("NTBLEND_SHM_DIR");
        snprintf(path, sizeof path, "/proc/%ld/environ", pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t len = fd < 0 ? -1 : read(fd, env, sizeof env - 1);
        if (fd >= 0)
            close(fd);
        const char *theirs = NULL;
        for (ssize_t i = 0; i < len; i += (ssize_t)strlen(env + i) + 1) {
            env[len] = '\0';
            if (!strncmp(env + i, "NTBLEND_SHM_DIR=", 16))
                theirs = env + i + 16;
        }
        if (strcmp(theirs && *theirs ? theirs : "/dev/shm", want && *want ? want : "/dev/shm") == 0)
            pids[n++] = (pid_t)pid;
    }
    closedir(d);
    return n;
}

/* A process that exited but was not reaped yet (its parent is gone and init is slow, or is
 * not a reaper at all in a container) is as dead as one that was reaped. */
static bool is_zombie(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return true;
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command name may itself contain ')' */
    return !p || p[1] == '\0' || p[2] == 'Z' || p[2] == 'X';
}

bool cli_pid_gone(pid_t pid)
{
    if (pid <= 0)
        return true;
    int st;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid)
        return true;
    if (r == 0)
        return false; /* our child, still running */
    if (kill(pid, 0) < 0 && errno == ESRCH)
        return true;
    return is_zombie(pid);
}

size_t cli_stop_pids(const pid_t *pids, size_t n, int grace_ms)
{
    for (size_t i = 0; i < n; i++)
        if (pids[i] > 0)
            kill(pids[i], SIGTERM);
    size_t left = n;
    for (int waited = 0; left && waited <= grace_ms; waited += 10) {
        left = 0;
        for (size_t i = 0; i < n; i++)
            left += !cli_pid_gone(pids[i]);
        if (left)
            cli_sleep_ms(10);
    }
    size_t killed = 0;
    for (size_t i = 0; i < n; i++)
        if (!cli_pid_gone(pids[i])) {
            kill(pids[i], SIGKILL);
            killed++;
        }
    for (int waited = 0; killed && waited < 5000; waited += 10) {
        left = 0;
        for (size_t i = 0; i < n; i++)
            left += !cli_pid_gone(pids[i]);
        if (!left)
            break;
        cli_sleep_ms(10);
    }
    return killed;
}

/* The host agent: beside ntblend in the build tree, in the helpers' directory installed. */
static int agent_path(char *out, size_t len)
{
    int rc = cli_sibling("ntblend-agent", out, len);
    if (rc)
        cli_err("cannot find the host agent, ntblend-agent, beside ntblend or in its helpers' "
                "directory (%s): build it (target ntblend-agent) or reinstall ntblend",
                strerror(-rc));
    return rc;
}

int cli_spawn_agent(const char *fabric, const char *dir, uint32_t host, pid_t *pid)
{
    static char exe[PATH_MAX];
    if (!exe[0]) {
        int rc = agent_path(exe, sizeof exe);
        if (rc) {
            exe[0] = '\0';
            return rc;
        }
    }
    char log[256], hostnum[16];
    snprintf(log, sizeof log, "%s/host%u.log", dir, host);
    snprintf(hostnum, sizeof hostnum, "%u", host);
    fflush(NULL); /* or the child's exit path could repeat our buffered output */
    pid_t p = fork();
    if (p < 0) {
        int e = errno;
        cli_err("cannot start the agent of host %u: %s", host, strerror(e));
        return -e;
    }
    if (p == 0) {
        /* Own session: a Ctrl-C meant for the shell that ran `up` must not kill the fabric. */
        setsid();
        int nul = open("/dev/null", O_RDONLY);
        int out = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (nul < 0 || out < 0 || dup2(nul, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0)
            _exit(127);
        if (nul > 2)
            close(nul);
        if (out > 2)
            close(out);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        time_t now = time(NULL);
        char when[64];
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime(&now));
        dprintf(2, "--- %s: ntblend starting host %u of fabric '%s' (pid %d)\n", when, host,
                fabric, (int)getpid());
        execl(exe, "ntblend-agent", "--fabric", fabric, "--host", hostnum, (char *)NULL);
        dprintf(2, "ntblend: cannot execute %s: %s\n", exe, strerror(errno));
        _exit(127);
    }
    *pid = p;
    return 0;
}

void cli_log_tail(const char *dir, uint32_t host, int lines)
{
    char path[256];
    snprintf(path, sizeof path, "%s/host%u.log", dir, host);
    FILE *fp = fopen(path, "re");
    if (!fp) {
        fprintf(stderr, "  (no log at %s)\n", path);
        return;
    }
    /* Logs are small, but only the end matters: read the last 64 KiB at most. */
    static char buf[65536];
    if (fseek(fp, 0, SEEK_END) == 0) {
        long size = ftell(fp);
        fseek(fp, size > (long)sizeof buf - 1 ? size - (long)sizeof buf + 1 : 0, SEEK_SET);
    }
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    while (n > 0 && buf[n - 1] == '\n')
        buf[--n] = '\0';
    const char *start = buf;
    int seen = 0;
    for (size_t i = n; i-- > 0;)
        if (buf[i] == '\n' && ++seen == lines) {
            start = buf + i + 1;
            break;
        }
    fprintf(stderr, "  last lines of %s:\n", path);
    if (!*start) {
        fprintf(stderr, "  | (empty)\n");
        return;
    }
    for (const char *p = start; *p;) {
        const char *nl = strchr(p, '\n');
        int len = nl ? (int)(nl - p) : (int)strlen(p);
        fprintf(stderr, "  | %.*s\n", len, p);
        p += len + (nl ? 1 : 0);
    }
}

struct topo *cli_load_topology(const char *file)
{
    struct topo *t = calloc(1, sizeof *t);
    if (!t) {
        cli_err("out of memory");
        return NULL;
    }
    int rc = topo_load(file, t, stderr);
    if (rc == 0) {
        /* The devices too, as `up` will lay them out: every command that reads a topology
         * accepts exactly what `up` accepts. */
        int nfuncs = devreg_layout(t, NULL, FAB_MAX_FUNCS, stderr);
        if (nfuncs > FAB_MAX_FUNCS) {
            fprintf(stderr, "%s: %d PCIe functions in all; a fabric holds at most %d (fewer "
                    "devices, functions or vfs)\n", file, nfuncs, FAB_MAX_FUNCS);
            nfuncs = -EINVAL;
        }
        if (nfuncs >= 0)
            return t;
        rc = nfuncs;
    }
    /* topo_load already said what is wrong with the file (FILE:LINE) or why it cannot be
     * opened; add the summary only where that helps. */
    if (rc == -EINVAL)
        cli_err("%s is not a valid topology; fix the lines above (see docs/topology.md)", file);
    else if (rc == -ENOMEM)
        cli_err("out of memory reading %s", file);
    free(t);
    return NULL;
}
