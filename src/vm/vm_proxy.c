/*
 * A device passed through to a QEMU guest (vm.h; docs/vm.md "Pass-through"): the guest's own,
 * unmodified driver drives the lent function itself. QEMU's `x-pci-proxy-dev` forwards the
 * guest's config-space and BAR accesses to this process over a socket pair (mpq.c); here
 *
 *   config space  is the VM's mediated view (vm_cfg.c: MSI-X hidden, INTA, 32-bit BARs the
 *                 guest places), so the guest enabling memory space or Bus Master takes the
 *                 function from its lender and a function-level reset gives it back
 *   BAR accesses  go to the function's BARs, mapped here through SmartIO while the VM holds it
 *   guest RAM     is the VM's RAM region (QEMU maps the same file, share=on): the function
 *                 reaches guest-physical address g at I/O address g (sio_map_addr_at, the
 *                 lender's IOMMU), so the addresses the guest's driver programs are the ones
 *                 the function uses, and its DMA lands in guest RAM with nothing in between.
 *                 SYNC_SYSMEM is checked against that: every region QEMU names must be the
 *                 VM's RAM file at the offset equal to its guest-physical address
 *   device reset  (QEMU's, at boot and on a guest reset) gives the function back, as an FLR
 *   INTx          under KVM the function's MSI-X vector 0 is taken on this host and each of
 *                 its interrupts raised on QEMU's irqfd (the guest's INTx); under TCG QEMU has
 *                 no irqfd, and the guest's driver polls (docs/vm.md)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vm.h"

/* The host vector (this host's, shared by its processes) that device i of VM slot s raises:
 * apart from what libntbnvme's users take (small numbers). */
#define PROXY_VECTOR_BASE 128u
#define IRQ_POLL_MS 200
#define CMD_INTX_OFF 0x400u
_Static_assert(PROXY_VECTOR_BASE + FAB_MAX_VMS * FAB_VM_DEVS <= FAB_MSI_VECTORS,
               "every VM's devices need a host vector of their own");

struct proxy_arg {
    struct vm *vm;
    int i;
};
static struct proxy_arg args[FAB_VM_DEVS];

/* The BAR that guest-physical address gpa falls in, and the offset in it; -1: none. */
static int bar_at(const struct vm *vm, const struct vm_dev *d, uint64_t gpa, uint32_t len,
                  size_t *off)
{
    const struct fab_function *fn = fab_func(vm->f, d->fn);
    for (int b = 0; b < 6; b += 2) {
        uint64_t base = d->bar_reg[b] & ~0xfu, size = fn->bar[b].size;
        if (d->bar_ptr[b] && base && gpa >= base && gpa - base + len <= size) {
            *off = (size_t)(gpa - base);
            return b;
        }
    }
    return -1;
}

static int p_cfg_read(void *arg, uint32_t off, uint32_t len, uint32_t *val)
{
    struct proxy_arg *a = arg;
    return vm_cfg_read(a->vm, a->i, off, len, val);
}

static int p_cfg_write(void *arg, uint32_t off, uint32_t len, uint32_t val)
{
    struct proxy_arg *a = arg;
    char err[400];
    int rc = vm_cfg_write(a->vm, a->i, off, len, val, err, sizeof err);
    if (rc)
        fprintf(stderr, "ntblend-vm: %s: %s\n", a->vm->dev[a->i].name, err);
    return rc;
}

/* Registers are read as the guest reads them; a write wakes the device's model. A write of 1
 * or 2 bytes goes as the 32-bit word that holds it. */
static int p_bar_read(void *arg, uint64_t gpa, uint32_t len, uint64_t *val)
{
    struct proxy_arg *a = arg;
    struct vm_dev *d = &a->vm->dev[a->i];
    pthread_mutex_lock(&d->plock);
    size_t off;
    int b = bar_at(a->vm, d, gpa, len, &off), rc = 0;
    if (b < 0)
        rc = -ENXIO;
    else if (len == 8)
        *val = sio_read64(d->bar[b], off);
    else if (len == 4)
        *val = sio_read32(d->bar[b], off);
    else if (len == 2)
        *val = *(volatile uint16_t *)(d->bar_ptr[b] + off);
    else
        *val = d->bar_ptr[b][off];
    pthread_mutex_unlock(&d->plock);
    return rc;
}

