#!/bin/sh
# gen-man.sh: the manual pages of the installed programs, generated at build time from their
# own --help texts (tools/man/help2roff.awk), so that a page never says something else than
# the program: ntblend(1) and ntblend-COMMAND(1) for every command `ntblend --help` lists,
# ntblend-nvme-manager(1), ntblend-nvmefs(1) when it is built, ntblend-vm-guest(1), oshrun(1)
# and oshcc(1) (with oshc++, oshCC and oshcxx pointing to it).
# Usage: gen-man.sh BIN_DIR OUT_DIR VERSION [OSH_SUFFIX]
# OSH_SUFFIX: the installed OpenSHMEM wrappers are oshcc$OSH_SUFFIX, ... (NTBLEND_OSH_SUFFIX):
# their pages, and the names in them, carry it too.
# The date on the pages is SOURCE_DATE_EPOCH's when it is set (reproducible builds), else today.
set -eu
bin=$1 out=$2 version=$3 sfx=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
    date=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%d)
else
    date=$(date -u +%Y-%m-%d)
fi
# A sanitized build's programs run here too; their leak report is not the help text.
ASAN_OPTIONS=detect_leaks=0
export ASAN_OPTIONS
# Written aside and moved into place at the end: a page of a command that is gone goes too.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/man1" "$out"

# page NAME SEEALSO [DESC] < HELP: man1/NAME.1
page() {
    awk -v name="$1" -v seealso="$2" -v desc="${3:-}" -v version="$version" -v date="$date" \
        -v section=1 -f "$here/help2roff.awk" >"$tmp/page"
    mv "$tmp/page" "$tmp/man1/$1.1"
}

"$bin/ntblend" --help >"$tmp/help"
commands=$(awk '/^commands:$/ { on = 1; next } on && /^$/ { exit } on { print $1 }' "$tmp/help")
[ -n "$commands" ] || { echo "gen-man.sh: no commands in 'ntblend --help'" >&2; exit 1; }
see=""
for c in $commands; do see="$see ntblend-$c(1)"; done
page ntblend "$see ntblend-nvme-manager(1) oshrun$sfx(1) oshcc$sfx(1)" <"$tmp/help"
for c in $commands; do
    extra=""
    [ "$c" = nvme ] && extra=" ntblend-nvme-manager(1)"
    "$bin/ntblend" help "$c" >"$tmp/help"
    page "ntblend-$c" "ntblend(1)$extra" <"$tmp/help"
done
"$bin/ntblend-nvme-manager" --help >"$tmp/help"
page ntblend-nvme-manager "ntblend(1) ntblend-nvme(1)" <"$tmp/help"
if [ -x "$bin/ntblend-nvmefs" ]; then
    "$bin/ntblend-nvmefs" --help >"$tmp/help"
    page ntblend-nvmefs "ntblend(1) ntblend-nvme(1) fusermount3(1)" \
        "the namespaces of an NVMe as files, through FUSE" <"$tmp/help"
fi
# The guest image's builder, installed as ntblend-vm-guest from scripts/vm-guest.sh.
bash "$here/../../scripts/vm-guest.sh" --help >"$tmp/help"
page ntblend-vm-guest "ntblend(1) ntblend-vm(1)" <"$tmp/help"
# The wrappers' names as installed (the build tree's have the plain names).
osh_names() {
    sed -e "s/\\b\\(oshcc\\|oshCC\\|oshcxx\\|oshrun\\)\\b/\\1$sfx/g" -e "s/\\boshc++/oshc++$sfx/g"
}
"$bin/oshrun" --help | osh_names >"$tmp/help"
page "oshrun$sfx" "oshcc$sfx(1) ntblend(1) ntblend-run(1)" <"$tmp/help"
"$bin/oshcc" --help | osh_names >"$tmp/help"
page "oshcc$sfx" "oshrun$sfx(1) ntblend(1)" <"$tmp/help"
for alias in oshc++ oshCC oshcxx; do
    echo ".so man1/oshcc$sfx.1" >"$tmp/man1/$alias$sfx.1"
done
rm -rf "$out/man1"
mv "$tmp/man1" "$out/man1"
