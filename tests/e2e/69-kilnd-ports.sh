#!/bin/bash
# Exposed ports: a sandbox of the base template runs an HTTP server
# (tests/e2e/ports_server.py) on 127.0.0.1:8080, which is exposed through
# kilnd and reached by path (/v1/sandboxes/ID/proxy/8080/...) and by Host
# (8080-ID.DOMAIN, with --domain): with the workspace's key (200, the right
# bytes, bodies streamed both ways, chunked and Upgrade passed through),
# without (401), with another workspace's key (404), public (200 without a
# key); an unexposed port (404), a port nobody listens on (502), bad ports
# (400); exposures kept across a restart of kilnd; a hibernated sandbox
# woken by a request; exposures listed, removed, and gone with their
# sandbox. Needs KVM (the emulated host).
# tier: full: a slow file whose ground the quick tier covers otherwise (the SDK tests expose a port and fetch through the proxy and a preview link)
. "$(dirname "$0")/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
DOMAIN=sbx.test

if [ ! -f "$REPO/build/guest/rootfs-base.ext4" ]; then
	fail base_image "build/guest/rootfs-base.ext4 is missing: run 'make templates'"
	exit 0
fi
build_template base || exit 1
start_kilnd --rate 0 --domain "$DOMAIN" || exit 1
KEY_A=$(new_key alpha)
KEY_B=$(new_key beta)
KEY=$KEY_A
at_exit 'KEY=$KEY_A; [ -n "${S:-}" ] && api DELETE /v1/sandboxes/$S'

create_sandbox '{"template":"base"}'
S=$SBX
[ -n "$S" ] || { fail create "$STATUS $BODY"; exit 1; }
P=/v1/sandboxes/$S/proxy

# The server and its files.
STATUS=$(curl -s -o "$T/body" -w '%{http_code}' -X PUT -H "Authorization: Bearer $KEY_A" \
	--data-binary @"$HERE/ports_server.py" "$URL/v1/sandboxes/$S/files?path=/root/srv.py")
