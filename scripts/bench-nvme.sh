#!/usr/bin/env bash
# The NVMe benchmark: a borrowed NVMe next to the same NVMe used locally (smartio-tocs-2021
# §7.3-7.4). Boots smartio3.ini under a unique name, lends nvme0 out, and runs nvme_bench
# (4 KiB random reads) with the driver on the lender a (the device local) and on the borrower
# b, back to back and interleaved, at QD1 (latency) and QD32 (IOPS). Then boots
# smartio3-latency.ini (latency model on) and compares QD1 command latency with the SQ in the
# lender's RAM and in accel0's BAR next to the NVMe against the SQ in the borrower's RAM, CQ
# in the borrower's (Fig. 34: local RAM, remote RAM, remote GPU memory). Prints a
# summary; shuts the fabrics down (also on failure or Ctrl-C). About a minute.
# Usage: scripts/bench-nvme.sh [-o FILE] [-b BUILD_BIN_DIR] [-r ROUNDS] [-s SECONDS]
#   -o FILE     all results as one JSON object (default bench-nvme.json)
#   -b DIR      where ntblend and nvme_bench are (default $NTBLEND_BIN, else ./build/bin)
#   -r ROUNDS   repeats of every configuration, interleaved (default 3; medians are reported)
#   -s SECONDS  measuring time of one run (default 1.5)
set -euo pipefail

out=bench-nvme.json
bin=${NTBLEND_BIN:-./build/bin}
rounds=3
secs=1.5
usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; }
while getopts "o:b:r:s:h" opt; do
  case $opt in
    o) out=$OPTARG ;;
    b) bin=$OPTARG ;;
    r) rounds=$OPTARG ;;
    s) secs=$OPTARG ;;
    h) usage; exit 0 ;;
    *) echo "bench-nvme: see -h" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] || { echo "bench-nvme: unexpected argument '$1' (see -h)" >&2; exit 2; }
