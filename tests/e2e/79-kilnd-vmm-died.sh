#!/bin/bash
# A sandbox whose VMM died never reads "running": once the VMM is gone
# (here: its pid no longer exists), the next request that names it or
# lists it finds it "failed", with the reason. kill -9: "killed by signal
# 9" where kilnd has the wait status, else that it ended without a last
# line (a zygote's child that is not kilnd's); a VMM that ended on its own
# (here SIGTERM, which kiln-vmm handles and reports): its last stderr
# line, the line that names a triple fault or a panic when the guest died.
# An exec on it is a 409 that names that reason. Both are deletable
# after, and the event stream (GET /v1/events) told
# the failure with its reason (a "failed" event whose error is that line).
# A guest that dies before it is ready (KILN_TEST_SPAWN_DIES=N: the next N
# guests the zygote spawns triple-fault, src/common/failpoint.h): the create
# starts it once more on a fresh disk and answers 201, the sandbox works,
# the retry is counted in /metrics; a second death is the create's error,
# naming the triple fault, with no VMM left behind. A VMM that ends after
# its own ready, before the guest agent answered (KILN_TEST_READY_DIES=1),
# is started again the same way, as is one whose guest dies while kilnd
# resyncs it (KILN_TEST_RESYNC_DIES=1), and a fork whose child dies before it
# is ready (KILN_TEST_FORK_DIES=1) forks again. A wake or a create from
# a snapshot whose restored guest dies (KILN_TEST_RESTORE_DIES) is made
# once more too.
. "$(dirname "$0")/lib.sh"
have_kvm || { fail vmm_died_kvm "no KVM here: run it in tests/host/run"; exit 1; }
build_template minimal || exit 1
start_kilnd --rate 0 || exit 1
KEY=$(new_key died)

# gone PID: wait (10 ms steps, 10 s at most) until PID has exited.
gone() { local i; for i in $(seq 1 1000); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.01; done; return 1; }

# case NAME SIGNAL WANT: create, signal its VMM, GET at once.
case_() {
	local name=$1 sig=$2 want=$3 id pid st err ev evp
	curl -sN -m 300 -H "Authorization: Bearer $KEY" "$URL/v1/events" > "$T/ev.$name" 2>/dev/null &
	evp=$!
	sleep 0.5
	create_sandbox
	id=$SBX
	[ -n "$id" ] || { fail "${name}_create" "$BODY"; return; }
	pid=$(cut -d' ' -f1 "$DATA/sandboxes/$id/vmm.pid")
	kill "-$sig" "$pid"
	gone "$pid" || { fail "$name" "VMM $pid still alive 10 s after SIG$sig"; return; }
	api GET "/v1/sandboxes/$id"
	st=$(jget 'j["status"]') err=$(jget 'j["error"]')
	if [ "$st" = failed ] && [[ $err =~ $want ]]; then
		pass "$name" "GET right after the VMM exited: failed, '$err'"
	else
		fail "$name" "GET right after the VMM exited: status '$st', error '$err' (want failed, '$want')"
	fi
	api GET /v1/sandboxes
	st=$(python3 -c "import json,sys; print([s['status'] for s in json.load(open(sys.argv[1]))['sandboxes'] if s['id']==sys.argv[2]])" "$T/body" "$id" 2>&1)
	check "${name}_listed" "in the list: $st" [ "$st" = "['failed']" ]
	# A request that needs it running says why it is not: the reason, not
	# just "failed" (a client's next question, and a test's report).
	api POST "/v1/sandboxes/$id/exec" '{"cmd":"true"}'
	st=$(jget 'j["error"]["message"]')
	check "${name}_exec_says_why" "exec: $STATUS $st" eval '[ "$STATUS" = 409 ] && [[ $st == "sandbox $id is failed ("* && $st =~ $want && $st == *"), not running" ]]'
	sleep 1
	kill "$evp" 2>/dev/null
	wait "$evp" 2>/dev/null
	ev=$(python3 - "$T/ev.$name" "$id" <<'PY'
import json, sys
ev, out = None, []
for line in open(sys.argv[1]):
    line = line.rstrip("\n")
    if line.startswith("event: "):
        ev = line[7:]
    elif line.startswith("data: ") and ev == "sandbox":
        d = json.loads(line[6:])
        if d.get("id") == sys.argv[2] and d.get("type") == "failed":
            out.append("%s|%s" % (d.get("state"), d.get("error")))
print("\n".join(out))
PY
)
	check "${name}_event" "failed events of $id: $ev" eval '[ "$(wc -l <<<"$ev")" = 1 ] && [[ ${ev%%|*} == failed && ${ev#*|} =~ $want ]]'
	api DELETE "/v1/sandboxes/$id"
	expect "${name}_deletable" 204 -
}
case_ vmm_killed KILL "the VMM was killed by signal 9|the VMM ended without a last line"
case_ vmm_exited TERM "the VMM exited( with status 0)?: kiln-vmm(\\[[0-9]+\\])?: stopped by signal 15 \\(exit status 0\\)"

