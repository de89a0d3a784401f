#!/usr/bin/env bash
# Streaming DMA through the driver model (dma_map_single, dma_map_sg): on a local function and
# on two functions lent to a borrower with its IOMMU on, data moved by the device's own engine
# through mapped buffers is right, and a DMA outside them, into a buffer unmapped again or
# against the mapping's direction is an IOMMU fault in the borrower's ring that changes no
# byte; the borrower's two lent functions share one DMA aperture (one window on the lender);
# with the borrower's IOMMU off the lender maps each buffer; running the lender's adapter out
# of LUT entries or requester-ID entries makes dma_map_single fail with ENOSPC (and a freed
# window, or another function's unmapping, makes it work again); a driver killed with mappings leaves no IOMMU, LUT or
# requester-ID entry behind.
set -euo pipefail
. "${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}/tests/lib/fixture.sh"
fx_init lendma
st() { n status --json; }
faults() { st | jq '.hosts[] | select(.name=="c") | .iommu_faults'; }
maps() { st | jq '.hosts[] | select(.name=="c") | .iommu_maps'; }
lut_a() { st | jq '.adapters[] | select(.name=="a.ntb0") | .lut.used - .lut_agent'; } # not mailboxes
rid_a() { st | jq '.adapters[] | select(.name=="a.ntb0") | .requester_ids.used'; }

n up "$NTBLEND_SRC/tests/system/topologies/lend-dma.ini" >/dev/null
n device lend accel0 --to c >/dev/null
n device lend accel2 --to c >/dev/null
maps0=$(maps) lut0=$(lut_a) rid0=$(rid_a) faults0=$(faults)

# c's own accelerator and the two lent ones, through the same calls.
out=$(n run --host c -- dma_check) || fail "dma_check on c: $out"
for f in 04:00.0 80:00.0 81:00.0; do
  for what in "map/unmap data verified" "outside the buffers: IOMMU fault, nothing written" \
              "against the direction: IOMMU fault, nothing written" \
              "unmapped again: IOMMU fault, nothing written" "scatter-gather data verified" \
              "not host RAM: EINVAL"; do
    grep -qx "0000:$f: $what" <<<"$out" || fail "$f: no '$what': $out"
  done
done
# Four faults per function, recorded in c's ring (the lent ones' arrive through c's adapter).
[ "$(faults)" -ge $((faults0 + 12)) ] || fail "IOMMU faults on c: $(faults), was $faults0"
# Gone with the process: every streaming mapping, the aperture window, the devices' IDs.
[ "$(maps)" = "$maps0" ] || fail "c's IOMMU kept $(maps) mappings, had $maps0"
[ "$(lut_a)" = "$lut0" ] || fail "a.ntb0 kept $(lut_a) LUT entries, had $lut0"
[ "$(rid_a)" = "$rid0" ] || fail "a.ntb0 kept $(rid_a) requester IDs, had $rid0"

# The two lent functions share one aperture: one window on the lender, not two.
n run --host c -- dma_check --hold >"$work/hold" 2>&1 &
hold=$!
wait_for 'grep -q "^holding" "$work/hold"' "dma_check --hold: $(cat "$work/hold")"
[ "$(grep -c ': mapped$' "$work/hold")" = 3 ] || fail "hold: $(cat "$work/hold")"
[ "$(lut_a)" = $((lut0 + 1)) ] || fail "two lent functions took $(($(lut_a) - lut0)) windows on a.ntb0, not one"
[ "$(rid_a)" = $((rid0 + 2)) ] || fail "requester IDs on a.ntb0: $(rid_a), was $rid0"
[ "$(maps)" -ge $((maps0 + 3)) ] || fail "c's IOMMU has $(maps) mappings, had $maps0, 3 held"
# Killed with its mappings: nothing stays.
kill -9 "$(sed -n 's/^holding //p' "$work/hold")"
wait "$hold" 2>/dev/null || true
wait_for '[ "$(maps)" = "$maps0" ] && [ "$(lut_a)" = "$lut0" ] && [ "$(rid_a)" = "$rid0" ]' \
  "after the kill: c's IOMMU $(maps) (was $maps0), a.ntb0 LUT $(lut_a) (was $lut0), RID $(rid_a) (was $rid0)"

