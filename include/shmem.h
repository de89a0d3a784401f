/*
 * OpenSHMEM 1.5 for ntblend (docs/openshmem.md): PEs on the hosts of an NTB fabric, started
 * by oshrun. Every PE's symmetric heap is a segment on its host, mapped into every other PE,
 * so RMA is a load or store through an NTB window and atomics are CPU atomics on the owner's
 * memory (what PCIe AtomicOps through the NTB do).
 *
 * This header declares what is implemented so far; the rest of the 1.5 surface (teams,
 * contexts, collectives, signals, locks, ...) is added alongside. Typed routines are generated
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
