/*
 * OpenSHMEM 1.5 for ntblend (docs/openshmem.md): PEs on the hosts of an NTB fabric, started
 * by oshrun. Every PE's symmetric heap is a segment on its host, mapped into every other PE,
 * so RMA is a load or store through an NTB window and atomics are CPU atomics on the owner's
 * memory (what PCIe AtomicOps through the NTB do).
 *
 * This header declares what is implemented so far (setup, memory, RMA, atomics, sync,
 * teams and collectives); the rest of the 1.5 surface (contexts, signals, locks, ...) is
 * added alongside. Typed routines are generated
 * from the type tables below so that adding a type is one line.
 */
#ifndef SHMEM_H
#define SHMEM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define SHMEM_ATTR_NORETURN __attribute__((noreturn))
#else
#define SHMEM_ATTR_NORETURN
#endif

/* ---- library constants ---- */
#define SHMEM_MAJOR_VERSION 1
#define SHMEM_MINOR_VERSION 5
#define SHMEM_MAX_NAME_LEN 256
#define SHMEM_VENDOR_STRING "ntblend OpenSHMEM (switched NTB transport)"

#define SHMEM_CMP_EQ 1
#define SHMEM_CMP_NE 2
#define SHMEM_CMP_GT 3
#define SHMEM_CMP_GE 4
#define SHMEM_CMP_LT 5
#define SHMEM_CMP_LE 6

/* Deprecated spellings, still used by existing code. */
#define _SHMEM_MAJOR_VERSION SHMEM_MAJOR_VERSION
#define _SHMEM_MINOR_VERSION SHMEM_MINOR_VERSION
#define _SHMEM_MAX_NAME_LEN SHMEM_MAX_NAME_LEN
#define _SHMEM_CMP_EQ SHMEM_CMP_EQ
#define _SHMEM_CMP_NE SHMEM_CMP_NE
#define _SHMEM_CMP_GT SHMEM_CMP_GT
#define _SHMEM_CMP_GE SHMEM_CMP_GE
#define _SHMEM_CMP_LT SHMEM_CMP_LT
#define _SHMEM_CMP_LE SHMEM_CMP_LE

/* ---- type tables: X(TYPE, TYPENAME) ---- */
/* Standard RMA types (spec Table 5; more are one line each). */
#define SHMEM_RMA_TYPE_TABLE(X)                                                                \
    X(float, float)                                                                            \
    X(double, double)                                                                          \
    X(char, char)                                                                              \
    X(short, short)                                                                            \
    X(int, int)                                                                                \
    X(long, long)                                                                              \
    X(long long, longlong)
/* Standard AMO types implemented so far (fetch_add ... swap). */
#define SHMEM_AMO_TYPE_TABLE(X)                                                                \
    X(int, int)                                                                                \
    X(long, long)                                                                              \
    X(long long, longlong)
/* Point-to-point synchronisation types implemented so far. */
#define SHMEM_P2P_TYPE_TABLE(X)                                                                \
    X(int, int)                                                                                \
    X(long, long)                                                                              \
    X(long long, longlong)

/* ---- setup, exit and query ---- */
void shmem_init(void);
void shmem_finalize(void);
int shmem_my_pe(void);
int shmem_n_pes(void);
void shmem_global_exit(int status) SHMEM_ATTR_NORETURN;
int shmem_pe_accessible(int pe);
int shmem_addr_accessible(const void *addr, int pe);
void *shmem_ptr(const void *dest, int pe);
void shmem_info_get_version(int *major, int *minor);
void shmem_info_get_name(char *name);

/* ---- memory management ---- */
void *shmem_malloc(size_t size);
void *shmem_calloc(size_t count, size_t size);
void *shmem_align(size_t alignment, size_t size);
void *shmem_realloc(void *ptr, size_t size);
void shmem_free(void *ptr);

/* ---- RMA ---- */
void shmem_putmem(void *dest, const void *source, size_t nelems, int pe);
void shmem_getmem(void *dest, const void *source, size_t nelems, int pe);
void shmem_putmem_nbi(void *dest, const void *source, size_t nelems, int pe);
void shmem_getmem_nbi(void *dest, const void *source, size_t nelems, int pe);

#define SHMEM_DECL_RMA(T, N)                                                                   \
    void shmem_##N##_put(T *dest, const T *source, size_t nelems, int pe);                     \
    void shmem_##N##_get(T *dest, const T *source, size_t nelems, int pe);                     \
    void shmem_##N##_put_nbi(T *dest, const T *source, size_t nelems, int pe);                 \
    void shmem_##N##_get_nbi(T *dest, const T *source, size_t nelems, int pe);                 \
    void shmem_##N##_p(T *dest, T value, int pe);                                              \
    T shmem_##N##_g(const T *source, int pe);
