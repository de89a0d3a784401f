/*
 * Bodies of the test helpers declared in nvme_tests.h (what that header says).
 */
#include "harness.h"
#include "ntblend/seg.h"
#include "ntblend/smartio.h"
#include "nvme_tests.h"

void lender(void *arg)
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

uint8_t pattern(uint32_t tag, uint64_t lba, size_t i)
{
    uint64_t x = (lba + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)tag << 40 ^ i / 8;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 32;
    return (uint8_t)(x >> (8 * (i % 8)));
}
