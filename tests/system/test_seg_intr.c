/*
 * The segment API's signals between two hosts back to back
 * (examples/topologies/two-hosts.ini: a = node 4, b = node 8): remote interrupts and data
 * interrupts, their bounds and overrun; sequences, which tell a connector whether its accesses
 * crossed a link failure (retry) or an owner's reboot (reconnect). The data movers are
 * test_seg_dma's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "fixture.h"
#include "seg_util.h"
#include "seg_pair.h"
#include "ntblend/seg.h"

static struct fx FX;
#define NODE_A 4u
#define NODE_B 8u
#define KIB 1024u
#define MIB (1024u * 1024u)

static const struct fx_opts FX_OPTS = { .topo = "examples/topologies/two-hosts.ini" };
static int setup(void **state) { return fx_setup(state, &FX, "segintr", &FX_OPTS); }

/* ---------------------------------------------------------------- helpers (parent) */

struct cli_job {
    const char *fab, *cmd;
    int rc;
};

static void *cli_thread(void *arg)
{
    struct cli_job *j = arg;
    j->rc = h_cli(j->fab, "%s", j->cmd);
    return NULL;
}

/* Run a CLI command that kills the application `victim` (host kill), reaping it meanwhile: the
 * fabric waits for every live process to acknowledge the change, and an unreaped child is a
 * zombie that never would. Returns the victim's exit status. */
static int cli_killing(const char *fab, const char *cmd, struct h_proc *victim)
{
    struct cli_job j = { fab, cmd, -1 };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, cli_thread, &j), 0);
    int st = h_join(victim);
    pthread_join(t, NULL);
    assert_int_equal(j.rc, 0);
    return st;
}

/* ---------------------------------------------------------------- interrupts */

static void intr_b(void *arg)
{
    seg_desc_t *sd = sd_open();
    uint32_t fixed = 5, picked = SEG_ID_AUTO, dup = 5;
    seg_intr_t *i5, *ia, *idup;
    CHECK_EQ(seg_intr_create(sd, &i5, &fixed), 0);
    CHECK_EQ(fixed, 5);
    CHECK_EQ(seg_intr_create(sd, &ia, &picked), 0);
    CHECK(picked != SEG_ID_AUTO && picked != 5);
    CHECK_EQ(seg_intr_create(sd, &idup, &dup), -EEXIST);
    CHECK_EQ(seg_intr_wait(i5, 0), -ETIMEDOUT); /* nothing yet */
    h_put(picked);
    uint32_t aid = (uint32_t)h_get(); /* a triggered i5 3 times, sent 5 data interrupts to ia */
    for (int k = 0; k < 3; k++)
        CHECK_EQ(seg_intr_wait(i5, 10000), 0);
    CHECK_EQ(seg_intr_wait(i5, 30), -ETIMEDOUT); /* one wake-up per trigger */
    char buf[SEG_INTR_DATA_MAX];
    size_t len = 0;
    for (int k = 0; k < 3; k++) {
        char want[32];
        snprintf(want, sizeof want, "message %d", k);
        CHECK_EQ(seg_intr_wait_data(ia, buf, sizeof buf, &len, 10000), 0);
        CHECK_EQ(len, strlen(want) + 1);
        CHECK_EQ(memcmp(buf, want, len), 0);
    }
    CHECK_EQ(seg_intr_wait_data(ia, buf, sizeof buf, &len, 10000), 0); /* the largest payload */
    CHECK_EQ(len, SEG_INTR_DATA_MAX);
    for (size_t k = 0; k < len; k++)
        CHECK_EQ((uint8_t)buf[k], (uint8_t)(k * 3 + 1));
    memset(buf, 0, sizeof buf);
    CHECK_EQ(seg_intr_wait_data(ia, buf, 4, &len, 10000), 0); /* truncated to what fits */
    CHECK_EQ(len, 10);
    CHECK_EQ(memcmp(buf, "0123", 4), 0);
    CHECK_EQ(buf[4], 0);
    CHECK_EQ(seg_intr_wait_data(ia, buf, sizeof buf, &len, 30), -ETIMEDOUT);
    /* The other way round: b triggers an interrupt of a. */
    seg_rintr_t *toa;
    CHECK_EQ(seg_intr_connect(sd, &toa, NODE_A, aid, 0, 5000), 0);
    CHECK_EQ(seg_intr_trigger(toa), 0);
    CHECK_EQ(seg_intr_trigger_data(toa, "from b", 7), 0);
    seg_intr_disconnect(toa);
    h_put(1);
    /* Removal: new connections fail, and the old one triggers nothing that a newer interrupt
     * (which may get the same memory) would see. */
    h_get();
    seg_intr_remove(i5);
    uint32_t fresh_id = SEG_ID_AUTO;
    seg_intr_t *fresh;
    CHECK_EQ(seg_intr_create(sd, &fresh, &fresh_id), 0);
    h_put(1);
    h_get(); /* a triggered through its stale connection */
    CHECK_EQ(seg_intr_wait(fresh, 50), -ETIMEDOUT);
    CHECK_EQ(seg_intr_wait_data(fresh, buf, sizeof buf, &len, 0), -ETIMEDOUT);
    seg_intr_remove(fresh);
    seg_intr_remove(ia);
    seg_close(sd);
    h_put(1);
}

