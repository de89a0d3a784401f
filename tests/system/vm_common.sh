# What the VM tests share (sourced), on the fixture of every shell test (tests/lib/fixture.sh:
# the fabric, `n`, $work, the clean-up): a failure that shows the guest's console, waiting,
# expected errors, what the fabric holds. The test sets fabric first, vm_name (whose console
# and log a failure shows), and dir (the fabric's directory) once the fabric is up.
. "${NTBLEND_SRC:?set NTBLEND_SRC to the source tree}/tests/lib/fixture.sh"
fx_init vm
dir=""
fail() {
  echo "FAIL: $*" >&2
  for f in console.log log; do
    [ -f "$dir/vm.$vm_name.$f" ] && sed "s/^/  vm.$vm_name.$f: /" "$dir/vm.$vm_name.$f" >&2
  done
  exit 1
}
# wait_for CONDITION MESSAGE [TENTHS]: CONDITION (eval'd) holds within TENTHS tenths of a second.
wait_for() { for _ in $(seq "${3:-600}"); do eval "$1" && return 0; sleep 0.1; done; eval "fail \"$2\""; }
# expect_err WANT CMD...: CMD fails and says WANT.
expect_err() {
  local want=$1 out; shift
  out=$("$@" 2>&1) && fail "'$*' succeeded: $out"
  grep -qF -- "$want" <<<"$out" || fail "'$*' said: $out (wanted: $want)"
}
# What the fabric holds: LUT entries (but the agents' mailbox routes) and requester IDs in use per
# adapter, IOMMU mappings per host.
held() { n status --json | jq -c '[.adapters[] | [.lut.used - .lut_agent, .requester_ids.used]], [.hosts[].iommu_maps]'; }
