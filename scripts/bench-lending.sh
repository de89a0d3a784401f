#!/usr/bin/env bash
# Device Lending measured (issue 9; smartio-tocs-2021 §7.1, device-lending-kvm-multidevice-2019
# §6) with the drivers written against the driver model (include/ntblend/pci.h), one command:
#   bw    accel_drv's bandwidthTest-style copies on an accelerator used by its own host (accel0
#         on a) and by a borrower (the same binary on b, accel0 lent to it), host->device and
#         device->host MB/s and the lent/local ratio; smartio3.ini with the latency model off,
#         and the same topology with it on
#   p2p   latency model on (smartio-p2p-latency.ini): a peer-to-peer copy by one accelerator's
#         engine into the other's memory BAR in the local baseline (accel0+accel1 used by their
#         own host a) and the three cases of the 2019 paper: both lent
#         by one lender (accel0+accel1 of a, to b), one lent and one the borrower's own
#         (accel0 of a lent to c, with c's accel2), lent by two lenders (accel0 of a and accel2
#         of c, to b); hops of the path (NTB crossings + cluster switches, from the fabric's
#         routes: `ntblend status --json`), median time per 4 KiB copy and MB/s of larger ones
#   map   the median cost of one dma_map_single+dma_unmap_single of 4 KiB on a lent function
#         and on a local one, side by side in one process (accel_drv --map-bench;
#         tests/system/topologies/lend-dma.ini: the borrower's IOMMU on)
#   fig21 smartio-tocs-2021 Fig. 21: fio 4 KiB random reads at QD 1, the buffer mapped and
#         unmapped around every I/O (ntbnvme engine, ntb_map=per-io), the lender's own NVMe vs
#         the same NVMe lent (examples/topologies/lend-nvme.ini with the lender's IOMMU on too, so
#         both sides do the same mapping work); lent/local with the latency model off (of
#         the medians over rounds, and paired: a round runs the two back to back, in ABBA
#         order, and the median of the rounds' ratios is reported), and the completion-latency
#         CDF of both with it on. Skipped, with a note, without fio or an engine that has
#         ntb_map.
#   fig21eq  the same fio runs on examples/topologies/chassis.ini (latency model on): an NVMe in an
#         expansion chassis lent by a to c, and c's own NVMe in a chassis of its own, so that both
#         paths have the same hops (the paper's setup); the local NVMe is c's, so both runs share
#         c's IOMMU and mapping work. Paired lent/local (target <= 1.02).
#   iommu smartio-tocs-2021 Fig. 31: accel0 in a's chassis lent to c, accel_drv copies with a's
#         IOMMU off (peer to peer in the chassis) and on (through a's root complex, reads split);
#         two fabrics up at once, rounds alternating; off/on per direction (target reads >= 4)
#   fig22 smartio-tocs-2021 Fig. 22 on chassis.ini: c's own accel1 and a's accel0 lent to c,
#         the same hops, copied by one accel_drv run each round
#   fig23 smartio-tocs-2021 Fig. 23: accel0 lent over chassis.ini's back-to-back cable and
#         through a cluster switch instead (one more hop), copies of several sizes
# Every round runs each case once, the cases interleaved; the figures are medians over rounds.
# Writes the JSON (every round's figures and the medians) and a PNG per figure (gnuplot,
# tools/plots/lending-*.gp) and prints a summary. Fabrics are booted under unique names in
# $NTBLEND_SHM_DIR and shut down at exit (also on failure or Ctrl-C).
# Usage: scripts/bench-lending.sh [-o FILE.json] [-p DIR] [-b BIN_DIR] [-r ROUNDS] [-s SIZE]
#                                 [-t SECONDS] [-n N] [-q] [PART...]
#   -o FILE   JSON output (default bench-lending.json)
#   -p DIR    where the PNGs go (default: beside the JSON; docs/ for the documentation)
#   -b DIR    where ntblend and accel_drv are (default $NTBLEND_BIN, else ./build/bin)
#   -r N      rounds (default 5)
#   -s SIZE   bytes per accel_drv copy for bw and the p2p rate (default 4M)
#   -t SECS   fio run time per case and round (default 3)
#   -n N      map+unmap pairs per map round (default 20000)
#   -q        quick: 2 rounds, 1M copies, 1 s fio runs, 2000 map pairs (a smoke test)
#   PART      any of bw p2p map fig21 fig21eq iommu fig22 fig23 (default: all)
set -euo pipefail

