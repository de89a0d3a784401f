/*
 * Helpers the segment tests share (in children, on top of harness.h): open a descriptor,
 * export a segment, fill/check byte patterns that show a transfer landing shifted or short,
 * and see whether a mapping takes stores.
 */
#ifndef NTBLEND_TEST_SEG_UTIL_H
#define NTBLEND_TEST_SEG_UTIL_H

#include "harness.h"
#include "ntblend/seg.h"

seg_desc_t *sd_open(void);

/* A segment of `size` bytes, prepared and available on adapter 0. */
seg_local_t *export_seg(seg_desc_t *sd, uint32_t id, size_t size);

volatile uint8_t *map_local(seg_local_t *s, seg_map_t **m);

/* A segment of this process's own (not exported), mapped. */
volatile uint8_t *local_segment(seg_desc_t *sd, uint32_t id, size_t size,
                                seg_local_t **s, seg_map_t **m);

/* An owner's last steps: report its checks done, wait to be told to finish, tear down. */
void owner_finish(seg_desc_t *sd, seg_local_t *s, seg_map_t *m);

/* Byte i of the pattern `seed`. */
uint8_t pat(uint32_t seed, size_t i);

void fill(volatile uint8_t *p, size_t n, uint32_t seed);

/* Byte for byte; reports the first difference. */
void expect_pat(const volatile uint8_t *p, size_t n, uint32_t seed);

void expect_byte(const volatile uint8_t *p, size_t n, uint8_t v);

/* Does a store to p kill the process (a read-only mapping)? Tried in a throw-away child. */
bool store_faults(volatile uint8_t *p);

#endif
