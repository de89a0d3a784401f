/*
 * Communication contexts. A context carries no resources: its quiet/fence are the PE's (which
 * wait for the PE's routed operations too, more than required), and one made from a team maps
 * the team-relative PE numbers its operations take to world PEs.
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "shmem.h"
#include "shmem_internal.h"

struct shm_ctx {
    shmem_team_t team;
    long options;
};

static struct shm_ctx default_ctx; /* team set on first use: SHMEM_TEAM_WORLD */
shmem_ctx_t SHMEM_CTX_DEFAULT = &default_ctx;

static int world_pe(const char *who, shmem_ctx_t ctx, int pe)
{
    if (ctx == SHMEM_CTX_INVALID)
        shm_fatal("%s: SHMEM_CTX_INVALID", who);
    if (ctx == &default_ctx || ctx->team == SHMEM_TEAM_WORLD)
        return pe;
    const struct shm_team *t = ctx->team;
    if (pe < 0 || pe >= t->n)
        shm_fatal("%s: PE %d is not in the context's team of %d", who, pe, t->n);
    return t->pes[pe];
}
#define WPE(name) world_pe(name, ctx, pe)

int shmem_team_create_ctx(shmem_team_t team, long options, shmem_ctx_t *ctx)
{
    shm_require_init("shmem_team_create_ctx");
    *ctx = SHMEM_CTX_INVALID;
    if (team == SHMEM_TEAM_INVALID || team->me < 0)
        return -1;
    struct shm_ctx *c = malloc(sizeof *c);
    if (!c)
        return -1;
    c->team = team;
    c->options = options;
    *ctx = c;
    return 0;
}

int shmem_ctx_create(long options, shmem_ctx_t *ctx)
{
    return shmem_team_create_ctx(SHMEM_TEAM_WORLD, options, ctx);
}

void shmem_ctx_destroy(shmem_ctx_t ctx)
{
    if (ctx == SHMEM_CTX_INVALID || ctx == &default_ctx)
        return;
    shm_quiet_all(); /* destroy quiets the context */
    free(ctx);
}

int shmem_ctx_get_team(shmem_ctx_t ctx, shmem_team_t *team)
{
    if (!team)
        return -1;
    if (ctx == SHMEM_CTX_INVALID) {
        *team = SHMEM_TEAM_INVALID;
        return -1;
    }
    *team = ctx == &default_ctx ? SHMEM_TEAM_WORLD : ctx->team;
    return 0;
}

void shmem_ctx_quiet(shmem_ctx_t ctx)
{
    (void)ctx;
    shmem_quiet();
}

void shmem_ctx_fence(shmem_ctx_t ctx)
{
    (void)ctx;
    shmem_fence();
}

void shmem_ctx_putmem(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe)
{
    shmem_putmem(dest, source, nelems, WPE("shmem_ctx_putmem"));
}
void shmem_ctx_getmem(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe)
{
    shmem_getmem(dest, source, nelems, WPE("shmem_ctx_getmem"));
}
void shmem_ctx_putmem_nbi(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems,
                          int pe)
{
    shmem_putmem_nbi(dest, source, nelems, WPE("shmem_ctx_putmem_nbi"));
}
void shmem_ctx_getmem_nbi(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems,
                          int pe)
{
    shmem_getmem_nbi(dest, source, nelems, WPE("shmem_ctx_getmem_nbi"));
}
void shmem_ctx_putmem_signal(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems,
                             uint64_t *sig_addr, uint64_t signal, int sig_op, int pe)
{
    shmem_putmem_signal(dest, source, nelems, sig_addr, signal, sig_op,
                        WPE("shmem_ctx_putmem_signal"));
}
void shmem_ctx_putmem_signal_nbi(shmem_ctx_t ctx, void *dest, const void *source,
                                 size_t nelems, uint64_t *sig_addr, uint64_t signal,
                                 int sig_op, int pe)
{
    shmem_putmem_signal_nbi(dest, source, nelems, sig_addr, signal, sig_op,
                            WPE("shmem_ctx_putmem_signal_nbi"));
}

