/*
 * The NTB backend seam (src/ntb/ntb_backend.h): a second backend — the test double of
 * backend_double.h, over malloc'd memory, recording every call — under the segment layer,
 * SmartIO and the NTB API (scratchpads, doorbells, inbound windows). No fabric, no agent: if
 * a layer still reached around the ops table, it would crash or its data would not land where
 * the double put the memory. test_backend_pci runs the driver model over the same double.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "backend_double.h"
#include "ntblend/seg.h"
#include "ntblend/smartio.h"

/* ---------------------------------------------------------------- segments */

static void test_segments(void **state)
{
    seg_desc_t *sd;
    assert_int_equal(seg_open(&sd), 0);
    assert_int_equal(count("start"), 1);
    uint32_t node;
    assert_int_equal(seg_local_node_id(&node), 0);
    assert_int_equal(node, 4);

    /* A local segment: its memory is this host's RAM where the agent put it. */
    seg_local_t *loc;
    assert_int_equal(seg_create(sd, &loc, 7, 8192), 0);
    const struct call *c = last("agent:seg_create");
    assert_int_equal(c->a, 7);
    assert_int_equal(c->b, 8192);
    uint64_t loc_phys = D.segs[D.nsegs - 1].phys;
    assert_int_equal(D.segs[D.nsegs - 1].owner, 0);
    seg_map_t *lm;
    char *lp = seg_map_local(loc, 0, 0, 0, &lm);
    assert_non_null(lp);
    assert_ptr_equal(lp, D.ram[0] + loc_phys);

    /* Connecting to it from this host: no window, the same memory. */
    seg_remote_t *self;
    assert_int_equal(seg_connect(sd, &self, 4, 7, 0, 100), 0);
    assert_int_equal(count("window_map"), 0);
    seg_map_t *sm;
    char *sp = seg_map_remote(self, 0, 0, 0, &sm);
    assert_ptr_equal(sp, lp);

    /* A segment of host b, through a window of adapter 0. */
    seg_on_b(9, 3 * 4096);
    uint64_t b_phys = D.segs[D.nsegs - 1].phys;
    memcpy(D.ram[1] + b_phys + 4096, "from b", 7);
    seg_remote_t *r;
    assert_int_equal(seg_connect(sd, &r, 8, 9, 0, 100), 0);
    c = last("agent:seg_connect");
    assert_int_equal(c->a, 0);  /* adapter index */
    assert_int_equal(c->b, 8);  /* owner node */
    assert_int_equal(c->c, 9);  /* id */
    assert_true(c->d >= 0x10000 && c->d < RAM_SIZE); /* the event word, in our RAM */
    c = last("peer_on");
    assert_int_equal(c->a, 0);
    assert_int_equal(c->b, 1);
    assert_int_equal(count("window_map"), 1);
    c = last("window_map");
    assert_int_equal(c->a, 0);
    assert_int_equal(c->b, 1);
    assert_int_equal(c->c, b_phys);
    assert_int_equal(c->d, 3 * 4096);
    assert_int_equal(count("window_map:dma"), 1); /* segment DMA copies through it */
    assert_int_equal(seg_remote_size(r), 3 * 4096);

    seg_map_t *rm;
    char *rp = seg_map_remote(r, 4096, 4096, 0, &rm);
    assert_non_null(rp);
    c = last("window_cpu_map");
    assert_int_equal(c->a, 1);
    assert_int_equal(c->b, b_phys);
    assert_int_equal(c->d, 0); /* writable */
    assert_string_equal(rp, "from b");              /* b's store, read through the window */
    memcpy(rp + 100, "from a", 7);                  /* our store, seen in b's memory */
    assert_string_equal((char *)D.ram[1] + b_phys + 4096 + 100, "from a");
    assert_int_equal(D.ram[0][b_phys + 4096 + 100], 0); /* not in ours */

    /* A sequence over a live path checks out. */
    seg_seq_t *seq;
    assert_int_equal(seg_seq_create(rm, &seq), 0);
    assert_int_equal(seg_seq_check(seq), SEG_SEQ_OK);
    seg_seq_remove(seq);

    /* Disconnecting while mapped is refused; after unmapping, the window goes. */
    assert_int_equal(seg_disconnect(r), -EBUSY);
    assert_int_equal(count("window_unmap"), 0);
    assert_int_equal(seg_unmap(rm), 0);
    assert_int_equal(D.cpu_maps, 0);
    assert_int_equal(seg_disconnect(r), 0);
    assert_int_equal(count("window_unmap"), 1);
    c = last("window_unmap");
    assert_int_equal(c->c, b_phys);
    c = last("agent:seg_disconnect");
    assert_int_equal(c->a, 1); /* owner host */

    /* Not on b: the double's agent says so, and so does seg_connect. */
    seg_remote_t *none;
    assert_int_equal(seg_connect(sd, &none, 8, 12345, 0, 0), -ENOENT);
    /* No adapter 1 on this host. */
    assert_int_equal(seg_connect(sd, &none, 8, 9, 1, 0), -ENODEV);

    assert_int_equal(seg_unmap(sm), 0);
    assert_int_equal(seg_disconnect(self), 0);
    assert_int_equal(seg_remove(loc), -EBUSY);
    assert_int_equal(seg_unmap(lm), 0);
    assert_int_equal(seg_remove(loc), 0);
    assert_int_equal(last("agent:seg_remove")->a, 7);
    assert_int_equal(count("stop"), 0);
    seg_close(sd);
    assert_int_equal(count("stop"), 1); /* the last reference stops the backend */
}

