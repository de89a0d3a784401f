# The multicast part of scripts/chaos.sh (sourced; its functions run inside run_fabric and use
# its n, fab, dir, kind, hosts and record). On a fabric with a switch: a kept group "chaos",
# a sender on the first host (its DMA engine writes records into the group, tools/chaos_mcast.c)
# and a member on every other host, which checks live that its buffer holds nothing torn,
# foreign or never written. Links flap and hosts crash under them; afterwards every member must
# receive again, every one that is gone must have left the group, and no member may have seen
# a bad record.

mc_on=0
declare -a mc_pid=()

mc_start_one() { # index into hosts: 0 the sender, others members
  local h=${hosts[$1]}
  if [ "$1" = 0 ]; then
    (exec ntblend --fabric "$fab" run --host "$h" -- chaos_mcast sender --group chaos \
       --state "$dir/mcast-sender.state") >>"$dir/mcast-sender.log" 2>&1 &
  else
    (exec ntblend --fabric "$fab" run --host "$h" -- chaos_mcast member --group chaos \
       --state "$dir/mcast$1.state" --sender-state "$dir/mcast-sender.state") >>"$dir/mcast$1.log" 2>&1 &
  fi
  mc_pid[$1]=$!
}

mc_start() {
  mc_on=0
  mc_pid=()
  [ "$(n status --json | jq '.switches | length')" -gt 0 ] || return 0
  n mcast create chaos --size 64K >>"$dir/faults.log" 2>&1 || { record "$kind" "multicast group" fail "ntblend mcast create failed"; return 0; }
  mc_on=1
  rm -f "$dir"/mcast*.state
  local i
  for ((i = 1; i < ${#hosts[@]}; i++)); do mc_start_one "$i"; done
  sleep 0.3
  mc_start_one 0
}

mc_restart_on() { # host $1 crashed and is back: its multicast processes died with it
  [ $mc_on = 1 ] || return 0
  local i
  for ((i = 0; i < ${#hosts[@]}; i++)); do
    [ "${hosts[$i]}" = "$1" ] || continue
    reap "${mc_pid[$i]}" "multicast process $i" "$1"
    mc_start_one "$i"
  done
}

mc_field() { sed -n "s/^chaos_mcast $2 \([0-9]*\)$/\1/p" "$1" 2>/dev/null; }

mc_recovered() { # after the last fault: every member sees records written after it
  [ $mc_on = 1 ] || return 0
  local bound i ok=1 s
  bound=$(mc_field "$dir/mcast-sender.state" bound)
  for ((i = 1; i < ${#hosts[@]}; i++)); do
    local got=0
    for _ in $(seq 150); do
      s=$(mc_field "$dir/mcast$i.state" seen)
      [ "${s:-0}" -gt "${bound:-0}" ] && { got=1; break; }
      sleep 0.1
    done
    [ $got = 1 ] || { ok=0; record "$kind" "multicast member $i recovers" fail "member on ${hosts[$i]} saw nothing past record ${bound:-0} 15 s after the last fault: $(tail -2 "$dir/mcast$i.log" | tr '\n' ' ')"; }
  done
  [ $ok = 1 ] && record "$kind" "multicast members recover" pass "all $(( ${#hosts[@]} - 1 )) members received records written after the last fault"
}

mc_stop() { # stop them (stop_pid) and check what must hold
  [ $mc_on = 1 ] || return 0
  local i hung=0 bad members
  for ((i = 0; i < ${#hosts[@]}; i++)); do stop_pid "${mc_pid[$i]}" "multicast process $i" || hung=1; done
  bad=$(grep -h '^WRONG:' "$dir"/mcast*.log 2>/dev/null | head -3 | tr '\n' ' ')
  if [ -z "$bad" ]; then
    record "$kind" "multicast data" pass "no member saw a torn, foreign or never-written record (sender's bound $(mc_field "$dir/mcast-sender.state" bound))"
  else
    record "$kind" "multicast data" fail "$bad"
  fi
  # Every member left (SIGTERM) or went with its process or host: nobody is subscribed, nothing
  # sends, and the group goes.
  members=$(n mcast list --json | jq '[.[] | select(.name == "chaos") | .members[]] | length')
  local senders; senders=$(n mcast list --json | jq '[.[] | select(.name == "chaos") | .senders] | add // 0')
  if [ "$members" = 0 ] && [ "$senders" = 0 ] && n mcast remove chaos >>"$dir/faults.log" 2>&1; then
    record "$kind" "multicast group at rest" pass "no member and no sender left; the group removed"
  else
    record "$kind" "multicast group at rest" fail "$members member(s) and $senders sender(s) left in group chaos: $(n mcast list | tr '\n' ' ')"
  fi
}
