/*
 * Segments across the topologies: processes on one host (no NTB in between), hosts behind
 * cascaded switches up to three switches apart and sixty hosts on one segment
 * (examples/topologies/cluster60.ini), and ring neighbours through their left and right
 * adapters (examples/topologies/ring5.ini). Back to back is test_seg's, test_seg_dma's and
 * test_seg_intr's fabric.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>
#include <sys/resource.h>

#include "fixture.h"
#include "seg_util.h"
#include "fabric.h"
#include "ntblend/seg.h"

static struct fx FX;
#define KIB 1024u

/* A fabric from examples/topologies/FILE. */
static int up(void **state, const char *name, const char *file)
{
    char topo[128];
    snprintf(topo, sizeof topo, "examples/topologies/%s", file);
    const struct fx_opts o = { .topo = topo };
    return fx_setup(state, &FX, name, &o);
}

static int setup_pair(void **state) { return up(state, "segtopo2", "two-hosts.ini"); }
static int setup_cluster(void **state) { return up(state, "segtopo60", "cluster60.ini"); }
static int setup_ring(void **state) { return up(state, "segtoporing", "ring5.ini"); }

/* ---------------------------------------------------------------- helpers (children) */

static uint32_t my_node(void)
{
    uint32_t n = 0;
    CHECK_EQ(seg_local_node_id(&n), 0);
    return n;
}

static seg_local_t *export_on(seg_desc_t *sd, uint32_t id, size_t size, int adapter)
{
    seg_local_t *s = NULL;
    CHECK_EQ(seg_create(sd, &s, id, size), 0);
    CHECK_EQ(seg_prepare(s, adapter), 0);
    CHECK_EQ(seg_set_available(s, adapter), 0);
    return s;
}

/*
 * The connector's half of a full exchange with a segment (id `seg`, `size` bytes, the first
 * half filled by the owner with pattern `seed`) and an interrupt (`intr`) of host `node`,
 * through `adapter`: loads, stores (second half, pattern seed+1), a sequence, DMA both ways
 * and a data interrupt carrying our node id.
 */
static void exchange(seg_desc_t *sd, uint32_t node, uint32_t seg, uint32_t intr, size_t size,
                     uint32_t seed, int adapter)
{
    seg_remote_t *r;
    CHECK_EQ(seg_connect(sd, &r, node, seg, adapter, 20000), 0);
    CHECK_EQ(seg_remote_node_id(r), node);
    CHECK_EQ(seg_remote_size(r), size);
    seg_map_t *m;
    volatile uint8_t *p = seg_map_remote(r, 0, 0, 0, &m);
    CHECK(p);
    seg_seq_t *seq;
    CHECK_EQ(seg_seq_create(m, &seq), 0);
    expect_pat(p, size / 2, seed);
    fill(p + size / 2, size / 2, seed + 1);
    CHECK_EQ(seg_seq_check(seq), SEG_SEQ_OK);
    seg_seq_remove(seq);
    /* DMA: read the owner's half into a local segment, write it back over the second half...
     * then restore the second half from the local copy of our own pattern. */
    seg_local_t *l;
    CHECK_EQ(seg_create(sd, &l, SEG_ID_AUTO, size), 0);
    seg_map_t *lm;
    volatile uint8_t *lp = seg_map_local(l, 0, 0, 0, &lm);
    CHECK(lp);
    fill(lp + size / 2, size / 2, seed + 1);
    seg_dma_queue_t *q;
    CHECK_EQ(seg_dma_queue_create(sd, &q, adapter), 0);
    CHECK_EQ(seg_dma_transfer(q, l, 0, r, 0, size / 2, SEG_DMA_FROM_REMOTE), 0);
    CHECK_EQ(seg_dma_wait(q, 20000), 0);
    expect_pat(lp, size / 2, seed);
    CHECK_EQ(seg_dma_transfer(q, l, size / 2, r, size / 2, size / 2, 0), 0);
    CHECK_EQ(seg_dma_wait(q, 20000), 0);
    seg_dma_queue_remove(q);
    seg_unmap(lm);
    seg_remove(l);
    seg_rintr_t *ri;
    CHECK_EQ(seg_intr_connect(sd, &ri, node, intr, adapter, 20000), 0);
    uint32_t me = my_node();
    CHECK_EQ(seg_intr_trigger_data(ri, &me, sizeof me), 0);
    seg_intr_disconnect(ri);
    CHECK_EQ(seg_unmap(m), 0);
    CHECK_EQ(seg_disconnect(r), 0);
}

