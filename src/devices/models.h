/*
 * Device models: the behaviour behind PCIe functions' register BARs. The agent of the host a
 * device sits in runs one model instance per function (src/fabric/devices.c lays the
 * functions out). A model sleeps on its function's reg_seq futex and wakes when a register is
 * written (fab_fn_notify), does its DMA with fab_fn_dma_read/write (as its own requester,
 * through the IOMMU and NTBs, only while Bus Master Enable is set) and raises MSI-X vectors
 * with fab_fn_msix.
 */
#ifndef NTBLEND_MODELS_H
#define NTBLEND_MODELS_H

#include <stdint.h>

#include "fabric.h"
#include "wpol.h" /* how the models wait (src/wait) */

/* A model: the behaviour of one device type's functions (the registry says which). */
struct model_ops {
    /* Start serving function fn (its BARs are zeroed, its config space as enumerated).
     * Returns 0 and an opaque state, or -errno with a message on stderr. */
    int (*start)(struct fab *f, uint32_t fn, void **state);
    /* Stop and free; the function's thread(s) are joined. */
    void (*stop)(void *state);
};

extern const struct model_ops nvmc_model_ops;
extern const struct model_ops accel_model_ops;

/* Start a model for every function of `host`; 0 or the first error. */
int models_start(struct fab *f, uint32_t host);
void models_stop(void);

#endif
