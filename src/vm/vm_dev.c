/*
 * Devices given to a VM (vm.h): borrowed for the guest, the guest's RAM mapped for each once
 * (one mapping per device: its lender programs as few LUT entries as the RAM needs), the
 * record in the VM's slot that other processes read, and for a QEMU guest the vhost-user
 * back end that serves an NVMe namespace to the guest's virtio-blk driver.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "vm.h"

/* Guest-physical addresses of the devices' BARs (emulated guests): above any guest's RAM,
 * 64 GiB per device, each BAR aligned to its size. */
#define VM_GUEST_MMIO (1ull << 40)
#define VM_GUEST_MMIO_STRIDE (1ull << 36)

int vm_say(char *err, size_t len, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return rc;
}

int vm_dev_find(const struct vm *vm, const char *name)
{
    for (int i = 0; i < FAB_VM_DEVS; i++)
        if (vm->dev[i].used && !strcmp(vm->dev[i].name, name))
            return i;
    return -1;
}

/* Serve QEMU's connections to device d's vhost-user socket, one at a time. */
static void *serve(void *arg)
{
    struct vm_dev *d = arg;
    while (!atomic_load(&d->stop)) {
        int c = accept4(d->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            break; /* shut down: the device is being detached */
        }
        d->conn_fd = c;
        int rc = 0;
        while (!atomic_load(&d->stop) && (rc = vhu_serve_one(&d->session, c)) == 0)
            ;
        if (!atomic_load(&d->stop) && rc != -EPIPE)
            fprintf(stderr, "ntblend-vm: %s: vhost-user session ended: %s%s%s\n", d->name,
                    strerror(-rc), d->session.err[0] ? ": " : "", d->session.err);
        vhu_reset(&d->session);
        d->conn_fd = -1;
        close(c);
    }
    return NULL;
}

static int listen_on(struct vm_dev *d, char *err, size_t len)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    if (strlen(d->sock) >= sizeof a.sun_path)
        return vm_say(err, len, -ENAMETOOLONG, "socket path %s is too long (a shorter fabric "
                   "directory: NTBLEND_SHM_DIR)", d->sock);
    strcpy(a.sun_path, d->sock);
    unlink(d->sock);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 2)) {
        int rc = -errno;
        if (fd >= 0)
            close(fd);
        return vm_say(err, len, rc, "cannot listen on %s: %s", d->sock, strerror(-rc));
    }
    d->listen_fd = fd;
    return 0;
}

static void release(struct vm *vm, struct vm_dev *d)
{
    if (d->pass)
        vm_proxy_stop(vm, (int)(d - vm->dev)); /* its thread, BARs and interrupts */
    if (d->thread_up) {
        atomic_store(&d->stop, true);
        shutdown(d->listen_fd, SHUT_RDWR);
        int c = d->conn_fd;
        if (c >= 0)
            shutdown(c, SHUT_RDWR);
        pthread_join(d->thread, NULL);
        d->thread_up = false;
    }
    if (d->listen_fd >= 0) {
        close(d->listen_fd);
        unlink(d->sock);
    }
    /* The guest's RAM mapping first: the device must not reach it once it is returned. */
    if (d->ram_map)
        sio_unmap(d->ram_map);
    if (d->blk)
        vblk_close(d->blk);
    else if (d->sio)
        sio_return(d->sio);
    memset(d, 0, sizeof *d);
    d->listen_fd = -1;
    d->conn_fd = -1;
    d->qemu_fd = -1;
}

static int borrow_error(const char *name, int rc, char *err, size_t len)
{
    switch (rc) {
    case -ENODEV: case -ENOENT:
        return vm_say(err, len, rc, "no device %s on this fabric (ntblend device list shows them)",
                   name);
    case -EACCES:
        return vm_say(err, len, rc, "%s is not lent out by its host: ntblend device add %s", name,
                   name);
    case -EBUSY: case -EALREADY:
        return vm_say(err, len, rc, "%s is in use elsewhere (ntblend device list says by whom): "
                   "return it there first", name);
    case -EHOSTUNREACH:
        return vm_say(err, len, rc, "the lender of %s cannot be reached (ntblend status)", name);
    default:
        return vm_say(err, len, rc, "cannot borrow %s: %s", name, strerror(-rc));
    }
}

/* The guest's RAM for the device, once: guest-physical address g is at *ram_io + g. For a
 * device the guest drives, as the papers do it (device-lending-kvm-2019 §5): at I/O address =
 * guest-physical address (ram_io 0), the lender's IOMMU mapping [0, mem) of the device's
 * domain onto the window to the guest's RAM; every other mapping the VM makes for the device
 * is at a guest address too (its MSI doorbell, peers' guest BARs). Where the lender has no
 * IOMMU the device's addresses are its window's, and ram_io is where the window is. A QEMU
 * guest's NVMe is driven by the vhost-user back end here, whose queues libntbnvme maps where
 * the lender puts them (its RAM, identity I/O addresses, which guest-physical addresses would
 * collide with): its guest RAM goes beside them, at ram_io, which the back end adds. A
 * passed-through device's driver is the guest's, which knows only guest-physical addresses:
 * IOVA = GPA or nothing (pass_check refuses a lender without an IOMMU). */
