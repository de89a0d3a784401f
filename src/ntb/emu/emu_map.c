/*
 * CPU mappings of window entries for the emulated fabric (emu.h). The CPU data path is plain
 * memory: a window entry is an mmap of the final target's RAM file at the translated offset,
 * so a store lands in the peer's memory with no software in between. An entry that does not
 * resolve (not programmed, link down, IOMMU fault) maps a file of 0xff bytes privately: loads
 * read all ones and stores never reach anyone. The watcher (emu_rt.c) remaps an entry when
 * what it reaches changes. A mapping may have a second window onto the same range through
 * another adapter (multipath): an entry whose own path is dead then maps what the other's
 * entry reaches — the same memory, so nothing moves while that path holds.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "emu.h"

static struct emu *E(struct rt *rt) { return rt->bk; }

struct emu_map {
    struct emu_map *next;
    uint32_t adapter, first, count;
    bool has_alt;              /* emu_map_failover */
    uint32_t alt_adapter, alt_first;
    int prot;
    char *base;
    uint64_t *sig; /* what each entry resolved to last time */
    bool *dead;
};

static uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull; }

static int map_ones(struct rt *rt, char *at, uint64_t len, int prot)
{
    for (uint64_t off = 0; off < len; off += emu_fab(rt)->ones_size) {
        uint64_t n = len - off < emu_fab(rt)->ones_size ? len - off : emu_fab(rt)->ones_size;
        if (mmap(at + off, n, prot, MAP_PRIVATE | MAP_FIXED, emu_fab(rt)->ones_fd, 0) ==
            MAP_FAILED)
            return -errno;
    }
    return 0;
}

/* What LUT entry `entry` of adapter ai reaches, in up to 64 extents: their count, *sig a hash
 * of them, *dead when some reach nothing. */
static int probe_entry(struct rt *rt, uint32_t ai, uint32_t entry, struct fab_target *ext,
                       uint64_t *sig, bool *dead)
{
    struct fab *f = emu_fab(rt);
    struct fab_adapter *a = fab_adapter(f, ai);
    uint64_t bus = a->bar_addr + (uint64_t)entry * a->lut_size;
    int n = 0;
    *sig = 0xcbf29ce484222325ull;
    *dead = false;
    for (uint64_t off = 0; off < a->lut_size && n < 64; n++) {
        int rc = fab_resolve_probe(f, rt->host, FAB_RID_CPU, bus + off, a->lut_size - off, true,
                                   &ext[n]);
        if (rc)
            return rc;
        if (ext[n].err || (ext[n].region != FAB_REGION_RAM && ext[n].region != FAB_REGION_DEVICE)) {
            ext[n].region = FAB_REGION_NONE; /* CPU stores to an MSI region are not modelled */
            *dead = true;
        }
        *sig = mix(mix(mix(mix(*sig, ext[n].region), ext[n].host), ext[n].fn),
                   ext[n].addr ^ (ext[n].len << 1));
        off += ext[n].len;
    }
    return n;
}

/* Re-resolve entry k of map m; remap it only if what it reaches changed. */
static int remap_entry(struct rt *rt, struct emu_map *m, uint32_t k, bool force)
{
    struct fab *f = emu_fab(rt);
    struct fab_adapter *a = fab_adapter(f, m->adapter);
    char *at = m->base + (uint64_t)k * a->lut_size;
    struct fab_target ext[64], alt[64];
    uint64_t sig, alt_sig;
    bool dead, alt_dead;
    int n = probe_entry(rt, m->adapter, m->first + k, ext, &sig, &dead);
    if (n < 0)
        return n;
    if (dead && m->has_alt) {
        /* Its own path is down: the same range through the other adapter, if that one works. */
        int an = probe_entry(rt, m->alt_adapter, m->alt_first + k, alt, &alt_sig, &alt_dead);
        if (an > 0 && !alt_dead) {
            memcpy(ext, alt, (size_t)an * sizeof ext[0]);
            n = an;
            sig = alt_sig;
            dead = false;
        }
    }
    if (!force && sig == m->sig[k]) {
        /* Unchanged; a dead entry drops whatever was stored into it since (scrub). */
        if (dead)
            madvise(at, a->lut_size, MADV_DONTNEED);
        return 0;
    }
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        int rc = 0;
        if (ext[i].region == FAB_REGION_RAM || ext[i].region == FAB_REGION_DEVICE) {
            /* The peer's RAM, or a device BAR (registers are uncached I/O on hardware; here
             * memory the model reads). */
            uint64_t foff = ext[i].addr;
            int fd = ext[i].region == FAB_REGION_DEVICE ? fab_bar_fd(f, ext[i].fn)
                                                         : fab_phys_fd(f, ext[i].host,
                                                                       ext[i].addr, &foff);
            if (fd < 0 || mmap(at + off, ext[i].len, m->prot, MAP_SHARED | MAP_FIXED,
                               fd, (off_t)foff) == MAP_FAILED)
                rc = fd < 0 ? fd : -errno;
        } else {
            rc = map_ones(rt, at + off, ext[i].len, m->prot);
        }
        if (rc)
            return rc;
        off += ext[i].len;
    }
    if (off < a->lut_size) /* more fragments than we track: the rest reads as a master abort */
        map_ones(rt, at + off, a->lut_size - off, m->prot);
    m->sig[k] = sig;
    m->dead[k] = dead;
    return 0;
}

