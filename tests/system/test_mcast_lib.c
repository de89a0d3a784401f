/*
 * Multicast through the SmartIO library (ntblend/smartio_mcast.h), as a program uses it: a
 * process on d creates a group, subscribes b (RAM) and itself (sio_ram_alloc memory), has its
 * DMA engine write into the group (sio_mcast_map) and an NVMe lent by a read into it
 * (sio_map_mcast: the lender's agent maps the group); every member but the sending port gets
 * the data. Bad input gets the documented errors, and what a process made goes with it unless
 * kept. The parent checks the members' memory in the fabric model.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "fixture.h"
#include "fabric.h"
#include "ntblend/ntb.h"
#include "ntblend/nvme.h"
#include "ntblend/smartio_mcast.h"

#define TOPO "tests/system/topologies/mcast.ini"
#define GSIZE (64u << 10)
#define OVL (8ull << 20) /* b's overlay: RAM nothing else uses on the test's fabric */
#define NODE_B 8
#define NODE_E 20

static struct fx FX;
static struct fab *f; /* FX.f */

static int setup(void **state)
{
    static const struct fx_opts o = { .topo = TOPO, .add = { "nvme0" }, .attach = fx_attach };
    if (fx_setup(state, &FX, "mcl", &o))
        return -1;
    f = FX.f;
    return 0;
}

static bool all(const volatile uint8_t *p, size_t n, uint8_t v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v)
            return false;
    return true;
}

