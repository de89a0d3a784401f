/*
 * Controller bring-up and teardown, and what goes through the admin queue: reset and enable
 * (CC/CSTS with the CAP.TO timeout), admin queues, Identify of the controller and its active
 * namespaces, Number of Queues, creation and deletion of I/O queue pairs, raw admin commands,
 * and shutdown. The device handle's lock serialises the admin queue.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ntblend/smartio.h"
#include "nvme_int.h"

#define PAGE 4096u
#define ADMIN_PRP 256u /* admin PRP list slot: 32 entries (128 KiB commands) */

static size_t pageup(size_t n) { return (n + PAGE - 1) & ~(size_t)(PAGE - 1); }

static uint64_t rd64(nvme_dev_t *d, uint32_t off)
{
    uint32_t lo = d->ops->read32(d->ctx, off);
    return (uint64_t)d->ops->read32(d->ctx, off + 4) << 32 | lo;
}

static void wr64(nvme_dev_t *d, uint32_t off, uint64_t v)
{
    d->ops->write32(d->ctx, off, (uint32_t)v);
    d->ops->write32(d->ctx, off + 4, (uint32_t)(v >> 32));
}

/* CSTS.RDY becomes want within CAP.TO; -EIO on fatal status or an unreachable device. */
static int ready_wait(nvme_dev_t *d, bool want)
{
    static struct wpol_site site = WPOL_SITE("nvme controller ready", 0, 100000);
    uint64_t end = nvl_now_ns() + (uint64_t)d->to_ms * 1000000ull;
    struct wpol_how how = { .sleep_ns = 100000 }; /* nothing wakes us: naps of up to 100 us */
    struct wpol w;
    int rc = 0;
    wpol_begin(&w, &site, &how);
    for (;; wpol_pause(&w, 0)) {
        uint32_t csts = d->ops->read32(d->ctx, NVME_REG_CSTS);
        if (csts == UINT32_MAX) {
            rc = nvl_fail(-EIO, "%s does not answer (its registers read all ones: link "
                                "down or host gone?)", d->name);
            break;
        }
        if (want && (csts & NVME_CSTS_CFS)) {
            rc = nvl_fail(-EIO, "%s reports controller fatal status (CSTS.CFS): it needs "
                                "a reset", d->name);
            break;
        }
        if (!!(csts & NVME_CSTS_RDY) == want)
            break;
        if (nvl_now_ns() > end) {
            rc = nvl_fail(-ETIMEDOUT, "%s did not become %s within CAP.TO (%u ms)", d->name,
                          want ? "ready" : "disabled", d->to_ms);
            break;
        }
    }
    wpol_end(&w);
    return rc;
}

static int admin_locked(nvme_dev_t *d, struct nvme_sqe *sqe, uint64_t io, size_t len,
                        struct nvme_cpl *cpl)
{
    if (!d->admin_live)
        return nvl_fail(-ENODEV, "%s: the admin queue is gone", d->name);
    if (d->ops->gone && d->ops->gone(d->ctx))
        return nvl_fail(-ENODEV, "%s was removed (hot-unplugged)", d->name);
    struct nvme_cpl c = { 0 };
    int rc = nvl_q_sync(&d->admin, sqe, io, len, &c);
    if (cpl)
        *cpl = c;
    if (rc == -ETIMEDOUT)
        return nvl_fail(rc, "%s: admin command %#x got no completion within %u ms", d->name,
                        sqe->opc, d->timeout_ms);
    if (rc)
        return nvl_fail(rc, "%s: admin command %#x failed with status %#x (%s)", d->name,
                        sqe->opc, c.status, strerror(-rc));
    return 0;
}

int nvl_admin(nvme_dev_t *d, struct nvme_sqe *sqe, uint64_t io, size_t len,
              struct nvme_cpl *cpl)
{
    pthread_mutex_lock(&d->lock);
    int rc = admin_locked(d, sqe, io, len, cpl);
    pthread_mutex_unlock(&d->lock);
    return rc;
}

/* Identify into out (4 KiB), through the handle's buffer. (Caller holds d->lock.) */
static int identify(nvme_dev_t *d, uint32_t cns, uint32_t nsid, uint8_t *out)
{
    struct nvme_sqe s = { .opc = NVME_ADM_IDENTIFY, .nsid = nsid, .cdw10 = cns };
    int rc = admin_locked(d, &s, d->id.io, PAGE, NULL);
    if (rc)
        return rc;
    for (size_t i = 0; i < PAGE; i++)
        out[i] = d->id.cpu[i];
    return 0;
}

