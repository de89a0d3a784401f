/*
 * `ntblend mcast`: the cluster switches' multicast groups (docs/multicast.md) — create, join,
 * leave, list and remove them, as the switches' management does. What the CLI creates or joins
 * is kept (held by no process) until it is removed or left; applications use the SmartIO API
 * (include/ntblend/smartio_mcast.h) and theirs go with them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

struct mc_opts {
    const char *fabric, *size, *sw, *addr, *device, *offset;
    bool json;
};

static int parse(struct cli *c, struct mc_opts *o, int *first)
{
    static const struct option longs[] = {
        { "fabric", required_argument, NULL, 'f' }, { "size", required_argument, NULL, 's' },
        { "switch", required_argument, NULL, 'w' }, { "addr", required_argument, NULL, 'a' },
        { "device", required_argument, NULL, 'd' }, { "offset", required_argument, NULL, 'o' },
        { "json", no_argument, NULL, 'j' },          { "help", no_argument, NULL, 'h' },
        { 0 },
    };
    const char *fabric = c->fabric_arg;
    memset(o, 0, sizeof *o);
    optind = 0;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(c->argc, c->argv, ":h", longs, NULL)) != -1) {
        switch (ch) {
        case 'f': fabric = optarg; break;
        case 's': o->size = optarg; break;
        case 'w': o->sw = optarg; break;
        case 'a': o->addr = optarg; break;
        case 'd': o->device = optarg; break;
        case 'o': o->offset = optarg; break;
        case 'j': o->json = true; break;
        case 'h': return cli_help("mcast");
        case ':': return cli_usage_error("mcast", "option '%s' needs a value", c->argv[optind - 1]);
        default: return cli_usage_error("mcast", "unknown option '%s'", c->argv[optind - 1]);
        }
    }
    o->fabric = fab_name_resolve(fabric);
    *first = optind;
    return -1;
}

/* "64K", "1M", "4096" -> bytes (topo_parse_size), or a 0x address. */
static int number(const char *s, uint64_t *out)
{
    char *end;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        errno = 0;
        *out = strtoull(s, &end, 16);
        return errno || *end ? -EINVAL : 0;
    }
    return topo_parse_size(s, out);
}

static void human(uint64_t v, char *out, size_t n)
{
    const char *unit = "KMG";
    int u = -1;
    while (v >= 1024 && v % 1024 == 0 && u < 2) {
        v /= 1024;
        u++;
    }
    if (u < 0)
        snprintf(out, n, "%" PRIu64, v);
    else
        snprintf(out, n, "%" PRIu64 "%c", v, unit[u]);
}

/* The group named `name`, or -1 after saying what exists. */
static int group(const struct fab *f, const char *name)
{
    int g = fab_mcast_find(f, name);
    if (g < 0)
        cli_err("fabric '%s' has no multicast group '%s' (see 'ntblend mcast list')", f->ctl->name,
                name);
    return g;
}

static const char *holder(const struct fab_mcast *m, char *buf, size_t n)
{
    if (m->owner_pid <= 0)
        return "kept";
    snprintf(buf, n, "pid %d", m->owner_pid);
    return buf;
}

static void list_text(const struct fab *f)
{
    uint32_t n = 0;
    for (uint32_t g = 0; g < FAB_MCAST_GROUPS; g++)
        n += atomic_load(&fab_mcast(f, g)->state) == FAB_MCAST_USED;
    printf("MULTICAST GROUPS (%u of %u)\n", n, FAB_MCAST_GROUPS);
    if (!n)
        return;
    printf("  %3s  %-16s %-8s %6s %8s %8s  %s\n", "ID", "NAME", "SWITCH", "SIZE", "MEMBERS",
           "SENDERS", "HELD BY");
    for (uint32_t g = 0; g < FAB_MCAST_GROUPS; g++) {
        const struct fab_mcast *m = fab_mcast(f, g);
        if (atomic_load(&m->state) != FAB_MCAST_USED)
            continue;
        char size[24], who[24];
        human(m->size, size, sizeof size);
        printf("  %3u  %-16s %-8s %6s %8u %8u  %s\n", g, m->name, fab_switch(f, m->sw)->name,
               size, fab_mcast_members(f, g), fab_mcast_senders(f, g), holder(m, who, sizeof who));
        for (uint32_t h = 0; h < f->ctl->nhosts; h++)
            if (atomic_load(&m->member[h].joined) == 1)
                printf("       %-16s via %-12s overlay 0x%" PRIx64 "%s\n", fab_host(f, h)->name,
                       fab_adapter(f, m->member[h].adapter)->name, m->member[h].overlay,
                       m->member[h].owner_pid > 0 ? " (held by a process)" : "");
    }
}

