/*
 * dis/dis_types.h - the basic types shared by the SISCI-compatible headers of ntblend, in the
 * place a Dolphin (DIS) install keeps them. Included by sisci_types.h; programs need not
 * include it themselves.
 */
#ifndef NTBLEND_DIS_TYPES_H
#define NTBLEND_DIS_TYPES_H

#include <stddef.h>
#include <stdint.h>

/* One element of SCIStartDmaTransferVec(): size bytes between local_offset of the local
 * segment and remote_offset of the remote one. flags: 0, or SCI_FLAG_DMA_READ for a read
 * (the call's own flags apply to every element as well). */
typedef struct {
    size_t size;
    size_t local_offset;
    size_t remote_offset;
    unsigned int flags;
} dis_dma_vec_t;

/* An address as a device or the NTB sees it (a bus or I/O address). */
typedef uint64_t dis_ioaddr_t;

#endif
