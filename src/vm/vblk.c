/*
 * virtio-blk over libntbnvme (vblk.h): requests taken from a virtqueue become NVMe commands
 * whose data pointers are the device's addresses of the guest's buffers.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hop.h"
#include "vblk.h"
#include "vqcoal.h"
#include "wpol.h"

#define VIRTIO_BLK_F_SIZE_MAX 1
#define VIRTIO_BLK_F_SEG_MAX 2
#define VIRTIO_BLK_F_BLK_SIZE 6
#define VIRTIO_BLK_F_FLUSH 9
#define VIRTIO_BLK_F_MQ 12
#define VIRTIO_F_VERSION_1 32
#define VIRTIO_BLK_T_IN 0
#define VIRTIO_BLK_T_OUT 1
#define VIRTIO_BLK_T_FLUSH 4
#define VIRTIO_BLK_T_GET_ID 8
#define VIRTIO_BLK_S_OK 0
#define VIRTIO_BLK_S_IOERR 1
#define VIRTIO_BLK_S_UNSUPP 2
#define VBLK_CONFIG_SIZE 60
/* Without indirect descriptors a request takes seg_max + 2 ring entries, and a guest waits for
 * room forever if that is more than its queue has (QEMU gives 128). */
#define VBLK_SEG_MAX 64
#define SPIN_NS 50000ull /* poll this long for completions before waiting in the library */
/* After the last completion is signalled, a guest sends its next request once it has taken the
 * interrupt and submitted again: under KVM in microseconds, under TCG here 50-200 us at QD1
 * (scripts/hop-report.sh), and at QD32 a request every 100-150 us, the guest's vCPU thread
 * being the bottleneck. Watching the ring for it (no kick asked for) saves the guest its kick,
 * which under TCG is that thread's time, and the back end a wake-up; but a spinning thread
 * takes a CPU QEMU's main loop or the NVMe model may need, so the wait policy decides how
 * long: a spin as long as these gaps have lately been, at most AVAIL_SPIN_NS (gaps longer than
 * that wear the spin down to a microsecond, probed now and then), then yields, which give the
 * CPU to any of those threads that wants it, for at most AVAIL_YIELD_NS (4 yields that run
 * others end them sooner), then a sleep on the kick (docs/vm.md). Under TCG, against no yields
 * (interleaved runs): QD1 51-79 us against 86-93, QD32 6300-7800 IOPS against 5800-6800. */
#define AVAIL_SPIN_NS 200000u
#define AVAIL_YIELD_NS 400000u

struct vreq {
    struct vqio *io;
    uint16_t head;
    uint8_t status;
    uint32_t pending; /* NVMe commands out, plus one while submitting */
    uint32_t written; /* bytes written into the chain, for the used ring */
    uint8_t *status_at;
};

struct vqio {
    struct vblk *b;
    struct vq *q;
    const struct vq_mem *mem;
    nvme_qpair_t *qp;
    pthread_t thread;
    int stop_fd;
    _Atomic bool stop;
    struct vq_coal coal;        /* when to call the guest for completions on the used ring */
    struct wpol_site idle_wait; /* the next request after the last is answered */
    struct wpol_site hold_wait; /* the next request while completions are held */
    struct vreq req[VQ_MAX_SIZE];
    struct vq_elem e;
};

