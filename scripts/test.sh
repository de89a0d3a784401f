#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test. Usage: scripts/test.sh [--sanitize]
# With --sanitize the suite runs under AddressSanitizer + UndefinedBehaviorSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."

build=build
[ "${1:-}" = --sanitize ] && build=build-asan
case "${1:-}" in
  ""|--sanitize) ;;
  -h|--help) sed -n '2,3p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "test.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
esac

bash scripts/build.sh ${1:-} "$build"
# Tests boot their own fabrics under unique names, so they may run two at a time (2 cores).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$build" && ctest --output-on-failure -j2 --timeout 300
