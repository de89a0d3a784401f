#!/usr/bin/env bash
# The NVMe benchmark: a borrowed NVMe next to the same NVMe used locally (smartio-tocs-2021
# §7.3-7.4). Boots smartio3.ini under a unique name, lends nvme0 out, and runs nvme_bench
# (4 KiB random reads) with the driver on the lender a (the device local) and on the borrower
# b, back to back and interleaved, at QD1 (latency) and QD32 (IOPS). Then boots
# smartio3-latency.ini (latency model on) and compares QD1 command latency with the SQ in the
# lender's RAM and in accel0's BAR next to the NVMe against the SQ in the borrower's RAM, CQ
# in the borrower's (Fig. 34: local RAM, remote RAM, remote GPU memory). Prints a
# summary; shuts the fabrics down (also on failure or Ctrl-C). About two minutes. Each fabric
# first gets an unmeasured warm-up run, so that no configuration pays the namespace file's
# first touches.
# In the first fabric it also measures what a user sees through fio: the ntbnvme engine
# (build/lib/ntbnvme-fio.so) on the borrower against the lender, the same through the NVMe's
# manager (b a client of it), and — the reference a user would otherwise pick — the same fio
# job against a network block device on this machine (nbdkit's memory plugin over a Unix
# socket, fio's nbd engine). The fio parts are skipped, with a note, when fio, the engine or
# nbdkit is missing.
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
usage() { sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; }
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
. "$src/scripts/bench-floor.sh"
floor_init "$bin" || exit 1
floor_start || exit 1
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
  # The namespace is a fresh sparse file, and the model reads it through a mapping: the first
  # read of each block costs the model's thread a page fault (some 20 000 minor and 200 major
  # ones in the first second). nvme_bench reads the same blocks in every run (a fixed seed),
  # so without this unmeasured pass the first configuration (local QD1) alone paid them:
  # 2-11 us where the next ones took 2 us. Twice as long at QD 32 reads every block the
  # measured runs will.
  "$bin/ntblend" --fabric "$fabric" run --host a -- "$bin/nvme_bench" -q --device nvme0 \
    --seconds "$(awk -v s="$secs" 'BEGIN { print 2 * s }')" --qd 32 --json >/dev/null ||
    { echo "bench-nvme: the warm-up run on host a failed on fabric $fabric (see above)" >&2; exit 1; }
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

# ---------------------------------------------------------------- fio
engine="$bin/../lib/ntbnvme-fio.so"
have_fio=0 have_nbd=0
if command -v fio >/dev/null && [ -f "$engine" ]; then
  have_fio=1
  engine=$(cd "$(dirname "$engine")" && pwd)/ntbnvme-fio.so
else
  echo "bench-nvme: no fio or no fio engine ($engine): skipping the fio runs" >&2
fi
if [ $have_fio = 1 ] && command -v nbdkit >/dev/null && fio --enghelp 2>/dev/null | grep -qw nbd; then
  have_nbd=1
else
  echo "bench-nvme: no nbdkit or no nbd engine in fio: skipping the network block device reference" >&2
fi
# fio's read figures as the flat object agg() reads (clat: submission to completion).
fio_json() { # HOST QD SQ_IN CQ_IN
  sed -n '/^{/,$p' | jq -c --arg host "$1" --argjson qd "$2" --arg sq "$3" --arg cq "$4" '
    .jobs[0] | if .error != 0 then error("fio job error \(.error)") else . end |
    .read | {iops: (.iops | round), lat_min_ns: .clat_ns.min, lat_median_ns: .clat_ns.percentile["50.000000"],
             lat_p99_ns: .clat_ns.percentile["99.000000"], verified: true, host: $host, qd: $qd,
             sq_in: $sq, cq_in: $cq}'
}
# QD32 as one tunes fio for a million IOPS: no random map, completions in batches.
fio_qd() { [ "$1" = 1 ] && echo "--iodepth=1" || echo "--iodepth=$1 --iodepth_batch_submit=16 --iodepth_batch_complete_min=8"; }
fio_ntb() { # NAME HOST ROUND QD
  "$bin/ntblend" --fabric "$fabric" run --host "$2" -- fio --output-format=json --name="$1" \
    --ioengine=external:"$engine" --ntb_device=nvme0 --rw=randread --bs=4k --size=1G \
    --norandommap --randrepeat=0 $(fio_qd "$4") --time_based --runtime="$secs" --ramp_time=0.2 \
    2>"$tmp/fio.err" | fio_json "$2" "$4" lender "$([ "$2" = a ] && echo lender || echo borrower)" >"$tmp/$1.$3.json" ||
    { echo "bench-nvme: fio $1 on $2 failed: $(cat "$tmp/fio.err")" >&2; exit 1; }
}
nbd_pid=""
fio_nbd() { # NAME ROUND QD
  fio --output-format=json --name="$1" --ioengine=nbd --uri="nbd+unix:///?socket=$tmp/nbd.sock" \
    --rw=randread --bs=4k --size=1G --norandommap --randrepeat=0 $(fio_qd "$3") --time_based \
    --runtime="$secs" --ramp_time=0.2 2>"$tmp/fio.err" | fio_json nbdkit "$3" - - >"$tmp/$1.$2.json" ||
    { echo "bench-nvme: fio against nbdkit failed: $(cat "$tmp/fio.err")" >&2; exit 1; }
}
if [ $have_nbd = 1 ]; then
  nbdkit --unix "$tmp/nbd.sock" --foreground memory 1G & nbd_pid=$!
  trap 'down; [ -z "$nbd_pid" ] || kill "$nbd_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
  for _ in $(seq 100); do [ -S "$tmp/nbd.sock" ] && break; sleep 0.05; done
  # Written once, so reads return data rather than holes.
  fio --name=fill --ioengine=nbd --uri="nbd+unix:///?socket=$tmp/nbd.sock" --rw=write --bs=1M \
    --size=1G --iodepth=4 >/dev/null 2>&1