# The lender crashes under a driver holding mappings through its aperture: c forgets the
# borrows, the aperture and what was mapped for them; a, back up, lends both to c again, and
# a driver maps through a new aperture.
n run --host c -- dma_check --hold >"$work/hold3" 2>&1 &
hold=$!
wait_for 'grep -q "^holding" "$work/hold3"' "dma_check --hold: $(cat "$work/hold3")"
n host kill a >/dev/null
wait_for '! grep -q "^8[01]:00.0" <<<"$(n lspci --host c)"' "the lent functions stayed in c's tree after a crashed"
kill -9 "$(sed -n 's/^holding //p' "$work/hold3")"
wait "$hold" 2>/dev/null || true
n host start a >/dev/null
out=$(n device lend accel0 --to c 2>&1) || fail "lending accel0 to c again after a's crash: $out"
out=$(n device lend accel2 --to c 2>&1) || fail "lending accel2 to c again after a's crash: $out"
wait_for '[ "$(maps)" = "$maps0" ] && [ "$(lut_a)" = "$lut0" ] && [ "$(rid_a)" = "$rid0" ]' \
  "after a's crash: c's IOMMU $(maps) (was $maps0), a.ntb0 LUT $(lut_a) (was $lut0), RID $(rid_a) (was $rid0)"
out=$(n run --host c -- dma_check) || fail "dma_check on c after a's crash: $out"
grep -qx "0000:81:00.0: map/unmap data verified" <<<"$out" || fail "after a's crash: $out"

# Out of LUT entries on the lender's adapter (8): dma_map_single is ENOSPC, then maps again.
out=$(n run --host c -- dma_check --exhaust) || fail "exhaust: $out"
grep -Eq "^0000:80:00.0: out of LUT entries after [0-9]+ coherent buffers: ENOSPC; after a free: mapped$" \
  <<<"$out" || fail "exhaust: $out"
[ "$(lut_a)" = "$lut0" ] || fail "a.ntb0 kept $(lut_a) LUT entries after the exhaustion, had $lut0"

# b borrows with its IOMMU off: the lender maps each buffer; the data is right.
n device reclaim accel0 >/dev/null
n device lend accel0 --to b >/dev/null
out=$(n run --host b -- dma_check --no-iommu) || fail "dma_check on b: $out"
grep -qx "0000:80:00.0: map/unmap data verified" <<<"$out" || fail "b: $out"
grep -qx "0000:80:00.0: scatter-gather data verified" <<<"$out" || fail "b: $out"
[ "$(lut_a)" = "$lut0" ] || fail "a.ntb0 kept $(lut_a) LUT entries after b's run, had $lut0"
n down >/dev/null

# Out of requester-ID entries on the lender's adapter (one left): while one lent function has
# a mapping the other's dma_map_single is ENOSPC; once it has unmapped, the other maps.
n up "$NTBLEND_SRC/tests/system/topologies/lend-dma-rid.ini" >/dev/null
n device lend accel0 --to c >/dev/null
n device lend accel2 --to c >/dev/null
rid0=$(rid_a)
out=$(n run --host c -- dma_check --rid) || fail "rid: $out"
for want in "0000:80:00.0: mapped" "0000:81:00.0 while 0000:80:00.0 has a mapping: ENOSPC" \
            "0000:81:00.0 once 0000:80:00.0 unmapped: mapped" \
            "0000:80:00.0 while 0000:81:00.0 has a mapping: ENOSPC"; do
  grep -qx "$want" <<<"$out" || fail "rid: no '$want': $out"
done
[ "$(rid_a)" = "$rid0" ] || fail "a.ntb0 kept $(rid_a) requester IDs, had $rid0"
# Another process's function is not taken from it: one holding a mapping keeps the entry.
n run --host c -- dma_check --hold >"$work/hold2" 2>&1 &
hold=$!
wait_for 'grep -q "^holding" "$work/hold2"' "dma_check --hold: $(cat "$work/hold2")"
grep -qx "0000:80:00.0: mapped" "$work/hold2" || fail "hold on the rid fabric: $(cat "$work/hold2")"
grep -qx "0000:81:00.0: ENOSPC" "$work/hold2" || fail "hold on the rid fabric: $(cat "$work/hold2")"
kill -9 "$(sed -n 's/^holding //p' "$work/hold2")"
wait "$hold" 2>/dev/null || true
wait_for '[ "$(rid_a)" = "$rid0" ]' "a.ntb0 kept $(rid_a) requester IDs after the kill, had $rid0"
echo "test_lending_dma: ok"
