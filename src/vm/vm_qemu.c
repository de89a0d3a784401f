/*
 * QEMU for a VM with a real Linux guest (vm.h): Debian's qemu-system-x86_64 (TCG by default,
 * KVM with --accel kvm) with the VM's RAM file as the guest's memory, so the memory QEMU shows
 * the guest is the very region of the host's map that devices DMA into. Its
 * virtio-blk devices are vhost-user back ends of this process; each sits on a PCIe root port
 * of its own so it can be hot-added and hot-removed (QMP: chardev-add, device_add,
 * device_del).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "vm.h"

#define QMP_TIMEOUT_MS 10000
#define DEL_TIMEOUT_MS 20000 /* a guest's pciehp waits 5 s after the attention button */

/* TCG unless told otherwise (--accel, $NTBLEND_VM_ACCEL): an open /dev/kvm does not mean KVM
 * runs this guest (nested KVM on a cloud machine hangs or fails its emulation), and TCG runs
 * it everywhere. */
static const char *pick_accel(const char *want)
{
    if (want)
        return want;
    const char *env = getenv("NTBLEND_VM_ACCEL");
    return env && *env ? env : "tcg";
}

bool vm_qemu_kvm(const char *accel)
{
    return !strcmp(pick_accel(accel), "kvm");
}

/* The guest kernel's command line. With a device passed through under TCG nothing raises its
 * INTx (QEMU's proxy has only KVM's irqfd), so the guest's nvme driver must do without
 * interrupts: its admin commands complete when their timeout's handler polls the completion
 * queue (admin_timeout, 1 s each), I/O the guest submits polled (fio --hipri) completes on
 * poll queues, and any other I/O when its timeout polls (io_timeout). */
static void kernel_cmdline(const struct vm *vm, char *out, size_t len)
{
    /* no_timer_check: under TCG on a busy host the kernel's IO-APIC timer check can fail and
     * panic the boot. */
    snprintf(out, len, "console=ttyS0 quiet panic=-1 no_timer_check virtio%s",
             vm->pass && !vm->kvm ? " nvme.poll_queues=1 nvme_core.admin_timeout=1 "
                                    "nvme_core.io_timeout=1" : "");
}

