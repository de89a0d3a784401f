/*
 * Teams (1.5 §9.4) and their synchronisation.
 *
 * A team is its list of world PEs. SHMEM_TEAM_WORLD syncs with the world barrier (sync.c).
 * Every other team, and every deprecated active set, syncs through its root (its first PE)
 * with pairwise counters in the library's scratch area at the end of each heap (same offset
 * on every PE, indexed by world PE): a member increments arrive[me] in the root's area, the
 * root waits until every member has arrived once more than it has seen, then increments
 * release[root] in each member's area. No counter is shared by two teams, so teams need no
 * identifiers agreed on at creation, and disjoint or overlapping teams sync independently as
 * long as each pair of PEs calls its collectives in the same order (as the spec requires).
 * The counters are bumped with remote atomics that wake the receiver (xport.c), which waits
 * on its own control page's notify word; the waits time out every 100 ms to look for a
 * global exit.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shmem.h"
#include "shmem_internal.h"

static struct shm_team world_team, shared_team;
shmem_team_t SHMEM_TEAM_WORLD = &world_team;
shmem_team_t SHMEM_TEAM_SHARED = &shared_team;

static uint32_t *arr_seen, *rel_seen; /* private: arrivals / releases consumed, by world PE */

size_t shm_scratch_size(void)
{
    return sizeof(struct shm_scratch) + (size_t)shm.npes * (2 * sizeof(uint32_t) + sizeof(uint64_t));
}

struct shm_scratch *shm_scratch_of(int pe)
{
    size_t res = (shm_scratch_size() + 4095) & ~(size_t)4095;
    return (struct shm_scratch *)(shm_heap_of(pe) + shm.heap_size - res);
}

static _Atomic uint32_t *arrive_of(int pe) { return (_Atomic uint32_t *)(shm_scratch_of(pe) + 1); }
static _Atomic uint32_t *release_of(int pe) { return arrive_of(pe) + shm.npes; }

/* Add 1 to word w of our own scratch area, in PE pe's copy, and wake pe. */
static void bump(int pe, _Atomic uint32_t *w)
{
    size_t off = (size_t)((char *)w - (char *)shm.pes[shm.me].base);
    shm_amo(pe, off, SHM_AMO_ADD | SHM_AMO_WAKE, 4, 1, 0);
}

struct word_wait {
    _Atomic uint32_t *word;
    uint32_t seen;
};

static bool word_moved(void *arg)
{
    struct word_wait *w = arg;
    return atomic_load(w->word) != w->seen;
}

void shm_team_sync(const struct shm_team *t)
{
    if (t->world) {
        shm_barrier();
        return;
    }
    shm_quiet_all();
    int root = t->pes[0];
    if (t->n == 1)
        return;
    if (shm.me != root) {
        bump(root, &arrive_of(shm.me)[shm.me]);
        struct word_wait w = { &release_of(shm.me)[root], rel_seen[root] };
        shm_wait_notify(word_moved, &w);
        rel_seen[root]++;
    } else {
        for (int i = 1; i < t->n; i++) {
            int k = t->pes[i];
            struct word_wait w = { &arrive_of(shm.me)[k], arr_seen[k] };
            shm_wait_notify(word_moved, &w);
            arr_seen[k]++;
        }
        for (int i = 1; i < t->n; i++)
            bump(t->pes[i], &release_of(shm.me)[root]);
    }
    atomic_thread_fence(memory_order_seq_cst);
}

static struct shm_team *new_team(int n)
{
    struct shm_team *t = calloc(1, sizeof *t);
    if (!t || !(t->pes = malloc((size_t)(n > 0 ? n : 1) * sizeof *t->pes)))
        shm_fatal("out of memory for a team");
    t->n = n;
    t->me = -1;
    return t;
}

