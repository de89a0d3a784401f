/*
 * ntblend-nvmefs: every active namespace of a (borrowed) NVMe as a file, through FUSE, so
 * unmodified programs (dd, cmp, fio) can use it. The device is driven by libntbnvme in this
 * process; the files are nsN (the namespace's bytes, fixed size) and info (a text summary).
 *
 * This file owns the command line, the mount's life cycle (open, mount, loop, unmount,
 * close), a pool of queue pairs (one per FUSE worker in use: libntbnvme queue pairs are one
 * thread at a time) and the byte-to-block translation: I/O goes through a DMA bounce buffer
 * per queue pair, unaligned edges are read, modified and written back as whole blocks.
 *
 *   ntblend run --host b -- ntblend-nvmefs nvme0 /tmp/mnt
 *   ntblend run --host c -- ntblend-nvmefs pci:80:00.0 /tmp/mnt   # an NVMe lent to c
 */
#define _GNU_SOURCE
#define FUSE_USE_VERSION 312
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "ntblend/nvme.h"
#include "ntblend/version.h"

#define PROG "ntblend-nvmefs"
#define MAX_NS 64          /* namespaces shown; more are rare and listed as skipped */
#define MAX_THREADS 64
#define BOUNCE_MAX (1u << 20) /* per queue pair; a request is split into chunks of this */
#define RMW_LOCKS 64       /* stripes serialising read-modify-writes of partial blocks */
#define INFO_FILE 0        /* fi->fh of the info file; a namespace file's is its index + 1 */

struct slot {
    nvme_qpair_t *qp;
    void *bounce;
    struct slot *next;
};

struct nvmefs {
    const char *device;
    nvme_dev_t *dev;
    struct nvme_ctrl_info ci;
    struct nvme_ns_info ns[MAX_NS];
    unsigned nns;
    char info[4096];
    size_t info_len;
    enum nvme_place sq_place;
    size_t bounce_size;

    /* The queue-pair pool: up to nslots, created on first need, handed to one request at a
     * time. */
    pthread_mutex_t lock;
    pthread_cond_t freed;
    struct slot slots[MAX_THREADS];
    unsigned nslots, created;
    struct slot *free;

    pthread_mutex_t rmw[RMW_LOCKS];
    struct timespec mounted; /* every file's times */
};

static struct nvmefs fs = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .freed = PTHREAD_COND_INITIALIZER,
};

/* ---------------------------------------------------------------- the queue-pair pool */

/* Takes a slot to use alone: a free one, else a new (empty) one while fewer than nslots
 * exist, else waits for one to be given back. */
static struct slot *slot_get(void)
{
    pthread_mutex_lock(&fs.lock);
    while (!fs.free && fs.created >= fs.nslots)
        pthread_cond_wait(&fs.freed, &fs.lock);
    struct slot *s = fs.free;
    if (s)
        fs.free = s->next;
    else
        s = &fs.slots[fs.created++];
    pthread_mutex_unlock(&fs.lock);
    return s;
}

static void slot_put(struct slot *s)
{
    pthread_mutex_lock(&fs.lock);
    s->next = fs.free;
    fs.free = s;
    pthread_cond_signal(&fs.freed);
    pthread_mutex_unlock(&fs.lock);
}

/* A slot with its queue pair and bounce buffer, created on first use (a slot whose creation
 * failed is given back empty and tried again next time). NULL with *err set on failure. */
static struct slot *slot_ready(int *err)
{
    struct slot *s = slot_get();
    if (s->qp)
        return s;
    struct nvme_qpair_opts qo = { .depth = 8, .sq_place = fs.sq_place,
                                  .cq_place = NVME_PLACE_LOCAL };
    int rc = nvme_qpair_create(fs.dev, &qo, &s->qp);
    if (!rc && !s->bounce && !(s->bounce = nvme_buf_alloc(fs.dev, NULL, fs.bounce_size)))
        rc = -ENOMEM;
    if (!rc)
        return s;
    fprintf(stderr, PROG ": cannot set up an I/O queue pair: %s\n", nvme_errmsg());
    nvme_qpair_delete(s->qp);
    s->qp = NULL;
    slot_put(s);
    *err = rc == -ENOMEM || rc == -EBUSY ? -EAGAIN : -EIO;
    return NULL;
}

