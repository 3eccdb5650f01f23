#!/bin/bash
# A template that starts a server before its snapshot (docs/templates.md
# "Start command"): `kilnd template build srv --start CMD --ready-port
# 8000` boots the image, starts CMD in the background, waits until
# something listens on 8000, then snapshots, and checks in a new sandbox
# that the port answers. A sandbox of it answers on that port through the
# proxy right after its create returns (the time to the first byte is
# printed), and the server's pid is the same in two sandboxes: it came
# with the snapshot, nothing started it. A start command that exits, or
# that never listens, fails the build with its output, and nothing of it
# is put in service; options that make no sense are refused. An app of
# the template needs no command (docs/api.md "Apps"); one of a template
# whose sandboxes run nothing on the port is a 504.
# A template from a Dockerfile (docs/templates.md "Building from a
# Dockerfile"): FROM kiln/minimal, ENV, WORKDIR, COPY of a context file,
# RUNs using the ENV (with no network device but lo), and CMD + EXPOSE as the server started before the
# snapshot; a sandbox has the files, the env, the cwd and the server. A
# rebuild whose last RUN is changed (to one that fails) takes the earlier
# steps from the cache (the build log says so), fails naming the step,
# its line and its output, and the version in service goes on serving.
# The context has a .dockerignore (secret.txt and **/*.bak are not the
# build's: not copied, and changing secret.txt keeps COPY's cache), COPY
# takes wildcards (*.txt docs/*.txt), ADD unpacks a .tar.gz whose files
# come before their directories (or with none listed). The API's upload
# of it is a tar listing files before their directory.
# time limit: 900 (the full tier adds four builds in build VMs and a snapshot: it hit the default 420 s in a loaded emulated host)
. "$(dirname "$0")/lib.sh"
have_kvm || { fail tstart_kvm "no KVM here: run it in tests/host/run"; exit 1; }
MIN=$REPO/build/guest/rootfs-minimal.ext4
SRV='mkdir -p /w && echo pre > /w/index.html && exec httpd -f -p 8000 -h /w'

"$KILND" --data "$DATA" template build srv --image "$MIN" --start "$SRV" --ready-port 8000 > "$T/srv.log" 2>&1
st=$?
if [ "$st" = 0 ] && grep -q "listens on port 8000" "$T/srv.log" && grep -q "port 8000 answers in a new sandbox" "$T/srv.log"; then
	pass tstart_build "$(grep -o 'listens on port 8000[^)]*)' "$T/srv.log" | head -1); $(tail -1 "$T/srv.log")"
else
	fail tstart_build "status $st: $(tail -4 "$T/srv.log" | tr '\n' ' ')"; exit 1
fi
m=$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j.get("start"), j.get("ready_port"))' "$DATA/templates/srv/v1/manifest.json")
check tstart_manifest "$m" [ "$m" = "$SRV 8000" ]

# The two failing builds run at once (each its own template and build VM).
"$KILND" --data "$DATA" template build slow --image "$MIN" --start 'echo waiting; sleep 1000' --ready-port 8001 --ready-timeout 3 > "$T/slow.log" 2>&1 &
slow=$!
"$KILND" --data "$DATA" template build bad --image "$MIN" --start 'echo nope; exit 3' --ready-port 8000 > "$T/bad.log" 2>&1
st=$?
[ "$st" != 0 ] && grep -q "step warm failed: the start command exited with status 3; its output .*nope" "$T/bad.log" &&
	[ ! -e "$DATA/templates/bad/current" ] && pass tstart_exits "$(tail -1 "$T/bad.log" | cut -c1-200)" ||
	fail tstart_exits "status $st: $(tail -2 "$T/bad.log")"
wait $slow
st=$?
[ "$st" != 0 ] && grep -q "did not listen on port 8001 within 3 s; its output .*waiting" "$T/slow.log" &&
	[ ! -e "$DATA/templates/slow/current" ] && pass tstart_never_listens "$(tail -1 "$T/slow.log" | cut -c1-200)" ||
	fail tstart_never_listens "status $st: $(tail -2 "$T/slow.log")"
