#!/usr/bin/env bash
# The lent path writes no more lines of the fabric's shared state per I/O than the local one
# (docs/lending.md, "Cache lines per I/O"): lend_lines counts the lines a 4 KiB QD 1 read with
# per-I/O DMA mapping writes, on host a's own NVMe (a's IOMMU on, as the borrower's is) and on
# the same NVMe lent to c, and no line an I/O writes in an IOMMU table may hold a mapping that
# stays (a device checks those at every access: the line would move between the CPUs at every
# I/O). Counts, not times.
set -euo pipefail
bin="${NTBLEND_BIN:?set NTBLEND_BIN to the bin directory of the build}"
src="${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}"
. "$src/tests/lib/fixture.sh"
fx_init lendlines
trap 'exit 130' INT TERM

"$bin/lend_lines" --help | grep -q -- "--device" || fail "lend_lines --help"
if "$bin/lend_lines" --device nvme0 2>"$work/err"; then fail "lend_lines took a device that is no pci: name"; fi
grep -q "give --device pci:" "$work/err" || fail "no message for a wrong device: $(cat "$work/err")"

awk '{ print } $0 == "[host a]" { print "iommu = on" }' "$src/examples/topologies/lend-nvme.ini" >"$work/topo.ini"
n up "$work/topo.ini" >/dev/null
slot() { n lspci --host "$1" --json | jq -r '.[0].functions[] | select(.name == "nvme0") | .slot'; }
n run --host a -- "$bin/lend_lines" --device "pci:0000:$(slot a)" -n 100 --json >"$work/local.json" ||
    fail "lend_lines on the local NVMe"
n device lend nvme0 --to c >/dev/null
n run --host c -- "$bin/lend_lines" --device "pci:0000:$(slot c)" -n 100 --json >"$work/lent.json" ||
    fail "lend_lines on the lent NVMe"
local_n=$(jq .total "$work/local.json") lent_n=$(jq .total "$work/lent.json")
((local_n > 0)) || fail "no line counted on the local NVMe: $(cat "$work/local.json")"
((lent_n <= local_n)) || fail "the lent path writes $lent_n lines per I/O, the local one $local_n: $(cat "$work/lent.json")"
for side in local lent; do
    [[ $(jq .iommu_lines_shared "$work/$side.json") == 0 ]] ||
        fail "$side: a per-I/O IOMMU slot shares its line with a lasting mapping: $(cat "$work/$side.json")"
done
# The model's sleeps are counted apart (they follow the gaps between I/Os, not the path), and
# the phases' counts must still be there for the docs' table.
for side in local lent; do
    jq -e '[.phases[].model_sleeps | numbers] | length == 3' "$work/$side.json" >/dev/null ||
        fail "$side: no model_sleeps per phase: $(cat "$work/$side.json")"
done
echo "test_lend_lines: local $local_n lines per I/O, lent $lent_n;" \
    "model sleeps (map, I/O, unmap): local $(jq -c '[.phases[].model_sleeps]' "$work/local.json")," \
    "lent $(jq -c '[.phases[].model_sleeps]' "$work/lent.json")"
