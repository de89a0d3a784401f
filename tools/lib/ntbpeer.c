/*
 * libntbtool: opening an adapter with messages that say what to do, doorbell waits that
 * sleep, starting and reaping the peer half of a two-host tool with `ntblend run`, and the
 * scratchpad/doorbell rendezvous of the two-host NTB tools with their client and server
 * skeletons (declared in ntbtool.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "install_dirs.h"
#include "ntbtool.h"

/* ---------------------------------------------------------------- opening */

int tu_check_env(void)
{
    const char *host = getenv("NTBLEND_HOST");
    if (!host || !*host) {
        tu_err("not running on an emulated host: use 'ntblend run --host H -- %s ...'", tu_prog);
        return -ENOENT;
    }
    return 0;
}

const char *tu_fabric_name(void)
{
    const char *n = getenv("NTBLEND_FABRIC");
    return n && *n ? n : "default";
}

int tu_adapter_count(void)
{
    int n = ntb_adapter_count(); /* on failure the library has said why (fabric down, ...) */
    if (n < 0)
        tu_err("cannot attach to fabric '%s' as host '%s' (%s)", tu_fabric_name(),
               getenv("NTBLEND_HOST"), strerror(-n));
    return n;
}

struct ntb_dev *tu_open(int index)
{
    if (tu_check_env())
        return NULL;
    int n = tu_adapter_count();
    if (n < 0)
        return NULL;
    if (index < 0 || index >= n) {
        if (n == 0)
            tu_err("host '%s' has no NTB adapter", getenv("NTBLEND_HOST"));
        else
            tu_err("host '%s' has %d NTB adapter%s (index 0..%d); pick one with -a",
                   getenv("NTBLEND_HOST"), n, n == 1 ? "" : "s", n - 1);
        errno = ENOENT;
        return NULL;
    }
    struct ntb_dev *ntb = ntb_open(index);
    if (!ntb)
        tu_err("cannot open adapter %d: %s", index, strerror(errno));
    return ntb;
}

struct ntb_dev *tu_open_for_port(int adapter, int port, int *pidx)
{
    if (tu_check_env())
        return NULL;
    int n = tu_adapter_count();
    if (n < 0)
        return NULL;
    for (int i = adapter < 0 ? 0 : adapter; i < (adapter < 0 ? n : adapter + 1); i++) {
        struct ntb_dev *ntb = tu_open(i);
        if (!ntb)
            return NULL;
        int p = ntb_peer_port_idx(ntb, port);
        if (p >= 0) {
            *pidx = p;
            return ntb;
        }
        ntb_close(ntb);
    }
    tu_err("node %d is not a peer of %s on host '%s' (see 'ntb_tool info')", port,
           adapter < 0 ? "any adapter" : "this adapter", getenv("NTBLEND_HOST"));
    errno = ENOENT;
    return NULL;
}

struct ntb_dev *tu_open_peer(const struct tu_common *c, int *pidx)
{
    *pidx = c->pidx;
    struct ntb_dev *ntb = c->port >= 0 ? tu_open_for_port(c->adapter, c->port, pidx)
                                       : tu_open(c->adapter < 0 ? 0 : c->adapter);
    if (ntb && (tu_check_peer(ntb, *pidx) || tu_check_hw(ntb, *pidx))) {
        ntb_close(ntb);
        return NULL;
    }
    return ntb;
}

int tu_check_peer(struct ntb_dev *ntb, int pidx)
{
    int n = ntb_peer_port_count(ntb);
    if (pidx < 0 || pidx >= n) {
        tu_err("%s has %d peer%s (pidx 0..%d); see 'ntb_tool info'", ntb_name(ntb), n,
               n == 1 ? "" : "s", n - 1);
        return -EINVAL;
    }
    return 0;
}

int tu_wait_link(struct ntb_dev *ntb, int pidx, int timeout_ms)
{
    uint64_t seq = 0;
    uint64_t deadline = tu_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    while (!(ntb_link_is_up(ntb, NULL, NULL) & (1ull << pidx))) {
        uint64_t now = tu_now_ns();
        if (now >= deadline)
            return -ENOTCONN;
        ntb_link_event_wait(ntb, &seq, (int)((deadline - now) / 1000000ull) + 1);
    }
    return 0;
}

/* ---------------------------------------------------------------- doorbells */

int64_t tu_db_wait(struct tu_db *d, uint64_t want, int timeout_ms)
{
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : tu_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    for (;;) {
        uint64_t now = tu_now_ns();
        int left = deadline == UINT64_MAX ? -1
                   : now >= deadline      ? 0
                                          : (int)((deadline - now + 999999) / 1000000);
        int64_t bits = ntb_db_event_wait(d->ntb, left);
        if (bits <= 0)
            return bits;
        if ((uint64_t)bits & want)
            return (int64_t)((uint64_t)bits & want);
        uint64_t foreign = (uint64_t)bits & ~want & ~d->masked;
        if (foreign) {
            ntb_db_set_mask(d->ntb, foreign);
            d->masked |= foreign;
        }
        if (left == 0)
            return 0;
    }
}

