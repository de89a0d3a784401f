/*
 * libntbtool (tools/lib/ntbtool.h): the few facts about the fabric the tools report: host names, the latency model (fabinfo.c).
 */
#ifndef NTBLEND_TOOL_FABINFO_H
#define NTBLEND_TOOL_FABINFO_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include "tool_util.h"

/* ================================================================ fabric facts (fabinfo.c) */

/* What the tools report about the fabric, through the public NTB API. */

/**
 * tu_host_name() - the name of the host whose node id is @port.
 * @port: the node id
 * @out:  the name
 * @len:  size of @out
 *
 * Return: 0, -ENOENT (no such node) or -errno (fabric not reachable).
 */
int tu_host_name(int port, char *out, size_t len);

/**
 * tu_latency_model() - is the fabric's latency model on?
 *
 * Return: 1, 0, or -1 when it cannot tell.
 */
int tu_latency_model(void);

#endif
