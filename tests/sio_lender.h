/*
 * sio_lender.h: for NVMe and SmartIO tests, the child process on a device's host that lends
 * out every device of its host and tells the parent (h_put(1)). Needs harness.h first.
 */
#ifndef NTBLEND_TESTS_SIO_LENDER_H
#define NTBLEND_TESTS_SIO_LENDER_H

#include "ntblend/seg.h"
#include "ntblend/smartio.h"

static void lender(void *arg)
{
    (void)arg;
    struct sio_info info[8];
    int n = sio_list(info, 8);
    CHECK(n >= 2);
    uint32_t node;
    CHECK_EQ(seg_local_node_id(&node), 0);
    for (int i = 0; i < n && i < 8; i++)
        if (info[i].node_id == node)
            CHECK_EQ(sio_set_available(info[i].id, true), 0);
    h_put(1);
}

#endif