SHMEM_RMA_TYPE_TABLE(SHMEM_DECL_RMA)
#undef SHMEM_DECL_RMA

/* ---- atomics ---- */
#define SHMEM_DECL_AMO(T, N)                                                                   \
    T shmem_##N##_atomic_fetch(const T *source, int pe);                                       \
    void shmem_##N##_atomic_set(T *dest, T value, int pe);                                     \
    T shmem_##N##_atomic_swap(T *dest, T value, int pe);                                       \
    T shmem_##N##_atomic_compare_swap(T *dest, T cond, T value, int pe);                       \
    T shmem_##N##_atomic_fetch_inc(T *dest, int pe);                                           \
    void shmem_##N##_atomic_inc(T *dest, int pe);                                              \
    T shmem_##N##_atomic_fetch_add(T *dest, T value, int pe);                                  \
    void shmem_##N##_atomic_add(T *dest, T value, int pe);                                     \
    /* deprecated (OpenSHMEM 1.3 names) */                                                     \
    T shmem_##N##_fetch(const T *source, int pe);                                              \
    void shmem_##N##_set(T *dest, T value, int pe);                                            \
    T shmem_##N##_swap(T *dest, T value, int pe);                                              \
    T shmem_##N##_cswap(T *dest, T cond, T value, int pe);                                     \
    T shmem_##N##_finc(T *dest, int pe);                                                       \
    void shmem_##N##_inc(T *dest, int pe);                                                     \
    T shmem_##N##_fadd(T *dest, T value, int pe);                                              \
    void shmem_##N##_add(T *dest, T value, int pe);
SHMEM_AMO_TYPE_TABLE(SHMEM_DECL_AMO)
#undef SHMEM_DECL_AMO

/* ---- ordering and synchronisation ---- */
void shmem_quiet(void);
void shmem_fence(void);
void shmem_barrier_all(void);
void shmem_sync_all(void);

#define SHMEM_DECL_P2P(T, N)                                                                   \
    void shmem_##N##_wait_until(T *ivar, int cmp, T cmp_value);                                \
    int shmem_##N##_test(T *ivar, int cmp, T cmp_value);                                       \
    /* deprecated: wait until *ivar != value */                                                \
    void shmem_##N##_wait(T *ivar, T value);
SHMEM_P2P_TYPE_TABLE(SHMEM_DECL_P2P)
#undef SHMEM_DECL_P2P

/* ---- teams (1.5 §9.4) ---- */
typedef struct shm_team *shmem_team_t;
typedef struct {
    int num_contexts;
} shmem_team_config_t;
#define SHMEM_TEAM_NUM_CONTEXTS (1L << 0)
#define SHMEM_TEAM_INVALID ((shmem_team_t)0)
extern shmem_team_t SHMEM_TEAM_WORLD;  /* every PE */
extern shmem_team_t SHMEM_TEAM_SHARED; /* the PEs on this PE's host */

int shmem_team_my_pe(shmem_team_t team);
int shmem_team_n_pes(shmem_team_t team);
int shmem_team_get_config(shmem_team_t team, long config_mask, shmem_team_config_t *config);
int shmem_team_translate_pe(shmem_team_t src_team, int src_pe, shmem_team_t dest_team);
int shmem_team_split_strided(shmem_team_t parent_team, int start, int stride, int size,
                             const shmem_team_config_t *config, long config_mask,
                             shmem_team_t *new_team);
int shmem_team_split_2d(shmem_team_t parent_team, int xrange,
                        const shmem_team_config_t *xaxis_config, long xaxis_mask,
                        shmem_team_t *xaxis_team, const shmem_team_config_t *yaxis_config,
                        long yaxis_mask, shmem_team_t *yaxis_team);
void shmem_team_destroy(shmem_team_t team);

/* ---- collectives (1.5 §9.9) ---- */
int shmem_team_sync(shmem_team_t team);
int shmem_broadcastmem(shmem_team_t team, void *dest, const void *source, size_t nelems, int PE_root);
int shmem_collectmem(shmem_team_t team, void *dest, const void *source, size_t nelems);
int shmem_fcollectmem(shmem_team_t team, void *dest, const void *source, size_t nelems);
int shmem_alltoallmem(shmem_team_t team, void *dest, const void *source, size_t nelems);
int shmem_alltoallsmem(shmem_team_t team, void *dest, const void *source, ptrdiff_t dst,
                       ptrdiff_t sst, size_t nelems);
