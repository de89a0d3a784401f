#!/usr/bin/env bash
# ntblend's OpenSHMEM against Open MPI's OSHMEM, side by side in one run: builds
# tools/shmem/osh_bench.c with build/bin/oshcc and with Open MPI's /usr/bin/oshcc, boots a fresh
# four-host fabric (examples/topologies/four-hosts-switch.ini) under a unique name, and runs the
# two implementations alternately for R rounds (which one goes first alternates too), then writes
# a JSON report with each figure's median over the rounds for both and the ratio ours/theirs,
# prints a table, and shuts the fabric down (also on failure or Ctrl-C).
#
# Figures (PE 0 -> PE 1; with ours the two PEs are on hosts a and b, through the switch and the
# NTB windows; Open MPI's PEs are two processes of this machine sharing memory through UCX):
#   shmem_putmem MB/s at each size (many puts, then shmem_quiet)         target ours >= 1.0x
#   shmem_long_p + shmem_quiet ns, shmem_long_g ns                       target ours <= 1.0x
#   shmem_barrier_all ns at 2 and at 4 PEs                               target ours <= 0.5x
#   shmem_long_atomic_fetch_add ns                                       (no target)
# Each run warms up and times every figure REPS times (median of those is the run's figure);
# the report's figure is the median over the rounds.
#
# Right before and right after every 2-PE run, tools/shmem/cpu_pair.c (build/bin/cpu_pair) measures
# what a second CPU adds to a copy of the first --sizes size (64K at least) at that moment (the
# median over a few repetitions of two threads' rate over one's). Ours copies a large put
# with two threads when that pays, and two CPUs of their own copy nearly twice as fast as one;
# when a virtual machine's host runs both CPUs on one core, or other guests hold the second,
# they copy no faster than one, and no library can beat one memcpy. The report gives every
# round's putmem ratio with the lowest speedup measured around its runs, and whether every
# round met the target: all of them, and those in which the machine had two cores (speedup
# >= 1.25).
#
# Usage: scripts/bench-shmem-oshmem.sh [options]
#   -o, --output FILE  JSON report (default build/bench/shmem-vs-oshmem.json); the binaries
#                      and each run's stderr go to the report's directory
#   -r, --rounds R     rounds (default 5); each round runs both implementations at 2 PEs
#                      (every figure) and at 4 PEs (barrier), alternating
#   -b, --bin DIR      ntblend's build/bin (default $NTBLEND_BIN, else ./build/bin)
#   --sizes LIST       putmem sizes, K/M suffixes (default 1M,4M; at most 32M)
#   --iters N          latency operations per timed repetition (default 100000; barrier: N/10)
#   --reps N           timed repetitions per figure in one run (default 5)
#   --install          apt-get install openmpi-bin libopenmpi-dev if they are missing (root)
#   -h, --help         this text
#
# Open MPI (Debian 12: 4.1.4, OpenSHMEM 1.4, UCX 1.13 as its only SPML) is run as
#   OMPI_MCA_osc=^rdma /usr/bin/oshrun [--allow-run-as-root] --oversubscribe --bind-to B -np N
# (osc=^rdma: 4.1.4's osc/rdma leaves a memory hook behind that segfaults every job in
# shmem_finalize; --oversubscribe: 4 PEs on a 2-core machine). Both sides are pinned alike:
# our oshrun pins each PE to a CPU, round-robin, when there are more PEs than CPUs (its
# default, --bind-to core), and Open MPI's gets B = core:overload-allowed then, which does the
# same; with no more PEs than CPUs neither is pinned (B = none). Both get
# SHMEM_SYMMETRIC_SIZE=64M.
set -euo pipefail

me=bench-shmem-oshmem
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "$me: $*" >&2; exit 1; }