static uint32_t le32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t le64(const uint8_t *p) { return (uint64_t)le32(p + 4) << 32 | le32(p); }

static void str_field(char *dst, const uint8_t *src, size_t n)
{
    memcpy(dst, src, n);
    dst[n] = 0;
    while (n && (dst[n - 1] == ' ' || dst[n - 1] == 0))
        dst[--n] = 0;
}

/* What the registers say: queue limits, doorbell stride, timeout. Also for clients. */
int nvl_apply_regs(nvme_dev_t *d, uint64_t cap, uint32_t vs)
{
    if (!NVME_CAP_CSS_NVM(cap) || vs < 0x00010000u || NVME_CAP_MPSMIN(cap) > 0)
        return nvl_fail(-ENODEV, "%s is not an NVMe this library drives (VS %#x, CAP %#llx: "
                                 "needs the NVM command set and 4 KiB pages)",
                        d->name, vs, (unsigned long long)cap);
    d->cap = cap;
    d->info.version = vs;
    d->info.max_depth = NVME_CAP_MQES(cap) + 1;
    d->dstrd = NVME_CAP_DSTRD(cap);
    d->info.doorbell_stride = 4u << d->dstrd;
    d->to_ms = NVME_CAP_TO(cap) * 500u;
    if (d->to_ms < 500)
        d->to_ms = 500;
    d->page = PAGE;
    return 0;
}

/* What Identify Controller says (4 KiB at id). Also for clients. */
void nvl_apply_id_ctrl(nvme_dev_t *d, const uint8_t *id)
{
    struct nvme_ctrl_info *in = &d->info;
    in->vid = (uint16_t)(id[0] | id[1] << 8);
    str_field(in->serial, id + 4, 20);
    str_field(in->model, id + 24, 40);
    str_field(in->firmware, id + 64, 8);
    in->namespaces = le32(id + NVME_ID_NN);
    d->oncs = (uint16_t)(id[NVME_ID_ONCS] | id[NVME_ID_ONCS + 1] << 8);
    /* One PRP list page per command at most: up to 512 pages, less if MDTS says so. */
    uint32_t pages = PAGE / 8, mdts = id[NVME_ID_MDTS];
    if (mdts && mdts < 9)
        pages = 1u << mdts;
    d->info.max_transfer = (size_t)pages * PAGE;
    d->prp_bytes = 64;
    while (d->prp_bytes < pages * 8)
        d->prp_bytes *= 2;
}

static int identify_all(nvme_dev_t *d)
{
    uint8_t *id = malloc(PAGE), *list = malloc(PAGE);
    int rc = -ENOMEM;
    if (!id || !list)
        goto out;
    if ((rc = identify(d, NVME_CNS_CTRL, 0, id)))
        goto out;
    nvl_apply_id_ctrl(d, id);
    struct nvme_ctrl_info *in = &d->info;

    /* Active namespaces: the list (CNS 2), or 1..NN from a controller without it. */
    uint32_t ids[PAGE / 4], n = 0;
    if (!identify(d, NVME_CNS_NS_LIST, 0, list)) {
        for (; n < PAGE / 4 && le32(list + 4 * n); n++)
            ids[n] = le32(list + 4 * n);
    } else {
        for (; n < in->namespaces && n < PAGE / 4; n++)
            ids[n] = n + 1;
    }
    d->ns = calloc(n ? n : 1, sizeof *d->ns);
    rc = -ENOMEM;
    if (!d->ns)
        goto out;
    d->nns = 0;
    for (uint32_t i = 0; i < n; i++) {
        if ((rc = identify(d, NVME_CNS_NS, ids[i], id)))
            goto out;
        uint64_t nsze = le64(id);
        uint32_t lbads = id[128 + 4 * (id[26] & 0xf) + 2];
        if (!nsze || lbads < 9 || lbads > 16)
            continue; /* inactive or a format this library cannot address */
        d->ns[d->nns++] = (struct nvl_ns){ .nsid = ids[i], .lba_shift = lbads, .blocks = nsze };
    }
    rc = 0;
out:
    free(id);
    free(list);
    return rc;
}

