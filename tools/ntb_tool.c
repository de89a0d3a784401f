/*
 * ntb_tool: inspect and poke one NTB adapter of an emulated host, like Linux's ntb_tool
 * debugfs files (port, link, db, db_mask, db_event, peer_db, spadN, mw_transN, mwN, peer_mwN),
 * made subcommands. Owns nothing but its command table: every command is one or two calls
 * of include/ntblend/ntb.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ntbtool.h"

#define DUMP_DEFAULT 64

struct opts {
    int adapter;
    int seconds; /* mw_trans: -1 = until a signal */
    uint64_t dump;
};

typedef int (*cmd_fn)(struct ntb_dev *ntb, const struct opts *o, int argc, char **argv);

struct cmd {
    const char *name;
    const char *args;
    const char *help;
    cmd_fn fn;
    int min_args, max_args;
};

static int usage_error(const char *fmt, const char *what)
{
    fprintf(stderr, "%s: ", tu_prog);
    fprintf(stderr, fmt, what);
    fprintf(stderr, " (see '%s --help')\n", tu_prog);
    return 2;
}

static int parse_bits(struct ntb_dev *ntb, const char *s, uint64_t *bits)
{
    if (tu_parse_u64(s, bits))
        return usage_error("'%s' is not a number (decimal or 0x hex)", s);
    uint64_t valid = ntb_db_valid_mask(ntb);
    if (*bits & ~valid) {
        tu_err("bits 0x%" PRIx64 " are outside the valid doorbell mask 0x%" PRIx64
               " (the top bit belongs to the host agent)", *bits & ~valid, valid);
        return 1;
    }
    return 0;
}

static int parse_pidx(struct ntb_dev *ntb, const char *s, int *pidx)
{
    if (tu_parse_int(s, 0, 1 << 20, pidx))
        return usage_error("'%s' is not a peer index", s);
    return tu_check_peer(ntb, *pidx) ? 1 : 0;
}

static int parse_timeout(int argc, char **argv, int *ms)
{
    *ms = -1;
    if (argc > 0 && tu_parse_int(argv[0], 0, INT32_MAX, ms))
        return usage_error("'%s' is not a timeout in milliseconds", argv[0]);
    return 0;
}

static const char *link_str(uint64_t mask, int pidx) { return (mask >> pidx) & 1 ? "up" : "down"; }

/* ---------------------------------------------------------------- info, port, link */

static int cmd_info(struct ntb_dev *ntb, const struct opts *o, int argc, char **argv)
{
    char sz[32], host[64];
    int speed, width;
    uint64_t up = ntb_link_is_up(ntb, &speed, &width);
    int npeers = ntb_peer_port_count(ntb);
    printf("adapter       %s (index %d of %d on host %s)\n", ntb_name(ntb), o->adapter,
           ntb_adapter_count(), getenv("NTBLEND_HOST"));
    printf("port          %d\n", ntb_port_number(ntb));
    if (up)
        printf("link          0x%" PRIx64 " (Gen%d x%d)\n", up, speed, width);
    else
        printf("link          0x0 (no peer reachable)\n");
    printf("peers         %d\n", npeers);
    for (int p = 0; p < npeers; p++) {
        int port = ntb_peer_port_number(ntb, p);
        if (tu_host_name(port, host, sizeof host))
            snprintf(host, sizeof host, "?");
        printf("  peer %-3d    port %d (host %s), link %s\n", p, port, host, link_str(up, p));
    }
    for (int p = 0; p < npeers; p++) {
        uint64_t max;
        int n = ntb_mw_count(ntb, p);
        if (ntb_mw_get_align(ntb, p, 0, NULL, NULL, &max) == 0)
            printf("mw (peer %d)   %d inbound windows of %s\n", p, n, tu_fmt_size(max, sz, sizeof sz));
        else
            printf("mw (peer %d)   %d inbound windows (size known once the link is up)\n", p, n);
    }
    uint64_t phys, size;
    if (ntb_peer_mw_get_addr(ntb, 0, &phys, &size) == 0)
        printf("peer_mw       %d outbound windows of %s at bus 0x%" PRIx64 "\n", ntb_peer_mw_count(ntb),
               tu_fmt_size(size, sz, sizeof sz), phys);
    uint64_t valid = ntb_db_valid_mask(ntb);
    printf("doorbells     valid mask 0x%" PRIx64 " (%d bits, %d vector%s), pending 0x%" PRIx64
           ", mask 0x%" PRIx64 "\n", valid, __builtin_popcountll(valid), ntb_db_vector_count(ntb),
           ntb_db_vector_count(ntb) == 1 ? "" : "s", ntb_db_read(ntb), ntb_db_read_mask(ntb));
    printf("scratchpads   %d x 32 bit\n", ntb_spad_count(ntb));
    printf("dma channels  %d\n", ntb_dma_chan_count(ntb));
    return 0;
}

