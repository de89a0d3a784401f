#!/usr/bin/env bash
# The demo: installs what is missing, builds, boots a two-host fabric, shows it, measures an
# NTB window and the doorbell round trip between the hosts, lends an accelerator and an NVMe
# into another host's PCIe tree (the same driver binary before and after), has hosts share an
# NVMe through its manager, lends that NVMe to a Linux guest in a VM, runs an OpenSHMEM
# program across a five-host switchless ring, and shuts it all down.
# Usage: scripts/demo.sh [--keep]   (--keep leaves the fabric up for you to explore)
# In a source tree it installs what is missing and builds first. Installed (as
# share/ntblend/demo.sh, e.g. by the Debian package) it runs on that installed ntblend, builds
# the example programs it needs with pkg-config and oshcc in a temporary directory, and
# writes the pictures into the current directory. The fabrics are $NTBLEND_DEMO_FABRIC
# (default "demo"), and the same with -dev and -ring.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
name=${NTBLEND_DEMO_FABRIC:-demo}
if [ -f "$here/../CMakeLists.txt" ] && [ -d "$here/../src/cli" ]; then
  mode=source
  cd "$here/.."
else
  mode=installed
  prefix=$(cd "$here/../.." && pwd)
fi

keep=0
case "${1:-}" in
  "") ;;
  --keep) keep=1 ;;
  -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "demo.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
esac

# Headings in bold only on a terminal, and not when NO_COLOR is set (https://no-color.org).
if [ -t 1 ] && [ -z "${NO_COLOR:-}" ]; then
  step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
else
  step() { printf '\n== %s\n' "$*"; }
fi

if [ $mode = source ]; then
  # The first run installs packages and builds for a minute or two: show what it installs and
  # why, and the build's progress in steps of 10% (warnings and errors in full).
  step "Install what is missing (scripts/install-deps.sh) and build (scripts/build.sh)"
  bash scripts/build.sh 2>&1 | awk '
    /^\[ *[0-9]+%\]/ { p = substr($0, 2) + 0; if (p >= shown + 10 || p == 100) { shown = p - p % 10
                        printf "build: %d%%\n", p; fflush() } next }
    { print; fflush() }'
  export PATH=$PWD/build/bin:$PATH
  topologies=examples/topologies
  ring_demo_src=examples/shmem/ring_demo.c
  vm_guest="bash scripts/vm-guest.sh"
  work=build
  osh=""