static void list_json(const struct fab *f)
{
    json_object *arr = json_object_new_array();
    for (uint32_t g = 0; g < FAB_MCAST_GROUPS; g++) {
        const struct fab_mcast *m = fab_mcast(f, g);
        if (atomic_load(&m->state) != FAB_MCAST_USED)
            continue;
        json_object *o = json_object_new_object(), *mem = json_object_new_array();
        json_object_object_add(o, "id", json_object_new_int((int)g));
        json_object_object_add(o, "name", json_object_new_string(m->name));
        json_object_object_add(o, "switch", json_object_new_string(fab_switch(f, m->sw)->name));
        json_object_object_add(o, "size", json_object_new_int64((int64_t)m->size));
        json_object_object_add(o, "senders", json_object_new_int((int)fab_mcast_senders(f, g)));
        json_object_object_add(o, "owner_pid", json_object_new_int(m->owner_pid > 0 ? m->owner_pid : 0));
        for (uint32_t h = 0; h < f->ctl->nhosts; h++) {
            const struct fab_mcast_member *mb = &m->member[h];
            if (atomic_load(&mb->joined) != 1)
                continue;
            json_object *x = json_object_new_object();
            json_object_object_add(x, "host", json_object_new_string(fab_host(f, h)->name));
            json_object_object_add(x, "node_id", json_object_new_int((int)fab_host(f, h)->node_id));
            json_object_object_add(x, "adapter", json_object_new_string(fab_adapter(f, mb->adapter)->name));
            json_object_object_add(x, "overlay", json_object_new_int64((int64_t)mb->overlay));
            json_object_object_add(x, "owner_pid", json_object_new_int(mb->owner_pid));
            json_object_array_add(mem, x);
        }
        json_object_object_add(o, "members", mem);
        json_object_array_add(arr, o);
    }
    printf("%s\n", json_object_to_json_string_ext(arr, JSON_C_TO_STRING_PRETTY));
    json_object_put(arr);
}

static int create(struct fab *f, const char *name, const struct mc_opts *o)
{
    uint64_t size = 1u << 20;
    if (o->size && number(o->size, &size))
        return cli_usage_error("mcast", "--size '%s' is not a size (64K, 1M, 4096, ...)", o->size);
    int sw = -1;
    if (o->sw && (sw = fab_switch_by_name(f, o->sw)) < 0) {
        cli_err("fabric '%s' has no switch '%s' (see 'ntblend names switches')", f->ctl->name, o->sw);
        return CLI_FAIL;
    }
    int g = fab_mcast_create(f, name, sw, size, 0);
    if (g == -EINVAL && (!*name || strlen(name) >= FAB_MCAST_NAME))
        cli_err("a group's name has 1 to %d characters", FAB_MCAST_NAME - 1);
    else if (g == -EINVAL)
        cli_err("--size must be a power of two from 4K to 1G (the switches divide their "
                "multicast range into such windows)");
    else if (g == -EEXIST)
        cli_err("a multicast group named '%s' exists already (see 'ntblend mcast list'): pick "
                "another name, or remove it first", name);
    else if (g == -ENOSPC)
        cli_err("the switches hold %d multicast groups and all are in use: remove one "
                "('ntblend mcast remove NAME')", FAB_MCAST_GROUPS);
    else if (g == -EOPNOTSUPP)
        cli_err("fabric '%s' has no cluster switch: multicast groups live in switches (a "
                "topology with [switch] sections, e.g. examples/topologies/cluster60.ini)",
                f->ctl->name);
    else if (g < 0)
        cli_err("cannot create group '%s': %s", name, strerror(-g));
    if (g < 0)
        return CLI_FAIL;
    char sz[24];
    human(size, sz, sizeof sz);
    printf("group %s (id %d): a %s window on %s and the switches cascaded with it\n", name, g, sz,
           fab_switch(f, fab_mcast(f, (uint32_t)g)->sw)->name);
    return CLI_OK;
}

/* The overlay of a join: --addr, or --device's memory BAR (+ --offset), which must be host's. */
static int overlay(struct fab *f, uint32_t host, const struct mc_opts *o, uint64_t *out)
{
    if (!o->addr == !o->device)
        return cli_usage_error("mcast", "join needs where the writes land: --addr ADDR (the "
                               "host's RAM) or --device NAME (its memory BAR)");
    if (o->offset && !o->device)
        return cli_usage_error("mcast", "'--offset' goes with --device");
    if (o->addr) {
        if (number(o->addr, out))
            return cli_usage_error("mcast", "--addr '%s' is not an address", o->addr);
        return -1;
    }
    uint64_t off = 0;
    if (o->offset && number(o->offset, &off))
        return cli_usage_error("mcast", "--offset '%s' is not a size", o->offset);
    int fn = fab_func_by_name(f, o->device);
    if (fn < 0 || fab_func(f, (uint32_t)fn)->host != host) {
        cli_err("host %s has no device '%s' (see 'ntblend device list'): the overlay is the "
                "member's own memory", fab_host(f, host)->name, o->device);
        return CLI_FAIL;
    }
    for (int b = 0; b < FAB_BARS; b += 2)
        if (fab_func(f, (uint32_t)fn)->bar[b].kind == FAB_BAR_MEM) {
            *out = fab_func(f, (uint32_t)fn)->bar[b].addr + off;
            return -1;
        }
    cli_err("device '%s' has no memory BAR to receive writes", o->device);
    return CLI_FAIL;
}