static int p_bar_write(void *arg, uint64_t gpa, uint32_t len, uint64_t val)
{
    struct proxy_arg *a = arg;
    struct vm_dev *d = &a->vm->dev[a->i];
    pthread_mutex_lock(&d->plock);
    size_t off;
    int b = bar_at(a->vm, d, gpa, len, &off), rc = 0;
    if (b < 0) {
        rc = -ENXIO;
    } else if (len == 8) {
        sio_write64(d->bar[b], off, val);
    } else if (len == 4) {
        sio_write32(d->bar[b], off, (uint32_t)val);
    } else {
        size_t w = off & ~3ul;
        uint32_t sh = 8 * (uint32_t)(off - w), mask = (len == 2 ? 0xffffu : 0xffu) << sh;
        uint32_t word = sio_read32(d->bar[b], w);
        sio_write32(d->bar[b], w, (word & ~mask) | (((uint32_t)val << sh) & mask));
    }
    pthread_mutex_unlock(&d->plock);
    return rc;
}

/* The guest's RAM as QEMU sees it must be the VM's RAM file with file offset = guest-physical
 * address: that is what the function's I/O addresses were mapped to. We need no mapping of it
 * ourselves (the function's DMA goes there directly). */
static int p_sysmem(void *arg, const struct mpq_region *r, int n)
{
    struct proxy_arg *a = arg;
    struct vm *vm = a->vm;
    int rc = 0;
    for (int k = 0; k < n; k++) {
        struct stat st;
        if (!rc && (fstat(r[k].fd, &st) || st.st_dev != vm->ram_dev || st.st_ino != vm->ram_ino))
            rc = -EINVAL;
        else if (!rc && (r[k].offset != r[k].gpa || r[k].gpa + r[k].size > vm->mem))
            rc = -ERANGE;
        if (rc == -EINVAL || rc == -ERANGE) {
            fprintf(stderr, "ntblend-vm: %s: QEMU's guest memory at %#llx (%llu KiB) is %s: the "
                    "device's DMA would miss it\n", vm->dev[a->i].name,
                    (unsigned long long)r[k].gpa, (unsigned long long)(r[k].size >> 10),
                    rc == -EINVAL ? "not the VM's RAM file" : "not at the same offset of it");
            rc = -EIO; /* said once */
        }
        close(r[k].fd);
    }
    return rc;
}

static void *irq_route(void *arg)
{
    struct proxy_arg *a = arg;
    struct vm_dev *d = &a->vm->dev[a->i];
    uint32_t hv = PROXY_VECTOR_BASE + a->vm->slot * FAB_VM_DEVS + (uint32_t)a->i, seen = 0;
    sio_wait_vector(hv, &seen, 0);
    while (!atomic_load(&d->irq_stop)) {
        uint64_t one = 1, drop;
        if (sio_wait_vector(hv, &seen, IRQ_POLL_MS))
            continue;
        /* Level-triggered INTx through KVM: raise it; KVM's resample after the guest's EOI
         * needs no answer, the next MSI-X raises it again. */
        while (read(d->resample_fd, &drop, sizeof drop) > 0)
            ;
        if (d->cmd & CMD_INTX_OFF) /* the guest masked its INTx (command register) */
            continue;
        if (write(d->intx_fd, &one, sizeof one) < 0 && errno != EAGAIN)
            break;
    }
    return NULL;
}

/* Under KVM, once the function is held and QEMU gave its eventfds: its vector 0 (the one a
 * driver on INTx programs every queue with) raises the guest's INTx. */
static void irq_start(struct vm *vm, int i)
{
    struct vm_dev *d = &vm->dev[i];
    if (!vm->kvm || d->irq_up || d->intx_fd < 0 || !d->sio)
        return;
    uint32_t hv = PROXY_VECTOR_BASE + vm->slot * FAB_VM_DEVS + (uint32_t)i;
    int rc = sio_enable_vector(d->sio, 0, hv);
    if (!rc) {
        atomic_store(&d->irq_stop, false);
        rc = -pthread_create(&d->irq_thread, NULL, irq_route, &args[i]);
    }
    if (rc)
        fprintf(stderr, "ntblend-vm: %s: its interrupts cannot reach the guest: %s\n", d->name,
                strerror(-rc));
    d->irq_up = rc == 0;
}

static void irq_stop(struct vm_dev *d)
{
    if (!d->irq_up)
        return;
    atomic_store(&d->irq_stop, true);
    pthread_join(d->irq_thread, NULL);
    d->irq_up = false;
}

static int p_irqfd(void *arg, int intx, int resample)
{
    struct proxy_arg *a = arg;
    struct vm_dev *d = &a->vm->dev[a->i];
    pthread_mutex_lock(&d->plock);
    irq_stop(d);
    if (d->intx_fd >= 0)
        close(d->intx_fd);
    if (d->resample_fd >= 0)
        close(d->resample_fd);
    d->intx_fd = intx;
    d->resample_fd = resample;
    fcntl(resample, F_SETFL, fcntl(resample, F_GETFL) | O_NONBLOCK);
    irq_start(a->vm, a->i);
    pthread_mutex_unlock(&d->plock);
    return 0;
}

