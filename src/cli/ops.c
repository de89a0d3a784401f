/*
 * Commands that act on a running fabric without changing its life cycle: `run` (start a
 * program as a process of a host), `link down|up` (fault injection on a cable) and
 * `agent-ping` (one message between two hosts' agents over the NTB, the quickest check that
 * a path really carries traffic).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent_proto.h"
#include "cli.h"

/* A peer ping waits up to 1 s for a dead path inside the agent; give it room to say so. */
#define PEER_PING_TIMEOUT_MS 5000

/*
 * What a program run on a host finds: ntblend's tools and drivers first on PATH (installed,
 * they are in the helpers' directory, not in bin/), and NTBLEND_FIO_ENGINE, the fio engine
 * the fio job files name, unless the caller chose one. -1 with errno when the environment
 * cannot be changed; a build without a helper directory or engine changes nothing.
 */
int cli_run_env(void)
{
    char dir[PATH_MAX], engine[PATH_MAX];
    if (cli_helpers_dir(dir, sizeof dir) == 0) {
        const char *path = getenv("PATH");
        if (!path || !*path)
            path = "/usr/local/bin:/usr/bin:/bin";
        size_t n = strlen(dir) + strlen(path) + 2;
        char *p = malloc(n);
        if (!p)
            return -1;
        snprintf(p, n, "%s:%s", dir, path);
        int rc = setenv("PATH", p, 1);
        free(p);
        if (rc < 0)
            return -1;
    }
    if (!getenv("NTBLEND_FIO_ENGINE") && cli_fio_engine(engine, sizeof engine) == 0 &&
        setenv("NTBLEND_FIO_ENGINE", engine, 1) < 0)
        return -1;
    return 0;
}

int cmd_run(struct cli *c)
{
    struct cli_opts o;
    int first;
    /* posix: everything from the first operand on is the program's command line. */
    int rc = cli_parse(c, CLI_OPT_HOST, true, &o, &first);
    if (rc >= 0)
        return rc;
    if (!o.host)
        return cli_usage_error("run", "which host? give --host NAME (or a node id)");
    if (first >= c->argc)
        return cli_usage_error("run", "what should run? give the command after '--'");
    struct fab *f;
    if (cli_attach(o.fabric, &f) < 0)
        return CLI_FAIL;
    int h = cli_host(f, o.host);
    if (h < 0) {
        fab_detach(f);
        return CLI_FAIL;
    }
    struct fab_host *host = fab_host(f, (uint32_t)h);
    uint32_t st = atomic_load(&host->state), boot = atomic_load(&host->boot_gen);
    char name[TOPO_NAME_MAX], life[16];
    snprintf(name, sizeof name, "%s", host->name);
    snprintf(life, sizeof life, "%u", boot);
    fab_detach(f);
    if (st != FAB_HOST_UP) {
        cli_err("host %s is %s; boot it with: ntblend host start %s --fabric %s", name,
                cli_state_name(st), name, o.fabric);
        return CLI_FAIL;
    }
    /* NTBLEND_HOST_BOOT: the host's life the program belongs to (it dies with it). */
    if (setenv("NTBLEND_FABRIC", o.fabric, 1) < 0 || setenv("NTBLEND_HOST", name, 1) < 0 ||
        setenv("NTBLEND_HOST_BOOT", life, 1) < 0 || cli_run_env() < 0) {
        cli_err("cannot set the environment: %s", strerror(errno));
        return CLI_FAIL;
    }
    fflush(NULL);
    execvp(c->argv[first], c->argv + first);
    int e = errno;
    cli_err("cannot run '%s': %s", c->argv[first], strerror(e));
    return e == ENOENT ? 127 : 126; /* as a shell would say */
}

