#!/bin/bash
# Apps (docs/api.md "Apps"): a command on a port in a sandbox kiln keeps,
# at a stable URL on its own origin (app-ID.DOMAIN). Deployed from
# `minimal` (busybox httpd) with env, it answers through its URL without a key right after the
# create returns; its process, killed, is restarted by the supervisor in
# the sandbox (the logs say so); its VM, killed -9, is remade by the app
# watch on a new sandbox, and the URL answers again; a redeploy is served
# by the new version with not one failed request during the switch, and
# the old sandbox is deleted after the drain; idle, it hibernates, and a
# request wakes it (the cold request's time is printed); logs give the
# app's events and output, and follow them as SSE; a running sandbox is
# made an app (snapshot kept as its source, deleted with it); bad input is
# a 4xx naming the field, a command that never listens is a 504 that
# leaves no sandbox; the apps outlive a kilnd restart; a server without
# --domain refuses to make one.
. "$(dirname "$0")/lib.sh"
have_kvm || { fail apps_kvm "no KVM here: run it in tests/host/run"; exit 1; }
DOMAIN=apps.test
build_template minimal || exit 1
start_kilnd --rate 0 --domain "$DOMAIN" || exit 1
KEY=$(new_key apps)
at_exit 'for a in $(curl -s -H "Authorization: Bearer $KEY" $URL/v1/apps | python3 -c "import json,sys; [print(a[\"id\"]) for a in json.load(sys.stdin)[\"apps\"]]" 2>/dev/null); do api DELETE /v1/apps/$a; done'
at_exit 'for s in $(curl -s -H "Authorization: Bearer $KEY" $URL/v1/sandboxes | python3 -c "import json,sys; [print(s[\"id\"]) for s in json.load(sys.stdin)[\"sandboxes\"]]" 2>/dev/null); do api DELETE /v1/sandboxes/$s; done'

# hit HOST PATH: a request to the app's origin without a key; sets HS
# (status) and HB (body).
hit() {
	HS=$(curl -s -m 60 -o "$T/hb" -w '%{http_code}' -H "Host: $1:$PORT" "$URL$2")
	HB=$(cat "$T/hb")
}
host_of() { python3 -c "import sys,urllib.parse; print(urllib.parse.urlsplit(sys.argv[1]).hostname)" "$1"; }
nsandboxes() { api GET /v1/sandboxes; jget 'len(j["sandboxes"])'; }
# wait_app KEY EXPR SECONDS: poll GET /v1/apps/KEY until EXPR (on j) holds.
wait_app() {
	local i
	for i in $(seq 1 $(( $3 * 2 ))); do
		api GET "/v1/apps/$1"
		[ "$(jget "$2")" = True ] && return 0
		sleep 0.5
	done
	return 1
}

# busybox httpd -vv logs each request's path and status on stderr (the app's log).
CMD='mkdir -p /srv && echo \"$GREETING\" > /srv/index.html && exec httpd -f -vv -p 8000 -h /srv'

# ---- bad input ------------------------------------------------------------------------------
api POST /v1/apps '{"name":"web","command":"true"}'
expect app_no_port 400 invalid_request
api POST /v1/apps '{"name":"Web!","command":"true","port":8000}'
expect app_bad_name 400 invalid_request
api POST /v1/apps '{"name":"web","command":"true","port":8000,"restart":"sometimes"}'
expect app_bad_restart 400 invalid_request
api POST /v1/apps '{"name":"web","command":"true","port":8000,"colour":"red"}'
expect app_unknown_field 400 invalid_request
api POST /v1/apps '{"name":"web","command":"true","port":8000,"template":"nope"}'
expect app_unknown_template 404 -
before=$(nsandboxes)
api POST /v1/apps '{"name":"mute","template":"minimal","command":"echo starting; sleep 1000","port":8000,"ready_timeout_seconds":3}'
if [ "$STATUS" = 504 ] && [[ $(jget 'j["error"]["message"]') == *"nothing listened on port 8000"*"starting"* ]]; then
	pass app_never_listens "504: $(jget 'j["error"]["message"]' | head -c 200)"
