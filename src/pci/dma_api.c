/*
 * The driver model's DMA API (include/ntblend/pci.h), Linux's names over the platform's
 * addresses: coherent memory (the CPU and the device share it), host memory for streaming
 * buffers (dma_host_alloc) and its mappings around each I/O (dma_map_single, dma_map_sg),
 * and another bound function's BAR for peer-to-peer DMA (dma_map_resource). What address a
 * device reaches memory by is the platform's business (pci_int.h); this file keeps what each
 * function holds, so that it goes when the function does.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "pci_int.h"

struct pdm_coherent {
    struct pdm_coherent *next;
    void *cpu;
    void *mem;            /* the platform's */
};

struct pdm_peer_map {
    struct pdm_peer_map *next;
    dma_addr_t addr;      /* what the driver got */
    void *map;            /* the platform's */
};

static dma_addr_t map_error(int rc)
{
    errno = rc < 0 ? -rc : rc;
    return DMA_MAPPING_ERROR;
}

/* ---------------------------------------------------------------- coherent memory */

void *dma_alloc_coherent(struct pci_dev *d, size_t size, dma_addr_t *handle)
{
    if (!d || !size || !handle) {
        errno = EINVAL;
        return NULL;
    }
    struct pdm_coherent *c = calloc(1, sizeof *c);
    if (!c) {
        errno = ENOMEM;
        return NULL;
    }
    c->cpu = pdm_host()->coherent_alloc(d, size, handle, &c->mem);
    if (!c->cpu) {
        int e = errno;
        free(c);
        errno = e;
        return NULL;
    }
    pthread_mutex_lock(&d->lock);
    c->next = d->coh;
    d->coh = c;
    pthread_mutex_unlock(&d->lock);
    return c->cpu;
}

void dma_free_coherent(struct pci_dev *d, size_t size, void *cpu, dma_addr_t handle)
{
    (void)size;
    (void)handle;
    struct pdm_coherent *found = NULL;
    pthread_mutex_lock(&d->lock);
    for (struct pdm_coherent **pp = &d->coh; *pp; pp = &(*pp)->next)
        if ((*pp)->cpu == cpu) {
            found = *pp;
            *pp = found->next;
            break;
        }
    pthread_mutex_unlock(&d->lock);
    if (found) {
        pdm_host()->coherent_free(found->mem);
        free(found);
    }
}

/* ---------------------------------------------------------------- peer to peer */

dma_addr_t dma_map_resource(struct pci_dev *d, uint64_t phys, size_t size)
{
    /* Whose BAR is it? Only functions this driver has bound are known here. */
    int bar = -1;
    struct pci_dev *peer = d && size ? pdm_find_bar(phys, size, &bar) : NULL;
    struct pdm_peer_map *p = peer ? calloc(1, sizeof *p) : NULL;
    if (!p)
        return map_error(peer ? -ENOMEM : -EINVAL);
    dma_addr_t io;
    int rc = pdm_host()->map_peer(d, peer, bar, &io, &p->map);
    if (rc) {
        free(p);
        return map_error(rc);
    }
    p->addr = io + (phys - peer->fn.bar_start[bar]);
    pthread_mutex_lock(&d->lock);
    p->next = d->peers;
    d->peers = p;
    pthread_mutex_unlock(&d->lock);
    return p->addr;
}

void dma_unmap_resource(struct pci_dev *d, dma_addr_t addr, size_t size)
{
    (void)size;
    struct pdm_peer_map *found = NULL;
    pthread_mutex_lock(&d->lock);
    for (struct pdm_peer_map **pp = &d->peers; *pp; pp = &(*pp)->next)
        if ((*pp)->addr == addr) {
            found = *pp;
            *pp = found->next;
            break;
        }
    pthread_mutex_unlock(&d->lock);
    if (found) {
        pdm_host()->unmap_peer(found->map);
        free(found);
    }
}

void pdm_release_dma(struct pci_dev *d)
{
    while (d->peers) {
        struct pdm_peer_map *p = d->peers;
        d->peers = p->next;
        pdm_host()->unmap_peer(p->map);
        free(p);
    }
    while (d->coh) {
        struct pdm_coherent *c = d->coh;
        d->coh = c->next;
        pdm_host()->coherent_free(c->mem);
        free(c);
    }
}

/* ---------------------------------------------------------------- streaming DMA */

void *dma_host_alloc(size_t size) { return pdm_host()->host_alloc(size); }

void dma_host_free(void *cpu)
{
    if (pdm_host()->host_free(cpu))
        fprintf(stderr, "dma_host_free: %p is not memory of dma_host_alloc\n", cpu);
}

dma_addr_t dma_map_single(struct pci_dev *d, void *cpu, size_t size, enum dma_data_direction dir)
{
    if (!d || !size || (unsigned)dir > DMA_FROM_DEVICE)
        return map_error(-EINVAL);
    dma_addr_t io;
    int rc = pdm_host()->map(d, cpu, size, dir, &io);
    return rc ? map_error(rc) : io;
}

void dma_unmap_single(struct pci_dev *d, dma_addr_t addr, size_t size, enum dma_data_direction dir)
{
    (void)dir;
    if (d && pdm_host()->unmap(d, addr, size) == -ENOENT)
        fprintf(stderr, "%s: dma_unmap_single of %#llx, which is not mapped\n", d->name,
                (unsigned long long)addr);
}

int dma_map_sg(struct pci_dev *d, struct scatterlist *sg, int nents, enum dma_data_direction dir)
{
    if (!sg || nents <= 0) {
        errno = EINVAL;
        return 0;
    }
    for (int i = 0; i < nents; i++) {
        sg[i].dma_address = dma_map_single(d, sg[i].buf, sg[i].length, dir);
        if (sg[i].dma_address == DMA_MAPPING_ERROR) {
            int e = errno;
            while (i-- > 0)
                dma_unmap_single(d, sg[i].dma_address, sg[i].length, dir);
            errno = e;
            return 0;
        }
        sg[i].dma_length = sg[i].length;
    }
    return nents;
}

void dma_unmap_sg(struct pci_dev *d, struct scatterlist *sg, int nents, enum dma_data_direction dir)
{
    for (int i = 0; sg && i < nents; i++)
        dma_unmap_single(d, sg[i].dma_address, sg[i].dma_length, dir);
}