[ "$STATUS" = 200 ] || fail upload_server "$STATUS $(cat "$T/body")"
api POST "/v1/sandboxes/$S/exec" '{"cmd":"mkdir -p /srv/www/sub && echo hello from the sandbox > /srv/www/sub/hello.txt && head -c 4194304 /dev/urandom > /srv/www/big && sha256sum < /srv/www/big | cut -d\" \" -f1 && (setsid python3 /root/srv.py 8080 /srv/www > /root/srv.log 2>&1 < /dev/null &)"}'
BIG_SUM=$(jget 'j["stdout"].strip()')
[ "$STATUS" = 200 ] && [ ${#BIG_SUM} = 64 ] || fail start_server "$STATUS $BODY"

# ---- exposing -------------------------------------------------------------------------------
api POST "/v1/sandboxes/$S/ports" '{"port":8080}'
if [ "$STATUS" = 201 ] && [ "$(jget 'j["port"], j["public"], j["url"], j["host_url"]')" = \
	"(8080, False, 'http://127.0.0.1:$PORT$P/8080/', 'http://8080-${S/_/-}.$DOMAIN:$PORT/')" ]; then
	pass expose "201 $(jget 'j["url"]') $(jget 'j["host_url"]')"
else
	fail expose "$STATUS $BODY"
fi
api POST "/v1/sandboxes/$S/ports" '{"port":70000}'
expect expose_bad_port 400 invalid_request
api POST "/v1/sandboxes/$S/ports" '{"port":"8080"}'
expect expose_port_not_a_number 400 invalid_request
api POST "/v1/sandboxes/$S/ports" '{"port":8080,"color":"red"}'
expect expose_unknown_field 400 invalid_request
api POST "/v1/sandboxes/$S/ports" '{"port":9999}'
[ "$STATUS" = 201 ] || fail expose_9999 "$STATUS $BODY"
api GET "/v1/sandboxes/$S/ports"
[ "$STATUS" = 200 ] && [ "$(jget '[(p["port"], p["public"]) for p in j["ports"]]')" = "[(8080, False), (9999, False)]" ] &&
	pass list_ports "$(jget '[p["port"] for p in j["ports"]]')" || fail list_ports "$STATUS $BODY"
out=$(KILN_API_URL=$URL KILN_API_KEY=$KEY_A "$KILN" expose "$S" 8080 2>&1)
[ "$out" = "$URL$P/8080/" ] && pass cli_expose "kiln expose prints $out" || fail cli_expose "$out"
out=$(KILN_API_URL=$URL KILN_API_KEY=$KEY_A "$KILN" ports "$S" 2>&1)
[ "$(awk 'NR > 1 { print $1 "-" $2 }' <<<"$out" | tr '\n' ' ')" = "8080-no 9999-no " ] &&
	pass cli_ports "kiln ports: 8080, 9999" || fail cli_ports "$out"
KEY=$KEY_B
api GET "/v1/sandboxes/$S/ports"
expect list_ports_other_workspace 404 not_found
api POST "/v1/sandboxes/$S/ports" '{"port":8081}'
expect expose_other_workspace 404 not_found
KEY=$KEY_A

# ---- through the proxy, by path -------------------------------------------------------------------
for i in $(seq 1 240); do
	api GET "$P/8080/sub/hello.txt"
	# Until the server listens: 502 "nothing listens"; anything else is
	# the answer.
	[ "$STATUS" = 502 ] && grep -q "nothing listens" <<<"$BODY" || break
	sleep 0.5
done
[ "$STATUS" = 200 ] && [ "$BODY" = "hello from the sandbox" ] &&
	pass proxy_get "200 '$BODY' after $i tries" || fail proxy_get "$STATUS $BODY; server log: $(curl -s -H "Authorization: Bearer $KEY_A" "$URL/v1/sandboxes/$S/files?path=/root/srv.log" | tail -3)"
KEY=
api GET "$P/8080/sub/hello.txt"
expect proxy_without_key 401 unauthorized
KEY=$KEY_B
api GET "$P/8080/sub/hello.txt"
expect proxy_other_workspace 404 not_found
KEY=$KEY_A
api GET "$P/8081/"
expect proxy_unexposed_port 404 not_found
api GET "$P/9999/"
expect proxy_nobody_listens 502 guest_error
api GET "$P/0/"
expect proxy_bad_port 400 invalid_request
api GET "$P/http/"
expect proxy_port_not_a_number 400 invalid_request
api GET "/v1/sandboxes/sbx_nothere/proxy/8080/"
expect proxy_no_such_sandbox 404 not_found
api GET "$P/8080/sub/nothere"
[ "$STATUS" = 404 ] && pass proxy_guest_404 "the guest's own 404 comes through" || fail proxy_guest_404 "$STATUS $BODY"
STATUS=$(curl -s -o /dev/null -w '%{http_code} %{redirect_url}' -H "Authorization: Bearer $KEY_A" "$URL$P/8080?a=1")
[ "$STATUS" = "308 $URL$P/8080/?a=1" ] && pass proxy_redirect_slash "$STATUS" || fail proxy_redirect_slash "$STATUS"
api GET "$P/8080/headers?x=1%202&y"
if [ "$STATUS" = 200 ] && [ "$(jget 'j["path"], "authorization" in j["headers"], j["headers"]["x-forwarded-prefix"], j["headers"]["x-forwarded-for"], j["headers"]["connection"]')" = \
	"('/headers?x=1%202&y', False, '$P/8080', '127.0.0.1', 'close')" ]; then
	pass proxy_request_head "query as sent, no API key, X-Forwarded-*"
else
	fail proxy_request_head "$STATUS $BODY"
fi
curl -s -o "$T/big" -H "Authorization: Bearer $KEY_A" "$URL$P/8080/big"
[ "$(sha256sum < "$T/big" | cut -d' ' -f1)" = "$BIG_SUM" ] && pass proxy_download "4 MiB intact" ||
	fail proxy_download "$(stat -c %s "$T/big") bytes, sum differs"
api GET "$P/8080/chunked"
[ "$STATUS" = 200 ] && [ "$BODY" = "one two three" ] && pass proxy_chunked_answer "'$BODY'" || fail proxy_chunked_answer "$STATUS $BODY"
out=$(python3 - "$URL$P/8080/slow" "$KEY_A" <<'PY'
import sys, time, urllib.request
req = urllib.request.Request(sys.argv[1], headers={"Authorization": "Bearer " + sys.argv[2]})
with urllib.request.urlopen(req, timeout=120) as resp:
    first = resp.read(6)
    t_first = time.monotonic()
    rest = resp.read()
    t_end = time.monotonic()
print("ok" if first + rest == b"first\nsecond\n" and t_end - t_first > 2 else
      "%r %r, the first chunk came %.1f s before the end" % (first, rest, t_end - t_first))
PY
)
[ "$out" = ok ] && pass proxy_streams_answer "the first chunk before the guest's 3 s pause ended" || fail proxy_streams_answer "$out"
api GET "$P/8080/garbage"
expect proxy_guest_not_http 502 guest_error
seq 1 8 | xargs -P 8 -I{} curl -s -o "$T/par{}" -w '%{http_code}\n' -H "Authorization: Bearer $KEY_A" \
	"$URL$P/8080/sub/hello.txt" > "$T/par_status"
[ "$(sort -u "$T/par_status")" = 200 ] && [ "$(cat "$T"/par[1-8] | sort -u)" = "hello from the sandbox" ] &&
	pass proxy_parallel "8 requests at once, all 200" || fail proxy_parallel "$(sort "$T/par_status" | uniq -c | tr '\n' ' ')"
STATUS=$(curl -s -I -o "$T/head" -w '%{http_code}' -H "Authorization: Bearer $KEY_A" "$URL$P/8080/sub/hello.txt")
[ "$STATUS" = 200 ] && grep -qi '^content-length: 23' "$T/head" && pass proxy_head "200, Content-Length 23, no body" ||
	fail proxy_head "$STATUS $(tr '\r\n' '  ' < "$T/head")"
head -c 3000000 /dev/urandom > "$T/up"
STATUS=$(curl -s -o "$T/echo" -w '%{http_code}' -H "Authorization: Bearer $KEY_A" --data-binary @"$T/up" "$URL$P/8080/echo")
[ "$STATUS" = 200 ] && cmp -s "$T/up" "$T/echo" && pass proxy_post "3 MB up and back" || fail proxy_post "$STATUS $(stat -c %s "$T/echo")"
STATUS=$(curl -s -o "$T/echo" -w '%{http_code}' -H "Authorization: Bearer $KEY_A" -H 'Transfer-Encoding: chunked' \
	--data-binary @"$T/up" "$URL$P/8080/echo")
[ "$STATUS" = 200 ] && cmp -s "$T/up" "$T/echo" && pass proxy_post_chunked "3 MB chunked up, back" || fail proxy_post_chunked "$STATUS $(stat -c %s "$T/echo")"
out=$(python3 - "$PORT" "$P/8080/upgrade" "$KEY_A" <<'PY'
import socket, sys
port, path, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
s = socket.create_connection(("127.0.0.1", port), timeout=60)
s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nUpgrade: echo\r\n"
           "Connection: Upgrade\r\n\r\n" % (path, key)).encode())
buf = b""
while b"\r\n\r\n" not in buf:
    d = s.recv(4096)
    if not d:
        sys.exit("closed in the head: %r" % buf)
    buf += d
head, rest = buf.split(b"\r\n\r\n", 1)
if not head.startswith(b"HTTP/1.1 101"):
    sys.exit("not 101: %r" % head)
s.sendall(b"first")
while len(rest) < 5:
    rest += s.recv(4096)
# An open tunnel is an operation of the sandbox: it cannot hibernate.
import urllib.error, urllib.request
req = urllib.request.Request("http://127.0.0.1:%d%s/hibernate" % (port, path.split("/proxy/")[0]),
                             data=b"{}", method="POST", headers={"Authorization": "Bearer " + key})
try:
    hib = urllib.request.urlopen(req, timeout=120).status
except urllib.error.HTTPError as e:
    hib = e.code
msg = b"through the tunnel " * 5000
s.sendall(msg)
s.shutdown(socket.SHUT_WR)
while True:
    d = s.recv(65536)
    if not d:
        break
    rest += d
ok = rest == b"first" + msg
print("ok" if ok and hib == 409 else "echoed %d of %d bytes, hibernate %d" % (len(rest), len(msg) + 5, hib))
PY
)
[ "$out" = ok ] && pass proxy_upgrade "101, 95 kB echoed through the tunnel, ends passed on, hibernate refused meanwhile" || fail proxy_upgrade "$out"

