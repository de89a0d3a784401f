#!/usr/bin/env bash
# scripts/bench-devio.sh and devio_bench, small: usage errors exit 2 with a message, a quick
# run (two rounds) gives a median for every case (latency model off and on, local and lent,
# QD 1 and 32, the accelerator's reads and the CPU's), devio_bench --verify checks every block
# both modes read, and nothing is left up. No timing asserted.
set -euo pipefail
. "${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}/tests/lib/fixture.sh"
fx_init devio-bench --own-shm
bench() { "$NTBLEND_SRC/scripts/bench-devio.sh" -b "$NTBLEND_BIN" "$@"; }
expect_rc 2 bench frob
expect_rc 2 bench -r 0
expect_rc 2 bench -n x
help=$(bench --help) && grep -q "^Usage: scripts/bench-devio.sh" <<<"$help" || fail "--help"

out=$(bench -q -o "$work/d.json" 2>"$work/err") || fail "bench-devio.sh: $out $(cat "$work/err")"
n=$(jq '[.medians[] | select(.accel_us > 0 and .cpu_us > 0 and .ratio > 0)] | length' "$work/d.json")
[ "$n" = 8 ] || fail "expected 8 cases with medians, got $n: $(jq -c .medians "$work/d.json")"
grep -q "accel/cpu" <<<"$out" || fail "no table: $out"
[ -z "$(ls "$NTBLEND_SHM_DIR")" ] || fail "left up: $(ls "$NTBLEND_SHM_DIR")"

# devio_bench itself: bad input, then a verified run of both modes on a lent pair.
NTBLEND_NVME_DIR=$work/nvme ntblend --fabric "$fabric" up "$NTBLEND_SRC/examples/topologies/smartio3.ini" >/dev/null
ntblend --fabric "$fabric" device add nvme0 >/dev/null
ntblend --fabric "$fabric" device add accel1 >/dev/null
run() { ntblend --fabric "$fabric" run --host b -- devio_bench "$@"; }
err=$(run --qd 0 2>&1) && fail "--qd 0 accepted"
grep -q "qd takes 1..255" <<<"$err" || fail "--qd 0: $err"
err=$(run --accel accel9 2>&1) && fail "accel9 accepted"
grep -q "no device 'accel9'" <<<"$err" || fail "accel9: $err"
err=$(run --accel accel0 2>&1) && fail "accel0, not lent out, was borrowed"
grep -q "lend it out first" <<<"$err" || fail "accel0 not lent out: $err"
out=$(run --accel accel1 --qd 8 --ios 600 --rounds 2 --lba 100:300 --verify --json -q) || fail "verify run: $out"
jq -e '.verify and .accel.us_per_io > 0 and .cpu.us_per_io > 0' <<<"$out" >/dev/null || fail "verify run: $out"
ntblend --fabric "$fabric" down >/dev/null
echo "ok"
