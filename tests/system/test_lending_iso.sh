#!/usr/bin/env bash
# Isolation around a lent device: only the host it is lent to reaches it. accel1 (host c) is
# lent to host a, whose IOMMU is on. A process of another host (b) cannot get at it: borrowing
# it is refused, and a driver of b finds no such function in b's tree. On a, a second driver
# cannot bind it while the first has it. And the device's DMA reaches only what was mapped for
# it: its writes past, before and far from its buffer end with an error in the descriptor (a's
# IOMMU faults them, recorded in a's fault count, or nothing decodes the address), the buffer
# is untouched, and the device still works for its own buffer (tests/system/dma_outside.c).
set -euo pipefail
. "${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}/tests/lib/fixture.sh"
fx_init leniso

n up "$NTBLEND_SRC/tests/system/topologies/smartio3-iommu.ini" >/dev/null
n device lend accel1 --to a >/dev/null
# Another host's process: no borrow, no function in its tree.
if out=$(n device borrow accel1 --host b 2>&1); then fail "b borrowed accel1 lent to a: $out"; fi
grep -q "accel1" <<<"$(n lspci --host b)" && fail "accel1 is in b's tree"
rc=0; out=$(n run --host b -- pci_check 2>&1) || rc=$?
grep -q "^0000:80:00.0 " <<<"$out" && fail "a driver on b sees a function at 80:00.0: $out"
# A second driver on the borrower, while the first holds it.
(exec ntblend --fabric "$fabric" run --host a -- accel_drv --size 64k --iters 1 --stay) >"$work/drv.out" 2>&1 &
drv=$!
wait_for 'grep -q "^bound" "$work/drv.out"' "accel_drv did not bind on a: $(cat "$work/drv.out")"
out=$(n run --host a -- pci_check 2>&1) || true
grep -q "^0000:80:00.0 " <<<"$out" && fail "a second driver bound the lent function: $out"
n device reclaim accel1 >/dev/null
wait_for 'grep -q "80:00.0: removed" "$work/drv.out"' "accel_drv was not told of the reclaim"
kill $drv; wait $drv 2>/dev/null || true # it stays bound to a's own accelerator
# The device's DMA outside what was mapped for it.
n device lend accel1 --to a >/dev/null
faults=$(n status --json | jq '.hosts[] | select(.name == "a") | .iommu_faults')
out=$(n run --host a -- dma_outside 2>&1) || fail "dma_outside: $out"
lent=$(grep "^0000:80:00.0 " <<<"$out") || fail "dma_outside did not check the lent function: $out"
err='(IOMMU fault|master abort)'
grep -qE "inside ok; past the buffer: $err; before it: $err; 64 MiB away: $err; buffer untouched; inside again ok" <<<"$lent" ||
  fail "dma_outside: $lent"
# Those the buffer's host's IOMMU stopped are in its fault count.
now=$(n status --json | jq '.hosts[] | select(.name == "a") | .iommu_faults')
stopped=$(grep -o "IOMMU fault" <<<"$lent" | wc -l)
[ "$now" -ge $((faults + stopped)) ] || fail "a's IOMMU recorded $((now - faults)) faults, expected at least $stopped"
n device reclaim accel1 >/dev/null
echo "ok: $lent"
