/*
 * libsisci SmartIO (smartio-tocs-2021 §6.1): borrowing devices by fabric device id (one
 * native borrow per process, however many handles share it), device memory as remote
 * segments (a BAR, or memory in the lender shared by number or private), and segments
 * mapped for a device: the address the device uses, resolved as ntblend's SmartIO does.
 */
#define _GNU_SOURCE
#include <stdlib.h>

#include "sisci_int.h"

/* Device memory segments have no size in the call: they are made this large. */
#define DEVMEM_SIZE (2u << 20)

static struct {
    pthread_mutex_t lock;
    struct sci_borrow *list;
} borrows = { .lock = PTHREAD_MUTEX_INITIALIZER };

unsigned long long sci_fdid(uint32_t device, uint32_t node)
{
    return SIO_FDID(node, device);
}

int sci_fdid_device(unsigned long long fdid)
{
    static struct sio_info all[1024];
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    uint32_t id = (uint32_t)(fdid & 0xffff);
    if (!id || fdid >> 48)
        return -1;
    pthread_mutex_lock(&lock);
    int n = sio_list(all, 1024);
    bool ok = id <= (uint32_t)(n < 0 ? 0 : n) && id <= 1024 && all[id - 1].node_id == (fdid >> 16);
    pthread_mutex_unlock(&lock);
    return ok ? (int)id - 1 : -1;
}

void SCIBorrowDevice(sci_desc_t sd, sci_device_t *device, unsigned long long fdid,
                     unsigned int flags, sci_error_t *error)
{
    struct sci_desc_obj *d = sci_get(sd, SCI_K_DESC);
    if (!d || !device) {
        sci_set(error, SCI_ERR_ILLEGAL_PARAMETER);
        return;
    }
    if (flags & ~SCI_FLAG_EXCLUSIVE) {
        sci_set(error, SCI_ERR_ILLEGAL_FLAG);
        return;
    }
    int id = sci_fdid_device(fdid);
    if (id < 0) {
        sci_set(error, SCI_ERR_DEVICE_NOT_FOUND);
        return;
    }
    struct sci_dev_obj *h = sci_new(SCI_K_DEV, sizeof *h, d);
    if (!h) {
        sci_set(error, SCI_ERR_NOSPC);
        return;
    }
    pthread_mutex_lock(&borrows.lock);
    struct sci_borrow *b = borrows.list;
    while (b && b->fdid != fdid)
        b = b->next;
    int rc = 0;
    if (!b && !(b = calloc(1, sizeof *b)))
        rc = -ENOMEM;
    else if (!b->refs) {
        rc = sio_borrow((uint32_t)id, flags & SCI_FLAG_EXCLUSIVE ? SIO_EXCLUSIVE : SIO_SHARED, &b->dev);
        if (!rc && (rc = sio_enable(b->dev)))
            sio_return(b->dev);
        if (!rc) {
            b->fdid = fdid;
            b->next = borrows.list;
            borrows.list = b;
        } else {
            free(b);
        }
    }
    if (!rc) {
        b->refs++;
        h->b = b;
    }
    pthread_mutex_unlock(&borrows.lock);
    if (rc) {
        sci_free(h);
        sci_set(error, rc == -EBUSY || rc == -EALREADY ? SCI_ERR_DEVICE_BUSY
                       : rc == -EACCES                 ? SCI_ERR_ACCESS
                       : rc == -ENODEV                 ? SCI_ERR_DEVICE_NOT_FOUND
                                                       : sci_err(rc));
        return;
    }
    *device = (sci_device_t)h->o.handle;
    sci_set(error, SCI_ERR_OK);
}

void SCIReturnDevice(sci_device_t device, unsigned int flags, sci_error_t *error)
{
    struct sci_dev_obj *h = sci_get(device, SCI_K_DEV);
    if (!h || flags) {
        sci_set(error, !h ? SCI_ERR_ILLEGAL_PARAMETER : SCI_ERR_ILLEGAL_FLAG);
        return;
    }
    if (atomic_load(&h->nuses)) {
        sci_set(error, SCI_ERR_BUSY); /* disconnect its device memory, unmap for it first */
        return;
    }
    pthread_mutex_lock(&borrows.lock);
    struct sci_borrow *b = h->b;
    int rc = 0;
    if (--b->refs == 0) {
        for (struct sci_borrow **pp = &borrows.list; *pp; pp = &(*pp)->next)
            if (*pp == b) {
                *pp = b->next;
                break;
            }
        rc = sio_return(b->dev);
        free(b);
    }
    pthread_mutex_unlock(&borrows.lock);
    sci_free(h);
    sci_set(error, sci_err(rc));
}

unsigned long long SCIGetFabricDeviceId(sci_device_t device)
{
    struct sci_dev_obj *h = sci_get(device, SCI_K_DEV);
    return h ? h->b->fdid : 0;
}

