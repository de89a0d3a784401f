/*
 * libsisci SCIQuery: what programs ask of the library and the fabric: the vendor and API
 * strings, an adapter's node id, link state, peers and DMA limits, the system's adapters and
 * nodes, and SmartIO devices by fabric device id (ntblend's device ids) or by name.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "ntblend/ntb.h"
#include "sisci_int.h"

static sci_error_t string(const char *s, void *data)
{
    sci_query_string_t *q = data;
    if (!q->str || !q->length)
        return SCI_ERR_ILLEGAL_PARAMETER;
    snprintf(q->str, q->length, "%s", s);
    return strlen(s) < q->length ? SCI_ERR_OK : SCI_ERR_OVERFLOW;
}

static sci_error_t adapter(sci_query_adapter_t *q)
{
    uint32_t node, peers[64];
    if (!q->data && q->subcommand != SCI_Q_ADAPTER_NAME)
        return SCI_ERR_ILLEGAL_PARAMETER;
    int n = sci_adapter_count();
    if (n < 0 || seg_local_node_id(&node))
        return SCI_ERR_NOT_INITIALIZED;
    if (q->localAdapterNo >= (unsigned)n)
        return SCI_ERR_NO_SUCH_ADAPTERNO;
    unsigned *out = q->data;
    switch (q->subcommand) {
    case SCI_Q_ADAPTER_NODEID: *out = node; return SCI_ERR_OK;
    case SCI_Q_ADAPTER_SERIAL_NUMBER: *out = node << 8 | q->localAdapterNo; return SCI_ERR_OK;
    case SCI_Q_ADAPTER_CARD_TYPE: *out = 830; return SCI_ERR_OK; /* a PXH830-like NTB */
    case SCI_Q_ADAPTER_CONFIGURED: *out = 1; return SCI_ERR_OK;
    case SCI_Q_ADAPTER_DMA_MTU: *out = 1u << 30; return SCI_ERR_OK;
    case SCI_Q_ADAPTER_DMA_SIZE_ALIGNMENT: case SCI_Q_ADAPTER_DMA_OFFSET_ALIGNMENT:
        *out = 1; return SCI_ERR_OK;
    case SCI_Q_ADAPTER_SUGGESTED_MIN_DMA_SIZE: *out = 4096; return SCI_ERR_OK;
    case SCI_Q_ADAPTER_NUMBER_OF_PEERS: case SCI_Q_ADAPTER_LINK_OPERATIONAL: {
        int np = ntb_fabric_peers(node, peers, 64), up = 0;
        for (int i = 0; i < np && i < 64; i++)
            up += ntb_fabric_link_up(node, peers[i], NULL) == 1;
        *out = q->subcommand == SCI_Q_ADAPTER_NUMBER_OF_PEERS ? (unsigned)(np < 0 ? 0 : np) : up > 0;
        return SCI_ERR_OK;
    }
    case SCI_Q_ADAPTER_NAME: {
        struct ntb_dev *d = q->data ? ntb_open((int)q->localAdapterNo) : NULL;
        if (!d)
            return SCI_ERR_ILLEGAL_PARAMETER;
        snprintf(q->data, 64, "%s", ntb_name(d));
        ntb_close(d);
        return SCI_ERR_OK;
    }
    }
    return SCI_ERR_ILLEGAL_QUERY;
}

static sci_error_t system_q(sci_query_system_t *q)
{
    uint32_t node, peers[1];
    unsigned *out = q->data;
    if (!out)
        return SCI_ERR_ILLEGAL_PARAMETER;
    if (seg_local_node_id(&node))
        return SCI_ERR_NOT_INITIALIZED;
    switch (q->subcommand) {
    case SCI_Q_SYSTEM_NUMBER_OF_ADAPTERS: *out = (unsigned)sci_adapter_count(); return SCI_ERR_OK;
    case SCI_Q_SYSTEM_LOCAL_NODEID: *out = node; return SCI_ERR_OK;
    case SCI_Q_SYSTEM_NUMBER_OF_NODES: {
        unsigned n = 0;
        for (uint32_t id = 0; id < 65536; id++) /* node ids are 16-bit in topologies */
            n += ntb_fabric_peers(id, peers, 1) >= 0;
        *out = n;
        return SCI_ERR_OK;
    }
    }
    return SCI_ERR_ILLEGAL_QUERY;
}

static sci_error_t device(sci_smartio_query_device_t *q)
{
    struct sio_info all[256];
    int n = sio_list(all, 256);
    if (n < 0)
        return SCI_ERR_NOT_INITIALIZED;
    if (!q->data)
        return SCI_ERR_ILLEGAL_PARAMETER;
    switch (q->subcommand) {
    case SCI_Q_DEVICE_COUNT: *(unsigned *)q->data = (unsigned)n; return SCI_ERR_OK;
    case SCI_Q_DEVICE_FDID_BY_NAME: {
        sci_smartio_device_name_t *w = q->data;
        int id = w->name ? sio_find(w->name) : -EINVAL;
        if (id < 0 || id >= n || id >= 256)
            return w->name ? SCI_ERR_DEVICE_NOT_FOUND : SCI_ERR_ILLEGAL_PARAMETER;
        w->fdid = sci_fdid((uint32_t)id, all[id].node_id);
        return SCI_ERR_OK;
    }
    case SCI_Q_DEVICE_INFO: {
        int id = sci_fdid_device(q->fdid);
        if (id < 0 || id >= 256)
            return SCI_ERR_DEVICE_NOT_FOUND;
        const struct sio_info *x = &all[id];
        sci_smartio_device_info_t *o = q->data;
        memset(o, 0, sizeof *o);
        o->fdid = q->fdid;
        o->node_id = x->node_id;
        o->vendor_id = x->vendor;
        o->device_id = x->device;
        o->class_code = x->class_code;
        o->available = x->available;
        o->borrowers = x->borrowers;
        snprintf(o->name, sizeof o->name, "%s", x->name);
        snprintf(o->type, sizeof o->type, "%s", x->type);
        return SCI_ERR_OK;
    }
    }
    return SCI_ERR_ILLEGAL_QUERY;
}

void SCIQuery(unsigned int command, void *data, unsigned int flags, sci_error_t *error)
{
    if (!data) {
        sci_set(error, SCI_ERR_ILLEGAL_PARAMETER);
        return;
    }
    if (flags) {
        sci_set(error, SCI_ERR_ILLEGAL_FLAG);
        return;
    }
    switch (command) {
    case SCI_Q_VENDORID: sci_set(error, string("ntblend", data)); return;
    case SCI_Q_API: sci_set(error, string("SISCI API 2 (ntblend libsisci)", data)); return;
    case SCI_Q_ADAPTER: sci_set(error, adapter(data)); return;
    case SCI_Q_SYSTEM: sci_set(error, system_q(data)); return;
    case SCI_Q_DEVICE: sci_set(error, device(data)); return;
    }
    sci_set(error, SCI_ERR_ILLEGAL_QUERY);
}
