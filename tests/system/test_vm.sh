#!/usr/bin/env bash
# Virtual machines (docs/vm.md; the driver model's guests: test_vm_run): bad input is refused
# with messages that say what to do; a real Linux guest under QEMU (TCG) reads and writes a
# lent NVMe through its unmodified virtio-blk driver (also eight writers and readers at once),
# and the data is on the namespace; a guest's console answers what is typed into it; the NVMe
# is hot-removed from and hot-added into the running guest; its lender dies and the guest sees
# I/O errors, not a hang, while the VM runs on; an emulated guest's address map is there for
# others to read, its devices at I/O address = guest-physical once held; a VM killed (an
# emulated one, a QEMU guest's VM process, its QEMU), or its host, returns everything it held
# (no LUT, requester-ID or IOMMU entry left). IOMMUs on.
set -euo pipefail
fabric="t-vm-$$"
vm_name=g1
. "${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}/tests/system/vm_common.sh"

# The guest: Debian's kernel and busybox, cached in the source tree's build directory (shared by
# every build flavour), downloaded once.
image=$(bash "$NTBLEND_SRC/scripts/vm-guest.sh") || fail "scripts/vm-guest.sh could not build the guest"
export NTBLEND_VM_IMAGE=$image

# smartio3 with IOMMUs on, 48 LUT entries of 4 MiB per adapter (192 MiB of window), and the
# NVMe's namespace in $work so the test can read what the guest wrote; the NVMe has two
# virtual functions (an SR-IOV capability its guests must not see).
sed -e "s|^type = nvme$|type = nvme\nbacking = $work\nvfs = 2|" -e 's/^lut_entries = .*/lut_entries = 48/' \
    -e 's/^\[defaults\]$/[defaults]\niommu = on/' \
    "$NTBLEND_SRC/examples/topologies/smartio3.ini" >"$work/topo.ini"
n up "$work/topo.ini" >/dev/null
dir=$(n status --json | jq -r .dir)
n device add nvme0 >/dev/null
base=$(held)

# ---- bad input
expect_err "start needs --host H (where the VM runs) and --mem SIZE" n vm start g0 --host b
expect_err "give a size like 256M or 1G" n vm start g0 --host b --mem lots --guest emulated
expect_err "--mem must be a multiple of 2 MiB" n vm start g0 --host b --mem 3M --guest emulated
expect_err "host b cannot give a guest 1024 MiB: it has 512 MiB of RAM" \
  n vm start g0 --host b --mem 1G --guest emulated
expect_err "no device nvme9 on fabric $fabric" n vm start g0 --host b --mem 64M --device nvme9
expect_err "accel0 is not lent out by its host: ntblend device add accel0" \
  n vm start g0 --host b --mem 64M --guest emulated --device accel0
expect_err "--guest kvm: give qemu (a Linux guest) or emulated" n vm start g0 --host b --mem 64M --guest kvm
expect_err "has no host named 'x'" n vm start g0 --host x --mem 64M
expect_err "no guest image in $work/none" n vm start g0 --host b --mem 64M --image "$work/none"
n device add accel0 >/dev/null
expect_err "accel0 is an accel: a QEMU guest is given NVMe namespaces" \
  n vm start g0 --host b --mem 64M --device accel0
n device borrow nvme0 --host c >/dev/null
expect_err "nvme0 is in use elsewhere" n vm start g0 --host b --mem 64M --guest emulated --device nvme0
n device return nvme0 --host c >/dev/null
# Guest RAM bigger than the lender's windows can cover: 256 MiB takes 64 entries of 4 MiB, when
# the guest enables Bus Master and the VM takes the device.
n vm start g0 --host b --mem 256M --guest emulated --device accel0 >/dev/null || fail "g0"
expect_err "takes 64 LUT entries of 4 MiB on host a's adapter, more than it has free" \
  n vm cfg g0 accel0 4 2 6
[ "$(n vm list --json | jq -r '.[0].devices[0].state')" = offered ] || fail "g0 took accel0 anyway"
n vm stop g0 >/dev/null
expect_err "no VM named g9" n vm stop g9
expect_err "no VM named g9" n vm attach g9 nvme0
[ "$(n vm list --json | jq length)" = 0 ] || fail "a refused VM is listed: $(n vm list)"
[ "$(held)" = "$base" ] || fail "refused VMs left something behind: $(held), was $base"

