#!/bin/bash
# The kiln CLI's apps (docs/cli.md "Apps") against a real kilnd with
# --domain and real sandboxes (the minimal template: busybox httpd serves):
# app create prints the URL once the command listens and the URL serves
# without a key; kiln apps lists it; app get by name and by id; app logs
# shows kiln's events and the command's output, and -f streams them; app
# deploy switches the same URL to the new version, keeping what it was not
# given; app rm deletes it and the URL answers 404; the usage errors are
# exit 2 with nothing sent, kilnd's refusals 125 naming the field.
# Needs KVM (the emulated host).
. "$(dirname "$0")/lib.sh"

build_template minimal || exit 1
start_kilnd --rate 0 --domain cli.test || exit 1
KEY=$(new_key cliapps)
export KILN_API_URL=$URL KILN_API_KEY=$KEY
at_exit 'for a in $("$KILN" apps --json 2>/dev/null | python3 -c "import json,sys; [print(a[\"id\"]) for a in json.load(sys.stdin)[\"apps\"]]" 2>/dev/null); do "$KILN" app rm "$a" 2>/dev/null; done'
k() { "$KILN" "$@"; }
js() { python3 -c "import json,sys; j=json.load(sys.stdin); print(($1))" 2>/dev/null; }
# by_host URL: GET it at kilnd's address with the URL's host as Host (the
# name resolves nowhere here): "STATUS BODY".
by_host() {
	local hp=${1#http://}
	hp=${hp%%/*}
	curl -s -m 30 -o "$T/page" -w '%{http_code}' -H "Host: $hp" "$URL/" 2>/dev/null
	printf ' %s' "$(cat "$T/page" 2>/dev/null)"
}
serve() { echo "mkdir -p /srv/w && echo $1 > /srv/w/index.html && echo serving $1 && exec httpd -f -p 8000 -h /srv/w"; }

# ---- usage errors: exit 2, nothing sent --------------------------------------------------------
usage2() {	# NAME WANT-IN-STDERR ARGS...
	local name=$1 want=$2; shift 2
	k "$@" > /dev/null 2> "$T/err"
	local st=$?
	[ "$st" = 2 ] && grep -qF -- "$want" "$T/err" && pass "$name" "exit 2: $(head -1 "$T/err")" ||
		fail "$name" "exit $st: $(cat "$T/err")"
}
usage2 app_usage_no_port "wants --port" app create web --command true
usage2 app_usage_port_range "--port: '70000'" app create web --port 70000 --command true
usage2 app_usage_bad_name "'a/b' is not an app's name" app get a/b
usage2 app_usage_sandbox_and_template "no --template" app create web --port 80 --sandbox sbx_x --template minimal
usage2 app_usage_deploy_sandbox "--sandbox" app deploy web --sandbox sbx_x
usage2 app_usage_tail "--tail: '-1'" app logs web --tail -1

# ---- kilnd's refusals: 125, naming the field ----------------------------------------------------
k app create web --port 8000 --command true --restart sometimes > /dev/null 2> "$T/err"
st=$?
[ "$st" = 125 ] && grep -q "restart" "$T/err" && pass app_bad_restart "exit 125: $(head -1 "$T/err")" ||
	fail app_bad_restart "exit $st: $(cat "$T/err")"

# ---- create: the URL, served without a key -------------------------------------------------------
url=$(k app create web --template minimal --port 8000 --command "$(serve v1)" -e WHO=cli --restart always 2> "$T/err")
st=$?
[ "$st" = 0 ] && [[ $url == http://app-*.cli.test:$PORT/ ]] && pass app_create "prints $url" ||
	{ fail app_create "exit $st: '$url' $(cat "$T/err")"; exit 1; }
got=$(by_host "$url")
check app_url_serves "$got" [ "$got" = "200 v1" ]
ID=$(k app get web --json | js 'j["id"]')
check app_get_by_name "$ID" eval '[[ $ID == app_* ]] && [ "$(k app get web | js "j[\"url\"]")" = "$url" ]'
check app_get_by_id "$(k app get "$ID" | js 'j["name"], j["env"]')" [ "$(k app get "$ID" | js 'j["name"], j["env"]["WHO"]')" = "('web', 'cli')" ]
k apps > "$T/apps"
check apps_table "$(tr '\n' '|' < "$T/apps")" eval 'head -1 "$T/apps" | grep -q "^NAME  *ID  *STATUS  *VERSION  *PORT  *URL" && grep -q "^web  *$ID  *running  *v1  *8000  *$url" "$T/apps"'
check apps_json "$(k app ls --json | js '[a["name"] for a in j["apps"]]')" [ "$(k app ls --json | js '[a["name"] for a in j["apps"]]')" = "['web']" ]
k app create web --port 8000 --command true > /dev/null 2> "$T/err"
st=$?
[ "$st" = 125 ] && grep -q "exists" "$T/err" && pass app_name_taken "exit 125: $(head -1 "$T/err")" ||
	fail app_name_taken "exit $st: $(cat "$T/err")"

# ---- logs: kiln's events, then the command's output; -f streams --------------------------------
k app logs web --tail 20 > "$T/logs" 2>&1
check app_logs "$(tr '\n' '|' < "$T/logs")" eval 'grep -q "kiln: version 1 deployed" "$T/logs" && grep -qx "serving v1" "$T/logs"'
# -f does not end by itself: stopped once both lines are there (10 s at
# most; it ran its whole 10 s under `timeout` before), still following.
"$KILN" app logs web -f --tail 5 --json > "$T/follow" 2>&1 &
fol=$!
for i in $(seq 100); do
	grep -q '"kind": *"event"' "$T/follow" && grep -q '"text": *"serving v1"' "$T/follow" && break
	sleep 0.1
done
following=no; kill -0 $fol 2>/dev/null && following=yes
kill $fol 2>/dev/null; wait $fol 2>/dev/null
check app_logs_follow "following: $following; $(head -c 300 "$T/follow" | tr '\n' '|')" eval \
	'[ $following = yes ] && grep -q "\"kind\": *\"event\"" "$T/follow" && grep -q "\"text\": *\"serving v1\"" "$T/follow"'

# ---- deploy: the same URL serves v2; what was not given is kept -------------------------------------
out=$(k app deploy web --command "$(serve v2)" --json 2> "$T/err")
check app_deploy "$(js 'j["version"], j["url"], j["restart"]' <<<"$out") $(cat "$T/err")" \
	[ "$(js 'j["version"], j["url"] == "'"$url"'", j["restart"], j["env"]["WHO"]' <<<"$out")" = "(2, True, 'always', 'cli')" ]
got=$(by_host "$url")
check app_deploy_serves "$got" [ "$got" = "200 v2" ]

# ---- rm: gone, and so is its URL --------------------------------------------------------------------
k app rm web
st=$?
k app get web > /dev/null 2> "$T/err"
st2=$?
check app_rm "rm exit $st; get after: exit $st2 $(head -1 "$T/err")" eval '[ "$st" = 0 ] && [ "$st2" = 125 ] && grep -q "not found" "$T/err"'
got=$(by_host "$url")
check app_rm_url "$got" [ "${got%% *}" = 404 ]
check apps_empty "$(k apps | wc -l) lines" [ "$(k apps --json | js 'len(j["apps"])')" = 0 ]