void tu_db_restore(struct tu_db *d)
{
    if (d->masked)
        ntb_db_clear_mask(d->ntb, d->masked);
    d->masked = 0;
}

/* ---------------------------------------------------------------- the peer process */

pid_t tu_spawn_peer(const char *host, const char *const *args)
{
    char self[PATH_MAX], dir[PATH_MAX], cli[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        tu_err("cannot find this executable (/proc/self/exe): %s", strerror(errno));
        return -ENOENT;
    }
    self[n] = 0;
    snprintf(dir, sizeof dir, "%s", self);
    const char *d = dirname(dir);
    /* ntblend is beside the tool in the build tree; installed, the tool is in the helpers'
     * directory (libexec/ntblend) and ntblend in bin/. */
    snprintf(cli, sizeof cli, "%s/ntblend", d);
    if (access(cli, X_OK))
        snprintf(cli, sizeof cli, "%s/" NTBLEND_REL_HELPERS_TO_BIN "/ntblend", d);
    if (access(cli, X_OK)) {
        tu_err("cannot find ntblend beside %s or in %s/" NTBLEND_REL_HELPERS_TO_BIN
               " to start the peer side; start '%s --serve' on host '%s' yourself and pass "
               "--no-spawn", d, d, tu_prog, host);
        return -ENOENT;
    }
    const char *argv[48];
    int k = 0;
    argv[k++] = cli;
    argv[k++] = "--fabric";
    argv[k++] = tu_fabric_name();
    argv[k++] = "run";
    argv[k++] = "--host";
    argv[k++] = host;
    argv[k++] = "--";
    argv[k++] = self;
    for (int i = 0; args[i] && k < 47; i++)
        argv[k++] = args[i];
    argv[k] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        tu_err("fork: %s", strerror(e));
        return -e;
    }
    if (pid == 0) {
        /* If we die, the peer side should not linger (when `ntblend run` execs it). */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        dup2(STDERR_FILENO, STDOUT_FILENO);
        execv(cli, (char *const *)argv);
        fprintf(stderr, "%s: cannot run %s: %s\n", tu_prog, cli, strerror(errno));
        _exit(127);
    }
    return pid;
}

int tu_child_done(pid_t pid)
{
    int st;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == 0)
        return -EAGAIN;
    if (r < 0)
        return 255;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int tu_reap_peer(pid_t pid, int timeout_ms)
{
    for (int waited = 0;; waited += 10) {
        int st = tu_child_done(pid);
        if (st >= 0)
            return st;
        if (waited >= timeout_ms)
            break;
        tu_sleep_ms(10);
    }
    kill(pid, SIGTERM);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return 128 + SIGTERM;
}

/* ---------------------------------------------------------------- rendezvous */

int tu_check_hw(struct ntb_dev *ntb, int pidx)
{
    (void)pidx;
    int ns = ntb_spad_count(ntb);
    if (ns < TU_SPADS_NEEDED) {
        tu_err("%s has %d scratchpads; this tool needs %d (set 'scratchpads' in the topology)",
               ntb_name(ntb), ns, TU_SPADS_NEEDED);
        return -ENOSPC;
    }
    if ((ntb_db_valid_mask(ntb) & TU_DB_ALL) != TU_DB_ALL) {
        tu_err("%s has too few doorbell bits (valid mask 0x%" PRIx64 "); this tool needs bits 0-5",
               ntb_name(ntb), ntb_db_valid_mask(ntb));
        return -ENOSPC;
    }
    return 0;
}

int tu_hello(struct ntb_dev *ntb, struct tu_db *db, int pidx, uint32_t nonce, pid_t peer_pid,
             int timeout_ms)
{
    uint64_t deadline = tu_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    while (tu_now_ns() < deadline) {
        if (peer_pid > 0 && tu_child_done(peer_pid) >= 0) {
            tu_err("the peer side exited before answering (see its message above)");
            return -ECHILD;
        }
        ntb_peer_spad_write(ntb, pidx, TU_SP_NONCE, nonce);
        ntb_peer_db_set(ntb, pidx, TU_DB_HELLO);
        int64_t bits = tu_db_wait(db, TU_DB_READY, 100);
        if (bits < 0)
            return (int)bits;
        if (bits) {
            ntb_db_clear(ntb, TU_DB_READY);
            if (ntb_spad_read(ntb, TU_SPC_NONCE) == nonce)
                return 0;
        }
    }
    return -ETIMEDOUT;
}

void tu_send_cmd(struct ntb_dev *ntb, int pidx, uint32_t cmd)
{
    ntb_peer_spad_write(ntb, pidx, TU_SP_CMD, cmd);
    ntb_peer_db_set(ntb, pidx, TU_DB_CMD);
}

