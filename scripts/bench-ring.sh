#!/usr/bin/env bash
# The ring seed's Figs. 4-7 (openshmem-switchless-ntb-ring §5.1-5.2) on the emulated switchless
# ring, with the acceptance ratio: builds tools/shmem/ring_bench.c with build/bin/oshcc, boots
# examples/topologies/ring{5,4,3}-latency.ini one after the other under unique fabric names
# (ring{5,4,3}.ini with --no-latency; each is shut down after use, also on failure or Ctrl-C),
# runs one benchmark at a time, and writes build/bench/ring/{fig4a,fig5,fig6,fig7,summary}.json
# and fig*.png (gnuplot, tools/plots/ring.gp). PE i runs on host i; host a is PE 0.
#
# Figures:
#   fig4a  seed Fig. 4a: throughput vs request size 4 KiB..1 MiB on ring5 of the raw neighbour
#          link (ntb_perf a -> b by DMA engine, one channel, chunk = size: the seed's "low-level
#          PCIe NTB interface"; also by CPU stores) next to OpenSHMEM shmem_putmem PE 0 -> PE 1
#          (a neighbour) and PE 0 -> PE 2 (two hops, relayed by host b) with 1 transfer thread
#          (the seed's setting) and with the default 2.
#   fig5   seed Fig. 5(a)-(d): latency of one shmem_putmem + shmem_quiet (and a getmem) to the
#          farthest PE vs size, for 3, 4, 5 hosts, one panel per SHMEM_RING_THREADS 1, 2, 4, 8.
#   fig6   seed Fig. 6: shmem_putmem throughput PE 0 -> PE 2 on ring5 vs size, threads 1,2,4,8.
#   fig7   seed Fig. 7: turn-around latency vs hosts (3, 4, 5) and threads (1, 2, 4, 8): every
#          PE at once puts SIZE bytes to the PE --distance hops away (default the farthest) and
#          waits in shmem_quiet for the completion to come back; mean over PEs.
#   summary  the acceptance metric: throughput to a non-neighbour (PE 0 -> PE 2 on ring5,
#          default threads) / raw neighbour link (ntb_perf --dma, one channel) at 256 KiB,
#          512 KiB and 1 MiB, measured side by side: R rounds alternating raw and library (which
#          goes first alternates too), each figure the best of 3 after a warm-up, then the
#          median over rounds (seed 0.80-0.85; target >= 0.90). Also the ratio to the modelled
#          wire rate (link_mbps, 6000 unless --link-mbps).
#   fig4b  seed Fig. 4b: where a put's time goes in software. One shmem_putmem + shmem_quiet
#          PE 0 -> PE 2 (through host b's node) at a time, 1 KiB..1 MiB, with SHMEM_PROFILE=json
#          (the library's per-stage timing, docs/openshmem.md): us per put in each stage (wait,
#          stage, dma, publish, doorbell, relay, deliver, ack, quiet) and % of its total, beside
#          the paper's steps (scripts/bench-ring-4b.sh). Needs jq.
#
# Where the emulated DMA engines run: on real adapters they are hardware and take no CPU; here
# each is a thread of a host's agent that copies the data. A put to a non-neighbour keeps two
# of them busy (host a's and the relaying host b's), and when the scheduler puts them on the
# CPU of the PE that feeds them, the emulation competes with the software it measures (on 2
# CPUs that alone moved the 256 KiB ratio between about 0.5 and 0.97 from run to run). So the ring5
# fabric of fig4a, fig6 and the summary comes up with `ntblend up --dma-cpus` = the last CPU
# this script may use, and oshrun's binding puts PE 0 on the first: raw link and library
# alike (--dma-cpus none: anywhere, as before). Figs. 5 and 7 (every PE busy in fig7) run on
# fabrics without it.
#
# Usage: scripts/bench-ring.sh [fig4b] [options]
#   (no mode)          every figure above; fig4b: only Fig. 4b (ring5, about 20 s; --quick 10 s)
#   -o, --outdir DIR   where JSON, TSV, PNG, binary and logs go (default build/bench/ring)
#   -b, --bin DIR      ntblend's build/bin (default $NTBLEND_BIN, else ./build/bin)
#   -r, --rounds R     ratio rounds (default 7; --quick 3)
#   --threads LIST     SHMEM_RING_THREADS values for figs 5-7 (default 1,2,4,8)
#   --turn-size SIZE   fig7 put size (default 256K)
#   --distance D       fig7 ring distance (default: the farthest PE)
#   --no-latency       use ring{3,4,5}.ini (model off) instead of ring{3,4,5}-latency.ini
#   --link-mbps N      the latency-model topologies with link_mbps = N instead of 6000: on a
#                      machine with few CPUs the DMA engines' copies of two busy hops at
#                      6000 MB/s (one thread per engine, each a memcpy at a few GB/s) can be
#                      what limits the emulation rather than the transport; a slower link
#                      leaves CPU to spare and shows the transport's own efficiency
#   --dma-cpus LIST    the CPUs of the DMA engines for fig4a, fig6 and the summary (ntblend up
#                      --dma-cpus; default: the last CPU this script may use; none: any CPU)
#   --quick            fewer sizes (4K,16K,64K,256K,1M), repetitions and rounds: a few minutes
#   --no-plot          skip the PNGs
#   -h, --help         this text
# A default run takes 1-2 minutes on a 2-core machine (longer when it is shared), --quick under
# half a minute. Every library run has a 180 s timeout; a failed run is retried once (the
# retries are counted in summary.json).
set -euo pipefail

