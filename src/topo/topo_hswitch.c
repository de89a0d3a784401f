/*
 * [hostswitch NAME]: transparent PCIe switches inside a host's tree — on the motherboard, or
 * in an expansion chassis cabled to the host — and what sits below them. Owns their parsing
 * and resolution into topo->hswitches and the `at` of devices and adapters; the latency model
 * (src/fabric/latency.c) charges their hops. Names are resolved after the whole file has been
 * read, like every other name in a topology.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <string.h>

#include "topo_int.h"

static int hswitch_by_name(const struct topo *t, const char *name)
{
    for (uint32_t i = 0; i < t->nhswitches; i++)
        if (!strcmp(t->hswitches[i].name, name))
            return (int)i;
    return -1;
}

void topo_hswitch_begin(struct pstate *st, const char *name)
{
    struct topo *t = st->t;
    st->cur = -1;
    memset(&st->scratch, 0, sizeof st->scratch);
    st->v = &st->scratch;
    if (!topo_valid_name(name)) {
        topo_perr(st, st->line, "hostswitch name '%s' is not valid; use 1..31 letters, digits, "
                  "'_' or '-'", name);
        return;
    }
    int prev = hswitch_by_name(t, name);
    if (prev >= 0) {
        topo_perr(st, st->line, "hostswitch %s is already declared at line %d; give each "
                  "hostswitch a unique name", name, t->hswitches[prev].line);
        return;
    }
    if (t->nhswitches >= TOPO_MAX_HSWITCHES) {
        topo_limit_error(st, L_HSWITCHES);
        return;
    }
    st->cur = (int)t->nhswitches++;
    struct topo_hswitch *h = &t->hswitches[st->cur];
    topo_copy_name(h->name, name);
    h->line = st->line;
    st->v = &st->hsw_v[st->cur];
}

/* host, parent and devices name things; the rest are numbers (topo_section_key). */
void topo_hswitch_key(struct pstate *st, const char *name, const char *value)
{
    struct sect_hswitch *s = st->cur >= 0 ? &st->hsw[st->cur] : NULL;
    char *dst;
    size_t cap;
    int *line;
    static struct sect_hswitch scratch; /* a duplicate section: checked, not kept */
    if (!s) {
        memset(&scratch, 0, sizeof scratch);
        s = &scratch;
    }
    if (!strcmp(name, "host")) {
        dst = s->host, cap = sizeof s->host, line = &s->host_line;
    } else if (!strcmp(name, "parent")) {
        dst = s->parent, cap = sizeof s->parent, line = &s->parent_line;
    } else if (!strcmp(name, "devices")) {
        dst = s->devices, cap = sizeof s->devices, line = &s->devices_line;
    } else {
        topo_section_key(st, name, value);
        return;
    }
    if (*line) {
        topo_perr(st, st->line, "'%s' is already set at line %d; keep one of them", name, *line);
        return;
    }
    *line = st->line;
    if (strcmp(name, "devices") && !topo_valid_name(value)) {
        topo_perr(st, st->line, "%s = '%s' is not a valid name; use 1..31 letters, digits, '_' "
                  "or '-'", name, value);
        return;
    }
    if (strlen(value) >= cap) {
        topo_perr(st, st->line, "devices = ... is longer than %zu characters; split the switch "
                  "or shorten the names", cap - 1);
        return;
    }
    strcpy(dst, value);
}

/* One name of a devices list: a device of the host, or one of its adapters (NAME or HOST.NAME). */
static void place(struct pstate *st, uint32_t sw, const char *item)
{
    struct topo *t = st->t;
    const struct topo_hswitch *h = &t->hswitches[sw];
    const char *host = t->hosts[h->host].name;
    int line = st->hsw[sw].devices_line;
    uint32_t *at = NULL;
    for (uint32_t i = 0; i < t->ndevices && !at; i++)
        if (!strcmp(t->devices[i].name, item)) {
            if (t->devices[i].host != h->host) {
                topo_perr(st, line, "device %s is in host %s, not in %s where hostswitch %s is; "
                          "list it under a switch of its own host", item,
                          t->hosts[t->devices[i].host].name, host, h->name);
                return;
            }
            at = &t->devices[i].at;
        }
    if (!at) {
        char q[2 * TOPO_NAME_MAX + 1];
        const char *dot = strchr(item, '.');
        if (dot && ((size_t)(dot - item) != strlen(host) || strncmp(item, host, strlen(host)))) {
            topo_perr(st, line, "adapter %s is not in host %s, where hostswitch %s is; list it "
                      "under a switch of its own host", item, host, h->name);
            return;
        }
        snprintf(q, sizeof q, "%s.%s", host, dot ? dot + 1 : item);
        int a = topo_adapter_by_name(t, q);
        if (a >= 0)
            at = &t->adapters[a].at;
    }
    if (!at) {
        topo_perr(st, line, "no device or adapter '%s' in host %s; list the [device] names and "
                  "adapter names of host %s below hostswitch %s", item, host, host, h->name);
        return;
    }
    if (*at) {
        topo_perr(st, line, "%s is already below hostswitch %s; a device or adapter sits in one "
                  "slot", item, t->hswitches[*at - 1].name);
        return;
    }
    *at = sw + 1;
}

