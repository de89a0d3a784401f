/*
 * A PCIe function as a bus master: its DMA reads and writes (as its own requester, through
 * its host's IOMMU and the NTB windows; only while Bus Master Enable is set) and its MSI-X
 * messages, which are DMA writes too. Above address resolution, which it uses.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fabric.h"

static uint32_t get32(const uint8_t *c, uint32_t off)
{
    uint32_t v;
    memcpy(&v, c + off, 4);
    return v;
}

/* ---------------------------------------------------------------- bus mastering */

static bool bus_master(struct fab_function *fn)
{
    uint16_t cmd;
    memcpy(&cmd, fn->cfg + 0x04, 2);
    return cmd & FAB_CMD_BME;
}

int fab_fn_dma_read(struct fab *f, uint32_t fni, uint64_t addr, void *dst, uint64_t len)
{
    struct fab_function *fn = fab_func(f, fni);
    if (!bus_master(fn)) {
        memset(dst, 0xff, len);
        return -EIO; /* no DMA while Bus Master Enable is clear */
    }
    return fab_dev_read(f, fn->host, fn->rid, addr, dst, len);
}

int fab_fn_dma_write(struct fab *f, uint32_t fni, uint64_t addr, const void *src, uint64_t len)
{
    struct fab_function *fn = fab_func(f, fni);
    if (!bus_master(fn))
        return -EIO;
    return fab_dev_write(f, fn->host, fn->rid, addr, src, len);
}

int fab_fn_msix(struct fab *f, uint32_t fni, uint32_t v)
{
    struct fab_function *fn = fab_func(f, fni);
    uint16_t ctrl;
    uint32_t table, pba;
    memcpy(&ctrl, fn->cfg + FAB_CFG_MSIX + 2, 2);
    table = get32(fn->cfg, FAB_CFG_MSIX + 4) & ~7u;
    pba = get32(fn->cfg, FAB_CFG_MSIX + 8) & ~7u;
    if (v > (ctrl & 0x7ffu))
        return -EINVAL;
    if (!(ctrl & 0x8000u))
        return -ENODEV;
    uint32_t *entry = fab_bar_mem(f, fni, fn->bar[0].off + table + 16ull * v, 16);
    _Atomic uint64_t *pend = fab_bar_mem(f, fni, fn->bar[0].off + pba + 8ull * (v / 64), 8);
    if (!entry || !pend)
        return -EIO;
    if ((ctrl & 0x4000u) || (entry[3] & 1u)) {
        atomic_fetch_or(pend, 1ull << (v % 64)); /* masked: remember it */
        return 0;
    }
    atomic_fetch_and(pend, ~(1ull << (v % 64)));
    uint64_t addr = (uint64_t)entry[1] << 32 | entry[0];
    uint32_t data = entry[2];
    return fab_fn_dma_write(f, fni, addr, &data, sizeof data);
}

