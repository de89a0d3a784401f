#!/usr/bin/env bash
# The SISCI benchmark (docs/sisci.md): side by side in interleaved rounds,
#  1. libnvm through libsisci against libntbnvme on the same lent NVMe (smartio3, nvme0 in
#     host a, read from host b): 4 KiB random reads, QD1 median latency and QD32 IOPS;
#  2. sisci_bench: the SISCI layer against the native segment API (two-hosts): store
#     bandwidth, remote load latency, DMA bandwidth, interrupt round trip; DMA and interrupts
#     also against a second native side in the same rounds (A/A: the noise floor).
# It installs the SISCI prefix, builds libnvm from the snapshot (Release) and
# tools/sisci/libnvm_bench.c against it, boots its fabrics under unique names and brings them
# down (also on failure or Ctrl-C).
# Usage: scripts/bench-sisci.sh [-o DIR] [-b BUILD_DIR] [-r ROUNDS] [-s SECONDS] [-l TARBALL]
#                               [-p nvme|api|all]
#   -o DIR      output directory (default bench-sisci/): nvme.jsonl (every run), sisci.json,
#               summary.json
#   -b DIR      the ntblend build (default build/)
#   -r ROUNDS   rounds of each pair (default 5)
#   -s SECONDS  seconds per NVMe run (default 3)
#   -l TARBALL  the libnvm snapshot (default ../shared/external/libnvm-da5aade.tar.gz)
#   -p PART     nvme (1. only), api (2. only) or all (default)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
out=bench-sisci build=$src/build rounds=5 secs=3 tarball="" part=all
usage() { sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; }
while getopts "o:b:r:s:l:p:h" opt; do
  case $opt in
    o) out=$OPTARG ;;
    b) build=$OPTARG ;;
    r) rounds=$OPTARG ;;
    s) secs=$OPTARG ;;
    l) tarball=$OPTARG ;;
    p) part=$OPTARG ;;
    h) usage; exit 0 ;;
    *) echo "bench-sisci: see -h" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] || { echo "bench-sisci: unexpected argument '$1' (see -h)" >&2; exit 2; }
case $part in nvme|api|all) ;; *) echo "bench-sisci: -p takes nvme, api or all" >&2; exit 2 ;; esac
build=$(cd "$build" 2>/dev/null && pwd) || { echo "bench-sisci: no build directory; run scripts/build.sh or pass -b DIR" >&2; exit 1; }
bin=$build/bin
for b in ntblend nvme_bench sisci_bench; do
  [ -x "$bin/$b" ] || { echo "bench-sisci: $bin/$b is missing; run scripts/build.sh" >&2; exit 1; }
done
for d in "$src/../shared" "$src/../../shared"; do
  [ -z "$tarball" ] && [ -f "$d/external/libnvm-da5aade.tar.gz" ] && tarball="$d/external/libnvm-da5aade.tar.gz"
done
[ -f "$tarball" ] || { echo "bench-sisci: no libnvm snapshot; pass -l TARBALL" >&2; exit 1; }
command -v jq >/dev/null || { echo "bench-sisci: jq is missing (scripts/install-deps.sh)" >&2; exit 1; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
export PATH=$bin:$PATH

nvfab="sisci-bench-$$-nvme" segfab="sisci-bench-$$-seg" server=""
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true; fi
  ntblend --fabric "$nvfab" down >/dev/null 2>&1 || true
  ntblend --fabric "$segfab" down >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ "$part" != api ]; then
# ---- the prefix, libnvm and its driver
echo "bench-sisci: building libnvm against the SISCI prefix" >&2
prefix=$out/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
mkdir -p "$out/libnvm"
[ -f "$out/libnvm/src/CMakeLists.txt" ] || { mkdir -p "$out/libnvm/src" && tar xzf "$tarball" -C "$out/libnvm/src" --strip-components=1; }
cmake -S "$out/libnvm/src" -B "$out/libnvm/build" -DDIS="$prefix" -Dno_cuda=true -DCMAKE_BUILD_TYPE=Release >"$out/libnvm/cfg.log" 2>&1
cmake --build "$out/libnvm/build" --target libnvm -j2 >"$out/libnvm/build.log" 2>&1
cc -O2 -Wall -Wextra -D__DIS_CLUSTER__ -o "$out/libnvm/libnvm_bench" "$src/tools/sisci/libnvm_bench.c" \
  -I"$out/libnvm/src/include" -I"$out/libnvm/build/include" -I"$prefix/include" \
  -L"$out/libnvm/build/lib" -lnvm -L"$prefix/lib64" -lsisci \
  -Wl,-rpath,"$out/libnvm/build/lib:$prefix/lib64"

