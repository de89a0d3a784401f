/*
 * Topology parser and validator: every example parses into the fabric it describes, every
 * validation rule reports FILE:LINE with the right line and refuses the file, sizes parse.
 * Examples are found under $NTBLEND_SRC; broken inputs are written to a temporary directory.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "topo.h"

static char tmpdir[256];
static struct topo *t;
static char *errtext;
static char lastpath[512];

static const char *src_dir(void)
{
    const char *s = getenv("NTBLEND_SRC");
    return s && *s ? s : ".";
}

/* Load a file, capturing what topo_load prints. */
static int load_path(const char *path)
{
    size_t len;
    free(errtext);
    errtext = NULL;
    FILE *err = open_memstream(&errtext, &len);
    assert_non_null(err);
    snprintf(lastpath, sizeof lastpath, "%s", path);
    int rc = topo_load(path, t, err);
    fclose(err);
    return rc;
}

static int load_example(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/examples/topologies/%s", src_dir(), name);
    return load_path(path);
}

/* Write text to a fresh file in the temporary directory and load it. */
static int load_text(const char *text)
{
    static int n;
    char path[512];
    snprintf(path, sizeof path, "%s/case%d.ini", tmpdir, n++);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return load_path(path);
}

/* Is there a message "PATH:LINE: ...needle..." in the captured output? */
static bool has_msg(int line, const char *needle)
{
    char prefix[600];
    snprintf(prefix, sizeof prefix, "%s:%d: ", lastpath, line);
    for (const char *p = errtext; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if (n >= strlen(prefix) && !strncmp(p, prefix, strlen(prefix)) &&
            memmem(p, n, needle, strlen(needle)))
            return true;
        p = nl ? nl + 1 : p + n;
    }
    return false;
}

static int count_msgs(void)
{
    int n = 0;
    for (const char *p = errtext; p && *p; p++)
        n += *p == '\n';
    return n;
}

#define expect_msg(line, needle)                                                              \
    do {                                                                                      \
        if (!has_msg(line, needle))                                                           \
            fail_msg("no message at line %d containing \"%s\"; got:\n%s", line, needle,       \
                     errtext ? errtext : "");                                                 \
    } while (0)

/* Load text that must be refused with a message at `line` containing `needle`. */
static void expect_invalid(const char *text, int line, const char *needle)
{
    int rc = load_text(text);
    if (rc != -EINVAL)
        fail_msg("expected -EINVAL, got %d for:\n%s\nmessages:\n%s", rc, text,
                 errtext ? errtext : "");
    expect_msg(line, needle);
}

/* The adapters a given adapter reaches: the other end of its cable, or every other adapter on
 * the switch tree that cable leads to. Computed here from the links, independently of route.c. */
static void peers_walk_switch(uint32_t self, uint32_t sw, int from, bool *mark, uint32_t *n)
{
    for (uint32_t l = 0; l < t->nlinks; l++) {
        if ((int)l == from)
            continue;
        const struct topo_link *lk = &t->links[l];
        const struct topo_end *o;
        if (lk->a.kind == TOPO_END_SWITCH && lk->a.index == sw)
            o = &lk->b;
        else if (lk->b.kind == TOPO_END_SWITCH && lk->b.index == sw)
            o = &lk->a;
        else
            continue;
        if (o->kind == TOPO_END_ADAPTER) {
            if (o->index != self && !mark[o->index]) {
                mark[o->index] = true;
                (*n)++;
            }
        } else {
            peers_walk_switch(self, o->index, (int)l, mark, n);
        }
    }
}

static uint32_t peers_of(const char *adapter, bool *mark)
{
    int a = topo_adapter_by_name(t, adapter);
    assert_true(a >= 0);
    memset(mark, 0, TOPO_MAX_ADAPTERS * sizeof *mark);
    uint32_t n = 0;
    for (uint32_t l = 0; l < t->nlinks; l++) {
        const struct topo_link *lk = &t->links[l];
        const struct topo_end *o;
        if (lk->a.kind == TOPO_END_ADAPTER && lk->a.index == (uint32_t)a)
            o = &lk->b;
        else if (lk->b.kind == TOPO_END_ADAPTER && lk->b.index == (uint32_t)a)
            o = &lk->a;
        else
            continue;
        if (o->kind == TOPO_END_ADAPTER) {
            mark[o->index] = true;
            n++;
        } else {
            peers_walk_switch((uint32_t)a, o->index, (int)l, mark, &n);
        }
        break;
    }
    return n;
}

