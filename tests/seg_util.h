/*
 * Helpers the segment tests share (in children, on top of harness.h): open a descriptor,
 * export a segment, and fill/check byte patterns that show a transfer landing shifted or
 * short.
 */
#ifndef NTBLEND_TEST_SEG_UTIL_H
#define NTBLEND_TEST_SEG_UTIL_H

#include "harness.h"
#include "ntblend/seg.h"

static inline seg_desc_t *sd_open(void)
{
    seg_desc_t *sd = NULL;
    CHECK_EQ(seg_open(&sd), 0);
    CHECK(sd);
    return sd;
}

/* A segment of `size` bytes, prepared and available on adapter 0. */
static inline seg_local_t *export_seg(seg_desc_t *sd, uint32_t id, size_t size)
{
    seg_local_t *s = NULL;
    CHECK_EQ(seg_create(sd, &s, id, size), 0);
    CHECK_EQ(seg_prepare(s, 0), 0);
    CHECK_EQ(seg_set_available(s, 0), 0);
    return s;
}

static inline volatile uint8_t *map_local(seg_local_t *s, seg_map_t **m)
{
    volatile uint8_t *p = seg_map_local(s, 0, 0, 0, m);
    CHECK(p);
    return p;
}

/* A segment of this process's own (not exported), mapped. */
static inline volatile uint8_t *local_segment(seg_desc_t *sd, uint32_t id, size_t size,
                                              seg_local_t **s, seg_map_t **m)
{
    CHECK_EQ(seg_create(sd, s, id, size), 0);
    return map_local(*s, m);
}

/* An owner's last steps: report its checks done, wait to be told to finish, tear down. */
static inline void owner_finish(seg_desc_t *sd, seg_local_t *s, seg_map_t *m)
{
    h_put(1);
    h_get();
    seg_unmap(m);
    seg_remove(s);
    seg_close(sd);
}

/* Byte i of the pattern `seed`. */
static inline uint8_t pat(uint32_t seed, size_t i)
{
    return (uint8_t)(seed * 131u + i * 7u + (i >> 9));
}

static inline void fill(volatile uint8_t *p, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = pat(seed, i);
}

/* Byte for byte; reports the first difference. */
static inline void expect_pat(const volatile uint8_t *p, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != pat(seed, i)) {
            fprintf(stderr, "byte %zu is 0x%02x, expected 0x%02x (seed %u)\n", i, p[i],
                    pat(seed, i), seed);
            CHECK(!"pattern mismatch");
        }
}

static inline void expect_byte(const volatile uint8_t *p, size_t n, uint8_t v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v) {
            fprintf(stderr, "byte %zu is 0x%02x, expected 0x%02x\n", i, p[i], v);
            CHECK(!"unexpected byte");
        }
}

#endif