#define DEF_CTX_RMA(T, N)                                                                      \
    void shmem_ctx_##N##_put(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems, int pe) \
    {                                                                                          \
        shmem_##N##_put(dest, source, nelems, WPE("shmem_ctx_" #N "_put"));                    \
    }                                                                                          \
    void shmem_ctx_##N##_get(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems, int pe) \
    {                                                                                          \
        shmem_##N##_get(dest, source, nelems, WPE("shmem_ctx_" #N "_get"));                    \
    }                                                                                          \
    void shmem_ctx_##N##_put_nbi(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems,     \
                                 int pe)                                                       \
    {                                                                                          \
        shmem_##N##_put_nbi(dest, source, nelems, WPE("shmem_ctx_" #N "_put_nbi"));            \
    }                                                                                          \
    void shmem_ctx_##N##_get_nbi(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems,     \
                                 int pe)                                                       \
    {                                                                                          \
        shmem_##N##_get_nbi(dest, source, nelems, WPE("shmem_ctx_" #N "_get_nbi"));            \
    }                                                                                          \
    void shmem_ctx_##N##_p(shmem_ctx_t ctx, T *dest, T value, int pe)                          \
    {                                                                                          \
        shmem_##N##_p(dest, value, WPE("shmem_ctx_" #N "_p"));                                 \
    }                                                                                          \
    T shmem_ctx_##N##_g(shmem_ctx_t ctx, const T *source, int pe)                              \
    {                                                                                          \
        return shmem_##N##_g(source, WPE("shmem_ctx_" #N "_g"));                               \
    }                                                                                          \
    void shmem_ctx_##N##_iput(shmem_ctx_t ctx, T *dest, const T *source, ptrdiff_t dst,        \
                              ptrdiff_t sst, size_t nelems, int pe)                            \
    {                                                                                          \
        shmem_##N##_iput(dest, source, dst, sst, nelems, WPE("shmem_ctx_" #N "_iput"));        \
    }                                                                                          \
    void shmem_ctx_##N##_iget(shmem_ctx_t ctx, T *dest, const T *source, ptrdiff_t dst,        \
                              ptrdiff_t sst, size_t nelems, int pe)                            \
    {                                                                                          \
        shmem_##N##_iget(dest, source, dst, sst, nelems, WPE("shmem_ctx_" #N "_iget"));        \
    }                                                                                          \
    void shmem_ctx_##N##_put_signal(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems,  \
                                    uint64_t *sig_addr, uint64_t signal, int sig_op, int pe)   \
    {                                                                                          \
        shmem_##N##_put_signal(dest, source, nelems, sig_addr, signal, sig_op,                 \
                               WPE("shmem_ctx_" #N "_put_signal"));                            \
    }                                                                                          \
    void shmem_ctx_##N##_put_signal_nbi(shmem_ctx_t ctx, T *dest, const T *source,             \
                                        size_t nelems, uint64_t *sig_addr, uint64_t signal,    \
                                        int sig_op, int pe)                                    \
    {                                                                                          \
        shmem_##N##_put_signal_nbi(dest, source, nelems, sig_addr, signal, sig_op,             \
                                   WPE("shmem_ctx_" #N "_put_signal_nbi"));                    \
    }
SHMEM_RMA_TYPE_TABLE(DEF_CTX_RMA)

#define DEF_CTX_SIZED(B)                                                                       \
    void shmem_ctx_put##B(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems,      \
                          int pe)                                                              \
    {                                                                                          \
        shmem_put##B(dest, source, nelems, WPE("shmem_ctx_put" #B));                           \
    }                                                                                          \
    void shmem_ctx_get##B(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems,      \
                          int pe)                                                              \
    {                                                                                          \
        shmem_get##B(dest, source, nelems, WPE("shmem_ctx_get" #B));                           \
    }                                                                                          \
    void shmem_ctx_put##B##_nbi(shmem_ctx_t ctx, void *dest, const void *source,               \
                                size_t nelems, int pe)                                         \
    {                                                                                          \
        shmem_put##B##_nbi(dest, source, nelems, WPE("shmem_ctx_put" #B "_nbi"));              \
    }                                                                                          \
    void shmem_ctx_get##B##_nbi(shmem_ctx_t ctx, void *dest, const void *source,               \
                                size_t nelems, int pe)                                         \
    {                                                                                          \
        shmem_get##B##_nbi(dest, source, nelems, WPE("shmem_ctx_get" #B "_nbi"));              \
    }                                                                                          \
    void shmem_ctx_iput##B(shmem_ctx_t ctx, void *dest, const void *source, ptrdiff_t dst,     \
                           ptrdiff_t sst, size_t nelems, int pe)                               \
    {                                                                                          \
        shmem_iput##B(dest, source, dst, sst, nelems, WPE("shmem_ctx_iput" #B));               \
    }                                                                                          \
    void shmem_ctx_iget##B(shmem_ctx_t ctx, void *dest, const void *source, ptrdiff_t dst,     \
                           ptrdiff_t sst, size_t nelems, int pe)                               \
    {                                                                                          \
        shmem_iget##B(dest, source, dst, sst, nelems, WPE("shmem_ctx_iget" #B));               \
    }
