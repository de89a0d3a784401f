#!/usr/bin/env bash
# The segment benchmark: boots fresh two-host fabrics under unique names, runs scibench (CPU
# stores and loads on a remote segment next to a local one, 4 B .. 4 MiB), dma_bench on
# two-hosts.ini and on two-hosts-latency.ini (latency model on), and intr_bench --baseline,
# writes every tool's JSON and the plots into an output directory, prints a summary, and shuts
# the fabrics down (also on failure or Ctrl-C).
# Usage: scripts/bench-seg.sh [-o DIR] [-b BUILD_BIN_DIR] [-n ROUNDS] [-q]
#   -o DIR    output directory (default bench-seg/): scibench.json, dma-model-off.json,
#             dma-model-on.json, intr.json and the PNGs tools/plots/plot.sh makes of them
#   -b DIR    where ntblend and the tools are (default $NTBLEND_BIN, else ./build/bin)
#   -n ROUNDS interrupt round trips (default 20000)
#   -q        quick: fewer repeats and bytes (a smoke test; the figures are noisier)
set -euo pipefail

out=bench-seg
bin=${NTBLEND_BIN:-./build/bin}
rounds=20000
quick=0
usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; }
while getopts "o:b:n:qh" opt; do
  case $opt in
    o) out=$OPTARG ;;
    b) bin=$OPTARG ;;
    n) rounds=$OPTARG ;;
    q) quick=1 ;;
    h) usage; exit 0 ;;
    *) echo "bench-seg: see -h" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] || { echo "bench-seg: unexpected argument '$1' (see -h)" >&2; exit 2; }

src=$(cd "$(dirname "$0")/.." && pwd)
bin_abs=$(cd "$bin" 2>/dev/null && pwd) || { echo "bench-seg: no build directory '$bin'; run scripts/build.sh or pass -b DIR" >&2; exit 1; }
bin=$bin_abs
. "$src/scripts/bench-floor.sh"
floor_init "$bin" || exit 1
floor_start || exit 1
for b in ntblend scibench dma_bench intr_bench; do
  [ -x "$bin/$b" ] || { echo "bench-seg: $bin/$b is missing; run scripts/build.sh or pass -b DIR" >&2; exit 1; }
done
command -v gnuplot >/dev/null || echo "bench-seg: gnuplot is missing: no plots (apt-get install gnuplot-nox)" >&2
mkdir -p "$out"
plot=$src/tools/plots/plot.sh
topo=$src/examples/topologies/two-hosts.ini
topo_lat=$src/examples/topologies/two-hosts-latency.ini

# One fabric at a time, each under a name no other run uses; whatever is up goes down at exit.
fabric=""
down() { [ -z "$fabric" ] || "$bin/ntblend" --fabric "$fabric" down >/dev/null 2>&1 || true; fabric=""; }
trap down EXIT
trap 'exit 130' INT TERM
boot() {
  fabric="segb-$$-$1"
  "$bin/ntblend" --fabric "$fabric" up "$2" >/dev/null
}
on_a() { "$bin/ntblend" --fabric "$fabric" run --host a -- "$@"; }
# A tool's --json into FILE; its failure (wrong data, no peer, ...) stops the benchmark.
measure() {
  local file=$1; shift
  if ! on_a "$@" --json >"$out/$file"; then
    echo "bench-seg: '$(basename "$1") ${*:2}' failed on fabric $fabric (see its message above)" >&2
    exit 1
  fi
}
get() { "$plot" -g "$out/$1" "$2"; }
rows() { local f=$1; shift; "$plot" -t "$out/$f" "$@"; }

sci_args=(-r 3) dma_args=(-r 3)
[ $quick = 1 ] && sci_args=(-r 1 -t 3) dma_args=(-r 1 -s 16M) rounds=2000
echo "bench-seg: $(nproc) CPUs; output in $out/" >&2

boot plain "$topo"
echo "bench-seg: fabric $fabric ($(basename "$topo")): scibench, dma_bench, intr_bench" >&2
measure scibench.json "$bin/scibench" "${sci_args[@]}"
measure dma-model-off.json "$bin/dma_bench" "${dma_args[@]}"
measure intr.json "$bin/intr_bench" --baseline -n "$rounds"
down
boot lat "$topo_lat"
echo "bench-seg: fabric $fabric ($(basename "$topo_lat")): dma_bench" >&2
measure dma-model-on.json "$bin/dma_bench" "${dma_args[@]}"
down