# ---- by Host --------------------------------------------------------------------------------------
api GET /sub/hello.txt "" -H "Host: 8080-$S.$DOMAIN"
[ "$STATUS" = 200 ] && [ "$BODY" = "hello from the sandbox" ] && pass host_route "200 by Host 8080-$S.$DOMAIN" ||
	fail host_route "$STATUS $BODY"
api GET /headers "" -H "Host: 8080-${S/_/-}.$DOMAIN:$PORT"
[ "$STATUS" = 200 ] && [ "$(jget 'j["path"], "x-forwarded-prefix" in j["headers"]')" = "('/headers', False)" ] &&
	pass host_route_dns_name "8080-${S/_/-}: whole path, no prefix" || fail host_route_dns_name "$STATUS $BODY"
KEY=
api GET /sub/hello.txt "" -H "Host: 8080-$S.$DOMAIN"
expect host_route_without_key 401 unauthorized
KEY=$KEY_B
api GET /sub/hello.txt "" -H "Host: 8080-$S.$DOMAIN"
expect host_route_other_workspace 404 not_found
KEY=$KEY_A
api GET /sub/hello.txt "" -H "Host: 8081-$S.$DOMAIN"
expect host_route_unexposed 404 not_found
api GET /v1/sandboxes "" -H "Host: 127.0.0.1:$PORT"
[ "$STATUS" = 200 ] && pass api_still_served "other hosts reach the API" || fail api_still_served "$STATUS $BODY"

