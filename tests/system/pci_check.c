/*
 * pci_check: a driver for test_lending_drv.sh that reports, for every accelerator in its
 * host's tree, what the driver model shows it — written only against include/ntblend/pci.h,
 * like any driver. One line per function:
 *
 *   NAME pin=P cmd=C msix_lo=L msix_hi=H bar0=ADDR size=N
 *
 * pin: Interrupt Pin; cmd: the Command register after writing MEMORY|MASTER (0x0006); msix:
 * the address MSI-X vector 0 was pointed at by request_irq (where the device's interrupt
 * write goes); bar0: where BAR0 sits in this host's address map.
 */
#include <stdio.h>

#include "ntblend/accel_regs.h"
#include "ntblend/pci.h"

static void on_irq(int vector, void *arg)
{
    (void)vector;
    (void)arg;
}

static int probe(struct pci_dev *dev, const struct pci_device_id *id)
{
    (void)id;
    uint8_t pin;
    uint16_t cmd;
    int rc = pci_read_config_byte(dev, PCI_INTERRUPT_PIN, &pin);
    if (!rc)
        rc = pci_write_config_word(dev, PCI_COMMAND, PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER);
    if (!rc)
        rc = pci_read_config_word(dev, PCI_COMMAND, &cmd);
    volatile uint8_t *regs = rc ? NULL : pci_iomap(dev, ACCEL_BAR_REGS, 0);
    if (!regs || pci_alloc_irq_vectors(dev, 1, 1) != 1 || request_irq(dev, 0, on_irq, NULL)) {
        fprintf(stderr, "pci_check: %s: cannot set it up\n", pci_name(dev));
        return -1;
    }
    printf("%s pin=%u cmd=%#x msix_lo=%#x msix_hi=%#x bar0=%#llx size=%llu\n", pci_name(dev),
           pin, cmd, ioread32((const void *)(regs + ACCEL_MSIX_TABLE)),
           ioread32((const void *)(regs + ACCEL_MSIX_TABLE + 4)),
           (unsigned long long)pci_resource_start(dev, ACCEL_BAR_REGS),
           (unsigned long long)pci_resource_len(dev, ACCEL_BAR_REGS));
    return 0;
}

static void remove_dev(struct pci_dev *dev)
{
    free_irq(dev, 0);
}

static const struct pci_device_id ids[] = { { 0x10de, 0x1bb1, 0, 0 }, { 0 } };
static struct pci_driver driver = { .name = "pci_check", .id_table = ids, .probe = probe,
                                    .remove = remove_dev };

int main(void)
{
    int n = pci_register_driver(&driver);
    if (n < 0) {
        fprintf(stderr, "pci_check: cannot register: %d\n", n);
        return 1;
    }
    pci_unregister_driver(&driver);
    return n > 0 ? 0 : 1;
}
