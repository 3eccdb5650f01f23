#!/bin/bash
# The kiln CLI's keys, audit and admin commands (docs/cli.md) against a
# real kilnd over real HTTP, no sandbox: a key made with `kiln keys create`
# works at once and is listed (name, prefix, created, last used); a read
# key is refused a write (403) through the CLI; a revoked key is refused
# (401) at once; `kiln audit` shows the creates, the revoke and the refused
# write with key, method, route, target and time; it pages (--cursor, the
# hint on stderr, --all, which stops after 100 pages and says where to
# read on) and filters by key (id or prefix). With an operator
# credential from `kilnd admin create` in KILN_ADMIN_KEY, `kiln admin`
# makes, lists, changes the plan and limits of, suspends and deletes a
# workspace, makes, lists and revokes its keys (not another workspace's)
# and reads usage; each change is checked through the API with curl as
# well as in kiln's output, and in the audit log with what it made. A missing,
# misplaced, unknown or revoked credential and bad arguments are refused
# with a message naming the problem and a non-zero exit (2 for usage, 125
# for kilnd's refusals).
# where: native (no sandbox is started: tests/integration/run)
. "$(dirname "$0")/lib.sh"

start_kilnd --rate 0 || exit 1
KEY=$(new_key alpha)
export KILN_API_URL=$URL KILN_API_KEY=$KEY KILN_ADMIN_KEY=
# run_k ARGS...: kiln's stdout in OUT, its stderr in ERR, its exit status in ST.
run_k() { OUT=$("$KILN" "$@" 2> "$T/err"); ST=$?; ERR=$(cat "$T/err"); }
# refused NAME STATUS WANT ARGS...: kiln ARGS exits STATUS with WANT in its stderr.
refused() {
	local name=$1 want_st=$2 want=$3; shift 3
	run_k "$@"
	if [ "$ST" = "$want_st" ] && grep -qF -- "$want" <<<"$ERR"; then
		pass "$name" "exit $ST: $(head -1 <<<"$ERR")"
	else
		fail "$name" "exit $ST (wanted $want_st and '$want'): $ERR"
	fi
}
# js EXPR: a Python expression on $OUT's JSON (as j).
js() { python3 -c "import json,sys; j=json.load(sys.stdin); print(($1))" <<<"$OUT" 2>/dev/null; }
# row PATTERN: the line of $OUT that matches PATTERN (ERE), blanks squeezed.
row() { tr -s ' ' <<<"$OUT" | grep -E -- "$1"; }
# eventually CMD...: CMD until it succeeds, for 2 s at most (an audit entry
# is written once its request is answered, so it may trail the answer).
eventually() { for _ in $(seq 20); do "$@" && return 0; sleep 0.1; done; return 1; }
# audit_rows N PATTERN: kiln audit has N rows that match PATTERN.
audit_rows() { run_k audit; [ "$(row "$2" | wc -l)" = "$1" ]; }

# ---- keys create: the key alone on stdout, once; it works at once ---------------------------------
run_k keys create --name ci-full
NEW=$OUT
NEW_ID=$(grep -o 'key_[a-z0-9]*' <<<"$ERR" | head -1)
[ "$ST" = 0 ] && [[ $NEW =~ ^kiln_[a-z0-9]{32}$ ]] && [[ $NEW_ID == key_* ]] &&
	grep -q "shown only this once" <<<"$ERR" &&
	pass keys_create "stdout: the key alone; stderr: $ERR" || fail keys_create "exit $ST: '$OUT' / $ERR"
KILN_API_KEY=$NEW run_k ls
check keys_create_works "kiln ls with the new key: exit $ST $ERR" [ "$ST" = 0 ]
KEY=$NEW api GET /v1/limits
expect keys_create_works_api 200 -
run_k keys create --name ci-json --json
[ "$ST" = 0 ] && [ "$(js 'j["name"], j["scope"], j["expires_at"], j["key"][:13] == j["prefix"], j["id"][:4]')" = \
	"('ci-json', 'full', None, True, 'key_')" ] &&
	pass keys_create_json "the API's JSON: name, scope, prefix, no expiry" || fail keys_create_json "exit $ST: $OUT $ERR"