struct vblk {
    nvme_dev_t *d;
    char name[32];
    uint32_t nsid, queues;
    struct nvme_ns_info ns;
    struct nvme_ctrl_info ctrl;
    uint64_t ram_io;
    dev_t ram_dev;
    ino_t ram_ino;
    struct vhu_device dev;
    struct vqio *io[VHU_MAX_QUEUES];
    _Atomic uint64_t done, failed;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void config(void *arg, uint8_t *c)
{
    struct vblk *b = arg;
    put_le(c + 0, b->ns.capacity / 512, 8);           /* capacity in 512-byte sectors */
    put_le(c + 8, b->ctrl.max_transfer, 4);           /* size_max */
    put_le(c + 12, VBLK_SEG_MAX, 4);                  /* seg_max */
    put_le(c + 20, b->ns.block_size, 4);              /* blk_size */
    put_le(c + 34, b->queues, 2);                     /* num_queues */
}

static bool is_guest_ram(void *arg, int fd)
{
    struct vblk *b = arg;
    struct stat st;
    return b->ram_ino && !fstat(fd, &st) && st.st_dev == b->ram_dev && st.st_ino == b->ram_ino;
}

static void finish(struct vreq *r)
{
    struct vqio *io = r->io;
    *r->status_at = r->status;
    vq_push(io->q, r->head, r->written);
    vq_coal_completion(&io->coal, now_ns());
    atomic_fetch_add(r->status ? &io->b->failed : &io->b->done, 1);
}

static void put_req(struct vreq *r)
{
    if (!--r->pending)
        finish(r);
}

static void on_cpl(void *arg, const struct nvme_cpl *cpl)
{
    struct vreq *r = arg;
    hop_mark("cpl", r->head);
    if (cpl->rc)
        r->status = VIRTIO_BLK_S_IOERR;
    put_req(r);
}

/* Submit one command, waiting for room in the queue pair when it is full. */
static int submit(struct vqio *io, struct vreq *r, enum nvme_op op, uint64_t lba, uint32_t nb,
                  uint64_t ioaddr)
{
    for (;;) {
        r->pending++;
        hop_mark("submit", r->head);
        int rc = op == NVME_OP_FLUSH ? nvme_submit(io->qp, op, io->b->nsid, 0, 0, NULL, 0, on_cpl, r)
                                     : nvme_submit_dma(io->qp, op, io->b->nsid, lba, nb, ioaddr,
                                                       0, on_cpl, r);
        if (!rc)
            return 0;
        r->pending--;
        if (rc != -EAGAIN)
            return rc;
        nvme_qpair_wait(io->qp, -1); /* completions make room (and may finish r: it is held) */
    }
}

/* Read or write the data part of a chain: [from, to) of its bytes after the header. */
static int data_io(struct vqio *io, struct vreq *r, const struct vq_elem *e, uint32_t seg0,
                   uint32_t skip, uint32_t segn, uint32_t last_len, bool write, uint64_t sector)
{
    struct vblk *b = io->b;
    uint32_t bs = b->ns.block_size;
    uint64_t byte = sector * 512;
    if (byte % bs)
        return -EINVAL;
    uint64_t lba = byte / bs;
    for (uint32_t i = seg0; i <= segn && i < e->nseg; i++) {
        uint64_t gpa = e->seg[i].gpa + (i == seg0 ? skip : 0);
        uint64_t whole = i == segn ? last_len : e->seg[i].len;
        if (i == seg0 && skip > whole)
            return -EINVAL;
        uint64_t len = whole - (i == seg0 ? skip : 0);
        if (!len)
            continue;
        if (e->seg[i].write == write) /* a read fills device-writable buffers, and back */
            return -EINVAL;
        while (len) {
            uint64_t off, n = vq_gpa_contig(io->mem, gpa);
            n = n < len ? n : len;
            n = n < b->ctrl.max_transfer ? n : b->ctrl.max_transfer;
            if (!n || n % bs || vq_gpa_file(io->mem, gpa, n, &off))
                return -EFAULT;
            if (lba + n / bs > b->ns.blocks)
                return -ERANGE;
            int rc = submit(io, r, write ? NVME_OP_WRITE : NVME_OP_READ, lba, (uint32_t)(n / bs),
                            b->ram_io + off);
            if (rc)
                return rc;
            if (!write)
                r->written += (uint32_t)n;
            lba += n / bs;
            gpa += n;
            len -= n;
        }
    }
    return 0;
}

static void handle(struct vqio *io, const struct vq_elem *e)
{
    struct vreq *r = &io->req[e->head];
    *r = (struct vreq){ .io = io, .head = e->head, .status = VIRTIO_BLK_S_OK, .pending = 1 };
    /* The status byte: the last byte of the last (device-writable) descriptor. */
    const struct vq_seg *last = &e->seg[e->nseg - 1];
    uint8_t *st = last->len && last->write ? vq_gpa(io->mem, last->gpa + last->len - 1, 1) : NULL;
    uint8_t hdr[16];
    uint32_t got = 0, seg = 0, skip = 0;
    for (; seg < e->nseg && got < sizeof hdr; seg++) {
        const struct vq_seg *s = &e->seg[seg];
        uint32_t n = s->len < sizeof hdr - got ? s->len : (uint32_t)(sizeof hdr - got);
        const uint8_t *p = s->write ? NULL : vq_gpa(io->mem, s->gpa, n);
        if (!p)
            break;
        memcpy(hdr + got, p, n);
        got += n;
        skip = n;
    }
    if (!st || got < sizeof hdr) {
        /* Nowhere to say so: the guest broke the rules (virtio 1.1 §5.2.6.1). */
        fprintf(stderr, "vblk: queue %u: request %u without header or status byte\n",
                io->q->index, e->head);
        vq_push(io->q, e->head, 0);
        vq_coal_completion(&io->coal, now_ns());
        atomic_fetch_add(&io->b->failed, 1);
        return;
    }
    r->status_at = st;
    r->written = 1;
    seg--; /* the header's last segment; data starts at `skip` in it */
    if (skip == e->seg[seg].len) {
        seg++;
        skip = 0;
    }
    uint32_t type, sector_lo, sector_hi;
    memcpy(&type, hdr, 4);
    memcpy(&sector_lo, hdr + 8, 4);
    memcpy(&sector_hi, hdr + 12, 4);
    uint64_t sector = (uint64_t)sector_hi << 32 | sector_lo;
    uint32_t segn = e->nseg - 1, last_len = last->len - 1;
    int rc = 0;
    switch (type) {
    case VIRTIO_BLK_T_IN: case VIRTIO_BLK_T_OUT:
        rc = data_io(io, r, e, seg, skip, segn, last_len, type == VIRTIO_BLK_T_OUT, sector);
        break;
    case VIRTIO_BLK_T_FLUSH:
        rc = submit(io, r, NVME_OP_FLUSH, 0, 0, 0);
        break;
    case VIRTIO_BLK_T_GET_ID: {
        char id[20] = { 0 }; /* 20 bytes, NUL-terminated only when shorter */
        size_t l = strlen(io->b->name) < sizeof id - 8 ? strlen(io->b->name) : sizeof id - 8;
        memcpy(id, "ntblend-", 8);
        memcpy(id + 8, io->b->name, l);
        uint8_t *p = seg < e->nseg && e->seg[seg].write && e->seg[seg].len - skip >= 20
                         ? vq_gpa(io->mem, e->seg[seg].gpa + skip, 20) : NULL;
        if (p) {
            memcpy(p, id, 20);
            r->written += 20;
        } else {
            rc = -EINVAL;
        }
        break;
    }
    default:
        r->status = VIRTIO_BLK_S_UNSUPP;
    }
    if (rc)
        r->status = VIRTIO_BLK_S_IOERR;
    put_req(r);
}

/* Call the guest for the completions on the used ring: when the coalescing says so, or now
 * (force). */
static void notify(struct vqio *io, bool force)
{
    if (io->coal.waiting && (force || vq_coal_due(&io->coal, now_ns()))) {
        hop_mark("call", 0);
        vq_notify(io->q);
        vq_coal_called(&io->coal);
    }
}

/* Sleep until the guest kicks (or the queue stops), at most max_ns: the kick asked for, the
 * ring looked at once more (the guest may have added a request before it saw the ask). */
static int kick_sleep(void *arg, uint64_t max_ns)
{
    struct vqio *io = arg;
    struct vq *q = io->q;
    vq_kick_enable(q, true);
    if (q->broken || !vq_pending(q)) {
        struct pollfd p[2] = { { q->kick_fd, POLLIN, 0 }, { io->stop_fd, POLLIN, 0 } };
        struct timespec ts = { .tv_sec = (time_t)(max_ns / 1000000000u),
                               .tv_nsec = (long)(max_ns % 1000000000u) };
        bool forever = max_ns >= (uint64_t)INT_MAX * 1000000000ull;
        if (ppoll(p, 2, forever ? NULL : &ts, NULL) > 0 && (p[0].revents & POLLIN)) {
            uint64_t v;
            ssize_t r = read(q->kick_fd, &v, sizeof v);
            (void)r;
            hop_mark("kick", 0);
        }
    }
    vq_kick_enable(q, false);
    return 0;
}

static bool request_ready(void *arg)
{
    struct vqio *io = arg;
    return vq_pending(io->q) || atomic_load_explicit(&io->stop, memory_order_relaxed);
}

/* Nothing outstanding: wait for the guest's next request by the wait policy — watch the ring
 * (kicks stay off) as long as the site has learnt requests come, then sleep on the kick. */
static void wait_request(struct vqio *io)
{
    struct wpol_how how = { .ready = request_ready, .arg = io, .sleep = kick_sleep,
                            .sleep_ns = 1000000000ull };
    wpol_wait(&io->idle_wait, &how);
}

/* Completions are held and nothing else is to be done: watch for the guest's next request
 * until the hold ends. */
static void wait_hold(struct vqio *io)
{
    struct wpol_how how = { .ready = request_ready, .arg = io, .sleep = kick_sleep,
                            .deadline_ns = io->coal.until };
    wpol_wait(&io->hold_wait, &how);
}

static void *io_thread(void *arg)
{
    struct vqio *io = arg;
    struct vq *q = io->q;
    uint64_t spin_from = 0;
    while (!atomic_load(&io->stop)) {
        int got = 0, rc;
        while ((rc = vq_pop(q, &io->e)) > 0) {
            hop_mark("pop", io->e.head);
            vq_coal_request(&io->coal, now_ns());
            handle(io, &io->e);
            got++;
        }
        if (rc < 0)
            fprintf(stderr, "vblk: queue %u: the guest made a malformed request; the queue is "
                            "served no more\n", q->index);
        if (nvme_qpair_outstanding(io->qp)) {
            int n = nvme_qpair_poll(io->qp, 0);
            notify(io, rc < 0);
            uint64_t now = now_ns();
            if (n > 0 || got || !spin_from)
                spin_from = now;
            else if (now - spin_from > SPIN_NS && !io->coal.waiting)
                nvme_qpair_wait(io->qp, 1); /* spins, yields, then sleeps */
            continue;
        }
        if (rc >= 0 && io->coal.waiting && !vq_coal_due(&io->coal, now_ns())) {
            wait_hold(io);
            continue;
        }
        notify(io, true);
        spin_from = 0;
        if (rc < 0)
            kick_sleep(io, UINT64_MAX); /* served no more: only a stop ends this */
        else if (!vq_pending(q))
            wait_request(io);
    }
    /* Answer every request taken before the queue stops (GET_VRING_BASE waits for this). */
    while (nvme_qpair_outstanding(io->qp) && nvme_qpair_wait(io->qp, -1) >= 0)
        ;
    notify(io, true);
    return NULL;
}

static int start(void *arg, struct vq *q, const struct vq_mem *mem)
{
    struct vblk *b = arg;
    if (q->index >= b->queues)
        return -EINVAL;
    struct vqio *io = calloc(1, sizeof *io);
    if (!io)
        return -ENOMEM;
    io->b = b;
    io->q = q;
    io->idle_wait = (struct wpol_site)WPOL_SITE("vhost-user-blk next request", AVAIL_SPIN_NS,
                                                AVAIL_YIELD_NS);
    io->idle_wait.fast_yields = UINT32_MAX; /* only AVAIL_YIELD_NS ends the yields */
    io->hold_wait = (struct wpol_site)WPOL_SITE("vhost-user-blk completions held", AVAIL_SPIN_NS,
                                                AVAIL_YIELD_NS);
    io->hold_wait.fast_yields = UINT32_MAX;
    io->stop_fd = eventfd(0, EFD_CLOEXEC);
    io->mem = mem;
    struct nvme_qpair_opts o = { .depth = q->num < b->ctrl.max_depth ? q->num : b->ctrl.max_depth,
                                 .sq_place = NVME_PLACE_DEVICE, .cq_place = NVME_PLACE_LOCAL };
    int rc = io->stop_fd < 0 ? -errno : nvme_qpair_create(b->d, &o, &io->qp);
    if (!rc) {
        vq_kick_enable(q, false);
        rc = -pthread_create(&io->thread, NULL, io_thread, io);
        if (rc)
            nvme_qpair_delete(io->qp);
    }
    if (rc) {
        if (io->stop_fd >= 0)
            close(io->stop_fd);
        free(io);
        return rc;
    }
    b->io[q->index] = io;
    return 0;
}

static void stop(void *arg, struct vq *q)
{
    struct vblk *b = arg;
    struct vqio *io = q->index < VHU_MAX_QUEUES ? b->io[q->index] : NULL;
    if (!io)
        return;
    atomic_store(&io->stop, true);
    uint64_t one = 1;
    ssize_t w = write(io->stop_fd, &one, sizeof one);
    (void)w;
    pthread_join(io->thread, NULL);
    if (getenv("NTBLEND_WAIT_DEBUG"))
        fprintf(stderr, "vblk: queue %u: %llu completions, %llu interrupts asked for, %llu batches "
                        "held (%llu probes)\n", q->index,
                (unsigned long long)io->coal.n_completions, (unsigned long long)io->coal.n_calls,
                (unsigned long long)io->coal.n_held, (unsigned long long)io->coal.n_probes);
    hop_flush();
    nvme_qpair_delete(io->qp);
    close(io->stop_fd);
    b->io[q->index] = NULL;
    wpol_site_done(&io->idle_wait);
    wpol_site_done(&io->hold_wait);
    free(io);
}

int vblk_open(const char *device, uint32_t nsid, uint32_t queues, struct vblk **out)
{
    if (!queues || queues > VHU_MAX_QUEUES)
        return -EINVAL;
    struct vblk *b = calloc(1, sizeof *b);
    if (!b)
        return -ENOMEM;
    snprintf(b->name, sizeof b->name, "%s", device);
    b->nsid = nsid;
    int rc = nvme_open(device, NULL, &b->d);
    if (!rc)
        rc = nvme_ctrl_info(b->d, &b->ctrl);
    if (!rc)
        rc = nvme_ns_info(b->d, nsid, &b->ns);
    if (rc) {
        if (b->d)
            nvme_close(b->d);
        free(b);
        return rc;
    }
    b->queues = queues < b->ctrl.max_qpairs ? queues : b->ctrl.max_qpairs;
    b->dev = (struct vhu_device){
        .features = 1ull << VIRTIO_BLK_F_SIZE_MAX | 1ull << VIRTIO_BLK_F_SEG_MAX |
                    1ull << VIRTIO_BLK_F_BLK_SIZE | 1ull << VIRTIO_BLK_F_FLUSH |
                    (b->queues > 1 ? 1ull << VIRTIO_BLK_F_MQ : 0) | 1ull << VIRTIO_F_VERSION_1,
        .queues = b->queues, .config_size = VBLK_CONFIG_SIZE, .arg = b, .config = config,
        .start = start, .stop = stop, .is_guest_ram = is_guest_ram };
    *out = b;
    return 0;
}

nvme_dev_t *vblk_nvme(struct vblk *b) { return b->d; }

void vblk_set_ram(struct vblk *b, uint64_t ram_io, dev_t dev, ino_t ino)
{
    b->ram_io = ram_io;
    b->ram_dev = dev;
    b->ram_ino = ino;
}

const struct vhu_device *vblk_device(struct vblk *b) { return &b->dev; }

void vblk_stats(struct vblk *b, uint64_t *done, uint64_t *failed)
{
    *done = atomic_load(&b->done);
    *failed = atomic_load(&b->failed);
}

void vblk_close(struct vblk *b)
{
    if (!b)
        return;
    for (uint32_t i = 0; i < VHU_MAX_QUEUES; i++)
        if (b->io[i])
            stop(b, b->io[i]->q);
    nvme_close(b->d);
    free(b);
}
