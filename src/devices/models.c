/*
 * Starting and stopping the device models of a host (see models.h): each function's model is
 * its type's in the device registry (registry.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"

static struct running {
    const struct model_ops *ops;
    void *state;
} *running;
static size_t nrunning;

int models_start(struct fab *f, uint32_t host)
{
    const struct fab_host *h = fab_host(f, host);
    running = calloc(h->nfuncs ? h->nfuncs : 1, sizeof *running);
    if (!running)
        return -ENOMEM;
    for (uint32_t i = 0; i < h->nfuncs; i++) {
        uint32_t fn = h->func_first + i;
        const struct fab_function *fx = fab_func(f, fn);
        const struct dev_type *type = devreg_find(fx->type);
        const struct model_ops *ops = type ? type->model : NULL;
        if (!ops) {
            fprintf(stderr, "no model for device %s of type %s\n", fx->name, fx->type);
            return -ENODEV;
        }
        void *st = NULL;
        int rc = ops->start(f, fn, &st);
        if (rc) {
            fprintf(stderr, "device %s: %s\n", fx->name, strerror(-rc));
            return rc;
        }
        running[nrunning++] = (struct running){ ops, st };
        atomic_store(&fab_func(f, fn)->model_up, 1);
    }
    return 0;
}

void models_stop(void)
{
    for (size_t i = nrunning; i-- > 0;)
        running[i].ops->stop(running[i].state);
    free(running);
    running = NULL;
    nrunning = 0;
}
