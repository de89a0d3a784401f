/*
 * fio ioengine "ntbnvme": fio jobs doing their I/O through libntbnvme on an NVMe of the
 * fabric, typically one borrowed from another host (docs/nvme-driver.md, section fio).
 *
 * Owns: the engine's options (ntb_*), one nvme_dev_t per device and process shared by the
 * jobs of that process (thread=1) with a reference count, one queue pair per job, fio's I/O
 * buffers taken from memory the device reaches (so data moves by DMA straight into them),
 * and the mapping of fio's queue/commit/getevents/event onto nvme_submit (deferred doorbell),
 * nvme_qpair_poll (rings it) and nvme_qpair_wait. With ntb_map=per-io on a "pci:" device
 * (the driver model) the buffers are plain host RAM (dma_host_alloc) and every read and
 * write maps its buffer (dma_map_single) before submission and unmaps it on completion, as
 * Linux's streaming DMA API does for O_DIRECT (the per-I/O cost of smartio-tocs-2021
 * Fig. 21, §7.1.1).
 *
 * Built against the headers of the fio that is installed (scripts/fio-src.sh) and loaded
 * with ioengine=external:/path/to/ntbnvme-fio.so. Nothing of fio's code is here.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fio.h"
#include "optgroup.h"

#include "ntblend/nvme.h"
#include "ntblend/pci.h"

enum { PLACE_DEVICE, PLACE_LOCAL };
enum { MAP_ONCE, MAP_PER_IO };

/* The engine's options; fio keeps a pointer to the job in the first member. */
struct ntbfio_opts {
    void *fio_td;
    char *device;
    unsigned int nsid;
    unsigned int sq;
    unsigned int cq;
    unsigned int buf;
    unsigned int irq;
    unsigned int map;
};

