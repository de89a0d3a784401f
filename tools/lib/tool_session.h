/*
 * libntbtool (tools/lib/ntbtool.h): the segment-API session of scibench, dma_bench and intr_bench (session.c).
 */
#ifndef NTBLEND_TOOL_SESSION_H
#define NTBLEND_TOOL_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "ntblend/seg.h"
#include "tool_peer.h"

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

#endif
