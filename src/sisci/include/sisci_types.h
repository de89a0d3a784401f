/*
 * sisci_types.h - the types, flags and constants of the SISCI-compatible API (libsisci over
 * ntblend): opaque handles, callback signatures, the states that calls report, and the flags
 * that calls take. Names and signatures are those SISCI programs use (docs/sisci.md); flag
 * and enum values are ntblend's own, so programs must use the names, never the numbers.
 */
#ifndef NTBLEND_SISCI_TYPES_H
#define NTBLEND_SISCI_TYPES_H

#include "dis/dis_types.h"
#include "sisci_error.h"

/* ---- opaque handles (never dereferenced by programs; a freed one is refused, not used) */
typedef struct sci_desc *sci_desc_t;
typedef struct sci_local_segment *sci_local_segment_t;
typedef struct sci_remote_segment *sci_remote_segment_t;
typedef struct sci_map *sci_map_t;
typedef struct sci_sequence *sci_sequence_t;
typedef struct sci_dma_queue *sci_dma_queue_t;
typedef struct sci_local_interrupt *sci_local_interrupt_t;
typedef struct sci_remote_interrupt *sci_remote_interrupt_t;
typedef struct sci_local_data_interrupt *sci_local_data_interrupt_t;
typedef struct sci_remote_data_interrupt *sci_remote_data_interrupt_t;
typedef struct sci_smartio_device *sci_device_t;  /* a borrowed SmartIO device */
typedef sci_device_t sci_smartio_device_t;        /* the newer name of the same */

typedef dis_ioaddr_t sci_ioaddr_t;

/* ---- what callbacks return: keep calling this callback, or stop */
typedef enum {
    SCI_CALLBACK_CANCEL = 1,
    SCI_CALLBACK_CONTINUE,
} sci_callback_action_t;

/* ---- segment events (callbacks and SCIWaitFor*SegmentEvent) */
typedef enum {
    SCI_CB_CONNECT = 1,     /* a node connected to a local segment */
    SCI_CB_DISCONNECT,      /* a node disconnected / the owner removed a remote segment */
    SCI_CB_NOT_OPERATIONAL, /* the path to the segment went down */
    SCI_CB_OPERATIONAL,     /* ... and came back */
    SCI_CB_LOST,            /* the connection is lost for good (owner gone): disconnect */
} sci_segment_cb_reason_t;

/* ---- SCIStartSequence / SCICheckSequence */
typedef enum {
    SCI_SEQ_OK = 0,        /* nothing was lost since the sequence started */
    SCI_SEQ_RETRIABLE,     /* the path failed and recovered: redo the transfers */
    SCI_SEQ_NOT_RETRIABLE, /* the path is down or the owner rebooted: reconnect */
    SCI_SEQ_PENDING,
} sci_sequence_status_t;

/* ---- DMA queue states */
typedef enum {
    SCI_DMAQUEUE_IDLE = 0,
    SCI_DMAQUEUE_GATHER,
    SCI_DMAQUEUE_POSTED,
    SCI_DMAQUEUE_DONE,
    SCI_DMAQUEUE_ABORTED,
    SCI_DMAQUEUE_ERROR,
} sci_dma_queue_state_t;

/* ---- callbacks (called from a library thread; see docs/sisci.md) */
typedef sci_callback_action_t (*sci_cb_local_segment_t)(void *arg, sci_local_segment_t segment,
                                                         sci_segment_cb_reason_t reason,
                                                         unsigned int nodeId,
                                                         unsigned int localAdapterNo,
                                                         sci_error_t error);
typedef sci_callback_action_t (*sci_cb_remote_segment_t)(void *arg, sci_remote_segment_t segment,
                                                          sci_segment_cb_reason_t reason,
                                                          sci_error_t status);
typedef sci_callback_action_t (*sci_cb_dma_t)(void *arg, sci_dma_queue_t queue, sci_error_t status);
typedef sci_callback_action_t (*sci_cb_interrupt_t)(void *arg, sci_local_interrupt_t interrupt,
                                                     sci_error_t status);
