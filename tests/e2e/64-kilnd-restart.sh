#!/bin/bash
# Restart safety: kilnd killed with SIGKILL while creates are in flight,
# then restarted. Every sandbox it acknowledged is still listed; every
# listed sandbox is running and answers (re-attached to the same VMM) or
# is marked failed with its resources gone; no VMM, directory or socket is
# left that no sandbox owns. A VMM that dies while kilnd is down is found
# failed at restart.
. "$(dirname "$0")/lib.sh"

build_template minimal || exit 1
start_kilnd --rate 0 --max-creates 8 || exit 1
KEY=$(new_key restart)

create_sandbox
R=$SBX
api POST "/v1/sandboxes/$R/exec" '{"cmd":"echo before-restart > /root/f; sync"}'
R_PID=$(cut -d' ' -f1 "$DATA/sandboxes/$R/vmm.pid")
[ -n "$R" ] && [ -n "$R_PID" ] && pass restart_setup "$R on VMM $R_PID" || { fail restart_setup "$BODY"; exit 1; }

pids=()
for i in $(seq 1 6); do
	curl -s -m 300 -o "$T/c$i.json" -w '%{http_code}' -X POST -H "Authorization: Bearer $KEY" \
		--data-binary '{"template":"minimal"}' "$URL/v1/sandboxes" > "$T/c$i.code" 2>/dev/null &
	pids+=($!)
done
sleep 0.3
kill -9 "$KILND_PID"
wait "$KILND_PID" 2>/dev/null
KILND_PID=
wait "${pids[@]}"
acked=()
for i in $(seq 1 6); do
	[ "$(cat "$T/c$i.code")" = 201 ] && acked+=("$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$T/c$i.json")")
done
pass sigkill "kilnd killed with creates in flight (${#acked[@]} of 6 answered 201 first); VMMs now: $(sandbox_vmms | wc -l)"

start_kilnd --rate 0 || exit 1
api GET /v1/sandboxes
listed=$(jget '" ".join(s["id"] + ":" + s["status"] for s in j["sandboxes"])')
missing=
for s in "$R" "${acked[@]}"; do
	grep -q "$s:running" <<<"$listed" || missing+="$s "
done
check restart_no_lost_record "listed: $listed; acknowledged but not running: ${missing:-none}" [ -z "$missing" ]
bad=
for s in $(jget '" ".join(s["id"] for s in j["sandboxes"])'); do
	api GET "/v1/sandboxes/$s"
	st=$(jget 'j["status"]')
	if [ "$st" = running ]; then
		api POST "/v1/sandboxes/$s/exec" '{"cmd":"cat /proc/sys/kernel/hostname"}'
		[ "$(jget 'j["stdout"]')" = "$s" ] || bad+="$s(no answer: $BODY) "
	elif [ "$st" = failed ]; then
		[ -e "$DATA/sandboxes/$s/vmm.pid" ] && bad+="$s(failed but its VMM files remain) "
	else
		bad+="$s($st) "
	fi
done
check restart_all_reachable_or_failed "${bad:-every listed sandbox answers}" [ -z "$bad" ]
api POST "/v1/sandboxes/$R/exec" '{"cmd":"cat /root/f"}'
now_pid=$(cut -d' ' -f1 "$DATA/sandboxes/$R/vmm.pid" 2>/dev/null)
[ "$(jget 'j["stdout"]')" = before-restart ] && [ "$now_pid" = "$R_PID" ] &&
	pass restart_reattached "$R: same VMM $R_PID, files intact" || fail restart_reattached "pid $now_pid, $BODY"
# Nothing that no sandbox owns: each VMM and directory is a running sandbox's.
api GET /v1/sandboxes
running=$(jget '" ".join(sorted(s["id"] for s in j["sandboxes"] if s["status"] == "running"))')
owned=
for s in $running; do owned+="$(cut -d' ' -f1 "$DATA/sandboxes/$s/vmm.pid") "; done
strays=
for p in $(sandbox_vmms); do grep -qw "$p" <<<"$owned" || strays+="$p "; done
dirs=$(ls "$DATA/sandboxes" | sort | tr '\n' ' ' | sed 's/ $//')
[ -z "$strays" ] && [ "$dirs" = "$running" ] && pass restart_no_orphans "$(wc -w <<<"$running") running sandboxes, as many VMMs and directories" ||
	fail restart_no_orphans "stray VMMs: ${strays:-none}; directories: $dirs; running: $running"

# A VMM that dies while kilnd is down: failed at restart, then deletable.
create_sandbox
D=$SBX
D_PID=$(cut -d' ' -f1 "$DATA/sandboxes/$D/vmm.pid")
kill -9 "$KILND_PID"
wait "$KILND_PID" 2>/dev/null
KILND_PID=
kill -9 "$D_PID"
sleep 0.5
start_kilnd --rate 0 || exit 1
api GET "/v1/sandboxes/$D"
[ "$(jget 'j["status"]')" = failed ] && [ -n "$(jget 'j["error"]')" ] && [ ! -e "$DATA/sandboxes/$D/vmm.pid" ] &&
	pass restart_dead_vmm_failed "failed: $(jget 'j["error"]')" || fail restart_dead_vmm_failed "$BODY"
api DELETE "/v1/sandboxes/$D"
expect restart_failed_deletable 204 -

# A graceful stop leaves sandboxes running too; the next kilnd adopts them.
stop_kilnd
start_kilnd --rate 0 || exit 1
api POST "/v1/sandboxes/$R/exec" '{"cmd":"echo still"}'
[ "$(jget 'j["stdout"]')" = still ] && pass restart_after_sigterm "re-attached after a SIGTERM too" || fail restart_after_sigterm "$BODY"
api GET /v1/sandboxes
for s in $(jget '" ".join(s["id"] for s in j["sandboxes"])'); do api DELETE "/v1/sandboxes/$s"; done
sleep 0.5
check restart_cleanup "sandbox VMMs $(sandbox_vmms | wc -l), directories $(ls "$DATA/sandboxes" | wc -l)" \
	[ "$(sandbox_vmms | wc -l)" = 0 -a "$(ls "$DATA/sandboxes" | wc -l)" = 0 ]
alive alive_at_end
