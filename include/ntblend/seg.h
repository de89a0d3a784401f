/*
 * ntblend shared-memory segments: the SISCI-style cluster-wide shared-memory API that SmartIO
 * builds on (smartio-tocs-2021 §3.3, §6.1). A host contributes local segments of its memory;
 * other hosts connect to them through an NTB adapter and map them, and their CPU loads and
 * stores then reach the owner's memory directly. Also: DMA queues on the adapter's DMA engine,
 * remote interrupts (with small data payloads), and sequences that tell whether transfers in a
 * window of time may have been lost to a link failure.
 *
 * For applications started with `ntblend run --host H -- prog`. All functions return 0 or a
 * negative errno unless stated otherwise; seg_strerror() turns one into a sentence.
 *
 * Threads: every function may be called from any thread. Different handles may be used
 * concurrently. A segment, connection or mapping may be used by several threads (stores and
 * loads through a mapping need no call at all), but not removed, disconnected or unmapped
 * while another thread still uses it. A DMA queue, a local interrupt's waits, and a sequence
 * belong to one thread at a time: they keep a position (what was queued, what was seen).
 * seg_dma_on_done() calls back from a library thread.
 */
#ifndef NTBLEND_SEG_H
#define NTBLEND_SEG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What this header declares is libntblend's API, the symbols it exports (it is built with
 * -fvisibility=hidden; docs/install.md). */
#pragma GCC visibility push(default)

typedef struct seg_desc seg_desc_t;       /* an open descriptor (SCIOpen) */
typedef struct seg_local seg_local_t;     /* a segment of this host's memory */
typedef struct seg_remote seg_remote_t;   /* a connection to a (possibly remote) segment */
typedef struct seg_map seg_map_t;         /* a mapping of a segment into this process */
typedef struct seg_dma_queue seg_dma_queue_t;
typedef struct seg_intr seg_intr_t;       /* a local interrupt others can trigger */
typedef struct seg_rintr seg_rintr_t;     /* a connection to a (remote) interrupt */
typedef struct seg_seq seg_seq_t;

#define SEG_ID_AUTO 0u /* let the library pick a segment or interrupt id */

/* ---- descriptors and node ids ---- */
int seg_open(seg_desc_t **sd);
void seg_close(seg_desc_t *sd);
/** seg_local_node_id() - Node id of this host (the topology's node_id). */
int seg_local_node_id(uint32_t *node_id);
const char *seg_strerror(int err);

/* ---- local segments ---- */
/** seg_create() - Create a segment of `size` bytes of DMA-able memory on this host. id
 * SEG_ID_AUTO picks one; -EEXIST if this host already has segment id.
 */
int seg_create(seg_desc_t *sd, seg_local_t **seg, uint32_t id, size_t size);
/** seg_create_attached() - Create a segment over an existing DMA-able buffer (e.g. from
 * ntb_dma_alloc) instead of allocating: bus address and size as ntb_dma_alloc returned them.
 * The buffer belongs to the segment from then on: do not free it. A buffer smaller than the
 * peers' LUT entries shares its entries with the memory around it (created segments are padded
 * to whole entries).
 */
int seg_create_attached(seg_desc_t *sd, seg_local_t **seg, uint32_t id, uint64_t bus_addr,
                        size_t size);
/** seg_create_registered() - Create a segment of the caller's memory [addr, addr+size)
 * (page-aligned, mapped read-write): its pages are replaced, at the same address and with
 * the same contents, by memory of this host that the fabric reaches, as pinning them gives a
 * device their physical pages. seg_remove gives the caller private pages there again, with
 * what the segment held last. -EINVAL not page-aligned, -EFAULT not the caller's memory.
 */
int seg_create_registered(seg_desc_t *sd, seg_local_t **seg, uint32_t id, void *addr,
                          size_t size);
uint32_t seg_local_id(const seg_local_t *seg);
size_t seg_local_size(const seg_local_t *seg);
/** seg_prepare() - Make the segment reachable through adapter (index on this host). */
int seg_prepare(seg_local_t *seg, int adapter);
/** seg_set_available() - Only available segments can be connected; unavailable ones tell their
 * connections.
 */
int seg_set_available(seg_local_t *seg, int adapter);
int seg_set_unavailable(seg_local_t *seg, int adapter);
/** seg_remove() - Remove: connections are told, and the memory is not reused while any host
 * maps it. -EBUSY while this process still maps it (seg_unmap first).
 */