static int set_queues(nvme_dev_t *d)
{
    struct nvme_sqe s = { .opc = NVME_ADM_SET_FEATURES, .cdw10 = NVME_FEAT_NUM_QUEUES,
                          .cdw11 = 0xfffeu << 16 | 0xfffeu };
    struct nvme_cpl c = { 0 };
    int rc = admin_locked(d, &s, 0, 0, &c);
    if (rc)
        return rc;
    uint32_t nsq = (c.dw0 & 0xffff) + 1, ncq = (c.dw0 >> 16) + 1;
    d->info.max_qpairs = nsq < ncq ? nsq : ncq;
    d->qid_used = calloc(d->info.max_qpairs + 1, 1);
    return d->qid_used ? 0 : -ENOMEM;
}

/* Reset, admin queues, enable, identify. */
static int start(nvme_dev_t *d, const struct nvme_open_opts *o)
{
    /* A function just reset (returned by its previous user) reads zeros until it is ready
     * again; a real one answers configuration reads with Retry Status meanwhile. Give it a
     * second, as drivers do after a Function Level Reset. */
    static struct wpol_site back_site = WPOL_SITE("nvme controller back from reset", 0, 0);
    const struct wpol_how naps = { .sleep_ns = 1000000 }; /* nothing wakes us: naps up to 1 ms */
    uint64_t cap = rd64(d, NVME_REG_CAP), until = nvl_now_ns() + 1000000000ull;
    struct wpol w;
    wpol_begin(&w, &back_site, &naps);
    while (cap == 0 && nvl_now_ns() < until) {
        wpol_pause(&w, 0);
        cap = rd64(d, NVME_REG_CAP);
    }
    wpol_end(&w);
    if (cap == UINT64_MAX)
        return nvl_fail(-EIO, "%s does not answer (registers read all ones)", d->name);
    int rc = nvl_apply_regs(d, cap, d->ops->read32(d->ctx, NVME_REG_VS));
    if (rc)
        return rc;

    /* Disable first: a controller left enabled has queues we know nothing of. */
    if ((d->ops->read32(d->ctx, NVME_REG_CC) & NVME_CC_EN) ||
        (d->ops->read32(d->ctx, NVME_REG_CSTS) & NVME_CSTS_RDY)) {
        d->ops->write32(d->ctx, NVME_REG_CC, 0);
        int rc = ready_wait(d, false);
        if (rc)
            return rc;
    }

    uint32_t depth = o->admin_depth ? o->admin_depth : 32;
    if (depth < 2 || depth > 4096 || depth > d->info.max_depth)
        return nvl_fail(-EINVAL, "admin_depth %u: the controller takes 2..%u", depth,
                        d->info.max_depth < 4096 ? d->info.max_depth : 4096);
    size_t sqb = pageup(64ull * depth), cqb = pageup(16ull * depth);
    size_t prpb = pageup((size_t)(depth - 1) * ADMIN_PRP);
    rc = nvl_mem_get(d, d->user_mem, NVME_PLACE_LOCAL, sqb + cqb + prpb + PAGE,
                         &d->admin_mem, &d->admin_pool);
    if (rc)
        return nvl_fail(rc, "%s: no memory for the admin queues (%s)", d->name,
                        strerror(-rc));
    struct nvl_dma *m = &d->admin_mem;
    struct nvl_queue_params p = {
        .ops = d->ops, .ctx = d->ctx, .qid = 0, .depth = depth, .dstrd = d->dstrd,
        .page = PAGE, .prp_bytes = ADMIN_PRP, .irq = o->admin_irq,
        .sq = { .cpu = m->cpu, .io = m->io, .size = sqb },
        .cq = { .cpu = m->cpu + sqb, .io = m->io + sqb, .size = cqb },
        .prp = { .cpu = m->cpu + sqb + cqb, .io = m->io + sqb + cqb, .size = prpb },
        .timeout_ns = (uint64_t)d->timeout_ms * 1000000ull,
        .spin_ns = (uint64_t)d->spin_us * 1000ull,
    };
    d->id = (struct nvl_dma){ .cpu = m->cpu + sqb + cqb + prpb, .io = m->io + sqb + cqb + prpb,
                              .size = PAGE };
    if (o->admin_irq && (!d->ops->irq_enable ||
                         (rc = d->ops->irq_enable(d->ctx, 0, o->admin_irq))))
        return nvl_fail(rc ? rc : -EOPNOTSUPP, "%s: cannot route MSI-X vector 0 to host "
                        "vector %u", d->name, o->admin_irq);
    if ((rc = nvl_q_init(&d->admin, &p)))
        return rc;
    d->admin_live = true;
    d->ops->write32(d->ctx, NVME_REG_AQA, (depth - 1) << 16 | (depth - 1));
    wr64(d, NVME_REG_ASQ, p.sq.io);
    wr64(d, NVME_REG_ACQ, p.cq.io);
    /* 64-byte SQ entries, 16-byte CQ entries, 4 KiB pages, NVM command set, round robin. */
    d->ops->write32(d->ctx, NVME_REG_CC, NVME_CC_EN | NVME_CC_SET_IOSQES(6) | NVME_CC_SET_IOCQES(4));
    if ((rc = ready_wait(d, true)))
        return rc;
    pthread_mutex_lock(&d->lock);
    rc = identify_all(d);
    if (!rc)
        rc = set_queues(d);
    pthread_mutex_unlock(&d->lock);
    return rc;
}

