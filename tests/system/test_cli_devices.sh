#!/usr/bin/env bash
# `ntblend device`: listing, lending out, borrowing for hosts (exclusive and shared), the
# refusals, returning, and devices in `status`.
set -euo pipefail
. "${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}/tests/lib/fixture.sh"
fx_init clidev

n up "$NTBLEND_SRC/examples/topologies/smartio3.ini" >/dev/null
out=$(n device list)
grep -q "nvme0 .*nvme .*a .*8086:2701 010802" <<<"$out" || fail "device list: $out"
grep -q "accel1 .*accel .*c " <<<"$out" || fail "device list: $out"
# Each device's SISCI fdid (node id << 16 | id + 1): what libnvm's --ctrl= takes.
grep -q "^ *0  0x40001  *nvme0 " <<<"$out" || fail "device list: no fdid 0x40001 for nvme0: $out"
grep -q "^ *2  0xc0003  *accel1 " <<<"$out" || fail "device list: no fdid 0xc0003 for accel1: $out"
[ "$(n device list --json | jq -r '.[] | select(.name=="nvme0") | .fdid')" = $((0x40001)) ] \
  || fail "device list --json: fdid"
grep -q "Device: nvme0 (model nvme, up), SISCI fdid 0x40001" <<<"$(n lspci -s nvme0 -v)" \
  || fail "lspci -v: fdid"
[ "$(n lspci --json --host c | jq -r '.[0].functions[] | select(.name=="accel1") | .fdid')" = $((0xc0003)) ] \
  || fail "lspci --json: fdid"

expect_fail n device borrow nvme0 --host b           # not lent out yet
n device add nvme0 >/dev/null
n device borrow nvme0 --host b >/dev/null            # exclusive
expect_fail n device borrow nvme0 --host c --shared  # held exclusively
n device return nvme0 --host b >/dev/null
n device borrow nvme0 --host b --shared >/dev/null
n device borrow nvme0 --host c --shared >/dev/null
expect_fail n device borrow nvme0 --host c --shared  # already
grep -q "nvme0 .* yes .*b,c" <<<"$(n device list)" || fail "two shared borrowers not listed"
grep -q '"borrowers"' <<<"$(n status --json)" || fail "status --json has no devices"
grep -q "^DEVICES (3)" <<<"$(n status)" || fail "status lists no devices"

# A borrower that crashes loses its borrow; the lender keeps lending.
n host kill c >/dev/null
for _ in $(seq 100); do grep -q "nvme0 .* yes .*b$" <<<"$(n device list)" && break; sleep 0.05; done
grep -q "nvme0 .* yes .*b$" <<<"$(n device list)" || fail "c's borrow outlived its host"
n host start c >/dev/null

out=$(n device remove nvme0)
grep -q "host b still borrows it until its programs return it" <<<"$out" || fail "remove while borrowed: $out"
n device return nvme0 --host b >/dev/null
expect_fail n device borrow nvme0 --host c
# Withdrawn while hot-added into another host's tree: that host gives it back first, so that
# nothing of it is left there and it can be lent to the same host again.
n device add nvme0 >/dev/null
n device lend nvme0 --to c >/dev/null
out=$(n device remove nvme0)
grep -q "hot-removed from c" <<<"$out" || fail "remove while lent to c: $out"
grep -q "Non-Volatile" <<<"$(n lspci --host c)" && fail "nvme0 stayed in c's tree after remove: $(n lspci --host c)"
grep -q "nvme0 .* no .* -$" <<<"$(n device list)" || fail "device list after remove: $(n device list)"
n device add nvme0 >/dev/null
n device lend nvme0 --to c >/dev/null || fail "nvme0 could not be lent to c again after remove"
n device reclaim nvme0 >/dev/null
expect_fail n device borrow nope --host b
expect_fail n device add                               # usage
set +e; n device frob x >/dev/null 2>&1; rc=$?; set -e
[ $rc -eq 2 ] || fail "unknown action: exit $rc, expected 2"

# `ntblend lspci`: each host's tree, in lspci's own words. pciutils decodes the configuration
# space ntblend dumps (-xxx) and must print the same function lines, BAR addresses and
# capabilities as `ntblend lspci -v` does.
out=$(n lspci --host a)
grep -qx "02:00.0 Non-Volatile memory controller: Intel Corporation NVMe Datacenter SSD \[Optane\] (rev 01)" <<<"$out" \
  || fail "lspci --host a: $out"
grep -q "^01:00.0 Bridge: PLX Technology" <<<"$out" || fail "lspci: no NTB adapter on bus 01: $out"
grep -qx "04:00.0 0302: 10de:1bb1 (rev 01)" <<<"$(n lspci --host c -n)" || fail "lspci -n --host c"
grep -q "accel1" <<<"$(n lspci --host a -t)" && fail "lspci -t --host a shows c's device"
grep -q -- "-04.0-\[04\]----00.0  accel1" <<<"$(n lspci --host c -t)" || fail "lspci -t --host c"
n device add accel0 >/dev/null
n device borrow accel0 --host b >/dev/null
grep -q "Lent: exclusive; borrowed by: b" <<<"$(n lspci -s accel0 -v)" || fail "lspci -v: lending state"
[ "$(n lspci --json --host a | jq -r '.[0].functions[] | select(.name=="accel0") | .borrowers[0]')" = b ] \
  || fail "lspci --json: borrowers"
n device return accel0 --host b >/dev/null
expect_fail n lspci -s 7f:00.0
set +e; n lspci --json -v >/dev/null 2>&1; rc=$?; set -e
[ $rc -eq 2 ] || fail "lspci --json -v: exit $rc, expected 2"
for h in a b c; do
  dump=$(mktemp)
  n lspci --host "$h" -xxx >"$dump"
  ours=$(n lspci --host "$h" -v | sed 's/ \[size=[0-9]*[KMGT]\]$//')
  theirs=$(lspci -F "$dump" -v 2>/dev/null)
  rm -f "$dump"
  [ -n "$theirs" ] || fail "lspci -F could not read host $h's dump"
  while IFS= read -r line; do
    case "$line" in
      [0-9a-f][0-9a-f]:*|$'\t'"Memory at "[0-9a-f]*|$'\t'Capabilities:*|$'\t'Subsystem:*|$'\t'Flags:*)
        grep -qxF -- "$line" <<<"$theirs" || fail "host $h: pciutils does not print: $line" ;;
    esac
  done <<<"$ours"
done
