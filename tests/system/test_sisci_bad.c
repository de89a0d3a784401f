/*
 * Every call of the SISCI API (libsisci) fed bad input, from a table: NULL, freed, foreign
 * (another kind's) and made-up handles; bad flags; zero and huge sizes; offsets past the end;
 * numbers that name nothing. Each returns the documented SCI_ERR_* (docs/sisci.md), nothing
 * crashes or hangs (a call that should return at once and waits fails the test's timeout),
 * and where a call writes into the caller's memory it writes nothing past what it was given.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "sisci_util.h"

static int setup(void **state) { return sisci_setup(state, "sisbad"); }

enum kind { K_DESC, K_LSEG, K_RSEG, K_MAP, K_SEQ, K_DMAQ, K_LI, K_RI, K_LDI, K_RDI, K_DEV, K_N };

/* Live objects of every kind, and one freed handle of every kind. */
struct ctx {
    sci_desc_t sd;
    sci_local_segment_t lseg, empty;
    sci_remote_segment_t rseg;
    sci_map_t map, lmap;
    sci_sequence_t seq;
    sci_dma_queue_t dq;
    sci_local_interrupt_t li;
    sci_remote_interrupt_t ri;
    sci_local_data_interrupt_t ldi;
    sci_remote_data_interrupt_t rdi;
    sci_device_t dev;
    void *live[K_N], *freed[K_N];
};

/* ---------------------------------------------------------------- calls by handle kind */

typedef sci_error_t (*call_fn)(struct ctx *c, void *h);
#define CALL(name, kind, ...)                                                              \
    static sci_error_t name(struct ctx *c, void *h)                                         \
    {                                                                                       \
        sci_error_t err = 0x7fff;                                                           \
        __VA_ARGS__;                                                                        \
        return err;                                                                         \
    }
