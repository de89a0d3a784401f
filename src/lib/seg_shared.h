/*
 * Memory layouts the segment library and the host agents share: a connection's event word
 * (in the connecting host's RAM, written by its agent) and an interrupt page (in the owner's
 * RAM, written by triggering hosts through an NTB window). Both are futex words in RAM files,
 * so a wake from any process that maps the page reaches the waiter.
 */
#ifndef NTBLEND_SEG_SHARED_H
#define NTBLEND_SEG_SHARED_H

#include <stdatomic.h>
#include <stdint.h>

#define SEG_EVENT_RING 16u

struct seg_event_word {
    _Atomic uint32_t seq;   /* futex: bumps with every event */
    _Atomic uint32_t state; /* enum seg_event: AVAILABLE, UNAVAILABLE or REMOVED */
    _Atomic uint32_t lost;  /* the path to the owner is down */
    _Atomic uint32_t head;  /* events posted */
    uint32_t ring[SEG_EVENT_RING];
};

/* A local segment's connection events (seg_local_watch): a page of the owner process's memory
 * that its agent writes as hosts connect to the segment, disconnect, or lose their path. The
 * reader keeps its own tail; one that falls SEG_CONN_RING behind loses the oldest. */
#define SEG_CONN_RING 255u
struct seg_conn_events {
    _Atomic uint32_t seq;  /* futex: bumps with every event */
    _Atomic uint32_t head; /* events posted */
    uint32_t pad[2];
    struct {
        uint32_t event, node_id, adapter, pad;
    } ring[SEG_CONN_RING];
};
_Static_assert(sizeof(struct seg_conn_events) <= 4096, "connection events are one page");

#define SEG_INTR_SLOTS 32u
#define SEG_INTR_PAYLOAD 112u /* the page stays one 4 KiB page: 16 + 32 * (8 + 112) */

struct seg_intr_page {
    _Atomic uint32_t count; /* futex: triggers so far */
    _Atomic uint32_t head;  /* data slots claimed */
    _Atomic uint32_t gen;   /* bumps when the page is handed to a new interrupt */
    uint32_t pad;
    struct {
        _Atomic uint32_t seq; /* index + 1 once the payload is complete */
        uint32_t len;
        uint8_t data[SEG_INTR_PAYLOAD];
    } slot[SEG_INTR_SLOTS];
};
_Static_assert(sizeof(struct seg_intr_page) <= 4096, "an interrupt page is one page");

#endif
