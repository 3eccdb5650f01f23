#!/bin/bash
# The pool (kilnd --pool N, docs/kilnd.md "The pool"): sandboxes spawned by
# the template's zygote ahead of their creates and paused. Shown here: the
# pool fills (paused VMs, listed nowhere, counted against no workspace); a
# create takes one (kiln_pool_takes_total) and the sandbox cannot be told
# from a spawned one: its clock is now's, its hostname its id, its random
# numbers its own (two pooled sandboxes differ), its egress policy the
# create's, and it forks and hibernates; its metering starts at the create,
# not at the spawn; the pool gives members back when creates need the
# room and never makes a create wait, replaces a member whose VMM died; stopping kilnd removes the members,
# and so does a kilnd started after a kill -9. A template whose members
# cannot be made is retried with growing gaps and starves no other.
. "$(dirname "$0")/lib.sh"
have_kvm || { echo "SKIP kilnd_pool: no KVM"; exit 0; }
up=kiln-t84-up
. "$(dirname "$0")/../integration/upstream.sh"
upstream $up kup84
mkdir -p "$T/www" && echo kiln-upstream > "$T/www/index.html"
ip netns exec $up python3 -m http.server 80 --bind 0.0.0.0 --directory "$T/www" >/dev/null 2>&1 &
at_exit "kill $! 2>/dev/null"
for i in $(seq 60); do
	[ "$(curl -s -m 5 http://192.0.2.2/)" = kiln-upstream ] && break
	sleep 0.5
done

build_template minimal || exit 1
start_kilnd --rate 0 --pool 2 --net-pool 2 || exit 1
KEY=$(new_key pool)
at_exit 'for s in $(curl -s -H "Authorization: Bearer $KEY" $URL/v1/sandboxes | python3 -c "import json,sys; [print(s[\"id\"]) for s in json.load(sys.stdin)[\"sandboxes\"]]" 2>/dev/null); do api DELETE /v1/sandboxes/$s; done'

metric() { curl -s "$URL/metrics" | awk -v k="$1" '$1 == k { print $2 }'; }
ready() { local n; n=$(metric 'kiln_pool_ready{template="minimal"}'); echo "${n:-0}"; }
hits() { metric 'kiln_pool_takes_total{result="hit"}'; }
misses() { metric 'kiln_pool_takes_total{result="miss"}'; }
# wait_ready N SECONDS: until at least N are ready; prints how many are.
wait_ready() {
	local i
	for i in $(seq $(( $2 * 4 ))); do
		[ "$(ready)" -ge "$1" ] && break
		sleep 0.25
	done
	ready
}
# vmm_state ID: what its VMM says it is doing (running or paused).
vmm_state() {
	python3 - "$DATA/sandboxes/$1/ctl.sock" <<'EOF'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b'{"cmd":"status"}\n')
print(json.loads(s.makefile().readline()).get("state", "?"))
EOF
}
ex() {   # ex SBX CMD: its stdout, trimmed
	api POST "/v1/sandboxes/$1/exec" "$(python3 -c 'import json,sys; print(json.dumps({"cmd": sys.argv[1]}))' "$2")"
	jget 'j["stdout"].strip()'
}

# ---- filled, paused, nobody's -----------------------------------------------------------------
n=$(wait_ready 1 90)
check pool_fills "kiln_pool_ready{template=\"minimal\"} $n with no create yet (the target is 1 + recent creates)" [ "$n" = 1 ]
member=$(ls "$DATA/sandboxes" 2>/dev/null | head -1)
state=$([ -n "$member" ] && vmm_state "$member")
check pool_member_paused "its VMM ($member) says '$state'" [ "$state" = paused ]
# Its refill yields the CPU to creates and running guests (cgroup.h).
weight() { cat "/sys/fs/cgroup/kiln/$1/cpu.weight" 2>/dev/null; }
w=$(weight "$member")
check pool_member_yields "its cgroup's cpu.weight '$w'" [ "$w" = 1 ]
api GET /v1/sandboxes
check pool_not_listed "GET /v1/sandboxes: $(jget 'len(j["sandboxes"])') sandboxes" [ "$(jget 'len(j["sandboxes"])')" = 0 ]
c=$(metric 'kiln_sandboxes{state="creating"}')
check pool_not_counted "kiln_sandboxes creating $c" [ "$c" = 0 ]

