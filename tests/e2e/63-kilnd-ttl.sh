#!/bin/bash
# TTL is an idle timeout: with ttl_seconds 2, an idle sandbox is deleted,
# one running a command is not (it goes 2 s after the command ends), one
# that runs a short command every 0.5 s is kept, and reading a sandbox
# (GET, list, logs) is not activity: one polled by GET still expires.
. "$(dirname "$0")/lib.sh"

build_template minimal || exit 1
start_kilnd --rate 0 || exit 1
KEY=$(new_key ttl)

create_sandbox '{"template":"minimal","ttl_seconds":2}'
IDLE=$SBX
create_sandbox '{"template":"minimal","ttl_seconds":2}'
BUSY=$SBX
create_sandbox '{"template":"minimal","ttl_seconds":2}'
POKED=$SBX
create_sandbox '{"template":"minimal","ttl_seconds":2}'
POLLED=$SBX
[ -n "$IDLE" ] && [ -n "$BUSY" ] && [ -n "$POKED" ] && [ -n "$POLLED" ] ||
	{ fail ttl_setup "creates failed: $BODY"; exit 1; }
# The busy one runs a 6 s command; the poked one runs `true` every 0.5 s;
# the polled one is only read (GET, list, logs) every 0.5 s.
curl -s -o "$T/busy.json" -X POST -H "Authorization: Bearer $KEY" --data-binary '{"cmd":"sleep 6; echo done"}' \
	"$URL/v1/sandboxes/$BUSY/exec" &
BUSY_PID=$!
t0=$SECONDS
polled_seen=0
for i in $(seq 1 9); do
	api POST "/v1/sandboxes/$POKED/exec" '{"cmd":"true"}'
	api GET "/v1/sandboxes/$POLLED"
	[ "$STATUS" = 200 ] && polled_seen=$((polled_seen + 1))
	api GET "/v1/sandboxes?limit=5"
	api GET "/v1/sandboxes/$POLLED/logs?tail=1"
	sleep 0.5
done
api GET "/v1/sandboxes/$IDLE"
expect ttl_idle_deleted 404 sandbox_ended
api GET "/v1/sandboxes/$POLLED"
[ "$STATUS" = 404 ] && [ "$polled_seen" -lt 9 ] &&
	pass ttl_reads_not_activity "polled by GET/list/logs every 0.5 s: still expired (seen $polled_seen times)" ||
	fail ttl_reads_not_activity "$STATUS after $polled_seen reads: $BODY"
grep -q '"ended": *"ttl"' <<<"$BODY" && pass ttl_ended_reason "$BODY" || fail ttl_ended_reason "$BODY"

api GET "/v1/sandboxes/$BUSY"
[ "$STATUS" = 200 ] && pass ttl_busy_kept "running a command after $((SECONDS - t0)) s with a 2 s TTL" || fail ttl_busy_kept "$STATUS $BODY"
api GET "/v1/sandboxes/$POKED"
[ "$STATUS" = 200 ] && pass ttl_activity_counts "exec every 0.5 s: kept" || fail ttl_activity_counts "$STATUS $BODY"
wait $BUSY_PID
grep -q '"stdout":"done\\n"' "$T/busy.json" && pass ttl_busy_command_finished "the command ran to its end" ||
	fail ttl_busy_command_finished "$(cat "$T/busy.json")"
sleep 3.5
KEY_SAVED=$KEY
api GET "/v1/sandboxes/$BUSY"
expect ttl_busy_deleted_after 404 sandbox_ended
api GET "/v1/sandboxes/$POKED"
expect ttl_poked_deleted_when_left 404 sandbox_ended
check ttl_nothing_left "sandbox VMMs $(sandbox_vmms | wc -l), directories $(ls "$DATA/sandboxes" | wc -l)" \
	[ "$(sandbox_vmms | wc -l)" = 0 -a "$(ls "$DATA/sandboxes" | wc -l)" = 0 ]
# A hibernated sandbox is deleted by its TTL too, and ttl 0 keeps one.
create_sandbox '{"template":"minimal","ttl_seconds":2}'
H=$SBX
api POST "/v1/sandboxes/$H/hibernate"
create_sandbox '{"template":"minimal","ttl_seconds":0}'
KEEP=$SBX
sleep 4
api GET "/v1/sandboxes/$H"
expect ttl_hibernated_deleted 404 sandbox_ended
api GET "/v1/sandboxes/$KEEP"
[ "$STATUS" = 200 ] && pass ttl_zero_kept "ttl 0: kept" || fail ttl_zero_kept "$STATUS $BODY"
api DELETE "/v1/sandboxes/$KEEP"
alive alive_at_end
