/*
 * libFuzzer harness for the agent's control requests (src/agent/ctl.c and what they call in
 * mem.c, seg.c, intr.c, place.c, lend.c, hotplug.c): what a buggy or hostile process on host
 * a can ask its agent. Each input is a run of requests from three processes of a's, served by
 * agent_serve as the control socket would; a process may hang up after any of its requests.
 * The agent must write nothing outside what it owns (agent_env.h: our mailbox area and other
 * hosts' RAM are read-only, other hosts' tables are compared after each input), keep its
 * allocator consistent, and never post a connection's events outside memory of the process
 * that holds the connection. At the end every process hangs up and what the host itself
 * holds is given back (hot-added devices removed, host borrows returned, devices lent out
 * again): everything must be back to where it was before the input.
 *
 * The other hosts are powered off and run no agent: a request that needs one (a remote
 * borrow, a connection to a remote segment, placement elsewhere) gets -ENOLINK from the
 * mailbox at once, without waiting for a timeout. Peer pings are not served here: the agent
 * answers them from a thread of their own (the mailbox harness covers the mailbox).
 *
 * Input: records of [process u8][struct agent_req, 32 bytes]; in the first byte, bits 0-1
 * pick the process (3 is the first again), bit 2 hangs it up after the request. At most 64.
 *
 * NTBLEND_FUZZ_SEEDS=DIR writes seed inputs (valid requests of every operation) there first.
 */
#include "agent_env.h"
#include "agent_proto.h"
#include "seg_shared.h"
#include "ntblend/smartio.h"

#define MAX_RECORDS 64
#define RECORD (1 + sizeof(struct agent_req))
#define PID0 (1 << 30) /* processes of host a's (no real pid is this large) */
#define OTHER_PID (PID0 + 16) /* another process, not fuzzed: its memory is read-only */

_Static_assert(sizeof(struct agent_req) == 32, "request layout");

static struct env_own baseline;
static uint64_t other_phys; /* a block of OTHER_PID's */

static void setup(void)
{
    env_up(false);
    /* Memory of another process of a's: the agent must not write into it for anyone else. */
    if (amem_alloc(64 << 10, 4096, OTHER_PID, &other_phys))
        ENV_FAIL("cannot allocate");
    env_protect(fab_ram(agent.f, agent.host, other_phys, 64 << 10), 64 << 10);
    env_baseline();
    env_own(&baseline);
}

/* Give back what the host holds for itself, as `ntblend` would, and lend its devices out. */
static void host_release(void)
{
    ahot_stop();
    struct fab *f = agent.f;
    for (uint32_t fn = 0; fn < f->ctl->nfuncs; fn++)
        for (int i = 0; i < 8 && alend_return(0, fn) == 0; i++)
            ;
    const struct fab_host *self = fab_host(f, agent.host);
    for (uint32_t i = 0; i < self->nfuncs; i++)
        alend_available(0, self->func_first + i, true);
}

/* A connection's event word must lie in memory of the process that holds the connection. */
static void check_event_words(void)
{
    pthread_mutex_lock(&segments.lock);
    for (struct conn_out *c = segments.out; c; c = c->next)
        if (!amem_owned(c->event_phys, sizeof(struct seg_event_word), c->client, NULL, NULL))
            ENV_FAIL("a connection of process %d posts its events outside its memory (at %#llx)",
                     c->client, (unsigned long long)c->event_phys);
    pthread_mutex_unlock(&segments.lock);
}

/* ---------------------------------------------------------------- seeds */

static uint8_t seed[RECORD * MAX_RECORDS];
static size_t seed_len;

static void rq(uint8_t who, uint32_t op, uint32_t flags, uint64_t a, uint64_t b, uint64_t c)
{
    struct agent_req r = { .op = op, .flags = flags, .a = a, .b = b, .c = c };
    seed[seed_len] = who;
    memcpy(seed + seed_len + 1, &r, sizeof r);
    seed_len += RECORD;
}

static void seed_out(const char *dir, const char *name)
{
    env_seed_write(dir, name, seed, seed_len);
    seed_len = 0;
}

