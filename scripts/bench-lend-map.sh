#!/usr/bin/env bash
# The per-I/O DMA mapping experiment of smartio-tocs-2021 (Fig. 21, §7.1.1) on the emulated fabric:
# fio 4 KiB random reads at QD 1 through the ntbnvme engine on a driver-model NVMe
# (examples/fio/lent-randread-map.fio), with the buffers mapped once (ntb_map=once) and mapped
# around every I/O (ntb_map=per-io), side by side in one fio run, on the lender's own NVMe
# (host a), lent to a borrower with its IOMMU on (c) and to one with it off (b), on
# examples/topologies/lend-nvme.ini. Prints, for each, the IOPS of both (best of N rounds)
# and their ratio, and the mean total latency (submission to completion, the mapping
# included) of the best round.
# Usage: scripts/bench-lend-map.sh [-b BUILD_DIR] [-r ROUNDS] [-t SECONDS]
#   -b DIR      the build (default build-release if built, else build)
#   -r ROUNDS   rounds of every run, best kept (default 3)
#   -t SECONDS  each job's run time (default 2)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$src/build-release
[ -x "$build/bin/ntblend" ] || build=$src/build
rounds=3
secs=2
usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; }
[ "${1:-}" = --help ] && { usage; exit 0; }
while getopts "b:r:t:h" opt; do
  case $opt in
    b) build=$(cd "$OPTARG" 2>/dev/null && pwd) || { echo "bench-lend-map: no build '$OPTARG'" >&2; exit 1; } ;;
    r) rounds=$OPTARG ;;
    t) secs=$OPTARG ;;
    h) usage; exit 0 ;;
    *) echo "bench-lend-map: see -h" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] || { echo "bench-lend-map: unexpected argument '$1' (see -h)" >&2; exit 2; }
[[ $rounds =~ ^[1-9][0-9]*$ && $secs =~ ^[1-9][0-9]*$ ]] || { echo "bench-lend-map: -r and -t take positive numbers" >&2; exit 2; }
engine=$build/lib/ntbnvme-fio.so
[ -f "$engine" ] || { echo "bench-lend-map: $engine is missing (the fio engine needs fio and dpkg-dev: scripts/install-deps.sh, then rebuild)" >&2; exit 1; }
export PATH=$build/bin:$PATH NTBLEND_FIO_ENGINE=$engine
. "$src/scripts/bench-floor.sh"
floor_init "$build/bin" || exit 1
floor_start || exit 1
fabric="bench-lend-map-$$"
n() { ntblend --fabric "$fabric" "$@"; }
trap 'n down >/dev/null 2>&1 || true' EXIT
n up "$src/examples/topologies/lend-nvme.ini" >/dev/null

declare -A iops lat
# One fio run on HOST with the function PCI: keeps the best IOPS of each job (and its latency).
run() {
  local host=$1 pci=$2 line name io mean
  while IFS=';' read -r -a f; do
    name=${f[2]} io=${f[7]} mean=${f[39]}
    [ "${f[4]}" = 0 ] || { echo "bench-lend-map: fio on $host ($name) failed: error ${f[4]}" >&2; exit 1; }
    if [ "${io:-0}" -gt "${iops[$host.$name]:-0}" ]; then
      iops[$host.$name]=$io
      lat[$host.$name]=$mean
    fi
  done < <(NTB_PCI=$pci n run --host "$host" -- fio --output-format=terse --terse-version=3 \
             --runtime="$secs" "$src/examples/fio/lent-randread-map.fio")
}
for _ in $(seq "$rounds"); do
  run a ""
  n device lend nvme0 --to c >/dev/null; run c 80:00.0; n device reclaim nvme0 >/dev/null
  n device lend nvme0 --to b >/dev/null; run b 80:00.0; n device reclaim nvme0 >/dev/null
done
printf '%-30s %12s %12s %8s %14s %14s\n' "NVMe" "IOPS once" "IOPS per-io" "ratio" "lat once µs" "lat per-io µs"
for h in a c b; do
  case $h in
    a) what="local (a's own)" ;;
    c) what="lent to c (IOMMU on)" ;;
    b) what="lent to b (IOMMU off)" ;;
  esac
  printf '%-30s %12s %12s %8s %14.1f %14.1f\n' "$what" "${iops[$h.once]}" "${iops[$h.per-io]}" \
    "$(awk -v a="${iops[$h.per-io]}" -v b="${iops[$h.once]}" 'BEGIN { printf "%.2f", a / b }')" \
    "${lat[$h.once]}" "${lat[$h.per-io]}"
done
floor_finish
