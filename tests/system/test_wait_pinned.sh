#!/usr/bin/env bash
# The wait policy with everything on one CPU (taskset): test_wait's own one-CPU case (a waiter
# never spins there, whatever its site's ceiling), then two OpenSHMEM PEs pinned to the same CPU
# doing what waits most (barriers, wait_until's token ring, puts and quiet, locks, a put
# with signal): each must finish, as a waiter that spun would hold the CPU from the PE it
# waits for. NTBLEND_WAIT's values are read as documented. Nothing timed.
set -euo pipefail
fabric="t-waitpin-$$"
. "${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}/tests/system/shmem/common.sh"

# The first CPU this test may run on.
cpu=$(awk '/^Cpus_allowed_list:/ { print $2 }' /proc/self/status | cut -d, -f1 | cut -d- -f1)
[[ $cpu =~ ^[0-9]+$ ]] || fail "cannot read this process's CPUs"

taskset -c "$cpu" "$bin/test_wait" >"$work/out" 2>&1 || fail "test_wait on CPU $cpu alone: $(cat "$work/out")"
grep -q "test_one_cpu" "$work/out" && ! grep -q "SKIPPED.*test_one_cpu" "$work/out" ||
    fail "test_one_cpu did not run on one CPU: $(cat "$work/out")"

[[ $("$bin/test_wait" mode) == adaptive ]] || fail "the default wait mode is not adaptive"
[[ $(NTBLEND_WAIT=sleep "$bin/test_wait" mode) == sleep ]] || fail "NTBLEND_WAIT=sleep"
[[ $(NTBLEND_WAIT=spin "$bin/test_wait" mode) == spin ]] || fail "NTBLEND_WAIT=spin"
NTBLEND_WAIT=fast "$bin/test_wait" mode >"$work/out" 2>&1
grep -q "NTBLEND_WAIT=fast is not adaptive, spin or sleep" "$work/out" || fail "no message for NTBLEND_WAIT=fast: $(cat "$work/out")"
grep -qx adaptive "$work/out" || fail "NTBLEND_WAIT=fast did not fall back to adaptive: $(cat "$work/out")"

build barrier wait putget lock signal p2p
n up "$src/examples/topologies/four-hosts-switch.ini" >/dev/null
for p in barrier wait putget lock signal p2p; do
    # PE stderr carries NTBLEND_WAIT_DEBUG's report of what each wait did.
    NTBLEND_WAIT_DEBUG=1 timeout 120 taskset -c "$cpu" "$bin/oshrun" --fabric "$fabric" -np 2 "$work/$p" \
        >"$work/out" 2>&1 || fail "$p with both PEs on CPU $cpu: $(cat "$work/out")"
    ! grep -E "wait [^:]*: [0-9]+ waits \([1-9][0-9]* in the spin" "$work/out" ||
        fail "$p: a wait spun with one CPU: $(grep ' wait ' "$work/out")"
done
# The same job pinned to one CPU by oshrun itself (--bind-to core with 2 PEs on 1 CPU).
timeout 120 taskset -c "$cpu" "$bin/oshrun" --fabric "$fabric" -np 2 --bind-to core "$work/barrier" \
    >"$work/out" 2>&1 || fail "barrier with --bind-to core on one CPU: $(cat "$work/out")"
no_job_left "pinned" barrier
echo "test_wait_pinned: ok"
