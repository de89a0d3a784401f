/*
 * Internal interface of the `ntblend` command-line tool: the command handlers (one per
 * subcommand, each returning the process exit status), the option parsing every command
 * shares, and helpers for attaching to a fabric and managing host agents.
 *
 * Exit statuses: 0 success, 1 a runtime failure (with a message that says what to do),
 * 2 a usage error (unknown command or option, missing argument).
 */
#ifndef NTBLEND_CLI_H
#define NTBLEND_CLI_H

#include <stdbool.h>
#include <sys/types.h>

#include "fabric.h"

#define CLI_OK 0
#define CLI_FAIL 1
#define CLI_USAGE 2

/* What every command gets: its arguments (argv[0] = command name) and the fabric name given
 * before the command (NULL when none; commands may override it with their own --fabric). */
struct cli {
    int argc;
    char **argv;
    const char *fabric_arg;
};

/* ---- main.c: messages and shared option parsing ---- */
void cli_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Print "ntblend CMD: <msg>" plus the command's usage to stderr; returns CLI_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Print the full help of a command to stdout; returns CLI_OK (CLI_USAGE if unknown). */
int cli_help(const char *cmd);

/* Options the commands accept. Every command takes --fabric NAME and --help; the others only
 * where `allowed` says so. */
#define CLI_OPT_JSON 1u
#define CLI_OPT_DOT 2u
#define CLI_OPT_HOST 4u
#define CLI_OPT_SHARED 8u
#define CLI_OPT_TO 16u
#define CLI_OPT_DMA_CPUS 32u
struct cli_opts {
    const char *fabric; /* resolved: --fabric after the command, before it, env, "default" */
    bool json, dot, shared;
    const char *host;
    const char *to; /* --to HOST */
    const char *dma_cpus; /* up --dma-cpus LIST */
};
/* Parse c->argv. With `posix`, stop at the first operand (for `run`, whose command line is
 * not ours to parse). *first_arg = index of the first operand. Returns -1 to go on, else an
 * exit status: CLI_OK after printing help, CLI_USAGE after a usage message. */
int cli_parse(struct cli *c, unsigned allowed, bool posix, struct cli_opts *o, int *first_arg);
/* A CPU set (bit c of words[c / 64]: CPU c; fab_ctl's dma_cpus) as taskset -c writes it,
 * e.g. "0-3,6"; "" when empty, cut short when it does not fit (status.c). */
void cli_cpu_list(const uint64_t words[FAB_CPU_WORDS], char *out, size_t len);

/* ---- agents.c: attaching, host lookup, agent processes, topology files ---- */
/* Attach as an administrator; on failure print how to start the fabric and return -errno. */
int cli_attach(const char *fabric, struct fab **out);
/* Host index by name or node id; prints a message listing the hosts when not found. */
int cli_host(const struct fab *f, const char *name);
const char *cli_state_name(uint32_t st);
/* Is pid the agent of `host` in fabric `fabric` (checked via /proc, so a recycled pid is never
 * signalled)? */
bool cli_is_agent(pid_t pid, const char *fabric, uint32_t host);
#define CLI_ANY_HOST UINT32_MAX /* cli_is_agent: an agent of any host */
/* The agents of `fabric` running now (found by their command lines, in our fabric directory),
 * for when the fabric's state cannot tell (another ntblend version's, or half-created); at
 * most max into pids. */
size_t cli_find_agents(const char *fabric, pid_t *pids, size_t max);
/* Has pid exited (reaped if it is our child; a zombie counts as gone)? */
bool cli_pid_gone(pid_t pid);
/* Start the agent of host `host` in the background; its output goes to DIR/host<N>.log. */
int cli_spawn_agent(const char *fabric, const char *dir, uint32_t host, pid_t *pid);
/* Print the last `lines` lines of host's agent log to stderr, indented. */
void cli_log_tail(const char *dir, uint32_t host, int lines);
/* SIGTERM the pids, wait up to `grace_ms`, SIGKILL the rest and wait for them. Returns how
 * many needed SIGKILL. */
size_t cli_stop_pids(const pid_t *pids, size_t n, int grace_ms);
void cli_sleep_ms(int ms);
/* ---- spawn.c: programs ntblend starts in the background ---- */
/* Start exe with args in the background (a session of its own, stdout and stderr to log) and
 * wait up to timeout_ms for it to write a line to its ready pipe, whose descriptor number is
 * put in args[fd_arg]. Returns its pid; -1 after saying "WHAT did not start" with its log. */
pid_t cli_spawn_ready(const char *exe, char **args, int fd_arg, const char *log, int timeout_ms,
                      const char *what);
/* Parse and check a topology file (calloc'd, free it); NULL after printing what is wrong. */
struct topo *cli_load_topology(const char *file);

/* ---- paths.c: the programs and files ntblend starts or hands on, found from its own place
 * (the build tree, or an installed tree under any prefix) ---- */
/* The path of program NAME: beside ntblend, else in the helpers' directory. 0 or -errno. */
int cli_sibling(const char *name, char *out, size_t len);
/* The helpers' directory (libexec/ntblend installed, bin/ in the build tree): the host agent,
 * oshrelay, the tools and drivers. `ntblend run` puts it first on PATH. */
int cli_helpers_dir(char *out, size_t len);
/* The fio engine (ntbnvme-fio.so), or -ENOENT when this build has none. */
int cli_fio_engine(char *out, size_t len);
/* Where a VM's guest image is by default: $NTBLEND_VM_IMAGE, else vm-guest/ of the build tree
 * (scripts/vm-guest.sh builds it there), or installed ${XDG_CACHE_HOME:-~/.cache}/ntblend/
 * vm-guest (ntblend-vm-guest's default). */
void cli_vm_image(char *out, size_t len);

/* ---- commands ---- */
int cmd_up(struct cli *c);
int cmd_down(struct cli *c);
int cmd_host(struct cli *c);
int cmd_status(struct cli *c);
int cmd_run(struct cli *c);
int cmd_link(struct cli *c);
int cmd_agent_ping(struct cli *c);
int cmd_device(struct cli *c);
/* mpath.c: the PATHS part of `status`: host pairs joined by more than one path (nothing
 * printed, an empty array, when there are none). */
void cli_print_paths(const struct fab *f);
struct json_object *cli_paths_json(const struct fab *f);
/* device.c: the DEVICES part of `status` (human table, or a json-c array). */
void cli_print_devices(const struct fab *f);
struct json_object *cli_devices_json(const struct fab *f);
int cmd_topology(struct cli *c);
int cmd_lspci(struct cli *c);
int cmd_nvme(struct cli *c);
int cmd_vm(struct cli *c);
/* vm.c: the VMS part of `status`, and the VM holding function fn (its slot, name in out; -1
 * and "" when none). */
void cli_print_vms(const struct fab *f);
struct json_object *cli_vms_json(const struct fab *f);
int cli_vm_of(const struct fab *f, uint32_t fn, char *out, size_t len);
/* vm_run.c: `vm run NAME -- PROGRAM...`: exec argv inside emulated VM name; returns only on
 * failure. */
int cli_vm_run(const char *fabric, const char *name, char **argv);
/* ops.c: what a program run on a host finds (ntblend's helpers first on PATH, the fio engine
 * in NTBLEND_FIO_ENGINE), for `run` and `vm run`. 0, or -1 with errno. */
int cli_run_env(void);
int cmd_names(struct cli *c);
int cmd_mcast(struct cli *c); /* mcast.c */

#endif
