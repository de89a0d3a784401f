/*
 * Fabric shared memory: creating a fabric from a topology, attaching to it, the lookups, and
 * the synchronisation every layer uses (futexes, owner-pid locks, the process table whose
 * members acknowledge map-generation changes).
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

/* ---------------------------------------------------------------- time and futexes */

uint64_t fab_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int fab_futex_wait(_Atomic uint32_t *addr, uint32_t expected, int64_t timeout_ns)
{
    struct timespec ts, *tp = NULL;
    if (timeout_ns >= 0) {
        ts.tv_sec = timeout_ns / 1000000000ll;
        ts.tv_nsec = timeout_ns % 1000000000ll;
        tp = &ts;
    }
    /* Shared (not PRIVATE) futexes: waiters and wakers are different processes. */
    long r = syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT, expected, tp, NULL, 0);
    if (r == 0 || errno == EAGAIN)
        return 0;
    return -errno;
}

void fab_futex_wake(_Atomic uint32_t *addr, int n)
{
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE, n, NULL, NULL, 0);
}

/* A zombie (dead, not yet reaped by its parent) counts as dead: it will never acknowledge. */
static bool pid_alive(int32_t pid)
{
    if (pid <= 0 || (kill(pid, 0) < 0 && errno == ESRCH))
        return false;
    char path[32], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return true; /* no procfs: trust kill() */
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = 0;
    const char *paren = strrchr(buf, ')'); /* the command name may hold spaces and parens */
    return !(paren && (paren[2] == 'Z' || paren[2] == 'X'));
}

void fab_lock(_Atomic uint32_t *l)
{
    uint32_t me = (uint32_t)getpid();
    for (;;) {
        uint32_t cur = 0;
        if (atomic_compare_exchange_strong(l, &cur, me))
            return;
        /* A lock held by a dead process (a crashed host) is taken over. */
        if (cur != me && !pid_alive((int32_t)cur)) {
            if (atomic_compare_exchange_strong(l, &cur, me))
                return;
            continue;
        }
        fab_futex_wait(l, cur, 1000000); /* 1 ms: also re-checks the holder's liveness */
    }
}

void fab_unlock(_Atomic uint32_t *l)
{
    atomic_store(l, 0);
    fab_futex_wake(l, 1);
}

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

struct fab_iommu_map *fab_iommu_table(const struct fab *f, uint32_t host)
{
    return (struct fab_iommu_map *)((char *)f->ctl + f->ctl->off_iommu) +
           (size_t)host * FAB_IOMMU_MAPS;
}

struct fab_fault *fab_fault_ring(const struct fab *f, uint32_t host)
{
    char *after_maps = (char *)f->ctl + f->ctl->off_iommu +
                       (size_t)f->ctl->nhosts * FAB_IOMMU_MAPS * sizeof(struct fab_iommu_map);
    return (struct fab_fault *)after_maps + (size_t)host * FAB_FAULT_RING;
}

/* ---------------------------------------------------------------- creation */

static size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

