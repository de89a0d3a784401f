/*
 * libnvm_bench: 4 KiB random reads through libnvm (github enfiskutensykkel/ssd-gpu-dma) over
 * ntblend's SISCI, as nvme_bench does them through libntbnvme: the same controller set-up
 * (reset, one I/O queue pair in this host's memory), the same reads, the same figures. For
 * scripts/bench-sisci.sh, which builds it against the libnvm snapshot it unpacks (libnvm is
 * not part of ntblend: this file is not in the CMake build).
 *
 * Usage: ntblend run --host H -- libnvm_bench FDID QD SECONDS
 * Prints one JSON object: {"qd":..,"ios":..,"iops":..,"lat_median_ns":..}.
 */
#define _GNU_SOURCE
#include <nvm_admin.h>
#include <nvm_aq.h>
#include <nvm_cmd.h>
#include <nvm_ctrl.h>
#include <nvm_dma.h>
#include <nvm_error.h>
#include <nvm_queue.h>
#include <nvm_types.h>
#include <nvm_util.h>
#include <sisci_api.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_QD 64
#define LAT_MAX (1u << 22)

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void die(const char *what, int status)
{
    fprintf(stderr, "libnvm_bench: %s: %s\n", what, nvm_strerror(status));
    exit(1);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: ntblend run --host H -- libnvm_bench FDID QD SECONDS\n");
        return 2;
    }
    uint64_t fdid = strtoull(argv[1], NULL, 0);
    unsigned qd = (unsigned)atoi(argv[2]);
    double secs = atof(argv[3]);
    if (qd < 1 || qd > MAX_QD || secs <= 0) {
        fprintf(stderr, "libnvm_bench: QD 1..%d, SECONDS > 0\n", MAX_QD);
        return 2;
    }
    sci_error_t err;
    SCIInitialize(0, &err);
    if (err != SCI_ERR_OK) {
        fprintf(stderr, "libnvm_bench: %s\n", SCIGetErrorString(err));
        return 1;
    }
    nvm_ctrl_t *ctrl;
    nvm_dma_t *aq_mem, *cq_mem, *sq_mem, *data;
    nvm_aq_ref aq;
    int st;
    if ((st = nvm_dis_ctrl_init(&ctrl, fdid, 0)))
        die("controller", st);
    uint32_t seg = 0x5000 + (uint32_t)getpid() % 0x1000 * 4; /* segment ids of our own */
    if ((st = nvm_dis_dma_create(&aq_mem, ctrl, 0, seg++, ctrl->page_size * 3)))
        die("admin queue memory", st);
    memset(aq_mem->vaddr, 0, ctrl->page_size * 3);
    if ((st = nvm_aq_create(&aq, ctrl, aq_mem)))
        die("reset", st);
    struct nvm_ns_info ns;
    if ((st = nvm_admin_ns_info(aq, &ns, 1, NVM_DMA_OFFSET(aq_mem, 2), aq_mem->ioaddrs[2])))
        die("identify namespace", st);
    if ((st = nvm_admin_set_num_queues(aq, 1, 1)))
        die("number of queues", st);
    if ((st = nvm_dis_dma_create(&cq_mem, ctrl, 0, seg++, ctrl->page_size)) ||
        (st = nvm_dis_dma_create(&sq_mem, ctrl, 0, seg++, ctrl->page_size)) ||
        (st = nvm_dis_dma_create(&data, ctrl, 0, seg++, 4096 * MAX_QD)))
        die("queue and data memory", st);
    memset(cq_mem->vaddr, 0, ctrl->page_size);
    memset(sq_mem->vaddr, 0, ctrl->page_size);
    nvm_queue_t cq, sq;
    if ((st = nvm_admin_cq_create(aq, &cq, 1, cq_mem->vaddr, cq_mem->ioaddrs[0])) ||
        (st = nvm_admin_sq_create(aq, &sq, &cq, 1, sq_mem->vaddr, sq_mem->ioaddrs[0])))
        die("I/O queues", st);

    uint64_t blocks = ns.size * ns.lba_data_size / 4096, per = 4096 / ns.lba_data_size;
    uint64_t *lat = malloc(LAT_MAX * sizeof *lat), started[65536];
    if (!lat)
        return 1;
    srand48(1);
    uint64_t ios = 0, inflight = 0, nlat = 0, warm = 1000;
    uint64_t t0 = 0, end = 0;
    for (;;) {
        /* keep qd commands in flight */
        while (inflight < qd) {
            nvm_cmd_t *cmd = nvm_sq_enqueue(&sq);
            if (!cmd)
                break;
            uint16_t cid = (uint16_t)NVM_DEFAULT_CID(&sq);
            unsigned slot = cid % qd;
            nvm_cmd_header(cmd, cid, NVM_IO_READ, 1);
            nvm_cmd_rw_blks(cmd, (uint64_t)(lrand48() % (long)blocks) * per, (uint16_t)per);
            nvm_cmd_data_ptr(cmd, data->ioaddrs[0] + 4096ull * slot, 0);
            started[cid] = now_ns();
            inflight++;
        }
        nvm_sq_submit(&sq);
        /* wait as nvme_bench does: poll 20 us, then yield the CPU between polls */
        nvm_cpl_t *cpl;
        uint64_t w0 = now_ns();
        while (!(cpl = nvm_cq_dequeue(&cq)))
            if (now_ns() - w0 > 20000)
                sched_yield();
        uint64_t t = now_ns();
        bool done = false;
        for (; cpl; cpl = nvm_cq_dequeue(&cq)) { /* every completion there, one doorbell */
            if (!NVM_ERR_OK(cpl))
                die("read", NVM_ERR_PACK(cpl, 0));
            uint16_t cid = *NVM_CPL_CID(cpl);
            nvm_sq_update(&sq);
            inflight--;
            if (warm) {
                if (--warm == 0) {
                    t0 = now_ns();
                    end = t0 + (uint64_t)(secs * 1e9);
                }
                continue;
            }
            ios++;
            if (nlat < LAT_MAX)
                lat[nlat++] = t - started[cid];
            done = t >= end;
        }
        nvm_cq_update(&cq);
        if (done)
            break;
    }
    double elapsed = (double)(now_ns() - t0) / 1e9;
    while (inflight) { /* drain */
        if (nvm_cq_dequeue(&cq)) {
            nvm_sq_update(&sq);
            nvm_cq_update(&cq);
            inflight--;
        }
    }
    qsort(lat, nlat, sizeof *lat, cmp_u64);
    printf("{\"qd\":%u,\"ios\":%llu,\"iops\":%.0f,\"lat_median_ns\":%llu}\n", qd,
           (unsigned long long)ios, (double)ios / elapsed, (unsigned long long)lat[nlat / 2]);
    nvm_admin_sq_delete(aq, &sq, &cq);
    nvm_admin_cq_delete(aq, &cq);
    nvm_dma_unmap(data);
    nvm_dma_unmap(sq_mem);
    nvm_dma_unmap(cq_mem);
    nvm_aq_destroy(aq);
    nvm_dma_unmap(aq_mem);
    nvm_ctrl_free(ctrl);
    SCITerminate();
    free(lat);
    return 0;
}
