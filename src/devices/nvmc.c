/*
 * NVMe controller device model: one thread per controller serves BAR0 (registers and
 * doorbells) of a PCIe function, sleeping on the function's reg_seq futex when idle. The
 * controller itself (registers, queues, commands) is the thread-free core of nvmc_ctrl.h
 * (nvmc_regs.c, nvmc_prp.c, nvmc_admin.c, nvmc_io.c); this file gives it the fabric as DMA
 * backend (the function's own requester ID, through its host's IOMMU and NTB windows, only
 * while Bus Master Enable is set), MSI-X, and namespaces backed by sparse files. See
 * docs/nvme-model.md.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hop.h"
#include "models.h"
#include "nvmc_ctrl.h"
#include "registry.h"

#define POLL_US_DEFAULT 50u /* keep looking at doorbells this long after the last command */
#define POLL_US_MAX 100000u

struct nvmc_model {
    struct fab *f;
    uint32_t fn;
    struct nvmc_ctrl c;
    int *fds;
    const uint8_t **maps; /* the namespaces mapped read-only (NULL where mmap failed) */
    char serial[24];
    uint64_t bar0_addr, bar0_size;
    uint64_t poll_ns;
    pthread_t thread;
    _Atomic bool stop;
};

static void unmap_all(struct nvmc_model *m, uint32_t nns, uint64_t size)
{
    for (uint32_t i = 0; m->maps && i < nns; i++)
        if (m->maps[i])
            munmap((void *)m->maps[i], size);
    free(m->maps);
    m->maps = NULL;
    m->c.ns_map = NULL;
}

/* ---------------------------------------------------------------- backend */

static bool hits_bar0(const struct nvmc_model *m, uint64_t addr, uint64_t len)
{
    return addr < m->bar0_addr + m->bar0_size && addr + len > m->bar0_addr;
}

static int be_read(void *ctx, uint64_t addr, void *buf, uint64_t len)
{
    struct nvmc_model *m = ctx;
    if (hits_bar0(m, addr, len) || addr + len < addr) {
        memset(buf, 0xff, len);
        return -EIO;
    }
    return fab_fn_dma_read(m->f, m->fn, addr, buf, len);
}

static int be_write(void *ctx, uint64_t addr, const void *buf, uint64_t len)
{
    struct nvmc_model *m = ctx;
    if (hits_bar0(m, addr, len) || addr + len < addr)
        return -EIO;
    return fab_fn_dma_write(m->f, m->fn, addr, buf, len);
}

static void be_irq(void *ctx, uint32_t v)
{
    struct nvmc_model *m = ctx;
    (void)fab_fn_msix(m->f, m->fn, v); /* -ENODEV: MSI-X off, the driver polls */
}

/* Asked on every pass, so without fab_cfg_read's lock (a getpid and a futex wake per call);
 * the fabric's own DMA path reads the command register the same way. */
static bool be_bme(void *ctx)
{
    struct nvmc_model *m = ctx;
    const uint16_t *cmd = (const uint16_t *)(uintptr_t)(fab_func(m->f, m->fn)->cfg + 0x04);
    return __atomic_load_n(cmd, __ATOMIC_ACQUIRE) & FAB_CMD_BME;
}

/* ---------------------------------------------------------------- namespaces */

static int mkdir_p(const char *path)
{
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(tmp, 0755) && errno != EEXIST)
                return -errno;
            *p = '/';
        }
    if (mkdir(tmp, 0755) && errno != EEXIST)
        return -errno;
    return 0;
}

/* ---------------------------------------------------------------- thread */

/* After a command the next doorbell is likely soon (a QD 1 client submits again as soon as
 * it sees its completion, a few microseconds later, more with a DMA map and unmap around each
 * I/O), and catching it awake saves the futex sleep and wake-up on both sides. So the thread
 * waits by the wait policy (src/wait): a spin of up to SPIN_NS (what it learns the gaps are),
 * then yields until poll_us has passed (the driver may need this CPU to ring; WPOL_PEER_YIELDS
 * in a row that run nobody end them too, as in the driver's completion wait), then sleeps on
 * reg_seq, which every register write bumps. A disabled controller sleeps at once. When the
 * driver that rang last did so from this thread's CPU (fab_function.driver_cpu) and is not
 * asleep (a driver withdraws its CPU while it sleeps: sio_driver_asleep), it waits for this
 * CPU, and the wait yields at once: spinning would keep it from seeing its completion. If
 * the yield runs nobody, the scheduler passed the driver over (EEVDF picks only threads that
 * have not had more than their share, and a driver that polled for its completion here has),
 * and the wait sleeps (needs_cpu_sleep): a vhost-user back end on the model's CPU saw its
 * completion 28-55 us after it was posted while the model yielded, 2 us (median) with the
 * sleep. */
#define SPIN_NS 20000u

struct bell_wait {
    struct nvmc_model *m;
    struct fab_function *fx;
    uint32_t seen;
};

