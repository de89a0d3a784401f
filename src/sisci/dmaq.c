/*
 * libsisci DMA queues: ntblend's segment DMA queues on the adapter's DMA engine. A SISCI
 * queue takes up to maxEntries transfers between waits; SCIStartDmaTransfer posts at once
 * (SISCI 2's one-call form), and a callback or SCIWaitForDMAQueue reports completion.
 */
#define _GNU_SOURCE
#include <stdlib.h>

#include "sisci_int.h"

#define DMA_FLAGS (SCI_FLAG_DMA_READ | SCI_FLAG_DMA_WAIT | SCI_FLAG_USE_CALLBACK)

void SCICreateDMAQueue(sci_desc_t sd, sci_dma_queue_t *dq, unsigned int localAdapterNo,
                       unsigned int maxEntries, unsigned int flags, sci_error_t *error)
{
    struct sci_desc_obj *d = sci_get(sd, SCI_K_DESC);
    if (!d || !dq || !maxEntries) {
        sci_set(error, SCI_ERR_ILLEGAL_PARAMETER);
        return;
    }
    if (flags & ~(SCI_FLAG_DMA_GLOBAL | SCI_FLAG_DMA_ADAPTER)) {
        sci_set(error, SCI_ERR_ILLEGAL_FLAG);
        return;
    }
    if (!sci_adapter_ok(localAdapterNo, error))
        return;
    struct sci_dmaq_obj *q = sci_new(SCI_K_DMAQ, sizeof *q, d);
    if (!q) {
        sci_set(error, SCI_ERR_NOSPC);
        return;
    }
    int rc = seg_dma_queue_create(d->sd, &q->q, (int)localAdapterNo);
    if (rc) {
        sci_free(q);
        sci_set(error, rc == -EBUSY ? SCI_ERR_DMA_NOT_AVAILABLE : sci_err(rc));
        return;
    }
    q->max_entries = maxEntries;
    *dq = (sci_dma_queue_t)q->o.handle;
    sci_set(error, SCI_ERR_OK);
}

void SCIRemoveDMAQueue(sci_dma_queue_t dq, unsigned int flags, sci_error_t *error)
{
    struct sci_dmaq_obj *q = sci_get(dq, SCI_K_DMAQ);
    if (!q || flags) {
        sci_set(error, !q ? SCI_ERR_ILLEGAL_PARAMETER : SCI_ERR_ILLEGAL_FLAG);
        return;
    }
    if (seg_dma_state(q->q) == SEG_DMA_POSTED || atomic_load(&q->cb_pending)) {
        sci_set(error, SCI_ERR_BUSY); /* wait for it or abort it first */
        return;
    }
    seg_dma_queue_remove(q->q);
    sci_free(q);
    sci_set(error, SCI_ERR_OK);
}

static sci_error_t status_of(int rc)
{
    return rc == -ECANCELED ? SCI_ERR_CANCELLED : rc == -ENOLINK ? SCI_ERR_NO_LINK_ACCESS
                            : rc ? SCI_ERR_TRANSFER_FAILED : SCI_ERR_OK;
}

static void done(seg_dma_queue_t *nq, int status, void *arg)
{
    struct sci_dmaq_obj *q = arg;
    atomic_store(&q->state, status ? SCI_DMAQUEUE_ERROR : SCI_DMAQUEUE_DONE);
    q->queued = 0;
    sci_cb_dma_t cb = q->cb;
    atomic_store(&q->cb_pending, 0);
    cb(q->cb_arg, (sci_dma_queue_t)q->o.handle, status_of(status));
}

