#!/bin/bash
# Managed databases (docs/databases.md): a PostgreSQL server in a sandbox
# of template `postgres`, made by POST /v1/databases with a random
# password shown once. From a sandbox of the same workspace psql connects
# with the create's URL and runs CREATE TABLE / INSERT / SELECT; from
# another workspace's sandbox the connection is refused by the host's
# firewall (it times out: not a password error), and that workspace sees
# no such database (404). reset-password: the old password fails, the new
# one works. Its VM killed (kill -9 of its VMM; the full tier): started again from its
# disk by the database watch, committed rows and password kept, and its
# events say so. Scheduled backups: made every interval, the oldest past
# backups_kept deleted, manual ones kept. A backup (a snapshot) restores into a new database that has
# the row. Delete takes its sandbox along. Bad input is a 4xx naming it.
# TLS: each database's own certificate in its JSON (a restored one gets
# a new one), a sandbox's psql gets TLS. External access (kilnd's TCP
# port, one here, --db-external-ports): off by default (refused), on by
# PATCH (a host client, tests/e2e/pg.py over libpq, queries over TLS
# with the server verified by its certificate; a wrong password fails;
# clear text is refused by the port), kept across a kilnd restart, none
# left for a restore that asks for it at create (503), a database's
# connections limited (--db-external-conns 2: the third closed at once),
# cut and refused when access is turned off, the port handed to a restore
# with external_access at create then (verified by its own certificate,
# not by the first one's), and refused again once that one is deleted. A hibernated
# database is woken after a restart of kilnd by a sandbox's connection
# (its listeners armed again); the full tier also wakes one through the
# external port.
# time limit: 600 (a loaded emulated host: the VM restart alone took 129 s of a 426 s run that hit the default 420)
. "$(dirname "$0")/lib.sh"
have_kvm || { fail db_kvm "no KVM here: run it in tests/host/run"; exit 1; }
t0=$(date +%s)
build_template postgres || exit 1
EXTP=$((PORT + 20000))	# the one external port (PORT: 17000..18999)
KARGS=(--rate 0 --db-backup-min 2 --db-external-ports "$EXTP-$EXTP" --db-external-conns 2)
start_kilnd "${KARGS[@]}" || exit 1
KEY=$(new_key dbs) OTHER=$(new_key dbs-other)
MAIN=$KEY
cleanup_ws() {
	KEY=$1
	for d in $(curl -s -H "Authorization: Bearer $KEY" $URL/v1/databases | python3 -c "import json,sys; [print(d[\"id\"]) for d in json.load(sys.stdin)[\"databases\"]]" 2>/dev/null); do api DELETE /v1/databases/$d; done
	for s in $(curl -s -H "Authorization: Bearer $KEY" $URL/v1/sandboxes | python3 -c "import json,sys; [print(s[\"id\"]) for s in json.load(sys.stdin)[\"sandboxes\"]]" 2>/dev/null); do api DELETE /v1/sandboxes/$s; done
}
at_exit 'cleanup_ws "$MAIN"; cleanup_ws "$OTHER"'