SHMEM_SIZED_TABLE(DEF_CTX_SIZED)

#define DEF_CTX_EXT_AMO(T, N)                                                                  \
    T shmem_ctx_##N##_atomic_fetch(shmem_ctx_t ctx, const T *source, int pe)                   \
    {                                                                                          \
        return shmem_##N##_atomic_fetch(source, WPE("shmem_ctx_" #N "_atomic_fetch"));         \
    }                                                                                          \
    void shmem_ctx_##N##_atomic_set(shmem_ctx_t ctx, T *dest, T value, int pe)                 \
    {                                                                                          \
        shmem_##N##_atomic_set(dest, value, WPE("shmem_ctx_" #N "_atomic_set"));               \
    }                                                                                          \
    T shmem_ctx_##N##_atomic_swap(shmem_ctx_t ctx, T *dest, T value, int pe)                   \
    {                                                                                          \
        return shmem_##N##_atomic_swap(dest, value, WPE("shmem_ctx_" #N "_atomic_swap"));      \
    }                                                                                          \
    void shmem_ctx_##N##_atomic_fetch_nbi(shmem_ctx_t ctx, T *fetch, const T *source, int pe)  \
    {                                                                                          \
        *fetch = shmem_##N##_atomic_fetch(source, WPE("shmem_ctx_" #N "_atomic_fetch_nbi"));   \
    }                                                                                          \
    void shmem_ctx_##N##_atomic_swap_nbi(shmem_ctx_t ctx, T *fetch, T *dest, T value, int pe)  \
    {                                                                                          \
        *fetch = shmem_##N##_atomic_swap(dest, value, WPE("shmem_ctx_" #N "_atomic_swap_nbi")); \
    }
SHMEM_EXT_AMO_TYPE_TABLE(DEF_CTX_EXT_AMO)