static void intr_a(void *arg)
{
    seg_desc_t *sd = sd_open();
    uint32_t picked = (uint32_t)h_get();
    seg_rintr_t *r5, *ra, *none;
    CHECK_EQ(seg_intr_connect(sd, &r5, NODE_B, 5, 0, 5000), 0);
    CHECK_EQ(seg_intr_connect(sd, &ra, NODE_B, picked, 0, 5000), 0);
    CHECK_EQ(seg_intr_connect(sd, &none, NODE_B, 777, 0, 50), -ENOENT);
    CHECK_EQ(seg_intr_connect(sd, &none, 1000, 5, 0, 50), -EHOSTUNREACH);
    CHECK_EQ(seg_intr_connect(sd, &none, NODE_B, 5, 4, 50), -ENODEV);
    for (int k = 0; k < 3; k++)
        CHECK_EQ(seg_intr_trigger(r5), 0);
    for (int k = 0; k < 3; k++) {
        char msg[32];
        snprintf(msg, sizeof msg, "message %d", k);
        CHECK_EQ(seg_intr_trigger_data(ra, msg, strlen(msg) + 1), 0);
    }
    uint8_t big[SEG_INTR_DATA_MAX + 1];
    for (size_t k = 0; k < sizeof big; k++)
        big[k] = (uint8_t)(k * 3 + 1);
    CHECK_EQ(seg_intr_trigger_data(ra, big, sizeof big), -EINVAL);
    CHECK_EQ(seg_intr_trigger_data(ra, big, SEG_INTR_DATA_MAX), 0);
    CHECK_EQ(seg_intr_trigger_data(ra, "0123456789", 10), 0);
    /* Our own interrupt, for b to trigger. */
    uint32_t mine = SEG_ID_AUTO;
    seg_intr_t *it;
    CHECK_EQ(seg_intr_create(sd, &it, &mine), 0);
    h_put(mine);
    CHECK_EQ(seg_intr_wait(it, 10000), 0);
    char buf[16];
    size_t len;
    CHECK_EQ(seg_intr_wait_data(it, buf, sizeof buf, &len, 10000), 0);
    CHECK_EQ(len, 7);
    CHECK_EQ(strcmp(buf, "from b"), 0);
    h_put(1);
    h_get(); /* b removed interrupt 5 and created another */
    CHECK_EQ(seg_intr_connect(sd, &none, NODE_B, 5, 0, 50), -ENOENT);
    CHECK_EQ(seg_intr_trigger(r5), -ENOENT); /* stale: the interrupt is gone */
    CHECK_EQ(seg_intr_trigger_data(r5, "stale", 6), -ENOENT);
    h_put(1);
    seg_intr_disconnect(r5);
    seg_intr_disconnect(ra);
    seg_intr_remove(it);
    seg_close(sd);
}

