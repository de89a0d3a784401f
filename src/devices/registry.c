/*
 * The one registry of device types: for each type a topology's [device] section may name, its
 * PCI identity (vendor, device, class), its BAR layout and parameters, and the model that
 * serves it (nvmc.c, accel.c). Laying out a topology's devices as PCIe functions (the
 * functions, their BARs in each host's map, their configuration space) is done from it, and
 * so is starting the models (models.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"

/* An Optane P4800X-like NVMe (smartio-tocs-2021 §7.4: 32 queue pairs) and a GPU-like
 * accelerator with a large memory BAR and a DMA copy engine. */
static const struct dev_type types[] = {
    { "nvme", 0x8086, 0x2701, 0x010802, 16384, 0x2000, 0x3000, "queues", 32, "cmb", 0,
      &nvmc_model_ops },
    { "accel", 0x10de, 0x1bb1, 0x030200, 65536, 0x8000, 0x9000, NULL, 4, "mem", 256ull << 20,
      &accel_model_ops },
};

const struct dev_type *devreg_find(const char *name)
{
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (strcmp(types[i].name, name) == 0)
            return &types[i];
    return NULL;
}

const char *devreg_param(const char *params, const char *key, char *buf, size_t len)
{
    size_t kl = strlen(key);
    for (const char *p = params; p && *p;) {
        const char *end = strchr(p, ';');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n > kl && strncmp(p, key, kl) == 0 && p[kl] == '=') {
            size_t vl = n - kl - 1 < len - 1 ? n - kl - 1 : len - 1;
            memcpy(buf, p + kl + 1, vl);
            buf[vl] = 0;
            return buf;
        }
        p = end ? end + 1 : NULL;
    }
    return NULL;
}

int devreg_param_size(const char *params, const char *key, uint64_t def, uint64_t *out)
{
    char buf[64];
    const char *v = devreg_param(params, key, buf, sizeof buf);
    if (!v) {
        *out = def;
        return 0;
    }
    return topo_parse_size(v, out);
}

static uint64_t pow2_at_least(uint64_t v)
{
    uint64_t p = 4096;
    while (p < v)
        p <<= 1;
    return p;
}

static void put16(uint8_t *c, uint32_t off, uint16_t v) { memcpy(c + off, &v, 2); }
static void put32(uint8_t *c, uint32_t off, uint32_t v) { memcpy(c + off, &v, 4); }

static void build_cfg(struct fab_function *fn, const struct dev_type *ty, uint32_t vectors,
                      bool multi, uint32_t total_vfs)
{
    uint8_t *c = fn->cfg;
    memset(c, 0, sizeof fn->cfg);
    put16(c, 0x00, ty->vendor);
    put16(c, 0x02, ty->device);
    put16(c, 0x06, 0x0010); /* status: capabilities list */
    c[0x08] = 1;            /* revision */
    c[0x09] = (uint8_t)ty->class_code;
    c[0x0a] = (uint8_t)(ty->class_code >> 8);
    c[0x0b] = (uint8_t)(ty->class_code >> 16);
    c[0x0e] = multi ? 0x80 : 0x00;
    for (int i = 0; i < FAB_BARS; i += 2) {
        const struct fab_bar *b = &fn->bar[i];
        if (b->kind == FAB_BAR_NONE)
            continue;
        uint32_t flags = 0x4 | (b->kind == FAB_BAR_MEM ? 0x8 : 0); /* 64-bit, prefetchable */
        put32(c, 0x10 + 4 * (uint32_t)i, (uint32_t)b->addr | flags);
        put32(c, 0x14 + 4 * (uint32_t)i, (uint32_t)(b->addr >> 32));
    }
    put16(c, 0x2c, ty->vendor);
    put16(c, 0x2e, ty->device);
    c[0x34] = FAB_CFG_MSIX;
    /* MSI-X: table size - 1, table and PBA in BAR0. */
    c[FAB_CFG_MSIX] = 0x11;
    c[FAB_CFG_MSIX + 1] = 0x50;
    put16(c, FAB_CFG_MSIX + 2, (uint16_t)(vectors - 1));
    put32(c, FAB_CFG_MSIX + 4, ty->table_off);
    put32(c, FAB_CFG_MSIX + 8, ty->pba_off);
    /* PCI Express capability v2, endpoint; link Gen3 x16 (what the seeds' cards are). */
    c[0x50] = 0x10;
    c[0x51] = 0;
    put16(c, 0x52, 0x0002);
    put32(c, 0x5c, 0x00000103u | (16u << 4));
    put16(c, 0x62, 0x0003 | (16u << 4));
    if (total_vfs) {
        /* SR-IOV extended capability: TotalVFs, NumVFs, first VF offset and stride. */
        put32(c, 0x100, 0x0010 | (1u << 16));
        put16(c, 0x108, 0x0009); /* VF Enable, VF MSE: the lender's PF driver enabled them */
        put16(c, 0x10e, (uint16_t)total_vfs);
        put16(c, 0x110, (uint16_t)total_vfs);
        put16(c, 0x114, 0x10);
        put16(c, 0x116, 1);
        put16(c, 0x11a, ty->device);
    }
}

