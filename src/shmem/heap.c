/*
 * The symmetric heap allocator. Every PE runs the same deterministic first-fit allocator over
 * its own heap, and the routines are collective (same calls, same order, same arguments), so
 * an object has the same offset in every PE's heap: PE j's copy of `p` is heap_j + (p - heap).
 * The block list is private memory of each PE; only the user's bytes live in the segment.
 *
 * Collective semantics (1.5 §9.3): malloc/calloc/align barrier before returning, free before
 * releasing, realloc both; a size of 0 returns NULL without a barrier.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "shmem.h"
#include "shmem_internal.h"

#define MIN_ALIGN 64u /* a cache line: atomics never share one with a neighbour's data */

struct block {
    size_t off, size;
    bool used;
};

static struct block *blocks;
static size_t nblocks, cap;

/* shmem_align must align the address, and the offset must be the same on every PE, so every
 * PE's heap starts at an address aligned to the same power of two: heap_align, the largest one
 * not above the heap (capped at 1 GiB). Offset alignment up to it is then address alignment.
 * The segment as the runtime maps it is wherever the host's RAM file puts it, so this PE uses
 * a second mapping of the same shared pages (mremap with old size 0, as for the globals) at a
 * suitable address: placed, placed_len. */
#define MAX_HEAP_ALIGN ((size_t)1 << 30)
static size_t heap_align = MIN_ALIGN;
static void *placed;
static size_t placed_len;

void *shm_heap_place(void *base)
{
    size_t a = MIN_ALIGN;
    while (a < MAX_HEAP_ALIGN && a * 2 <= shm.heap_size)
        a *= 2;
    size_t len = shm.seg_size, span = len + a;
    /* Reserve address space for the segment plus the alignment slack, map the segment into it
     * with the heap (SHM_CTRL_SIZE in) on an a-aligned address, give back the rest. */
    char *r = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED)
        shm_fatal("no address space for the symmetric heap (%zu bytes): %s", span, strerror(errno));
    uintptr_t heap = ((uintptr_t)r + SHM_CTRL_SIZE + a - 1) & ~(uintptr_t)(a - 1);
    char *at = (char *)(heap - SHM_CTRL_SIZE);
    void *p = mremap(base, 0, len, MREMAP_MAYMOVE | MREMAP_FIXED, at);
    if (p == MAP_FAILED)
        shm_fatal("cannot place the symmetric heap at an aligned address: mremap: %s",
                  strerror(errno));
    if (at > r)
        munmap(r, (size_t)(at - r));
    if (r + span > at + len)
        munmap(at + len, (size_t)(r + span - (at + len)));
    placed = at;
    placed_len = len;
    heap_align = a;
    return at;
}

void shm_heap_unplace(void)
{
    if (placed)
        munmap(placed, placed_len);
    placed = NULL;
    heap_align = MIN_ALIGN;
}

static void insert_at(size_t i, struct block b)
{
    if (nblocks == cap) {
        size_t ncap = cap ? cap * 2 : 64;
        struct block *nb = realloc(blocks, ncap * sizeof *nb);
        if (!nb)
            shm_fatal("out of memory for the heap's block list");
        blocks = nb;
        cap = ncap;
    }
    memmove(blocks + i + 1, blocks + i, (nblocks - i) * sizeof *blocks);
    blocks[i] = b;
    nblocks++;
}

static void remove_at(size_t i)
{
    memmove(blocks + i, blocks + i + 1, (nblocks - i - 1) * sizeof *blocks);
    nblocks--;
}

void shm_heap_init(void)
{
    nblocks = 0;
    /* The library's scratch area is the heap's last bytes, outside the allocator. */
    size_t res = (shm_scratch_size() + 4095) & ~(size_t)4095;
    if (res >= shm.heap_size)
        shm_fatal("SHMEM_SYMMETRIC_SIZE is too small for %d PEs (the library reserves %zu bytes)",
                  shm.npes, res);
    insert_at(0, (struct block){ 0, shm.heap_size - res, false });
    insert_at(1, (struct block){ shm.heap_size - res, res, true });
}

void shm_heap_fini(void)
{
    free(blocks);
    blocks = NULL;
    nblocks = cap = 0;
}

static size_t free_bytes(void)
{
    size_t f = 0;
    for (size_t i = 0; i < nblocks; i++)
        if (!blocks[i].used)
            f += blocks[i].size;
    return f;
}

static void exhausted(const char *who, size_t size)
{
    size_t avail = free_bytes(), suggest = ((shm.heap_size / 2 + size) >> 20) + shm.heap_size / (1 << 20) + 1;
    fprintf(stderr,
            "shmem: PE %d: %s(%zu): the symmetric heap is exhausted (%zu of %zu bytes free%s); "
            "enlarge it with SHMEM_SYMMETRIC_SIZE, e.g. SHMEM_SYMMETRIC_SIZE=%zuM oshrun ... "
            "(each PE's heap is a segment of its host's RAM)\n",
            shm.me, who, size, avail, shm.heap_size, avail >= size ? ", but not in one piece" : "",
            suggest);
}

/* First fit at `align`; returns the offset or SIZE_MAX. */
static size_t alloc_block(size_t align, size_t size)
{
    size = (size + MIN_ALIGN - 1) & ~(size_t)(MIN_ALIGN - 1);
    for (size_t i = 0; i < nblocks; i++) {
        struct block b = blocks[i];
        if (b.used)
            continue;
        size_t start = (b.off + align - 1) & ~(align - 1);
        if (start < b.off || start - b.off + size > b.size || start - b.off + size < size)
            continue;
        size_t front = start - b.off, back = b.size - front - size;
        blocks[i] = (struct block){ start, size, true };
        if (back)
            insert_at(i + 1, (struct block){ start + size, back, false });
        if (front)
            insert_at(i, (struct block){ b.off, front, false });
        return start;
    }
    return SIZE_MAX;
}

