/*
 * libntbtool: what the tools and benchmarks in tools/ share, built as a static library
 * (tools/lib/) and linked by every tool. This header only declares; it owns:
 *
 *   - numbers, sizes, clocks, futexes, the futex ping-pong baseline, CPU placement, latency
 *     statistics, JSON output helpers and the data pattern both sides of a benchmark can
 *     compute (util.c);
 *   - the command line every tool parses the same way: one getopt loop, one set of common
 *     options (-a, --peer, --port, --node, --json, --no-spawn, --session, --timeout,
 *     --serve, --once, --quiet) and the same messages for bad values (cmdline.c);
 *   - opening an adapter with messages that say what to do, doorbell waits that sleep,
 *     starting and reaping the peer half of a two-host tool, and the scratchpad/doorbell
 *     rendezvous of ntb_perf and ntb_pingpong (ntbpeer.c);
 *   - the segment-API session of scibench, dma_bench and intr_bench (session.c);
 *   - the few facts about the fabric the tools report: host names, the latency model (fabinfo.c).
 *
 * Only public headers (include/ntblend/) are needed to use it. Functions return 0 or
 * -errno unless their comment says otherwise; the ones that fail after printing a message
 * say so.
 */
#ifndef NTBLEND_NTBTOOL_H
#define NTBLEND_NTBTOOL_H

#include <getopt.h>
#include <json-c/json.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "ntblend/ntb.h"
#include "ntblend/seg.h"

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

/* ================================================================ the command line (cmdline.c) */

/*
 * The options several tools take, parsed once here. A tool lists which of them it takes
 * (TU_OPT_* bits) and its own options in a getopt_long table whose values are characters or
 * TU_O_TOOL and up; tu_getopt() merges the two tables, runs the loop, and hands the tool's
 * options to its callback.
 */
struct tu_common {
    int adapter;      /* -a, --adapter N (-1: not given) */
    int pidx;         /* --peer PIDX (NTB tools; default 0) */
    int port;         /* --port NODE (NTB tools; -1: not given) */
    int node;         /* --node NODE (segment tools; -1: not given) */
    int timeout_s;    /* --timeout S (default 20) */
    uint32_t session; /* --session ID */
    bool session_set;
    bool json, no_spawn, serve, once, quiet;
};

#define TU_OPT_ADAPTER (1u << 0)  /* -a, --adapter N */
#define TU_OPT_PEER (1u << 1)     /* --peer PIDX, --port NODE */
#define TU_OPT_NODE (1u << 2)     /* --node NODE */
#define TU_OPT_JSON (1u << 3)     /* --json */
#define TU_OPT_SPAWN (1u << 4)    /* --no-spawn, --serve, --quiet, --timeout S */
#define TU_OPT_ONCE (1u << 5)     /* --once */
#define TU_OPT_SESSION (1u << 6)  /* --session ID */
/* The two families: NTB tools meeting over scratchpads, segment tools over a session. */
#define TU_OPTS_NTB (TU_OPT_ADAPTER | TU_OPT_PEER | TU_OPT_JSON | TU_OPT_SPAWN | TU_OPT_ONCE)
#define TU_OPTS_SEG (TU_OPT_ADAPTER | TU_OPT_NODE | TU_OPT_JSON | TU_OPT_SPAWN | TU_OPT_SESSION)

enum { TU_O_TOOL = 0x200 }; /* a tool's own long-only options are numbered from here */

/*
 * What tu_getopt() needs to know about a tool. The callback gets each option of the tool's
 * own: return 0, or nonzero when its value is bad (tu_getopt() then says so with bad_hint).
 */
struct tu_cmdline {
    unsigned common;              /* TU_OPT_* */
    int adapter_max;              /* largest -a accepted */
    const char *shortopts;        /* the tool's short options besides "a:" and "h" */
    const struct option *options; /* the tool's own long options, { 0 }-terminated */
    int (*option)(void *ctx, int opt, const char *arg);
    void *ctx;
    void (*help)(FILE *out);
    const char *bad_hint;         /* appended to "see 'PROG --help'" ("" for none) */
};