static struct fio_option ntbfio_options[] = {
    {
        .name = "ntb_device",
        .lname = "ntblend NVMe device",
        .type = FIO_OPT_STR_STORE,
        .off1 = offsetof(struct ntbfio_opts, device),
        .help = "Fabric-wide name of the NVMe to use (ntblend device list), e.g. nvme0",
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = "ntb_nsid",
        .lname = "ntblend NVMe namespace",
        .type = FIO_OPT_INT,
        .off1 = offsetof(struct ntbfio_opts, nsid),
        .def = "1",
        .minval = 1,
        .help = "Namespace to do I/O on",
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = "ntb_sq",
        .lname = "ntblend submission queue placement",
        .type = FIO_OPT_STR,
        .off1 = offsetof(struct ntbfio_opts, sq),
        .def = "device",
        .help = "Where each job's submission queue lives",
        .posval = {
            { .ival = "device", .oval = PLACE_DEVICE, .help = "RAM of the device's host" },
            { .ival = "local", .oval = PLACE_LOCAL, .help = "RAM of this host" },
        },
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = "ntb_cq",
        .lname = "ntblend completion queue placement",
        .type = FIO_OPT_STR,
        .off1 = offsetof(struct ntbfio_opts, cq),
        .def = "local",
        .help = "Where each job's completion queue lives",
        .posval = {
            { .ival = "local", .oval = PLACE_LOCAL, .help = "RAM of this host" },
            { .ival = "device", .oval = PLACE_DEVICE, .help = "RAM of the device's host" },
        },
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = "ntb_buf",
        .lname = "ntblend data buffer placement",
        .type = FIO_OPT_STR,
        .off1 = offsetof(struct ntbfio_opts, buf),
        .def = "local",
        .help = "Where each job's I/O buffers live",
        .posval = {
            { .ival = "local", .oval = PLACE_LOCAL, .help = "RAM of this host" },
            { .ival = "device", .oval = PLACE_DEVICE, .help = "RAM of the device's host" },
        },
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = "ntb_irq",
        .lname = "ntblend interrupt vector",
        .type = FIO_OPT_INT,
        .off1 = offsetof(struct ntbfio_opts, irq),
        .def = "0",
        .minval = 0,
        .maxval = 255,
        .help = "0: poll; N: job k's queue pair sleeps in host vector N+k-1 when it waits",
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = "ntb_map",
        .lname = "ntblend DMA mapping of the data buffers",
        .type = FIO_OPT_STR,
        .off1 = offsetof(struct ntbfio_opts, map),
        .def = "once",
        .help = "When fio's buffers are mapped for the device",
        .posval = {
            { .ival = "once", .oval = MAP_ONCE,
              .help = "taken from memory the device reaches, mapped once" },
            { .ival = "per-io", .oval = MAP_PER_IO,
              .help = "host RAM, mapped and unmapped around every I/O (pci: devices)" },
        },
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    { .name = NULL },
};

/* ---------------------------------------------------------------- shared devices */

/* A device opened by this process, shared by its jobs. */
struct ntbfio_dev {
    struct ntbfio_dev *next;
    char *name;
    nvme_dev_t *dev;
    unsigned refs;
    pid_t pid; /* a child of fork() must not use its parent's handle */
};

static pthread_mutex_t devs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ntbfio_dev *devs;

static struct ntbfio_dev *dev_get(const char *name, bool use_thread)
{
    pthread_mutex_lock(&devs_lock);
    struct ntbfio_dev *sd;
    for (sd = devs; sd; sd = sd->next)
        if (sd->pid == getpid() && !strcmp(sd->name, name))
            break;
    if (sd) {
        sd->refs++;
        pthread_mutex_unlock(&devs_lock);
        return sd;
    }
    nvme_dev_t *d;
    int rc = nvme_open(name, NULL, &d);
    if (rc) {
        log_err("ntbnvme: %s\n", nvme_errmsg());
        if ((rc == -EBUSY || rc == -EALREADY) && !use_thread)
            log_err("ntbnvme: several jobs on one device must be threads of one fio "
                    "(thread=1), or clients of its manager (ntblend nvme manager %s --host "
                    "H): they then share it, each with its own queue pair\n", name);
        pthread_mutex_unlock(&devs_lock);
        return NULL;
    }
    sd = calloc(1, sizeof *sd);
    if (!sd || !(sd->name = strdup(name))) {
        free(sd);
        nvme_close(d);
        log_err("ntbnvme: out of memory\n");
        pthread_mutex_unlock(&devs_lock);
        return NULL;
    }
    sd->dev = d;
    sd->refs = 1;
    sd->pid = getpid();
    sd->next = devs;
    devs = sd;
    pthread_mutex_unlock(&devs_lock);
    return sd;
}

static void dev_put(struct ntbfio_dev *sd)
{
    if (!sd)
        return;
    pthread_mutex_lock(&devs_lock);
    if (--sd->refs == 0) {
        for (struct ntbfio_dev **p = &devs; *p; p = &(*p)->next)
            if (*p == sd) {
                *p = sd->next;
                break;
            }
        if (nvme_close(sd->dev))
            log_err("ntbnvme: closing %s: %s\n", sd->name, nvme_errmsg());
        free(sd->name);
        free(sd);
    }
    pthread_mutex_unlock(&devs_lock);
}

/* ---------------------------------------------------------------- a job */

struct ntbfio {
    struct ntbfio_dev *sd;
    nvme_qpair_t *qp;
    uint32_t nsid;
    struct nvme_ns_info ns;
    size_t max_transfer;
    struct io_u **queued; /* submitted, doorbell not rung yet */
    unsigned nqueued;
    /* Completed, in order; the first nreaped were handed to fio by the last getevents and
     * stay until the next one. Those and the ones in flight are at most 2 * slots. */
    struct io_u **done;
    unsigned ndone, nreaped;
    unsigned slots;       /* entries of queued[]; iodepth + 1 */
    nvme_mem_t *bufmem;   /* ntb_buf=device: the memory fio's buffers come from */
    struct pci_dev *pdev; /* ntb_map=per-io: the function buffers are mapped for */
    bool warned;
};

/* ntb_map=per-io: what an io_u's mapping was (in io_u->engine_data: its device address). */
static enum dma_data_direction dma_dir(const struct io_u *io_u)
{
    return io_u->ddir == DDIR_READ ? DMA_FROM_DEVICE : DMA_TO_DEVICE;
}

static void unmap_io(struct ntbfio *j, struct io_u *io_u)
{
    if (j->pdev && io_u->engine_data) {
        dma_unmap_single(j->pdev, (dma_addr_t)(uintptr_t)io_u->engine_data, io_u->xfer_buflen,
                         dma_dir(io_u));
        io_u->engine_data = NULL;
    }
}

/* Completion callbacks run inside our own poll/wait/delete calls, in the job's thread. */
static __thread struct ntbfio *polling;

static void ntbfio_done(void *arg, const struct nvme_cpl *cpl)
{
    struct io_u *io_u = arg;
    struct ntbfio *j = polling;
    if (!j)
        return; /* cancelled at cleanup: fio has freed its io_us by then (mappings go with
                   the function's binding) */
    unmap_io(j, io_u);
    io_u->error = cpl->rc ? (unsigned)-cpl->rc : 0;
    if (cpl->rc && !j->warned) {
        j->warned = true;
        log_err("ntbnvme: %s of %llu bytes at offset %llu failed: %s (NVMe status %#x)\n",
                io_ddir_name(io_u->ddir), io_u->xfer_buflen, io_u->offset,
                strerror(-cpl->rc), cpl->status);
    }
    if (j->ndone < 2 * j->slots)
        j->done[j->ndone++] = io_u;
    else
        log_err("ntbnvme: more completions than I/O in flight: one is lost\n");
}

static int ntbfio_poll(struct ntbfio *j)
{
    polling = j;
    int rc = nvme_qpair_poll(j->qp, 0);
    polling = NULL;
    return rc;
}

static int ntbfio_wait(struct ntbfio *j, int timeout_ms)
{
    polling = j;
    int rc = nvme_qpair_wait(j->qp, timeout_ms);
    polling = NULL;
    return rc;
}

/* Every block size a job may use must be whole blocks of the namespace, and a read or write
 * must fit in one command. */
static int check_sizes(struct thread_data *td, const struct nvme_ns_info *ns, size_t max_transfer,
                       const char *dev)
{
    const char *what[DDIR_RWDIR_CNT] = { "read", "write", "trim" };
    const bool used[DDIR_RWDIR_CNT] = { td_read(td), td_write(td), td_trim(td) };
    for (int d = 0; d < DDIR_RWDIR_CNT; d++) {
        if (!used[d])
            continue; /* verify reads use the write sizes */
        unsigned long long v[3] = { td->o.min_bs[d], td->o.max_bs[d], td->o.ba[d] };
        for (int i = 0; i < 3; i++)
            if (v[i] % ns->block_size) {
                log_err("ntbnvme: %s %s %llu is not a multiple of the block size of %s "
                        "namespace %u (%u bytes): set bs= (and ba=) to multiples of %u\n",
                        what[d], i == 2 ? "alignment" : "block size", v[i], dev, ns->nsid,
                        ns->block_size, ns->block_size);
                return -EINVAL;
            }
        if (d != DDIR_TRIM && td->o.max_bs[d] > max_transfer) {
            log_err("ntbnvme: %s block size %llu is more than one command of %s moves (%zu "
                    "bytes): keep bs= at or below %zu\n", what[d], td->o.max_bs[d], dev,
                    max_transfer, max_transfer);
            return -EINVAL;
        }
    }
    return 0;
}

/* Every file of a job is the whole namespace; fio's offsets are bytes into it. */
static int ntbfio_setup(struct thread_data *td)
{
    struct ntbfio_opts *o = td->eo;
    if (!o->device || !*o->device) {
        log_err("ntbnvme: no device: set ntb_device=NAME, an NVMe of the fabric "
                "(ntblend device list), e.g. ntb_device=nvme0\n");
        td_vmsg(td, EINVAL, "ntb_device is not set", "ntbnvme setup");
        return 1;
    }
    /* Opened here only to learn the size (in fio's main process, before jobs start). */
    struct ntbfio_dev *sd = dev_get(o->device, td->o.use_thread);
    if (!sd) {
        td_vmsg(td, ENODEV, "cannot open the device", "ntbnvme setup");
        return 1;
    }
    struct nvme_ns_info ns;
    struct nvme_ctrl_info ci;
    int rc = nvme_ns_info(sd->dev, o->nsid, &ns);
    if (rc)
        log_err("ntbnvme: %s\n", nvme_errmsg());
    else if (!(rc = nvme_ctrl_info(sd->dev, &ci)))
        rc = check_sizes(td, &ns, ci.max_transfer, o->device);
    dev_put(sd);
    if (rc) {
        td_vmsg(td, -rc, rc == -EINVAL ? "block size" : "no such namespace", "ntbnvme setup");
        return 1;
    }
    struct fio_file *f;
    unsigned i;
    for_each_file(td, f, i) {
        f->real_file_size = ns.capacity;
        fio_file_set_size_known(f);
    }
    return 0;
}

static void ntbfio_cleanup(struct thread_data *td)
{
    struct ntbfio *j = td->io_ops_data;
    if (!j)
        return;
    if (j->qp) {
        /* Commands still outstanding are cancelled; their callbacks leave the io_us alone. */
        polling = NULL;
        if (nvme_qpair_delete(j->qp))
            log_err("ntbnvme: deleting the queue pair: %s\n", nvme_errmsg());
    }
    dev_put(j->sd);
    free(j->queued);
    free(j->done);
    free(j);
    td->io_ops_data = NULL;
}

static int ntbfio_init(struct thread_data *td)
{
    struct ntbfio_opts *o = td->eo;
    struct ntbfio *j = calloc(1, sizeof *j);
    if (!j) {
        td_verror(td, ENOMEM, "ntbnvme init");
        return 1;
    }
    td->io_ops_data = j; /* cleanup frees what init got */
    j->slots = td->o.iodepth + 1;
    j->queued = calloc(j->slots, sizeof *j->queued);
    j->done = calloc(2 * (size_t)j->slots, sizeof *j->done);
    if (!j->queued || !j->done) {
        td_verror(td, ENOMEM, "ntbnvme init");
        return 1;
    }
    if (!o->device || !*o->device) {
        log_err("ntbnvme: no device: set ntb_device=NAME\n");
        td_vmsg(td, EINVAL, "ntb_device is not set", "ntbnvme init");
        return 1;
    }
    j->sd = dev_get(o->device, td->o.use_thread);
    if (!j->sd) {
        td_vmsg(td, ENODEV, "cannot open the device", "ntbnvme init");
        return 1;
    }
    struct nvme_ctrl_info ci;
    nvme_ctrl_info(j->sd->dev, &ci);
    j->nsid = o->nsid;
    j->max_transfer = ci.max_transfer;
    if (nvme_ns_info(j->sd->dev, j->nsid, &j->ns)) {
        log_err("ntbnvme: %s\n", nvme_errmsg());
        td_vmsg(td, ENXIO, "no such namespace", "ntbnvme init");
        return 1;
    }
    if (j->slots > ci.max_depth) {
        log_err("ntbnvme: iodepth=%u is more than a queue of %s holds: at most %u\n",
                td->o.iodepth, o->device, ci.max_depth - 1);
        td_vmsg(td, EINVAL, "iodepth too large", "ntbnvme init");
        return 1;
    }
    if (o->map == MAP_PER_IO) {
        if (!(j->pdev = nvme_pci_dev(j->sd->dev))) {
            log_err("ntbnvme: ntb_map=per-io maps buffers through the driver model: give a "
                    "PCI function of this host's tree, ntb_device=pci:BB:DD.F (not %s)\n",
                    o->device);
            td_vmsg(td, EINVAL, "ntb_map=per-io needs a pci: device", "ntbnvme init");
            return 1;
        }
        if (o->buf == PLACE_DEVICE) {
            log_err("ntbnvme: ntb_map=per-io takes its buffers from host RAM: drop "
                    "ntb_buf=device\n");
            td_vmsg(td, EINVAL, "ntb_map=per-io with ntb_buf=device", "ntbnvme init");
            return 1;
        }
    }
    struct nvme_qpair_opts qo = {
        .depth = j->slots < 2 ? 2 : j->slots,
        .sq_place = o->sq == PLACE_LOCAL ? NVME_PLACE_LOCAL : NVME_PLACE_DEVICE,
        .cq_place = o->cq == PLACE_DEVICE ? NVME_PLACE_DEVICE : NVME_PLACE_LOCAL,
        .irq = o->irq ? o->irq + td->thread_number - 1 : 0,
    };
    int rc = nvme_qpair_create(j->sd->dev, &qo, &j->qp);
    if (rc) {
        log_err("ntbnvme: %s\n", nvme_errmsg());
        td_vmsg(td, -rc, "cannot create a queue pair", "ntbnvme init");
        return 1;
    }
    return 0;
}

/* fio's I/O buffers, from memory the device reaches: no copies on the way. */
static int ntbfio_iomem_alloc(struct thread_data *td, size_t size)
{
    struct ntbfio *j = td->io_ops_data;
    struct ntbfio_opts *o = td->eo;
    nvme_dev_t *d = j->sd->dev;
    if (j->pdev) {
        /* Host RAM no device reaches until an I/O maps a piece of it. */
        if (!(td->orig_buffer = dma_host_alloc(size))) {
            log_err("ntbnvme: no host RAM for the buffers (%zu bytes): %s\n", size,
                    strerror(errno));
            return 1;
        }
        return 0;
    }
    if (o->buf == PLACE_DEVICE && !(j->bufmem = nvme_mem_alloc(d, size, NVME_PLACE_DEVICE))) {
        log_err("ntbnvme: %s\n", nvme_errmsg());
        return 1;
    }
    td->orig_buffer = nvme_buf_alloc(d, j->bufmem, size);
    if (!td->orig_buffer) {
        log_err("ntbnvme: %s\n", nvme_errmsg());
        return 1;
    }
    return 0;
}

static void ntbfio_iomem_free(struct thread_data *td)
{
    struct ntbfio *j = td->io_ops_data;
    if (!j)
        return;
    if (td->orig_buffer && j->pdev)
        dma_host_free(td->orig_buffer);
    else if (td->orig_buffer)
        nvme_buf_free(j->sd->dev, td->orig_buffer);
    td->orig_buffer = NULL;
    if (j->bufmem)
        nvme_mem_free(j->bufmem);
    j->bufmem = NULL;
}

static enum fio_q_status reject(struct ntbfio *j, struct io_u *io_u, int err, const char *why)
{
    if (!j->warned) {
        j->warned = true;
        log_err("ntbnvme: %s of %llu bytes at offset %llu: %s\n", io_ddir_name(io_u->ddir),
                io_u->xfer_buflen, io_u->offset, why);
    }
    io_u->error = err;
    return FIO_Q_COMPLETED;
}

static enum fio_q_status ntbfio_queue(struct thread_data *td, struct io_u *io_u)
{
    struct ntbfio *j = td->io_ops_data;
    enum nvme_op op;
    uint64_t lba = 0;
    uint32_t nblocks = 0;
    void *buf = NULL;

