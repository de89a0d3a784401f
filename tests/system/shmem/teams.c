/* Teams: WORLD, SHARED (argv[1]: the expected number of PEs per host, if given), split_strided
 * and split_2d membership and numbering, translate_pe both ways, get_config, invalid splits
 * and splits of SHMEM_TEAM_INVALID, team_sync on disjoint and overlapping teams with puts
 * before it, destroy; the active-set barrier and both shmem_sync forms. */
#include <shmem.h>
#include <string.h>

#include "check.h"

static void check_team(shmem_team_t t, const int *members, int size, const char *what)
{
    int me = shmem_my_pe(), idx = -1;
    for (int i = 0; i < size; i++)
        if (members[i] == me)
            idx = i;
    if (idx < 0) {
        CHECK(t == SHMEM_TEAM_INVALID, "%s: not a member but got a team", what);
        return;
    }
    CHECK(t != SHMEM_TEAM_INVALID, "%s: a member but got SHMEM_TEAM_INVALID", what);
    CHECK(shmem_team_my_pe(t) == idx, "%s: my_pe %d, expected %d", what, shmem_team_my_pe(t), idx);
    CHECK(shmem_team_n_pes(t) == size, "%s: n_pes %d, expected %d", what, shmem_team_n_pes(t), size);
    for (int i = 0; i < size; i++) {
        int w = shmem_team_translate_pe(t, i, SHMEM_TEAM_WORLD);
        CHECK(w == members[i], "%s: team PE %d is world %d, expected %d", what, i, w, members[i]);
        CHECK(shmem_team_translate_pe(SHMEM_TEAM_WORLD, members[i], t) == i,
              "%s: world %d translates to %d", what, members[i],
              shmem_team_translate_pe(SHMEM_TEAM_WORLD, members[i], t));
    }
    CHECK(shmem_team_translate_pe(t, size, SHMEM_TEAM_WORLD) == -1, "%s: out of range", what);
    CHECK(shmem_team_translate_pe(t, -1, SHMEM_TEAM_WORLD) == -1, "%s: negative", what);
    for (int w = 0; w < shmem_n_pes(); w++) {
        int in = 0;
        for (int i = 0; i < size; i++)
            in |= members[i] == w;
        if (!in)
            CHECK(shmem_team_translate_pe(SHMEM_TEAM_WORLD, w, t) == -1,
                  "%s: non-member %d translated", what, w);
    }
}

/* Puts to every member then team_sync, many rounds: every slot seen after the sync. */
static void sync_rounds(shmem_team_t t, long *slots, const char *what)
{
    if (t == SHMEM_TEAM_INVALID)
        return;
    int n = shmem_team_n_pes(t), me = shmem_team_my_pe(t);
    for (long r = 1; r <= 50; r++) {
        for (int i = 0; i < n; i++)
            shmem_long_p(&slots[me], r * 100 + me, shmem_team_translate_pe(t, i, SHMEM_TEAM_WORLD));
        CHECK(shmem_team_sync(t) == 0, "%s: team_sync", what);
        for (int i = 0; i < n; i++)
            CHECK(slots[i] == r * 100 + i, "%s: round %ld slot %d is %ld", what, r, i, slots[i]);
        shmem_team_sync(t);
    }
}

