#!/bin/bash
# Pause and resume (docs/api.md "Pause"): a paused sandbox's vCPUs burn
# nothing (a busy loop in it accrues no active_vcpu_seconds while its
# memory is still billed), it counts as running against the plan, it is
# paused again and resumed again without harm, a request that needs its
# guest resumes it with its files and processes as they were, a pause
# while a command runs is refused, it hibernates and wakes, it forks
# (resumed first), and it stays paused across a kilnd restart. Persistent
# sandboxes (docs/api.md "Persistent sandboxes"): idle for their TTL they
# hibernate instead of being deleted and are kept so; a request wakes
# one; idle_pause_seconds pauses one first ("Pausing when idle"), and
# the TTL still acts; persistent off gives the plan's rule back; a plan
# whose TTL counts from creation refuses them; bad bodies are 400. The event stream
# (docs/api.md "Events") tells all of it as typed events in order (exec
# started and ended, forked, a TTL warning before the hibernation), with
# ids: a stream opened with Last-Event-ID gets what it missed, one whose
# id is unknown or from before a restart is told to resync.
# With KILN_API_URL, against that endpoint (lib.sh; tests/cluster/e2e.sh:
# a replica given the plans file and options below): w-abs is put on its
# plan through the operator API, and what needs kilnd's own process is a
# SKIP line.
. "$(dirname "$0")/lib.sh"
endpoint || have_kvm || { fail pause_kvm "no KVM here: run it in tests/host/run"; exit 1; }	# an endpoint's hosts run its sandboxes

build_template minimal || exit 1
# The operator's plans file (an endpoint's kilnd is given the same).
PLANS=$REPO/tests/e2e/85-kilnd-pause.json
if endpoint; then endpoint_plan w-abs abs || exit 1
else "$KILND" --data "$DATA" --plans "$PLANS" workspace plan w-abs abs > /dev/null 2>&1; fi
kilnd_args=(--rate 0 --sample-ms 500 --plans "$PLANS")
start_kilnd "${kilnd_args[@]}" || exit 1
KEY=$(new_key pause) ABS=$(new_key w-abs)
at_exit 'for s in $(curl -s -H "Authorization: Bearer $KEY" $URL/v1/sandboxes | python3 -c "import json,sys; [print(s[\"id\"]) for s in json.load(sys.stdin)[\"sandboxes\"]]" 2>/dev/null); do api DELETE /v1/sandboxes/$s; done'

usage_of() { api GET "/v1/sandboxes/$1"; jget "j['usage']['$2']"; }
# events FILE [curl args]: the workspace's event stream into FILE, in the background.
events() { local f=$1; shift; curl -sN -m 600 -H "Authorization: Bearer $KEY" "$@" "$URL/v1/events" > "$f" 2>/dev/null & }
# types FILE ID: the types of ID's events in FILE, in order (kind:type).
types() {
	python3 - "$1" "$2" <<'PY'
import json, sys
ev, out = None, []
for line in open(sys.argv[1]):
    line = line.rstrip("\n")
    if line.startswith("event: "):
        ev = line[7:]
    elif line.startswith("data: ") and ev not in ("usage", None):
        d = json.loads(line[6:])
        if d.get("id") == sys.argv[2]:
            out.append("%s:%s" % (ev, d.get("type")))
print(" ".join(out))
PY
}
# subseq WANT HAVE: the words of WANT appear in HAVE in that order.
subseq() { python3 -c "import sys; w, h = sys.argv[1].split(), iter(sys.argv[2].split()); sys.exit(0 if all(x in h for x in w) else 1)" "$1" "$2"; }
# gt A B: A > B as numbers.
gt() { python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) > float(sys.argv[2]) else 1)" "$1" "$2"; }