int vm_qemu_start(struct vm *vm, const struct vm_qemu_opts *o, char *err, size_t len)
{
    char kernel[600], initrd[600];
    snprintf(kernel, sizeof kernel, "%s/vmlinuz", o->image);
    snprintf(initrd, sizeof initrd, "%s/%s", o->image, o->initrd);
    if (access(kernel, R_OK) || access(initrd, R_OK))
        return vm_say(err, len, -ENOENT, "no guest image in %s (vmlinuz and %s): build it with "
                   "ntblend-vm-guest%s (scripts/vm-guest.sh in a source tree), or give its "
                   "directory with --image", o->image,
                   o->initrd, strstr(o->initrd, "fio") ? " --fio" : "");
    const char *accel = pick_accel(o->accel);
    char machine[128], mem[32], backend[400], con[600], qmp[300], cpus[16], fwcfg[600],
        cmdline[300];
    snprintf(machine, sizeof machine, "q35,accel=%s,memory-backend=ram", accel);
    snprintf(mem, sizeof mem, "%lluM", (unsigned long long)(vm->mem >> 20));
    snprintf(backend, sizeof backend,
             "memory-backend-file,id=ram,size=%lluM,mem-path=%s,share=on,prealloc=off",
             (unsigned long long)(vm->mem >> 20), vm->ram_path);
    snprintf(con, sizeof con, "socket,id=con,path=%s,server=on,wait=off,logfile=%s",
             o->console_sock, o->console_log);
    snprintf(vm->qmp, sizeof vm->qmp, "%s/vm.%s.qmp", vm->f->dir, vm->name);
    snprintf(qmp, sizeof qmp, "unix:%s,server=on,wait=off", vm->qmp);
    snprintf(cpus, sizeof cpus, "%u", o->cpus ? o->cpus : 1);
    const char *argv[128];
    static char ports[FAB_VM_DEVS][96], chardev[FAB_VM_DEVS][300], device[FAB_VM_DEVS][300];
    int n = 0;
    argv[n++] = "qemu-system-x86_64";
    argv[n++] = "-name";
    argv[n++] = vm->name;
    argv[n++] = "-machine";
    argv[n++] = machine;
    argv[n++] = "-cpu";
    argv[n++] = strcmp(accel, "kvm") ? "max" : "host";
    argv[n++] = "-smp";
    argv[n++] = cpus;
    argv[n++] = "-m";
    argv[n++] = mem;
    argv[n++] = "-object";
    argv[n++] = backend;
    argv[n++] = "-nodefaults";
    argv[n++] = "-no-user-config";
    argv[n++] = "-display";
    argv[n++] = "none";
    argv[n++] = "-no-reboot";
    argv[n++] = "-chardev";
    argv[n++] = con;
    argv[n++] = "-serial";
    argv[n++] = "chardev:con";
    argv[n++] = "-qmp";
    argv[n++] = qmp;
    argv[n++] = "-kernel";
    argv[n++] = kernel;
    argv[n++] = "-initrd";
    argv[n++] = initrd;
    argv[n++] = "-append";
    kernel_cmdline(vm, cmdline, sizeof cmdline);
    argv[n++] = cmdline;
    if (o->run) {
        snprintf(fwcfg, sizeof fwcfg, "name=opt/ntblend/run,file=%s", o->run);
        argv[n++] = "-fw_cfg";
        argv[n++] = fwcfg;
    }
    for (int i = 0; i < FAB_VM_DEVS; i++) {
        /* A root port per device slot: what sits there can come and go. */
        snprintf(ports[i], sizeof ports[i], "pcie-root-port,id=rp%d,chassis=%d,slot=%d", i,
                 i + 1, i);
        argv[n++] = "-device";
        argv[n++] = ports[i];
        if (vm_dev_qemu_args(vm, i, chardev[i], device[i], sizeof device[i]))
            continue;
        snprintf(device[i] + strlen(device[i]), sizeof device[i] - strlen(device[i]),
                 ",bus=rp%d", i);
        if (chardev[i][0]) {
            argv[n++] = "-chardev";
            argv[n++] = chardev[i];
        }
        argv[n++] = "-device";
        argv[n++] = device[i];
    }
    argv[n] = NULL;
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return vm_say(err, len, -errno, "fork: %s", strerror(errno));
    if (pid == 0) {
        /* QEMU ends with its VM process, however that ends. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        execvp(argv[0], (char **)argv);
        fprintf(stderr, "ntblend-vm: cannot run qemu-system-x86_64: %s (apt-get install "
                        "qemu-system-x86)\n", strerror(errno));
        _exit(127);
    }
    vm->qemu = pid;
    vm->rec->qemu_pid = pid;
    printf("ntblend-vm: %s: QEMU pid %d (%s), %s of guest RAM\n", vm->name, (int)pid, accel,
           mem);
    fflush(stdout);
    return 0;
}

/* ---------------------------------------------------------------- QMP */

struct qmp {
    int fd;
    char buf[8192];
    size_t have;
};

/* The next line QEMU sent, within the deadline: 0, or -errno. */
static int qmp_line(struct qmp *q, char *line, size_t len, uint64_t deadline_ms)
{
    for (;;) {
        char *nl = memchr(q->buf, '\n', q->have);
        if (nl) {
            size_t l = (size_t)(nl - q->buf);
            snprintf(line, len, "%.*s", (int)l, q->buf);
            memmove(q->buf, nl + 1, q->have - l - 1);
            q->have -= l + 1;
            return 0;
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t now = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
        if (now >= deadline_ms || q->have == sizeof q->buf)
            return -ETIMEDOUT;
        struct pollfd p = { q->fd, POLLIN, 0 };
        if (poll(&p, 1, (int)(deadline_ms - now)) <= 0)
            continue;
        ssize_t r = read(q->fd, q->buf + q->have, sizeof q->buf - q->have);
        if (r <= 0)
            return -EPIPE;
        q->have += (size_t)r;
    }
}

static uint64_t deadline(int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000 + (uint64_t)ms;
}

/* Send a command (none: "", it went already) and wait for its answer (events before it are skipped; `event`, if given,
 * must also be seen before returning). 0, or -EIO with QEMU's error in err. */
static int qmp_cmd(struct qmp *q, const char *cmd, const char *event, char *err, size_t len)
{
    if (*cmd && write(q->fd, cmd, strlen(cmd)) != (ssize_t)strlen(cmd))
        return vm_say(err, len, -EPIPE, "QEMU's monitor hung up");
    bool answered = false, seen = !event;
    uint64_t until = deadline(event ? DEL_TIMEOUT_MS : QMP_TIMEOUT_MS);
    char line[4096];
    while (!answered || !seen) {
        int rc = qmp_line(q, line, sizeof line, until);
        if (rc)
            return vm_say(err, len, rc, "QEMU did not answer %s%s", cmd,
                       event && answered ? " (the guest did not let the device go)" : "");
        if (strstr(line, "\"error\""))
            return vm_say(err, len, -EIO, "QEMU refused: %s", line);
        if (strstr(line, "\"return\""))
            answered = true;
        if (event && strstr(line, "DEVICE_DELETED") && strstr(line, event))
            seen = true;
    }
    return 0;
}

static int qmp_open(struct vm *vm, struct qmp *q, char *err, size_t len)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    if (strlen(vm->qmp) >= sizeof a.sun_path)
        return vm_say(err, len, -ENAMETOOLONG, "QEMU's monitor path %s is too long", vm->qmp);
    memcpy(a.sun_path, vm->qmp, strlen(vm->qmp) + 1);
    q->have = 0;
    q->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (q->fd < 0 || connect(q->fd, (struct sockaddr *)&a, sizeof a)) {
        if (q->fd >= 0)
            close(q->fd);
        return vm_say(err, len, -errno, "cannot reach QEMU's monitor %s: %s", vm->qmp,
                   strerror(errno));
    }
    char line[4096];
    int rc = qmp_line(q, line, sizeof line, deadline(QMP_TIMEOUT_MS)); /* the greeting */
    if (!rc)
        rc = qmp_cmd(q, "{\"execute\":\"qmp_capabilities\"}\n", NULL, err, len);
    if (rc)
        close(q->fd);
    return rc;
}

/* A passed-through device hot-added: QEMU takes its end of the proxy's socket pair through the
 * monitor (getfd, the fd in SCM_RIGHTS), then adds the proxy with it. */
static int hotadd_proxy(struct vm *vm, int i, struct qmp *q, char *err, size_t len)
{
    char cmd[512];
    int n = snprintf(cmd, sizeof cmd, "{\"execute\":\"getfd\",\"arguments\":{\"fdname\":"
                     "\"proxy%d\"}}\n", i);
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = { cmd, (size_t)n };
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                        .msg_controllen = sizeof ctl.buf };
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &vm->dev[i].qemu_fd, sizeof(int));
    if (sendmsg(q->fd, &m, MSG_NOSIGNAL) != n)
        return vm_say(err, len, -EPIPE, "QEMU's monitor hung up");
    int rc = qmp_cmd(q, "", NULL, err, len); /* getfd's answer */
    if (rc)
        return rc;
    snprintf(cmd, sizeof cmd, "{\"execute\":\"device_add\",\"arguments\":{\"driver\":"
             "\"x-pci-proxy-dev\",\"id\":\"dev%d\",\"fd\":\"proxy%d\",\"bus\":\"rp%d\"}}\n",
             i, i, i);
    if ((rc = qmp_cmd(q, cmd, NULL, err, len)))
        return rc;
    close(vm->dev[i].qemu_fd); /* QEMU has it */
    vm->dev[i].qemu_fd = -1;
    return 0;
}

