#!/usr/bin/env bash
# The VM benchmarks (docs/vm.md). Part "guest": fio inside a real Linux guest (4 KiB random
# reads: QD1 median completion latency and submission-to-completion latency, QD32 IOPS; then,
# in a separate run, 4 MiB of writes read back with --verify) on (a) ntblend's vhost-user-blk
# over an NVMe lent by another host (ntblend vm start), (b) qemu-storage-daemon's
# vhost-user-blk export of a file in tmpfs, (c) QEMU's built-in -device nvme on a file in
# tmpfs, (p) the lent NVMe passed through to the guest's own nvme driver (vm start
# --pass-through): the same kernel, initramfs, QEMU machine and fio job (under TCG (p)'s fio
# polls: io_uring --hipri; the others use libaio), booted afresh for every run, the four
# interleaved round by round. Prints each round and the medians with the ratios a/b, a/c and
# p/a; boots smartio3.ini (host a's IOMMU on, which pass-through needs) under a unique name
# and shuts it down (also on failure or Ctrl-C).
# Parts "fig7", "irq", "p2p": guests of the driver model (ntblend vm run), on smartio-p2p.ini
# with every IOMMU on and an NVMe in a, the VM on b: fig7 is the shape of 2018 Fig. 7 / 2019
# Fig. 19, fio (the ntbnvme engine, through the driver model) 4 KiB random reads at QD1 on
# the NVMe local (on a), lent (to b) and lent to the VM (on b), interleaved round by round
# with the order rotating, the VM/lent ratio paired per round; irq is the interrupt path
# (accel_drv --irq-bench: a 64-byte copy, doorbell to MSI-X handler) lent vs lent to the VM,
# paired; p2p is peer to peer inside the VM (2019 Figs. 16, 18): accel_drv --p2p between two
# accelerators of one lender and of two, beside the same data through guest RAM.
# Usage: scripts/bench-vm.sh [-o FILE] [-b BUILD_BIN_DIR] [-r ROUNDS] [-s SECONDS] [-a ACCEL]
#                            [-c CONFIGS] [-B BEFORE_BIN_DIR] [-t TRACE_DIR] [PART...]
#   -o FILE     all results as one JSON object (default bench-vm.json)
#   -b DIR      where ntblend is (default $NTBLEND_BIN, else ./build/bin)
#   -r ROUNDS   rounds, each running every configuration once (default 3; medians are reported)
#   -s SECONDS  fio's time per job (default 5)
#   -a ACCEL    tcg (default) or kvm
#   -c CONFIGS  the guest part's configurations, of a b c p (default "a,b,c,p")
#   -B DIR      also (a0): (a) with the ntblend of another build (say main's, for before and
#               after), on a fabric of its own, run just before (a) in every round; a/a0 ratios
#   -t DIR      trace the hops of (a)'s requests (NTBLEND_HOP_TRACE, src/wait/hop.h) into
#               DIR/a (and DIR/a0) and print where a QD1 request's time goes (hop-report.sh)
#   PART        guest fig7 irq p2p (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."

out=bench-vm.json
bin=${NTBLEND_BIN:-./build/bin}
rounds=3
secs=5
accel=tcg
configs="a,b,c,p"
before=""
trace=""
usage() { sed -n '2,33p' "$0" | sed 's/^# \{0,1\}//'; }
while getopts "o:b:r:s:a:c:B:t:h" opt; do
  case $opt in
    o) out=$OPTARG ;;
    b) bin=$OPTARG ;;
    r) rounds=$OPTARG ;;
    s) secs=$OPTARG ;;
    a) accel=$OPTARG ;;
    c) configs=$OPTARG ;;
    B) before=$OPTARG ;;
    t) trace=$OPTARG ;;
    h) usage; exit 0 ;;
    *) echo "bench-vm: see -h" >&2; exit 2 ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]?$ ]] || { echo "bench-vm: -r takes 1..99" >&2; exit 2; }
