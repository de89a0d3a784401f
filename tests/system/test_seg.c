/*
 * The shared-memory segment API (include/ntblend/seg.h) between two hosts back to back
 * (examples/topologies/two-hosts.ini: a = node 4, b = node 8): descriptors and node ids, local
 * segments (created or attached), connecting with its errors and timeouts, mappings (remote,
 * local, read-only), events, stale-mapping safety after remove, and the LUT limit with an owner
 * whose IOMMU is on (tests/system/topologies/iommu-pair.ini).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>
#include <sys/resource.h>

#include "fixture.h"
#include "seg_util.h"
#include "seg_pair.h"
#include "fabric.h"
#include "ntblend/ntb.h"
#include "ntblend/seg.h"

static struct fx FX;
#define NODE_A 4u
#define NODE_B 8u
#define MIB (1024u * 1024u)
#define ATT_SIZE (4u * MIB) /* a whole LUT entry: see test_iommu_owner_and_lut_limit */

static const struct fx_opts FX_OPTS = { .topo = "examples/topologies/two-hosts.ini" };
static int setup(void **state) { return fx_setup(state, &FX, "seg", &FX_OPTS); }

/* ---------------------------------------------------------------- helpers (parent) */

static struct fab *attach(void)
{
    struct fab *f = NULL;
    assert_int_equal(fab_attach(FX.name, -1, &f), 0);
    return f;
}

static uint32_t lut_used(const char *adapter)
{
    struct fab *f = attach();
    int ai = fab_adapter_by_name(f, adapter);
    assert_true(ai >= 0);
    uint32_t n = fab_lut_used(f, (uint32_t)ai);
    fab_detach(f);
    return n;
}

/* ---------------------------------------------------------------- descriptors, local segments */

