#!/usr/bin/env bash
# The fabric benchmark: boots a fresh two-host fabric (examples/topologies/two-hosts.ini) under
# a unique name, measures NTB window bandwidth by CPU stores and by the DMA engine at chunk
# sizes 64K, 256K, 1M and 4M (each next to a local memcpy, in the same run), and the doorbell
# round trip (next to a futex ping-pong), prints a table, writes all JSON to a file, and shuts
# the fabric down.
# Usage: scripts/bench-fabric.sh [-o FILE] [-b BUILD_BIN_DIR] [-s TOTAL] [-n ROUNDS]
#   -o FILE   JSON output (default bench-fabric.json)
#   -b DIR    where ntblend, ntb_perf and ntb_pingpong are (default $NTBLEND_BIN, else ./build/bin)
#   -s TOTAL  bytes per ntb_perf measurement (default 256M); -n ROUNDS for ntb_pingpong (20000)
set -euo pipefail

out=bench-fabric.json
bin=${NTBLEND_BIN:-./build/bin}
total=256M
rounds=20000
usage() { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; }
[ "${1:-}" = --help ] && { usage; exit 0; }
while getopts "o:b:s:n:h" opt; do
  case $opt in
    o) out=$OPTARG ;;
    b) bin=$OPTARG ;;
    s) total=$OPTARG ;;
    n) rounds=$OPTARG ;;
    h) usage; exit 0 ;;
    *) echo "bench-fabric: see --help (-h)" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] || { echo "bench-fabric: unexpected argument '$1' (see -h)" >&2; exit 2; }

src=$(cd "$(dirname "$0")/.." && pwd)
abs=$(cd "$bin" 2>/dev/null && pwd) || { echo "bench-fabric: no build directory '$bin'; run scripts/build.sh or pass -b DIR" >&2; exit 1; }
bin=$abs
. "$src/scripts/bench-floor.sh"
floor_init "$bin" || exit 1
floor_start || exit 1
for b in ntblend ntb_perf ntb_pingpong; do
  [ -x "$bin/$b" ] || { echo "bench-fabric: $bin/$b is missing; run scripts/build.sh or pass -b DIR" >&2; exit 1; }
done
topo=$src/examples/topologies/two-hosts.ini
fabric="bench-$$"
nb() { "$bin/ntblend" --fabric "$fabric" "$@"; }
trap 'nb down >/dev/null 2>&1 || true' EXIT

# A value from one flat JSON object line (our tools print exactly that).
jget() { grep -o "\"$1\":[^,}]*" <<<"$2" | head -n1 | cut -d: -f2- | tr -d '"'; }

nb up "$topo" >/dev/null
echo "bench-fabric: fabric '$fabric' ($topo), $(nproc) CPUs, $total per measurement, best of 3" >&2

results=()
printf '%-22s %8s %14s %14s %8s\n' "test" "chunk" "window MB/s" "local MB/s" "ratio"
for mode in cpu dma; do
  for chunk in 64K 256K 1M 4M; do
    flag=""
    [ $mode = dma ] && flag=--dma
    j=$(nb run --host a -- "$bin/ntb_perf" $flag -c "$chunk" -s "$total" --baseline --json)
    results+=("$j")
    label="ntb_perf $mode"
    [ $mode = dma ] && label="ntb_perf dma engine"
    printf '%-22s %8s %14.0f %14.0f %8.2f\n' "$label" "$chunk" "$(jget mbps "$j")" \
      "$(jget baseline_mbps "$j")" "$(jget ratio "$j")"
  done
done

j=$(nb run --host a -- "$bin/ntb_pingpong" -n "$rounds" --baseline --json)
results+=("$j")
echo
printf '%-22s %12s %12s %12s %12s %8s\n' "round trip (ns)" "min" "median" "p99" "max" "ratio"
printf '%-22s %12s %12s %12s %12s %8.2f\n' "doorbell (ntb)" "$(jget min_ns "$j")" \
  "$(jget median_ns "$j")" "$(jget p99_ns "$j")" "$(jget max_ns "$j")" "$(jget ratio "$j")"
printf '%-22s %12s %12s %12s %12s\n' "futex (2 processes)" "$(jget baseline_min_ns "$j")" \
  "$(jget baseline_median_ns "$j")" "$(jget baseline_p99_ns "$j")" "$(jget baseline_max_ns "$j")"

{
  printf '{"fabric":"%s","topology":"%s","cpus":%d,"date":"%s","results":[\n' \
    "$fabric" "examples/topologies/two-hosts.ini" "$(nproc)" "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  for i in "${!results[@]}"; do
    sep=","
    [ "$i" -eq $((${#results[@]} - 1)) ] && sep=""
    printf '  %s%s\n' "${results[$i]}" "$sep"
  done
  printf ']}\n'
} >"$out"
floor_finish "$out"
echo "bench-fabric: JSON written to $out" >&2
