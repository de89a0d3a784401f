/*
 * NVMe base specification definitions (1.4): controller registers and their fields, queue
 * entries, opcodes, identify/feature/log identifiers and status codes. Only what the
 * specification defines, shared by the controller model (src/devices, whose own choices are in
 * nvme_ctrl.h), libntbnvme and any driver written against ntblend's NVMe. See
 * docs/nvme-model.md and docs/nvme-driver.md.
 */
#ifndef NTBLEND_NVME_SPEC_H
#define NTBLEND_NVME_SPEC_H

#include <stdbool.h>
#include <stdint.h>

/* ---- controller registers (BAR0) ---- */
#define NVME_REG_CAP 0x00
#define NVME_REG_VS 0x08
#define NVME_REG_INTMS 0x0c
#define NVME_REG_INTMC 0x10
#define NVME_REG_CC 0x14
#define NVME_REG_CSTS 0x1c
#define NVME_REG_NSSR 0x20
#define NVME_REG_AQA 0x24
#define NVME_REG_ASQ 0x28
#define NVME_REG_ACQ 0x30
#define NVME_REG_CMBLOC 0x38
#define NVME_REG_CMBSZ 0x3c
#define NVME_REG_DBS 0x1000

#define NVME_VS_1_4 0x00010400u

/* CAP fields */
#define NVME_CAP_MQES(cap) ((uint32_t)((cap) & 0xffff))          /* 0-based entries per queue */
#define NVME_CAP_TO(cap) ((uint32_t)((cap) >> 24) & 0xffu)        /* ready timeout, 500 ms units */
#define NVME_CAP_DSTRD(cap) ((uint32_t)((cap) >> 32) & 0xfu)      /* doorbell stride, 4 << DSTRD */
#define NVME_CAP_CSS_NVM(cap) ((uint32_t)((cap) >> 37) & 1u)      /* NVM command set supported */
#define NVME_CAP_MPSMIN(cap) ((uint32_t)((cap) >> 48) & 0xfu)     /* page size 4 KiB << MPSMIN */

#define NVME_CC_EN 0x1u
#define NVME_CC_CSS(cc) (((cc) >> 4) & 7u)
#define NVME_CC_MPS(cc) (((cc) >> 7) & 0xfu)
#define NVME_CC_AMS(cc) (((cc) >> 11) & 7u)
#define NVME_CC_SHN(cc) (((cc) >> 14) & 3u)
#define NVME_CC_IOSQES(cc) (((cc) >> 16) & 0xfu)
#define NVME_CC_IOCQES(cc) (((cc) >> 20) & 0xfu)
#define NVME_CC_SET_IOSQES(v) ((uint32_t)(v) << 16)
#define NVME_CC_SET_IOCQES(v) ((uint32_t)(v) << 20)
#define NVME_CC_SHN_NORMAL (1u << 14)

#define NVME_CSTS_RDY 0x1u
#define NVME_CSTS_CFS 0x2u
#define NVME_CSTS_SHST_MASK (3u << 2)
#define NVME_CSTS_SHST_OCCURRING (1u << 2)
#define NVME_CSTS_SHST_COMPLETE (2u << 2)


/* ---- queue entries ---- */
struct nvme_sqe {
    uint8_t opc;
    uint8_t flags; /* FUSE 1:0, PSDT 7:6 */
    uint16_t cid;
    uint32_t nsid;
    uint32_t cdw2, cdw3;
    uint64_t mptr;
    uint64_t prp1, prp2;
    uint32_t cdw10, cdw11, cdw12, cdw13, cdw14, cdw15;
};

struct nvme_cqe {
    uint32_t dw0;
    uint32_t dw1;
    uint16_t sqhd;
    uint16_t sqid;
    uint16_t cid;
    uint16_t status; /* P 0, SC 8:1, SCT 11:9, CRD 13:12, M 14, DNR 15 */
};

_Static_assert(sizeof(struct nvme_sqe) == 64, "SQE is 64 bytes");
_Static_assert(sizeof(struct nvme_cqe) == 16, "CQE is 16 bytes");

/* Create I/O Completion/Submission Queue, dword 11 */
#define NVME_QUEUE_PC 1u /* physically contiguous */
#define NVME_CQ_IEN 2u   /* completion queue: interrupts enabled */
/* Read/Write dword 12, Dataset Management dword 11 */
#define NVME_RW_FUA (1u << 30)
#define NVME_DSM_AD (1u << 2)

