/*
 * ntblend SmartIO for a driver model inside a virtual machine (smartio-tocs-2021 §5,
 * device-lending-kvm-2018 §5, -2019 §5-§6; docs/vm.md "For guests of the driver model"): what
 * a guest of an emulated VM (`ntblend vm start NAME --guest emulated`) sees of its machine.
 * Its PCI tree is the devices given to the VM, at guest BDFs; their configuration space is the
 * VM's mediated one (the guest's write enabling Bus Master is when the VM takes a device from
 * its lender); their BARs are at guest-physical addresses; its memory is the guest's RAM, and
 * the addresses it gives a device are guest-physical: the VM has mapped the guest's RAM for
 * each device so that (with the lender's IOMMU on) the device's I/O address of guest-physical
 * address g is g itself. MSI-X vectors are programmed with a guest MSI address and data and
 * delivered to the guest's handlers; another device's guest BAR address is reachable by peer
 * to peer DMA along the shortest path.
 *
 * A driver model implements its VM platform on these calls (include/ntblend/pci.h under
 * `ntblend vm run NAME -- PROGRAM` does); drivers never see them. The program runs on the
 * VM's host. Functions return 0 or a negative errno unless stated otherwise; every one may be
 * called from any thread.
 */
#ifndef NTBLEND_SMARTIO_VM_H
#define NTBLEND_SMARTIO_VM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ntblend/smartio_tree.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What this header declares is libntblend's API, the symbols it exports (it is built with
 * -fvisibility=hidden; docs/install.md). */
#pragma GCC visibility push(default)

#define SIO_VM_DEVS 8                 /* devices a VM takes */
#define SIO_VM_MSI_ADDR 0xfee00000ull /* the guest's MSI doorbell (as on x86) */

typedef struct sio_vm sio_vm_t;
typedef struct sio_vm_bar sio_vm_bar_t;

/**
 * struct sio_vm_fn - a device of the VM, as its guest sees it.
 * @index: its slot in the VM (what the calls below take).
 * @id, @name, @vendor, @device, @class_code: as in struct sio_tree_fn.
 * @bdf: its place in the guest's tree (bus 0).
 * @present: offered to the guest or held for it; false once it is gone (detached, or its
 *           lender died: a surprise removal).
 * @held: taken from its lender for the guest (after the guest enabled Bus Master).
 * @bar_addr, @bar_size: its BARs at guest-physical addresses; 0: no such BAR.
 */
struct sio_vm_fn {
    int index;
    uint32_t id;
    char name[32];
    uint16_t bdf;
    bool present, held;
    uint16_t vendor, device;
    uint32_t class_code;
    uint64_t bar_addr[SIO_BARS];
    uint64_t bar_size[SIO_BARS];
};

/**
 * sio_vm_open() - the guest's view of VM @name.
 * Return: 0, -ENOENT no such VM, -EMEDIUMTYPE a QEMU guest (its devices are QEMU's),
 * -EXDEV the VM runs on another host (run the program on its host: `ntblend vm run`),
 * -ESRCH the VM is stopping; or as sio_tree_open.
 */
int sio_vm_open(const char *name, sio_vm_t **vm);
void sio_vm_close(sio_vm_t *vm);
/** sio_vm_mem() - the guest's RAM: guest-physical 0 up to this. */
uint64_t sio_vm_mem(const sio_vm_t *vm);
/** sio_vm_list() - the VM's devices (at most @max into @out); returns how many there are. */
int sio_vm_list(sio_vm_t *vm, struct sio_vm_fn *out, int max);
/** sio_vm_wait() - wait until the VM's devices may have changed (hot-add, hot-remove, a hold,
 * a lender's death), @timeout_ms at most: 0 or -ETIMEDOUT. *@seen is the cursor (start at 0).
 * sio_vm_wake() ends a wait under way and every one after it. */
int sio_vm_wait(sio_vm_t *vm, uint32_t *seen, int timeout_ms);
void sio_vm_wake(sio_vm_t *vm);
/** sio_vm_error() - what the VM said of the last request of this thread that it refused. */
const char *sio_vm_error(void);

/* Configuration space as the guest sees it (mediated by the VM). A read that fails reads all
 * ones; a write fails with what the VM said (sio_vm_error), e.g. when taking the device for
 * Bus Master finds its lender's windows too small for the guest's RAM. */
uint32_t sio_vm_cfg_read(sio_vm_t *vm, int index, uint32_t off, uint32_t len);
int sio_vm_cfg_write(sio_vm_t *vm, int index, uint32_t off, uint32_t len, uint32_t val);

/* A BAR of device @index mapped into this process (the guest's mapping of its guest-physical
 * BAR); sio_vm_write() is a posted register write the device sees (none when the path to its
 * lender is down). */
volatile void *sio_vm_map_bar(sio_vm_t *vm, int index, int bar, size_t *size,
                              sio_vm_bar_t **map);
void sio_vm_unmap_bar(sio_vm_bar_t *map);
void sio_vm_write(sio_vm_bar_t *map, size_t off, uint64_t val, int len);

/* Guest RAM. sio_vm_ram_alloc: @size bytes (4 KiB pages) of the guest's RAM for this process
 * (the VM keeps them for it until it frees them or exits), at guest-physical *@gpa; -ENOMEM
 * when the guest has no room. sio_vm_ram: where [gpa, gpa + len) is in this process, NULL +
 * errno outside the guest's RAM. sio_vm_dma_addr: the address device @index reaches guest
 * physical @gpa by (gpa itself, when the lender's IOMMU maps the guest's RAM; -1 when the
 * device is not held). */
int sio_vm_ram_alloc(sio_vm_t *vm, size_t size, uint64_t *gpa);
int sio_vm_ram_free(sio_vm_t *vm, uint64_t gpa);
void *sio_vm_ram(sio_vm_t *vm, uint64_t gpa, size_t len);
uint64_t sio_vm_dma_addr(sio_vm_t *vm, int index, uint64_t gpa);

/* Interrupts. sio_vm_msix: the guest programs MSI-X vector @vector of device @index with
 * address @addr (SIO_VM_MSI_ADDR) and data @data (a guest vector, 0-255): the VM routes the
 * device's interrupt to the guest's vector (at once if the device is held, else when it is
 * taken). sio_vm_wait_vector: wait for guest vector @gvec, as sio_wait_vector. Guest vectors
 * share host vectors: a handler may be woken with nothing to do. */
int sio_vm_msix(sio_vm_t *vm, int index, unsigned vector, uint64_t addr, uint32_t data);
int sio_vm_wait_vector(sio_vm_t *vm, uint32_t gvec, uint32_t *seen, int timeout_ms);
/** sio_vm_host_vector() - the host vector on which the VM in @slot delivers guest vector
 * @gvec, with @host_vectors vectors on its host (the VM's side of sio_vm_wait_vector). */
uint32_t sio_vm_host_vector(uint32_t slot, uint32_t gvec, uint32_t host_vectors);

/** sio_vm_peer() - peer to peer: the address device @index reaches BAR @bar of device @peer
 * by (its guest BAR address, when the lender's IOMMU maps it), over the shortest path between
 * them (within one lender, or across the fabric between two), never through guest RAM. Both
 * must be held. The mapping stays until either device leaves the guest. */
int sio_vm_peer(sio_vm_t *vm, int index, int peer, int bar, uint64_t *ioaddr);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif
