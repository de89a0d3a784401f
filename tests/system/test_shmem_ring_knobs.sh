#!/usr/bin/env bash
# The routed transport's settings (test_shmem_ring.sh runs the placements at the defaults):
# every program of test_shmem.sh's list on ring5.ini at 5 PEs with SHMEM_RING_THREADS=1 and 4
# (the rings spread over other transfer threads) and with SHMEM_RING_CHUNK=4096 (many chunks
# per put, most messages in CPU-copied slots). Then on four-hosts-switch.ini with
# SHMEM_ATOMICS=software the AMO-heavy programs run with the target hosts' relays doing the
# atomics (at 4 PEs, and 8 as 2 per host), which SHMEM_DEBUG's "routed transport" lines
# confirm, and with hardware atomics no relay is involved.
set -euo pipefail
fabric="t-shmem-knobs-$$"
. "${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}/tests/system/shmem/common.sh"
build "${progs[@]}"

n up "$src/examples/topologies/ring5.ini" >/dev/null
SHMEM_RING_THREADS=1 run_all "5 PEs, 1 thread" -np 5
SHMEM_RING_THREADS=4 run_all "5 PEs, 4 threads" -np 5
SHMEM_RING_CHUNK=4096 run_all "5 PEs, 4 KiB chunks" -np 5
n down >/dev/null

# Software atomics on a switch: the target host's relay does every AMO between hosts.
n up "$src/examples/topologies/four-hosts-switch.ini" >/dev/null
amo_progs=(atomics amo_ext lock signal barrier)
sw_run() {
    local label=$1 np=$2
    shift 2
    for p in "${amo_progs[@]}"; do
        SHMEM_ATOMICS=software SHMEM_DEBUG=1 timeout 60 "$bin/oshrun" --fabric "$fabric" "$@" \
            "$work/$p" >"$work/out" 2>&1 || fail "$p ($label): $(cat "$work/out")"
        # Each PE connected to the relay of every other host with PEs (-o: PEs' debug lines
        # may share a line of the output).
        [[ $(grep -o "routed transport: node on host node" "$work/out" | wc -l) == $((np * 3)) ]] ||
            fail "$p ($label): the PEs did not use the relays: $(cat "$work/out")"
        grep -q "relay on node .*transfer threads" "$work/out" ||
            fail "$p ($label): no relay ran: $(cat "$work/out")"
    done
}
# LUT entries (64 of 4 MiB per adapter): the relay of each host maps every other host's PE
# heaps too, and each PE the other hosts' inboxes (nrings x 8 chunks), so the heaps are small.
SHMEM_SYMMETRIC_SIZE=16M sw_run "software atomics, 4 PEs" 4 -np 4
SHMEM_SYMMETRIC_SIZE=4M SHMEM_RING_CHUNK=64K sw_run "software atomics, 8 PEs, 2 per host" 8 \
    -np 8 --ppn 2
# Hardware atomics (the default): no relay is involved.
SHMEM_DEBUG=1 timeout 60 "$bin/oshrun" --fabric "$fabric" -np 4 "$work/atomics" >"$work/out" 2>&1 ||
    fail "atomics (hardware): $(cat "$work/out")"
if grep -q "routed transport" "$work/out"; then
    fail "hardware atomics on a switch used the relays: $(cat "$work/out")"
fi
n down >/dev/null
echo "test_shmem_ring_knobs: ok"
