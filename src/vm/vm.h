/*
 * The VM process (ntblend-vm): one per virtual machine, on the VM's host. It is the VM's
 * hardware: it holds the guest's RAM (a slot of the fabric, accounted against the host's RAM),
 * the devices given to the guest (borrowed for it, the guest's RAM mapped for each of them
 * once) and, for a QEMU guest, QEMU itself and the vhost-user back ends its virtio devices
 * talk to. Everything it holds goes when it ends, however it ends. docs/vm.md.
 */
#ifndef NTBLEND_VM_H
#define NTBLEND_VM_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "fabric.h"
#include "ntblend/smartio.h"
#include "mpq.h"
#include "vblk.h"

#define VM_GUEST_QEMU 0
#define VM_GUEST_EMULATED 1
#define VM_GUEST_RAM_MAX 0xfee00000ull /* an emulated guest's RAM ends below its MSI doorbell */
#define VM_MSIX 32                /* MSI-X vectors of a device a guest may program */

/* An emulated guest's MSI-X table entry, as the guest wrote it (the device's own entry is
 * the VM's: the guest's vector on the host vector that delivers it, once the device is held). */
struct vm_msix {
    bool set;
    uint64_t addr;
    uint32_t data;
};

/* Guest RAM a program in an emulated guest took (vm_guest_req.c). */
struct vm_ram {
    struct vm_ram *next;
    uint64_t gpa, size;
    pid_t pid;
};
/* A QEMU q35 guest's RAM up to this size is all below 4 GiB, at guest-physical address =
 * offset in its RAM file; a passed-through device relies on that. */
#define VM_PASS_MAX_MEM (2816ull << 20)

struct vm_dev {
    bool used;
    char name[32];
    uint32_t fn;
    struct vblk *blk;          /* a QEMU guest's virtio-blk over this NVMe */
    sio_dev_t *sio;            /* an emulated guest's device, borrowed for it */
    sio_dma_t *ram_map;        /* the guest's RAM mapped for the device */
    uint16_t cmd;              /* an emulated guest's command register, as the guest set it */
    bool iova_gpa;             /* the guest's RAM mapped at I/O address = guest-physical */
    bool msi_mapped;           /* the host's MSI region mapped at the guest's doorbell */
    struct vm_msix msix[VM_MSIX];
    sio_dma_t *peer[FAB_VM_DEVS][FAB_BARS]; /* device j's BAR b mapped for this one */
    uint64_t peer_io[FAB_VM_DEVS][FAB_BARS];
    char sock[200];            /* vhost-user socket QEMU connects to */
    int listen_fd;
    _Atomic int conn_fd;       /* QEMU's connection, -1: none */
    pthread_t thread;
    bool thread_up;
    _Atomic bool stop;
    struct vhu session;
    /* Passed through to a QEMU guest (vm_proxy.c): QEMU's x-pci-proxy-dev forwards the guest's
     * config and BAR accesses over a socket pair; the guest's own driver drives the device. */
    bool pass;
    int qemu_fd;               /* QEMU's end of the socket pair, until QEMU has it */
    uint32_t bar_reg[6];       /* the guest's BAR registers (32-bit memory BARs) */
    uint8_t int_line;          /* the guest's interrupt line register */
    sio_bar_t *bar[6];         /* the function's BARs, mapped while the VM holds it */
    volatile uint8_t *bar_ptr[6];
    int intx_fd, resample_fd;  /* QEMU's INTx eventfds (KVM irqfd), -1: none */
    pthread_t irq_thread;
    bool irq_up;
    _Atomic bool irq_stop;
    pthread_mutex_t plock;     /* the proxy thread's accesses against hold, unhold and reset */
    struct mpq_device proxy_ops;
    struct mpq mpq;
};

struct vm {
    struct fab *f;             /* this process's own view of the fabric (the VM's slot) */
    uint32_t slot, host;
    struct fab_vm *rec;
    int guest;                 /* VM_GUEST_* */
    bool pass;                 /* a QEMU guest's devices are passed through (--pass-through) */
    bool kvm;                  /* QEMU runs the guest under KVM */
    uint64_t mem;
    char name[FAB_VM_NAME];
    char ram_path[200];
    dev_t ram_dev;
    ino_t ram_ino;
    int agent_fd;              /* the host's agent: the RAM hold is ours while it is open */
    pid_t qemu;
    char qmp[200];             /* QEMU's monitor socket (hot-add, hot-remove) */
    struct vm_dev dev[FAB_VM_DEVS];
    struct vm_ram *ram;        /* guest RAM programs in the guest took, by address */
    pthread_mutex_t lock;
};

