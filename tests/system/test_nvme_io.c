/*
 * The NVMe controller model (src/devices/nvmc.c), its I/O: the test is the driver on the lender
 * host (host a of smartio3.ini), using the fabric model directly — registers through the BAR
 * file, queues and data in host a's RAM above 300 MiB — and checks what the NVMe base
 * specification says the controller does with reads and writes (PRPs, FUA, the namespace's
 * file), Flush, Write Zeroes, Dataset Management, bad commands, an Abort or a deleted SQ under
 * queued commands, MSI-X and bus mastering; then, on a second controller
 * (tests/system/topologies/nvme-small.ini), an SQ in the controller memory buffer and the
 * arbitration between SQs. The registers and admin commands are test_nvme_admin's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

#include "fixture.h"
#include "fabric.h"
#include "nvmc_ctrl.h" /* the model's BAR layout */
#include "nvme_drv.h"

static struct fx FX; /* the NVMe models' images in a directory of its own (FX.nvme_dir) */
static struct nvd D;

#define NLBA (1ull << 18) /* 1 GiB of 4 KiB blocks */

static int setup(void **state)
{
    return nvd_fx_setup(state, &FX, "nvme-io", "examples/topologies/smartio3.ini", &D, "nvme0");
}

/* ---------------------------------------------------------------- abort */

/* Abort a command that is still in its SQ: it completes as aborted, unexecuted. */
static void test_abort_queued(void **state)
{
    assert_int_equal(nvd_reset(&D), 0);
    assert_int_equal(nvd_io_pair(&D, 16), 0);
    uint64_t buf = nvd_alloc(&D, NVD_PAGE, NVD_PAGE);
    memset(nvd_ptr(&D, buf), 0x77, NVD_PAGE);
    fab_cfg_write(FX.f, D.fn, 0x04, 2, FAB_CMD_MEM); /* nothing is fetched meanwhile */
    struct nvme_sqe s = nvd_rw(NVME_CMD_WRITE, 1, 4242, 1);
    nvd_prp(&D, &s, buf, NVD_PAGE);
    uint16_t victim = nvd_queue_cmd(&D, 1, &s, true);
    s = nvd_sqe(NVME_ADM_ABORT, 0);
    s.cdw10 = (uint32_t)victim << 16 | 1;
    uint16_t ab = nvd_queue_cmd(&D, 0, &s, true);
    fab_cfg_write(FX.f, D.fn, 0x04, 2, FAB_CMD_MEM | FAB_CMD_BME);
    struct nvme_cqe cqe;
    assert_int_equal(nvd_wait_cid(&D, 0, ab, &cqe, 5000), 0);
    assert_int_equal(nvd_status(&cqe), 0);
    assert_int_equal(cqe.dw0 & 1, 0);
    assert_int_equal(nvd_wait_cid(&D, 1, victim, &cqe, 5000), 0);
    assert_int_equal(nvd_status(&cqe), NVME_ABORT_REQUESTED);
    assert_false(nvd_dnr(&cqe));
    /* Not written. */
    s = nvd_rw(NVME_CMD_READ, 1, 4242, 1);
    nvd_prp(&D, &s, buf, NVD_PAGE);
    assert_int_equal(nvd_io(&D, 1, &s, NULL), 0);
    char zero[4096] = { 0 };
    assert_memory_equal(nvd_ptr(&D, buf), zero, sizeof zero);
}

/* ---------------------------------------------------------------- I/O */

static void check_file(uint64_t slba, const void *data, size_t len)
{
    char path[400];
    snprintf(path, sizeof path, "%s/%s/nvme0-ns1.img", FX.nvme_dir, FX.name); /* a directory per fabric */
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    char *b = malloc(len);
    assert_int_equal(pread(fd, b, len, (off_t)(slba * 4096)), (ssize_t)len);
    assert_memory_equal(b, data, len);
    free(b);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(st.st_size, (off_t)(NLBA * 4096));
    assert_true((uint64_t)st.st_blocks * 512 < (64ull << 20)); /* sparse */
    close(fd);
}

