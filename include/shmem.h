/*
 * OpenSHMEM 1.5 for ntblend (docs/openshmem.md): PEs on the hosts of an NTB fabric, started
 * by oshrun. Every PE's symmetric heap is a segment on its host, mapped into every other PE,
 * so RMA is a load or store through an NTB window and atomics are CPU atomics on the owner's
 * memory (what PCIe AtomicOps through the NTB do).
 *
 * This header declares what is implemented so far (setup, memory, RMA incl. strided and
 * sized forms, atomics, put-with-signal, point-to-point sync, locks, teams, contexts and
 * collectives; docs/openshmem.md lists what is left). Typed routines are generated
 * from the type tables below so that adding a type is one line.
 */
#ifndef SHMEM_H
#define SHMEM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What this header declares is libshmem's API, the symbols it exports (it is built with
 * -fvisibility=hidden; docs/install.md). */
#pragma GCC visibility push(default)

#if defined(__GNUC__) || defined(__clang__)
#define SHMEM_ATTR_NORETURN __attribute__((noreturn))
#else
#define SHMEM_ATTR_NORETURN
#endif

/* ---- library constants ---- */
#define SHMEM_MAJOR_VERSION 1
#define SHMEM_MINOR_VERSION 5
#define SHMEM_MAX_NAME_LEN 256
#define SHMEM_VENDOR_STRING "ntblend OpenSHMEM over PCIe NTB"

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
/* Standard RMA types (spec Table 5). */
#define SHMEM_RMA_TYPE_TABLE(X)                                                                \
    X(float, float)                                                                            \
    X(double, double)                                                                          \
    X(long double, longdouble)                                                                 \
    X(char, char)                                                                              \
    X(signed char, schar)                                                                      \
    X(short, short)                                                                            \
    X(int, int)                                                                                \
    X(long, long)                                                                              \
    X(long long, longlong)                                                                     \
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
    X(ptrdiff_t, ptrdiff)
/* Sized RMA: X(BITS) with BITS/8-byte elements. */
#define SHMEM_SIZED_TABLE(X) X(8) X(16) X(32) X(64) X(128)
/* The tables below are built from each other: P2P ⊃ standard AMO ⊃ bitwise AMO ∪ the 1.3
 * names. Bitwise AMO types (fetch_and, and, fetch_or, or, fetch_xor, xor). */
#define SHMEM_BITWISE_AMO_TYPE_TABLE(X)                                                        \
    X(unsigned int, uint)                                                                      \
    X(unsigned long, ulong)                                                                    \
    X(unsigned long long, ulonglong)                                                           \
    X(int32_t, int32)                                                                          \
    X(int64_t, int64)                                                                          \
    X(uint32_t, uint32)                                                                        \
    X(uint64_t, uint64)
/* The types OpenSHMEM 1.3 had AMOs for (its names, shmem_TYPE_fadd ..., exist for all the
 * standard ones below). */
#define SHMEM_DEPR_AMO_TYPE_TABLE(X) X(int, int) X(long, long) X(long long, longlong)
/* Standard AMO types (spec Table 6: compare_swap, fetch_inc, inc, fetch_add, add). */
#define SHMEM_AMO_TYPE_TABLE(X)                                                                \
    SHMEM_DEPR_AMO_TYPE_TABLE(X)                                                               \
    SHMEM_BITWISE_AMO_TYPE_TABLE(X)                                                            \
    X(size_t, size)                                                                            \
    X(ptrdiff_t, ptrdiff)
/* Extended AMO types (fetch, set, swap): the standard ones plus float and double. */
#define SHMEM_EXT_AMO_TYPE_TABLE(X)                                                            \
    X(float, float)                                                                            \
    X(double, double)                                                                          \
    SHMEM_AMO_TYPE_TABLE(X)
/* Point-to-point synchronisation types (spec Table 9): the standard AMO ones plus short. */
#define SHMEM_P2P_TYPE_TABLE(X)                                                                \
    X(short, short)                                                                            \
    X(unsigned short, ushort)                                                                  \
    SHMEM_AMO_TYPE_TABLE(X)

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

/* Thread levels (1.5 §9.2), in increasing order. Every operation here is a store, a load, a
 * CPU atomic or a team sync, so shmem_init_thread provides SHMEM_THREAD_MULTIPLE whatever is
 * requested, and shmem_query_thread reports SHMEM_THREAD_MULTIPLE after shmem_init too. */
#define SHMEM_THREAD_SINGLE 0
#define SHMEM_THREAD_FUNNELED 1
#define SHMEM_THREAD_SERIALIZED 2
#define SHMEM_THREAD_MULTIPLE 3
int shmem_init_thread(int requested, int *provided); /* 0: initialised */
void shmem_query_thread(int *provided);

/* ---- memory management ---- */
void *shmem_malloc(size_t size);
void *shmem_calloc(size_t count, size_t size);
void *shmem_align(size_t alignment, size_t size);
void *shmem_realloc(void *ptr, size_t size);
void shmem_free(void *ptr);
/* Hints (a bit mask, 0 for none) for shmem_malloc_with_hints. Every heap is RAM reached by
 * stores and CPU atomics, so no hint changes the allocation: it is shmem_malloc's (unknown
 * bits are ignored). */
