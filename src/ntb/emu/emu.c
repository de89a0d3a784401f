/*
 * The emulated PCIe NTB fabric (src/fabric) as a backend of libntblend (ntb_backend.h): the
 * table of operations, and the hosts, paths, windows, memory and device functions it answers
 * for. With emu_ntb.c, emu_rt.c and emu_map.c (emu.h says who does what), the only part of
 * libntblend that knows the fabric's shared state.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "emu.h"

/* ---------------------------------------------------------------- hosts */

static uint32_t emu_node_id(struct rt *rt, uint32_t host)
{
    return fab_host(emu_fab(rt), host)->node_id;
}

static int emu_host_name(struct rt *rt, uint32_t host, char *buf, size_t len)
{
    if (host >= emu_fab(rt)->ctl->nhosts)
        return -ENOENT;
    snprintf(buf, len, "%s", fab_host(emu_fab(rt), host)->name);
    return 0;
}

static int emu_latency_model(struct rt *rt) { return emu_fab(rt)->ctl->latency.enabled ? 1 : 0; }

static uint64_t emu_ram_size(struct rt *rt, uint32_t host)
{
    return host < emu_fab(rt)->ctl->nhosts ? fab_host(emu_fab(rt), host)->ram_size : 0;
}

static int emu_host_by_node(struct rt *rt, uint32_t node_id)
{
    for (uint32_t h = 0; h < emu_fab(rt)->ctl->nhosts; h++)
        if (fab_host(emu_fab(rt), h)->node_id == node_id)
            return (int)h;
    return -EHOSTUNREACH;
}

static uint32_t emu_boot_gen(struct rt *rt, uint32_t host)
{
    return atomic_load(&fab_host(emu_fab(rt), host)->boot_gen);
}

/* ---------------------------------------------------------------- adapters and paths */

static int emu_adapter(struct rt *rt, uint32_t host, int index)
{
    if (host >= emu_fab(rt)->ctl->nhosts)
        return -ENODEV;
    const struct fab_host *h = fab_host(emu_fab(rt), host);
    if (index < 0 || (uint32_t)index >= h->nadapters)
        return -ENODEV;
    return (int)(h->adapter_first + (uint32_t)index);
}

static int emu_adapter_toward(struct rt *rt, uint32_t host, uint32_t target, uint32_t *peer)
{
    int a = fab_adapter_toward(emu_fab(rt), host, target, peer);
    return a < 0 ? -EHOSTUNREACH : a;
}

static int emu_peer_on(struct rt *rt, uint32_t adapter, uint32_t host)
{
    int p = fab_peer_on(emu_fab(rt), adapter, host);
    return p < 0 ? -ENOTCONN : p;
}

static bool emu_path_up(struct rt *rt, uint32_t adapter, uint32_t peer)
{
    return fab_path_up(emu_fab(rt), adapter, peer, NULL);
}

static uint64_t emu_path_signature(struct rt *rt, uint32_t adapter, uint32_t peer)
{
    return fab_path_signature(emu_fab(rt), adapter, peer);
}

static _Atomic uint32_t *emu_path_word(struct rt *rt) { return &emu_fab(rt)->ctl->path_gen; }

/* ---------------------------------------------------------------- windows */

/* With this host's IOMMU on, its adapters' DMA engines reach a window only through a mapping
 * in their domains (identity IOVAs, as ntb_dma_alloc's buffers have). */
static int window_dma(struct rt *rt, const struct ntb_window *w, bool on)
{
    const struct fab_host *h = fab_host(emu_fab(rt), rt->host);
    if (!h->iommu)
        return 0;
    const struct fab_adapter *a = fab_adapter(emu_fab(rt), w->adapter);
    uint64_t win = a->bar_addr + (uint64_t)w->first * a->lut_size;
    uint64_t len = (uint64_t)w->count * a->lut_size;
    for (uint32_t i = 0; i < h->nadapters; i++) {
        if (!fab_adapter(emu_fab(rt), h->adapter_first + i)->dma_channels)
            continue;
        if (!on) {
            fab_iommu_unmap(emu_fab(rt), rt->host, fab_dma_rid(i), win, len);
            continue;
        }
        int rc = fab_iommu_map(emu_fab(rt), rt->host, fab_dma_rid(i), win, win, len,
                               FAB_PERM_READ | FAB_PERM_WRITE, getpid());
        if (rc) {
            while (i-- > 0)
                if (fab_adapter(emu_fab(rt), h->adapter_first + i)->dma_channels)
                    fab_iommu_unmap(emu_fab(rt), rt->host, fab_dma_rid(i), win, len);
            return rc;
        }
    }
    return 0;
}

