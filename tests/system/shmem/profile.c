/* The profiling interface: pshmem.h declares every routine as pshmem_NAME, and a tool that
 * defines shmem_NAME in the program (here shmem_long_put and shmem_barrier_all, counting
 * calls) intercepts the program's calls and reaches the library through pshmem_NAME; the
 * data still arrives and the barrier still synchronises. shmem_pcontrol switches the
 * counting, as a tool would. */
#include <pshmem.h>

#include "check.h"

static int counting = 1;
static long puts_seen, barriers_seen;

void shmem_long_put(long *dest, const long *source, size_t nelems, int pe)
{
    puts_seen += counting;
    pshmem_long_put(dest, source, nelems, pe);
}

void shmem_barrier_all(void)
{
    barriers_seen += counting;
    pshmem_barrier_all();
}

int main(void)
{
    pshmem_init();
    int me = shmem_my_pe(), n = pshmem_n_pes(), right = (me + 1) % n, left = (me + n - 1) % n;
    long *x = shmem_calloc(8, sizeof(long));
    long v[8];
    for (int r = 1; r <= 3; r++) {
        for (int i = 0; i < 8; i++)
            v[i] = r * 1000 + me * 10 + i;
        shmem_long_put(x, v, 8, right);
        shmem_barrier_all();
        for (int i = 0; i < 8; i++)
            CHECK(x[i] == r * 1000 + left * 10 + i, "round %d: x[%d] = %ld", r, i, x[i]);
        shmem_barrier_all();
    }
    CHECK(puts_seen == 3 && barriers_seen == 6, "seen %ld puts, %ld barriers", puts_seen,
          barriers_seen);
    shmem_pcontrol(0); /* a tool would stop here; the wrappers above ask nobody */
    counting = 0;
    shmem_barrier_all();
    pshmem_pcontrol(1);
    CHECK(barriers_seen == 6, "counted while off");
    pshmem_free(x);
    if (me == 0)
        printf("profile: ok at %d PEs\n", n);
    pshmem_finalize();
    return 0;
}