/* Write then read len bytes at slba through buffers at offset off in fresh memory. */
static void rw_roundtrip(uint64_t slba, uint32_t nblocks, uint64_t off, uint32_t seed)
{
    uint64_t len = nblocks * 4096ull;
    uint64_t wb = nvd_alloc(&D, len + 2 * NVD_PAGE, NVD_PAGE) + off;
    uint64_t rb = nvd_alloc(&D, len + 2 * NVD_PAGE, NVD_PAGE) + off;
    nvd_fill(nvd_ptr(&D, wb), len, seed);
    memset(nvd_ptr(&D, rb), 0x5a, len);
    struct nvme_sqe s = nvd_rw(NVME_CMD_WRITE, 1, slba, nblocks);
    nvd_prp(&D, &s, wb, len);
    assert_int_equal(nvd_io(&D, 1, &s, NULL), 0);
    s = nvd_rw(NVME_CMD_READ, 1, slba, nblocks);
    nvd_prp(&D, &s, rb, len);
    assert_int_equal(nvd_io(&D, 1, &s, NULL), 0);
    assert_memory_equal(nvd_ptr(&D, rb), nvd_ptr(&D, wb), len);
    check_file(slba, nvd_ptr(&D, wb), len);
}

static void test_read_write(void **state)
{
    assert_int_equal(nvd_reset(&D), 0);
    assert_int_equal(nvd_io_pair(&D, 64), 0);
    rw_roundtrip(10, 1, 0, 1);        /* PRP1 only */
    rw_roundtrip(20, 2, 0, 2);        /* PRP1 + PRP2 data pointer */
    rw_roundtrip(30, 1, 512, 3);      /* PRP1 with an offset, PRP2 for the rest */
    rw_roundtrip(40, 3, 0, 4);        /* PRP list */
    rw_roundtrip(50, 2, 1024, 5);     /* offset: three pages, PRP list */
    rw_roundtrip(100, 32, 0, 6);      /* MDTS: 128 KiB, 31-entry list */
    rw_roundtrip(NLBA - 4, 4, 0, 7);  /* the last blocks */

    /* A PRP list starting near the end of its page chains to a second list page. */
    uint64_t len = 8 * 4096ull;
    uint64_t wb = nvd_alloc(&D, len, NVD_PAGE), rb = nvd_alloc(&D, len, NVD_PAGE);
    uint64_t lists = nvd_alloc(&D, 2 * NVD_PAGE, NVD_PAGE);
    uint64_t *l1 = nvd_ptr(&D, lists + NVD_PAGE - 16), *l2 = nvd_ptr(&D, lists + NVD_PAGE);
    nvd_fill(nvd_ptr(&D, wb), len, 99);
    struct nvme_sqe s = nvd_rw(NVME_CMD_WRITE, 1, 200, 8);
    s.prp1 = wb;
    s.prp2 = lists + NVD_PAGE - 16;
    l1[0] = wb + 4096;
    l1[1] = lists + NVD_PAGE; /* chain */
    for (int i = 0; i < 6; i++)
        l2[i] = wb + 4096ull * (uint64_t)(i + 2);
    assert_int_equal(nvd_io(&D, 1, &s, NULL), 0);
    s = nvd_rw(NVME_CMD_READ, 1, 200, 8);
    nvd_prp(&D, &s, rb, len);
    s.cdw12 |= 1u << 30; /* FUA on a read is fine too */
    assert_int_equal(nvd_io(&D, 1, &s, NULL), 0);
    assert_memory_equal(nvd_ptr(&D, rb), nvd_ptr(&D, wb), len);
    /* FUA write. */
    s = nvd_rw(NVME_CMD_WRITE, 1, 300, 1);
    nvd_prp(&D, &s, wb, 4096);
    s.cdw12 |= 1u << 30;
    assert_int_equal(nvd_io(&D, 1, &s, NULL), 0);
    check_file(300, nvd_ptr(&D, wb), 4096);
}

