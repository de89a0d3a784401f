#!/usr/bin/env bash
# test_package: ntblend's Debian package (scripts/package.sh) as Debian and a user see it.
#  - dpkg-deb: its name, the project's version, and a dependency on the Debian package of
#    every shared library its programs and libraries need (other than its own);
#  - its contents: programs, helpers, libraries with their sonames, headers, pkg-config
#    files, CMake package, manual pages, completion, topologies, examples and the demo;
#    nothing in /usr/local or /usr/lib64, no run paths;
#  - lintian: no errors and no warnings (its verdict is printed, with the informational tags);
#  - where the machine allows it (root, apt-get, ntblend not installed already): apt-get
#    install of the .deb, the demo (share/ntblend/demo.sh) run on the installed tree with only
#    /usr/bin and /bin on PATH, apt-get purge, and nothing of the package left behind: no
#    file, fabric, NVMe image or process. The machine is left as it was, also on failure.
# Usage: tests/system/test_package.sh [DEB]   (without DEB, scripts/package.sh builds one)
# CI runs it (.ci/run). It is not in the CTest suite: it installs into the system.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
me=test_package
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d /tmp/test_package.XXXXXX)
installed=no
fabric=t-pkg-$$
cleanup() {
    if [ $installed = yes ]; then
        for f in "$fabric" "$fabric-dev" "$fabric-ring"; do
            /usr/bin/ntblend --fabric "$f" down >/dev/null 2>&1 || true
        done
        DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq -o DPkg::Lock::Timeout=300 ntblend \
            >/dev/null 2>&1 || echo "$me: could not remove the package: apt-get purge ntblend" >&2
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

deb=${1:-}
if [ -z "$deb" ]; then
    echo "== scripts/package.sh"
    deb=$(bash "$src/scripts/package.sh" | tail -n1)
fi
[ -f "$deb" ] || fail "no package at '$deb'"
deb=$(cd "$(dirname "$deb")" && pwd)/$(basename "$deb")
version=$(sed -n 's/^project(ntblend VERSION \([0-9][0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
arch=$(dpkg --print-architecture)

echo "== dpkg-deb: $(basename "$deb"), $(($(stat -c %s "$deb") / 1024)) KiB"
[ "$(dpkg-deb -f "$deb" Package)" = ntblend ] || fail "the package is not named ntblend"
[ "$(dpkg-deb -f "$deb" Version)" = "$version" ] || fail "version $(dpkg-deb -f "$deb" Version), not $version"
[ "$(dpkg-deb -f "$deb" Architecture)" = "$arch" ] || fail "architecture $(dpkg-deb -f "$deb" Architecture)"
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
dpkg-deb -x "$deb" "$tmp/x"
dpkg-deb -c "$deb" | awk '{ print $6 }' | sed 's|^\./|/|' >"$tmp/contents"

# Every shared library an ELF file of the package needs comes from the package itself or
# from a Debian package it depends on.
own=$(find "$tmp/x" -name 'lib*.so.*' -printf '%f\n')
find "$tmp/x" -type f -print0 | while IFS= read -r -d '' f; do
    { readelf -d "$f" 2>/dev/null || true; } | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'
done | sort -u >"$tmp/needed"
while read -r so; do
    grep -qx "$so" <<<"$own" && continue
    # (awk reads all of ldconfig's output: an early exit would end ldconfig with SIGPIPE.)
    path=$(ldconfig -p | awk -v so="$so" '$1 == so && !p { p = $NF } END { print p }')
    [ -n "$path" ] || fail "$so (needed by the package) is not on this system"
    real=$(readlink -f "$path")
    pkg=$(dpkg -S "$path" 2>/dev/null || dpkg -S "$real" 2>/dev/null || true)
    pkg=${pkg%%:*}
    [ -n "$pkg" ] || fail "no Debian package has $path ($so)"
    grep -Eq "(^|, )$pkg( |,|$)" <<<"$depends" || fail "needs $so from $pkg, but does not depend on $pkg"
done <"$tmp/needed"
echo "ok: depends on the package of each of the $(wc -l <"$tmp/needed") libraries it needs"

multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
lib=/usr/lib/$multiarch
for f in /usr/bin/ntblend /usr/bin/ntblend-nvme-manager /usr/bin/oshrun.ntblend \
    /usr/bin/oshcc.ntblend /usr/bin/oshc++.ntblend /usr/libexec/ntblend/ntblend-agent /usr/libexec/ntblend/oshrelay \
    /usr/libexec/ntblend/ntb_tool /usr/libexec/ntblend/ntb_perf /usr/libexec/ntblend/nvme_bench \
    /usr/libexec/ntblend/accel_drv /usr/libexec/ntblend/nvme_drv /usr/libexec/ntblend/ntblend-vm \
    /usr/bin/ntblend-vm-guest /usr/share/man/man1/ntblend-vm-guest.1.gz /usr/share/man/man1/ntblend-vm.1.gz \
    "$lib/libntblend.so.$version" "$lib/libntbnvme.so.$version" "$lib/libshmem.so.$version" \
    "$lib/libsisci.so.$version" "$lib/pkgconfig/sisci.pc" /usr/include/sisci_api.h \
    /usr/include/dis/dis_types.h /usr/share/doc/ntblend/examples/sisci_hello.c \
    "$lib/libntblend.so" "$lib/ntblend/ntbnvme-fio.so" "$lib/pkgconfig/ntblend.pc" \
    "$lib/pkgconfig/ntbnvme.pc" "$lib/pkgconfig/shmem.pc" "$lib/cmake/ntblend/ntblendConfig.cmake" \
    /usr/include/ntblend/seg.h /usr/include/ntblend/version.h /usr/include/shmem.h \
    /usr/include/pshmem.h /usr/share/man/man1/ntblend.1.gz /usr/share/man/man1/ntblend-up.1.gz \
    /usr/share/man/man1/oshrun.ntblend.1.gz /usr/share/bash-completion/completions/ntblend \
    /usr/share/ntblend/topologies/two-hosts.ini /usr/share/ntblend/demo.sh \
    /usr/share/doc/ntblend/examples/Makefile /usr/share/doc/ntblend/examples/seg_hello.c \
    /usr/share/doc/ntblend/copyright; do
    grep -qx "$f" "$tmp/contents" || fail "the package has no $f"
done
! grep -q '^/usr/local/' "$tmp/contents" || fail "files under /usr/local: $(grep '^/usr/local/' "$tmp/contents" | head -3)"
! grep -q '^/usr/lib64/' "$tmp/contents" || fail "files under /usr/lib64 (the DIS layout is for other prefixes)"
case "$(readlink "$tmp/x$lib/libntblend.so")" in
libntblend.so.[0-9]*) ;;
*) fail "libntblend.so is not a link to the library's soname" ;;
esac
while IFS= read -r -d '' f; do
    if readelf -d "$f" 2>/dev/null | grep -q 'RUNPATH\|RPATH'; then fail "${f#"$tmp/x"} has a run path"; fi
