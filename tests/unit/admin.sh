#!/bin/bash
# tests/unit/admin.sh [REPO [BUILD]]: the operator's API (/v1/admin,
# docs/security.md "Operators") over real HTTP from kilnd serving the API
# on a throwaway SQLite data directory, no VM. Checks who may call it (an
# operator credential made by `kilnd admin create`; a workspace's key 403,
# none 401, a revoked credential 401), workspaces made, listed, read,
# changed and deleted (bad plan, limits and names 400 naming the field;
# delete refused 409 while a sandbox record is live), suspension (that
# workspace's key 403 workspace_suspended, another's not, restored when
# lifted), a key made through the API, and usage totals per workspace from
# known usage_hours rows. Everything started is stopped and removed at the
# end, failed or not. Run by the unit loop as build/tests/unit_admin;
# prints PASS/FAIL lines, exits 1 on any FAIL.
name=admin
. "$(dirname "$0")/apilib.sh"
op=$(kd admin create --name ops 2>/dev/null)
op2=$(kd admin create --name other 2>/dev/null)
alpha=$(kd keys create --workspace alpha 2>/dev/null)
beta=$(kd keys create --workspace beta 2>/dev/null)
[[ $op == kilnop_* && $op2 == kilnop_* && $alpha == kiln_* ]] || { fail setup "admin create: '$op'"; exit 1; }
check cli_list "$(kd admin list 2>&1 | head -2 | tr '\n' ' ')" bash -c "[ \$('$kilnd' --data '$dir/data' admin list | grep -c ' active') = 2 ]"
start_kilnd --price-vcpu-hour 0.072 --price-gib-hour 0.036

# status_is WANT [EXPR]: the last answer's status, and EXPR over its body.
status_is() { [ "$STATUS" = "$1" ] && { [ -z "${2-}" ] || is "$2"; }; }

# ---- who may call it
api "$op" GET /v1/admin/workspaces
check operator_ok "$STATUS $(body)" status_is 200 '{w["name"] for w in j["workspaces"]} == {"alpha", "beta"}'
api "$alpha" GET /v1/admin/workspaces
check workspace_key_403 "$STATUS $(body)" status_is 403 'j["error"]["code"] == "forbidden"'
api "" GET /v1/admin/workspaces
check no_credential_401 "$STATUS $(body)" status_is 401
api "kilnop_$(printf 'a%.0s' {1..32})" GET /v1/admin/usage
check unknown_credential_401 "$STATUS $(body)" status_is 401 '"unknown" in j["error"]["message"]'
api "kilnop_short" GET /v1/admin/usage
check malformed_credential_401 "$STATUS $(body)" status_is 401 '"malformed" in j["error"]["message"]'
api "$op" GET /v1/sandboxes
check operator_not_a_key "$STATUS $(body)" status_is 401
api "$op2" GET /v1/admin/workspaces
check second_credential_ok "$STATUS" status_is 200
kd admin revoke "$(kd admin list | awk '$3 == "other" {print $1}')" 2>/dev/null
api "$op2" GET /v1/admin/workspaces
check revoked_credential_401 "$STATUS $(body)" status_is 401

