#!/usr/bin/env bash
# Installs the Debian packages ntblend needs to build, test and plot, and only those that are
# missing. Safe to run again. Needs root (or sudo) when something is missing.
set -euo pipefail

# Each package, and why ntblend needs it (printed before anything is installed).
packages=(
  "build-essential:compiler and make" "cmake:the build" "pkg-config:finding the libraries"
  "libinih-dev:reading topology files"
  "libjson-c-dev:--json output of the CLI and the benchmarks"
  "libpci-dev:device and class names in ntblend lspci" "pci.ids:the names' database"
  "pciutils:lspci, which the tests use to decode ntblend lspci -x dumps"
  "jq:reading --json output in tests and scripts"
  "libcmocka-dev:the unit tests"
  "libfuse3-dev:ntblend-nvmefs, an NVMe's namespaces as files" "fuse3:fusermount3, to mount and unmount them"
  "graphviz:topology pictures" "gnuplot-nox:benchmark plots"
  "procps:ps and pgrep for the CPU-use measurement"
  "clang:the fuzzers (scripts/fuzz.sh)" "libclang-rt-14-dev:libFuzzer's runtime for clang 14"
  "fio:the fio engine and its test (examples/fio)"
  "dpkg-dev:dpkg-source, which unpacks fio's source for the engine's build (scripts/fio-src.sh)"
  "nbdkit:a network block device as the reference in scripts/bench-nvme.sh (fio's nbd engine)"
  "openmpi-bin:Open MPI's OSHMEM (oshrun), the reference of scripts/bench-shmem-oshmem.sh"
  "libopenmpi-dev:Open MPI's oshcc and shmem.h, to build that benchmark's reference binary"
  "qemu-system-x86:QEMU for the VMs' Linux guests (ntblend vm, tests/system/test_vm.sh), with qemu-storage-daemon, a reference of scripts/bench-vm.sh"
  "debhelper:scripts/package.sh builds the Debian package with dpkg-buildpackage and debhelper"
  "lintian:the package test checks the Debian package as Debian does"
  "man-db:the install test reads the installed manual pages with man"
)

# The fio engine is compiled against fio's headers, which Debian does not ship:
# scripts/fio-src.sh fetches Debian's fio source package, which needs a deb-src entry for the
# archive this machine installs from. Prints the entry to add, or nothing when one exists.
src_entry() {
  local lists=(/etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources)
  grep -qsE '^[[:space:]]*(deb-src[[:space:]]|Types:.*deb-src)' "${lists[@]}" && return 0
  local codename="" id="" uri=""
  # shellcheck disable=SC1091
  [ -r /etc/os-release ] && codename=$(. /etc/os-release; echo "${VERSION_CODENAME:-}") \
    && id=$(. /etc/os-release; echo "${ID:-}")
  [ "$id" = debian ] && [ -n "$codename" ] || return 0
  # The URI of the first deb entry for this release: one-line (.list) or deb822 (.sources).
  uri=$(awk -v c="$codename" '$1 == "deb" { for (i = 2; i < NF; i++) if ($i ~ /:\/\//) { if ($(i + 1) == c) { print $i; exit } break } }' \
          /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | head -n1)
  [ -n "$uri" ] || uri=$(awk -v c="$codename" 'BEGIN { RS = "" }
      { t = s = u = ""
        n = split($0, l, "\n")
        for (i = 1; i <= n; i++) {
          if (l[i] ~ /^Types:/) t = " " substr(l[i], 7) " "
          if (l[i] ~ /^Suites:/) s = " " substr(l[i], 8) " "
          if (l[i] ~ /^URIs:/) { split(substr(l[i], 6), w, " "); u = w[1] }
        }
        if (t ~ /[ \t]deb[ \t]/ && s ~ ("[ \t]" c "[ \t]") && u != "") { print u; exit } }' \
          /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1)
  [ -n "$uri" ] || uri=http://deb.debian.org/debian
  printf 'Types: deb-src\nURIs: %s\nSuites: %s\nComponents: main\n' "$uri" "$codename"
  [ -f /usr/share/keyrings/debian-archive-keyring.gpg ] \
    && echo "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg"
  return 0
}

missing=()
why=()
for entry in "${packages[@]}"; do
  p=${entry%%:*}
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" && continue
  missing+=("$p")
  why+=("  $p — ${entry#*:}")
done

src=$(src_entry)

if [ ${#missing[@]} -eq 0 ] && [ -z "$src" ]; then
  echo "install-deps: all dependencies present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}${src:+ and a deb-src entry}" >&2; exit 1; }
  sudo=sudo
fi
if [ -n "$src" ]; then
  echo "install-deps: adding /etc/apt/sources.list.d/ntblend-src.sources${sudo:+ (through sudo)}, a deb-src"
  echo "  entry for $(awk '/^URIs:/ { u = $2 } /^Suites:/ { s = $2 } END { print u, s }' <<<"$src") — fio's source for the fio engine (scripts/fio-src.sh)"
  $sudo tee /etc/apt/sources.list.d/ntblend-src.sources >/dev/null <<<"$src"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${#missing[@]} Debian package(s) with apt-get${sudo:+ (through sudo)}:"
  printf '%s\n' "${why[@]}"
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
