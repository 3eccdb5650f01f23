#!/bin/bash
# Plans and their limits (docs/billing.md): a workspace on a plan from the
# operator's plans file gets exactly its running limit from eight parallel
# creates (the others 429 limit_exceeded naming limit, value and plan),
# forks are held to it too, the creates window refuses with Retry-After and
# admits again once it passed, X-RateLimit-* count down, the plan's TTL cap
# holds, a sandbox larger than the plan allows is refused, a kilnd restart
# keeps the window, and a workspace of the default plan is not limited.
# A running-limit refusal says Retry-After (1 s while slots are starting,
# 10 s when all run), and a plan changed through the operator's API
# (PUT /v1/admin/plans/NAME) holds at the next create.
# With KILN_API_URL, against that endpoint (lib.sh; tests/cluster/e2e.sh:
# a replica given the plans file and window below): workspaces are put
# on plans through the operator API instead of `kilnd workspace plan`,
# and what needs kilnd's own process or CLI is a SKIP line.
. "$(dirname "$0")/lib.sh"
endpoint || have_kvm || { fail plans_kvm "no KVM here: run it in tests/host/run"; exit 1; }	# an endpoint's hosts run its sandboxes

build_template minimal || exit 1
# The operator's plans file (an endpoint's kilnd is given the same).
PLANS=$REPO/tests/e2e/80-kilnd-plans.json
# The "hour" of creates_per_hour is W s here: 120 in the full tier, 75 in
# the quick one (the window's cases below take about 30 s; the other
# workspaces' cases run while the window passes).
W=$(full && echo 120 || echo 75)
kilnd_args=(--rate 0 --plans "$PLANS" --plan-window "$W")
if one_box "plan_set plan_unknown plan_bad_limit" "kilnd workspace plan on its data directory"; then
"$KILND" --data "$DATA" --plans "$PLANS" workspace plan w-tiny tiny > "$T/ws.out" 2>&1
grep -q '^w-tiny tiny {"running":3,"creates_per_hour":6,' "$T/ws.out" &&
	pass plan_set "$(cat "$T/ws.out")" || fail plan_set "$(cat "$T/ws.out")"
"$KILND" --data "$DATA" --plans "$PLANS" workspace plan w-small small '{"running": 9}' > /dev/null 2>&1
"$KILND" --data "$DATA" workspace plan w-x gold > "$T/bad.out" 2>&1
grep -q "plan gold: no such plan (free, pro, team, enterprise" "$T/bad.out" &&
	pass plan_unknown "$(cat "$T/bad.out")" || fail plan_unknown "$(cat "$T/bad.out")"
"$KILND" --data "$DATA" workspace plan w-x free '{"runing": 1}' > "$T/bad.out" 2>&1
grep -q "unknown limit 'runing'" "$T/bad.out" && pass plan_bad_limit "$(cat "$T/bad.out")" ||
	fail plan_bad_limit "$(cat "$T/bad.out")"
for w in idle abs keep store one; do
	"$KILND" --data "$DATA" --plans "$PLANS" workspace plan "w-$w" "$w" > /dev/null 2>&1
done
else
	# The same workspaces on the same plans, through the operator API.
	endpoint_plan w-tiny tiny && endpoint_plan w-small small '{"running": 9}' || exit 1
	for w in idle abs keep store one; do endpoint_plan "w-$w" "$w" || exit 1; done
fi
start_kilnd "${kilnd_args[@]}" || exit 1
TINY=$(new_key w-tiny) SMALL=$(new_key w-small) OPEN=$(new_key w-open) IDLE=$(new_key w-idle) ABS=$(new_key w-abs)
KEEP=$(new_key w-keep) STORE=$(new_key w-store)

# create_h NAME BODY: POST /v1/sandboxes as $KEY, headers in $T/NAME.h.
create_h() { api POST /v1/sandboxes "$2" -D "$T/$1.h"; }
header() { sed -n "s/^$2: *//Ip" "$T/$1.h" | tr -d '\r'; }