static void dev_name(nvme_dev_t *d, const char *name, struct sio_dev *dev)
{
    snprintf(d->name, sizeof d->name, "%s", name ? name : "nvme");
    if (name || !dev)
        return;
    struct sio_info info[256];
    int n = sio_list(info, 256);
    for (int i = 0; i < n && i < 256; i++)
        if (info[i].id == sio_id(dev))
            snprintf(d->name, sizeof d->name, "%s", info[i].name);
}

/* Which backend: a SmartIO name or device, or a driver-model function (bdf or pdev). */
struct open_how {
    const char *name;
    struct sio_dev *dev;
    const char *bdf;
    struct pci_dev *pdev;
};

static int open_common(const struct open_how *how, const struct nvme_open_opts *opts,
                       nvme_dev_t **out)
{
    static const struct nvme_open_opts defaults;
    const struct nvme_open_opts *o = opts ? opts : &defaults;
    const char *name = how->name;
    bool pci = how->bdf || how->pdev;
    if (!out)
        return nvl_fail(-EINVAL, "nvme_open: needs somewhere to put the handle");
    *out = NULL;
    if (pci && o->mode == NVME_OPEN_CLIENT)
        return nvl_fail(-EINVAL, "a PCI function is driven by its own process: no manager "
                                 "serves it (NVME_OPEN_CLIENT is for SmartIO names)");
    nvme_dev_t *d = calloc(1, sizeof *d);
    if (!d)
        return -ENOMEM;
    pthread_mutex_init(&d->lock, NULL);
    pthread_rwlock_init(&d->mem_lock, NULL);
    d->timeout_ms = o->timeout_ms ? o->timeout_ms : 10000;
    d->spin_us = o->spin_us ? o->spin_us : 20;
    /* Own the controller, or be a client of the manager that does. */
    bool client = false;
    uint32_t dev_id = 0, mgr_node = 0, mgr_pid = 0;
    int rc = 0;
    if (pci) {
        rc = nvl_pci_backend(how->bdf, how->pdev, &d->ops, &d->ctx, d->name, sizeof d->name);
        if (!rc && how->bdf)
            nvl_pci_opened(d->ctx, d, o->on_remove, o->remove_arg);
    } else {
        dev_name(d, name, how->dev);
        if (name) {
            bool managed = false;
            rc = nvl_sio_lookup(name, &dev_id, &managed, &mgr_node, &mgr_pid);
            if (!rc && o->mode == NVME_OPEN_CLIENT && !managed)
                rc = nvl_fail(-ENOTCONN, "no manager serves %s: start one (ntblend nvme "
                                         "manager %s), or open it to own it (NVME_OPEN_OWN)",
                              name, name);
            client = !rc && managed && o->mode != NVME_OPEN_OWN;
        } else if (o->mode == NVME_OPEN_CLIENT) {
            rc = nvl_fail(-EINVAL, "nvme_open_sio: a client opens the device by name "
                                   "(nvme_open)");
        }
        if (!rc)
            rc = nvl_sio_backend(name, how->dev, client, o->flags & NVME_OPEN_ONE_PATH,
                                 &d->ops, &d->ctx);
    }
    if (rc) {
        pthread_rwlock_destroy(&d->mem_lock);
        pthread_mutex_destroy(&d->lock);
        free(d);
        return rc;
    }
    /* Two paths: queue pairs get a twin on the second and fail over (failover.c). */
    d->multipath = d->ops->paths && d->ops->paths(d->ctx) >= 2;
    if (o->mem && !(d->user_mem = nvme_mem_wrap(d, o->mem, o->mem_ioaddr, o->mem_size))) {
        rc = -errno;
        goto fail;
    }
    if (client) {
        if ((rc = nvl_client_open(d, dev_id, mgr_node)))
            goto fail;
    } else if ((rc = start(d, o))) {
        goto fail;
    }
    *out = d;
    return 0;
fail:;
    char msg[256];
    snprintf(msg, sizeof msg, "%s", nvme_errmsg());
    nvme_close(d);
    nvl_fail(rc, "%s", msg); /* the cause, not what closing said */
    return rc;
}