events "$T/ev1"
EV1=$!
at_exit "kill $EV1 2>/dev/null"
sleep 0.5
create_sandbox '{"template":"minimal","ttl_seconds":3600}'
S=$SBX
[ -n "$S" ] || { fail pause_setup "create: $STATUS $BODY"; exit 1; }
api POST "/v1/sandboxes/$S/exec" '{"cmd":"echo kept > /root/mark"}'
# A busy loop in the background, its pid kept, so the CPU it burns shows.
api POST "/v1/sandboxes/$S/processes" '{"cmd":"while :; do :; done"}'
[ "$STATUS" = 201 ] || fail pause_setup "process: $STATUS $BODY"
LOOP=$(jget 'j["id"]')
sleep 3
c0=$(usage_of "$S" active_vcpu_seconds)
sleep 3
c1=$(usage_of "$S" active_vcpu_seconds)
gt "$c1" "$(python3 -c "print($c0 + 0.3)")" && pass pause_running_burns "busy loop: active_vcpu_seconds $c0 -> $c1 in 3 s" ||
	fail pause_running_burns "$c0 -> $c1"

api POST "/v1/sandboxes/$S/pause"
[ "$STATUS" = 200 ] && [ "$(jget 'j["status"]')" = paused ] && pass pause_paused "$(jget 'j["status"]')" ||
	fail pause_paused "$STATUS $BODY"
api GET "/v1/sandboxes/$S"
check pause_get_paused "status $(jget 'j["status"]')" [ "$(jget 'j["status"]')" = paused ]
api GET /v1/limits
check pause_counts_running "in_use.running $(jget 'j["in_use"]["running"]') with one paused sandbox" \
	[ "$(jget 'j["in_use"]["running"]')" = 1 ]
sleep 1.5
p0=$(usage_of "$S" active_vcpu_seconds) m0=$(usage_of "$S" working_set_gib_hours)
sleep 4
p1=$(usage_of "$S" active_vcpu_seconds) m1=$(usage_of "$S" working_set_gib_hours)
python3 -c "import sys; sys.exit(0 if float('$p1') - float('$p0') < 0.1 else 1)" &&
	pass pause_burns_nothing "busy loop paused 4 s: active_vcpu_seconds $p0 -> $p1" ||
	fail pause_burns_nothing "$p0 -> $p1 while paused"
gt "$m1" "$m0" && pass pause_memory_billed "working_set_gib_hours $m0 -> $m1 while paused" ||
	fail pause_memory_billed "$m0 -> $m1"
api POST "/v1/sandboxes/$S/pause"
[ "$STATUS" = 200 ] && [ "$(jget 'j["status"]')" = paused ] && pass pause_twice "paused again: 200 paused" ||
	fail pause_twice "$STATUS $BODY"
api POST "/v1/sandboxes/$S/resume"
[ "$STATUS" = 200 ] && [ "$(jget 'j["status"]')" = running ] && pass pause_resumed "running" ||
	fail pause_resumed "$STATUS $BODY"
api POST "/v1/sandboxes/$S/resume"
[ "$STATUS" = 200 ] && [ "$(jget 'j["status"]')" = running ] && pass pause_resume_running "resumed again: 200 running" ||
	fail pause_resume_running "$STATUS $BODY"
api GET "/v1/sandboxes/$S/processes"
check pause_process_kept "the busy loop after pause and resume: $(jget '[(p["id"], p["status"]) for p in j["processes"]]')" \
	[ "$(jget '[p["status"] for p in j["processes"] if p["id"] == '"$LOOP"']')" = "['running']" ]
api POST "/v1/sandboxes/$S/processes/$LOOP/signal" '{"signal":"KILL"}'

# A request that needs the guest resumes it.
api POST "/v1/sandboxes/$S/pause"
api POST "/v1/sandboxes/$S/exec" '{"cmd":"cat /root/mark"}'
[ "$STATUS" = 200 ] && [ "$(jget 'j["stdout"]')" = "kept" ] && pass pause_exec_resumes "exec on a paused sandbox: $(jget 'j["stdout"]')" ||
	fail pause_exec_resumes "$STATUS $BODY"
