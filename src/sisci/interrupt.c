/*
 * libsisci interrupts, plain and with data: ntblend's remote interrupts (seg_intr_*), which
 * carry up to 64 bytes. With SCI_FLAG_USE_CALLBACK a library thread waits for the triggers
 * and calls the callback; removing the interrupt wakes it through a connection of its own.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "ntblend/ntb.h"
#include "sisci_int.h"

static void *intr_thread(void *arg)
{
    struct sci_lintr_obj *l = arg;
    unsigned char buf[SEG_INTR_DATA_MAX];
    while (!atomic_load(&l->cb_stop)) {
        size_t len = 0;
        if (seg_intr_wait_data(l->intr, buf, sizeof buf, &len, 1000) || atomic_load(&l->cb_stop))
            continue;
        sci_callback_action_t a =
            l->data ? l->dcb(l->cb_arg, (sci_local_data_interrupt_t)l->o.handle, buf, (unsigned)len, SCI_ERR_OK)
                    : l->cb(l->cb_arg, (sci_local_interrupt_t)l->o.handle, SCI_ERR_OK);
        if (a == SCI_CALLBACK_CANCEL)
            break;
    }
    return NULL;
}

static void create(sci_desc_t sd, uintptr_t *out, unsigned adapter, unsigned *number,
                   sci_cb_interrupt_t cb, sci_cb_data_interrupt_t dcb, void *arg, unsigned flags,
                   sci_error_t *error, bool data)
{
    struct sci_desc_obj *d = sci_get(sd, SCI_K_DESC);
    bool use_cb = flags & SCI_FLAG_USE_CALLBACK;
    if (!d || !out || !number || (use_cb && !cb && !dcb)) {
        sci_set(error, SCI_ERR_ILLEGAL_PARAMETER);
        return;
    }
    if (flags & ~(SCI_FLAG_USE_CALLBACK | SCI_FLAG_FIXED_INTNO)) {
        sci_set(error, SCI_ERR_ILLEGAL_FLAG);
        return;
    }
    if (!sci_adapter_ok(adapter, error))
        return;
    struct sci_lintr_obj *l = sci_new(data ? SCI_K_LDINTR : SCI_K_LINTR, sizeof *l, d);
    if (!l) {
        sci_set(error, SCI_ERR_NOSPC);
        return;
    }
    uint32_t id = flags & SCI_FLAG_FIXED_INTNO ? sci_id_to_native(*number) : SEG_ID_AUTO;
    int rc = seg_intr_create(d->sd, &l->intr, &id);
    l->data = data;
    l->cb = cb;
    l->dcb = dcb;
    l->cb_arg = arg;
    l->number = sci_id_from_native(id);
    if (!rc && use_cb) {
        uint32_t node;
        seg_local_node_id(&node);
        /* Its own connection wakes the thread when the interrupt goes (no polling). */
        rc = seg_intr_connect(d->sd, &l->self, node, id, (int)adapter, 1000);
        if (!rc)
            rc = -pthread_create(&l->cb_thread, NULL, intr_thread, l);
        l->cb_running = !rc;
        if (rc && l->self)
            seg_intr_disconnect(l->self);
        if (rc)
            seg_intr_remove(l->intr);
    }
    if (rc) {
        sci_free(l);
        sci_set(error, rc == -EEXIST ? SCI_ERR_BUSY : sci_err(rc));
        return;
    }
    *number = l->number;
    *out = l->o.handle;
    sci_set(error, SCI_ERR_OK);
}

static void remove_intr(struct sci_lintr_obj *l, unsigned flags, sci_error_t *error)
{
    if (!l || flags) {
        sci_set(error, !l ? SCI_ERR_ILLEGAL_PARAMETER : SCI_ERR_ILLEGAL_FLAG);
        return;
    }
    if (l->cb_running) {
        atomic_store(&l->cb_stop, true);
        seg_intr_trigger(l->self);
        if (pthread_equal(pthread_self(), l->cb_thread))
            pthread_detach(l->cb_thread); /* removed from its own callback */
        else
            pthread_join(l->cb_thread, NULL);
        seg_intr_disconnect(l->self);
    }
    seg_intr_remove(l->intr);
    sci_free(l);
    sci_set(error, SCI_ERR_OK);
}