/* Post transfers (one, or a vector), then wait or arrange the callback as flags say. */
static void start(sci_dma_queue_t dq, sci_local_segment_t ls, sci_remote_segment_t rs,
                  const dis_dma_vec_t *vec, size_t n, sci_cb_dma_t cb, void *arg,
                  unsigned flags, sci_error_t *error)
{
    struct sci_dmaq_obj *q = sci_get(dq, SCI_K_DMAQ);
    struct sci_lseg_obj *l = sci_get(ls, SCI_K_LSEG);
    struct sci_rseg_obj *r = sci_get(rs, SCI_K_RSEG);
    if (!q || !l || !r || !vec || !n || ((flags & SCI_FLAG_USE_CALLBACK) && !cb)) {
        sci_set(error, SCI_ERR_ILLEGAL_PARAMETER);
        return;
    }
    if (flags & ~DMA_FLAGS) {
        sci_set(error, SCI_ERR_ILLEGAL_FLAG);
        return;
    }
    if (!l->seg) {
        sci_set(error, SCI_ERR_ILLEGAL_OPERATION); /* empty segment */
        return;
    }
    if (atomic_load(&q->cb_pending)) {
        sci_set(error, SCI_ERR_BUSY); /* the last transfers' callback has not run yet */
        return;
    }
    if (q->queued + n > q->max_entries || n > q->max_entries) {
        sci_set(error, SCI_ERR_MAX_ENTRIES);
        return;
    }
    size_t rsize = seg_remote_size(r->seg);
    for (size_t i = 0; i < n; i++) /* all checked before any is posted */
        if (!vec[i].size || vec[i].local_offset > l->size || vec[i].size > l->size - vec[i].local_offset ||
            vec[i].remote_offset > rsize || vec[i].size > rsize - vec[i].remote_offset ||
            (vec[i].flags & ~SCI_FLAG_DMA_READ)) {
            sci_set(error, !vec[i].size || (vec[i].flags & ~SCI_FLAG_DMA_READ) ? SCI_ERR_ILLEGAL_PARAMETER
                                                                            : SCI_ERR_OUT_OF_RANGE);
            return;
        }
    for (size_t i = 0; i < n; i++) {
        unsigned dir = (flags | vec[i].flags) & SCI_FLAG_DMA_READ ? SEG_DMA_FROM_REMOTE : 0;
        int rc = seg_dma_transfer(q->q, l->seg, vec[i].local_offset, r->seg, vec[i].remote_offset,
                                  vec[i].size, dir);
        if (rc) {
            sci_set(error, sci_err(rc));
            return;
        }
        q->queued++;
    }
    atomic_store(&q->state, SCI_DMAQUEUE_POSTED);
    if (flags & SCI_FLAG_USE_CALLBACK) {
        q->cb = cb;
        q->cb_arg = arg;
        atomic_store(&q->cb_pending, 1);
        int rc = seg_dma_on_done(q->q, done, q);
        if (rc)
            atomic_store(&q->cb_pending, 0);
        sci_set(error, sci_err(rc));
        return;
    }
    if (flags & SCI_FLAG_DMA_WAIT) {
        int rc = seg_dma_wait(q->q, -1);
        q->queued = 0;
        atomic_store(&q->state, rc ? SCI_DMAQUEUE_ERROR : SCI_DMAQUEUE_DONE);
        sci_set(error, status_of(rc));
        return;
    }
    sci_set(error, SCI_ERR_OK);
}

void SCIStartDmaTransfer(sci_dma_queue_t dq, sci_local_segment_t localSegment,
                         sci_remote_segment_t remoteSegment, size_t localOffset, size_t size,
                         size_t remoteOffset, sci_cb_dma_t callback, void *callbackArg,
                         unsigned int flags, sci_error_t *error)
{
    dis_dma_vec_t v = { .size = size, .local_offset = localOffset, .remote_offset = remoteOffset };
    start(dq, localSegment, remoteSegment, &v, 1, callback, callbackArg, flags, error);
}

void SCIStartDmaTransferVec(sci_dma_queue_t dq, sci_local_segment_t localSegment,
                            sci_remote_segment_t remoteSegment, size_t vecLength,
                            dis_dma_vec_t *disDmaVec, sci_cb_dma_t callback, void *callbackArg,
                            unsigned int flags, sci_error_t *error)
{
    start(dq, localSegment, remoteSegment, disDmaVec, vecLength, callback, callbackArg, flags,
          error);
}

sci_dma_queue_state_t SCIWaitForDMAQueue(sci_dma_queue_t dq, unsigned int timeout,
                                         unsigned int flags, sci_error_t *error)
{
    struct sci_dmaq_obj *q = sci_get(dq, SCI_K_DMAQ);
    if (!q || flags) {
        sci_set(error, !q ? SCI_ERR_ILLEGAL_PARAMETER : SCI_ERR_ILLEGAL_FLAG);
        return SCI_DMAQUEUE_ERROR;
    }
    if (atomic_load(&q->cb_pending)) {
        sci_set(error, SCI_ERR_ILLEGAL_OPERATION); /* its callback reports it */
        return (sci_dma_queue_state_t)atomic_load(&q->state);
    }
    int rc = seg_dma_wait(q->q, sci_timeout(timeout));
    if (rc == -ETIMEDOUT) {
        sci_set(error, SCI_ERR_TIMEOUT);
        return SCI_DMAQUEUE_POSTED;
    }
    q->queued = 0;
    sci_dma_queue_state_t st = rc == -ECANCELED ? SCI_DMAQUEUE_ABORTED
                               : rc            ? SCI_DMAQUEUE_ERROR
                               : atomic_load(&q->state) == SCI_DMAQUEUE_IDLE ? SCI_DMAQUEUE_IDLE
                                                                             : SCI_DMAQUEUE_DONE;
    atomic_store(&q->state, st);
    sci_set(error, status_of(rc));
    return st;
}

sci_dma_queue_state_t SCIDMAQueueState(sci_dma_queue_t dq)
{
    struct sci_dmaq_obj *q = sci_get(dq, SCI_K_DMAQ);
    if (!q)
        return SCI_DMAQUEUE_ERROR;
    int s = seg_dma_state(q->q);
    return s == SEG_DMA_POSTED ? SCI_DMAQUEUE_POSTED : (sci_dma_queue_state_t)atomic_load(&q->state);
}

void SCIAbortDMAQueue(sci_dma_queue_t dq, unsigned int flags, sci_error_t *error)
{
    struct sci_dmaq_obj *q = sci_get(dq, SCI_K_DMAQ);
    if (!q || flags) {
        sci_set(error, !q ? SCI_ERR_ILLEGAL_PARAMETER : SCI_ERR_ILLEGAL_FLAG);
        return;
    }
    int rc = seg_dma_abort(q->q);
    q->queued = 0;
    atomic_store(&q->state, SCI_DMAQUEUE_ABORTED);
    sci_set(error, sci_err(rc));
}
