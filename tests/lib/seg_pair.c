/*
 * Bodies of the test helpers declared in seg_pair.h (what that header says).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include "harness.h"
#include "seg_util.h"
#include "seg_pair.h"

struct seg_pair pair_start(const char *fabric, void (*owner)(void *), void (*user)(void *))
{
    struct seg_pair p;
    p.owner = h_spawn(fabric, "b", owner, NULL);
    p.user = h_spawn(fabric, "a", user, NULL);
    h_to(&p.user, h_from(&p.owner));
    return p;
}

void pair_to_owner(struct seg_pair *p) { h_to(&p->owner, h_from(&p->user)); }

void pair_to_user(struct seg_pair *p) { h_to(&p->user, h_from(&p->owner)); }

void pair_exchange(struct seg_pair *p, int rounds)
{
    for (int i = 0; i < rounds; i++) {
        pair_to_owner(p);
        pair_to_user(p);
    }
}

void pair_join(struct seg_pair *p)
{
    assert_int_equal(h_join(&p->user), 0);
    assert_int_equal(h_join(&p->owner), 0);
}

void pair_finish(struct seg_pair *p)
{
    h_from(&p->user);
    h_to(&p->owner, 1);
    pair_join(p);
}
