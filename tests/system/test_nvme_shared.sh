#!/usr/bin/env bash
# One NVMe shared by several hosts at once (smartio-tocs-2021 §6.2): `ntblend nvme manager`
# owns the controller and hands out queue pairs; clients on three hosts (one of them the
# manager's own) do verified I/O at the same time; bad input is refused with clear messages;
# a client killed with SIGKILL has its queues deleted and their identifiers reused, 100 times
# over, without leaking a queue, LUT entry or requester ID; a client whose link goes down
# mid-I/O gets -EIO within a bounded time and can reopen once the link is back; one cut off
# until the manager reclaimed it is told so (-ENOTCONN) when it next asks; the
# manager's death leaves I/O working and admin requests failing with a clear error; and data
# written and flushed survives a crash of the lender and `ntblend down` / `up`.
set -euo pipefail
. "${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}/tests/lib/fixture.sh"
fx_init nvsh
on() { local h=$1; shift; n run --host "$h" -- "$@"; }
# In the background, $! must be the client itself (ntblend run executes it in its own place).
bg() { local h=$1 out=$2; shift 2; ntblend --fabric "$fabric" run --host "$h" -- "$@" >"$out" 2>&1 & }
# wait_for COND MESSAGE [TRIES]: MESSAGE is evaluated when it fails (single-quote it to see the
# state at that moment).
wait_for() { for _ in $(seq "${3:-400}"); do eval "$1" && return 0; sleep 0.05; done; eval "fail \"$2\""; }
state() { n nvme status --json | jq -r ".[] | select(.device==\"nvme0\") | .manager.state.$1"; }

# A topology whose NVMe keeps its data in $work/data, so it outlives the fabric.
sed "s|^type = nvme$|type = nvme\nbacking = $work/data|" \
  "$NTBLEND_SRC/examples/topologies/smartio3.ini" >"$work/topo.ini"
n up "$work/topo.ini" >/dev/null
n device add nvme0 >/dev/null

# ---- the manager
out=$(n nvme manager nvme0 --host a)
grep -q "nvme0: manager running on host a" <<<"$out" || fail "manager: $out"
grep -q "nvme0 .* (manager: a pid [0-9]*)" <<<"$(n device list)" || fail "device list: no manager"
[ "$(state clients)" = 0 ] && [ "$(state max_qpairs)" = 32 ] || fail "nvme status: $(n nvme status)"
err=$(n nvme manager nvme0 --host b 2>&1) && fail "a second manager started"
grep -q "nvme0 has a manager already: pid [0-9]* on host a (ntblend nvme stop nvme0 first)" <<<"$err" \
  || fail "second manager: $err"
err=$(n device lend nvme0 --to c 2>&1) && fail "nvme0 was lent while its manager shares it"
grep -q "an NVMe manager (pid [0-9]* on host a) shares it .*: ntblend nvme stop nvme0" <<<"$err" \
  || fail "lend under a manager: $err"
err=$(on b ntblend-nvme-manager nvme0 2>&1) && fail "a second manager (direct) started"
grep -q "has a manager already" <<<"$err" || fail "second manager (direct): $err"
err=$(n nvme manager nvme9 --host a 2>&1) && fail "a manager of nvme9 started"
grep -q "no device 'nvme9'" <<<"$err" || fail "unknown device: $err"
err=$(n nvme manager accel0 --host a 2>&1) && fail "a manager of accel0 started"
grep -q "'accel0' is a accel device, not an NVMe" <<<"$err" || fail "not an NVMe: $err"
err=$(on b nvme_client nvme9 io 1 0 8 2>&1) && fail "a client opened nvme9"
grep -q "no device 'nvme9' in this fabric" <<<"$err" || fail "client, unknown device: $err"

# ---- bad input from a client
out=$(on b nvme_client nvme0 bad) || fail "bad input: $out"
grep -q "client: yes" <<<"$out" || fail "the client did not go through the manager: $out"

# ---- three clients at once, one on the manager's host, each verifying its own blocks
bg a "$work/a.out" nvme_client nvme0 io 3 0 512; pa=$!
bg b "$work/b.out" nvme_client nvme0 io 3 512 512; pb=$!
bg c "$work/c.out" nvme_client nvme0 io 3 1024 512; pc=$!
wait_for '[ "$(state clients)" = 3 ]' "three clients never connected at once" 200
for h in a b c; do
  p=$([ $h = a ] && echo $pa || { [ $h = b ] && echo $pb || echo $pc; })
  wait "$p" || fail "client on $h: $(cat "$work/$h.out")"
  grep -q "all verified" "$work/$h.out" || fail "client on $h: $(cat "$work/$h.out")"
done
wait_for '[ "$(state clients)" = 0 ] && [ "$(state qpairs)" = 0 ]' "clients left queues behind"

# ---- 100 clients killed with SIGKILL: their queues are deleted and the identifiers reused
base=$(n status --json | jq -c '[.adapters[] | {name, lut: .lut.used, rid: .requester_ids.used}]')
for i in $(seq 100); do
  out="$work/hold.$i.out" # a file of its own: the shell truncates it in the child, later
  bg b "$out" nvme_client nvme0 hold; p=$!
  wait_for 'grep -q ready "$out" || ! kill -0 $p 2>/dev/null' "hold $i never got ready" 400
  grep -q "ready qid" "$out" || fail "hold $i: $(cat "$out")"
  kill -9 $p
  wait $p 2>/dev/null || true
done
wait_for '[ "$(state reclaimed_clients)" = 100 ] && [ "$(state qpairs)" = 0 ]' \
  'after 100 kills: $(n nvme status --json | jq -c ".[0].manager.state")'