#define SHMEM_MALLOC_ATOMICS_REMOTE (1L << 0)
#define SHMEM_MALLOC_SIGNAL_REMOTE (1L << 1)
void *shmem_malloc_with_hints(size_t size, long hints);

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
    T shmem_##N##_g(const T *source, int pe);                                                  \
    void shmem_##N##_iput(T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst,              \
                          size_t nelems, int pe);                                              \
    void shmem_##N##_iget(T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst,              \
                          size_t nelems, int pe);                                              \
    void shmem_##N##_put_signal(T *dest, const T *source, size_t nelems, uint64_t *sig_addr,   \
                                uint64_t signal, int sig_op, int pe);                          \
    void shmem_##N##_put_signal_nbi(T *dest, const T *source, size_t nelems,                   \
                                    uint64_t *sig_addr, uint64_t signal, int sig_op, int pe);
SHMEM_RMA_TYPE_TABLE(SHMEM_DECL_RMA)
#undef SHMEM_DECL_RMA
#define SHMEM_DECL_SIZED(B)                                                                    \
    void shmem_put##B(void *dest, const void *source, size_t nelems, int pe);                  \
    void shmem_get##B(void *dest, const void *source, size_t nelems, int pe);                  \
    void shmem_put##B##_nbi(void *dest, const void *source, size_t nelems, int pe);            \
    void shmem_get##B##_nbi(void *dest, const void *source, size_t nelems, int pe);            \
    void shmem_iput##B(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst,           \
                       size_t nelems, int pe);                                                 \
    void shmem_iget##B(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst,           \
                       size_t nelems, int pe);                                                 \
    void shmem_put##B##_signal(void *dest, const void *source, size_t nelems,                  \
                               uint64_t *sig_addr, uint64_t signal, int sig_op, int pe);       \
    void shmem_put##B##_signal_nbi(void *dest, const void *source, size_t nelems,              \
                                   uint64_t *sig_addr, uint64_t signal, int sig_op, int pe);
SHMEM_SIZED_TABLE(SHMEM_DECL_SIZED)
#undef SHMEM_DECL_SIZED

/* ---- put with signal (1.5 §9.8) ---- */
#define SHMEM_SIGNAL_SET 0
#define SHMEM_SIGNAL_ADD 1
void shmem_putmem_signal(void *dest, const void *source, size_t nelems, uint64_t *sig_addr,
                         uint64_t signal, int sig_op, int pe);
void shmem_putmem_signal_nbi(void *dest, const void *source, size_t nelems, uint64_t *sig_addr,
                             uint64_t signal, int sig_op, int pe);
uint64_t shmem_signal_fetch(const uint64_t *sig_addr);
uint64_t shmem_signal_wait_until(uint64_t *sig_addr, int cmp, uint64_t cmp_value);

/* ---- atomics ---- */
#define SHMEM_DECL_EXT_AMO(T, N)                                                               \
    T shmem_##N##_atomic_fetch(const T *source, int pe);                                       \
    void shmem_##N##_atomic_set(T *dest, T value, int pe);                                     \
    T shmem_##N##_atomic_swap(T *dest, T value, int pe);                                       \
    void shmem_##N##_atomic_fetch_nbi(T *fetch, const T *source, int pe);                      \
    void shmem_##N##_atomic_swap_nbi(T *fetch, T *dest, T value, int pe);
SHMEM_EXT_AMO_TYPE_TABLE(SHMEM_DECL_EXT_AMO)
#undef SHMEM_DECL_EXT_AMO
#define SHMEM_DECL_AMO(T, N)                                                                   \
    T shmem_##N##_atomic_compare_swap(T *dest, T cond, T value, int pe);                       \
    T shmem_##N##_atomic_fetch_inc(T *dest, int pe);                                           \
    void shmem_##N##_atomic_inc(T *dest, int pe);                                              \
    T shmem_##N##_atomic_fetch_add(T *dest, T value, int pe);                                  \
    void shmem_##N##_atomic_add(T *dest, T value, int pe);                                     \
    void shmem_##N##_atomic_compare_swap_nbi(T *fetch, T *dest, T cond, T value, int pe);      \
    void shmem_##N##_atomic_fetch_inc_nbi(T *fetch, T *dest, int pe);                          \
    void shmem_##N##_atomic_fetch_add_nbi(T *fetch, T *dest, T value, int pe);
SHMEM_AMO_TYPE_TABLE(SHMEM_DECL_AMO)
#undef SHMEM_DECL_AMO
#define SHMEM_DECL_BIT_AMO(T, N)                                                               \
    T shmem_##N##_atomic_fetch_and(T *dest, T value, int pe);                                  \
    void shmem_##N##_atomic_and(T *dest, T value, int pe);                                     \
    T shmem_##N##_atomic_fetch_or(T *dest, T value, int pe);                                   \
    void shmem_##N##_atomic_or(T *dest, T value, int pe);                                      \
    T shmem_##N##_atomic_fetch_xor(T *dest, T value, int pe);                                  \
    void shmem_##N##_atomic_xor(T *dest, T value, int pe);                                     \
    void shmem_##N##_atomic_fetch_and_nbi(T *fetch, T *dest, T value, int pe);                 \
    void shmem_##N##_atomic_fetch_or_nbi(T *fetch, T *dest, T value, int pe);                  \
    void shmem_##N##_atomic_fetch_xor_nbi(T *fetch, T *dest, T value, int pe);
SHMEM_BITWISE_AMO_TYPE_TABLE(SHMEM_DECL_BIT_AMO)
#undef SHMEM_DECL_BIT_AMO
/* deprecated (OpenSHMEM 1.3 names), on every type of the routines that replaced them */
#define SHMEM_DECL_DEPR_EXT_AMO(T, N)                                                          \
    T shmem_##N##_fetch(const T *source, int pe);                                              \
    void shmem_##N##_set(T *dest, T value, int pe);                                            \
    T shmem_##N##_swap(T *dest, T value, int pe);
