/*
 * Virtual machines' slots in the fabric (floor 2: calls shm and sync). A VM's process (the
 * VM's "hardware": ntblend-vm on its host) claims a slot; the slot number places the guest's
 * RAM in the host's physical map (FAB_VM_BASE + slot * FAB_VM_STRIDE), backed by a file of its
 * own that QEMU maps as the guest's memory. A slot whose process died is returned by whoever
 * notices first: the host's agent when its client hangs up, the CLI when it lists VMs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fab_shm.h"
#include "fab_sync.h"
#include "fab_vm.h"

bool fab_vm_live(const struct fab *f, uint32_t slot)
{
    const struct fab_vm *v = fab_vm(f, slot);
    return atomic_load(&v->state) != FAB_VM_FREE && fab_pid_alive(atomic_load(&v->pid));
}

int fab_vm_find(const struct fab *f, const char *name)
{
    for (uint32_t i = 0; i < FAB_MAX_VMS; i++)
        if (fab_vm_live(f, i) && !strncmp(fab_vm(f, i)->name, name, FAB_VM_NAME))
            return (int)i;
    return -ENOENT;
}

bool fab_host_ram_range(const struct fab *f, uint32_t host, uint64_t addr, uint64_t size)
{
    uint64_t ram = fab_host(f, host)->ram_size, off;
    if (addr <= ram && size <= ram - addr)
        return true;
    const struct fab_vm *v = fab_vm_at(f, host, addr, &off);
    return v && size <= v->mem - off;
}

void fab_vm_changed(struct fab_vm *v)
{
    atomic_fetch_add(&v->seq, 1);
    fab_futex_wake(&v->seq, 1 << 20);
}

int fab_vm_claim(struct fab *f, const char *name, uint32_t host, uint64_t mem)
{
    if (!name || !*name || strlen(name) >= FAB_VM_NAME || host >= f->ctl->nhosts || !mem ||
        mem % (2u << 20) || mem > FAB_VM_STRIDE)
        return -EINVAL;
    fab_vm_reap(f, 0);
    int rc = -ENOSPC;
    fab_lock(&f->ctl->ctl_lock); /* one claim at a time: names stay unique */
    if (fab_vm_find(f, name) >= 0) {
        rc = -EEXIST;
        goto out;
    }
    for (uint32_t i = 0; i < FAB_MAX_VMS; i++) {
        struct fab_vm *v = fab_vm(f, i);
        if (atomic_load(&v->state) != FAB_VM_FREE)
            continue;
        memset(v->dev, 0, sizeof v->dev);
        snprintf(v->name, sizeof v->name, "%s", name);
        v->guest[0] = 0;
        v->host = host;
        v->mem = mem;
        v->hold = 0;
        v->qemu_pid = 0;
        v->gen = atomic_fetch_add(&f->ctl->vm_gen, 1) + 1;
        char path[192];
        fab_vm_ram_name(f, i, v->gen, path, sizeof path);
        int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 || ftruncate(fd, (off_t)mem)) { /* sparse, like a host's RAM */
            rc = -errno;
            if (fd >= 0) {
                close(fd);
                unlink(path);
            }
            goto out;
        }
        close(fd);
        atomic_store(&v->pid, fab_self_pid());
        atomic_store(&v->state, FAB_VM_STARTING);
        fab_vm_changed(v);
        rc = (int)i;
        break;
    }
out:
    fab_unlock(&f->ctl->ctl_lock);
    return rc;
}

void fab_vm_release(struct fab *f, uint32_t slot)
{
    if (slot >= FAB_MAX_VMS)
        return;
    struct fab_vm *v = fab_vm(f, slot);
    if (atomic_load(&v->state) == FAB_VM_FREE)
        return;
    atomic_store(&v->state, FAB_VM_STOPPING);
    char path[192];
    fab_vm_ram_name(f, slot, v->gen, path, sizeof path);
    unlink(path);
    atomic_store(&v->pid, 0);
    atomic_store(&v->state, FAB_VM_FREE);
    fab_vm_changed(v);
    /* The region left the host's map: cached translations into it must go. */
    fab_map_changed(f);
}

int fab_vm_reap(struct fab *f, int32_t pid)
{
    int n = 0;
    for (uint32_t i = 0; i < FAB_MAX_VMS; i++) {
        struct fab_vm *v = fab_vm(f, i);
        int32_t p = atomic_load(&v->pid);
        if (atomic_load(&v->state) == FAB_VM_FREE || (p != pid && fab_pid_alive(p)))
            continue;
        /* One reaper wins; a slot claimed again meanwhile has another pid. */
        if (!p || !atomic_compare_exchange_strong(&v->pid, &p, 0))
            continue;
        fab_vm_release(f, i);
        n++;
    }
    return n;
}
