#!/usr/bin/env bash
# The ntblend CLI driven as a user drives it: boot a fabric, inspect it, break links and
# hosts and watch the effects, run a program on a host, draw the topology, and check that
# mistakes get the documented exit codes and messages. Asserts behaviour, never timing.
# Fabric names carry our pid, so this runs in parallel with other tests (and itself).
set -euo pipefail

NTBLEND_SRC=${NTBLEND_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
if [ -n "${NTBLEND_BIN:-}" ]; then PATH=$NTBLEND_BIN:$PATH; fi
TOPO=$NTBLEND_SRC/examples/topologies
F=t-cli-$$
G=t-cli2-$$
tmp=$(mktemp -d)
unset NTBLEND_FABRIC NTBLEND_HOST

cleanup() {
    ntblend down --fabric "$F" >/dev/null 2>&1 || true
    ntblend down --fabric "$G" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT

step() { echo "--- $*"; }
fail() {
    echo "FAIL: $*" >&2
    for f in out err; do
        [ -s "$tmp/$f" ] && { echo "  $f:"; sed 's/^/  | /' "$tmp/$f"; } >&2
    done
    exit 1
}
# expect RC CMD...: run CMD, keep its stdout/stderr in $tmp/out and $tmp/err, check its status.
expect() {
    local want=$1 rc=0
    shift
    "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    [ "$rc" = "$want" ] || fail "'$*' exited $rc, expected $want"
}
# has FILE REGEX: FILE (out or err) matches the extended regex.
has() { grep -Eq -- "$2" "$tmp/$1" || fail "$1 of the last command does not match /$2/"; }
hasnt() { ! grep -Eq -- "$2" "$tmp/$1" || fail "$1 of the last command matches /$2/"; }

# Fields of the status table: host NAME -> "STATE AGENT-HEALTH".
host_line() {
    awk -v h="$1" '/^HOSTS/ {s = 1; next} /^$/ {s = 0} s && $1 == h {print $5, $7}' "$tmp/out"
}
status_of() { expect 0 ntblend status --fabric "$1"; }

step "help and usage errors"
expect 0 ntblend --help
has out 'usage: ntblend'
# docs/cli.md's command table names every command the CLI has.
[ "$(awk '/^commands:/ {s = 1; next} /^$/ {s = 0} s' "$tmp/out" | wc -l)" -ge 10 ] || fail "--help lists too few commands"
for cmd in $(awk '/^commands:/ {s = 1; next} /^$/ {s = 0} s {print $1}' "$tmp/out"); do
    grep -Eq "^\| \[\`$cmd[ \`]" "$NTBLEND_SRC/docs/cli.md" || fail "docs/cli.md's command table lacks '$cmd'"
done
expect 0 ntblend help up
has out 'ntblend up FILE'
expect 0 ntblend link --help
has out 'link down.up A B'
expect 2 ntblend no-such-command
has err "unknown command 'no-such-command'"
hasnt err 'did you mean'
has err 'usage: ntblend'
expect 2 ntblend stauts
has err "unknown command 'stauts'; did you mean 'status'\?"
expect 2 ntblend help lnk
has err "did you mean 'link'\?"
expect 2 ntblend status --no-such-option
has err "unknown option '--no-such-option'"
expect 2 ntblend --fabric "$F" run -- true
has err 'give --host'

step "up: boots every host"
expect 0 ntblend up "$TOPO/two-hosts.ini" --fabric "$F"
has out "fabric '$F' is up: 2 hosts"
status_of "$F"
[ "$(host_line a)" = "up ok" ] || fail "host a is not 'up ok': $(host_line a)"
[ "$(host_line b)" = "up ok" ] || fail "host b is not 'up ok': $(host_line b)"
has out '^ +a\.ntb0 .*b\.ntb0 up'
has out 'a\.ntb0 --- b\.ntb0 +up'
# The fabric name also comes from the environment.
NTBLEND_FABRIC=$F expect 0 ntblend status
has out "^fabric +$F\$"
has out '^\(columns: ntblend status --help\)$'
grep -q $'\033' "$tmp/out" && fail "status printed escape codes into a pipe"

step "status --help explains every column of the table"
expect 0 ntblend status --help
for col in NODE RAM IOMMU STATE PID AGENT FAULTS LUT REQ-ID 'DB PEND/MSK' DMA PEERS 'PORTS USED' LATENCY; do
    grep -q -- "$col" "$tmp/out" || fail "status --help does not explain $col"
done

step "status --json is one JSON document with the same facts"
expect 0 ntblend --fabric "$F" status --json
for key in fabric topology hosts adapters switches links; do has out "\"$key\": ?"; done
has out "\"fabric\": ?\"$F\""
if perl -MJSON::PP -e 1 2>/dev/null; then
    perl -MJSON::PP -e '
        local $/; my $j = decode_json(<STDIN>);
        my @h = @{$j->{hosts}};
        die "2 hosts expected\n" unless @h == 2;
        for (@h) { die "$_->{name} not up\n" unless $_->{state} eq "up" && $_->{agent_ok}; }
        die "1 link, up, expected\n" unless @{$j->{links}} == 1 && $j->{links}[0]{up};
        die "adapters\n" unless @{$j->{adapters}} == 2 && $j->{adapters}[0]{peers}[0]{up};
    ' <"$tmp/out" || fail "status --json: wrong document"
else
    echo "(perl JSON::PP not available: JSON checked with grep only)"
fi

step "up twice is refused"
expect 1 ntblend up "$TOPO/two-hosts.ini" --fabric "$F"
has err "fabric '$F' is already up \(ntblend down --fabric $F\)"

step "link down: path down, agent ping fails"
expect 0 ntblend --fabric "$F" link down a b
has out 'a\.ntb0 --- b\.ntb0: up -> down'
status_of "$F"
has out 'a\.ntb0 --- b\.ntb0 +down'
has out '^ +a\.ntb0 .*b\.ntb0 down'
expect 1 ntblend --fabric "$F" agent-ping a b
has err 'no path from a to b: link down\?'

step "link up: agent ping works again"
expect 0 ntblend --fabric "$F" link up a.ntb0 b.ntb0
has out 'down -> up'
expect 0 ntblend --fabric "$F" agent-ping a b
has out '^a -> b: round trip [0-9.]+ us'
expect 1 ntblend --fabric "$F" link down a nowhere
has err "no host, adapter or switch named 'nowhere'"

step "host kill: b down, a's peer down"
expect 0 ntblend --fabric "$F" host kill b
status_of "$F"
[ "$(host_line b | cut -d' ' -f1)" = down ] || fail "host b is not down: $(host_line b)"
[ "$(host_line a)" = "up ok" ] || fail "host a should stay up: $(host_line a)"
has out '^ +a\.ntb0 .*b\.ntb0 down'
expect 1 ntblend --fabric "$F" agent-ping a b
expect 1 ntblend --fabric "$F" run --host b -- true
has err 'host b is down; boot it with: ntblend host start b'
expect 1 ntblend --fabric "$F" host kill b
has err 'already down'

step "host start: b up again, agent ping works"
expect 0 ntblend --fabric "$F" host start b
has out 'host b is up'
status_of "$F"
[ "$(host_line b)" = "up ok" ] || fail "host b is not 'up ok' after start: $(host_line b)"
has out '^ +a\.ntb0 .*b\.ntb0 up'
expect 0 ntblend --fabric "$F" agent-ping a b
expect 0 ntblend --fabric "$F" agent-ping b a
expect 1 ntblend --fabric "$F" host start b
has err 'host b is up'

step "host kill: a process of b's earlier life stops when it next uses the fabric"
# The shell holds no handle when b crashes (so nothing ends it then); what it runs afterwards
# belongs to the life that ended and must not work in b's next one.
rm -f "$tmp/ready" "$tmp/go"
ntblend --fabric "$F" run --host b -- sh -c "touch '$tmp/ready'; while [ ! -e '$tmp/go' ]; do sleep 0.05; done; exec ntb_tool port" >"$tmp/out" 2>"$tmp/err" &
p=$!
for _ in $(seq 200); do [ -e "$tmp/ready" ] && break; sleep 0.05; done
ntblend --fabric "$F" host kill b >/dev/null
ntblend --fabric "$F" host start b >/dev/null
touch "$tmp/go"
rc=0; wait $p || rc=$?
[ $rc = 137 ] || fail "a process of b's earlier life ran on after b rebooted (exit $rc)"
has err 'host b went down since process [0-9]+ started on it; the process stops with it'
expect 0 ntblend --fabric "$F" run --host b -- ntb_tool port
has out '^8$'

step "run: environment and exit status"
expect 0 ntblend --fabric "$F" run --host a -- sh -c 'echo $NTBLEND_HOST'
[ "$(cat "$tmp/out")" = a ] || fail "run printed '$(cat "$tmp/out")', expected 'a'"
expect 0 ntblend run --fabric "$F" --host 8 -- sh -c 'echo "$NTBLEND_HOST $NTBLEND_FABRIC"'
[ "$(cat "$tmp/out")" = "b $F" ] || fail "run by node id printed '$(cat "$tmp/out")'"
expect 7 ntblend --fabric "$F" run --host a -- sh -c 'exit 7'
expect 1 ntblend --fabric "$F" run --host nosuchhost -- true
has err "no host named 'nosuchhost'"

step "topology --dot: running fabric and file"
expect 0 ntblend --fabric "$F" link down a b
expect 0 ntblend --fabric "$F" topology --dot
has out '^(di)?graph '
has out '"host:a" \[shape=box, label="a\\nnode 4"'
has out '"host:b" \[shape=box'
has out 'taillabel="a\.ntb0"'
has out 'style=dashed, color=red'
if command -v dot >/dev/null; then
    ntblend --fabric "$F" topology --dot | dot -Tsvg >"$tmp/t.svg" || fail "dot rejected the graph"
    grep -q '<svg' "$tmp/t.svg" || fail "dot produced no SVG"
fi
expect 0 ntblend --fabric "$F" link up a b
expect 0 ntblend topology --dot "$TOPO/four-hosts-switch.ini" --fabric no-such-fabric
has out 'shape=diamond'
hasnt out 'dashed'

step "a bad topology file: exit 1 with FILE:LINE"
bad=$TOPO/bad/syntax.ini
if [ ! -f "$bad" ]; then
    bad=$tmp/syntax.ini
    printf '[host a]\nnode_id = 4\n[host b\n' >"$bad"
fi
expect 1 ntblend up "$bad" --fabric "t-cli-bad-$$"
has err "$(basename "$bad"):[0-9]+: "
expect 1 ntblend status --fabric "t-cli-bad-$$"
has err 'is not up; start it with: ntblend up FILE'
expect 1 ntblend topology --dot "$bad"
has err "$(basename "$bad"):[0-9]+: "
# A device of no known type: the same one message from up and from topology --dot, and
# nothing about where fabrics live (up never got that far).
printf '[host a]\nnode_id = 4\nram = 1G\n[device nvme0]\nhost = a\ntype = nvm\n' >"$tmp/nvm.ini"
expect 1 ntblend up "$tmp/nvm.ini" --fabric "t-cli-bad-$$"
has err "nvm.ini:4: \[device nvme0\]: no model for type 'nvm'"
hasnt err 'NTBLEND_SHM_DIR'
[ "$(grep -c "no model for type" "$tmp/err")" = 1 ] || fail "the type error was printed more than once"
[ ! -e "/dev/shm/ntblend.t-cli-bad-$$" ] || fail "a rejected topology left a fabric directory"
expect 1 ntblend topology --dot "$tmp/nvm.ini"
has err "nvm.ini:4: \[device nvme0\]: no model for type 'nvm'"
hasnt out 'graph'

step "two fabrics at once are independent"
expect 0 ntblend up "$TOPO/four-hosts-switch.ini" --fabric "$G"
has out "fabric '$G' is up: 4 hosts"
expect 0 ntblend --fabric "$G" agent-ping a d
expect 0 ntblend --fabric "$F" link down a b
status_of "$G"
has out 'a\.ntb0 --- sw0 +up'
hasnt out '\<down\>'
expect 0 ntblend --fabric "$G" agent-ping a b
expect 0 ntblend --fabric "$G" link down a sw0
expect 1 ntblend --fabric "$G" agent-ping a c
has err 'no path from a to c'
expect 0 ntblend --fabric "$G" agent-ping b c
status_of "$F"
has out 'a\.ntb0 --- b\.ntb0 +down'
expect 0 ntblend --fabric "$F" link up a b
expect 0 ntblend --fabric "$F" agent-ping a b
expect 0 ntblend down --fabric "$G"
has out "fabric '$G' is down \(4 agents stopped"

step "up --dma-cpus: the DMA engines run on the CPUs given, also after a host restart"
# The engines' threads are named dma<adapter>.<channel>; print their CPU lists, one a line.
engine_cpus() {
    local pid t
    for pid in $(pgrep -f "ntblend-agent --fabric $G --host $1\$"); do
        for t in /proc/"$pid"/task/*; do
            case $(cat "$t/comm") in dma*) awk '/^Cpus_allowed_list/ {print $2}' "$t/status" ;; esac
        done
    done
}
cpu0=$(awk '/^Cpus_allowed_list/ {split($2, a, /[,-]/); print a[1]}' /proc/self/status)
expect 0 ntblend up "$TOPO/four-hosts-switch.ini" --fabric "$G" --dma-cpus "$cpu0"
[ "$(engine_cpus 1 | sort -u)" = "$cpu0" ] || fail "host b's DMA engines run on '$(engine_cpus 1 | sort -u)', not CPU $cpu0"
[ "$(engine_cpus 1 | wc -l)" -ge 1 ] || fail "host b has no DMA engine threads"
status_of "$G"
has out "^dma cpus +$cpu0 "
expect 0 ntblend --fabric "$G" status --json
has out "\"dma_cpus\": ?\"$cpu0\""
expect 0 ntblend --fabric "$G" host kill b
expect 0 ntblend --fabric "$G" host start b
[ "$(engine_cpus 1 | sort -u)" = "$cpu0" ] || fail "after a restart host b's DMA engines run on '$(engine_cpus 1 | sort -u)'"
expect 0 ntblend down --fabric "$G"
expect 0 ntblend up "$TOPO/four-hosts-switch.ini" --fabric "$G"
status_of "$G"
hasnt out '^dma cpus'
expect 0 ntblend down --fabric "$G"
expect 2 ntblend up "$TOPO/four-hosts-switch.ini" --fabric "$G" --dma-cpus 4096
has err "CPU 4096 is not one this machine lets ntblend use \(CPUs: "
expect 2 ntblend up "$TOPO/four-hosts-switch.ini" --fabric "$G" --dma-cpus 1-x
has err "expected CPU numbers and ranges"
expect 1 ntblend status --fabric "$G"
expect 2 ntblend status --fabric "$F" --dma-cpus 0
has err "unknown option '--dma-cpus'"

step "status: in-host switches and expansion chassis ([hostswitch]) and what is below them"
expect 0 ntblend up "$TOPO/chassis.ini" --fabric "$G"
expect 0 ntblend --fabric "$G" status
has out '^IN-HOST SWITCHES \(2\)'
has out '^  cha +a +root +132 ns +460 ns +nvme0, accel0, a\.ntb0$'
has out '^  chc +c +root +132 ns +460 ns +nvme1, accel1$'
expect 0 ntblend --fabric "$G" status --json
jq -e '[.hostswitches[] | {name, host, parent, latency_ns, link_ns, below}] ==
       [{"name": "cha", "host": "a", "parent": null, "latency_ns": 132, "link_ns": 460,
         "below": ["nvme0", "accel0", "a.ntb0"]},
        {"name": "chc", "host": "c", "parent": null, "latency_ns": 132, "link_ns": 460,
         "below": ["nvme1", "accel1"]}]' <"$tmp/out" >/dev/null || fail "status --json: hostswitches"
expect 0 ntblend down --fabric "$G"
expect 0 ntblend up "$TOPO/four-hosts-switch.ini" --fabric "$G"
expect 0 ntblend --fabric "$G" status
hasnt out '^IN-HOST SWITCHES'
expect 0 ntblend down --fabric "$G"

step "down: removes the fabric; twice is an error"
expect 0 ntblend --fabric "$F" down
has out "fabric '$F' is down \(2 agents stopped"
expect 1 ntblend --fabric "$F" status
has err "fabric '$F' is not up; start it with: ntblend up FILE --fabric $F"
expect 1 ntblend --fabric "$F" down
has err 'is not up'

step "down: a fabric of another ntblend version goes with its agents"
expect 0 ntblend --fabric "$F" up "$TOPO/two-hosts.ini"
printf '\x63\x00\x00\x00' | dd of="${NTBLEND_SHM_DIR:-/dev/shm}/ntblend.$F/ctl" bs=1 seek=4 conv=notrunc 2>/dev/null
expect 1 ntblend --fabric "$F" status
has err "from another ntblend version; clear it with: ntblend down --fabric $F"
expect 0 ntblend --fabric "$F" down
has out "another ntblend version's fabric; 2 agents stopped"
! pgrep -f "ntblend-agent --fabric $F " >/dev/null || fail "agents of '$F' still run after down"

step "the first ten minutes: the scripts say what they do, and pipes get no escape codes"
expect 0 bash "$NTBLEND_SRC/scripts/install-deps.sh"
has out '^install-deps: all dependencies present$'
grep -q 'if \[ -t 1 \] && \[ -z "${NO_COLOR:-}" \]' "$NTBLEND_SRC/scripts/demo.sh" \
    || fail "demo.sh colours its headings without checking for a terminal and NO_COLOR"

echo "PASS: test_cli"
