/*
 * RMA and atomics. Every PE's heap is mapped here, so a put is a memcpy into PE pe's heap at
 * the object's offset and a get the reverse; through an NTB window these are posted writes and
 * non-posted reads with no software in between. Blocking and _nbi forms are the same here:
 * a store through the window has left this PE when the copy returns.
 *
 * iput/iget copy element by element; put-with-signal is the copy, a store fence, then an atomic
 * store or add on the remote signal word.
 *
 * Atomics are C11 atomics on the mapped remote word (fetch/set/swap through the GCC generic
 * atomics, so float and double go by their bit patterns): on the fabric they are what PCIe
 * AtomicOps (FetchAdd, Swap, CAS) through the NTB do, performed at the owner's memory, so they
 * progress without the target making any call.
 */
#include <stdatomic.h>
#include <string.h>

#include "shmem.h"
#include "shmem_internal.h"

static void *remote(const char *who, const void *addr, int pe)
{
    shm_require_init(who);
    return shm_translate(who, addr, pe);
}

void shmem_putmem(void *dest, const void *source, size_t nelems, int pe)
{
    if (nelems)
        memcpy(remote("shmem_putmem", dest, pe), source, nelems);
}

void shmem_getmem(void *dest, const void *source, size_t nelems, int pe)
{
    if (nelems)
        memcpy(dest, remote("shmem_getmem", source, pe), nelems);
}

void shmem_putmem_nbi(void *dest, const void *source, size_t nelems, int pe)
{
    shmem_putmem(dest, source, nelems, pe);
}

void shmem_getmem_nbi(void *dest, const void *source, size_t nelems, int pe)
{
    shmem_getmem(dest, source, nelems, pe);
}

/* Strided copies: element i goes from source[i * sst] to dest[i * dst] (elements of es bytes). */
static void strided(char *d, const char *s, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, size_t es)
{
    for (size_t i = 0; i < nelems; i++)
        memcpy(d + (ptrdiff_t)i * dst * (ptrdiff_t)es, s + (ptrdiff_t)i * sst * (ptrdiff_t)es, es);
}

static void iput(const char *who, void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst,
                 size_t nelems, size_t es, int pe)
{
    if (nelems)
        strided(remote(who, dest, pe), source, dst, sst, nelems, es);
}

static void iget(const char *who, void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst,
                 size_t nelems, size_t es, int pe)
{
    if (nelems)
        strided(dest, remote(who, source, pe), dst, sst, nelems, es);
}

/* Put with signal: the data, a store fence (so the signal cannot overtake it), then the signal
 * word updated atomically at the target. */
static void put_signal(const char *who, void *dest, const void *source, size_t bytes,
                       uint64_t *sig_addr, uint64_t signal, int sig_op, int pe)
{
    if (bytes)
        memcpy(remote(who, dest, pe), source, bytes);
    _Atomic uint64_t *sig = (_Atomic uint64_t *)remote(who, sig_addr, pe);
    atomic_thread_fence(memory_order_seq_cst);
    if (sig_op == SHMEM_SIGNAL_SET)
        atomic_store(sig, signal);
    else if (sig_op == SHMEM_SIGNAL_ADD)
        atomic_fetch_add(sig, signal);
    else
        shm_fatal("%s: sig_op %d is neither SHMEM_SIGNAL_SET nor SHMEM_SIGNAL_ADD", who, sig_op);
}

void shmem_putmem_signal(void *dest, const void *source, size_t nelems, uint64_t *sig_addr,
                         uint64_t signal, int sig_op, int pe)
{
    put_signal("shmem_putmem_signal", dest, source, nelems, sig_addr, signal, sig_op, pe);
}

void shmem_putmem_signal_nbi(void *dest, const void *source, size_t nelems, uint64_t *sig_addr,
                             uint64_t signal, int sig_op, int pe)
{
    put_signal("shmem_putmem_signal_nbi", dest, source, nelems, sig_addr, signal, sig_op, pe);
}

uint64_t shmem_signal_fetch(const uint64_t *sig_addr)
{
    return atomic_load((_Atomic uint64_t *)sig_addr);
}

