/*
 * Thread levels (1.5 §9.2). Every operation is a store, a load or a CPU atomic on a mapped
 * heap, or a team sync, so any thread may call the library at any time (collectives on one
 * team still in the same order on every PE, as the spec requires): the level provided is
 * SHMEM_THREAD_MULTIPLE whatever is requested.
 */
#include "shmem.h"

static int level = SHMEM_THREAD_MULTIPLE; /* also what a program started by shmem_init gets */

int shmem_init_thread(int requested, int *provided)
{
    (void)requested;
    shmem_init(); /* stops the PE with a message if it cannot initialise */
    level = SHMEM_THREAD_MULTIPLE;
    if (provided)
        *provided = level;
    return 0;
}

void shmem_query_thread(int *provided)
{
    if (provided)
        *provided = level;
}
