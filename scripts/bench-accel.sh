#!/usr/bin/env bash
# The accelerator benchmark (smartio-tocs-2021 §7.1.4-7.1.5 on the emulated fabric, with
# tools/accel_bench): host<->device copy bandwidth of an accelerator used locally (the tool on
# its own host) and borrowed (the tool on another host), and device-to-device ping-pong between
# two accelerators in the same lender and in different lenders, with the latency model off and
# on. Boots each fabric under a unique name, lends the devices out (`ntblend device add`),
# prints a summary table, writes every run's JSON into one file, and shuts the fabrics down
# (also on failure or Ctrl-C).
#   latency model off: smartio3.ini (accel0 in a, accel1 in c): bandwidth of accel0 on a
#     (local) and on b (borrowed), ping-pong accel0<->accel1 from b (different lenders);
#     smartio-p2p.ini (accel0+accel1 in a, accel2 in c): ping-pong from b, accel0<->accel1
#     (same lender) and accel0<->accel2 (different lenders)
#   latency model on: smartio-p2p-latency.ini: all four
# Usage: scripts/bench-accel.sh [-o FILE] [-b BUILD_BIN_DIR] [-s SIZE] [-k BLOCK] [-n ROUNDS] [-r N] [-q]
#   -o FILE   JSON output (default bench-accel.json)
#   -b DIR    where ntblend and accel_bench are (default $NTBLEND_BIN, else ./build/bin)
#   -s SIZE   bytes per bandwidth run (default 64M); -k BLOCK bytes per descriptor (default 4M)
#   -n ROUNDS ping-pong rounds (default 10000); -r N repeats of every run (best of N, default 3)
#   -q        quick: 8M, 1000 rounds, 1 repeat (a smoke test; noisier figures)
set -euo pipefail

out=bench-accel.json
bin=${NTBLEND_BIN:-./build/bin}
size=64M
block=4M
rounds=10000
repeats=3
usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }
[ "${1:-}" = --help ] && { usage; exit 0; }
while getopts "o:b:s:k:n:r:qh" opt; do
  case $opt in
    o) out=$OPTARG ;;
    b) bin=$OPTARG ;;
    s) size=$OPTARG ;;
    k) block=$OPTARG ;;
    n) rounds=$OPTARG ;;
    r) repeats=$OPTARG ;;
    q) size=8M block=1M rounds=1000 repeats=1 ;;
    h) usage; exit 0 ;;
    *) echo "bench-accel: see -h" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] || { echo "bench-accel: unexpected argument '$1' (see -h)" >&2; exit 2; }

src=$(cd "$(dirname "$0")/.." && pwd)
abs=$(cd "$bin" 2>/dev/null && pwd) || { echo "bench-accel: no build directory '$bin'; run scripts/build.sh or pass -b DIR" >&2; exit 1; }
bin=$abs
. "$src/scripts/bench-floor.sh"
floor_init "$bin" || exit 1
floor_start || exit 1
for b in ntblend accel_bench; do
  [ -x "$bin/$b" ] || { echo "bench-accel: $bin/$b is missing; run scripts/build.sh or pass -b DIR" >&2; exit 1; }
done
topos=$src/examples/topologies

# One fabric at a time, each under a name no other run uses; whatever is up goes down at exit.
fabric=""
tmp=$(mktemp -d)
down() { [ -z "$fabric" ] || "$bin/ntblend" --fabric "$fabric" down >/dev/null 2>&1 || true; fabric=""; }
trap 'down; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
nb() { "$bin/ntblend" --fabric "$fabric" "$@"; }
boot() { # NAME TOPOLOGY DEVICE...
  fabric="accb-$$-$1"
  local topo=$2; shift 2
  nb up "$topo" >/dev/null
  for d in "$@"; do nb device add "$d" >/dev/null; done
  echo "bench-accel: fabric $fabric ($(basename "$topo")), lent out: $*" >&2
}

# measure KEY HOST accel_bench-args...: the tool's JSON into $tmp/KEY.json; a failure (wrong
# data, a device that fails) stops the benchmark.
keys=()
measure() {
  local key=$1 host=$2; shift 2
  if ! nb run --host "$host" -- "$bin/accel_bench" "$@" --json >"$tmp/$key.json"; then
    echo "bench-accel: 'accel_bench $*' on host $host failed on fabric $fabric (see above)" >&2
    exit 1
  fi
  keys+=("$key")
  printf '%s\t%s\t%s\n' "$key" "$fabric" "$host" >>"$tmp/index"
}
# get KEY FIELD: a number, string or boolean from a tool's JSON (pretty: one key per line)
get() { sed -n "s/^ *\"$2\": *\"\{0,1\}\([^\",]*\)\"\{0,1\},\{0,1\}$/\1/p" "$tmp/$1.json" | head -1; }

bw=(bandwidth --device accel0 --size "$size" --block "$block" --repeat "$repeats")
pp=(pingpong --rounds "$rounds" --repeat "$repeats")
echo "bench-accel: $(nproc) CPUs; bandwidth $size in $block blocks (best of $repeats), ping-pong $rounds rounds" >&2

