/*
 * `ntblend lspci`: each host's PCIe tree as that host enumerates it, printed the way pciutils'
 * lspci prints a real machine (plain, -n/-nn, -v/-vv, -t, -s), or as JSON. A host's tree holds
 * its NTB adapters (bus 01: the NTB function and, with a DMA engine, function 1) and its
 * devices (one bus each, behind a root port), and the functions other hosts lent it, hot-added
 * on buses 0x80 and up (Device Lending). BAR addresses are those of the host's physical
 * address map, as its configuration space reports them. Vendor, device and class names come
 * from the pci.ids database through libpci, so the text matches what lspci prints for the
 * same IDs. Root ports are drawn in the tree only: the fabric does not model them.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <json-c/json.h>
#include <pci/pci.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ntblend/smartio.h"

/* The adapters' IDs: the seeds' PXH810 cards are built on a Broadcom (PLX) PEX8733. */
#define NTB_VENDOR 0x10b5
#define NTB_DEVICE 0x8733
#define NTB_CLASS 0x068000u /* bridge, other */
#define NTB_DMA_CLASS 0x080100u /* system peripheral, DMA controller */

struct lspci_opts {
    int verbose, numeric, hex;
    bool tree, json;
    const char *host, *select, *fabric;
};

/* One function of a host's tree, read from configuration space or the adapter's table. */
struct pci_entry {
    uint16_t bdf;
    uint16_t vendor, device, subvendor, subdevice;
    uint32_t class_code;
    uint8_t rev;
    uint16_t command;
    const char *name;   /* the fabric's name: device function or "HOST.ADAPTER" */
    const struct fab_function *fn; /* NULL for an adapter's functions */
    const struct fab_shadow *shadow; /* a lent function hot-added here (fn is the lender's) */
    const struct fab_adapter *ad;
    bool dma;           /* the adapter's DMA-engine function */
    struct { uint64_t addr, size; bool prefetch; } bar[FAB_BARS];
};

static struct pci_access *pacc;

/* A name from pci.ids; "Device XXXX" (as lspci prints) for an ID it does not know. */
static const char *lookup(char *buf, size_t len, int flags, unsigned a, unsigned b)
{
    const char *s = pci_lookup_name(pacc, buf, (int)len, flags, a, b);
    if (!s)
        snprintf(buf, len, "Device %04x", b);
    return s ? s : buf;
}

static void entry_from_function(struct pci_entry *e, const struct fab_function *x)
{
    memset(e, 0, sizeof *e);
    e->bdf = x->rid;
    memcpy(&e->vendor, x->cfg + 0x00, 2);
    memcpy(&e->device, x->cfg + 0x02, 2);
    memcpy(&e->command, x->cfg + 0x04, 2);
    e->rev = x->cfg[0x08];
    e->class_code = (uint32_t)x->cfg[0x0b] << 16 | (uint32_t)x->cfg[0x0a] << 8 | x->cfg[0x09];
    memcpy(&e->subvendor, x->cfg + 0x2c, 2);
    memcpy(&e->subdevice, x->cfg + 0x2e, 2);
    e->name = x->name;
    e->fn = x;
    for (int i = 0; i < FAB_BARS; i++) {
        if (x->bar[i].kind == FAB_BAR_NONE)
            continue;
        uint32_t lo, hi;
        memcpy(&lo, x->cfg + 0x10 + 4 * i, 4);
        memcpy(&hi, x->cfg + 0x14 + 4 * i, 4);
        e->bar[i].addr = ((uint64_t)hi << 32 | lo) & ~0xfull;
        e->bar[i].size = x->bar[i].size;
        e->bar[i].prefetch = lo & 0x8;
    }
}

/* A function lent to this host: the lender's configuration space, with its BARs where this
 * host sees them (the NTB windows the borrower's agent mapped at hot-add). */
static void entry_from_shadow(struct pci_entry *e, const struct fab *f, const struct fab_shadow *sh)
{
    entry_from_function(e, fab_func(f, sh->fn));
    e->bdf = sh->bdf;
    e->shadow = sh;
    for (int i = 0; i < FAB_BARS; i++)
        if (e->bar[i].size)
            e->bar[i].addr = sh->bar_addr[i];
}

