/*
 * sisci_api.h - the SISCI API with the SmartIO extensions, as ntblend implements it
 * (libsisci, over ntblend's segments, DMA queues, interrupts and SmartIO: docs/sisci.md).
 *
 * A SISCI program builds against these headers unchanged and runs on a host of an ntblend
 * fabric with `ntblend run --host H -- PROGRAM`. Adapter numbers are the host's NTB adapters
 * (0, 1, ...), node ids are the topology's node_id values, and fabric device ids (fdid) are
 * ntblend's SmartIO device ids (`ntblend device list`).
 *
 * Every call but a few accessors ends with `sci_error_t *error` and stores SCI_ERR_OK or the
 * reason it failed there; SCIGetErrorString() says it in words. A handle that is NULL, was
 * freed, or is of another kind is refused with SCI_ERR_ILLEGAL_PARAMETER: nothing is used
 * through it. Calls may come from any thread; a handle must not be freed while another
 * thread still uses it.
 */
#ifndef NTBLEND_SISCI_API_H
#define NTBLEND_SISCI_API_H

#include "sisci_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* libsisci's API: visible although the library is built with hidden symbols. */
#pragma GCC visibility push(default)

/* ---- the library */
void SCIInitialize(unsigned int flags, sci_error_t *error);
void SCITerminate(void);
/** SCIGetErrorString() - A sentence for an error code (never NULL). */
const char *SCIGetErrorString(sci_error_t error);
void SCIOpen(sci_desc_t *sd, unsigned int flags, sci_error_t *error);
/** SCIClose() - SCI_ERR_BUSY while objects created through sd remain. */
void SCIClose(sci_desc_t sd, unsigned int flags, sci_error_t *error);
void SCIGetLocalNodeId(unsigned int adapterNo, unsigned int *nodeId, unsigned int flags,
                       sci_error_t *error);
/** SCIProbeNode() - 1 when nodeId is reachable through the adapter now, else 0. */
int SCIProbeNode(sci_desc_t sd, unsigned int localAdapterNo, unsigned int nodeId,
                 unsigned int flags, sci_error_t *error);
void SCIQuery(unsigned int command, void *data, unsigned int flags, sci_error_t *error);

/* ---- local segments */
/** SCICreateSegment() - size bytes of this host's memory (SCI_FLAG_EMPTY: none until
 * SCIAttachPhysicalMemory or SCIRegisterSegmentMemory). A callback with
 * SCI_FLAG_USE_CALLBACK is told of connects and disconnects.
 */
void SCICreateSegment(sci_desc_t sd, sci_local_segment_t *segment, unsigned int segmentId,
                      size_t size, sci_cb_local_segment_t callback, void *callbackArg,
                      unsigned int flags, sci_error_t *error);
void SCIRemoveSegment(sci_local_segment_t segment, unsigned int flags, sci_error_t *error);
void SCIPrepareSegment(sci_local_segment_t segment, unsigned int localAdapterNo,
                       unsigned int flags, sci_error_t *error);
void SCISetSegmentAvailable(sci_local_segment_t segment, unsigned int localAdapterNo,
                            unsigned int flags, sci_error_t *error);
void SCISetSegmentUnavailable(sci_local_segment_t segment, unsigned int localAdapterNo,
                              unsigned int flags, sci_error_t *error);
size_t SCIGetLocalSegmentSize(sci_local_segment_t segment);
unsigned int SCIGetLocalSegmentId(sci_local_segment_t segment);
sci_segment_cb_reason_t SCIWaitForLocalSegmentEvent(sci_local_segment_t segment,
                                                    unsigned int *sourcenodeId,
                                                    unsigned int *localAdapterNo,
                                                    unsigned int timeout, unsigned int flags,
                                                    sci_error_t *error);
/** SCIAttachPhysicalMemory() - Give an empty segment the memory at bus address ioaddress
 * of this host (address, busNo: unused here; SCI_FLAG_CUDA_BUFFER: not supported).
 */
void SCIAttachPhysicalMemory(sci_ioaddr_t ioaddress, void *address, unsigned int busNo,
                             size_t size, sci_local_segment_t segment, unsigned int flags,
                             sci_error_t *error);
/** SCIRegisterSegmentMemory() - Give an empty segment the caller's memory [address,
 * address+size): page-aligned, its contents kept; it stays the caller's memory after the
 * segment is removed.
 */
void SCIRegisterSegmentMemory(void *address, size_t size, sci_local_segment_t segment,
                              unsigned int flags, sci_error_t *error);

/* ---- remote segments */
void SCIConnectSegment(sci_desc_t sd, sci_remote_segment_t *segment, unsigned int nodeId,
                       unsigned int segmentId, unsigned int localAdapterNo,
                       sci_cb_remote_segment_t callback, void *callbackArg,
                       unsigned int timeout, unsigned int flags, sci_error_t *error);
