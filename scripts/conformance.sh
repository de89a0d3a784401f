#!/usr/bin/env bash
# Runs the OpenSHMEM community test suite (tests-sos, github.com/openshmem-org/tests-sos)
# against this library: every C program of test/unit, test/spec-example and test/apps that
# does not need MPI or Fortran is built unmodified with oshcc (the C++ ones with oshc++ when
# --cxx is given), then run with oshrun on a fabric of its own, one at a time, with a
# timeout. Prints a pass/fail table and a summary line; exits 1 if anything failed.
# The list of programs, their sources and their flags are read from the suite's Makefile.am
# files, so a new version of the suite needs no change here. docs/openshmem.md has the tables.
set -euo pipefail
me=conformance.sh
here=$(cd "$(dirname "$0")/.." && pwd)

usage() {
    cat <<USAGE
usage: $me PATH_TO_TESTS_SOS [options]

Builds the tests-sos programs with build/bin/oshcc (and oshc++) and runs each with oshrun.

  --np N            PEs per program (default 2)
  --topology T      topology: a .ini file, or a name from examples/topologies or
                    tests/system/topologies (default four-hosts-switch)
  --ppn K           K PEs per host (oshrun --ppn) instead of round-robin over the hosts
  --deprecated      build with -DENABLE_DEPRECATED_TESTS (the suite's --enable-deprecated-tests)
  --cxx             also build and run the C++ programs, with oshc++
  --only REGEX      only the programs whose name matches REGEX (grep -E)
  --timeout S       seconds each program may run (default 180)
  --bin DIR         where oshcc, oshc++, oshrun and ntblend are (default build/bin)
  --work DIR        build and log directory (default build/conformance/<configuration>)
  -h, --help        this text

The fabric is brought up under its own name (conf-PID) and brought down at the end; set
NTBLEND_SHM_DIR as for any other fabric. Build and run logs are in the work directory:
NAME.build.log and NAME.log. Programs are rebuilt only when their sources, the headers or
the compiler wrappers changed, and all of them when --bin names another build than last time
(they link that build's libraries).

Example:
  scripts/conformance.sh ../tests-sos --np 4
  scripts/conformance.sh ../tests-sos --np 5 --topology ring5
  scripts/conformance.sh ../tests-sos --np 4 --ppn 2 --deprecated --cxx
USAGE
}

die() { echo "$me: $*" >&2; exit 2; }

sos="" np=2 topo=four-hosts-switch ppn="" deprecated=no cxx=no only="" tmo=180
bin="$here/build/bin" work=""
while (($#)); do
    case "$1" in
    --np | -np) (($# >= 2)) || die "$1 needs a number"; np=$2; shift 2 ;;
    --topology) (($# >= 2)) || die "--topology needs a name or file"; topo=$2; shift 2 ;;
    --ppn) (($# >= 2)) || die "--ppn needs a number"; ppn=$2; shift 2 ;;
    --deprecated) deprecated=yes; shift ;;
    --cxx) cxx=yes; shift ;;
    --only) (($# >= 2)) || die "--only needs a regular expression"; only=$2; shift 2 ;;
    --timeout) (($# >= 2)) || die "--timeout needs seconds"; tmo=$2; shift 2 ;;
    --bin) (($# >= 2)) || die "--bin needs a directory"; bin=$2; shift 2 ;;
    --work) (($# >= 2)) || die "--work needs a directory"; work=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    -*) die "unknown option '$1' (see $me --help)" ;;
    *) [[ -z "$sos" ]] || die "one tests-sos directory, not '$sos' and '$1'"; sos=$1; shift ;;
    esac
done
[[ -n "$sos" ]] || die "where is tests-sos? (see $me --help)"
[[ -f "$sos/test/unit/Makefile.am" ]] ||
    die "$sos is not a tests-sos checkout (no test/unit/Makefile.am); clone it with: git clone https://github.com/openshmem-org/tests-sos"
sos=$(cd "$sos" && pwd)
[[ "$np" =~ ^[1-9][0-9]*$ ]] || die "--np needs a positive number, not '$np'"
[[ -z "$ppn" || "$ppn" =~ ^[1-9][0-9]*$ ]] || die "--ppn needs a positive number, not '$ppn'"
[[ "$tmo" =~ ^[1-9][0-9]*$ ]] || die "--timeout needs a number of seconds, not '$tmo'"
for t in oshcc oshrun ntblend; do
    [[ -x "$bin/$t" ]] || die "no $bin/$t: build the tree first (cmake --build build)"
done
[[ $cxx == no || -x "$bin/oshc++" ]] || die "no $bin/oshc++: build the tree first"

topo_file=$topo
if [[ ! -f "$topo_file" ]]; then
    for d in "$here/examples/topologies" "$here/tests/system/topologies"; do
        [[ -f "$d/$topo.ini" ]] && topo_file="$d/$topo.ini" && break
    done
fi
[[ -f "$topo_file" ]] || die "no topology '$topo' (a file, or a name in examples/topologies or tests/system/topologies)"

label="np$np-$(basename "$topo_file" .ini)${ppn:+-ppn$ppn}"
[[ $deprecated == yes ]] && label+="-deprecated"
work=${work:-$here/build/conformance/$label}
mkdir -p "$work"

# programs DIR: "NAME LANG SOURCES... | FLAGS..." for each program of DIR/Makefile.am that this
# configuration builds. Blocks under MPI and Fortran conditions are left out, C++ programs
# unless --cxx; every other condition (threads, OpenMP, C11, profiling) counts as met.
programs() {
    awk -v cxx="$cxx" '
        function cond_ok(c) {
            if (c ~ /USE_PMI_MPI|USE_PMI_SIMPLE|USE_PORTALS4/) return substr(c, 1, 1) == "!"
            if (c ~ /FORTRAN/) return 0
            if (c ~ /HAVE_CXX/) return cxx == "yes"
            return 1
        }
        function active(   i) { for (i = 1; i <= depth; i++) if (!ok[i]) return 0; return 1 }
        { sub(/#.*/, "") }
        /^[ \t]*if[ \t]/ { ok[++depth] = cond_ok($2); next }
        /^[ \t]*else/ { ok[depth] = !ok[depth]; next }
        /^[ \t]*endif/ { depth--; next }
        {
            line = $0
            while (line ~ /\\[ \t]*$/ && (getline nxt) > 0) { sub(/\\[ \t]*$/, " ", line); line = line nxt }
            if (line ~ /^[ \t]*check_PROGRAMS[ \t]*\+?=/) {
                if (!active()) next
                sub(/^[^=]*=/, "", line)
                n = split(line, w, /[ \t]+/)
                for (i = 1; i <= n; i++) if (w[i] != "") order[++np] = w[i]
            } else if (line ~ /^[a-zA-Z0-9_]+_(SOURCES|CFLAGS|CXXFLAGS|LDFLAGS|LDADD)[ \t]*=/) {
                key = line; sub(/[ \t]*=.*/, "", key)
                val = line; sub(/^[^=]*=[ \t]*/, "", val)
                var[key] = val
            }
        }
        END {
            for (i = 1; i <= np; i++) {
                p = order[i]; v = p; gsub(/[^a-zA-Z0-9_]/, "_", v)
                src = (v "_SOURCES" in var) ? var[v "_SOURCES"] : ""
                if (src == "") src = p ".c"
                lang = (src ~ /\.(cpp|cc|cxx)/) ? "cxx" : "c"
                flags = var[v "_CFLAGS"] " " var[v "_CXXFLAGS"] " " var[v "_LDFLAGS"] " " var[v "_LDADD"]
                print p, lang, src, "|", flags
            }
        }' "$1"
}

# flags WORDS...: the Makefile.am flags as compiler flags.
flags() {
    local out=() f
    for f in "$@"; do
        case "$f" in
        '$(PTHREAD_CFLAGS)' | '$(PTHREAD_LIBS)') out+=(-pthread) ;;
        '$(AM_OPENMP_CFLAGS)') out+=(-fopenmp) ;;
        '$('*) ;;
        *) out+=("$f") ;;
        esac
    done
    printf '%s\n' "${out[@]}" | awk 'NF && !seen[$0]++'
}

list="$work/programs"
: >"$list"
for d in unit spec-example apps; do
    programs "$sos/test/$d/Makefile.am" | sed "s|^|$d |" >>"$list"
done
if [[ -n "$only" ]]; then
    awk -v re="$only" '$2 ~ re' "$list" >"$list.only" && mv "$list.only" "$list"
fi
total=$(wc -l <"$list")
((total > 0)) || die "no program matches '$only'"

common=(-I"$sos/test/include")
[[ $deprecated == yes ]] && common+=(-DENABLE_DEPRECATED_TESTS)

# Programs built by another --bin link that build's libraries (its RUNPATH): rebuild them all.
bin_abs=$(cd "$bin" && pwd)
rebuild=no
[[ "$(cat "$work/.bin" 2>/dev/null)" == "$bin_abs" ]] || rebuild=yes
echo "$bin_abs" >"$work/.bin"

fabric="conf-$$"
n() { "$bin/ntblend" --fabric "$fabric" "$@"; }
trap 'n down >/dev/null 2>&1 || true' EXIT
trap 'exit 130' INT TERM
n up "$topo_file" >"$work/fabric.log" 2>&1 || die "could not bring up $topo_file: $(cat "$work/fabric.log")"

desc="$np PEs, $(basename "$topo_file" .ini)${ppn:+, --ppn $ppn}"
[[ $deprecated == yes ]] && desc+=", deprecated"
[[ $cxx == yes ]] && desc+=", C++"
placement=(-np "$np")
[[ -n "$ppn" ]] && placement+=(--ppn "$ppn")
echo "# tests-sos $(git -C "$sos" rev-parse --short HEAD 2>/dev/null || echo '?'): $desc"
echo
echo "| program | result |"
echo "|---|---|"
pass=0 failed=()
while read -r dir name lang rest; do
    srcs=${rest%%|*} fl=${rest#*|}
    # shellcheck disable=SC2086 # the Makefile.am's words
    mapfile -t extra < <(flags $fl)
    files=()
    for s in $srcs; do
        case "$s" in *.h | *.hpp) ;; *) files+=("$sos/test/$dir/$s") ;; esac
    done
    exe="$work/$name"
    cc="$bin/oshcc"
    [[ $lang == cxx ]] && cc="$bin/oshc++"
    stale=$rebuild
    [[ -x "$exe" ]] || stale=yes
    for f in "${files[@]}" "$here/include/shmem.h" "$here/include/shmemx.h" "$cc"; do
        [[ $stale == yes || "$f" -nt "$exe" ]] && stale=yes
    done
    result=""
    if [[ $stale == yes ]] && ! "$cc" "${common[@]}" "${extra[@]}" -o "$exe" "${files[@]}" -lm \
        >"$work/$name.build.log" 2>&1; then
        rm -f "$exe"
        result="build failed: $(grep -m1 -E 'error|undefined reference' "$work/$name.build.log" |
            sed -E 's/^[^:]*:([0-9]+:){0,2} *//' | cut -c1-90)"
    else
        st=0
        timeout -k 10 "$tmo" "$bin/oshrun" --fabric "$fabric" "${placement[@]}" "$exe" \
            >"$work/$name.log" 2>&1 </dev/null || st=$?
        case $st in
        0) result=pass ;;
        124 | 137) result="timeout (${tmo} s)" ;;
        *) result="exit $st" ;;
        esac
    fi
    [[ $result == pass ]] && pass=$((pass + 1)) || failed+=("$name")
    printf '| %s/%s | %s |\n' "$dir" "$name" "$result"
done <"$list"
echo
echo "conformance: $pass/$total passed ($desc)${failed[*]:+; failed: ${failed[*]}}"
((${#failed[@]} == 0))