# ---- eight at once against running 3 --------------------------------------------------------
KEY=$TINY
pids=()
for i in $(seq 1 8); do
	curl -s -m 300 -o "$T/c$i.json" -D "$T/c$i.h" -w '%{http_code}\n' -X POST -H "Authorization: Bearer $KEY" \
		--data-binary '{"template":"minimal"}' "$URL/v1/sandboxes" > "$T/c$i.code" &
	pids+=($!)
done
wait "${pids[@]}"
made=() refused=0 other= retries=
for i in $(seq 1 8); do
	case $(cat "$T/c$i.code") in
	201) made+=("$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$T/c$i.json")") ;;
	429) retries+=" $(header c$i Retry-After)"
		python3 - "$T/c$i.json" <<'PY' && refused=$((refused + 1)) || other+="$i:$(head -c 200 "$T/c$i.json") "
import json, sys
e = json.load(open(sys.argv[1]))["error"]
ok = (e["code"], e["limit"], e["value"], e["plan"]) == ("limit_exceeded", "running", 3, "tiny")
sys.exit(0 if ok and "its limit is 3 (plan tiny)" in e["message"] else 1)
PY
		;;
	*) other+="$i:$(cat "$T/c$i.code") $(head -c 200 "$T/c$i.json") " ;;
	esac
