#!/bin/bash
# tests/unit/billing.sh [REPO [BUILD]]: usage by the hour, the month's bill
# and a spent credit (docs/billing.md), over real HTTP from kilnd serving
# the API on a throwaway SQLite data directory (no VM: what the host agent
# would have metered is written into usage_hours, the table it adds to, so
# that the figures are known exactly). Checks /v1/usage by hour and by day,
# one sandbox's, CSV, the prices kilnd is given, /v1/billing (cost,
# projected, credit left), 402 credit_exhausted on a create and a wake of
# a workspace whose credit is spent while another workspace is not held,
# a plan without the workspace MCP, bad queries, and the free plan's one
# volume of at most 1 GiB. Everything started is stopped and removed at the end,
# failed or not. Run by the unit loop as build/tests/unit_billing; prints
# PASS/FAIL lines, exits 1 on any FAIL.
name=billing
. "$(dirname "$0")/apilib.sh"
rich=$(kd keys create --workspace rich 2>/dev/null)
broke=$(kd keys create --workspace broke 2>/dev/null)
kd workspace plan rich pro > /dev/null &&
	kd workspace plan broke free '{"credit_microdollars": 1000, "no_workspace_mcp": 1}' > /dev/null ||
	{ fail setup "kilnd workspace plan"; exit 1; }
# Prices of our own: $0.072 a vCPU-hour (20 micro-dollars a vCPU-second),
# $0.036 a GiB-hour (36000 micro-dollars for 1024 MiB-hours).
start_kilnd --price-vcpu-hour 0.072 --price-gib-hour 0.036

# What the host agent would have metered, in the current and the last
# hour: rich's two sandboxes, broke's one (100 vCPU-seconds: $0.002, over
# its $0.001).
python3 - "$dir/data/kilnd.db" <<'EOF' || fail setup "writing usage_hours"
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1])
ws = dict(db.execute("SELECT name, id FROM workspaces"))
now = int(time.time() * 1000) // 3600000 * 3600000
rows = [(ws["rich"], "sbx_a", now - 3600000, 30_000_000, 1024 * 1800, 1_800_000),  # 30 vCPU-s, 0.5 GiB-h
        (ws["rich"], "sbx_a", now, 90_000_000, 1024 * 3600, 3_600_000),             # 90 vCPU-s, 1 GiB-h
        (ws["rich"], "sbx_b", now, 1_500_000, 512, 60_000),
        (ws["broke"], "sbx_c", now, 100_000_000, 0, 100_000)]
db.executemany("INSERT INTO usage_hours (workspace_id, sandbox_id, hour_ms, cpu_us, mem_mib_s, run_ms) "
               "VALUES (?, ?, ?, ?, ?, ?)", rows)
db.commit()
EOF

from=$(( $(date +%s) - 7200 ))
api "$rich" GET "/v1/usage?granularity=hour&from=$from"
# The last hour: 30 s -> 600; 512 MiB-hours -> 18000. This hour: 91.5 s ->
# 1830; 1024.14 MiB-h -> 36005 (rounded). Total priced once: 121.5 s ->
# 2430; 5,530,112 MiB-s at 36000 per 3,686,400 -> 54005.
check usage_by_hour "$(body)" is '[ (b["cpu_microdollars"], b["memory_microdollars"]) for b in j["buckets"]] == [(600, 18000), (1830, 36005)] and j["total"]["cost_microdollars"] == 2430 + 54005 and j["total"]["active_vcpu_seconds"] == 121.5 and j["prices"] == {"vcpu_hour_microdollars": 72000, "gib_hour_microdollars": 36000}'
api "$rich" GET "/v1/usage?granularity=hour&from=$from&sandbox=sbx_b"
check usage_one_sandbox "$(body)" is 'len(j["buckets"]) == 1 and j["buckets"][0]["active_vcpu_seconds"] == 1.5 and j["buckets"][0]["cpu_microdollars"] == 30 and j["sandbox_id"] == "sbx_b"'
api "$rich" GET "/v1/usage?granularity=day&from=$from"
check usage_by_day "$(body)" is '1 <= len(j["buckets"]) <= 2 and all(b["start"].endswith("T00:00:00.000Z") for b in j["buckets"]) and abs(sum(b["active_vcpu_seconds"] for b in j["buckets"]) - 121.5) < 1e-9'
csv=$(curl -s -H "Authorization: Bearer $rich" "$API/v1/usage?granularity=hour&from=$from&format=csv")
check usage_csv "$(tr '\r\n' '  ' <<<"$csv" | head -c 300)" python3 -c "
import csv, io, sys
rows = list(csv.DictReader(io.StringIO(sys.argv[1])))
sys.exit(0 if [r['cost_microdollars'] for r in rows] == ['18600', '37835'] and rows[1]['active_vcpu_seconds'] == '91.500000' else 1)" "$csv"
api "$broke" GET "/v1/usage?granularity=hour&from=$from"
check usage_per_workspace "broke sees its own hour only: $(body)" is 'len(j["buckets"]) == 1 and j["total"]["active_vcpu_seconds"] == 100'