else
	fail app_never_listens "$STATUS $BODY"
fi
check app_never_listens_leaves_nothing "sandboxes $before -> $(nsandboxes)" [ "$(nsandboxes)" = "$before" ]
api GET /v1/apps/mute
expect app_never_listens_not_kept 404 not_found

# ---- deploy ---------------------------------------------------------------------------------
api POST /v1/apps "{\"name\":\"web\",\"template\":\"minimal\",\"command\":\"$CMD\",\"port\":8000,\"env\":{\"GREETING\":\"v1\"},\"restart\":\"always\"}"
t_created=$(date +%s.%N)
if [ "$STATUS" = 201 ] && [ "$(jget 'j["version"], j["status"], j["port"]')" = "(1, 'running', 8000)" ]; then
	pass app_create "201 $(jget 'j["url"]') sandbox $(jget 'j["sandbox_id"]')"
else
	fail app_create "$STATUS $BODY"; exit 1
fi
APP=$(jget 'j["id"]') APP_URL=$(jget 'j["url"]') S1=$(jget 'j["sandbox_id"]')
H=$(host_of "$APP_URL")
check app_url "url $APP_URL" [ "$APP_URL" = "http://app-${APP#app_}.$DOMAIN:$PORT/" ]
hit "$H" /
t_first=$(date +%s.%N)
check app_serves "status $HS, body '$HB' (first byte $(python3 -c "print(int(($t_first - $t_created) * 1000))") ms after create answered)" \
	[ "$HS" = 200 -a "$HB" = v1 ]
api POST /v1/apps "{\"name\":\"web\",\"command\":\"true\",\"port\":8000}"
expect app_name_taken 409 conflict
api GET /v1/apps/web
check app_get_by_name "$(jget 'j["id"]')" [ "$(jget 'j["id"]')" = "$APP" ]
api GET /v1/apps
check app_list "$(jget '[a["name"] for a in j["apps"]]')" [ "$(jget '[a["name"] for a in j["apps"]]')" = "['web']" ]
hit "app-zzzzzzzz.$DOMAIN" /
check app_unknown_host "status $HS: $HB" eval '[ "$HS" = 404 ] && [[ $HB == *"app app_zzzzzzzz not found"* ]]'
api GET /v1/apps/app_zzzzzzzz
expect app_unknown 404 not_found

# ---- the process dies: restarted in its sandbox -----------------------------------------------
api POST "/v1/sandboxes/$S1/exec" '{"cmd":"kill $(pidof httpd)"}'
ok=
for i in $(seq 1 40); do hit "$H" /; [ "$HS" = 200 ] && { ok=1; break; }; sleep 0.25; done
check app_process_restarted "answers again: $HS '$HB'" [ -n "$ok" ]
api GET "/v1/apps/$APP/logs?tail=50"
if [ "$STATUS" = 200 ] && jget '"\n".join(j["lines"])' | grep -q "kiln: the app exited with status .*; restart 1 in 1s" &&
	jget '"\n".join(j["lines"])' | grep -q 'url:/$' && jget '"\n".join(j["lines"])' | grep -q 'response:200' &&
	jget '"\n".join(e["text"] for e in j["events"])' | grep -q "version 1 deployed"; then
	pass app_logs "$(jget 'len(j["lines"])') lines, restart and requests in them; events: $(jget 'j["events"][0]["text"]')"
else
	fail app_logs "$STATUS $BODY"