SHMEM_EXT_AMO_TYPE_TABLE(SHMEM_DECL_DEPR_EXT_AMO)
#undef SHMEM_DECL_DEPR_EXT_AMO
#define SHMEM_DECL_DEPR_AMO(T, N)                                                              \
    T shmem_##N##_cswap(T *dest, T cond, T value, int pe);                                     \
    T shmem_##N##_finc(T *dest, int pe);                                                       \
    void shmem_##N##_inc(T *dest, int pe);                                                     \
    T shmem_##N##_fadd(T *dest, T value, int pe);                                              \
    void shmem_##N##_add(T *dest, T value, int pe);
SHMEM_AMO_TYPE_TABLE(SHMEM_DECL_DEPR_AMO)
#undef SHMEM_DECL_DEPR_AMO

/* ---- ordering and synchronisation ---- */
void shmem_quiet(void);
void shmem_fence(void);
void shmem_barrier_all(void);
void shmem_sync_all(void);

#define SHMEM_DECL_P2P(T, N)                                                                   \
    void shmem_##N##_wait_until(T *ivar, int cmp, T cmp_value);                                \
    int shmem_##N##_test(T *ivar, int cmp, T cmp_value);                                       \
    /* deprecated: wait until *ivar != value */                                                \
    void shmem_##N##_wait(T *ivar, T value);                                                   \
    void shmem_##N##_wait_until_all(T *ivars, size_t nelems, const int *status, int cmp,       \
                                    T cmp_value);                                              \
    size_t shmem_##N##_wait_until_any(T *ivars, size_t nelems, const int *status, int cmp,     \
                                      T cmp_value);                                            \
    size_t shmem_##N##_wait_until_some(T *ivars, size_t nelems, size_t *indices,               \
                                       const int *status, int cmp, T cmp_value);               \
    void shmem_##N##_wait_until_all_vector(T *ivars, size_t nelems, const int *status,         \
                                           int cmp, T *cmp_values);                            \
    size_t shmem_##N##_wait_until_any_vector(T *ivars, size_t nelems, const int *status,       \
                                             int cmp, T *cmp_values);                          \
    size_t shmem_##N##_wait_until_some_vector(T *ivars, size_t nelems, size_t *indices,        \
                                              const int *status, int cmp, T *cmp_values);      \
    int shmem_##N##_test_all(T *ivars, size_t nelems, const int *status, int cmp,              \
                             T cmp_value);                                                     \
    size_t shmem_##N##_test_any(T *ivars, size_t nelems, const int *status, int cmp,           \
                                T cmp_value);                                                  \
    size_t shmem_##N##_test_some(T *ivars, size_t nelems, size_t *indices, const int *status,  \
                                 int cmp, T cmp_value);                                        \
    int shmem_##N##_test_all_vector(T *ivars, size_t nelems, const int *status, int cmp,       \
                                    T *cmp_values);                                            \
    size_t shmem_##N##_test_any_vector(T *ivars, size_t nelems, const int *status, int cmp,    \
                                       T *cmp_values);                                         \
    size_t shmem_##N##_test_some_vector(T *ivars, size_t nelems, size_t *indices,              \
                                        const int *status, int cmp, T *cmp_values);
SHMEM_P2P_TYPE_TABLE(SHMEM_DECL_P2P)
#undef SHMEM_DECL_P2P

/* ---- distributed locks (a symmetric long, initially 0) ---- */
void shmem_set_lock(long *lock);
void shmem_clear_lock(long *lock);
int shmem_test_lock(long *lock);

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
/* dest's address on team PE pe (shmem_ptr of its world PE); NULL for SHMEM_TEAM_INVALID or a
 * PE outside the team. */
void *shmem_team_ptr(shmem_team_t team, const void *dest, int pe);

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

/* Reduction types: X(TYPE, TYPENAME). Bitwise (and/or/xor), ordered/arithmetic
 * (max/min/sum/prod), and complex (sum/prod only) as in the spec's Table 10. */
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
    SHMEM_REDUCE_BITWISE_TYPE_TABLE(X) /* the unsigned and fixed-width types */               \
    X(float, float)                                                                            \
    X(double, double)                                                                          \
    X(long double, longdouble)
#define SHMEM_REDUCE_COMPLEX_TYPE_TABLE(X)                                                     \
    X(double _Complex, complexd)                                                               \
    X(float _Complex, complexf)
#define SHMEM_DECL_REDUCE(T, N, OP)                                                            \
    int shmem_##N##_##OP##_reduce(shmem_team_t team, T *dest, const T *source, size_t nreduce);
#define SHMEM_DECL_REDUCE_BIT(T, N)                                                            \
    SHMEM_DECL_REDUCE(T, N, and) SHMEM_DECL_REDUCE(T, N, or) SHMEM_DECL_REDUCE(T, N, xor)
#define SHMEM_DECL_REDUCE_ARITH(T, N)                                                          \
    SHMEM_DECL_REDUCE(T, N, max) SHMEM_DECL_REDUCE(T, N, min) SHMEM_DECL_REDUCE(T, N, sum)     \
    SHMEM_DECL_REDUCE(T, N, prod)
SHMEM_REDUCE_BITWISE_TYPE_TABLE(SHMEM_DECL_REDUCE_BIT)
SHMEM_REDUCE_ARITH_TYPE_TABLE(SHMEM_DECL_REDUCE_ARITH)
#define SHMEM_DECL_REDUCE_COMPLEX(T, N) SHMEM_DECL_REDUCE(T, N, sum) SHMEM_DECL_REDUCE(T, N, prod)
SHMEM_REDUCE_COMPLEX_TYPE_TABLE(SHMEM_DECL_REDUCE_COMPLEX)
#undef SHMEM_DECL_REDUCE_COMPLEX
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
/* The active-set sync. Its name is shared with 1.5's shmem_sync(team), the generic spelling of
 * shmem_team_sync: C programs get a macro that picks by the number of arguments (below), C++
 * programs an overload. */