static void local_app(void *arg)
{
    uint32_t node = 0;
    CHECK_EQ(seg_local_node_id(&node), 0);
    CHECK_EQ(node, NODE_A);
    seg_desc_t *sd = sd_open();

    /* Explicit and automatic ids. */
    seg_local_t *s7, *s7b, *auto1, *auto2;
    CHECK_EQ(seg_create(sd, &s7, 7, 64 * 1024), 0);
    CHECK_EQ(seg_local_id(s7), 7);
    CHECK_EQ(seg_local_size(s7), 64 * 1024);
    CHECK_EQ(seg_create(sd, &s7b, 7, 4096), -EEXIST);
    CHECK_EQ(seg_create(sd, &auto1, SEG_ID_AUTO, 4096), 0);
    CHECK_EQ(seg_create(sd, &auto2, SEG_ID_AUTO, 4096), 0);
    CHECK(seg_local_id(auto1) != SEG_ID_AUTO && seg_local_id(auto1) != 7);
    CHECK(seg_local_id(auto2) != SEG_ID_AUTO && seg_local_id(auto2) != 7);
    CHECK(seg_local_id(auto1) != seg_local_id(auto2));
    CHECK_EQ(seg_create(sd, &s7b, 9, 0), -EINVAL);
    CHECK_EQ(seg_create(sd, NULL, 9, 4096), -EINVAL);

    /* Prepare and availability: only on adapters this host has, only once prepared. */
    CHECK_EQ(seg_set_available(s7, 0), -EPROTO);
    CHECK_EQ(seg_prepare(s7, 3), -ENODEV);
    CHECK_EQ(seg_prepare(s7, 0), 0);
    CHECK_EQ(seg_set_available(s7, 0), 0);
    CHECK_EQ(seg_set_unavailable(s7, 0), 0);
    CHECK_EQ(seg_set_available(s7, 0), 0);

    /* New memory reads zero; a local mapping is the segment's memory. */
    seg_map_t *m1, *m2, *bad;
    uint8_t *p = seg_map_local(s7, 0, 0, 0, &m1);
    CHECK(p);
    expect_byte(p, 64 * 1024, 0);
    fill(p, 64 * 1024, 1);
    uint8_t *q = seg_map_local(s7, 4096, 8192, 0, &m2);
    CHECK(q);
    CHECK_EQ(memcmp(q, p + 4096, 8192), 0);
    errno = 0;
    CHECK(seg_map_local(s7, 60 * 1024, 8192, 0, &bad) == NULL && errno == EINVAL);
    CHECK(seg_map_local(s7, 128 * 1024, 0, 0, &bad) == NULL && errno == EINVAL);
    CHECK(seg_map_local(s7, 0, 4096, 0x80, &bad) == NULL && errno == EINVAL);
    CHECK_EQ(seg_unmap(m2), 0);
    CHECK_EQ(seg_unmap(m1), 0);

    /* Read-only local mapping: loads work, a store faults. */
    seg_map_t *ro;
    volatile uint8_t *r = seg_map_local(s7, 0, 4096, SEG_MAP_READONLY, &ro);
    CHECK(r);
    CHECK_EQ(r[100], pat(1, 100));
    CHECK(store_faults(r + 100));
    CHECK_EQ(seg_unmap(ro), 0);

    /* Attach an existing DMA-able buffer: the segment is that memory. */
    struct ntb_dev *ntb = ntb_open(0);
    CHECK(ntb);
    uint64_t bus;
    uint8_t *buf = ntb_dma_alloc(ntb, 256 * 1024, &bus);
    CHECK(buf);
    fill(buf, 256 * 1024, 2);
    seg_local_t *att;
    CHECK_EQ(seg_create_attached(sd, &att, 30, 0, 4096), -EINVAL);
    CHECK_EQ(seg_create_attached(sd, &att, 30, 200ull * MIB, 4096), -ENOENT); /* not ours */
    CHECK_EQ(seg_create_attached(sd, &att, 30, bus, 256 * 1024), 0);
    CHECK_EQ(seg_local_id(att), 30);
    CHECK_EQ(seg_local_size(att), 256 * 1024);
    seg_map_t *am;
    uint8_t *ap = seg_map_local(att, 0, 0, 0, &am);
    CHECK(ap);
    expect_pat(ap, 256 * 1024, 2);
    ap[77] = 0xee;
    CHECK_EQ(buf[77], 0xee);
    CHECK_EQ(seg_unmap(am), 0);

    /* Remove: the id is free again. */
    CHECK_EQ(seg_remove(s7), 0);
    CHECK_EQ(seg_remove(NULL), -EINVAL);
    CHECK_EQ(seg_create(sd, &s7, 7, 4096), 0);
    CHECK_EQ(seg_remove(s7), 0);
    CHECK_EQ(seg_remove(auto1), 0);
    CHECK_EQ(seg_remove(auto2), 0);
    CHECK_EQ(seg_remove(att), 0);
    ntb_close(ntb);

    /* Errors come with a sentence that says what to do. */
    CHECK(strstr(seg_strerror(-ENOENT), "segment"));
    CHECK(strstr(seg_strerror(-ECONNREFUSED), "available"));
    CHECK(strstr(seg_strerror(-ENOSPC), "LUT"));
    CHECK(strstr(seg_strerror(-EPROTO), "prepare"));
    CHECK(strstr(seg_strerror(-EBUSY), "unmap"));
    seg_close(sd);
}

static void test_local_segments(void **state)
{
    struct h_proc a = h_spawn(FX.name, "a", local_app, NULL);
    assert_int_equal(h_join(&a), 0);
}

/* ---------------------------------------------------------------- connecting */

static void connect_owner(void *arg)
{
    seg_desc_t *sd = sd_open();
    seg_local_t *hidden, *open;
    CHECK_EQ(seg_create(sd, &hidden, 1, 64 * 1024), 0);
    CHECK_EQ(seg_prepare(hidden, 0), 0); /* prepared, not available */
    open = export_seg(sd, 2, 64 * 1024);
    h_put(1);
    h_get(); /* the connector saw the errors: make segment 1 available */
    CHECK_EQ(seg_set_available(hidden, 0), 0);
    h_put(1);
    h_get(); /* the connector is waiting for segment 3: create it late */
    seg_local_t *late = export_seg(sd, 3, 8192);
    h_get(); /* done */
    seg_remove(late);
    seg_remove(open);
    seg_remove(hidden);
    seg_close(sd);
}