/**
 * tu_getopt() - parse the command line of a tool.
 * @argc: from main()
 * @argv: from main()
 * @cl:   the tool's options
 * @c:    the common options, tu_common_init() and the tool's defaults applied first
 *
 * Prints help on -h/--help, and the usual messages for unknown options, bad values and stray
 * arguments.
 * Return: -1 to go on; otherwise the exit status for main() (0 after --help, 2 on errors).
 */
int tu_getopt(int argc, char **argv, const struct tu_cmdline *cl, struct tu_common *c);

/**
 * tu_common_init() - the defaults of the common options: adapter, port and node -1, pidx 0,
 *                    timeout 20 s, everything else off.
 * @c: the options
 */
void tu_common_init(struct tu_common *c);

/* ================================================================ opening (ntbpeer.c) */

/**
 * tu_check_env() - refuse early, with the command to use, when not started by `ntblend run`.
 *
 * Return: 0, or -ENOENT after a message.
 */
int tu_check_env(void);

/**
 * tu_fabric_name() - the name of the fabric this process runs on: $NTBLEND_FABRIC as
 *                    `ntblend run` sets it, else "default" (the library's rule).
 */
const char *tu_fabric_name(void);

/**
 * tu_adapter_count() - the number of NTB adapters of this host.
 *
 * Return: the count, or -errno after a message (fabric down, not started by `ntblend run`).
 */
int tu_adapter_count(void);

/**
 * tu_open() - open adapter @index of this host, saying what to do when that fails.
 * @index: the adapter index
 *
 * Return: the adapter, or NULL + errno after a message.
 */
struct ntb_dev *tu_open(int index);

/**
 * tu_open_for_port() - open the adapter through which node @port is a peer.
 * @adapter: the adapter to look at, or -1 for any adapter of this host
 * @port:    the peer's node id
 * @pidx:    its peer index on that adapter
 *
 * Return: the adapter, or NULL + errno after a message.
 */
struct ntb_dev *tu_open_for_port(int adapter, int port, int *pidx);

/**
 * tu_open_peer() - open the adapter and peer of an NTB tool's -a/--peer/--port options and
 *                  check that it has the scratchpads and doorbells the rendezvous needs.
 * @c:    the common options (adapter, pidx, port)
 * @pidx: the peer index to use
 *
 * Return: the adapter, or NULL after a message.
 */
struct ntb_dev *tu_open_peer(const struct tu_common *c, int *pidx);

/**
 * tu_check_peer() - is @pidx a peer index of @ntb?
 * @ntb:  the adapter
 * @pidx: the peer index
 *
 * Return: 0, or -EINVAL after a message.
 */
int tu_check_peer(struct ntb_dev *ntb, int pidx);

/**
 * tu_wait_link() - wait up to @timeout_ms for the link to peer @pidx (sleeping).
 * @ntb:        the adapter
 * @pidx:       the peer
 * @timeout_ms: how long
 *
 * Return: 0 or -ENOTCONN.
 */
int tu_wait_link(struct ntb_dev *ntb, int pidx, int timeout_ms);

/* ================================================================ doorbells (ntbpeer.c) */

/*
 * Waiting for some doorbell bits while other users' bits may be pending: a pending unmasked
 * bit we do not consume would make every wait return at once (a spin), so bits that are not
 * ours get masked while we wait, and the mask is restored at the end (tu_db_restore), which
 * raises their event again for whoever owns them.
 */
struct tu_db {
    struct ntb_dev *ntb;
    uint64_t masked; /* bits we masked */
};

/**
 * tu_db_wait() - sleep until one of the doorbell bits @want is pending.
 * @d:          the waiter
 * @want:       the bits
 * @timeout_ms: < 0: no limit
 *
 * Return: the pending wanted bits (not cleared), 0 on timeout, or -errno.
 */
