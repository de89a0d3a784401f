#!/usr/bin/env bash
# Device Lending, the hot-plug part: `ntblend device lend NAME --to H` hot-adds a lent function
# into H's PCIe tree (lspci shows it there, with its BARs at H's NTB window addresses, and
# pciutils decodes its configuration space), `device reclaim` hot-removes it, a borrower that
# crashes loses it (the lender takes it back and resets it), and a lender that crashes takes
# its functions out of the borrowers' trees.
set -euo pipefail
. "${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}/tests/lib/fixture.sh"
fx_init lend

n up "$NTBLEND_SRC/examples/topologies/smartio3.ini" >/dev/null
tables() { # app LUT entries and requester IDs per adapter, IOMMU mappings per host
  n status --json | jq -c '[[.adapters[] | [.name, .lut.used - .lut_agent, .requester_ids.used]], [.hosts[] | [.name, .iommu_maps]]]'
}
baseline=$(tables)
out=$(n device lend nvme0 --to b)
grep -q "nvme0 (on a) is lent to b: hot-added at 80:00.0" <<<"$out" || fail "lend: $out"
n device lend accel1 --to b >/dev/null
tree=$(n lspci --host b)
grep -qx "80:00.0 Non-Volatile memory controller: Intel Corporation NVMe Datacenter SSD \[Optane\] (rev 01)" <<<"$tree" \
  || fail "b's tree has no NVMe at 80:00.0: $tree"
grep -q "^81:00.0 3D controller: NVIDIA" <<<"$tree" || fail "b's tree has no accel1: $tree"
grep -q "nvme0" <<<"$(n lspci --host c)" && fail "c's tree shows nvme0"
grep -q "^02:00.0 Non-Volatile" <<<"$(n lspci --host a)" || fail "the lender's tree lost its NVMe"
# Its BARs appear in b's map, inside b's adapter window BAR, and pciutils reads them there.
bar=$(n lspci --host b --json | jq -r '.[0].functions[] | select(.name=="nvme0") | .bars[0].address')
win=$(n lspci --host b --json | jq -r '.[0].functions[] | select(.kind=="ntb") | .bars[0].address')
wsize=$(n lspci --host b --json | jq -r '.[0].functions[] | select(.kind=="ntb") | .bars[0].size')
[ "$bar" -ge "$win" ] && [ "$bar" -lt $((win + wsize)) ] || fail "nvme0's BAR $bar is not in b's window BAR"
[ "$(n lspci --host b --json | jq -r '.[0].functions[] | select(.name=="nvme0") | .lender')" = a ] \
  || fail "lspci --json: lender"
dump=$(mktemp)
n lspci --host b -xxx >"$dump"
lspci -F "$dump" -v 2>/dev/null | grep -q "Memory at $(printf %x "$bar") (64-bit, non-prefetchable)" \
  || { rm -f "$dump"; fail "pciutils does not see nvme0's BAR at b's address"; }
rm -f "$dump"
grep -q "Lent by: a" <<<"$(n lspci --host b -s nvme0 -v)" || fail "lspci -v: no 'Lent by'"
grep -q -- "-80.0-\[80\]----00.0  nvme0 (lent)" <<<"$(n lspci --host b -t)" || fail "lspci -t"

# Refusals.
expect_fail n device lend nvme0 --to c      # lent already (exclusively to b)
expect_fail n device lend accel0 --to a     # a's own
expect_fail n device lend nope --to b
expect_fail n device reclaim accel0         # not lent
set +e; n device lend nvme0 >/dev/null 2>&1; rc=$?; set -e
[ $rc -eq 2 ] || fail "lend without --to: exit $rc, expected 2"

# Reclaim: gone from b's tree, back on a, reset, no longer lent.
out=$(n device reclaim nvme0)
grep -q "nvme0 is back on a: hot-removed from b" <<<"$out" || fail "reclaim: $out"
grep -q "^80:00.0" <<<"$(n lspci --host b)" && fail "nvme0 still in b's tree"
grep -q "nvme0 .* no  *-$" <<<"$(n device list)" || fail "nvme0 still lent: $(n device list)"
grep -q "hot-removed nvme0" "$(n status --json | jq -r .dir)/host1.log" || fail "no hot-remove in b's log"

# The lender crashes while a driver of the borrower uses its function: the function leaves
# the borrower's tree, and the driver sees it hot-removed.
(exec ntblend --fabric "$fabric" run --host b -- accel_drv --size 64k --iters 2 --stay) >"$work/drv.out" 2>&1 &
drv=$!
wait_for 'grep -q "^bound" "$work/drv.out"' "accel_drv did not bind accel1 on b: $(cat "$work/drv.out")"
n host kill c >/dev/null
wait_for '! grep -q "^81:00.0" <<<"$(n lspci --host b)"' "accel1 stayed in b's tree after c crashed"
wait "$drv" || true
grep -q "81:00.0: removed (hot-unplugged)" "$work/drv.out" || fail "the driver was not told: $(cat "$work/drv.out")"
n host start c >/dev/null
# Back up, the lender lends it to the same borrower again: the borrower kept nothing of the
# borrow that ended with the lender's previous life (it once refused: "borrows it already").
out=$(n device lend accel1 --to b 2>&1) || fail "lending accel1 to b again after c rebooted: $out"
out=$(n run --host b -- accel_drv --size 64k --iters 2 2>&1) || fail "accel_drv on the lent-again accel1: $out"
grep -q "data verified" <<<"$out" || fail "accel_drv on the lent-again accel1: $out"
n device reclaim accel1 >/dev/null

# The borrower crashes: the lender takes the function back; the borrower boots with an empty
# tree of lent functions.
n device lend accel0 --to c >/dev/null
n host kill c >/dev/null
wait_for 'grep -q "accel0 .* -$" <<<"$(n device list)"' "a kept accel0 borrowed by a dead host"
n host start c >/dev/null
grep -q "^8[0-9]:" <<<"$(n lspci --host c)" && fail "c rebooted with a lent function in its tree"
# Nothing left behind by any of it: the LUT, requester-ID and IOMMU use of before.
after=""
for _ in $(seq 50); do after=$(tables); [ "$after" = "$baseline" ] && break; sleep 0.1; done
[ "$after" = "$baseline" ] || fail "tables: before $baseline, after $after"
echo "ok"
