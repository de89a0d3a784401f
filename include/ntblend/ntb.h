/*
 * ntblend low-level NTB API: Linux include/linux/ntb.h semantics for an application running on
 * an emulated host (`ntblend run --host H -- prog`). One handle per NTB adapter ("port").
 *
 * Memory windows follow the Linux split:
 *   - inbound ("mw"): the windows a peer uses to reach *our* memory; ntb_mw_set_trans() points
 *     one at a local DMA address (as ntb_perf and ntb_transport do on the receiving side);
 *   - outbound ("peer_mw"): our adapter's window BAR; ntb_peer_mw_map() maps it into this
 *     process so plain loads and stores reach the peer, with no software in between.
 * Both are entries of an adapter's address look-up table (LUT): widx is the entry index.
 *
 * All functions return 0 or a negative errno unless stated otherwise. Not async-signal-safe.
 *
 * Threads: an ntb_dev may be used by several threads at once. Memory-window calls serialize
 * on the handle; doorbell, mask, scratchpad and link calls are single register accesses, as on
 * hardware (so two threads clearing and setting the same bits race as they would there). The
 * event waits are level-triggered: every waiter returns while a bit it waits for is pending
 * and unmasked, until someone clears it. ntb_close() must not run while another thread uses
 * the handle, nor may memory it returned (windows, DMA buffers) be used after it.
 */
#ifndef NTBLEND_NTB_H
#define NTBLEND_NTB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What this header declares is libntblend's API, the symbols it exports (it is built with
 * -fvisibility=hidden; docs/install.md). */
#pragma GCC visibility push(default)

struct ntb_dev;

/* ---- opening ---- */
/** ntb_adapter_count() - Number of NTB adapters on this host ($NTBLEND_FABRIC / $NTBLEND_HOST,
 * set by ntblend run).
 */
int ntb_adapter_count(void);
/** ntb_open() - Open adapter `index` of this host. NULL + errno (ENOENT: no such
 * fabric/host/adapter; ECONNREFUSED: the host's agent is not running).
 */
struct ntb_dev *ntb_open(int index);
void ntb_close(struct ntb_dev *ntb);
/** ntb_name() - Adapter name ("host.adapter") and this host's node id. */
const char *ntb_name(const struct ntb_dev *ntb);
uint32_t ntb_node_id(const struct ntb_dev *ntb);

/* ---- ports and peers ---- */
int ntb_port_number(const struct ntb_dev *ntb);     /* our node id */
int ntb_peer_port_count(const struct ntb_dev *ntb);
int ntb_peer_port_number(const struct ntb_dev *ntb, int pidx); /* peer's node id */
int ntb_peer_port_idx(const struct ntb_dev *ntb, int port);    /* -EINVAL if not a peer */
/** ntb_fabric_peers() - Fabric discovery, as a fabric manager reports it: the node ids that
 * host `node`'s adapters reach directly, adapter by adapter (a ring host lists its left then
 * its right neighbour). Writes at most max of them; returns how many there are, or -ENOENT (no
 * such node).
 */
int ntb_fabric_peers(uint32_t node, uint32_t *peers, int max);
/** ntb_fabric_link_up() - The same fabric manager's view of the direct link between the hosts
 * with node ids node_a and node_b: 1 up, 0 down, -ENOLINK (they are not direct peers), -ENOENT
 * (no such node). If signature is not NULL it gets a value that changes whenever the link goes
 * down or up (compare two readings to see that it went down meanwhile, even if it is up again).
 * Any process may ask about any pair: a job spread over a ring learns of a link that went down
 * far from its own host.
 */
int ntb_fabric_link_up(uint32_t node_a, uint32_t node_b, uint64_t *signature);
/** ntb_node_name() - The name of the host with node id `node`, copied into name (at most len
 * bytes with the NUL). 0, -ENOENT (no such node), -EOPNOTSUPP (the backend has no names).
 */