static void connect_user(void *arg)
{
    seg_desc_t *sd = sd_open();
    seg_remote_t *r = NULL;
    h_get();
    /* Not available, unknown id, unknown node, no such adapter: clear errors, no waiting
     * forever. */
    CHECK_EQ(seg_connect(sd, &r, NODE_B, 1, 0, 100), -ECONNREFUSED);
    CHECK_EQ(seg_connect(sd, &r, NODE_B, 99, 0, 100), -ENOENT);
    CHECK_EQ(seg_connect(sd, &r, NODE_B, 99, 0, 0), -ENOENT);
    CHECK_EQ(seg_connect(sd, &r, 1000, 2, 0, 100), -EHOSTUNREACH);
    CHECK_EQ(seg_connect(sd, &r, NODE_B, 2, 3, 100), -ENODEV);
    CHECK_EQ(seg_connect(sd, &r, NODE_B, 2, -1, 100), -EINVAL);
    CHECK(r == NULL);
    h_put(1);
    h_get(); /* now available */
    seg_remote_t *r1, *r2;
    CHECK_EQ(seg_connect(sd, &r1, NODE_B, 1, 0, 1000), 0);
    CHECK_EQ(seg_connect(sd, &r2, NODE_B, 2, 0, 1000), 0);
    CHECK_EQ(seg_remote_node_id(r1), NODE_B);
    CHECK_EQ(seg_remote_size(r1), 64 * 1024);
    CHECK_EQ(seg_remote_state(r1), SEG_EVENT_AVAILABLE);
    h_put(1); /* parent counts our LUT entries */
    h_get();
    /* A connect waits (up to its timeout) for a segment being set up right now. */
    h_put(1);
    seg_remote_t *r3;
    CHECK_EQ(seg_connect(sd, &r3, NODE_B, 3, 0, 20000), 0);
    CHECK_EQ(seg_remote_size(r3), 8192);
    CHECK_EQ(seg_disconnect(r3), 0);
    CHECK_EQ(seg_disconnect(r2), 0);
    CHECK_EQ(seg_disconnect(r1), 0);
    CHECK_EQ(seg_disconnect(NULL), -EINVAL);
    h_put(1); /* parent: LUT entries are back */
    h_get();
    seg_close(sd);
}

static void test_connect_errors_and_timeouts(void **state)
{
    assert_int_equal(h_cli(FX.name, "agent-ping a b >/dev/null"), 0); /* the agents' own entries */
    uint32_t before = lut_used("a.ntb0");
    struct seg_pair p = pair_start(FX.name, connect_owner, connect_user);
    h_from(&p.user); /* a saw the errors */
    h_to(&p.owner, 1);
    h_to(&p.user, h_from(&p.owner));
    h_from(&p.user); /* a connected twice */
    /* Each connection holds one LUT entry on the connecting side (64 KiB fits one entry). */
    assert_int_equal(lut_used("a.ntb0"), before + 2);
    h_to(&p.user, 1);
    h_from(&p.user); /* a is about to wait for segment 3 */
    h_to(&p.owner, 1);
    h_from(&p.user); /* a connected to it and disconnected everything */
    assert_int_equal(lut_used("a.ntb0"), before);
    h_to(&p.user, 1);
    h_to(&p.owner, 1);
    pair_join(&p);
}

/* ---------------------------------------------------------------- mappings */

#define MAP_SIZE (256u * 1024u)

static void map_owner(void *arg)
{
    seg_desc_t *sd = sd_open();
    seg_local_t *s = export_seg(sd, 40, MAP_SIZE);
    seg_map_t *m;
    volatile uint8_t *p = seg_map_local(s, 0, 0, 0, &m);
    CHECK(p);
    fill(p, MAP_SIZE / 2, 3);
    seg_flush();
    h_put(1);
    h_get(); /* the connector wrote the second half */
    expect_pat(p + MAP_SIZE / 2, MAP_SIZE / 2, 4);
    expect_pat(p, MAP_SIZE / 2, 3);
    CHECK_EQ(p[0], pat(3, 0)); /* the read-only mapping did not write */
    owner_finish(sd, s, m);
}

