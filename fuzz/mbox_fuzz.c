/*
 * libFuzzer harness for the agent-to-agent mailbox (src/agent/mbox.c and the handlers of
 * lend.c, seg.c, intr.c, place.c): what a buggy or hostile peer host can send host a's agent.
 * Each input is a run of requests, each written into the sending peer's slot of a's mailbox
 * area exactly as a peer's agent would (payload, length, then sequence) and handled by one
 * pass of the mailbox (mbox_poll). The agent must answer every request into the sender's
 * RAM, write nothing outside what it owns (agent_env.h: other hosts' RAM and our mailbox
 * area are read-only, other hosts' tables are compared after each input), and keep its
 * allocator consistent. After the run every peer reboots: what their requests made a hold
 * (borrows, windows, requester IDs, IOMMU mappings, connections, segments created for them)
 * must be gone, back to where it was before the input.
 *
 * Input: records of [sender u8][type u8][length u16 LE][payload]. The sender picks one of the
 * other hosts; the slot's length field claims 8 + length bytes (header and payload) even when
 * the input ends sooner or the slot holds less, as a lying peer's would. At most 32 records.
 *
 * The peers run no agent: nothing here waits for one (handlers never call other agents, and
 * the reboot at the end drops the peers' connections before it removes segments, so no
 * segment removal has anyone to notify).
 *
 * NTBLEND_FUZZ_SEEDS=DIR writes seed inputs (valid requests of every type) there first.
 */
#include "agent_env.h"
#include "ntblend/smartio.h"

#define MAX_RECORDS 32
#define HALF (FAB_MBOX_SLOT / 2)
#define DATA_MAX (HALF - 8) /* payload room of a mailbox half, as mbox.c lays it out */
#define OWNER_PID (1 << 30) /* a process of host a's (no real pid is this large) */

struct half { /* src/agent/mbox.c */
    _Atomic uint32_t seq;
    uint32_t len;
    uint8_t data[DATA_MAX];
};

/* Payloads, as lend.c, seg_int.h and place.c define them. */
struct lend_req { /* src/agent/lend_int.h */
    uint32_t fn, mode, target, pages;
    uint64_t addr;
    uint32_t id, boot;
    uint32_t pid, pad;
    uint64_t iova;
};
struct inbound_req {
    uint64_t addr, size;
    uint32_t rid;
};
struct seg_for {
    uint64_t size;
    uint32_t id;
};

static struct env_own baseline;
static uint32_t seg_id, intr_id;

static void setup(void)
{
    env_up(true);
    /* Something for peers to connect to: a segment of a process of ours, available on both
     * adapters, and an interrupt. */
    uint64_t id, phys, size;
    if (aseg_create(OWNER_PID, 0, 64 << 10, 0, &id, &phys, &size))
        ENV_FAIL("cannot create a segment");
    seg_id = (uint32_t)id;
    for (uint32_t i = 0; i < fab_host(agent.f, agent.host)->nadapters; i++)
        if (aseg_prepare(OWNER_PID, seg_id, i) || aseg_available(OWNER_PID, seg_id, i, true))
            ENV_FAIL("cannot make the segment available");
    if (aintr_create(OWNER_PID, 0, &id, &phys))
        ENV_FAIL("cannot create an interrupt");
    intr_id = (uint32_t)id;
    env_baseline();
    env_own(&baseline);
}

/* ---------------------------------------------------------------- seeds */

static uint8_t seed[8192];
static size_t seed_len;

static void rec(uint32_t peer, uint32_t type, const void *payload, uint16_t len)
{
    uint8_t h[4] = { (uint8_t)peer, (uint8_t)type, (uint8_t)len, (uint8_t)(len >> 8) };
    memcpy(seed + seed_len, h, 4);
    if (len)
        memcpy(seed + seed_len + 4, payload, len);
    seed_len += 4 + len;
}

static void seed_out(const char *dir, const char *name)
{
    env_seed_write(dir, name, seed, seed_len);
    seed_len = 0;
}

