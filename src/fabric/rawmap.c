/*
 * Plain-store mappings of a function's registers (fab_function.raw_maps): who holds them.
 * A SISCI program maps a device's register BAR and rings doorbells with plain stores, which
 * tell the model nothing; while such a mapping exists the model watches its registers itself.
 * Each process's mappings are counted under its pid, so that a process that dies with its
 * mappings gives them back (fab_reap_owner, as with its LUT entries), and a function-level
 * reset, which unmaps nobody, leaves them alone.
 */
#include <errno.h>

#include "fabric.h"

/* The total is the sum of the owners' counts: the models read only the total. */
static void drop_slot(struct fab_function *fn, struct fab_raw_owner *o)
{
    atomic_fetch_sub(&fn->raw_maps, o->n);
    o->pid = 0;
    o->n = 0;
}

/* Under raw_lock: give back what dead processes held (killed with their host, whose agent
 * died with them and so reaped nothing). */
static void sweep_locked(struct fab_function *fn)
{
    for (int i = 0; i < FAB_RAW_OWNERS; i++)
        if (fn->raw_owner[i].pid && !fab_pid_alive(fn->raw_owner[i].pid))
            drop_slot(fn, &fn->raw_owner[i]);
}

int fab_fn_raw(struct fab *f, uint32_t fni, int delta)
{
    if (fni >= f->ctl->nfuncs || !delta)
        return -EINVAL;
    struct fab_function *fn = fab_func(f, fni);
    int32_t me = fab_self_pid();
    int rc = 0;
    fab_lock(&fn->raw_lock);
    struct fab_raw_owner *mine = NULL, *free_ = NULL;
    for (int i = 0; i < FAB_RAW_OWNERS && !mine; i++) {
        if (fn->raw_owner[i].pid == me)
            mine = &fn->raw_owner[i];
        else if (!fn->raw_owner[i].pid && !free_)
            free_ = &fn->raw_owner[i];
    }
    if (delta > 0) {
        if (!mine && !free_) {
            sweep_locked(fn);
            for (int i = 0; i < FAB_RAW_OWNERS && !free_; i++)
                if (!fn->raw_owner[i].pid)
                    free_ = &fn->raw_owner[i];
        }
        if (!mine && !free_) {
            rc = -ENOSPC;
        } else {
            if (!mine) {
                mine = free_;
                mine->pid = me;
            }
            mine->n++;
            atomic_fetch_add(&fn->raw_maps, 1);
        }
    } else if (mine) {
        mine->n--;
        atomic_fetch_sub(&fn->raw_maps, 1);
        if (!mine->n)
            mine->pid = 0;
    } /* an unmap this process never counted (a fork's child): nothing of it to drop */
    fab_unlock(&fn->raw_lock);
    /* A model asleep without a deadline (nothing to watch when it went to sleep) must start
     * watching now: the first plain store (an enable in CC) may come right after the map. */
    if (delta > 0 && !rc)
        fab_fn_notify(f, fni);
    return rc;
}

void fab_fn_raw_reap(struct fab *f, int32_t pid)
{
    if (pid <= 0)
        return;
    for (uint32_t i = 0; i < f->ctl->nfuncs; i++) {
        struct fab_function *fn = fab_func(f, i);
        if (!atomic_load(&fn->raw_maps))
            continue;
        fab_lock(&fn->raw_lock);
        for (int k = 0; k < FAB_RAW_OWNERS; k++)
            if (fn->raw_owner[k].pid == pid)
                drop_slot(fn, &fn->raw_owner[k]);
        fab_unlock(&fn->raw_lock);
    }
}

bool fab_fn_raw_watch(struct fab *f, uint32_t fni, uint64_t *swept_ns)
{
    struct fab_function *fn = fab_func(f, fni);
    if (!atomic_load(&fn->raw_maps))
        return false;
    /* Now and then, look for holders that died unreaped: a model must not watch forever. */
    uint64_t now = fab_now_ns();
    if (now - *swept_ns >= FAB_RAW_SWEEP_NS) {
        *swept_ns = now;
        fab_lock(&fn->raw_lock);
        sweep_locked(fn);
        fab_unlock(&fn->raw_lock);
    }
    return atomic_load(&fn->raw_maps) != 0;
}
