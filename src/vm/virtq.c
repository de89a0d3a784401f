/*
 * Split virtqueues (virtq.h): guest memory translation and the device's side of the rings.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "virtq.h"

static const struct vq_region *region_of(const struct vq_mem *m, uint64_t gpa, uint64_t len)
{
    for (uint32_t i = 0; i < m->n; i++) {
        const struct vq_region *r = &m->r[i];
        if (r->map && gpa >= r->gpa && gpa - r->gpa < r->size && len <= r->size - (gpa - r->gpa))
            return r;
    }
    return NULL;
}

void *vq_gpa(const struct vq_mem *m, uint64_t gpa, uint64_t len)
{
    const struct vq_region *r = region_of(m, gpa, len);
    return r ? r->map + (gpa - r->gpa) : NULL;
}

int vq_gpa_file(const struct vq_mem *m, uint64_t gpa, uint64_t len, uint64_t *off)
{
    const struct vq_region *r = region_of(m, gpa, len);
    if (!r || !r->guest_ram)
        return -EFAULT;
    *off = r->file_off + (gpa - r->gpa);
    return 0;
}

uint64_t vq_gpa_contig(const struct vq_mem *m, uint64_t gpa)
{
    const struct vq_region *r = region_of(m, gpa, 1);
    return r ? r->size - (gpa - r->gpa) : 0;
}

void *vq_uva(const struct vq_mem *m, uint64_t uva, uint64_t len)
{
    for (uint32_t i = 0; i < m->n; i++) {
        const struct vq_region *r = &m->r[i];
        if (r->map && uva >= r->uva && uva - r->uva < r->size && len <= r->size - (uva - r->uva))
            return r->map + (uva - r->uva);
    }
    return NULL;
}

int vq_map_rings(struct vq *q, const struct vq_mem *m)
{
    if (!q->num)
        return -EINVAL;
    q->desc = vq_uva(m, q->desc_uva, 16ull * q->num);
    q->avail = vq_uva(m, q->avail_uva, 6 + 2ull * q->num);
    q->used = vq_uva(m, q->used_uva, 6 + 8ull * q->num);
    /* Alignment virtio requires (§2.6): descriptors 16, available 2, used 4. */
    if (!q->desc || !q->avail || !q->used || ((uintptr_t)q->desc & 15) ||
        ((uintptr_t)q->avail & 1) || ((uintptr_t)q->used & 3)) {
        q->desc = NULL;
        q->avail = NULL;
        q->used = NULL;
        return -EFAULT;
    }
    return 0;
}

bool vq_pending(const struct vq *q)
{
    return atomic_load_explicit(&q->avail->idx, memory_order_acquire) != q->last_avail;
}

int vq_pop(struct vq *q, struct vq_elem *e)
{
    if (q->broken)
        return -EINVAL;
    uint16_t avail = atomic_load_explicit(&q->avail->idx, memory_order_acquire);
    if (avail == q->last_avail)
        return 0;
    if ((uint16_t)(avail - q->last_avail) > q->num)
        goto bad; /* the guest claims more entries than the queue has */
    uint16_t head = q->avail->ring[q->last_avail % q->num];
    if (head >= q->num)
        goto bad;
    e->head = head;
    e->nseg = 0;
    uint16_t i = head;
    for (;;) {
        if (e->nseg == VQ_MAX_SEGS || e->nseg == q->num)
            goto bad; /* too long, or a loop */
        struct vring_desc d = q->desc[i];
        if (d.flags & VRING_DESC_F_INDIRECT)
            goto bad; /* not offered */
        e->seg[e->nseg++] = (struct vq_seg){ .gpa = d.addr, .len = d.len,
                                             .write = d.flags & VRING_DESC_F_WRITE };
        if (!(d.flags & VRING_DESC_F_NEXT))
            break;
        if (d.next >= q->num)
            goto bad;
        i = d.next;
    }
    q->last_avail++;
    return 1;
bad:
    q->broken = true;
    return -EINVAL;
}

void vq_push(struct vq *q, uint16_t head, uint32_t len)
{
    struct vring_used_elem *u = &q->used->ring[q->used_idx % q->num];
    u->id = head;
    u->len = len;
    q->used_idx++;
    atomic_store_explicit(&q->used->idx, q->used_idx, memory_order_release);
}

void vq_notify(struct vq *q)
{
    atomic_thread_fence(memory_order_seq_cst); /* the used index before the guest's flag */
    if (q->call_fd < 0 ||
        (atomic_load_explicit(&q->avail->flags, memory_order_relaxed) & VRING_AVAIL_F_NO_INTERRUPT))
        return;
    uint64_t one = 1;
    ssize_t w = write(q->call_fd, &one, sizeof one);
    (void)w; /* a full eventfd counter already interrupts */
}

void vq_kick_enable(struct vq *q, bool on)
{
    atomic_store_explicit(&q->used->flags, on ? 0 : VRING_USED_F_NO_NOTIFY, memory_order_relaxed);
    /* Our flag before we look at the available index again (the guest does the reverse). */
    atomic_thread_fence(memory_order_seq_cst);
}
