/*
 * libntbtool (tools/lib/ntbtool.h): messages, numbers, time and futexes, the futex baseline, CPU placement, latency
 * statistics, JSON output, latency runs and data patterns (util.c).
 */
#ifndef NTBLEND_TOOL_UTIL_H
#define NTBLEND_TOOL_UTIL_H

#include <json-c/json.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* ================================================================ messages (util.c) */

/** The program name that prefixes every message: set it first thing in main(). */
extern const char *tu_prog;

/**
 * tu_err() - print "PROG: message" and a newline on stderr.
 * @fmt: printf format of the message (say what went wrong and what to do).
 */
void tu_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ================================================================ numbers (util.c) */

/**
 * tu_parse_u64() - parse an unsigned number.
 * @s:   decimal, or hexadecimal with a 0x prefix (a leading 0 is not octal: "010" is ten)
 * @out: the value
 *
 * Return: 0, or -EINVAL for anything else (signs, trailing text, overflow).
 */
int tu_parse_u64(const char *s, uint64_t *out);

/**
 * tu_parse_int() - parse a number within [@lo, @hi] (as tu_parse_u64()).
 * @s:   the text
 * @lo:  smallest value accepted (>= 0)
 * @hi:  largest value accepted
 * @out: the value
 *
 * Return: 0 or -EINVAL.
 */
int tu_parse_int(const char *s, int lo, int hi, int *out);

/**
 * tu_parse_size() - parse a size: a number with an optional K, M or G suffix.
 * @s:   "4096", "0x1000", "4K", "4M", "4MB", "1G" (binary multiples)
 * @out: the size in bytes
 *
 * Return: 0 or -EINVAL (also when the suffix overflows 64 bits).
 */
int tu_parse_size(const char *s, uint64_t *out);

/**
 * tu_fmt_size() - a size for humans: "512 KiB", "4 MiB", "1000 B".
 * @v:   bytes; the largest unit that divides it exactly is used
 * @buf: where to write
 * @len: size of @buf
 *
 * Exact sizes belong in --json output; this is for the tables.
 * Return: @buf.
 */
const char *tu_fmt_size(uint64_t v, char *buf, size_t len);

/** tu_pow2() - is @v a power of two (and not 0)? */
bool tu_pow2(uint64_t v);

/** tu_mbps() - @bytes moved in @ns as MB/s (10^6 bytes per second); 0 when @ns is 0. */
double tu_mbps(uint64_t bytes, uint64_t ns);

/* ================================================================ time and futexes (util.c) */

/** tu_now_ns() - CLOCK_MONOTONIC in nanoseconds. */
uint64_t tu_now_ns(void);

/** tu_sleep_ms() - sleep @ms milliseconds (resuming after signals). */
void tu_sleep_ms(int ms);

/**
 * tu_futex_wait() - sleep while *@addr holds @expected.
 * @addr:       a word in memory shared with another process (the futex is not PRIVATE)
 * @expected:   the value to sleep on
 * @timeout_ms: < 0: no limit
 *
 * Return: 0 (woken, or the word had changed), -ETIMEDOUT or -EINTR.
 */
int tu_futex_wait(_Atomic uint32_t *addr, uint32_t expected, int timeout_ms);

/** tu_futex_wake() - wake every process sleeping on @addr. */
void tu_futex_wake(_Atomic uint32_t *addr);

/* ================================================================ the futex baseline (util.c) */

/*
 * What the latency benchmarks compare a round trip with: two processes ping-ponging a word in
 * shared memory, each sleeping on a futex until the other answers.
 */
#define TU_FUTEX_STOP UINT32_MAX /* store it to make the partner exit */

/**
 * tu_futex_partner_start() - fork the partner process of the futex ping-pong.
 * @word: set to a fresh shared word (4 KiB mapping; munmap it when done)
 * @cpu:  the CPU to pin the partner to, or -1
 *
 * Start it before anything starts threads in this process. The partner answers every odd
 * value v of the word with v + 1 and exits when it reads TU_FUTEX_STOP (or when we die).
 * Return: its pid, or -1 after a message.
 */
pid_t tu_futex_partner_start(_Atomic uint32_t **word, int cpu);

/**
 * tu_futex_rounds() - time futex round trips with the partner.
 * @word:    the shared word
 * @first:   number of the first round (rounds [@first, @first + @n) store 2k+1)
 * @n:       rounds
 * @ns:      the @n round-trip times
 * @wait_ms: a round slower than this is a failure
 *
 * Return: 0, or -ETIMEDOUT after a message.
 */
int tu_futex_rounds(_Atomic uint32_t *word, uint64_t first, uint64_t n, uint64_t *ns, int wait_ms);

