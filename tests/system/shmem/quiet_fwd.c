/* quiet waits for forwarded puts. PE 0 puts a 4 MiB buffer (a pattern that changes each round,
 * blocking and nbi) to a target PE T it cannot reach directly, calls shmem_quiet, then sets a
 * flag with an atomic on a checker PE C; C waits for the flag and reads T's buffer with getmem,
 * every byte, from the end (the likeliest to be late). If quiet returned before the forwarded
 * chunks had landed, C would see the previous round's bytes.
 *
 * Placement (from shmem_ptr: a PE is "direct" when its heap is mapped here):
 * - T is the first PE that PE 0 does not map (a non-neighbour on a ring: PE 2 of 5 round-robin
 *   on ring5, PE 1 of a,c,e, PE 4 of 10 at 2 per host), else (every PE direct, e.g. a switch)
 *   PE n/2.
 * - C is another PE, preferably one PE 0 reaches directly (the flag is then a direct atomic,
 *   far quicker than the routed data) and that reaches T directly (the check is a direct read):
 *   PE 1 of 5 on ring5 (a neighbour of both a and c), PE 2 of 10 at 2 per host. With 2 PEs C is
 *   T itself (it checks its own memory).
 * `quiet_fwd noquiet` skips the quiet: a self-check of the test, expected to fail. */
#include <sched.h>
#include <shmem.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define LEN (4u << 20)
#define ROUNDS 6
#define PIECE (16u << 10)

static unsigned char pattern(size_t i, int r) { return (unsigned char)(i ^ (i >> 9) ^ (r * 0x5b + 1)); }

/* reach[a * n + b]: PE a maps PE b's heap. */
static unsigned char *reach_matrix(void)
{
    int n = shmem_n_pes();
    unsigned char *row = shmem_malloc((size_t)n), *all = shmem_malloc((size_t)n * (size_t)n);
    unsigned char *out = malloc((size_t)n * (size_t)n);
    CHECK(row && all && out, "out of memory");
    for (int pe = 0; pe < n; pe++)
        row[pe] = shmem_ptr(row, pe) != NULL;
    CHECK(shmem_fcollectmem(SHMEM_TEAM_WORLD, all, row, (size_t)n) == 0, "fcollectmem");
    memcpy(out, all, (size_t)n * (size_t)n);
    shmem_free(all);
    shmem_free(row);
    return out;
}

int main(int argc, char **argv)
{
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();
    int noquiet = argc > 1 && strcmp(argv[1], "noquiet") == 0;
    CHECK(n >= 2, "needs 2 PEs or more");
    unsigned char *reach = reach_matrix();
    int t = -1, c = -1, best = -1;
    for (int pe = 1; pe < n && t < 0; pe++)
        if (!reach[pe])
            t = pe;
    if (t < 0)
        t = n / 2;
    for (int pe = 1; pe < n; pe++) {
        int score = pe == t ? -1 : 2 * reach[pe] + reach[pe * n + t];
        if (score > best)
            best = score, c = pe;
    }
    if (c < 0)
        c = t;

    unsigned char *buf = shmem_calloc(LEN, 1);
    long *flag = shmem_calloc(1, sizeof(long));
    unsigned char *priv = malloc(LEN);
    CHECK(buf && flag && priv, "out of memory");
    shmem_barrier_all();
    for (int r = 0; r < ROUNDS; r++) {
        if (me == 0) {
            for (size_t i = 0; i < LEN; i++)
                priv[i] = pattern(i, r);
            if (r % 2)
                shmem_putmem_nbi(buf, priv, LEN, t);
            else
                shmem_putmem(buf, priv, LEN, t);
            if (!noquiet)
                shmem_quiet();
            shmem_long_atomic_set(flag, r + 1, c);
        }
        if (me == c) {
            /* Test-and-yield rather than wait_until's backoff: react within microseconds. */
            while (!shmem_long_test(flag, SHMEM_CMP_GE, r + 1))
                sched_yield();
            /* From the end: the last bytes put are the likeliest to be still on their way. */
            for (size_t o = LEN; o > 0; o -= PIECE)
                shmem_getmem(priv + o - PIECE, buf + o - PIECE, PIECE, t);
            for (size_t i = 0; i < LEN; i++)
                CHECK(priv[i] == pattern(i, r),
                      "round %d: byte %zu of PE %d's buffer is %#x, expected %#x (PE 0's put "
                      "was not complete when its quiet returned)", r, i, t, priv[i], pattern(i, r));
        }
        shmem_barrier_all(); /* the next round's put must not overtake this round's check */
    }
    free(priv);
    free(reach);
    shmem_finalize();
    return 0;
}
