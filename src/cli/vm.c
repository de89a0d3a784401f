/*
 * `ntblend vm`: virtual machines on the fabric (docs/vm.md) — starting one (its process,
 * ntblend-vm, on the VM's host), giving it devices and taking them back while it runs,
 * listing them, its serial console, stopping it. Also the VMS part of `ntblend status` and
 * the "which VM holds this device" that status, device list and lspci show.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "cli.h"

#define READY_TIMEOUT_MS 60000
#define STOP_TIMEOUT_MS 15000
#define CTL_TIMEOUT_MS 60000 /* a hot-remove waits for the guest to let go */

static const char *state_name(uint32_t st)
{
    switch (st) {
    case FAB_VM_STARTING: return "starting";
    case FAB_VM_RUNNING: return "running";
    case FAB_VM_STOPPING: return "stopping";
    default: return "free";
    }
}

static const char *kind_name(uint32_t k)
{
    return k == FAB_VMDEV_VHOST_BLK ? "virtio-blk" : "pass-through";
}

int cli_vm_of(const struct fab *f, uint32_t fn, char *out, size_t len)
{
    for (uint32_t i = 0; i < FAB_MAX_VMS; i++) {
        const struct fab_vm *v = fab_vm(f, i);
        if (!fab_vm_live(f, i))
            continue;
        for (int d = 0; d < FAB_VM_DEVS; d++)
            if (atomic_load(&v->dev[d].state) != FAB_VMDEV_NONE && v->dev[d].fn == fn) {
                snprintf(out, len, "%s", v->name);
                return (int)i;
            }
    }
    out[0] = 0;
    return -1;
}

static void devices_of(const struct fab *f, const struct fab_vm *v, char *out, size_t len)
{
    size_t used = 0;
    out[0] = 0;
    for (int d = 0; d < FAB_VM_DEVS; d++) {
        const struct fab_vm_dev *x = &v->dev[d];
        if (atomic_load(&x->state) == FAB_VMDEV_NONE || x->fn >= f->ctl->nfuncs)
            continue;
        int w = snprintf(out + used, len - used, "%s%s (%s)", used ? ", " : "",
                         fab_func(f, x->fn)->name, kind_name(x->kind));
        if (w > 0 && (size_t)w < len - used)
            used += (size_t)w;
    }
    if (!used)
        snprintf(out, len, "-");
}

void cli_print_vms(const struct fab *f)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < FAB_MAX_VMS; i++)
        n += fab_vm_live(f, i);
    printf("\nVMS (%u)\n", n);
    if (!n)
        return;
    printf("  %-12s %-8s %8s  %-8s %-8s %7s  %s\n", "NAME", "HOST", "MEM", "GUEST", "STATE",
           "PID", "DEVICES");
    for (uint32_t i = 0; i < FAB_MAX_VMS; i++) {
        const struct fab_vm *v = fab_vm(f, i);
        if (!fab_vm_live(f, i))
            continue;
        char devs[512];
        devices_of(f, v, devs, sizeof devs);
        printf("  %-12s %-8s %6lluM  %-8s %-8s %7d  %s\n", v->name, fab_host(f, v->host)->name,
               (unsigned long long)(v->mem >> 20), v->guest, state_name(atomic_load(&v->state)),
               (int)atomic_load(&v->pid), devs);
    }
}

