/*
 * A second NTB backend for tests (src/ntb/ntb_backend.h): a double over malloc'd memory that
 * records every call, selected with ntb_backend_use() (double_setup). With it, the segment
 * layer, SmartIO, the NTB API and the driver model run with no fabric and no agent: if a
 * layer still reached around the ops table it would crash, or its data would not land where
 * the double put the memory.
 *
 * Two hosts, a (node 4, index 0, this process) and b (node 8), 1 MiB of RAM each; one adapter
 * per host (ids 0 and 1, requester IDs 0x0100 and 0x0200), linked to each other, 4 windows of
 * 64 KiB at bus 0x40000000; one device function "dev0" in b with a 16 KiB BAR 0 at 0x100000
 * of b's address space, an MSI-X capability at 0x40. Its agent keeps a segment table, hands
 * out device mappings with I/O addresses IOVA_BASE + n * 0x10000, and a DMA aperture at
 * APERTURE_IO. With D.lent, dev0 is lent to a and hot-added into a's tree at 80:00.0, its BAR
 * at SHADOW_BAR (a's window 3); with D.iommu, a has an IOMMU whose mappings D.iommu_maps keeps.
 */
#ifndef NTBLEND_TEST_BACKEND_DOUBLE_H
#define NTBLEND_TEST_BACKEND_DOUBLE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "ntb_backend.h"
#include "runtime.h"

#define HOSTS 2
#define RAM_SIZE (1u << 20)
#define BAR_ADDR 0x100000ull
#define BAR_SIZE 0x4000ull
#define IOVA_BASE 0x7000000000ull
#define NODE(h) (4u + 4u * (h))
#define SHADOW_BAR 0x40030000ull   /* dev0's BAR 0 in a's map, when lent to a */
#define APERTURE_IO 0x40020000ull  /* where dev0 reaches the start of a's aperture */
#define APERTURE_IOVA (1ull << 46) /* ... in a's IOMMU domain for traffic from b */
#define APERTURE_SIZE 0x10000ull

struct call {
    char op[32];
    uint64_t a, b, c, d;
};

struct double_state {
    uint8_t *ram[HOSTS];
    uint64_t brk[HOSTS]; /* bump allocator over each host's RAM */
    uint8_t *bar;        /* dev0's BAR 0 */
    uint8_t cfg[4096];   /* dev0's config space */
    struct { uint32_t owner, id; uint64_t phys, size; } segs[16];
    int nsegs;
    struct { uint32_t host; uint64_t addr; } maps[16]; /* device mappings by id - 1 */
    int nmaps;
    uint32_t next_win;
    struct call calls[1024];
    int ncalls;
    int cpu_maps; /* window CPU mappings outstanding */
    /* Each host's adapter's registers. */
    _Atomic uint32_t spad[HOSTS][4];
    _Atomic uint64_t db[HOSTS], db_mask[HOSTS];
    _Atomic uint32_t db_seq[HOSTS], link_seq[HOSTS];
    /* Device Lending: dev0 in a's tree, and a's IOMMU. */
    bool lent, present, iommu;
    _Atomic uint32_t tree_gen;
    _Atomic uint32_t msi[8];
    struct { uint16_t rid; uint64_t iova, phys, len; unsigned perm; } iommu_maps[64];
};

extern struct double_state D;
extern const struct ntb_backend_ops double_ops;

/* Record a call; how many of that name (or starting so); the last of that name (fails the
 * test if none). */
void rec(const char *op, uint64_t a, uint64_t b, uint64_t c, uint64_t d);
int count(const char *op);
int count_prefix(const char *prefix);
const struct call *last(const char *op);
/* Where [addr, addr+len) of host h's address space lives, or NULL. */
uint8_t *resolve(uint32_t h, uint64_t addr, uint64_t len);
/* A segment on host b, as a process there would have created it. */
uint32_t seg_on_b(uint32_t id, uint64_t size);
/* What a device reaching a's RAM through a's IOMMU at `iova` with requester `rid` gets, or
 * NULL (no mapping, or not allowed `perm`). */
uint8_t *iommu_resolve(uint16_t rid, uint64_t iova, uint64_t len, unsigned perm);

/* cmocka setup and teardown: a fresh double, in use; the emulated fabric again. */
int double_setup(void **state);
int double_teardown(void **state);

#endif