static void emu_window_unmap(struct rt *rt, struct ntb_window *w)
{
    if (!w->count)
        return;
    window_dma(rt, w, false);
    struct fab_window fw = { .adapter = w->adapter, .first = w->first, .count = w->count,
                             .offset = w->offset, .bus = w->bus, .peer_host = w->peer_host,
                             .peer_addr = w->peer_addr, .len = w->len };
    fab_window_unmap(emu_fab(rt), &fw, getpid());
    w->count = 0;
}

static int emu_window_map(struct rt *rt, uint32_t adapter, uint32_t peer_host, uint64_t peer_addr,
                          uint64_t len, unsigned flags, struct ntb_window *w)
{
    struct fab_window fw;
    int rc = fab_window_map(emu_fab(rt), adapter, peer_host, peer_addr, len, getpid(),
                            (flags & NTB_WIN_MCAST) ? FAB_LUT_MCAST : 0, &fw);
    if (rc)
        return rc;
    *w = (struct ntb_window){ .adapter = fw.adapter, .peer_host = fw.peer_host,
                              .peer_addr = fw.peer_addr, .len = fw.len, .bus = fw.bus,
                              .first = fw.first, .count = fw.count, .offset = fw.offset };
    rc = (flags & NTB_WIN_DMA) ? window_dma(rt, w, true) : 0;
    if (rc) {
        fab_window_unmap(emu_fab(rt), &fw, getpid());
        w->count = 0;
    }
    return rc;
}

static void *emu_window_cpu_map(struct rt *rt, const struct ntb_window *w, bool readonly,
                                void **base)
{
    char *m = emu_map_window(rt, w->adapter, w->first, w->count, readonly);
    if (!m)
        return NULL;
    *base = m;
    return m + w->offset;
}

static int emu_window_cpu_unmap(struct rt *rt, void *base) { return emu_unmap_window(rt, base); }

static int emu_window_cpu_failover(struct rt *rt, void *base, const struct ntb_window *alt)
{
    return emu_map_failover(rt, base, alt->adapter, alt->first, alt->count);
}

/* ---------------------------------------------------------------- memory and interrupts */

static void *emu_ram(struct rt *rt, uint32_t host, uint64_t phys, uint64_t len)
{
    void *p = fab_ram(emu_fab(rt), host, phys, len);
    if (!p)
        errno = EFAULT;
    return p;
}

static int emu_ram_fd(struct rt *rt, uint32_t host) { return fab_ram_fd(emu_fab(rt), host); }

static _Atomic uint32_t *emu_msi_word(struct rt *rt, uint32_t vector)
{
    return &fab_host(emu_fab(rt), rt->host)->msi_seq[vector];
}

/* ---------------------------------------------------------------- device functions */

static const _Atomic uint32_t *emu_fn_cpu_word(struct rt *rt, uint32_t fn)
{
    if (fn >= emu_fab(rt)->ctl->nfuncs)
        return NULL;
    return &fab_func(emu_fab(rt), fn)->model_cpu;
}

static int emu_func_info(struct rt *rt, uint32_t fn, struct ntb_func_info *o)
{
    if (fn >= emu_fab(rt)->ctl->nfuncs)
        return -ENODEV;
    const struct fab_function *x = fab_func(emu_fab(rt), fn);
    memset(o, 0, sizeof *o);
    o->host = x->host;
    snprintf(o->name, sizeof o->name, "%s", x->name);
    snprintf(o->type, sizeof o->type, "%s", x->type);
    snprintf(o->host_name, sizeof o->host_name, "%s", fab_host(emu_fab(rt), x->host)->name);
    memcpy(&o->vendor, x->cfg, 2);
    memcpy(&o->device, x->cfg + 2, 2);
    o->class_code = (uint32_t)x->cfg[0x0b] << 16 | (uint32_t)x->cfg[0x0a] << 8 | x->cfg[0x09];
    o->vf = x->vf;
    o->available = atomic_load(&x->lend_available);
    o->exclusive = atomic_load(&x->lend_exclusive);
    for (int k = 0; k < 4; k++)
        o->borrowers += (uint32_t)__builtin_popcountll(atomic_load(&x->lend_borrowers[k]));
    uint32_t mgr = atomic_load(&x->lend_manager);
    if (mgr) {
        o->managed = true;
        o->manager_host = mgr - 1;
        o->manager_pid = atomic_load(&x->lend_manager_pid);
    }
    o->msix_cap = FAB_CFG_MSIX;
    o->bdf = x->rid;
    for (int b = 0; b < FAB_BARS && b < NTB_BK_BARS; b++)
        if (x->bar[b].kind != FAB_BAR_NONE) {
            o->bar[b].size = x->bar[b].size;
            o->bar[b].addr = x->bar[b].addr;
            o->bar[b].regs = x->bar[b].kind == FAB_BAR_REGS;
        }
    return 0;
}

