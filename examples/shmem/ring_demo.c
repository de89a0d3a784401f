/*
 * ring_demo: an ordinary OpenSHMEM program, run by scripts/demo.sh on the five-host switchless
 * ring (examples/topologies/ring5.ini). Every PE greets the PE farthest from it, counts itself
 * in with an atomic on PE 0, sends a token once round the ring of PEs, and takes part in a sum
 * reduction. PEs that are not neighbours reach each other through the hosts in between; the
 * program does not know or care. Build: oshcc -o ring_demo ring_demo.c
 */
#include <shmem.h>
#include <stdio.h>
#include <string.h>

static char greeting[64]; /* a symmetric global: other PEs write it */
static long counter;      /* on PE 0: every PE adds 1 */

int main(void)
{
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();
    int far = (me + n / 2) % n;
    long *token = shmem_calloc(1, sizeof *token);
    long *sum = shmem_malloc(sizeof *sum), *mine = shmem_malloc(sizeof *mine);

    char msg[64];
    snprintf(msg, sizeof msg, "hello from PE %d", me);
    shmem_putmem(greeting, msg, sizeof msg, far); /* into the far PE's global */
    shmem_long_atomic_add(&counter, 1, 0);
    shmem_barrier_all();

    /* The token goes 0 -> 1 -> ... -> n-1 -> 0, each PE adding its number. */
    if (me == 0)
        shmem_long_p(token, 1, 1 % n);
    shmem_long_wait_until(token, SHMEM_CMP_NE, 0);
    if (me != 0)
        shmem_long_p(token, *token + me + 1, (me + 1) % n);
    shmem_barrier_all();

    *mine = me;
    shmem_long_sum_reduce(SHMEM_TEAM_WORLD, sum, mine, 1);
    int from = (me - n / 2 + n) % n;
    printf("PE %d of %d: \"%s\" (from PE %d, %s)\n", me, n, greeting, from,
           shmem_ptr(greeting, from) ? "a neighbour: its stores came through one NTB link"
                                     : "not a neighbour: forwarded by the hosts between us");
    shmem_barrier_all();
    if (me == 0)
        printf("PE 0: counter %ld (expected %d), token back with %ld (expected %d), sum of PE "
               "numbers %ld (expected %d)\n", counter, n, *token, n * (n + 1) / 2, *sum,
               n * (n - 1) / 2);
    int ok = counter == n && *token == n * (n + 1) / 2 && *sum == n * (n - 1) / 2;
    shmem_barrier_all();
    shmem_finalize();
    return me == 0 && !ok;
}