out=bench-lending.json
plotdir=""
bin=${NTBLEND_BIN:-./build/bin}
rounds=5
size=4M
secs=3
mapn=20000
p2p_n=3000
quick=false
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
for a in "$@"; do [ "$a" = --help ] && { usage; exit 0; }; done
while getopts "o:p:b:r:s:t:n:qh" opt; do
  case $opt in
    o) out=$OPTARG ;;
    p) plotdir=$OPTARG ;;
    b) bin=$OPTARG ;;
    r) rounds=$OPTARG ;;
    s) size=$OPTARG ;;
    t) secs=$OPTARG ;;
    n) mapn=$OPTARG ;;
    q) rounds=2 size=1M secs=1 mapn=2000 p2p_n=300 quick=true ;;
    h) usage; exit 0 ;;
    *) echo "bench-lending: see -h" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(bw p2p map fig21 fig21eq iommu fig22 fig23)
for p in "${parts[@]}"; do
  case $p in bw|p2p|map|fig21|fig21eq|iommu|fig22|fig23) ;; *) echo "bench-lending: unknown part '$p' (bw p2p map fig21 fig21eq iommu fig22 fig23; see -h)" >&2; exit 2 ;; esac
done
want() { local p; for p in "${parts[@]}"; do [ "$p" = "$1" ] && return 0; done; return 1; }
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "bench-lending: -r takes a positive number" >&2; exit 2; }
[[ $secs =~ ^[1-9][0-9]*$ ]] || { echo "bench-lending: -t takes a positive number of seconds" >&2; exit 2; }
[[ $mapn =~ ^[1-9][0-9]*$ ]] || { echo "bench-lending: -n takes a positive number" >&2; exit 2; }
[[ $size =~ ^[1-9][0-9]*[kKmM]?$ ]] || { echo "bench-lending: -s takes bytes, with k or M (e.g. 4M)" >&2; exit 2; }

src=$(cd "$(dirname "$0")/.." && pwd)
abs=$(cd "$bin" 2>/dev/null && pwd) || { echo "bench-lending: no build directory '$bin'; run scripts/build.sh or pass -b DIR" >&2; exit 1; }
bin=$abs
. "$src/scripts/bench-floor.sh"
floor_init "$bin" || exit 1
floor_start || exit 1
for b in ntblend accel_drv; do
  [ -x "$bin/$b" ] || { echo "bench-lending: $bin/$b is missing; run scripts/build.sh or pass -b DIR" >&2; exit 1; }
done
for t in jq gnuplot; do
  command -v $t >/dev/null || { echo "bench-lending: $t is missing (apt-get install jq gnuplot-nox)" >&2; exit 1; }
done
[ -n "$plotdir" ] || plotdir=$(dirname "$out")
mkdir -p "$plotdir"
topos=$src/examples/topologies

fabric=""
tmp=$(mktemp -d)
down() { [ -z "$fabric" ] || "$bin/ntblend" --fabric "$fabric" down >/dev/null 2>&1 || true; fabric=""; }
trap 'down; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
nb() { "$bin/ntblend" --fabric "$fabric" "$@"; }
boot() { # NAME TOPOLOGY
  fabric="lendb-$$-$1"
  nb up "$2" >/dev/null
  echo "bench-lending: fabric $fabric ($(basename "$2"))" >&2
}
# TOPOLOGY with the latency model on (its defaults), into $tmp.
with_latency() {
  local f=$tmp/$(basename "$1" .ini)-latency.ini
  { cat "$1"; printf '\n[latency]\nenabled = yes\n'; } >"$f"
  echo "$f"
}
# A copy of TOPO with host HOST's IOMMU on too (a [host] section without an iommu key).
with_iommu() { # TOPO HOST
  local f=$tmp/$(basename "$1" .ini)-iommu-$2.ini
  awk -v h="[host $2]" '{ print } $0 == h { print "iommu = on" }' "$1" >"$f"
  grep -q "^\\[host $2\\]" "$f" || { echo "bench-lending: no host $2 in $1" >&2; exit 1; }
  echo "$f"
}
lend() { nb device lend "$1" --to "$2" >/dev/null; }
reclaim() { nb device reclaim "$1" >/dev/null; }
# Run accel_drv on HOST with ARGS; its output into $tmp/drv.out; a failed check stops us.
drv() {
  local host=$1; shift
  if ! nb run --host "$host" -- "$bin/accel_drv" "$@" >"$tmp/drv.out" 2>"$tmp/drv.err"; then
    echo "bench-lending: 'accel_drv $*' on host $host failed on fabric $fabric:" >&2
    cat "$tmp/drv.out" "$tmp/drv.err" >&2
    exit 1
  fi
}
slot() { nb lspci --host "$1" --json | jq -r --arg d "$2" '.[0].functions[] | select(.name == $d) | .slot'; }
# rows.tsv: part, case, key, round, value
row() { printf '%s\t%s\t%s\t%s\t%s\n' "$@" >>"$tmp/rows.tsv"; }
# The rates of accel_drv's run on function SLOT (in $tmp/drv.out) as rows: host->device under
# key H2D, device->host under key D2H.
rates() { # PART CASE ROUND SLOT H2D D2H
  local line h2d d2h
  line=$(grep "^0000:$4 " "$tmp/drv.out")
  h2d=$(sed -n 's/.*host->device \([0-9.]*\) MB\/s.*/\1/p' <<<"$line")
  d2h=$(sed -n 's/.*device->host \([0-9.]*\) MB\/s.*/\1/p' <<<"$line")
  [ -n "$h2d" ] && [ -n "$d2h" ] || { echo "bench-lending: no rates from accel_drv: $(cat "$tmp/drv.out")" >&2; exit 1; }
  row "$1" "$2" "$5" "$3" "$h2d"
  row "$1" "$2" "$6" "$3" "$d2h"
}
: >"$tmp/rows.tsv"
median() { # PART CASE KEY
  awk -F'\t' -v p="$1" -v c="$2" -v k="$3" '$1 == p && $2 == c && $3 == k { print $5 }' "$tmp/rows.tsv" |
    sort -g | awk '{ v[++n] = $1 } END { if (n) print (n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2) }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print "-"; else printf "%.3f", a / b }'; }
