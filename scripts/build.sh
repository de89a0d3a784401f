#!/usr/bin/env bash
# Installs what is missing and builds ntblend. Usage: scripts/build.sh [FLAVOUR] [BUILD_DIR]
# FLAVOUR: (none) RelWithDebInfo in build/; --release -O3 (Release) in build-release/;
# --sanitize AddressSanitizer + UndefinedBehaviorSanitizer (Debug) in build-asan/; --clang
# RelWithDebInfo built with clang in build-clang/. Warnings are errors in all of them.
set -euo pipefail
cd "$(dirname "$0")/.."

flavour=""
build=""
for arg in "$@"; do
  case "$arg" in
    --sanitize|--release|--clang) flavour=$arg ;;
    -h|--help) sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "build.sh: unknown option $arg (see --help)" >&2; exit 2 ;;
    *) build="$arg" ;;
  esac
done

type=RelWithDebInfo sanitize=OFF cc=${CC:-cc}
case "$flavour" in
  --sanitize) type=Debug sanitize=ON; : "${build:=build-asan}" ;;
  --release) type=Release; : "${build:=build-release}" ;;
  --clang) cc=clang; : "${build:=build-clang}" ;;
  *) : "${build:=build}" ;;
esac

bash scripts/install-deps.sh
CC=$cc cmake -S . -B "$build" -DCMAKE_BUILD_TYPE="$type" -DNTBLEND_SANITIZE="$sanitize" >/dev/null
cmake --build "$build" -j"$(nproc)"
