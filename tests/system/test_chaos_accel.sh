#!/usr/bin/env bash
# The chaos run's lent-device workload: chaos_accel, a driver on the borrower of a lent
# accelerator, keeps copying and checking data while the device is reclaimed under it and lent
# again, the link to its lender goes down and up, and the driver is killed and started again
# on its state file; then it ends when asked, having seen no completed copy with wrong data and
# no round past its bound, and the borrower's tree and every table are as before the lending.
set -euo pipefail
. "${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}/tests/lib/fixture.sh"
fx_init chac
state=$work/accel.state
field() { sed -n "s/^chaos_accel.* $1 \([0-9]*\).*/\1/p" "$state" 2>/dev/null; }
wait_ok() { # more than $1 rounds checked ok
  for _ in $(seq 400); do [ "$(field ok)" -gt "$1" ] 2>/dev/null && return 0; sleep 0.05; done
  fail "no copy checked ok past $1: $(cat "$work/drv.log")"
}
driver() { (exec ntblend --fabric "$fabric" run --host b -- chaos_accel driver --state "$state" \
  --size 16k --timeout-ms 1000 --pause-us 5000) >>"$work/drv.log" 2>&1 & }
tables() {
  n status --json | jq -c '[[.adapters[] | [.name, .lut.used - .lut_agent, .requester_ids.used]], [.hosts[] | [.name, .iommu_maps]]]'
}

# Bad input is refused.
rc=0; chaos_accel driver >/dev/null 2>&1 || rc=$?
[ $rc = 2 ] || fail "driver without --state: exit $rc"
rc=0; chaos_accel driver --state "$state" --size 0 >/dev/null 2>&1 || rc=$?
[ $rc = 2 ] || fail "--size 0: exit $rc"
chaos_accel --help | grep -q "chaos_accel driver --state FILE" || fail "--help"

n up "$NTBLEND_SRC/examples/topologies/smartio3.ini" >/dev/null
baseline=$(tables)
tree=$(n lspci --host b)
n device lend accel1 --to b >/dev/null
driver; p=$!
wait_ok 5
# Reclaimed while in use: remove() runs, the driver waits; lent again, it is probed again.
n device reclaim accel1 >/dev/null
for _ in $(seq 100); do [ "$(field removes)" = 1 ] && break; sleep 0.05; done
[ "$(field removes)" = 1 ] || fail "the driver was not told of the reclaim: $(cat "$work/drv.log")"
n device lend accel1 --to b >/dev/null
wait_ok "$(field ok)"
[ "$(field probes)" = 2 ] || fail "probes $(field probes), expected 2"
# The lender's link down for a moment: copies fail with an error, then succeed again.
n link down c.ntb0 sw0 >/dev/null
for _ in $(seq 200); do [ "$(field errors)" -ge 1 ] && break; sleep 0.05; done
n link up c.ntb0 sw0 >/dev/null
[ "$(field errors)" -ge 1 ] || fail "no copy failed while the lender's link was down: $(cat "$state")"
wait_ok "$(field ok)"
# Killed and started again: it binds the device again and carries on with its counts.
kill -9 $p; wait $p 2>/dev/null || true
before=$(field rounds)
driver; p=$!
wait_ok "$(field ok)"
grep -q "1 bound at start, [0-9]* rounds ok before" "$work/drv.log" || fail "restart: $(cat "$work/drv.log")"
[ "$(field rounds)" -gt "$before" ] || fail "the counts did not carry on"
kill -TERM $p
wait $p || fail "the driver failed: $(cat "$work/drv.log")"
grep -q "0 wrong, 0 hangs" "$work/drv.log" || fail "$(cat "$work/drv.log")"
[ "$(field wrong)" = 0 ] && [ "$(field hangs)" = 0 ] || fail "state: $(cat "$state")"

n device reclaim accel1 >/dev/null
[ "$(n lspci --host b)" = "$tree" ] || fail "b's tree after the reclaim: $(n lspci --host b)"
after=""
for _ in $(seq 50); do after=$(tables); [ "$after" = "$baseline" ] && break; sleep 0.1; done
[ "$after" = "$baseline" ] || fail "tables: before $baseline, after $after"
echo "ok: $(cat "$state")"