    fio_ro_check(td, io_u);
    switch (io_u->ddir) {
    case DDIR_READ:
    case DDIR_WRITE:
    case DDIR_TRIM: {
        uint32_t bs = j->ns.block_size;
        if (io_u->offset % bs || io_u->xfer_buflen % bs || !io_u->xfer_buflen)
            return reject(j, io_u, EINVAL, "not whole blocks of the namespace: use bs= and "
                          "offsets that are multiples of its block size");
        if (io_u->ddir != DDIR_TRIM && io_u->xfer_buflen > j->max_transfer)
            return reject(j, io_u, EINVAL, "more than one command moves: keep bs= at or "
                          "below the controller's max transfer (ntbnvme checks bs= at setup)");
        if (io_u->xfer_buflen / bs > UINT32_MAX)
            return reject(j, io_u, EINVAL, "too many blocks for one command");
        lba = io_u->offset / bs;
        nblocks = (uint32_t)(io_u->xfer_buflen / bs);
        op = io_u->ddir == DDIR_READ ? NVME_OP_READ
           : io_u->ddir == DDIR_WRITE ? NVME_OP_WRITE : NVME_OP_DEALLOCATE;
        buf = io_u->ddir == DDIR_TRIM ? NULL : io_u->xfer_buf;
        break;
    }
    case DDIR_SYNC:
    case DDIR_DATASYNC:
    case DDIR_SYNC_FILE_RANGE:
        op = NVME_OP_FLUSH;
        break;
    default:
        return reject(j, io_u, EINVAL, "not an operation this engine knows");
    }