/* ---- opcodes ---- */
enum {
    NVME_ADM_DELETE_SQ = 0x00, NVME_ADM_CREATE_SQ = 0x01, NVME_ADM_GET_LOG = 0x02,
    NVME_ADM_DELETE_CQ = 0x04, NVME_ADM_CREATE_CQ = 0x05, NVME_ADM_IDENTIFY = 0x06,
    NVME_ADM_ABORT = 0x08, NVME_ADM_SET_FEATURES = 0x09, NVME_ADM_GET_FEATURES = 0x0a,
    NVME_ADM_AER = 0x0c,
};
enum {
    NVME_CMD_FLUSH = 0x00, NVME_CMD_WRITE = 0x01, NVME_CMD_READ = 0x02,
    NVME_CMD_WRITE_ZEROES = 0x08, NVME_CMD_DSM = 0x09,
};

/* Identify CNS */
#define NVME_CNS_NS 0x00
#define NVME_CNS_CTRL 0x01
#define NVME_CNS_NS_LIST 0x02
#define NVME_CNS_NS_DESCS 0x03
#define NVME_CNS_CTRL_LIST 0x13      /* controllers in the NVM subsystem (CNTLID >= CDW10.CNTID) */
#define NVME_CNS_PRIMARY_CAPS 0x14   /* Primary Controller Capabilities (SR-IOV) */
#define NVME_CNS_SECONDARY_LIST 0x15 /* Secondary Controller List (SR-IOV) */

/* Identify Controller: byte offsets of fields a host driver reads, and ONCS bits */
#define NVME_ID_MDTS 77
#define NVME_ID_NN 516
#define NVME_ID_ONCS 520
#define NVME_ONCS_DSM (1u << 2)
#define NVME_ONCS_WRITE_ZEROES (1u << 3)

/* Feature identifiers */
enum {
    NVME_FEAT_ARB = 0x01, NVME_FEAT_POWER = 0x02, NVME_FEAT_TEMP = 0x04, NVME_FEAT_ERR_REC = 0x05,
    NVME_FEAT_VWC = 0x06, NVME_FEAT_NUM_QUEUES = 0x07, NVME_FEAT_IRQ_COALESCE = 0x08,
    NVME_FEAT_IRQ_CONFIG = 0x09, NVME_FEAT_WRITE_ATOMIC = 0x0a, NVME_FEAT_ASYNC_EVENT = 0x0b,
};
/* Arbitration feature, dword 11: Arbitration Burst, 2^AB commands per SQ per turn (NVMe 1.4
 * §5.21.1.1); 7 means no limit. */
#define NVME_ARB_AB(v) ((v) & 7u)
#define NVME_ARB_AB_NO_LIMIT 7u

/* Log pages */
#define NVME_LOG_ERROR 0x01
#define NVME_LOG_SMART 0x02
#define NVME_LOG_FW_SLOT 0x03

/* ---- status: (SCT << 8) | SC; DNR added by the controller where the spec says so ---- */
#define NVME_SCT_GENERIC 0x0u
#define NVME_SCT_CMD 0x1u
#define NVME_SCT_MEDIA 0x2u
#define NVME_SC(sct, sc) ((uint16_t)(((sct) << 8) | (sc)))
enum {
    NVME_SUCCESS = 0x0000,
    NVME_INVALID_OPCODE = 0x0001,
    NVME_INVALID_FIELD = 0x0002,
    NVME_CID_CONFLICT = 0x0003,
    NVME_DATA_TRANSFER_ERROR = 0x0004,
    NVME_ABORTED_POWER_LOSS = 0x0005,
    NVME_INTERNAL_ERROR = 0x0006,
    NVME_ABORT_REQUESTED = 0x0007,
    NVME_ABORT_SQ_DELETION = 0x0008,
    NVME_INVALID_NAMESPACE = 0x000b,
    NVME_CMD_SEQ_ERROR = 0x000c,
    NVME_INVALID_PRP_OFFSET = 0x0013,
    NVME_LBA_RANGE = 0x0080,
    NVME_CQ_INVALID = 0x0100,
    NVME_INVALID_QID = 0x0101,
    NVME_INVALID_QSIZE = 0x0102,
    NVME_AERL_EXCEEDED = 0x0105,
    NVME_INVALID_VECTOR = 0x0108,
    NVME_INVALID_LOG_PAGE = 0x0109,
    NVME_INVALID_QUEUE_DELETION = 0x010c,
    NVME_FEAT_NOT_SAVEABLE = 0x010d,
    NVME_WRITE_FAULT = 0x0280,
    NVME_UNRECOVERED_READ = 0x0281,
};
#define NVME_DNR 0x8000u /* in struct nvme_cqe.status: bit 15 */

/* Async event types / info */
#define NVME_AER_TYPE_ERROR 0x0u
#define NVME_AER_INFO_INVALID_DB 0x01u
#define NVME_AER_INFO_INVALID_DB_VALUE 0x02u

#endif