# ---- a create takes it ----------------------------------------------------------------------------
sleep 6	# it waits in the pool: the create must not inherit the time
# The members as the create finds them. More than one directory can be
# there: in two CI runs (a92ccbe, be3ba7c) the create took a member other
# than the first listed (hits 1 both times); whether the other was a fill
# under way or a member being replaced is not known. The create must take
# one of those there, not spawn a new one.
members=" $(ls "$DATA/sandboxes" 2>/dev/null | tr '\n' ' ')"
t_create=$(date +%s%N)
create_sandbox '{"template":"minimal"}'
A=$SBX
ok=; [ -n "$A" ] && [[ $members == *" $A "* ]] && [ "$(hits)" = 1 ] && ok=1
check pool_hit "created $A ($(jget 'j.get("ready_ms")') ms), one of the members there at the create:$members(first seen: $member); hits $(hits)" [ -n "$ok" ]
w=$(weight "$A")
check pool_taken_full_share "the sandbox's cgroup's cpu.weight '$w'" [ "$w" = 100 ]
got=$(ex "$A" 'echo $(( $(date +%s) ))')
now=$(date +%s)
ok=; [ -n "$got" ] && [ $(( now - got )) -le 3 ] && [ $(( got - now )) -le 3 ] && ok=1
check pool_clock "guest $got, host $now" [ -n "$ok" ]
got=$(ex "$A" hostname)
check pool_hostname "hostname '$got'" [ "$got" = "$A" ]
api GET "/v1/sandboxes/$A"
run=$(jget 'j["usage"]["running_seconds"]')
since=$(( ($(date +%s%N) - t_create) / 1000000 ))
# At most the time since the create was asked for (and a second of
# rounding), not that plus the 6 s and more the member waited in the pool.
check pool_metered_from_create "running_seconds $run, $since ms after the create was asked for (the member waited > 6 s)" \
	python3 -c "import sys; sys.exit(0 if float('$run') <= $since / 1000 + 1 else 1)"

