/*
 * Internals of the topology parser, shared by topo.c (reading the file) and topo_resolve.c
 * (everything that needs the whole file: adapters, names, cables, switch trees, devices).
 */
#ifndef NTBLEND_TOPO_INT_H
#define NTBLEND_TOPO_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "topo.h"

#define KiB 1024ull
#define MiB (1024ull * KiB)
#define GiB (1024ull * MiB)

#define RAM_MIN (2 * MiB)         /* the first 1 MiB holds agent mailboxes (FAB_MBOX_SIZE) */
#define RAM_MAX 0xfee00000ull     /* RAM must end below the MSI region (FAB_MSI_BASE) */
#define WINDOW_MAX (64 * GiB)     /* adapter BARs are 64 GiB apart (FAB_ADAPTER_STRIDE) */
#define ADAPTERS_PER_HOST 32      /* adapter requester IDs are devices 0..31 on bus 1 */
#define NS_MAX 1000000000ull      /* latencies above a second are typos */

#define MARK_KEY "\x01"  /* key of the injected section marker: no file can contain it */
#define MARK_BAD "\x02"  /* marker value: the header was unreadable and already reported */

enum sec { SEC_NONE, SEC_BAD, SEC_FABRIC, SEC_DEFAULTS, SEC_LATENCY, SEC_HOST, SEC_ADAPTER,
           SEC_SWITCH, SEC_LINKS, SEC_DEVICE, SEC_HOSTSWITCH, SEC_COUNT };

#define SEC_BIT(sec) (1u << (sec)) /* sections as a set: where a key may appear */

enum key { K_RAM, K_IOMMU, K_LUT_SIZE, K_LUT_ENTRIES, K_RID_ENTRIES, K_DOORBELLS,
           K_SCRATCHPADS, K_DMA_CHANNELS, K_NODE_ID, K_ADAPTERS, K_PORTS, K_SW_LATENCY,
           K_ENABLED, K_NTB_NS, K_ADAPTER_SWITCH_NS, K_ROOT_NS, K_DOORBELL_NS, K_MAX_READS,
           K_READ_BYTES, K_LINK_MBPS, K_DESCRIPTION, K_HSW_LATENCY, K_LINK_NS, K_CHASSIS,
           K_IOTLB_HIT_NS, K_PAGE_WALK_NS, K_ROOT_READ_BYTES, K_ROOT_MAX_READS, K_COUNT };

enum vkind { V_NUM, V_SIZE, V_BOOL, V_TEXT, V_LIST };
#define F_POW2 1u /* must be a power of two */
#define F_PAGE 2u /* must be a multiple of 4 KiB */

struct keydef {
    const char *name;
    enum vkind kind;
    unsigned sections; /* SEC_BIT(SEC_...): where the key is allowed */
    uint64_t min, max, def;
    unsigned flags;
    const char *why; /* appended to range errors */
};

#define ADAPTER_SECS (SEC_BIT(SEC_DEFAULTS) | SEC_BIT(SEC_ADAPTER))
extern const struct keydef topo_keys[K_COUNT];

#define SECTION_LIST "[fabric], [defaults], [latency], [host NAME], [adapter HOST.NAME], " \
                     "[switch NAME], [hostswitch NAME], [links] and [device NAME]"

/* Values one section instance set: line[k] != 0 once key k appeared, ok bit once it was valid. */
struct vals {
    uint64_t v[K_COUNT];
    int line[K_COUNT];
    uint64_t ok;
};

struct list_adapter { /* one name of a host's "adapters =" list */
    uint32_t host;
    char name[TOPO_NAME_MAX];
    int line;
};

struct sect_adapter { /* one [adapter HOST.NAME] section */
    char host[TOPO_NAME_MAX], name[TOPO_NAME_MAX];
    int line;
    bool used;
    struct vals p;
};

struct raw_link {
    char a[TOPO_NAME_MAX], b[TOPO_NAME_MAX];
    int line;
};

enum limit { L_HOSTS, L_ADAPTERS, L_SWITCHES, L_LINKS, L_DEVICES, L_HSWITCHES, L_COUNT };

struct sect_hswitch { /* what a [hostswitch NAME] names, resolved after the whole file */
    char host[TOPO_NAME_MAX], parent[TOPO_NAME_MAX];
    char devices[200];
    int host_line, parent_line, devices_line;
};

struct pstate {
    struct topo *t;
    FILE *err, *in;
    const char *path;
    int nerr;
    int read_errno;

    /* reader */
    char *buf;
    size_t cap;
    int line;          /* line of the real line most recently handed to inih */
    bool content;      /* that line must produce a handler call (not blank, not a comment) */
    bool header;       /* ... and it looked like a [section] */
    bool called;       /* the handler ran for it */
    bool marker_pending;
    char marker[272]; /* "\x01=" + a trimmed name of < 256 + newline */

    /* current section */
    enum sec sec;
    int cur;           /* index of the current host/adapter/switch/device, -1 = checked only */
    char title[64];    /* the section as written, for messages */
    struct vals *v;    /* where keys of the current section go */
    struct vals scratch; /* for sections whose values are checked but not kept */

    int single_line[SEC_COUNT]; /* first line of [fabric], [defaults], [latency] */
    struct vals single[SEC_COUNT];
    struct vals host_v[TOPO_MAX_HOSTS];
    struct vals sw_v[TOPO_MAX_SWITCHES];
    struct list_adapter lists[TOPO_MAX_ADAPTERS];
    uint32_t nlists;
    struct sect_adapter sects[TOPO_MAX_ADAPTERS];
    uint32_t nsects;
    struct raw_link rl[TOPO_MAX_LINKS];
    uint32_t nrl;
    char dev_host[TOPO_MAX_DEVICES][TOPO_NAME_MAX];
    int dev_host_line[TOPO_MAX_DEVICES], dev_type_line[TOPO_MAX_DEVICES];
    bool limit_hit[L_COUNT];
    struct vals hsw_v[TOPO_MAX_HSWITCHES];
    struct sect_hswitch hsw[TOPO_MAX_HSWITCHES];

    /* resolution */
    int adapter_link_line[TOPO_MAX_ADAPTERS];
    uint32_t sw_links[TOPO_MAX_SWITCHES];
    uint32_t uf[TOPO_MAX_SWITCHES];
};

/* "FILE:LINE: message" on the error stream; counts the problem. */
__attribute__((format(printf, 3, 4)))
void topo_perr(struct pstate *st, int line, const char *fmt, ...);
/* A TOPO_MAX_* limit was reached (reported once per kind). */
void topo_limit_error(struct pstate *st, enum limit l);
/* A size for messages ("4M", "123456"). */
const char *topo_fmt_size(uint64_t v, char *buf, size_t len);
/* Copy a name that was checked to fit. */
void topo_copy_name(char dst[TOPO_NAME_MAX], const char *src);
/* After reading: build adapters, hosts, switches, links, devices and latency in st->t. */
void topo_resolve(struct pstate *st);
/* A key of the current section that has a keydef (numbers, sizes, booleans, lists). */
void topo_section_key(struct pstate *st, const char *name, const char *value);
/* true when name is 1..31 letters, digits, '_' or '-'. */
bool topo_valid_name(const char *name);
/* [hostswitch NAME] (topo_hswitch.c): begin a section, take one of its keys, and after the
 * whole file resolve the hosts, parents and devices they name (after the adapters and devices). */
void topo_hswitch_begin(struct pstate *st, const char *name);
void topo_hswitch_key(struct pstate *st, const char *name, const char *value);
void topo_hswitch_resolve(struct pstate *st);

#endif