static void pool_free(void)
{
    for (unsigned i = 0; i < fs.created; i++) {
        if (fs.slots[i].bounce)
            nvme_buf_free(fs.dev, fs.slots[i].bounce);
        nvme_qpair_delete(fs.slots[i].qp);
    }
    fs.created = 0;
    fs.free = NULL;
}

/* ---------------------------------------------------------------- block I/O */

/* What a program sees of a device error: the library's finer codes say nothing to it. */
static int io_errno(int rc, const char *what, unsigned nsid, uint64_t lba)
{
    fprintf(stderr, PROG ": %s namespace %u at block %llu: %s\n", what, nsid,
            (unsigned long long)lba, nvme_errmsg());
    switch (rc) {
    case -ENOMEM:
    case -EAGAIN:
    case -EOPNOTSUPP:
        return rc;
    default:
        return -EIO;
    }
}

static void rmw_lock(uint64_t first, uint64_t last)
{
    unsigned a = (unsigned)(first % RMW_LOCKS), b = (unsigned)(last % RMW_LOCKS);
    if (a > b) {
        unsigned t = a;
        a = b;
        b = t;
    }
    pthread_mutex_lock(&fs.rmw[a]);
    if (b != a)
        pthread_mutex_lock(&fs.rmw[b]);
}

static void rmw_unlock(uint64_t first, uint64_t last)
{
    unsigned a = (unsigned)(first % RMW_LOCKS), b = (unsigned)(last % RMW_LOCKS);
    pthread_mutex_unlock(&fs.rmw[a]);
    if (b != a)
        pthread_mutex_unlock(&fs.rmw[b]);
}

/* The next piece of a request at byte pos with want bytes left: the blocks it touches (at
 * most one bounce buffer's worth), how far into the first one it starts, and how many of the
 * request's bytes it covers. */
static void chunk(uint32_t bs, uint64_t pos, size_t want, uint64_t *lba, uint64_t *nblk,
                  size_t *skip, size_t *take)
{
    uint64_t max_blocks = fs.bounce_size / bs;
    *lba = pos / bs;
    *skip = (size_t)(pos % bs);
    *nblk = (*skip + want + bs - 1) / bs;
    if (*nblk > max_blocks)
        *nblk = max_blocks;
    *take = (size_t)*nblk * bs - *skip;
    if (*take > want)
        *take = want;
}

static int ns_read(const struct nvme_ns_info *ns, char *out, size_t size, uint64_t off)
{
    if (off >= ns->capacity)
        return 0;
    if (size > ns->capacity - off)
        size = (size_t)(ns->capacity - off);
    int err = 0;
    struct slot *s = slot_ready(&err);
    if (!s)
        return err;
    uint32_t bs = ns->block_size;
    size_t done = 0;
    while (done < size) {
        uint64_t lba, nblk;
        size_t skip, take;
        chunk(bs, off + done, size - done, &lba, &nblk, &skip, &take);
        int rc = nvme_read(s->qp, ns->nsid, lba, (uint32_t)nblk, s->bounce);
        if (rc) {
            err = io_errno(rc, "reading", ns->nsid, lba);
            break;
        }
        memcpy(out + done, (char *)s->bounce + skip, take);
        done += take;
    }
    slot_put(s);
    /* Like read(2): what was read before an error counts. */
    return done ? (int)done : err;
}

static int ns_write(const struct nvme_ns_info *ns, const char *in, size_t size, uint64_t off)
{
    if (off >= ns->capacity)
        return -ENOSPC;
    if (size > ns->capacity - off)
        size = (size_t)(ns->capacity - off); /* a short write; the next one gets ENOSPC */
    int err = 0;
    struct slot *s = slot_ready(&err);
    if (!s)
        return err;
    uint32_t bs = ns->block_size;
    char *b = s->bounce;
    size_t done = 0;
    while (done < size) {
        uint64_t lba, nblk;
        size_t skip, take;
        chunk(bs, off + done, size - done, &lba, &nblk, &skip, &take);
        uint64_t last = lba + nblk - 1;
        bool head = skip != 0, tail = (skip + take) % bs != 0;
        int rc = 0;
        const char *what = "writing";
        if (head || tail) {
            /* Partial blocks: the bytes around ours must survive, so read them first. */
            rmw_lock(lba, last);
            what = "reading (to update part of a block)";
            if (head)
                rc = nvme_read(s->qp, ns->nsid, lba, 1, b);
            if (!rc && tail && (last != lba || !head))
                rc = nvme_read(s->qp, ns->nsid, last, 1, b + (size_t)(last - lba) * bs);
        }
        if (!rc) {
            memcpy(b + skip, in + done, take);
            what = "writing";
            rc = nvme_write(s->qp, ns->nsid, lba, (uint32_t)nblk, b);
        }
        if (head || tail)
            rmw_unlock(lba, last);
        if (rc) {
            err = io_errno(rc, what, ns->nsid, lba);
            break;
        }
        done += take;
    }
    slot_put(s);
    return done ? (int)done : err;
}

