#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test.
# Usage: scripts/test.sh [--release | --sanitize | --clang]   (see scripts/build.sh)
# --release runs the suite built at -O3, --sanitize under AddressSanitizer + UBSan, --clang
# built with clang; the default is the RelWithDebInfo build in build/.
set -euo pipefail
cd "$(dirname "$0")/.."

build=build
case "${1:-}" in
  "") ;;
  --sanitize) build=build-asan ;;
  --release) build=build-release ;;
  --clang) build=build-clang ;;
  -h|--help) sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "test.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
esac

bash scripts/build.sh ${1:-} "$build"
# Tests boot their own fabrics under unique names, so they may run two at a time (2 cores).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$build"
rc=0
ctest --output-on-failure -j2 --timeout 300 || rc=$?
# Why a test was skipped is in its output, which ctest shows only for failures.
grep -h "^SKIP: " Testing/Temporary/LastTest.log 2>/dev/null | sort -u | sed 's/^SKIP: /skipped: /' || true
exit $rc
