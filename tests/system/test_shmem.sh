#!/usr/bin/env bash
# OpenSHMEM over the fabric (switched/back-to-back transport): the programs in tests/system/shmem/
# (built with the build; hello, putget and globals again here with oshcc, cxx with oshc++)
# run with oshrun at 2 and 4 PEs on a switched fabric, and with 2 PEs on one host and across a
# back-to-back link. Each program checks its own
# results and exits non-zero on any mismatch. rma_ext, amo_ext, signal, p2p, lock and ctx
# cover every 1.5 RMA/AMO/point-to-point type, put-with-signal, locks and contexts. Teams and
# collectives (teams.c, coll.c) also run at 3 PEs (an odd count), round-robin and all on one
# host, and at 2 PEs per host.
set -euo pipefail
fabric="t-shmem-$$"
. "${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}/tests/system/shmem/common.sh"
build "${progs[@]}" fail bigheap
build_osh hello putget globals cxx

# Usage and errors before any fabric exists.
"$bin/oshrun" --help | grep -q -- "-np N" || fail "oshrun --help"
if "$bin/oshrun" -np 2 --fabric "$fabric" "$work/hello" 2>"$work/err"; then
    fail "oshrun ran without a fabric"
fi
grep -q "not up" "$work/err" || fail "no 'not up' message: $(cat "$work/err")"

n up "$src/examples/topologies/four-hosts-switch.ini" >/dev/null
run_all "2 PEs, switch" -np 2
# SHMEM_INFO's text comes from the library's one table of variables (src/shmem/env_defs.h):
# every variable it names is documented in docs/openshmem.md, and every variable of that
# page's table is one the library reads.
SHMEM_INFO=1 timeout 120 "$bin/oshrun" --fabric "$fabric" -np 2 "$work/hello" >"$work/out" 2>&1 ||
    fail "hello with SHMEM_INFO=1: $(cat "$work/out")"
info=$(grep -o 'SHMEM_[A-Z_]*' "$work/out" | grep -vx 'SHMEM_INFO\|SHMEM_' | sort -u)
[[ $(wc -l <<<"$info") -ge 15 ]] || fail "SHMEM_INFO printed too few variables: $(cat "$work/out")"
for v in $info; do
    grep -q "\`$v\`" "$src/docs/openshmem.md" || fail "$v (SHMEM_INFO) is not in docs/openshmem.md"
done
for v in $(grep -o '^| `SHMEM_[A-Z_]*`' "$src/docs/openshmem.md" | grep -o 'SHMEM_[A-Z_]*'); do
    grep -qx "$v" <<<"$info" || [ "$v" = SHMEM_INFO ] || [ "$v" = SHMEM_RELAY_SLOW_PE ] ||
        [ "$v" = SHMEM_RELAY_HOLD ] ||
        fail "$v (docs/openshmem.md) is not in SHMEM_INFO's list"
done
# Callers of large copies wait for the helper's last piece: with a helper that dawdles, a
# second put to the same bytes must still win. (bigcopy copies fewer than 16 blocks of each
# size class, so the helper's choice has not tried copying alone yet: every copy has help.)
SHMEM_COPY_HELPER=slow timeout 120 "$bin/oshrun" --fabric "$fabric" -np 2 "$work/bigcopy" >"$work/out" 2>&1 ||
    fail "bigcopy with a slow copy helper: $(cat "$work/out")"
# Whether the helper helps is measured (src/shmem/copy.c): with one that dawdles, the jobs
# copied alone should win. How many do depends on the machine's load, so the count is only
# reported here; test_shmem_pick checks the choice with rates of its own. (With one CPU there
# is no helper to choose.)
if (($(nproc) >= 2)); then
    SHMEM_COPY_HELPER=slow SHMEM_DEBUG=1 timeout 120 "$bin/oshrun" --fabric "$fabric" -np 2 "$work/putstream" \
        >"$work/out" 2>&1 || fail "putstream with a slow copy helper: $(cat "$work/out")"
    grep -q 'PE 0: large copies: [0-9]*, [0-9]* of them shared' "$work/out" ||
        fail "no count of large copies in SHMEM_DEBUG's output: $(cat "$work/out")"
    echo "with a slow copy helper: $(grep -o 'PE 0: large copies.*' "$work/out")"
