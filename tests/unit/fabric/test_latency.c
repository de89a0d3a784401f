/*
 * The latency model's arithmetic (src/fabric/latency.c) and the topology elements it charges
 * ([hostswitch] sections, the IOMMU and root-complex keys of [latency]): transfer times of
 * writes, reads and reads split by a root complex's IOMMU, hops through in-host switches and
 * expansion chassis, IOTLB hits and misses, and the two properties the paper figures need —
 * equal hops for a local NVMe in a chassis and a lent one (smartio-tocs-2021 Fig. 21), and the
 * lender's IOMMU costing peer-to-peer reads at least 4x (Fig. 31). Nothing is timed.
 */
#define _GNU_SOURCE
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

#include "fabric.h"
#include "topo.h"

static struct topo *t;
static char *errtext;
static char tmpdir[] = "/tmp/ntblend-test-latency-XXXXXX";

static int load_path(const char *path)
{
    size_t len;
    free(errtext);
    errtext = NULL;
    FILE *err = open_memstream(&errtext, &len);
    int rc = topo_load(path, t, err);
    fclose(err);
    return rc;
}

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

static bool said(const char *needle) { return errtext && strstr(errtext, needle); }

static int setup(void **state)
{
    (void)state;
    t = calloc(1, sizeof *t);
    return t && mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        return -1;
    free(t);
    free(errtext);
    return 0;
}

/* The defaults of a [latency] section that only turns the model on. */
static struct topo_latency defaults(void)
{
    assert_int_equal(load_text("[host a]\nnode_id = 1\n[latency]\nenabled = yes\n"), 0);
    return t->latency;
}

static void test_defaults(void **state)
{
    (void)state;
    struct topo_latency l = defaults();
    assert_int_equal(l.iotlb_hit_ns, 20);
    assert_int_equal(l.page_walk_ns, 330);
    assert_int_equal(l.root_read_bytes, 64);
    assert_int_equal(l.root_max_reads, 16);
    assert_int_equal(load_text("[host a]\nnode_id = 1\n[latency]\niotlb_hit_ns = 5\n"
                               "page_walk_ns = 700\nroot_read_bytes = 128\nroot_max_reads = 8\n"), 0);
    assert_int_equal(t->latency.iotlb_hit_ns, 5);
    assert_int_equal(t->latency.page_walk_ns, 700);
    assert_int_equal(t->latency.root_read_bytes, 128);
    assert_int_equal(t->latency.root_max_reads, 8);
    assert_int_equal(load_text("[host a]\nnode_id = 1\n[latency]\nroot_read_bytes = 96\n"), -EINVAL);
    assert_true(said("power of two"));
    assert_int_equal(load_text("[host a]\nnode_id = 1\n[latency]\nroot_max_reads = 0\n"), -EINVAL);
    assert_true(said("out of range"));
}

static void test_transfer(void **state)
{
    (void)state;
    struct topo_latency l = defaults(); /* 6000 MB/s, 8 reads of 512 B, root: 16 of 64 B */
    /* A posted write: the path once, then the data at the link's rate. */
    assert_int_equal(fab_lat_xfer_ns(&l, 500, 6000, false, false), 500 + 1000);
    /* A read: a round trip, then requests: 8 x 512 B per 1 us round trip is 4096 B/us, slower
     * than the link's 6000 B/us. */
    assert_int_equal(fab_lat_xfer_ns(&l, 500, 40960, true, false), 1000 + 10000);
    /* A short path: the link limits. */
    assert_int_equal(fab_lat_xfer_ns(&l, 100, 60000, true, false), 200 + 10000);
    /* Split at the root: 16 x 64 B = 1024 B per round trip. */
    assert_int_equal(fab_lat_xfer_ns(&l, 500, 10240, true, true), 1000 + 10000);
    /* A split never helps: a root that keeps more open than the device asks for. */
    l.root_max_reads = 4096;
    assert_int_equal(fab_lat_xfer_ns(&l, 500, 40960, true, true), 1000 + 10000);
    /* Writes are not split. */
    assert_int_equal(fab_lat_xfer_ns(&l, 500, 6000, false, true), 1500);
}