int seg_remove(seg_local_t *seg);

/* ---- remote segments ---- */
/** seg_connect() - Connect to segment `id` of host `node_id` through local adapter `adapter`;
 * waits up to timeout_ms (<0: forever) for the segment to exist and become available. node_id
 * may be this host's own. -ENOENT no such segment (after the timeout), -ECONNREFUSED not
 * available, -EHOSTUNREACH no path, -ENOSPC out of LUT entries or requester IDs, -EUSERS this
 * host holds the most connections the owner takes from one host (4096).
 */
int seg_connect(seg_desc_t *sd, seg_remote_t **seg, uint32_t node_id, uint32_t id, int adapter,
                int timeout_ms);
/** seg_disconnect() - -EBUSY while mapped (seg_unmap first). */
int seg_disconnect(seg_remote_t *seg);
size_t seg_remote_size(const seg_remote_t *seg);
uint32_t seg_remote_node_id(const seg_remote_t *seg);

/* ---- mappings ---- */
#define SEG_MAP_READONLY 1u
/** seg_map_remote() - Map [offset, offset+size) of a segment; size 0 maps to the end. The
 * pointer reaches the owner's memory directly. A writable map of a device's register BAR
 * (sio_connect_bar) makes the device's model watch its registers for plain stores until the
 * map goes (or this process does); ENOSPC: 32 processes hold such maps of the device already.
 */
void *seg_map_remote(seg_remote_t *seg, size_t offset, size_t size, unsigned flags,
                     seg_map_t **map);
void *seg_map_local(seg_local_t *seg, size_t offset, size_t size, unsigned flags,
                    seg_map_t **map);
int seg_unmap(seg_map_t *map);
/** seg_store_barrier() - Order this thread's stores before later ones (SCIStoreBarrier). */
void seg_store_barrier(void);
/** seg_flush() - Make this thread's stores visible to everyone (SCIFlush). */
void seg_flush(void);

/* ---- events ---- */
enum seg_event {
    SEG_EVENT_NONE = 0,
    SEG_EVENT_UNAVAILABLE, /* the owner set it unavailable */
    SEG_EVENT_AVAILABLE,   /* ... and available again */
    SEG_EVENT_REMOVED,     /* the owner removed it (or its host rebooted): disconnect */
    SEG_EVENT_LOST,        /* the path to the owner is down */
    SEG_EVENT_RESTORED,    /* the path is back */
    SEG_EVENT_CONNECT,     /* (a local segment's) a host connected to it */
    SEG_EVENT_DISCONNECT,  /* (a local segment's) ... disconnected, or went down */
};
/** seg_wait_event() - Wait for the next event on a connection: returns an enum seg_event, 0 on
 * timeout.
 */
int seg_wait_event(seg_remote_t *seg, int timeout_ms);
/** seg_remote_state() - The connection's current state as an event (AVAILABLE, UNAVAILABLE,
 * REMOVED or LOST).
 */
int seg_remote_state(seg_remote_t *seg);

/* The owner's side: who connects to a local segment. */
struct seg_conn_event {
    uint32_t event;   /* SEG_EVENT_CONNECT, _DISCONNECT, _LOST (the connector's path went
                       * down) or _RESTORED (... came back) */
    uint32_t node_id; /* the connecting host's */
    uint32_t adapter; /* ours it came through (0 for a process of this host) */
};
/** seg_local_watch() - From now on, record the connections to seg (its host's agent posts them
 * into a page of this process's, freed with the segment). Call it before the segment is made
 * available to see every connection. 0, or -errno.
 */
int seg_local_watch(seg_local_t *seg);
/** seg_local_wait_event() - The next connection event of a watched segment, in order: its
 * event (> 0) with *ev filled in, 0 on timeout, -EINVAL if not watched. A reader more than 255
 * events behind loses the oldest. One reader at a time.
 */
int seg_local_wait_event(seg_local_t *seg, struct seg_conn_event *ev, int timeout_ms);

/* ---- DMA ----
 * A queue may be used by two threads at once: one queueing transfers while another waits for
 * them (seg_dma_wait_first), so that the engine is given the next transfer without waiting
 * for the waiter to wake up. */
