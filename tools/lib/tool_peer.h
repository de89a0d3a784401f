/*
 * libntbtool (tools/lib/ntbtool.h): opening an adapter with messages that say what to do, doorbell waits that
 * sleep, starting and reaping the peer half of a two-host tool, and the scratchpad/doorbell
 * rendezvous of ntb_perf and ntb_pingpong (ntbpeer.c).
 */
#ifndef NTBLEND_TOOL_PEER_H
#define NTBLEND_TOOL_PEER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "ntblend/ntb.h"
#include "tool_cmdline.h"

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

#endif