void shmem_sync(int PE_start, int logPE_stride, int PE_size, long *pSync);
#define SHMEM_DECL_ASET_COLL(B)                                                                \
    void shmem_broadcast##B(void *dest, const void *source, size_t nelems, int PE_root,        \
                            int PE_start, int logPE_stride, int PE_size, long *pSync);         \
    void shmem_collect##B(void *dest, const void *source, size_t nelems, int PE_start,         \
                          int logPE_stride, int PE_size, long *pSync);                         \
    void shmem_fcollect##B(void *dest, const void *source, size_t nelems, int PE_start,        \
                           int logPE_stride, int PE_size, long *pSync);                        \
    void shmem_alltoall##B(void *dest, const void *source, size_t nelems, int PE_start,        \
                           int logPE_stride, int PE_size, long *pSync);                        \
    void shmem_alltoalls##B(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst,     \
                            size_t nelems, int PE_start, int logPE_stride, int PE_size,        \
                            long *pSync);
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
/* complexd and complexf: sum and prod (SHMEM_REDUCE_COMPLEX_TYPE_TABLE) */
#define SHMEM_DECL_TO_ALL_COMPLEX(T, N) SHMEM_DECL_TO_ALL(T, N, sum) SHMEM_DECL_TO_ALL(T, N, prod)
SHMEM_REDUCE_COMPLEX_TYPE_TABLE(SHMEM_DECL_TO_ALL_COMPLEX)
#undef SHMEM_DECL_TO_ALL_COMPLEX
#undef SHMEM_DECL_TO_ALL_BIT
#undef SHMEM_DECL_TO_ALL_ARITH
#undef SHMEM_DECL_TO_ALL

/* ---- communication contexts (1.5 §9.5) ---- */
/* Every operation completes at the store here, so a context only scopes quiet and fence; a
 * context made from a team takes PE numbers relative to that team. */
typedef struct shm_ctx *shmem_ctx_t;
#define SHMEM_CTX_PRIVATE (1L << 0)
#define SHMEM_CTX_SERIALIZED (1L << 1)
#define SHMEM_CTX_NOSTORE (1L << 2)
#define SHMEM_CTX_INVALID ((shmem_ctx_t)0)
extern shmem_ctx_t SHMEM_CTX_DEFAULT;
int shmem_ctx_create(long options, shmem_ctx_t *ctx);
int shmem_team_create_ctx(shmem_team_t team, long options, shmem_ctx_t *ctx);
void shmem_ctx_destroy(shmem_ctx_t ctx);
int shmem_ctx_get_team(shmem_ctx_t ctx, shmem_team_t *team);
void shmem_ctx_quiet(shmem_ctx_t ctx);
void shmem_ctx_fence(shmem_ctx_t ctx);
void shmem_ctx_putmem(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe);
void shmem_ctx_getmem(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe);
void shmem_ctx_putmem_nbi(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems,
                          int pe);
void shmem_ctx_getmem_nbi(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems,
                          int pe);
void shmem_ctx_putmem_signal(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems,
                             uint64_t *sig_addr, uint64_t signal, int sig_op, int pe);
void shmem_ctx_putmem_signal_nbi(shmem_ctx_t ctx, void *dest, const void *source,
                                 size_t nelems, uint64_t *sig_addr, uint64_t signal,
                                 int sig_op, int pe);
#define SHMEM_DECL_CTX_RMA(T, N)                                                               \
    void shmem_ctx_##N##_put(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems, int pe); \
    void shmem_ctx_##N##_get(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems, int pe); \
    void shmem_ctx_##N##_put_nbi(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems,     \
                                 int pe);                                                      \
    void shmem_ctx_##N##_get_nbi(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems,     \
                                 int pe);                                                      \
    void shmem_ctx_##N##_p(shmem_ctx_t ctx, T *dest, T value, int pe);                         \
    T shmem_ctx_##N##_g(shmem_ctx_t ctx, const T *source, int pe);                             \
    void shmem_ctx_##N##_iput(shmem_ctx_t ctx, T *dest, const T *source, ptrdiff_t dst,        \
                              ptrdiff_t sst, size_t nelems, int pe);                           \
    void shmem_ctx_##N##_iget(shmem_ctx_t ctx, T *dest, const T *source, ptrdiff_t dst,        \
                              ptrdiff_t sst, size_t nelems, int pe);                           \
    void shmem_ctx_##N##_put_signal(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems,  \
                                    uint64_t *sig_addr, uint64_t signal, int sig_op, int pe);  \
    void shmem_ctx_##N##_put_signal_nbi(shmem_ctx_t ctx, T *dest, const T *source,             \
                                        size_t nelems, uint64_t *sig_addr, uint64_t signal,    \
                                        int sig_op, int pe);
SHMEM_RMA_TYPE_TABLE(SHMEM_DECL_CTX_RMA)
#undef SHMEM_DECL_CTX_RMA
#define SHMEM_DECL_CTX_SIZED(B)                                                                \
    void shmem_ctx_put##B(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems,      \
                          int pe);                                                             \
    void shmem_ctx_get##B(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems,      \
                          int pe);                                                             \
    void shmem_ctx_put##B##_nbi(shmem_ctx_t ctx, void *dest, const void *source,               \
                                size_t nelems, int pe);                                        \
    void shmem_ctx_get##B##_nbi(shmem_ctx_t ctx, void *dest, const void *source,               \
                                size_t nelems, int pe);                                        \
    void shmem_ctx_iput##B(shmem_ctx_t ctx, void *dest, const void *source, ptrdiff_t dst,     \
                           ptrdiff_t sst, size_t nelems, int pe);                              \
    void shmem_ctx_iget##B(shmem_ctx_t ctx, void *dest, const void *source, ptrdiff_t dst,     \
                           ptrdiff_t sst, size_t nelems, int pe);
