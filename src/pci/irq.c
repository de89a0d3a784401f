/*
 * MSI-X for the driver model (include/ntblend/pci.h): pci_alloc_irq_vectors finds the
 * function's MSI-X capability (walking its capability list, as Linux does) and enables it;
 * request_irq points a vector at one of this host's interrupt vectors (the platform writes
 * the table entry: for a lent function, with the address that reaches this host through the
 * lender's NTB) and runs the handler in a thread of its own that sleeps until it fires.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>

#include "pci_int.h"

#define IRQ_WAIT_MS 100 /* a handler thread looks at its stop flag this often */
#define PCI_STATUS_CAP_LIST 0x10u
#define PCI_CAPABILITY_LIST 0x34
#define PCI_CAP_ID_MSIX 0x11u

struct pdm_irq {
    struct pci_dev *dev;
    unsigned vector;
    uint32_t host_vector;
    irq_handler_t handler;
    void *arg;
    uint32_t seen;        /* the vector's count when the handler was installed */
    pthread_t thread;
    atomic_bool stop, running;
    pthread_mutex_t lock; /* armed: the thread is waiting for the vector */
    pthread_cond_t cond;
    bool armed;
};

/* The MSI-X capability in the function's capability list, as Linux's pci_find_capability
 * walks it; 0 if it has none. */
static uint32_t find_msix(struct pci_dev *d)
{
    uint16_t status;
    uint8_t at;
    if (pci_read_config_word(d, PCI_STATUS, &status) || !(status & PCI_STATUS_CAP_LIST) ||
        pci_read_config_byte(d, PCI_CAPABILITY_LIST, &at))
        return 0;
    for (int hops = 0; at >= 0x40 && hops < 48; hops++) { /* 48: no list loops forever */
        uint8_t id, next;
        at &= ~3u;
        if (pci_read_config_byte(d, at, &id) || pci_read_config_byte(d, at + 1, &next))
            return 0;
        if (id == PCI_CAP_ID_MSIX)
            return at;
        at = next;
    }
    return 0;
}

int pci_alloc_irq_vectors(struct pci_dev *d, unsigned min, unsigned max)
{
    if (!d || !min || min > max)
        return -EINVAL;
    if (!d->msix_cap)
        d->msix_cap = find_msix(d);
    if (!d->msix_cap)
        return -ENOTSUP;
    uint16_t ctrl;
    int rc = pci_read_config_word(d, (int)d->msix_cap + 2, &ctrl);
    if (rc)
        return rc;
    unsigned size = (ctrl & 0x7ffu) + 1, n = max < size ? max : size;
    if (n < min)
        return -ENOSPC;
    pthread_mutex_lock(&d->lock);
    if (d->irqs) {
        pthread_mutex_unlock(&d->lock);
        return -EBUSY;
    }
    d->irqs = calloc(n, sizeof *d->irqs);
    if (!d->irqs) {
        pthread_mutex_unlock(&d->lock);
        return -ENOMEM;
    }
    d->nirqs = n;
    pthread_mutex_unlock(&d->lock);
    rc = pci_write_config_word(d, (int)d->msix_cap + 2, (uint16_t)(ctrl | 0x8000u)); /* enable */
    return rc ? rc : (int)n;
}

void pci_free_irq_vectors(struct pci_dev *d)
{
    for (unsigned v = 0; d->irqs && v < d->nirqs; v++)
        free_irq(d, v);
    pthread_mutex_lock(&d->lock);
    free(d->irqs);
    d->irqs = NULL;
    d->nirqs = 0;
    pthread_mutex_unlock(&d->lock);
}

static void *irq_thread(void *arg)
{
    struct pdm_irq *q = arg;
    uint32_t seen = q->seen;
    pthread_mutex_lock(&q->lock);
    q->armed = true;
    pthread_cond_signal(&q->cond);
    pthread_mutex_unlock(&q->lock);
    while (!atomic_load(&q->stop))
        if (pdm_host()->irq_wait(q->host_vector, &seen, IRQ_WAIT_MS) == 0 &&
            !atomic_load(&q->stop))
            q->handler((int)q->vector, q->arg);
    return NULL;
}

int request_irq(struct pci_dev *d, unsigned vector, irq_handler_t handler, void *arg)
{
    if (!d || !handler)
        return -EINVAL;
    if (!d->irqs || vector >= d->nirqs)
        return -EINVAL; /* pci_alloc_irq_vectors first */
    struct pdm_irq *q = &d->irqs[vector];
    if (atomic_load(&q->running))
        return -EBUSY;
    const struct pdm_host_ops *host = pdm_host();
    uint32_t hv;
    int rc = host->irq_vector(d, vector, &hv);
    if (rc)
        return rc;
    *q = (struct pdm_irq){ .dev = d, .vector = vector, .host_vector = hv, .handler = handler,
                           .arg = arg };
    host->irq_wait(hv, &q->seen, 0); /* every interrupt from now on reaches the handler */
    if ((rc = host->irq_route(d, vector, hv)))
        return rc;
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->cond, NULL);
    if ((rc = pthread_create(&q->thread, NULL, irq_thread, q))) {
        pthread_cond_destroy(&q->cond);
        pthread_mutex_destroy(&q->lock);
        return -rc;
    }
    /* As request_irq() promises, the handler is live when we return: a new thread can wait
     * many milliseconds for a CPU on a busy machine (while a sleeping one that is woken is
     * run at once), and the device's first interrupts would reach no handler until then. */
    pthread_mutex_lock(&q->lock);
    while (!q->armed)
        pthread_cond_wait(&q->cond, &q->lock);
    pthread_mutex_unlock(&q->lock);
    atomic_store(&q->running, true);
    return 0;
}

void free_irq(struct pci_dev *d, unsigned vector)
{
    if (!d || !d->irqs || vector >= d->nirqs)
        return;
    struct pdm_irq *q = &d->irqs[vector];
    if (!atomic_load(&q->running))
        return;
    atomic_store(&q->stop, true);
    pthread_join(q->thread, NULL);
    pthread_cond_destroy(&q->cond);
    pthread_mutex_destroy(&q->lock);
    atomic_store(&q->running, false);
}