int64_t tu_db_wait(struct tu_db *d, uint64_t want, int timeout_ms);

/** tu_db_restore() - unmask the bits tu_db_wait() masked. */
void tu_db_restore(struct tu_db *d);

/* ================================================================ the peer process (ntbpeer.c) */

/**
 * tu_spawn_peer() - start `ntblend run --host HOST -- <this program> ARGS...`, the peer half
 *                   of a two-host tool.
 * @host: where
 * @args: its arguments, NULL-terminated
 *
 * `ntblend` is looked for next to this executable. The child's stdout goes to our stderr, so
 * --json output stays one object; it gets SIGTERM when we die.
 * Return: the child's pid, or -errno after saying what to do.
 */
pid_t tu_spawn_peer(const char *host, const char *const *args);

/**
 * tu_child_done() - has child @pid exited?
 * @pid: the child
 *
 * Return: its exit status (>= 0; 128 + signal when killed) once it has, -EAGAIN while it runs.
 */
int tu_child_done(pid_t pid);

/**
 * tu_reap_peer() - wait up to @timeout_ms for the peer process to exit, then terminate it.
 * @pid:        the child
 * @timeout_ms: how long it may take (sleeping in 10 ms steps)
 *
 * Return: its exit status.
 */
int tu_reap_peer(pid_t pid, int timeout_ms);

/* ================================================================ rendezvous (ntbpeer.c) */

/*
 * The two-host NTB tools meet like Linux ntb_perf: over scratchpads and doorbells only. The
 * client writes a nonce into the server's HELLO scratchpad and rings DB_HELLO, repeating
 * every 100 ms until the server answers (it may start later); the server echoes the nonce
 * into the client's scratchpad and rings DB_READY. Commands go the same way (CMD scratchpad
 * + DB_CMD). Doorbell bits are per adapter, so both directions may use the same numbers.
 */
#define TU_DB_HELLO (1ull << 0)  /* client -> server */
#define TU_DB_CMD (1ull << 1)    /* client -> server */
#define TU_DB_READY (1ull << 2)  /* server -> client */
#define TU_DB_RESULT (1ull << 3) /* server -> client */
#define TU_DB_PING (1ull << 4)   /* client -> server (pingpong) */
#define TU_DB_PONG (1ull << 5)   /* server -> client (pingpong) */
#define TU_DB_ALL 0x3full

/* Scratchpads on the server's adapter (written by the client)... */
enum { TU_SP_NONCE = 0, TU_SP_CMD = 1, TU_SP_ARG0 = 2 };
/* ... and on the client's adapter (written by the server). */
enum { TU_SPC_NONCE = 0, TU_SPC_STATUS = 1, TU_SPC_ARG0 = 2 };
#define TU_SPADS_NEEDED 6

enum { TU_CMD_NONE = 0, TU_CMD_DONE = 1, TU_CMD_VERIFY = 2 };

/**
 * tu_check_hw() - does @ntb have the scratchpads and doorbell bits the rendezvous needs?
 * @ntb:  the adapter
 * @pidx: the peer
 *
 * Return: 0, or -ENOSPC after a message saying what to set in the topology.
 */
int tu_check_hw(struct ntb_dev *ntb, int pidx);

/**
 * tu_hello() - client: say hello until the server answers with our nonce.
 * @ntb:        the adapter
 * @db:         our doorbell waiter
 * @pidx:       the server's peer index
 * @nonce:      tu_nonce()
 * @peer_pid:   the spawned server (> 0): give up early when it exits
 * @timeout_ms: give up after this long
 *
 * Return: 0, -ETIMEDOUT, -ECHILD (after a message) or -errno.
 */
int tu_hello(struct ntb_dev *ntb, struct tu_db *db, int pidx, uint32_t nonce, pid_t peer_pid,
             int timeout_ms);

/** tu_send_cmd() - client: send command @cmd (its arguments already in the server's spads). */
void tu_send_cmd(struct ntb_dev *ntb, int pidx, uint32_t cmd);