int cmd_link(struct cli *c)
{
    struct cli_opts o;
    int first;
    int rc = cli_parse(c, 0, false, &o, &first);
    if (rc >= 0)
        return rc;
    if (c->argc - first != 3)
        return cli_usage_error("link", "expected down or up, then the two ends of a cable");
    const char *action = c->argv[first], *a = c->argv[first + 1], *b = c->argv[first + 2];
    bool up = strcmp(action, "up") == 0;
    if (!up && strcmp(action, "down") != 0)
        return cli_usage_error("link", "unknown action '%s' (down or up)", action);
    struct fab *f;
    if (cli_attach(o.fabric, &f) < 0)
        return CLI_FAIL;
    char why[256];
    int l = fab_link_between(f, a, b, why, sizeof why);
    if (l < 0) {
        cli_err("%s", why);
        fab_detach(f);
        return CLI_FAIL;
    }
    struct fab_link *lk = fab_link(f, (uint32_t)l);
    const char *ea = lk->a.kind == TOPO_END_ADAPTER ? fab_adapter(f, lk->a.index)->name
                                                    : fab_switch(f, lk->a.index)->name;
    const char *eb = lk->b.kind == TOPO_END_ADAPTER ? fab_adapter(f, lk->b.index)->name
                                                    : fab_switch(f, lk->b.index)->name;
    if ((atomic_load(&lk->up) != 0) == up) {
        printf("link %d %s --- %s is already %s\n", l, ea, eb, action);
        fab_detach(f);
        return CLI_OK;
    }
    rc = fab_link_set(f, (uint32_t)l, up);
    if (rc) {
        cli_err("cannot change link %s --- %s: %s", ea, eb, strerror(-rc));
        fab_detach(f);
        return CLI_FAIL;
    }
    printf("link %d %s --- %s: %s -> %s\n", l, ea, eb, up ? "down" : "up", action);
    fab_detach(f);
    return CLI_OK;
}

int cmd_agent_ping(struct cli *c)
{
    struct cli_opts o;
    int first;
    int rc = cli_parse(c, 0, false, &o, &first);
    if (rc >= 0)
        return rc;
    if (c->argc - first != 2)
        return cli_usage_error("agent-ping", "expected two hosts");
    const char *an = c->argv[first], *bn = c->argv[first + 1];
    struct fab *f;
    if (cli_attach(o.fabric, &f) < 0)
        return CLI_FAIL;
    int a = cli_host(f, an), b = a < 0 ? -1 : cli_host(f, bn);
    if (a < 0 || b < 0) {
        fab_detach(f);
        return CLI_FAIL;
    }
    if (a == b) {
        cli_err("%s and %s are the same host; name two different hosts", an, bn);
        fab_detach(f);
        return CLI_FAIL;
    }
    /* Names as the fabric spells them (the user may have given node ids). */
    char na[TOPO_NAME_MAX], nb[TOPO_NAME_MAX];
    snprintf(na, sizeof na, "%s", fab_host(f, (uint32_t)a)->name);
    snprintf(nb, sizeof nb, "%s", fab_host(f, (uint32_t)b)->name);
    uint32_t st = atomic_load(&fab_host(f, (uint32_t)a)->state);
    char dir[sizeof f->dir];
    snprintf(dir, sizeof dir, "%s", f->dir);
    fab_detach(f);
    if (st != FAB_HOST_UP) {
        cli_err("host %s is %s, so its agent cannot ping; boot it with: ntblend host start %s "
                "--fabric %s", na, cli_state_name(st), na, o.fabric);
        return CLI_FAIL;
    }

    int fd = agent_connect(dir, (uint32_t)a);
    if (fd < 0) {
        cli_err("cannot reach the agent of host %s: %s; see 'ntblend status --fabric %s'", na,
                strerror(-fd), o.fabric);
        return CLI_FAIL;
    }
    struct agent_req req = { .op = AGENT_PEER_PING, .a = (uint64_t)b };
    struct agent_rsp rsp = { .rc = 1 }; /* untouched when the agent itself never answers */
    rc = agent_call(fd, &req, &rsp, PEER_PING_TIMEOUT_MS);
    close(fd);
    if (rc < 0 && rsp.rc == 1) {
        cli_err("the agent of host %s did not answer (%s); see its log in %s/host%d.log", na,
                strerror(-rc), dir, a);
        return CLI_FAIL;
    }
    switch (rc) {
    case 0:
        printf("%s -> %s: round trip %.1f us\n", na, nb, (double)rsp.a / 1000.0);
        return CLI_OK;
    case -ENOLINK:
    case -ETIMEDOUT:
        cli_err("no path from %s to %s: link down? (see 'ntblend status --fabric %s')", na, nb,
                o.fabric);
        return CLI_FAIL;
    case -ENOTCONN:
        cli_err("%s has no NTB port that reaches %s directly (agents only talk to direct "
                "NTB peers; see 'ntblend topology --dot --fabric %s')", na, nb, o.fabric);
        return CLI_FAIL;
    default:
        cli_err("ping from %s to %s failed: %s", na, nb, strerror(-rc));
        return CLI_FAIL;
    }
}