/* The owner's half: export, let the connector run `exchange`, check what it left. */
struct owner_args {
    uint32_t seg, seed;
    size_t size;
    int adapter;
};

static void exchange_owner(void *arg)
{
    const struct owner_args *o = arg;
    seg_desc_t *sd = sd_open();
    seg_local_t *s = export_on(sd, o->seg, o->size, o->adapter);
    seg_map_t *m;
    volatile uint8_t *p = seg_map_local(s, 0, 0, 0, &m);
    CHECK(p);
    fill(p, o->size / 2, o->seed);
    uint32_t iid = SEG_ID_AUTO;
    seg_intr_t *it;
    CHECK_EQ(seg_intr_create(sd, &it, &iid), 0);
    h_put(iid);
    uint32_t from = 0;
    size_t len = 0;
    CHECK_EQ(seg_intr_wait_data(it, &from, sizeof from, &len, 20000), 0);
    CHECK_EQ(len, sizeof from);
    CHECK_EQ(from, (uint32_t)h_get()); /* the connector's node id, from the parent */
    expect_pat(p, o->size / 2, o->seed);
    expect_pat(p + o->size / 2, o->size / 2, o->seed + 1);
    seg_intr_remove(it);
    seg_unmap(m);
    seg_remove(s);
    seg_close(sd);
    h_put(1);
}

struct user_args {
    uint32_t node, seg, seed;
    size_t size;
    int adapter;
};

static void exchange_user(void *arg)
{
    const struct user_args *u = arg;
    seg_desc_t *sd = sd_open();
    uint32_t intr = (uint32_t)h_get();
    exchange(sd, u->node, u->seg, intr, u->size, u->seed, u->adapter);
    seg_close(sd);
    h_put(my_node());
}

/* Run the exchange between `owner` and `user` (host names). */
static void run_exchange(const char *owner, const char *user, uint32_t owner_node, int owner_adapter,
                         int user_adapter, uint32_t seed)
{
    struct owner_args o = { .seg = 100 + seed, .seed = seed, .size = 256 * KIB,
                            .adapter = owner_adapter };
    struct user_args u = { .node = owner_node, .seg = o.seg, .seed = seed, .size = o.size,
                           .adapter = user_adapter };
    struct h_proc po = h_spawn(FX.name, owner, exchange_owner, &o);
    struct h_proc pu = h_spawn(FX.name, user, exchange_user, &u);
    h_to(&pu, h_from(&po));
    h_to(&po, h_from(&pu));
    h_from(&po);
    assert_int_equal(h_join(&pu), 0);
    assert_int_equal(h_join(&po), 0);
}

/* ---------------------------------------------------------------- one host */