done < <(find "$tmp/x" -type f -print0)
echo "ok: contents: $(dpkg-deb -c "$deb" | grep -vc '^d') files and links" \
    "($(grep -c '/man1/.' "$tmp/contents") manual pages), Installed-Size" \
    "$(dpkg-deb -f "$deb" Installed-Size) KiB; no run paths"

echo "== lintian"
lintian --info --display-info "$deb" >"$tmp/lintian" 2>&1 || true
cat "$tmp/lintian"
errors=$(grep -c '^E: ' "$tmp/lintian" || true)
warnings=$(grep -c '^W: ' "$tmp/lintian" || true)
infos=$(grep -c '^I: ' "$tmp/lintian" || true)
echo "lintian: $errors errors, $warnings warnings, $infos informational tags"
[ "$errors" = 0 ] && [ "$warnings" = 0 ] || fail "lintian reports errors or warnings (above)"

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "SKIP the installation: it needs root and apt-get"
    exit 0
fi
if dpkg-query -W -f='${Status}' ntblend 2>/dev/null | grep -q 'install ok installed'; then
    echo "SKIP the installation: ntblend is installed on this machine already (not touching it)"
    exit 0
fi

# Open MPI's package has oshcc and oshrun: those must stay as they are; where no package
# has them, they become ntblend's (postinst, update-alternatives).
osh_owner=$(dpkg-query -S /usr/bin/oshcc 2>/dev/null | cut -d: -f1 || true)
osh_before=$(readlink -f /usr/bin/oshcc 2>/dev/null || true)

