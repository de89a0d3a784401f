/*
 * PCIe functions in the fabric model: enumeration, configuration space, BARs in the host's
 * address map (and through NTB windows from other hosts), bus mastering and MSI-X delivery,
 * and what a reboot does to them. The models behind the register BARs are tested elsewhere.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "fixture.h"
#include "fabric.h"
#include "ntblend/ntb.h"

static struct fx FX;
static const struct fx_opts FX_OPTS = {
    .topo = "examples/topologies/smartio3.ini",
    .attach = fx_attach
};
static int setup(void **state) { return fx_setup(state, &FX, "dev", &FX_OPTS); }

static void test_enumeration_and_config_space(void **state)
{
    uint32_t nvme = fx_func(&FX, "nvme0"), acc = fx_func(&FX, "accel0"), acc1 = fx_func(&FX, "accel1");
    struct fab_function *n = fab_func(FX.f, nvme), *a = fab_func(FX.f, acc);
    assert_int_equal(n->host, (uint32_t)fab_host_by_name(FX.f, "a"));
    assert_int_equal(fab_func(FX.f, acc1)->host, (uint32_t)fab_host_by_name(FX.f, "c"));
    assert_int_equal(fab_host(FX.f, n->host)->nfuncs, 2);
    /* Header: ids, class (NVMe: 01:08:02), capabilities list. */
    assert_int_equal(fab_cfg_read(FX.f, nvme, 0x00, 2), 0x8086);
    assert_int_equal(fab_cfg_read(FX.f, nvme, 0x0b, 1), 0x01);
    assert_int_equal(fab_cfg_read(FX.f, nvme, 0x0a, 1), 0x08);
    assert_int_equal(fab_cfg_read(FX.f, nvme, 0x09, 1), 0x02);
    assert_int_equal(fab_cfg_read(FX.f, acc, 0x0b, 1), 0x03);
    assert_true(fab_cfg_read(FX.f, nvme, 0x06, 2) & 0x10);
    /* Capability chain: MSI-X (33 vectors: admin + 32 queues), then PCI Express. */
    uint32_t cap = fab_cfg_read(FX.f, nvme, 0x34, 1);
    assert_int_equal(fab_cfg_read(FX.f, nvme, cap, 1), 0x11);
    assert_int_equal((fab_cfg_read(FX.f, nvme, cap + 2, 2) & 0x7ff) + 1, 33);
    uint32_t next = fab_cfg_read(FX.f, nvme, cap + 1, 1);
    assert_int_equal(fab_cfg_read(FX.f, nvme, next, 1), 0x10);
    /* BARs: 64-bit, placed in the host's device range; sizing by writing all ones. */
    uint64_t bar0 = (uint64_t)fab_cfg_read(FX.f, nvme, 0x14, 4) << 32 | (fab_cfg_read(FX.f, nvme, 0x10, 4) & ~0xfu);
    assert_int_equal(bar0, n->bar[0].addr);
    assert_true(bar0 >= FAB_DEVICE_BASE);
    assert_int_equal(fab_cfg_write(FX.f, nvme, 0x10, 4, 0xffffffffu), 0);
    assert_int_equal(fab_cfg_read(FX.f, nvme, 0x10, 4) & ~0xfu, (uint32_t)~(n->bar[0].size - 1));
    assert_int_equal(fab_cfg_write(FX.f, nvme, 0x10, 4, (uint32_t)bar0), 0);
    assert_int_equal(fab_cfg_read(FX.f, nvme, 0x10, 4) & ~0xfu, (uint32_t)bar0);
    /* Read-only fields stay; the command register takes only its writable bits. */
    fab_cfg_write(FX.f, nvme, 0x00, 2, 0x1234);
    assert_int_equal(fab_cfg_read(FX.f, nvme, 0x00, 2), 0x8086);
    fab_cfg_write(FX.f, acc, 0x04, 2, 0xffff);
    assert_int_equal(fab_cfg_read(FX.f, acc, 0x04, 2), 0x0406);
    fab_cfg_write(FX.f, acc, 0x04, 2, 0);
    /* A's accelerator memory BAR is in a's map, apart from the NVMe's registers. */
    assert_int_equal(a->bar[2].kind, FAB_BAR_MEM);
    assert_true(a->bar[2].addr >= n->bar[0].addr + n->bar[0].size || a->bar[2].addr + a->bar[2].size <= n->bar[0].addr);
    assert_int_equal(a->bar[2].addr % a->bar[2].size, 0);
}