/* 0, or the error of a wait on an interrupt whose callback owns the waits. */
static sci_error_t wait_intr(struct sci_lintr_obj *l, void *data, unsigned *length,
                             unsigned timeout, unsigned flags)
{
    if (!l || (l->data && (!data || !length)))
        return SCI_ERR_ILLEGAL_PARAMETER;
    if (flags)
        return SCI_ERR_ILLEGAL_FLAG;
    if (l->cb_running)
        return SCI_ERR_ILLEGAL_OPERATION; /* its callback receives the triggers */
    unsigned char buf[SEG_INTR_DATA_MAX];
    size_t len = 0;
    int rc = l->data ? seg_intr_wait_data(l->intr, buf, sizeof buf, &len, sci_timeout(timeout))
                     : seg_intr_wait(l->intr, sci_timeout(timeout));
    if (rc)
        return rc == -ETIMEDOUT ? SCI_ERR_TIMEOUT : sci_err(rc);
    if (!l->data || !data || !length)
        return SCI_ERR_OK;
    sci_error_t e = len > *length ? SCI_ERR_OVERFLOW : SCI_ERR_OK;
    memcpy(data, buf, len > *length ? *length : len);
    *length = (unsigned)len;
    return e;
}

static void connect_intr(sci_desc_t sd, uintptr_t *out, unsigned node, unsigned adapter,
                         unsigned number, unsigned timeout, unsigned flags, sci_error_t *error,
                         bool data)
{
    struct sci_desc_obj *d = sci_get(sd, SCI_K_DESC);
    if (!d || !out || flags) {
        sci_set(error, !d || !out ? SCI_ERR_ILLEGAL_PARAMETER : SCI_ERR_ILLEGAL_FLAG);
        return;
    }
    if (!sci_adapter_ok(adapter, error))
        return;
    struct sci_rintr_obj *r = sci_new(data ? SCI_K_RDINTR : SCI_K_RINTR, sizeof *r, d);
    if (!r) {
        sci_set(error, SCI_ERR_NOSPC);
        return;
    }
    r->data = data;
    uint64_t deadline = sci_deadline(timeout);
    int rc;
    do
        rc = seg_intr_connect(d->sd, &r->r, node, sci_id_to_native(number), (int)adapter,
                              sci_remaining(deadline));
    while (sci_retry_unreachable(rc, node, deadline));
    if (rc) {
        sci_free(r);
        char name[8];
        sci_set(error, ntb_node_name(node, name, sizeof name) == -ENOENT ? SCI_ERR_NO_SUCH_NODEID
                       : rc == -ENOENT                                  ? SCI_ERR_NO_SUCH_INTNO
                                                                        : sci_err(rc));
        return;
    }
    *out = r->o.handle;
    sci_set(error, SCI_ERR_OK);
}

static void disconnect_intr(struct sci_rintr_obj *r, unsigned flags, sci_error_t *error)
{
    if (!r || flags) {
        sci_set(error, !r ? SCI_ERR_ILLEGAL_PARAMETER : SCI_ERR_ILLEGAL_FLAG);
        return;
    }
    seg_intr_disconnect(r->r);
    sci_free(r);
    sci_set(error, SCI_ERR_OK);
}

/* ---------------------------------------------------------------- plain */

void SCICreateInterrupt(sci_desc_t sd, sci_local_interrupt_t *interrupt,
                        unsigned int localAdapterNo, unsigned int *interruptNo,
                        sci_cb_interrupt_t callback, void *callbackArg, unsigned int flags,
                        sci_error_t *error)
{
    create(sd, (uintptr_t *)interrupt, localAdapterNo, interruptNo,
           flags & SCI_FLAG_USE_CALLBACK ? callback : NULL, NULL, callbackArg, flags, error, false);
}

void SCIRemoveInterrupt(sci_local_interrupt_t interrupt, unsigned int flags, sci_error_t *error)
{
    remove_intr(sci_get(interrupt, SCI_K_LINTR), flags, error);
}

void SCIWaitForInterrupt(sci_local_interrupt_t interrupt, unsigned int timeout,
                         unsigned int flags, sci_error_t *error)
{
    struct sci_lintr_obj *l = sci_get(interrupt, SCI_K_LINTR);
    if (__builtin_expect(l && !flags && !l->cb_running, 1)) { /* the data path: no more */
        int rc = seg_intr_wait(l->intr, sci_timeout(timeout));
        sci_set(error, !rc ? SCI_ERR_OK : rc == -ETIMEDOUT ? SCI_ERR_TIMEOUT : sci_err(rc));
        return;
    }
    sci_set(error, wait_intr(l, NULL, NULL, timeout, flags));
}

