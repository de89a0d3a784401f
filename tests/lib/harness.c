/*
 * Bodies of the test helpers declared in harness.h (what that header says).
 */
#define _GNU_SOURCE
#include "harness.h"

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

/* Fabrics this test booted and has not shut down: taken down at exit, even after a failure. */
static char h_booted[16][64];

void h_down(const char *fabric)
{
    h_cli(fabric, "down >/dev/null 2>&1");
    for (int i = 0; i < 16; i++)
        if (strcmp(h_booted[i], fabric) == 0)
            h_booted[i][0] = 0;
}

static void h_down_all(void)
{
    for (int i = 0; i < 16; i++)
        if (h_booted[i][0])
            h_cli(h_booted[i], "down >/dev/null 2>&1");
}

/* SIGTERM or SIGINT (a test out of time: tests/CMakeLists.txt's guard) in the process that
 * booted the fabrics takes them down, then dies of the signal; its children just die. Not
 * async-signal-safe (h_cli runs system()), which a process about to die can afford. */
static pid_t h_booter;

static void h_on_signal(int sig)
{
    if (getpid() == h_booter)
        h_down_all();
    signal(sig, SIG_DFL);
    raise(sig);
}

int h_up(const char *fabric, const char *topo)
{
    static bool registered;
    if (!registered) {
        atexit(h_down_all);
        h_booter = getpid();
        signal(SIGTERM, h_on_signal);
        signal(SIGINT, h_on_signal);
        registered = true;
    }
    h_cli(fabric, "down >/dev/null 2>&1");
    for (int i = 0; i < 16; i++)
        if (!h_booted[i][0]) {
            snprintf(h_booted[i], sizeof h_booted[i], "%s", fabric);
            break;
        }
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
