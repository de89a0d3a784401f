/*
 * The driver model's platform inside a virtual machine (struct pdm_host_ops; docs/vm.md "For
 * guests of the driver model"), chosen when the program runs in an emulated VM (`ntblend vm
 * run NAME -- PROGRAM` sets NTBLEND_VM): the tree is the VM's devices at their guest BDFs,
 * configuration space is the VM's mediated one (so the probe's pci_set_master is what takes
 * the device from its lender), BARs are at guest-physical addresses, every DMA buffer is
 * guest RAM and the address a device is given is guest-physical (the VM mapped the guest's
 * RAM for the device at I/O address = guest-physical address: a streaming mapping is no
 * request at all, as in a guest without a virtual IOMMU), MSI-X is programmed with the
 * guest's doorbell address and a guest vector, and a peer's BAR is reached at its guest BAR
 * address. All through SmartIO's view of a VM (ntblend/smartio_vm.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ntblend/smartio_vm.h"
#include "pci_int.h"

_Static_assert(PDM_BARS == SIO_BARS, "a function's BAR slots");

#define GUEST_VECTOR_BASE 0x30u /* guest vectors handed out: 0x30 .. 0xef, as Linux's */
#define GUEST_VECTORS 0xc0u
#define PAGE 4096u

static sio_vm_t *vm;        /* while a driver is registered */
static char *ram0;          /* guest-physical 0 in this process */

/* Guest RAM this process took (dma_host_alloc and coherent memory). */
struct vm_mem {
    struct vm_mem *next;
    void *cpu;
    uint64_t gpa, size;
};
static struct vm_mem *mems;
static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;

static int index_of(const struct pci_dev *d) { return (int)d->fn.id; }

static int v_open(void)
{
    const char *name = getenv("NTBLEND_VM");
    int rc = sio_vm_open(name ? name : "", &vm);
    if (rc) {
        fprintf(stderr, "pci: VM %s: %s\n", name ? name : "",
                rc == -ENOENT ? "no such VM (ntblend vm list)"
                : rc == -EMEDIUMTYPE ? "a QEMU guest: its devices are QEMU's; run driver-model "
                                       "programs in an emulated guest (vm start --guest emulated)"
                : rc == -EXDEV ? "runs on another host (start the program with ntblend vm run)"
                : rc == -ESRCH ? "is stopping"
                               : strerror(-rc));
        vm = NULL;
        return rc;
    }
    ram0 = sio_vm_ram(vm, 0, sio_vm_mem(vm));
    if (!ram0) {
        rc = -errno;
        sio_vm_close(vm);
        vm = NULL;
    }
    return rc;
}

static void v_close(void)
{
    sio_vm_close(vm);
    vm = NULL;
}

static int v_scan(struct pdm_fn *out, int max)
{
    struct sio_vm_fn f[SIO_VM_DEVS];
    int n = sio_vm_list(vm, f, SIO_VM_DEVS);
    for (int i = 0; i < n && i < max && i < SIO_VM_DEVS; i++) {
        struct pdm_fn *o = &out[i];
        /* Nothing tells a guest that a device is lent: the VM mediates its config space. */
        *o = (struct pdm_fn){ .id = (uint32_t)f[i].index, .bdf = f[i].bdf, .lent = false,
                              .hotplug = true, .present = f[i].present, .vendor = f[i].vendor,
                              .device = f[i].device, .class_code = f[i].class_code };
        memcpy(o->name, f[i].name, sizeof o->name);
        memcpy(o->bar_start, f[i].bar_addr, sizeof o->bar_start);
        memcpy(o->bar_len, f[i].bar_size, sizeof o->bar_len);
    }
    return n;
}

static int v_wait(uint32_t *seen, int timeout_ms) { return sio_vm_wait(vm, seen, timeout_ms); }
static void v_wake(void) { sio_vm_wake(vm); }

/* The VM holds the device for its guest: binding a driver in the guest takes nothing more. */
static int v_bind(struct pci_dev *d)
{
    d->h = vm;
    return 0;
}

static void v_unbind(struct pci_dev *d) { d->h = NULL; }

static uint32_t v_cfg_read(struct pci_dev *d, uint32_t off, uint32_t len)
{
    return sio_vm_cfg_read(vm, index_of(d), off, len);
}

static int v_cfg_write(struct pci_dev *d, uint32_t off, uint32_t len, uint32_t val)
{
    int rc = sio_vm_cfg_write(vm, index_of(d), off, len, val);
    if (rc) /* e.g. Bus Master, when the VM could not take the device: say why */
        fprintf(stderr, "%s: %s\n", d->name, sio_vm_error());
    return rc;
}

static volatile void *v_bar_map(struct pci_dev *d, int bar, size_t *len, void **map)
{
    sio_vm_bar_t *b;
    volatile void *p = sio_vm_map_bar(vm, index_of(d), bar, len, &b);
    if (p)
        *map = b;
    return p;
}

static void v_bar_unmap(void *map) { sio_vm_unmap_bar(map); }
static void v_bar_write(void *map, size_t off, uint64_t val, int len) { sio_vm_write(map, off, val, len); }

/* ---------------------------------------------------------------- guest RAM and DMA */

