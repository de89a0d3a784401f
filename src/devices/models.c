/*
 * Starting and stopping the device models of a host (see models.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models.h"

static const struct model_ops *const all[] = { &nvme_model_ops, &accel_model_ops };

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
        const struct model_ops *ops = NULL;
        for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
            if (strcmp(all[k]->type, fx->type) == 0)
                ops = all[k];
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
