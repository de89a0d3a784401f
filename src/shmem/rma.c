/*
 * RMA and atomics. Every PE's heap is mapped here, so a put is a memcpy into PE pe's heap at
 * the object's offset and a get the reverse; through an NTB window these are posted writes and
 * non-posted reads with no software in between. Blocking and _nbi forms are the same here:
 * a store through the window has left this PE when the copy returns.
 *
 * Atomics are C11 atomics on the mapped remote word: on the fabric they are what PCIe
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
    }
SHMEM_RMA_TYPE_TABLE(DEF_RMA)

#define AT(T, who, p, pe) ((_Atomic T *)remote(who, p, pe))

#define DEF_AMO(T, N)                                                                          \
    T shmem_##N##_atomic_fetch(const T *source, int pe)                                        \
    {                                                                                          \
        return atomic_load(AT(T, "shmem_" #N "_atomic_fetch", source, pe));                    \
    }                                                                                          \
    void shmem_##N##_atomic_set(T *dest, T value, int pe)                                      \
    {                                                                                          \
        atomic_store(AT(T, "shmem_" #N "_atomic_set", dest, pe), value);                       \
    }                                                                                          \
    T shmem_##N##_atomic_swap(T *dest, T value, int pe)                                        \
    {                                                                                          \
        return atomic_exchange(AT(T, "shmem_" #N "_atomic_swap", dest, pe), value);            \
    }                                                                                          \
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
SHMEM_AMO_TYPE_TABLE(DEF_AMO)
