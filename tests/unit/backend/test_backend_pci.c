/*
 * The driver model and the SmartIO calls under it on the test double of the backend seam
 * (backend_double.h), with no fabric and no agent: dev0 of host b lent to host a (this
 * process) and hot-added into a's tree. SmartIO lists the tree and binds the function, maps
 * its BAR through the hot-add's window (no new window), gives RAM and maps it for the device
 * through the DMA window: one request for the window, then none per mapping, only a's IOMMU
 * (and with a's IOMMU off, a request to the lender per mapping). Then a driver registered
 * with pci_register_driver does the same through pci.h: what the lending layer intercepts in
 * configuration space, a register write, streaming DMA, an MSI-X interrupt reaching its
 * handler, and a hot-remove reaching remove() with everything given back. Whatever the layers
 * did went through the double: the recorded calls and where the data landed say so.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "backend_double.h"
#include "ntblend/pci.h"
#include "ntblend/smartio.h"
#include "ntblend/smartio_tree.h"

#define A_RID 0x0100 /* a's adapter: dev0's traffic enters a with it */
#define MSIX_TABLE 0x1000

static int in_iommu(void)
{
    int n = 0;
    for (int i = 0; i < 64; i++)
        n += D.iommu_maps[i].len != 0;
    return n;
}

/* The device's write at io reaches this host's RAM through a's IOMMU: where, or NULL. */
static uint8_t *device_sees(uint64_t io, uint64_t len, unsigned perm)
{
    if (io < APERTURE_IO || io - APERTURE_IO + len > APERTURE_SIZE)
        return NULL;
    return iommu_resolve(A_RID, APERTURE_IOVA + (io - APERTURE_IO), len, perm);
}

static void test_smartio_tree_and_streaming(void **state)
{
    D.lent = D.present = D.iommu = true;
    sio_tree_t *t;
    assert_int_equal(sio_tree_open(&t), 0);
    struct sio_tree_fn f[4];
    assert_int_equal(sio_tree_list(t, f, 4), 1); /* a has none of its own */
    assert_int_equal(f[0].id, 0);
    assert_true(f[0].lent && f[0].present);
    assert_int_equal(f[0].bdf, 0x8000);
    assert_int_equal(f[0].bar_addr[0], SHADOW_BAR);
    assert_int_equal(f[0].bar_size[0], BAR_SIZE);
    sio_dev_t *d;
    assert_int_equal(sio_bind(t, 0, &d), 0);
    assert_int_equal(last("agent:dev_borrow")->b, AGENT_BORROW_BIND);

    /* The BAR through the window the hot-add set up: no window of its own. */
    int wins = count("window_map"), notes = count("fn_notify");
    sio_bar_t *bar;
    size_t size;
    assert_non_null((void *)sio_map_bar(d, 0, &size, &bar));
    assert_int_equal(size, BAR_SIZE);
    assert_int_equal(count("window_map"), wins);
    assert_int_equal(last("window_cpu_map")->b, BAR_ADDR);
    sio_write32(bar, 0x20, 0xfeedf00d);
    assert_int_equal(*(uint32_t *)(D.bar + 0x20), 0xfeedf00d);
    assert_int_equal(count("fn_notify"), notes + 1);
    assert_int_equal(sio_unmap_bar(bar), 0);

    /* RAM: a's 1 MiB cannot spare the pool's usual 16 MiB piece, so it takes what is asked. */
    uint8_t *buf = sio_ram_alloc(8192);
    assert_non_null(buf);
    assert_true(buf >= D.ram[0] && buf + 8192 <= D.ram[0] + RAM_SIZE);
    assert_int_equal(last("agent:alloc")->a, 8192);

    /* The first mapping takes the DMA window (one request), the rest ask nobody. */
    int asked = count_prefix("agent:"), maps = count("iommu_map");
    uint64_t io;
    assert_int_equal(sio_stream_map(d, buf + 16, 100, SIO_DMA_WRITE, &io), 0);
    assert_int_equal(count_prefix("agent:"), asked + 1);
    assert_int_equal(last("agent:dev_aperture")->b, 1);
    assert_int_equal(io & 4095, 16);
    assert_ptr_equal(device_sees(io, 100, NTB_IOMMU_WRITE), buf + 16);
    assert_null(device_sees(io, 100, NTB_IOMMU_READ)); /* write-only */
    for (int i = 0; i < 50; i++) {
        uint64_t x;
        assert_int_equal(sio_stream_map(d, buf + 4096, 4096, SIO_DMA_READ, &x), 0);
        assert_ptr_equal(device_sees(x, 4096, NTB_IOMMU_READ), buf + 4096);
        assert_int_equal(sio_stream_unmap(d, x, 4096), 0);
        assert_null(device_sees(x, 4096, NTB_IOMMU_READ));
    }
    assert_int_equal(count_prefix("agent:"), asked + 1);
    assert_int_equal(count("iommu_map"), maps + 51);
    assert_int_equal(last("iommu_map")->a, A_RID);
    assert_int_equal(sio_stream_unmap(d, io + 4096 * 8, 100), -ENOENT);
    assert_int_equal(sio_stream_map(d, (void *)&io, 8, SIO_DMA_READ, &io), -EINVAL);

    /* Returned with a mapping left: it goes, and so does the hold on the window. */
    assert_int_equal(sio_return(d), 0);
    assert_int_equal(in_iommu(), 0);
    assert_int_equal(last("agent:dev_aperture")->b, 0);
    assert_int_equal(last("agent:dev_return")->a, 0);

    /* With a's IOMMU off, the lender maps each buffer: a request per mapping. */
    D.iommu = false;
    assert_int_equal(sio_bind(t, 0, &d), 0);
    asked = count("agent:dev_map");
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sio_stream_map(d, buf, 4096, SIO_DMA_READ, &io), 0);
        assert_int_equal(last("agent:dev_map")->b, 0); /* a's RAM, for the device */
        assert_int_equal(sio_stream_unmap(d, io, 4096), 0);
    }
    assert_int_equal(count("agent:dev_map"), asked + 3);
    assert_int_equal(count("iommu_map"), maps + 51);
    assert_int_equal(sio_return(d), 0);
    assert_int_equal(sio_ram_free(buf), 0);
    sio_tree_close(t);
}

