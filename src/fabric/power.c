/*
 * Host power: a host going down, booting (its RAM, IOMMU, adapters and functions start from
 * zero) and coming up, and everyone told that reachability changed. A top floor of the fabric,
 * beside creation: it resets what the floors below own.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fabric.h"

int fab_host_set_state(struct fab *f, uint32_t host, enum fab_host_state st)
{
    if (host >= f->ctl->nhosts)
        return -EINVAL;
    struct fab_host *h = fab_host(f, host);
    fab_path_bump(f);
    if (st == FAB_HOST_BOOTING) {
        /* Power-on: RAM and every register of the host start from zero. Punching holes keeps
         * other processes' mappings of the RAM file valid (they read zeros, as after a reboot). */
        int fd = fab_ram_fd(f, host);
        if (fd < 0)
            return fd;
        if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t)h->ram_size) < 0)
            return -errno;
        fab_lock(&h->iommu_lock);
        struct fab_iommu_map *m = fab_iommu_table(f, host);
        for (uint32_t i = 0; i < FAB_IOMMU_MAPS; i++) /* empty, every cached translation stale */
            m[i] = (struct fab_iommu_map){ .gen = m[i].gen + 1 };
        h->iommu_nmaps = 0;
        h->iommu_nidx = 0;
        h->iommu_idx_dirty = 0;
        fab_unlock(&h->iommu_lock);
        for (uint32_t i = 0; i < h->nadapters; i++)
            fab_adapter_reset(f, h->adapter_first + i);
        fab_funcs_reset(f, host);
        fab_mcast_host_reset(f, host); /* what processes subscribed of its memory */
        for (uint32_t i = 0; i < FAB_SHADOWS; i++) { /* a fresh PCIe tree: nothing hot-added */
            atomic_store(&h->shadows[i].state, FAB_SHADOW_FREE);
            atomic_fetch_add(&h->shadows[i].gen, 1);
        }
        atomic_fetch_add(&h->boot_gen, 1);
    }
    atomic_store(&h->state, (uint32_t)st);
    fab_path_bump(f);
    fab_reachability_changed(f);
    return 0;
}