void shm_team_init(void)
{
    arr_seen = calloc((size_t)shm.npes, sizeof *arr_seen);
    rel_seen = calloc((size_t)shm.npes, sizeof *rel_seen);
    world_team.pes = malloc((size_t)shm.npes * sizeof(int));
    shared_team.pes = malloc((size_t)shm.npes * sizeof(int));
    if (!arr_seen || !rel_seen || !world_team.pes || !shared_team.pes)
        shm_fatal("out of memory");
    world_team.n = shm.npes;
    world_team.me = shm.me;
    world_team.world = 1;
    shared_team.n = 0;
    for (int pe = 0; pe < shm.npes; pe++) {
        world_team.pes[pe] = pe;
        if (shm.pes[pe].node == shm.pes[shm.me].node) {
            if (pe == shm.me)
                shared_team.me = shared_team.n;
            shared_team.pes[shared_team.n++] = pe;
        }
    }
    shared_team.world = shared_team.n == shm.npes;
}

void shm_team_fini(void)
{
    free(arr_seen);
    free(rel_seen);
    free(world_team.pes);
    free(shared_team.pes);
    arr_seen = rel_seen = NULL;
    world_team.pes = shared_team.pes = NULL;
}

void shm_aset(struct shm_team *t, const char *who, int start, int logstride, int size)
{
    shm_require_init(who);
    if (start < 0 || logstride < 0 || logstride > 30 || size < 1 ||
        start + (long long)(size - 1) * (1LL << logstride) >= shm.npes)
        shm_fatal("%s: active set (PE_start %d, logPE_stride %d, PE_size %d) is not within the %d PEs",
                  who, start, logstride, size, shm.npes);
    static int *buf;
    static int cap;
    if (size > cap) {
        int *nb = realloc(buf, (size_t)size * sizeof *nb);
        if (!nb)
            shm_fatal("out of memory");
        buf = nb;
        cap = size;
    }
    memset(t, 0, sizeof *t);
    t->n = size;
    t->me = -1;
    t->pes = buf;
    for (int i = 0; i < size; i++) {
        buf[i] = start + (i << logstride);
        if (buf[i] == shm.me)
            t->me = i;
    }
    if (t->me < 0)
        shm_fatal("%s: PE %d is not in the active set (PE_start %d, logPE_stride %d, PE_size %d)",
                  who, shm.me, start, logstride, size);
    t->world = size == shm.npes;
}

static const struct shm_team *check_team(const char *who, shmem_team_t team)
{
    shm_require_init(who);
    if (team == SHMEM_TEAM_INVALID)
        shm_fatal("%s: SHMEM_TEAM_INVALID", who);
    return team;
}

int shmem_team_my_pe(shmem_team_t team)
{
    shm_require_init("shmem_team_my_pe");
    return team == SHMEM_TEAM_INVALID ? -1 : team->me;
}

int shmem_team_n_pes(shmem_team_t team)
{
    shm_require_init("shmem_team_n_pes");
    return team == SHMEM_TEAM_INVALID ? -1 : team->n;
}

int shmem_team_get_config(shmem_team_t team, long config_mask, shmem_team_config_t *config)
{
    shm_require_init("shmem_team_get_config");
    if (team == SHMEM_TEAM_INVALID || !config)
        return -1;
    if (config_mask & SHMEM_TEAM_NUM_CONTEXTS)
        config->num_contexts = team->config.num_contexts;
    return 0;
}

int shmem_team_translate_pe(shmem_team_t src_team, int src_pe, shmem_team_t dest_team)
{
    shm_require_init("shmem_team_translate_pe");
    if (src_team == SHMEM_TEAM_INVALID || dest_team == SHMEM_TEAM_INVALID || src_pe < 0 ||
        src_pe >= src_team->n)
        return -1;
    int w = src_team->pes[src_pe];
    for (int i = 0; i < dest_team->n; i++)
        if (dest_team->pes[i] == w)
            return i;
    return -1;
}