[[ $rounds =~ ^[1-9][0-9]?$ ]] || { echo "bench-nvme: -r takes 1..99" >&2; exit 2; }
[[ $secs =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "bench-nvme: -s takes seconds" >&2; exit 2; }

src=$(cd "$(dirname "$0")/.." && pwd)
bin_abs=$(cd "$bin" 2>/dev/null && pwd) || { echo "bench-nvme: no build directory '$bin'; run scripts/build.sh or pass -b DIR" >&2; exit 1; }
bin=$bin_abs
for b in ntblend nvme_bench; do
  [ -x "$bin/$b" ] || { echo "bench-nvme: $bin/$b is missing; run scripts/build.sh or pass -b DIR" >&2; exit 1; }
done
topo=$src/examples/topologies/smartio3.ini
topo_lat=$src/examples/topologies/smartio3-latency.ini
tmp=$(mktemp -d)

# One fabric at a time, under a name no other run uses; whatever is up goes down at exit, with
# the namespace's backing file the NVMe model made for it.
fabric=""
down() {
  [ -z "$fabric" ] || "$bin/ntblend" --fabric "$fabric" down >/dev/null 2>&1 || true
  [ -z "$fabric" ] || [ -n "${NTBLEND_NVME_DIR:-}" ] || rm -rf "/var/tmp/ntblend/$fabric"
  fabric=""
}
trap 'down; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
boot() {
  fabric="nvmeb-$$-$1"
  "$bin/ntblend" --fabric "$fabric" up "$2" >/dev/null
  "$bin/ntblend" --fabric "$fabric" device add nvme0 >/dev/null
  "$bin/ntblend" --fabric "$fabric" device add accel0 >/dev/null
}
# run NAME HOST ARGS...: one nvme_bench run, its JSON kept as $tmp/NAME.R.json
run() {
  local name=$1 host=$2 r=$3; shift 3
  if ! "$bin/ntblend" --fabric "$fabric" run --host "$host" -- "$bin/nvme_bench" -q \
      --device nvme0 --seconds "$secs" --json "$@" >"$tmp/$name.$r.json"; then
    echo "bench-nvme: 'nvme_bench $*' on host $host failed on fabric $fabric (see above)" >&2
    exit 1
  fi
  [ "$(get "$tmp/$name.$r.json" verified)" = true ] || { echo "bench-nvme: $name: data not verified" >&2; exit 1; }
}
# A top-level value of a flat JSON object.
get() { awk -v k="$2" '{ if (match($0, "\"" k "\":(\"[^\"]*\"|[^,}]*)")) { v = substr($0, RSTART + length(k) + 3, RLENGTH - length(k) - 3); gsub(/"/, "", v); print v; exit } }' "$1"; }
# The median (or min) over the rounds of one key of configuration NAME.
agg() {
  local name=$1 key=$2 how=${3:-median}
  for f in "$tmp/$name".*.json; do get "$f" "$key"; done | sort -g |
    awk -v how="$how" '{ v[NR] = $1 } END { if (how == "min") print v[1]; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.0f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
div() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
us() { awk -v a="$1" 'BEGIN { printf "%.1f", a / 1000 }'; }
# The aggregate of one configuration as a JSON object.
jconf() {
  printf '{"iops":%s,"lat_min_ns":%s,"lat_median_ns":%s,"lat_p99_ns":%s,"sq_in":"%s","cq_in":"%s","host":"%s","qd":%s}' \
    "$(agg "$1" iops)" "$(agg "$1" lat_min_ns min)" "$(agg "$1" lat_median_ns)" "$(agg "$1" lat_p99_ns)" \
    "$(get "$tmp/$1.1.json" sq_in)" "$(get "$tmp/$1.1.json" cq_in)" "$(get "$tmp/$1.1.json" host)" \
    "$(get "$tmp/$1.1.json" qd)"
}

start=$(date +%s)
echo "bench-nvme: $(nproc) CPUs, $rounds rounds of ${secs} s per configuration" >&2
boot off "$topo"
echo "bench-nvme: fabric $fabric ($(basename "$topo")): local (driver on a) vs borrowed (driver on b)" >&2
for r in $(seq "$rounds"); do
  run local_qd1 a "$r" --qd 1
  run borrowed_qd1 b "$r" --qd 1
  run local_qd32 a "$r" --qd 32
  run borrowed_qd32 b "$r" --qd 32
done
down
boot lat "$topo_lat"
echo "bench-nvme: fabric $fabric ($(basename "$topo_lat")): SQ in borrower RAM vs lender RAM" >&2
for r in $(seq "$rounds"); do
  run lat_sq_borrower b "$r" --qd 1 --sq-in borrower --cq-in borrower
  run lat_sq_lender b "$r" --qd 1 --sq-in lender --cq-in borrower
  run lat_sq_peer b "$r" --qd 1 --sq-in bar:accel0 --cq-in borrower
  run lat_local a "$r" --qd 1
  run lat_borrowed_qd32 b "$r" --qd 32
  run lat_local_qd32 a "$r" --qd 32
done
down

# ---------------------------------------------------------------- the summary
row() { # label name
  printf '%-44s %9s %11s %11s %11s\n' "$1" "$(agg "$2" iops)" "$(us "$(agg "$2" lat_min_ns min)")" \
    "$(us "$(agg "$2" lat_median_ns)")" "$(us "$(agg "$2" lat_p99_ns)")"
}
hdr() { printf '%-44s %9s %11s %11s %11s\n' "$1" IOPS "min us" "median us" "p99 us"; }
lat_ratio=$(div "$(agg borrowed_qd1 lat_median_ns)" "$(agg local_qd1 lat_median_ns)")
p99_ratio=$(div "$(agg borrowed_qd1 lat_p99_ns)" "$(agg local_qd1 lat_p99_ns)")
min_ratio=$(div "$(agg borrowed_qd1 lat_min_ns min)" "$(agg local_qd1 lat_min_ns min)")
iops_ratio=$(div "$(agg borrowed_qd32 iops)" "$(agg local_qd32 iops)")
dev_iops=$(for f in "$tmp"/local_qd32.*.json "$tmp"/borrowed_qd32.*.json; do get "$f" iops; done | sort -g | tail -1)
saved=$(( $(agg lat_sq_borrower lat_median_ns) - $(agg lat_sq_lender lat_median_ns) ))
saved_min=$(( $(agg lat_sq_borrower lat_min_ns min) - $(agg lat_sq_lender lat_min_ns min) ))
saved_peer=$(( $(agg lat_sq_borrower lat_median_ns) - $(agg lat_sq_peer lat_median_ns) ))
saved_peer_min=$(( $(agg lat_sq_borrower lat_min_ns min) - $(agg lat_sq_peer lat_min_ns min) ))
lat_iops_ratio=$(div "$(agg lat_borrowed_qd32 iops)" "$(agg lat_local_qd32 iops)")

echo
echo "== 4 KiB random reads, latency model off (medians of $rounds runs; min: lowest seen)"
hdr ""
row "local    (driver on a), QD1" local_qd1
row "borrowed (driver on b), QD1" borrowed_qd1
row "local    (driver on a), QD32" local_qd32
row "borrowed (driver on b), QD32" borrowed_qd32
echo "remote/local QD1 latency: median x$lat_ratio, p99 x$p99_ratio, min x$min_ratio"
echo "remote/local QD32 IOPS:   x$iops_ratio"
echo "one device thread sustains: $dev_iops IOPS (best QD32 run; the model serves all queues of a controller with one thread)"
echo
echo "== QD1 with the latency model on (smartio-tocs-2021 Fig. 34: CQ in the borrower's RAM)"
hdr ""
row "borrowed, SQ in borrower RAM (b)" lat_sq_borrower
row "borrowed, SQ in lender RAM (a)" lat_sq_lender
row "borrowed, SQ in accel0's BAR2 (a, peer)" lat_sq_peer
row "local (driver on a, queues in a)" lat_local
row "borrowed QD32, queues in b" lat_borrowed_qd32
row "local QD32" lat_local_qd32
echo "SQ in lender RAM saves ${saved} ns of median command latency (${saved_min} ns at the minimum);"
echo "SQ in accel0's BAR saves ${saved_peer} ns (${saved_peer_min} ns at the minimum). Medians move with the"
echo "machine's load; the minimum is the model's path cost plus the emulation's own."
echo "remote/local QD32 IOPS with the model on: x$lat_iops_ratio"

{
  printf '{"tool":"bench-nvme","cpus":%s,"rounds":%s,"seconds_per_run":%s,"block":4096,' "$(nproc)" "$rounds" "$secs"
  printf '"model_off":{"topology":"%s",' "$(basename "$topo")"
  for c in local_qd1 borrowed_qd1 local_qd32 borrowed_qd32; do printf '"%s":%s,' "$c" "$(jconf $c)"; done
  printf '"remote_local_latency_median_ratio":%s,"remote_local_latency_p99_ratio":%s,"remote_local_latency_min_ratio":%s,' \
    "$lat_ratio" "$p99_ratio" "$min_ratio"
  printf '"remote_local_iops_ratio":%s,"device_thread_iops":%s},' "$iops_ratio" "$dev_iops"
  printf '"model_on":{"topology":"%s",' "$(basename "$topo_lat")"
  for c in lat_sq_borrower lat_sq_lender lat_sq_peer lat_local lat_borrowed_qd32 lat_local_qd32; do printf '"%s":%s,' "${c#lat_}" "$(jconf $c)"; done
  printf '"sq_in_lender_saves_median_ns":%s,"sq_in_lender_saves_min_ns":%s,' "$saved" "$saved_min"
  printf '"sq_in_peer_bar_saves_median_ns":%s,"sq_in_peer_bar_saves_min_ns":%s,"remote_local_iops_ratio":%s},' \
    "$saved_peer" "$saved_peer_min" "$lat_iops_ratio"
  printf '"runs":['
  first=1
  for f in "$tmp"/*.json; do
    [ $first = 1 ] || printf ','
    first=0
    n=$(basename "$f" .json)
    printf '{"config":"%s","round":%s,"result":%s}' "${n%.*}" "${n##*.}" "$(cat "$f")"
  done
  printf ']}\n'
} >"$out"
echo
echo "JSON: $out ($(( $(date +%s) - start )) s)"