static void test_flush_zeroes_dsm(void **state)
{
    assert_int_equal(nvd_reset(&D), 0);
    assert_int_equal(nvd_io_pair(&D, 16), 0);
    uint64_t len = 4 * 4096ull;
    uint64_t wb = nvd_alloc(&D, len, NVD_PAGE), rb = nvd_alloc(&D, len, NVD_PAGE);
    nvd_fill(nvd_ptr(&D, wb), len, 42);
    struct nvme_sqe s = nvd_rw(NVME_CMD_WRITE, 1, 1000, 4);
    nvd_prp(&D, &s, wb, len);
    assert_int_equal(nvd_io(&D, 1, &s, NULL), 0);
    s = nvd_sqe(NVME_CMD_FLUSH, 1);
    assert_int_equal(nvd_io(&D, 1, &s, NULL), 0);
    s = nvd_sqe(NVME_CMD_FLUSH, 0xffffffff);
    assert_int_equal(nvd_io(&D, 1, &s, NULL), 0);
    s = nvd_sqe(NVME_CMD_FLUSH, 0);
    assert_int_equal(nvd_io(&D, 1, &s, NULL), NVME_INVALID_NAMESPACE);
    /* Write Zeroes over blocks 1001..1002. */
    s = nvd_rw(NVME_CMD_WRITE_ZEROES, 1, 1001, 2);
    assert_int_equal(nvd_io(&D, 1, &s, NULL), 0);
    /* DSM deallocate block 1003. */
    uint64_t rng = nvd_alloc(&D, NVD_PAGE, NVD_PAGE);
    uint8_t *r = nvd_ptr(&D, rng);
    uint32_t one = 1;
    uint64_t slba = 1003;
    memcpy(r + 4, &one, 4);
    memcpy(r + 8, &slba, 8);
    s = nvd_sqe(NVME_CMD_DSM, 1);
    s.cdw10 = 0;       /* one range */
    s.cdw11 = 1u << 2; /* AD */
    s.prp1 = rng;
    assert_int_equal(nvd_io(&D, 1, &s, NULL), 0);
    s = nvd_rw(NVME_CMD_READ, 1, 1000, 4);
    nvd_prp(&D, &s, rb, len);
    assert_int_equal(nvd_io(&D, 1, &s, NULL), 0);
    char *w = nvd_ptr(&D, wb), *rd = nvd_ptr(&D, rb), zero[3 * 4096];
    memset(zero, 0, sizeof zero);
    assert_memory_equal(rd, w, 4096);
    assert_memory_equal(rd + 4096, zero, 3 * 4096);
    /* Out of range: Write Zeroes and a DSM range. */
    s = nvd_rw(NVME_CMD_WRITE_ZEROES, 1, NLBA - 1, 2);
    assert_int_equal(nvd_io(&D, 1, &s, NULL), NVME_LBA_RANGE);
    slba = NLBA;
    memcpy(r + 8, &slba, 8);
    s = nvd_sqe(NVME_CMD_DSM, 1);
    s.cdw11 = 1u << 2;
    s.prp1 = rng;
    assert_int_equal(nvd_io(&D, 1, &s, NULL), NVME_LBA_RANGE);
}