static void test_bus_master_and_bars_in_the_map(void **state)
{
    uint32_t acc = fx_func(&FX, "accel0"), acc1 = fx_func(&FX, "accel1");
    struct fab_function *a = fab_func(FX.f, acc), *c = fab_func(FX.f, acc1);
    uint32_t ha = a->host;
    uint64_t ram = 400ull << 20;
    uint8_t msg[64];
    memset(msg, 0x3c, sizeof msg);
    memset(fab_ram(FX.f, ha, ram, 4096), 0, 4096);
    /* No bus mastering until the driver enables it. */
    assert_int_equal(fab_fn_dma_write(FX.f, acc, ram, msg, sizeof msg), -EIO);
    assert_int_equal(((uint8_t *)fab_ram(FX.f, ha, ram, 1))[0], 0);
    fab_cfg_write(FX.f, acc, 0x04, 2, FAB_CMD_MEM | FAB_CMD_BME);
    assert_int_equal(fab_fn_dma_write(FX.f, acc, ram, msg, sizeof msg), 0);
    assert_memory_equal(fab_ram(FX.f, ha, ram, sizeof msg), msg, sizeof msg);
    /* The device's own BAR is an address in its host's map: DMA into it lands in the BAR. */
    assert_int_equal(fab_fn_dma_write(FX.f, acc, a->bar[2].addr + 4096, msg, sizeof msg), 0);
    assert_memory_equal(fab_bar_mem(FX.f, acc, a->bar[2].off + 4096, sizeof msg), msg, sizeof msg);
    /* Peer to peer across the switch: a window on a's adapter onto c's accelerator memory. */
    uint32_t ad = fab_host(FX.f, ha)->adapter_first;
    struct fab_adapter *A = fab_adapter(FX.f, ad);
    int idx = fab_lut_alloc(FX.f, ad, getpid(), 0);
    assert_true(idx >= 0);
    assert_int_equal(fab_lut_set(FX.f, ad, (uint32_t)idx, c->host, c->bar[2].addr, getpid(), 0), 0);
    uint64_t win = A->bar_addr + (uint64_t)idx * A->lut_size;
    struct fab_target t;
    assert_int_equal(fab_resolve(FX.f, ha, a->rid, win + 64, 8, true, &t), 0);
    assert_int_equal(t.err, 0);
    assert_int_equal(t.region, FAB_REGION_DEVICE);
    assert_int_equal(t.fn, acc1);
    assert_int_equal(fab_fn_dma_write(FX.f, acc, win + 64, msg, sizeof msg), 0);
    assert_memory_equal(fab_bar_mem(FX.f, acc1, c->bar[2].off + 64, sizeof msg), msg, sizeof msg);
    /* Reads through the NTB need the device in the adapter's requester-ID table. */
    uint8_t back[64];
    assert_int_equal(fab_fn_dma_read(FX.f, acc, win + 64, back, sizeof back), -EACCES);
    assert_int_equal(fab_rid_add(FX.f, ad, a->rid, getpid()), 0);
    assert_int_equal(fab_fn_dma_read(FX.f, acc, win + 64, back, sizeof back), 0);
    assert_memory_equal(back, msg, sizeof msg);
    fab_reap_owner(FX.f, getpid());
    fab_cfg_write(FX.f, acc, 0x04, 2, 0);
}

/* A CPU on host b maps c's accelerator memory through its window: stores land in the BAR. */
static void cpu_mapper(void *arg)
{
    struct ntb_dev *ntb = ntb_open(0);
    CHECK(ntb);
    int widx = (int)h_get();
    volatile uint32_t *w = ntb_peer_mw_map(ntb, widx, 1);
    CHECK(w);
    w[3] = 0xfeedf00d;
    CHECK_EQ(w[3], 0xfeedf00d);
    h_put(1);
    ntb_close(ntb);
}