static int map_ram(struct vm *vm, struct vm_dev *d, uint64_t *ram_io, char *err, size_t len)
{
    const struct fab_function *fn = fab_func(vm->f, d->fn);
    const struct fab_host *h = fab_host(vm->f, vm->host);
    int rc = !d->sio  ? -ENODEV
             : d->blk ? -EOPNOTSUPP
                      : sio_map_addr_at(d->sio, h->node_id, fab_vm_base(vm->slot), vm->mem, 0,
                                        &d->ram_map);
    d->iova_gpa = rc == 0;
    *ram_io = 0;
    if (rc == -EOPNOTSUPP && !d->pass)
        rc = sio_map_addr(d->sio, h->node_id, fab_vm_base(vm->slot), vm->mem, ram_io,
                          &d->ram_map);
    if (rc == -EEXIST)
        return vm_say(err, len, rc, "mapping VM %s's RAM for %s at I/O address = guest-physical "
                      "collides with another mapping of the device in host %s's IOMMU: return "
                      "%s to its lender (ntblend vm detach) and give it again", vm->name, d->name,
                      fab_host(vm->f, fn->host)->name, d->name);
    if (!rc)
        return 0;
    d->ram_map = NULL;
    const struct fab_host *lh = fab_host(vm->f, fn->host);
    const struct fab_adapter *a = fab_adapter(vm->f, lh->adapter_first);
    if (rc == -ENOSPC)
        return vm_say(err, len, rc, "mapping VM %s's %llu MiB of RAM for %s takes %llu LUT "
                      "entries of %llu MiB on host %s's adapter, more than it has free: give "
                      "the VM less memory (--mem), or return what holds them (ntblend status)",
                      vm->name, (unsigned long long)(vm->mem >> 20), d->name,
                      (unsigned long long)((vm->mem + a->lut_size - 1) / a->lut_size),
                      (unsigned long long)(a->lut_size >> 20), lh->name);
    if (rc == -EOPNOTSUPP)
        return vm_say(err, len, rc, "%s cannot reach VM %s's RAM at its guest-physical "
                      "addresses: its lender's IOMMU is off", d->name, vm->name);
    return vm_say(err, len, rc, "cannot map VM %s's RAM for %s: %s", vm->name, d->name,
                  strerror(-rc));
}

/* Does another VM hold or offer function fn? */
static bool other_vm_holds(const struct fab *f, uint32_t fn)
{
    for (uint32_t s = 0; s < FAB_MAX_VMS; s++) {
        if (!fab_vm_live(f, s) || atomic_load(&fab_vm(f, s)->pid) == getpid())
            continue;
        for (int k = 0; k < FAB_VM_DEVS; k++)
            if (atomic_load(&fab_vm(f, s)->dev[k].state) != FAB_VMDEV_NONE &&
                fab_vm(f, s)->dev[k].fn == fn)
                return true;
    }
    return false;
}

/* A device offered to a guest stays with its lender until the guest takes it (smartio
 * §5.1-5.2): it must be free to take then. */
static int offer_check(struct vm *vm, uint32_t id, const char *name, char *err, size_t len)
{
    const struct fab_function *fn = fab_func(vm->f, id);
    uint64_t held = 0;
    for (int w = 0; w < 4; w++)
        held |= atomic_load(&fn->lend_borrowers[w]);
    if (!atomic_load(&fn->lend_available))
        return borrow_error(name, -EACCES, err, len);
    if (held || other_vm_holds(vm->f, id))
        return borrow_error(name, -EBUSY, err, len);
    return 0;
}

/* What passing a function through needs of it and of its VM. */
static int pass_check(struct vm *vm, uint32_t id, const char *name, char *err, size_t len)
{
    const struct fab_function *fn = fab_func(vm->f, id);
    const struct fab_host *lh = fab_host(vm->f, fn->host);
    if (!lh->iommu)
        return vm_say(err, len, -EOPNOTSUPP, "passing %s through puts the guest's physical "
                      "addresses on its bus, which takes its lender's IOMMU: host %s has it off "
                      "(iommu = on in [host %s] of the topology), or give the VM its namespace "
                      "as virtio-blk (no --pass-through)", name, lh->name, lh->name);
    if (vm->mem >= VM_PASS_MAX_MEM)
        return vm_say(err, len, -EINVAL, "a guest with a passed-through device takes at most "
                      "%llu MiB (--mem): QEMU puts more above 4 GiB, where guest-physical "
                      "addresses are no longer offsets of its RAM", VM_PASS_MAX_MEM >> 20);
    for (int b = 0; b < FAB_BARS; b++)
        if (fn->bar[b].kind != FAB_BAR_NONE && fn->bar[b].size > (1ull << 31))
            return vm_say(err, len, -EOPNOTSUPP, "BAR%d of %s is bigger than QEMU's proxy "
                          "can place (2 GiB)", b, name);
    return offer_check(vm, id, name, err, len);
}

