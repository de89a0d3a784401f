/*
 * ntblend-vm: the process of one VM (vm.h). Started by `ntblend vm start`, which sets the host
 * ($NTBLEND_FABRIC, $NTBLEND_HOST as `ntblend run` does); it takes the guest's RAM from the
 * host, gives the guest its devices, runs QEMU for a Linux guest, and answers `ntblend vm
 * attach|detach|stop` on its control socket (<fabric dir>/vm.NAME.ctl) until the guest powers
 * off or it is told to stop. Then it returns everything, in the reverse order.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent_proto.h"
#include "vm.h"

#define STOP_GRACE_MS 5000
#define LENDER_CHECK_MS 250

static void usage(FILE *f)
{
    fprintf(f,
        "usage: ntblend-vm --mem SIZE [--guest qemu|emulated] [--device DEV]... [--pass-through]\n"
        "                  [--image DIR] [--initrd FILE] [--run SCRIPT] [--accel kvm|tcg]\n"
        "                  [--cpus N] [--ready-fd FD] NAME\n"
        "\n"
        "The process of virtual machine NAME on this host (ntblend vm start runs it): the\n"
        "guest's RAM (SIZE bytes, K/M/G suffixes, a multiple of 2 MiB) taken from this host,\n"
        "the devices given to it, and for a QEMU guest QEMU with a Linux kernel and initramfs\n"
        "from DIR (ntblend-vm-guest builds them) whose virtio-blk disks are the NVMe\n"
        "namespaces given to it, or with --pass-through the devices themselves, driven by the\n"
        "guest's own drivers. Runs until the guest powers off, or SIGTERM.\n");
}

static int parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    uint64_t mul = 1;
    switch (*end) {
    case 'k': case 'K': mul = 1ull << 10; end++; break;
    case 'm': case 'M': mul = 1ull << 20; end++; break;
    case 'g': case 'G': mul = 1ull << 30; end++; break;
    }
    if (*end == 'i' || *end == 'B')
        end += *end == 'i' && end[1] == 'B' ? 2 : 1;
    if (errno || end == s || *end || !v || v > UINT64_MAX / mul)
        return -EINVAL;
    *out = v * mul;
    return 0;
}


/* The guest's RAM, accounted against the host's: an allocation of its agent that stays ours
 * while our connection to it is open (the agent frees it when we are gone, however we go). */
static int hold_ram(struct vm *vm, char *err, size_t len)
{
    int fd = agent_connect(vm->f->dir, vm->host);
    if (fd < 0)
        return snprintf(err, len, "cannot reach host %s's agent: %s",
                        fab_host(vm->f, vm->host)->name, strerror(-fd)), fd;
    struct agent_req r = { .op = AGENT_ALLOC, .a = vm->mem, .b = 2u << 20 };
    struct agent_rsp p;
    int rc = agent_call(fd, &r, &p, 10000);
    if (rc == -ENOMEM) {
        struct agent_req m = { .op = AGENT_MEMORY };
        struct agent_rsp mp = { 0 };
        agent_call(fd, &m, &mp, 10000);
        const struct fab_host *h = fab_host(vm->f, vm->host);
        uint64_t used = FAB_MBOX_SIZE + mp.a + mp.b + mp.c;
        uint64_t free_b = h->ram_size > used ? h->ram_size - used : 0;
        snprintf(err, len, "host %s cannot give a guest %llu MiB: it has %llu MiB of RAM, about "
                 "%llu MiB of it free; give the VM less (--mem) or start it on another host "
                 "(--host)", h->name, (unsigned long long)(vm->mem >> 20),
                 (unsigned long long)(h->ram_size >> 20), (unsigned long long)(free_b >> 20));
    } else if (rc) {
        snprintf(err, len, "host %s's agent refused the guest's RAM: %s",
                 fab_host(vm->f, vm->host)->name, strerror(-rc));
    }
    if (rc) {
        close(fd);
        return rc;
    }
    vm->agent_fd = fd;
    vm->rec->hold = p.a;
    return 0;
}

/* One control request ("attach DEV", "detach DEV", "stop"): the answer is "ok ..." or
 * "error: ...". Returns true for stop. */