static void same_host_owner(void *arg)
{
    seg_desc_t *sd = sd_open();
    seg_local_t *s = export_on(sd, 90, 256 * KIB, 0);
    seg_map_t *m;
    volatile uint8_t *p = seg_map_local(s, 0, 0, 0, &m);
    CHECK(p);
    fill(p, 128 * KIB, 51);
    /* A process may connect to its own segment: the same memory. */
    seg_remote_t *self;
    CHECK_EQ(seg_connect(sd, &self, my_node(), 90, 0, 1000), 0);
    seg_map_t *sm;
    volatile uint8_t *sp = seg_map_remote(self, 0, 0, 0, &sm);
    CHECK(sp);
    sp[5] = 0x42;
    CHECK_EQ(p[5], 0x42);
    p[5] = pat(51, 5);
    CHECK_EQ(seg_unmap(sm), 0);
    CHECK_EQ(seg_disconnect(self), 0);
    uint32_t iid = SEG_ID_AUTO;
    seg_intr_t *it;
    CHECK_EQ(seg_intr_create(sd, &it, &iid), 0);
    h_put(iid);
    CHECK_EQ(seg_intr_wait(it, 20000), 0);
    uint32_t from = 0;
    size_t len;
    CHECK_EQ(seg_intr_wait_data(it, &from, sizeof from, &len, 20000), 0);
    CHECK_EQ(from, 4);
    h_get(); /* the other process wrote the second half, also by DMA */
    expect_pat(p + 128 * KIB, 128 * KIB, 52);
    CHECK_EQ(seg_set_unavailable(s, 0), 0);
    h_put(1);
    h_get();
    CHECK_EQ(seg_unmap(m), 0);
    CHECK_EQ(seg_remove(s), 0);
    h_put(1);
    h_get();
    seg_intr_remove(it);
    seg_close(sd);
}

static void same_host_user(void *arg)
{
    seg_desc_t *sd = sd_open();
    uint32_t iid = (uint32_t)h_get();
    seg_remote_t *r;
    CHECK_EQ(seg_connect(sd, &r, 4, 90, 0, 20000), 0);
    CHECK_EQ(seg_remote_node_id(r), 4);
    CHECK_EQ(seg_remote_size(r), 256 * KIB);
    seg_map_t *m, *ro;
    volatile uint8_t *p = seg_map_remote(r, 0, 0, 0, &m);
    CHECK(p);
    expect_pat(p, 128 * KIB, 51);
    fill(p + 128 * KIB, 64 * KIB, 52);
    seg_flush();
    /* Read-only is read-only here too. */
    volatile uint8_t *o = seg_map_remote(r, 4096, 4096, SEG_MAP_READONLY, &ro);
    CHECK(o);
    CHECK_EQ(o[0], pat(51, 4096));
    CHECK(store_faults(o));
    CHECK_EQ(seg_unmap(ro), 0);
    /* No link in between: sequences never fail. */
    seg_seq_t *seq;
    CHECK_EQ(seg_seq_create(m, &seq), 0);
    CHECK_EQ(seg_seq_check(seq), SEG_SEQ_OK);
    seg_seq_remove(seq);
    /* DMA between this process's segment and the other's. */
    seg_local_t *l;
    CHECK_EQ(seg_create(sd, &l, 91, 64 * KIB), 0);
    seg_map_t *lm;
    volatile uint8_t *lp = seg_map_local(l, 0, 0, 0, &lm);
    CHECK(lp);
    for (size_t i = 0; i < 64 * KIB; i++)
        lp[i] = pat(52, 64 * KIB + i);
    seg_dma_queue_t *q;
    CHECK_EQ(seg_dma_queue_create(sd, &q, 0), 0);
    CHECK_EQ(seg_dma_transfer(q, l, 0, r, 192 * KIB, 64 * KIB, 0), 0);
    CHECK_EQ(seg_dma_transfer(q, l, 0, r, 0, 64 * KIB, SEG_DMA_FROM_REMOTE), 0);
    CHECK_EQ(seg_dma_wait(q, 20000), 0);
    expect_pat(lp, 64 * KIB, 51);
    seg_dma_queue_remove(q);
    /* Interrupts between processes of one host. */
    seg_rintr_t *ri;
    CHECK_EQ(seg_intr_connect(sd, &ri, 4, iid, 0, 20000), 0);
    CHECK_EQ(seg_intr_trigger(ri), 0);
    uint32_t me = my_node();
    CHECK_EQ(seg_intr_trigger_data(ri, &me, sizeof me), 0);
    seg_intr_disconnect(ri);
    h_put(1);
    /* Events reach connections on the owner's own host too. */
    h_get();
    CHECK_EQ(seg_wait_event(r, 20000), SEG_EVENT_UNAVAILABLE);
    h_put(1);
    h_get();
    CHECK_EQ(seg_wait_event(r, 20000), SEG_EVENT_REMOVED);
    CHECK_EQ(seg_remote_state(r), SEG_EVENT_REMOVED);
    CHECK_EQ(seg_unmap(m), 0);
    CHECK_EQ(seg_disconnect(r), 0);
    seg_unmap(lm);
    seg_remove(l);
    seg_close(sd);
    h_put(1);
}

