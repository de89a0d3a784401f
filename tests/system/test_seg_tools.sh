#!/usr/bin/env bash
# The segment benchmarks and the seg_hello example run between two hosts and check their own
# data (they exit non-zero when a byte is wrong). Behaviour only: no figure is asserted.
set -euo pipefail
. "${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}/tests/lib/fixture.sh"
fx_init segtools
log=$work/log

n up "$NTBLEND_SRC/examples/topologies/two-hosts.ini" >/dev/null

out=$(n run --host a -- scibench --min 64 --max 64K -t 2 -r 1 --json)
grep -q '"results"' <<<"$out" || fail "scibench --json has no results: $out"

out=$(n run --host a -- dma_bench --min 4K --max 64K -s 1M --seg-size 64K -r 1 --json)
grep -q '"results"' <<<"$out" || fail "dma_bench --json has no results: $out"

out=$(n run --host a -- intr_bench -n 200 --data --baseline --json)
grep -q '"median_ns"' <<<"$out" || fail "intr_bench --json has no median: $out"

# The guide's example: the owner on b waits for a message from a.
n run --host b -- seg_hello serve >"$log" 2>&1 &
owner=$!
n run --host a -- seg_hello 8 "hello over the NTB" >/dev/null || fail "seg_hello user failed"
wait "$owner" || fail "seg_hello owner failed: $(cat "$log")"
grep -q "hello over the NTB" "$log" || fail "the owner did not print the message: $(cat "$log")"
