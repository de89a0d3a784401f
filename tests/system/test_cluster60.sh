#!/usr/bin/env bash
# The 60-host cluster (7 cascaded switches) boots on this machine, every host is listed up,
# agents reach each other three switches apart over the NTB, and cutting a leaf switch's
# uplink cuts off exactly the hosts behind it.
set -euo pipefail
. "${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}/tests/lib/fixture.sh"
fx_init c60

n up "$NTBLEND_SRC/examples/topologies/cluster60.ini" >/dev/null
json=$(n status --json)
[ "$(grep -c '"state": "up"' <<<"$json")" -ge 60 ] || fail "not all 60 hosts are up"
[ "$(grep -c '"agent_health": "ok"' <<<"$json")" -eq 60 ] || fail "not every agent answers"
grep -q "^HOSTS (60)" <<<"$(n status)" || fail "status does not list 60 hosts"

# h00 sits on the first leaf switch, h59 on the last: leaf - top - leaf.
n agent-ping h00 h59 >/dev/null || fail "h00 cannot reach h59 three switches away"
n agent-ping h00 h01 >/dev/null || fail "h00 cannot reach its leaf neighbour h01"

n link down sw6 sw0 >/dev/null
if n agent-ping h00 h59 >/dev/null 2>&1; then fail "h59 still reachable with its uplink down"; fi
n agent-ping h00 h01 >/dev/null || fail "the cut also broke h00 -- h01"
n link up sw6 sw0 >/dev/null
n agent-ping h00 h59 >/dev/null || fail "h59 not reachable after the uplink came back"
