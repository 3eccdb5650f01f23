#!/bin/bash
# The base template (Debian bookworm): it builds from build/guest/
# rootfs-base.ext4 (make templates), and a sandbox has python3, pip, git,
# curl, ca-certificates and a C compiler that works.
. "$(dirname "$0")/lib.sh"

if [ ! -f "$REPO/build/guest/rootfs-base.ext4" ]; then
	fail base_image "build/guest/rootfs-base.ext4 is missing: run 'make templates'"
	exit 0
fi
build_template base || exit 1
pass base_build "$(tail -1 "$T/build-base.log")"
start_kilnd --rate 0 || exit 1
KEY=$(new_key base)
create_sandbox '{"template":"base"}'
B=$SBX
[ -n "$B" ] && pass base_create "$B ready in $(jget 'round(j["ready_ms"], 1)') ms, $(jget 'j["vcpus"]') vCPUs, $(jget 'j["memory_mib"]') MiB" ||
	{ fail base_create "$BODY"; exit 1; }
api POST "/v1/sandboxes/$B/exec" "{\"cmd\":\"python3 -c 'print(6*7)'\"}"
[ "$(jget 'j["stdout"]')" = 42 ] && pass base_python "python3 prints 42" || fail base_python "$BODY"
api POST "/v1/sandboxes/$B/exec" '{"cmd":"pip --version && git --version && curl --version | head -1 && test -s /etc/ssl/certs/ca-certificates.crt && grep -q bookworm /etc/os-release && echo tools-ok"}'
[ "$(jget 'j["stdout"].strip().splitlines()[-1]')" = tools-ok ] && pass base_tools "$(jget 'j["stdout"].splitlines()[1]')" || fail base_tools "$BODY"
api POST "/v1/sandboxes/$B/exec" '{"cmd":"printf \"#include <stdio.h>\\nint main(void){puts(\\\"compiled\\\");return 0;}\\n\" > /tmp/t.c && cc -O2 -o /tmp/t /tmp/t.c && /tmp/t","timeout_seconds":300}'
[ "$(jget 'j["stdout"]')" = compiled ] && pass base_compiler "cc builds and runs a program" || fail base_compiler "$BODY"
api POST "/v1/sandboxes/$B/fork" '{"count":1}'
if [ "$STATUS" = 201 ]; then
	K=$(jget 'j["sandboxes"][0]["id"]')
	api POST "/v1/sandboxes/$K/exec" "{\"cmd\":\"python3 -c 'print(6*7)'\"}"
	[ "$(jget 'j["stdout"]')" = 42 ] && pass base_fork "the fork runs python3 too" || fail base_fork "$BODY"
	api DELETE "/v1/sandboxes/$K"
else
	fail base_fork "fork: $STATUS $BODY"
fi
api POST "/v1/sandboxes/$B/exec" "{\"cmd\":\"python3 -c 'print(6*7)'\"}"
[ "$(jget 'j["stdout"]')" = 42 ] && pass base_after_fork "the parent runs on" || fail base_after_fork "$BODY"
api DELETE "/v1/sandboxes/$B"
alive alive_at_end
