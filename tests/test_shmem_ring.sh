#!/usr/bin/env bash
# OpenSHMEM over the routed transport (xport.c, relay.c). On ring5.ini (a switchless ring of 5
# hosts, each reaching only its two neighbours) every program of test_shmem.sh's list runs at 5
# PEs round-robin (each PE has two non-neighbours), at 3 PEs on a,c,e (two hops between all
# but e-a; b and d only forward), at 4 PEs, at 2 PEs on a,c, at 10 PEs as 2 per host with an
# 8M heap, and at 5 PEs with SHMEM_RING_THREADS=1 and 4 and with SHMEM_RING_CHUNK=4096 (many
# chunks per put). The chunk chosen without SHMEM_RING_CHUNK is 512 KiB where the LUTs afford
# it and 256 KiB where they do not (a 72M heap), the same in every process. quiet_fwd, progress and ring_order pick non-neighbours on purpose: quiet
# waits for forwarded puts, the relays serve a target that sleeps outside the library, and
# fence/put-with-signal keep their order across the hops. On tests/topologies/ring7.ini the
# PE three hops away is reached through two nodes, the first passing each message (large put
# chunks by DMA) on to the second's inbox. Then on four-hosts-switch.ini with
# SHMEM_ATOMICS=software the AMO-heavy programs run with the target hosts' relays doing the
# atomics, which SHMEM_DEBUG's "routed transport" lines confirm. Every program also runs with
# SHMEM_RING_FAILOVER=on (ring5 at 5 PEs and 2 per host, ring7 with the four above);
# test_shmem_failover.sh pulls links under it.
set -euo pipefail
fabric="t-shmem-ring-$$"
. "${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}/tests/shmem/common.sh"
build "${progs[@]}"

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
run_all "3 PEs on a,c,e" -np 3 --hosts a,c,e
run_all "4 PEs, ring" -np 4
run_all "2 PEs on a,c" -np 2 --hosts a,c
SHMEM_SYMMETRIC_SIZE=8M run_all "10 PEs, 2 per host" -np 10 --ppn 2
for p in teams coll; do # SHMEM_TEAM_SHARED: the 2 PEs of a host
    SHMEM_SYMMETRIC_SIZE=8M timeout 60 "$bin/oshrun" --fabric "$fabric" -np 10 --ppn 2 \
        "$work/$p" 2 >"$work/out" 2>&1 || fail "$p (10 PEs, 2 per host, SHARED): $(cat "$work/out")"
done
SHMEM_RING_THREADS=1 run_all "5 PEs, 1 thread" -np 5
SHMEM_RING_THREADS=4 run_all "5 PEs, 4 threads" -np 5
SHMEM_RING_CHUNK=4096 run_all "5 PEs, 4 KiB chunks" -np 5
# Failover (no other host's PE mapped: every operation there is a numbered message, applied
# by the target's own node) with every program, and with two PEs per host.
SHMEM_RING_FAILOVER=on run_all "5 PEs, failover" -np 5
SHMEM_RING_FAILOVER=on SHMEM_SYMMETRIC_SIZE=8M run_all "10 PEs, 2 per host, failover" -np 10 --ppn 2
# shmem_global_exit from PE 1 with its AMOs routed (slow): PE 0, on the same host, leaves at
# once, and PE 1 must not take that for a lost PE while it tells the others (without that it
# did now and then, in tests-sos's global_exit too; more often on a loaded machine).
build fail
for i in 1 2 3; do
    st=0
    SHMEM_RING_FAILOVER=on SHMEM_SYMMETRIC_SIZE=8M timeout 60 "$bin/oshrun" --fabric "$fabric" \
        -np 10 --ppn 2 "$work/fail" global >"$work/out" 2>&1 || st=$?
    [[ $st == 4 ]] && ! grep -q "was lost" "$work/out" ||
        fail "shmem_global_exit(4), failover, 2 per host: oshrun status $st: $(cat "$work/out")"
done
n down >/dev/null

# Seven hosts: messages to the PE three hops away are passed on from node to node (large put
# chunks by the nodes' DMA engines), and replies come back through a node.
n up "$src/tests/topologies/ring7.ini" >/dev/null
for p in putget ring_order bigcopy atomics; do
    timeout 120 "$bin/oshrun" --fabric "$fabric" -np 7 "$work/$p" >"$work/out" 2>&1 ||
        fail "$p (7 PEs, ring7): $(cat "$work/out")"
    SHMEM_RING_FAILOVER=on timeout 120 "$bin/oshrun" --fabric "$fabric" -np 7 "$work/$p" \
        >"$work/out" 2>&1 || fail "$p (7 PEs, ring7, failover): $(cat "$work/out")"
done
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
echo "test_shmem_ring: ok"