int vm_dev_attach(struct vm *vm, const char *name, char *err, size_t len)
{
    if (vm_dev_find(vm, name) >= 0)
        return vm_say(err, len, -EEXIST, "%s is in VM %s already", name, vm->name);
    int i = 0;
    while (i < FAB_VM_DEVS && vm->dev[i].used)
        i++;
    if (i == FAB_VM_DEVS)
        return vm_say(err, len, -ENOSPC, "VM %s has %d devices, the most a VM takes: detach one "
                   "first", vm->name, FAB_VM_DEVS);
    int id = sio_find(name);
    if (id < 0)
        return borrow_error(name, id, err, len);
    const struct fab_function *fn = fab_func(vm->f, (uint32_t)id);
    struct vm_dev *d = &vm->dev[i];
    memset(d, 0, sizeof *d);
    d->listen_fd = -1;
    d->conn_fd = -1;
    d->qemu_fd = -1;
    snprintf(d->name, sizeof d->name, "%s", name);
    d->fn = (uint32_t)id;
    int rc;
    if (vm->guest == VM_GUEST_QEMU && vm->pass) {
        if ((rc = pass_check(vm, (uint32_t)id, name, err, len)))
            return rc;
        d->pass = true;
        if ((rc = vm_proxy_start(vm, i, err, len))) {
            release(vm, d);
            return rc;
        }
    } else if (vm->guest == VM_GUEST_QEMU) {
        if (strcmp(fn->type, "nvme"))
            return vm_say(err, len, -EOPNOTSUPP, "%s is a%s %s: a QEMU guest is given NVMe "
                       "namespaces (as virtio-blk); give other devices to an emulated guest "
                       "(--guest emulated)", name, fn->type[0] == 'a' ? "n" : "", fn->type);
        if ((rc = vblk_open(name, 1, 1, &d->blk))) {
            d->blk = NULL;
            if (rc == -ENODEV || rc == -EACCES || rc == -EBUSY || rc == -EHOSTUNREACH)
                return borrow_error(name, rc, err, len);
            return vm_say(err, len, rc, "cannot open %s: %s", name, nvme_errmsg());
        }
        d->sio = nvme_sio_dev(vblk_nvme(d->blk));
    } else if ((rc = offer_check(vm, (uint32_t)id, name, err, len))) {
        return rc;
    }
    uint64_t ram_io = 0;
    if (d->blk && (rc = map_ram(vm, d, &ram_io, err, len))) {
        release(vm, d);
        return rc;
    }
    if (d->blk) {
        vblk_set_ram(d->blk, ram_io, vm->ram_dev, vm->ram_ino);
        vhu_init(&d->session, vblk_device(d->blk));
        snprintf(d->sock, sizeof d->sock, "%s/vm.%s.%s.sock", vm->f->dir, vm->name, name);
        if ((rc = listen_on(d, err, len))) {
            release(vm, d);
            return rc;
        }
        if ((rc = -pthread_create(&d->thread, NULL, serve, d))) {
            release(vm, d);
            return vm_say(err, len, rc, "cannot start a thread: %s", strerror(-rc));
        }
        d->thread_up = true;
    }
    d->used = true;
    /* The record others read: where the device sits in the guest and reaches its RAM. */
    struct fab_vm_dev *r = &vm->rec->dev[i];
    memset(r, 0, sizeof *r);
    r->fn = d->fn;
    r->kind = d->blk ? FAB_VMDEV_VHOST_BLK : FAB_VMDEV_PASS;
    r->guest_bdf = (uint16_t)((i + 1) << 3); /* bus 0, device i + 1, function 0 */
    r->ram_io = ram_io;
    r->flags = d->iova_gpa ? FAB_VMDEV_IOVA_GPA : 0;
    if (fn->host != vm->host) { /* what mapping the guest's RAM takes (now, or at Bus Master) */
        const struct fab_adapter *a = fab_adapter(vm->f, fab_host(vm->f, fn->host)->adapter_first);
        r->luts = (uint32_t)((vm->mem + a->lut_size - 1) / a->lut_size);
    }
    for (int b = 0; b < FAB_BARS && !d->blk && !d->pass; b++) { /* the guest places those */
        uint64_t sz = fn->bar[b].size, base = VM_GUEST_MMIO + (uint64_t)i * VM_GUEST_MMIO_STRIDE;
        if (fn->bar[b].kind == FAB_BAR_NONE || !sz)
            continue;
        uint64_t at = base;
        for (int p = 0; p < b; p++)
            if (r->guest_bar[p])
                at = r->guest_bar[p] + fn->bar[p].size;
        r->guest_bar[b] = (at + sz - 1) & ~(sz - 1);
    }
    atomic_store(&r->state, d->blk ? FAB_VMDEV_HELD : FAB_VMDEV_OFFERED);
    fab_vm_changed(vm->rec);
    return i;
}

