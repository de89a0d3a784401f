#!/usr/bin/env bash
# Fetches the source of the fio that is installed (Debian's source package, same version) into
# BUILD_DIR/fio-src and configures it, so the ntblend fio engine can be compiled against fio's
# headers, which Debian does not ship. Usage: scripts/fio-src.sh BUILD_DIR
# Needs a deb-src entry for the machine's Debian archive (scripts/install-deps.sh adds one).
# Prints the path of the configured source tree on success; nothing of fio is committed.
set -euo pipefail

case "${1:-}" in
  -h|--help|"") sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; [ -n "${1:-}" ]; exit $? ;;
esac
build=$1
mkdir -p "$build/fio-src"
dir=$(cd "$build/fio-src" && pwd)

ver=$(dpkg-query -W -f='${Version}' fio 2>/dev/null || true)
if [ -z "$ver" ]; then
  echo "fio-src: fio is not installed; run scripts/install-deps.sh" >&2
  exit 1
fi
upstream=${ver%-*}
tree="$dir/fio-$upstream"

if [ ! -f "$tree/config-host.h" ]; then
  if [ ! -f "$tree/fio.h" ]; then
    rm -rf "$tree"
    (cd "$dir" && apt-get source -qq --download-only "fio=$ver" >/dev/null 2>"$dir/apt.log") || {
      echo "fio-src: could not download Debian's fio $ver source package (see $dir/apt.log)." >&2
      echo "fio-src: scripts/install-deps.sh adds the deb-src entry and runs apt-get update." >&2
      exit 1
    }
    # dpkg-source applies Debian's patches, so the headers are those fio was built from.
    (cd "$dir" && dpkg-source -q --no-check -x "fio_$ver.dsc" "fio-$upstream" >/dev/null)
  fi
  # configure writes config-host.h; the fields the engine touches do not depend on its choices.
  (cd "$tree" && ./configure --disable-native >"$dir/configure.log" 2>&1) || {
    echo "fio-src: fio's configure failed (see $dir/configure.log)" >&2
    exit 1
  }
fi
echo "$tree"