# From a Dockerfile: the steps run in a build VM, each step's disk kept
# as a layer in the step cache, the root written out; then the usual
# boot, start (CMD, ready on the EXPOSEd port), snapshot, verify.
CTX=$T/ctx
mkdir -p "$CTX/docs"
echo from-context > "$CTX/greeting.txt"
echo notes > "$CTX/docs/notes.txt"
echo secret-v1 > "$CTX/secret.txt"
echo old > "$CTX/docs/old.bak"
# Symlinks are kept as symlinks below a COPY's source and in an ADDed
# tar; one pointing at a host file out of the context arrives as that
# link, the file never read (the guest has no such file).
mkdir -p "$CTX/docs/sub"
echo host-secret > "$T/host-secret"
ln -s ../../greeting.txt "$CTX/docs/sub/in"
ln -s "$T/host-secret" "$CTX/docs/sub/out"
printf '%s\n' '# not the build'"'"'s' secret.txt '**/*.bak' > "$CTX/.dockerignore"
python3 - "$CTX/site.tar.gz" <<'PY'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w:gz") as t:
    for name, data in (("site/sub/deep.txt", b"deep\n"), ("top.txt", b"top\n")):
        i = tarfile.TarInfo(name); i.size = len(data); t.addfile(i, io.BytesIO(data))
    i = tarfile.TarInfo("site"); i.type = tarfile.DIRTYPE; i.mode = 0o755; t.addfile(i)
    for name, to in (("site/ln", "../top.txt"), ("site/abs", "/etc/hostname")):
        i = tarfile.TarInfo(name); i.type = tarfile.SYMTYPE; i.linkname = to; t.addfile(i)
PY
dockerfile() {
	printf '%s\n' 'FROM kiln/minimal' 'ENV GREETING=hi' 'WORKDIR /app' 'COPY --chmod=600 *.txt docs/* ./' 'ADD site.tar.gz /srv/' \
		'RUN test "$(ls /sys/class/net)" = lo && echo "$GREETING from run in $(pwd)" > ran.txt && mkdir -p /w && echo dock > /w/index.html' \
		'EXPOSE 8000' 'CMD ["httpd", "-f", "-p", "8000", "-h", "/w"]' "$1" > "$CTX/Dockerfile"
}
dockerfile 'RUN echo last-v1 > /app/last.txt'
"$KILND" --data "$DATA" template build dock --dockerfile "$CTX" > "$T/dock.log" 2>&1
st=$?
if [ "$st" = 0 ] && grep -q "5 steps: 0 cached, 5 run" "$T/dock.log" && grep -q "port 8000 answers in a new sandbox" "$T/dock.log"; then
	pass df_build "$(grep -o '5 steps[^(]*' "$T/dock.log" | head -1); $(tail -1 "$T/dock.log")"
else
	fail df_build "status $st: $(grep -v '^step' "$T/dock.log" | tail -4 | tr '\n' ' ')"
fi
# The last RUN changed, to one that fails: the four steps before it come
# from the cache (an ignored file changed too), it fails with its output,
# version 1 stays in service.
dockerfile 'RUN echo about to fail; ls /nonexistent-dir; exit 3'
echo secret-v2 > "$CTX/secret.txt"
"$KILND" --data "$DATA" template build dock --dockerfile "$CTX" > "$T/dock2.log" 2>&1
st=$?
nc=$(grep -c "cached: " "$T/dock2.log")
[ "$st" != 0 ] && [ "$nc" = 4 ] && grep -q "step 9/9 (line 9, RUN) exited with status 3; the end of its output: about to fail .*nonexistent-dir" "$T/dock2.log" &&
	grep -q "^step 9/9 | about to fail" "$T/dock2.log" && [ "$(readlink "$DATA/templates/dock/current")" = v1 ] &&
	pass df_failed_run_cached_steps "$nc steps cached; $(tail -1 "$T/dock2.log" | cut -c1-240)" ||
	fail df_failed_run_cached_steps "status $st, $nc cached: $(tail -3 "$T/dock2.log" | tr '\n' ' ')"
# --disk (docs/templates.md "Disk size"): refused with --image and
# --no-snapshot (the template VM grows an --image's filesystem, in the
# layer the snapshot keeps) and under its floor; in the full tier an
# --image of minimal's 64 MiB root with --disk 256 builds (the log says the
# root filesystem takes the disk) and its sandbox's / is 256 MiB (below,
# once kilnd runs: minimal's 1 KiB-block ext4 shows 239535 1K-blocks of
# it); and (two build VMs) a RUN writing
# 100 MiB, more than minimal's image has free, fails without it and
# passes with --disk 512, whose root filesystem is then 512 MiB (in the
# build VM's df, and the image's superblock).
out=$("$KILND" --data "$DATA" template build x --image "$MIN" --disk 512 --no-snapshot 2>&1)
[[ $out == *"--disk with --image"*"--no-snapshot discards"* ]] && pass tdisk_image_no_snapshot "$out" ||
	fail tdisk_image_no_snapshot "$out"