    int rc;
    io_u->engine_data = NULL;
    if (j->pdev && buf) {
        dma_addr_t io = dma_map_single(j->pdev, buf, io_u->xfer_buflen, dma_dir(io_u));
        if (dma_mapping_error(j->pdev, io)) {
            if (errno == ENOSPC && (j->nqueued || nvme_qpair_outstanding(j->qp)))
                return FIO_Q_BUSY; /* mappings come back as I/O completes */
            return reject(j, io_u, errno, "dma_map_single failed");
        }
        io_u->engine_data = (void *)(uintptr_t)io;
        rc = nvme_submit_dma(j->qp, op, j->nsid, lba, nblocks, io, NVME_SUBMIT_DEFER,
                             ntbfio_done, io_u);
        if (rc)
            unmap_io(j, io_u);
    } else {
        rc = nvme_submit(j->qp, op, j->nsid, lba, nblocks, buf, NVME_SUBMIT_DEFER,
                         ntbfio_done, io_u);
    }
    if (rc == -EAGAIN && (j->nqueued || nvme_qpair_outstanding(j->qp)))
        return FIO_Q_BUSY;
    if (rc) {
        if (!j->warned) {
            j->warned = true;
            log_err("ntbnvme: %s\n", nvme_errmsg());
        }
        io_u->error = -rc;
        return FIO_Q_COMPLETED;
    }
    j->queued[j->nqueued++] = io_u;
    return FIO_Q_QUEUED;
}

/* Rings the doorbell for what queue() left; the I/O is issued from now on. */
static int ntbfio_commit(struct thread_data *td)
{
    struct ntbfio *j = td->io_ops_data;
    if (!j->nqueued)
        return 0;
    if (fio_fill_issue_time(td)) {
        struct timespec now;
        fio_gettime(&now, NULL);
        for (unsigned i = 0; i < j->nqueued; i++) {
            j->queued[i]->issue_time = now;
            io_u_queued(td, j->queued[i]);
        }
    }
    io_u_mark_submit(td, j->nqueued);
    j->nqueued = 0;
    int rc = ntbfio_poll(j);
    return rc < 0 ? rc : 0;
}

static int ms_left(const struct timespec *deadline)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long long ms = (deadline->tv_sec - now.tv_sec) * 1000LL +
                   (deadline->tv_nsec - now.tv_nsec) / 1000000;
    return ms < 0 ? 0 : ms > INT32_MAX ? INT32_MAX : (int)ms;
}