static void write_seeds(const char *dir)
{
    struct fab *f = agent.f;
    uint32_t node = fab_host(f, agent.host)->node_id, node_b = fab_host(f, env_peers[0])->node_id;
    uint32_t nvme = (uint32_t)fab_func_by_name(f, "nvme0"), acc = (uint32_t)fab_func_by_name(f, "accel0");
    uint32_t remote = (uint32_t)fab_func_by_name(f, "accel1");
    /* The allocator is first fit: the first block after OTHER_PID's is here. */
    uint64_t next = other_phys + (64 << 10);

    rq(0, AGENT_HELLO, 0, AGENT_PROTO_VERSION, 0, 0);
    rq(0, AGENT_PING, 0, 0, 0, 0);
    rq(1, AGENT_STATS, 0, 0, 0, 0);
    rq(1, AGENT_MEMORY, 0, 0, 0, 0);
    seed_out(dir, "hello");

    rq(0, AGENT_ALLOC, 0, 4096, 4096, 0);
    rq(1, AGENT_FREE, 0, next, 0, 0);
    rq(0, AGENT_FREE, 0, next, 0, 0);
    rq(0, AGENT_ALLOC, 0, 1 << 20, 1 << 20, 0);
    seed_out(dir, "alloc");

    rq(0, AGENT_SEG_CREATE, 0, 0, 64 << 10, 0);
    rq(0, AGENT_SEG_PREPARE, 0, 1, 0, 0);
    rq(0, AGENT_SEG_AVAILABLE, 0, 1, 0, 1);
    rq(1, AGENT_ALLOC, 0, 4096, 4096, 0);
    rq(1, AGENT_SEG_CONNECT, 0, node, 1, next);
    rq(0, AGENT_SEG_AVAILABLE, 0, 1, 0, 0);
    rq(1, AGENT_SEG_DISCONNECT, 0, agent.host, 1, 0);
    rq(0, AGENT_SEG_REMOVE, 0, 1, 0, 0);
    seed_out(dir, "segment");

    rq(0, AGENT_SEG_CREATE, 0, 7, 4096, 0);
    rq(0, AGENT_SEG_PREPARE, 0, 7, 1, 0);
    rq(0, AGENT_SEG_AVAILABLE, 0, 7, 1, 1);
    rq(1, AGENT_ALLOC, 0, 4096, 4096, 0);
    rq(1, AGENT_SEG_CONNECT, 0, node, 7, next + (1 << 20));
    rq(4, AGENT_SEG_REMOVE, 0, 7, 0, 0);
    rq(1, AGENT_SEG_CONNECT, 1, node_b, 3, next);
    seed_out(dir, "segment-hangup");

    rq(0, AGENT_ALLOC, 0, 8192, 4096, 0);
    rq(0, AGENT_SEG_CREATE, 0, 0, 8192, next);
    rq(0, AGENT_SEG_ALLOC_AT, 0, env_peers[0], 4096, 0);
    rq(0, AGENT_SEG_FREE_AT, 0, env_peers[0], 1, 0);
    seed_out(dir, "segment-attach");

    rq(0, AGENT_INTR_CREATE, 0, 0, 0, 0);
    rq(1, AGENT_INTR_CONNECT, 0, node, 1, 0);
    rq(1, AGENT_INTR_CONNECT, 0, node_b, 1, 0);
    rq(0, AGENT_INTR_REMOVE, 0, 1, 0, 0);
    seed_out(dir, "interrupt");

    rq(0, AGENT_DEV_BORROW, 0, nvme, SIO_EXCLUSIVE, 0);
    rq(0, AGENT_DEV_MAP, 1, nvme, agent.host, next);
    rq(0, AGENT_DEV_MAP, 4, nvme, env_peers[0], 1 << 20);
    rq(0, AGENT_DEV_UNMAP, 0, nvme, 1, 0);
    rq(0, AGENT_DEV_SHARE, 0, nvme, 0, 0);
    rq(1, AGENT_DEV_BORROW, 0, nvme, SIO_SHARED, 0);
    rq(0, AGENT_DEV_RETURN, 0, nvme, 0, 0);
    seed_out(dir, "borrow");

    rq(0, AGENT_DEV_BORROW, 0, acc, SIO_SHARED, 1);
    rq(1, AGENT_DEV_MAP, 2, acc, env_peers[2], 0);
    rq(0, AGENT_DEV_AVAILABLE, 0, acc, 0, 0);
    rq(0, AGENT_DEV_RETURN, 0, acc, 0, 1);
    seed_out(dir, "borrow-host");

    rq(0, AGENT_DEV_HOTADD, 0, remote, 0, 0);
    rq(0, AGENT_DEV_BORROW, 0, remote, SIO_EXCLUSIVE, 0);
    rq(0, AGENT_DEV_HOTREMOVE, 0, remote, 0, 0);
    rq(0, AGENT_DEV_AVAILABLE, 0, remote, 1, 0);
    seed_out(dir, "remote");
}

/* ---------------------------------------------------------------- one input */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setup();
    const char *dir = getenv("NTBLEND_FUZZ_SEEDS");
    if (dir)
        write_seeds(dir);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (int n = 0; n < MAX_RECORDS && size >= RECORD; n++, data += RECORD, size -= RECORD) {
        int32_t pid = PID0 + (data[0] & 3) % 3;
        struct agent_req req;
        struct agent_rsp rsp;
        memcpy(&req, data + 1, sizeof req);
        if (req.op != AGENT_PEER_PING && !agent_serve(-1, pid, &req, &rsp))
            ENV_FAIL("request %u was not answered", req.op);
        if (data[0] & 4)
            agent_client_gone(pid);
        check_event_words();
        if (!amem_check())
            ENV_FAIL("after a request: the allocator's invariants do not hold");
    }
    for (int k = 0; k < 3; k++)
        agent_client_gone(PID0 + k);
    host_release();
    env_check_own(&baseline, "after every process hung up");
    env_check_foreign("after every process hung up");
    return 0;
}