static void map_user(void *arg)
{
    seg_desc_t *sd = sd_open();
    seg_remote_t *r;
    h_get();
    CHECK_EQ(seg_connect(sd, &r, NODE_B, 40, 0, 5000), 0);
    seg_map_t *whole, *part, *ro, *bad;
    volatile uint8_t *w = seg_map_remote(r, 0, 0, 0, &whole);
    CHECK(w);
    /* Loads reach the owner's memory... */
    expect_pat(w, MAP_SIZE / 2, 3);
    /* ...and so do stores, ordered by the barrier and made visible by the flush. */
    fill(w + MAP_SIZE / 2, MAP_SIZE / 2 - 1, 4);
    seg_store_barrier();
    w[MAP_SIZE - 1] = pat(4, MAP_SIZE / 2 - 1);
    seg_flush();
    /* A partial mapping sees the same bytes at its offset. */
    volatile uint8_t *q = seg_map_remote(r, 4096, 8192, 0, &part);
    CHECK(q);
    CHECK(q[0] == w[4096] && q[8191] == w[4096 + 8191]);
    CHECK_EQ(seg_unmap(part), 0);
    /* Read-only: loads work, a store faults and changes nothing. */
    volatile uint8_t *o = seg_map_remote(r, 0, 4096, SEG_MAP_READONLY, &ro);
    CHECK(o);
    CHECK_EQ(o[0], pat(3, 0));
    CHECK(store_faults(o));
    CHECK_EQ(seg_unmap(ro), 0);
    /* Out of range or unknown flags. */
    errno = 0;
    CHECK(seg_map_remote(r, MAP_SIZE, 0, 0, &bad) == NULL && errno == EINVAL);
    CHECK(seg_map_remote(r, MAP_SIZE - 4096, 8192, 0, &bad) == NULL && errno == EINVAL);
    CHECK(seg_map_remote(r, 0, 4096, 0x80, &bad) == NULL && errno == EINVAL);
    CHECK_EQ(seg_unmap(NULL), -EINVAL);
    h_put(1);
    h_get(); /* owner checked */
    /* A connection in use by a mapping is not torn down under it. */
    CHECK_EQ(seg_disconnect(r), -EBUSY);
    CHECK_EQ(seg_unmap(whole), 0);
    CHECK_EQ(seg_disconnect(r), 0);
    seg_close(sd);
    h_put(1);
}

static void test_remote_and_readonly_mappings(void **state)
{
    struct seg_pair p = pair_start(FX.name, map_owner, map_user);
    pair_exchange(&p, 1);
    pair_finish(&p);
}

/* ---------------------------------------------------------------- events */

enum { EV_UNAVAIL = 1, EV_AVAIL, EV_LINK_DOWN, EV_LINK_UP, EV_REMOVE };

static void event_owner(void *arg)
{
    seg_desc_t *sd = sd_open();
    seg_local_t *s = export_seg(sd, 50, 4096);
    h_put(1);
    for (;;) {
        uint64_t cmd = h_get();
        if (cmd == EV_UNAVAIL)
            CHECK_EQ(seg_set_unavailable(s, 0), 0);
        else if (cmd == EV_AVAIL)
            CHECK_EQ(seg_set_available(s, 0), 0);
        else if (cmd == EV_REMOVE) {
            CHECK_EQ(seg_remove(s), 0);
            h_put(1);
            break;
        }
        h_put(1);
    }
    h_get();
    seg_close(sd);
}

