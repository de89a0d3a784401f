/*
 * The driver model's tree (include/ntblend/pci.h): registering a driver binds it to every
 * matching function of the platform's tree and calls probe(); a watcher thread binds the
 * functions hot-added later and calls remove() for those hot-removed (a surprise removal:
 * pci_device_is_present turns false first); unregistering removes them all. Also each
 * function's identity. What a bound function is underneath is the platform's (pci_int.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pci_int.h"

#define TREE_WAIT_MS 200 /* the watcher looks at the tree this often even when told nothing */

static struct {
    pthread_mutex_t lock;  /* the driver and its devices; recursive: probe() may map a peer */
    struct pci_driver *drv;
    uint32_t seen;         /* the platform's cursor of the tree (the watcher's) */
    struct pci_dev *devs[PDM_MAX_DEVS];
    pthread_t watcher;
    atomic_bool stop;
    pthread_cond_t changed;
} bus = { .lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP, .changed = PTHREAD_COND_INITIALIZER };

static const struct pci_device_id *match(const struct pci_driver *drv,
                                         const struct pdm_fn *x)
{
    for (const struct pci_device_id *id = drv->id_table; id && id->vendor; id++)
        if ((id->vendor == PCI_ANY_ID || id->vendor == x->vendor) &&
            (id->device == PCI_ANY_ID || id->device == x->device) &&
            ((x->class_code ^ id->class_code) & id->class_mask) == 0)
            return id;
    return NULL;
}

static struct pci_dev **slot_of(uint32_t id)
{
    for (int i = 0; i < PDM_MAX_DEVS; i++)
        if (bus.devs[i] && bus.devs[i]->fn.id == id)
            return &bus.devs[i];
    return NULL;
}

struct pci_dev *pdm_find_bar(uint64_t phys, size_t size, int *bar)
{
    struct pci_dev *found = NULL;
    pthread_mutex_lock(&bus.lock);
    for (int i = 0; i < PDM_MAX_DEVS && !found; i++) {
        struct pci_dev *x = bus.devs[i];
        for (int b = 0; x && b < PDM_BARS && !found; b++)
            if (x->fn.bar_len[b] && phys >= x->fn.bar_start[b] &&
                phys - x->fn.bar_start[b] + size <= x->fn.bar_len[b]) {
                found = x;
                *bar = b;
            }
    }
    pthread_mutex_unlock(&bus.lock);
    return found;
}

/* Undo what the driver model set up for d and free it (after remove() or a failed probe). */
static void release(struct pci_dev *d)
{
    pdm_release_bars(d);
    pci_free_irq_vectors(d);
    pdm_release_dma(d);
    /* Its streaming mappings go with it; after a hot-remove the platform has dropped the
     * binding already. */
    pdm_host()->unbind(d);
    pthread_mutex_destroy(&d->lock);
    free(d);
}

/* Bind and probe one function (bus.lock held). */
static int attach(const struct pdm_fn *f, const struct pci_device_id *id)
{
    struct pci_dev **slot = NULL;
    for (int i = 0; i < PDM_MAX_DEVS && !slot; i++)
        if (!bus.devs[i])
            slot = &bus.devs[i];
    if (!slot)
        return -ENOSPC;
    struct pci_dev *d = calloc(1, sizeof *d);
    if (!d)
        return -ENOMEM;
    d->fn = *f;
    snprintf(d->name, sizeof d->name, "0000:%02x:%02x.%x", f->bdf >> 8, (f->bdf >> 3) & 0x1f,
             f->bdf & 7);
    pthread_mutex_init(&d->lock, NULL);
    atomic_store(&d->present, true);
    int rc = pdm_host()->bind(d);
    if (rc) {
        fprintf(stderr, "%s: %s (%s): cannot bind it: %s\n", bus.drv->name, d->name, f->name,
                rc == -EBUSY ? "another driver, or another host, has it" : strerror(-rc));
        pthread_mutex_destroy(&d->lock);
        free(d);
        return rc;
    }
    *slot = d;
    rc = bus.drv->probe ? bus.drv->probe(d, id) : 0;
    if (rc) {
        fprintf(stderr, "%s: probe of %s failed: %s\n", bus.drv->name, d->name,
                strerror(rc < 0 ? -rc : rc));
        *slot = NULL;
        release(d);
        return rc;
    }
    pthread_cond_broadcast(&bus.changed);
    return 0;
}

static void detach(struct pci_dev **slot, bool gone)
{
    struct pci_dev *d = *slot;
    if (gone)
        atomic_store(&d->present, false);
    if (bus.drv->remove)
        bus.drv->remove(d);
    *slot = NULL;
    release(d);
    pthread_cond_broadcast(&bus.changed);
}

