#!/usr/bin/env bash
# Installs the Debian packages ntblend needs to build, test and plot, and only those that are
# missing. Safe to run again. Needs root (or sudo) when something is missing.
set -euo pipefail

packages=(
  build-essential cmake pkg-config   # toolchain
  libinih-dev                        # topology file parser
  libjson-c-dev                      # --json output of the CLI and the benchmarks
  libpci-dev pci.ids pciutils        # ntblend lspci: names as lspci prints them; lspci -F in tests
  jq                                 # reading --json output in tests and bench-compare.sh
  libcmocka-dev                      # unit tests
  graphviz gnuplot-nox               # topology pictures and benchmark plots
  procps                             # ps/pgrep, used by the CPU-use measurement
  clang libclang-rt-14-dev           # libFuzzer (scripts/fuzz.sh); Debian 12's clang is 14
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: everything is installed"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
