#!/usr/bin/env bash
# Device Lending with an NVMe: the same driver binary (nvme_drv: the driver model and
# libntbnvme's queue-pair core, nothing else) drives host a's NVMe as a local function and,
# lent to c, as a function of c's tree — what it reads back is byte for byte the same, both
# ways; fio (the ntbnvme engine, ntb_device=pci:) verifies on the lent NVMe, also with a
# streaming DMA mapping around every I/O (ntb_map=per-io); the FUSE export
# of it takes dd and gives the bytes back; a reclaim during I/O reaches the driver's remove(),
# fails the I/O without a hang and the driver exits cleanly; a borrower that crashes loses
# the NVMe to its lender, which resets it, drives it, and lends it again; a driver started
# before the NVMe is lent to its host serves it when it is hot-added.
set -euo pipefail
. "${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}/tests/lib/fixture.sh"
fx_init lendnvme
mnt="$work/mnt"
fx_cleanup 'fusermount3 -u -z "$mnt"'
# The checksum line without the function's name, which differs between the hosts' trees.
sum() { sed -n 's/^0000:[0-9a-f:.]*: \(namespace .*fnv1a64 .*\)$/\1/p' <<<"$1"; }

# Bad options are refused before anything is bound; --help says how to use it.
nvme_drv --help | grep -q "^usage: ntblend run --host H -- nvme_drv" || fail "nvme_drv --help"
for bad in "--range 5" "--range 0:0" "--nsid 0" "--no-check" "--seconds 0" "extra"; do
  set +e; out=$(nvme_drv $bad 2>&1); rc=$?; set -e
  [ $rc -eq 2 ] || fail "nvme_drv $bad: exit $rc: $out"
done

n up "$NTBLEND_SRC/examples/topologies/smartio3.ini" >/dev/null

# Local: a's own NVMe. The pattern written and read back, the data dumped.
out=$(n run --host a -- nvme_drv --range 30000:300 --seed 7 --dump "$work/a") || fail "local: $out"
grep -q "^bound 1 NVMe function(s)$" <<<"$out" || fail "local bind: $out"
grep -Eq "^0000:02:00.0 8086:2701 NVMe: model '.+', .* 1 namespace\(s\)$" <<<"$out" || fail "local: $out"
grep -q "^0000:02:00.0   namespace 1: 262144 blocks of 4096 bytes" <<<"$out" || fail "local ns: $out"
grep -q "pattern written, 1228800 bytes read back, fnv1a64 [0-9a-f]*, data verified$" <<<"$out" \
  || fail "local check: $out"
local_sum=$(sum "$out")

# Lent to c: in both hosts' trees, the same binary reads what the lender wrote.
n device lend nvme0 --to c >/dev/null
n lspci --host c | grep -q "^80:00.0 Non-Volatile memory controller" || fail "not in c's tree: $(n lspci --host c)"
n lspci --host a | grep -q "^02:00.0 Non-Volatile memory controller" || fail "not in a's tree: $(n lspci --host a)"
out=$(n run --host c -- nvme_drv --range 30000:300 --seed 7 --no-write --dump "$work/c") || fail "lent: $out"
grep -Eq "^0000:80:00.0 8086:2701 NVMe: model '.+'" <<<"$out" || fail "lent: $out"
[ "$(sum "$out" | sed 's/: 1228800 bytes/: pattern written, 1228800 bytes/')" = "$local_sum" ] \
  || fail "lent read-back differs: '$(sum "$out")' vs '$local_sum'"
cmp "$work/a.02:00.0.bin" "$work/c.80:00.0.bin" || fail "local and lent data differ"

# ... and the other way: written through the borrower, read back on the lender. The same
# binary with the same options gives the same output on both (the names aside).
out_c=$(n run --host c -- nvme_drv --range 40000:64 --seed 99 --dump "$work/c2") || fail "lent write: $out_c"
out_c2=$(n run --host c -- nvme_drv --range 40000:64 --seed 99) || fail "lent again: $out_c2"
[ "$(sed 's/0000:80:00.0/BDF/' <<<"$out_c")" = "$(sed 's/0000:80:00.0/BDF/' <<<"$out_c2")" ] \
  || fail "two runs on the lent NVMe differ"