static void test_interrupts(void **state)
{
    struct seg_pair p = pair_start(FX.name, intr_b, intr_a); /* b's automatic interrupt id */
    h_to(&p.owner, h_from(&p.user)); /* a's interrupt id; a has triggered b's by now */
    h_from(&p.owner);           /* b triggered a's */
    h_from(&p.user);           /* a got them */
    h_to(&p.owner, 1);          /* b removes interrupt 5 and creates another */
    h_from(&p.owner);
    h_to(&p.user, 1);          /* a triggers through its stale connection */
    h_from(&p.user);
    h_to(&p.owner, 1);          /* b's new interrupt saw nothing */
    h_from(&p.owner);
    pair_join(&p);
}

/* A host holds at most 1024 interrupts: one more is -ENOSPC, and a removed one's page serves
 * the next. (The pool of interrupt pages only grows, so it must be bounded.) */
static void intr_hog(void *arg)
{
    (void)arg;
    seg_desc_t *sd = sd_open();
    static seg_intr_t *its[1024];
    int n = 0;
    for (;;) {
        uint32_t id = SEG_ID_AUTO;
        seg_intr_t *it;
        int rc = seg_intr_create(sd, &it, &id);
        if (rc) {
            CHECK_EQ(rc, -ENOSPC);
            break;
        }
        CHECK(n < 1024);
        its[n++] = it;
    }
    CHECK_EQ(n, 1024);
    seg_intr_remove(its[--n]);
    uint32_t id = SEG_ID_AUTO;
    CHECK_EQ(seg_intr_create(sd, &its[n++], &id), 0);
    while (n)
        seg_intr_remove(its[--n]);
    seg_close(sd);
}

static void test_interrupts_are_bounded(void **state)
{
    struct h_proc a = h_spawn(FX.name, "a", intr_hog, NULL);
    assert_int_equal(h_join(&a), 0);
}

/* ---------------------------------------------------------------- sequences */

/* More data triggers than the owner holds: the waiter skips to the oldest payload still held
 * and continues in order, instead of stalling. Plain waits take their payload with them. */
#define OVERRUN 40
#define HELD 32 /* payloads the owner holds (include/ntblend/seg.h) */

static void overrun_owner(void *arg)
{
    seg_desc_t *sd = sd_open();
    uint32_t id = 31;
    seg_intr_t *it;
    CHECK_EQ(seg_intr_create(sd, &it, &id), 0);
    h_put(1);
    h_get(); /* OVERRUN data triggers sent */
    uint32_t v;
    size_t len;
    for (uint32_t k = OVERRUN - HELD; k < OVERRUN; k++) {
        CHECK_EQ(seg_intr_wait_data(it, &v, sizeof v, &len, 5000), 0);
        CHECK_EQ(len, sizeof v);
        CHECK_EQ(v, k);
    }
    CHECK_EQ(seg_intr_wait_data(it, &v, sizeof v, &len, 50), -ETIMEDOUT);
    h_put(1);
    h_get(); /* a plain trigger, then a data trigger: consumed in order by either wait */
    CHECK_EQ(seg_intr_wait_data(it, &v, sizeof v, &len, 5000), 0);
    CHECK_EQ(len, 0);
    CHECK_EQ(seg_intr_wait(it, 5000), 0); /* takes the data trigger, payload dropped */
    CHECK_EQ(seg_intr_wait_data(it, &v, sizeof v, &len, 50), -ETIMEDOUT);
    h_put(1);
    seg_intr_remove(it);
    seg_close(sd);
}

static void overrun_user(void *arg)
{
    seg_desc_t *sd = sd_open();
    h_get();
    seg_rintr_t *r;
    CHECK_EQ(seg_intr_connect(sd, &r, NODE_B, 31, 0, 5000), 0);
    for (uint32_t k = 0; k < OVERRUN; k++)
        CHECK_EQ(seg_intr_trigger_data(r, &k, sizeof k), 0);
    h_put(1);
    h_get();
    uint32_t b = 1001;
    CHECK_EQ(seg_intr_trigger(r), 0);
    CHECK_EQ(seg_intr_trigger_data(r, &b, sizeof b), 0);
    h_put(1);
    seg_intr_disconnect(r);
    seg_close(sd);
}