static void test_cpu_maps_a_remote_bar(void **state)
{
    uint32_t acc1 = fx_func(&FX, "accel1");
    struct fab_function *c = fab_func(FX.f, acc1);
    uint32_t hb = (uint32_t)fab_host_by_name(FX.f, "b");
    uint32_t ad = fab_host(FX.f, hb)->adapter_first;
    int idx = fab_lut_alloc(FX.f, ad, getpid(), 0);
    assert_true(idx >= 0);
    uint64_t lut = fab_adapter(FX.f, ad)->lut_size; /* one entry into the BAR */
    assert_int_equal(fab_lut_set(FX.f, ad, (uint32_t)idx, c->host, c->bar[2].addr + lut, getpid(), 0), 0);
    struct h_proc p = h_spawn(FX.name, "b", cpu_mapper, NULL);
    h_to(&p, (uint64_t)idx);
    h_from(&p);
    assert_int_equal(h_join(&p), 0);
    uint32_t *m = fab_bar_mem(FX.f, acc1, c->bar[2].off + lut, 16);
    assert_int_equal(m[3], 0xfeedf00d);
    fab_reap_owner(FX.f, getpid());
}

static void test_msix_delivery(void **state)
{
    uint32_t acc = fx_func(&FX, "accel0");
    struct fab_function *a = fab_func(FX.f, acc);
    uint32_t ha = a->host, hb = (uint32_t)fab_host_by_name(FX.f, "b");
    uint32_t table = fab_cfg_read(FX.f, acc, FAB_CFG_MSIX + 4, 4) & ~7u;
    uint32_t *e = fab_bar_mem(FX.f, acc, a->bar[0].off + table, 64);
    /* Entry 1: this host's MSI region, vector 42. */
    e[4] = (uint32_t)FAB_MSI_BASE;
    e[5] = 0;
    e[6] = 42;
    e[7] = 0;
    fab_cfg_write(FX.f, acc, 0x04, 2, FAB_CMD_MEM | FAB_CMD_BME);
    assert_int_equal(fab_fn_msix(FX.f, acc, 1), -ENODEV); /* MSI-X not enabled yet */
    uint32_t ctrl = fab_cfg_read(FX.f, acc, FAB_CFG_MSIX + 2, 2);
    fab_cfg_write(FX.f, acc, FAB_CFG_MSIX + 2, 2, ctrl | 0x8000);
    uint32_t seq = atomic_load(&fab_host(FX.f, ha)->msi_seq[42]);
    assert_int_equal(fab_fn_msix(FX.f, acc, 1), 0);
    assert_int_equal(atomic_load(&fab_host(FX.f, ha)->msi_seq[42]), seq + 1);
    assert_int_equal(fab_fn_msix(FX.f, acc, 9), -EINVAL);
    /* Masked: pending instead of delivered. */
    e[7] = 1;
    assert_int_equal(fab_fn_msix(FX.f, acc, 1), 0);
    assert_int_equal(atomic_load(&fab_host(FX.f, ha)->msi_seq[42]), seq + 1);
    uint32_t pba = fab_cfg_read(FX.f, acc, FAB_CFG_MSIX + 8, 4) & ~7u;
    uint64_t *pend = fab_bar_mem(FX.f, acc, a->bar[0].off + pba, 8);
    assert_true(*pend & 2);
    e[7] = 0;
    /* Entry 2: host b's MSI region, through a window on a's adapter (a borrower's vector). */
    uint32_t ad = fab_host(FX.f, ha)->adapter_first;
    struct fab_adapter *A = fab_adapter(FX.f, ad);
    int idx = fab_lut_alloc(FX.f, ad, getpid(), 0);
    assert_int_equal(fab_lut_set(FX.f, ad, (uint32_t)idx, hb, FAB_MSI_BASE & ~(A->lut_size - 1), getpid(), 0), 0);
    uint64_t win = A->bar_addr + (uint64_t)idx * A->lut_size + (FAB_MSI_BASE & (A->lut_size - 1));
    e[8] = (uint32_t)win;
    e[9] = (uint32_t)(win >> 32);
    e[10] = 7;
    e[11] = 0;
    uint32_t bseq = atomic_load(&fab_host(FX.f, hb)->msi_seq[7]);
    assert_int_equal(fab_fn_msix(FX.f, acc, 2), 0);
    assert_int_equal(atomic_load(&fab_host(FX.f, hb)->msi_seq[7]), bseq + 1);
    fab_cfg_write(FX.f, acc, FAB_CFG_MSIX + 2, 2, ctrl);
    fab_cfg_write(FX.f, acc, 0x04, 2, 0);
    fab_reap_owner(FX.f, getpid());
}

