#!/usr/bin/env bash
# Before/after: runs the same benchmarks for two builds of ntblend, alternately and in one run
# (the machine's noise hits both alike), and prints each key figure's median over the rounds
# for both with the ratio after/before. Use it to show that a change costs nothing.
#
# Usage: scripts/bench-compare.sh [-r ROUNDS] [-o DIR] BEFORE_TREE AFTER_TREE [seg] [nvme] [shmem]
#   BEFORE_TREE, AFTER_TREE  source trees, each built in its build/ (scripts/build.sh); each
#                            tree's own scripts/bench-*.sh runs against its own build/bin
#   seg     scripts/bench-seg.sh -q: remote store/load, interrupt round trip, segment DMA
#   nvme    scripts/bench-nvme.sh -r 1 -s 1: borrowed/local NVMe QD1 latency (median, p99) and
#           QD32 IOPS
#   shmem   scripts/bench-shmem-oshmem.sh -r 1: putmem, p/g, barrier, fetch-add, each as the
#           ratio to Open MPI's OSHMEM in the same run (needs openmpi-bin, libopenmpi-dev)
#   (default: all three)
#   -r ROUNDS  rounds per benchmark, the order alternating every round (default 3)
#   -o DIR     where each run's JSON goes (default build/bench/compare)
# Needs jq. A figure where higher is better shows "hi", lower is better "lo": an after/before
# ratio below 1 for "hi" (above 1 for "lo") is a slowdown. Each row also gives the 95 %
# interval of that ratio (a bootstrap over the rounds: 4000 resamples of each side's rounds,
# the ratio of their medians) and a verdict: "worse" or "better" when the whole interval lies
# on that side of 1, "level" when it holds 1 (the difference is within the rounds' noise).
# With fewer than 3 rounds a side there is no interval. The verdicts are in DIR/verdicts.tsv.
set -euo pipefail

me=bench-compare
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "$me: $*" >&2; exit 1; }
rounds=3
out=build/bench/compare
while getopts "r:o:h" opt; do
  case $opt in
    r) rounds=$OPTARG ;;
    o) out=$OPTARG ;;
    h) usage; exit 0 ;;
    *) die "see -h" ;;
  esac
done
shift $((OPTIND - 1))
[ $# -ge 2 ] || die "which two source trees? (see -h)"
[[ $rounds =~ ^[1-9][0-9]?$ ]] || die "-r takes 1..99"
command -v jq >/dev/null || die "jq is missing (apt-get install jq)"
before=$(cd "$1" 2>/dev/null && pwd) || die "no tree '$1'"
after=$(cd "$2" 2>/dev/null && pwd) || die "no tree '$2'"
shift 2
benches=("$@")
[ ${#benches[@]} -gt 0 ] || benches=(seg nvme shmem)
for t in "$before" "$after"; do
  [ -x "$t/build/bin/ntblend" ] || die "$t/build/bin/ntblend is missing: build that tree first"
done
for b in "${benches[@]}"; do
  case $b in seg|nvme|shmem) ;; *) die "unknown benchmark '$b' (seg, nvme, shmem)" ;; esac
done
mkdir -p "$out"
# The machine's floor before and after all rounds (each run's own JSON has its own too).
. "$(dirname "$0")/bench-floor.sh"
. "$(dirname "$0")/bench-verdict.sh"
floor_init "$after/build/bin" || exit 1
floor_start || exit 1

# run BENCH SIDE TREE ROUND: one benchmark run, its JSON in $out/BENCH-SIDE-ROUND[.json|/]
run() {
  local b=$1 side=$2 tree=$3 r=$4 log="$out/$1-$2-$4.log"
  echo "$me: round $r: $b, $side" >&2
  case $b in
    seg) bash "$tree/scripts/bench-seg.sh" -q -b "$tree/build/bin" -o "$out/seg-$side-$r" >"$log" 2>&1 ;;
    nvme) bash "$tree/scripts/bench-nvme.sh" -r 1 -s 1 -b "$tree/build/bin" -o "$out/nvme-$side-$r.json" >"$log" 2>&1 ;;
    shmem) bash "$tree/scripts/bench-shmem-oshmem.sh" -r 1 -b "$tree/build/bin" -o "$out/shmem-$side-$r.json" >"$log" 2>&1 ;;
  esac || die "$b on $tree failed; see $log"
}
for b in "${benches[@]}"; do
  for r in $(seq "$rounds"); do
    if [ $((r % 2)) = 1 ]; then run "$b" before "$before" "$r"; run "$b" after "$after" "$r"
    else run "$b" after "$after" "$r"; run "$b" before "$before" "$r"; fi
  done
