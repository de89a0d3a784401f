/*
 * libshmem internals: the job (who am I, where are the others), the symmetric heaps and
 * their control regions, and the helpers every routine uses.
 */
#ifndef SHMEM_INTERNAL_H
#define SHMEM_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <ntblend/seg.h>

#include "env_defs.h"
#include "prof.h"
#include "shmem.h"
#include "wpol.h"

/* The control region at the start of every heap: barriers, global exit. One page, so the
 * user heap after it stays page aligned. */
#define SHM_CTRL_SIZE 4096u
#define SHM_MAGIC 0x53484d31u /* "SHM1" */

#define SHM_RBUF_SLOTS 4u /* get replies in flight per PE (routed gets) */
#define SHM_BAR_ROUNDS 16 /* dissemination barrier: up to 2^16 PEs */

struct shm_ctrl {
    _Atomic uint32_t magic;
    _Atomic uint32_t notify;    /* futex word: bumped by every wake-up sent to this PE asleep */
    _Atomic int32_t exit_code;  /* set by shmem_global_exit: status + 1 */
    _Atomic uint32_t finished;  /* shmem_finalize passed its barrier: the heap goes away */
    _Atomic uint32_t lost;      /* health.c: this PE stopped because it lost PE (lost - 1) */
    _Atomic uint32_t lost_why;  /* ... whose process ended (1) or whose path went down (2) */
    _Atomic uint64_t bar_flag[SHM_BAR_ROUNDS]; /* dissemination barrier: round k's last barrier,
                                                * stored by PE (me - 2^k) mod n only */
    _Atomic uint64_t bar_count;   /* PE 0's: arrivals at the counter barrier, all barriers */
    _Atomic uint64_t bar_release; /* the last counter barrier that released us */
    /* Replies of the routed transport (xport.c), written by the node next to this PE. */
    _Atomic uint64_t acks;                    /* routed puts and AMOs completed */
    _Atomic uint64_t amo_seq;                 /* last AMO reply's sequence number */
    uint64_t amo_val;                         /* its value */
    _Atomic uint64_t rbuf_seq[SHM_RBUF_SLOTS]; /* get reply slot filled: its sequence number */
    /* Counter barrier with more PEs than CPUs (sync.c): the last barrier this PE arrived at,
     * and the CPU it arrived on, so that a waiter knows whether a PE it waits for needs its
     * CPU. Own cache line: every waiter reads it, only this PE writes it. */
    _Alignas(64) _Atomic uint64_t bar_arrived;
    _Atomic int32_t bar_cpu;
    int32_t pin_cpu; /* the one CPU this PE may run on, -1 if more; set before the first barrier */
    /* Counter barrier of pinned PEs (sync.c), each in its own cache line: in the first PE of
     * each CPU, arrivals of that CPU's PEs; in PE 0, CPUs all of whose PEs have arrived. */
    _Alignas(64) _Atomic uint64_t bar_local;
    _Alignas(64) _Atomic uint64_t bar_cpus;
    /* Someone sleeps on notify: senders must FUTEX_WAKE. Own cache line, which changes only
     * when a thread of ours goes to sleep: every sender looks at it right after its store to
     * the line above (a barrier's arrival), and there it would wait for that line. */
    _Alignas(64) _Atomic uint32_t sleeping;
    /* SHMEM_PROFILE (prof.c): our routed puts' stage times, added by the node next to us. */
    _Alignas(64) struct shm_prof_area prof;
};
_Static_assert(sizeof(struct shm_ctrl) <= SHM_CTRL_SIZE, "the control region is one page");

struct shm_pe {
    uint32_t node;
    int host;             /* index into shm.hosts */
    void *base;           /* the PE's heap, mapped here (ours: seg_map_local) */
    seg_remote_t *remote; /* NULL for ourselves */
    seg_map_t *map;
    seg_seq_t *seq;       /* a sequence on map: did the path fail since the last barrier? */
};