echo "bench-lending: $(nproc) CPUs, $rounds rounds; parts: ${parts[*]}" >&2
summary=()

# ---------------------------------------------------------------- bw: local vs lent
if want bw; then
  iters=8
  for model in off on; do
    topo=$topos/smartio3.ini
    [ $model = on ] && topo=$(with_latency "$topo")
    boot "bw-$model" "$topo"
    for r in $(seq "$rounds"); do
      order="local lent"
      [ $((r % 2)) = 0 ] && order="lent local" # neither always first
      for where in $order; do
        if [ $where = local ]; then
          drv a --size "$size" --iters $iters
          rates bw "$model-$where" "$r" "$(slot a accel0)" h2d_mbps d2h_mbps
        else
          lend accel0 b
          drv b --size "$size" --iters $iters
          rates bw "$model-$where" "$r" "$(slot b accel0)" h2d_mbps d2h_mbps
          reclaim accel0
        fi
      done
    done
    down
  done
  {
    printf '# model\tdirection\tlocal\tlent\n'
    for model in off on; do
      for d in h2d d2h; do
        printf '%s\t%s\t%s\t%s\n' "$model" "$d" "$(median bw $model-local ${d}_mbps)" "$(median bw $model-lent ${d}_mbps)"
      done
    done
  } >"$tmp/bw.tsv"
  gnuplot -e "dir='$src/tools/plots/'; in='$tmp/bw.tsv'; out='$plotdir/lending-bw.png'; size='$size'" \
    "$src/tools/plots/lending-bw.gp"
  summary+=("" "== accel_drv copies, accel0 used by its own host (local) and lent to b (lent): MB/s, median"
    "   of $rounds rounds of $iters x $size each way")
  summary+=("$(printf '%-16s | %9s %9s %7s | %9s %9s %7s' "" local lent ratio local lent ratio)"
    "$(printf '%-16s | %-27s | %-27s' "" "latency model off" "latency model on")")
  for d in h2d d2h; do
    l0=$(median bw off-local ${d}_mbps) b0=$(median bw off-lent ${d}_mbps)
    l1=$(median bw on-local ${d}_mbps) b1=$(median bw on-lent ${d}_mbps)
    summary+=("$(printf '%-16s | %9.0f %9.0f %7s | %9.0f %9.0f %7s' \
      "$([ $d = h2d ] && echo host-to-device || echo device-to-host)" "$l0" "$b0" "$(ratio "$b0" "$l0")" \
      "$l1" "$b1" "$(ratio "$b1" "$l1")")")
  done
  summary+=("   plot: $plotdir/lending-bw.png")
fi

