/*
 * The NVMe controller model (src/devices/nvmc.c), its registers and admin commands: the test is
 * the driver on the lender host (host a of smartio3.ini), using the fabric model directly —
 * registers through the BAR file, queues and data in host a's RAM above 300 MiB — and checks
 * what the NVMe base specification says the controller does on enable, reset and shutdown,
 * Identify, queue creation and deletion, features, log pages, Abort and asynchronous events;
 * then a second, smaller controller's configuration (tests/system/topologies/nvme-small.ini).
 * The I/O commands are test_nvme_io's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>
#include <sys/stat.h>

#include "fixture.h"
#include "fabric.h"
#include "nvmc_ctrl.h" /* the model's limits and BAR layout */
#include "nvme_drv.h"

static struct fx FX; /* the NVMe models' images in a directory of its own (FX.nvme_dir) */
static struct nvd D;

#define NLBA (1ull << 18) /* 1 GiB of 4 KiB blocks */

static int setup(void **state)
{
    return nvd_fx_setup(state, &FX, "nvme-admin", "examples/topologies/smartio3.ini", &D, "nvme0");
}

/* ---------------------------------------------------------------- registers */

static void test_registers(void **state)
{
    uint64_t cap = nvd_r64(&D, NVME_REG_CAP);
    assert_int_equal(cap & 0xffff, NVMC_MQES);
    assert_true(cap & (1ull << 16));              /* CQR */
    assert_int_equal((cap >> 17) & 3, 0);         /* AMS: round robin only */
    assert_true(((cap >> 24) & 0xff) > 0);        /* TO */
    assert_int_equal((cap >> 32) & 0xf, 0);       /* DSTRD */
    assert_true(cap & (1ull << 37));              /* CSS: NVM */
    assert_int_equal((cap >> 48) & 0xf, 0);       /* MPSMIN 4K */
    assert_int_equal((cap >> 52) & 0xf, 4);       /* MPSMAX 64K */
    assert_int_equal((cap >> 57) & 1, 0);         /* no CMB */
    assert_int_equal(nvd_r32(&D, NVME_REG_VS), 0x00010400);
    assert_int_equal(nvd_r32(&D, NVME_REG_CMBSZ), 0);
    assert_int_equal(nvd_r32(&D, NVME_REG_CSTS), 0); /* disabled at power-on */
    /* MSI-X table: queues + 1 vectors. */
    assert_int_equal((fab_cfg_read(FX.f, D.fn, FAB_CFG_MSIX + 2, 2) & 0x7ff) + 1, 33);
}

static void test_enable_disable_shutdown(void **state)
{
    assert_int_equal(nvd_disable(&D), 0);
    /* Misaligned admin queue: controller fatal status, not ready. */
    D.brk = 0;
    uint64_t q = nvd_alloc(&D, 3 * NVD_PAGE, NVD_PAGE);
    assert_int_equal(nvd_enable_at(&D, 16, q + 64, q + NVD_PAGE), -EIO);
    assert_int_equal(nvd_r32(&D, NVME_REG_CSTS) & NVME_CSTS_RDY, 0);
    /* Reset clears CFS; a good enable becomes ready. */
    assert_int_equal(nvd_disable(&D), 0);
    assert_int_equal(nvd_r32(&D, NVME_REG_CSTS), 0);
    assert_int_equal(nvd_enable_at(&D, 16, q, q + NVD_PAGE), 0);
    assert_int_equal(nvd_r32(&D, NVME_REG_CSTS), NVME_CSTS_RDY);
    /* A command works. */
    uint64_t buf = nvd_alloc(&D, NVD_PAGE, NVD_PAGE);
    struct nvme_sqe s = nvd_sqe(NVME_ADM_IDENTIFY, 0);
    s.cdw10 = NVME_CNS_CTRL;
    nvd_prp(&D, &s, buf, NVD_PAGE);
    assert_int_equal(nvd_admin(&D, &s, NULL), 0);
    /* Normal shutdown: SHST complete, still ready. */
    nvd_w32(&D, NVME_REG_CC, nvd_r32(&D, NVME_REG_CC) | 1u << 14);
    assert_int_equal(nvd_wait_csts(&D, NVME_CSTS_SHST_MASK, NVME_CSTS_SHST_COMPLETE, 5000), 0);
    /* Disable after shutdown: everything clear; enable again. */
    assert_int_equal(nvd_disable(&D), 0);
    assert_int_equal(nvd_r32(&D, NVME_REG_CSTS), 0);
    /* Admin queue of one entry is invalid (ASQS 0). */
    nvd_w32(&D, NVME_REG_AQA, 0);
    nvd_w32(&D, NVME_REG_CC, NVME_CC_EN);
    assert_int_equal(nvd_wait_csts(&D, NVME_CSTS_CFS, NVME_CSTS_CFS, 5000), 0);
    assert_int_equal(nvd_reset(&D), 0);
}