#define SHMEM_DECL_COLL(T, N)                                                                  \
    int shmem_##N##_broadcast(shmem_team_t team, T *dest, const T *source, size_t nelems,      \
                              int PE_root);                                                    \
    int shmem_##N##_collect(shmem_team_t team, T *dest, const T *source, size_t nelems);       \
    int shmem_##N##_fcollect(shmem_team_t team, T *dest, const T *source, size_t nelems);      \
    int shmem_##N##_alltoall(shmem_team_t team, T *dest, const T *source, size_t nelems);      \
    int shmem_##N##_alltoalls(shmem_team_t team, T *dest, const T *source, ptrdiff_t dst,      \
                              ptrdiff_t sst, size_t nelems);
SHMEM_RMA_TYPE_TABLE(SHMEM_DECL_COLL)
#undef SHMEM_DECL_COLL

/* Reduction types: X(TYPE, TYPENAME). Bitwise (and/or/xor), and ordered/arithmetic
 * (max/min/sum/prod) as in the spec's Table 10 (complex types are not implemented). */
#define SHMEM_REDUCE_BITWISE_TYPE_TABLE(X)                                                     \
    X(unsigned char, uchar)                                                                    \
    X(unsigned short, ushort)                                                                  \
    X(unsigned int, uint)                                                                      \
    X(unsigned long, ulong)                                                                    \
    X(unsigned long long, ulonglong)                                                           \
    X(int8_t, int8)                                                                            \
    X(int16_t, int16)                                                                          \
    X(int32_t, int32)                                                                          \
    X(int64_t, int64)                                                                          \
    X(uint8_t, uint8)                                                                          \
    X(uint16_t, uint16)                                                                        \
    X(uint32_t, uint32)                                                                        \
    X(uint64_t, uint64)                                                                        \
    X(size_t, size)
#define SHMEM_REDUCE_ARITH_TYPE_TABLE(X)                                                       \
    X(char, char)                                                                              \
    X(signed char, schar)                                                                      \
    X(short, short)                                                                            \
    X(int, int)                                                                                \
    X(long, long)                                                                              \
    X(long long, longlong)                                                                     \
    X(ptrdiff_t, ptrdiff)                                                                      \
    X(unsigned char, uchar)                                                                    \
    X(unsigned short, ushort)                                                                  \
    X(unsigned int, uint)                                                                      \
    X(unsigned long, ulong)                                                                    \
    X(unsigned long long, ulonglong)                                                           \
    X(int8_t, int8)                                                                            \
    X(int16_t, int16)                                                                          \
    X(int32_t, int32)                                                                          \
    X(int64_t, int64)                                                                          \
    X(uint8_t, uint8)                                                                          \
    X(uint16_t, uint16)                                                                        \
    X(uint32_t, uint32)                                                                        \
    X(uint64_t, uint64)                                                                        \
    X(size_t, size)                                                                            \
    X(float, float)                                                                            \
    X(double, double)                                                                          \
    X(long double, longdouble)
#define SHMEM_DECL_REDUCE(T, N, OP)                                                            \
    int shmem_##N##_##OP##_reduce(shmem_team_t team, T *dest, const T *source, size_t nreduce);
#define SHMEM_DECL_REDUCE_BIT(T, N)                                                            \
    SHMEM_DECL_REDUCE(T, N, and) SHMEM_DECL_REDUCE(T, N, or) SHMEM_DECL_REDUCE(T, N, xor)
#define SHMEM_DECL_REDUCE_ARITH(T, N)                                                          \
    SHMEM_DECL_REDUCE(T, N, max) SHMEM_DECL_REDUCE(T, N, min) SHMEM_DECL_REDUCE(T, N, sum)     \
    SHMEM_DECL_REDUCE(T, N, prod)
SHMEM_REDUCE_BITWISE_TYPE_TABLE(SHMEM_DECL_REDUCE_BIT)
SHMEM_REDUCE_ARITH_TYPE_TABLE(SHMEM_DECL_REDUCE_ARITH)
#undef SHMEM_DECL_REDUCE_BIT
#undef SHMEM_DECL_REDUCE_ARITH
#undef SHMEM_DECL_REDUCE

/* ---- deprecated active-set collectives (PE_start, logPE_stride, PE_size, pSync) ---- */
/* pSync/pWrk are accepted (and must be symmetric, as the spec says) but the library keeps
 * its own synchronisation state: their contents are never read or changed. */