static void entry_from_adapter(struct pci_entry *e, const struct fab_adapter *a, bool dma)
{
    memset(e, 0, sizeof *e);
    e->bdf = dma ? fab_dma_rid(a->index_on_host) : a->rid;
    e->vendor = e->subvendor = NTB_VENDOR;
    e->device = e->subdevice = NTB_DEVICE;
    e->class_code = dma ? NTB_DMA_CLASS : NTB_CLASS;
    e->command = FAB_CMD_MEM | FAB_CMD_BME; /* the host's NTB driver enables both */
    e->name = a->name;
    e->ad = a;
    e->dma = dma;
    if (!dma) {
        e->bar[2].addr = a->bar_addr;
        e->bar[2].size = (uint64_t)a->lut_entries * a->lut_size;
        e->bar[2].prefetch = true;
    }
}

/* Configuration space as the host reads it; an adapter's is built from its table (the
 * fabric keeps none for it): IDs, command, class and its 64-bit prefetchable window BAR. */
static void entry_cfg(const struct pci_entry *e, uint8_t cfg[4096])
{
    if (e->fn) {
        memcpy(cfg, e->fn->cfg, 4096);
        for (int i = 0; e->shadow && i < FAB_BARS; i++) {
            if (!e->bar[i].size)
                continue;
            uint32_t lo, hi = (uint32_t)(e->bar[i].addr >> 32);
            memcpy(&lo, cfg + 0x10 + 4 * i, 4);
            lo = (uint32_t)e->bar[i].addr | (lo & 0xf);
            memcpy(cfg + 0x10 + 4 * i, &lo, 4);
            memcpy(cfg + 0x14 + 4 * i, &hi, 4);
        }
        return;
    }
    memset(cfg, 0, 4096);
    memcpy(cfg + 0x00, &e->vendor, 2);
    memcpy(cfg + 0x02, &e->device, 2);
    memcpy(cfg + 0x04, &e->command, 2);
    cfg[0x09] = (uint8_t)e->class_code;
    cfg[0x0a] = (uint8_t)(e->class_code >> 8);
    cfg[0x0b] = (uint8_t)(e->class_code >> 16);
    cfg[0x0e] = e->ad->dma_channels ? 0x80 : 0x00; /* multi-function with the DMA engine */
    memcpy(cfg + 0x2c, &e->subvendor, 2);
    memcpy(cfg + 0x2e, &e->subdevice, 2);
    if (e->bar[2].size) {
        uint32_t lo = (uint32_t)e->bar[2].addr | 0xc, hi = (uint32_t)(e->bar[2].addr >> 32);
        memcpy(cfg + 0x18, &lo, 4);
        memcpy(cfg + 0x1c, &hi, 4);
    }
}

/* lspci -x/-xxx/-xxxx: 64, 256 or 4096 bytes of configuration space, in the format lspci -F
 * reads back, so pciutils itself can decode what a host sees. */
static void print_hex(const struct pci_entry *e, int hex)
{
    uint8_t cfg[4096];
    entry_cfg(e, cfg);
    unsigned len = hex >= 4 ? 4096 : hex >= 3 ? 256 : 64;
    for (unsigned off = 0; off < len; off += 16) {
        printf("%02x:", off);
        for (unsigned i = 0; i < 16; i++)
            printf(" %02x", cfg[off + i]);
        putchar('\n');
    }
    putchar('\n');
}

/* The host's functions in bus order: adapters (bus 01), its devices, then the functions lent
 * to it (buses 0x80..). */
static size_t host_entries(const struct fab *f, uint32_t h, struct pci_entry *out, size_t max)
{
    const struct fab_host *hs = fab_host(f, h);
    size_t n = 0;
    for (uint32_t i = 0; i < hs->nadapters && n < max; i++) {
        const struct fab_adapter *a = fab_adapter(f, hs->adapter_first + i);
        entry_from_adapter(&out[n++], a, false);
        if (a->dma_channels && n < max)
            entry_from_adapter(&out[n++], a, true);
    }
    for (uint32_t i = 0; i < hs->nfuncs && n < max; i++)
        entry_from_function(&out[n++], fab_func(f, hs->func_first + i));
    for (uint32_t i = 0; i < FAB_SHADOWS && n < max; i++)
        if (atomic_load(&hs->shadows[i].state) == FAB_SHADOW_PRESENT)
            entry_from_shadow(&out[n++], f, &hs->shadows[i]);
    return n;
}

static void format_bdf(uint16_t bdf, char *buf, size_t len)
{
    snprintf(buf, len, "%02x:%02x.%x", bdf >> 8, (bdf >> 3) & 0x1f, bdf & 7);
}