# ---- a real guest (TCG): I/O through virtio-blk onto the lent NVMe; hot-remove, hot-add; the
# lender dies
cat >"$work/guest.sh" <<'EOF'
echo "disk: $(cat /sys/block/vda/size) sectors"
printf 'ntblend-vm-test' | dd of=/dev/vda bs=512 seek=2048 count=1 conv=sync oflag=direct 2>/dev/null
dd if=/dev/urandom of=/tmp/x bs=64k count=64 2>/dev/null
dd if=/tmp/x of=/dev/vda bs=64k seek=64 oflag=direct 2>/dev/null || echo "write failed"
dd if=/dev/vda of=/tmp/y bs=64k skip=64 count=64 iflag=direct 2>/dev/null || echo "read failed"
cmp /tmp/x /tmp/y && echo "verified $(md5sum </tmp/x | cut -c1-32)"
# Eight writers, then eight readers, at once (4 KiB requests from 64 MiB on): requests come
# while completions wait, so the back end batches its interrupts (src/vm/vqcoal.h); every
# request must be answered and every block read back.
dd if=/tmp/x of=/tmp/x1 bs=4k count=256 2>/dev/null
for k in 0 1 2 3 4 5 6 7; do
  dd if=/tmp/x1 of=/dev/vda bs=4k seek=$((16384 + k * 256)) oflag=direct 2>/dev/null &
done
wait
for k in 0 1 2 3 4 5 6 7; do
  dd if=/dev/vda of=/tmp/p$k bs=4k skip=$((16384 + k * 256)) count=256 iflag=direct 2>/dev/null &
done
wait
ok=0; for k in 0 1 2 3 4 5 6 7; do cmp /tmp/x1 /tmp/p$k && ok=$((ok + 1)); rm -f /tmp/p$k; done
echo "in parallel: $ok of 8 verified"
echo "io done"
i=0; while [ -e /dev/vda ] && [ $i -lt 900 ]; do sleep 0.1; i=$((i+1)); done
[ -e /dev/vda ] || echo "hot-removed"
i=0; while [ ! -e /dev/vda ] && [ $i -lt 900 ]; do sleep 0.1; i=$((i+1)); done
dd if=/dev/vda bs=512 skip=2048 count=1 iflag=direct 2>/dev/null | grep -q ntblend-vm-test \
  && echo "hot-added, data there"
i=0
while [ $i -lt 900 ]; do
  dd if=/dev/vda of=/dev/null bs=4k count=1 skip=$((i % 64)) iflag=direct 2>/dev/null || break
  sleep 0.1; i=$((i+1))
done
echo "reads end: $i"
echo "guest still running"
EOF
out=$(n vm start g1 --host b --mem 128M --device nvme0 --run "$work/guest.sh") || fail "vm start: $out"
grep -q "VM g1: running on host b" <<<"$out" || fail "vm start: $out"
log=$dir/vm.g1.console.log
wait_for 'grep -qs "io done" "$log"' '"the guest did not finish its I/O"' 1200
grep -q "disk: 2097152 sectors" "$log" || fail "the guest did not see the 1 GiB namespace"
sum=$(sed -n 's/^verified \([0-9a-f]*\).*/\1/p' "$log" | tr -d '\r')
[ -n "$sum" ] || fail "the guest's data did not read back"
grep -q "in parallel: 8 of 8 verified" "$log" \
  || fail "eight writers and readers at once: $(grep -a "in parallel" "$log")"
# The data is on the namespace itself: the guest's blocks at the same place in its file.
img=$work/nvme0-ns1.img
[ "$(dd if="$img" bs=512 skip=2048 count=1 2>/dev/null | head -c 15)" = ntblend-vm-test ] \
  || fail "the guest's marker is not on the namespace"
[ "$(dd if="$img" bs=64k skip=64 count=64 2>/dev/null | md5sum | cut -c1-32)" = "$sum" ] \
  || fail "the guest's 4 MiB are not on the namespace"
for k in 0 1 2 3 4 5 6 7; do
  cmp -s <(dd if="$img" bs=4k skip=$((16384 + k * 256)) count=256 2>/dev/null) \
    <(dd if="$img" bs=64k skip=64 count=16 2>/dev/null) || fail "parallel writer $k's 1 MiB is not on the namespace"
done
# Which VM holds what, everywhere it is shown.
n vm list | grep -qE "g1 +b +128M +qemu +running .* nvme0 \(virtio-blk\)" || fail "vm list: $(n vm list)"
n device list | grep -q "nvme0 .* b (vm g1)" || fail "device list: $(n device list)"
n lspci --host a -s nvme0 -v | grep -q "In VM: g1 (on host b)" || fail "lspci: no VM"
[ "$(n status --json | jq -r '.vms[0].devices[0].lut_entries')" = 32 ] \
  || fail "128 MiB of guest RAM did not take 32 LUT entries: $(n vm list --json)"
