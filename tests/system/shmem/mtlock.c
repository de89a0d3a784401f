/* Locks and quiet with several threads per PE (SHMEM_THREAD_MULTIPLE): THREADS threads of
 * every PE take the lock of every PE in turn, ROUNDS times, and increment a counter on that PE
 * with a get and a put inside the lock, so no increment may be lost. On a ring most of the
 * puts are routed and are complete only when their acknowledgement is back: shmem_clear_lock
 * quiets first, and a quiet must wait for this thread's put even while other threads send
 * puts whose acknowledgements come back sooner (tests-sos's mt_lock_test lost one that way).
 * Between locks every thread also puts to the PE two on, whose acknowledgements come back
 * soonest. OpenSHMEM locks are held by PEs, not threads: a mutex per lock keeps the threads
 * of a PE from holding one at once. */
#include <pthread.h>
#include <shmem.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

#define THREADS 4
#define ROUNDS 25

static long counter;
static long scratch[THREADS];
static long *locks;
static pthread_mutex_t *guards;
static int me, npes;

static void *worker(void *arg)
{
    int t = (int)(long)arg;
    for (int r = 0; r < ROUNDS; r++)
        for (int i = 0; i < npes; i++) {
            int pe = i; /* every thread after the same lock: one releases, the next quiets */
            pthread_mutex_lock(&guards[pe]);
            if ((r + me) % 2) {
                shmem_set_lock(&locks[pe]);
            } else {
                while (shmem_test_lock(&locks[pe]))
                    ;
            }
            long v = shmem_long_g(&counter, pe);
            shmem_long_p(&counter, v + 1, pe);
            shmem_clear_lock(&locks[pe]);
            pthread_mutex_unlock(&guards[pe]);
            /* Puts two PEs on (on a ring the nearest routed one), whose acknowledgements come
             * back sooner than those from farther away, while other threads quiet. */
            for (int k = 0; k < 8; k++)
                shmem_long_p(&scratch[t], r, (me + 2) % npes);
        }
    return NULL;
}

int main(void)
{
    int provided;
    CHECK(shmem_init_thread(SHMEM_THREAD_MULTIPLE, &provided) == 0, "shmem_init_thread");
    CHECK(provided == SHMEM_THREAD_MULTIPLE, "provided %d", provided);
    me = shmem_my_pe();
    npes = shmem_n_pes();
    locks = shmem_calloc((size_t)npes, sizeof *locks);
    guards = malloc((size_t)npes * sizeof *guards);
    CHECK(locks && guards, "locks for %d PEs", npes);
    for (int i = 0; i < npes; i++)
        pthread_mutex_init(&guards[i], NULL);
    shmem_barrier_all();
    pthread_t tid[THREADS];
    for (long t = 0; t < THREADS; t++)
        CHECK(pthread_create(&tid[t], NULL, worker, (void *)t) == 0, "thread %ld", t);
    for (int t = 0; t < THREADS; t++)
        pthread_join(tid[t], NULL);
    shmem_barrier_all();
    CHECK(counter == (long)npes * THREADS * ROUNDS, "counter %ld, want %ld", counter,
          (long)npes * THREADS * ROUNDS);
    shmem_free(locks);
    free(guards);
    if (me == 0)
        printf("mtlock: ok at %d PEs\n", npes);
    shmem_finalize();
    return 0;
}
