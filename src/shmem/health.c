/*
 * Failure detection: a PE whose process ended (killed, or an exit without shmem_finalize), or
 * whose host or the path to it went down, would leave the PEs waiting for it (a barrier, a
 * wait_until, a routed reply) waiting forever. Every wait that can block calls
 * shm_check_exit() once it has spun and is about to sleep; that calls shm_check_peers(),
 * which reads the state word the fabric keeps for each of our connections (the owner's agent
 * posts REMOVED when the owner's process goes, ours posts LOST when the path goes down or
 * the owner's host crashes). Loads only, no syscall, and not on the operations' own paths.
 *
 * A PE that passed shmem_finalize's barrier removes its heap too: it sets `finished` in its
 * control page first, which stays readable while we are connected; so does a PE that exits
 * with status 0 without shmem_finalize (init.c).
 *
 * A PE that stops on a loss exits with SHM_EXIT_LOST, so that oshrun reports the PE that was
 * lost (killed, or exited otherwise) rather than one that noticed.
 *
 * PEs reached only through the ring's nodes have no connection here: their loss ends the job
 * through oshrun, which watches every PE's process and ends the others. A PE whose oshrun is
 * gone ends itself (shm_check_launcher).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <ntblend/ntb.h>

#include "shmem_internal.h"
#include "wpol.h"

static uint64_t mono_ms(void) { return wpol_now_ns() / 1000000u; }

/* oshrun ends a job whose PE is lost; a job whose oshrun is gone (killed, or its terminal or
 * pipe closed under it) has no one to end it, so each PE ends itself when it sees that the
 * launcher (SHMEM_LAUNCHER_PID) is gone, at most every SHM_LAUNCHER_MS, from its waits, also
 * those of shmem_init. */
#define SHM_LAUNCHER_MS 200

void shm_check_launcher(void)
{
    static _Atomic long launcher = -1;
    static _Atomic uint64_t next;
    long pid = atomic_load(&launcher);
    if (pid < 0) {
        pid = (long)shm_env_num(SHM_ENV_LAUNCHER_PID, 0);
        atomic_store(&launcher, pid > 0 ? pid : 0);
    }
    if (pid <= 0)
        return;
    uint64_t now = mono_ms();
    if (now < atomic_load(&next))
        return;
    atomic_store(&next, now + SHM_LAUNCHER_MS);
    if (kill((pid_t)pid, 0) && errno == ESRCH)
        shm_fatal("the job's launcher (oshrun, process %ld) is gone: ending", pid);
}

static void host_name(int pe, char *buf, size_t len)
{
    if (ntb_node_name(shm.pes[pe].node, buf, len))
        snprintf(buf, len, "node %u", shm.pes[pe].node);
}

enum { LOST_PROCESS = 1, LOST_PATH = 2 };

/* Stop: say which PE is lost and why, and leave the same in our control page, so that a PE
 * that sees us go names the PE that was lost first rather than us. */
static _Noreturn void lost(int pe, unsigned why, int seen_via)
{
    char host[64], via[96] = "";
    host_name(pe, host, sizeof host);
    if (seen_via >= 0)
        snprintf(via, sizeof via, " (PE %d saw it and stopped)", seen_via);
    struct shm_ctrl *c = shm_ctrl_of(shm.me);
    atomic_store(&c->lost_why, why);
    atomic_store(&c->lost, (uint32_t)pe + 1);
    fflush(NULL);
    if (why == LOST_PATH)
        fprintf(stderr, "shmem: PE %d: PE %d on host %s was lost%s: the path to host %s is down "
                "(the host went down, or a link on the way); ending\n", shm.me, pe, host, via,
                host);
    else
        fprintf(stderr, "shmem: PE %d: PE %d on host %s was lost%s: its process ended before "
                "shmem_finalize (it exited or was killed); ending\n", shm.me, pe, host, via);
    _exit(SHM_EXIT_LOST);
}

