/*
 * Fabric shared memory, once created: attaching to a fabric and detaching, names and lookups,
 * the files mapped on demand (RAM, BARs), and the process table whose members acknowledge
 * map-generation changes.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#include "fabric.h"

#define ACK_TIMEOUT_NS (3ull * 1000000000ull)

/* ---------------------------------------------------------------- names */

const char *fab_name_resolve(const char *arg)
{
    const char *n = arg ? arg : getenv("NTBLEND_FABRIC");
    if (!n || !*n)
        n = "default";
    return n;
}

static int name_valid(const char *name)
{
    size_t len = strlen(name);
    if (len == 0 || len >= FAB_NAME_MAX)
        return 0;
    for (const char *p = name; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.')
            return 0;
    return name[0] != '.';
}

int fab_dir(const char *name, char *out, size_t len)
{
    if (!name_valid(name))
        return -EINVAL;
    const char *base = getenv("NTBLEND_SHM_DIR");
    if (!base || !*base)
        base = "/dev/shm";
    int n = snprintf(out, len, "%s/ntblend.%s", base, name);
    return (n < 0 || (size_t)n >= len) ? -ENAMETOOLONG : 0;
}

int fab_host_by_name(const struct fab *f, const char *name)
{
    for (uint32_t i = 0; i < f->ctl->nhosts; i++)
        if (strcmp(fab_host(f, i)->name, name) == 0)
            return (int)i;
    char *end;
    errno = 0;
    unsigned long id = strtoul(name, &end, 10);
    if (*name && !*end && !errno)
        for (uint32_t i = 0; i < f->ctl->nhosts; i++)
            if (fab_host(f, i)->node_id == id)
                return (int)i;
    return -1;
}

int fab_adapter_by_name(const struct fab *f, const char *name)
{
    for (uint32_t i = 0; i < f->ctl->nadapters; i++)
        if (strcmp(fab_adapter(f, i)->name, name) == 0)
            return (int)i;
    return -1;
}

int fab_switch_by_name(const struct fab *f, const char *name)
{
    for (uint32_t i = 0; i < f->ctl->nswitches; i++)
        if (strcmp(fab_switch(f, i)->name, name) == 0)
            return (int)i;
    return -1;
}

/* ---------------------------------------------------------------- attach */

int fab_attach(const char *name, int host, struct fab **out)
{
    char dir[128], path[192];
    int rc = fab_dir(name, dir, sizeof dir);
    if (rc)
        return rc;
    snprintf(path, sizeof path, "%s/ctl", dir);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct fab_ctl hdr;
    if (pread(fd, &hdr, sizeof hdr, 0) != (ssize_t)sizeof hdr || hdr.magic != FAB_MAGIC ||
        hdr.version != FAB_VERSION) {
        close(fd);
        return -EPROTO;
    }
    struct fab_ctl *ctl = mmap(NULL, hdr.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (ctl == MAP_FAILED)
        return -errno;
    if (host >= (int)ctl->nhosts) {
        munmap(ctl, hdr.size);
        return -ENOENT;
    }
    struct fab *f = calloc(1, sizeof *f);
    if (!f) {
        munmap(ctl, hdr.size);
        return -ENOMEM;
    }
    f->ctl = ctl;
    f->ctl_size = hdr.size;
    f->self_host = host;
    f->proc_slot = -1;
    static _Atomic uint64_t opens;
    f->open_id = atomic_fetch_add(&opens, 1) + 1; /* never 0 */
    snprintf(f->dir, sizeof f->dir, "%s", dir);
    f->ram = calloc(ctl->nhosts, sizeof *f->ram);
    f->ram_fd = malloc(ctl->nhosts * sizeof *f->ram_fd);
    f->bars = calloc(ctl->nfuncs ? ctl->nfuncs : 1, sizeof *f->bars);
    f->bar_fd = malloc((ctl->nfuncs ? ctl->nfuncs : 1) * sizeof *f->bar_fd);
    snprintf(path, sizeof path, "%s/ones", dir);
    f->ones_fd = open(path, O_RDONLY | O_CLOEXEC);
    f->ones_size = FAB_ONES_SIZE;
    if (!f->ram || !f->ram_fd || !f->bars || !f->bar_fd || f->ones_fd < 0) {
        rc = f->ones_fd < 0 ? -errno : -ENOMEM;
        f->ones_fd = f->ones_fd < 0 ? -1 : f->ones_fd;
        fab_detach(f);
        return rc;
    }
    for (uint32_t i = 0; i < ctl->nhosts; i++)
        f->ram_fd[i] = -1;
    for (uint32_t i = 0; i < ctl->nfuncs; i++)
        f->bar_fd[i] = -1;
    *out = f;
    return 0;
}

static void vm_maps_free(struct fab *f);

void fab_detach(struct fab *f)
{
    if (!f)
        return;
    fab_proc_unregister(f);
    if (f->ram)
        for (uint32_t i = 0; i < f->ctl->nhosts; i++)
            if (f->ram[i])
                munmap(f->ram[i], fab_host(f, i)->ram_size);
    if (f->ram_fd)
        for (uint32_t i = 0; i < f->ctl->nhosts; i++)
            if (f->ram_fd[i] >= 0)
                close(f->ram_fd[i]);
    if (f->bars)
        for (uint32_t i = 0; i < f->ctl->nfuncs; i++)
            if (f->bars[i])
                munmap(f->bars[i], fab_func(f, i)->file_size);
    if (f->bar_fd)
        for (uint32_t i = 0; i < f->ctl->nfuncs; i++)
            if (f->bar_fd[i] >= 0)
                close(f->bar_fd[i]);
    if (f->ones_fd >= 0)
        close(f->ones_fd);
    vm_maps_free(f);
    free(f->bars);
    free(f->bar_fd);
    free(f->ram);
    free(f->ram_fd);
    munmap(f->ctl, f->ctl_size);
    free(f);
}

/* Open f->dir/name once per process; concurrent callers agree on one descriptor. */
int fab_lazy_fd(struct fab *f, int *slot, const char *name)
{
    int fd = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (fd >= 0)
        return fd;
    char path[192];
    snprintf(path, sizeof path, "%s/%s", f->dir, name);
    fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int expected = -1;
    if (!__atomic_compare_exchange_n(slot, &expected, fd, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        close(fd);
        return expected;
    }
    return fd;
}

/* Map a whole file once per process (MAP_SHARED) and return base + off; NULL + errno. */
void *fab_lazy_map(_Atomic(char *) *slot, int fd, uint64_t size, uint64_t off, uint64_t len)
{
    if (off > size || len > size - off) {
        errno = ERANGE;
        return NULL;
    }
    char *base = atomic_load(slot);
    if (!base) {
        if (fd < 0) {
            errno = -fd;
            return NULL;
        }
        char *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED)
            return NULL;
        char *expected = NULL;
        if (!atomic_compare_exchange_strong(slot, &expected, m)) {
            munmap(m, size);
            m = expected;
        }
        base = m;
    }
    return base + off;
}

int fab_ram_fd(struct fab *f, uint32_t host)
{
    if (host >= f->ctl->nhosts)
        return -EINVAL;
    char name[32];
    snprintf(name, sizeof name, "host%u.ram", host);
    return fab_lazy_fd(f, &f->ram_fd[host], name);
}

void *fab_ram(struct fab *f, uint32_t host, uint64_t phys, uint64_t len)
{
    if (host >= f->ctl->nhosts) {
        errno = EINVAL;
        return NULL;
    }
    /* Fast path first: the descriptor is only needed to map the file the first time. */
    if (atomic_load(&f->ram[host]) && phys <= fab_host(f, host)->ram_size &&
        len <= fab_host(f, host)->ram_size - phys)
        return atomic_load(&f->ram[host]) + phys;
    uint64_t off;
    const struct fab_vm *v = fab_vm_at(f, host, phys, &off);
    if (v)
        return len <= v->mem - off ? fab_vm_ram(f, (uint32_t)(v - f->ctl->vms), off, len)
                                   : (errno = ERANGE, NULL);
    return fab_lazy_map(&f->ram[host], fab_ram_fd(f, host), fab_host(f, host)->ram_size, phys, len);
}

int fab_phys_fd(struct fab *f, uint32_t host, uint64_t phys, uint64_t *off)
{
    const struct fab_vm *v = fab_vm_at(f, host, phys, off);
    if (v)
        return fab_vm_ram_fd(f, (uint32_t)(v - f->ctl->vms));
    *off = phys;
    return fab_ram_fd(f, host);
}

/* ---------------------------------------------------------------- guest RAM */

/* Each slot's RAM is mapped at one place of this process for as long as it lives: a range of
 * FAB_VM_STRIDE reserved on first use, the slot's current file mapped over its start. When the
 * slot is reused (a new generation), the new file is mapped over the old with MAP_FIXED, so a
 * thread still holding a pointer into it never touches an unmapped page. */
struct fab_vm_maps {
    _Atomic uint32_t lock;
    struct vm_map {
        char *base;
        _Atomic uint32_t gen; /* of the file mapped, 0: none yet */
        uint64_t len;
        int fd;
    } slot[FAB_MAX_VMS];
};

void fab_vm_ram_name(const struct fab *f, uint32_t slot, uint32_t gen, char *out, size_t n)
{
    snprintf(out, n, "%s/vm%u-%u.ram", f->dir, slot, gen);
}

static struct fab_vm_maps *vm_maps(struct fab *f)
{
    struct fab_vm_maps *m = __atomic_load_n(&f->vm_maps, __ATOMIC_ACQUIRE);
    if (m)
        return m;
    struct fab_vm_maps *n = calloc(1, sizeof *n);
    if (!n)
        return NULL;
    for (int i = 0; i < FAB_MAX_VMS; i++)
        n->slot[i].fd = -1;
    if (!__atomic_compare_exchange_n(&f->vm_maps, &m, n, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        free(n);
        return m;
    }
    return n;
}

/* Bring this process's mapping of slot's RAM to the slot's current file. Lock held. */
static int vm_remap(struct fab *f, struct vm_map *s, uint32_t slot)
{
    const struct fab_vm *v = fab_vm(f, slot);
    uint32_t gen = v->gen;
    uint64_t mem = v->mem;
    if (atomic_load(&s->gen) == gen && s->base)
        return 0;
    if (!s->base) {
        void *r = mmap(NULL, FAB_VM_STRIDE, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (r == MAP_FAILED)
            return -errno;
        s->base = r;
    }
    char path[192];
    fab_vm_ram_name(f, slot, gen, path, sizeof path);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (mmap(s->base, mem, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) {
        int rc = -errno;
        close(fd);
        return rc;
    }
    if (s->len > mem)
        mmap(s->base + mem, s->len - mem, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    if (s->fd >= 0)
        close(s->fd);
    s->fd = fd;
    s->len = mem;
    atomic_store(&s->gen, gen);
    return 0;
}

static struct vm_map *vm_slot_current(struct fab *f, uint32_t slot)
{
    struct fab_vm_maps *m = slot < FAB_MAX_VMS ? vm_maps(f) : NULL;
    if (!m) {
        errno = slot < FAB_MAX_VMS ? ENOMEM : EINVAL;
        return NULL;
    }
    struct vm_map *s = &m->slot[slot];
    if (atomic_load_explicit(&s->gen, memory_order_acquire) == fab_vm(f, slot)->gen)
        return s;
    fab_lock(&m->lock);
    int rc = vm_remap(f, s, slot);
    fab_unlock(&m->lock);
    if (rc) {
        errno = -rc;
        return NULL;
    }
    return s;
}

void *fab_vm_ram(struct fab *f, uint32_t slot, uint64_t off, uint64_t len)
{
    struct vm_map *s = vm_slot_current(f, slot);
    if (!s)
        return NULL;
    if (off > s->len || len > s->len - off) {
        errno = ERANGE;
        return NULL;
    }
    return s->base + off;
}

int fab_vm_ram_fd(struct fab *f, uint32_t slot)
{
    struct vm_map *s = vm_slot_current(f, slot);
    return s ? s->fd : -errno;
}

static void vm_maps_free(struct fab *f)
{
    struct fab_vm_maps *m = f->vm_maps;
    if (!m)
        return;
    for (int i = 0; i < FAB_MAX_VMS; i++) {
        if (m->slot[i].base)
            munmap(m->slot[i].base, FAB_VM_STRIDE);
        if (m->slot[i].fd >= 0)
            close(m->slot[i].fd);
    }
    free(m);
    f->vm_maps = NULL;
}

/* ---------------------------------------------------------------- process table */

int fab_proc_register(struct fab *f, uint32_t host)
{
    int32_t me = getpid();
    for (int i = 0; i < FAB_MAX_PROCS; i++) {
        struct fab_proc *p = &f->ctl->procs[i];
        int32_t cur = atomic_load(&p->pid);
        if (cur != 0 && fab_pid_alive(cur))
            continue;
        if (atomic_compare_exchange_strong(&p->pid, &cur, me)) {
            p->host = host;
            atomic_store(&p->acked_gen, atomic_load(&f->ctl->map_gen));
            f->proc_slot = i;
            return i;
        }
    }
    return -ENOSPC;
}

void fab_proc_unregister(struct fab *f)
{
    if (f->proc_slot < 0)
        return;
    struct fab_proc *p = &f->ctl->procs[f->proc_slot];
    atomic_store(&p->pid, 0);
    fab_futex_wake(&p->acked_gen, INT_MAX);
    f->proc_slot = -1;
}

void fab_map_changed(struct fab *f)
{
    uint32_t gen = atomic_fetch_add(&f->ctl->map_gen, 1) + 1;
    fab_futex_wake(&f->ctl->map_gen, INT_MAX);
    uint64_t deadline = fab_now_ns() + ACK_TIMEOUT_NS;
    for (int i = 0; i < FAB_MAX_PROCS; i++) {
        struct fab_proc *p = &f->ctl->procs[i];
        for (;;) {
            int32_t pid = atomic_load(&p->pid);
            if (pid == 0)
                break;
            uint32_t acked = atomic_load(&p->acked_gen);
            if ((int32_t)(acked - gen) >= 0)
                break;
            if (!fab_pid_alive(pid)) {
                atomic_compare_exchange_strong(&p->pid, &pid, 0);
                break;
            }
            uint64_t now = fab_now_ns();
            if (now >= deadline) {
                fprintf(stderr, "ntblend: process %d did not acknowledge a mapping change; "
                        "its windows may be stale\n", pid);
                break;
            }
            uint64_t left = deadline - now;
            fab_futex_wait(&p->acked_gen, acked, left < 10000000 ? (int64_t)left : 10000000);
        }
    }
}