/* A flush of the namespace (@flush), or a deallocation of @nblk blocks at @lba. */
static int ns_cmd(const struct nvme_ns_info *ns, bool flush, uint64_t lba, uint64_t nblk)
{
    int err = 0;
    struct slot *s = slot_ready(&err);
    if (!s)
        return err;
    int rc = 0;
    if (flush) {
        rc = nvme_flush(s->qp, ns->nsid);
        if (rc)
            err = io_errno(rc, "flushing", ns->nsid, 0);
    }
    while (!flush && nblk) {
        /* Dataset Management ranges hold up to 2^32-1 blocks; keep each one modest. */
        uint32_t n = nblk > (1u << 20) ? 1u << 20 : (uint32_t)nblk;
        rc = nvme_deallocate(s->qp, ns->nsid, lba, n);
        if (rc) {
            err = io_errno(rc, "deallocating blocks of", ns->nsid, lba);
            break;
        }
        lba += n;
        nblk -= n;
    }
    slot_put(s);
    return err;
}

/* ---------------------------------------------------------------- the file system */

/* "/nsN" -> index into fs.ns; "/info" -> -2; anything else -> -1. */
static int lookup(const char *path)
{
    if (!strcmp(path, "/info"))
        return -2;
    unsigned nsid;
    char extra;
    if (sscanf(path, "/ns%u%c", &nsid, &extra) != 1)
        return -1;
    for (unsigned i = 0; i < fs.nns; i++)
        if (fs.ns[i].nsid == nsid) {
            char canon[32];
            snprintf(canon, sizeof canon, "/ns%u", nsid);
            return strcmp(canon, path) ? -1 : (int)i; /* "/ns01" is not a name */
        }
    return -1;
}

static void *fs_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
    cfg->direct_io = 1; /* no page cache between programs and the device */
    cfg->attr_timeout = 3600; /* sizes never change while mounted */
    cfg->entry_timeout = 3600;
    cfg->negative_timeout = 3600;
    /* O_TRUNC comes with open, where it is ignored as for a block device, instead of as a
     * truncate to 0, which a namespace cannot do. */
    if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
        conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
    conn->max_write = BOUNCE_MAX;
    return NULL;
}

static int fs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
    memset(st, 0, sizeof *st);
    st->st_uid = getuid();
    st->st_gid = getgid();
    st->st_atim = st->st_mtim = st->st_ctim = fs.mounted;
    if (!strcmp(path, "/")) {
        st->st_mode = S_IFDIR | 0755;
        st->st_nlink = 2;
        return 0;
    }
    int i = lookup(path);
    if (i == -1)
        return -ENOENT;
    st->st_nlink = 1;
    if (i == -2) {
        st->st_mode = S_IFREG | 0444;
        st->st_size = (off_t)fs.info_len;
        return 0;
    }
    st->st_mode = S_IFREG | 0600;
    st->st_size = (off_t)fs.ns[i].capacity;
    st->st_blksize = fs.ns[i].block_size;
    st->st_blocks = (blkcnt_t)(fs.ns[i].capacity / 512);
    return 0;
}

static int fs_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
                      struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
    if (strcmp(path, "/"))
        return -ENOTDIR;
    fill(buf, ".", NULL, 0, 0);
    fill(buf, "..", NULL, 0, 0);
    fill(buf, "info", NULL, 0, 0);
    for (unsigned i = 0; i < fs.nns; i++) {
        char name[32];
        snprintf(name, sizeof name, "ns%u", fs.ns[i].nsid);
        fill(buf, name, NULL, 0, 0);
    }
    return 0;
}

