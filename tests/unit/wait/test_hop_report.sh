#!/usr/bin/env bash
# scripts/hop-report.sh over made-up hop marks (src/wait/hop.h), two processes' files as the
# back end and the NVMe model write them: each hop's median for the QD1 requests, a stretch at
# QD2 left out, the share of requests the back end slept on the kick for, the JSON form, and
# clear errors for a directory that is not there, one with no marks, and marks with no QD1
# request. No fabric.
set -euo pipefail
src=${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
report() { bash "$src/scripts/hop-report.sh" "$@"; }

mkdir "$work/t"
# The back end (ntblend-vm): four QD1 requests (the second woken by a kick), and two at once.
cat >"$work/t/hop.ntblend-vm.100" <<'M'
# ntblend-vm 100
1000 pop 5
1100 submit 5
1800 cpl 5
1850 call 0
2900 kick 0
2950 pop 6
3050 submit 6
3900 cpl 6
3950 call 0
4450 pop 7
4550 submit 7
5100 cpl 7
5160 call 0
6000 pop 1
6010 pop 2
6100 submit 1
6110 submit 2
6500 cpl 1
6510 cpl 2
6600 call 0
7000 pop 3
7100 submit 3
7700 cpl 3
7760 call 0
M
# The NVMe model (the lender's agent): fetch and post of each command.
cat >"$work/t/hop.ntblend-agent.200" <<'M'
# ntblend-agent 200
1300 fetch 65537
1700 post 65537
3350 fetch 65538
3750 post 65538
4650 fetch 65539
5050 post 65539
6200 fetch 65540
6300 post 65540
6310 fetch 65541
6400 post 65541
7200 fetch 65542
7600 post 65542
M
j=$(report -j "$work/t") || fail "hop-report -j: $j"
want='{"requests":4,"slept_on_kick":0.25,"guest":[3,500,500],"pop-submit":[4,100,100],"submit-fetch":[4,100,200],"fetch-post":[4,400,400],"post-cpl":[4,100,100],"cpl-call":[4,50,60]}'
got=$(jq -c '{requests, slept_on_kick} + (.hops | map_values([.count, .median_ns, .p90_ns]))' <<<"$j")
[ "$got" = "$want" ] || fail "hop-report -j: $got, wanted $want"
out=$(report "$work/t")
grep -q "^4 QD1 requests; the back end was asleep on the kick for 25% of them" <<<"$out" || fail "report: $out"
grep -qE "^submit-fetch +0.1 us +0.2 us" <<<"$out" || fail "report: $out"
[ "$(grep -cE '^(guest|pop-submit|submit-fetch|fetch-post|post-cpl|cpl-call) ' <<<"$out")" = 6 ] \
  || fail "report: not every hop, in order: $out"
[ "$(sed -n 3p <<<"$out" | cut -d' ' -f1)" = guest ] || fail "report: the guest's hop first: $out"

# Bad input: what to do is said.
expect_err() {
  local want=$1 code=$2 out rc=0; shift 2
  out=$("$@" 2>&1) || rc=$?
  [ "$rc" = "$code" ] || fail "'$*' exited $rc (wanted $code): $out"
  grep -qF -- "$want" <<<"$out" || fail "'$*' said: $out (wanted: $want)"
}
expect_err "which directory?" 2 report
expect_err "is not a directory" 2 report "$work/none"
mkdir "$work/empty"
expect_err "no hop.* files in $work/empty" 1 report "$work/empty"
mkdir "$work/qd2"
sed -n '1p;/^6/p' "$work/t/hop.ntblend-vm.100" >"$work/qd2/hop.ntblend-vm.100"
expect_err "no QD1 request found" 1 report "$work/qd2"
report --help | grep -q "Usage: scripts/hop-report.sh" || fail "--help"
echo "test_hop_report: ok"