json_object *cli_vms_json(const struct fab *f)
{
    json_object *arr = json_object_new_array();
    for (uint32_t i = 0; i < FAB_MAX_VMS; i++) {
        const struct fab_vm *v = fab_vm(f, i);
        if (!fab_vm_live(f, i))
            continue;
        json_object *o = json_object_new_object(), *ds = json_object_new_array();
        json_object_object_add(o, "name", json_object_new_string(v->name));
        json_object_object_add(o, "host", json_object_new_string(fab_host(f, v->host)->name));
        json_object_object_add(o, "slot", json_object_new_int((int)i));
        json_object_object_add(o, "mem", json_object_new_int64((int64_t)v->mem));
        json_object_object_add(o, "ram_base", json_object_new_int64((int64_t)fab_vm_base(i)));
        json_object_object_add(o, "guest", json_object_new_string(v->guest));
        json_object_object_add(o, "state", json_object_new_string(state_name(atomic_load(&v->state))));
        json_object_object_add(o, "pid", json_object_new_int(atomic_load(&v->pid)));
        json_object_object_add(o, "qemu_pid", json_object_new_int(v->qemu_pid));
        for (int d = 0; d < FAB_VM_DEVS; d++) {
            const struct fab_vm_dev *x = &v->dev[d];
            if (atomic_load(&x->state) == FAB_VMDEV_NONE || x->fn >= f->ctl->nfuncs)
                continue;
            json_object *jd = json_object_new_object(), *bars = json_object_new_array();
            char bdf[16];
            snprintf(bdf, sizeof bdf, "00:%02x.%x", x->guest_bdf >> 3, x->guest_bdf & 7);
            json_object_object_add(jd, "device", json_object_new_string(fab_func(f, x->fn)->name));
            json_object_object_add(jd, "as", json_object_new_string(kind_name(x->kind)));
            json_object_object_add(jd, "state", json_object_new_string(
                atomic_load(&x->state) == FAB_VMDEV_HELD ? "held"
                : atomic_load(&x->state) == FAB_VMDEV_GONE ? "gone" : "offered"));
            json_object_object_add(jd, "guest_bdf", json_object_new_string(bdf));
            json_object_object_add(jd, "ram_io", json_object_new_int64((int64_t)x->ram_io));
            json_object_object_add(jd, "iova_gpa", json_object_new_boolean(x->flags & FAB_VMDEV_IOVA_GPA));
            json_object_object_add(jd, "lut_entries", json_object_new_int((int)x->luts));
            for (int b = 0; b < FAB_BARS; b++)
                json_object_array_add(bars, json_object_new_int64((int64_t)x->guest_bar[b]));
            json_object_object_add(jd, "guest_bars", bars);
            json_object_array_add(ds, jd);
        }
        json_object_object_add(o, "devices", ds);
        json_object_array_add(arr, o);
    }
    return arr;
}

/* ---------------------------------------------------------------- the VM's control socket */

static int ctl_request(const char *dir, const char *vm, const char *req, char *ans, size_t len)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    int n = snprintf(a.sun_path, sizeof a.sun_path, "%s/vm.%s.ctl", dir, vm);
    if (n < 0 || (size_t)n >= sizeof a.sun_path)
        return -ENAMETOOLONG;
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) || send(fd, req, strlen(req), MSG_NOSIGNAL) < 0) {
        int rc = -errno;
        close(fd);
        return rc;
    }
    struct pollfd p = { fd, POLLIN, 0 };
    ssize_t got = poll(&p, 1, CTL_TIMEOUT_MS) > 0 ? recv(fd, ans, len - 1, 0) : -1;
    close(fd);
    if (got <= 0)
        return -ETIMEDOUT;
    ans[got] = 0;
    ans[strcspn(ans, "\n")] = 0;
    return 0;
}

/* The live VM named `name` (its slot), or -1 after a message. */
static int find_vm(const struct fab *f, const char *name)
{
    int s = fab_vm_find(f, name);
    if (s < 0)
        cli_err("no VM named %s on fabric %s (ntblend vm list shows them)", name, f->ctl->name);
    return s;
}

struct start_opts {
    const char *name, *host, *mem, *guest, *image, *initrd, *run, *accel, *cpus;
    const char *devs[FAB_VM_DEVS];
    int ndevs;
    bool wait, pass;
};

