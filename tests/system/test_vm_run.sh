#!/usr/bin/env bash
# Guests of the driver model (docs/vm.md "For guests of the driver model"): `ntblend vm run`
# runs accel_drv and nvme_drv unmodified inside an emulated VM — its devices at guest BDFs,
# taken from their lenders by the driver's pci_set_master, DMA at guest-physical addresses
# (IOVA = GPA: the lenders' IOMMUs map the guest's RAM at I/O address 0, ram_io 0 in the
# record), MSI-X programmed with the guest's doorbell reaching the driver's handlers; peer to
# peer between two devices of one lender and of two lenders at their guest BAR addresses,
# leaving guest RAM untouched; hot-add while a driver runs; a lender that dies is a surprise
# removal, not a hang; the VM stopping under a driver removes its devices; lenders without an
# IOMMU (guest RAM at the window's address); bad input is refused with what to do; nothing is
# left behind.
set -euo pipefail
fabric="t-vmrun-$$"
vm_name=none # its VMs run drivers, not a guest with a console
. "${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}/tests/system/vm_common.sh"
n2() { ntblend --fabric "$fabric-n" "$@"; }
fx_cleanup 'n2 down'
# wait_for CONDITION MESSAGE [TENTHS]: MESSAGE as it is (vm_common.sh's evaluates it).
wait_for() { for _ in $(seq "${3:-600}"); do eval "$1" && return 0; sleep 0.1; done; fail "$2"; }

# smartio-p2p (accel0, accel1 in a; accel2 in c) with IOMMUs on and an NVMe in a.
sed -e 's/^\[defaults\]$/[defaults]\niommu = on/' "$NTBLEND_SRC/examples/topologies/smartio-p2p.ini" >"$work/topo.ini"
printf '\n[device nvme0]\nhost = a\ntype = nvme\nqueues = 8\nnamespaces = 1\nns_size = 64M\nbacking = %s\n' "$work" >>"$work/topo.ini"
n up "$work/topo.ini" >/dev/null
dir=$(n status --json | jq -r .dir)
for d in accel0 accel1 accel2 nvme0; do n device add "$d" >/dev/null; done
base=$(held)

# ---- bad input
expect_err "no VM named g9" n vm run g9 -- accel_drv
expect_err "run NAME -- PROGRAM" n vm run g9 accel_drv
expect_err "an emulated guest takes at most 4078 MiB" n vm start big --host b --mem 4G --guest emulated
n vm start e1 --host b --mem 64M --guest emulated --device accel0 --device accel1 --device accel2 >/dev/null
expect_err "cannot run 'no-such-program'" n vm run e1 -- no-such-program
set +e; out=$(NTBLEND_VM=zz n run --host b -- accel_drv 2>&1); set -e
grep -qF "pci: VM zz: no such VM" <<<"$out" || fail "a program given an unknown VM said: $out"
set +e; out=$(NTBLEND_VM=e1 n run --host c -- accel_drv 2>&1); set -e
grep -qF "runs on another host (start the program with ntblend vm run)" <<<"$out" ||
  fail "a program on another host than its VM's said: $out"
[ "$(n vm list --json | jq -r '[.[0].devices[].state] | unique | join(",")')" = offered ] ||
  fail "the refused programs took devices: $(n vm list --json)"

# ---- accel_drv in the VM: each device's copies and interrupts, then peer to peer (accel0 and
# accel1 lent by a: within one lender; with accel2 lent by c: across the fabric between two)
ram=$(ls "$dir"/vm*-*.ram)
# Guest RAM from 16 MiB up is not given to the program (it takes well under that): a pattern
# there must come through the run unchanged — no peer-to-peer copy goes through guest RAM.
head -c $((48 << 20)) /dev/urandom | dd of="$ram" bs=1M seek=16 conv=notrunc status=none
before=$(dd if="$ram" bs=1M skip=16 count=48 status=none | md5sum)
out=$(n vm run e1 -- accel_drv --size 64k --iters 2 --p2p 2>&1) || fail "accel_drv in e1: $out"
for bdf in 00:01.0 00:02.0 00:03.0; do
  grep -q "^0000:$bdf 10de:1bb1: .* data verified" <<<"$out" || fail "no verified copies on $bdf: $out"
done
for pair in "01.0 -> 0000:00:02.0" "02.0 -> 0000:00:01.0" "01.0 -> 0000:00:03.0" "03.0 -> 0000:00:02.0"; do
  grep -q "^p2p 0000:00:$pair: .* data verified" <<<"$out" || fail "no verified p2p $pair: $out"
done
[ "$(dd if="$ram" bs=1M skip=16 count=48 status=none | md5sum)" = "$before" ] ||
  fail "guest RAM outside the program's changed during peer to peer"
json=$(n vm list --json)
[ "$(jq '[.[0].devices[] | .state == "held" and .ram_io == 0 and .iova_gpa] | all' <<<"$json")" = true ] ||
  fail "devices not held at IOVA = GPA (ram_io 0): $json"
