#!/usr/bin/env bash
# test_exports: every shared library of ntblend exports exactly what its public headers
# declare. A name exported but not declared is an internal symbol leaking into every
# program's namespace (the fabric's fab_*, the runtime's rt_*, libshmem's state); a name
# declared but not exported is an API function no program can link. The libraries and their
# headers come from the build (build/exports/libraries.tsv, written by ntblend_library() in
# cmake/NtblendInstall.cmake), so a new library is checked as soon as it is added; and the
# fio engine, a module, exports only the entry point fio looks up.
#
# Declared functions come from GCC's -aux-info (every prototype with the file that declares
# it; static inline definitions are not symbols), declared variables from the extern
# declarations of the preprocessed header; exported names from nm -D.
set -euo pipefail
bin=${NTBLEND_BIN:?set NTBLEND_BIN to the bin directory of the build}
build=$(cd "$bin/.." && pwd)
list=$build/exports/libraries.tsv
[ -s "$list" ] || { echo "FAIL: $list is missing or empty (configure the build again)"; exit 1; }
# -aux-info is GCC's: use it whatever compiler built the tree (build-essential brings gcc).
command -v gcc >/dev/null || { echo "FAIL: gcc is needed to list the headers' declarations"; exit 1; }
tmp=$(mktemp -d /tmp/test_exports.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# declared HEADER INCDIR... : the functions and variables HEADER itself declares, one a line.
declared() {
    local h=$1 inc=() d
    shift
    for d in "$@"; do inc+=("-I$d"); done
    printf '#include "%s"\n' "$h" >"$tmp/tu.c"
    gcc -std=gnu11 "${inc[@]}" -fsyntax-only -aux-info "$tmp/aux" "$tmp/tu.c"
    # "/* FILE:LINE:NC */ extern int f (int);": C = a declaration (F would be a definition,
    # i.e. a static inline function, which is no symbol).
    awk -v h="$h" '
        index($0, "/* " h ":") == 1 && $0 ~ /:[NO]C \*\// && $0 !~ /\*\/ static / {
            s = $0; sub(/^\/\*[^*]*\*\/ /, "", s)
            if (match(s, /[A-Za-z_][A-Za-z0-9_]* \([^*]/)) {
                n = substr(s, RSTART, RLENGTH); sub(/ .*/, "", n); print n
            }
        }' "$tmp/aux"
    # Variables: "extern TYPE NAME;" lines of HEADER in the preprocessed text (line markers
    # say which file each line comes from).
    gcc -std=gnu11 "${inc[@]}" -E "$tmp/tu.c" | awk -v h="$h" '
        /^# [0-9]+ "/ { f = $3; gsub(/"/, "", f); next }
        f == h && /^[ \t]*extern / && !/\(/ {
            s = $0; sub(/;.*/, "", s); n = split(s, w, /[ \t*]+/); print w[n]
        }'
}

# exported LIB: the names LIB defines in its dynamic symbol table.
exported() {
    nm -D --defined-only "$1" | awk '$2 ~ /^[TDBRVWiGS]$/ { sub(/@.*/, "", $3); print $3 }'
}

# check LIB "HEADERS" "INCDIRS": 0 when LIB exports exactly what HEADERS declare.
check() {
    local lib=$1 h rc=0
    local -a headers incs
    read -r -a headers <<<"$2"
    read -r -a incs <<<"$3"
    for h in "${headers[@]}"; do declared "$h" "${incs[@]}"; done | sort -u >"$tmp/declared"
    exported "$lib" | sort -u >"$tmp/exported"
    comm -23 "$tmp/exported" "$tmp/declared" >"$tmp/extra"
    comm -13 "$tmp/exported" "$tmp/declared" >"$tmp/missing"
    local name
    name=$(basename "$lib")
    if [ -s "$tmp/extra" ]; then
        echo "FAIL: $name exports $(wc -l <"$tmp/extra") name(s) its headers do not declare:"
        sed 's/^/    /' "$tmp/extra" | head -40
        echo "  (give them hidden visibility or take them out of the library's export list)"
        rc=1
    fi
    if [ -s "$tmp/missing" ]; then
        echo "FAIL: $name does not export $(wc -l <"$tmp/missing") name(s) its headers declare:"
        sed 's/^/    /' "$tmp/missing" | head -40
        echo "  (add them to the library's export list, and the header's visibility push)"
        rc=1
    fi
    [ "$rc" -ne 0 ] || echo "ok: $name exports its $(wc -l <"$tmp/exported") declared names and nothing else"
    return "$rc"
}

# First, that the check can fail: a library with one declared function, one inline one, one
# variable, and one function that leaks.
mkdir -p "$tmp/probe"
cat >"$tmp/probe/probe.h" <<'EOF'
extern int probe_var;
int probe_api(int x);
static inline int probe_inline(int x) { return x + 1; }
EOF
cat >"$tmp/probe/probe.c" <<'EOF'
#include "probe.h"
int probe_var;
int probe_api(int x) { return probe_inline(x); }
int probe_leak(int x) { return x; }
EOF
gcc -shared -fPIC -o "$tmp/probe/libprobe.so" "$tmp/probe/probe.c"
if check "$tmp/probe/libprobe.so" "$tmp/probe/probe.h" "$tmp/probe" >"$tmp/probe.out"; then
    echo "FAIL: the check passed a library that exports an undeclared function:"
    cat "$tmp/probe.out"
    exit 1
fi
grep -qx '    probe_leak' "$tmp/probe.out" && ! grep -q 'probe_api\|probe_var\|probe_inline' "$tmp/probe.out" || {
    echo "FAIL: the check did not single out the leaking function of the probe library:"
    cat "$tmp/probe.out"
    exit 1
}
echo "ok: the check finds a leaking symbol (probe_leak) and only that"

rc=0
while IFS=$'\t' read -r lib headers incs; do
    [ -n "$lib" ] || continue
    [ -f "$lib" ] || { echo "FAIL: $lib is not built"; rc=1; continue; }
    check "$lib" "$headers" "$incs" || rc=1
done <"$list"
# The fio engine (when built) is a module fio loads: get_ioengine, the one name fio looks up,
# and nothing else.
fio=$build/lib/ntbnvme-fio.so
if [ -f "$fio" ]; then
    got=$(exported "$fio" | sort -u | tr '\n' ' ')
    if [ "$got" = "get_ioengine " ]; then
        echo "ok: ntbnvme-fio.so exports get_ioengine and nothing else"
    else
        echo "FAIL: ntbnvme-fio.so exports $got(only get_ioengine should leave it)"
        rc=1
    fi
fi
exit "$rc"