static int start(const char *fabric, struct start_opts *o)
{
    char exe[4096], image[4096], log[600], life[16];
    if (cli_sibling("ntblend-vm", exe, sizeof exe)) {
        cli_err("cannot find ntblend-vm beside ntblend: build it (target ntblend-vm) or "
                "reinstall ntblend");
        return CLI_FAIL;
    }
    if (strcmp(o->guest, "qemu") && strcmp(o->guest, "emulated"))
        return cli_usage_error("vm", "--guest %s: give qemu (a Linux guest) or emulated", o->guest);
    if (o->pass && strcmp(o->guest, "qemu"))
        return cli_usage_error("vm", "--pass-through is for a QEMU guest (its own drivers drive "
                               "the devices); an emulated guest's devices are its own already");
    struct fab *f;
    if (cli_attach(fabric, &f) < 0)
        return CLI_FAIL;
    int h = cli_host(f, o->host);
    char hname[TOPO_NAME_MAX] = "";
    uint32_t st = 0, boot = 0;
    if (h >= 0) {
        snprintf(hname, sizeof hname, "%s", fab_host(f, (uint32_t)h)->name);
        st = atomic_load(&fab_host(f, (uint32_t)h)->state);
        boot = atomic_load(&fab_host(f, (uint32_t)h)->boot_gen);
    }
    bool exists = fab_vm_find(f, o->name) >= 0;
    snprintf(log, sizeof log, "%s/vm.%s.log", f->dir, o->name);
    for (int i = 0; h >= 0 && i < o->ndevs; i++) {
        int fn = fab_func_by_name(f, o->devs[i]);
        char holder[FAB_VM_NAME];
        if (fn < 0) {
            cli_err("no device %s on fabric %s (ntblend device list shows them)", o->devs[i],
                    f->ctl->name);
            h = -1;
        } else if (cli_vm_of(f, (uint32_t)fn, holder, sizeof holder) >= 0) {
            cli_err("%s is in VM %s already: ntblend vm detach %s %s first", o->devs[i], holder,
                    holder, o->devs[i]);
            h = -1;
        }
    }
    fab_detach(f);
    if (h < 0)
        return CLI_FAIL;
    if (st != FAB_HOST_UP) {
        cli_err("host %s is %s; boot it with: ntblend host start %s", hname, cli_state_name(st),
                hname);
        return CLI_FAIL;
    }
    if (exists) {
        cli_err("a VM named %s runs already (ntblend vm stop %s, or another name)", o->name, o->name);
        return CLI_FAIL;
    }
    if (!strcmp(o->guest, "qemu")) {
        if (o->image)
            snprintf(image, sizeof image, "%s", o->image);
        else
            cli_vm_image(image, sizeof image);
    }
    snprintf(life, sizeof life, "%u", boot);
    if (setenv("NTBLEND_FABRIC", fabric, 1) < 0 || setenv("NTBLEND_HOST", hname, 1) < 0 ||
        setenv("NTBLEND_HOST_BOOT", life, 1) < 0) {
        cli_err("cannot set the environment: %s", strerror(errno));
        return CLI_FAIL;
    }
    const char *args[64];
    int n = 0;
    args[n++] = "ntblend-vm";
    args[n++] = "--mem";
    args[n++] = o->mem;
    args[n++] = "--guest";
    args[n++] = o->guest;
    for (int i = 0; i < o->ndevs; i++) {
        args[n++] = "--device";
        args[n++] = o->devs[i];
    }
    if (!strcmp(o->guest, "qemu")) {
        args[n++] = "--image";
        args[n++] = image;
    }
    if (o->pass)
        args[n++] = "--pass-through";
#define OPT(flag, v) do { if (v) { args[n++] = flag; args[n++] = v; } } while (0)
    OPT("--initrd", o->initrd);
    OPT("--run", o->run);
    OPT("--accel", o->accel);
    OPT("--cpus", o->cpus);
#undef OPT
    args[n++] = "--ready-fd";
    int fd_arg = n++;
    args[n++] = o->name;
    args[n] = NULL;
    char what[64];
    snprintf(what, sizeof what, "VM %s", o->name);
    pid_t pid = cli_spawn_ready(exe, (char **)args, fd_arg, log, READY_TIMEOUT_MS, what);
    if (pid < 0)
        return CLI_FAIL;
    printf("VM %s: running on host %s, pid %d, %s of guest RAM (log %s)\n", o->name, hname,
           (int)pid, o->mem, log);
    if (!o->wait)
        return CLI_OK;
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    printf("VM %s: ended (exit status %d)\n", o->name, rc);
    return rc ? CLI_FAIL : CLI_OK;
}

