/*
 * `ntblend status [--json]`: what a running fabric looks like right now. The facts come from
 * the fabric's shared memory (host power, paths, LUT and requester-ID tables, doorbells, DMA
 * channels) plus one round of pings to every agent over its control socket, sent to all
 * agents at once so a fabric of 60 hosts answers within the same 1 s bound as one host.
 * The human table and the JSON document are two renderings of the same facts.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent_proto.h"
#include "cli.h"

#define PING_TIMEOUT_MS 1000

/* What an agent said (or did not say) when asked. */
struct health {
    const char *word;   /* "ok", "no answer", "not running", "none", "wrong pid" */
    bool ok;
    uint64_t boot_gen, allocated, mbox_msgs, dma_done;
    int fd, replies;
};

/* Ping every agent at once: PING then STATS on each socket, then collect replies until all
 * answered or the deadline passes. */
static void ping_agents(struct fab *f, struct health *hs)
{
    uint32_t n = f->ctl->nhosts;
    for (uint32_t i = 0; i < n; i++) {
        struct health *h = &hs[i];
        struct fab_host *host = fab_host(f, i);
        h->fd = -1;
        bool expected = atomic_load(&host->state) != FAB_HOST_DOWN;
        int fd = agent_connect(f->dir, i);
        if (fd < 0) {
            h->word = expected ? "not running" : "none";
            continue;
        }
        struct agent_req ping = { .op = AGENT_PING }, stats = { .op = AGENT_STATS };
        if (send(fd, &ping, sizeof ping, MSG_NOSIGNAL) != (ssize_t)sizeof ping ||
            send(fd, &stats, sizeof stats, MSG_NOSIGNAL) != (ssize_t)sizeof stats) {
            close(fd);
            h->word = expected ? "not running" : "none";
            continue;
        }
        h->fd = fd;
        h->word = "no answer";
    }
    struct pollfd *pfd = calloc(n ? n : 1, sizeof *pfd);
    uint32_t *who = calloc(n ? n : 1, sizeof *who);
    uint64_t deadline = fab_now_ns() + (uint64_t)PING_TIMEOUT_MS * 1000000ull;
    while (pfd && who) {
        nfds_t np = 0;
        for (uint32_t i = 0; i < n; i++)
            if (hs[i].fd >= 0) {
                pfd[np] = (struct pollfd){ .fd = hs[i].fd, .events = POLLIN };
                who[np++] = i;
            }
        uint64_t now = fab_now_ns();
        if (!np || now >= deadline)
            break;
        int r = poll(pfd, np, (int)((deadline - now) / 1000000ull) + 1);
        if (r < 0 && errno != EINTR)
            break;
        for (nfds_t k = 0; r > 0 && k < np; k++) {
            if (!pfd[k].revents)
                continue;
            struct health *h = &hs[who[k]];
            struct agent_rsp rsp;
            ssize_t got = recv(h->fd, &rsp, sizeof rsp, MSG_DONTWAIT);
            if (got < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            if (got != (ssize_t)sizeof rsp || rsp.rc != 0) {
                close(h->fd);
                h->fd = -1;
                continue; /* "no answer": it hung up or replied nonsense */
            }
            if (h->replies++ == 0) {
                pid_t pid = atomic_load(&fab_host(f, who[k])->agent_pid);
                h->ok = (pid_t)rsp.a == pid;
                h->word = h->ok ? "ok" : "wrong pid"; /* a stray agent holds the socket */
                h->boot_gen = rsp.b;
                h->allocated = rsp.c;
            } else {
                h->mbox_msgs = rsp.b;
                h->dma_done = rsp.c;
                close(h->fd);
                h->fd = -1;
            }
        }
    }
    for (uint32_t i = 0; i < n; i++)
        if (hs[i].fd >= 0)
            close(hs[i].fd);
    free(pfd);
    free(who);
}

static void fmt_size(uint64_t v, char *out, size_t len)
{
    static const char units[] = "KMGT";
    if (v == 0 || v % 1024) {
        snprintf(out, len, "%" PRIu64, v);
        return;
    }
    int u = -1;
    while (v % 1024 == 0 && v >= 1024 && u < 3) {
        v /= 1024;
        u++;
    }
    snprintf(out, len, "%" PRIu64 "%c", v, units[u]);
}

static uint32_t dma_in_use(const struct fab *f, const struct fab_adapter *a)
{
    uint32_t n = 0;
    struct fab_dma_chan *ch = fab_dma(f, a);
    for (uint32_t i = 0; i < a->dma_channels; i++)
        n += atomic_load(&ch[i].owner_pid) != 0;
    return n;
}

/* LUT entries the agent holds for its mailboxes (routes to peers, kept once set up). */
static uint32_t lut_agent(const struct fab *f, const struct fab_adapter *a)
{
    const struct fab_lut_entry *e = fab_lut(f, a);
    uint32_t n = 0;
    for (uint32_t i = 0; i < a->lut_entries; i++)
        n += (e[i].flags & FAB_LUT_AGENT) != 0;
    return n;
}

/* Mappings in a host's IOMMU table. */
static uint32_t iommu_maps(const struct fab *f, uint32_t host)
{
    const struct fab_host *h = fab_host(f, host);
    const struct fab_iommu_map *m = fab_iommu_table(f, host);
    uint32_t n = 0;
    for (uint32_t i = 0; i < h->iommu_nmaps; i++)
        n += m[i].used != 0;
    return n;
}

/* A link end by name: the adapter's "HOST.ADAPTER" or the switch's name. */
static const char *end_name(const struct fab *f, const struct topo_end *e)
{
    return e->kind == TOPO_END_ADAPTER ? fab_adapter(f, e->index)->name
                                       : fab_switch(f, e->index)->name;
}

static uint32_t switch_ports_used(const struct fab *f, uint32_t s)
{
    uint32_t n = 0;
    for (uint32_t l = 0; l < f->ctl->nlinks; l++) {
        const struct fab_link *lk = fab_link(f, l);
        n += lk->a.kind == TOPO_END_SWITCH && lk->a.index == s;
        n += lk->b.kind == TOPO_END_SWITCH && lk->b.index == s;
    }
    return n;
}

/* ---------------------------------------------------------------- JSON */

static json_object *jstr(const char *s) { return json_object_new_string(s); }
static json_object *jint(int64_t v) { return json_object_new_int64(v); }
static json_object *jbool(bool v) { return json_object_new_boolean(v); }

static json_object *used_total(uint32_t used, uint32_t total)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "used", jint(used));
    json_object_object_add(o, "total", jint(total));
    return o;
}

