#!/usr/bin/env bash
# Device Lending, the driver's side: the same driver binary (accel_drv, written only against
# include/ntblend/pci.h) drives an accelerator as a local function on its host and as a
# function lent to another host, and what the device gives back is byte for byte the same;
# the lending layer intercepts what the papers intercept (a lent function's INTx stays
# masked, its MSI-X points at the borrower across the NTB); a hot-remove while the driver is
# bound reaches its remove(); a lent function cannot be bound on its lender meanwhile; a
# borrower that crashes loses the function to its lender; and peer-to-peer DMA between two
# functions works, data checked, in the three cases of the 2019 paper (§6): both lent by one
# lender, one lent and one the borrower's own, lent by two different lenders.
set -euo pipefail
. "${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}/tests/lib/fixture.sh"
fx_init lendrv

n up "$NTBLEND_SRC/examples/topologies/smartio3.ini" >/dev/null

# The same binary on a local accelerator, then on the same accelerator lent to c.
out=$(n run --host a -- accel_drv --size 256k --iters 4 --dump "$work/a") || fail "local: $out"
grep -Eq "^0000:03:00.0 10de:1bb1: 4 x 262144 bytes .* [1-9][0-9]* interrupts, data verified" <<<"$out" \
  || fail "local run: $out"
n device lend accel0 --to c >/dev/null
out=$(n run --host c -- accel_drv --size 256k --iters 4 --dump "$work/c") || fail "lent: $out"
grep -Eq "^0000:80:00.0 10de:1bb1: 4 x 262144 bytes .* [1-9][0-9]* interrupts, data verified" <<<"$out" \
  || fail "lent run: $out"
grep -q "^0000:04:00.0 10de:1bb1: .* data verified" <<<"$out" || fail "c's own accelerator: $out"
cmp "$work/a.03:00.0.bin" "$work/c.80:00.0.bin" || fail "local and lent runs read back different data"

# Each copy waits for its interrupt (a copy whose interrupt never comes fails the run), so
# every run counts at least one on each device, however many coalesce. A lent function's
# first interrupts once reached no handler when its handler thread was slow to start: short
# runs, many times, each binding both devices anew.
for i in $(seq 12); do
  out=$(n run --host c -- accel_drv --size 4k --iters 3 2>&1) || fail "short run $i: $out"
  for bdf in 0000:80:00.0 0000:04:00.0; do
    grep -Eq "^$bdf 10de:1bb1: 3 x 4096 bytes .* [1-9][0-9]* interrupts, data verified" <<<"$out" \
      || fail "short run $i, $bdf: $out"
  done
done

# What the lending layer intercepts, as a driver sees it.
out=$(n run --host c -- pci_check) || fail "pci_check: $out"
lent=$(grep "^0000:80:00.0 " <<<"$out") || fail "pci_check does not see 80:00.0: $out"
own=$(grep "^0000:04:00.0 " <<<"$out") || fail "pci_check does not see 04:00.0: $out"
grep -q "cmd=0x406" <<<"$lent" || fail "a lent function's INTx is not masked: $lent"
grep -q "cmd=0x6 " <<<"$own" || fail "a local function's Command register was changed: $own"
grep -q "msix_lo=0xfee00000 msix_hi=0 " <<<"$own" || fail "local MSI-X address: $own"
grep -q "msix_lo=0xfee00000" <<<"$lent" && fail "a lent function's MSI-X points at the lender's own MSI region: $lent"
bar=$(sed -n 's/.* bar0=\(0x[0-9a-f]*\) .*/\1/p' <<<"$lent")
want=$(n lspci --host c --json | jq -r '.[0].functions[] | select(.name=="accel0") | .bars[0].address')
[ "$((bar))" = "$want" ] || fail "BAR0 of 80:00.0 at $bar, lspci says $want"

# The lender cannot bind what it has lent out.
set +e; out=$(n run --host a -- accel_drv --iters 1 2>&1); rc=$?; set -e
[ $rc -ne 0 ] || fail "a driver on the lender bound a lent function: $out"
grep -q "0000:03:00.0 (accel0): cannot bind it: another driver, or another host, has it" <<<"$out" \
  || fail "lender bind: $out"

# Hot-remove while the driver is bound: its remove() runs; c's own device stays bound.
ntblend --fabric "$fabric" run --host c -- accel_drv --size 64k --iters 1 --stay >"$work/stay" 2>&1 &
stay=$!
wait_for 'grep -q "bound 2" "$work/stay"' "the driver did not bind both: $(cat "$work/stay")"
n device reclaim accel0 >/dev/null
wait_for 'grep -q "^0000:80:00.0: removed (hot-unplugged)" "$work/stay"' \
  "no remove() after the hot-remove: $(cat "$work/stay")"
grep -q "0000:04:00.0: removed" "$work/stay" && fail "the local device was removed too"
kill "$stay"; wait "$stay" 2>/dev/null || true
n device list | grep -q "accel0 .* no  *-" || fail "accel0 still borrowed: $(n device list)"
wait_for 'n device list | grep -q "accel1 .* no  *-"' "accel1 still held after the driver was killed"

# A borrower that crashes loses the function: the lender takes it back.
n device lend accel0 --to c >/dev/null
ntblend --fabric "$fabric" run --host c -- accel_drv --size 64k --iters 1 --stay >"$work/stay2" 2>&1 &
disown $! # the crash of its host ends it
wait_for 'grep -q "bound 2" "$work/stay2"' "the driver did not bind both: $(cat "$work/stay2")"
n host kill c >/dev/null
wait_for '! n device list | grep -q "accel0 .*exclusive"' "accel0 not reclaimed after c crashed: $(n device list)"
n host start c >/dev/null
out=$(n run --host a -- accel_drv --size 64k --iters 1) || fail "local after the crash: $out"
n down >/dev/null

# Peer to peer (smartio-p2p.ini: accel0 and accel1 in a, accel2 in c): each device's engine
# writes into the other's memory BAR, and the data is read back through that BAR.
n up "$NTBLEND_SRC/examples/topologies/smartio-p2p.ini" >/dev/null
p2p() { # HOST WHAT
  out=$(n run --host "$1" -- accel_drv --p2p --size 256k --iters 2) || fail "p2p, $2: $out"
  [ "$(grep -Ec '^p2p .* [0-9]+ MB/s, median [0-9.]+ us per copy \(p99 [0-9.]+, p99.99 [0-9.]+ us\), [0-9.]+ us per queued copy, data verified$' <<<"$out")" = 2 ] \
    || fail "p2p, $2: $out"
  # The same data via the borrower's RAM, one engine writing and the other reading.
  [ "$(grep -Ec '^via-ram .* [0-9]+ MB/s, median [0-9.]+ us per copy \(p99 [0-9.]+, p99.99 [0-9.]+ us\), data verified$' <<<"$out")" = 2 ] \
    || fail "via RAM, $2: $out"
}
n device lend accel0 --to b >/dev/null
n device lend accel1 --to b >/dev/null
p2p b "both lent by a"
n device reclaim accel1 >/dev/null
n device lend accel2 --to b >/dev/null
p2p b "lent by a and by c"
n device reclaim accel0 >/dev/null
n device reclaim accel2 >/dev/null
n device lend accel0 --to c >/dev/null
p2p c "one lent (accel0), one c's own (accel2)"
echo "ok"
