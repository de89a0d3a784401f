/*
 * shmem_team_ptr, shmem_pcontrol and the deprecated cache-management routines.
 */
#include "shmem.h"
#include "shmem_internal.h"

/* Team PE -> world PE, then shmem_ptr: every heap is mapped here. */
void *shmem_team_ptr(shmem_team_t team, const void *dest, int pe)
{
    shm_require_init("shmem_team_ptr");
    if (team == SHMEM_TEAM_INVALID)
        return NULL;
    int w = shmem_team_translate_pe(team, pe, SHMEM_TEAM_WORLD);
    return w < 0 ? NULL : shmem_ptr(dest, w);
}

/* Deprecated since 1.3 and no-ops here: a PE reads other heaps through uncached NTB windows
 * (or the RAM itself), so there is no cache to invalidate or flush. */
void shmem_clear_cache_inv(void) {}
void shmem_set_cache_inv(void) {}
void shmem_clear_cache_line_inv(void *dest) { (void)dest; }
void shmem_set_cache_line_inv(void *dest) { (void)dest; }
void shmem_udcflush(void) {}
void shmem_udcflush_line(void *dest) { (void)dest; }

/* 1.5 §9.15: for profiling tools that wrap the library. There is no built-in profiler, so
 * every level is accepted and nothing is recorded. */
void shmem_pcontrol(const int level, ...) { (void)level; }