void SCIConnectDeviceMemory(sci_desc_t sd, sci_remote_segment_t *segment,
                            unsigned int localAdapterNo, sci_device_t device,
                            unsigned int memoryNo, unsigned int memoryOffset, unsigned int flags,
                            sci_error_t *error)
{
    struct sci_desc_obj *d = sci_get(sd, SCI_K_DESC);
    struct sci_dev_obj *h = sci_get(device, SCI_K_DEV);
    if (!d || !h || !segment || memoryOffset) {
        sci_set(error, SCI_ERR_ILLEGAL_PARAMETER);
        return;
    }
    unsigned kind = flags & (SCI_FLAG_BAR | SCI_FLAG_SHARED | SCI_FLAG_PRIVATE);
    if ((flags & ~kind) || (kind && (kind & (kind - 1)))) {
        sci_set(error, SCI_ERR_ILLEGAL_FLAG); /* one of the three at most */
        return;
    }
    if (!sci_adapter_ok(localAdapterNo, error))
        return;
    struct sci_rseg_obj *r = sci_rseg_new(d, error);
    if (!r)
        return;
    int rc;
    if (!kind || kind == SCI_FLAG_BAR) /* no kind: a BAR, as the first SmartIO releases did */
        rc = memoryNo > 5 ? -EINVAL : sio_connect_bar(d->sd, h->b->dev, (int)memoryNo, (int)localAdapterNo, &r->seg);
    else
        rc = sio_connect_devmem(d->sd, h->b->dev, memoryNo, DEVMEM_SIZE,
                                kind == SCI_FLAG_SHARED ? SIO_DEVMEM_SHARED : SIO_DEVMEM_PRIVATE,
                                (int)localAdapterNo, &r->seg);
    if (rc) {
        sci_free(r);
        sci_set(error, rc == -EINVAL ? SCI_ERR_ILLEGAL_PARAMETER : sci_err(rc));
        return;
    }
    r->id = memoryNo;
    r->node = seg_remote_node_id(r->seg);
    r->dev = h;
    atomic_fetch_add(&h->nuses, 1);
    *segment = (sci_remote_segment_t)r->o.handle;
    sci_set(error, SCI_ERR_OK);
}

/* ---------------------------------------------------------------- mappings for a device */

static int devmap_add(struct sci_devmap **list, pthread_mutex_t *lock, struct sci_dev_obj *h,
                      unsigned adapter, sio_dma_t *dma)
{
    struct sci_devmap *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    *m = (struct sci_devmap){ .device = h->o.handle, .adapter = adapter, .dma = dma };
    pthread_mutex_lock(lock);
    m->next = *list;
    *list = m;
    pthread_mutex_unlock(lock);
    atomic_fetch_add(&h->nuses, 1);
    return 0;
}

/* Take the mapping made for device handle h (on adapter, for local segments) off the list. */
static struct sci_devmap *devmap_take(struct sci_devmap **list, pthread_mutex_t *lock,
                                      uintptr_t h, int adapter)
{
    pthread_mutex_lock(lock);
    struct sci_devmap *found = NULL;
    for (struct sci_devmap **pp = list; *pp; pp = &(*pp)->next)
        if ((*pp)->device == h && (adapter < 0 || (*pp)->adapter == (unsigned)adapter)) {
            found = *pp;
            *pp = found->next;
            break;
        }
    pthread_mutex_unlock(lock);
    return found;
}

void sci_devmaps_drop(struct sci_devmap **list, pthread_mutex_t *lock)
{
    pthread_mutex_lock(lock);
    struct sci_devmap *m = *list;
    *list = NULL;
    pthread_mutex_unlock(lock);
    while (m) {
        struct sci_devmap *next = m->next;
        struct sci_dev_obj *h = sci_get((void *)m->device, SCI_K_DEV);
        sio_unmap(m->dma);
        if (h)
            atomic_fetch_sub(&h->nuses, 1);
        free(m);
        m = next;
    }
}

void SCIMapLocalSegmentForDevice(sci_local_segment_t segment, unsigned int localAdapterNo,
                                 sci_device_t device, sci_ioaddr_t *ioaddr, size_t offset,
                                 unsigned int flags, sci_error_t *error)
{
    struct sci_lseg_obj *s = sci_get(segment, SCI_K_LSEG);
    struct sci_dev_obj *h = sci_get(device, SCI_K_DEV);
    if (!s || !h || !ioaddr) {
        sci_set(error, SCI_ERR_ILLEGAL_PARAMETER);
        return;
    }
    if (flags) {
        sci_set(error, SCI_ERR_ILLEGAL_FLAG);
        return;
    }
    if (!s->seg) {
        sci_set(error, SCI_ERR_ILLEGAL_OPERATION); /* empty */
        return;
    }
    if (localAdapterNo >= 64 || !(s->prepared & (1ull << localAdapterNo))) {
        sci_set(error, SCI_ERR_SEGMENT_NOT_PREPARED);
        return;
    }
    if (offset >= s->size) {
        sci_set(error, SCI_ERR_OUT_OF_RANGE);
        return;
    }
    sio_dma_t *dma;
    uint64_t io;
    int rc = sio_map_local(h->b->dev, s->seg, offset, s->size - offset, &io, &dma);
    if (!rc && (rc = devmap_add(&s->devmaps, &s->lock, h, localAdapterNo, dma)))
        sio_unmap(dma);
    if (!rc)
        *ioaddr = io;
    sci_set(error, sci_err(rc));
}

