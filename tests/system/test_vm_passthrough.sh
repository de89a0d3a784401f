#!/usr/bin/env bash
# A lent NVMe passed through to a real Linux guest (docs/vm.md "Pass-through"): the guest's own,
# unmodified nvme driver probes it through QEMU's x-pci-proxy-dev and this VM process, sees no
# MSI-X, and fio in the guest writes and reads it back with --verify; the data lands on the
# namespace itself; detaching the device returns it with nothing left mapped (no LUT,
# requester-ID or IOMMU entry), attaching it again gives it back to the guest's driver, and the
# VM's end returns it too; when the lender dies the guest's reads fail and the VM runs on. Bad input is refused with what to do.
# Under TCG the guest's driver polls: admin commands complete by their 1 s timeout's poll, fio
# uses polled queues (io_uring --hipri). With NTBLEND_TEST_ACCEL=kvm the guest runs under KVM and its
# driver takes interrupts (the NVMe's MSI-X routed into the guest's INTx); where KVM cannot run
# a guest that run says why and is skipped (77).
set -euo pipefail
accel=${NTBLEND_TEST_ACCEL:-tcg}
fabric="t-vmpass-$accel-$$"
vm_name=p1
. "${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}/tests/system/vm_common.sh"

skip() { echo "SKIP: KVM cannot run a guest here: $*"; exit 77; }
if [ "$accel" = kvm ]; then
  [ -r /dev/kvm ] && [ -w /dev/kvm ] || skip "no /dev/kvm to open"
  grep -qwE 'vmx|svm' /proc/cpuinfo || skip "the CPU has no vmx or svm flag (a VM without nested virtualisation)"
fi
image=$(bash "$NTBLEND_SRC/scripts/vm-guest.sh" --fio) || fail "scripts/vm-guest.sh --fio could not build the guest"
export NTBLEND_VM_IMAGE=$image
export NTBLEND_VM_ACCEL=$accel
engine="--ioengine=io_uring --hipri"
if [ "$accel" = kvm ]; then
  # Does KVM run a guest here? Quickly, and never longer than a minute: a nested KVM may open
  # /dev/kvm and then hang the guest after the BIOS.
  timeout -k 5 60 qemu-system-x86_64 -machine q35,accel=kvm -cpu host -m 128M -display none \
    -nodefaults -no-user-config -no-reboot -serial file:"$work/kvm.log" -kernel "$image/vmlinuz" \
    -initrd "$image/initramfs.cpio.gz" -append "console=ttyS0 quiet panic=-1" \
    -fw_cfg name=opt/ntblend/run,string=true >/dev/null 2>&1 || true
  grep -q "ntblend-guest: up" "$work/kvm.log" 2>/dev/null ||
    skip "a probe guest did not boot within 60 s under KVM ($(tail -c 200 "$work/kvm.log" 2>/dev/null | tr -d '\r' | tail -n1))"
  engine="--ioengine=libaio --iodepth=4" # interrupts: completions come by the guest's INTx
fi

# smartio3 with host a's IOMMU on (the NVMe's lender: it puts guest-physical addresses on the
# NVMe's bus) and host c's off; the namespace in $work so the test can read what the guest wrote.
sed -e "s|^type = nvme$|type = nvme\nbacking = $work|" \
    -e 's/^\[host a\]$/[host a]\niommu = on/' \
    "$NTBLEND_SRC/examples/topologies/smartio3.ini" >"$work/topo.ini"
n up "$work/topo.ini" >/dev/null
dir=$(n status --json | jq -r .dir)
n device add nvme0 >/dev/null
n device add accel1 >/dev/null
base=$(held)

# ---- bad input
expect_err "--pass-through is for a QEMU guest" \
  n vm start p0 --host b --mem 64M --guest emulated --device nvme0 --pass-through
expect_err "which takes its lender's IOMMU: host c has it off (iommu = on in [host c]" \
  n vm start p0 --host b --mem 64M --device accel1 --pass-through
[ "$(n vm list --json | jq length)" = 0 ] || fail "a refused VM is listed: $(n vm list)"
[ "$(held)" = "$base" ] || fail "refused VMs left something behind: $(held), was $base"