static int ntbfio_getevents(struct thread_data *td, unsigned int min, unsigned int max,
                            const struct timespec *t)
{
    struct ntbfio *j = td->io_ops_data;
    /* Those handed out by the last call have been taken by fio's event() calls. */
    j->ndone -= j->nreaped;
    memmove(j->done, j->done + j->nreaped, j->ndone * sizeof *j->done);
    j->nreaped = 0;

    struct timespec deadline;
    if (t) {
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_sec += t->tv_sec;
        deadline.tv_nsec += t->tv_nsec;
        if (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_sec++;
            deadline.tv_nsec -= 1000000000L;
        }
    }
    if (j->ndone < max) {
        int rc = ntbfio_poll(j);
        if (rc < 0)
            return rc;
    }
    while (j->ndone < min) {
        int rc = ntbfio_wait(j, t ? ms_left(&deadline) : -1);
        if (rc == 0)
            break; /* nothing outstanding */
        if (rc == -ETIMEDOUT) {
            if (t && !ms_left(&deadline))
                break;
            continue; /* commands past their own timeout complete with -ETIMEDOUT */
        }
        if (rc < 0)
            return rc;
    }
    j->nreaped = j->ndone < max ? j->ndone : max;
    return (int)j->nreaped;
}

static struct io_u *ntbfio_event(struct thread_data *td, int event)
{
    struct ntbfio *j = td->io_ops_data;
    return j->done[event];
}

