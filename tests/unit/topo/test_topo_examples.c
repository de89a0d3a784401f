/*
 * The topology reader on the files users start from: every example under
 * examples/topologies parses into the fabric it describes (hosts, adapters, switches, who
 * reaches whom), every deliberately broken file under examples/topologies/bad is refused with
 * a located message, and names look up. The format's rules are test_topo_rules'.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "topo_load.h"

static struct tl L;

/* ---- examples ---- */

static void test_two_hosts(void **state)
{
    (void)state;
    assert_int_equal(tl_load_example(&L, "two-hosts.ini"), 0);
    assert_string_equal(L.err, "");
    assert_int_equal(L.t->nhosts, 2);
    assert_int_equal(L.t->nadapters, 2);
    assert_int_equal(L.t->nswitches, 0);
    assert_int_equal(L.t->nlinks, 1);
    int a = topo_host_by_name(L.t, "a"), b = topo_host_by_name(L.t, "b");
    assert_int_equal(a, 0);
    assert_int_equal(b, 1);
    assert_int_equal(L.t->hosts[a].node_id, 4);
    assert_int_equal(L.t->hosts[b].node_id, 8);
    assert_int_equal(L.t->hosts[a].ram_size, 256ull << 20);
    assert_int_equal(L.t->hosts[a].iommu, 0);
    int an = topo_adapter_by_name(L.t, "a.ntb0");
    assert_int_equal(an, 0);
    const struct topo_adapter *ad = &L.t->adapters[an];
    assert_int_equal(ad->host, 0);
    assert_int_equal(ad->index_on_host, 0);
    assert_int_equal(ad->lut_size, 4ull << 20);
    assert_int_equal(ad->lut_entries, 64);
    assert_int_equal(ad->rid_entries, 32);
    assert_int_equal(ad->db_bits, 16);
    assert_int_equal(ad->spads, 8);
    assert_int_equal(ad->dma_channels, 4);
    assert_int_equal(L.t->links[0].a.kind, TOPO_END_ADAPTER);
    assert_int_equal(L.t->links[0].b.kind, TOPO_END_ADAPTER);
    assert_int_equal(tl_npeers(&L, "a.ntb0"), 1);
    assert_true(tl_is_peer(&L, "a.ntb0", "b.ntb0"));
    assert_true(tl_is_peer(&L, "b.ntb0", "a.ntb0"));
    /* No [latency] section: model off, the documented constants. */
    assert_int_equal(L.t->latency.enabled, 0);
    assert_int_equal(L.t->latency.ntb_ns, 360);
    assert_int_equal(L.t->latency.adapter_switch_ns, 50);
    assert_int_equal(L.t->latency.root_ns, 100);
    assert_int_equal(L.t->latency.doorbell_ns, 500);
    assert_int_equal(L.t->latency.max_read_requests, 8);
    assert_int_equal(L.t->latency.read_request_bytes, 512);
    assert_int_equal(L.t->latency.link_mbps, 6000);
    assert_non_null(strstr(L.t->path, "two-hosts.ini"));
}

static void test_four_hosts_switch(void **state)
{
    (void)state;
    assert_int_equal(tl_load_example(&L, "four-hosts-switch.ini"), 0);
    assert_int_equal(L.t->nhosts, 4);
    assert_int_equal(L.t->nadapters, 4);
    assert_int_equal(L.t->nswitches, 1);
    assert_int_equal(L.t->nlinks, 4);
    int sw = topo_switch_by_name(L.t, "sw0");
    assert_int_equal(sw, 0);
    assert_int_equal(L.t->switches[sw].ports, 24);
    assert_int_equal(L.t->switches[sw].latency_ns, 170);
    const char *names[] = { "a.ntb0", "b.ntb0", "c.ntb0", "d.ntb0" };
    for (int i = 0; i < 4; i++) {
        assert_int_equal(tl_npeers(&L, names[i]), 3);
        for (int j = 0; j < 4; j++)
            assert_int_equal(tl_is_peer(&L, names[i], names[j]), i != j);
    }
}

static void test_ring5(void **state)
{
    (void)state;
    assert_int_equal(tl_load_example(&L, "ring5.ini"), 0);
    assert_int_equal(L.t->nhosts, 5);
    assert_int_equal(L.t->nadapters, 10);
    assert_int_equal(L.t->nswitches, 0);
    assert_int_equal(L.t->nlinks, 5);
    const char *h = "abcde";
    for (int i = 0; i < 5; i++) {
        char left[8], right[8], next_left[8];
        snprintf(left, sizeof left, "%c.left", h[i]);
        snprintf(right, sizeof right, "%c.right", h[i]);
        snprintf(next_left, sizeof next_left, "%c.left", h[(i + 1) % 5]);
        int l = topo_adapter_by_name(L.t, left), r = topo_adapter_by_name(L.t, right);
        assert_int_equal(L.t->adapters[l].host, (uint32_t)i);
        assert_int_equal(L.t->adapters[l].index_on_host, 0);
        assert_int_equal(L.t->adapters[r].index_on_host, 1);
        assert_int_equal(l, 2 * i); /* a host's adapters are contiguous, in list order */
        assert_int_equal(tl_npeers(&L, right), 1);
        assert_true(tl_is_peer(&L, right, next_left));
        assert_int_equal(tl_npeers(&L, left), 1);
    }
}

