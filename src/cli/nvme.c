/*
 * `ntblend nvme`: one NVMe shared by many hosts. `manager` starts the manager of a device on a
 * host (the program ntblend-nvme-manager, in the background, its log and status next to the
 * fabric's state), `stop` stops it, `status` shows each NVMe's manager and clients, and
 * `mount` exposes a device's namespaces as files through FUSE (ntblend-nvmefs).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

#define READY_TIMEOUT_MS 30000
#define STOP_TIMEOUT_MS 20000

/* The fabric's NVMe named dev: its function index, or -1 after a message. */
static int nvme_func(const struct fab *f, const char *dev)
{
    int fn = fab_func_by_name(f, dev);
    if (fn < 0) {
        cli_err("no device '%s' in this fabric (ntblend device list shows them)", dev);
        return -1;
    }
    if (strcmp(fab_func(f, (uint32_t)fn)->type, "nvme")) {
        cli_err("'%s' is a %s device, not an NVMe", dev, fab_func(f, (uint32_t)fn)->type);
        return -1;
    }
    return fn;
}

static void paths(const char *fabric, const char *dev, char *log, char *status, size_t len)
{
    char dir[512];
    fab_dir(fabric, dir, sizeof dir);
    snprintf(log, len, "%s/nvme-%s.log", dir, dev);
    snprintf(status, len, "%s/nvme-%s.json", dir, dev);
}

/* Is pid an ntblend-nvme-manager (so a recycled pid is never signalled)? */
static bool is_manager(pid_t pid)
{
    char p[64], cmd[4096];
    snprintf(p, sizeof p, "/proc/%d/cmdline", (int)pid);
    FILE *f = fopen(p, "r");
    if (!f)
        return false;
    size_t n = fread(cmd, 1, sizeof cmd - 1, f);
    fclose(f);
    cmd[n] = 0;
    const char *base = strrchr(cmd, '/');
    return strcmp(base ? base + 1 : cmd, "ntblend-nvme-manager") == 0;
}

static int manager(const char *fabric, const char *host, const char *dev, bool fg,
                   const char *max_clients)
{
    char exe[4096], log[600], status[600];
    if (cli_sibling("ntblend-nvme-manager", exe, sizeof exe)) {
        cli_err("cannot find ntblend-nvme-manager beside ntblend: build it (target "
                "ntblend-nvme-manager) or reinstall ntblend");
        return CLI_FAIL;
    }
    struct fab *f;
    if (cli_attach(fabric, &f) < 0)
        return CLI_FAIL;
    int fn = nvme_func(f, dev), h = fn < 0 ? -1 : cli_host(f, host);
    char hname[TOPO_NAME_MAX] = "";
    uint32_t st = 0, mgr = 0, mpid = 0, boot = 0;
    if (h >= 0) {
        snprintf(hname, sizeof hname, "%s", fab_host(f, (uint32_t)h)->name);
        st = atomic_load(&fab_host(f, (uint32_t)h)->state);
        boot = atomic_load(&fab_host(f, (uint32_t)h)->boot_gen);
        mgr = atomic_load(&fab_func(f, (uint32_t)fn)->lend_manager);
        mpid = atomic_load(&fab_func(f, (uint32_t)fn)->lend_manager_pid);
        if (mgr && mgr - 1 < f->ctl->nhosts)
            snprintf(log, sizeof log, "%s", fab_host(f, mgr - 1)->name);
    }
    fab_detach(f);
    if (fn < 0 || h < 0)
        return CLI_FAIL;
    if (st != FAB_HOST_UP) {
        cli_err("host %s is %s; boot it with: ntblend host start %s", hname,
                cli_state_name(st), hname);
        return CLI_FAIL;
    }
    if (mgr) {
        cli_err("%s has a manager already: pid %u on host %s (ntblend nvme stop %s first)", dev,
                mpid, log, dev);
        return CLI_FAIL;
    }
    paths(fabric, dev, log, status, sizeof log);
    char life[16];
    snprintf(life, sizeof life, "%u", boot);
    /* As `ntblend run`: the manager belongs to this life of the host. */
    if (setenv("NTBLEND_FABRIC", fabric, 1) < 0 || setenv("NTBLEND_HOST", hname, 1) < 0 ||
        setenv("NTBLEND_HOST_BOOT", life, 1) < 0) {
        cli_err("cannot set the environment: %s", strerror(errno));
        return CLI_FAIL;
    }
    char *args[12];
    int n = 0;
    args[n++] = "ntblend-nvme-manager";
    args[n++] = "--status-file";
    args[n++] = status;
    if (max_clients) {
        args[n++] = "--max-clients";
        args[n++] = (char *)max_clients;
    }
    if (fg) {
        args[n++] = (char *)dev;
        args[n] = NULL;
        fflush(NULL);
        execv(exe, args);
        cli_err("cannot run %s: %s", exe, strerror(errno));
        return CLI_FAIL;
    }
    args[n++] = "--ready-fd";
    int fd_arg = n++;
    args[n++] = (char *)dev;
    args[n] = NULL;
    char what[64];
    snprintf(what, sizeof what, "the manager of %s", dev);
    pid_t pid = cli_spawn_ready(exe, args, fd_arg, log, READY_TIMEOUT_MS, what);
    if (pid < 0)
        return CLI_FAIL;
    printf("%s: manager running on host %s, pid %d (log %s); clients open %s with "
           "libntbnvme on any host\n", dev, hname, (int)pid, log, dev);
    return CLI_OK;
}