# gx ID CMD: run CMD in the sandbox; OUT its stdout, ERR its stderr, RC its exit code.
gx() {
	api POST "/v1/sandboxes/$1/exec" "$(python3 -c 'import json,sys; print(json.dumps({"cmd": sys.argv[1], "timeout_seconds": 60}))' "$2")"
	OUT=$(jget 'j["stdout"].strip()') ERR=$(jget 'j["stderr"].strip()') RC=$(jget 'j["exit_code"]')
	# No answer from the command: the exec's own error instead (a CI's
	# failure said only "rc '' out '' err ''").
	[ "$STATUS" = 200 ] || ERR="exec: HTTP $STATUS: $(head -c 300 <<<"$BODY")"
}
# mcp TOOL ARGS: a tools/call of the workspace MCP (POST /mcp, stateless; the version that has
# structuredContent); BODY its JSON-RPC answer.
mcp() {
	api POST /mcp "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"$1\",\"arguments\":$2}}" \
		-H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2025-06-18'
}
# ok RC NAME DETAIL: pass if RC (a condition's $?) is 0, else fail.
ok() { if [ "$1" = 0 ]; then pass "$2" "$3"; else fail "$2" "$3"; fi; }
# q SANDBOX URL SQL: psql from that sandbox (CT, default 5, seconds to connect).
q() { gx "$1" "PGCONNECT_TIMEOUT=${CT:-5} psql -X -q -tA -v ON_ERROR_STOP=1 '$2' -c \"$3\""; }
# xq PASSWORD SQL: from the host, through the external port (OUT, ERR, RC),
# over TLS: the server verified with CRT (default: the first database's
# certificate) as the only root, sslmode MODE (default verify-ca).
# CT (default 30: a database just woken in a loaded emulated host took
# more than 5 s to authenticate) bounds the connect; a refusal is at once.
xq() {
	OUT=$(PGCONNECT_TIMEOUT=${CT:-30} python3 "$REPO/tests/e2e/pg.py" \
		"postgresql://postgres:$1@127.0.0.1:$EXTP/postgres?sslmode=${MODE:-verify-ca}&sslrootcert=${CRT:-$T/db.crt}" "$2" 2> "$T/xq.err")
	RC=$? ERR=$(tr '\n' ' ' < "$T/xq.err")
}
# cert_of FILE: the database answer's certificate (BODY) into FILE; prints
# its SHA-256 as computed here from the PEM, and whether it is the
# answer's tls_certificate_sha256.
cert_of() {
	printf '%s\n' "$(jget 'j["tls_certificate"] or ""')" > "$1"	# the PEM, one newline at its end
	python3 - "$1" "$(jget 'j["tls_certificate_sha256"]')" <<'PY'
import hashlib, ssl, sys
pem = open(sys.argv[1]).read()
try:
    h = hashlib.sha256(ssl.PEM_cert_to_DER_cert(pem)).hexdigest().upper()
except ValueError as e:
    print("not a PEM certificate:", e); sys.exit(0)
h = ":".join(h[i:i + 2] for i in range(0, len(h), 2))
print(h, h == sys.argv[2])
PY
}

# ---- bad input --------------------------------------------------------------------
api POST /v1/databases '{"name":"Bad!"}'
expect db_bad_name 400 invalid_request
api POST /v1/databases '{"name":"x","colour":"red"}'
expect db_unknown_field 400 invalid_request
api POST /v1/databases '{"from_backup":"snap_nothere"}'
expect db_unknown_backup 404 not_found
api GET /v1/databases/db_nothere
expect db_unknown_id 404 not_found
api POST /v1/databases/db_nothere/reset-password
expect db_unknown_reset 404 not_found

# ---- create, and a client in the same workspace --------------------------------------
ts=$(date +%s.%N)
api POST /v1/databases '{"name":"main"}'
tc=$(python3 -c "import sys; print('%.1f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$ts" "$(date +%s.%N)")
if [ "$STATUS" = 201 ] && [ "$(jget 'j["status"], j["port"], j["user"], j["database"], len(j["password"])')" = "('running', 5432, 'postgres', 'postgres', 24)" ]; then
	pass db_create "201 in $tc s: $(jget 'j["url"].replace(j["password"], "***")')"
else
	fail db_create "$STATUS $BODY"; exit 1
