/*
 * This host's RAM for device DMA (sio_ram_alloc in include/ntblend/smartio.h): pieces the
 * agent allocates for the process (AGENT_ALLOC; gone with it), mapped into it by the backend
 * (ram), carved into page runs. Mapped for no device until sio_stream_map maps a run for one
 * (stream.c asks smartio_ram_phys where a buffer is). Also the page bitmaps both use.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sio_int.h"

#define POOL_PIECE (16ull << 20) /* the pool grows by at least this much at once ... */
#define POOL_PIECES 64           /* ... this many times */
#define PAGE 4096ull

static struct {
    pthread_mutex_t lock;
    struct rt *rt;
    struct piece {
        char *cpu;
        uint64_t phys, pages;
        uint64_t *busy;    /* a bit per page */
        uint32_t *run;     /* pages of the allocation starting at a page, 0: none */
    } p[POOL_PIECES];
    int n;
} pool = { .lock = PTHREAD_MUTEX_INITIALIZER };

static bool bit(const uint64_t *b, uint64_t i) { return b[i / 64] >> (i % 64) & 1; }

void smartio_bits(uint64_t *b, uint64_t i, uint64_t n, bool on)
{
    for (uint64_t k = i; k < i + n; k++)
        if (on)
            b[k / 64] |= 1ull << (k % 64);
        else
            b[k / 64] &= ~(1ull << (k % 64));
}

int64_t smartio_find_run(const uint64_t *b, uint64_t total, uint64_t n, uint64_t from)
{
    if (n > total)
        return -1;
    for (int pass = 0; pass < 2; pass++) {
        uint64_t i = pass ? 0 : from, end = pass ? from : total;
        while (i + n <= total && i < end + n) {
            if (b[i / 64] == UINT64_MAX && i % 64 == 0) {
                i += 64;
                continue;
            }
            uint64_t k = 0;
            while (k < n && !bit(b, i + k))
                k++;
            if (k == n)
                return (int64_t)i;
            i += k + 1;
        }
    }
    return -1;
}

/* A new piece of at least `len` bytes (pool.lock held): 0 or -errno. A host that cannot
 * spare a large piece gives what was asked for. */
static int grow(struct rt *rt, uint64_t len)
{
    if (pool.n == POOL_PIECES)
        return -ENOMEM;
    struct agent_rsp r;
    int rc = rt_call(rt, AGENT_ALLOC, len > POOL_PIECE ? len : POOL_PIECE, PAGE, &r);
    if (rc == -ENOMEM && len < POOL_PIECE)
        rc = rt_call(rt, AGENT_ALLOC, len, PAGE, &r);
    else if (!rc)
        len = len > POOL_PIECE ? len : POOL_PIECE;
    if (rc)
        return rc;
    struct piece *p = &pool.p[pool.n];
    p->cpu = rt->ops->ram(rt, rt->host, r.a, len);
    p->busy = p->cpu ? calloc((len / PAGE + 63) / 64, 8) : NULL;
    p->run = p->busy ? calloc(len / PAGE, sizeof *p->run) : NULL;
    if (!p->run) {
        free(p->busy);
        rt_call(rt, AGENT_FREE, r.a, 0, NULL);
        *p = (struct piece){ 0 };
        return -ENOMEM;
    }
    p->phys = r.a;
    p->pages = len / PAGE;
    pool.n++;
    return 0;
}

void *sio_ram_alloc(size_t size)
{
    if (!size || size > (1ull << 40)) {
        errno = size ? ENOMEM : EINVAL;
        return NULL;
    }
    uint64_t n = (size + PAGE - 1) / PAGE;
    pthread_mutex_lock(&pool.lock);
    if (!pool.rt)
        pool.rt = rt_get(); /* kept: the pool's pieces are the process's until it ends */
    int err = pool.rt ? 0 : -errno;
    void *out = NULL;
    for (int i = 0; pool.rt && !out; i++) {
        if (i == pool.n && (err = grow(pool.rt, n * PAGE)))
            break;
        struct piece *p = &pool.p[i];
        int64_t at = smartio_find_run(p->busy, p->pages, n, 0);
        if (at < 0)
            continue;
        smartio_bits(p->busy, (uint64_t)at, n, true);
        p->run[at] = (uint32_t)n;
        out = p->cpu + (uint64_t)at * PAGE;
    }
    pthread_mutex_unlock(&pool.lock);
    if (out)
        memset(out, 0, n * PAGE);
    else
        errno = -err;
    return out;
}

/* The piece holding [cpu, cpu + len), or NULL (pool.lock held). */
static struct piece *piece_of(const void *cpu, size_t len)
{
    for (int i = 0; i < pool.n; i++) {
        struct piece *p = &pool.p[i];
        uint64_t off = (uint64_t)((uintptr_t)cpu - (uintptr_t)p->cpu); /* huge when below */
        if (off < p->pages * PAGE && len <= p->pages * PAGE - off)
            return p;
    }
    return NULL;
}

int sio_ram_free(void *cpu)
{
    if (!cpu)
        return 0;
    pthread_mutex_lock(&pool.lock);
    struct piece *p = piece_of(cpu, 1);
    uint64_t off = p ? (uint64_t)((char *)cpu - p->cpu) : 0, at = off / PAGE;
    bool ours = p && off % PAGE == 0 && p->run[at];
    if (ours) {
        smartio_bits(p->busy, at, p->run[at], false);
        p->run[at] = 0;
    }
    pthread_mutex_unlock(&pool.lock);
    return ours ? 0 : -EINVAL;
}

int smartio_ram_phys(const void *cpu, size_t len, uint64_t *phys)
{
    pthread_mutex_lock(&pool.lock);
    const struct piece *p = len ? piece_of(cpu, len) : NULL;
    if (p)
        *phys = p->phys + (uint64_t)((const char *)cpu - p->cpu);
    pthread_mutex_unlock(&pool.lock);
    return p ? 0 : -EINVAL;
}

int sio_ram_addr(const void *cpu, size_t size, uint64_t *addr)
{
    return addr ? smartio_ram_phys(cpu, size, addr) : -EINVAL;
}
