/*
 * libntbtool: the segment-API session of scibench, dma_bench and intr_bench — finding the
 * peer, the control segment and interrupts of client and server, commands, and the
 * data-segment server of scibench and dma_bench (declared, with the protocol, in ntbtool.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ntbtool.h"

/* The session id: a tag per tool in the top byte, the pid below, so concurrent runs on one
 * fabric do not collide. Fixed (tag, 1) when the user starts the server by hand. */
uint32_t su_session_id(uint8_t tag, bool fixed)
{
    return (uint32_t)tag << 24 | (fixed ? 1u : ((uint32_t)getpid() & 0xffffffu));
}

uint32_t su_session_of(const struct tu_common *c, uint8_t tag, bool fixed)
{
    return c->session_set ? c->session : su_session_id(tag, fixed);
}

/* The index of this host's adapter through which `node` is a peer, or -1. */
static int adapter_for(uint32_t node)
{
    int n = ntb_adapter_count();
    for (int i = 0; i < n; i++) {
        struct ntb_dev *ntb = ntb_open(i);
        if (!ntb)
            continue;
        int p = ntb_peer_port_idx(ntb, (int)node);
        ntb_close(ntb);
        if (p >= 0)
            return i;
    }
    return -1;
}

/* Fill in s->adapter, s->self_node, s->peer_node and s->peer_host. node < 0: the first peer of
 * adapter (adapter < 0: 0); adapter < 0 with a node: the adapter facing it. */
int su_find_peer(struct su_side *s, int adapter, int node)
{
    if (tu_check_env())
        return -ENOENT;
    int n = tu_adapter_count();
    if (n < 0)
        return n;
    if (node >= 0 && adapter < 0) {
        adapter = adapter_for((uint32_t)node);
        if (adapter < 0) {
            tu_err("node %d is not a peer of any adapter of host '%s' (see 'ntb_tool info')",
                   node, getenv("NTBLEND_HOST"));
            return -EHOSTUNREACH;
        }
    }
    struct ntb_dev *ntb = tu_open(adapter < 0 ? 0 : adapter);
    if (!ntb)
        return -ENODEV;
    s->adapter = adapter < 0 ? 0 : adapter;
    s->self_node = (uint32_t)ntb_port_number(ntb);
    if (node < 0) {
        if (ntb_peer_port_count(ntb) < 1) {
            tu_err("%s has no peer (is its cable plugged in? see 'ntblend status')", ntb_name(ntb));
            ntb_close(ntb);
            return -EHOSTUNREACH;
        }
        node = ntb_peer_port_number(ntb, 0);
    } else if (ntb_peer_port_idx(ntb, node) < 0) {
        tu_err("node %d is not a peer of %s (see 'ntb_tool info')", node, ntb_name(ntb));
        ntb_close(ntb);
        return -EHOSTUNREACH;
    }
    ntb_close(ntb);
    s->peer_node = (uint32_t)node;
    if (tu_host_name(node, s->peer_host, sizeof s->peer_host))
        snprintf(s->peer_host, sizeof s->peer_host, "%d", node);
    return 0;
}

/* Wait for our interrupt in slices; between slices, give up if the spawned server exited or
 * (server) the client's control segment went away. 0, -ETIMEDOUT, -ECHILD, -ENOTCONN. */
int su_wait(struct su_side *s, int timeout_ms)
{
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : tu_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    for (;;) {
        int rc = seg_intr_wait(s->intr, SU_SLICE_MS);
        if (rc != -ETIMEDOUT)
            return rc;
        if (s->peer_pid > 0 && tu_child_done(s->peer_pid) >= 0) {
            s->peer_pid = -1;
            return -ECHILD;
        }
        if (s->ctl_remote && seg_remote_state(s->ctl_remote) != SEG_EVENT_AVAILABLE)
            return -ENOTCONN;
        if (tu_now_ns() >= deadline)
            return -ETIMEDOUT;
    }
}

/* ---------------------------------------------------------------- client */

/* Create the control segment and our interrupt, start the server (args: extra arguments for
 * it, NULL-terminated, or NULL), and wait until it is ready. */