static void test_iommu(void **state)
{
    (void)state;
    struct topo_latency l = defaults();
    assert_int_equal(fab_lat_iommu_ns(&l, 0, false), 0);
    assert_int_equal(fab_lat_iommu_ns(&l, 1, true), 20);
    assert_int_equal(fab_lat_iommu_ns(&l, 1, false), 350);
    assert_int_equal(fab_lat_iommu_ns(&l, 2, false), 700);
}

/* root <- s1 (a chassis: link 400) <- s2; root <- s3. */
static const struct fab_hswitch tree[] = {
    { .host = 0, .parent = 0, .latency_ns = 100, .link_ns = 400 },
    { .host = 0, .parent = 1, .latency_ns = 30, .link_ns = 0 },
    { .host = 0, .parent = 0, .latency_ns = 50, .link_ns = 0 },
};

static void test_tree(void **state)
{
    (void)state;
    const uint32_t root = 7;
    assert_int_equal(fab_lat_tree_ns(tree, root, 0, 0, false), root);  /* a root port to RAM */
    assert_int_equal(fab_lat_tree_ns(tree, root, 1, 1, false), 100);   /* two below s1 */
    assert_int_equal(fab_lat_tree_ns(tree, root, 2, 1, false), 30 + 100);
    assert_int_equal(fab_lat_tree_ns(tree, root, 1, 2, false), 100 + 30);
    assert_int_equal(fab_lat_tree_ns(tree, root, 2, 2, false), 30);
    assert_int_equal(fab_lat_tree_ns(tree, root, 2, 0, false), 30 + 100 + 400 + root);
    assert_int_equal(fab_lat_tree_ns(tree, root, 2, 3, false), 30 + 100 + 400 + root + 50);
    /* Translated: through the root even inside one switch. */
    assert_int_equal(fab_lat_tree_ns(tree, root, 1, 1, true), 2 * (100 + 400) + root);
    assert_int_equal(fab_lat_tree_ns(tree, root, 0, 3, true), root + 50);
}

static void test_hostswitch_sections(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/examples/topologies/chassis.ini",
             getenv("NTBLEND_SRC") ? getenv("NTBLEND_SRC") : ".");
    assert_int_equal(load_path(path), 0);
    assert_int_equal(t->nhswitches, 2);
    const struct topo_hswitch *cha = &t->hswitches[0];
    assert_string_equal(cha->name, "cha");
    assert_int_equal(cha->host, topo_host_by_name(t, "a"));
    assert_int_equal(cha->parent, 0);
    assert_int_equal(cha->latency_ns, 132);
    /* A chassis' cable costs what an NTB crossing does: 360 + 2 x 50. */
    assert_int_equal(cha->link_ns, 460);
    assert_int_equal(t->adapters[topo_adapter_by_name(t, "a.ntb0")].at, 1);
    assert_int_equal(t->adapters[topo_adapter_by_name(t, "c.ntb0")].at, 0);
    for (uint32_t i = 0; i < t->ndevices; i++)
        assert_int_equal(t->devices[i].at, t->devices[i].host == cha->host ? 1 : 2);

    const char *base = "[host a]\nnode_id = 1\nadapters = ntb0\n[host b]\nnode_id = 2\n"
                       "[device d0]\nhost = a\ntype = accel\n";
    char text[1024];
    snprintf(text, sizeof text, "%s[hostswitch s]\nhost = a\nlatency_ns = 40\nlink_ns = 5\n"
             "devices = d0, a.ntb0\n[hostswitch s2]\nhost = a\nparent = s\n", base);
    assert_int_equal(load_text(text), 0);
    assert_int_equal(t->hswitches[0].latency_ns, 40);
    assert_int_equal(t->hswitches[0].link_ns, 5);
    assert_int_equal(t->hswitches[0].chassis, 0);
    assert_int_equal(t->hswitches[1].parent, 1);
    assert_int_equal(t->devices[0].at, 1);
    assert_int_equal(t->adapters[0].at, 1);

    struct { const char *body, *msg; } bad[] = {
        { "[hostswitch s]\ndevices = d0\n", "has no host" },
        { "[hostswitch s]\nhost = z\n", "no host named 'z'" },
        { "[hostswitch s]\nhost = b\ndevices = d0\n", "device d0 is in host a" },
        { "[hostswitch s]\nhost = a\ndevices = nope\n", "no device or adapter 'nope'" },
        { "[hostswitch s]\nhost = a\ndevices = b.ntb0\n", "adapter b.ntb0 is not in host a" },
        { "[hostswitch s]\nhost = a\nparent = t\n[hostswitch t]\nhost = a\nparent = s\n",
          "its own ancestor" },
        { "[hostswitch s]\nhost = a\nparent = q\n", "not another hostswitch of host a" },
        { "[hostswitch s]\nhost = a\ndevices = d0\n[hostswitch t]\nhost = a\ndevices = d0\n",
          "already below hostswitch s" },
        { "[hostswitch s]\nhost = a\n[hostswitch s]\nhost = a\n", "already declared" },
        { "[hostswitch s]\nhost = a\nports = 4\n", "unknown key 'ports'" },
        { "[hostswitch]\nhost = a\n", "needs a name" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(text, sizeof text, "%s%s", base, bad[i].body);
        assert_int_equal(load_text(text), -EINVAL);
        if (!said(bad[i].msg))
            fail_msg("case %zu: expected '%s' in:\n%s", i, bad[i].msg, errtext ? errtext : "");
    }
}