else
  # The example programs the demo runs, built against the installed ntblend as a user would.
  step "Build the example programs against the installed ntblend ($prefix)"
  export PATH=$prefix/bin:$PATH
  topologies=$prefix/share/ntblend/topologies
  examples=$prefix/share/doc/ntblend/examples
  ring_demo_src=$examples/shmem/ring_demo.c
  vm_guest=ntblend-vm-guest
  work=$(mktemp -d)
  pc=$(find "$prefix"/lib* -name ntblend.pc -printf '%h\n' -quit 2>/dev/null || true)
  (cd "$work" && PKG_CONFIG_PATH=$pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH} \
     make -s -f "$examples/Makefile" seg_hello)
  export PATH=$work:$PATH
  echo "seg_hello: $work/seg_hello (ntblend run finds ntblend's own tools by itself)"
  # The OpenSHMEM wrappers may carry a suffix (the Debian package's are oshrun.ntblend, ...).
  osh=""
  for w in "$prefix"/bin/oshrun*; do
    if "$w" --version 2>/dev/null | grep -q '(ntblend)'; then osh=${w#"$prefix/bin/oshrun"}; fi
  done
fi
export NTBLEND_FABRIC=$name
topo=$topologies/two-hosts.ini
cleanup_work() { if [ $mode = installed ]; then rm -rf "$work"; fi; }

ntblend down >/dev/null 2>&1 || true
if [ $keep = 1 ]; then trap cleanup_work EXIT; else trap 'ntblend down >/dev/null 2>&1 || true; cleanup_work' EXIT; fi

step "Boot the fabric: $topo"
ntblend up "$topo"

step "Status"
ntblend status

step "Topology pictures: this fabric, a switched cluster and a switchless ring (PNG files)"
if command -v dot >/dev/null; then
  ntblend topology --dot | dot -Tpng -o demo-topology.png
  ntblend topology --dot "$topologies/smartio3.ini" | dot -Tpng -o demo-switched.png
  ntblend topology --dot "$topologies/ring5.ini" | dot -Tpng -o demo-ring5.png
  echo "demo-topology.png: the two hosts of this demo, back to back"
  echo "demo-switched.png: three hosts behind a switch, with an NVMe and two accelerators"
  echo "demo-ring5.png:    five hosts in a ring, each cabled to its two neighbours only"
else
  echo "(no pictures: Graphviz's dot is not installed; apt-get install graphviz)"
fi

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
ntblend --fabric "$name-dev" up "$topologies/smartio3.ini"
[ $keep = 1 ] || trap 'ntblend down >/dev/null 2>&1 || true; ntblend --fabric "$name-dev" down >/dev/null 2>&1 || true; cleanup_work' EXIT
ntblend --fabric "$name-dev" device list

step "Device Lending: a lends its accelerator to c, which finds it in its own PCIe tree"
ntblend --fabric "$name-dev" lspci --host a -s accel0
ntblend --fabric "$name-dev" run --host a -- accel_drv --size 1M --iters 4
ntblend --fabric "$name-dev" device lend accel0 --to c
ntblend --fabric "$name-dev" lspci --host c -t
ntblend --fabric "$name-dev" lspci --host c -s accel0 -v

step "The same driver binary on c drives c's own accelerator and the lent one; reclaiming it reaches the driver"
tmp_d=$(mktemp)
ntblend --fabric "$name-dev" run --host c -- accel_drv --size 1M --iters 4 --stay > "$tmp_d" &
drv=$!
for _ in $(seq 100); do grep -q "^bound" "$tmp_d" && break; sleep 0.1; done
ntblend --fabric "$name-dev" device reclaim accel0
for _ in $(seq 100); do grep -q "hot-unplugged" "$tmp_d" && break; sleep 0.1; done
kill "$drv"; wait "$drv" 2>/dev/null || true
cat "$tmp_d"; rm -f "$tmp_d"

step "Device Lending with an NVMe: the NVMe driver nvme_drv on a's own NVMe, then a lends it to c"
ntblend --fabric "$name-dev" run --host a -- nvme_drv --range 0:256
ntblend --fabric "$name-dev" device lend nvme0 --to c
ntblend --fabric "$name-dev" lspci --host a -s nvme0
ntblend --fabric "$name-dev" lspci --host c -s nvme0

step "The same nvme_drv binary on c reads back what it wrote on a; reclaiming the NVMe reaches the driver"
tmp_d=$(mktemp)
ntblend --fabric "$name-dev" run --host c -- nvme_drv --range 0:256 --no-write --stay > "$tmp_d" &
drv=$!
for _ in $(seq 100); do grep -q "data verified\|DIFFERS" "$tmp_d" && break; sleep 0.1; done
ntblend --fabric "$name-dev" device reclaim nvme0
wait "$drv" # it ends by itself once its NVMe is gone
cat "$tmp_d"; rm -f "$tmp_d"
ntblend --fabric "$name-dev" device add nvme0

step "One NVMe, several hosts: a's manager shares nvme0; b and c each drive their own queue pair with libntbnvme"
ntblend --fabric "$name-dev" nvme manager nvme0 --host a
tmp_b=$(mktemp) tmp_c=$(mktemp)
ntblend --fabric "$name-dev" run --host b -- nvme_bench --device nvme0 --qd 1 --seconds 1
ntblend --fabric "$name-dev" run --host b -- nvme_bench --device nvme0 --qd 32 --seconds 1
ntblend --fabric "$name-dev" run --host c -- nvme_bench --device nvme0 --qd 8 --seconds 2 --lba 0:4096 --verify -q > "$tmp_c" &
ntblend --fabric "$name-dev" run --host b -- nvme_bench --device nvme0 --qd 8 --seconds 2 --lba 4096:4096 --verify -q > "$tmp_b" &
sleep 1.5
ntblend --fabric "$name-dev" nvme status
wait
cat "$tmp_b" "$tmp_c"; rm -f "$tmp_b" "$tmp_c"

step "A virtual machine on b: a Linux guest (QEMU) whose virtio-blk disk is nvme0, lent by a (its manager stopped first); the NVMe moves the data straight into guest RAM"
ntblend --fabric "$name-dev" nvme stop nvme0
if command -v qemu-system-x86_64 >/dev/null; then
  image=$($vm_guest)   # Debian's kernel and busybox, downloaded once
  tmp_g=$(mktemp)
  cat > "$tmp_g" <<'EOF'
echo "guest: $(uname -sr); /dev/vda: $(( $(cat /sys/block/vda/size) / 2048 )) MiB"
echo "written by a Linux guest on b" | dd of=/dev/vda bs=512 seek=65536 count=1 conv=sync oflag=direct 2>/dev/null
echo "read back: $(dd if=/dev/vda bs=512 skip=65536 count=1 iflag=direct 2>/dev/null | head -c 29)"
EOF
  ntblend --fabric "$name-dev" vm start "$name-vm" --host b --mem 128M --device nvme0 --image "$image" --run "$tmp_g"
  ntblend --fabric "$name-dev" vm list
  ntblend --fabric "$name-dev" device list | grep nvme0
  for _ in $(seq 300); do ntblend --fabric "$name-dev" vm list --json | grep -q "\"$name-vm\"" || break; sleep 0.1; done
  ntblend --fabric "$name-dev" vm console "$name-vm" --log | grep -E "^(guest|read back):"
  rm -f "$tmp_g"
else
  echo "(no VM: QEMU is not installed; apt-get install qemu-system-x86)"
fi

step "A guest of the driver model: an emulated VM on b is given a's and c's accelerators; the same accel_drv runs inside it (guest BDFs, guest RAM, MSI-X into its handler, peer to peer)"
ntblend --fabric "$name-dev" device add accel0
ntblend --fabric "$name-dev" device add accel1
ntblend --fabric "$name-dev" vm start "$name-e" --host b --mem 64M --guest emulated --device accel0 --device accel1
ntblend --fabric "$name-dev" vm run "$name-e" -- accel_drv --size 256k --iters 2 --p2p
ntblend --fabric "$name-dev" vm stop "$name-e"
ntblend --fabric "$name-dev" down

step "OpenSHMEM on a switchless ring of five hosts (demo-ring5.png): oshcc, then oshrun across it"
ntblend --fabric "$name-ring" up "$topologies/ring5.ini"
[ $keep = 1 ] || trap 'ntblend down >/dev/null 2>&1 || true; ntblend --fabric "$name-ring" down >/dev/null 2>&1 || true; cleanup_work' EXIT
"oshcc$osh" -o "$work/ring_demo" "$ring_demo_src"
"oshrun$osh" -np 5 --fabric "$name-ring" "$work/ring_demo"
ntblend --fabric "$name-ring" down

step "Pull the cable: the agents can no longer reach each other"
ntblend agent-ping a b
ntblend link down a b
ntblend agent-ping a b || true
ntblend link up a b
ntblend agent-ping a b

if [ $keep = 1 ]; then
  step "The fabric '$name' stays up: NTBLEND_FABRIC=$name $(command -v ntblend) status; ntblend down when done"
else
  step "Shut down"
fi