# ---- 1. libnvm against libntbnvme, interleaved
sed 's|^type = nvme$|type = nvme\nalloc_all = 1|' "$src/examples/topologies/smartio3.ini" >"$out/smartio3-alloc-all.ini"
ntblend --fabric "$nvfab" up "$out/smartio3-alloc-all.ini" >/dev/null
ntblend --fabric "$nvfab" device add nvme0 >/dev/null
runb() { timeout -k 5 $((secs + 60)) ntblend --fabric "$nvfab" run --host b -- "$@"; }
: >"$out/nvme.jsonl"
for r in $(seq "$rounds"); do
  for qd in 1 32; do
    for k in 0 1; do # the order alternates from round to round
      if [ $(((r + k) % 2)) -eq 0 ]; then
        j=$(runb "$out/libnvm/libnvm_bench" 0x40001 "$qd" "$secs")
        echo "{\"round\":$r,\"driver\":\"libnvm\",\"qd\":$qd,\"iops\":$(jq .iops <<<"$j"),\"lat_median_ns\":$(jq .lat_median_ns <<<"$j")}" >>"$out/nvme.jsonl"
      else
        j=$(runb nvme_bench --qd "$qd" --seconds "$secs" --json -q)
        echo "{\"round\":$r,\"driver\":\"libntbnvme\",\"qd\":$qd,\"iops\":$(jq .iops <<<"$j"),\"lat_median_ns\":$(jq .lat_median_ns <<<"$j")}" >>"$out/nvme.jsonl"
      fi
    done
  done
  echo "bench-sisci: NVMe round $r/$rounds done" >&2
done
ntblend --fabric "$nvfab" down >/dev/null
fi

# ---- 2. SISCI against native
: >"$out/sisci.json.tmp"
if [ "$part" != nvme ]; then
ntblend --fabric "$segfab" up "$src/examples/topologies/two-hosts.ini" >/dev/null
ntblend --fabric "$segfab" run --host a -- sisci_bench serve 8 >"$out/server.log" 2>&1 &
server=$!
for _ in $(seq 200); do grep -q ready "$out/server.log" && break; sleep 0.05; done
grep -q ready "$out/server.log" || { echo "bench-sisci: sisci_bench server: $(cat "$out/server.log")" >&2; exit 1; }
ntblend --fabric "$segfab" run --host b -- sisci_bench run 4 $((rounds * 4)) >"$out/sisci.json"
fi
rm -f "$out/sisci.json.tmp"
[ -f "$out/nvme.jsonl" ] || : >"$out/nvme.jsonl"
[ -f "$out/sisci.json" ] || echo null >"$out/sisci.json"

# ---- summary: per metric, the median of each side and of the per-round ratios (cost:
# libnvm or SISCI time per operation over ntblend's native time per operation)
jq -s --slurpfile s "$out/sisci.json" '
  def med: sort | if length % 2 == 1 then .[length/2|floor] else (.[length/2-1] + .[length/2]) / 2 end;
  def pair($qd; $f): [group_by(.round)[] | map(select(.qd == $qd)) |
      {l: (map(select(.driver == "libnvm"))[0][$f]), n: (map(select(.driver == "libntbnvme"))[0][$f])}];
  (if length == 0 then [] else pair(1; "lat_median_ns") end) as $lat |
  (if length == 0 then [] else pair(32; "iops") end) as $iops |
  {nvme: (if ($lat | length) == 0 then null else {rounds: ($lat | length),
    qd1_median_ns: {libnvm: ($lat | map(.l) | med), libntbnvme: ($lat | map(.n) | med),
                    cost_ratio: ($lat | map(.l / .n) | med),
                    round_ratios: ($lat | map(.l / .n * 1000 | round / 1000))},
    qd32_iops: {libnvm: ($iops | map(.l) | med), libntbnvme: ($iops | map(.n) | med),
                cost_ratio: ($iops | map(.n / .l) | med),
                round_ratios: ($iops | map(.n / .l * 1000 | round / 1000))}} end),
   sisci_vs_native: $s[0]}' "$out/nvme.jsonl" >"$out/summary.json"
cat "$out/summary.json"
