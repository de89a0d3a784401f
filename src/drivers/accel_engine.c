/*
 * accel_engine: the accelerator's DMA engine for drivers written against the driver model
 * (accel_engine.h). Written only against include/ntblend/pci.h and accel_regs.h.
 */
#define _GNU_SOURCE
#include "accel_engine.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint32_t accel_eng_reg(const struct accel_eng *e, unsigned off)
{
    return ioread32((const void *)(e->regs + off));
}

static void reg_write(struct accel_eng *e, unsigned off, uint32_t v)
{
    iowrite32(v, (void *)(e->regs + off));
}

const struct pci_device_id accel_eng_ids[] = {
    { 0x10de, 0x1bb1, 0, 0 }, /* the accelerator model (accel_regs.h) */
    { 0 },
};

static int eng_irq(struct accel_eng *e);

int accel_eng_open(struct accel_eng *e, struct pci_dev *dev, size_t buf_size, bool irq)
{
    memset(e, 0, sizeof *e);
    e->dev = dev;
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->done, NULL);
    int rc = pci_enable_device(dev);
    if (rc)
        return rc;
    e->enabled = true;
    pci_set_master(dev);
    e->regs = pci_iomap(dev, ACCEL_BAR_REGS, 0);
    if (!e->regs)
        return errno ? -errno : -ENOMEM;
    /* Just reset (by its previous user's return), a function reads zeros until it is ready:
     * give it a second, as after a Function Level Reset. */
    for (int i = 0; i < 1000 && accel_eng_reg(e, ACCEL_REG_ID) == 0; i++)
        usleep(1000);
    if (accel_eng_reg(e, ACCEL_REG_ID) != ACCEL_ID)
        return -ENODEV;
    if (buf_size) {
        e->buf = dma_alloc_coherent(dev, buf_size, &e->buf_io);
        if (!e->buf)
            return errno ? -errno : -ENOMEM;
        e->buf_size = buf_size;
    }
    if (irq && (rc = eng_irq(e)))
        return rc;
    return accel_eng_reset(e, 1000); /* a clean engine */
}

static void on_irq(int vector, void *arg)
{
    (void)vector;
    struct accel_eng *e = arg;
    atomic_fetch_add(&e->irqs, 1);
    pthread_mutex_lock(&e->lock);
    pthread_cond_broadcast(&e->done);
    pthread_mutex_unlock(&e->lock);
}

static int eng_irq(struct accel_eng *e)
{
    int rc = pci_alloc_irq_vectors(e->dev, 1, 1);
    if (rc < 0)
        return rc;
    e->vectors = true;
    if (rc != 1)
        return -ENOSPC;
    rc = request_irq(e->dev, 0, on_irq, e);
    if (!rc)
        e->irq = true;
    return rc;
}

int accel_eng_reset(struct accel_eng *e, unsigned timeout_ms)
{
    reg_write(e, ACCEL_REG_CONTROL, ACCEL_CTRL_RESET);
    uint64_t end = now_ns() + (uint64_t)timeout_ms * 1000000u;
    /* Done when CONTROL reads back 0. */
    while (accel_eng_reg(e, ACCEL_REG_CONTROL) & ACCEL_CTRL_RESET) {
        if (now_ns() > end || !pci_device_is_present(e->dev))
            return -ETIMEDOUT;
        usleep(100);
    }
    e->head = 0;
    reg_write(e, ACCEL_REG_VECTOR, 0);
    reg_write(e, ACCEL_REG_CONTROL, ACCEL_CTRL_ENABLE);
    return 0;
}

static volatile uint32_t *slot_of(const struct accel_eng *e, uint32_t idx)
{
    return (volatile uint32_t *)(e->regs + ACCEL_RING_OFF +
                                 sizeof(struct accel_desc) * (idx % ACCEL_RING_ENTRIES));
}

uint32_t accel_eng_copies(struct accel_eng *e, uint64_t src, uint64_t dst, uint32_t len,
                          uint32_t flags, bool intr, uint32_t count)
{
    for (uint32_t k = 0; k < count; k++) {
        struct accel_desc d = { .src = src, .dst = dst, .len = len,
                                .ctrl = ACCEL_OP_COPY | flags |
                                        (intr && k + 1 == count ? ACCEL_DESC_INTR : 0) };
        uint32_t s[8];
        memcpy(s, &d, sizeof s);
        volatile uint32_t *w = slot_of(e, e->head++);
        for (int i = 0; i < 8; i++)
            w[i] = s[i];
    }
    e->irqs_before = atomic_load(&e->irqs);
    reg_write(e, ACCEL_REG_HEAD, e->head);
    return e->head;
}

int accel_eng_wait(struct accel_eng *e, uint32_t target, const struct accel_wait *w)
{
    uint64_t end = now_ns() + (uint64_t)w->timeout_ms * 1000000u;
    int rc;
    if (e->irq)
        pthread_mutex_lock(&e->lock);
    for (;;) {
        bool done = accel_eng_reg(e, ACCEL_REG_COMPLETED) == target;
        if (done && (!w->need_irq || atomic_load(&e->irqs) != e->irqs_before)) {
            rc = 0;
            break;
        }
        bool gone = !pci_device_is_present(e->dev);
        if (gone || now_ns() > end) {
            rc = done ? -ETIME : gone ? -ENODEV : -ETIMEDOUT;
            break;
        }
        if (!e->irq) {
            usleep(w->poll_us);
            continue;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)w->poll_us * 1000;
        while (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&e->done, &e->lock, &ts); /* the interrupt, or a recheck */
    }
    if (e->irq)
        pthread_mutex_unlock(&e->lock);
    return rc;
}

uint32_t accel_eng_status(const struct accel_eng *e, uint32_t idx)
{
    return slot_of(e, idx)[6];
}

void accel_eng_close(struct accel_eng *e)
{
    if (e->irq)
        free_irq(e->dev, 0);
    if (e->regs && e->enabled && pci_device_is_present(e->dev))
        reg_write(e, ACCEL_REG_CONTROL, 0);
    if (e->buf)
        dma_free_coherent(e->dev, e->buf_size, e->buf, e->buf_io);
    if (e->vectors)
        pci_free_irq_vectors(e->dev);
    if (e->enabled)
        pci_disable_device(e->dev);
    pthread_cond_destroy(&e->done);
    pthread_mutex_destroy(&e->lock);
    e->irq = e->vectors = e->enabled = false;
    e->buf = NULL;
}

void accel_eng_pattern(uint8_t *p, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)((i * 131u + seed * 7u) ^ (i >> 9));
}

void accel_eng_remove(struct accel_eng *e)
{
    printf("%s: removed%s\n", pci_name(e->dev),
           pci_device_is_present(e->dev) ? "" : " (hot-unplugged)");
    fflush(stdout);
    accel_eng_close(e);
}

int accel_eng_parse_size(const char *arg, size_t max, size_t *size)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(arg, &end, 0);
    if (*end == 'k' || *end == 'K')
        v <<= 10, end++;
    else if (*end == 'm' || *end == 'M')
        v <<= 20, end++;
    if (errno || end == arg || *end || !v || v > max)
        return -EINVAL;
    *size = (size_t)v;
    return 0;
}