#define SHMEM_SYNC_VALUE 0L
#define SHMEM_BARRIER_SYNC_SIZE 4
#define SHMEM_BCAST_SYNC_SIZE 4
#define SHMEM_COLLECT_SYNC_SIZE 4
#define SHMEM_REDUCE_SYNC_SIZE 4
#define SHMEM_ALLTOALL_SYNC_SIZE 4
#define SHMEM_ALLTOALLS_SYNC_SIZE 4
#define SHMEM_SYNC_SIZE 4
#define SHMEM_REDUCE_MIN_WRKDATA_SIZE 1
#define _SHMEM_SYNC_VALUE SHMEM_SYNC_VALUE
#define _SHMEM_BARRIER_SYNC_SIZE SHMEM_BARRIER_SYNC_SIZE
#define _SHMEM_BCAST_SYNC_SIZE SHMEM_BCAST_SYNC_SIZE
#define _SHMEM_COLLECT_SYNC_SIZE SHMEM_COLLECT_SYNC_SIZE
#define _SHMEM_REDUCE_SYNC_SIZE SHMEM_REDUCE_SYNC_SIZE
#define _SHMEM_ALLTOALL_SYNC_SIZE SHMEM_ALLTOALL_SYNC_SIZE
#define _SHMEM_ALLTOALLS_SYNC_SIZE SHMEM_ALLTOALLS_SYNC_SIZE
#define _SHMEM_SYNC_SIZE SHMEM_SYNC_SIZE
#define _SHMEM_REDUCE_MIN_WRKDATA_SIZE SHMEM_REDUCE_MIN_WRKDATA_SIZE

void shmem_barrier(int PE_start, int logPE_stride, int PE_size, long *pSync);
#define SHMEM_DECL_ASET_COLL(B)                                                                \
    void shmem_broadcast##B(void *dest, const void *source, size_t nelems, int PE_root,        \
                            int PE_start, int logPE_stride, int PE_size, long *pSync);         \
    void shmem_collect##B(void *dest, const void *source, size_t nelems, int PE_start,         \
                          int logPE_stride, int PE_size, long *pSync);                         \
    void shmem_fcollect##B(void *dest, const void *source, size_t nelems, int PE_start,        \
                           int logPE_stride, int PE_size, long *pSync);                        \
    void shmem_alltoall##B(void *dest, const void *source, size_t nelems, int PE_start,        \
                           int logPE_stride, int PE_size, long *pSync);
SHMEM_DECL_ASET_COLL(32)
SHMEM_DECL_ASET_COLL(64)
#undef SHMEM_DECL_ASET_COLL
/* X(TYPE, TYPENAME) for the deprecated *_to_all reductions. */
#define SHMEM_TO_ALL_BITWISE_TYPE_TABLE(X)                                                     \
    X(short, short)                                                                            \
    X(int, int)                                                                                \
    X(long, long)                                                                              \
    X(long long, longlong)
#define SHMEM_TO_ALL_ARITH_TYPE_TABLE(X)                                                       \
    X(short, short)                                                                            \
    X(int, int)                                                                                \
    X(long, long)                                                                              \
    X(long long, longlong)                                                                     \
    X(float, float)                                                                            \
    X(double, double)                                                                          \
    X(long double, longdouble)
#define SHMEM_DECL_TO_ALL(T, N, OP)                                                            \
    void shmem_##N##_##OP##_to_all(T *dest, const T *source, int nreduce, int PE_start,        \
                                   int logPE_stride, int PE_size, T *pWrk, long *pSync);
#define SHMEM_DECL_TO_ALL_BIT(T, N)                                                            \
    SHMEM_DECL_TO_ALL(T, N, and) SHMEM_DECL_TO_ALL(T, N, or) SHMEM_DECL_TO_ALL(T, N, xor)
#define SHMEM_DECL_TO_ALL_ARITH(T, N)                                                          \
    SHMEM_DECL_TO_ALL(T, N, max) SHMEM_DECL_TO_ALL(T, N, min) SHMEM_DECL_TO_ALL(T, N, sum)     \
    SHMEM_DECL_TO_ALL(T, N, prod)
SHMEM_TO_ALL_BITWISE_TYPE_TABLE(SHMEM_DECL_TO_ALL_BIT)
SHMEM_TO_ALL_ARITH_TYPE_TABLE(SHMEM_DECL_TO_ALL_ARITH)
#undef SHMEM_DECL_TO_ALL_BIT
#undef SHMEM_DECL_TO_ALL_ARITH
#undef SHMEM_DECL_TO_ALL

