# Sourced by the test_shmem*.sh scripts: the programs of tests/system/shmem/ every placement
# runs, and building and running them, on the fixture of every shell test (tests/lib/fixture.sh:
# the fabric, `n`, $work, the clean-up). The caller sets `fabric` first.
bin="${NTBLEND_BIN:?set NTBLEND_BIN to the bin directory of the build}"
src="${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}"
. "$src/tests/lib/fixture.sh"
fx_init shmem
# step WHAT: progress on stdout, so that a test stopped by its timeout shows where it stood.
step() { echo "[${SECONDS}s] $*"; }

progs=(hello putget malloc atomics barrier wait teams coll rma_ext amo_ext signal p2p lock ctx
    api15 globals quiet_fwd progress ring_order align compat cxx profile bigcopy putstream failover)

# build PROG...: each tests/system/shmem/PROG into $work: the build's own copy where it made one
# ($NTBLEND_SHMEM_PROGS, tests/CMakeLists.txt), else compiled with oshcc (PROG.cpp with
# oshc++). build_osh PROG...: compiled with oshcc / oshc++ in any case, as a user would.
build() {
    local p
    for p in "$@"; do
        if [[ -n ${NTBLEND_SHMEM_PROGS:-} && -x $NTBLEND_SHMEM_PROGS/$p ]]; then
            ln -sf "$NTBLEND_SHMEM_PROGS/$p" "$work/$p"
        else
            build_osh "$p"
        fi
    done
}
build_osh() {
    local p
    for p in "$@"; do
        rm -f "$work/$p"
        if [[ -f "$src/tests/system/shmem/$p.cpp" ]]; then
            "$bin/oshc++" -std=c++11 -Wall -Wextra -Werror -o "$work/$p" "$src/tests/system/shmem/$p.cpp" ||
                fail "oshc++ could not build $p.cpp"
        else
            "$bin/oshcc" -std=gnu11 -Wall -Wextra -Werror -o "$work/$p" "$src/tests/system/shmem/$p.c" ||
                fail "oshcc could not build $p.c"
        fi
    done
}

# run_all LABEL OSHRUN-ARGS...: every program under one placement.
run_all() {
    local label=$1
    shift
    for p in "${progs[@]}"; do
        step "$label: $p"
        if ! timeout 120 "$bin/oshrun" --fabric "$fabric" "$@" "$work/$p" >"$work/out" 2>&1; then
            fail "$p ($label): $(cat "$work/out")"
        fi
    done
}

# ring7_run LABEL: putget, ring_order, bigcopy and atomics at 7 PEs on tests/system/topologies/ring7.ini,
# where the PE three hops away is reached through two nodes (the fabric is up only meanwhile).
ring7_run() {
    n up "$src/tests/system/topologies/ring7.ini" >/dev/null
    local p
    for p in putget ring_order bigcopy atomics; do
        step "7 PEs, ring7$1: $p"
        timeout 120 "$bin/oshrun" --fabric "$fabric" -np 7 "$work/$p" >"$work/out" 2>&1 ||
            fail "$p (7 PEs, ring7$1): $(cat "$work/out")"
    done
    n down >/dev/null
}

# no_job_left LABEL PROG: no process of $work/PROG and no relay of this fabric is left.
no_job_left() {
    ! pgrep -f "$work/$2" >/dev/null || fail "$1: processes left: $(pgrep -af "$work/$2")"
    local p
    for p in $(pgrep -x oshrelay || true); do # ours: on this fabric
        ! tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | grep -qx "NTBLEND_FABRIC=$fabric" ||
            fail "$1: a relay is left: $(ps -o pid,args -p "$p")"
    done
}

# no_job_ram: wait (up to 5 s) until no host has RAM allocated, as after a job once its agents
# have released its segments; a baseline taken earlier would count them.
no_job_ram() {
    local i
    for i in $(seq 100); do
        [[ "$(n status --json | jq '[.hosts[].allocated_bytes] | add')" == 0 ]] && return 0
        sleep 0.05
    done
    fail "segments of a finished job still hold RAM: $(n status --json | jq -c '[.hosts[] | {name, allocated_bytes}]')"
}