#define SEG_DMA_FROM_REMOTE 1u /* read: remote segment -> local segment (default: write) */
int seg_dma_queue_create(seg_desc_t *sd, seg_dma_queue_t **q, int adapter);
void seg_dma_queue_remove(seg_dma_queue_t *q);
/** seg_dma_transfer() - Queue a transfer of size bytes between local+loff and remote+roff. */
int seg_dma_transfer(seg_dma_queue_t *q, seg_local_t *local, size_t loff, seg_remote_t *remote,
                     size_t roff, size_t size, unsigned flags);
typedef void (*seg_dma_cb)(seg_dma_queue_t *q, int status, void *arg);
/** seg_dma_wait() - Wait for everything queued: 0, the first failure (-EIO, -EFAULT, -ENOLINK),
 * -ETIMEDOUT.
 */
int seg_dma_wait(seg_dma_queue_t *q, int timeout_ms);
/** seg_dma_wait_first() - Wait for the oldest transfer still queued only (transfers complete in
 * order): its status, -ETIMEDOUT, or -ENOENT when nothing is queued. Lets a producer keep the
 * engine busy with the next transfers while it hands on each one as it completes.
 */
int seg_dma_wait_first(seg_dma_queue_t *q, int timeout_ms);
/** seg_dma_on_done() - Instead of waiting: call cb(status) from a library thread once
 * everything queued is done.
 */
int seg_dma_on_done(seg_dma_queue_t *q, seg_dma_cb cb, void *arg);
/** seg_dma_abort() - Drop what has not started; waits for the transfer in progress. */
int seg_dma_abort(seg_dma_queue_t *q);
enum seg_dma_state { SEG_DMA_IDLE, SEG_DMA_POSTED, SEG_DMA_DONE, SEG_DMA_ERROR, SEG_DMA_ABORTED };
int seg_dma_state(seg_dma_queue_t *q);

/* ---- interrupts ---- */
/** seg_intr_create() - Create an interrupt others can trigger; *id in: SEG_ID_AUTO or the id
 * wanted, out: its id. -EEXIST if this host has that id, -ENOSPC when the host has 1024
 * interrupts already.
 */
int seg_intr_create(seg_desc_t *sd, seg_intr_t **intr, uint32_t *id);
void seg_intr_remove(seg_intr_t *intr);
/** seg_intr_wait() - Wait for the next trigger: 0, -ETIMEDOUT. Triggers are consumed in order
 * by either call: seg_intr_wait drops a payload, seg_intr_wait_data copies it (up to max bytes)
 * and stores its length in *len (0 for a plain trigger).
 */
int seg_intr_wait(seg_intr_t *intr, int timeout_ms);
int seg_intr_wait_data(seg_intr_t *intr, void *data, size_t max, size_t *len, int timeout_ms);
int seg_intr_connect(seg_desc_t *sd, seg_rintr_t **r, uint32_t node_id, uint32_t id, int adapter,
                     int timeout_ms);
void seg_intr_disconnect(seg_rintr_t *r);
/** seg_intr_trigger() - Trigger: 0, or -ENOENT when the interrupt was removed since connecting.
 * Across a downed link the trigger is lost, like any posted write.
 */
int seg_intr_trigger(seg_rintr_t *r);
/* Trigger with up to SEG_INTR_DATA_MAX bytes. The owner holds the last 32 triggers: a waiter
 * that falls further behind loses the oldest (seg_intr_wait_data skips to the oldest held). */
#define SEG_INTR_DATA_MAX 112u
int seg_intr_trigger_data(seg_rintr_t *r, const void *data, size_t len);

/* ---- sequences ---- */
enum seg_seq_status {
    SEG_SEQ_OK = 0,           /* nothing went wrong since the sequence started */
    SEG_SEQ_RETRIABLE = 1,    /* the path failed and recovered: redo the transfers */
    SEG_SEQ_NOT_RETRIABLE = 2 /* the path is down (or the owner rebooted): reconnect */
};
int seg_seq_create(seg_map_t *map, seg_seq_t **seq);
void seg_seq_remove(seg_seq_t *seq);
int seg_seq_start(seg_seq_t *seq);
/** seg_seq_check() - Flush, then compare with the start: enum seg_seq_status. */
int seg_seq_check(seg_seq_t *seq);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
