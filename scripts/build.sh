#!/usr/bin/env bash
# Installs what is missing and builds ntblend. Usage: scripts/build.sh [--sanitize] [BUILD_DIR]
# --sanitize builds with AddressSanitizer + UndefinedBehaviorSanitizer (default dir build-asan).
set -euo pipefail
cd "$(dirname "$0")/.."

sanitize=OFF
build=""
for arg in "$@"; do
  case "$arg" in
    --sanitize) sanitize=ON ;;
    -h|--help) sed -n '2,3p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "build.sh: unknown option $arg (see --help)" >&2; exit 2 ;;
    *) build="$arg" ;;
  esac
done
if [ -z "$build" ]; then
  if [ "$sanitize" = ON ]; then build=build-asan; else build=build; fi
fi

bash scripts/install-deps.sh
type=RelWithDebInfo
[ "$sanitize" = ON ] && type=Debug
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE="$type" -DNTBLEND_SANITIZE="$sanitize" >/dev/null
cmake --build "$build" -j"$(nproc)"