static void test_io_errors(void **state)
{
    assert_int_equal(nvd_reset(&D), 0);
    assert_int_equal(nvd_io_pair(&D, 16), 0);
    struct nvme_cqe cqe;
    uint64_t buf = nvd_alloc(&D, 64 * NVD_PAGE, NVD_PAGE);
    struct nvme_sqe s;
    /* Namespaces */
    uint32_t bad_ns[] = { 0, 2, 0xffffffff };
    for (int i = 0; i < 3; i++) {
        s = nvd_rw(NVME_CMD_READ, bad_ns[i], 0, 1);
        nvd_prp(&D, &s, buf, 4096);
        assert_int_equal(nvd_io(&D, 1, &s, &cqe), NVME_INVALID_NAMESPACE);
        assert_true(nvd_dnr(&cqe));
    }
    /* LBA range, including wrap-around */
    s = nvd_rw(NVME_CMD_READ, 1, NLBA - 1, 2);
    nvd_prp(&D, &s, buf, 8192);
    assert_int_equal(nvd_io(&D, 1, &s, &cqe), NVME_LBA_RANGE);
    assert_true(nvd_dnr(&cqe));
    s = nvd_rw(NVME_CMD_WRITE, 1, UINT64_MAX, 2);
    nvd_prp(&D, &s, buf, 8192);
    assert_int_equal(nvd_io(&D, 1, &s, NULL), NVME_LBA_RANGE);
    /* More than MDTS (32 blocks) */
    s = nvd_rw(NVME_CMD_READ, 1, 0, 33);
    nvd_prp(&D, &s, buf, 33 * 4096);
    assert_int_equal(nvd_io(&D, 1, &s, &cqe), NVME_INVALID_FIELD);
    assert_true(nvd_dnr(&cqe));
    /* Opcode */
    s = nvd_sqe(0x7e, 1);
    assert_int_equal(nvd_io(&D, 1, &s, &cqe), NVME_INVALID_OPCODE);
    assert_true(nvd_dnr(&cqe));
    /* PRP rules */
    s = nvd_rw(NVME_CMD_READ, 1, 0, 1);
    s.prp1 = buf + 2; /* not dword aligned */
    assert_int_equal(nvd_io(&D, 1, &s, NULL), NVME_INVALID_PRP_OFFSET);
    s = nvd_rw(NVME_CMD_READ, 1, 0, 2);
    s.prp1 = buf;
    s.prp2 = buf + NVD_PAGE + 512; /* data pointer with an offset */
    assert_int_equal(nvd_io(&D, 1, &s, NULL), NVME_INVALID_PRP_OFFSET);
    s = nvd_rw(NVME_CMD_READ, 1, 0, 3);
    uint64_t list = nvd_alloc(&D, NVD_PAGE, NVD_PAGE);
    uint64_t *l = nvd_ptr(&D, list);
    l[0] = buf + NVD_PAGE;
    l[1] = buf + 2 * NVD_PAGE + 8; /* list entry with an offset */
    s.prp1 = buf;
    s.prp2 = list;
    assert_int_equal(nvd_io(&D, 1, &s, &cqe), NVME_INVALID_PRP_OFFSET);
    assert_true(nvd_dnr(&cqe));
    s.prp2 = list + 4; /* list pointer not qword aligned */
    assert_int_equal(nvd_io(&D, 1, &s, NULL), NVME_INVALID_PRP_OFFSET);
    /* Data into the controller's own registers: data transfer error (no DNR). */
    s = nvd_rw(NVME_CMD_READ, 1, 0, 1);
    s.prp1 = fab_func(FX.f, D.fn)->bar[0].addr;
    assert_int_equal(nvd_io(&D, 1, &s, &cqe), NVME_DATA_TRANSFER_ERROR);
    assert_false(nvd_dnr(&cqe));
    /* PRP list in unbacked space: data transfer error. */
    s = nvd_rw(NVME_CMD_WRITE, 1, 0, 4);
    s.prp1 = buf;
    s.prp2 = 0x7000000000ull;
    assert_int_equal(nvd_io(&D, 1, &s, NULL), NVME_DATA_TRANSFER_ERROR);
    /* SGLs not supported */
    s = nvd_rw(NVME_CMD_READ, 1, 0, 1);
    nvd_prp(&D, &s, buf, 4096);
    s.flags = 0x40;
    assert_int_equal(nvd_io(&D, 1, &s, NULL), NVME_INVALID_FIELD);
    /* Still healthy. */
    s = nvd_rw(NVME_CMD_READ, 1, 0, 1);
    nvd_prp(&D, &s, buf, 4096);
    assert_int_equal(nvd_io(&D, 1, &s, NULL), 0);
}