static void test_reset_frees_queues(void **state)
{
    assert_int_equal(nvd_reset(&D), 0);
    assert_int_equal(nvd_io_pair(&D, 16), 0);
    assert_int_equal(nvd_create_cq(&D, 2, 16, false, 0), 0);
    assert_int_equal(nvd_reset(&D), 0);
    /* Everything is gone: the CQs do not exist, the SQ neither. */
    assert_int_equal(nvd_create_sq(&D, 1, 16, 1), NVME_CQ_INVALID);
    assert_int_equal(nvd_delete(&D, NVME_ADM_DELETE_SQ, 1), NVME_INVALID_QID);
    assert_int_equal(nvd_delete(&D, NVME_ADM_DELETE_CQ, 2), NVME_INVALID_QID);
    /* And they can be created again. */
    assert_int_equal(nvd_io_pair(&D, 16), 0);
}

/* ---------------------------------------------------------------- identify */

static void test_identify(void **state)
{
    assert_int_equal(nvd_reset(&D), 0);
    uint64_t buf = nvd_alloc(&D, NVD_PAGE, NVD_PAGE);
    uint8_t *p = nvd_ptr(&D, buf);
    struct nvme_sqe s = nvd_sqe(NVME_ADM_IDENTIFY, 0);
    s.cdw10 = NVME_CNS_CTRL;
    nvd_prp(&D, &s, buf, NVD_PAGE);
    assert_int_equal(nvd_admin(&D, &s, NULL), 0);
    uint16_t vid;
    uint32_t nn, ver;
    memcpy(&vid, p, 2);
    memcpy(&ver, p + 80, 4);
    memcpy(&nn, p + 516, 4);
    assert_int_equal(vid, 0x8086);
    assert_int_equal(p[77], 5);       /* MDTS */
    assert_int_equal(ver, 0x00010400);
    assert_int_equal(p[512], 0x66);   /* SQES */
    assert_int_equal(p[513], 0x44);   /* CQES */
    assert_int_equal(nn, 1);
    assert_int_equal(p[520] & 0x0c, 0x0c); /* ONCS: DSM, Write Zeroes */
    assert_int_equal(p[525] & 1, 1);  /* VWC */
    assert_int_equal(p[259], NVMC_AERL);
    assert_true(p[4] != 0 && p[4] != ' '); /* serial number */

    memset(p, 0xee, NVD_PAGE);
    s = nvd_sqe(NVME_ADM_IDENTIFY, 1);
    s.cdw10 = NVME_CNS_NS;
    nvd_prp(&D, &s, buf, NVD_PAGE);
    assert_int_equal(nvd_admin(&D, &s, NULL), 0);
    uint64_t nsze, ncap;
    memcpy(&nsze, p, 8);
    memcpy(&ncap, p + 8, 8);
    assert_int_equal(nsze, NLBA);
    assert_int_equal(ncap, NLBA);
    assert_int_equal(p[25], 0);  /* one LBA format */
    assert_int_equal(p[26], 0);  /* format 0 in use */
    assert_int_equal(p[130], 12); /* LBADS: 4096 B */

    struct nvme_cqe cqe;
    s = nvd_sqe(NVME_ADM_IDENTIFY, 0);
    s.cdw10 = NVME_CNS_NS;
    nvd_prp(&D, &s, buf, NVD_PAGE);
    assert_int_equal(nvd_admin(&D, &s, &cqe), NVME_INVALID_NAMESPACE);
    assert_true(nvd_dnr(&cqe));
    s.nsid = 2;
    assert_int_equal(nvd_admin(&D, &s, NULL), NVME_INVALID_NAMESPACE);

    /* Active namespace list: NSIDs greater than the one given. */
    s = nvd_sqe(NVME_ADM_IDENTIFY, 0);
    s.cdw10 = NVME_CNS_NS_LIST;
    nvd_prp(&D, &s, buf, NVD_PAGE);
    assert_int_equal(nvd_admin(&D, &s, NULL), 0);
    uint32_t l[2];
    memcpy(l, p, 8);
    assert_int_equal(l[0], 1);
    assert_int_equal(l[1], 0);
    s.nsid = 1;
    assert_int_equal(nvd_admin(&D, &s, NULL), 0);
    memcpy(l, p, 8);
    assert_int_equal(l[0], 0);
    s.nsid = 0xfffffffe;
    assert_int_equal(nvd_admin(&D, &s, NULL), NVME_INVALID_NAMESPACE);
    /* Unknown CNS. */
    s = nvd_sqe(NVME_ADM_IDENTIFY, 0);
    s.cdw10 = 0x55;
    nvd_prp(&D, &s, buf, NVD_PAGE);
    assert_int_equal(nvd_admin(&D, &s, &cqe), NVME_INVALID_FIELD);
    assert_true(nvd_dnr(&cqe));
    /* Unknown admin opcode. */
    s = nvd_sqe(0x7f, 0);
    assert_int_equal(nvd_admin(&D, &s, &cqe), NVME_INVALID_OPCODE);
    assert_true(nvd_dnr(&cqe));
    /* PSDT (SGLs) and fused operations are not supported. */
    s = nvd_sqe(NVME_ADM_IDENTIFY, 0);
    s.cdw10 = NVME_CNS_CTRL;
    nvd_prp(&D, &s, buf, NVD_PAGE);
    s.flags = 0x40;
    assert_int_equal(nvd_admin(&D, &s, NULL), NVME_INVALID_FIELD);
    s.flags = 0x01;
    assert_int_equal(nvd_admin(&D, &s, NULL), NVME_INVALID_FIELD);
}

