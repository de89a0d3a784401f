#!/usr/bin/env bash
# The composite workload (device-lending-kvm-multidevice-2019 §7.5, Fig. 21; smartio-tocs-2021
# §7.2, Fig. 30) measured: tools/composite_job (an NVMe loads data into two accelerators, they
# exchange it peer to peer and write it back; every epoch checked) on
# examples/topologies/composite.ini (a chassis in each host, latency model on), always on
# host b, in the papers' three cases:
#   local         b's own nvme1, accel3 and accel4, in its chassis
#   one-lender    nvme0, accel0 and accel1 lent by a to b (over their back-to-back cable)
#   two-lenders   nvme0 and accel0 lent by a, accel2 by c (over the switch)
# Every round runs each case once, in a rotating order (interleaved, so that the machine's
# load falls on all alike); the figures are medians over rounds of each run's median epoch,
# with the per-stage medians, and the ratios to local. Writes JSON (every run and the medians)
# and, with gnuplot, a bar chart of the epoch times beside it; prints a summary. The fabric is
# booted under a unique name and brought down at exit (also on failure or Ctrl-C).
# Usage: scripts/bench-composite.sh [-o FILE.json] [-b BIN_DIR] [-r ROUNDS] [-e EPOCHS] [-s SIZE] [-q]
#   -o FILE   JSON output (default bench-composite.json; the PNG beside it)
#   -b DIR    where ntblend and composite_job are (default $NTBLEND_BIN, else ./build/bin)
#   -r N      rounds (default 5)
#   -e N      epochs per run (default 5)
#   -s SIZE   bytes per accelerator per epoch, k or M suffix (default 4M, at most 32M here)
#   -q        quick: 2 rounds of 2 epochs of 1M (a smoke test; noisy figures)
set -euo pipefail

out=bench-composite.json
bin=${NTBLEND_BIN:-./build/bin}
rounds=5 epochs=5 size=4M
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
[ "${1:-}" = --help ] && { usage; exit 0; }
while getopts "o:b:r:e:s:qh" opt; do
  case $opt in
    o) out=$OPTARG ;;
    b) bin=$OPTARG ;;
    r) rounds=$OPTARG ;;
    e) epochs=$OPTARG ;;
    s) size=$OPTARG ;;
    q) rounds=2 epochs=2 size=1M ;;
    h) usage; exit 0 ;;
    *) echo "bench-composite: see -h" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] || { echo "bench-composite: unexpected argument '$1' (see -h)" >&2; exit 2; }
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "bench-composite: -r takes a positive number" >&2; exit 2; }
[[ $epochs =~ ^[1-9][0-9]*$ ]] || { echo "bench-composite: -e takes a positive number" >&2; exit 2; }
[[ $size =~ ^[1-9][0-9]*[kKmM]?$ ]] ||
  { echo "bench-composite: -s takes bytes per accelerator, with k or M (e.g. 4M; at most 32M: composite.ini's accelerators have 64M)" >&2; exit 2; }

src=$(cd "$(dirname "$0")/.." && pwd)
abs=$(cd "$bin" 2>/dev/null && pwd) || { echo "bench-composite: no build directory '$bin'; run scripts/build.sh or pass -b DIR" >&2; exit 1; }
bin=$abs
for b in ntblend composite_job; do
  [ -x "$bin/$b" ] || { echo "bench-composite: $bin/$b is missing; run scripts/build.sh or pass -b DIR" >&2; exit 1; }
done
command -v jq >/dev/null || { echo "bench-composite: jq is missing (apt-get install jq)" >&2; exit 1; }
. "$src/scripts/bench-floor.sh"
floor_init "$bin" || exit 1
floor_start || exit 1
mkdir -p "$(dirname "$out")"

fabric=""
tmp=$(mktemp -d)
down() { [ -z "$fabric" ] || "$bin/ntblend" --fabric "$fabric" down >/dev/null 2>&1 || true; fabric=""; }
trap 'down; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
nb() { "$bin/ntblend" --fabric "$fabric" "$@"; }
fabric="compb-$$"
nb up "$src/examples/topologies/composite.ini" >/dev/null
echo "bench-composite: $(nproc) CPUs, fabric $fabric (composite.ini), $rounds rounds of $epochs epochs of 2 x $size" >&2