static void event_user(void *arg)
{
    seg_desc_t *sd = sd_open();
    seg_remote_t *r, *again;
    h_get();
    CHECK_EQ(seg_connect(sd, &r, NODE_B, 50, 0, 5000), 0);
    CHECK_EQ(seg_wait_event(r, 20), SEG_EVENT_NONE); /* nothing happened: a timeout */
    CHECK_EQ(seg_remote_state(r), SEG_EVENT_AVAILABLE);
    h_put(1);
    CHECK_EQ(h_get(), EV_UNAVAIL);
    CHECK_EQ(seg_wait_event(r, 10000), SEG_EVENT_UNAVAILABLE);
    CHECK_EQ(seg_remote_state(r), SEG_EVENT_UNAVAILABLE);
    CHECK_EQ(seg_connect(sd, &again, NODE_B, 50, 0, 50), -ECONNREFUSED);
    h_put(1);
    CHECK_EQ(h_get(), EV_AVAIL);
    CHECK_EQ(seg_wait_event(r, 10000), SEG_EVENT_AVAILABLE);
    CHECK_EQ(seg_remote_state(r), SEG_EVENT_AVAILABLE);
    h_put(1);
    CHECK_EQ(h_get(), EV_LINK_DOWN);
    CHECK_EQ(seg_wait_event(r, 10000), SEG_EVENT_LOST);
    CHECK_EQ(seg_remote_state(r), SEG_EVENT_LOST);
    h_put(1);
    CHECK_EQ(h_get(), EV_LINK_UP);
    CHECK_EQ(seg_wait_event(r, 10000), SEG_EVENT_RESTORED);
    CHECK_EQ(seg_remote_state(r), SEG_EVENT_AVAILABLE);
    h_put(1);
    CHECK_EQ(h_get(), EV_REMOVE);
    CHECK_EQ(seg_wait_event(r, 10000), SEG_EVENT_REMOVED);
    CHECK_EQ(seg_remote_state(r), SEG_EVENT_REMOVED);
    CHECK_EQ(seg_wait_event(r, 20), SEG_EVENT_NONE);
    CHECK_EQ(seg_disconnect(r), 0);
    h_put(1);
    seg_close(sd);
}

static void test_events(void **state)
{
    struct seg_pair p = pair_start(FX.name, event_owner, event_user);
    h_from(&p.user);
    for (uint64_t ev = EV_UNAVAIL; ev <= EV_REMOVE; ev++) {
        if (ev == EV_LINK_DOWN)
            assert_int_equal(h_cli(FX.name, "link down a b >/dev/null"), 0);
        else if (ev == EV_LINK_UP)
            assert_int_equal(h_cli(FX.name, "link up a b >/dev/null"), 0);
        else {
            h_to(&p.owner, ev);
            h_from(&p.owner);
        }
        h_to(&p.user, ev);
        h_from(&p.user);
    }
    h_to(&p.owner, 1);
    pair_join(&p);
}

/* ---------------------------------------------------------------- stale mappings */

#define STALE_SIZE (1u * MIB)

static void stale_owner(void *arg)
{
    seg_desc_t *sd = sd_open();
    seg_local_t *old = export_seg(sd, 60, STALE_SIZE);
    seg_map_t *om;
    volatile uint8_t *op = seg_map_local(old, 0, 0, 0, &om);
    CHECK(op);
    h_put(1);
    h_get(); /* connected and mapped */
    CHECK_EQ(seg_remove(old), -EBUSY); /* mapped here: its memory must not be reused */
    CHECK_EQ(seg_unmap(om), 0);
    CHECK_EQ(seg_remove(old), 0);
    /* The same id, and another, while the old one is still mapped remotely. */
    seg_local_t *same = export_seg(sd, 60, STALE_SIZE);
    seg_local_t *other = export_seg(sd, SEG_ID_AUTO, STALE_SIZE);
    seg_map_t *sm, *xm;
    volatile uint8_t *sp = seg_map_local(same, 0, 0, 0, &sm);
    volatile uint8_t *xp = seg_map_local(other, 0, 0, 0, &xm);
    CHECK(sp && xp);
    h_put(1);
    h_get(); /* the connector wrote through its stale mapping */
    expect_byte(sp, STALE_SIZE, 0);
    expect_byte(xp, STALE_SIZE, 0); /* the stale writes landed in neither new segment */
    h_put(1);
    h_get(); /* the connector wrote the new segment, then dropped the old connection */
    expect_pat(sp, STALE_SIZE, 6);
    expect_byte(xp, STALE_SIZE, 0);
    /* The old memory may be handed out again now: it comes back clean. */
    seg_local_t *fresh[4];
    for (int i = 0; i < 4; i++) {
        fresh[i] = export_seg(sd, SEG_ID_AUTO, STALE_SIZE);
        seg_map_t *fm;
        volatile uint8_t *fp = seg_map_local(fresh[i], 0, 0, 0, &fm);
        CHECK(fp);
        expect_byte(fp, STALE_SIZE, 0);
        seg_unmap(fm);
    }
    h_put(1);
    h_get();
    for (int i = 0; i < 4; i++)
        seg_remove(fresh[i]);
    seg_unmap(sm);
    seg_unmap(xm);
    seg_remove(same);
    seg_remove(other);
    seg_close(sd);
}

