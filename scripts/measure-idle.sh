#!/usr/bin/env bash
# Boots a fabric and measures the CPU time all its agents use while idle, as a percentage of
# one core. Usage: scripts/measure-idle.sh [TOPOLOGY] [SECONDS] [BUILD_DIR]
# Defaults: examples/topologies/cluster60.ini, 10 s, build.
set -euo pipefail
cd "$(dirname "$0")/.."
topo=${1:-examples/topologies/cluster60.ini}
secs=${2:-10}
bin=${3:-build}/bin
case "$topo" in -h|--help) sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
[ -x "$bin/ntblend" ] || { echo "measure-idle: no $bin/ntblend; run scripts/build.sh first" >&2; exit 1; }

fabric="idle-$$"
trap '"$bin/ntblend" --fabric "$fabric" down >/dev/null 2>&1 || true' EXIT
t0=$(date +%s.%N)
"$bin/ntblend" --fabric "$fabric" up "$topo" >/dev/null
t1=$(date +%s.%N)
pids=$("$bin/ntblend" --fabric "$fabric" status --json | grep -o '"agent_pid": *[0-9]*' | grep -o '[0-9]*$')
n=$(echo "$pids" | wc -w)

cpu_ns() { # CPU time of every thread of every agent, in nanoseconds (schedstat)
  cat $(for p in $pids; do echo /proc/$p/task/*/schedstat; done) 2>/dev/null |
    awk '{ sum += $1 } END { printf "%.0f", sum }'
}

sleep 1 # let the boot settle
a=$(cpu_ns)
sleep "$secs"
b=$(cpu_ns)
awk -v n="$n" -v a="$a" -v b="$b" -v s="$secs" -v t0="$t0" -v t1="$t1" 'BEGIN {
  printf "agents: %d, booted in %.2f s\n", n, t1 - t0
  printf "idle CPU of all agents over %d s: %.4f %% of one core (%.3f ms of CPU time)\n", s, 100 * (b - a) / (s * 1e9), (b - a) / 1e6
}'
