#!/usr/bin/env bash
# The composite workload (tools/composite_job; device-lending-kvm-multidevice-2019 §7.5,
# smartio-tocs-2021 §7.2) in its three cases on examples/topologies/composite.ini, always on
# host b: its own devices, three lent by one lender, by two lenders (--use picks them). Each run's output is checked on the NVMe after every epoch
# (the job fails otherwise); here also that every epoch reports all five stages and that they
# add up to the epoch, and that bad input and a host without the devices get a clear refusal.
set -euo pipefail
. "${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}/tests/lib/fixture.sh"
fx_init composite

n up "$NTBLEND_SRC/examples/topologies/composite.ini" >/dev/null

# b's slots of DEVICEs, comma-separated (composite_job --use).
slots() { local d out=""; for d in "$@"; do
  out+=${out:+,}$(n lspci --host b --json | jq -r --arg d "$d" '.[0].functions[] | select(.name == $d) | .slot')
done; echo "$out"; }
# A --json run on b with DEVICEs: two epochs, verified, every stage there, the stages summing
# to the epoch, and the devices asked for are the ones used.
check_run() { # CASE DEVICE...
  local c=$1 out use
  shift
  use=$(slots "$@")
  out=$(n run --host b -- composite_job --epochs 2 --size 256k --use "$use" --json 2>"$work/err") ||
    fail "$c: composite_job failed: $(cat "$work/err") $out"
  jq -e '.verified == true and (.epochs | length) == 2 and .size == 262144' <<<"$out" >/dev/null ||
    fail "$c: unexpected report: $out"
  jq -e '[.epochs[] | (.load_us, .h2d_us, .p2p_us, .d2h_us, .store_us) | numbers | select(. > 0)] | length == 10' \
    <<<"$out" >/dev/null || fail "$c: a stage is missing or not positive: $out"
  jq -e '[.epochs[] | ((.load_us + .h2d_us + .p2p_us + .d2h_us + .store_us) - .total_us) | fabs < 0.5] | all' \
    <<<"$out" >/dev/null || fail "$c: the stages do not add up to the epoch: $out"
  jq -e '.median_epoch_us > 0' <<<"$out" >/dev/null || fail "$c: no median: $out"
  [ "$(jq -r '[.nvme, .accels[]] | map(.[5:]) | join(",")' <<<"$out")" = "$use" ] ||
    fail "$c: asked for $use, used $(jq -c '[.nvme, .accels]' <<<"$out")"
}

check_run local nvme1 accel3 accel4
n device lend nvme0 --to b >/dev/null
n device lend accel0 --to b >/dev/null
n device lend accel1 --to b >/dev/null
check_run one-lender nvme0 accel0 accel1
# The text form says what it bound and checked.
out=$(n run --host b -- composite_job --epochs 1 --size 64k --use "$(slots nvme0 accel0 accel1)") ||
  fail "text run: $out"
grep -q "^epoch 1: .*load .*h2d .*p2p .*d2h .*store .*data verified" <<<"$out" || fail "text run: $out"
n device reclaim accel1 >/dev/null
n device lend accel2 --to b >/dev/null
check_run two-lenders nvme0 accel0 accel2

# Refusals, each with what to do.
expect() { # STATUS PATTERN HOST ARGS...: the run exits STATUS and says PATTERN
  local st=$1 pat=$2 host=$3 rc=0 out
  shift 3
  out=$(n run --host "$host" -- composite_job "$@" 2>&1) || rc=$?
  [ "$rc" = "$st" ] || fail "composite_job $* on $host: exit $rc, not $st: $out"
  grep -q -- "$pat" <<<"$out" || fail "composite_job $* on $host: no '$pat' in: $out"
}
expect 2 "--size takes 1..64M" b --size 0
expect 2 "--epochs takes 1..10000" b --epochs 0
expect 2 "unexpected argument 'x'" b x
expect 2 "--use takes three slots" b --use 80:00.0,81:00.0
expect 1 "at most half of it" b --size 48M --epochs 1
expect 1 "within namespace 1" b --lba 100000000 --epochs 1
expect 1 "found 0 and 0" b --use 99:00.0,98:00.0,97:00.0 --epochs 1
expect 1 "needs an NVMe and two accelerators in this host's PCIe tree, found 0 and 0" c --epochs 1
n run --host b -- composite_job --help | grep -q "^usage: ntblend run --host H -- composite_job" ||
  fail "--help"
echo "composite: three cases verified, refusals clear"