static size_t find_block(const void *ptr, const char *who)
{
    size_t off = (size_t)((const char *)ptr - shm_heap_of(shm.me));
    if ((const char *)ptr < shm_heap_of(shm.me) || off >= shm.heap_size)
        shm_fatal("%s(%p): not an address of the symmetric heap", who, ptr);
    for (size_t i = 0; i < nblocks; i++)
        if (blocks[i].used && blocks[i].off == off)
            return i;
    shm_fatal("%s(%p): not a block returned by shmem_malloc (freed twice?)", who, ptr);
}

static void release(size_t i)
{
    blocks[i].used = false;
    if (i + 1 < nblocks && !blocks[i + 1].used) {
        blocks[i].size += blocks[i + 1].size;
        remove_at(i + 1);
    }
    if (i > 0 && !blocks[i - 1].used) {
        blocks[i - 1].size += blocks[i].size;
        remove_at(i);
    }
}

static void *do_align(const char *who, size_t alignment, size_t size)
{
    shm_require_init(who);
    if (size == 0)
        return NULL;
    if (alignment < MIN_ALIGN)
        alignment = MIN_ALIGN;
    void *p = NULL;
    if (alignment & (alignment - 1))
        fprintf(stderr, "shmem: PE %d: %s: alignment %zu is not a power of two\n", shm.me, who,
                alignment);
    else if (alignment > heap_align)
        fprintf(stderr, "shmem: PE %d: %s: alignment %zu is more than the symmetric heap's "
                "(%zu, the largest power of two not above SHMEM_SYMMETRIC_SIZE); give a larger "
                "SHMEM_SYMMETRIC_SIZE\n", shm.me, who, alignment, heap_align);
    else {
        size_t off = alloc_block(alignment, size);
        if (off == SIZE_MAX)
            exhausted(who, size);
        else
            p = shm_heap_of(shm.me) + off;
    }
    shm_barrier();
    return p;
}

void *shmem_malloc(size_t size) { return do_align("shmem_malloc", MIN_ALIGN, size); }
void *shmem_align(size_t alignment, size_t size) { return do_align("shmem_align", alignment, size); }

/* The hints (SHMEM_MALLOC_ATOMICS_REMOTE, SHMEM_MALLOC_SIGNAL_REMOTE) say how the block will be
 * used; every heap is RAM reached by stores and CPU atomics, so none changes the allocation.
 * Unknown bits are ignored. */
void *shmem_malloc_with_hints(size_t size, long hints)
{
    (void)hints;
    return do_align("shmem_malloc_with_hints", MIN_ALIGN, size);
}

void *shmem_calloc(size_t count, size_t size)
{
    if (count && size > SIZE_MAX / count) {
        shm_require_init("shmem_calloc");
        exhausted("shmem_calloc", SIZE_MAX);
        shm_barrier();
        return NULL;
    }
    shm_require_init("shmem_calloc");
    if (count * size == 0)
        return NULL;
    size_t off = alloc_block(MIN_ALIGN, count * size);
    void *p = NULL;
    if (off == SIZE_MAX)
        exhausted("shmem_calloc", count * size);
    else {
        p = shm_heap_of(shm.me) + off;
        memset(p, 0, count * size); /* before the barrier: nobody writes it earlier */
    }
    shm_barrier();
    return p;
}

void shmem_free(void *ptr)
{
    shm_require_init("shmem_free");
    if (!ptr)
        return;
    shm_barrier(); /* everyone is done with it */
    release(find_block(ptr, "shmem_free"));
}

void *shmem_realloc(void *ptr, size_t size)
{
    if (!ptr)
        return shmem_malloc(size);
    if (size == 0) {
        shmem_free(ptr);
        return NULL;
    }
    shm_require_init("shmem_realloc");
    size_t i = find_block(ptr, "shmem_realloc");
    shm_barrier(); /* nobody is writing the old block while it moves */
    size_t old_off = blocks[i].off, old_size = blocks[i].size;
    size_t want = (size + MIN_ALIGN - 1) & ~(size_t)(MIN_ALIGN - 1);
    void *p = ptr;
    if (want <= old_size) {
        if (want < old_size) { /* shrink in place */
            blocks[i].size = want;
            insert_at(i + 1, (struct block){ old_off + want, old_size - want, true });
            release(i + 1);
        }
    } else if (i + 1 < nblocks && !blocks[i + 1].used && old_size + blocks[i + 1].size >= want) {
        size_t extra = want - old_size; /* grow into the free neighbour */
        blocks[i].size = want;
        blocks[i + 1].off += extra;
        blocks[i + 1].size -= extra;
        if (!blocks[i + 1].size)
            remove_at(i + 1);
    } else {
        size_t off = alloc_block(MIN_ALIGN, size);
        if (off == SIZE_MAX) {
            exhausted("shmem_realloc", size);
            p = NULL; /* the old block stays, as realloc(3) */
        } else {
            p = shm_heap_of(shm.me) + off;
            memcpy(p, ptr, old_size);
            release(find_block(ptr, "shmem_realloc"));
        }
    }
    shm_barrier();
    return p;
}

void *shmalloc(size_t size) { return shmem_malloc(size); }
void shfree(void *ptr) { shmem_free(ptr); }
void *shrealloc(void *ptr, size_t size) { return shmem_realloc(ptr, size); }
void *shmemalign(size_t alignment, size_t size) { return shmem_align(alignment, size); }
