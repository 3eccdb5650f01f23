#!/bin/bash
# tests/unit/keys.sh [REPO [BUILD]]: API keys' scopes, expiry, last use and
# the audit log (docs/security.md), for real: kilnd serving the API on a
# throwaway SQLite data directory (no VM is started, so no KVM is needed),
# keys made with `kilnd keys create` and over REST, every check over HTTP
# with curl. Everything started is stopped and removed at the end, failed
# or not. Then the same store on a throwaway PostgreSQL under two kilnd
# replicas: a key made on one is refused on the other the moment it is
# revoked, and a read key is refused writes there. Run by the unit loop as build/tests/unit_keys; prints PASS/FAIL
# lines, exits 1 on any FAIL.
set -u
repo=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${2:-$repo/build}
kilnd=$build/kilnd
rc=0
pass() { echo "PASS keys $1${2:+: $2}"; }
fail() { echo "FAIL keys $1${2:+: $2}"; rc=1; }
check() { local n=$1 d=$2; shift 2; if "$@"; then pass "$n" "$d"; else fail "$n" "$d"; fi; }
[ -x "$kilnd" ] || { echo "FAIL keys: $kilnd missing: make all first"; exit 1; }

dir=$(mktemp -d /tmp/kiln-keys.XXXXXX) || exit 1
pgdir=$(mktemp -d /tmp/kiln-keys-pg.XXXXXX) || exit 1
. "$repo/tests/unit/pgserver.sh"
pids=()
cleanup() {
	for p in "${pids[@]}"; do { kill -9 "$p"; wait "$p"; } 2>/dev/null; done
	for n in keys r1 r2; do rmdir "/sys/fs/cgroup/kiln-test-$$-$n" 2>/dev/null; done
	pg_server_remove "$pgdir"
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
until_ok() {	# until_ok SECONDS CMD...: CMD every 0.2 s until it succeeds or time is up
	local end=$((SECONDS + $1)); shift
	while ! "$@"; do [ $SECONDS -ge $end ] && return 1; sleep 0.2; done
}
kd() { "$kilnd" --data "$dir/data" "$@"; }
# serve NAME PORT [ARGS...]: kilnd serving the API (no VM, no network, no
# jail) on data dir/NAME, until it answers /healthz.
serve() {
	local name=$1 port=$2; shift 2
	mkdir -p "$dir/$name"
	"$kilnd" --data "$dir/$name" --no-net --no-jail --net-pool 0 \
		--cgroup "/sys/fs/cgroup/kiln-test-$$-$name" --listen "127.0.0.1:$port" "$@" \
		> "$dir/$name.log" 2>&1 &
	pids+=($!)
	until_ok 20 curl -sf -o /dev/null "http://127.0.0.1:$port/healthz"
}

port=$(free_port)
API=http://127.0.0.1:$port
serve data "$port" || { fail start "$(tail -5 "$dir/data.log")"; exit 1; }

# api KEY METHOD PATH [BODY]: sets STATUS and BODY.
api() {
	local key=$1 method=$2 path=$3 body=${4-}
	local args=(-s -o "$dir/body" -w '%{http_code}' -X "$method" -H "Authorization: Bearer $key")
	[ -n "$body" ] && args+=(-H 'Content-Type: application/json' --data "$body")
	STATUS=$(curl "${args[@]}" "$API$path")
	BODY=$(cat "$dir/body")
}
# jget EXPR: a Python expression over j, the last BODY parsed.
jget() { python3 -c "import json,sys; j=json.loads(sys.argv[1]); print($1)" "$BODY" 2>/dev/null; }

full=$(kd keys create --workspace alpha --name ci 2>/dev/null)
read=$(kd keys create --workspace alpha --name viewer --scope read 2>/dev/null)
other=$(kd keys create --workspace beta --name ci 2>/dev/null)
short=$(kd keys create --workspace alpha --name brief --expires 1 2>/dev/null)
check cli_create "full, read, other workspace's and a 1 s key" \
	[ "${full:0:5}" = kiln_ -a "${read:0:5}" = kiln_ -a "${other:0:5}" = kiln_ -a "${short:0:5}" = kiln_ ]
kd keys create --scope admin > /dev/null 2> "$dir/err" && fail cli_bad_scope "--scope admin accepted" ||
	check cli_bad_scope "$(head -1 "$dir/err")" grep -q -- --scope "$dir/err"
kd keys create --expires -5 > /dev/null 2> "$dir/err" && fail cli_bad_expires "--expires -5 accepted" ||
	check cli_bad_expires "$(head -1 "$dir/err")" grep -q -- --expires "$dir/err"
check cli_list "keys list shows the scope" bash -c "'$kilnd' --data '$dir/data' keys list | grep viewer | grep -qw read"

# ---- scopes -------------------------------------------------------------------------------------
api "$read" GET /v1/sandboxes
check read_get "GET /v1/sandboxes with a read key: $STATUS" [ "$STATUS" = 200 ]
api "$read" GET /v1/keys
check read_get_keys "GET /v1/keys with a read key: $STATUS" [ "$STATUS" = 200 ]
api "$read" POST /v1/sandboxes '{"template":"base"}'
ok=; [ "$STATUS" = 403 -a "$(jget 'j["error"]["code"]')" = forbidden ] && [[ $(jget 'j["error"]["message"]') == *read* ]] && ok=1
check read_post_refused "POST /v1/sandboxes: $STATUS $BODY" [ -n "$ok" ]
api "$read" DELETE /v1/sandboxes/sbx_nope
check read_delete_refused "DELETE /v1/sandboxes/ID: $STATUS" [ "$STATUS" = 403 ]
api "$read" POST /v1/keys '{"name":"escalate"}'
check read_cannot_make_keys "POST /v1/keys: $STATUS" [ "$STATUS" = 403 ]
api "$read" GET /v1/sandboxes/sbx_nope/pty
check read_no_pty "GET .../pty (a shell): $STATUS" [ "$STATUS" = 403 ]

# ---- create over REST: scope and expiry, and bad input --------------------------------------------
api "$full" POST /v1/keys '{"name":"ro2","scope":"read","expires_in_seconds":3600}'
check rest_create "201, scope $(jget 'j.get("scope")'), expires_at $(jget 'j.get("expires_at")')" \
	[ "$STATUS" = 201 -a "$(jget 'j["scope"]')" = read -a "$(jget 'j["expires_at"] is not None')" = True ]
ro2=$(jget 'j["key"]')
api "$ro2" POST /v1/keys '{}'
check rest_read_key_refused "a read key made over REST: POST /v1/keys $STATUS" [ "$STATUS" = 403 ]
api "$full" POST /v1/keys '{"scope":"admin"}'
ok=; [ "$STATUS" = 400 ] && [[ $(jget 'j["error"]["message"]') == *scope* ]] && ok=1
check bad_scope "$STATUS $(jget 'j["error"]["message"]')" [ -n "$ok" ]
api "$full" POST /v1/keys '{"expires_in_seconds":-5}'
ok=; [ "$STATUS" = 400 ] && [[ $(jget 'j["error"]["message"]') == *expires_in_seconds* ]] && ok=1
check bad_expiry "$STATUS $(jget 'j["error"]["message"]')" [ -n "$ok" ]
api "$full" POST /v1/keys '{"expires_in_seconds":1}'
rest_short=$(jget 'j["key"]')

# ---- expiry and revocation --------------------------------------------------------------------
sleep 2.2
api "$short" GET /v1/sandboxes
check expired_cli_key "a key made with --expires 1, 2 s later: $STATUS" [ "$STATUS" = 401 ]
api "$rest_short" GET /v1/sandboxes
check expired_rest_key "expires_in_seconds 1, 2 s later: $STATUS" [ "$STATUS" = 401 ]
api "$full" POST /v1/keys '{"name":"doomed"}'
doomed=$(jget 'j["key"]') doomed_id=$(jget 'j["id"]')
api "$doomed" GET /v1/sandboxes
first=$STATUS
api "$full" DELETE "/v1/keys/$doomed_id"
del=$STATUS
api "$doomed" GET /v1/sandboxes
check revoked_key "before $first, revoke $del, after $STATUS" [ "$first" = 200 -a "$del" = 204 -a "$STATUS" = 401 ]

# ---- the list: scope, expires_at, last_used_at ---------------------------------------------------
api "$full" GET /v1/keys
lst() { jget "[k for k in j['keys'] if k['name'] == '$1'][0]['$2']"; }
check list_fields "viewer: scope $(lst viewer scope), last used $(lst viewer last_used_at); ro2 expires $(lst ro2 expires_at)" \
	[ "$(lst viewer scope)" = read -a "$(lst ci scope)" = full -a "$(lst viewer last_used_at)" != None \
	  -a "$(lst ro2 expires_at)" != None -a "$(lst ci expires_at)" = None ]
api "$full" POST /v1/keys '{"name":"unused"}'
api "$full" GET /v1/keys
check never_used "a key never used: last_used_at $(lst unused last_used_at)" [ "$(lst unused last_used_at)" = None ]

# ---- the audit log ----------------------------------------------------------------------------
api "$other" POST /v1/keys '{"name":"beta-made"}'
api "$full" DELETE /v1/sandboxes/sbx_nope
audit_has() {	# the caller's newest entries include a DELETE of sbx_nope
	api "$full" GET '/v1/audit?limit=50'
	[ "$STATUS" = 200 ] && [ "$(jget 'any(e["target"] == "sbx_nope" for e in j["entries"])')" = True ]
}
until_ok 5 audit_has
check audit_get "GET /v1/audit: $STATUS, $(jget 'len(j["entries"])') entries" [ "$STATUS" = 200 ]
e0() { jget "j['entries'][0]['$1']"; }
prefix=${full:0:13}
check audit_newest_first "newest: $(e0 method) $(e0 route) $(e0 target) $(e0 status) by $(e0 key_prefix)" \
	[ "$(e0 method)" = DELETE -a "$(e0 route)" = '/v1/sandboxes/{id}' -a "$(e0 target)" = sbx_nope \
	  -a "$(e0 status)" = 404 -a "$(e0 key_prefix)" = "$prefix" -a "$(e0 time)" != None ]
check audit_revoke "the revocation: DELETE /v1/keys/{id} $doomed_id 204" \
	[ "$(jget "any(e['route'] == '/v1/keys/{id}' and e['target'] == '$doomed_id' and e['status'] == 204 for e in j['entries'])")" = True ]
check audit_created "the key made: POST /v1/keys 201, target its id $doomed_id" \
	[ "$(jget "any(e['route'] == '/v1/keys' and e['target'] == '$doomed_id' and e['status'] == 201 for e in j['entries'])")" = True ]
check audit_refusals "the read key's refused POST is recorded as 403" \
	[ "$(jget "any(e['key_prefix'] == '${read:0:13}' and e['status'] == 403 and e['method'] == 'POST' for e in j['entries'])")" = True ]
check audit_no_reads "no GET is recorded but the PTY's (a shell, a full key's route)" \
	[ "$(jget 'any(e["method"] == "GET" and not e["route"].endswith("/pty") for e in j["entries"])')" = False ]
check audit_own_workspace "none of workspace beta's" \
	[ "$(jget "any(e['key_prefix'] == '${other:0:13}' for e in j['entries'])")" = False ]
n=$(jget 'len(j["entries"])')
check audit_order "times newest first over $n entries" \
	[ "$(jget 'all(a["time"] >= b["time"] for a, b in zip(j["entries"], j["entries"][1:]))')" = True ]
api "$other" GET /v1/audit
check audit_other_workspace "beta sees its own: $(jget 'len(j["entries"])') entries" \
	[ "$STATUS" = 200 -a "$(jget 'len(j["entries"])')" = 1 -a "$(jget 'j["entries"][0]["route"]')" = /v1/keys ]
api "$read" 'GET' '/v1/audit?limit=1'
check audit_limit "limit=1 with a read key: $STATUS, $(jget 'len(j["entries"])') entry" \
	[ "$STATUS" = 200 -a "$(jget 'len(j["entries"])')" = 1 ]
api "$full" GET '/v1/audit?limit=0'
ok=; [ "$STATUS" = 400 ] && [[ $(jget 'j["error"]["message"]') == *limit* ]] && ok=1
check audit_bad_limit "limit=0: $STATUS $(jget 'j["error"]["message"]')" [ -n "$ok" ]

# ---- two replicas on one PostgreSQL -------------------------------------------------------------
if ! pg_server_start "$pgdir"; then
	fail pg_start "$pg_error"
	exit 1
fi
"${pg_as[@]}" "$pg_bin/createdb" -h "$pgdir" -U kiln kiln_keys >/dev/null 2>&1 || { fail pg_start createdb; exit 1; }
store="postgresql://kiln@/kiln_keys?host=$pgdir&pool=2"
p1=$(free_port) p2=$(free_port)
serve r1 "$p1" --store "$store" && serve r2 "$p2" --store "$store" ||
	{ fail pg_replicas "$(tail -3 "$dir"/r?.log)"; exit 1; }
API1=http://127.0.0.1:$p1 API2=http://127.0.0.1:$p2
pgfull=$("$kilnd" --data "$dir/r1" --store "$store" keys create --workspace gamma 2>/dev/null)
API=$API1; api "$pgfull" POST /v1/keys '{"name":"roaming"}'
roam=$(jget 'j["key"]') roam_id=$(jget 'j["id"]')
API=$API1; api "$pgfull" POST /v1/keys '{"name":"viewer","scope":"read"}'
pgread=$(jget 'j["key"]')
API=$API2; api "$roam" GET /v1/sandboxes
before=$STATUS
API=$API2; api "$pgread" DELETE "/v1/keys/$roam_id"
read_refused=$STATUS
API=$API1; api "$pgfull" DELETE "/v1/keys/$roam_id"
revoked=$STATUS
API=$API2; api "$roam" GET /v1/sandboxes
check pg_revoke_every_replica "made on r1, used on r2: $before; read key's revoke on r2: $read_refused; revoked on r1: $revoked; then on r2: $STATUS" \
	[ "$before" = 200 -a "$read_refused" = 403 -a "$revoked" = 204 -a "$STATUS" = 401 ]
audit_pg() { API=$API2; api "$pgfull" GET /v1/audit; [ "$(jget 'len(j["entries"])')" -ge 4 ] 2>/dev/null; }
until_ok 5 audit_pg
check pg_audit "r2 reads r1's and r2's entries: $(jget '[e["method"] + " " + str(e["status"]) for e in j["entries"]]')" \
	[ "$(jget 'sorted(e["status"] for e in j["entries"])')" = "[201, 201, 204, 403]" ]

# ---- retention: entries older than --audit-days go --------------------------------------------
psql_() { "${pg_as[@]}" "$pg_bin/psql" -h "$pgdir" -U kiln -d kiln_keys -At -c "$1" 2>&1; }
psql_ "INSERT INTO audit_log (id, workspace_id, key_id, key_prefix, method, route, target, status, created_ms)
       SELECT 'aud_old', workspace_id, key_id, key_prefix, 'POST', '/v1/ancient', NULL, 201,
              $(( ($(date +%s) - 2 * 86400) * 1000 )) FROM audit_log LIMIT 1" > /dev/null
old_listed() { API=$API1; api "$pgfull" GET '/v1/audit?limit=100'; [ "$(jget 'any(e["route"] == "/v1/ancient" for e in j["entries"])')" = "$1" ]; }
old_listed True; kept_before=$?
p3=$(free_port)
serve r3 "$p3" --store "$store" --audit-days 1 || fail pg_r3 "$(tail -3 "$dir/r3.log")"
until_ok 10 old_listed False
gone=$?
n=$(jget 'len(j["entries"])')
ok=; [ $kept_before = 0 -a $gone = 0 -a "$n" -ge 4 ] && grep -q 'removed 1 entries older than 1 days' "$dir/r3.log" && ok=1
check audit_retention "an entry of 2 days ago: listed ($kept_before), then gone ($gone) once a replica with --audit-days 1 started; $n newer kept; its log: $(grep -o 'removed [0-9]* entries older than 1 days' "$dir/r3.log")" [ -n "$ok" ]
"$kilnd" --audit-days -1 --data "$dir/x" keys list > "$dir/bad.out" 2>&1
check audit_days_bad "--audit-days -1: $(cat "$dir/bad.out")" grep -q -- "--audit-days" "$dir/bad.out"
exit $rc
