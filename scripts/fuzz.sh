#!/usr/bin/env bash
# Builds the libFuzzer harnesses with clang (ASan + UBSan) and runs each for a while.
# Usage: scripts/fuzz.sh [SECONDS]   (default 30 per harness; CI uses this briefly)
# A finding stops the run with the crashing input saved in build-fuzz/ (exit non-zero).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
case "$secs" in -h|--help) sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
[[ "$secs" =~ ^[0-9]+$ ]] || { echo "fuzz.sh: SECONDS must be a number (see --help)" >&2; exit 2; }

bash scripts/install-deps.sh
CC=clang cmake -S . -B build-fuzz -DNTBLEND_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-fuzz --target nvme_fuzz -j"$(nproc)"
mkdir -p build-fuzz/corpus-nvme
cd build-fuzz
./bin/nvme_fuzz -max_len=4096 -max_total_time="$secs" -print_final_stats=1 corpus-nvme
