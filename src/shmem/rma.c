/*
 * RMA and atomics, through the transport (xport.c). To a PE whose heap is mapped here a put is
 * a memcpy into its heap at the object's offset and a get the reverse: through an NTB window
 * these are posted writes and non-posted reads with no software in between, complete when the
 * copy returns. To a PE across a switchless ring they are messages forwarded by the nodes in
 * between; shmem_quiet waits for their acknowledgements. The _nbi forms are the blocking ones.
 *
 * iput/iget copy element by element; put-with-signal is the data, then an atomic store or add
 * on the signal word that wakes the PE waiting for it.
 *
 * Atomics on a mapped word are C11 atomics on it, what PCIe AtomicOps (FetchAdd, Swap, CAS)
 * through the NTB do at the owner's memory; otherwise (or with SHMEM_ATOMICS=software) the
 * target host's node does them. Either way they progress without the target making any call;
 * float and double travel as their bit patterns.
 */
#include <stdatomic.h>
#include <string.h>

#include "shmem.h"
#include "shmem_internal.h"

#define OFF(who, addr, pe) shm_off(who, addr, pe)

void shmem_putmem(void *dest, const void *source, size_t nelems, int pe)
{
    if (nelems)
        shm_put(pe, OFF("shmem_putmem", dest, pe), source, nelems);
}

void shmem_getmem(void *dest, const void *source, size_t nelems, int pe)
{
    if (nelems)
        shm_get(pe, dest, OFF("shmem_getmem", source, pe), nelems);
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
    if (!nelems)
        return;
    size_t off = OFF(who, dest, pe);
    char *d = shm_direct(pe, off);
    if (d) {
        strided(d, source, dst, sst, nelems, es);
        return;
    }
    for (size_t i = 0; i < nelems; i++)
        shm_put(pe, off + (size_t)((ptrdiff_t)i * dst * (ptrdiff_t)es),
                (const char *)source + (ptrdiff_t)i * sst * (ptrdiff_t)es, es);
}

static void iget(const char *who, void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst,
                 size_t nelems, size_t es, int pe)
{
    if (!nelems)
        return;
    size_t off = OFF(who, source, pe);
    const char *s = shm_direct(pe, off);
    if (s) {
        strided(dest, s, dst, sst, nelems, es);
        return;
    }
    for (size_t i = 0; i < nelems; i++)
        shm_get(pe, (char *)dest + (ptrdiff_t)i * dst * (ptrdiff_t)es,
                off + (size_t)((ptrdiff_t)i * sst * (ptrdiff_t)es), es);
}

/* Put with signal: the data, a store fence (so the signal cannot overtake it), then the signal
 * word updated atomically at the target. */