int nvme_open(const char *name, const struct nvme_open_opts *opts, nvme_dev_t **out)
{
    if (!name)
        return nvl_fail(-EINVAL, "nvme_open: no device name (e.g. nvme0, or pci:80:00.0)");
    if (!strncmp(name, "pci:", 4))
        return open_common(&(struct open_how){ .bdf = name + 4 }, opts, out);
    return open_common(&(struct open_how){ .name = name }, opts, out);
}

int nvme_open_sio(struct sio_dev *dev, const struct nvme_open_opts *opts, nvme_dev_t **out)
{
    if (!dev)
        return nvl_fail(-EINVAL, "nvme_open_sio: no device (sio_borrow one first)");
    return open_common(&(struct open_how){ .dev = dev }, opts, out);
}

int nvme_open_pci(struct pci_dev *dev, const struct nvme_open_opts *opts, nvme_dev_t **out)
{
    if (!dev)
        return nvl_fail(-EINVAL, "nvme_open_pci: no function (from a driver's probe())");
    return open_common(&(struct open_how){ .pdev = dev }, opts, out);
}

struct pci_dev *nvme_pci_dev(nvme_dev_t *d)
{
    return d && d->ops && !strcmp(d->ops->name, "pci") ? nvl_pci_dev(d->ctx) : NULL;
}

bool nvme_removed(const nvme_dev_t *d)
{
    return d && d->ops && d->ops->gone && d->ops->gone(d->ctx);
}

struct sio_dev *nvme_sio_dev(nvme_dev_t *d)
{
    return d && d->ops && !strcmp(d->ops->name, "smartio") ? nvl_sio_dev(d->ctx) : NULL;
}

bool nvme_is_client(const nvme_dev_t *d) { return d && d->client; }

int nvme_close(nvme_dev_t *d)
{
    if (!d)
        return 0;
    int rc = 0;
    while (d->qps) {
        int r = nvme_qpair_delete(d->qps);
        rc = rc ? rc : r;
    }
    if (d->client) {
        /* The controller is the manager's: leave it running for the others. */
        nvl_client_close(d);
        while (d->mems)
            nvl_mem_destroy(d->mems);
        d->ops->close(d->ctx);
        goto out;
    }
    /* A removed controller is gone with its DMA: nothing to shut down. */
    bool removed = d->ops && d->ops->gone && d->ops->gone(d->ctx);
    if (d->admin_live && !removed) {
        /* Normal shutdown, then disable: the device stops all DMA before memory goes. */
        uint32_t cc = d->ops->read32(d->ctx, NVME_REG_CC);
        d->ops->write32(d->ctx, NVME_REG_CC, cc | NVME_CC_SHN_NORMAL);
        static struct wpol_site shn_site = WPOL_SITE("nvme controller shutdown", 0, 100000);
        const struct wpol_how naps = { .sleep_ns = 100000 }; /* as ready_wait */
        uint64_t end = nvl_now_ns() + (uint64_t)d->to_ms * 1000000ull;
        uint32_t csts;
        struct wpol w;
        wpol_begin(&w, &shn_site, &naps);
        while (((csts = d->ops->read32(d->ctx, NVME_REG_CSTS)) & NVME_CSTS_SHST_MASK) !=
               NVME_CSTS_SHST_COMPLETE) {
            if (csts == UINT32_MAX) /* removed, or unreachable: nothing to wait for */
                break;
            if (nvl_now_ns() > end) {
                rc = rc ? rc : nvl_fail(-ETIMEDOUT, "%s: shutdown did not complete", d->name);
                break;
            }
            wpol_pause(&w, 0);
        }
        wpol_end(&w);
    }
    if (d->ctx && !removed) {
        d->ops->write32(d->ctx, NVME_REG_CC, 0);
        int r = ready_wait(d, false);
        rc = rc ? rc : r;
    }
    if (d->admin_live)
        nvl_q_fini(&d->admin);
    d->admin_live = false;
    if (d->ctx)
        nvl_mem_release(d, d->admin_pool, &d->admin_mem);
    while (d->mems)
        nvl_mem_destroy(d->mems);
    if (d->ctx)
        d->ops->close(d->ctx);
out:
    free(d->ns);
    free(d->qid_used);
    pthread_rwlock_destroy(&d->mem_lock);
    pthread_mutex_destroy(&d->lock);
    free(d);
    return rc;
}