int vm_dev_hold(struct vm *vm, int i, char *err, size_t len)
{
    struct vm_dev *d = &vm->dev[i];
    if (d->sio)
        return 0;
    int rc = sio_borrow(d->fn, SIO_EXCLUSIVE, &d->sio);
    if (rc) {
        d->sio = NULL;
        return borrow_error(d->name, rc, err, len);
    }
    uint64_t ram_io = 0;
    if ((rc = map_ram(vm, d, &ram_io, err, len)) ||
        (rc = vm_guest_route_all(vm, i, err, len)) || /* as the guest programmed them */
        (d->pass && (rc = vm_proxy_hold(vm, i, err, len)))) {
        if (d->ram_map)
            sio_unmap(d->ram_map);
        d->ram_map = NULL;
        sio_return(d->sio);
        d->sio = NULL;
        d->msi_mapped = false;
        return rc;
    }
    vm->rec->dev[i].ram_io = ram_io;
    vm->rec->dev[i].flags = d->iova_gpa ? FAB_VMDEV_IOVA_GPA : 0;
    atomic_store(&vm->rec->dev[i].state, FAB_VMDEV_HELD);
    fab_vm_changed(vm->rec);
    return 0;
}

void vm_dev_unhold(struct vm *vm, int i)
{
    struct vm_dev *d = &vm->dev[i];
    if (!d->sio || d->blk)
        return;
    if (d->pass)
        vm_proxy_unhold(vm, i); /* its BARs and interrupts first */
    vm_guest_drop_peers(vm, i);
    if (d->ram_map)
        sio_unmap(d->ram_map);
    d->ram_map = NULL;
    d->msi_mapped = false; /* the MSI mapping goes with the borrow */
    sio_return(d->sio); /* the lender resets it before anyone else gets it */
    d->sio = NULL;
    vm->rec->dev[i].ram_io = 0;
    vm->rec->dev[i].flags = 0;
    atomic_store(&vm->rec->dev[i].state, FAB_VMDEV_OFFERED);
    fab_vm_changed(vm->rec);
}

void vm_dev_check_lenders(struct vm *vm)
{
    for (int i = 0; i < FAB_VM_DEVS; i++) {
        struct vm_dev *d = &vm->dev[i];
        struct fab_vm_dev *r = &vm->rec->dev[i];
        if (!d->used || d->blk || atomic_load(&r->state) == FAB_VMDEV_GONE)
            continue;
        const struct fab_function *fn = fab_func(vm->f, d->fn);
        if (atomic_load(&fab_host(vm->f, fn->host)->state) == FAB_HOST_UP)
            continue;
        /* Its lender is gone: a surprise removal for the guest. What we held under it goes
         * (the lender's next life knows nothing of it). */
        vm_dev_unhold(vm, i);
        atomic_store(&r->state, FAB_VMDEV_GONE);
        fab_vm_changed(vm->rec);
    }
}

int vm_dev_detach(struct vm *vm, const char *name, char *err, size_t len)
{
    int i = vm_dev_find(vm, name);
    if (i < 0)
        return vm_say(err, len, -ENOENT, "%s is not in VM %s (ntblend vm list shows what is)", name,
                   vm->name);
    atomic_store(&vm->rec->dev[i].state, FAB_VMDEV_NONE);
    fab_vm_changed(vm->rec);
    vm_guest_drop_peers(vm, i);
    release(vm, &vm->dev[i]);
    return 0;
}

int vm_dev_qemu_args(const struct vm *vm, int i, char *chardev, char *device, size_t len)
{
    const struct vm_dev *d = &vm->dev[i];
    if (d->used && d->pass) {
        chardev[0] = 0;
        snprintf(device, len, "x-pci-proxy-dev,id=dev%d,fd=%d", i, d->qemu_fd);
        return 0;
    }
    if (!d->used || !d->blk)
        return -ENOENT;
    snprintf(chardev, len, "socket,id=vu%d,path=%s", i, d->sock);
    snprintf(device, len, "vhost-user-blk-pci,id=dev%d,chardev=vu%d,num-queues=1", i,
             i);
    return 0;
}