static int stop(const char *fabric, const char *dev)
{
    struct fab *f;
    if (cli_attach(fabric, &f) < 0)
        return CLI_FAIL;
    int fn = nvme_func(f, dev);
    if (fn < 0) {
        fab_detach(f);
        return CLI_FAIL;
    }
    struct fab_function *x = fab_func(f, (uint32_t)fn);
    uint32_t mgr = atomic_load(&x->lend_manager);
    pid_t pid = (pid_t)atomic_load(&x->lend_manager_pid);
    if (!mgr) {
        fab_detach(f);
        cli_err("%s has no manager running", dev);
        return CLI_FAIL;
    }
    if (!is_manager(pid) || kill(pid, SIGTERM) < 0) {
        fab_detach(f);
        cli_err("the manager of %s (pid %d) is not a process here any more", dev, (int)pid);
        return CLI_FAIL;
    }
    int waited = 0;
    while (atomic_load(&x->lend_manager) == mgr && waited < STOP_TIMEOUT_MS) {
        cli_sleep_ms(20);
        waited += 20;
    }
    bool ok = atomic_load(&x->lend_manager) != mgr;
    fab_detach(f);
    if (!ok) {
        cli_err("the manager of %s (pid %d) did not stop within %d s", dev, (int)pid,
                STOP_TIMEOUT_MS / 1000);
        return CLI_FAIL;
    }
    printf("%s: manager stopped (its clients' queues deleted, the controller shut down)\n", dev);
    return CLI_OK;
}

static int status(const char *fabric, bool json)
{
    struct fab *f;
    if (cli_attach(fabric, &f) < 0)
        return CLI_FAIL;
    json_object *arr = json_object_new_array();
    if (!json)
        printf("  %-10s %-8s %-18s %-8s %-12s %s\n", "DEVICE", "LENDER", "MANAGER", "CLIENTS",
               "QUEUE PAIRS", "RECLAIMED");
    for (uint32_t i = 0; i < f->ctl->nfuncs; i++) {
        const struct fab_function *x = fab_func(f, i);
        if (strcmp(x->type, "nvme"))
            continue;
        uint32_t mgr = atomic_load(&x->lend_manager);
        uint32_t pid = atomic_load(&x->lend_manager_pid);
        char log[600], st[600];
        paths(fabric, x->name, log, st, sizeof log);
        json_object *s = mgr ? json_object_from_file(st) : NULL;
        json_object *v;
        int clients = s && json_object_object_get_ex(s, "clients", &v) ? json_object_get_int(v) : -1;
        int qp = s && json_object_object_get_ex(s, "qpairs", &v) ? json_object_get_int(v) : -1;
        int mq = s && json_object_object_get_ex(s, "max_qpairs", &v) ? json_object_get_int(v) : -1;
        int rc = s && json_object_object_get_ex(s, "reclaimed_clients", &v) ? json_object_get_int(v) : -1;
        const char *mh = mgr && mgr - 1 < f->ctl->nhosts ? fab_host(f, mgr - 1)->name : NULL;
        if (json) {
            json_object *o = json_object_new_object();
            json_object_object_add(o, "device", json_object_new_string(x->name));
            json_object_object_add(o, "lender", json_object_new_string(fab_host(f, x->host)->name));
            json_object *m = NULL;
            if (mh) {
                m = json_object_new_object();
                json_object_object_add(m, "host", json_object_new_string(mh));
                json_object_object_add(m, "pid", json_object_new_int((int)pid));
                json_object_object_add(m, "log", json_object_new_string(log));
                if (s)
                    json_object_object_add(m, "state", json_object_get(s));
            }
            json_object_object_add(o, "manager", m);
            json_object_array_add(arr, o);
        } else {
            char who[64] = "-", c[16] = "-", q[24] = "-", r[16] = "-";
            if (mh)
                snprintf(who, sizeof who, "%s pid %u", mh, pid);
            if (clients >= 0)
                snprintf(c, sizeof c, "%d", clients);
            if (qp >= 0)
                snprintf(q, sizeof q, "%d/%d", qp, mq);
            if (rc >= 0)
                snprintf(r, sizeof r, "%d", rc);
            printf("  %-10s %-8s %-18s %-8s %-12s %s\n", x->name, fab_host(f, x->host)->name,
                   who, c, q, r);
        }
        if (s)
            json_object_put(s);
    }
    fab_detach(f);
    if (json)
        printf("%s\n", json_object_to_json_string_ext(arr, JSON_C_TO_STRING_PRETTY));
    json_object_put(arr);
    return CLI_OK;
}