/** tu_answer() - server: echo @nonce with @status into the client's spads and ring READY. */
void tu_answer(struct ntb_dev *ntb, int pidx, uint32_t nonce, uint32_t status);

/*
 * The client half of ntb_perf and ntb_pingpong: the adapter, the server's peer index and
 * host, the spawned server and whether the hello was answered.
 */
struct tu_client {
    struct ntb_dev *ntb;
    struct tu_db db;
    int pidx, peer_port;
    char peer_host[64];
    pid_t peer_pid;       /* the spawned server (-1: none) */
    bool session;         /* the server answered: it gets TU_CMD_DONE at the end */
};

/**
 * tu_client_start() - open the adapter, wait for the link, start the server on the peer
 *                     (`--serve --port OUR_PORT --once --quiet --timeout S` + @args, unless
 *                     --no-spawn) and meet it.
 * @cl:    the client (zeroed by the caller; tu_client_finish() it in every case)
 * @c:     the common options
 * @clear: our doorbell bits to clear before meeting (stale answers of an earlier run)
 * @args:  extra arguments for the server, NULL-terminated (NULL: none)
 *
 * Return: 0, or nonzero after a message.
 */
int tu_client_start(struct tu_client *cl, const struct tu_common *c, uint64_t clear,
                    const char *const *args);

/**
 * tu_client_finish() - tell the server we are done, reap it, close the adapter.
 * @cl: the client
 * @rc: the tool's exit status so far
 *
 * Return: @rc, or 1 when it was 0 and the server exited with an error.
 */
int tu_client_finish(struct tu_client *cl, int rc);

/*
 * The server half of ntb_perf and ntb_pingpong: tu_server_start(), then tu_server_wait() in a
 * loop, then tu_server_finish().
 */
struct tu_server {
    struct ntb_dev *ntb;
    struct tu_db db;
    int pidx;
    int idle_ms; /* with --once: give up when the client stays silent this long (-1: never) */
};

/**
 * tu_server_start() - open the adapter, clear @clear, reset the command scratchpad and (unless
 *                     --quiet) say whom we serve.
 * @sv:    the server (zeroed by the caller)
 * @c:     the common options
 * @clear: our doorbell bits to clear
 *
 * Return: 0, or nonzero after a message.
 */
int tu_server_start(struct tu_server *sv, const struct tu_common *c, uint64_t clear);

/**
 * tu_server_wait() - sleep until one of @want rings.
 * @sv:   the server
 * @want: the bits
 *
 * Return: the bits (> 0), or 0 after a message when the client stayed silent too long or the
 * wait failed.
 */
uint64_t tu_server_wait(struct tu_server *sv, uint64_t want);

/** tu_server_finish() - restore the doorbell mask and close the adapter. */
void tu_server_finish(struct tu_server *sv);

/* ================================================================ segment sessions (session.c) */

/*
 * The session of the segment benchmarks (scibench, dma_bench, intr_bench), built only from
 * the segment API. The client (the side the user starts) creates a control segment and an
 * interrupt, both with the session id, makes the segment available, and starts the server on
 * the peer host (`ntblend run --host PEER -- <tool> --serve --node CLIENT --session ID`). The
 * server connects to the control segment and to the client's interrupt, creates its own
 * interrupt (and whatever segment the tool needs), writes their ids into the control block and
 * triggers the client. Commands go the same way: the client writes one into the control block
 * and triggers the server's interrupt; the server answers with a status and triggers back.
 * Every wait sleeps (seg_intr_wait), in slices, so a side whose partner died notices.
 */
#define SU_MAGIC 0x5e6b0001u
#define SU_SLICE_MS 100 /* waits wake this often to look at the partner */

