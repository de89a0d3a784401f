#!/usr/bin/env bash
# test_bench_verdict: scripts/bench-verdict.sh, the judge of bench-compare.sh, on rounds whose
# answer is known: a clear slowdown is "worse" for a figure where lower is better and "better"
# where higher is, rounds that overlap are "level", too few rounds give no verdict, and the
# same rounds give the same interval every time (the seed is fixed).
set -euo pipefail
src=${NTBLEND_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/scripts/bench-verdict.sh"

fail() { echo "FAIL: $*"; exit 1; }
# rounds "B1 B2 ..." "A1 A2 ...": the lines bench_verdict reads
rounds() { for v in $1; do echo "b $v"; done; for v in $2; do echo "a $v"; done; }
field() { cut -f"$1"; }

before="100 110 105 98 102"
slower="130 128 135 125 140"
overlap="101 108 99 104 111"

v=$(rounds "$before" "$slower" | bench_verdict lo)
[ "$(field 6 <<<"$v")" = worse ] || fail "30 % slower, lower better: '$v'"
[ "$(field 1 <<<"$v")" = 102 ] && [ "$(field 2 <<<"$v")" = 130 ] || fail "medians: '$v'"
[ "$(field 3 <<<"$v")" = 1.275 ] || fail "ratio of the medians: '$v'"
lo=$(field 4 <<<"$v") hi=$(field 5 <<<"$v")
awk -v l="$lo" -v h="$hi" 'BEGIN { exit !(l > 1 && l <= 1.275 && h >= 1.275) }' || fail "interval $lo..$hi"

[ "$(rounds "$before" "$slower" | bench_verdict hi | field 6)" = better ] || fail "30 % higher, higher better"
[ "$(rounds "$slower" "$before" | bench_verdict hi | field 6)" = worse ] || fail "30 % lower, higher better"
[ "$(rounds "$slower" "$before" | bench_verdict lo | field 6)" = better ] || fail "30 % lower, lower better"
[ "$(rounds "$before" "$overlap" | bench_verdict lo | field 6)" = level ] || fail "overlapping rounds, lower better"
[ "$(rounds "$before" "$overlap" | bench_verdict hi | field 6)" = level ] || fail "overlapping rounds, higher better"

# One round spoilt by a neighbour does not make a figure worse.
[ "$(rounds "$before" "101 108 99 104 450" | bench_verdict lo | field 6)" = level ] || fail "one outlying round"

# Deterministic.
[ "$(rounds "$before" "$overlap" | bench_verdict lo)" = "$(rounds "$before" "$overlap" | bench_verdict lo)" ] ||
    fail "the same rounds gave two intervals"

# Too few rounds, or none.
[ "$(rounds "100 110" "120 130 125" | bench_verdict lo | field 6)" = - ] || fail "2 rounds before"
[ "$(rounds "" "120 130 125" | bench_verdict lo | field 6)" = "no data" ] || fail "no rounds before"
[ "$(rounds "100 null 110 105" "120 130 125" | bench_verdict lo | field 6)" = worse ] ||
    fail "a missing figure (null) is skipped"
echo "bench_verdict: all cases as expected"