int nvme_ctrl_info(nvme_dev_t *d, struct nvme_ctrl_info *out)
{
    if (!d || !out)
        return -EINVAL;
    *out = d->info;
    return 0;
}

const struct nvl_ns *nvl_ns_find(const nvme_dev_t *d, uint32_t nsid)
{
    for (uint32_t i = 0; i < d->nns; i++)
        if (d->ns[i].nsid == nsid)
            return &d->ns[i];
    return NULL;
}

int nvme_ns_info(nvme_dev_t *d, uint32_t nsid, struct nvme_ns_info *out)
{
    if (!d || !out)
        return -EINVAL;
    const struct nvl_ns *ns = nvl_ns_find(d, nsid);
    if (!ns)
        return nvl_fail(-ENXIO, "%s has no active namespace %u (it has %u)", d->name, nsid,
                        d->nns);
    *out = (struct nvme_ns_info){ .nsid = nsid, .block_size = 1u << ns->lba_shift,
                                  .blocks = ns->blocks, .capacity = ns->blocks << ns->lba_shift };
    return 0;
}

int nvme_admin(nvme_dev_t *d, const struct nvme_cmd *cmd, void *buf, size_t len,
               struct nvme_cpl *cpl)
{
    if (!d || !cmd)
        return -EINVAL;
    uint64_t io = 0;
    if (len && (!buf || (!d->client && nvl_mem_find(d, buf, len, &io))))
        return nvl_fail(-EFAULT, "nvme_admin: the buffer is not in memory of %s "
                                 "(nvme_buf_alloc)", d->name);
    if (len > (size_t)(ADMIN_PRP / 8) * PAGE || (io & 3))
        return nvl_fail(-EINVAL, "nvme_admin: data must be 4-byte aligned and at most %u KiB",
                        ADMIN_PRP / 8 * 4);
    struct nvme_sqe s = { .opc = cmd->opc, .nsid = cmd->nsid, .cdw10 = cmd->cdw10,
                          .cdw11 = cmd->cdw11, .cdw12 = cmd->cdw12, .cdw13 = cmd->cdw13,
                          .cdw14 = cmd->cdw14, .cdw15 = cmd->cdw15 };
    if (d->client)
        return nvl_client_admin(d, &s, buf, len, cpl);
    return nvl_admin(d, &s, io, len, cpl);
}

void nvme_admin_stats(nvme_dev_t *d, struct nvme_qpair_stats *out)
{
    pthread_mutex_lock(&d->lock);
    *out = d->admin.st;
    pthread_mutex_unlock(&d->lock);
}

/* ---------------------------------------------------------------- I/O queue pairs */

static int delete_queue(nvme_dev_t *d, uint8_t opc, uint16_t qid)
{
    struct nvme_sqe s = { .opc = opc, .cdw10 = qid };
    return nvl_admin(d, &s, 0, 0, NULL);
}

/* The CQ, then the SQ, through the admin queue; caller holds d->lock. */
static int create_locked(nvme_dev_t *d, uint64_t sq, uint64_t cq, uint32_t depth, uint32_t irq,
                         uint16_t qid)
{
    struct nvme_sqe s = { .opc = NVME_ADM_CREATE_CQ, .prp1 = cq,
                          .cdw10 = (depth - 1) << 16 | qid,
                          .cdw11 = (irq ? (uint32_t)qid << 16 | NVME_CQ_IEN : 0) | NVME_QUEUE_PC };
    int rc = admin_locked(d, &s, 0, 0, NULL);
    if (rc)
        return rc;
    s = (struct nvme_sqe){ .opc = NVME_ADM_CREATE_SQ, .prp1 = sq,
                           .cdw10 = (depth - 1) << 16 | qid,
                           .cdw11 = (uint32_t)qid << 16 | NVME_QUEUE_PC };
    if ((rc = admin_locked(d, &s, 0, 0, NULL))) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", nvme_errmsg());
        s = (struct nvme_sqe){ .opc = NVME_ADM_DELETE_CQ, .cdw10 = qid };
        admin_locked(d, &s, 0, 0, NULL);
        return nvl_fail(rc, "%s", msg);
    }
    d->qid_used[qid] = 1;
    return 0;
}