static bool selected(const struct pci_entry *e, const char *sel)
{
    if (!sel)
        return true;
    char bdf[16];
    format_bdf(e->bdf, bdf, sizeof bdf);
    return !strcmp(sel, bdf) || !strcmp(sel, e->name) ||
           (strlen(sel) == 5 && !strncmp(sel, bdf, 5)); /* "02:00": every function of a slot */
}

static const char *size_str(uint64_t size, char *buf, size_t len)
{
    static const char units[] = "KMGT";
    uint64_t v = size >> 10;
    int u = 0;
    while (v >= 1024 && !(v % 1024) && u < 3) {
        v /= 1024;
        u++;
    }
    snprintf(buf, len, "%llu%c", (unsigned long long)v, units[u]);
    return buf;
}

/* As lspci: the revision only when non-zero, the programming interface only with -v (and
 * then when non-zero or pci.ids names it). */
static void print_line(const struct pci_entry *e, int numeric, int verbose)
{
    char bdf[16], cls[128], dev[256];
    format_bdf(e->bdf, bdf, sizeof bdf);
    unsigned cc = e->class_code >> 8, pi = e->class_code & 0xff;
    if (numeric == 1) {
        printf("%s %04x: %04x:%04x", bdf, cc, e->vendor, e->device);
    } else {
        lookup(cls, sizeof cls, PCI_LOOKUP_CLASS, cc, cc);
        lookup(dev, sizeof dev, PCI_LOOKUP_VENDOR | PCI_LOOKUP_DEVICE, e->vendor, e->device);
        if (numeric >= 2)
            printf("%s %s [%04x]: %s [%04x:%04x]", bdf, cls, cc, dev, e->vendor, e->device);
        else
            printf("%s %s: %s", bdf, cls, dev);
    }
    if (e->rev)
        printf(" (rev %02x)", e->rev);
    if (verbose) {
        char pis[128];
        const char *p = pci_lookup_name(pacc, pis, sizeof pis, PCI_LOOKUP_PROGIF | PCI_LOOKUP_NO_NUMBERS,
                                        cc, pi);
        if (p && numeric != 1)
            printf(" (prog-if %02x [%s])", pi, p);
        else if (pi)
            printf(" (prog-if %02x)", pi);
    }
    putchar('\n');
}

static void print_msix(const struct fab_function *x, int verbose)
{
    uint16_t ctrl;
    uint32_t table, pba;
    memcpy(&ctrl, x->cfg + FAB_CFG_MSIX + 2, 2);
    memcpy(&table, x->cfg + FAB_CFG_MSIX + 4, 4);
    memcpy(&pba, x->cfg + FAB_CFG_MSIX + 8, 4);
    printf("\tCapabilities: [%02x] MSI-X: Enable%c Count=%u Masked%c\n", FAB_CFG_MSIX,
           ctrl & 0x8000 ? '+' : '-', (ctrl & 0x7ff) + 1u, ctrl & 0x4000 ? '+' : '-');
    if (verbose > 1) {
        printf("\t\tVector table: BAR=%u offset=%08x\n", table & 7, table & ~7u);
        printf("\t\tPBA: BAR=%u offset=%08x\n", pba & 7, pba & ~7u);
    }
}

