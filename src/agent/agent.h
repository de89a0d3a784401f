/*
 * A host agent: one process per emulated host. It owns the host's physical-memory allocator,
 * runs the adapters' DMA engines, and talks to other hosts' agents only through the NTB
 * (mailboxes in reserved RAM reached through LUT windows, plus a doorbell bit).
 */
#ifndef NTBLEND_AGENT_H
#define NTBLEND_AGENT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "fabric.h"

struct agent {
    struct fab *f;
    uint32_t host;
    const char *fabric;
    _Atomic int stop;
    _Atomic uint64_t mbox_handled, dma_done;
    pthread_mutex_t alloc_lock;
    struct alloc_block *blocks; /* sorted by phys */
    size_t nblocks, cap;
    uint64_t allocated;
};

/* The agent of this process (there is one per process: one emulated host). */
extern struct agent agent;

/* ---- memory (alloc.c) ---- */
int agent_alloc(uint64_t size, uint64_t align, int32_t owner, uint64_t *phys);
int agent_free(uint64_t phys, int32_t owner);
void agent_free_owner(int32_t owner);
/* Hand the block that holds [phys, phys+size) from one owner to another; *len = its size. */
int agent_retag(uint64_t phys, uint64_t size, int32_t from, int32_t to,
                uint64_t *len);

/* ---- mailboxes over the NTB (mbox.c) ---- */
int mbox_start(void);
void mbox_stop(void);
/* Requests agents send each other. A handler runs on the mailbox thread: it must not call
 * mbox_call itself. It fills up to MBOX_MAX_PAYLOAD bytes of reply. */
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
    MBOX_TYPES = 32
};
#define MBOX_MAX_PAYLOAD 1024u
typedef int (*mbox_handler)(uint32_t from, const void *req, uint32_t len,
                            void *rsp, uint32_t *rsp_len);
void mbox_register(uint32_t type, mbox_handler h);
/* Call the agent of host `peer` (a direct NTB peer): the handler's result, or -ENOTCONN (no
 * port reaches it), -ENOLINK (path down), -ETIMEDOUT (no answer). */
int mbox_call(uint32_t peer, uint32_t type, const void *req, uint32_t len,
              void *rsp, uint32_t rsp_max, uint32_t *rsp_len, int timeout_ms);
int mbox_ping(uint32_t peer, uint64_t *rtt_ns);

/* ---- segments and interrupts (seg.c) ---- */
int aseg_start(void);
void aseg_stop(void);
void aseg_client_gone(int32_t client);
int aseg_create(int32_t client, uint32_t id, uint64_t size, uint64_t attach, uint64_t *out_id,
                uint64_t *phys, uint64_t *out_size);
int aseg_prepare(int32_t client, uint32_t id, uint32_t adapter);
int aseg_available(int32_t client, uint32_t id, uint32_t adapter, bool on);
int aseg_remove(int32_t client, uint32_t id);
int aseg_connect(int32_t client, uint32_t adapter, uint32_t node, uint32_t id,
                 uint64_t event_phys, uint64_t *bus, uint64_t *size, uint64_t *conn);
int aseg_disconnect(int32_t client, uint32_t owner, uint32_t conn_id);
/* Segments an agent created on behalf of host `host` (placement): owned by a tag, removed by
 * the requester or when that host's borrows end. */
int aseg_alloc_at(int32_t client, uint32_t host, uint64_t size, uint64_t *id);
int aseg_free_at(int32_t client, uint32_t host, uint32_t id);
void aseg_host_gone(uint32_t host);
int aintr_create(int32_t client, uint32_t id, uint64_t *out_id, uint64_t *phys);
int aintr_remove(int32_t client, uint32_t id);
int aintr_connect(uint32_t adapter, uint32_t node, uint32_t id, uint64_t *bus, uint64_t *owner);

/* ---- device lending (dev.c) ---- */
int dev_start(void);
void dev_stop(void);
void dev_client_gone(int32_t client);
int dev_available(int32_t client, uint32_t fn, bool on);
int dev_borrow(int32_t client, uint32_t fn, uint32_t mode, bool persist);
int dev_share(int32_t client, uint32_t fn);
int dev_return(int32_t client, uint32_t fn);
int dev_map(int32_t client, uint32_t fn, uint32_t target, uint64_t addr, uint64_t size,
            uint64_t *ioaddr, uint64_t *id);
int dev_unmap(int32_t client, uint32_t fn, uint32_t id);

/* ---- DMA engines (dma.c) ---- */
int dma_start(void);
void dma_stop(void);

#endif