/* ---------------------------------------------------------------- queues */

static int raw_create(uint8_t opc, uint32_t cdw10, uint32_t cdw11, uint64_t prp1)
{
    struct nvme_sqe s = nvd_sqe(opc, 0);
    s.cdw10 = cdw10;
    s.cdw11 = cdw11;
    s.prp1 = prp1;
    return nvd_admin(&D, &s, NULL);
}

static void test_queue_errors(void **state)
{
    assert_int_equal(nvd_reset(&D), 0);
    uint64_t mem = nvd_alloc(&D, 16 * NVD_PAGE, NVD_PAGE);
    uint32_t sz = 15u << 16;
    /* Create CQ */
    assert_int_equal(raw_create(NVME_ADM_CREATE_CQ, sz | 0, 1, mem), NVME_INVALID_QID);
    assert_int_equal(raw_create(NVME_ADM_CREATE_CQ, sz | 33, 1, mem), NVME_INVALID_QID);
    assert_int_equal(raw_create(NVME_ADM_CREATE_CQ, 0u << 16 | 1, 1, mem), NVME_INVALID_QSIZE);
    assert_int_equal(raw_create(NVME_ADM_CREATE_CQ, 4096u << 16 | 1, 1, mem), NVME_INVALID_QSIZE);
    assert_int_equal(raw_create(NVME_ADM_CREATE_CQ, sz | 1, 0, mem), NVME_INVALID_FIELD); /* PC=0 */
    assert_int_equal(raw_create(NVME_ADM_CREATE_CQ, sz | 1, 1, mem + 256), NVME_INVALID_PRP_OFFSET);
    assert_int_equal(raw_create(NVME_ADM_CREATE_CQ, sz | 1, 40u << 16 | 3, mem), NVME_INVALID_VECTOR);
    assert_int_equal(raw_create(NVME_ADM_CREATE_CQ, sz | 1, 1u << 16 | 3, mem), 0);
    assert_int_equal(raw_create(NVME_ADM_CREATE_CQ, sz | 1, 1, mem + NVD_PAGE), NVME_INVALID_QID);
    /* Create SQ */
    uint64_t sqm = mem + 2 * NVD_PAGE;
    assert_int_equal(raw_create(NVME_ADM_CREATE_SQ, sz | 1, 0u << 16 | 1, sqm), NVME_CQ_INVALID);
    assert_int_equal(raw_create(NVME_ADM_CREATE_SQ, sz | 1, 5u << 16 | 1, sqm), NVME_CQ_INVALID);
    assert_int_equal(raw_create(NVME_ADM_CREATE_SQ, sz | 0, 1u << 16 | 1, sqm), NVME_INVALID_QID);
    assert_int_equal(raw_create(NVME_ADM_CREATE_SQ, sz | 33, 1u << 16 | 1, sqm), NVME_INVALID_QID);
    assert_int_equal(raw_create(NVME_ADM_CREATE_SQ, 0 | 1, 1u << 16 | 1, sqm), NVME_INVALID_QSIZE);
    assert_int_equal(raw_create(NVME_ADM_CREATE_SQ, 5000u << 16 | 1, 1u << 16 | 1, sqm),
                     NVME_INVALID_QSIZE);
    assert_int_equal(raw_create(NVME_ADM_CREATE_SQ, sz | 1, 1u << 16, sqm), NVME_INVALID_FIELD);
    assert_int_equal(raw_create(NVME_ADM_CREATE_SQ, sz | 1, 1u << 16 | 1, sqm + 8),
                     NVME_INVALID_PRP_OFFSET);
    assert_int_equal(raw_create(NVME_ADM_CREATE_SQ, sz | 1, 1u << 16 | 1, sqm), 0);
    assert_int_equal(raw_create(NVME_ADM_CREATE_SQ, sz | 1, 1u << 16 | 1, sqm), NVME_INVALID_QID);
    /* Delete */
    struct nvme_cqe cqe;
    struct nvme_sqe s = nvd_sqe(NVME_ADM_DELETE_CQ, 0);
    s.cdw10 = 1;
    assert_int_equal(nvd_admin(&D, &s, &cqe), NVME_INVALID_QUEUE_DELETION);
    assert_true(nvd_dnr(&cqe));
    assert_int_equal(nvd_delete(&D, NVME_ADM_DELETE_SQ, 0), NVME_INVALID_QID);
    assert_int_equal(nvd_delete(&D, NVME_ADM_DELETE_SQ, 7), NVME_INVALID_QID);
    assert_int_equal(nvd_delete(&D, NVME_ADM_DELETE_CQ, 0), NVME_INVALID_QID);
    assert_int_equal(nvd_delete(&D, NVME_ADM_DELETE_CQ, 7), NVME_INVALID_QID);
    assert_int_equal(nvd_delete(&D, NVME_ADM_DELETE_SQ, 1), 0);
    assert_int_equal(nvd_delete(&D, NVME_ADM_DELETE_SQ, 1), NVME_INVALID_QID);
    assert_int_equal(nvd_delete(&D, NVME_ADM_DELETE_CQ, 1), 0);
    assert_int_equal(nvd_delete(&D, NVME_ADM_DELETE_CQ, 1), NVME_INVALID_QID);
}