static void stale_user(void *arg)
{
    seg_desc_t *sd = sd_open();
    seg_remote_t *old, *cur;
    h_get();
    CHECK_EQ(seg_connect(sd, &old, NODE_B, 60, 0, 5000), 0);
    seg_map_t *om, *cm;
    volatile uint8_t *op = seg_map_remote(old, 0, 0, 0, &om);
    CHECK(op);
    h_put(1);
    h_get(); /* removed, and new segments exist */
    CHECK_EQ(seg_wait_event(old, 10000), SEG_EVENT_REMOVED);
    fill(op, STALE_SIZE, 5); /* a stale writer */
    seg_flush();
    expect_pat(op, STALE_SIZE, 5); /* it lands in the old, quarantined memory, still mapped */
    h_put(1);
    h_get();
    /* Connecting to the id now reaches the new segment, clean. */
    CHECK_EQ(seg_connect(sd, &cur, NODE_B, 60, 0, 5000), 0);
    volatile uint8_t *cp = seg_map_remote(cur, 0, 0, 0, &cm);
    CHECK(cp);
    expect_byte(cp, STALE_SIZE, 0);
    fill(cp, STALE_SIZE, 6);
    seg_flush();
    CHECK_EQ(seg_unmap(om), 0);
    CHECK_EQ(seg_disconnect(old), 0);
    h_put(1);
    h_get();
    CHECK_EQ(seg_unmap(cm), 0);
    CHECK_EQ(seg_disconnect(cur), 0);
    h_put(1);
    seg_close(sd);
}

static void test_stale_mapping_after_remove(void **state)
{
    struct seg_pair p = pair_start(FX.name, stale_owner, stale_user);
    pair_exchange(&p, 2);
    pair_to_owner(&p);
    h_from(&p.owner);
    h_to(&p.user, 1);
    h_from(&p.user);
    h_to(&p.owner, 1);
    pair_join(&p);
}

/* A removed segment is gone for new connections, even while old ones hold its memory. */
static void removed_owner(void *arg)
{
    seg_desc_t *sd = sd_open();
    seg_local_t *s = export_seg(sd, 61, 4096);
    h_put(1);
    h_get();
    CHECK_EQ(seg_remove(s), 0);
    h_put(1);
    h_get();
    seg_close(sd);
}

static void removed_user(void *arg)
{
    seg_desc_t *sd = sd_open();
    seg_remote_t *r, *again;
    h_get();
    CHECK_EQ(seg_connect(sd, &r, NODE_B, 61, 0, 5000), 0);
    h_put(1);
    h_get();
    CHECK_EQ(seg_wait_event(r, 10000), SEG_EVENT_REMOVED);
    CHECK_EQ(seg_connect(sd, &again, NODE_B, 61, 0, 50), -ENOENT);
    CHECK_EQ(seg_disconnect(r), 0);
    CHECK_EQ(seg_connect(sd, &again, NODE_B, 61, 0, 0), -ENOENT);
    h_put(1);
    seg_close(sd);
}