unsigned int SCIGetLocalInterruptNo(sci_local_interrupt_t interrupt)
{
    struct sci_lintr_obj *l = sci_get(interrupt, SCI_K_LINTR);
    return l ? l->number : 0;
}

void SCIConnectInterrupt(sci_desc_t sd, sci_remote_interrupt_t *interrupt, unsigned int nodeId,
                         unsigned int localAdapterNo, unsigned int interruptNo,
                         unsigned int timeout, unsigned int flags, sci_error_t *error)
{
    connect_intr(sd, (uintptr_t *)interrupt, nodeId, localAdapterNo, interruptNo, timeout, flags,
                 error, false);
}

void SCIDisconnectInterrupt(sci_remote_interrupt_t interrupt, unsigned int flags,
                            sci_error_t *error)
{
    disconnect_intr(sci_get(interrupt, SCI_K_RINTR), flags, error);
}

void SCITriggerInterrupt(sci_remote_interrupt_t interrupt, unsigned int flags, sci_error_t *error)
{
    struct sci_rintr_obj *r = sci_get(interrupt, SCI_K_RINTR);
    if (!r || flags) {
        sci_set(error, !r ? SCI_ERR_ILLEGAL_PARAMETER : SCI_ERR_ILLEGAL_FLAG);
        return;
    }
    int rc = seg_intr_trigger(r->r);
    sci_set(error, !rc ? SCI_ERR_OK : rc == -ENOENT ? SCI_ERR_NOT_CONNECTED : sci_err(rc));
}

/* ---------------------------------------------------------------- with data */

void SCICreateDataInterrupt(sci_desc_t sd, sci_local_data_interrupt_t *interrupt,
                            unsigned int localAdapterNo, unsigned int *interruptNo,
                            sci_cb_data_interrupt_t callback, void *callbackArg,
                            unsigned int flags, sci_error_t *error)
{
    create(sd, (uintptr_t *)interrupt, localAdapterNo, interruptNo, NULL,
           flags & SCI_FLAG_USE_CALLBACK ? callback : NULL, callbackArg, flags, error, true);
}

void SCIRemoveDataInterrupt(sci_local_data_interrupt_t interrupt, unsigned int flags,
                            sci_error_t *error)
{
    remove_intr(sci_get(interrupt, SCI_K_LDINTR), flags, error);
}

void SCIWaitForDataInterrupt(sci_local_data_interrupt_t interrupt, void *data,
                             unsigned int *length, unsigned int timeout, unsigned int flags,
                             sci_error_t *error)
{
    sci_set(error, wait_intr(sci_get(interrupt, SCI_K_LDINTR), data, length, timeout, flags));
}

void SCIConnectDataInterrupt(sci_desc_t sd, sci_remote_data_interrupt_t *interrupt,
                             unsigned int nodeId, unsigned int localAdapterNo,
                             unsigned int interruptNo, unsigned int timeout, unsigned int flags,
                             sci_error_t *error)
{
    connect_intr(sd, (uintptr_t *)interrupt, nodeId, localAdapterNo, interruptNo, timeout, flags,
                 error, true);
}

void SCIDisconnectDataInterrupt(sci_remote_data_interrupt_t interrupt, unsigned int flags,
                                sci_error_t *error)
{
    disconnect_intr(sci_get(interrupt, SCI_K_RDINTR), flags, error);
}

void SCITriggerDataInterrupt(sci_remote_data_interrupt_t interrupt, void *data,
                             unsigned int length, unsigned int flags, sci_error_t *error)
{
    struct sci_rintr_obj *r = sci_get(interrupt, SCI_K_RDINTR);
    if (!r || (!data && length)) {
        sci_set(error, SCI_ERR_ILLEGAL_PARAMETER);
        return;
    }
    if (flags) {
        sci_set(error, SCI_ERR_ILLEGAL_FLAG);
        return;
    }
    if (length > SCI_MAX_DATA_INTERRUPT_SIZE) {
        sci_set(error, SCI_ERR_OUT_OF_RANGE);
        return;
    }
    int rc = seg_intr_trigger_data(r->r, data, length);
    sci_set(error, rc == -ENOENT ? SCI_ERR_NOT_CONNECTED : sci_err(rc));
}
