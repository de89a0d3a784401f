#!/usr/bin/env bash
# Ring failover (SHMEM_RING_FAILOVER=on: PEs on other hosts are never mapped directly, every
# operation between hosts goes through the ring's nodes, and when a ring link goes down the
# traffic goes the other way round). A job that checks every byte and every count of every
# round (tests/system/shmem/failover.c: puts of a few bytes to 1 MiB to the next, half-way and
# previous PE, gets, fetch_inc/add/compare_swap, put-with-signal and put + fence + flag,
# reductions) has a ring link pulled while it runs and must go on: once PE 0 has printed
# "round 40" on ring5 (5 PEs, the link c-d in the middle of the ring), once right after
# "round 0", once on ring7 (7 PEs, the link a-b next to PE 0's host) and once at 2 PEs per
# host on ring5; and once while a PE waits for room in a ring across the link: c's node leaves
# PE 3's requests from d unread (SHMEM_RELAY_HOLD=3:2, from PE 3's first put of a whole chunk
# on; 16 KiB chunks, each by DMA) until PE 3 has filled that ring and waits for room in it,
# and then the link goes down (a ring that never gives room again must not hold PE 3, nor the
# requests it sends again, forever). PE 0 must print at least 20 more rounds after the pull;
# then the job is told to stop ($work/stop, FAILOVER_STOP) and must exit 0 with "failover:
# verified R rounds".
# A second link down on the other side of the ring (e-a after c-d) cuts the ring in two: the
# job must end non-zero within 15 s, saying a link is down. After each case the links go up
# again and the hosts' allocated RAM (the job's segments: heaps, inboxes) and the LUT and
# requester-ID entries must be back to what they were before (no job leaves anything behind,
# even one whose segments were connected across the pulled link), and no process of the job
# may be left. A bad SHMEM_RING_FAILOVER
# is refused before anything starts. Every job has a 120 s watchdog: a hang fails the test,
# it never holds up CI. The times printed are for reading, not asserted.
set -euo pipefail
fabric="t-shmem-failover-$$"
. "${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}/tests/system/shmem/common.sh"
build failover hello

job=""
# stop_job: end the background job, if one still runs (a failed check), before the fabric goes.
stop_job() {
    [[ -n "$job" ]] || return 0
    if kill -0 "$job" 2>/dev/null; then
        kill -TERM "$job" 2>/dev/null || true # timeout passes it on to oshrun, which ends its PEs
        for _ in $(seq 100); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
        local p
        for p in $(pgrep -P "$job" || true) "$job"; do kill -KILL "$p" 2>/dev/null || true; done
    fi
    wait "$job" 2>/dev/null || true
    job=""
}
trap 'stop_job; n down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

# The hosts' allocated RAM (the job's segments: heaps, inboxes) and the adapters' entries
# other than the agents' own mailbox routes (as in test_shmem_fail.sh).
tables() {
    n status --json | jq -c '{ram: [.hosts[] | {name, bytes: .allocated_bytes}],
        adapters: [.adapters[] | {name, lut: (.lut.used - .lut_agent), rid: .requester_ids.used}]}'
}
settled() {
    for _ in $(seq 100); do [[ "$(tables)" == "$base" ]] && return 0; sleep 0.05; done
    fail "$1: segment memory, LUT or requester-ID entries left: before $base, after $(tables)"
}
now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }
out() { cat "$work/out"; }

# start_job OSHRUN-ARGS...: the job in the background, with failover on, the stop file and the
# watchdog; its output in $work/out.
start_job() {
    rm -f "$work/stop"
    : >"$work/out" # before the job starts: wait_round must not read the last job's rounds
    SHMEM_RING_FAILOVER=on FAILOVER_STOP="$work/stop" timeout -k 5 120 \
        "$bin/oshrun" --fabric "$fabric" "$@" "$work/failover" >"$work/out" 2>&1 &
    job=$!
    started=$(now_ms)
}
# last_round: the last "round N" PE 0 printed (-1 before the first). Its lines end with the
# number; the PEs' error messages have "round N:".
last_round() { grep -oE 'round [0-9]+$' "$work/out" | awk 'BEGIN { m = -1 } { if ($2 + 0 > m) m = $2 + 0 } END { print m }'; }
# wait_job CHECK SECONDS LABEL WHAT: until CHECK (eval'd) holds; the job must still run. WHAT
# names what is awaited in the failure messages.
wait_job() {
    local deadline=$(($(now_ms) + $2 * 1000))
    until eval "$1"; do
        kill -0 "$job" 2>/dev/null || {
            wait "$job" && st=0 || st=$?
            job=""
            fail "$3: the job ended (status $st) before $4: $(out)"
        }
        (($(now_ms) < deadline)) || fail "$3: no $4 after $2 s: $(out)"
        sleep 0.05
    done
}
# wait_round N SECONDS LABEL: until PE 0 printed round N or later.
wait_round() { wait_job "((\$(last_round) >= $1))" "$2" "$3" "round $1 from PE 0"; }
# wait_held SECONDS LABEL: until a node says the ring it holds (SHMEM_RELAY_HOLD) is full.
wait_held() {
    wait_job 'grep -q "SHMEM_RELAY_HOLD: the ring of .* is full" "$work/out"' "$1" "$2" \
        "full ring held by a node (SHMEM_RELAY_HOLD)"
}
# no_leftovers LABEL: no PE process and no relay of this fabric left.
no_leftovers() { no_job_left "$1" failover; }
# clean_run LABEL OSHRUN-ARGS...: the job with failover on and no fault, a few rounds; then the
# fabric's entries with no job, for settled.
clean_run() {
    local label=$1
    shift
    SHMEM_RING_FAILOVER=on FAILOVER_MAX_ROUNDS=5 timeout -k 5 120 "$bin/oshrun" --fabric "$fabric" \
        "$@" "$work/failover" >"$work/out" 2>&1 || fail "$label, no link pulled: $(out)"
    grep -q "failover: verified 5 rounds" "$work/out" || fail "$label, no link pulled: $(out)"
    no_job_ram
    base=$(tables)
}

