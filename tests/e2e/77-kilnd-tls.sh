#!/bin/bash
# kilnd serving HTTPS (--tls-cert, --tls-key) with a certificate of a
# private CA that this test makes (openssl): the kiln CLI trusts it through
# KILN_CA_CERT (create, exec streamed, cp both ways, ls, the PTY WebSocket
# over TLS, an exposed port's https URL), refuses kilnd without it or with
# another CA's certificate, and fails cleanly on plain HTTP to the TLS
# port; the MCP endpoint and a raw HTTPS client (Python's ssl) work over
# it too; kilnd refuses a key without its certificate and a file that is
# not PEM. Needs KVM (the emulated host).
. "$(dirname "$0")/lib.sh"

# ---- certificates: a CA, kilnd's certificate from it, and a stranger CA --------------------
C=$T/tls
mkdir -p "$C"
(
	cd "$C" &&
	openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj "/CN=kiln test CA" &&
	openssl req -newkey rsa:2048 -nodes -keyout kilnd.key -out kilnd.csr -subj "/CN=127.0.0.1" &&
	printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n' > ext &&
	openssl x509 -req -in kilnd.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out kilnd.pem -days 2 -extfile ext &&
	openssl req -x509 -newkey rsa:2048 -nodes -keyout other.key -out other.pem -days 2 -subj "/CN=another CA"
) > "$T/openssl.log" 2>&1 || { fail certificates "$(tail -3 "$T/openssl.log" | tr '\n' ' ')"; exit 1; }
pass certificates "a CA, kilnd's certificate for 127.0.0.1, another CA"

# ---- kilnd's refusals ----------------------------------------------------------------------
# In a data directory of their own: a kilnd that ran in $DATA would make
# its templates/ a directory, and build_template (below) could no longer
# link the run's shared minimal there (it built its own: 17 s in CI 34).
RD=$T/refusals
mkdir -p "$RD"
out=$("$KILND" --data "$RD" --listen "127.0.0.1:$PORT" --tls-key "$C/kilnd.key" 2>&1)
[ $? != 0 ] && grep -q -- '--tls-cert and --tls-key go together' <<<"$out" && pass tls_key_alone "refused: $out" ||
	fail tls_key_alone "$out"
echo "not a certificate" > "$C/junk.pem"
timeout 20 "$KILND" --data "$RD" --listen "127.0.0.1:$PORT" --tls-cert "$C/junk.pem" --tls-key "$C/kilnd.key" > "$T/junk.log" 2>&1
st=$?
[ "$st" != 0 ] && [ "$st" != 124 ] && grep -qi 'https\|pem' "$T/junk.log" && pass tls_bad_pem "exit $st: $(tail -1 "$T/junk.log")" ||
	fail tls_bad_pem "exit $st: $(tail -3 "$T/junk.log")"

build_template minimal || exit 1
URL=https://127.0.0.1:$PORT
export CURL_CA_BUNDLE=$C/ca.pem	# lib.sh's curl calls (start_kilnd, api)
start_kilnd --rate 0 --tls-cert "$C/kilnd.pem" --tls-key "$C/kilnd.key" || exit 1
KEY=$(new_key tls)
export KILN_API_URL=$URL KILN_API_KEY=$KEY KILN_CA_CERT=$C/ca.pem
at_exit 'for s in $("$KILN" ls --json 2>/dev/null | python3 -c "import json,sys; [print(s[\"id\"]) for s in json.load(sys.stdin)[\"sandboxes\"]]" 2>/dev/null); do "$KILN" rm "$s" 2>/dev/null; done'

STATUS=$(curl -s -o /dev/null -w '%{http_code}' "$URL/healthz")
check https_healthz "curl with the CA: $STATUS" [ "$STATUS" = 200 ]
curl -s -o /dev/null "http://127.0.0.1:$PORT/healthz"
st=$?
check plain_http_refused "curl http:// to the TLS port: exit $st" [ "$st" != 0 ]

