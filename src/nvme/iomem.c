/*
 * Memory the device reaches: pools (nvme_mem_t) of 4 KiB pages, either allocated through the
 * backend (placed locally or near the device) or wrapped around the caller's mapping, with a
 * first-fit page allocator for queues and data buffers; and the translation of a buffer
 * address to the device's address that every I/O does (under a read lock, so pools can come
 * and go while other threads do I/O).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nvme_int.h"

#define PAGE 4096u
#define CONT UINT32_MAX /* run[]: a page inside an allocation */
#define DEFAULT_CHUNK (1u << 20)

nvme_mem_t *nvl_mem_new(nvme_dev_t *d, const struct nvl_dma *dma, bool owned, bool listed)
{
    nvme_mem_t *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->dev = d;
    m->dma = *dma;
    m->owned = owned;
    m->npages = (uint32_t)(dma->size / PAGE);
    m->run = calloc(m->npages ? m->npages : 1, sizeof *m->run);
    if (!m->run) {
        free(m);
        return NULL;
    }
    if (listed) {
        m->listed = true;
        pthread_rwlock_wrlock(&d->mem_lock);
        m->next = d->mems;
        d->mems = m;
        pthread_rwlock_unlock(&d->mem_lock);
    }
    return m;
}

void nvl_mem_destroy(nvme_mem_t *m)
{
    nvme_dev_t *d = m->dev;
    if (m->listed) {
        pthread_rwlock_wrlock(&d->mem_lock);
        for (nvme_mem_t **p = &d->mems; *p; p = &(*p)->next)
            if (*p == m) {
                *p = m->next;
                break;
            }
        pthread_rwlock_unlock(&d->mem_lock);
    }
    if (m->owned)
        d->ops->dma_free(d->ctx, &m->dma);
    free(m->run);
    free(m);
}

int nvl_mem_take(nvme_mem_t *m, size_t size, struct nvl_dma *out)
{
    uint32_t want = (uint32_t)((size + PAGE - 1) / PAGE);
    if (!want || size > (size_t)m->npages * PAGE)
        return -ENOMEM;
    for (uint32_t i = 0, run = 0; i < m->npages; i++) {
        run = m->run[i] ? 0 : run + 1;
        if (run < want)
            continue;
        uint32_t at = i + 1 - want;
        m->run[at] = want;
        for (uint32_t j = at + 1; j <= i; j++)
            m->run[j] = CONT;
        out->cpu = m->dma.cpu + (size_t)at * PAGE;
        out->io = m->dma.io + (uint64_t)at * PAGE;
        out->size = (size_t)want * PAGE;
        out->handle = NULL;
        memset((void *)out->cpu, 0, out->size);
        m->users++;
        return 0;
    }
    return -ENOMEM;
}

void nvl_mem_put(nvme_mem_t *m, const struct nvl_dma *part)
{
    size_t at = (size_t)(part->cpu - m->dma.cpu) / PAGE;
    if (at >= m->npages || !m->run[at] || m->run[at] == CONT)
        return;
    uint32_t n = m->run[at];
    for (uint32_t j = 0; j < n; j++)
        m->run[at + j] = 0;
    m->users--;
}

int nvl_mem_find(nvme_dev_t *d, const void *p, size_t len, uint64_t *io)
{
    const volatile uint8_t *b = p;
    int rc = -EFAULT;
    pthread_rwlock_rdlock(&d->mem_lock);
    for (nvme_mem_t *m = d->mems; m; m = m->next) {
        if (b < m->dma.cpu || b >= m->dma.cpu + m->dma.size)
            continue;
        size_t off = (size_t)(b - m->dma.cpu);
        if (len <= m->dma.size - off) {
            *io = m->dma.io + off;
            rc = 0;
        }
        break;
    }
    pthread_rwlock_unlock(&d->mem_lock);
    return rc;
}