static void test_data_interrupt_overrun(void **state)
{
    struct seg_pair p = pair_start(FX.name, overrun_owner, overrun_user);
    pair_exchange(&p, 1);
    pair_to_owner(&p);
    h_from(&p.owner);
    pair_join(&p);
}

#define SEQ_SIZE (1u * MIB)
#define TRIALS 5

struct writer {
    volatile uint8_t *p;
    uint32_t seed;
    _Atomic int stop, passes;
};

/* Traffic: store the pattern over and over until told to stop. */
static void *writer_thread(void *arg)
{
    struct writer *w = arg;
    while (!atomic_load(&w->stop)) {
        fill(w->p, SEQ_SIZE, w->seed);
        seg_flush();
        atomic_fetch_add(&w->passes, 1);
    }
    return NULL;
}

static void seq_owner(void *arg)
{
    seg_desc_t *sd = sd_open();
    seg_local_t *s = export_seg(sd, 70, SEQ_SIZE);
    seg_map_t *m;
    volatile uint8_t *p = map_local(s, &m);
    seg_seq_t *local_seq;
    CHECK_EQ(seg_seq_create(m, &local_seq), 0);
    h_put(1);
    for (int t = 0; t < TRIALS; t++) {
        h_get(); /* the connector redid its transfer after the link came back */
        expect_pat(p, SEQ_SIZE, 200 + (uint32_t)t);
        h_put(1);
    }
    /* A local mapping crosses no link: its sequence never reports a failure. */
    CHECK_EQ(seg_seq_check(local_seq), SEG_SEQ_OK);
    seg_seq_remove(local_seq);
    h_get();
    seg_unmap(m);
    seg_remove(s);
    seg_close(sd);
}

static void seq_user(void *arg)
{
    seg_desc_t *sd = sd_open();
    h_get();
    seg_remote_t *r;
    CHECK_EQ(seg_connect(sd, &r, NODE_B, 70, 0, 5000), 0);
    seg_map_t *m;
    volatile uint8_t *p = seg_map_remote(r, 0, 0, 0, &m);
    CHECK(p);
    seg_seq_t *seq;
    CHECK_EQ(seg_seq_create(m, &seq), 0);
    fill(p, SEQ_SIZE, 99);
    CHECK_EQ(seg_seq_check(seq), SEG_SEQ_OK);
    for (int t = 0; t < TRIALS; t++) {
        struct writer w = { .p = p, .seed = 100 + (uint32_t)t };
        pthread_t th;
        CHECK_EQ(seg_seq_start(seq), 0);
        CHECK_EQ(pthread_create(&th, NULL, writer_thread, &w), 0);
        while (atomic_load(&w.passes) < 1)
            sched_yield();
        h_put(1); /* traffic is flowing: take the link down */
        h_get();
        CHECK_EQ(seg_wait_event(r, 10000), SEG_EVENT_LOST);
        CHECK_EQ(seg_seq_check(seq), SEG_SEQ_NOT_RETRIABLE);
        h_put(1);
        h_get(); /* the link is back */
        CHECK_EQ(seg_wait_event(r, 10000), SEG_EVENT_RESTORED);
        atomic_store(&w.stop, 1);
        CHECK_EQ(pthread_join(th, NULL), 0);
        /* The link failed and recovered since the start: the transfer must be redone. */
        CHECK_EQ(seg_seq_check(seq), SEG_SEQ_RETRIABLE);
        CHECK_EQ(seg_seq_check(seq), SEG_SEQ_RETRIABLE); /* until a new start */
        CHECK_EQ(seg_seq_start(seq), 0);
        fill(p, SEQ_SIZE, 200 + (uint32_t)t);
        CHECK_EQ(seg_seq_check(seq), SEG_SEQ_OK);
        expect_pat(p, SEQ_SIZE, 200 + (uint32_t)t); /* loads through the recovered link */
        h_put(1);
        h_get(); /* the owner found the redone data */
    }
    seg_seq_remove(seq);
    CHECK_EQ(seg_unmap(m), 0);
    CHECK_EQ(seg_disconnect(r), 0);
    seg_close(sd);
    h_put(1);
}