static void test_sq_deletion_aborts(void **state)
{
    assert_int_equal(nvd_reset(&D), 0);
    assert_int_equal(nvd_io_pair(&D, 16), 0);
    uint64_t buf = nvd_alloc(&D, NVD_PAGE, NVD_PAGE);
    /* Two reads on SQ 1 and Delete SQ 1 on the admin queue, announced while bus mastering
     * is off (nothing is fetched), then bus mastering on: the admin queue comes first in the
     * round, so the reads are still in SQ 1 when it goes away. */
    fab_cfg_write(FX.f, D.fn, 0x04, 2, FAB_CMD_MEM);
    uint16_t cids[2];
    for (int i = 0; i < 2; i++) {
        struct nvme_sqe s = nvd_rw(NVME_CMD_READ, 1, 0, 1);
        nvd_prp(&D, &s, buf, NVD_PAGE);
        cids[i] = nvd_queue_cmd(&D, 1, &s, false);
    }
    struct nvme_sqe s = nvd_sqe(NVME_ADM_DELETE_SQ, 0);
    s.cdw10 = 1;
    uint16_t del = nvd_queue_cmd(&D, 0, &s, false);
    nvd_ring(&D, 1);
    nvd_ring(&D, 0);
    fab_cfg_write(FX.f, D.fn, 0x04, 2, FAB_CMD_MEM | FAB_CMD_BME);
    struct nvme_cqe cqe;
    assert_int_equal(nvd_wait_cid(&D, 0, del, &cqe, 5000), 0);
    assert_int_equal(nvd_status(&cqe), 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(nvd_wait_cid(&D, 1, cids[i], &cqe, 5000), 0);
        assert_int_equal(nvd_status(&cqe), NVME_ABORT_SQ_DELETION);
        assert_false(nvd_dnr(&cqe));
    }
    assert_int_equal(nvd_delete(&D, NVME_ADM_DELETE_CQ, 1), 0);
}

/* ---------------------------------------------------------------- interrupts, bus master */

static void test_msix(void **state)
{
    assert_int_equal(nvd_reset(&D), 0);
    assert_int_equal(nvd_io_pair(&D, 16), 0);
    const uint32_t hv = 77; /* host a's vector for CQ 1 */
    uint32_t host = D.host;
    struct fab_host *h = fab_host(FX.f, host);
    uint32_t *entry = (uint32_t *)(uintptr_t)(D.regs + NVMC_MSIX_TABLE + 16 * 1);
    entry[0] = (uint32_t)FAB_MSI_BASE;
    entry[1] = (uint32_t)(FAB_MSI_BASE >> 32);
    entry[2] = hv;
    entry[3] = 0; /* unmasked */
    uint16_t ctrl = (uint16_t)fab_cfg_read(FX.f, D.fn, FAB_CFG_MSIX + 2, 2);
    assert_int_equal(fab_cfg_write(FX.f, D.fn, FAB_CFG_MSIX + 2, 2, ctrl | 0x8000u), 0);
    uint32_t seq = atomic_load(&h->msi_seq[hv]);
    uint64_t buf = nvd_alloc(&D, NVD_PAGE, NVD_PAGE);
    struct nvme_sqe s = nvd_rw(NVME_CMD_READ, 1, 0, 1);
    nvd_prp(&D, &s, buf, NVD_PAGE);
    assert_int_equal(nvd_io(&D, 1, &s, NULL), 0);
    uint64_t end = nvd_ms() + 5000;
    while (atomic_load(&h->msi_seq[hv]) == seq && nvd_ms() < end)
        usleep(100);
    assert_int_not_equal(atomic_load(&h->msi_seq[hv]), seq);
    assert_true(atomic_load(&h->msi_pending[hv / 64]) & (1ull << (hv % 64)));
    atomic_fetch_and(&h->msi_pending[hv / 64], ~(1ull << (hv % 64)));
    /* A CQ without IEN (polled) raises nothing on its vector. */
    entry = (uint32_t *)(uintptr_t)(D.regs + NVMC_MSIX_TABLE + 16 * 2);
    entry[0] = (uint32_t)FAB_MSI_BASE;
    entry[1] = 0;
    entry[2] = hv + 1;
    entry[3] = 0;
    assert_int_equal(nvd_create_cq(&D, 2, 16, false, 2), 0);
    assert_int_equal(nvd_create_sq(&D, 2, 16, 2), 0);
    seq = atomic_load(&h->msi_seq[hv + 1]);
    s = nvd_rw(NVME_CMD_READ, 1, 0, 1);
    nvd_prp(&D, &s, buf, NVD_PAGE);
    assert_int_equal(nvd_io(&D, 2, &s, NULL), 0);
    usleep(20000);
    assert_int_equal(atomic_load(&h->msi_seq[hv + 1]), seq);
    assert_int_equal(fab_cfg_write(FX.f, D.fn, FAB_CFG_MSIX + 2, 2, ctrl & 0x7ffu), 0);
}