static void print_verbose(const struct fab *f, const struct pci_entry *e, int verbose)
{
    char buf[256], sz[32];
    if (e->subvendor)
        printf("\tSubsystem: %s\n", lookup(buf, sizeof buf, PCI_LOOKUP_VENDOR | PCI_LOOKUP_DEVICE,
                                          e->subvendor, e->subdevice));
    printf("\tFlags: %sfast devsel%s\n", e->command & FAB_CMD_BME ? "bus master, " : "",
           e->command & FAB_CMD_BME ? ", latency 0" : "");
    for (int i = 0; i < FAB_BARS; i++) {
        if (!e->bar[i].size)
            continue;
        printf("\tMemory at %llx (64-bit, %sprefetchable)%s [size=%s]\n",
               (unsigned long long)e->bar[i].addr, e->bar[i].prefetch ? "" : "non-",
               e->command & FAB_CMD_MEM || !e->fn ? "" : " [disabled]",
               size_str(e->bar[i].size, sz, sizeof sz));
    }
    const struct fab_function *x = e->fn;
    if (x) {
        if (x->cfg[0x34] == FAB_CFG_MSIX)
            print_msix(x, verbose);
        if (x->cfg[0x50] == 0x10)
            printf("\tCapabilities: [50] Express Endpoint, MSI 00\n");
        uint32_t ext;
        memcpy(&ext, x->cfg + 0x100, 4);
        if ((ext & 0xffff) == 0x0010) {
            uint16_t total, num;
            memcpy(&total, x->cfg + 0x10e, 2);
            memcpy(&num, x->cfg + 0x110, 2);
            printf("\tCapabilities: [100] Single Root I/O Virtualization (SR-IOV)\n");
            if (verbose > 1)
                printf("\t\tTotal VFs: %u, Number of VFs: %u\n", total, num);
        }
        /* Where a kernel would name the bound driver: the model and who holds the device. */
        printf("\tDevice: %s (model %s, %s), SISCI fdid 0x%llx\n", x->name, x->type,
               atomic_load(&x->model_up) ? "up" : "down",
               SIO_FDID(fab_host(f, x->host)->node_id, (uint32_t)(x - fab_func(f, 0))));
        if (e->shadow)
            printf("\tLent by: %s (hot-added; its %02x:%02x.%x there)\n",
                   fab_host(f, x->host)->name, x->rid >> 8, (x->rid >> 3) & 0x1f, x->rid & 7);
        if (atomic_load(&x->lend_available)) {
            printf("\tLent: %s; borrowed by:", atomic_load(&x->lend_exclusive) ? "exclusive" : "shared");
            int n = 0;
            for (uint32_t h = 0; h < f->ctl->nhosts && h < 256; h++)
                if (atomic_load(&x->lend_borrowers[h / 64]) & (1ull << (h % 64)))
                    printf("%s %s", n++ ? "," : "", fab_host(f, h)->name);
            printf("%s\n", n ? "" : " none");
        }
        char vm[FAB_VM_NAME];
        int slot = cli_vm_of(f, (uint32_t)(x - fab_func(f, 0)), vm, sizeof vm);
        if (slot >= 0)
            printf("\tIn VM: %s (on host %s)\n", vm, fab_host(f, fab_vm(f, (uint32_t)slot)->host)->name);
    } else if (!e->dma) {
        const struct fab_adapter *a = e->ad;
        printf("\tNTB adapter: %s, LUT %u x %s, requester-ID entries %u, doorbells %u, "
               "scratchpads %u\n", a->name, a->lut_entries, size_str(a->lut_size, sz, sizeof sz),
               a->rid_entries, a->db_bits, a->spads);
        printf("\tPeers:");
        for (uint32_t p = 0; p < a->npeers; p++) {
            const struct fab_adapter *b = fab_adapter(f, a->peers[p]);
            printf(" %s (%s)", b->name, fab_path_up(f, (uint32_t)(a - fab_adapter(f, 0)), a->peers[p], NULL)
                                            ? "up" : "down");
        }
        printf("%s\n", a->npeers ? "" : " none");
    } else {
        printf("\tNTB DMA engine: %s, %u channels\n", e->ad->name, e->ad->dma_channels);
    }
    putchar('\n');
}

/* lspci -t: a root port per bus, the bus's functions behind it. */
static void print_tree(const struct pci_entry *e, size_t n)
{
    uint8_t buses[256];
    size_t nb = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t b = (uint8_t)(e[i].bdf >> 8);
        if (!memchr(buses, b, nb))
            buses[nb++] = b;
    }
    printf("-[0000:00]-");
    for (size_t k = 0; k < nb; k++) {
        bool last_bus = k + 1 == nb;
        const char *lead = k == 0 ? (last_bus ? "-" : "+") : (last_bus ? "           \\" : "           +");
        printf("%s-%02x.0-[%02x]--", lead, buses[k], buses[k]);
        size_t count = 0, seen = 0;
        for (size_t i = 0; i < n; i++)
            count += (uint8_t)(e[i].bdf >> 8) == buses[k];
        for (size_t i = 0; i < n; i++) {
            if ((uint8_t)(e[i].bdf >> 8) != buses[k])
                continue;
            const char *branch = count == 1 ? "--" : seen == 0 ? "+-" : seen + 1 == count ? "\\-" : "+-";
            if (seen)
                printf("           %c            ", last_bus ? ' ' : '|');
            printf("%s%02x.%x  %s%s\n", branch, (e[i].bdf >> 3) & 0x1f, e[i].bdf & 7, e[i].name,
                   e[i].dma ? " (DMA engine)" : e[i].shadow ? " (lent)" : "");
            seen++;
        }
    }
}