static bool is_peer(const char *a, const char *b)
{
    static bool mark[TOPO_MAX_ADAPTERS];
    peers_of(a, mark);
    int i = topo_adapter_by_name(t, b);
    return i >= 0 && mark[i];
}

static uint32_t npeers(const char *a)
{
    static bool mark[TOPO_MAX_ADAPTERS];
    return peers_of(a, mark);
}

/* ---- examples ---- */

static void test_two_hosts(void **state)
{
    (void)state;
    assert_int_equal(load_example("two-hosts.ini"), 0);
    assert_string_equal(errtext, "");
    assert_int_equal(t->nhosts, 2);
    assert_int_equal(t->nadapters, 2);
    assert_int_equal(t->nswitches, 0);
    assert_int_equal(t->nlinks, 1);
    int a = topo_host_by_name(t, "a"), b = topo_host_by_name(t, "b");
    assert_int_equal(a, 0);
    assert_int_equal(b, 1);
    assert_int_equal(t->hosts[a].node_id, 4);
    assert_int_equal(t->hosts[b].node_id, 8);
    assert_int_equal(t->hosts[a].ram_size, 256ull << 20);
    assert_int_equal(t->hosts[a].iommu, 0);
    int an = topo_adapter_by_name(t, "a.ntb0");
    assert_int_equal(an, 0);
    const struct topo_adapter *ad = &t->adapters[an];
    assert_int_equal(ad->host, 0);
    assert_int_equal(ad->index_on_host, 0);
    assert_int_equal(ad->lut_size, 4ull << 20);
    assert_int_equal(ad->lut_entries, 64);
    assert_int_equal(ad->rid_entries, 32);
    assert_int_equal(ad->db_bits, 16);
    assert_int_equal(ad->spads, 8);
    assert_int_equal(ad->dma_channels, 4);
    assert_int_equal(t->links[0].a.kind, TOPO_END_ADAPTER);
    assert_int_equal(t->links[0].b.kind, TOPO_END_ADAPTER);
    assert_int_equal(npeers("a.ntb0"), 1);
    assert_true(is_peer("a.ntb0", "b.ntb0"));
    assert_true(is_peer("b.ntb0", "a.ntb0"));
    /* No [latency] section: model off, the documented constants. */
    assert_int_equal(t->latency.enabled, 0);
    assert_int_equal(t->latency.ntb_ns, 360);
    assert_int_equal(t->latency.adapter_switch_ns, 50);
    assert_int_equal(t->latency.root_ns, 100);
    assert_int_equal(t->latency.doorbell_ns, 500);
    assert_int_equal(t->latency.max_read_requests, 8);
    assert_int_equal(t->latency.read_request_bytes, 512);
    assert_int_equal(t->latency.link_mbps, 6000);
    assert_non_null(strstr(t->path, "two-hosts.ini"));
}

static void test_four_hosts_switch(void **state)
{
    (void)state;
    assert_int_equal(load_example("four-hosts-switch.ini"), 0);
    assert_int_equal(t->nhosts, 4);
    assert_int_equal(t->nadapters, 4);
    assert_int_equal(t->nswitches, 1);
    assert_int_equal(t->nlinks, 4);
    int sw = topo_switch_by_name(t, "sw0");
    assert_int_equal(sw, 0);
    assert_int_equal(t->switches[sw].ports, 24);
    assert_int_equal(t->switches[sw].latency_ns, 170);
    const char *names[] = { "a.ntb0", "b.ntb0", "c.ntb0", "d.ntb0" };
    for (int i = 0; i < 4; i++) {
        assert_int_equal(npeers(names[i]), 3);
        for (int j = 0; j < 4; j++)
            assert_int_equal(is_peer(names[i], names[j]), i != j);
    }
}

static void test_ring5(void **state)
{
    (void)state;
    assert_int_equal(load_example("ring5.ini"), 0);
    assert_int_equal(t->nhosts, 5);
    assert_int_equal(t->nadapters, 10);
    assert_int_equal(t->nswitches, 0);
    assert_int_equal(t->nlinks, 5);
    const char *h = "abcde";
    for (int i = 0; i < 5; i++) {
        char left[8], right[8], next_left[8];
        snprintf(left, sizeof left, "%c.left", h[i]);
        snprintf(right, sizeof right, "%c.right", h[i]);
        snprintf(next_left, sizeof next_left, "%c.left", h[(i + 1) % 5]);
        int l = topo_adapter_by_name(t, left), r = topo_adapter_by_name(t, right);
        assert_int_equal(t->adapters[l].host, (uint32_t)i);
        assert_int_equal(t->adapters[l].index_on_host, 0);
        assert_int_equal(t->adapters[r].index_on_host, 1);
        assert_int_equal(l, 2 * i); /* a host's adapters are contiguous, in list order */
        assert_int_equal(npeers(right), 1);
        assert_true(is_peer(right, next_left));
        assert_int_equal(npeers(left), 1);
    }
}

