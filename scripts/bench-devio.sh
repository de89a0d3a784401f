#!/usr/bin/env bash
# Device-initiated I/O measured (smartio-tocs-2021 §6.4, Figs. 18-19; docs/devio.md): 4 KiB
# NVMe reads into an accelerator's memory, started by the accelerator (its engine drives a
# queue pair in its own memory) and by the CPU (libntbnvme's queue pair), at QD 1 (time per
# read: latency) and QD 32 (IOPS), in two placements on examples/topologies/smartio3.ini:
#   local  nvme0 and accel0 of host a, the program on a (Fig. 18)
#   lent   the same two devices borrowed by a program on host c (Fig. 19)
# with the latency model off and on. devio_bench runs both modes in each of its rounds (ABBA
# order); every round of this script runs each case once, the cases interleaved, and the
# figures are medians over all rounds. Ratios are accelerator/CPU time per read.
# Writes the JSON (every run) and prints the table. The fabrics are booted under unique names
# and brought down at exit (also on failure or Ctrl-C).
# Usage: scripts/bench-devio.sh [-o FILE.json] [-b BIN_DIR] [-r ROUNDS] [-n IOS] [-q]
#   -o FILE   JSON output (default bench-devio.json)
#   -b DIR    where ntblend and devio_bench are (default $NTBLEND_BIN, else ./build/bin)
#   -r N      rounds (default 5)
#   -n N      reads per mode, case and round (default 4000)
#   -q        quick: 2 rounds of 500 reads (a smoke test)
set -euo pipefail

out=bench-devio.json
bin=${NTBLEND_BIN:-./build/bin}
rounds=5
ios=4000
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
for a in "$@"; do [ "$a" = --help ] && { usage; exit 0; }; done
while getopts "o:b:r:n:qh" opt; do
  case $opt in
    o) out=$OPTARG ;;
    b) bin=$OPTARG ;;
    r) rounds=$OPTARG ;;
    n) ios=$OPTARG ;;
    q) rounds=2 ios=500 ;;
    h) usage; exit 0 ;;
    *) echo "bench-devio: see -h" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] || { echo "bench-devio: unexpected argument '$1' (see -h)" >&2; exit 2; }
[[ $rounds =~ ^[1-9][0-9]*$ && $ios =~ ^[1-9][0-9]*$ ]] ||
  { echo "bench-devio: -r and -n take positive numbers" >&2; exit 2; }
for p in ntblend devio_bench; do
  [ -x "$bin/$p" ] || { echo "bench-devio: no $bin/$p (build first: scripts/build.sh --release; or -b DIR)" >&2; exit 2; }
done
command -v jq >/dev/null || { echo "bench-devio: needs jq (scripts/install-deps.sh)" >&2; exit 2; }
export PATH="$bin:$PATH"
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
fabs=()
cleanup() {
  for f in "${fabs[@]}"; do ntblend --fabric "$f" down >/dev/null 2>&1 || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Two fabrics up at once, latency model off and on.
for model in off on; do
  topo=$src/examples/topologies/smartio3.ini
  if [ $model = on ]; then
    { cat "$topo"; printf '\n[latency]\nenabled = yes\n'; } >"$tmp/latency.ini"
    topo=$tmp/latency.ini
  fi
  f="devio-bench-$model-$$"
  fabs+=("$f")
  NTBLEND_NVME_DIR=$tmp/nvme ntblend --fabric "$f" up "$topo" >/dev/null
  ntblend --fabric "$f" device add nvme0 >/dev/null
  ntblend --fabric "$f" device add accel0 >/dev/null
done

: >"$tmp/runs"
for r in $(seq "$rounds"); do
  for model in off on; do
    for place in local lent; do
      host=$([ $place = local ] && echo a || echo c)
      for qd in 1 32; do
        j=$(ntblend --fabric "devio-bench-$model-$$" run --host $host -- devio_bench --nvme nvme0 \
              --accel accel0 --qd $qd --ios "$ios" --rounds 1 --lba 0:4096 --json -q)
        jq -c --arg m $model --arg p $place --argjson r "$r" \
          '{model: $m, place: $p, round: $r, qd: .qd, accel: .accel.us_per_io, cpu: .cpu.us_per_io}' \
          <<<"$j" >>"$tmp/runs"
      done
    done
  done
  echo "round $r of $rounds done" >&2
done

jq -s --arg ios "$ios" '{ios: ($ios | tonumber), runs: .,
  medians: (group_by([.model, .place, .qd]) | map({model: .[0].model, place: .[0].place, qd: .[0].qd,
    accel_us: (map(.accel) | sort | .[length / 2 | floor]),
    cpu_us: (map(.cpu) | sort | .[length / 2 | floor]),
    ratio: (map(.accel / .cpu) | sort | .[length / 2 | floor])}))}' "$tmp/runs" >"$out"

printf '%-5s %-6s %-3s %12s %12s %12s %12s %9s\n' model place qd "accel us" "cpu us" "accel IOPS" "cpu IOPS" accel/cpu
jq -r '.medians[] | [.model, .place, .qd, .accel_us, .cpu_us, (1e6 / .accel_us), (1e6 / .cpu_us), .ratio] | @tsv' "$out" |
  while IFS=$'\t' read -r m p q a c ai ci ra; do
    printf '%-5s %-6s %-3s %12.2f %12.2f %12.0f %12.0f %9.3f\n' "$m" "$p" "$q" "$a" "$c" "$ai" "$ci" "$ra"
  done
echo "(medians of $rounds rounds of $ios reads per mode; accel/cpu: the median of the rounds' ratios; JSON in $out)"
