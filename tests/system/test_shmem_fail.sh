#!/usr/bin/env bash
# OpenSHMEM failures (docs/openshmem.md, "Failures"): a job that checks its data (steady.c)
# has a fault injected while it runs: its PE process killed (SIGKILL), its host crashed
# (ntblend host kill), a link down on the switched fabric and on a switchless ring. Each time
# oshrun exits non-zero with a message naming the lost PE and the cause (the link, for a
# link), the PEs that were waiting name the lost PE too, no process of the job is left, and
# the LUT and requester-ID entries and the hosts' allocated RAM are back to what they were
# before the job (a ring link pulled while the job starts, too). With oshrun itself killed
# the PEs end themselves, saying why; hung up on, oshrun ends the job. oshrun is given 30 s as
# a hang guard only; the time from the fault to oshrun's exit is printed, not asserted. Bad
# environment values are refused before anything starts.
set -euo pipefail
fabric="t-shmem-fail-$$"
. "${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}/tests/system/shmem/common.sh"
build steady hello

n up "$src/examples/topologies/four-hosts-switch.ini" >/dev/null
# Adapters' entries other than the agents' own mailbox routes, and the hosts' RAM in use.
tables() {
    n status --json | jq -c '{adapters: [.adapters[] | {name, lut: (.lut.used - .lut_agent),
        rid: .requester_ids.used}], ram: [.hosts[] | {name, used: .allocated_bytes}]}'
}
"$bin/oshrun" --fabric "$fabric" -np 4 "$work/steady" "$work" 2 >"$work/out" 2>&1 ||
    fail "steady without faults: $(cat "$work/out")"
grep -q "steady: 2 rounds ok" "$work/out" || fail "steady: $(cat "$work/out")"
no_job_ram
base=$(tables)

now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }
# start: the job in the background ($np PEs, one per host), until PE 0 has done a round.
np=4
start() {
    rm -f "$work"/pe*.pid "$work/running"
    timeout 30 "$bin/oshrun" --fabric "$fabric" -np $np "$work/steady" "$work" 1000000 \
        >"$work/out" 2>&1 &
    job=$!
    for _ in $(seq 600); do [[ -f "$work/running" ]] && return 0; sleep 0.05; done
    fail "the job did not start: $(cat "$work/out")"
}
# finish LABEL: oshrun's status (non-zero, not the hang guard's 124), the time since the
# fault, no process left.
finish() {
    local st=0
    wait "$job" || st=$?
    local ms=$(($(now_ms) - fault))
    [[ $st != 0 ]] || fail "$1: oshrun exited 0: $(cat "$work/out")"
    [[ $st != 124 ]] || fail "$1: oshrun still running after 30 s: $(cat "$work/out")"
    echo "$1: oshrun exited $st, $ms ms after the fault"
    no_job_left "$1" steady
    [[ -z "${SHOW:-}" ]] || cat "$work/out"
}
settled() {
    for _ in $(seq 100); do [[ "$(tables)" == "$base" ]] && return 0; sleep 0.05; done
    fail "$1: LUT or requester-ID entries or RAM left: before $base, after $(tables)"
}
# lost_by_others LABEL PE: every PE that was waiting names PE and only PE as lost.
lost_by_others() {
    grep -q "^shmem: PE [0-9]*: PE $2 on host [a-z]* was lost" "$work/out" ||
        fail "$1: no PE reported PE $2 lost: $(cat "$work/out")"
    ! grep "was lost" "$work/out" | grep -vq "PE $2 on host" ||
        fail "$1: a PE named another PE lost: $(cat "$work/out")"
}

# ---- a PE process killed
start
fault=$(now_ms)
kill -KILL "$(cat "$work/pe2.pid")"
finish "PE killed"
grep -q "^oshrun: PE 2 (host c) killed by SIGKILL; ending the job" "$work/out" ||
    fail "PE killed: oshrun's message: $(cat "$work/out")"
lost_by_others "PE killed" 2
grep -q "its process ended before shmem_finalize" "$work/out" || fail "PE killed: why: $(cat "$work/out")"
settled "PE killed"

# ---- a host crashed
start
fault=$(now_ms)
n host kill c >/dev/null
finish "host killed"
grep -q "^oshrun: PE 2 (host c) killed by SIGKILL; host c is down" "$work/out" ||
    fail "host killed: oshrun's message: $(cat "$work/out")"
lost_by_others "host killed" 2
grep -q "the path to host c is down" "$work/out" || fail "host killed: why: $(cat "$work/out")"
n host start c >/dev/null
settled "host killed"

# ---- a link down on the switched fabric: PE 3's host is cut off
start
fault=$(now_ms)
n link down d sw0 >/dev/null
finish "link down"
grep -q "^oshrun: PE [0-9] (host [a-d]) .*link down: 3 d.ntb0 --- sw0; ending the job" "$work/out" ||
    fail "link down: oshrun does not name the link: $(cat "$work/out")"