done
[ ${#made[@]} = 3 ] && [ $refused = 5 ] && [ -z "$other" ] &&
	pass running_exact "8 at once: 3 created, 5 refused 429 limit_exceeded (running, 3, tiny)" ||
	fail running_exact "${#made[@]} created, $refused refused as documented, others: $other"
api GET /v1/sandboxes
[ "$(jget 'sum(1 for s in j["sandboxes"] if s["status"] == "running")')" = 3 ] &&
	pass running_listed "3 running, no half-made sandbox" || fail running_listed "$BODY"
api GET /v1/limits
[ "$(jget '(j["plan"], j["limits"]["running"], j["limits"]["creates_per_hour"], j["window_seconds"], j["in_use"]["running"], j["in_use"]["creates_in_window"])')" = "('tiny', 3, 6, $W, 3, 3)" ] &&
	pass limits_in_use "GET /v1/limits: $BODY" || fail limits_in_use "$STATUS $BODY"
KILN_API_URL=$URL KILN_API_KEY=$TINY "$BUILD/kiln" limits > "$T/limits.txt" 2>&1
grep -q '^plan  *tiny$' "$T/limits.txt" && grep -q '^running  *3 (3 in use)$' "$T/limits.txt" &&
	grep -q '^creates_per_hour  *6 (3 in the last '"$W"' s)$' "$T/limits.txt" && grep -q '^vcpus  *none$' "$T/limits.txt" &&
	pass cli_limits "kiln limits: $(tr '\n' '|' < "$T/limits.txt")" || fail cli_limits "$(cat "$T/limits.txt")"
api POST "/v1/sandboxes/${made[0]}/fork" '{}' -D "$T/fork.h"
[ "$STATUS" = 429 ] && [ "$(jget 'j["error"]["limit"]')" = running ] &&
	pass fork_counts "a fork at the limit: 429 running" || fail fork_counts "$STATUS $BODY"
# Retry-After of the running limit (docs/billing.md): 1 s while the
# slots' sandboxes are still starting (the burst's refusals came while
# the 3 admitted were), 10 s once all of them run (the fork's).
fretry=$(header fork Retry-After)
check running_retry_after "burst refusals: Retry-After$retries; at the limit with all running: $fretry" \
	eval '[ "$(echo $retries)" = "1 1 1 1 1" ] && [ "$fretry" = 10 ]'

# ---- hibernated ones make room ---------------------------------------------------------------
api POST "/v1/sandboxes/${made[0]}/hibernate" '{}'
create_h h4 '{"template":"minimal"}'
[ "$STATUS" = 201 ] && pass hibernated_make_room "3 running + 1 hibernated: the 4th create is admitted" ||
	fail hibernated_make_room "$STATUS $BODY"
fourth=$(jget 'j["id"]')
# ... but waking it starts it again: at the cap (3 running), a wake, and
# a request that would wake it, are refused, and it stays hibernated.
api POST "/v1/sandboxes/${made[0]}/wake" '{}'
wake="$STATUS $(jget 'j["error"]["code"]') $(jget 'j["error"]["message"]')"
api POST "/v1/sandboxes/${made[0]}/exec" '{"cmd":"true"}'
wexec="$STATUS $(jget 'j["error"]["code"]')"
api GET "/v1/sandboxes/${made[0]}"
check wake_counts "wake: $wake; exec: $wexec; then $(jget 'j["status"]')" \
	eval '[[ $wake == "429 limit_exceeded "*"limit is 3"* ]] && [ "$wexec" = "429 limit_exceeded" ] && [ "$(jget '\''j["status"]'\'')" = hibernated ]'
# 4 made in the window of 6: the headers count down.
lim=$(header h4 X-RateLimit-Limit) rem=$(header h4 X-RateLimit-Remaining) rst=$(header h4 X-RateLimit-Reset)
[ "$lim" = 6 ] && [ "$rem" = 2 ] && [ -n "$rst" ] && [ "$rst" -ge 1 ] && [ "$rst" -le "$W" ] &&
	pass ratelimit_headers "Limit $lim, Remaining $rem, Reset $rst s" ||
	fail ratelimit_headers "Limit '$lim', Remaining '$rem', Reset '$rst': $(cat "$T/h4.h")"
# Every answer to the workspace carries its window, not only creates'.
api GET /v1/sandboxes "" -D "$T/list.h"
api GET /v1/limits "" -D "$T/lim.h"
l2=$(header list X-RateLimit-Limit) r2=$(header list X-RateLimit-Remaining) r3=$(header lim X-RateLimit-Remaining) t2=$(header list X-RateLimit-Reset)
[ "$l2" = 6 ] && [ "$r2" = 2 ] && [ "$r3" = 2 ] && [ -n "$t2" ] && [ "$t2" -le "$W" ] &&
	pass ratelimit_every_answer "GET /v1/sandboxes and /v1/limits: Limit $l2, Remaining $r2 and $r3, Reset $t2 s" ||
	fail ratelimit_every_answer "Limit '$l2' Remaining '$r2' '$r3' Reset '$t2': $(cat "$T/list.h")"

# ---- the creates window -----------------------------------------------------------------------
for s in "${made[@]:1}" "$fourth"; do api DELETE "/v1/sandboxes/$s"; done
# With room again the wake goes through (and it goes back to sleep, so
# that the window's checks below count what they create).
api POST "/v1/sandboxes/${made[0]}/wake" '{}'
woke=$STATUS
api POST "/v1/sandboxes/${made[0]}/hibernate" '{}'
check wake_with_room "wake: $woke; hibernate again: $STATUS" [ "$woke" = 200 -a "$STATUS" = 200 ]
create_h h5 '{"template":"minimal","ttl_seconds":120}'
fifth=$(jget 'j["id"]')
[ "$STATUS" = 201 ] && [ "$(jget 'j["ttl_seconds"]')" = 120 ] || fail window_5 "$STATUS $BODY"
create_h h6 '{"template":"minimal"}'
sixth=$(jget 'j["id"]')
[ "$STATUS" = 201 ] && [ "$(jget 'j["ttl_seconds"]')" = 120 ] &&
	pass ttl_capped "no ttl_seconds: the server's 600 s capped to the plan's 120" || fail ttl_capped "$STATUS $BODY"
[ "$(header h6 X-RateLimit-Remaining)" = 0 ] || fail window_6 "Remaining $(header h6 X-RateLimit-Remaining)"
api DELETE "/v1/sandboxes/$fifth"
create_h h7 '{"template":"minimal"}'
retry=$(header h7 Retry-After)
[ "$STATUS" = 429 ] && [ "$(jget 'j["error"]["limit"]')" = creates_per_hour ] &&
	[ "$(jget 'j["error"]["value"]')" = 6 ] && [ -n "$retry" ] && [ "$retry" -ge 1 ] && [ "$retry" -le "$W" ] &&
	pass window_refused "7th create in the window: 429 creates_per_hour, Retry-After $retry s" ||
	fail window_refused "$STATUS Retry-After '$retry' $BODY"
api POST /v1/sandboxes '{"template":"minimal","ttl_seconds":121}'
[ "$STATUS" = 400 ] && grep -q ttl_seconds <<<"$BODY" && pass ttl_over_plan "121 s over the plan's 120: 400" ||
	fail ttl_over_plan "$STATUS $BODY"

# ---- a restart keeps the window; waiting Retry-After admits again ----------------------------
# (And the running cap holds for wakes at once, before the workspace
# creates anything: w-one, running 1, has one running and one hibernated.)
KEY=$(new_key w-one)
ONE_KEY=$KEY
create_sandbox; O1=$SBX
api POST "/v1/sandboxes/$O1/hibernate" '{}'
create_sandbox; O2=$SBX
retry2=
if one_box "wake_cap_after_restart window_survives_restart" "restarts kilnd's own process"; then
stop_kilnd
start_kilnd "${kilnd_args[@]}" || exit 1
api POST "/v1/sandboxes/$O1/wake" '{}'
w1="$STATUS $(jget 'j["error"]["message"]')"
api DELETE "/v1/sandboxes/$O2"
api POST "/v1/sandboxes/$O1/wake" '{}'
w2=$STATUS
api DELETE "/v1/sandboxes/$O1"
check wake_cap_after_restart "wake at the cap right after a restart: $w1; with room: $w2" \
	eval '[[ $w1 == "429 waking it would make 2 "*"limit is 1"* ]] && [ "$w2" = 200 ]'
KEY=$TINY
create_h h8 '{"template":"minimal"}'
retry2=$(header h8 Retry-After)
[ "$STATUS" = 429 ] && [ "$(jget 'j["error"]["limit"]')" = creates_per_hour ] &&
	pass window_survives_restart "after a restart still 429, Retry-After $retry2 s" ||
	fail window_survives_restart "$STATUS $BODY"
else
	for s in "$O2" "$O1"; do api DELETE "/v1/sandboxes/$s"; done
fi
# The other workspaces' cases run while tiny waits out its Retry-After
# (window_slides, below).
slide_at=$(( SECONDS + ${retry2:-$retry} + 1 ))

# ---- size, and a workspace without a plan ----------------------------------------------------
KEY=$SMALL
api POST /v1/sandboxes '{"template":"minimal"}'
[ "$STATUS" = 429 ] && [ "$(jget 'j["error"]["limit"]')" = memory_mib ] && [ "$(jget 'j["error"]["value"]')" = 128 ] &&
	pass size_refused "a 256 MiB sandbox on plan small (128 MiB): 429 memory_mib" || fail size_refused "$STATUS $BODY"
# A create's disk_mib (nothing is made for any of these): over the plan's
# disk_mib 429 naming it, under the template's 64 MiB or not an integer 400.
api POST /v1/sandboxes '{"template":"minimal","disk_mib":200}'
d1="$STATUS $(jget 'j["error"]["limit"], j["error"]["value"], j["error"]["plan"]')"
api POST /v1/sandboxes '{"template":"minimal","disk_mib":32}'
d2="$STATUS $(jget 'j["error"]["message"]')"
api POST /v1/sandboxes '{"template":"minimal","disk_mib":"lots"}'
d3="$STATUS $(jget 'j["error"]["message"]')"
check disk_refused "$d1 | $d2 | $d3" \
	eval '[ "$d1" = "429 ('\''disk_mib'\'', 100, '\''small'\'')" ] && [[ $d2 == "400 "*"disk_mib 32 is smaller than template minimal"*"64 MiB"* ]] && [[ $d3 == "400 "*disk_mib* ]]'
