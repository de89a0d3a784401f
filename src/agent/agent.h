/*
 * A host agent: one process per emulated host. It owns the host's physical-memory allocator
 * (mem.c), runs the adapters' DMA engines (dma.c), keeps the host's segments, interrupts and
 * placed segments (aseg.c, intr.c, place.c), lends and borrows devices (lend*.c, lend_int.h;
 * hot-add into its tree: hotplug.c), and talks to other hosts' agents only through the NTB
 * (mbox.c: mailboxes in reserved RAM reached through LUT windows, plus a doorbell bit).
 * agent_main.c serves the control socket.
 */
#ifndef NTBLEND_AGENT_H
#define NTBLEND_AGENT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "fabric.h"
#include "wpol.h"

struct agent {
    struct fab *f;
    uint32_t host;
    const char *fabric;
    _Atomic int stop;
    _Atomic uint64_t mbox_handled, dma_done;
    size_t nclients; /* control connections open (main thread only) */
    pthread_mutex_t alloc_lock;
    struct alloc_block *blocks; /* sorted by phys */
    size_t nblocks, cap;
    uint64_t allocated;
};

/* The agent of this process (there is one per process: one emulated host). */
extern struct agent agent;

/*
 * Threads. The main thread serves the control socket: every function below that takes a
 * `client` (the pid of the process it acts for) runs there, one request at a time. The
 * mailbox thread (mbox.c) runs the handlers of other agents' requests; a handler must not
 * call mbox_call (the answer it would wait for arrives on its own thread). Each module with a
 * *_start also runs a watcher thread that reacts to link and host changes. Module state is
 * guarded by the module's own lock, so these functions may be called from any of those
 * threads unless a comment says otherwise; *_start and *_stop only from the main thread.
 */

/* ---- control requests (ctl.c) ---- */

struct agent_req;
struct agent_rsp;
/**
 * agent_serve() - serve one request of process @pid that arrived on connection @fd
 * Return: true with the reply in *@rsp; false when the reply goes out on @fd later, from a
 * thread of its own (a peer ping).
 */
bool agent_serve(int fd, int32_t pid, const struct agent_req *req, struct agent_rsp *rsp);
/** agent_client_gone() - the last connection of process @pid closed: what it held goes back. */
void agent_client_gone(int32_t pid);

/*
 * Without threads (the fuzz harnesses drive an agent from one thread): *_register installs a
 * module's mailbox handlers, mbox_init sets the mailboxes up, mbox_poll handles what is in
 * them once, and the *_sweep functions do one pass of the watchers (what goes when a host
 * died or rebooted, or a path changed). The *_start functions are these plus the threads.
 */
int mbox_init(void);
void mbox_poll(void);
void aseg_register(void);
void aseg_sweep(void);
int alend_register(void);
void alend_sweep(void);

/* ---- memory (mem.c) ---- */

/**
 * amem_alloc() - allocate DMA-able memory of this host
 * @size: bytes, rounded up to 4 KiB
 * @align: power of two, at least 4096
 * @owner: pid of the client, or a tag (segments, placement) the block belongs to
 * @phys: the block's physical address in the host's RAM
 *
 * Memory below FAB_MBOX_SIZE (the agents' mailboxes) is never handed out; blocks come zeroed.
 * Return: 0, -EINVAL for a bad size or alignment, -ENOMEM.
 */
int amem_alloc(uint64_t size, uint64_t align, int32_t owner, uint64_t *phys);
/**
 * amem_free() - free the block that starts at @phys
 * Return: 0, -ENOENT (no such block), -EPERM (it belongs to another owner).
 */
int amem_free(uint64_t phys, int32_t owner);
/** amem_free_owner() - free every block of @owner (a client hung up). */
void amem_free_owner(int32_t owner);
/**
 * amem_retag() - hand the block that holds [@phys, @phys+@size) from one owner to another
 * @len: the block's size
 * Return: 0, -ENOENT, -EPERM (not @from's), -EINVAL (not a whole block).
 */
int amem_retag(uint64_t phys, uint64_t size, int32_t from, int32_t to, uint64_t *len);
/**
 * amem_owned() - does [@phys, @phys+@len) lie inside one block of @owner's?
 * @block, @block_len: where that block starts and its size (either may be NULL)
 */