static int cmd_port(struct ntb_dev *ntb, const struct opts *o, int argc, char **argv)
{
    printf("%d\n", ntb_port_number(ntb));
    return 0;
}

static int cmd_link(struct ntb_dev *ntb, const struct opts *o, int argc, char **argv)
{
    if (argc == 0) {
        printf("0x%" PRIx64 "\n", ntb_link_is_up(ntb, NULL, NULL));
        return 0;
    }
    int rc;
    if (strcmp(argv[0], "enable") == 0)
        rc = ntb_link_enable(ntb);
    else if (strcmp(argv[0], "disable") == 0)
        rc = ntb_link_disable(ntb);
    else
        return usage_error("link takes 'enable' or 'disable', not '%s'", argv[0]);
    if (rc) {
        tu_err("link %s: %s", argv[0], strerror(-rc));
        return 1;
    }
    printf("link %sd; peers up: 0x%" PRIx64 "\n", argv[0], ntb_link_is_up(ntb, NULL, NULL));
    return 0;
}

static int cmd_link_event(struct ntb_dev *ntb, const struct opts *o, int argc, char **argv)
{
    int ms, rc = parse_timeout(argc, argv, &ms);
    if (rc)
        return rc;
    /* The wait compares an event counter: learn its current value first (timeout 0), then
     * block until it moves. */
    uint64_t seen = 0;
    ntb_link_event_wait(ntb, &seen, 0);
    uint64_t before = ntb_link_is_up(ntb, NULL, NULL);
    /* On stderr, so a script can tell when it is safe to change the link. */
    fprintf(stderr, "link_event: link 0x%" PRIx64 "; waiting for a change\n", before);
    rc = ntb_link_event_wait(ntb, &seen, ms);
    if (rc == -ETIMEDOUT) {
        tu_err("no link event within %d ms (link 0x%" PRIx64 ")", ms, before);
        return 1;
    }
    if (rc) {
        tu_err("link_event: %s", strerror(-rc));
        return 1;
    }
    printf("link 0x%" PRIx64 " -> 0x%" PRIx64 "\n", before, ntb_link_is_up(ntb, NULL, NULL));
    return 0;
}

/* ---------------------------------------------------------------- doorbells */

static int cmd_db(struct ntb_dev *ntb, const struct opts *o, int argc, char **argv)
{
    if (argc == 0) {
        printf("0x%" PRIx64 "\n", ntb_db_read(ntb));
        return 0;
    }
    if (argc != 2)
        return usage_error("db takes 'set BITS' or 'clear BITS'%s", "");
    uint64_t bits;
    int rc = parse_bits(ntb, argv[1], &bits);
    if (rc)
        return rc;
    if (strcmp(argv[0], "set") == 0)
        rc = ntb_db_set(ntb, bits);
    else if (strcmp(argv[0], "clear") == 0)
        rc = ntb_db_clear(ntb, bits);
    else
        return usage_error("db takes 'set' or 'clear', not '%s'", argv[0]);
    if (rc) {
        tu_err("db %s: %s", argv[0], strerror(-rc));
        return 1;
    }
    printf("0x%" PRIx64 "\n", ntb_db_read(ntb));
    return 0;
}

