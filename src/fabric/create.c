/*
 * Creating a fabric from a topology: laying out its shared memory (control block, adapters'
 * tables, RAM and BAR files), enumerating its PCIe functions, computing its routes, and
 * removing what a fabric left behind. The top floor of the fabric: it calls the others.
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


int fab_create(const char *name, const struct topo *t, fab_layout_fn layout, struct fab **out)
{
    char dir[128];
    int rc = fab_dir(name, dir, sizeof dir);
    if (rc)
        return rc;
    if (mkdir(dir, 0700) < 0)
        return -errno; /* EEXIST: the fabric is up (or left behind by a crash) */

    /* Layout: ctl | hosts | adapters | switches | links | functions | multicast groups |
     * per adapter LUT, RID, DMA | IOMMU. */
    size_t off = align_up(sizeof(struct fab_ctl), 64);
    size_t off_hosts = off;
    off = align_up(off + t->nhosts * sizeof(struct fab_host), 64);
    size_t off_adapters = off;
    off = align_up(off + t->nadapters * sizeof(struct fab_adapter), 64);
    size_t off_switches = off;
    off = align_up(off + t->nswitches * sizeof(struct fab_switch), 64);
    size_t off_links = off;
    off = align_up(off + t->nlinks * sizeof(struct fab_link), 64);
    int nfuncs = layout ? layout(t, NULL, FAB_MAX_FUNCS, stderr) : 0;
    if (nfuncs < 0) {
        rmdir(dir);
        return nfuncs;
    }
    size_t off_funcs = off;
    off = align_up(off + (size_t)nfuncs * sizeof(struct fab_function), 64);
    size_t off_mcast = off;
    off = align_up(off + FAB_MCAST_GROUPS * sizeof(struct fab_mcast), 64);
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
    ctl->off_mcast = off_mcast;
    ctl->latency = t->latency;
    ctl->nhswitches = t->nhswitches;
    for (uint32_t i = 0; i < t->nhswitches; i++) {
        ctl->hswitches[i] = (struct fab_hswitch){ .host = t->hswitches[i].host,
                                                  .parent = t->hswitches[i].parent,
                                                  .latency_ns = t->hswitches[i].latency_ns,
                                                  .link_ns = t->hswitches[i].link_ns };
        snprintf(ctl->hswitches[i].name, sizeof ctl->hswitches[i].name, "%s",
                 t->hswitches[i].name);
    }

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
        a->at = (uint16_t)ta->at;
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
    if (nfuncs > 0 && layout(t, fab_func(&tmp, 0), (size_t)nfuncs, stderr) != nfuncs) {
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
        fab_func(&tmp, i)->at = (uint16_t)t->devices[fab_func(&tmp, i)->device].at;
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
    rc = write_ones_file(dir, FAB_ONES_SIZE);
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