n=$(wait_ready 1 90)
create_sandbox '{"template":"minimal","allow_internet":false}'
B=$SBX
ok=; [ -n "$B" ] && [ "$(hits)" = 2 ] && ok=1
check pool_hit_again "created $B, hits $(hits)" [ -n "$ok" ]
ra=$(ex "$A" 'head -c 16 /dev/urandom | od -An -tx1 | tr -d " \n"')
rb=$(ex "$B" 'head -c 16 /dev/urandom | od -An -tx1 | tr -d " \n"')
ok=; [ -n "$ra" ] && [ ${#ra} = 32 ] && [ "$ra" != "$rb" ] && ok=1
check pool_random_own "A $ra, B $rb" [ -n "$ok" ]
fetch() { ex "$1" 'echo GET / | nc -w 3 192.0.2.2 80 | head -1 | grep . || echo blocked'; }
got=$(fetch "$B")
check pool_policy_applied "allow_internet false: '$got'" [ "$got" = blocked ]
got=$(fetch "$A")
check pool_policy_open "the default: '$got'" [ "$got" = kiln-upstream ]

api POST "/v1/sandboxes/$A/fork"
F=$(jget 'j["sandboxes"][0]["id"]')
got=$([ -n "$F" ] && ex "$F" 'echo forked')
check pool_fork "fork $F: '$got'" [ "$got" = forked ]
[ -n "$F" ] && api DELETE "/v1/sandboxes/$F"
ex "$A" 'echo kept > /root/f' >/dev/null
api POST "/v1/sandboxes/$A/hibernate"
got=$(ex "$A" 'cat /root/f')
check pool_hibernate_wake "after hibernate and wake: '$got'" [ "$got" = kept ]
c=$(( $(hits) + $(misses) ))
check pool_counts_creates "hits $(hits) + misses $(misses) = $c creates from a template" [ "$c" = 2 ]

# ---- stop: nothing left ---------------------------------------------------------------------------
for s in "$A" "$B"; do api DELETE "/v1/sandboxes/$s"; done
wait_ready 1 60 >/dev/null
stop_kilnd
left="VMMs '$(sandbox_vmms | tr '\n' ' ')', directories '$(ls "$DATA/sandboxes" | tr '\n' ' ')', networks '$(ls "$DATA/net" | tr '\n' ' ')'"
ok=; [ -z "$(sandbox_vmms)" ] && [ -z "$(ls "$DATA/sandboxes")" ] && [ -z "$(ls "$DATA/net")" ] && ok=1
check pool_stop_clean "after stop: $left" [ -n "$ok" ]

# ---- room: creates come first -------------------------------------------------------------------
start_kilnd --rate 0 --pool 2 --max-sandboxes 2 --create-wait 1000 || exit 1
n=$(wait_ready 1 90)
# A member whose VMM dies while it waits is replaced, not handed out.
dead=$(ls "$DATA/sandboxes" 2>/dev/null | head -1)
[ -n "$dead" ] && kill -9 "$(cut -d' ' -f1 "$DATA/sandboxes/$dead/vmm.pid")"
for i in $(seq 120); do
	[ ! -e "$DATA/sandboxes/$dead" ] && [ "$(ready)" = 1 ] && break
	sleep 0.25
done
ok=; [ -n "$dead" ] && [ ! -e "$DATA/sandboxes/$dead" ] && [ "$(ready)" = 1 ] && ok=1
check pool_dead_member_replaced "member $dead killed: its directory $([ -e "$DATA/sandboxes/$dead" ] && echo kept || echo gone), now $(ls "$DATA/sandboxes" | tr '\n' ' ')ready" [ -n "$ok" ]
create_sandbox '{"template":"minimal"}'
C1=$SBX
create_sandbox '{"template":"minimal"}'
C2=$SBX
for i in $(seq 40); do [ "$(ready)" = 0 ] && break; sleep 0.25; done
ok=; [ -n "$C1" ] && [ -n "$C2" ] && [ "$(ready)" = 0 ] && ok=1
check pool_gives_room "--max-sandboxes 2, 2 created ($C1 $C2): $(ready) left in the pool" [ -n "$ok" ]
create_sandbox '{"template":"minimal"}'
check pool_no_overcommit "a third create: $STATUS" [ "$STATUS" = 503 ]
for s in "$C1" "$C2"; do api DELETE "/v1/sandboxes/$s"; done
n=$(wait_ready 1 90)

# ---- a kill -9: the next kilnd removes what the pool left ---------------------------------------
member=$(ls "$DATA/sandboxes" 2>/dev/null | head -1)
kill -9 "$KILND_PID"; wait "$KILND_PID" 2>/dev/null; KILND_PID=
before=$(sandbox_vmms | wc -l)
start_kilnd --rate 0 --net-pool 0 || exit 1
ok=; [ -n "$member" ] && [ "$before" -ge 1 ] && [ -z "$(sandbox_vmms)" ] && [ ! -e "$DATA/sandboxes/$member" ] && [ -z "$(ls "$DATA/net")" ] && ok=1
check pool_kill9_clean "member $member's VMM ($before before) and directory gone after the restart" [ -n "$ok" ]
alive pool_kilnd_alive

# ---- a template whose members cannot be made ------------------------------------------------------
# Two operator-built templates, each a manifest naming minimal's files:
# a84bad's snapshot directory is not there (its zygote exits at start),
# b84good is minimal under another name. a84bad comes before b84good in
# every round; b84good must fill all the same, and a84bad is tried again
# after 2 s, then 4, then 8 (docs/kilnd.md "The pool"), not every round.
# (In the template directory this run's tests share: removed at the end.)
drop84() {
	stop_kilnd
	local z
	for z in "$DATA"/templates/[ab]84*/v*/zygote.pid; do	# a84bad v1's exited at start
		z=$(cut -d' ' -f1 "$z") && [ "$(cat "/proc/$z/comm")" = kiln-vmm ] && kill -9 "$z"
	done 2>/dev/null
	rm -rf "$DATA/templates/a84bad" "$DATA/templates/b84good"
}
at_exit drop84
s84=$(date +%s)
stop_kilnd
mdir=$(readlink -f "$DATA/templates/minimal/current")
snap=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["snapshot_dir"])' "$mdir/manifest.json")
manifest() {	# manifest NAME VERSION SNAPSHOT_DIR
	mkdir -p "$DATA/templates/$1/v$2" && python3 - "$mdir/manifest.json" "$1" "$2" "$3" \
		> "$DATA/templates/$1/v$2/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m.update(name=sys.argv[2], version=int(sys.argv[3]), snapshot_dir=sys.argv[4])
print(json.dumps(m))
PY
	ln -sfn "v$2" "$DATA/templates/$1/current"
}
manifest a84bad 1 "$mdir/no-snapshot-here"
manifest b84good 1 "$snap"
lines0=$(wc -l < "$T/kilnd.log")
start_kilnd --rate 0 --pool 1 --net-pool 0 || exit 1
failures() { local n; n=$(metric 'kiln_pool_member_failures_total{template="a84bad"}'); echo "${n:-0}"; }
good() { local n; n=$(metric 'kiln_pool_ready{template="b84good"}'); echo "${n:-0}"; }
for i in $(seq 240); do
	[ "$(good)" -ge 1 ] && [ "$(failures)" -ge 3 ] && break
	sleep 0.25
done
f=$(failures) g=$(good)
ok=; [ "$g" = 1 ] && [ "$f" -ge 1 ] && ok=1
check pool_failing_template_starves_none "b84good ready $g while a84bad failed $f times" [ -n "$ok" ]
# Its failures as kilnd logged them: the time, and the gap it announced.
tail -n +"$((lines0 + 1))" "$T/kilnd.log" | grep 'pool: a sandbox of a84bad v1:' > "$T/fails84"
gaps=$(python3 - "$T/fails84" <<'PY'
import datetime, re, sys
t, said = [], []
for line in open(sys.argv[1]):
    m = re.match(r'(\S+)Z .*tried again in (\d+) s\)$', line.strip())
    if m:
        t.append(datetime.datetime.fromisoformat(m.group(1)).replace(tzinfo=datetime.timezone.utc).timestamp())
        said.append(int(m.group(2)))
print(" ".join("%.1f/%d" % (t[i + 1] - t[i], said[i]) for i in range(len(t) - 1)))
# Announced 2, 4, 8; each gap at least the one announced; logged once a try.
ok = len(t) >= 3 and said[:3] == [2, 4, 8] and all(t[i + 1] - t[i] >= said[i] - 0.05 for i in range(len(t) - 1))
sys.exit(0 if ok else 1)
PY
)
rc=$?
n=$(wc -l < "$T/fails84") f=$(failures)
ok=; [ "$rc" = 0 ] && [ "$n" -ge 3 ] && [ "$n" -le "$f" ] && [ "$n" -ge $(( f - 1 )) ] && ok=1
check pool_failure_backoff "a84bad's tries: gap/announced (s) $gaps; $n log lines, kiln_pool_member_failures_total $f" [ -n "$ok" ]
# A new version starts over: v2 (minimal's snapshot) is tried at once (a
# sandbox directory beside minimal's and b84good's members), not when
# v1's gap (8 s from its last failure) ends.
last=$(python3 -c 'import datetime as d,sys; print(d.datetime.fromisoformat(open(sys.argv[1]).readlines()[-1].split("Z ")[0]).replace(tzinfo=d.timezone.utc).timestamp())' "$T/fails84" 2>/dev/null)
n0=$(ls "$DATA/sandboxes" | wc -l)
manifest a84bad 2 "$snap"
for i in $(seq 100); do [ "$(ls "$DATA/sandboxes" | wc -l)" -gt "$n0" ] && break; sleep 0.1; done
early=$(python3 -c "print('%.1f' % (${last:-0} + 8 - $(date +%s.%N)))")
bad() { local n; n=$(metric 'kiln_pool_ready{template="a84bad"}'); echo "${n:-0}"; }
for i in $(seq 240); do [ "$(bad)" = 1 ] && break; sleep 0.25; done
ok=; python3 -c "import sys; sys.exit(0 if $early > 0 else 1)" && [ "$(bad)" = 1 ] && ok=1
check pool_new_version_starts_over "a84bad v2 tried $early s before v1's gap would have ended ($n0 members before); ready $(bad)" [ -n "$ok" ]
drop84
echo "-- this section (a failing template): $(( $(date +%s) - s84 )) s"