# ---- workspaces
api "$op" POST /v1/admin/workspaces '{"name":"gamma","plan":"pro","limits":{"running":3}}'
check create_201 "$STATUS $(body)" status_is 201 'j["name"] == "gamma" and j["plan"] == "pro" and j["limits"] == {"running": 3} and j["suspended"] is False and j["live_sandboxes"] == 0 and j["month_cost_microdollars"] == 0 and j["id"].startswith("ws_")'
api "$op" POST /v1/admin/workspaces '{"name":"gamma"}'
check create_exists_409 "$STATUS $(body)" status_is 409
api "$op" POST /v1/admin/workspaces '{"name":"Bad_Name"}'
check create_bad_name "$STATUS $(body)" status_is 400 '"name" in j["error"]["message"]'
api "$op" POST /v1/admin/workspaces '{"plan":"pro"}'
check create_no_name "$STATUS $(body)" status_is 400 '"name" in j["error"]["message"]'
api "$op" POST /v1/admin/workspaces '{"name":"delta","plan":"platinum"}'
check create_bad_plan "$STATUS $(body)" status_is 400 '"plan" in j["error"]["message"] and "platinum" in j["error"]["message"]'
api "$op" POST /v1/admin/workspaces '{"name":"delta","limits":{"runing":3}}'
check create_bad_limits "$STATUS $(body)" status_is 400 '"limits" in j["error"]["message"] and "runing" in j["error"]["message"]'
api "$op" POST /v1/admin/workspaces '{"name":"delta","color":"red"}'
check create_unknown_field "$STATUS $(body)" status_is 400 '"color" in j["error"]["message"]'
api "$op" GET /v1/admin/workspaces/delta
check bad_creates_made_nothing "$STATUS $(body)" status_is 404
api "$op" GET /v1/admin/workspaces/gamma
check get "$STATUS $(body)" status_is 200 'j["name"] == "gamma" and j["plan"] == "pro" and j["limits"] == {"running": 3}'
api "$op" GET /v1/admin/workspaces
check list "$STATUS $(body)" status_is 200 'sorted(w["name"] for w in j["workspaces"]) == ["alpha", "beta", "gamma"]'
api "$op" PATCH /v1/admin/workspaces/gamma '{"plan":"team"}'
check patch_plan_keeps_limits "$STATUS $(body)" status_is 200 'j["plan"] == "team" and j["limits"] == {"running": 3}'
api "$op" PATCH /v1/admin/workspaces/gamma '{"limits":{"vcpus":2}}'
check patch_limits_keeps_plan "$STATUS $(body)" status_is 200 'j["plan"] == "team" and j["limits"] == {"vcpus": 2}'
api "$op" PATCH /v1/admin/workspaces/gamma '{"limits":null,"plan":null}'
check patch_null_is_absent "$STATUS $(body)" status_is 200 'j["plan"] == "team" and j["limits"] == {"vcpus": 2}'
api "$op" PATCH /v1/admin/workspaces/gamma '{"plan":"gold"}'
check patch_bad_plan "$STATUS $(body)" status_is 400 '"plan" in j["error"]["message"] and "gold" in j["error"]["message"]'
api "$op" PATCH /v1/admin/workspaces/gamma '{"limits":{"vcpus":-1}}'
check patch_bad_limit "$STATUS $(body)" status_is 400 '"limits" in j["error"]["message"] and "vcpus" in j["error"]["message"]'
api "$op" PATCH /v1/admin/workspaces/gamma '{"suspended":"yes"}'
check patch_bad_suspended "$STATUS $(body)" status_is 400 '"suspended" in j["error"]["message"]'
api "$op" GET /v1/admin/workspaces/gamma
check bad_patches_changed_nothing "$STATUS $(body)" status_is 200 'j["plan"] == "team" and j["limits"] == {"vcpus": 2} and not j["suspended"]'
api "$op" PATCH /v1/admin/workspaces/gamma '{"limits":{}}'
check patch_limits_dropped "$STATUS $(body)" status_is 200 'j["plan"] == "team" and j["limits"] == {}'
api "$op" PATCH /v1/admin/workspaces/nosuch '{"suspended":true}'
check patch_missing_404 "$STATUS $(body)" status_is 404