echo "== apt-get install $(basename "$deb")"
installed=yes
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=300 "$deb" \
    >"$tmp/apt.log" 2>&1 || fail "apt-get install: $(tail -20 "$tmp/apt.log")"
[ "$(PATH=/usr/bin:/bin ntblend --version)" = "ntblend $version" ] || fail "/usr/bin/ntblend --version"
man -w ntblend-up >/dev/null 2>&1 || fail "man does not find ntblend-up(1)"
if [ -n "$osh_owner" ]; then
    [ "$(readlink -f /usr/bin/oshcc)" = "$osh_before" ] || fail "the install changed $osh_owner's /usr/bin/oshcc"
    echo "ok: /usr/bin/oshcc stays $osh_owner's; ntblend's is oshcc.ntblend"
else
    [ "$(readlink -f /usr/bin/oshcc)" = /usr/bin/oshcc.ntblend ] || fail "/usr/bin/oshcc is not ntblend's"
    [ "$(readlink -f /usr/bin/oshrun)" = /usr/bin/oshrun.ntblend ] || fail "/usr/bin/oshrun is not ntblend's"
    echo "ok: oshcc and oshrun are ntblend's (update-alternatives)"
fi
echo "== the demo, from /usr/bin (/usr/share/ntblend/demo.sh)"
mkdir -p "$tmp/demo"
# The VM scene's guest (Debian packages, downloaded once) in the source tree's cache, which
# scripts/vm-guest.sh and tests/system/test_vm.sh share, rather than under the demo's fresh HOME.
vm_cache=()
if [ -d "$src/build" ]; then vm_cache=(NTBLEND_VM_CACHE="$src/build/vm-guest"); fi
if ! (cd "$tmp/demo" && env -i HOME="$tmp/demo" PATH=/usr/bin:/bin NTBLEND_DEMO_FABRIC="$fabric" \
        "${vm_cache[@]}" bash /usr/share/ntblend/demo.sh) >"$tmp/demo.log" 2>&1; then
    tail -40 "$tmp/demo.log"
    fail "the demo failed on the installed package (above)"
fi
want_vm='read back: written by a Linux guest on b'
command -v qemu-system-x86_64 >/dev/null || want_vm='(no VM: QEMU is not installed'
for want in 'ratio window/local' 'got "hello from host a' 'data verified' "$want_vm" \
    'PE 0: counter 5 (expected 5)' '== Shut down'; do
    grep -qF "$want" "$tmp/demo.log" || { tail -40 "$tmp/demo.log"; fail "the demo did not show '$want'"; }
done
echo "ok: the demo ran on the installed package"

echo "== apt-get purge ntblend"
DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq -o DPkg::Lock::Timeout=300 ntblend \
    >"$tmp/apt.log" 2>&1 || fail "apt-get purge: $(tail -20 "$tmp/apt.log")"
installed=no
if dpkg-query -W -f='${Status}' ntblend 2>/dev/null | grep -q 'install ok installed'; then
    fail "ntblend is still installed"
fi
left=$(while read -r f; do
    if [ -n "$f" ] && [ -e "$f" ] && [ ! -d "$f" ]; then echo "$f"; fi
done <"$tmp/contents")
[ -z "$left" ] || fail "left after the purge: $left"
for d in /usr/libexec/ntblend /usr/share/ntblend /usr/include/ntblend "$lib/ntblend" \
    "$lib/cmake/ntblend" /usr/share/doc/ntblend; do
    [ ! -e "$d" ] || fail "left after the purge: $d"
done
if [ -n "$osh_owner" ]; then
    [ "$(readlink -f /usr/bin/oshcc)" = "$osh_before" ] || fail "the purge changed $osh_owner's /usr/bin/oshcc"
else
    [ ! -e /usr/bin/oshcc ] && [ ! -e /etc/alternatives/oshcc ] || fail "the oshcc alternative is left"
fi
shm=$(ls -d /dev/shm/ntblend."$fabric"* 2>/dev/null || true)
[ -z "$shm" ] || fail "fabric state left: $shm"
[ ! -e "/var/tmp/ntblend/$fabric-dev" ] || fail "NVMe images left: /var/tmp/ntblend/$fabric-dev"
if pgrep -f -- "--fabric $fabric" >/dev/null; then fail "processes left: $(pgrep -af -- "--fabric $fabric")"; fi
echo "ok: installed, ran the demo, removed; nothing left"
echo "PASS"
