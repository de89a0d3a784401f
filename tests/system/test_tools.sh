#!/usr/bin/env bash
# ntb_tool, ntb_perf and ntb_pingpong driven as a user would, on two hosts back to back
# (examples/topologies/two-hosts.ini: a = node 4, b = node 8). Asserts behaviour — outputs,
# exit codes, data arriving — never timing or bandwidth.
set -euo pipefail

src=${NTBLEND_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
[ -n "${NTBLEND_BIN:-}" ] && PATH=$NTBLEND_BIN:$PATH
fabric="t-tools-$$"
tmp=$(mktemp -d)
bg=() # background processes: started without a shell function, so $! is the tool itself

nb() { ntblend --fabric "$fabric" "$@"; }
on() { local h=$1; shift; nb run --host "$h" -- "$@"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
expect() { # expect DESCRIPTION PATTERN TEXT: TEXT matches the extended regex PATTERN
  grep -Eq -- "$2" <<<"$3" || { printf 'FAIL: %s\n  wanted /%s/ in:\n%s\n' "$1" "$2" "$3" >&2; exit 1; }
}
# Wait (up to 20 s, sleeping) until FILE contains PATTERN.
wait_for() {
  for _ in $(seq 200); do grep -q -- "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  fail "timed out waiting for '$2' in $1: $(cat "$1")"
}
cleanup() {
  for p in "${bg[@]}"; do kill "$p" 2>/dev/null || true; done
  nb down >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

nb down >/dev/null 2>&1 || true
nb up "$src/examples/topologies/two-hosts.ini" >/dev/null

echo "== not on a host: a clear error"
if NTBLEND_HOST= ntb_tool info >/dev/null 2>"$tmp/err"; then fail "ntb_tool ran off-fabric"; fi
expect "off-host error" "not running on an emulated host: use 'ntblend run --host H" "$(cat "$tmp/err")"
if ntb_perf -T 33 2>"$tmp/err"; then fail "ntb_perf accepted 33 threads"; fi
expect "bad option" "bad value '33'" "$(cat "$tmp/err")"

echo "== ntb_tool info / port / link"
out=$(on a ntb_tool info)
expect "adapter name" "^adapter +a\.ntb0" "$out"
expect "port" "^port +4$" "$out"
expect "peer and link" "peer 0 +port 8 \(host b\), link up" "$out"
expect "windows" "64 inbound windows of 4 MiB" "$out"
expect "doorbells" "valid mask 0x7fff" "$out"
expect "scratchpads" "^scratchpads +8 " "$out"
expect "dma" "^dma channels +4$" "$out"
[ "$(on b ntb_tool port)" = 8 ] || fail "port of b"
[ "$(on a ntb_tool link)" = 0x1 ] || fail "link mask of a"
expect "mw" "peer 0 \(port 8\): 64 inbound windows, addr align 4 MiB" "$(on a ntb_tool mw)"
expect "peer_mw" "^3 +0x[0-9a-f]{16} +4 MiB$" "$(on a ntb_tool peer_mw 3)"
expect "faults" "^0 IOMMU faults on host a" "$(on a ntb_tool faults)"

echo "== scratchpads between hosts"
on a ntb_tool peer_spad 0 3 0x1234
[ "$(on b ntb_tool spad 3)" = 0x00001234 ] || fail "b's spad 3 after a wrote it"
on b ntb_tool spad 4 77
[ "$(on a ntb_tool peer_spad 0 4)" = 0x0000004d ] || fail "a reading b's spad 4"
expect "spad list" "^3 0x00001234$" "$(on b ntb_tool spad)"

echo "== doorbells between hosts"
on b ntb_tool db clear 0x7fff >/dev/null
on a ntb_tool peer_db 0 set 0x5
[ "$(on b ntb_tool db)" = 0x5 ] || fail "b's doorbell after a rang 0x5"
[ "$(on b ntb_tool db_event 5000)" = 0x5 ] || fail "db_event on b"
on b ntb_tool db_mask set 0x4 >/dev/null
[ "$(on b ntb_tool db_event 5000)" = 0x1 ] || fail "db_event with bit 2 masked"
[ "$(on b ntb_tool db_mask clear 0x4)" = 0x0 ] || fail "db_mask clear"
[ "$(on b ntb_tool db clear 0x5)" = 0x0 ] || fail "db clear"
if on b ntb_tool db_event 50 >/dev/null 2>&1; then fail "db_event with nothing pending"; fi
if on a ntb_tool peer_db 0 set 0x8000 2>"$tmp/err"; then fail "agent's doorbell bit accepted"; fi
expect "reserved bit" "outside the valid doorbell mask" "$(cat "$tmp/err")"

echo "== windows: b exposes a buffer, a stores into it"
ntblend --fabric "$fabric" run --host b -- ntb_tool mw_trans 0 10 4K --seconds 30 >"$tmp/mw" 2>&1 &
bg+=($!)
wait_for "$tmp/mw" "waiting"
expect "mw_trans" "^peer 0 window 10 -> bus 0x[0-9a-f]+, 4 KiB" "$(cat "$tmp/mw")"
on a ntb_tool peer_mw_write 10 16 "hello ntb"
expect "read back through the window" "^00000010  68 65 6c 6c 6f 20 6e 74  62 " "$(on a ntb_tool peer_mw_dump 10 32)"
expect "unprogrammed window reads all ones" "^00000000  ff ff ff ff" "$(on a ntb_tool peer_mw_dump 20 16)"
kill -TERM "${bg[-1]}" 2>/dev/null || true
wait "${bg[-1]}" 2>/dev/null || true
expect "b sees a's bytes" "hello ntb" "$(cat "$tmp/mw")"

echo "== link events"
ntblend --fabric "$fabric" run --host a -- ntb_tool link_event 20000 >"$tmp/le" 2>"$tmp/le.err" &
le=$!
bg+=($le)
wait_for "$tmp/le.err" "waiting for a change"
on b ntb_tool link disable >/dev/null
wait "$le" || fail "link_event: $(cat "$tmp/le.err")"
[ "$(cat "$tmp/le")" = "link 0x1 -> 0x0" ] || fail "link_event output: $(cat "$tmp/le")"
[ "$(on a ntb_tool link)" = 0x0 ] || fail "link mask after disable"
on b ntb_tool link enable >/dev/null
[ "$(on a ntb_tool link)" = 0x1 ] || fail "link mask after enable"

echo "== ntb_perf"
out=$(on a ntb_perf -s 8M --json)
expect "perf cpu json" '"mode":"cpu"' "$out"
expect "perf total" '"total":8388608' "$out"
expect "perf verified" '"verified":true' "$out"
expect "perf figures" '"mbps":[0-9]' "$out"
out=$(on a ntb_perf -s 8M --dma --json)
expect "perf dma json" '"mode":"dma".*"verified":true' "$out"
out=$(on a ntb_perf -s 8M -T 2 -c 64K --baseline --json)
expect "perf baseline" '"threads":2.*"baseline_mbps":[0-9].*"ratio":[0-9]' "$out"
out=$(on a ntb_perf -s 8M -r 1)
expect "perf text" "copied 8388608 bytes in [0-9]+ usecs, [0-9]+ MBytes/s" "$out"
expect "perf text verified" "^verified: host b's buffer holds the last data written" "$out"
# The user runs the server: --no-spawn.
ntblend --fabric "$fabric" run --host b -- ntb_perf --serve --once >"$tmp/srv" 2>&1 &
srv=$!
bg+=($srv)
wait_for "$tmp/srv" "serving"
out=$(on a ntb_perf --no-spawn -s 8M --dma --json)
expect "perf no-spawn" '"verified":true' "$out"
wait "$srv" || fail "ntb_perf --serve --once: $(cat "$tmp/srv")"

echo "== ntb_pingpong"
out=$(on a ntb_pingpong -n 200 --json)
expect "pingpong json" '"rounds":200' "$out"
expect "pingpong stats" '"min_ns":[0-9]+,"median_ns":[0-9]+,"p99_ns":[0-9]+,"max_ns":[0-9]+' "$out"
expect "pingpong verified" '"verified":true' "$out"
out=$(on a ntb_pingpong -n 200 --baseline)
expect "pingpong baseline" "^ratio doorbell/futex \(median\): [0-9.]+$" "$out"
expect "pingpong counter" "^counter: every round's value came back from host b" "$out"

echo "== with the link down, the tools fail cleanly"
on b ntb_tool link disable >/dev/null
if on a ntb_perf -s 1M --timeout 2 2>"$tmp/err" >/dev/null; then fail "ntb_perf over a downed link"; fi
expect "perf link down" "link to peer 0 \(host b\) is down" "$(cat "$tmp/err")"
on b ntb_tool link enable >/dev/null

echo "PASS"