static int fs_open(const char *path, struct fuse_file_info *fi)
{
    int i = lookup(path);
    if (i == -1)
        return -ENOENT;
    if (i == -2) {
        if ((fi->flags & O_ACCMODE) != O_RDONLY)
            return -EACCES;
        fi->fh = INFO_FILE;
    } else {
        fi->fh = (uint64_t)i + 1;
    }
    fi->direct_io = 1;
    fi->keep_cache = 0;
    return 0;
}

static int fs_read(const char *path, char *buf, size_t size, off_t off,
                   struct fuse_file_info *fi)
{
    if (off < 0)
        return -EINVAL;
    if (fi->fh == INFO_FILE) {
        if ((size_t)off >= fs.info_len)
            return 0;
        size_t n = fs.info_len - (size_t)off < size ? fs.info_len - (size_t)off : size;
        memcpy(buf, fs.info + off, n);
        return (int)n;
    }
    return ns_read(&fs.ns[fi->fh - 1], buf, size, (uint64_t)off);
}

static int fs_write(const char *path, const char *buf, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    if (off < 0)
        return -EINVAL;
    if (fi->fh == INFO_FILE)
        return -EBADF;
    return ns_write(&fs.ns[fi->fh - 1], buf, size, (uint64_t)off);
}

static int fs_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
    if (fi->fh == INFO_FILE)
        return 0;
    return ns_cmd(&fs.ns[fi->fh - 1], true, 0, 0);
}

static int fs_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
    int i = lookup(path);
    if (i < 0)
        return i == -2 ? -EACCES : -ENOENT;
    /* A namespace has the size it has: "truncating" to it is fine (dd does), nothing else. */
    return (uint64_t)size == fs.ns[i].capacity ? 0 : -EPERM;
}

static int fs_fallocate(const char *path, int mode, off_t off, off_t len,
                        struct fuse_file_info *fi)
{
    if (fi->fh == INFO_FILE)
        return -EBADF;
    const struct nvme_ns_info *ns = &fs.ns[fi->fh - 1];
    if (off < 0 || len <= 0)
        return -EINVAL;
    uint64_t end = (uint64_t)off + (uint64_t)len;
    if (mode == 0) /* every block of a namespace is there already */
        return end <= ns->capacity ? 0 : -EFBIG;
    if (mode != (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE))
        return -EOPNOTSUPP;
    if (end > ns->capacity)
        end = ns->capacity;
    /* Only whole blocks can be deallocated; the partial ones at the edges are zeroed by
     * writing, as punching a hole promises zeroes. */
    uint32_t bs = ns->block_size;
    uint64_t first = ((uint64_t)off + bs - 1) / bs, last = end / bs; /* [first, last) */
    static const char zeroes[4096];
    uint64_t edges[2][2] = { { (uint64_t)off, first * bs < end ? first * bs : end },
                             { last * bs > (uint64_t)off ? last * bs : end, end } };
    for (int e = 0; e < 2; e++)
        for (uint64_t p = edges[e][0]; p < edges[e][1];) {
            size_t n = edges[e][1] - p < sizeof zeroes ? (size_t)(edges[e][1] - p)
                                                        : sizeof zeroes;
            int rc = ns_write(ns, zeroes, n, p);
            if (rc < 0)
                return rc;
            p += (uint64_t)rc;
        }
    return first < last ? ns_cmd(ns, false, first, last - first) : 0;
}

static int fs_statfs(const char *path, struct statvfs *st)
{
    memset(st, 0, sizeof *st);
    uint64_t bytes = 0;
    for (unsigned i = 0; i < fs.nns; i++)
        bytes += fs.ns[i].capacity;
    st->f_bsize = st->f_frsize = 4096;
    st->f_blocks = bytes / 4096;
    st->f_files = fs.nns + 1;
    st->f_namemax = 255;
    return 0;
}

static const struct fuse_operations ops = {
    .init = fs_init,
    .getattr = fs_getattr,
    .readdir = fs_readdir,
    .open = fs_open,
    .read = fs_read,
    .write = fs_write,
    .fsync = fs_fsync,
    .truncate = fs_truncate,
    .fallocate = fs_fallocate,
    .statfs = fs_statfs,
};

