/*
 * The control protocol between a host's agent and the processes on that host (applications,
 * the CLI): fixed-size requests and replies over a SOCK_SEQPACKET Unix socket at
 * <fabric dir>/host<N>.sock. Control only — nothing on the data path uses it. The agent knows
 * each client's pid from SO_PEERCRED and releases everything a client held when it hangs up.
 */
#ifndef NTBLEND_AGENT_PROTO_H
#define NTBLEND_AGENT_PROTO_H

#include <stdint.h>

#define AGENT_PROTO_VERSION 1
/* AGENT_DEV_BORROW mode of a driver binding a function of its host's PCIe tree (the driver
 * model): its own function exclusively, or one the host holds (hot-added) under that hold. */
#define AGENT_BORROW_BIND 3u
/* AGENT_DEV_MAP's target when it is a multicast group of the switches: this | the group. */
#define AGENT_MAP_MCAST 0x80000000u

enum agent_op {
    AGENT_HELLO = 1,  /* a = protocol version -> a = host index, b = boot_gen */
    AGENT_ALLOC,      /* a = size, b = alignment (power of two >= 4096) -> a = phys */
    AGENT_FREE,       /* a = phys (-EBUSY while a connection's event word is in it) */
    AGENT_PING,       /* -> a = agent pid, b = boot_gen, c = bytes allocated by all clients */
    AGENT_PEER_PING,  /* a = peer host index -> a = round trip ns over the NTB mailbox */
    AGENT_STATS,      /* -> a = clients, b = mailbox messages handled, c = DMA descriptors done */
    /* Segments (src/seg). Owners' agents keep the segment table; connections are RPCs between
     * agents over the NTB mailboxes. */
    AGENT_SEG_CREATE,     /* a = id (0: pick), b = size, c = phys of an own allocation to use
                           * (0: allocate) -> a = id, b = phys, c = size */
    AGENT_SEG_PREPARE,    /* a = id, b = adapter index on this host */
    AGENT_SEG_AVAILABLE,  /* a = id, b = adapter index, c = 1 available / 0 unavailable */
    AGENT_SEG_REMOVE,     /* a = id */
    AGENT_SEG_CONNECT,    /* flags = adapter index, a = owner node id, b = id, c = phys of the
                           * client's event word, in memory it allocated (-EINVAL otherwise)
                           * -> a = bus address at the owner, b = size,
                           * c = owner host index << 32 | connection id */
    AGENT_SEG_DISCONNECT, /* a = owner host index, b = connection id */
    AGENT_INTR_CREATE,    /* a = id (0: pick) -> a = id, b = phys of its interrupt page */
    AGENT_INTR_REMOVE,    /* a = id */
    AGENT_INTR_CONNECT,   /* flags = adapter index, a = owner node id, b = id -> a = bus address
                           * of the interrupt page at the owner, b = owner host index */
    /* SmartIO device lending (src/smartio). a = function index (fabric-wide device id). */
    AGENT_DEV_AVAILABLE,  /* on the lender: b = 1 lend it out / 0 withdraw it */
    AGENT_DEV_BORROW,     /* b = SIO_EXCLUSIVE, SIO_SHARED or AGENT_BORROW_BIND, c = 1: held
                           * by the host until returned (the CLI), 0: returned when this
                           * client hangs up */
    AGENT_DEV_SHARE,      /* exclusive -> shared */
    AGENT_DEV_RETURN,
    AGENT_DEV_MAP,        /* a = function | (lender adapter + 1) << 32 (0: any; the lender's
                           * end of the path chosen, sio_set_path), b = target host index,
                           * c = bus address there, flags = pages -> a = device-side I/O
                           * address, b = mapping id. b = AGENT_MAP_MCAST | group: c is an
                           * offset in the multicast group's window */
    AGENT_DEV_UNMAP,      /* b = mapping id */
    AGENT_SEG_ALLOC_AT,   /* a = host index, b = size -> a = id of a segment that host's agent
                           * created for us, available on its adapter facing us */
    AGENT_SEG_FREE_AT,    /* a = host index, b = id */
    AGENT_DEV_HOTADD,     /* a = function: hot-add it, lent by another host, into this host's
                           * PCIe tree (Device Lending) */
    AGENT_DEV_HOTREMOVE,  /* a = function: hot-remove it from this host's tree */
    AGENT_MEMORY,         /* -> a = bytes processes hold, b = bytes segments hold (also those
                           * removed but still connected, and those placed for other hosts),
                           * c = bytes in the interrupt-page pool */
    AGENT_DEV_APERTURE,   /* a = function lent to this host and bound by the caller, b = 1
                           * take / 0 release -> a = device-side address of the caller's
                           * slice of the lender's DMA aperture, b = its I/O virtual address
                           * in this host's IOMMU domain for traffic from that lender,
                           * c = its size */
    AGENT_DEV_SEGMENT,    /* a = function borrowed by this host, b = number, c = size -> a =
                           * id, at the function's lender, of its device memory segment
                           * `number` (made with size bytes by the first request) */
    AGENT_DEV_MAP_AT,     /* as AGENT_DEV_MAP, at a device-side I/O address the caller chooses
                           * (a guest-physical address: IOVA = GPA): a = function | target
                           * host index << 32, b = bus address there, c = the I/O address,
                           * flags = pages -> a = c, b = mapping id. Needs the lender's IOMMU
                           * (-EOPNOTSUPP without); -EEXIST when the range overlaps another
                           * mapping of the device; c must have b's offset in its page */
    AGENT_SEG_WATCH,      /* a = id of the caller's segment, b = phys of a page of its own
                           * (struct seg_conn_events): post the segment's connections there */
};

struct agent_req {
    uint32_t op;
    uint32_t flags;
    uint64_t a, b, c;
};

struct agent_rsp {
    int32_t rc; /* 0 or -errno */
    uint32_t pad;
    uint64_t a, b, c;
};

/* Connect to host `host`'s agent of the fabric in directory `dir`; fd or -errno. */
int agent_connect(const char *dir, uint32_t host);
/* One request/reply exchange; returns rsp->rc, or -errno on a transport failure. */
int agent_call(int fd, const struct agent_req *req, struct agent_rsp *rsp, int timeout_ms);

#endif
