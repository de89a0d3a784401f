#!/usr/bin/env bash
# accel_bench (tools/accel_bench.c): bandwidth local and borrowed, ping-pong in one lender and
# across lenders, on smartio-p2p.ini and smartio-p2p-latency.ini; every run verifies its data.
# Also: a device on the tool's own host is lent out by the tool, a device nobody lent out or
# that someone else holds is refused, usage errors exit 2. Small sizes; no timing asserted.
set -euo pipefail
. "${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}/tests/lib/fixture.sh"
fx_init accbench
ab() { local host=$1; shift; n run --host "$host" -- accel_bench "$@"; }
# ok HOST ARGS...: runs with --json, exits 0 and reports verified data
ok() {
  local out
  out=$(ab "$@" --json) || fail "accel_bench ${*:2} on $1 failed: $out"
  grep -q '"verified": *true' <<<"$out" || fail "accel_bench ${*:2} on $1: not verified: $out"
  printf '%s\n' "$out"
}

n up "$NTBLEND_SRC/examples/topologies/smartio-p2p.ini" >/dev/null

# Usage.
expect_rc 2 ab b
expect_rc 2 ab b frob
expect_rc 2 ab b bandwidth --size 12x
expect_rc 2 ab b pingpong --device accel0 --peer accel0
grep -q pingpong <<<"$(ab b --help)" || fail "--help"

# Not lent out: refused on a borrower (exit 1, says how to lend it) ...
err=$(ab b bandwidth --device accel0 --size 64K --block 4K 2>&1 >/dev/null) && fail "borrowed a device nobody lent out"
grep -q "ntblend device add accel0" <<<"$err" || fail "no hint how to lend: $err"
# ... but on its own host the tool lends it out (and withdraws it afterwards).
out=$(ok a bandwidth --device accel0 --size 256K --block 64K --repeat 1)
grep -q '"borrowed": *false' <<<"$out" || fail "local run not reported as local: $out"
expect_rc 1 ab b bandwidth --device accel0 --size 64K --block 4K

n device add accel0 >/dev/null
n device add accel1 >/dev/null
n device add accel2 >/dev/null

# Bandwidth, local and borrowed; 512 descriptors of 4K go round the 256-entry ring twice.
ok a bandwidth --device accel0 --size 1M --block 64K --repeat 2 >/dev/null
out=$(ok b bandwidth --device accel0 --size 2M --block 4K --repeat 1)
grep -q '"borrowed": *true' <<<"$out" || fail "borrowed run not reported as borrowed: $out"
grep -q '"h2d_mbps"' <<<"$out" || fail "no h2d_mbps: $out"
ok c bandwidth --device accel2 --size 1M --block 1M --repeat 1 >/dev/null
ok b bandwidth --device accel2 --size 1000008 --block 65536 --repeat 1 >/dev/null  # a partial last block
out=$(ab b bandwidth --device accel1 --size 256K --block 64K --repeat 1)
grep -q "data verified: yes" <<<"$out" || fail "text output: $out"

# Held exclusively by another host: refused.
n device borrow accel2 --host c >/dev/null
expect_rc 1 ab b bandwidth --device accel2 --size 64K --block 4K
n device return accel2 --host c >/dev/null

# Ping-pong: both in lender a, and a <-> c; 300 rounds refill the rings; from a lender too.
out=$(ok b pingpong --device accel0 --peer accel1 --rounds 300)
grep -q '"same_lender": *true' <<<"$out" || fail "same lender: $out"
out=$(ok b pingpong --device accel0 --peer accel2 --rounds 300 --batch 7)
grep -q '"same_lender": *false' <<<"$out" || fail "different lenders: $out"
ok a pingpong --device accel2 --peer accel1 --rounds 50 >/dev/null
out=$(ab b pingpong --device accel1 --peer accel2 --rounds 20 --repeat 2)
grep -q "data verified: yes" <<<"$out" || fail "text output: $out"
# No such device.
expect_rc 1 ab b pingpong --device accel0 --peer nope --rounds 10
n down >/dev/null

# The latency model on: the same runs still complete and verify.
n up "$NTBLEND_SRC/examples/topologies/smartio-p2p-latency.ini" >/dev/null
for d in accel0 accel1 accel2; do n device add "$d" >/dev/null; done
ok b bandwidth --device accel0 --size 1M --block 256K --repeat 1 >/dev/null
ok b pingpong --device accel0 --peer accel2 --rounds 200 >/dev/null
ok b pingpong --device accel0 --peer accel1 --rounds 200 >/dev/null
echo "test_accel_bench: ok"
