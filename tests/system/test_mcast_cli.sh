#!/usr/bin/env bash
# `ntblend mcast`: creating groups, joining hosts with RAM and a device's memory BAR, list and
# list --json, leaving, removing, and the refusals with messages that say what to do.
set -euo pipefail
. "${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}/tests/lib/fixture.sh"
fx_init mcli
# expect_err STATUS PATTERN CMD...: CMD fails with STATUS, its stderr matching PATTERN.
expect_err() {
  local want=$1 pat=$2 rc=0 err
  shift 2
  err=$("$@" 2>&1 >/dev/null) || rc=$?
  [ "$rc" -eq "$want" ] || fail "'$*' exited $rc, not $want: $err"
  grep -Eq -- "$pat" <<<"$err" || fail "'$*': expected /$pat/ in: $err"
}

n mcast --help | grep -q "mcast create|join|leave|list|remove" || fail "--help"
n up "$NTBLEND_SRC/tests/system/topologies/mcast.ini" >/dev/null
n mcast list | grep -q "MULTICAST GROUPS (0 of 64)" || fail "empty list: $(n mcast list)"
n mcast create frames --size 64K | grep -q "group frames (id 0): a 64K window on sw0" || fail create
n mcast join frames b --addr 0x800000 >/dev/null
n mcast join frames c --device accel0 --offset 64K >/dev/null
n mcast join frames d --addr 8M >/dev/null
out=$(n mcast list)
grep -Eq "^ +0 +frames +sw0 +64K +3 +0 +kept" <<<"$out" || fail "list: $out"
grep -Eq "^ +b +via b.ntb0 +overlay 0x800000" <<<"$out" || fail "list: b: $out"
json=$(n mcast list --json)
[ "$(jq -r '.[0].members | length' <<<"$json")" = 3 ] || fail "json members: $json"
[ "$(jq -r '.[0].members[] | select(.host == "d") | .overlay' <<<"$json")" = $((8 << 20)) ] || fail "json d: $json"
[ "$(jq -r '.[0].size' <<<"$json")" = 65536 ] || fail "json size: $json"

expect_err 1 "no cable to sw0" n mcast join frames e --addr 8M
expect_err 1 "member of frames already" n mcast join frames b --addr 0x800000
expect_err 1 "not 4 KiB aligned memory" n mcast join frames a --addr 0x100
expect_err 1 "not 4 KiB aligned memory" n mcast join frames a --addr 0
expect_err 1 "has no device 'accel0'" n mcast join frames a --device accel0
expect_err 1 "exists already" n mcast create frames
expect_err 1 "power of two" n mcast create other --size 3000
expect_err 1 "no switch 'sw9'" n mcast create other --switch sw9
expect_err 1 "no multicast group 'nope'" n mcast join nope b --addr 8M
expect_err 1 "no host named 'zz'" n mcast leave frames zz
expect_err 1 "not a member of frames" n mcast leave frames a
expect_err 2 "needs where the writes land" n mcast join frames a
expect_err 2 "'--json' goes with list" n mcast create x --json
expect_err 2 "unknown action 'join2'" n mcast join2 frames
expect_err 2 "takes a group and a host" n mcast leave frames
for i in $(seq 2 64); do n mcast create "g$i" --size 4K >/dev/null; done
expect_err 1 "all are in use" n mcast create one-more
for i in $(seq 2 64); do n mcast remove "g$i" >/dev/null; done

n mcast leave frames d >/dev/null
[ "$(n mcast list --json | jq -r '.[0].members | length')" = 2 ] || fail "leave"
n mcast remove frames >/dev/null
n mcast list | grep -q "MULTICAST GROUPS (0 of 64)" || fail "remove"

# A fabric without switches has no multicast.
n down >/dev/null
n up "$NTBLEND_SRC/examples/topologies/two-hosts.ini" >/dev/null
expect_err 1 "no cluster switch" n mcast create frames