CALL(c_close, K_DESC, SCIClose(h, 0, &err))
CALL(c_probe, K_DESC, SCIProbeNode(h, 0, NODE_A, 0, &err))
CALL(c_create_seg, K_DESC, sci_local_segment_t s; SCICreateSegment(h, &s, 900, 4096, NULL, NULL, 0, &err))
CALL(c_connect_seg, K_DESC, sci_remote_segment_t r; SCIConnectSegment(h, &r, NODE_B, 1, 0, NULL, NULL, 0, 0, &err))
CALL(c_create_dq, K_DESC, sci_dma_queue_t q; SCICreateDMAQueue(h, &q, 0, 4, 0, &err))
CALL(c_create_intr, K_DESC, sci_local_interrupt_t i; unsigned n = 0; SCICreateInterrupt(h, &i, 0, &n, NULL, NULL, 0, &err))
CALL(c_connect_intr, K_DESC, sci_remote_interrupt_t i; SCIConnectInterrupt(h, &i, NODE_B, 0, 1, 0, 0, &err))
CALL(c_create_dintr, K_DESC, sci_local_data_interrupt_t i; unsigned n = 0; SCICreateDataInterrupt(h, &i, 0, &n, NULL, NULL, 0, &err))
CALL(c_connect_dintr, K_DESC, sci_remote_data_interrupt_t i; SCIConnectDataInterrupt(h, &i, NODE_B, 0, 1, 0, 0, &err))
CALL(c_borrow, K_DESC, sci_device_t d; SCIBorrowDevice(h, &d, NVME_FDID, 0, &err))
CALL(c_connect_dev, K_DESC, sci_remote_segment_t r; SCIConnectDeviceMemory(h, &r, 0, c->dev, 0, 0, SCI_FLAG_BAR, &err))
CALL(c_reg_req, K_DESC, SCIRegisterPCIeRequester(h, 0, 1, 0, 0, &err))
CALL(c_unreg_req, K_DESC, SCIUnregisterPCIeRequester(h, 0, 1, 0, 0, &err))
CALL(c_remove_seg, K_LSEG, SCIRemoveSegment(h, 0, &err))
CALL(c_prepare, K_LSEG, SCIPrepareSegment(h, 0, 0, &err))
CALL(c_available, K_LSEG, SCISetSegmentAvailable(h, 0, 0, &err))
CALL(c_unavailable, K_LSEG, SCISetSegmentUnavailable(h, 0, 0, &err))
CALL(c_lseg_size, K_LSEG, err = SCIGetLocalSegmentSize(h) ? SCI_ERR_OK : SCI_ERR_ILLEGAL_PARAMETER)
CALL(c_wait_lseg, K_LSEG, unsigned n, a; SCIWaitForLocalSegmentEvent(h, &n, &a, 0, 0, &err))
CALL(c_attach, K_LSEG, SCIAttachPhysicalMemory(0x100000, NULL, 0, 4096, h, 0, &err))
CALL(c_register, K_LSEG, static char page[8192] __attribute__((aligned(4096))); SCIRegisterSegmentMemory(page, 4096, h, 0, &err))
CALL(c_map_local, K_LSEG, sci_map_t m; SCIMapLocalSegment(h, &m, 0, 0, NULL, 0, &err))
CALL(c_map_local_dev, K_LSEG, sci_ioaddr_t io; SCIMapLocalSegmentForDevice(h, 0, c->dev, &io, 0, 0, &err))
CALL(c_unmap_local_dev, K_LSEG, SCIUnmapLocalSegmentForDevice(h, 0, c->dev, 0, &err))
CALL(c_dma_lseg, K_LSEG, SCIStartDmaTransfer(c->dq, h, c->rseg, 0, 64, 0, NULL, NULL, 0, &err))
CALL(c_disconnect, K_RSEG, SCIDisconnectSegment(h, 0, &err))
CALL(c_rseg_size, K_RSEG, err = SCIGetRemoteSegmentSize(h) ? SCI_ERR_OK : SCI_ERR_ILLEGAL_PARAMETER)
CALL(c_wait_rseg, K_RSEG, sci_error_t st; SCIWaitForRemoteSegmentEvent(h, &st, 0, 0, &err))
CALL(c_map_remote, K_RSEG, sci_map_t m; SCIMapRemoteSegment(h, &m, 0, 0, NULL, 0, &err))
CALL(c_map_remote_dev, K_RSEG, sci_ioaddr_t io; SCIMapRemoteSegmentForDevice(h, c->dev, &io, 0, 0, &err))
CALL(c_unmap_remote_dev, K_RSEG, SCIUnmapRemoteSegmentForDevice(h, c->dev, 0, &err))
CALL(c_dma_rseg, K_RSEG, SCIStartDmaTransfer(c->dq, c->lseg, h, 0, 64, 0, NULL, NULL, 0, &err))
CALL(c_unmap, K_MAP, SCIUnmapSegment(h, 0, &err))
CALL(c_map_ptr, K_MAP, err = SCIGetMapPointer(h) ? SCI_ERR_OK : SCI_ERR_ILLEGAL_PARAMETER)
CALL(c_create_seq, K_MAP, sci_sequence_t q; SCICreateMapSequence(h, &q, 0, &err))
CALL(c_memcpy_map, K_MAP, char b[64]; SCIMemCpy(NULL, b, h, 0, sizeof b, 0, &err))
CALL(c_cachesync, K_MAP, char b[64]; SCICacheSync(h, b, sizeof b, SCI_FLAG_CACHE_FLUSH, &err))
CALL(c_remove_seq, K_SEQ, SCIRemoveSequence(h, 0, &err))
CALL(c_start_seq, K_SEQ, SCIStartSequence(h, 0, &err))
CALL(c_check_seq, K_SEQ, SCICheckSequence(h, 0, &err))
CALL(c_memcpy_seq, K_SEQ, char b[64]; SCIMemCpy(h, b, c->map, 0, sizeof b, SCI_FLAG_ERROR_CHECK, &err))
CALL(c_remove_dq, K_DMAQ, SCIRemoveDMAQueue(h, 0, &err))
CALL(c_dma, K_DMAQ, SCIStartDmaTransfer(h, c->lseg, c->rseg, 0, 64, 0, NULL, NULL, 0, &err))
CALL(c_dma_vec, K_DMAQ, dis_dma_vec_t v = { .size = 64 }; SCIStartDmaTransferVec(h, c->lseg, c->rseg, 1, &v, NULL, NULL, 0, &err))
CALL(c_wait_dq, K_DMAQ, SCIWaitForDMAQueue(h, 0, 0, &err))
CALL(c_abort_dq, K_DMAQ, SCIAbortDMAQueue(h, 0, &err))
CALL(c_dq_state, K_DMAQ, err = SCIDMAQueueState(h) == SCI_DMAQUEUE_ERROR ? SCI_ERR_ILLEGAL_PARAMETER : SCI_ERR_OK)
CALL(c_remove_intr, K_LI, SCIRemoveInterrupt(h, 0, &err))
CALL(c_wait_intr, K_LI, SCIWaitForInterrupt(h, 0, 0, &err))
CALL(c_intr_no, K_LI, err = SCIGetLocalInterruptNo(h) ? SCI_ERR_OK : SCI_ERR_ILLEGAL_PARAMETER)
CALL(c_disconnect_intr, K_RI, SCIDisconnectInterrupt(h, 0, &err))
CALL(c_trigger, K_RI, SCITriggerInterrupt(h, 0, &err))
CALL(c_remove_dintr, K_LDI, SCIRemoveDataInterrupt(h, 0, &err))
CALL(c_wait_dintr, K_LDI, char b[16]; unsigned n = sizeof b; SCIWaitForDataInterrupt(h, b, &n, 0, 0, &err))
CALL(c_disconnect_dintr, K_RDI, SCIDisconnectDataInterrupt(h, 0, &err))
CALL(c_trigger_d, K_RDI, SCITriggerDataInterrupt(h, "x", 1, 0, &err))
CALL(c_return, K_DEV, SCIReturnDevice(h, 0, &err))
CALL(c_fdid, K_DEV, err = SCIGetFabricDeviceId(h) ? SCI_ERR_OK : SCI_ERR_ILLEGAL_PARAMETER)
CALL(c_connect_mem, K_DEV, sci_remote_segment_t r; SCIConnectDeviceMemory(c->sd, &r, 0, h, 0, 0, SCI_FLAG_BAR, &err))
CALL(c_map_for, K_DEV, sci_ioaddr_t io; SCIMapRemoteSegmentForDevice(c->rseg, h, &io, 0, 0, &err))
CALL(c_map_local_for, K_DEV, sci_ioaddr_t io; SCIMapLocalSegmentForDevice(c->lseg, 0, h, &io, 0, 0, &err))