fi
api GET "/v1/apps/$APP/logs?tail=-1"
expect app_logs_bad_tail 400 invalid_request
curl -sN -m 8 -H "Authorization: Bearer $KEY" "$URL/v1/apps/$APP/logs?tail=0&follow=true" > "$T/follow" 2>/dev/null &
FOL=$!
sleep 2
hit "$H" /followed-path
# The stream does not end by itself: stopped once what the check wants
# is in it (curl's 8 s at most; it ran them all before).
for i in $(seq 60); do
	grep -q "^event: event" "$T/follow" && grep -q "^event: line" "$T/follow" && grep -q "followed-path" "$T/follow" && break
	sleep 0.1
done
kill $FOL 2>/dev/null; wait $FOL 2>/dev/null
if grep -q "^event: event" "$T/follow" && grep -q "^event: line" "$T/follow" && grep -q "followed-path" "$T/follow"; then
	pass app_logs_follow "$(grep -c '^event: line' "$T/follow") line events, the new request among them"
else
	fail app_logs_follow "$(head -c 400 "$T/follow")"
fi

# ---- redeploy: no failed request during the switch ------------------------------------------
# Requests every 50 ms until $T/stop appears (7 s after the deploy
# answered: past the old sandbox's drain and delete).
rm -f "$T/stop"
python3 - "$URL" "$H:$PORT" "$T/stop" > "$T/loop" <<'PY' &
import os, sys, time, urllib.request
url, host, stop = sys.argv[1], sys.argv[2], sys.argv[3]
end = time.time() + 300
while time.time() < end and not os.path.exists(stop):
    try:
        r = urllib.request.urlopen(urllib.request.Request(url + "/", headers={"Host": host}), timeout=30)
        print(r.status, r.read().decode().strip())
    except Exception as e:
        print("ERR", repr(e).replace(" ", "_"))
    time.sleep(0.05)
PY
LOOP=$!
sleep 1
api POST "/v1/apps/$APP/deploy" '{"env":{"GREETING":"v2"}}'
S2=$(jget 'j["sandbox_id"]')
if [ "$STATUS" = 200 ] && [ "$(jget 'j["version"]')" = 2 ] && [ -n "$S2" ] && [ "$S2" != "$S1" ]; then
	pass app_redeploy "200 version 2 on $S2"
else
	fail app_redeploy "$STATUS $BODY"
fi
sleep 7
touch "$T/stop"
wait $LOOP
summary=$(python3 - "$T/loop" <<'PY'
import sys
lines = [l.split() for l in open(sys.argv[1])]
bad = [l for l in lines if l[0] != "200"]
bodies = [l[1] for l in lines if l[0] == "200"]
first_v2 = bodies.index("v2") if "v2" in bodies else len(bodies)
back = [b for b in bodies[first_v2:] if b != "v2"]
print("ok" if not bad and "v1" in bodies and "v2" in bodies and not back else "bad",
      len(lines), "requests,", len(bad), "failed,", bodies.count("v1"), "v1 then", bodies.count("v2"), "v2", bad[:3])
PY
)
check app_redeploy_no_failed_request "$summary" [ "${summary%% *}" = ok ]
for i in $(seq 1 20); do api GET "/v1/sandboxes/$S1"; [ "$STATUS" = 404 ] && break; sleep 0.5; done
check app_redeploy_old_deleted "GET the old sandbox: $STATUS" [ "$STATUS" = 404 ]

# ---- the VM dies: remade --------------------------------------------------------------------
pid=$(cut -d' ' -f1 "$DATA/sandboxes/$S2/vmm.pid")
kill -9 "$pid"
if wait_app "$APP" 'j["vm_restarts"] == 1 and j["sandbox_id"] != "'"$S2"'" and j["status"] == "running"' 90; then
	S3=$(jget 'j["sandbox_id"]')
	hit "$H" /
	check app_vm_remade "sandbox $S2 -> $S3, answers $HS '$HB'" [ "$HS" = 200 -a "$HB" = v2 ]
else
	fail app_vm_remade "$STATUS $BODY"
fi
api GET "/v1/apps/$APP/logs?tail=5"
jget '"\n".join(e["text"] for e in j["events"])' | grep -q "remade as sandbox" &&
	pass app_vm_remade_logged "$(jget 'j["events"][-1]["text"]' | head -c 160)" || fail app_vm_remade_logged "$BODY"