done

# fig BENCH SIDE JQ: the figure in every round of one side, one per line
fig() {
  local b=$1 side=$2 q=$3
  for r in $(seq "$rounds"); do
    case $b in
      seg) f=$out/seg-$side-$r/${q%%:*}; jq -r "${q#*:}" "$f" ;;
      *) jq -r "$q" "$out/$b-$side-$r.json" ;;
    esac
  done
}
printf '%-52s %3s %12s %12s %8s  %-13s %s\n' figure "" before after after/bef "95 % interval" verdict
: >"$out/verdicts.tsv"
row() { # BENCH LABEL hi|lo JQ
  local res b0 a0 r lo hi v
  res=$({ fig "$1" before "$4" | sed 's/^/b /'; fig "$1" after "$4" | sed 's/^/a /'; } | bench_verdict "$3")
  IFS=$'\t' read -r b0 a0 r lo hi v <<<"$res"
  # Ratios (values near 1) need more digits than rates and times.
  local fmt='%-52s %3s %12.1f %12.1f %8s  %-13s %s\n'
  awk -v v="$b0" 'BEGIN { exit !(v < 100) }' && fmt='%-52s %3s %12.3f %12.3f %8s  %-13s %s\n'
  printf "$fmt" "$2" "$3" "$b0" "$a0" "$r" "${lo:+$lo..$hi}" "$v"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$2" "$3" "$b0" "$a0" "$r" "$lo" "$hi" "$v" >>"$out/verdicts.tsv"
}
for b in "${benches[@]}"; do
  case $b in
    seg)
      row seg "scibench store remote/local, mean 64K-4M" hi 'scibench.json:[.results[] | select(.size >= 65536) | .store_ratio] | add / length'
      row seg "scibench store remote MB/s, 1 MiB" hi 'scibench.json:.results[] | select(.size == 1048576) | .store_remote_mbps'
      row seg "scibench load remote ns, 64 B" lo 'scibench.json:.results[] | select(.size == 64) | .load_remote_ns'
      row seg "interrupt round trip median ns / futex's" lo 'intr.json:.ratio'
      row seg "segment DMA write MB/s, 1 MiB, model off" hi 'dma-model-off.json:.results[] | select(.block == 1048576) | .write_mbps'
      row seg "segment DMA read MB/s, 1 MiB, model off" hi 'dma-model-off.json:.results[] | select(.block == 1048576) | .read_mbps'
      row seg "segment DMA write MB/s, 64 KiB, model on" hi 'dma-model-on.json:.results[] | select(.block == 65536) | .write_mbps'
      ;;
    nvme)
      row nvme "NVMe borrowed QD1 median ns" lo '.model_off.borrowed_qd1.lat_median_ns'
      row nvme "NVMe local QD1 median ns" lo '.model_off.local_qd1.lat_median_ns'
      # The median hides waits that slept (a few % of them, tens of µs each): p99 shows them.
      row nvme "NVMe borrowed QD1 p99 ns" lo '.model_off.borrowed_qd1.lat_p99_ns'
      row nvme "NVMe local QD1 p99 ns" lo '.model_off.local_qd1.lat_p99_ns'
      row nvme "NVMe borrowed QD32 IOPS" hi '.model_off.borrowed_qd32.iops'
      row nvme "NVMe local QD32 IOPS" hi '.model_off.local_qd32.iops'
      row nvme "NVMe model on, SQ in borrower, QD1 median ns" lo '.model_on.sq_borrower.lat_median_ns'
      ;;
    shmem)
      for m in $(jq -r '.metrics[].name' "$out/shmem-before-1.json"); do
        row shmem "OpenSHMEM $m, ours/OSHMEM" "$(jq -r --arg m "$m" '.metrics[] | select(.name == $m) | if .better == "higher" then "hi" else "lo" end' "$out/shmem-before-1.json")" \
          ".metrics[] | select(.name == \"$m\") | .ratio"
      done
      ;;
  esac
done
floor_finish
worse=$(awk -F'\t' '$8 == "worse"' "$out/verdicts.tsv" | wc -l)
echo "$me: $worse figure(s) worse beyond the rounds' noise (95 % interval of after/before all on the worse side of 1)"
echo "JSON and logs: $out"
