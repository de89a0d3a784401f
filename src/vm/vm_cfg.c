/*
 * The configuration space an emulated guest sees for a device given to it (MDEV-style,
 * smartio-tocs-2021 §5.1-5.2): the device's own, mediated. The device stays with its lender
 * while the guest only looks at it; the guest's write enabling Bus Master is when the VM takes
 * it (borrowed exclusively, the guest's RAM mapped for it), and a guest reset (function-level
 * reset) gives it back. What the VM path cannot deliver is hidden, never offered and broken:
 *
 *   BARs          the guest-physical addresses the VM gave them (as firmware assigns them);
 *                 writes are ignored, so sizing reads the address back
 *   command       the guest's own bits: memory space and Bus Master (the device's real
 *                 register is the VM's to set, through SmartIO)
 *   interrupt pin 0: the fabric carries no INTx to a guest; MSI-X stays (routed by the VM:
 *                 vm_guest_req.c, the guest's vector on a host vector of the VM's host)
 *   SR-IOV        hidden (0x100 reads 0): a guest cannot make virtual functions of a device
 *                 that is not its host's
 *
 * A device passed through to a QEMU guest (vm_proxy.c) is seen the same way, but firmware and
 * the guest's kernel place its BARs and QEMU forwards the guest's accesses to them here:
 *
 *   BARs          32-bit memory BARs the guest sizes and places (QEMU's proxy registers every
 *                 BAR it finds as one); a 64-bit BAR's upper half reads 0
 *   interrupt pin INTA: QEMU's proxy raises INTx (KVM's irqfd; vm_proxy.c routes the device's
 *                 MSI-X into it), the guest's interrupt line register is its own
 *   MSI-X         hidden (the capability list skips it): the proxy carries no MSI or MSI-X
 *   taken         when the guest enables memory space or Bus Master: its driver touches the
 *                 registers then, and they must be the device's
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "vm.h"

#define CFG_COMMAND 0x04
#define CFG_CMD_MEM 0x2u
#define CFG_CMD_BME 0x4u
#define CFG_BAR0 0x10
#define CFG_BAR_END 0x28
#define CFG_CAP_PTR 0x34
#define CFG_INT_LINE 0x3c
#define CFG_INT_PIN 0x3d
#define CFG_CMD_INTX_OFF 0x400u
#define CFG_PCIE 0x50           /* the devices' PCI Express capability */
#define CFG_PCIE_DEVCTL (CFG_PCIE + 8)
#define CFG_FLR 0x8000u         /* Device Control: initiate function-level reset */
#define CFG_EXT 0x100

static uint8_t view_byte(const struct vm *vm, int i, uint32_t off)
{
    const struct vm_dev *d = &vm->dev[i];
    const struct fab_function *fn = fab_func(vm->f, d->fn);
    const struct fab_vm_dev *r = &vm->rec->dev[i];
    if (d->pass && off < CFG_EXT) {
        if (off == CFG_CAP_PTR)
            return CFG_PCIE; /* past MSI-X */
        if (off >= FAB_CFG_MSIX && off < CFG_PCIE)
            return 0;
        if (off == CFG_INT_PIN)
            return 1;
        if (off == CFG_INT_LINE)
            return d->int_line;
        if (off >= CFG_BAR0 && off < CFG_BAR_END)
            return (uint8_t)(d->bar_reg[(off - CFG_BAR0) / 4] >> (8 * (off % 4)));
    }
    if (off >= CFG_EXT || off == CFG_INT_PIN)
        return 0;
    if (off == CFG_COMMAND || off == CFG_COMMAND + 1)
        return (uint8_t)(d->cmd >> (8 * (off - CFG_COMMAND)));
    if (off >= CFG_BAR0 && off < CFG_BAR_END) {
        uint32_t slot = (off - CFG_BAR0) / 4, b = slot & ~1u;
        uint32_t v = 0;
        if (fn->bar[b].kind != FAB_BAR_NONE) {
            uint64_t a = r->guest_bar[b];
            uint32_t flags = 0x4 | (fn->bar[b].kind == FAB_BAR_MEM ? 0x8 : 0);
            v = slot & 1 ? (uint32_t)(a >> 32) : (uint32_t)a | flags;
        }
        return (uint8_t)(v >> (8 * (off % 4)));
    }
    return fn->cfg[off];
}

static int check(const struct vm *vm, int i, uint32_t off, uint32_t len)
{
    if (i < 0 || i >= FAB_VM_DEVS || !vm->dev[i].used || vm->dev[i].blk)
        return -ENODEV; /* a QEMU guest's virtio disk has QEMU's config space, not this */
    if ((len != 1 && len != 2 && len != 4) || off % len || off > 4096 - len)
        return -EINVAL;
    return 0;
}

static int cfg_read(struct vm *vm, int i, uint32_t off, uint32_t len, uint32_t *val)
{
    int rc = check(vm, i, off, len);
    if (rc)
        return rc;
    *val = 0;
    for (uint32_t k = 0; k < len; k++)
        *val |= (uint32_t)view_byte(vm, i, off + k) << (8 * k);
    return 0;
}

static int dev_reset(struct vm *vm, int i, char *err, size_t len)
{
    if (check(vm, i, 0, 4))
        return vm_say(err, len, -ENODEV, "a QEMU guest's virtio disk has no mediated config "
                      "space");
    struct vm_dev *d = &vm->dev[i];
    vm_dev_unhold(vm, i);
    d->cmd = 0;
    memset(d->msix, 0, sizeof d->msix); /* a reset device has no vectors */
    if (d->pass) { /* a reset function's BARs are unassigned until placed again */
        memset(d->bar_reg, 0, sizeof d->bar_reg);
        memset(vm->rec->dev[i].guest_bar, 0, sizeof vm->rec->dev[i].guest_bar);
        fab_vm_changed(vm->rec);
    }
    return 0;
}

