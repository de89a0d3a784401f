/*
 * Topology description: what a topology file says, parsed and validated, before any fabric
 * exists. src/topo/topo.c reads the file (libinih) and checks it; fabric creation copies the
 * result into shared memory. Names are unique per kind; indices are positions in the arrays.
 */
#ifndef NTBLEND_TOPO_H
#define NTBLEND_TOPO_H

#include <stdint.h>
#include <stdio.h>

#define TOPO_NAME_MAX 32
#define TOPO_MAX_HOSTS 256
#define TOPO_MAX_ADAPTERS 1024
#define TOPO_MAX_SWITCHES 64
#define TOPO_MAX_HSWITCHES 32 /* in-host PCIe switches, all hosts together */
#define TOPO_MAX_LINKS 2048
#define TOPO_MAX_DEVICES 256
#define TOPO_MAX_SPADS 64
#define TOPO_MAX_DB_BITS 32
#define TOPO_MAX_DMA_CHANNELS 16
#define TOPO_MAX_PEERS 64 /* peers one adapter can reach: link_is_up returns a u64 bitmask */

enum topo_end_kind { TOPO_END_ADAPTER, TOPO_END_SWITCH };

struct topo_host {
    char name[TOPO_NAME_MAX];
    uint32_t node_id;  /* cluster node id, unique, user-chosen (SISCI style) */
    uint64_t ram_size; /* bytes, multiple of 4 KiB */
    int iommu;         /* 0 off, 1 on */
    int line;          /* line of the [host NAME] section, for messages */
};

struct topo_adapter {
    char name[TOPO_NAME_MAX]; /* unique; "HOST.ADAPTER" is how links and the CLI name it */
    uint32_t host;            /* index into hosts */
    uint32_t index_on_host;   /* 0.. in file order */
    uint64_t lut_size;        /* bytes per LUT entry: power of two, >= 4 KiB */
    uint32_t lut_entries;     /* window BAR = lut_entries * lut_size */
    uint32_t rid_entries;     /* requester-ID table size */
    uint32_t db_bits;         /* doorbell bits, <= 32 */
    uint32_t spads;           /* 32-bit scratchpads */
    uint32_t dma_channels;    /* DMA-engine channels, 0 = no engine */
    uint32_t at;              /* in-host switch it sits below + 1; 0: a root port */
    int line;
};

struct topo_switch {
    char name[TOPO_NAME_MAX];
    uint32_t ports;     /* port count; links to it may not exceed this */
    uint32_t latency_ns; /* per traversal, used by the latency model */
    int line;
};

/* A transparent PCIe switch inside a host's tree: on the motherboard, or in an expansion chassis
 * cabled to the host through a transparent host and target adapter (smartio-tocs-2021 Fig. 5).
 * Devices and adapters below it reach each other through it, not through the root complex,
 * unless the host's IOMMU is on. */
struct topo_hswitch {
    char name[TOPO_NAME_MAX];
    uint32_t host;
    uint32_t parent;     /* the in-host switch above it + 1; 0: a root port */
    uint32_t latency_ns; /* per traversal, used by the latency model */
    uint32_t link_ns;    /* its upstream link's own cost: an expansion cable and its adapters */
    int chassis;         /* in an expansion chassis (link_ns defaults to the cable's cost) */
    int line;
};

struct topo_end {
    enum topo_end_kind kind;
    uint32_t index; /* adapter or switch index */
};

struct topo_link {
    struct topo_end a, b; /* adapter-adapter (back to back), adapter-switch, switch-switch */
    int line;
};

/* Devices are declared now and modelled by later layers; the parser keeps them as key=value. */
struct topo_device {
    char name[TOPO_NAME_MAX];
    char type[TOPO_NAME_MAX]; /* "nvme", "accel", ... */
    uint32_t host;
    char params[512]; /* remaining "key=value" pairs, ';'-separated, unvalidated here */
    uint32_t at;      /* in-host switch it sits below + 1; 0: a root port */
    int line;
};

struct topo_latency {
    int enabled;              /* [latency] enabled = yes|no; off by default */
    uint32_t ntb_ns;          /* added by an NTB crossing one way (seed: 350-370 ns) */
    uint32_t adapter_switch_ns; /* on-adapter switch chip per hop (PEX8733: <= 132 ns) */
    uint32_t root_ns;         /* root complex / host bridge to RAM */
    uint32_t doorbell_ns;     /* extra cost of a doorbell interrupt delivery */
    uint32_t max_read_requests; /* outstanding DMA read requests per requester */
    uint32_t read_request_bytes; /* max read request size */
    uint32_t link_mbps;       /* link bandwidth in MB/s for DMA transfer time */
    uint32_t iotlb_hit_ns;    /* an IOMMU translation the IOTLB holds */
    uint32_t page_walk_ns;    /* added on an IOTLB miss: the walk of the I/O page table */
    uint32_t root_read_bytes; /* reads routed through a root complex's IOMMU leave it split to this */
    uint32_t root_max_reads;  /* ... with at most this many of them open there */
};

struct topo {
    char path[256];
    uint32_t nhosts, nadapters, nswitches, nlinks, ndevices, nhswitches;
    struct topo_host hosts[TOPO_MAX_HOSTS];
    struct topo_adapter adapters[TOPO_MAX_ADAPTERS];
    struct topo_switch switches[TOPO_MAX_SWITCHES];
    struct topo_link links[TOPO_MAX_LINKS];
    struct topo_device devices[TOPO_MAX_DEVICES];
    struct topo_hswitch hswitches[TOPO_MAX_HSWITCHES];
    struct topo_latency latency;
};

/*
 * Parse and validate FILE into *t (caller allocates; struct topo is large, use the heap).
 * Returns 0, or -EINVAL after printing every problem to err as "FILE:LINE: what; how to fix",
 * or -errno when the file cannot be read.
 */
int topo_load(const char *path, struct topo *t, FILE *err);

/* Lookups by name; -1 when absent. An adapter is named "HOST.ADAPTER". */
int topo_host_by_name(const struct topo *t, const char *name);
int topo_adapter_by_name(const struct topo *t, const char *qualified);
int topo_switch_by_name(const struct topo *t, const char *name);

/* Parse "64M", "1G", "4096", "4k" into bytes. 0 on success, -EINVAL otherwise. */
int topo_parse_size(const char *s, uint64_t *out);

#endif
