/*
 * SmartIO inside a virtual machine (include/ntblend/smartio_vm.h): a guest's view of its
 * emulated VM. The VM's record (the backend's vm_info: its devices, their guest BDFs and guest
 * BARs, the device's I/O address of guest RAM) is read here; what only the VM's process may
 * decide — the mediated configuration space, guest RAM handed to a process, MSI-X routing,
 * peer mappings — is asked of it on its control socket (src/vm/vm_guest.c answers). BARs are
 * mapped here, through this host's adapter facing the lender, as the guest's mapping of its
 * guest BAR; guest RAM is the VM's RAM region of this host.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ntblend/smartio_vm.h"
#include "seg_int.h"
#include "sio_int.h"

#define VM_CTL_TIMEOUT_MS 20000 /* taking a device from its lender asks the lender */

_Static_assert(SIO_VM_DEVS == NTB_VM_DEVS, "a VM's devices");

struct sio_vm {
    struct rt *rt;
    char name[32];
    struct ntb_vm_info info;  /* as last read */
    pthread_mutex_t lock;     /* info */
    _Atomic uint32_t *word;
    atomic_bool woken;
    atomic_int waiting;
    uint32_t vectors;         /* host vectors of this host */
};

struct sio_vm_bar {
    struct sio_vm *vm;
    uint32_t fn;
    int ai, peer_ai;          /* the path to the lender, -1 when the device is here */
    struct rt_window win;
    volatile char *ptr;
};

static __thread char last_error[600];

/* src into dst of n bytes, cut short if it must be. */
static void copy(char *dst, size_t n, const char *src)
{
    size_t l = strnlen(src, n - 1);
    memcpy(dst, src, l);
    dst[l] = 0;
}

const char *sio_vm_error(void) { return last_error; }

/* Read the record again (under vm->lock). */
static int refresh(struct sio_vm *vm)
{
    struct ntb_vm_info x;
    int rc = vm->rt->ops->vm_info(vm->rt, vm->name, &x);
    if (rc)
        return rc;
    pthread_mutex_lock(&vm->lock);
    vm->info = x;
    pthread_mutex_unlock(&vm->lock);
    return 0;
}

int sio_vm_open(const char *name, sio_vm_t **out)
{
    if (!name || !out || strlen(name) >= sizeof ((struct sio_vm *)0)->name)
        return -EINVAL;
    struct sio_vm *vm = calloc(1, sizeof *vm);
    if (!vm)
        return -ENOMEM;
    int rc = 0;
    vm->rt = rt_get();
    if (!vm->rt) {
        rc = -errno;
        goto fail;
    }
    struct rt *rt = vm->rt;
    snprintf(vm->name, sizeof vm->name, "%s", name);
    pthread_mutex_init(&vm->lock, NULL);
    if (!rt->ops->vm_info || !rt->ops->vm_word) {
        rc = -ENOENT; /* a backend without VMs */
        goto fail;
    }
    if ((rc = refresh(vm)))
        goto fail;
    if (!vm->info.emulated)
        rc = -EMEDIUMTYPE;
    else if (vm->info.host != rt->host)
        rc = -EXDEV;
    else if (!vm->info.running)
        rc = -ESRCH;
    if (rc)
        goto fail;
    vm->word = rt->ops->vm_word(rt, vm->info.slot);
    vm->vectors = rt->ops->msi_vectors;
    *out = vm;
    return 0;
fail:
    if (vm->rt)
        rt_put(vm->rt);
    free(vm);
    return rc;
}

void sio_vm_close(sio_vm_t *vm)
{
    if (!vm)
        return;
    rt_put(vm->rt);
    pthread_mutex_destroy(&vm->lock);
    free(vm);
}

uint64_t sio_vm_mem(const sio_vm_t *vm) { return vm->info.mem; }