KEY=$OPEN
open=()
for i in 1 2 3 4; do
	create_h open$i '{"template":"minimal"}'
	[ "$STATUS" = 201 ] && open+=("$(jget 'j["id"]')")
done
api GET /v1/limits
[ ${#open[@]} = 4 ] && [ -z "$(header open4 X-RateLimit-Limit)" ] && [ "$(jget 'j["plan"], j["limits"]["running"]')" = "('enterprise', 0)" ] &&
	pass default_plan_open "the default plan (enterprise): 4 running beside tiny's, no rate headers" ||
	fail default_plan_open "${#open[@]} of 4: $BODY"

# ---- what a workspace keeps on disk: hibernated sandboxes and snapshots ------------------------
KEY=$KEEP
create_sandbox; K1=$SBX
create_sandbox; K2=$SBX
api POST "/v1/sandboxes/$K1/snapshot" '{}'
s1="$STATUS" S1=$(jget 'j["id"]')
api POST "/v1/sandboxes/$K1/snapshot" '{}'
check snapshots_limit "second snapshot on plan keep (snapshots 1): $STATUS $(jget 'j["error"]["limit"], j["error"]["value"], j["error"]["message"]')" \
	eval '[ "$s1" = 201 ] && [ "$STATUS" = 429 ] && [ "$(jget '\''j["error"]["code"], j["error"]["limit"], j["error"]["value"], j["error"]["plan"]'\'')" = "('\''limit_exceeded'\'', '\''snapshots'\'', 1, '\''keep'\'')" ] && grep -q "delete one first" "$T/body"'
api DELETE "/v1/snapshots/$S1"
api POST "/v1/sandboxes/$K1/snapshot" '{}'
S2=$(jget 'j["id"]')
check snapshots_room_again "after deleting $S1: $STATUS $S2" [ "$STATUS" = 201 ]
api POST "/v1/sandboxes/$K1/hibernate" '{}'
h1=$STATUS
api POST "/v1/sandboxes/$K2/hibernate" '{}'
h2="$STATUS $(jget 'j["error"]["limit"], j["error"]["value"]')"
api GET "/v1/sandboxes/$K2"
check hibernated_limit "hibernate K1: $h1; K2 at the limit: $h2; K2 then $(jget 'j["status"]')" \
	eval '[ "$h1" = 200 ] && [ "$h2" = "429 ('\''hibernated'\'', 1)" ] && [ "$(jget '\''j["status"]'\'')" = running ]'