out=""
rounds=5
bin=${NTBLEND_BIN:-./build/bin}
sizes=1M,4M
iters=100000
reps=5
install=0
while (($#)); do
  case $1 in
    -o|--output) (($# >= 2)) || die "$1 needs a file"; out=$2; shift 2 ;;
    -r|--rounds) (($# >= 2)) || die "$1 needs a number"; rounds=$2; shift 2 ;;
    -b|--bin) (($# >= 2)) || die "$1 needs a directory"; bin=$2; shift 2 ;;
    --sizes) (($# >= 2)) || die "$1 needs a list"; sizes=$2; shift 2 ;;
    --iters) (($# >= 2)) || die "$1 needs a number"; iters=$2; shift 2 ;;
    --reps) (($# >= 2)) || die "$1 needs a number"; reps=$2; shift 2 ;;
    --install) install=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "--rounds needs a positive number"
[[ $iters =~ ^[1-9][0-9]*$ ]] || die "--iters needs a positive number"
[[ $reps =~ ^[1-9][0-9]*$ ]] && ((reps <= 101)) || die "--reps needs a number from 1 to 101"

# Sizes in bytes (K/M binary suffixes), at most 32M: with a 64M heap, 4 PEs on four hosts fit
# in the adapters' LUTs (docs/openshmem.md).
size_bytes() {
  awk -v s="$1" 'BEGIN { n = s + 0; u = toupper(substr(s, length(s)));
    if (s !~ /^[0-9]+[KkMm]?$/ || n <= 0) exit 1
    if (u == "K") n *= 1024; else if (u == "M") n *= 1048576; print n }'
}
size_bytes_list=()
IFS=, read -r -a size_words <<<"$sizes"
for s in "${size_words[@]}"; do
  b=$(size_bytes "$s") || die "bad size '$s' in --sizes (e.g. 64K,1M,4M)"
  ((b <= 33554432)) || die "size '$s' is over 32M (the 64M symmetric heap must hold it)"
  size_bytes_list+=("$b")
done

src=$(cd "$(dirname "$0")/.." && pwd)
bin_abs=$(cd "$bin" 2>/dev/null && pwd) || die "no build directory '$bin'; run scripts/build.sh or pass -b DIR"
bin=$bin_abs
for b in ntblend oshcc oshrun; do
  [ -x "$bin/$b" ] || die "$bin/$b is missing; run scripts/build.sh or pass -b DIR"
done
[ -n "$out" ] || out=$(dirname "$bin")/bench/shmem-vs-oshmem.json
outdir=$(dirname "$out")
mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)
out=$outdir/$(basename "$out")

# ---------------------------------------------------------------- Open MPI's OSHMEM
ompi_missing() {
  local p
  for p in openmpi-bin libopenmpi-dev; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || return 0
  done
  [ -x /usr/bin/oshcc ] && [ -x /usr/bin/oshrun ] || return 0
  return 1
}
if ompi_missing; then
  if [ $install = 1 ]; then
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then
      command -v sudo >/dev/null || die "need root or sudo to install openmpi-bin libopenmpi-dev"
      sudo=sudo
    fi
    echo "$me: installing openmpi-bin libopenmpi-dev (Open MPI with OSHMEM; pulls in libucx0)" >&2
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq openmpi-bin libopenmpi-dev >/dev/null
    ompi_missing && die "openmpi-bin / libopenmpi-dev still missing after apt-get install"
  else
    die "Open MPI's OSHMEM (/usr/bin/oshcc, /usr/bin/oshrun) is missing: install it with
  apt-get install -y openmpi-bin libopenmpi-dev
or run this script with --install (as root or with sudo)"
  fi
fi
ompi_version=$(dpkg-query -W -f='${Version}' openmpi-bin 2>/dev/null || echo unknown)
ucx_version=$(dpkg-query -W -f='${Version}' libucx0 2>/dev/null || echo unknown)
ompi_run=(/usr/bin/oshrun)
[ "$(id -u)" -eq 0 ] && ompi_run+=(--allow-run-as-root)
ompi_run+=(--oversubscribe)
ncpus=$(nproc)
ompi_env=(OMPI_MCA_osc=^rdma)

# ---------------------------------------------------------------- build osh_bench twice
prog=$src/tools/shmem/osh_bench.c
cflags=(-std=c11 -O2 -Wall -Wextra)
ours_bin=$outdir/osh_bench.ntblend
theirs_bin=$outdir/osh_bench.oshmem
"$bin/oshcc" "${cflags[@]}" -o "$ours_bin" "$prog" || die "building $prog with $bin/oshcc failed"
/usr/bin/oshcc "${cflags[@]}" -o "$theirs_bin" "$prog" || die "building $prog with /usr/bin/oshcc failed"

# The machine's two CPUs, probed around every 2-PE run (see the top of this file).
ONE_CORE_BELOW=1.25
. "$src/scripts/bench-floor.sh"
floor_init "$bin" || exit 1
floor_start || exit 1
probe_bin=$floor_bin
probe_size=$((size_bytes_list[0] < 65536 ? 65536 : size_bytes_list[0])) # cpu_pair: 64K to 64M
probe() {
  "$probe_bin" --size "$probe_size" ||
    die "$probe_bin failed (it measures the machine's CPUs between runs)"
}

# ---------------------------------------------------------------- the fabric
topo=$src/examples/topologies/four-hosts-switch.ini
fabric="oshb-$$"
up=0
down() { [ $up = 0 ] || "$bin/ntblend" --fabric "$fabric" down >/dev/null 2>&1 || true; up=0; }
trap down EXIT
trap 'exit 130' INT TERM
"$bin/ntblend" --fabric "$fabric" up "$topo" >/dev/null || die "cannot bring up $topo as fabric $fabric"
up=1

export SHMEM_SYMMETRIC_SIZE=64M
bench_args=(--iters "$iters" --reps "$reps" --sizes "$sizes")
log=$outdir/shmem-vs-oshmem.stderr.log
: >"$log"

# run IMPL NP TESTS: one job; prints PE 0's JSON line.
run() {
  local impl=$1 np=$2 tests=$3 line rc=0 err
  err=$(mktemp)
  if [ "$impl" = ours ]; then
    line=$(timeout 600 "$bin/oshrun" -np "$np" --fabric "$fabric" "$ours_bin" --test "$tests" \
      "${bench_args[@]}" 2>"$err") || rc=$?
  else
    local bind=none
    ((np > ncpus)) && bind=core:overload-allowed # as our oshrun does by default
    line=$(env "${ompi_env[@]}" timeout 600 "${ompi_run[@]}" --bind-to "$bind" -np "$np" "$theirs_bin" \
      --test "$tests" "${bench_args[@]}" 2>"$err") || rc=$?
  fi
  { echo "== $impl -np $np --test $tests (exit $rc)"; cat "$err"; } >>"$log"
  rm -f "$err"
  line=$(grep '^{' <<<"$line" | tail -n1 || true)
  if [ $rc -ne 0 ] || [ -z "$line" ]; then
    echo "$me: $impl at $np PEs ($tests) failed with status $rc; its messages are in $log:" >&2
    tail -n 20 "$log" >&2
    exit 1
  fi
  grep -q '"verified":true' <<<"$line" || { echo "$me: $impl at $np PEs: data not verified: $line" >&2; exit 1; }
  echo "$line"
}

# A value from one flat JSON object line.
jget() { grep -o "\"$1\":[^,}]*" <<<"$2" | head -n1 | cut -d: -f2- | tr -d '"'; }

# Metrics: name, key in osh_bench's JSON, which run (np2/np4), unit, better, target.
metrics=()
for b in "${size_bytes_list[@]}"; do
  metrics+=("putmem_$(awk -v b="$b" 'BEGIN { if (b % 1048576 == 0) printf "%dMiB", b / 1048576; else printf "%dKiB", b / 1024 }')|put_${b}_mbps|np2|MB/s|higher|1.0")
done
metrics+=("long_p_quiet|p_quiet_ns|np2|ns|lower|1.0" "long_g|g_ns|np2|ns|lower|1.0"
  "barrier_all_2pe|barrier_ns|np2|ns|lower|0.5" "barrier_all_4pe|barrier_ns|np4|ns|lower|0.5"
  "long_atomic_fetch_add|fadd_ns|np2|ns|lower|")
declare -A vals=()   # "metric|impl" -> space-separated per-round values
declare -A round_ratios=() # metric -> space-separated per-round ratios ours / theirs
declare -A round_met=()    # metric -> "every_round_met worst two_core_rounds_met worst_two_core"
runs=()              # every run's JSON line, tagged
rtts=()              # per round: the larger cross-CPU round trip (ns) probed around its 2-PE runs
speedups=()          # per round: the lowest copy speedup probed around its 2-PE runs

echo "$me: fabric '$fabric' ($(basename "$topo")), $(nproc) CPUs, $rounds rounds;" \
  "Open MPI $ompi_version (UCX $ucx_version)" >&2
for ((r = 1; r <= rounds; r++)); do
  if ((r % 2)); then order=(ours theirs); else order=(theirs ours); fi
  for job in "np2|2|put,p,g,fadd,barrier" "np4|4|barrier"; do
    IFS='|' read -r jname np tests <<<"$job"
    for impl in "${order[@]}"; do
      echo "$me: round $r/$rounds: $impl, $np PEs ($tests)" >&2
      cpus=""
      if [ "$jname" = np2 ]; then
        before=$(probe)
        line=$(run "$impl" "$np" "$tests")
        after=$(probe)
        cpus=",\"cpus_before\":$before,\"cpus_after\":$after"
        # The machine's floor around the round: the larger cross-CPU round trip probed.
        for rt in "$(jget line_rtt_ns "$before")" "$(jget line_rtt_ns "$after")"; do
          [ -n "$rt" ] && [ "$rt" != null ] || continue
          rtts[r]=$(awk -v a="${rtts[r]:-0}" -v b="$rt" 'BEGIN { print (b > a ? b : a) }')
        done
        for sp in "$(jget copy_speedup "$before")" "$(jget copy_speedup "$after")"; do
          [ "$sp" = null ] && sp=1
          speedups[r]=$(awk -v a="${speedups[r]:-$sp}" -v b="$sp" 'BEGIN { print (b < a ? b : a) }')
        done
      else
        line=$(run "$impl" "$np" "$tests")
      fi
      runs+=("{\"round\":$r,\"side\":\"$impl\",\"pes\":$np,\"result\":$line$cpus}")
      for m in "${metrics[@]}"; do
        IFS='|' read -r name key mjob _ <<<"$m"
        [ "$mjob" = "$jname" ] || continue
        v=$(jget "$key" "$line")
        [ -n "$v" ] || die "no '$key' in $impl's output: $line"
        vals["$name|$impl"]="${vals["$name|$impl"]:-} $v"
      done
      [ "$impl" = ours ] && [ -z "${ours_name:-}" ] && ours_name=$(jget impl "$line") && ours_spec=$(jget spec "$line")
      [ "$impl" = theirs ] && [ -z "${theirs_spec:-}" ] && theirs_spec=$(jget spec "$line")
    done
  done
done
down

# ---------------------------------------------------------------- report
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
json_list() { tr ' ' '\n' | grep -v '^$' | paste -sd, -; }

echo
echo "medians over $rounds rounds (each run: median of $reps timed repetitions); ratio = ours / OSHMEM"
printf '%-24s %6s %14s %14s %9s %9s %5s\n' metric unit "ntblend" "OSHMEM" "ours/them" target met
metric_json=()
all_met=true
for m in "${metrics[@]}"; do
  IFS='|' read -r name key mjob unit better target <<<"$m"
  o=$(median <<<"${vals["$name|ours"]}")
  t=$(median <<<"${vals["$name|theirs"]}")
  ratio=$(awk -v o="$o" -v t="$t" 'BEGIN { printf "%.3f", (t > 0 ? o / t : 0) }')
  met=null tgt_txt="-" tgt_json=null
  if [ -n "$target" ]; then
    if [ "$better" = higher ]; then
      tgt_txt=">= $target"
      met=$(awk -v r="$ratio" -v g="$target" 'BEGIN { print (r >= g ? "true" : "false") }')
    else
      tgt_txt="<= $target"
      met=$(awk -v r="$ratio" -v g="$target" 'BEGIN { print (r <= g ? "true" : "false") }')
    fi
    tgt_json="\"$tgt_txt\""
    [ "$met" = true ] || all_met=false
  fi
  printf '%-24s %6s %14.1f %14.1f %9.2f %9s %5s\n' "$name" "$unit" "$o" "$t" "$ratio" "$tgt_txt" \
    "$([ "$met" = null ] && echo - || { [ "$met" = true ] && echo yes || echo NO; })"
  # Every round's ratio, and whether each met the target: all rounds, and (for the puts, which
  # a second CPU speeds up) the rounds in which the machine had two cores.
  every=null worst=null every2=null worst2=null
  mapfile -t rr < <(paste -d' ' <(printf '%s\n' ${vals["$name|ours"]}) <(printf '%s\n' ${vals["$name|theirs"]}) |
    awk '{ printf "%.3f\n", ($2 > 0 ? $1 / $2 : 0) }')
  round_ratios["$name"]="${rr[*]}"
  if [ -n "$target" ]; then
    read -r every worst every2 worst2 < <(paste -d' ' <(printf '%s\n' "${rr[@]}") <(printf '%s\n' "${speedups[@]}") |
      awk -v g="$target" -v hi="$([ "$better" = higher ] && echo 1 || echo 0)" -v one="$ONE_CORE_BELOW" '
        function ok(r) { return hi ? r >= g : r <= g }
        function worse(r, w) { return w == "" || (hi ? r < w : r > w) }
        { if (worse($1, w)) w = $1; if (!ok($1)) bad = 1
          if ($2 >= one) { n2++; if (worse($1, w2)) w2 = $1; if (!ok($1)) bad2 = 1 } }
        END { printf "%s %s %s %s\n", bad ? "false" : "true", w,
              n2 ? (bad2 ? "false" : "true") : "null", n2 ? w2 : "null" }')
    [[ $name == putmem_* ]] || every2=null worst2=null
  fi
  round_met["$name"]="$every $worst $every2 $worst2"
  metric_json+=("{\"name\":\"$name\",\"unit\":\"$unit\",\"better\":\"$better\",\"pes\":${mjob#np},\"ours\":$o,\"theirs\":$t,\"ratio\":$ratio,\"target\":$tgt_json,\"met\":$met,\"every_round_met\":$every,\"worst_round_ratio\":$worst,\"two_core_rounds_met\":$every2,\"worst_two_core_round_ratio\":$worst2,\"round_ratios\":[$(json_list <<<"${rr[*]}")],\"ours_rounds\":[$(json_list <<<"${vals["$name|ours"]}")],\"theirs_rounds\":[$(json_list <<<"${vals["$name|theirs"]}")]}")
done

# The puts round by round, with what a second CPU added to a copy around the round's runs.
put_names=()
for m in "${metrics[@]}"; do [[ $m == putmem_* ]] && put_names+=("${m%%|*}"); done
echo
echo "putmem per round (ours / OSHMEM) and the copy speedup of a second CPU, the lowest measured"
echo "right before and after the round's 2-PE runs (tools/shmem/cpu_pair.c). Below $ONE_CORE_BELOW the"
echo "machine had one core's worth for copying (the host ran both CPUs on one core, or other guests"
echo "held the second), and no put can beat one memcpy there. The 2-PE barrier of both, in ns,"
echo "and the cross-CPU round trip (the larger of the two probes), the machine's floor, beside them."
printf '%5s' round
for n in "${put_names[@]}"; do printf ' %13s' "$n"; done
printf ' %13s %13s %13s %10s\n' "copy speedup" "barrier2 ours" "barrier2 OSH" "rtt ns"
read -r -a bo <<<"${vals["barrier_all_2pe|ours"]:-}"
read -r -a bt <<<"${vals["barrier_all_2pe|theirs"]:-}"
one_core=()
for ((r = 1; r <= rounds; r++)); do
  printf '%5d' "$r"
  for n in "${put_names[@]}"; do
    read -r -a rr <<<"${round_ratios["$n"]}"
    printf ' %13s' "${rr[r - 1]}"
  done
  sp=${speedups[r]}
  printf ' %13s %13s %13s %10s' "$sp" "${bo[r - 1]:--}" "${bt[r - 1]:--}" "${rtts[r]:--}"
  if awk -v s="$sp" -v g="$ONE_CORE_BELOW" 'BEGIN { exit !(s < g) }'; then
    printf '   one core'
    one_core+=("$r")
  fi
  echo
done
echo "one-core rounds: ${#one_core[@]} of $rounds${one_core[*]:+ (${one_core[*]})}"
yn() { case $1 in true) echo yes ;; false) echo NO ;; *) echo "-" ;; esac; }
for n in "${put_names[@]}"; do
  read -r every worst every2 worst2 <<<"${round_met["$n"]}"
  printf '%s >= 1.0 in every round: %s (lowest %s); in every two-core round: %s (lowest %s)\n' \
    "$n" "$(yn "$every")" "$worst" "$(yn "$every2")" "$worst2"
done

{
  printf '{"benchmark":"shmem-vs-oshmem","date":"%s","cpus":%d,"rounds":%d,"iters":%d,"reps":%d,\n' \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$ncpus" "$rounds" "$iters" "$reps"
  printf ' "ours":{"impl":"%s","spec":"%s","launcher":"%s","topology":"examples/topologies/four-hosts-switch.ini","placement":"round-robin, one PE per host"},\n' \
    "$ours_name" "$ours_spec" "build/bin/oshrun -np N --fabric F (pins PEs to CPUs when N > $ncpus)"
  printf ' "theirs":{"impl":"Open MPI OSHMEM","openmpi":"%s","ucx":"%s","spec":"%s","launcher":"%s","env":"%s"},\n' \
    "$ompi_version" "$ucx_version" "$theirs_spec" "${ompi_run[*]} --bind-to B -np N (B: core:overload-allowed when N > $ncpus, else none)" "${ompi_env[*]} SHMEM_SYMMETRIC_SIZE=64M"
  printf ' "one_core_below":%s,"copy_speedup_rounds":[%s],"one_core_rounds":[%s],\n' \
    "$ONE_CORE_BELOW" "$(json_list <<<"${speedups[*]}")" "$(json_list <<<"${one_core[*]}")"
  printf ' "all_targets_met":%s,\n "metrics":[\n' "$all_met"
  for i in "${!metric_json[@]}"; do
    sep=,; [ "$i" -eq $((${#metric_json[@]} - 1)) ] && sep=""
    printf '  %s%s\n' "${metric_json[$i]}" "$sep"
  done
  printf ' ],\n "runs":[\n'
  for i in "${!runs[@]}"; do
    sep=,; [ "$i" -eq $((${#runs[@]} - 1)) ] && sep=""
    printf '  %s%s\n' "${runs[$i]}" "$sep"
  done
  printf ' ]}\n'
} >"$out"
floor_finish "$out"
echo "$me: report in $out (stderr of every run: $log)" >&2