static json_object *entry_json(const struct fab *f, const struct pci_entry *e)
{
    char buf[256];
    json_object *o = json_object_new_object();
    format_bdf(e->bdf, buf, sizeof buf);
    json_object_object_add(o, "slot", json_object_new_string(buf));
    json_object_object_add(o, "name", json_object_new_string(e->name));
    json_object_object_add(o, "kind", json_object_new_string(e->shadow ? "lent" : e->fn ? "device"
                                                             : e->dma ? "ntb-dma" : "ntb"));
    if (e->shadow)
        json_object_object_add(o, "lender", json_object_new_string(fab_host(f, e->fn->host)->name));
    if (e->fn) {
        json_object_object_add(o, "type", json_object_new_string(e->fn->type));
        json_object_object_add(o, "fdid", json_object_new_int64((int64_t)SIO_FDID(
                                              fab_host(f, e->fn->host)->node_id,
                                              (uint32_t)(e->fn - fab_func(f, 0)))));
    }
    snprintf(buf, sizeof buf, "%06x", e->class_code);
    json_object_object_add(o, "class", json_object_new_string(buf));
    json_object_object_add(o, "class_name", json_object_new_string(
        lookup(buf, sizeof buf, PCI_LOOKUP_CLASS, e->class_code >> 8, e->class_code >> 8)));
    snprintf(buf, sizeof buf, "%04x", e->vendor);
    json_object_object_add(o, "vendor", json_object_new_string(buf));
    snprintf(buf, sizeof buf, "%04x", e->device);
    json_object_object_add(o, "device", json_object_new_string(buf));
    json_object_object_add(o, "device_name", json_object_new_string(
        lookup(buf, sizeof buf, PCI_LOOKUP_VENDOR | PCI_LOOKUP_DEVICE, e->vendor, e->device)));
    json_object_object_add(o, "rev", json_object_new_int(e->rev));
    json_object_object_add(o, "bus_master", json_object_new_boolean(e->command & FAB_CMD_BME));
    json_object *bars = json_object_new_array();
    for (int i = 0; i < FAB_BARS; i++) {
        if (!e->bar[i].size)
            continue;
        json_object *b = json_object_new_object();
        json_object_object_add(b, "index", json_object_new_int(i));
        json_object_object_add(b, "address", json_object_new_int64((int64_t)e->bar[i].addr));
        json_object_object_add(b, "size", json_object_new_int64((int64_t)e->bar[i].size));
        json_object_object_add(b, "prefetchable", json_object_new_boolean(e->bar[i].prefetch));
        json_object_array_add(bars, b);
    }
    json_object_object_add(o, "bars", bars);
    if (e->fn && e->fn->cfg[0x34] == FAB_CFG_MSIX) {
        uint16_t ctrl;
        memcpy(&ctrl, e->fn->cfg + FAB_CFG_MSIX + 2, 2);
        json_object *m = json_object_new_object();
        json_object_object_add(m, "count", json_object_new_int((ctrl & 0x7ff) + 1));
        json_object_object_add(m, "enabled", json_object_new_boolean(ctrl & 0x8000));
        json_object_object_add(m, "masked", json_object_new_boolean(ctrl & 0x4000));
        json_object_object_add(o, "msix", m);
    }
    if (e->fn) {
        json_object *b = json_object_new_array();
        for (uint32_t h = 0; h < f->ctl->nhosts && h < 256; h++)
            if (atomic_load(&e->fn->lend_borrowers[h / 64]) & (1ull << (h % 64)))
                json_object_array_add(b, json_object_new_string(fab_host(f, h)->name));
        json_object_object_add(o, "lent", json_object_new_boolean(atomic_load(&e->fn->lend_available)));
        json_object_object_add(o, "borrowers", b);
    }
    return o;
}

