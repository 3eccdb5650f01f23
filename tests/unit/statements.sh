#!/bin/bash
# tests/unit/statements.sh [REPO [BUILD]]: monthly statements (docs/billing.md)
# over real HTTP from kilnd serving the API on a throwaway SQLite data
# directory, no VM: known usage_hours rows are written into the store, as
# in billing.sh. Checks a closed month's figures (usage, prices, plan,
# credit applied, amount due), the listing (the month under way open,
# closed months newest first), racing requests that close one month
# answering one statement, 400s and 404s, and that a closed statement
# never changes: after more usage rows for its month, a restart with other
# prices and another credit, it is the same bytes, while a month closed
# after the restart takes the new prices. Then the CLI (kiln usage, kiln
# billing, kiln statements) and the Python SDK (from the source tree)
# against the same kilnd. Everything started is
# stopped and removed at the end, failed or not. Run by the unit loop as
# build/tests/unit_statements; prints PASS/FAIL lines, exits 1 on any FAIL.
name=statements
. "$(dirname "$0")/apilib.sh"
# start_prices VCPU_HOUR GIB_HOUR: kilnd with these prices (dollars).
start_prices() { start_kilnd --price-vcpu-hour "$1" --price-gib-hour "$2"; }
acme=$(kd keys create --workspace acme 2>/dev/null)
other=$(kd keys create --workspace other 2>/dev/null)
kd workspace plan acme free '{"credit_microdollars": 100000}' > /dev/null ||
	{ fail setup "kilnd workspace plan"; exit 1; }
# $0.072 a vCPU-hour, $0.036 a GiB-hour.
start_prices 0.072 0.036

# usage ROWS...: write usage_hours rows "WORKSPACE SANDBOX HOUR(RFC 3339 or now) CPU_US MEM_MIB_S RUN_MS".
usage() {
	python3 - "$dir/data/kilnd.db" "$@" <<'EOF' || fail setup "writing usage_hours"
import calendar, sqlite3, sys, time
db = sqlite3.connect(sys.argv[1])
ws = dict(db.execute("SELECT name, id FROM workspaces"))
for row in sys.argv[2:]:
    w, sbx, hour, cpu, mem, run = row.split()
    ms = (int(time.time()) // 3600 * 3600 if hour == "now" else
          calendar.timegm(time.strptime(hour, "%Y-%m-%dT%H:%M:%SZ"))) * 1000
    db.execute("INSERT INTO usage_hours (workspace_id, sandbox_id, hour_ms, cpu_us, mem_mib_s, run_ms) "
               "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (sandbox_id, hour_ms) DO UPDATE SET "
               "cpu_us = cpu_us + excluded.cpu_us, mem_mib_s = mem_mib_s + excluded.mem_mib_s, "
               "run_ms = run_ms + excluded.run_ms", (ws[w], sbx, ms, int(cpu), int(mem), int(run)))
db.commit()
EOF
}
# 2025-03: one vCPU-hour ($0.072) and one GiB-hour ($0.036) over two
# sandboxes: $0.108, of which the $0.10 credit pays $0.10, $0.008 due.
usage "acme sbx_a 2025-03-10T00:00:00Z 3600000000 0 3600000" \
      "acme sbx_b 2025-03-31T23:00:00Z 0 3686400 1800000" \
      "acme sbx_a 2025-04-02T05:00:00Z 1800000000 0 1800000" \
      "acme sbx_a 2025-05-20T05:00:00Z 50000000 0 50000" \
      "acme sbx_a now 60000000 0 60000" \
      "other sbx_o 2025-03-10T00:00:00Z 1 0 1"

# api KEY PATH [FILE]: GET, sets STATUS and the body in FILE (default $dir/body).
api() { STATUS=$(curl -s -o "${3:-$dir/body}" -w '%{http_code}' -H "Authorization: Bearer $1" "$API$2"); }

api "$acme" /v1/statements/2025-03 "$dir/march"
cp "$dir/march" "$dir/body"
check closed_month "$STATUS $(body)" is 'j["month"] == "2025-03" and j["status"] == "closed" and j["plan"] == "free" and j["usage"]["active_vcpu_seconds"] == 3600 and j["usage"]["memory_gib_hours"] == 1 and j["usage"]["running_seconds"] == 5400 and j["prices"] == {"vcpu_hour_microdollars": 72000, "gib_hour_microdollars": 36000} and (j["cpu_microdollars"], j["memory_microdollars"], j["cost_microdollars"]) == (72000, 36000, 108000) and (j["credit_microdollars"], j["credit_applied_microdollars"], j["amount_due_microdollars"]) == (100000, 100000, 8000) and j["closed_at"] is not None and j["period"] == {"from": "2025-03-01T00:00:00.000Z", "to": "2025-04-01T00:00:00.000Z"}'
[ "$STATUS" = 200 ] || fail closed_month_status "$STATUS"
api "$acme" /v1/statements/2025-03 "$dir/march2"
check closed_month_served_again "the same bytes" cmp -s "$dir/march" "$dir/march2"

