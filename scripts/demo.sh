#!/usr/bin/env bash
# The demo: installs what is missing, builds, boots a two-host fabric, shows it, measures an
# NTB window and the doorbell round trip between the hosts, lends an accelerator and an NVMe
# into another host's PCIe tree (the same driver binary before and after), has hosts share an
# NVMe through its manager, gives that NVMe to a Linux guest in a VM, runs an OpenSHMEM
# program across a five-host switchless ring, and shuts it all down.
# Usage: scripts/demo.sh [--keep]   (--keep leaves the fabric up for you to explore)
set -euo pipefail
cd "$(dirname "$0")/.."

keep=0
case "${1:-}" in
  "") ;;
  --keep) keep=1 ;;
  -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "demo.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
esac

# Headings in bold only on a terminal, and not when NO_COLOR is set (https://no-color.org).
if [ -t 1 ] && [ -z "${NO_COLOR:-}" ]; then
  step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
else
  step() { printf '\n== %s\n' "$*"; }
fi

# The first run installs packages and builds for a minute or two: show what it installs and
# why, and the build's progress in steps of 10% (warnings and errors in full).
step "Install what is missing (scripts/install-deps.sh) and build (scripts/build.sh)"
bash scripts/build.sh 2>&1 | awk '
  /^\[ *[0-9]+%\]/ { p = substr($0, 2) + 0; if (p >= shown + 10 || p == 100) { shown = p - p % 10
                      printf "build: %d%%\n", p; fflush() } next }
  { print; fflush() }'
export PATH=$PWD/build/bin:$PATH
export NTBLEND_FABRIC=demo
topo=examples/topologies/two-hosts.ini

ntblend down >/dev/null 2>&1 || true
[ $keep = 1 ] || trap 'ntblend down >/dev/null 2>&1 || true' EXIT

step "Boot the fabric: $topo"
ntblend up "$topo"

step "Status"
ntblend status

step "Topology pictures: this fabric, a switched cluster and a switchless ring (PNG files)"
ntblend topology --dot | dot -Tpng -o demo-topology.png
ntblend topology --dot examples/topologies/smartio3.ini | dot -Tpng -o demo-switched.png
ntblend topology --dot examples/topologies/ring5.ini | dot -Tpng -o demo-ring5.png
echo "demo-topology.png: the two hosts of this demo, back to back"
echo "demo-switched.png: three hosts behind a switch, with an NVMe and two accelerators"
echo "demo-ring5.png:    five hosts in a ring, each cabled to its two neighbours only"

step "NTB window bandwidth a -> b: CPU stores, next to a local memcpy"
ntblend run --host a -- ntb_perf -c 1M -s 256M --baseline

step "NTB window bandwidth a -> b: the adapter's DMA engine, next to a local memcpy"
ntblend run --host a -- ntb_perf --dma -c 1M -s 256M --baseline

step "Doorbell round trip a <-> b, next to a futex ping-pong between two processes"
ntblend run --host a -- ntb_pingpong -n 20000 --baseline

step "Two hosts share a segment: b exports memory and an interrupt, a stores into it"
ntblend run --host b -- seg_hello serve &
owner=$!
ntblend run --host a -- seg_hello 8 "hello from host a, stored straight into b's memory"
wait "$owner"

step "A three-host cluster behind a switch (demo-switched.png), with an NVMe and accelerators"
ntblend --fabric demo-dev up examples/topologies/smartio3.ini
[ $keep = 1 ] || trap 'ntblend down >/dev/null 2>&1 || true; ntblend --fabric demo-dev down >/dev/null 2>&1 || true' EXIT
ntblend --fabric demo-dev device list

step "Device Lending: a lends its accelerator to c, which finds it in its own PCIe tree"
ntblend --fabric demo-dev lspci --host a -s accel0
ntblend --fabric demo-dev run --host a -- accel_drv --size 1M --iters 4
ntblend --fabric demo-dev device lend accel0 --to c
ntblend --fabric demo-dev lspci --host c -t
ntblend --fabric demo-dev lspci --host c -s accel0 -v

step "The same driver binary on c drives c's own accelerator and the lent one; reclaiming it reaches the driver"
tmp_d=$(mktemp)
ntblend --fabric demo-dev run --host c -- accel_drv --size 1M --iters 4 --stay > "$tmp_d" &
drv=$!
for _ in $(seq 100); do grep -q "^bound" "$tmp_d" && break; sleep 0.1; done
ntblend --fabric demo-dev device reclaim accel0
for _ in $(seq 100); do grep -q "hot-unplugged" "$tmp_d" && break; sleep 0.1; done
kill "$drv"; wait "$drv" 2>/dev/null || true
cat "$tmp_d"; rm -f "$tmp_d"