me=bench-ring
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "$me: $*" >&2; exit 1; }

outdir=""
only_4b=0
bin=${NTBLEND_BIN:-./build/bin}
rounds=""
threads_list=1,2,4,8
turn_size=256K
distance=""
latency=1
link_mbps=""
dma_cpus=auto
quick=0
plot=1
while (($#)); do
  case $1 in
    -o|--outdir) (($# >= 2)) || die "$1 needs a directory"; outdir=$2; shift 2 ;;
    -b|--bin) (($# >= 2)) || die "$1 needs a directory"; bin=$2; shift 2 ;;
    -r|--rounds) (($# >= 2)) || die "$1 needs a number"; rounds=$2; shift 2 ;;
    --threads) (($# >= 2)) || die "$1 needs a list"; threads_list=$2; shift 2 ;;
    --turn-size) (($# >= 2)) || die "$1 needs a size"; turn_size=$2; shift 2 ;;
    --distance) (($# >= 2)) || die "$1 needs a number"; distance=$2; shift 2 ;;
    --no-latency) latency=0; shift ;;
    --link-mbps) (($# >= 2)) || die "$1 needs a rate in MB/s"; link_mbps=$2; shift 2 ;;
    --dma-cpus) (($# >= 2)) || die "$1 needs a CPU list or none"; dma_cpus=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --no-plot) plot=0; shift ;;
    fig4b) only_4b=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[ -n "$rounds" ] || rounds=$((quick ? 3 : 7))
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "--rounds needs a positive number"
[[ $turn_size =~ ^[1-9][0-9]*[KkMm]?$ ]] || die "--turn-size needs a size like 64K or 1M"
[ -z "$distance" ] || [[ $distance =~ ^[1-9]$ ]] || die "--distance needs a number from 1 to 4"
[ -z "$link_mbps" ] || [[ $link_mbps =~ ^[1-9][0-9]*$ ]] || die "--link-mbps needs a rate in MB/s"
[ -z "$link_mbps" ] || [ $latency = 1 ] || die "--link-mbps needs the latency model (not --no-latency)"
if [ "$dma_cpus" = auto ]; then # the last CPU we may use; none with only one
  allowed=$(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status)
  last=${allowed##*,}; last=${last##*-}
  dma_cpus=$([ "$allowed" = "$last" ] && echo none || echo "$last")
fi
[ "$dma_cpus" = none ] || [[ $dma_cpus =~ ^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$ ]] ||
  die "--dma-cpus needs a CPU list like 1 or 2-3, or none"
IFS=, read -r -a threads <<<"$threads_list"
for t in "${threads[@]}"; do
  [[ $t =~ ^[1-8]$ ]] || die "--threads takes values from 1 to 8 (SHMEM_RING_THREADS)"
done

if [ $quick = 1 ]; then
  sizes=(4096 16384 65536 262144 1048576)
  reps=3 iters=30 turn_iters=30 raw_total=16M bw_bytes=16M
else
  sizes=(4096 8192 16384 32768 65536 131072 262144 524288 1048576)
  reps=7 iters=100 turn_iters=100 raw_total=64M bw_bytes=64M
fi
ratio_sizes=(262144 524288 1048576)
# Fig. 4b: the seed's request sizes, 1 kB to 1024 kB.
if [ $quick = 1 ]; then sizes_4b=(4096 65536 1048576); else sizes_4b=(1024 4096 16384 65536 262144 1048576); fi
sizes_arg=$(printf '%s,' "${sizes[@]}"); sizes_arg=${sizes_arg%,}
ratio_arg=$(printf '%s,' "${ratio_sizes[@]}"); ratio_arg=${ratio_arg%,}

src=$(cd "$(dirname "$0")/.." && pwd)
bin_abs=$(cd "$bin" 2>/dev/null && pwd) || die "no build directory '$bin'; run scripts/build.sh or pass -b DIR"
bin=$bin_abs
. "$src/scripts/bench-floor.sh"
. "$src/scripts/bench-ring-4b.sh"
floor_init "$bin" || exit 1
floor_start || exit 1
for b in ntblend oshcc oshrun oshrelay ntb_perf; do
  [ -x "$bin/$b" ] || die "$bin/$b is missing; run scripts/build.sh or pass -b DIR"
done
[ -n "$outdir" ] || outdir=$(dirname "$bin")/bench/ring
mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)
if [ $plot = 1 ] && ! command -v gnuplot >/dev/null; then
  echo "$me: gnuplot is missing (apt-get install gnuplot-nox): no PNGs" >&2
  plot=0
fi

topo_of() { # HOSTS -> topology file
  if [ -n "$link_mbps" ]; then echo "$outdir/ring$1-latency-$link_mbps.ini"
  elif [ $latency = 1 ]; then echo "$src/examples/topologies/ring$1-latency.ini"
  else echo "$src/examples/topologies/ring$1.ini"; fi
}
if [ -n "$link_mbps" ]; then # the same topologies with another link rate
  for n in 3 4 5; do
    sed "s/^link_mbps *=.*/link_mbps = $link_mbps/" "$src/examples/topologies/ring$n-latency.ini" \
      >"$(topo_of $n)"
    grep -q "^link_mbps = $link_mbps" "$(topo_of $n)" || die "ring$n-latency.ini has no link_mbps line"
  done
fi
for n in 3 4 5; do [ -f "$(topo_of $n)" ] || die "$(topo_of $n) is missing"; done

# ---------------------------------------------------------------- build
prog=$src/tools/shmem/ring_bench.c
rb=$outdir/ring_bench
"$bin/oshcc" -std=c11 -O2 -Wall -Wextra -o "$rb" "$prog" || die "building $prog with $bin/oshcc failed"

# ---------------------------------------------------------------- fabrics
fabric=""
down() { [ -z "$fabric" ] || "$bin/ntblend" --fabric "$fabric" down >/dev/null 2>&1 || true; fabric=""; }
trap down EXIT
trap 'exit 130' INT TERM
up() { # HOSTS [ntblend up options]
  down
  fabric="ring$1-$$-$RANDOM"
  "$bin/ntblend" --fabric "$fabric" up "$(topo_of "$1")" "${@:2}" >/dev/null ||
    { fabric=""; die "cannot bring up $(topo_of "$1")${2:+ $*}"; }
  nhosts=$1
}

log=$outdir/bench-ring.log
: >"$log"
retry_file=$outdir/.retries   # lib runs in a subshell: count its retries in a file
: >"$retry_file"

# A value from one flat JSON object line.
jget() { grep -o "\"$1\":[^,}]*" <<<"$2" | head -n1 | cut -d: -f2- | tr -d '"'; }
# The "results" rows of a ring_bench line as TSV: size then the given keys.
jrows() { awk -v keys="$2" '
  function get(s, k,   v) { if (match(s, "\"" k "\":(\"[^\"]*\"|[^,}]*)")) { v = substr(s, RSTART + length(k) + 3, RLENGTH - length(k) - 3); gsub(/"/, "", v); return v } return "" }
  { r = $0; if (!sub(/.*"results":\[\{/, "", r)) next; sub(/\}\].*/, "", r)
    nk = split(keys, K, " "); n = split(r, rows, /\},\{/)
    for (i = 1; i <= n; i++) { line = get(rows[i], "size"); for (j = 1; j <= nk; j++) line = line "\t" get(rows[i], K[j]); print line } }' <<<"$1"; }
# The value of KEY in the row of SIZE.
jrow() { jrows "$1" "$3" | awk -F'\t' -v s="$2" '$1 == s { print $2 }'; }
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
json_list() { tr ' ' '\n' | grep -v '^$' | paste -sd, -; }

# lib THREADS ARGS...: one ring_bench job on every host of the fabric; prints PE 0's JSON line.
lib() {
  local t=$1; shift
  local attempt line rc err
  for attempt in 1 2; do
    err=$(mktemp)
    rc=0
    line=$(SHMEM_RING_THREADS=$t timeout 180 "$bin/oshrun" -np "$nhosts" --fabric "$fabric" \
      "$rb" "$@" 2>"$err") || rc=$?
    { echo "== ring$nhosts threads $t: ring_bench $* (exit $rc, attempt $attempt)"; cat "$err"; } >>"$log"
    rm -f "$err"
    line=$(grep '^{' <<<"$line" | tail -n1 || true)
    if [ $rc -eq 0 ] && [ -n "$line" ] && grep -q '"verified":true' <<<"$line"; then
      echo "$line" >>"$log"
      echo "$line"
      return 0
    fi
    echo "$me: ring$nhosts, threads $t, ring_bench $*: exit $rc${line:+, $line}" >&2
    echo x >>"$retry_file"
  done
  tail -n 20 "$log" >&2
  die "ring_bench failed twice (messages in $log)"
}

# raw MODE SIZE: ntb_perf host a -> host b (a's right adapter), one thread; prints its JSON.
raw() {
  local flag="" line rc=0
  [ "$1" = dma ] && flag=--dma
  line=$(timeout 120 "$bin/ntblend" --fabric "$fabric" run --host a -- "$bin/ntb_perf" -a 1 --port 8 \
    $flag -c "$2" -s "$raw_total" --json 2>>"$log") || rc=$?
  echo "== ntb_perf $1 -c $2 (exit $rc): $line" >>"$log"
  [ $rc -eq 0 ] && grep -q '"verified":true' <<<"$line" || die "ntb_perf $1 -c $2 failed (exit $rc; see $log)"
  echo "$line"
}

model=$([ $latency = 1 ] && echo true || echo false)
stamp=$(date -u +%Y-%m-%dT%H:%M:%SZ)
header() { # [none: a figure of the fabrics without --dma-cpus]
  local d=${1:-$dma_cpus}
  printf '"date":"%s","cpus":%d,"dma_cpus":%s,"latency_model":%s,"link_mbps":%s,"quick":%s,"topologies":"%s"' \
  "$stamp" "$(nproc)" "$([ "$d" = none ] && echo null || echo "\"$d\"")" "$model" "$([ $latency = 1 ] && echo "${link_mbps:-6000}" || echo null)" \
  "$([ $quick = 1 ] && echo true || echo false)" \
  "examples/topologies/ring{3,4,5}$([ $latency = 1 ] && echo -latency).ini${link_mbps:+ with link_mbps = $link_mbps}"; }
secs0=$SECONDS
echo "$me: $(nproc) CPUs, latency model $([ $latency = 1 ] && echo on || echo off)," \
  "threads ${threads[*]}, $rounds ratio rounds$([ $quick = 1 ] && echo ', quick')," \
  "DMA engines $([ "$dma_cpus" = none ] && echo 'on any CPU' || echo "on CPU $dma_cpus") for fig4a, fig6 and the ratio;" \
  "results in $outdir" >&2

# ================================================================ ring5: fig4a, fig6, ratios
if [ "$dma_cpus" = none ]; then up 5; else up 5 --dma-cpus "$dma_cpus"; fi
if [ $only_4b = 1 ]; then
  fig4b_run "${sizes_4b[@]}"
  down
  fig4b_report
  floor_finish "$outdir/fig4b.json"
  echo "$me: done in $((SECONDS - secs0)) s: $outdir/fig4b.{json,tsv}$([ $plot = 1 ] && echo ' and fig4b.png'); log $log" >&2
  exit 0
fi
echo "$me: [ring5] fig4a: raw link (ntb_perf a -> b, DMA and CPU) at ${#sizes[@]} sizes" >&2
declare -A rawd rawc
raw_json=()
for s in "${sizes[@]}"; do
  j=$(raw dma "$s"); rawd[$s]=$(jget mbps "$j"); raw_json+=("$j")
  j=$(raw cpu "$s"); rawc[$s]=$(jget mbps "$j"); raw_json+=("$j")
done
echo "$me: [ring5] fig4a: putmem PE 0 -> PE 1 (neighbour)" >&2
neigh=$(lib 2 --mode bw --target 1 --sizes "$sizes_arg" --bytes "$bw_bytes" --reps "$reps")
declare -A f6
for t in "${threads[@]}"; do
  echo "$me: [ring5] fig6: putmem PE 0 -> PE 2, SHMEM_RING_THREADS=$t" >&2
  f6[$t]=$(lib "$t" --mode bw --target 2 --sizes "$sizes_arg" --bytes "$bw_bytes" --reps "$reps")
done
# Fig. 4a's non-neighbour lines are 1 thread (the seed's setting) and the default 2.
for t in 1 2; do
  [ -n "${f6[$t]:-}" ] || f6[$t]=$(lib "$t" --mode bw --target 2 --sizes "$sizes_arg" --bytes "$bw_bytes" --reps "$reps")
done
double=$(lib 1 --mode bw --target 2 --double --sizes "$ratio_arg" --bytes "$bw_bytes" --reps "$reps")

echo "$me: [ring5] ratio: $rounds rounds of raw (ntb_perf --dma) and library (PE 0 -> PE 2) at 256K, 512K, 1M" >&2
declare -A rr lr
ratio_runs=()
for ((r = 1; r <= rounds; r++)); do
  if ((r % 2)); then order=(raw lib); else order=(lib raw); fi
  for side in "${order[@]}"; do
    if [ "$side" = raw ]; then
      for s in "${ratio_sizes[@]}"; do
        j=$(raw dma "$s")
        rr[$s]="${rr[$s]:-} $(jget mbps "$j")"
        ratio_runs+=("{\"round\":$r,\"side\":\"raw\",\"result\":$j}")
      done
    else
      j=$(lib 2 --mode bw --target 2 --sizes "$ratio_arg" --bytes "$bw_bytes" --reps 3)
      for s in "${ratio_sizes[@]}"; do lr[$s]="${lr[$s]:-} $(jrow "$j" "$s" best_mbps)"; done
      ratio_runs+=("{\"round\":$r,\"side\":\"lib\",\"result\":$j}")
    fi
  done
done

fig4b_run "${sizes_4b[@]}"

# ================================================================ figs 5 and 7 on 5, 4, 3 hosts
declare -A f5 f7
for n in 5 4 3; do
  [ "$n" = 5 ] && [ "$dma_cpus" = none ] || up "$n"
  dist=${distance:-$((n / 2))}
  ((dist < n)) || die "--distance $dist is not below $n hosts"
  for t in "${threads[@]}"; do
    echo "$me: [ring$n] fig5 latency and fig7 turn-around, SHMEM_RING_THREADS=$t" >&2
    f5[$n,$t]=$(lib "$t" --mode lat --sizes "$sizes_arg" --iters "$iters" --reps "$reps")
    f7[$n,$t]=$(lib "$t" --mode turnaround --distance "$dist" --sizes "$turn_size" --iters "$turn_iters" --reps "$reps")
  done
done
down

# ================================================================ files
tsv() { printf '%s\n' "$@"; }
# fig4a
{
  echo "# size	raw_dma_mbps	raw_cpu_mbps	lib_neighbour_mbps	lib_far_t1_mbps	lib_far_t2_mbps"
  for s in "${sizes[@]}"; do
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$s" "${rawd[$s]}" "${rawc[$s]}" "$(jrow "$neigh" "$s" mbps)" \
      "$(jrow "${f6[1]}" "$s" mbps)" "$(jrow "${f6[2]}" "$s" mbps)"
  done
} >"$outdir/fig4a.tsv"
{
  printf '{"figure":"fig4a","mirrors":"seed Fig. 4a: raw NTB link vs OpenSHMEM put throughput","hosts":5,%s,\n' "$(header)"
  printf ' "raw":"ntb_perf -a 1 --port 8 (a -> b) -T 1 -c SIZE -s %s, DMA engine and CPU stores","library":"ring_bench --mode bw, shmem_putmem from shmem_malloc source, N puts then shmem_quiet",\n' "$raw_total"
  printf ' "raw_runs":[%s],\n' "$(IFS=,; echo "${raw_json[*]}")"
  printf ' "lib_neighbour":%s,\n "lib_far_threads1":%s,\n "lib_far_threads2":%s,\n "lib_far_double_put_threads1":%s}\n' \
    "$neigh" "${f6[1]}" "${f6[2]}" "$double"
} >"$outdir/fig4a.json"
# fig6
{
  printf '# size'; for t in "${threads[@]}"; do printf '\tthreads_%s' "$t"; done; echo
  for s in "${sizes[@]}"; do
    printf '%s' "$s"; for t in "${threads[@]}"; do printf '\t%s' "$(jrow "${f6[$t]}" "$s" mbps)"; done; echo
  done
} >"$outdir/fig6.tsv"
{
  printf '{"figure":"fig6","mirrors":"seed Fig. 6: put throughput PE 0 -> PE 2 (two hops) vs size and threads","hosts":5,%s,"runs":[\n' "$(header)"
  i=0; for t in "${threads[@]}"; do
    printf '%s {"threads":%s,"result":%s}\n' "$([ $i = 0 ] || echo ,)" "$t" "${f6[$t]}"; i=1
  done
  printf ']}\n'
} >"$outdir/fig6.json"
# fig5: one TSV per thread count, columns hosts 3 4 5 (put + quiet and get)
for t in "${threads[@]}"; do
  {
    echo "# size	put_us_3	put_us_4	put_us_5	get_us_3	get_us_4	get_us_5"
    for s in "${sizes[@]}"; do
      printf '%s' "$s"
      for k in put_us get_us; do for n in 3 4 5; do printf '\t%s' "$(jrow "${f5[$n,$t]}" "$s" "$k")"; done; done
      echo
    done
  } >"$outdir/fig5-t$t.tsv"
done
{
  printf '{"figure":"fig5","mirrors":"seed Fig. 5(a)-(d): put + quiet latency to the farthest PE vs size, hosts 3-5, per thread count",%s,"runs":[\n' "$(header none)"
  i=0; for n in 3 4 5; do for t in "${threads[@]}"; do
    printf '%s {"hosts":%s,"threads":%s,"result":%s}\n' "$([ $i = 0 ] || echo ,)" "$n" "$t" "${f5[$n,$t]}"; i=1
  done; done
  printf ']}\n'
} >"$outdir/fig5.json"
# fig7
{
  printf '# hosts'; for t in "${threads[@]}"; do printf '\tthreads_%s' "$t"; done; echo
  for n in 3 4 5; do
    printf '%s' "$n"; for t in "${threads[@]}"; do printf '\t%s' "$(jrows "${f7[$n,$t]}" turnaround_us | cut -f2)"; done; echo
  done
} >"$outdir/fig7.tsv"
{
  printf '{"figure":"fig7","mirrors":"seed Fig. 7: turn-around latency of simultaneous puts from every PE vs hosts and threads","size":"%s",%s,"runs":[\n' "$turn_size" "$(header none)"
  i=0; for n in 3 4 5; do for t in "${threads[@]}"; do
    printf '%s {"hosts":%s,"threads":%s,"result":%s}\n' "$([ $i = 0 ] || echo ,)" "$n" "$t" "${f7[$n,$t]}"; i=1
  done; done
  printf ']}\n'
} >"$outdir/fig7.json"

# summary: the ratios
echo
echo "non-neighbour (PE 0 -> PE 2, ring5, default threads) / raw neighbour link (ntb_perf --dma, 1 channel)"
wire_mbps=${link_mbps:-6000}
echo "medians over $rounds rounds (each: best of 3 after a warm-up); wire = link_mbps $wire_mbps"
printf '%-9s %12s %12s %8s %10s %8s %6s\n' size "raw MB/s" "lib MB/s" ratio "lib/wire" target met
ratio_json=()
all_met=true
for s in "${ratio_sizes[@]}"; do
  rm_=$(median <<<"${rr[$s]}"); lm=$(median <<<"${lr[$s]}")
  ratio=$(awk -v l="$lm" -v r="$rm_" 'BEGIN { printf "%.3f", (r > 0 ? l / r : 0) }')
  wire=$(awk -v l="$lm" -v w="$wire_mbps" 'BEGIN { printf "%.3f", l / w }')
  met=$(awk -v x="$ratio" 'BEGIN { print (x >= 0.90 ? "true" : "false") }')
  [ "$met" = true ] || all_met=false
  printf '%-9s %12.1f %12.1f %8.3f %10.3f %8s %6s\n' "$((s / 1024))K" "$rm_" "$lm" "$ratio" "$wire" ">= 0.90" \
    "$([ "$met" = true ] && echo yes || echo NO)"
  ratio_json+=("{\"size\":$s,\"raw_mbps\":$rm_,\"lib_mbps\":$lm,\"ratio\":$ratio,\"lib_over_wire\":$wire,\"met\":$met,\"raw_rounds\":[$(json_list <<<"${rr[$s]}")],\"lib_rounds\":[$(json_list <<<"${lr[$s]}")]}")
done
{
  printf '{"benchmark":"bench-ring","metric":"throughput to a non-neighbour / raw neighbour-link throughput at >= 256 KiB","seed":"0.80-0.85","target":0.90,%s,\n' "$(header)"
  printf ' "raw":"ntb_perf --dma -T 1 -c SIZE -s %s, host a -> b (best of 3)","library":"ring_bench --mode bw PE 0 -> PE 2 on ring5, SHMEM_RING_THREADS=2, --bytes %s (best of 3)","rounds":%d,\n' \
    "$raw_total" "$bw_bytes" "$rounds"
  printf ' "all_met":%s,"retries":%d,"seconds":%d,\n "ratios":[\n' "$all_met" "$(wc -l <"$retry_file")" "$((SECONDS - secs0))"
  for i in "${!ratio_json[@]}"; do
    printf '  %s%s\n' "${ratio_json[$i]}" "$([ "$i" -eq $((${#ratio_json[@]} - 1)) ] || echo ,)"
  done
  printf ' ],\n "runs":[\n'
  for i in "${!ratio_runs[@]}"; do
    printf '  %s%s\n' "${ratio_runs[$i]}" "$([ "$i" -eq $((${#ratio_runs[@]} - 1)) ] || echo ,)"
  done
  printf ' ]}\n'
} >"$outdir/summary.json"
floor_finish "$outdir/summary.json"

# tables of the figures
echo
echo "fig4a/fig6: MB/s by size (raw = ntb_perf a -> b; lib = shmem_putmem from PE 0)"
printf '%-8s %10s %10s %10s' size raw_dma raw_cpu lib_nbr
for t in "${threads[@]}"; do printf ' %10s' "far_t$t"; done; echo
for s in "${sizes[@]}"; do
  printf '%-8s %10.0f %10.0f %10.0f' "$((s / 1024))K" "${rawd[$s]}" "${rawc[$s]}" "$(jrow "$neigh" "$s" mbps)"
  for t in "${threads[@]}"; do printf ' %10.0f' "$(jrow "${f6[$t]}" "$s" mbps)"; done; echo
done
echo
echo "fig5: put + quiet latency (us) to the farthest PE, hosts 3/4/5, by threads"
printf '%-8s' size; for t in "${threads[@]}"; do printf ' %20s' "t$t: h3/h4/h5"; done; echo
for s in "${sizes[@]}"; do
  printf '%-8s' "$((s / 1024))K"
  for t in "${threads[@]}"; do
    printf ' %20s' "$(for n in 3 4 5; do printf '%.0f/' "$(jrow "${f5[$n,$t]}" "$s" put_us)"; done | sed 's|/$||')"
  done; echo
done
echo
echo "fig7: turn-around latency (us, mean over PEs) of $turn_size puts, every PE at once"
printf '%-6s' hosts; for t in "${threads[@]}"; do printf ' %10s' "t$t"; done; echo
for n in 3 4 5; do
  printf '%-6s' "$n"; for t in "${threads[@]}"; do printf ' %10.1f' "$(jrows "${f7[$n,$t]}" turnaround_us | cut -f2)"; done; echo
done

# ================================================================ plots
if [ $plot = 1 ]; then
  gp=$src/tools/plots/ring.gp
  mlabel=$([ $latency = 1 ] && echo "latency model on, links ${link_mbps:-6000} MB/s" || echo "latency model off")
  tl=$(IFS=' '; echo "${threads[*]}")
  gnuplot -e "dir='$src/tools/plots/'; fig='4a'; in='$outdir/fig4a.tsv'; out='$outdir/fig4a.png'; title='Fig. 4a: raw neighbour link vs OpenSHMEM putmem, 5-host ring ($mlabel)'" "$gp"
  gnuplot -e "dir='$src/tools/plots/'; fig='6'; in='$outdir/fig6.tsv'; threads='$tl'; out='$outdir/fig6.png'; title='Fig. 6: putmem PE 0 -> PE 2 (two hops) on the 5-host ring by transfer threads ($mlabel)'" "$gp"
  gnuplot -e "dir='$src/tools/plots/'; fig='5'; in='$outdir/fig5-t'; threads='$tl'; out='$outdir/fig5.png'; title='Fig. 5: putmem + quiet latency to the farthest PE by hosts, one panel per thread count ($mlabel)'" "$gp"
  gnuplot -e "dir='$src/tools/plots/'; fig='7'; in='$outdir/fig7.tsv'; threads='$tl'; out='$outdir/fig7.png'; title='Fig. 7: turn-around latency, every PE putting $turn_size at once ($mlabel)'" "$gp"
fi
fig4b_report
echo "$me: done in $((SECONDS - secs0)) s: $outdir/{fig4a,fig4b,fig5,fig6,fig7,summary}.json$([ $plot = 1 ] && echo ' and fig*.png'); log $log" >&2
