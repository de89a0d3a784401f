/*
 * The topology file format and its rules: sections in any order, defaults and overrides,
 * comments and indentation, sizes; every validation rule reports FILE:LINE with the right line
 * and refuses the file, every problem and not just the first; the limits; files that cannot be
 * opened. Broken inputs are written to a temporary directory of the test's own. The examples
 * under examples/topologies are test_topo_examples'.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo_load.h"

static struct tl L;

/* Most cases are one of these: a file refused with a message at a line. */
static void expect_invalid(const char *text, int line, const char *needle)
{
    tl_expect_invalid(&L, text, line, needle);
}

/* ---- format details ---- */

static void test_any_order_and_overrides(void **state)
{
    (void)state;
    /* links first, [adapter] before its host, [defaults] last: names resolve after reading. */
    const char *text =
        "[links]\n"
        "a.x = sw0\n"
        "b.ntb0 = sw0\n"
        "[adapter a.x]\n"
        "lut_entries = 128\n"
        "[adapter a.ntb1]\n"
        "dma_channels = 0\n"
        "[host a]\n"
        "node_id = 1\n"
        "adapters = ntb0, ntb1\n"
        "iommu = yes\n"
        "[host b]\n"
        "node_id = 65535\n"
        "ram = 2M\n"
        "adapters = ntb0\n"
        "[switch sw0]\n"
        "ports = 2\n"
        "[defaults]\n"
        "ram = 128M\n"
        "lut_size = 1M\n"
        "doorbells = 32\n";
    assert_int_equal(tl_load_text(&L, text), 0);
    assert_string_equal(L.err, "");
    assert_int_equal(L.t->nadapters, 4);
    /* host a: its list (ntb0, ntb1), then [adapter] sections not in the list (x). */
    assert_int_equal(topo_adapter_by_name(L.t, "a.ntb0"), 0);
    assert_int_equal(topo_adapter_by_name(L.t, "a.ntb1"), 1);
    assert_int_equal(topo_adapter_by_name(L.t, "a.x"), 2);
    assert_int_equal(topo_adapter_by_name(L.t, "b.ntb0"), 3);
    assert_int_equal(L.t->adapters[2].index_on_host, 2);
    assert_int_equal(L.t->adapters[3].index_on_host, 0);
    assert_int_equal(L.t->adapters[2].lut_entries, 128);
    assert_int_equal(L.t->adapters[0].lut_entries, 64);
    assert_int_equal(L.t->adapters[1].dma_channels, 0);
    assert_int_equal(L.t->adapters[0].dma_channels, 4);
    assert_int_equal(L.t->adapters[0].lut_size, 1ull << 20);
    assert_int_equal(L.t->adapters[3].db_bits, 32);
    assert_int_equal(L.t->hosts[0].iommu, 1);
    assert_int_equal(L.t->hosts[0].ram_size, 128ull << 20);
    assert_int_equal(L.t->hosts[1].ram_size, 2ull << 20);
    assert_int_equal(L.t->hosts[1].iommu, 0);
    assert_int_equal(L.t->hosts[1].node_id, 65535);
    assert_int_equal(L.t->hosts[0].line, 8);
    assert_int_equal(L.t->adapters[2].line, 4);
    assert_int_equal(L.t->links[1].line, 3);
    /* a.ntb0 and a.ntb1 are unplugged: allowed. */
    assert_int_equal(L.t->nlinks, 2);
}