int su_client_start(struct su_side *s, uint32_t session, bool no_spawn,
                                  const char *const *args)
{
    int rc = seg_open(&s->sd);
    if (rc) {
        tu_err("seg_open: %s", seg_strerror(rc));
        return rc;
    }
    s->peer_pid = -1;
    s->session = session;
    rc = seg_create(s->sd, &s->ctl_seg, s->session, sizeof(struct su_ctl));
    if (rc) {
        tu_err("cannot create the control segment %#x: %s%s", s->session, seg_strerror(rc),
               rc == -EEXIST ? " (another run with the same session? pass --session)" : "");
        return rc;
    }
    s->ctl = seg_map_local(s->ctl_seg, 0, sizeof(struct su_ctl), 0, &s->ctl_map);
    if (!s->ctl) {
        rc = -errno;
        tu_err("cannot map the control segment: %s", seg_strerror(rc));
        return rc;
    }
    memset((void *)s->ctl, 0, sizeof *s->ctl);
    uint32_t iid = s->session;
    rc = seg_intr_create(s->sd, &s->intr, &iid);
    if (!rc)
        rc = seg_prepare(s->ctl_seg, s->adapter);
    if (!rc)
        rc = seg_set_available(s->ctl_seg, s->adapter);
    if (rc) {
        tu_err("cannot set up the session (interrupt and control segment %#x): %s", s->session,
               seg_strerror(rc));
        return rc;
    }
    if (!no_spawn) {
        char node[16], session[16], timeout[16];
        snprintf(node, sizeof node, "%u", s->self_node);
        snprintf(session, sizeof session, "%u", s->session);
        snprintf(timeout, sizeof timeout, "%d", s->timeout_s);
        const char *argv[40] = { "--serve", "--node", node, "--session", session, "--timeout",
                                 timeout, "--quiet" };
        int k = 8;
        for (int i = 0; args && args[i] && k < 39; i++)
            argv[k++] = args[i];
        argv[k] = NULL;
        s->peer_pid = tu_spawn_peer(s->peer_host, argv);
        if (s->peer_pid < 0)
            return (int)s->peer_pid;
    } else {
        fprintf(stderr, "%s: waiting for the server: ntblend run --host %s -- %s --serve --node %u "
                "--session %u", tu_prog, s->peer_host, tu_prog, s->self_node, s->session);
        for (int i = 0; args && args[i]; i++)
            fprintf(stderr, " %s", args[i]);
        fputc('\n', stderr);
    }
    for (;;) {
        rc = su_wait(s, s->timeout_s * 1000);
        if (rc == -ECHILD) {
            tu_err("the server on host %s exited before it was ready (see its message above)",
                   s->peer_host);
            return rc;
        }
        if (rc) {
            tu_err("no word from the server on host %s within %d s%s", s->peer_host,
                   s->timeout_s, no_spawn ? ": start it there first" : "");
            return rc;
        }
        if (atomic_load(&s->ctl->magic) == SU_MAGIC)
            break;
    }
    if (s->ctl->error[0]) {
        tu_err("the server on host %s: %s", s->peer_host, (const char *)s->ctl->error);
        return -EIO;
    }
    rc = seg_intr_connect(s->sd, &s->rintr, s->peer_node, s->ctl->intr_id, s->adapter,
                          s->timeout_s * 1000);
    if (rc)
        tu_err("cannot connect to interrupt %u of host %s: %s", s->ctl->intr_id, s->peer_host,
               seg_strerror(rc));
    return rc;
}

/* Send a command and wait for its answer: the server's status (>= 0), or -errno. */
int su_cmd(struct su_side *s, uint32_t cmd, int timeout_ms)
{
    uint32_t seq = atomic_load(&s->ctl->cmd_seq) + 1;
    atomic_store(&s->ctl->cmd, cmd);
    atomic_store(&s->ctl->cmd_seq, seq);
    seg_flush();
    seg_intr_trigger(s->rintr);
    while (atomic_load(&s->ctl->done_seq) != seq) {
        int rc = su_wait(s, timeout_ms);
        if (rc == -ECHILD)
            tu_err("the server on host %s exited (see its message above)", s->peer_host);
        else if (rc)
            tu_err("the server on host %s did not answer within %d ms", s->peer_host, timeout_ms);
        if (rc)
            return rc;
    }
    return (int)atomic_load(&s->ctl->status);
}

/* Tell the server to finish (if it is there), reap it, free everything. Returns the server's
 * exit status (0 if none was spawned). */
int su_client_finish(struct su_side *s)
{
    int st = 0;
    if (s->rintr) {
        atomic_store(&s->ctl->cmd, SU_CMD_DONE);
        atomic_fetch_add(&s->ctl->cmd_seq, 1);
        seg_flush();
        seg_intr_trigger(s->rintr);
    }
    if (s->peer_pid > 0)
        st = tu_reap_peer(s->peer_pid, s->rintr ? 5000 : 0);
    seg_intr_disconnect(s->rintr);
    if (s->ctl_map)
        seg_unmap(s->ctl_map);
    if (s->ctl_seg)
        seg_remove(s->ctl_seg);
    seg_intr_remove(s->intr);
    seg_close(s->sd);
    memset(s, 0, sizeof *s);
    return st;
}

