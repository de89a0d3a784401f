#!/usr/bin/env bash
# OpenSHMEM on a switchless ring with SHMEM_RING_FAILOVER=on and no fault (test_shmem_ring.sh
# runs the same programs without it; test_shmem_failover.sh pulls links): no other host's PE
# is mapped, so every put, get and AMO between hosts, also between neighbours, is a numbered
# message that the target host's node applies once and acknowledges. Every program of
# test_shmem.sh's list runs on ring5.ini at 5 PEs and at 10 PEs as 2 per host (8M heap);
# shmem_global_exit with its AMOs routed runs three times at 2 PEs per host; on
# tests/system/topologies/ring7.ini the programs that stress order and large copies run at 7 PEs
# (PE 3 is reached through two nodes).
set -euo pipefail
fabric="t-shmem-ringfo-$$"
. "${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}/tests/system/shmem/common.sh"
build "${progs[@]}" fail
export SHMEM_RING_FAILOVER=on

n up "$src/examples/topologies/ring5.ini" >/dev/null
run_all "5 PEs, failover" -np 5
SHMEM_SYMMETRIC_SIZE=8M run_all "10 PEs, 2 per host, failover" -np 10 --ppn 2
# shmem_global_exit from PE 1 with its AMOs routed (slow): PE 0, on the same host, leaves at
# once, and PE 1 must not take that for a lost PE while it tells the others (without that it
# did now and then, in tests-sos's global_exit too; more often on a loaded machine).
for i in 1 2 3; do
    st=0
    SHMEM_SYMMETRIC_SIZE=8M timeout 60 "$bin/oshrun" --fabric "$fabric" \
        -np 10 --ppn 2 "$work/fail" global >"$work/out" 2>&1 || st=$?
    [[ $st == 4 ]] && ! grep -q "was lost" "$work/out" ||
        fail "shmem_global_exit(4), failover, 2 per host (run $i): oshrun status $st: $(cat "$work/out")"
done
n down >/dev/null

ring7_run ", failover"
echo "test_shmem_ring_failover: ok"
