/*
 * ntblend: the command-line tool that starts, inspects and breaks emulated NTB fabrics.
 * This file owns the entry point, the global options, dispatch to the commands, the help
 * texts and the option parsing every command shares. The commands live in up.c (up, down,
 * host), status.c, dot.c (topology), device.c, lspci.c, nvme.c, names.c and ops.c
 * (run, link, agent-ping), mcast.c; paths.c finds the programs they start.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ntblend/version.h"

struct command {
    const char *name;
    int (*fn)(struct cli *c);
    const char *synopsis; /* one line per form, without "ntblend " */
    const char *summary;
    const char *details; /* options and examples */
};

static const struct command commands[] = {
    { "up", cmd_up, "up FILE [--fabric NAME] [--dma-cpus LIST]",
      "create a fabric from a topology file and boot one agent per host",
      "Parses and checks FILE (errors are reported as FILE:LINE), creates the fabric's shared\n"
      "memory, starts every host's agent in the background (log: <fabric dir>/host<N>.log)\n"
      "and waits until all hosts are up. If a host does not come up within 60 s, the tail of\n"
      "its log is shown and the fabric is taken down again.\n"
      "\noptions:\n"
      "  --dma-cpus LIST  run the adapters' DMA engines (one thread per channel in the hosts'\n"
      "                   agents) on these CPUs only, e.g. 1 or 2-3,6 (as taskset -c), also\n"
      "                   after an agent restart. The engines are hardware on a real fabric;\n"
      "                   on a machine with few CPUs this keeps their copies off the CPUs of\n"
      "                   the software under test (pin that elsewhere, e.g. with taskset or\n"
      "                   oshrun's binding). Default: any CPU.\n"
      "\nexamples:\n"
      "  ntblend up examples/topologies/two-hosts.ini\n"
      "  ntblend up examples/topologies/cluster60.ini --fabric big\n"
      "  ntblend up examples/topologies/ring5-latency.ini --dma-cpus 1\n" },
    { "down", cmd_down, "down [--fabric NAME]",
      "stop every agent of a fabric and remove its shared memory",
      "Agents get SIGTERM and 5 s to exit, then SIGKILL. Applications still running on the\n"
      "fabric notice that it is gone and exit. Also clears what a crashed fabric left behind.\n"
      "\nexamples:\n"
      "  ntblend down\n"
      "  ntblend --fabric big down\n" },
    { "status", cmd_status, "status [--json] [--fabric NAME]",
      "show hosts, adapters, switches, links and devices of a running fabric",
      "HOSTS     NODE node id; RAM; IOMMU on/off; STATE up, booting or down; PID the agent's\n"
      "          process; AGENT ok when it answers a ping within 1 s (else no answer, not\n"
      "          running, none or wrong pid); FAULTS IOMMU faults recorded so far.\n"
      "ADAPTERS  LUT look-up-table entries in use/total: each maps one window of a peer's\n"
      "          memory (the agent's mailbox routes count too); REQ-ID requester-ID table\n"
      "          entries in use/total: who may read through this NTB (CPUs, DMA engines, lent\n"
      "          devices); DB PEND/MSK doorbell bits pending / masked, in hex (the top bit is\n"
      "          the agent's); DMA channels in use/total; PEERS the adapters this port reaches,\n"
      "          each with its path up or down ([port disabled]: ntb_link_disable).\n"
      "SWITCHES  PORTS USED cables plugged/ports; LATENCY per traversal (latency model).\n"
      "IN-HOST SWITCHES  [hostswitch] sections: the HOST whose tree it is in, the switch\n"
      "          ABOVE it (root: a root port), LATENCY per traversal and the upstream LINK's\n"
      "          cost (an expansion chassis' cable), the devices and adapters BELOW it.\n"
      "LINKS     each cable, its two ends and whether it is up.\n"
      "PATHS     (only when some hosts have several) each pair of hosts joined by more than\n"
      "          one path: two adapters on two switches (docs/multipath.md). Path N of a pair\n"
      "          is what sio_set_path(dev, N) picks; each with its adapters, the switches it\n"
      "          crosses and whether it is up.\n"
      "DEVICES   as 'ntblend device list' (see 'ntblend help device').\n"
      "A 'dma cpus' line under the header gives the CPUs of the DMA engines (ntblend up\n"
      "--dma-cpus); without it they run on any CPU.\n"
      "\noptions:\n"
      "  --json   one JSON document (keys: fabric, topology, dir, latency_model, dma_cpus, hosts,\n"
      "           adapters, switches, hostswitches, links, paths, devices); docs/cli.md lists\n"
      "           every field\n"
      "\nexamples:\n"
      "  ntblend status\n"
      "  ntblend status --json --fabric big > big.json\n" },
    { "run", cmd_run, "run --host H [--fabric NAME] -- CMD [ARG...]",
      "run a command as a process of host H",
      "H is a host name or node id. Sets NTBLEND_FABRIC and NTBLEND_HOST and executes CMD,\n"
      "so the exit status is CMD's (127 if it cannot be executed). ntblend's tools and\n"
      "drivers (ntb_tool, ntb_perf, scibench, nvme_bench, nvme_drv, ...) come first on CMD's\n"
      "PATH, and NTBLEND_FIO_ENGINE names the fio engine unless it is set already.\n"
      "\nexamples:\n"
      "  ntblend run --host a -- ./my-app --size 4M\n"
      "  ntblend run --host 8 -- sh -c 'echo I am $NTBLEND_HOST'\n" },
    { "link", cmd_link, "link down|up A B [--fabric NAME]",
      "pull or replug the cable between A and B",
      "A and B are hosts, adapters (HOST.ADAPTER) or switches joined by exactly one cable;\n"
      "name the adapters when two hosts share several cables. Every path over that cable\n"
      "breaks (reads return all ones, writes are dropped) until it is brought up again.\n"
      "\nexamples:\n"
      "  ntblend link down a b\n"
      "  ntblend link up a.ntb0 sw0\n" },
    { "host", cmd_host, "host kill|start H [--fabric NAME]",
      "crash a host, or boot a host that is down",
      "kill:  SIGKILL the host's agent and power the host off. Its applications exit by\n"
      "       themselves; its peers see their links go down.\n"
      "start: power a down host on (its RAM is cleared, its adapters reset) and boot its\n"
      "       agent; waits up to 30 s for it.\n"
      "\nexamples:\n"
      "  ntblend host kill b\n"
      "  ntblend host start b\n" },
    { "topology", cmd_topology, "topology --dot [FILE] [--fabric NAME]",
      "draw a fabric (running, or from a topology file) as Graphviz DOT",
      "Without FILE, draws the running fabric: links that are down are dashed red, hosts\n"
      "that are down grey. With FILE, draws that topology; no fabric is needed.\n"
      "\nexamples:\n"
      "  ntblend topology --dot | dot -Tpng -o fabric.png\n"
      "  ntblend topology --dot examples/topologies/ring5.ini | dot -Tsvg -o ring5.svg\n" },
    { "device", cmd_device, "device list|add|remove|borrow|return|lend|reclaim ... [--fabric NAME]",
      "list the fabric's PCIe devices, lend them out, borrow them, hot-add them elsewhere",
      "  device list [--json]            every device: id, SISCI fdid, name, type, lender,\n"
      "                                  PCI ids and class, whether it is lent out, who\n"
      "                                  borrows it\n"
      "  device add NAME                 the lender makes the device available to borrow\n"
      "  device remove NAME              ... and withdraws it (hot-removed where lent; borrows stay)\n"
      "  device borrow NAME --host H [--shared]\n"
      "                                  host H borrows it (exclusively unless --shared) and\n"
      "                                  holds it until 'device return'\n"
      "  device return NAME --host H     host H gives it back (an exclusive one is reset)\n"
      "  device lend NAME --to H         Device Lending: the lender lends it to host H, where it\n"
      "                                  is hot-added into H's PCIe tree ('ntblend lspci --host\n"
      "                                  H' shows it) for H's ordinary drivers\n"
      "  device reclaim NAME             the lender takes it back: hot-removed from the\n"
      "                                  borrower's tree, reset, no longer lent out\n"
      "Applications borrow with the SmartIO API (include/ntblend/smartio.h) instead; their\n"
      "borrows end with the process.\n"
      "\nexamples:\n"
      "  ntblend device add nvme0\n"
      "  ntblend device borrow nvme0 --host b\n"
      "  ntblend device list --json\n"
      "  ntblend device lend nvme0 --to b && ntblend lspci --host b\n" },
    { "lspci", cmd_lspci, "lspci [--host H] [-v] [-n] [-x] [-t] [-s SEL] [--json] [--fabric NAME]",
      "list each host's PCIe tree the way lspci does",
      "A host's tree holds its NTB adapters (bus 01: the NTB function, and function 1 when the\n"
      "adapter has a DMA engine) and its devices, each on its own bus. Names come from the\n"
      "pci.ids database, so the lines read as lspci's do for the same IDs; BAR addresses are\n"
      "the host's own physical addresses. Without --host every host is listed in turn.\n"
      "\noptions:\n"
      "  --host H   only host H (name or node id)\n"
      "  -v, -vv    subsystem, flags, BARs (address, size), capabilities (MSI-X, PCIe, SR-IOV),\n"
      "             and what ntblend knows: device name and model, lending state; for an\n"
      "             adapter its LUT, requester-ID table and peers with their path state\n"
      "  -n, -nn    numeric IDs only, or names and IDs\n"
      "  -x, -xxx, -xxxx  configuration space (64, 256, 4096 bytes) in the format that\n"
      "             'lspci -F FILE' reads, so pciutils can decode what a host sees\n"
      "  -t         the tree: root ports, buses and the functions behind them\n"
      "  -s SEL     only SEL: a slot (02:00.0), all functions of a slot (02:00) or a name\n"
      "  --json     every host with its functions, BARs and MSI-X as JSON\n"
      "\nexamples:\n"
      "  ntblend lspci --host a -v\n"
      "  ntblend lspci -t\n"
      "  ntblend lspci -s nvme0 -vv\n"
      "  ntblend lspci --host a -xxx > a.dump && lspci -F a.dump -vv\n" },
    { "nvme", cmd_nvme, "nvme manager|stop|status|mount|unmount ... [--fabric NAME]",
      "share one NVMe among many hosts: its manager, its clients, a FUSE mount",
      "  nvme manager DEVICE --host H [--max-clients N] [--foreground]\n"
      "                        host H runs the manager of DEVICE: it borrows the controller,\n"
      "                        resets, enables and identifies it, then shares it. Processes on\n"
      "                        any host that open DEVICE with libntbnvme become its clients and\n"
      "                        get I/O queue pairs of their own (docs/nvme-driver.md). Runs in\n"
      "                        the background (log and state in the fabric's directory) unless\n"
      "                        --foreground; returns once clients may connect.\n"
      "  nvme stop DEVICE      stop the manager: its clients' queues are deleted and the\n"
      "                        controller shut down; clients' next requests fail\n"
      "  nvme status [--json]  each NVMe: its manager (host, pid), clients, queue pairs in\n"
      "                        use/total, clients reclaimed after they died or were cut off\n"
      "  nvme --host H mount DEVICE DIR [OPTIONS]\n"
      "                        expose each namespace as the file DIR/nsN through FUSE, so\n"
      "                        unmodified programs (dd, fio --ioengine=psync) use the device;\n"
      "                        OPTIONS go to ntblend-nvmefs (see ntblend-nvmefs --help);\n"
      "                        DEVICE may be pci:BB:DD.F, an NVMe function of H's PCIe tree\n"
      "                        (its own, or one lent to it: ntblend lspci --host H)\n"
      "  nvme unmount DIR      unmount DIR and wait until its device is returned (after a\n"
      "                        plain fusermount3 -u the device is still held for a moment)\n"
      "\nexamples:\n"
      "  ntblend device add nvme0 && ntblend nvme manager nvme0 --host a\n"
      "  ntblend run --host b -- nvme_bench --device nvme0 --qd 32\n"
      "  ntblend nvme status\n"
      "  ntblend nvme stop nvme0\n"
      "  ntblend device lend nvme0 --to c && ntblend nvme --host c mount pci:80:00.0 /tmp/n\n"
      "  ntblend nvme unmount /tmp/n && ntblend device reclaim nvme0\n" },
    { "vm", cmd_vm, "vm start|attach|detach|list|console|cfg|reset|run|stop ... [--fabric NAME]",
      "virtual machines: a guest given devices lent by any host (docs/vm.md)",
      "  vm start NAME --host H --mem SIZE [--device DEV]... [--guest qemu|emulated]\n"
      "           [--pass-through] [--image DIR] [--initrd FILE] [--run SCRIPT]\n"
      "           [--accel kvm|tcg] [--cpus N] [--wait]\n"
      "                        start VM NAME on host H: SIZE of guest RAM (K/M/G, a multiple\n"
      "                        of 2 MiB) taken from H's RAM, where any device can DMA into it.\n"
      "                        --guest qemu (default): a Linux guest under QEMU (TCG, or\n"
      "                        KVM with --accel kvm or $NTBLEND_VM_ACCEL) booted from DIR\n"
      "                        (default $NTBLEND_VM_IMAGE, else ~/.cache/ntblend/vm-guest\n"
      "                        where ntblend-vm-guest builds the guest; in a build tree its\n"
      "                        vm-guest/, from scripts/vm-guest.sh). Each --device NVMe is\n"
      "                        borrowed (or used through its manager) and served to the guest\n"
      "                        as a virtio-blk disk (/dev/vda, vdb...): the NVMe moves the data\n"
      "                        straight to and from guest RAM. --pass-through: the devices\n"
      "                        themselves instead, driven by the guest's own drivers (its\n"
      "                        nvme driver); their lender's IOMMU must be on, and without KVM\n"
      "                        they have no interrupts (docs/vm.md). --run SCRIPT: the guest runs\n"
      "                        it with busybox sh and powers off (else a shell on the\n"
      "                        console). --wait: return when the VM ends, with its status.\n"
      "                        --guest emulated: the VM's address space and devices without\n"
      "                        QEMU: each device offered to it, its BARs at guest addresses;\n"
      "                        it stays with its lender until the guest enables Bus Master.\n"
      "  vm attach NAME DEV    give DEV to the running VM (the guest sees a hot-add)\n"
      "  vm detach NAME DEV    take it back (the guest sees a hot-remove) and return it\n"
      "  vm list [--json]      every VM: host, RAM, guest, state, process, devices\n"
      "  vm console NAME [--log]\n"
      "                        the guest's serial console (Ctrl-] leaves); --log prints what\n"
      "                        it has written so far\n"
      "  vm cfg NAME DEV OFFSET LENGTH [VALUE]\n"
      "                        read (or write) LENGTH (1, 2, 4) bytes of the configuration\n"
      "                        space the guest sees for DEV (an emulated guest's, or one passed\n"
      "                        through): mediated (its BARs at guest addresses, what the VM\n"
      "                        cannot deliver hidden); setting Bus Master (command 0x4) takes\n"
      "                        DEV from its lender for the guest\n"
      "  vm reset NAME DEV     a function-level reset by the guest: DEV goes back to its lender\n"
      "  vm run NAME -- PROGRAM [ARG...]\n"
      "                        run a program of the driver model (ntblend/pci.h: accel_drv,\n"
      "                        nvme_drv...) inside emulated VM NAME, on its host: it sees the\n"
      "                        VM's devices at guest BDFs, their mediated config space (its\n"
      "                        pci_set_master takes a device from its lender), BARs at guest\n"
      "                        addresses, guest RAM for DMA at guest-physical I/O addresses,\n"
      "                        MSI-X into its handlers. Exits with the program's status\n"
      "  vm stop NAME          power the guest off; its RAM and devices are returned\n"
      "\nexamples:\n"
      "  ntblend-vm-guest && ntblend device add nvme0\n"
      "  ntblend vm start g1 --host b --mem 256M --device nvme0\n"
      "  ntblend vm console g1\n"
      "  ntblend vm start p1 --host b --mem 256M --device nvme0 --pass-through\n"
      "  ntblend vm start e1 --host c --mem 1G --guest emulated --device accel0\n"
      "  ntblend vm list --json\n"
      "  ntblend vm run e1 -- accel_drv --p2p\n"
      "  ntblend vm stop g1\n" },
    { "agent-ping", cmd_agent_ping, "agent-ping A B [--fabric NAME]",
      "ping host B's agent from host A's agent over the NTB",
      "A's agent sends a message through its NTB window into B's mailbox and rings B's\n"
      "doorbell; B answers the same way. Prints the round trip in microseconds. Fails when\n"
      "no path is up between them, or when A has no port that reaches B directly.\n"
      "\nexamples:\n"
      "  ntblend agent-ping a b\n" },
    { "mcast", cmd_mcast, "mcast create|join|leave|list|remove ... [--fabric NAME]",
      "the cluster switches' multicast groups: one write, every member host",
      "A group is a window of addresses in the switches (a switch and every switch cascaded\n"
      "with it): a device's or DMA engine's write into it leaves the switch on the port of\n"
      "every member, whose overlay puts it where that host wants it (docs/multicast.md).\n"
      "Reads of a group fail (all ones); CPU stores into one are not multicast here.\n"
      "Programs send into a group with the SmartIO API (ntblend/smartio_mcast.h:\n"
      "sio_map_mcast for a device, sio_mcast_map for the DMA engine). What this command\n"
      "creates or joins stays until removed or left; a program's goes when it exits.\n"
      "\n"
      "  create GROUP [--size SIZE] [--switch SW]\n"
      "                   a group with a --size window (a power of two, 4K..1G; default 1M)\n"
      "                   on --switch SW (default: the first switch); 64 groups at most\n"
      "  join GROUP H (--addr ADDR | --device DEV [--offset OFF])\n"
      "                   H receives the group's writes at --addr ADDR of its RAM (memory\n"
      "                   it holds, 4 KiB aligned, above its first 1 MiB), or in the memory\n"
      "                   BAR of its device --device DEV (at --offset OFF)\n"
      "  leave GROUP H    H stops receiving; when it returns nothing more lands there\n"
      "  list [--json]    groups, their members and overlays, how many adapters send\n"
      "  remove GROUP     the group goes (its members leave); refused while adapters send\n"
      "\nexamples:\n"
      "  ntblend mcast create frames --size 64K\n"
      "  ntblend mcast join frames h01 --addr 0x2000000\n"
      "  ntblend mcast join frames c --device accel1\n"
      "  ntblend mcast list --json\n"
      "  ntblend mcast leave frames h01 && ntblend mcast remove frames\n" },
    { "names", cmd_names, "names fabrics|hosts|adapters|switches|devices|vms [--fabric NAME]",
      "print the names of fabrics, hosts, adapters, switches, devices or VMs, one a line",
      "Nothing but the names, for scripts and shell completion (ntblend's bash completion\n"
      "completes fabric, host, device and VM names with it).\n"
      "\n"
      "fabrics   every fabric whose state is in /dev/shm (or $NTBLEND_SHM_DIR): up, or not\n"
      "          taken down yet; no --fabric needed\n"
      "hosts     the hosts of the fabric, up or down\n"
      "adapters  its NTB adapters, as HOST.ADAPTER\n"
      "switches  its switches\n"
      "devices   its PCIe devices (what 'ntblend device list' shows)\n"
      "vms       its virtual machines that are running (what 'ntblend vm list' shows)\n"
      "\nexamples:\n"
      "  ntblend names fabrics\n"
      "  ntblend names hosts --fabric big\n"
      "  for h in $(ntblend names hosts); do ntblend run --host $h -- hostname; done\n" },
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static const struct command *find_command(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

/* Optimal string alignment distance (Levenshtein plus swapping two neighbours): "stauts" is
 * one step from "status". Command names are short, so a row of 32 is plenty. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 31 || lb > 31)
        return SIZE_MAX;
    size_t d[32][32];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            size_t cost = a[i - 1] != b[j - 1];
            size_t v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v)
                v = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < v)
                v = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[la][lb];
}

/* An unknown command: name the closest one when it is close enough to be a typo (at most two
 * edits, fewer than half the name), or one that starts with what was typed. */
static void unknown_command(const char *name)
{
    const struct command *best = NULL;
    size_t best_d = SIZE_MAX, len = strlen(name);
    for (size_t i = 0; i < NCOMMANDS; i++) {
        size_t d = edit_distance(name, commands[i].name);
        if (len >= 2 && strncmp(commands[i].name, name, len) == 0)
            d = 1;
        if (d < best_d) {
            best_d = d;
            best = &commands[i];
        }
    }
    if (best && best_d <= 2 && best_d * 2 < len + 1)
        cli_err("unknown command '%s'; did you mean '%s'?", name, best->name);
    else
        cli_err("unknown command '%s'", name);
}

static void usage(FILE *to)
{
    fprintf(to, "usage: ntblend [--fabric NAME] COMMAND [ARGS...]\n"
                "       ntblend --help | --version\n\ncommands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(to, "  %-12s %s\n", commands[i].name, commands[i].summary);
    fprintf(to, "\nThe fabric is --fabric NAME, else $NTBLEND_FABRIC, else \"default\".\n"
                "'ntblend help COMMAND' or 'ntblend COMMAND --help' describes a command.\n");
}

static void full_help(void)
{
    printf("ntblend - run and inspect emulated PCIe NTB fabrics\n\n");
    usage(stdout);
    printf("\nexamples:\n"
           "  ntblend up examples/topologies/two-hosts.ini\n"
           "  ntblend status\n"
           "  ntblend run --host a -- ./app\n"
           "  ntblend link down a b && ntblend agent-ping a b\n"
           "  ntblend topology --dot | dot -Tpng -o fabric.png\n"
           "  ntblend down\n"
           "\nexit status: 0 success, 1 failure (the message says what to do), 2 usage error\n"
           "environment: NTBLEND_FABRIC (default fabric), NTBLEND_SHM_DIR (where fabric state\n"
           "lives instead of /dev/shm); see docs/cli.md\n");
}

int cli_help(const char *name)
{
    const struct command *cmd = find_command(name);
    if (!cmd) {
        unknown_command(name);
        usage(stderr);
        return CLI_USAGE;
    }
    printf("usage: ntblend %s\n\n%s.\n\n%s", cmd->synopsis, cmd->summary, cmd->details);
    return CLI_OK;
}

void cli_err(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("ntblend: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int cli_usage_error(const char *name, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ntblend %s: ", name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    const struct command *cmd = find_command(name);
    if (cmd)
        fprintf(stderr, "usage: ntblend %s\n(see 'ntblend help %s')\n", cmd->synopsis, name);
    return CLI_USAGE;
}

/* A fabric name becomes a directory name: reject anything fab_dir would. */
static int check_fabric_name(const char *cmd, const char *name)
{
    char dir[128];
    if (fab_dir(name, dir, sizeof dir) == 0)
        return -1;
    return cli_usage_error(cmd, "invalid fabric name '%s' (use letters, digits, '-', '_', '.'; "
                           "at most %d characters)", name, FAB_NAME_MAX - 1);
}

int cli_parse(struct cli *c, unsigned allowed, bool posix, struct cli_opts *o, int *first_arg)
{
    static const struct option all[] = {
        { "fabric", required_argument, NULL, 'f' },
        { "json", no_argument, NULL, 'j' },
        { "dot", no_argument, NULL, 'd' },
        { "host", required_argument, NULL, 'H' },
        { "shared", no_argument, NULL, 's' },
        { "to", required_argument, NULL, 't' },
        { "dma-cpus", required_argument, NULL, 'D' },
        { "help", no_argument, NULL, 'h' },
        { 0 },
    };
    const char *cmd = c->argv[0];
    const char *fabric = c->fabric_arg;
    memset(o, 0, sizeof *o);
    optind = 0; /* full re-initialisation: main() already ran getopt on the global options */
    opterr = 0; /* our own messages, which name the command */
    int ch;
    while ((ch = getopt_long(c->argc, c->argv, posix ? "+:h" : ":h", all, NULL)) != -1) {
        switch (ch) {
        case 'f': fabric = optarg; break;
        case 'h': return cli_help(cmd);
        case 'j':
            if (!(allowed & CLI_OPT_JSON))
                return cli_usage_error(cmd, "unknown option '--json'");
            o->json = true;
            break;
        case 'd':
            if (!(allowed & CLI_OPT_DOT))
                return cli_usage_error(cmd, "unknown option '--dot'");
            o->dot = true;
            break;
        case 'H':
            if (!(allowed & CLI_OPT_HOST))
                return cli_usage_error(cmd, "unknown option '--host'");
            o->host = optarg;
            break;
        case 't':
            if (!(allowed & CLI_OPT_TO))
                return cli_usage_error(cmd, "unknown option '--to'");
            o->to = optarg;
            break;
        case 'D':
            if (!(allowed & CLI_OPT_DMA_CPUS))
                return cli_usage_error(cmd, "unknown option '--dma-cpus'");
            o->dma_cpus = optarg;
            break;
        case 's':
            if (!(allowed & CLI_OPT_SHARED))
                return cli_usage_error(cmd, "unknown option '--shared'");
            o->shared = true;
            break;
        case ':':
            return cli_usage_error(cmd, "option '%s' needs a value", c->argv[optind - 1]);
        default:
            if (optopt)
                return cli_usage_error(cmd, "unknown option '-%c'", optopt);
            return cli_usage_error(cmd, "unknown option '%s'", c->argv[optind - 1]);
        }
    }
    o->fabric = fab_name_resolve(fabric);
    int rc = check_fabric_name(cmd, o->fabric);
    if (rc >= 0)
        return rc;
    *first_arg = optind;
    return -1;
}

int main(int argc, char **argv)
{
    static const struct option global[] = {
        { "fabric", required_argument, NULL, 'f' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { 0 },
    };
    const char *fabric = NULL;
    int ch;
    opterr = 0;
    /* '+': stop at the command; what follows is the command's to parse. */
    while ((ch = getopt_long(argc, argv, "+:hV", global, NULL)) != -1) {
        switch (ch) {
        case 'f': fabric = optarg; break;
        case 'h': full_help(); return CLI_OK;
        case 'V': printf("ntblend %s\n", NTBLEND_VERSION); return CLI_OK;
        case ':':
            cli_err("option '%s' needs a value", argv[optind - 1]);
            usage(stderr);
            return CLI_USAGE;
        default:
            if (optopt)
                cli_err("unknown option '-%c'", optopt);
            else
                cli_err("unknown option '%s'", argv[optind - 1]);
            usage(stderr);
            return CLI_USAGE;
        }
    }
    if (optind >= argc) {
        cli_err("no command given");
        usage(stderr);
        return CLI_USAGE;
    }
    const char *name = argv[optind];
    if (strcmp(name, "help") == 0) {
        if (optind + 1 >= argc) {
            full_help();
            return CLI_OK;
        }
        return cli_help(argv[optind + 1]);
    }
    const struct command *cmd = find_command(name);
    if (!cmd) {
        unknown_command(name);
        usage(stderr);
        return CLI_USAGE;
    }
    struct cli c = { .argc = argc - optind, .argv = argv + optind, .fabric_arg = fabric };
    return cmd->fn(&c);
}