# ---------------------------------------------------------------- p2p: the three cases
if want p2p; then
  boot p2p "$topos/smartio-p2p-latency.ini"
  st=$(nb status --json)
  # Hops of the path between the two devices: 0 inside one host, else one NTB crossing plus
  # the cluster switches between the two hosts' adapters.
  hops() {
    [ "$1" = "$2" ] && { echo 0; return; }
    jq -r --arg a "$1" --arg b "$2" \
      '[.adapters[] | select(.host == $a) | .peers[] | select(.host == $b) | .switches + 1] | min' <<<"$st"
  }
  # case: label, borrower, lent devices (with their lenders), hops
  cases=("local|a||$(hops a a)"
         "same-lender|b|accel0 accel1|$(hops a a)"
         "lent+local|c|accel0|$(hops a c)"
         "two-lenders|b|accel0 accel2|$(hops a c)")
  p2p_run() { # CASE ROUND KIND SIZE ITERS
    local label host devs h
    IFS='|' read -r label host devs h <<<"$1"
    for d in $devs; do lend "$d" "$host"; done
    drv "$host" --p2p --size "$4" --iters "$5"
    for d in $devs; do reclaim "$d"; done
    [ "$(grep -c '^p2p .* data verified$' "$tmp/drv.out")" = 2 ] && [ "$(grep -c '^via-ram .* data verified$' "$tmp/drv.out")" = 2 ] ||
      { echo "bench-lending: p2p $label: not two verified copies each way: $(cat "$tmp/drv.out")" >&2; exit 1; }
    # Both directions take the same path: their mean. Peer to peer (p2p lines) and via the
    # borrower's RAM (via-ram lines: one engine writes a buffer, the other reads it).
    mean() { sed -n "$1" "$tmp/drv.out" | awk -v f="$2" '{ s += $1 } END { printf f, s / NR }'; }
    local m k
    if [ "$3" = lat ]; then
      for m in p2p via-ram; do
        k=$([ $m = p2p ] && echo "" || echo via_)
        row p2p "$label" "${k}median_us" "$2" "$(mean "s/^$m .* median \([0-9.]*\) us per copy.*/\1/p" %.2f)"
        row p2p "$label" "${k}p99_us" "$2" "$(mean "s/^$m .* (p99 \([0-9.]*\), p99.99 .*/\1/p" %.2f)"
        row p2p "$label" "${k}p9999_us" "$2" "$(mean "s/^$m .* p99.99 \([0-9.]*\) us).*/\1/p" %.2f)"
      done
      row p2p "$label" queued_us "$2" "$(mean 's/^p2p .* \([0-9.]*\) us per queued copy.*/\1/p' %.3f)"
    else
      row p2p "$label" mbps "$2" "$(mean 's/^p2p .* bytes \([0-9.]*\) MB\/s.*/\1/p' %.0f)"
      row p2p "$label" via_mbps "$2" "$(mean 's/^via-ram .* bytes \([0-9.]*\) MB\/s.*/\1/p' %.0f)"
    fi
  }
  for r in $(seq "$rounds"); do
    for c in "${cases[@]}"; do
      p2p_run "$c" "$r" lat 4k "$p2p_n"
      p2p_run "$c" "$r" bw "$size" 8
    done
  done
  down
  {
    printf '# case\thops\tqueued_us\tmbps\tmedian_us\n'
    for c in "${cases[@]}"; do
      IFS='|' read -r label _ _ h <<<"$c"
      printf '%s\t%s\t%s\t%s\t%s\n' "$label" "$h" "$(median p2p "$label" queued_us)" \
        "$(median p2p "$label" mbps)" "$(median p2p "$label" median_us)"
      row p2p "$label" hops 0 "$h"
    done
  } >"$tmp/p2p.tsv"
  {
    printf '# case\tp2p_p50\tp2p_p99\tp2p_p9999\tvia_p50\tvia_p99\tvia_p9999\n'
    for c in "${cases[@]}"; do
      IFS='|' read -r label _ <<<"$c"
      printf '%s' "$label"
      for k in median_us p99_us p9999_us via_median_us via_p99_us via_p9999_us; do printf '\t%s' "$(median p2p "$label" $k)"; done
      echo
    done
  } >"$tmp/p2p-lat.tsv"
  gnuplot -e "dir='$src/tools/plots/'; in='$tmp/p2p.tsv'; out='$plotdir/lending-p2p.png'; size='$size'" \
    "$src/tools/plots/lending-p2p.gp"
  gnuplot -e "dir='$src/tools/plots/'; in='$tmp/p2p-lat.tsv'; out='$plotdir/lending-p2p-lat.png'; n='$p2p_n'" \
    "$src/tools/plots/lending-p2p-lat.gp"
  summary+=("" "== Peer-to-peer copies by one accelerator's engine into the other's memory BAR, latency"
    "   model on (smartio-p2p-latency.ini), medians of $rounds rounds, both directions averaged:"
    "   queued = up to 256 copies of 4 KiB queued at once (engine time per copy over the path);"
    "   one by one = $p2p_n copies of 4 KiB, each from doorbell to interrupt: median, p99, p99.99;"
    "   via RAM = the same through a buffer in the driver's RAM (one engine writes, the other reads);"
    "   MB/s = 8 x $size one by one")
  summary+=("$(printf '%-44s | %4s | %9s | %22s | %22s | %7s %7s' case hops "queued us" "1-by-1 us p50/99/99.99" "via RAM us p50/99/99.99" "MB/s" "via RAM")")
  while IFS=$'\t' read -r label h q mb us; do
    case $label in
      local) desc="both a's own, used by a (no lending)" ;;
      same-lender) desc="both lent by a (accel0, accel1) to b" ;;
      lent+local) desc="accel0 of a lent to c, c's own accel2" ;;
      two-lenders) desc="lent by a (accel0) and by c (accel2) to b" ;;
    esac
    summary+=("$(printf '%-44s | %4s | %9s | %22s | %22s | %7s %7s' "$desc" "$h" "$q" \
      "$us/$(median p2p "$label" p99_us)/$(median p2p "$label" p9999_us)" \
      "$(median p2p "$label" via_median_us)/$(median p2p "$label" via_p99_us)/$(median p2p "$label" via_p9999_us)" \
      "$mb" "$(median p2p "$label" via_mbps)")")
  done < <(tail -n +2 "$tmp/p2p.tsv")
  summary+=("   plots: $plotdir/lending-p2p.png, $plotdir/lending-p2p-lat.png")