api GET "/v1/sandboxes/$S"
check pause_exec_left_running "status $(jget 'j["status"]')" [ "$(jget 'j["status"]')" = running ]

# Not while a command runs: the command would hang.
curl -s -o "$T/sleep.json" -X POST -H "Authorization: Bearer $KEY" --data-binary '{"cmd":"sleep 6; echo slept"}' \
	"$URL/v1/sandboxes/$S/exec" &
SLEEP_PID=$!
sleep 1.5
api POST "/v1/sandboxes/$S/pause"
expect pause_busy_refused 409 conflict
grep -q "operations running" <<<"$BODY" && pass pause_busy_says_why "$(jget 'j["error"]["message"]')" ||
	fail pause_busy_says_why "$BODY"
wait $SLEEP_PID
grep -q '"stdout":"slept\\n"' "$T/sleep.json" && pass pause_busy_command_ended "the command ran to its end" ||
	fail pause_busy_command_ended "$(cat "$T/sleep.json")"

# Paused, then hibernated and woken: the file is there.
api POST "/v1/sandboxes/$S/pause"
api POST "/v1/sandboxes/$S/hibernate"
[ "$STATUS" = 200 ] && [ "$(jget 'j["status"]')" = hibernated ] && pass pause_then_hibernate "hibernated" ||
	fail pause_then_hibernate "$STATUS $BODY"
api POST "/v1/sandboxes/$S/wake"
api POST "/v1/sandboxes/$S/exec" '{"cmd":"cat /root/mark"}'
[ "$(jget 'j["stdout"]')" = kept ] && pass pause_hibernate_wake_intact "after pause, hibernate, wake: $(jget 'j["stdout"]')" ||
	fail pause_hibernate_wake_intact "$STATUS $BODY"

# A paused sandbox is snapshotted as it is: it stays paused, and a
# sandbox made from the snapshot runs with its file.
api POST "/v1/sandboxes/$S/pause"
api POST "/v1/sandboxes/$S/snapshot" '{}'
PSNAP=$(jget 'j["id"]') st1=$STATUS
api GET "/v1/sandboxes/$S"; st2=$(jget 'j["status"]')
create_sandbox "{\"from_snapshot\":\"$PSNAP\"}"; FROM=$SBX
api POST "/v1/sandboxes/$FROM/exec" '{"cmd":"cat /root/mark"}'
check pause_snapshot "snapshot $st1 $PSNAP, the sandbox $st2 after it; from it: $(jget 'j["stdout"]')" \
	[ "$st1" = 201 -a "$st2" = paused -a "$(jget 'j["stdout"]')" = kept ]
api DELETE "/v1/sandboxes/$FROM"
api DELETE "/v1/snapshots/$PSNAP"

# A paused parent forks: resumed first, the child has its file.
api POST "/v1/sandboxes/$S/pause"
api POST "/v1/sandboxes/$S/fork" '{"count":1}'
KID=$(jget 'j["sandboxes"][0]["id"]')
[ "$STATUS" = 201 ] && [ -n "$KID" ] && pass pause_fork "child $KID" || fail pause_fork "$STATUS $BODY"
api POST "/v1/sandboxes/$KID/exec" '{"cmd":"cat /root/mark"}'
check pause_fork_child_file "child: $(jget 'j["stdout"]')" [ "$(jget 'j["stdout"]')" = kept ]
api DELETE "/v1/sandboxes/$KID"

# ---- the events of all that ------------------------------------------------------------------
sleep 1
have=$(types "$T/ev1" "$S")
want="sandbox:created sandbox:ready exec:exec_started exec:exec_ended sandbox:paused sandbox:resumed sandbox:paused sandbox:resumed exec:exec_started exec:exec_ended sandbox:paused sandbox:hibernated sandbox:woken sandbox:paused sandbox:resumed sandbox:forked"
subseq "$want" "$have" && pass events_lifecycle "$S: $have" || fail events_lifecycle "want in order: $want; have: $have"
kid=$(types "$T/ev1" "$KID")
subseq "sandbox:created sandbox:ready exec:exec_started exec:exec_ended sandbox:deleting sandbox:deleted" "$kid" &&
	pass events_child "$KID: $kid" || fail events_child "$KID: $kid"