bool amem_owned(uint64_t phys, uint64_t len, int32_t owner, uint64_t *block, uint64_t *block_len);
/** amem_usage() - bytes held by processes (pid owners) and by tags (segments, interrupts). */
void amem_usage(uint64_t *procs, uint64_t *tagged);
/** amem_check() - the allocator's own invariants hold: blocks sorted and apart, whole pages,
 * inside RAM above the mailboxes, their total what it counts (for the fuzz harnesses). */
bool amem_check(void);

/* ---- mailboxes over the NTB (mbox.c) ---- */

/** mbox_start() - map the mailbox area, start the mailbox thread. 0 or -errno. */
int mbox_start(void);
/* The agent's threads wait for an event word (a doorbell count, a link sequence) to move on
 * from seen, or the agent to stop, by the wait policy at site: 0, or -ETIMEDOUT after max_ns
 * (0: none). The word's wakers always bump it and wake. */
int agent_wait_word(struct wpol_site *site, _Atomic uint32_t *word, uint32_t seen, uint64_t max_ns);
void mbox_stop(void);
/* Requests agents send each other. */
enum mbox_type {
    MBOX_PING = 1,
    MBOX_SEG_CONNECT,
    MBOX_SEG_DISCONNECT,
    MBOX_SEG_NOTIFY,
    MBOX_INTR_CONNECT,
    MBOX_DEV_BORROW,
    MBOX_DEV_SHARE,
    MBOX_DEV_RETURN,
    MBOX_DEV_MAP,
    MBOX_DEV_UNMAP,
    MBOX_INBOUND_MAP,
    MBOX_INBOUND_UNMAP,
    MBOX_SEG_CREATE_FOR,
    MBOX_SEG_REMOVE_FOR,
    MBOX_SEG_CANCEL,
    MBOX_DEV_SEGMENT,
    MBOX_TYPES = 32
};
#define MBOX_MAX_PAYLOAD 1024u
/*
 * A handler of requests of one type, run on the mailbox thread: @from is the sending host's
 * index, @req its payload (@len bytes, whatever the sender wrote: check it). It may fill up
 * to MBOX_MAX_PAYLOAD bytes of reply at @rsp and set *@rsp_len; its return value is the
 * result the caller gets.
 */
typedef int (*mbox_handler)(uint32_t from, const void *req, uint32_t len, void *rsp,
                            uint32_t *rsp_len);
/** mbox_register() - handle requests of @type with @h (before mbox_start's thread runs). */
void mbox_register(uint32_t type, mbox_handler h);
/**
 * mbox_call() - call the agent of host @peer, a direct NTB peer, and wait for its answer
 * Return: the handler's result, or -ENOTCONN (no port reaches it), -ENOLINK (path down),
 * -ETIMEDOUT (no answer within @timeout_ms). Not from the mailbox thread.
 */
int mbox_call(uint32_t peer, uint32_t type, const void *req, uint32_t len, void *rsp,
              uint32_t rsp_max, uint32_t *rsp_len, int timeout_ms);
/**
 * mbox_call_posted() - mbox_call that also says whether the request went out: *@posted is
 * false when it certainly did not reach the peer (no port, path down before sending), true
 * when the peer may have acted on it, whatever the result (a lost or late answer).
 */
int mbox_call_posted(uint32_t peer, uint32_t type, const void *req, uint32_t len, void *rsp,
                     uint32_t rsp_max, uint32_t *rsp_len, int timeout_ms, bool *posted);
/** mbox_ping() - round trip of an empty request to @peer, in ns. As mbox_call. */
int mbox_ping(uint32_t peer, uint64_t *rtt_ns);

/* ---- segments (aseg.c), interrupts (intr.c), placement (place.c) ---- */

/** aseg_start() - register the segment handlers and start the link watcher. 0 or -errno. */
int aseg_start(void);
void aseg_stop(void);
/** aseg_client_gone() - @client hung up: close its connections, remove its segments, retire
 * its interrupts, free what it had placed elsewhere. */
