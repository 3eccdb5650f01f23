#!/bin/bash
# TTL is an idle timeout: with ttl_seconds 10, an idle sandbox is deleted,
# one running a command is not (it goes 10 s after the command ends), one
# that runs a short command every 0.5 s is kept, and reading a sandbox
# (GET, list, logs) is not activity: one polled by GET still expires.
# With KILN_API_URL, against that endpoint (lib.sh; tests/cluster/e2e.sh).
# tier: full: a slow file whose ground the quick tier covers otherwise (e2e 80 checks the TTL rules (idle hibernate, then delete) and the SDK tests set TTLs)
. "$(dirname "$0")/lib.sh"

build_template minimal || exit 1
start_kilnd --rate 0 || exit 1
KEY=$(new_key ttl)

# Made with a long TTL, then all given 10 s at once (PATCH counts as
# activity, so each clock starts there): slow creates must not use up a
# TTL before the test begins. 10 s, not 2: in the emulated host on a busy
# machine one exec can take seconds.
for v in IDLE BUSY POKED POLLED; do
	create_sandbox '{"template":"minimal","ttl_seconds":3600}'
	[ -n "$SBX" ] || { fail ttl_setup "create failed: $STATUS $BODY"; exit 1; }
	eval "$v=\$SBX"
done
ttl10() { api PATCH "/v1/sandboxes/$1/lifecycle" '{"ttl_seconds":10}'; [ "$STATUS" = 200 ] || fail ttl_setup "PATCH $1: $STATUS $BODY"; }
# The busy one runs a 20 s command; the poked one runs `true` every 0.5 s;
# the polled one is only read (GET, list, logs, usage) every 0.5 s, for 22 s.
ttl10 "$IDLE"
ttl10 "$BUSY"
curl -s -o "$T/busy.json" -X POST -H "Authorization: Bearer $KEY" --data-binary '{"cmd":"sleep 20; echo done"}' \
	"$URL/v1/sandboxes/$BUSY/exec" &
BUSY_PID=$!
ttl10 "$POKED"
ttl10 "$POLLED"
t0=$SECONDS
polled_seen=0
while [ $((SECONDS - t0)) -lt 22 ]; do
	api GET "/v1/sandboxes/$POLLED"
	[ "$STATUS" = 200 ] && polled_seen=$((polled_seen + 1))
	api POST "/v1/sandboxes/$POKED/exec" '{"cmd":"true"}'
	api GET "/v1/sandboxes?limit=5"
	api GET "/v1/sandboxes/$POLLED/logs?tail=1"
	api GET /v1/usage
	sleep 0.5
done
api GET "/v1/sandboxes/$IDLE"
expect ttl_idle_deleted 404 sandbox_ended
api GET "/v1/sandboxes/$POLLED"
[ "$STATUS" = 404 ] && [ "$polled_seen" -ge 1 ] &&
	pass ttl_reads_not_activity "read (GET, list, logs, usage) every 0.5 s for 22 s with a 10 s TTL: expired all the same (seen $polled_seen times first)" ||
	fail ttl_reads_not_activity "$STATUS after $polled_seen reads: $BODY"
grep -q '"ended": *"ttl"' <<<"$BODY" && pass ttl_ended_reason "$BODY" || fail ttl_ended_reason "$BODY"

api GET "/v1/sandboxes/$BUSY"
[ "$STATUS" = 200 ] && pass ttl_busy_kept "running a command after $((SECONDS - t0)) s with a 10 s TTL" || fail ttl_busy_kept "$STATUS $BODY"
api GET "/v1/sandboxes/$POKED"
[ "$STATUS" = 200 ] && pass ttl_activity_counts "exec every 0.5 s: kept" || fail ttl_activity_counts "$STATUS $BODY"
wait $BUSY_PID
grep -q '"stdout":"done\\n"' "$T/busy.json" && pass ttl_busy_command_finished "the command ran to its end" ||
	fail ttl_busy_command_finished "$(cat "$T/busy.json")"
# Both go 10 s after they were left, within 30 s: waited for (reads are
# not activity, shown above), since a delete under way answers
# "deleting" for a while on a busy machine.
sleep 10
KEY_SAVED=$KEY
wait_status "$BUSY" ended:ttl 30 > /dev/null
api GET "/v1/sandboxes/$BUSY"
expect ttl_busy_deleted_after 404 sandbox_ended
wait_status "$POKED" ended:ttl 30 > /dev/null
api GET "/v1/sandboxes/$POKED"
expect ttl_poked_deleted_when_left 404 sandbox_ended
if one_box ttl_nothing_left "counts its kiln-vmm processes and sandbox directories"; then
check ttl_nothing_left "sandbox VMMs $(sandbox_vmms | wc -l), directories $(ls "$DATA/sandboxes" | wc -l)" \
	[ "$(sandbox_vmms | wc -l)" = 0 -a "$(ls "$DATA/sandboxes" | wc -l)" = 0 ]
fi
# A hibernated sandbox is deleted by its TTL too, and ttl 0 keeps one.
create_sandbox '{"template":"minimal","ttl_seconds":2}'
H=$SBX
api POST "/v1/sandboxes/$H/hibernate"
create_sandbox '{"template":"minimal","ttl_seconds":0}'
KEEP=$SBX
sleep 2
wait_status "$H" ended:ttl 20 > /dev/null
api GET "/v1/sandboxes/$H"
expect ttl_hibernated_deleted 404 sandbox_ended
api GET "/v1/sandboxes/$KEEP"
[ "$STATUS" = 200 ] && pass ttl_zero_kept "ttl 0: kept" || fail ttl_zero_kept "$STATUS $BODY"
api DELETE "/v1/sandboxes/$KEEP"
alive alive_at_end
