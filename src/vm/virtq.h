/*
 * Split virtqueues as a device sees them (virtio 1.1 §2.6): the guest's memory as the
 * vhost-user front end described it (regions: guest-physical, the front end's virtual
 * addresses, where each lies in the file that backs it), taking descriptor chains from the
 * available ring and returning them on the used ring, and the notifications both ways.
 * Every address a guest hands in is checked against the regions before it is touched.
 */
#ifndef NTBLEND_VIRTQ_H
#define NTBLEND_VIRTQ_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define VQ_MAX_REGIONS 8
#define VQ_MAX_SIZE 1024   /* entries in a queue we accept */
#define VQ_MAX_SEGS 130    /* descriptors in one chain: seg_max + header + status */

#define VRING_DESC_F_NEXT 1u
#define VRING_DESC_F_WRITE 2u
#define VRING_DESC_F_INDIRECT 4u
#define VRING_USED_F_NO_NOTIFY 1u
#define VRING_AVAIL_F_NO_INTERRUPT 1u

struct vq_region {
    uint64_t gpa, size;  /* guest-physical range */
    uint64_t uva;        /* where the front end (QEMU) maps it */
    uint64_t file_off;   /* where gpa lies in the file behind it */
    uint8_t *map;        /* where this process maps gpa (NULL: not mapped) */
    void *map_base;      /* the mapping as mmap returned it (file offset 0) */
    uint64_t map_len;
    bool guest_ram;      /* the file is the VM's RAM file: devices can DMA into it */
};

struct vq_mem {
    uint32_t n;
    struct vq_region r[VQ_MAX_REGIONS];
};

/* A pointer to [gpa, gpa + len) if one region holds all of it, else NULL. */
void *vq_gpa(const struct vq_mem *m, uint64_t gpa, uint64_t len);
/* The same range's offset in the VM's RAM file (for device DMA): 0, or -EFAULT when no
 * region of guest RAM holds all of it. */
int vq_gpa_file(const struct vq_mem *m, uint64_t gpa, uint64_t len, uint64_t *off);
/* How many bytes from gpa one region holds (0: none). */
uint64_t vq_gpa_contig(const struct vq_mem *m, uint64_t gpa);
/* A pointer to the front end's virtual address range (ring addresses), else NULL. */
void *vq_uva(const struct vq_mem *m, uint64_t uva, uint64_t len);

struct vring_desc {
    uint64_t addr;
    uint32_t len;
    uint16_t flags;
    uint16_t next;
};
struct vring_avail {
    _Atomic uint16_t flags;
    _Atomic uint16_t idx;
    uint16_t ring[];
};
struct vring_used_elem {
    uint32_t id;
    uint32_t len;
};
struct vring_used {
    _Atomic uint16_t flags;
    _Atomic uint16_t idx;
    struct vring_used_elem ring[];
};

struct vq {
    uint32_t index;
    uint32_t num;                 /* entries; 0: not set */
    uint64_t desc_uva, avail_uva, used_uva;
    struct vring_desc *desc;
    struct vring_avail *avail;
    struct vring_used *used;
    uint16_t last_avail;          /* next available entry to take */
    uint16_t used_idx;            /* next used entry to fill */
    int kick_fd, call_fd;         /* eventfds, -1: none */
    bool enabled;                 /* SET_VRING_ENABLE (or no protocol features) */
    bool running;                 /* the device's I/O thread serves it */
    bool broken;                  /* the guest handed in a bad chain: served no more */
};

/* One descriptor chain, as guest-physical segments in order. */
struct vq_seg {
    uint64_t gpa;
    uint32_t len;
    bool write;                   /* device-writable */
};
struct vq_elem {
    uint16_t head;
    uint32_t nseg;
    struct vq_seg seg[VQ_MAX_SEGS];
};

/* Point the queue at its rings (addresses from SET_VRING_ADDR, through m): 0 or -EFAULT. */
int vq_map_rings(struct vq *q, const struct vq_mem *m);
/* Is an available entry waiting? */
bool vq_pending(const struct vq *q);
/* Take the next chain: 1 taken, 0 none waiting, -EINVAL a malformed chain (the queue is then
 * broken: a device may stop serving a guest that breaks the rules, virtio 1.1 §2.1.2). */
int vq_pop(struct vq *q, struct vq_elem *e);
/* Return chain `head` with `len` bytes written into it. */
void vq_push(struct vq *q, uint16_t head, uint32_t len);
/* Interrupt the guest (call eventfd) unless it asked not to be. */
void vq_notify(struct vq *q);
/* Ask the guest to kick (true) or not (false) when it makes entries available. */
void vq_kick_enable(struct vq *q, bool on);

#endif
