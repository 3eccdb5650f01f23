#!/bin/bash
# kilnd's HTTP API without sandboxes: authentication, every route's error
# paths, hostile input (malformed JSON, wrong types, unknown fields, huge
# and endless bodies, deep nesting, bad ids and paths, garbage on the
# socket), rate limits, docs/api.md against the routes, and the CLI's
# errors. After all of it the service must still be serving. Runs with or
# without KVM. With KILN_API_URL, against that endpoint (lib.sh; the cases
# that need kilnd's own process, data directory or options are SKIP lines).
# where: native (no sandbox is started: tests/integration/run)
. "$(dirname "$0")/lib.sh"

start_kilnd --rate 0 || exit 1
KEY_A=$(new_key alpha)
KEY_B=$(new_key beta)

# ---- authentication -----------------------------------------------------------
KEY=
api GET /v1/sandboxes
expect auth_missing 401 unauthorized
grep -qi 'WWW-Authenticate: Bearer' < <(curl -s -D - -o /dev/null "$URL/v1/sandboxes") &&
	pass auth_challenge "WWW-Authenticate: Bearer" || fail auth_challenge "no WWW-Authenticate header"
KEY=kiln_tooshort
api GET /v1/sandboxes
expect auth_malformed 401 unauthorized
KEY=kiln_abcdefghijkmnpqrstuvwxyz23456789
api GET /v1/sandboxes
expect auth_unknown 401 unauthorized
STATUS=$(curl -s -o "$T/body" -w '%{http_code}' -H "Authorization: Basic $KEY_A" "$URL/v1/sandboxes")
BODY=$(cat "$T/body")
expect auth_not_bearer 401 unauthorized
KEY_C=$(new_key gamma)
KEY=$KEY_C
api GET /v1/sandboxes
expect auth_fresh_key 200 -
if endpoint; then
	endpoint_revoke gamma
else
kid=$("$KILND" --data "$DATA" keys list | awk '$3 == "gamma" { print $1 }')
"$KILND" --data "$DATA" keys revoke "$kid" 2>/dev/null
fi
api GET /v1/sandboxes
expect auth_revoked 401 unauthorized
if one_box keys_hashed "reads its data directory for the key in the clear"; then
"$KILND" --data "$DATA" keys list | grep -q "$(cut -c1-13 <<<"$KEY_A")" &&
	! grep -rqs "$KEY_A" "$DATA" &&
	pass keys_hashed "keys list shows the prefix; the key itself is nowhere in $DATA" ||
	fail keys_hashed "the key is stored in the clear, or missing from keys list"
fi

KEY=
api GET /healthz
expect healthz 200 -
api GET /metrics
if [ "$STATUS" = 200 ] && grep -q '^kiln_http_requests_total{status="401"} [1-9]' <<<"$BODY" &&
   grep -q '^kiln_sandbox_create_seconds_bucket{le="+Inf"}' <<<"$BODY" &&
   grep -q '^kiln_sandboxes{state="running"} 0' <<<"$BODY"; then
	pass metrics "Prometheus text with requests, create latency histogram, sandboxes by state"
else
	fail metrics "status $STATUS: $(head -c 300 <<<"$BODY")"
fi

# ---- routes and their errors -------------------------------------------------------
KEY=$KEY_A
api GET /v1/nothing
expect unknown_route 404 not_found
api PUT /v1/sandboxes
expect wrong_method 405 method_not_allowed
api GET /v1/sandboxes
[ "$STATUS" = 200 ] && [ "$(jget 'len(j["sandboxes"])')" = 0 ] &&
	pass list_empty "200 []" || fail list_empty "$STATUS $BODY"
[ "$(jget 'j["next_cursor"]')" = None ] && pass list_no_next_cursor "null" || fail list_no_next_cursor "$BODY"
# The list's query parameters: unknown or malformed ones are refused,
# naming the parameter (contract: docs/api.md, List).
for q in "stauts=running:stauts" "status=runing:status" "status=:status" "limit=0:limit" "limit=1001:limit" \
	 "limit=abc:limit" "limit=5x:limit" "cursor=xyz:cursor" "cursor=12.sbx_:cursor" "template=../x:template" \
	 "metadata.=v:metadata." "sort=id:sort" "limit=5&bogus=1:bogus"; do
	api GET "/v1/sandboxes?${q%%:*}"
	expect "list_bad_${q%%:*}" 400 invalid_request &&
		check "list_bad_names_${q%%:*}" "$(jget 'j["error"]["message"]')" grep -qF "${q##*:}" "$T/body"