static void test_comments_indentation_latency_devices(void **state)
{
    (void)state;
    const char *text =
        "# a comment\n"
        "; another\n"
        "\n"
        "[latency]   ; inline comment after a header\n"
        "  enabled = on     ; indented keys are keys, not continuations\n"
        "\tntb_ns = 350\n"
        "adapter_switch_ns = 132\n"
        "root_ns = 0\n"
        "doorbell_ns = 1000\n"
        "max_read_requests = 8\n"
        "read_request_bytes = 4k\n"
        "link_mbps = 3000\n"
        "[ host   a ]\n"
        "node_id = 4\n"
        "[fabric]\n"
        "description = a fabric; with a semicolon\n"
        "[device nvme0]\n"
        "host = a\n"
        "type = nvme\n"
        "namespaces = 2\n"
        "backing.file = /tmp/x.img\n"
        "[device acc0]\n"
        "type = accel\n"
        "host = a\n";
    assert_int_equal(tl_load_text(&L, text), 0);
    assert_string_equal(L.err, "");
    assert_int_equal(L.t->latency.enabled, 1);
    assert_int_equal(L.t->latency.ntb_ns, 350);
    assert_int_equal(L.t->latency.adapter_switch_ns, 132);
    assert_int_equal(L.t->latency.root_ns, 0);
    assert_int_equal(L.t->latency.doorbell_ns, 1000);
    assert_int_equal(L.t->latency.max_read_requests, 8);
    assert_int_equal(L.t->latency.read_request_bytes, 4096);
    assert_int_equal(L.t->latency.link_mbps, 3000);
    assert_int_equal(topo_host_by_name(L.t, "a"), 0);
    assert_int_equal(L.t->nadapters, 0);
    assert_int_equal(L.t->ndevices, 2);
    assert_string_equal(L.t->devices[0].name, "nvme0");
    assert_string_equal(L.t->devices[0].type, "nvme");
    assert_int_equal(L.t->devices[0].host, 0);
    assert_string_equal(L.t->devices[0].params, "namespaces=2;backing.file=/tmp/x.img;");
    assert_int_equal(L.t->devices[0].line, 17);
    assert_string_equal(L.t->devices[1].params, "");
}

static void test_parse_size(void **state)
{
    (void)state;
    static const struct { const char *s; uint64_t v; } good[] = {
        { "0", 0 }, { "4096", 4096 }, { "4k", 4096 }, { "4K", 4096 }, { "64M", 64ull << 20 },
        { "64m", 64ull << 20 }, { "1G", 1ull << 30 }, { "3g", 3ull << 30 }, { "2T", 2ull << 40 },
        { "2t", 2ull << 40 }, { "18446744073709551615", UINT64_MAX },
        { "16777215T", 16777215ull << 40 },
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        uint64_t v = 1;
        assert_int_equal(topo_parse_size(good[i].s, &v), 0);
        assert_int_equal(v, good[i].v);
    }
    static const char *const bad[] = { "", "M", "4KB", "4KiB", "-1", "+4", "1.5G", " 4k", "4k ",
                                       "4 k", "0x10", "4P", "18446744073709551616", "16777216T",
                                       "99999999999999999999k" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v = 7;
        if (topo_parse_size(bad[i], &v) != -EINVAL)
            fail_msg("'%s' parsed", bad[i]);
        assert_int_equal(v, 7);
    }
    uint64_t v;
    assert_int_equal(topo_parse_size(NULL, &v), -EINVAL);
    assert_int_equal(topo_parse_size("4k", NULL), -EINVAL);
}

/* ---- validation rules: each names the file and the right line ---- */

#define HOST_A "[host a]\nnode_id = 4\n" /* lines 1-2 */

static void test_unknown_section_and_key(void **state)
{
    (void)state;
    expect_invalid(HOST_A "[hots b]\n", 3, "unknown section [hots b]; sections are");
    expect_invalid(HOST_A "colour = red\n", 3, "unknown key 'colour' in [host a]; allowed keys: "
                   "ram, iommu, node_id, adapters");
    expect_invalid(HOST_A "[defaults]\nnode_id = 3\n", 4, "unknown key 'node_id' in [defaults]");
    expect_invalid(HOST_A "[switch s]\nports = 4\nram = 1G\n", 5, "allowed keys: ports, latency_ns");
    expect_invalid(HOST_A "[latency]\nhops = 3\n", 4, "allowed keys: enabled, ntb_ns");
    expect_invalid(HOST_A "[fabric]\nname = x\n", 4, "allowed keys: description");
    expect_invalid(HOST_A "[adapter a.n]\nnode_id = 4\n", 4, "allowed keys: lut_size");
    expect_invalid("x = 1\n" HOST_A, 1, "'x' is outside any section");
    expect_invalid(HOST_A "[host]\n", 3, "[host] needs a name");
    expect_invalid(HOST_A "[links now]\n", 3, "[links now] takes no name");
    expect_invalid(HOST_A "[defaults]\n[defaults]\n", 4, "section [defaults] already appears at "
                   "line 3");
    expect_invalid(HOST_A "node_id = 5\n", 3, "'node_id' is already set at line 2");
}