static void test_mesh3(void **state)
{
    (void)state;
    assert_int_equal(load_example("mesh3.ini"), 0);
    assert_int_equal(t->nhosts, 3);
    assert_int_equal(t->nadapters, 6);
    assert_int_equal(t->nlinks, 3);
    /* Every pair of hosts shares exactly one cable. */
    for (uint32_t x = 0; x < 3; x++)
        for (uint32_t y = x + 1; y < 3; y++) {
            int cables = 0;
            for (uint32_t l = 0; l < t->nlinks; l++) {
                uint32_t ha = t->adapters[t->links[l].a.index].host;
                uint32_t hb = t->adapters[t->links[l].b.index].host;
                cables += (ha == x && hb == y) || (ha == y && hb == x);
            }
            assert_int_equal(cables, 1);
        }
    for (uint32_t i = 0; i < t->nadapters; i++)
        assert_int_equal(npeers(t->adapters[i].name), 1);
}

static void test_cluster60(void **state)
{
    (void)state;
    assert_int_equal(load_example("cluster60.ini"), 0);
    assert_int_equal(t->nhosts, 60);
    assert_int_equal(t->nadapters, 60);
    assert_int_equal(t->nswitches, 7);
    assert_int_equal(t->nlinks, 66);
    for (uint32_t i = 0; i < 60; i++) {
        assert_int_equal(t->hosts[i].node_id, 4 * (i + 1));
        assert_int_equal(t->hosts[i].ram_size, 64ull << 20);
    }
    assert_int_equal(npeers("h00.ntb0"), 59);
    assert_int_equal(npeers("h59.ntb0"), 59);
    assert_true(is_peer("h00.ntb0", "h59.ntb0"));
    assert_true(is_peer("h00.ntb0", "h09.ntb0"));
    /* Top switch: six leaves. Leaves: ten hosts and the uplink. */
    uint32_t on[7] = { 0 };
    for (uint32_t l = 0; l < t->nlinks; l++) {
        if (t->links[l].a.kind == TOPO_END_SWITCH)
            on[t->links[l].a.index]++;
        if (t->links[l].b.kind == TOPO_END_SWITCH)
            on[t->links[l].b.index]++;
    }
    assert_int_equal(on[topo_switch_by_name(t, "sw0")], 6);
    for (int s = 1; s <= 6; s++) {
        char n[8];
        snprintf(n, sizeof n, "sw%d", s);
        assert_int_equal(on[topo_switch_by_name(t, n)], 11);
    }
}