/* ---------------------------------------------------------------- SmartIO */

static void test_smartio(void **state)
{
    assert_int_equal(sio_find("dev0"), 0);
    assert_int_equal(sio_find("nope"), -ENOENT);
    struct sio_info info[4];
    assert_int_equal(sio_list(info, 4), 1);
    assert_string_equal(info[0].host, "b");
    assert_int_equal(info[0].node_id, 8);
    assert_int_equal(info[0].vendor, 0x1234);

    sio_dev_t *d;
    assert_int_equal(sio_borrow(0, SIO_EXCLUSIVE, &d), 0);
    const struct call *c = last("agent:dev_borrow");
    assert_int_equal(c->a, 0);
    assert_int_equal(c->b, SIO_EXCLUSIVE);
    c = last("adapter_toward");
    assert_int_equal(c->a, 0);
    assert_int_equal(c->b, 1);

    /* Config space goes to the backend. */
    assert_int_equal(sio_enable(d), 0);
    c = last("cfg_write");
    assert_int_equal(c->b, 0x04);
    assert_int_equal(D.cfg[4] & 0x6, 0x6); /* memory space and bus master */

    /* BAR 0 through a window onto the lender: stores land in the BAR, and notify it. */
    sio_bar_t *bar;
    size_t size = 0;
    volatile uint8_t *regs = sio_map_bar(d, 0, &size, &bar);
    assert_non_null(regs);
    assert_int_equal(size, BAR_SIZE);
    assert_int_equal(count("bar_mem"), 0); /* not ours: not mapped locally */
    c = last("window_map");
    assert_int_equal(c->a, 0);
    assert_int_equal(c->b, 1);
    assert_int_equal(c->c, BAR_ADDR);
    assert_int_equal(c->d, BAR_SIZE);
    int notifies = count("fn_notify");
    sio_write32(bar, 0x20, 0xfeedf00d);
    uint32_t v;
    memcpy(&v, D.bar + 0x20, 4);
    assert_int_equal(v, 0xfeedf00d);
    assert_int_equal(count("fn_notify"), notifies + 1);
    memcpy(D.bar + 0x30, &(uint32_t){ 0xabcd }, 4);
    assert_int_equal(sio_read32(bar, 0x30), 0xabcd);
    int unmaps = count("window_unmap");
    assert_int_equal(sio_unmap_bar(bar), 0);
    assert_int_equal(count("window_unmap"), unmaps + 1);
    assert_int_equal(D.cpu_maps, 0);
    assert_null((void *)sio_map_bar(d, 2, NULL, &bar)); /* no BAR 2 */
    assert_int_equal(errno, EINVAL);

    /* Memory the CPU polls: here, mapped for the device by the agent. */
    volatile void *cpu;
    uint64_t io;
    sio_mem_t *m;
    assert_int_equal(sio_alloc(d, 8192, SIO_HINT_HOST_READ, &cpu, &io, &m), 0);
    assert_int_equal(sio_mem_node(m), 4);
    c = last("agent:dev_map");
    assert_int_equal(c->a & 0xffffffffu, 0); /* fn */
    assert_int_equal(c->a >> 32, 2); /* the lender's adapter of the path (1) + 1 */
    assert_int_equal(c->b, 0);   /* target host: this one */
    assert_int_equal(c->d, 2);   /* pages */
    assert_ptr_equal(cpu, D.ram[0] + c->c);
    assert_int_equal(io, IOVA_BASE + 0x10000 * (uint64_t)(D.nmaps - 1));
    /* What the device would read at io is what the CPU wrote. */
    memcpy((void *)cpu, "queue", 6);
    int k = (int)((io - IOVA_BASE) / 0x10000);
    assert_string_equal((char *)resolve(D.maps[k].host, D.maps[k].addr, 6), "queue");
    assert_int_equal(sio_free(m), 0);
    assert_int_equal(last("agent:dev_unmap")->b, (uint64_t)k + 1);

    /* Memory the device reads: at the lender, reached through a window. */
    int wins = count("window_map");
    assert_int_equal(sio_alloc(d, 4096, SIO_HINT_DEVICE_READ, &cpu, &io, &m), 0);
    assert_int_equal(sio_mem_node(m), 8);
    assert_int_equal(last("agent:seg_alloc_at")->a, 1);
    assert_int_equal(count("window_map"), wins + 1);
    c = last("agent:dev_map");
    assert_int_equal(c->b, 1); /* the lender's own memory */
    uint64_t b_phys = c->c;
    memcpy((void *)cpu, "sq entry", 9);
    assert_string_equal((char *)D.ram[1] + b_phys, "sq entry");
    assert_int_equal(sio_free(m), 0);
    assert_int_equal(count("agent:seg_free_at"), 1);
    assert_int_equal(D.cpu_maps, 0);

    assert_int_equal(sio_return(d), 0);
    assert_int_equal(last("agent:dev_return")->a, 0);
    /* sio_find and sio_list start and stop the runtime for themselves; the device held it
     * from borrow to return. */
    assert_int_equal(count("stop"), count("start"));
    assert_string_equal(D.calls[D.ncalls - 1].op, "stop");
    assert_int_equal(count("agent:other"), 0); /* nothing asked of the agent we did not model */
}