int su_client_end(struct su_side *s, int rc)
{
    int st = su_client_finish(s);
    if (st && rc == 0) {
        tu_err("the server exited with status %d", st);
        rc = 1;
    }
    return rc;
}

/* ---------------------------------------------------------------- server */

/* Connect to the client's control segment and interrupt, create ours. */
int su_server_start(struct su_side *s, int adapter, int client_node, uint32_t session)
{
    if (client_node < 0) {
        tu_err("--serve needs --node: the client's node id");
        return -EINVAL;
    }
    int rc = su_find_peer(s, adapter, client_node);
    if (rc)
        return rc;
    s->session = session;
    s->peer_pid = -1;
    rc = seg_open(&s->sd);
    if (rc) {
        tu_err("seg_open: %s", seg_strerror(rc));
        return rc;
    }
    rc = seg_connect(s->sd, &s->ctl_remote, s->peer_node, session, s->adapter, s->timeout_s * 1000);
    if (rc) {
        tu_err("cannot connect to control segment %#x of host %s: %s", session, s->peer_host,
               seg_strerror(rc));
        return rc;
    }
    s->ctl = seg_map_remote(s->ctl_remote, 0, sizeof(struct su_ctl), 0, &s->ctl_map);
    if (!s->ctl) {
        rc = -errno;
        tu_err("cannot map the control segment: %s", seg_strerror(rc));
        return rc;
    }
    rc = seg_intr_connect(s->sd, &s->rintr, s->peer_node, session, s->adapter, s->timeout_s * 1000);
    if (rc) {
        tu_err("cannot connect to interrupt %#x of host %s: %s", session, s->peer_host,
               seg_strerror(rc));
        return rc;
    }
    uint32_t iid = SEG_ID_AUTO;
    rc = seg_intr_create(s->sd, &s->intr, &iid);
    if (rc) {
        tu_err("cannot create an interrupt: %s", seg_strerror(rc));
        return rc;
    }
    s->ctl->intr_id = iid;
    s->ctl->server_node = s->self_node;
    return 0;
}

/* Tell the client we are ready (error: NULL, or why we are not; the client prints it). */
void su_server_ready(struct su_side *s, uint32_t seg_id, uint64_t seg_size,
                                   const char *error)
{
    if (!s->ctl || !s->rintr)
        return;
    s->ctl->seg_id = seg_id;
    s->ctl->seg_size = seg_size;
    snprintf((char *)s->ctl->error, sizeof s->ctl->error, "%s", error ? error : "");
    seg_store_barrier();
    atomic_store(&s->ctl->magic, SU_MAGIC);
    seg_flush();
    seg_intr_trigger(s->rintr);
}

/* Wait for the next command: its number (SU_CMD_DONE when the client is gone), or -errno. */
int su_server_next(struct su_side *s, uint32_t *seen_seq)
{
    for (;;) {
        uint32_t seq = atomic_load(&s->ctl->cmd_seq);
        if (seq != *seen_seq) {
            *seen_seq = seq;
            return (int)atomic_load(&s->ctl->cmd);
        }
        /* A client that stays silent ten times the timeout is gone (its control segment
         * also disappears when it exits, which su_wait notices sooner). */
        int rc = su_wait(s, s->timeout_s * 10000);
        if (rc == -ENOTCONN)
            return SU_CMD_DONE;
        if (rc)
            return rc;
    }
}

void su_server_reply(struct su_side *s, uint32_t seq, uint32_t status)
{
    atomic_store(&s->ctl->status, status);
    seg_store_barrier();
    atomic_store(&s->ctl->done_seq, seq);
    seg_flush();
    seg_intr_trigger(s->rintr);
}

void su_server_finish(struct su_side *s)
{
    seg_intr_disconnect(s->rintr);
    seg_intr_remove(s->intr);
    if (s->ctl_map)
        seg_unmap(s->ctl_map);
    if (s->ctl_remote)
        seg_disconnect(s->ctl_remote);
    seg_close(s->sd);
    memset(s, 0, sizeof *s);
}

/* ---------------------------------------------------------------- a data-segment server */

