#!/usr/bin/env bash
# The machine's floor, next to every benchmark's figures: a cache line's round trip between the
# first two CPUs this process may use and one CPU's memcpy rate, measured by
# tools/shmem/cpu_pair.c (build/bin/cpu_pair). Virtual machines change under us (the same kind of
# machine has shown 87 ns and 475 ns round trips a week apart), so a figure only compares with
# another taken at a similar floor. Every scripts/bench-*.sh sources this file, probes the
# floor before and after its runs, prints both with its summary and adds them to its JSON
# ("floor": {"before": PROBE, "after": PROBE}).
#
# Run on its own it prints one probe: scripts/bench-floor.sh [-b BIN_DIR] (default
# $NTBLEND_BIN, else ./build/bin)
#
# Sourced, it gives:
#   floor_init BIN_DIR  use BIN_DIR/cpu_pair (a build's bin directory); missing: an error
#   floor_probe         one probe as a JSON line: line_rtt_ns, copy_one_mbps, copy_two_mbps,
#                       copy_speedup, cpus ({"copy_speedup":null,...} with one CPU)
#   floor_text PROBE    "cross-CPU round trip 245 ns, memcpy 23348 MB/s"
#   floor_start         probe now into $floor_before (call after floor_init)
#   floor_finish FILE   probe into $floor_after, print both (stderr), and, if FILE is given,
#                       add "floor" to that JSON object in place
# Needs jq.

floor_bin=""

floor_init() {
  floor_bin=$1/cpu_pair
  [ -x "$floor_bin" ] || {
    echo "bench-floor: $floor_bin is missing: run scripts/build.sh (it builds the probe)" >&2
    return 1
  }
}

floor_probe() {
  [ -n "$floor_bin" ] || { echo "bench-floor: floor_init first" >&2; return 1; }
  "$floor_bin" --size 1M --reps 3 || {
    echo "bench-floor: $floor_bin failed (it measures the machine's CPUs)" >&2
    return 1
  }
}

floor_text() {
  jq -r 'if .line_rtt_ns == null then "one CPU: no cross-CPU round trip"
         else "cross-CPU round trip \(.line_rtt_ns | round) ns, memcpy \(.copy_one_mbps | round) MB/s" end' <<<"$1"
}

floor_start() {
  floor_before=$(floor_probe) || return 1
}

floor_finish() {
  local file=${1:-} tmpf
  floor_after=$(floor_probe) || return 1
  echo "machine floor (tools/shmem/cpu_pair.c): before the runs $(floor_text "$floor_before");" \
    "after them $(floor_text "$floor_after")" >&2
  if [ -n "$file" ] && [ -f "$file" ]; then
    tmpf=$(mktemp "$file.XXXXXX")
    jq --argjson b "$floor_before" --argjson a "$floor_after" '. + {floor: {before: $b, after: $a}}' \
      "$file" >"$tmpf" && mv "$tmpf" "$file" || { rm -f "$tmpf"; return 1; }
  fi
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  b=${NTBLEND_BIN:-./build/bin}
  case ${1:-} in
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -b) [ $# -eq 2 ] || { echo "bench-floor: -b takes a directory (see -h)" >&2; exit 2; }; b=$2 ;;
    "") ;;
    *) echo "bench-floor: unexpected argument '$1' (see -h)" >&2; exit 2 ;;
  esac
  floor_init "$b"
  p=$(floor_probe)
  echo "$p"
  echo "machine floor: $(floor_text "$p")" >&2
fi