static int mount_fs(const char *fabric, const char *host, int argc, char **argv)
{
    char exe[4096];
    if (cli_sibling("ntblend-nvmefs", exe, sizeof exe)) {
        cli_err("this build has no ntblend-nvmefs (it needs libfuse3: scripts/install-deps.sh, "
                "then rebuild)");
        return CLI_FAIL;
    }
    if (access("/dev/fuse", R_OK | W_OK) < 0) {
        cli_err("/dev/fuse is not usable here (%s): FUSE mounts are not possible on this "
                "machine", strerror(errno));
        return CLI_FAIL;
    }
    struct fab *f;
    if (cli_attach(fabric, &f) < 0)
        return CLI_FAIL;
    int h = cli_host(f, host);
    char hname[TOPO_NAME_MAX] = "", life[16] = "";
    if (h >= 0) {
        snprintf(hname, sizeof hname, "%s", fab_host(f, (uint32_t)h)->name);
        snprintf(life, sizeof life, "%u", atomic_load(&fab_host(f, (uint32_t)h)->boot_gen));
    }
    fab_detach(f);
    if (h < 0)
        return CLI_FAIL;
    if (setenv("NTBLEND_FABRIC", fabric, 1) < 0 || setenv("NTBLEND_HOST", hname, 1) < 0 ||
        setenv("NTBLEND_HOST_BOOT", life, 1) < 0) {
        cli_err("cannot set the environment: %s", strerror(errno));
        return CLI_FAIL;
    }
    char **args = calloc((size_t)argc + 2, sizeof *args);
    if (!args)
        return CLI_FAIL;
    args[0] = "ntblend-nvmefs";
    for (int i = 0; i < argc; i++)
        args[i + 1] = argv[i];
    fflush(NULL);
    execv(exe, args);
    cli_err("cannot run %s: %s", exe, strerror(errno));
    free(args);
    return CLI_FAIL;
}

/* The nvmefs mount at dir (as /proc/self/mountinfo has it): its device and the pid of the
 * ntblend-nvmefs that serves it, from the fs name "ntblend:DEVICE:PID". */
static int find_mount(const char *dir, char *dev, size_t len, pid_t *pid)
{
    FILE *m = fopen("/proc/self/mountinfo", "r");
    if (!m)
        return -errno;
    char line[4096];
    int rc = -ENOENT;
    while (rc == -ENOENT && fgets(line, sizeof line, m)) {
        /* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER */
        char point[PATH_MAX], type[64], source[256];
        const char *sep = strstr(line, " - ");
        if (!sep || sscanf(line, "%*s %*s %*s %*s %4095s", point) != 1 ||
            sscanf(sep + 3, "%63s %255s", type, source) != 2 || strcmp(point, dir))
            continue;
        char *colon = strrchr(source, ':');
        rc = -EMEDIUMTYPE;
        if (!strcmp(type, "fuse.nvmefs") && !strncmp(source, "ntblend:", 8) && colon &&
            colon > source + 8) {
            *colon = '\0';
            snprintf(dev, len, "%.*s", (int)(len - 1), source + 8);
            *pid = (pid_t)strtol(colon + 1, NULL, 10);
            rc = 0;
        }
    }
    fclose(m);
    return rc;
}

/* fusermount3 -u DIR, then wait until the ntblend-nvmefs serving it has returned the device
 * and exited: the unmount alone comes back before that, and a device still held cannot be
 * lent or borrowed exclusively. */
