/*
 * The manager protocol: how clients of an NVMe ask its manager for queue pairs and admin
 * commands (docs/nvme-driver.md, "Many hosts, one NVMe").
 *
 * Everything crosses the fabric as the hardware would carry it, never a socket:
 *  - A request is an interrupt with data (seg_intr_trigger_data(), at most 64 bytes) to the
 *    manager's interrupt, whose id follows from the device id (NVL_MGR_INTR); the manager's
 *    node is in the device's SmartIO record (struct sio_info.manager_node).
 *  - The answer is stored by the manager into a segment the client created (struct
 *    nvl_mgr_rsp, its sequence number last), followed by a trigger of the client's interrupt.
 *
 * A client says HELLO with its segment and interrupt ids and a random token; the manager gives
 * it a slot. Every later request names the slot and token. Requests carry a sequence number:
 * a client that hears nothing sends the same request again, and the manager answers a repeat
 * without doing it twice. Triggers may be lost (the manager's interrupt holds the last 32;
 * a downed link drops them): the client's retries cover that.
 */
#ifndef NTBLEND_NVME_MGR_WIRE_H
#define NTBLEND_NVME_MGR_WIRE_H

#include <stdint.h>

#define NVL_MGR_MAGIC 0x474d564eu                      /* "NVMG" */
#define NVL_MGR_INTR(dev) (0x4e560000u | ((dev) & 0xffffu)) /* the manager's interrupt id */

enum nvl_mgr_op {
    NVL_MGR_HELLO = 1, /* become a client: u.hello; answer: slot in dw0, identity in data */
    NVL_MGR_BYE,       /* leave: the manager deletes what the client still owns */
    NVL_MGR_CREATE,    /* create an I/O queue pair: u.create; answer: its qid in dw0 */
    NVL_MGR_DELETE,    /* delete one: u.del */
    NVL_MGR_ADMIN,     /* Identify, Get Log Page, Get/Set Features: u.admin; data back */
};

struct nvl_mgr_req {
    uint32_t magic;
    uint16_t op, slot;
    uint32_t seq, token;
    /* Where the client takes answers (as in HELLO), so that a manager that has dropped it
     * (cut off, reclaimed) can still tell it so instead of leaving it to time out. */
    uint32_t from_node, from_seg, from_intr;
    union {
        struct {
            uint32_t node, pid, seg, intr;
        } hello;
        struct {
            uint64_t sq, cq;      /* device-side addresses, 4 KiB aligned */
            uint32_t depth;       /* entries of each queue */
            uint32_t irq;         /* 1: the CQ raises MSI-X vector <qid> */
        } create;
        struct {
            uint32_t qid;
        } del;
        struct {
            uint32_t opc, nsid, cdw10, cdw11, cdw12, cdw13, cdw14, cdw15;
        } admin;
    } u;
};
_Static_assert(sizeof(struct nvl_mgr_req) <= 64, "a request must fit an interrupt's data");

#define NVL_MGR_DATA 8192u
#define NVL_MGR_MSG 160u

/* The client's segment: written by the manager, read by the client. */
struct nvl_mgr_rsp {
    uint32_t seq;        /* the request answered; stored last */
    int32_t rc;          /* 0 or a negative errno */
    uint32_t dw0;        /* the command's result, the qid, the slot */
    uint16_t status;     /* NVMe status (SCT << 8 | SC) */
    uint16_t pad;
    uint32_t len;        /* bytes of data */
    uint32_t pad2;
    char msg[NVL_MGR_MSG]; /* with rc: what went wrong, in words */
    uint8_t data[NVL_MGR_DATA];
};

/* The data of the answer to HELLO: what the client needs to know of the controller. */
#define NVL_MGR_NS_MAX 128u
struct nvl_mgr_hello {
    uint64_t cap;
    uint32_t vs, max_qpairs;
    uint32_t nns, pad;
    struct {
        uint32_t nsid, lba_shift;
        uint64_t blocks;
    } ns[NVL_MGR_NS_MAX];
    uint8_t id_ctrl[4096]; /* Identify Controller */
};
_Static_assert(sizeof(struct nvl_mgr_hello) <= NVL_MGR_DATA, "HELLO data must fit");

#endif