bool emu_remap_all(struct rt *rt)
{
    bool any_dead = false;
    pthread_mutex_lock(&E(rt)->map_lock);
    for (struct emu_map *m = E(rt)->maps; m; m = m->next)
        for (uint32_t k = 0; k < m->count; k++) {
            remap_entry(rt, m, k, false);
            any_dead |= m->dead[k];
        }
    pthread_mutex_unlock(&E(rt)->map_lock);
    return any_dead;
}

void *emu_map_window(struct rt *rt, uint32_t adapter, uint32_t first, uint32_t count, bool readonly)
{
    struct fab_adapter *a = fab_adapter(emu_fab(rt), adapter);
    if (!count || first >= a->lut_entries || count > a->lut_entries - first) {
        errno = EINVAL;
        return NULL;
    }
    struct emu_map *m = calloc(1, sizeof *m);
    uint64_t len = (uint64_t)count * a->lut_size;
    if (!m || !(m->sig = calloc(count, sizeof *m->sig)) || !(m->dead = calloc(count, 1)))
        goto nomem;
    m->base = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m->base == MAP_FAILED)
        goto nomem;
    m->adapter = adapter;
    m->prot = readonly ? PROT_READ : PROT_READ | PROT_WRITE;
    m->first = first;
    m->count = count;
    pthread_mutex_lock(&E(rt)->map_lock);
    int rc = 0;
    for (uint32_t k = 0; k < count && !rc; k++)
        rc = remap_entry(rt, m, k, true);
    if (!rc) {
        m->next = E(rt)->maps;
        E(rt)->maps = m;
    }
    pthread_mutex_unlock(&E(rt)->map_lock);
    if (rc) {
        munmap(m->base, len);
        free(m->sig);
        free(m->dead);
        free(m);
        errno = -rc;
        return NULL;
    }
    return m->base;
nomem:
    if (m) {
        free(m->sig);
        free(m->dead);
    }
    free(m);
    errno = ENOMEM;
    return NULL;
}

int emu_unmap_window(struct rt *rt, void *base)
{
    pthread_mutex_lock(&E(rt)->map_lock);
    for (struct emu_map **pp = &E(rt)->maps; *pp; pp = &(*pp)->next) {
        struct emu_map *m = *pp;
        if (m->base != base)
            continue;
        *pp = m->next;
        pthread_mutex_unlock(&E(rt)->map_lock);
        munmap(m->base, (uint64_t)m->count * fab_adapter(emu_fab(rt), m->adapter)->lut_size);
        free(m->sig);
        free(m->dead);
        free(m);
        return 0;
    }
    pthread_mutex_unlock(&E(rt)->map_lock);
    return -EINVAL;
}

int emu_map_failover(struct rt *rt, void *base, uint32_t adapter, uint32_t first, uint32_t count)
{
    struct fab *f = emu_fab(rt);
    int rc = -EINVAL;
    pthread_mutex_lock(&E(rt)->map_lock);
    for (struct emu_map *m = E(rt)->maps; m; m = m->next) {
        if (m->base != base)
            continue;
        if (count != m->count || adapter == m->adapter ||
            fab_adapter(f, adapter)->lut_size != fab_adapter(f, m->adapter)->lut_size)
            break;
        m->alt_adapter = adapter;
        m->alt_first = first;
        m->has_alt = true;
        rc = 0;
        for (uint32_t k = 0; k < m->count && !rc; k++)
            rc = remap_entry(rt, m, k, false);
        break;
    }
    pthread_mutex_unlock(&E(rt)->map_lock);
    return rc;
}

void emu_unmap_all(struct rt *rt)
{
    while (E(rt)->maps)
        emu_unmap_window(rt, E(rt)->maps->base);
}
