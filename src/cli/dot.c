/*
 * `ntblend topology --dot [FILE]`: the cabling as a Graphviz graph, drawn either from a
 * running fabric (with live state: links that are down dashed red, hosts that are down grey)
 * or straight from a topology file (no fabric needed). Hosts are boxes, switches diamonds,
 * and each cable one edge whose ends are labelled with the adapters it plugs into.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* One drawing, two sources: exactly one of t (a file) and f (a running fabric) is set. */
struct view {
    const struct topo *t;
    const struct fab *f;
};

static uint32_t v_nhosts(const struct view *v) { return v->f ? v->f->ctl->nhosts : v->t->nhosts; }
static uint32_t v_nswitches(const struct view *v)
{
    return v->f ? v->f->ctl->nswitches : v->t->nswitches;
}
static uint32_t v_nlinks(const struct view *v) { return v->f ? v->f->ctl->nlinks : v->t->nlinks; }

static const char *v_host_name(const struct view *v, uint32_t i)
{
    return v->f ? fab_host(v->f, i)->name : v->t->hosts[i].name;
}

static uint32_t v_host_node(const struct view *v, uint32_t i)
{
    return v->f ? fab_host(v->f, i)->node_id : v->t->hosts[i].node_id;
}

static bool v_host_down(const struct view *v, uint32_t i)
{
    return v->f && atomic_load(&fab_host(v->f, i)->state) == FAB_HOST_DOWN;
}

static const char *v_switch_name(const struct view *v, uint32_t i)
{
    return v->f ? fab_switch(v->f, i)->name : v->t->switches[i].name;
}

static const struct topo_end *v_end(const struct view *v, uint32_t l, bool b)
{
    if (v->f)
        return b ? &fab_link(v->f, l)->b : &fab_link(v->f, l)->a;
    return b ? &v->t->links[l].b : &v->t->links[l].a;
}

static bool v_link_down(const struct view *v, uint32_t l)
{
    return v->f && !atomic_load(&fab_link(v->f, l)->up);
}

static const char *v_adapter_name(const struct view *v, uint32_t i)
{
    return v->f ? fab_adapter(v->f, i)->name : v->t->adapters[i].name;
}

static uint32_t v_adapter_host(const struct view *v, uint32_t i)
{
    return v->f ? fab_adapter(v->f, i)->host : v->t->adapters[i].host;
}

/* Inside a DOT string (names are tame, but a quote must never break the graph). */
static void put_escaped(const char *s)
{
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            putchar('\\');
        putchar(*s);
    }
}

static void put_quoted(const char *s)
{
    putchar('"');
    put_escaped(s);
    putchar('"');
}

/* Node ids carry the kind, because a host and a switch may share a name. */
static void put_end_node(const struct view *v, const struct topo_end *e)
{
    char id[TOPO_NAME_MAX + 16];
    if (e->kind == TOPO_END_ADAPTER)
        snprintf(id, sizeof id, "host:%s", v_host_name(v, v_adapter_host(v, e->index)));
    else
        snprintf(id, sizeof id, "switch:%s", v_switch_name(v, e->index));
    put_quoted(id);
}

static int draw(const struct view *v, const char *title)
{
    printf("graph ");
    put_quoted(title);
    printf(" {\n  graph [label=");
    put_quoted(title);
    printf(", labelloc=t, fontname=\"Helvetica\"];\n"
           "  node [fontname=\"Helvetica\"];\n"
           "  edge [fontname=\"Helvetica\", fontsize=9];\n");
    char id[TOPO_NAME_MAX + 16];
    for (uint32_t i = 0; i < v_nhosts(v); i++) {
        snprintf(id, sizeof id, "host:%s", v_host_name(v, i));
        printf("  ");
        put_quoted(id);
        /* "\n" inside a DOT label is Graphviz's line break: written as backslash, n. */
        printf(" [shape=box, label=\"");
        put_escaped(v_host_name(v, i));
        printf("\\nnode %u\"", v_host_node(v, i));
        if (v_host_down(v, i))
            printf(", style=filled, fillcolor=grey85, color=grey55, fontcolor=grey45, "
                   "tooltip=\"down\"");
        printf("];\n");
    }
    for (uint32_t i = 0; i < v_nswitches(v); i++) {
        snprintf(id, sizeof id, "switch:%s", v_switch_name(v, i));
        printf("  ");
        put_quoted(id);
        printf(" [shape=diamond, label=");
        put_quoted(v_switch_name(v, i));
        printf("];\n");
    }
    for (uint32_t l = 0; l < v_nlinks(v); l++) {
        const struct topo_end *a = v_end(v, l, false), *b = v_end(v, l, true);
        printf("  ");
        put_end_node(v, a);
        printf(" -- ");
        put_end_node(v, b);
        const char *sep = " [";
        if (a->kind == TOPO_END_ADAPTER) {
            printf("%staillabel=", sep);
            put_quoted(v_adapter_name(v, a->index));
            sep = ", ";
        }
        if (b->kind == TOPO_END_ADAPTER) {
            printf("%sheadlabel=", sep);
            put_quoted(v_adapter_name(v, b->index));
            sep = ", ";
        }
        if (v_link_down(v, l)) {
            printf("%sstyle=dashed, color=red, fontcolor=red, label=\"down\"", sep);
            sep = ", ";
        }
        printf("%s;\n", *sep == ',' ? "]" : "");
    }
    printf("}\n");
    return fflush(stdout) == 0 && !ferror(stdout) ? CLI_OK : CLI_FAIL;
}

int cmd_topology(struct cli *c)
{
    struct cli_opts o;
    int first;
    int rc = cli_parse(c, CLI_OPT_DOT, false, &o, &first);
    if (rc >= 0)
        return rc;
    if (!o.dot)
        return cli_usage_error("topology", "which format? give --dot (Graphviz)");
    if (c->argc - first > 1)
        return cli_usage_error("topology", "expected at most one topology file");

    if (first < c->argc) {
        const char *file = c->argv[first];
        struct topo *t = cli_load_topology(file);
        if (!t)
            return CLI_FAIL;
        const char *base = strrchr(file, '/');
        struct view v = { .t = t };
        rc = draw(&v, base ? base + 1 : file);
        free(t);
        return rc;
    }

    struct fab *f;
    if (cli_attach(o.fabric, &f) < 0) {
        fprintf(stderr, "ntblend: (or draw a file without a fabric: ntblend topology --dot "
                        "FILE)\n");
        return CLI_FAIL;
    }
    char title[FAB_NAME_MAX + 16];
    snprintf(title, sizeof title, "fabric %s", f->ctl->name);
    struct view v = { .f = f };
    rc = draw(&v, title);
    fab_detach(f);
    return rc;
}