struct shm_state {
    bool initialized, finalized;
    int me, npes;
    int relay_slow_pe;  /* for tests: a node holds routed puts to this PE 2 ms (-1: none) */
    uint32_t job;
    size_t heap_size; /* user part, SHMEM_SYMMETRIC_SIZE */
    size_t seg_size;  /* control region + heap */
    bool debug;
    seg_desc_t *sd;
    seg_local_t *local;
    struct shm_pe *pes;
    size_t rbuf_off, rbuf_size; /* routed get replies: after the heap in every segment */
    size_t globals_off;         /* the program's globals: after the reply buffer */
    /* The hosts of the job (route.c): every host with a PE, and on a ring every host of it. */
    int nhosts, myhost;
    struct shm_host *hosts;
    bool routed;      /* some PEs are not directly reachable: ring transport */
    bool failover;    /* SHMEM_RING_FAILOVER on a ring: no other host's PE is mapped, every
                       * cross-host operation is a message that survives a ring link going
                       * down (route.c, xport.c, relay.c) */
    bool sw_atomics;  /* SHMEM_ATOMICS=software: cross-host AMOs by the target's node */
    int threads;      /* SHMEM_RING_THREADS: transfer threads per adapter of each node */
    size_t chunk;     /* SHMEM_RING_CHUNK, or chosen by shm_plan */
    bool chunk_given; /* SHMEM_RING_CHUNK was set */
    int timeout_ms;   /* SHMEM_BOOTSTRAP_TIMEOUT */
    bool crowded;     /* more PEs than CPUs on this machine: yield at once, count at PE 0 */
    bool asym;        /* wpol_asym_init: a barrier's arrival needs no fence of its own (sync.c) */
    int copy_helper;  /* SHMEM_COPY_HELPER: large copies to mapped PEs by two threads (copy.c) */
    int profile;      /* SHMEM_PROFILE: 0 off, 1 a table at finalize, 2 JSON (prof.c) */
};

extern struct shm_state shm;

/* env.c: the environment, as env_defs.h's table says. shm_env_text: the value (SHMEM_NAME,
 * else SMA_NAME), NULL when unset or empty. shm_env_num: a NUM or SIZE variable, dflt when
 * unset, within the table's bounds (shm_env_num_in: within min..max); shm_env_flag: a FLAG;
 * shm_env_word: a WORD's choice (0 when unset). A bad value stops the program with a message
 * that says what to give. shm_env_help: SHMEM_INFO's text. */
enum shm_env_kind { SHM_KIND_SIZE, SHM_KIND_NUM, SHM_KIND_FLAG, SHM_KIND_WORD, SHM_KIND_TEXT };
enum shm_env_who { SHM_FOR_USER, SHM_FOR_LAUNCHER, SHM_FOR_TEST };
enum shm_env_id {
#define SHM_ENV_ID(id, ...) SHM_ENV_##id,
    SHM_ENV_TABLE(SHM_ENV_ID)
#undef SHM_ENV_ID
};
const char *shm_env_text(enum shm_env_id id);
long long shm_env_num(enum shm_env_id id, long long dflt);
long long shm_env_num_in(enum shm_env_id id, long long dflt, long long min, long long max);
bool shm_env_flag(enum shm_env_id id);
int shm_env_word(enum shm_env_id id);
void shm_env_help(FILE *out);

/* CLOCK_MONOTONIC in ns, and a spin loop's pause: the wait policy's (src/wait). */
static inline uint64_t shm_now_ns(void) { return wpol_now_ns(); }
static inline void shm_relax(void) { wpol_relax(); }

static inline struct shm_ctrl *shm_ctrl_of(int pe) { return (struct shm_ctrl *)shm.pes[pe].base; }
static inline char *shm_heap_of(int pe) { return (char *)shm.pes[pe].base + SHM_CTRL_SIZE; }