/**
 * tu_futex_partner_stop() - tell the partner to exit, reap it, unmap the word.
 * @partner: its pid (nothing happens when <= 0)
 * @word:    the shared word (may be NULL)
 */
void tu_futex_partner_stop(pid_t partner, _Atomic uint32_t *word);

/* ================================================================ CPU placement (util.c) */

/* --pin of the latency benchmarks: where this side and the peer side run. */
enum tu_pin { TU_PIN_SPLIT, TU_PIN_SAME, TU_PIN_NONE };

/** tu_pin_name() - "split", "same" or "none". */
const char *tu_pin_name(enum tu_pin pin);

/**
 * tu_parse_pin() - parse a --pin value.
 * @s:   "split", "same" or "none"
 * @out: the mode
 *
 * Return: 0 or -EINVAL.
 */
int tu_parse_pin(const char *s, enum tu_pin *out);

/**
 * tu_pin() - run the calling thread on one CPU only.
 * @cpu: the CPU
 *
 * Return: 0 or -errno.
 */
int tu_pin(int cpu);

/**
 * tu_two_cpus() - the first two CPUs this process may run on.
 * @first:  the first, or -1
 * @second: the second, or -1
 */
void tu_two_cpus(int *first, int *second);

/**
 * tu_pick_cpus() - the CPUs of this side and of the peer side for a --pin mode.
 * @pin:  split: the first two CPUs we may run on; same: the first for both; none: -1/-1
 * @self: this side's CPU, or -1 (not pinning; also when split finds one CPU only)
 * @peer: the peer side's (the server and the futex partner alike), or -1
 *
 * A round trip is two wake-ups, and what one costs depends on where the two processes run: a
 * wake-up on another CPU can cost ten times one on the same CPU. The scheduler would place
 * the measured pair and the futex pair differently from run to run, so both get this one
 * placement.
 */
void tu_pick_cpus(enum tu_pin pin, int *self, int *peer);

/* ================================================================ statistics (util.c) */

/** tu_cmp_u64() - qsort() comparison of two uint64_t. */
int tu_cmp_u64(const void *a, const void *b);

/* min / median / p99 / max / mean of a set of samples. */
struct tu_stats {
    uint64_t min, median, p99, max;
    double mean;
};

/**
 * tu_summarize() - summarize @n samples (n > 0); sorts them in place.
 * @ns: the samples
 * @n:  how many
 *
 * The median is ns[n / 2] of the sorted samples, p99 the nearest rank.
 * Return: the summary.
 */
struct tu_stats tu_summarize(uint64_t *ns, uint64_t n);

/**
 * tu_percentile() - the @p-th percentile (nearest rank) of @n sorted samples.
 * @v: the samples, sorted
 * @n: how many (0 gives 0)
 * @p: 0..100
 */
uint64_t tu_percentile(const uint64_t *v, size_t n, double p);

/* ================================================================ JSON output (util.c) */

/**
 * tu_jdouble() - a JSON number printed with @digits decimals ("1234.5", not "1234.4999999").
 * @v:      the value
 * @digits: decimals
 */
struct json_object *tu_jdouble(double v, int digits);

/**
 * tu_jstats() - add PREFIXmin_ns, PREFIXmedian_ns, PREFIXp99_ns, PREFIXmax_ns, PREFIXmean_ns.
 * @j:      the object
 * @prefix: "" or e.g. "baseline_"
 * @s:      the statistics
 */
void tu_jstats(struct json_object *j, const char *prefix, const struct tu_stats *s);

/**
 * tu_json_begin() - the object a tool's --json output starts with: {"tool": @tool, ...}.
 * @tool: the tool's name
 *
 * Return: a new object (aborts when out of memory, as json-c does).
 */
struct json_object *tu_json_begin(const char *tool);

/**
 * tu_json_endpoints() - add host, node, peer_host, peer_node and adapter (in this order), the
 *                       first fields of every segment benchmark's --json output.
 * @j:         the object
 * @self_node: this host's node id
 * @peer_host: the peer's host name
 * @peer_node: the peer's node id
 * @adapter:   the adapter index used
 */
void tu_json_endpoints(struct json_object *j, uint32_t self_node, const char *peer_host,
                       uint32_t peer_node, int adapter);

/**
 * tu_json_print() - print @j on one line of stdout and free it.
 * @j: the object
 */
void tu_json_print(struct json_object *j);

/* ================================================================ latency runs (util.c) */

/*
 * The run of a round-trip benchmark (ntb_pingpong, intr_bench): the samples, the CPU
 * placement and, with a baseline, the futex partner and its samples. Rounds are measured in
 * TU_LAT_BLOCKS blocks alternating with the baseline's, after 16 untimed warm-up rounds of
 * each, so both see the same machine.
 */
