/*
 * `ntblend device`: the fabric's PCIe devices (functions) and their lending state — listing,
 * lending out and withdrawing (asked of the lender's agent), and borrowing for a host (asked
 * of that host's agent, which holds the borrow until it is returned). Also the DEVICES part
 * of `ntblend status`.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent_proto.h"
#include "cli.h"
#include "ntblend/smartio.h"

static uint32_t borrowers(const struct fab_function *x, char *names, size_t len, const struct fab *f)
{
    uint32_t n = 0;
    size_t used = 0;
    names[0] = 0;
    for (uint32_t h = 0; h < f->ctl->nhosts && h < 256; h++)
        if (atomic_load(&x->lend_borrowers[h / 64]) & (1ull << (h % 64))) {
            int w = snprintf(names + used, len - used, "%s%s", n ? "," : "", fab_host(f, h)->name);
            if (w > 0 && (size_t)w < len - used)
                used += (size_t)w;
            n++;
        }
    return n;
}

/* An SR-IOV VF's physical function, or -1 (a PF, or a function without VFs). */
static int pf_of(const struct fab *f, const struct fab_function *x)
{
    if (!x->vf)
        return -1;
    for (uint32_t i = 0; i < f->ctl->nfuncs; i++) {
        const struct fab_function *o = fab_func(f, i);
        if (o->host == x->host && o->device == x->device && o->fn == x->fn && !o->vf)
            return (int)i;
    }
    return -1;
}

static uint32_t class_of(const struct fab_function *x)
{
    return (uint32_t)x->cfg[0x0b] << 16 | (uint32_t)x->cfg[0x0a] << 8 | x->cfg[0x09];
}

void cli_print_devices(const struct fab *f)
{
    printf("\nDEVICES (%u)\n", f->ctl->nfuncs);
    if (!f->ctl->nfuncs)
        return;
    printf("  %3s  %-8s %-14s %-6s %-8s %-9s %-8s %-5s %-9s %s\n", "ID", "FDID", "NAME", "TYPE",
           "LENDER", "VEN:DEV", "CLASS", "MODEL", "LENT", "BORROWERS");
    for (uint32_t i = 0; i < f->ctl->nfuncs; i++) {
        const struct fab_function *x = fab_func(f, i);
        uint16_t ven, dev;
        memcpy(&ven, x->cfg, 2);
        memcpy(&dev, x->cfg + 2, 2);
        char names[256];
        uint32_t n = borrowers(x, names, sizeof names, f);
        const char *lent = !atomic_load(&x->lend_available) ? "no"
                           : atomic_load(&x->lend_exclusive) ? "exclusive"
                                                             : "yes";
        char mgr[64] = "";
        uint32_t m = atomic_load(&x->lend_manager);
        if (m && m - 1 < f->ctl->nhosts)
            snprintf(mgr, sizeof mgr, " (manager: %s pid %u)", fab_host(f, m - 1)->name,
                     atomic_load(&x->lend_manager_pid));
        char vm[FAB_VM_NAME + 8] = "";
        if (cli_vm_of(f, i, vm + 5, sizeof vm - 5) >= 0)
            memcpy(vm, " (vm ", 5), strcat(vm, ")");
        char fdid[24], vf[64] = "";
        snprintf(fdid, sizeof fdid, "0x%llx", SIO_FDID(fab_host(f, x->host)->node_id, i));
        int pf = pf_of(f, x);
        if (pf >= 0)
            snprintf(vf, sizeof vf, " (VF %u of %s)", x->vf, fab_func(f, (uint32_t)pf)->name);
        printf("  %3u  %-8s %-14s %-6s %-8s %04x:%04x %06x   %-5s %-9s %s%s%s%s\n", i, fdid,
               x->name, x->type, fab_host(f, x->host)->name, ven, dev, class_of(x),
               atomic_load(&x->model_up) ? "up" : "down", lent, n ? names : "-", vf, mgr, vm);
    }
}

