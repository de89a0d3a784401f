/*
 * libshmem internals: the job (who am I, where are the others), the symmetric heaps and
 * their control regions, and the helpers every routine uses.
 */
#ifndef SHMEM_INTERNAL_H
#define SHMEM_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ntblend/seg.h>

#include "shmem.h"

/* The control region at the start of every heap: barriers, global exit. One page, so the
 * user heap after it stays page aligned. */
#define SHM_CTRL_SIZE 4096u
#define SHM_MAGIC 0x53484d31u /* "SHM1" */

struct shm_ctrl {
    _Atomic uint32_t magic;
    _Atomic uint32_t bar_count; /* PE 0's: arrivals at the current barrier */
    _Atomic uint32_t bar_gen;   /* PE 0's: barrier generation (futex word) */
    _Atomic int32_t exit_code;  /* set by shmem_global_exit: status + 1 */
};

struct shm_pe {
    uint32_t node;
    void *base;           /* the PE's heap, mapped here (ours: seg_map_local) */
    seg_remote_t *remote; /* NULL for ourselves */
    seg_map_t *map;
};

struct shm_state {
    bool initialized, finalized;
    int me, npes;
    uint32_t job;
    size_t heap_size; /* user part, SHMEM_SYMMETRIC_SIZE */
    size_t seg_size;  /* control region + heap */
    bool debug;
    seg_desc_t *sd;
    seg_local_t *local;
    struct shm_pe *pes;
};

extern struct shm_state shm;

static inline struct shm_ctrl *shm_ctrl_of(int pe) { return (struct shm_ctrl *)shm.pes[pe].base; }
static inline char *shm_heap_of(int pe) { return (char *)shm.pes[pe].base + SHM_CTRL_SIZE; }

void shm_fatal(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
void shm_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void shm_require_init(const char *who);
/* The address of symmetric object `addr` (ours) in PE pe's heap; fatal if not symmetric. */
void *shm_translate(const char *who, const void *addr, int pe);
/* NULL if addr is not in our symmetric heap. */
void *shm_translate_or_null(const void *addr, int pe);

/* The library's reserved symmetric area at the end of every heap (same offset everywhere),
 * indexed by world PE: pairwise sync counters for teams/active sets and collect sizes. */
struct shm_scratch {
    _Atomic uint32_t wake; /* futex word: bumped by every arrival at / release of this PE */
    uint32_t pad[15];
    /* followed by: _Atomic uint32_t arrive[npes], release[npes]; uint64_t nelems[npes] */
};
size_t shm_scratch_size(void);
struct shm_scratch *shm_scratch_of(int pe);

/* A team or active set: its members as world PEs, in team order. */
struct shm_team {
    int n, me;  /* size, this PE's index (-1: not a member) */
    int *pes;   /* world PE of each index */
    int world;  /* 1: the world team (its sync is the world barrier) */
    shmem_team_config_t config;
};
/* team.c */
void shm_team_init(void);
void shm_team_fini(void);
void shm_team_sync(const struct shm_team *t);
/* A team for the active set (PE_start, 2^logstride, size); fatal if this PE is not in it. */
void shm_aset(struct shm_team *t, const char *who, int start, int logstride, int size);

/* heap.c */
void shm_heap_init(void);
void shm_heap_fini(void);

/* sync.c */
void shm_barrier(void);
void shm_check_exit(void);

/* util */
int shm_parse_size(const char *s, size_t *out);

#endif