# ---- a key made through the API
api "$op" POST /v1/admin/workspaces/gamma/keys '{"name":"ci","scope":"read"}'
check key_create "$STATUS $(body)" status_is 201 'j["key"].startswith("kiln_") and j["scope"] == "read" and j["name"] == "ci"'
gamma=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["key"])' "$dir/body" 2>/dev/null)
api "$gamma" GET /v1/keys
check key_works "$STATUS $(body)" status_is 200 '[k["name"] for k in j["keys"]] == ["ci"]'
api "$op" POST /v1/admin/workspaces/gamma/keys '{"scope":"root"}'
check key_bad_scope "$STATUS $(body)" status_is 400 '"scope" in j["error"]["message"]'
api "$op" POST /v1/admin/workspaces/nosuch/keys '{}'
check key_missing_workspace_404 "$STATUS $(body)" status_is 404
# The operator lists and revokes a workspace's keys; the audit log names
# what each change made.
api "$op" POST /v1/admin/workspaces/gamma/keys '{"name":"doomed"}'
doomed=$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["id"], j["key"])' "$dir/body" 2>/dev/null)
doomed_id=${doomed% *} doomed_key=${doomed#* }
api "$op" GET /v1/admin/workspaces/gamma/keys
check admin_keys_list "$STATUS $(body)" status_is 200 'sorted(k["name"] for k in j["keys"]) == ["ci", "doomed"] and all(not k["revoked"] for k in j["keys"])'
api "$op" GET /v1/admin/workspaces/alpha/keys
check admin_keys_own_workspace "$STATUS $(body)" status_is 200 '"ci" not in [k["name"] for k in j["keys"]] and len(j["keys"]) >= 1'
api "$op" DELETE "/v1/admin/workspaces/alpha/keys/$doomed_id"
check admin_key_other_workspace_404 "$STATUS $(body)" status_is 404
api "$op" DELETE "/v1/admin/workspaces/gamma/keys/$doomed_id"
check admin_key_revoke "$STATUS" status_is 204
api "$doomed_key" GET /v1/keys
check admin_revoked_401 "$STATUS $(body)" status_is 401
api "$op" DELETE "/v1/admin/workspaces/gamma/keys/$doomed_id"
check admin_key_revoke_again "$STATUS" status_is 204
api "$op" GET /v1/admin/workspaces/gamma/keys
check admin_keys_revoked_listed "$STATUS $(body)" status_is 200 '[k["revoked"] for k in j["keys"] if k["name"] == "doomed"] == [True]'
api "$gamma" GET "/v1/audit?limit=100"
check admin_audit_targets "$STATUS $(body)" status_is 200 "any(e['route'] == '/v1/admin/workspaces' and e['target'].startswith('ws_') for e in j['entries']) and any(e['route'] == '/v1/admin/workspaces/{name}/keys' and e['target'] == '$doomed_id' for e in j['entries']) and any(e['route'] == '/v1/admin/workspaces/{name}/keys/{id}' and e['target'] == 'gamma/$doomed_id' and e['status'] == 204 for e in j['entries'])"
# The audit log in pages, and one key's: every entry once.
api "$gamma" GET "/v1/audit?limit=100"
all=$(python3 -c 'import json,sys; print(" ".join(e["id"] for e in json.load(open(sys.argv[1]))["entries"]))' "$dir/body")
paged= cursor=
for _ in $(seq 1 50); do
	api "$gamma" GET "/v1/audit?limit=2${cursor:+&cursor=$cursor}"
	paged="$paged $(python3 -c 'import json,sys; print(" ".join(e["id"] for e in json.load(open(sys.argv[1]))["entries"]))' "$dir/body")"
	cursor=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["next_cursor"] or "")' "$dir/body")
	[ -z "$cursor" ] && break
done
check audit_pages "$(wc -w <<<"$all") entries, pages of 2 give $(wc -w <<<"$paged")" [ "$(echo $all)" = "$(echo $paged)" -a "$(wc -w <<<"$all")" -ge 4 ]
opprefix=$(python3 -c 'import json,sys; print([e["key_prefix"] for e in json.load(open(sys.argv[1]))["entries"] if e["key_prefix"].startswith("kilnop_")][0])' "$dir/body" 2>/dev/null)
api "$gamma" GET "/v1/audit?limit=100&key=$opprefix"
check audit_one_key "$opprefix: $STATUS $(body)" status_is 200 "j['entries'] and all(e['key_prefix'] == '$opprefix' for e in j['entries'])"
# Every answer to a workspace says its plan's creates window (Limit, and
# all of it Remaining: gamma made nothing), and a change of its limits
# within a second.
hdr() { curl -s -o /dev/null -D - -H "Authorization: Bearer $gamma" "$API$1" | sed -n "s/^$2: *//Ip" | tr -d '\r'; }
before=$(hdr /v1/keys X-RateLimit-Limit)
api "$op" PATCH /v1/admin/workspaces/gamma '{"limits":{"creates_per_hour":7}}'
sleep 1.1	# the window is read at most once a second per workspace
check window_every_answer "plan team: Limit '$before'; its own creates_per_hour 7: Limit $(hdr /v1/keys X-RateLimit-Limit), Remaining $(hdr /v1/audit X-RateLimit-Remaining)" \
	[ "$before" = 6000 -a "$(hdr /v1/keys X-RateLimit-Limit)" = 7 -a "$(hdr /v1/audit X-RateLimit-Remaining)" = 7 ]