#define DEF_CTX_AMO(T, N)                                                                      \
    T shmem_ctx_##N##_atomic_compare_swap(shmem_ctx_t ctx, T *dest, T cond, T value, int pe)   \
    {                                                                                          \
        return shmem_##N##_atomic_compare_swap(dest, cond, value,                              \
                                               WPE("shmem_ctx_" #N "_atomic_compare_swap"));   \
    }                                                                                          \
    T shmem_ctx_##N##_atomic_fetch_inc(shmem_ctx_t ctx, T *dest, int pe)                       \
    {                                                                                          \
        return shmem_##N##_atomic_fetch_inc(dest, WPE("shmem_ctx_" #N "_atomic_fetch_inc"));   \
    }                                                                                          \
    void shmem_ctx_##N##_atomic_inc(shmem_ctx_t ctx, T *dest, int pe)                          \
    {                                                                                          \
        shmem_##N##_atomic_inc(dest, WPE("shmem_ctx_" #N "_atomic_inc"));                      \
    }                                                                                          \
    T shmem_ctx_##N##_atomic_fetch_add(shmem_ctx_t ctx, T *dest, T value, int pe)              \
    {                                                                                          \
        return shmem_##N##_atomic_fetch_add(dest, value,                                       \
                                            WPE("shmem_ctx_" #N "_atomic_fetch_add"));         \
    }                                                                                          \
    void shmem_ctx_##N##_atomic_add(shmem_ctx_t ctx, T *dest, T value, int pe)                 \
    {                                                                                          \
        shmem_##N##_atomic_add(dest, value, WPE("shmem_ctx_" #N "_atomic_add"));               \
    }                                                                                          \
    void shmem_ctx_##N##_atomic_compare_swap_nbi(shmem_ctx_t ctx, T *fetch, T *dest, T cond,   \
                                                 T value, int pe)                              \
    {                                                                                          \
        *fetch = shmem_##N##_atomic_compare_swap(                                              \
            dest, cond, value, WPE("shmem_ctx_" #N "_atomic_compare_swap_nbi"));               \
    }                                                                                          \
    void shmem_ctx_##N##_atomic_fetch_inc_nbi(shmem_ctx_t ctx, T *fetch, T *dest, int pe)      \
    {                                                                                          \
        *fetch =                                                                               \
            shmem_##N##_atomic_fetch_inc(dest, WPE("shmem_ctx_" #N "_atomic_fetch_inc_nbi"));  \
    }                                                                                          \
    void shmem_ctx_##N##_atomic_fetch_add_nbi(shmem_ctx_t ctx, T *fetch, T *dest, T value,     \
                                              int pe)                                          \
    {                                                                                          \
        *fetch = shmem_##N##_atomic_fetch_add(dest, value,                                     \
                                              WPE("shmem_ctx_" #N "_atomic_fetch_add_nbi"));   \
    }
SHMEM_AMO_TYPE_TABLE(DEF_CTX_AMO)

#define DEF_CTX_BIT_OP(T, N, OP)                                                               \
    T shmem_ctx_##N##_atomic_fetch_##OP(shmem_ctx_t ctx, T *dest, T value, int pe)             \
    {                                                                                          \
        return shmem_##N##_atomic_fetch_##OP(dest, value,                                      \
                                             WPE("shmem_ctx_" #N "_atomic_fetch_" #OP));       \
    }                                                                                          \
    void shmem_ctx_##N##_atomic_##OP(shmem_ctx_t ctx, T *dest, T value, int pe)                \
    {                                                                                          \
        shmem_##N##_atomic_##OP(dest, value, WPE("shmem_ctx_" #N "_atomic_" #OP));             \
    }                                                                                          \
    void shmem_ctx_##N##_atomic_fetch_##OP##_nbi(shmem_ctx_t ctx, T *fetch, T *dest, T value,  \
                                                 int pe)                                       \
    {                                                                                          \
        *fetch = shmem_##N##_atomic_fetch_##OP(                                                \
            dest, value, WPE("shmem_ctx_" #N "_atomic_fetch_" #OP "_nbi"));                    \
    }
#define DEF_CTX_BIT_AMO(T, N) DEF_CTX_BIT_OP(T, N, and) DEF_CTX_BIT_OP(T, N, or) DEF_CTX_BIT_OP(T, N, xor)
SHMEM_BITWISE_AMO_TYPE_TABLE(DEF_CTX_BIT_AMO)
