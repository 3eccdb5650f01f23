#!/bin/bash
# The API's contract with real sandboxes (issue 11, docs/api.md): the list's
# filters and stable pages, every ExecResult field in REST exec, the exec
# stream's exit event and MCP, the console log (tail, follow, a failed
# sandbox's kept log and the VMM's last line in its error), and an ended
# sandbox's 404 with why. With KILN_API_URL, against that endpoint
# (lib.sh; tests/cluster/e2e.sh).
# tier: full: a slow file whose ground the quick tier covers otherwise (e2e 61 and the SDK tests list, page and stream)
. "$(dirname "$0")/lib.sh"

build_template minimal || exit 1
start_kilnd --rate 0 || exit 1
KEY=$(new_key contract)
at_exit 'for s in $(curl -s -H "Authorization: Bearer $KEY" "$URL/v1/sandboxes?limit=1000" | python3 -c "import json,sys; [print(s[\"id\"]) for s in json.load(sys.stdin)[\"sandboxes\"]]" 2>/dev/null); do api DELETE /v1/sandboxes/$s; done'

# ---- list: filters, stable pages ---------------------------------------------------------
ids=()
for i in 0 1 2 3 4; do
	create_sandbox '{"template":"minimal","metadata":{"suite":"c73","n":"'$i'","even":"'$((i % 2 == 0))'"}}'
	[ -n "$SBX" ] || { fail list_setup "create $i: $STATUS $BODY"; exit 1; }
	ids+=("$SBX")
done
api GET "/v1/sandboxes?metadata.suite=c73"
[ "$(jget '" ".join(s["id"] for s in j["sandboxes"])')" = "${ids[*]}" ] && pass list_metadata_oldest_first "5, in creation order" ||
	fail list_metadata_oldest_first "$BODY"
api GET "/v1/sandboxes?metadata.suite=c73&metadata.even=1"
[ "$(jget '" ".join(s["id"] for s in j["sandboxes"])')" = "${ids[0]} ${ids[2]} ${ids[4]}" ] &&
	pass list_metadata_all_match "two keys: the even ones" || fail list_metadata_all_match "$BODY"
api GET "/v1/sandboxes?metadata.suite=nope"
[ "$(jget 'len(j["sandboxes"])')" = 0 ] && pass list_metadata_none "no match" || fail list_metadata_none "$BODY"
api GET "/v1/sandboxes?metadata.suite=c73&template=base"
[ "$(jget 'len(j["sandboxes"])')" = 0 ] && pass list_template_filter "template=base: none of these" || fail list_template_filter "$BODY"
api GET "/v1/sandboxes?metadata.suite=c73&template=minimal&status=running"
[ "$(jget 'len(j["sandboxes"])')" = 5 ] && pass list_status_template "status=running&template=minimal: 5" || fail list_status_template "$BODY"
api POST "/v1/sandboxes/${ids[1]}/hibernate"
api GET "/v1/sandboxes?metadata.suite=c73&status=hibernated"
[ "$(jget '" ".join(s["id"] for s in j["sandboxes"])')" = "${ids[1]}" ] && pass list_status_filter "status=hibernated: the one" ||
	fail list_status_filter "$BODY"
# Pages of 2: deleting a sandbox of a page already read shifts nothing.
got=() cursor= pages=0
while :; do
	api GET "/v1/sandboxes?metadata.suite=c73&limit=2${cursor:+&cursor=$cursor}"
	[ "$STATUS" = 200 ] || { fail list_pages "$STATUS $BODY"; break; }
	got+=($(jget '" ".join(s["id"] for s in j["sandboxes"])'))
	cursor=$(jget 'j["next_cursor"] or ""')
	pages=$((pages + 1))
	[ $pages = 1 ] && api DELETE "/v1/sandboxes/${ids[0]}"
	[ -n "$cursor" ] && [ $pages -lt 5 ] || break
done
[ "${got[*]}" = "${ids[*]}" ] && [ $pages = 3 ] && pass list_pages "3 pages of 2, every sandbox once, in order" ||
	fail list_pages "$pages pages: ${got[*]} (wanted ${ids[*]})"

# ---- ExecResult: every field, every route ---------------------------------------------------
S=${ids[2]}
api POST "/v1/sandboxes/$S/exec" '{"cmd":"true"}'
[ "$(jget 'sorted(j), j["stdout"], j["stderr"], j["truncated"], j["signal"]')" = \
  "(['duration_ms', 'exit_code', 'signal', 'stderr', 'stdout', 'timed_out', 'truncated'], '', '', False, None)" ] &&
	pass exec_result_fields "every field, empty output as \"\"" || fail exec_result_fields "$BODY"
curl -s -N -m 60 -H "Authorization: Bearer $KEY" --data-binary '{"cmd":"echo hi"}' "$URL/v1/sandboxes/$S/exec/stream" > "$T/stream"
python3 - "$T/stream" <<'PY' > "$T/stream.check"
import json, sys
ev = None; last = None
for line in open(sys.argv[1]):
    if line.startswith("event: "): ev = line[7:].strip()
    elif line.startswith("data: ") and ev == "exit": last = json.loads(line[6:])
print(sorted(last) if last else None, last and (last["stdout"], last["stderr"], last["truncated"], last["exit_code"]))
PY
[ "$(cat "$T/stream.check")" = "['duration_ms', 'exit_code', 'signal', 'stderr', 'stdout', 'timed_out', 'truncated'] ('', '', False, 0)" ] &&
	pass exec_stream_exit_fields "the exit event is a whole ExecResult" || fail exec_stream_exit_fields "$(cat "$T/stream.check") $(tail -c 300 "$T/stream")"
