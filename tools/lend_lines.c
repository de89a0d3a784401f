/*
 * lend_lines: which cache lines of the fabric's shared state one 4 KiB QD 1 read writes, with
 * the buffer mapped and unmapped around it (dma_map_single / dma_unmap_single, as fio's
 * ntb_map=per-io does), on an NVMe function of this host's PCIe tree: the host's own or one
 * lent to it. The driver here and the device model in the lender's agent share those lines,
 * and on a machine whose CPUs reach each other's caches slowly (hundreds of ns a round trip)
 * every line that one side writes and the other then reads costs that much per I/O.
 *
 * It copies the fabric's state (the control file: hosts, IOMMU tables, adapters, functions)
 * before and after each step of every I/O — the map, the I/O itself (submission doorbell,
 * the model's work, the completion, the completion doorbell), the unmap — and counts the lines
 * that changed in most I/Os, naming each. What it cannot see: lines read but not written, and
 * words written back to what they were (a lock taken and released); docs/lending.md adds
 * those from the code. Queue entries, the data and the doorbell registers live in RAM and
 * BAR files, one SQ entry, one CQ entry, 64 data lines and one doorbell line per I/O on either
 * path, and are not counted here.
 *
 * A line whose only change is a function's reg_waiters (its device model went to sleep or
 * woke up between two looks) is counted apart, as the model's sleeps: whether the model
 * sleeps between two I/Os depends on how long the gap was and how busy the machine is, not on
 * the path an I/O takes, and counted with the path it made the totals a matter of timing.
 *
 *   ntblend run --host c -- lend_lines --device pci:0000:80:00.0 [-n IOS] [--json]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fabric.h"
#include "ntblend/nvme.h"
#include "ntblend/pci.h"

#define MAX_HITS 4096

static const char usage[] =
    "usage: ntblend run --host H -- lend_lines --device pci:BB:DD.F [-n IOS] [--json]\n"
    "The cache lines of the fabric's shared state that a 4 KiB QD 1 read with per-I/O DMA\n"
    "mapping writes (map, I/O, unmap), on a function of this host's PCIe tree.\n"
    "  --device NAME  the NVMe, as pci:BB:DD.F (nvme_pci_list names them)\n"
    "  -n IOS         reads to look at (default 200; lines changed in most of them count)\n"
    "  --json         one JSON object instead of the table\n";

static struct {
    struct fab *f;
    const char *ctl;
    size_t size;
    char *prev, *cur;
    uint32_t *hits[3]; /* per phase: in how many I/Os each line changed */
    uint32_t sleeps[3]; /* per phase: I/Os in which only a model's reg_waiters changed */
} st;

static void snap(char *into) { memcpy(into, st.ctl, st.size); }

/* Whether the only bytes of line l that differ between a and b are a function's
 * reg_waiters: a device model going to sleep or waking up, not the I/O's path. */
static int only_sleepers(size_t l, const char *a, const char *b)
{
    const struct fab_ctl *c = st.f->ctl;
    size_t fs = sizeof(struct fab_function), lo = l * 64, w = offsetof(struct fab_function, reg_waiters);
    if (lo + 64 <= c->off_funcs || lo >= c->off_funcs + c->nfuncs * fs)
        return 0;
    int seen = 0;
    for (size_t o = lo; o < lo + 64; o++) {
        if (a[o] == b[o])
            continue;
        if (o < c->off_funcs || (o - c->off_funcs) % fs - w >= sizeof(uint32_t))
            return 0;
        seen = 1;
    }
    return seen;
}

/* Count the lines that changed since prev into phase's hits (a model's sleep apart, in
 * sleeps); cur becomes prev. */
static void diff(int phase)
{
    snap(st.cur);
    int slept = 0;
    for (size_t l = 0; l < st.size / 64; l++) {
        if (!memcmp(st.cur + l * 64, st.prev + l * 64, 64))
            continue;
        if (only_sleepers(l, st.cur, st.prev))
            slept = 1;
        else
            st.hits[phase][l]++;
    }
    st.sleeps[phase] += slept;
    char *t = st.prev;
    st.prev = st.cur;
    st.cur = t;
}

