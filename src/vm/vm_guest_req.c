/*
 * What a program in an emulated guest (`ntblend vm run`, the driver model's VM platform:
 * src/pci/host_vm.c over ntblend/smartio_vm.h) asks of its VM, the hypervisor's part:
 *
 *   ram SIZE          guest RAM for the asking process (a guest kernel's page allocator):
 *                     "ok GPA"; the VM takes it back when the process frees it or is gone
 *   unram GPA         give it back
 *   msix DEV VEC ADDR DATA
 *                     the guest programs MSI-X vector VEC of DEV with its doorbell address and
 *                     a guest vector (as VFIO traps a guest's MSI-X table writes): the VM
 *                     points the device's real entry at the host vector that delivers that
 *                     guest vector, through the host's MSI region mapped for the device at the
 *                     guest's doorbell address (device-lending-kvm-2018 §5)
 *   peer DEV PEER BAR DEV's I/O address of PEER's BAR: its guest BAR address, mapped in DEV's
 *                     lender's IOMMU along the shortest path to PEER (device-lending-kvm-2019
 *                     §6: within one lender, or across the fabric between two; never through
 *                     the guest's RAM or its host): "ok IOADDR"
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "ntblend/smartio_vm.h"
#include "vm.h"

#define RAM_FIRST (1ull << 20) /* below 1 MiB stays unused, as firmware leaves it */
#define PAGE 4096ull

/* ---------------------------------------------------------------- guest RAM */

static void reap_ram(struct vm *vm)
{
    for (struct vm_ram **pp = &vm->ram; *pp;) {
        struct vm_ram *r = *pp;
        if (kill(r->pid, 0) && errno == ESRCH) {
            *pp = r->next;
            free(r);
        } else {
            pp = &r->next;
        }
    }
}

static int ram_alloc(struct vm *vm, pid_t pid, uint64_t size, uint64_t *gpa, char *err, size_t len)
{
    size = (size + PAGE - 1) & ~(PAGE - 1);
    if (!size || size > vm->mem)
        return vm_say(err, len, -EINVAL, "no room for %" PRIu64 " bytes in VM %s's %" PRIu64
                      " MiB of RAM", size, vm->name, vm->mem >> 20);
    reap_ram(vm);
    uint64_t at = RAM_FIRST; /* first fit, in address order */
    struct vm_ram **pp = &vm->ram;
    for (; *pp; pp = &(*pp)->next) {
        if ((*pp)->gpa - at >= size)
            break;
        at = (*pp)->gpa + (*pp)->size;
    }
    if (at > vm->mem || vm->mem - at < size)
        return vm_say(err, len, -ENOMEM, "no room for %" PRIu64 " KiB more in VM %s's %" PRIu64
                      " MiB of RAM: free some, or give the VM more (--mem)", size >> 10,
                      vm->name, vm->mem >> 20);
    struct vm_ram *r = calloc(1, sizeof *r);
    if (!r)
        return vm_say(err, len, -ENOMEM, "out of memory");
    *r = (struct vm_ram){ .next = *pp, .gpa = at, .size = size, .pid = pid };
    *pp = r;
    *gpa = at;
    return 0;
}

static int ram_free(struct vm *vm, pid_t pid, uint64_t gpa, char *err, size_t len)
{
    for (struct vm_ram **pp = &vm->ram; *pp; pp = &(*pp)->next)
        if ((*pp)->gpa == gpa && (*pp)->pid == pid) {
            struct vm_ram *r = *pp;
            *pp = r->next;
            free(r);
            return 0;
        }
    return vm_say(err, len, -ENOENT, "guest-physical %#" PRIx64 " is not RAM this process took",
                  gpa);
}

/* ---------------------------------------------------------------- MSI-X */

/* Point device i's vector v at the host vector of the guest's. The device must be held. */
static int route(struct vm *vm, int i, unsigned v, char *err, size_t len)
{
    struct vm_dev *d = &vm->dev[i];
    int rc;
    if (d->iova_gpa && !d->msi_mapped) {
        /* The guest's doorbell address is where the device reaches this host's MSI region. */
        rc = sio_msi_at(d->sio, SIO_VM_MSI_ADDR);
        if (rc && rc != -EALREADY)
            return vm_say(err, len, rc, "cannot map the MSI doorbell for %s: %s", d->name,
                          strerror(-rc));
        d->msi_mapped = true;
    }
    int n = sio_host_vectors();
    uint32_t hv = sio_vm_host_vector(vm->slot, d->msix[v].data, n < 0 ? 0 : (uint32_t)n);
    if ((rc = sio_enable_vector(d->sio, v, hv)))
        return vm_say(err, len, rc, "cannot route %s's MSI-X vector %u: %s", d->name, v,
                      strerror(-rc));
    return 0;
}

int vm_guest_route_all(struct vm *vm, int i, char *err, size_t len)
{
    for (unsigned v = 0; v < VM_MSIX; v++) {
        int rc = vm->dev[i].msix[v].set ? route(vm, i, v, err, len) : 0;
        if (rc)
            return rc;
    }
    return 0;
}

