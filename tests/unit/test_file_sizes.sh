#!/usr/bin/env bash
# tests/unit/test_file_sizes.sh [SRC]: fails when a C source or header of the tree SRC (default
# $NTBLEND_SRC, else the tree this script is in) is over 800 lines, naming each such file and
# its length. Files stay small enough to read in one sitting (docs/testing.md, "File sizes"):
# one over the limit is split by concern, not by line count.
#
# Checked: every *.c, *.h and *.cpp, and the *.h.in templates configure_file makes headers from,
# wherever they are (src, include, tools, tests, fuzz, examples, cmake, ...). Not ours, so left
# out: build trees, which hold the generated headers (version.h, install_dirs.h) and the
# external programs the tests unpack and build there (libnvm, tests-sos); what git ignores
# (build*/ at the top); the packaging's staging (debian/, a copy of the tree with installed
# headers in it). It reads the tree only, so it needs no build products.
set -euo pipefail

limit=800
src=${1:-${NTBLEND_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}}
[ -d "$src/src" ] && [ -f "$src/CMakeLists.txt" ] ||
    { echo "test_file_sizes: $src is not an ntblend source tree (give its path, or set NTBLEND_SRC)" >&2; exit 2; }
cd "$src"

# NUL-separated paths relative to the tree: from git when the tree is a checkout (tracked and
# new files, not the ignored ones), else from a walk that skips the same places.
list_sources() {
    if [ "$(git rev-parse --show-toplevel 2>/dev/null)" = "$(pwd -P)" ]; then
        git ls-files -z --cached --others --exclude-standard -- \
            '*.c' '*.h' '*.cpp' '*.h.in' |
            while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done
    else
        # A directory with a CMakeCache.txt is a build tree, wherever it is.
        find . \( -path ./.git -o -path './build*' -o -path ./debian \
                  -o \( -type d -exec test -e '{}/CMakeCache.txt' \; \) \) -prune \
            -o -type f \( -name '*.c' -o -name '*.h' -o -name '*.cpp' -o -name '*.h.in' \) \
            -printf '%P\0'
    fi
}

checked=0 longest=0 longest_file="" over=()
while IFS= read -r -d '' f; do
    n=$(wc -l <"$f")
    checked=$((checked + 1))
    if ((n > longest)); then longest=$n longest_file=$f; fi
    if ((n > limit)); then over+=("$n $f"); fi
done < <(list_sources)

if ((checked == 0)); then
    echo "test_file_sizes: found no C sources under $src: is it the source tree?" >&2
    exit 1
fi
if ((${#over[@]})); then
    echo "test_file_sizes: ${#over[@]} of $checked C files are over $limit lines; split each by concern:"
    printf '%s\n' "${over[@]}" | sort -rn | while read -r n f; do
        echo "  $f: $n lines"
    done
    exit 1
fi
echo "test_file_sizes: $checked C files, none over $limit lines (the longest: $longest_file, $longest)"