api "$op" PATCH /v1/admin/workspaces/gamma '{"limits":{}}'
api "$gamma" GET "/v1/audit?cursor=12.nope"
check audit_bad_cursor "$STATUS $(body)" status_is 400 '"cursor" in j["error"]["message"]'

# ---- plans (docs/billing.md "Plans"): the operator's limits over the
# server's plans, and plans of their own, held at the next request
api "$op" GET /v1/admin/plans
check plans_list "$STATUS $(body)" status_is 200 '[p["name"] for p in j["plans"]] == ["free", "pro", "team", "enterprise"] and j["default_plan"] == "enterprise" and all(p["server_plan"] and p["operator_limits"] is None for p in j["plans"]) and j["plans"][0]["limits"]["running"] == 5'
api "$alpha" GET /v1/admin/plans
check plans_workspace_key_403 "$STATUS" status_is 403
api "$op" PUT /v1/admin/plans/team '{"limits":{"running":4}}'
check plan_put_over_server "$STATUS $(body)" status_is 200 'j["name"] == "team" and j["limits"]["running"] == 4 and j["limits"]["creates_per_hour"] == 6000 and j["operator_limits"] == {"running": 4} and j["server_plan"] and j["updated_at"]'
api "$op" PUT /v1/admin/plans/gold '{"limits":{"running":9,"vcpus":2}}'
check plan_put_new_201 "$STATUS $(body)" status_is 201 'j["name"] == "gold" and j["limits"]["running"] == 9 and j["limits"]["vcpus"] == 2 and j["limits"]["creates_per_hour"] == 0 and not j["server_plan"]'
api "$op" PATCH /v1/admin/workspaces/gamma '{"plan":"gold"}'
check workspace_on_operators_plan "$STATUS $(body)" status_is 200 'j["plan"] == "gold"'
api "$gamma" GET /v1/limits
check limits_of_operators_plan "$STATUS $(body)" status_is 200 'j["plan"] == "gold" and j["limits"]["running"] == 9 and j["limits"]["vcpus"] == 2'
api "$op" PUT /v1/admin/plans/gold '{"limits":{"running":1}}'
check plan_put_again_200 "$STATUS $(body)" status_is 200 'j["limits"]["running"] == 1 and j["limits"]["vcpus"] == 0'
api "$gamma" GET /v1/limits
check plan_change_held_at_once "$STATUS $(body)" status_is 200 'j["plan"] == "gold" and j["limits"]["running"] == 1 and j["limits"]["vcpus"] == 0'
for bad in 'limits|{"running":-1}|running' 'limits|{"runing":1}|runing' 'limits|{"ttl_absolute":2}|ttl_absolute' \
	'limits|"many"|limits' 'color|1|color' 'none||limits'; do
	IFS='|' read -r field value names <<<"$bad"
	[ "$field" = none ] && body='{}' || body="{\"$field\":$value}"
	api "$op" PUT /v1/admin/plans/gold "$body"
	check "plan_put_400_$names" "$body: $STATUS $(body)" status_is 400 "'$names' in j['error']['message']"
