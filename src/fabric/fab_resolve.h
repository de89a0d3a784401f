/*
 * Address resolution and DMA (resolve.c, latency.c): what a bus address on a host reaches
 * through its IOMMU, address map and NTB windows, device-style reads, writes and copies built
 * on it, and the latency model's delays.
 */
#ifndef NTBLEND_FAB_RESOLVE_H
#define NTBLEND_FAB_RESOLVE_H

#include "fab_state.h"

/* Result of resolving a bus/physical address range. */
struct fab_target {
    enum fab_region region;
    uint32_t host;       /* host whose RAM (or MSI region) is the final target */
    uint64_t addr;       /* physical address there */
    uint64_t len;        /* how much of the request this extent covers */
    uint32_t hops;       /* NTB crossings + switches, for the latency model */
    uint32_t ntbs;       /* NTB crossings */
    uint32_t path_ns;    /* one-way latency of the path (latency model; 0 when off) */
    uint16_t walks;      /* IOMMU translations on the path (latency model) */
    uint16_t split;      /* reads on it leave a root complex's IOMMU split (latency model) */
    uint32_t egress;     /* 1 + the adapter of the first NTB crossing (0: none) */
    uint32_t fn;         /* FAB_REGION_DEVICE: the function; addr is then the offset in its
                          * BAR file */
    int err;             /* 0, or why it failed: -ENOLINK link down, -EFAULT IOMMU fault,
                          * -EIO master abort / unmapped LUT entry, -EACCES requester not in table */
};

/*
 * Resolve [addr, addr+len) as seen by requester `rid` on host `host` (rid 0 = CPU: no IOMMU).
 * Follows windows through LUT entries to peer hosts (IOMMU of the inbound adapter's domain on
 * each target), recursively for chained windows. Returns the first extent in *t (t->len may
 * be shorter than len: call again for the rest). `write` selects permission and RID checks
 * (reads through an NTB need the requester in the egress adapter's requester-ID table).
 * Returns 0 with t->err set on a fabric error, or -EINVAL for nonsense arguments.
 */
int fab_resolve(struct fab *f, uint32_t host, uint16_t rid, uint64_t addr, uint64_t len,
                bool write, struct fab_target *t);

/* What a CPU mapping would reach, without side effects: no faults are recorded (nothing was
 * accessed yet; the access itself reads all ones or is dropped). */
int fab_resolve_probe(struct fab *f, uint32_t host, uint16_t rid, uint64_t addr, uint64_t len,
                      bool write, struct fab_target *t);

/*
 * Device-style DMA on host `host` by requester `rid`: copy len bytes between a local buffer
 * and bus address `addr`, through the IOMMU, address map and NTB windows. Nothing is written
 * unless the whole range resolves. Faults are recorded in the host's fault ring. Reads of
 * unreachable ranges fill all ones. MSI-region writes raise vectors. Returns 0 or -errno.
 */
int fab_dev_write(struct fab *f, uint32_t host, uint16_t rid, uint64_t addr, const void *src,
                  uint64_t len);
int fab_dev_read(struct fab *f, uint32_t host, uint16_t rid, uint64_t addr, void *dst,
                 uint64_t len);
/* Bus-to-bus copy as a DMA engine does it (both addresses on `host`). */
int fab_dev_copy(struct fab *f, uint32_t host, uint16_t rid, uint64_t dst, uint64_t src,
                 uint64_t len);
/* The same for a descriptor queued at `queued_ns` on a DMA engine: with the latency model, its
 * data goes on the wire as soon as the link is free after that time, however late the
 * emulating thread gets to it (the hardware engine would have started it then). */
int fab_dev_copy_queued(struct fab *f, uint32_t host, uint16_t rid, uint64_t dst, uint64_t src,
                        uint64_t len, uint64_t queued_ns);


/* ---- latency model (latency.c; docs/topology.md has every constant and its source) ---- */
/* Time for a transfer of len bytes over a path whose one-way latency is one_way_ns: a posted
 * write arrives after the path and streams at the link's rate; a read pays a round trip per
 * request, with a bounded number in flight. `split`: the read crosses a root complex's IOMMU
 * on its way to a device or an NTB, which splits its requests (l->root_read_bytes, at most
 * l->root_max_reads open). Pure arithmetic: whether the model is on is the caller's business. */
uint64_t fab_lat_xfer_ns(const struct topo_latency *l, uint64_t one_way_ns, uint64_t len,
                         bool read, bool split);
/* The same for a DMA on fabric f: 0 when the model is off. */
uint64_t fab_lat_dma_ns(const struct fab *f, uint64_t one_way_ns, uint64_t len, bool read,
                        bool split);
/* One way between two points of one host's PCIe tree, each an in-host switch + 1 or 0 (a root
 * port, where RAM is too): up to their lowest common switch and down, or through the root
 * complex when via_root (the host's IOMMU translates the access). sw: the in-host switches. */
uint32_t fab_lat_tree_ns(const struct fab_hswitch *sw, uint32_t root_ns, uint32_t a, uint32_t b,
                         bool via_root);
/* IOMMU translations on a path: each costs an IOTLB look-up, and a page walk when it missed. */
uint32_t fab_lat_iommu_ns(const struct topo_latency *l, uint32_t walks, bool hit);
/* Delay for ringing a doorbell from adapter a on its peer b. */
uint64_t fab_lat_doorbell_ns(const struct fab *f, uint32_t a, uint32_t b);
void fab_lat_delay(uint64_t ns);

#endif