static void test_bus_master(void **state)
{
    assert_int_equal(nvd_reset(&D), 0);
    assert_int_equal(nvd_io_pair(&D, 16), 0);
    uint64_t buf = nvd_alloc(&D, NVD_PAGE, NVD_PAGE);
    fab_cfg_write(FX.f, D.fn, 0x04, 2, FAB_CMD_MEM); /* BME off */
    struct nvme_sqe s = nvd_rw(NVME_CMD_READ, 1, 0, 1);
    nvd_prp(&D, &s, buf, NVD_PAGE);
    uint16_t cid = nvd_queue_cmd(&D, 1, &s, true);
    struct nvme_cqe cqe;
    /* No bus mastering: the command is neither fetched nor completed. */
    assert_int_equal(nvd_wait_cid(&D, 1, cid, &cqe, 300), -ETIMEDOUT);
    assert_int_equal(nvd_r32(&D, NVME_REG_CSTS), NVME_CSTS_RDY);
    fab_cfg_write(FX.f, D.fn, 0x04, 2, FAB_CMD_MEM | FAB_CMD_BME);
    assert_int_equal(nvd_wait_cid(&D, 1, cid, &cqe, 5000), 0);
    assert_int_equal(nvd_status(&cqe), 0);
    /* An admin queue nobody can reach: fetching fails, the controller reports fatal status. */
    assert_int_equal(nvd_disable(&D), 0);
    D.brk = 0;
    uint64_t acq = nvd_alloc(&D, NVD_PAGE, NVD_PAGE);
    assert_int_equal(nvd_enable_at(&D, 16, 0x7000000000ull, acq), 0);
    nvd_w32(&D, NVME_REG_DBS, 1);
    assert_int_equal(nvd_wait_csts(&D, NVME_CSTS_CFS, NVME_CSTS_CFS, 5000), 0);
    assert_int_equal(nvd_reset(&D), 0);
}

/* ---------------------------------------------------------------- a second controller:
 * 4 queue pairs, 2 namespaces of 64 MiB, MDTS 3, a 1 MiB controller memory buffer */

static int setup_small(void **state)
{
    return nvd_fx_setup(state, &FX, "nvme-io-small", "tests/system/topologies/nvme-small.ini", &D,
                        "nvme1");
}