done
api "$op" PUT /v1/admin/plans/Gold_Plan '{"limits":{}}'
check plan_put_bad_name "$STATUS $(body)" status_is 400 '"Gold_Plan" in j["error"]["message"] and "a-z" in j["error"]["message"]'
api "$op" GET /v1/admin/plans/gold
check bad_puts_changed_nothing "$STATUS $(body)" status_is 200 'j["operator_limits"] == {"running": 1}'
api "$op" GET /v1/admin/plans/platinum
check plan_missing_404 "$STATUS $(body)" status_is 404 '"platinum" in j["error"]["message"]'
api "$op" PUT /v1/admin/plans/team '{"limits":{}}'
check plan_put_empty_restores "$STATUS $(body)" status_is 200 'j["limits"]["running"] == 500 and j["operator_limits"] == {}'
api "$op" GET /v1/admin/plans
check plans_list_operators "$STATUS $(body)" status_is 200 '[p["name"] for p in j["plans"]] == ["free", "pro", "team", "enterprise", "gold"] and j["plans"][4]["operator_limits"] == {"running": 1}'
api "$op" GET "/v1/admin/audit?limit=100"
check plans_audited "$STATUS $(body)" status_is 200 "[(e['method'], e['target'], e['status']) for e in j['entries']][::-1] == [('PUT', 'team', 200), ('PUT', 'gold', 201), ('PUT', 'gold', 200), ('PUT', 'team', 200)] and all(e['key_prefix'].startswith('kilnop_') for e in j['entries'])"
kd workspace plan delta gold > "$dir/ws.out" 2>&1
check kilnd_workspace_operators_plan "$(cat "$dir/ws.out")" grep -q '^delta gold {"running":1,' "$dir/ws.out"
# kiln admin plans: set, show, list (docs/cli.md)
kadm() { KILN_API_URL=$API KILN_ADMIN_KEY=$op "$build/kiln" admin plans "$@" 2>&1; }
out=$(kadm set silver --limits running=2,vcpus=1)
check cli_plans_set "$(tr '\n' '|' <<<"$out")" grep -q "^limits  *running=2,vcpus=1$" <<<"$out"
out=$(kadm show free)
check cli_plans_show "$(tr '\n' '|' <<<"$out")" grep -q "^from  *the server's$" <<<"$out"
out=$(kadm list)
check cli_plans_list "$(tr '\n' '|' <<<"$out")" eval 'grep -q "^gold  *operator  *-  *running=1$" <<<"$out" && grep -q "^enterprise  *server  *yes  *none$" <<<"$out"'
out=$(kadm set silver); st=$?
check cli_plans_set_needs_limits "exit $st: $(tr '\n' '|' <<<"$out")" eval '[ $st = 2 ] && grep -q "wants --limits" <<<"$out"'
api "$op" DELETE /v1/admin/workspaces/delta
api "$op" PATCH /v1/admin/workspaces/gamma '{"plan":"team"}'

# ---- suspension (a dashboard session signed in before it ends too)
curl -s -o /dev/null -c "$dir/jar" -X POST -H 'Content-Type: application/json' \
	--data "{\"api_key\":\"$alpha\"}" "$API/v1/session"
cookie() { STATUS=$(curl -s -o "$dir/body" -w '%{http_code}' -b "$dir/jar" "$API$1"); }
cookie /v1/sandboxes
check session_before "$STATUS $(body)" status_is 200
api "$op" PATCH /v1/admin/workspaces/alpha '{"suspended":true}'
check suspend "$STATUS $(body)" status_is 200 'j["suspended"] is True'
api "$alpha" GET /v1/sandboxes
check suspended_sandboxes_403 "$STATUS $(body)" status_is 403 'j["error"]["code"] == "workspace_suspended" and "alpha" in j["error"]["message"]'
api "$alpha" GET /v1/usage
check suspended_usage_403 "$STATUS $(body)" status_is 403 'j["error"]["code"] == "workspace_suspended"'
curl -s -o "$dir/body" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
	--data "{\"api_key\":\"$alpha\"}" "$API/v1/session" > "$dir/status"; STATUS=$(cat "$dir/status")
check suspended_no_new_session "$STATUS $(body)" status_is 403 'j["error"]["code"] == "workspace_suspended"'
cookie /v1/sandboxes
check suspended_session_403 "$STATUS $(body)" status_is 403 'j["error"]["code"] == "workspace_suspended"'
api "$beta" GET /v1/sandboxes
check others_unaffected "$STATUS $(body)" status_is 200
api "$op" PATCH /v1/admin/workspaces/alpha '{"suspended":false}'
api "$alpha" GET /v1/sandboxes
check unsuspended_200 "$STATUS $(body)" status_is 200
api "$alpha" GET /v1/usage
check unsuspended_usage_200 "$STATUS $(body)" status_is 200
cookie /v1/sandboxes
check unsuspended_session_200 "$STATUS $(body)" status_is 200

# ---- usage, from what the host agent would have metered
python3 - "$dir/data/kilnd.db" <<'EOF' || fail setup "writing usage_hours"
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1])
ws = dict(db.execute("SELECT name, id FROM workspaces"))
now = int(time.time() * 1000) // 3600000 * 3600000
rows = [(ws["alpha"], "sbx_a", now - 3600000, 30_000_000, 1024 * 1800, 1_800_000),  # 30 vCPU-s, 0.5 GiB-h
        (ws["alpha"], "sbx_a", now, 90_000_000, 1024 * 3600, 3_600_000),            # 90 vCPU-s, 1 GiB-h
        (ws["beta"], "sbx_b", now, 100_000_000, 0, 100_000),                        # 100 vCPU-s
        (ws["beta"], "sbx_b", now - 90 * 86400000, 7_000_000, 0, 1000)]             # long ago