static int unmount_fs(const char *path)
{
    char dir[PATH_MAX], dev[64];
    pid_t pid = 0;
    if (!realpath(path, dir)) {
        cli_err("%s: %s", path, strerror(errno));
        return CLI_FAIL;
    }
    int rc = find_mount(dir, dev, sizeof dev, &pid);
    if (rc) {
        cli_err(rc == -EMEDIUMTYPE ? "%s is not an ntblend NVMe mount (see mount(8))"
                : rc == -ENOENT ? "nothing is mounted at %s" : "%s: cannot read the mount table",
                dir);
        return CLI_FAIL;
    }
    pid_t child = fork();
    if (child == 0) {
        execlp("fusermount3", "fusermount3", "-u", dir, (char *)NULL);
        fprintf(stderr, "ntblend: cannot run fusermount3 (package fuse3): %s\n", strerror(errno));
        _exit(127);
    }
    int st = 0;
    if (child < 0 || waitpid(child, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
        cli_err("could not unmount %s (busy? a program still has a file open there)", dir);
        return CLI_FAIL;
    }
    /* The daemon returns the device on its way out: a device reset and a request to its
     * lender, well under a second; ten seconds means it is stuck. */
    for (int waited = 0; pid > 0 && kill(pid, 0) == 0; waited += 10) {
        if (waited >= 10000) {
            cli_err("unmounted %s, but ntblend-nvmefs (pid %d) has not exited after 10 s",
                    dir, (int)pid);
            return CLI_FAIL;
        }
        usleep(10000);
    }
    printf("unmounted %s: %s is returned\n", dir, dev);
    return CLI_OK;
}

static bool takes_value(const char *a)
{
    return !strcmp(a, "--fabric") || !strcmp(a, "--host") || !strcmp(a, "--max-clients");
}

int cmd_nvme(struct cli *c)
{
    static const struct option opts[] = {
        { "fabric", required_argument, NULL, 'f' },
        { "host", required_argument, NULL, 'H' },
        { "json", no_argument, NULL, 'j' },
        { "foreground", no_argument, NULL, 'F' },
        { "max-clients", required_argument, NULL, 'm' },
        { "help", no_argument, NULL, 'h' },
        { 0 },
    };
    /* mount passes everything after its action on to ntblend-nvmefs: parse only what comes
     * before it there; elsewhere options may come anywhere. */
    int a = 1;
    while (a < c->argc && c->argv[a][0] == '-' && strcmp(c->argv[a], "--"))
        a += takes_value(c->argv[a]) ? 2 : 1;
    bool is_mount = a < c->argc && !strcmp(c->argv[a], "mount");
    const char *fabric = c->fabric_arg, *host = NULL, *max_clients = NULL;
    bool json = false, fg = false;
    optind = 0;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(c->argc, c->argv, is_mount ? "+:h" : ":h", opts, NULL)) != -1) {
        switch (ch) {
        case 'f': fabric = optarg; break;
        case 'H': host = optarg; break;
        case 'j': json = true; break;
        case 'F': fg = true; break;
        case 'm': max_clients = optarg; break;
        case 'h': return cli_help("nvme");
        case ':': return cli_usage_error("nvme", "option '%s' needs a value", c->argv[optind - 1]);
        default: return cli_usage_error("nvme", "unknown option '%s'", c->argv[optind - 1]);
        }
    }
    fabric = fab_name_resolve(fabric);
    char dir[128];
    if (fab_dir(fabric, dir, sizeof dir) < 0)
        return cli_usage_error("nvme", "invalid fabric name '%s'", fabric);
    if (optind >= c->argc)
        return cli_usage_error("nvme", "what? manager, stop, status, mount or unmount");
    const char *what = c->argv[optind++];
    int ops = c->argc - optind;
    char **operand = c->argv + optind;
    if (!strcmp(what, "manager")) {
        if (ops != 1)
            return cli_usage_error("nvme", "manager takes one device (e.g. nvme0)");
        if (!host)
            return cli_usage_error("nvme", "which host runs the manager? give --host H (the "
                                   "device's own host is the usual choice)");
        if (max_clients) {
            char *end;
            unsigned long n = strtoul(max_clients, &end, 10);
            if (*end || !n || n > 1024)
                return cli_usage_error("nvme", "--max-clients takes 1..1024");
        }
        return manager(fabric, host, operand[0], fg, max_clients);
    }
    if (!strcmp(what, "stop")) {
        if (ops != 1)
            return cli_usage_error("nvme", "stop takes one device (e.g. nvme0)");
        return stop(fabric, operand[0]);
    }
    if (!strcmp(what, "status")) {
        if (ops)
            return cli_usage_error("nvme", "status takes no operands");
        return status(fabric, json);
    }
    if (!strcmp(what, "mount")) {
        if (ops < 2)
            return cli_usage_error("nvme", "mount takes a device and a directory");
        if (!host)
            return cli_usage_error("nvme", "which host mounts it? give --host H before 'mount'");
        return mount_fs(fabric, host, ops, operand);
    }
    if (!strcmp(what, "unmount")) {
        if (ops != 1)
            return cli_usage_error("nvme", "unmount takes the mounted directory");
        return unmount_fs(operand[0]);
    }
    return cli_usage_error("nvme", "unknown action '%s' (manager, stop, status, mount or "
                           "unmount)", what);
}