SHMEM_SIZED_TABLE(SHMEM_DECL_CTX_SIZED)
#undef SHMEM_DECL_CTX_SIZED
#define SHMEM_DECL_CTX_EXT_AMO(T, N)                                                           \
    T shmem_ctx_##N##_atomic_fetch(shmem_ctx_t ctx, const T *source, int pe);                  \
    void shmem_ctx_##N##_atomic_set(shmem_ctx_t ctx, T *dest, T value, int pe);                \
    T shmem_ctx_##N##_atomic_swap(shmem_ctx_t ctx, T *dest, T value, int pe);                  \
    void shmem_ctx_##N##_atomic_fetch_nbi(shmem_ctx_t ctx, T *fetch, const T *source, int pe); \
    void shmem_ctx_##N##_atomic_swap_nbi(shmem_ctx_t ctx, T *fetch, T *dest, T value, int pe);
SHMEM_EXT_AMO_TYPE_TABLE(SHMEM_DECL_CTX_EXT_AMO)
#undef SHMEM_DECL_CTX_EXT_AMO
#define SHMEM_DECL_CTX_AMO(T, N)                                                               \
    T shmem_ctx_##N##_atomic_compare_swap(shmem_ctx_t ctx, T *dest, T cond, T value, int pe);  \
    T shmem_ctx_##N##_atomic_fetch_inc(shmem_ctx_t ctx, T *dest, int pe);                      \
    void shmem_ctx_##N##_atomic_inc(shmem_ctx_t ctx, T *dest, int pe);                         \
    T shmem_ctx_##N##_atomic_fetch_add(shmem_ctx_t ctx, T *dest, T value, int pe);             \
    void shmem_ctx_##N##_atomic_add(shmem_ctx_t ctx, T *dest, T value, int pe);                \
    void shmem_ctx_##N##_atomic_compare_swap_nbi(shmem_ctx_t ctx, T *fetch, T *dest, T cond,   \
                                                 T value, int pe);                             \
    void shmem_ctx_##N##_atomic_fetch_inc_nbi(shmem_ctx_t ctx, T *fetch, T *dest, int pe);     \
    void shmem_ctx_##N##_atomic_fetch_add_nbi(shmem_ctx_t ctx, T *fetch, T *dest, T value,     \
                                              int pe);
SHMEM_AMO_TYPE_TABLE(SHMEM_DECL_CTX_AMO)
#undef SHMEM_DECL_CTX_AMO
#define SHMEM_DECL_CTX_BIT_OP(T, N, OP)                                                        \
    T shmem_ctx_##N##_atomic_fetch_##OP(shmem_ctx_t ctx, T *dest, T value, int pe);            \
    void shmem_ctx_##N##_atomic_##OP(shmem_ctx_t ctx, T *dest, T value, int pe);               \
    void shmem_ctx_##N##_atomic_fetch_##OP##_nbi(shmem_ctx_t ctx, T *fetch, T *dest, T value,  \
                                                 int pe);
#define SHMEM_DECL_CTX_BIT_AMO(T, N)                                                           \
    SHMEM_DECL_CTX_BIT_OP(T, N, and) SHMEM_DECL_CTX_BIT_OP(T, N, or)                           \
    SHMEM_DECL_CTX_BIT_OP(T, N, xor)
SHMEM_BITWISE_AMO_TYPE_TABLE(SHMEM_DECL_CTX_BIT_AMO)
#undef SHMEM_DECL_CTX_BIT_AMO
#undef SHMEM_DECL_CTX_BIT_OP

/* ---- deprecated setup and memory routines ---- */
void start_pes(int npes);
int _my_pe(void);
int _num_pes(void);
void *shmalloc(size_t size);
void shfree(void *ptr);
void *shrealloc(void *ptr, size_t size);
void *shmemalign(size_t alignment, size_t size);
/* deprecated cache management: no-ops (nothing is cached between a PE and the heaps) */
void shmem_clear_cache_inv(void);
void shmem_set_cache_inv(void);
void shmem_clear_cache_line_inv(void *dest);
void shmem_set_cache_line_inv(void *dest);
void shmem_udcflush(void);
void shmem_udcflush_line(void *dest);

/* ---- profiling (1.5 §9.15) ---- */
/* level 0 disables profiling, 1 enables it, 2 enables it with per-region data, others are
 * the tool's. No profiling library is built in, so this records nothing. */
void shmem_pcontrol(const int level, ...);

/* ---- shmem_sync: the team form (1.5) and the deprecated active-set form ---- */
#ifndef __cplusplus
#define SHMEM_SYNC_SEL_(_1, _2, _3, _4, X, ...) X
#define shmem_sync(...)                                                                       \
    SHMEM_SYNC_SEL_(__VA_ARGS__, (shmem_sync), ~, ~, shmem_team_sync, ~)(__VA_ARGS__)
#endif

/* ---- C11 generic interfaces ---- */
#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && !defined(__cplusplus)
/* One entry per distinct C type (int8_t ... are typedefs of these, size_t of unsigned long).
 * P is the prefix: shmem_ for the plain routines, shmem_ctx_ for the context forms. */
