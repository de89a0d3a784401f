/*
 * A virtio-blk device (virtio 1.1 §5.2) over libntbnvme, served through vhost-user
 * (vhost_user.h): one namespace of a lent or shared NVMe, each virtqueue served by a thread of
 * its own with an NVMe queue pair of its own. The NVMe moves the data straight between the
 * namespace and guest RAM: a request's guest-physical buffers become PRPs at the device's
 * mapping of the guest's RAM, no copy in between (docs/vm.md).
 */
#ifndef NTBLEND_VBLK_H
#define NTBLEND_VBLK_H

#include <stdint.h>
#include <sys/types.h>

#include "ntblend/nvme.h"
#include "vhost_user.h"

struct vblk;

/* Open NVMe `device` (a client of its manager when one serves it, else owned) for namespace
 * nsid with up to `queues` virtqueues: 0 or -errno (nvme_errmsg() says more). */
int vblk_open(const char *device, uint32_t nsid, uint32_t queues, struct vblk **out);
nvme_dev_t *vblk_nvme(struct vblk *b);
/* Where the device reaches the guest's RAM file (offset 0), and which file that is. */
void vblk_set_ram(struct vblk *b, uint64_t ram_io, dev_t dev, ino_t ino);
const struct vhu_device *vblk_device(struct vblk *b);
/* Requests served and failed so far (all queues). */
void vblk_stats(struct vblk *b, uint64_t *done, uint64_t *failed);
void vblk_close(struct vblk *b);

#endif
