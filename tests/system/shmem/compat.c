/* Names older programs and tools use: the deprecated (1.3) C11 generic AMOs shmem_add, fadd,
 * inc, finc, cswap, swap, set, fetch on int, long, long long and their unsigned and
 * fixed-width spellings (and float/double for set/swap/fetch), totals exact under contention;
 * the typed 1.3 names (shmem_uint_add, ...) on the types added since; shmem_pcontrol at every
 * level. */
#include <shmem.h>
#include <stdint.h>

#include "check.h"

static int me, n;

#define STD_AMOS(T)                                                                            \
    do {                                                                                       \
        static T x, y, z;                                                                      \
        x = y = z = 0;                                                                         \
        shmem_barrier_all();                                                                   \
        for (int pe = 0; pe < n; pe++) {                                                       \
            shmem_add(&x, (T)(me + 1), pe);                                                    \
            T old = shmem_fadd(&x, (T)1, pe);                                                  \
            CHECK(old <= (T)(n * (n + 1) / 2 + n), #T " fadd old %lld", (long long)old);      \
            shmem_inc(&y, pe);                                                                 \
            shmem_finc(&y, pe);                                                                \
        }                                                                                      \
        shmem_barrier_all();                                                                   \
        CHECK(x == (T)(n * (n + 1) / 2 + n), #T " add total %lld", (long long)x);             \
        CHECK(y == (T)(2 * n), #T " inc total %lld", (long long)y);                            \
        /* one compare-swap winner on PE 0 */                                                  \
        T got = shmem_cswap(&z, (T)0, (T)(me + 1), 0);                                         \
        int won = got == 0;                                                                    \
        shmem_barrier_all();                                                                   \
        int *wins = shmem_calloc(1, sizeof(int));                                              \
        if (won)                                                                               \
            shmem_int_atomic_inc(wins, 0);                                                     \
        shmem_barrier_all();                                                                   \
        if (me == 0)                                                                           \
            CHECK(*wins == 1 && z >= 1 && z <= (T)n, #T " cswap: %d winners", *wins);          \
        shmem_free(wins);                                                                      \
    } while (0)

#define EXT_AMOS(T)                                                                            \
    do {                                                                                       \
        static T w;                                                                            \
        int right = (me + 1) % n;                                                              \
        shmem_set(&w, (T)(me + 10), right);                                                    \
        shmem_barrier_all();                                                                   \
        CHECK(shmem_fetch(&w, me) == (T)((me + n - 1) % n + 10), #T " set/fetch");             \
        shmem_barrier_all();                                                                   \
        T old = shmem_swap(&w, (T)(me + 20), right);                                           \
        CHECK(old == (T)(me + 10), #T " swap old");                                            \
        shmem_barrier_all();                                                                   \
        CHECK(w == (T)((me + n - 1) % n + 20), #T " swap");                                    \
        shmem_barrier_all();                                                                   \
    } while (0)

int main(void)
{
    shmem_init();
    me = shmem_my_pe(), n = shmem_n_pes();
    for (int level = 0; level <= 3; level++)
        shmem_pcontrol(level, "region");
    STD_AMOS(int);
    STD_AMOS(long);
    STD_AMOS(long long);
    STD_AMOS(unsigned int);
    STD_AMOS(unsigned long);
    STD_AMOS(unsigned long long);
    STD_AMOS(int32_t);
    STD_AMOS(uint64_t);
    STD_AMOS(size_t);
    STD_AMOS(ptrdiff_t);
    EXT_AMOS(float);
    EXT_AMOS(double);
    EXT_AMOS(int);
    EXT_AMOS(long long);
    EXT_AMOS(unsigned long);
    /* the 1.3 typed names on types 1.3 did not have */
    static unsigned int ui;
    static size_t sz;
    static uint64_t u64;
    static ptrdiff_t pd;
    static unsigned long ul;
    shmem_barrier_all();
    for (int pe = 0; pe < n; pe++) {
        shmem_uint_add(&ui, 2, pe);
        shmem_size_inc(&sz, pe);
        (void)shmem_ptrdiff_fadd(&pd, -1, pe);
        (void)shmem_uint64_finc(&u64, pe);
    }
    shmem_barrier_all();
    CHECK(ui == 2u * n && sz == (size_t)n && pd == -n && u64 == (uint64_t)n,
          "typed 1.3 names: %u %zu %td %llu", ui, sz, pd, (unsigned long long)u64);
    shmem_barrier_all();
    CHECK(shmem_uint64_cswap(&u64, (uint64_t)n, 7, (me + 1) % n) == (uint64_t)n,
          "uint64 cswap");
    shmem_ulong_set(&ul, 5, me);
    CHECK(shmem_ulong_swap(&ul, 6, me) == 5 && shmem_ulong_fetch(&ul, me) == 6, "ulong set/swap");
    shmem_barrier_all();
    shmem_pcontrol(1);
    if (me == 0)
        printf("compat: ok at %d PEs\n", n);
    shmem_finalize();
    return 0;
}
