#!/bin/sh
# The OpenSHMEM profiling interface (1.5 Annex: every routine also as pshmem_NAME), generated
# from include/shmem.h at build time so that it can never miss a routine:
#   OUT/pshmem.h   the pshmem_ prototypes (include <pshmem.h>; shmem.h comes with it)
#   OUT/pshmem.ld  `pshmem_NAME = shmem_NAME;` for each, linked into libshmem: the pshmem_
#                  names are the library's own code, so a tool that defines shmem_NAME in
#                  the program and calls pshmem_NAME reaches the library.
# Usage: gen-pshmem.sh CC INCLUDE_DIR OUT_DIR
set -eu
cc=$1 inc=$2 out=$3
mkdir -p "$out"
# Every function shmem.h declares, one declaration a line, as the C compiler sees them.
"$cc" -E -P -std=gnu11 -I"$inc" "$inc/shmem.h" | grep -v '^#pragma' | tr '\n' ' ' | tr ';' '\n' | awk '
    { sub(/^[ \t]+/, ""); gsub(/[ \t]+/, " ") }
    /^typedef / || /^extern [a-z_]+ SHMEM_/ { next }
    match($0, /shmem_[A-Za-z0-9_]+ ?\(/) {
        name = substr($0, RSTART, RLENGTH); sub(/ ?\($/, "", name)
        if (seen[name]++) next
        decl = substr($0, 1, RSTART - 1) "p" substr($0, RSTART)
        print name "\t" decl
    }' >"$out/pshmem.list"
[ -s "$out/pshmem.list" ] || { echo "gen-pshmem.sh: no declarations found in $inc/shmem.h" >&2; exit 1; }
{
    echo "/* Generated from shmem.h by tools/gen-pshmem.sh: the profiling interface, every"
    echo " * OpenSHMEM routine under its pshmem_ name (docs/openshmem.md). Do not edit. */"
    echo "#ifndef PSHMEM_H"
    echo "#define PSHMEM_H"
    echo "#include <shmem.h>"
    echo "#ifdef __cplusplus"
    echo "extern \"C\" {"
    echo "#endif"
    echo "#pragma GCC visibility push(default) /* libshmem's API, as in shmem.h */"
    cut -f2 "$out/pshmem.list" | sed 's/$/;/'
    echo "#pragma GCC visibility pop"
    echo "#ifdef __cplusplus"
    echo "}"
    echo "#endif"
    echo "#endif"
} >"$out/pshmem.h.tmp"
cut -f1 "$out/pshmem.list" | sed 's/.*/p& = &;/' >"$out/pshmem.ld.tmp"
mv "$out/pshmem.h.tmp" "$out/pshmem.h"
mv "$out/pshmem.ld.tmp" "$out/pshmem.ld"
