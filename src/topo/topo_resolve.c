/*
 * Topology resolution: everything that needs the whole file read — adapters with their
 * defaults, hosts, switches, cables and switch trees (peers), devices and the latency model.
 * Problems are reported as FILE:LINE like the parser's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "topo_int.h"

/* ---- resolution: everything that needs the whole file ---- */

static uint64_t adapter_value(const struct pstate *st, const struct vals *own, enum key k)
{
    if (own && (own->ok >> k & 1))
        return own->v[k];
    if (st->single[SEC_DEFAULTS].ok >> k & 1)
        return st->single[SEC_DEFAULTS].v[k];
    return topo_keys[k].def;
}

/* The window (lut_entries * lut_size) must fit the 64 GiB BAR slot. Checked where it is set. */
static void check_window(struct pstate *st, const struct vals *own, const char *who)
{
    const struct vals *v = own ? own : &st->single[SEC_DEFAULTS];
    if (!(v->ok & (1ull << K_LUT_SIZE | 1ull << K_LUT_ENTRIES)))
        return; /* nothing set here: checked where the values come from */
    uint64_t size = adapter_value(st, own, K_LUT_SIZE);
    uint64_t n = adapter_value(st, own, K_LUT_ENTRIES);
    if (size <= WINDOW_MAX / n)
        return;
    int line = v->line[K_LUT_SIZE] > v->line[K_LUT_ENTRIES] ? v->line[K_LUT_SIZE]
                                                             : v->line[K_LUT_ENTRIES];
    char a[32];
    topo_perr(st, line, "%s: window lut_entries * lut_size = %" PRIu64 " * %s exceeds 64 GiB; lower "
         "lut_entries or lut_size", who, n, topo_fmt_size(size, a, sizeof a));
}

static void add_adapter(struct pstate *st, uint32_t host, const char *name, int line,
                        struct sect_adapter *sa, uint32_t *on_host)
{
    struct topo *t = st->t;
    if (sa)
        sa->used = true; /* its host exists, whatever else is wrong */
    if (*on_host == ADAPTERS_PER_HOST)
        topo_perr(st, line, "host %s has more than %d adapters (their requester IDs are PCIe devices "
             "0..31 on one bus); remove some", t->hosts[host].name, ADAPTERS_PER_HOST);
    if (t->nadapters >= TOPO_MAX_ADAPTERS) {
        st->line = line;
        topo_limit_error(st, L_ADAPTERS);
        return;
    }
    struct topo_adapter *a = &t->adapters[t->nadapters++];
    size_t hl = strlen(t->hosts[host].name), nl = strlen(name);
    memcpy(a->name, t->hosts[host].name, hl); /* the sum was checked when parsed */
    a->name[hl] = '.';
    memcpy(a->name + hl + 1, name, nl + 1);
    a->host = host;
    a->index_on_host = (*on_host)++;
    a->line = sa ? sa->line : line;
    const struct vals *own = sa ? &sa->p : NULL;
    a->lut_size = adapter_value(st, own, K_LUT_SIZE);
    a->lut_entries = (uint32_t)adapter_value(st, own, K_LUT_ENTRIES);
    a->rid_entries = (uint32_t)adapter_value(st, own, K_RID_ENTRIES);
    a->db_bits = (uint32_t)adapter_value(st, own, K_DOORBELLS);
    a->spads = (uint32_t)adapter_value(st, own, K_SCRATCHPADS);
    a->dma_channels = (uint32_t)adapter_value(st, own, K_DMA_CHANNELS);
    if (sa) {
        char who[TOPO_NAME_MAX + 16];
        snprintf(who, sizeof who, "adapter %s", a->name);
        check_window(st, own, who);
    }
}

/* Adapters of a host are contiguous (fab_host.adapter_first): the adapters list, then its
 * [adapter] sections in file order. */
static void resolve_adapters(struct pstate *st)
{
    struct topo *t = st->t;
    check_window(st, NULL, "[defaults]");
    for (uint32_t h = 0; h < t->nhosts; h++) {
        uint32_t on_host = 0;
        for (uint32_t i = 0; i < st->nlists; i++) {
            if (st->lists[i].host != h)
                continue;
            struct sect_adapter *sa = NULL;
            for (uint32_t j = 0; j < st->nsects && !sa; j++)
                if (!strcmp(st->sects[j].host, t->hosts[h].name) &&
                    !strcmp(st->sects[j].name, st->lists[i].name))
                    sa = &st->sects[j];
            add_adapter(st, h, st->lists[i].name, st->lists[i].line, sa, &on_host);
        }
        for (uint32_t j = 0; j < st->nsects; j++)
            if (!st->sects[j].used && !strcmp(st->sects[j].host, t->hosts[h].name))
                add_adapter(st, h, st->sects[j].name, st->sects[j].line, &st->sects[j],
                            &on_host);
    }
    for (uint32_t j = 0; j < st->nsects; j++)
        if (!st->sects[j].used)
            topo_perr(st, st->sects[j].line, "[adapter %s.%s]: no host named '%s'; declare "
                 "[host %s] or fix the name", st->sects[j].host, st->sects[j].name,
                 st->sects[j].host, st->sects[j].host);
}