static const struct {
    const char *name;
    call_fn fn;
    enum kind kind;
} by_handle[] = {
#define E(fn, kind) { #fn, fn, kind }
    E(c_close, K_DESC), E(c_probe, K_DESC), E(c_create_seg, K_DESC), E(c_connect_seg, K_DESC),
    E(c_create_dq, K_DESC), E(c_create_intr, K_DESC), E(c_connect_intr, K_DESC),
    E(c_create_dintr, K_DESC), E(c_connect_dintr, K_DESC), E(c_borrow, K_DESC),
    E(c_connect_dev, K_DESC), E(c_reg_req, K_DESC), E(c_unreg_req, K_DESC),
    E(c_remove_seg, K_LSEG), E(c_prepare, K_LSEG), E(c_available, K_LSEG),
    E(c_unavailable, K_LSEG), E(c_lseg_size, K_LSEG), E(c_wait_lseg, K_LSEG), E(c_attach, K_LSEG),
    E(c_register, K_LSEG), E(c_map_local, K_LSEG), E(c_map_local_dev, K_LSEG),
    E(c_unmap_local_dev, K_LSEG), E(c_dma_lseg, K_LSEG),
    E(c_disconnect, K_RSEG), E(c_rseg_size, K_RSEG), E(c_wait_rseg, K_RSEG), E(c_map_remote, K_RSEG),
    E(c_map_remote_dev, K_RSEG), E(c_unmap_remote_dev, K_RSEG), E(c_dma_rseg, K_RSEG),
    E(c_unmap, K_MAP), E(c_map_ptr, K_MAP), E(c_create_seq, K_MAP), E(c_memcpy_map, K_MAP),
    E(c_cachesync, K_MAP),
    E(c_remove_seq, K_SEQ), E(c_start_seq, K_SEQ), E(c_check_seq, K_SEQ), E(c_memcpy_seq, K_SEQ),
    E(c_remove_dq, K_DMAQ), E(c_dma, K_DMAQ), E(c_dma_vec, K_DMAQ), E(c_wait_dq, K_DMAQ),
    E(c_abort_dq, K_DMAQ), E(c_dq_state, K_DMAQ),
    E(c_remove_intr, K_LI), E(c_wait_intr, K_LI), E(c_intr_no, K_LI),
    E(c_disconnect_intr, K_RI), E(c_trigger, K_RI),
    E(c_remove_dintr, K_LDI), E(c_wait_dintr, K_LDI),
    E(c_disconnect_dintr, K_RDI), E(c_trigger_d, K_RDI),
    E(c_return, K_DEV), E(c_fdid, K_DEV), E(c_connect_mem, K_DEV), E(c_map_for, K_DEV),
    E(c_map_local_for, K_DEV),
#undef E
};

/* ---------------------------------------------------------------- other bad input */

typedef sci_error_t (*case_fn)(struct ctx *c);
#define CASE(name, ...)                                                                    \
    static sci_error_t name(struct ctx *c)                                                  \
    {                                                                                       \
        sci_error_t err = 0x7fff;                                                           \
        __VA_ARGS__;                                                                        \
        return err;                                                                         \
    }