/* ---------------------------------------------------------------- set-up */

static void usage(FILE *f)
{
    fprintf(f,
        "usage: ntblend run --host H -- " PROG " [options] DEVICE DIR\n"
        "Mounts the NVMe DEVICE (borrowed through SmartIO, driven by libntbnvme in this\n"
        "process) on the directory DIR: one file per active namespace, nsN, whose bytes are\n"
        "the namespace's (size = capacity, no page cache), and info (model, serial, blocks).\n"
        "The device stays borrowed until the file system is unmounted.\n"
        "DEVICE is a SmartIO name (nvme0: ntblend device list), or pci:BB:DD.F, an NVMe\n"
        "function of this host's PCIe tree (its own, or one lent to it: ntblend lspci --host\n"
        "H), driven through the driver model; a hot-remove of it ends the mount.\n"
        "  -f, --foreground   stay in the foreground (the default)\n"
        "  -d, --daemon       go to the background once DIR is mounted: the command returns\n"
        "                     0 when the files are there, 1 when the mount failed; stderr\n"
        "                     stays open for error messages (redirect it to a log)\n"
        "  --sq device|local  where the I/O submission queues live: the device's host's RAM\n"
        "                     (default: the device fetches commands locally) or this host's\n"
        "  -t, --threads N    FUSE worker threads, each with its own queue pair (1..%d,\n"
        "                     default 4; at most the queue pairs the controller grants)\n"
        "  -o OPT[,OPT...]    FUSE mount options (e.g. allow_other)\n"
        "  -h, --help         this text\n"
        "  -V, --version      the version\n"
        "Unmount with fusermount3 -u DIR, or stop it with SIGINT/SIGTERM: the device is then\n"
        "shut down and returned. Example:\n"
        "  ntblend device add nvme0\n"
        "  ntblend run --host b -- " PROG " --daemon nvme0 /tmp/nvme0\n"
        "  dd if=/tmp/nvme0/ns1 of=/dev/null bs=1M count=16 iflag=direct\n"
        "  fusermount3 -u /tmp/nvme0\n",
        MAX_THREADS);
}

static void make_info(void)
{
    int n = snprintf(fs.info, sizeof fs.info,
                     "device: %s\nmodel: %s\nserial: %s\nfirmware: %s\n"
                     "version: %u.%u.%u\nmax_transfer: %zu\nqueue_pairs: %u\n",
                     fs.device, fs.ci.model, fs.ci.serial, fs.ci.firmware,
                     fs.ci.version >> 16, (fs.ci.version >> 8) & 0xff, fs.ci.version & 0xff,
                     fs.ci.max_transfer, fs.nslots);
    for (unsigned i = 0; i < fs.nns && n > 0 && (size_t)n < sizeof fs.info; i++)
        n += snprintf(fs.info + n, sizeof fs.info - (size_t)n,
                      "ns%u: block_size %u blocks %llu bytes %llu\n", fs.ns[i].nsid,
                      fs.ns[i].block_size, (unsigned long long)fs.ns[i].blocks,
                      (unsigned long long)fs.ns[i].capacity);
    fs.info_len = n < 0 ? 0 : (size_t)n < sizeof fs.info ? (size_t)n : sizeof fs.info - 1;
}

/* Brings the device up and learns its namespaces. Return: 0, or 1 with the reason printed. */
/* A "pci:" device was hot-removed: its I/O fails from now on; end the mount (as SIGTERM). */
static void on_remove(nvme_dev_t *d, void *arg)
{
    (void)d;
    (void)arg;
    fprintf(stderr, PROG ": %s was removed (hot-unplugged): unmounting\n", fs.device);
    kill(getpid(), SIGTERM);
}