static void put_signal(const char *who, void *dest, const void *source, size_t bytes,
                       uint64_t *sig_addr, uint64_t signal, int sig_op, int pe)
{
    if (sig_op != SHMEM_SIGNAL_SET && sig_op != SHMEM_SIGNAL_ADD)
        shm_fatal("%s: sig_op %d is neither SHMEM_SIGNAL_SET nor SHMEM_SIGNAL_ADD", who, sig_op);
    size_t soff = OFF(who, sig_addr, pe);
    if (bytes)
        shm_put(pe, OFF(who, dest, pe), source, bytes);
    /* Directly: a store fence so the signal cannot overtake the data. Routed: the signal
     * travels behind the data in the same ring. */
    atomic_thread_fence(memory_order_seq_cst);
    shm_amo(pe, soff, (sig_op == SHMEM_SIGNAL_SET ? SHM_AMO_SET : SHM_AMO_ADD) | SHM_AMO_WAKE, 8,
            signal, 0);
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
            shm_put(pe, OFF("shmem_" #N "_put", dest, pe), source, nelems * sizeof(T));        \
    }                                                                                          \
    void shmem_##N##_get(T *dest, const T *source, size_t nelems, int pe)                      \
    {                                                                                          \
        if (nelems)                                                                            \
            shm_get(pe, dest, OFF("shmem_" #N "_get", source, pe), nelems * sizeof(T));        \
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
        shm_put(pe, OFF("shmem_" #N "_p", dest, pe), &value, sizeof(T));                       \
    }                                                                                          \
    T shmem_##N##_g(const T *source, int pe)                                                   \
    {                                                                                          \
        T v;                                                                                   \
        shm_get(pe, &v, OFF("shmem_" #N "_g", source, pe), sizeof(T));                         \
        return v;                                                                              \
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
            shm_put(pe, OFF("shmem_put" #B, dest, pe), source, nelems * (B / 8));              \
    }                                                                                          \
    void shmem_get##B(void *dest, const void *source, size_t nelems, int pe)                   \
    {                                                                                          \
        if (nelems)                                                                            \
            shm_get(pe, dest, OFF("shmem_get" #B, source, pe), nelems * (B / 8));              \
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

/* An AMO on a T of 4 or 8 bytes through the transport: in place on a mapped word (PCIe
 * AtomicOps through the NTB), else by the target host's node. Values travel as bit patterns. */
#define BITS(T, x) ({ T x_ = (x); uint64_t b_ = 0; memcpy(&b_, &x_, sizeof(T)); b_; })
#define FROM_BITS(T, b) ({ uint64_t b2_ = (b); T v_; memcpy(&v_, &b2_, sizeof(T)); v_; })
#define AMO(T, who, addr, pe, op, v, c)                                                        \
    FROM_BITS(T, shm_amo(pe, OFF(who, addr, pe), op, sizeof(T), BITS(T, v), BITS(T, c)))

#define DEF_EXT_AMO(T, N)                                                                      \
    T shmem_##N##_atomic_fetch(const T *source, int pe)                                        \
    {                                                                                          \
        return AMO(T, "shmem_" #N "_atomic_fetch", source, pe, SHM_AMO_FETCH, (T)0, (T)0);     \
    }                                                                                          \
    void shmem_##N##_atomic_set(T *dest, T value, int pe)                                      \
    {                                                                                          \
        (void)AMO(T, "shmem_" #N "_atomic_set", dest, pe, SHM_AMO_SET, value, (T)0);           \
    }                                                                                          \
    T shmem_##N##_atomic_swap(T *dest, T value, int pe)                                        \
    {                                                                                          \
        return AMO(T, "shmem_" #N "_atomic_swap", dest, pe, SHM_AMO_SWAP, value, (T)0);        \
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
        return AMO(T, "shmem_" #N "_atomic_compare_swap", dest, pe, SHM_AMO_CSWAP, value, cond); \
    }                                                                                          \
    T shmem_##N##_atomic_fetch_add(T *dest, T value, int pe)                                   \
    {                                                                                          \
        return AMO(T, "shmem_" #N "_atomic_fetch_add", dest, pe, SHM_AMO_ADD, value, (T)0);    \
    }                                                                                          \
    void shmem_##N##_atomic_add(T *dest, T value, int pe)                                      \
    {                                                                                          \
        (void)AMO(T, "shmem_" #N "_atomic_add", dest, pe, SHM_AMO_ADD, value, (T)0);           \
    }                                                                                          \
    T shmem_##N##_atomic_fetch_inc(T *dest, int pe)                                            \
    {                                                                                          \
        return AMO(T, "shmem_" #N "_atomic_fetch_inc", dest, pe, SHM_AMO_ADD, (T)1, (T)0);     \
    }                                                                                          \
    void shmem_##N##_atomic_inc(T *dest, int pe)                                               \
    {                                                                                          \
        (void)AMO(T, "shmem_" #N "_atomic_inc", dest, pe, SHM_AMO_ADD, (T)1, (T)0);            \
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

#define DEF_BIT_OP(T, N, OP, CODE)                                                             \
    T shmem_##N##_atomic_fetch_##OP(T *dest, T value, int pe)                                  \
    {                                                                                          \
        return AMO(T, "shmem_" #N "_atomic_fetch_" #OP, dest, pe, CODE, value, (T)0);          \
    }                                                                                          \
    void shmem_##N##_atomic_##OP(T *dest, T value, int pe)                                     \
    {                                                                                          \
        (void)AMO(T, "shmem_" #N "_atomic_" #OP, dest, pe, CODE, value, (T)0);                 \
    }                                                                                          \
    void shmem_##N##_atomic_fetch_##OP##_nbi(T *fetch, T *dest, T value, int pe)              \
    {                                                                                          \
        *fetch = shmem_##N##_atomic_fetch_##OP(dest, value, pe);                               \
    }
#define DEF_BIT_AMO(T, N)                                                                      \
    DEF_BIT_OP(T, N, and, SHM_AMO_AND) DEF_BIT_OP(T, N, or, SHM_AMO_OR)                        \
    DEF_BIT_OP(T, N, xor, SHM_AMO_XOR)
SHMEM_BITWISE_AMO_TYPE_TABLE(DEF_BIT_AMO)

/* The 1.3 names, on every type of the 1.4 routines they became (as other implementations
 * provide them): fetch/set/swap on the extended AMO types, the rest on the standard ones. */
#define DEF_DEPR_EXT_AMO(T, N)                                                                 \
    T shmem_##N##_fetch(const T *source, int pe) { return shmem_##N##_atomic_fetch(source, pe); } \
    void shmem_##N##_set(T *dest, T value, int pe) { shmem_##N##_atomic_set(dest, value, pe); } \
    T shmem_##N##_swap(T *dest, T value, int pe) { return shmem_##N##_atomic_swap(dest, value, pe); }
SHMEM_EXT_AMO_TYPE_TABLE(DEF_DEPR_EXT_AMO)

#define DEF_DEPR_AMO(T, N)                                                                     \
    T shmem_##N##_cswap(T *dest, T cond, T value, int pe)                                      \
    {                                                                                          \
        return shmem_##N##_atomic_compare_swap(dest, cond, value, pe);                         \
    }                                                                                          \
    T shmem_##N##_finc(T *dest, int pe) { return shmem_##N##_atomic_fetch_inc(dest, pe); }     \
    void shmem_##N##_inc(T *dest, int pe) { shmem_##N##_atomic_inc(dest, pe); }                \
    T shmem_##N##_fadd(T *dest, T value, int pe) { return shmem_##N##_atomic_fetch_add(dest, value, pe); } \
    void shmem_##N##_add(T *dest, T value, int pe) { shmem_##N##_atomic_add(dest, value, pe); }
SHMEM_AMO_TYPE_TABLE(DEF_DEPR_AMO)