json_object *cli_devices_json(const struct fab *f)
{
    json_object *arr = json_object_new_array();
    for (uint32_t i = 0; i < f->ctl->nfuncs; i++) {
        const struct fab_function *x = fab_func(f, i);
        json_object *o = json_object_new_object();
        uint16_t ven, dev;
        memcpy(&ven, x->cfg, 2);
        memcpy(&dev, x->cfg + 2, 2);
        char names[256];
        borrowers(x, names, sizeof names, f);
        json_object *b = json_object_new_array();
        for (char *save, *t = strtok_r(names, ",", &save); t; t = strtok_r(NULL, ",", &save))
            json_object_array_add(b, json_object_new_string(t));
        json_object_object_add(o, "id", json_object_new_int((int)i));
        json_object_object_add(o, "fdid", json_object_new_int64(
                                              (int64_t)SIO_FDID(fab_host(f, x->host)->node_id, i)));
        json_object_object_add(o, "name", json_object_new_string(x->name));
        json_object_object_add(o, "type", json_object_new_string(x->type));
        json_object_object_add(o, "lender", json_object_new_string(fab_host(f, x->host)->name));
        json_object_object_add(o, "vendor", json_object_new_int(ven));
        json_object_object_add(o, "device", json_object_new_int(dev));
        json_object_object_add(o, "class", json_object_new_int((int)class_of(x)));
        json_object_object_add(o, "vf", json_object_new_int((int)x->vf));
        int pf = pf_of(f, x);
        json_object_object_add(o, "pf", pf >= 0 ? json_object_new_string(fab_func(f, (uint32_t)pf)->name)
                                                : NULL);
        json_object_object_add(o, "requester_id", json_object_new_int(x->rid));
        json_object_object_add(o, "model_up", json_object_new_boolean(atomic_load(&x->model_up)));
        json_object_object_add(o, "available", json_object_new_boolean(atomic_load(&x->lend_available)));
        json_object_object_add(o, "exclusive", json_object_new_boolean(atomic_load(&x->lend_exclusive)));
        json_object_object_add(o, "borrowers", b);
        uint32_t m = atomic_load(&x->lend_manager);
        json_object *mo = NULL;
        if (m && m - 1 < f->ctl->nhosts) {
            mo = json_object_new_object();
            json_object_object_add(mo, "host", json_object_new_string(fab_host(f, m - 1)->name));
            json_object_object_add(mo, "pid", json_object_new_int((int)atomic_load(&x->lend_manager_pid)));
        }
        json_object_object_add(o, "manager", mo);
        char vm[FAB_VM_NAME];
        json_object_object_add(o, "vm", cli_vm_of(f, i, vm, sizeof vm) >= 0
                                            ? json_object_new_string(vm) : NULL);
        json_object_array_add(arr, o);
    }
    return arr;
}

/* One request to host h's agent. */
static int ask(struct fab *f, uint32_t h, uint32_t op, uint64_t a, uint64_t b, uint64_t c)
{
    int fd = agent_connect(f->dir, h);
    if (fd < 0)
        return fd;
    struct agent_req q = { .op = op, .a = a, .b = b, .c = c };
    struct agent_rsp r;
    int rc = agent_call(fd, &q, &r, 5000);
    close(fd);
    return rc;
}

static const char *why(int rc)
{
    switch (-rc) {
    case EACCES: return "its lender has not made it available (ntblend device add NAME)";
    case EBUSY: return "it is borrowed exclusively, or shared while you asked for it exclusively";
    case EALREADY: return "that host borrows it already";
    case ENOENT: return "that host does not hold it";
    case ENOSPC: return "the borrower has no free hot-plug slot or LUT entries for its BARs";
    case EHOSTUNREACH: return "the lender cannot be reached (link or host down?)";
    case ECONNREFUSED: return "the host's agent is not running (ntblend host start HOST)";
    default: return strerror(-rc);
    }
}

/* The host whose tree has function fn hot-added, or -1. */
static int shadow_host(const struct fab *f, uint32_t fn)
{
    for (uint32_t h = 0; h < f->ctl->nhosts; h++)
        for (int i = 0; i < FAB_SHADOWS; i++)
            if (atomic_load(&fab_host(f, h)->shadows[i].state) == FAB_SHADOW_PRESENT &&
                fab_host(f, h)->shadows[i].fn == fn)
                return (int)h;
    return -1;
}