static int stop(const char *fabric, const char *name)
{
    struct fab *f;
    if (cli_attach(fabric, &f) < 0)
        return CLI_FAIL;
    int s = find_vm(f, name);
    if (s < 0) {
        fab_detach(f);
        return CLI_FAIL;
    }
    struct fab_vm *v = fab_vm(f, (uint32_t)s);
    uint32_t gen = v->gen;
    pid_t pid = atomic_load(&v->pid);
    char ans[600];
    int rc = ctl_request(f->dir, name, "stop", ans, sizeof ans);
    if (rc && pid > 0)
        kill(pid, SIGTERM); /* its control socket is gone: the signal does the same */
    int waited = 0;
    while (atomic_load(&v->state) != FAB_VM_FREE && v->gen == gen && waited < STOP_TIMEOUT_MS) {
        cli_sleep_ms(20);
        waited += 20;
    }
    bool ok = atomic_load(&v->state) == FAB_VM_FREE || v->gen != gen;
    if (!ok && pid > 0) {
        kill(pid, SIGKILL); /* its agent returns what it held when it is gone */
        cli_err("VM %s (pid %d) did not stop within %d s; killed", name, (int)pid,
                STOP_TIMEOUT_MS / 1000);
    }
    fab_detach(f);
    if (ok)
        printf("VM %s: stopped; its RAM and devices are returned\n", name);
    return ok ? CLI_OK : CLI_FAIL;
}

/* One request to VM name's process: 0 with its "ok ..." answer in ans, or -1 after saying why
 * it failed. */
static int ask(const char *dir, const char *name, const char *req, char *ans, size_t len)
{
    int rc = ctl_request(dir, name, req, ans, len);
    if (rc) {
        cli_err("VM %s does not answer (%s); its log: %s/vm.%s.log", name, strerror(-rc), dir, name);
        return -1;
    }
    if (strncmp(ans, "ok", 2)) {
        cli_err("%s", !strncmp(ans, "error: ", 7) ? ans + 7 : ans);
        return -1;
    }
    return 0;
}

static int attach_detach(const char *fabric, const char *verb, const char *name, const char *dev)
{
    struct fab *f;
    if (cli_attach(fabric, &f) < 0)
        return CLI_FAIL;
    int s = find_vm(f, name);
    int fn = s < 0 ? -1 : fab_func_by_name(f, dev);
    char holder[FAB_VM_NAME] = "";
    if (s >= 0 && fn < 0)
        cli_err("no device %s on fabric %s (ntblend device list shows them)", dev, f->ctl->name);
    if (fn >= 0 && !strcmp(verb, "attach") && cli_vm_of(f, (uint32_t)fn, holder, sizeof holder) >= 0) {
        cli_err("%s is in VM %s already%s", dev, holder,
                strcmp(holder, name) ? ": detach it there first" : "");
        fn = -1;
    }
    char dir[128];
    snprintf(dir, sizeof dir, "%s", f->dir);
    fab_detach(f);
    if (fn < 0)
        return CLI_FAIL;
    char req[128], ans[600];
    snprintf(req, sizeof req, "%s %s", verb, dev);
    if (ask(dir, name, req, ans, sizeof ans))
        return CLI_FAIL;
    printf("VM %s: %s %s\n", name, !strcmp(verb, "attach") ? "hot-added" : "hot-removed and returned", dev);
    return CLI_OK;
}

/* A request to the VM that only it can answer: its guest's view of a device (cfg, reset). */
static int guest_request(const char *fabric, const char *name, const char *req)
{
    struct fab *f;
    if (cli_attach(fabric, &f) < 0)
        return CLI_FAIL;
    int s = find_vm(f, name);
    char dir[128];
    snprintf(dir, sizeof dir, "%s", f->dir);
    fab_detach(f);
    if (s < 0)
        return CLI_FAIL;
    char ans[600];
    if (ask(dir, name, req, ans, sizeof ans))
        return CLI_FAIL;
    if (ans[2] == ' ')
        printf("%s\n", ans + 3);
    return CLI_OK;
}

