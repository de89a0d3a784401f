/*
 * libntbtool: facts about the emulated fabric that the tools report and no public call
 * exposes yet — the host name of a node id, and whether the latency model is on. This is the
 * one file of tools/ that reads the fabric's internal state (src/fabric/fabric.h); when the
 * public API offers these, it goes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>

#include "fabric.h"
#include "ntbtool.h"

int tu_host_name(int port, char *out, size_t len)
{
    struct fab *f;
    int rc = fab_attach(tu_fabric_name(), -1, &f);
    if (rc)
        return rc;
    rc = -ENOENT;
    for (uint32_t i = 0; i < f->ctl->nhosts; i++)
        if ((int)fab_host(f, i)->node_id == port) {
            snprintf(out, len, "%s", fab_host(f, i)->name);
            rc = 0;
            break;
        }
    fab_detach(f);
    return rc;
}

int tu_latency_model(void)
{
    struct fab *f;
    if (fab_attach(tu_fabric_name(), -1, &f))
        return -1;
    int on = f->ctl->latency.enabled ? 1 : 0;
    fab_detach(f);
    return on;
}