# ---- keys list: name, prefix, created, last used --------------------------------------------------
run_k keys list
head=$(head -1 <<<"$OUT" | tr -s ' ')
check keys_list_head "$head" [ "$head" = "ID PREFIX NAME SCOPE CREATED LAST_USED EXPIRES STATE" ]
line=$(row "^$NEW_ID ")
check keys_list_used "$line" grep -qE "^$NEW_ID ${NEW:0:13} ci-full full [0-9]+[smh] ago [0-9]+[smh] ago never active$" <<<"$line"
line=$(row " ci-json ")
check keys_list_unused "$line" grep -qE " ci-json full [0-9]+[smh] ago never never active$" <<<"$line"
run_k keys list --json
check keys_list_json "$(js '[k["name"] for k in j["keys"]]')" \
	[ "$(js '[(k["prefix"], k["last_used_at"] is not None, k["created_at"][:2]) for k in j["keys"] if k["id"] == "'"$NEW_ID"'"]')" = \
	"[('${NEW:0:13}', True, '20')]" ]

# ---- a read key: GETs yes, writes 403 through the CLI -------------------------------------------
run_k keys create --name ro --scope read --expires 3600
RO=$OUT
RO_ID=$(grep -o 'key_[a-z0-9]*' <<<"$ERR" | head -1)
check keys_create_read "$ERR" grep -q "scope read, expires 20" <<<"$ERR"
KILN_API_KEY=$RO run_k keys list
line=$(row " ro ")
check read_key_reads "exit $ST: $line" grep -qE "^$RO_ID ${RO:0:13} ro read [0-9]+[smh] ago [0-9]+[smh] ago in (59m|1h) active$" <<<"$line"
KILN_API_KEY=$RO refused read_key_no_key_create 125 "scope is read" keys create --name sneaky
grep -q "HTTP 403" <<<"$ERR" && pass read_key_403 "$ERR" || fail read_key_403 "$ERR"
KILN_API_KEY=$RO refused read_key_no_sandbox 125 "HTTP 403" create minimal
KILN_API_KEY=$RO refused read_key_no_revoke 125 "HTTP 403" keys revoke "$NEW_ID"
run_k keys list --json
check read_key_made_nothing "$(js 'sorted(k["name"] for k in j["keys"])')" \
	[ "$(js '"sneaky" in [k["name"] for k in j["keys"]], [k["revoked"] for k in j["keys"] if k["id"] == "'"$NEW_ID"'"]')" = "(False, [False])" ]

# ---- revoke: refused at once -----------------------------------------------------------------------
run_k keys revoke "$NEW_ID"
check keys_revoke "exit $ST, stdout '$OUT' $ERR" [ "$ST" = 0 -a -z "$OUT" ]
KILN_API_KEY=$NEW refused revoked_key_refused 125 "kilnd refused the API key in KILN_API_KEY" ls
KEY=$NEW api GET /v1/sandboxes
expect revoked_key_401 401 unauthorized
run_k keys list
line=$(row "^$NEW_ID ")
check keys_list_revoked "$line" grep -qE " revoked$" <<<"$line"
refused keys_revoke_unknown 125 "HTTP 404" keys revoke key_nosuchkey0000000000
refused keys_revoke_not_id 2 "'${NEW:0:13}' is not a key id" keys revoke "${NEW:0:13}"