static int write_ones_file(const char *dir, uint64_t size)
{
    char path[192];
    snprintf(path, sizeof path, "%s/ones", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    static char buf[65536];
    memset(buf, 0xff, sizeof buf);
    for (uint64_t off = 0; off < size; off += sizeof buf)
        if (pwrite(fd, buf, sizeof buf, (off_t)off) != (ssize_t)sizeof buf) {
            int e = -errno;
            close(fd);
            return e;
        }
    close(fd);
    return 0;
}

#define ONES_SIZE (1ull << 20)

int fab_create(const char *name, const struct topo *t, struct fab **out)
{
    char dir[128];
    int rc = fab_dir(name, dir, sizeof dir);
    if (rc)
        return rc;
    if (mkdir(dir, 0700) < 0)
        return -errno; /* EEXIST: the fabric is up (or left behind by a crash) */

    /* Layout: ctl | hosts | adapters | switches | links | per adapter LUT, RID, DMA | IOMMU. */
    size_t off = align_up(sizeof(struct fab_ctl), 64);
    size_t off_hosts = off;
    off = align_up(off + t->nhosts * sizeof(struct fab_host), 64);
    size_t off_adapters = off;
    off = align_up(off + t->nadapters * sizeof(struct fab_adapter), 64);
    size_t off_switches = off;
    off = align_up(off + t->nswitches * sizeof(struct fab_switch), 64);
    size_t off_links = off;
    off = align_up(off + t->nlinks * sizeof(struct fab_link), 64);
    int nfuncs = fab_devices_layout(t, NULL, FAB_MAX_FUNCS, stderr);
    if (nfuncs < 0) {
        rmdir(dir);
        return nfuncs;
    }
    size_t off_funcs = off;
    off = align_up(off + (size_t)nfuncs * sizeof(struct fab_function), 64);
    size_t *lut_off = calloc(t->nadapters ? t->nadapters : 1, 3 * sizeof(size_t));
    if (!lut_off) {
        rmdir(dir);
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < t->nadapters; i++) {
        const struct topo_adapter *ta = &t->adapters[i];
        lut_off[3 * i] = off;
        off = align_up(off + ta->lut_entries * sizeof(struct fab_lut_entry), 64);
        lut_off[3 * i + 1] = off;
        off = align_up(off + ta->rid_entries * sizeof(struct fab_rid_entry), 64);
        lut_off[3 * i + 2] = off;
        off = align_up(off + ta->dma_channels * sizeof(struct fab_dma_chan), 64);
    }
    size_t off_iommu = off;
    off += (size_t)t->nhosts * FAB_IOMMU_MAPS * sizeof(struct fab_iommu_map);
    off += (size_t)t->nhosts * FAB_FAULT_RING * sizeof(struct fab_fault);
    size_t size = align_up(off, 4096);

    char path[192];
    snprintf(path, sizeof path, "%s/ctl.tmp", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        rc = -errno;
        goto fail_dir;
    }
    if (ftruncate(fd, (off_t)size) < 0) {
        rc = -errno;
        close(fd);
        goto fail_files;
    }
    struct fab_ctl *ctl = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (ctl == MAP_FAILED) {
        rc = -errno;
        goto fail_files;
    }

    ctl->magic = FAB_MAGIC;
    ctl->version = FAB_VERSION;
    snprintf(ctl->name, sizeof ctl->name, "%s", name);
    snprintf(ctl->topo_path, sizeof ctl->topo_path, "%s", t->path);
    ctl->size = size;
    ctl->nhosts = t->nhosts;
    ctl->nadapters = t->nadapters;
    ctl->nswitches = t->nswitches;
    ctl->nlinks = t->nlinks;
    ctl->off_hosts = off_hosts;
    ctl->off_adapters = off_adapters;
    ctl->off_switches = off_switches;
    ctl->off_links = off_links;
    ctl->off_iommu = off_iommu;
    ctl->nfuncs = (uint32_t)nfuncs;
    ctl->off_funcs = off_funcs;
    ctl->latency = t->latency;

    struct fab tmp = { .ctl = ctl, .ctl_size = size, .self_host = -1, .proc_slot = -1 };
    for (uint32_t i = 0; i < t->nhosts; i++) {
        struct fab_host *h = fab_host(&tmp, i);
        snprintf(h->name, sizeof h->name, "%s", t->hosts[i].name);
        h->node_id = t->hosts[i].node_id;
        h->iommu = (uint32_t)t->hosts[i].iommu;
        h->ram_size = t->hosts[i].ram_size;
        h->adapter_first = UINT32_MAX;
    }
    for (uint32_t i = 0; i < t->nadapters; i++) {
        const struct topo_adapter *ta = &t->adapters[i];
        struct fab_adapter *a = fab_adapter(&tmp, i);
        snprintf(a->name, sizeof a->name, "%s", ta->name);
        a->host = ta->host;
        a->index_on_host = ta->index_on_host;
        a->bar_addr = FAB_ADAPTER_BASE + (uint64_t)ta->index_on_host * FAB_ADAPTER_STRIDE;
        a->lut_size = ta->lut_size;
        a->lut_entries = ta->lut_entries;
        a->rid_entries = ta->rid_entries;
        a->db_bits = ta->db_bits;
        a->spads = ta->spads;
        a->dma_channels = ta->dma_channels;
        a->rid = fab_adapter_rid(ta->index_on_host);
        a->off_lut = lut_off[3 * i];
        a->off_rid = lut_off[3 * i + 1];
        a->off_dma = lut_off[3 * i + 2];
        a->link_enabled = 1;
        a->link_seq = 1; /* so a first ntb_link_event_wait with *seen == 0 returns at once */
        struct fab_host *h = fab_host(&tmp, ta->host);
        if (h->adapter_first == UINT32_MAX)
            h->adapter_first = i;
        h->nadapters++;
    }
    free(lut_off);
    for (uint32_t i = 0; i < t->nhosts; i++)
        if (fab_host(&tmp, i)->adapter_first == UINT32_MAX)
            fab_host(&tmp, i)->adapter_first = 0;
    if (nfuncs > 0 && fab_devices_layout(t, fab_func(&tmp, 0), (size_t)nfuncs, stderr) != nfuncs) {
        munmap(ctl, size);
        rc = -EINVAL;
        goto fail_files;
    }
    uint64_t *bar_sizes = calloc((size_t)nfuncs + 1, sizeof *bar_sizes);
    if (!bar_sizes) {
        munmap(ctl, size);
        rc = -ENOMEM;
        goto fail_files;
    }
    for (uint32_t i = 0; i < (uint32_t)nfuncs; i++) {
        struct fab_host *h = fab_host(&tmp, fab_func(&tmp, i)->host);
        if (h->nfuncs++ == 0)
            h->func_first = i;
        bar_sizes[i] = fab_func(&tmp, i)->file_size;
    }
    for (uint32_t i = 0; i < t->nswitches; i++) {
        struct fab_switch *s = fab_switch(&tmp, i);
        snprintf(s->name, sizeof s->name, "%s", t->switches[i].name);
        s->ports = t->switches[i].ports;
        s->latency_ns = t->switches[i].latency_ns;
    }
    for (uint32_t i = 0; i < t->nlinks; i++) {
        struct fab_link *l = fab_link(&tmp, i);
        l->a = t->links[i].a;
        l->b = t->links[i].b;
        l->up = 1;
    }
    rc = route_build(&tmp);
    if (rc == 0)
        for (uint32_t i = 0; i < t->nadapters; i++)
            fab_adapter_reset(&tmp, i);
    munmap(ctl, size);
    if (rc) {
        free(bar_sizes);
        goto fail_files;
    }

    /* RAM files: sparse, so a 60-host fabric costs only what is touched. */
    for (uint32_t i = 0; i < t->nhosts; i++) {
        snprintf(path, sizeof path, "%s/host%u.ram", dir, i);
        int rfd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (rfd < 0 || ftruncate(rfd, (off_t)t->hosts[i].ram_size) < 0) {
            rc = -errno;
            if (rfd >= 0)
                close(rfd);
            free(bar_sizes);
            goto fail_files;
        }
        close(rfd);
    }
    /* BAR files: what each function's BARs hold (sparse too). */
    for (uint32_t i = 0; i < (uint32_t)nfuncs; i++) {
        snprintf(path, sizeof path, "%s/fn%u.bars", dir, i);
        int bfd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (bfd < 0 || ftruncate(bfd, (off_t)bar_sizes[i]) < 0) {
            rc = -errno;
            if (bfd >= 0)
                close(bfd);
            free(bar_sizes);
            goto fail_files;
        }
        close(bfd);
    }
    free(bar_sizes);
    rc = write_ones_file(dir, ONES_SIZE);
    if (rc)
        goto fail_files;

    /* Publish atomically: attachers never see a half-initialised ctl. */
    char final[192];
    snprintf(path, sizeof path, "%s/ctl.tmp", dir);
    snprintf(final, sizeof final, "%s/ctl", dir);
    if (rename(path, final) < 0) {
        rc = -errno;
        goto fail_files;
    }
    if (!out)
        return 0;
    return fab_attach(name, -1, out);

fail_files:
    fab_destroy_files(name);
    return rc;
fail_dir:
    rmdir(dir);
    return rc;
}

int fab_destroy_files(const char *name)
{
    char dir[128];
    int rc = fab_dir(name, dir, sizeof dir);
    if (rc)
        return rc;
    DIR *d = opendir(dir);
    if (!d)
        return -errno;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
    return rmdir(dir) < 0 ? -errno : 0;
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
    snprintf(f->dir, sizeof f->dir, "%s", dir);
    f->ram = calloc(ctl->nhosts, sizeof *f->ram);
    f->ram_fd = malloc(ctl->nhosts * sizeof *f->ram_fd);
    f->bars = calloc(ctl->nfuncs ? ctl->nfuncs : 1, sizeof *f->bars);
    f->bar_fd = malloc((ctl->nfuncs ? ctl->nfuncs : 1) * sizeof *f->bar_fd);
    snprintf(path, sizeof path, "%s/ones", dir);
    f->ones_fd = open(path, O_RDONLY | O_CLOEXEC);
    f->ones_size = ONES_SIZE;
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
    return fab_lazy_map(&f->ram[host], fab_ram_fd(f, host), fab_host(f, host)->ram_size, phys, len);
}

/* ---------------------------------------------------------------- process table */

int fab_proc_register(struct fab *f, uint32_t host)
{
    int32_t me = getpid();
    for (int i = 0; i < FAB_MAX_PROCS; i++) {
        struct fab_proc *p = &f->ctl->procs[i];
        int32_t cur = atomic_load(&p->pid);
        if (cur != 0 && pid_alive(cur))
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
            if (!pid_alive(pid)) {
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
