// C++: shmem.h and pshmem.h compile as C++ (built with oshc++, warnings as errors) and the C++
// forms work:
// shmem_sync(team) as an overload next to the active-set shmem_sync, typed RMA and AMOs, a
// team split and a typed reduction, test_any.
#include <pshmem.h>
#include <shmem.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(cond, what)                                                                      \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            std::fprintf(stderr, "PE %d: %s:%d: %s\n", shmem_my_pe(), __FILE__, __LINE__, what); \
            std::exit(1);                                                                      \
        }                                                                                      \
    } while (0)

static long psync[SHMEM_BARRIER_SYNC_SIZE];

int main()
{
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes(), right = (me + 1) % n, left = (me + n - 1) % n;
    for (int i = 0; i < SHMEM_BARRIER_SYNC_SIZE; i++)
        psync[i] = SHMEM_SYNC_VALUE;
    long *v = static_cast<long *>(shmem_calloc(n, sizeof(long)));
    shmem_long_p(&v[me], me + 100, right);
    shmem_quiet();
    CHECK(shmem_sync(SHMEM_TEAM_WORLD) == 0, "shmem_sync(team)");
    CHECK(v[left] == left + 100, "put before shmem_sync(team)");
    shmem_sync(0, 0, n, psync);
    shmem_long_atomic_add(&v[0], 1, 0);
    shmem_barrier_all();
    if (me == 0)
        CHECK(v[0] == n + (n == 1 ? 100 : 0), "atomic total");
    shmem_team_t even;
    int ne = (n + 1) / 2;
    CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, ne, NULL, 0, &even) == 0, "split");
    if (even != SHMEM_TEAM_INVALID) {
        CHECK(shmem_sync(even) == 0, "shmem_sync(even)");
        static int src[4], dst[4];
        for (int i = 0; i < 4; i++)
            src[i] = me + i;
        CHECK(shmem_int_sum_reduce(even, dst, src, 4) == 0, "sum_reduce");
        for (int i = 0; i < 4; i++)
            CHECK(dst[i] == ne * (ne - 1) + ne * i, "sum_reduce value");
    }
    shmem_team_destroy(even);
    pshmem_barrier_all(); // the profiling name of shmem_barrier_all
    size_t a = shmem_long_test_any(v, 1, NULL, SHMEM_CMP_GE, 0);
    CHECK(a == 0, "test_any");
    shmem_barrier_all();
    shmem_free(v);
    if (me == 0)
        std::printf("cxx: ok at %d PEs\n", n);
    shmem_finalize();
    return 0;
}