static int ntbfio_open_file(struct thread_data *td, struct fio_file *f) { return 0; }

static int ntbfio_close_file(struct thread_data *td, struct fio_file *f) { return 0; }

static struct ioengine_ops ntbfio_ops = {
    .name = "ntbnvme",
    .version = FIO_IOOPS_VERSION,
    .flags = FIO_DISKLESSIO | FIO_NODISKUTIL | FIO_ASYNCIO_SETS_ISSUE_TIME,
    .setup = ntbfio_setup,
    .init = ntbfio_init,
    .cleanup = ntbfio_cleanup,
    .queue = ntbfio_queue,
    .commit = ntbfio_commit,
    .getevents = ntbfio_getevents,
    .event = ntbfio_event,
    .open_file = ntbfio_open_file,
    .close_file = ntbfio_close_file,
    .iomem_alloc = ntbfio_iomem_alloc,
    .iomem_free = ntbfio_iomem_free,
    .options = ntbfio_options,
    .option_struct_size = sizeof(struct ntbfio_opts),
};

/* What fio looks up in an external engine: the one symbol the module exports (it is built with
 * -fvisibility=hidden like the rest of the tree). */
__attribute__((visibility("default"))) void get_ioengine(struct ioengine_ops **ops);
void get_ioengine(struct ioengine_ops **ops) { *ops = &ntbfio_ops; }