CASE(init_flags, SCIInitialize(1, &err))
CASE(open_null, SCIOpen(NULL, 0, &err))
CASE(open_flags, sci_desc_t d; SCIOpen(&d, 0x80000000u, &err))
CASE(close_busy, SCIClose(c->sd, 0, &err))
CASE(node_null, SCIGetLocalNodeId(0, NULL, 0, &err))
CASE(node_adapter, unsigned n; SCIGetLocalNodeId(7, &n, 0, &err))
CASE(probe_nonode, SCIProbeNode(c->sd, 0, 999, 0, &err))
CASE(query_null, SCIQuery(SCI_Q_VENDORID, NULL, 0, &err))
CASE(query_unknown, int x; SCIQuery(999, &x, 0, &err))
CASE(query_adapter, unsigned n; sci_query_adapter_t q = { .subcommand = SCI_Q_ADAPTER_NODEID, .localAdapterNo = 9, .data = &n }; SCIQuery(SCI_Q_ADAPTER, &q, 0, &err))
CASE(query_sub, unsigned n; sci_query_adapter_t q = { .subcommand = 999, .data = &n }; SCIQuery(SCI_Q_ADAPTER, &q, 0, &err))
CASE(query_nodev, sci_smartio_device_info_t i; sci_smartio_query_device_t q = { .fdid = 0, .subcommand = SCI_Q_DEVICE_INFO, .data = &i }; SCIQuery(SCI_Q_DEVICE, &q, 0, &err))
CASE(create_zero, sci_local_segment_t s; SCICreateSegment(c->sd, &s, 901, 0, NULL, NULL, 0, &err))
CASE(create_huge, sci_local_segment_t s; SCICreateSegment(c->sd, &s, 901, (size_t)1 << 50, NULL, NULL, 0, &err))
CASE(create_flags, sci_local_segment_t s; SCICreateSegment(c->sd, &s, 901, 4096, NULL, NULL, SCI_FLAG_BAR, &err))
CASE(create_cb, sci_local_segment_t s; SCICreateSegment(c->sd, &s, 901, 4096, NULL, NULL, SCI_FLAG_USE_CALLBACK, &err))
CASE(create_used, sci_local_segment_t s; SCICreateSegment(c->sd, &s, 1, 4096, NULL, NULL, 0, &err))
CASE(create_null, SCICreateSegment(c->sd, NULL, 901, 4096, NULL, NULL, 0, &err))
CASE(prepare_adapter, SCIPrepareSegment(c->lseg, 5, 0, &err))
CASE(prepare_flags, SCIPrepareSegment(c->lseg, 0, 1, &err))
CASE(prepare_empty, SCIPrepareSegment(c->empty, 0, 0, &err))
CASE(wait_lseg_empty, unsigned n, a; SCIWaitForLocalSegmentEvent(c->empty, &n, &a, 0, 0, &err))
CASE(wait_lseg_flags, unsigned n, a; SCIWaitForLocalSegmentEvent(c->lseg, &n, &a, 0, 1, &err))
CASE(wait_lseg_null, unsigned a; SCIWaitForLocalSegmentEvent(c->lseg, NULL, &a, 0, 0, &err))
/* the context's own connection to it is an event: past it, nothing comes */
CASE(wait_lseg_timeout, unsigned n, a; do SCIWaitForLocalSegmentEvent(c->lseg, &n, &a, 1, 0, &err); while (!err))
CASE(available_unprepared, sci_local_segment_t s; SCICreateSegment(c->sd, &s, 902, 4096, NULL, NULL, 0, &err); SCISetSegmentAvailable(s, 0, 0, &err); sci_error_t e2; SCIRemoveSegment(s, 0, &e2))
CASE(remove_mapped, SCIRemoveSegment(c->lseg, 0, &err))
CASE(attach_cuda, SCIAttachPhysicalMemory(0, (void *)1, 0, 4096, c->empty, SCI_FLAG_CUDA_BUFFER, &err))
CASE(attach_zero, SCIAttachPhysicalMemory(0x100000, NULL, 0, 0, c->empty, 0, &err))
CASE(attach_big, SCIAttachPhysicalMemory(0x100000, NULL, 0, 1 << 20, c->empty, 0, &err))
CASE(attach_unaligned, SCIAttachPhysicalMemory(0x100001, NULL, 0, 4096, c->empty, 0, &err))
CASE(attach_full, SCIAttachPhysicalMemory(0x100000, NULL, 0, 4096, c->lseg, 0, &err))
CASE(register_unaligned, static char b[8192] __attribute__((aligned(4096))); SCIRegisterSegmentMemory(b + 1, 4096, c->empty, 0, &err))
CASE(register_size, static char b[8192] __attribute__((aligned(4096))); SCIRegisterSegmentMemory(b, 100, c->empty, 0, &err))
CASE(register_null, SCIRegisterSegmentMemory(NULL, 4096, c->empty, 0, &err))
CASE(register_unmapped, SCIRegisterSegmentMemory((void *)0x1000, 4096, c->empty, 0, &err))
CASE(connect_nosuch, sci_remote_segment_t r; SCIConnectSegment(c->sd, &r, NODE_B, 4242, 0, NULL, NULL, 0, 0, &err))
CASE(connect_nonode, sci_remote_segment_t r; SCIConnectSegment(c->sd, &r, 999, 1, 0, NULL, NULL, 0, 0, &err))
CASE(connect_adapter, sci_remote_segment_t r; SCIConnectSegment(c->sd, &r, NODE_B, 1, 3, NULL, NULL, 0, 0, &err))
CASE(connect_cb_null, sci_remote_segment_t r; SCIConnectSegment(c->sd, &r, NODE_B, 1, 0, NULL, NULL, 0, SCI_FLAG_USE_CALLBACK, &err))
CASE(disconnect_mapped, SCIDisconnectSegment(c->rseg, 0, &err))
CASE(map_offset, sci_map_t m; SCIMapRemoteSegment(c->rseg, &m, 1 << 20, 0, NULL, 0, &err))
CASE(map_size, sci_map_t m; SCIMapRemoteSegment(c->rseg, &m, 4096, 1 << 20, NULL, 0, &err))
CASE(map_huge, sci_map_t m; SCIMapRemoteSegment(c->rseg, &m, 4096, SIZE_MAX, NULL, 0, &err))
CASE(map_addr, sci_map_t m; SCIMapRemoteSegment(c->rseg, &m, 0, 0, (void *)0x10000000, 0, &err))
CASE(map_flags, sci_map_t m; SCIMapRemoteSegment(c->rseg, &m, 0, 0, NULL, SCI_FLAG_BAR, &err))
CASE(map_null, SCIMapRemoteSegment(c->rseg, NULL, 0, 0, NULL, 0, &err))
CASE(map_local_empty, sci_map_t m; SCIMapLocalSegment(c->empty, &m, 0, 0, NULL, 0, &err))
CASE(map_local_offset, sci_map_t m; SCIMapLocalSegment(c->lseg, &m, 65536, 0, NULL, 0, &err))
CASE(unmap_flags, SCIUnmapSegment(c->map, 1, &err))
CASE(unmap_seq, SCIUnmapSegment(c->map, 0, &err))
CASE(memcpy_range, char b[64]; SCIMemCpy(NULL, b, c->map, 65536 - 32, sizeof b, 0, &err))
CASE(memcpy_null, SCIMemCpy(NULL, NULL, c->map, 0, 64, 0, &err))
CASE(memcpy_flags, char b[64]; SCIMemCpy(NULL, b, c->map, 0, sizeof b, SCI_FLAG_BAR, &err))
CASE(memcpy_check_noseq, char b[64]; SCIMemCpy(NULL, b, c->map, 0, sizeof b, SCI_FLAG_ERROR_CHECK, &err))
CASE(memwrite_null, SCIMemWrite(NULL, NULL, 64, 0, &err))
CASE(cachesync_flags, char b[64]; SCICacheSync(NULL, b, sizeof b, SCI_FLAG_BAR, &err))
CASE(seq_flags, SCIStartSequence(c->seq, 4, &err))
CASE(dq_zero, sci_dma_queue_t q; SCICreateDMAQueue(c->sd, &q, 0, 0, 0, &err))
CASE(dq_adapter, sci_dma_queue_t q; SCICreateDMAQueue(c->sd, &q, 9, 4, 0, &err))
CASE(dq_flags, sci_dma_queue_t q; SCICreateDMAQueue(c->sd, &q, 0, 4, SCI_FLAG_BAR, &err))
CASE(dma_zero, SCIStartDmaTransfer(c->dq, c->lseg, c->rseg, 0, 0, 0, NULL, NULL, 0, &err))
CASE(dma_local_past, SCIStartDmaTransfer(c->dq, c->lseg, c->rseg, 65536, 64, 0, NULL, NULL, 0, &err))
CASE(dma_remote_past, SCIStartDmaTransfer(c->dq, c->lseg, c->rseg, 0, 64, 65536 - 32, NULL, NULL, 0, &err))
CASE(dma_huge, SCIStartDmaTransfer(c->dq, c->lseg, c->rseg, 0, SIZE_MAX, 0, NULL, NULL, 0, &err))
CASE(dma_offset_wrap, SCIStartDmaTransfer(c->dq, c->lseg, c->rseg, SIZE_MAX - 8, 64, 0, NULL, NULL, 0, &err))
CASE(dma_flags, SCIStartDmaTransfer(c->dq, c->lseg, c->rseg, 0, 64, 0, NULL, NULL, SCI_FLAG_BAR, &err))
CASE(dma_cb_null, SCIStartDmaTransfer(c->dq, c->lseg, c->rseg, 0, 64, 0, NULL, NULL, SCI_FLAG_USE_CALLBACK, &err))
CASE(dma_empty, SCIStartDmaTransfer(c->dq, c->empty, c->rseg, 0, 64, 0, NULL, NULL, 0, &err))
CASE(dma_vec_zero, dis_dma_vec_t v = { .size = 64 }; SCIStartDmaTransferVec(c->dq, c->lseg, c->rseg, 0, &v, NULL, NULL, 0, &err))
CASE(dma_vec_null, SCIStartDmaTransferVec(c->dq, c->lseg, c->rseg, 1, NULL, NULL, NULL, 0, &err))
CASE(dma_vec_many, dis_dma_vec_t v[5] = { { .size = 64 }, { .size = 64 }, { .size = 64 }, { .size = 64 }, { .size = 64 } }; SCIStartDmaTransferVec(c->dq, c->lseg, c->rseg, 5, v, NULL, NULL, 0, &err))
CASE(dma_vec_flags, dis_dma_vec_t v = { .size = 64, .flags = SCI_FLAG_BAR }; SCIStartDmaTransferVec(c->dq, c->lseg, c->rseg, 1, &v, NULL, NULL, 0, &err))
CASE(dma_wait_flags, SCIWaitForDMAQueue(c->dq, 0, 1, &err))
CASE(intr_null_no, sci_local_interrupt_t i; SCICreateInterrupt(c->sd, &i, 0, NULL, NULL, NULL, 0, &err))
CASE(intr_flags, sci_local_interrupt_t i; unsigned n = 0; SCICreateInterrupt(c->sd, &i, 0, &n, NULL, NULL, SCI_FLAG_BAR, &err))
CASE(intr_cb_null, sci_local_interrupt_t i; unsigned n = 0; SCICreateInterrupt(c->sd, &i, 0, &n, NULL, NULL, SCI_FLAG_USE_CALLBACK, &err))
CASE(intr_used, sci_local_interrupt_t i; unsigned n = SCIGetLocalInterruptNo(c->li); SCICreateInterrupt(c->sd, &i, 0, &n, NULL, NULL, SCI_FLAG_FIXED_INTNO, &err))
CASE(intr_wait_timeout, SCIWaitForInterrupt(c->li, 1, 0, &err))
CASE(intr_connect_nosuch, sci_remote_interrupt_t i; SCIConnectInterrupt(c->sd, &i, NODE_B, 0, 4343, 0, 0, &err))
CASE(intr_connect_nonode, sci_remote_interrupt_t i; SCIConnectInterrupt(c->sd, &i, 999, 0, 1, 0, 0, &err))
CASE(intr_connect_adapter, sci_remote_interrupt_t i; SCIConnectInterrupt(c->sd, &i, NODE_B, 0 + 4, 1, 0, 0, &err))
CASE(dintr_big, char b[SCI_MAX_DATA_INTERRUPT_SIZE + 1] = { 0 }; SCITriggerDataInterrupt(c->rdi, b, sizeof b, 0, &err))
CASE(dintr_null, SCITriggerDataInterrupt(c->rdi, NULL, 4, 0, &err))
CASE(dintr_wait_null, SCIWaitForDataInterrupt(c->ldi, NULL, NULL, 0, 0, &err))
CASE(borrow_nodev, sci_device_t d; SCIBorrowDevice(c->sd, &d, 0x90001, 0, &err))
CASE(borrow_zero, sci_device_t d; SCIBorrowDevice(c->sd, &d, 0, 0, &err))
CASE(borrow_huge, sci_device_t d; SCIBorrowDevice(c->sd, &d, ~0ull, 0, &err))
CASE(borrow_flags, sci_device_t d; SCIBorrowDevice(c->sd, &d, NVME_FDID, SCI_FLAG_BAR, &err))
CASE(borrow_unlent, sci_device_t d; SCIBorrowDevice(c->sd, &d, 0x40002, 0, &err))
CASE(return_busy, SCIReturnDevice(c->dev, 0, &err))
CASE(devmem_bar, sci_remote_segment_t r; SCIConnectDeviceMemory(c->sd, &r, 0, c->dev, 6, 0, SCI_FLAG_BAR, &err))
CASE(devmem_nobar, sci_remote_segment_t r; SCIConnectDeviceMemory(c->sd, &r, 0, c->dev, 1, 0, SCI_FLAG_BAR, &err))
CASE(devmem_two, sci_remote_segment_t r; SCIConnectDeviceMemory(c->sd, &r, 0, c->dev, 0, 0, SCI_FLAG_BAR | SCI_FLAG_SHARED, &err))
CASE(devmem_offset, sci_remote_segment_t r; SCIConnectDeviceMemory(c->sd, &r, 0, c->dev, 0, 4096, SCI_FLAG_BAR, &err))
CASE(devmem_adapter, sci_remote_segment_t r; SCIConnectDeviceMemory(c->sd, &r, 2, c->dev, 0, 0, SCI_FLAG_BAR, &err))
CASE(map_dev_offset, sci_ioaddr_t io; SCIMapRemoteSegmentForDevice(c->rseg, c->dev, &io, 1 << 20, 0, &err))
CASE(map_dev_null, SCIMapRemoteSegmentForDevice(c->rseg, c->dev, NULL, 0, 0, &err))
CASE(map_local_dev_unprep, sci_ioaddr_t io; SCIMapLocalSegmentForDevice(c->lseg, 0 + 1, c->dev, &io, 0, 0, &err))
CASE(unmap_dev_none, SCIUnmapRemoteSegmentForDevice(c->rseg, c->dev, 0, &err))
CASE(req_bus, SCIRegisterPCIeRequester(c->sd, 0, 256, 0, 0, &err))