[[ $secs =~ ^[1-9][0-9]?$ ]] || { echo "bench-vm: -s takes 1..99 seconds" >&2; exit 2; }
[ "$accel" = tcg ] || [ "$accel" = kvm ] || { echo "bench-vm: -a takes tcg or kvm" >&2; exit 2; }
read -r -a cfgs <<<"${configs//,/ }"
[ ${#cfgs[@]} -gt 0 ] || { echo "bench-vm: -c takes some of a b c p (say -c a,c)" >&2; exit 2; }
for c in "${cfgs[@]}"; do
  case $c in a|b|c|p) ;; *) echo "bench-vm: unknown configuration '$c' for -c (a b c p)" >&2; exit 2 ;; esac
done
if [ -n "$before" ]; then
  [ -x "$before/ntblend" ] || { echo "bench-vm: -B $before: no ntblend there (give a build's bin directory)" >&2; exit 2; }
  before=$(cd "$before" && pwd)
  with_a0=()
  for c in "${cfgs[@]}"; do [ "$c" = a ] && with_a0+=(a0); with_a0+=("$c"); done
  cfgs=("${with_a0[@]}")
  [[ " ${cfgs[*]} " == *" a0 "* ]] || { echo "bench-vm: -B compares with (a): add a to -c" >&2; exit 2; }
fi
if [ -n "$trace" ]; then
  mkdir -p "$trace/a" "$trace/a0" && trace=$(cd "$trace" && pwd) || { echo "bench-vm: -t $trace: cannot make that directory" >&2; exit 2; }
  rm -f "$trace"/a/hop.* "$trace"/a0/hop.*
fi
shift $((OPTIND - 1))
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(guest fig7 irq p2p)
for p in "${parts[@]}"; do
  case $p in guest|fig7|irq|p2p) ;; *) echo "bench-vm: unknown part '$p' (guest fig7 irq p2p)" >&2; exit 2 ;; esac
