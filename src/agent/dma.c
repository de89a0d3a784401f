/*
 * The adapters' DMA engines: one sleeping thread per channel executes the descriptors that
 * processes queue in shared memory, as the engine's own requester (IOMMU domain, requester-ID
 * checks), and signals completion through the channel's interrupt word.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"

#define ENGINE_POLL_NS 5000

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

struct engine {
    struct fab_dma_chan *ch;
    pthread_t thread;
};

static struct engine *engines;
static size_t nengines;

static void *engine_thread(void *arg)
{
    struct engine *e = arg;
    struct fab *f = agent.f;
    struct fab_dma_chan *ch = e->ch;
    uint64_t last_len = 0;
    while (!atomic_load(&agent.stop)) {
        uint64_t tail = atomic_load(&ch->tail);
        while (tail < atomic_load_explicit(&ch->head, memory_order_acquire)) {
            struct fab_dma_desc *d = &ch->ring[tail % FAB_DMA_RING];
            last_len = d->len;
            int rc = (atomic_load(&d->flags) & FAB_DMA_CANCEL)
                         ? -ECANCELED
                         : fab_dev_copy_queued(f, agent.host, ch->rid, d->dst, d->src, d->len,
                                                       d->submitted_ns);
            atomic_store_explicit(&d->status, rc, memory_order_release);
            atomic_store(&ch->tail, ++tail);
            atomic_fetch_add(&agent.dma_done, 1);
            atomic_fetch_add(&ch->done_seq, 1);
            if (atomic_load(&ch->waiters)) /* the completion interrupt, if anyone sleeps on it */
                fab_futex_wake(&ch->done_seq, INT_MAX);
        }
        /* A submitter streaming small descriptors usually has the next one ready within
         * microseconds: poll briefly before paying for a sleep and a cross-CPU wake-up. Not
         * after a large one (FAB_DMA_POLL_MAX or more): a submitter that keeps up with those
         * has queued the next before the last ended, and one that did not is seldom that
         * close, so the poll would only take the CPU from it. Idle engines sleep after
         * ENGINE_POLL_NS. */
        uint64_t until = last_len < FAB_DMA_POLL_MAX ? fab_now_ns() + ENGINE_POLL_NS : 0;
        while (tail == atomic_load(&ch->head) && fab_now_ns() < until)
            cpu_relax();
        if (tail != atomic_load(&ch->head))
            continue;
        /* Announce the sleep, then look once more: a submitter either sees engine_idle and
         * wakes us, or we see its descriptor here. */
        uint32_t seq = atomic_load(&ch->submit_seq);
        atomic_store(&ch->engine_idle, 1);
        if (tail == atomic_load(&ch->head) && !atomic_load(&agent.stop))
            fab_futex_wait(&ch->submit_seq, seq, -1);
        atomic_store(&ch->engine_idle, 0);
    }
    return NULL;
}

/* The CPUs `ntblend up --dma-cpus` gave the engines (false: none, they run anywhere). */
static bool dma_cpuset(cpu_set_t *set)
{
    const struct fab_ctl *ctl = agent.f->ctl;
    bool any = false;
    CPU_ZERO(set);
    for (int c = 0; c < FAB_CPU_WORDS * 64 && c < CPU_SETSIZE; c++)
        if (ctl->dma_cpus[c / 64] >> (c % 64) & 1) {
            CPU_SET(c, set);
            any = true;
        }
    return any;
}

int adma_start(void)
{
    struct fab *f = agent.f;
    const struct fab_host *h = fab_host(f, agent.host);
    size_t total = 0;
    for (uint32_t i = 0; i < h->nadapters; i++)
        total += fab_adapter(f, h->adapter_first + i)->dma_channels;
    cpu_set_t cpus;
    bool pinned = dma_cpuset(&cpus);
    engines = calloc(total ? total : 1, sizeof *engines);
    if (!engines)
        return -ENOMEM;
    for (uint32_t i = 0; i < h->nadapters; i++) {
        struct fab_adapter *a = fab_adapter(f, h->adapter_first + i);
        for (uint32_t c = 0; c < a->dma_channels; c++) {
            struct engine *e = &engines[nengines];
            e->ch = &fab_dma(f, a)[c];
            int rc = pthread_create(&e->thread, NULL, engine_thread, e);
            if (rc)
                return -rc;
            nengines++;
            char name[16];
            snprintf(name, sizeof name, "dma%u.%u", (unsigned char)i, (unsigned char)c); /* adapter, channel */
            pthread_setname_np(e->thread, name);
            if (pinned && (rc = pthread_setaffinity_np(e->thread, sizeof cpus, &cpus)))
                fprintf(stderr, "ntblend-agent[%s/%s]: cannot run DMA engine %s on the CPUs of "
                        "--dma-cpus (%s); it runs on any CPU\n", agent.fabric,
                        fab_host(f, agent.host)->name, name, strerror(rc));
        }
    }
    return 0;
}

void adma_stop(void)
{
    for (size_t i = 0; i < nengines; i++) {
        atomic_fetch_add(&engines[i].ch->submit_seq, 1);
        fab_futex_wake(&engines[i].ch->submit_seq, 1);
    }
    for (size_t i = 0; i < nengines; i++)
        pthread_join(engines[i].thread, NULL);
    free(engines);
    engines = NULL;
    nengines = 0;
}
