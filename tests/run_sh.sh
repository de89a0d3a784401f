#!/usr/bin/env bash
# tests/run_sh.sh SCRIPT: runs one shell test with its trace (set -x) in a file instead of its
# output. When the test fails, or its guard (tests/CMakeLists.txt) stops it with SIGTERM, the
# trace's last lines say where it stood. The exit code is the test's (77: skipped).
script=${1:?usage: run_sh.sh SCRIPT}
trace=$(mktemp)
bash -c 'PS4="+ \${BASH_SOURCE[0]:-}:\${LINENO}: "; BASH_XTRACEFD=9; set -x; . "$0"' "$script" 9>"$trace" &
pid=$!
# SIGTERM reaches the test too (it goes to the whole process group): wait on while it runs
# its traps and takes its fabrics down.
trap ':' TERM INT
while :; do
    wait "$pid"
    rc=$?
    kill -0 "$pid" 2>/dev/null || break
done
if ((rc != 0 && rc != 77)); then
    echo "--- ${script##*/} ended with $rc; the last lines of its trace:"
    tail -n 30 "$trace" | cut -c1-300
fi
rm -f "$trace"
exit "$rc"