int vm_qemu_hotadd(struct vm *vm, int i, char *err, size_t len)
{
    char chardev[300], device[300], cmd[1024];
    if (vm_dev_qemu_args(vm, i, chardev, device, sizeof device))
        return vm_say(err, len, -ENOENT, "no device in slot %d", i);
    struct qmp q;
    int rc = qmp_open(vm, &q, err, len);
    if (rc)
        return rc;
    if (vm->dev[i].pass) {
        rc = hotadd_proxy(vm, i, &q, err, len);
        close(q.fd);
        return rc;
    }
    snprintf(cmd, sizeof cmd,
             "{\"execute\":\"chardev-add\",\"arguments\":{\"id\":\"vu%d\",\"backend\":{\"type\":"
             "\"socket\",\"data\":{\"addr\":{\"type\":\"unix\",\"data\":{\"path\":\"%s\"}},"
             "\"server\":false}}}}\n", i, vm->dev[i].sock);
    rc = qmp_cmd(&q, cmd, NULL, err, len);
    if (!rc) {
        snprintf(cmd, sizeof cmd,
                 "{\"execute\":\"device_add\",\"arguments\":{\"driver\":\"vhost-user-blk-pci\","
                 "\"id\":\"dev%d\",\"chardev\":\"vu%d\",\"bus\":\"rp%d\",\"num-queues\":1}}\n",
                 i, i, i);
        rc = qmp_cmd(&q, cmd, NULL, err, len);
        if (rc) {
            char ignore[256];
            snprintf(cmd, sizeof cmd, "{\"execute\":\"chardev-remove\",\"arguments\":{\"id\":"
                     "\"vu%d\"}}\n", i);
            qmp_cmd(&q, cmd, NULL, ignore, sizeof ignore);
        }
    }
    close(q.fd);
    return rc;
}

int vm_qemu_hotremove(struct vm *vm, int i, char *err, size_t len)
{
    struct qmp q;
    char cmd[256];
    int rc = qmp_open(vm, &q, err, len);
    if (rc)
        return rc;
    snprintf(cmd, sizeof cmd, "{\"execute\":\"device_del\",\"arguments\":{\"id\":\"dev%d\"}}\n", i);
    char id[16];
    snprintf(id, sizeof id, "\"dev%d\"", i); /* the device's event, not its backend's */
    rc = qmp_cmd(&q, cmd, id, err, len);
    if (!rc && !vm->dev[i].pass) {
        snprintf(cmd, sizeof cmd, "{\"execute\":\"chardev-remove\",\"arguments\":{\"id\":"
                 "\"vu%d\"}}\n", i);
        rc = qmp_cmd(&q, cmd, NULL, err, len);
    }
    close(q.fd);
    return rc;
}