static void write_seeds(const char *dir)
{
    struct fab *f = agent.f;
    /* Peer k of the record is env_peers[k]: b, c, d. b and c share a's switch, d is cabled
     * to a's second adapter. */
    uint32_t b_ad = fab_host(f, env_peers[0])->adapter_first;
    uint32_t d_ad = fab_host(f, env_peers[2])->adapter_first;
    uint32_t nvme = (uint32_t)fab_func_by_name(f, "nvme0"), acc = (uint32_t)fab_func_by_name(f, "accel0");
    uint32_t boot_b = 0; /* this life (send_one) */
    uint16_t rid0 = fab_adapter(f, fab_host(f, agent.host)->adapter_first)->rid;

    rec(0, MBOX_PING, NULL, 0);
    seed_out(dir, "ping");

    struct seg_req sr = { .id = seg_id, .from_adapter = b_ad, .boot_gen = boot_b };
    struct seg_note note = { .conn_id = 1 };
    rec(0, MBOX_SEG_CONNECT, &sr, sizeof sr);
    rec(0, MBOX_SEG_DISCONNECT, &note, sizeof note);
    sr.from_adapter = d_ad;
    rec(2, MBOX_SEG_CONNECT, &sr, sizeof sr);
    seed_out(dir, "seg-connect");

    note.event = 3;
    rec(1, MBOX_SEG_NOTIFY, &note, sizeof note);
    sr = (struct seg_req){ .id = intr_id, .from_adapter = b_ad };
    rec(0, MBOX_INTR_CONNECT, &sr, sizeof sr);
    seed_out(dir, "notify-intr");

    struct lend_req lr = { .fn = nvme, .mode = SIO_EXCLUSIVE, .boot = boot_b };
    rec(0, MBOX_DEV_BORROW, &lr, sizeof lr);
    lr = (struct lend_req){ .fn = nvme, .target = env_peers[0], .addr = 2 << 20, .pages = 4 };
    rec(0, MBOX_DEV_MAP, &lr, sizeof lr);
    lr = (struct lend_req){ .fn = nvme, .target = agent.host, .addr = 4 << 20, .pages = 1 };
    rec(0, MBOX_DEV_MAP, &lr, sizeof lr);
    lr = (struct lend_req){ .fn = nvme, .target = env_peers[0], .addr = 8 << 20, .pages = 2,
                            .mode = 2, .iova = 1 << 30 }; /* at an I/O address of the borrower's */
    rec(0, MBOX_DEV_MAP, &lr, sizeof lr);
    lr = (struct lend_req){ .fn = nvme, .id = 1 };
    rec(0, MBOX_DEV_UNMAP, &lr, sizeof lr);
    lr = (struct lend_req){ .fn = nvme, .mode = 1, .pid = 1234 };
    rec(0, MBOX_DEV_SHARE, &lr, sizeof lr);
    lr = (struct lend_req){ .fn = nvme };
    rec(0, MBOX_DEV_RETURN, &lr, sizeof lr);
    seed_out(dir, "borrow-map");

    lr = (struct lend_req){ .fn = acc, .mode = SIO_SHARED, .boot = boot_b };
    rec(0, MBOX_DEV_BORROW, &lr, sizeof lr);
    rec(1, MBOX_DEV_BORROW, &lr, sizeof lr);
    lr = (struct lend_req){ .fn = acc, .target = env_peers[1], .addr = 1 << 20, .pages = 2 };
    rec(1, MBOX_DEV_MAP, &lr, sizeof lr);
    seed_out(dir, "borrow-shared");

    struct inbound_req in = { .addr = 2 << 20, .size = 1 << 20, .rid = rid0 };
    rec(0, MBOX_INBOUND_MAP, &in, sizeof in);
    rec(1, MBOX_INBOUND_MAP, &in, sizeof in);
    rec(0, MBOX_INBOUND_UNMAP, &in, sizeof in);
    seed_out(dir, "inbound");

    struct seg_for sf = { .size = 64 << 10 };
    rec(0, MBOX_SEG_CREATE_FOR, &sf, sizeof sf);
    sr = (struct seg_req){ .id = seg_id + 1, .from_adapter = b_ad, .boot_gen = boot_b };
    rec(0, MBOX_SEG_CONNECT, &sr, sizeof sr);
    sf = (struct seg_for){ .id = seg_id + 1 };
    rec(0, MBOX_SEG_REMOVE_FOR, &sf, sizeof sf);
    seed_out(dir, "create-for");

    uint8_t junk[64] = { 0 };
    rec(0, 40, junk, sizeof junk);
    rec(1, MBOX_SEG_CONNECT, junk, 4);
    seed[seed_len++] = 0; /* a record whose payload claims more than the input holds */
    seed[seed_len++] = MBOX_DEV_MAP;
    seed[seed_len++] = 0xff;
    seed[seed_len++] = 0xff;
    seed_out(dir, "malformed");
}

