/*
 * Per-stage timing of routed puts (SHMEM_PROFILE; prof.c owns it, docs/openshmem.md says what
 * each stage is): where a put's time goes on its way round a switchless ring, in the stages of
 * the ring seed's Fig. 4b (openshmem-switchless-ntb-ring §5.1).
 *
 * Every PE and node of a job runs on one machine and shares CLOCK_MONOTONIC, so a chunk's
 * times can be taken by whoever holds it and carried on: a stamp beside its descriptor in each
 * ring (xp_ring.stamp) holds when the chunk started and when its last stage ended, and the
 * stage times so far. Each stage boundary charges the time since the previous one to the stage
 * that just ended, so the stages of a chunk add up to its whole time. The node that delivers
 * the chunk adds them to its sums for the source PE and sends those back with the
 * acknowledgement; the node next to the source adds them to the PE's control page, with the
 * ack stage. The PE prints the sums at shmem_finalize. Off (the default), no time is read and
 * no stamp is written: every hook is one predictable branch on shm.profile.
 */
#ifndef SHMEM_PROF_H
#define SHMEM_PROF_H

#include <stdatomic.h>
#include <stdint.h>

/* The stages of a routed put chunk, in the order a chunk passes them (quiet is per quiet). */
enum shm_stage {
    SHM_ST_WAIT,     /* put: waiting for a free staging chunk and room in the next ring */
    SHM_ST_STAGE,    /* put: copy into the staging chunk, DMA descriptor queued */
    SHM_ST_DMA,      /* data across a link before the last hop: DMA (or CPU stores) to its end */
    SHM_ST_PUBLISH,  /* from the data's arrival to writing the descriptor into the next inbox */
    SHM_ST_DOORBELL, /* descriptor written -> the next node's transfer thread has it */
    SHM_ST_RELAY,    /* node: from taking the message to starting its data onward */
    SHM_ST_DELIVER,  /* last node: the DMA (or copy) into the target's symmetric heap */
    SHM_ST_ACK,      /* delivered -> its acknowledgement in the source PE's control page */
    SHM_ST_QUIET,    /* per quiet: the later of its start and the last ack -> its return */
    SHM_NSTAGES
};
#define SHM_ST_CARRIED (SHM_ST_RELAY + 1) /* the stages a stamp carries */

extern const char *const shm_stage_name[SHM_NSTAGES];

/* Beside each descriptor of a ring: the times of the put chunk it carries. */
struct xp_stamp {
    uint64_t t0;                  /* the chunk's start in shmem_put (ns, CLOCK_MONOTONIC) */
    uint64_t mark;                /* the end of its last stage */
    uint32_t ns[SHM_ST_CARRIED];  /* each stage so far */
    uint32_t hops;                /* nodes it has reached */
    uint32_t pad;
};

/* A node's sums of the chunks it delivered for one source PE since its last ack: the ack's
 * data. */
struct xp_prof_sums {
    uint64_t chunks, bytes, hops;
    uint64_t ns[SHM_ST_DELIVER + 1];
    uint64_t total;     /* sum of (delivered - t0) */
    uint64_t delivered; /* sum of the delivery times: the ack stage is chunks * applied - this */
};

/* In each PE's control page, written by the node that applies its acks. */
struct shm_prof_area {
    _Atomic uint64_t chunks, bytes, hops, total; /* total: start -> ack applied */
    _Atomic uint64_t ns[SHM_ST_ACK + 1];
    _Atomic uint64_t last_ack; /* when the last ack with times was applied */
};

struct shm_ctrl;
/* shm.profile from SHMEM_PROFILE (off, on: a table at finalize, json: one line). */
int shm_prof_mode(void);
/* Start a chunk's stamp; end the stage that runs until now (or until t). */
void xp_stamp_start(struct xp_stamp *st);
void xp_stamp_to(struct xp_stamp *st, enum shm_stage s);
void xp_stamp_at(struct xp_stamp *st, enum shm_stage s, uint64_t t);
/* Delivery of a chunk of len bytes whose last stage (deliver) ends now: into sums. */
void xp_prof_delivered(struct xp_prof_sums *sum, struct xp_stamp *st, uint32_t len);
/* An ack's sums applied to a PE's control page. */
void shm_prof_ack(struct shm_ctrl *c, const struct xp_prof_sums *sum);
/* A quiet that waited for acks since q0 returns now. */
void shm_prof_quiet(uint64_t q0);
/* At shmem_finalize, after its barrier: the PE's sums on stderr. */
void shm_prof_report(void);

#endif