static int cmd_db_mask(struct ntb_dev *ntb, const struct opts *o, int argc, char **argv)
{
    if (argc == 0) {
        printf("0x%" PRIx64 "\n", ntb_db_read_mask(ntb));
        return 0;
    }
    if (argc != 2)
        return usage_error("db_mask takes 'set BITS' or 'clear BITS'%s", "");
    uint64_t bits;
    int rc = parse_bits(ntb, argv[1], &bits);
    if (rc)
        return rc;
    if (strcmp(argv[0], "set") == 0)
        rc = ntb_db_set_mask(ntb, bits);
    else if (strcmp(argv[0], "clear") == 0)
        rc = ntb_db_clear_mask(ntb, bits);
    else
        return usage_error("db_mask takes 'set' or 'clear', not '%s'", argv[0]);
    if (rc) {
        tu_err("db_mask %s: %s", argv[0], strerror(-rc));
        return 1;
    }
    printf("0x%" PRIx64 "\n", ntb_db_read_mask(ntb));
    return 0;
}

static int cmd_db_event(struct ntb_dev *ntb, const struct opts *o, int argc, char **argv)
{
    int ms, rc = parse_timeout(argc, argv, &ms);
    if (rc)
        return rc;
    int64_t bits = ntb_db_event_wait(ntb, ms);
    if (bits == 0) {
        tu_err("no doorbell within %d ms", ms);
        return 1;
    }
    if (bits < 0) {
        tu_err("db_event: %s", strerror((int)-bits));
        return 1;
    }
    printf("0x%" PRIx64 "\n", (uint64_t)bits);
    return 0;
}

static int cmd_peer_db(struct ntb_dev *ntb, const struct opts *o, int argc, char **argv)
{
    int pidx, rc = parse_pidx(ntb, argv[0], &pidx);
    if (rc)
        return rc;
    if (argc != 3 || strcmp(argv[1], "set") != 0)
        return usage_error("usage: peer_db PIDX set BITS%s", "");
    uint64_t bits;
    if ((rc = parse_bits(ntb, argv[2], &bits)))
        return rc;
    rc = ntb_peer_db_set(ntb, pidx, bits);
    if (rc) {
        tu_err("peer_db: %s", strerror(-rc));
        return 1;
    }
    if (!(ntb_link_is_up(ntb, NULL, NULL) & (1ull << pidx)))
        tu_err("note: the link to peer %d is down; the doorbell was dropped", pidx);
    return 0;
}

/* ---------------------------------------------------------------- scratchpads */

static int cmd_spad(struct ntb_dev *ntb, const struct opts *o, int argc, char **argv)
{
    int n = ntb_spad_count(ntb), idx;
    if (argc == 0) {
        for (int i = 0; i < n; i++)
            printf("%d 0x%08" PRIx32 "\n", i, ntb_spad_read(ntb, i));
        return 0;
    }
    if (tu_parse_int(argv[0], 0, n - 1, &idx)) {
        tu_err("scratchpad index '%s' is out of range (0..%d)", argv[0], n - 1);
        return 2;
    }
    if (argc == 1) {
        printf("0x%08" PRIx32 "\n", ntb_spad_read(ntb, idx));
        return 0;
    }
    uint64_t v;
    if (tu_parse_u64(argv[1], &v) || v > UINT32_MAX)
        return usage_error("'%s' is not a 32-bit value", argv[1]);
    int rc = ntb_spad_write(ntb, idx, (uint32_t)v);
    if (rc) {
        tu_err("spad write: %s", strerror(-rc));
        return 1;
    }
    return 0;
}