api POST "/v1/sandboxes/$K1/hibernate" '{}'
check hibernated_again_conflict "hibernating the hibernated one: $STATUS $(jget 'j["error"]["code"]')" [ "$STATUS" = 409 ]
api GET /v1/limits
check limits_kept "GET /v1/limits: $(jget 'j["limits"]["hibernated"], j["limits"]["snapshots"], j["in_use"]["hibernated"], j["in_use"]["snapshots"]')" \
	eval '[ "$(jget '\''j["limits"]["hibernated"], j["limits"]["snapshots"], j["in_use"]["hibernated"], j["in_use"]["snapshots"]'\'')" = "(1, 1, 1, 1)" ]'
KILN_API_URL=$URL KILN_API_KEY=$KEEP "$BUILD/kiln" limits > "$T/keep.txt" 2>&1
check cli_limits_kept "kiln limits: $(grep -E '^(hibernated|snapshots) ' "$T/keep.txt" | tr '\n' '|')" \
	eval 'grep -q "^hibernated  *1 (1 in use)$" "$T/keep.txt" && grep -q "^snapshots  *1 (1 in use)$" "$T/keep.txt"'
mcp_h=(-H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2025-06-18')
api POST /mcp '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}' "${mcp_h[@]}"
api POST /mcp '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"hibernate_sandbox","arguments":{"sandbox_id":"'"$K2"'"}}}' "${mcp_h[@]}"
check mcp_hibernated_limit "MCP hibernate at the limit: $(head -c 300 <<<"$BODY")" \
	eval 'grep -q "\"isError\":true" <<<"$BODY" && grep -q "hibernated 1" <<<"$BODY"'
api POST "/v1/sandboxes/$K1/wake" '{}'
w1=$STATUS
api POST "/v1/sandboxes/$K2/hibernate" '{}'
check hibernated_room_again "wake K1: $w1; then K2 hibernates: $STATUS" [ "$w1" = 200 -a "$STATUS" = 200 ]
api DELETE "/v1/snapshots/$S2"

# ---- the bytes a workspace keeps: storage_mib ----------------------------------------------------
# Plan store: 1 MiB. A snapshot of a running sandbox takes more (its
# memory as allocated blocks); then a second one and a hibernation are
# refused naming storage_mib, until the snapshot is deleted.
KEY=$STORE
create_sandbox; M1=$SBX
api POST "/v1/sandboxes/$M1/snapshot" '{}'
m1=$STATUS MS=$(jget 'j["id"]')
api GET /v1/snapshots
sb=$(jget "[s['stored_bytes'] for s in j['snapshots'] if s['id'] == '$MS'][0]")
api POST "/v1/sandboxes/$M1/snapshot" '{}'
m2="$STATUS $(jget 'j["error"]["limit"], j["error"]["value"], j["error"]["plan"]')"
api POST "/v1/sandboxes/$M1/hibernate" '{}'
m3="$STATUS $(jget 'j["error"]["limit"]')"
api GET /v1/limits
lim="$(jget 'j["in_use"]["stored_bytes"], j["in_use"]["storage_mib"], j["limits"]["storage_mib"]')"
storage_ok() {
	[ "$m1" = 201 ] && [ "$sb" -gt 1048576 ] && [ "$m2" = "429 ('storage_mib', 1, 'store')" ] &&
		[ "$m3" = "429 storage_mib" ] && [ "$lim" = "($sb, $(( (sb + 1048575) / 1048576 )), 1)" ]
}
check storage_limit "snapshot: $m1, $sb bytes stored; second: $m2; hibernate: $m3; /v1/limits (stored_bytes, storage_mib, cap): $lim" storage_ok
api DELETE "/v1/snapshots/$MS"
api POST "/v1/sandboxes/$M1/hibernate" '{}'
h=$STATUS
api GET "/v1/sandboxes/$M1"
hb=$(jget 'j["usage"]["stored_bytes"]')
api POST "/v1/sandboxes/$M1/wake" '{}'
w=$STATUS
api GET "/v1/sandboxes/$M1"
after=$(jget 'j["usage"]["stored_bytes"]')
check storage_hibernated "snapshot deleted: hibernate $h, $hb bytes stored while hibernated; wake $w, then $after" \
	eval '[ "$h" = 200 ] && [ "$hb" -gt 1048576 ] && [ "$w" = 200 ] && [ "$after" = 0 ]'
api DELETE "/v1/sandboxes/$M1"
KEY=$KEEP

# ---- a suspended workspace stops: its sandboxes hibernate, its ports answer nobody --------------
api DELETE "/v1/sandboxes/$K2"
api POST "/v1/sandboxes/$K1/exec" '{"cmd":"echo before-suspension > /root/kept"}'
api POST "/v1/sandboxes/$K1/ports" '{"port":8080,"public":true}'
exposed=$STATUS
# That the suspension hibernated it: kilnd's log says so and why. An
# endpoint's log is not the test's, and the workspace's keys are refused
# while it is suspended: there a command left running in it, whose call
# ends with the hibernation (as 81-kilnd-billing's credit_ends_command),
# says when; suspended_restored reads it hibernated afterwards.
if endpoint; then
	curl -s -m 150 -o "$T/susp.body" -w '%{http_code}' -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \
		--data-binary '{"cmd":"sleep 120; echo slept","timeout_seconds":140}' "$URL/v1/sandboxes/$K1/exec" > "$T/susp.status" &
	susp_pid=$!
	sleep 2
fi
suspended_hib() {
	if endpoint; then ! kill -0 "$susp_pid" 2>/dev/null && ! grep -q slept "$T/susp.body"
	else grep -q "sandbox $K1 hibernated (the operator suspended the workspace)" "$T/kilnd.log"; fi
}
OP=$(operator_key)
KEY=$OP
W_KEEP=$(ws_name w-keep) W_ONE=$(ws_name w-one)
api PATCH "/v1/admin/workspaces/$W_KEEP" '{"suspended":true}'
susp=$STATUS
for i in $(seq 1 120); do
	suspended_hib && break
	sleep 0.5
done
if endpoint; then said="the command's call ended: $(cat "$T/susp.status") $(head -c 120 "$T/susp.body")"
else said=$(grep -o "sandbox $K1 hibernated.*" "$T/kilnd.log" | head -1); fi
port_code=$(curl -s -m 30 -o "$T/port.json" -w '%{http_code}' "$URL/v1/sandboxes/$K1/proxy/8080/")
check suspended_stops "PATCH suspended: $susp; kilnd: '$said'; public port without a key: $port_code $(head -c 160 "$T/port.json")" \
	eval '[ "$exposed" = 201 ] && [ "$susp" = 200 ] && suspended_hib && [ "$port_code" = 403 ] && grep -q workspace_suspended "$T/port.json"'
api PATCH "/v1/admin/workspaces/$W_KEEP" '{"suspended":false}'
KEY=$KEEP
api GET "/v1/sandboxes/$K1"
st=$(jget 'j["status"]')
api POST "/v1/sandboxes/$K1/exec" '{"cmd":"cat /root/kept"}'
check suspended_restored "restored: $K1 was $st; exec (it wakes): $STATUS $(jget 'j["stdout"].strip()')" \
	eval '[ "$st" = hibernated ] && [ "$STATUS" = 200 ] && [ "$(jget '\''j["stdout"].strip()'\'')" = before-suspension ]'