static const struct {
    const char *name;
    case_fn fn;
    sci_error_t want;
} cases[] = {
#define E(fn, want) { #fn, fn, want }
    E(init_flags, SCI_ERR_ILLEGAL_FLAG), E(open_null, SCI_ERR_ILLEGAL_PARAMETER),
    E(open_flags, SCI_ERR_ILLEGAL_FLAG), E(close_busy, SCI_ERR_BUSY),
    E(node_null, SCI_ERR_ILLEGAL_PARAMETER), E(node_adapter, SCI_ERR_NO_SUCH_ADAPTERNO),
    E(probe_nonode, SCI_ERR_NO_SUCH_NODEID), E(query_null, SCI_ERR_ILLEGAL_PARAMETER),
    E(query_unknown, SCI_ERR_ILLEGAL_QUERY), E(query_adapter, SCI_ERR_NO_SUCH_ADAPTERNO),
    E(query_sub, SCI_ERR_ILLEGAL_QUERY), E(query_nodev, SCI_ERR_DEVICE_NOT_FOUND),
    E(create_zero, SCI_ERR_ILLEGAL_PARAMETER), E(create_huge, SCI_ERR_NOSPC),
    E(create_flags, SCI_ERR_ILLEGAL_FLAG), E(create_cb, SCI_ERR_ILLEGAL_PARAMETER),
    E(wait_lseg_empty, SCI_ERR_ILLEGAL_OPERATION), E(wait_lseg_flags, SCI_ERR_ILLEGAL_FLAG),
    E(wait_lseg_null, SCI_ERR_ILLEGAL_PARAMETER), E(wait_lseg_timeout, SCI_ERR_TIMEOUT),
    E(create_used, SCI_ERR_SEGMENTID_USED), E(create_null, SCI_ERR_ILLEGAL_PARAMETER),
    E(prepare_adapter, SCI_ERR_NO_SUCH_ADAPTERNO), E(prepare_flags, SCI_ERR_ILLEGAL_FLAG),
    E(prepare_empty, SCI_ERR_ILLEGAL_OPERATION),
    E(available_unprepared, SCI_ERR_SEGMENT_NOT_PREPARED), E(remove_mapped, SCI_ERR_BUSY),
    E(attach_cuda, SCI_ERR_NOT_SUPPORTED), E(attach_zero, SCI_ERR_ILLEGAL_PARAMETER),
    E(attach_big, SCI_ERR_OUT_OF_RANGE), E(attach_unaligned, SCI_ERR_OFFSET_ALIGNMENT),
    E(attach_full, SCI_ERR_ILLEGAL_OPERATION), E(register_unaligned, SCI_ERR_OFFSET_ALIGNMENT),
    E(register_size, SCI_ERR_SIZE_ALIGNMENT), E(register_null, SCI_ERR_ILLEGAL_ADDRESS),
    E(register_unmapped, SCI_ERR_ILLEGAL_ADDRESS), E(connect_nosuch, SCI_ERR_NO_SUCH_SEGMENT),
    E(connect_nonode, SCI_ERR_NO_SUCH_NODEID), E(connect_adapter, SCI_ERR_NO_SUCH_ADAPTERNO),
    E(connect_cb_null, SCI_ERR_ILLEGAL_PARAMETER), E(disconnect_mapped, SCI_ERR_BUSY),
    E(map_offset, SCI_ERR_OUT_OF_RANGE), E(map_size, SCI_ERR_OUT_OF_RANGE),
    E(map_huge, SCI_ERR_OUT_OF_RANGE), E(map_addr, SCI_ERR_NOT_SUPPORTED),
    E(map_flags, SCI_ERR_ILLEGAL_FLAG), E(map_null, SCI_ERR_ILLEGAL_PARAMETER),
    E(map_local_empty, SCI_ERR_ILLEGAL_OPERATION), E(map_local_offset, SCI_ERR_OUT_OF_RANGE),
    E(unmap_flags, SCI_ERR_ILLEGAL_FLAG), E(unmap_seq, SCI_ERR_BUSY),
    E(memcpy_range, SCI_ERR_OUT_OF_RANGE), E(memcpy_null, SCI_ERR_ILLEGAL_PARAMETER),
    E(memcpy_flags, SCI_ERR_ILLEGAL_FLAG), E(memcpy_check_noseq, SCI_ERR_ILLEGAL_PARAMETER),
    E(memwrite_null, SCI_ERR_ILLEGAL_PARAMETER), E(cachesync_flags, SCI_ERR_ILLEGAL_FLAG),
    E(seq_flags, SCI_ERR_ILLEGAL_FLAG), E(dq_zero, SCI_ERR_ILLEGAL_PARAMETER),
    E(dq_adapter, SCI_ERR_NO_SUCH_ADAPTERNO), E(dq_flags, SCI_ERR_ILLEGAL_FLAG),
    E(dma_zero, SCI_ERR_ILLEGAL_PARAMETER), E(dma_local_past, SCI_ERR_OUT_OF_RANGE),
    E(dma_remote_past, SCI_ERR_OUT_OF_RANGE), E(dma_huge, SCI_ERR_OUT_OF_RANGE),
    E(dma_offset_wrap, SCI_ERR_OUT_OF_RANGE), E(dma_flags, SCI_ERR_ILLEGAL_FLAG),
    E(dma_cb_null, SCI_ERR_ILLEGAL_PARAMETER), E(dma_empty, SCI_ERR_ILLEGAL_OPERATION),
    E(dma_vec_zero, SCI_ERR_ILLEGAL_PARAMETER), E(dma_vec_null, SCI_ERR_ILLEGAL_PARAMETER),
    E(dma_vec_many, SCI_ERR_MAX_ENTRIES), E(dma_vec_flags, SCI_ERR_ILLEGAL_PARAMETER),
    E(dma_wait_flags, SCI_ERR_ILLEGAL_FLAG), E(intr_null_no, SCI_ERR_ILLEGAL_PARAMETER),
    E(intr_flags, SCI_ERR_ILLEGAL_FLAG), E(intr_cb_null, SCI_ERR_ILLEGAL_PARAMETER),
    E(intr_used, SCI_ERR_BUSY), E(intr_wait_timeout, SCI_ERR_TIMEOUT),
    E(intr_connect_nosuch, SCI_ERR_NO_SUCH_INTNO), E(intr_connect_adapter, SCI_ERR_NO_SUCH_ADAPTERNO),
    E(intr_connect_nonode, SCI_ERR_NO_SUCH_NODEID),
    E(dintr_big, SCI_ERR_OUT_OF_RANGE), E(dintr_null, SCI_ERR_ILLEGAL_PARAMETER),
    E(dintr_wait_null, SCI_ERR_ILLEGAL_PARAMETER), E(borrow_nodev, SCI_ERR_DEVICE_NOT_FOUND),
    E(borrow_zero, SCI_ERR_DEVICE_NOT_FOUND), E(borrow_huge, SCI_ERR_DEVICE_NOT_FOUND),
    E(borrow_flags, SCI_ERR_ILLEGAL_FLAG), E(borrow_unlent, SCI_ERR_ACCESS),
    E(return_busy, SCI_ERR_BUSY), E(devmem_bar, SCI_ERR_ILLEGAL_PARAMETER),
    E(devmem_nobar, SCI_ERR_ILLEGAL_PARAMETER), E(devmem_two, SCI_ERR_ILLEGAL_FLAG),
    E(devmem_offset, SCI_ERR_ILLEGAL_PARAMETER), E(devmem_adapter, SCI_ERR_NO_SUCH_ADAPTERNO),
    E(map_dev_offset, SCI_ERR_OUT_OF_RANGE), E(map_dev_null, SCI_ERR_ILLEGAL_PARAMETER),
    E(map_local_dev_unprep, SCI_ERR_SEGMENT_NOT_PREPARED),
    E(unmap_dev_none, SCI_ERR_ILLEGAL_OPERATION), E(req_bus, SCI_ERR_ILLEGAL_PARAMETER),
#undef E
};