# ---- a guest that dies at start ----------------------------------------------------------------
stop_kilnd
KILN_TEST_SPAWN_DIES=1 start_kilnd --rate 0 || exit 1
create_sandbox
id=$SBX
if [ -n "$id" ] && grep -q "sandbox $id: .*the guest died before it was ready: guest triple fault.*starting it again on a fresh disk" "$T/kilnd.log"; then
	pass start_retry_create "201 after the first guest triple-faulted: $(grep -m1 -o "the guest died before it was ready: guest triple fault on vCPU [0-9]*" "$T/kilnd.log")"
else
	fail start_retry_create "status $STATUS, kilnd.log: $(grep -m2 "$id\|died" "$T/kilnd.log" | tr '\n' ' ' | head -c 400) $BODY"
fi
if [ -n "$id" ]; then
	api POST "/v1/sandboxes/$id/exec" '{"cmd":"echo kept > /root/retry && sync && cat /root/retry"}'
	out=$(jget 'j["stdout"].strip()')
	check start_retry_works "exec and a disk write in the second guest: '$out'" [ "$out" = kept ]
	n=$(sandbox_vmms | wc -l)
	check start_retry_one_vmm "kiln-vmm processes for sandboxes: $n (the dead one is gone)" [ "$n" = 1 ]
	api GET /metrics
	check start_retry_metric "$(grep '^kiln_sandbox_start_retries_total' <<<"$BODY")" grep -qx 'kiln_sandbox_start_retries_total 1' <<<"$BODY"
	api DELETE "/v1/sandboxes/$id"