fi
DB=$(jget 'j["id"]') PW=$(jget 'j["password"]') DBURL=$(jget 'j["url"]') DBHOST=$(jget 'j["host"]') DBSBX=$(jget 'j["sandbox_id"]')
check db_url "url names user, password, host, port" [ "$DBURL" = "postgresql://postgres:$PW@$DBHOST:5432/postgres" ]
# Its server's own certificate (made in its guest), in the answer.
DBSHA=$(cert_of "$T/db.crt")
check db_tls_certificate "sha256 here, and the answer's: $DBSHA" [ "${DBSHA#* }" = True ]
api GET "/v1/databases/$DB"
check db_get_no_password "$(jget 'sorted(j)')" [ "$STATUS/$(jget '"password" in j, j["url"].count(":")')" = "200/(False, 2)" ]
api GET /v1/databases
check db_list "$(jget '[d["name"] for d in j["databases"]]')" [ "$(jget '[d["id"] for d in j["databases"]]')" = "['$DB']" ]
api POST /v1/databases '{"name":"main"}'
expect db_name_taken 409 conflict
# The workspace MCP's database tools (docs/mcp.md) on the same database:
# REST's answer, without the password; another workspace's key gets a
# tool error (the create is MCP's in the full tier: db_mcp_create).
mcp get_database '{"database":"main"}'
g=$(jget '[(r.get("isError", False), r["structuredContent"]["id"], "password" in r["structuredContent"]) for r in [j["result"]]][0]')
mcp list_databases '{}'
l=$(jget '[d["id"] for d in j["result"]["structuredContent"]["databases"]]')
KEY=$OTHER
mcp get_database "{\"database\":\"$DB\"}"
o=$(jget 'j["result"]["isError"], j["result"]["content"][0]["text"]')
KEY=$MAIN
check db_mcp_get_list "get_database: $g; list_databases: $l; with another workspace's key: $o" \
	eval '[ "$g" = "(False, '"'$DB'"', False)" ] && [ "$l" = "['"'$DB'"']" ] && [[ $o == "(True, "*"not found"* ]]'
# The CLI (docs/cli.md "Databases") on the same database.
cli_ls=$(KILN_API_URL=$URL KILN_API_KEY=$KEY "$KILN" db ls 2>&1)
[[ "$cli_ls" == *main*"$DB"*running*"$DBHOST:5432"* ]]
r=$?; ok $r db_cli_ls "$(tr '\n' '|' <<<"$cli_ls")"
cli_get=$(KILN_API_URL=$URL KILN_API_KEY=$KEY "$KILN" db get main 2>&1)
[ "$(python3 -c 'import json,sys; j=json.loads(sys.argv[1]); print(j["id"], "password" in j)' "$cli_get" 2>&1)" = "$DB False" ]
r=$?; ok $r db_cli_get "$(head -c 200 <<<"$cli_get")"
KILN_API_URL=$URL KILN_API_KEY=$KEY "$KILN" db get 'x/../y' > "$T/cli_bad" 2>&1
r=$?; [ $r != 0 ] && grep -q "not a database's name or id" "$T/cli_bad"
r=$?; ok $r db_cli_bad_name "$(head -c 200 "$T/cli_bad")"

