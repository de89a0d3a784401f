/*
 * Per-stage timing of routed puts (prof.h): the stamps' arithmetic, the sums an ack carries
 * back and their place in the PE's control page, the quiet stage, and the report each PE
 * prints at shmem_finalize with SHMEM_PROFILE=on (a table) or json (one line to parse).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shmem_internal.h"

const char *const shm_stage_name[SHM_NSTAGES] = {
    "wait", "stage", "dma", "publish", "doorbell", "relay", "deliver", "ack", "quiet",
};

/* What each stage is, for the table (docs/openshmem.md says more). */
static const char *const stage_help[SHM_NSTAGES] = {
    "put: a free staging chunk and ring room",
    "put: copy into staging, DMA queued",
    "data across a link (DMA or CPU stores)",
    "data arrived -> descriptor written",
    "doorbell -> a node's thread has it",
    "node: message taken -> data sent on",
    "node: DMA/copy into the target's heap",
    "delivered -> ack in the PE's page",
    "per quiet: last ack -> quiet returns",
};

int shm_prof_mode(void)
{
    static const int mode[] = { 0, 1, 2, 0, 1 }; /* off|on|json|0|1 */
    return mode[shm_env_word(SHM_ENV_PROFILE)];
}

void xp_stamp_start(struct xp_stamp *st)
{
    memset(st, 0, sizeof *st);
    st->t0 = st->mark = shm_now_ns();
}

void xp_stamp_at(struct xp_stamp *st, enum shm_stage s, uint64_t t)
{
    /* One clock for all, but a mark taken on another CPU a moment later can still read as
     * later than our now: never a negative stage. */
    uint64_t d = t > st->mark ? t - st->mark : 0;
    if (s < SHM_ST_CARRIED)
        st->ns[s] += d > UINT32_MAX - st->ns[s] ? UINT32_MAX - st->ns[s] : (uint32_t)d;
    if (t > st->mark)
        st->mark = t;
}

void xp_stamp_to(struct xp_stamp *st, enum shm_stage s) { xp_stamp_at(st, s, shm_now_ns()); }

void xp_prof_delivered(struct xp_prof_sums *sum, struct xp_stamp *st, uint32_t len)
{
    uint64_t now = shm_now_ns();
    if (now < st->mark)
        now = st->mark;
    sum->ns[SHM_ST_DELIVER] += now - st->mark;
    st->mark = now;
    for (int s = 0; s < SHM_ST_CARRIED; s++)
        sum->ns[s] += st->ns[s];
    sum->chunks++;
    sum->bytes += len;
    sum->hops += st->hops;
    sum->total += now - st->t0;
    sum->delivered += now;
}

void shm_prof_ack(struct shm_ctrl *c, const struct xp_prof_sums *sum)
{
    struct shm_prof_area *a = &c->prof;
    uint64_t now = shm_now_ns();
    uint64_t all = sum->chunks * now, ack = all > sum->delivered ? all - sum->delivered : 0;
    for (int s = 0; s <= SHM_ST_DELIVER; s++)
        atomic_fetch_add_explicit(&a->ns[s], sum->ns[s], memory_order_relaxed);
    atomic_fetch_add_explicit(&a->ns[SHM_ST_ACK], ack, memory_order_relaxed);
    atomic_fetch_add_explicit(&a->total, sum->total + ack, memory_order_relaxed);
    atomic_fetch_add_explicit(&a->bytes, sum->bytes, memory_order_relaxed);
    atomic_fetch_add_explicit(&a->hops, sum->hops, memory_order_relaxed);
    atomic_fetch_add_explicit(&a->chunks, sum->chunks, memory_order_relaxed);
    atomic_store_explicit(&a->last_ack, now, memory_order_release);
    /* The ack count itself is added after this (release): a quiet that saw it sees these. */
}

static _Atomic uint64_t quiets, quiet_ns;

void shm_prof_quiet(uint64_t q0)
{
    uint64_t now = shm_now_ns(), last = atomic_load(&shm_ctrl_of(shm.me)->prof.last_ack);
    uint64_t from = last > q0 ? last : q0;
    atomic_fetch_add(&quiet_ns, now > from ? now - from : 0);
    atomic_fetch_add(&quiets, 1);
}

void shm_prof_report(void)
{
    if (!shm.profile)
        return;
    const char *why = !shm.routed     ? "no PE is reached through the ring's nodes (nothing to time)"
                      : shm.failover ? "puts under SHMEM_RING_FAILOVER=on are not timed"
                                     : NULL;
    struct shm_prof_area *a = &shm_ctrl_of(shm.me)->prof;
    uint64_t n = atomic_load(&a->chunks), q = atomic_load(&quiets), qns = atomic_load(&quiet_ns);
    uint64_t ns[SHM_NSTAGES];
    for (int s = 0; s <= SHM_ST_ACK; s++)
        ns[s] = atomic_load(&a->ns[s]);
    ns[SHM_ST_QUIET] = qns;
    uint64_t total = atomic_load(&a->total);
    if (shm.profile == 2) {
        char buf[1024];
        int o = snprintf(buf, sizeof buf,
                         "{\"shmem_profile\":{\"pe\":%d,\"npes\":%d,\"chunk\":%zu,\"timed\":%s,"
                         "\"chunks\":%llu,\"bytes\":%llu,\"hops\":%llu,\"total_ns\":%llu,"
                         "\"quiets\":%llu,\"stages_ns\":{",
                         shm.me, shm.npes, shm.chunk, why ? "false" : "true",
                         (unsigned long long)n, (unsigned long long)atomic_load(&a->bytes),
                         (unsigned long long)atomic_load(&a->hops), (unsigned long long)total,
                         (unsigned long long)q);
        for (int s = 0; s < SHM_NSTAGES && o < (int)sizeof buf; s++)
            o += snprintf(buf + o, sizeof buf - (size_t)o, "%s\"%s\":%llu", s ? "," : "",
                          shm_stage_name[s], (unsigned long long)ns[s]);
        fprintf(stderr, "%s}}}\n", buf);
        return;
    }
    if (why) {
        fprintf(stderr, "shmem: PE %d profile: %s\n", shm.me, why);
        return;
    }
    if (!n && !q) {
        fprintf(stderr, "shmem: PE %d profile: no routed puts\n", shm.me);
        return;
    }
    /* One write, so that the PEs' tables do not interleave. */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return;
    fprintf(f, "shmem: PE %d profile: %llu routed put chunks (%llu bytes, %.2f nodes each), "
               "%llu quiets; per chunk:\n", shm.me, (unsigned long long)n,
            (unsigned long long)atomic_load(&a->bytes), n ? (double)atomic_load(&a->hops) / (double)n : 0.0,
            (unsigned long long)q);
    for (int s = 0; s < SHM_NSTAGES; s++) {
        uint64_t per = s == SHM_ST_QUIET ? q : n;
        char pct[16] = "     -  "; /* quiet is per quiet, not part of a chunk's total */
        if (s != SHM_ST_QUIET && total)
            snprintf(pct, sizeof pct, "%6.1f %%", (double)ns[s] * 100.0 / (double)total);
        fprintf(f, "  %-9s %10.2f us %s  %s\n", shm_stage_name[s],
                per ? (double)ns[s] / (double)per / 1e3 : 0.0, pct, stage_help[s]);
    }
    fprintf(f, "  %-9s %10.2f us  100.0 %%  put start -> ack (quiet apart)\n", "total",
            n ? (double)total / (double)n / 1e3 : 0.0);
    fclose(f);
    fputs(text, stderr);
    free(text);
}