fi
# retried FAILPOINT NAME LOGGED CMD WANT: kilnd started with FAILPOINT=1,
# whose first guest dies at start; the create is 201 all the same, kilnd's
# log says why it started it again (LOGGED, a grep pattern), and CMD in
# the second guest prints WANT (python's list of its words; @ID@: its id).
retried() {
	local fp=$1 name=$2 logged=$3 cmd=$4 want=$5 id out
	stop_kilnd
	export "$fp=1"
	start_kilnd --rate 0 || exit 1
	unset "$fp"
	create_sandbox
	id=$SBX
	if [ -n "$id" ] && grep -q "sandbox $id: $logged; starting it again on a fresh disk" "$T/kilnd.log"; then
		api POST "/v1/sandboxes/$id/exec" "$(python3 -c 'import json,sys; print(json.dumps({"cmd": sys.argv[1]}))' "$cmd")"
		out=$(jget 'j["stdout"].split()')
		want=${want//@ID@/$id}
		check "$name" "201 after the first guest died; the second runs: $out" [ "$out" = "$want" ]
		api DELETE "/v1/sandboxes/$id"
	else
		fail "$name" "status $STATUS, kilnd.log: $(grep "$id" "$T/kilnd.log" | tail -3 | tr '\n' ' ' | head -c 400) $BODY"
	fi
}
# After the VMM's own ready, before the guest agent answered kilnd (the
# VMM ends as on a triple fault right after its ready: KILN_TEST_READY_DIES):
# started again from the template too.
retried KILN_TEST_READY_DIES start_retry_after_ready "the VMM exited before the guest agent answered" \
	"echo again > /root/retry && sync && cat /root/retry" "['again']"
# After the agent answered, while kilnd resyncs the guest (its clock,
# entropy, name): a guest that dies there closes the agent's connection
# and its VMM ends a moment later (KILN_TEST_RESYNC_DIES: the VMM shut
# down right before the resync). Still before ready: started again too,
# not a failed create (session 37's CI lost one so); named after the
# resync of the second guest.
retried KILN_TEST_RESYNC_DIES start_retry_after_resync "the guest died while kilnd resynced it (guest resync: .*)" \
	"echo resynced > /root/retry && sync && cat /root/retry && hostname" "['resynced', '@ID@']"
# A fork whose child dies before it is ready (KILN_TEST_FORK_DIES=1: the
# first forked child triple-faults): kiln-vmm ends that fork's children
# and resumes the parent; kilnd forks again.
stop_kilnd
KILN_TEST_FORK_DIES=1 start_kilnd --rate 0 || exit 1
create_sandbox
P=$SBX
if [ -n "$P" ]; then
	api POST "/v1/sandboxes/$P/fork_tree" '{"count":2}'
	kids=$(jget '" ".join(s["id"] for s in j["sandboxes"] if s["status"] == "running")')
	outs=
	for k in $kids; do
		api POST "/v1/sandboxes/$k/exec" '{"cmd":"hostname"}'
		outs="$outs $(jget 'j["stdout"].strip()')"
	done
	if [ "$(wc -w <<<"$kids")" = 2 ] && [ "$outs" = " $kids" ] &&
	   grep -q "sandbox $P: .*the guest died before it was ready: guest triple fault.*; forking again" "$T/kilnd.log"; then
		pass start_retry_fork "fork_tree of 2 after a child triple-faulted: both answer ($outs)"
	else
		fail start_retry_fork "kids '$kids', hostnames '$outs'; kilnd.log: $(grep "forking again\|$P" "$T/kilnd.log" | tail -3 | tr '\n' ' ' | head -c 400)"
	fi
	for k in $kids $P; do api DELETE "/v1/sandboxes/$k"; done
else
	fail start_retry_fork "create: $STATUS $BODY"
fi
# A guest restored by a VMM of its own that dies before it is ready
# (KILN_TEST_RESTORE_DIES=1: the next such VMM runs kiln-vmm
# --test-triple-fault): a wake is tried once more when the disk is as the
# hibernation left it, and a create from a snapshot starts again on a
# fresh disk, as a spawn's does.
create_sandbox
W=$SBX
api POST "/v1/sandboxes/$W/exec" '{"cmd":"echo woke > /root/w; sync"}'
api POST "/v1/sandboxes/$W/hibernate" '{}'
hib=$STATUS
create_sandbox
SN=$SBX
api POST "/v1/sandboxes/$SN/exec" '{"cmd":"echo from-snapshot > /root/s; sync"}'
api POST "/v1/sandboxes/$SN/snapshot" '{}'
SNAP=$(jget 'j["id"]')
api DELETE "/v1/sandboxes/$SN"
stop_kilnd
KILN_TEST_RESTORE_DIES=1 start_kilnd --rate 0 || exit 1
api POST "/v1/sandboxes/$W/exec" '{"cmd":"cat /root/w"}'
out="$STATUS $(jget 'j["stdout"].strip()')"
check restore_retry_wake "hibernate: $hib; exec (a wake whose first guest triple-faulted): '$out'; kilnd: $(grep -o "sandbox $W: .*waking it once more" "$T/kilnd.log" | head -1 | cut -c1-200)" \
	eval '[ "$hib" = 200 ] && [ "$out" = "200 woke" ] && grep -q "sandbox $W: .*guest triple fault.*its disk is as the hibernation left it: waking it once more" "$T/kilnd.log"'
stop_kilnd
KILN_TEST_RESTORE_DIES=1 start_kilnd --rate 0 || exit 1
create_sandbox "{\"from_snapshot\":\"$SNAP\"}"
C=$SBX
api POST "/v1/sandboxes/$C/exec" '{"cmd":"cat /root/s"}'
out="$STATUS $(jget 'j["stdout"].strip()')"
check restore_retry_snapshot "create from $SNAP (its first guest triple-faulted): ${C:-none}; exec: '$out'" \
	eval '[ -n "$C" ] && [ "$out" = "200 from-snapshot" ] && grep -q "sandbox $C: .*starting it again on a fresh disk" "$T/kilnd.log"'
api GET /metrics
check restore_retry_metric "$(grep '^kiln_sandbox_start_retries_total' <<<"$BODY")" grep -qx 'kiln_sandbox_start_retries_total 1' <<<"$BODY"
for s in $W $C; do api DELETE "/v1/sandboxes/$s"; done
api DELETE "/v1/snapshots/$SNAP"
stop_kilnd
KILN_TEST_SPAWN_DIES=2 start_kilnd --rate 0 || exit 1
create_sandbox
err=$(jget 'j["error"]["message"]')
if [ -z "$SBX" ] && [ "${STATUS:0:1}" = 5 ] && [[ $err == *"died before it was ready: guest triple fault"* ]]; then
	pass start_retry_twice "$STATUS: $err"
else
	fail start_retry_twice "status $STATUS, wanted 5xx naming the triple fault: $BODY"
	[ -n "$SBX" ] && api DELETE "/v1/sandboxes/$SBX"
fi
n=$(sandbox_vmms | wc -l)
api GET /v1/sandboxes
left=$(python3 -c "import json,sys; print(len([s for s in json.load(open(sys.argv[1]))['sandboxes'] if s['status'] not in ('deleted',)]))" "$T/body" 2>&1)
check start_retry_twice_clean "VMMs left: $n, sandboxes listed: $left" [ "$n/$left" = 0/0 ]
