# The driver-model parts of scripts/bench-vm.sh (sourced by it; see its header): fig7, irq and
# p2p, guests of the driver model on the emulated fabric (`ntblend vm run`). Uses bench-vm.sh's
# $bin, $work, $dfab, $rounds, $secs, $out and want().

# nd ARGS: ntblend on the driver-model fabric.
nd() { ntblend --fabric "$dfab" "$@"; }
# drow PART CASE KEY ROUND VALUE, and the median of a PART CASE KEY over rounds; quartiles.
drow() { printf '%s\t%s\t%s\t%s\t%s\n' "$@" >>"$work/drv.tsv"; }
dvals() { awk -F'\t' -v p="$1" -v c="$2" -v k="$3" '$1 == p && $2 == c && $3 == k { print $5 }' "$work/drv.tsv" | sort -g; }
dq() { # PART CASE KEY Q (0.25, 0.5, 0.75): that quantile of the rounds (nearest rank)
  dvals "$1" "$2" "$3" | awk -v q="$4" '{ v[++n] = $1 } END { if (n) { i = int(q * (n - 1) + 0.5) + 1; print v[i] } }'
}
dratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }

# The NVMe at SLOT through the ntbnvme fio engine, run by CMD...: the median completion latency
# (ns) of 4 KiB random reads at QD 1 into $work/fio.med.
fio_med() {
  local slot=$1; shift
  if ! "$@" fio --output-format=json --name=fig7 --ioengine=external:"$engine" \
      --ntb_device="pci:0000:$slot" --thread=1 --rw=randread --bs=4k --size=128M --iodepth=1 \
      --norandommap --randrepeat=0 --time_based --runtime="$secs" --ramp_time=0.2 \
      >"$work/fio.out" 2>"$work/fio.err"; then
    echo "bench-vm: fio ($*) failed: $(cat "$work/fio.err")" >&2
    exit 1
  fi
  sed -n '/^{/,$p' "$work/fio.out" | jq -e '.jobs[0] | if .error != 0 then error("fio job error") else
    .read.clat_ns.percentile["50.000000"] end' >"$work/fio.med"
}
vm_slot() { nd vm list --json | jq -r --arg d "$1" '.[0].devices[] | select(.device == $d) | "00:" + (.guest_bdf | split(":")[1])'; }
lspci_slot() { nd lspci --host "$1" --json | jq -r --arg d "$2" '.[0].functions[] | select(.name == $d) | .slot'; }
# Lend DEV to b and take it back; give it to the VM and take it back.
to_b() { nd device lend "$1" --to b >/dev/null; }
from_b() { nd device reclaim "$1" >/dev/null; nd device add "$1" >/dev/null; }
to_vm() { nd vm attach e1 "$1" >/dev/null; }
from_vm() { nd vm detach e1 "$1" >/dev/null; }