# The lender cannot bind what it has lent out.
set +e; out=$(n run --host a -- nvme_drv 2>&1); rc=$?; set -e
[ $rc -eq 3 ] || fail "the lender's driver bound a lent function (exit $rc): $out"
grep -q "0000:02:00.0 (nvme0): cannot bind it" <<<"$out" || fail "lender bind: $out"

# A function that is not there is refused with a message that names those that are.
if command -v ntblend-nvmefs >/dev/null; then
  set +e; out=$(n run --host c -- ntblend-nvmefs pci:99:00.0 "$work" 2>&1); rc=$?; set -e
  [ $rc -eq 1 ] || fail "nvmefs on a missing function: exit $rc: $out"
  grep -q "no NVMe function 0000:99:00.0 in this host's PCIe tree .*bound: 0000:80:00.0" <<<"$out" \
    || fail "missing function: $out"
fi

# fio through the engine on the lent NVMe (pci:80:00.0), verified.
if [ -f "$NTBLEND_BIN/../lib/ntbnvme-fio.so" ] && command -v fio >/dev/null; then
  out=$(NTBLEND_FIO_ENGINE="$NTBLEND_BIN/../lib/ntbnvme-fio.so" NTB_PCI=80:00.0 \
        n run --host c -- fio "$NTBLEND_SRC/examples/fio/lent-verify.fio" 2>&1) \
    || fail "fio verify on the lent NVMe: $out"
  grep -q "err= 0" <<<"$out" || fail "fio: $out"
  grep -q "READ: .*io=64.0MiB" <<<"$out" || fail "fio read back less than it wrote: $out"
  # The same with a streaming DMA mapping around every I/O (ntb_map=per-io), on the lent and
  # on the local NVMe; and the option refused where it cannot work.
  sed 's/^\[verify\]$/ntb_map=per-io\nnumjobs=2\nsize=4M\n[verify]/' \
    "$NTBLEND_SRC/examples/fio/lent-verify.fio" >"$work/map.fio"
  out=$(NTBLEND_FIO_ENGINE="$NTBLEND_BIN/../lib/ntbnvme-fio.so" NTB_PCI=80:00.0 \
        n run --host c -- fio "$work/map.fio" 2>&1) || fail "fio per-io on the lent NVMe: $out"
  grep -q "err= 0" <<<"$out" || fail "fio per-io: $out"
  grep -q "READ: .*io=8192KiB" <<<"$out" || fail "fio per-io read back less than it wrote: $out"
  sed 's/^ntb_map=per-io$/ntb_map=per-io\nntb_buf=device/' "$work/map.fio" >"$work/map-bad.fio"
  set +e; out=$(NTBLEND_FIO_ENGINE="$NTBLEND_BIN/../lib/ntbnvme-fio.so" NTB_PCI=80:00.0 \
        n run --host c -- fio "$work/map-bad.fio" 2>&1); rc=$?; set -e
  [ $rc -ne 0 ] || fail "ntb_map=per-io with ntb_buf=device ran: $out"
  grep -q "ntb_map=per-io takes its buffers from host RAM" <<<"$out" || fail "per-io refusal: $out"
else
  echo "note: no fio engine in this build: fio on the lent NVMe not checked"
fi

# FUSE on the lent NVMe: dd in, dd out, cmp.
if command -v ntblend-nvmefs >/dev/null && command -v fusermount3 >/dev/null &&
   { exec 3<>/dev/fuse; } 2>/dev/null; then
  exec 3>&-
  mkdir "$mnt"
  n nvme --host c mount --daemon pci:80:00.0 "$mnt" 2>"$work/fs.log" || fail "mount: $(cat "$work/fs.log")"
  grep -q "^device: pci:80:00.0$" "$mnt/info" || fail "info: $(cat "$mnt/info")"
  head -c 3M /dev/urandom >"$work/rand"
  dd if="$work/rand" of="$mnt/ns1" bs=1M seek=5 conv=notrunc status=none
  dd if="$mnt/ns1" of="$work/back" bs=1M skip=5 count=3 status=none
  cmp "$work/rand" "$work/back" || fail "FUSE on the lent NVMe gave back other bytes"
  # Reclaimed under the mount: the file system sees the removal and ends itself.
  n device reclaim nvme0 >/dev/null
  wait_for '! grep -q " $mnt fuse" /proc/self/mounts' "still mounted after the reclaim"
  grep -q "pci:80:00.0 was removed (hot-unplugged): unmounting" "$work/fs.log" \
    || fail "nvmefs did not see the removal: $(cat "$work/fs.log")"
  # What went in through the borrower is on the lender's NVMe.
  out=$(n run --host a -- nvme_drv --range 40000:64 --seed 99 --no-write 2>&1) \
    || fail "the lender does not read back what the borrower wrote: $out"
  n device lend nvme0 --to c >/dev/null