void aseg_client_gone(int32_t client);
/**
 * aseg_create() - create segment @id (0: pick one) of @size bytes for @client
 * @attach: physical address of a block of @client's to use (0: allocate)
 * Return: 0 with the id, physical address and (rounded) size; -EEXIST, -ENOMEM, -EINVAL.
 */
int aseg_create(int32_t client, uint32_t id, uint64_t size, uint64_t attach, uint64_t *out_id,
                uint64_t *phys, uint64_t *out_size);
/** aseg_prepare() - make @client's segment @id reachable through adapter @adapter (index on
 * this host). 0, -ENOENT, -EPERM, -ENODEV. */
int aseg_prepare(int32_t client, uint32_t id, uint32_t adapter);
/** aseg_available() - let connections through @adapter in (@on) or not; connections are told.
 * -EPROTO when not prepared on it. */
int aseg_available(int32_t client, uint32_t id, uint32_t adapter, bool on);
/** aseg_remove() - remove; the memory stays until the last connection is gone. */
int aseg_remove(int32_t client, uint32_t id);
/**
 * aseg_connect() - connect @client to segment @id of node @node through @adapter
 * @event_phys: where the connection's events are posted (a word in @client's memory)
 * Return: 0 with the bus address (through the NTB), size and connection handle; -ENOENT,
 * -ECONNREFUSED (not available), -EHOSTUNREACH, -ENOSPC.
 */
int aseg_connect(int32_t client, uint32_t adapter, uint32_t node, uint32_t id,
                 uint64_t event_phys, uint64_t *bus, uint64_t *size, uint64_t *conn);
int aseg_disconnect(int32_t client, uint32_t owner, uint32_t conn_id);
/** aseg_watch() - post the connections to @client's segment @id into @phys, a page of
 * @client's (struct seg_conn_events), until the segment is removed. -ENOENT, -EPERM, -EINVAL. */
int aseg_watch(int32_t client, uint32_t id, uint64_t phys);
/** aseg_events_in() - does a connection of @client post its events into [@phys, @phys+@len)?
 * Such memory must not be freed or handed to a segment until it is disconnected. */
bool aseg_events_in(int32_t client, uint64_t phys, uint64_t len);
/** aplace_alloc_at() - have host @host's agent create a segment of @size for @client, in
 * its memory, available on its adapter facing us. 0 with its id, or -errno. */
int aplace_alloc_at(int32_t client, uint32_t host, uint64_t size, uint64_t *id);
/** adevseg_request() - the id of device memory segment @number of function @fn at its lender
 * (devseg.c), made with @size bytes by the first request. -EACCES when this host does not
 * borrow @fn, -EHOSTUNREACH when the lender does not answer. */
int adevseg_request(uint32_t fn, uint32_t number, uint64_t size, uint64_t *id);
/** alend_held() - a process of this host (or the host, persistently) holds function @fn. */
bool alend_held(uint32_t fn);
/** adevseg_idle() - @fn's last borrower returned it: its device memory segments go. */
void adevseg_idle(uint32_t fn);
int aplace_free_at(int32_t client, uint32_t host, uint32_t id);
/** aplace_host_gone() - host @host died or rebooted: remove what we created for it. */
void aplace_host_gone(uint32_t host);
/** aintr_create() - create interrupt @id (0: pick) for @client: its page's physical address. */
int aintr_create(int32_t client, uint32_t id, uint64_t *out_id, uint64_t *phys);
int aintr_remove(int32_t client, uint32_t id);
/** aintr_pool_bytes() - memory of the interrupt-page pool (pages are reused, never freed). */
uint64_t aintr_pool_bytes(void);
/** aintr_connect() - the bus address, through @adapter, of interrupt @id of node @node. */
int aintr_connect(uint32_t adapter, uint32_t node, uint32_t id, uint64_t *bus, uint64_t *owner);

/* ---- device lending (lend.c, lend_borrow.c, lend_aperture.c, lend_lease.c) ---- */

/** alend_start() - register the lending handlers and start the lease watcher. */
int alend_start(void);
void alend_stop(void);
/** alend_client_gone() - @client hung up: its borrows and mappings end. */
void alend_client_gone(int32_t client);
/** alend_available() - on the lender: lend function @fn out (@on) or withdraw it. -EREMOTE
 * when @fn is not this host's. */
