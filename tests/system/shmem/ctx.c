/* Contexts: SHMEM_CTX_DEFAULT and created contexts (options) do RMA/AMO/quiet/fence; a context
 * made from a team takes team-relative PE numbers; get_team; INVALID handling. */
#include <shmem.h>

#include "check.h"

int main(void)
{
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();
    int right = (me + 1) % n, left = (me + n - 1) % n;
    long *x = shmem_calloc(4, sizeof(long));
    uint64_t *sig = shmem_calloc(1, sizeof(uint64_t));
    shmem_team_t t;
    CHECK(shmem_ctx_get_team(SHMEM_CTX_DEFAULT, &t) == 0 && t == SHMEM_TEAM_WORLD, "default team");
    CHECK(shmem_ctx_get_team(SHMEM_CTX_INVALID, &t) != 0 && t == SHMEM_TEAM_INVALID,
          "invalid ctx team");
    shmem_ctx_t c1, c2;
    CHECK(shmem_ctx_create(SHMEM_CTX_PRIVATE | SHMEM_CTX_NOSTORE, &c1) == 0, "ctx_create");
    CHECK(shmem_ctx_create(SHMEM_CTX_SERIALIZED, &c2) == 0 && c2 != c1, "second ctx");
    CHECK(shmem_ctx_get_team(c1, &t) == 0 && t == SHMEM_TEAM_WORLD, "created ctx team");

    long v = 100 + me;
    shmem_ctx_long_put(c1, &x[0], &v, 1, right);
    shmem_ctx_long_p(SHMEM_CTX_DEFAULT, &x[1], v + 1, right);
    shmem_ctx_long_atomic_add(c2, &x[2], 3, right);
    shmem_ctx_quiet(c1);
    shmem_ctx_fence(c2);
    shmem_ctx_putmem_signal(c2, &x[3], &v, sizeof v, sig, 1, SHMEM_SIGNAL_SET, right);
    shmem_signal_wait_until(sig, SHMEM_CMP_EQ, 1);
    CHECK(x[3] == 100 + left, "ctx putmem_signal");
    shmem_barrier_all();
    CHECK(x[0] == 100 + left && x[1] == 101 + left && x[2] == 3, "ctx put/p/add");
    shmem_barrier_all();
    CHECK(shmem_ctx_long_g(c1, &x[0], right) == 100 + me, "ctx g");
    CHECK(shmem_ctx_long_atomic_fetch_add(c2, &x[2], 1, right) == 3, "ctx fetch_add");
    CHECK(shmem_ctx_uint64_atomic_fetch_or(c1, sig, 2, me) == 1, "ctx fetch_or");
    double d = 0;
    shmem_ctx_double_atomic_fetch_nbi(c1, &d, (double *)&x[0], me);
    shmem_ctx_quiet(c1);
    shmem_ctx_destroy(c1);
    shmem_ctx_destroy(c2);
    shmem_barrier_all();

    /* A context on the even team: PE numbers are team indices. */
    shmem_team_t even;
    shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, (n + 1) / 2, NULL, 0, &even);
    shmem_ctx_t ce;
    int rc = shmem_team_create_ctx(even, 0, &ce);
    if (me % 2 == 0) {
        CHECK(rc == 0 && ce != SHMEM_CTX_INVALID, "team_create_ctx");
        CHECK(shmem_ctx_get_team(ce, &t) == 0 && t == even, "team ctx get_team");
        int tn = shmem_team_n_pes(even), tme = shmem_team_my_pe(even);
        int tr = (tme + 1) % tn;
        shmem_ctx_int_atomic_set(ce, (int *)&x[0], 7000 + me, tr); /* team index tr */
        shmem_ctx_quiet(ce);
        shmem_team_sync(even);
        int tl = (tme + tn - 1) % tn;
        CHECK(*(int *)&x[0] == 7000 + shmem_team_translate_pe(even, tl, SHMEM_TEAM_WORLD),
              "team ctx atomic_set landed on team index");
        shmem_ctx_destroy(ce);
    } else {
        CHECK(rc != 0 && ce == SHMEM_CTX_INVALID, "team_create_ctx outside the team");
    }
    shmem_barrier_all();
    if (even != SHMEM_TEAM_INVALID)
        shmem_team_destroy(even);
    shmem_finalize();
    return 0;
}