static int parse(struct cli *c, struct lspci_opts *o)
{
    static const struct option longs[] = {
        { "fabric", required_argument, NULL, 'f' },
        { "host", required_argument, NULL, 'H' },
        { "json", no_argument, NULL, 'j' },
        { "help", no_argument, NULL, 'h' },
        { 0 },
    };
    const char *fabric = c->fabric_arg;
    memset(o, 0, sizeof *o);
    optind = 0;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(c->argc, c->argv, ":hvntxjs:", longs, NULL)) != -1) {
        switch (ch) {
        case 'f': fabric = optarg; break;
        case 'H': o->host = optarg; break;
        case 'j': o->json = true; break;
        case 'v': o->verbose++; break;
        case 'n': o->numeric++; break;
        case 't': o->tree = true; break;
        case 'x': o->hex++; break;
        case 's': o->select = optarg; break;
        case 'h': return cli_help("lspci");
        case ':':
            return cli_usage_error("lspci", "option '%s' needs a value", c->argv[optind - 1]);
        default:
            if (optopt)
                return cli_usage_error("lspci", "unknown option '-%c'", optopt);
            return cli_usage_error("lspci", "unknown option '%s'", c->argv[optind - 1]);
        }
    }
    if (optind < c->argc)
        return cli_usage_error("lspci", "unexpected argument '%s'", c->argv[optind]);
    if (o->json && (o->tree || o->verbose || o->numeric || o->hex))
        return cli_usage_error("lspci", "--json already has everything; drop -t, -v, -n and -x");
    if (o->hex == 2 || o->hex > 4)
        return cli_usage_error("lspci", "give -x (64 bytes), -xxx (256) or -xxxx (4096)");
    o->fabric = fab_name_resolve(fabric);
    char dir[128];
    if (fab_dir(o->fabric, dir, sizeof dir))
        return cli_usage_error("lspci", "invalid fabric name '%s'", o->fabric);
    return -1;
}

int cmd_lspci(struct cli *c)
{
    struct lspci_opts o;
    int rc = parse(c, &o);
    if (rc >= 0)
        return rc;
    struct fab *f;
    if (cli_attach(o.fabric, &f))
        return CLI_FAIL;
    int only = -1;
    if (o.host && (only = cli_host(f, o.host)) < 0) {
        fab_detach(f);
        return CLI_FAIL;
    }
    pacc = pci_alloc();
    /* Names only: the dump method over an empty file keeps libpci off this machine's bus. */
    pacc->method = PCI_ACCESS_DUMP;
    pci_set_param(pacc, "dump.name", "/dev/null");
    pci_init(pacc);

    size_t max = FAB_MAX_FUNCS + 2 * TOPO_MAX_ADAPTERS;
    struct pci_entry *e = calloc(max, sizeof *e);
    json_object *root = o.json ? json_object_new_array() : NULL;
    if (!e) {
        cli_err("out of memory");
        rc = CLI_FAIL;
        goto out;
    }
    int matched = 0, shown = 0;
    for (uint32_t h = 0; h < f->ctl->nhosts; h++) {
        if (only >= 0 && h != (uint32_t)only)
            continue;
        size_t n = host_entries(f, h, e, max);
        const struct fab_host *hs = fab_host(f, h);
        if (o.json) {
            json_object *ho = json_object_new_object(), *fa = json_object_new_array();
            json_object_object_add(ho, "host", json_object_new_string(hs->name));
            json_object_object_add(ho, "node_id", json_object_new_int((int)hs->node_id));
            for (size_t i = 0; i < n; i++)
                if (selected(&e[i], o.select)) {
                    json_object_array_add(fa, entry_json(f, &e[i]));
                    matched++;
                }
            json_object_object_add(ho, "functions", fa);
            json_object_array_add(root, ho);
            continue;
        }
        if (o.tree) {
            if (only < 0)
                printf("%shost %s (node %u):\n", shown++ ? "\n" : "", hs->name, hs->node_id);
            print_tree(e, n);
            matched += (int)n;
            continue;
        }
        int printed = 0;
        for (size_t i = 0; i < n; i++) {
            if (!selected(&e[i], o.select))
                continue;
            matched++;
            if (!printed++ && only < 0)
                printf("%shost %s (node %u):\n", shown++ ? "\n" : "", hs->name, hs->node_id);
            print_line(&e[i], o.numeric, o.verbose);
            if (o.verbose)
                print_verbose(f, &e[i], o.verbose);
            if (o.hex)
                print_hex(&e[i], o.hex);
        }
    }
    if (o.json)
        puts(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED));
    rc = CLI_OK;
    if (o.select && !matched) {
        cli_err("no function matches '%s'; give a slot (02:00.0) or a device name from "
                "'ntblend lspci'", o.select);
        rc = CLI_FAIL;
    }
out:
    json_object_put(root);
    free(e);
    pci_cleanup(pacc);
    fab_detach(f);
    return rc;
}
