#!/usr/bin/env bash
# Multipath failover of libntbnvme under fio (smartio-tocs-2021 §6.3, docs/multipath.md):
# boots examples/topologies/two-paths.ini (hosts a, b, c, each with two adapters on two
# switches; a lends nvme0), starts nvme0's manager on a, and runs fio on b through the ntbnvme
# engine: 4 KiB random writes of as many blocks as half of --ios, then every block read back
# and checked (verify=crc32c). While it runs, b's primary cable (b.ntb0 - sw0) is pulled and
# put back PULLS times. Prints the I/Os done, the failed ones, the verify errors, the
# failovers and returns to path 0 the library made, and the failover time (from the pull to
# the first completion on the other path: min, p50, p90, max over the pulls). Exit status 0
# when no I/O failed, no block verified wrong and every pull was ridden out; 1 otherwise, 2
# on bad usage.
#
# Usage: scripts/bench-multipath.sh [--pulls N] [--ios N] [--down-ms MS] [--up-ms MS]
#                                   [--cable "END END"] [--qd N] [--rate-iops N]
#                                   [--fabric NAME]
#                                   [--json FILE] [--bin DIR]
#   --pulls N       cable pulls (default 10)
#   --ios N         I/Os in all, half writes and half verifying reads (default 400000), in
#                   as many write-then-verify passes (fio loops) over at most 32768 blocks as
#                   it takes
#   --down-ms MS    how long the cable stays out (default 150)
#   --up-ms MS      how long it stays in before the next pull (default 150)
#   --cable "A B"   the cable pulled (default "b.ntb0 sw0": the client's primary; "a.ntb0
#                   sw0" pulls the NVMe host's)
#   --qd N          fio's iodepth (default 16)
#   --rate-iops N   at most N I/Os a second (default: as fast as it goes), so that a short run
#                   still lasts through its pulls
#   --fabric NAME   the fabric's name (default mp-bench-PID); it is brought down at the end
#   --json FILE     the figures as JSON too
#   --bin DIR       ntblend's build/bin (default $NTBLEND_BIN, else build/bin of this tree)
set -uo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)
me=bench-multipath
usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "$me: $*" >&2; exit 2; }

pulls=10 ios=400000 down_ms=150 up_ms=150 cable="b.ntb0 sw0" qd=16 rate=0 fab="mp-bench-$$" json=""
bin=${NTBLEND_BIN:-$src/build/bin}
num() { [[ $2 =~ ^[0-9]+$ ]] || die "$1 takes a whole number, not '$2'"; }
while [ $# -gt 0 ]; do
  case $1 in
    --pulls) num "$1" "${2-}"; pulls=$2; shift ;;
    --ios) num "$1" "${2-}"; ios=$2; shift ;;
    --down-ms) num "$1" "${2-}"; down_ms=$2; shift ;;
    --up-ms) num "$1" "${2-}"; up_ms=$2; shift ;;
    --cable) [ -n "${2-}" ] || die "--cable takes the cable's two ends, e.g. \"b.ntb0 sw0\""; cable=$2; shift ;;
    --qd) num "$1" "${2-}"; qd=$2; shift ;;
    --rate-iops) num "$1" "${2-}"; rate=$2; shift ;;
    --fabric) [ -n "${2-}" ] || die "--fabric takes a name"; fab=$2; shift ;;
    --json) [ -n "${2-}" ] || die "--json takes a file"; json=$2; shift ;;
    --bin) [ -n "${2-}" ] || die "--bin takes a directory"; bin=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done
[ "$ios" -ge 2 ] || die "--ios is at least 2"
[ "$qd" -ge 1 ] && [ "$qd" -le 64 ] || die "--qd is 1..64"
[ "$down_ms" -ge 1 ] || die "--down-ms is at least 1"
command -v fio >/dev/null || die "fio is not installed (scripts/install-deps.sh)"
command -v jq >/dev/null || die "jq is not installed (scripts/install-deps.sh)"
[ -x "$bin/ntblend" ] || die "$bin/ntblend is missing: build first (scripts/build.sh)"
engine=$(cd "$bin/../lib" 2>/dev/null && pwd)/ntbnvme-fio.so
[ -f "$engine" ] || die "the fio engine ($engine) was not built (configure with fio and dpkg-dev installed)"
read -r end_a end_b extra <<<"$cable"
[ -n "${end_b:-}" ] && [ -z "${extra:-}" ] || die "--cable takes two ends, e.g. \"b.ntb0 sw0\""