int ntb_node_name(uint32_t node, char *name, size_t len);
/** ntb_fabric_latency_model() - 1 when the emulated fabric's latency model is on (every
 * access pays modelled PCIe and NTB delays), 0 when off, -EOPNOTSUPP on hardware.
 */
int ntb_fabric_latency_model(void);
/** ntb_fabric_host() - The same fabric manager's inventory of host `node`: its RAM in
 * *ram_size and, adapter by adapter (the order of ntb_fabric_peers), its outbound LUT:
 * entries, bytes per entry, and how many peers it reaches. Fills at most max adapters; returns
 * how many the host has, or -ENOENT (no such node). Lets a job size what it maps before it
 * maps anything.
 */
struct ntb_fabric_adapter {
    uint32_t lut_entries;
    uint64_t lut_size;
    int npeers;
};
int ntb_fabric_host(uint32_t node, uint64_t *ram_size, struct ntb_fabric_adapter *adapters,
                    int max);

/* ---- link ---- */
/** ntb_link_is_up() - Bitmask of peers (by pidx) whose link is up. */
uint64_t ntb_link_is_up(struct ntb_dev *ntb, int *speed, int *width);
int ntb_link_enable(struct ntb_dev *ntb);
/** ntb_link_disable() - Returns once no more writes from this port cross the link. */
int ntb_link_disable(struct ntb_dev *ntb);
/** ntb_link_event_wait() - Link events are counted. Wait until the count differs from *seen,
 * then store the new count in *seen. Pass 0 the first time: it returns at once with the current
 * count; after that each call waits for the next change (then check ntb_link_is_up). 0 or
 * -ETIMEDOUT.
 */
int ntb_link_event_wait(struct ntb_dev *ntb, uint64_t *seen, int timeout_ms);

/* ---- inbound memory windows (peer -> us) ---- */
int ntb_mw_count(struct ntb_dev *ntb, int pidx);
int ntb_mw_get_align(struct ntb_dev *ntb, int pidx, int widx, uint64_t *addr_align,
                     uint64_t *size_align, uint64_t *size_max);
/** ntb_mw_set_trans() - Point the peer's window widx at our DMA address. -EBUSY if the entry is
 * in use.
 */
int ntb_mw_set_trans(struct ntb_dev *ntb, int pidx, int widx, uint64_t dma_addr, uint64_t size);
int ntb_mw_clear_trans(struct ntb_dev *ntb, int pidx, int widx);

/* ---- outbound memory windows (us -> peer) ---- */
int ntb_peer_mw_count(struct ntb_dev *ntb);
int ntb_peer_mw_get_addr(struct ntb_dev *ntb, int widx, uint64_t *phys, uint64_t *size);
/** ntb_peer_mw_set_trans() - Program our entry widx -> (peer pidx, peer bus address). */
int ntb_peer_mw_set_trans(struct ntb_dev *ntb, int pidx, int widx, uint64_t addr, uint64_t size);
int ntb_peer_mw_clear_trans(struct ntb_dev *ntb, int pidx, int widx);
/** ntb_peer_mw_alloc() - Claim a free outbound entry (-ENOSPC when the LUT is exhausted);
 * release with clear_trans.
 */
int ntb_peer_mw_alloc(struct ntb_dev *ntb);
/** ntb_peer_mw_map() - Map window entries [widx, widx+count) into this process; NULL + errno.
 * The mapping follows the hardware: stores land in the peer's memory, loads read it; entries
 * not programmed, or behind a downed link, read all ones and drop writes.
 */
void *ntb_peer_mw_map(struct ntb_dev *ntb, int widx, int count);
int ntb_peer_mw_unmap(struct ntb_dev *ntb, void *addr);

/* ---- DMA-able local memory ---- */
/** ntb_dma_alloc() - Allocate from this host's physical memory; *dma_addr is the bus address
 * this adapter (and its inbound traffic) uses — an IOVA when the host IOMMU is on. Zeroed. NULL
 * + errno.
 */
void *ntb_dma_alloc(struct ntb_dev *ntb, size_t size, uint64_t *dma_addr);
void ntb_dma_free(struct ntb_dev *ntb, void *ptr);