/* The control block at the start of the client's control segment. */
struct su_ctl {
    _Atomic uint32_t magic;  /* written last by the server: the fields below are valid */
    uint32_t server_node;
    uint32_t seg_id;         /* the server's data segment (0: none) */
    uint32_t intr_id;        /* the server's interrupt */
    uint64_t seg_size;
    _Atomic uint32_t cmd;    /* client -> server */
    _Atomic uint32_t cmd_seq;
    uint64_t arg[4];
    _Atomic uint32_t status; /* server -> client: result of command cmd_seq */
    _Atomic uint32_t done_seq;
    uint64_t result[4];
    char error[160];         /* the server's message when it gives up */
};

enum { SU_CMD_NONE = 0, SU_CMD_DONE = 1, SU_CMD_TOOL = 16 /* tools number theirs from here */ };
/* The commands of su_serve_segment(): arg[0] seed, arg[1] offset, arg[2] length. */
enum { SU_CMD_FILL = SU_CMD_TOOL, SU_CMD_VERIFY };

struct su_side {
    seg_desc_t *sd;
    int adapter;
    uint32_t self_node, peer_node, session;
    char peer_host[64];
    /* the control segment: owned by the client, connected by the server */
    seg_local_t *ctl_seg;
    seg_remote_t *ctl_remote;
    seg_map_t *ctl_map;
    volatile struct su_ctl *ctl;
    seg_intr_t *intr;     /* ours */
    seg_rintr_t *rintr;   /* the partner's */
    pid_t peer_pid;       /* client: the spawned server (-1: none) */
    int timeout_s;
    bool quiet;
};

/**
 * su_session_id() - the session id of a run.
 * @tag:   the tool's tag (top byte)
 * @fixed: (tag, 1) when the user starts the server by hand; else the pid below the tag, so
 *         concurrent runs on one fabric do not collide
 */
uint32_t su_session_id(uint8_t tag, bool fixed);

/**
 * su_session_of() - the session id given by --session, else su_session_id(@tag, @fixed).
 * @c:     the common options
 * @tag:   the tool's tag
 * @fixed: as su_session_id()
 */
uint32_t su_session_of(const struct tu_common *c, uint8_t tag, bool fixed);

/**
 * su_find_peer() - fill in s->adapter, s->self_node, s->peer_node and s->peer_host.
 * @s:       the side
 * @adapter: the adapter index, or -1: the one facing @node (0 without a node)
 * @node:    the peer's node id, or -1: the adapter's first peer
 *
 * Return: 0, or -errno after a message.
 */
int su_find_peer(struct su_side *s, int adapter, int node);

/**
 * su_wait() - wait for our interrupt, in slices; between slices give up if the spawned server
 *             exited or (server) the client's control segment went away.
 * @s:          the side
 * @timeout_ms: < 0: no limit
 *
 * Return: 0, -ETIMEDOUT, -ECHILD or -ENOTCONN.
 */
int su_wait(struct su_side *s, int timeout_ms);

/**
 * su_client_start() - client: create the control segment and our interrupt, start the server
 *                     (unless @no_spawn: then print the command to run) and wait until it is
 *                     ready.
 * @s:        the side, after su_find_peer() and with timeout_s set
 * @session:  the session id
 * @no_spawn: the user starts the server
 * @args:     extra arguments for the server, NULL-terminated, or NULL
 *
 * Return: 0, or -errno after a message (su_client_finish() in every case).
 */
int su_client_start(struct su_side *s, uint32_t session, bool no_spawn, const char *const *args);

/**
 * su_cmd() - client: send command @cmd (arguments in s->ctl->arg) and wait for the answer.
 * @s:          the side
 * @cmd:        SU_CMD_* or the tool's
 * @timeout_ms: how long the server may take
 *
 * Return: the server's status (>= 0), or -errno after a message.
 */
int su_cmd(struct su_side *s, uint32_t cmd, int timeout_ms);

/**
 * su_client_finish() - client: tell the server to finish (if it is there), reap it, free
 *                      everything.
 * @s: the side
 *
 * Return: the server's exit status (0 if none was spawned).
 */
