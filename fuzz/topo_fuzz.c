/*
 * libFuzzer harness for the topology file reader and resolver (topo_load: libinih, the
 * section/key handlers, name resolution of cables and devices, and every validation rule).
 * The input is the file's text. A file that loads must describe a consistent fabric: every
 * index in range, every name terminated, no cable that names an end twice, no host without a
 * node id that is unique. Those are what fab_create and route_build rely on, so a file that
 * breaks them and still loads is a finding, as is any crash or sanitizer report.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "topo.h"

static struct topo *topo;
static FILE *sink;
static int fd = -1;
static char path[64];

static void check_name(const char *name, size_t cap)
{
    if (!memchr(name, '\0', cap) || !name[0])
        abort();
}

static void check(const struct topo *t)
{
    if (t->nhosts == 0 || t->nhosts > TOPO_MAX_HOSTS || t->nadapters > TOPO_MAX_ADAPTERS ||
        t->nswitches > TOPO_MAX_SWITCHES || t->nlinks > TOPO_MAX_LINKS ||
        t->ndevices > TOPO_MAX_DEVICES)
        abort();
    for (uint32_t i = 0; i < t->nhosts; i++) {
        check_name(t->hosts[i].name, sizeof t->hosts[i].name);
        if (t->hosts[i].ram_size == 0 || t->hosts[i].ram_size % 4096)
            abort();
        for (uint32_t j = 0; j < i; j++)
            if (t->hosts[j].node_id == t->hosts[i].node_id ||
                !strcmp(t->hosts[j].name, t->hosts[i].name))
                abort();
    }
    for (uint32_t i = 0; i < t->nadapters; i++) {
        const struct topo_adapter *a = &t->adapters[i];
        check_name(a->name, sizeof a->name);
        if (a->host >= t->nhosts || a->lut_size < 4096 || (a->lut_size & (a->lut_size - 1)) ||
            a->db_bits > TOPO_MAX_DB_BITS || a->spads > TOPO_MAX_SPADS ||
            a->dma_channels > TOPO_MAX_DMA_CHANNELS)
            abort();
    }
    for (uint32_t i = 0; i < t->nswitches; i++)
        check_name(t->switches[i].name, sizeof t->switches[i].name);
    for (uint32_t i = 0; i < t->nlinks; i++) {
        const struct topo_end *e[2] = {&t->links[i].a, &t->links[i].b};
        for (int k = 0; k < 2; k++) {
            uint32_t n = e[k]->kind == TOPO_END_ADAPTER ? t->nadapters : t->nswitches;
            if ((e[k]->kind != TOPO_END_ADAPTER && e[k]->kind != TOPO_END_SWITCH) ||
                e[k]->index >= n)
                abort();
        }
        if (e[0]->kind == e[1]->kind && e[0]->index == e[1]->index)
            abort();
    }
    for (uint32_t i = 0; i < t->ndevices; i++) {
        check_name(t->devices[i].name, sizeof t->devices[i].name);
        check_name(t->devices[i].type, sizeof t->devices[i].type);
        if (t->devices[i].host >= t->nhosts ||
            !memchr(t->devices[i].params, '\0', sizeof t->devices[i].params))
            abort();
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    topo = malloc(sizeof *topo);
    sink = fopen("/dev/null", "w");
    fd = memfd_create("topo", 0);
    if (!topo || !sink || fd < 0)
        abort();
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return -1;
    if (ftruncate(fd, 0) || pwrite(fd, data, size, 0) != (ssize_t)size)
        abort();
    if (topo_load(path, topo, sink) == 0)
        check(topo);
    return 0;
}