static void test_queue_limit(void **state)
{
    assert_int_equal(nvd_reset(&D), 0);
    for (uint16_t q = 1; q <= 32; q++) {
        assert_int_equal(nvd_create_cq(&D, q, 4, false, 0), 0);
        assert_int_equal(nvd_create_sq(&D, q, 4, q), 0);
    }
    assert_int_equal(nvd_create_cq(&D, 33, 4, false, 0), NVME_INVALID_QID);
    assert_int_equal(nvd_create_sq(&D, 33, 4, 1), NVME_INVALID_QID);
    /* All 32 pairs carry I/O, round robin. */
    uint64_t buf = nvd_alloc(&D, NVD_PAGE, NVD_PAGE);
    uint16_t cids[33];
    for (uint16_t q = 1; q <= 32; q++) {
        struct nvme_sqe s = nvd_rw(NVME_CMD_READ, 1, q, 1);
        nvd_prp(&D, &s, buf, NVD_PAGE);
        cids[q] = nvd_queue_cmd(&D, q, &s, true);
    }
    for (uint16_t q = 1; q <= 32; q++) {
        struct nvme_cqe cqe;
        assert_int_equal(nvd_wait_cid(&D, q, cids[q], &cqe, 5000), 0);
        assert_int_equal(nvd_status(&cqe), 0);
        assert_int_equal(cqe.sqid, q);
        assert_int_equal(cqe.sqhd, 1);
    }
}