IMGDISK=
if full_only tdisk_image "a template VM, about 15 s"; then
	"$KILND" --data "$DATA" template build imgdisk --image "$MIN" --disk 256 > "$T/imgdisk.log" 2>&1
	st=$?
	[ "$st" = 0 ] && grep -q "the root filesystem takes the whole disk: 256 MiB (grow-fs: [0-9]* -> [0-9]* blocks of" "$T/imgdisk.log" && IMGDISK=1 &&
		pass tdisk_image_build "$(grep -m1 'whole disk' "$T/imgdisk.log")" ||
		fail tdisk_image_build "status $st: $(tail -3 "$T/imgdisk.log" | tr '\n' ' ')"
fi
out=$("$KILND" --data "$DATA" template build x --dockerfile "$CTX" --disk 8 2>&1)
[[ $out == *"--disk"*"8"* ]] && pass tdisk_floor "$out" || fail tdisk_floor "$out"
if full_only tdisk_grow "two build VMs, about 30 s"; then
	mkdir -p "$T/grow"
	printf '%s\n' 'FROM kiln/minimal' 'RUN dd if=/dev/zero of=/big bs=1M count=100 && sync && df -k / | tail -1' > "$T/grow/Dockerfile"
	"$KILND" --data "$DATA" template build ungrown --dockerfile "$T/grow" --no-snapshot > "$T/ungrown.log" 2>&1
	st=$?
	[ "$st" != 0 ] && grep -q "No space left" "$T/ungrown.log" && pass tdisk_default_full "$(grep -m1 'No space' "$T/ungrown.log")" ||
		fail tdisk_default_full "status $st: $(tail -3 "$T/ungrown.log" | tr '\n' ' ')"
	"$KILND" --data "$DATA" template build grown --dockerfile "$T/grow" --disk 512 --no-snapshot > "$T/grown.log" 2>&1
	st=$?
	kb=$(sed -n 's/^step 2\/2 | [^ ]* *\([0-9]*\) .*/\1/p' "$T/grown.log" | tail -1)
	blocks=$(dumpe2fs -h "$DATA/templates/grown/v1/root.ext4" 2>/dev/null | sed -n 's/^Block count: *//p')
	bsize=$(dumpe2fs -h "$DATA/templates/grown/v1/root.ext4" 2>/dev/null | sed -n 's/^Block size: *//p')
	mib=$(( ${blocks:-0} * ${bsize:-0} >> 20 ))
	[ "$st" = 0 ] && grep -q "the root filesystem takes the whole disk: 512 MiB (grow-fs: [0-9]* -> [0-9]* blocks of" "$T/grown.log" &&
		[ "${kb:-0}" -gt 450000 ] && [ "$mib" -ge 500 ] && [ "$mib" -le 512 ] &&
		[ "$(stat -c %s "$DATA/templates/grown/v1/root.ext4")" = $((512 << 20)) ] &&
		pass tdisk_grow "df in the build VM: $kb KiB; root.ext4's filesystem $mib MiB" ||
		fail tdisk_grow "status $st, df $kb KiB, fs $mib MiB: $(grep -v '^step 2/2 | ' "$T/grown.log" | tail -4 | tr '\n' ' ')"