done
api GET "/v1/sandboxes/sbx_doesnotexist/logs?tail=-1"
expect logs_bad_tail 400 invalid_request
api GET "/v1/sandboxes/sbx_doesnotexist/logs?tail=5"
expect logs_missing_sandbox 404 not_found
api GET "/v1/sandboxes?status=running&template=base&metadata.owner=x&limit=1000&cursor=1700000000000.sbx_aaaaaaaaaaaaaaaaaaaa"
[ "$STATUS" = 200 ] && [ "$(jget 'len(j["sandboxes"]), j["next_cursor"]')" = "(0, None)" ] &&
	pass list_all_params "every known parameter accepted" || fail list_all_params "$STATUS $BODY"
if one_box templates_listed "its templates are not built; a cluster's hosts have built theirs"; then
api GET /v1/templates
[ "$STATUS" = 200 ] && [ "$(jget '",".join(t["name"] + ":" + t["status"] for t in j["templates"])')" = "minimal:not_built,base:not_built,code-interpreter:not_built,postgres:not_built" ] &&
	pass templates_listed "minimal, base, code-interpreter and postgres, not built" || fail templates_listed "$STATUS $BODY"
fi
api GET /v1/usage
[ "$STATUS" = 200 ] && [ "$(jget 'j["sandboxes"]')" = 0 ] && [ "$(jget 'j["cpu_seconds"]')" = 0.0 ] &&
	pass usage_empty "$BODY" || fail usage_empty "$STATUS $BODY"
if one_box create_unbuilt_template "minimal not built there; a cluster's hosts have built it"; then
api POST /v1/sandboxes '{"template":"minimal"}'
expect create_unbuilt_template 503 no_capacity
fi
api POST /v1/sandboxes '{"template":"nope"}'
expect create_unknown_template 404 template_not_found &&
	check unknown_template_lists "$(jget 'j["error"]["message"]')" \
		[ "$(jget '",".join(j["error"]["templates"]), "minimal, base, code-interpreter, postgres" in j["error"]["message"]')" = "('minimal,base,code-interpreter,postgres', True)" ]
api POST /v1/sandboxes '{"template":"../x"}'
expect create_bad_template_name 404 template_not_found
api POST /v1/sandboxes '{"from_snapshot":"snap_nothere"}'
expect create_unknown_snapshot 404 not_found
api POST /v1/sandboxes '{"template":"minimal","from_snapshot":"snap_x"}'
expect create_template_and_snapshot 400 invalid_request