/* ---------------------------------------------------------------- features */

static void test_features(void **state)
{
    assert_int_equal(nvd_reset(&D), 0);
    uint32_t dw0;
    assert_int_equal(nvd_features(&D, NVME_ADM_GET_FEATURES, NVME_FEAT_NUM_QUEUES, 0, &dw0), 0);
    assert_int_equal(dw0, 31u << 16 | 31u);
    /* Ask for 4 SQs and 2 CQs (0-based). */
    assert_int_equal(nvd_features(&D, NVME_ADM_SET_FEATURES, NVME_FEAT_NUM_QUEUES,
                                  1u << 16 | 3u, &dw0), 0);
    assert_int_equal(dw0, 1u << 16 | 3u);
    assert_int_equal(nvd_features(&D, NVME_ADM_GET_FEATURES, NVME_FEAT_NUM_QUEUES, 0, &dw0), 0);
    assert_int_equal(dw0, 1u << 16 | 3u);
    /* More than the controller has: capped at 32. */
    assert_int_equal(nvd_features(&D, NVME_ADM_SET_FEATURES, NVME_FEAT_NUM_QUEUES,
                                  99u << 16 | 99u, &dw0), 0);
    assert_int_equal(dw0, 31u << 16 | 31u);
    assert_int_equal(nvd_features(&D, NVME_ADM_SET_FEATURES, NVME_FEAT_NUM_QUEUES, 0xffffu, NULL),
                     NVME_INVALID_FIELD);
    assert_int_equal(nvd_features(&D, NVME_ADM_SET_FEATURES, NVME_FEAT_NUM_QUEUES,
                                  1u << 16 | 3u, NULL), 0);
    assert_int_equal(nvd_create_cq(&D, 3, 4, false, 0), NVME_INVALID_QID);
    assert_int_equal(nvd_create_cq(&D, 2, 4, false, 0), 0);
    assert_int_equal(nvd_create_sq(&D, 5, 4, 2), NVME_INVALID_QID);
    assert_int_equal(nvd_create_sq(&D, 4, 4, 2), 0);
    /* After queues exist: command sequence error. */
    assert_int_equal(nvd_features(&D, NVME_ADM_SET_FEATURES, NVME_FEAT_NUM_QUEUES, 0, NULL),
                     NVME_CMD_SEQ_ERROR);
    /* Saving is not supported; unknown features are invalid. */
    assert_int_equal(nvd_features(&D, NVME_ADM_SET_FEATURES, NVME_FEAT_TEMP | 1u << 31, 300, NULL),
                     NVME_FEAT_NOT_SAVEABLE);
    assert_int_equal(nvd_features(&D, NVME_ADM_GET_FEATURES, 0x7e, 0, NULL), NVME_INVALID_FIELD);
    assert_int_equal(nvd_features(&D, NVME_ADM_SET_FEATURES, 0x7e, 0, NULL), NVME_INVALID_FIELD);
    /* Temperature threshold: set, current, default. */
    assert_int_equal(nvd_features(&D, NVME_ADM_SET_FEATURES, NVME_FEAT_TEMP, 350, NULL), 0);
    assert_int_equal(nvd_features(&D, NVME_ADM_GET_FEATURES, NVME_FEAT_TEMP, 0, &dw0), 0);
    assert_int_equal(dw0, 350);
    assert_int_equal(nvd_features(&D, NVME_ADM_GET_FEATURES, NVME_FEAT_TEMP | 1u << 8, 0, &dw0), 0);
    assert_int_equal(dw0, 0x157);
    /* Volatile write cache on by default. */
    assert_int_equal(nvd_features(&D, NVME_ADM_GET_FEATURES, NVME_FEAT_VWC, 0, &dw0), 0);
    assert_int_equal(dw0, 1);
    /* The reset restores the defaults. */
    assert_int_equal(nvd_reset(&D), 0);
    assert_int_equal(nvd_features(&D, NVME_ADM_GET_FEATURES, NVME_FEAT_NUM_QUEUES, 0, &dw0), 0);
    assert_int_equal(dw0, 31u << 16 | 31u);
}