static int open_device(unsigned threads)
{
    struct nvme_open_opts oo = { .on_remove = on_remove };
    if (nvme_open(fs.device, &oo, &fs.dev)) {
        fprintf(stderr, PROG ": cannot open %s: %s\n", fs.device, nvme_errmsg());
        return 1;
    }
    nvme_ctrl_info(fs.dev, &fs.ci);
    for (uint32_t nsid = 1; nsid <= fs.ci.namespaces; nsid++) {
        struct nvme_ns_info ns;
        if (nvme_ns_info(fs.dev, nsid, &ns))
            continue; /* inactive */
        if (fs.nns == MAX_NS) {
            fprintf(stderr, PROG ": %s: only the first %d namespaces are shown\n", fs.device,
                    MAX_NS);
            break;
        }
        fs.ns[fs.nns++] = ns;
    }
    if (!fs.nns)
        fprintf(stderr, PROG ": %s has no active namespace; the mount shows only info\n",
                fs.device);
    fs.nslots = threads;
    if (fs.ci.max_qpairs && fs.nslots > fs.ci.max_qpairs) {
        fprintf(stderr, PROG ": %s grants %u I/O queue pairs: using %u threads\n", fs.device,
                fs.ci.max_qpairs, fs.ci.max_qpairs);
        fs.nslots = fs.ci.max_qpairs;
    }
    /* A chunk is what one command moves, and whole blocks of every namespace. */
    fs.bounce_size = fs.ci.max_transfer && fs.ci.max_transfer < BOUNCE_MAX ? fs.ci.max_transfer
                                                                            : BOUNCE_MAX;
    for (unsigned i = 0; i < fs.nns; i++)
        if (fs.ns[i].block_size > fs.bounce_size) {
            fprintf(stderr, PROG ": %s: namespace %u has %u-byte blocks, more than one "
                    "command moves (%zu bytes); it cannot be served\n", fs.device,
                    fs.ns[i].nsid, fs.ns[i].block_size, fs.bounce_size);
            nvme_close(fs.dev);
            return 1;
        }
    for (unsigned i = 0; i < RMW_LOCKS; i++)
        pthread_mutex_init(&fs.rmw[i], NULL);
    make_info();
    clock_gettime(CLOCK_REALTIME, &fs.mounted);
    return 0;
}

/* --daemon: the parent waits for the child's word (one byte on a pipe) that the mount is
 * ready, so `ntblend-nvmefs --daemon ... && use DIR` works in scripts. The fork comes first:
 * the child must be the process that borrows the device and owns the threads. */
static int daemon_start(int *notify)
{
    int p[2];
    if (pipe(p) < 0) {
        perror(PROG ": pipe");
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        perror(PROG ": fork");
        return -1;
    }
    if (pid > 0) {
        close(p[1]);
        char c = 1;
        ssize_t n;
        do
            n = read(p[0], &c, 1);
        while (n < 0 && errno == EINTR);
        _exit(n == 1 && c == 0 ? 0 : 1);
    }
    close(p[0]);
    setsid();
    *notify = p[1];
    return 0;
}