static int emu_tree(struct rt *rt, uint32_t host, struct ntb_shadow_info *out, int max)
{
    if (host >= emu_fab(rt)->ctl->nhosts)
        return -ENOENT;
    int n = 0;
    for (int i = 0; i < FAB_SHADOWS; i++) {
        const struct fab_shadow *s = &fab_host(emu_fab(rt), host)->shadows[i];
        uint32_t st = atomic_load(&s->state);
        if (st == FAB_SHADOW_FREE)
            continue;
        if (n < max) {
            struct ntb_shadow_info *o = &out[n];
            memset(o, 0, sizeof *o);
            o->fn = s->fn;
            o->bdf = s->bdf;
            o->present = st == FAB_SHADOW_PRESENT;
            for (int b = 0; b < FAB_BARS && b < NTB_BK_BARS; b++)
                o->bar_addr[b] = s->bar_addr[b];
        }
        n++;
    }
    return n;
}

static _Atomic uint32_t *emu_tree_word(struct rt *rt, uint32_t host)
{
    return host < emu_fab(rt)->ctl->nhosts ? &fab_host(emu_fab(rt), host)->tree_gen : NULL;
}

static int emu_func_by_name(struct rt *rt, const char *name)
{
    int i = fab_func_by_name(emu_fab(rt), name);
    return i < 0 ? -ENOENT : i;
}

static uint32_t emu_cfg_read(struct rt *rt, uint32_t fn, uint32_t off, uint32_t len)
{
    return fab_cfg_read(emu_fab(rt), fn, off, len);
}

static int emu_cfg_write(struct rt *rt, uint32_t fn, uint32_t off, uint32_t len, uint32_t val)
{
    return fab_cfg_write(emu_fab(rt), fn, off, len, val);
}

static volatile void *emu_bar_mem(struct rt *rt, uint32_t fn, int bar)
{
    if (fn >= emu_fab(rt)->ctl->nfuncs || bar < 0 || bar >= FAB_BARS ||
        fab_func(emu_fab(rt), fn)->bar[bar].kind == FAB_BAR_NONE) {
        errno = EINVAL;
        return NULL;
    }
    const struct fab_bar *b = &fab_func(emu_fab(rt), fn)->bar[bar];
    return fab_bar_mem(emu_fab(rt), fn, b->off, b->size);
}

/* A program's register write reaches the model: the writer (the function's driver) publishes
 * its CPU first, so that the model, woken or polling, sees where its next doorbell comes from. */
static void emu_fn_notify(struct rt *rt, uint32_t fn)
{
    fab_fn_note_driver_cpu(emu_fab(rt), fn);
    fab_fn_notify(emu_fab(rt), fn);
}
static void emu_fn_driver_asleep(struct rt *rt, uint32_t fn, bool asleep)
{
    if (fn < emu_fab(rt)->ctl->nfuncs)
        fab_fn_driver_asleep(emu_fab(rt), fn, asleep);
}
static int emu_fn_raw(struct rt *rt, uint32_t fn, int delta)
{
    return fab_fn_raw(emu_fab(rt), fn, delta);
}

/* ---------------------------------------------------------------- virtual machines */

_Static_assert(NTB_VM_DEVS == FAB_VM_DEVS && NTB_BK_BARS == FAB_BARS, "a VM's device table");