api "$rich" GET /v1/billing
check billing_paid_plan "$(body)" is 'j["plan"] == "pro" and j["credit_microdollars"] == 0 and j["credit_left_microdollars"] is None and not j["credit_exhausted"] and j["projected_microdollars"] >= j["cost_microdollars"] >= 56435'
api "$broke" GET /v1/billing
check billing_credit_spent "$(body)" is 'j["plan"] == "free" and j["cost_microdollars"] == 2000 and j["credit_microdollars"] == 1000 and j["credit_left_microdollars"] == 0 and j["credit_exhausted"] is True'

api "$broke" POST /v1/sandboxes '{"template":"minimal"}'
check credit_create_402 "$STATUS $(body)" is 'j["error"]["code"] == "credit_exhausted" and "$0.001000" in j["error"]["message"] and "free" in j["error"]["message"]'
[ "$STATUS" = 402 ] || fail credit_create_status "$STATUS, want 402"
api "$broke" POST /v1/sandboxes/sbx_00000000000000000000/wake '{}'
check credit_wake_402 "$STATUS $(body)" [ "$STATUS" = 402 ]
# A workspace whose credit is not spent is not held: its create goes on
# to the host (here no template: not a 402).
api "$rich" POST /v1/sandboxes '{"template":"minimal"}'
check credit_others_not_held "rich's create: $STATUS" [ "$STATUS" != 402 ]

# A plan without the workspace MCP: 403 naming it; with it, MCP answers.
init='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'
api "$broke" POST /mcp "$init"
check plan_without_mcp "$STATUS $(body)" is '"no_workspace_mcp" in j["error"]["message"] and "free" in j["error"]["message"]'
[ "$STATUS" = 403 ] || fail plan_without_mcp_status "$STATUS, want 403"
api "$rich" POST /mcp "$init"
check plan_with_mcp "$STATUS $(body)" is '"serverInfo" in j["result"]'
kd workspace plan broke free '{"no_workspace_mcp": 2}' > /dev/null 2> "$dir/err"
check plan_switch_bad "$(head -1 "$dir/err")" grep -q "no_workspace_mcp" "$dir/err"

api "$rich" GET "/v1/usage?from=yesterday"
check bad_from "$STATUS $(body)" [ "$STATUS" = 400 ]
api "$rich" GET "/v1/usage?granularity=week"
check bad_granularity "$STATUS $(body)" [ "$STATUS" = 400 ]
api "$rich" GET "/v1/usage?from=2026-12-02&to=2026-12-01"
check bad_range "$STATUS $(body)" [ "$STATUS" = 400 ]
api "$rich" GET "/v1/usage?format=xml"
check bad_format "$STATUS $(body)" [ "$STATUS" = 400 ]
"$kilnd" --data "$dir/x" --price-vcpu-hour 0.0000001 routes > /dev/null 2> "$dir/err"
check bad_price "$(head -1 "$dir/err")" grep -q -- "--price-vcpu-hour" "$dir/err"

# The shipped free plan's named volumes (issue 18: one, of at most 1 GiB):
# /v1/limits says so, and POST /v1/volumes holds to it, naming the limit.
freevol=$(kd keys create --workspace freevol 2>/dev/null)
kd workspace plan freevol free > /dev/null || fail setup "kilnd workspace plan freevol free"
api "$freevol" GET /v1/limits
check free_volume_limits "$(body)" is 'j["plan"] == "free" and j["limits"]["volumes"] == 1 and j["limits"]["volume_mib"] == 1024'
api "$freevol" POST /v1/volumes '{"name":"big","size_mib":2048}'
check free_volume_over_size "$STATUS $(body)" is 'j["error"]["code"] == "limit_exceeded" and j["error"]["limit"] == "volume_mib" and j["error"]["value"] == 1024'
[ "$STATUS" = 429 ] || fail free_volume_over_size_status "$STATUS"
api "$freevol" POST /v1/volumes '{"name":"one","size_mib":1024}'
check free_volume_one "$STATUS $(body)" [ "$STATUS" = 201 ]
api "$freevol" POST /v1/volumes '{"name":"two","size_mib":64}'
check free_volume_second "$STATUS $(body)" is 'j["error"]["code"] == "limit_exceeded" and j["error"]["limit"] == "volumes" and j["error"]["value"] == 1'
[ "$STATUS" = 429 ] || fail free_volume_second_status "$STATUS"
exit $rc
