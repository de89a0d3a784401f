/*
 * Bodies of the test helpers declared in harness.h (what that header says).
 */
#define _GNU_SOURCE
#include "harness.h"

#include <fcntl.h>
#include <sys/socket.h>

const char *h_src(void)
{
    const char *s = getenv("NTBLEND_SRC");
    return s ? s : ".";
}

const char *h_bin(void)
{
    const char *s = getenv("NTBLEND_BIN");
    return s ? s : "./bin";
}

int h_sh(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int st = system(cmd);
    return (st >= 0 && WIFEXITED(st)) ? WEXITSTATUS(st) : -1;
}

int h_cli(const char *fabric, const char *fmt, ...)
{
    char args[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    return h_sh("%s/ntblend --fabric %s %s", h_bin(), fabric, args);
}

/* Fabrics this process booted and has not taken down, each with the socket to its reaper. */
struct h_booted {
    char name[64];
    int reaper; /* write end; -1 when there is no reaper */
};
static struct h_booted h_booted[16];
static pid_t h_booter;

/* Tell a fabric's reaper that the fabric is down: it exits without doing anything. */
static void h_release(struct h_booted *b)
{
    if (b->reaper >= 0) {
        /* A reaper that is gone has nothing left to do (and is no reason for SIGPIPE). */
        ssize_t w = send(b->reaper, "down\n", 5, MSG_NOSIGNAL);
        (void)w;
        close(b->reaper);
    }
    b->reaper = -1;
    b->name[0] = 0;
}

void h_down(const char *fabric)
{
    h_cli(fabric, "down >/dev/null 2>&1");
    for (int i = 0; i < 16; i++)
        if (h_booted[i].name[0] && strcmp(h_booted[i].name, fabric) == 0)
            h_release(&h_booted[i]);
}

static void h_down_all(void)
{
    if (getpid() != h_booter) /* a forked child that exits: the fabrics are its parent's */
        return;
    for (int i = 0; i < 16; i++)
        if (h_booted[i].name[0]) {
            h_cli(h_booted[i].name, "down >/dev/null 2>&1");
            h_release(&h_booted[i]);
        }
}

/* SIGTERM or SIGINT (a test out of time: tests/CMakeLists.txt's guard) in the process that
 * booted the fabrics takes them down, then dies of the signal; its children just die. Not
 * async-signal-safe (h_cli runs system()), which a process about to die can afford. */
static void h_on_signal(int sig)
{
    h_down_all();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* A fabric's reaper: a process in a session of its own (out of reach of the guard's signals
 * to the test's process group) that waits on a socket from the test. The test sends "down"
 * when it has taken the fabric down; when the socket closes without it, the test ended in a
 * way no handler of its own sees (SIGKILL from the guard or CTest, a sanitizer's abort, a
 * crash) and the reaper takes the fabric down. Forked twice, so that the test never has it to
 * wait for. Returns the test's end (close-on-exec: programs the test runs do not hold it
 * open), or -1 when no reaper could be started (the handlers still stand). */
static int h_reaper(const char *fabric)
{
    int p[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p))
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (fork() != 0)
            _exit(0);
        setsid();
        signal(SIGTERM, SIG_IGN);
        signal(SIGINT, SIG_IGN);
        signal(SIGHUP, SIG_IGN);
        int null = open("/dev/null", O_RDWR);
        if (dup2(p[0], 0) < 0 || null < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
            _exit(1);
        fcntl(0, F_SETFD, 0); /* p[0] may have been 0 already (the test's stdin closed) */
        /* Hold no other descriptor of the test's (a pipe to one of its children would never
         * see its end). */
        close_range(3, ~0u, 0);
        char cli[512];
        snprintf(cli, sizeof cli, "%s/ntblend", h_bin());
        execl("/bin/sh", "sh", "-c",
              "read -r said; [ \"$said\" = down ] || exec \"$0\" --fabric \"$1\" down", cli,
              fabric, (char *)NULL);
        _exit(127);
    }
    close(p[0]);
    if (pid < 0) {
        close(p[1]);
        return -1;
    }
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    return p[1];
}

int h_up(const char *fabric, const char *topo)
{
    static bool registered;
    if (!registered) {
        atexit(h_down_all);
        h_booter = getpid();
        for (int i = 0; i < 16; i++)
            h_booted[i].reaper = -1;
        signal(SIGTERM, h_on_signal);
        signal(SIGINT, h_on_signal);
        registered = true;
    }
    h_down(fabric); /* a leftover of that name */
    struct h_booted *b = NULL;
    for (int i = 0; i < 16 && !b; i++)
        if (!h_booted[i].name[0])
            b = &h_booted[i];
    if (!b) {
        fprintf(stderr, "harness: more than 16 fabrics up at once in one test\n");
        return -1;
    }
    snprintf(b->name, sizeof b->name, "%s", fabric);
    b->reaper = h_reaper(fabric);
    /* A path from the root as it is, else from the source tree. */
    if (topo[0] == '/')
        return h_cli(fabric, "up %s >/dev/null", topo);
    return h_cli(fabric, "up %s/%s >/dev/null", h_src(), topo);
}

void h_send(int fd, uint64_t v)
{
    if (write(fd, &v, sizeof v) != sizeof v)
        _exit(3);
}

uint64_t h_recv(int fd, bool parent)
{
    uint64_t v;
    ssize_t n;
    do
        n = read(fd, &v, sizeof v);
    while (n < 0 && errno == EINTR);
    if (n != sizeof v) {
        /* The other side died: its own failure is the one reported. The parent exits through
         * atexit, which shuts down the fabrics it booted; a child must not run it. */
        fprintf(stderr, "harness: the other side of a pipe is gone\n");
        if (parent)
            exit(4);
        _exit(4);
    }
    return v;
}

static struct h_chan *h_self;

uint64_t h_get(void) { return h_recv(h_self->to_child[0], false); }

void h_put(uint64_t v) { h_send(h_self->to_parent[1], v); }

uint64_t h_from(struct h_proc *p) { return h_recv(p->ch.to_parent[0], true); }

void h_to(struct h_proc *p, uint64_t v) { h_send(p->ch.to_child[1], v); }

struct h_proc h_spawn(const char *fabric, const char *host, void (*fn)(void *), void *arg)
{
    struct h_proc p;
    if (pipe(p.ch.to_child) || pipe(p.ch.to_parent))
        abort();
    fflush(NULL);
    p.pid = fork();
    if (p.pid == 0) {
        setenv("NTBLEND_FABRIC", fabric, 1);
        setenv("NTBLEND_HOST", host, 1);
        for (int i = 0; i < 16; i++) /* the reapers wait for the parent alone */
            if (h_booted[i].reaper >= 0) {
                close(h_booted[i].reaper);
                h_booted[i].reaper = -1;
            }
        close(p.ch.to_child[1]);
        close(p.ch.to_parent[0]);
        h_self = &p.ch;
        fn(arg);
        _exit(0);
    }
    close(p.ch.to_child[0]);
    close(p.ch.to_parent[1]);
    return p;
}

int h_join(struct h_proc *p)
{
    int st;
    while (waitpid(p->pid, &st, 0) < 0 && errno == EINTR)
        ;
    close(p->ch.to_child[1]);
    close(p->ch.to_parent[0]);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

const char *h_fabric_name(const char *test)
{
    static char name[64];
    snprintf(name, sizeof name, "t-%s-%d", test, (int)getpid());
    return name;
}