static int join(struct fab *f, uint32_t g, uint32_t host, const struct mc_opts *o)
{
    uint64_t at;
    int rc = overlay(f, host, o, &at);
    if (rc >= 0)
        return rc;
    const struct fab_mcast *m = fab_mcast(f, g);
    const char *hn = fab_host(f, host)->name;
    rc = fab_mcast_join(f, g, host, at, 0);
    if (rc == -EHOSTUNREACH)
        cli_err("host %s has no cable to %s or the switches cascaded with it: it cannot receive "
                "group %s's writes (see 'ntblend topology --dot')", hn, fab_switch(f, m->sw)->name,
                m->name);
    else if (rc == -EINVAL)
        cli_err("0x%" PRIx64 " on %s is not 4 KiB aligned memory for the whole %" PRIu64
                "-byte window: give RAM above the agents' first 1 MiB, or a device's memory BAR",
                at, hn, m->size);
    else if (rc == -EALREADY)
        cli_err("host %s is a member of %s already ('ntblend mcast leave %s %s' first)", hn,
                m->name, m->name, hn);
    else if (rc)
        cli_err("host %s cannot join %s: %s", hn, m->name, strerror(-rc));
    if (rc)
        return CLI_FAIL;
    printf("%s joined %s: its writes land at 0x%" PRIx64 " on %s\n", hn, m->name, at, hn);
    return CLI_OK;
}

int cmd_mcast(struct cli *c)
{
    struct mc_opts o;
    int first = 0;
    int rc = parse(c, &o, &first);
    if (rc >= 0)
        return rc;
    int n = c->argc - first;
    const char *verb = n ? c->argv[first] : "";
    static const char *verbs[] = { "create", "join", "leave", "list", "remove" };
    static const int nargs[] = { 2, 3, 3, 1, 2 };
    int v = -1;
    for (int i = 0; i < 5; i++)
        if (strcmp(verb, verbs[i]) == 0)
            v = i;
    if (v < 0)
        return cli_usage_error("mcast", n ? "unknown action '%s'" : "expected create, join, "
                               "leave, list or remove%s", verb);
    if (n != nargs[v])
        return cli_usage_error("mcast", "'%s' takes %s", verb,
                               v == 3 ? "no arguments" : v == 0 || v == 4 ? "a group name"
                                                                           : "a group and a host");
    if ((o.size || o.sw) && v != 0)
        return cli_usage_error("mcast", "'--size' and '--switch' go with create");
    if ((o.addr || o.device || o.offset) && v != 1)
        return cli_usage_error("mcast", "'--addr', '--device' and '--offset' go with join");
    if (o.json && v != 3)
        return cli_usage_error("mcast", "'--json' goes with list");
    struct fab *f;
    if (cli_attach(o.fabric, &f) < 0)
        return CLI_FAIL;
    const char *name = n > 1 ? c->argv[first + 1] : NULL;
    int g = v == 0 || v == 3 ? 0 : group(f, name);
    int h = g < 0 || (v != 1 && v != 2) ? 0 : cli_host(f, c->argv[first + 2]);
    if (g < 0 || h < 0) {
        rc = CLI_FAIL;
    } else if (v == 0) {
        rc = create(f, name, &o);
    } else if (v == 1) {
        rc = join(f, (uint32_t)g, (uint32_t)h, &o);
    } else if (v == 3) {
        o.json ? list_json(f) : list_text(f);
        rc = CLI_OK;
    } else if (v == 2) {
        int e = fab_mcast_leave(f, (uint32_t)g, (uint32_t)h, 0);
        if (e == -ENOENT)
            cli_err("host %s is not a member of %s (see 'ntblend mcast list')",
                    fab_host(f, (uint32_t)h)->name, name);
        else if (e)
            cli_err("host %s cannot leave %s: %s", fab_host(f, (uint32_t)h)->name, name, strerror(-e));
        rc = e ? CLI_FAIL : CLI_OK;
    } else {
        uint32_t senders = fab_mcast_senders(f, (uint32_t)g);
        int e = fab_mcast_remove(f, (uint32_t)g, 0);
        if (e == -EBUSY)
            cli_err("group %s still has %u sender%s (translation entries of adapters that target "
                    "it): the programs that mapped it must unmap it, or exit", name, senders,
                    senders == 1 ? "" : "s");
        else if (e)
            cli_err("cannot remove %s: %s", name, strerror(-e));
        rc = e ? CLI_FAIL : CLI_OK;
    }
    fab_detach(f);
    return rc;
}
