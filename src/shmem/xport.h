/*
 * The routed transport's wire format, shared by the PEs (xport.c) and the nodes (relay.c);
 * wire.c has the producer's side of the rings both use, route.c the ring's geometry.
 *
 * Every host of a routed job runs one node (oshrelay) that owns an inbox: a segment of the
 * host's RAM with one descriptor ring and its data slots per producer. Ring r < npes carries
 * the requests of PE r (puts, gets, AMOs) and ring npes + h the replies that host h's node
 * produced (acks, get data, AMO results). A ring has one producing host, so a producer only
 * ever competes with the threads of its own process; the consumer is one transfer thread of
 * the inbox's node. A producer writes the descriptor and its data through its NTB window
 * into the next slot, publishes the ring's head, and rings the doorbell bit of the thread
 * that consumes the ring; the consumer publishes its tail, which a producer reads only when
 * it runs out of slots. Because requests and replies travel in different rings and a node
 * never blocks on a full ring (it leaves the message where it is and serves other rings),
 * traffic around a ring cannot deadlock.
 */
#ifndef SHMEM_XPORT_H
#define SHMEM_XPORT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <ntblend/ntb.h>
#include <ntblend/seg.h>

#include "prof.h"

#define XP_MAGIC 0x58504f34u /* "XPO4" */
/* Descriptors and data slots per ring. A data slot is half a chunk: a message's data takes
 * one or two consecutive slots (its descriptor is in the first), so messages of half a chunk
 * or less (a 256 KiB put with 512 KiB chunks) have twice as many in flight in the same memory
 * as whole chunks have. */
#define XP_SLOTS 16u
#define XP_DEFAULT_CHUNK (256u << 10)
#define XP_LARGE_CHUNK (512u << 10) /* a ring job's chunk when the adapters can afford it */
#define XP_MAX_THREADS 8

enum xp_type {
    XP_PUT = 1, /* data to dst's segment at off; then an ack to src */
    XP_GET,     /* read len bytes at off of dst; reply XP_GET_DATA to src */
    XP_AMO,     /* an atomic on dst's word at off, done by dst's node */
    XP_ACK,     /* to src: n (in v) routed operations completed */
    XP_GET_DATA, /* to dst: data for reply slot `token`, sequence seq */
    XP_AMO_VAL, /* to dst: an AMO's old value (v), sequence seq */
};

struct xp_msg {
    uint8_t type, op, size;
    uint8_t lead; /* slots skipped before the data: 1 when two slots would wrap the ring */
    uint32_t origin; /* host whose node produced a reply */
    uint32_t src_pe, dst_pe;
    uint32_t len, token;
    uint64_t off, v, cond, seq;
    uint64_t sseq; /* failover: the request's number in its (src_pe, dst_pe) stream; a reply
                    * carries its request's */
};

struct xp_ring {
    _Atomic uint64_t head; /* written by the producer */
    char pad0[56];
    _Atomic uint64_t tail; /* written by the consumer */
    char pad1[56];
    struct xp_msg msg[XP_SLOTS];
    /* SHMEM_PROFILE: each put chunk's times, beside its descriptor (prof.h); written and
     * read only when profiling, so a descriptor stays one cache line. */
    struct xp_stamp stamp[XP_SLOTS];
};

struct xp_inbox {
    _Atomic uint32_t magic;
    uint32_t nrings, slots;
    uint32_t pad;
    uint64_t chunk, data_off;
};

/* Inbox geometry: a header page, the rings, then the data slots (page aligned). */
static inline size_t xp_slot_size(size_t chunk) { return chunk / 2; }
static inline size_t xp_rings_off(void) { return 4096; }
static inline size_t xp_data_off(uint32_t nrings)
{
    return (xp_rings_off() + nrings * sizeof(struct xp_ring) + 4095) & ~(size_t)4095;
}
static inline size_t xp_inbox_size(uint32_t nrings, size_t chunk)
{
    return xp_data_off(nrings) + (size_t)nrings * XP_SLOTS * xp_slot_size(chunk);
}
static inline struct xp_ring *xp_ring_at(void *inbox, uint32_t r)
{
    return (struct xp_ring *)((char *)inbox + xp_rings_off()) + r;
}
static inline char *xp_slot_data(void *inbox, uint32_t nrings, size_t chunk, uint32_t r,
                                 uint64_t slot)
{
    return (char *)inbox + xp_data_off(nrings) +
           ((size_t)r * XP_SLOTS + slot % XP_SLOTS) * xp_slot_size(chunk);
}
/* The bytes a message carries in its slots (an ack's: its stage times, with SHMEM_PROFILE). */
static inline size_t xp_data_len(const struct xp_msg *m)
{
    return m->type == XP_PUT || m->type == XP_GET_DATA || m->type == XP_ACK ? m->len : 0;
}
/* Data slots for dlen bytes (at least one: the descriptor's). */
static inline uint64_t xp_nslots(size_t dlen, size_t chunk)
{
    size_t n = (dlen + xp_slot_size(chunk) - 1) / xp_slot_size(chunk);
    return n ? n : 1;
}
/* The ring positions a message takes: its lead, then its data slots. */
static inline uint64_t xp_span(const struct xp_msg *m, size_t chunk)
{
    return m->lead + xp_nslots(xp_data_len(m), chunk);
}

/* A connection to another host's inbox, and our producer state for one of its rings. */
struct xp_link {
    int host;
    seg_remote_t *remote;
    seg_map_t *map;
    void *base;
    struct ntb_dev *dev;
    int pidx;
};

