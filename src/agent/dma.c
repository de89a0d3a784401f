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
#include "wpol.h"

#define ENGINE_POLL_NS 5000

struct engine {
    struct fab_dma_chan *ch;
    pthread_t thread;
};

static struct engine *engines;
static size_t nengines;

struct queue_wait {
    struct fab_dma_chan *ch;
    uint64_t tail;
};

static bool queued(void *arg)
{
    struct queue_wait *q = arg;
    return atomic_load_explicit(&q->ch->head, memory_order_acquire) != q->tail ||
           atomic_load(&agent.stop);
}

static void *engine_thread(void *arg)
{
    struct engine *e = arg;
    struct fab *f = agent.f;
    struct fab_dma_chan *ch = e->ch;
    /* A submitter streaming small descriptors usually has the next one ready within
     * microseconds: the wait policy (src/wait) spins up to ENGINE_POLL_NS for it, as long as
     * that pays, before a sleep and a cross-CPU wake-up. Not after a large one (FAB_DMA_POLL_MAX
     * or more): a submitter that keeps up with those has queued the next before the last ended,
     * and one that did not is seldom that close, so a spin would only take the CPU from it.
     * Asleep, the engine counts in engine_idle; a submitter wakes it on submit_seq. */
    struct wpol_site small = WPOL_SITE("DMA engine", ENGINE_POLL_NS, 0);
    struct wpol_site large = WPOL_SITE("DMA engine (after a large copy)", 0, 0);
    struct queue_wait q = { ch, 0 };
    const struct wpol_how how = { .ready = queued, .arg = &q, .word = &ch->submit_seq,
                                  .sleepers = &ch->engine_idle, .sleep_ns = 1000000000 };
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
        q.tail = tail;
        wpol_wait(last_len < FAB_DMA_POLL_MAX ? &small : &large, &how);
    }
    wpol_site_done(&small);
    wpol_site_done(&large);
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