static void test_processes_on_one_host(void **state)
{
    struct fab *f = NULL;
    assert_int_equal(fab_attach(FX.name, -1, &f), 0);
    uint32_t ai = (uint32_t)fab_adapter_by_name(f, "a.ntb0");
    uint32_t luts = fab_lut_used(f, ai);
    struct h_proc o = h_spawn(FX.name, "a", same_host_owner, NULL);
    struct h_proc u = h_spawn(FX.name, "a", same_host_user, NULL);
    h_to(&u, h_from(&o));
    h_from(&u);
    assert_int_equal(fab_lut_used(f, ai), luts); /* no window: the memory is right here */
    h_to(&o, 1);
    h_to(&u, h_from(&o));
    h_to(&o, h_from(&u));
    h_to(&u, h_from(&o));
    h_to(&o, h_from(&u));
    assert_int_equal(h_join(&u), 0);
    assert_int_equal(h_join(&o), 0);
    fab_detach(f);
}

/* ---------------------------------------------------------------- switches */

static uint32_t hops_between(struct fab *f, const char *a, const char *b)
{
    uint32_t x = (uint32_t)fab_adapter_by_name(f, a), y = (uint32_t)fab_adapter_by_name(f, b);
    uint32_t hops = 99;
    assert_true(fab_path_up(f, x, y, &hops));
    return hops;
}

static void test_switches_up_to_three_apart(void **state)
{
    struct fab *f = NULL;
    assert_int_equal(fab_attach(FX.name, -1, &f), 0);
    /* h00 and h01 share leaf switch sw1; h59 is on sw6: sw1 -> sw0 -> sw6. */
    assert_int_equal(hops_between(f, "h00.ntb0", "h01.ntb0"), 1);
    assert_int_equal(hops_between(f, "h00.ntb0", "h59.ntb0"), 3);
    fab_detach(f);
    run_exchange("h59", "h00", 240, 0, 0, 1);
    run_exchange("h00", "h59", 4, 0, 0, 3);
    run_exchange("h01", "h00", 8, 0, 0, 5);
}

/* ---------------------------------------------------------------- many hosts, one segment */

#define HOSTS 60
#define SLOT (4u * KIB)

static void shared_owner(void *arg)
{
    seg_desc_t *sd = sd_open();
    seg_local_t *s = export_on(sd, 1, HOSTS * SLOT, 0);
    seg_map_t *m;
    volatile uint8_t *p = seg_map_local(s, 0, 0, 0, &m);
    CHECK(p);
    fill(p, SLOT, 60); /* slot 0: ours, for everyone to read */
    uint32_t iid = 9;
    seg_intr_t *it;
    CHECK_EQ(seg_intr_create(sd, &it, &iid), 0);
    h_put(1);
    /* Every other host writes its slot, then triggers our interrupt. */
    for (int k = 1; k < HOSTS; k++)
        CHECK_EQ(seg_intr_wait(it, 60000), 0);
    for (uint32_t k = 1; k < HOSTS; k++)
        expect_pat(p + k * SLOT, SLOT, 4 * (k + 1)); /* node id of h<k> */
    expect_pat(p, SLOT, 60);
    CHECK_EQ(seg_set_unavailable(s, 0), 0);
    h_put(1);
    h_get();
    CHECK_EQ(seg_unmap(m), 0);
    CHECK_EQ(seg_remove(s), 0);
    h_put(1);
    h_get();
    seg_intr_remove(it);
    seg_close(sd);
}