void tu_answer(struct ntb_dev *ntb, int pidx, uint32_t nonce, uint32_t status)
{
    ntb_peer_spad_write(ntb, pidx, TU_SPC_STATUS, status);
    ntb_peer_spad_write(ntb, pidx, TU_SPC_NONCE, nonce); /* last: it makes the answer valid */
    ntb_peer_db_set(ntb, pidx, TU_DB_READY);
}

/* ---------------------------------------------------------------- client and server */

int tu_client_start(struct tu_client *cl, const struct tu_common *c, uint64_t clear,
                    const char *const *args)
{
    cl->peer_pid = -1;
    snprintf(cl->peer_host, sizeof cl->peer_host, "?");
    cl->ntb = tu_open_peer(c, &cl->pidx);
    if (!cl->ntb)
        return 1;
    cl->db.ntb = cl->ntb;
    cl->peer_port = ntb_peer_port_number(cl->ntb, cl->pidx);
    tu_host_name(cl->peer_port, cl->peer_host, sizeof cl->peer_host);
    if (tu_wait_link(cl->ntb, cl->pidx, 5000)) {
        tu_err("the link to peer %d (host %s) is down; bring it up ('ntblend link up ...')",
               cl->pidx, cl->peer_host);
        return 1;
    }
    /* Stale bits or scratchpads from an earlier run must not look like an answer: clear
     * ours, and use a fresh nonce. */
    ntb_db_clear(cl->ntb, clear);
    ntb_spad_write(cl->ntb, TU_SPC_NONCE, 0);
    if (!c->no_spawn) {
        char port[16], timeout[16];
        snprintf(port, sizeof port, "%d", ntb_port_number(cl->ntb));
        snprintf(timeout, sizeof timeout, "%d", c->timeout_s);
        const char *argv[40] = { "--serve", "--port", port, "--once", "--quiet", "--timeout",
                                 timeout };
        int k = 7;
        for (int i = 0; args && args[i] && k < 39; i++)
            argv[k++] = args[i];
        argv[k] = NULL;
        cl->peer_pid = tu_spawn_peer(cl->peer_host, argv);
        if (cl->peer_pid < 0)
            return 1;
    }
    int rc = tu_hello(cl->ntb, &cl->db, cl->pidx, tu_nonce(), cl->peer_pid, c->timeout_s * 1000);
    if (rc) {
        if (rc == -ETIMEDOUT && c->no_spawn)
            tu_err("no answer from host %s within %d s: start '%s --serve' there first "
                   "(ntblend run --host B -- %s --serve)", cl->peer_host, c->timeout_s, tu_prog,
                   tu_prog);
        else if (rc == -ETIMEDOUT)
            tu_err("no answer from host %s within %d s", cl->peer_host, c->timeout_s);
        return 1;
    }
    cl->session = true;
    return 0;
}

int tu_client_finish(struct tu_client *cl, int rc)
{
    if (!cl->ntb)
        return rc;
    if (cl->session)
        tu_send_cmd(cl->ntb, cl->pidx, TU_CMD_DONE);
    if (cl->peer_pid > 0) {
        int st = tu_reap_peer(cl->peer_pid, cl->session ? 5000 : 0);
        if (cl->session && st != 0 && rc == 0) {
            tu_err("the peer side exited with status %d", st);
            rc = 1;
        }
    }
    tu_db_restore(&cl->db);
    ntb_close(cl->ntb);
    cl->ntb = NULL;
    return rc;
}

int tu_server_start(struct tu_server *sv, const struct tu_common *c, uint64_t clear)
{
    sv->ntb = tu_open_peer(c, &sv->pidx);
    if (!sv->ntb)
        return 1;
    sv->db.ntb = sv->ntb;
    ntb_db_clear(sv->ntb, clear);
    ntb_spad_write(sv->ntb, TU_SP_CMD, TU_CMD_NONE);
    if (!c->quiet) {
        printf("%s: serving peer %d (port %d) on %s; Ctrl-C to stop\n", tu_prog, sv->pidx,
               ntb_peer_port_number(sv->ntb, sv->pidx), ntb_name(sv->ntb));
        fflush(stdout);
    }
    /* A spawned server gives up when its client stays silent this long (the client died). */
    sv->idle_ms = c->once ? c->timeout_s * 1000 * 10 : -1;
    return 0;
}

uint64_t tu_server_wait(struct tu_server *sv, uint64_t want)
{
    int64_t bits = tu_db_wait(&sv->db, want, sv->idle_ms);
    if (bits < 0)
        tu_err("waiting for doorbells: %s", strerror((int)-bits));
    else if (bits == 0)
        tu_err("no word from the client for %d s; giving up", sv->idle_ms / 1000);
    return bits > 0 ? (uint64_t)bits : 0;
}

void tu_server_finish(struct tu_server *sv)
{
    if (!sv->ntb)
        return;
    tu_db_restore(&sv->db);
    ntb_close(sv->ntb);
    sv->ntb = NULL;
}