# ---- preview links: a private port without a key, until it expires -------------------------------
KEY=$KEY_A
api POST "/v1/sandboxes/$S/ports/8080/preview" '{"ttl_seconds":120}'
purl=$(jget 'j["url"]') ptok=$(jget 'j["url"].split("kiln_preview=")[1]')
pst=$STATUS
KEY=
code=$(curl -s -c "$T/jar" -o /dev/null -w '%{http_code}' "$purl")
jar=$(grep -c 'kiln_preview' "$T/jar" 2>/dev/null)
api GET "$P/8080/headers?y=2" "" -b "$T/jar"
seen=$(jget 'j["path"], "kiln_preview" in j["headers"].get("cookie", ""), "authorization" in j["headers"]')
api GET "$P/8080/headers?kiln_preview=$ptok&y=3"
seen_q=$(jget 'j["path"]')
check preview_link "create $pst; the link $code, cookie set $jar; by cookie the guest saw $seen; by query $seen_q" \
	eval '[ "$pst" = 201 ] && [ "$code" = 200 ] && [ "$jar" = 1 ] && [ "$seen" = "('"'/headers?y=2'"', False, False)" ] && [ "$seen_q" = /headers?y=3 ]'
# A browser that opens a private port's page by path goes to the port's
# own origin (--domain is set here) with its pass: the preview token it
# came with, or, let in by a key (which a browser would not send to the
# other origin), a new one; the port's origin takes it and sets its own
# cookie. A script (no Sec-Fetch-*) stays by path.
H8080="8080-${S/_/-}.$DOMAIN:$PORT"
out=$(curl -s -o /dev/null -w '%{http_code} %{redirect_url}' -H 'Sec-Fetch-Mode: navigate' "$URL$P/8080/sub/hello.txt?kiln_preview=$ptok&q=1")
check private_page_own_origin_preview "$out" [ "$out" = "308 http://$H8080/sub/hello.txt?q=1&kiln_preview=$ptok" ]
out=$(curl -s -o /dev/null -w '%{http_code} %{redirect_url}' -H "Authorization: Bearer $KEY_A" -H 'Sec-Fetch-Mode: navigate' \
	"$URL$P/8080/sub/hello.txt")