/* Write a message for the user into err and return rc. */
int vm_say(char *err, size_t len, int rc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* vm_dev.c: give a device to the guest / take it back. errbuf gets a message that says what to
 * do. Attach returns the device's index in vm->dev. */
int vm_dev_attach(struct vm *vm, const char *name, char *errbuf, size_t len);
int vm_dev_detach(struct vm *vm, const char *name, char *errbuf, size_t len);
/* An emulated guest's mediated view of device i's configuration space (vm_cfg.c): a read of
 * len (1, 2, 4) bytes at off, or a write; enabling Bus Master takes the device from its lender
 * for the guest (borrowed, the guest's RAM mapped), a reset gives it back. 0 or -errno. */
int vm_cfg_read(struct vm *vm, int i, uint32_t off, uint32_t len, uint32_t *val);
int vm_cfg_write(struct vm *vm, int i, uint32_t off, uint32_t len, uint32_t val, char *err,
                 size_t elen);
int vm_dev_reset(struct vm *vm, int i, char *err, size_t len);
/* vm_dev.c: take device i from its lender for the guest, and give it back. */
int vm_dev_hold(struct vm *vm, int i, char *err, size_t len);
void vm_dev_unhold(struct vm *vm, int i);
/* vm_guest_req.c: what a program in an emulated guest asks of its VM on the control socket
 * (c, the connection; the caller holds vm->lock): "ram SIZE", "unram GPA", "msix DEV VEC ADDR
 * DATA", "peer DEV PEER BAR". Returns 1 with the answer's text in ans (after "ok"), -errno
 * with a message in err, or 0 when req is none of these. */
int vm_guest_request(struct vm *vm, int c, const char *req, char *ans, size_t alen, char *err,
                     size_t elen);
/* The held device i's MSI-X entries, as the guest programmed them, routed (at hold). And
 * what a device leaving the guest undoes: its peer mappings both ways. */
int vm_guest_route_all(struct vm *vm, int i, char *err, size_t len);
void vm_guest_drop_peers(struct vm *vm, int i);
/* An emulated guest's devices whose lender died: gone from the guest (a surprise removal). */
void vm_dev_check_lenders(struct vm *vm);
/* The device of that name in the VM, or -1. */
int vm_dev_find(const struct vm *vm, const char *name);
/* vm_proxy.c: device i passed through to a QEMU guest: the socket pair and the thread that
 * serves QEMU's proxy on it; its BARs mapped and its MSI-X routed into the guest's INTx while
 * held, and taken down again. */
int vm_proxy_start(struct vm *vm, int i, char *err, size_t len);
void vm_proxy_stop(struct vm *vm, int i);
int vm_proxy_hold(struct vm *vm, int i, char *err, size_t len);
void vm_proxy_unhold(struct vm *vm, int i);
/* QEMU command-line arguments for device i (a vhost-user-blk-pci on its socket, or the
 * pass-through proxy on its fd). */
int vm_dev_qemu_args(const struct vm *vm, int i, char *chardev, char *device, size_t len);

/* vm_qemu.c: QEMU for a VM_GUEST_QEMU guest. */
struct vm_qemu_opts {
    const char *image;         /* directory with vmlinuz and the initramfs */
    const char *initrd;        /* file name in it */
    const char *run;           /* a script the guest runs (fw_cfg), or NULL: a shell */
    const char *console_log;
    const char *console_sock;
    const char *accel;         /* "kvm", "tcg" or NULL: $NTBLEND_VM_ACCEL, else tcg */
    unsigned cpus;
};
int vm_qemu_start(struct vm *vm, const struct vm_qemu_opts *o, char *errbuf, size_t len);
/* Does QEMU run the guest under KVM (--accel, else $NTBLEND_VM_ACCEL, else TCG)? */
bool vm_qemu_kvm(const char *accel);
/* QMP: hot-add device i into the running guest, or hot-remove it. 0 or -errno. */
int vm_qemu_hotadd(struct vm *vm, int i, char *errbuf, size_t len);
int vm_qemu_hotremove(struct vm *vm, int i, char *errbuf, size_t len);

#endif