static void test_syntax(void **state)
{
    (void)state;
    expect_invalid(HOST_A "[switch s\n", 3, "no closing ']'");
    expect_invalid(HOST_A "just words\n", 3, "expected KEY = VALUE");
    expect_invalid(HOST_A "[]\n", 3, "empty section header");
    expect_invalid(HOST_A "[switch s ; x]\nports = 4\n", 3, "cannot read this section header");
    char longline[400];
    snprintf(longline, sizeof longline, HOST_A "ram = %0300d\n", 1);
    expect_invalid(longline, 3, "line is longer than");
    /* Every problem, not just the first. */
    assert_int_equal(tl_load_text(&L, "[host a]\nnode_id = x\nram = 1\n[host a]\nnode_id = 4\n"
                               "[switch s\nfoo\n"), -EINVAL);
    tl_expect_msg(&L, 2, "node_id = 'x' is not a whole number");
    tl_expect_msg(&L, 3, "ram = 1 is out of range");
    tl_expect_msg(&L, 4, "host a is already declared at line 1");
    tl_expect_msg(&L, 6, "no closing ']'");
    tl_expect_msg(&L, 7, "expected KEY = VALUE");
    assert_int_equal(tl_count_msgs(&L), 5);
}

static void test_hosts(void **state)
{
    (void)state;
    expect_invalid("[host a]\nram = 64M\n", 1, "[host a] has no node_id; add node_id");
    expect_invalid(HOST_A "[host b]\nnode_id = 4\n", 4, "node_id 4 is already used by host a "
                   "at line 2");
    expect_invalid(HOST_A "[host a]\nnode_id = 8\n", 3, "host a is already declared at line 1");
    expect_invalid(HOST_A "[host c]\nnode_id = 0\n", 4, "node_id = 0 is out of range; use 1..65535");
    expect_invalid(HOST_A "[host c]\nnode_id = 65536\n", 4, "out of range; use 1..65535");
    expect_invalid(HOST_A "[host a.b]\nnode_id = 8\n", 3, "host name 'a.b' is not valid");
    expect_invalid("[fabric]\ndescription = empty\n", 1, "no hosts");
    expect_invalid("", 1, "no hosts");
}

static void test_values(void **state)
{
    (void)state;
    expect_invalid(HOST_A "ram = lots\n", 3, "ram = 'lots' is not a size");
    expect_invalid(HOST_A "ram = 256M # big\n", 3, "'#' starts a comment only at the start");
    expect_invalid(HOST_A "iommu = maybe\n", 3, "iommu = 'maybe' is not a yes/no value");
    expect_invalid(HOST_A "ram = 1M\n", 3, "ram = 1M is out of range; use 2 MiB..");
    expect_invalid(HOST_A "ram = 2047k\n", 3, "ram = 2047k is out of range");
    expect_invalid(HOST_A "ram = 2050k\n", 3, "ram = 2050k is not a multiple of 4 KiB");
    expect_invalid(HOST_A "ram = 16G\n", 3, "ram = 16G is out of range");
    expect_invalid(HOST_A "[defaults]\nlut_size = 12k\n", 4, "lut_size = 12k is not a power of two");
    expect_invalid(HOST_A "[defaults]\nlut_size = 2k\n", 4, "lut_size = 2k is out of range; use 4 KiB");
    expect_invalid(HOST_A "[defaults]\nlut_entries = 0\n", 4, "lut_entries = 0 is out of range");
    expect_invalid(HOST_A "[defaults]\nlut_entries = 65537\n", 4, "use 1..65536");
    expect_invalid(HOST_A "[defaults]\nrid_entries = 2\n", 4, "rid_entries = 2 is out of range");
    expect_invalid(HOST_A "[defaults]\nrid_entries = 4097\n", 4, "use 3..4096");
    expect_invalid(HOST_A "[defaults]\ndoorbells = 1\n", 4, "doorbells = 1 is out of range; use 2..32");
    expect_invalid(HOST_A "[defaults]\ndoorbells = 33\n", 4, "use 2..32");
    expect_invalid(HOST_A "[defaults]\nscratchpads = 65\n", 4, "scratchpads = 65 is out of range; use 0..64");
    expect_invalid(HOST_A "[defaults]\ndma_channels = 17\n", 4, "dma_channels = 17 is out of range; use 0..16");
    expect_invalid(HOST_A "[switch s]\nports = 1\n", 4, "ports = 1 is out of range; use 2..256");
    expect_invalid(HOST_A "[switch s]\nports = 257\n", 4, "use 2..256");
    expect_invalid(HOST_A "[switch s]\nlatency_ns = 5\n", 3, "[switch s] has no ports");
    expect_invalid(HOST_A "[latency]\nread_request_bytes = 768\n", 4, "not a power of two");
    expect_invalid(HOST_A "[latency]\nlink_mbps = 0\n", 4, "link_mbps = 0 is out of range");
    expect_invalid(HOST_A "[latency]\nenabled = 2\n", 4, "is not a yes/no value");
    /* Upper bounds that are fine. */
    assert_int_equal(tl_load_text(&L, HOST_A "[defaults]\nlut_entries = 65536\nlut_size = 1M\n"
                               "rid_entries = 4096\ndoorbells = 32\nscratchpads = 64\n"
                               "dma_channels = 16\n[host b]\nnode_id = 5\nadapters = n\n"), 0);
    assert_int_equal(L.t->adapters[0].lut_entries, 65536);
    assert_int_equal(L.t->adapters[0].spads, 64);
}