int alend_available(int32_t client, uint32_t fn, bool on);
/**
 * alend_borrow() - borrow function @fn for @client (SIO_EXCLUSIVE or SIO_SHARED)
 * @persist: held for the host until returned (the CLI), not ended by @client hanging up
 * Return: 0, -EACCES (not lent out), -EBUSY (held exclusively), -EALREADY, -EHOSTUNREACH.
 */
int alend_borrow(int32_t client, uint32_t fn, uint32_t mode, bool persist);
int alend_share(int32_t client, uint32_t fn);
/**
 * alend_unbind() - drop every driver process's binding of fn (AGENT_BORROW_BIND) and the
 * mappings it made: the function is being hot-removed from this host's tree.
 * @fn: the function.
 *
 * Context: any agent thread.
 */
void alend_unbind(uint32_t fn);
/**
 * alend_forget() - the lender of @fn is gone: drop this host's own borrow of @fn and the
 * driver bindings under it, and the IOMMU mappings made for them, without asking the lender.
 * Context: any agent thread.
 */
void alend_forget(uint32_t fn);
int alend_return(int32_t client, uint32_t fn);
/**
 * alend_map() - map [@addr, @addr+@size) of host @target for @fn's DMA
 * @via: the lender's adapter the window should go through (the lender's end of the path the
 * borrower chose, smartio-tocs-2021 §6.3), or -1: the lender's first path to @target that is up.
 * The lender takes @via only if it reaches @target and its path is up.
 * Return: 0 with the device-side I/O address and the mapping's id, or -errno (-ENOSPC when
 * the lender's adapter is out of LUT or requester-ID entries).
 */
int alend_map(int32_t client, uint32_t fn, uint32_t target, uint64_t addr, uint64_t size,
              int via, uint64_t *ioaddr, uint64_t *id);
/* As alend_map, at the device-side I/O address @iova (the lender's IOMMU maps it): -EOPNOTSUPP
 * when the lender has no IOMMU, -EEXIST when it overlaps another mapping of the device. */
int alend_map_at(int32_t client, uint32_t fn, uint32_t target, uint64_t addr, uint64_t size,
                 uint64_t iova, uint64_t *id);
int alend_unmap(int32_t client, uint32_t fn, uint32_t id);
/**
 * alend_aperture() - @take: let @client's bound function @fn (lent to us) reach the DMA
 * aperture of its lender (set up by the first such request: a window of the lender's adapter
 * onto an I/O virtual range of our IOMMU domain for traffic from the lender), and give the
 * client its slice of the range: *@iova in our domain, *@io where the device reaches it,
 * *@size. !take: fn no longer needs it. -EOPNOTSUPP our IOMMU is off; -ENOSPC no LUT entry,
 * requester-ID entry or slice left; -EPERM fn not bound by the client.
 */
int alend_aperture(int32_t client, uint32_t fn, bool take, uint64_t *io, uint64_t *iova,
                   uint64_t *size);

/* ---- Device Lending, the borrower's side (hotplug.c) ---- */

/**
 * ahot_add() - hot-add function @fn (lent by another host) into this host's PCIe tree: borrow
 * it for the host, map its BARs through our adapter facing the lender, publish the shadow.
 * Return: 0, -EALREADY, -ENOSPC (no free shadow slot, or out of LUT entries), -EHOSTUNREACH,
 * or what borrowing returns (-EACCES when the lender has not lent it out).
 */
int ahot_add(uint32_t fn);
/** ahot_remove() - hot-remove @fn: drivers see it go, then its windows and borrow end. */
int ahot_remove(uint32_t fn);
/** ahot_host_gone() - the lender @host is gone: its functions leave our tree. */
void ahot_host_gone(uint32_t host);
/** ahot_stop() - at shutdown: hot-remove everything. */
void ahot_stop(void);

/* ---- DMA engines (dma.c) ---- */

/** adma_start() - start one engine thread per DMA channel of this host's adapters. */
int adma_start(void);
void adma_stop(void);

#endif