/* The server half of scibench and dma_bench: a segment of `size` bytes on this host, made
 * available to the client, that the client asks to fill with a pattern or to check. */
int su_serve_segment(int adapter, int client_node, uint32_t session, uint64_t size,
                                   int timeout_s, bool quiet)
{
    struct su_side s = { .timeout_s = timeout_s, .quiet = quiet };
    seg_local_t *seg = NULL;
    seg_map_t *map = NULL;
    volatile uint8_t *mem = NULL;
    char why[160] = "";
    int rc = su_server_start(&s, adapter, client_node, session);
    if (rc)
        goto out;
    rc = seg_create(s.sd, &seg, SEG_ID_AUTO, size);
    if (!rc)
        rc = seg_prepare(seg, s.adapter);
    if (!rc)
        rc = seg_set_available(seg, s.adapter);
    if (!rc && !(mem = seg_map_local(seg, 0, size, 0, &map)))
        rc = -errno;
    if (rc) {
        snprintf(why, sizeof why, "cannot offer a %" PRIu64 "-byte segment: %s", size,
                 seg_strerror(rc));
        tu_err("%s", why);
        su_server_ready(&s, 0, 0, why);
        goto out;
    }
    su_server_ready(&s, seg_local_id(seg), seg_local_size(seg), NULL);
    if (!quiet) {
        printf("%s: serving segment %u (%" PRIu64 " bytes) to host %s; Ctrl-C to stop\n", tu_prog,
               seg_local_id(seg), (uint64_t)seg_local_size(seg), s.peer_host);
        fflush(stdout);
    }
    uint32_t seen = atomic_load(&s.ctl->cmd_seq);
    for (;;) {
        int cmd = su_server_next(&s, &seen);
        if (cmd < 0) {
            tu_err("no word from the client on host %s; giving up", s.peer_host);
            rc = cmd;
            break;
        }
        if (cmd == SU_CMD_DONE)
            break;
        uint64_t seed = s.ctl->arg[0], off = s.ctl->arg[1], len = s.ctl->arg[2];
        uint32_t status = UINT32_MAX;
        if ((cmd == SU_CMD_FILL || cmd == SU_CMD_VERIFY) && off <= size && len <= size - off) {
            if (cmd == SU_CMD_FILL) {
                tu_fill(mem + off, len, (uint32_t)seed);
                status = 0;
            } else {
                uint64_t bad = tu_check(mem + off, len, (uint32_t)seed);
                status = bad > UINT32_MAX - 1 ? UINT32_MAX - 1 : (uint32_t)bad;
            }
        }
        su_server_reply(&s, seen, status);
    }
out:
    if (map)
        seg_unmap(map);
    if (seg)
        seg_remove(seg);
    su_server_finish(&s);
    return rc ? 1 : 0;
}

/* The client side of a segment benchmark, once su_find_peer found the peer: start its server
 * with a segment of `size` bytes, connect to that segment and check it is large enough. 0,
 * or 1 after a message (the caller cleans up s and *rseg). */
int su_client_segment(struct su_side *s, uint32_t session, bool no_spawn,
                                    uint64_t size, seg_remote_t **rseg)
{
    char size_arg[32];
    snprintf(size_arg, sizeof size_arg, "%" PRIu64, size);
    const char *args[] = { "--seg-size", size_arg, NULL };
    if (su_client_start(s, session, no_spawn, args))
        return 1;
    uint32_t rid = s->ctl->seg_id;
    int e = seg_connect(s->sd, rseg, s->peer_node, rid, s->adapter, s->timeout_s * 1000);
    if (e) {
        tu_err("cannot connect to segment %u of host %s: %s", rid, s->peer_host, seg_strerror(e));
        return 1;
    }
    if (seg_remote_size(*rseg) < size) {
        tu_err("host %s's segment has %zu bytes; %" PRIu64 " are needed (start its server with "
               "--seg-size %" PRIu64 ")", s->peer_host, seg_remote_size(*rseg), size, size);
        return 1;
    }
    return 0;
}

volatile uint8_t *su_local_segment(struct su_side *s, uint64_t size, seg_local_t **seg,
                                   seg_map_t **map)
{
    char buf[32];
    volatile uint8_t *mem = NULL;
    int e = seg_create(s->sd, seg, SEG_ID_AUTO, size);
    if (e || !(mem = seg_map_local(*seg, 0, size, 0, map)))
        tu_err("cannot create a %s segment on this host: %s", tu_fmt_size(size, buf, sizeof buf),
               seg_strerror(e ? e : -errno));
    return mem;
}
