# The shell tests' fixture (sourced by tests/system/*.sh; the C tests have tests/lib/fixture.h):
# a fabric of the test's own with the CLI on it, a work directory, and one clean-up that runs
# however the test ends — at its end, on a failure, or stopped by SIGTERM from its guard
# (tests/CMakeLists.txt). The clean-up runs what the test added with fx_cleanup (last added,
# first run), stops the test's background jobs, takes the fabric down and removes the work
# directory and the fabric's NVMe directory, so that no fabric, agent, process or /dev/shm
# file is left behind.
#
#   set -euo pipefail
#   . "${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}/tests/lib/fixture.sh"
#   fx_init lend                     # $fabric is t-lend-PID, $work a new directory
#   n up "$NTBLEND_SRC/examples/topologies/smartio3.ini" >/dev/null
#   n device lend nvme0 --to b >/dev/null || fail "could not lend nvme0"
#
# A test that must name its fabric otherwise sets $fabric before fx_init.

fx_cleanups=()

fx_shm=""

# fx_init NAME [--own-shm]: the fabric's name (t-NAME-PID unless $fabric is set), the work
# directory, and the clean-up on exit. With --own-shm, every fabric the test or what it runs
# boots keeps its shared memory in a directory of the test's own (NTBLEND_SHM_DIR), so that
# "nothing is left up" can be checked there alone while other suites run; the directory goes
# after the fabric.
fx_init() {
  fabric=${fabric:-t-$1-$$}
  work=$(mktemp -d "${TMPDIR:-/tmp}/ntblend-$1.XXXXXX")
  if [ "${2:-}" = --own-shm ]; then
    fx_shm=/dev/shm/t-$1-$$
    mkdir -p "$fx_shm"
    export NTBLEND_SHM_DIR=$fx_shm
  fi
  trap fx_exit EXIT
}

# fx_cleanup COMMAND: run COMMAND (eval'd; its failure is ignored) when the test ends, before
# the fabric goes down.
fx_cleanup() { fx_cleanups+=("$1"); }

fx_exit() {
  local i
  for ((i = ${#fx_cleanups[@]} - 1; i >= 0; i--)); do
    eval "${fx_cleanups[i]}" >/dev/null 2>&1 || true
  done
  # shellcheck disable=SC2046
  kill $(jobs -p) 2>/dev/null || true
  n down >/dev/null 2>&1 || true
  # `down` removes the NVMe models' images; what else is in the fabric's directory goes too.
  rm -rf "$work" ${fx_shm:+"$fx_shm"}
  [ -z "$fabric" ] || rm -rf "${NTBLEND_NVME_DIR:-/var/tmp/ntblend}/$fabric"
}

# n ARGS...: the CLI on the test's fabric (the build's, when NTBLEND_BIN names it).
n() { "${NTBLEND_BIN:+$NTBLEND_BIN/}ntblend" --fabric "$fabric" "$@"; }

fail() { echo "FAIL: $*" >&2; exit 1; }

# expect_fail COMMAND...: COMMAND fails (its output is not shown).
expect_fail() { if "$@" >/dev/null 2>&1; then fail "should have failed: $*"; fi; }

# expect_rc RC COMMAND...: COMMAND exits with RC (its output is not shown).
expect_rc() {
  local want=$1 rc=0
  shift
  "$@" >/dev/null 2>&1 || rc=$?
  [ "$rc" -eq "$want" ] || fail "exit $rc, expected $want: $*"
}

# wait_for CONDITION MESSAGE [STEPS]: CONDITION (eval'd) holds within STEPS (200) checks 50 ms
# apart, else the test fails with MESSAGE.
wait_for() {
  for _ in $(seq "${3:-200}"); do eval "$1" && return 0; sleep 0.05; done
  fail "$2"
}