fi
# --build-net (docs/templates.md "Network"): a bad CIDR refused; in the
# full tier (a build VM) the RUN steps of a build allowed 203.0.113.10
# reach its server in "the internet" (a namespace made here,
# tests/integration/upstream.sh) and not 192.0.2.2's, which the default
# policy would reach: the allow list is what holds.
out=$("$KILND" --data "$DATA" template build x --dockerfile "$CTX" --build-net 10.0.0.0/33 2>&1)
[[ $out == *"--build-net '10.0.0.0/33': want none, internet or CIDR"* ]] && pass tnet_bad_cidr "$out" || fail tnet_bad_cidr "$out"
# up88: "the internet" (once), with a server on 203.0.113.10 and 192.0.2.2;
# netctx: a Dockerfile whose RUN tries both and says what answered.
up88() {
	[ -n "${UP88:-}" ] && return 0
	UP88=1
	. "$REPO/tests/integration/upstream.sh"
	upstream kiln-t88-up kup88
	mkdir -p "$T/www" && echo kiln-upstream > "$T/www/index.html"
	ip netns exec kiln-t88-up python3 -m http.server 80 --directory "$T/www" >/dev/null 2>&1 &
	at_exit "kill $! 2>/dev/null"
	for i in $(seq 60); do [ "$(curl -s -m 5 http://203.0.113.10/)" = kiln-upstream ] && break; sleep 0.5; done
	mkdir -p "$T/netctx"
	printf '%s\n' 'FROM kiln/minimal' \
		'RUN a=$(echo GET / | nc -w 4 203.0.113.10 80 | head -1); b=$(echo GET / | nc -w 4 192.0.2.2 80 | head -1); echo "in:[$a] out:[$b] net:[$(ls /sys/class/net | tr "\n" " ")]" | tee /net.txt' \
		> "$T/netctx/Dockerfile"
}
if full_only tnet_build "a build VM, about 20 s"; then
	up88
	"$KILND" --data "$DATA" template build netb --dockerfile "$T/netctx" --build-net 203.0.113.10/32 --no-snapshot > "$T/netb.log" 2>&1
	st=$?
	line=$(grep -m1 '| in:\[' "$T/netb.log")
	[ "$st" = 0 ] && [[ $line == *"in:[kiln-upstream] out:[] net:[eth0 lo ]"* ]] &&
		grep -q "RUN steps on the network: 203.0.113.10/32" "$T/netb.log" && pass tnet_build "$line" ||
		fail tnet_build "status $st: ${line:-$(tail -3 "$T/netb.log" | tr '\n' ' ')}"
fi
out=$("$KILND" --data "$DATA" template build x --image "$MIN" --ready-port 80 2>&1)
[[ $out == *"give it"* ]] && pass tstart_port_without_start "$out" || fail tstart_port_without_start "$out"
out=$("$KILND" --data "$DATA" template build x --image "$MIN" --start true --no-snapshot 2>&1)
[[ $out == *"--no-snapshot"* ]] && pass tstart_no_snapshot "$out" || fail tstart_no_snapshot "$out"

start_kilnd --rate 0 --domain tstart.test --max-file 4194304 || exit 1
KEY=$(new_key tstart)
at_exit 'for s in ${A:-} ${B:-} ${D:-} ${W:-}; do api DELETE /v1/sandboxes/$s; done'
api GET /v1/templates
check tstart_listed_template "$(jget '[(t["name"], t["ready_port"]) for t in j["templates"] if t["start"]]')" \
	[ "$(jget '[(t["name"], t["start"], t["ready_port"]) for t in j["templates"] if t["start"] and t["name"] != "dock"]')" = "[('srv', '$SRV', 8000)]" ]
check df_listed "$(jget '[(t["name"], t["start"], t["ready_port"]) for t in j["templates"] if t["name"] == "dock"]')" \
	[ "$(jget '[(t["start"], t["ready_port"]) for t in j["templates"] if t["name"] == "dock"]')" = "[(\"exec 'httpd' '-f' '-p' '8000' '-h' '/w'\", 8000)]" ]
if [ -n "$IMGDISK" ]; then
	create_sandbox '{"template":"imgdisk"}'
	I=$SBX
	api POST "/v1/sandboxes/$I/exec" '{"cmd":"df -k / | tail -1"}'
	kb=$(jget 'j["stdout"].split()[1]')
	check tdisk_image_sandbox "df / of a sandbox of imgdisk (--image minimal --disk 256): ${kb} KiB" \
		[ "${kb:-0}" -gt 200000 -a "${kb:-0}" -le 262144 ]
	api DELETE "/v1/sandboxes/$I"