static int list(const char *fabric, bool json)
{
    struct fab *f;
    if (cli_attach(fabric, &f) < 0)
        return CLI_FAIL;
    fab_vm_reap(f, 0);
    if (json) {
        json_object *a = cli_vms_json(f);
        printf("%s\n", json_object_to_json_string_ext(a, JSON_C_TO_STRING_PRETTY));
        json_object_put(a);
    } else {
        cli_print_vms(f);
    }
    fab_detach(f);
    return CLI_OK;
}

/* The guest's serial console: its log so far, or (a terminal) typed into and read live until
 * Ctrl-] or the VM ends. */
static int console(const char *fabric, const char *name, bool log_only)
{
    struct fab *f;
    if (cli_attach(fabric, &f) < 0)
        return CLI_FAIL;
    int s = fab_vm_find(f, name);
    char path[300], sock[300];
    snprintf(path, sizeof path, "%s/vm.%s.console.log", f->dir, name);
    snprintf(sock, sizeof sock, "%s/vm.%s.console", f->dir, name);
    bool qemu = s >= 0 && fab_vm(f, (uint32_t)s)->qemu_pid;
    if (s < 0 && log_only && access(path, R_OK) == 0)
        qemu = true; /* the log of a VM that ended stays until the fabric goes */
    else if (s < 0)
        find_vm(f, name); /* says there is no such VM */
    fab_detach(f);
    if (!qemu && s < 0)
        return CLI_FAIL;
    if (!qemu) {
        cli_err("VM %s is an emulated guest: it has no console (its programs' output is theirs)",
                name);
        return CLI_FAIL;
    }
    if (log_only) {
        FILE *lf = fopen(path, "r");
        char buf[4096];
        size_t n;
        while (lf && (n = fread(buf, 1, sizeof buf, lf)) > 0)
            fwrite(buf, 1, n, stdout);
        if (lf)
            fclose(lf);
        return CLI_OK;
    }
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    if (strlen(sock) >= sizeof a.sun_path) {
        cli_err("the console's socket path %s is too long", sock);
        return CLI_FAIL;
    }
    memcpy(a.sun_path, sock, strlen(sock) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a)) {
        cli_err("cannot reach VM %s's console: %s", name, strerror(errno));
        return CLI_FAIL;
    }
    struct termios old, raw;
    bool tty = isatty(0) && !tcgetattr(0, &old);
    if (tty) {
        raw = old;
        cfmakeraw(&raw);
        tcsetattr(0, TCSANOW, &raw);
        fprintf(stderr, "VM %s's console; Ctrl-] leaves it\r\n", name);
    }
    for (;;) {
        struct pollfd p[2] = { { 0, POLLIN, 0 }, { fd, POLLIN, 0 } };
        if (poll(p, 2, -1) < 0)
            continue;
        char buf[4096];
        if (p[1].revents & (POLLIN | POLLHUP)) {
            ssize_t n = read(fd, buf, sizeof buf);
            if (n <= 0 || write(1, buf, (size_t)n) != n)
                break;
        }
        if (p[0].revents & (POLLIN | POLLHUP)) {
            ssize_t n = read(0, buf, sizeof buf);
            if (n <= 0 || (tty && memchr(buf, 0x1d, (size_t)n)))
                break;
            if (write(fd, buf, (size_t)n) != n)
                break;
        }
    }
    if (tty)
        tcsetattr(0, TCSANOW, &old);
    close(fd);
    return CLI_OK;
}