int nvl_hw_create(nvme_dev_t *d, uint64_t sq, uint64_t cq, uint32_t depth, uint32_t irq,
                  uint16_t *qid)
{
    if (d->client)
        return nvl_client_create(d, sq, cq, depth, irq != 0, qid);
    pthread_mutex_lock(&d->lock);
    for (uint32_t i = 1; i <= d->info.max_qpairs && !*qid; i++)
        if (!d->qid_used[i])
            *qid = (uint16_t)i;
    int rc = *qid ? create_locked(d, sq, cq, depth, irq, *qid)
                  : nvl_fail(-EBUSY, "all %u I/O queue pairs of %s are in use: delete one "
                                     "(nvme_qpair_delete) first", d->info.max_qpairs, d->name);
    pthread_mutex_unlock(&d->lock);
    return rc;
}

int nvl_hw_delete(nvme_dev_t *d, uint16_t qid)
{
    if (d->client)
        return nvl_client_delete(d, qid);
    int rc = delete_queue(d, NVME_ADM_DELETE_SQ, qid);
    int r = delete_queue(d, NVME_ADM_DELETE_CQ, qid);
    pthread_mutex_lock(&d->lock);
    d->qid_used[qid] = 0;
    pthread_mutex_unlock(&d->lock);
    return rc ? rc : r;
}

/* Free what create made; caller holds d->lock. */
static void qpair_free(nvme_qpair_t *qp)
{
    nvme_dev_t *d = qp->dev;
    nvl_q_fini(&qp->q);
    nvl_mem_release(d, qp->sq_pool, &qp->sqm);
    nvl_mem_release(d, qp->cq_pool, &qp->cqm);
    free(qp);
}

int nvme_qpair_create(nvme_dev_t *d, const struct nvme_qpair_opts *opts, nvme_qpair_t **out)
{
    static const struct nvme_qpair_opts defaults;
    const struct nvme_qpair_opts *o = opts ? opts : &defaults;
    if (!d || !out)
        return -EINVAL;
    *out = NULL;
    uint32_t depth = o->depth ? o->depth : 64;
    if (depth < 2 || depth > d->info.max_depth)
        return nvl_fail(-EINVAL, "queue depth %u: %s takes 2..%u entries per queue", depth,
                        d->name, d->info.max_depth);
    if ((o->sq_mem && o->sq_mem->dev != d) || (o->cq_mem && o->cq_mem->dev != d))
        return nvl_fail(-EINVAL, "nvme_qpair_create: sq_mem/cq_mem of another device");
    nvme_qpair_t *qp = calloc(1, sizeof *qp);
    if (!qp)
        return -ENOMEM;
    qp->dev = d;
    pthread_mutex_lock(&d->lock);
    uint16_t qid = 0;
    for (uint32_t i = 1; i <= d->info.max_qpairs && !qid && !d->client; i++)
        if (!d->qid_used[i])
            qid = (uint16_t)i;
    int rc;
    if (!qid && !d->client) {
        rc = nvl_fail(-EBUSY, "all %u I/O queue pairs of %s are in use: delete one "
                              "(nvme_qpair_delete) first", d->info.max_qpairs, d->name);
        goto fail;
    }
    /* The SQ and the PRP lists its commands point to: the device reads both. */
    size_t sqb = pageup(64ull * depth), prpb = pageup((size_t)(depth - 1) * d->prp_bytes);
    size_t cqb = pageup(16ull * depth);
    /* Two paths: this pair's queues over path 0, its twin's over path 1, SQs in this host
     * (failover.c); queues in memory the caller gave stay on the path it was mapped over. */
    bool mp = d->multipath && !o->sq_mem && !o->cq_mem;
    if (mp && !(rc = d->ops->dma_alloc_path(d->ctx, sqb + prpb, NVME_PLACE_LOCAL, 0, &qp->sqm)) &&
        (rc = d->ops->dma_alloc_path(d->ctx, cqb, o->cq_place, 0, &qp->cqm)))
        d->ops->dma_free(d->ctx, &qp->sqm);
    if (mp && !rc) {
        memset((void *)qp->sqm.cpu, 0, qp->sqm.size);
        memset((void *)qp->cqm.cpu, 0, qp->cqm.size);
    }
    if ((!mp && ((rc = nvl_mem_get(d, o->sq_mem, o->sq_place, sqb + prpb, &qp->sqm,
                                   &qp->sq_pool)) ||
                 (rc = nvl_mem_get(d, o->cq_mem, o->cq_place, cqb, &qp->cqm, &qp->cq_pool)))) ||
        rc) {
        nvl_fail(rc, "%s: no memory for a queue pair of depth %u (%zu + %zu bytes)%s: %s",
                 d->name, depth, sqb + prpb, cqb,
                 o->sq_mem || o->cq_mem ? " in the memory given" : "", strerror(-rc));
        goto fail_mem;
    }
    if (d->client) {
        /* The manager picks the identifier and creates both queues at our addresses. */
        pthread_mutex_unlock(&d->lock); /* not across a request that may take seconds */
        rc = nvl_client_create(d, qp->sqm.io, qp->cqm.io, depth, o->irq != 0, &qid);
        pthread_mutex_lock(&d->lock);
        if (rc)
            goto fail_mem;
    }
    struct nvl_queue_params p = {
        .ops = d->ops, .ctx = d->ctx, .qid = qid, .depth = depth, .dstrd = d->dstrd,
        .page = PAGE, .prp_bytes = d->prp_bytes, .irq = o->irq,
        .sq = { .cpu = qp->sqm.cpu, .io = qp->sqm.io, .size = sqb },
        .prp = { .cpu = qp->sqm.cpu + sqb, .io = qp->sqm.io + sqb, .size = prpb },
        .cq = qp->cqm,
        .timeout_ns = (uint64_t)d->timeout_ms * 1000000ull,
        .spin_ns = (uint64_t)d->spin_us * 1000ull,
    };
    if (o->irq && (!d->ops->irq_enable || (rc = d->ops->irq_enable(d->ctx, qid, o->irq)))) {
        rc = nvl_fail(rc ? rc : -EOPNOTSUPP, "%s: cannot route MSI-X vector %u to host "
                      "vector %u", d->name, qid, o->irq);
        goto fail_created;
    }
    if ((rc = nvl_q_init(&qp->q, &p)))
        goto fail_created;
    if (!d->client && (rc = create_locked(d, qp->sqm.io, qp->cqm.io, depth, o->irq, qid)))
        goto fail_q;
    qp->next = d->qps;
    d->qps = qp;
    pthread_mutex_unlock(&d->lock);
    if (mp && (rc = nvl_mp_qpair_init(qp, o, sqb, prpb, cqb))) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", nvme_errmsg());
        nvme_qpair_delete(qp);
        return nvl_fail(rc, "%s", msg);
    }
    *out = qp;
    return 0;