[ "$(state reclaimed_qpairs)" = 100 ] || fail "reclaimed $(state reclaimed_qpairs) queue pairs"
wait_for '[ "$(n status --json | jq -c "[.adapters[] | {name, lut: .lut.used, rid: .requester_ids.used}]")" = "$base" ]' \
  "LUT or requester-ID entries leaked: before $base, after $(n status --json | jq -c '[.adapters[] | {name, lut: .lut.used, rid: .requester_ids.used}]')"
n device list | grep -q "nvme0 .* a (manager" || fail "b still borrows nvme0: $(n device list)"
out=$(on b nvme_client nvme0 io 1 0 64) || fail "a client after the kills: $out"

# ---- a link goes down mid-I/O: -EIO within a bounded time, then reopen once it is back
bg c "$work/out.out" nvme_client nvme0 outage 2048 256; po=$!
wait_for 'grep -q ready "$work/out.out"' "outage client never got ready"
sleep 0.3
n link down c sw0 >/dev/null
wait_for 'grep -q "failed after" "$work/out.out"' "no error within 20 s of the link going down" 400
grep -q "failed after [0-9]* ms with Input/output error" "$work/out.out" \
  || fail "link down: $(cat "$work/out.out")"
n link up c sw0 >/dev/null
wait "$po" || fail "reopen after the link came back: $(cat "$work/out.out")"
grep -q "reopened: I/O works again" "$work/out.out" || fail "outage: $(cat "$work/out.out")"

# ---- a client cut off long enough to be reclaimed is told so once it is back (at once, not
# after its requests time out while it still holds the device)
bg c "$work/st.out" nvme_client nvme0 stale "$work/st.go"; ps=$!
wait_for 'grep -q ready "$work/st.out"' "stale client never got ready"
rec=$(state reclaimed_clients)
n link down c sw0 >/dev/null
wait_for '[ "$(state reclaimed_clients)" -gt "$rec" ]' "the manager never reclaimed the cut-off client"
n link up c sw0 >/dev/null
touch "$work/st.go"
wait "$ps" || fail "stale client: $(cat "$work/st.out")"
grep -q "delete: Transport endpoint is not connected: .*no longer serves this client" "$work/st.out" \
  || fail "a reclaimed client was not told: $(cat "$work/st.out")"

# ---- a client's host reboots at once (too quickly for a path down to be seen): the client's
# segment went with its host's memory, so the manager reclaims its queues
bg b "$work/rb.out" nvme_client nvme0 hold; prb=$!
wait_for 'grep -q ready "$work/rb.out" || ! kill -0 $prb 2>/dev/null' "the client on b never got ready"
rec=$(state reclaimed_clients)
n host kill b >/dev/null
n host start b >/dev/null
wait "$prb" 2>/dev/null || true
wait_for '[ "$(state reclaimed_clients)" -gt "$rec" ] && [ "$(state clients)" = 0 ]' \
  'the manager kept the client of b'"'"'s previous life: $(n nvme status --json | jq -c ".[0].manager.state")' 200

# ---- durability: written and flushed, then the fabric goes down and comes back
out=$(on b nvme_client nvme0 write 3000 64 77) || fail "write: $out"

# ---- the manager dies: I/O goes on (the device is still set up), admin requests fail clearly
bg b "$work/md.out" nvme_client nvme0 io 4 4096 256; pm=$!
wait_for '[ "$(state clients)" = 1 ]' "the client never connected"
mpid=$(n nvme status --json | jq -r '.[0].manager.pid')
sleep 0.5
kill -9 "$mpid"
set +e; wait "$pm"; rc=$?; set -e
[ $rc = 3 ] || fail "client after the manager died: exit $rc: $(cat "$work/md.out")"
grep -q "all verified" "$work/md.out" || fail "I/O stopped with the manager: $(cat "$work/md.out")"
grep -q "the manager of nvme0 is gone: restart it (ntblend nvme manager nvme0)" "$work/md.out" \
  || fail "no clear error from the admin request: $(cat "$work/md.out")"
wait_for '! n device list | grep -q "manager:"' "the dead manager is still on the device's record"
err=$(n nvme stop nvme0 2>&1) && fail "stopped a manager that is gone"
grep -q "nvme0 has no manager running" <<<"$err" || fail "stop without manager: $err"
out=$(n nvme manager nvme0 --host a) || fail "restarting the manager: $out"
out=$(on c nvme_client nvme0 verify 3000 64 77) || fail "verify after the restart: $out"

# ---- the lender crashes: the dead manager's record goes with it, so once the device is lent
# out again a new manager starts; what was flushed is in the backing file
n host kill a >/dev/null
n host start a >/dev/null
n device list | grep -q "manager:" && fail "the manager's record outlived its lender's crash: $(n device list)"
n device add nvme0 >/dev/null
out=$(n nvme manager nvme0 --host a) || fail "no manager after the lender rebooted: $out"
out=$(on c nvme_client nvme0 verify 3000 64 77) || fail "flushed data lost with the lender's crash: $out"

n nvme stop nvme0 >/dev/null
n down >/dev/null
n up "$work/topo.ini" >/dev/null
n device add nvme0 >/dev/null
n nvme manager nvme0 --host a >/dev/null
out=$(on c nvme_client nvme0 verify 3000 64 77) || fail "data did not survive down/up: $out"
out=$(n nvme stop nvme0) || fail "stop: $out"
grep -q "manager stopped" <<<"$out" || fail "stop: $out"
n device list | grep -q "manager:" && fail "stopped manager still on the record"
echo "ok"
