/* A job that runs long enough to have a fault injected into it, and checks its data all the
 * way: `steady DIR ROUNDS [BLOCK]`. Each PE writes its pid to DIR/pe<N>.pid once started; in
 * every round each PE puts BLOCK bytes (default 64k) into its slot of every other PE's buffer,
 * a barrier, each PE checks every slot it received, a barrier. PE 0 creates DIR/running after
 * the first round and prints "steady: R rounds ok" at the end. */
#include <shmem.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

static unsigned char pattern(int round, int src, size_t i)
{
    return (unsigned char)(round * 31 + src * 7 + i * 13 + (i >> 9));
}

int main(int argc, char **argv)
{
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();
    CHECK(argc >= 3, "usage: steady DIR ROUNDS [BLOCK]");
    const char *dir = argv[1];
    int rounds = atoi(argv[2]);
    size_t blk = argc > 3 ? (size_t)atol(argv[3]) : 65536;
    char path[4096];
    snprintf(path, sizeof path, "%s/pe%d.pid", dir, me);
    FILE *f = fopen(path, "w");
    CHECK(f, "cannot write %s", path);
    fprintf(f, "%d\n", (int)getpid());
    fclose(f);

    unsigned char *buf = shmem_malloc((size_t)n * blk), *mine = malloc(blk);
    CHECK(buf && mine, "out of memory");
    for (int r = 0; r < rounds; r++) {
        for (size_t i = 0; i < blk; i++)
            mine[i] = pattern(r, me, i);
        for (int k = 1; k < n; k++)
            shmem_putmem(buf + (size_t)me * blk, mine, blk, (me + k) % n);
        shmem_barrier_all();
        for (int src = 0; src < n; src++) {
            if (src == me)
                continue;
            const unsigned char *s = buf + (size_t)src * blk;
            for (size_t i = 0; i < blk; i++)
                CHECK(s[i] == pattern(r, src, i), "round %d: byte %zu from PE %d is %u, not %u",
                      r, i, src, s[i], pattern(r, src, i));
        }
        shmem_barrier_all();
        if (me == 0 && r == 0) {
            snprintf(path, sizeof path, "%s/running", dir);
            f = fopen(path, "w");
            CHECK(f, "cannot write %s", path);
            fclose(f);
        }
    }
    if (me == 0)
        printf("steady: %d rounds ok\n", rounds);
    free(mine);
    shmem_free(buf);
    shmem_finalize();
    return 0;
}
