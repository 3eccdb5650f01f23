#!/bin/bash
# Issue 14's first template, in the quick tier: a Dockerfile FROM
# debian:SUITE with RUN, COPY, ENV, WORKDIR, USER and `python3 -m
# http.server 8000` as its start command (CMD, ready on the EXPOSEd
# port), built through the API (POST /v1/templates with the context as
# a tar). SUITE is the one `base`'s prebuilt image is (its os-release),
# so the step cache is seeded from that image, which the builder shows
# to be the suite's (images/build-rootfs-debian --seed), and no
# mmdebstrap runs (the full tier builds trixie for real:
# tests/unit/unit_kilnd_templates.c). A sandbox of it answers on 8000
# through the ports proxy right after its create returns (the time from
# the create's answer to the first byte is printed), and the server's
# pid is the same in two sandboxes: it was snapshotted listening,
# nothing started it after the create.
# time limit: 420
. "$(dirname "$0")/lib.sh"
have_kvm || { fail deb_kvm "no KVM here: run it in tests/host/run"; exit 1; }
BASE=$REPO/build/guest/rootfs-base.ext4
[ -f "$BASE" ] || { fail deb_base_image "build/guest/rootfs-base.ext4 is missing: run 'make templates'"; exit 0; }
SUITE=$(debugfs -R 'cat /usr/lib/os-release' "$BASE" 2>/dev/null | sed -n 's/^VERSION_CODENAME=//p')
[ -n "$SUITE" ] || { fail deb_suite "rootfs-base.ext4's os-release names no VERSION_CODENAME"; exit 1; }

start_kilnd --rate 0 --domain deb.test || exit 1
KEY=$(new_key deb)
at_exit 'for s in ${A:-} ${B:-}; do api DELETE /v1/sandboxes/$s; done'
CTX=$T/ctx
mkdir -p "$CTX"
echo served-from-snapshot > "$CTX/index.html"
printf '%s\n' "FROM debian:$SUITE" \
	'RUN mkdir -p /srv/www && echo root-ran > /srv/www/ran.txt' \
	'COPY index.html /srv/www/' \
	'ENV GREETING=hello-env' \
	'WORKDIR /srv/www' \
	'USER user' \
	'RUN id -un > /home/user/who.txt && echo "$GREETING in $(pwd)" >> /home/user/who.txt' \
	'EXPOSE 8000' \
	'CMD ["python3", "-m", "http.server", "8000", "--directory", "/srv/www"]' > "$CTX/Dockerfile"
tar -C "$CTX" -cf "$T/ctx.tar" .
t0=$SECONDS
STATUS=$(curl -s -m 120 -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $KEY" \
	-H 'Content-Type: application/x-tar' --data-binary @"$T/ctx.tar" "$URL/v1/templates?name=pysrv")
BODY=$(cat "$T/body")
check deb_build_accepted "$STATUS $BODY" [ "$STATUS" = 202 ]
curl -sN -m 600 -H "Authorization: Bearer $KEY" "$URL/v1/templates/pysrv/logs?follow=1" > "$T/build.sse"
end=$(grep -A1 '^event: end' "$T/build.sse" | sed -n 's/^data: //p')
seeded=$(grep -o "FROM debian:$SUITE: build-rootfs-debian: $SUITE seeded from [^\"]*" "$T/build.sse" | head -1)
ok=0
[[ $end == *'"ready"'* ]] && [[ $seeded == *"seeded from $BASE: no mmdebstrap ("* ]] && ok=1
check deb_build "$((SECONDS - t0)) s; end $end; ${seeded:-$(grep -v '| ' "$T/build.sse" | tail -4 | tr '\n' ' ')}" [ $ok = 1 ]
# Where the build's time went: its steps' lines, each with the seconds
# since it began.
grep -o 'template [^ ]* \[[0-9]/[0-9]\] [^"]*' "$T/build.sse" | sed 's/^template [^ ]* /  /' | grep -v ' | ' | cut -c1-160
# The step cache's suite image: base's copy, relabelled, its builder's
# log without a line of mmdebstrap's (I: ...).
img=$(ls "$DATA"/templates/.cache/*.ext4 2>/dev/null | while read -r f; do [ "$(e2label "$f" 2>/dev/null)" = kiln-debian ] && echo "$f"; done | head -1)
check deb_cache_seeded "${img:-no kiln-debian image in the cache}: $(tail -1 "${img%.ext4}.log" 2>/dev/null)" \
	[ -n "$img" ] && ! grep -q '^I: ' "${img%.ext4}.log"

create_sandbox '{"template":"pysrv"}'
A=$SBX
t_created=$EPOCHREALTIME
api POST "/v1/sandboxes/$A/ports" '{"port":8000,"public":true}'
t_curl=$EPOCHREALTIME
fb=$(curl -s -m 30 -o "$T/page" -w '%{time_starttransfer}' "$URL/v1/sandboxes/$A/proxy/8000/index.html")
page=$(cat "$T/page")
ms=$(awk -v a="$t_created" -v b="$t_curl" -v s="$fb" 'BEGIN { printf "%.0f", (b - a + s) * 1000 }')
check deb_serves_at_once "'$page' ${ms} ms from the create's answer to the first byte (the port exposed in between)" \
	[ "$page" = served-from-snapshot ]
api POST "/v1/sandboxes/$A/exec" '{"cmd":"cat /srv/www/ran.txt /home/user/who.txt; echo $GREETING; pwd"}'
got=$(jget '" ".join(j["stdout"].split())')
check deb_steps "$got" [ "$got" = "root-ran user hello-env in /srv/www hello-env /srv/www" ]
create_sandbox '{"template":"pysrv"}'
B=$SBX
pid_of() { api POST "/v1/sandboxes/$1/exec" '{"cmd":"p=$(pidof python3); echo $p; ps -o user=,args= -p $p"}'; jget '" ".join(j["stdout"].split())'; }
pa=$(pid_of "$A") pb=$(pid_of "$B")
ok=0
[ -n "${pa%% *}" ] && [ "$pa" = "$pb" ] && [[ $pa == *"http.server 8000"* ]] && ok=1
check deb_from_snapshot "python3 (pid, user, command) '$pa' in $A, '$pb' in $B" [ $ok = 1 ]
echo "-- the file took $SECONDS s"
alive deb_alive
