/* shmem_quiet with other threads putting: a quiet must wait for the puts issued before it,
 * even while other threads' later puts are acknowledged sooner. Run on a ring with
 * SHMEM_RELAY_SLOW_PE=S (the nodes hold every routed put to PE S for 2 ms): PE 0's main
 * thread puts x = i to S (routed), quiets, and then sets `flag` = i on a PE C that maps S;
 * meanwhile a second thread of PE 0 puts without pause to another routed PE. C checks that x
 * on S is at least the flag it sees: a quiet that counted the other thread's
 * acknowledgements for its own put returned 2 ms early. */
#include <pthread.h>
#include <shmem.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

#define ITERS 20

static long x, flag, sink;
static int maps_slow, checker = -1; /* symmetric: gathered and broadcast */
static atomic_int stop;
static int fast_pe;

static void *putter(void *arg)
{
    (void)arg;
    for (long v = 0; !atomic_load(&stop); v++)
        shmem_long_p(&sink, v, fast_pe);
    return NULL;
}

int main(void)
{
    int provided;
    CHECK(shmem_init_thread(SHMEM_THREAD_MULTIPLE, &provided) == 0, "shmem_init_thread");
    int me = shmem_my_pe(), npes = shmem_n_pes();
    const char *s = getenv("SHMEM_RELAY_SLOW_PE");
    CHECK(s, "run with SHMEM_RELAY_SLOW_PE set (a PE that PE 0 reaches through the nodes)");
    int slow = atoi(s);
    fast_pe = -1;
    /* From PE 0: the slow PE and another one are routed; the checker is mapped by PE 0 and
     * maps the slow PE. Every PE works this out alike. */
    int *maps = shmem_calloc((size_t)npes, sizeof *maps);
    CHECK(maps, "a table of %d ints", npes);
    maps_slow = shmem_ptr(&x, slow) != NULL;
    shmem_barrier_all();
    for (int pe = 0; pe < npes; pe++)
        shmem_int_get(&maps[pe], &maps_slow, 1, pe);
    if (me == 0) {
        CHECK(slow > 0 && slow < npes && !shmem_ptr(&x, slow), "PE %d is not routed from PE 0", slow);
        for (int pe = 1; pe < npes; pe++) {
            if (pe != slow && !shmem_ptr(&x, pe) && fast_pe < 0)
                fast_pe = pe;
            if (shmem_ptr(&flag, pe) && maps[pe] && checker < 0)
                checker = pe;
        }
        CHECK(fast_pe > 0 && checker > 0, "no second routed PE (%d) or no checker (%d)", fast_pe, checker);
    }
    shmem_int_broadcast(SHMEM_TEAM_WORLD, &checker, &checker, 1, 0);
    shmem_barrier_all();

    if (me == 0) {
        pthread_t t;
        CHECK(pthread_create(&t, NULL, putter, NULL) == 0, "thread");
        for (long i = 1; i <= ITERS; i++) {
            shmem_long_p(&x, i, slow);
            shmem_quiet();
            shmem_long_atomic_set(&flag, i, checker);
        }
        atomic_store(&stop, 1);
        pthread_join(t, NULL);
    } else if (me == checker) {
        for (long i = 1; i <= ITERS;) {
            shmem_long_wait_until(&flag, SHMEM_CMP_GE, i);
            long f = shmem_long_atomic_fetch(&flag, me);
            long v = shmem_long_g(&x, slow); /* a load: this PE maps the slow one */
            CHECK(v >= f, "x on PE %d is %ld after PE 0's quiet for x = %ld", slow, v, f);
            i = f + 1;
        }
    }
    shmem_barrier_all();
    shmem_free(maps);
    if (me == 0)
        printf("quietmt: ok at %d PEs (slow PE %d)\n", npes, slow);
    shmem_finalize();
    return 0;
}