# ---- audit: the creates, the revoke, the refused write -----------------------------------------
eventually audit_rows 1 " DELETE /v1/keys/\{id\} key_nosuchkey0000000000 404$"
head=$(head -1 <<<"$OUT" | tr -s ' ')
check audit_head "$head" [ "$head" = "TIME KEY METHOD ROUTE TARGET STATUS" ]
now=$(date -u +%s)
recent() {	# a TIME column within 5 minutes of now
	local t
	t=$(date -u -d "$(cut -d' ' -f1 <<<"$1")" +%s 2>/dev/null) && [ $((now - t)) -ge -5 ] && [ $((now - t)) -le 300 ]
}
line=$(row "^[^ ]+ ${KEY:0:13} POST /v1/keys $NEW_ID 201$")
check audit_create "$line" recent "$line"
line=$(row "^[^ ]+ ${KEY:0:13} DELETE /v1/keys/\{id\} $NEW_ID 204$")
check audit_revoke "$line" recent "$line"
line=$(row "^[^ ]+ ${RO:0:13} POST /v1/keys - 403$")
check audit_refused_write "$line" recent "$line"
check audit_time_format "$line" grep -qE '^20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z ' <<<"$line"
run_k audit --limit 2 --json
check audit_limit_json "$(js '[(e["method"], e["route"]) for e in j["entries"]]')" \
	[ "$(js 'len(j["entries"]), j["entries"][0]["target"], j["entries"][0]["key_id"][:4]')" = "(2, 'key_nosuchkey0000000000', 'key_')" ]
refused audit_limit_range 2 "--limit: '1001'" audit --limit 1001
refused audit_no_args 2 "unexpected argument 'x'" audit x

# ---- audit pages: a full page says how to read on; --all reads to the end ------------------------
# ids [EXPR]: the ids of $OUT's entries (those EXPR, on e, holds for), one a line.
ids() { js "'\\n'.join([e['id'] for e in j['entries'] if (${1:-True})] + ['next_cursor=%s' % j['next_cursor']])"; }
# (The last line is the answer's next_cursor: None at the end of the log.)
run_k audit --limit 1000 --json
ALL=$(ids) NALL=$(($(wc -l <<<"$(ids)") - 1))
check audit_whole_log "$NALL entries, $(tail -1 <<<"$ALL"), stderr '$ERR'" \
	[ "$NALL" -ge 8 -a "$(tail -1 <<<"$ALL")" = "next_cursor=None" -a -z "$ERR" ]
run_k audit --limit 2
more=$(grep -xE 'more: kiln audit --limit 2 --cursor [0-9]+\.aud_[a-z0-9]+' <<<"$ERR")
[ "$ST" = 0 ] && [ -n "$more" ] && [ "$(wc -l <<<"$OUT")" = 3 ] &&
	pass audit_more_hint "$more" || fail audit_more_hint "exit $ST: $OUT / $ERR"