# ---- the CLI over HTTPS ------------------------------------------------------------------------
out=$("$KILN" create minimal --json 2> "$T/err")
A=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])' <<<"$out" 2>/dev/null)
[[ $A == sbx_* ]] && pass cli_create "$A over https" || { fail cli_create "$out $(cat "$T/err")"; exit 1; }
out=$("$KILN" exec "$A" -- sh -c 'echo one; sleep 1; echo two >&2; exit 3' 2> "$T/err")
st=$?
[ "$st" = 3 ] && [ "$out" = one ] && [ "$(cat "$T/err")" = two ] && pass cli_exec_stream "streamed over TLS, exit 3" ||
	fail cli_exec_stream "exit $st out '$out' err '$(cat "$T/err")'"
head -c 300000 /dev/urandom > "$T/blob"
"$KILN" cp "$T/blob" "$A:/tmp/blob" && "$KILN" cp "$A:/tmp/blob" "$T/blob.back" && cmp -s "$T/blob" "$T/blob.back" &&
	pass cli_cp "300 kB up and down over TLS" || fail cli_cp "$(ls -l "$T/blob.back" 2>&1)"
"$KILN" ls | grep -q "^$A " && pass cli_ls "$A listed" || fail cli_ls "$("$KILN" ls 2>&1)"
out=$(printf 'echo $((6*7))tls\nexit 6\n' | timeout 120 "$KILN" shell "$A" 2>&1)
st=$?
[[ $out == *42tls* ]] && [ "$st" = 6 ] && pass cli_pty_tls "a shell over wss: 42, exit 6" || fail cli_pty_tls "exit $st: $(tail -c 300 <<<"$out")"
out=$(yes 0123456789 | head -n 20000 | timeout 300 "$KILN" shell "$A" -- wc -c 2>&1)
st=$?
[[ $out == *220000* ]] && [ "$st" = 0 ] && pass cli_pty_tls_bulk "220000 bytes typed through TLS (and echoed back), counted, exit 0" ||
	fail cli_pty_tls_bulk "exit $st: $(tail -c 300 <<<"$out")"
