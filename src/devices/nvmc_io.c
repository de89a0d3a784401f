/*
 * The NVMe controller core, I/O commands (read, write, flush, write zeroes, dataset
 * management) against the namespaces' backing files (NVMe 1.4 §6), and nvmc_exec, which
 * dispatches any command.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nvmc_int.h"

/* ---------------------------------------------------------------- NVM commands */

static uint16_t lba_check(const struct nvmc_ctrl *c, uint64_t slba, uint64_t nlb)
{
    return slba > c->nlba || nlb > c->nlba - slba ? NVME_LBA_RANGE : NVME_SUCCESS;
}

static int ns_fd(const struct nvmc_ctrl *c, uint32_t nsid)
{
    return c->ns_fd ? c->ns_fd[nsid - 1] : -1;
}

static uint16_t zero_range(int fd, uint64_t slba, uint64_t nlb)
{
    off_t off = (off_t)(slba << NVMC_LBA_SHIFT), len = (off_t)(nlb << NVMC_LBA_SHIFT);
    if (fd < 0)
        return NVME_WRITE_FAULT;
    if (len == 0 || fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, len) == 0)
        return NVME_SUCCESS;
    static const char zeros[65536];
    while (len > 0) {
        size_t n = len < (off_t)sizeof zeros ? (size_t)len : sizeof zeros;
        ssize_t w = pwrite(fd, zeros, n, off);
        if (w <= 0)
            return NVME_WRITE_FAULT;
        off += w;
        len -= w;
    }
    return NVME_SUCCESS;
}

static uint16_t rw(struct nvmc_ctrl *c, const struct nvme_sqe *sqe, bool write)
{
    uint64_t slba = (uint64_t)sqe->cdw11 << 32 | sqe->cdw10;
    uint64_t nlb = (sqe->cdw12 & 0xffff) + 1ull, len = nlb << NVMC_LBA_SHIFT;
    bool fua = sqe->cdw12 & (1u << 30);
    if (len > nvmc_max_xfer(c))
        return NVME_INVALID_FIELD;
    uint16_t st = lba_check(c, slba, nlb);
    if (st)
        return st;
    int fd = ns_fd(c, sqe->nsid);
    off_t off = (off_t)(slba << NVMC_LBA_SHIFT);
    const uint8_t *map = c->ns_map ? c->ns_map[sqe->nsid - 1] : NULL;
    if (!write && map) {
        /* The medium mapped: one copy, from the page cache straight to the host's buffer.
         * (Writes go through pwrite, which reports a full disk as a write fault.) */
        st = nvmc_prp_xfer(c, sqe, (void *)(map + off), len, true);
        if (!st) {
            c->read_cmds++;
            c->units_read += nlb * (NVMC_LBA_SIZE / 512);
        }
        return st;
    }
    char *buf = malloc(len);
    if (!buf)
        return NVME_INTERNAL_ERROR;
    if (write) {
        st = nvmc_prp_xfer(c, sqe, buf, len, false);
        if (!st) {
            if (fd < 0 || pwrite(fd, buf, len, off) != (ssize_t)len ||
                ((fua || !c->feat[NVME_FEAT_VWC]) && fdatasync(fd))) {
                st = NVME_WRITE_FAULT;
                c->media_errors++;
            } else {
                c->write_cmds++;
                c->units_written += nlb * (NVMC_LBA_SIZE / 512);
            }
        }
    } else {
        if (fd < 0 || pread(fd, buf, len, off) != (ssize_t)len) {
            st = NVME_UNRECOVERED_READ;
            c->media_errors++;
        } else {
            st = nvmc_prp_xfer(c, sqe, buf, len, true);
            if (!st) {
                c->read_cmds++;
                c->units_read += nlb * (NVMC_LBA_SIZE / 512);
            }
        }
    }
    free(buf);
    return st;
}

static uint16_t dsm(struct nvmc_ctrl *c, const struct nvme_sqe *sqe)
{
    uint32_t nr = (sqe->cdw10 & 0xff) + 1;
    bool ad = sqe->cdw11 & (1u << 2);
    uint8_t ranges[256 * 16];
    uint16_t st = nvmc_prp_xfer(c, sqe, ranges, nr * 16ull, false);
    if (st || !ad)
        return st;
    for (uint32_t i = 0; i < nr; i++) {
        uint32_t nlb;
        uint64_t slba;
        memcpy(&nlb, ranges + 16 * i + 4, 4);
        memcpy(&slba, ranges + 16 * i + 8, 8);
        if ((st = lba_check(c, slba, nlb)))
            return st;
    }
    for (uint32_t i = 0; i < nr; i++) {
        uint32_t nlb;
        uint64_t slba;
        memcpy(&nlb, ranges + 16 * i + 4, 4);
        memcpy(&slba, ranges + 16 * i + 8, 8);
        if ((st = zero_range(ns_fd(c, sqe->nsid), slba, nlb)))
            return st;
    }
    return NVME_SUCCESS;
}

static uint16_t nvm(struct nvmc_ctrl *c, const struct nvme_sqe *sqe)
{
    switch (sqe->opc) {
    case NVME_CMD_FLUSH: case NVME_CMD_WRITE: case NVME_CMD_READ: case NVME_CMD_WRITE_ZEROES:
    case NVME_CMD_DSM:
        break;
    default:
        return NVME_INVALID_OPCODE;
    }
    if (sqe->opc == NVME_CMD_FLUSH && sqe->nsid == 0xffffffffu) {
        nvmc_flush_all(c);
        return NVME_SUCCESS;
    }
    if (sqe->nsid == 0 || sqe->nsid > c->p.namespaces)
        return NVME_INVALID_NAMESPACE;
    switch (sqe->opc) {
    case NVME_CMD_FLUSH: {
        int fd = ns_fd(c, sqe->nsid);
        return fd >= 0 && fsync(fd) ? NVME_WRITE_FAULT : NVME_SUCCESS;
    }
    case NVME_CMD_WRITE:
    case NVME_CMD_READ:
        return rw(c, sqe, sqe->opc == NVME_CMD_WRITE);
    case NVME_CMD_WRITE_ZEROES: {
        uint64_t slba = (uint64_t)sqe->cdw11 << 32 | sqe->cdw10;
        uint64_t nlb = (sqe->cdw12 & 0xffff) + 1ull;
        uint16_t st = lba_check(c, slba, nlb);
        if (st)
            return st;
        int fd = ns_fd(c, sqe->nsid);
        st = zero_range(fd, slba, nlb);
        if (!st && (sqe->cdw12 & (1u << 30)) && fdatasync(fd))
            st = NVME_WRITE_FAULT;
        return st;
    }
    default:
        return dsm(c, sqe);
    }
}

bool nvmc_exec(struct nvmc_ctrl *c, uint16_t sqid, const struct nvme_sqe *sqe,
               struct nvme_cqe *cqe)
{
    memset(cqe, 0, sizeof *cqe);
    cqe->cid = sqe->cid;
    cqe->sqid = sqid;
    /* No fused operations, PRPs only (PSDT 0). */
    if (sqe->flags & 0x03) {
        cqe->status = NVME_INVALID_FIELD;
        return true;
    }
    if (sqe->flags & 0xc0) {
        cqe->status = NVME_INVALID_FIELD;
        return true;
    }
    if (sqid == 0)
        return nvmc_admin(c, sqe, cqe);
    cqe->status = nvm(c, sqe);
    return true;
}