else
  echo "note: FUSE is not usable here: the FUSE export on the lent NVMe not checked"
fi

# Reclaim during I/O: remove() runs, the I/O fails (no hang, no wrong data), a clean exit.
ntblend --fabric "$fabric" run --host c -- nvme_drv --loop --range 0:4096 >"$work/loop" 2>&1 &
loop=$!
wait_for 'grep -q "namespace 1:" "$work/loop"' "the driver did not come up: $(cat "$work/loop")"
sleep 0.3 # some I/O first
n device reclaim nvme0 >/dev/null
wait_for '! kill -0 $loop 2>/dev/null' "the driver still runs after the reclaim: $(cat "$work/loop")" 400
rc=0; wait $loop || rc=$?
[ $rc -eq 0 ] || fail "the driver exited with $rc after the reclaim: $(cat "$work/loop")"
grep -q "^0000:80:00.0: removed (hot-unplugged)$" "$work/loop" || fail "no remove(): $(cat "$work/loop")"
grep -Eq "^0000:80:00.0: I/O error after [0-9]+ I/Os: .*; the function was removed$" "$work/loop" \
  || fail "the I/O error was not reported: $(cat "$work/loop")"
grep -q "DATA\|differs" "$work/loop" && fail "wrong data: $(cat "$work/loop")"
grep -q "^loop: [0-9]* I/Os done, 0 function(s) failed while present$" "$work/loop" \
  || fail "loop summary: $(cat "$work/loop")"

# A borrower that crashes loses the NVMe: the lender takes it back and resets it; it drives
# it, and lends it again.
n device lend nvme0 --to c >/dev/null
ntblend --fabric "$fabric" run --host c -- nvme_drv --range 0:16 --stay >"$work/stay" 2>&1 &
disown $! # the crash of its host ends it
wait_for 'grep -q "data verified" "$work/stay"' "the driver did not check: $(cat "$work/stay")"
n host kill c >/dev/null
wait_for '! n device list | grep -q "nvme0 .*exclusive"' "nvme0 not reclaimed after c crashed: $(n device list)"
out=$(n run --host a -- nvme_drv --range 30000:300 --seed 7 --no-write) || fail "local after the crash: $out"
[ "$(sum "$out" | sed 's/: 1228800 bytes/: pattern written, 1228800 bytes/')" = "$local_sum" ] \
  || fail "after the crash the lender reads other data: $out"
n device lend nvme0 --to b >/dev/null
out=$(n run --host b -- nvme_drv --range 30000:300 --seed 7 --no-write) || fail "lent to b: $out"
grep -q "^0000:80:00.0: .*data verified$" <<<"$out" || fail "lent to b: $out"
n host start c >/dev/null

# Hot-add: a driver that started with no NVMe serves the one lent to its host later.
n device reclaim nvme0 >/dev/null
ntblend --fabric "$fabric" run --host c -- nvme_drv --range 0:16 --stay >"$work/hot" 2>&1 &
hot=$!
wait_for 'grep -q "^bound 0 NVMe function(s): waiting for one$" "$work/hot"' "no wait: $(cat "$work/hot")"
n device lend nvme0 --to c >/dev/null
wait_for 'grep -q "^0000:80:00.0: .*data verified$" "$work/hot"' "the hot-added NVMe was not served: $(cat "$work/hot")"
n device reclaim nvme0 >/dev/null
wait_for '! kill -0 $hot 2>/dev/null' "the driver still runs after the reclaim: $(cat "$work/hot")" 400
rc=0; wait $hot || rc=$?
[ $rc -eq 0 ] || fail "exit $rc after the hot-added NVMe went: $(cat "$work/hot")"
grep -q "^all functions removed$" "$work/hot" || fail "hot-add: $(cat "$work/hot")"
echo "ok"
