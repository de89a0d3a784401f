/*
 * The NVMe controller core, data pointers: walking PRP entries and PRP lists (NVMe 1.4 §4.3)
 * into DMA reads and writes, and the transfer limit MDTS sets.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nvmc_int.h"

/* ---------------------------------------------------------------- PRPs */

struct seg {
    uint64_t addr;
    uint32_t len;
};

/* Walk PRP1/PRP2 (and PRP lists) for len bytes; *segs is malloc'd. Returns a status. */
static uint16_t prp_map(struct nvmc_ctrl *c, uint64_t prp1, uint64_t prp2, uint64_t len,
                        struct seg **segs, uint32_t *nseg)
{
    uint64_t page = c->page;
    uint64_t max = len / page + 2;
    struct seg *s = calloc(max, sizeof *s);
    uint64_t *list = NULL;
    uint16_t st = NVME_SUCCESS;
    uint32_t n = 0;
    *segs = NULL;
    *nseg = 0;
    if (!s)
        return NVME_INTERNAL_ERROR;
    if (prp1 & 3) {
        st = NVME_INVALID_PRP_OFFSET;
        goto out;
    }
    uint64_t first = page - (prp1 & (page - 1));
    if (first > len)
        first = len;
    s[n++] = (struct seg){ prp1, (uint32_t)first };
    uint64_t rem = len - first;
    if (rem == 0)
        goto out;
    if (rem <= page) {
        if (prp2 & (page - 1)) {
            st = NVME_INVALID_PRP_OFFSET;
            goto out;
        }
        s[n++] = (struct seg){ prp2, (uint32_t)rem };
        goto out;
    }
    if (prp2 & 7) {
        st = NVME_INVALID_PRP_OFFSET;
        goto out;
    }
    list = malloc(page);
    if (!list) {
        st = NVME_INTERNAL_ERROR;
        goto out;
    }
    uint64_t lp = prp2, pages = 0;
    while (rem) {
        if (++pages > max) { /* list pages that only chain on: a loop */
            st = NVME_INVALID_FIELD;
            goto out;
        }
        uint64_t entries = (page - (lp & (page - 1))) / 8;
        uint64_t need = (rem + page - 1) / page;
        uint64_t take = need <= entries ? need : entries;
        if (c->be.dma_read(c->be.ctx, lp, list, take * 8)) {
            st = NVME_DATA_TRANSFER_ERROR;
            goto out;
        }
        for (uint64_t i = 0; i < take; i++) {
            uint64_t e = list[i];
            if (i == entries - 1 && need > entries) {
                if (e & (page - 1)) { /* chained list pointers start on a page */
                    st = NVME_INVALID_PRP_OFFSET;
                    goto out;
                }
                lp = e;
                break;
            }
            if (e & (page - 1)) {
                st = NVME_INVALID_PRP_OFFSET;
                goto out;
            }
            uint64_t l = rem < page ? rem : page;
            if (n >= max) {
                st = NVME_INTERNAL_ERROR;
                goto out;
            }
            s[n++] = (struct seg){ e, (uint32_t)l };
            rem -= l;
        }
    }
out:
    free(list);
    if (st) {
        free(s);
        return st;
    }
    *segs = s;
    *nseg = n;
    return NVME_SUCCESS;
}

/* Move len bytes between buf and the PRP-described host memory. */
uint16_t nvmc_prp_xfer(struct nvmc_ctrl *c, const struct nvme_sqe *sqe, void *buf,
                         uint64_t len, bool to_host)
{
    struct seg *segs;
    uint32_t n;
    uint16_t st = prp_map(c, sqe->prp1, sqe->prp2, len, &segs, &n);
    if (st)
        return st;
    char *p = buf;
    for (uint32_t i = 0; i < n && !st; i++) {
        int rc = to_host ? c->be.dma_write(c->be.ctx, segs[i].addr, p, segs[i].len)
                         : c->be.dma_read(c->be.ctx, segs[i].addr, p, segs[i].len);
        if (rc)
            st = NVME_DATA_TRANSFER_ERROR;
        p += segs[i].len;
    }
    free(segs);
    return st;
}

uint64_t nvmc_max_xfer(const struct nvmc_ctrl *c)
{
    return c->p.mdts ? (uint64_t)4096 << c->p.mdts : (uint64_t)NVMC_LBA_SIZE << 16;
}

