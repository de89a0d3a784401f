#!/usr/bin/env bash
# One NVMe, up to 30 hosts at once (smartio-tocs-2021 §7.4.2). Boots
# examples/topologies/nvme31.ini (the NVMe in host "lender", clients c01..c30 behind cascaded
# switches), starts the NVMe's manager on the lender, and for each client count N (1, 2, 4,
# 8, 16, 30) runs nvme_bench on N hosts at the same moment: 4 KiB random reads at a queue
# depth of its own, each client in a block range of its own that it first writes and then
# verifies on every read. Reports aggregate IOPS, each client's IOPS, the fairness (slowest /
# fastest client) and latency (median of the clients' medians, worst client's p99), as JSON
# and as a plot of aggregate IOPS and fairness against the number of clients.
# Usage: scripts/bench-nvme-clients.sh [-o FILE] [-b BUILD_BIN_DIR] [-s SECONDS] [-q QD]
#                                      [-n "1 2 4 8 16 30"] [-i]
#   -o FILE     results as JSON (default bench-nvme-clients.json; the plot beside it, .png)
#   -b DIR      where ntblend and nvme_bench are (default $NTBLEND_BIN, else ./build/bin)
#   -s SECONDS  measuring time of each run (default 2)
#   -q QD       commands each client keeps in flight (default 4)
#   -n COUNTS   client counts to run (default "1 2 4 8 16 30")
#   -i          clients sleep in their queue pair's interrupt after a short poll instead of
#               polling on (the default polls: with more clients than CPUs, try -i)
set -euo pipefail

out=bench-nvme-clients.json
bin=${NTBLEND_BIN:-./build/bin}
secs=2
qd=4
counts="1 2 4 8 16 30"
irq=""
usage() { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; }
while getopts "o:b:s:q:n:ih" opt; do
  case $opt in
    o) out=$OPTARG ;;
    b) bin=$OPTARG ;;
    s) secs=$OPTARG ;;
    q) qd=$OPTARG ;;
    n) counts=$OPTARG ;;
    i) irq="--irq 1 --spin-us 20" ;;
    h) usage; exit 0 ;;
    *) echo "bench-nvme-clients: see -h" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] || { echo "bench-nvme-clients: unexpected argument '$1' (see -h)" >&2; exit 2; }
[[ $secs =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "bench-nvme-clients: -s takes seconds" >&2; exit 2; }
[[ $qd =~ ^[1-9][0-9]*$ ]] && [ "$qd" -le 256 ] || { echo "bench-nvme-clients: -q takes 1..256" >&2; exit 2; }
for c in $counts; do
  [[ $c =~ ^[1-9][0-9]*$ ]] && [ "$c" -le 30 ] || { echo "bench-nvme-clients: -n takes counts of 1..30" >&2; exit 2; }
done
src=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "$bin" 2>/dev/null && pwd) || { echo "bench-nvme-clients: no build directory; run scripts/build.sh or pass -b DIR" >&2; exit 1; }
for b in ntblend nvme_bench ntblend-nvme-manager; do
  [ -x "$bin/$b" ] || { echo "bench-nvme-clients: $bin/$b is missing; run scripts/build.sh or pass -b DIR" >&2; exit 1; }
done
. "$src/scripts/bench-floor.sh"
floor_init "$bin" || exit 1
floor_start || exit 1
tmp=$(mktemp -d)
fabric="nvmec-$$"
n() { "$bin/ntblend" --fabric "$fabric" "$@"; }
trap 'n down >/dev/null 2>&1 || true; [ -n "${NTBLEND_NVME_DIR:-}" ] || rm -rf "/var/tmp/ntblend/$fabric"; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

echo "bench-nvme-clients: booting 31 hosts (examples/topologies/nvme31.ini)" >&2
n up "$src/examples/topologies/nvme31.ini" >/dev/null
n device add nvme0 >/dev/null
n nvme manager nvme0 --host lender >/dev/null
blocks=2048 # per client: 8 MiB, written first, then verified on every read

runs=()
for c in $counts; do
  # Every client starts measuring at the same wall-clock moment, after its setup.
  start=$(date +%s.%N | awk '{ printf "%.3f", $1 + 3 + 0.05 * '"$c"' }')
  pids=()
  for i in $(seq 1 "$c"); do
    h=$(printf "c%02d" "$i")
    "$bin/ntblend" --fabric "$fabric" run --host "$h" -- "$bin/nvme_bench" --device nvme0 \
      --qd "$qd" --seconds "$secs" --warmup 0 --lba $(((i - 1) * blocks)):$blocks --verify \
      --start-at "$start" $irq --json -q >"$tmp/$c.$i.json" 2>"$tmp/$c.$i.err" &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || { echo "bench-nvme-clients: client $((i + 1)) of $c failed: $(cat "$tmp/$c.$((i + 1)).err")" >&2; exit 1; }
  done
  jq -s --argjson n "$c" '{
      clients: $n,
      aggregate_iops: (map(.iops) | add | round),
      min_iops: (map(.iops) | min | round), max_iops: (map(.iops) | max | round),
      fairness: ((map(.iops) | min) / (map(.iops) | max) * 1000 | round / 1000),
      lat_p50_ns: (map(.lat_median_ns) | sort | .[(length / 2 | floor)]),
      lat_p99_ns: (map(.lat_p99_ns) | max),
      verify_errors: (map(.verify_errors) | add),
      per_client: map({host, iops: (.iops | round), lat_median_ns, lat_p99_ns, client})
    }' "$tmp/$c".*.json >"$tmp/run.$c.json"
  jq -r '"  \(.clients) client(s): \(.aggregate_iops) IOPS in all, per client \(.min_iops)..\(.max_iops) (fairness \(.fairness)), latency p50 \(.lat_p50_ns) ns, p99 \(.lat_p99_ns) ns, verify errors \(.verify_errors)"' "$tmp/run.$c.json" >&2
  runs+=("$tmp/run.$c.json")
done
status=$(n nvme status --json)
jq -s --arg qd "$qd" --arg secs "$secs" --arg irq "${irq:+interrupts}" --argjson mgr "$status" '{
    benchmark: "bench-nvme-clients", topology: "examples/topologies/nvme31.ini",
    qd_per_client: ($qd | tonumber), seconds: ($secs | tonumber),
    wait: (if $irq == "" then "poll" else $irq end), block: 4096,
    manager: ($mgr[0].manager.state | del(.client_list)), runs: .
  }' "${runs[@]}" >"$out"
floor_finish "$out"
echo "bench-nvme-clients: results in $out" >&2
if command -v gnuplot >/dev/null; then
  png=${out%.json}.png
  jq -r '.runs[] | [.clients, .aggregate_iops, .fairness, .min_iops, .max_iops] | @tsv' "$out" >"$tmp/plot.tsv"
  gnuplot -e "dir='$src/tools/plots/'; in='$tmp/plot.tsv'; out='$png'; qd='$qd'" "$src/tools/plots/nvme-clients.gp"
  echo "bench-nvme-clients: plot in $png" >&2
fi