evcheck=$(python3 - "$T/ev1" "$S" "$KID" <<'PY'
import json, sys
ids, ev, rows = [], None, []
for line in open(sys.argv[1]):
    line = line.rstrip("\n")
    if line.startswith("id: "):
        ids.append(int(line.rsplit("-", 1)[1]))
    elif line.startswith("event: "):
        ev = line[7:]
    elif line.startswith("data: ") and ev != "usage":
        rows.append((ev, json.loads(line[6:])))
bad = []
if ids != sorted(ids) or len(set(ids)) != len(ids):
    bad.append("ids not increasing")
created = [d for e, d in rows if d.get("id") == sys.argv[3] and d.get("type") == "created"]
if not created or created[0].get("parent_id") != sys.argv[2]:
    bad.append("child created without parent_id: %s" % created)
forked = [d for e, d in rows if d.get("type") == "forked"]
if not forked or forked[0].get("child") != sys.argv[3]:
    bad.append("forked without child: %s" % forked)
started = {d["exec"]: d for e, d in rows if d.get("type") == "exec_started"}
ended = [d for e, d in rows if d.get("type") == "exec_ended"]
if not ended or any(d["exec"] not in started for d in ended):
    bad.append("exec_ended without its start")
if not any(d.get("cmd") == "cat /root/mark" and d.get("background") is False for d in started.values()):
    bad.append("no exec_started of cat /root/mark")
if not any(d.get("cmd") == "while :; do :; done" and d.get("background") is True for d in started.values()):
    bad.append("no background exec_started")
if not all("at" in d and "state" in d for e, d in rows if e == "sandbox"):
    bad.append("a sandbox event without at or state")
print("; ".join(bad) if bad else "ok: %d events, %d exec pairs" % (len(ids), len(ended)))
PY
)
check events_fields "$evcheck" [ "${evcheck%%:*}" = ok ]
# Reconnecting: what was missed since the last id seen comes again.
LAST=$(sed -n 's/^id: //p' "$T/ev1" | tail -1)
kill $EV1 2>/dev/null
api POST "/v1/sandboxes/$S/pause"
api POST "/v1/sandboxes/$S/resume"
curl -sN -m 4 -H "Authorization: Bearer $KEY" -H "Last-Event-ID: $LAST" "$URL/v1/events" > "$T/ev2" 2>/dev/null
again=$(types "$T/ev2" "$S")
first=$(sed -n 's/^id: //p' "$T/ev2" | head -1)
[ "$again" = "sandbox:paused sandbox:resumed" ] && [ "${first##*-}" -gt "${LAST##*-}" ] &&
	pass events_resume "after $LAST: $again (from $first)" || fail events_resume "after $LAST: '$again' (first id $first)"
curl -sN -m 3 -H "Authorization: Bearer $KEY" -H "Last-Event-ID: bogus-12" "$URL/v1/events" > "$T/ev3" 2>/dev/null
grep -q '^event: resync' "$T/ev3" && pass events_unknown_id_resync "Last-Event-ID bogus-12: resync" ||
	fail events_unknown_id_resync "$(head -c 300 "$T/ev3")"