[ "$(jq -r '[.[0].devices[].lut_entries] | unique | join(",")' <<<"$json")" = 16 ] ||
  fail "64 MiB of guest RAM should take 16 LUT entries of 4 MiB: $json"
# LUT entries host a's adapters hold for others than their agent.
lut_a() { n status --json | jq '[.adapters[] | select(.host == "a") | .lut.used - .lut_agent] | add'; }
[ "$(n status --json | jq '[.hosts[].iommu_faults] | add')" = 0 ] || fail "IOMMU faults: $(n status)"

# ---- hot-add under a running driver: accel1 leaves, accel_drv --stay starts on the other two,
# accel1 comes back and the running driver probes it; then nvme_drv on a hot-added NVMe
luts=$(lut_a)
n vm detach e1 accel1 >/dev/null
# One window of a's for the guest's RAM, shared by its devices from a (2019 §5), and one for
# each peer BAR they map: accel1 leaving frees nothing accel0 still uses (without the sharing
# it freed its own RAM window of 16 entries and its own windows to accel2's BARs).
[ "$luts" -ge 16 ] && [ $((luts - $(lut_a))) -lt 16 ] ||
  fail "a's LUT entries went from $luts to $(lut_a) when accel1 left e1: the windows to its RAM and peers were not shared"
n vm run e1 -- accel_drv --size 4k --iters 1 --stay >"$work/stay" 2>&1 &
stay=$!
wait_for "grep -q '^bound 2' '$work/stay'" "accel_drv --stay did not start: $(cat "$work/stay")"
n vm attach e1 accel1 >/dev/null
wait_for "grep -q '^0000:00:02.0 .*data verified' '$work/stay'" "the running driver did not probe the hot-added accel1: $(cat "$work/stay")"
n vm attach e1 nvme0 >/dev/null
out=$(n vm run e1 -- nvme_drv --range 0:64 2>&1) || fail "nvme_drv in e1: $out"
grep -q "^0000:00:04.0: namespace 1 blocks 0..63: .* data verified" <<<"$out" || fail "nvme_drv: $out"
# ---- the lender of accel2 dies: the running driver sees it removed, and goes on with the rest
n host kill c >/dev/null
wait_for "grep -q '^0000:00:03.0: removed' '$work/stay'" "accel2's removal did not reach the driver: $(cat "$work/stay")"
[ "$(n vm list --json | jq -r '.[0].devices[] | select(.device == "accel2") | .state')" = gone ] ||
  fail "accel2 should be gone from e1: $(n vm list --json)"
n vm detach e1 accel0 >/dev/null
n vm detach e1 accel1 >/dev/null
wait "$stay" || fail "accel_drv --stay: $(cat "$work/stay")"
n host start c >/dev/null
n vm stop e1 >/dev/null
[ "$(held)" = "$base" ] || fail "the VM left something behind: $(held), was $base"

# ---- the VM stops under a running driver: its devices go, and the driver ends
n vm start e2 --host b --mem 64M --guest emulated --device accel0 >/dev/null
n vm run e2 -- accel_drv --size 4k --iters 1 --stay >"$work/stay3" 2>&1 &
stay=$!
wait_for "grep -q '^bound 1' '$work/stay3'" "accel_drv --stay in e2 did not start: $(cat "$work/stay3")"
n vm stop e2 >/dev/null
wait_for "! kill -0 $stay 2>/dev/null" "the driver outlived its VM: $(cat "$work/stay3")"
grep -q '^0000:00:01.0: removed' "$work/stay3" || fail "no removal when the VM stopped: $(cat "$work/stay3")"
[ "$(held)" = "$base" ] || fail "the stopped VM left something behind: $(held), was $base"
n down >/dev/null

# ---- lenders without an IOMMU (smartio3.ini): nothing maps a chosen I/O address, so the
# devices reach guest RAM at their windows' addresses (ram_io), which the guest's DMA API adds
n2 up "$NTBLEND_SRC/examples/topologies/smartio3.ini" >/dev/null
n2 device add accel0 >/dev/null
n2 device add accel1 >/dev/null
n2 vm start e3 --host b --mem 64M --guest emulated --device accel0 --device accel1 >/dev/null
out=$(n2 vm run e3 -- accel_drv --size 64k --iters 2 --p2p 2>&1) || fail "accel_drv without IOMMUs: $out"
[ "$(grep -c '^\(0000\|p2p \).*data verified' <<<"$out")" = 4 ] || fail "accel_drv without IOMMUs: $out"
[ "$(n2 vm list --json | jq '[.[0].devices[] | .ram_io > 0 and (.iova_gpa | not)] | all')" = true ] ||
  fail "without an IOMMU the I/O address of guest RAM is the window's: $(n2 vm list --json)"
n2 vm stop e3 >/dev/null
echo "test_vm_run: ok"