/* Members idx = start + i*stride of parent; *new_team is INVALID on PEs outside it. */
static shmem_team_t make_sub(const struct shm_team *p, int start, int stride, int size,
                             const shmem_team_config_t *config, long mask)
{
    struct shm_team *t = new_team(size);
    for (int i = 0; i < size; i++) {
        t->pes[i] = p->pes[start + i * stride];
        if (t->pes[i] == shm.me)
            t->me = i;
    }
    if (t->me < 0) {
        free(t->pes);
        free(t);
        return SHMEM_TEAM_INVALID;
    }
    if (config && (mask & SHMEM_TEAM_NUM_CONTEXTS))
        t->config.num_contexts = config->num_contexts;
    return t;
}

int shmem_team_split_strided(shmem_team_t parent_team, int start, int stride, int size,
                             const shmem_team_config_t *config, long config_mask,
                             shmem_team_t *new_team_out)
{
    shm_require_init("shmem_team_split_strided");
    *new_team_out = SHMEM_TEAM_INVALID;
    /* 1.5: an invalid parent creates no team (this PE was left out of an earlier split and
     * takes no part in the collective); not an error that stops the program. */
    if (parent_team == SHMEM_TEAM_INVALID)
        return -1;
    const struct shm_team *p = parent_team;
    int ok = size >= 1 && start >= 0 && start < p->n &&
             start + (long long)(size - 1) * stride >= 0 &&
             start + (long long)(size - 1) * stride < p->n && (stride != 0 || size == 1);
    if (ok)
        *new_team_out = make_sub(p, start, stride, size, config, config_mask);
    shm_team_sync(p); /* collective over the parent */
    return ok ? 0 : -1;
}

int shmem_team_split_2d(shmem_team_t parent_team, int xrange,
                        const shmem_team_config_t *xaxis_config, long xaxis_mask,
                        shmem_team_t *xaxis_team, const shmem_team_config_t *yaxis_config,
                        long yaxis_mask, shmem_team_t *yaxis_team)
{
    shm_require_init("shmem_team_split_2d");
    *xaxis_team = *yaxis_team = SHMEM_TEAM_INVALID;
    if (parent_team == SHMEM_TEAM_INVALID) /* as in split_strided */
        return -1;
    const struct shm_team *p = parent_team;
    if (xrange <= 0) {
        shm_team_sync(p);
        return -1;
    }
    if (xrange > p->n)
        xrange = p->n;
    int x = p->me % xrange, y = p->me / xrange;
    int xstart = y * xrange, xsize = p->n - xstart < xrange ? p->n - xstart : xrange;
    int ysize = (p->n - x + xrange - 1) / xrange;
    *xaxis_team = make_sub(p, xstart, 1, xsize, xaxis_config, xaxis_mask);
    *yaxis_team = make_sub(p, x, xrange, ysize, yaxis_config, yaxis_mask);
    shm_team_sync(p);
    return 0;
}

void shmem_team_destroy(shmem_team_t team)
{
    shm_require_init("shmem_team_destroy");
    if (team == SHMEM_TEAM_INVALID || team == SHMEM_TEAM_WORLD || team == SHMEM_TEAM_SHARED)
        return;
    free(team->pes);
    free(team);
}

int shmem_team_sync(shmem_team_t team)
{
    shm_team_sync(check_team("shmem_team_sync", team));
    return 0;
}

void shmem_barrier(int PE_start, int logPE_stride, int PE_size, long *pSync)
{
    (void)pSync;
    struct shm_team t;
    shm_aset(&t, "shmem_barrier", PE_start, logPE_stride, PE_size);
    shm_team_sync(&t);
}

/* Deprecated 1.4 active-set sync: the barrier above (which also quiets, more than required).
 * In parentheses: shmem.h makes shmem_sync a macro that picks this form or shmem_team_sync. */
void(shmem_sync)(int PE_start, int logPE_stride, int PE_size, long *pSync)
{
    (void)pSync;
    struct shm_team t;
    shm_aset(&t, "shmem_sync", PE_start, logPE_stride, PE_size);
    shm_team_sync(&t);
}