/* ---------------------------------------------------------------- one input */

static void send_one(uint32_t from, uint32_t type, const uint8_t *payload, uint32_t avail,
                     uint32_t claimed)
{
    struct half *req = (struct half *)(env_mbox + (uint64_t)from * FAB_MBOX_SLOT);
    const struct half *rsp = fab_ram(agent.f, from, (uint64_t)agent.host * FAB_MBOX_SLOT + HALF,
                                     HALF);
    uint32_t hdr[2] = { type, 0 };
    memset(req->data, 0, sizeof req->data);
    memcpy(req->data, hdr, sizeof hdr);
    if (avail > DATA_MAX - sizeof hdr)
        avail = DATA_MAX - sizeof hdr;
    memcpy(req->data + sizeof hdr, payload, avail);
    /* A claimed boot count is given relative to the sender's current one: the word in the
     * input says how many lives ago the request was written (0: this life), so an input means
     * the same whichever life its peer is in (every input ends with the peers rebooting). */
    size_t at = type == MBOX_SEG_CONNECT  ? offsetof(struct seg_req, boot_gen)
                : type == MBOX_DEV_BORROW ? offsetof(struct lend_req, boot)
                                          : SIZE_MAX;
    if (at != SIZE_MAX && at + 4 <= avail) {
        uint32_t ago, boot = atomic_load(&fab_host(agent.f, from)->boot_gen);
        memcpy(&ago, req->data + sizeof hdr + at, 4);
        boot -= ago;
        memcpy(req->data + sizeof hdr + at, &boot, 4);
    }
    req->len = (uint32_t)sizeof hdr + claimed;
    uint32_t seq = atomic_load(&req->seq) + 1;
    atomic_store_explicit(&req->seq, seq, memory_order_release);
    mbox_poll();
    if (atomic_load(&rsp->seq) != seq)
        ENV_FAIL("no answer to a request of type %u", type);
    if (rsp->len < sizeof hdr || rsp->len > sizeof hdr + MBOX_MAX_PAYLOAD ||
        memcmp(rsp->data, &type, sizeof type))
        ENV_FAIL("a malformed answer to a request of type %u (length %u)", type, rsp->len);
}

/* Every peer reboots, and the agent's watchers see it. */
static void reboot_peers(void)
{
    for (uint32_t k = 0; k < env_npeers; k++)
        atomic_fetch_add(&fab_host(agent.f, env_peers[k])->boot_gen, 1);
    aseg_sweep(); /* first: the peers' connections go, so removals have nobody to notify */
    alend_sweep();
}

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
    for (int n = 0; n < MAX_RECORDS && size >= 4; n++) {
        uint32_t from = env_peers[data[0] % env_npeers], type = data[1];
        uint32_t len = (uint32_t)data[2] | (uint32_t)data[3] << 8;
        data += 4;
        size -= 4;
        uint32_t avail = len < size ? len : (uint32_t)size;
        send_one(from, type, data, avail, len);
        data += avail;
        size -= avail;
        if (!amem_check())
            ENV_FAIL("after a request: the allocator's invariants do not hold");
    }
    reboot_peers();
    env_check_own(&baseline, "after the peers rebooted");
    env_check_foreign("after the peers rebooted");
    return 0;
}
