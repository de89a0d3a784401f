/*
 * A fabric's shared memory as processes use it (create.c, shm.c): creating, attaching and
 * detaching, names and lookups, the files mapped on demand (RAM, BARs), and the process table
 * whose members acknowledge map-generation changes: changes that alter what a CPU mapping
 * resolves to (LUT entries, IOMMU mappings, link state) bump ctl->map_gen; every attached
 * process has a watcher thread that re-resolves its window mappings and acknowledges, and the
 * change returns only after all live processes acknowledged, so "after link down returns, no
 * store crosses" holds.
 */
#ifndef NTBLEND_FAB_SHM_H
#define NTBLEND_FAB_SHM_H

#include <stdio.h>

#include "fab_state.h"

/* ---- lifecycle ---- */

/* Directory of a fabric: /dev/shm/ntblend.NAME (NTBLEND_SHM_DIR overrides /dev/shm). */
int fab_dir(const char *name, char *out, size_t len);
/* Fabric name from --fabric, else $NTBLEND_FABRIC, else "default" (fab_dir validates it). */
const char *fab_name_resolve(const char *arg);

/* How a topology's devices become PCIe functions (the device registry's devreg_layout): fills
 * out (or with out == NULL counts) and returns the count, or -EINVAL with a message. */
typedef int (*fab_layout_fn)(const struct topo *t, struct fab_function *out, size_t max,
                             FILE *err);
/* Create a fabric from a validated topology, its devices laid out by `layout` (NULL: none).
 * -EEXIST when it already exists. */
int fab_create(const char *name, const struct topo *t, fab_layout_fn layout, struct fab **out);
/* Attach to a running fabric as a process on host `host` (-1 for an administrator). */
int fab_attach(const char *name, int host, struct fab **out);
void fab_detach(struct fab *f);
/* Remove the fabric's shared memory (after the agents are gone). */
int fab_destroy_files(const char *name);

/* ---- lookups and files ---- */
int fab_host_by_name(const struct fab *f, const char *name); /* name or node id; -1 if none */
int fab_adapter_by_name(const struct fab *f, const char *name); /* "HOST.ADAPTER"; -1 if none */
/* Per-process lazily opened / mapped fabric files (RAM, BARs). */
int fab_lazy_fd(struct fab *f, int *slot, const char *name);
void *fab_lazy_map(_Atomic(char *) *slot, int fd, uint64_t size, uint64_t off, uint64_t len);
/* The RAM file of a host (for mmap), opened on first use; -errno. */
int fab_ram_fd(struct fab *f, uint32_t host);
int fab_switch_by_name(const struct fab *f, const char *name); /* -1 if none */
/* Pointer to host h's RAM at phys (mapping it on first use); NULL + errno. phys may also be
 * in the RAM region of a VM on that host (FAB_VM_BASE...). */
void *fab_ram(struct fab *f, uint32_t host, uint64_t phys, uint64_t len);
/* The file behind RAM (or a VM's RAM) at phys on host, for mmap, and the offset in it. */
int fab_phys_fd(struct fab *f, uint32_t host, uint64_t phys, uint64_t *off);
/* A VM slot's guest RAM: the file's path, a pointer (mapped on first use, kept current when
 * the slot is reused), and its descriptor. */
void fab_vm_ram_name(const struct fab *f, uint32_t slot, uint32_t gen, char *out, size_t n);
void *fab_vm_ram(struct fab *f, uint32_t slot, uint64_t off, uint64_t len);
int fab_vm_ram_fd(struct fab *f, uint32_t slot);

/* ---- map generation: every mapping holder acknowledges changes ---- */
int fab_proc_register(struct fab *f, uint32_t host);   /* slot, or -ENOSPC */
void fab_proc_unregister(struct fab *f);
/* Bump map_gen and wake watchers; then wait (bounded) until every live process acked. */
void fab_map_changed(struct fab *f);

#endif