# The CLI (docs/cli.md): pause and resume print the state; kiln events
# resumes the stream after an id with one line an event, --json adds the
# event's id and kind, and an id the server does not keep is a resync on
# stderr; a sandbox that is not there is exit 125 naming it; kiln preview
# prints a link that passes the proxy without a key (502: nothing listens
# on that port of the minimal guest; a tampered link is 401), and an
# unexposed port or a short TTL are refused with kilnd's words.
export KILN_API_URL=$URL KILN_API_KEY=$KEY
p1=$("$KILN" pause "$S" 2>&1) p2=$("$KILN" pause "$S" 2>&1) r1=$("$KILN" resume "$S" 2>&1)
check cli_pause_resume "pause: $p1, again: $p2, resume: $r1" [ "$p1 $p2 $r1" = "paused paused running" ]
cev=$(timeout 60 "$KILN" events --sandbox "$S" --last-event-id "$LAST" --limit 4 2>&1)
cjs=$(timeout 60 "$KILN" events --sandbox "$S" --last-event-id "$LAST" --limit 1 --json 2>&1)
check cli_events "$(awk '{print $3}' <<<"$cev" | tr '\n' ' '); --json: $cjs" eval '[ "$(awk "{print \$3, \$4}" <<<"$cev" | tr "\n" " ")" = "paused $S resumed $S paused $S resumed $S " ] &&
	[[ $cjs == *"\"type\":\"paused\""*"\"event\":\"sandbox\""*"\"event_id\":\""* ]]'
cres=$(timeout 60 "$KILN" events --last-event-id bogus-12 --limit 1 2>&1); st=$?
check cli_events_resync "exit $st: $cres" eval '[ $st = 0 ] && [[ $cres == "kiln: resync"* ]]'
cnf=$("$KILN" events --sandbox sbx_doesnotexist 2>&1); st=$?
pnf=$("$KILN" pause sbx_doesnotexist 2>&1); st2=$?
check cli_events_pause_not_found "events: exit $st: $cnf; pause: exit $st2: $pnf" \
	eval '[ $st = 125 -a $st2 = 125 ] && [[ $cnf == *sbx_doesnotexist* && $pnf == *sbx_doesnotexist* ]]'
"$KILN" expose "$S" 8080 > /dev/null 2>&1
purl=$("$KILN" preview "$S" 8080 --ttl 120 2>&1)
pcode=$(curl -s -o /dev/null -w '%{http_code}' -m 60 "$purl")
tcode=$(curl -s -o /dev/null -w '%{http_code}' -m 60 "${purl/kiln_preview=/kiln_preview=9}")
nocode=$(curl -s -o /dev/null -w '%{http_code}' -m 60 "${purl%%\?*}")
check cli_preview "$purl: $pcode, tampered $tcode, none $nocode" eval '[[ $purl == http*"/v1/sandboxes/$S/proxy/8080/"*kiln_preview=* ]] && [ "$pcode $tcode $nocode" = "502 401 401" ]'
un=$("$KILN" preview "$S" 7777 2>&1); st=$?
short=$("$KILN" preview "$S" 8080 --ttl 5 2>&1); st2=$?
check cli_preview_refused "7777: exit $st: $un; --ttl 5: exit $st2: $short" eval '[ $st = 125 -a $st2 = 125 ] && [[ $un == *7777* && $short == *ttl* ]]'
"$KILN" unexpose "$S" 8080 > /dev/null 2>&1
# kiln persistent and idle-pause (PATCH .../lifecycle) print what kilnd
# answered; a word other than on/off is a usage error (2).
pon=$("$KILN" persistent "$S" on 2>&1) ip=$("$KILN" idle-pause "$S" 30 2>&1)
api GET "/v1/sandboxes/$S"
srv=$(jget 'j["persistent"], j["idle_pause_seconds"]')
poff=$("$KILN" persistent "$S" off 2>&1) ip0=$("$KILN" idle-pause "$S" 0 2>&1)
"$KILN" persistent "$S" maybe > /dev/null 2>&1; st=$?
check cli_persistent_idle_pause "'$pon' '$ip' (server: $srv); '$poff' '$ip0'; 'maybe': exit $st" \
	eval '[ "$pon" = "$S persistent on, when idle hibernate" -a "$ip" = "$S pauses after 30s idle" -a "$srv" = "(True, 30)" ] &&
	[ "$poff" = "$S persistent off, when idle delete" -a "$ip0" = "$S does not pause when idle" -a $st = 2 ]'