/* ---------------------------------------------------------------- a driver */

static struct {
    struct pci_dev *dev;
    uint8_t pin;
    uint64_t bar0;
    uint8_t *buf;
    dma_addr_t io;
    int asked;            /* requests made during 20 streaming maps after the first */
    _Atomic int irqs;
    bool removed;
} drv_seen;

static void on_irq(int vector, void *arg) { atomic_fetch_add(&drv_seen.irqs, 1); }

static int probe(struct pci_dev *dev, const struct pci_device_id *id)
{
    drv_seen.dev = dev;
    drv_seen.bar0 = pci_resource_start(dev, 0);
    pci_read_config_byte(dev, PCI_INTERRUPT_PIN, &drv_seen.pin);
    pci_write_config_word(dev, PCI_COMMAND, PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER);
    uint8_t *regs = pci_iomap(dev, 0, 0);
    if (!regs)
        return -errno;
    iowrite32(0x5eed, regs + 0x40);
    drv_seen.buf = dma_host_alloc(4096);
    drv_seen.io = dma_map_single(dev, drv_seen.buf, 4096, DMA_FROM_DEVICE);
    if (dma_mapping_error(dev, drv_seen.io))
        return -errno;
    int asked = count_prefix("agent:");
    for (int i = 0; i < 20; i++) {
        dma_addr_t x = dma_map_single(dev, drv_seen.buf, 512, DMA_TO_DEVICE);
        if (dma_mapping_error(dev, x))
            return -errno;
        dma_unmap_single(dev, x, 512, DMA_TO_DEVICE);
    }
    drv_seen.asked = count_prefix("agent:") - asked;
    if (pci_alloc_irq_vectors(dev, 1, 1) != 1)
        return -ENOSPC;
    return request_irq(dev, 0, on_irq, NULL);
}

static void remove_dev(struct pci_dev *dev)
{
    free_irq(dev, 0);
    drv_seen.removed = !pci_device_is_present(dev);
}

static const struct pci_device_id ids[] = { { 0x1234, 0x5678, 0, 0 }, { 0 } };
static struct pci_driver driver = { .name = "double_drv", .id_table = ids, .probe = probe,
                                    .remove = remove_dev };

static void test_driver_model(void **state)
{
    D.lent = D.present = D.iommu = true;
    /* dev0's config space: INTx pin A, a capability list with MSI-X (4 vectors, table at
     * BAR 0 + MSIX_TABLE). */
    D.cfg[0x06] = 0x10;
    D.cfg[0x34] = 0x40;
    D.cfg[0x3d] = 1;
    D.cfg[0x40] = 0x11;
    D.cfg[0x42] = 3;
    memcpy(D.cfg + 0x44, &(uint32_t){ MSIX_TABLE }, 4);
    assert_int_equal(pci_register_driver(&driver), 1);
    assert_string_equal(pci_name(drv_seen.dev), "0000:80:00.0");
    assert_int_equal(drv_seen.bar0, SHADOW_BAR);
    /* What lending intercepts: no legacy interrupt, and it stays masked. */
    assert_int_equal(drv_seen.pin, 0);
    assert_int_equal(D.cfg[0x05] & (PCI_COMMAND_INTX_DISABLE >> 8), PCI_COMMAND_INTX_DISABLE >> 8);
    assert_int_equal(*(uint32_t *)(D.bar + 0x40), 0x5eed);
    /* Streaming DMA: through a's IOMMU into the buffer, nobody asked per mapping. */
    assert_ptr_equal(device_sees(drv_seen.io, 4096, NTB_IOMMU_WRITE), drv_seen.buf);
    assert_int_equal(drv_seen.asked, 0);
    /* MSI-X vector 0 points at a's MSI region (as the agent mapped it for the device) with
     * a host vector for data; raising that vector runs the handler. */
    const struct call *m = last("agent:dev_map");
    assert_int_equal(m->c, double_ops.msi_addr);
    uint32_t hv = *(uint32_t *)(D.bar + MSIX_TABLE + 8);
    assert_true(hv > 0 && hv < 8);
    atomic_fetch_add(&D.msi[hv], 1);
    for (int i = 0; i < 5000 && !atomic_load(&drv_seen.irqs); i++) {
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
    assert_true(atomic_load(&drv_seen.irqs) >= 1);
    /* Hot-removed: remove() runs with the function gone, and everything is given back. */
    int returns = count("agent:dev_return");
    D.present = false;
    atomic_fetch_add(&D.tree_gen, 1);
    assert_int_equal(pci_wait_removed(&driver, 10000), 0);
    assert_true(drv_seen.removed);
    assert_int_equal(count("agent:dev_return"), returns + 1);
    assert_int_equal(in_iommu(), 0);
    assert_int_equal(last("agent:dev_aperture")->b, 0);
    pci_unregister_driver(&driver);
    dma_host_free(drv_seen.buf);
}

int main(void)
{
    /* One double for both: memory sio_ram_alloc took stays the process's to the end. */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_smartio_tree_and_streaming),
        cmocka_unit_test(test_driver_model),
    };
    return cmocka_run_group_tests(tests, double_setup, double_teardown);
}
