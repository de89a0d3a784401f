#!/usr/bin/env bash
# Chaos run: boots fabrics, runs workloads that check their own data, injects faults on a
# schedule drawn from a seed, then heals everything and checks what must hold afterwards.
#
# Usage: scripts/chaos.sh [--seed N] [--duration SECONDS]
#                         [--fabric switched|ring|multipath|both|all]
#                         [--json FILE] [--logs DIR] [--bin DIR]
#   --seed N         the fault schedule (same seed, same schedule; default: from the clock,
#                    printed so a failing run can be replayed)
#   --duration S     seconds of faults per fabric (default 60)
#   --fabric K       switched (examples/topologies/smartio3.ini: three hosts behind a switch),
#                    ring (ring5.ini: five hosts, no switch), multipath (two-paths.ini: three
#                    hosts, each with two adapters on two switches), both (switched and ring)
#                    or all three (default)
#   --json FILE      the summary, the schedule and every invariant as JSON
#   --logs DIR       keep workload logs, states and dumps there (default: a temporary dir,
#                    removed when everything passed)
#   --bin DIR        ntblend's build/bin (default: build/bin of this tree)
#
# Workloads: on every host a segment owner, and on its neighbour a writer of numbered,
# checksummed records in sequence-checked batches (tools/chaos_seg.c). Where the topology has
# an NVMe (the switched one): its manager on the NVMe's host and, on every other host, a
# client writing and reading back blocks of its own range (tools/chaos_nvme.c); the NVMe keeps
# its namespace in a file under the logs (backing=). Where it has an accelerator (the switched
# one): it is lent to another host (Device Lending), where a driver (tools/chaos_accel.c,
# include/ntblend/pci.h only) keeps copying data through it and checking it.
# Faults: link flaps (50-300 ms), link cuts (2-4 s), host kill and restart, agent kill
# (the host is then restarted), workload process kill (restarted); with an NVMe also an NVMe
# client killed (restarted) and its manager killed (restarted); with a lent accelerator also
# its driver killed (restarted) and the device reclaimed while in use (then lent again); with
# a second accelerator, a VM (an emulated guest, docs/vm.md) started on a random host with it,
# which its guest takes (Bus Master), then killed or stopped (a host kill may end it first).
# Invariants: every acknowledged record is in the owner's segment, intact, and nothing is
# there that was never written (checked live by the owner every 10 ms, and at the end); every
# acknowledged (written and flushed) NVMe block holds what was acknowledged or a later attempted
# write, read through the device and in the namespace file, and a failure was always an error,
# never wrong data; every writer and client recovers once the fabric is whole; every process
# ends within 10 s of being asked; the manager has reclaimed every queue pair; every adapter's
# LUT and requester-ID use and every host's IOMMU mappings are back to what they were before
# the workloads started; the lent device's driver never saw wrong data from a copy the device
# completed, reported every failure as an error, never took longer than its bound for a
# round, and made progress once the fabric was whole; the borrower's and lender's PCIe trees
# are as before the lending once the device is reclaimed; every VM is gone, with all it held.
# On the multipath fabric also: whenever a cable is out, the agent of the host it belongs to
# still answers every other host (over the other path), and no NVMe client reports a failed
# command while one cable is out (libntbnvme fails over to the other path, docs/multipath.md).
# Where the topology has a switch: a multicast group with a sender's DMA engine writing records
# into it and a member on every other host checking them live (scripts/chaos-mcast.sh); no
# member may see a torn, foreign or never-written record, every member receives again once the
# fabric is whole, and no member or sender is left in the group at the end.
# Then, in a quiet window, an OpenSHMEM job (tools/shmem/chaos_shmem.c, built with oshcc) runs
# on every host of the fabric with oshrun: it must finish within 60 s with correct results.
# Exit status: 0 every invariant held, 1 one failed, 2 usage error.
set -uo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)
. "$src/scripts/chaos-mcast.sh"

me=chaos
usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "$me: $*" >&2; exit 2; }

seed=$(( $(date +%s%N) % 1000000 ))
duration=60
kinds=all
json=""
logs=""
bin="$src/build/bin"
while [ $# -gt 0 ]; do
  case "$1" in
    --seed) seed=${2:-}; shift 2 ;;
    --duration) duration=${2:-}; shift 2 ;;
    --fabric) kinds=${2:-}; shift 2 ;;
    --json) json=${2:-}; shift 2 ;;
    --logs) logs=${2:-}; shift 2 ;;
    --bin) bin=${2:-}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ $seed =~ ^[0-9]{1,9}$ ]] || die "--seed takes a number"
