#!/usr/bin/env bash
# libntbnvme's multipath failover (docs/multipath.md) on two-paths.ini, through the fio
# engine: fio --verify=crc32c on b while b's primary cable is pulled twice (the short form of
# scripts/bench-multipath.sh: every I/O succeeds, every block verifies, the client failed over
# and came back); the same with the NVMe host's primary cable; then both of b's cables pulled
# during I/O: what is in flight fails with -EIO, never hangs, and a client opened once a
# cable is back does I/O again. No timing is asserted.
# Skips (77) when the engine was not built or fio is missing.
set -euo pipefail
engine="$NTBLEND_BIN/../lib/ntbnvme-fio.so"
command -v fio >/dev/null || { echo "SKIP: fio is not installed (scripts/install-deps.sh)"; exit 77; }
[ -f "$engine" ] || { echo "SKIP: the fio engine was not built (configure with fio and dpkg-dev installed)"; exit 77; }
engine=$(cd "$(dirname "$engine")" && pwd)/ntbnvme-fio.so
fail() { echo "FAIL: $*" >&2; exit 1; }

# 1. Pulls of the client's primary cable, then of the NVMe host's: nothing fails, nothing
#    verifies wrong (the script exits 1 otherwise), and each pull was a failover.
for cable in "b.ntb0 sw0" "a.ntb0 sw0"; do
  out=$("$NTBLEND_SRC/scripts/bench-multipath.sh" --bin "$NTBLEND_BIN" --fabric "t-nvmemp-$$" \
        --pulls 2 --ios 8000 --rate-iops 4000 --down-ms 200 --up-ms 200 --cable "$cable" 2>&1) ||
    fail "bench-multipath.sh with $cable pulled: $out"
  grep -q '^failed I/Os      0$' <<<"$out" || fail "$cable: failed I/Os: $out"
  grep -q '^verify errors    0$' <<<"$out" || fail "$cable: verify errors: $out"
  grep -qE '^I/Os             8000 ' <<<"$out" || fail "$cable: not every I/O was done: $out"
  grep -qE '^failovers        2 ' <<<"$out" || fail "$cable: not a failover per pull: $out"
  grep -qE 'returns to path 0: 2$' <<<"$out" || fail "$cable: did not return to path 0 after each pull: $out"
done

# 2. Both paths down: I/O fails with -EIO, never hangs (fio ends at its runtime); the
#    manager reclaims the cut-off client's queues, as on a fabric with one path, and a client
#    that opens the device once a cable is back does I/O again.
fab="t-nvmemp2-$$"
work=$(mktemp -d)
n() { ntblend --fabric "$fab" "$@"; }
trap 'n down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
n up "$NTBLEND_SRC/examples/topologies/two-paths.ini" >/dev/null
n device add nvme0 >/dev/null
n nvme manager nvme0 --host a >/dev/null
log="$work/failover.log"
job() { # name, seconds
  (cd "$work" && NTBLEND_NVME_FAILOVER_LOG=$log timeout 120 ntblend --fabric "$fab" run --host b -- \
     fio --name="$1" --ioengine=external:"$engine" --ntb_device=nvme0 --thread=1 --rw=randread \
     --bs=4k --iodepth=4 --size=4M --time_based=1 --runtime="$2" --rate_iops=1000 \
     --continue_on_error=all --output-format=json >"$work/$1.json" 2>"$work/$1.err")
}
job both 3 &
fio_pid=$!
for _ in $(seq 600); do grep -q '^running ' "$log" 2>/dev/null && break; sleep 0.05; done
grep -q '^running ' "$log" || fail "the fio client did not start: $(tail -3 "$work/both.err")"
n link down b.ntb0 sw0 >/dev/null
n link down b.ntb1 sw1 >/dev/null
sleep 0.5
n link up b.ntb1 sw1 >/dev/null
n link up b.ntb0 sw0 >/dev/null
wait "$fio_pid" || true # an exit status for the failed reads; a hang is the timeout's 124
r=$(sed -n '/^{/,$p' "$work/both.json" | jq -c '.jobs[0] | {ios: .read.total_ios, err: .total_err}') ||
  fail "fio gave no results: $(tail -3 "$work/both.err")"
[ "$(jq .err <<<"$r")" -gt 0 ] || fail "both paths down: no I/O failed: $r"
grep -q 'Input/output error\|no path to the device is up' "$work/both.err" ||
  fail "both paths down: not -EIO: $(head -3 "$work/both.err")"
grep -q '^down ' "$log" || fail "no 'no path' state in the failover log: $(cat "$log")"
job again 1 || fail "a new client after the outage: $(tail -3 "$work/again.err")"
r2=$(sed -n '/^{/,$p' "$work/again.json" | jq -c '.jobs[0] | {ios: .read.total_ios, err: .total_err}')
[ "$(jq .err <<<"$r2")" = 0 ] && [ "$(jq .ios <<<"$r2")" -gt 0 ] || fail "a new client after the outage: $r2"
echo "PASS: two pulls each of b's and a's primary cables with every block verified; both paths down failed $(jq .err <<<"$r") reads with -EIO, and a new client read again"