int nvl_mem_xlate(nvme_dev_t *d, uint64_t io, int from, int to, uint64_t *out)
{
    if (from == to) {
        *out = io;
        return 0;
    }
    int rc = -EFAULT;
    pthread_rwlock_rdlock(&d->mem_lock);
    for (nvme_mem_t *m = d->mems; m; m = m->next) {
        if (!m->dma.io_alt)
            continue;
        uint64_t src = from ? m->dma.io_alt : m->dma.io, dst = to ? m->dma.io_alt : m->dma.io;
        if (io >= src && io - src < m->dma.size) {
            *out = dst + (io - src);
            rc = 0;
            break;
        }
    }
    pthread_rwlock_unlock(&d->mem_lock);
    return rc;
}

int nvl_mem_get(nvme_dev_t *d, nvme_mem_t *from, enum nvme_place where, size_t size,
                struct nvl_dma *out, nvme_mem_t **pool)
{
    *pool = NULL;
    if (from) {
        if (from->dev != d)
            return -EINVAL;
        int rc = nvl_mem_take(from, size, out);
        if (!rc)
            *pool = from;
        return rc;
    }
    size = (size + PAGE - 1) & ~(size_t)(PAGE - 1);
    int rc = d->ops->dma_alloc(d->ctx, size, where, out);
    if (!rc)
        memset((void *)out->cpu, 0, out->size);
    return rc;
}

void nvl_mem_release(nvme_dev_t *d, nvme_mem_t *pool, struct nvl_dma *part)
{
    if (!part->cpu)
        return;
    if (pool)
        nvl_mem_put(pool, part);
    else
        d->ops->dma_free(d->ctx, part);
    memset(part, 0, sizeof *part);
}

/* ---------------------------------------------------------------- public */

nvme_mem_t *nvme_mem_alloc(nvme_dev_t *d, size_t size, enum nvme_place where)
{
    if (!d || !size || (where != NVME_PLACE_LOCAL && where != NVME_PLACE_DEVICE)) {
        errno = EINVAL;
        nvl_fail(-EINVAL, "nvme_mem_alloc: needs a device, a size and NVME_PLACE_LOCAL or "
                          "NVME_PLACE_DEVICE");
        return NULL;
    }
    struct nvl_dma dma;
    size = (size + PAGE - 1) & ~(size_t)(PAGE - 1);
    int rc = d->ops->dma_alloc(d->ctx, size, where, &dma);
    if (rc) {
        errno = -rc;
        nvl_fail(rc, "%s: cannot allocate %zu bytes %s for the device: %s", d->name, size,
                 where == NVME_PLACE_LOCAL ? "in this host" : "in the device's host",
                 rc == -ENOMEM ? "that host is out of RAM (raise ram = in the topology file)"
                               : strerror(-rc));
        return NULL;
    }
    pthread_mutex_lock(&d->lock);
    nvme_mem_t *m = nvl_mem_new(d, &dma, true, true);
    pthread_mutex_unlock(&d->lock);
    if (!m) {
        d->ops->dma_free(d->ctx, &dma);
        errno = ENOMEM;
    }
    return m;
}

nvme_mem_t *nvme_mem_wrap(nvme_dev_t *d, volatile void *cpu, uint64_t ioaddr, size_t size)
{
    if (!d || !cpu || size < PAGE || (ioaddr & (PAGE - 1))) {
        errno = EINVAL;
        nvl_fail(-EINVAL, "nvme_mem_wrap: needs at least 4 KiB at a 4 KiB-aligned device "
                          "address (ioaddr %#llx, %zu bytes)",
                 (unsigned long long)ioaddr, size);
        return NULL;
    }
    struct nvl_dma dma = { .cpu = cpu, .io = ioaddr, .size = size & ~(size_t)(PAGE - 1) };
    pthread_mutex_lock(&d->lock);
    nvme_mem_t *m = nvl_mem_new(d, &dma, false, true);
    pthread_mutex_unlock(&d->lock);
    if (!m)
        errno = ENOMEM;
    return m;
}