#define SHMEM_G_RMA_(P, op)                                                                   \
    float: P##float_##op, double: P##double_##op, long double: P##longdouble_##op,            \
    char: P##char_##op, signed char: P##schar_##op, short: P##short_##op, int: P##int_##op,   \
    long: P##long_##op, long long: P##longlong_##op, unsigned char: P##uchar_##op,            \
    unsigned short: P##ushort_##op, unsigned int: P##uint_##op,                               \
    unsigned long: P##ulong_##op, unsigned long long: P##ulonglong_##op
#define SHMEM_G_AMO_(P, op)                                                                   \
    int: P##int_##op, long: P##long_##op, long long: P##longlong_##op,                        \
    unsigned int: P##uint_##op, unsigned long: P##ulong_##op,                                 \
    unsigned long long: P##ulonglong_##op
#define SHMEM_G_EXT_(P, op) float: P##float_##op, double: P##double_##op, SHMEM_G_AMO_(P, op)
#define SHMEM_G_BIT_(P, op)                                                                   \
    unsigned int: P##uint_##op, unsigned long: P##ulong_##op,                                 \
    unsigned long long: P##ulonglong_##op, int: P##int32_##op, long: P##int64_##op
#define SHMEM_G_RMA(op) SHMEM_G_RMA_(shmem_, op)
#define SHMEM_G_AMO(op) SHMEM_G_AMO_(shmem_, op)
#define SHMEM_G_EXT(op) SHMEM_G_EXT_(shmem_, op)
#define SHMEM_G_BIT(op) SHMEM_G_BIT_(shmem_, op)
#define SHMEM_G_P2P(op)                                                                       \
    short: shmem_short_##op, unsigned short: shmem_ushort_##op, SHMEM_G_AMO(op)
/* RMA and AMO routines take an optional leading shmem_ctx_t (1.5): shmem_put(dest, source,
 * nelems, pe) or shmem_put(ctx, dest, source, nelems, pe). The forms differ in their number of
 * arguments: SHMEM_G_CTX(K, TABLE, name, args) is the shmem_ctx_ form when given K arguments
 * and the shmem_ form when given K - 1, selected by TABLE on the type that the first argument
 * after any context points to: dest (or source), or fetch for the fetching _nbi AMOs, which
 * points to the same type. */
#define SHMEM_G_SEL3(_1, _2, _3, X, ...) X
#define SHMEM_G_SEL4(_1, _2, _3, _4, X, ...) X
#define SHMEM_G_SEL5(_1, _2, _3, _4, _5, X, ...) X
#define SHMEM_G_SEL6(_1, _2, _3, _4, _5, _6, X, ...) X
#define SHMEM_G_SEL7(_1, _2, _3, _4, _5, _6, _7, X, ...) X
#define SHMEM_G_SEL8(_1, _2, _3, _4, _5, _6, _7, _8, X, ...) X
#define SHMEM_G_SEL9(_1, _2, _3, _4, _5, _6, _7, _8, _9, X, ...) X
#define SHMEM_G_FIRST(x, ...) x
#define SHMEM_G_N(TABLE, name, ...)                                                           \
    _Generic(*(SHMEM_G_FIRST(__VA_ARGS__, ~)), TABLE(shmem_, name))(__VA_ARGS__)
#define SHMEM_G_C(TABLE, name, ctx, ...)                                                      \
    _Generic(*(SHMEM_G_FIRST(__VA_ARGS__, ~)), TABLE(shmem_ctx_, name))(ctx, __VA_ARGS__)
#define SHMEM_G_CTX(K, TABLE, name, ...)                                                      \
    SHMEM_G_SEL##K(__VA_ARGS__, SHMEM_G_C, SHMEM_G_N, ~)(TABLE, name, __VA_ARGS__)
