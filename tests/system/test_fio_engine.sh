#!/usr/bin/env bash
# The fio engine (lib/ntbnvme-fio.so) on a borrowed NVMe: the multi-job verify of
# examples/fio/verify.fio passes (and a trimmed range does not verify: reads reach the device),
# a short random read reports IOPS and no errors, two fio processes on two hosts verify at once
# as clients of the NVMe's manager, and bad options fail with a clear message.
# Skips (77) when the engine was not built or fio is missing.
set -euo pipefail
. "${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}/tests/lib/fixture.sh"
fx_init fio
engine="$NTBLEND_BIN/../lib/ntbnvme-fio.so"
command -v fio >/dev/null || { echo "SKIP: fio is not installed (scripts/install-deps.sh)"; exit 77; }
[ -f "$engine" ] || { echo "SKIP: the fio engine was not built (configure with fio and dpkg-dev installed; see the cmake output)"; exit 77; }
engine=$(cd "$(dirname "$engine")" && pwd)/ntbnvme-fio.so
export NTBLEND_FIO_ENGINE=$engine

cd "$work" # fio may leave state files in the working directory
on_b() { n run --host b -- fio "$@"; }

n up "$NTBLEND_SRC/examples/topologies/smartio3.ini" >/dev/null
n device add nvme0 >/dev/null

# Four threads, each its own queue pair and 16 MiB, write then read back with crc32c.
out=$(on_b --output-format=json "$NTBLEND_SRC/examples/fio/verify.fio") || fail "verify job failed: $out"
j=$(jq -c '.jobs[0] | {error, w: .write.io_bytes, r: .read.io_bytes}' <<<"$out")
[ "$j" = '{"error":0,"w":67108864,"r":67108864}' ] || fail "verify job: $j"

# Verification that can fail: write a range, trim it, then verify it (reads zeroes).
cat >neg.fio <<'JOB'
[global]
ioengine=external:${NTBLEND_FIO_ENGINE}
ntb_device=nvme0
bs=4k
size=1M
offset=256M
iodepth=4
verify=crc32c
verify_state_save=0
[write]
rw=write
fsync=16
do_verify=0
[check]
stonewall
rw=read
verify_only=1
[trim]
stonewall
rw=trim
verify=0
[recheck]
stonewall
rw=read
verify_only=1
JOB
set +e; out=$(on_b neg.fio 2>&1); rc=$?; set -e
[ $rc -ne 0 ] || fail "a trimmed range verified: $out"
grep -q "bad magic header" <<<"$out" || fail "trimmed range: no verify error: $out"
grep -q "^check: .*err= 0" <<<"$out" || fail "written range did not verify: $out"

# A short random read at queue depth 8.
out=$(on_b --output-format=json --name=rr --ioengine=external:"$engine" --ntb_device=nvme0 \
        --rw=randread --bs=4k --iodepth=8 --size=64M --time_based --runtime=1) \
  || fail "randread failed: $out"
jq -e '.jobs[0].error == 0 and .jobs[0].read.iops > 0 and .jobs[0].read.io_bytes > 0' \
  <<<"$out" >/dev/null || fail "randread: $(jq -c '.jobs[0] | {error, iops: .read.iops}' <<<"$out")"

# Two fio processes at once (on b, and on c), each a client of the manager with its own queue
# pair, each writing and verifying a range of its own with crc32c.
n nvme manager nvme0 --host a >/dev/null
for h in b c; do
  off=$([ $h = b ] && echo 512M || echo 640M)
  n run --host $h -- fio --output-format=json --name=$h --ioengine=external:"$engine" \
    --ntb_device=nvme0 --rw=randwrite --bs=4k --size=16M --offset=$off --iodepth=8 \
    --verify=crc32c --verify_state_save=0 >"$work/$h.json" 2>"$work/$h.err" &
done
for p in $(jobs -p); do wait "$p" || fail "a client's verify failed: $(cat "$work"/*.err)"; done
for h in b c; do
  j=$(sed -n '/^{/,$p' "$work/$h.json" | jq -c '.jobs[0] | {error, w: .write.io_bytes, r: .read.io_bytes}')
  [ "$j" = '{"error":0,"w":16777216,"r":16777216}' ] || fail "client on $h: $j"
done
n nvme stop nvme0 >/dev/null

# Bad options fail before any I/O, saying what to do.
bad() {
  local want=$1; shift
  set +e; out=$(on_b --name=bad --ioengine=external:"$engine" --rw=randread --size=1M "$@" 2>&1)
  rc=$?; set -e
  [ $rc -ne 0 ] || fail "should have failed: $*"
  grep -qF -- "$want" <<<"$out" || fail "$*: no \"$want\" in: $out"
}
bad "no device 'nvme9' in this fabric" --ntb_device=nvme9
bad "set ntb_device=NAME"
bad "not a multiple of the block size" --ntb_device=nvme0 --bs=512
bad "no active namespace 7" --ntb_device=nvme0 --ntb_nsid=7
bad "more than one command of nvme0 moves" --ntb_device=nvme0 --rw=randwrite --bs=1M
echo "PASS"
