#!/usr/bin/env bash
# SISCI programs built unmodified against ntblend (docs/sisci.md): `cmake --install` lays the
# SISCI headers and libsisci out as a DIS prefix; libnvm (the snapshot in shared/external, not
# part of the project: unpacked and built in the build tree) builds against it with its own
# switch, -DDIS=<prefix>; and its SmartIO examples run on the fabric's NVMe, borrowed from
# other hosts and shared: identify; integrity writing a file from one host; read-blocks, an
# rpc client (with the rpc server on the lender holding the controller) and integrity reading
# it back on others, every byte compared.
set -euo pipefail
. "${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}/tests/lib/fixture.sh"
fx_init sisci
fx_cleanup '[ -z "${server:-}" ] || kill "$server"'
build=$(cd "$NTBLEND_BIN/.." && pwd)
# The snapshot sits in shared/ beside the clone (CI), or beside the tree of work trees.
snapshot="${NTBLEND_LIBNVM:-}"
for d in "$NTBLEND_SRC/../shared" "$NTBLEND_SRC/../../shared"; do
  [ -z "$snapshot" ] && [ -f "$d/external/libnvm-da5aade.tar.gz" ] && snapshot="$d/external/libnvm-da5aade.tar.gz"
done
# Each example gets a minute: a hang fails the test here, with the fabric brought down.
on() { local h=$1; shift; timeout -k 5 60 ntblend --fabric "$fabric" run --host "$h" -- "${san[@]}" "$@"; }
server=""
if [ ! -f "${snapshot:-}" ]; then
  echo "SKIP: no libnvm snapshot at $snapshot (set NTBLEND_LIBNVM)"; exit 77
fi

# ---- the prefix, laid out as a DIS install
prefix="$build/sisci-prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
for f in include/sisci_api.h include/sisci_types.h include/sisci_error.h include/dis/dis_types.h \
         lib64/libsisci.so lib/libsisci.so lib/libntblend.so; do
  [ -e "$prefix/$f" ] || fail "the prefix has no $f"
done

# ---- libnvm from the snapshot, unchanged, built against the prefix
src="$build/libnvm/src" obj="$build/libnvm/build"
if [ ! -f "$src/CMakeLists.txt" ]; then
  mkdir -p "$src" && tar xzf "$snapshot" -C "$src" --strip-components=1
fi
# A sanitized libsisci needs AddressSanitizer's runtime loaded first: preload it into libnvm's
# programs, which are built as they are. What the sanitizers check is ntblend's code, not
# libnvm's (whose examples read past their own arrays), and new allocations are not filled:
# libnvm's rpc reads a field it never sets (struct local_intr's adapter), 0 on a fresh page.
san=()
if grep -q "^NTBLEND_SANITIZE:BOOL=ON" "$build/CMakeCache.txt"; then
  asan=$(cc -print-file-name=libasan.so)
  [ -f "$asan" ] || fail "no libasan.so to preload ($asan)"
  san=(env "LD_PRELOAD=$asan" "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}max_malloc_fill_size=0")
fi
# Debug: its examples wait for each other's counters in plain loops (integrity's
# `while (queues[0].counter < commands);`) that -O2 turns into endless ones.
cmake -S "$src" -B "$obj" -DDIS="$prefix" -Dno_cuda=true -DCMAKE_BUILD_TYPE=Debug >"$work/cfg.log" 2>&1 \
  || fail "libnvm does not configure: $(tail -20 "$work/cfg.log")"
grep -q "Using DIS library $prefix/lib64/libsisci.so" "$work/cfg.log" || fail "libnvm did not find libsisci: $(cat "$work/cfg.log")"
cmake --build "$obj" -j2 --target libnvm identify-smartio read-blocks-smartio integrity-smartio \
  rpc-server rpc-identify rpc-dd >"$work/build.log" 2>&1 || fail "libnvm does not build: $(tail -30 "$work/build.log")"
bin="$obj/bin"

# ---- the fabric: smartio3 (NVMe in host a), its NVMe allocating every queue (libnvm's
# examples create queue 2 after asking for one, as real controllers allow)
sed 's|^type = nvme$|type = nvme\nalloc_all = 1|' "$NTBLEND_SRC/examples/topologies/smartio3.ini" >"$work/topo.ini"
n up "$work/topo.ini" >/dev/null
n device add nvme0 >/dev/null
fdid=40001 # the lender's node id (4) << 16 | nvme0's device id + 1

# a wrong device id is refused with SISCI's word for it
out=$(on b "$bin/nvm-identify" --ctrl=90001 2>&1) && fail "identify of no device succeeded: $out"
grep -q "No such device" <<<"$out" || fail "identify, no device: $out"

# identify from host b: the controller over the NTB
out=$(on b "$bin/nvm-identify" --ctrl=$fdid 2>&1) || fail "identify: $out"
grep -q "Model Number *: ntblend emulated NVMe" <<<"$out" || fail "identify: $out"

# integrity from host c: a file written through two queues
head -c 300000 /dev/urandom >"$work/file.bin"
out=$(on c "$bin/nvm-integrity-util" --ctrl=0x$fdid -q 2 "$work/file.bin" 2>&1) || fail "integrity write: $out"
# read-blocks from host b reads it back. (Not --write: read-blocks then reads in a second
# phase whose completion count starts from the first's, a race of its own that can hang it.)
out=$(on b "$bin/nvm-read-blocks" --ctrl=$fdid --blocks=74 --output="$work/out.bin" 2>&1) \
  || fail "read-blocks: $out"
cmp -n 300000 "$work/file.bin" "$work/out.bin" || fail "read-blocks read back other data"

# the rpc server on host a (the lender) owns the controller; clients on b and c share it
on a "$bin/nvm-rpc-server" --ctrl=$fdid >"$work/server.log" 2>&1 &
server=$!
# The server says nothing once it serves: ask until it answers (a minute, for a busy machine).
deadline=$((SECONDS + 60))
until out=$(on c "$bin/nvm-rpc-identify" --ctrl=$fdid 2>&1) || [ $SECONDS -ge $deadline ]; do
  kill -0 "$server" 2>/dev/null || fail "the rpc server ended: $(cat "$work/server.log")"
  sleep 0.2
done
grep -q "Serial Number *: NTB" <<<"$out" || fail "rpc-identify on c: $out $(cat "$work/server.log")"
# what integrity wrote from c, read by an rpc client on c and by integrity on b, while the
# server holds the controller
on c "$bin/nvm-rpc-dd" --ctrl=$fdid --qn=3 --count=74 --offset=0 >"$work/dd.bin" 2>"$work/dd.err" \
  || fail "rpc-dd on c: $(cat "$work/dd.err")"
cmp -n 300000 "$work/file.bin" "$work/dd.bin" || fail "rpc-dd on c read other data than integrity wrote"
out=$(on b "$bin/nvm-integrity-util" --ctrl=0x$fdid --read=300000 "$work/back.bin" 2>&1) || fail "integrity read: $out"
cmp "$work/file.bin" "$work/back.bin" || fail "integrity read back other data"

kill "$server"
wait "$server" 2>/dev/null || true
server=""
echo "libnvm against ntblend's SISCI: identify, integrity, read-blocks, rpc (server on a, clients on b, c): all verified"
