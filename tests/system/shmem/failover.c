/* A job that runs until told to stop and checks every byte and every count of every round, so
 * that a ring link pulled while it runs (tests/system/test_shmem_failover.sh, SHMEM_RING_FAILOVER=on)
 * shows up as lost, stale, duplicated or misplaced data, a wrong count, or a hang.
 *
 * Each PE sends to its next PE (me + 1), the PE half-way round (me + n/2: not a neighbour on a
 * ring) and its previous PE (me - 1), and each receives from the same three relations in one
 * receive area per relation ("slot"). Every round r:
 *   - puts: a few bytes and a few KiB to every slot, and 256 KiB..1 MiB to one of them in
 *     turn, at odd offsets; the data depends on (round, source, target, slot, size class);
 *   - put-with-signal to the half-way PE (SET, ADD, or put + fence + a flag put in turn),
 *     which waits for the flag, checks the data, and resets the flag after the barrier;
 *   - atomics: fetch_inc on a counter on PE 0 and on PE n/2 (the farthest from PE 0), add of
 *     me + 1 on the next and the half-way PE, and compare_swap (round -> round + 1) on PE n/2,
 *     which exactly one PE wins;
 *   - quiet, barrier; each PE checks every byte of its receive areas (and that nothing landed
 *     outside the bytes sent: the areas are cleared to FILL after each check), gets parts of
 *     the next and the half-way PE's round pattern and checks them, checks its add total,
 *     sums with shmem_long_sum_reduce and checks the sum, and collects everyone's fetched
 *     values (fcollect): the fetch_inc results of the round are exactly the round's range,
 *     each once; one compare_swap winner.
 * Stop: PE 0 looks for the file named by FAILOVER_STOP each round; once it is there (or at
 * FAILOVER_MAX_ROUNDS rounds: default 100000 with FAILOVER_STOP, 25 without, as the
 * test_shmem*.sh placements run it) it puts the last round's number into every PE's stop word
 * before the barrier, so all PEs end after the same round. PE 0 prints "round N" every 20
 * rounds and at the end "failover: verified R rounds on P PEs". Any mismatch: a message with
 * the round, the PEs, the offset, what was expected and what was found, and exit status 1.
 *
 * Symmetric memory: about 4.6 MiB (3 x 1 MiB receive areas, a 1 MiB get pattern, a 512 KiB
 * signal buffer), less with a SHMEM_SYMMETRIC_SIZE under 8M: it fits the 8M heaps of 2 PEs per
 * host on ring5. */
#include <shmem.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FILL 0xa5
#define SMALL_AREA 64
#define MED_AREA 8192
#define NSLOT 3
#define K 2                 /* fetch_incs per counter per PE per round */
#define NREC (2 * K + 2)    /* fetched values, the compare_swap result, the round */
#define NRED 4

enum { W_SMALL, W_MED, W_LARGE, W_GET, W_SIG, W_SIZE };
static const char *const slot_name[NSLOT] = { "next", "half-way", "previous" };

static int me, npes;

static uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The seed of one piece of data: which round, from which PE, to which PE, which slot and kind. */
static uint64_t seed_of(int round, int src, int dst, int slot, int what)
{
    uint64_t s = mix(0x5eed0000ull + (uint64_t)(uint32_t)round);
    s = mix(s ^ ((uint64_t)(uint32_t)src << 8));
    s = mix(s ^ ((uint64_t)(uint32_t)dst << 20));
    return mix(s ^ ((uint64_t)(slot + 1) << 40) ^ ((uint64_t)(what + 1) << 48));
}

/* Byte i of the pattern of a seed (8 bytes per word of mix). */
static unsigned char pat(uint64_t seed, size_t i)
{
    return (unsigned char)(mix(seed ^ (i >> 3)) >> (8 * (i & 7)));
}

static void fill(unsigned char *buf, size_t len, uint64_t seed, size_t start)
{
    for (size_t i = 0; i < len;) {
        size_t idx = start + i;
        uint64_t v = mix(seed ^ (idx >> 3));
        for (unsigned b = idx & 7; b < 8 && i < len; b++, i++)
            buf[i] = (unsigned char)(v >> (8 * b));
    }
}

static int cur_round;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "failover: PE %d, round %d: ", me, cur_round);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    exit(1);
}

/* got[0..len) must be pattern `seed` from index `start`; `prev` is the same data's seed one
 * round earlier (to name stale data). `what` says whose data it is, `base` is got's offset in
 * its area. */