loc=${out#* } tok=${out##*kiln_preview=}
code=$(curl -s -c "$T/jar2" -o /dev/null -w '%{http_code}' -H "Host: $H8080" "$URL/sub/hello.txt?kiln_preview=$tok")
code2=$(curl -s -b "$T/jar2" -o /dev/null -w '%{http_code}' -H "Host: $H8080" "$URL/sub/hello.txt")
code3=$(curl -s -o /dev/null -w '%{http_code}' -H "Host: 9999-${S/_/-}.$DOMAIN:$PORT" "$URL/?kiln_preview=$tok")
code4=$(curl -s -o /dev/null -w '%{http_code}' -H "Host: $H8080" "$URL/sub/hello.txt")
check private_page_own_origin_key "$out; there: the pass $code, its cookie $code2, on port 9999 $code3, with none $code4" \
	eval '[ "${out%% *}" = 308 ] && [[ $loc == "http://$H8080/sub/hello.txt?kiln_preview="* ]] && [ "$code $code2 $code3 $code4" = "200 200 401 401" ]'
api GET "$P/8080/sub/hello.txt" "" -H "Authorization: Bearer $KEY_A"
check private_script_stays_by_path "$STATUS" [ "$STATUS" = 200 ]
api GET "$P/8080/sub/hello.txt?kiln_preview=9$ptok"
expect preview_tampered 401 unauthorized
api GET "$P/9999/?kiln_preview=$ptok"
expect preview_other_port 401 unauthorized
KEY=$KEY_A
api POST "/v1/sandboxes/$S/ports/8080/preview" '{"ttl_seconds":10}'
expect preview_ttl_too_short 400 invalid_request
api POST "/v1/sandboxes/$S/ports/7777/preview" '{}'
expect preview_unexposed 404 not_found

# ---- public ----------------------------------------------------------------------------------------
api POST "/v1/sandboxes/$S/ports" '{"port":8080,"public":true}'
[ "$STATUS" = 200 ] && [ "$(jget 'j["public"]')" = True ] && pass make_public "200 public" || fail make_public "$STATUS $BODY"
KEY=
api GET "$P/8080/sub/hello.txt"
[ "$STATUS" = 200 ] && [ "$BODY" = "hello from the sandbox" ] && pass public_without_key "200" || fail public_without_key "$STATUS $BODY"
api GET /sub/hello.txt "" -H "Host: 8080-$S.$DOMAIN"
[ "$STATUS" = 200 ] && pass public_by_host "200" || fail public_by_host "$STATUS $BODY"
KEY=$KEY_B
api GET "$P/8080/headers"
[ "$STATUS" = 200 ] && [ "$(jget '"authorization" in j["headers"]')" = False ] &&
	pass public_other_key "200, and that key is not passed on" || fail public_other_key "$STATUS $BODY"
KEY=kiln_0123456789abcdef0123456789abcdef   # well formed, unknown: still a credential
api GET "$P/8080/headers"
[ "$STATUS" = 200 ] && [ "$(jget '"authorization" in j["headers"]')" = False ] &&
	pass public_unknown_kiln_key "200, and the kiln_ key is not passed on" || fail public_unknown_kiln_key "$STATUS $BODY"
KEY=
api GET "$P/8080/headers" "" -H "Authorization: Bearer app-token"
[ "$STATUS" = 200 ] && [ "$(jget 'j["headers"].get("authorization")')" = "Bearer app-token" ] &&
	pass public_app_auth_passes "the guest app's own token reaches it" || fail public_app_auth_passes "$STATUS $BODY"
# A browser opening a public port's page by path goes to the port's own
# origin (--domain is set here); scripts and SDKs (no Sec-Fetch-*) stay.
out=$(curl -s -o /dev/null -w '%{http_code} %{redirect_url}' -H 'Sec-Fetch-Mode: navigate' -H 'Sec-Fetch-Dest: document' \
	"$URL$P/8080/sub/hello.txt?q=1")
check public_page_own_origin "by path from a browser: $out" [ "$out" = "308 http://8080-${S/_/-}.$DOMAIN:$PORT/sub/hello.txt?q=1" ]
KEY=$KEY_A
api GET "$P/9999/"
check private_page_stays_by_path "a private port from a script: $STATUS" [ "$STATUS" != 308 ]
KEY=
# What a guest answers that would reach past its sandbox: a cookie for a
# whole Domain (kilnd's API host and every sandbox under it), one named
# like kilnd's session, a header it declared hop-by-hop itself.
for how in path host; do
	if [ $how = path ]; then where="$URL$P/8080/cookies"; hh=(); else where="$URL/cookies"; hh=(-H "Host: 8080-$S.$DOMAIN"); fi
	curl -s -o /dev/null -D "$T/cookies.$how" "${hh[@]}" -H "X-Cookie-Domain: $DOMAIN" "$where"
	heads=$(tr -d '\r' < "$T/cookies.$how" | grep -i -E '^(set-cookie|x-guest-)' | sort | tr '\n' '|')
	check guest_cookies_scoped_$how "headers that reached the client: $heads" \
		[ "$heads" = 'Set-Cookie: plain=1; Path=/|X-Guest-Public: end|' ]
done
KEY=
api GET "$P/9999/"
expect private_port_still_private 401 unauthorized
KEY=$KEY_A

# ---- kept across a restart of kilnd (the sandbox keeps running) -----------------------------
if one_box "ports_kept_on_restart proxy_after_restart" "restarts kilnd's own process"; then
	stop_kilnd
	start_kilnd --rate 0 --domain "$DOMAIN" || exit 1
	api GET "/v1/sandboxes/$S/ports"
	[ "$(jget '[(p["port"], p["public"]) for p in j["ports"]]')" = "[(8080, True), (9999, False)]" ] &&
		pass ports_kept_on_restart "8080 public, 9999" || fail ports_kept_on_restart "$STATUS $BODY"
	KEY=
	api GET "$P/8080/sub/hello.txt"
	[ "$STATUS" = 200 ] && pass proxy_after_restart "200 without a key" || fail proxy_after_restart "$STATUS $BODY"
	KEY=$KEY_A
fi

# ---- hibernated: a request wakes it --------------------------------------------------------------
api POST "/v1/sandboxes/$S/hibernate"
if [ "$STATUS" = 200 ]; then
	api GET "$P/8080/sub/hello.txt"
	[ "$STATUS" = 200 ] && [ "$BODY" = "hello from the sandbox" ] && pass proxy_wakes "200 from a hibernated sandbox" ||
		fail proxy_wakes "$STATUS $BODY"
	api GET "/v1/sandboxes/$S"
	[ "$(jget 'j["status"]')" = running ] && pass woken "running" || fail woken "$BODY"
else
	fail proxy_wakes "hibernate: $STATUS $BODY"
fi

# ---- removing ----------------------------------------------------------------------------------------
api DELETE "/v1/sandboxes/$S/ports/9999"
[ "$STATUS" = 204 ] && pass unexpose "204" || fail unexpose "$STATUS $BODY"
api DELETE "/v1/sandboxes/$S/ports/9999"
expect unexpose_twice 404 not_found
api DELETE "/v1/sandboxes/$S/ports/0"
expect unexpose_bad_port 400 invalid_request
api GET "$P/9999/"
expect unexposed_gone 404 not_found
api DELETE "/v1/sandboxes/$S"
[ "$STATUS" = 204 ] || [ "$STATUS" = 200 ] || fail delete "$STATUS $BODY"
# Port 8080 was public: had its record outlived the sandbox, this would
# be a 404 for the missing sandbox rather than a 401.
KEY=
api GET "$P/8080/sub/hello.txt"
expect exposure_gone_with_sandbox 401 unauthorized
KEY=$KEY_A
api GET "/v1/sandboxes/$S/ports"
expect ports_of_deleted 404 sandbox_ended
S=
alive alive_at_end
