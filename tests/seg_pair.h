/*
 * The shape most segment tests share, on the parent's side: an owner process on host b that
 * exports something and a user process on host a that connects to it, which talk to each
 * other through the parent (each h_put of one goes on to the other). Include after cmocka.h,
 * harness.h and seg_util.h.
 */
#ifndef NTBLEND_TEST_SEG_PAIR_H
#define NTBLEND_TEST_SEG_PAIR_H

struct seg_pair {
    struct h_proc owner, user;
};

/* Start the owner on b and the user on a; the owner's first word (what it exported) goes to
 * the user. */
static inline struct seg_pair pair_start(const char *fabric, void (*owner)(void *),
                                         void (*user)(void *))
{
    struct seg_pair p;
    p.owner = h_spawn(fabric, "b", owner, NULL);
    p.user = h_spawn(fabric, "a", user, NULL);
    h_to(&p.user, h_from(&p.owner));
    return p;
}

/* The user's next word to the owner. */
static inline void pair_to_owner(struct seg_pair *p) { h_to(&p->owner, h_from(&p->user)); }
/* The owner's next word to the user. */
static inline void pair_to_user(struct seg_pair *p) { h_to(&p->user, h_from(&p->owner)); }

/* `rounds` times: the user's next word to the owner, then the owner's answer to the user. */
static inline void pair_exchange(struct seg_pair *p, int rounds)
{
    for (int i = 0; i < rounds; i++) {
        pair_to_owner(p);
        pair_to_user(p);
    }
}

/* Both must exit cleanly. */
static inline void pair_join(struct seg_pair *p)
{
    assert_int_equal(h_join(&p->user), 0);
    assert_int_equal(h_join(&p->owner), 0);
}

/* The user says it is done, the owner is told to finish, and both must exit cleanly. */
static inline void pair_finish(struct seg_pair *p)
{
    h_from(&p->user);
    h_to(&p->owner, 1);
    pair_join(p);
}

#endif
