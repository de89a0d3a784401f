#!/usr/bin/env bash
# ntblend-nvmefs: a borrowed NVMe's namespaces as files through FUSE, used by unmodified
# programs (dd, cmp, fio) on the borrowing host: aligned and unaligned I/O, the end of the
# namespace, fsync; unmounting (fusermount3 -u, SIGTERM, --daemon) returns the device; a bad
# device name is refused. Skips (77) without ntblend-nvmefs, a usable /dev/fuse or fusermount3.
set -euo pipefail
skip() { echo "SKIP: $*"; exit 77; }
command -v ntblend-nvmefs >/dev/null || skip "ntblend-nvmefs was not built (needs libfuse3-dev)"
command -v fusermount3 >/dev/null || skip "fusermount3 is missing (Debian package fuse3)"
[ -c /dev/fuse ] || skip "/dev/fuse is missing"
{ exec 3<>/dev/fuse; } 2>/dev/null || skip "/dev/fuse cannot be opened by $(id -un)"
exec 3>&-

export NTBLEND_FABRIC="nvmefs-t-$$"
n() { ntblend "$@"; }
tmp=$(mktemp -d /tmp/test_nvmefs.XXXXXX)
mnt=$tmp/mnt
mkdir "$mnt"
pid=""
cleanup() {
  fusermount3 -u -z "$mnt" 2>/dev/null || true
  [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  n down >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [ -s "$tmp/log" ] && sed 's/^/  nvmefs: /' "$tmp/log" >&2; exit 1; }
mounted() { grep -q " $mnt fuse" /proc/self/mounts; }
# The device is lent out and nobody borrows it.
returned() { grep -Eq "nvme0 .* yes +-$" <<<"$(n device list)"; }

# Mounts in the foreground as a background job ($pid: the program itself, as ntblend run
# execs it; not a shell function, which would put a subshell in between), waits for the files.
mount_fg() {
  ntblend run --host b -- ntblend-nvmefs "$@" nvme0 "$mnt" 2>"$tmp/log" &
  pid=$!
  for _ in $(seq 200); do
    mounted && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  grep -q "cannot mount" "$tmp/log" && skip "FUSE mounts are not allowed here: $(cat "$tmp/log")"
  fail "no mount after 10 s"
}

# Waits for the file system process to end by itself; its exit status must be 0.
wait_exit() {
  local rc=0
  for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  kill -0 "$pid" 2>/dev/null && fail "ntblend-nvmefs still runs after $1"
  wait "$pid" || rc=$?
  pid=""
  [ $rc -eq 0 ] || fail "ntblend-nvmefs exited with $rc after $1"
  mounted && fail "$mnt still mounted after $1"
  returned || fail "nvme0 not returned after $1: $(n device list)"
}

n up "$NTBLEND_SRC/examples/topologies/smartio3.ini" >/dev/null
n device add nvme0 >/dev/null

# --- mount on b, two worker threads ---------------------------------------------------------
mount_fg --threads 2
[ "$(ls "$mnt")" = "$(printf 'info\nns1')" ] || fail "files: $(ls "$mnt")"
[ "$(stat -c %s "$mnt/ns1")" = 1073741824 ] || fail "ns1 size: $(stat -c %s "$mnt/ns1")"
[ "$(stat -c %a "$mnt/ns1")" = 600 ] || fail "ns1 mode: $(stat -c %a "$mnt/ns1")"
grep -q "^ns1: block_size 4096 blocks 262144" "$mnt/info" || fail "info: $(cat "$mnt/info")"
grep -q "^model: " "$mnt/info" || fail "info has no model"
grep -Eq "nvme0 .* exclusive +b$" <<<"$(n device list)" || fail "nvme0 not borrowed by b"

# 8 MiB at 64 MiB (beyond what fio uses below), O_DIRECT both ways, flushed (fsync).
head -c 8M /dev/urandom >"$tmp/rand"
dd if="$tmp/rand" of="$mnt/ns1" bs=1M seek=64 oflag=direct conv=notrunc,fsync status=none \
  || fail "dd write"
dd if="$mnt/ns1" of="$tmp/back" bs=1M skip=64 count=8 iflag=direct status=none || fail "dd read"
cmp "$tmp/rand" "$tmp/back" || fail "8 MiB read back differ"

# 1000 bytes at 12345 (inside blocks 3 and 4): the bytes around them survive.
head -c 16384 /dev/urandom >"$tmp/around"
dd if="$tmp/around" of="$mnt/ns1" bs=4k seek=2 conv=notrunc status=none || fail "dd around"
head -c 1000 /dev/urandom >"$tmp/small"
dd if="$tmp/small" of="$mnt/ns1" bs=1000 seek=12345 oflag=seek_bytes conv=notrunc status=none \
  || fail "unaligned dd write"
cp "$tmp/around" "$tmp/expect"
dd if="$tmp/small" of="$tmp/expect" bs=1000 seek=$((12345 - 8192)) oflag=seek_bytes \
  conv=notrunc status=none
cmp -n 16384 -i 8192:0 "$mnt/ns1" "$tmp/expect" || fail "unaligned write"
# An unaligned read through cmp's own buffer sizes, and a 7-byte one.
cmp -n 1000 -i 0:12345 "$tmp/small" "$mnt/ns1" || fail "unaligned read"
[ "$(dd if="$mnt/ns1" bs=1 skip=12345 count=7 status=none | od -An -tx1)" = \
  "$(head -c 7 "$tmp/small" | od -An -tx1)" ] || fail "7-byte read"

# The end: reads come back short, writes past it fail with ENOSPC.
[ "$(dd if="$mnt/ns1" bs=4k skip=262143 count=4 status=none | wc -c)" = 4096 ] \
  || fail "read across the end is not short"
if dd if=/dev/zero of="$mnt/ns1" bs=4k seek=262144 count=1 conv=notrunc 2>"$tmp/err"; then
  fail "a write past the end succeeded"
fi
grep -q "No space left on device" "$tmp/err" || fail "write past the end: $(cat "$tmp/err")"
if truncate -s 1M "$mnt/ns1" 2>/dev/null; then fail "truncate succeeded"; fi

if command -v fio >/dev/null; then
  # In $tmp: fio leaves its verify state file in the working directory.
  (cd "$tmp" && fio --name=t --filename="$mnt/ns1" --ioengine=psync --direct=1 --rw=randrw --bs=4k \
    --size=16m --verify=crc32c --runtime=3) >"$tmp/fio" 2>&1 || { cat "$tmp/fio" >&2; fail "fio"; }
  grep -q "err= 0" "$tmp/fio" || { cat "$tmp/fio" >&2; fail "fio reported errors"; }
else
  echo "note: fio is not installed; its part is left out"
fi

fusermount3 -u "$mnt"
wait_exit "fusermount3 -u"
grep -q "ntblend-nvmefs:" "$tmp/log" && fail "messages from a clean run: $(cat "$tmp/log")"

# --- again, one thread, submission queues in b's RAM: the data is still there; SIGTERM -------
mount_fg --threads 1 --sq local
dd if="$mnt/ns1" of="$tmp/back" bs=1M skip=64 count=8 iflag=direct status=none || fail "dd read 2"
cmp "$tmp/rand" "$tmp/back" || fail "data lost across unmount and mount"
kill -TERM "$pid"
wait_exit "SIGTERM"

# --- --daemon: returns once mounted ---------------------------------------------------------
n run --host b -- ntblend-nvmefs --daemon nvme0 "$mnt" 2>"$tmp/log" || fail "--daemon: exit $?"
mounted || fail "--daemon returned before the mount was there"
cmp -n 1000 -i 0:12345 "$tmp/small" "$mnt/ns1" || fail "read through the daemon's mount"
fusermount3 -u "$mnt"
for _ in $(seq 200); do returned && break; sleep 0.05; done
returned || fail "nvme0 not returned after the daemon's unmount"

# --- ntblend nvme unmount: returns once the device is back ----------------------------------
n run --host b -- ntblend-nvmefs --daemon nvme0 "$mnt" 2>"$tmp/log" || fail "--daemon: exit $?"
grep -Eq " $mnt .* - fuse.nvmefs ntblend:nvme0:[0-9]+ " /proc/self/mountinfo || fail "no nvmefs mount in mountinfo"
out=$(n nvme unmount "$mnt") || fail "nvme unmount: $out"
grep -q "unmounted $mnt: nvme0 is returned" <<<"$out" || fail "nvme unmount said: $out"
mounted && fail "$mnt still mounted after nvme unmount"
returned || fail "nvme0 not returned when nvme unmount came back"
err=$(n nvme unmount "$mnt" 2>&1) && fail "unmounting nothing succeeded"
grep -q "nothing is mounted at $mnt" <<<"$err" || fail "unmount of nothing: $err"
err=$(n nvme unmount /dev 2>&1) && fail "unmounting a non-nvmefs mount succeeded"
grep -q "/dev is not an ntblend NVMe mount" <<<"$err" || fail "unmount of /dev: $err"

# --- a bad device name: a clear message, no mount -------------------------------------------
for mode in --foreground --daemon; do
  rc=0
  n run --host b -- ntblend-nvmefs $mode nope "$mnt" 2>"$tmp/err" || rc=$?
  [ $rc -ne 0 ] || fail "a bad device name was accepted ($mode)"
  grep -q "cannot open nope: no device 'nope'" "$tmp/err" || fail "bad device: $(cat "$tmp/err")"
  mounted && fail "mounted for a bad device"
done
rc=0
ntblend-nvmefs nvme0 "$tmp/none" 2>"$tmp/err" || rc=$?
[ $rc -ne 0 ] && grep -q "not a directory" "$tmp/err" || fail "missing DIR: $rc $(cat "$tmp/err")"
echo "ok"
