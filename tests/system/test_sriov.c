/*
 * SR-IOV virtual functions lent one by one (smartio-tocs-2021 §7.1.6): the NVMe's VFs are
 * controllers of their own (NVMe 1.4 §8.5: secondary controllers of the PF's subsystem, with
 * private queues and namespaces). Hosts b and c each borrow a VF and do verified I/O at the
 * same time as the lender uses the PF; a VF's DMA cannot reach a buffer mapped for another
 * VF (own requester ID, own IOMMU domain on the lender); Device Lending hands VFs to hosts one
 * by one, refuses a VF lent twice with a clear error, and reclaims one VF alone.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "fixture.h"
#include "ntblend/nvme.h"

static struct fx FX;
#define BS 4096u
#define NBLK 128u

static uint64_t pattern(uint64_t lba, uint64_t seed, size_t i)
{
    return (lba + 1) * 0x9e3779b97f4a7c15ull ^ seed ^ i;
}

/* Write NBLK blocks with seed's pattern, read them back and compare, rounds times. */
static void io_on(const char *name, uint64_t seed, int rounds)
{
    nvme_dev_t *d;
    int rc = nvme_open(name, NULL, &d);
    if (rc)
        fprintf(stderr, "%s: %s\n", name, nvme_errmsg());
    CHECK_EQ(rc, 0);
    nvme_qpair_t *qp;
    CHECK_EQ(nvme_qpair_create(d, NULL, &qp), 0);
    uint8_t *buf = nvme_buf_alloc(d, NULL, NBLK * BS), *back = nvme_buf_alloc(d, NULL, NBLK * BS);
    CHECK(buf && back);
    for (int r = 0; r < rounds; r++) {
        for (uint32_t b = 0; b < NBLK; b++)
            for (size_t i = 0; i < BS / 8; i++) {
                uint64_t v = pattern(b, seed + (uint64_t)r, i);
                memcpy(buf + (size_t)b * BS + i * 8, &v, 8);
            }
        for (uint32_t b = 0; b < NBLK; b += 32)
            CHECK_EQ(nvme_write(qp, 1, b, 32, buf + (size_t)b * BS), 0);
        memset(back, 0, NBLK * BS);
        for (uint32_t b = 0; b < NBLK; b += 32)
            CHECK_EQ(nvme_read(qp, 1, b, 32, back + (size_t)b * BS), 0);
        CHECK(memcmp(buf, back, NBLK * BS) == 0);
    }
    nvme_buf_free(d, buf);
    nvme_buf_free(d, back);
    nvme_qpair_delete(qp);
    nvme_close(d);
}

struct job {
    const char *name;
    uint64_t seed;
};

static void io_child(void *arg)
{
    const struct job *j = arg;
    io_on(j->name, j->seed, 20);
}

/* Block 0 of a namespace carries seed's pattern (its last round). */
static void holds(void *arg)
{
    const struct job *j = arg;
    nvme_dev_t *d;
    CHECK_EQ(nvme_open(j->name, NULL, &d), 0);
    nvme_qpair_t *qp;
    CHECK_EQ(nvme_qpair_create(d, NULL, &qp), 0);
    uint8_t *buf = nvme_buf_alloc(d, NULL, BS);
    CHECK(buf);
    CHECK_EQ(nvme_read(qp, 1, 0, 1, buf), 0);
    uint64_t v;
    memcpy(&v, buf + 8, 8);
    CHECK_EQ(v, pattern(0, j->seed, 1));
    nvme_qpair_delete(qp);
    nvme_close(d);
}