# Eight requests at once close 2025-05: every one answers the stored
# statement (one closed_at), not each its own computation.
racers=()
for i in 1 2 3 4 5 6 7 8; do
	curl -s -o "$dir/may.$i" -H "Authorization: Bearer $acme" "$API/v1/statements/2025-05" &
	racers+=($!)
done
wait "${racers[@]}"	# not kilnd's
same=1
for i in 2 3 4 5 6 7 8; do cmp -s "$dir/may.1" "$dir/may.$i" || same=0; done
cp "$dir/may.1" "$dir/body"
check concurrent_close "$(body)" [ "$same" = 1 ]
check concurrent_close_figures "$(body)" is 'j["status"] == "closed" and j["cpu_microdollars"] == 1000 and j["amount_due_microdollars"] == 0 and j["credit_applied_microdollars"] == 1000'
rows=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute(\"SELECT COUNT(*) FROM statements WHERE month = '2025-05'\").fetchone()[0])" "$dir/data/kilnd.db")
check concurrent_close_one_row "$rows row(s)" [ "$rows" = 1 ]

this_month=$(date -u +%Y-%m)
api "$acme" /v1/statements
check listing "$(body)" is '[(s["month"], s["status"]) for s in j["statements"]] == [("'"$this_month"'", "open"), ("2025-05", "closed"), ("2025-04", "closed"), ("2025-03", "closed")] and j["statements"][0]["closed_at"] is None and j["statements"][0]["usage"]["active_vcpu_seconds"] == 60 and j["statements"][0]["cpu_microdollars"] == 1200'
api "$acme" "/v1/statements/$this_month"
check open_month "$(body)" is 'j["status"] == "open" and j["closed_at"] is None and j["cost_microdollars"] == 1200'
api "$other" /v1/statements
check listing_per_workspace "$(body)" is '[s["month"] for s in j["statements"]] == ["2025-03"] and j["statements"][0]["cpu_microdollars"] == 0'

for m in 2025-13 2025-00 202503 2025-3 2025-003 abcd-ef 1969-12; do
	api "$acme" "/v1/statements/$m"
	check "bad_month_$m" "$STATUS $(body)" is '"month" in j["error"]["message"] and j["error"]["code"] == "invalid_request"'
	[ "$STATUS" = 400 ] || fail "bad_month_${m}_status" "$STATUS, want 400"
done
api "$acme" /v1/statements/2024-01
check no_usage_404 "$STATUS $(body)" [ "$STATUS" = 404 ]
api "$acme" /v1/statements/2099-01
check future_404 "$STATUS $(body)" [ "$STATUS" = 404 ]
api "$other" /v1/statements/2025-04
check others_month_404 "$STATUS $(body)" [ "$STATUS" = 404 ]

# Later usage for March, another credit, other prices: March stays.
stop_kilnd
usage "acme sbx_a 2025-03-10T00:00:00Z 7200000000 0 1" "acme sbx_c 2025-03-15T00:00:00Z 1 1 1" \
      "acme sbx_a 2025-02-03T00:00:00Z 3600000000 0 1"
kd workspace plan acme free '{"credit_microdollars": 5}' > /dev/null || fail setup "kilnd workspace plan"
start_prices 1 2
api "$acme" /v1/statements/2025-03 "$dir/march3"
check closed_month_never_changes "$(head -c 300 "$dir/march3")" cmp -s "$dir/march" "$dir/march3"
api "$acme" /v1/statements/2025-02
check month_closed_after_restart "new prices and credit: $(body)" is 'j["prices"] == {"vcpu_hour_microdollars": 1000000, "gib_hour_microdollars": 2000000} and j["cpu_microdollars"] == 1000000 and j["credit_applied_microdollars"] == 5 and j["amount_due_microdollars"] == 999995'
api "$acme" "/v1/statements/$this_month"
check open_month_follows_prices "$(body)" is 'j["prices"]["vcpu_hour_microdollars"] == 1000000 and j["cpu_microdollars"] == 16667'

# ---- the CLI ------------------------------------------------------------------------
export KILN_API_URL=$API KILN_API_KEY=$acme NO_COLOR=1
kiln=$build/kiln
if [ -x "$kiln" ] && "$kiln" help statements > /dev/null 2>&1; then
	out=$("$kiln" statements 2>&1)
	check cli_statements "$(tr '\n' '|' <<<"$out")" python3 - "$out" "$this_month" <<'EOF'
import sys
lines = sys.argv[1].splitlines()
head, rows = lines[0].split(), [l.split() for l in lines[1:]]
ok = head[:2] == ["MONTH", "STATUS"] and [r[0] for r in rows] == [sys.argv[2], "2025-05", "2025-04", "2025-03", "2025-02"]
march = rows[3]
ok = ok and "$0.108000" in march and "$0.008000" in march and march[1] == "closed"
# Aligned: every row's cells start where the header's do.
ok = ok and lines[0].index("STATUS") == lines[1].index(rows[0][1]) == lines[4].index(march[1])
sys.exit(0 if ok else 1)
EOF
	out=$("$kiln" statements 2025-03 2>&1)
	check cli_statement_month "$(tr '\n' '|' <<<"$out")" python3 -c '