static bool control(struct vm *vm, int c)
{
    char req[256] = "", ans[600] = "ok\n", err[512] = "";
    ssize_t n = recv(c, req, sizeof req - 1, 0);
    if (n <= 0)
        return false;
    req[n] = 0;
    req[strcspn(req, "\n")] = 0;
    bool stop = false;
    int rc = 0;
    char out[128] = "";
    pthread_mutex_lock(&vm->lock);
    int g = vm_guest_request(vm, c, req, out, sizeof out, err, sizeof err);
    pthread_mutex_unlock(&vm->lock);
    if (g) { /* a program in the guest asked (vm_guest_req.c) */
        rc = g < 0 ? g : 0;
        snprintf(ans, sizeof ans, "ok%s%s\n", out[0] ? " " : "", out);
    } else if (!strncmp(req, "attach ", 7)) {
        pthread_mutex_lock(&vm->lock);
        rc = vm_dev_attach(vm, req + 7, err, sizeof err);
        if (rc >= 0 && vm->qemu && (rc = vm_qemu_hotadd(vm, rc, err, sizeof err)) < 0) {
            char ignore[256];
            vm_dev_detach(vm, req + 7, ignore, sizeof ignore);
        }
        pthread_mutex_unlock(&vm->lock);
    } else if (!strncmp(req, "detach ", 7)) {
        pthread_mutex_lock(&vm->lock);
        int i = -1;
        for (int k = 0; k < FAB_VM_DEVS; k++)
            if (vm->dev[k].used && !strcmp(vm->dev[k].name, req + 7))
                i = k;
        /* The guest lets go of it first (a hot-remove it sees), then the device goes back. */
        if (i >= 0 && vm->qemu)
            rc = vm_qemu_hotremove(vm, i, err, sizeof err);
        if (rc >= 0)
            rc = vm_dev_detach(vm, req + 7, err, sizeof err);
        pthread_mutex_unlock(&vm->lock);
    } else if (!strncmp(req, "cfg ", 4) || !strncmp(req, "reset ", 6)) {
        /* "cfg DEV OFF LEN [VALUE]" (a read without VALUE), "reset DEV": the guest's view of
         * an emulated guest's device (vm_cfg.c), for drivers running in the guest. */
        char dev[64] = "";
        unsigned off = 0, len = 0, val = 0;
        int got = !strncmp(req, "cfg ", 4) ? sscanf(req + 4, "%63s %i %i %i", dev, (int *)&off,
                                                     (int *)&len, (int *)&val)
                                           : sscanf(req + 6, "%63s", dev);
        pthread_mutex_lock(&vm->lock);
        int i = vm_dev_find(vm, dev);
        if (i < 0)
            rc = -ENOENT, snprintf(err, sizeof err, "%s is not in VM %s", dev, vm->name);
        else if (req[0] == 'r')
            rc = vm_dev_reset(vm, i, err, sizeof err);
        else if (got == 3 && !(rc = vm_cfg_read(vm, i, off, len, &val)))
            snprintf(ans, sizeof ans, "ok %#x\n", val);
        else if (got == 3)
            snprintf(err, sizeof err, "cannot read %u bytes at %#x of %s's config space (%s)",
                     len, off, dev, strerror(-rc));
        else if (got == 4)
            rc = vm_cfg_write(vm, i, off, len, val, err, sizeof err);
        else
            rc = -EINVAL, snprintf(err, sizeof err, "cfg DEV OFF LEN [VALUE]");
        pthread_mutex_unlock(&vm->lock);
    } else if (!strcmp(req, "stop")) {
        stop = true;
    } else {
        rc = -EINVAL;
        snprintf(err, sizeof err, "unknown request '%s'", req);
    }
    if (rc < 0)
        snprintf(ans, sizeof ans, "error: %s\n", err);
    ssize_t w = send(c, ans, strlen(ans), MSG_NOSIGNAL);
    (void)w;
    return stop;
}

static int listen_ctl(struct vm *vm, char *path, size_t plen)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    snprintf(path, plen, "%s/vm.%s.ctl", vm->f->dir, vm->name);
    if (strlen(path) >= sizeof a.sun_path)
        return -ENAMETOOLONG;
    strcpy(a.sun_path, path);
    unlink(path);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 4)) {
        int rc = -errno;
        if (fd >= 0)
            close(fd);
        return rc;
    }
    return fd;
}

/* Stop QEMU: SIGTERM (it powers the guest off at once), SIGKILL after the grace. */
static int stop_qemu(struct vm *vm)
{
    int status = 0;
    if (!vm->qemu)
        return 0;
    kill(vm->qemu, SIGTERM);
    for (int ms = 0; ms < STOP_GRACE_MS; ms += 10) {
        if (waitpid(vm->qemu, &status, WNOHANG) == vm->qemu) {
            vm->qemu = 0;
            return status;
        }
        usleep(10000);
    }
    kill(vm->qemu, SIGKILL);
    waitpid(vm->qemu, &status, 0);
    vm->qemu = 0;
    return status;
}