done
want() { local p; for p in "${parts[@]}"; do [ "$p" = "$1" ] && return 0; done; return 1; }
export PATH=$(cd "$bin" && pwd):$PATH
bin=$(cd "$bin" && pwd)
fabric=bench-vm-$$
fabric0=bench-vm0-$$   # (a0): the -B build's fabric
dfab=bench-vmd-$$
work=$(mktemp -d /dev/shm/bench-vm.XXXXXX)   # tmpfs: the files of (b) and (c)
qsd=""
cleanup() {
  [ -n "$qsd" ] && kill "$qsd" 2>/dev/null
  ntblend --fabric "$fabric" down >/dev/null 2>&1 || true
  [ -n "$before" ] && { "$before/ntblend" --fabric "$fabric0" down >/dev/null 2>&1 || true; }
  ntblend --fabric "$dfab" down >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
. scripts/bench-vm-drv.sh
echo '{}' >"$out"
guest_part() {
  for t in qemu-system-x86_64 qemu-storage-daemon jq; do
    command -v $t >/dev/null || { echo "bench-vm: $t is missing (scripts/install-deps.sh)" >&2; exit 1; }
  done
  image=$(bash scripts/vm-guest.sh --fio)

  mem=384M   # smartio3 hosts have 512 MiB; the guest with fio fits in this
  sed -e 's/^\[host a\]$/[host a]\niommu = on/' examples/topologies/smartio3.ini >"$work/topo.ini"
  # The hop trace, when asked for, is in the environment of the agents (the NVMe model) and of
  # the VM process (the back end): both are started by these commands.
  tr_a=() tr_a0=()
  [ -n "$trace" ] && tr_a=(env "NTBLEND_HOP_TRACE=$trace/a") tr_a0=(env "NTBLEND_HOP_TRACE=$trace/a0")
  "${tr_a[@]}" ntblend --fabric "$fabric" up "$work/topo.ini" >/dev/null
  ntblend --fabric "$fabric" device add nvme0 >/dev/null
  if [ -n "$before" ]; then
    "${tr_a0[@]}" "$before/ntblend" --fabric "$fabric0" up "$work/topo.ini" >/dev/null
    "$before/ntblend" --fabric "$fabric0" device add nvme0 >/dev/null
  fi
  truncate -s 1G "$work/disk.img"
  dd if=/dev/urandom of="$work/disk.img" bs=1M count=64 conv=notrunc status=none

  # The guest's job: fill the first 64 MiB (so reads read data), then the three fio runs; each
  # prints its JSON between markers on the console. A passed-through NVMe under TCG has no
  # interrupts (docs/vm.md): its guest's kernel is told to make poll queues, and fio polls them
  # (in requests no larger than the NVMe takes, 128 KiB: a larger one is split, and its pieces
  # wait for their timeouts).
  cat >"$work/guest.sh" <<EOF
i=0; while [ ! -b /dev/vda ] && [ ! -b /dev/nvme0n1 ] && [ \$i -lt 1800 ]; do sleep 0.1; i=\$((i+1)); done
dev=/dev/vda; [ -e \$dev ] || dev=/dev/nvme0n1
engine=--ioengine=libaio; grep -q nvme.poll_queues /proc/cmdline && engine="--ioengine=io_uring --hipri"
fio --name=fill --filename=\$dev --direct=1 \$engine --bs=128k --size=64M --rw=write >/dev/null 2>&1
run() { echo "@@fio \$1"; shift; fio --output-format=json "\$@"; echo "@@end"; }
common="--filename=\$dev --direct=1 \$engine --bs=4k --size=64M --time_based --runtime=$secs --group_reporting --lat_percentiles=1"
run qd1 --name=qd1 --rw=randread --iodepth=1 \$common
run qd32 --name=qd32 --rw=randread --iodepth=32 \$common
run verify --name=verify --filename=\$dev --direct=1 \$engine --bs=4k --size=4M \
  --rw=randwrite --iodepth=8 --verify=crc32c --do_verify=1
EOF

  qemu_common=(-machine "q35,accel=$accel,memory-backend=ram" -cpu "$([ $accel = kvm ] && echo host || echo max)"
               -smp 1 -m $mem -object "memory-backend-memfd,id=ram,size=$mem,share=on"
               -nodefaults -no-user-config -display none -no-reboot -serial "file:$work/console"
               -kernel "$image/vmlinuz" -initrd "$image/initramfs-fio.cpio.gz"
               -append "console=ttyS0 quiet panic=-1 no_timer_check virtio"
               -fw_cfg "name=opt/ntblend/run,file=$work/guest.sh")

  # A guest that has not powered off by then hangs (QEMU's own NVMe once stopped answering in
  # the verify job under TCG): it is stopped, and its run counts as failed.
  limit=$((3 * secs + 240))
  # run_one CONFIG: boot the guest on it, leave its console in $work/CONFIG.log.
  run_one() {
    case $1 in
      a|p|a0)
        local nt=ntblend fab=$fabric env=("${tr_a[@]}")
        [ "$1" = a0 ] && nt=$before/ntblend fab=$fabric0 env=("${tr_a0[@]}")
        [ "$1" = p ] && env=()
        "${env[@]}" timeout "$limit" "$nt" --fabric "$fab" vm start bench --host b --mem $mem --device nvme0 --accel "$accel" \
          --image "$image" --initrd initramfs-fio.cpio.gz --run "$work/guest.sh" --wait \
          $([ "$1" = p ] && echo --pass-through) >/dev/null ||
          "$nt" --fabric "$fab" vm stop bench >/dev/null 2>&1 || true
        cp "$("$nt" --fabric "$fab" status --json | jq -r .dir)/vm.bench.console.log" "$work/$1.log" ;;
      b)
        qemu-storage-daemon --blockdev "driver=file,node-name=f,filename=$work/disk.img,cache.direct=off" \
          --export "type=vhost-user-blk,id=e,node-name=f,addr.type=unix,addr.path=$work/vu.sock,writable=on" &
        qsd=$!
        for _ in $(seq 100); do [ -S "$work/vu.sock" ] && break; sleep 0.05; done
        timeout "$limit" qemu-system-x86_64 "${qemu_common[@]}" -chardev "socket,id=vu,path=$work/vu.sock" \
          -device vhost-user-blk-pci,chardev=vu,num-queues=1 >/dev/null || true
        kill "$qsd"; wait "$qsd" 2>/dev/null || true; qsd=""; rm -f "$work/vu.sock"
        mv "$work/console" "$work/b.log" ;;
      c)
        timeout "$limit" qemu-system-x86_64 "${qemu_common[@]}" \
          -drive "file=$work/disk.img,if=none,id=d,format=raw,cache=none,aio=native" \
          -device nvme,drive=d,serial=bench >/dev/null || true
        mv "$work/console" "$work/c.log" ;;
    esac
  }

  # fio_json LOG NAME: the JSON fio printed for job NAME.
  fio_json() { tr -d '\r' <"$1" | sed -n "/^@@fio $2\$/,/^@@end\$/p" | sed '1d;$d'; }

  results="[]"
  for r in $(seq "$rounds"); do
    for cfg in "${cfgs[@]}"; do
      # A run whose fio did not finish is run once more. A second such run ends the benchmark
      # when it is ntblend's; QEMU's own (b, c) is left out of that round instead (its QD1 and
      # QD32 figures kept when only the verify job hung), and the summary says so.
      vstate=ok
      for try in 1 2; do
        run_one $cfg
        lat=$(fio_json "$work/$cfg.log" qd1 | jq '.jobs[0].read.clat_ns.percentile["50.000000"] / 1000')
        # Submission to completion: (p)'s doorbell write is a round trip through QEMU's proxy
        # inside the submission, which clat leaves out.
        tot=$(fio_json "$work/$cfg.log" qd1 | jq '.jobs[0].read.lat_ns.percentile["50.000000"] / 1000')
        iops=$(fio_json "$work/$cfg.log" qd32 | jq '.jobs[0].read.iops | floor')
        verr=$(fio_json "$work/$cfg.log" verify | jq '.jobs[0].error')
        [ -n "$lat" ] && [ -n "$tot" ] && [ "$tot" != null ] && [ -n "$iops" ] && [ "$verr" = 0 ] && break
        if [ $try = 1 ]; then
          echo "bench-vm: round $r, $cfg: fio did not finish within ${limit} s; running it once more. The console's end:" >&2
          tr -d '\r' <"$work/$cfg.log" | tail -5 | sed 's/^/  /' >&2
          continue
        fi
        echo "bench-vm: round $r, $cfg: fio did not finish, twice. The console's end:" >&2
        sed 's/^/  /' "$work/$cfg.log" | tail -20 >&2
        case $cfg in b|c) ;; *) exit 1 ;; esac
        if [ -n "$lat" ] && [ -n "$tot" ] && [ "$tot" != null ] && [ -n "$iops" ] && [ "$iops" != null ]; then
          vstate=hung
          echo "bench-vm: round $r, $cfg: QEMU's own run; its QD1 and QD32 figures are kept, its verify job hung" >&2
        else
          vstate=failed
          echo "bench-vm: round $r, $cfg: QEMU's own run; left out of this round" >&2
        fi
      done
      if [ $vstate = failed ]; then
        results=$(jq -c --arg c "$cfg" --argjson r "$r" '. + [{config: $c, round: $r, verify: "failed"}]' <<<"$results")
        continue
      fi
      printf 'round %d  %s  QD1 median %8.1f us (completion) %8.1f us (submission to completion)   QD32 %7d IOPS   verify %s\n' \
        "$r" "$cfg" "$lat" "$tot" "$iops" "$vstate"
      results=$(jq -c --arg c "$cfg" --argjson r "$r" --argjson l "$lat" --argjson t "$tot" --argjson i "$iops" --arg v "$vstate" \
        '. + [{config: $c, round: $r, qd1_median_us: $l, qd1_total_median_us: $t, qd32_iops: $i, verify: $v}]' <<<"$results")
    done
  done

  summary=$(jq -c '
    def med: sort | if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
    . as $all
    | (map(select(.verify != "failed")) | group_by(.config) | map({key: .[0].config, value: {qd1_median_us: (map(.qd1_median_us) | med),
                                                         qd1_total_median_us: (map(.qd1_total_median_us) | med),
                                                         qd32_iops: (map(.qd32_iops) | med)}}) | from_entries) as $m
    | def ratio($x; $y; $k): if $m[$x] and $m[$y] then $m[$x][$k] / $m[$y][$k] else null end;
      # a/a0 paired round by round (the two ran one after the other), the median of those
      def paired($k): [$all | map(select(.verify != "failed")) | group_by(.round)[] | (map(select(.config == "a"))[0]) as $a
                       | (map(select(.config == "a0"))[0]) as $z | select($a and $z) | $a[$k] / $z[$k]]
                      | if length > 0 then med else null end;
      {medians: $m,
       qd1_a_over_b: ratio("a"; "b"; "qd1_median_us"), qd1_a_over_c: ratio("a"; "c"; "qd1_median_us"),
       qd32_a_over_b: ratio("a"; "b"; "qd32_iops"), qd32_a_over_c: ratio("a"; "c"; "qd32_iops"),
       qd1_p_over_a: ratio("p"; "a"; "qd1_median_us"),
       qd1_total_p_over_a: ratio("p"; "a"; "qd1_total_median_us"),
       qd32_p_over_a: ratio("p"; "a"; "qd32_iops"),
       qd1_a_over_a0: paired("qd1_median_us"), qd32_a_over_a0: paired("qd32_iops")}
      | with_entries(select(.value != null))' <<<"$results")
  # The hop trace: the fabrics end first, so that the NVMe models write their last marks.
  hops=null
  if [ -n "$trace" ]; then
    ntblend --fabric "$fabric" down >/dev/null 2>&1 || true
    [ -n "$before" ] && { "$before/ntblend" --fabric "$fabric0" down >/dev/null 2>&1 || true; }
    for c in a a0; do
      ls "$trace/$c"/hop.* >/dev/null 2>&1 || continue
      echo "where a QD1 request's time goes, ($c) (hop marks in $trace/$c):"
      bash scripts/hop-report.sh "$trace/$c" | sed 's/^/  /' || true
      h=$(bash scripts/hop-report.sh -j "$trace/$c" 2>/dev/null) || h=null
      hops=$(jq -c --arg c "$c" --argjson h "$h" '(. // {}) + {($c): $h}' <<<"$hops")
    done
  fi
  jq --argjson rounds "$results" --argjson s "$summary" --arg accel "$accel" --argjson secs "$secs" \
     --argjson hops "$hops" \
    '.guest = {accel: $accel, seconds: $secs, guest_mem: "384M",
      configs: {a: "ntblend vhost-user-blk over nvme0 lent by a to the VM on b",
                a0: "(a) with the ntblend of the -B build",
                b: "qemu-storage-daemon vhost-user-blk, file in tmpfs",
                c: "QEMU -device nvme, file in tmpfs",
                p: "nvme0 lent by a, passed through to the guest nvme driver on b (TCG: polled, io_uring --hipri)"},
      rounds: $rounds, summary: $s} + (if $hops then {hops: $hops} else {} end)' "$out" >"$work/out.json"
  mv "$work/out.json" "$out"
  # QD1 ratios: lower is better; QD32 (IOPS): higher is better. a/a0 is paired per round.
  jq -r '.guest.summary | del(.medians) | to_entries
         | map((.key | capture("(?<q>qd1_total|qd1|qd32)_(?<x>[a-z0-9]+)_over_(?<y>[a-z0-9]+)")) as $k
               | ({qd1: "QD1", qd1_total: "QD1 submission to completion", qd32: "QD32"}[$k.q]) + " \($k.x)/\($k.y) \(.value * 100 | round / 100)")
         | "medians: " + join(", ") + " (QD1: lower is better; QD32: higher is better; a/a0 paired per round)"' "$out"
}

want guest && guest_part
want fig7 || want irq || want p2p && drv_parts
echo "results: $out"