/* ---- deprecated setup and memory routines ---- */
void start_pes(int npes);
int _my_pe(void);
int _num_pes(void);
void *shmalloc(size_t size);
void shfree(void *ptr);
void *shrealloc(void *ptr, size_t size);
void *shmemalign(size_t alignment, size_t size);

/* ---- C11 generic interfaces ---- */
#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && !defined(__cplusplus)
#define shmem_put(dest, source, nelems, pe)                                                    \
    _Generic(*(dest), float: shmem_float_put, double: shmem_double_put, char: shmem_char_put,  \
             short: shmem_short_put, int: shmem_int_put, long: shmem_long_put,                 \
             long long: shmem_longlong_put)(dest, source, nelems, pe)
#define shmem_get(dest, source, nelems, pe)                                                    \
    _Generic(*(dest), float: shmem_float_get, double: shmem_double_get, char: shmem_char_get,  \
             short: shmem_short_get, int: shmem_int_get, long: shmem_long_get,                 \
             long long: shmem_longlong_get)(dest, source, nelems, pe)
#define shmem_p(dest, value, pe)                                                               \
    _Generic(*(dest), float: shmem_float_p, double: shmem_double_p, char: shmem_char_p,        \
             short: shmem_short_p, int: shmem_int_p, long: shmem_long_p,                       \
             long long: shmem_longlong_p)(dest, value, pe)
#define shmem_g(source, pe)                                                                    \
    _Generic(*(source), float: shmem_float_g, double: shmem_double_g, char: shmem_char_g,      \
             short: shmem_short_g, int: shmem_int_g, long: shmem_long_g,                       \
             long long: shmem_longlong_g)(source, pe)
#define shmem_atomic_fetch_add(dest, value, pe)                                                \
    _Generic(*(dest), int: shmem_int_atomic_fetch_add, long: shmem_long_atomic_fetch_add,      \
             long long: shmem_longlong_atomic_fetch_add)(dest, value, pe)
#define shmem_atomic_add(dest, value, pe)                                                      \
    _Generic(*(dest), int: shmem_int_atomic_add, long: shmem_long_atomic_add,                  \
             long long: shmem_longlong_atomic_add)(dest, value, pe)
#define shmem_atomic_fetch_inc(dest, pe)                                                       \
    _Generic(*(dest), int: shmem_int_atomic_fetch_inc, long: shmem_long_atomic_fetch_inc,      \
             long long: shmem_longlong_atomic_fetch_inc)(dest, pe)
#define shmem_atomic_inc(dest, pe)                                                             \
    _Generic(*(dest), int: shmem_int_atomic_inc, long: shmem_long_atomic_inc,                  \
             long long: shmem_longlong_atomic_inc)(dest, pe)
#define shmem_atomic_compare_swap(dest, cond, value, pe)                                       \
    _Generic(*(dest), int: shmem_int_atomic_compare_swap,                                      \
             long: shmem_long_atomic_compare_swap,                                             \
             long long: shmem_longlong_atomic_compare_swap)(dest, cond, value, pe)
#define shmem_atomic_swap(dest, value, pe)                                                     \
    _Generic(*(dest), int: shmem_int_atomic_swap, long: shmem_long_atomic_swap,                \
             long long: shmem_longlong_atomic_swap)(dest, value, pe)
#define shmem_atomic_fetch(source, pe)                                                         \
    _Generic(*(source), int: shmem_int_atomic_fetch, long: shmem_long_atomic_fetch,            \
             long long: shmem_longlong_atomic_fetch)(source, pe)
#define shmem_atomic_set(dest, value, pe)                                                      \
    _Generic(*(dest), int: shmem_int_atomic_set, long: shmem_long_atomic_set,                  \
             long long: shmem_longlong_atomic_set)(dest, value, pe)
#define shmem_wait_until(ivar, cmp, cmp_value)                                                 \
    _Generic(*(ivar), int: shmem_int_wait_until, long: shmem_long_wait_until,                  \
             long long: shmem_longlong_wait_until)(ivar, cmp, cmp_value)
#define shmem_test(ivar, cmp, cmp_value)                                                       \
    _Generic(*(ivar), int: shmem_int_test, long: shmem_long_test,                              \
             long long: shmem_longlong_test)(ivar, cmp, cmp_value)
#endif

#ifdef __cplusplus
}
#endif
#endif
