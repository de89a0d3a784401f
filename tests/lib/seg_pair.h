/*
 * The shape most segment tests share, on the parent's side: an owner process on host b that
 * exports something and a user process on host a that connects to it, which talk to each
 * other through the parent (each h_put of one goes on to the other); a child that fails
 * fails the test (cmocka assertions).
 */
#ifndef NTBLEND_TEST_SEG_PAIR_H
#define NTBLEND_TEST_SEG_PAIR_H

#include "harness.h"

struct seg_pair {
    struct h_proc owner, user;
};

/* Start the owner on b and the user on a; the owner's first word (what it exported) goes to
 * the user. */
struct seg_pair pair_start(const char *fabric, void (*owner)(void *), void (*user)(void *));

/* The user's next word to the owner. */
void pair_to_owner(struct seg_pair *p);
/* The owner's next word to the user. */
void pair_to_user(struct seg_pair *p);

/* `rounds` times: the user's next word to the owner, then the owner's answer to the user. */
void pair_exchange(struct seg_pair *p, int rounds);

/* Both must exit cleanly. */
void pair_join(struct seg_pair *p);

/* The user says it is done, the owner is told to finish, and both must exit cleanly. */
void pair_finish(struct seg_pair *p);

#endif
