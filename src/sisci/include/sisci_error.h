/*
 * sisci_error.h - the error codes of the SISCI-compatible API (libsisci over ntblend).
 *
 * Every SISCI call reports its outcome through a final `sci_error_t *error` argument.
 * SCIGetErrorString() turns a code into a sentence that says what to do. The names are the
 * ones SISCI programs test for; the values are ntblend's own (programs compare names, not
 * numbers). docs/sisci.md lists which call returns which code.
 */
#ifndef NTBLEND_SISCI_ERROR_H
#define NTBLEND_SISCI_ERROR_H

typedef enum {
    SCI_ERR_OK = 0x000,
    SCI_ERR_BUSY = 0x900,               /* still in use (mapped, connected, queued): retry */
    SCI_ERR_FLAG_NOT_IMPLEMENTED,       /* a flag this implementation does not honour */
    SCI_ERR_ILLEGAL_FLAG,               /* a flag the call does not take */
    SCI_ERR_NOSPC,                      /* out of a resource (memory, ids) */
    SCI_ERR_API_NOSPC,
    SCI_ERR_HW_NOSPC,                   /* out of LUT entries, requester IDs or channels */
    SCI_ERR_NOT_IMPLEMENTED,
    SCI_ERR_ILLEGAL_ADAPTERNO,
    SCI_ERR_NO_SUCH_ADAPTERNO,          /* this host has no adapter with that number */
    SCI_ERR_TIMEOUT,
    SCI_ERR_OUT_OF_RANGE,               /* offset or size past the end of the segment */
    SCI_ERR_NO_SUCH_SEGMENT,            /* no segment with that id on that node */
    SCI_ERR_ILLEGAL_NODEID,
    SCI_ERR_CONNECTION_REFUSED,         /* the segment exists but is not available */
    SCI_ERR_SEGMENT_NOT_CONNECTED,
    SCI_ERR_SIZE_ALIGNMENT,             /* size not a multiple of the required alignment */
    SCI_ERR_OFFSET_ALIGNMENT,           /* offset not aligned as required */
    SCI_ERR_ILLEGAL_PARAMETER,          /* a NULL, freed or foreign handle, a NULL pointer, a
                                         * zero size or a bad value */
    SCI_ERR_MAX_ENTRIES,                /* the DMA queue holds as many transfers as it takes */
    SCI_ERR_SEGMENT_NOT_PREPARED,       /* SCIPrepareSegment() on that adapter first */
    SCI_ERR_ILLEGAL_ADDRESS,            /* the address cannot be used for this */
    SCI_ERR_ILLEGAL_OPERATION,          /* not allowed on this object or in its state */
    SCI_ERR_ILLEGAL_QUERY,              /* SCIQuery() command or subcommand unknown */
    SCI_ERR_SEGMENTID_USED,             /* that segment id is taken on this node */
    SCI_ERR_SYSTEM,                     /* the system refused (see errno) */
    SCI_ERR_CANCELLED,                  /* aborted */
    SCI_ERR_NOT_CONNECTED,              /* the connection is gone (link down, owner removed) */
    SCI_ERR_NOT_AVAILABLE,              /* the remote segment was set unavailable */
    SCI_ERR_INCONSISTENT_VERSIONS,
    SCI_ERR_COND_INTERRUPT,
    SCI_ERR_OVERFLOW,                   /* the data did not fit the buffer given */
    SCI_ERR_NOT_INITIALIZED,            /* SCIInitialize() first */
    SCI_ERR_ACCESS,                     /* not allowed to this caller */
    SCI_ERR_NOT_SUPPORTED,              /* ntblend cannot do this (docs/sisci.md says why) */
    SCI_ERR_DEPRECATED,
    SCI_ERR_DEVICE_NOT_FOUND,           /* no SmartIO device with that fabric device id */
    SCI_ERR_DEVICE_BUSY,                /* the device is held in a way that excludes this */
    SCI_ERR_NO_LINK_ACCESS,             /* no path to that node (link down, not a peer) */
    SCI_ERR_NO_REMOTE_LINK_ACCESS,
    SCI_ERR_NO_SUCH_NODEID,             /* no node with that id in the fabric */
    SCI_ERR_NODE_NOT_RESPONDING,        /* that node's host is down */
    SCI_ERR_NO_SUCH_INTNO,              /* no interrupt with that number on that node */
    SCI_ERR_DMA_NOT_AVAILABLE,          /* every DMA channel of the adapter is taken */
    SCI_ERR_DMA_DISABLED,
    SCI_ERR_NOT_BORROWED,               /* the device is not borrowed through this handle */
    SCI_ERR_TRANSFER_FAILED,            /* a DMA transfer failed (IOMMU fault, master abort) */
    SCI_ERR_SEGMENT_REMOVED,            /* the owner removed the segment */
} sci_error_t;

#endif