/* ---------------------------------------------------------------- logs, abort, AER */

static void test_log_pages(void **state)
{
    assert_int_equal(nvd_reset(&D), 0);
    struct nvme_sqe s = nvd_sqe(0x7f, 0);
    uint16_t bad = 0;
    assert_int_equal(nvd_admin(&D, &s, NULL), NVME_INVALID_OPCODE);
    bad = s.cid;
    uint64_t buf = nvd_alloc(&D, NVD_PAGE, NVD_PAGE);
    uint8_t *p = nvd_ptr(&D, buf);
    s = nvd_sqe(NVME_ADM_GET_LOG, 0);
    s.cdw10 = NVME_LOG_ERROR | (64u * 16 - 1) << 16; /* 16 entries */
    nvd_prp(&D, &s, buf, NVD_PAGE);
    assert_int_equal(nvd_admin(&D, &s, NULL), 0);
    uint64_t count;
    uint16_t sqid, cid, st;
    memcpy(&count, p, 8);
    memcpy(&sqid, p + 8, 2);
    memcpy(&cid, p + 10, 2);
    memcpy(&st, p + 12, 2);
    assert_true(count >= 1);
    assert_int_equal(sqid, 0);
    assert_int_equal(cid, bad);
    assert_int_equal(st >> 1, NVME_INVALID_OPCODE);

    /* SMART after some I/O. */
    assert_int_equal(nvd_io_pair(&D, 16), 0);
    uint64_t data = nvd_alloc(&D, NVD_PAGE, NVD_PAGE);
    s = nvd_rw(NVME_CMD_WRITE, 1, 7, 1);
    nvd_prp(&D, &s, data, NVD_PAGE);
    assert_int_equal(nvd_io(&D, 1, &s, NULL), 0);
    s = nvd_sqe(NVME_ADM_GET_LOG, 0xffffffff);
    s.cdw10 = NVME_LOG_SMART | (512u / 4 - 1) << 16;
    nvd_prp(&D, &s, buf, NVD_PAGE);
    assert_int_equal(nvd_admin(&D, &s, NULL), 0);
    uint64_t units_written, write_cmds;
    uint16_t temp;
    memcpy(&temp, p + 1, 2);
    memcpy(&units_written, p + 48, 8);
    memcpy(&write_cmds, p + 80, 8);
    assert_true(temp > 273);
    assert_int_equal(p[3], 100);
    assert_true(units_written >= 1);
    assert_true(write_cmds >= 1);
    /* Unknown log page. */
    s = nvd_sqe(NVME_ADM_GET_LOG, 0);
    s.cdw10 = 0x7f | 127u << 16;
    nvd_prp(&D, &s, buf, NVD_PAGE);
    assert_int_equal(nvd_admin(&D, &s, NULL), NVME_INVALID_LOG_PAGE);
    /* Offset beyond the log. */
    s = nvd_sqe(NVME_ADM_GET_LOG, 0);
    s.cdw10 = NVME_LOG_SMART | 127u << 16;
    s.cdw12 = 4096;
    nvd_prp(&D, &s, buf, NVD_PAGE);
    assert_int_equal(nvd_admin(&D, &s, NULL), NVME_INVALID_FIELD);
}

