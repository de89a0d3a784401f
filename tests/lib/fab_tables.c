/*
 * Bodies of the test helpers declared in fab_tables.h (what that header says).
 */
#include <string.h>

#include "fab_tables.h"

void fab_tables_snapshot(const struct fab *f, struct fab_tables *t)
{
    memset(t, 0, sizeof *t);
    for (uint32_t a = 0; a < f->ctl->nadapters; a++) {
        const struct fab_adapter *ad = fab_adapter(f, a);
        const struct fab_lut_entry *l = fab_lut(f, ad);
        for (uint32_t e = 0; e < ad->lut_entries; e++)
            t->lut[a] += atomic_load(&l[e].valid) && !(l[e].flags & FAB_LUT_AGENT);
        t->rid[a] = fab_rid_used(f, a);
    }
    for (uint32_t h = 0; h < f->ctl->nhosts; h++) {
        const struct fab_iommu_map *m = fab_iommu_table(f, h);
        for (uint32_t i = 0; i < fab_host(f, h)->iommu_nmaps; i++)
            t->iommu[h] += m[i].used != 0;
    }
}

bool fab_tables_settle(const struct fab *f, const struct fab_tables *want, struct fab_tables *now)
{
    for (int i = 0; i < 300; i++) {
        fab_tables_snapshot(f, now);
        if (!memcmp(now, want, sizeof *now))
            return true;
        usleep(10000);
    }
    return false;
}
