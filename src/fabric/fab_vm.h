/*
 * Virtual machines' records in the fabric (fab_vm.c): claiming a slot for a VM (its RAM region in
 * its host's map and the file behind it), finding one by name, and returning a slot whose
 * process is gone. The record's layout is struct fab_vm (fab_state.h); docs/vm.md.
 */
#ifndef NTBLEND_FAB_VM_H
#define NTBLEND_FAB_VM_H

#include "fab_state.h"

/* Claim a slot for VM `name` on host `host` with `mem` bytes of guest RAM (a multiple of
 * 2 MiB, at most FAB_VM_STRIDE) and create its RAM file; the caller's process owns it.
 * Return the slot; -EEXIST a live VM has that name; -ENOSPC every slot is taken; -EINVAL
 * bad size or name; -errno creating the file. */
int fab_vm_claim(struct fab *f, const char *name, uint32_t host, uint64_t mem);
/* Free the slot: its RAM region leaves the host's map, its file is removed. */
void fab_vm_release(struct fab *f, uint32_t slot);
/* Is the slot's VM there (claimed, and its process alive)? */
bool fab_vm_live(const struct fab *f, uint32_t slot);
/* The live VM of that name: its slot, or -ENOENT. */
int fab_vm_find(const struct fab *f, const char *name);
/* Free the slots of VMs whose process is dead (or is `pid`, which has gone); returns how many. */
int fab_vm_reap(struct fab *f, int32_t pid);
/* Is [addr, addr + size) RAM of host: its own, or one VM's guest RAM there? */
bool fab_host_ram_range(const struct fab *f, uint32_t host, uint64_t addr, uint64_t size);
/* Bump a record's change counter and wake whoever waits for changes of it. */
void fab_vm_changed(struct fab_vm *v);

#endif
