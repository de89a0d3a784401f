#!/usr/bin/env bash
# OpenSHMEM over the routed transport (xport.c, relay.c). On ring5.ini (a switchless ring of 5
# hosts, each reaching only its two neighbours) every program of test_shmem.sh's list runs at 5
# PEs round-robin (each PE has two non-neighbours), at 3 PEs on a,c,e (two hops between all
# but e-a; b and d only forward), at 4 PEs, at 2 PEs on a,c, and at 10 PEs as 2 per host with
# an 8M heap. The chunk chosen without SHMEM_RING_CHUNK is 512 KiB where the LUTs afford it
# and 256 KiB where they do not (a 72M heap), the same in every process. quiet_fwd, progress
# and ring_order pick non-neighbours on purpose: quiet waits for forwarded puts, the relays
# serve a target that sleeps outside the library, and fence/put-with-signal keep their order
# across the hops; quietmt and mtlock quiet while other threads put. On
# tests/system/topologies/ring7.ini the PE three hops away is reached through two nodes, the first
# passing each message (large put chunks by DMA) on to the second's inbox.
# The same programs with other transfer threads and chunks, and software atomics through the
# relays of a switched fabric, are test_shmem_ring_knobs.sh; with SHMEM_RING_FAILOVER=on,
# test_shmem_ring_failover.sh; test_shmem_failover.sh pulls links under it.
set -euo pipefail
fabric="t-shmem-ring-$$"
. "${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}/tests/system/shmem/common.sh"
build "${progs[@]}" quietmt mtlock

n up "$src/examples/topologies/ring5.ini" >/dev/null
# The job is routed: non-neighbours are reached through the relays.
SHMEM_DEBUG=1 timeout 60 "$bin/oshrun" --fabric "$fabric" -np 5 "$work/hello" >"$work/out" 2>&1 ||
    fail "hello on the ring: $(cat "$work/out")"
[[ $(grep -o "routed around the ring" "$work/out" | wc -l) == 5 ]] ||
    fail "5 PEs on ring5 are not routed: $(cat "$work/out")"
# Without SHMEM_RING_CHUNK the chunk is 512 KiB when the adapters can map the larger inboxes
# next to the heap (5 PEs, the default heap), else 256 KiB; every PE and node agrees.
chunk_is() { # LABEL KiB: the chunk every PE and node of $work/out chose, and the relays use
    local n
    n=$(grep -o "ring chunk $2 KiB" "$work/out" | wc -l)
    ((n >= 10)) && [[ $(grep -o "ring chunk [0-9]* KiB" "$work/out" | wc -l) == "$n" ]] &&
        [[ $(grep -o "(chunk $(($2 * 1024)))" "$work/out" | wc -l) == 5 ]] ||
        fail "$1: not $2 KiB chunks everywhere: $(grep -E 'chunk|rings of' "$work/out")"
}
chunk_is "5 PEs, default heap" 512
SHMEM_SYMMETRIC_SIZE=72M SHMEM_DEBUG=1 timeout 60 "$bin/oshrun" --fabric "$fabric" -np 5 \
    "$work/hello" >"$work/out" 2>&1 || fail "hello, 72M heap: $(cat "$work/out")"
chunk_is "5 PEs, 72M heap (512 KiB inboxes do not fit next to it)" 256
run_all "5 PEs, ring" -np 5
# A quiet waits for the puts issued before it even while other threads' later puts, gone a
# shorter way, are acknowledged first: the nodes hold puts to PE 2 for 2 ms, and PE 1 (which
# maps PE 2) checks that PE 0's put is there once PE 0 says it quieted.
SHMEM_RELAY_SLOW_PE=2 timeout 60 "$bin/oshrun" --fabric "$fabric" -np 5 "$work/quietmt" \
    >"$work/out" 2>&1 || fail "quietmt: $(cat "$work/out")"
# Locks and increments from 4 threads of every PE (tests-sos's mt_lock_test, harder).
timeout 120 "$bin/oshrun" --fabric "$fabric" -np 5 "$work/mtlock" >"$work/out" 2>&1 ||
    fail "mtlock: $(cat "$work/out")"
run_all "3 PEs on a,c,e" -np 3 --hosts a,c,e
run_all "4 PEs, ring" -np 4
run_all "2 PEs on a,c" -np 2 --hosts a,c
SHMEM_SYMMETRIC_SIZE=8M run_all "10 PEs, 2 per host" -np 10 --ppn 2
for p in teams coll; do # SHMEM_TEAM_SHARED: the 2 PEs of a host
    SHMEM_SYMMETRIC_SIZE=8M timeout 60 "$bin/oshrun" --fabric "$fabric" -np 10 --ppn 2 \
        "$work/$p" 2 >"$work/out" 2>&1 || fail "$p (10 PEs, 2 per host, SHARED): $(cat "$work/out")"
done
n down >/dev/null

# Seven hosts: messages to the PE three hops away are passed on from node to node (large put
# chunks by the nodes' DMA engines), and replies come back through a node.
ring7_run ""
echo "test_shmem_ring: ok"
