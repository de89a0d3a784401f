/*
 * SmartIO's insides (src/smartio): a borrowed or bound device as the library keeps it, a BAR
 * mapping, and what the files share — sio.c (registry, borrowing, config space, BARs, memory
 * for the device, interrupts, placement), pcie_tree.c (this host's PCIe tree and binding),
 * ram.c (this host's RAM for device DMA), stream.c (streaming DMA through the DMA window)
 * and sio_devseg.c (device segments).
 * Internal to libntblend.
 */
#ifndef NTBLEND_SIO_INT_H
#define NTBLEND_SIO_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "ntblend/smartio.h"
#include "runtime.h"

struct sio_dom;
struct sio_stream_map;

/* How a device's streaming mappings are made, decided on its first (stream.c). */
enum sio_stream_mode {
    SIO_STREAM_UNSET = 0,
    SIO_STREAM_IOMMU,     /* pages inserted into an IOMMU domain of this host */
    SIO_STREAM_PHYS,      /* a device of this host, IOMMU off: the physical address */
    SIO_STREAM_BY_LENDER, /* a device of another host, IOMMU off: a window per mapping */
};

struct sio_dev {
    struct rt *rt;
    struct ntb_func_info info; /* as it was when borrowed: what it is, where its BARs are */
    sio_dma_t *msi;  /* this host's MSI region, mapped for the device once */
    uint64_t msi_io;
    uint32_t fn, lender;
    int ai, peer_ai; /* the path mappings are made over now (sio_set_path): our adapter facing
                      * the lender and the lender's, -1 when local */
    int path;        /* its number (sio_paths.c) */
    unsigned mode;   /* SIO_EXCLUSIVE, SIO_SHARED, or AGENT_BORROW_BIND (sio_bind) */
    /* A lent function bound in this host's tree (sio_bind): its BARs are where its hot-add
     * mapped them in this host's address map (0: not in the tree, a window of its own). */
    uint64_t tree_bar[NTB_BK_BARS];
    struct sio_dev *next; /* this process's devices (stream.c reclaims across them) */
    /* Streaming DMA (stream.c). */
    pthread_mutex_t stream_lock;        /* the mode and domain, the by-lender mappings */
    enum sio_stream_mode stream;
    struct sio_dom *dom;                /* SIO_STREAM_IOMMU */
    atomic_uint streaming;              /* mappings in its domain now */
    struct sio_stream_map *by_lender;   /* SIO_STREAM_BY_LENDER: each mapping the lender made */
};

struct sio_bar {
    sio_dev_t *dev;
    struct rt_window win; /* through our adapter; win.map is NULL when the device is here */
    void *tree_base;      /* ... or the hot-add's window, mapped into this process */
    volatile char *ptr;
    size_t size;
    int ai, peer_ai;      /* the path it was mapped over */
    int bar;
    struct ntb_window alt; /* the same BAR through another path, which the CPU mapping uses
                            * while its own is down (alt.count 0: none) */
    int alt_ai, alt_peer_ai;
};

struct sio_dma {
    sio_dev_t *dev;
    uint32_t id;
};

/* A mapping for d's DMA onto [addr, addr + size) of host `host`'s map, or, with host =
 * AGENT_MAP_MCAST | group, onto offset addr of a multicast group's window (sio.c). */
int smartio_map_host(sio_dev_t *d, uint32_t host, uint64_t addr, size_t size, uint64_t *ioaddr,
                     sio_dma_t **out);
/* One request to this host's agent (rsp may be NULL). */
int smartio_call(struct rt *rt, uint32_t op, uint32_t flags, uint64_t a, uint64_t b, uint64_t c,
             struct agent_rsp *rsp);

/* sio_borrow with any mode the agent knows (sio_bind's AGENT_BORROW_BIND too). */
int smartio_borrow(uint32_t id, unsigned mode, sio_dev_t **out);

/* pcie_tree.c: map BAR `bar` of a lent function bound in this host's tree through the window
 * its hot-add set up, into m (ptr, tree_base). 0 or -errno. */
int smartio_tree_bar_map(sio_dev_t *d, int bar, struct sio_bar *m);

/* paths.c: path k to d's lender (our adapter and the lender's), 0 or -ENOENT (-EINVAL: d is
 * here); d->path for the adapter sio_borrow chose. */
int smartio_path(const sio_dev_t *d, int k, int *ai, int *peer_ai);
void smartio_path_init(sio_dev_t *d);

/* ram.c: this host's physical address of [cpu, cpu + len) if sio_ram_alloc gave it. */
int smartio_ram_phys(const void *cpu, size_t len, uint64_t *phys);

/* stream.c: d joins / leaves this process's device list; smartio_stream_release undoes every
 * streaming mapping d still has and its hold on a DMA window (before it is returned). */
void smartio_stream_init(sio_dev_t *d);
void smartio_stream_release(sio_dev_t *d);

/* Page bitmaps (ram.c): set or clear bits [i, i + n); the first run of n clear bits of
 * [0, total), searching from `from` and wrapping, or -1. */
void smartio_bits(uint64_t *b, uint64_t i, uint64_t n, bool on);
int64_t smartio_find_run(const uint64_t *b, uint64_t total, uint64_t n, uint64_t from);

#endif