fi
if SHMEM_COPY_HELPER=maybe "$bin/oshrun" --fabric "$fabric" -np 2 "$work/hello" >"$work/out" 2>&1; then
    fail "SHMEM_COPY_HELPER=maybe was accepted"
fi
grep -q 'SHMEM_COPY_HELPER="maybe": give one of 1/0/slow' "$work/out" || fail "no message for SHMEM_COPY_HELPER=maybe: $(cat "$work/out")"
run_all "4 PEs, switch" -np 4
run_all "3 PEs, switch" -np 3
# SHMEM_TEAM_SHARED is the PEs on one host: teams.c checks its size when given it.
team_run() {
    local label=$1 shared=$2
    shift 2
    for p in teams coll; do
        timeout 120 "$bin/oshrun" --fabric "$fabric" "$@" "$work/$p" "$shared" >"$work/out" 2>&1 ||
            fail "$p ($label): $(cat "$work/out")"
    done
}
team_run "4 PEs, switch" 1 -np 4
team_run "3 PEs on one host" 3 -np 3 --ppn 3
SHMEM_SYMMETRIC_SIZE=16M team_run "4 PEs, 2 per host" 2 -np 4 --ppn 2
"$bin/oshrun" --fabric "$fabric" -np 4 "$work/hello" 4 >"$work/out"
[[ $(grep -c "^hello from PE" "$work/out") == 4 ]] || fail "hello at 4 PEs: $(cat "$work/out")"
for pe in 0 1 2 3; do grep -q "hello from PE $pe of 4" "$work/out" || fail "PE $pe missing"; done

# Binding (oshrun --bind-to), with oshrun itself on CPUs 0 and 1: more PEs than CPUs pins PE i
# to the (i mod 2)-th by default; as many PEs as CPUs, or --bind-to none, leaves them on both.
if (($(nproc) >= 2)); then
    affinity() { # OSHRUN-ARGS...: "PE CPUS" per PE, sorted by PE
        taskset -c 0,1 "$bin/oshrun" --fabric "$fabric" "$@" -- bash -c \
            'echo "$SHMEM_PE $(awk "/^Cpus_allowed_list:/ { print \$2 }" /proc/self/status)"' | sort -n |
            tr '\n' ' '
    }
    [[ $(affinity -np 4) == "0 0 1 1 2 0 3 1 " ]] || fail "4 PEs on 2 CPUs not pinned round-robin: $(affinity -np 4)"
    [[ $(affinity -np 2) == "0 0-1 1 0-1 " ]] || fail "2 PEs on 2 CPUs pinned: $(affinity -np 2)"
    [[ $(affinity -np 4 --bind-to none) == "0 0-1 1 0-1 2 0-1 3 0-1 " ]] ||
        fail "--bind-to none pinned PEs: $(affinity -np 4 --bind-to none)"
    [[ $(affinity -np 2 --bind-to core) == "0 0 1 1 " ]] ||
        fail "--bind-to core did not pin: $(affinity -np 2 --bind-to core)"
    if "$bin/oshrun" --fabric "$fabric" -np 2 --bind-to socket "$work/hello" >"$work/out" 2>&1; then
        fail "oshrun ran with --bind-to socket: $(cat "$work/out")"
    fi
    grep -q -- "--bind-to takes core or none" "$work/out" || fail "--bind-to socket: $(cat "$work/out")"
    # Barriers count by CPU when every PE is pinned to one (the default above), else with one
    # counter; unpinned, or with only some PEs pinned, every PE must take the same way.
    timeout 120 "$bin/oshrun" --fabric "$fabric" -np 4 --bind-to none "$work/barrier" >"$work/out" 2>&1 ||
        fail "barrier, 4 PEs unpinned: $(cat "$work/out")"
    timeout 120 "$bin/oshrun" --fabric "$fabric" -np 5 --bind-to none -- bash -c \
        '((SHMEM_PE % 2)) && exec taskset -c $((SHMEM_PE / 2 % 2)) "$0"; exec "$0"' "$work/barrier" \
        >"$work/out" 2>&1 || fail "barrier, 5 PEs, some pinned: $(cat "$work/out")"