api DELETE "/v1/sandboxes/$K1"

# ---- the operator's plans (PUT /v1/admin/plans/NAME): held at once ----------------------------
# Plan one (running 1, from the plans file) raised to 2 through the API:
# w-one runs 2, the 3rd is refused naming 2; {} gives the file's 1 back,
# held at the next create; a plan made through the API, set on the
# workspace, holds too; kilnd workspace plan knows it.
KEY=$OP
api PUT /v1/admin/plans/one '{"limits":{"running":2}}'
p1="$STATUS $(jget 'j["limits"]["running"], j["server_plan"]')"
KEY=$ONE_KEY
create_sandbox; Q1=$SBX
create_sandbox; Q2=$SBX
api POST /v1/sandboxes '{"template":"minimal"}' -D "$T/q3.h"
q3="$STATUS $(jget 'j["error"]["limit"], j["error"]["value"], j["error"]["plan"]') $(header q3 Retry-After)"
KEY=$OP
api PUT /v1/admin/plans/one '{"limits":{}}'
p2="$STATUS $(jget 'j["limits"]["running"]')"
KEY=$ONE_KEY
api DELETE "/v1/sandboxes/$Q2"
api POST /v1/sandboxes '{"template":"minimal"}'
q4="$STATUS $(jget 'j["error"]["limit"], j["error"]["value"]')"
KEY=$OP
api PUT /v1/admin/plans/gold '{"limits":{"memory_mib":128}}'
p3=$STATUS
api PATCH "/v1/admin/workspaces/$W_ONE" '{"plan":"gold"}'
KEY=$ONE_KEY
api POST /v1/sandboxes '{"template":"minimal"}'
q5="$STATUS $(jget 'j["error"]["limit"], j["error"]["value"], j["error"]["plan"]')"
# What the host's CLI says of the workspace (`kilnd workspace show`);
# against an endpoint, the operator API's record of it, in those words.
if endpoint; then
	_op GET "/v1/admin/workspaces/$W_ONE"
	ws_gold="$(_op_json 'j["name"]') $(_op_json 'j["plan"]') $(_op_json 'json.dumps(j["limits"])')"
	ws_gold=${ws_gold/#"$W_ONE "/w-one }
else
	ws_gold=$("$KILND" --data "$DATA" --plans "$PLANS" workspace show w-one 2>&1)
fi
KEY=$OP
api PATCH "/v1/admin/workspaces/$W_ONE" '{"plan":"one"}'
KEY=$ONE_KEY
api DELETE "/v1/sandboxes/$Q1"
check operators_plan_held "PUT one running 2: $p1; 3rd create: $q3; PUT {}: $p2; 2nd create: $q4; PUT gold: $p3, on it: $q5; kilnd: $ws_gold" \
	eval '[ "$p1" = "200 (2, True)" ] && [ -n "$Q1" ] && [ -n "$Q2" ] && [ "$q3" = "429 ('\''running'\'', 2, '\''one'\'') 10" ] && [ "$p2" = "200 1" ] && [ "$q4" = "429 ('\''running'\'', 1)" ] && [ "$p3" = 201 ] && [ "$q5" = "429 ('\''memory_mib'\'', 128, '\''gold'\'')" ] && [[ $ws_gold == "w-one gold {"* ]]'

# ---- tiny's window, waited out: admits again -----------------------------------------------------
while [ $SECONDS -lt $slide_at ]; do sleep 1; done
KEY=$TINY
create_h h9 '{"template":"minimal"}'
[ "$STATUS" = 201 ] && pass window_slides "after Retry-After: 201, Remaining $(header h9 X-RateLimit-Remaining)" ||
	fail window_slides "$STATUS $BODY"
ninth=$(jget 'j["id"]')

# ---- MCP is held to the same limits ------------------------------------------------------------
KEY=$TINY
mcp_h=(-H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2025-06-18')
api POST /mcp '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}' "${mcp_h[@]}"
api POST /mcp '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"create_sandbox","arguments":{"template":"minimal","ttl_seconds":9999}}}' "${mcp_h[@]}"
grep -q 'ttl_seconds' <<<"$BODY" && grep -q '"isError":true' <<<"$BODY" &&
	pass mcp_ttl_cap "MCP create_sandbox: the plan's TTL cap, a tool error" || fail mcp_ttl_cap "$STATUS $(head -c 300 <<<"$BODY")"

# ---- the TTL rules: hibernate when idle, then delete; count from creation ---------------------
KEY=$IDLE
api POST /v1/sandboxes '{"template":"minimal","ttl_seconds":4}'
I=$(jget 'j["id"]')
rule=$(jget 'j["ttl_rule"]["when_idle"], j["ttl_rule"]["hibernated_retention_seconds"]')
api POST "/v1/sandboxes/$I/exec" '{"cmd":"echo kept-by-hibernation > /root/f"}'
got=$(wait_status "$I" hibernated 40)
[ "$rule" = "('hibernate', 8)" ] && [ "$got" = hibernated ] &&
	pass idle_hibernated "idle for its 4 s TTL: hibernated, not deleted (ttl_rule $rule)" ||
	fail idle_hibernated "ttl_rule $rule, status $got"
got=$(wait_status "$I" ended:ttl 40)
[ "$got" = ended:ttl ] && pass retention_deleted "hibernated, then deleted after the 8 s retention: 404 sandbox_ended ttl" ||
	fail retention_deleted "status $got"
KEY=$ABS
api POST /v1/sandboxes '{"template":"minimal","ttl_seconds":6}'
A=$(jget 'j["id"]')
from=$(jget 'j["ttl_rule"]["counts_from"]')
t0=$(date +%s)
curl -s -m 90 -o "$T/busy" -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \
	--data-binary '{"cmd":"sleep 60","timeout_seconds":80}' "$URL/v1/sandboxes/$A/exec" &
busy=$!
got=$(wait_status "$A" ended:ttl 40)
took=$(( $(date +%s) - t0 ))
wait $busy
[ "$from" = creation ] && [ "$got" = ended:ttl ] && [ $took -lt 40 ] &&
	pass absolute_while_busy "counted from creation: deleted after ${took} s with a 60 s command running" ||
	fail absolute_while_busy "counts_from $from, status $got after $took s"

KEY=$OPEN
for s in "${open[@]}"; do api DELETE "/v1/sandboxes/$s"; done
KEY=$TINY
for s in "$sixth" "$ninth" "${made[0]}"; do api DELETE "/v1/sandboxes/$s"; done
alive plans_kilnd
