/*
 * Bodies of the test helpers declared in seg_util.h (what that header says).
 */
#include <sys/resource.h>

#include "harness.h"
#include "seg_util.h"

seg_desc_t *sd_open(void)
{
    seg_desc_t *sd = NULL;
    CHECK_EQ(seg_open(&sd), 0);
    CHECK(sd);
    return sd;
}

seg_local_t *export_seg(seg_desc_t *sd, uint32_t id, size_t size)
{
    seg_local_t *s = NULL;
    CHECK_EQ(seg_create(sd, &s, id, size), 0);
    CHECK_EQ(seg_prepare(s, 0), 0);
    CHECK_EQ(seg_set_available(s, 0), 0);
    return s;
}

volatile uint8_t *map_local(seg_local_t *s, seg_map_t **m)
{
    volatile uint8_t *p = seg_map_local(s, 0, 0, 0, m);
    CHECK(p);
    return p;
}

volatile uint8_t *local_segment(seg_desc_t *sd, uint32_t id, size_t size,
                                seg_local_t **s, seg_map_t **m)
{
    CHECK_EQ(seg_create(sd, s, id, size), 0);
    return map_local(*s, m);
}

void owner_finish(seg_desc_t *sd, seg_local_t *s, seg_map_t *m)
{
    h_put(1);
    h_get();
    seg_unmap(m);
    seg_remove(s);
    seg_close(sd);
}

uint8_t pat(uint32_t seed, size_t i)
{
    return (uint8_t)(seed * 131u + i * 7u + (i >> 9));
}

void fill(volatile uint8_t *p, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = pat(seed, i);
}

void expect_pat(const volatile uint8_t *p, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != pat(seed, i)) {
            fprintf(stderr, "byte %zu is 0x%02x, expected 0x%02x (seed %u)\n", i, p[i],
                    pat(seed, i), seed);
            CHECK(!"pattern mismatch");
        }
}

void expect_byte(const volatile uint8_t *p, size_t n, uint8_t v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v) {
            fprintf(stderr, "byte %zu is 0x%02x, expected 0x%02x\n", i, p[i], v);
            CHECK(!"unexpected byte");
        }
}

bool store_faults(volatile uint8_t *p)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit no_core = { 0, 0 };
        setrlimit(RLIMIT_CORE, &no_core);
        signal(SIGSEGV, SIG_DFL); /* not cmocka's handler, inherited from the parent */
        signal(SIGBUS, SIG_DFL);
        *p = 0x5a;
        _exit(0);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFSIGNALED(st) && (WTERMSIG(st) == SIGSEGV || WTERMSIG(st) == SIGBUS);
}