# ---- the guest's nvme driver on the lent NVMe
cat >"$work/guest.sh" <<'EOF'
i=0; while [ ! -b /dev/nvme0n1 ] && [ $i -lt 3000 ]; do sleep 0.1; i=$((i+1)); done
[ -b /dev/nvme0n1 ] || { echo "no namespace"; dmesg | grep -i nvme; exit 1; }
d=$(ls /sys/bus/pci/drivers/nvme | grep ':')
echo "driver: $(basename "$(readlink /sys/bus/pci/devices/$d/driver)") at $d"
echo "size: $(cat /sys/block/nvme0n1/size)"
echo "msix: $(ls /sys/bus/pci/devices/$d/msi_irqs 2>/dev/null | wc -l)"
fio --name=v --filename=/dev/nvme0n1 ENGINE --direct=1 --rw=randwrite \
    --bs=4k --offset=64M --size=2M --verify=crc32c --do_verify=1 --output-format=terse \
    --terse-version=3 >/tmp/fio.out 2>&1 && echo "fio: $(cut -d';' -f5 /tmp/fio.out) errors" \
  || { echo "fio failed"; cat /tmp/fio.out; }
# Not polled: this write completes when its 1 s timeout polls the queue.
printf 'ntblend-pass-test' | dd of=/dev/nvme0n1 bs=4k seek=256 count=1 conv=sync oflag=direct \
  2>/dev/null && echo "marker written"
echo "io done"
i=0; while [ -e /dev/nvme0n1 ] && [ $i -lt 3000 ]; do sleep 0.1; i=$((i+1)); done
[ -e /dev/nvme0n1 ] || echo "hot-removed"
i=0; while [ ! -b /dev/nvme0n1 ] && [ $i -lt 3000 ]; do sleep 0.1; i=$((i+1)); done
dd if=/dev/nvme0n1 bs=4k skip=256 count=1 iflag=direct 2>/dev/null | grep -q ntblend-pass-test \
  && echo "hot-added, data there"
EOF
sed -i "s/ENGINE/$engine/" "$work/guest.sh"
out=$(n vm start p1 --host b --mem 256M --device nvme0 --pass-through --initrd initramfs-fio.cpio.gz \
      --run "$work/guest.sh") || fail "vm start: $out"
log=$dir/vm.p1.console.log
n vm list | grep -qE "p1 +b +256M +qemu +running .* nvme0 \(pass-through\)" || fail "vm list: $(n vm list)"
wait_for 'grep -qs "io done\|no namespace\|Power down\|Kernel panic" "$log"' '"the guest did not finish its I/O"' 4000
grep -q "driver: nvme at 0000:" "$log" || fail "the guest's nvme driver did not take the device"
grep -q "size: 2097152" "$log" || fail "the guest did not see the 1 GiB namespace"
grep -q "msix: 0" "$log" || fail "the guest was offered MSI or MSI-X"
grep -q "fio: 0 errors" "$log" || fail "fio's write and verify failed"
grep -q "marker written" "$log" || fail "the marker write failed"
# The data is on the namespace itself, where the guest put it.
[ "$(dd if="$work/nvme0-ns1.img" bs=4k skip=256 count=1 2>/dev/null | head -c 17)" = ntblend-pass-test ] \
  || fail "the guest's marker is not on the namespace"
# Held by the VM: its RAM mapped for the NVMe at I/O address 0 (= guest-physical 0).
j=$(n vm list --json)
[ "$(jq -r '.[0].devices[0].state, .[0].devices[0].ram_io' <<<"$j" | tr '\n' ' ')" = "held 0 " ] \
  || fail "nvme0 is not held with IOVA = GPA: $j"