static void test_window(void **state)
{
    (void)state;
    /* In [defaults]: reported once, where the values are set. */
    expect_invalid("[defaults]\nlut_size = 1G\nlut_entries = 65\n"
                   "[host a]\nnode_id = 4\nadapters = n0, n1\n", 3,
                   "[defaults]: window lut_entries * lut_size = 65 * 1 GiB exceeds 64 GiB");
    assert_int_equal(tl_count_msgs(&L), 1);
    /* In an [adapter] section, combined with a default. */
    expect_invalid("[defaults]\nlut_size = 1G\n" HOST_A "adapters = n0\n[adapter a.n0]\n"
                   "lut_entries = 128\n", 7, "adapter a.n0: window");
    /* Exactly 64 GiB is fine. */
    assert_int_equal(tl_load_text(&L, HOST_A "adapters = n0\n[adapter a.n0]\nlut_size = 64G\n"
                               "lut_entries = 1\n"), 0);
}

static void test_adapters(void **state)
{
    (void)state;
    expect_invalid(HOST_A "[adapter b.ntb0]\n", 3, "[adapter b.ntb0]: no host named 'b'");
    expect_invalid(HOST_A "[adapter a.ntb0]\n[adapter a.ntb0]\n", 4,
                   "adapter a.ntb0 is already declared at line 3");
    expect_invalid(HOST_A "adapters = ntb0, ntb0\n", 3, "adapter 'ntb0' is listed twice");
    expect_invalid(HOST_A "adapters = ntb0,,ntb1\n", 3, "empty name in the adapters list");
    expect_invalid(HOST_A "[adapter ntb0]\n", 3, "is not HOST.NAME");
    expect_invalid("[host abcdefghijklmnopqrstuvwxyz]\nnode_id = 4\nadapters = ntb01\n", 3,
                   "longer than 31 characters");
    /* 33 adapters on one host: requester IDs run out. */
    char text[1024] = HOST_A "adapters = n0";
    for (int i = 1; i < 33; i++)
        snprintf(text + strlen(text), sizeof text - strlen(text), ",n%d", i);
    strcat(text, "\n");
    expect_invalid(text, 3, "host a has more than 32 adapters");
}