void topo_hswitch_resolve(struct pstate *st)
{
    struct topo *t = st->t;
    for (uint32_t i = 0; i < t->nhswitches; i++) {
        struct topo_hswitch *h = &t->hswitches[i];
        const struct sect_hswitch *s = &st->hsw[i];
        const struct vals *v = &st->hsw_v[i];
#define VAL(k) ((uint32_t)(v->ok >> (k) & 1 ? v->v[k] : topo_keys[k].def))
        h->latency_ns = VAL(K_HSW_LATENCY);
        h->chassis = (int)VAL(K_CHASSIS);
        /* An expansion chassis hangs off a transparent host adapter, a cable and a target
         * adapter: the chips and cable of an NTB crossing in transparent mode, which costs what
         * the NTB does (smartio-tocs-2021 §7.1, Fig. 21: the two differ in that mode only). */
        h->link_ns = v->ok >> K_LINK_NS & 1 ? (uint32_t)v->v[K_LINK_NS]
                   : h->chassis ? t->latency.ntb_ns + 2 * t->latency.adapter_switch_ns : 0;
#undef VAL
        int host = s->host_line ? topo_host_by_name(t, s->host) : -1;
        if (!s->host_line) {
            topo_perr(st, h->line, "[hostswitch %s] has no host; add host = HOST (the host whose "
                      "PCIe tree it is in)", h->name);
            continue;
        }
        if (host < 0) {
            topo_perr(st, s->host_line, "no host named '%s'; declare [host %s] or fix the name",
                      s->host, s->host);
            continue;
        }
        h->host = (uint32_t)host;
    }
    /* Parents after every switch has its host. */
    for (uint32_t i = 0; i < t->nhswitches; i++) {
        struct topo_hswitch *h = &t->hswitches[i];
        const struct sect_hswitch *s = &st->hsw[i];
        if (!s->parent_line || !strcmp(s->parent, "root"))
            continue;
        int p = hswitch_by_name(t, s->parent);
        if (p < 0 || (uint32_t)p == i || t->hswitches[p].host != h->host) {
            topo_perr(st, s->parent_line, "parent = %s is not another hostswitch of host %s; name "
                      "one, or leave parent out (or write root) for a switch at a root port",
                      s->parent, t->hosts[h->host].name);
            continue;
        }
        h->parent = (uint32_t)p + 1;
    }
    /* A loop of parents has no way up to the root. */
    for (uint32_t i = 0; i < t->nhswitches; i++) {
        uint32_t p = t->hswitches[i].parent, n = 0;
        while (p && n <= t->nhswitches)
            p = t->hswitches[p - 1].parent, n++;
        if (p) {
            topo_perr(st, t->hswitches[i].line, "hostswitch %s is its own ancestor; the parents "
                      "of in-host switches must lead up to the root", t->hswitches[i].name);
            t->hswitches[i].parent = 0;
        }
    }
    for (uint32_t i = 0; i < t->nhswitches; i++) {
        const char *p = st->hsw[i].devices;
        while (*p) {
            while (*p == ',' || isspace((unsigned char)*p))
                p++;
            size_t n = strcspn(p, ",");
            char item[2 * TOPO_NAME_MAX];
            size_t k = n < sizeof item - 1 ? n : sizeof item - 1;
            memcpy(item, p, k);
            while (k && isspace((unsigned char)item[k - 1]))
                k--;
            item[k] = '\0';
            if (*item)
                place(st, i, item);
            p += n;
        }
    }
}