# Paused across a kilnd restart: still paused, and resumes.
api POST "/v1/sandboxes/$S/pause"
if one_box "pause_restart_kept pause_restart_resumes events_restart_resync" "restarts kilnd's own process"; then
stop_kilnd
start_kilnd "${kilnd_args[@]}" || exit 1
api GET "/v1/sandboxes/$S"
check pause_restart_kept "after a kilnd restart: $(jget 'j["status"]')" [ "$(jget 'j["status"]')" = paused ]
api POST "/v1/sandboxes/$S/exec" '{"cmd":"cat /root/mark"}'
check pause_restart_resumes "exec: $(jget 'j.get("stdout")')" [ "$(jget 'j.get("stdout")')" = kept ]
curl -sN -m 3 -H "Authorization: Bearer $KEY" "$URL/v1/events?last_event_id=$LAST" > "$T/ev4" 2>/dev/null
grep -q '^event: resync' "$T/ev4" && pass events_restart_resync "an id from before the restart: resync" ||
	fail events_restart_resync "$(head -c 300 "$T/ev4")"
fi

# Bad requests and a sandbox that is not there.
api POST "/v1/sandboxes/$S/pause" '{"now":true}'
expect pause_unknown_field 400 invalid_request
api POST /v1/sandboxes/sbx_doesnotexist/pause
expect pause_not_found 404 not_found
api POST /v1/sandboxes/sbx_doesnotexist/resume
expect resume_not_found 404 not_found
api DELETE "/v1/sandboxes/$S"
api POST "/v1/sandboxes/$S/resume"
expect resume_deleted 404 sandbox_ended

# ---- persistent ----------------------------------------------------------------------------
events "$T/ev5"
EV5=$!
at_exit "kill $EV5 2>/dev/null"
sleep 0.5
create_sandbox '{"template":"minimal","ttl_seconds":3,"persistent":true}'
P=$SBX
[ -n "$P" ] && [ "$(jget 'j["persistent"]')" = True ] && [ "$(jget 'j["ttl_rule"]["when_idle"]')" = hibernate ] &&
	pass persistent_create "persistent $(jget 'j["persistent"]'), when_idle $(jget 'j["ttl_rule"]["when_idle"]')" ||
	fail persistent_create "$STATUS $BODY"
api POST "/v1/sandboxes/$P/exec" '{"cmd":"echo persisted > /root/p"}'
seen=$(wait_status "$P" hibernated 30)
check persistent_idle_hibernates "idle past its 3 s TTL: $seen" [ "$seen" = hibernated ]
sleep 5
api GET "/v1/sandboxes/$P"
check persistent_kept "8 s later: $STATUS $(jget 'j.get("status")'), expires_at $(jget 'j.get("expires_at")')" \
	[ "$STATUS" = 200 -a "$(jget 'j.get("status")')" = hibernated -a "$(jget 'j.get("expires_at")')" = None ]
api POST "/v1/sandboxes/$P/exec" '{"cmd":"cat /root/p"}'
check persistent_wakes "exec: $(jget 'j.get("stdout")')" [ "$(jget 'j.get("stdout")')" = persisted ]
sleep 0.5
kill $EV5 2>/dev/null
ptypes=$(types "$T/ev5" "$P")
subseq "sandbox:created sandbox:ready ttl:ttl_warning sandbox:hibernated sandbox:woken" "$ptypes" &&
	grep -q '"type":"ttl_warning".*"action":"hibernate"' "$T/ev5" &&
	pass events_ttl_warning "$P: $ptypes" || fail events_ttl_warning "$P: $ptypes"
api PATCH "/v1/sandboxes/$P/lifecycle" '{"persistent":false,"ttl_seconds":600}'
[ "$STATUS" = 200 ] && [ "$(jget 'j["persistent"]')" = False ] && [ "$(jget 'j["ttl_rule"]["when_idle"]')" = delete ] &&
	[ "$(jget 'j["ttl_seconds"]')" = 600 ] && pass persistent_off "persistent False, when_idle delete, ttl 600" ||
	fail persistent_off "$STATUS $BODY"