drv_parts() {
  engine=$bin/../lib/ntbnvme-fio.so
  : >"$work/drv.tsv"
  local topo=$work/drv.ini summary=()
  sed -e 's/^\[defaults\]$/[defaults]\niommu = on/' examples/topologies/smartio-p2p.ini >"$topo"
  printf '\n[device nvme0]\nhost = a\ntype = nvme\nqueues = 8\nnamespaces = 1\nns_size = 256M\nbacking = %s\n' \
    "$work" >>"$topo"
  nd up "$topo" >/dev/null
  for d in accel0 accel1 accel2 nvme0; do nd device add $d >/dev/null; done
  nd vm start e1 --host b --mem 128M --guest emulated >/dev/null
  echo "bench-vm: driver-model parts on fabric $dfab, $(nproc) CPUs, $rounds rounds" >&2

  if want fig7; then
    if ! command -v fio >/dev/null || [ ! -f "$engine" ]; then
      summary+=("== Fig. 7 shape: skipped: no fio, or no fio engine at $engine")
    else
      local order=(local lent vm) own
      own=$(lspci_slot a nvme0)
      for r in $(seq "$rounds"); do
        # The order rotates round by round, so no case always follows the same one.
        for k in 0 1 2; do
          case ${order[(r + k) % 3]} in
            local) fio_med "$own" nd run --host a -- ; drow fig7 local ns "$r" "$(cat "$work/fio.med")" ;;
            lent) to_b nvme0; fio_med "$(lspci_slot b nvme0)" nd run --host b --
                  drow fig7 lent ns "$r" "$(cat "$work/fio.med")"; from_b nvme0 ;;
            vm) to_vm nvme0; fio_med "$(vm_slot nvme0)" nd vm run e1 --
                drow fig7 vm ns "$r" "$(cat "$work/fio.med")"; from_vm nvme0 ;;
          esac
        done
        local l v
        l=$(awk -F'\t' -v r="$r" '$1 == "fig7" && $2 == "lent" && $4 == r { print $5 }' "$work/drv.tsv")
        v=$(awk -F'\t' -v r="$r" '$1 == "fig7" && $2 == "vm" && $4 == r { print $5 }' "$work/drv.tsv")
        drow fig7 ratio vm_over_lent "$r" "$(dratio "$v" "$l")"
        printf 'fig7 round %d: local %s ns, lent %s ns, lent to the VM %s ns (VM/lent %s)\n' "$r" \
          "$(awk -F'\t' -v r="$r" '$1 == "fig7" && $2 == "local" && $4 == r { print $5 }' "$work/drv.tsv")" \
          "$l" "$v" "$(dratio "$v" "$l")"
      done
      summary+=("== Fig. 7 shape (fio 4 KiB random reads, QD 1, median completion latency; median of $rounds rounds of ${secs} s)"
        "   local $(dq fig7 local ns 0.5) ns, lent $(dq fig7 lent ns 0.5) ns, lent to the VM $(dq fig7 vm ns 0.5) ns"
        "   VM/lent paired: median $(dq fig7 ratio vm_over_lent 0.5), quartiles $(dq fig7 ratio vm_over_lent 0.25) .. $(dq fig7 ratio vm_over_lent 0.75) (target <= 1.05)")
    fi
  fi

  if want irq; then
    local n=2000
    for r in $(seq "$rounds"); do
      for k in 0 1; do
        if (( (r + k) % 2 )); then
          to_b accel0
          nd run --host b -- accel_drv --size 4k --iters 1 --irq-bench $n >"$work/irq.out"
          from_b accel0
          drow irq lent ns "$r" "$(sed -n 's/^irq-bench .*median \([0-9]*\) ns$/\1/p' "$work/irq.out")"
        else
          to_vm accel0
          nd vm run e1 -- accel_drv --size 4k --iters 1 --irq-bench $n >"$work/irq.out"
          from_vm accel0
          drow irq vm ns "$r" "$(sed -n 's/^irq-bench .*median \([0-9]*\) ns$/\1/p' "$work/irq.out")"
        fi
      done
      local l v
      l=$(awk -F'\t' -v r="$r" '$1 == "irq" && $2 == "lent" && $4 == r { print $5 }' "$work/drv.tsv")
      v=$(awk -F'\t' -v r="$r" '$1 == "irq" && $2 == "vm" && $4 == r { print $5 }' "$work/drv.tsv")
      [ -n "$l" ] && [ -n "$v" ] || { echo "bench-vm: irq round $r: no figure ($(cat "$work/irq.out"))" >&2; exit 1; }
      drow irq ratio vm_over_lent "$r" "$(dratio "$v" "$l")"
      printf 'irq round %d: lent %s ns, lent to the VM %s ns (VM/lent %s)\n' "$r" "$l" "$v" "$(dratio "$v" "$l")"
    done
    summary+=("== Interrupts (accel_drv --irq-bench $n: a 64-byte copy, doorbell to the MSI-X handler; median of $rounds rounds)"
      "   lent $(dq irq lent ns 0.5) ns, lent to the VM $(dq irq vm ns 0.5) ns; VM/lent paired: median $(dq irq ratio vm_over_lent 0.5), quartiles $(dq irq ratio vm_over_lent 0.25) .. $(dq irq ratio vm_over_lent 0.75)")
  fi

  if want p2p; then
    for d in accel0 accel1 accel2; do to_vm $d; done
    for r in $(seq "$rounds"); do
      nd vm run e1 -- accel_drv --size 1M --iters 8 --p2p >"$work/p2p.out"
      # accel0 (00:01.0) and accel1 (00:02.0) lent by a; accel2 (00:03.0) by c.
      rate() { sed -n "s/^p2p 0000:00:$1 -> 0000:00:$2: .* bytes \([0-9.]*\) MB\/s.*/\1/p" "$work/p2p.out"; }
      h2d() { sed -n "s/^0000:00:$1 .*host->device \([0-9.]*\) MB\/s.*/\1/p" "$work/p2p.out"; }
      d2h() { sed -n "s/^0000:00:$1 .*device->host \([0-9.]*\) MB\/s.*/\1/p" "$work/p2p.out"; }
      local same two ram
      same=$(rate 01.0 02.0) two=$(rate 01.0 03.0)
      # Through guest RAM: accel0's engine writes the data into guest RAM, then accel2's reads
      # it from there: the two copies back to back, from their own rates in this run.
      ram=$(awk -v a="$(d2h 01.0)" -v b="$(h2d 03.0)" 'BEGIN { printf "%.0f", 1 / (1 / a + 1 / b) }')
      [ -n "$same" ] && [ -n "$two" ] || { echo "bench-vm: p2p round $r: $(cat "$work/p2p.out")" >&2; exit 1; }
      drow p2p same_lender mbs "$r" "$same"; drow p2p two_lenders mbs "$r" "$two"; drow p2p via_ram mbs "$r" "$ram"
      printf 'p2p round %d: one lender %s MB/s, two lenders %s MB/s, through guest RAM %s MB/s\n' "$r" "$same" "$two" "$ram"
    done
    for d in accel0 accel1 accel2; do from_vm $d; done
    summary+=("== Peer to peer inside the VM (accel_drv --p2p, 1 MiB copies; median of $rounds rounds)"
      "   one lender $(dq p2p same_lender mbs 0.5) MB/s, two lenders $(dq p2p two_lenders mbs 0.5) MB/s, through guest RAM $(dq p2p via_ram mbs 0.5) MB/s")
  fi
  nd vm stop e1 >/dev/null
  nd down >/dev/null
  jq --rawfile rows "$work/drv.tsv" '.driver_model = ($rows | split("\n") | map(select(length > 0) | split("\t") |
      {part: .[0], case: .[1], key: .[2], round: (.[3] | tonumber), value: (.[4] | tonumber)}))' "$out" >"$work/o.json"
  mv "$work/o.json" "$out"
  printf '%s\n' "${summary[@]}"
}