/* Plain stores to a mapped BAR (fab_function.raw_maps: a SISCI program's) bump no reg_seq:
 * then the doorbells themselves are watched, as the hardware would see them. */
static bool rang(void *arg)
{
    struct bell_wait *b = arg;
    return atomic_load(&b->fx->reg_seq) != b->seen || atomic_load(&b->m->stop) ||
           (atomic_load(&b->fx->raw_maps) && nvmc_doorbells_moved(&b->m->c));
}

static bool driver_here(void *arg)
{
    struct bell_wait *b = arg;
    return fab_fn_driver_here(b->fx);
}

static void *run(void *arg)
{
    struct nvmc_model *m = arg;
    struct fab_function *fx = fab_func(m->f, m->fn);
    struct wpol_site polling = WPOL_SITE("nvme model doorbells",
                                         m->poll_ns < SPIN_NS ? (uint32_t)m->poll_ns : SPIN_NS,
                                         (uint32_t)m->poll_ns);
    polling.fast_yields = WPOL_PEER_YIELDS;
    struct wpol_site idle = WPOL_SITE("nvme model (disabled)", 0, 0);
    struct bell_wait b = { m, fx, 0 };
    struct wpol_how how = { .ready = rang, .arg = &b, .word = &fx->reg_seq,
                            .sleepers = &fx->reg_waiters, .needs_cpu = driver_here,
                            .needs_cpu_sleep = true, .sleep_ns = 1000000000 };
    uint64_t swept = 0;
    uint32_t gen = atomic_load(&fx->reset_gen), done = gen - 1;
    while (!atomic_load(&m->stop)) {
        fab_fn_note_cpu(fx);
        b.seen = atomic_load(&fx->reg_seq);
        /* A function-level reset cleared the registers, maybe with an enable stored again
         * before this thread looked (CC.EN seen set throughout): the controller's state goes
         * first, as it does on hardware before the reset completes. */
        if (atomic_load(&fx->reset_gen) != gen) {
            gen = atomic_load(&fx->reset_gen);
            nvmc_reset(&m->c);
        }
        bool ready = nvmc_regs_update(&m->c);
        if (done != gen) { /* the registers are as at power-on again (CAP, VS published) */
            fab_fn_reset_done(fx, gen);
            done = gen;
        }
        if (ready && nvmc_process(&m->c) > 0)
            continue;
        /* With plain stores to watch for, no wait is longer than a tick: any register (an
         * enable in CC, say) may have changed unannounced. */
        bool raw = fab_fn_raw_watch(m->f, m->fn, &swept);
        how.deadline_ns = raw ? wpol_now_ns() + FAB_RAW_TICK_NS : 0;
        how.sleep_ns = raw ? FAB_RAW_TICK_NS : 1000000000;
        wpol_wait(ready ? &polling : &idle, &how);
    }
    wpol_site_done(&polling);
    wpol_site_done(&idle);
    return NULL;
}