[[ $duration =~ ^[0-9]{1,5}$ ]] && [ "$duration" -ge 5 ] || die "--duration takes seconds, at least 5"
case $kinds in switched|ring|multipath) kinds=("$kinds") ;; both) kinds=(switched ring) ;;
  all) kinds=(switched ring multipath) ;;
  *) die "--fabric is switched, ring, multipath, both or all" ;; esac
command -v jq >/dev/null || die "jq is missing (scripts/install-deps.sh installs it)"
for t in ntblend chaos_seg chaos_nvme chaos_accel chaos_mcast oshcc oshrun; do [ -x "$bin/$t" ] || die "$bin/$t is missing: build first (scripts/build.sh)"; done
export PATH="$bin:$PATH"
keep=1
[ -n "$logs" ] || { logs=$(mktemp -d /tmp/ntblend-chaos.XXXXXX); keep=0; }
mkdir -p "$logs" || die "cannot create $logs"

results=()   # "fabric|invariant|pass|detail"
schedule=()  # "fabric t_ms kind target duration_ms"
failed=0
record() { results+=("$1|$2|$3|$4"); [ "$3" = pass ] || failed=1; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# The OpenSHMEM job, built as any OpenSHMEM program is.
shmem_prog="$logs/chaos_shmem"
oshcc -O2 -o "$shmem_prog" "$src/tools/shmem/chaos_shmem.c" >"$logs/oshcc.log" 2>&1 ||
  die "oshcc could not build tools/shmem/chaos_shmem.c: $(tail -3 "$logs/oshcc.log")"

# ---------------------------------------------------------------- one fabric
run_fabric() {
  local kind=$1 topo fab="chaos-$$-$1"
  case $kind in
    switched) topo=examples/topologies/smartio3.ini ;;
    ring) topo=examples/topologies/ring5.ini ;;
    multipath) topo=examples/topologies/two-paths.ini ;;
  esac
  local dir="$logs/$kind"
  mkdir -p "$dir"
  n() { ntblend --fabric "$fab" "$@"; }
  # A copy of the topology whose NVMe keeps its namespace in a file we can inspect afterwards.
  rm -rf "$dir/nvme"
  sed "s|^type = nvme$|type = nvme\nbacking = $dir/nvme|" "$src/$topo" >"$dir/topology.ini"
  n up "$dir/topology.ini" >"$dir/up.log" 2>&1 || { record "$kind" boot fail "ntblend up failed: $(tail -1 "$dir/up.log")"; return; }
  trap 'n down >/dev/null 2>&1' EXIT

  local st hosts=() nodes=() links=()
  st=$(n status --json)
  mapfile -t hosts < <(jq -r '.hosts[].name' <<<"$st")
  mapfile -t nodes < <(jq -r '.hosts[].node_id' <<<"$st")
  mapfile -t links < <(jq -r '.links[] | "\(.a) \(.b)"' <<<"$st")
  local nh=${#hosts[@]} i h
  tables() { # app LUT entries and requester IDs per adapter, IOMMU mappings per host
    n status --json | jq -c '[[.adapters[] | [.name, .lut.used - .lut_agent, .requester_ids.used]], [.hosts[] | [.name, .iommu_maps]]]'
  }
  # The NVMe, if there is one: lent out by its host, managed there; a client on every other host.
  local nvdev="" nvhost="" nvhosts=()
  read -r nvdev nvhost < <(n nvme status --json | jq -r '.[0] // empty | "\(.device) \(.lender)"')
  if [ -n "$nvdev" ]; then
    n device add "$nvdev" >>"$dir/faults.log" 2>&1 || { record "$kind" boot fail "ntblend device add $nvdev failed"; nvdev=""; }
  fi
  local baseline; baseline=$(tables)
  start_manager() { # (re)start the NVMe's manager; the device may still be busy for a moment
    local k
    for k in $(seq 100); do
      n nvme manager "$nvdev" --host "$nvhost" >>"$dir/manager.out" 2>&1 && return 0
      # After a crash of the lender the device must be lent out again.
      n device add "$nvdev" >>"$dir/manager.out" 2>&1
      sleep 0.1
    done
    record "$kind" "manager restarts" fail "the manager of $nvdev did not start again within 10 s: $(tail -1 "$dir/manager.out")"
    return 1
  }
  local -a npid
  start_nvme_client() { # client $1 on host nvhosts[$1], blocks 4096*$1 .. +1023
    (exec ntblend --fabric "$fab" run --host "${nvhosts[$1]}" -- chaos_nvme client --dev "$nvdev" \
       --state "$dir/nvme$1.state" --first $((4096 * $1)) --count 1024) >>"$dir/nvme$1.log" 2>&1 &
    npid[$1]=$!
  }
  if [ -n "$nvdev" ]; then
    for h in "${hosts[@]}"; do [ "$h" = "$nvhost" ] || nvhosts+=("$h"); done
    start_manager
    for ((i = 0; i < ${#nvhosts[@]}; i++)); do rm -f "$dir/nvme$i.state"; start_nvme_client "$i"; done
  fi
  local nn=${#nvhosts[@]}

  # An accelerator, if there is one (preferably not in the NVMe's host): lent to another host
  # (preferably neither), where a driver keeps copying data through it and checking it.
  local acdev="" achost="" acto="" apid="" trees_before=""
  read -r acdev achost < <(n device list --json | jq -r --arg nv "$nvhost" \
    '[.[] | select(.type == "accel")] | (map(select(.lender != $nv)) + .)[0] // empty | "\(.name) \(.lender)"')
  if [ -n "$acdev" ]; then
    for h in "${hosts[@]}"; do [ "$h" != "$achost" ] && [ "$h" != "$nvhost" ] && { acto=$h; break; }; done
    [ -n "$acto" ] || for h in "${hosts[@]}"; do [ "$h" != "$achost" ] && { acto=$h; break; }; done
    [ -n "$acto" ] || acdev=""
  fi
  trees() { local x; for x in "${hosts[@]}"; do echo "== $x"; n lspci --host "$x"; done; }
  lend_accel() { # lend it (again): after a crash the borrower or lender may take a moment
    local k
    for k in $(seq 100); do
      n device lend "$acdev" --to "$acto" >>"$dir/accel-lend.out" 2>&1 && return 0
      sleep 0.1
    done
    record "$kind" "lent again" fail "$acdev could not be lent to $acto again within 10 s: $(tail -1 "$dir/accel-lend.out")"
    return 1
  }
  start_accel() {
    (exec ntblend --fabric "$fab" run --host "$acto" -- chaos_accel driver --state "$dir/accel.state") \
      >>"$dir/accel.log" 2>&1 &
    apid=$!
  }
  # A second accelerator, for VMs that come and go.
  local vmdev=""
  vmdev=$(n device list --json | jq -r --arg a "$acdev" '[.[] | select(.type == "accel" and .name != $a)][0].name // empty')
  [ -n "$vmdev" ] && { n device add "$vmdev" >>"$dir/faults.log" 2>&1 || vmdev=""; }
  if [ -n "$acdev" ]; then
    trees_before=$(trees)
    rm -f "$dir/accel.state"
    lend_accel && start_accel
  fi

  # Workloads: owner i on host i, its writer on host i+1 (neighbours, also on a ring).
  local -a opid wpid
  # exec all the way down: the pid we keep is the workload's own (ntblend run execs too).
  start_owner() {
    (exec ntblend --fabric "$fab" run --host "${hosts[$1]}" -- chaos_seg owner --id $((100 + $1)) \
       --dump "$dir/owner$1.dump" --state "$dir/writer$1.state") >>"$dir/owner$1.log" 2>&1 &
    opid[$1]=$!
  }
  start_writer() {
    local w=$(( ($1 + 1) % nh ))
    (exec ntblend --fabric "$fab" run --host "${hosts[$w]}" -- chaos_seg writer --node "${nodes[$1]}" \
       --id $((100 + $1)) --state "$dir/writer$1.state" --pause-us 300) >>"$dir/writer$1.log" 2>&1 &
    wpid[$1]=$!
  }
  for ((i = 0; i < nh; i++)); do rm -f "$dir/owner$i.dump" "$dir/writer$i.state"; start_owner "$i"; done
  sleep 0.3
  for ((i = 0; i < nh; i++)); do start_writer "$i"; done
  mc_start

  # The schedule, drawn from the seed before anything runs (so it can be printed and replayed).
  RANDOM=$(( seed + ${#kind} ))
  local t=1000 end=$(( duration * 1000 )) ev=()
  # Shares in percent: flap, cut, host kill, agent kill, writer kill, NVMe client kill, manager
  # kill, lent device's driver kill, lent device reclaimed, a VM started then killed or stopped.
  local kinds_all=(flap cut hostkill agentkill clientkill nvmekill mgrkill drvkill reclaim vm)
  local shares=(35 20 20 10 15 0 0 0 0 0)
  [ -n "$nvdev" ] && shares=(30 15 17 8 10 10 10 0 0 0)
  [ -n "$acdev" ] && shares=(30 15 17 8 10 0 0 10 10 0)
  [ -n "$nvdev" ] && [ -n "$acdev" ] && shares=(26 13 15 7 9 8 8 7 7 0)
  [ -n "$nvdev" ] && [ -n "$acdev" ] && [ -n "$vmdev" ] && shares=(24 12 14 7 8 8 8 7 7 5)
  while [ "$t" -lt "$end" ]; do
    local r=$(( RANDOM % 100 )) k tgt d j cum=0
    for ((j = 0; j < ${#shares[@]}; j++)); do
      cum=$(( cum + shares[j] )); [ $r -lt $cum ] && { k=${kinds_all[$j]}; break; }
    done
    case $k in
      flap) tgt=${links[$(( RANDOM % ${#links[@]} ))]}; d=$(( 50 + RANDOM % 250 )) ;;
      cut) tgt=${links[$(( RANDOM % ${#links[@]} ))]}; d=$(( 2000 + RANDOM % 2000 )) ;;
      hostkill) tgt=${hosts[$(( RANDOM % nh ))]}; d=$(( 1000 + RANDOM % 1000 )) ;;
      agentkill) tgt=${hosts[$(( RANDOM % nh ))]}; d=500 ;;
      clientkill) tgt=$(( RANDOM % nh )); d=300 ;;
      nvmekill) tgt=$(( RANDOM % nn )); d=300 ;;
      mgrkill) tgt=$nvhost; d=500 ;;
      drvkill) tgt=$acto; d=300 ;;
      reclaim) tgt=$acdev; d=$(( 300 + RANDOM % 1200 )) ;;
      vm) tgt=${hosts[$(( RANDOM % nh ))]}; d=$(( 300 + RANDOM % 700 )) ;;
    esac
    ev+=("$t $k $tgt $d")
    schedule+=("$kind $t $k $tgt $d")
    t=$(( t + d + 700 + RANDOM % 1500 ))
  done

  reap() { # pid what host: a process of a crashed host must end (at the latest when it next
    # uses the fabric); never wait for one forever
    local k
    for k in $(seq 100); do kill -0 "$1" 2>/dev/null || { wait "$1" 2>/dev/null; return 0; }; sleep 0.1; done
    kill -9 "$1" 2>/dev/null; wait "$1" 2>/dev/null
    record "$kind" "ends with its host" fail "$2 (pid $1) still ran 10 s after host $3 crashed"
  }
  restart_on() { # restart the workloads that lived on host $1
    local h=$1 j
    for ((j = 0; j < nh; j++)); do
      [ "${hosts[$j]}" = "$h" ] && { reap "${opid[$j]}" "owner $j" "$h"; start_owner "$j"; }
      [ "${hosts[$(( (j + 1) % nh ))]}" = "$h" ] && { reap "${wpid[$j]}" "writer $j" "$h"; start_writer "$j"; }
    done
    for ((j = 0; j < nn; j++)); do
      [ "${nvhosts[$j]}" = "$h" ] && { reap "${npid[$j]}" "NVMe client $j" "$h"; start_nvme_client "$j"; }
    done
    # The lender crashed: its device was reset and its manager died with it.
    [ -n "$nvdev" ] && [ "$h" = "$nvhost" ] && start_manager
    # The accelerator's borrower crashed (its lender took the device back; the driver died
    # with its host) or its lender did (the device left the borrower's tree): lend it again.
    if [ -n "$acdev" ] && [ "$h" = "$acto" ]; then
      reap "$apid" "the lent device's driver" "$h"
      lend_accel; start_accel
    elif [ -n "$acdev" ] && [ "$h" = "$achost" ]; then
      lend_accel
    fi
    mc_restart_on "$h"
    # The VMs' accelerator's lender crashed: it lends it out again.
    [ -n "$vmdev" ] && n device add "$vmdev" >>"$dir/faults.log" 2>&1
  }
  local mp_ok=0 mp_bad=0 mp_last="" mpn_ok=0 mpn_bad=0 mpn_last=""
  nv_errors() { cat "$dir"/nvme*.log 2>/dev/null | grep -c '^client: .* failed: '; }
  second_path() { # cable $1 - $2 is out: the agent of its host still reaches every other host
    local end h o
    for end in "$1" "$2"; do
      [[ $end == *.* ]] || continue
      h=${end%%.*}
      for o in "${hosts[@]}"; do
        [ "$o" = "$h" ] && continue
        if n agent-ping "$h" "$o" >>"$dir/faults.log" 2>&1; then mp_ok=$(( mp_ok + 1 ))
        else mp_bad=$(( mp_bad + 1 )); mp_last="$h to $o with $1 - $2 out"; fi
      done
    done
  }
  local t0; t0=$(now_ms)
  local -A count=()
  for e in "${ev[@]}"; do
    read -r at k a b c <<<"$e"
    local wait_ms=$(( at - ($(now_ms) - t0) ))
    [ $wait_ms -gt 0 ] && sleep "$(awk -v m=$wait_ms 'BEGIN { print m / 1000 }')"
    count[$k]=$(( ${count[$k]:-0} + 1 ))
    case $k in
      flap|cut) # a b = link ends, c = duration
        local nv0=0
        [ "$kind" = multipath ] && [ -n "$nvdev" ] && nv0=$(nv_errors)
        n link down "$a" "$b" >>"$dir/faults.log" 2>&1
        [ "$kind" = multipath ] && second_path "$a" "$b"
        sleep "$(awk -v m="$c" 'BEGIN { print m / 1000 }')"
        n link up "$a" "$b" >>"$dir/faults.log" 2>&1
        if [ "$kind" = multipath ] && [ -n "$nvdev" ]; then # the clients rode the cut out
          local nv1; nv1=$(nv_errors)
          if [ "$nv1" = "$nv0" ]; then mpn_ok=$(( mpn_ok + 1 ))
          else mpn_bad=$(( mpn_bad + 1 )); mpn_last="$((nv1 - nv0)) failed commands while $a - $b was out"; fi
        fi ;;
      hostkill) # a = host, b = duration
        n host kill "$a" >>"$dir/faults.log" 2>&1
        sleep "$(awk -v m="$b" 'BEGIN { print m / 1000 }')"
        n host start "$a" >>"$dir/faults.log" 2>&1 || record "$kind" "host restart" fail "host $a did not come back"
        restart_on "$a" ;;
      agentkill)
        local pid; pid=$(n status --json | jq -r --arg h "$a" '.hosts[] | select(.name == $h) | .agent_pid')
        [ "$pid" -gt 0 ] 2>/dev/null && kill -9 "$pid" 2>/dev/null
        echo "agent of $a (pid $pid) killed" >>"$dir/faults.log"
        sleep 0.5
        # An agent is the host's driver: the host is restarted to get it back.
        n host kill "$a" >>"$dir/faults.log" 2>&1
        n host start "$a" >>"$dir/faults.log" 2>&1 || record "$kind" "host restart" fail "host $a did not come back"
        restart_on "$a" ;;
      clientkill) # a = workload index
        kill -9 "${wpid[$a]}" 2>/dev/null
        wait "${wpid[$a]}" 2>/dev/null
        echo "writer $a killed" >>"$dir/faults.log"
        sleep 0.3
        start_writer "$a" ;;
      nvmekill) # a = NVMe client index
        kill -9 "${npid[$a]}" 2>/dev/null
        wait "${npid[$a]}" 2>/dev/null
        echo "NVMe client $a (host ${nvhosts[$a]}) killed" >>"$dir/faults.log"
        sleep 0.3
        start_nvme_client "$a" ;;
      mgrkill) # a = the manager's host
        local pid; pid=$(n nvme status --json | jq -r '.[0].manager.pid // 0')
        [ "$pid" -gt 0 ] 2>/dev/null && kill -9 "$pid" 2>/dev/null
        echo "manager of $nvdev (pid $pid) killed" >>"$dir/faults.log"
        sleep 0.5
        # Its clients notice (their next request fails) and close; then it can start again.
        start_manager ;;
      drvkill) # a = the borrower
        kill -9 "$apid" 2>/dev/null
        wait "$apid" 2>/dev/null
        echo "driver of $acdev on $acto killed" >>"$dir/faults.log"
        sleep 0.3
        start_accel ;;
      reclaim) # a = the device, b = how long it stays away
        n device reclaim "$acdev" >>"$dir/faults.log" 2>&1
        sleep "$(awk -v m="$b" 'BEGIN { print m / 1000 }')"
        lend_accel ;;
      vm) # a = its host, b = how long it runs; then SIGKILL or vm stop (it may not have
        # started: its host or the device's lender down, a path cut)
        n vm start chaos-vm --host "$a" --mem 64M --guest emulated --device "$vmdev" >>"$dir/faults.log" 2>&1 &&
          n vm cfg chaos-vm "$vmdev" 4 2 6 >>"$dir/faults.log" 2>&1 # Bus Master: the VM takes it
        sleep "$(awk -v m="$b" 'BEGIN { print m / 1000 }')"
        if [ $(( b % 2 )) = 0 ]; then
          local pid; pid=$(n vm list --json | jq -r '.[] | select(.name == "chaos-vm") | .pid')
          [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null && echo "VM chaos-vm (pid $pid) killed" >>"$dir/faults.log"
        else
          n vm stop chaos-vm >>"$dir/faults.log" 2>&1
        fi ;;
    esac
  done

  # Whole again: every writer must make progress in its owner's current segment.
  local epoch recovered=1
  for ((i = 0; i < nh; i++)); do
    local ok=0 first="" s
    for _ in $(seq 150); do
      epoch=$(grep -o 'epoch [0-9a-f]*' "$dir/owner$i.log" | tail -1 | cut -d' ' -f2)
      s=$(cat "$dir/writer$i.state" 2>/dev/null)
      if [ -n "$epoch" ] && [ "${s%% *}" = "$epoch" ]; then
        read -r _ acked _ <<<"$s"
        [ -z "$first" ] && first=$acked
        [ "$acked" -gt "$first" ] && { ok=1; break; }
      fi
      sleep 0.1
    done
    [ $ok = 1 ] || { recovered=0; record "$kind" "writer $i recovers" fail "no progress into owner ${hosts[$i]}'s segment 15 s after the last fault"; }
  done
  [ $recovered = 1 ] && record "$kind" "writers recover" pass "all $nh writers made progress after the last fault"
  nv_batches() { sed -n 's/^chaos_nvme .* batches \([0-9]*\).*/\1/p' "$dir/nvme$1.state" 2>/dev/null | head -1; }
  if [ -n "$nvdev" ]; then
    recovered=1
    for ((i = 0; i < nn; i++)); do
      local ok=0 first="" s
      for _ in $(seq 150); do
        s=$(nv_batches "$i")
        [ -z "$first" ] && first=${s:-0}
        [ "${s:-0}" -gt "$first" ] && { ok=1; break; }
        sleep 0.1
      done
      [ $ok = 1 ] || { recovered=0; record "$kind" "nvme client $i recovers" fail "no block acknowledged on ${nvhosts[$i]} 15 s after the last fault: $(tail -2 "$dir/nvme$i.log" | tr '\n' ' ')"; }
    done
    [ $recovered = 1 ] && record "$kind" "nvme clients recover" pass "all $nn NVMe clients acknowledged writes after the last fault"
  fi

  mc_recovered
  # The lent device's driver: copies succeed again once the fabric is whole.
  ac_field() { sed -n "s/^chaos_accel.* $1 \([0-9]*\).*/\1/p" "$dir/accel.state" 2>/dev/null | head -1; }
  if [ -n "$acdev" ]; then
    local ok=0 first="" s
    for _ in $(seq 150); do
      s=$(ac_field ok)
      [ -z "$first" ] && first=${s:-0}
      [ "${s:-0}" -gt "$first" ] && { ok=1; break; }
      sleep 0.1
    done
    if [ $ok = 1 ]; then record "$kind" "lent device recovers" pass "the driver of $acdev on $acto copied and checked data after the last fault"
    else record "$kind" "lent device recovers" fail "no copy of $acdev on $acto succeeded 15 s after the last fault: $(tail -2 "$dir/accel.log" | tr '\n' ' ')"; fi
  fi

  # Everything ends when asked.
  stop_pid() { # pid what
    kill -TERM "$1" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$1" 2>/dev/null || { wait "$1" 2>/dev/null; return 0; }; sleep 0.1; done
    kill -9 "$1" 2>/dev/null; wait "$1" 2>/dev/null
    record "$kind" "ends when asked" fail "$2 (pid $1) still ran 10 s after SIGTERM"
    return 1
  }
  local hung=0 nstop=$((2 * nh + nn))
  if [ -n "$acdev" ]; then stop_pid "$apid" "the lent device's driver" || hung=1; nstop=$((nstop + 1)); fi
  for ((i = 0; i < nn; i++)); do stop_pid "${npid[$i]}" "NVMe client $i" || hung=1; done
  for ((i = 0; i < nh; i++)); do stop_pid "${wpid[$i]}" "writer $i" || hung=1; done
  for ((i = 0; i < nh; i++)); do stop_pid "${opid[$i]}" "owner $i" || hung=1; done
  [ $hung = 0 ] && record "$kind" "ends when asked" pass "$nstop workload processes ended within 10 s"
  mc_stop

  # The lent device: no completed copy with wrong data, every failure an error, no round past
  # its bound; reclaimed, the trees are as before it was lent (no shadow left behind).
  if [ -n "$acdev" ]; then
    local bad
    bad=$(grep -hE '^(WRONG|HANG):' "$dir/accel.log" | head -3 | tr '\n' ' ')
    if [ -z "$bad" ] && [ -n "$(ac_field rounds)" ]; then
      record "$kind" "lent device copies" pass "$(ac_field rounds) rounds: $(ac_field ok) checked ok, $(ac_field errors) failed with an error, 0 wrong, 0 past the bound (longest $(ac_field longest_ms) ms); probed $(ac_field probes) times, removed $(ac_field removes)"
    else
      record "$kind" "lent device copies" fail "${bad:-no state: $(tail -2 "$dir/accel.log" | tr '\n' ' ')}"
    fi
    n device reclaim "$acdev" >>"$dir/accel-lend.out" 2>&1
    local trees_after=""
    for _ in $(seq 50); do trees_after=$(trees); [ "$trees_after" = "$trees_before" ] && break; sleep 0.1; done
    if [ "$trees_after" = "$trees_before" ]; then
      record "$kind" "trees at baseline" pass "$acdev reclaimed: every host's PCIe tree as before it was lent"
    else
      printf '%s\n' "$trees_before" >"$dir/trees.before"; printf '%s\n' "$trees_after" >"$dir/trees.after"
      record "$kind" "trees at baseline" fail "$(diff "$dir/trees.before" "$dir/trees.after" | grep '^[<>]' | head -3 | tr '\n' ' ')"
    fi
  fi

  # No acknowledged record lost, nothing corrupt.
  for ((i = 0; i < nh; i++)); do
    local out
    if [ ! -s "$dir/owner$i.dump" ]; then
      record "$kind" "data owner$i" fail "owner ${hosts[$i]} left no dump"
      continue
    fi
    out=$(chaos_seg verify --dump "$dir/owner$i.dump" --state "$dir/writer$i.state" 2>&1)
    local rc=$? live
    live=$(grep -h 'LOST:' "$dir/owner$i.log" | head -3 | tr '\n' ' ')
    if [ $rc = 0 ] && [ -z "$live" ]; then
      record "$kind" "data owner$i" pass "$(tail -1 <<<"$out"); $(grep -o '[0-9]* live checks' "$dir/owner$i.log" | awk '{ s += $1 } END { print s + 0 }') live checks clean"
    else
      record "$kind" "data owner$i" fail "$live$(tr '\n' ' ' <<<"$out")"
    fi
  done

  # The NVMe: no client left, every queue pair reclaimed; what the clients saw; the data
  # through the device and, once the manager has shut the controller down, in the file.
  if [ -n "$nvdev" ]; then
    local ms=""
    for _ in $(seq 100); do
      ms=$(n nvme status --json | jq -c '.[0].manager.state // empty | {clients, qpairs, reclaimed_clients, reclaimed_qpairs}')
      [ -n "$ms" ] && [ "$(jq '.clients + .qpairs' <<<"$ms")" = 0 ] && break
      sleep 0.1
    done
    if [ -n "$ms" ] && [ "$(jq '.clients + .qpairs' <<<"$ms")" = 0 ]; then
      record "$kind" "nvme queues reclaimed" pass "0 clients, 0 queue pairs in use; this manager reclaimed $(jq .reclaimed_clients <<<"$ms") clients, $(jq .reclaimed_qpairs <<<"$ms") queue pairs"
    else
      record "$kind" "nvme queues reclaimed" fail "10 s after the clients ended: ${ms:-no manager}"
    fi
    local wrong errs
    wrong=$(grep -hE 'WRONG:|LOST:' "$dir"/nvme*.log | head -3 | tr '\n' ' ')
    errs=$(grep -h '^client: .* failed: ' "$dir"/nvme*.log | sed 's/^client: \([a-z ]*\) failed: \([^(]*[^( ]\).*/\1: \2/' | sort | uniq -c | awk '{ c = $1; $1 = ""; printf "%s%s x%d", s, $0, c; s = "," }')
    if [ -z "$wrong" ]; then
      record "$kind" "nvme live checks" pass "every read (before each write, after each acknowledged one) held what the account allows; errors seen:${errs:- none}"
    else
      record "$kind" "nvme live checks" fail "$wrong"
    fi
    local dout=() 
    for ((i = 0; i < nn; i++)); do
      dout[$i]=$(n run --host "${nvhosts[$i]}" -- chaos_nvme verify --state "$dir/nvme$i.state" --dev "$nvdev" 2>&1)
      dout[$i]="$? ${dout[$i]}"
    done
    n nvme stop "$nvdev" >>"$dir/manager.out" 2>&1 || record "$kind" "manager stops" fail "$(tail -1 "$dir/manager.out")"
    local img="$dir/nvme/$nvdev-ns1.img"
    for ((i = 0; i < nn; i++)); do
      local fout rc
      fout=$(chaos_nvme verify --state "$dir/nvme$i.state" --file "$img" 2>&1); rc=$?
      if [ $rc = 0 ] && [ "${dout[$i]%% *}" = 0 ]; then
        record "$kind" "nvme data ${nvhosts[$i]}" pass "$(tail -1 <<<"$fout") (also read through the device)"
      else
        record "$kind" "nvme data ${nvhosts[$i]}" fail "through the device: $(tr '\n' ' ' <<<"${dout[$i]#* }"); in the file: $(tr '\n' ' ' <<<"$fout")"
      fi
    done
  fi

  # OpenSHMEM in the quiet window: one PE per host, a bounded time, results it checks itself.
  # (During faults a job cannot be expected to hold: the library detects no link or host going
  # down, docs/openshmem.md, so a dropped store would be a wrong result by design.)
  local sout src_rc
  sout=$(SHMEM_SYMMETRIC_SIZE=8M timeout 60 oshrun -np "$nh" --fabric "$fab" "$shmem_prog" 50 2>&1); src_rc=$?
  printf '%s\n' "$sout" >"$dir/shmem.log"
  if [ $src_rc = 0 ] && grep -q '^ok: ' <<<"$sout"; then
    record "$kind" "shmem job" pass "$(grep '^ok: ' <<<"$sout")"
  elif [ $src_rc = 124 ]; then
    record "$kind" "shmem job" fail "did not finish within 60 s: $(tail -2 <<<"$sout" | tr '\n' ' ')"
  else
    record "$kind" "shmem job" fail "exit $src_rc$(grep -q WRONG <<<"$sout" && echo ', WRONG RESULTS'): $(tail -3 <<<"$sout" | tr '\n' ' ')"
  fi

  # No leak: the tables as before the workloads started.
  local after=""
  if [ -n "$vmdev" ]; then
    local vms=1
    for _ in $(seq 100); do vms=$(n vm list --json | jq length); [ "$vms" = 0 ] && break; sleep 0.1; done
    if [ "$vms" = 0 ]; then record "$kind" "VMs returned" pass "${count[vm]:-0} VMs started and ended; none left"
    else record "$kind" "VMs returned" fail "$vms VMs still listed 10 s after the last fault: $(n vm list)"; fi
  fi
  for _ in $(seq 50); do after=$(tables); [ "$after" = "$baseline" ] && break; sleep 0.1; done
  if [ "$after" = "$baseline" ]; then record "$kind" "tables at baseline" pass "LUT, requester-ID and IOMMU use as before"
  else record "$kind" "tables at baseline" fail "before $baseline, after $after"; fi

  local summary=""
  for k in "${kinds_all[@]}"; do summary+="$k=${count[$k]:-0} "; done
  if [ "$kind" = multipath ]; then
    if [ $mp_bad = 0 ]; then record "$kind" "second path" pass "$mp_ok agent pings answered over the other path while a cable was out"
    else record "$kind" "second path" fail "$mp_bad of $(( mp_ok + mp_bad )) agent pings failed while a cable was out (last: $mp_last)"; fi
    if [ -n "$nvdev" ]; then
      if [ $mpn_bad = 0 ]; then record "$kind" "nvme fails over" pass "no NVMe client command failed during $mpn_ok cable pulls"
      else record "$kind" "nvme fails over" fail "NVMe client commands failed during $mpn_bad of $(( mpn_ok + mpn_bad )) cable pulls (last: $mpn_last)"; fi
    fi
  fi
  record "$kind" "faults injected" pass "$summary"
  n status >"$dir/status.txt" 2>&1
  cp "$(jq -r .dir <<<"$st")"/host*.log "$dir/" 2>/dev/null # the agents' logs
  n down >/dev/null 2>&1
  trap - EXIT
}

echo "$me: seed $seed, ${duration} s of faults per fabric (${kinds[*]}); logs in $logs" >&2
for k in "${kinds[@]}"; do run_fabric "$k"; done

printf '%-9s %-22s %-5s %s\n' FABRIC INVARIANT RESULT DETAIL
for r in "${results[@]}"; do
  IFS='|' read -r f inv res det <<<"$r"
  printf '%-9s %-22s %-5s %s\n' "$f" "$inv" "$res" "$det"
done
if [ -n "$json" ]; then
  {
    printf '{"seed": %s, "duration_s": %s, "passed": %s,\n "schedule": [' "$seed" "$duration" "$([ $failed = 0 ] && echo true || echo false)"
    sep=""
    for s in "${schedule[@]}"; do
      read -r f at k rest <<<"$s"
      printf '%s\n  {"fabric": "%s", "at_ms": %s, "fault": "%s", "args": "%s"}' "$sep" "$f" "$at" "$k" "$rest"
      sep=","
    done
    printf '],\n "invariants": ['
    sep=""
    for r in "${results[@]}"; do
      IFS='|' read -r f inv res det <<<"$r"
      printf '%s\n  {"fabric": "%s", "invariant": "%s", "result": "%s", "detail": %s}' "$sep" "$f" "$inv" "$res" "$(jq -Rn --arg d "$det" '$d')"
      sep=","
    done
    printf ']}\n'
  } >"$json"
  jq . "$json" >/dev/null || echo "$me: the JSON written to $json does not parse" >&2
fi
if [ $failed = 0 ]; then
  echo "$me: every invariant held (seed $seed)" >&2
  [ $keep = 1 ] || rm -rf "$logs"
  exit 0
fi
echo "$me: FAILED (seed $seed); replay with: scripts/chaos.sh --seed $seed --duration $duration; logs in $logs" >&2
exit 1