static void test_cmb(void **state)
{
    assert_int_equal(nvd_reset(&D), 0);
    const struct fab_function *fx = fab_func(FX.f, D.fn);
    assert_true(nvd_r64(&D, NVME_REG_CAP) & (1ull << 57));
    uint32_t loc = nvd_r32(&D, NVME_REG_CMBLOC), sz = nvd_r32(&D, NVME_REG_CMBSZ);
    assert_int_equal(loc & 7, 2);        /* BIR: BAR2 */
    assert_int_equal(loc >> 12, 0);      /* offset */
    assert_true(sz & 1);                 /* SQS */
    assert_int_equal((sz >> 8) & 0xf, 0); /* SZU 4 KiB */
    assert_int_equal(sz >> 12, 256);      /* 1 MiB */
    assert_int_equal(fx->bar[2].kind, FAB_BAR_MEM);
    /* An I/O SQ in the CMB: the driver writes commands into BAR2. */
    uint64_t cmb = fx->bar[2].addr;
    uint8_t *cmbp = fab_bar_mem(FX.f, D.fn, fx->bar[2].off, 1 << 20);
    assert_non_null(cmbp);
    assert_int_equal(nvd_create_cq(&D, 1, 16, false, 0), 0);
    struct nvme_sqe s = nvd_sqe(NVME_ADM_CREATE_SQ, 0);
    s.prp1 = cmb;
    s.cdw10 = 15u << 16 | 1;
    s.cdw11 = 1u << 16 | 1;
    assert_int_equal(nvd_admin(&D, &s, NULL), 0);
    D.q[1].live = true;
    D.q[1].sq_size = 16;
    D.q[1].sq_tail = 0;
    D.q[1].sq = 0;
    /* Write data that sits in the CMB too (WDS), read it back into host memory. */
    uint64_t rb = nvd_alloc(&D, NVD_PAGE, NVD_PAGE);
    nvd_fill(cmbp + 65536, 4096, 1234);
    for (int i = 0; i < 2; i++) {
        struct nvme_sqe c = nvd_rw(i ? NVME_CMD_READ : NVME_CMD_WRITE, 1, 5, 1);
        c.prp1 = i ? rb : cmb + 65536;
        c.cid = ++D.next_cid;
        memcpy(cmbp + 64 * D.q[1].sq_tail, &c, 64);
        D.q[1].sq_tail++;
        nvd_ring(&D, 1);
        struct nvme_cqe cqe;
        assert_int_equal(nvd_wait_cid(&D, 1, c.cid, &cqe, 5000), 0);
        assert_int_equal(nvd_status(&cqe), 0);
    }
    assert_memory_equal(nvd_ptr(&D, rb), cmbp + 65536, 4096);
}

/* Two SQs on one CQ, both full before the controller may fetch: one command from each in
 * turn (round robin, burst 1). */
static void test_round_robin(void **state)
{
    assert_int_equal(nvd_reset(&D), 0);
    assert_int_equal(nvd_create_cq(&D, 1, 16, false, 0), 0);
    assert_int_equal(nvd_create_sq(&D, 1, 8, 1), 0);
    assert_int_equal(nvd_create_sq(&D, 2, 8, 1), 0);
    uint64_t buf = nvd_alloc(&D, NVD_PAGE, NVD_PAGE);
    fab_cfg_write(FX.f, D.fn, 0x04, 2, FAB_CMD_MEM); /* hold off fetching */
    for (int i = 0; i < 6; i++) {
        struct nvme_sqe s = nvd_rw(NVME_CMD_READ, 1, 0, 1);
        nvd_prp(&D, &s, buf, NVD_PAGE);
        nvd_queue_cmd(&D, i < 3 ? 1 : 2, &s, false);
    }
    nvd_ring(&D, 1);
    nvd_ring(&D, 2);
    fab_cfg_write(FX.f, D.fn, 0x04, 2, FAB_CMD_MEM | FAB_CMD_BME);
    for (int i = 0; i < 6; i++) {
        struct nvme_cqe cqe;
        assert_int_equal(nvd_reap(&D, 1, &cqe, 5000), 0);
        assert_int_equal(nvd_status(&cqe), 0);
        assert_int_equal(cqe.sqid, 1 + i % 2);
        assert_int_equal(cqe.sqhd, i / 2 + 1);
    }
}