import sys
t = sys.argv[1]
sys.exit(0 if "2025-03" in t and "closed" in t and "$0.108000" in t and "$0.100000" in t and "$0.008000" in t and "$0.072000" in t else 1)' "$out"
	"$kiln" statements 2025-03 --json > "$dir/body" 2>&1
	check cli_statement_json "$(body)" is 'j["amount_due_microdollars"] == 8000'
	"$kiln" statements 2025-13 > "$dir/err" 2>&1
	st=$?
	check cli_statement_bad_month "$st $(head -c 200 "$dir/err")" grep -q month "$dir/err"
	[ "$st" = 2 ] || fail cli_statement_bad_month_status "$st, want 2 (nothing sent)"
	out=$("$kiln" usage --by day --from 2025-03-01 --to 2025-04-01 2>&1)
	check cli_usage_by_day "$(tr '\n' '|' <<<"$out")" python3 -c '
import sys
lines = sys.argv[1].splitlines()
rows = [l.split() for l in lines]
ok = rows[0][0] == "START" and [r[0] for r in rows[1:-1]] == ["2025-03-10", "2025-03-15", "2025-03-31"]
# $1 a vCPU-hour, $2 a GiB-hour: 3 vCPU-hours; 1 MiB-s; 1 GiB-hour.
ok = ok and "$3.000000" in rows[1] and "$0.000001" in rows[2] and "$2.000000" in rows[3]
ok = ok and rows[-1][0] == "total" and "$5.000001" in rows[-1]
sys.exit(0 if ok else 1)' "$out"
	"$kiln" usage --by hour --from 2025-03-10 --to 2025-03-11 --sandbox sbx_a --json > "$dir/body" 2>&1
	check cli_usage_json "$(body)" is 'j["granularity"] == "hour" and j["sandbox_id"] == "sbx_a" and len(j["buckets"]) == 1 and j["buckets"][0]["active_vcpu_seconds"] == 10800'
	out=$("$kiln" usage --by hour --from 2025-03-10 --to 2025-03-11 --csv 2>&1)
	check cli_usage_csv "$(tr '\r\n' '  ' <<<"$out")" python3 -c '
import csv, io, sys
rows = list(csv.DictReader(io.StringIO(sys.argv[1])))
sys.exit(0 if len(rows) == 1 and rows[0]["cost_microdollars"] == "3000000" else 1)' "$out"
	"$kiln" usage --by week > "$dir/err" 2>&1
	st=$?
	check cli_usage_bad_by "$st $(head -c 200 "$dir/err")" [ "$st" = 2 ]
	out=$("$kiln" usage 2>&1)
	check cli_usage_totals "$(tr '\n' '|' <<<"$out")" grep -q sandboxes <<<"$out"
	out=$("$kiln" billing 2>&1)
	check cli_billing "$(tr '\n' '|' <<<"$out")" python3 -c '
import sys
t = sys.argv[1]
sys.exit(0 if "free" in t and "$0.000005" in t and "credit" in t and "$0.016667" in t else 1)' "$out"
	"$kiln" billing --json > "$dir/body" 2>&1
	check cli_billing_json "$(body)" is 'j["plan"] == "free" and j["credit_microdollars"] == 5'
else
	fail cli "$kiln has no statements command"
fi

# ---- the Python SDK, from the source tree (stdlib only) ---------------------------------
out=$(PYTHONPATH=$repo/sdk/python python3 - "$API" "$acme" "$dir/march" "$this_month" 2>&1 <<'EOF'
import datetime, json, sys
from kiln import Client, InvalidRequest, NotFound
c = Client(sys.argv[1], sys.argv[2])
months = [s["month"] for s in c.statements()]
assert months == [sys.argv[4], "2025-05", "2025-04", "2025-03", "2025-02"], months
assert c.statement("2025-03") == json.load(open(sys.argv[3])), "statement() is the closed month's JSON"
u = c.usage(granularity="day", from_=datetime.datetime(2025, 3, 1, tzinfo=datetime.timezone.utc), to="2025-04-01")
assert [b["start"][:10] for b in u["buckets"]] == ["2025-03-10", "2025-03-15", "2025-03-31"], u
assert u["total"]["cost_microdollars"] == 5000001, u["total"]
one = c.usage(from_=1741564800, to=1741651200, sandbox="sbx_a")   # 2025-03-10, by the hour
assert one["granularity"] == "hour" and [b["cpu_microdollars"] for b in one["buckets"]] == [3000000], one
assert "sandboxes" in c.usage()
b = c.billing()
assert b["plan"] == "free" and b["credit_microdollars"] == 5, b
for bad, cls in (("2025-13", InvalidRequest), ("2099-01", NotFound), ("../keys", NotFound)):   # not GET /v1/keys
    try:
        c.statement(bad)
        raise AssertionError(f"statement({bad!r}) did not raise")
    except cls:
        pass
print("statements, statement, usage by day and by hour, billing, errors")
EOF
)
check python_sdk "$(tr '\n' '|' <<<"$out" | tail -c 600)" grep -q "^statements, statement" <<<"$out"
exit $rc