static int nvmc_start(struct fab *f, uint32_t fn, void **state)
{
    struct fab_function *fx = fab_func(f, fn);
    uint64_t queues, nns, ns_size, mdts, cmb, poll_us, alloc_all;
    if (devreg_param_size(fx->params, "queues", NVMC_DEFAULT_QUEUES, &queues) || queues < 1 ||
        queues > NVMC_MAX_QUEUES ||
        devreg_param_size(fx->params, "namespaces", 1, &nns) || nns < 1 || nns > 1024 ||
        devreg_param_size(fx->params, "ns_size", 1ull << 30, &ns_size) || ns_size < NVMC_LBA_SIZE ||
        devreg_param_size(fx->params, "mdts", 5, &mdts) || mdts < 1 || mdts > 10 ||
        devreg_param_size(fx->params, "cmb", 0, &cmb) ||
        devreg_param_size(fx->params, "poll_us", POLL_US_DEFAULT, &poll_us) || poll_us > POLL_US_MAX ||
        devreg_param_size(fx->params, "alloc_all", 0, &alloc_all) || alloc_all > 1) {
        fprintf(stderr, "nvme %s: bad queues (1..%u), namespaces (1..1024), ns_size (>= 4K), "
                "mdts (1..10), cmb, poll_us (0..%u) or alloc_all (0, 1); fix the [device] "
                "section\n", fx->name,
                NVMC_MAX_QUEUES, POLL_US_MAX);
        return -EINVAL;
    }
    struct nvmc_model *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    m->f = f;
    m->fn = fn;
    m->bar0_addr = fx->bar[0].addr;
    m->bar0_size = fx->bar[0].size;
    m->poll_ns = poll_us * 1000;
    char dir[400], buf[300];
    /* backing= is the directory itself; otherwise each fabric gets its own directory under
     * $NTBLEND_NVME_DIR (or /var/tmp/ntblend), which `ntblend down` removes. */
    const char *d = devreg_param(fx->params, "backing", buf, sizeof buf);
    const char *root = getenv("NTBLEND_NVME_DIR");
    if (d)
        snprintf(dir, sizeof dir, "%s", d);
    else
        snprintf(dir, sizeof dir, "%s/%s", root && *root ? root : "/var/tmp/ntblend", f->ctl->name);
    int rc = mkdir_p(dir);
    if (rc) {
        fprintf(stderr, "nvme %s: cannot create %s: %s\n", fx->name, dir, strerror(-rc));
        free(m);
        return rc;
    }
    m->fds = malloc(nns * sizeof *m->fds);
    if (!m->fds) {
        free(m);
        return -ENOMEM;
    }
    ns_size &= ~(uint64_t)(NVMC_LBA_SIZE - 1);
    for (uint32_t i = 0; i < nns; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s-ns%u.img", dir, fx->name, i + 1);
        m->fds[i] = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (m->fds[i] < 0 || ftruncate(m->fds[i], (off_t)ns_size)) {
            rc = -errno;
            fprintf(stderr, "nvme %s: %s: %s\n", fx->name, path, strerror(errno));
            for (uint32_t k = 0; k <= i; k++)
                if (m->fds[k] >= 0)
                    close(m->fds[k]);
            free(m->fds);
            free(m);
            return rc;
        }
    }
    /* A VF's controller is a secondary controller of its PF's NVM subsystem: it shares the
     * PF's serial number (and so the subsystem NQN) and counts its siblings. */
    uint32_t pf = fn, nsec = 0;
    const struct fab_host *h = fab_host(f, fx->host);
    for (uint32_t i = h->func_first; i < h->func_first + h->nfuncs; i++) {
        const struct fab_function *o = fab_func(f, i);
        if (o->device != fx->device || o->fn != fx->fn)
            continue;
        if (o->vf)
            nsec++;
        else
            pf = i;
    }
    snprintf(m->serial, sizeof m->serial, "NTB%08X%04X", fab_func(f, pf)->rid, pf & 0xffff);
    struct nvmc_params p = {
        .queues = (uint32_t)queues, .namespaces = (uint32_t)nns, .ns_size = ns_size,
        .mdts = (uint32_t)mdts, .alloc_all = alloc_all != 0,
        .cmb_size = cmb && fx->bar[2].kind == FAB_BAR_MEM ? (cmb + 4095) & ~4095ull : 0,
        .vectors = (fab_cfg_read(f, fn, FAB_CFG_MSIX + 2, 2) & 0x7ffu) + 1,
        .vid = 0x8086, .ssvid = 0x8086, .serial = m->serial,
        .cntlid = (uint16_t)(fx->vf + 1), .vfn = (uint16_t)fx->vf, .nsec = (uint16_t)nsec,
    };
    if (p.vectors > (uint32_t)queues + 1)
        p.vectors = (uint32_t)queues + 1;
    struct nvmc_backend be = { m, be_read, be_write, be_irq, be_bme };
    volatile uint8_t *regs = fab_bar_mem(f, fn, fx->bar[0].off, NVMC_REGS_SIZE);
    m->c.ns_fd = m->fds;
    /* Reads copy from the page cache through a mapping instead of a read() per command. */
    m->maps = calloc(nns, sizeof *m->maps);
    for (uint32_t i = 0; m->maps && i < nns; i++) {
        void *p = mmap(NULL, ns_size, PROT_READ, MAP_SHARED, m->fds[i], 0);
        m->maps[i] = p == MAP_FAILED ? NULL : p;
    }
    m->c.ns_map = m->maps;
    if (!regs || (rc = nvmc_ctrl_init(&m->c, &p, &be, regs)) ||
        (rc = -pthread_create(&m->thread, NULL, run, m))) {
        rc = rc ? rc : -EIO;
        nvmc_ctrl_fini(&m->c);
        unmap_all(m, nns, ns_size);
        for (uint32_t i = 0; i < nns; i++)
            close(m->fds[i]);
        free(m->fds);
        free(m);
        return rc;
    }
    *state = m;
    return 0;
}

static void nvmc_stop(void *state)
{
    struct nvmc_model *m = state;
    if (!m)
        return;
    struct fab_function *fx = fab_func(m->f, m->fn);
    atomic_store(&m->stop, true);
    atomic_fetch_add(&fx->reg_seq, 1);
    fab_futex_wake(&fx->reg_seq, 1 << 30);
    pthread_join(m->thread, NULL);
    hop_flush();
    unmap_all(m, m->c.p.namespaces, m->c.p.ns_size);
    for (uint32_t i = 0; i < m->c.p.namespaces; i++) {
        fsync(m->fds[i]);
        close(m->fds[i]);
    }
    nvmc_ctrl_fini(&m->c);
    free(m->fds);
    free(m);
}

const struct model_ops nvmc_model_ops = { nvmc_start, nvmc_stop };