export PATH="$bin:$PATH" NTBLEND_FIO_ENGINE=$engine
n() { ntblend --fabric "$fab" "$@"; }
work=$(mktemp -d)
fio_pid=""
cleanup() {
  [ -n "$fio_pid" ] && kill "$fio_pid" 2>/dev/null && wait "$fio_pid" 2>/dev/null
  n down >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

n up "$src/examples/topologies/two-paths.ini" >"$work/up.log" 2>&1 || die "ntblend up failed: $(tail -1 "$work/up.log")"
n device add nvme0 >/dev/null || die "ntblend device add nvme0 failed"
n nvme manager nvme0 --host a >"$work/mgr.out" 2>&1 || die "the manager did not start: $(tail -1 "$work/mgr.out")"
n link down $cable >/dev/null 2>&1 && n link up $cable >/dev/null 2>&1 || die "no cable '$cable' in two-paths.ini (ntblend status lists them)"

half=$(( (ios + 1) / 2 ))
loops=$(( (half + 32767) / 32768 ))
size=$(( (half + loops - 1) / loops * 4 ))k
log="$work/failover.log"
(cd "$work" && NTBLEND_NVME_FAILOVER_LOG=$log exec ntblend --fabric "$fab" run --host b -- \
   fio --name=multipath --ioengine=external:"$engine" --ntb_device=nvme0 --thread=1 \
   --rw=randwrite --bs=4k --iodepth="$qd" --size="$size" --loops="$loops" --verify=crc32c --do_verify=1 \
   --verify_fatal=0 --verify_state_save=0 --continue_on_error=all --output-format=json \
   $([ "$rate" -gt 0 ] && echo "--rate_iops=$rate") \
   >"$work/fio.json" 2>"$work/fio.err") &
fio_pid=$!

# The pulls start once the client's I/O runs (its queue pair's first completion).
for _ in $(seq 600); do
  grep -q '^running ' "$log" 2>/dev/null && break
  kill -0 "$fio_pid" 2>/dev/null || break
  sleep 0.05
done
sleep 0.1
pulled=0
declare -a t_down
for ((i = 0; i < pulls; i++)); do
  kill -0 "$fio_pid" 2>/dev/null || break
  t_down[i]=$(date +%s%N)
  n link down $cable >/dev/null || die "ntblend link down $cable failed"
  sleep "$(awk -v m="$down_ms" 'BEGIN { print m / 1000 }')"
  n link up $cable >/dev/null || die "ntblend link up $cable failed"
  pulled=$((pulled + 1))
  sleep "$(awk -v m="$up_ms" 'BEGIN { print m / 1000 }')"
done
wait "$fio_pid"
fio_rc=$?
fio_pid=""

fails=0
r=$(sed -n '/^{/,$p' "$work/fio.json" | jq -c '.jobs[0] | {w: .write.total_ios, r: .read.total_ios, err: .total_err, error}' 2>/dev/null) ||
  { echo "$me: fio gave no results (exit $fio_rc): $(tail -3 "$work/fio.err")" >&2; exit 1; }
done_ios=$(jq '.w + .r' <<<"$r")
failed=$(jq '.err' <<<"$r")
verify_errors=$(grep -ciE 'verify.*(fail|bad|mismatch)|bad magic' "$work/fio.err")
touch "$log"
failovers=$(grep -c '^failover ' "$log")
returns=$(grep -c '^return ' "$log")
reissued=$(awk '/^failover / { s += $12 } END { print s + 0 }' "$log" 2>/dev/null)

# Per pull: from the pull to the first completion after it on the other path.
times=()
for ((i = 0; i < pulled; i++)); do
  next=${t_down[i + 1]:-99999999999999999999}
  t=$(awk -v a="${t_down[i]}" -v b="$next" '$1 == "first-completion" && $8 + 0 > a + 0 && $8 + 0 < b + 0 { printf "%.3f\n", ($8 - a) / 1e6; exit }' "$log" 2>/dev/null)
  if [ -n "$t" ]; then times+=("$t"); echo "pull $((i + 1)): first completion on the other path $t ms after the pull"
  else echo "pull $((i + 1)): no failover (nothing in flight: fio between passes, or done)"; fi
done
stats=$(printf '%s\n' "${times[@]}" | sort -g | awk 'NF { v[n++] = $1 } END {
  if (!n) { print "none"; exit }
  p50 = v[int((n - 1) * 0.5 + 0.5)]; p90 = v[int((n - 1) * 0.9 + 0.5)]
  printf "min %.2f  p50 %.2f  p90 %.2f  max %.2f ms (%d pulls)", v[0], p50, p90, v[n - 1], n }')

echo "fio on b, nvme0 lent by a, $cable pulled $pulled times (${down_ms} ms out, ${up_ms} ms in), iodepth $qd; load: $(uptime | sed 's/.*load average: //')"
echo "I/Os             $done_ios ($(jq .w <<<"$r") writes, $(jq .r <<<"$r") verifying reads)"
echo "failed I/Os      $failed"
echo "verify errors    $verify_errors"
echo "failovers        $failovers (commands issued again: $reissued), returns to path 0: $returns"
echo "failover time    $stats"
[ "$pulled" -eq "$pulls" ] || { echo "$me: fio finished after $pulled of $pulls pulls: raise --ios or shorten --down-ms/--up-ms" >&2; fails=1; }
[ "$failed" = 0 ] && [ "$verify_errors" = 0 ] && [ "$fio_rc" = 0 ] || { echo "$me: I/O failed or verified wrong (fio exit $fio_rc): $(grep -m3 -iE 'error|verify' "$work/fio.err" | tr '\n' ' ')" >&2; fails=1; }
[ "$failovers" -ge 1 ] || [ "$pulled" = 0 ] || { echo "$me: no failover happened: the pulls missed the I/O" >&2; fails=1; }
if [ -n "$json" ]; then
  printf '%s\n' "${times[@]}" | jq -Rn --argjson ios "$done_ios" --argjson failed "$failed" \
    --argjson verify "$verify_errors" --argjson pulls "$pulled" --argjson failovers "$failovers" \
    --argjson returns "$returns" --arg cable "$cable" --arg load "$(uptime | sed 's/.*load average: //')" \
    '{cable: $cable, pulls: $pulls, ios: $ios, failed_ios: $failed, verify_errors: $verify,
      failovers: $failovers, returns: $returns, load: $load,
      failover_ms: [inputs | select(length > 0) | tonumber]}' >"$json" || die "cannot write $json"
fi
exit $fails