/* The one-way path of a device's DMA into a RAM on chassis.ini: `dev_at` where the device is,
 * through its host's NTB (at ntb_at) when lent, into the borrower's RAM through its IOMMU. */
static uint64_t chassis_path(const struct topo_latency *l, const struct fab_hswitch *sw,
                             uint32_t dev_at, bool lent, uint32_t ntb_at, bool lender_iommu)
{
    uint64_t ns = 0;
    if (lent)
        ns += fab_lat_tree_ns(sw, l->root_ns, dev_at, ntb_at, lender_iommu) + l->ntb_ns +
              2 * l->adapter_switch_ns + fab_lat_tree_ns(sw, l->root_ns, 0, 0, false);
    else
        ns += fab_lat_tree_ns(sw, l->root_ns, dev_at, 0, true);
    return ns + fab_lat_iommu_ns(l, 1 + (lent && lender_iommu), false);
}

static void test_paper_properties(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/examples/topologies/chassis.ini",
             getenv("NTBLEND_SRC") ? getenv("NTBLEND_SRC") : ".");
    assert_int_equal(load_path(path), 0);
    struct fab_hswitch sw[TOPO_MAX_HSWITCHES];
    for (uint32_t i = 0; i < t->nhswitches; i++)
        sw[i] = (struct fab_hswitch){ .host = t->hswitches[i].host,
                                      .parent = t->hswitches[i].parent,
                                      .latency_ns = t->hswitches[i].latency_ns,
                                      .link_ns = t->hswitches[i].link_ns };
    const struct topo_latency *l = &t->latency;
    /* Fig. 21: c's own NVMe in its chassis and a's, lent through a's chassis: equal paths. */
    uint64_t local = chassis_path(l, sw, 2, false, 0, false);
    uint64_t lent = chassis_path(l, sw, 1, true, 1, false);
    assert_int_equal(local, lent);
    /* Fig. 31: 1 MiB read by the lent device, the lender's IOMMU off and on. */
    uint64_t off = fab_lat_xfer_ns(l, chassis_path(l, sw, 1, true, 1, false), 1 << 20, true, false);
    uint64_t on = fab_lat_xfer_ns(l, chassis_path(l, sw, 1, true, 1, true), 1 << 20, true, true);
    assert_true(on >= 4 * off);
    /* Writes suffer the longer path only. */
    uint64_t woff = fab_lat_xfer_ns(l, chassis_path(l, sw, 1, true, 1, false), 1 << 20, false, false);
    uint64_t won = fab_lat_xfer_ns(l, chassis_path(l, sw, 1, true, 1, true), 1 << 20, false, true);
    assert_true(won > woff && won < 2 * woff);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_transfer),
        cmocka_unit_test(test_iommu),
        cmocka_unit_test(test_tree),
        cmocka_unit_test(test_hostswitch_sections),
        cmocka_unit_test(test_paper_properties),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
