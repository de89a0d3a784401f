#!/usr/bin/env bash
# scripts/figures.sh --quick: the script runs every experiment briefly and writes a report
# with a section for every figure it lists (the paper's numbers, ntblend's, a plot that exists,
# a verdict), the table of what it does not reproduce, each experiment's load and floor, and
# the same report again from the same data (--report-only); usage
# errors are refused with a message; no fabric is left up. The numbers are not checked (a
# quick run on a shared machine is noise). Its fabrics live in a private NTBLEND_SHM_DIR.
set -euo pipefail
work=$(mktemp -d)
export NTBLEND_SHM_DIR=/dev/shm/ntblend-test-figures-$$
mkdir -p "$NTBLEND_SHM_DIR"
cleanup() {
  local d
  for d in "$NTBLEND_SHM_DIR"/ntblend.*; do
    [ -d "$d" ] && "$NTBLEND_BIN/ntblend" --fabric "${d##*/ntblend.}" down >/dev/null 2>&1 || true
  done
  rm -rf "$work" "$NTBLEND_SHM_DIR"
}
trap cleanup EXIT
trap 'exit 143' TERM INT
fail() { echo "FAIL: $*" >&2; exit 1; }
fig() { "$NTBLEND_SRC/scripts/figures.sh" -b "$NTBLEND_BIN" "$@"; }

fig --help | grep -q '^Usage: scripts/figures.sh' || fail "--help"
for bad in "--paper nope" "--figure nope" "--frob" "--paper"; do
  # shellcheck disable=SC2086
  if err=$(fig $bad 2>&1); then fail "accepted: $bad"; fi
  grep -q "figures:" <<<"$err" || fail "no message for '$bad': $err"
done
mapfile -t ids < <(fig --list | tail -n +2 | awk '{ print $1 }')
[ ${#ids[@]} -ge 15 ] || fail "--list shows ${#ids[@]} figures"

fig --quick -o "$work/out/figures.md" -w "$work/w" 2>"$work/err" || { cat "$work/err" >&2; fail "figures.sh --quick"; }
md=$work/out/figures.md
for id in "${ids[@]}"; do
  sec=$(awk -v h="## $id: " 'index($0, h) == 1 { on = 1; print; next } /^## / { on = 0 } on' "$md")
  [ -n "$sec" ] || fail "no section for $id"
  grep -q '^| .* | .* |' <<<"$sec" || fail "$id: no table of numbers"
  grep -q '^\*\*Holds: \(yes\|no\|n/a\)\*\* — .' <<<"$sec" || fail "$id: no verdict"
  pngs=$(sed -n 's/^!\[[^]]*\](figures\/\([^)]*\))$/\1/p' <<<"$sec")
  [ -n "$pngs" ] || fail "$id: no plot"
  for png in $pngs; do [ -s "$work/out/figures/$png" ] || fail "$id: plot $png is missing"; done
  grep -q "^| \[$id\](#" "$md" || fail "$id: not in the summary table"
done
grep -q '^## Not reproduced here' "$md" || fail "no list of what is not reproduced"
grep -q '^\*\*Quick run\*\*' "$md" || fail "the quick run is not said"
for g in lending seg nvme composite ring; do
  grep -q "^- \`bench-$g\`: .* load average .*cross-CPU round trip" "$md" || fail "no load and floor of bench-$g"
done
# The report again from the same data, without running anything.
fig --report-only -o "$work/again/figures.md" -w "$work/w" 2>"$work/err" || { cat "$work/err" >&2; fail "--report-only"; }
[ "$(grep -c '^## ' "$work/again/figures.md")" = "$(grep -c '^## ' "$md")" ] || fail "--report-only: other sections"
left=$(ls "$NTBLEND_SHM_DIR")
[ -z "$left" ] || fail "left behind: $left"
echo "ok: ${#ids[@]} figures"
