/*
 * nvme_tests.h: what the NVMe tests share. lender(): the child process on a device's host
 * that lends out every device of its host and tells the parent (h_put(1)); pattern(): byte i
 * of the data written at lba, different for every tag.
 */
#ifndef NTBLEND_TESTS_NVME_TESTS_H
#define NTBLEND_TESTS_NVME_TESTS_H

#include <stddef.h>
#include <stdint.h>

void lender(void *arg);

uint8_t pattern(uint32_t tag, uint64_t lba, size_t i);

#endif