int sio_vm_list(sio_vm_t *vm, struct sio_vm_fn *out, int max)
{
    if (!vm || max < 0 || (max && !out))
        return -EINVAL;
    int rc = refresh(vm);
    if (rc)
        return rc == -ENOENT ? 0 : rc; /* the VM is gone: so are its devices */
    pthread_mutex_lock(&vm->lock);
    struct ntb_vm_info x = vm->info;
    pthread_mutex_unlock(&vm->lock);
    int n = 0;
    for (int i = 0; i < NTB_VM_DEVS; i++) {
        struct ntb_func_info f;
        if (x.dev[i].state == NTB_VMDEV_NONE || vm->rt->ops->func_info(vm->rt, x.dev[i].fn, &f))
            continue;
        if (n < max) {
            struct sio_vm_fn *o = &out[n];
            memset(o, 0, sizeof *o);
            o->index = i;
            o->id = x.dev[i].fn;
            snprintf(o->name, sizeof o->name, "%s", f.name);
            o->bdf = x.dev[i].bdf;
            o->present = x.dev[i].state != NTB_VMDEV_GONE;
            o->held = x.dev[i].state == NTB_VMDEV_HELD;
            o->vendor = f.vendor;
            o->device = f.device;
            o->class_code = f.class_code;
            for (int b = 0; b < SIO_BARS; b++) {
                o->bar_addr[b] = x.dev[i].bar[b];
                o->bar_size[b] = x.dev[i].bar[b] ? f.bar[b].size : 0;
            }
        }
        n++;
    }
    return n;
}

int sio_vm_wait(sio_vm_t *vm, uint32_t *seen, int timeout_ms)
{
    if (!vm || !seen)
        return -EINVAL;
    uint64_t deadline = seg_deadline(timeout_ms);
    atomic_fetch_add(&vm->waiting, 1);
    int rc;
    for (;;) {
        uint32_t now = atomic_load(vm->word);
        if (now != *seen) {
            *seen = now;
            rc = 0;
            break;
        }
        if (atomic_load(&vm->woken)) {
            rc = -EINTR;
            break;
        }
        /* A VM that ended bumps no word: look now and then. */
        uint64_t soon = seg_deadline(timeout_ms < 0 || timeout_ms > 500 ? 500 : timeout_ms);
        if (seg_futex_wait_ms(NULL, vm->word, now, soon < deadline ? soon : deadline)) {
            struct ntb_vm_info x;
            if (vm->rt->ops->vm_info(vm->rt, vm->name, &x) || x.slot != vm->info.slot) {
                rc = 0; /* gone: the caller lists no device any more */
                break;
            }
            if (seg_deadline(0) >= deadline) {
                rc = -ETIMEDOUT;
                break;
            }
        }
    }
    atomic_fetch_sub(&vm->waiting, 1);
    return rc;
}