nvme_mem_t *nvme_dev_mem(nvme_dev_t *d) { return d ? d->user_mem : NULL; }

int nvme_mem_free(nvme_mem_t *m)
{
    if (!m)
        return -EINVAL;
    nvme_dev_t *d = m->dev;
    if (m->internal || m == d->user_mem)
        return nvl_fail(-EINVAL, "nvme_mem_free: this memory belongs to the device handle "
                                 "(nvme_close frees it)");
    pthread_mutex_lock(&d->lock);
    if (m->users) {
        pthread_mutex_unlock(&d->lock);
        return nvl_fail(-EBUSY, "nvme_mem_free: %u buffers or queues are still in this "
                                "memory: free them (nvme_buf_free, nvme_qpair_delete) first",
                        m->users);
    }
    nvl_mem_destroy(m);
    pthread_mutex_unlock(&d->lock);
    return 0;
}

void *nvme_buf_alloc(nvme_dev_t *d, nvme_mem_t *m, size_t size)
{
    if (!d || !size || (m && m->dev != d)) {
        errno = EINVAL;
        nvl_fail(-EINVAL, "nvme_buf_alloc: needs a size, and memory of this device");
        return NULL;
    }
    struct nvl_dma part;
    int rc = -ENOMEM;
    pthread_mutex_lock(&d->lock);
    if (m) {
        rc = nvl_mem_take(m, size, &part);
    } else {
        for (nvme_mem_t *p = d->mems; p && rc; p = p->next)
            if (p->internal)
                rc = nvl_mem_take(p, size, &part);
        if (rc) {
            /* A new chunk of this host's RAM for buffers. */
            size_t chunk = (size + PAGE - 1) & ~(size_t)(PAGE - 1);
            struct nvl_dma dma;
            if (chunk < DEFAULT_CHUNK)
                chunk = DEFAULT_CHUNK;
            rc = d->ops->dma_alloc(d->ctx, chunk, NVME_PLACE_LOCAL, &dma);
            if (!rc) {
                nvme_mem_t *p = nvl_mem_new(d, &dma, true, true);
                if (!p) {
                    d->ops->dma_free(d->ctx, &dma);
                    rc = -ENOMEM;
                } else {
                    p->internal = true;
                    rc = nvl_mem_take(p, size, &part);
                }
            }
        }
    }
    pthread_mutex_unlock(&d->lock);
    if (rc) {
        errno = -rc;
        nvl_fail(rc, "nvme_buf_alloc: no room for %zu bytes %s", size,
                 m ? "in that memory (a bigger one, or free buffers first)"
                   : "in this host's RAM for the device");
        return NULL;
    }
    return (void *)part.cpu;
}

int nvme_buf_free(nvme_dev_t *d, void *buf)
{
    if (!d || !buf)
        return -EINVAL;
    const volatile uint8_t *b = buf;
    pthread_mutex_lock(&d->lock);
    for (nvme_mem_t *m = d->mems; m; m = m->next) {
        if (b < m->dma.cpu || b >= m->dma.cpu + m->dma.size)
            continue;
        size_t at = (size_t)(b - m->dma.cpu);
        if (at % PAGE || !m->run[at / PAGE] || m->run[at / PAGE] == CONT)
            break;
        struct nvl_dma part = { .cpu = m->dma.cpu + at };
        nvl_mem_put(m, &part);
        pthread_mutex_unlock(&d->lock);
        return 0;
    }
    pthread_mutex_unlock(&d->lock);
    return nvl_fail(-EINVAL, "nvme_buf_free: %p is not a buffer from nvme_buf_alloc", buf);
}

int nvme_buf_ioaddr(nvme_dev_t *d, const void *buf, uint64_t *ioaddr)
{
    if (!d || !buf || !ioaddr)
        return -EINVAL;
    return nvl_mem_find(d, buf, 1, ioaddr);
}
