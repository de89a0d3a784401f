/*
 * The SmartIO acceptance test: a program on borrower b borrows the NVMe of lender a, maps
 * BAR0, resets the controller, creates admin and I/O queues and runs Identify plus 4 KiB
 * writes and reads with byte-exact verification — with queues and data in b's memory, in a's
 * memory, and in the accelerator BAR of a third host c (smartio-tocs-2021 §4.4, §6.2). The
 * driver is libntbnvme (ntblend/nvme.h) over a device the test borrowed (nvme_open_sio), with
 * all its memory in the region given; it uses nothing but smartio.h; the device is the NVMe
 * model, reached only through the fabric as a borrower would.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "fixture.h"
#include "nvme_tests.h"
#include "ntblend/nvme.h"
#include "ntblend/smartio.h"

static struct fx FX;
#define NODE_A 4u
#define SEG_A 21u          /* the segment a's owner exports */
#define REGION (1u << 20)  /* queues and data: 1 MiB */
#define NBLK 8             /* single-block writes and reads per case */
#define NMULTI 4           /* ... and one NMULTI-block command each way (a PRP list) */
#define HV_ADMIN 20u       /* b's host vectors for the NVMe's MSI-X vectors 0 and 1 */
#define HV_IO 21u
#define NVME_CSTS 0x1c     /* controller status register: RDY bit 0, CFS bit 1 */
#define NVME_CSTS_RDY 0x1u
#define NVME_CSTS_CFS 0x2u

static void lend(const char *host)
{
    struct h_proc p = h_spawn(FX.name, host, lender, NULL);
    h_from(&p);
    assert_int_equal(h_join(&p), 0);
}

static int setup(void **state)
{
    static const struct fx_opts o = { .topo = "examples/topologies/smartio3.ini" };
    if (fx_setup(state, &FX, "nvb", &o))
        return -1;
    lend("a"); /* nvme0, accel0 */
    lend("c"); /* accel1 */
    return 0;
}

/* ---------------------------------------------------------------- the driver's work */

static bool printable(const volatile uint8_t *p, size_t n, bool need_text)
{
    bool text = false;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < 0x20 || p[i] > 0x7e)
            return false;
        text |= p[i] != ' ';
    }
    return text || !need_text;
}