/* What a line of the control file holds. */
static void label(size_t off, char *out, size_t len)
{
    const struct fab_ctl *c = st.f->ctl;
    size_t hs = sizeof(struct fab_host), as = sizeof(struct fab_adapter);
    size_t fs = sizeof(struct fab_function), ms = sizeof(struct fab_iommu_map);
    size_t iommu_end = c->off_iommu + (size_t)c->nhosts * FAB_IOMMU_MAPS * ms;
    if (off < c->off_hosts) {
        snprintf(out, len, "fabric header +%zu", off);
    } else if (off < c->off_hosts + c->nhosts * hs) {
        size_t i = (off - c->off_hosts) / hs, in = (off - c->off_hosts) % hs;
        /* The fields the line holds (a host's record is not line aligned). */
        static const struct { size_t at; const char *name; } fl[] = {
            { offsetof(struct fab_host, state), "state" },
            { offsetof(struct fab_host, msi_pending), "MSI pending" },
            { offsetof(struct fab_host, msi_seq), "MSI counts" },
            { offsetof(struct fab_host, iommu_lock), "IOMMU lock and counts" },
            { offsetof(struct fab_host, iommu_idx), "IOMMU index" },
            { offsetof(struct fab_host, fault_count), "faults" },
            { offsetof(struct fab_host, shadows), "shadows" },
            { sizeof(struct fab_host), "" } };
        char what[96] = "";
        for (size_t k = 0; k + 1 < sizeof fl / sizeof fl[0]; k++)
            if (fl[k].at < in + 64 && fl[k + 1].at > in)
                snprintf(what + strlen(what), sizeof what - strlen(what), "%s%s",
                         what[0] ? ", " : "", fl[k].name);
        snprintf(out, len, "host %s: %s", fab_host(st.f, (uint32_t)i)->name, what);
    } else if (off < c->off_adapters + c->nadapters * as && off >= c->off_adapters) {
        snprintf(out, len, "adapter %s", fab_adapter(st.f, (uint32_t)((off - c->off_adapters) / as))->name);
    } else if (off >= c->off_funcs && off < c->off_funcs + c->nfuncs * fs) {
        size_t i = (off - c->off_funcs) / fs, in = (off - c->off_funcs) % fs;
        snprintf(out, len, "function %s +%zu%s", fab_func(st.f, (uint32_t)i)->name, in,
                 in / 64 == offsetof(struct fab_function, reg_seq) / 64 ? " (reg_seq)" : "");
    } else if (off >= c->off_iommu && off < iommu_end) {
        size_t first = (off - c->off_iommu) / ms, last = (off + 63 - c->off_iommu) / ms;
        if (last / FAB_IOMMU_MAPS != first / FAB_IOMMU_MAPS)
            last = first; /* the table's end */
        const char *h = fab_host(st.f, (uint32_t)(first / FAB_IOMMU_MAPS))->name;
        if (last > first)
            snprintf(out, len, "IOMMU of host %s: slots %zu-%zu", h, first % FAB_IOMMU_MAPS,
                     last % FAB_IOMMU_MAPS);
        else
            snprintf(out, len, "IOMMU of host %s: slot %zu", h, first % FAB_IOMMU_MAPS);
    } else {
        snprintf(out, len, "adapter tables +%zu", off);
    }
}

/* An IOMMU table line an I/O writes (its per-I/O mapping's slot): how many mappings that
 * stay (used now, after the last unmap) share it, named into what. A device checks such a
 * mapping's generation at every access through it (its queues'), so a shared line moves
 * between the driver's CPU and the device's at every I/O. */
static int shared_with(size_t off, char *what, size_t len)
{
    const struct fab_ctl *c = st.f->ctl;
    size_t ms = sizeof(struct fab_iommu_map);
    if (off < c->off_iommu || off >= c->off_iommu + (size_t)c->nhosts * FAB_IOMMU_MAPS * ms)
        return 0;
    int n = 0;
    for (size_t k = (off - c->off_iommu) / ms; k * ms + c->off_iommu < off + 64; k++) {
        const struct fab_iommu_map *m =
            fab_iommu_table(st.f, (uint32_t)(k / FAB_IOMMU_MAPS)) + k % FAB_IOMMU_MAPS;
        if (!m->used)
            continue;
        n++;
        snprintf(what + strlen(what), len - strlen(what), ", shared with slot %zu (requester %#x, IOVA %#llx, stays)",
                 k % FAB_IOMMU_MAPS, m->rid, (unsigned long long)m->iova);
    }
    return n;
}

static int done_count;
static void on_done(void *arg, const struct nvme_cpl *cpl)
{
    (void)arg;
    (void)cpl;
    done_count++;
}