struct xp_prod {
    struct xp_link *link;
    uint32_t ring;
    uint64_t head;      /* published */
    uint64_t resv;      /* reserved (slots whose data a DMA may still be writing) */
    uint64_t tail_seen;
    pthread_mutex_t lock;
};

/* A DMA queue (channel) of one adapter. A hop keeps several chunks queued on it, so the
 * engine goes from one to the next without idling, and hands each on as it completes. */
struct xp_dmaq {
    seg_dma_queue_t *q;
    bool tried;
};
/* Claim the queue (once; false when the adapter's channels are all taken: copies by CPU). */
bool xp_dmaq_get(struct xp_dmaq *d, seg_desc_t *sd, int adapter);
void xp_dmaq_put(struct xp_dmaq *d);
/* Chunks in flight, in the order they were queued. */
struct xp_pend {
    uint64_t pos;        /* relay: its incoming ring's tail once it is done; PE: its staging chunk */
    struct xp_prod *fwd; /* where it is published when done (NULL: a delivery) */
    uint64_t idx;        /* its reserved slot there */
    struct xp_msg m;
    struct xp_stamp st;  /* SHMEM_PROFILE: its times so far */
};
struct xp_fifo {
    struct xp_pend e[XP_SLOTS];
    unsigned head, n;
};
static inline struct xp_pend *xp_fifo_first(struct xp_fifo *f) { return &f->e[f->head % XP_SLOTS]; }
static inline struct xp_pend *xp_fifo_add(struct xp_fifo *f) { return &f->e[(f->head + f->n++) % XP_SLOTS]; }
static inline void xp_fifo_pop(struct xp_fifo *f) { f->head++; f->n--; }
extern size_t xp_dma_min; /* SHMEM_DMA_MIN: hops of at least this many bytes use DMA */

uint32_t xp_inbox_id(uint32_t job, uint32_t node);
uint32_t xp_nrings(void);
/* The doorbell bit of the transfer thread that consumes ring r. */
static inline uint64_t xp_bit(uint32_t r, int threads) { return UINT64_C(1) << (r % (uint32_t)threads); }
/* Connect to host h's inbox through the adapter that reaches it (waits for it to appear). */
int xp_link_open(struct xp_link *l, seg_desc_t *sd, int host);
void xp_link_close(struct xp_link *l);
/* Would a message of dlen data bytes fit in a ring written up to head and read up to tail
 * (with the slots skipped so that its data does not wrap)? */
bool xp_fits(uint64_t head, uint64_t tail, size_t dlen);
/* Is there room for a message of dlen data bytes? (reads the consumer's tail through the
 * window only when needed) */
bool xp_has_room(struct xp_prod *p, size_t dlen);
/* Put a message (and len bytes of data) into the ring and ring the consumer's doorbell. The
 * caller holds p->lock and has checked xp_has_room. */
void xp_push(struct xp_prod *p, const struct xp_msg *m, const void *data, size_t len);
/* xp_push of a put chunk with its stamp (SHMEM_PROFILE; NULL: none): the copy is its dma
 * stage, then its publish stage ends as its descriptor is written. */
void xp_push_stamped(struct xp_prod *p, const struct xp_msg *m, const void *data, size_t len,
                     struct xp_stamp *st);
/* Before publishing a reserved put chunk at idx: end its publish stage, write its stamp. */
void xp_stamp_put(struct xp_prod *p, uint64_t idx, struct xp_stamp *st);
/* The same in two steps, for data a DMA writes into the slots meanwhile: reserve room for
 * dlen bytes (room checked): the message's place, and in *lead the slots to skip before its
 * data (its data is in slot idx + *lead; the message must carry that lead); then publish the
 * message once its data is there, in reserve order. */
uint64_t xp_reserve(struct xp_prod *p, size_t dlen, uint8_t *lead);
void xp_publish(struct xp_prod *p, uint64_t idx, const struct xp_msg *m);
/* xp_publish in two steps: the message (p->lock held), then the consumer's doorbell (the lock
 * need not be held: a doorbell only wakes the consumer, which then reads the ring's head), so
 * that a producer publishing several messages rings once, and not while its callers wait for
 * the lock. */
void xp_publish_silent(struct xp_prod *p, uint64_t idx, const struct xp_msg *m);
void xp_doorbell(struct xp_prod *p);
/* Offset of ring r's data slot idx in an inbox segment. */
size_t xp_slot_off(uint32_t r, uint64_t idx);
/* The next host on the way from host `from` to host `to` (a direct peer, or around the ring
 * the shorter way; ties go right). */
int xp_next_hop(int from, int to);
/* The host a message from `from` arrives from at host `at` (at is on its way). */
int xp_prev_hop(int from, int at);
/* Failover (SHMEM_RING_FAILOVER, route.c). A ring job then has a ring per producer and arrival
 * side in every inbox: base ring b (PE b's requests, or host b - npes's replies) arriving at
 * host `at` from its neighbour `from` is ring xp_ring_of(b, from, at), and keeps that index on
 * its way onward, the same way round. Links found down stay out of the
 * routes (xp_next_hop returns -1 when a host cannot be reached); xp_route_refresh asks the
 * fabric for the ring links' states (at most every 20 ms unless forced), ends the process with
 * a message if the hosts with PEs no longer reach each other, and says whether a link was
 * found down (xp_route_gen() then changed). */
int xp_ring_side(int from, int at);
uint32_t xp_ring_of(uint32_t base, int from, int at);
bool xp_link_dead(int a, int b);
bool xp_route_refresh(bool force);
uint32_t xp_route_gen(void);
bool xp_direct(int a, int b);
bool xp_is_reply(uint8_t type);

#endif