int main(int argc, char **argv)
{
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();
    int members[64];
    long *slots = shmem_calloc(64, sizeof(long));

    for (int i = 0; i < n; i++)
        members[i] = i;
    check_team(SHMEM_TEAM_WORLD, members, n, "world");
    CHECK(shmem_team_my_pe(SHMEM_TEAM_INVALID) == -1, "my_pe of INVALID");
    CHECK(shmem_team_n_pes(SHMEM_TEAM_INVALID) == -1, "n_pes of INVALID");
    CHECK(shmem_team_translate_pe(SHMEM_TEAM_WORLD, 0, SHMEM_TEAM_INVALID) == -1, "to INVALID");

    /* SHARED: contains me, ascending world numbers, the expected size if told. */
    int ns = shmem_team_n_pes(SHMEM_TEAM_SHARED);
    CHECK(ns >= 1 && ns <= n, "shared has %d PEs", ns);
    if (argc > 1)
        CHECK(ns == atoi(argv[1]), "shared has %d PEs, expected %s", ns, argv[1]);
    CHECK(shmem_team_translate_pe(SHMEM_TEAM_SHARED, shmem_team_my_pe(SHMEM_TEAM_SHARED),
                                  SHMEM_TEAM_WORLD) == me, "shared: my number");
    for (int i = 1; i < ns; i++)
        CHECK(shmem_team_translate_pe(SHMEM_TEAM_SHARED, i, SHMEM_TEAM_WORLD) >
                  shmem_team_translate_pe(SHMEM_TEAM_SHARED, i - 1, SHMEM_TEAM_WORLD),
              "shared not ascending");
    for (int i = 0; i < ns; i++)
        CHECK(shmem_ptr(slots, shmem_team_translate_pe(SHMEM_TEAM_SHARED, i, SHMEM_TEAM_WORLD)),
              "shmem_ptr to a shared-team PE is NULL");
    sync_rounds(SHMEM_TEAM_SHARED, slots, "shared");

    /* Even PEs, with a config. */
    shmem_team_config_t cfg = { .num_contexts = 3 }, got = { 0 };
    shmem_team_t even;
    int ne = (n + 1) / 2;
    CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, ne, &cfg, SHMEM_TEAM_NUM_CONTEXTS,
                                   &even) == 0, "split even");
    for (int i = 0; i < ne; i++)
        members[i] = 2 * i;
    check_team(even, members, ne, "even");
    if (even != SHMEM_TEAM_INVALID) {
        CHECK(shmem_team_get_config(even, SHMEM_TEAM_NUM_CONTEXTS, &got) == 0, "get_config");
        CHECK(got.num_contexts == 3, "num_contexts %d", got.num_contexts);
    }
    /* Odd PEs, split from world at the same time: disjoint teams sync independently. */
    shmem_team_t odd;
    int no = n / 2;
    int rc = shmem_team_split_strided(SHMEM_TEAM_WORLD, 1, 2, no, NULL, 0, &odd);
    if (no > 0) {
        CHECK(rc == 0, "split odd");
        for (int i = 0; i < no; i++)
            members[i] = 2 * i + 1;
        check_team(odd, members, no, "odd");
    }
    sync_rounds(me % 2 ? odd : even, slots, me % 2 ? "odd" : "even");
    shmem_barrier_all();

    /* A split of a split: the last PEs of the even team, counted backwards (negative stride). */
    if (even != SHMEM_TEAM_INVALID && ne >= 2) {
        shmem_team_t back;
        CHECK(shmem_team_split_strided(even, ne - 1, -1, 2, NULL, 0, &back) == 0, "split back");
        members[0] = 2 * (ne - 1);
        members[1] = 2 * (ne - 2);
        check_team(back, members, 2, "back");
        sync_rounds(back, slots, "back");
        shmem_team_destroy(back);
    }
    shmem_barrier_all();

    /* Invalid splits: non-zero, SHMEM_TEAM_INVALID everywhere. */
    shmem_team_t bad = SHMEM_TEAM_WORLD;
    CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, n + 1, NULL, 0, &bad) != 0, "too big");
    CHECK(bad == SHMEM_TEAM_INVALID, "too big gave a team");
    CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, n, 1, 1, NULL, 0, &bad) != 0, "bad start");
    CHECK(bad == SHMEM_TEAM_INVALID, "bad start gave a team");

    /* Splits of SHMEM_TEAM_INVALID (a PE left out of an earlier split): non-zero, the new
     * teams SHMEM_TEAM_INVALID, and the PE carries on. Here the even PEs split the odd team
     * while the odd PEs really split it (into its first PE). */
    shmem_team_t xi = SHMEM_TEAM_WORLD, yi = SHMEM_TEAM_WORLD, first = SHMEM_TEAM_WORLD;
    CHECK(shmem_team_split_2d(SHMEM_TEAM_INVALID, 2, NULL, 0, &xi, NULL, 0, &yi) != 0, "2d of INVALID");
    CHECK(xi == SHMEM_TEAM_INVALID && yi == SHMEM_TEAM_INVALID, "2d of INVALID gave a team");
    CHECK(shmem_team_split_strided(SHMEM_TEAM_INVALID, 0, 1, 1, NULL, 0, &bad) != 0, "split of INVALID");
    CHECK(bad == SHMEM_TEAM_INVALID, "split of INVALID gave a team");
    if (no > 0) {
        rc = shmem_team_split_strided(odd, 0, 1, 1, NULL, 0, &first);
        CHECK(me % 2 ? rc == 0 : rc != 0, "split of odd: %d", rc);
        members[0] = 1;
        check_team(first, members, 1, "first odd");
        shmem_team_destroy(first);
    }
    shmem_barrier_all();

    /* 2-D: xrange 2 (rows of 2), then xrange 3 (a short last row when n is not a multiple). */
    for (int xr = 2; xr <= 3; xr++) {
        shmem_team_t xt, yt;
        CHECK(shmem_team_split_2d(SHMEM_TEAM_WORLD, xr, NULL, 0, &xt, NULL, 0, &yt) == 0, "2d");
        int x = me % xr, y = me / xr, k = 0;
        for (int w = y * xr; w < n && w < (y + 1) * xr; w++)
            members[k++] = w;
        check_team(xt, members, k, "x axis");
        k = 0;
        for (int w = x; w < n; w += xr)
            members[k++] = w;
        check_team(yt, members, k, "y axis");
        sync_rounds(xt, slots, "x axis");
        shmem_barrier_all();
        sync_rounds(yt, slots, "y axis");
        shmem_barrier_all();
        shmem_team_destroy(xt);
        shmem_team_destroy(yt);
    }

    /* A single-PE team. */
    shmem_team_t solo;
    CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, n - 1, 0, 1, NULL, 0, &solo) == 0, "solo");
    members[0] = n - 1;
    check_team(solo, members, 1, "solo");
    sync_rounds(solo, slots, "solo");

    /* Active-set barrier (deprecated), pSync accepted. */
    static long psync[SHMEM_BARRIER_SYNC_SIZE];
    long *ps = shmem_malloc(sizeof psync);
    for (int i = 0; i < SHMEM_BARRIER_SYNC_SIZE; i++)
        ps[i] = SHMEM_SYNC_VALUE;
    shmem_barrier_all();
    for (int r = 0; r < 20; r++) {
        if (me % 2 == 0)
            shmem_barrier(0, 1, ne, ps);
        shmem_barrier(0, 0, n, ps);
    }
    /* shmem_sync: the team form (1.5) and the active-set form under the same name, with puts
     * that the team form's barrier makes visible. */
    for (long r = 1; r <= 20; r++) {
        if (me % 2 == 0)
            shmem_sync(0, 1, ne, ps);
        shmem_long_p(&slots[me], r, (me + 1) % n);
        shmem_quiet();
        CHECK(shmem_sync(SHMEM_TEAM_WORLD) == 0, "shmem_sync(team)");
        CHECK(slots[(me + n - 1) % n] == r, "shmem_sync(team) round %ld: %ld", r,
              slots[(me + n - 1) % n]);
        shmem_sync(0, 0, n, ps);
        if (even != SHMEM_TEAM_INVALID)
            shmem_sync(even);
    }
    for (int i = 0; i < SHMEM_BARRIER_SYNC_SIZE; i++)
        CHECK(ps[i] == SHMEM_SYNC_VALUE, "pSync[%d] changed", i);
    shmem_barrier_all();

    shmem_team_destroy(solo);
    shmem_team_destroy(even);
    shmem_team_destroy(odd);
    shmem_free(ps);
    shmem_free(slots);
    if (me == 0)
        printf("teams: ok at %d PEs (shared %d)\n", n, ns);
    shmem_finalize();
    return 0;
}