/* On d: the whole sequence; tells the parent (1) after the DMA write, (2) after the NVMe read. */
static void sender(void *arg)
{
    (void)arg;
    uint32_t me;
    CHECK_EQ(seg_local_node_id(&me), 0);
    int g = sio_mcast_create("lib", GSIZE, NULL, 0);
    CHECK(g >= 0);
    CHECK_EQ(sio_mcast_create("lib", GSIZE, NULL, 0), -EEXIST);
    CHECK_EQ(sio_mcast_create("odd", GSIZE + 1, NULL, 0), -EINVAL);
    CHECK_EQ(sio_mcast_create("x", GSIZE, "no-such-switch", 0), -ENOENT);
    CHECK_EQ(sio_mcast_find("lib"), g);
    /* No members yet: nothing to send to. */
    uint64_t bus;
    sio_mcast_map_t *mm;
    CHECK_EQ(sio_mcast_map((uint32_t)g, 0, 4096, &bus, &mm), -ENXIO);
    /* b's RAM, and a buffer of this host's. e has no cable to the switch. */
    volatile uint8_t *mine = sio_ram_alloc(GSIZE);
    uint64_t mine_bus;
    CHECK(mine != NULL);
    CHECK_EQ(sio_ram_addr((void *)mine, GSIZE, &mine_bus), 0);
    CHECK_EQ(sio_mcast_join((uint32_t)g, NODE_B, OVL, 0), 0);
    CHECK_EQ(sio_mcast_join((uint32_t)g, me, mine_bus, 0), 0);
    CHECK_EQ(sio_mcast_join((uint32_t)g, NODE_E, OVL, 0), -EHOSTUNREACH);
    CHECK_EQ(sio_mcast_join((uint32_t)g, NODE_B, OVL, 0), -EALREADY);
    CHECK_EQ(sio_mcast_join((uint32_t)g, 999, OVL, 0), -ENOENT);
    uint64_t at = 0;
    CHECK_EQ(sio_mcast_member((uint32_t)g, NODE_B, &at), 0);
    CHECK_EQ(at, OVL);
    CHECK_EQ(sio_mcast_member((uint32_t)g, NODE_E, NULL), -ENOENT);
    struct sio_mcast_info info;
    CHECK_EQ(sio_mcast_info((uint32_t)g, &info), 0);
    CHECK_EQ(info.members, 2);
    CHECK_EQ(info.size, GSIZE);
    CHECK(strcmp(info.name, "lib") == 0 && strcmp(info.sw, "sw0") == 0);
    CHECK_EQ(sio_mcast_list(NULL, 0), 1);

    /* The DMA engine: one copy, every member but this host (its own port). */
    CHECK_EQ(sio_mcast_map((uint32_t)g, 0, GSIZE + 4096, &bus, &mm), -EINVAL);
    CHECK_EQ(sio_mcast_map((uint32_t)g, 0, 4096, &bus, &mm), 0);
    struct ntb_dev *ntb = ntb_open(0);
    CHECK(ntb != NULL);
    uint64_t src;
    uint8_t *s = ntb_dma_alloc(ntb, 4096, &src);
    CHECK(s != NULL);
    memset(s, 0xab, 4096);
    struct ntb_dma_chan *ch = ntb_dma_chan_request(ntb);
    CHECK(ch != NULL);
    int64_t cookie = ntb_dma_submit(ch, bus, src, 4096, true);
    CHECK(cookie > 0);
    CHECK_EQ(ntb_dma_wait(ch, cookie, 5000), 0);
    /* Reading the group back with the engine: an unsupported request. */
    cookie = ntb_dma_submit(ch, src, bus, 4096, true);
    CHECK(cookie > 0);
    CHECK_EQ(ntb_dma_wait(ch, cookie, 5000), -EIO);
    CHECK(all(mine, GSIZE, 0));
    h_put(1);
    CHECK_EQ(h_get(), 1);
    CHECK_EQ(sio_mcast_remove((uint32_t)g), -EBUSY); /* this host's adapter still sends */

    /* The NVMe of a (a's adapter sends): one read, into b and into this host. */
    nvme_dev_t *d;
    nvme_qpair_t *qp;
    CHECK_EQ(nvme_open("nvme0", NULL, &d), 0);
    CHECK_EQ(nvme_qpair_create(d, NULL, &qp), 0);
    uint8_t *pat = nvme_buf_alloc(d, NULL, 4096);
    CHECK(pat != NULL);
    memset(pat, 0x3c, 4096);
    struct nvme_ns_info ns;
    CHECK_EQ(nvme_ns_info(d, 1, &ns), 0);
    uint32_t nb = 4096 / ns.block_size;
    CHECK_EQ(nvme_write(qp, 1, 0, nb, pat), 0);
    uint64_t io;
    sio_dma_t *map;
    CHECK_EQ(sio_map_mcast(nvme_sio_dev(d), (uint32_t)g, 4096, 4096, &io, &map), 0);
    CHECK_EQ(nvme_submit_dma(qp, NVME_OP_READ, 1, 0, nb, io, 0, NULL, NULL), 0);
    CHECK(nvme_qpair_wait(qp, 5000) > 0);
    CHECK(all(mine + 4096, 4096, 0x3c));
    CHECK(all(mine, 4096, 0)); /* still nothing of the DMA engine's */
    h_put(2);
    CHECK_EQ(h_get(), 2);
    CHECK_EQ(sio_unmap(map), 0);
    CHECK_EQ(sio_mcast_unmap(mm), 0);
    CHECK_EQ(sio_mcast_leave((uint32_t)g, NODE_B), 0);
    CHECK_EQ(sio_mcast_leave((uint32_t)g, NODE_B), -ENOENT);
    CHECK_EQ(sio_mcast_remove((uint32_t)g), 0);
    CHECK_EQ(sio_mcast_find("lib"), -ENOENT);
    nvme_buf_free(d, pat);
    nvme_qpair_delete(qp);
    nvme_close(d);

    /* One group kept past this process, one not. */
    CHECK(sio_mcast_create("kept", GSIZE, "sw0", SIO_MCAST_KEEP) >= 0);
    CHECK(sio_mcast_create("mine", GSIZE, NULL, 0) >= 0);
    _exit(0);
}

static void test_library(void **state)
{
    (void)state;
    uint32_t b = (uint32_t)fab_host_by_name(f, "b");
    memset(fab_ram(f, b, OVL, GSIZE), 0, GSIZE);
    struct h_proc p = h_spawn(FX.name, "d", sender, NULL);
    assert_int_equal(h_from(&p), 1);
    const uint8_t *ram = fab_ram(f, b, OVL, GSIZE);
    assert_true(all(ram, 4096, 0xab)); /* b has the DMA engine's write */
    h_to(&p, 1);
    assert_int_equal(h_from(&p), 2);
    assert_true(all(ram + 4096, 4096, 0x3c)); /* ... and the NVMe's */
    h_to(&p, 2);
    assert_int_equal(h_join(&p), 0);
    /* The process is gone: its agent gives back what it held, the kept group stays. */
    int k;
    for (k = 0; k < 500 && fab_mcast_find(f, "mine") >= 0; k++)
        usleep(10000);
    assert_int_equal(fab_mcast_find(f, "mine"), -ENOENT);
    int kept = fab_mcast_find(f, "kept");
    assert_true(kept >= 0);
    assert_int_equal(fab_mcast_remove(f, (uint32_t)kept, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_library),
    };
    return cmocka_run_group_tests(tests, setup, fx_teardown);
}
