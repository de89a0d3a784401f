/*
 * Internals of the SmartIO library: the objects behind the opaque handles of
 * ntblend/smartio.h, shared by its files (sio.c: borrowing, BARs, mappings, placement;
 * sio_devseg.c: device segments).
 */
#ifndef NTBLEND_SIO_INT_H
#define NTBLEND_SIO_INT_H

#include "ntblend/smartio.h"
#include "runtime.h"

struct sio_dev {
    struct rt *rt;
    struct ntb_func_info info; /* as it was when borrowed: what it is, where its BARs are */
    sio_dma_t *msi;  /* this host's MSI region, mapped for the device once */
    uint64_t msi_io;
    uint32_t fn, lender;
    int ai, peer_ai; /* our adapter facing the lender and the lender's, -1 when local */
};

struct sio_bar {
    sio_dev_t *dev;
    struct rt_window win; /* through our adapter; win.map is NULL when the device is here */
    volatile char *ptr;
    size_t size;
};

struct sio_dma {
    sio_dev_t *dev;
    uint32_t id;
};

#endif