mcp() {
	curl -s -m 60 -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \
		-H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2025-06-18' \
		--data-binary "$1" "$URL/v1/sandboxes/$S/mcp"
}
mcp '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}' > /dev/null
mcp '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"shell","arguments":{"command":"true"}}}' > "$T/mcp.json"
got=$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1]))["result"]["structuredContent"]; print(sorted(j), j["stdout"], j["truncated"])' "$T/mcp.json" 2>&1)
[ "$got" = "['duration_ms', 'exit_code', 'signal', 'stderr', 'stdout', 'timed_out', 'truncated']  False" ] &&
	pass mcp_exec_result_fields "MCP shell: every field" || fail mcp_exec_result_fields "$got $(head -c 300 "$T/mcp.json")"

# ---- logs -------------------------------------------------------------------------------------
api POST "/v1/sandboxes/$S/exec" '{"cmd":"echo console-marker-73 > /dev/console"}'
api GET "/v1/sandboxes/$S/logs?tail=50"
[ "$STATUS" = 200 ] && [ "$(jget 'any(l["source"] == "console" and l["text"] == "console-marker-73" and l["ts"] is None for l in j["lines"])')" = True ] &&
	pass logs_console "a line the guest wrote to its console" || fail logs_console "$STATUS $(tail -c 400 "$T/body")"
[ "$(jget 'any(l["source"] == "init" and l["text"] == "resync: this is '"$S"'" for l in j["lines"])')" = True ] &&
	pass logs_init "kiln-init's own line, source init" || fail logs_init "$(tail -c 400 "$T/body")"
api GET "/v1/sandboxes/$S/logs?tail=1"
[ "$(jget 'len(j["lines"]), j["lines"][0]["text"]')" = "(1, 'console-marker-73')" ] && pass logs_tail "tail=1: the last line" ||
	fail logs_tail "$BODY"
for q in "tail=abc:tail" "tail=10001:tail" "follow=yes:follow" "lines=3:lines"; do
	api GET "/v1/sandboxes/$S/logs?${q%%:*}"
	expect "logs_bad_${q%%:*}" 400 invalid_request && check "logs_bad_names_${q%%:*}" "$(jget 'j["error"]["message"]')" grep -qF "${q##*:}" "$T/body"
done
# follow: the tail, then a line written after it, then "end" at delete.
curl -s -N -m 60 -H "Authorization: Bearer $KEY" "$URL/v1/sandboxes/$S/logs?tail=1&follow=true" > "$T/follow" &
fpid=$!
sleep 2
api POST "/v1/sandboxes/$S/exec" '{"cmd":"echo after-follow-73 > /dev/console"}'
sleep 2
api DELETE "/v1/sandboxes/$S"
for _ in $(seq 1 20); do kill -0 $fpid 2>/dev/null || break; sleep 0.5; done
kill $fpid 2>/dev/null; wait $fpid 2>/dev/null
python3 - "$T/follow" <<'PY' > "$T/follow.check"
import json, sys
ev = None; out = []
for line in open(sys.argv[1]):
    if line.startswith("event: "): ev = line[7:].strip()
    elif line.startswith("data: "): out.append((ev, json.loads(line[6:]).get("text")))
print(out[0] if out else None, ("line", "after-follow-73") in out, out[-1][0] if out else None)
PY
[ "$(cat "$T/follow.check")" = "('line', 'console-marker-73') True end" ] &&
	pass logs_follow "the tail, a new line as it came, end at delete" || fail logs_follow "$(cat "$T/follow.check"): $(head -c 500 "$T/follow")"

# ---- a sandbox that fails: its error quotes the VMM, its log is kept --------------------------
F=${ids[3]}
api POST "/v1/sandboxes/$F/exec" '{"cmd":"echo before-crash-73 > /dev/console; echo c > /proc/sysrq-trigger"}'
for _ in $(seq 1 60); do
	api GET "/v1/sandboxes/$F"
	[ "$(jget 'j["status"]')" = failed ] && break
	sleep 0.5
done
[ "$(jget 'j["status"]')" = failed ] && grep -qE 'the VMM exited.*kiln-vmm.*guest (crash|reboot|kernel panic)' <<<"$(jget 'j["error"]')" &&
	pass failed_error_quotes_vmm "$(jget 'j["error"]')" || fail failed_error_quotes_vmm "$BODY"
api GET "/v1/sandboxes/$F/logs?tail=10000"
[ "$(jget 'any(l["text"] == "before-crash-73" for l in j["lines"])')" = True ] &&
	pass failed_log_kept "its console, after it failed" || fail failed_log_kept "$STATUS $(tail -c 400 "$T/body")"
api DELETE "/v1/sandboxes/$F"
api GET "/v1/sandboxes/$F"
expect failed_then_deleted 404 sandbox_ended && check failed_ended_why "$(jget 'j["error"]["ended"]')" [ "$(jget 'j["error"]["ended"]')" = failed ]
api GET "/v1/sandboxes/$F/logs"
expect logs_of_ended 404 sandbox_ended
if one_box failed_log_dropped "looks in its data directory for the log file"; then
[ ! -e "$DATA/logs/$F.log" ] && pass failed_log_dropped "gone with the sandbox" || fail failed_log_dropped "$DATA/logs/$F.log left"
fi
alive alive_at_end