create_sandbox '{"template":"postgres"}'
C1=$SBX
[ -n "$C1" ] || { fail db_client "$STATUS $BODY"; exit 1; }
# CT 30: the sandbox's first connection, with its TLS handshake (libpq's
# sslmode prefer), took more than 5 s in an emulated host at a load of 17.
tq=$(date +%s.%N)
CT=30 q "$C1" "$DBURL" "CREATE TABLE t (x int); INSERT INTO t VALUES (42); SELECT x FROM t"
check db_query_same_workspace "$(python3 -c "import sys; print('%.2f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$tq" "$(date +%s.%N)") s (exec included): rc $RC out '$OUT' err '$ERR'" [ "$RC/$OUT" = "0/42" ]
# A sandbox's psql (sslmode prefer, libpq's default) gets TLS too.
tq=$(date +%s.%N)
CT=30 q "$C1" "$DBURL" "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"
check db_tls_same_workspace "$(python3 -c "import sys; print('%.2f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$tq" "$(date +%s.%N)") s: rc $RC out '$OUT' err '$ERR'" [ "$RC/$OUT" = "0/t" ]

# ---- external access -------------------------------------------------------------------
api GET "/v1/databases/$DB"
check db_external_default_off "$(jget 'j["external_access"], j["external_url"]')" \
	[ "$(jget 'j["external_access"], j["external_url"]')" = "(False, None)" ]
xq "$PW" "SELECT x FROM t"
[ "$RC" != 0 ] && [[ "$ERR" == *refused* ]]
r=$?; ok $r db_external_off_refused "rc $RC err '$ERR'"
api PATCH "/v1/databases/$DB" '{"external_access":"yes"}'
expect db_external_bad 400 invalid_request
api PATCH "/v1/databases/$DB" '{"external_access":true}'
check db_external_on "$STATUS $(jget 'j.get("external_url")')" \
	[ "$STATUS/$(jget 'j["external_access"], j["external_port"], j["external_url"]')" = "200/(True, $EXTP, 'postgresql://postgres@127.0.0.1:$EXTP/postgres?sslmode=verify-ca&sslrootcert=$DB.crt')" ]
# TLS end to end: the client verifies the server by its certificate, and
# the server sees the session as TLS.
tx=$(date +%s.%N)
xq "$PW" "SELECT x, ssl FROM t, pg_stat_ssl WHERE pid = pg_backend_pid()"
check db_external_query "$(python3 -c "import sys; print('%.2f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$tx" "$(date +%s.%N)") s, TLS verified: rc $RC out '$OUT' err '$ERR'" [ "$RC/$OUT" = "0/42|t" ]
MODE=verify-full xq "$PW" "SELECT 1"
check db_external_verify_full "the certificate names 127.0.0.1: rc $RC out '$OUT' err '$ERR'" [ "$RC/$OUT" = "0/1" ]
xq "not-$PW" "SELECT 1"
[ "$RC" != 0 ] && [[ "$ERR" == *"password authentication failed"* ]]
r=$?; ok $r db_external_password_checked "rc $RC err '$ERR'"
# Clear text is refused by the port, with an error that says why.
MODE=disable xq "$PW" "SELECT 1"
[ "$RC" != 0 ] && [[ "$ERR" == *"takes TLS connections only"* ]]
r=$?; ok $r db_external_plaintext_refused "rc $RC err '$ERR'"

# ---- another workspace ---------------------------------------------------------------
KEY=$OTHER
api GET "/v1/databases/$DB"
expect db_other_workspace_404 404 not_found
api GET /v1/databases
check db_other_workspace_list "$BODY" [ "$(jget 'len(j["databases"])')" = 0 ]
create_sandbox '{"template":"postgres"}'
C2=$SBX
CT=2 q "$C2" "$DBURL" "SELECT 1"
# Dropped by the firewall: no answer at all (a timeout), not the
# server's refusal of a password.
[ "$RC" != 0 ] && [[ "$ERR" == *timeout* ]] && [[ "$ERR" != *password* ]]
r=$?; ok $r db_other_workspace_refused "rc $RC err '$ERR'"
KEY=$MAIN

# ---- reset-password ------------------------------------------------------------------
api POST "/v1/databases/$DB/reset-password"
PW2=$(jget 'j["password"]') URL2=$(jget 'j["url"]')
[ "$STATUS" = 200 ] && [ ${#PW2} = 24 ] && [ "$PW2" != "$PW" ]
r=$?; ok $r db_reset_password "$STATUS"
q "$C1" "$DBURL" "SELECT 1"
[ "$RC" != 0 ] && [[ "$ERR" == *"password authentication failed"* ]]
r=$?; ok $r db_old_password_fails "rc $RC err '$ERR'"
q "$C1" "$URL2" "SELECT x FROM t"
check db_new_password_works "rc $RC out '$OUT' err '$ERR'" [ "$RC/$OUT" = "0/42" ]
api GET "/v1/databases/$DB"
check db_tls_kept_by_reset "$(jget 'j["tls_certificate_sha256"]')" [ "$(jget 'j["tls_certificate_sha256"]')" = "${DBSHA% *}" ]

# ---- its VM dies: started again from its disk ------------------------------------------
# A committed row, then the VMM killed: the watch boots the same disk
# again (PostgreSQL replays its WAL), same address, same password. (The
# full tier: 36 s of the emulated host; apps' VMM restarts are 87's.)
q "$C1" "$URL2" "INSERT INTO t VALUES (43)"
if full_only db_vm_restarted "a database's VMM killed and started again"; then
	vpid=$(cut -d' ' -f1 "$DATA/sandboxes/$DBSBX/vmm.pid" 2>/dev/null)
	[ -n "$vpid" ] && kill -9 "$vpid"
	tk=$(date +%s.%N)
	for i in $(seq 240); do
		api GET "/v1/databases/$DB"
		[ "$(jget 'j["status"], j["vm_restarts"]')" = "('running', 1)" ] && break
		sleep 0.5
	done
	tb=$(python3 -c "import sys; print('%.1f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$tk" "$(date +%s.%N)")
	EV=$(jget '[e["kind"] + ": " + e["text"] for e in j["events"]]')
	[ -n "$vpid" ] && [ "$(jget 'j["status"], j["vm_restarts"], j["host"], j["sandbox_id"]')" = "('running', 1, '$DBHOST', '$DBSBX')" ] &&
		[[ "$EV" == *"restart: "*"signal 9"* ]]
	r=$?; ok $r db_vm_restarted "VMM $vpid killed, back in $tb s: $EV"
	q "$C1" "$URL2" "SELECT string_agg(x::text, ',' ORDER BY x) FROM t"
	check db_restart_kept_rows "rc $RC out '$OUT' err '$ERR'" [ "$RC/$OUT" = "0/42,43" ]
fi

# ---- idle: hibernated, woken by a connection ---------------------------------------------
# 3 s without connections: hibernated (its memory kept). psql then
# connects as ever: the connection waits for the wake and is served.
api PATCH "/v1/databases/$DB" '{"idle_seconds":-1}'
expect db_idle_bad 400 invalid_request
api PATCH "/v1/databases/$DB" '{"idle_seconds":3}'
check db_idle_set "$STATUS $(jget 'j.get("idle_seconds")')" [ "$STATUS/$(jget 'j.get("idle_seconds")')" = "200/3" ]
# db_hibernated: poll the database until it is hibernated (60 s at most);
# st: the status it last had.
db_hibernated() {
	local i
	for i in $(seq 120); do
		api GET "/v1/databases/$DB"
		st=$(jget 'j["status"]')
		[ "$st" = hibernated ] && break
		sleep 0.5
	done
}
ti=$(date +%s.%N) st=
db_hibernated
check db_idle_hibernated "status $st after $(python3 -c "import sys; print('%.1f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$ti" "$(date +%s.%N)") s" [ "$st" = hibernated ]
# kilnd restarted while it sleeps: its listeners are armed again.
tr0=$(date +%s.%N)
stop_kilnd
start_kilnd "${KARGS[@]}" || exit 1
api GET "/v1/databases/$DB"
check db_restart_still_hibernated "kilnd restarted in $(python3 -c "import sys; print('%.1f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$tr0" "$(date +%s.%N)") s; status $(jget 'j["status"]')" \
	[ "$(jget 'j["status"], j["external_port"]')" = "('hibernated', $EXTP)" ]
tw=$(date +%s.%N)
CT=60 q "$C1" "$URL2" "SELECT string_agg(x::text, ',' ORDER BY x) FROM t"
tq=$(python3 -c "import sys; print('%.2f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$tw" "$(date +%s.%N)")
api GET "/v1/databases/$DB"
st=$(jget 'j["status"]')
api PATCH "/v1/databases/$DB" '{"idle_seconds":0}'
check db_woken_by_connect "after a kilnd restart, psql (connect + query, exec included) $tq s: rc $RC out '$OUT' err '$ERR'; status $st" \
	[ "$RC/$OUT/$st" = "0/42,43/running" ]
xq "$PW2" "SELECT count(*) FROM t"
check db_external_after_restart "rc $RC out '$OUT' err '$ERR'" [ "$RC/$OUT" = "0/2" ]
if full_only db_external_wakes "a second hibernation, woken through the external port"; then
	api PATCH "/v1/databases/$DB" '{"idle_seconds":3}'
	db_hibernated
	tw=$(date +%s.%N)
	CT=60 xq "$PW2" "SELECT string_agg(x::text, ',' ORDER BY x) FROM t"
	tq=$(python3 -c "import sys; print('%.2f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$tw" "$(date +%s.%N)")
	api PATCH "/v1/databases/$DB" '{"idle_seconds":0}'
	check db_external_wakes "was $st; connect + query through the external port $tq s: rc $RC out '$OUT' err '$ERR'" \
		[ "$st/$RC/$OUT" = "hibernated/0/42,43" ]
fi

# ---- backup, restore -----------------------------------------------------------------
api POST "/v1/databases/$DB/backups"
BK=$(jget 'j["id"]')
[ "$STATUS" = 201 ] && [[ "$BK" == snap_* ]]
r=$?; ok $r db_backup "$STATUS $BODY"
api GET "/v1/databases/$DB/backups"
check db_backups_listed "$BODY" [ "$(jget '[b["id"] for b in j["backups"]]')" = "['$BK']" ]
mcp list_database_backups '{"database":"main"}'
check db_mcp_backups "list_database_backups: $(jget 'j["result"].get("structuredContent")')" \
	[ "$(jget '[(b["id"], b["kind"]) for b in j["result"]["structuredContent"]["backups"]]')" = "[('$BK', 'manual')]" ]
KEY=$OTHER
api POST /v1/databases "{\"from_backup\":\"$BK\"}"
expect db_other_workspace_backup_404 404 not_found
KEY=$MAIN
# ---- scheduled backups ---------------------------------------------------------------
# Every 2 s (kilnd --db-backup-min 2 here), 1 kept: the first scheduled
# one is deleted when the second is made; the manual one stays.
api PATCH "/v1/databases/$DB" '{"backup_interval_seconds":1}'
expect db_schedule_too_short 400 invalid_request
api PATCH "/v1/databases/$DB" '{"backups_kept":0}'
expect db_schedule_bad_kept 400 invalid_request
api PATCH "/v1/databases/$DB" '{"backup_interval_seconds":2,"backups_kept":1}'
check db_schedule_set "$STATUS $(head -c 200 <<<"$BODY")" [ "$STATUS/$(jget 'j["backup_interval_seconds"], j["backups_kept"]')" = "200/(2, 1)" ]
tsb0=$(date +%s.%N)

# ---- external access: one port, connection limits, off, delete ------------------------
# A restore that asks for external access while the one port is taken:
# 503 at once (before a sandbox is made), and nothing is left of it.
api POST /v1/databases "{\"name\":\"copy\",\"from_backup\":\"$BK\",\"external_access\":true}"
s1=$STATUS m1=$(jget 'j["error"]["message"]')
api GET /v1/databases/copy
[ "$s1" = 503 ] && [[ "$m1" == *"$EXTP-$EXTP"* ]] && [ "$STATUS" = 404 ]
r=$?; ok $r db_external_no_free_port "create $s1 $m1; then GET $STATUS"
# Three raw connections: the third is closed at once (2 a database);
# turning access off cuts the others and the port refuses.
cut=$(python3 - "$EXTP" "$URL" "$KEY" "$DB" <<'PY' 2>&1
import socket, sys, urllib.request
port, url, key, db = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
def closed(c, t):
    c.settimeout(t)
    try:
        return c.recv(1) == b""
    except socket.timeout:
        return False
    except OSError:
        return True
s = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(3)]
third, first = closed(s[2], 2), closed(s[0], 0.5)
req = urllib.request.Request(url + "/v1/databases/" + db, data=b'{"external_access":false}', method="PATCH",
                             headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
st = urllib.request.urlopen(req).status
cut = closed(s[0], 5) and closed(s[1], 5)
try:
    socket.create_connection(("127.0.0.1", port), timeout=5).close()
    refused = False
except ConnectionRefusedError:
    refused = True
print(third, first, st, cut, refused)
PY
)
check db_external_limit_and_off "third closed, first open, PATCH, cut, refused: $cut" [ "$cut" = "True False 200 True True" ]
# The port free again: restored into a new database with external
# access from its create. It has a key and certificate of its own, not
# its backup's (which are the first database's).
ts=$(date +%s.%N)
api POST /v1/databases "{\"name\":\"copy\",\"from_backup\":\"$BK\",\"external_access\":true}"
tr_=$(python3 -c "import sys; print('%.1f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$ts" "$(date +%s.%N)")
DB3=$(jget 'j["id"]') URL3=$(jget 'j["url"]') SBX3=$(jget 'j["sandbox_id"]') PW3=$(jget 'j.get("password")')
[ "$STATUS" = 201 ] && [ "$(jget 'j["from_backup"], j["external_port"]')" = "('$BK', $EXTP)" ] && [ "$SBX3" != "$DBSBX" ] &&
	[[ "$(jget 'j["external_url"]')" == "postgresql://postgres:$PW3@127.0.0.1:$EXTP/postgres?sslmode=verify-ca&sslrootcert=$DB3.crt" ]]
r=$?; ok $r db_restore "$STATUS in $tr_ s, external at create: $(head -c 300 <<<"$BODY" | sed "s/$(jget 'j.get("password") or "-"')/***/g")"
SHA3=$(cert_of "$T/db3.crt")
[ "${SHA3#* }" = True ] && [ "${SHA3% *}" != "${DBSHA% *}" ]
r=$?; ok $r db_tls_restore_new_key "restored $SHA3, the backup's database ${DBSHA% *}"
q "$C1" "$URL3" "SELECT string_agg(x::text, ',' ORDER BY x) FROM t"
check db_restored_has_row "rc $RC out '$OUT' err '$ERR'" [ "$RC/$OUT" = "0/42,43" ]
# The CLI (docs/cli.md "Databases"): its external URL, and its certificate.
ext=$(KILN_API_URL=$URL KILN_API_KEY=$KEY "$KILN" db external copy on 2>&1)
KILN_API_URL=$URL KILN_API_KEY=$KEY "$KILN" db cert copy > "$T/db3-cli.crt" 2>&1
[ "$ext" = "postgresql://postgres@127.0.0.1:$EXTP/postgres?sslmode=verify-ca&sslrootcert=$DB3.crt" ] && cmp -s "$T/db3.crt" "$T/db3-cli.crt"
r=$?; ok $r db_external_port_reused "kiln db external copy on: $ext; kiln db cert copy: $(head -c 40 "$T/db3-cli.crt")"
CRT=$T/db3.crt xq "$PW3" "SELECT string_agg(x::text, ',' ORDER BY x) FROM t"
check db_external_next_database "the restored one through the port, verified by its certificate: rc $RC out '$OUT' err '$ERR'" [ "$RC/$OUT" = "0/42,43" ]
# Verified: the first database's certificate does not pass for it.
xq "$PW3" "SELECT 1"
[ "$RC" != 0 ] && [[ "$ERR" == *"certificate verify failed"* ]]
r=$?; ok $r db_external_wrong_certificate "rc $RC err '$ERR'"

# ---- scheduled backups (set before the restore, which they overlap) --------------
first= sched=
for i in $(seq 120); do
	api GET "/v1/databases/$DB/backups"
	sched=$(jget '" ".join(b["id"] for b in j["backups"] if b["kind"] == "scheduled")')
	[ -z "$first" ] && first=${sched%% *}
	[ -n "$first" ] && [ -n "$sched" ] && [ "$sched" = "${sched%% *}" ] && [ "$sched" != "$first" ] && break
	sleep 0.5
done
tsb=$(python3 -c "import sys; print('%.1f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$tsb0" "$(date +%s.%N)")
kinds=$(jget '[(b["id"], b["kind"]) for b in j["backups"]]')
# The schedule stopped through the workspace MCP's update_database (PATCH's
# fields, the same operation): its answer is the database, schedule off.
mcp update_database '{"database":"main","backup_interval_seconds":0}'
s1=$(jget '[(r.get("isError", False), c.get("id"), c.get("backup_interval_seconds")) for r in [j["result"]] for c in [r.get("structuredContent") or {}]][0]')
check db_mcp_update "update_database: $s1" [ "$s1" = "(False, '$DB', 0)" ]
api GET "/v1/snapshots/$first"
[ -n "$first" ] && [ "$(wc -w <<<"$sched")" = 1 ] && [ "$sched" != "$first" ] && [ "$STATUS" = 404 ] &&
	[[ "$kinds" == *"('$BK', 'manual')"* ]]
r=$?; ok $r db_scheduled_backups "in $tsb s: first $first (now $STATUS), kept $sched; $kinds"

# ---- the workspace MCP makes one ---------------------------------------------------------
if full_only db_mcp_create "a database made and deleted through the workspace MCP (a create: 30 s of the emulated host)"; then
	mcp create_database '{"name":"by-mcp"}'
	mc=$(jget '[(r.get("isError", False), c.get("name"), c.get("status"), len(c.get("password") or "")) for r in [j["result"]] for c in [r.get("structuredContent") or {}]][0]')
	M=$(jget 'j["result"]["structuredContent"]["id"]')
	MPW=$(jget 'j["result"]["structuredContent"]["password"]')
	mcp create_database '{"name":"by-mcp"}'
	m2=$(jget 'j["result"]["isError"], j["result"]["content"][0]["text"]')
	mcp reset_database_password '{"database":"by-mcp"}'
	mr=$(jget '[(r.get("isError", False), len(p), p != "'"$MPW"'", p in c.get("url", "")) for r in [j["result"]] for c in [r.get("structuredContent") or {}] for p in [c.get("password") or ""]][0]')
	mcp backup_database '{"database":"by-mcp"}'
	MB=$(jget 'j["result"]["structuredContent"]["id"]')
	mcp list_database_backups '{"database":"by-mcp"}'
	mb=$(jget '[(b["id"], b["kind"]) for b in j["result"]["structuredContent"]["backups"]]')
	mcp delete_database '{"database":"by-mcp"}'
	md=$(jget 'j["result"].get("isError", False)')
	api GET "/v1/databases/$M"
	check db_mcp_create "create_database: $mc; again: $m2; reset_database_password: $mr; backup_database $MB, listed $mb; delete_database by name: isError $md, then GET $STATUS" \
		eval '[ "$mc" = "(False, '"'by-mcp'"', '"'running'"', 24)" ] && [[ $m2 == "(True, "*by-mcp* ]] && [ "$mr" = "(False, 24, True, True)" ] &&
		[[ $MB == snap_* ]] && [ "$mb" = "[('"'$MB'"', '"'manual'"')]" ] && [ "$md/$STATUS" = False/404 ]'
	[ -n "$MB" ] && api DELETE "/v1/snapshots/$MB"
fi

# ---- delete --------------------------------------------------------------------------
# The restored one through the workspace MCP's delete_database.
for d in "$DB:$DBSBX" "$DB3:$SBX3"; do
	if [ "${d%%:*}" = "$DB3" ]; then
		mcp delete_database "{\"database\":\"$DB3\"}"
		s1=$(jget '"204" if not j["result"].get("isError") else j["result"]["content"][0]["text"]')
	else
		api DELETE "/v1/databases/${d%%:*}"
		s1=$STATUS
	fi
	api GET "/v1/databases/${d%%:*}"
	s2=$STATUS
	api GET "/v1/sandboxes/${d#*:}"
	check "db_delete_${d%%:*}" "delete $s1, get $s2, its sandbox $STATUS" [ "$s1/$s2/$STATUS" = "204/404/404" ]
done
xq x "SELECT 1"
[ "$RC" != 0 ] && [[ "$ERR" == *refused* ]]
r=$?; ok $r db_external_refused_after_delete "rc $RC err '$ERR'"
api DELETE "/v1/databases/$DB"
expect db_delete_again 404 not_found
alive db_kilnd_alive
echo "db_seconds: $(( $(date +%s) - t0 )) s in all"
