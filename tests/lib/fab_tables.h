/*
 * What borrows, mappings and segments hold in a fabric's tables, for tests that check nothing
 * is left behind: every adapter's LUT entries (other than the agents' own mailbox routes) and
 * requester-ID entries, and every host's IOMMU mappings.
 */
#ifndef NTBLEND_TEST_FAB_TABLES_H
#define NTBLEND_TEST_FAB_TABLES_H

#include <stdbool.h>
#include <stdint.h>

#include "fabric.h"
#include "fixture.h"

struct fab_tables {
    uint32_t lut[TOPO_MAX_ADAPTERS], rid[TOPO_MAX_ADAPTERS], iommu[TOPO_MAX_HOSTS];
};

void fab_tables_snapshot(const struct fab *f, struct fab_tables *t);

/* Wait up to 3 s for the tables to equal *want (the agents release asynchronously); the
 * last snapshot is left in *now. True when they did. */
bool fab_tables_settle(const struct fab *f, const struct fab_tables *want, struct fab_tables *now);

#endif