out=$("$KILN" expose "$A" 8080)
[[ $out == https://127.0.0.1:$PORT/v1/sandboxes/$A/proxy/8080/ ]] && pass expose_https_url "$out" || fail expose_https_url "$out"

# ---- refusals: no CA, a stranger's CA, plain http, a missing CA file ----------------------------
KILN_CA_CERT= "$KILN" ls > /dev/null 2> "$T/err"
st=$?
[ "$st" = 125 ] && grep -q KILN_CA_CERT "$T/err" && pass cli_system_store_refuses "exit 125: $(cat "$T/err")" ||
	fail cli_system_store_refuses "exit $st: $(cat "$T/err")"
KILN_CA_CERT=$C/other.pem "$KILN" ls > /dev/null 2> "$T/err"
st=$?
[ "$st" = 125 ] && grep -qi 'certificate' "$T/err" && pass cli_bad_ca_refused "exit 125: $(cat "$T/err")" ||
	fail cli_bad_ca_refused "exit $st: $(cat "$T/err")"
KILN_CA_CERT=$C/other.pem timeout 60 "$KILN" shell "$A" < /dev/null > /dev/null 2> "$T/err"
st=$?
[ "$st" = 125 ] && grep -qi 'certificate' "$T/err" && pass cli_pty_bad_ca_refused "exit 125" ||
	fail cli_pty_bad_ca_refused "exit $st: $(cat "$T/err")"
KILN_API_URL=http://127.0.0.1:$PORT "$KILN" ls > /dev/null 2> "$T/err"
st=$?
[ "$st" = 125 ] && [ -s "$T/err" ] && pass cli_http_to_tls "exit 125: $(cat "$T/err")" || fail cli_http_to_tls "exit $st: $(cat "$T/err")"
KILN_CA_CERT=$C/nothere.pem "$KILN" ls > /dev/null 2> "$T/err"
st=$?
[ "$st" = 125 ] && grep -q nothere "$T/err" && pass cli_ca_missing "exit 125: $(cat "$T/err")" || fail cli_ca_missing "exit $st: $(cat "$T/err")"

# ---- MCP and a plain HTTPS client ------------------------------------------------------------------
mcp() {
	curl -s -m 120 -o "$T/body" -w '%{http_code}' -X POST "$URL/mcp" -H "Authorization: Bearer $KEY" \
		-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' --data-binary "$1"
}
STATUS=$(mcp '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}')
[ "$STATUS" = 200 ] && grep -q '"protocolVersion"' "$T/body" && pass mcp_initialize_https "200" || fail mcp_initialize_https "$STATUS $(head -c 300 "$T/body")"
STATUS=$(mcp '{"jsonrpc":"2.0","id":2,"method":"tools/list"}')
[ "$STATUS" = 200 ] && grep -q '"tools"' "$T/body" && pass mcp_tools_https "tools listed" || fail mcp_tools_https "$STATUS $(head -c 300 "$T/body")"
python3 - "$PORT" "$KEY" "$A" "$C/ca.pem" "$C/other.pem" > "$T/py.out" 2>&1 <<'EOF'
import http.client, json, ssl, sys
port, key, sbx, ca, other = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
c = http.client.HTTPSConnection("127.0.0.1", port, context=ssl.create_default_context(cafile=ca), timeout=60)
c.request("POST", "/v1/sandboxes/%s/exec" % sbx, json.dumps({"cmd": "echo py-$((6*7))"}),
          {"Authorization": "Bearer " + key, "Content-Type": "application/json"})
r = c.getresponse()
print("exec", r.status, json.loads(r.read())["stdout"].strip())
try:
    c = http.client.HTTPSConnection("127.0.0.1", port, context=ssl.create_default_context(cafile=other), timeout=60)
    c.request("GET", "/healthz")
    print("other-ca accepted", c.getresponse().status)
except ssl.SSLCertVerificationError as e:
    print("other-ca refused", e.reason)
EOF
grep -q '^exec 200 py-42$' "$T/py.out" && grep -q '^other-ca refused' "$T/py.out" && pass python_https "exec over https; another CA refused" ||
	fail python_https "$(tr '\n' ' ' < "$T/py.out")"

# ---- a client that vanishes from an upgraded HTTPS connection ------------------------------------
# The PTY's WebSocket, its command running, and then the client's socket
# closed with no close frame: libmicrohttpd's TLS layer passes no end on
# (http.h), so kilnd watches the network socket: the session ends, and
# with it the sandbox's operation, and a hibernate finds none running.
python3 - "$PORT" "$KEY" "$A" "$C/ca.pem" > "$T/vanish.out" 2>&1 <<'EOF'
import socket, ssl, sys
port, key, sbx, ca = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
s = ssl.create_default_context(cafile=ca).wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=60),
                                                      server_hostname="127.0.0.1")
s.sendall(("GET /v1/sandboxes/%s/pty?cmd=sleep%%20600 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
           "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n" % (sbx, key)).encode())
head = b""
while b"\r\n\r\n" not in head:
    d = s.recv(4096)
    if not d:
        sys.exit("closed before the 101: %r" % head)
    head += d
print(head.split(b"\r\n")[0].decode())
s.close()
EOF
api POST "/v1/sandboxes/$A/hibernate" '{}'
grep -q '^HTTP/1.1 101' "$T/vanish.out" && [ "$STATUS" = 200 ] && pass pty_tls_client_vanished "101, the socket closed without a close frame, then hibernate: 200" ||
	fail pty_tls_client_vanished "$(tr '\n' ' ' < "$T/vanish.out") hibernate: $STATUS $BODY"
"$KILN" rm "$A" && pass cli_rm "$A" || fail cli_rm "$A"
alive kilnd_alive