static void test_abort_and_aer(void **state)
{
    assert_int_equal(nvd_reset(&D), 0);
    struct nvme_cqe cqe;
    uint16_t aer[4];
    for (int i = 0; i < 4; i++) {
        struct nvme_sqe s = nvd_sqe(NVME_ADM_AER, 0);
        aer[i] = nvd_queue_cmd(&D, 0, &s, true);
    }
    /* Outstanding: no completion. */
    assert_int_equal(nvd_reap(&D, 0, &cqe, 200), -ETIMEDOUT);
    /* AERL is 3 (0-based): the fifth exceeds it. */
    struct nvme_sqe s = nvd_sqe(NVME_ADM_AER, 0);
    assert_int_equal(nvd_admin(&D, &s, NULL), NVME_AERL_EXCEEDED);
    /* Abort one AER: it completes as aborted by request, the Abort says "aborted". */
    s = nvd_sqe(NVME_ADM_ABORT, 0);
    s.cdw10 = (uint32_t)aer[3] << 16 | 0;
    assert_int_equal(nvd_admin(&D, &s, &cqe), 0);
    assert_int_equal(cqe.dw0 & 1, 0);
    assert_int_equal(nvd_wait_cid(&D, 0, aer[3], &cqe, 5000), 0);
    assert_int_equal(nvd_status(&cqe), NVME_ABORT_REQUESTED);
    /* A command that is not there: not aborted. */
    s = nvd_sqe(NVME_ADM_ABORT, 0);
    s.cdw10 = 0xbeefu << 16 | 0;
    assert_int_equal(nvd_admin(&D, &s, &cqe), 0);
    assert_int_equal(cqe.dw0 & 1, 1);
    /* No such SQ. */
    s = nvd_sqe(NVME_ADM_ABORT, 0);
    s.cdw10 = 1u << 16 | 9;
    assert_int_equal(nvd_admin(&D, &s, NULL), NVME_INVALID_FIELD);
    /* An event: a doorbell write to a queue that does not exist. */
    nvd_w32(&D, NVME_REG_DBS + 8u * 5, 3);
    assert_int_equal(nvd_wait_cid(&D, 0, aer[0], &cqe, 5000), 0);
    assert_int_equal(nvd_status(&cqe), 0);
    assert_int_equal(cqe.dw0 & 7, NVME_AER_TYPE_ERROR);
    assert_int_equal((cqe.dw0 >> 8) & 0xff, NVME_AER_INFO_INVALID_DB);
    assert_int_equal((cqe.dw0 >> 16) & 0xff, NVME_LOG_ERROR);
    /* The other two stay outstanding across more events until the error log is read... */
    nvd_w32(&D, NVME_REG_DBS + 8u * 6, 1);
    assert_int_equal(nvd_wait_cid(&D, 0, aer[1], &cqe, 200), -ETIMEDOUT);
    uint64_t buf = nvd_alloc(&D, NVD_PAGE, NVD_PAGE);
    s = nvd_sqe(NVME_ADM_GET_LOG, 0);
    s.cdw10 = NVME_LOG_ERROR | 127u << 16;
    nvd_prp(&D, &s, buf, NVD_PAGE);
    assert_int_equal(nvd_admin(&D, &s, NULL), 0);
    /* ...then the pending one is reported. */
    assert_int_equal(nvd_wait_cid(&D, 0, aer[1], &cqe, 5000), 0);
    assert_int_equal((cqe.dw0 >> 8) & 0xff, NVME_AER_INFO_INVALID_DB);
}

/* ---------------------------------------------------------------- a second controller:
 * 4 queue pairs, 2 namespaces of 64 MiB, MDTS 3, a 1 MiB controller memory buffer */

static int setup_small(void **state)
{
    return nvd_fx_setup(state, &FX, "nvme-admin-small", "tests/system/topologies/nvme-small.ini",
                        &D, "nvme1");
}

