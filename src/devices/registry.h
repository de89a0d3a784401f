/*
 * The device-type registry (registry.c): what a device type is — PCI identity, BAR layout,
 * parameters, and the model that serves its functions — and laying out a topology's devices
 * as PCIe functions. The fabric knows functions, not types: `ntblend up` hands it
 * devreg_layout, the agent starts each function's model from here.
 */
#ifndef NTBLEND_DEVICES_REGISTRY_H
#define NTBLEND_DEVICES_REGISTRY_H

#include <stdint.h>
#include <stdio.h>

#include "models.h"

struct dev_type {
    const char *name;     /* the topology's type = ... */
    uint16_t vendor, device;
    uint32_t class_code;  /* class, subclass, programming interface */
    uint64_t regs;        /* BAR0: registers served by the model */
    uint32_t table_off;   /* MSI-X table and PBA, in BAR0 */
    uint32_t pba_off;
    const char *vectors_key; /* parameter that sets the vector count (+ 1 for the admin
                              * queue when set), and its default */
    uint32_t vectors_default;
    const char *mem_key;  /* parameter that sizes BAR2 (plain memory), and its default */
    uint64_t mem_default;
    const struct model_ops *model;
};

/* The type called `name`, or NULL. */
const struct dev_type *devreg_find(const char *name);

/*
 * The functions a topology's devices have, with their BARs and config space: fills the
 * function table of a fabric being created and returns the count, or with out == NULL just
 * counts. -EINVAL with a message for a device no type describes. The fabric calls it through
 * fab_create's layout argument.
 */
int devreg_layout(const struct topo *t, struct fab_function *out, size_t max, FILE *err);

/* A device's topology parameters ("key=value;..." in struct fab_function.params): the value
 * of key copied into buf, or NULL; and a size/number with k/M/G suffixes (default def when
 * absent; -EINVAL when malformed). */
const char *devreg_param(const char *params, const char *key, char *buf, size_t len);
int devreg_param_size(const char *params, const char *key, uint64_t def, uint64_t *out);

#endif
