#!/usr/bin/env bash
# One NVMe, 30 client hosts at once (examples/topologies/nvme31.ini with the NVMe cut to 30
# I/O queue pairs): every client takes a queue pair, a 31st client is refused with a clear
# "no free I/O queue pair (device has 30)", and then 30 clients write, read back and verify
# blocks of their own concurrently.
set -euo pipefail
. "${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}/tests/lib/fixture.sh"
fx_init nv30
# wait_for COND MESSAGE [held]: until COND holds. No deadline of its own beyond CTest's (a
# machine busy with other work may take minutes to start 30 clients); with `held`, it fails at
# once when a client that should hold its queue pair has ended. MESSAGE is evaluated when it
# is printed.
wait_for() {
  local n=0
  until eval "$1"; do
    sleep 0.05
    if ((++n % 20 == 0)); then
      ((n % 400)) || echo "still waiting after $((n / 20)) s: $(eval "echo \"$2\"")" >&2
      if [ "${3:-}" = held ] && [ "$(jobs -rp | wc -l)" != 30 ]; then
        fail "a client ended: $(eval "echo \"$2\"")"
      fi
    fi
  done
}
state() { n nvme status --json | jq -r ".[0].manager.state.$1"; }

sed 's/^queues = 64$/queues = 30/' "$NTBLEND_SRC/examples/topologies/nvme31.ini" >"$work/topo.ini"
n up "$work/topo.ini" >/dev/null
n device add nvme0 >/dev/null
n nvme manager nvme0 --host lender >/dev/null
[ "$(state max_qpairs)" = 30 ] || fail "max_qpairs $(state max_qpairs)"

hosts=$(seq -f "c%02g" 1 30)
for h in $hosts; do
  ntblend --fabric "$fabric" run --host "$h" -- nvme_client nvme0 hold >"$work/$h.hold" 2>&1 &
done
wait_for '[ "$(cat "$work"/c*.hold | grep -c "ready qid")" = 30 ]' \
  '30 clients did not all get a queue pair: $(cat "$work"/c*.hold | sort | uniq -c)' held
wait_for '[ "$(state qpairs)" = 30 ] && [ "$(state clients)" = 30 ]' 'status: $(n nvme status)' held
err=$(n run --host lender -- nvme_client nvme0 io 1 0 8 2>&1) && fail "a 31st client got a queue pair"
grep -q "no free I/O queue pair (device has 30, all in use)" <<<"$err" || fail "31st client: $err"
kill $(jobs -p)
wait 2>/dev/null || true
wait_for '[ "$(state qpairs)" = 0 ] && [ "$(state clients)" = 0 ]' 'holders not reclaimed: $(n nvme status)'

i=0
for h in $hosts; do
  ntblend --fabric "$fabric" run --host "$h" -- nvme_client nvme0 io 2 $((i * 256)) 256 >"$work/$h.io" 2>&1 &
  i=$((i + 1))
done
wait_for '[ "$(state clients)" = 30 ] || [ "$(cat "$work"/c*.io | grep -c verified)" = 30 ] || [ -z "$(jobs -rp)" ]' \
  "30 clients were never connected at once"
for p in $(jobs -p); do wait "$p" || fail "a client failed: $(grep -L verified "$work"/c*.io | xargs cat)"; done
[ "$(cat "$work"/c*.io | grep -c "all verified")" = 30 ] || fail "$(cat "$work"/c*.io)"
echo "ok: 30 clients, $(cat "$work"/c*.io | awk '{s += $1} END {print s}') verified rounds"
