/*
 * libsisci sequences, barriers and copies: SCICreateMapSequence and its checks (ntblend's
 * sequences: was the path to the segment down at any time since the start?), SCIStoreBarrier,
 * SCIFlush, SCIMemCpy and SCIMemWrite (plain copies through the map, checked on request), and
 * SCICacheSync (the emulated fabric is cache coherent: an ordering point).
 */
#define _GNU_SOURCE
#include <string.h>

#include "sisci_int.h"

void SCICreateMapSequence(sci_map_t map, sci_sequence_t *sequence, unsigned int flags,
                          sci_error_t *error)
{
    struct sci_map_obj *m = sci_get(map, SCI_K_MAP);
    if (!m || !sequence || flags) {
        sci_set(error, !m || !sequence ? SCI_ERR_ILLEGAL_PARAMETER : SCI_ERR_ILLEGAL_FLAG);
        return;
    }
    struct sci_seq_obj *q = sci_new(SCI_K_SEQ, sizeof *q, m->o.owner);
    if (!q) {
        sci_set(error, SCI_ERR_NOSPC);
        return;
    }
    int rc = seg_seq_create(m->map, &q->seq);
    if (rc) {
        sci_free(q);
        sci_set(error, sci_err(rc));
        return;
    }
    q->map = m;
    atomic_fetch_add(&m->nseqs, 1);
    *sequence = (sci_sequence_t)q->o.handle;
    sci_set(error, SCI_ERR_OK);
}

void SCIRemoveSequence(sci_sequence_t sequence, unsigned int flags, sci_error_t *error)
{
    struct sci_seq_obj *q = sci_get(sequence, SCI_K_SEQ);
    if (!q || flags) {
        sci_set(error, !q ? SCI_ERR_ILLEGAL_PARAMETER : SCI_ERR_ILLEGAL_FLAG);
        return;
    }
    seg_seq_remove(q->seq);
    atomic_fetch_sub(&q->map->nseqs, 1);
    sci_free(q);
    sci_set(error, SCI_ERR_OK);
}

static sci_sequence_status_t status_of(int st)
{
    return st == SEG_SEQ_OK ? SCI_SEQ_OK : st == SEG_SEQ_RETRIABLE ? SCI_SEQ_RETRIABLE : SCI_SEQ_NOT_RETRIABLE;
}

sci_sequence_status_t SCIStartSequence(sci_sequence_t sequence, unsigned int flags,
                                       sci_error_t *error)
{
    struct sci_seq_obj *q = sci_get(sequence, SCI_K_SEQ);
    if (!q || flags) {
        sci_set(error, !q ? SCI_ERR_ILLEGAL_PARAMETER : SCI_ERR_ILLEGAL_FLAG);
        return SCI_SEQ_NOT_RETRIABLE;
    }
    seg_seq_start(q->seq);
    /* A start on a path that is down already cannot succeed: say so now. */
    sci_sequence_status_t st = status_of(seg_seq_check(q->seq));
    sci_set(error, SCI_ERR_OK);
    return st;
}

sci_sequence_status_t SCICheckSequence(sci_sequence_t sequence, unsigned int flags,
                                       sci_error_t *error)
{
    struct sci_seq_obj *q = sci_get(sequence, SCI_K_SEQ);
    if (!q || flags) {
        sci_set(error, !q ? SCI_ERR_ILLEGAL_PARAMETER : SCI_ERR_ILLEGAL_FLAG);
        return SCI_SEQ_NOT_RETRIABLE;
    }
    sci_set(error, SCI_ERR_OK);
    return status_of(seg_seq_check(q->seq));
}

/* No handle look-up: a barrier orders this thread's stores whatever the sequence (SISCI
 * allows NULL), and it is on the data path. */
void SCIStoreBarrier(sci_sequence_t sequence, unsigned int flags) { seg_store_barrier(); }

void SCIFlush(sci_sequence_t sequence, unsigned int flags) { seg_flush(); }

void SCIMemCpy(sci_sequence_t sequence, void *memAddr, sci_map_t remoteMap, size_t remoteOffset,
               size_t size, unsigned int flags, sci_error_t *error)
{
    struct sci_map_obj *m = sci_get(remoteMap, SCI_K_MAP);
    struct sci_seq_obj *q = sequence ? sci_get(sequence, SCI_K_SEQ) : NULL;
    if (!m || !memAddr || (sequence && !q) || ((flags & SCI_FLAG_ERROR_CHECK) && !q)) {
        sci_set(error, SCI_ERR_ILLEGAL_PARAMETER);
        return;
    }
    if (flags & ~(SCI_FLAG_BLOCK_READ | SCI_FLAG_ERROR_CHECK)) {
        sci_set(error, SCI_ERR_ILLEGAL_FLAG);
        return;
    }
    if (remoteOffset > m->size || size > m->size - remoteOffset) {
        sci_set(error, SCI_ERR_OUT_OF_RANGE);
        return;
    }
    if (q && (flags & SCI_FLAG_ERROR_CHECK))
        seg_seq_start(q->seq);
    char *remote = (char *)m->ptr + remoteOffset;
    if (flags & SCI_FLAG_BLOCK_READ)
        memcpy(memAddr, remote, size);
    else
        memcpy(remote, memAddr, size);
    if (q && (flags & SCI_FLAG_ERROR_CHECK) && seg_seq_check(q->seq) != SEG_SEQ_OK) {
        sci_set(error, SCI_ERR_TRANSFER_FAILED); /* the path failed meanwhile: copy again */
        return;
    }
    seg_flush();
    sci_set(error, SCI_ERR_OK);
}

void SCIMemWrite(void *memAddr, volatile void *remoteAddr, size_t size, unsigned int flags,
                 sci_error_t *error)
{
    if (!memAddr || !remoteAddr) {
        sci_set(error, SCI_ERR_ILLEGAL_PARAMETER);
        return;
    }
    if (flags) {
        sci_set(error, SCI_ERR_ILLEGAL_FLAG);
        return;
    }
    memcpy((void *)remoteAddr, memAddr, size);
    seg_flush();
    sci_set(error, SCI_ERR_OK);
}

void SCICacheSync(sci_map_t map, void *addr, size_t length, unsigned int flags,
                  sci_error_t *error)
{
    if (flags & ~(SCI_FLAG_CACHE_FLUSH | SCI_FLAG_CACHE_INVALIDATE)) {
        sci_set(error, SCI_ERR_ILLEGAL_FLAG);
        return;
    }
    if (map && !sci_get(map, SCI_K_MAP)) {
        sci_set(error, SCI_ERR_ILLEGAL_PARAMETER);
        return;
    }
    seg_flush(); /* coherent: nothing to write back, only to order */
    sci_set(error, SCI_ERR_OK);
}
