/*
 * sisci_hello: seg_hello written against the SISCI API (libsisci, docs/sisci.md), as a
 * program written for Dolphin's SISCI would be: it builds unchanged against a DIS install.
 *
 * The owner, on one host, creates a segment and an interrupt with agreed numbers and makes
 * the segment available; the user, on another host, connects to both, stores a message
 * straight into the owner's memory through the mapping, flushes, and triggers the interrupt.
 * The owner wakes up and prints the message.
 *
 *   ntblend run --host b -- sisci_hello serve            # owner (node 8 in two-hosts.ini)
 *   ntblend run --host a -- sisci_hello 8 ["message"]    # user: the owner's node id
 *
 * Either may start first: the user waits up to a minute for the segment and the interrupt.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sisci_api.h>

#define HELLO_SEGMENT 42u /* numbers the two sides agree on */
#define HELLO_INTR 42u
#define ADAPTER 0u        /* adapter number on each host (two-hosts.ini has one) */
#define WAIT_MS 60000u
#define TEXT_MAX 256u

static int failed(const char *what, sci_error_t err)
{
    fprintf(stderr, "sisci_hello: %s: %s\n", what, SCIGetErrorString(err));
    return 1;
}

static int serve(sci_desc_t sd)
{
    sci_local_segment_t seg;
    sci_local_interrupt_t intr;
    sci_map_t map;
    sci_error_t err;
    unsigned int node, intno = HELLO_INTR;

    SCIGetLocalNodeId(ADAPTER, &node, SCI_NO_FLAGS, &err);
    if (err != SCI_ERR_OK)
        return failed("SCIGetLocalNodeId", err);
    SCICreateSegment(sd, &seg, HELLO_SEGMENT, TEXT_MAX, NULL, NULL, SCI_NO_FLAGS, &err);
    if (err != SCI_ERR_OK)
        return failed("SCICreateSegment", err);
    char *text = SCIMapLocalSegment(seg, &map, 0, TEXT_MAX, NULL, SCI_NO_FLAGS, &err);
    if (err != SCI_ERR_OK)
        return failed("SCIMapLocalSegment", err);
    memset(text, 0, TEXT_MAX);
    SCICreateInterrupt(sd, &intr, ADAPTER, &intno, NULL, NULL, SCI_FLAG_FIXED_INTNO, &err);
    if (err != SCI_ERR_OK)
        return failed("SCICreateInterrupt", err);
    /* Only now may others connect: the segment is initialised and the interrupt exists. */
    SCIPrepareSegment(seg, ADAPTER, SCI_NO_FLAGS, &err);
    if (err == SCI_ERR_OK)
        SCISetSegmentAvailable(seg, ADAPTER, SCI_NO_FLAGS, &err);
    if (err != SCI_ERR_OK)
        return failed("making the segment available", err);
    printf("node %u: segment %u and interrupt %u ready\n", node, HELLO_SEGMENT, intno);
    fflush(stdout);

    SCIWaitForInterrupt(intr, WAIT_MS, SCI_NO_FLAGS, &err);
    if (err != SCI_ERR_OK)
        return failed("SCIWaitForInterrupt", err);
    printf("got \"%.*s\"\n", (int)TEXT_MAX, text);

    SCISetSegmentUnavailable(seg, ADAPTER, SCI_NO_FLAGS, &err);
    SCIRemoveInterrupt(intr, SCI_NO_FLAGS, &err);
    SCIUnmapSegment(map, SCI_NO_FLAGS, &err);
    SCIRemoveSegment(seg, SCI_FLAG_FORCE_DISCONNECT, &err);
    return 0;
}

static int greet(sci_desc_t sd, unsigned int owner, const char *msg)
{
    sci_remote_segment_t seg;
    sci_remote_interrupt_t intr;
    sci_map_t map;
    sci_error_t err;

    SCIConnectSegment(sd, &seg, owner, HELLO_SEGMENT, ADAPTER, NULL, NULL, WAIT_MS,
                      SCI_NO_FLAGS, &err);
    if (err != SCI_ERR_OK)
        return failed("SCIConnectSegment", err);
    volatile char *text = SCIMapRemoteSegment(seg, &map, 0, TEXT_MAX, NULL, SCI_NO_FLAGS, &err);
    if (err != SCI_ERR_OK)
        return failed("SCIMapRemoteSegment", err);
    SCIConnectInterrupt(sd, &intr, owner, ADAPTER, HELLO_INTR, WAIT_MS, SCI_NO_FLAGS, &err);
    if (err != SCI_ERR_OK)
        return failed("SCIConnectInterrupt", err);

    /* Plain stores through the NTB window into the owner's memory, then the doorbell. */
    size_t n = strlen(msg);
    if (n >= TEXT_MAX)
        n = TEXT_MAX - 1;
    for (size_t i = 0; i < n; i++)
        text[i] = msg[i];
    text[n] = '\0';
    SCIFlush(NULL, SCI_NO_FLAGS);
    SCITriggerInterrupt(intr, SCI_NO_FLAGS, &err);
    if (err != SCI_ERR_OK)
        return failed("SCITriggerInterrupt", err);
    printf("stored %zu bytes into node %u's segment %u and triggered its interrupt\n", n, owner,
           HELLO_SEGMENT);

    SCIDisconnectInterrupt(intr, SCI_NO_FLAGS, &err);
    SCIUnmapSegment(map, SCI_NO_FLAGS, &err);
    SCIDisconnectSegment(seg, SCI_NO_FLAGS, &err);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        fprintf(argc < 2 ? stderr : stdout,
                "usage: sisci_hello serve | sisci_hello NODE [MESSAGE]\n"
                "Run it with ntblend run --host H -- sisci_hello ...\n");
        return argc < 2 ? 2 : 0;
    }
    sci_error_t err;
    sci_desc_t sd;
    SCIInitialize(SCI_NO_FLAGS, &err);
    if (err != SCI_ERR_OK)
        return failed("SCIInitialize", err);
    SCIOpen(&sd, SCI_NO_FLAGS, &err);
    if (err != SCI_ERR_OK)
        return failed("SCIOpen", err);
    int rc;
    if (!strcmp(argv[1], "serve")) {
        rc = serve(sd);
    } else {
        char *end;
        unsigned long node = strtoul(argv[1], &end, 0);
        if (*end || end == argv[1]) {
            fprintf(stderr, "sisci_hello: '%s' is not a node id (ntblend status shows them)\n",
                    argv[1]);
            rc = 2;
        } else {
            rc = greet(sd, (unsigned int)node, argc > 2 ? argv[2] : "hello over SISCI");
        }
    }
    SCIClose(sd, SCI_NO_FLAGS, &err);
    SCITerminate();
    return rc;
}