/* ---------------------------------------------------------------- the NTB API */

static void test_ntb_api(void **state)
{
    assert_int_equal(ntb_adapter_count(), 1);
    assert_null(ntb_open(1));
    struct ntb_dev *n = ntb_open(0);
    assert_non_null(n);
    assert_string_equal(ntb_name(n), "a.ntb0");
    assert_int_equal(ntb_port_number(n), 4);
    assert_int_equal(ntb_peer_port_count(n), 1);
    assert_int_equal(ntb_peer_port_number(n, 0), 8);
    assert_int_equal(ntb_peer_port_idx(n, 8), 0);
    assert_int_equal(ntb_link_is_up(n, NULL, NULL), 1);
    uint32_t peers[4];
    assert_int_equal(ntb_fabric_peers(8, peers, 4), 1);
    assert_int_equal(peers[0], 4);

    /* Scratchpads: ours and the peer's registers, as the backend keeps them. */
    assert_int_equal(ntb_spad_count(n), 4);
    assert_int_equal(ntb_spad_write(n, 1, 0x1111), 0);
    assert_int_equal(ntb_peer_spad_write(n, 0, 2, 0x2222), 0);
    assert_int_equal(D.spad[0][1], 0x1111);
    assert_int_equal(D.spad[1][2], 0x2222);
    assert_int_equal(ntb_peer_spad_read(n, 0, 2), 0x2222);
    assert_int_equal(ntb_spad_write(n, 4, 0), -EINVAL);

    /* Doorbells: ringing the peer sets its register; ours, masks and events here. */
    assert_int_equal(ntb_db_valid_mask(n), 0xff);
    assert_int_equal(ntb_peer_db_set(n, 0, 0x5), 0);
    assert_int_equal(D.db[1], 0x5);
    assert_int_equal(ntb_peer_db_set(n, 0, 0x100), -EINVAL); /* not a valid bit */
    assert_int_equal(count("peer_db_set"), 1);
    assert_int_equal(ntb_db_set(n, 0x3), 0);
    assert_int_equal(ntb_db_set_mask(n, 0x1), 0);
    assert_int_equal(ntb_db_vector_wait(n, UINT64_MAX, 0), 0x2);
    assert_int_equal(ntb_db_clear(n, 0x2), 0);
    assert_int_equal(ntb_db_read(n), 0x1);

    /* An inbound window is a translation on the peer's adapter toward this host. */
    assert_int_equal(ntb_mw_count(n, 0), 4);
    assert_int_equal(ntb_mw_set_trans(n, 0, 3, 0x20000, 0x10000), 0);
    const struct call *c = last("mw_set");
    assert_int_equal(c->a, 1);
    assert_int_equal(c->b, 3);
    assert_int_equal(c->c, 0);
    assert_int_equal(c->d, 0x20000);
    assert_int_equal(ntb_mw_set_trans(n, 0, 3, 0x20001, 0x10000), -EINVAL); /* unaligned */
    assert_int_equal(ntb_mw_clear_trans(n, 0, 3), 0);
    assert_int_equal(last("mw_clear")->a, 1);
    ntb_close(n);
    assert_int_equal(count("stop"), count("start"));
}