/* Bring the bound set in line with the tree (bus.lock held); returns how many were bound. */
static int sync_tree(void)
{
    struct pdm_fn f[PDM_MAX_DEVS];
    int n = pdm_host()->scan(f, PDM_MAX_DEVS), bound = 0;
    n = n < 0 ? 0 : n < PDM_MAX_DEVS ? n : PDM_MAX_DEVS;
    /* Gone, or going: remove first. */
    for (int i = 0; i < PDM_MAX_DEVS; i++) {
        struct pci_dev *d = bus.devs[i];
        if (!d || !(d->fn.lent || d->fn.hotplug))
            continue;
        bool there = false;
        for (int k = 0; k < n; k++)
            there |= f[k].id == d->fn.id && f[k].present;
        if (!there)
            detach(&bus.devs[i], true);
    }
    for (int k = 0; k < n; k++) {
        if (!f[k].present || slot_of(f[k].id))
            continue;
        const struct pci_device_id *id = match(bus.drv, &f[k]);
        if (id && attach(&f[k], id) == 0)
            bound++;
    }
    return bound;
}

/* Binds what is hot-added, removes what goes. */
static void *watch(void *arg)
{
    (void)arg;
    while (!atomic_load(&bus.stop)) {
        pdm_host()->wait(&bus.seen, TREE_WAIT_MS);
        pthread_mutex_lock(&bus.lock);
        if (!atomic_load(&bus.stop))
            sync_tree();
        pthread_mutex_unlock(&bus.lock);
    }
    return NULL;
}

/* Unbind everything and let go of the platform (bus.lock held, no watcher running). */
static void unbind_all(void)
{
    for (int i = 0; i < PDM_MAX_DEVS; i++)
        if (bus.devs[i])
            detach(&bus.devs[i], false);
    bus.drv = NULL;
    pdm_host()->close();
}

int pci_register_driver(struct pci_driver *drv)
{
    if (!drv || !drv->name || !drv->id_table)
        return -EINVAL;
    pthread_mutex_lock(&bus.lock);
    if (bus.drv) {
        pthread_mutex_unlock(&bus.lock);
        return -EBUSY;
    }
    int rc = pdm_host()->open();
    if (rc) {
        pthread_mutex_unlock(&bus.lock);
        return rc;
    }
    bus.seen = 0;
    pdm_host()->wait(&bus.seen, 0); /* the tree's generation before the first look */
    bus.drv = drv;
    atomic_store(&bus.stop, false);
    int n = sync_tree();
    rc = pthread_create(&bus.watcher, NULL, watch, NULL);
    if (rc)
        unbind_all(); /* no watcher to stop */
    pthread_mutex_unlock(&bus.lock);
    return rc ? -rc : n;
}

void pci_unregister_driver(struct pci_driver *drv)
{
    pthread_mutex_lock(&bus.lock);
    if (!drv || bus.drv != drv) {
        pthread_mutex_unlock(&bus.lock);
        return;
    }
    atomic_store(&bus.stop, true);
    pthread_mutex_unlock(&bus.lock);
    pdm_host()->wake(); /* the watcher sees stop */
    pthread_join(bus.watcher, NULL);
    pthread_mutex_lock(&bus.lock);
    unbind_all();
    pthread_mutex_unlock(&bus.lock);
}

int pci_wait_removed(struct pci_driver *drv, int timeout_ms)
{
    struct timespec end;
    clock_gettime(CLOCK_REALTIME, &end);
    if (timeout_ms >= 0) {
        end.tv_sec += timeout_ms / 1000;
        end.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (end.tv_nsec >= 1000000000L) {
            end.tv_sec++;
            end.tv_nsec -= 1000000000L;
        }
    }
    int rc = 0;
    pthread_mutex_lock(&bus.lock);
    for (;;) {
        bool any = false;
        for (int i = 0; i < PDM_MAX_DEVS; i++)
            any |= bus.devs[i] != NULL;
        if (!any || bus.drv != drv)
            break;
        if (timeout_ms < 0)
            pthread_cond_wait(&bus.changed, &bus.lock);
        else if (pthread_cond_timedwait(&bus.changed, &bus.lock, &end) == ETIMEDOUT) {
            rc = -ETIMEDOUT;
            break;
        }
    }
    pthread_mutex_unlock(&bus.lock);
    return rc;
}

/* ---------------------------------------------------------------- identity */

const char *pci_name(const struct pci_dev *d) { return d->name; }
uint16_t pci_vendor(const struct pci_dev *d) { return d->fn.vendor; }
uint16_t pci_device(const struct pci_dev *d) { return d->fn.device; }
uint32_t pci_class(const struct pci_dev *d) { return d->fn.class_code; }
void pci_set_drvdata(struct pci_dev *d, void *data) { d->drvdata = data; }
void *pci_get_drvdata(const struct pci_dev *d) { return d->drvdata; }
bool pci_device_is_present(const struct pci_dev *d) { return atomic_load(&d->present); }