void shm_path_lost(int host)
{
    char name[64];
    if (ntb_node_name(shm.hosts[host].node, name, sizeof name))
        snprintf(name, sizeof name, "node %u", shm.hosts[host].node);
    int pe = shm.hosts[host].first_pe;
    if (shm.me >= 0 && pe >= 0)
        lost(pe, LOST_PATH, -1);
    fflush(NULL);
    if (shm.me >= 0)
        fprintf(stderr, "shmem: PE %d: the path to the node of host %s is down; ending\n",
                shm.me, name);
    else
        fprintf(stderr, "shmem: relay on host %s: the path to the node of host %s is down; "
                "ending\n", getenv("NTBLEND_HOST") ? getenv("NTBLEND_HOST") : "?", name);
    _exit(SHM_EXIT_LOST);
}

void shm_ring_cut(int a, int b, const char *dead)
{
    char na[64], nb[64];
    if (ntb_node_name(shm.hosts[a].node, na, sizeof na))
        snprintf(na, sizeof na, "node %u", shm.hosts[a].node);
    if (ntb_node_name(shm.hosts[b].node, nb, sizeof nb))
        snprintf(nb, sizeof nb, "node %u", shm.hosts[b].node);
    fflush(NULL);
    if (shm.me >= 0)
        fprintf(stderr, "shmem: PE %d: the ring is cut in two (links down: %s): hosts %s and %s "
                "cannot reach each other; ending\n", shm.me, dead, na, nb);
    else
        fprintf(stderr, "shmem: relay: the ring is cut in two (links down: %s): hosts %s and %s "
                "cannot reach each other; ending\n", dead, na, nb);
    _exit(SHM_EXIT_LOST);
}

/* A failed path is someone's loss, but whose is for the connections' states to say (ours may
 * be the host that went down, and every path of ours with it): wait for shm_check_peers to
 * name the PE, or for oshrun to end us, as a blocked wait would; name this one only if
 * neither happens within SHM_PATH_WAIT_MS. */
#define SHM_PATH_WAIT_MS 2000

void shm_check_paths(void)
{
    for (int pe = 0; pe < shm.npes; pe++) {
        if (!shm.pes[pe].seq || seg_seq_check(shm.pes[pe].seq) == SEG_SEQ_OK)
            continue;
        for (uint64_t end = mono_ms() + SHM_PATH_WAIT_MS; mono_ms() < end;) {
            shm_check_exit();
            struct timespec ts = { 0, SHM_HEALTH_MS * 1000000L / 4 };
            nanosleep(&ts, NULL);
        }
        lost(pe, LOST_PATH, -1);
    }
}

void shm_check_peers(void)
{
    static _Atomic uint64_t next; /* any thread of the PE may wait */
    if (!shm.initialized || shm.finalized || !shm.pes)
        return;
    uint64_t now = mono_ms();
    if (now < next)
        return;
    next = now + SHM_HEALTH_MS;
    int relayed = -1, relayed_by = -1;
    unsigned relayed_why = 0;
    for (int pe = 0; pe < shm.npes; pe++) {
        struct shm_pe *p = &shm.pes[pe];
        if (pe == shm.me || !p->remote)
            continue;
        int st = seg_remote_state(p->remote);
        if (st == SEG_EVENT_AVAILABLE)
            continue;
        if (st == SEG_EVENT_LOST)
            lost(pe, LOST_PATH, -1);
        /* Removed (or unavailable): gone with its process, unless it finalized. */
        struct shm_ctrl *c = p->base ? shm_ctrl_of(pe) : NULL;
        if (c && atomic_load(&c->finished))
            continue;
        uint32_t l = c ? atomic_load(&c->lost) : 0;
        if (!l || l - 1 >= (uint32_t)shm.npes || (int)(l - 1) == shm.me)
            lost(pe, LOST_PROCESS, -1);
        relayed = (int)(l - 1); /* it stopped on a loss of its own: report that one */
        relayed_by = pe;
        relayed_why = atomic_load(&c->lost_why);
    }
    if (relayed >= 0)
        lost(relayed, relayed_why == LOST_PATH ? LOST_PATH : LOST_PROCESS, relayed_by);
}
