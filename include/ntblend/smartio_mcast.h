/*
 * ntblend SmartIO multicast (smartio-tocs-2021 §6.5, docs/multicast.md): one write, many
 * destinations. The cluster switches hold multicast groups (as PCIe switch chips with the
 * Multicast capability do): a group has a window of addresses; a write into it leaves the
 * switch on the port of every member host, whose overlay puts it where that host wants it —
 * its RAM or a device's memory BAR (GPU-like accelerator memory). A device maps a group
 * (sio_map_mcast) and its DMA writes reach every member at once, e.g. one NVMe read whose data
 * lands in 59 hosts' memory; this host's DMA engine reaches a group through sio_mcast_map.
 *
 * What the hardware does, the API does too: reads of a group's window fail (all ones; a
 * DMA or device read returns -EIO); a member whose link is down receives nothing, the others
 * go on; a write never goes back out of the port it came in by (the sending host's own
 * membership through that adapter gets nothing). CPU stores into a group's window are NOT
 * multicast in the emulated fabric (a mapping cannot be made to store to many places at
 * once): use a device or the DMA engine.
 *
 * For applications started with `ntblend run --host H -- prog`. Functions return 0 (or an id
 * >= 0) or a negative errno. What a process creates or joins is undone when it exits, unless
 * made with SIO_MCAST_KEEP (then until sio_mcast_remove / sio_mcast_leave, or
 * `ntblend mcast remove|leave`). Every function may be called from any thread.
 */
#ifndef NTBLEND_SMARTIO_MCAST_H
#define NTBLEND_SMARTIO_MCAST_H

#include <stddef.h>
#include <stdint.h>

#include "ntblend/smartio.h"

#ifdef __cplusplus
extern "C" {
#endif

#pragma GCC visibility push(default)

#define SIO_MCAST_NAME_MAX 32   /* with the terminating NUL */
#define SIO_MCAST_GROUPS 64     /* groups the switches hold (PCIe MC_Max_Group) */
#define SIO_MCAST_MIN_SIZE 4096u
#define SIO_MCAST_MAX_SIZE (1u << 30)
#define SIO_MCAST_KEEP 1u       /* outlives this process */

struct sio_mcast_info {
    uint32_t id;
    char name[SIO_MCAST_NAME_MAX];
    char sw[32];            /* the switch it was created on (its whole cascade carries it) */
    uint64_t size;          /* its window */
    uint32_t members;       /* hosts receiving its writes */
    uint32_t senders;       /* translation entries of adapters that target it */
    uint32_t owner_pid;     /* the process holding it (on whichever host), 0: kept */
};

/** sio_mcast_create() - a group named `name` (1..31 characters) with a window of `size` bytes
 * (a power of two, SIO_MCAST_MIN_SIZE..SIO_MCAST_MAX_SIZE) on switch `sw` and the switches
 * cascaded with it (NULL: the fabric's first switch). Returns the group's id, or -EINVAL
 * (name, size), -EEXIST (the name is in use), -ENOSPC (SIO_MCAST_GROUPS groups exist),
 * -EOPNOTSUPP (the fabric has no switch: multicast is a switch's), -ENOENT (no switch sw).
 */
int sio_mcast_create(const char *name, size_t size, const char *sw, unsigned flags);
/** sio_mcast_find() - the id of group `name`, or -ENOENT. */
int sio_mcast_find(const char *name);
/** sio_mcast_info() - group `group`'s record; -ENOENT no such group. */
int sio_mcast_info(uint32_t group, struct sio_mcast_info *out);
/** sio_mcast_list() - every group; returns how many there are (copies at most max). */
int sio_mcast_list(struct sio_mcast_info *out, int max);
/** sio_mcast_remove() - remove a group; its members leave. -EBUSY while adapters still send
 * into it (unmap those first), -EPERM another live process holds it, -ENOENT. */
int sio_mcast_remove(uint32_t group);

/** sio_mcast_join() - host `node_id` receives the group's writes: offset x of the window lands
 * at bus address `addr` + x of that host — RAM it holds (sio_ram_alloc and sio_ram_addr on
 * that host; a segment) or a device's memory BAR there — for the whole window (4 KiB aligned).
 * Any host may subscribe any host, as the switches' management does. -EINVAL addr is not one
 * such region for the whole window, -EHOSTUNREACH the host has no cable to the group's
 * switches, -EALREADY a member already, -ENOENT no such group or node.
 */
int sio_mcast_join(uint32_t group, uint32_t node_id, uint64_t addr, unsigned flags);
/** sio_mcast_leave() - host `node_id` stops receiving. When it returns, no write of the group
 * lands in its memory any more; one replicated before lands whole. -ENOENT not a member,
 * -EPERM another live process joined it. */
int sio_mcast_leave(uint32_t group, uint32_t node_id);
/** sio_mcast_member() - is `node_id` a member? 0 with its overlay address in *addr (may be
 * NULL), or -ENOENT. */
int sio_mcast_member(uint32_t group, uint32_t node_id, uint64_t *addr);

/** sio_map_mcast() - the borrowed device writes into the group: the device-side I/O address of
 * [off, off + size) of the window (a translation entry of its lender's adapter targets the
 * group). Undo with sio_unmap. -ENXIO the group has no members (join hosts first), -EINVAL the
 * range is not in the window, -EHOSTUNREACH the lender has no cable to the group's switches,
 * -ENOSPC no translation entry left.
 */
int sio_map_mcast(sio_dev_t *dev, uint32_t group, size_t off, size_t size, uint64_t *ioaddr,
                  sio_dma_t **map);

typedef struct sio_mcast_map sio_mcast_map_t;
/** sio_mcast_map() - this host's DMA engine writes into the group: the bus address on this
 * host of [off, off + size) of the window, for ntb_dma_submit's destination. Errors as
 * sio_map_mcast. */
int sio_mcast_map(uint32_t group, size_t off, size_t size, uint64_t *bus, sio_mcast_map_t **map);
int sio_mcast_unmap(sio_mcast_map_t *map);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