/* Fairness by command counts: SQ 1 full (7 commands) and SQ 2 with one command, both on one
 * CQ and both waiting before the controller may fetch. Round robin takes at most a burst from
 * SQ 1 before SQ 2's turn: SQ 2's command is the 2nd completion with the default burst of 1,
 * the 5th with the Arbitration Burst at 4 (AB 2), and only with no limit (AB 7) the last. */
static void test_arbitration_burst(void **state)
{
    static const struct { uint32_t ab, before; } cases[] = { { 0, 1 }, { 2, 4 }, { 7, 7 } };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        assert_int_equal(nvd_reset(&D), 0);
        uint32_t dw0 = 0xffffffffu;
        if (cases[k].ab)
            assert_int_equal(nvd_features(&D, NVME_ADM_SET_FEATURES, NVME_FEAT_ARB,
                                          cases[k].ab, NULL), 0);
        assert_int_equal(nvd_features(&D, NVME_ADM_GET_FEATURES, NVME_FEAT_ARB, 0, &dw0), 0);
        assert_int_equal(NVME_ARB_AB(dw0), cases[k].ab);
        assert_int_equal(nvd_create_cq(&D, 1, 16, false, 0), 0);
        assert_int_equal(nvd_create_sq(&D, 1, 8, 1), 0);
        assert_int_equal(nvd_create_sq(&D, 2, 8, 1), 0);
        uint64_t buf = nvd_alloc(&D, NVD_PAGE, NVD_PAGE);
        fab_cfg_write(FX.f, D.fn, 0x04, 2, FAB_CMD_MEM); /* hold off fetching */
        for (int i = 0; i < 7; i++) {
            struct nvme_sqe s = nvd_rw(NVME_CMD_READ, 1, (uint64_t)i, 1);
            nvd_prp(&D, &s, buf, NVD_PAGE);
            nvd_queue_cmd(&D, 1, &s, false);
        }
        struct nvme_sqe s = nvd_rw(NVME_CMD_READ, 1, 100, 1);
        nvd_prp(&D, &s, buf, NVD_PAGE);
        uint16_t lone = nvd_queue_cmd(&D, 2, &s, false);
        nvd_ring(&D, 2);
        nvd_ring(&D, 1);
        fab_cfg_write(FX.f, D.fn, 0x04, 2, FAB_CMD_MEM | FAB_CMD_BME);
        int at = -1, from1 = 0;
        for (int i = 0; i < 8; i++) {
            struct nvme_cqe cqe;
            assert_int_equal(nvd_reap(&D, 1, &cqe, 5000), 0);
            assert_int_equal(nvd_status(&cqe), 0);
            if (cqe.sqid == 2) {
                assert_int_equal(cqe.cid, lone);
                at = i;
            } else {
                assert_int_equal(cqe.sqid, 1);
                assert_int_equal(cqe.sqhd, ++from1); /* SQ 1 in order */
            }
        }
        assert_int_equal(at, (int)cases[k].before);
        assert_int_equal(from1, 7);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_abort_queued),
        cmocka_unit_test(test_read_write),
        cmocka_unit_test(test_flush_zeroes_dsm),
        cmocka_unit_test(test_io_errors),
        cmocka_unit_test(test_sq_deletion_aborts),
        cmocka_unit_test(test_msix),
        cmocka_unit_test(test_bus_master),
    };
    const struct CMUnitTest small[] = {
        cmocka_unit_test(test_cmb),
        cmocka_unit_test(test_round_robin),
        cmocka_unit_test(test_arbitration_burst),
    };
    int rc = cmocka_run_group_tests(tests, setup, fx_teardown);
    return rc + cmocka_run_group_tests(small, setup_small, fx_teardown);
}