/* ---- doorbells ---- */
uint64_t ntb_db_valid_mask(struct ntb_dev *ntb);
int ntb_db_vector_count(struct ntb_dev *ntb);
uint64_t ntb_db_vector_mask(struct ntb_dev *ntb, int vector);
uint64_t ntb_db_read(struct ntb_dev *ntb);
int ntb_db_set(struct ntb_dev *ntb, uint64_t bits);
int ntb_db_clear(struct ntb_dev *ntb, uint64_t bits);
uint64_t ntb_db_read_mask(struct ntb_dev *ntb);
int ntb_db_set_mask(struct ntb_dev *ntb, uint64_t bits);
/** ntb_db_clear_mask() - Unmasking a pending bit raises a doorbell event, as the Linux API
 * requires.
 */
int ntb_db_clear_mask(struct ntb_dev *ntb, uint64_t bits);
/** ntb_peer_db_set() - Ring peer pidx. Dropped silently when the link is down (posted write),
 * like hardware.
 */
int ntb_peer_db_set(struct ntb_dev *ntb, int pidx, uint64_t bits);
/** ntb_db_event_wait() - Wait until an unmasked bit is pending; returns the pending unmasked
 * bits (>0), 0 on timeout, or -errno. timeout_ms < 0 waits forever.
 */
int64_t ntb_db_event_wait(struct ntb_dev *ntb, int timeout_ms);
/** ntb_db_vector_wait() - The same for some bits only (a per-vector interrupt handler): wait
 * until one of `bits` is pending and unmasked; returns those pending bits (>0), 0 on timeout,
 * or -errno.
 */
int64_t ntb_db_vector_wait(struct ntb_dev *ntb, uint64_t bits, int timeout_ms);

/* ---- scratchpads ---- */
int ntb_spad_count(struct ntb_dev *ntb);
uint32_t ntb_spad_read(struct ntb_dev *ntb, int sidx);            /* ~0 if absent */
int ntb_spad_write(struct ntb_dev *ntb, int sidx, uint32_t val);
uint32_t ntb_peer_spad_read(struct ntb_dev *ntb, int pidx, int sidx); /* ~0 if link down */
int ntb_peer_spad_write(struct ntb_dev *ntb, int pidx, int sidx, uint32_t val);

/* ---- DMA engine ---- */
struct ntb_dma_chan;
int ntb_dma_chan_count(struct ntb_dev *ntb);
/** ntb_dma_chan_request() - Claim a channel (-EBUSY when all are taken). */
struct ntb_dma_chan *ntb_dma_chan_request(struct ntb_dev *ntb);
void ntb_dma_chan_release(struct ntb_dma_chan *ch);
/** ntb_dma_submit() - Queue a copy between two bus addresses on this host (a window address
 * reaches the peer). Returns a cookie > 0, or -errno (-EAGAIN ring full).
 */
int64_t ntb_dma_submit(struct ntb_dma_chan *ch, uint64_t dst, uint64_t src, uint64_t len,
                       bool interrupt);
/** ntb_dma_abort() - Cancel every queued descriptor not yet started (they complete with
 * -ECANCELED); the one in progress finishes.
 */
int ntb_dma_abort(struct ntb_dma_chan *ch);
/** ntb_dma_wait() - Wait for cookie's completion: 0, its error (-EFAULT IOMMU fault, -ENOLINK,
 * -EIO), or -ETIMEDOUT.
 */
int ntb_dma_wait(struct ntb_dma_chan *ch, int64_t cookie, int timeout_ms);

/* ---- errors seen by this host's IOMMU ---- */
struct ntb_fault {
    uint16_t requester;
    bool write;
    int reason;
    uint64_t addr;
};
/** ntb_iommu_faults() - Copy up to max recent faults of this host, newest last; returns how
 * many, and the total fault count so far in *total.
 */
int ntb_iommu_faults(struct ntb_dev *ntb, struct ntb_fault *out, int max, uint64_t *total);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
