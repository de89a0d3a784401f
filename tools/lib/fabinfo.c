/*
 * libntbtool: facts about the fabric that the tools report — the host name of a node id, and
 * whether the emulated fabric's latency model is on — through the public NTB API.
 */
#define _GNU_SOURCE
#include <errno.h>

#include "ntblend/ntb.h"
#include "ntbtool.h"

int tu_host_name(int port, char *out, size_t len)
{
    if (port < 0)
        return -ENOENT;
    return ntb_node_name((uint32_t)port, out, len);
}

int tu_latency_model(void)
{
    int on = ntb_fabric_latency_model();
    return on < 0 ? -1 : on;
}