fi

# ---------------------------------------------------------------- map: map+unmap costs
if want map; then
  boot map "$src/tests/system/topologies/lend-dma.ini"
  lend accel0 c
  lent=$(slot c accel0) own=$(slot c accel1)
  for r in $(seq "$rounds"); do
    drv c --size 64k --iters 1 --map-bench "$mapn"
    for w in lent own; do
      ns=$(sed -n "s/^map-bench 0000:${!w}: .* median \([0-9]*\) ns$/\1/p" "$tmp/drv.out")
      [ -n "$ns" ] || { echo "bench-lending: no map-bench figure for ${!w}: $(cat "$tmp/drv.out")" >&2; exit 1; }
      row map "$([ $w = own ] && echo local || echo lent)" median_ns "$r" "$ns"
    done
  done
  down
  l=$(median map local median_ns) b=$(median map lent median_ns)
  summary+=("" "== One dma_map_single+dma_unmap_single of 4 KiB (lend-dma.ini: c's IOMMU on; $mapn pairs a"
    "   round, median of $rounds rounds' medians): local ${l} ns, lent ${b} ns, lent/local $(ratio "$b" "$l")")
fi

# ---------------------------------------------------------------- fio, per-I/O mapping
# fio 4 KiB random reads at QD 1 on HOST's function SLOT, the buffer mapped per I/O; the
# figures (IOPS, median total latency, its CDF) as one JSON object in OUT.
why=""
if want fig21 || want fig21eq; then
  engine=$bin/../lib/ntbnvme-fio.so
  if ! command -v fio >/dev/null; then why="no fio"
  elif [ ! -f "$engine" ]; then why="no fio engine at $engine"
  elif ! fio --enghelp="$engine" 2>/dev/null | grep -q '^ntb_map'; then why="the fio engine has no ntb_map option"
  elif [ ! -f "$topos/lend-nvme.ini" ] || [ ! -f "$topos/chassis.ini" ]; then why="no examples/topologies/lend-nvme.ini or chassis.ini"
  else engine=$(cd "$(dirname "$engine")" && pwd)/ntbnvme-fio.so
  fi
  pcts=1:5:10:20:30:40:50:60:70:80:90:95:99:99.5:99.9
  fio_run() { # HOST SLOT OUT
    if ! nb run --host "$1" -- fio --output-format=json --name=fig21 --ioengine=external:"$engine" \
        --ntb_device="pci:0000:$2" --ntb_map=per-io --thread=1 --rw=randread --bs=4k --size=256M \
        --iodepth=1 --norandommap --randrepeat=0 --time_based --runtime="$secs" --ramp_time=0.2 \
        --lat_percentiles=1 --percentile_list="$pcts" >"$tmp/fio.out" 2>"$tmp/fio.err"; then
      echo "bench-lending: fio on host $1 failed: $(cat "$tmp/fio.err")" >&2
      exit 1
    fi
    sed -n '/^{/,$p' "$tmp/fio.out" | jq -c '.jobs[0] | if .error != 0 then error("fio job error \(.error)") else . end |
      .read | (if .lat_ns.percentile then .lat_ns else .clat_ns end) as $l |
      {iops: .iops, median_ns: $l.percentile["50.000000"],
       cdf: [$l.percentile | to_entries[] | [(.key | tonumber), .value]]}' >"$3"
  }
  # Paired rounds of PART/MODEL, back to back and in ABBA order (local, lent | lent, local | ...),
  # so that the pair of a round shares the machine's state: on a VM whose two CPUs change
  # speed from second to second, a round's lent/local ratio is steadier than the ratio of the
  # two medians over rounds, which the rounds' speeds move (both are reported). LOCAL_HOST and
  # LOCAL_DEV are the local NVMe; the lent one is a's nvme0, lent to c for the lent runs.
  fio_pairs() { # PART MODEL LOCAL_HOST LOCAL_DEV
    local part=$1 model=$2 own r w
    own=$(slot "$3" "$4")
    for r in $(seq "$rounds"); do
      if ((r % 2)); then
        fio_run "$3" "$own" "$tmp/f-$model-local-$r.json"
        lend nvme0 c
        fio_run c "$(slot c nvme0)" "$tmp/f-$model-lent-$r.json"
      else
        fio_run c "$(slot c nvme0)" "$tmp/f-$model-lent-$r.json"
        reclaim nvme0
        fio_run "$3" "$own" "$tmp/f-$model-local-$r.json"
      fi
      for w in local lent; do
        row "$part" "$model-$w" median_ns "$r" "$(jq -r .median_ns "$tmp/f-$model-$w-$r.json")"
        row "$part" "$model-$w" iops "$r" "$(jq -r .iops "$tmp/f-$model-$w-$r.json")"
      done
      row "$part" "$model-ratio" lent_over_local "$r" "$(ratio "$(jq -r .median_ns "$tmp/f-$model-lent-$r.json")" \
        "$(jq -r .median_ns "$tmp/f-$model-local-$r.json")")"
    done
    ((rounds % 2)) && reclaim nvme0
    return 0
  }