fi
# A sandbox of the Dockerfile's template (version 1).
create_sandbox '{"template":"dock"}'
D=$SBX
api POST "/v1/sandboxes/$D/exec" '{"cmd":"pwd; echo $GREETING; cat greeting.txt ran.txt last.txt; stat -c %a greeting.txt; wget -qO- http://127.0.0.1:8000/index.html; ls; cat /srv/site/sub/deep.txt /srv/top.txt; stat -c %a /srv"}'
got=$(jget '" ".join(j["stdout"].split())')
check df_sandbox "$got" [ "$got" = "/app hi from-context hi from run in /app last-v1 600 dock greeting.txt in last.txt notes.txt out ran.txt deep top 755" ]
api POST "/v1/sandboxes/$D/exec" '{"cmd":"for l in in out /srv/site/ln /srv/site/abs; do test -L $l && readlink $l; done; cat /srv/site/ln; cat out || echo out-unread"}'
got=$(jget '" ".join(j["stdout"].split())')
check df_symlinks "$got" [ "$got" = "../../greeting.txt $T/host-secret ../top.txt /etc/hostname top out-unread" ]
api DELETE "/v1/sandboxes/$D"
create_sandbox '{"template":"srv"}'
A=$SBX
t_created=$(date +%s.%N)
api POST "/v1/sandboxes/$A/ports" '{"port":8000,"public":true}'
body=$(curl -s -m 30 "$URL/v1/sandboxes/$A/proxy/8000/index.html")
ms=$(python3 -c "print(int(($(date +%s.%N) - $t_created) * 1000))")
check tstart_serves_at_once "'$body' $ms ms after the create answered (the port exposed in between)" [ "$body" = pre ]
create_sandbox '{"template":"srv"}'
B=$SBX
pid_of() { api POST "/v1/sandboxes/$1/exec" '{"cmd":"pidof httpd"}'; jget 'j["stdout"].strip()'; }
pa=$(pid_of "$A") pb=$(pid_of "$B")
check tstart_from_snapshot "httpd pid $pa in $A, $pb in $B" [ -n "$pa" -a "$pa" = "$pb" ]
api GET "/v1/sandboxes/$B/processes"
n=$(jget 'len([p for p in j["processes"] if "kiln-start.log" in p["command"] and p["status"] == "running"])')
check tstart_listed "processes of $B: $n running start command" [ "$n" = 1 ]
api GET "/v1/sandboxes/$B/files?path=/var/log/kiln-start.log"
check tstart_log "$STATUS, $(wc -c < "$T/body") bytes" [ "$STATUS" = 200 ]
# An app of it needs no command: its sandboxes run the server already.
api POST /v1/apps '{"name":"pre","template":"srv","port":8000}'
APP=$(jget 'j.get("id", "")')
got=$(curl -s -m 30 -H "Host: app-${APP#app_}.tstart.test:$PORT" "$URL/index.html")
check tstart_app_without_command "$STATUS, serves '$got'" [ "$STATUS" = 201 -a "$got" = pre ]
api POST /v1/apps '{"name":"none","template":"srv","port":8001,"ready_timeout_seconds":2}'
expect tstart_app_nothing_listens 504 timeout
api DELETE "/v1/apps/$APP"
# Templates through the API (docs/templates.md "Building through the
# API"): the same context as a tar upload (its steps come from the step
# cache) with a shape (2 vCPUs, 384 MiB), the log followed to its end, a
# sandbox of it of that shape; another
# workspace does not see it; bad uploads refused; a failing Dockerfile
# ends "failed" with its error and log; in use, it is not deleted.
t_api=$SECONDS
dockerfile 'RUN echo last-v1 > /app/last.txt'
tar -C "$CTX" --no-recursion -cf "$T/ctx.tar" ./docs/notes.txt ./docs/old.bak ./Dockerfile ./.dockerignore \
	./greeting.txt ./secret.txt ./site.tar.gz ./docs/sub/in ./docs/sub/out ./docs/sub ./docs