/* The PF and its VFs as the NVMe specification's virtualization section has them. */
static void identity(void *arg)
{
    (void)arg;
    static const char *names[3] = { "nvme0", "nvme0.vf1", "nvme0.vf2" };
    uint8_t subnqn[3][256];
    for (int k = 0; k < 3; k++) {
        nvme_dev_t *d;
        CHECK_EQ(nvme_open(names[k], NULL, &d), 0);
        uint8_t *id = nvme_buf_alloc(d, NULL, BS);
        CHECK(id);
        struct nvme_cmd c = { .opc = 0x06, .cdw10 = 0x01 }; /* Identify Controller */
        CHECK_EQ(nvme_admin(d, &c, id, BS, NULL), 0);
        uint16_t cntlid;
        memcpy(&cntlid, id + 78, 2);
        CHECK_EQ(cntlid, k + 1);                         /* CNTLID: PF 1, VF n: n + 1 */
        CHECK_EQ(id[76] & 0x6, k ? 0x6 : 0x2);           /* CMIC: controllers; a VF's */
        memcpy(subnqn[k], id + 768, 256);
        CHECK(memcmp(subnqn[k], subnqn[0], 256) == 0);  /* one NVM subsystem */
        c.cdw10 = 0x13;                                  /* Controller List */
        CHECK_EQ(nvme_admin(d, &c, id, BS, NULL), 0);
        uint16_t n, first, last;
        memcpy(&n, id, 2);
        memcpy(&first, id + 2, 2);
        memcpy(&last, id + 6, 2);
        CHECK_EQ(n, 3);
        CHECK_EQ(first, 1);
        CHECK_EQ(last, 3);
        c.cdw10 = 0x15;                                  /* Secondary Controller List */
        int rc = nvme_admin(d, &c, id, BS, NULL);
        if (k) {
            CHECK(rc != 0); /* a secondary controller has none */
        } else {
            CHECK_EQ(rc, 0);
            CHECK_EQ(id[0], 2);
            for (int v = 0; v < 2; v++) {
                const uint8_t *e = id + 32 + 32 * v;
                uint16_t scid, pcid, vfn;
                memcpy(&scid, e, 2);
                memcpy(&pcid, e + 2, 2);
                memcpy(&vfn, e + 8, 2);
                CHECK_EQ(scid, v + 2);
                CHECK_EQ(pcid, 1);
                CHECK_EQ(e[4] & 1, 1); /* online */
                CHECK_EQ(vfn, v + 1);
            }
            c.cdw10 = 0x14;                              /* Primary Controller Capabilities */
            CHECK_EQ(nvme_admin(d, &c, id, BS, NULL), 0);
            memcpy(&cntlid, id, 2);
            CHECK_EQ(cntlid, 1);
        }
        nvme_buf_free(d, id);
        nvme_close(d);
    }
}

static void test_identity(void **state)
{
    (void)state;
    struct h_proc p = h_spawn(FX.name, "a", identity, NULL);
    assert_int_equal(h_join(&p), 0);
}

/* b and c each drive a VF while a drives the PF, at once; each namespace keeps its own. */
static void test_vfs_at_once(void **state)
{
    (void)state;
    struct job jobs[3] = { { "nvme0", 0x100 }, { "nvme0.vf1", 0x200 }, { "nvme0.vf2", 0x300 } };
    static const char *host[3] = { "a", "b", "c" };
    struct h_proc p[3];
    for (int i = 0; i < 3; i++)
        p[i] = h_spawn(FX.name, host[i], io_child, &jobs[i]);
    for (int i = 0; i < 3; i++)
        assert_int_equal(h_join(&p[i]), 0);
    for (int i = 0; i < 3; i++) {
        jobs[i].seed += 19; /* the last round's */
        struct h_proc q = h_spawn(FX.name, "a", holds, &jobs[i]);
        assert_int_equal(h_join(&q), 0);
    }
}

/* A VF's DMA to an address mapped for its sibling is an IOMMU fault on the lender: the read
 * fails with a data transfer error and the sibling's buffer is untouched. */
static void on_cpl(void *arg, const struct nvme_cpl *c)
{
    struct nvme_cpl *out = arg;
    *out = *c;
    out->dw0 = 1; /* arrived */
}

static void isolation(void *arg)
{
    (void)arg;
    nvme_dev_t *d1, *d2;
    CHECK_EQ(nvme_open("nvme0.vf1", NULL, &d1), 0);
    CHECK_EQ(nvme_open("nvme0.vf2", NULL, &d2), 0);
    nvme_qpair_t *q1, *q2;
    CHECK_EQ(nvme_qpair_create(d1, NULL, &q1), 0);
    CHECK_EQ(nvme_qpair_create(d2, NULL, &q2), 0);
    uint8_t *b2 = nvme_buf_alloc(d2, NULL, BS);
    CHECK(b2);
    uint64_t io2;
    CHECK_EQ(nvme_buf_ioaddr(d2, b2, &io2), 0);
    memset(b2, 0x5a, BS);
    /* vf1 reads its block 0 into the address vf2's buffer has for vf2. */
    struct nvme_cpl cpl = { 0 };
    CHECK_EQ(nvme_submit_dma(q1, NVME_OP_READ, 1, 0, 1, io2, 0, on_cpl, &cpl), 0);
    while (!cpl.dw0)
        CHECK(nvme_qpair_wait(q1, -1) >= 0);
    CHECK_EQ(cpl.rc, -EIO);
    CHECK_EQ(cpl.status, 0x04); /* Data Transfer Error */
    for (size_t i = 0; i < BS; i++)
        CHECK_EQ(b2[i], 0x5a); /* nothing reached it */
    /* vf2 reaches it, and vf1 still works. */
    CHECK_EQ(nvme_read(q2, 1, 0, 1, b2), 0);
    uint8_t *b1 = nvme_buf_alloc(d1, NULL, BS);
    CHECK(b1);
    CHECK_EQ(nvme_read(q1, 1, 0, 1, b1), 0);
    nvme_buf_free(d1, b1);
    nvme_buf_free(d2, b2);
    nvme_qpair_delete(q1);
    nvme_qpair_delete(q2);
    nvme_close(d1);
    nvme_close(d2);
}

