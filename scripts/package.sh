#!/usr/bin/env bash
# Builds ntblend's Debian package, ntblend_VERSION_ARCH.deb, with Debian's own tooling
# (dpkg-buildpackage and debhelper's CMake build), from the files of this source tree.
# Usage: scripts/package.sh [--check] [--out DIR]
#   --check   also run the test suite inside the package build (about as long as
#             scripts/test.sh); by default the build is DEB_BUILD_OPTIONS=nocheck
#   --out DIR where the package goes (default build-deb/)
# The version is the one in CMakeLists.txt's project(); the packaging is packaging/debian/.
# Installs what it needs first (scripts/install-deps.sh). The maintainer named in the
# package is $DEBFULLNAME <$DEBEMAIL> when set, else the author of the last commit.
# Prints the path of the .deb.
set -euo pipefail
cd "$(dirname "$0")/.."
me=package.sh
die() { echo "$me: $*" >&2; exit 1; }
usage_error() { echo "$me: $* (see --help)" >&2; exit 2; }

check=no out=build-deb
while (($#)); do
    case "$1" in
    --check) check=yes; shift ;;
    --out) (($# >= 2)) || usage_error "--out needs a directory"; out=$2; shift 2 ;;
    --out=*) out=${1#*=}; shift ;;
    -h | --help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) usage_error "unknown argument '$1'" ;;
    esac
done

bash scripts/install-deps.sh >&2
version=$(sed -n 's/^project(ntblend VERSION \([0-9][0-9.]*\).*/\1/p' CMakeLists.txt)
[ -n "$version" ] || die "no version in CMakeLists.txt's project() line"
if [ -n "${DEBFULLNAME:-}" ] && [ -n "${DEBEMAIL:-}" ]; then
    maintainer="$DEBFULLNAME <$DEBEMAIL>"
elif git rev-parse --git-dir >/dev/null 2>&1; then
    maintainer=$(git log -1 --format='%an <%ae>')
else
    die "set DEBFULLNAME and DEBEMAIL: the package names its maintainer"
fi

# A copy of the source tree (the files git knows of, and new ones it does not ignore, as
# they are now), with the packaging as debian/.
mkdir -p "$out"
out=$(cd "$out" && pwd)
stage=$(mktemp -d "$out/stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT
tree=$stage/ntblend-$version
mkdir -p "$tree"
if git rev-parse --git-dir >/dev/null 2>&1; then
    git ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
        tar --null -T - -cf - | tar -xf - -C "$tree"
    described=$(git describe --always --dirty 2>/dev/null || echo unknown)
else
    tar --exclude='./build*' -cf - . | tar -xf - -C "$tree"
    described="a source tree without git"
fi
cp -r packaging/debian "$tree/debian"
sed -i "s|@MAINTAINER@|$maintainer|" "$tree/debian/control"
date=$(date -R)
if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then date=$(date -R -d "@$SOURCE_DATE_EPOCH"); fi
cat >"$tree/debian/changelog" <<EOF
ntblend ($version) unstable; urgency=medium

  * Built by scripts/package.sh from $described.

 -- $maintainer  $date
EOF

opts="parallel=$(nproc)"
[ "$check" = yes ] || opts="$opts nocheck"
echo "$me: dpkg-buildpackage for ntblend $version (DEB_BUILD_OPTIONS=$opts); log: $out/build.log" >&2
if ! (cd "$tree" && DEB_BUILD_OPTIONS="$opts" dpkg-buildpackage -b -us -uc) >"$out/build.log" 2>&1; then
    tail -40 "$out/build.log" >&2
    die "the package build failed (the whole log: $out/build.log)"
fi
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
for f in "$stage"/*.deb "$stage"/*.ddeb "$stage"/*.buildinfo "$stage"/*.changes; do
    [ -e "$f" ] && mv -f "$f" "$out/"
done
deb=$out/ntblend_${version}_$arch.deb
[ -f "$deb" ] || die "dpkg-buildpackage made no $deb (see $out/build.log)"
echo "$deb"
