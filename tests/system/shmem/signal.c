/* Put-with-signal: rounds of putmem_signal/TYPE_put_signal/put64_signal (SET and ADD, blocking
 * and nbi) to the right neighbour; the receiver waits on the signal and checks the data. */
#include <shmem.h>
#include <string.h>

#include "check.h"

#define ROUNDS 30
#define LEN 4096

int main(void)
{
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();
    int right = (me + 1) % n, left = (me + n - 1) % n;
    unsigned char *buf = shmem_calloc(ROUNDS, LEN);
    long *lbuf = shmem_calloc(ROUNDS, sizeof(long));
    uint64_t *sig = shmem_calloc(3, sizeof(uint64_t));
    unsigned char src[LEN];
    shmem_barrier_all();
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < LEN; i++)
            src[i] = (unsigned char)(i + r * 3 + me);
        if (r % 2)
            shmem_putmem_signal(buf + r * LEN, src, LEN, &sig[0], (uint64_t)r + 1,
                                SHMEM_SIGNAL_SET, right);
        else
            shmem_putmem_signal_nbi(buf + r * LEN, src, LEN, &sig[0], (uint64_t)r + 1,
                                    SHMEM_SIGNAL_SET, right);
        long v = me * 1000L + r;
        shmem_long_put_signal(&lbuf[r], &v, 1, &sig[1], 1, SHMEM_SIGNAL_ADD, right);
        uint64_t got = shmem_signal_wait_until(&sig[0], SHMEM_CMP_GE, (uint64_t)r + 1);
        CHECK(got >= (uint64_t)r + 1, "signal_wait_until returned %llu", (unsigned long long)got);
        for (int i = 0; i < LEN; i++)
            CHECK(buf[r * LEN + i] == (unsigned char)(i + r * 3 + left), "round %d byte %d", r, i);
        shmem_signal_wait_until(&sig[1], SHMEM_CMP_GE, (uint64_t)r + 1);
        CHECK(lbuf[r] == left * 1000L + r, "round %d long put_signal", r);
        shmem_barrier_all(); /* the next round's SET must not overtake this round's wait */
    }
    CHECK(shmem_signal_fetch(&sig[1]) == ROUNDS, "ADD total %llu",
          (unsigned long long)shmem_signal_fetch(&sig[1]));
    uint64_t pair[2] = { 0x1122334455667788ULL, (uint64_t)me };
    shmem_put64_signal_nbi(buf, pair, 2, &sig[2], 7, SHMEM_SIGNAL_ADD, right);
    shmem_int_put_signal_nbi((int *)(buf + 64), (int *)pair, 1, &sig[2], 5, SHMEM_SIGNAL_ADD,
                             right);
    CHECK(shmem_signal_wait_until(&sig[2], SHMEM_CMP_EQ, 12) == 12, "two ADDs");
    uint64_t back[2];
    memcpy(back, buf, sizeof back);
    CHECK(back[0] == 0x1122334455667788ULL && back[1] == (uint64_t)left, "put64_signal data");
    shmem_finalize();
    return 0;
}
