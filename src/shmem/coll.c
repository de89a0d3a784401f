/*
 * Collectives on teams (1.5 §9.9) and the deprecated active-set forms.
 *
 * Data moves by puts (memcpy through the mapped heaps) into the destination PEs' symmetric
 * buffers between team syncs (team.c): a sync so every destination is free to be written and
 * every source ready, the puts, and a sync so every put has landed. collect first puts each
 * PE's element count into the others' scratch area to compute the offsets. Reductions read
 * every member's source in team order (so every PE folds in the same order and floating-point
 * results are identical everywhere) into a private buffer, sync, and then write dest (dest may
 * be source).
 */
#include <stdlib.h>
#include <string.h>

#include "shmem.h"
#include "shmem_internal.h"

static const struct shm_team *team_of(const char *who, shmem_team_t team)
{
    shm_require_init(who);
    if (team == SHMEM_TEAM_INVALID)
        shm_fatal("%s: SHMEM_TEAM_INVALID", who);
    return team;
}

static void put(void *dest, const void *src, size_t n, int pe)
{
    if (!n)
        return;
    if (pe == shm.me)
        memmove(dest, src, n);
    else
        shm_put(pe, shm_off("collective", dest, pe), src, n);
}

/* PE pe's copy of the symmetric `source` (bytes long) to read: ours, the mapped one, or else a
 * private copy fetched through the transport (*tmp, for the caller to free). */
static const void *shm_source(const char *who, const void *source, size_t bytes, int pe, void **tmp)
{
    *tmp = NULL;
    if (pe == shm.me || !bytes)
        return source;
    size_t off = shm_off(who, source, pe);
    const void *s = shm_direct(pe, off);
    if (s)
        return s;
    if (!(*tmp = malloc(bytes)))
        shm_fatal("%s: out of memory for %zu bytes", who, bytes);
    shm_get(pe, *tmp, off, bytes);
    return *tmp;
}

static void bcast(const struct shm_team *t, void *dest, const void *src, size_t bytes, int root,
                  int update_root)
{
    if (root < 0 || root >= t->n)
        shm_fatal("broadcast: PE_root %d is not in a team of %d PEs", root, t->n);
    shm_team_sync(t);
    if (t->me == root)
        for (int i = 0; i < t->n; i++)
            if (i != root || update_root)
                put(dest, src, bytes, t->pes[i]);
    shm_team_sync(t);
}

static void fcollect(const struct shm_team *t, void *dest, const void *src, size_t bytes)
{
    shm_team_sync(t);
    for (int i = 0; i < t->n; i++)
        put((char *)dest + (size_t)t->me * bytes, src, bytes, t->pes[(t->me + i) % t->n]);
    shm_team_sync(t);
}

static uint64_t *nelems_of(int pe)
{
    return (uint64_t *)((_Atomic uint32_t *)(shm_scratch_of(pe) + 1) + 2 * (size_t)shm.npes);
}

static void collect(const struct shm_team *t, void *dest, const void *src, size_t bytes)
{
    shm_team_sync(t);
    uint64_t mine = bytes;
    for (int i = 0; i < t->n; i++) {
        int pe = t->pes[i];
        put(&nelems_of(shm.me)[shm.me], &mine, sizeof mine, pe);
    }
    shm_team_sync(t);
    size_t off = 0;
    for (int i = 0; i < t->me; i++)
        off += nelems_of(shm.me)[t->pes[i]];
    for (int i = 0; i < t->n; i++)
        put((char *)dest + off, src, bytes, t->pes[(t->me + i) % t->n]);
    shm_team_sync(t);
}