api PATCH "/v1/sandboxes/$P/lifecycle" '{"persistent":true}'
[ "$STATUS" = 200 ] && [ "$(jget 'j["persistent"]')" = True ] && pass persistent_on "$(jget 'j["ttl_rule"]')" ||
	fail persistent_on "$STATUS $BODY"
# Pausing when idle: paused after 2 s without a request, which is not
# activity (last_active_at stays), so the 6 s TTL still hibernates it;
# the next request wakes it with its files. (Its 3 s TTL may have
# hibernated it again by now: an exec wakes it first, and its TTL is 600.)
api POST "/v1/sandboxes/$P/exec" '{"cmd":"true"}'
api PATCH "/v1/sandboxes/$P/lifecycle" '{"ttl_seconds":6,"idle_pause_seconds":2}'
[ "$STATUS" = 200 ] && [ "$(jget 'j["idle_pause_seconds"]')" = 2 ] && pass idle_pause_set "idle_pause_seconds 2, ttl 6" ||
	fail idle_pause_set "$STATUS $BODY"
act0=$(jget 'j["last_active_at"]')
seen=$(wait_status "$P" paused 15)
api GET "/v1/sandboxes/$P"
check idle_pause_pauses "idle 2 s: $seen, last_active_at $act0 -> $(jget 'j["last_active_at"]')" \
	[ "$seen" = paused -a "$(jget 'j["last_active_at"]')" = "$act0" ]
seen=$(wait_status "$P" hibernated 30)
check idle_pause_then_ttl "then its 6 s TTL: $seen" [ "$seen" = hibernated ]
api POST "/v1/sandboxes/$P/exec" '{"cmd":"cat /root/p"}'
check idle_pause_wakes "exec: $(jget 'j.get("stdout")')" [ "$(jget 'j.get("stdout")')" = persisted ]
api PATCH "/v1/sandboxes/$P/lifecycle" '{"ttl_seconds":600,"idle_pause_seconds":0}'
[ "$STATUS" = 200 ] && [ "$(jget 'j["idle_pause_seconds"]')" = 0 ] && pass idle_pause_off "idle_pause_seconds 0" ||
	fail idle_pause_off "$STATUS $BODY"
api PATCH "/v1/sandboxes/$P/lifecycle" '{"idle_pause_seconds":-1}'
expect idle_pause_negative 400 invalid_request
api POST /v1/sandboxes '{"template":"minimal","idle_pause_seconds":"60"}'
expect idle_pause_not_int 400 invalid_request
api POST /v1/sandboxes '{"template":"minimal","idle_pause_seconds":604801}'
expect idle_pause_over_week 400 invalid_request
api PATCH "/v1/sandboxes/$P/lifecycle" '{"persistent":"yes"}'
expect persistent_not_bool 400 invalid_request
api PATCH "/v1/sandboxes/$P/lifecycle" '{}'
expect lifecycle_empty 400 invalid_request
api POST /v1/sandboxes '{"template":"minimal","persistent":1}'
expect persistent_create_not_bool 400 invalid_request
KEY_MAIN=$KEY KEY=$ABS
api POST /v1/sandboxes '{"template":"minimal","persistent":true}'
expect persistent_abs_plan_refused 403 forbidden
grep -q "no persistent sandboxes" <<<"$BODY" && pass persistent_abs_says_why "$(jget 'j["error"]["message"]')" ||
	fail persistent_abs_says_why "$BODY"
KEY=$KEY_MAIN
api DELETE "/v1/sandboxes/$P"
if one_box pause_nothing_left "counts its kiln-vmm processes"; then
check pause_nothing_left "sandbox VMMs $(sandbox_vmms | wc -l)" [ "$(sandbox_vmms | wc -l)" = 0 ]
fi
alive alive_at_end