fi
# The CDF (total latency: submission, the mapping, the I/O, its completion and the unmap) of
# PART's runs with MODEL: the round whose median is the median of the rounds, for each of local
# and lent, kept in $tmp/cdf-PART-{local,lent}.json and plotted into PNG.
cdf_plot() { # PART MODEL PNG
  local w m best
  for w in local lent; do
    m=$(median "$1" "$2-$w" median_ns)
    best=$(awk -F'\t' -v p="$1" -v c="$2-$w" -v m="$m" '$1 == p && $2 == c && $3 == "median_ns" {
      d = $5 - m; if (d < 0) d = -d; if (!n++ || d < bd) { bd = d; br = $4 } } END { print br }' "$tmp/rows.tsv")
    jq -r '.cdf[] | "\(.[0])\t\(.[1])"' "$tmp/f-$2-$w-$best.json" >"$tmp/cdf-$1-$w.tsv"
    cp "$tmp/f-$2-$w-$best.json" "$tmp/cdf-$1-$w.json"
  done
  gnuplot -e "dir='$src/tools/plots/'; local='$tmp/cdf-$1-local.tsv'; lent='$tmp/cdf-$1-lent.tsv'; out='$plotdir/$3'; lmed='$(median "$1" "$2-local" median_ns)'; bmed='$(median "$1" "$2-lent" median_ns)'" \
    "$src/tools/plots/lending-fig21.gp"
}
if want fig21; then
  if [ -n "$why" ]; then
    echo "bench-lending: fig21 skipped: $why" >&2
    summary+=("" "== Fig. 21 (fio, per-I/O mapping): skipped: $why")
  else
    # Both hosts with their IOMMU on (lend-nvme.ini has it on the borrower c only): the same
    # driver then does the same mapping work per I/O locally and lent, so the ratio is what
    # lending costs. With the lender's IOMMU off its local maps would cost nothing, and the
    # comparison would measure the IOMMU instead (smartio-tocs-2021 §7.3 isolates that cost).
    for model in off on; do
      topo=$(with_iommu "$topos/lend-nvme.ini" a)
      [ $model = on ] && topo=$(with_latency "$topo")
      boot "fig21-$model" "$topo"
      fio_pairs fig21 "$model" a nvme0
      down
    done
    cdf_plot fig21 on lending-fig21.png
    l0=$(median fig21 off-local median_ns) b0=$(median fig21 off-lent median_ns)
    lm=$(median fig21 on-local median_ns) bm=$(median fig21 on-lent median_ns)
    p0=$(median fig21 off-ratio lent_over_local) pm=$(median fig21 on-ratio lent_over_local)
    summary+=("" "== Fig. 21: fio 4 KiB random reads, QD 1, dma_map_single+dma_unmap_single around every"
      "   I/O (ntb_map=per-io), median total latency (fio lat) (median of $rounds rounds of ${secs} s;"
      "   paired: the median over rounds of each round's lent/local, the two run back to back)"
      "$(printf '   latency model off: local %s ns, lent %s ns, lent/local %s; paired %s (target <= 1.02)' "$l0" "$b0" "$(ratio "$b0" "$l0")" "$p0")"
      "$(printf '   latency model on:  local %s ns, lent %s ns, lent/local %s; paired %s' "$lm" "$bm" "$(ratio "$bm" "$lm")" "$pm")"
      "   CDF plot (model on): $plotdir/lending-fig21.png")
  fi
fi

# ---------------------------------------------------------------- fig21eq: equal hops
if want fig21eq; then
  if [ -n "$why" ]; then
    echo "bench-lending: fig21eq skipped: $why" >&2
    summary+=("" "== Fig. 21 with equal hops (fio, per-I/O mapping): skipped: $why")
  else
    boot fig21eq "$topos/chassis.ini"
    fio_pairs fig21eq on c nvme1
    down
    cdf_plot fig21eq on lending-fig21eq.png
    lm=$(median fig21eq on-local median_ns) bm=$(median fig21eq on-lent median_ns)
    summary+=("" "== Fig. 21 with equal hops (chassis.ini, latency model on): fio as above, c's own NVMe"
      "   in its chassis (local) against a's NVMe in a's chassis lent to c (lent)"
      "$(printf '   local %s ns, lent %s ns, lent/local %s; paired %s (target <= 1.02)' "$lm" "$bm" "$(ratio "$bm" "$lm")" "$(median fig21eq on-ratio lent_over_local)")"
      "   CDF plot: $plotdir/lending-fig21eq.png")
  fi