expect_err "a VM named g1 runs already" n vm start g1 --host c --mem 64M --guest emulated
expect_err "nvme0 is in VM g1 already" n vm start g2 --host c --mem 64M --device nvme0
expect_err "VM g1 is a QEMU guest: its programs run under its own Linux" n vm run g1 -- true
# Hot-remove: the guest lets it go, the device goes back to its lender.
out=$(n vm detach g1 nvme0) || fail "vm detach: $out"
wait_for 'grep -q "hot-removed" "$log"' '"the guest did not see the hot-remove"'
n device list | grep -q "nvme0 .* yes  *- *$" || fail "nvme0 was not returned: $(n device list)"
out=$(n vm attach g1 nvme0) || fail "vm attach: $out"
wait_for 'grep -q "hot-added, data there" "$log"' '"the guest did not see the hot-add"' 1200
# The lender dies: the guest's reads fail (not hang), and the VM runs on.
n host kill a >/dev/null
wait_for 'grep -q "guest still running" "$log"' '"the guest hung when the lender died"' 1200
# The guest's reads fail once the lender is gone (its loop would run 900 reads otherwise).
ended=$(sed -n 's/^reads end: \([0-9]*\).*/\1/p' "$log" | tr -d '\r')
[ -n "$ended" ] && [ "$ended" -lt 900 ] || fail "the guest's reads did not fail when the lender died (reads end: ${ended:-none})"
wait_for '[ "$(n vm list --json | jq length)" = 0 ]' '"g1 did not end after its guest powered off"' 300
n host start a >/dev/null
n device add nvme0 >/dev/null
n device add accel0 >/dev/null

# ---- an emulated guest: its address map, for drivers that run in it
out=$(n vm start e1 --host c --mem 64M --guest emulated --device accel0 --device nvme0) \
  || fail "emulated: $out"
j=$(n vm list --json)
[ "$(jq -r '.[0].guest' <<<"$j")" = emulated ] || fail "vm list: $j"
[ "$(jq -r '.[0].ram_base' <<<"$j")" = $((1 << 43)) ] || fail "slot 0's RAM is not at 8 TiB: $j"
[ "$(jq -r '.[0].devices[0].guest_bdf, .[0].devices[1].guest_bdf' <<<"$j" | tr '\n' ' ')" = "00:01.0 00:02.0 " ] \
  || fail "guest BDFs: $j"
[ "$(jq -r '.[0].devices[0].guest_bars[0]' <<<"$j")" = $((1 << 40)) ] || fail "accel0's BAR0: $j"
[ "$(jq -r '.[0].devices[1].guest_bars[0]' <<<"$j")" = $(((1 << 40) + (1 << 36))) ] || fail "nvme0's BAR0: $j"
expect_err "VM e1 is an emulated guest: it has no console" n vm console e1
# MDEV-style: offered, the devices stay with their lenders until the guest enables Bus Master.
[ "$(jq -r '.[0].devices[].state' <<<"$j" | tr '\n' ' ')" = "offered offered " ] || fail "not offered: $j"
[ "$(held)" = "$base" ] || fail "an offered device is held: $(held)"
n device list | grep -q "accel0 .* yes  *- (vm e1)$" || fail "device list: $(n device list)"
# The guest's view of the config space: BAR0 at its guest address, no INTx, vendor as is.
[ $(( $(n vm cfg e1 accel0 0x10 4) & ~0xf )) = 0 ] || fail "BAR0 low: $(n vm cfg e1 accel0 0x10 4)"
[ "$(n vm cfg e1 accel0 0x14 4)" = 0x100 ] || fail "BAR0 high: $(n vm cfg e1 accel0 0x14 4)"
[ "$(n vm cfg e1 accel0 0x3d 1)" = 0 ] || fail "interrupt pin offered"
[ "$(n vm cfg e1 accel0 0 2)" = 0x10de ] || fail "vendor: $(n vm cfg e1 accel0 0 2)"
expect_err "cannot read 4 bytes at 0x3" n vm cfg e1 accel0 3 4
# SR-IOV is hidden: the NVMe has the capability at 0x100, the guest reads nothing there.
n lspci --host a -s nvme0 -vv | grep -q "SR-IOV" || fail "nvme0 has no SR-IOV capability: $(n lspci --host a -s nvme0 -vv)"
[ "$(n vm cfg e1 nvme0 0x100 4)" = 0 ] || fail "the guest sees nvme0's SR-IOV: $(n vm cfg e1 nvme0 0x100 4)"
n vm cfg e1 accel0 4 2 6 || fail "Bus Master"
j=$(n vm list --json)
[ "$(jq -r '.[0].devices[0].state, .[0].devices[0].lut_entries, .[0].devices[0].ram_io' <<<"$j" | tr '\n' ' ')" = "held 16 0 " ] \
  || fail "Bus Master did not take accel0 with its I/O addresses the guest's (IOVA = GPA): $j"