/* diag.c: a fatal error (the program stops) and SHMEM_DEBUG's messages. */
void shm_fatal(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
void shm_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void shm_require_init(const char *who);
/* The address of symmetric object `addr` (ours) in PE pe's segment as mapped here; NULL if
 * addr is not symmetric or pe is not mapped (reached through the ring's nodes). */
void *shm_translate_or_null(const void *addr, int pe);

/* The library's reserved symmetric area at the end of every heap (same offset everywhere),
 * indexed by world PE: pairwise sync counters for teams/active sets and collect sizes. */
struct shm_scratch {
    _Atomic uint32_t wake; /* futex word: bumped by every arrival at / release of this PE */
    uint32_t pad[15];
    /* followed by: _Atomic uint32_t arrive[npes], release[npes]; uint64_t nelems[npes] */
};
size_t shm_scratch_size(void);
struct shm_scratch *shm_scratch_of(int pe);

/* A team or active set: its members as world PEs, in team order. */
struct shm_team {
    int n, me;  /* size, this PE's index (-1: not a member) */
    int *pes;   /* world PE of each index */
    int world;  /* 1: the world team (its sync is the world barrier) */
    shmem_team_config_t config;
};
/* team.c */
void shm_team_init(void);
void shm_team_fini(void);
void shm_team_sync(const struct shm_team *t);
/* A team for the active set (PE_start, 2^logstride, size); fatal if this PE is not in it. */
void shm_aset(struct shm_team *t, const char *who, int start, int logstride, int size);

/*
 * xport.c: every access to another PE's memory goes through these. off is the object's offset
 * in the PE's segment (symmetric: the same on every PE). A PE whose segment is mapped here
 * (same host, or reached through an NTB window) is accessed directly; any other goes by the
 * routed transport: messages forwarded by the nodes (transfer threads) of the hosts between.
 */
enum shm_amo_op {
    SHM_AMO_FETCH, SHM_AMO_SET, SHM_AMO_SWAP, SHM_AMO_CSWAP,
    SHM_AMO_ADD, SHM_AMO_AND, SHM_AMO_OR, SHM_AMO_XOR,
};
#define SHM_AMO_WAKE 0x80u /* or-ed into op: afterwards wake the target PE's waiters */

struct shm_host {
    uint32_t node;
    int ring_pos;   /* position around the ring (-1: not on it) */
    int first_pe;   /* lowest PE on this host, -1 if none */
    int adapter;    /* our adapter that reaches it directly, -1 if none (or us) */
};

size_t shm_off(const char *who, const void *addr, int pe); /* fatal unless symmetric */
bool shm_off_ok(const void *addr, size_t *off);
/* globals.c: the program's data and bss, remotely accessible. shm_globals_size() is what the
 * segment holds for them (page multiple, after the get reply buffer at shm.globals_off);
 * shm_globals_init() moves them into our segment once it is mapped (before anyone connects);
 * shm_globals_off() says whether addr is one of them and its offset in the segment;
 * shm_globals_fini() gives the program private memory again. */
size_t shm_globals_size(void);
void shm_globals_init(void);
bool shm_globals_off(const void *addr, size_t *off);
void shm_globals_fini(void);
static inline void *shm_direct(int pe, size_t off)
{ return shm.pes[pe].base ? (char *)shm.pes[pe].base + off : NULL; }
void shm_put(int pe, size_t off, const void *src, size_t len);
/* A copy to (a put) or from (get) a mapped PE: large ones with a helper thread too, when
 * that pays (copy.c). */
void shm_copy(void *dst, const void *src, size_t len, bool get);
void shm_copy_fini(void);
void shm_get(int pe, void *dst, size_t off, size_t len);
uint64_t shm_amo(int pe, size_t off, unsigned op, unsigned size, uint64_t v, uint64_t cond);
void shm_quiet_all(void);
/* Wake-ups: if PE pe sleeps, bump its notify word and FUTEX_WAKE it (direct PEs only). */
void shm_poke_direct(int pe);
/* Waiting (wait.c, the wait policy of src/wait). Until pred(arg) holds: spin, yield, then
 * sleep on our notify word (100 ms at a time, looking for a global exit); no spin when more
 * PEs than CPUs share the machine or, with pe >= 0, when PE pe (the one that will end the
 * wait) last ran on our CPU; needs_cpu, if given, decides that instead. */
void shm_wait_for(bool (*pred)(void *), void *arg, bool (*needs_cpu)(void *), int pe);
void shm_wait_notify(bool (*pred)(void *), void *arg);
/* A condition for them: *word >= want (arg: a struct shm_u64_wait). */
struct shm_u64_wait {
    _Atomic uint64_t *word;
    uint64_t want;
};
bool shm_u64_reached(void *arg);
/* Did PE pe, at its last barrier, run on the CPU we run on now? */
bool shm_pe_here(int pe);
/* Publish our CPU for shm_pe_here (at every barrier; a store only when it changed). */
void shm_note_cpu(void);
/* Waits that nothing wakes (puts into a variable, lock words, ring room): the caller's loop,
 * with wpol_end once its condition holds. Naps when long; looks for a global exit. */
void shm_poll_begin(struct wpol *w);
void shm_poll_pause(struct wpol *w);
/* After the first barrier (every PE has published its pin_cpu): choose how later ones count. */
void shm_barrier_setup(void);
/* The same until *word >= want (counters and sequence numbers written by other PEs);
 * shm_wait_signal: for a barrier flag that PE pe stores with no fence (sync.c's
 * signal_store), so the sleep fences for it (wpol_asym_fence) when shm.asym holds. */
void shm_wait_u64(_Atomic uint64_t *word, uint64_t want);
void shm_wait_signal(_Atomic uint64_t *word, uint64_t want, int pe);
/* Staging chunks per side for routed puts by DMA (a ring host has two); at most XP_SLOTS. */
#define SHM_PUT_STAGES 8u
void shm_futex_wake(_Atomic uint32_t *w);
void shm_futex_wait(_Atomic uint32_t *w, uint32_t seen, long ms);
/* Set-up (init.c calls these): the job's hosts, the ring, and the connections to nodes. */
void shm_xport_init(uint32_t self);
/* The routed transport's chunk: shm.chunk and what depends on it (shm.rbuf_size). */
void shm_set_chunk(size_t chunk);
/* Failover: where the nodes write each target PE's last acknowledged request (in a PE's
 * segment, after the get replies), and how large that is. */
static inline size_t shm_fo_acks_size(void) { return ((size_t)shm.npes * 8 + 4095) & ~(size_t)4095; }
static inline size_t shm_fo_acks_off(void) { return shm.rbuf_off + SHM_RBUF_SLOTS * shm.chunk; }
/* ... and then the chunks that keep large puts' data until acknowledged (the DMA source). */
#define SHM_FO_POOL 32
static inline size_t shm_fo_pool_off(void) { return shm_fo_acks_off() + shm_fo_acks_size(); }
void shm_xport_connect(void);
void shm_xport_fini(void);
/* Failover: from every wait about to sleep (shm_check_exit), as what it waits for may hang on
 * a request of ours that was lost: send again what is due (xport.c). */
void shm_xport_poll(void);
bool shm_xport_needed(void);
uint64_t shm_amo_at(void *p, unsigned op, unsigned size, uint64_t v, uint64_t cond);
/* The job from oshrun's environment: shm.npes/me/job/heap and seg sizes/pes[].node; opens
 * the segment descriptor. relay: we are a node (oshrelay), not a PE. Our node id to *self. */
void shm_job_env(uint32_t *self, bool relay);
int shm_host_of_node(uint32_t node);
/* seg_connect with the bootstrap timeout, retrying for up to 10 s while the adapter has no free
 * LUT entry (a job that just ended may still be giving its entries back) or the owner's agent
 * did not answer in time (busy with the connects of a large job). */
int shm_connect(seg_desc_t *sd, seg_remote_t **r, uint32_t node, uint32_t id, int adapter);
/* The node service of a host (relay.c): run by oshrelay on every host of the job. */
int shmemi_relay_main(void);

/* plan.c: after shm_xport_init, the heap the placement can map: shm.heap_size becomes the
 * largest that fits, up to the default, unless heap_given (SHMEM_SYMMETRIC_SIZE), which is
 * checked instead; stops with a message when nothing fits. globals: the program's (0 when
 * not known, as in a node). */
void shm_plan(bool heap_given, size_t globals);
/* oshrelay --check: the job's environment and placement, checked as the PEs will. */
int shmemi_check_main(void);

/* heap.c */
void shm_heap_init(void);
void shm_heap_fini(void);
/* Map our segment (mapped at base) a second time with the heap on an address aligned for
 * shmem_align; returns the new base. shm_heap_unplace() unmaps it. */
void *shm_heap_place(void *base);
void shm_heap_unplace(void);

/* sync.c */
void shm_barrier(void);
/* Called by every wait that can block, once it has spun and is about to sleep: leave on a
 * global exit, and (health.c) stop with a message when a PE the job needs is lost. */
void shm_check_exit(void);
/* health.c: is every PE mapped here still there? Reads each connection's state word (no
 * syscall), at most every SHM_HEALTH_MS; a lost PE is fatal, with the PE, its host and why. */
#define SHM_HEALTH_MS 20
#define SHM_EXIT_LOST 75 /* a PE's exit status when it stopped on a lost PE (oshrun knows it) */
void shm_check_peers(void);
/* Fatal when the job's launcher (SHMEM_LAUNCHER_PID) is gone; at most every 200 ms. */
void shm_check_launcher(void);
/* After a barrier: did the path to a PE mapped here fail since the last one (a store through
 * its window may have gone nowhere, and a load read all ones)? Then that PE is lost, as
 * above, before anyone reads what it was sent. A sequence check per PE: loads only. */
void shm_check_paths(void);
/* A transfer to host index `host` found its link down (-ENOLINK): stop the same way (naming
 * the first PE of that host, if it has one). */
_Noreturn void shm_path_lost(int host);
/* Failover: hosts a and b (with PEs) no longer reach each other around the ring (links `dead`
 * are down): stop with a message. */
_Noreturn void shm_ring_cut(int a, int b, const char *dead);

/* util */
int shm_parse_size(const char *s, size_t *out);

#endif
