/*
 * The choice of backend (ntb_backend.h): the emulated fabric unless ntb_backend_use() named
 * another, and the check every table passes before it is used, as Linux's
 * ntb_dev_ops_is_valid() checks an NTB driver's: which operations a backend must have, which
 * it may leave out alone, and which come as a group (all or none), so that callers test one
 * operation of a group instead of each one.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>

#include "ntb_backend.h"

#define OP(name) { #name, offsetof(struct ntb_backend_ops, name) }

struct op {
    const char *name;
    size_t off;
};

/* Every backend has these. */
static const struct op required[] = {
    OP(start), OP(stop), OP(agent_call),
    OP(node_id), OP(host_by_node), OP(boot_gen),
    OP(adapter), OP(adapter_toward), OP(peer_on), OP(path_up), OP(path_signature),
    OP(window_map), OP(window_unmap), OP(window_cpu_map), OP(window_cpu_unmap),
    OP(ram), OP(ram_fd), OP(msi_word),
    OP(func_info), OP(func_by_name), OP(cfg_read), OP(cfg_write), OP(bar_mem), OP(fn_notify),
    OP(iommu_on), OP(iommu_map), OP(iommu_unmap),
    OP(now_ns), OP(wait), OP(wake),
};

/* Groups a backend has whole or not at all; the first names the group (callers test it). */
static const struct op tree_group[] = { OP(tree), OP(tree_word) };
static const struct op vm_group[] = { OP(vm_info), OP(vm_word) };
static const struct op mcast_group[] = { OP(mcast), OP(mcast_info), OP(mcast_find) };
static const struct op ntb_group[] = {
    OP(adapter_info), OP(mw_set), OP(mw_clear), OP(mw_alloc), OP(mw_cpu_map), OP(link_set),
    OP(link_word), OP(db_read), OP(db_set), OP(db_clear), OP(db_mask_read), OP(db_mask_set),
    OP(db_mask_clear), OP(peer_db_set), OP(db_word), OP(spad_read), OP(spad_write),
    /* its DMA engines (a backend without any: dma_chan_get answers ENODEV) and IOMMU */
    OP(dma_chan_get), OP(dma_chan_put), OP(dma_submit), OP(dma_abort), OP(dma_wait),
    OP(dma_buf_map), OP(iommu_faults),
};
static const struct {
    const char *what;
    const struct op *ops;
    size_t n;
} groups[] = {
    { "the PCIe tree", tree_group, sizeof tree_group / sizeof tree_group[0] },
    { "the NTB device", ntb_group, sizeof ntb_group / sizeof ntb_group[0] },
    { "virtual machines", vm_group, sizeof vm_group / sizeof vm_group[0] },
    { "multicast groups", mcast_group, sizeof mcast_group / sizeof mcast_group[0] },
};
/* Optional one by one (documented in ntb_backend.h as "may be NULL"): host_name,
 * latency_model, ram_size, path_word, fn_raw, window_cpu_failover, fn_cpu_word,
 * fn_driver_asleep. */

static bool has(const struct ntb_backend_ops *ops, const struct op *o)
{
    return *(void *const *)((const char *)ops + o->off) != NULL;
}

int ntb_backend_ops_check(const struct ntb_backend_ops *ops, const char **missing)
{
    const char *dummy;
    if (!missing)
        missing = &dummy;
    *missing = NULL;
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        if (!has(ops, &required[i])) {
            *missing = required[i].name;
            return -EINVAL;
        }
    if (!ops->msi_vectors) {
        *missing = "msi_vectors";
        return -EINVAL;
    }
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
        bool first = has(ops, &groups[g].ops[0]);
        for (size_t i = 1; i < groups[g].n; i++)
            if (has(ops, &groups[g].ops[i]) != first) {
                *missing = first ? groups[g].ops[i].name : groups[g].ops[0].name;
                return -EINVAL;
            }
    }
    return 0;
}

static const struct ntb_backend_ops *_Atomic current_ops;

int ntb_backend_use(const struct ntb_backend_ops *ops)
{
    const char *missing;
    if (ops && ntb_backend_ops_check(ops, &missing)) {
        fprintf(stderr, "ntblend: backend '%s' lacks the operation %s (ntb_backend.h)\n",
                ops->name ? ops->name : "(unnamed)", missing);
        return -EINVAL;
    }
    atomic_store(&current_ops, ops);
    return 0;
}

const struct ntb_backend_ops *ntb_backend(void)
{
    const struct ntb_backend_ops *ops = atomic_load(&current_ops);
    return ops ? ops : &ntb_backend_emu;
}