step "Device Lending with an NVMe: the NVMe driver nvme_drv on a's own NVMe, then a lends it to c"
ntblend --fabric demo-dev run --host a -- nvme_drv --range 0:256
ntblend --fabric demo-dev device lend nvme0 --to c
ntblend --fabric demo-dev lspci --host a -s nvme0
ntblend --fabric demo-dev lspci --host c -s nvme0

step "The same nvme_drv binary on c reads back what it wrote on a; reclaiming the NVMe reaches the driver"
tmp_d=$(mktemp)
ntblend --fabric demo-dev run --host c -- nvme_drv --range 0:256 --no-write --stay > "$tmp_d" &
drv=$!
for _ in $(seq 100); do grep -q "data verified\|DIFFERS" "$tmp_d" && break; sleep 0.1; done
ntblend --fabric demo-dev device reclaim nvme0
wait "$drv" # it ends by itself once its NVMe is gone
cat "$tmp_d"; rm -f "$tmp_d"
ntblend --fabric demo-dev device add nvme0

step "One NVMe, several hosts: a's manager shares nvme0; b and c each drive their own queue pair with libntbnvme"
ntblend --fabric demo-dev nvme manager nvme0 --host a
tmp_b=$(mktemp) tmp_c=$(mktemp)
ntblend --fabric demo-dev run --host b -- nvme_bench --device nvme0 --qd 1 --seconds 1
ntblend --fabric demo-dev run --host b -- nvme_bench --device nvme0 --qd 32 --seconds 1
ntblend --fabric demo-dev run --host c -- nvme_bench --device nvme0 --qd 8 --seconds 2 --lba 0:4096 --verify -q > "$tmp_c" &
ntblend --fabric demo-dev run --host b -- nvme_bench --device nvme0 --qd 8 --seconds 2 --lba 4096:4096 --verify -q > "$tmp_b" &
sleep 1.5
ntblend --fabric demo-dev nvme status
wait
cat "$tmp_b" "$tmp_c"; rm -f "$tmp_b" "$tmp_c"

step "A virtual machine on b: a Linux guest (QEMU) whose virtio-blk disk is nvme0, through its manager; the NVMe moves the data straight into guest RAM"
image=$(bash scripts/vm-guest.sh)   # Debian's kernel and busybox, downloaded once
tmp_g=$(mktemp)
cat > "$tmp_g" <<'EOF'
echo "guest: $(uname -sr); /dev/vda: $(( $(cat /sys/block/vda/size) / 2048 )) MiB"
echo "written by a Linux guest on b" | dd of=/dev/vda bs=512 seek=65536 count=1 conv=sync oflag=direct 2>/dev/null
echo "read back: $(dd if=/dev/vda bs=512 skip=65536 count=1 iflag=direct 2>/dev/null | head -c 29)"
EOF
ntblend --fabric demo-dev vm start demo-vm --host b --mem 128M --device nvme0 --image "$image" --run "$tmp_g"
ntblend --fabric demo-dev vm list
for _ in $(seq 300); do ntblend --fabric demo-dev vm list --json | grep -q demo-vm || break; sleep 0.1; done
ntblend --fabric demo-dev vm console demo-vm --log | grep -E "^(guest|read back):"
rm -f "$tmp_g"

step "A guest of the driver model: an emulated VM on b is given a's and c's accelerators; the same accel_drv runs inside it (guest BDFs, guest RAM, MSI-X into its handler, peer to peer)"
ntblend --fabric demo-dev device add accel0
ntblend --fabric demo-dev device add accel1
ntblend --fabric demo-dev vm start demo-e --host b --mem 64M --guest emulated --device accel0 --device accel1
ntblend --fabric demo-dev vm run demo-e -- accel_drv --size 256k --iters 2 --p2p
ntblend --fabric demo-dev vm stop demo-e
ntblend --fabric demo-dev down

step "OpenSHMEM on a switchless ring of five hosts (demo-ring5.png): oshcc, then oshrun across it"
ntblend --fabric demo-ring up examples/topologies/ring5.ini
[ $keep = 1 ] || trap 'ntblend down >/dev/null 2>&1 || true; ntblend --fabric demo-ring down >/dev/null 2>&1 || true' EXIT
oshcc -o build/ring_demo examples/shmem/ring_demo.c
oshrun -np 5 --fabric demo-ring build/ring_demo
ntblend --fabric demo-ring down

step "Pull the cable: the agents can no longer reach each other"
ntblend agent-ping a b
ntblend link down a b
ntblend agent-ping a b || true
ntblend link up a b
ntblend agent-ping a b

if [ $keep = 1 ]; then
  step "The fabric 'demo' stays up: NTBLEND_FABRIC=demo build/bin/ntblend status; ntblend down when done"
else
  step "Shut down"
fi