static void *ram_take(size_t size, uint64_t *gpa_out)
{
    uint64_t gpa;
    size = (size + PAGE - 1) & ~(size_t)(PAGE - 1);
    if (!vm) { /* no driver registered yet: the guest's RAM is not known */
        errno = ENODEV;
        return NULL;
    }
    struct vm_mem *m = calloc(1, sizeof *m);
    int rc = m ? sio_vm_ram_alloc(vm, size, &gpa) : -ENOMEM;
    if (rc) {
        free(m);
        errno = -rc;
        return NULL;
    }
    *m = (struct vm_mem){ .cpu = ram0 + gpa, .gpa = gpa, .size = size };
    pthread_mutex_lock(&mem_lock);
    m->next = mems;
    mems = m;
    pthread_mutex_unlock(&mem_lock);
    if (gpa_out)
        *gpa_out = gpa;
    return m->cpu;
}

static int ram_give(void *cpu)
{
    struct vm_mem *found = NULL;
    pthread_mutex_lock(&mem_lock);
    for (struct vm_mem **pp = &mems; *pp; pp = &(*pp)->next)
        if ((*pp)->cpu == cpu) {
            found = *pp;
            *pp = found->next;
            break;
        }
    pthread_mutex_unlock(&mem_lock);
    if (!found)
        return -EINVAL;
    int rc = vm ? sio_vm_ram_free(vm, found->gpa) : 0;
    free(found);
    return rc;
}

/* Guest-physical gpa as device d reaches it. */
static int dma_addr(struct pci_dev *d, uint64_t gpa, dma_addr_t *addr)
{
    uint64_t io = sio_vm_dma_addr(vm, index_of(d), gpa);
    if (io == UINT64_MAX) {
        fprintf(stderr, "%s: DMA before pci_set_master: the VM has not taken the device from "
                "its lender yet\n", d->name);
        return -EIO;
    }
    *addr = io;
    return 0;
}

static void *v_coherent_alloc(struct pci_dev *d, size_t size, dma_addr_t *addr, void **mem)
{
    uint64_t gpa;
    void *cpu = ram_take(size, &gpa);
    if (!cpu)
        return NULL;
    int rc = dma_addr(d, gpa, addr);
    if (rc) {
        ram_give(cpu);
        errno = -rc;
        return NULL;
    }
    memset(cpu, 0, size); /* guest RAM another program used before */
    *mem = cpu;
    return cpu;
}

static void v_coherent_free(void *mem) { ram_give(mem); }
static void *v_host_alloc(size_t size) { return ram_take(size, NULL); }
static int v_host_free(void *cpu) { return ram_give(cpu); }

static int v_map(struct pci_dev *d, void *cpu, size_t size, enum dma_data_direction dir,
                 dma_addr_t *addr)
{
    (void)dir;
    uint64_t mem = sio_vm_mem(vm);
    if ((char *)cpu < ram0 || (uint64_t)((char *)cpu - ram0) > mem ||
        size > mem - (uint64_t)((char *)cpu - ram0))
        return -EFAULT; /* not guest RAM: a guest has no other memory to give a device */
    return dma_addr(d, (uint64_t)((char *)cpu - ram0), addr);
}

static int v_unmap(struct pci_dev *d, dma_addr_t addr, size_t size)
{
    (void)d, (void)size;
    return addr == DMA_MAPPING_ERROR ? -ENOENT : 0;
}

static int v_map_peer(struct pci_dev *d, struct pci_dev *peer, int bar, dma_addr_t *addr,
                      void **map)
{
    uint64_t io;
    int rc = sio_vm_peer(vm, index_of(d), index_of(peer), bar, &io);
    if (rc) {
        fprintf(stderr, "%s: %s\n", d->name, sio_vm_error());
        return rc;
    }
    *addr = io;
    *map = NULL; /* the VM keeps it until either device leaves the guest */
    return 0;
}

static void v_unmap_peer(void *map) { (void)map; }

/* ---------------------------------------------------------------- interrupts */

static int v_irq_vector(struct pci_dev *d, unsigned vector, uint32_t *gv)
{
    *gv = GUEST_VECTOR_BASE + ((uint32_t)index_of(d) * 16u + vector) % GUEST_VECTORS;
    return 0;
}

static int v_irq_route(struct pci_dev *d, unsigned vector, uint32_t gv)
{
    int rc = sio_vm_msix(vm, index_of(d), vector, SIO_VM_MSI_ADDR, gv);
    if (rc)
        fprintf(stderr, "%s: %s\n", d->name, sio_vm_error());
    return rc;
}

static int v_irq_wait(uint32_t gv, uint32_t *seen, int timeout_ms)
{
    return sio_vm_wait_vector(vm, gv, seen, timeout_ms);
}

const struct pdm_host_ops pdm_host_vm = {
    .open = v_open,
    .close = v_close,
    .scan = v_scan,
    .wait = v_wait,
    .wake = v_wake,
    .bind = v_bind,
    .unbind = v_unbind,
    .cfg_read = v_cfg_read,
    .cfg_write = v_cfg_write,
    .bar_map = v_bar_map,
    .bar_unmap = v_bar_unmap,
    .bar_write = v_bar_write,
    .coherent_alloc = v_coherent_alloc,
    .coherent_free = v_coherent_free,
    .host_alloc = v_host_alloc,
    .host_free = v_host_free,
    .map = v_map,
    .unmap = v_unmap,
    .map_peer = v_map_peer,
    .unmap_peer = v_unmap_peer,
    .irq_vector = v_irq_vector,
    .irq_route = v_irq_route,
    .irq_wait = v_irq_wait,
};

/* The platform is the process's for its life: a program is started either in a VM or not. */
const struct pdm_host_ops *pdm_host_chosen;

const struct pdm_host_ops *pdm_host_choose(void)
{
    const char *v = getenv("NTBLEND_VM");
    pdm_host_chosen = v && *v ? &pdm_host_vm : &pdm_host_sio;
    return pdm_host_chosen;
}