typedef sci_callback_action_t (*sci_cb_data_interrupt_t)(void *arg,
                                                          sci_local_data_interrupt_t interrupt,
                                                          void *data, unsigned int length,
                                                          sci_error_t status);

/* ---- timeouts (milliseconds) */
#define SCI_INFINITE_TIMEOUT 0xffffffffu

/* ---- flags (each call says which it takes; any other is SCI_ERR_ILLEGAL_FLAG) */
#define SCI_NO_FLAGS 0u
#define SCI_FLAG_FIXED_INTNO 0x1u          /* interrupts: use *interruptNo as given */
#define SCI_FLAG_FIXED_MAP_ADDR 0x2u       /* maps: at addr (not supported) */
#define SCI_FLAG_READONLY_MAP 0x4u         /* maps: loads only; a store faults */
#define SCI_FLAG_USE_CALLBACK 0x8u         /* call the callback instead of waiting */
#define SCI_FLAG_BLOCK_READ 0x10u          /* SCIMemCpy: copy from the remote map */
#define SCI_FLAG_THREAD_SAFE 0x20u         /* SCIOpen: accepted (the library always is) */
#define SCI_FLAG_ERROR_CHECK 0x40u         /* SCIMemCpy/SCIMemWrite: check the sequence */
#define SCI_FLAG_PRIVATE 0x80u             /* segments: only this process / device memory
                                            * of this borrower */
#define SCI_FLAG_SHARED 0x100u             /* device memory shared by all borrowers */
#define SCI_FLAG_EMPTY 0x200u              /* SCICreateSegment: memory attached later */
#define SCI_FLAG_IO_MAP_IOSPACE 0x400u     /* maps: uncached I/O space (a device's registers) */
#define SCI_FLAG_DMA_READ 0x800u           /* DMA: remote -> local */
#define SCI_FLAG_DMA_WAIT 0x1000u          /* DMA: return when the transfer is done */
#define SCI_FLAG_LOCK_USER_MEM 0x2000u     /* SCIRegisterSegmentMemory: pin the pages */
#define SCI_FLAG_CUDA_BUFFER 0x4000u       /* SCIAttachPhysicalMemory: a CUDA pointer */
#define SCI_FLAG_BAR 0x8000u               /* SCIConnectDeviceMemory: a BAR of the device */
#define SCI_FLAG_EXCLUSIVE 0x10000u        /* SCIBorrowDevice: no other host may use it */
#define SCI_FLAG_CACHE_FLUSH 0x20000u      /* SCICacheSync */
#define SCI_FLAG_CACHE_INVALIDATE 0x40000u /* SCICacheSync */
#define SCI_FLAG_PCIE_REQUESTER_GLOBAL 0x80000u
#define SCI_FLAG_AUTO_ID 0x100000u         /* SCICreateSegment: pick a free segment id */
#define SCI_FLAG_FORCE_DISCONNECT 0x200000u /* SCIRemoveSegment: even while connected */
#define SCI_FLAG_DMA_GLOBAL 0x400000u      /* SCICreateDMAQueue: accepted, one engine here */
#define SCI_FLAG_DMA_ADAPTER 0x800000u     /* SCICreateDMAQueue: the adapter's engine */
#define SCI_FLAG_BROADCAST 0x1000000u      /* (not supported: no multicast on the fabric) */

/* ---- SCIQuery() */
#define SCI_Q_VENDORID 1u       /* data: sci_query_string_t */
#define SCI_Q_API 2u            /* data: sci_query_string_t */
#define SCI_Q_ADAPTER 3u        /* data: sci_query_adapter_t */
#define SCI_Q_SYSTEM 4u         /* data: sci_query_system_t */
#define SCI_Q_DEVICE 5u         /* data: sci_smartio_query_device_t */
#define SCI_Q_LOCAL_SEGMENT 6u  /* data: sci_query_local_segment_t */
#define SCI_Q_REMOTE_SEGMENT 7u /* data: sci_query_remote_segment_t */
#define SCI_Q_MAP 8u            /* data: sci_query_map_t */