static int msix(struct vm *vm, int i, unsigned v, uint64_t addr, uint32_t data, char *err,
                size_t len)
{
    struct vm_dev *d = &vm->dev[i];
    if (v >= VM_MSIX)
        return vm_say(err, len, -EINVAL, "a guest programs MSI-X vectors 0-%d of a device",
                      VM_MSIX - 1);
    if ((addr & ~0xfffffull) != SIO_VM_MSI_ADDR || data > 0xff || data < 0x10)
        return vm_say(err, len, -EINVAL, "MSI-X address %#" PRIx64 " data %#x: a guest's MSI "
                      "goes to its doorbell %#llx with a vector 0x10-0xff as data", addr, data,
                      SIO_VM_MSI_ADDR);
    d->msix[v] = (struct vm_msix){ .set = true, .addr = addr, .data = data };
    /* Not held yet: routed when the guest's Bus Master takes the device. */
    return d->sio ? route(vm, i, v, err, len) : 0;
}

/* ---------------------------------------------------------------- peer to peer */

void vm_guest_drop_peers(struct vm *vm, int i)
{
    for (int j = 0; j < FAB_VM_DEVS; j++)
        for (int b = 0; b < FAB_BARS; b++) {
            if (vm->dev[i].peer[j][b])
                sio_unmap(vm->dev[i].peer[j][b]);
            if (vm->dev[j].peer[i][b])
                sio_unmap(vm->dev[j].peer[i][b]);
            vm->dev[i].peer[j][b] = vm->dev[j].peer[i][b] = NULL;
        }
}

static int peer(struct vm *vm, int i, int j, int bar, uint64_t *io, char *err, size_t len)
{
    struct vm_dev *d = &vm->dev[i], *p = &vm->dev[j];
    uint64_t gbar = bar >= 0 && bar < FAB_BARS ? vm->rec->dev[j].guest_bar[bar] : 0;
    if (!gbar)
        return vm_say(err, len, -EINVAL, "%s has no BAR %d", p->name, bar);
    if (!d->sio || !p->sio)
        return vm_say(err, len, -EPERM, "peer to peer between %s and %s: the guest enables Bus "
                      "Master on both first", d->name, p->name);
    if (d->peer[j][bar]) {
        *io = d->peer_io[j][bar];
        return 0;
    }
    sio_dma_t *m;
    int rc;
    if (d->iova_gpa) {
        rc = sio_map_peer_bar_at(d->sio, p->sio, bar, gbar, &m);
        *io = gbar;
    } else {
        rc = sio_map_peer_bar(d->sio, p->sio, bar, io, &m);
    }
    if (rc == -ENOSPC)
        return vm_say(err, len, rc, "mapping %s's BAR %d for %s takes more LUT or requester-ID "
                      "entries than its lender has free (ntblend status)", p->name, bar, d->name);
    if (rc)
        return vm_say(err, len, rc, "cannot map %s's BAR %d for %s: %s", p->name, bar, d->name,
                      strerror(-rc));
    d->peer[j][bar] = m;
    d->peer_io[j][bar] = *io;
    return 0;
}

/* ---------------------------------------------------------------- requests */

int vm_guest_request(struct vm *vm, int c, const char *req, char *ans, size_t alen, char *err,
                     size_t elen)
{
    struct ucred cred = { 0 };
    socklen_t cl = sizeof cred;
    getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &cl);
    char a[64] = "", b[64] = "";
    unsigned long long x = 0, y = 0;
    unsigned v = 0;
    int bar = 0, rc;
    bool emu = vm->guest == VM_GUEST_EMULATED;
    if (!strncmp(req, "ram ", 4) || !strncmp(req, "unram ", 6)) {
        if (!emu)
            return vm_say(err, elen, -EOPNOTSUPP, "VM %s is a QEMU guest: its RAM is its "
                          "kernel's", vm->name);
        if (sscanf(req + (req[0] == 'r' ? 4 : 6), "%lli", (long long *)&x) != 1)
            return vm_say(err, elen, -EINVAL, "ram SIZE, unram GPA");
        if (req[0] == 'u')
            return (rc = ram_free(vm, cred.pid, x, err, elen)) ? rc : 1;
        uint64_t gpa = 0;
        if ((rc = ram_alloc(vm, cred.pid, x, &gpa, err, elen)))
            return rc;
        snprintf(ans, alen, "%#" PRIx64, gpa);
        return 1;
    }
    bool is_msix = !strncmp(req, "msix ", 5), is_peer = !strncmp(req, "peer ", 5);
    if (!is_msix && !is_peer)
        return 0;
    int got = is_msix ? sscanf(req + 5, "%63s %u %lli %lli", a, &v, (long long *)&x,
                               (long long *)&y)
                      : sscanf(req + 5, "%63s %63s %d", a, b, &bar);
    if (got != (is_msix ? 4 : 3))
        return vm_say(err, elen, -EINVAL, is_msix ? "msix DEV VECTOR ADDR DATA"
                                                  : "peer DEV PEER BAR");
    int i = vm_dev_find(vm, a), j = is_peer ? vm_dev_find(vm, b) : 0;
    if (i < 0 || j < 0)
        return vm_say(err, elen, -ENOENT, "%s is not in VM %s", i < 0 ? a : b, vm->name);
    if (!emu || vm->dev[i].blk || vm->dev[j].blk)
        return vm_say(err, elen, -EOPNOTSUPP, "only an emulated guest's devices are the guest's "
                      "to program");
    if (is_msix)
        return (rc = msix(vm, i, v, x, (uint32_t)y, err, elen)) ? rc : 1;
    uint64_t io;
    if ((rc = peer(vm, i, j, bar, &io, err, elen)))
        return rc;
    snprintf(ans, alen, "%#" PRIx64, io);
    return 1;
}
