#!/usr/bin/env bash
# The suite twice at once, as on a machine busy with other work: two clones of this tree's
# committed HEAD, each running scripts/test.sh with the given option, side by side. Passes when
# both pass; each suite's output is kept in its log.
# Usage: scripts/test-busy.sh [--release | --sanitize | --clang] [--keep]
#   --keep   keep the two clones (and their logs) instead of removing them
set -euo pipefail
cd "$(dirname "$0")/.."

opt="" keep=false
for a in "$@"; do
  case "$a" in
    --release|--sanitize|--clang) opt=$a ;;
    --keep) keep=true ;;
    -h|--help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "test-busy.sh: unknown option $a (see --help)" >&2; exit 2 ;;
  esac
done
git diff --quiet HEAD 2>/dev/null ||
  echo "test-busy.sh: the work tree has uncommitted changes; the clones test HEAD ($(git rev-parse --short HEAD))" >&2

dir=$(mktemp -d /tmp/ntblend-busy.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done
  $keep || rm -rf "$dir"
}
trap cleanup EXIT
for i in 1 2; do
  git clone -q . "$dir/clone$i"
  # A shared guest image cache saves both clones the download (scripts/vm-guest.sh locks it).
  [ -d build/vm-guest ] && mkdir -p "$dir/clone$i/build" && cp -a build/vm-guest "$dir/clone$i/build/" 2>/dev/null || true
  setsid bash "$dir/clone$i/scripts/test.sh" $opt >"$dir/suite$i.log" 2>&1 &
  pids+=($!)
done
echo "test-busy.sh: two suites running in $dir (logs suite1.log, suite2.log)"
rc=0
for i in 1 2; do
  if wait "${pids[$((i - 1))]}"; then
    echo "suite $i: $(grep -E '^[0-9]+% tests passed' "$dir/suite$i.log" || echo passed)"
  else
    rc=1
    echo "suite $i FAILED: $(grep -E '^[0-9]+% tests passed' "$dir/suite$i.log" || echo 'before the tests ran')"
    sed -n '/The following tests FAILED/,$p' "$dir/suite$i.log" | head -20
    keep=true
  fi
done
pids=()
$keep && echo "test-busy.sh: logs and clones kept in $dir"
exit $rc
