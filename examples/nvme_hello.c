/*
 * nvme_hello: the example of docs/nvme-driver.md. Borrows an NVMe, writes a block, reads it
 * back synchronously, then reads 8 blocks asynchronously with a completion callback.
 *
 *   ntblend device add nvme0
 *   ntblend run --host b -- nvme_hello [DEVICE]
 */
#include <stdio.h>
#include <string.h>

#include "ntblend/nvme.h"

static void done(void *arg, const struct nvme_cpl *cpl)
{
    int *left = arg;
    if (cpl->rc)
        fprintf(stderr, "a read failed: status %#x\n", cpl->status);
    (*left)--;
}

int main(int argc, char **argv)
{
    const char *name = argc > 1 ? argv[1] : "nvme0";
    nvme_dev_t *d;
    if (nvme_open(name, NULL, &d)) {
        fprintf(stderr, "nvme_hello: %s\n", nvme_errmsg());
        return 1;
    }
    struct nvme_ctrl_info ci;
    struct nvme_ns_info ns;
    nvme_ctrl_info(d, &ci);
    if (nvme_ns_info(d, 1, &ns)) {
        fprintf(stderr, "nvme_hello: %s\n", nvme_errmsg());
        nvme_close(d);
        return 1;
    }
    printf("%s: %s, namespace 1: %llu blocks of %u bytes\n", name, ci.model,
           (unsigned long long)ns.blocks, ns.block_size);

    /* A queue pair: the SQ near the device (it reads it), the CQ here (we poll it). */
    struct nvme_qpair_opts qo = { .depth = 64, .sq_place = NVME_PLACE_DEVICE,
                                  .cq_place = NVME_PLACE_LOCAL };
    nvme_qpair_t *qp;
    char *buf = NULL;
    int rc = nvme_qpair_create(d, &qo, &qp);
    if (!rc && !(buf = nvme_buf_alloc(d, NULL, 8 * (size_t)ns.block_size)))
        rc = -1;
    if (rc) {
        fprintf(stderr, "nvme_hello: %s\n", nvme_errmsg());
        nvme_close(d);
        return 1;
    }

    /* Synchronous: write block 0, read it back. */
    snprintf(buf, ns.block_size, "hello from %s", name);
    rc = nvme_write(qp, 1, 0, 1, buf);
    memset(buf, 0, ns.block_size);
    if (!rc)
        rc = nvme_read(qp, 1, 0, 1, buf);
    if (rc) {
        fprintf(stderr, "nvme_hello: %s\n", nvme_errmsg());
        nvme_close(d);
        return 1;
    }
    printf("block 0 reads back: \"%s\"\n", buf);

    /* Asynchronous: 8 reads in flight, one doorbell, callbacks as they complete. */
    int left = 0;
    for (int i = 0; i < 8; i++)
        if (!nvme_submit(qp, NVME_OP_READ, 1, (uint64_t)i, 1, buf + (size_t)i * ns.block_size,
                         NVME_SUBMIT_DEFER, done, &left))
            left++;
    while (left > 0 && nvme_qpair_wait(qp, -1) > 0) /* rings the doorbell, then waits */
        ;
    printf("8 asynchronous reads: %s\n", left ? "some failed to complete" : "done");

    nvme_buf_free(d, buf);
    nvme_qpair_delete(qp);
    return nvme_close(d) || left ? 1 : 0;
}
