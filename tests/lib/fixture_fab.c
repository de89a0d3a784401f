/*
 * The parts of the fabric fixture (fixture.h) that need the fabric model: attaching a test to
 * its fabric's state, and finding hosts, functions and adapters in it by name.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <unistd.h>

#include "fabric.h"
#include "fixture.h"

/* What this process held in the fabric (LUT entries, IOMMU mappings, DMA channels it set up
 * as a device would) goes before the fabric does, then the mapping of its state. */
static void fx_detach(struct fx *fx)
{
    if (!fx->f)
        return;
    fab_reap_owner(fx->f, getpid());
    fab_detach(fx->f);
    fx->f = NULL;
}

int fx_attach(struct fx *fx)
{
    if (fab_attach(fx->name, -1, &fx->f))
        return -1;
    fx->detach = fx_detach;
    return 0;
}

static uint32_t fx_found(const struct fx *fx, const char *what, const char *name, int i)
{
    if (i < 0)
        fail_msg("fabric %s has no %s named %s", fx->name, what, name);
    return (uint32_t)i;
}

uint32_t fx_host(const struct fx *fx, const char *name)
{
    return fx_found(fx, "host", name, fab_host_by_name(fx->f, name));
}

uint32_t fx_func(const struct fx *fx, const char *name)
{
    return fx_found(fx, "function", name, fab_func_by_name(fx->f, name));
}

uint32_t fx_adapter(const struct fx *fx, const char *name)
{
    return fx_found(fx, "adapter", name, fab_adapter_by_name(fx->f, name));
}
