/*
 * Internals of the NTB API implementation: the handle behind struct ntb_dev. The API works on
 * whatever backend the runtime runs on (ntb_backend.h), through rt->ops.
 */
#ifndef NTBLEND_NTB_INT_H
#define NTBLEND_NTB_INT_H

#include <pthread.h>

#include "ntblend/ntb.h"
#include "runtime.h"

struct ntb_buf {
    struct ntb_buf *next;
    void *ptr;
    uint64_t phys, len;
};

struct ntb_dev {
    struct rt *rt;
    const struct ntb_backend_ops *ops;
    uint32_t ai;               /* the backend's adapter id */
    struct ntb_adapter_info a; /* what it is (fixed while the fabric runs) */
    pthread_mutex_t lock;
    struct ntb_buf *bufs;
};

struct ntb_dma_chan {
    struct ntb_dev *ntb;
    void *ch; /* the backend's channel */
};

#endif