read -ra next <<<"${more#more: kiln }"
run_k "${next[@]}" --json
got=$(ids | head -2)
check audit_cursor_reads_on "${next[*]}: $(tr '\n' ' ' <<<"$got")" [ "$got" = "$(sed -n 3,4p <<<"$ALL")" ]
run_k audit --limit 2 --json
got=$(ids)
check audit_json_page "the API's answer, its next_cursor; the hint too" \
	[ "$got" = "$(head -2 <<<"$ALL")
next_cursor=${more##* }" -a "$ERR" = "$more" ]
run_k audit --all --limit 3 --json
got=$(ids)
check audit_all_json "$(($(wc -l <<<"$got") - 1)) entries, stderr '$ERR'" [ "$got" = "$ALL" -a -z "$ERR" ]
run_k audit --all --limit 2
check audit_all_table "$(wc -l <<<"$OUT") lines for $NALL entries, stderr '$ERR'" \
	[ "$ST" = 0 -a "$(wc -l <<<"$OUT")" = $((NALL + 1)) -a -z "$ERR" ]
refused audit_bad_cursor 125 "cursor: not one this API gave" audit --cursor 12ab

# ---- audit --key: one key's entries, by its id or its prefix --------------------------------------
run_k audit --limit 1000 --json
want=$(ids "e['key_id'] == '$RO_ID'")
run_k audit --key "$RO_ID" --json
got=$(ids)
# (its three refused writes, and the next_cursor line)
check audit_key_id "$(tr '\n' ' ' <<<"$got")" [ "$got" = "$want" -a "$(wc -l <<<"$got")" -ge 4 ]
run_k audit --key "${RO:0:13}" --json
check audit_key_prefix "the same entries" [ "$(ids)" = "$want" ]
run_k audit --key "${KEY:0:13}"
keys=$(tail -n +2 <<<"$OUT" | tr -s ' ' | cut -d' ' -f2 | sort -u)
check audit_key_table "KEY column: $keys" [ "$keys" = "${KEY:0:13}" ]
run_k audit --key key_nosuchkey0000000000
check audit_key_none "exit $ST: $OUT" [ "$ST" = 0 -a "$(wc -l <<<"$OUT")" = 1 ]
refused audit_key_name 2 "--key wants a key's id (key_...) or prefix" audit --key ci-full
refused audit_key_whole 2 "--key: that is a whole key" audit --key "$KEY"

# ---- audit --all stops after 100 pages and says where to read on --------------------------------
# 101 refused revokes make the log longer than 100 pages of one entry
# (one curl for all: a curl each takes seconds).
urls=(); for i in $(seq 101); do urls+=(-o /dev/null "$URL/v1/keys/key_bound$i"); done
n404=$(curl -s -w '%{http_code}\n' -X DELETE -H "Authorization: Bearer $KEY" "${urls[@]}" | grep -c '^404$')
check audit_bound_setup "$n404 of 101 revokes answered 404" [ "$n404" = 101 ]
log_is() { run_k audit --limit 1000 --json; ALL=$(ids); [ "$(wc -l <<<"$ALL")" = $((NALL + 102)) ]; }
eventually log_is
run_k audit --all --limit 1 --json
first=$(ids)
stop=$(grep -xE 'kiln: stopped after 100 pages \(100 entries\); the rest: kiln audit --all --limit 1 --cursor [0-9]+\.aud_[a-z0-9]+' <<<"$ERR")
[ "$ST" = 0 ] && [ -n "$stop" ] && [ "$(wc -l <<<"$first")" = 101 ] && [ "$(tail -1 <<<"$first")" = "next_cursor=${stop##* }" ] &&
	pass audit_all_bounded "$stop" || fail audit_all_bounded "exit $ST: $ERR $(tail -1 <<<"$first")"
read -ra next <<<"${stop#*the rest: kiln }"
run_k "${next[@]}" --json
got=$(ids)
check audit_all_rest "$(($(wc -l <<<"$got") - 1)) more, stderr '$ERR'" \
	[ "$(head -100 <<<"$first")
$got" = "$ALL" -a -z "$ERR" ]

# ---- bad arguments: exit 2, naming the problem, nothing sent -----------------------------------
refused keys_no_sub 2 "keys wants one of: list, create, revoke" keys
refused keys_bad_sub 2 "unknown subcommand 'make'" keys make
refused keys_bad_scope 2 "--scope is full or read, not 'admin'" keys create --scope admin
refused keys_bad_expires 2 "--expires: '10m'" keys create --expires 10m
refused keys_list_no_name 2 "keys list does not take the option --name" keys list --name x
refused keys_revoke_nothing 2 "keys revoke wants the id of a key" keys revoke
refused keys_extra_arg 2 "unexpected argument 'x'" keys create x

# ---- admin: the credential --------------------------------------------------------------------------
OP=$("$KILND" --data "$DATA" admin create --name cli-test 2>/dev/null)
OP2=$("$KILND" --data "$DATA" admin create --name cli-revoked 2>/dev/null)
[[ $OP == kilnop_* && $OP2 == kilnop_* ]] && pass admin_credential "kilnd admin create: ${OP:0:15}..." ||
	{ fail admin_credential "'$OP' '$OP2'"; exit 1; }
"$KILND" --data "$DATA" admin revoke "$("$KILND" --data "$DATA" admin list | awk '$3 == "cli-revoked" {print $1}')" 2>/dev/null
refused admin_no_credential 125 "no operator credential: set KILN_ADMIN_KEY" admin workspaces list
KILN_ADMIN_KEY=$KEY refused admin_workspace_key 125 "KILN_ADMIN_KEY holds a workspace's API key" admin workspaces list
KILN_ADMIN_KEY=kilnop_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa refused admin_unknown_credential 125 \
	"kilnd refused the operator credential in KILN_ADMIN_KEY: unknown or revoked" admin workspaces list
KILN_ADMIN_KEY=$OP2 refused admin_revoked_credential 125 \
	"kilnd refused the operator credential in KILN_ADMIN_KEY" admin usage
KILN_ADMIN_KEY=kilnop_short refused admin_malformed_credential 125 "malformed operator credential" admin workspaces list
# An operator credential is no API key: kiln uses it for kiln admin alone.
KILN_API_KEY= KILN_ADMIN_KEY=$OP refused admin_credential_not_api_key 125 "no API key: set KILN_API_KEY" keys list
export KILN_ADMIN_KEY=$OP

# ---- admin workspaces ---------------------------------------------------------------------------------
# ws_is NAME EXPR: GET /v1/admin/workspaces/NAME with the credential, EXPR true on it.
ws_is() { KEY=$OP api GET "/v1/admin/workspaces/$1"; [ "$STATUS" = 200 ] && [ "$(jget "$2")" = True ]; }
run_k admin workspaces create acme --plan pro --limits running=3,vcpus=4
ACME_ID=$(row "^id " | cut -d' ' -f2)
[ "$ST" = 0 ] && row "^plan pro$" > /dev/null && row "^limits running=3,vcpus=4$" > /dev/null &&
	row "^suspended no$" > /dev/null && ws_is acme 'j["plan"] == "pro" and j["limits"] == {"running": 3, "vcpus": 4}' &&
	pass admin_create "$(tr '\n' ';' <<<"$OUT" | tr -s ' ')" || fail admin_create "exit $ST: $OUT $ERR $BODY"
refused admin_create_exists 125 "HTTP 409" admin workspaces create acme
refused admin_create_bad_plan 125 "platinum" admin workspaces create delta --plan platinum
refused admin_create_bad_limit 125 "runing" admin workspaces create delta --limits runing=3
KEY=$OP api GET /v1/admin/workspaces/delta
expect admin_bad_creates_made_nothing 404 not_found
run_k admin workspaces list
line=$(row "^acme ")
check admin_list "$line" grep -qE "^acme ws_[a-z0-9]+ pro running=3,vcpus=4 no 0 \\\$0\.000000 [0-9]+[smh] ago$" <<<"$line"
check admin_list_alpha "$(row '^alpha ')" grep -qE "^alpha ws_[a-z0-9]+ enterprise - no 0 " <<<"$(row '^alpha ')"
run_k admin workspaces list --json
check admin_list_json "$(js 'sorted(w["name"] for w in j["workspaces"])')" \
	[ "$(js 'sorted(w["name"] for w in j["workspaces"])')" = "['acme', 'alpha']" ]
run_k admin workspaces show acme --json
check admin_show_json "exit $ST" [ "$(js 'j["name"], j["plan"], j["suspended"]')" = "('acme', 'pro', False)" ]

run_k admin workspaces plan acme team
[ "$ST" = 0 ] && row "^plan team$" > /dev/null &&
	ws_is acme 'j["plan"] == "team" and j["limits"] == {"running": 3, "vcpus": 4}' &&
	pass admin_plan "plan team, its limits kept" || fail admin_plan "exit $ST: $OUT $ERR $BODY"
run_k admin workspaces plan acme --limits creates_per_hour=7
[ "$ST" = 0 ] && ws_is acme 'j["plan"] == "team" and j["limits"] == {"creates_per_hour": 7}' &&
	pass admin_plan_limits "limits replaced, plan kept" || fail admin_plan_limits "exit $ST: $OUT $ERR $BODY"
run_k admin workspaces plan acme --limits none
[ "$ST" = 0 ] && row "^limits none \(the plan's\)$" > /dev/null && ws_is acme 'j["limits"] == {}' &&
	pass admin_plan_no_limits "--limits none drops them" || fail admin_plan_no_limits "exit $ST: $OUT $ERR $BODY"
refused admin_plan_bad 125 "gold" admin workspaces plan acme gold

# A key of the workspace, made by the operator.
run_k admin keys create acme --name made-by-op --scope full
AK=$OUT
[ "$ST" = 0 ] && [[ $AK =~ ^kiln_[a-z0-9]{32}$ ]] && grep -q "shown only this once" <<<"$ERR" &&
	pass admin_key_create "$ERR" || fail admin_key_create "exit $ST: $OUT $ERR"
AK_ID=$(grep -o 'key_[a-z0-9]*' <<<"$ERR" | head -1)
KILN_API_KEY=$AK run_k keys list
check admin_key_works "$(row ' made-by-op ')" grep -qE "^$AK_ID ${AK:0:13} made-by-op full " <<<"$(row ' made-by-op ')"

# Its keys, listed and revoked by the operator.
run_k admin keys list acme
head=$(head -1 <<<"$OUT" | tr -s ' ')
check admin_keys_list_head "$head" [ "$head" = "ID PREFIX NAME SCOPE CREATED LAST_USED EXPIRES STATE" ]
check admin_keys_list "$(row ' made-by-op ')" \
	grep -qE "^$AK_ID ${AK:0:13} made-by-op full [0-9]+[smh] ago [0-9]+[smh] ago never active$" <<<"$(row ' made-by-op ')"
run_k admin keys list acme --json
check admin_keys_list_json "$(js '[k["name"] for k in j["keys"]]')" [ "$(js '[k["id"] for k in j["keys"]]')" = "['$AK_ID']" ]
refused admin_keys_list_unknown 125 "HTTP 404" admin keys list nosuch
run_k admin keys create acme --name to-revoke
AK2=$OUT AK2_ID=$(grep -o 'key_[a-z0-9]*' <<<"$ERR" | head -1)
refused admin_keys_revoke_checks_first 2 "'${AK2:0:13}' is not a key id (key_...: kiln admin keys list acme shows them)" \
	admin keys revoke acme "$AK2_ID" "${AK2:0:13}"
KILN_API_KEY=$AK2 run_k keys list
check admin_keys_revoke_sent_nothing "exit $ST $ERR" [ "$ST" = 0 ]
run_k admin keys revoke acme "$AK2_ID"
check admin_keys_revoke "exit $ST, stdout '$OUT' $ERR" [ "$ST" = 0 -a -z "$OUT" ]
KILN_API_KEY=$AK2 refused admin_keys_revoked_refused 125 "kilnd refused the API key in KILN_API_KEY" keys list
run_k admin keys list acme
check admin_keys_list_revoked "$(row "^$AK2_ID ")" grep -qE " to-revoke full .* revoked$" <<<"$(row "^$AK2_ID ")"
run_k admin keys revoke acme "$AK2_ID"
check admin_keys_revoke_again "already revoked: exit $ST $ERR" [ "$ST" = 0 ]
refused admin_keys_revoke_other_ws 125 "HTTP 404" admin keys revoke acme "$RO_ID"
KILN_API_KEY=$RO run_k keys list
check admin_keys_other_ws_kept "alpha's key still works: exit $ST $ERR" [ "$ST" = 0 ]

run_k admin workspaces suspend acme
[ "$ST" = 0 ] && row "^suspended yes$" > /dev/null && ws_is acme 'j["suspended"] is True' &&
	pass admin_suspend "suspended yes" || fail admin_suspend "exit $ST: $OUT $ERR"
KILN_API_KEY=$AK refused admin_suspended_key 125 "workspace acme is suspended" keys list
run_k keys list
check admin_suspend_alone "another workspace's key still works: exit $ST $ERR" [ "$ST" = 0 ]
run_k admin workspaces unsuspend acme
[ "$ST" = 0 ] && row "^suspended no$" > /dev/null && ws_is acme 'j["suspended"] is False' &&
	pass admin_unsuspend "suspended no" || fail admin_unsuspend "exit $ST: $OUT $ERR"
KILN_API_KEY=$AK run_k keys list
check admin_unsuspended_key "exit $ST $ERR" [ "$ST" = 0 ]
# The operator's changes are in the workspace's audit log, by the credential.
# (plan team, --limits, --limits none, suspend, unsuspend; not plan gold: refused)
KILN_API_KEY=$AK check admin_audited "5 PATCH rows by ${OP:0:15}" \
	eventually audit_rows 5 "^[^ ]+ ${OP:0:15} PATCH /v1/admin/workspaces/\{name\} acme 200$"
# What the operator made is the target: the workspace's id, the key's id.
KILN_API_KEY=$AK check admin_audited_create "POST by ${OP:0:15}, target $ACME_ID" \
	audit_rows 1 "^[^ ]+ ${OP:0:15} POST /v1/admin/workspaces $ACME_ID 201$"
KILN_API_KEY=$AK check admin_audited_key "POST .../keys by ${OP:0:15}, target $AK_ID" \
	audit_rows 1 "^[^ ]+ ${OP:0:15} POST /v1/admin/workspaces/\{name\}/keys $AK_ID 201$"
# Both revokes answered 204 (the second: already revoked); the 404 was alpha's key, not acme's.
KILN_API_KEY=$AK check admin_audited_revoke "DELETE .../keys/{id} by ${OP:0:15}, target acme/$AK2_ID" \
	audit_rows 2 "^[^ ]+ ${OP:0:15} DELETE /v1/admin/workspaces/\{name\}/keys/\{id\} acme/$AK2_ID 204$"
KILN_API_KEY=$AK run_k audit
by_op=$(row "^[^ ]+ ${OP:0:15} " | wc -l)
KILN_API_KEY=$AK run_k audit --key "${OP:0:15}"
check admin_audit_key_prefix "$by_op rows by ${OP:0:15}" \
	[ "$(tail -n +2 <<<"$OUT" | wc -l)" = "$by_op" -a "$(row "^[^ ]+ ${OP:0:15} " | wc -l)" = "$by_op" -a "$by_op" -ge 10 ]
OP_ID=$("$KILND" --data "$DATA" admin list | awk '$3 == "cli-test" {print $1}')
KILN_API_KEY=$AK run_k audit --key "$OP_ID"
check admin_audit_key_id "$OP_ID: $(($(wc -l <<<"$OUT") - 1)) rows" \
	[ "$(tail -n +2 <<<"$OUT" | wc -l)" = "$by_op" -a "$(row "^[^ ]+ ${OP:0:15} " | wc -l)" = "$by_op" ]

run_k admin usage
[ "$ST" = 0 ] && [ "$(sed -n 2p <<<"$OUT" | tr -s ' ')" = "WORKSPACE ACTIVE_VCPU_S GIB_HOURS RUNNING_S COST" ] &&
	row "^acme 0\.000 0\.000000 0\.0 \\\$0\.000000$" > /dev/null && row "^total " > /dev/null &&
	pass admin_usage "$(tr '\n' ';' <<<"$OUT" | tr -s ' ')" || fail admin_usage "exit $ST: $OUT $ERR"
run_k admin usage --from 2026-01-01 --to 2026-02-01 --json
check admin_usage_range "$(js 'j["from"], j["to"]')" \
	[ "$(js 'j["from"][:10], j["to"][:10], sorted(w["name"] for w in j["workspaces"])')" = "('2026-01-01', '2026-02-01', ['acme', 'alpha'])" ]
refused admin_usage_bad_from 125 "from" admin usage --from yesterday

# A plan of the operator's is not deleted while acme is on it.
run_k admin plans set cli-gold --limits running=2
run_k admin workspaces plan acme cli-gold
refused admin_plan_delete_in_use 125 "plan 'cli-gold' is in use by 1 workspace: move it" admin plans delete cli-gold
KEY=$OP api GET /v1/admin/plans/cli-gold
expect admin_plan_kept 200 -

run_k admin workspaces delete acme
check admin_delete "exit $ST, stdout '$OUT' $ERR" [ "$ST" = 0 -a -z "$OUT" ]
KEY=$OP api GET /v1/admin/workspaces/acme
expect admin_deleted 404 not_found
refused admin_show_deleted 125 "HTTP 404" admin workspaces show acme
KILN_API_KEY=$AK refused admin_deleted_keys_revoked 125 "kilnd refused the API key" keys list

# Its workspace deleted, the plan goes: 404 after, in the operator's audit
# log; a workspace made again as acme is on the default plan, not on it.
run_k admin plans delete cli-gold
check admin_plan_delete "exit $ST, stdout '$OUT' $ERR" [ "$ST" = 0 -a -z "$OUT" ]
KEY=$OP api GET /v1/admin/plans/cli-gold
expect admin_plan_deleted 404 not_found
refused admin_plan_delete_again 125 "no plan 'cli-gold'" admin plans delete cli-gold
refused admin_plan_delete_server 125 "one of the server's plans" admin plans delete free
refused admin_plan_delete_default 125 "the server's default plan" admin plans delete enterprise
refused admin_plan_gone_set 125 "cli-gold" admin workspaces create acme --plan cli-gold
KEY=$OP api GET "/v1/admin/audit?limit=20"
check admin_plan_delete_audited "$(jget '[(e["method"], e["target"], e["status"]) for e in j["entries"] if e["method"] == "DELETE" and "plans" in e["route"]]')" \
	[ "$(jget '[(e["method"], e["target"], e["status"]) for e in j["entries"] if e["method"] == "DELETE" and "plans" in e["route"]]')" = "[('DELETE', 'cli-gold', 204)]" ]
run_k admin workspaces create acme
KEY=$OP api GET /v1/admin/workspaces/acme
check admin_remade_default_plan "$(jget 'j["plan"]')" [ "$(jget 'j["plan"]')" = enterprise ]
run_k admin workspaces delete acme

# ---- admin: bad arguments ---------------------------------------------------------------------------
refused admin_no_sub 2 "admin wants one of: workspaces, keys, usage" admin
refused admin_ws_no_sub 2 "admin workspaces wants one of: list, show, create" admin workspaces
refused admin_ws_bad_sub 2 "admin workspaces: unknown subcommand 'rename'" admin workspaces rename acme
refused admin_bad_name 2 "'Bad_Name' is not a workspace name" admin workspaces create Bad_Name
refused admin_no_name 2 "a workspace name is missing" admin workspaces show
refused admin_plan_nothing 2 "wants a PLAN, --limits or both" admin workspaces plan acme
refused admin_bad_limits 2 "--limits running: 'many'" admin workspaces create acme --limits running=many
refused admin_limits_form 2 "--limits wants LIMIT=N" admin workspaces create acme --limits running
refused admin_opt_elsewhere 2 "admin workspaces suspend does not take the option --plan" admin workspaces suspend acme --plan pro
refused admin_usage_opts 2 "admin usage does not take the option --limits" admin usage --limits running=1
refused admin_keys_no_ws 2 "a workspace name is missing" admin keys create
refused admin_keys_bad_sub 2 "admin keys: unknown subcommand 'rotate' (create, list, revoke)" admin keys rotate acme
refused admin_keys_list_no_ws 2 "a workspace name is missing" admin keys list
refused admin_keys_list_extra 2 "unexpected argument 'key_x'" admin keys list acme key_x
refused admin_keys_list_opt 2 "admin keys list does not take the option --name" admin keys list acme --name x
refused admin_keys_revoke_nothing 2 "admin keys revoke wants the id of a key" admin keys revoke acme
# Usage errors come before the credential is looked at.
KILN_ADMIN_KEY= refused admin_usage_before_credential 2 "is not a workspace name" admin workspaces show ../x
KILN_ADMIN_KEY= refused admin_revoke_usage_first 2 "'kiln_x' is not a key id" admin keys revoke acme kiln_x

alive kilnd_alive