int su_client_finish(struct su_side *s);

/**
 * su_client_end() - su_client_finish(), and the tool's exit status: @rc, or 1 when it was 0
 *                   and the server exited with an error (said).
 * @s:  the side
 * @rc: the tool's exit status so far
 */
int su_client_end(struct su_side *s, int rc);

/**
 * su_server_start() - server: connect to the client's control segment and interrupt, create
 *                     ours.
 * @s:           the side, with timeout_s set
 * @adapter:     -a, or -1
 * @client_node: the client's node id (--node; < 0: a message)
 * @session:     the session id
 *
 * Return: 0, or -errno after a message (su_server_finish() in every case).
 */
int su_server_start(struct su_side *s, int adapter, int client_node, uint32_t session);

/**
 * su_server_ready() - server: tell the client we are ready (or why not).
 * @s:        the side
 * @seg_id:   our data segment, or 0
 * @seg_size: its size
 * @error:    NULL, or why we are not ready (the client prints it)
 */
void su_server_ready(struct su_side *s, uint32_t seg_id, uint64_t seg_size, const char *error);

/**
 * su_server_next() - server: wait for the next command.
 * @s:        the side
 * @seen_seq: the last command sequence number seen (updated)
 *
 * Return: the command (SU_CMD_DONE when the client is gone), or -errno.
 */
int su_server_next(struct su_side *s, uint32_t *seen_seq);

/**
 * su_server_reply() - server: answer command @seq with @status.
 * @s:      the side
 * @seq:    the command's sequence number
 * @status: its result
 */
void su_server_reply(struct su_side *s, uint32_t seq, uint32_t status);

/** su_server_finish() - server: disconnect and free everything. */
void su_server_finish(struct su_side *s);

/**
 * su_serve_segment() - the server half of scibench and dma_bench: a segment of @size bytes on
 *                      this host, made available to the client, which asks to fill it with
 *                      a pattern (SU_CMD_FILL) or to check it (SU_CMD_VERIFY).
 * @adapter:     -a, or -1
 * @client_node: the client's node id
 * @session:     the session id
 * @size:        bytes
 * @timeout_s:   --timeout
 * @quiet:       no "serving ..." line
 *
 * Return: the exit status for main().
 */
int su_serve_segment(int adapter, int client_node, uint32_t session, uint64_t size, int timeout_s,
                     bool quiet);

/**
 * su_client_segment() - client of a segment benchmark, after su_find_peer(): start the
 *                       server with a segment of @size bytes, connect to it and check its size.
 * @s:        the side
 * @session:  the session id
 * @no_spawn: the user starts the server
 * @size:     bytes needed
 * @rseg:     the connected segment
 *
 * Return: 0, or 1 after a message (the caller cleans up @s and *@rseg).
 */
int su_client_segment(struct su_side *s, uint32_t session, bool no_spawn, uint64_t size,
                      seg_remote_t **rseg);

/**
 * su_local_segment() - create a segment of @size bytes on this host and map it.
 * @s:    the side (its descriptor)
 * @size: bytes
 * @seg:  the segment (remove it when done; NULL on failure)
 * @map:  its mapping (unmap it when done)
 *
 * Return: the mapping's address, or NULL after a message.
 */
volatile uint8_t *su_local_segment(struct su_side *s, uint64_t size, seg_local_t **seg,
                                   seg_map_t **map);

/* ================================================================ fabric facts (fabinfo.c) */

/* What the tools report about the fabric, through the public NTB API. */

/**
 * tu_host_name() - the name of the host whose node id is @port.
 * @port: the node id
 * @out:  the name
 * @len:  size of @out
 *
 * Return: 0, -ENOENT (no such node) or -errno (fabric not reachable).
 */
int tu_host_name(int port, char *out, size_t len);

/**
 * tu_latency_model() - is the fabric's latency model on?
 *
 * Return: 1, 0, or -1 when it cannot tell.
 */
int tu_latency_model(void);

#endif