n device list | grep -q "nvme0 .* b (vm p1)" || fail "device list: $(n device list)"
# The guest's view of its config space: MSI-X skipped in the capability list, INTA, BAR0 a
# 32-bit memory BAR where the guest placed it (as the record says).
[ "$(n vm cfg p1 nvme0 0x34 1)" = 0x50 ] || fail "capabilities: $(n vm cfg p1 nvme0 0x34 1)"
[ "$(n vm cfg p1 nvme0 0x3d 1)" = 0x1 ] || fail "interrupt pin: $(n vm cfg p1 nvme0 0x3d 1)"
bar0=$(n vm cfg p1 nvme0 0x10 4)
[ $((bar0 & 0xf)) = 0 ] && [ $((bar0)) != 0 ] && [ "$(n vm cfg p1 nvme0 0x14 4)" = 0 ] || fail "BAR0: $bar0"
[ "$(jq -r '.[0].devices[0].guest_bars[0]' <<<"$j")" = $((bar0)) ] || fail "the record's BAR0: $j"
# Detach: the guest lets it go (a hot-remove), the device goes back with nothing left mapped.
out=$(n vm detach p1 nvme0) || fail "vm detach: $out"
wait_for 'grep -q "hot-removed" "$log"' '"the guest did not see the hot-remove"' 1200
n device list | grep -q "nvme0 .* yes  *- *$" || fail "nvme0 was not returned: $(n device list)"
[ "$(held)" = "$base" ] || fail "the detach left something mapped: $(held), was $base"
# Hot-add: QEMU takes its end of the proxy's socket through its monitor; the guest's driver
# probes the device again and reads back what it wrote before.
out=$(n vm attach p1 nvme0) || fail "vm attach: $out"
wait_for 'grep -q "hot-added, data there" "$log"' '"the guest did not see the hot-add"' 3000
wait_for '[ "$(n vm list --json | jq length)" = 0 ]' '"p1 did not end after its guest powered off"' 600
n device list | grep -q "nvme0 .* yes  *- *$" || fail "nvme0 was not returned: $(n device list)"
[ "$(held)" = "$base" ] || fail "the guest's power-off left something mapped: $(held), was $base"

# ---- the VM's end returns it too
cat >"$work/guest2.sh" <<'EOF'
i=0; while [ ! -b /dev/nvme0n1 ] && [ $i -lt 3000 ]; do sleep 0.1; i=$((i+1)); done
dd if=/dev/nvme0n1 of=/dev/null bs=4k count=1 iflag=direct 2>/dev/null && echo "probed"
sleep 600
EOF
vm_name=p2 log=$dir/vm.p2.console.log
n vm start p2 --host b --mem 256M --device nvme0 --pass-through --run "$work/guest2.sh" >/dev/null \
  || fail "second start"
wait_for 'grep -qs "probed" "$log"' '"the second guest did not probe nvme0"' 4000
[ "$(n vm list --json | jq -r '.[0].devices[0].state')" = held ] || fail "not held: $(n vm list --json)"
n vm stop p2 >/dev/null
n device list | grep -q "nvme0 .* yes  *- *$" || fail "nvme0 was not returned: $(n device list)"
[ "$(held)" = "$base" ] || fail "the VM's end left something mapped: $(held), was $base"

# ---- the lender dies: the guest's driver finds its controller gone (its registers read all
# ones through the NTB) and its reads fail, not hang; the VM runs on
cat >"$work/guest3.sh" <<'EOF'
i=0; while [ ! -b /dev/nvme0n1 ] && [ $i -lt 3000 ]; do sleep 0.1; i=$((i+1)); done
[ -b /dev/nvme0n1 ] && echo "probed"
i=0
while [ $i -lt 900 ] && dd if=/dev/nvme0n1 of=/dev/null bs=4k count=1 iflag=direct 2>/dev/null; do
  i=$((i+1))
done
echo "reads end: $i"
echo "guest still running"
sleep 600
EOF
vm_name=p3 log=$dir/vm.p3.console.log
n vm start p3 --host b --mem 256M --device nvme0 --pass-through --run "$work/guest3.sh" >/dev/null \
  || fail "third start"
wait_for 'grep -qs "probed" "$log"' '"the third guest did not probe nvme0"' 4000
n host kill a >/dev/null
wait_for 'grep -q "guest still running" "$log"' '"the guest hung when the lender died"' 1800
n vm list | grep -qE "p3 +b +256M +qemu +running" || fail "the VM did not run on: $(n vm list)"
n vm stop p3 >/dev/null
echo "PASS: the guest's nvme driver drove the lent NVMe; detach and stop returned it; its lender's death did not hang it"
