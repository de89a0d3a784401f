/*
 * libntbtool: the command line of the tools — one getopt_long loop, the options several tools
 * share, and the same messages for unknown options, bad values and stray arguments (declared
 * in ntbtool.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ntbtool.h"

enum {
    O_PEER = 0x100, O_PORT, O_NODE, O_JSON, O_NOSPAWN, O_SERVE, O_QUIET, O_TIMEOUT, O_ONCE,
    O_SESSION,
};

/* The common options, each with the TU_OPT_* bit that asks for it. */
static const struct {
    unsigned bit;
    struct option opt;
} common[] = {
    { TU_OPT_ADAPTER, { "adapter", 1, 0, 'a' } },
    { TU_OPT_PEER, { "peer", 1, 0, O_PEER } },
    { TU_OPT_PEER, { "port", 1, 0, O_PORT } },
    { TU_OPT_NODE, { "node", 1, 0, O_NODE } },
    { TU_OPT_JSON, { "json", 0, 0, O_JSON } },
    { TU_OPT_SPAWN, { "no-spawn", 0, 0, O_NOSPAWN } },
    { TU_OPT_SPAWN, { "serve", 0, 0, O_SERVE } },
    { TU_OPT_SPAWN, { "quiet", 0, 0, O_QUIET } },
    { TU_OPT_SPAWN, { "timeout", 1, 0, O_TIMEOUT } },
    { TU_OPT_ONCE, { "once", 0, 0, O_ONCE } },
    { TU_OPT_SESSION, { "session", 1, 0, O_SESSION } },
};
#define NCOMMON (sizeof common / sizeof common[0])
#define MAX_OPTS 64

void tu_common_init(struct tu_common *c)
{
    memset(c, 0, sizeof *c);
    c->adapter = c->port = c->node = -1;
    c->timeout_s = 20;
}

/* One common option: 0, 1 (bad value), or -ENOENT when `opt` is not one of them. */
static int common_option(const struct tu_cmdline *cl, struct tu_common *c, int opt,
                         const char *arg)
{
    uint64_t u;
    switch (opt) {
    case 'a':
        if (!(cl->common & TU_OPT_ADAPTER))
            return -ENOENT;
        return tu_parse_int(arg, 0, cl->adapter_max, &c->adapter) != 0;
    case O_PEER: return tu_parse_int(arg, 0, 1 << 16, &c->pidx) != 0;
    case O_PORT: return tu_parse_int(arg, 0, INT32_MAX, &c->port) != 0;
    case O_NODE: return tu_parse_int(arg, 1, 65535, &c->node) != 0;
    case O_JSON: c->json = true; return 0;
    case O_NOSPAWN: c->no_spawn = true; return 0;
    case O_SERVE: c->serve = true; return 0;
    case O_QUIET: c->quiet = true; return 0;
    case O_ONCE: c->once = true; return 0;
    case O_TIMEOUT: return tu_parse_int(arg, 1, 3600, &c->timeout_s) != 0;
    case O_SESSION:
        if (tu_parse_u64(arg, &u) || !u || u > UINT32_MAX)
            return 1;
        c->session = (uint32_t)u;
        c->session_set = true;
        return 0;
    default: return -ENOENT;
    }
}

int tu_getopt(int argc, char **argv, const struct tu_cmdline *cl, struct tu_common *c)
{
    struct option lo[MAX_OPTS];
    char shortopts[64];
    int n = 0;
    for (size_t i = 0; i < NCOMMON; i++)
        if (cl->common & common[i].bit)
            lo[n++] = common[i].opt;
    for (int i = 0; cl->options && cl->options[i].name && n < MAX_OPTS - 2; i++)
        lo[n++] = cl->options[i];
    lo[n++] = (struct option){ "help", 0, 0, 'h' };
    lo[n] = (struct option){ 0, 0, 0, 0 };
    snprintf(shortopts, sizeof shortopts, "%s%sh", cl->common & TU_OPT_ADAPTER ? "a:" : "",
             cl->shortopts ? cl->shortopts : "");

    int opt;
    while ((opt = getopt_long(argc, argv, shortopts, lo, NULL)) != -1) {
        if (opt == 'h') {
            cl->help(stdout);
            return 0;
        }
        if (opt == '?' || opt == ':') {
            fprintf(stderr, "%s: see '%s --help'\n", tu_prog, tu_prog);
            return 2;
        }
        int bad = common_option(cl, c, opt, optarg);
        if (bad == -ENOENT)
            bad = cl->option(cl->ctx, opt, optarg);
        if (bad) {
            /* optarg came with the option ("--x=v", "-xv") or after it ("--x v"). */
            tu_err("bad value '%s' for %s (see '%s --help'%s)", optarg,
                   argv[optind - 1][0] == '-' ? argv[optind - 1] : argv[optind - 2], tu_prog,
                   cl->bad_hint ? cl->bad_hint : "");
            return 2;
        }
    }
    if (optind < argc) {
        tu_err("unexpected argument '%s' (see '%s --help')", argv[optind], tu_prog);
        return 2;
    }
    return -1;
}