static void alltoalls(const struct shm_team *t, void *dest, const void *src, ptrdiff_t dst,
                      ptrdiff_t sst, size_t nelems, size_t size)
{
    shm_team_sync(t);
    for (int k = 0; k < t->n; k++) {
        int j = (t->me + k) % t->n, pe = t->pes[j];
        if (dst == 1 && sst == 1)
            put((char *)dest + (size_t)t->me * nelems * size,
                (const char *)src + (size_t)j * nelems * size, nelems * size, pe);
        else
            for (size_t i = 0; i < nelems; i++)
                put((char *)dest + ((size_t)t->me * nelems + i) * (size_t)dst * size,
                    (const char *)src + ((size_t)j * nelems + i) * (size_t)sst * size, size, pe);
    }
    shm_team_sync(t);
}

int shmem_broadcastmem(shmem_team_t team, void *dest, const void *source, size_t nelems, int PE_root)
{
    bcast(team_of("shmem_broadcastmem", team), dest, source, nelems, PE_root, 1);
    return 0;
}
int shmem_collectmem(shmem_team_t team, void *dest, const void *source, size_t nelems)
{
    collect(team_of("shmem_collectmem", team), dest, source, nelems);
    return 0;
}
int shmem_fcollectmem(shmem_team_t team, void *dest, const void *source, size_t nelems)
{
    fcollect(team_of("shmem_fcollectmem", team), dest, source, nelems);
    return 0;
}
int shmem_alltoallmem(shmem_team_t team, void *dest, const void *source, size_t nelems)
{
    alltoalls(team_of("shmem_alltoallmem", team), dest, source, 1, 1, nelems, 1);
    return 0;
}
int shmem_alltoallsmem(shmem_team_t team, void *dest, const void *source, ptrdiff_t dst,
                       ptrdiff_t sst, size_t nelems)
{
    alltoalls(team_of("shmem_alltoallsmem", team), dest, source, dst, sst, nelems, 1);
    return 0;
}

