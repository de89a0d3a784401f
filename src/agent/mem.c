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

int amem_alloc(uint64_t size, uint64_t align, int32_t owner, uint64_t *phys)
{
    if (!size || size > (1ull << 48) || align < 4096 || (align & (align - 1)))
        return -EINVAL;
    size = align_up64(size, 4096);
    uint64_t ram = fab_host(agent.f, agent.host)->ram_size;
    int rc = -ENOMEM;
    pthread_mutex_lock(&agent.alloc_lock);
    /* First fit over the gaps between sorted blocks. */
    uint64_t cursor = FAB_MBOX_SIZE;
    size_t at = 0;
    for (;; at++) {
        uint64_t start = align_up64(cursor, align);
        uint64_t limit = at < agent.nblocks ? agent.blocks[at].phys : ram;
        if (start + size <= limit && start + size > start) {
            if (agent.nblocks == agent.cap) {
                size_t ncap = agent.cap ? agent.cap * 2 : 64;
                struct alloc_block *nb = realloc(agent.blocks, ncap * sizeof *nb);
                if (!nb)
                    break;
                agent.blocks = nb;
                agent.cap = ncap;
            }
            memmove(&agent.blocks[at + 1], &agent.blocks[at], (agent.nblocks - at) * sizeof *agent.blocks);
            agent.blocks[at] = (struct alloc_block){ .phys = start, .size = size, .owner = owner };
            agent.nblocks++;
            agent.allocated += size;
            *phys = start;
            rc = 0;
            break;
        }
        if (at >= agent.nblocks)
            break;
        cursor = agent.blocks[at].phys + agent.blocks[at].size;
    }
    pthread_mutex_unlock(&agent.alloc_lock);
    if (rc == 0) {
        /* Memory is handed out zeroed, as a fresh DMA allocation would be. */
        void *p = fab_ram(agent.f, agent.host, *phys, size);
        if (p)
            memset(p, 0, size);
    }
    return rc;
}

static void remove_at(size_t i)
{
    agent.allocated -= agent.blocks[i].size;
    memmove(&agent.blocks[i], &agent.blocks[i + 1], (agent.nblocks - i - 1) * sizeof *agent.blocks);
    agent.nblocks--;
}

int amem_free(uint64_t phys, int32_t owner)
{
    int rc = -ENOENT;
    pthread_mutex_lock(&agent.alloc_lock);
    for (size_t i = 0; i < agent.nblocks; i++)
        if (agent.blocks[i].phys == phys) {
            if (agent.blocks[i].owner != owner) {
                rc = -EPERM;
                break;
            }
            remove_at(i);
            rc = 0;
            break;
        }
    pthread_mutex_unlock(&agent.alloc_lock);
    return rc;
}

void amem_free_owner(int32_t owner)
{
    pthread_mutex_lock(&agent.alloc_lock);
    for (size_t i = agent.nblocks; i-- > 0;)
        if (agent.blocks[i].owner == owner)
            remove_at(i);
    pthread_mutex_unlock(&agent.alloc_lock);
}

int amem_retag(uint64_t phys, uint64_t size, int32_t from, int32_t to,
                uint64_t *len)
{
    int rc = -ENOENT;
    pthread_mutex_lock(&agent.alloc_lock);
    for (size_t i = 0; i < agent.nblocks; i++) {
        struct alloc_block *b = &agent.blocks[i];
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
    pthread_mutex_unlock(&agent.alloc_lock);
    return rc;
}

bool amem_owned(uint64_t phys, uint64_t len, int32_t owner, uint64_t *block, uint64_t *block_len)
{
    bool ok = false;
    pthread_mutex_lock(&agent.alloc_lock);
    for (size_t i = 0; i < agent.nblocks; i++) {
        const struct alloc_block *b = &agent.blocks[i];
        if (phys < b->phys || phys - b->phys >= b->size)
            continue;
        ok = b->owner == owner && len <= b->size - (phys - b->phys);
        if (ok && block)
            *block = b->phys;
        if (ok && block_len)
            *block_len = b->size;
        break;
    }
    pthread_mutex_unlock(&agent.alloc_lock);
    return ok;
}

void amem_usage(uint64_t *procs, uint64_t *tagged)
{
    *procs = *tagged = 0;
    pthread_mutex_lock(&agent.alloc_lock);
    for (size_t i = 0; i < agent.nblocks; i++)
        *(agent.blocks[i].owner > 0 ? procs : tagged) += agent.blocks[i].size;
    pthread_mutex_unlock(&agent.alloc_lock);
}

bool amem_check(void)
{
    uint64_t ram = fab_host(agent.f, agent.host)->ram_size, end = FAB_MBOX_SIZE, sum = 0;
    bool ok = true;
    pthread_mutex_lock(&agent.alloc_lock);
    for (size_t i = 0; i < agent.nblocks && ok; i++) {
        const struct alloc_block *b = &agent.blocks[i];
        ok = b->size && !((b->phys | b->size) & 4095) && b->phys >= end && b->phys < ram &&
             b->size <= ram - b->phys;
        end = b->phys + b->size;
        sum += b->size;
    }
    ok = ok && sum == agent.allocated && agent.nblocks <= agent.cap;
    pthread_mutex_unlock(&agent.alloc_lock);
    return ok;
}
