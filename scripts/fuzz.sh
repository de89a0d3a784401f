#!/usr/bin/env bash
# Builds the libFuzzer harnesses with clang (ASan + UBSan) and runs each for a while.
# Usage: scripts/fuzz.sh [SECONDS] [HARNESS...]   (default 30 s each, all harnesses; CI: brief)
# Harnesses: nvme (NVMe command path), topo (topology file reader and resolver), accel
# (the accelerator's descriptor engine), mbox (an agent's mailbox: requests from peer hosts),
# ctl (an agent's control requests from processes), vhost (the vhost-user back end: messages
# from QEMU), sisci (the SISCI API as a program calls it, on a fabric the harness boots and
# brings down), mpq (the pass-through proxy: QEMU's remote-device messages).
# Corpora grow in build-fuzz/corpus-NAME, seeded from the repository's examples and
# fuzz/corpus-NAME. A finding stops the run with the crashing input saved in build-fuzz/
# (exit non-zero).
set -euo pipefail
cd "$(dirname "$0")/.."
all=(nvme topo accel mbox ctl vhost sisci mpq)
secs=30
if [ $# -gt 0 ]; then
  case "$1" in
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *[!0-9]*) ;;
    *) secs=$1; shift ;;
  esac
fi
harnesses=("$@")
[ ${#harnesses[@]} -eq 0 ] && harnesses=("${all[@]}")
for h in "${harnesses[@]}"; do
  [[ " ${all[*]} " == *" $h "* ]] || { echo "fuzz.sh: unknown harness '$h' (have: ${all[*]})" >&2; exit 2; }
done

bash scripts/install-deps.sh
CC=clang cmake -S . -B build-fuzz -DNTBLEND_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target "${harnesses[@]/%/_fuzz}"

for h in "${harnesses[@]}"; do
  corpus=build-fuzz/corpus-$h
  mkdir -p "$corpus"
  opts=()
  case "$h" in
    nvme) opts=(-max_len=4096) ;;
    accel) opts=(-max_len=12288) ;;
    mbox|ctl) opts=(-max_len=4096)
              cp -n fuzz/corpus-$h/* "$corpus"/ ;;
    vhost) opts=(-max_len=8192)
           cp -n fuzz/corpus-$h/* "$corpus"/ ;;
    sisci) opts=(-max_len=1024)
           cp -n fuzz/corpus-$h/* "$corpus"/ ;;
    mpq) opts=(-max_len=4096)
         cp -n fuzz/corpus-$h/* "$corpus"/ ;;
    topo) opts=(-max_len=16384 -dict=fuzz/topo.dict)
          cp -n examples/topologies/*.ini examples/topologies/bad/*.ini tests/system/topologies/*.ini "$corpus"/ ;;
  esac
  echo "fuzz.sh: $h for ${secs}s"
  # The SISCI harness boots a fabric: named here, so that it goes down even after a finding.
  fab=""
  if [ "$h" = sisci ]; then
    fab="fuzz-sisci-$$"
    trap 'build-fuzz/bin/ntblend --fabric "$fab" down >/dev/null 2>&1 || true' EXIT
  fi
  (cd build-fuzz && NTBLEND_FUZZ_FABRIC=${fab:-} "./bin/${h}_fuzz" "${opts[@]/#-dict=/-dict=../}" \
     -max_total_time="$secs" -print_final_stats=1 "corpus-$h")
  if [ -n "$fab" ]; then
    build-fuzz/bin/ntblend --fabric "$fab" down >/dev/null 2>&1 || true
    trap - EXIT
  fi
done
