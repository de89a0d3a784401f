# Sourced by test_shmem.sh and test_shmem_ring.sh: the programs of tests/shmem/ every placement
# runs, the fabric, and building and running them. The caller sets `fabric` first.
bin="${NTBLEND_BIN:?set NTBLEND_BIN to the bin directory of the build}"
src="${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}"
work=$(mktemp -d)
n() { "$bin/ntblend" --fabric "$fabric" "$@"; }
trap 'n down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

progs=(hello putget malloc atomics barrier wait teams coll rma_ext amo_ext signal p2p lock ctx
    api15 globals quiet_fwd progress ring_order align compat cxx profile bigcopy failover)

# build PROG...: each tests/shmem/PROG.c with oshcc (PROG.cpp with oshc++) into $work.
build() {
    for p in "$@"; do
        if [[ -f "$src/tests/shmem/$p.cpp" ]]; then
            "$bin/oshc++" -std=c++11 -Wall -Wextra -Werror -o "$work/$p" "$src/tests/shmem/$p.cpp" ||
                fail "oshc++ could not build $p.cpp"
        else
            "$bin/oshcc" -std=gnu11 -Wall -Wextra -Werror -o "$work/$p" "$src/tests/shmem/$p.c" ||
                fail "oshcc could not build $p.c"
        fi
    done
}

# run_all LABEL OSHRUN-ARGS...: every program under one placement.
run_all() {
    local label=$1
    shift
    for p in "${progs[@]}"; do
        if ! timeout 120 "$bin/oshrun" --fabric "$fabric" "$@" "$work/$p" >"$work/out" 2>&1; then
            fail "$p ($label): $(cat "$work/out")"
        fi
    done
}
