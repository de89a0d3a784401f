/*
 * The host's physical-memory allocator: DMA-able memory for the processes on this host. RAM
 * below FAB_MBOX_SIZE is the agents' mailboxes and never handed out. Blocks belong to the
 * client process that asked; they are freed when it hangs up (or dies).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"

struct alloc_block {
    uint64_t phys, size;
    int32_t owner;
};

static uint64_t align_up64(uint64_t v, uint64_t a) { return (v + a - 1) & ~(a - 1); }

int agent_alloc(struct agent *ag, uint64_t size, uint64_t align, int32_t owner, uint64_t *phys)
{
    if (!size || size > (1ull << 48) || align < 4096 || (align & (align - 1)))
        return -EINVAL;
    size = align_up64(size, 4096);
    uint64_t ram = fab_host(ag->f, ag->host)->ram_size;
    int rc = -ENOMEM;
    pthread_mutex_lock(&ag->alloc_lock);
    /* First fit over the gaps between sorted blocks. */
    uint64_t cursor = FAB_MBOX_SIZE;
    size_t at = 0;
    for (;; at++) {
        uint64_t start = align_up64(cursor, align);
        uint64_t limit = at < ag->nblocks ? ag->blocks[at].phys : ram;
        if (start + size <= limit && start + size > start) {
            if (ag->nblocks == ag->cap) {
                size_t ncap = ag->cap ? ag->cap * 2 : 64;
                struct alloc_block *nb = realloc(ag->blocks, ncap * sizeof *nb);
                if (!nb)
                    break;
                ag->blocks = nb;
                ag->cap = ncap;
            }
            memmove(&ag->blocks[at + 1], &ag->blocks[at], (ag->nblocks - at) * sizeof *ag->blocks);
            ag->blocks[at] = (struct alloc_block){ .phys = start, .size = size, .owner = owner };
            ag->nblocks++;
            ag->allocated += size;
            *phys = start;
            rc = 0;
            break;
        }
        if (at >= ag->nblocks)
            break;
        cursor = ag->blocks[at].phys + ag->blocks[at].size;
    }
    pthread_mutex_unlock(&ag->alloc_lock);
    if (rc == 0) {
        /* Memory is handed out zeroed, as a fresh DMA allocation would be. */
        void *p = fab_ram(ag->f, ag->host, *phys, size);
        if (p)
            memset(p, 0, size);
    }
    return rc;
}

static void remove_at(struct agent *ag, size_t i)
{
    ag->allocated -= ag->blocks[i].size;
    memmove(&ag->blocks[i], &ag->blocks[i + 1], (ag->nblocks - i - 1) * sizeof *ag->blocks);
    ag->nblocks--;
}

int agent_free(struct agent *ag, uint64_t phys, int32_t owner)
{
    int rc = -ENOENT;
    pthread_mutex_lock(&ag->alloc_lock);
    for (size_t i = 0; i < ag->nblocks; i++)
        if (ag->blocks[i].phys == phys) {
            if (ag->blocks[i].owner != owner) {
                rc = -EPERM;
                break;
            }
            remove_at(ag, i);
            rc = 0;
            break;
        }
    pthread_mutex_unlock(&ag->alloc_lock);
    return rc;
}

void agent_free_owner(struct agent *ag, int32_t owner)
{
    pthread_mutex_lock(&ag->alloc_lock);
    for (size_t i = ag->nblocks; i-- > 0;)
        if (ag->blocks[i].owner == owner)
            remove_at(ag, i);
    pthread_mutex_unlock(&ag->alloc_lock);
}

int agent_retag(struct agent *ag, uint64_t phys, uint64_t size, int32_t from, int32_t to,
                uint64_t *len)
{
    int rc = -ENOENT;
    pthread_mutex_lock(&ag->alloc_lock);
    for (size_t i = 0; i < ag->nblocks; i++) {
        struct alloc_block *b = &ag->blocks[i];
        if (phys < b->phys || phys - b->phys >= b->size)
            continue;
        if (b->owner != from)
            rc = -EPERM;
        else if (phys != b->phys || size > b->size)
            rc = -EINVAL; /* a segment takes a whole allocation */
        else {
            b->owner = to;
            *len = b->size;
            rc = 0;
        }
        break;
    }
    pthread_mutex_unlock(&ag->alloc_lock);
    return rc;
}
