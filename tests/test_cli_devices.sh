#!/usr/bin/env bash
# `ntblend device`: listing, lending out, borrowing for hosts (exclusive and shared), the
# refusals, returning, and devices in `status`.
set -euo pipefail
fabric="t-clidev-$$"
n() { ntblend --fabric "$fabric" "$@"; }
trap 'n down >/dev/null 2>&1 || true' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
expect_fail() { if "$@" >/dev/null 2>&1; then fail "should have failed: $*"; fi; }

n up "$NTBLEND_SRC/examples/topologies/smartio3.ini" >/dev/null
out=$(n device list)
grep -q "nvme0 .*nvme .*a .*8086:2701 010802" <<<"$out" || fail "device list: $out"
grep -q "accel1 .*accel .*c " <<<"$out" || fail "device list: $out"

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

n device remove nvme0 >/dev/null
expect_fail n device borrow nvme0 --host c
expect_fail n device borrow nope --host b
expect_fail n device add                               # usage
set +e; n device frob x >/dev/null 2>&1; rc=$?; set -e
[ $rc -eq 2 ] || fail "unknown action: exit $rc, expected 2"