/* Device Lending: the lender lends fn out, the borrower hot-adds it. */
static int device_lend(struct fab *f, uint32_t fn, const char *to)
{
    const struct fab_function *x = fab_func(f, fn);
    int h = cli_host(f, to);
    if (h < 0)
        return CLI_FAIL;
    if ((uint32_t)h == x->host) {
        cli_err("%s is %s's own device: lend it to another host", x->name, to);
        return CLI_FAIL;
    }
    /* In another host's tree and still borrowed by it (a host that crashed lost its borrow,
     * and its tree with it). */
    int at = shadow_host(f, fn);
    if (at >= 0 && (atomic_load(&x->lend_borrowers[at / 64]) >> (at % 64) & 1)) {
        /* A function goes to one host at a time; an SR-IOV device has more functions. */
        char other[128] = "", nm[256];
        int pf = x->vf ? pf_of(f, x) : (int)fn;
        for (uint32_t i = 0; pf >= 0 && i < f->ctl->nfuncs && !other[0]; i++) {
            const struct fab_function *o = fab_func(f, i);
            if (i != fn && o->vf && pf_of(f, o) == pf && !borrowers(o, nm, sizeof nm, f))
                snprintf(other, sizeof other, "; %s, a VF of the same device, is free", o->name);
        }
        cli_err("cannot lend %s to %s: it is lent to %s already (take it back first: ntblend "
                "device reclaim %s)%s", x->name, to, fab_host(f, (uint32_t)at)->name, x->name,
                other);
        return CLI_FAIL;
    }
    int rc = ask(f, x->host, AGENT_DEV_AVAILABLE, fn, 1, 0);
    if (!rc)
        rc = ask(f, (uint32_t)h, AGENT_DEV_HOTADD, fn, 0, 0);
    uint32_t mgr = atomic_load(&x->lend_manager);
    if (rc == -EBUSY && mgr && mgr - 1 < f->ctl->nhosts) {
        /* Lending hands the whole function to one host: not while a manager shares it. */
        cli_err("cannot lend %s to %s: an NVMe manager (pid %u on host %s) shares it with its "
                "clients; stop it first with: ntblend nvme stop %s", x->name, to,
                atomic_load(&x->lend_manager_pid), fab_host(f, mgr - 1)->name, x->name);
        return CLI_FAIL;
    }
    if (rc) {
        cli_err("cannot lend %s to %s: %s", x->name, to, why(rc));
        return CLI_FAIL;
    }
    for (int i = 0; i < FAB_SHADOWS; i++) {
        const struct fab_shadow *s = &fab_host(f, (uint32_t)h)->shadows[i];
        if (atomic_load(&s->state) == FAB_SHADOW_PRESENT && s->fn == fn)
            printf("%s (on %s) is lent to %s: hot-added at %02x:%02x.%x of its PCIe tree\n",
                   x->name, fab_host(f, x->host)->name, fab_host(f, (uint32_t)h)->name,
                   s->bdf >> 8, (s->bdf >> 3) & 0x1f, s->bdf & 7);
    }
    return CLI_OK;
}

/* The lender takes fn back: hot-removed from its borrower, then no longer lent out. */
static int device_reclaim(struct fab *f, uint32_t fn)
{
    const struct fab_function *x = fab_func(f, fn);
    int h = shadow_host(f, fn);
    if (h < 0) {
        cli_err("%s is not lent to any host (see 'ntblend lspci' or 'ntblend device list')",
                x->name);
        return CLI_FAIL;
    }
    int rc = ask(f, (uint32_t)h, AGENT_DEV_HOTREMOVE, fn, 0, 0);
    if (!rc)
        rc = ask(f, x->host, AGENT_DEV_AVAILABLE, fn, 0, 0);
    if (rc) {
        cli_err("cannot reclaim %s from %s: %s", x->name, fab_host(f, (uint32_t)h)->name, why(rc));
        return CLI_FAIL;
    }
    printf("%s is back on %s: hot-removed from %s\n", x->name, fab_host(f, x->host)->name,
           fab_host(f, (uint32_t)h)->name);
    return CLI_OK;
}

