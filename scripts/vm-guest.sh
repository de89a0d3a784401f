#!/usr/bin/env bash
# ntblend-vm-guest - the Linux guest that ntblend's VMs boot, from Debian packages
#
# usage: ntblend-vm-guest [--fio] [--cache DIR]
#        (scripts/vm-guest.sh in a source tree)
#
# Assembles the guest that `ntblend vm start --guest qemu` boots, from Debian packages only
# (apt-get download + dpkg -x): linux-image-cloud-amd64's kernel (its NVMe driver is built
# in, virtio is modules), busybox-static, the virtio-blk and virtio-pci modules with their
# dependencies in load order, and (with --fio) fio and the libraries it links. Prints the
# directory that holds vmlinuz and initramfs.cpio.gz (initramfs-fio.cpio.gz with --fio).
# Run it again after an apt upgrade: a changed package version rebuilds.
#
# options:
#   --fio        add fio and its libraries to the guest (initramfs-fio.cpio.gz)
#   --cache DIR  build and keep the guest in DIR (default: see environment)
#   -h, --help   this text
#
# environment:
#   NTBLEND_VM_CACHE  the default cache; else build/vm-guest of the source tree (one cache
#                     that every build flavour shares), or, installed,
#                     ~/.cache/ntblend/vm-guest (where an installed `ntblend vm start` looks).
#                     A lock serialises builders; images appear whole, by rename.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ -f "$here/../CMakeLists.txt" ] && [ -d "$here/../src/vm" ]; then
  default_cache=$here/../build/vm-guest
else
  default_cache=${XDG_CACHE_HOME:-$HOME/.cache}/ntblend/vm-guest
fi

want_fio=0
cache=${NTBLEND_VM_CACHE:-$default_cache}
while [ $# -gt 0 ]; do
  case "$1" in
    --fio) want_fio=1 ;;
    --cache) cache=${2:?--cache needs a directory}; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "vm-guest: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$cache/debs"
cache=$(cd "$cache" && pwd)
exec 9>"$cache/lock"
flock 9

say() { echo "vm-guest: $*" >&2; }
die() { say "$*"; exit 1; }

# The kernel package behind the metapackage, at the version apt would install today.
kpkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null |
       awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
[ -n "$kpkg" ] || die "apt knows no linux-image-cloud-amd64; run apt-get update (Debian's main archive is needed)"