static int cmd_peer_spad(struct ntb_dev *ntb, const struct opts *o, int argc, char **argv)
{
    int pidx, idx, rc = parse_pidx(ntb, argv[0], &pidx);
    if (rc)
        return rc;
    if (tu_parse_int(argv[1], 0, 1 << 20, &idx))
        return usage_error("'%s' is not a scratchpad index", argv[1]);
    bool up = ntb_link_is_up(ntb, NULL, NULL) & (1ull << pidx);
    if (argc == 2) {
        uint32_t v = ntb_peer_spad_read(ntb, pidx, idx);
        printf("0x%08" PRIx32 "\n", v);
        if (!up)
            tu_err("note: the link to peer %d is down; reads return all ones", pidx);
        return 0;
    }
    uint64_t v;
    if (tu_parse_u64(argv[2], &v) || v > UINT32_MAX)
        return usage_error("'%s' is not a 32-bit value", argv[2]);
    rc = ntb_peer_spad_write(ntb, pidx, idx, (uint32_t)v);
    if (rc) {
        tu_err("peer_spad write: %s%s", strerror(-rc),
               rc == -EINVAL ? " (index out of range? see 'ntb_tool info')" : "");
        return 1;
    }
    if (!up)
        tu_err("note: the link to peer %d is down; the write was dropped", pidx);
    return 0;
}

/* ---------------------------------------------------------------- windows */

static int cmd_mw(struct ntb_dev *ntb, const struct opts *o, int argc, char **argv)
{
    char a[32], s[32], m[32];
    for (int p = 0; p < ntb_peer_port_count(ntb); p++) {
        uint64_t addr_align, size_align, size_max;
        int n = ntb_mw_count(ntb, p);
        int rc = ntb_mw_get_align(ntb, p, 0, &addr_align, &size_align, &size_max);
        printf("peer %d (port %d): %d inbound windows", p, ntb_peer_port_number(ntb, p), n);
        if (rc == 0)
            printf(", addr align %s, size align %s, size max %s\n",
                   tu_fmt_size(addr_align, a, sizeof a), tu_fmt_size(size_align, s, sizeof s),
                   tu_fmt_size(size_max, m, sizeof m));
        else if (rc == -ENOTCONN)
            printf(" (link down: alignment is known once it is up)\n");
        else
            printf(" (%s)\n", strerror(-rc));
    }
    return 0;
}

static int cmd_peer_mw(struct ntb_dev *ntb, const struct opts *o, int argc, char **argv)
{
    char sz[32];
    int n = ntb_peer_mw_count(ntb), first = 0, last = n - 1;
    if (argc == 1) {
        if (tu_parse_int(argv[0], 0, n - 1, &first)) {
            tu_err("window index '%s' is out of range (0..%d)", argv[0], n - 1);
            return 2;
        }
        last = first;
    }
    printf("widx  bus address         size\n");
    for (int w = first; w <= last; w++) {
        uint64_t phys, size;
        if (ntb_peer_mw_get_addr(ntb, w, &phys, &size) == 0)
            printf("%-5d 0x%016" PRIx64 "  %s\n", w, phys, tu_fmt_size(size, sz, sizeof sz));
    }
    return 0;
}

