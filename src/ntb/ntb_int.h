/*
 * Internals of the NTB API implementation: the handle behind struct ntb_dev. The NTB API
 * (ntb.c, regs.c) is implemented on the emulated fabric directly.
 */
#ifndef NTBLEND_NTB_INT_H
#define NTBLEND_NTB_INT_H

#include <pthread.h>

#include "fabric.h"
#include "ntblend/ntb.h"
#include "runtime.h"

struct ntb_buf {
    struct ntb_buf *next;
    void *ptr;
    uint64_t phys, len;
};

struct ntb_dev {
    struct rt *rt;
    struct fab *f;
    uint32_t ai; /* adapter index in the fabric */
    struct fab_adapter *a;
    int32_t pid;
    pthread_mutex_t lock;
    struct ntb_buf *bufs;
};

struct ntb_dma_chan {
    struct ntb_dev *ntb;
    struct fab_dma_chan *ch;
};

#endif