static int p_reset(void *arg)
{
    struct proxy_arg *a = arg;
    char err[300];
    return vm_dev_reset(a->vm, a->i, err, sizeof err);
}

static const struct mpq_device proxy_ops = {
    .cfg_read = p_cfg_read, .cfg_write = p_cfg_write, .bar_read = p_bar_read,
    .bar_write = p_bar_write, .sysmem = p_sysmem, .irqfd = p_irqfd, .reset = p_reset,
};

static void *serve(void *arg)
{
    struct proxy_arg *a = arg;
    struct vm_dev *d = &a->vm->dev[a->i];
    unsigned said = 0;
    int rc;
    while (!atomic_load(&d->stop) && (rc = mpq_serve_one(&d->mpq, d->conn_fd)) == 0)
        if (d->mpq.refused != said) {
            said = d->mpq.refused;
            fprintf(stderr, "ntblend-vm: %s: QEMU's proxy: %s\n", d->name, d->mpq.err);
        }
    if (!atomic_load(&d->stop) && rc != -EPIPE)
        fprintf(stderr, "ntblend-vm: %s: QEMU's proxy connection ended: %s%s%s\n", d->name,
                strerror(-rc), d->mpq.err[0] ? ": " : "", d->mpq.err);
    return NULL;
}

int vm_proxy_start(struct vm *vm, int i, char *err, size_t len)
{
    struct vm_dev *d = &vm->dev[i];
    int sv[2];
    d->intx_fd = d->resample_fd = -1;
    pthread_mutex_init(&d->plock, NULL);
    /* Ours is close-on-exec; QEMU's end is inherited by QEMU (fd=N), then closed here. */
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
        return vm_say(err, len, -errno, "socketpair: %s", strerror(errno));
    fcntl(sv[0], F_SETFD, FD_CLOEXEC);
    d->conn_fd = sv[0];
    d->qemu_fd = sv[1];
    args[i] = (struct proxy_arg){ vm, i };
    struct mpq_device *ops = &d->proxy_ops;
    *ops = proxy_ops;
    ops->arg = &args[i];
    mpq_init(&d->mpq, ops);
    int rc = -pthread_create(&d->thread, NULL, serve, &args[i]);
    if (rc)
        return vm_say(err, len, rc, "cannot start a thread: %s", strerror(-rc));
    d->thread_up = true;
    return 0;
}

void vm_proxy_stop(struct vm *vm, int i)
{
    struct vm_dev *d = &vm->dev[i];
    if (d->thread_up) {
        atomic_store(&d->stop, true);
        shutdown(d->conn_fd, SHUT_RDWR); /* QEMU's proxy sees a hang-up, the thread ends */
        pthread_join(d->thread, NULL);
        d->thread_up = false;
    }
    vm_proxy_unhold(vm, i);
    if (d->conn_fd >= 0)
        close(d->conn_fd);
    if (d->qemu_fd >= 0)
        close(d->qemu_fd);
    if (d->intx_fd >= 0)
        close(d->intx_fd);
    if (d->resample_fd >= 0)
        close(d->resample_fd);
    d->conn_fd = d->qemu_fd = d->intx_fd = d->resample_fd = -1;
    pthread_mutex_destroy(&d->plock);
}

int vm_proxy_hold(struct vm *vm, int i, char *err, size_t len)
{
    struct vm_dev *d = &vm->dev[i];
    for (int b = 0; b < 6; b += 2) {
        if (!fab_func(vm->f, d->fn)->bar[b].size)
            continue;
        size_t size;
        d->bar_ptr[b] = (volatile uint8_t *)sio_map_bar(d->sio, b, &size, &d->bar[b]);
        if (!d->bar_ptr[b]) {
            int rc = -errno;
            vm_proxy_unhold(vm, i);
            return vm_say(err, len, rc, "cannot map BAR%d of %s: %s", b, d->name, strerror(-rc));
        }
    }
    irq_start(vm, i);
    return 0;
}

void vm_proxy_unhold(struct vm *vm, int i)
{
    struct vm_dev *d = &vm->dev[i];
    (void)vm;
    irq_stop(d);
    for (int b = 0; b < 6; b++) {
        if (d->bar[b])
            sio_unmap_bar(d->bar[b]);
        d->bar[b] = NULL;
        d->bar_ptr[b] = NULL;
    }
}