#define shmem_put(...) SHMEM_G_CTX(5, SHMEM_G_RMA_, put, __VA_ARGS__)
#define shmem_get(...) SHMEM_G_CTX(5, SHMEM_G_RMA_, get, __VA_ARGS__)
#define shmem_put_nbi(...) SHMEM_G_CTX(5, SHMEM_G_RMA_, put_nbi, __VA_ARGS__)
#define shmem_get_nbi(...) SHMEM_G_CTX(5, SHMEM_G_RMA_, get_nbi, __VA_ARGS__)
#define shmem_p(...) SHMEM_G_CTX(4, SHMEM_G_RMA_, p, __VA_ARGS__)
#define shmem_g(...) SHMEM_G_CTX(3, SHMEM_G_RMA_, g, __VA_ARGS__)
#define shmem_iput(...) SHMEM_G_CTX(7, SHMEM_G_RMA_, iput, __VA_ARGS__)
#define shmem_iget(...) SHMEM_G_CTX(7, SHMEM_G_RMA_, iget, __VA_ARGS__)
#define shmem_put_signal(...) SHMEM_G_CTX(8, SHMEM_G_RMA_, put_signal, __VA_ARGS__)
#define shmem_put_signal_nbi(...) SHMEM_G_CTX(8, SHMEM_G_RMA_, put_signal_nbi, __VA_ARGS__)
#define shmem_atomic_fetch(...) SHMEM_G_CTX(3, SHMEM_G_EXT_, atomic_fetch, __VA_ARGS__)
#define shmem_atomic_set(...) SHMEM_G_CTX(4, SHMEM_G_EXT_, atomic_set, __VA_ARGS__)
#define shmem_atomic_swap(...) SHMEM_G_CTX(4, SHMEM_G_EXT_, atomic_swap, __VA_ARGS__)
#define shmem_atomic_fetch_nbi(...) SHMEM_G_CTX(4, SHMEM_G_EXT_, atomic_fetch_nbi, __VA_ARGS__)
#define shmem_atomic_swap_nbi(...) SHMEM_G_CTX(5, SHMEM_G_EXT_, atomic_swap_nbi, __VA_ARGS__)
#define shmem_atomic_compare_swap(...) SHMEM_G_CTX(5, SHMEM_G_AMO_, atomic_compare_swap, __VA_ARGS__)
#define shmem_atomic_fetch_inc(...) SHMEM_G_CTX(3, SHMEM_G_AMO_, atomic_fetch_inc, __VA_ARGS__)
#define shmem_atomic_inc(...) SHMEM_G_CTX(3, SHMEM_G_AMO_, atomic_inc, __VA_ARGS__)
#define shmem_atomic_fetch_add(...) SHMEM_G_CTX(4, SHMEM_G_AMO_, atomic_fetch_add, __VA_ARGS__)
#define shmem_atomic_add(...) SHMEM_G_CTX(4, SHMEM_G_AMO_, atomic_add, __VA_ARGS__)
#define shmem_atomic_compare_swap_nbi(...) SHMEM_G_CTX(6, SHMEM_G_AMO_, atomic_compare_swap_nbi, __VA_ARGS__)
#define shmem_atomic_fetch_inc_nbi(...) SHMEM_G_CTX(4, SHMEM_G_AMO_, atomic_fetch_inc_nbi, __VA_ARGS__)
#define shmem_atomic_fetch_add_nbi(...) SHMEM_G_CTX(5, SHMEM_G_AMO_, atomic_fetch_add_nbi, __VA_ARGS__)
#define shmem_atomic_fetch_and(...) SHMEM_G_CTX(4, SHMEM_G_BIT_, atomic_fetch_and, __VA_ARGS__)
#define shmem_atomic_and(...) SHMEM_G_CTX(4, SHMEM_G_BIT_, atomic_and, __VA_ARGS__)
#define shmem_atomic_fetch_and_nbi(...) SHMEM_G_CTX(5, SHMEM_G_BIT_, atomic_fetch_and_nbi, __VA_ARGS__)
#define shmem_atomic_fetch_or(...) SHMEM_G_CTX(4, SHMEM_G_BIT_, atomic_fetch_or, __VA_ARGS__)
#define shmem_atomic_or(...) SHMEM_G_CTX(4, SHMEM_G_BIT_, atomic_or, __VA_ARGS__)
#define shmem_atomic_fetch_or_nbi(...) SHMEM_G_CTX(5, SHMEM_G_BIT_, atomic_fetch_or_nbi, __VA_ARGS__)
#define shmem_atomic_fetch_xor(...) SHMEM_G_CTX(4, SHMEM_G_BIT_, atomic_fetch_xor, __VA_ARGS__)
#define shmem_atomic_xor(...) SHMEM_G_CTX(4, SHMEM_G_BIT_, atomic_xor, __VA_ARGS__)
#define shmem_atomic_fetch_xor_nbi(...) SHMEM_G_CTX(5, SHMEM_G_BIT_, atomic_fetch_xor_nbi, __VA_ARGS__)
/* the deprecated (1.3) generic AMOs: the 1.4 ones under their old names */
#define shmem_fetch(dest, pe) shmem_atomic_fetch(dest, pe)
#define shmem_set(dest, value, pe) shmem_atomic_set(dest, value, pe)
#define shmem_swap(dest, value, pe) shmem_atomic_swap(dest, value, pe)
#define shmem_cswap(dest, cond, value, pe) shmem_atomic_compare_swap(dest, cond, value, pe)
#define shmem_finc(dest, pe) shmem_atomic_fetch_inc(dest, pe)
#define shmem_inc(dest, pe) shmem_atomic_inc(dest, pe)
#define shmem_fadd(dest, value, pe) shmem_atomic_fetch_add(dest, value, pe)
#define shmem_add(dest, value, pe) shmem_atomic_add(dest, value, pe)
/* point-to-point synchronisation (no context forms) */
#define shmem_wait_until(ivar, cmp, cmp_value)                                                \
    _Generic(*(ivar), SHMEM_G_P2P(wait_until))(ivar, cmp, cmp_value)
#define shmem_test(ivar, cmp, cmp_value)                                                      \
    _Generic(*(ivar), SHMEM_G_P2P(test))(ivar, cmp, cmp_value)
#define shmem_wait_until_all(ivars, nelems, status, cmp, cmp_value)                           \
    _Generic(*(ivars), SHMEM_G_P2P(wait_until_all))(ivars, nelems, status, cmp, cmp_value)
#define shmem_wait_until_any(ivars, nelems, status, cmp, cmp_value)                           \
    _Generic(*(ivars), SHMEM_G_P2P(wait_until_any))(ivars, nelems, status, cmp, cmp_value)
#define shmem_wait_until_some(ivars, nelems, indices, status, cmp, cmp_value)                 \
    _Generic(*(ivars), SHMEM_G_P2P(wait_until_some))                                          \
        (ivars, nelems, indices, status, cmp, cmp_value)
#define shmem_wait_until_all_vector(ivars, nelems, status, cmp, cmp_values)                   \
    _Generic(*(ivars), SHMEM_G_P2P(wait_until_all_vector))                                    \
        (ivars, nelems, status, cmp, cmp_values)
#define shmem_wait_until_any_vector(ivars, nelems, status, cmp, cmp_values)                   \
    _Generic(*(ivars), SHMEM_G_P2P(wait_until_any_vector))                                    \
        (ivars, nelems, status, cmp, cmp_values)