# survive LABEL WHEN HOST-A HOST-B OSHRUN-ARGS...: once PE 0 printed round WHEN (or, WHEN
# "held", once the ring a node holds is full), the link A-B goes down; the job must go on for
# 20 more rounds of PE 0's, stop when told and exit 0.
survive() {
    local label=$1 at=$2 a=$3 b=$4
    shift 4
    local np=$2 # OSHRUN-ARGS start with -np N
    start_job "$@"
    if [[ $at == held ]]; then
        wait_held 60 "$label"
    else
        wait_round "$at" 60 "$label"
    fi
    n link down "$a" "$b" >/dev/null
    local pulled_ms pulled
    pulled_ms=$(now_ms)
    pulled=$(last_round)
    sleep 1.5
    wait_round $((pulled + 20)) 60 "$label: link $a-$b down"
    touch "$work/stop"
    local stop_ms st=0
    stop_ms=$(now_ms)
    wait "$job" || st=$?
    job=""
    [[ $st != 124 && $st != 137 ]] || fail "$label: the watchdog ended the job after 120 s: $(out)"
    [[ $st == 0 ]] || fail "$label: oshrun exited $st after the link $a-$b went down: $(out)"
    grep -q "^failover: verified [0-9]* rounds on $np PEs" "$work/out" ||
        fail "$label: no 'failover: verified' line: $(out)"
    local rounds
    rounds=$(grep -o "^failover: verified [0-9]*" "$work/out" | grep -o "[0-9]*$")
    echo "$label: $rounds rounds verified, link $a-$b down after round $pulled;" \
        "$((pulled_ms - started)) ms to the pull, $(($(now_ms) - stop_ms)) ms from the stop file to the exit"
    no_leftovers "$label"
    n link up "$a" "$b" >/dev/null
    settled "$label"
    [[ -z "${SHOW:-}" ]] || out
}

n up "$src/examples/topologies/ring5.ini" >/dev/null
clean_run "5 PEs on ring5" -np 5
survive "ring5, 5 PEs, c-d down after round 40" 40 c d -np 5
survive "ring5, 5 PEs, c-d down after round 0" 0 c d -np 5
export SHMEM_RELAY_HOLD=3:2 SHMEM_RING_CHUNK=16k SHMEM_DMA_MIN=16k
survive "ring5, 5 PEs, c-d down while PE 3 waits for room in c's ring" held c d -np 5
unset SHMEM_RELAY_HOLD SHMEM_RING_CHUNK SHMEM_DMA_MIN
# 2 PEs per host: the ring test's heap for that placement (docs/openshmem.md, Limits).
export SHMEM_SYMMETRIC_SIZE=8M
clean_run "10 PEs on ring5, 2 per host" -np 10 --ppn 2
survive "ring5, 10 PEs at 2 per host, c-d down after round 20" 20 c d -np 10 --ppn 2
unset SHMEM_SYMMETRIC_SIZE

# ---- two links down: the ring is cut in two, and the job must end, not hang.
label="ring5, c-d then e-a down"
start_job -np 5
wait_round 20 60 "$label"
n link down c d >/dev/null
pulled=$(last_round)
wait_round $((pulled + 20)) 60 "$label: after c-d went down"
n link down e a >/dev/null
cut=$(now_ms)
while kill -0 "$job" 2>/dev/null && (($(now_ms) - cut < 15000)); do sleep 0.05; done
if kill -0 "$job" 2>/dev/null; then
    stop_job
    fail "$label: oshrun still running 15 s after the ring was cut in two: $(out)"
fi
st=0
wait "$job" || st=$?
job=""
[[ $st != 0 ]] || fail "$label: oshrun exited 0 with the ring cut in two: $(out)"
! grep -q "failover: verified" "$work/out" || fail "$label: the job says it verified its rounds: $(out)"
grep -qi "link" "$work/out" || fail "$label: no message says a link is down: $(out)"
echo "$label: oshrun exited $st, $(($(now_ms) - cut)) ms after the second link went down"
no_leftovers "$label"
n link up c d >/dev/null
n link up e a >/dev/null
settled "$label"
[[ -z "${SHOW:-}" ]] || out
n down >/dev/null

# ---- seven hosts: the link next to PE 0's host.
n up "$src/tests/system/topologies/ring7.ini" >/dev/null
clean_run "7 PEs on ring7" -np 7
survive "ring7, 7 PEs, a-b down after round 40" 40 a b -np 7

# ---- a bad value: one message, nothing started.
if SHMEM_RING_FAILOVER=maybe timeout 60 "$bin/oshrun" --fabric "$fabric" -np 7 "$work/hello" >"$work/out" 2>&1; then
    fail "oshrun ran with SHMEM_RING_FAILOVER=maybe: $(out)"
fi
grep -q "SHMEM_RING_FAILOVER" "$work/out" || fail "no message names SHMEM_RING_FAILOVER=maybe: $(out)"
grep -q "nothing started" "$work/out" || fail "no 'nothing started' for SHMEM_RING_FAILOVER=maybe: $(out)"
! grep -q "hello from" "$work/out" || fail "a PE started with SHMEM_RING_FAILOVER=maybe: $(out)"
settled "SHMEM_RING_FAILOVER=maybe"
n down >/dev/null
echo "test_shmem_failover: ok"