static int cmd_mw_trans(struct ntb_dev *ntb, const struct opts *o, int argc, char **argv)
{
    int pidx, widx, rc = parse_pidx(ntb, argv[0], &pidx);
    uint64_t size, dma;
    char sz[32];
    if (rc)
        return rc;
    int n = ntb_mw_count(ntb, pidx);
    if (tu_parse_int(argv[1], 0, n - 1, &widx)) {
        tu_err("window index '%s' is out of range (0..%d)", argv[1], n - 1);
        return 2;
    }
    if (tu_parse_size(argv[2], &size) || !size)
        return usage_error("'%s' is not a size (e.g. 4096, 0x1000, 64K, 4M)", argv[2]);
    uint64_t size_max;
    rc = ntb_mw_get_align(ntb, pidx, widx, NULL, NULL, &size_max);
    if (rc == -ENOTCONN) {
        tu_err("the link to peer %d is down; bring it up first ('ntblend link up ...')", pidx);
        return 1;
    }
    if (!rc && size > size_max) {
        tu_err("size %s exceeds the window size %s", tu_fmt_size(size, sz, sizeof sz),
               tu_fmt_size(size_max, (char[32]){ 0 }, 32));
        return 1;
    }
    uint8_t *buf = ntb_dma_alloc(ntb, size, &dma);
    if (!buf) {
        tu_err("cannot allocate %s of DMA memory: %s", tu_fmt_size(size, sz, sizeof sz),
               strerror(errno));
        return 1;
    }
    rc = ntb_mw_set_trans(ntb, pidx, widx, dma, size);
    if (rc) {
        tu_err("mw_trans: %s%s", strerror(-rc),
               rc == -EBUSY ? " (another process holds that window; pick another WIDX)" : "");
        rc = 1;
        goto out_free;
    }
    printf("peer %d window %d -> bus 0x%" PRIx64 ", %s\n", pidx, widx, dma,
           tu_fmt_size(size, sz, sizeof sz));
    if (o->seconds < 0)
        printf("waiting; the peer writes through its outbound window %d (ntb_tool peer_mw_dump %d "
               "on the peer reads it); Ctrl-C to stop\n", widx, widx);
    else
        printf("waiting %d s; the peer writes through its outbound window %d\n", o->seconds, widx);
    fflush(stdout);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    struct timespec ts = { .tv_sec = o->seconds };
    int sig;
    do
        sig = o->seconds < 0 ? sigwaitinfo(&set, NULL) : sigtimedwait(&set, NULL, &ts);
    while (sig < 0 && errno == EINTR);
    uint64_t len = o->dump < size ? o->dump : size;
    printf("first %" PRIu64 " bytes:\n", len);
    tu_hexdump(stdout, buf, len, 0);
    ntb_mw_clear_trans(ntb, pidx, widx);
    rc = 0;
out_free:
    ntb_dma_free(ntb, buf);
    return rc;
}

static int cmd_peer_mw_dump(struct ntb_dev *ntb, const struct opts *o, int argc, char **argv)
{
    int n = ntb_peer_mw_count(ntb), widx;
    if (tu_parse_int(argv[0], 0, n - 1, &widx)) {
        tu_err("window index '%s' is out of range (0..%d)", argv[0], n - 1);
        return 2;
    }
    uint64_t size, len = DUMP_DEFAULT;
    ntb_peer_mw_get_addr(ntb, widx, NULL, &size);
    if (argc > 1 && (tu_parse_size(argv[1], &len) || !len || len > size)) {
        tu_err("length '%s' must be 1..%" PRIu64 " (the window size)", argv[1], size);
        return 2;
    }
    const uint8_t *w = ntb_peer_mw_map(ntb, widx, 1);
    if (!w) {
        tu_err("cannot map outbound window %d: %s", widx, strerror(errno));
        return 1;
    }
    /* An entry nobody programmed (or behind a downed link) reads all ones, as on hardware. */
    tu_hexdump(stdout, w, len, 0);
    ntb_peer_mw_unmap(ntb, (void *)w);
    return 0;
}

static int cmd_peer_mw_write(struct ntb_dev *ntb, const struct opts *o, int argc, char **argv)
{
    int n = ntb_peer_mw_count(ntb), widx;
    if (tu_parse_int(argv[0], 0, n - 1, &widx)) {
        tu_err("window index '%s' is out of range (0..%d)", argv[0], n - 1);
        return 2;
    }
    uint64_t size, off, len = strlen(argv[2]);
    ntb_peer_mw_get_addr(ntb, widx, NULL, &size);
    if (tu_parse_size(argv[1], &off) || off > size || len > size - off) {
        tu_err("offset '%s' plus %" PRIu64 " bytes must fit the window (%" PRIu64 " bytes)",
               argv[1], len, size);
        return 2;
    }
    uint8_t *w = ntb_peer_mw_map(ntb, widx, 1);
    if (!w) {
        tu_err("cannot map outbound window %d: %s", widx, strerror(errno));
        return 1;
    }
    /* Plain stores: they land in the peer's memory, or nowhere if the entry reaches nothing. */
    memcpy(w + off, argv[2], len);
    ntb_peer_mw_unmap(ntb, w);
    return 0;
}

/* ---------------------------------------------------------------- faults */

