#!/bin/bash
# Template builds: progress lines, a failed build leaves the version in
# service serving, a build resumes where it stopped, a new version is
# taken into service by a running kilnd, and sandboxes of the old one run on.
# tier: full: a slow file whose ground the quick tier covers otherwise (every kilnd test builds a template and reads its progress)
. "$(dirname "$0")/lib.sh"

"$KILND" --data "$DATA" template build minimal > "$T/b1.log" 2>&1
st=$?
steps=$(grep -o '\[[1-6]/6\] [a-z]*' "$T/b1.log" | awk '{ print $2 }' | sort -u | tr '\n' ' ')
[ "$st" = 0 ] && [ "$steps" = "activate boot image snapshot verify warm " ] &&
	pass build_progress "six steps reported: $steps" || fail build_progress "status $st: $(tail -3 "$T/b1.log" | tr '\n' ' ')"
[ "$(readlink "$DATA/templates/minimal/current")" = v1 ] && pass build_v1 "current -> v1" || fail build_v1 "$(ls -l "$DATA/templates/minimal")"
start_kilnd --rate 0 || exit 1
KEY=$(new_key tmpl)
create_sandbox
OLD=$SBX
[ -n "$OLD" ] && pass create_v1 "$OLD" || fail create_v1 "$BODY"

# A broken root image: the build fails at the root check, v1 stays.
head -c 16M /dev/zero > "$T/broken.ext4"
"$KILND" --data "$DATA" --boot-timeout 60000 template build minimal --image "$T/broken.ext4" > "$T/b2.log" 2>&1
st=$?
[ "$st" != 0 ] && grep -q 'the version in service is unchanged' "$T/b2.log" && [ "$(readlink "$DATA/templates/minimal/current")" = v1 ] &&
	pass build_failure_keeps_previous "status $st: $(tail -1 "$T/b2.log" | cut -c1-160)" || fail build_failure_keeps_previous "status $st: $(tail -2 "$T/b2.log")"
create_sandbox
[ -n "$SBX" ] && pass create_after_failed_build "$SBX from v1" || fail create_after_failed_build "$BODY"
api DELETE "/v1/sandboxes/$SBX"
check build_failed_no_vmm "VMMs beyond v1's zygote and $OLD: $(sandbox_vmms | wc -l)" [ "$(sandbox_vmms | wc -l)" = 1 ]
# Running it again resumes v2: the image step is not redone.
"$KILND" --data "$DATA" template build minimal > "$T/b3.log" 2>&1
grep -q 'resuming the build of version 2' "$T/b3.log" && grep -q '\[1/6\] image: done before' "$T/b3.log" &&
	pass build_resumes "version 2 resumed, image step skipped" || fail build_resumes "$(head -3 "$T/b3.log" | tr '\n' ' ')"
# --restart starts v2 over, with the good image: v2 in service.
"$KILND" --data "$DATA" template build minimal --restart > "$T/b4.log" 2>&1
st=$?
[ "$st" = 0 ] && [ "$(readlink "$DATA/templates/minimal/current")" = v2 ] && pass build_restart "v2 in service" ||
	fail build_restart "status $st: $(tail -2 "$T/b4.log")"
api GET /v1/templates
[ "$(jget '[t["version"] for t in j["templates"] if t["name"] == "minimal"][0]')" = 2 ] && pass templates_v2 "kilnd serves v2" || fail templates_v2 "$BODY"
create_sandbox
NEW=$SBX
api POST "/v1/sandboxes/$OLD/exec" '{"cmd":"echo old"}'
old_ok=$(jget 'j["stdout"]')
api POST "/v1/sandboxes/$NEW/exec" '{"cmd":"echo new"}'
[ "$old_ok" = old ] && [ "$(jget 'j["stdout"]')" = new ] && pass old_and_new_versions "a v1 sandbox runs on beside a v2 one" ||
	fail old_and_new_versions "old '$old_ok', new $BODY"
zyg=$(for z in "$DATA"/templates/minimal/v*/zygote.pid; do p=$(cut -d' ' -f1 "$z"); kill -0 "$p" 2>/dev/null && echo "$z"; done)
[ "$(wc -l <<<"$zyg")" = 1 ] && grep -q /v2/ <<<"$zyg" && pass old_zygote_stopped "only v2's zygote runs" || fail old_zygote_stopped "$zyg"
# Another build while one runs is refused.
"$KILND" --data "$DATA" template build minimal --restart > "$T/b5.log" 2>&1 &
B5=$!
sleep 0.3
"$KILND" --data "$DATA" template build minimal > "$T/b6.log" 2>&1
st=$?
wait $B5
[ "$st" != 0 ] && grep -q 'another build' "$T/b6.log" && pass build_exclusive "$(tail -1 "$T/b6.log")" || fail build_exclusive "status $st: $(cat "$T/b6.log")"
api DELETE "/v1/sandboxes/$OLD"
api DELETE "/v1/sandboxes/$NEW"
alive alive_at_end
