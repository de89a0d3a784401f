/*
 * Device lending's leases (smartio-tocs-2021 §4): when a borrower's host dies or reboots, its
 * borrows end (an exclusively borrowed device is reset and taken back), the IOMMU mappings it
 * asked of us go, and so do the segments placed here for it; a lender that goes takes its
 * functions out of our tree. A watcher runs the sweep on link events and every second. Also
 * the start of lending: the mailbox handlers of lend.c and lend_inbound.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lend_int.h"

/* Is a host that had boot generation `boot` when it asked us for something gone since? */
bool lend_host_gone(const struct fab *f, uint32_t host, uint32_t boot)
{
    const struct fab_host *h = fab_host(f, host);
    return atomic_load(&h->state) == FAB_HOST_DOWN || atomic_load(&h->boot_gen) != boot;
}

/* What the lease sweep last saw of each host: its boot generation and whether it was down. */
static uint32_t *lease_boot;
static bool *lease_dead;

/* A host died or rebooted: its borrows end (smartio: the lender resets and reclaims the
 * device), the IOMMU mappings it asked us for go, and so do the segments we created for it. */
void alend_sweep(void)
{
    struct fab *f = agent.f;
    uint32_t nhosts = f->ctl->nhosts;
    pthread_mutex_lock(&lending.lock);
    for (struct lend *l = lending.lends, *next; l; l = next) {
        next = l->next;
        if (l->host != agent.host && lend_host_gone(f, l->host, l->boot))
            lend_drop(l->fn, l->host);
    }
    for (struct inbound **pp = &lending.inbounds; *pp;) {
        if (lend_host_gone(f, (*pp)->host, (*pp)->boot)) {
            (*pp)->count = 1;
            lend_inbound_put(pp); /* unlinks it */
        } else {
            pp = &(*pp)->next;
        }
    }
    pthread_mutex_unlock(&lending.lock);
    /* Memory placed here for a gone host goes too (outside the lock: it notifies). */
    for (uint32_t h = 0; h < nhosts; h++) {
        if (h == agent.host)
            continue;
        const struct fab_host *hs = fab_host(f, h);
        uint32_t gen = atomic_load(&hs->boot_gen);
        bool down = atomic_load(&hs->state) == FAB_HOST_DOWN;
        if ((down && !lease_dead[h]) || (!down && !lease_dead[h] && gen != lease_boot[h])) {
            aplace_host_gone(h); /* once per life */
            ahot_host_gone(h);
        }
        lease_dead[h] = down;
        if (!down)
            lease_boot[h] = gen;
    }
}

/* Runs the sweep when reachability of our first port changes, and every second in any case
 * (a host behind another port, a reboot quicker than a link event). */
static void *lease_watcher(void *arg)
{
    static struct wpol_site site = WPOL_SITE("agent lease watcher", 0, 0); /* sleeps only */
    (void)arg;
    const struct fab_host *self = fab_host(agent.f, agent.host);
    if (!self->nadapters)
        return NULL;
    _Atomic uint32_t *seq = &fab_adapter(agent.f, self->adapter_first)->link_seq;
    while (!atomic_load(&agent.stop)) {
        uint32_t now = atomic_load(seq);
        alend_sweep();
        agent_wait_word(&site, seq, now, 1000000000ull);
    }
    return NULL;
}

int alend_register(void)
{
    struct fab *f = agent.f;
    uint32_t nhosts = f->ctl->nhosts;
    lease_boot = calloc(nhosts, sizeof *lease_boot);
    lease_dead = calloc(nhosts, sizeof *lease_dead);
    if (!lease_boot || !lease_dead)
        return -ENOMEM;
    for (uint32_t h = 0; h < nhosts; h++) {
        lease_boot[h] = atomic_load(&fab_host(f, h)->boot_gen);
        lease_dead[h] = atomic_load(&fab_host(f, h)->state) == FAB_HOST_DOWN;
    }
    lend_register_lender();
    lend_register_inbound();
    return 0;
}

int alend_start(void)
{
    int rc = alend_register();
    return rc ? rc : -pthread_create(&lending.watcher, NULL, lease_watcher, NULL);
}

void alend_stop(void)
{
    const struct fab_host *self = fab_host(agent.f, agent.host);
    if (self->nadapters) {
        _Atomic uint32_t *seq = &fab_adapter(agent.f, self->adapter_first)->link_seq;
        atomic_fetch_add(seq, 1);
        fab_futex_wake(seq, 64);
    }
    pthread_join(lending.watcher, NULL);
}