static void test_small_config(void **state)
{
    assert_int_equal(nvd_reset(&D), 0);
    assert_int_equal((fab_cfg_read(FX.f, D.fn, FAB_CFG_MSIX + 2, 2) & 0x7ff) + 1, 5);
    uint32_t dw0;
    assert_int_equal(nvd_features(&D, NVME_ADM_GET_FEATURES, NVME_FEAT_NUM_QUEUES, 0, &dw0), 0);
    assert_int_equal(dw0, 3u << 16 | 3u);
    assert_int_equal(nvd_create_cq(&D, 5, 4, false, 0), NVME_INVALID_QID);
    assert_int_equal(nvd_create_cq(&D, 4, 4, true, 5), NVME_INVALID_VECTOR);
    assert_int_equal(nvd_create_cq(&D, 4, 4, true, 4), 0);
    uint64_t buf = nvd_alloc(&D, NVD_PAGE, NVD_PAGE);
    uint8_t *p = nvd_ptr(&D, buf);
    struct nvme_sqe s = nvd_sqe(NVME_ADM_IDENTIFY, 0);
    s.cdw10 = NVME_CNS_CTRL;
    nvd_prp(&D, &s, buf, NVD_PAGE);
    assert_int_equal(nvd_admin(&D, &s, NULL), 0);
    uint32_t nn;
    memcpy(&nn, p + 516, 4);
    assert_int_equal(nn, 2);
    assert_int_equal(p[77], 3);
    s = nvd_sqe(NVME_ADM_IDENTIFY, 0);
    s.cdw10 = NVME_CNS_NS_LIST;
    nvd_prp(&D, &s, buf, NVD_PAGE);
    assert_int_equal(nvd_admin(&D, &s, NULL), 0);
    uint32_t l[3];
    memcpy(l, p, sizeof l);
    assert_int_equal(l[0], 1);
    assert_int_equal(l[1], 2);
    assert_int_equal(l[2], 0);
    s = nvd_sqe(NVME_ADM_IDENTIFY, 2);
    s.cdw10 = NVME_CNS_NS;
    nvd_prp(&D, &s, buf, NVD_PAGE);
    assert_int_equal(nvd_admin(&D, &s, NULL), 0);
    uint64_t nsze;
    memcpy(&nsze, p, 8);
    assert_int_equal(nsze, (64ull << 20) / 4096);
    /* I/O on namespace 2, at MDTS (8 blocks) and beyond. */
    assert_int_equal(nvd_io_pair(&D, 16), 0);
    uint64_t len = 8 * 4096ull;
    uint64_t wb = nvd_alloc(&D, len, NVD_PAGE), rb = nvd_alloc(&D, len, NVD_PAGE);
    nvd_fill(nvd_ptr(&D, wb), len, 7);
    s = nvd_rw(NVME_CMD_WRITE, 2, 16383 - 7, 8);
    nvd_prp(&D, &s, wb, len);
    assert_int_equal(nvd_io(&D, 1, &s, NULL), 0);
    s = nvd_rw(NVME_CMD_READ, 2, 16383 - 7, 8);
    nvd_prp(&D, &s, rb, len);
    assert_int_equal(nvd_io(&D, 1, &s, NULL), 0);
    assert_memory_equal(nvd_ptr(&D, rb), nvd_ptr(&D, wb), len);
    s = nvd_rw(NVME_CMD_READ, 1, 16383 - 7, 8); /* namespace 1 was not written there */
    nvd_prp(&D, &s, rb, len);
    assert_int_equal(nvd_io(&D, 1, &s, NULL), 0);
    assert_memory_not_equal(nvd_ptr(&D, rb), nvd_ptr(&D, wb), len);
    s = nvd_rw(NVME_CMD_READ, 2, 0, 9);
    nvd_prp(&D, &s, rb, len + 4096);
    assert_int_equal(nvd_io(&D, 1, &s, NULL), NVME_INVALID_FIELD);
    s = nvd_rw(NVME_CMD_READ, 3, 0, 1);
    nvd_prp(&D, &s, rb, 4096);
    assert_int_equal(nvd_io(&D, 1, &s, NULL), NVME_INVALID_NAMESPACE);
    char path[400];
    snprintf(path, sizeof path, "%s/%s/nvme1-ns2.img", FX.nvme_dir, FX.name);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, 64ll << 20);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registers),
        cmocka_unit_test(test_enable_disable_shutdown),
        cmocka_unit_test(test_reset_frees_queues),
        cmocka_unit_test(test_identify),
        cmocka_unit_test(test_queue_errors),
        cmocka_unit_test(test_queue_limit),
        cmocka_unit_test(test_features),
        cmocka_unit_test(test_log_pages),
        cmocka_unit_test(test_abort_and_aer),
    };
    const struct CMUnitTest small[] = {
        cmocka_unit_test(test_small_config),
    };
    int rc = cmocka_run_group_tests(tests, setup, fx_teardown);
    return rc + cmocka_run_group_tests(small, setup_small, fx_teardown);
}