void SCIDisconnectSegment(sci_remote_segment_t segment, unsigned int flags, sci_error_t *error);
size_t SCIGetRemoteSegmentSize(sci_remote_segment_t segment);
unsigned int SCIGetRemoteSegmentId(sci_remote_segment_t segment);
unsigned int SCIGetRemoteSegmentNodeId(sci_remote_segment_t segment);
sci_segment_cb_reason_t SCIWaitForRemoteSegmentEvent(sci_remote_segment_t segment,
                                                     sci_error_t *status, unsigned int timeout,
                                                     unsigned int flags, sci_error_t *error);

/* ---- maps */
volatile void *SCIMapRemoteSegment(sci_remote_segment_t segment, sci_map_t *map, size_t offset,
                                   size_t size, void *addr, unsigned int flags,
                                   sci_error_t *error);
void *SCIMapLocalSegment(sci_local_segment_t segment, sci_map_t *map, size_t offset,
                         size_t size, void *addr, unsigned int flags, sci_error_t *error);
void SCIUnmapSegment(sci_map_t map, unsigned int flags, sci_error_t *error);
volatile void *SCIGetMapPointer(sci_map_t map);
size_t SCIGetMapSize(sci_map_t map);

/* ---- sequences, barriers, copies */
void SCICreateMapSequence(sci_map_t map, sci_sequence_t *sequence, unsigned int flags,
                          sci_error_t *error);
void SCIRemoveSequence(sci_sequence_t sequence, unsigned int flags, sci_error_t *error);
sci_sequence_status_t SCIStartSequence(sci_sequence_t sequence, unsigned int flags,
                                       sci_error_t *error);
sci_sequence_status_t SCICheckSequence(sci_sequence_t sequence, unsigned int flags,
                                       sci_error_t *error);
/** SCIStoreBarrier() - Order this thread's earlier stores before its later ones. */
void SCIStoreBarrier(sci_sequence_t sequence, unsigned int flags);
/** SCIFlush() - Make this thread's stores visible (sequence may be NULL). */
void SCIFlush(sci_sequence_t sequence, unsigned int flags);
/** SCIMemCpy() - Copy size bytes from memAddr to remoteMap+remoteOffset, or back with
 * SCI_FLAG_BLOCK_READ; SCI_FLAG_ERROR_CHECK checks the sequence (SCI_ERR_TRANSFER_FAILED when
 * the path failed meanwhile).
 */
void SCIMemCpy(sci_sequence_t sequence, void *memAddr, sci_map_t remoteMap, size_t remoteOffset,
               size_t size, unsigned int flags, sci_error_t *error);
void SCIMemWrite(void *memAddr, volatile void *remoteAddr, size_t size, unsigned int flags,
                 sci_error_t *error);
/** SCICacheSync() - Flush or invalidate CPU caches over [addr, addr+length): the emulated
 * fabric is cache coherent, so this is an ordering point (map may be NULL).
 */
void SCICacheSync(sci_map_t map, void *addr, size_t length, unsigned int flags,
                  sci_error_t *error);

/* ---- DMA */
void SCICreateDMAQueue(sci_desc_t sd, sci_dma_queue_t *dq, unsigned int localAdapterNo,
                       unsigned int maxEntries, unsigned int flags, sci_error_t *error);
void SCIRemoveDMAQueue(sci_dma_queue_t dq, unsigned int flags, sci_error_t *error);
void SCIStartDmaTransfer(sci_dma_queue_t dq, sci_local_segment_t localSegment,
                         sci_remote_segment_t remoteSegment, size_t localOffset, size_t size,
                         size_t remoteOffset, sci_cb_dma_t callback, void *callbackArg,
                         unsigned int flags, sci_error_t *error);
void SCIStartDmaTransferVec(sci_dma_queue_t dq, sci_local_segment_t localSegment,
                            sci_remote_segment_t remoteSegment, size_t vecLength,
                            dis_dma_vec_t *disDmaVec, sci_cb_dma_t callback, void *callbackArg,
                            unsigned int flags, sci_error_t *error);
sci_dma_queue_state_t SCIWaitForDMAQueue(sci_dma_queue_t dq, unsigned int timeout,
                                         unsigned int flags, sci_error_t *error);
sci_dma_queue_state_t SCIDMAQueueState(sci_dma_queue_t dq);
void SCIAbortDMAQueue(sci_dma_queue_t dq, unsigned int flags, sci_error_t *error);

/* ---- interrupts */
void SCICreateInterrupt(sci_desc_t sd, sci_local_interrupt_t *interrupt,
                        unsigned int localAdapterNo, unsigned int *interruptNo,
                        sci_cb_interrupt_t callback, void *callbackArg, unsigned int flags,
                        sci_error_t *error);
void SCIRemoveInterrupt(sci_local_interrupt_t interrupt, unsigned int flags, sci_error_t *error);
void SCIWaitForInterrupt(sci_local_interrupt_t interrupt, unsigned int timeout,
                         unsigned int flags, sci_error_t *error);
void SCIConnectInterrupt(sci_desc_t sd, sci_remote_interrupt_t *interrupt, unsigned int nodeId,
                         unsigned int localAdapterNo, unsigned int interruptNo,
                         unsigned int timeout, unsigned int flags, sci_error_t *error);
