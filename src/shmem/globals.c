/*
 * Symmetric global and static variables: the main program's writable data after RELRO (.data,
 * .bss, and whatever else the linker put there: .got.plt, COPY-relocated libc variables such
 * as stdout or environ) become part of this PE's segment, after the get reply buffer at
 * shm.globals_off. Every PE runs the same executable, so an object's offset within that range
 * is the same everywhere (its address is not, with PIE and ASLR): a global is reached at
 * shm.globals_off + (addr - start) in any PE's segment, like a heap object at its heap offset.
 *
 * shm_globals_init() copies the range into the segment, then maps the segment's pages onto
 * the program's addresses: the program's globals then live in the host RAM file (MAP_SHARED),
 * where other PEs (NTB windows, same-host mappings, the ring's nodes) read and write them.
 * seg_map_local() hands out a pointer into the runtime's one mapping of the whole host RAM
 * file, so moving that mapping (mremap with old_size = len) would punch a hole in it; instead
 * mremap with old_size 0 makes a second mapping of the same shared pages at the program's
 * addresses and leaves the original alone. Nothing in the runtime remaps or unmaps it: the
 * watcher thread only remaps NTB windows (src/ntb/emu), seg_unmap() of a writable local map
 * unmaps nothing, and unmapping the RAM file when the runtime stops leaves our separate
 * mapping be.
 *
 * shm_globals_fini() gives the program private memory with the same contents again (a private
 * copy moved over the range in one mremap) before the segment is removed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shmem_internal.h"

/* The main program's global variables as this module sees them: where they are, whether they
 * live in our segment now. */
static struct {
    bool probed;     /* start/size computed (once: every PE must find the same size) */
    bool live;       /* the range is our segment's pages */
    uintptr_t start; /* page aligned */
    size_t size;     /* page multiple; 0: no globals */
    seg_map_t *map;  /* our second mapping of the globals area (kept for the accounting) */
} statics; /* the program's data and bss: where they are, whether our segment backs them */

struct range {
    uintptr_t page;
    uintptr_t lo, hi;
};

/* The first object dl_iterate_phdr reports is the main program. */
static int probe_main(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct range *r = arg;
    uintptr_t rw_lo = 0, rw_hi = 0, relro_end = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_W) && ph->p_memsz && hi > rw_hi) {
            rw_lo = lo; /* the writable segment that ends last: .data and .bss */
            rw_hi = hi;
        } else if (ph->p_type == PT_GNU_RELRO) {
            relro_end = hi & ~(r->page - 1); /* what ld.so makes read-only */
        }
    }
    if (rw_hi) {
        uintptr_t lo = relro_end > rw_lo && relro_end <= rw_hi ? relro_end : rw_lo;
        r->lo = lo & ~(r->page - 1);
        r->hi = (rw_hi + r->page - 1) & ~(r->page - 1);
        if (relro_end >= rw_hi)
            r->lo = r->hi; /* all of it read-only after relocation: nothing to share */
    }
    return 1; /* only the main program */
}

size_t shm_globals_size(void)
{
    if (statics.probed)
        return statics.size;
    long pg = sysconf(_SC_PAGESIZE);
    struct range r = { .page = pg > 0 ? (uintptr_t)pg : 4096 };
    dl_iterate_phdr(probe_main, &r);
    statics.start = r.lo;
    statics.size = r.hi > r.lo ? r.hi - r.lo : 0;
    statics.probed = true;
    return statics.size;
}

/* Copy the whole range, padding between variables included: the address sanitizer poisons
 * that padding (its redzones), so this copy is not instrumented and not a memcpy it would
 * intercept. Page-aligned, whole pages: copy in words. */
__attribute__((no_sanitize("address"), noinline)) static void copy_range(void *dst, const void *src,
                                                                          size_t len)
{
    volatile uint64_t *d = dst;
    const volatile uint64_t *s = src;
    for (size_t i = 0; i < len / sizeof(uint64_t); i++)
        d[i] = s[i];
}

void shm_globals_init(void)
{
    size_t len = shm_globals_size();
    if (!len || statics.live)
        return;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    if (shm.globals_off % page || shm.seg_size < shm.globals_off + len)
        shm_fatal("internal: the globals area (offset %zu, %zu bytes) does not fit the "
                  "%zu-byte segment page-aligned", shm.globals_off, len, shm.seg_size);
    /* Nothing else writes the program's globals now (shmem_init runs in the thread that
     * called it; the runtime's and the transport's threads only touch library memory), so
     * the copy is their current contents. */
    copy_range((char *)shm.pes[shm.me].base + shm.globals_off, (const void *)statics.start, len);
    void *p = seg_map_local(shm.local, shm.globals_off, len, 0, &statics.map);
    if (!p)
        shm_fatal("cannot map the symmetric globals area of the segment: %s",
                  seg_strerror(-errno));
    if ((uintptr_t)p % page)
        shm_fatal("internal: the symmetric globals area is mapped at %p, not page aligned", p);
    /* A second mapping of the same shared pages, over the program's data and bss. */
    void *at = mremap(p, 0, len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)statics.start);
    if (at == MAP_FAILED)
        shm_fatal("cannot place the program's global variables (%p, %zu bytes) in the "
                  "symmetric segment: mremap: %s", (void *)statics.start, len, strerror(errno));
    if (at != (void *)statics.start)
        shm_fatal("internal: the program's globals went to %p, not %p", at, (void *)statics.start);
    statics.live = true;
    shm_debug("globals: %p..%p (%zu bytes) at segment offset %zu", (void *)statics.start,
              (void *)(statics.start + len), len, shm.globals_off);
}

bool shm_globals_off(const void *addr, size_t *off)
{
    uintptr_t a = (uintptr_t)addr;
    if (!statics.live || a < statics.start || a - statics.start >= statics.size)
        return false;
    *off = shm.globals_off + (a - statics.start);
    return true;
}

void shm_globals_fini(void)
{
    if (!statics.live)
        return;
    size_t len = statics.size;
    /* A private copy, moved over the range in one step: the globals keep their values (and
     * their addresses) with no moment at which they read as zero. */
    void *tmp = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (tmp == MAP_FAILED)
        shm_fatal("shmem_finalize: no memory to copy the program's globals out of the "
                  "symmetric segment (%zu bytes): %s", len, strerror(errno));
    copy_range(tmp, (const void *)statics.start, len);
    if (mremap(tmp, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)statics.start) == MAP_FAILED)
        shm_fatal("shmem_finalize: cannot give the program's globals (%p, %zu bytes) private "
                  "memory again: mremap: %s", (void *)statics.start, len, strerror(errno));
    statics.live = false;
    seg_unmap(statics.map);
    statics.map = NULL;
}