static void test_isolation(void **state)
{
    (void)state;
    struct h_proc p = h_spawn(FX.name, "b", isolation, NULL);
    assert_int_equal(h_join(&p), 0);
    /* The lender saw the fault. */
    assert_int_equal(h_sh("%s/ntblend --fabric %s status --json | jq -e "
                          "'[.. | .iommu_faults? // empty] | add > 0' >/dev/null", h_bin(), FX.name), 0);
}

static void pci_io(void *arg)
{
    (void)arg;
    io_on("pci:", 0x400, 5);
}

/* Device Lending: one VF to each host, a VF lent twice refused, one VF reclaimed alone. */
static void test_lend_one_by_one(void **state)
{
    (void)state;
    assert_int_equal(h_cli(FX.name, "device lend nvme0.vf1 --to b >/dev/null"), 0);
    assert_int_equal(h_sh("%s/ntblend --fabric %s device lend nvme0.vf1 --to c 2>&1 | grep -q "
                          "'cannot lend nvme0.vf1 to c: it is lent to b already (take it back first: "
                          "ntblend device reclaim nvme0.vf1); nvme0.vf2, a VF of the same device, is free'",
                          h_bin(), FX.name), 0);
    assert_int_not_equal(h_cli(FX.name, "device lend nvme0.vf1 --to c 2>/dev/null"), 0);
    assert_int_equal(h_cli(FX.name, "device lend nvme0.vf2 --to c >/dev/null"), 0);
    assert_int_equal(h_sh("%s/ntblend --fabric %s device list | grep -q 'nvme0.vf2 .* c (VF 2 of nvme0)'",
                          h_bin(), FX.name), 0);
    struct job pf = { "nvme0", 0x500 };
    struct h_proc p[3] = { h_spawn(FX.name, "b", pci_io, NULL), h_spawn(FX.name, "c", pci_io, NULL),
                           h_spawn(FX.name, "a", io_child, &pf) };
    for (int i = 0; i < 3; i++)
        assert_int_equal(h_join(&p[i]), 0);
    assert_int_equal(h_sh("%s/ntblend --fabric %s lspci --host b -v | grep -q 'Device: nvme0.vf1'",
                          h_bin(), FX.name), 0);
    assert_int_equal(h_cli(FX.name, "device reclaim nvme0.vf1 >/dev/null"), 0);
    assert_int_not_equal(h_sh("%s/ntblend --fabric %s lspci --host b -v | grep -q 'Device: nvme0.vf1'",
                              h_bin(), FX.name), 0);
    assert_int_equal(h_sh("%s/ntblend --fabric %s lspci --host c -v | grep -q 'Device: nvme0.vf2'",
                          h_bin(), FX.name), 0);
    /* vf2 stays with c, and works. */
    p[1] = h_spawn(FX.name, "c", pci_io, NULL);
    assert_int_equal(h_join(&p[1]), 0);
    assert_int_equal(h_cli(FX.name, "device reclaim nvme0.vf2 >/dev/null"), 0);
}

static int setup(void **state)
{
    static const struct fx_opts o = { .topo = "tests/system/topologies/sriov-nvme.ini",
                                      .add = { "nvme0", "nvme0.vf1", "nvme0.vf2" } };
    return fx_setup(state, &FX, "sriov", &o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_identity),
        cmocka_unit_test(test_vfs_at_once),
        cmocka_unit_test(test_isolation),
        cmocka_unit_test(test_lend_one_by_one),
    };
    return cmocka_run_group_tests(tests, setup, fx_teardown);
}