db.executemany("INSERT INTO usage_hours (workspace_id, sandbox_id, hour_ms, cpu_us, mem_mib_s, run_ms) "
               "VALUES (?, ?, ?, ?, ?, ?)", rows)
db.commit()
EOF
from=$(( $(date +%s) - 7200 ))
api "$op" GET "/v1/admin/usage?from=$from"
# alpha: 120 vCPU-s at 20 micro-dollars = 2400, 1.5 GiB-h at 36000 = 54000;
# beta: 100 vCPU-s = 2000; gamma nothing.
check usage_per_workspace "$STATUS $(body)" status_is 200 '{w["name"]: (w["active_vcpu_seconds"], w["cost_microdollars"]) for w in j["workspaces"]} == {"alpha": (120, 56400), "beta": (100, 2000), "gamma": (0, 0)} and j["total"]["cost_microdollars"] == 58400'
api "$op" GET "/v1/admin/usage?from=0"
check usage_range "$STATUS $(body)" status_is 200 '{w["name"]: w["active_vcpu_seconds"] for w in j["workspaces"]}["beta"] == 107'
api "$op" GET "/v1/admin/usage?from=soon"
check usage_bad_from "$STATUS $(body)" status_is 400 '"from" in j["error"]["message"]'
api "$op" GET /v1/admin/workspaces/alpha
check month_cost "$STATUS $(body)" status_is 200 'j["month_cost_microdollars"] >= 54000'

# ---- delete: refused while a sandbox record is live
python3 - "$dir/data/kilnd.db" <<'EOF' || fail setup "writing a sandbox record"
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1])
ws = dict(db.execute("SELECT name, id FROM workspaces"))
now = int(time.time() * 1000)
db.execute("INSERT INTO sandboxes (id, workspace_id, template, state, vcpus, memory_mib, ttl_seconds, "
           "created_ms, updated_ms, active_ms) VALUES ('sbx_admintest0000000000', ?, 'minimal', "
           "'hibernated', 1, 256, 0, ?, ?, ?)", (ws["gamma"], now, now, now))
db.commit()
EOF
api "$op" GET /v1/admin/workspaces/gamma
check live_counted "$STATUS $(body)" status_is 200 'j["live_sandboxes"] == 1'
api "$op" DELETE /v1/admin/workspaces/gamma
check delete_live_409 "$STATUS $(body)" status_is 409 '"1 live sandbox" in j["error"]["message"]'
api "$gamma" GET /v1/keys
check delete_refused_kept_keys "$STATUS" status_is 200
python3 -c "import sqlite3,sys; db=sqlite3.connect(sys.argv[1]); db.execute(\"UPDATE sandboxes SET state='deleted', deleted_ms=1 WHERE id='sbx_admintest0000000000'\"); db.commit()" "$dir/data/kilnd.db" ||
	fail setup "ending the sandbox record"
api "$op" DELETE /v1/admin/workspaces/gamma
check delete_204 "$STATUS $(body)" status_is 204
api "$gamma" GET /v1/keys
check deleted_keys_revoked "$STATUS $(body)" status_is 401
api "$op" GET /v1/admin/workspaces/gamma
check deleted_404 "$STATUS $(body)" status_is 404
api "$op" GET /v1/admin/workspaces
check deleted_not_listed "$STATUS $(body)" status_is 200 'sorted(w["name"] for w in j["workspaces"]) == ["alpha", "beta"]'
api "$op" POST /v1/admin/workspaces '{"name":"gamma"}'
check recreate_201 "$STATUS $(body)" status_is 201 'j["name"] == "gamma" and not j["suspended"]'

# ---- the audit log of the target workspace names the operator
api "$beta" GET /v1/audit
check audit_other_clean "$STATUS $(body)" status_is 200 'not any(e.get("key_prefix", "").startswith("kilnop_") for e in j.get("entries", j.get("audit", [])))'
api "$alpha" GET /v1/audit
check audit_names_operator "$STATUS $(body)" status_is 200 'any(e.get("key_prefix", "").startswith("kilnop_") and "/v1/admin/workspaces/{name}" in e.get("route", "") for e in j.get("entries", j.get("audit", [])))'
exit $rc