/* ---------------------------------------------------------------- the run */

static void make(struct ctx *c)
{
    sci_error_t err;
    c->sd = sci_start();
    SCI_OK(SCICreateSegment(c->sd, &c->lseg, 1, 65536, NULL, NULL, 0, &err));
    SCI_OK(SCIPrepareSegment(c->lseg, 0, 0, &err));
    SCI_OK(SCISetSegmentAvailable(c->lseg, 0, 0, &err));
    CHECK(SCIMapLocalSegment(c->lseg, &c->lmap, 0, 0, NULL, 0, &err));
    SCI_OK(SCICreateSegment(c->sd, &c->empty, 903, 8192, NULL, NULL, SCI_FLAG_EMPTY, &err));
    SCI_OK(SCIConnectSegment(c->sd, &c->rseg, NODE_B, 1, 0, NULL, NULL, 1000, 0, &err));
    CHECK(SCIMapRemoteSegment(c->rseg, &c->map, 0, 0, NULL, 0, &err));
    SCI_OK(SCICreateMapSequence(c->map, &c->seq, 0, &err));
    SCI_OK(SCICreateDMAQueue(c->sd, &c->dq, 0, 4, 0, &err));
    unsigned n = 0, dn = 0;
    SCI_OK(SCICreateInterrupt(c->sd, &c->li, 0, &n, NULL, NULL, 0, &err));
    SCI_OK(SCIConnectInterrupt(c->sd, &c->ri, NODE_B, 0, n, 1000, 0, &err));
    SCI_OK(SCICreateDataInterrupt(c->sd, &c->ldi, 0, &dn, NULL, NULL, 0, &err));
    SCI_OK(SCIConnectDataInterrupt(c->sd, &c->rdi, NODE_B, 0, dn, 1000, 0, &err));
    SCI_OK(SCIBorrowDevice(c->sd, &c->dev, NVME_FDID, 0, &err));
    sci_ioaddr_t io; /* the device is in use through the handle: it cannot be returned */
    SCI_OK(SCIMapLocalSegmentForDevice(c->lseg, 0, c->dev, &io, 0, 0, &err));
    void *live[K_N] = { c->sd, c->lseg, c->rseg, c->map, c->seq, c->dq, c->li, c->ri, c->ldi,
                        c->rdi, c->dev };
    memcpy(c->live, live, sizeof live);

    /* one of each kind made and freed */
    sci_desc_t sd;
    SCI_OK(SCIOpen(&sd, 0, &err));
    SCI_OK(SCIClose(sd, 0, &err));
    c->freed[K_DESC] = sd;
    sci_local_segment_t l;
    SCI_OK(SCICreateSegment(c->sd, &l, 904, 4096, NULL, NULL, 0, &err));
    SCI_OK(SCIRemoveSegment(l, 0, &err));
    c->freed[K_LSEG] = l;
    sci_remote_segment_t r;
    SCI_OK(SCIConnectSegment(c->sd, &r, NODE_B, 1, 0, NULL, NULL, 1000, 0, &err));
    sci_map_t m;
    CHECK(SCIMapRemoteSegment(r, &m, 0, 0, NULL, 0, &err));
    sci_sequence_t q;
    SCI_OK(SCICreateMapSequence(m, &q, 0, &err));
    SCI_OK(SCIRemoveSequence(q, 0, &err));
    SCI_OK(SCIUnmapSegment(m, 0, &err));
    SCI_OK(SCIDisconnectSegment(r, 0, &err));
    c->freed[K_RSEG] = r;
    c->freed[K_MAP] = m;
    c->freed[K_SEQ] = q;
    sci_dma_queue_t dq;
    SCI_OK(SCICreateDMAQueue(c->sd, &dq, 0, 1, 0, &err));
    SCI_OK(SCIRemoveDMAQueue(dq, 0, &err));
    c->freed[K_DMAQ] = dq;
    sci_local_interrupt_t li;
    sci_remote_interrupt_t ri;
    SCI_OK(SCICreateInterrupt(c->sd, &li, 0, &n, NULL, NULL, 0, &err));
    SCI_OK(SCIConnectInterrupt(c->sd, &ri, NODE_B, 0, n, 1000, 0, &err));
    SCI_OK(SCIDisconnectInterrupt(ri, 0, &err));
    SCI_OK(SCIRemoveInterrupt(li, 0, &err));
    c->freed[K_LI] = li;
    c->freed[K_RI] = ri;
    sci_local_data_interrupt_t ldi;
    sci_remote_data_interrupt_t rdi;
    SCI_OK(SCICreateDataInterrupt(c->sd, &ldi, 0, &n, NULL, NULL, 0, &err));
    SCI_OK(SCIConnectDataInterrupt(c->sd, &rdi, NODE_B, 0, n, 1000, 0, &err));
    SCI_OK(SCIDisconnectDataInterrupt(rdi, 0, &err));
    SCI_OK(SCIRemoveDataInterrupt(ldi, 0, &err));
    c->freed[K_LDI] = ldi;
    c->freed[K_RDI] = rdi;
    sci_device_t d;
    SCI_OK(SCIBorrowDevice(c->sd, &d, NVME_FDID, 0, &err));
    SCI_OK(SCIReturnDevice(d, 0, &err));
    c->freed[K_DEV] = d;
}