static void test_mesh3(void **state)
{
    (void)state;
    assert_int_equal(tl_load_example(&L, "mesh3.ini"), 0);
    assert_int_equal(L.t->nhosts, 3);
    assert_int_equal(L.t->nadapters, 6);
    assert_int_equal(L.t->nlinks, 3);
    /* Every pair of hosts shares exactly one cable. */
    for (uint32_t x = 0; x < 3; x++)
        for (uint32_t y = x + 1; y < 3; y++) {
            int cables = 0;
            for (uint32_t l = 0; l < L.t->nlinks; l++) {
                uint32_t ha = L.t->adapters[L.t->links[l].a.index].host;
                uint32_t hb = L.t->adapters[L.t->links[l].b.index].host;
                cables += (ha == x && hb == y) || (ha == y && hb == x);
            }
            assert_int_equal(cables, 1);
        }
    for (uint32_t i = 0; i < L.t->nadapters; i++)
        assert_int_equal(tl_npeers(&L, L.t->adapters[i].name), 1);
}

static void test_cluster60(void **state)
{
    (void)state;
    assert_int_equal(tl_load_example(&L, "cluster60.ini"), 0);
    assert_int_equal(L.t->nhosts, 60);
    assert_int_equal(L.t->nadapters, 60);
    assert_int_equal(L.t->nswitches, 7);
    assert_int_equal(L.t->nlinks, 66);
    for (uint32_t i = 0; i < 60; i++) {
        assert_int_equal(L.t->hosts[i].node_id, 4 * (i + 1));
        assert_int_equal(L.t->hosts[i].ram_size, 64ull << 20);
    }
    assert_int_equal(tl_npeers(&L, "h00.ntb0"), 59);
    assert_int_equal(tl_npeers(&L, "h59.ntb0"), 59);
    assert_true(tl_is_peer(&L, "h00.ntb0", "h59.ntb0"));
    assert_true(tl_is_peer(&L, "h00.ntb0", "h09.ntb0"));
    /* Top switch: six leaves. Leaves: ten hosts and the uplink. */
    uint32_t on[7] = { 0 };
    for (uint32_t l = 0; l < L.t->nlinks; l++) {
        if (L.t->links[l].a.kind == TOPO_END_SWITCH)
            on[L.t->links[l].a.index]++;
        if (L.t->links[l].b.kind == TOPO_END_SWITCH)
            on[L.t->links[l].b.index]++;
    }
    assert_int_equal(on[topo_switch_by_name(L.t, "sw0")], 6);
    for (int s = 1; s <= 6; s++) {
        char n[8];
        snprintf(n, sizeof n, "sw%d", s);
        assert_int_equal(on[topo_switch_by_name(L.t, n)], 11);
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
        assert_int_equal(tl_load_example(&L, bad[i].file), -EINVAL);
        tl_expect_msg(&L, bad[i].line, bad[i].needle);
    }
}

static void test_lookups(void **state)
{
    (void)state;
    assert_int_equal(tl_load_example(&L, "four-hosts-switch.ini"), 0);
    assert_int_equal(topo_host_by_name(L.t, "c"), 2);
    assert_int_equal(topo_host_by_name(L.t, "zz"), -1);
    assert_int_equal(topo_host_by_name(L.t, NULL), -1);
    assert_int_equal(topo_adapter_by_name(L.t, "d.ntb0"), 3);
    assert_int_equal(topo_adapter_by_name(L.t, "d"), -1);
    assert_int_equal(topo_adapter_by_name(L.t, "ntb0"), -1);
    assert_int_equal(topo_switch_by_name(L.t, "sw0"), 0);
    assert_int_equal(topo_switch_by_name(L.t, "a"), -1);
}

static int setup(void **state) { return tl_setup(state, &L, "test_topo_examples"); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_hosts),
        cmocka_unit_test(test_four_hosts_switch),
        cmocka_unit_test(test_ring5),
        cmocka_unit_test(test_mesh3),
        cmocka_unit_test(test_cluster60),
        cmocka_unit_test(test_bad_examples),
        cmocka_unit_test(test_lookups),
    };
    return cmocka_run_group_tests(tests, setup, tl_teardown);
}