static int emu_vm_info(struct rt *rt, const char *name, struct ntb_vm_info *o)
{
    int s = fab_vm_find(emu_fab(rt), name);
    if (s < 0)
        return s;
    const struct fab_vm *v = fab_vm(emu_fab(rt), (uint32_t)s);
    memset(o, 0, sizeof *o);
    o->slot = (uint32_t)s;
    o->host = v->host;
    o->running = atomic_load(&v->state) == FAB_VM_RUNNING;
    o->emulated = !strcmp(v->guest, "emulated");
    o->mem = v->mem;
    o->ram_base = fab_vm_base((uint32_t)s);
    if ((size_t)snprintf(o->ctl, sizeof o->ctl, "%.80s/vm.%.32s.ctl", emu_fab(rt)->dir, v->name) >=
        sizeof o->ctl || strlen(emu_fab(rt)->dir) > 80)
        return -ENAMETOOLONG;
    for (int i = 0; i < FAB_VM_DEVS; i++) {
        const struct fab_vm_dev *d = &v->dev[i];
        o->dev[i].state = atomic_load(&d->state);
        o->dev[i].fn = d->fn;
        o->dev[i].bdf = d->guest_bdf;
        memcpy(o->dev[i].bar, d->guest_bar, sizeof o->dev[i].bar);
        o->dev[i].ram_io = d->ram_io;
    }
    return 0;
}

static _Atomic uint32_t *emu_vm_word(struct rt *rt, uint32_t slot)
{
    return slot < FAB_MAX_VMS ? &fab_vm(emu_fab(rt), slot)->seq : NULL;
}

/* ---------------------------------------------------------------- the table */

const struct ntb_backend_ops ntb_backend_emu = {
    .name = "emulated fabric",
    .start = emu_start,
    .stop = emu_stop,
    .agent_call = emu_agent_call,
    .node_id = emu_node_id,
    .host_by_node = emu_host_by_node,
    .host_name = emu_host_name,
    .latency_model = emu_latency_model,
    .ram_size = emu_ram_size,
    .boot_gen = emu_boot_gen,
    .adapter = emu_adapter,
    .adapter_toward = emu_adapter_toward,
    .peer_on = emu_peer_on,
    .path_up = emu_path_up,
    .path_signature = emu_path_signature,
    .path_word = emu_path_word,
    .window_map = emu_window_map,
    .window_unmap = emu_window_unmap,
    .window_cpu_map = emu_window_cpu_map,
    .window_cpu_failover = emu_window_cpu_failover,
    .window_cpu_unmap = emu_window_cpu_unmap,
    .ram = emu_ram,
    .ram_fd = emu_ram_fd,
    .msi_word = emu_msi_word,
    .msi_addr = FAB_MSI_BASE,
    .msi_vectors = FAB_MSI_VECTORS,
    .func_info = emu_func_info,
    .func_by_name = emu_func_by_name,
    .fn_cpu_word = emu_fn_cpu_word,
    .fn_driver_asleep = emu_fn_driver_asleep,
    .cfg_read = emu_cfg_read,
    .cfg_write = emu_cfg_write,
    .bar_mem = emu_bar_mem,
    .fn_notify = emu_fn_notify,
    .fn_raw = emu_fn_raw,
    .tree = emu_tree,
    .tree_word = emu_tree_word,
    .adapter_info = emu_adapter_info,
    .mw_set = emu_mw_set,
    .mw_clear = emu_mw_clear,
    .mw_alloc = emu_mw_alloc,
    .mw_cpu_map = emu_mw_cpu_map,
    .link_set = emu_link_set,
    .link_word = emu_link_word,
    .db_read = emu_db_read,
    .db_set = emu_db_set,
    .db_clear = emu_db_clear,
    .db_mask_read = emu_db_mask_read,
    .db_mask_set = emu_db_mask_set,
    .db_mask_clear = emu_db_mask_clear,
    .peer_db_set = emu_peer_db_set,
    .db_word = emu_db_word,
    .spad_read = emu_spad_read,
    .spad_write = emu_spad_write,
    .dma_chan_get = emu_dma_chan_get,
    .dma_chan_put = emu_dma_chan_put,
    .dma_submit = emu_dma_submit,
    .dma_abort = emu_dma_abort,
    .dma_wait = emu_dma_wait,
    .dma_buf_map = emu_dma_buf_map,
    .iommu_faults = emu_iommu_faults,
    .iommu_on = emu_iommu_on,
    .iommu_map = emu_iommu_map,
    .iommu_unmap = emu_iommu_unmap,
    .vm_info = emu_vm_info,
    .vm_word = emu_vm_word,
    .mcast = emu_mcast,
    .mcast_info = emu_mcast_info,
    .mcast_find = emu_mcast_find,
    .now_ns = fab_now_ns,
    .wait = fab_futex_wait,
    .wake = fab_futex_wake,
};