void SCIDisconnectInterrupt(sci_remote_interrupt_t interrupt, unsigned int flags,
                            sci_error_t *error);
void SCITriggerInterrupt(sci_remote_interrupt_t interrupt, unsigned int flags, sci_error_t *error);
unsigned int SCIGetLocalInterruptNo(sci_local_interrupt_t interrupt);

/* ---- interrupts with data (at most SCI_MAX_DATA_INTERRUPT_SIZE bytes each) */
#define SCI_MAX_DATA_INTERRUPT_SIZE 112u
void SCICreateDataInterrupt(sci_desc_t sd, sci_local_data_interrupt_t *interrupt,
                            unsigned int localAdapterNo, unsigned int *interruptNo,
                            sci_cb_data_interrupt_t callback, void *callbackArg,
                            unsigned int flags, sci_error_t *error);
void SCIRemoveDataInterrupt(sci_local_data_interrupt_t interrupt, unsigned int flags,
                            sci_error_t *error);
/** SCIWaitForDataInterrupt() - *length in: room at data, out: bytes received
 * (SCI_ERR_OVERFLOW, and nothing copied past *length, when the payload was larger).
 */
void SCIWaitForDataInterrupt(sci_local_data_interrupt_t interrupt, void *data,
                             unsigned int *length, unsigned int timeout, unsigned int flags,
                             sci_error_t *error);
void SCIConnectDataInterrupt(sci_desc_t sd, sci_remote_data_interrupt_t *interrupt,
                             unsigned int nodeId, unsigned int localAdapterNo,
                             unsigned int interruptNo, unsigned int timeout, unsigned int flags,
                             sci_error_t *error);
void SCIDisconnectDataInterrupt(sci_remote_data_interrupt_t interrupt, unsigned int flags,
                                sci_error_t *error);
void SCITriggerDataInterrupt(sci_remote_data_interrupt_t interrupt, void *data,
                             unsigned int length, unsigned int flags, sci_error_t *error);

/* ---- SmartIO: devices anywhere in the fabric (smartio-tocs-2021 §6.1) */
/** SCIBorrowDevice() - Borrow device fdid: shared with other hosts unless
 * SCI_FLAG_EXCLUSIVE. A process may borrow one device through several handles; the device is
 * returned when the last of them is.
 */
void SCIBorrowDevice(sci_desc_t sd, sci_device_t *device, unsigned long long fdid,
                     unsigned int flags, sci_error_t *error);
void SCIReturnDevice(sci_device_t device, unsigned int flags, sci_error_t *error);
unsigned long long SCIGetFabricDeviceId(sci_device_t device);
/** SCIConnectDeviceMemory() - A remote segment onto the device's memory: SCI_FLAG_BAR, BAR
 * memoryNo; SCI_FLAG_SHARED, device memory segment memoryNo that every borrower shares
 * (created in the lender's memory on first connect); SCI_FLAG_PRIVATE, one of this process's
 * own. memoryOffset must be 0.
 */
void SCIConnectDeviceMemory(sci_desc_t sd, sci_remote_segment_t *segment,
                            unsigned int localAdapterNo, sci_device_t device,
                            unsigned int memoryNo, unsigned int memoryOffset, unsigned int flags,
                            sci_error_t *error);
/** SCIMapLocalSegmentForDevice() - The address the device uses to reach the local segment
 * from offset on (prepared on localAdapterNo).
 */
void SCIMapLocalSegmentForDevice(sci_local_segment_t segment, unsigned int localAdapterNo,
                                 sci_device_t device, sci_ioaddr_t *ioaddr, size_t offset,
                                 unsigned int flags, sci_error_t *error);
void SCIUnmapLocalSegmentForDevice(sci_local_segment_t segment, unsigned int localAdapterNo,
                                   sci_device_t device, unsigned int flags, sci_error_t *error);
/** SCIMapRemoteSegmentForDevice() - The address the device uses to reach a connected segment
 * (of any host, or another device's BAR: peer to peer) from offset on.
 */
void SCIMapRemoteSegmentForDevice(sci_remote_segment_t segment, sci_device_t device,
                                  sci_ioaddr_t *ioaddr, size_t offset, unsigned int flags,
                                  sci_error_t *error);
void SCIUnmapRemoteSegmentForDevice(sci_remote_segment_t segment, sci_device_t device,
                                    unsigned int flags, sci_error_t *error);
/** SCIRegisterPCIeRequester() - Let a local PCIe function (bus, devfn) reach remote
 * segments: ntblend sets requester IDs up as it maps, so this checks the arguments only.
 */
void SCIRegisterPCIeRequester(sci_desc_t sd, unsigned int localAdapterNo, unsigned int bus,
                              unsigned int devfn, unsigned int flags, sci_error_t *error);
void SCIUnregisterPCIeRequester(sci_desc_t sd, unsigned int localAdapterNo, unsigned int bus,
                                unsigned int devfn, unsigned int flags, sci_error_t *error);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