static void shared_user(void *arg)
{
    seg_desc_t *sd = sd_open();
    uint32_t me = my_node(), k = me / 4 - 1;
    h_get();
    seg_remote_t *r;
    CHECK_EQ(seg_connect(sd, &r, 4, 1, 0, 60000), 0);
    seg_map_t *m;
    volatile uint8_t *p = seg_map_remote(r, 0, 0, 0, &m);
    CHECK(p);
    seg_seq_t *seq;
    CHECK_EQ(seg_seq_create(m, &seq), 0);
    fill(p + k * SLOT, SLOT, me);
    expect_pat(p, SLOT, 60);
    CHECK_EQ(seg_seq_check(seq), SEG_SEQ_OK);
    seg_seq_remove(seq);
    seg_rintr_t *ri;
    CHECK_EQ(seg_intr_connect(sd, &ri, 4, 9, 0, 60000), 0);
    CHECK_EQ(seg_intr_trigger(ri), 0);
    seg_intr_disconnect(ri);
    CHECK_EQ(seg_wait_event(r, 60000), SEG_EVENT_UNAVAILABLE);
    h_put(1);
    CHECK_EQ(seg_wait_event(r, 60000), SEG_EVENT_REMOVED);
    CHECK_EQ(seg_unmap(m), 0);
    CHECK_EQ(seg_disconnect(r), 0);
    seg_close(sd);
    h_put(1);
}

static void test_sixty_hosts_one_segment(void **state)
{
    static struct h_proc users[HOSTS];
    struct h_proc owner = h_spawn(FX.name, "h00", shared_owner, NULL);
    h_from(&owner);
    for (int k = 1; k < HOSTS; k++) {
        char name[8];
        snprintf(name, sizeof name, "h%02d", k);
        users[k] = h_spawn(FX.name, name, shared_user, NULL);
    }
    for (int k = 1; k < HOSTS; k++)
        h_to(&users[k], 1);
    h_from(&owner); /* all slots checked, the segment is unavailable */
    for (int k = 1; k < HOSTS; k++)
        h_from(&users[k]); /* everyone was told */
    h_to(&owner, 1);
    h_from(&owner); /* removed */
    for (int k = 1; k < HOSTS; k++)
        h_from(&users[k]);
    h_to(&owner, 1);
    for (int k = 1; k < HOSTS; k++)
        assert_int_equal(h_join(&users[k]), 0);
    assert_int_equal(h_join(&owner), 0);
}

/* ---------------------------------------------------------------- ring neighbours */

enum { LEFT = 0, RIGHT = 1 };
#define RING_A 4u
#define RING_B 8u
#define RING_C 12u
#define RING_E 20u

/* b: segment 1 on its left adapter (facing a), segment 2 only on its right (facing c). */
static void ring_b(void *arg)
{
    seg_desc_t *sd = sd_open();
    seg_local_t *s1 = export_on(sd, 1, 64 * KIB, LEFT);
    seg_local_t *s2 = export_on(sd, 2, 64 * KIB, RIGHT);
    h_put(1);
    h_get();
    seg_remove(s2);
    seg_remove(s1);
    seg_close(sd);
}

static void ring_e(void *arg)
{
    seg_desc_t *sd = sd_open();
    seg_local_t *s3 = export_on(sd, 3, 64 * KIB, RIGHT);
    h_put(1);
    h_get();
    seg_remove(s3);
    seg_close(sd);
}