# The log runs on across both replacements: S1's lines (requests
# answered), kiln's line about the deploy, S2's, kiln's line about the
# remake, then S3's (the request just made).
api GET "/v1/apps/$APP/logs?tail=10000"
order=$(printf '%s' "$BODY" | python3 -c '
import json, sys
l = json.load(sys.stdin)["lines"]
dep = [i for i, t in enumerate(l) if t.startswith("kiln: version 2 deployed") and "not '"$S1"'" in t]
rem = [i for i, t in enumerate(l) if t.startswith("kiln: sandbox '"$S2"'") and "remade as sandbox '"$S3"'" in t]
ok = lambda a, b: any("response:200" in t for t in l[a:b])
if dep and rem and ok(0, dep[0]) and ok(dep[0], rem[0]) and ok(rem[0], len(l)):
    print("ok", len(l), "lines:", dep[0], "of S1,", rem[0] - dep[0] - 1, "of S2,", len(l) - rem[0] - 1, "of S3")
else:
    print("bad", len(l), "lines; deploy line at", dep, "remake line at", rem, l[-8:])')
check app_logs_across_remake "$order" [ "${order%% *}" = ok ]
# Follow, with lines kept of the earlier sandboxes: it starts with the
# lines GET answers for the same tail (the kept ones the current
# sandbox's leave room for, then those), then the new ones, in order,
# none twice.
api GET "/v1/apps/$APP/logs?tail=6"
fol=$(printf '%s' "$BODY" | python3 -c '
import http.client, json, queue, sys, threading, time, urllib.request
get = json.load(sys.stdin)["lines"]
port, key, app, host = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
c = http.client.HTTPConnection("127.0.0.1", int(port), timeout=60)
c.request("GET", "/v1/apps/%s/logs?tail=6&follow=true" % app, headers={"Authorization": "Bearer " + key})
r = c.getresponse()
q = queue.Queue()
def read():
    ev = None
    for raw in r:
        l = raw.decode().rstrip("\n")
        if l.startswith("event: "):
            ev = l[7:]
        elif l.startswith("data: ") and ev == "line":
            q.put(json.loads(l[6:])["text"])
threading.Thread(target=read, daemon=True).start()
got = []
def take(quiet, until):
    while time.time() < until:
        try:
            got.append(q.get(timeout=quiet))
        except queue.Empty:
            return
take(1.5, time.time() + 30)	# the start: all there, then quiet
start = len(got)
try:
    urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:%s/after-follow" % port, headers={"Host": "%s:%s" % (host, port)}), timeout=30)
except Exception:
    pass	# a 404: its log line is what counts
end = time.time() + 30
while time.time() < end and not any("after-follow" in t for t in got[start:]):
    take(0.5, end)
new = got[start:]
ok = got[:start] == get and any("after-follow" in t for t in new) and not set(new) & set(get)
print("ok" if ok else "bad", "GET", len(get), "lines, follow", start, "then", len(new), "new;",
      "kept ones first" if any(t.startswith("kiln:") for t in got[:start]) else "no kept line in the start", "" if ok else (get, got))
' "$PORT" "$KEY" "$APP" "$H" 2>&1)
check app_logs_follow_kept "$fol" [ "${fol%% *}" = ok ]

# ---- idle: hibernated, woken by a request ---------------------------------------------------
api POST /v1/apps "{\"name\":\"sleepy\",\"template\":\"minimal\",\"command\":\"$CMD\",\"port\":8000,\"env\":{\"GREETING\":\"zz\"},\"idle_seconds\":2}"
[ "$STATUS" = 201 ] || fail app_idle_create "$STATUS $BODY"
SLEEPY=$(jget 'j["id"]') HZ=$(host_of "$(jget 'j["url"]')")
if wait_app "$SLEEPY" 'j["status"] == "hibernated"' 60; then
	pass app_idle_hibernated "hibernated after 2 s idle"
	t0=$(date +%s.%N)
	hit "$HZ" /
	ms=$(python3 -c "print(int(($(date +%s.%N) - $t0) * 1000))")
	check app_idle_woken "cold request: $HS '$HB' in $ms ms" [ "$HS" = 200 -a "$HB" = zz ]
	api GET "/v1/apps/$SLEEPY"
	check app_idle_running "status $(jget 'j["status"]'), vm_restarts $(jget 'j["vm_restarts"]')" \
		[ "$(jget 'j["status"], j["vm_restarts"]')" = "('running', 0)" ]
else
	fail app_idle_hibernated "$STATUS $BODY"
fi

# ---- a running sandbox made an app ----------------------------------------------------------
create_sandbox '{"template":"minimal"}'
SA=$SBX
api POST "/v1/sandboxes/$SA/processes" '{"cmd":"mkdir -p /w && echo adopted > /w/index.html && cd /w && exec httpd -f -p 8001 -h /w"}'
api POST /v1/apps "{\"name\":\"adopted\",\"sandbox_id\":\"$SA\",\"port\":8001}"
if [ "$STATUS" = 201 ] && [ "$(jget 'j["sandbox_id"]')" = "$SA" ]; then
	ADOPT=$(jget 'j["id"]') HA=$(host_of "$(jget 'j["url"]')")
	hit "$HA" /
	check app_adopted "201, answers $HS '$HB'" [ "$HS" = 200 -a "$HB" = adopted ]
else
	fail app_adopted "$STATUS $BODY"
fi
api POST /v1/apps "{\"name\":\"again\",\"sandbox_id\":\"$SA\",\"port\":8001}"
expect app_adopted_twice 409 conflict
api GET /v1/snapshots
nsnap=$(jget 'len(j["snapshots"])')
check app_adopted_snapshot "snapshots: $nsnap" [ "$nsnap" = 1 ]
api DELETE "/v1/apps/$ADOPT"
expect app_delete 204 -
api GET "/v1/sandboxes/$SA"
check app_delete_sandbox_gone "GET its sandbox: $STATUS" [ "$STATUS" = 404 ]
api GET /v1/snapshots
check app_delete_snapshot_gone "snapshots: $(jget 'len(j["snapshots"])')" [ "$(jget 'len(j["snapshots"])')" = 0 ]
hit "$HA" /
# At once: the route cache forgets an app this kilnd deleted.
check app_deleted_host "status $HS: $HB" eval '[ "$HS" = 404 ] && [[ $HB == *"app $ADOPT not found"* ]]'

# ---- a kilnd restart ------------------------------------------------------------------------
stop_kilnd
start_kilnd --rate 0 || exit 1
api GET /v1/apps
check app_kept_across_restart "$(jget '[(a["name"], a["url"]) for a in j["apps"]]')" \
	[ "$(jget 'sorted(a["name"] for a in j["apps"])')" = "['sleepy', 'web']" ]
api POST /v1/apps '{"name":"nodomain","command":"true","port":8000}'
if [ "$STATUS" = 400 ] && [[ $(jget 'j["error"]["message"]') == *--domain* ]]; then
	pass app_needs_domain "400: $(jget 'j["error"]["message"]' | head -c 120)"
else
	fail app_needs_domain "$STATUS $BODY"
fi
stop_kilnd
start_kilnd --rate 0 --domain "$DOMAIN" || exit 1
hit "$H" /
check app_serves_after_restart "$HS '$HB'" [ "$HS" = 200 -a "$HB" = v2 ]
api DELETE "/v1/apps/web"
expect app_delete_by_name 204 -
hit "$H" /
check app_gone "status $HS: $HB" eval '[ "$HS" = 404 ] && [[ $HB == *"app $APP not found"* ]]'
alive apps_alive
