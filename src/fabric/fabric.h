/*
 * The emulated PCIe NTB fabric, all of it: this header includes the fabric's headers, one per
 * concern, from the bottom floor up (docs/fabric.md has the file map). Include the one you
 * need where that is enough.
 */
#ifndef NTBLEND_FABRIC_H
#define NTBLEND_FABRIC_H

#include "fab_sync.h"     /* clock, futexes, owner-pid locks */
#include "fab_state.h"    /* shared-state layout, address map, table accessors */
#include "fab_shm.h"      /* create, attach, lookups, lazily mapped files, map generation */
#include "fab_route.h"    /* reachability and power */
#include "fab_iommu.h"    /* IOMMU */
#include "fab_mcast.h"    /* multicast groups of the switches */
#include "fab_ntb.h"      /* LUT, windows, requester IDs, doorbells */
#include "fab_devices.h"  /* PCIe functions */
#include "fab_resolve.h"  /* address resolution, device DMA, latency model */
#include "fab_vm.h"       /* virtual machines: guest RAM regions, their devices */

#endif
