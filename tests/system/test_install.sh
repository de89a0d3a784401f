#!/usr/bin/env bash
# test_install: ntblend installed with `cmake --install` works with no build tree. It
#  1. installs the build into a temporary prefix and checks the layout, and that nothing
#     installed names the build or source tree (scripts, pkg-config and CMake files, run paths);
#  2. hides the build and source trees (a private mount namespace with an empty file system
#     over them, where the machine allows it) and takes them off PATH;
#  3. builds the installed examples, a segment client (seg_hello), an NVMe client (nvme_hello),
#     an OpenSHMEM program (ring_demo) and a SISCI program (sisci_hello), against the installed
#     tree with pkg-config (the examples' Makefile), with CMake's find_package (their
#     CMakeLists.txt), with oshcc, and (sisci_hello) as against a Dolphin DIS prefix;
#  4. runs each on a fabric started from the installed ntblend, with the installed topologies,
#     and the installed tools (ntblend run finds them), a VM (ntblend-vm), the fio engine when
#     it was built, the manual pages and the bash completion.
set -euo pipefail
src=${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}
bin=${NTBLEND_BIN:?set NTBLEND_BIN to the bin directory of the build}
src=$(cd "$src" && pwd)
build=$(cd "$bin/.." && pwd)
version=$("$bin/ntblend" --version | awk '{ print $2 }')
tmp=$(mktemp -d /tmp/test_install.XXXXXX)
prefix=$tmp/prefix
fabric=t-install-$$
sfx=${NTBLEND_OSH_SUFFIX:-} # the installed OpenSHMEM wrappers are oshcc$sfx, oshrun$sfx, ...
export NTBLEND_NVME_DIR=$tmp/nvme-data
fail() { echo "FAIL: $*" >&2; exit 1; }
cleanup() {
    # Whatever the inner run left (it may have been killed): its fabric, with its agents.
    if [ -x "$prefix/bin/ntblend" ]; then
        "$prefix/bin/ntblend" --fabric "$fabric" down >/dev/null 2>&1 || true
    fi
    "$bin/ntblend" --fabric "$fabric" down >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT

# 1. Install, and look at what was installed.
echo "== cmake --install into $prefix"
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 ||
    fail "cmake --install failed: $(tail -20 "$tmp/install.log")"
# lib, or lib/<multiarch> where GNUInstallDirs says so.
libdir=$(find "$prefix" -name libntblend.so -printf '%h\n' -quit)
libdir=${libdir#"$prefix"/}
[ -n "$libdir" ] || fail "no libntblend.so installed under $prefix"
sover=$(readlink "$prefix/$libdir/libntblend.so")
for f in bin/ntblend bin/ntblend-nvme-manager "bin/oshrun$sfx" "bin/oshcc$sfx" "bin/oshc++$sfx" \
    libexec/ntblend/ntblend-agent libexec/ntblend/oshrelay libexec/ntblend/ntb_tool \
    libexec/ntblend/ntb_perf libexec/ntblend/nvme_bench libexec/ntblend/nvme_drv \
    libexec/ntblend/sisci_bench libexec/ntblend/lend_lines \
    "$libdir/libntblend.so.$version" "$libdir/libntbnvme.so.$version" \
    "$libdir/libshmem.so.$version" "$libdir/libsisci.so.$version" "$libdir/pkgconfig/ntblend.pc" \
    "$libdir/pkgconfig/sisci.pc" include/sisci_api.h include/sisci_types.h include/sisci_error.h \
    include/dis/dis_types.h share/doc/ntblend/examples/sisci_hello.c \
    "$libdir/pkgconfig/ntbnvme.pc" "$libdir/pkgconfig/shmem.pc" \
    "$libdir/cmake/ntblend/ntblendConfig.cmake" "$libdir/cmake/ntblend/ntblendConfigVersion.cmake" \
    include/ntblend/ntb.h include/ntblend/seg.h include/ntblend/smartio.h include/ntblend/pci.h \
    include/ntblend/nvme.h include/ntblend/nvme_spec.h include/ntblend/version.h include/shmem.h include/shmemx.h \
    include/pshmem.h share/ntblend/topologies/two-hosts.ini share/ntblend/topologies/smartio3.ini \
    share/man/man1/ntblend.1 "share/man/man1/oshrun$sfx.1" "share/man/man1/oshcc$sfx.1" \
    share/man/man1/ntblend-nvme-manager.1 share/bash-completion/completions/ntblend \
    bin/ntblend-vm-guest share/man/man1/ntblend-vm-guest.1 libexec/ntblend/ntblend-vm \
    share/doc/ntblend/examples/CMakeLists.txt share/doc/ntblend/examples/Makefile; do
    [ -e "$prefix/$f" ] || fail "not installed: $f"
done
[[ $sover == libntblend.so.* ]] || fail "libntblend.so does not point to a versioned soname: $sover"
echo "ok: layout (version $version, soname ${sover})"
# Every command of `ntblend --help` has its page.
for c in $("$bin/ntblend" --help | awk '/^commands:$/ { on = 1; next } on && /^$/ { exit } on { print $1 }'); do
    [ -f "$prefix/share/man/man1/ntblend-$c.1" ] || fail "no manual page for 'ntblend $c'"
done
# Nothing installed may lead back to the trees: text files, and the programs' run paths.
if grep -rIl -e "$build" -e "$src/" "$prefix" >"$tmp/refs" 2>/dev/null; then
    fail "installed files name the build or source tree: $(tr '\n' ' ' <"$tmp/refs")"
fi
while IFS= read -r -d '' f; do
    rp=$({ readelf -d "$f" 2>/dev/null || true; } | awk '/RUNPATH|RPATH/ { print $NF }')
    case "$rp" in *"$build"* | *"$src"*) fail "$f has the run path $rp" ;; esac
done < <(find "$prefix" -type f \( -perm -u+x -o -name '*.so*' \) -print0)
echo "ok: nothing installed names $build or $src"

# 2-4. The rest runs as a user of the installed tree would.
cat >"$tmp/inner.sh" <<'INNER'
set -euo pipefail
prefix=$1 libdir=$2 version=$3 fabric=$4 tmp=$5 hidden=$6 sfx=$7
fail() { echo "FAIL: $*" >&2; exit 1; }
if [ -n "$hidden" ]; then
    [ -z "$(ls -A "$hidden")" ] || fail "$hidden is still visible"
fi
unset NTBLEND_BIN NTBLEND_SRC LD_LIBRARY_PATH PKG_CONFIG_PATH CMAKE_PREFIX_PATH NTBLEND_FIO_ENGINE \
    NTBLEND_VM_IMAGE NTBLEND_VM_CACHE XDG_CACHE_HOME
export PATH=$prefix/bin:/usr/local/bin:/usr/bin:/bin
[ "$(command -v ntblend)" = "$prefix/bin/ntblend" ] || fail "ntblend is not the installed one"
[ "$(ntblend --version)" = "ntblend $version" ] || fail "ntblend --version: $(ntblend --version)"
[ "$("oshrun$sfx" --version)" = "oshrun$sfx (ntblend) $version" ] ||
    fail "oshrun$sfx --version: $("oshrun$sfx" --version)"
ex=$prefix/share/doc/ntblend/examples
n() { ntblend --fabric "$fabric" "$@"; }

echo "== build the examples with pkg-config (their Makefile)"
mkdir -p "$tmp/pc" && cd "$tmp/pc"
[ "$(PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig pkg-config --modversion ntblend ntbnvme shmem sisci | sort -u)" = "$version" ] ||
    fail "pkg-config does not give version $version"
PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig make -s -f "$ex/Makefile" >"$tmp/pc.log" 2>&1 ||
    fail "make with pkg-config: $(cat "$tmp/pc.log")"
echo "== build the examples with CMake (find_package(ntblend))"
cmake -S "$ex" -B "$tmp/cm" -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/cm.log" 2>&1 &&
    cmake --build "$tmp/cm" >>"$tmp/cm.log" 2>&1 || fail "CMake build: $(tail -30 "$tmp/cm.log")"
echo "== build ring_demo with the installed oshcc$sfx"
mkdir -p "$tmp/osh"
"oshcc$sfx" -o "$tmp/osh/ring_demo" "$ex/shmem/ring_demo.c" || fail "oshcc$sfx"
"oshcc$sfx" --showme -c x.c | grep -q -- "-I$prefix/include" || fail "oshcc$sfx does not use $prefix/include"
echo "== build sisci_hello as against a DIS prefix (-I PREFIX/include, -L PREFIX/lib64)"
mkdir -p "$tmp/dis"
# A sanitized ntblend's libraries need the sanitizer in the program too (sisci.pc says so).
san=$(PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig pkg-config --cflags-only-other sisci)
# shellcheck disable=SC2086 # $san is a list of flags, or nothing
cc $san -o "$tmp/dis/sisci_hello" "$ex/sisci_hello.c" -I"$prefix/include" -L"$prefix/lib64" \
    -lsisci -Wl,-rpath,"$prefix/lib64" || fail "sisci_hello against the DIS layout"

echo "== a fabric from the installed ntblend and topologies"
n up "$prefix/share/ntblend/topologies/smartio3.ini" >/dev/null
n device add nvme0 >/dev/null
ring_ok='PE 0: counter 3 (expected 3), token back with 6 (expected 6), sum of PE numbers 3 (expected 3)'
b_node=$(n status --json | jq -r '.hosts[] | select(.name == "b") | .node_id')
for kind in pc cm; do
    d=$tmp/$kind
    n run --host b -- "$d/seg_hello" serve >"$tmp/serve.out" 2>&1 &
    srv=$!
    out=$(n run --host a -- "$d/seg_hello" "$b_node" "hello via $kind") || fail "seg_hello ($kind): $out"
    wait "$srv" || fail "seg_hello serve ($kind): $(cat "$tmp/serve.out")"
    grep -q "got \"hello via $kind\"" "$tmp/serve.out" || fail "seg_hello ($kind): $(cat "$tmp/serve.out")"
    out=$(n run --host b -- "$d/nvme_hello" nvme0 2>&1) || fail "nvme_hello ($kind): $out"
    grep -q 'block 0 reads back: "hello from nvme0"' <<<"$out" || fail "nvme_hello ($kind): $out"
    grep -q '8 asynchronous reads: done' <<<"$out" || fail "nvme_hello ($kind): $out"
    out=$("oshrun$sfx" -np 3 --fabric "$fabric" "$d/ring_demo" 2>&1) || fail "ring_demo ($kind): $out"
    grep -q "$ring_ok" <<<"$out" || fail "ring_demo ($kind): $out"
    echo "ok: seg_hello, nvme_hello and ring_demo built with $kind run"
done
for d in "$tmp/pc" "$tmp/cm" "$tmp/dis"; do
    n run --host b -- "$d/sisci_hello" serve >"$tmp/serve.out" 2>&1 &
    srv=$!
    out=$(n run --host a -- "$d/sisci_hello" "$b_node" "hello via ${d##*/}") ||
        fail "sisci_hello (${d##*/}): $out"
    wait "$srv" || fail "sisci_hello serve (${d##*/}): $(cat "$tmp/serve.out")"
    grep -q "got \"hello via ${d##*/}\"" "$tmp/serve.out" ||
        fail "sisci_hello (${d##*/}): $(cat "$tmp/serve.out")"
done
echo "ok: sisci_hello built with pkg-config, CMake and as for a DIS prefix runs"
out=$("oshrun$sfx" -np 3 --fabric "$fabric" "$tmp/osh/ring_demo" 2>&1) || fail "ring_demo (oshcc): $out"
grep -q "$ring_ok" <<<"$out" || fail "ring_demo (oshcc): $out"
echo "ok: ring_demo built with the installed oshcc runs under the installed oshrun"

# The tools are found by ntblend run (the helpers' directory), and find ntblend back.
out=$(n run --host a -- ntb_tool info) || fail "ntb_tool: $out"
grep -q 'adapter *a.ntb0' <<<"$out" || fail "ntb_tool info: $out"
out=$(n run --host a -- ntb_perf --peer 0 -s 4M -r 1 2>&1) || fail "ntb_perf: $out"
grep -q 'verified' <<<"$out" || fail "ntb_perf: $out"
echo "ok: ntb_tool and ntb_perf (which starts its peer with ntblend) from the installed tree"
# VMs: ntblend finds ntblend-vm in the helpers' directory; a QEMU guest's image is looked for
# where the installed ntblend-vm-guest builds it (here under an empty HOME: not built yet).
n device add accel1 >/dev/null
n vm start e1 --host c --mem 64M --guest emulated --device accel1 >"$tmp/vm.out" 2>&1 ||
    fail "vm start (emulated) from the installed tree: $(cat "$tmp/vm.out")"
[ "$(n names vms)" = e1 ] || fail "names vms: $(n names vms)"
n vm stop e1 >/dev/null || fail "vm stop"
mkdir -p "$tmp/home"
if HOME=$tmp/home n vm start q1 --host b --mem 64M >"$tmp/vm.out" 2>&1; then
    n vm stop q1 >/dev/null 2>&1 || true
    fail "vm start of a QEMU guest with no image built succeeded: $(cat "$tmp/vm.out")"
fi
grep -q "no guest image in $tmp/home/.cache/ntblend/vm-guest" "$tmp/vm.out" &&
    grep -q "ntblend-vm-guest" "$tmp/vm.out" || fail "vm start with no image: $(cat "$tmp/vm.out")"
ntblend-vm-guest --help | grep -q '^usage: ntblend-vm-guest' || fail "ntblend-vm-guest --help"
echo "ok: VMs from the installed tree (ntblend-vm found; the guest image looked for in ~/.cache)"
if [ -f "$prefix/$libdir/ntblend/ntbnvme-fio.so" ] && command -v fio >/dev/null; then
    out=$(n run --host b -- sh -c 'cd "$1" && fio --name=x --ioengine=external:$NTBLEND_FIO_ENGINE \
          --ntb_device=nvme0 --rw=randread --bs=4k --size=1M --io_size=1M --output-format=terse' \
          sh "$tmp") || fail "fio with the installed engine: $out"
    echo "ok: fio with the installed engine (NTBLEND_FIO_ENGINE set by ntblend run)"
fi
if command -v man >/dev/null; then
    MANPATH=$prefix/share/man man -P cat ntblend-up 2>/dev/null | grep -q 'topology file' ||
        fail "man ntblend-up does not show the page"
    echo "ok: man finds the installed pages"
fi
# Bash completion: the host, device and VM names of this fabric.
n vm start e2 --host c --mem 64M --guest emulated >/dev/null || fail "vm start e2"
out=$(bash -c '
    source "$1/share/bash-completion/completions/ntblend"
    c() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _ntblend; echo "${COMPREPLY[*]}"; }
    c ntblend --fabric "$2" run --host ""
    c ntblend --fabric "$2" device lend ""
    c ntblend --fabric "$2" dev
    c ntblend --fabric "${2%-*}"
    c ntblend --fabric "$2" vm console ""' sh "$prefix" "$fabric" 2>/dev/null)
[ "$(sed -n 1,3p <<<"$out")" = $'a b c\nnvme0 accel0 accel1\ndevice' ] || fail "bash completion: $out"
[[ " $(sed -n 4p <<<"$out") " == *" $fabric "* ]] || fail "bash completion of --fabric: $out"
[ "$(sed -n 5p <<<"$out")" = e2 ] || fail "bash completion of a VM's name: $out"
n vm stop e2 >/dev/null
echo "ok: the bash completion completes hosts, devices, commands, fabrics and VMs"
n down >/dev/null
INNER

# The trees hidden: an empty file system over them in a mount namespace of the run's own.
hide=() hidden=""
if unshare -m true 2>/dev/null; then
    hidden=$src
    mounts="mount -t tmpfs none '$src'"
    case "$build/" in "$src"/*) ;; *) mounts="$mounts && mount -t tmpfs none '$build'" ;; esac
    hide=(unshare -m sh -c "$mounts && exec \"\$@\"" sh)
    echo "== the build and source trees are hidden from here on"
else
    echo "== (unshare -m is not permitted here: the trees are only taken off PATH)"
fi
env -u NTBLEND_BIN "${hide[@]}" bash "$tmp/inner.sh" "$prefix" "$libdir" "$version" "$fabric" "$tmp" "$hidden" "$sfx" ||
    fail "the installed tree does not work on its own (above)"
echo "PASS"