n device list | grep -q "accel0 .* exclusive c (vm e1)$" || fail "device list: $(n device list)"
[ "$(n vm cfg e1 accel0 4 2)" = 0x6 ] || fail "command: $(n vm cfg e1 accel0 4 2)"
n vm reset e1 accel0 || fail "reset"
[ "$(n vm list --json | jq -r '.[0].devices[0].state')" = offered ] || fail "a reset kept accel0"
wait_for '[ "$(held)" = "$base" ]' '"a reset device left: $(held), was $base"' 100
n vm cfg e1 accel0 4 2 6 >/dev/null && n vm cfg e1 nvme0 4 4 6 >/dev/null || fail "Bus Master again"
# A function-level reset from the guest (Device Control's FLR bit) gives the device back too.
n vm cfg e1 accel0 0x58 2 0x8000 || fail "FLR"
[ "$(n vm list --json | jq -r '.[0].devices[0].state')" = offered ] || fail "an FLR kept accel0"
[ "$(n vm cfg e1 accel0 4 2)" = 0 ] || fail "command after FLR: $(n vm cfg e1 accel0 4 2)"
n vm cfg e1 accel0 4 2 6 >/dev/null || fail "Bus Master after FLR"
[ "$(held)" != "$base" ] || fail "the emulated VM holds nothing"
# Killed: its agent returns everything.
kill -9 "$(jq -r '.[0].pid' <<<"$j")"
wait_for '[ "$(n vm list --json | jq length)" = 0 ]' '"the killed VM is still listed"' 300
wait_for '[ "$(held)" = "$base" ]' '"a killed VM left: $(held), was $base"' 300
[ -z "$(ls "$dir" | grep -E '^vm[0-9]+-[0-9]+\.ram$')" ] || fail "guest RAM files left: $(ls "$dir")"

# Its host crashes: the lenders take their devices back.
n vm start e2 --host c --mem 64M --guest emulated --device accel0 >/dev/null || fail "e2"
n vm cfg e2 accel0 4 2 6 || fail "e2: Bus Master"
n host kill c >/dev/null
wait_for '[ "$(n vm list --json | jq length)" = 0 ]' '"a VM outlived its host"' 300
n host start c >/dev/null
wait_for '[ "$(held)" = "$base" ]' '"a VM on a crashed host left: $(held), was $base"' 300
n vm start e3 --host c --mem 64M --guest emulated --device accel0 >/dev/null || fail "e3"
n vm cfg e3 accel0 4 2 6 || fail "accel0 not free again"
n vm stop e3 >/dev/null || fail "vm stop e3"
[ "$(held)" = "$base" ] || fail "a stopped VM left: $(held), was $base"

# A QEMU guest killed: its VM process (QEMU goes with it), then QEMU itself (the VM process
# sees it go and ends): everything either held is returned, no process is left.
printf 'echo idle\nwhile :; do sleep 1; done\n' >"$work/idle.sh"
for victim in pid qemu_pid; do
  out=$(n vm start g2 --host b --mem 128M --device nvme0 --run "$work/idle.sh") || fail "vm start g2: $out"
  wait_for 'grep -qs "^idle" "$dir/vm.g2.console.log"' '"g2 did not boot"' 1200
  j=$(n vm list --json)
  [ "$(held)" != "$base" ] || fail "g2 holds nothing: $j"
  vmpid=$(jq -r '.[0].pid' <<<"$j"); qpid=$(jq -r '.[0].qemu_pid' <<<"$j")
  kill -9 "$(jq -r ".[0].$victim" <<<"$j")"
  wait_for '[ "$(n vm list --json | jq length)" = 0 ]' '"g2 is still listed after its $victim was killed"' 300
  wait_for '! kill -0 $vmpid 2>/dev/null && ! kill -0 $qpid 2>/dev/null' \
    '"a process of g2 outlived its $victim being killed"' 300
  wait_for '[ "$(held)" = "$base" ]' '"g2 killed ($victim) left: $(held), was $base"' 300
  rm -f "$dir/vm.g2.console.log"
done

# The console, typed into and read live (stdin is no terminal here: its end leaves the console).
n vm start g4 --host b --mem 128M >/dev/null || fail "vm start g4"
wait_for 'grep -qs "ntblend-guest: up" "$dir/vm.g4.console.log"' '"g4 did not boot"' 1200
mkfifo "$work/con.in"
n vm console g4 <"$work/con.in" >"$work/con.out" 2>&1 &
con=$!
exec 7>"$work/con.in"
echo 'echo console-$((6 * 7))' >&7
wait_for 'grep -q "console-42" "$work/con.out"' '"the console did not answer: $(cat "$work/con.out")"' 1200
exec 7>&-
wait "$con" || fail "vm console ended with an error: $(cat "$work/con.out")"
n vm stop g4 >/dev/null || fail "vm stop g4"
[ "$(held)" = "$base" ] || fail "g4 left: $(held), was $base"
echo "test_vm: all passed"