grep -q "PE 3 on host d was lost: the path to host d is down" "$work/out" ||
    fail "link down: no PE names PE 3: $(cat "$work/out")"
n link up d sw0 >/dev/null
settled "link down"

# ---- oshrun itself killed: nobody is left to end the job, so each PE ends itself once it
# sees its launcher gone, and each relay too (none here: no ring). And oshrun hung up on (its
# terminal gone) ends the job as if interrupted.
start
osh=$(pgrep -P "$job" -f oshrun) || fail "oshrun killed: no oshrun under timeout $job"
fault=$(now_ms)
kill -KILL "$osh"
{ wait "$job" || true; } 2>/dev/null # timeout reports its child's SIGKILL
for _ in $(seq 200); do pgrep -f "$work/steady" >/dev/null || break; sleep 0.05; done
echo "oshrun killed: the PEs ended $(($(now_ms) - fault)) ms after"
no_job_left "oshrun killed" steady
grep -q "the job's launcher (oshrun, process $osh) is gone: ending" "$work/out" ||
    fail "oshrun killed: the PEs do not say why they end: $(cat "$work/out")"
settled "oshrun killed"
start
osh=$(pgrep -P "$job" -f oshrun) || fail "oshrun hung up: no oshrun under timeout $job"
fault=$(now_ms)
kill -HUP "$osh"
st=0
wait "$job" || st=$?
[[ $st == 129 ]] || fail "oshrun hung up: status $st, not 129: $(cat "$work/out")"
no_job_left "oshrun hung up" steady
settled "oshrun hung up"

# ---- bad environment values: one message, nothing started
refuse() {
    local want=$1
    shift
    if env "$@" "$bin/oshrun" --fabric "$fabric" "${oshrun_args[@]}" "$work/hello" >"$work/out" 2>&1; then
        fail "oshrun ran with $*: $(cat "$work/out")"
    fi
    grep -q -- "$want" "$work/out" || fail "no '$want' for $*: $(cat "$work/out")"
    grep -q "nothing started" "$work/out" || fail "no 'nothing started' for $*: $(cat "$work/out")"
    ! grep -q "hello from" "$work/out" || fail "a PE started with $*"
}
oshrun_args=(-np 4)
refuse 'SHMEM_SYMMETRIC_SIZE="abc": give a size' SHMEM_SYMMETRIC_SIZE=abc
refuse "SHMEM_RING_CHUNK" SHMEM_RING_CHUNK=1
refuse "SHMEM_RING_CHUNK" SHMEM_RING_CHUNK=9G
oshrun_args=(-np 40 --ppn 10)
refuse "cannot hold 40 PEs"
settled "bad values"

# After all that, the fabric still runs a job.
"$bin/oshrun" --fabric "$fabric" -np 4 "$work/steady" "$work" 2 >"$work/out" 2>&1 ||
    fail "steady after the faults: $(cat "$work/out")"
n down >/dev/null

# ---- a switchless ring: a link pulled ends the job the same way (by default; with
# SHMEM_RING_FAILOVER=on it is re-routed: test_shmem_failover.sh),
# the relays included.
n up "$src/examples/topologies/ring5.ini" >/dev/null
np=5
"$bin/oshrun" --fabric "$fabric" -np 5 "$work/steady" "$work" 2 >"$work/out" 2>&1 ||
    fail "steady on the ring: $(cat "$work/out")"
no_job_ram
base=$(tables)
start
fault=$(now_ms)
n link down c d >/dev/null
finish "ring link down"
grep -q "^oshrun: .*link down: 2 c.right --- d.left; ending the job" "$work/out" ||
    fail "ring link down: oshrun does not name the link: $(cat "$work/out")"
grep -q "PE [23] on host [cd] was lost.*: the path to host [cd] is down" "$work/out" ||
    fail "ring link down: no PE names the PE behind the link: $(cat "$work/out")"
n link up c d >/dev/null
settled "ring link down"

# ---- a ring link pulled while the job starts (PEs and relays connecting to each other): the
# job ends; once the link is back, what the agents held for it is freed (the disconnects that
# could not cross the link are delivered then), and the next job fits.
rm -f "$work"/pe*.pid
timeout 30 "$bin/oshrun" --fabric "$fabric" -np 5 "$work/steady" "$work" 1000000 >"$work/out" 2>&1 &
job=$!
sleep 0.05
n link down b c >/dev/null
fault=$(now_ms)
when=$(compgen -G "$work/pe*.pid" >/dev/null && echo "after" || echo "during")
finish "ring link down $when start-up" # "after": too late on this machine, still a check
n link up b c >/dev/null
settled "ring link down at start-up"
"$bin/oshrun" --fabric "$fabric" -np 5 "$work/steady" "$work" 2 >"$work/out" 2>&1 ||
    fail "steady after a link down at start-up: $(cat "$work/out")"
echo "test_shmem_fail: ok"