static void test_sequence_reports_link_failure(void **state)
{
    struct seg_pair p = pair_start(FX.name, seq_owner, seq_user);
    for (int t = 0; t < TRIALS; t++) {
        h_from(&p.user);
        assert_int_equal(h_cli(FX.name, "link down a b >/dev/null"), 0);
        h_to(&p.user, 1);
        h_from(&p.user);
        assert_int_equal(h_cli(FX.name, "link up a b >/dev/null"), 0);
        h_to(&p.user, 1);
        h_to(&p.owner, h_from(&p.user));
        h_to(&p.user, h_from(&p.owner));
    }
    h_from(&p.user);
    h_to(&p.owner, 1);
    pair_join(&p);
}

/* The owner's host crashes and boots again: the path is back, the memory is not. */
static void reboot_owner(void *arg)
{
    seg_desc_t *sd = sd_open();
    seg_local_t *s = export_seg(sd, 71, 64 * KIB);
    (void)s;
    h_put(1);
    pause(); /* dies with its host */
}

static void reboot_user(void *arg)
{
    seg_desc_t *sd = sd_open();
    h_get();
    seg_remote_t *r;
    CHECK_EQ(seg_connect(sd, &r, NODE_B, 71, 0, 5000), 0);
    seg_map_t *m;
    volatile uint8_t *p = seg_map_remote(r, 0, 0, 0, &m);
    CHECK(p);
    seg_seq_t *seq;
    CHECK_EQ(seg_seq_create(m, &seq), 0);
    p[0] = 1;
    CHECK_EQ(seg_seq_check(seq), SEG_SEQ_OK);
    h_put(1);
    h_get(); /* b was killed */
    CHECK_EQ(seg_wait_event(r, 10000), SEG_EVENT_LOST);
    CHECK_EQ(seg_remote_state(r), SEG_EVENT_LOST);
    CHECK_EQ(seg_seq_check(seq), SEG_SEQ_NOT_RETRIABLE);
    h_put(1);
    h_get(); /* b is up again */
    CHECK_EQ(seg_wait_event(r, 10000), SEG_EVENT_RESTORED);
    CHECK_EQ(seg_seq_check(seq), SEG_SEQ_NOT_RETRIABLE); /* reconnect, do not retry */
    CHECK_EQ(seg_seq_start(seq), 0);
    CHECK_EQ(seg_seq_check(seq), SEG_SEQ_OK);
    seg_remote_t *again;
    CHECK_EQ(seg_connect(sd, &again, NODE_B, 71, 0, 50), -ENOENT); /* it died with b */
    seg_seq_remove(seq);
    CHECK_EQ(seg_unmap(m), 0);
    CHECK_EQ(seg_disconnect(r), 0);
    seg_close(sd);
    h_put(1);
}

static void test_sequence_owner_reboot(void **state)
{
    struct seg_pair p = pair_start(FX.name, reboot_owner, reboot_user);
    h_from(&p.user);
    assert_int_equal(cli_killing(FX.name, "host kill b >/dev/null", &p.owner), 128 + SIGKILL);
    h_to(&p.user, 1);
    h_from(&p.user);
    assert_int_equal(h_cli(FX.name, "host start b >/dev/null"), 0);
    h_to(&p.user, 1);
    h_from(&p.user);
    assert_int_equal(h_join(&p.user), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_interrupts),
        cmocka_unit_test(test_interrupts_are_bounded),
        cmocka_unit_test(test_data_interrupt_overrun),
        cmocka_unit_test(test_sequence_reports_link_failure),
        cmocka_unit_test(test_sequence_owner_reboot),
    };
    return cmocka_run_group_tests(tests, setup, fx_teardown);
}