static int cmd_faults(struct ntb_dev *ntb, const struct opts *o, int argc, char **argv)
{
    struct ntb_fault f[64];
    uint64_t total;
    int n = ntb_iommu_faults(ntb, f, 64, &total);
    if (n < 0) {
        tu_err("faults: %s", strerror(-n));
        return 1;
    }
    printf("%" PRIu64 " IOMMU fault%s on host %s%s\n", total, total == 1 ? "" : "s",
           getenv("NTBLEND_HOST"), total > (uint64_t)n ? " (the most recent listed)" : "");
    if (n)
        printf("requester  dir    address             reason\n");
    for (int i = 0; i < n; i++)
        printf("%02x:%02x.%x    %-6s 0x%016" PRIx64 "  %s\n", f[i].requester >> 8,
               (f[i].requester >> 3) & 0x1f, f[i].requester & 7, f[i].write ? "write" : "read",
               f[i].addr, strerror(-f[i].reason));
    return 0;
}

/* ---------------------------------------------------------------- main */

static const struct cmd cmds[] = {
    { "info", "", "adapter, port, peers and their links, windows, doorbells, scratchpads, DMA",
      cmd_info, 0, 0 },
    { "port", "", "this adapter's port number (the host's node id)", cmd_port, 0, 0 },
    { "link", "[enable|disable]", "bitmask of peers whose link is up; or enable/disable our port",
      cmd_link, 0, 1 },
    { "link_event", "[TIMEOUT_MS]", "block until the link state changes (exit 1 on timeout)",
      cmd_link_event, 0, 1 },
    { "db", "[set|clear BITS]", "read our doorbell register, or set/clear bits in it", cmd_db, 0, 2 },
    { "db_mask", "[set|clear BITS]", "read our doorbell mask, or mask/unmask bits", cmd_db_mask,
      0, 2 },
    { "db_event", "[TIMEOUT_MS]", "block until an unmasked doorbell bit is pending; print them "
      "(bits stay set: 'db clear' them)", cmd_db_event, 0, 1 },
    { "peer_db", "PIDX set BITS", "ring doorbell bits of peer PIDX", cmd_peer_db, 3, 3 },
    { "spad", "[IDX [VALUE]]", "list our scratchpads, read one, or write one", cmd_spad, 0, 2 },
    { "peer_spad", "PIDX IDX [VALUE]", "read or write scratchpad IDX of peer PIDX", cmd_peer_spad,
      2, 3 },
    { "mw", "", "inbound windows (peers -> us) per peer: count, alignment, maximum size", cmd_mw,
      0, 0 },
    { "peer_mw", "[WIDX]", "outbound windows (us -> peers): bus address and size", cmd_peer_mw,
      0, 1 },
    { "mw_trans", "PIDX WIDX SIZE", "allocate SIZE of DMA memory, point peer PIDX's window WIDX at "
      "it, wait (Ctrl-C or --seconds N), dump its first bytes", cmd_mw_trans, 3, 3 },
    { "peer_mw_dump", "WIDX [LEN]", "hexdump LEN bytes (default 64) read through outbound "
      "window WIDX", cmd_peer_mw_dump, 1, 2 },
    { "peer_mw_write", "WIDX OFFSET TEXT", "store the bytes of TEXT at OFFSET through outbound "
      "window WIDX", cmd_peer_mw_write, 3, 3 },
    { "faults", "", "IOMMU faults recorded on this host", cmd_faults, 0, 0 },
};