void SCIUnmapLocalSegmentForDevice(sci_local_segment_t segment, unsigned int localAdapterNo,
                                   sci_device_t device, unsigned int flags, sci_error_t *error)
{
    struct sci_lseg_obj *s = sci_get(segment, SCI_K_LSEG);
    struct sci_dev_obj *h = sci_get(device, SCI_K_DEV);
    if (!s || !h || flags) {
        sci_set(error, !s || !h ? SCI_ERR_ILLEGAL_PARAMETER : SCI_ERR_ILLEGAL_FLAG);
        return;
    }
    struct sci_devmap *m = devmap_take(&s->devmaps, &s->lock, h->o.handle, (int)localAdapterNo);
    if (!m) {
        sci_set(error, SCI_ERR_ILLEGAL_OPERATION); /* not mapped for that device */
        return;
    }
    int rc = sio_unmap(m->dma);
    atomic_fetch_sub(&h->nuses, 1);
    free(m);
    sci_set(error, sci_err(rc));
}

void SCIMapRemoteSegmentForDevice(sci_remote_segment_t segment, sci_device_t device,
                                  sci_ioaddr_t *ioaddr, size_t offset, unsigned int flags,
                                  sci_error_t *error)
{
    struct sci_rseg_obj *r = sci_get(segment, SCI_K_RSEG);
    struct sci_dev_obj *h = sci_get(device, SCI_K_DEV);
    if (!r || !h || !ioaddr) {
        sci_set(error, SCI_ERR_ILLEGAL_PARAMETER);
        return;
    }
    if (flags) {
        sci_set(error, SCI_ERR_ILLEGAL_FLAG);
        return;
    }
    size_t size = seg_remote_size(r->seg);
    if (offset >= size) {
        sci_set(error, SCI_ERR_OUT_OF_RANGE);
        return;
    }
    sio_dma_t *dma;
    uint64_t io;
    int rc = sio_map_remote(h->b->dev, r->seg, offset, size - offset, &io, &dma);
    if (!rc && (rc = devmap_add(&r->devmaps, &r->lock, h, 0, dma)))
        sio_unmap(dma);
    if (!rc)
        *ioaddr = io;
    sci_set(error, sci_err(rc));
}

void SCIUnmapRemoteSegmentForDevice(sci_remote_segment_t segment, sci_device_t device,
                                    unsigned int flags, sci_error_t *error)
{
    struct sci_rseg_obj *r = sci_get(segment, SCI_K_RSEG);
    struct sci_dev_obj *h = sci_get(device, SCI_K_DEV);
    if (!r || !h || flags) {
        sci_set(error, !r || !h ? SCI_ERR_ILLEGAL_PARAMETER : SCI_ERR_ILLEGAL_FLAG);
        return;
    }
    struct sci_devmap *m = devmap_take(&r->devmaps, &r->lock, h->o.handle, -1);
    if (!m) {
        sci_set(error, SCI_ERR_ILLEGAL_OPERATION);
        return;
    }
    int rc = sio_unmap(m->dma);
    atomic_fetch_sub(&h->nuses, 1);
    free(m);
    sci_set(error, sci_err(rc));
}

void SCIRegisterPCIeRequester(sci_desc_t sd, unsigned int localAdapterNo, unsigned int bus,
                              unsigned int devfn, unsigned int flags, sci_error_t *error)
{
    if (!sci_get(sd, SCI_K_DESC) || bus > 255 || devfn > 255)
        sci_set(error, SCI_ERR_ILLEGAL_PARAMETER);
    else if (flags & ~SCI_FLAG_PCIE_REQUESTER_GLOBAL)
        sci_set(error, SCI_ERR_ILLEGAL_FLAG);
    else if (sci_adapter_ok(localAdapterNo, error))
        sci_set(error, SCI_ERR_OK); /* requester IDs are set up by every mapping for a device */
}

void SCIUnregisterPCIeRequester(sci_desc_t sd, unsigned int localAdapterNo, unsigned int bus,
                                unsigned int devfn, unsigned int flags, sci_error_t *error)
{
    SCIRegisterPCIeRequester(sd, localAdapterNo, bus, devfn, flags & ~SCI_FLAG_PCIE_REQUESTER_GLOBAL,
                             error);
}