#define DEF_RMA(T, N)                                                                          \
    void shmem_##N##_put(T *dest, const T *source, size_t nelems, int pe)                      \
    {                                                                                          \
        if (nelems)                                                                            \
            memcpy(remote("shmem_" #N "_put", dest, pe), source, nelems * sizeof(T));          \
    }                                                                                          \
    void shmem_##N##_get(T *dest, const T *source, size_t nelems, int pe)                      \
    {                                                                                          \
        if (nelems)                                                                            \
            memcpy(dest, remote("shmem_" #N "_get", source, pe), nelems * sizeof(T));          \
    }                                                                                          \
    void shmem_##N##_put_nbi(T *dest, const T *source, size_t nelems, int pe)                  \
    {                                                                                          \
        shmem_##N##_put(dest, source, nelems, pe);                                             \
    }                                                                                          \
    void shmem_##N##_get_nbi(T *dest, const T *source, size_t nelems, int pe)                  \
    {                                                                                          \
        shmem_##N##_get(dest, source, nelems, pe);                                             \
    }                                                                                          \
    void shmem_##N##_p(T *dest, T value, int pe)                                               \
    {                                                                                          \
        *(volatile T *)remote("shmem_" #N "_p", dest, pe) = value;                             \
    }                                                                                          \
    T shmem_##N##_g(const T *source, int pe)                                                   \
    {                                                                                          \
        return *(const volatile T *)remote("shmem_" #N "_g", source, pe);                      \
    }                                                                                          \
    void shmem_##N##_iput(T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst,              \
                          size_t nelems, int pe)                                               \
    {                                                                                          \
        iput("shmem_" #N "_iput", dest, source, dst, sst, nelems, sizeof(T), pe);              \
    }                                                                                          \
    void shmem_##N##_iget(T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst,              \
                          size_t nelems, int pe)                                               \
    {                                                                                          \
        iget("shmem_" #N "_iget", dest, source, dst, sst, nelems, sizeof(T), pe);              \
    }                                                                                          \
    void shmem_##N##_put_signal(T *dest, const T *source, size_t nelems, uint64_t *sig_addr,   \
                                uint64_t signal, int sig_op, int pe)                           \
    {                                                                                          \
        put_signal("shmem_" #N "_put_signal", dest, source, nelems * sizeof(T), sig_addr,      \
                   signal, sig_op, pe);                                                        \
    }                                                                                          \
    void shmem_##N##_put_signal_nbi(T *dest, const T *source, size_t nelems,                   \
                                    uint64_t *sig_addr, uint64_t signal, int sig_op, int pe)   \
    {                                                                                          \
        put_signal("shmem_" #N "_put_signal_nbi", dest, source, nelems * sizeof(T), sig_addr,  \
                   signal, sig_op, pe);                                                        \
    }
SHMEM_RMA_TYPE_TABLE(DEF_RMA)

#define DEF_SIZED(B)                                                                           \
    void shmem_put##B(void *dest, const void *source, size_t nelems, int pe)                   \
    {                                                                                          \
        if (nelems)                                                                            \
            memcpy(remote("shmem_put" #B, dest, pe), source, nelems * (B / 8));                \
    }                                                                                          \
    void shmem_get##B(void *dest, const void *source, size_t nelems, int pe)                   \
    {                                                                                          \
        if (nelems)                                                                            \
            memcpy(dest, remote("shmem_get" #B, source, pe), nelems * (B / 8));                \
    }                                                                                          \
    void shmem_put##B##_nbi(void *dest, const void *source, size_t nelems, int pe)             \
    {                                                                                          \
        shmem_put##B(dest, source, nelems, pe);                                                \
    }                                                                                          \
    void shmem_get##B##_nbi(void *dest, const void *source, size_t nelems, int pe)             \
    {                                                                                          \
        shmem_get##B(dest, source, nelems, pe);                                                \
    }                                                                                          \
    void shmem_iput##B(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst,           \
                       size_t nelems, int pe)                                                  \
    {                                                                                          \
        iput("shmem_iput" #B, dest, source, dst, sst, nelems, B / 8, pe);                      \
    }                                                                                          \
    void shmem_iget##B(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst,           \
                       size_t nelems, int pe)                                                  \
    {                                                                                          \
        iget("shmem_iget" #B, dest, source, dst, sst, nelems, B / 8, pe);                      \
    }                                                                                          \
    void shmem_put##B##_signal(void *dest, const void *source, size_t nelems,                  \
                               uint64_t *sig_addr, uint64_t signal, int sig_op, int pe)        \
    {                                                                                          \
        put_signal("shmem_put" #B "_signal", dest, source, nelems * (B / 8), sig_addr, signal, \
                   sig_op, pe);                                                                \
    }                                                                                          \
    void shmem_put##B##_signal_nbi(void *dest, const void *source, size_t nelems,              \
                                   uint64_t *sig_addr, uint64_t signal, int sig_op, int pe)    \
    {                                                                                          \
        put_signal("shmem_put" #B "_signal_nbi", dest, source, nelems * (B / 8), sig_addr,     \
                   signal, sig_op, pe);                                                        \
    }
SHMEM_SIZED_TABLE(DEF_SIZED)

#define AT(T, who, p, pe) ((_Atomic T *)remote(who, p, pe))

/* Extended AMOs on any type of 4 or 8 bytes (float and double too) through the GCC generic
 * atomics, which operate on the bit pattern. */
#define DEF_EXT_AMO(T, N)                                                                      \
    T shmem_##N##_atomic_fetch(const T *source, int pe)                                        \
    {                                                                                          \
        T v;                                                                                   \
        __atomic_load((T *)remote("shmem_" #N "_atomic_fetch", source, pe), &v,                \
                      __ATOMIC_SEQ_CST);                                                       \
        return v;                                                                              \
    }                                                                                          \
    void shmem_##N##_atomic_set(T *dest, T value, int pe)                                      \
    {                                                                                          \
        __atomic_store((T *)remote("shmem_" #N "_atomic_set", dest, pe), &value,               \
                       __ATOMIC_SEQ_CST);                                                      \
    }                                                                                          \
    T shmem_##N##_atomic_swap(T *dest, T value, int pe)                                        \
    {                                                                                          \
        T old;                                                                                 \
        __atomic_exchange((T *)remote("shmem_" #N "_atomic_swap", dest, pe), &value, &old,     \
                          __ATOMIC_SEQ_CST);                                                   \
        return old;                                                                            \
    }                                                                                          \
    void shmem_##N##_atomic_fetch_nbi(T *fetch, const T *source, int pe)                       \
    {                                                                                          \
        *fetch = shmem_##N##_atomic_fetch(source, pe);                                         \
    }                                                                                          \
    void shmem_##N##_atomic_swap_nbi(T *fetch, T *dest, T value, int pe)                       \
    {                                                                                          \
        *fetch = shmem_##N##_atomic_swap(dest, value, pe);                                     \
    }
SHMEM_EXT_AMO_TYPE_TABLE(DEF_EXT_AMO)

#define DEF_AMO(T, N)                                                                          \
    T shmem_##N##_atomic_compare_swap(T *dest, T cond, T value, int pe)                        \
    {                                                                                          \
        atomic_compare_exchange_strong(AT(T, "shmem_" #N "_atomic_compare_swap", dest, pe),    \
                                       &cond, value);                                          \
        return cond; /* the old value either way */                                            \
    }                                                                                          \
    T shmem_##N##_atomic_fetch_add(T *dest, T value, int pe)                                   \
    {                                                                                          \
        return atomic_fetch_add(AT(T, "shmem_" #N "_atomic_fetch_add", dest, pe), value);      \
    }                                                                                          \
    void shmem_##N##_atomic_add(T *dest, T value, int pe)                                      \
    {                                                                                          \
        atomic_fetch_add(AT(T, "shmem_" #N "_atomic_add", dest, pe), value);                   \
    }                                                                                          \
    T shmem_##N##_atomic_fetch_inc(T *dest, int pe)                                            \
    {                                                                                          \
        return atomic_fetch_add(AT(T, "shmem_" #N "_atomic_fetch_inc", dest, pe), (T)1);       \
    }                                                                                          \
    void shmem_##N##_atomic_inc(T *dest, int pe)                                               \
    {                                                                                          \
        atomic_fetch_add(AT(T, "shmem_" #N "_atomic_inc", dest, pe), (T)1);                    \
    }                                                                                          \
    void shmem_##N##_atomic_compare_swap_nbi(T *fetch, T *dest, T cond, T value, int pe)       \
    {                                                                                          \
        *fetch = shmem_##N##_atomic_compare_swap(dest, cond, value, pe);                       \
    }                                                                                          \
    void shmem_##N##_atomic_fetch_inc_nbi(T *fetch, T *dest, int pe)                           \
    {                                                                                          \
        *fetch = shmem_##N##_atomic_fetch_inc(dest, pe);                                       \
    }                                                                                          \
    void shmem_##N##_atomic_fetch_add_nbi(T *fetch, T *dest, T value, int pe)                  \
    {                                                                                          \
        *fetch = shmem_##N##_atomic_fetch_add(dest, value, pe);                                \
    }
SHMEM_AMO_TYPE_TABLE(DEF_AMO)

#define DEF_BIT_OP(T, N, OP)                                                                   \
    T shmem_##N##_atomic_fetch_##OP(T *dest, T value, int pe)                                  \
    {                                                                                          \
        return atomic_fetch_##OP(AT(T, "shmem_" #N "_atomic_fetch_" #OP, dest, pe), value);    \
    }                                                                                          \
    void shmem_##N##_atomic_##OP(T *dest, T value, int pe)                                     \
    {                                                                                          \
        atomic_fetch_##OP(AT(T, "shmem_" #N "_atomic_" #OP, dest, pe), value);                 \
    }                                                                                          \
    void shmem_##N##_atomic_fetch_##OP##_nbi(T *fetch, T *dest, T value, int pe)              \
    {                                                                                          \
        *fetch = shmem_##N##_atomic_fetch_##OP(dest, value, pe);                               \
    }
#define DEF_BIT_AMO(T, N) DEF_BIT_OP(T, N, and) DEF_BIT_OP(T, N, or) DEF_BIT_OP(T, N, xor)
SHMEM_BITWISE_AMO_TYPE_TABLE(DEF_BIT_AMO)

#define DEF_DEPR_AMO(T, N)                                                                     \
    T shmem_##N##_fetch(const T *source, int pe) { return shmem_##N##_atomic_fetch(source, pe); } \
    void shmem_##N##_set(T *dest, T value, int pe) { shmem_##N##_atomic_set(dest, value, pe); } \
    T shmem_##N##_swap(T *dest, T value, int pe) { return shmem_##N##_atomic_swap(dest, value, pe); } \
    T shmem_##N##_cswap(T *dest, T cond, T value, int pe)                                      \
    {                                                                                          \
        return shmem_##N##_atomic_compare_swap(dest, cond, value, pe);                         \
    }                                                                                          \
    T shmem_##N##_finc(T *dest, int pe) { return shmem_##N##_atomic_fetch_inc(dest, pe); }     \
    void shmem_##N##_inc(T *dest, int pe) { shmem_##N##_atomic_inc(dest, pe); }                \
    T shmem_##N##_fadd(T *dest, T value, int pe) { return shmem_##N##_atomic_fetch_add(dest, value, pe); } \
    void shmem_##N##_add(T *dest, T value, int pe) { shmem_##N##_atomic_add(dest, value, pe); }
SHMEM_DEPR_AMO_TYPE_TABLE(DEF_DEPR_AMO)

#define DEF_DEPR_EXT_AMO(T, N)                                                                 \
    T shmem_##N##_fetch(const T *source, int pe) { return shmem_##N##_atomic_fetch(source, pe); } \
    void shmem_##N##_set(T *dest, T value, int pe) { shmem_##N##_atomic_set(dest, value, pe); } \
    T shmem_##N##_swap(T *dest, T value, int pe) { return shmem_##N##_atomic_swap(dest, value, pe); }
DEF_DEPR_EXT_AMO(float, float)
DEF_DEPR_EXT_AMO(double, double)