fi
if [ $have_fio = 1 ]; then
  ref=""
  [ -z "$nbd_pid" ] || ref=", and the memory plugin of nbdkit over a Unix socket"
  echo "bench-nvme: fio: the ntbnvme engine on a (local) and b (borrowed)$ref" >&2
  for r in $(seq "$rounds"); do
    fio_ntb fio_local_qd1 a "$r" 1
    fio_ntb fio_borrowed_qd1 b "$r" 1
    [ $have_nbd = 0 ] || fio_nbd fio_nbd_qd1 "$r" 1
    fio_ntb fio_local_qd32 a "$r" 32
    fio_ntb fio_borrowed_qd32 b "$r" 32
    [ $have_nbd = 0 ] || fio_nbd fio_nbd_qd32 "$r" 32
  done
fi
[ -z "$nbd_pid" ] || { kill "$nbd_pid"; wait "$nbd_pid" 2>/dev/null || true; nbd_pid=""; }

# ---------------------------------------------------------------- through the manager
"$bin/ntblend" --fabric "$fabric" nvme manager nvme0 --host a >/dev/null
echo "bench-nvme: the NVMe's manager on a; b a client of it" >&2
for r in $(seq "$rounds"); do
  run client_qd1 b "$r" --qd 1
  run client_qd32 b "$r" --qd 32
  [ $have_fio = 0 ] || fio_ntb fio_client_qd1 b "$r" 1
done
"$bin/ntblend" --fabric "$fabric" nvme stop nvme0 >/dev/null
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
echo "== through the NVMe's manager: b is one of its clients (queue pairs created by the manager)"
hdr ""
row "client on b, QD1 (nvme_bench)" client_qd1
row "client on b, QD32 (nvme_bench)" client_qd32
[ $have_fio = 0 ] || row "client on b, QD1 (fio, ntbnvme engine)" fio_client_qd1
client_ratio=$(div "$(agg client_qd1 lat_median_ns)" "$(agg borrowed_qd1 lat_median_ns)")
echo "client/owner QD1 median latency: x$client_ratio (the I/O path is the same; only queue creation differs)"
fio_part='"fio":null,'
if [ $have_fio = 1 ]; then
  fio_ratio=$(div "$(agg fio_borrowed_qd1 lat_median_ns)" "$(agg fio_local_qd1 lat_median_ns)")
  echo
  echo "== fio, 4 KiB random reads, one job (its own queue pair), latency model off; clat"
  hdr ""
  row "fio ntbnvme, local    (a), QD1" fio_local_qd1
  row "fio ntbnvme, borrowed (b), QD1" fio_borrowed_qd1
  row "fio ntbnvme, local    (a), QD32" fio_local_qd32
  row "fio ntbnvme, borrowed (b), QD32" fio_borrowed_qd32
  echo "borrowed/local QD1 median: x$fio_ratio"
  nbd_part=null
  if [ $have_nbd = 1 ]; then
    row "fio nbd, nbdkit memory over a Unix socket, QD1" fio_nbd_qd1
    row "fio nbd, nbdkit memory over a Unix socket, QD32" fio_nbd_qd32
    nbd_ratio=$(div "$(agg fio_nbd_qd1 lat_median_ns)" "$(agg fio_borrowed_qd1 lat_median_ns)")
    nbd_iops=$(div "$(agg fio_borrowed_qd32 iops)" "$(agg fio_nbd_qd32 iops)")
    echo "network block device / borrowed NVMe: QD1 median latency x$nbd_ratio, QD32 IOPS x$nbd_iops in the NVMe's favour"
    nbd_part=$(printf '{"nbd_qd1":%s,"nbd_qd32":%s,"nbd_borrowed_latency_median_ratio":%s,"borrowed_nbd_iops_ratio":%s}' \
      "$(jconf fio_nbd_qd1)" "$(jconf fio_nbd_qd32)" "$nbd_ratio" "$nbd_iops")
  fi
  fio_part=$(printf '"fio":{"local_qd1":%s,"borrowed_qd1":%s,"local_qd32":%s,"borrowed_qd32":%s,"client_qd1":%s,"borrowed_local_latency_median_ratio":%s,"nbd":%s},' \
    "$(jconf fio_local_qd1)" "$(jconf fio_borrowed_qd1)" "$(jconf fio_local_qd32)" \
    "$(jconf fio_borrowed_qd32)" "$(jconf fio_client_qd1)" "$fio_ratio" "$nbd_part")
fi
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
  printf '"manager":{"client_qd1":%s,"client_qd32":%s,"client_owner_latency_median_ratio":%s},' \
    "$(jconf client_qd1)" "$(jconf client_qd32)" "$client_ratio"
  printf '%s' "$fio_part"
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
floor_finish "$out"
echo
echo "JSON: $out ($(( $(date +%s) - start )) s)"