static void resolve_hosts(struct pstate *st)
{
    struct topo *t = st->t;
    for (uint32_t i = 0; i < t->nhosts; i++) {
        struct topo_host *h = &t->hosts[i];
        const struct vals *v = &st->host_v[i];
        const struct vals *d = &st->single[SEC_DEFAULTS];
        h->ram_size = v->ok >> K_RAM & 1 ? v->v[K_RAM]
                    : d->ok >> K_RAM & 1 ? d->v[K_RAM] : topo_keys[K_RAM].def;
        h->iommu = (int)(v->ok >> K_IOMMU & 1 ? v->v[K_IOMMU]
                       : d->ok >> K_IOMMU & 1 ? d->v[K_IOMMU] : topo_keys[K_IOMMU].def);
        if (!v->line[K_NODE_ID]) {
            topo_perr(st, h->line, "[host %s] has no node_id; add node_id = N (1..65535, unique)",
                 h->name);
            continue;
        }
        if (!(v->ok >> K_NODE_ID & 1))
            continue; /* reported */
        h->node_id = (uint32_t)v->v[K_NODE_ID];
        for (uint32_t j = 0; j < i; j++)
            if (t->hosts[j].node_id == h->node_id) {
                topo_perr(st, v->line[K_NODE_ID], "node_id %" PRIu32 " is already used by host %s at "
                     "line %d; give every host its own node id", h->node_id, t->hosts[j].name,
                     st->host_v[j].line[K_NODE_ID]);
                break;
            }
    }
}

static void resolve_switches(struct pstate *st)
{
    struct topo *t = st->t;
    for (uint32_t i = 0; i < t->nswitches; i++) {
        struct topo_switch *s = &t->switches[i];
        const struct vals *v = &st->sw_v[i];
        if (!v->line[K_PORTS])
            topo_perr(st, s->line, "[switch %s] has no ports; add ports = N (2..256; an MXS824 has "
                 "24)", s->name);
        s->ports = v->ok >> K_PORTS & 1 ? (uint32_t)v->v[K_PORTS] : 0; /* 0: unknown, no check */
        s->latency_ns = (uint32_t)(v->ok >> K_SW_LATENCY & 1 ? v->v[K_SW_LATENCY]
                                                             : topo_keys[K_SW_LATENCY].def);
        st->uf[i] = i;
    }
}

static uint32_t uf_find(struct pstate *st, uint32_t x)
{
    while (st->uf[x] != x)
        x = st->uf[x] = st->uf[st->uf[x]];
    return x;
}

static bool resolve_end(struct pstate *st, const char *s, int line, struct topo_end *e)
{
    const struct topo *t = st->t;
    int i;
    if (strchr(s, '.')) {
        if ((i = topo_adapter_by_name(t, s)) >= 0) {
            *e = (struct topo_end){ TOPO_END_ADAPTER, (uint32_t)i };
            return true;
        }
        char host[TOPO_NAME_MAX];
        size_t hl = (size_t)(strchr(s, '.') - s);
        topo_copy_name(host, s);
        host[hl < TOPO_NAME_MAX ? hl : TOPO_NAME_MAX - 1] = '\0';
        topo_perr(st, line, "no adapter or switch named '%s'; declare it (adapters = in [host %s], "
             "or [adapter %s]) or fix the name", s, host, s);
        return false;
    }
    if ((i = topo_switch_by_name(t, s)) >= 0) {
        *e = (struct topo_end){ TOPO_END_SWITCH, (uint32_t)i };
        return true;
    }
    if ((i = topo_host_by_name(t, s)) >= 0)
        topo_perr(st, line, "no adapter or switch named '%s'; %s is a host, so name one of its "
             "adapters as %s.ADAPTER", s, s, s);
    else
        topo_perr(st, line, "no adapter or switch named '%s'; declare [switch %s], or write an "
             "adapter as HOST.ADAPTER", s, s);
    return false;
}

static const char *end_name(const struct topo *t, const struct topo_end *e)
{
    return e->kind == TOPO_END_ADAPTER ? t->adapters[e->index].name : t->switches[e->index].name;
}

