/*
 * seg_hello: the smallest complete program with the segment API (docs/seg-guide.md).
 *
 * The owner, on one host, creates a segment and an interrupt and makes the segment available;
 * the user, on another host, connects to both, stores a message straight into the owner's
 * memory through the mapping, checks with a sequence that the link held, and triggers the
 * interrupt with the message length as data. The owner wakes up and prints the message.
 *
 *   ntblend run --host b -- seg_hello serve            # owner (node 8 in two-hosts.ini)
 *   ntblend run --host a -- seg_hello 8 ["message"]    # user: the owner's node id
 *
 * Either may start first: the user waits up to 10 s for the segment to appear.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ntblend/seg.h>

#define HELLO_SEGMENT 42u   /* ids the two sides agree on */
#define HELLO_INTR 42u
#define ADAPTER 0           /* adapter index on each host (two-hosts.ini has one) */
#define WAIT_MS 60000

/* The layout of the shared segment. */
struct hello {
    char text[256];
};

static int fail(const char *what, int err)
{
    fprintf(stderr, "seg_hello: %s: %s\n", what, seg_strerror(err));
    return 1;
}

static int serve(void)
{
    seg_desc_t *sd;
    seg_local_t *seg;
    seg_map_t *map;
    seg_intr_t *intr;
    uint32_t node, iid = HELLO_INTR;
    int rc;

    if ((rc = seg_open(&sd)))
        return fail("seg_open", rc);
    if ((rc = seg_local_node_id(&node)))
        return fail("seg_local_node_id", rc);
    if ((rc = seg_create(sd, &seg, HELLO_SEGMENT, sizeof(struct hello))))
        return fail("seg_create", rc);
    struct hello *h = seg_map_local(seg, 0, 0, 0, &map);
    if (!h)
        return fail("seg_map_local", -errno);
    memset(h, 0, sizeof *h);
    if ((rc = seg_intr_create(sd, &intr, &iid)))
        return fail("seg_intr_create", rc);
    /* Only now may others connect: the segment is initialised and the interrupt exists. */
    if ((rc = seg_prepare(seg, ADAPTER)) || (rc = seg_set_available(seg, ADAPTER)))
        return fail("making the segment available", rc);
    printf("node %u: segment %u is available; waiting for a message\n", node, HELLO_SEGMENT);
    fflush(stdout);

    uint32_t len = 0;
    size_t got = 0;
    rc = seg_intr_wait_data(intr, &len, sizeof len, &got, WAIT_MS);
    if (rc)
        return fail("waiting for the interrupt", rc);
    if (got != sizeof len || len >= sizeof h->text)
        len = sizeof h->text - 1;
    printf("node %u: got \"%.*s\"\n", node, (int)len, h->text);

    /* Tell connections first, then remove: their mappings stay harmless (quarantine). */
    seg_set_unavailable(seg, ADAPTER);
    seg_unmap(map);
    seg_remove(seg);
    seg_intr_remove(intr);
    seg_close(sd);
    return 0;
}

static int user(uint32_t owner, const char *text)
{
    seg_desc_t *sd;
    seg_remote_t *rs;
    seg_map_t *map;
    seg_seq_t *seq;
    seg_rintr_t *ri;
    int rc;

    if ((rc = seg_open(&sd)))
        return fail("seg_open", rc);
    if ((rc = seg_connect(sd, &rs, owner, HELLO_SEGMENT, ADAPTER, 10000)))
        return fail("seg_connect", rc);
    struct hello *h = seg_map_remote(rs, 0, sizeof(struct hello), 0, &map);
    if (!h)
        return fail("seg_map_remote", -errno);

    /* Plain stores reach the owner's memory. A sequence says whether the link may have
     * dropped some of them: redo them if it failed and recovered. */
    uint32_t len = (uint32_t)strnlen(text, sizeof h->text - 1);
    if ((rc = seg_seq_create(map, &seq)))
        return fail("seg_seq_create", rc);
    int status;
    do {
        seg_seq_start(seq);
        memcpy(h->text, text, len);
        h->text[len] = '\0';
        status = seg_seq_check(seq); /* flushes, then compares */
    } while (status == SEG_SEQ_RETRIABLE);
    if (status != SEG_SEQ_OK)
        return fail("storing the message", -ENOLINK);

    if ((rc = seg_intr_connect(sd, &ri, owner, HELLO_INTR, ADAPTER, 10000)))
        return fail("seg_intr_connect", rc);
    if ((rc = seg_intr_trigger_data(ri, &len, sizeof len)))
        return fail("seg_intr_trigger_data", rc);
    printf("wrote \"%.*s\" into segment %u of node %u and triggered its interrupt\n", (int)len,
           text, HELLO_SEGMENT, owner);

    seg_intr_disconnect(ri);
    seg_seq_remove(seq);
    seg_unmap(map);
    seg_disconnect(rs);
    seg_close(sd);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "serve") == 0)
        return serve();
    char *end;
    unsigned long node = argc >= 2 ? strtoul(argv[1], &end, 10) : 0;
    if (argc < 2 || argc > 3 || *end || node == 0 || node > 65535) {
        fprintf(stderr, "usage: ntblend run --host B -- seg_hello serve\n"
                        "       ntblend run --host A -- seg_hello OWNER_NODE [MESSAGE]\n");
        return 2;
    }
    return user((uint32_t)node, argc == 3 ? argv[2] : "hello over the NTB");
}
