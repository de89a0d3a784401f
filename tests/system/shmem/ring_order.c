/* Ordering to a far PE. Every PE sends to partner (me + n/2) % n — on ring5 round-robin a PE
 * two hops away for every PE at 4 and 5 PEs, and for most at 3 PEs on a,c,e and 10 at 2 per
 * host — and receives from (me - n/2) % n, all at once:
 * 1. rounds of NSMALL shmem_int_p of increasing values to one word, shmem_fence, then a flag
 *    (a put in even rounds, an atomic set in odd ones): when the receiver sees the flag the
 *    word must hold the last value;
 * 2. a large putmem (many chunks), shmem_fence, a flag put: every byte must be there;
 * 3. put-with-signal of a large buffer (SET and ADD, blocking and nbi): when the signal
 *    arrives the whole buffer must be there. The receiver acknowledges each round with an
 *    atomic add on the sender, which waits for it before reusing the buffer. */
#include <shmem.h>
#include <stdlib.h>

#include "check.h"

#define NSMALL 300
#define ROUNDS 4
#define BIG (1u << 20)
#define SROUNDS 6

static unsigned char pat(size_t i, int r, int pe) { return (unsigned char)((i >> 3) ^ i ^ (r * 17 + pe * 5 + 1)); }

int main(void)
{
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();
    int to = (me + n / 2) % n, from = (me - n / 2 + n) % n;
    int *word = shmem_calloc(ROUNDS, sizeof(int));
    int *flag = shmem_calloc(1, sizeof(int));
    unsigned char *big = shmem_calloc(BIG, 1);
    uint64_t *sig = shmem_calloc(2, sizeof(uint64_t));
    long *ack = shmem_calloc(1, sizeof(long));
    unsigned char *src = malloc(BIG);
    CHECK(word && flag && big && sig && ack && src, "out of memory");
    shmem_barrier_all();

    /* 1: small puts, fence, flag. */
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 1; i <= NSMALL; i++)
            shmem_int_p(&word[r], r * NSMALL + i, to);
        shmem_fence();
        if (r % 2)
            shmem_int_atomic_set(flag, r + 1, to);
        else
            shmem_int_p(flag, r + 1, to);
        shmem_int_wait_until(flag, SHMEM_CMP_GE, r + 1);
        CHECK(word[r] == (r + 1) * NSMALL, "round %d: after the flag the word from PE %d is %d, "
              "expected its last put %d", r, from, word[r], (r + 1) * NSMALL);
    }
    shmem_barrier_all();

    /* 2: a large put, fence, flag put. */
    for (size_t i = 0; i < BIG; i++)
        src[i] = pat(i, 99, me);
    shmem_putmem(big, src, BIG, to);
    shmem_fence();
    shmem_int_p(flag, ROUNDS + 1, to);
    shmem_int_wait_until(flag, SHMEM_CMP_GE, ROUNDS + 1);
    for (size_t i = 0; i < BIG; i++)
        CHECK(big[i] == pat(i, 99, from), "large put then fence then flag: byte %zu from PE %d "
              "is %#x, expected %#x", i, from, big[i], pat(i, 99, from));
    shmem_barrier_all();

    /* 3: put-with-signal of a large buffer. */
    for (int r = 0; r < SROUNDS; r++) {
        for (size_t i = 0; i < BIG; i++)
            src[i] = pat(i, r, me);
        switch (r % 3) {
        case 0: shmem_putmem_signal(big, src, BIG, &sig[0], (uint64_t)r + 1, SHMEM_SIGNAL_SET, to); break;
        case 1: shmem_putmem_signal_nbi(big, src, BIG, &sig[0], (uint64_t)r + 1, SHMEM_SIGNAL_SET, to); break;
        case 2: shmem_putmem_signal_nbi(big, src, BIG, &sig[1], 1, SHMEM_SIGNAL_ADD, to); break;
        }
        if (r % 3 == 2)
            CHECK(shmem_signal_wait_until(&sig[1], SHMEM_CMP_GE, (uint64_t)(r + 1) / 3) ==
                  (uint64_t)(r + 1) / 3, "ADD signal");
        else
            shmem_signal_wait_until(&sig[0], SHMEM_CMP_GE, (uint64_t)r + 1);
        for (size_t i = 0; i < BIG; i++)
            CHECK(big[i] == pat(i, r, from), "put_signal round %d: byte %zu from PE %d is %#x, "
                  "expected %#x: the signal overtook the data", r, i, from, big[i], pat(i, r, from));
        shmem_long_atomic_add(ack, 1, from); /* done with this round's buffer */
        shmem_long_wait_until(ack, SHMEM_CMP_GE, r + 1);
    }
    free(src);
    shmem_finalize();
    return 0;
}