static void unmake(struct ctx *c)
{
    sci_error_t err;
    (void)err;
    SCI_OK(SCIUnmapLocalSegmentForDevice(c->lseg, 0, c->dev, 0, &err));
    SCI_OK(SCIReturnDevice(c->dev, 0, &err));
    SCI_OK(SCIDisconnectDataInterrupt(c->rdi, 0, &err));
    SCI_OK(SCIRemoveDataInterrupt(c->ldi, 0, &err));
    SCI_OK(SCIDisconnectInterrupt(c->ri, 0, &err));
    SCI_OK(SCIRemoveInterrupt(c->li, 0, &err));
    SCI_OK(SCIRemoveDMAQueue(c->dq, 0, &err));
    SCI_OK(SCIRemoveSequence(c->seq, 0, &err));
    SCI_OK(SCIUnmapSegment(c->map, 0, &err));
    SCI_OK(SCIDisconnectSegment(c->rseg, 0, &err));
    SCI_OK(SCIUnmapSegment(c->lmap, 0, &err));
    SCI_OK(SCIRemoveSegment(c->lseg, 0, &err));
    SCI_OK(SCIRemoveSegment(c->empty, 0, &err));
    sci_end(c->sd);
}

static void bad_input(void *arg)
{
    struct ctx c = { 0 };
    int failed = 0;
    make(&c);
    for (size_t i = 0; i < sizeof by_handle / sizeof by_handle[0]; i++) {
        enum kind k = by_handle[i].kind;
        void *bad[] = { NULL, c.freed[k], c.live[(k + 1) % K_N], (void *)0x1234, &c };
        const char *what[] = { "NULL", "freed", "foreign", "made-up", "a pointer" };
        for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
            if (!bad[b] && by_handle[i].fn == c_cachesync)
                continue; /* SCICacheSync takes a NULL map */
            sci_error_t got = by_handle[i].fn(&c, bad[b]);
            if (got != SCI_ERR_ILLEGAL_PARAMETER) {
                fprintf(stderr, "%s with a %s handle: %s (0x%x), expected SCI_ERR_ILLEGAL_PARAMETER\n",
                        by_handle[i].name + 2, what[b], SCIGetErrorString(got), got);
                failed++;
            }
        }
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sci_error_t got = cases[i].fn(&c);
        if (got != cases[i].want) {
            fprintf(stderr, "%s: %s (0x%x), expected 0x%x (%s)\n", cases[i].name,
                    SCIGetErrorString(got), got, cases[i].want, SCIGetErrorString(cases[i].want));
            failed++;
        }
    }
    /* Calls that write into the caller's memory write no more than they were given. */
    sci_error_t err;
    unsigned char payload[20], buf[4 + 16];
    memset(payload, 0x77, sizeof payload);
    memset(buf, 0xee, sizeof buf);
    SCI_OK(SCITriggerDataInterrupt(c.rdi, payload, sizeof payload, 0, &err));
    unsigned len = 4;
    SCIWaitForDataInterrupt(c.ldi, buf, &len, 1000, 0, &err);
    CHECK_EQ(err, SCI_ERR_OVERFLOW);
    CHECK_EQ(len, sizeof payload);
    for (size_t i = 0; i < sizeof buf; i++)
        CHECK_EQ(buf[i], i < 4 ? 0x77 : 0xee);
    char s[3 + 8];
    memset(s, 'z', sizeof s);
    sci_query_string_t qs = { .str = s, .length = 3 };
    SCIQuery(SCI_Q_VENDORID, &qs, 0, &err);
    CHECK_EQ(err, SCI_ERR_OVERFLOW);
    CHECK(s[2] == 0 && s[3] == 'z');
    unmake(&c);
    CHECK_EQ(failed, 0);
}

static void test_bad_input(void **state)
{
    struct h_proc b = h_spawn(FX.name, "b", bad_input, NULL);
    assert_int_equal(h_join(&b), 0);
}

/* Not on a host of a running fabric, or not initialized: every call says so. */
static void uninitialized(void *arg)
{
    sci_error_t err;
    sci_desc_t sd;
    SCIOpen(&sd, 0, &err);
    CHECK_EQ(err, SCI_ERR_NOT_INITIALIZED);
    SCIInitialize(0, &err);
    CHECK_EQ(err, SCI_ERR_NOT_INITIALIZED); /* host "nosuch" is not in the fabric */
    CHECK(strstr(SCIGetErrorString(err), "ntblend run --host"));
    CHECK(strcmp(SCIGetErrorString((sci_error_t)0x12345), "unknown SISCI error code") == 0);
    SCITerminate(); /* more terminates than initializations harm nothing */
}

static void test_uninitialized(void **state)
{
    struct h_proc p = h_spawn(FX.name, "nosuch", uninitialized, NULL);
    assert_int_equal(h_join(&p), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_uninitialized),
    };
    return cmocka_run_group_tests(tests, setup, fx_teardown);
}