/* A passed-through device's BAR register k: what the guest wrote, within the BAR's size
 * (sizing writes all ones and reads the size back). */
static void bar_write(struct vm *vm, int i, uint32_t off, uint32_t len, uint32_t val)
{
    struct vm_dev *d = &vm->dev[i];
    const struct fab_function *fn = fab_func(vm->f, d->fn);
    uint32_t k = (off - CFG_BAR0) / 4;
    for (uint32_t b = 0; b < len; b++) {
        uint32_t sh = 8 * ((off + b) % 4);
        d->bar_reg[k] = (d->bar_reg[k] & ~(0xffu << sh)) | (((val >> (8 * b)) & 0xffu) << sh);
    }
    uint64_t size = k % 2 == 0 && fn->bar[k].kind != FAB_BAR_NONE ? fn->bar[k].size : 0;
    d->bar_reg[k] = size && size <= (1ull << 31) ? d->bar_reg[k] & ~(uint32_t)(size - 1) & ~0xfu
                                                 : 0;
    vm->rec->dev[i].guest_bar[k] = d->bar_reg[k];
    fab_vm_changed(vm->rec);
}

static int cfg_write(struct vm *vm, int i, uint32_t off, uint32_t len, uint32_t val, char *err,
                     size_t elen)
{
    int rc = check(vm, i, off, len);
    if (rc)
        return vm_say(err, elen, rc, rc == -ENODEV ? "a QEMU guest's virtio disk has no "
                      "mediated config space" : "a config access of %u bytes at %#x", len, off);
    struct vm_dev *d = &vm->dev[i];
    /* Function-level reset: Device Control's "initiate FLR" bit. */
    uint32_t devctl = off == CFG_PCIE_DEVCTL && len >= 2 ? val & 0xffffu
                      : off == CFG_PCIE_DEVCTL + 1 && len == 1 ? val << 8 : 0;
    if (devctl & CFG_FLR)
        return dev_reset(vm, i, err, elen);
    if (d->pass && off >= CFG_BAR0 && off < CFG_BAR_END) {
        bar_write(vm, i, off, len, val);
        return 0;
    }
    if (d->pass && off == CFG_INT_LINE) {
        d->int_line = (uint8_t)val;
        return 0;
    }
    if (off > CFG_COMMAND + 1 || off + len <= CFG_COMMAND)
        return 0; /* the rest of the guest's view is read-only */
    uint16_t cmd = d->cmd;
    for (uint32_t k = 0; k < len; k++)
        if (off + k == CFG_COMMAND || off + k == CFG_COMMAND + 1) {
            uint32_t sh = 8 * (off + k - CFG_COMMAND);
            cmd = (uint16_t)((cmd & ~(0xffu << sh)) | (((val >> (8 * k)) & 0xffu) << sh));
        }
    /* I/O space and the rest are not the guest's; INTx masking is a passed-through guest's */
    cmd &= CFG_CMD_MEM | CFG_CMD_BME | (d->pass ? CFG_CMD_INTX_OFF : 0);
    /* Bus Master on: now the device is the guest's (a passed-through one's already when its
     * driver turns memory space on). Off: the guest still holds it (as a driver that pauses
     * DMA does); a reset, a detach or the VM's end gives it back. */
    uint16_t take = CFG_CMD_BME | (d->pass ? CFG_CMD_MEM : 0);
    if ((cmd & take) && !(d->cmd & take) && (rc = vm_dev_hold(vm, i, err, elen)))
        return rc;
    d->cmd = cmd;
    if (d->sio) /* the device's own register follows */
        sio_cfg_write(d->sio, CFG_COMMAND, 2, cmd & (CFG_CMD_MEM | CFG_CMD_BME));
    return 0;
}

/* The proxy thread of a passed-through device calls these too: its lock orders them. */
int vm_cfg_read(struct vm *vm, int i, uint32_t off, uint32_t len, uint32_t *val)
{
    bool lock = i >= 0 && i < FAB_VM_DEVS && vm->dev[i].pass;
    if (lock)
        pthread_mutex_lock(&vm->dev[i].plock);
    int rc = cfg_read(vm, i, off, len, val);
    if (lock)
        pthread_mutex_unlock(&vm->dev[i].plock);
    return rc;
}

int vm_cfg_write(struct vm *vm, int i, uint32_t off, uint32_t len, uint32_t val, char *err,
                 size_t elen)
{
    bool lock = i >= 0 && i < FAB_VM_DEVS && vm->dev[i].pass;
    if (lock)
        pthread_mutex_lock(&vm->dev[i].plock);
    int rc = cfg_write(vm, i, off, len, val, err, elen);
    if (lock)
        pthread_mutex_unlock(&vm->dev[i].plock);
    return rc;
}

int vm_dev_reset(struct vm *vm, int i, char *err, size_t len)
{
    bool lock = i >= 0 && i < FAB_VM_DEVS && vm->dev[i].pass;
    if (lock)
        pthread_mutex_lock(&vm->dev[i].plock);
    int rc = dev_reset(vm, i, err, len);
    if (lock)
        pthread_mutex_unlock(&vm->dev[i].plock);
    return rc;
}