int main(int argc, char **argv)
{
    const char *dev = NULL;
    long ios = 200;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(usage, stdout);
            return 0;
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "--device") && i + 1 < argc) {
            dev = argv[++i];
        } else if (!strcmp(argv[i], "-n") && i + 1 < argc) {
            char *end;
            ios = strtol(argv[++i], &end, 10);
            if (*end || ios < 10 || ios > 100000) {
                fprintf(stderr, "lend_lines: -n takes 10..100000 reads\n");
                return 2;
            }
        } else {
            fprintf(stderr, "lend_lines: unexpected '%s'\n%s", argv[i], usage);
            return 2;
        }
    }
    if (!dev || strncmp(dev, "pci:", 4)) {
        fprintf(stderr, "lend_lines: give --device pci:BB:DD.F (a function of this host's tree)\n%s", usage);
        return 2;
    }
    nvme_dev_t *d;
    nvme_qpair_t *qp;
    struct nvme_qpair_opts qo = { .depth = 2 };
    int rc = nvme_open(dev, NULL, &d);
    if (rc || (rc = nvme_qpair_create(d, &qo, &qp))) {
        fprintf(stderr, "lend_lines: %s: %s\n", dev, nvme_errmsg());
        return 1;
    }
    struct pci_dev *pdev = nvme_pci_dev(d);
    struct nvme_ns_info ns;
    if (nvme_ns_info(d, 1, &ns) || ns.block_size > 4096 || ns.blocks < 4096 / ns.block_size * 1024) {
        fprintf(stderr, "lend_lines: %s has no namespace 1 of 4 MiB or more\n", dev);
        return 1;
    }
    uint32_t nb = 4096 / ns.block_size;
    void *buf = dma_host_alloc(4096);
    if ((rc = fab_attach(fab_name_resolve(NULL), -1, &st.f)) || !buf) {
        fprintf(stderr, "lend_lines: cannot attach to the fabric: %s\n", strerror(rc ? -rc : ENOMEM));
        return 1;
    }
    st.ctl = (const char *)st.f->ctl;
    st.size = st.f->ctl_size / 64 * 64;
    st.prev = malloc(st.size);
    st.cur = malloc(st.size);
    for (int p = 0; p < 3; p++)
        st.hits[p] = calloc(st.size / 64, sizeof *st.hits[p]);
    if (!st.prev || !st.cur || !st.hits[0] || !st.hits[1] || !st.hits[2]) {
        fprintf(stderr, "lend_lines: out of memory for two copies of %zu bytes\n", st.size);
        return 1;
    }
    for (long i = -10; i < ios; i++) { /* 10 to warm up: translations cached, slots settled */
        snap(st.prev);
        dma_addr_t io = dma_map_single(pdev, buf, 4096, DMA_FROM_DEVICE);
        if (dma_mapping_error(pdev, io)) {
            fprintf(stderr, "lend_lines: dma_map_single: %s\n", strerror(errno));
            return 1;
        }
        if (i >= 0)
            diff(0);
        int before = done_count;
        if ((rc = nvme_submit_dma(qp, NVME_OP_READ, 1, (uint64_t)(i & 1023) * nb, nb, io, 0,
                                  on_done, NULL)) < 0) {
            fprintf(stderr, "lend_lines: submit: %s\n", nvme_errmsg());
            return 1;
        }
        while (done_count == before)
            if ((rc = nvme_qpair_wait(qp, 5000)) < 0) {
                fprintf(stderr, "lend_lines: read: %s\n", nvme_errmsg());
                return 1;
            }
        if (i >= 0)
            diff(1);
        dma_unmap_single(pdev, io, 4096, DMA_FROM_DEVICE);
        if (i >= 0)
            diff(2);
    }
    static const char *phase[3] = { "map", "io", "unmap" };
    int total = 0, count[3] = { 0 }, shared = 0;
    if (json)
        printf("{\"device\":\"%s\",\"ios\":%ld,\"phases\":[", dev, ios);
    else
        printf("lines of the fabric's state written in most of %ld reads on %s:\n", ios, dev);
    for (int p = 0; p < 3; p++) {
        if (json)
            printf("%s{\"phase\":\"%s\",\"lines\":[", p ? "," : "", phase[p]);
        for (size_t l = 0; l < st.size / 64; l++) {
            if (st.hits[p][l] * 2 <= (uint32_t)ios)
                continue;
            char what[160];
            label(l * 64, what, sizeof what);
            int stays = shared_with(l * 64, what, sizeof what);
            shared += stays > 0;
            if (json)
                printf("%s{\"offset\":%zu,\"what\":\"%s\",\"ios\":%u,\"shares_with_lasting\":%d}",
                       count[p] ? "," : "", l * 64, what, st.hits[p][l], stays);
            else
                printf("  %-6s %8zu  %s (%u of %ld)\n", phase[p], l * 64, what, st.hits[p][l], ios);
            count[p]++;
        }
        if (json)
            printf("],\"count\":%d,\"model_sleeps\":%u}", count[p], st.sleeps[p]);
        total += count[p];
    }
    if (json)
        printf("],\"total\":%d,\"iommu_lines_shared\":%d}\n", total, shared);
    else
        printf("per I/O: %d lines (map %d, I/O %d, unmap %d); IOMMU slot lines shared with a "
               "lasting mapping: %d\n"
               "apart: the device model went to sleep or woke (reg_waiters alone) in %u, %u "
               "and %u of the %ld maps, I/Os and unmaps\n",
               total, count[0], count[1], count[2], shared, st.sleeps[0], st.sleeps[1],
               st.sleeps[2], ios);
    dma_host_free(buf);
    nvme_qpair_delete(qp);
    nvme_close(d);
    fab_detach(st.f);
    return 0;
}