fi

# ---------------------------------------------------------------- two fabrics side by side
# Fabrics A and B up at once, accel0 of a lent to c in each, accel_drv's copies of each SIZE on
# c, the rounds alternating which fabric goes first, so the machine's load falls on both alike.
# Rows: PART, LABEL-SIZE, read_mbps (host->device: the device reads c's RAM) / write_mbps.
bw_two() { # PART A_LABEL A_TOPO B_LABEL B_TOPO SIZE...
  local part=$1 la=$2 ta=$3 lb=$4 tb=$5 r fb w sz
  shift 5
  local fa="lendb-$$-$part-$la" fbb="lendb-$$-$part-$lb"
  two_down() { "$bin/ntblend" --fabric "$fa" down >/dev/null 2>&1 || true; "$bin/ntblend" --fabric "$fbb" down >/dev/null 2>&1 || true; }
  trap 'two_down; down; rm -rf "$tmp"' EXIT
  "$bin/ntblend" --fabric "$fa" up "$ta" >/dev/null
  "$bin/ntblend" --fabric "$fbb" up "$tb" >/dev/null
  echo "bench-lending: fabrics $fa ($(basename "$ta")) and $fbb ($(basename "$tb"))" >&2
  for fb in "$fa" "$fbb"; do "$bin/ntblend" --fabric "$fb" device lend accel0 --to c >/dev/null; done
  for r in $(seq "$rounds"); do
    local order="$fa $fbb"
    [ $((r % 2)) = 0 ] && order="$fbb $fa"
    for fb in $order; do
      fabric=$fb
      w=$([ "$fb" = "$fa" ] && echo "$la" || echo "$lb")
      for sz in "$@"; do
        drv c --size "$sz" --iters 8
        rates "$part" "$w-$sz" "$r" "$(slot c accel0)" read_mbps write_mbps
      done
    done
  done
  fabric=""
  two_down
  trap 'down; rm -rf "$tmp"' EXIT
}

# ---------------------------------------------------------------- iommu: Fig. 31
if want iommu; then
  bw_two iommu off "$topos/chassis.ini" on "$(with_iommu "$topos/chassis.ini" a)" "$size"
  ro=$(median iommu "off-$size" read_mbps) rn=$(median iommu "on-$size" read_mbps)
  wo=$(median iommu "off-$size" write_mbps) wn=$(median iommu "on-$size" write_mbps)
  printf '# direction\toff\ton\nreads\t%s\t%s\nwrites\t%s\t%s\n' "$ro" "$rn" "$wo" "$wn" >"$tmp/iommu.tsv"
  gnuplot -e "dir='$src/tools/plots/'; in='$tmp/iommu.tsv'; out='$plotdir/lending-iommu.png'; size='$size'" "$src/tools/plots/lending-iommu.gp"
  summary+=("" "== Fig. 31: accel0 in a's chassis lent to c, the device's engine copying $size (chassis.ini,"
    "   latency model on), a's IOMMU off (peer to peer in the chassis) and on (through a's root)"
    "$(printf '   reads (host->device):  off %s MB/s, on %s MB/s, penalty %s (target >= 4)' "$ro" "$rn" "$(ratio "$ro" "$rn")")"
    "$(printf '   writes (device->host): off %s MB/s, on %s MB/s, penalty %s' "$wo" "$wn" "$(ratio "$wo" "$wn")")"
    "   plot: $plotdir/lending-iommu.png")
fi

