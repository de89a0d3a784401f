/* wait_until: a token goes round the ring of PEs (each waits for its flag, then sets the next
 * one's), several laps; then test() and the CMP operators on int and long long. */
#include <shmem.h>

#include "check.h"

#define LAPS 20

int main(void)
{
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();
    long *flag = shmem_calloc(1, sizeof(long));
    long *data = shmem_calloc(1, sizeof(long));
    int *iflag = shmem_calloc(1, sizeof(int));
    long long *llflag = shmem_calloc(1, sizeof(long long));
    int next = (me + 1) % n;
    for (long lap = 1; lap <= LAPS; lap++) {
        if (me == 0 && n > 1) {
            shmem_long_p(data, lap * 10, next);
            shmem_fence();
            shmem_long_p(flag, lap, next);
            shmem_long_wait_until(flag, SHMEM_CMP_EQ, lap);
            CHECK(*data == lap * 10 + n - 1, "lap %ld: data %ld", lap, *data);
        } else if (n > 1) {
            shmem_long_wait_until(flag, SHMEM_CMP_GE, lap);
            long v = *data;
            CHECK(v == lap * 10 + me - 1, "lap %ld: data %ld", lap, v);
            shmem_long_p(data, v + 1, next);
            shmem_fence();
            shmem_long_p(flag, lap, next);
        }
    }
    CHECK(shmem_int_test(iflag, SHMEM_CMP_EQ, 0), "test EQ");
    CHECK(!shmem_int_test(iflag, SHMEM_CMP_NE, 0), "test NE");
    shmem_barrier_all();
    shmem_int_atomic_set(iflag, 5, next);
    shmem_longlong_p(llflag, -3, next);
    shmem_int_wait_until(iflag, SHMEM_CMP_GT, 4);
    shmem_longlong_wait_until(llflag, SHMEM_CMP_LT, 0);
    shmem_wait_until(iflag, SHMEM_CMP_LE, 5);
    CHECK(shmem_longlong_test(llflag, SHMEM_CMP_LE, -3), "test LE");
    CHECK(shmem_test(iflag, SHMEM_CMP_GE, 5), "generic test GE");
    shmem_int_wait(iflag, 0);
    shmem_finalize();
    return 0;
}