int cmd_vm(struct cli *c)
{
    const char *fabric = c->fabric_arg;
    struct start_opts so = { .guest = "qemu" };
    bool json = false, log_only = false;
    static const struct option lo[] = {
        { "fabric", 1, 0, 'f' }, { "host", 1, 0, 'H' }, { "mem", 1, 0, 'm' },
        { "device", 1, 0, 'd' }, { "guest", 1, 0, 'g' }, { "image", 1, 0, 'i' },
        { "initrd", 1, 0, 'r' }, { "run", 1, 0, 'x' }, { "accel", 1, 0, 'a' },
        { "cpus", 1, 0, 'c' }, { "wait", 0, 0, 'w' }, { "json", 0, 0, 'j' },
        { "log", 0, 0, 'l' }, { "pass-through", 0, 0, 'P' }, { "help", 0, 0, 'h' },
        { 0, 0, 0, 0 } };
    optind = 0; /* full re-initialisation: main() already ran getopt on the global options */
    opterr = 0;
    int o;
    /* `vm run NAME -- PROGRAM ARGS`: what follows "--" is the program's, untouched. */
    int argc = c->argc;
    char **prog = NULL;
    for (int k = 1; k < c->argc; k++)
        if (!strcmp(c->argv[k], "--")) {
            argc = k;
            prog = c->argv + k + 1;
            break;
        }
    /* GNU getopt permutes: options may come before, between or after the operands. */
    while ((o = getopt_long(argc, c->argv, "h", lo, NULL)) != -1) {
        switch (o) {
        case 'f': fabric = optarg; break;
        case 'H': so.host = optarg; break;
        case 'm': so.mem = optarg; break;
        case 'd':
            if (so.ndevs == FAB_VM_DEVS)
                return cli_usage_error("vm", "at most %d --device", FAB_VM_DEVS);
            so.devs[so.ndevs++] = optarg;
            break;
        case 'g': so.guest = optarg; break;
        case 'i': so.image = optarg; break;
        case 'r': so.initrd = optarg; break;
        case 'x': so.run = optarg; break;
        case 'a': so.accel = optarg; break;
        case 'c': so.cpus = optarg; break;
        case 'w': so.wait = true; break;
        case 'P': so.pass = true; break;
        case 'j': json = true; break;
        case 'l': log_only = true; break;
        case 'h': return cli_help("vm");
        default:
            return cli_usage_error("vm", "unknown option %s, or it lacks its value",
                                   c->argv[optind - 1]);
        }
    }
    const char **ops = (const char **)c->argv + optind;
    int nops = argc - optind;
    fabric = fab_name_resolve(fabric);
    if (!nops)
        return cli_usage_error("vm", "say what: start, attach, detach, list, console, cfg, reset, "
                               "run or stop");
    const char *verb = ops[0];
    if (!strcmp(verb, "list"))
        return nops == 1 ? list(fabric, json) : cli_usage_error("vm", "list takes no arguments");
    if (!strcmp(verb, "start")) {
        if (nops != 2)
            return cli_usage_error("vm", "start NAME --host H --mem SIZE");
        if (!so.host || !so.mem)
            return cli_usage_error("vm", "start needs --host H (where the VM runs) and --mem "
                                   "SIZE (its RAM, e.g. 256M)");
        so.name = ops[1];
        return start(fabric, &so);
    }
    if (!strcmp(verb, "stop"))
        return nops == 2 ? stop(fabric, ops[1]) : cli_usage_error("vm", "stop NAME");
    if (!strcmp(verb, "console"))
        return nops == 2 ? console(fabric, ops[1], log_only)
                         : cli_usage_error("vm", "console NAME [--log]");
    if (!strcmp(verb, "cfg")) {
        if (nops != 5 && nops != 6)
            return cli_usage_error("vm", "cfg NAME DEVICE OFFSET LENGTH [VALUE]");
        char req[160];
        snprintf(req, sizeof req, "cfg %s %s %s%s%s", ops[2], ops[3], ops[4], nops == 6 ? " " : "",
                 nops == 6 ? ops[5] : "");
        return guest_request(fabric, ops[1], req);
    }
    if (!strcmp(verb, "reset")) {
        if (nops != 3)
            return cli_usage_error("vm", "reset NAME DEVICE");
        char req[96];
        snprintf(req, sizeof req, "reset %s", ops[2]);
        return guest_request(fabric, ops[1], req);
    }
    if (!strcmp(verb, "run")) {
        if (nops != 2 || !prog || !prog[0])
            return cli_usage_error("vm", "run NAME -- PROGRAM [ARG...] (the program after '--')");
        return cli_vm_run(fabric, ops[1], prog);
    }
    if (prog)
        return cli_usage_error("vm", "only vm run takes a program after '--'");
    if (!strcmp(verb, "attach") || !strcmp(verb, "detach"))
        return nops == 3 ? attach_detach(fabric, verb, ops[1], ops[2])
                         : cli_usage_error("vm", "%s NAME DEVICE", verb);
    return cli_usage_error("vm", "unknown subcommand %s", verb);
}