# Every route on a sandbox id that does not exist: 404 in the error shape.
bad=0 n=0
while read -r method pattern; do
	[[ $pattern == */v1/sandboxes/\{id\}* ]] || continue
	# HEAD answers have no body to check; GET covers the same handler.
	[ "$method" = HEAD ] && continue
	path=${pattern//\{id\}/sbx_doesnotexist}
	path=${path//\{port\}/8080}
	path=${path//\{path\}/x}
	path=${path//\{process\}/1}
	path=${path//\{context\}/ctx-1}
	body=
	case $pattern in
	*/exec|*/exec/stream|*/processes) [ "$method" = POST ] && body='{"cmd":"true"}' ;;
	*/signal) body='{"signal":"TERM"}' ;;
	*/stdin) body='x' ;;
	*/code|*/code/stream) body='{"code":"1"}' ;;
	*/files/rename) body='{"from":"/a","to":"/b"}' ;;
	*/files/chmod) body='{"path":"/a","mode":"644"}' ;;
	*/files/copy) body='{"from":"/a","to":"/b"}' ;;
	*/lifecycle) body='{"ttl_seconds":5}' ;;
	*/fork|*/fork_tree) body='{"count":1}' ;;
	*/ports) [ "$method" = POST ] && body='{"port":8080}' ;;
	esac
	case $pattern in */files*) path="$path?path=/etc/hostname" ;; esac
	ws=()
	[[ $pattern == */pty ]] && ws=(-H 'Upgrade: websocket' -H 'Connection: Upgrade' \
		-H 'Sec-WebSocket-Version: 13' -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==')
	api "$method" "$path" "$body" "${ws[@]}"
	n=$((n + 1))
	if [ "$STATUS" != 404 ] || [ "$(jget 'j["error"]["code"]')" != not_found ]; then
		bad=$((bad + 1))
		echo "  $method $path -> $STATUS $BODY"
	fi
done < <("$KILND" routes)
check routes_404_for_missing_sandbox "$n routes, $bad wrong" [ "$bad" = 0 -a "$n" -ge 16 ]
api GET /v1/snapshots
[ "$STATUS" = 200 ] && [ "$(jget 'len(j["snapshots"])')" = 0 ] && pass snapshots_empty "200 []" ||
	fail snapshots_empty "$STATUS $BODY"
api GET /v1/snapshots/snap_nothere
expect snapshot_get_missing 404 not_found
api DELETE /v1/snapshots/snap_nothere
expect snapshot_delete_missing 404 not_found
api GET "/v1/sandboxes/..%2F..%2Fetc"
expect id_traversal 404 not_found

# ---- hostile input ------------------------------------------------------------------------
api POST /v1/sandboxes '{"template":'
expect json_truncated 400 invalid_json
api POST /v1/sandboxes '[1,2]'
expect json_not_object 400 invalid_json
api POST /v1/sandboxes '{"template":"minimal","template":"base"}'
expect json_duplicate_key 400 invalid_json
api POST /v1/sandboxes "$(printf '{"template":"\xff\xfe"}')"
expect json_bad_utf8 400 invalid_json
api POST /v1/sandboxes '{"template":"a\u0000b"}'
expect json_nul 400 invalid_json
api POST /v1/sandboxes '{"ttl_seconds":"10"}'
expect type_ttl_string 400 invalid_request
api POST /v1/sandboxes '{"ttl_seconds":1.5}'
expect type_ttl_real 400 invalid_request
api POST /v1/sandboxes '{"template":5}'
expect type_template_number 400 invalid_request
api POST /v1/sandboxes '{"metadata":[1]}'
expect type_metadata_array 400 invalid_request
api POST /v1/sandboxes '{"env":{"A":1}}'
expect type_env_value 400 invalid_request
api POST /v1/sandboxes '{"env":{"1BAD":"x"}}'
expect env_bad_name 400 invalid_request
api POST /v1/sandboxes '{"templat":"minimal"}'
expect unknown_field 400 invalid_request
api POST /v1/sandboxes '{"ttl_seconds":-1}'
expect ttl_negative 400 invalid_request
api POST /v1/sandboxes '{"ttl_seconds":100000000000}'
expect ttl_too_large 400 invalid_request
meta=$(python3 -c 'import json; print(json.dumps({"metadata": {"k%d" % i: "v" for i in range(100)}}))')
api POST /v1/sandboxes "$meta"
expect metadata_too_many 400 invalid_request
python3 -c 'print("{\"template\":\"" + "a" * (2 << 20) + "\"}")' > "$T/big.json"
# curl asks "Expect: 100-continue" and sends the body anyway after 1 s
# without an answer; under load kilnd's 413 then came while the body
# was going and the connection closed under it (status 000, twice in
# session 32): curl waits for kilnd's answer here, as a client should.
api POST /v1/sandboxes "" --data-binary @"$T/big.json" -H 'Content-Type: application/json' --expect100-timeout 60
expect body_too_large 413 payload_too_large
STATUS=$(python3 -c 'import sys; sys.stdout.write("{\"x\":\"" + "a" * (3 << 20))' |
	curl -s -o "$T/body" -w '%{http_code}' -X POST -H "Authorization: Bearer $KEY" \
		-H 'Transfer-Encoding: chunked' --data-binary @- "$URL/v1/sandboxes")
BODY=$(cat "$T/body")
expect body_chunked_too_large 413 payload_too_large
# Two Content-Lengths that differ (RFC 9112 §6.3): 400, in the JSON shape.
STATUS=$(python3 - "$PORT" "$KEY" "$T/body" "$E2E_HOST" <<'PY'
import socket, sys
s = socket.create_connection((sys.argv[4], int(sys.argv[1])))
body = b'{"template":"minimal"}'
s.sendall(b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + sys.argv[2].encode() +
          b"\r\nContent-Type: application/json\r\nContent-Length: %d\r\nContent-Length: 5\r\n"
          b"Connection: close\r\n\r\n" % len(body) + body)
got = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    got += d
head, _, rest = got.partition(b"\r\n\r\n")
open(sys.argv[3], "wb").write(rest)
print(head.split(b" ")[1].decode() if b" " in head else "none")
PY
)
BODY=$(cat "$T/body")
expect content_length_conflict 400 invalid_request
python3 -c 'print("[" * 200000)' > "$T/deep.json"
api POST /v1/sandboxes "" --data-binary @"$T/deep.json"
expect json_deep_nesting 400 invalid_json
api POST /v1/sandboxes/sbx_doesnotexist/exec '{"cmd":5}'
expect exec_cmd_number 400 invalid_request
api POST /v1/sandboxes/sbx_doesnotexist/exec '{"cmd":"true","argv":["true"]}'
expect exec_cmd_and_argv 400 invalid_request
api POST /v1/sandboxes/sbx_doesnotexist/exec '{}'
expect exec_nothing 400 invalid_request
api POST /v1/sandboxes/sbx_doesnotexist/exec '{"argv":[]}'
expect exec_argv_empty 400 invalid_request
api POST /v1/sandboxes/sbx_doesnotexist/exec '{"cmd":"true","timeout_seconds":-5}'
expect exec_timeout_negative 400 invalid_request
api POST /v1/sandboxes/sbx_doesnotexist/exec '{"cmd":"true","cwd":"relative"}'
expect exec_cwd_relative 400 invalid_request
api GET /v1/sandboxes/sbx_doesnotexist/files
expect files_no_path 400 invalid_request
api GET "/v1/sandboxes/sbx_doesnotexist/files?path=etc/passwd"
expect files_relative_path 400 invalid_request
api GET "/v1/sandboxes/sbx_doesnotexist/files?path=/etc/passwd%00.txt"
expect files_nul_in_path 400 invalid_request
api GET "/v1/sandboxes/sbx_doesnotexist/files/list?path=/&depth=0"
expect files_bad_depth 400 invalid_request
api PUT "/v1/sandboxes/sbx_doesnotexist/files?path=/x&mode=999"
expect files_bad_mode 400 invalid_request
# An upload to a sandbox that is not there is answered before its body is
# taken: a client that sends Expect: 100-continue sends none of it.
head -c 20000000 /dev/zero > "$T/up20m"
out=$(curl -s -m 120 -o "$T/body" -w '%{http_code} %{size_upload}' -T "$T/up20m" -H "Authorization: Bearer $KEY" \
	-H 'Expect: 100-continue' "$URL/v1/sandboxes/sbx_doesnotexist/files?path=/x")
STATUS=${out% *} BODY=$(cat "$T/body")
rm -f "$T/up20m"
expect upload_no_sandbox 404 not_found &&
	check upload_no_sandbox_not_sent "curl sent ${out#* } bytes of 20000000" [ "${out#* }" = 0 ]
# The other uploads' checks before their bodies (req_upload_admit): the
# query first, then the sandbox.
api POST "/v1/sandboxes/sbx_doesnotexist/files/write?user=a%20b" '{"files":[]}'
expect files_write_bad_user 400 invalid_request
api POST "/v1/sandboxes/sbx_doesnotexist/files/write" '{"files":[]}'
expect files_write_no_sandbox 404 not_found
truncate -s 100M "$T/up100m"	# over the multi-file write's 96 MiB, sparse here
out=$(curl -s -m 60 -o "$T/body" -w '%{http_code} %{size_upload}' -T "$T/up100m" -X POST -H "Authorization: Bearer $KEY" \
	-H 'Expect: 100-continue' "$URL/v1/sandboxes/sbx_doesnotexist/files/write")
STATUS=${out% *} BODY=$(cat "$T/body")
rm -f "$T/up100m"
expect files_write_too_large 413 payload_too_large &&
	check files_write_too_large_not_sent "curl sent ${out#* } bytes: $(jget 'j["error"]["message"]')" \
		eval '[ "${out#* }" = 0 ] && grep -q "multi-file write" "$T/body"'
api PUT "/v1/sandboxes/sbx_doesnotexist/files/archive" "" --data-binary x
expect archive_put_no_path 400 invalid_request
api PUT "/v1/sandboxes/sbx_doesnotexist/files/archive?path=/x" "" --data-binary x
expect archive_put_no_sandbox 404 not_found
api POST /v1/sandboxes/sbx_doesnotexist/fork '{"count":0}'
expect fork_count_zero 400 invalid_request
api POST /v1/sandboxes/sbx_doesnotexist/fork '{"count":1000}'
expect fork_count_huge 400 invalid_request
api POST /v1/sandboxes/sbx_doesnotexist/fork_tree '{"count":"2"}'
expect fork_count_string 400 invalid_request
api PATCH /v1/sandboxes/sbx_doesnotexist/lifecycle '{}'
expect lifecycle_no_ttl 400 invalid_request
api POST /v1/sandboxes/sbx_doesnotexist/hibernate '{"now":true}'
expect hibernate_unknown_field 400 invalid_request
api GET "/v1/sandboxes/sbx_doesnotexist/pty"
expect pty_not_websocket 400 invalid_request
code=$(python3 - "$PORT" "$KEY" "$E2E_HOST" <<'EOF'
import http.client, sys
c = http.client.HTTPConnection(sys.argv[3], int(sys.argv[1]), timeout=10)
c.request("GET", "/v1/sandboxes?x=" + "a" * 200000, headers={"Authorization": "Bearer " + sys.argv[2]})
print(c.getresponse().status)
EOF
)
check url_too_long "status $code" [ "$code" -ge 400 -a "$code" -lt 500 ]
# Garbage, half requests and a client that goes silent, on raw sockets.
# Whatever libmicrohttpd refuses before kilnd's handler sees the request
# (request line, headers, Host, framing, version) is still answered in
# the JSON error shape with its status (src/api/mhd_errors.h), or, where
# libmicrohttpd cannot frame an answer (a request line it cannot parse, a
# Content-Length it cannot read), closed with no answer at all: never its
# HTML page.
python3 - "$PORT" "$KEY" "$E2E_HOST" <<'EOF' | tee "$T/mhd_errors"
import json, socket, sys, time
port, key, host = int(sys.argv[1]), sys.argv[2], sys.argv[3]
auth = b"Authorization: Bearer " + key.encode() + b"\r\n"
post = b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\n" + auth
cases = [
    ("request_line", b"garbage\xff\r\n\r\n", None, None),
    ("version", b"GET / HTTP/9.9\r\nHost: x\r\n\r\n", 505, "http_version_not_supported"),
    ("no_host", b"GET /v1/sandboxes HTTP/1.1\r\n" + auth + b"\r\n", 400, "invalid_request"),
    ("header_no_colon", b"GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\nNoColonHere\r\n\r\n", 400, "invalid_request"),
    ("length_not_number", post + b"Content-Length: 1x\r\n\r\n", None, None),
    ("length_huge", post + b"Content-Length: 999999999999999999999999\r\n\r\n", None, None),
    ("chunk_malformed", post + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n", 400, "invalid_request"),
    ("headers_too_large", b"GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\n" + (b"X-A: " + b"b" * 30 + b"\r\n") * 5000 + b"\r\n", 431, "headers_too_large"),
    ("uri_too_long", b"GET /v1/sandboxes?x=" + b"a" * 200000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414, "uri_too_long"),
]
for name, payload, want, code in cases:
    s = socket.create_connection((host, port))
    got = b""
    try:
        s.settimeout(5)
        s.sendall(payload)
        while True:
            d = s.recv(65536)
            if not d:
                break
            got += d
    except OSError:
        pass
    s.close()
    head, _, body = got.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = lines[0].split(" ")[1] if " " in lines[0] else "none"
    ctype = [l.split(":", 1)[1].strip() for l in lines[1:] if l.lower().startswith("content-type:")]
    try:
        err = json.loads(body)["error"] if want else None
        ok = got == b"" if not want else (str(want) == status and ctype == ["application/json"] and err["code"] == code and
              isinstance(err["message"], str) and err["message"] != "")
    except Exception:
        ok = False
    print("%s mhd_error_%s: %s %s %r" % ("PASS" if ok else "FAIL", name, status, ctype, body[:160]))
# A NUL-led line (libmicrohttpd waits for a request line) and a client
# that goes silent after half a body: kilnd lives on.
socks = []
for payload in [b"\x00\xff garbage\r\n\r\n", b"POST /v1/sandboxes HTTP/1.1\r\nContent-Length: 10\r\n\r\nab"]:
    s = socket.create_connection((host, port))
    s.sendall(payload)
    socks.append(s)
time.sleep(2)
for s in socks:
    s.close()
EOF
sed -n 's/^FAIL \([^:]*\):.*/\1/p' "$T/mhd_errors" >> "$T/failed"
alive alive_after_hostile_input

# ---- docs/api.md and the routes, both ways -----------------------------------------------------
doc=$REPO/docs/api.md
if [ ! -f "$doc" ]; then
	# Inside the emulated host only build/, tests/ and bench/ are present.
	doc=$REPO/build/docs/api.md
fi
if [ -f "$doc" ]; then
	documented=$(python3 - "$doc" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
m = re.search(r"```yaml\n(.*?)```", text, re.S)
spec = m.group(1) if m else ""
out, path, in_paths = [], None, False
for line in spec.splitlines():
    if re.match(r"^paths:\s*$", line):
        in_paths = True
        continue
    if in_paths and re.match(r"^\S", line):
        in_paths = False
    if not in_paths:
        continue
    p = re.match(r"^  (/\S*):\s*$", line)
    if p:
        path = p.group(1)
        continue
    op = re.match(r"^    (get|put|post|delete|patch|head|options):(\s.*)?$", line)
    if op and path:
        out.append(op.group(1).upper() + " " + path)
print("\n".join(sorted(out)))
EOF
)
	served=$("$KILND" routes | sort)
	if [ -n "$documented" ] && [ "$documented" = "$served" ]; then
		pass docs_routes "docs/api.md documents exactly the $(wc -l <<<"$served") routes kilnd serves"
	else
		fail docs_routes "differences (< served, > documented): $(diff <(echo "$served") <(echo "$documented") | grep '^[<>]' | tr '\n' ' ')"
	fi
else
	fail docs_routes "docs/api.md not found"
fi
# (That the docs name only documents that exist and README's map every
# src/ directory is checked natively: tests/unit/docs.sh.)

# ---- the CLI's errors ---------------------------------------------------------------------------
export KILN_API_URL=$URL KILN_API_KEY=$KEY_A
"$KILN" ls --json > "$T/ls.json" && python3 -c 'import json,sys; json.load(open(sys.argv[1]))["sandboxes"]' "$T/ls.json" &&
	pass cli_ls_json "kiln ls --json is the API's JSON" || fail cli_ls_json "$(cat "$T/ls.json")"
"$KILN" get sbx_doesnotexist 2> "$T/err"
st=$?
check cli_not_found "exit $st: $(cat "$T/err")" [ "$st" = 125 ]
KILN_API_KEY=kiln_bad "$KILN" ls 2> "$T/err"
st=$?
check cli_unauthorized "exit $st: $(cat "$T/err")" [ "$st" = 125 ]
KILN_API_URL=http://127.0.0.1:1 "$KILN" ls 2> "$T/err"
st=$?
check cli_unreachable "exit $st: $(cat "$T/err")" [ "$st" = 125 -a -s "$T/err" ]
"$KILN" exec sbx_doesnotexist -- true 2> /dev/null
st=$?
check cli_exec_missing "exit $st" [ "$st" = 125 ]

# ---- workspaces see only their own ------------------------------------------------------------
KEY=$KEY_B
api GET /v1/usage
[ "$STATUS" = 200 ] && [ "$(jget 'j["workspace_id"]')" != "$(KEY=$KEY_A; api GET /v1/usage; jget 'j["workspace_id"]')" ] &&
	pass usage_per_workspace "two keys, two workspaces" || fail usage_per_workspace "$BODY"

# ---- rate limits --------------------------------------------------------------------------------
# 1 request a second, bursts of 4: of 12 quick requests the first 4 pass
# and most others are refused (a slow machine refills a token or two).
if one_box "anon_rate_limit rate_limit" "kilnd started again with --rate 1/4 --anon-rate 1/3"; then
stop_kilnd
start_kilnd --rate 1/4 --anon-rate 1/3 || exit 1
# Keys guessed from one address: after a burst of 3 refusals, 429s, while
# a valid key is still served (another bucket).
codes=
t0=$(date +%s%N)
for i in $(seq 1 10); do
	codes+="$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer kiln_guess$i" "$URL/v1/sandboxes") "
done
secs=$(( ($(date +%s%N) - t0) / 1000000000 ))
n401=$(grep -o 401 <<<"$codes" | wc -l)
KEY=$KEY_B
api GET /v1/sandboxes
check anon_rate_limit "10 refused keys in ${secs} s: $codes; a valid key then: $STATUS" \
	eval '[[ $codes == 401\ 401\ 401\ * ]] && [ "$n401" -le $((3 + secs + 1)) ] && [[ $codes == *429* ]] && [ "$STATUS" = 200 ]'
KEY=$KEY_A
codes= retry=
t0=$(date +%s%N)
for i in $(seq 1 12); do
	code=$(curl -s -D "$T/h" -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $KEY" "$URL/v1/sandboxes")
	codes+="$code "
	[ "$code" = 429 ] && retry=$(tr -d '\r' < "$T/h" | awk -F': ' 'tolower($1) == "retry-after" { print $2 }')
done
n429=$(grep -o 429 <<<"$codes" | wc -l)
# A bucket of 4 that refills 1 a second: at most 4 + the seconds the 12
# took (+1 for the second under way) are let through, however slow the
# machine made them (under load they took seconds).
secs=$(( ($(date +%s%N) - t0) / 1000000000 ))
KEY=$KEY_B
api GET /v1/sandboxes
b=$STATUS
if [[ $codes == 200\ 200\ 200\ 200\ * ]] && [ "$n429" -ge 1 ] && [ $((12 - n429)) -le $((4 + secs + 1)) ] &&
   [ -n "$retry" ] && [ "$b" = 200 ]; then
	pass rate_limit "12 quick requests in ${secs} s: $codes; Retry-After $retry; another workspace unaffected"
else
	fail rate_limit "codes in ${secs} s: $codes; Retry-After '$retry'; other workspace $b"
fi
fi
alive alive_at_end

# SIGTERM taken by a thread that is not the main one (the kernel may hand
# a process-directed signal to any thread not blocking it) still stops
# kilnd: it used to set the flag and wake no one, the main thread asleep
# in pause() (1 stop in 15 hung here). tgkill aims it at such a thread.
if one_box stop_signal_any_thread "signals a thread of kilnd's own process"; then
tid=$(ls /proc/$KILND_PID/task | grep -vx "$KILND_PID" | tail -1)
python3 -c 'import ctypes, sys; sys.exit(ctypes.CDLL(None, use_errno=True).syscall(234, int(sys.argv[1]), int(sys.argv[2]), 15) != 0)' "$KILND_PID" "$tid"
for i in $(seq 1 100); do kill -0 "$KILND_PID" 2>/dev/null || break; sleep 0.1; done
if ! kill -0 "$KILND_PID" 2>/dev/null; then
	pass stop_signal_any_thread "SIGTERM to thread $tid ($(cat /proc/$KILND_PID/task/$tid/comm 2>/dev/null || echo gone)): kilnd stopped in $((i / 10)).$((i % 10)) s"
	wait "$KILND_PID" 2>/dev/null; KILND_PID=
else
	fail stop_signal_any_thread "SIGTERM to thread $tid: kilnd still running after 10 s; log: $(tail -2 "$T/kilnd.log" | tr '\n' ' ')"
fi
fi