fi

# Exit status: the first failure is oshrun's, and the other PEs do not keep it waiting.
set +e
timeout 60 "$bin/oshrun" --fabric "$fabric" -np 3 "$work/hello" 5 >/dev/null 2>&1
st=$?
set -e
[[ $st == 1 ]] || fail "a failing PE gave oshrun status $st, expected 1"
set +e
timeout 60 "$bin/oshrun" --fabric "$fabric" -np 4 "$work/fail" exit >/dev/null 2>&1
st=$?
timeout 60 "$bin/oshrun" --fabric "$fabric" -np 4 "$work/fail" global >/dev/null 2>&1
st2=$?
set -e
[[ $st == 3 ]] || fail "PE 1 exiting 3 during a barrier gave oshrun status $st"
[[ $st2 == 4 ]] || fail "shmem_global_exit(4) gave oshrun status $st2"

# The default heap where 64 MiB per PE cannot be mapped (2 PEs per host: 4 windows on each
# adapter) or held (4 PEs in one host's RAM): the largest that fits, with room for two 16 MiB
# blocks; and at 2 per host on all four hosts, a smaller one that still starts.
timeout 120 "$bin/oshrun" --fabric "$fabric" -np 4 --ppn 2 "$work/bigheap" >"$work/out" 2>&1 ||
    fail "bigheap, 2 PEs per host: $(cat "$work/out")"
timeout 120 "$bin/oshrun" --fabric "$fabric" -np 4 --ppn 4 "$work/bigheap" >"$work/out" 2>&1 ||
    fail "bigheap, 4 PEs on one host: $(cat "$work/out")"
timeout 120 "$bin/oshrun" --fabric "$fabric" -np 8 --ppn 2 "$work/bigheap" 4 >"$work/out" 2>&1 ||
    fail "bigheap, 8 PEs at 2 per host: $(cat "$work/out")"

# Bad settings and placements that cannot be mapped: one clear message from oshrun, and no
# PE started (a PE would print its hello).
refuse() {
    local want=$1
    shift
    if env "$@" "$bin/oshrun" --fabric "$fabric" "${oshrun_args[@]}" "$work/hello" >"$work/out" 2>&1; then
        fail "oshrun ran with $*: $(cat "$work/out")"
    fi
    grep -q "$want" "$work/out" || fail "no '$want' for $*: $(cat "$work/out")"
    grep -q "nothing started" "$work/out" || fail "no 'nothing started' for $*: $(cat "$work/out")"
    ! grep -q "hello from" "$work/out" || fail "a PE started with $*"
    [[ $(grep -c "^shmem:" "$work/out") == 1 ]] || fail "not one message for $*: $(cat "$work/out")"
}
oshrun_args=(-np 2)
refuse 'SHMEM_SYMMETRIC_SIZE="abc": give a size' SHMEM_SYMMETRIC_SIZE=abc
refuse "SHMEM_RING_CHUNK" SHMEM_RING_CHUNK=1
refuse "SHMEM_RING_THREADS" SHMEM_RING_THREADS=99
refuse "SHMEM_ATOMICS" SHMEM_ATOMICS=maybe
oshrun_args=(-np 4 --ppn 2)
refuse "does not fit this placement" SHMEM_SYMMETRIC_SIZE=200M
oshrun_args=(-np 40 --ppn 10)
refuse "cannot hold 40 PEs"

# A small heap, given as a fraction: exhaustion is a message, not a crash.
SHMEM_SYMMETRIC_SIZE=3.1M "$bin/oshrun" --fabric "$fabric" -np 2 "$work/malloc" 2>"$work/err" ||
    fail "malloc with a 3.1M heap: $(cat "$work/err")"
grep -q "SHMEM_SYMMETRIC_SIZE" "$work/err" || fail "exhaustion does not say how to enlarge the heap"
n down >/dev/null

n up "$src/examples/topologies/two-hosts.ini" >/dev/null
run_all "2 PEs on one host" -np 2 --ppn 2
team_run "2 PEs on one host" 2 -np 2 --ppn 2
run_all "2 PEs back to back" -np 2
echo "test_shmem: ok"