void cli_cpu_list(const uint64_t words[FAB_CPU_WORDS], char *out, size_t len)
{
    size_t n = 0;
    out[0] = '\0';
    for (int c = 0; c < FAB_CPU_WORDS * 64; c++) {
        if (!(words[c / 64] >> (c % 64) & 1))
            continue;
        int e = c;
        while (e + 1 < FAB_CPU_WORDS * 64 && words[(e + 1) / 64] >> ((e + 1) % 64) & 1)
            e++;
        int w = e > c ? snprintf(out + n, len - n, "%s%d-%d", n ? "," : "", c, e)
                      : snprintf(out + n, len - n, "%s%d", n ? "," : "", c);
        if (w < 0 || (size_t)w >= len - n)
            break;
        n += (size_t)w;
        c = e;
    }
}

static int print_json(struct fab *f, const struct health *hs)
{
    const struct fab_ctl *ctl = f->ctl;
    json_object *root = json_object_new_object();
    json_object_object_add(root, "fabric", jstr(ctl->name));
    json_object_object_add(root, "topology", jstr(ctl->topo_path));
    json_object_object_add(root, "dir", jstr(f->dir));
    json_object_object_add(root, "latency_model", jbool(ctl->latency.enabled));
    char cpus[256];
    cli_cpu_list(ctl->dma_cpus, cpus, sizeof cpus);
    json_object_object_add(root, "dma_cpus", cpus[0] ? jstr(cpus) : NULL);

    json_object *hosts = json_object_new_array();
    for (uint32_t i = 0; i < ctl->nhosts; i++) {
        struct fab_host *h = fab_host(f, i);
        json_object *o = json_object_new_object();
        json_object_object_add(o, "index", jint(i));
        json_object_object_add(o, "name", jstr(h->name));
        json_object_object_add(o, "node_id", jint(h->node_id));
        json_object_object_add(o, "ram_bytes", jint((int64_t)h->ram_size));
        json_object_object_add(o, "iommu", jbool(h->iommu));
        json_object_object_add(o, "state", jstr(cli_state_name(atomic_load(&h->state))));
        json_object_object_add(o, "boot", jint(atomic_load(&h->boot_gen)));
        json_object_object_add(o, "agent_pid", jint(atomic_load(&h->agent_pid)));
        json_object_object_add(o, "agent_ok", jbool(hs[i].ok));
        json_object_object_add(o, "agent_health", jstr(hs[i].word));
        if (hs[i].ok) {
            json_object_object_add(o, "allocated_bytes", jint((int64_t)hs[i].allocated));
            json_object_object_add(o, "mailbox_messages", jint((int64_t)hs[i].mbox_msgs));
            json_object_object_add(o, "dma_descriptors", jint((int64_t)hs[i].dma_done));
        }
        json_object_object_add(o, "iommu_faults", jint((int64_t)atomic_load(&h->fault_count)));
        json_object_object_add(o, "iommu_maps", jint(iommu_maps(f, i)));
        json_object *ads = json_object_new_array();
        for (uint32_t k = 0; k < h->nadapters; k++)
            json_object_array_add(ads, jstr(fab_adapter(f, h->adapter_first + k)->name));
        json_object_object_add(o, "adapters", ads);
        json_object_array_add(hosts, o);
    }
    json_object_object_add(root, "hosts", hosts);

    json_object *adapters = json_object_new_array();
    for (uint32_t i = 0; i < ctl->nadapters; i++) {
        struct fab_adapter *a = fab_adapter(f, i);
        json_object *o = json_object_new_object();
        json_object_object_add(o, "name", jstr(a->name));
        json_object_object_add(o, "host", jstr(fab_host(f, a->host)->name));
        json_object_object_add(o, "port_enabled", jbool(atomic_load(&a->link_enabled)));
        json_object *peers = json_object_new_array();
        for (uint32_t p = 0; p < a->npeers; p++) {
            uint32_t hops = 0;
            bool up = fab_path_up(f, i, a->peers[p], &hops);
            const struct fab_adapter *pa = fab_adapter(f, a->peers[p]);
            json_object *po = json_object_new_object();
            json_object_object_add(po, "adapter", jstr(pa->name));
            json_object_object_add(po, "host", jstr(fab_host(f, pa->host)->name));
            json_object_object_add(po, "up", jbool(up));
            json_object_object_add(po, "switches", jint(a->peer_nlinks[p] - 1));
            json_object_array_add(peers, po);
        }
        json_object_object_add(o, "peers", peers);
        json_object_object_add(o, "lut", used_total(fab_lut_used(f, i), a->lut_entries));
        json_object_object_add(o, "lut_agent", jint(lut_agent(f, a)));
        json_object_object_add(o, "lut_size", jint((int64_t)a->lut_size));
        json_object_object_add(o, "requester_ids", used_total(fab_rid_used(f, i), a->rid_entries));
        json_object *db = json_object_new_object();
        json_object_object_add(db, "bits", jint(a->db_bits));
        json_object_object_add(db, "pending", jint(atomic_load(&a->db)));
        json_object_object_add(db, "mask", jint(atomic_load(&a->db_mask)));
        json_object_object_add(o, "doorbell", db);
        json_object_object_add(o, "dma_channels", used_total(dma_in_use(f, a), a->dma_channels));
        json_object_array_add(adapters, o);
    }
    json_object_object_add(root, "adapters", adapters);

    json_object *switches = json_object_new_array();
    for (uint32_t i = 0; i < ctl->nswitches; i++) {
        struct fab_switch *s = fab_switch(f, i);
        json_object *o = json_object_new_object();
        json_object_object_add(o, "name", jstr(s->name));
        json_object_object_add(o, "ports", used_total(switch_ports_used(f, i), s->ports));
        json_object_object_add(o, "latency_ns", jint(s->latency_ns));
        json_object_array_add(switches, o);
    }
    json_object_object_add(root, "switches", switches);

    json_object *hsw = json_object_new_array();
    for (uint32_t i = 0; i < ctl->nhswitches; i++) {
        const struct fab_hswitch *h = &ctl->hswitches[i];
        json_object *o = json_object_new_object(), *below = json_object_new_array();
        json_object_object_add(o, "name", jstr(h->name));
        json_object_object_add(o, "host", jstr(fab_host(f, h->host)->name));
        json_object_object_add(o, "parent", h->parent ? jstr(ctl->hswitches[h->parent - 1].name)
                                                      : NULL);
        json_object_object_add(o, "latency_ns", jint(h->latency_ns));
        json_object_object_add(o, "link_ns", jint(h->link_ns));
        for (uint32_t k = 0; k < ctl->nfuncs; k++)
            if (fab_func(f, k)->at == i + 1)
                json_object_array_add(below, jstr(fab_func(f, k)->name));
        for (uint32_t k = 0; k < ctl->nadapters; k++)
            if (fab_adapter(f, k)->at == i + 1)
                json_object_array_add(below, jstr(fab_adapter(f, k)->name));
        json_object_object_add(o, "below", below);
        json_object_array_add(hsw, o);
    }
    json_object_object_add(root, "hostswitches", hsw);

    json_object *links = json_object_new_array();
    for (uint32_t i = 0; i < ctl->nlinks; i++) {
        struct fab_link *l = fab_link(f, i);
        json_object *o = json_object_new_object();
        json_object_object_add(o, "index", jint(i));
        json_object_object_add(o, "a", jstr(end_name(f, &l->a)));
        json_object_object_add(o, "b", jstr(end_name(f, &l->b)));
        json_object_object_add(o, "up", jbool(atomic_load(&l->up)));
        json_object_array_add(links, o);
    }
    json_object_object_add(root, "links", links);
    json_object_object_add(root, "paths", cli_paths_json(f));
    json_object_object_add(root, "devices", cli_devices_json(f));
    json_object_object_add(root, "vms", cli_vms_json(f));

    puts(json_object_to_json_string_ext(
        root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(root);
    return fflush(stdout) == 0 ? CLI_OK : CLI_FAIL;
}

/* ---------------------------------------------------------------- table */

static int width(int min, const char *s)
{
    int w = (int)strlen(s);
    return w > min ? w : min;
}

static int print_table(struct fab *f, const struct health *hs)
{
    const struct fab_ctl *ctl = f->ctl;
    printf("fabric    %s\ntopology  %s\nstate     %s\nlatency   %s\n", ctl->name,
           ctl->topo_path, f->dir, ctl->latency.enabled ? "model on" : "off");
    char cpus[256];
    cli_cpu_list(ctl->dma_cpus, cpus, sizeof cpus);
    if (cpus[0])
        printf("dma cpus  %s (ntblend up --dma-cpus)\n", cpus);

    int hw = 4;
    for (uint32_t i = 0; i < ctl->nhosts; i++)
        hw = width(hw, fab_host(f, i)->name);
    printf("\nHOSTS (%u)\n  %-*s %5s %6s %-5s %-7s %8s %-11s %6s\n", ctl->nhosts, hw, "NAME",
           "NODE", "RAM", "IOMMU", "STATE", "PID", "AGENT", "FAULTS");
    for (uint32_t i = 0; i < ctl->nhosts; i++) {
        struct fab_host *h = fab_host(f, i);
        char ram[32];
        fmt_size(h->ram_size, ram, sizeof ram);
        printf("  %-*s %5u %6s %-5s %-7s %8d %-11s %6" PRIu64 "\n", hw, h->name, h->node_id,
               ram, h->iommu ? "on" : "off", cli_state_name(atomic_load(&h->state)),
               (int)atomic_load(&h->agent_pid), hs[i].word,
               (uint64_t)atomic_load(&h->fault_count));
    }

    int aw = 7;
    for (uint32_t i = 0; i < ctl->nadapters; i++)
        aw = width(aw, fab_adapter(f, i)->name);
    printf("\nADAPTERS (%u)\n  %-*s %-9s %-9s %-11s %-5s  %s\n", ctl->nadapters, aw, "NAME",
           "LUT", "REQ-ID", "DB PEND/MSK", "DMA", "PEERS (path state)");
    for (uint32_t i = 0; i < ctl->nadapters; i++) {
        struct fab_adapter *a = fab_adapter(f, i);
        char lut[24], rid[24], db[24], dma[24];
        snprintf(lut, sizeof lut, "%u/%u", fab_lut_used(f, i), a->lut_entries);
        snprintf(rid, sizeof rid, "%u/%u", fab_rid_used(f, i), a->rid_entries);
        snprintf(db, sizeof db, "%04x/%04x", atomic_load(&a->db), atomic_load(&a->db_mask));
        snprintf(dma, sizeof dma, "%u/%u", dma_in_use(f, a), a->dma_channels);
        printf("  %-*s %-9s %-9s %-11s %-5s  ", aw, a->name, lut, rid, db, dma);
        if (!atomic_load(&a->link_enabled))
            printf("[port disabled] ");
        if (a->npeers == 0)
            printf("(no cable)");
        for (uint32_t p = 0; p < a->npeers; p++)
            printf("%s%s %s", p ? ", " : "", fab_adapter(f, a->peers[p])->name,
                   fab_path_up(f, i, a->peers[p], NULL) ? "up" : "down");
        printf("\n");
    }

    if (ctl->nswitches) {
        int sw = 4;
        for (uint32_t i = 0; i < ctl->nswitches; i++)
            sw = width(sw, fab_switch(f, i)->name);
        printf("\nSWITCHES (%u)\n  %-*s %-11s %s\n", ctl->nswitches, sw, "NAME", "PORTS USED",
               "LATENCY");
        for (uint32_t i = 0; i < ctl->nswitches; i++) {
            struct fab_switch *s = fab_switch(f, i);
            char ports[24];
            snprintf(ports, sizeof ports, "%u/%u", switch_ports_used(f, i), s->ports);
            printf("  %-*s %-11s %u ns\n", sw, s->name, ports, s->latency_ns);
        }
    }

    if (ctl->nhswitches) {
        /* In-host switches and expansion chassis: what the latency model charges inside hosts. */
        int nw = 5, hw = 4;
        for (uint32_t i = 0; i < ctl->nhswitches; i++) {
            nw = width(nw, ctl->hswitches[i].name);
            hw = width(hw, fab_host(f, ctl->hswitches[i].host)->name);
        }
        printf("\nIN-HOST SWITCHES (%u)\n  %-*s %-*s %-*s %8s %8s  %s\n", ctl->nhswitches, nw,
               "NAME", hw, "HOST", nw, "ABOVE", "LATENCY", "LINK", "BELOW");
        for (uint32_t i = 0; i < ctl->nhswitches; i++) {
            const struct fab_hswitch *h = &ctl->hswitches[i];
            printf("  %-*s %-*s %-*s %5u ns %5u ns ", nw, h->name, hw, fab_host(f, h->host)->name,
                   nw, h->parent ? ctl->hswitches[h->parent - 1].name : "root", h->latency_ns,
                   h->link_ns);
            const char *sep = " ";
            for (uint32_t k = 0; k < ctl->nfuncs; k++)
                if (fab_func(f, k)->at == i + 1) {
                    printf("%s%s", sep, fab_func(f, k)->name);
                    sep = ", ";
                }
            for (uint32_t k = 0; k < ctl->nadapters; k++)
                if (fab_adapter(f, k)->at == i + 1) {
                    printf("%s%s", sep, fab_adapter(f, k)->name);
                    sep = ", ";
                }
            printf("\n");
        }
    }

    int lw = 5, bw = 5;
    for (uint32_t i = 0; i < ctl->nlinks; i++) {
        lw = width(lw, end_name(f, &fab_link(f, i)->a));
        bw = width(bw, end_name(f, &fab_link(f, i)->b));
    }
    printf("\nLINKS (%u)\n  %4s  %-*s     %-*s  %s\n", ctl->nlinks, "#", lw, "END A", bw,
           "END B", "STATE");
    for (uint32_t i = 0; i < ctl->nlinks; i++) {
        struct fab_link *l = fab_link(f, i);
        printf("  %4u  %-*s --- %-*s  %s\n", i, lw, end_name(f, &l->a), bw, end_name(f, &l->b),
               atomic_load(&l->up) ? "up" : "down");
    }
    cli_print_paths(f);
    cli_print_devices(f);
    cli_print_vms(f);
    printf("\n(columns: ntblend status --help)\n");
    return fflush(stdout) == 0 ? CLI_OK : CLI_FAIL;
}

int cmd_status(struct cli *c)
{
    struct cli_opts o;
    int first;
    int rc = cli_parse(c, CLI_OPT_JSON, false, &o, &first);
    if (rc >= 0)
        return rc;
    if (first != c->argc)
        return cli_usage_error("status", "unexpected argument '%s'", c->argv[first]);
    struct fab *f;
    if (cli_attach(o.fabric, &f) < 0)
        return CLI_FAIL;
    struct health *hs = calloc(f->ctl->nhosts ? f->ctl->nhosts : 1, sizeof *hs);
    if (!hs) {
        fab_detach(f);
        cli_err("out of memory");
        return CLI_FAIL;
    }
    ping_agents(f, hs);
    rc = o.json ? print_json(f, hs) : print_table(f, hs);
    free(hs);
    fab_detach(f);
    return rc;
}