static void resolve_links(struct pstate *st)
{
    struct topo *t = st->t;
    for (uint32_t i = 0; i < st->nrl; i++) {
        const struct raw_link *r = &st->rl[i];
        struct topo_link l = { .line = r->line };
        bool oka = resolve_end(st, r->a, r->line, &l.a);
        bool okb = resolve_end(st, r->b, r->line, &l.b);
        if (!oka || !okb)
            continue;
        if (l.a.kind == l.b.kind && l.a.index == l.b.index) {
            topo_perr(st, r->line, "cable from %s to itself; a cable joins two different ends",
                 r->a);
            continue;
        }
        bool ok = true;
        const struct topo_end *ends[2] = { &l.a, &l.b };
        for (int k = 0; k < 2; k++) {
            const struct topo_end *e = ends[k];
            if (e->kind == TOPO_END_ADAPTER && st->adapter_link_line[e->index]) {
                topo_perr(st, r->line, "adapter %s is already cabled at line %d; an adapter has one "
                     "port, so give the host another adapter for this cable",
                     end_name(t, e), st->adapter_link_line[e->index]);
                ok = false;
            }
            if (e->kind == TOPO_END_SWITCH && t->switches[e->index].ports &&
                st->sw_links[e->index] >= t->switches[e->index].ports) {
                topo_perr(st, r->line, "switch %s has only %" PRIu32 " ports and all are cabled; "
                     "raise ports or cascade another switch", end_name(t, e),
                     t->switches[e->index].ports);
                ok = false;
            }
        }
        if (ok && l.a.kind == TOPO_END_SWITCH && l.b.kind == TOPO_END_SWITCH &&
            uf_find(st, l.a.index) == uf_find(st, l.b.index)) {
            topo_perr(st, r->line, "cable %s = %s closes a loop of switches; ntblend routes over "
                 "trees, so remove one cable of the loop", r->a, r->b);
            ok = false;
        }
        if (!ok)
            continue;
        for (int k = 0; k < 2; k++) {
            if (ends[k]->kind == TOPO_END_ADAPTER)
                st->adapter_link_line[ends[k]->index] = r->line;
            else
                st->sw_links[ends[k]->index]++;
        }
        if (l.a.kind == TOPO_END_SWITCH && l.b.kind == TOPO_END_SWITCH)
            st->uf[uf_find(st, l.a.index)] = uf_find(st, l.b.index);
        t->links[t->nlinks++] = l; /* nrl <= TOPO_MAX_LINKS */
    }

    /* Every adapter on a switch tree reaches all the others: at most TOPO_MAX_PEERS. */
    uint32_t total[TOPO_MAX_SWITCHES] = { 0 }, seen[TOPO_MAX_SWITCHES] = { 0 };
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t i = 0; i < t->nlinks; i++) {
            const struct topo_link *l = &t->links[i];
            if ((l->a.kind == TOPO_END_SWITCH) == (l->b.kind == TOPO_END_SWITCH))
                continue; /* only adapter-switch cables attach adapters to trees */
            uint32_t sw = l->a.kind == TOPO_END_SWITCH ? l->a.index : l->b.index;
            uint32_t root = uf_find(st, sw);
            if (pass == 0) {
                total[root]++;
            } else if (++seen[root] == TOPO_MAX_PEERS + 2) {
                topo_perr(st, l->line, "the switch tree of %s connects %" PRIu32 " adapters, so each "
                     "would reach %" PRIu32 " peers, more than %d (TOPO_MAX_PEERS); split the "
                     "hosts over separate switch trees", t->switches[sw].name, total[root],
                     total[root] - 1, TOPO_MAX_PEERS);
            }
        }
}

static void resolve_devices(struct pstate *st)
{
    struct topo *t = st->t;
    for (uint32_t i = 0; i < t->ndevices; i++) {
        struct topo_device *d = &t->devices[i];
        if (!st->dev_host_line[i]) {
            topo_perr(st, d->line, "[device %s] has no host; add host = NAME (the host it sits in)",
                 d->name);
        } else if (st->dev_host[i][0]) { /* empty: an invalid name, reported */
            int h = topo_host_by_name(t, st->dev_host[i]);
            if (h < 0)
                topo_perr(st, st->dev_host_line[i], "[device %s]: no host named '%s'; declare "
                     "[host %s] or fix the name", d->name, st->dev_host[i], st->dev_host[i]);
            else
                d->host = (uint32_t)h;
        }
        if (!st->dev_type_line[i])
            topo_perr(st, d->line, "[device %s] has no type; add type = KIND (e.g. nvme)", d->name);
    }
}

static void resolve_latency(struct pstate *st)
{
    struct topo_latency *l = &st->t->latency;
    const struct vals *v = &st->single[SEC_LATENCY];
#define LAT(k) ((uint32_t)(v->ok >> (k) & 1 ? v->v[k] : topo_keys[k].def))
    l->enabled = (int)LAT(K_ENABLED);
    l->ntb_ns = LAT(K_NTB_NS);
    l->adapter_switch_ns = LAT(K_ADAPTER_SWITCH_NS);
    l->root_ns = LAT(K_ROOT_NS);
    l->doorbell_ns = LAT(K_DOORBELL_NS);
    l->max_read_requests = LAT(K_MAX_READS);
    l->read_request_bytes = LAT(K_READ_BYTES);
    l->link_mbps = LAT(K_LINK_MBPS);
    l->iotlb_hit_ns = LAT(K_IOTLB_HIT_NS);
    l->page_walk_ns = LAT(K_PAGE_WALK_NS);
    l->root_read_bytes = LAT(K_ROOT_READ_BYTES);
    l->root_max_reads = LAT(K_ROOT_MAX_READS);
#undef LAT
}

void topo_resolve(struct pstate *st)
{
    resolve_hosts(st);
    resolve_adapters(st);
    resolve_switches(st);
    resolve_links(st);
    resolve_devices(st);
    resolve_latency(st);
    topo_hswitch_resolve(st); /* after the latency model: a chassis link costs an NTB's */
}