#define shmem_wait_until_some_vector(ivars, nelems, indices, status, cmp, cmp_values)         \
    _Generic(*(ivars), SHMEM_G_P2P(wait_until_some_vector))                                   \
        (ivars, nelems, indices, status, cmp, cmp_values)
#define shmem_test_all(ivars, nelems, status, cmp, cmp_value)                                 \
    _Generic(*(ivars), SHMEM_G_P2P(test_all))(ivars, nelems, status, cmp, cmp_value)
#define shmem_test_any(ivars, nelems, status, cmp, cmp_value)                                 \
    _Generic(*(ivars), SHMEM_G_P2P(test_any))(ivars, nelems, status, cmp, cmp_value)
#define shmem_test_some(ivars, nelems, indices, status, cmp, cmp_value)                       \
    _Generic(*(ivars), SHMEM_G_P2P(test_some))                                                \
        (ivars, nelems, indices, status, cmp, cmp_value)
#define shmem_test_all_vector(ivars, nelems, status, cmp, cmp_values)                         \
    _Generic(*(ivars), SHMEM_G_P2P(test_all_vector))(ivars, nelems, status, cmp, cmp_values)
#define shmem_test_any_vector(ivars, nelems, status, cmp, cmp_values)                         \
    _Generic(*(ivars), SHMEM_G_P2P(test_any_vector))(ivars, nelems, status, cmp, cmp_values)
#define shmem_test_some_vector(ivars, nelems, indices, status, cmp, cmp_values)               \
    _Generic(*(ivars), SHMEM_G_P2P(test_some_vector))                                         \
        (ivars, nelems, indices, status, cmp, cmp_values)
/* collectives on teams (1.5 §9.9): every RMA type */
#define shmem_broadcast(team, dest, source, nelems, PE_root)                                  \
    _Generic(*(dest), SHMEM_G_RMA(broadcast))(team, dest, source, nelems, PE_root)
#define shmem_collect(team, dest, source, nelems)                                             \
    _Generic(*(dest), SHMEM_G_RMA(collect))(team, dest, source, nelems)
#define shmem_fcollect(team, dest, source, nelems)                                            \
    _Generic(*(dest), SHMEM_G_RMA(fcollect))(team, dest, source, nelems)
#define shmem_alltoall(team, dest, source, nelems)                                            \
    _Generic(*(dest), SHMEM_G_RMA(alltoall))(team, dest, source, nelems)
#define shmem_alltoalls(team, dest, source, dst, sst, nelems)                                 \
    _Generic(*(dest), SHMEM_G_RMA(alltoalls))(team, dest, source, dst, sst, nelems)
/* reductions: and/or/xor on the bitwise types (int8_t ... int64_t are signed char, short, int
 * and long), max/min on the arithmetic ones, sum/prod on those and the complex ones */
#define SHMEM_G_RED_BIT(op)                                                                   \
    unsigned char: shmem_uchar_##op, unsigned short: shmem_ushort_##op,                       \
    unsigned int: shmem_uint_##op, unsigned long: shmem_ulong_##op,                           \
    unsigned long long: shmem_ulonglong_##op, signed char: shmem_int8_##op,                   \
    short: shmem_int16_##op, int: shmem_int32_##op, long: shmem_int64_##op
#define SHMEM_G_RED_ARITH(op)                                                                 \
    char: shmem_char_##op, signed char: shmem_schar_##op, short: shmem_short_##op,            \
    int: shmem_int_##op, long: shmem_long_##op, long long: shmem_longlong_##op,               \
    unsigned char: shmem_uchar_##op, unsigned short: shmem_ushort_##op,                       \
    unsigned int: shmem_uint_##op, unsigned long: shmem_ulong_##op,                           \
    unsigned long long: shmem_ulonglong_##op, float: shmem_float_##op,                        \
    double: shmem_double_##op, long double: shmem_longdouble_##op
#define SHMEM_G_RED_CPLX(op)                                                                  \
    SHMEM_G_RED_ARITH(op), double _Complex: shmem_complexd_##op,                              \
    float _Complex: shmem_complexf_##op
#define shmem_and_reduce(team, dest, source, nreduce)                                         \
    _Generic(*(dest), SHMEM_G_RED_BIT(and_reduce))(team, dest, source, nreduce)
#define shmem_or_reduce(team, dest, source, nreduce)                                          \
    _Generic(*(dest), SHMEM_G_RED_BIT(or_reduce))(team, dest, source, nreduce)
#define shmem_xor_reduce(team, dest, source, nreduce)                                         \
    _Generic(*(dest), SHMEM_G_RED_BIT(xor_reduce))(team, dest, source, nreduce)
#define shmem_max_reduce(team, dest, source, nreduce)                                         \
    _Generic(*(dest), SHMEM_G_RED_ARITH(max_reduce))(team, dest, source, nreduce)
#define shmem_min_reduce(team, dest, source, nreduce)                                         \
    _Generic(*(dest), SHMEM_G_RED_ARITH(min_reduce))(team, dest, source, nreduce)
#define shmem_sum_reduce(team, dest, source, nreduce)                                         \
    _Generic(*(dest), SHMEM_G_RED_CPLX(sum_reduce))(team, dest, source, nreduce)
#define shmem_prod_reduce(team, dest, source, nreduce)                                        \
    _Generic(*(dest), SHMEM_G_RED_CPLX(prod_reduce))(team, dest, source, nreduce)
#endif

#pragma GCC visibility pop

#ifdef __cplusplus
}
/* shmem_sync(team), next to the deprecated shmem_sync(PE_start, logPE_stride, PE_size, pSync) */
inline int shmem_sync(shmem_team_t team) { return shmem_team_sync(team); }
#endif
#endif
