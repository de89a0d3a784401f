/*
 * Bodies of the topology test helpers declared in topo_load.h (what that header says).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "topo_load.h"

static const char *src_dir(void)
{
    const char *s = getenv("NTBLEND_SRC");
    return s && *s ? s : ".";
}

int tl_setup(void **state, struct tl *l, const char *test)
{
    memset(l, 0, sizeof *l);
    *state = l;
    const char *base = getenv("TMPDIR");
    snprintf(l->tmpdir, sizeof l->tmpdir, "%s/%s.XXXXXX", base && *base ? base : "/tmp", test);
    if (!mkdtemp(l->tmpdir)) {
        l->tmpdir[0] = '\0';
        return -1;
    }
    l->t = malloc(sizeof *l->t);
    return l->t ? 0 : -1;
}

int tl_teardown(void **state)
{
    struct tl *l = *state;
    free(l->t);
    free(l->err);
    l->t = NULL;
    l->err = NULL;
    if (!l->tmpdir[0])
        return 0;
    DIR *d = opendir(l->tmpdir); /* holds only the caseN.ini files tl_load_text wrote */
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)))
            if (e->d_name[0] != '.') {
                char path[600];
                snprintf(path, sizeof path, "%s/%s", l->tmpdir, e->d_name);
                unlink(path);
            }
        closedir(d);
    }
    return rmdir(l->tmpdir);
}

int tl_load_path(struct tl *l, const char *path)
{
    size_t len;
    free(l->err);
    l->err = NULL;
    FILE *err = open_memstream(&l->err, &len);
    assert_non_null(err);
    snprintf(l->path, sizeof l->path, "%s", path);
    int rc = topo_load(path, l->t, err);
    fclose(err);
    return rc;
}

int tl_load_example(struct tl *l, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/examples/topologies/%s", src_dir(), name);
    return tl_load_path(l, path);
}

int tl_load_text(struct tl *l, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/case%d.ini", l->tmpdir, l->ncase++);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return tl_load_path(l, path);
}

bool tl_has_msg(const struct tl *l, int line, const char *needle)
{
    char prefix[600];
    snprintf(prefix, sizeof prefix, "%s:%d: ", l->path, line);
    for (const char *p = l->err; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if (n >= strlen(prefix) && !strncmp(p, prefix, strlen(prefix)) &&
            memmem(p, n, needle, strlen(needle)))
            return true;
        p = nl ? nl + 1 : p + n;
    }
    return false;
}

int tl_count_msgs(const struct tl *l)
{
    int n = 0;
    for (const char *p = l->err; p && *p; p++)
        n += *p == '\n';
    return n;
}

void tl_expect_invalid(struct tl *l, const char *text, int line, const char *needle)
{
    int rc = tl_load_text(l, text);
    if (rc != -EINVAL)
        fail_msg("expected -EINVAL, got %d for:\n%s\nmessages:\n%s", rc, text,
                 l->err ? l->err : "");
    tl_expect_msg(l, line, needle);
}

/* Mark the adapters on the switch tree below switch sw, reached through link `from`. */
static void peers_walk_switch(const struct topo *t, uint32_t self, uint32_t sw, int from,
                              bool *mark, uint32_t *n)
{
    for (uint32_t l = 0; l < t->nlinks; l++) {
        if ((int)l == from)
            continue;
        const struct topo_link *lk = &t->links[l];
        const struct topo_end *o;
        if (lk->a.kind == TOPO_END_SWITCH && lk->a.index == sw)
            o = &lk->b;
        else if (lk->b.kind == TOPO_END_SWITCH && lk->b.index == sw)
            o = &lk->a;
        else
            continue;
        if (o->kind == TOPO_END_ADAPTER) {
            if (o->index != self && !mark[o->index]) {
                mark[o->index] = true;
                (*n)++;
            }
        } else {
            peers_walk_switch(t, self, o->index, (int)l, mark, n);
        }
    }
}

static uint32_t peers_of(const struct topo *t, const char *adapter, bool *mark)
{
    int a = topo_adapter_by_name(t, adapter);
    assert_true(a >= 0);
    memset(mark, 0, TOPO_MAX_ADAPTERS * sizeof *mark);
    uint32_t n = 0;
    for (uint32_t l = 0; l < t->nlinks; l++) {
        const struct topo_link *lk = &t->links[l];
        const struct topo_end *o;
        if (lk->a.kind == TOPO_END_ADAPTER && lk->a.index == (uint32_t)a)
            o = &lk->b;
        else if (lk->b.kind == TOPO_END_ADAPTER && lk->b.index == (uint32_t)a)
            o = &lk->a;
        else
            continue;
        if (o->kind == TOPO_END_ADAPTER) {
            mark[o->index] = true;
            n++;
        } else {
            peers_walk_switch(t, (uint32_t)a, o->index, (int)l, mark, &n);
        }
        break;
    }
    return n;
}

bool tl_is_peer(const struct tl *l, const char *a, const char *b)
{
    static bool mark[TOPO_MAX_ADAPTERS];
    peers_of(l->t, a, mark);
    int i = topo_adapter_by_name(l->t, b);
    return i >= 0 && mark[i];
}

uint32_t tl_npeers(const struct tl *l, const char *adapter)
{
    static bool mark[TOPO_MAX_ADAPTERS];
    return peers_of(l->t, adapter, mark);
}