# fetch PKG...: each at the version apt offers today, downloaded into the cache unless that
# version is there already (one apt-cache and one apt-get call for all: per package they are
# slow). Prints the .deb files.
fetch() {
  local name ver want=() names=()
  while read -r name ver; do
    [ -n "$ver" ] && [ "$ver" != "(none)" ] || die "apt has no candidate for $name"
    names+=("$name")
    if [ "$(cat "$cache/debs/$name.version" 2>/dev/null)" != "$ver" ] ||
       ! ls "$cache/debs/${name}_"*.deb >/dev/null 2>&1; then
      rm -f "$cache/debs/${name}_"*.deb "$cache/debs/$name.version"
      want+=("$name=$ver")
    fi
  done < <(apt-cache policy "$@" | awk '/^[^ ]/ { n = $1; sub(/:$/, "", n) } /Candidate:/ { print n, $2 }')
  if [ ${#want[@]} -gt 0 ]; then
    say "downloading ${#want[@]} package(s): ${want[*]%%=*}"
    (cd "$cache/debs" && apt-get download -q "${want[@]}" >"$cache/debs/apt.log" 2>&1) ||
      die "apt-get download failed (see $cache/debs/apt.log)"
    for name in "${want[@]}"; do echo "${name#*=}" >"$cache/debs/${name%%=*}.version"; done
  fi
  for name in "${names[@]}"; do
    echo "$cache/debs/$(cd "$cache/debs" && ls "${name}_"*.deb | head -n1)"
  done
}

# fio's libraries: the packages that own what the installed fio links (fio is a dependency of
# the project, so it is installed).
fio_pkgs() {
  command -v fio >/dev/null || die "fio is not installed; run scripts/install-deps.sh"
  local libs=() lib real
  for lib in $(ldd "$(command -v fio)" | awk '$3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'); do
    real=$(readlink -f "$lib")
    libs+=("$lib" "$real" "${lib#/usr}" "/usr$lib" "${real#/usr}" "/usr$real")
  done
  echo fio
  dpkg -S "${libs[@]}" 2>/dev/null | cut -d: -f1 | sort -u
}

pkgs=("$kpkg" busybox-static)
[ $want_fio = 0 ] || mapfile -t -O ${#pkgs[@]} pkgs < <(fio_pkgs)
debs=$(fetch "${pkgs[@]}")
name=initramfs.cpio.gz
[ $want_fio = 0 ] || name=initramfs-fio.cpio.gz
stamp=$( (echo "$debs" | sort; cat "$0") | md5sum | cut -c1-16)
if [ -f "$cache/$name" ] && [ "$(cat "$cache/$name.stamp" 2>/dev/null)" = "$stamp" ] &&
   [ -f "$cache/vmlinuz" ]; then
  echo "$cache"
  exit 0
fi

work=$(mktemp -d "$cache/work.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir -p "$root" "$work/k"
dpkg -x "$(echo "$debs" | grep "/${kpkg}_")" "$work/k"
dpkg -x "$(echo "$debs" | grep "/busybox-static_")" "$root"
if [ $want_fio = 1 ]; then
  # Of fio's packages only fio and the libraries it links (a few MiB, not the packages' 60).
  mkdir -p "$work/fio" "$root/usr/bin" "$root/usr/lib/x86_64-linux-gnu" "$root/usr/lib64"
  for d in $(echo "$debs" | grep -v -e "/${kpkg}_" -e "/busybox-static_"); do dpkg -x "$d" "$work/fio"; done
  cp "$work/fio/usr/bin/fio" "$root/usr/bin/"
  for so in $(ldd "$(command -v fio)" | awk '$2 == "=>" { print $1 } $1 ~ /^\// { print $1 }'); do
    f=$(find "$work/fio" -name "$(basename "$so")" | head -n1)
    [ -n "$f" ] || die "$(basename "$so"), which fio links, is in none of the downloaded packages"
    case "$so" in
      /*) cp -L "$f" "$root/usr/lib64/$(basename "$so")" ;;
      *) cp -L "$f" "$root/usr/lib/x86_64-linux-gnu/" ;;
    esac
  done
fi
# One /usr: Debian's packages put libraries under /lib and /usr/lib, the loader under /lib64.
for d in lib lib64 bin sbin; do
  if [ -d "$root/$d" ] && [ ! -L "$root/$d" ]; then
    mkdir -p "$root/usr/$d"
    cp -a "$root/$d/." "$root/usr/$d/"
    rm -rf "${root:?}/$d"
  fi
  mkdir -p "$root/usr/$d"
  ln -s "usr/$d" "$root/$d"
done
rm -rf "$root/usr/share/doc" "$root/usr/share/man" "$root/usr/share/lintian" "$root/etc/init.d"

kver=${kpkg#linux-image-}
moddir=$work/k/lib/modules/$kver/kernel
[ -d "$moddir" ] || die "$kpkg has no modules under lib/modules/$kver"
# Modules in dependency order (a module after what it depends on), from each .ko's modinfo.
declare -A seen=()
order=()
add_mod() {
  local m=$1 f deps d
  [ -n "${seen[$m]:-}" ] && return 0
  seen[$m]=1
  f=$(find "$moddir" -name "$m.ko" -o -name "${m//_/-}.ko" | head -n1)
  [ -n "$f" ] || die "module $m is not in $kpkg"
  deps=$(strings -a "$f" | sed -n 's/^depends=//p' | head -n1)
  for d in ${deps//,/ }; do add_mod "$d"; done
  order+=("$f")
}
for m in virtio_pci virtio_blk qemu_fw_cfg; do add_mod "$m"; done
mkdir -p "$root/lib/modules"
: >"$root/modules"
for f in "${order[@]}"; do
  cp "$f" "$root/lib/modules/"
  basename "$f" >>"$root/modules"
done
cp "$work/k/boot/vmlinuz-$kver" "$work/vmlinuz"

mkdir -p "$root/proc" "$root/sys" "$root/dev" "$root/tmp" "$root/run"
cat >"$root/init" <<'EOF'
#!/bin/busybox sh
# The guest's first process: mount the pseudo file systems, load the virtio modules in order,
# then run the script the host handed in (fw_cfg opt/ntblend/run), or a shell on the console.
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /modules); do insmod /lib/modules/$m; done
run=/sys/firmware/qemu_fw_cfg/by_name/opt/ntblend/run/raw
i=0
while [ ! -e /dev/vda ] && [ $i -lt 20 ] && grep -q 'virtio' /proc/cmdline; do
  sleep 0.1; i=$((i + 1))
done
echo "ntblend-guest: up ($(uname -r))"
if [ -e $run ]; then
  cat $run >/tmp/run.sh
  sh /tmp/run.sh
  echo "ntblend-guest: run exited $?"
else
  setsid cttyhack sh
fi
sync
poweroff -f
EOF
chmod 755 "$root/init"
(cd "$root" && find . | "$root/bin/busybox" cpio -o -H newc 2>/dev/null) | gzip -1 >"$work/$name"
mv "$work/vmlinuz" "$cache/vmlinuz"
mv "$work/$name" "$cache/$name"
echo "$stamp" >"$cache/$name.stamp"
say "$name: $(du -h "$cache/$name" | cut -f1), modules: $(tr '\n' ' ' <"$root/modules")"
echo "$cache"