mkdir -p "$T/bad" && printf '%s\n' 'FROM kiln/minimal' 'RUN echo boom-output; exit 7' > "$T/bad/Dockerfile"
tar -C "$T/bad" -czf "$T/bad.tgz" .
upload() {	# upload FILE QUERY [KEY]
	STATUS=$(curl -s -m 120 -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer ${3:-$KEY}" \
		-H 'Content-Type: application/x-tar' --data-binary @"$1" "$URL/v1/templates?$2")
	BODY=$(cat "$T/body")
}
follow() { curl -sN -m 900 -H "Authorization: Bearer $KEY" "$URL/v1/templates/$1/logs?follow=1" > "$T/$1.sse"; }
ended() { grep -A1 '^event: end' "$T/$1.sse" | sed -n 's/^data: //p'; }
upload "$T/ctx.tar" "name=web&build_arg=UNUSED=1&vcpus=2&memory_mib=384"
check tapi_build_accepted "$STATUS $BODY" [ "$STATUS" = 202 -a "$(jget 'j["status"], j["name"]')" = "('building', 'web')" ]
# The CLI sends its directory as a gzipped tar.
out=$(KILN_API_URL=$URL KILN_API_KEY=$KEY "$KILN" template build "$T/bad" --name broken 2>&1); st=$?
check tapi_cli_build "exit $st: $out" [ "$st" = 0 ]
out=$(KILN_API_URL=$URL KILN_API_KEY=$KEY "$KILN" template build "$T/bad" --name Broken 2>&1); st=$?
check tapi_cli_bad_name "exit $st: $(head -1 <<<"$out")" [ "$st" = 2 ]
upload "$T/ctx.tar" "name=web"
expect tapi_build_while_building 409 conflict
upload "$T/ctx.tar" ""
expect tapi_no_name 400 invalid_request
upload "$T/ctx.tar" "name=Web/x"
expect tapi_bad_name 400 invalid_request
upload "$T/ctx.tar" "name=srv"
expect tapi_shared_name 409 conflict
echo 'not a tar at all' > "$T/nottar"
upload "$T/nottar" "name=nt"
expect tapi_not_tar 400 invalid_request
head -c 5000000 /dev/urandom > "$T/big"
upload "$T/big" "name=big"
expect tapi_over_size 413 payload_too_large
upload "$T/ctx.tar" "name=nodf&dockerfile=missing/Dockerfile"
expect tapi_no_dockerfile 400 invalid_request
upload "$T/ctx.tar" "name=dk&disk_mib=10"
expect tapi_disk_floor 400 invalid_request
check tapi_disk_floor_names "$BODY" grep -q "disk_mib '10': want a number of MiB from 64" "$T/body"
upload "$T/ctx.tar" "name=bn&build_net=10.0.0.0/33"
expect tapi_build_net_bad 400 invalid_request
upload "$T/ctx.tar" "name=vc&vcpus=9"
expect tapi_vcpus_bad 400 invalid_request
check tapi_vcpus_bad_names "$BODY" grep -q "vcpus '9': want a number of vCPUs from 1 to 8" "$T/body"
follow web & fw=$!
KILN_API_URL=$URL KILN_API_KEY=$KEY "$KILN" template logs broken -f > "$T/broken.sse" 2> "$T/broken.err"
st=$?
grep -q "ended: failed" "$T/broken.err" || st="$st (no end line)"
check tapi_cli_logs_follow "exit $st; $(cat "$T/broken.err")" [ "$st" = 1 ]
wait $fw
e=$(ended web)
check tapi_follow_to_end "end $e; $(grep -c '^event: line' "$T/web.sse") lines, $(grep -c 'cached: ' "$T/web.sse") steps cached" \
	[ "$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["status"])' "$e" 2>/dev/null)" = ready ]
api GET /v1/templates/web
one=$BODY
check tapi_get "$BODY" [ "$(jget 'j["status"], j["version"], j["versions"], j["size_bytes"] > 0, j["error"]')" = "('ready', 1, [1], True, None)" ]
api GET /v1/templates
check tapi_listed "$(jget '[t["name"] for t in j["templates"]]')" [ "$(jget '[t["name"] for t in j["templates"] if t["name"] in ("web", "broken")]')" = "['web']" ]
# One template's GET gives every field of its listing, the same (both
# are render_template's).
d=$(python3 -c 'import json,sys; g=json.loads(sys.argv[1]); l=[t for t in json.loads(sys.argv[2])["templates"] if t["name"]=="web"]; l=l[0] if l else {"listed": "no"}; print({k: (l[k], g.get(k, "(none)")) for k in l if g.get(k, "(none)") != l[k]})' "$one" "$BODY" 2>&1)
check tapi_get_as_listed "fields that differ (listed, GET): $d" [ "$d" = "{}" ]
create_sandbox '{"template":"web"}'
W=$SBX
api POST "/v1/sandboxes/$W/exec" '{"cmd":"cat /app/last.txt /app/notes.txt; wget -qO- http://127.0.0.1:8000/index.html; readlink /app/out"}'
got=$(jget '" ".join(j["stdout"].split())')
api GET "/v1/sandboxes/$W"
check tapi_sandbox "'$got', template $(jget 'j["template"]')" [ "$got" = "last-v1 notes dock $T/host-secret" -a "$(jget 'j["template"]')" = web ]
shape=$(jget 'j["vcpus"], j["memory_mib"]')
api POST "/v1/sandboxes/$W/exec" '{"cmd":"grep -c ^processor /proc/cpuinfo; sed -n \"s/^MemTotal: *\\([0-9]*\\) kB/\\1/p\" /proc/meminfo"}'
read -r np mem <<<"$(jget '" ".join(j["stdout"].split())')"
check tapi_shape "sandbox $shape; the guest: $np CPUs, MemTotal ${mem:-?} kB; log: $(grep -o 'version [0-9]*: [0-9]* vCPUs and [0-9]* MiB' "$T/web.sse" | head -1)" \
	[ "$shape" = "(2, 384)" -a "$np" = 2 ] && [ "${mem:-0}" -gt $((300 << 10)) -a "${mem:-0}" -le $((384 << 10)) ]
KEY2=$(new_key tstart-other)
STATUS=$(curl -s -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $KEY2" "$URL/v1/templates/web")
s1=$STATUS
STATUS=$(curl -s -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $KEY2" -H 'Content-Type: application/json' \
	--data-binary '{"template":"web"}' "$URL/v1/sandboxes")
s2=$STATUS
curl -s -o "$T/body" -H "Authorization: Bearer $KEY2" "$URL/v1/templates"
check tapi_other_workspace "get $s1, create $s2, listed: $(jget '[t["name"] for t in j["templates"]]')" \
	[ "$s1" = 404 -a "$s2" = 404 -a "$(jget '"web" in [t["name"] for t in j["templates"]]')" = False ]
e=$(tail -1 "$T/broken.err")
api GET /v1/templates/broken
err=$(jget 'j["error"]')
curl -s -o "$T/broken.log" -H "Authorization: Bearer $KEY" "$URL/v1/templates/broken/logs"
ok=0
[ "$(jget 'j["status"]')" = failed ] && [[ $err == *"exited with status 7"*boom-output* ]] && grep -q boom-output "$T/broken.log" &&
	grep -q boom-output "$T/broken.sse" && ! grep -q 'w[0-9a-f]\{10\}_' "$T/broken.log" && ok=1
check tapi_failed "end $e; error: $err" [ $ok = 1 ]
api DELETE /v1/templates/web
expect tapi_delete_in_use 409 conflict
check tapi_delete_in_use_names "$(jget 'j["error"]["message"]')" grep -q "$W" "$T/body"
api DELETE /v1/templates/base
expect tapi_delete_builtin 403 forbidden
# Versions (docs/templates.md "Versions"): a new version while a sandbox
# sits on v1 keeps v1's files; they go with the last sandbox on them.
# The plan's template limits (docs/templates.md "Limits") checked around
# that build with no build of their own: with template_builds 1 the
# rebuild of web starts and a second build while it runs is 429; with
# templates 2 (web and broken exist) a third name is 429, and a rebuild
# of web would not be refused (it is no new template).
wsplan() { "$KILND" --data "$DATA" workspace plan tstart enterprise "$1" > "$T/wsplan.out" 2>&1 || cat "$T/wsplan.out"; }
wsplan '{"template_builds": 1}'
upload "$T/ctx.tar" "name=web"
s1=$STATUS
upload "$T/bad.tgz" "name=third"
check tlimit_builds "$s1 then $STATUS $BODY" [ "$s1" = 202 -a "$STATUS" = 429 -a \
	"$(jget 'j["error"]["code"], j["error"]["limit"], j["error"]["value"], j["error"]["plan"]')" = "('limit_exceeded', 'template_builds', 1, 'enterprise')" ]
wsplan '{"templates": 2}'
upload "$T/bad.tgz" "name=third"
check tlimit_templates "$STATUS $BODY" [ "$STATUS" = 429 -a "$(jget 'j["error"]["limit"], j["error"]["value"]')" = "('templates', 2)" ]
check tlimit_message "$(jget 'j["error"]["message"]')" grep -q "has 2 templates, the most plan enterprise allows (templates 2)" "$T/body"
# build_seconds 1 (full tier: it boots a build VM): the build is past it
# by the time its VM is up, so its RUN is not run.
if full; then
	wsplan '{"build_seconds": 1}'
	upload "$T/bad.tgz" "name=slow1"
	s_slow=$STATUS
fi
wsplan '{}'
follow web
TW=$(ls -d "$DATA"/templates/w*_web)
api GET /v1/templates/web
check tapi_v2_keeps_v1 "$(ended web); current $(readlink "$TW/current"), dirs $(cd "$TW" && echo v*), versions $(jget 'j["versions"]')" \
	[ "$(readlink "$TW/current")" = v2 -a -d "$TW/v1" -a "$(jget 'j["versions"]')" = "[1, 2]" ]
api DELETE "/v1/sandboxes/$W"
W=
api GET /v1/templates/web
check tapi_v1_collected "dirs $(cd "$TW" && echo v*), versions $(jget 'j["versions"]')" \
	[ ! -e "$TW/v1" -a -d "$TW/v2" -a "$(jget 'j["versions"]')" = "[2]" ]
if full; then
	follow slow1
	e=$(ended slow1)
	ok=0
	[ "$s_slow" = 202 ] && [[ $e == *'"failed"'*"as long as its plan allows (build_seconds"* ]] &&
		! grep -q "| boom-output" "$T/slow1.sse" && ok=1
	check tlimit_build_seconds "$s_slow; end $e" [ $ok = 1 ]
	api DELETE /v1/templates/slow1
fi
api DELETE /v1/templates/web
s1=$STATUS
api DELETE /v1/templates/broken
s2=$STATUS
api GET /v1/templates/web
check tapi_deleted "delete $s1, $s2; then get $STATUS; templates: $(ls "$DATA/templates" | tr '\n' ' '); builds: $(ls -A "$DATA/templates/.builds" | tr '\n' ' ')" \
	[ "$s1" = 204 -a "$s2" = 204 -a "$STATUS" = 404 -a -z "$(ls "$DATA/templates/.builds")" ]
# build_net and disk_mib through the API, end to end (full tier: a build
# VM, a snapshot and a sandbox, about a minute): the RUN reaches the
# allowed 203.0.113.10 and not 192.0.2.2, and a sandbox of the template
# has the 512 MiB root (minimal's is 64 MiB).
if full_only tapi_net_disk "a build VM and a snapshot, about a minute"; then
	up88
	tar -C "$T/netctx" -cf "$T/netctx.tar" .
	upload "$T/netctx.tar" "name=netdisk&disk_mib=512&build_net=203.0.113.10/32"
	s1=$STATUS
	follow netdisk
	e=$(ended netdisk)
	line=$(grep -m1 '| in:\[' "$T/netdisk.sse" | sed 's/.*| //; s/".*//')
	ok=0
	[ "$s1" = 202 ] && [[ $e == *'"ready"'* ]] && grep -q "RUN steps on the network: 203.0.113.10/32" "$T/netdisk.sse" &&
		grep -q "the root filesystem takes the whole disk: 512 MiB" "$T/netdisk.sse" &&
		[[ $line == "in:[kiln-upstream] out:[] net:[eth0 lo ]"* ]] && ok=1
	check tapi_build_net_disk "$s1; end $e; RUN: $line" [ $ok = 1 ]
	create_sandbox '{"template":"netdisk"}'
	N=$SBX
	at_exit 'api DELETE /v1/sandboxes/${N:-none}'
	api POST "/v1/sandboxes/$N/exec" '{"cmd":"df -k / | tail -1; cat /net.txt"}'
	kb=$(jget 'j["stdout"].split("\n")[0].split()[1]')
	got=$(jget 'j["stdout"].split("\n")[1]')
	check tapi_net_disk_sandbox "df / ${kb} KiB; /net.txt: $got" \
		[ "${kb:-0}" -gt 450000 -a "${kb:-0}" -le 524288 -a "${got%% net:*}" = "in:[kiln-upstream] out:[]" ]
	api DELETE "/v1/sandboxes/$N"
	N=
	api DELETE /v1/templates/netdisk
	expect tapi_net_disk_deleted 204 -
fi
echo "-- the API's template cases took $((SECONDS - t_api)) s"
alive tstart_alive