static void verify(const unsigned char *got, size_t len, uint64_t seed, size_t start,
                   uint64_t prev, const char *what, size_t base)
{
    for (size_t i = 0; i < len;) {
        size_t idx = start + i;
        uint64_t v = mix(seed ^ (idx >> 3));
        for (unsigned b = idx & 7; b < 8 && i < len; b++, i++) {
            unsigned char want = (unsigned char)(v >> (8 * b));
            if (got[i] == want)
                continue;
            const char *why = "";
            if (got[i] == pat(prev, start + i))
                why = " (the previous round's byte: stale or duplicated data)";
            else if (got[i] == FILL)
                why = " (the fill byte: the data never arrived)";
            else if (got[i] == 0xff)
                why = " (all ones: read through a pulled link?)";
            die("%s: byte %zu of %zu (offset %zu in the area) is 0x%02x, expected 0x%02x%s", what,
                i, len, base + i, got[i], want, why);
        }
    }
}

/* area[from..to) must still be FILL: nothing may land outside the bytes sent. */
static void verify_fill(const unsigned char *area, size_t from, size_t to, const char *what)
{
    for (size_t i = from; i < to; i++)
        if (area[i] != FILL)
            die("%s: offset %zu, outside the bytes sent, is 0x%02x, expected the fill byte 0x%02x "
                "(misplaced data)", what, i, area[i], FILL);
}

struct piece {
    size_t off, len;
};

/* Offsets and lengths, the same on sender and receiver. `salt` tells pieces apart. */
static struct piece piece_of(int round, int src, int salt, int what, size_t large)
{
    uint64_t h = mix(seed_of(round, src, salt, 0, W_SIZE) ^ (uint64_t)what);
    struct piece p;
    switch (what) {
    case W_SMALL: /* 3..15 bytes at an odd offset below 48 */
        p.off = 1 + 2 * (h % 24);
        p.len = 3 + (h >> 8) % 13;
        break;
    case W_MED: /* 1..6 KiB */
        p.off = 1 + 2 * (h % 31);
        p.len = 1024 + (h >> 8) % 5120;
        break;
    default: /* large/4 .. large, odd or even */
        p.off = 1 + 2 * (h % 31);
        p.len = large / 4 + (h >> 8) % (large - large / 4 - 64);
        break;
    }
    return p;
}

/* The large put of a round goes to one slot in turn. */
static int large_to(int round, int src, int slot) { return (round + src + slot) % NSLOT == 0; }

