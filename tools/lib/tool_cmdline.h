/*
 * libntbtool (tools/lib/ntbtool.h): the command line every tool parses the same way: one getopt loop, one set of
 * common options and the same messages for bad values (cmdline.c).
 */
#ifndef NTBLEND_TOOL_CMDLINE_H
#define NTBLEND_TOOL_CMDLINE_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>

#include "tool_util.h"

/* ================================================================ the command line (cmdline.c) */

/*
 * The options several tools take, parsed once here. A tool lists which of them it takes
 * (TU_OPT_* bits) and its own options in a getopt_long table whose values are characters or
 * TU_O_TOOL and up; tu_getopt() merges the two tables, runs the loop, and hands the tool's
 * options to its callback.
 */
struct tu_common {
    int adapter;      /* -a, --adapter N (-1: not given) */
    int pidx;         /* --peer PIDX (NTB tools; default 0) */
    int port;         /* --port NODE (NTB tools; -1: not given) */
    int node;         /* --node NODE (segment tools; -1: not given) */
    int timeout_s;    /* --timeout S (default 20) */
    uint32_t session; /* --session ID */
    bool session_set;
    bool json, no_spawn, serve, once, quiet;
};

#define TU_OPT_ADAPTER (1u << 0)  /* -a, --adapter N */
#define TU_OPT_PEER (1u << 1)     /* --peer PIDX, --port NODE */
#define TU_OPT_NODE (1u << 2)     /* --node NODE */
#define TU_OPT_JSON (1u << 3)     /* --json */
#define TU_OPT_SPAWN (1u << 4)    /* --no-spawn, --serve, --quiet, --timeout S */
#define TU_OPT_ONCE (1u << 5)     /* --once */
#define TU_OPT_SESSION (1u << 6)  /* --session ID */
/* The two families: NTB tools meeting over scratchpads, segment tools over a session. */
#define TU_OPTS_NTB (TU_OPT_ADAPTER | TU_OPT_PEER | TU_OPT_JSON | TU_OPT_SPAWN | TU_OPT_ONCE)
#define TU_OPTS_SEG (TU_OPT_ADAPTER | TU_OPT_NODE | TU_OPT_JSON | TU_OPT_SPAWN | TU_OPT_SESSION)

enum { TU_O_TOOL = 0x200 }; /* a tool's own long-only options are numbered from here */

/*
 * What tu_getopt() needs to know about a tool. The callback gets each option of the tool's
 * own: return 0, or nonzero when its value is bad (tu_getopt() then says so with bad_hint).
 */
struct tu_cmdline {
    unsigned common;              /* TU_OPT_* */
    int adapter_max;              /* largest -a accepted */
    const char *shortopts;        /* the tool's short options besides "a:" and "h" */
    const struct option *options; /* the tool's own long options, { 0 }-terminated */
    int (*option)(void *ctx, int opt, const char *arg);
    void *ctx;
    void (*help)(FILE *out);
    const char *bad_hint;         /* appended to "see 'PROG --help'" ("" for none) */
};

/**
 * tu_getopt() - parse the command line of a tool.
 * @argc: from main()
 * @argv: from main()
 * @cl:   the tool's options
 * @c:    the common options, tu_common_init() and the tool's defaults applied first
 *
 * Prints help on -h/--help, and the usual messages for unknown options, bad values and stray
 * arguments.
 * Return: -1 to go on; otherwise the exit status for main() (0 after --help, 2 on errors).
 */
int tu_getopt(int argc, char **argv, const struct tu_cmdline *cl, struct tu_common *c);

/**
 * tu_common_init() - the defaults of the common options: adapter, port and node -1, pidx 0,
 *                    timeout 20 s, everything else off.
 * @c: the options
 */
void tu_common_init(struct tu_common *c);

#endif
