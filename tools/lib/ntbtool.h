/*
 * libntbtool: what the tools and benchmarks in tools/ share, built as a static library
 * (tools/lib/) and linked by every tool. This header includes the five that declare what it
 * owns, one per source file:
 *
 *   - numbers, sizes, clocks, futexes, the futex ping-pong baseline, CPU placement, latency
 *     statistics, JSON output helpers and the data pattern both sides of a benchmark can
 *     compute (util.c, tool_util.h);
 *   - the command line every tool parses the same way: one getopt loop, one set of common
 *     options (-a, --peer, --port, --node, --json, --no-spawn, --session, --timeout,
 *     --serve, --once, --quiet) and the same messages for bad values (cmdline.c,
 *     tool_cmdline.h);
 *   - opening an adapter with messages that say what to do, doorbell waits that sleep,
 *     starting and reaping the peer half of a two-host tool, and the scratchpad/doorbell
 *     rendezvous of ntb_perf and ntb_pingpong (ntbpeer.c, tool_peer.h);
 *   - the segment-API session of scibench, dma_bench and intr_bench (session.c,
 *     tool_session.h);
 *   - the few facts about the fabric the tools report: host names, the latency model
 *     (fabinfo.c, tool_fabinfo.h).
 *
 * Only public headers (include/ntblend/) are needed to use it. Functions return 0 or
 * -errno unless their comment says otherwise; the ones that fail after printing a message
 * say so.
 */
#ifndef NTBLEND_NTBTOOL_H
#define NTBLEND_NTBTOOL_H

#include "tool_util.h"
#include "tool_cmdline.h"
#include "tool_peer.h"
#include "tool_session.h"
#include "tool_fabinfo.h"

#endif
