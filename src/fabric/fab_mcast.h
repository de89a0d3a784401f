/*
 * Multicast groups of the cluster switches (fab_mcast.c): creating and removing groups, members
 * joining and leaving with their overlays, and which adapter of a host is on a group's
 * switches. The replication of a write is resolve.c's (a LUT entry that targets a group
 * resolves to FAB_REGION_MCAST; writing it writes every member). docs/multicast.md.
 */
#ifndef NTBLEND_FAB_MCAST_H
#define NTBLEND_FAB_MCAST_H

#include "fab_state.h"

#define FAB_MCAST_MIN_SIZE 4096ull
#define FAB_MCAST_MAX_SIZE (1ull << 30)

/* Create group `name` on switch `sw` (-1: the fabric's first switch) with a window of `size`
 * bytes (a power of two, FAB_MCAST_MIN_SIZE .. FAB_MCAST_MAX_SIZE), held by `owner` (0: kept
 * until removed). The group index, or -EINVAL (name empty or too long, size), -EEXIST (the
 * name is in use), -ENOSPC (FAB_MCAST_GROUPS groups exist), -EOPNOTSUPP (the fabric has no
 * switch), -ENOENT (no switch `sw`). */
int fab_mcast_create(struct fab *f, const char *name, int sw, uint64_t size, int32_t owner);
/* The index of group `name`, or -ENOENT. */
int fab_mcast_find(const struct fab *f, const char *name);
/* Remove group g: its members leave first. -ENOENT no such group, -EBUSY LUT entries still
 * target it (fab_mcast_senders), -EPERM held by another live process (owner 0: anyone's). */
int fab_mcast_remove(struct fab *f, uint32_t g, int32_t owner);
/* The adapter of `host` whose cable leads to group g's switches, or -EHOSTUNREACH (none does),
 * -ENOENT (no such group). Takes no lock: callers that must not race a remove hold ctl_lock. */
int fab_mcast_adapter(const struct fab *f, uint32_t g, uint32_t host);
/* Make `host` a member of g: the group's writes land at overlay + offset in its address map,
 * which must be one region for the whole window: RAM above the agents' mailboxes, or a memory
 * BAR of one of its functions. With the host's IOMMU on, its adapter's domain is given the
 * overlay (identity). -EINVAL overlay, -EHOSTUNREACH the host has no cable to g's switches,
 * -EALREADY a member already, -ENOENT no such group, -ENOSPC no IOMMU entry left. */
int fab_mcast_join(struct fab *f, uint32_t g, uint32_t host, uint64_t overlay, int32_t owner);
/* `host` leaves g. Returns once no write of the group can land in the overlay any more: a write
 * replicated before reaches the member whole. -ENOENT not a member, -EPERM the membership is
 * another live process's (owner 0: anyone's). */
int fab_mcast_leave(struct fab *f, uint32_t g, uint32_t host, int32_t owner);
/* A write into group m is being replicated (resolve.c): begin before reading the members,
 * end with the phase begin returned once every copy is done. */
uint32_t fab_mcast_write_begin(struct fab_mcast *m);
void fab_mcast_write_end(struct fab_mcast *m, uint32_t phase);
/* Members of g now; LUT entries that target it (senders). */
uint32_t fab_mcast_members(const struct fab *f, uint32_t g);
uint32_t fab_mcast_senders(const struct fab *f, uint32_t g);
/* Can adapter ai send at all now (its host up, its port enabled, its cable up)? */
bool fab_mcast_port_up(const struct fab *f, uint32_t ai);
/* Host `host` boots: the memberships of its memory that processes held go (the memory is
 * zero again and theirs no longer); kept ones stay, as the switches' programming does. */
void fab_mcast_host_reset(struct fab *f, uint32_t host);
/* A process died: its memberships leave, its groups go (or are kept, owner 0, while other
 * processes' LUT entries target them). */
void fab_mcast_reap(struct fab *f, int32_t pid);

#endif