static void ring_a(void *arg)
{
    seg_desc_t *sd = sd_open();
    h_get();
    seg_remote_t *rb, *re, *none;
    /* a.right is cabled to b.left, a.left to e.right; c is two hops away. */
    CHECK_EQ(seg_connect(sd, &none, RING_B, 1, LEFT, 100), -EHOSTUNREACH);
    CHECK_EQ(seg_connect(sd, &none, RING_C, 1, RIGHT, 100), -EHOSTUNREACH);
    CHECK_EQ(seg_connect(sd, &none, RING_B, 2, RIGHT, 100), -ECONNREFUSED); /* not facing us */
    CHECK_EQ(seg_connect(sd, &rb, RING_B, 1, RIGHT, 5000), 0);
    CHECK_EQ(seg_connect(sd, &re, RING_E, 3, LEFT, 5000), 0);
    seg_map_t *mb, *me;
    volatile uint8_t *pb = seg_map_remote(rb, 0, 0, 0, &mb);
    volatile uint8_t *pe = seg_map_remote(re, 0, 0, 0, &me);
    CHECK(pb && pe);
    fill(pb, 64 * KIB, 71);
    fill(pe, 64 * KIB, 72);
    expect_pat(pb, 64 * KIB, 71);
    expect_pat(pe, 64 * KIB, 72);
    seg_seq_t *sb, *se;
    CHECK_EQ(seg_seq_create(mb, &sb), 0);
    CHECK_EQ(seg_seq_create(me, &se), 0);
    h_put(1);
    h_get(); /* a-b is down: only that side is affected */
    CHECK_EQ(seg_wait_event(rb, 20000), SEG_EVENT_LOST);
    CHECK_EQ(seg_seq_check(sb), SEG_SEQ_NOT_RETRIABLE);
    CHECK_EQ(seg_seq_check(se), SEG_SEQ_OK);
    CHECK_EQ(seg_remote_state(re), SEG_EVENT_AVAILABLE);
    CHECK_EQ(seg_wait_event(re, 20), SEG_EVENT_NONE);
    fill(pe, 64 * KIB, 73);
    expect_pat(pe, 64 * KIB, 73);
    h_put(1);
    h_get(); /* back up */
    CHECK_EQ(seg_wait_event(rb, 20000), SEG_EVENT_RESTORED);
    CHECK_EQ(seg_seq_check(sb), SEG_SEQ_RETRIABLE);
    CHECK_EQ(seg_seq_start(sb), 0);
    fill(pb, 64 * KIB, 74);
    CHECK_EQ(seg_seq_check(sb), SEG_SEQ_OK);
    expect_pat(pb, 64 * KIB, 74);
    seg_seq_remove(sb);
    seg_seq_remove(se);
    seg_unmap(mb);
    seg_unmap(me);
    CHECK_EQ(seg_disconnect(rb), 0);
    CHECK_EQ(seg_disconnect(re), 0);
    seg_close(sd);
    h_put(1);
}

static void test_ring_neighbours(void **state)
{
    struct h_proc b = h_spawn(FX.name, "b", ring_b, NULL);
    struct h_proc e = h_spawn(FX.name, "e", ring_e, NULL);
    struct h_proc a = h_spawn(FX.name, "a", ring_a, NULL);
    h_from(&b);
    h_from(&e);
    h_to(&a, 1);
    h_from(&a);
    assert_int_equal(h_cli(FX.name, "link down a.right b.left >/dev/null"), 0);
    h_to(&a, 1);
    h_from(&a);
    assert_int_equal(h_cli(FX.name, "link up a.right b.left >/dev/null"), 0);
    h_to(&a, 1);
    h_from(&a);
    h_to(&b, 1);
    h_to(&e, 1);
    assert_int_equal(h_join(&a), 0);
    assert_int_equal(h_join(&b), 0);
    assert_int_equal(h_join(&e), 0);
    /* The full exchange, DMA and interrupts included, both ways round the ring. */
    run_exchange("b", "a", RING_B, LEFT, RIGHT, 7);
    run_exchange("e", "a", RING_E, RIGHT, LEFT, 9);
    run_exchange("a", "b", RING_A, RIGHT, LEFT, 11);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_processes_on_one_host, setup_pair, fx_teardown),
        cmocka_unit_test_setup_teardown(test_switches_up_to_three_apart, setup_cluster, fx_teardown),
        cmocka_unit_test_setup_teardown(test_sixty_hosts_one_segment, setup_cluster, fx_teardown),
        cmocka_unit_test_setup_teardown(test_ring_neighbours, setup_ring, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