/* sci_query_adapter_t.subcommand (data is an unsigned int unless said otherwise) */
#define SCI_Q_ADAPTER_NODEID 1u
#define SCI_Q_ADAPTER_SERIAL_NUMBER 2u
#define SCI_Q_ADAPTER_CARD_TYPE 3u
#define SCI_Q_ADAPTER_CONFIGURED 4u
#define SCI_Q_ADAPTER_LINK_OPERATIONAL 5u
#define SCI_Q_ADAPTER_NUMBER_OF_PEERS 6u   /* nodes this adapter reaches directly */
#define SCI_Q_ADAPTER_DMA_MTU 7u           /* largest single DMA transfer, bytes */
#define SCI_Q_ADAPTER_DMA_SIZE_ALIGNMENT 8u
#define SCI_Q_ADAPTER_DMA_OFFSET_ALIGNMENT 9u
#define SCI_Q_ADAPTER_SUGGESTED_MIN_DMA_SIZE 10u
#define SCI_Q_ADAPTER_NAME 11u             /* data: char[64] */
/* sci_query_system_t.subcommand */
#define SCI_Q_SYSTEM_NUMBER_OF_ADAPTERS 1u /* adapters of this host */
#define SCI_Q_SYSTEM_NUMBER_OF_NODES 2u    /* hosts of the fabric */
#define SCI_Q_SYSTEM_LOCAL_NODEID 3u       /* this host's node id */
/* sci_smartio_query_device_t.subcommand */
#define SCI_Q_DEVICE_INFO 1u               /* data: sci_smartio_device_info_t */
#define SCI_Q_DEVICE_COUNT 2u              /* data: unsigned int, devices in the fabric */
#define SCI_Q_DEVICE_FDID_BY_NAME 3u       /* data: sci_smartio_device_name_t */

typedef struct {
    char *str;           /* filled with a NUL-terminated string */
    unsigned int length; /* bytes at str */
} sci_query_string_t;

typedef struct {
    unsigned int subcommand;
    unsigned int localAdapterNo;
    unsigned int portNo;
    void *data;
} sci_query_adapter_t;

typedef struct {
    unsigned int subcommand;
    void *data;
} sci_query_system_t;

typedef struct {
    unsigned long long fdid; /* the fabric device id, as SCIBorrowDevice takes it */
    unsigned int subcommand;
    void *data;
} sci_smartio_query_device_t;

typedef struct {
    unsigned long long fdid;
    unsigned int node_id;    /* the lender's node id */
    unsigned short vendor_id, device_id;
    unsigned int class_code;
    unsigned int available;  /* lent out by its host */
    unsigned int borrowers;  /* hosts borrowing it now */
    char name[32];           /* ntblend's name ("nvme0") */
    char type[32];           /* its model ("nvme", "accel") */
} sci_smartio_device_info_t;

typedef struct {
    const char *name;        /* in: ntblend's device name */
    unsigned long long fdid; /* out */
} sci_smartio_device_name_t;

typedef struct {
    sci_local_segment_t segment;
    unsigned int subcommand; /* SCI_Q_LOCAL_SEGMENT_PHYS_ADDR */
    union {
        sci_ioaddr_t ioaddr;
    } data;
} sci_query_local_segment_t;
#define SCI_Q_LOCAL_SEGMENT_PHYS_ADDR 1u

typedef struct {
    sci_remote_segment_t segment;
    unsigned int subcommand; /* SCI_Q_REMOTE_SEGMENT_IOADDR */
    union {
        sci_ioaddr_t ioaddr;
    } data;
} sci_query_remote_segment_t;
#define SCI_Q_REMOTE_SEGMENT_IOADDR 1u

typedef struct {
    sci_map_t map;
    unsigned int subcommand; /* SCI_Q_MAP_MAPPED_TO_LOCAL_TARGET */
    unsigned int data;
} sci_query_map_t;
#define SCI_Q_MAP_MAPPED_TO_LOCAL_TARGET 1u

#endif