#define TU_LAT_WAIT_MS 5000 /* one round trip longer than this is a failure */
#define TU_LAT_BLOCKS 4     /* measured and baseline rounds alternate in this many blocks */

struct tu_lat {
    uint64_t n;             /* rounds */
    uint64_t *ns, *fx_ns;   /* the round trips, measured and baseline */
    int self_cpu, peer_cpu; /* -1: not pinned */
    pid_t partner;          /* the futex partner (-1: none) */
    _Atomic uint32_t *word;
    bool baseline;
    enum tu_pin pin;
    struct tu_stats d, f;   /* after tu_lat_run(): measured and baseline statistics */
    double ratio;           /* median of d / median of f (0 without a baseline) */
};

/**
 * tu_lat_start() - allocate the samples, pin this thread as @pin says and, with a baseline,
 *                  start the futex partner on the peer side's CPU.
 * @L:        the run (tu_lat_finish() it in every case)
 * @rounds:   round trips to measure
 * @pin:      the --pin mode
 * @baseline: also measure the futex ping-pong
 *
 * Call it before anything starts threads in this process: they inherit the placement, and
 * fork() must not copy a process with threads.
 * Return: 0, or 1 after a message.
 */
int tu_lat_start(struct tu_lat *L, uint64_t rounds, enum tu_pin pin, bool baseline);

/**
 * tu_lat_run() - warm up, measure all rounds (alternating with the baseline's) and summarize.
 * @L:      the run
 * @rounds: the tool's rounds: time rounds [first, first + n) into ns[0, n); 0 or -errno
 *          after a message
 * @ctx:    its context
 *
 * Return: 0, or the first failure.
 */
int tu_lat_run(struct tu_lat *L, int (*rounds)(void *ctx, uint64_t first, uint64_t n,
                                                 uint64_t *ns), void *ctx);

/**
 * tu_lat_placement() - "unpinned" or "this side on CPU x, the peer side on CPU y".
 * @L:   the run
 * @buf: where to write
 * @len: its size
 *
 * Return: @buf.
 */
const char *tu_lat_placement(const struct tu_lat *L, char *buf, size_t len);

/**
 * tu_lat_print() - the result lines: "WHAT: min .. ns, median .., p99 .., max .." and, with a
 *                  baseline, the futex line and "ratio WHAT/futex (median): x.xx".
 * @L:    the run
 * @what: "doorbell", "interrupt"
 */
void tu_lat_print(const struct tu_lat *L, const char *what);

/**
 * tu_lat_json() - add pin, cpu, peer_cpu; min_ns .. mean_ns; with a baseline baseline_min_ns
 *                 .. baseline_mean_ns and ratio (3 decimals), else baseline_median_ns and
 *                 ratio null; then verified: true.
 * @j: the object
 * @L: the run
 */
void tu_lat_json(struct json_object *j, const struct tu_lat *L);

/**
 * tu_lat_finish() - stop the futex partner and free the samples.
 * @L: the run
 */
void tu_lat_finish(struct tu_lat *L);

/* ================================================================ data patterns (util.c) */

/**
 * tu_pattern() - the 64-bit word at offset @off of a pass with seed @seed.
 * @seed: the pass's seed (tu_nonce())
 * @off:  byte offset (a multiple of 8)
 *
 * Both sides of a benchmark can compute it, so the owner of a buffer checks what arrived
 * without the data crossing back.
 */
uint64_t tu_pattern(uint32_t seed, uint64_t off);

/**
 * tu_fill() - fill @buf[0, @len) with the pattern of @seed (whole words only).
 * @buf:  the buffer (memory of a segment or window: volatile)
 * @len:  bytes
 * @seed: the seed
 */
void tu_fill(volatile void *buf, uint64_t len, uint32_t seed);

/**
 * tu_check() - count the words of @buf[0, @len) that do not hold the pattern of @seed.
 * @buf:  the buffer
 * @len:  bytes
 * @seed: the seed
 */
uint64_t tu_check(const volatile void *buf, uint64_t len, uint32_t seed);

/**
 * tu_nonce() - a fresh 32-bit value, never 0 (0 means "no session"): nonces and seeds.
 */
uint32_t tu_nonce(void);

/**
 * tu_hexdump() - hexdump(1)-style lines of @p[0, @len) on @out, offsets from @base.
 * @out:  the stream
 * @p:    the bytes (device or window memory: read byte by byte)
 * @len:  how many
 * @base: the offset printed for @p[0]
 */
void tu_hexdump(FILE *out, const volatile uint8_t *p, uint64_t len, uint64_t base);

#endif