# A case: lend what it needs, run the job on its host, take everything back.
lent=()
lend() { nb device lend "$1" --to "$2" >/dev/null; lent+=("$1"); }
reclaim() { local d; for d in "${lent[@]}"; do nb device reclaim "$d" >/dev/null; done; lent=(); }
# The slots of DEVICEs in b's tree, as composite_job --use takes them.
slots() { local d s out=""; for d in "$@"; do
  s=$(nb lspci --host b --json | jq -r --arg d "$d" '.[0].functions[] | select(.name == $d) | .slot')
  [ -n "$s" ] || { echo "bench-composite: $d is not in host b's tree on fabric $fabric" >&2; exit 1; }
  out+=${out:+,}$s
done; echo "$out"; }
job() { # CASE ROUND DEVICE...
  local c=$1 r=$2 use
  shift 2
  use=$(slots "$@")
  if ! nb run --host b -- "$bin/composite_job" --epochs "$epochs" --size "$size" --use "$use" --json \
      >"$tmp/job.json" 2>"$tmp/job.err"; then
    echo "bench-composite: composite_job ($c, round $r, --use $use) failed on fabric $fabric:" >&2
    cat "$tmp/job.err" >&2
    exit 1
  fi
  jq -c --arg c "$c" --argjson r "$r" '{case: $c, round: $r} + .' "$tmp/job.json" >>"$tmp/runs.jsonl"
}
run_case() { # CASE ROUND
  case $1 in
    local) job "$1" "$2" nvme1 accel3 accel4 ;;
    one-lender) lend nvme0 b; lend accel0 b; lend accel1 b; job "$1" "$2" nvme0 accel0 accel1; reclaim ;;
    two-lenders) lend nvme0 b; lend accel0 b; lend accel2 b; job "$1" "$2" nvme0 accel0 accel2; reclaim ;;
  esac
}
cases=(local one-lender two-lenders)
: >"$tmp/runs.jsonl"
for r in $(seq "$rounds"); do
  for i in 0 1 2; do run_case "${cases[$(((i + r - 1) % 3))]}" "$r"; done # each case first in turn
done

# Medians over the rounds: of each run's median epoch, and of each stage's per-run median.
jq -s --argjson rounds "$rounds" --argjson epochs "$epochs" --arg size "$size" '
  def median: sort | if length == 0 then null elif length % 2 == 1 then .[length / 2 | floor]
    else (.[length / 2 - 1] + .[length / 2]) / 2 end;
  def runmed(k): [.epochs[] | .[k]] | median;
  . as $runs
  | ["local", "one-lender", "two-lenders"] as $cases
  | [$cases[] as $c | [$runs[] | select(.case == $c)] as $rs
      | {case: $c, epoch_us: ([$rs[] | .median_epoch_us] | median)}
        + ([("load_us", "h2d_us", "p2p_us", "d2h_us", "store_us") as $k
            | {($k): ([$rs[] | runmed($k)] | median)}] | add)] as $med
  | {rounds: $rounds, epochs: $epochs, size: $size, topology: "composite.ini (latency model on)",
     runs: $runs, medians: $med,
     ratios: {one_lender_over_local: ($med[1].epoch_us / $med[0].epoch_us),
              two_lenders_over_local: ($med[2].epoch_us / $med[0].epoch_us),
              two_lenders_over_one_lender: ($med[2].epoch_us / $med[1].epoch_us)},
     verified: ([$runs[] | .verified] | all)}' "$tmp/runs.jsonl" >"$out"
floor_finish "$out"

echo
echo "== Composite workload (composite_job, 2 x $size per epoch; medians of $rounds interleaved rounds)"
printf '%-12s %10s %9s %9s %9s %9s %9s %9s\n' case "epoch us" load h2d p2p d2h store "/local"
jq -r '.medians[0].epoch_us as $l | .medians[] |
  [.case, .epoch_us, .load_us, .h2d_us, .p2p_us, .d2h_us, .store_us, (.epoch_us / $l)] | @tsv' "$out" |
  while IFS=$'\t' read -r c e l h p d s q; do
    printf '%-12s %10.0f %9.0f %9.0f %9.0f %9.0f %9.0f %9.2f\n' "$c" "$e" "$l" "$h" "$p" "$d" "$s" "$q"
  done
echo "data verified after every epoch: $(jq -r .verified "$out")"
if command -v gnuplot >/dev/null; then
  png=${out%.json}.png
  jq -r '.medians[] | [.case, .epoch_us] | @tsv' "$out" >"$tmp/bars.tsv"
  gnuplot -e "dir='$src/tools/plots/'; in='$tmp/bars.tsv'; out='$png'; title='Composite workload: median epoch by case (2 x $size)'; ylabel='us per epoch'" \
    "$src/tools/plots/figures-bars.gp" && echo "plot: $png"
fi
echo "JSON: $out"