#define DEF_COLL(T, N)                                                                         \
    int shmem_##N##_broadcast(shmem_team_t team, T *dest, const T *source, size_t nelems,      \
                              int PE_root)                                                     \
    {                                                                                          \
        bcast(team_of("shmem_" #N "_broadcast", team), dest, source, nelems * sizeof(T),       \
              PE_root, 1);                                                                     \
        return 0;                                                                              \
    }                                                                                          \
    int shmem_##N##_collect(shmem_team_t team, T *dest, const T *source, size_t nelems)        \
    {                                                                                          \
        collect(team_of("shmem_" #N "_collect", team), dest, source, nelems * sizeof(T));      \
        return 0;                                                                              \
    }                                                                                          \
    int shmem_##N##_fcollect(shmem_team_t team, T *dest, const T *source, size_t nelems)       \
    {                                                                                          \
        fcollect(team_of("shmem_" #N "_fcollect", team), dest, source, nelems * sizeof(T));    \
        return 0;                                                                              \
    }                                                                                          \
    int shmem_##N##_alltoall(shmem_team_t team, T *dest, const T *source, size_t nelems)       \
    {                                                                                          \
        alltoalls(team_of("shmem_" #N "_alltoall", team), dest, source, 1, 1, nelems,          \
                  sizeof(T));                                                                  \
        return 0;                                                                              \
    }                                                                                          \
    int shmem_##N##_alltoalls(shmem_team_t team, T *dest, const T *source, ptrdiff_t dst,      \
                              ptrdiff_t sst, size_t nelems)                                    \
    {                                                                                          \
        alltoalls(team_of("shmem_" #N "_alltoalls", team), dest, source, dst, sst, nelems,     \
                  sizeof(T));                                                                  \
        return 0;                                                                              \
    }
SHMEM_RMA_TYPE_TABLE(DEF_COLL)

/* ---- reductions ---- */
#define OP_and(a, b) ((a) & (b))
#define OP_or(a, b) ((a) | (b))
#define OP_xor(a, b) ((a) ^ (b))
#define OP_max(a, b) ((a) > (b) ? (a) : (b))
#define OP_min(a, b) ((a) < (b) ? (a) : (b))
#define OP_sum(a, b) ((a) + (b))
#define OP_prod(a, b) ((a) * (b))

/* Fold every member's source in team order into a private buffer, sync, write dest. */
#define DEF_REDUCE_CORE(T, N, OP)                                                              \
    static void reduce_##N##_##OP(const struct shm_team *t, T *dest, const T *source, size_t n) \
    {                                                                                          \
        shm_team_sync(t);                                                                      \
        T *acc = n ? malloc(n * sizeof(T)) : NULL;                                             \
        if (n && !acc)                                                                         \
            shm_fatal("out of memory for a reduction of %zu elements", n);                     \
        for (int i = 0; i < t->n; i++) {                                                       \
            T *tmp = NULL;                                                                     \
            const T *s = (const T *)shm_source("reduce", source, n * sizeof(T), t->pes[i],    \
                                               (void **)&tmp);                                 \
            for (size_t k = 0; k < n; k++)                                                     \
                acc[k] = i == 0 ? s[k] : (T)OP_##OP(acc[k], s[k]);                             \
            free(tmp);                                                                         \
        }                                                                                      \
        shm_team_sync(t);                                                                      \
        if (n)                                                                                 \
            memcpy(dest, acc, n * sizeof(T));                                                  \
        free(acc);                                                                             \
    }
#define DEF_REDUCE(T, N, OP)                                                                   \
    DEF_REDUCE_CORE(T, N, OP)                                                                  \
    int shmem_##N##_##OP##_reduce(shmem_team_t team, T *dest, const T *source, size_t nreduce) \
    {                                                                                          \
        reduce_##N##_##OP(team_of("shmem_" #N "_" #OP "_reduce", team), dest, source, nreduce); \
        return 0;                                                                              \
    }
#define DEF_REDUCE_BIT(T, N) DEF_REDUCE(T, N, and) DEF_REDUCE(T, N, or) DEF_REDUCE(T, N, xor)
#define DEF_REDUCE_ARITH(T, N)                                                                 \
    DEF_REDUCE(T, N, max) DEF_REDUCE(T, N, min) DEF_REDUCE(T, N, sum) DEF_REDUCE(T, N, prod)
SHMEM_REDUCE_BITWISE_TYPE_TABLE(DEF_REDUCE_BIT)
SHMEM_REDUCE_ARITH_TYPE_TABLE(DEF_REDUCE_ARITH)

/* ---- deprecated active-set forms (pSync/pWrk accepted, not used) ---- */
#define DEF_ASET(B)                                                                            \
    void shmem_broadcast##B(void *dest, const void *source, size_t nelems, int PE_root,        \
                            int PE_start, int logPE_stride, int PE_size, long *pSync)          \
    {                                                                                          \
        struct shm_team t;                                                                     \
        (void)pSync;                                                                           \
        shm_aset(&t, "shmem_broadcast" #B, PE_start, logPE_stride, PE_size);                   \
        bcast(&t, dest, source, nelems * (B / 8), PE_root, 0);                                 \
    }                                                                                          \
    void shmem_collect##B(void *dest, const void *source, size_t nelems, int PE_start,         \
                          int logPE_stride, int PE_size, long *pSync)                          \
    {                                                                                          \
        struct shm_team t;                                                                     \
        (void)pSync;                                                                           \
        shm_aset(&t, "shmem_collect" #B, PE_start, logPE_stride, PE_size);                     \
        collect(&t, dest, source, nelems * (B / 8));                                           \
    }                                                                                          \
    void shmem_fcollect##B(void *dest, const void *source, size_t nelems, int PE_start,        \
                           int logPE_stride, int PE_size, long *pSync)                         \
    {                                                                                          \
        struct shm_team t;                                                                     \
        (void)pSync;                                                                           \
        shm_aset(&t, "shmem_fcollect" #B, PE_start, logPE_stride, PE_size);                    \
        fcollect(&t, dest, source, nelems * (B / 8));                                          \
    }                                                                                          \
    void shmem_alltoall##B(void *dest, const void *source, size_t nelems, int PE_start,        \
                           int logPE_stride, int PE_size, long *pSync)                         \
    {                                                                                          \
        struct shm_team t;                                                                     \
        (void)pSync;                                                                           \
        shm_aset(&t, "shmem_alltoall" #B, PE_start, logPE_stride, PE_size);                    \
        alltoalls(&t, dest, source, 1, 1, nelems, B / 8);                                      \
    }
DEF_ASET(32)
DEF_ASET(64)

#define DEF_TO_ALL(T, N, OP)                                                                   \
    void shmem_##N##_##OP##_to_all(T *dest, const T *source, int nreduce, int PE_start,        \
                                   int logPE_stride, int PE_size, T *pWrk, long *pSync)        \
    {                                                                                          \
        struct shm_team t;                                                                     \
        (void)pWrk;                                                                            \
        (void)pSync;                                                                           \
        shm_aset(&t, "shmem_" #N "_" #OP "_to_all", PE_start, logPE_stride, PE_size);          \
        if (nreduce < 0)                                                                       \
            shm_fatal("shmem_" #N "_" #OP "_to_all: nreduce %d", nreduce);                     \
        reduce_##N##_##OP(&t, dest, source, (size_t)nreduce);                                  \
    }
#define DEF_TO_ALL_BIT(T, N) DEF_TO_ALL(T, N, and) DEF_TO_ALL(T, N, or) DEF_TO_ALL(T, N, xor)
#define DEF_TO_ALL_ARITH(T, N)                                                                 \
    DEF_TO_ALL(T, N, max) DEF_TO_ALL(T, N, min) DEF_TO_ALL(T, N, sum) DEF_TO_ALL(T, N, prod)
SHMEM_TO_ALL_ARITH_TYPE_TABLE(DEF_TO_ALL_ARITH)

/* short/int/long/longlong bitwise: their core routines are not in the bitwise table above. */
DEF_REDUCE_CORE(short, short, and) DEF_REDUCE_CORE(short, short, or) DEF_REDUCE_CORE(short, short, xor)
DEF_REDUCE_CORE(int, int, and) DEF_REDUCE_CORE(int, int, or) DEF_REDUCE_CORE(int, int, xor)
DEF_REDUCE_CORE(long, long, and) DEF_REDUCE_CORE(long, long, or) DEF_REDUCE_CORE(long, long, xor)
DEF_REDUCE_CORE(long long, longlong, and) DEF_REDUCE_CORE(long long, longlong, or)
DEF_REDUCE_CORE(long long, longlong, xor)
SHMEM_TO_ALL_BITWISE_TYPE_TABLE(DEF_TO_ALL_BIT)

/* ---- complex reductions (sum and prod only), team and deprecated active-set forms ---- */
#define DEF_REDUCE_COMPLEX(T, N) DEF_REDUCE(T, N, sum) DEF_REDUCE(T, N, prod)
SHMEM_REDUCE_COMPLEX_TYPE_TABLE(DEF_REDUCE_COMPLEX)
#define DEF_TO_ALL_COMPLEX(T, N) DEF_TO_ALL(T, N, sum) DEF_TO_ALL(T, N, prod)
SHMEM_REDUCE_COMPLEX_TYPE_TABLE(DEF_TO_ALL_COMPLEX)

/* ---- deprecated strided all-to-all on an active set ---- */
#define DEF_ASET_ALLTOALLS(B)                                                                  \
    void shmem_alltoalls##B(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst,     \
                            size_t nelems, int PE_start, int logPE_stride, int PE_size,        \
                            long *pSync)                                                       \
    {                                                                                          \
        struct shm_team t;                                                                     \
        (void)pSync;                                                                           \
        shm_aset(&t, "shmem_alltoalls" #B, PE_start, logPE_stride, PE_size);                   \
        alltoalls(&t, dest, source, dst, sst, nelems, B / 8);                                  \
    }
DEF_ASET_ALLTOALLS(32)
DEF_ASET_ALLTOALLS(64)
