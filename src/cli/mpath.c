/*
 * The PATHS part of `ntblend status`: every pair of hosts joined by more than one path (two
 * adapters on two switches, smartio-tocs-2021 §6.3), each path with its adapters, the switches
 * it crosses and whether it works now. Path numbers are those of sio_set_path(): the order of
 * the first host's adapters.
 */
#define _GNU_SOURCE
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* The switches path p of adapter ai crosses, "sw0,sw1" ("direct" back to back). */
static void switches_on(const struct fab *f, uint32_t ai, int p, char *out, size_t len)
{
    const struct fab_adapter *a = fab_adapter(f, ai);
    size_t used = 0;
    out[0] = 0;
    for (uint32_t i = 0; i < a->peer_nlinks[p]; i++) {
        const struct fab_link *l = fab_link(f, a->peer_path[p][i]);
        const struct topo_end *e[2] = { &l->a, &l->b };
        for (int k = 0; k < 2; k++) {
            if (e[k]->kind != TOPO_END_SWITCH)
                continue;
            const char *name = fab_switch(f, e[k]->index)->name;
            if (used && strstr(out, name)) /* entered and left over two cables */
                continue;
            int w = snprintf(out + used, len - used, "%s%s", used ? "," : "", name);
            if (w > 0 && (size_t)w < len - used)
                used += (size_t)w;
        }
    }
    if (!used)
        snprintf(out, len, "direct");
}

/* Calls fn for each pair of hosts (x < y) with more than one path; returns how many. */
static int each_pair(const struct fab *f,
                     void (*fn)(const struct fab *, uint32_t, uint32_t, const struct fab_hpath *,
                                int, void *),
                     void *arg)
{
    int pairs = 0;
    for (uint32_t x = 0; x < f->ctl->nhosts; x++)
        for (uint32_t y = x + 1; y < f->ctl->nhosts; y++) {
            struct fab_hpath p[FAB_HPATH_MAX];
            int n = fab_host_paths(f, x, y, p, FAB_HPATH_MAX);
            if (n < 2)
                continue;
            pairs++;
            if (fn)
                fn(f, x, y, p, n < FAB_HPATH_MAX ? n : FAB_HPATH_MAX, arg);
        }
    return pairs;
}

static void print_pair(const struct fab *f, uint32_t x, uint32_t y, const struct fab_hpath *p,
                       int n, void *arg)
{
    (void)arg;
    printf("  %s - %s\n", fab_host(f, x)->name, fab_host(f, y)->name);
    for (int i = 0; i < n; i++) {
        char sw[128];
        switches_on(f, p[i].adapter, fab_peer_index(f, p[i].adapter, p[i].peer), sw, sizeof sw);
        printf("    path %d  %s --- %s  via %s  %s\n", i, fab_adapter(f, p[i].adapter)->name,
               fab_adapter(f, p[i].peer)->name, sw,
               fab_path_up(f, p[i].adapter, p[i].peer, NULL) ? "up" : "down");
    }
}

void cli_print_paths(const struct fab *f)
{
    int pairs = each_pair(f, NULL, NULL);
    if (!pairs)
        return; /* one path between any two hosts: the ADAPTERS table says it all */
    printf("\nPATHS (%d pairs of hosts with more than one; path 0 is the primary)\n", pairs);
    each_pair(f, print_pair, NULL);
}

static void json_pair(const struct fab *f, uint32_t x, uint32_t y, const struct fab_hpath *p,
                      int n, void *arg)
{
    json_object *o = json_object_new_object(), *list = json_object_new_array();
    json_object_object_add(o, "from", json_object_new_string(fab_host(f, x)->name));
    json_object_object_add(o, "to", json_object_new_string(fab_host(f, y)->name));
    for (int i = 0; i < n; i++) {
        char sw[128];
        int pi = fab_peer_index(f, p[i].adapter, p[i].peer);
        switches_on(f, p[i].adapter, pi, sw, sizeof sw);
        json_object *e = json_object_new_object();
        json_object_object_add(e, "path", json_object_new_int(i));
        json_object_object_add(e, "adapter", json_object_new_string(fab_adapter(f, p[i].adapter)->name));
        json_object_object_add(e, "peer", json_object_new_string(fab_adapter(f, p[i].peer)->name));
        json_object_object_add(e, "via", json_object_new_string(sw));
        json_object_object_add(e, "state", json_object_new_string(
                                   fab_path_up(f, p[i].adapter, p[i].peer, NULL) ? "up" : "down"));
        json_object_array_add(list, e);
    }
    json_object_object_add(o, "paths", list);
    json_object_array_add(arg, o);
}

struct json_object *cli_paths_json(const struct fab *f)
{
    json_object *a = json_object_new_array();
    each_pair(f, json_pair, a);
    return a;
}