static void daemon_ready(int notify, bool ok)
{
    if (notify < 0)
        return;
    if (ok) {
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) {
            dup2(null, STDIN_FILENO);
            dup2(null, STDOUT_FILENO);
            if (null > STDERR_FILENO)
                close(null);
        }
        if (chdir("/") < 0) { /* not holding any directory busy is a nicety only */
        }
    }
    char c = ok ? 0 : 1;
    if (write(notify, &c, 1) < 0) { /* the parent is gone: nothing to tell */
    }
    close(notify);
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "foreground", no_argument, NULL, 'f' }, { "daemon", no_argument, NULL, 'd' },
        { "sq", required_argument, NULL, 's' },   { "threads", required_argument, NULL, 't' },
        { "help", no_argument, NULL, 'h' },       { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 }
    };
    bool daemon = false;
    long threads = 4;
    char *mountopts = NULL;
    fs.sq_place = NVME_PLACE_DEVICE;
    int c;
    while ((c = getopt_long(argc, argv, "fdt:o:hV", longopts, NULL)) != -1) {
        switch (c) {
        case 'f': daemon = false; break;
        case 'd': daemon = true; break;
        case 's':
            if (!strcmp(optarg, "device"))
                fs.sq_place = NVME_PLACE_DEVICE;
            else if (!strcmp(optarg, "local"))
                fs.sq_place = NVME_PLACE_LOCAL;
            else {
                fprintf(stderr, PROG ": --sq takes device or local, not '%s'\n", optarg);
                return 2;
            }
            break;
        case 't': {
            char *end;
            threads = strtol(optarg, &end, 10);
            if (*end || threads < 1 || threads > MAX_THREADS) {
                fprintf(stderr, PROG ": --threads takes 1..%d, not '%s'\n", MAX_THREADS,
                        optarg);
                return 2;
            }
            break;
        }
        case 'o':
            if (mountopts) {
                char *both;
                if (asprintf(&both, "%s,%s", mountopts, optarg) < 0)
                    return 1;
                free(mountopts);
                mountopts = both;
            } else if (!(mountopts = strdup(optarg)))
                return 1;
            break;
        case 'h': usage(stdout); return 0;
        case 'V':
            printf(PROG " (ntblend) %s, libfuse %s\n", NTBLEND_VERSION, fuse_pkgversion());
            return 0;
        default:
            fprintf(stderr, "see " PROG " --help\n");
            return 2;
        }
    }
    if (argc - optind != 2) {
        fprintf(stderr, PROG ": expected DEVICE DIR (e.g. nvme0 /tmp/nvme0); see --help\n");
        return 2;
    }
    fs.device = argv[optind];
    char dir[PATH_MAX];
    struct stat st;
    if (!realpath(argv[optind + 1], dir) || stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, PROG ": %s is not a directory; create it first (mkdir -p %s)\n",
                argv[optind + 1], argv[optind + 1]);
        return 1;
    }

    int notify = -1;
    if (daemon && daemon_start(&notify) < 0)
        return 1;
    if (open_device((unsigned)threads)) {
        daemon_ready(notify, false);
        return 1;
    }

    /* fuse_new takes its options as a command line; the fs name shows in mount(8), and
     * carries our pid so that `ntblend nvme unmount` can wait until the device is returned. */
    char fsname[128];
    snprintf(fsname, sizeof fsname, "-ofsname=ntblend:%s:%d,subtype=nvmefs", fs.device,
             (int)getpid());
    char *fargv[4] = { argv[0], fsname, NULL, NULL };
    int fargc = 2;
    char *extra = NULL;
    if (mountopts) {
        if (asprintf(&extra, "-o%s", mountopts) < 0)
            extra = NULL;
        fargv[fargc++] = extra;
    }
    struct fuse_args args = FUSE_ARGS_INIT(fargc, fargv);
    int rc = 1;
    struct fuse *f = fuse_new(&args, &ops, sizeof ops, NULL);
    if (!f) {
        fprintf(stderr, PROG ": cannot set up FUSE (bad -o option?)\n");
        goto out_dev;
    }
    /* Before the mount: a signal as soon as the files are there must still end it cleanly. */
    struct fuse_session *se = fuse_get_session(f);
    if (fuse_set_signal_handlers(se)) {
        fprintf(stderr, PROG ": cannot install signal handlers\n");
        goto out_fuse;
    }
    if (fuse_mount(f, dir)) {
        fprintf(stderr, PROG ": cannot mount %s: is /dev/fuse there and usable, and is "
                "fusermount3 installed (package fuse3)?\n", dir);
        goto out_signals;
    }
    daemon_ready(notify, true);
    notify = -1;

    if (fs.nslots == 1) {
        rc = fuse_loop(f);
    } else {
        struct fuse_loop_config *cfg = fuse_loop_cfg_create();
        if (!cfg) {
            rc = -ENOMEM;
        } else {
            fuse_loop_cfg_set_max_threads(cfg, fs.nslots);
            fuse_loop_cfg_set_idle_threads(cfg, fs.nslots);
            rc = fuse_loop_mt(f, cfg);
            fuse_loop_cfg_destroy(cfg);
        }
    }
    if (rc < 0)
        fprintf(stderr, PROG ": the FUSE loop failed: %s\n", strerror(-rc));
    rc = rc < 0 ? 1 : 0; /* a signal that ended the loop is a clean end */
    fuse_unmount(f);
out_signals:
    fuse_remove_signal_handlers(se);
out_fuse:
    fuse_destroy(f);
    fuse_opt_free_args(&args);
out_dev:
    daemon_ready(notify, false);
    pool_free();
    if (nvme_close(fs.dev)) {
        fprintf(stderr, PROG ": shutting %s down: %s\n", fs.device, nvme_errmsg());
        rc = 1;
    }
    free(extra);
    free(mountopts);
    return rc;
}