int main(int argc, char **argv)
{
    static struct vm vm;
    const char *devs[FAB_VM_DEVS];
    int ndevs = 0, ready_fd = -1;
    struct vm_qemu_opts qo = { .initrd = "initramfs.cpio.gz" };
    const char *guest = "qemu", *mem_arg = NULL;
    static const struct option lo[] = {
        { "mem", 1, 0, 'm' }, { "guest", 1, 0, 'g' }, { "device", 1, 0, 'd' },
        { "image", 1, 0, 'i' }, { "initrd", 1, 0, 'r' }, { "run", 1, 0, 'x' },
        { "accel", 1, 0, 'a' }, { "cpus", 1, 0, 'c' }, { "ready-fd", 1, 0, 'R' },
        { "pass-through", 0, 0, 'P' }, { "help", 0, 0, 'h' }, { 0, 0, 0, 0 } };
    int o;
    while ((o = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (o) {
        case 'm': mem_arg = optarg; break;
        case 'g': guest = optarg; break;
        case 'd':
            if (ndevs == FAB_VM_DEVS) {
                fprintf(stderr, "ntblend-vm: at most %d devices\n", FAB_VM_DEVS);
                return 2;
            }
            devs[ndevs++] = optarg;
            break;
        case 'i': qo.image = optarg; break;
        case 'r': qo.initrd = optarg; break;
        case 'x': qo.run = optarg; break;
        case 'a': qo.accel = optarg; break;
        case 'c': qo.cpus = (unsigned)atoi(optarg); break;
        case 'R': ready_fd = atoi(optarg); break;
        case 'P': vm.pass = true; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc - 1 || !mem_arg) {
        usage(stderr);
        return 2;
    }
    char err[600] = "";
    snprintf(vm.name, sizeof vm.name, "%s", argv[optind]);
    vm.guest = !strcmp(guest, "emulated") ? VM_GUEST_EMULATED : VM_GUEST_QEMU;
    if (vm.pass && vm.guest != VM_GUEST_QEMU) {
        fprintf(stderr, "ntblend-vm: --pass-through is for a QEMU guest (its own drivers); an "
                "emulated guest's devices are its own already\n");
        return 2;
    }
    vm.kvm = vm_qemu_kvm(qo.accel);
    vm.agent_fd = -1;
    pthread_mutex_init(&vm.lock, NULL);
    for (int i = 0; i < FAB_VM_DEVS; i++) {
        vm.dev[i].listen_fd = -1;
        vm.dev[i].conn_fd = -1;
        vm.dev[i].qemu_fd = -1;
    }
    if (parse_size(mem_arg, &vm.mem)) {
        fprintf(stderr, "ntblend-vm: --mem %s: give a size like 256M or 1G\n", mem_arg);
        return 2;
    }
    if (vm.guest == VM_GUEST_EMULATED && vm.mem > VM_GUEST_RAM_MAX) {
        /* Its devices' I/O addresses are guest-physical, and the MSI doorbell is one. */
        fprintf(stderr, "ntblend-vm: an emulated guest takes at most %llu MiB of RAM (its MSI "
                "doorbell is at guest-physical %#llx, as on x86): give less (--mem)\n",
                VM_GUEST_RAM_MAX >> 20, VM_GUEST_RAM_MAX);
        return 2;
    }
    const char *hostname = getenv("NTBLEND_HOST");
    struct fab *f0;
    int rc = fab_attach(fab_name_resolve(NULL), -1, &f0);
    int h = rc ? -1 : fab_host_by_name(f0, hostname ? hostname : "");
    if (!rc)
        fab_detach(f0);
    if (rc || h < 0 || (rc = fab_attach(fab_name_resolve(NULL), h, &vm.f))) {
        fprintf(stderr, "ntblend-vm: run me on a host of a running fabric (ntblend vm start)\n");
        return 1;
    }
    vm.host = (uint32_t)h;
    int slot = fab_vm_claim(vm.f, vm.name, vm.host, vm.mem);
    if (slot < 0) {
        if (slot == -EEXIST)
            fprintf(stderr, "ntblend-vm: a VM named %s runs already (ntblend vm list)\n", vm.name);
        else if (slot == -ENOSPC)
            fprintf(stderr, "ntblend-vm: the fabric runs %d VMs, the most it takes: stop one\n",
                    FAB_MAX_VMS);
        else if (slot == -EINVAL)
            fprintf(stderr, "ntblend-vm: --mem must be a multiple of 2 MiB up to %llu GiB, and "
                    "NAME at most %d characters\n", (unsigned long long)(FAB_VM_STRIDE >> 30),
                    FAB_VM_NAME - 1);
        else
            fprintf(stderr, "ntblend-vm: cannot create the guest's RAM: %s\n", strerror(-slot));
        fab_detach(vm.f);
        return 1;
    }
    vm.slot = (uint32_t)slot;
    vm.rec = fab_vm(vm.f, vm.slot);
    snprintf(vm.rec->guest, sizeof vm.rec->guest, "%s", guest);
    fab_vm_ram_name(vm.f, vm.slot, vm.rec->gen, vm.ram_path, sizeof vm.ram_path);
    struct stat st;
    if (stat(vm.ram_path, &st) == 0) {
        vm.ram_dev = st.st_dev;
        vm.ram_ino = st.st_ino;
    }
    int status = 0, ctl = -1;
    char ctl_path[256] = "", con_sock[300], con_log[300];
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGCHLD);
    sigaddset(&sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL); /* threads started below inherit the mask */
    int sfd = signalfd(-1, &sigs, SFD_CLOEXEC);
    if ((rc = hold_ram(&vm, err, sizeof err)))
        goto fail;
    for (int i = 0; i < ndevs; i++)
        if ((rc = vm_dev_attach(&vm, devs[i], err, sizeof err)) < 0)
            goto fail;
    if ((ctl = listen_ctl(&vm, ctl_path, sizeof ctl_path)) < 0) {
        rc = ctl;
        snprintf(err, sizeof err, "cannot listen on %s: %s", ctl_path, strerror(-rc));
        goto fail;
    }
    if (vm.guest == VM_GUEST_QEMU) {
        if (!qo.image) {
            rc = -EINVAL;
            snprintf(err, sizeof err, "a QEMU guest needs --image DIR (ntblend-vm-guest)");
            goto fail;
        }
        snprintf(con_sock, sizeof con_sock, "%s/vm.%s.console", vm.f->dir, vm.name);
        snprintf(con_log, sizeof con_log, "%s/vm.%s.console.log", vm.f->dir, vm.name);
        qo.console_sock = con_sock;
        qo.console_log = con_log;
        pthread_sigmask(SIG_UNBLOCK, &sigs, NULL); /* QEMU must not inherit our mask */
        rc = vm_qemu_start(&vm, &qo, err, sizeof err);
        pthread_sigmask(SIG_BLOCK, &sigs, NULL);
        for (int i = 0; i < FAB_VM_DEVS; i++)
            if (vm.dev[i].qemu_fd >= 0) { /* QEMU has its end of each proxy's socket now */
                close(vm.dev[i].qemu_fd);
                vm.dev[i].qemu_fd = -1;
            }
        if (rc)
            goto fail;
    }
    atomic_store(&vm.rec->state, FAB_VM_RUNNING);
    fab_vm_changed(vm.rec);
    if (ready_fd >= 0) {
        ssize_t w = write(ready_fd, "ready\n", 6);
        (void)w;
        close(ready_fd);
        ready_fd = -1;
    }
    for (bool stop = false; !stop;) {
        struct pollfd p[2] = { { sfd, POLLIN, 0 }, { ctl, POLLIN, 0 } };
        /* An emulated guest's lenders are looked at a few times a second (a host's death
         * wakes no descriptor of ours); a QEMU guest's back ends see theirs in their I/O. */
        int np = poll(p, 2, vm.guest == VM_GUEST_EMULATED ? LENDER_CHECK_MS : -1);
        if (np == 0) {
            pthread_mutex_lock(&vm.lock);
            vm_dev_check_lenders(&vm);
            pthread_mutex_unlock(&vm.lock);
        }
        if (np <= 0)
            continue;
        if (p[0].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
                if (si.ssi_signo != SIGCHLD)
                    stop = true;
                else if (vm.qemu && waitpid(vm.qemu, &status, WNOHANG) == vm.qemu) {
                    vm.qemu = 0; /* the guest powered off */
                    stop = true;
                }
            }
        }
        if (p[1].revents & POLLIN) {
            int c = accept4(ctl, NULL, NULL, SOCK_CLOEXEC);
            if (c >= 0) {
                stop |= control(&vm, c);
                close(c);
            }
        }
    }
    rc = 0;
fail:
    if (rc < 0)
        fprintf(stderr, "ntblend-vm: %s\n", err);
    atomic_store(&vm.rec->state, FAB_VM_STOPPING);
    fab_vm_changed(vm.rec);
    if (vm.qemu)
        status = stop_qemu(&vm);
    if (vm.guest == VM_GUEST_QEMU && qo.console_sock) {
        unlink(qo.console_sock); /* the console's log stays until the fabric goes */
        unlink(vm.qmp);
    }
    for (int i = FAB_VM_DEVS - 1; i >= 0; i--)
        if (vm.dev[i].used)
            vm_dev_detach(&vm, vm.dev[i].name, err, sizeof err);
    if (ctl >= 0) {
        close(ctl);
        unlink(ctl_path);
    }
    fab_vm_release(vm.f, vm.slot);
    if (vm.agent_fd >= 0)
        close(vm.agent_fd); /* the RAM goes back to the host */
    fab_detach(vm.f);
    if (rc < 0)
        return 1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 0;
}