int cmd_device(struct cli *c)
{
    struct cli_opts o;
    int first;
    int rc = cli_parse(c, CLI_OPT_JSON | CLI_OPT_HOST | CLI_OPT_SHARED | CLI_OPT_TO, false, &o,
                       &first);
    if (rc >= 0)
        return rc;
    int nargs = c->argc - first;
    if (nargs < 1)
        return cli_usage_error("device", "expected list, add, remove, borrow, return, lend or reclaim");
    const char *action = c->argv[first];
    bool list = strcmp(action, "list") == 0;
    bool lend = strcmp(action, "add") == 0 || strcmp(action, "remove") == 0;
    bool borrow = strcmp(action, "borrow") == 0 || strcmp(action, "return") == 0;
    bool hot = strcmp(action, "lend") == 0, reclaim = strcmp(action, "reclaim") == 0;
    if (!list && !lend && !borrow && !hot && !reclaim)
        return cli_usage_error("device", "unknown action '%s'", action);
    if (hot != (o.to != NULL))
        return cli_usage_error("device", hot ? "'lend' needs --to HOST" : "'--to' goes with lend");
    if (nargs != (list ? 1 : 2))
        return cli_usage_error("device", list ? "'list' takes no device" : "expected one device name");
    if (borrow != (o.host != NULL))
        return cli_usage_error("device", borrow ? "'%s' needs --host H" : "'--host' goes with borrow and return",
                               action);
    if (o.shared && strcmp(action, "borrow") != 0)
        return cli_usage_error("device", "'--shared' goes with borrow");
    if (o.json && !list)
        return cli_usage_error("device", "'--json' goes with list");
    struct fab *f;
    if (cli_attach(o.fabric, &f) < 0)
        return CLI_FAIL;
    if (list) {
        if (o.json) {
            json_object *arr = cli_devices_json(f);
            printf("%s\n", json_object_to_json_string_ext(arr, JSON_C_TO_STRING_PRETTY));
            json_object_put(arr);
        } else {
            cli_print_devices(f);
        }
        fab_detach(f);
        return CLI_OK;
    }
    const char *name = c->argv[first + 1];
    int id = fab_func_by_name(f, name);
    if (id < 0) {
        cli_err("fabric '%s' has no device '%s' (see 'ntblend device list')", o.fabric, name);
        fab_detach(f);
        return CLI_FAIL;
    }
    const struct fab_function *x = fab_func(f, (uint32_t)id);
    if (hot || reclaim) {
        rc = hot ? device_lend(f, (uint32_t)id, o.to) : device_reclaim(f, (uint32_t)id);
        fab_detach(f);
        return rc;
    }
    if (lend) {
        bool on = strcmp(action, "add") == 0;
        /* Withdrawn while hot-added into another host's tree: that host gives it back first
         * (as `device reclaim` does), or it would stay in that tree, lent by nobody. */
        int h = on ? -1 : shadow_host(f, (uint32_t)id);
        rc = h >= 0 ? ask(f, (uint32_t)h, AGENT_DEV_HOTREMOVE, (uint64_t)id, 0, 0) : 0;
        if (rc) {
            cli_err("cannot take %s back from %s, in whose PCIe tree it is: %s", name,
                    fab_host(f, (uint32_t)h)->name, why(rc));
            fab_detach(f);
            return CLI_FAIL;
        }
        if (h >= 0)
            printf("%s is back on %s: hot-removed from %s\n", name, fab_host(f, x->host)->name,
                   fab_host(f, (uint32_t)h)->name);
        rc = ask(f, x->host, AGENT_DEV_AVAILABLE, (uint64_t)id, on, 0);
        if (rc) {
            cli_err("cannot %s %s on its lender %s: %s", on ? "lend out" : "withdraw", name,
                    fab_host(f, x->host)->name, why(rc));
        } else if (on) {
            printf("%s (on %s) is available to borrow\n", name, fab_host(f, x->host)->name);
        } else {
            printf("%s (on %s) is no longer lent out\n", name, fab_host(f, x->host)->name);
            /* Programs that borrowed it keep it until they return it (SmartIO's borrow). */
            for (uint32_t b = 0; b < f->ctl->nhosts; b++)
                if (atomic_load(&x->lend_borrowers[b / 64]) >> (b % 64) & 1)
                    printf("  host %s still borrows it until its programs return it (or: "
                           "ntblend device return %s --host %s)\n", fab_host(f, b)->name, name,
                           fab_host(f, b)->name);
        }
    } else {
        int h = cli_host(f, o.host);
        if (h < 0) {
            fab_detach(f);
            return CLI_FAIL;
        }
        bool take = strcmp(action, "borrow") == 0;
        rc = take ? ask(f, (uint32_t)h, AGENT_DEV_BORROW, (uint64_t)id,
                        o.shared ? SIO_SHARED : SIO_EXCLUSIVE, 1)
                  : ask(f, (uint32_t)h, AGENT_DEV_RETURN, (uint64_t)id, 0, 1);
        if (rc)
            cli_err("host %s cannot %s %s: %s", o.host, action, name, why(rc));
        else
            printf("host %s %s %s%s\n", fab_host(f, (uint32_t)h)->name,
                   take ? "borrows" : "returned", name,
                   take ? (o.shared ? " (shared)" : " (exclusive)") : "");
    }
    fab_detach(f);
    return rc ? CLI_FAIL : CLI_OK;
}