static void test_reboot_resets_functions(void **state)
{
    uint32_t acc1 = fx_func(&FX, "accel1");
    struct fab_function *c = fab_func(FX.f, acc1);
    fab_cfg_write(FX.f, acc1, 0x04, 2, FAB_CMD_MEM | FAB_CMD_BME);
    memset(fab_bar_mem(FX.f, acc1, c->bar[2].off, 4096), 0x77, 4096);
    assert_int_equal(h_cli(FX.name, "host kill c >/dev/null"), 0);
    assert_int_equal(h_cli(FX.name, "host start c >/dev/null"), 0);
    assert_int_equal(fab_cfg_read(FX.f, acc1, 0x04, 2), 0);
    assert_int_equal(((uint8_t *)fab_bar_mem(FX.f, acc1, c->bar[2].off, 1))[0], 0);
    assert_int_equal(fab_cfg_read(FX.f, acc1, 0x00, 2), 0x10de); /* still enumerated */
}

static void test_multifunction_and_sriov(void **state)
{
    struct fx sr;
    const struct fx_opts o = { .topo = "tests/system/topologies/sriov.ini", .attach = fx_attach };
    assert_int_equal(fx_up(&sr, "sriov", &o), 0);
    struct fab *f = sr.f;
    assert_int_equal(f->ctl->nfuncs, 5);
    const char *names[] = { "mf.f0", "mf.f1", "sr", "sr.vf1", "sr.vf2" };
    uint16_t rids[5];
    for (int i = 0; i < 5; i++) {
        int fn = fab_func_by_name(f, names[i]);
        assert_true(fn >= 0);
        rids[i] = fab_func(f, (uint32_t)fn)->rid;
        for (int k = 0; k < i; k++)
            assert_int_not_equal(rids[k], rids[i]); /* every function its own requester */
        assert_int_equal(atomic_load(&fab_func(f, (uint32_t)fn)->model_up), 1);
    }
    uint32_t f0 = (uint32_t)fab_func_by_name(f, "mf.f0"), pf = (uint32_t)fab_func_by_name(f, "sr");
    uint32_t vf2 = (uint32_t)fab_func_by_name(f, "sr.vf2");
    assert_int_equal(fab_cfg_read(f, f0, 0x0e, 1) & 0x80, 0x80); /* multi-function header */
    assert_int_equal(fab_func(f, vf2)->vf, 2);
    /* The PF's SR-IOV capability: TotalVFs 2, VF offset and stride. */
    assert_int_equal(fab_cfg_read(f, pf, 0x100, 2), 0x0010);
    assert_int_equal(fab_cfg_read(f, pf, 0x10e, 2), 2);
    assert_int_equal(fab_cfg_read(f, pf, 0x108, 2) & 1, 1); /* VF Enable */
    assert_int_equal(fab_cfg_read(f, vf2, 0x100, 2), 0); /* VFs have none */
    /* Each VF has BARs of its own, apart from the PF's, in b's map. */
    assert_true(fab_func(f, vf2)->bar[2].addr != fab_func(f, pf)->bar[2].addr);
    fx_down(&sr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_enumeration_and_config_space),
        cmocka_unit_test(test_bus_master_and_bars_in_the_map),
        cmocka_unit_test(test_cpu_maps_a_remote_bar),
        cmocka_unit_test(test_msix_delivery),
        cmocka_unit_test(test_reboot_resets_functions),
        cmocka_unit_test(test_multifunction_and_sriov),
    };
    return cmocka_run_group_tests(tests, setup, fx_teardown);
}