/* ---------------------------------------------------------------- the table's check */

static void test_ops_check(void **state)
{
    (void)state;
    const char *missing = NULL;
    assert_int_equal(ntb_backend_ops_check(&ntb_backend_emu, &missing), 0);
    assert_int_equal(ntb_backend_ops_check(&double_ops, &missing), 0);

    /* A required operation left out: refused, by name, and the backend in use stays. */
    struct ntb_backend_ops o = double_ops;
    o.window_cpu_map = NULL;
    assert_int_equal(ntb_backend_ops_check(&o, &missing), -EINVAL);
    assert_string_equal(missing, "window_cpu_map");
    assert_int_equal(ntb_backend_use(&o), -EINVAL);
    assert_ptr_equal(ntb_backend(), &ntb_backend_emu);

    /* Part of a group: refused, naming what is missing. */
    o = double_ops;
    o.db_word = NULL;
    assert_int_equal(ntb_backend_ops_check(&o, &missing), -EINVAL);
    assert_string_equal(missing, "db_word");
    o = double_ops;
    o.tree_word = NULL;
    assert_int_equal(ntb_backend_ops_check(&o, &missing), -EINVAL);
    assert_string_equal(missing, "tree_word");
    o = double_ops;
    o.adapter_info = NULL;
    assert_int_equal(ntb_backend_ops_check(&o, &missing), -EINVAL);
    assert_string_equal(missing, "adapter_info");

    /* A whole group, or an optional operation, left out: accepted. */
    o = double_ops;
    o.tree = NULL;
    o.tree_word = NULL;
    o.host_name = NULL;
    o.path_word = NULL;
    o.adapter_info = NULL, o.mw_set = NULL, o.mw_clear = NULL, o.mw_alloc = NULL;
    o.mw_cpu_map = NULL, o.link_set = NULL, o.link_word = NULL, o.db_read = NULL;
    o.db_set = NULL, o.db_clear = NULL, o.db_mask_read = NULL, o.db_mask_set = NULL;
    o.db_mask_clear = NULL, o.peer_db_set = NULL, o.db_word = NULL, o.spad_read = NULL;
    o.spad_write = NULL, o.dma_chan_get = NULL, o.dma_chan_put = NULL, o.dma_submit = NULL;
    o.dma_abort = NULL, o.dma_wait = NULL, o.dma_buf_map = NULL, o.iommu_faults = NULL;
    assert_int_equal(ntb_backend_ops_check(&o, &missing), 0);
    assert_int_equal(ntb_backend_use(&o), 0);
    assert_ptr_equal(ntb_backend(), &o);
    /* Without the NTB device, the NTB API has no adapter to open. */
    assert_null(ntb_open(0));
    assert_int_equal(ntb_backend_use(NULL), 0);
    assert_ptr_equal(ntb_backend(), &ntb_backend_emu);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_segments, double_setup, double_teardown),
        cmocka_unit_test_setup_teardown(test_smartio, double_setup, double_teardown),
        cmocka_unit_test_setup_teardown(test_ntb_api, double_setup, double_teardown),
        cmocka_unit_test(test_ops_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