static void test_removed_segment_cannot_be_connected(void **state)
{
    struct seg_pair p = pair_start(FX.name, removed_owner, removed_user);
    pair_exchange(&p, 1);
    pair_finish(&p);
}

/* ---------------------------------------------------------------- owner's IOMMU, LUT limit */

/* iommu-pair.ini: b's IOMMU is on; 16 LUT entries of 4 MiB per adapter. */
static void iommu_owner(void *arg)
{
    seg_desc_t *sd = sd_open();
    struct ntb_dev *ntb = ntb_open(0);
    CHECK(ntb);
    uint64_t bus;
    uint8_t *buf = ntb_dma_alloc(ntb, ATT_SIZE, &bus);
    CHECK(buf);
    seg_local_t *made = export_seg(sd, 1, 64 * 1024), *att, *big1, *big2, *small[16];
    CHECK_EQ(seg_create_attached(sd, &att, 2, bus, ATT_SIZE), 0);
    CHECK_EQ(seg_prepare(att, 0), 0);
    CHECK_EQ(seg_set_available(att, 0), 0);
    big1 = export_seg(sd, 3, 32 * MIB);
    big2 = export_seg(sd, 4, 32 * MIB);
    for (int i = 0; i < 16; i++)
        small[i] = export_seg(sd, 10 + (uint32_t)i, 4096);
    uint32_t iid = 5;
    seg_intr_t *it;
    CHECK_EQ(seg_intr_create(sd, &it, &iid), 0);
    seg_map_t *m;
    volatile uint8_t *p = seg_map_local(made, 0, 0, 0, &m);
    CHECK(p);
    h_put(1);
    h_get(); /* the connector wrote both */
    expect_pat(p, 64 * 1024, 7);
    expect_pat(buf, ATT_SIZE, 8);
    h_put(1);
    h_get();
    seg_unmap(m);
    seg_intr_remove(it);
    for (int i = 0; i < 16; i++)
        seg_remove(small[i]);
    seg_remove(big2);
    seg_remove(big1);
    seg_remove(att);
    seg_remove(made);
    ntb_close(ntb);
    seg_close(sd);
}

static void iommu_user(void *arg)
{
    seg_desc_t *sd = sd_open();
    h_get();
    seg_remote_t *made, *att, *big1, *big2, *small[16];
    seg_map_t *m1, *m2;
    CHECK_EQ(seg_connect(sd, &made, NODE_B, 1, 0, 5000), 0);
    CHECK_EQ(seg_connect(sd, &att, NODE_B, 2, 0, 5000), 0);
    CHECK_EQ(seg_remote_size(att), ATT_SIZE);
    volatile uint8_t *p1 = seg_map_remote(made, 0, 0, 0, &m1);
    volatile uint8_t *p2 = seg_map_remote(att, 0, 0, 0, &m2);
    CHECK(p1 && p2);
    fill(p1, 64 * 1024, 7);
    fill(p2, ATT_SIZE, 8);
    seg_flush();
    expect_pat(p1, 64 * 1024, 7); /* and read back through the owner's IOMMU */
    h_put(1);
    h_get();
    CHECK_EQ(seg_unmap(m1), 0);
    CHECK_EQ(seg_unmap(m2), 0);
    /* 16 entries: the agent's mailbox, two small ones, 8 for a 32 MiB segment, and then the
     * second 32 MiB segment does not fit: a clean -ENOSPC, nothing leaked. */
    CHECK_EQ(seg_connect(sd, &big1, NODE_B, 3, 0, 5000), 0);
    CHECK_EQ(seg_connect(sd, &big2, NODE_B, 4, 0, 5000), -ENOSPC);
    int n = 0, rc;
    while ((rc = seg_connect(sd, &small[n], NODE_B, 10 + (uint32_t)n, 0, 5000)) == 0)
        n++;
    CHECK_EQ(rc, -ENOSPC);
    CHECK_EQ(n, 16 - 1 - 2 - 8);
    /* Interrupt connections need an entry too. */
    seg_rintr_t *ri;
    CHECK_EQ(seg_intr_connect(sd, &ri, NODE_B, 5, 0, 5000), -ENOSPC);
    /* Freeing entries makes room again. */
    CHECK_EQ(seg_disconnect(big1), 0);
    CHECK_EQ(seg_connect(sd, &big2, NODE_B, 4, 0, 5000), 0);
    CHECK_EQ(seg_intr_connect(sd, &ri, NODE_B, 5, 0, 5000), -ENOSPC);
    CHECK_EQ(seg_disconnect(small[0]), 0);
    CHECK_EQ(seg_intr_connect(sd, &ri, NODE_B, 5, 0, 5000), 0);
    CHECK_EQ(seg_intr_trigger(ri), 0);
    seg_intr_disconnect(ri);
    for (int i = 1; i < n; i++)
        CHECK_EQ(seg_disconnect(small[i]), 0);
    CHECK_EQ(seg_disconnect(big2), 0);
    CHECK_EQ(seg_disconnect(att), 0);
    CHECK_EQ(seg_disconnect(made), 0);
    h_put(1);
    seg_close(sd);
}

