/* Symmetric global and static variables: initialised (.data) and zero (.bss) arrays, a static
 * inside a function and a global counter, used remotely by put/get/p/g, atomics,
 * put-with-signal, wait_until and collectives; shmem_addr_accessible and shmem_ptr on them;
 * and after shmem_finalize they are ordinary memory that keeps its values. */
#include <shmem.h>
#include <stdint.h>
#include <string.h>

#include "check.h"

#define N 64
#define BIG (3 * 4096 + 123) /* spans pages */

long data_arr[N] = { 1, 2, 3, 4, 5, 6, 7, 8 }; /* .data: the rest zero */
int data_int = 12345;
long bss_arr[N];
long counter;
unsigned char big[BIG];
uint64_t sig;
long flag;
long red_src[4], red_dst[4], bcast[N];
long fcol[2 * 8];

/* A static inside a function: the same object on every PE. */
static long *static_slot(void)
{
    static long slot[4];
    return slot;
}

static const char *not_in_range = "read-only data stays where it was";

int main(void)
{
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();
    int right = (me + 1) % n, left = (me + n - 1) % n;

    /* Start-up kept the initial values (and stdout, a COPY relocation, still works). */
    CHECK(data_arr[0] == 1 && data_arr[7] == 8 && data_arr[8] == 0, "data_arr initial values");
    CHECK(data_int == 12345, "data_int initial value %d", data_int);
    for (int i = 0; i < N; i++)
        CHECK(bss_arr[i] == 0, "bss_arr[%d] = %ld, not zero", i, bss_arr[i]);
    CHECK(strlen(not_in_range) > 0, "rodata");

    /* Accessibility. */
    long on_stack = 0;
    CHECK(shmem_addr_accessible(&counter, right), "global not accessible");
    CHECK(shmem_addr_accessible(&big[BIG - 1], left), "end of big not accessible");
    CHECK(shmem_addr_accessible(static_slot(), right), "function static not accessible");
    CHECK(!shmem_addr_accessible(&on_stack, right), "stack variable accessible");
    CHECK(!shmem_addr_accessible(not_in_range, right), "string literal accessible");
    CHECK(shmem_ptr(&counter, me) != NULL, "shmem_ptr to our own global is NULL");
    CHECK(*(int *)shmem_ptr(&data_int, me) == 12345, "shmem_ptr to our own global reads wrong");

    shmem_barrier_all(); /* nobody writes our globals before we checked them */

    /* put/get/p/g between neighbours. */
    long src[N];
    for (int i = 0; i < N; i++)
        src[i] = me * 1000 + i;
    shmem_long_put(bss_arr, src, N, right);
    shmem_int_p(&data_int, 100 + me, right);
    shmem_long_p(&static_slot()[me % 4], me + 7, right);
    unsigned char bsrc[BIG];
    for (int i = 0; i < BIG; i++)
        bsrc[i] = (unsigned char)(i * 7 + me);
    shmem_putmem(big, bsrc, BIG, right);
    shmem_barrier_all();
    for (int i = 0; i < N; i++)
        CHECK(bss_arr[i] == left * 1000 + i, "bss_arr[%d] = %ld after put", i, bss_arr[i]);
    CHECK(data_int == 100 + left, "data_int = %d after p", data_int);
    CHECK(static_slot()[left % 4] == left + 7, "static slot %ld", static_slot()[left % 4]);
    for (int i = 0; i < BIG; i++)
        CHECK(big[i] == (unsigned char)(i * 7 + left), "big[%d] after putmem", i);

    long got[N];
    shmem_long_get(got, data_arr, N, left); /* its .data initial values */
    CHECK(got[0] == 1 && got[7] == 8 && got[8] == 0, "get of data_arr");
    shmem_long_get(got, bss_arr, N, right); /* right holds what we put */
    for (int i = 0; i < N; i++)
        CHECK(got[i] == me * 1000 + i, "get bss_arr[%d] = %ld", i, got[i]);
    CHECK(shmem_int_g(&data_int, right) == 100 + me, "g of data_int");
    unsigned char bgot[BIG];
    shmem_getmem(bgot, big, BIG, right);
    CHECK(memcmp(bgot, bsrc, BIG) == 0, "getmem of big");
    shmem_barrier_all();

    /* Atomics on a global counter on PE 0 and on every PE. */
    for (int k = 0; k < 10; k++)
        shmem_long_atomic_inc(&counter, 0);
    long old = shmem_long_atomic_fetch_add(&counter, 2, right);
    CHECK(old >= 0 && old <= 10L * n, "fetch_add returned %ld", old);
    shmem_barrier_all();
    long want = 2 + (me == 0 ? 10L * n : 0);
    CHECK(counter == want, "counter %ld, expected %ld", counter, want);
    long c = shmem_long_atomic_compare_swap(&counter, want, -1, me);
    CHECK(c == want && counter == -1, "compare_swap on own global");
    shmem_barrier_all();
    shmem_long_atomic_set(&counter, 5, right);
    shmem_barrier_all();
    CHECK(shmem_long_atomic_fetch(&counter, me) == 5, "atomic set from left");

    /* Put-with-signal and wait_until on globals. */
    for (int i = 0; i < N; i++)
        src[i] = me * 7 + i * 3;
    shmem_long_put_signal(data_arr, src, N, &sig, 1, SHMEM_SIGNAL_ADD, right);
    shmem_signal_wait_until(&sig, SHMEM_CMP_EQ, 1);
    for (int i = 0; i < N; i++)
        CHECK(data_arr[i] == left * 7 + i * 3, "data_arr[%d] after put_signal", i);
    shmem_long_atomic_set(&flag, me + 1, right);
    shmem_long_wait_until(&flag, SHMEM_CMP_EQ, left + 1);
    shmem_barrier_all();

    /* Collectives with global source and destination. */
    for (int i = 0; i < 4; i++)
        red_src[i] = me + i;
    shmem_long_sum_reduce(SHMEM_TEAM_WORLD, red_dst, red_src, 4);
    for (int i = 0; i < 4; i++)
        CHECK(red_dst[i] == (long)n * (n - 1) / 2 + (long)n * i, "sum_reduce[%d] = %ld", i,
              red_dst[i]);
    int root = n - 1;
    if (me == root)
        for (int i = 0; i < N; i++)
            bcast[i] = 4242 + i;
    shmem_long_broadcast(SHMEM_TEAM_WORLD, bcast, bcast, N, root);
    for (int i = 0; i < N; i++)
        CHECK(bcast[i] == 4242 + i, "broadcast[%d] = %ld", i, bcast[i]);
    if (n <= 8) {
        long two[2] = { me, -me };
        static long mine[2];
        memcpy(mine, two, sizeof two);
        shmem_long_fcollect(SHMEM_TEAM_WORLD, fcol, mine, 2);
        for (int p = 0; p < n; p++)
            CHECK(fcol[2 * p] == p && fcol[2 * p + 1] == -p, "fcollect from %d", p);
    }

    /* shmem_ptr: non-NULL for every PE on this host (and reads what the PE holds). */
    shmem_team_t shared = SHMEM_TEAM_SHARED;
    int nshared = 0;
    for (int p = 0; p < n; p++) {
        if (shmem_team_translate_pe(SHMEM_TEAM_WORLD, p, shared) < 0)
            continue;
        nshared++;
        long *q = shmem_ptr(bcast, p);
        CHECK(q != NULL, "shmem_ptr to a global on same-host PE %d is NULL", p);
        CHECK(q[3] == 4242 + 3, "shmem_ptr(bcast, %d)[3] = %ld", p, q[3]);
        int *d = shmem_ptr(&data_int, p);
        CHECK(d && *d == 100 + (p + n - 1) % n, "shmem_ptr(&data_int, %d)", p);
    }
    CHECK(nshared >= 1, "SHMEM_TEAM_SHARED without this PE");
    shmem_barrier_all();

    data_int = 777 + me;
    static_slot()[0] = 31;
    shmem_finalize();

    /* Private memory again: values kept, still writable. */
    int ok = data_int == 777 + me && static_slot()[0] == 31 && bcast[N - 1] == 4242 + N - 1 &&
             red_dst[0] == (long)n * (n - 1) / 2 && big[BIG - 1] == (unsigned char)((BIG - 1) * 7 + left);
    data_int = -1;
    counter = 99;
    memset(big, 0xab, BIG);
    ok = ok && data_int == -1 && counter == 99 && big[100] == 0xab;
    if (!ok) {
        fprintf(stderr, "PE %d: globals lost their values or are not writable after "
                        "shmem_finalize\n", me);
        return 1;
    }
    if (me == 0)
        printf("globals: ok (%d PEs, %d on this host)\n", n, nshared);
    return 0;
}
