#!/usr/bin/env bash
# One NVMe read into 59 hosts at once (smartio-tocs-2021 §6.5, §7.4.2). Boots
# examples/topologies/cluster60.ini (nvme0 in h00, hosts h01..h59 behind seven cascaded
# switches), lends nvme0 out, and runs tools/mcast_bench on h01: one process per member host
# holds a buffer of its RAM; for each host count N, in interleaved rounds, it times one read
# of the NVMe into a multicast group of the first N members against N reads, one into each
# member (all queued at once), and checks after every read that every member holds the data.
# Reports the median times and their ratio as JSON, and a plot of both against N.
# Usage: scripts/bench-mcast.sh [-o FILE] [-b BUILD_BIN_DIR] [-r ROUNDS] [-n COUNTS] [-B BYTES]
#   -o FILE     results as JSON (default bench-mcast.json; the plot beside it, .png)
#   -b DIR      where ntblend and mcast_bench are (default $NTBLEND_BIN, else ./build/bin)
#   -r ROUNDS   rounds (each times every N both ways; default 100)
#   -n COUNTS   host counts (default "1 2 4 8 16 32 59"; 1..59)
#   -B BYTES    bytes one read moves (default 4096, the paper's identify page)
#   -l          with the latency model on (cluster60 with [latency] enabled = yes): device DMA
#               pays the path's hops and its link's rate, so N reads cost N transfers on the
#               lender's link and a multicast read one
set -euo pipefail

out=bench-mcast.json
bin=${NTBLEND_BIN:-./build/bin}
rounds=100
counts="1 2 4 8 16 32 59"
bytes=4096
latency=no
usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; }
while getopts "o:b:r:n:B:lh" opt; do
  case $opt in
    o) out=$OPTARG ;;
    b) bin=$OPTARG ;;
    r) rounds=$OPTARG ;;
    n) counts=$OPTARG ;;
    B) bytes=$OPTARG ;;
    l) latency=yes ;;
    h) usage; exit 0 ;;
    *) echo "bench-mcast: see -h" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] || { echo "bench-mcast: unexpected argument '$1' (see -h)" >&2; exit 2; }
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "bench-mcast: -r takes a number of rounds" >&2; exit 2; }
[[ $bytes =~ ^[1-9][0-9]*$ ]] || { echo "bench-mcast: -B takes bytes" >&2; exit 2; }
max=1
for c in $counts; do
  [[ $c =~ ^[1-9][0-9]*$ ]] && [ "$c" -le 59 ] || { echo "bench-mcast: -n takes counts of 1..59" >&2; exit 2; }
  [ "$c" -gt "$max" ] && max=$c
done
src=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "$bin" 2>/dev/null && pwd) || { echo "bench-mcast: no build directory; run scripts/build.sh or pass -b DIR" >&2; exit 1; }
for b in ntblend mcast_bench; do
  [ -x "$bin/$b" ] || { echo "bench-mcast: $bin/$b is missing; run scripts/build.sh or pass -b DIR" >&2; exit 1; }
done
. "$src/scripts/bench-floor.sh"
floor_init "$bin" || exit 1
floor_start || exit 1
tmp=$(mktemp -d)
fabric="mcast-$$"
n() { "$bin/ntblend" --fabric "$fabric" "$@"; }
trap 'n down >/dev/null 2>&1 || true; [ -n "${NTBLEND_NVME_DIR:-}" ] || rm -rf "/var/tmp/ntblend/$fabric"; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

topo=$src/examples/topologies/cluster60.ini
if [ "$latency" = yes ]; then
  "$src/scripts/gen-cluster60.sh" "$tmp/cluster60.ini"
  printf '\n[latency]\nenabled = yes\n' >>"$tmp/cluster60.ini"
  topo=$tmp/cluster60.ini
fi
echo "bench-mcast: booting 60 hosts (examples/topologies/cluster60.ini, latency model: $latency)" >&2
n up "$topo" >/dev/null
n device add nvme0 >/dev/null
members=$(for i in $(seq 1 "$max"); do printf "h%02d," "$i"; done)
n run --host h01 -- "$bin/mcast_bench" --device nvme0 --members "${members%,}" \
  --counts "$(tr ' ' ',' <<<"$counts")" --rounds "$rounds" --bytes "$bytes" >"$tmp/runs.jsonl"
jq -s --arg topo examples/topologies/cluster60.ini --arg lat "$latency" '{
    benchmark: "bench-mcast", topology: $topo, latency_model: ($lat == "yes"),
    initiator: "h01", device: "nvme0", runs: .
  }' "$tmp/runs.jsonl" >"$out"
jq -r '.runs[] | "  \(.hosts) host(s): multicast \(.multicast_us) us, \(.hosts) unicast reads \(.unicast_us) us: \(.unicast_over_multicast)x"' "$out" >&2
floor_finish "$out"
echo "bench-mcast: results in $out" >&2
if command -v gnuplot >/dev/null; then
  png=${out%.json}.png
  jq -r '.runs[] | [.hosts, .multicast_us, .unicast_us, .multicast_us_p25, .multicast_us_p75, .unicast_us_p25, .unicast_us_p75] | @tsv' "$out" >"$tmp/plot.tsv"
  gnuplot -e "dir='$src/tools/plots/'; in='$tmp/plot.tsv'; out='$png'; bytes='$bytes'; lat='$latency'" "$src/tools/plots/mcast.gp"
  echo "bench-mcast: plot in $png" >&2
fi