static struct fx FX_IOMMU;
static const struct fx_opts IOMMU_OPTS = { .topo = "tests/system/topologies/iommu-pair.ini" };
static int setup_iommu(void **state)
{
    return fx_setup(state, &FX_IOMMU, "segiommu", &IOMMU_OPTS);
}

static void test_iommu_owner_and_lut_limit(void **state)
{
    const char *fab = FX_IOMMU.name;
    struct fab *f = NULL;
    assert_int_equal(fab_attach(fab, -1, &f), 0);
    uint32_t b = (uint32_t)fab_host_by_name(f, "b");
    uint32_t ai = (uint32_t)fab_adapter_by_name(f, "a.ntb0");
    assert_int_equal(fab_host(f, b)->iommu, 1);
    assert_int_equal(h_cli(fab, "agent-ping a b >/dev/null"), 0); /* the mailbox entry */
    uint32_t base = fab_lut_used(f, ai);
    uint64_t faults = atomic_load(&fab_host(f, b)->fault_count);
    struct h_proc ob = h_spawn(fab, "b", iommu_owner, NULL);
    struct h_proc ua = h_spawn(fab, "a", iommu_user, NULL);
    h_to(&ua, h_from(&ob));
    h_from(&ua);
    /* The owner's agent mapped the segments for inbound traffic: nothing faulted. (The
     * attached buffer is a whole LUT entry: resolving a window entry that reaches past a
     * mapping records a fault although nothing accessed it.) */
    for (uint64_t i = faults; i < atomic_load(&fab_host(f, b)->fault_count); i++) {
        struct fab_fault *fl = &fab_fault_ring(f, b)[i % FAB_FAULT_RING];
        fprintf(stderr, "fault: requester %#x address %#llx write %d reason %d\n", fl->rid,
                (unsigned long long)fl->addr, fl->write, fl->reason);
    }
    assert_int_equal(atomic_load(&fab_host(f, b)->fault_count), faults);
    assert_int_equal(fab_lut_used(f, ai), base + 2);
    h_to(&ob, 1);
    h_from(&ob);
    h_to(&ua, 1);
    h_from(&ua);
    assert_int_equal(fab_lut_used(f, ai), base);
    h_to(&ob, 1);
    assert_int_equal(h_join(&ua), 0);
    assert_int_equal(h_join(&ob), 0);
    fab_detach(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_local_segments),
        cmocka_unit_test(test_connect_errors_and_timeouts),
        cmocka_unit_test(test_remote_and_readonly_mappings),
        cmocka_unit_test(test_events),
        cmocka_unit_test(test_stale_mapping_after_remove),
        cmocka_unit_test(test_removed_segment_cannot_be_connected),
        cmocka_unit_test_setup_teardown(test_iommu_owner_and_lut_limit, setup_iommu, fx_teardown),
    };
    return cmocka_run_group_tests(tests, setup, fx_teardown);
}