static uint32_t rd32le(const volatile uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

struct io_ctx {
    int done;
    struct nvme_cpl cpl;
};

static void on_done(void *arg, const struct nvme_cpl *cpl)
{
    struct io_ctx *c = arg;
    c->done++;
    c->cpl = *cpl;
}

/* Everything, with queues, Identify buffers, PRP lists and data in the region (cpu, io,
 * size): libntbnvme takes it as nvme_open_opts.mem and hands out nothing else. tag tells the
 * cases' data apart (and their LBAs). irq: completions by MSI-X instead of polling. */
static void exercise(sio_dev_t *dev, volatile uint8_t *cpu, uint64_t io, size_t size,
                     uint32_t tag, bool irq)
{
    struct nvme_open_opts oo = { .admin_depth = 32, .admin_irq = irq ? HV_ADMIN : 0,
                                 .mem = cpu, .mem_ioaddr = io, .mem_size = size };
    nvme_dev_t *d = NULL;
    int rc = nvme_open_sio(dev, &oo, &d);
    if (rc)
        fprintf(stderr, "nvme_open_sio: %s\n", nvme_errmsg());
    CHECK_EQ(rc, 0);
    nvme_mem_t *r = nvme_dev_mem(d);
    CHECK(r);
    size_t barsize;
    sio_bar_t *regs;
    CHECK(sio_map_bar(dev, 0, &barsize, &regs));
    CHECK_EQ(sio_read32(regs, NVME_CSTS) & (NVME_CSTS_RDY | NVME_CSTS_CFS), NVME_CSTS_RDY);
    if (irq) {
        CHECK_EQ(sio_enable_vector(dev, 0, HV_ADMIN), 0);
        CHECK_EQ(sio_enable_vector(dev, 1, HV_IO), 0);
    }

    /* Identify controller and namespace 1. */
    volatile uint8_t *c = nvme_buf_alloc(d, r, 4096), *ns = nvme_buf_alloc(d, r, 4096);
    CHECK(c && ns);
    CHECK(c >= cpu && c < cpu + size && ns >= cpu && ns < cpu + size);
    memset((void *)c, 0xa5, 4096);
    struct nvme_cmd idc = { .opc = 0x06, .cdw10 = 1 };
    struct nvme_cpl cpl;
    CHECK_EQ(nvme_admin(d, &idc, (void *)c, 4096, &cpl), 0);
    uint16_t vid = (uint16_t)(c[0] | c[1] << 8);
    CHECK(vid != 0 && vid != 0xffff && vid != 0xa5a5);
    CHECK(printable(c + 4, 20, true));   /* SN */
    CHECK(printable(c + 24, 40, true));  /* MN */
    CHECK(printable(c + 64, 8, true));   /* FR */
    CHECK_EQ(c[512], 0x66);              /* SQES: 64-byte entries */
    CHECK_EQ(c[513], 0x44);              /* CQES: 16-byte entries */
    uint32_t nn = rd32le(c + 516);
    CHECK(nn >= 1 && nn < 1024);
    CHECK(rd32le(c + 80) >= 0x00010000u); /* VER */
    struct nvme_ctrl_info ci;
    CHECK_EQ(nvme_ctrl_info(d, &ci), 0);
    CHECK_EQ(ci.vid, vid);
    CHECK_EQ(ci.namespaces, nn);
    if (tag == 1) {
        char mn[41];
        for (int i = 0; i < 40; i++)
            mn[i] = (char)c[24 + i];
        mn[40] = 0;
        fprintf(stderr, "nvme0: VID %04x, model \"%.40s\", %u namespace(s)\n", vid, mn, nn);
    }
    memset((void *)ns, 0xa5, 4096);
    struct nvme_cmd idn = { .opc = 0x06, .nsid = 1, .cdw10 = 0 };
    CHECK_EQ(nvme_admin(d, &idn, (void *)ns, 4096, &cpl), 0);
    uint64_t nsze = (uint64_t)rd32le(ns + 4) << 32 | rd32le(ns);
    CHECK_EQ(nsze, (1ull << 30) / 4096); /* smartio3.ini: ns_size = 1G, 4 KiB blocks */
    uint8_t flbas = ns[26] & 0xf;
    CHECK_EQ(ns[128 + 4 * flbas + 2], 12); /* LBADS: 4 KiB */
    struct nvme_ns_info nsi;
    CHECK_EQ(nvme_ns_info(d, 1, &nsi), 0);
    CHECK_EQ(nsi.blocks, nsze);
    CHECK_EQ(nsi.block_size, 4096);
    /* A namespace that does not exist is refused. */
    idn.nsid = nn + 1;
    CHECK_EQ(nvme_admin(d, &idn, (void *)ns, 4096, &cpl), -ENXIO);
    CHECK_EQ(cpl.status, 0x000b);

    /* An I/O queue pair, queue id 1 (so MSI-X vector 1). */
    nvme_qpair_t *qp;
    struct nvme_qpair_opts qo = { .depth = 64, .sq_mem = r, .cq_mem = r,
                                  .irq = irq ? HV_IO : 0 };
    CHECK_EQ(nvme_qpair_create(d, &qo, &qp), 0);
    CHECK_EQ(nvme_qpair_id(qp), 1);

    size_t span = (NBLK + NMULTI) * 4096ul;
    volatile uint8_t *w = nvme_buf_alloc(d, r, span), *rd = nvme_buf_alloc(d, r, span);
    CHECK(w && rd);
    uint64_t lba0 = 4096ull * tag + 7; /* each case its own blocks */
    for (size_t i = 0; i < span; i++) {
        w[i] = pattern(tag, lba0 + i / 4096, i % 4096);
        rd[i] = 0xee;
    }

    /* NBLK single-block writes, all in flight at once (one doorbell), then one NMULTI-block
     * write (a PRP list, which the library keeps in the region too). */
    static struct io_ctx ctx[NBLK];
    memset(ctx, 0, sizeof ctx);
    for (int b = 0; b < NBLK; b++)
        CHECK_EQ(nvme_submit(qp, NVME_OP_WRITE, 1, lba0 + (uint64_t)b, 1,
                             (void *)(w + b * 4096), b < NBLK - 1 ? NVME_SUBMIT_DEFER : 0,
                             on_done, &ctx[b]), 0);
    CHECK_EQ(nvme_qpair_outstanding(qp), NBLK);
    while (nvme_qpair_outstanding(qp))
        CHECK(nvme_qpair_wait(qp, 5000) > 0);
    for (int b = 0; b < NBLK; b++) {
        CHECK_EQ(ctx[b].done, 1);
        CHECK_EQ(ctx[b].cpl.status, 0);
        CHECK_EQ(ctx[b].cpl.rc, 0);
    }
    struct nvme_qpair_stats st;
    nvme_qpair_stats(qp, &st);
    CHECK_EQ(st.stale, 0); /* every completion came on SQ 1 with one of its identifiers */
    CHECK_EQ(nvme_write(qp, 1, lba0 + NBLK, NMULTI, (void *)(w + NBLK * 4096)), 0);

    /* Read them back into the other buffer: one block at a time, in reverse, then the
     * NMULTI-block range with one command. */
    for (int b = NBLK - 1; b >= 0; b--) {
        if (irq && b == NBLK - 1) {
            /* The interrupt itself: wait for the vector first, then the entry is there. The
             * earlier commands' interrupts may still be on their way: let them land, then take
             * the count. */
            usleep(20000);
            uint32_t seen = 0;
            sio_wait_vector(HV_IO, &seen, 0);
            struct io_ctx one = { 0 };
            CHECK_EQ(nvme_submit(qp, NVME_OP_READ, 1, lba0 + (uint64_t)b, 1,
                                 (void *)(rd + b * 4096), 0, on_done, &one), 0);
            CHECK_EQ(sio_wait_vector(HV_IO, &seen, 5000), 0);
            CHECK_EQ(nvme_qpair_poll(qp, 0), 1);
            CHECK_EQ(one.done, 1); /* the completion was this command's */
            CHECK_EQ(one.cpl.status, 0);
            continue;
        }
        CHECK_EQ(nvme_read(qp, 1, lba0 + (uint64_t)b, 1, (void *)(rd + b * 4096)), 0);
    }
    CHECK_EQ(nvme_read(qp, 1, lba0 + NBLK, NMULTI, (void *)(rd + NBLK * 4096)), 0);

    /* Byte for byte. */
    static uint8_t want[(NBLK + NMULTI) * 4096], got[(NBLK + NMULTI) * 4096];
    for (size_t i = 0; i < span; i++) {
        want[i] = pattern(tag, lba0 + i / 4096, i % 4096);
        got[i] = rd[i];
    }
    for (size_t i = 0; i < span; i++)
        if (got[i] != want[i]) {
            fprintf(stderr, "case %u: byte %zu (block %zu) is %02x, wrote %02x\n", tag, i,
                    i / 4096, got[i], want[i]);
            CHECK(0);
        }
    CHECK(memcmp(got, want, span) == 0);

    /* Out of range: refused by the library before it is sent, and by the controller when
     * sent raw; nothing moves. */
    CHECK_EQ(nvme_read(qp, 1, nsze, 1, (void *)rd), -ERANGE);
    struct nvme_cmd oor = { .opc = 0x02, .nsid = 1, .cdw10 = (uint32_t)nsze,
                            .cdw11 = (uint32_t)(nsze >> 32) };
    CHECK_EQ(nvme_qpair_cmd(qp, &oor, (void *)rd, 4096, &cpl), -ERANGE);
    CHECK_EQ(cpl.status, 0x0080);

    /* Tear down: delete SQ then CQ, shut down and disable. */
    CHECK_EQ(nvme_qpair_delete(qp), 0);
    CHECK_EQ(nvme_close(d), 0);
    CHECK_EQ(sio_read32(regs, NVME_CSTS) & NVME_CSTS_RDY, 0);
    CHECK_EQ(sio_unmap_bar(regs), 0);
}

static sio_dev_t *borrow(const char *name)
{
    int id = sio_find(name);
    CHECK(id >= 0);
    sio_dev_t *dev;
    CHECK_EQ(sio_borrow((uint32_t)id, SIO_EXCLUSIVE, &dev), 0);
    CHECK_EQ(sio_enable(dev), 0);
    return dev;
}

/* ---------------------------------------------------------------- (1) b's memory */

static void in_borrower(void *arg)
{
    bool irq = arg != NULL;
    sio_dev_t *nvme = borrow("nvme0");
    seg_desc_t *sd;
    CHECK_EQ(seg_open(&sd), 0);
    seg_local_t *seg;
    CHECK_EQ(seg_create(sd, &seg, SEG_ID_AUTO, REGION), 0);
    seg_map_t *map;
    volatile uint8_t *cpu = seg_map_local(seg, 0, 0, 0, &map);
    CHECK(cpu);
    uint64_t io;
    sio_dma_t *dma;
    CHECK_EQ(sio_map_local(nvme, seg, 0, REGION, &io, &dma), 0);
    exercise(nvme, cpu, io, REGION, irq ? 4 : 1, irq);
    CHECK_EQ(sio_unmap(dma), 0);
    CHECK_EQ(sio_return(nvme), 0);
    seg_unmap(map);
    seg_remove(seg);
    seg_close(sd);
}

static void test_queues_and_data_in_borrower(void **state)
{
    (void)state;
    struct h_proc p = h_spawn(FX.name, "b", in_borrower, NULL);
    assert_int_equal(h_join(&p), 0);
}

static void test_msix_queues_and_data_in_borrower(void **state)
{
    (void)state;
    struct h_proc p = h_spawn(FX.name, "b", in_borrower, (void *)1);
    assert_int_equal(h_join(&p), 0);
}

/* ---------------------------------------------------------------- (2) a's memory */

static void seg_owner(void *arg)
{
    (void)arg;
    seg_desc_t *sd;
    CHECK_EQ(seg_open(&sd), 0);
    seg_local_t *s;
    CHECK_EQ(seg_create(sd, &s, SEG_A, REGION), 0);
    CHECK_EQ(seg_prepare(s, 0), 0);
    CHECK_EQ(seg_set_available(s, 0), 0);
    h_put(1);
    h_get(); /* the borrower is done */
    CHECK_EQ(seg_set_unavailable(s, 0), 0);
    CHECK_EQ(seg_remove(s), 0);
    seg_close(sd);
}

static void in_lender(void *arg)
{
    (void)arg;
    sio_dev_t *nvme = borrow("nvme0");
    seg_desc_t *sd;
    CHECK_EQ(seg_open(&sd), 0);
    seg_remote_t *seg;
    CHECK_EQ(seg_connect(sd, &seg, NODE_A, SEG_A, 0, 5000), 0);
    seg_map_t *map;
    volatile uint8_t *cpu = seg_map_remote(seg, 0, 0, 0, &map);
    CHECK(cpu);
    uint64_t io;
    sio_dma_t *dma;
    CHECK_EQ(sio_map_remote(nvme, seg, 0, REGION, &io, &dma), 0);
    exercise(nvme, cpu, io, REGION, 2, false);
    CHECK_EQ(sio_unmap(dma), 0);
    CHECK_EQ(sio_return(nvme), 0);
    seg_unmap(map);
    seg_disconnect(seg);
    seg_close(sd);
}

static void test_queues_and_data_in_lender(void **state)
{
    (void)state;
    struct h_proc o = h_spawn(FX.name, "a", seg_owner, NULL);
    h_from(&o);
    struct h_proc p = h_spawn(FX.name, "b", in_lender, NULL);
    int rc = h_join(&p);
    h_to(&o, 1);
    assert_int_equal(h_join(&o), 0);
    assert_int_equal(rc, 0);
}

/* ---------------------------------------------------------------- (3) c's accelerator BAR */

static void in_accel_bar(void *arg)
{
    (void)arg;
    sio_dev_t *nvme = borrow("nvme0"), *acc = borrow("accel1");
    size_t size;
    sio_bar_t *bar;
    volatile uint8_t *cpu = sio_map_bar(acc, 2, &size, &bar);
    CHECK(cpu);
    CHECK(size >= REGION);
    uint64_t io;
    sio_dma_t *dma;
    CHECK_EQ(sio_map_peer_bar(nvme, acc, 2, &io, &dma), 0);
    exercise(nvme, cpu, io, REGION, 3, false);
    CHECK_EQ(sio_unmap(dma), 0);
    CHECK_EQ(sio_unmap_bar(bar), 0);
    CHECK_EQ(sio_return(nvme), 0);
    CHECK_EQ(sio_return(acc), 0);
}

static void test_queues_and_data_in_third_host_accel_bar(void **state)
{
    (void)state;
    struct h_proc p = h_spawn(FX.name, "b", in_accel_bar, NULL);
    assert_int_equal(h_join(&p), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_queues_and_data_in_borrower),
        cmocka_unit_test(test_queues_and_data_in_lender),
        cmocka_unit_test(test_queues_and_data_in_third_host_accel_bar),
        cmocka_unit_test(test_msix_queues_and_data_in_borrower),
    };
    return cmocka_run_group_tests(tests, setup, fx_teardown);
}