/* The largest put/get: 1 MiB, or an eighth of a smaller heap (as bigcopy.c sizes its blocks). */
static size_t large_size(void)
{
    const char *e = getenv("SHMEM_SYMMETRIC_SIZE");
    if (!e)
        e = getenv("SMA_SYMMETRIC_SIZE");
    char *end;
    double v = e ? strtod(e, &end) : 0;
    if (e && v > 0) {
        double m = *end == 'k' || *end == 'K'   ? 1024.0
                   : *end == 'm' || *end == 'M' ? 1048576.0
                   : *end == 'g' || *end == 'G' ? 1073741824.0
                   : *end == 't' || *end == 'T' ? 1099511627776.0
                                                : 1.0;
        size_t heap = (size_t)(v * m);
        if (heap / 8 < (1u << 20))
            return heap / 8 < 16384 ? 16384 : heap / 8 & ~(size_t)4095;
    }
    return 1u << 20;
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

int main(void)
{
    shmem_init();
    me = shmem_my_pe();
    npes = shmem_n_pes();
    const int n = npes, h = n / 2, far0 = n / 2;
    const int to[NSLOT] = { (me + 1) % n, (me + h) % n, (me + n - 1) % n };
    const int from[NSLOT] = { (me + n - 1) % n, (me + n - h) % n, (me + 1) % n };
    const size_t large = large_size(), large_area = large + 64, sig_max = large / 2,
                 sig_area = sig_max + 64;

    const char *stopfile = getenv("FAILOVER_STOP");
    if (stopfile && !*stopfile)
        stopfile = NULL;
    long max_rounds = stopfile ? 100000 : 25;
    const char *e = getenv("FAILOVER_MAX_ROUNDS");
    if (e && *e) {
        char *end;
        max_rounds = strtol(e, &end, 10);
        if (*end || max_rounds < 1)
            die("FAILOVER_MAX_ROUNDS=\"%s\" is not a positive number", e);
    }

    unsigned char *r_small = shmem_malloc(NSLOT * SMALL_AREA);
    unsigned char *r_med = shmem_malloc(NSLOT * MED_AREA);
    unsigned char *r_large = shmem_malloc(NSLOT * large_area);
    unsigned char *getsrc = shmem_malloc(large_area);
    unsigned char *sigbuf = shmem_malloc(sig_area);
    uint64_t *sig = shmem_calloc(1, sizeof *sig);
    long *words = shmem_calloc(8, sizeof(long)); /* stop, acc, ctr0, ctrF, cs */
    long *red_src = shmem_calloc(NRED, sizeof(long)), *red_dst = shmem_calloc(NRED, sizeof(long));
    long *rec = shmem_calloc(NREC, sizeof(long)), *recs = shmem_calloc((size_t)n * NREC, sizeof(long));
    unsigned char *buf = malloc(large_area), *got = malloc(large_area);
    long *vals = malloc((size_t)n * K * sizeof(long));
    if (!r_small || !r_med || !r_large || !getsrc || !sigbuf || !sig || !words || !red_src ||
        !red_dst || !rec || !recs || !buf || !got || !vals)
        die("out of memory (large pieces of %zu bytes; SHMEM_SYMMETRIC_SIZE=%s)", large,
            getenv("SHMEM_SYMMETRIC_SIZE") ? getenv("SHMEM_SYMMETRIC_SIZE") : "default");
    long *stopw = &words[0], *acc = &words[1], *ctr0 = &words[2], *ctrf = &words[3], *cs = &words[4];
    memset(r_small, FILL, NSLOT * SMALL_AREA);
    memset(r_med, FILL, NSLOT * MED_AREA);
    memset(r_large, FILL, NSLOT * large_area);
    memset(sigbuf, FILL, sig_area);
    shmem_barrier_all();

    char what[256];
    unsigned char sbuf[NSLOT][16]; /* the small nbi puts' sources, untouched until the quiet */
    long rounds = 0;
    for (int r = 0;; r++) {
        cur_round = r;
        /* ---- phase A: write, send, update */
        fill(getsrc, large_area, seed_of(r, me, -1, 0, W_GET), 0);
        if (me == 0 && (r + 1 >= max_rounds || (stopfile && access(stopfile, F_OK) == 0)))
            for (int p = 0; p < n; p++)
                shmem_long_p(stopw, r + 1, p); /* round r is the last */
        for (int k = 0; k < NSLOT; k++) {
            int t = to[k];
            struct piece p = piece_of(r, me, k, W_SMALL, large);
            fill(sbuf[k], p.len, seed_of(r, me, t, k, W_SMALL), 0);
            shmem_putmem_nbi(r_small + k * SMALL_AREA + p.off, sbuf[k], p.len, t); /* quiet below */
            p = piece_of(r, me, k, W_MED, large);
            fill(buf, p.len, seed_of(r, me, t, k, W_MED), 0);
            shmem_putmem(r_med + k * MED_AREA + p.off, buf, p.len, t);
            if (large_to(r, me, k)) {
                p = piece_of(r, me, k, W_LARGE, large);
                fill(buf, p.len, seed_of(r, me, t, k, W_LARGE), 0);
                shmem_putmem(r_large + k * large_area + p.off, buf, p.len, t);
            }
        }
        /* put with signal (or put, fence, flag) to the half-way PE */
        {
            struct piece p = piece_of(r, me, 7, W_SIG, sig_max);
            if (r % 4 == 0)
                p.len = 5 + (size_t)r % 11;
            else if (r % 4 == 1)
                p.len = 2000 + (size_t)r % 3000;
            fill(buf, p.len, seed_of(r, me, to[1], 1, W_SIG), 0);
            switch (r % 3) {
            case 0:
                shmem_putmem_signal(sigbuf + p.off, buf, p.len, sig, (uint64_t)r + 1,
                                    SHMEM_SIGNAL_SET, to[1]);
                break;
            case 1:
                shmem_putmem_signal_nbi(sigbuf + p.off, buf, p.len, sig, 1, SHMEM_SIGNAL_ADD, to[1]);
                break;
            default:
                shmem_putmem(sigbuf + p.off, buf, p.len, to[1]);
                shmem_fence();
                shmem_uint64_p(sig, (uint64_t)r + 1, to[1]);
                break;
            }
        }
        for (int i = 0; i < K; i++) {
            rec[i] = shmem_long_atomic_fetch_inc(ctr0, 0);
            rec[K + i] = shmem_long_atomic_fetch_inc(ctrf, far0);
        }
        shmem_long_atomic_add(acc, me + 1, to[0]);
        shmem_long_atomic_add(acc, me + 1, to[1]);
        rec[2 * K] = shmem_long_atomic_compare_swap(cs, r, r + 1, far0);
        rec[2 * K + 1] = r;
        /* the half-way PE's signal: the data must be there when it is */
        uint64_t want_sig = r % 3 == 1 ? 1 : (uint64_t)r + 1, sigv;
        if (r % 3 == 2) {
            shmem_uint64_wait_until(sig, SHMEM_CMP_NE, 0);
            sigv = *(volatile uint64_t *)sig;
        } else {
            sigv = shmem_signal_wait_until(sig, SHMEM_CMP_NE, 0);
        }
        if (sigv != want_sig)
            die("the flag from PE %d (half-way) is %llu, expected %llu", from[1],
                (unsigned long long)sigv, (unsigned long long)want_sig);
        {
            struct piece p = piece_of(r, from[1], 7, W_SIG, sig_max);
            if (r % 4 == 0)
                p.len = 5 + (size_t)r % 11;
            else if (r % 4 == 1)
                p.len = 2000 + (size_t)r % 3000;
            snprintf(what, sizeof what, "%s from PE %d, %zu bytes at offset %zu, seen with its flag",
                     r % 3 == 2 ? "put + fence + flag" : "put with signal", from[1], p.len, p.off);
            verify(sigbuf + p.off, p.len, seed_of(r, from[1], me, 1, W_SIG), 0,
                   seed_of(r - 1, from[1], me, 1, W_SIG), what, p.off);
            verify_fill(sigbuf, 0, p.off, what);
            verify_fill(sigbuf, p.off + p.len, sig_area, what);
        }
        shmem_quiet();
        shmem_barrier_all();

        /* ---- phase B: check */
        long stop = *(volatile long *)stopw;
        if (stop != 0 && stop != r + 1)
            die("the stop word is %ld, expected 0 or %d", stop, r + 1);
        for (int k = 0; k < NSLOT; k++) {
            int s = from[k];
            static const int kinds[3] = { W_SMALL, W_MED, W_LARGE };
            for (int w = 0; w < 3; w++) {
                unsigned char *area = w == W_SMALL ? r_small + k * SMALL_AREA
                                      : w == W_MED ? r_med + k * MED_AREA
                                                   : r_large + k * large_area;
                size_t asz = w == W_SMALL ? SMALL_AREA : w == W_MED ? MED_AREA : large_area;
                struct piece p = { 0, 0 };
                if (w != W_LARGE || large_to(r, s, k))
                    p = piece_of(r, s, k, kinds[w], large);
                snprintf(what, sizeof what, "put from PE %d (this PE is its %s PE), %zu bytes at "
                         "offset %zu", s, slot_name[k], p.len, p.off);
                verify(area + p.off, p.len, seed_of(r, s, me, k, kinds[w]), 0,
                       seed_of(r - 1, s, me, k, kinds[w]), what, p.off);
                verify_fill(area, 0, p.off, what);
                verify_fill(area, p.off + p.len, asz, what);
                memset(area, FILL, asz); /* for the next round: after its barrier */
            }
        }
        uint64_t sig_now = *(volatile uint64_t *)sig;
        if (sig_now != want_sig)
            die("after the barrier the flag from PE %d is %llu, expected %llu (a late or "
                "duplicated signal)", from[1], (unsigned long long)sig_now,
                (unsigned long long)want_sig);
        *(volatile uint64_t *)sig = 0; /* reused next round: its sender puts after the barrier */
        memset(sigbuf, FILL, sig_area);

        /* gets of the next and the half-way PE's round pattern */
        for (int g = 0; g < 2; g++) {
            int t = g == 0 ? to[0] : to[1];
            for (int w = W_SMALL; w <= W_LARGE; w++) {
                if (w == W_LARGE && (r + g) % 2)
                    continue; /* the large get from one of the two in turn */
                struct piece p = piece_of(r, me, 10 + g, w, large);
                memset(got, FILL, p.len);
                if (w == W_MED) {
                    shmem_getmem_nbi(got, getsrc + p.off, p.len, t);
                    shmem_quiet();
                } else {
                    shmem_getmem(got, getsrc + p.off, p.len, t);
                }
                snprintf(what, sizeof what, "getmem from PE %d (its %s PE), %zu bytes at offset %zu",
                         t, slot_name[g], p.len, p.off);
                verify(got, p.len, seed_of(r, t, -1, 0, W_GET), p.off,
                       seed_of(r - 1, t, -1, 0, W_GET), what, p.off);
            }
        }

        /* atomics */
        long want_acc = (long)(r + 1) * ((from[0] + 1) + (from[1] + 1));
        if (*(volatile long *)acc != want_acc)
            die("the atomic_add total from PEs %d and %d is %ld, expected %ld", from[0], from[1],
                *(volatile long *)acc, want_acc);
        long per_round = (long)n * K;
        if (me == 0 && *(volatile long *)ctr0 != (r + 1) * per_round)
            die("the fetch_inc counter on PE 0 is %ld, expected %ld", *(volatile long *)ctr0,
                (r + 1) * per_round);
        if (me == far0 && *(volatile long *)ctrf != (r + 1) * per_round)
            die("the fetch_inc counter on PE %d is %ld, expected %ld", far0,
                *(volatile long *)ctrf, (r + 1) * per_round);
        if (me == far0 && *(volatile long *)cs != r + 1)
            die("the compare_swap word on PE %d is %ld, expected %d", far0, *(volatile long *)cs,
                r + 1);
        shmem_long_fcollect(SHMEM_TEAM_WORLD, recs, rec, NREC);
        for (int c = 0; c < 2; c++) {
            for (int p = 0; p < n; p++) {
                if (recs[p * NREC + 2 * K + 1] != r)
                    die("PE %d's record says round %ld", p, recs[p * NREC + 2 * K + 1]);
                for (int i = 0; i < K; i++)
                    vals[p * K + i] = recs[p * NREC + c * K + i];
            }
            qsort(vals, (size_t)n * K, sizeof *vals, cmp_long);
            for (long i = 0; i < per_round; i++)
                if (vals[i] != r * per_round + i)
                    die("the fetch_inc results on PE %d's counter, sorted, have %ld at %ld, "
                        "expected %ld: every value of the round once", c ? far0 : 0, vals[i], i,
                        r * per_round + i);
        }
        int winners = 0;
        for (int p = 0; p < n; p++) {
            long v = recs[p * NREC + 2 * K];
            if (v == r)
                winners++;
            else if (v != r + 1)
                die("PE %d's compare_swap(%d -> %d) on PE %d fetched %ld", p, r, r + 1, far0, v);
        }
        if (winners != 1)
            die("%d PEs won the compare_swap(%d -> %d) on PE %d, expected one", winners, r, r + 1,
                far0);

        /* a reduction */
        for (int j = 0; j < NRED; j++)
            red_src[j] = (long)r * 1000003 + me * 7 + j * 13;
        shmem_long_sum_reduce(SHMEM_TEAM_WORLD, red_dst, red_src, NRED);
        for (int j = 0; j < NRED; j++) {
            long want = (long)n * ((long)r * 1000003 + j * 13) + 7L * n * (n - 1) / 2;
            if (red_dst[j] != want)
                die("shmem_long_sum_reduce element %d is %ld, expected %ld", j, red_dst[j], want);
        }

        rounds = r + 1;
        if (me == 0 && r % 20 == 0) {
            printf("round %d\n", r);
            fflush(stdout);
        }
        shmem_barrier_all();
        if (stop)
            break;
    }

    /* the totals at the end */
    long total = rounds * n * K;
    if (shmem_long_atomic_fetch(ctr0, 0) != total)
        die("at the end the counter on PE 0 is %ld, expected %ld", shmem_long_atomic_fetch(ctr0, 0),
            total);
    if (shmem_long_atomic_fetch(ctrf, far0) != total)
        die("at the end the counter on PE %d is %ld, expected %ld", far0,
            shmem_long_atomic_fetch(ctrf, far0), total);
    if (shmem_long_atomic_fetch(cs, far0) != rounds)
        die("at the end the compare_swap word on PE %d is %ld, expected %ld", far0,
            shmem_long_atomic_fetch(cs, far0), rounds);
    shmem_barrier_all();
    if (me == 0) {
        printf("failover: verified %ld rounds on %d PEs\n", rounds, n);
        fflush(stdout);
    }
    free(vals);
    free(got);
    free(buf);
    shmem_finalize();
    return 0;
}
