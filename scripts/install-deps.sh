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
)

missing=()
why=()
for entry in "${packages[@]}"; do
  p=${entry%%:*}
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" && continue
  missing+=("$p")
  why+=("  $p — ${entry#*:}")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all dependencies present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
echo "install-deps: installing ${#missing[@]} Debian package(s) with apt-get${sudo:+ (through sudo)}:"
printf '%s\n' "${why[@]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
