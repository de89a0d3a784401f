/*
 * Configuration space and BARs of a bound function (include/ntblend/pci.h). Configuration
 * accesses go to the platform with what the papers' lending driver intercepts on a lent
 * function: its legacy INTx cannot cross the NTB, so Interrupt Disable stays set whatever the
 * driver writes and Interrupt Pin reads as none. BARs are mapped by the platform (a lent
 * function's through the window its hot-add set up); this file keeps the process's mappings
 * so that iowrite32/64 know a store to a register is one the device must see.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "pci_int.h"

#define MAX_MAPS 64

struct iomap {
    volatile char *base;
    size_t len;
    void *map;            /* the platform's */
    struct pci_dev *dev;
};

static struct {
    pthread_rwlock_t lock;
    struct iomap m[MAX_MAPS];
} maps = { .lock = PTHREAD_RWLOCK_INITIALIZER };

/* ---------------------------------------------------------------- configuration space */

static int cfg_check(const struct pci_dev *d, int where, int len)
{
    if (!d || where < 0 || where + len > 4096 || (where & (len - 1)))
        return -EINVAL;
    return atomic_load(&d->present) ? 0 : -ENODEV;
}

static uint32_t cfg_read(struct pci_dev *d, int where, int len)
{
    uint32_t v = pdm_host()->cfg_read(d, (uint32_t)where, (uint32_t)len);
    /* A lent function's legacy interrupt cannot cross the NTB: it has none. */
    if (d->fn.lent && where <= PCI_INTERRUPT_PIN && where + len > PCI_INTERRUPT_PIN)
        v &= ~(0xffu << (8 * (PCI_INTERRUPT_PIN - where)));
    return v;
}

static int cfg_write(struct pci_dev *d, int where, int len, uint32_t v)
{
    if (d->fn.lent && where <= PCI_COMMAND + 1 && where + len > PCI_COMMAND + 1)
        v |= PCI_COMMAND_INTX_DISABLE >> (8 * (where - PCI_COMMAND)); /* INTx stays masked */
    return pdm_host()->cfg_write(d, (uint32_t)where, (uint32_t)len, v);
}

int pci_read_config_byte(struct pci_dev *d, int where, uint8_t *val)
{
    int rc = cfg_check(d, where, 1);
    *val = rc ? 0xff : (uint8_t)cfg_read(d, where, 1);
    return rc;
}

int pci_read_config_word(struct pci_dev *d, int where, uint16_t *val)
{
    int rc = cfg_check(d, where, 2);
    *val = rc ? 0xffff : (uint16_t)cfg_read(d, where, 2);
    return rc;
}

int pci_read_config_dword(struct pci_dev *d, int where, uint32_t *val)
{
    int rc = cfg_check(d, where, 4);
    *val = rc ? UINT32_MAX : cfg_read(d, where, 4);
    return rc;
}

int pci_write_config_byte(struct pci_dev *d, int where, uint8_t val)
{
    int rc = cfg_check(d, where, 1);
    return rc ? rc : cfg_write(d, where, 1, val);
}

int pci_write_config_word(struct pci_dev *d, int where, uint16_t val)
{
    int rc = cfg_check(d, where, 2);
    return rc ? rc : cfg_write(d, where, 2, val);
}

int pci_write_config_dword(struct pci_dev *d, int where, uint32_t val)
{
    int rc = cfg_check(d, where, 4);
    return rc ? rc : cfg_write(d, where, 4, val);
}

static int command(struct pci_dev *d, uint16_t set, uint16_t clear)
{
    uint16_t cmd;
    int rc = pci_read_config_word(d, PCI_COMMAND, &cmd);
    return rc ? rc : pci_write_config_word(d, PCI_COMMAND, (uint16_t)((cmd | set) & ~clear));
}

int pci_enable_device(struct pci_dev *d) { return command(d, PCI_COMMAND_MEMORY, 0); }
void pci_disable_device(struct pci_dev *d)
{
    command(d, 0, PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER);
}
void pci_set_master(struct pci_dev *d) { command(d, PCI_COMMAND_MASTER, 0); }

/* ---------------------------------------------------------------- BARs */

uint64_t pci_resource_start(const struct pci_dev *d, int bar)
{
    return bar >= 0 && bar < PDM_BARS ? d->fn.bar_start[bar] : 0;
}

uint64_t pci_resource_len(const struct pci_dev *d, int bar)
{
    return bar >= 0 && bar < PDM_BARS ? d->fn.bar_len[bar] : 0;
}

static void unmap_slot(struct iomap *m)
{
    pdm_host()->bar_unmap(m->map);
    *m = (struct iomap){ 0 };
}

void *pci_iomap(struct pci_dev *d, int bar, size_t maxlen)
{
    if (!d || bar < 0 || bar >= PDM_BARS || !d->fn.bar_len[bar]) {
        errno = EINVAL;
        return NULL;
    }
    size_t size = 0;
    void *map;
    volatile void *p = pdm_host()->bar_map(d, bar, &size, &map);
    if (!p)
        return NULL;
    struct iomap m = { .base = p, .len = maxlen && maxlen < size ? maxlen : size, .map = map,
                       .dev = d };
    pthread_rwlock_wrlock(&maps.lock);
    int i = 0;
    while (i < MAX_MAPS && maps.m[i].base)
        i++;
    if (i == MAX_MAPS) {
        unmap_slot(&m);
        pthread_rwlock_unlock(&maps.lock);
        errno = ENOSPC;
        return NULL;
    }
    maps.m[i] = m;
    pthread_rwlock_unlock(&maps.lock);
    return (void *)m.base;
}

void pci_iounmap(struct pci_dev *d, void *addr)
{
    pthread_rwlock_wrlock(&maps.lock);
    for (int i = 0; i < MAX_MAPS; i++)
        if (maps.m[i].dev == d && maps.m[i].base == addr)
            unmap_slot(&maps.m[i]);
    pthread_rwlock_unlock(&maps.lock);
}

void pdm_release_bars(struct pci_dev *d)
{
    pthread_rwlock_wrlock(&maps.lock);
    for (int i = 0; i < MAX_MAPS; i++)
        if (maps.m[i].dev == d)
            unmap_slot(&maps.m[i]);
    pthread_rwlock_unlock(&maps.lock);
}

uint32_t ioread32(const void *addr) { return *(const volatile uint32_t *)addr; }
uint64_t ioread64(const void *addr) { return *(const volatile uint64_t *)addr; }

/* A store into a mapped BAR is a posted write the device sees (the platform tells it; across
 * a downed link it never arrives). */
static bool mmio_write(void *addr, uint64_t val, int len)
{
    bool done = false;
    pthread_rwlock_rdlock(&maps.lock);
    for (int i = 0; i < MAX_MAPS && !done; i++) {
        const struct iomap *m = &maps.m[i];
        if (m->base && (volatile char *)addr >= m->base &&
            (volatile char *)addr + len <= m->base + m->len) {
            pdm_host()->bar_write(m->map, (size_t)((volatile char *)addr - m->base), val, len);
            done = true;
        }
    }
    pthread_rwlock_unlock(&maps.lock);
    return done;
}

void iowrite32(uint32_t val, void *addr)
{
    if (!mmio_write(addr, val, 4))
        *(volatile uint32_t *)addr = val;
}

void iowrite64(uint64_t val, void *addr)
{
    if (!mmio_write(addr, val, 8))
        *(volatile uint64_t *)addr = val;
}
