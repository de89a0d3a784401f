/*
 * Address resolution and device DMA: what a bus address on a host reaches, through the host's
 * IOMMU (iommu.c), its physical address map and NTB windows (LUT entry -> peer host, whose IOMMU then
 * applies for the inbound adapter), chained as many times as windows point into windows.
 * Device-style reads, writes and bus-to-bus copies are built on it; the CPU path (mmap of the
 * final target) uses the same resolution in src/ntb.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fabric.h"

/* ---------------------------------------------------------------- resolution */

/* The CPUs' requester IDs (the CPU path needs no IOMMU mapping of its own RAM). */
static bool is_cpu(uint16_t rid) { return rid < FAB_CPU_RIDS; }

/* Which adapter of host h owns physical address phys in its window BAR, or -1. */
static int window_at(const struct fab *f, uint32_t host, uint64_t phys)
{
    const struct fab_host *h = fab_host(f, host);
    for (uint32_t i = 0; i < h->nadapters; i++) {
        const struct fab_adapter *a = fab_adapter(f, h->adapter_first + i);
        if (phys >= a->bar_addr && phys - a->bar_addr < (uint64_t)a->lut_entries * a->lut_size)
            return (int)(h->adapter_first + i);
    }
    return -1;
}

static uint64_t min64(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* Where the next region above phys begins in host's map (UINT64_MAX: none): a failed access
 * covers only the gap, so a mapping over a gap and a BAR maps the BAR. */
static uint64_t next_decoded(const struct fab *f, uint32_t host, uint64_t phys)
{
    const struct fab_host *h = fab_host(f, host);
    uint64_t next = UINT64_MAX;
#define CONSIDER(start)                                                                      \
    do {                                                                                     \
        uint64_t s_ = (start);                                                               \
        if (s_ > phys && s_ < next)                                                          \
            next = s_;                                                                       \
    } while (0)
    CONSIDER(FAB_MSI_BASE);
    for (uint32_t i = 0; i < FAB_MAX_VMS; i++)
        if (atomic_load(&fab_vm(f, i)->state) != FAB_VM_FREE && fab_vm(f, i)->host == host)
            CONSIDER(fab_vm_base(i));
    for (uint32_t i = 0; i < h->nadapters; i++)
        CONSIDER(fab_adapter(f, h->adapter_first + i)->bar_addr);
    for (uint32_t i = 0; i < h->nfuncs; i++)
        for (int b = 0; b < FAB_BARS; b += 2)
            if (fab_func(f, h->func_first + i)->bar[b].kind != FAB_BAR_NONE)
                CONSIDER(fab_func(f, h->func_first + i)->bar[b].addr);
#undef CONSIDER
    return next;
}

/* The IOMMU mappings a walk went through (their slots' generations, then): a translation
 * cached holds while none of them was unmapped. Walks through more are not cached. */
#define WALK_GENS 2
struct walk_gens {
    uint32_t n;
    const uint32_t *at[WALK_GENS];
    uint32_t gen[WALK_GENS];
};

static void gens_add(struct walk_gens *g, const uint32_t *at, uint32_t gen)
{
    if (!at || !g)
        return;
    if (g->n < WALK_GENS) {
        g->at[g->n] = at;
        g->gen[g->n] = gen;
    }
    g->n++;
}

/*
 * The first window crossing of a device's access, for a whole range: every address in
 * [base, end) on `host` from `rid` goes through the same IOMMU mapping (gen_at, or none) and
 * the same LUT entry, to addr + delta on peer_host, arriving from peer_rid. A lent device's
 * every DMA crosses its lender's adapter this way (one window per lender onto the borrower's
 * IOMMU range), and only the far side changes from one streaming mapping to the next, so a
 * walk that finds its first crossing here resumes on the far side (see fab_resolve).
 */
struct hop {
    const struct fab_ctl *ctl;
    uint32_t map_gen, tlb_gen, host, peer_host, peer_at;
    uint16_t rid, peer_rid;
    bool write, valid;
    uint64_t base, end, delta;
    const uint32_t *gen_at;
    uint32_t gen;
    struct fab_target t; /* hops, ntbs, egress and path_ns after the crossing */
};

/* Where a walk starts: the requester's view (depth 0), or the far side of a cached hop. A
 * crossing is recorded into rec (which needs g: the first IOMMU mapping is g's first). */
struct walk_start {
    uint32_t host;
    uint16_t rid;
    uint64_t addr, len;
    int depth;
    bool cpu; /* a CPU's access (no IOMMU on its own host) */
    uint32_t at; /* where the requester sits in the host's tree (latency model) */
};

/* Where requester rid sits in host's PCIe tree: an in-host switch + 1, or 0 (a root port). */
static uint32_t requester_at(const struct fab *f, uint32_t host, uint16_t rid)
{
    const struct fab_host *h = fab_host(f, host);
    for (uint32_t i = 0; i < h->nfuncs; i++)
        if (fab_func(f, h->func_first + i)->rid == rid)
            return fab_func(f, h->func_first + i)->at;
    for (uint32_t i = 0; i < h->nadapters; i++)
        if (fab_adapter(f, h->adapter_first + i)->rid == rid)
            return fab_adapter(f, h->adapter_first + i)->at;
    return 0;
}

/* A LUT entry of adapter ai that targets multicast group g, at offset off of its window: a
 * write goes to the switch, which replicates it (write_mcast); a read of a multicast address
 * is an unsupported request (all ones), as on the hardware: there is no one to complete it. */
static int resolve_mcast(struct fab *f, int ai, uint32_t g, uint64_t off, bool write,
                         uint16_t rid, bool xlate, uint32_t at, struct fab_target *t)
{
    const struct topo_latency *lat = &f->ctl->latency;
    struct fab_adapter *a = fab_adapter(f, (uint32_t)ai);
    const struct fab_mcast *m = g < FAB_MCAST_GROUPS ? fab_mcast(f, g) : NULL;
    if (!write || !m || atomic_load(&m->state) != FAB_MCAST_USED || off >= m->size) {
        t->err = -EIO;
        return 0;
    }
    if (!fab_mcast_port_up(f, (uint32_t)ai)) {
        t->err = -ENOLINK;
        return 0;
    }
    t->region = FAB_REGION_MCAST;
    t->fn = g;
    t->addr = off;
    t->len = min64(t->len, m->size - off);
    if (!t->ntbs++)
        t->egress = (uint32_t)ai + 1;
    t->split |= xlate;
    if (lat->enabled && !(rid == a->rid && !xlate)) /* the requester's way to the adapter */
        t->path_ns += fab_lat_tree_ns(f->ctl->hswitches, lat->root_ns, at, a->at, xlate);
    return 0;
}

static int resolve_walk(struct fab *f, struct walk_start s, bool write, struct fab_target *t,
                        struct walk_gens *g, struct hop *rec)
{
    const struct topo_latency *lat = &f->ctl->latency;
    uint32_t host = s.host;
    uint16_t rid = s.rid;
    uint64_t addr = s.addr, len = s.len;
    bool cpu = s.cpu, from_cpu = s.cpu;
    uint32_t at = s.at;
    const struct fab_hswitch *hs = f->ctl->hswitches;
    struct fab_iommu_span span = { 0, 0, 0 };
    for (int depth = s.depth; depth < FAB_MAX_CHAIN; depth++) {
        uint64_t phys = addr;
        t->region = FAB_REGION_NONE;
        /* With its host's IOMMU on, a device's access goes to the root complex to be
         * translated, whatever it is bound for (smartio-tocs-2021 §7.3.1). */
        bool xlate = !cpu && fab_host(f, host)->iommu;
        if (xlate)
            t->walks++;
        if (!cpu) {
            uint64_t contig;
            const uint32_t *gen_at;
            uint32_t gen;
            int rc = fab_iommu_translate_gen(f, host, rid, addr, len, write, from_cpu, &phys,
                                             &contig, &gen_at, &gen, depth ? NULL : &span);
            gens_add(g, gen_at, gen);
            if (rc) {
                t->err = rc;
                t->len = contig;
                return 0;
            }
            len = contig;
        }
        t->host = host;
        t->addr = phys;
        t->len = len;
        const struct fab_host *h = fab_host(f, host);
        /* RAM and the MSI region are behind the root complex. */
        uint32_t to_root = lat->enabled ? fab_lat_tree_ns(hs, lat->root_ns, at, 0, xlate) : 0;
        if (phys >= FAB_MSI_BASE && phys - FAB_MSI_BASE < FAB_MSI_SIZE) {
            t->path_ns += to_root;
            t->region = FAB_REGION_MSI;
            t->len = min64(len, FAB_MSI_SIZE - (phys - FAB_MSI_BASE));
            return 0;
        }
        if (phys - FAB_RAM_BASE < h->ram_size) { /* RAM starts at 0: one compare */
            t->path_ns += to_root;
            t->region = FAB_REGION_RAM;
            t->len = min64(len, h->ram_size - (phys - FAB_RAM_BASE));
            return 0;
        }
        uint64_t vm_off;
        const struct fab_vm *vm = fab_vm_at(f, host, phys, &vm_off);
        if (vm) { /* guest RAM: a RAM region of its own (docs/vm.md) */
            t->path_ns += to_root;
            t->region = FAB_REGION_RAM;
            t->len = min64(len, vm->mem - vm_off);
            return 0;
        }
        for (uint32_t i = 0; i < h->nfuncs; i++) {
            const struct fab_function *fn = fab_func(f, h->func_first + i);
            for (int b = 0; b < FAB_BARS; b += 2) {
                const struct fab_bar *bar = &fn->bar[b];
                if (bar->kind == FAB_BAR_NONE || phys < bar->addr || phys - bar->addr >= bar->size)
                    continue;
                t->region = FAB_REGION_DEVICE;
                t->fn = h->func_first + i;
                if (lat->enabled) /* peer to peer: through the root when translated */
                    t->path_ns += fab_lat_tree_ns(hs, lat->root_ns, at, fn->at, xlate);
                t->split |= xlate;
                t->addr = bar->off + (phys - bar->addr);
                t->len = min64(len, bar->size - (phys - bar->addr));
                return 0;
            }
        }
        int ai = window_at(f, host, phys);
        if (ai < 0) {
            t->err = -EIO; /* master abort: nothing decodes this address ... */
            t->len = min64(len, next_decoded(f, host, phys) - phys); /* ... up to what does */
            return 0;
        }
        struct fab_adapter *a = fab_adapter(f, (uint32_t)ai);
        uint64_t off = phys - a->bar_addr;
        struct fab_lut_entry *e = &fab_lut(f, a)[off / a->lut_size];
        uint64_t in = off % a->lut_size;
        len = min64(len, a->lut_size - in);
        t->len = len;
        t->region = FAB_REGION_WINDOW;
        if (!atomic_load_explicit(&e->valid, memory_order_acquire)) {
            t->err = -EIO; /* unprogrammed LUT entry: unsupported request */
            return 0;
        }
        if (e->flags & FAB_LUT_MCAST)
            return resolve_mcast(f, ai, e->peer_host, e->peer_addr + in, write, rid, xlate, at, t);
        uint32_t peer = e->peer_adapter, target = e->peer_host;
        uint64_t peer_addr = e->peer_addr + in;
        uint32_t hops;
        if (!fab_path_up(f, (uint32_t)ai, peer, &hops)) {
            t->err = -ENOLINK;
            return 0;
        }
        /* Completions of a read route back by requester ID (smartio-tocs-2021 §8). */
        if (!write && !fab_rid_present(f, (uint32_t)ai, rid)) {
            t->err = -EACCES;
            return 0;
        }
        t->hops += hops;
        if (!t->ntbs++)
            t->egress = (uint32_t)ai + 1;
        t->split |= xlate;
        if (lat->enabled) {
            int p = fab_peer_index(f, (uint32_t)ai, peer);
            /* The adapter's own DMA engine is already at its window. */
            bool self = rid == a->rid && !xlate;
            t->path_ns += (self ? 0 : fab_lat_tree_ns(hs, lat->root_ns, at, a->at, xlate)) +
                          lat->ntb_ns + 2 * lat->adapter_switch_ns + a->peer_sw_ns[p];
        }
        if (rec && g && depth == 0 && !cpu) {
            /* The addresses of this requester that reach this LUT entry through this
             * mapping: the mapping's range cut to the entry's, in the requester's terms. */
            uint64_t lut_lo = phys - in, lut_hi = lut_lo + a->lut_size;
            uint64_t span_end = span.size == UINT64_MAX ? UINT64_MAX : span.phys + span.size;
            uint64_t lo = lut_lo > span.phys ? lut_lo : span.phys;
            uint64_t hi = lut_hi < span_end ? lut_hi : span_end;
            *rec = (struct hop){ .host = host, .rid = rid, .write = write, .valid = true,
                                 .base = span.iova + (lo - span.phys),
                                 .end = span.iova + (hi - span.phys),
                                 .delta = (span.phys - span.iova) + (e->peer_addr - lut_lo),
                                 .peer_host = target, .peer_rid = fab_adapter(f, peer)->rid,
                                 .peer_at = fab_adapter(f, peer)->at,
                                 .gen_at = g->n ? g->at[0] : NULL,
                                 .gen = g->n ? g->gen[0] : 0, .t = *t };
        }
        /* On the far side the transaction comes from that host's NTB function. */
        host = target;
        rid = fab_adapter(f, peer)->rid;
        at = fab_adapter(f, peer)->at;
        cpu = false;
        addr = peer_addr;
    }
    t->err = -ELOOP;
    return 0;
}

static int resolve_from(struct fab *f, uint32_t host, uint16_t rid, uint64_t addr, uint64_t len,
                        bool write, struct fab_target *t, struct walk_gens *g, struct hop *rec)
{
    const struct topo_latency *lat = &f->ctl->latency;
    *t = (struct fab_target){ .region = FAB_REGION_NONE, .host = host, .addr = addr, .len = len };
    bool cpu = is_cpu(rid);
    struct walk_start s = { .host = host, .rid = rid, .addr = addr, .len = len, .depth = 0,
                            .cpu = cpu,
                            .at = cpu || !lat->enabled ? 0 : requester_at(f, host, rid) };
    return resolve_walk(f, s, write, t, g, rec);
}

/*
 * The IOTLB: successful translations of whole 4 KiB pages, per thread (each device model and
 * DMA engine is a thread), checked against the fabric's generations so that any change of a
 * LUT entry, IOMMU mapping, requester-ID table, link or host invalidates them all, and against
 * the generations of the IOMMU mappings they went through, which their unmap bumps: a
 * streaming mapping's unmap (one per I/O with per-I/O mapping) invalidates what was cached of
 * it alone, not the device's translations of its queues (smartio-tocs-2021 §4.3). Every
 * region boundary in the model is 4 KiB aligned (RAM sizes, BARs, LUT entries, IOMMU pages),
 * so within a page a translation is uniform.
 */
#define IOTLB_ENTRIES 64

struct iotlb_entry {
    const struct fab_ctl *ctl;
    uint32_t map_gen, tlb_gen, host;
    uint16_t rid;
    bool write, valid;
    uint64_t page;
    struct walk_gens g;
    struct fab_target t; /* for the whole page */
};

static _Thread_local struct iotlb_entry iotlb[IOTLB_ENTRIES];

static bool gens_hold(const struct walk_gens *g)
{
    for (uint32_t i = 0; i < g->n; i++)
        if (__atomic_load_n(g->at[i], __ATOMIC_ACQUIRE) != g->gen[i])
            return false;
    return true;
}

/* The first crossings of a thread's walks: the last HOP_ENTRIES recorded, replaced in turn. */
#define HOP_ENTRIES 8
static _Thread_local struct hop hop_cache[HOP_ENTRIES];
static _Thread_local uint32_t hop_next;

static const struct hop *hop_find(const struct fab *f, uint32_t map_gen, uint32_t tlb_gen,
                                  uint32_t host, uint16_t rid, uint64_t addr, bool write)
{
    for (uint32_t i = 0; i < HOP_ENTRIES; i++) {
        const struct hop *h = &hop_cache[i];
        if (h->valid && h->ctl == f->ctl && h->host == host && h->rid == rid &&
            h->write == write && addr >= h->base && addr < h->end && h->map_gen == map_gen &&
            h->tlb_gen == tlb_gen &&
            (!h->gen_at || __atomic_load_n(h->gen_at, __ATOMIC_ACQUIRE) == h->gen))
            return h;
    }
    return NULL;
}

int fab_resolve(struct fab *f, uint32_t host, uint16_t rid, uint64_t addr, uint64_t len,
                bool write, struct fab_target *t)
{
    if (host >= f->ctl->nhosts || !len)
        return -EINVAL;
    if (fab_iommu_probing())
        return resolve_from(f, host, rid, addr, len, write, t, NULL, NULL);
    uint32_t map_gen = atomic_load_explicit(&f->ctl->map_gen, memory_order_acquire);
    uint32_t tlb_gen = atomic_load_explicit(&f->ctl->tlb_gen, memory_order_acquire);
    uint64_t page = addr & ~4095ull, in = addr - page;
    struct iotlb_entry *e =
        &iotlb[(page >> 12 ^ (uint64_t)host * 0x9e37 ^ (uint64_t)rid * 0x85eb ^ write) % IOTLB_ENTRIES];
    /* Only accesses within one page use it: a long transfer resolves in long extents. */
    if (len <= 4096 - in && e->valid && e->ctl == f->ctl && e->map_gen == map_gen && e->tlb_gen == tlb_gen &&
        e->page == page && e->host == host && e->rid == rid && e->write == write &&
        gens_hold(&e->g)) {
        *t = e->t;
        t->addr += in;
        t->len = len;
        if (t->walks && f->ctl->latency.enabled) /* the device's IOTLB holds it */
            t->path_ns += fab_lat_iommu_ns(&f->ctl->latency, t->walks, true);
        return 0;
    }
    struct walk_gens g = { 0 };
    int rc;
    const struct hop *hp = is_cpu(rid) ? NULL : hop_find(f, map_gen, tlb_gen, host, rid, addr, write);
    if (hp) {
        /* The first crossing is known: walk on from the far side. */
        *t = hp->t;
        gens_add(&g, hp->gen_at, hp->gen);
        struct walk_start s = { .host = hp->peer_host, .rid = hp->peer_rid,
                                .addr = addr + hp->delta, .len = min64(len, hp->end - addr),
                                .depth = 1, .cpu = false, .at = hp->peer_at };
        rc = resolve_walk(f, s, write, t, &g, NULL);
    } else {
        struct hop rec = { .valid = false };
        rc = resolve_from(f, host, rid, addr, len, write, t, &g, &rec);
        if (rec.valid) {
            rec.ctl = f->ctl;
            rec.map_gen = map_gen;
            rec.tlb_gen = tlb_gen;
            hop_cache[hop_next++ % HOP_ENTRIES] = rec;
        }
    }
    /* Not in the IOTLB: each translation walks the I/O page table (added after caching). */
    uint32_t walk_ns = t->walks && f->ctl->latency.enabled
                     ? fab_lat_iommu_ns(&f->ctl->latency, t->walks, false) : 0;
    if (rc || t->err || (t->region != FAB_REGION_RAM && t->region != FAB_REGION_DEVICE) ||
        g.n > WALK_GENS) {
        t->path_ns += walk_ns;
        return rc;
    }
    *e = (struct iotlb_entry){ .ctl = f->ctl, .map_gen = map_gen, .tlb_gen = tlb_gen,
                               .host = host, .rid = rid, .write = write, .valid = true,
                               .page = page, .g = g, .t = *t };
    e->t.addr -= in;
    e->t.len = 4096;
    t->path_ns += walk_ns;
    return 0;
}

int fab_resolve_probe(struct fab *f, uint32_t host, uint16_t rid, uint64_t addr, uint64_t len,
                      bool write, struct fab_target *t)
{
    fab_iommu_set_probing(true);
    int rc = fab_resolve(f, host, rid, addr, len, write, t);
    fab_iommu_set_probing(false);
    return rc;
}

/* ---------------------------------------------------------------- device DMA */

struct extent {
    struct fab_target t;
    uint64_t off; /* offset within the request */
};

/* Resolve a whole range into extents; on the first error return it (nothing is transferred).
 * Faults other than IOMMU ones (already recorded) are recorded on the requester's host.
 * Extents go into `inline_buf` (INLINE_EXTENTS) and spill to the heap only for long chains;
 * the caller frees *out when it is not inline_buf. */
#define INLINE_EXTENTS 8
static int resolve_all(struct fab *f, uint32_t host, uint16_t rid, uint64_t addr, uint64_t len,
                       bool write, struct extent *inline_buf, struct extent **out, size_t *n)
{
    size_t cap = INLINE_EXTENTS, cnt = 0;
    struct extent *x = inline_buf;
    int rc = 0;
    for (uint64_t off = 0; off < len;) {
        struct fab_target t;
        rc = fab_resolve(f, host, rid, addr + off, len - off, write, &t);
        if (rc == 0 && t.err)
            rc = t.err;
        if (rc) {
            if (rc == -EIO || (rc == -EACCES && t.region == FAB_REGION_WINDOW))
                fab_fault_record(f, host, rid, addr + off, write, rc);
            break;
        }
        if (cnt == cap) {
            struct extent *nx = malloc(cap * 2 * sizeof *x);
            if (!nx) {
                rc = -ENOMEM;
                break;
            }
            memcpy(nx, x, cnt * sizeof *x);
            if (x != inline_buf)
                free(x);
            x = nx;
            cap *= 2;
        }
        x[cnt++] = (struct extent){ .t = t, .off = off };
        off += t.len;
    }
    if (rc) {
        if (x != inline_buf)
            free(x);
        return rc;
    }
    *out = x;
    *n = cnt;
    return 0;
}

static void free_extents(struct extent *x, struct extent *inline_buf)
{
    if (x != inline_buf)
        free(x);
}

/* The latency model's delay for a DMA of len bytes over the extents' path: the longest path's
 * latency, plus the data's time on the wire of the first NTB link, which DMA from every channel
 * shares: a transfer's data starts when the link has carried the earlier transfers' data. */
static void delay_for(struct fab *f, const struct extent *x, size_t n, uint64_t len, bool read,
                      uint64_t started, uint64_t queued)
{
    const struct topo_latency *l = &f->ctl->latency;
    if (!l->enabled)
        return;
    uint64_t path = 0; /* the longest path among the extents */
    uint32_t egress = 0;
    bool split = false;
    for (size_t i = 0; i < n; i++) {
        path = x[i].t.path_ns > path ? x[i].t.path_ns : path;
        split |= x[i].t.split;
        if (!egress)
            egress = x[i].t.egress;
    }
    uint64_t want = fab_lat_dma_ns(f, path, len, read, split);
    uint64_t end = started + want;
    if (egress) {
        struct fab_adapter *a = fab_adapter(f, egress - 1);
        _Atomic uint64_t *busy = read ? &a->wire_in_until : &a->wire_out_until;
        uint64_t mbps = l->link_mbps ? l->link_mbps : 6000;
        uint64_t wire = len * 1000ull / mbps, b = atomic_load(busy), start;
        uint64_t from = queued && queued < started ? queued : started;
        do
            start = b > from ? b : from;
        while (!atomic_compare_exchange_weak(busy, &b, start + wire));
        end = start + want;
    }
    uint64_t now = fab_now_ns();
    if (end > now)
        fab_lat_delay(end - now);
}

/* When a transfer started, for the latency model; without it, no clock is read. */
static uint64_t lat_start(const struct fab *f)
{
    return f->ctl->latency.enabled ? fab_now_ns() : 0;
}

/* Where a resolved RAM or BAR extent lives in this process. */
static void *extent_mem(struct fab *f, const struct fab_target *t, uint64_t skip, uint64_t len)
{
    if (t->region == FAB_REGION_DEVICE)
        return fab_bar_mem(f, t->fn, t->addr + skip, len);
    return fab_ram(f, t->host, t->addr + skip, len);
}

static int write_extent(struct fab *f, struct fab_target *t, const void *src);

/*
 * A write into multicast group t->fn at offset t->addr, arriving at the switch from adapter
 * t->egress - 1 (smartio-tocs-2021 §6.5): the switch sends it out of every member's port but
 * the one it came in by; the member's overlay turns the offset into an address of the member's
 * map, where it goes on as any write arriving through the member's adapter (its IOMMU, then
 * RAM or a BAR). A member whose path is down gets nothing (a posted write is dropped there);
 * an overlay that reaches nothing is a fault recorded on the member. Each member gets the
 * write whole or not at all: the members are read once, between write_begin and write_end,
 * which a leave waits for (fab_mcast.c). The latency model's path is the longest to a member; the data crosses
 * the sender's link once.
 */
static int write_mcast(struct fab *f, struct fab_target *t, const void *src)
{
    struct fab_mcast *m = fab_mcast(f, t->fn);
    const struct topo_latency *lat = &f->ctl->latency;
    uint32_t sender = t->egress - 1, worst = 0;
    const struct fab_adapter *sa = fab_adapter(f, sender);
    uint32_t phase = fab_mcast_write_begin(m);
    for (uint32_t h = 0; h < f->ctl->nhosts; h++) {
        const struct fab_mcast_member *mb = &m->member[h];
        if (atomic_load(&mb->joined) != 1 || mb->adapter == sender ||
            !fab_path_up(f, sender, mb->adapter, NULL))
            continue;
        uint16_t rid = fab_adapter(f, mb->adapter)->rid;
        uint64_t at = mb->overlay + t->addr;
        struct extent buf[INLINE_EXTENTS], *x;
        size_t n;
        if (resolve_all(f, h, rid, at, t->len, true, buf, &x, &n))
            continue; /* the fault is recorded on the member */
        for (size_t i = 0; i < n; i++) {
            if (x[i].t.region == FAB_REGION_RAM || x[i].t.region == FAB_REGION_DEVICE)
                write_extent(f, &x[i].t, (const char *)src + x[i].off);
            else
                fab_fault_record(f, h, rid, at + x[i].off, true, -EIO);
        }
        if (lat->enabled) {
            int p = fab_peer_index(f, sender, mb->adapter);
            uint32_t ns = lat->ntb_ns + 2 * lat->adapter_switch_ns +
                          (p >= 0 ? sa->peer_sw_ns[p] : 0) + (n ? x[0].t.path_ns : 0);
            worst = ns > worst ? ns : worst;
        }
        free_extents(x, buf);
    }
    fab_mcast_write_end(m, phase);
    t->path_ns += worst;
    return 0;
}

static int write_extent(struct fab *f, struct fab_target *t, const void *src)
{
    if (t->region == FAB_REGION_MCAST)
        return write_mcast(f, t, src);
    if (t->region == FAB_REGION_MSI) {
        uint32_t vec = 0;
        memcpy(&vec, src, t->len < sizeof vec ? t->len : sizeof vec);
        fab_msi_raise(f, t->host, vec);
        return 0;
    }
    void *dst = extent_mem(f, t, 0, t->len);
    if (!dst)
        return -errno;
    if (t->len <= 16 && !(((uintptr_t)dst | t->len) & 3)) {
        /* A small write lands as one TLP does: a reader that sees its last dword sees the
         * rest (an NVMe completion's phase tag is in its last dword). memcpy gives no order. */
        const char *s = src;
        for (uint64_t i = 0; i + 4 < t->len; i += 4) {
            uint32_t v;
            memcpy(&v, s + i, 4);
            __atomic_store_n((uint32_t *)dst + i / 4, v, __ATOMIC_RELAXED);
        }
        uint32_t last;
        memcpy(&last, s + t->len - 4, 4);
        __atomic_store_n((uint32_t *)dst + t->len / 4 - 1, last, __ATOMIC_RELEASE);
    } else {
        memcpy(dst, src, t->len);
    }
    /* A posted write into a register BAR (a doorbell, peer to peer) reaches its model; one
     * into a memory BAR only a model that watches it. */
    if (t->region == FAB_REGION_DEVICE)
        fab_fn_written(f, t->fn, t->addr);
    return 0;
}

int fab_dev_write(struct fab *f, uint32_t host, uint16_t rid, uint64_t addr, const void *src,
                  uint64_t len)
{
    struct extent buf[INLINE_EXTENTS], *x;
    size_t n;
    uint64_t t0 = lat_start(f);
    int rc = resolve_all(f, host, rid, addr, len, true, buf, &x, &n);
    if (rc)
        return rc;
    for (size_t i = 0; i < n && !rc; i++)
        rc = write_extent(f, &x[i].t, (const char *)src + x[i].off);
    delay_for(f, x, n, len, false, t0, 0);
    free_extents(x, buf);
    return rc;
}

int fab_dev_read(struct fab *f, uint32_t host, uint16_t rid, uint64_t addr, void *dst,
                 uint64_t len)
{
    int first = 0;
    uint64_t t0 = lat_start(f);
    uint64_t path = 0;
    bool split = false;
    for (uint64_t off = 0; off < len;) {
        struct fab_target t;
        int rc = fab_resolve(f, host, rid, addr + off, len - off, false, &t);
        if (rc)
            return rc;
        char *d = (char *)dst + off;
        if (!t.err && (t.region == FAB_REGION_RAM || t.region == FAB_REGION_DEVICE)) {
            void *s = extent_mem(f, &t, 0, t.len);
            if (s)
                memcpy(d, s, t.len);
            else
                t.err = -errno;
        } else if (!t.err) {
            t.err = -EIO; /* the MSI region is write-only */
        }
        if (t.err) {
            memset(d, 0xff, t.len); /* unsupported request / completion abort: all ones */
            if (t.err == -EIO || (t.err == -EACCES && t.region == FAB_REGION_WINDOW))
                fab_fault_record(f, host, rid, addr + off, false, t.err);
            if (!first)
                first = t.err;
        }
        path = t.path_ns > path ? t.path_ns : path;
        split |= t.split;
        off += t.len;
    }
    if (f->ctl->latency.enabled) {
        uint64_t want = fab_lat_dma_ns(f, path, len, true, split), spent = fab_now_ns() - t0;
        if (want > spent)
            fab_lat_delay(want - spent);
    }
    return first;
}

int fab_dev_copy(struct fab *f, uint32_t host, uint16_t rid, uint64_t dst, uint64_t src,
                 uint64_t len)
{
    return fab_dev_copy_queued(f, host, rid, dst, src, len, 0);
}

int fab_dev_copy_queued(struct fab *f, uint32_t host, uint16_t rid, uint64_t dst, uint64_t src,
                        uint64_t len, uint64_t queued)
{
    struct extent sbuf[INLINE_EXTENTS], dbuf[INLINE_EXTENTS], *s, *d;
    size_t ns, nd;
    uint64_t t0 = lat_start(f);
    int rc = resolve_all(f, host, rid, src, len, false, sbuf, &s, &ns);
    if (rc)
        return rc;
    rc = resolve_all(f, host, rid, dst, len, true, dbuf, &d, &nd);
    if (rc) {
        free_extents(s, sbuf);
        return rc;
    }
    size_t i = 0, j = 0;
    uint64_t off = 0;
    uint32_t mcast_ns = 0;
    while (off < len && !rc) {
        const struct fab_target *ts = &s[i].t, *td = &d[j].t;
        uint64_t in_s = off - s[i].off, in_d = off - d[j].off;
        uint64_t chunk = min64(ts->len - in_s, td->len - in_d);
        if (ts->region != FAB_REGION_RAM && ts->region != FAB_REGION_DEVICE) {
            rc = -EIO;
            break;
        }
        const char *sp = extent_mem(f, ts, in_s, chunk);
        if (!sp) {
            rc = -errno;
            break;
        }
        struct fab_target part = *td;
        part.addr += in_d;
        part.len = chunk;
        uint32_t before = part.path_ns;
        rc = write_extent(f, &part, sp);
        if (part.path_ns - before > mcast_ns) /* a multicast write's longest way to a member */
            mcast_ns = part.path_ns - before;
        off += chunk;
        if (off - s[i].off == ts->len)
            i++;
        if (off - d[j].off == td->len)
            j++;
    }
    for (size_t k = 0; k < nd && mcast_ns; k++)
        if (d[k].t.region == FAB_REGION_MCAST)
            d[k].t.path_ns += mcast_ns;
    /* Reads dominate a copy's time when the source is remote; otherwise the posted writes. */
    bool remote_src = false;
    for (size_t k = 0; k < ns; k++)
        remote_src |= s[k].t.ntbs > 0;
    delay_for(f, remote_src ? s : d, remote_src ? ns : nd, len, remote_src, t0, queued);
    free_extents(s, sbuf);
    free_extents(d, dbuf);
    return rc;
}