void sio_vm_wake(sio_vm_t *vm)
{
    if (!vm)
        return;
    atomic_store(&vm->woken, true);
    while (atomic_load(&vm->waiting)) {
        vm->rt->ops->wake(vm->word, 1 << 30);
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
}

/* One request on the VM's control socket (one a connection): 0 with the text after "ok" in
 * ans, or -errno with the VM's message in last_error. */
static int request(struct sio_vm *vm, char *ans, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int request(struct sio_vm *vm, char *ans, size_t len, const char *fmt, ...)
{
    char req[256], buf[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(req, sizeof req, fmt, ap);
    va_end(ap);
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    if (strlen(vm->info.ctl) >= sizeof a.sun_path)
        return -ENAMETOOLONG;
    copy(a.sun_path, sizeof a.sun_path, vm->info.ctl);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int rc = 0;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) || send(fd, req, strlen(req), MSG_NOSIGNAL) < 0) {
        rc = -errno;
        snprintf(last_error, sizeof last_error, "VM %s does not answer: %s", vm->name,
                 strerror(-rc));
        close(fd);
        return rc == -ENOENT || rc == -ECONNREFUSED ? -ENODEV : rc;
    }
    struct pollfd p = { fd, POLLIN, 0 };
    ssize_t got = poll(&p, 1, VM_CTL_TIMEOUT_MS) > 0 ? recv(fd, buf, sizeof buf - 1, 0) : -1;
    close(fd);
    if (got <= 0) {
        snprintf(last_error, sizeof last_error, "VM %s did not answer '%s'", vm->name, req);
        return -ETIMEDOUT;
    }
    buf[got] = 0;
    buf[strcspn(buf, "\n")] = 0;
    if (strncmp(buf, "ok", 2)) {
        copy(last_error, sizeof last_error, !strncmp(buf, "error: ", 7) ? buf + 7 : buf);
        return -EIO;
    }
    if (ans)
        copy(ans, len, buf[2] == ' ' ? buf + 3 : "");
    return 0;
}

/* The name of device `index` for a request, or NULL. */
static const char *dev_name(struct sio_vm *vm, int index, char *out, size_t len)
{
    struct ntb_func_info f;
    if (index < 0 || index >= NTB_VM_DEVS || vm->info.dev[index].state == NTB_VMDEV_NONE ||
        vm->rt->ops->func_info(vm->rt, vm->info.dev[index].fn, &f))
        return NULL;
    snprintf(out, len, "%s", f.name);
    return out;
}

uint32_t sio_vm_cfg_read(sio_vm_t *vm, int index, uint32_t off, uint32_t len)
{
    char name[NTB_BK_NAME_MAX], ans[64];
    if (!dev_name(vm, index, name, sizeof name) ||
        request(vm, ans, sizeof ans, "cfg %s %u %u", name, off, len))
        return len == 4 ? 0xffffffffu : (1u << (8 * len)) - 1;
    return (uint32_t)strtoul(ans, NULL, 0);
}

int sio_vm_cfg_write(sio_vm_t *vm, int index, uint32_t off, uint32_t len, uint32_t val)
{
    char name[NTB_BK_NAME_MAX];
    if (!dev_name(vm, index, name, sizeof name))
        return -ENODEV;
    int rc = request(vm, NULL, 0, "cfg %s %u %u %u", name, off, len, val);
    if (!rc)
        refresh(vm); /* Bus Master may have taken it: its I/O addresses are known now */
    return rc;
}

/* ---------------------------------------------------------------- BARs */

volatile void *sio_vm_map_bar(sio_vm_t *vm, int index, int bar, size_t *size, sio_vm_bar_t **out)
{
    struct rt *rt = vm->rt;
    struct ntb_func_info f;
    if (index < 0 || index >= NTB_VM_DEVS || bar < 0 || bar >= NTB_BK_BARS || !out ||
        vm->info.dev[index].state == NTB_VMDEV_NONE ||
        rt->ops->func_info(rt, vm->info.dev[index].fn, &f) || !f.bar[bar].size) {
        errno = EINVAL;
        return NULL;
    }
    struct sio_vm_bar *m = calloc(1, sizeof *m);
    if (!m) {
        errno = ENOMEM;
        return NULL;
    }
    *m = (struct sio_vm_bar){ .vm = vm, .fn = vm->info.dev[index].fn, .ai = -1, .peer_ai = -1 };
    if (f.host == rt->host) {
        m->ptr = rt->ops->bar_mem(rt, m->fn, bar);
    } else {
        uint32_t peer;
        int ai = rt->ops->adapter_toward(rt, rt->host, f.host, &peer);
        int rc = ai < 0 ? ai
                        : rt_window_open(rt, (uint32_t)ai, f.host, f.bar[bar].addr,
                                         f.bar[bar].size, false, &m->win);
        if (rc) {
            free(m);
            errno = -rc;
            return NULL;
        }
        m->ai = ai;
        m->peer_ai = (int)peer;
        m->ptr = m->win.ptr;
    }
    if (!m->ptr) {
        free(m);
        return NULL;
    }
    if (size)
        *size = f.bar[bar].size;
    *out = m;
    return m->ptr;
}

void sio_vm_unmap_bar(sio_vm_bar_t *m)
{
    if (!m)
        return;
    rt_window_close(m->vm->rt, &m->win);
    free(m);
}

void sio_vm_write(sio_vm_bar_t *m, size_t off, uint64_t val, int len)
{
    if (len == 4)
        *(volatile uint32_t *)(m->ptr + off) = (uint32_t)val;
    else
        *(volatile uint64_t *)(m->ptr + off) = val;
    struct rt *rt = m->vm->rt;
    /* The device sees a register write (its model wakes) only if the write reached it. */
    if (m->ai >= 0 && !rt->ops->path_up(rt, (uint32_t)m->ai, (uint32_t)m->peer_ai))
        return;
    rt->ops->fn_notify(rt, m->fn);
}

/* ---------------------------------------------------------------- guest RAM */

int sio_vm_ram_alloc(sio_vm_t *vm, size_t size, uint64_t *gpa)
{
    char ans[64];
    if (!size || !gpa)
        return -EINVAL;
    int rc = request(vm, ans, sizeof ans, "ram %zu", size);
    if (rc)
        return rc == -EIO && strstr(last_error, "no room") ? -ENOMEM : rc;
    *gpa = strtoull(ans, NULL, 0);
    return 0;
}

int sio_vm_ram_free(sio_vm_t *vm, uint64_t gpa)
{
    return request(vm, NULL, 0, "unram %#llx", (unsigned long long)gpa);
}

void *sio_vm_ram(sio_vm_t *vm, uint64_t gpa, size_t len)
{
    if (gpa > vm->info.mem || len > vm->info.mem - gpa) {
        errno = EFAULT;
        return NULL;
    }
    return vm->rt->ops->ram(vm->rt, vm->info.host, vm->info.ram_base + gpa, len);
}

uint64_t sio_vm_dma_addr(sio_vm_t *vm, int index, uint64_t gpa)
{
    if (index < 0 || index >= NTB_VM_DEVS)
        return UINT64_MAX;
    pthread_mutex_lock(&vm->lock);
    bool held = vm->info.dev[index].state == NTB_VMDEV_HELD;
    uint64_t io = vm->info.dev[index].ram_io;
    pthread_mutex_unlock(&vm->lock);
    if (!held) { /* taken since we last looked? */
        refresh(vm);
        pthread_mutex_lock(&vm->lock);
        held = vm->info.dev[index].state == NTB_VMDEV_HELD;
        io = vm->info.dev[index].ram_io;
        pthread_mutex_unlock(&vm->lock);
    }
    return held ? io + gpa : UINT64_MAX;
}

/* ---------------------------------------------------------------- interrupts, peers */

uint32_t sio_vm_host_vector(uint32_t slot, uint32_t gvec, uint32_t host_vectors)
{
    /* Vector 0 is left alone (the agents' own); VMs in different slots spread apart. */
    return host_vectors < 2 ? 0 : 1 + (slot * 53u + (gvec & 0xffu)) % (host_vectors - 1);
}

int sio_vm_msix(sio_vm_t *vm, int index, unsigned vector, uint64_t addr, uint32_t data)
{
    char name[NTB_BK_NAME_MAX];
    if (!dev_name(vm, index, name, sizeof name))
        return -ENODEV;
    return request(vm, NULL, 0, "msix %s %u %#llx %#x", name, vector, (unsigned long long)addr,
                   data);
}

int sio_vm_wait_vector(sio_vm_t *vm, uint32_t gvec, uint32_t *seen, int timeout_ms)
{
    return sio_wait_vector(sio_vm_host_vector(vm->info.slot, gvec, vm->vectors), seen, timeout_ms);
}

int sio_vm_peer(sio_vm_t *vm, int index, int peer, int bar, uint64_t *ioaddr)
{
    char a[NTB_BK_NAME_MAX], b[NTB_BK_NAME_MAX], ans[64];
    if (!ioaddr || !dev_name(vm, index, a, sizeof a) || !dev_name(vm, peer, b, sizeof b))
        return -ENODEV;
    int rc = request(vm, ans, sizeof ans, "peer %s %s %d", a, b, bar);
    if (!rc)
        *ioaddr = strtoull(ans, NULL, 0);
    return rc;
}