static void test_links(void **state)
{
    (void)state;
#define TWO HOST_A "adapters = n0, n1\n[host b]\nnode_id = 8\nadapters = n0\n" /* lines 1-6 */
    expect_invalid(TWO "[links]\na.n0 = c.n0\n", 8, "no adapter or switch named 'c.n0'");
    expect_invalid(TWO "[links]\na.n0 = sw9\n", 8, "no adapter or switch named 'sw9'");
    expect_invalid(TWO "[links]\na.n0 = b\n", 8, "no adapter or switch named 'b'; b is a host");
    expect_invalid(TWO "[links]\na.n0 = b.n0\na.n0 = b.n0\n", 9,
                   "adapter a.n0 is already cabled at line 8");
    expect_invalid(TWO "[links]\na.n0 = b.n0\na.n1 = b.n0\n", 9,
                   "adapter b.n0 is already cabled at line 8; an adapter has one port");
    expect_invalid(TWO "[links]\na.n0 = a.n0\n", 8, "cable from a.n0 to itself");
    expect_invalid(TWO "[switch s]\nports = 2\n[links]\ns = s\n", 10, "cable from s to itself");
    expect_invalid(TWO "[links]\na.n0 =\n", 8, "a cable needs two ends");
    expect_invalid(TWO "[switch s]\nports = 2\n[links]\na.n0 = s\na.n1 = s\nb.n0 = s\n", 12,
                   "switch s has only 2 ports and all are cabled");
    expect_invalid(TWO "[switch s]\nports = 4\n[switch t]\nports = 4\n[switch u]\nports = 4\n"
                   "[links]\ns = t\nt = u\nu = s\n", 16, "cable u = s closes a loop of switches; "
                   "ntblend routes over trees");
    expect_invalid(TWO "[switch s]\nports = 4\n[switch t]\nports = 4\n[links]\ns = t\nt = s\n",
                   13, "closes a loop");
    /* A link to the same adapter pair through a cascade is a tree: fine. */
    assert_int_equal(tl_load_text(&L, TWO "[switch s]\nports = 4\n[switch t]\nports = 4\n[links]\n"
                               "s = t\na.n0 = s\nb.n0 = t\n"), 0);
    assert_true(tl_is_peer(&L, "a.n0", "b.n0"));
    assert_int_equal(tl_npeers(&L, "a.n1"), 0);
}

static void test_devices(void **state)
{
    (void)state;
    expect_invalid(HOST_A "[device d]\ntype = nvme\n", 3, "[device d] has no host");
    expect_invalid(HOST_A "[device d]\nhost = a\n", 3, "[device d] has no type");
    expect_invalid(HOST_A "[device d]\nhost = z\ntype = nvme\n", 4, "[device d]: no host named 'z'");
    expect_invalid(HOST_A "[device d]\nhost = a\ntype = nvme\n[device d]\nhost = a\ntype = x\n",
                   6, "device d is already declared at line 3");
    expect_invalid(HOST_A "[device d]\nhost = a\ntype = nvme\nq = 1;2\n", 6, "contains ';'");
    expect_invalid(HOST_A "[device d]\nhost = a\ntype = nvme\nq = 1\nq = 2\n", 7,
                   "device parameter 'q' is already set");
    expect_invalid(HOST_A "[device d]\nhost = a b\ntype = nvme\n", 4,
                   "host = 'a b' is not a valid name");
    assert_int_equal(tl_count_msgs(&L), 1); /* not also "has no host" */
    char text[2048] = HOST_A "[device d]\nhost = a\ntype = nvme\n";
    for (int i = 0; i < 12; i++)
        snprintf(text + strlen(text), sizeof text - strlen(text), "key%02d = %060d\n", i, i);
    expect_invalid(text, 13, "the parameters of [device d] exceed 511 characters");
}

/* Write a generated file into the temporary directory; returns its text for load_text. */
static char *gen(size_t cap)
{
    char *s = calloc(1, cap);
    assert_non_null(s);
    return s;
}

#define APPEND(s, cap, ...) snprintf((s) + strlen(s), (cap) - strlen(s), __VA_ARGS__)