static void help(FILE *out)
{
    fprintf(out,
            "usage: ntblend run --host H -- ntb_tool [-a ADAPTER] COMMAND [ARGS]\n"
            "\n"
            "Inspect and drive one NTB adapter of the emulated host this runs on, like Linux's\n"
            "ntb_tool debugfs files. Numbers are decimal or 0x hex; sizes may end in K, M or G.\n"
            "\n"
            "options:\n"
            "  -a, --adapter N   adapter index on this host (default 0)\n"
            "  --seconds N       mw_trans: wait N seconds instead of until Ctrl-C/SIGTERM\n"
            "  --dump LEN        mw_trans: how many bytes to dump at the end (default 64)\n"
            "  -h, --help        this text\n"
            "\n"
            "commands:\n");
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char head[48];
        snprintf(head, sizeof head, "%s %s", cmds[i].name, cmds[i].args);
        fprintf(out, "  %-32s", head);
        /* Wrap the description at 96 columns, continuing under itself. */
        const char *h = cmds[i].help;
        int col = 34;
        while (*h) {
            const char *sp = strchr(h, ' ');
            int wl = sp ? (int)(sp - h) : (int)strlen(h);
            if (col + 1 + wl > 96) {
                fprintf(out, "\n%34s", "");
                col = 34;
            }
            fprintf(out, " %.*s", wl, h);
            col += 1 + wl;
            h += wl;
            while (*h == ' ')
                h++;
        }
        fputc('\n', out);
    }
    fprintf(out,
            "\n"
            "examples (fabric from examples/topologies/two-hosts.ini: hosts a and b):\n"
            "  ntblend run --host a -- ntb_tool info\n"
            "  ntblend run --host a -- ntb_tool peer_spad 0 3 0x1234   # write b's scratchpad 3\n"
            "  ntblend run --host b -- ntb_tool spad 3                 # -> 0x00001234\n"
            "  ntblend run --host b -- ntb_tool db_event 5000 &        # wait for a doorbell\n"
            "  ntblend run --host a -- ntb_tool peer_db 0 set 0x5      # ring b's bits 0 and 2\n"
            "  ntblend run --host b -- ntb_tool db clear 0x5\n"
            "  ntblend run --host b -- ntb_tool mw_trans 0 10 4M --seconds 5 &\n"
            "  ntblend run --host a -- ntb_tool peer_mw_write 10 0 hello  # store into it\n"
            "  ntblend run --host a -- ntb_tool peer_mw_dump 10 32     # read b's buffer\n"
            "  ntblend run --host a -- ntb_tool link_event 10000 &     # then: ntblend link down a b\n");
}

int main(int argc, char **argv)
{
    tu_prog = "ntb_tool";
    struct opts o = { .adapter = 0, .seconds = -1, .dump = DUMP_DEFAULT };
    char *pos[8];
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help(stdout);
            return 0;
        } else if (!strcmp(a, "-a") || !strcmp(a, "--adapter")) {
            if (++i >= argc || tu_parse_int(argv[i], 0, 1 << 16, &o.adapter))
                return usage_error("%s needs an adapter index", a);
        } else if (!strcmp(a, "--seconds")) {
            if (++i >= argc || tu_parse_int(argv[i], 0, INT32_MAX, &o.seconds))
                return usage_error("%s needs a number of seconds", a);
        } else if (!strcmp(a, "--dump")) {
            if (++i >= argc || tu_parse_size(argv[i], &o.dump))
                return usage_error("%s needs a length", a);
        } else if (a[0] == '-' && a[1] && npos == 0) {
            return usage_error("unknown option '%s'", a);
        } else if (npos < 8) {
            pos[npos++] = argv[i];
        } else {
            return usage_error("too many arguments%s", "");
        }
    }
    if (npos == 0) {
        help(stderr);
        return 2;
    }
    const struct cmd *c = NULL;
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (!strcmp(cmds[i].name, pos[0]))
            c = &cmds[i];
    if (!c)
        return usage_error("unknown command '%s'", pos[0]);
    if (npos - 1 < c->min_args || npos - 1 > c->max_args) {
        tu_err("usage: ntb_tool %s %s (see 'ntb_tool --help')", c->name, c->args);
        return 2;
    }
    if (c->fn == cmd_mw_trans) {
        /* Block the signals before the library starts its thread, so sigwait gets them. */
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGTERM);
        sigprocmask(SIG_BLOCK, &set, NULL);
    }
    struct ntb_dev *ntb = tu_open(o.adapter);
    if (!ntb)
        return 1;
    int rc = c->fn(ntb, &o, npos - 1, pos + 1);
    ntb_close(ntb);
    return rc;
}