pngs=()
if command -v gnuplot >/dev/null; then
  mapfile -t pngs < <("$plot" -o "$out" "$out/scibench.json" "$out/dma-model-off.json" \
    "$out/dma-model-on.json" "$out/intr.json")
fi

# ---------------------------------------------------------------- the summary
size() { awk -v b="$1" 'BEGIN { if (b >= 1048576) printf "%d MiB", b / 1048576; else if (b >= 1024) printf "%d KiB", b / 1024; else printf "%d B", b }'; }

echo
echo "== Remote store bandwidth vs local memcpy (scibench: memcpy into a segment of host b, and"
echo "   into a segment of host a, same run; best of ${sci_args[1]})"
printf '%9s %14s %14s %8s\n' size "remote MB/s" "local MB/s" ratio
while IFS=$'\t' read -r z r l q; do
  [ "$z" -ge 65536 ] || continue
  printf '%9s %14.0f %14.0f %8.2f\n' "$(size "$z")" "$r" "$l" "$q"
done < <(rows scibench.json size store_remote_mbps store_local_mbps store_ratio)
rows scibench.json size store_ratio | awk -F'\t' '$1 >= 65536 { n++; s += $2; if (!m || $2 < m) m = $2; if ($2 > x) x = $2 }
  END { if (n) printf "%9s %29s %8.2f  (mean; min %.2f, max %.2f)\n", "64K-4M", "", s / n, m, x }'

echo
echo "== Remote load latency (scibench: time per memcpy out of the segment, averaged)"
printf '%9s %14s %14s %8s\n' size "remote ns" "local ns" ratio
while IFS=$'\t' read -r z r l; do
  case $z in 4|8|64|256|4096|65536) ;; *) continue ;; esac
  printf '%9s %14.1f %14.1f %8.2f\n' "$(size "$z")" "$r" "$l" "$(awk -v a="$r" -v b="$l" 'BEGIN { print (b > 0 ? a / b : 0) }')"
done < <(rows scibench.json size load_remote_ns load_local_ns)

echo
echo "== Interrupt round trip (intr_bench: seg_intr_trigger a -> b -> a, both sides sleeping;"
echo "   futex: a ping-pong between two processes of host a; $(get intr.json rounds) rounds, interleaved)"
printf '%-26s %10s %10s %10s\n' "" "min ns" "median ns" "p99 ns"
printf '%-26s %10s %10s %10s\n' "seg interrupt" "$(get intr.json min_ns)" "$(get intr.json median_ns)" "$(get intr.json p99_ns)"
printf '%-26s %10s %10s %10s\n' "futex ping-pong" "$(get intr.json baseline_min_ns)" \
  "$(get intr.json baseline_median_ns)" "$(get intr.json baseline_p99_ns)"
printf '%-26s %10s %10s\n' "ratio (median)" "" "$(get intr.json ratio)"

echo
echo "== DMA bandwidth (dma_bench through seg_dma_transfer; write = a -> b, read = b -> a)"
printf '%9s | %-32s | %-32s\n' "" "latency model on" "latency model off"
printf '%9s | %10s %10s %10s | %10s %10s %10s\n' block "write MB/s" "read MB/s" read/write \
  "write MB/s" "read MB/s" read/write
paste <(rows dma-model-on.json block write_mbps read_mbps read_write_ratio) \
      <(rows dma-model-off.json write_mbps read_mbps read_write_ratio) |
  while IFS=$'\t' read -r z w r q w2 r2 q2; do
    printf '%9s | %10.0f %10.0f %10.2f | %10.0f %10.0f %10.2f\n' "$(size "$z")" "$w" "$r" "$q" "$w2" "$r2" "$q2"
  done
rows dma-model-on.json block write_mbps read_mbps | awk -F'\t' '
  { n++; w += $2; r += $3; if ($3 < $2) slower++ }
  END { printf "latency model on: mean write %.0f MB/s, mean read %.0f MB/s, read/write %.2f; reads slower at %d of %d block sizes\n", w / n, r / n, r / w, slower, n }'

verified=yes
for f in scibench.json dma-model-off.json dma-model-on.json intr.json; do
  [ "$(get "$f" verified)" = true ] || verified=no
done
echo
echo "data verified in every run: $verified"
floor_finish "$out/intr.json"
echo "JSON: $out/scibench.json $out/dma-model-off.json $out/dma-model-on.json $out/intr.json"
[ ${#pngs[@]} -eq 0 ] || echo "plots: ${pngs[*]}"