# ---------------------------------------------------------------- fig23: one more hop
if want fig23; then
  # chassis.ini's back-to-back cable replaced by two cables to a cluster switch.
  sw=$tmp/chassis-switch.ini
  sed 's/^a\.ntb0 = c\.ntb0$/a.ntb0 = sw0\nc.ntb0 = sw0\n[switch sw0]\nports = 8/' "$topos/chassis.ini" >"$sw"
  grep -q '^\[switch sw0\]' "$sw" || { echo "bench-lending: chassis.ini has no a.ntb0 = c.ntb0 cable" >&2; exit 1; }
  sizes=(64k 256k 1M)
  $quick && sizes=(64k)
  [[ " ${sizes[*]} " == *" $size "* ]] || sizes+=("$size")
  bw_two fig23 b2b "$topos/chassis.ini" switch "$sw" "${sizes[@]}"
  {
    printf '# size\tb2b_read\tswitch_read\tb2b_write\tswitch_write\n'
    for sz in "${sizes[@]}"; do
      printf '%s\t%s\t%s\t%s\t%s\n' "$sz" "$(median fig23 "b2b-$sz" read_mbps)" "$(median fig23 "switch-$sz" read_mbps)" \
        "$(median fig23 "b2b-$sz" write_mbps)" "$(median fig23 "switch-$sz" write_mbps)"
    done
  } >"$tmp/fig23.tsv"
  gnuplot -e "dir='$src/tools/plots/'; in='$tmp/fig23.tsv'; out='$plotdir/lending-fig23.png'" "$src/tools/plots/lending-fig23.gp"
  summary+=("" "== Fig. 23: accel0 lent by a to c over a back-to-back cable (chassis.ini) and through a"
    "   cluster switch (one more hop), MB/s, median of $rounds rounds of 8 copies"
    "$(printf '%-8s | %9s %9s %7s | %9s %9s %7s' size "b2b rd" "sw rd" "sw/b2b" "b2b wr" "sw wr" "sw/b2b")")
  while IFS=$'\t' read -r sz br sr bw_ sw_; do
    summary+=("$(printf '%-8s | %9s %9s %7s | %9s %9s %7s' "$sz" "$br" "$sr" "$(ratio "$sr" "$br")" "$bw_" "$sw_" "$(ratio "$sw_" "$bw_")")")
  done < <(tail -n +2 "$tmp/fig23.tsv")
  summary+=("   plot: $plotdir/lending-fig23.png")
fi

# ---------------------------------------------------------------- fig22: local vs lent, equal hops
if want fig22; then
  # One fabric, one run of accel_drv on c copying on both: c's own accel1 in c's chassis and
  # accel0 in a's chassis lent to c (chassis.ini: the same hops).
  boot fig22 "$topos/chassis.ini"
  lend accel0 c
  for r in $(seq "$rounds"); do
    drv c --size "$size" --iters 8
    rates fig22 local "$r" "$(slot c accel1)" read_mbps write_mbps
    rates fig22 lent "$r" "$(slot c accel0)" read_mbps write_mbps
  done
  reclaim accel0
  down
  lr=$(median fig22 local read_mbps) br=$(median fig22 lent read_mbps)
  lw=$(median fig22 local write_mbps) bw_=$(median fig22 lent write_mbps)
  printf '# model\tdirection\tlocal\tlent\nchassis\th2d\t%s\t%s\nchassis\td2h\t%s\t%s\n' "$lr" "$br" "$lw" "$bw_" >"$tmp/fig22.tsv"
  gnuplot -e "dir='$src/tools/plots/'; in='$tmp/fig22.tsv'; out='$plotdir/lending-fig22.png'; size='$size'" \
    "$src/tools/plots/lending-bw.gp"
  summary+=("" "== Fig. 22: c's own accel1 in its chassis (local) and a's accel0 in a's chassis lent to c"
    "   (lent), chassis.ini, one accel_drv run on both per round, $size copies, MB/s"
    "$(printf '   host->device (reads):  local %s, lent %s, lent/local %s' "$lr" "$br" "$(ratio "$br" "$lr")")"
    "$(printf '   device->host (writes): local %s, lent %s, lent/local %s' "$lw" "$bw_" "$(ratio "$bw_" "$lw")")"
    "   plot: $plotdir/lending-fig22.png")
fi

# ---------------------------------------------------------------- JSON
jq -Rn --arg size "$size" --argjson rounds "$rounds" --argjson cpus "$(nproc)" --arg parts "${parts[*]}" '
  [inputs | split("\t") | {part: .[0], case: .[1], key: .[2], round: (.[3] | tonumber), value: (.[4] | tonumber)}] as $rows |
  def med: sort | if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
  {tool: "bench-lending.sh", cpus: $cpus, rounds: $rounds, copy_bytes: $size, parts: ($parts | split(" ")),
   medians: ($rows | group_by([.part, .case, .key]) | map({part: .[0].part, case: .[0].case, key: .[0].key,
                                                          median: (map(.value) | med)})),
   rounds_data: $rows}' <"$tmp/rows.tsv" >"$out"
for p in fig21 fig21eq; do
  if want $p && [ -f "$tmp/cdf-$p-local.json" ]; then
    jq --arg k "${p}_cdf_latency_model_on" --slurpfile l "$tmp/cdf-$p-local.json" --slurpfile b "$tmp/cdf-$p-lent.json" \
      '.[$k] = {local: $l[0].cdf, lent: $b[0].cdf}' "$out" >"$tmp/o.json"
    mv "$tmp/o.json" "$out"
  fi
done
printf '%s\n' "${summary[@]}"
echo
floor_finish "$out"
echo "JSON: $out"
