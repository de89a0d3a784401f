#!/usr/bin/env bash
# Turn the JSON of the segment benchmarks into PNGs with gnuplot (tools/plots/*.gp).
# Usage: tools/plots/plot.sh [-o DIR] FILE.json...
#        tools/plots/plot.sh -t FILE.json KEY...    (the results rows as TSV; no plots)
#        tools/plots/plot.sh -g FILE.json KEY       (one top-level value)
#   -o DIR   where the PNGs go (default: beside each JSON file)
# Each FILE.json holds one object from 'scibench --json', 'dma_bench --json' or
# 'intr_bench --json'; FILE.json gives
#   scibench:   FILE-bandwidth.png (store and load, remote vs local), FILE-latency.png
#   dma_bench:  FILE.png (DMA write vs read bandwidth); with two or more dma_bench files also
#               dma-compare.png, all of them in one plot (e.g. latency model off and on)
#   intr_bench: FILE.png (round trip min/median/p99, next to the futex baseline if measured)
# Needs only bash, awk and gnuplot. Prints the PNGs it wrote.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
outdir=""
mode=plot
usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; }
while getopts "o:tgh" opt; do
  case $opt in
    o) outdir=$OPTARG ;;
    t) mode=tsv ;;
    g) mode=value ;;
    h) usage; exit 0 ;;
    *) echo "plot.sh: see -h" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { echo "plot.sh: which JSON files? (see -h)" >&2; exit 2; }
if [ $mode != plot ]; then
  [ $# -ge 2 ] || { echo "plot.sh: -t and -g take a JSON file and keys (see -h)" >&2; exit 2; }
  [ -s "$1" ] || { echo "plot.sh: $1 is missing or empty" >&2; exit 1; }
fi

# A top-level value of the JSON object in FILE (our tools print each key once at top level,
# before "results", and flat objects inside it).
jtop() { awk -v k="$1" '
  { s = $0; sub(/"results":\[.*\]/, "", s)
    if (match(s, "\"" k "\":(\"[^\"]*\"|[^,}]*)")) { v = substr(s, RSTART + length(k) + 3, RLENGTH - length(k) - 3); gsub(/"/, "", v); print v; exit } }' "$2"; }

# The rows of "results" as TSV with the given keys as columns, after a header line.
jrows() { local file=$1; shift; awk -v keys="$*" '
  function get(s, k,   v) { if (match(s, "\"" k "\":(\"[^\"]*\"|[^,}]*)")) { v = substr(s, RSTART + length(k) + 3, RLENGTH - length(k) - 3); gsub(/"/, "", v); return v } return "" }
  { r = $0; if (!sub(/.*"results":\[\{/, "", r)) next; sub(/\}\].*/, "", r)
    nk = split(keys, K, " "); h = "# " K[1]; for (j = 2; j <= nk; j++) h = h "\t" K[j]; print h
    n = split(r, rows, /\},\{/)
    for (i = 1; i <= n; i++) { line = get(rows[i], K[1]); for (j = 2; j <= nk; j++) line = line "\t" get(rows[i], K[j]); print line } }' "$file"; }

if [ $mode = tsv ]; then
  jrows "$@" | tail -n +2
  exit 0
elif [ $mode = value ]; then
  jtop "$2" "$1"
  exit 0
fi
command -v gnuplot >/dev/null || { echo "plot.sh: gnuplot is missing (apt-get install gnuplot-nox)" >&2; exit 1; }
[ -z "$outdir" ] || mkdir -p "$outdir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

gp() { gnuplot -e "dir='$here/'" "$@"; }
dma_files=() dma_labels=() dma_titles=()
for f in "$@"; do
  [ -s "$f" ] || { echo "plot.sh: $f is missing or empty" >&2; exit 1; }
  base=$(basename "$f" .json)
  dest=${outdir:-$(dirname "$f")}
  tool=$(jtop tool "$f")
  host=$(jtop host "$f"); peer=$(jtop peer_host "$f")
  case $tool in
    scibench)
      t="$tmp/$base.tsv"
      jrows "$f" size store_remote_mbps store_local_mbps load_remote_mbps load_local_mbps \
        store_remote_ns store_local_ns load_remote_ns load_local_ns >"$t"
      gp -e "in='$t'; out='$dest/$base-bandwidth.png'; title='scibench: CPU copies between host $host and a segment on host $peer, next to a local segment'" \
        "$here/scibench.gp"
      gp -e "in='$t'; out='$dest/$base-latency.png'; title='scibench: time per memcpy, host $host to a segment on host $peer and to a local segment'" \
        "$here/scibench-latency.gp"
      echo "$dest/$base-bandwidth.png"
      echo "$dest/$base-latency.png"
      ;;
    dma_bench)
      t="$tmp/$base.tsv"
      jrows "$f" block write_mbps read_mbps >"$t"
      model=$(jtop latency_model "$f")
      fig=""
      case $model in true) lab="latency model on" fig=" (cf. device-lending-2016 Fig. 4a)" ;; false) lab="latency model off" ;; *) lab="$base" ;; esac
      gp -e "files='$t'; labels='x'; out='$dest/$base.png'; title='dma\\_bench $host <-> $peer: DMA write vs read, $lab$fig'" \
        "$here/dma.gp"
      echo "$dest/$base.png"
      dma_files+=("$t") dma_labels+=("${lab// /_}") dma_titles+=("$host <-> $peer")
      ;;
    intr_bench)
      t="$tmp/$base.tsv"
      {
        printf 'kind\tmin\tmedian\tp99\n'
        printf 'seg interrupt (%s <-> %s)\t%s\t%s\t%s\n' "$host" "$peer" "$(jtop min_ns "$f")" \
          "$(jtop median_ns "$f")" "$(jtop p99_ns "$f")"
        b=$(jtop baseline_median_ns "$f")
        if [ -n "$b" ] && [ "$b" != null ]; then
          printf 'futex ping-pong (2 processes)\t%s\t%s\t%s\n' "$(jtop baseline_min_ns "$f")" "$b" \
            "$(jtop baseline_p99_ns "$f")"
        fi
      } | awk -F'\t' -v OFS='\t' 'NR == 1 { print; next } { print $1, $2 / 1000, $3 / 1000, $4 / 1000 }' >"$t"
      gp -e "in='$t'; out='$dest/$base.png'; title='intr\\_bench: round trip, $(jtop rounds "$f") rounds, both sides sleeping'" \
        "$here/intr.gp"
      echo "$dest/$base.png"
      ;;
    *) echo "plot.sh: $f: not output of scibench, dma_bench or intr_bench --json (tool '$tool')" >&2; exit 1 ;;
  esac
done
if [ ${#dma_files[@]} -ge 2 ]; then
  dest=${outdir:-$(dirname "$1")}
  gp -e "files='${dma_files[*]}'; labels='${dma_labels[*]}'; out='$dest/dma-compare.png'; title='dma\\_bench: DMA write vs read, host ${dma_titles[0]}, ${#dma_files[@]} runs'" \
    "$here/dma.gp"
  echo "$dest/dma-compare.png"
fi