fail_q:
    nvl_q_fini(&qp->q);
fail_created:
    if (d->client) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", nvme_errmsg());
        nvl_client_delete(d, qid);
        nvl_fail(rc, "%s", msg);
    }
fail_mem:
    nvl_mem_release(d, qp->sq_pool, &qp->sqm);
    nvl_mem_release(d, qp->cq_pool, &qp->cqm);
fail:
    pthread_mutex_unlock(&d->lock);
    free(qp);
    return rc;
}

int nvme_qpair_delete(nvme_qpair_t *qp)
{
    if (!qp)
        return 0;
    nvme_dev_t *d = qp->dev;
    int rc_mp = nvl_mp_qpair_fini(qp); /* the twin on the other path first */
    uint16_t qid = qp->q.p.qid;
    /* Deleting the SQ aborts what it still holds (completions "aborted: SQ deletion");
     * deliver those, then cancel what never answered, then delete the CQ. */
    nvl_q_reap(&qp->q, 0);
    int rc;
    if (d->client) { /* the manager deletes the SQ, then the CQ */
        rc = nvl_client_delete(d, qid);
        nvl_q_reap(&qp->q, 0);
        nvl_q_cancel_all(&qp->q);
    } else {
        rc = delete_queue(d, NVME_ADM_DELETE_SQ, qid);
        nvl_q_reap(&qp->q, 0);
        nvl_q_cancel_all(&qp->q);
        int r = delete_queue(d, NVME_ADM_DELETE_CQ, qid);
        rc = rc ? rc : r;
    }
    pthread_mutex_lock(&d->lock);
    for (nvme_qpair_t **p = &d->qps; *p; p = &(*p)->next)
        if (*p == qp) {
            *p = qp->next;
            break;
        }
    if (!d->client)
        d->qid_used[qid] = 0;
    qpair_free(qp);
    pthread_mutex_unlock(&d->lock);
    return rc ? rc : rc_mp;
}

uint16_t nvme_qpair_id(const nvme_qpair_t *qp) { return qp ? qp->q.p.qid : 0; }
