#!/usr/bin/env bash
# SHMEM_PROFILE, the routed puts' stage times (src/shmem/prof.c; docs/openshmem.md): on ring5.ini
# at 5 PEs, tests/system/shmem/ringprof.c puts 1 KiB (CPU stores), 48 KiB (DMA) and 600 KiB
# (two chunks at the default chunk) from PE 0 to PE 2, through host b's node. With json, PE 0's
# line must count every chunk once (worked out from the puts and the chunk size it reports),
# one node per chunk, every stage present and non-negative, the stages that always take time
# (dma, doorbell, deliver, ack) above zero, the chunk stages adding up to no more than the
# total, and the quiets counted; the other PEs report no chunks. With on, a table per PE. Also
# with SHMEM_DMA_MIN=off (every hop by CPU stores). Off (unset, or off/0) prints no profile and
# the same stdout; a bad value is refused with a message; a switched fabric and failover say why
# nothing is timed. On ring7 every chunk of PE 0's puts to PE 3 passes two nodes, the first
# of which forwards it. No timing value is asserted.
set -euo pipefail
fabric="t-shmem-prof-$$"
. "${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}/tests/system/shmem/common.sh"
build ringprof

np=5
oshrun_ring() { # OUT ARGS...: ringprof at $np PEs, stdout and stderr apart
    local out=$1
    shift
    timeout 120 "$bin/oshrun" --fabric "$fabric" -np "$np" "$@" "$work/ringprof" >"$out.out" 2>"$out.err" ||
        fail "ringprof ($*): $(cat "$out.out" "$out.err")"
}

# check_json OUT [NODES]: PE 0's profile against what it put, each chunk through NODES nodes
# (default 1).
check_json() {
    local out=$1 nodes=${2:-1} line chunk puts bytes want
    line=$(grep '^{"shmem_profile"' "$out.err" | jq -c 'select(.shmem_profile.pe == 0) | .shmem_profile') ||
        fail "no JSON profile line of PE 0: $(cat "$out.err")"
    [[ $(grep -c '^{"shmem_profile"' "$out.err") == "$np" ]] || fail "not one profile line per PE: $(cat "$out.err")"
    read -r _ puts _ bytes <"$out.out"
    chunk=$(jq -r .chunk <<<"$line")
    # Chunks: 20 puts of each of 1 KiB, 48 KiB and 600 KiB, each put cut into chunk-sized pieces.
    want=$(( 20 * ( (1024 + chunk - 1) / chunk + (49152 + chunk - 1) / chunk + (614400 + chunk - 1) / chunk ) ))
    jq -e --argjson want "$want" --argjson bytes "$bytes" --argjson nodes "$nodes" '
        .timed and .chunks == $want and .bytes == $bytes and .hops == .chunks * $nodes and .quiets >= 60
        and ([.stages_ns[]] | length) == 9 and all(.stages_ns[]; . >= 0)
        and .stages_ns.dma > 0 and .stages_ns.doorbell > 0 and .stages_ns.deliver > 0 and .stages_ns.ack > 0
        and ([.stages_ns | del(.quiet)[]] | add) <= .total_ns' <<<"$line" >/dev/null ||
        fail "PE 0's profile does not add up (want $want chunks, $bytes bytes, $puts puts, $nodes nodes each): $line"
    # PE 0 alone put anything routed.
    [[ $(grep '^{"shmem_profile"' "$out.err" | jq -s '[.[] | select(.shmem_profile.pe != 0) | .shmem_profile.chunks] | add') == 0 ]] ||
        fail "PEs other than 0 counted routed chunks: $(cat "$out.err")"
}

n up "$src/examples/topologies/ring5.ini" >/dev/null
step "json"
SHMEM_PROFILE=json oshrun_ring "$work/json"
check_json "$work/json"

step "json, every hop by CPU stores"
SHMEM_PROFILE=json SHMEM_DMA_MIN=off oshrun_ring "$work/cpu"
check_json "$work/cpu"

step "json, one transfer thread, 64 KiB chunks (the 600 KiB puts in 10)"
SHMEM_PROFILE=json SHMEM_RING_THREADS=1 SHMEM_RING_CHUNK=64k oshrun_ring "$work/small"
check_json "$work/small"

step "on: a table"
SHMEM_PROFILE=on oshrun_ring "$work/on"
grep -Eq "shmem: PE 0 profile: [0-9]+ routed put chunks" "$work/on.err" || fail "no table header of PE 0: $(cat "$work/on.err")"
for s in wait stage dma publish doorbell relay deliver ack quiet total; do
    grep -Eq "^  $s +[0-9.]+ us" "$work/on.err" || fail "the table has no row '$s': $(cat "$work/on.err")"
done

step "off: nothing extra"
oshrun_ring "$work/off"
for v in off 0; do
    SHMEM_PROFILE=$v oshrun_ring "$work/off-$v"
    diff "$work/off.out" "$work/off-$v.out" >/dev/null || fail "SHMEM_PROFILE=$v changed stdout"
    ! grep -qi profile "$work/off-$v.err" || fail "SHMEM_PROFILE=$v printed: $(cat "$work/off-$v.err")"
done
! grep -qi profile "$work/off.err" || fail "without SHMEM_PROFILE a profile was printed: $(cat "$work/off.err")"

step "a bad value"
if SHMEM_PROFILE=maybe timeout 60 "$bin/oshrun" --fabric "$fabric" -np 5 "$work/ringprof" >"$work/bad" 2>&1; then
    fail "SHMEM_PROFILE=maybe was accepted"
fi
grep -q 'SHMEM_PROFILE="maybe": give one of off/on/json/0/1' "$work/bad" || fail "no clear message: $(cat "$work/bad")"

step "failover: not timed, and says so"
SHMEM_PROFILE=on SHMEM_RING_FAILOVER=on oshrun_ring "$work/fo"
grep -q "shmem: PE 0 profile: puts under SHMEM_RING_FAILOVER=on are not timed" "$work/fo.err" ||
    fail "failover: $(cat "$work/fo.err")"
no_job_left "profile" ringprof
n down >/dev/null

step "json on ring7: PE 0 -> PE 3 through two nodes (one forwards)"
n up "$src/tests/system/topologies/ring7.ini" >/dev/null
np=7
SHMEM_PROFILE=json oshrun_ring "$work/ring7"
check_json "$work/ring7" 2
n down >/dev/null

step "a switched fabric: nothing to time"
n up "$src/examples/topologies/four-hosts-switch.ini" >/dev/null
SHMEM_PROFILE=on timeout 120 "$bin/oshrun" --fabric "$fabric" -np 4 "$work/ringprof" >"$work/sw" 2>&1 ||
    fail "ringprof on a switch: $(cat "$work/sw")"
grep -q "shmem: PE 0 profile: no PE is reached through the ring's nodes" "$work/sw" || fail "switch: $(cat "$work/sw")"
n down >/dev/null
echo "test_shmem_profile: ok"