int devreg_layout(const struct topo *t, struct fab_function *out, size_t max, FILE *err)
{
    size_t n = 0;
    int rc = 0;
    /* Grouped by host, so each host's functions are consecutive. */
    for (uint32_t h = 0; h < t->nhosts; h++) {
        uint64_t cursor = FAB_DEVICE_BASE;
        for (uint32_t d = 0; d < t->ndevices; d++) {
            const struct topo_device *td = &t->devices[d];
            if (td->host != h)
                continue;
            const struct dev_type *ty = devreg_find(td->type);
            uint64_t functions, vfs, mem, vectors;
            if (!ty) {
                fprintf(err, "%s:%d: [device %s]: no model for type '%s'; the types are nvme and accel\n",
                        t->path, td->line, td->name, td->type);
                rc = -EINVAL;
                continue;
            }
            if (devreg_param_size(td->params, "functions", 1, &functions) || functions < 1 || functions > 8 ||
                devreg_param_size(td->params, "vfs", 0, &vfs) || vfs > 64 ||
                devreg_param_size(td->params, ty->mem_key, ty->mem_default, &mem) || mem > (64ull << 30) ||
                (ty->vectors_key ? devreg_param_size(td->params, ty->vectors_key, ty->vectors_default, &vectors)
                                 : (vectors = ty->vectors_default, 0)) ||
                vectors < 1 || vectors > 2047) {
                fprintf(err, "%s:%d: [device %s]: bad functions (1..8), vfs (0..64), %s (<= 64G)%s%s\n",
                        t->path, td->line, td->name, ty->mem_key, ty->vectors_key ? " or " : "",
                        ty->vectors_key ? ty->vectors_key : "");
                rc = -EINVAL;
                continue;
            }
            uint32_t nvec = (uint32_t)vectors + (ty->vectors_key ? 1 : 0); /* + admin queue */
            for (uint32_t fnum = 0; fnum < functions; fnum++)
                for (uint32_t vf = 0; vf <= (fnum == 0 ? vfs : 0); vf++) {
                    if (n >= max) {
                        if (out) {
                            fprintf(err, "%s: more than %zu PCIe functions in all\n", t->path, max);
                            return -EINVAL;
                        }
                        n++;
                        continue;
                    }
                    if (!out) {
                        n++;
                        continue;
                    }
                    struct fab_function *fn = &out[n++];
                    memset(fn, 0, sizeof *fn);
                    if (vf)
                        snprintf(fn->name, sizeof fn->name, "%.24s.vf%u", td->name, vf % 100u);
                    else if (functions > 1)
                        snprintf(fn->name, sizeof fn->name, "%.26s.f%u", td->name, fnum % 10u);
                    else
                        snprintf(fn->name, sizeof fn->name, "%s", td->name);
                    snprintf(fn->type, sizeof fn->type, "%s", td->type);
                    snprintf(fn->params, sizeof fn->params, "%s", td->params);
                    fn->device = d;
                    fn->host = h;
                    fn->fn = fnum;
                    fn->vf = vf;
                    uint32_t bus = 2 + d % 250;
                    fn->rid = (uint16_t)(bus << 8 | (vf ? 0x10 + vf - 1 : fnum));
                    uint64_t off = 0;
                    uint64_t sizes[3] = { ty->regs, mem ? pow2_at_least(mem) : 0, 0 };
                    for (int i = 0; i < 2; i++) {
                        if (!sizes[i])
                            continue;
                        struct fab_bar *b = &fn->bar[2 * i];
                        b->kind = i == 0 ? FAB_BAR_REGS : FAB_BAR_MEM;
                        b->size = sizes[i];
                        cursor = (cursor + b->size - 1) & ~(b->size - 1); /* natural alignment */
                        b->addr = cursor;
                        cursor += b->size;
                        b->off = off;
                        off += b->size;
                    }
                    fn->file_size = off;
                    build_cfg(fn, ty, nvec, functions > 1, vf || fnum ? 0 : (uint32_t)vfs);
                }
        }
    }
    return rc ? rc : (int)n;
}