static void test_limits(void **state)
{
    (void)state;
    size_t cap = 1 << 20;
    char *s = gen(cap);
    int line = 0;

    /* 66 adapters on one switch tree: each would reach 65 peers (> TOPO_MAX_PEERS). */
    APPEND(s, cap, "[switch s]\nports = 256\n");
    line = 2;
    for (int i = 0; i < 66; i++, line += 3)
        APPEND(s, cap, "[host h%d]\nnode_id = %d\nadapters = n\n", i, i + 1);
    APPEND(s, cap, "[links]\n");
    line++;
    for (int i = 0; i < 66; i++)
        APPEND(s, cap, "h%d.n = s\n", i);
    /* the 66th adapter's cable is the first one too many */
    expect_invalid(s, line + 66, "connects 66 adapters, so each would reach 65 peers, more than 64");
    assert_int_equal(tl_count_msgs(&L), 1);

    /* 65 on the tree is fine: 64 peers each. */
    s[0] = '\0';
    APPEND(s, cap, "[switch s]\nports = 256\n");
    for (int i = 0; i < 65; i++)
        APPEND(s, cap, "[host h%d]\nnode_id = %d\nadapters = n\n", i, i + 1);
    APPEND(s, cap, "[links]\n");
    for (int i = 0; i < 65; i++)
        APPEND(s, cap, "h%d.n = s\n", i);
    assert_int_equal(tl_load_text(&L, s), 0);
    assert_int_equal(tl_npeers(&L, "h0.n"), 64);

    /* Hosts: the 257th is reported at its header, once. */
    s[0] = '\0';
    for (int i = 0; i < TOPO_MAX_HOSTS + 2; i++)
        APPEND(s, cap, "[host h%d]\nnode_id = %d\n", i, i + 1);
    expect_invalid(s, 2 * TOPO_MAX_HOSTS + 1, "more than 256 hosts (TOPO_MAX_HOSTS)");
    assert_int_equal(tl_count_msgs(&L), 1);
    assert_int_equal(L.t->nhosts, TOPO_MAX_HOSTS);

    /* Switches. */
    s[0] = '\0';
    APPEND(s, cap, HOST_A);
    for (int i = 0; i < TOPO_MAX_SWITCHES + 1; i++)
        APPEND(s, cap, "[switch s%d]\nports = 2\n", i);
    expect_invalid(s, 3 + 2 * TOPO_MAX_SWITCHES, "more than 64 switches (TOPO_MAX_SWITCHES)");
    assert_int_equal(L.t->nswitches, TOPO_MAX_SWITCHES);

    /* Devices. */
    s[0] = '\0';
    APPEND(s, cap, HOST_A);
    for (int i = 0; i < TOPO_MAX_DEVICES + 1; i++)
        APPEND(s, cap, "[device d%d]\nhost = a\ntype = nvme\n", i);
    expect_invalid(s, 3 + 3 * TOPO_MAX_DEVICES, "more than 256 devices (TOPO_MAX_DEVICES)");

    /* Adapters: 33 hosts with 32 each. */
    s[0] = '\0';
    for (int h = 0; h < 33; h++) {
        APPEND(s, cap, "[host h%d]\nnode_id = %d\nadapters = n0", h, h + 1);
        for (int i = 1; i < 32; i++)
            APPEND(s, cap, ",n%d", i);
        APPEND(s, cap, "\n");
    }
    expect_invalid(s, 3 * 32 + 3, "more than 1024 adapters (TOPO_MAX_ADAPTERS)");
    assert_int_equal(L.t->nadapters, TOPO_MAX_ADAPTERS);

    /* Links: 2049 cable lines. */
    s[0] = '\0';
    APPEND(s, cap, HOST_A "adapters = n0, n1\n[links]\n");
    for (int i = 0; i < TOPO_MAX_LINKS + 1; i++)
        APPEND(s, cap, "a.n0 = a.n1\n");
    expect_invalid(s, 5 + TOPO_MAX_LINKS, "more than 2048 links (TOPO_MAX_LINKS)");
    free(s);
}

static void test_open_errors(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/does-not-exist.ini", L.tmpdir);
    assert_int_equal(tl_load_path(&L, path), -ENOENT);
    assert_non_null(strstr(L.err, path));
    /* A directory opens but cannot be read. */
    assert_int_equal(tl_load_path(&L, L.tmpdir), -EISDIR);
    assert_non_null(strstr(L.err, L.tmpdir));
}

static int setup(void **state) { return tl_setup(state, &L, "test_topo_rules"); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_any_order_and_overrides),
        cmocka_unit_test(test_comments_indentation_latency_devices),
        cmocka_unit_test(test_parse_size),
        cmocka_unit_test(test_unknown_section_and_key),
        cmocka_unit_test(test_syntax),
        cmocka_unit_test(test_hosts),
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_window),
        cmocka_unit_test(test_adapters),
        cmocka_unit_test(test_links),
        cmocka_unit_test(test_devices),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_open_errors),
    };
    return cmocka_run_group_tests(tests, setup, tl_teardown);
}