/* Every file under examples/topologies/bad is refused with a located message. */
static void test_bad_examples(void **state)
{
    (void)state;
    static const struct { const char *file; int line; const char *needle; } bad[] = {
        { "bad/syntax.ini", 9, "no closing ']'" },
        { "bad/syntax.ini", 12, "expected KEY = VALUE" },
        { "bad/syntax.ini", 15, "unknown section [hots b]" },
        { "bad/values.ini", 7, "ram = 1M is out of range" },
        { "bad/values.ini", 10, "lut_size = 12k is not a power of two" },
        { "bad/values.ini", 11, "doorbells = 64 is out of range" },
        { "bad/values.ini", 14, "node_id 4 is already used by host a at line 6" },
        { "bad/values.ini", 15, "iommu = 'perhaps' is not a yes/no value" },
        { "bad/cabling.ini", 18, "adapter a.ntb0 is already cabled at line 17" },
        { "bad/cabling.ini", 19, "no adapter or switch named 'c.ntb0'" },
        { "bad/cabling.ini", 21, "closes a loop of switches" },
        { "bad/cabling.ini", 22, "cable from sw1 to itself" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(load_example(bad[i].file), -EINVAL);
        expect_msg(bad[i].line, bad[i].needle);
    }
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
    assert_int_equal(load_text(text), 0);
    assert_string_equal(errtext, "");
    assert_int_equal(t->nadapters, 4);
    /* host a: its list (ntb0, ntb1), then [adapter] sections not in the list (x). */
    assert_int_equal(topo_adapter_by_name(t, "a.ntb0"), 0);
    assert_int_equal(topo_adapter_by_name(t, "a.ntb1"), 1);
    assert_int_equal(topo_adapter_by_name(t, "a.x"), 2);
    assert_int_equal(topo_adapter_by_name(t, "b.ntb0"), 3);
    assert_int_equal(t->adapters[2].index_on_host, 2);
    assert_int_equal(t->adapters[3].index_on_host, 0);
    assert_int_equal(t->adapters[2].lut_entries, 128);
    assert_int_equal(t->adapters[0].lut_entries, 64);
    assert_int_equal(t->adapters[1].dma_channels, 0);
    assert_int_equal(t->adapters[0].dma_channels, 4);
    assert_int_equal(t->adapters[0].lut_size, 1ull << 20);
    assert_int_equal(t->adapters[3].db_bits, 32);
    assert_int_equal(t->hosts[0].iommu, 1);
    assert_int_equal(t->hosts[0].ram_size, 128ull << 20);
    assert_int_equal(t->hosts[1].ram_size, 2ull << 20);
    assert_int_equal(t->hosts[1].iommu, 0);
    assert_int_equal(t->hosts[1].node_id, 65535);
    assert_int_equal(t->hosts[0].line, 8);
    assert_int_equal(t->adapters[2].line, 4);
    assert_int_equal(t->links[1].line, 3);
    /* a.ntb0 and a.ntb1 are unplugged: allowed. */
    assert_int_equal(t->nlinks, 2);
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
    assert_int_equal(load_text(text), 0);
    assert_string_equal(errtext, "");
    assert_int_equal(t->latency.enabled, 1);
    assert_int_equal(t->latency.ntb_ns, 350);
    assert_int_equal(t->latency.adapter_switch_ns, 132);
    assert_int_equal(t->latency.root_ns, 0);
    assert_int_equal(t->latency.doorbell_ns, 1000);
    assert_int_equal(t->latency.max_read_requests, 8);
    assert_int_equal(t->latency.read_request_bytes, 4096);
    assert_int_equal(t->latency.link_mbps, 3000);
    assert_int_equal(topo_host_by_name(t, "a"), 0);
    assert_int_equal(t->nadapters, 0);
    assert_int_equal(t->ndevices, 2);
    assert_string_equal(t->devices[0].name, "nvme0");
    assert_string_equal(t->devices[0].type, "nvme");
    assert_int_equal(t->devices[0].host, 0);
    assert_string_equal(t->devices[0].params, "namespaces=2;backing.file=/tmp/x.img;");
    assert_int_equal(t->devices[0].line, 17);
    assert_string_equal(t->devices[1].params, "");
}

static void test_lookups(void **state)
{
    (void)state;
    assert_int_equal(load_example("four-hosts-switch.ini"), 0);
    assert_int_equal(topo_host_by_name(t, "c"), 2);
    assert_int_equal(topo_host_by_name(t, "zz"), -1);
    assert_int_equal(topo_host_by_name(t, NULL), -1);
    assert_int_equal(topo_adapter_by_name(t, "d.ntb0"), 3);
    assert_int_equal(topo_adapter_by_name(t, "d"), -1);
    assert_int_equal(topo_adapter_by_name(t, "ntb0"), -1);
    assert_int_equal(topo_switch_by_name(t, "sw0"), 0);
    assert_int_equal(topo_switch_by_name(t, "a"), -1);
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
    assert_int_equal(load_text("[host a]\nnode_id = x\nram = 1\n[host a]\nnode_id = 4\n"
                               "[switch s\nfoo\n"), -EINVAL);
    expect_msg(2, "node_id = 'x' is not a whole number");
    expect_msg(3, "ram = 1 is out of range");
    expect_msg(4, "host a is already declared at line 1");
    expect_msg(6, "no closing ']'");
    expect_msg(7, "expected KEY = VALUE");
    assert_int_equal(count_msgs(), 5);
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
    assert_int_equal(load_text(HOST_A "[defaults]\nlut_entries = 65536\nlut_size = 1M\n"
                               "rid_entries = 4096\ndoorbells = 32\nscratchpads = 64\n"
                               "dma_channels = 16\n[host b]\nnode_id = 5\nadapters = n\n"), 0);
    assert_int_equal(t->adapters[0].lut_entries, 65536);
    assert_int_equal(t->adapters[0].spads, 64);
}

static void test_window(void **state)
{
    (void)state;
    /* In [defaults]: reported once, where the values are set. */
    expect_invalid("[defaults]\nlut_size = 1G\nlut_entries = 65\n"
                   "[host a]\nnode_id = 4\nadapters = n0, n1\n", 3,
                   "[defaults]: window lut_entries * lut_size = 65 * 1 GiB exceeds 64 GiB");
    assert_int_equal(count_msgs(), 1);
    /* In an [adapter] section, combined with a default. */
    expect_invalid("[defaults]\nlut_size = 1G\n" HOST_A "adapters = n0\n[adapter a.n0]\n"
                   "lut_entries = 128\n", 7, "adapter a.n0: window");
    /* Exactly 64 GiB is fine. */
    assert_int_equal(load_text(HOST_A "adapters = n0\n[adapter a.n0]\nlut_size = 64G\n"
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
    assert_int_equal(load_text(TWO "[switch s]\nports = 4\n[switch t]\nports = 4\n[links]\n"
                               "s = t\na.n0 = s\nb.n0 = t\n"), 0);
    assert_true(is_peer("a.n0", "b.n0"));
    assert_int_equal(npeers("a.n1"), 0);
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
    assert_int_equal(count_msgs(), 1); /* not also "has no host" */
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
    assert_int_equal(count_msgs(), 1);

    /* 65 on the tree is fine: 64 peers each. */
    s[0] = '\0';
    APPEND(s, cap, "[switch s]\nports = 256\n");
    for (int i = 0; i < 65; i++)
        APPEND(s, cap, "[host h%d]\nnode_id = %d\nadapters = n\n", i, i + 1);
    APPEND(s, cap, "[links]\n");
    for (int i = 0; i < 65; i++)
        APPEND(s, cap, "h%d.n = s\n", i);
    assert_int_equal(load_text(s), 0);
    assert_int_equal(npeers("h0.n"), 64);

    /* Hosts: the 257th is reported at its header, once. */
    s[0] = '\0';
    for (int i = 0; i < TOPO_MAX_HOSTS + 2; i++)
        APPEND(s, cap, "[host h%d]\nnode_id = %d\n", i, i + 1);
    expect_invalid(s, 2 * TOPO_MAX_HOSTS + 1, "more than 256 hosts (TOPO_MAX_HOSTS)");
    assert_int_equal(count_msgs(), 1);
    assert_int_equal(t->nhosts, TOPO_MAX_HOSTS);

    /* Switches. */
    s[0] = '\0';
    APPEND(s, cap, HOST_A);
    for (int i = 0; i < TOPO_MAX_SWITCHES + 1; i++)
        APPEND(s, cap, "[switch s%d]\nports = 2\n", i);
    expect_invalid(s, 3 + 2 * TOPO_MAX_SWITCHES, "more than 64 switches (TOPO_MAX_SWITCHES)");
    assert_int_equal(t->nswitches, TOPO_MAX_SWITCHES);

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
    assert_int_equal(t->nadapters, TOPO_MAX_ADAPTERS);

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
    snprintf(path, sizeof path, "%s/does-not-exist.ini", tmpdir);
    assert_int_equal(load_path(path), -ENOENT);
    assert_non_null(strstr(errtext, path));
    assert_int_equal(load_path(tmpdir), -EISDIR); /* a directory opens but cannot be read */
    assert_non_null(strstr(errtext, tmpdir));
}

/* ---- fixtures ---- */

static int setup(void **state)
{
    (void)state;
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/test_topo.XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmpdir))
        return -1;
    t = malloc(sizeof *t);
    return t ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    free(t);
    free(errtext);
    DIR *d = opendir(tmpdir); /* holds only the caseN.ini files written above */
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)))
            if (e->d_name[0] != '.') {
                char path[600];
                snprintf(path, sizeof path, "%s/%s", tmpdir, e->d_name);
                unlink(path);
            }
        closedir(d);
    }
    return rmdir(tmpdir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_hosts),
        cmocka_unit_test(test_four_hosts_switch),
        cmocka_unit_test(test_ring5),
        cmocka_unit_test(test_mesh3),
        cmocka_unit_test(test_cluster60),
        cmocka_unit_test(test_bad_examples),
        cmocka_unit_test(test_any_order_and_overrides),
        cmocka_unit_test(test_comments_indentation_latency_devices),
        cmocka_unit_test(test_lookups),
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
    return cmocka_run_group_tests(tests, setup, teardown);
}
