/*
 * ntblend SmartIO for driver models: this host's PCIe tree (smartio-tocs-2021 §4.1-§4.2,
 * device-lending-2016). A driver model — include/ntblend/pci.h is one, a VM's device model
 * another — drives the functions of one host's tree as that host sees them: the host's own
 * functions, and the functions other hosts lend it, hot-added as shadow functions
 * (`ntblend device lend NAME --to H`). These calls list that tree, each function with its
 * place and its BARs in this host's address map, wait for hot-add and hot-remove, and bind a
 * function for a driver. A bound function is then driven with the rest of SmartIO
 * (ntblend/smartio.h): configuration space, BARs, memory for the device, streaming DMA, MSI-X.
 *
 * Applications that borrow a device by its fabric-wide id (sio_borrow) never see a host's
 * tree and need none of this: these calls are for whoever implements a driver model, and
 * speak of this host's bus addresses, which a driver model hides from its drivers.
 * For programs started with `ntblend run --host H -- prog`; every function may be called from
 * any thread. Functions return 0 or a negative errno unless stated otherwise.
 */
#ifndef NTBLEND_SMARTIO_TREE_H
#define NTBLEND_SMARTIO_TREE_H

#include <stdbool.h>
#include <stdint.h>

#include "ntblend/smartio.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What this header declares is libntblend's API, the symbols it exports (it is built with
 * -fvisibility=hidden; docs/install.md). */
#pragma GCC visibility push(default)

#define SIO_BARS 6 /* BAR slots of a function */

/**
 * struct sio_tree_fn - a function of this host's PCIe tree.
 * @id: its fabric-wide device id (sio_bind, and sio_list's id).
 * @name: its name in the fabric ("accel0", "nvme0.vf1").
 * @bdf: its place in this host's tree: bus << 8 | device << 3 | function.
 * @lent: lent to this host by another and hot-added (a shadow); false: this host's own.
 * @present: false once its hot-remove has begun (its registers read all ones from then on).
 * @vendor, @device, @class_code: its identity (class: base << 16 | sub << 8 | interface).
 * @bar_addr: where each BAR sits in this host's address map (for a lent function, the
 *            window of this host's adapter its hot-add mapped it through); 0: no such BAR.
 * @bar_size: each BAR's size; 0: no such BAR.
 */
struct sio_tree_fn {
    uint32_t id;
    char name[32];
    uint16_t bdf;
    bool lent;
    bool present;
    uint16_t vendor, device;
    uint32_t class_code;
    uint64_t bar_addr[SIO_BARS];
    uint64_t bar_size[SIO_BARS];
};

typedef struct sio_tree sio_tree_t;

/**
 * sio_tree_open() - look at this host's tree: what the other calls take. It keeps this
 * process attached to its host until sio_tree_close().
 * Return: 0, or -errno (-ENOENT/-ECONNREFUSED: not running on a host, see `ntblend run`).
 */
int sio_tree_open(sio_tree_t **tree);
/* sio_tree_close() - let go of it (after every thread is done with it). */
void sio_tree_close(sio_tree_t *tree);

/**
 * sio_tree_list() - the functions of this host's tree: its own first, then the lent ones.
 * @out: where they go (at most @max of them; NULL with max 0 only counts).
 * Return: how many there are (>= 0; more than @max when they did not all fit), or -EINVAL.
 */
int sio_tree_list(sio_tree_t *tree, struct sio_tree_fn *out, int max);

/**
 * sio_tree_wait() - wait for this host's tree to change (a function hot-added, or its
 * hot-remove begun or ended).
 * @seen: a cursor of the tree's generation: it returns when the generation differs from
 *        *@seen and stores the new one. Start with 0 and timeout 0 to take the current one;
 *        then look at the tree (sio_tree_list) and wait: a change in between is not missed.
 * @timeout_ms: at most this long (< 0: no limit).
 * Return: 0 (changed), -ETIMEDOUT, -EINTR (sio_tree_wake() was called on @tree), -EINVAL.
 * A backend without Device Lending has a tree that never changes: it waits out the timeout.
 */
int sio_tree_wait(sio_tree_t *tree, uint32_t *seen, int timeout_ms);

/**
 * sio_tree_wake() - make every sio_tree_wait() on @tree, those under way and those to come,
 * return -EINTR at once: how a thread that watches the tree is told to stop before the tree
 * is closed. Returns when no wait on @tree sleeps any more.
 */
void sio_tree_wake(sio_tree_t *tree);

/**
 * sio_bind() - bind function @id of this host's tree for a driver in this process.
 * @tree: this host's tree.
 * @id: a function sio_tree_list() reported.
 * @dev: the device, driven with the calls of ntblend/smartio.h, unbound with sio_return()
 *       (and when the process exits). It may outlive @tree.
 *
 * This host's own function is bound alone, whether or not it is lent out: while a driver has
 * it, other hosts cannot borrow it. A lent function is bound under the borrow its hot-add
 * made for the host, by one driver at a time; its BARs map (sio_map_bar) through the windows
 * the hot-add set up, at the addresses sio_tree_list() reports, not through new ones. When a
 * lent function is hot-removed the binding ends with it (the device stops responding, what
 * was mapped for it is gone): return it then.
 * Return: 0, -ENOENT (not in this host's tree: not lent to it, or hot-removed), -EBUSY
 * (another driver, or for this host's own function another host, has it), -ENODEV (no such
 * function), -EHOSTUNREACH (its lender cannot be reached).
 */
int sio_bind(sio_tree_t *tree, uint32_t id, sio_dev_t **dev);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