boot s3 "$topos/smartio3.ini" accel0 accel1
measure off-bw-local a "${bw[@]}"
measure off-bw-borrowed b "${bw[@]}"
measure off-pp-s3-diff b "${pp[@]}" --device accel0 --peer accel1
down
boot p2p "$topos/smartio-p2p.ini" accel0 accel1 accel2
measure off-pp-same b "${pp[@]}" --device accel0 --peer accel1
measure off-pp-diff b "${pp[@]}" --device accel0 --peer accel2
down
boot lat "$topos/smartio-p2p-latency.ini" accel0 accel1 accel2
measure on-bw-local a "${bw[@]}"
measure on-bw-borrowed b "${bw[@]}"
measure on-pp-same b "${pp[@]}" --device accel0 --peer accel1
measure on-pp-diff b "${pp[@]}" --device accel0 --peer accel2
down

# ---------------------------------------------------------------- JSON: every run, labelled
{
  printf '{\n  "tool": "bench-accel.sh",\n  "cpus": %d,\n  "runs": [\n' "$(nproc)"
  first=1
  while IFS=$'\t' read -r key fab host; do
    [ $first = 1 ] || printf ',\n'
    first=0
    case $key in off-*) lat=false ;; *) lat=true ;; esac
    printf '    { "case": "%s", "fabric": "%s", "run_on": "%s", "latency_model": %s,\n      "result": ' \
      "$key" "$fab" "$host" "$lat"
    sed '2,$s/^/      /' "$tmp/$key.json" | sed '$!b; s/$/ }/'
  done <"$tmp/index"
  printf '\n  ]\n}\n'
} >"$out"

# ---------------------------------------------------------------- the summary
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
echo
echo "== Host<->device bandwidth of accel0's DMA engine (MB/s, best of $repeats; $size in $block"
echo "   descriptors): local = tool on host a (the lender), borrowed = tool on host b"
printf '%-18s | %10s %10s %8s | %10s %10s %8s\n' "" "local" "borrowed" "ratio" "local" "borrowed" "ratio"
printf '%-18s | %-30s | %-30s\n' "" "latency model off" "latency model on"
for dir in h2d d2h; do
  case $dir in h2d) label="host-to-device" ;; d2h) label="device-to-host" ;; esac
  l0=$(get off-bw-local ${dir}_mbps) b0=$(get off-bw-borrowed ${dir}_mbps)
  l1=$(get on-bw-local ${dir}_mbps) b1=$(get on-bw-borrowed ${dir}_mbps)
  printf '%-18s | %10.0f %10.0f %8s | %10.0f %10.0f %8s\n' "$label" "$l0" "$b0" "$(ratio "$b0" "$l0")" \
    "$l1" "$b1" "$(ratio "$b1" "$l1")"
done
echo "   (ratio = borrowed / local)"

echo
echo "== Device-to-device ping-pong (ns per round trip from the CPU's view, $rounds rounds, tool on"
echo "   host b borrowing both devices; best of $repeats runs): best = total / rounds of the best run,"
echo "   median = median over all runs' batches of rounds of (batch time / rounds)"
printf '%-50s | %10s %10s | %10s %10s\n' "" "off best" "off median" "on best" "on median"
row() { # LABEL KEY_OFF KEY_ON
  local m0 d0 m1 d1
  m0=$(get "$2" best_mean_ns) d0=$(get "$2" median_ns)
  if [ -n "$3" ]; then m1=$(get "$3" best_mean_ns) d1=$(get "$3" median_ns); else m1=- d1=-; fi
  printf '%-50s | %10s %10s | %10s %10s\n' "$1" "$m0" "$d0" "$m1" "$d1"
}
row "same lender (p2p: accel0,accel1 in a)" off-pp-same on-pp-same
row "different lenders (p2p: accel0 a, accel2 c)" off-pp-diff on-pp-diff
row "different lenders (smartio3: accel0 a, accel1 c)" off-pp-s3-diff ""
m_same=$(get off-pp-same best_mean_ns) m_diff=$(get off-pp-diff best_mean_ns)
l_same=$(get on-pp-same best_mean_ns) l_diff=$(get on-pp-diff best_mean_ns)
echo "   different - same lender (best): model off $(awk -v a="$m_diff" -v b="$m_same" 'BEGIN { printf "%.0f", a - b }') ns, model on $(awk -v a="$l_diff" -v b="$l_same" 'BEGIN { printf "%.0f", a - b }') ns"
echo "   different / same lender (best): model off $(ratio "$m_diff" "$m_same"), model on $(ratio "$l_diff" "$l_same")"

verified=yes
for k in "${keys[@]}"; do [ "$(get "$k" verified)" = true ] || verified=no; done
echo
echo "data verified in every run: $verified"
floor_finish "$out"
echo "JSON: $out"
[ $verified = yes ]
