#!/usr/bin/env bash
# scripts/bench-lending.sh, small (two rounds, so that fig21 runs its pairs in both orders):
# every part runs (fig21 only where fio and the NVMe engine's per-I/O mapping are built; else
# it says why; fig21eq likewise), the JSON holds a median for every figure the
# summary prints, the same-lender peer-to-peer path has fewer hops than the other two, the
# plots are written, usage errors exit 2 and nothing is left up. No timing asserted.
set -euo pipefail
. "${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}/tests/lib/fixture.sh"
# The bench's fabrics in a directory of this test's own, so that "nothing is left up" is
# about them alone (another suite may be running its own at the same time).
fx_init benchlend --own-shm
bench() { "$NTBLEND_SRC/scripts/bench-lending.sh" -b "$NTBLEND_BIN" "$@"; }
expect_rc 2 bench frob
expect_rc 2 bench -r 0
expect_rc 2 bench -s 12x
expect_rc 2 bench -t x
help=$(bench --help) && grep -q "^Usage: scripts/bench-lending.sh" <<<"$help" || fail "--help"

out=$(bench -r 2 -s 256k -t 1 -n 200 -o "$work/b.json" -p "$work/plots" 2>"$work/err") \
  || fail "bench-lending.sh: $out $(cat "$work/err")"
j=$work/b.json
med() { jq -r --arg p "$1" --arg c "$2" --arg k "$3" \
  '.medians[] | select(.part == $p and .case == $c and .key == $k) | .median' "$j"; }
pos() { awk -v v="$1" 'BEGIN { exit !(v + 0 > 0) }'; }
for m in off on; do
  for w in local lent; do
    for k in h2d_mbps d2h_mbps; do
      v=$(med bw "$m-$w" $k); pos "$v" || fail "bw $m-$w $k: '$v'"
    done
  done
done
for c in local same-lender lent+local two-lenders; do
  for k in queued_us median_us mbps; do
    v=$(med p2p "$c" $k); pos "$v" || fail "p2p $c $k: '$v'"
  done
done
s=$(med p2p same-lender hops) l=$(med p2p lent+local hops) t=$(med p2p two-lenders hops)
[ "$s" = 0 ] && [ "$l" -gt 0 ] && [ "$t" -gt 0 ] || fail "hops: same lender $s, lent+local $l, two lenders $t"
[ "$(med p2p local hops)" = 0 ] || fail "hops: local $(med p2p local hops)"
# The lender's IOMMU off and on (Fig. 31), local and lent with equal hops (Fig. 22), one more
# hop (Fig. 23): a median for every case and size, and their plots.
for c in off on; do for k in read_mbps write_mbps; do
  v=$(med iommu "$c-256k" $k); pos "$v" || fail "iommu $c $k: '$v'"
done; done
for c in local lent; do for k in read_mbps write_mbps; do
  v=$(med fig22 "$c" $k); pos "$v" || fail "fig22 $c $k: '$v'"
done; done
for c in b2b switch; do for z in 64k 256k 1M; do
  v=$(med fig23 "$c-$z" read_mbps); pos "$v" || fail "fig23 $c-$z: '$v'"
done; done
for p in iommu fig22 fig23; do [ -s "$work/plots/lending-$p.png" ] || fail "no lending-$p.png"; done
for w in local lent; do v=$(med map "$w" median_ns); pos "$v" || fail "map $w: '$v'"; done
for p in bw p2p; do [ -s "$work/plots/lending-$p.png" ] || fail "no lending-$p.png"; done
if grep -q "Fig. 21.*skipped" <<<"$out"; then
  echo "fig21 skipped: $(grep 'Fig. 21' <<<"$out")"
else
  for m in off on; do
    for w in local lent; do v=$(med fig21 "$m-$w" median_ns); pos "$v" || fail "fig21 $m-$w: '$v'"; done
    v=$(med fig21 "$m-ratio" lent_over_local); pos "$v" || fail "fig21 $m paired ratio: '$v'"
  done
  grep -q "paired" <<<"$out" || fail "no paired ratio in the summary"
  [ -s "$work/plots/lending-fig21.png" ] || fail "no lending-fig21.png"
  [ "$(jq '.fig21_cdf_latency_model_on.lent | length' "$j")" -gt 5 ] || fail "no CDF in the JSON"
  # Fig. 21 with equal hops (chassis.ini)
  for w in local lent; do v=$(med fig21eq "on-$w" median_ns); pos "$v" || fail "fig21eq $w: '$v'"; done
  v=$(med fig21eq on-ratio lent_over_local); pos "$v" || fail "fig21eq paired ratio: '$v'"
  [ -s "$work/plots/lending-fig21eq.png" ] || fail "no lending-fig21eq.png"
  [ "$(jq '.fig21eq_cdf_latency_model_on.lent | length' "$j")" -gt 5 ] || fail "no fig21eq CDF in the JSON"
fi
[ -z "$(ls "$NTBLEND_SHM_DIR")" ] || fail "fabrics left up: $(ls "$NTBLEND_SHM_DIR")"
echo "ok"
