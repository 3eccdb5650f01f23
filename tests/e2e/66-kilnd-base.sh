#!/bin/bash
# The base template (Debian bookworm): it builds from build/guest/
# rootfs-base.ext4 (make templates), and a sandbox has python3, pip, git,
# curl, ca-certificates and a C compiler that works; the code interpreter
# (POST .../code) keeps its variables, and forks and snapshots carry them;
# a named volume is mounted where the create says. The code-interpreter
# template (base and numpy, pandas, matplotlib, node) has its interpreter
# running in its snapshot: the first cell's time beside base's, a plot's
# PNG, a DataFrame's table, a javascript context's globals (top-level await too),
# per-cell envs in every language, a dead context
# or interpreter back with its preloads.
# time limit: 900 (alone, it builds base and code-interpreter first: 213 s of 427 in an emulated host)
# tier: full: a slow file whose ground the quick tier covers otherwise (the SDK tests and scripts/demo run base sandboxes (python3, the code interpreter, forks))
. "$(dirname "$0")/lib.sh"

if [ ! -f "$REPO/build/guest/rootfs-base.ext4" ]; then
	fail base_image "build/guest/rootfs-base.ext4 is missing: run 'make templates'"
	exit 0
fi
build_template base || exit 1
pass base_build "$(tail -1 "$T/build-base.log")"
# Before kilnd: a build under the run's template cache stops the zygotes there.
CI=
if [ ! -f "$REPO/build/guest/rootfs-code-interpreter.ext4" ]; then
	fail ci_image "build/guest/rootfs-code-interpreter.ext4 is missing: run 'make templates'"
elif t0=$EPOCHREALTIME && build_template code-interpreter; then
	CI=1
	pass ci_build "built or reused in $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }') s"
fi
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
api POST "/v1/sandboxes/$B/exec" '{"cmd":"id -un; echo $HOME; python3 -c \"import os; print(os.getuid())\"; touch ~/mine && echo wrote","user":"user"}'
check base_user "as user: $(jget 'j["stdout"]' | tr '\n' ' ')" [ "$(jget 'j["stdout"]')" = $'user\n/home/user\n1000\nwrote' ]
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

# ---- a named volume mounts in base too (its mount(8): the `mount` package) -----------------------
api POST /v1/volumes '{"name":"basevol","size_mib":16}'
VOL=$(jget 'j["id"]')
[ "$STATUS" = 201 ] && at_exit "api DELETE /v1/volumes/$VOL" || fail base_volume_create "$STATUS $BODY"
create_sandbox '{"template":"base","volumes":[{"name":"basevol","path":"/data"}]}'
V=$SBX
api POST "/v1/sandboxes/$V/exec" '{"cmd":"grep \" /data \" /proc/mounts | cut -d\" \" -f2,3,4 | cut -d, -f1; echo kept > /data/f && sync && cat /data/f"}'
check base_volume_mounted "$V: $(jget 'j["stdout"]' | tr '\n' ' ')$(jget 'j["stderr"]')" [ "$(jget 'j["stdout"]')" = $'/data ext4 rw\nkept' ]
api DELETE "/v1/sandboxes/$V"
api DELETE "/v1/volumes/$VOL"
check base_volume_deleted "$STATUS" [ "$STATUS" = 204 ]

# ---- the code interpreter: state in the guest's memory, so forks and snapshots carry it ----------
t0=$EPOCHREALTIME
api POST "/v1/sandboxes/$B/code" '{"code":"x = 41\nprint(\"set\")"}'
first=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
st=$STATUS set=$(jget 'j["stdout"] == "set\n" and j["error"] is None and j["execution_count"] == 1')
api POST "/v1/sandboxes/$B/code" '{"code":"x + 1"}'
plus=$(jget 'j["results"][0]["text"] == "42" and j["results"][0]["is_main_result"]')
check code_state "first call (starts the interpreter) $st in ${first} s, stdout and count right: $set; then x + 1 is 42: $plus" \
	eval '[ "$st" = 200 ] && [ "$set" = True ] && [ "$plus" = True ]'
api POST "/v1/sandboxes/$B/fork" '{"count":1}'
K=$(jget 'j["sandboxes"][0]["id"]')
api POST "/v1/sandboxes/$K/code" '{"code":"x += 1\nx"}'
kid=$(jget 'j["results"][0]["text"]')
api POST "/v1/sandboxes/$B/code" '{"code":"x"}'
mine=$(jget 'j["results"][0]["text"]')
check code_fork "the child's x + 1: $kid; the parent's x: $mine" eval '[ "$kid" = 42 ] && [ "$mine" = 41 ]'
api DELETE "/v1/sandboxes/$K"
api POST "/v1/sandboxes/$B/snapshot"
SNAP=$(jget 'j["id"]')
create_sandbox "{\"from_snapshot\":\"$SNAP\"}"
S=$SBX
api POST "/v1/sandboxes/$S/code" '{"code":"x * 2"}'
twice=$(jget 'j["results"][0]["text"]')
check code_snapshot "a sandbox from a snapshot: x * 2 = $twice" [ "$twice" = 82 ]
api DELETE "/v1/sandboxes/$S"
api POST "/v1/sandboxes/$B/code" '{"code":"1","context":"ctx-nope"}'
expect code_unknown_context 404 not_found
api POST "/v1/sandboxes/$B/code" '{"code":"1","language":"cobol"}'
expect code_bad_language 400 invalid_request
api POST "/v1/sandboxes/$B/code" '{}'
expect code_missing 400 invalid_request
# envs: the cell's environment variables (what it starts has them too), gone in the next cell;
# a value is data, never shell code (a quote, a $).
Q="it's \$HOME"
api POST "/v1/sandboxes/$B/code" '{"code":"import os, subprocess; (os.environ.get(\"KE\"), subprocess.run([\"sh\", \"-c\", \"echo $KE\"], capture_output=True, text=True).stdout)","envs":{"KE":"v 1"}}'
py1=$(jget 'j["results"][0]["text"] if j["results"] else j["error"]')
api POST "/v1/sandboxes/$B/code" '{"code":"import os; os.environ.get(\"KE\", \"unset\")"}'
py2=$(jget 'j["results"][0]["text"] if j["results"] else j["error"]')
api POST "/v1/sandboxes/$B/code" '{"code":"export KB=kept; echo \"[$KE] [$KB]\"; sh -c '"'"'echo \"<$KE>\"'"'"'","language":"bash","envs":{"KE":"it'"'"'s $HOME","KB":"cell"}}'
sh1=$(jget 'j["stdout"].replace("\n", " ")')
api POST "/v1/sandboxes/$B/code" '{"code":"echo \"[$KE] [$KB]\"; sh -c '"'"'echo \"<$KE>\"'"'"'","language":"bash"}'
sh2=$(jget 'j["stdout"].replace("\n", " ")')
api POST "/v1/sandboxes/$B/code" '{"code":"echo \"[$KE]\"","language":"sh","envs":{"KE":"sh"}}'
sh3=$(jget 'j["stdout"].replace("\n", " ")')
api POST "/v1/sandboxes/$B/code" '{"code":"echo \"[$KE]\"","language":"sh"}'
sh4=$(jget 'j["stdout"].replace("\n", " ")')
check code_envs "python: $py1 then $py2; bash: $sh1 then $sh2 (a variable the cell exported over its envs goes back); sh: $sh3 then $sh4" \
	eval '[ "$py1" = "('"'"'v 1'"'"', '"'"'v 1\\n'"'"')" ] && [ "$py2" = "'"'"'unset'"'"'" ] &&
	      [ "$sh1" = "[$Q] [kept] <$Q> " ] && [ "$sh2" = "[] [] <> " ] && [ "$sh3" = "[sh] " ] && [ "$sh4" = "[] " ]'
api POST "/v1/sandboxes/$B/code" '{"code":"1","envs":{"1BAD":"x"}}'
expect code_envs_bad_name 400 invalid_request
msg=$(jget 'j["error"]["message"]')
check code_envs_bad_name_said "$msg" eval '[[ "$msg" == *"'"'"'1BAD'"'"' is not a variable name"* ]]'
api POST "/v1/sandboxes/$B/code" '{"code":"1","envs":{"A":1}}'
expect code_envs_bad_value 400 invalid_request

# ---- code-interpreter: the interpreter runs in the snapshot, numpy, pandas and matplotlib imported --
# (A fork keeping a context's state is code_fork above, and the SDK tests.)
if [ -n "$CI" ]; then
	create_sandbox '{"template":"code-interpreter"}'
	C=$SBX
	t0=$EPOCHREALTIME
	api POST "/v1/sandboxes/$C/code" '{"code":"x = 41\nprint(\"set\")"}'
	cfirst=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
	set=$(jget 'j["stdout"] == "set\n" and j["error"] is None and j["execution_count"] == 1')
	t0=$EPOCHREALTIME
	api POST "/v1/sandboxes/$C/code" '{"code":"import numpy as np, pandas as pd, matplotlib.pyplot as plt\nx + 1"}'
	imp=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
	plus=$(jget 'j["results"][0]["text"] if j["error"] is None else j["error"]')
	check ci_first_run "the same first cell: code-interpreter ${cfirst} s, base ${first} s; then importing numpy, pandas, pyplot and x + 1: ${imp} s, $plus" \
		eval '[ "$set" = True ] && [ "$plus" = 42 ]'
	api POST "/v1/sandboxes/$C/code" '{"code":"plt.plot([1, 2, 3], [4, 1, 9])\nplt.title(\"kiln\")\nNone"}'
	png=$(jget '(lambda b: "%s %d %dx%d" % (b[:8] == b"\x89PNG\r\n\x1a\n", len(b), *__import__("struct").unpack(">II", b[16:24])))(__import__("base64").b64decode([r for r in j["results"] if r.get("png")][0]["png"]))')
	check ci_plot_png "a matplotlib plot: PNG header, bytes, size: $png" \
		eval '[ "${png%% *}" = True ] && [ "${png##* }" = 640x480 ] && n=${png#* } && n=${n%% *} && [ "$n" -gt 5000 ] && [ "$n" -lt 2000000 ]'
	api POST "/v1/sandboxes/$C/code" '{"code":"pd.DataFrame({\"a\": [1, 2], \"b\": [3.5, 4.5]})"}'
	table=$(jget '"<table" in j["results"][0]["html"] and "<th>b</th>" in j["results"][0]["html"] and j["results"][0]["text"].split() == ["a", "b", "0", "1", "3.5", "1", "2", "4.5"]')
	check ci_dataframe "a DataFrame's result: an HTML table and the text one: $table" [ "$table" = True ]
	# javascript (node, in this template) keeps its globals; an exception is structured.
	api POST "/v1/sandboxes/$C/code" '{"code":"var jx = 20; const jy = 2; console.log(\"js\")","language":"javascript"}'
	js1=$(jget 'j["stdout"] == "js\n" and j["error"] is None')
	api POST "/v1/sandboxes/$C/code" '{"code":"jx * jy + 2","language":"js"}'
	js2=$(jget 'j["results"][0]["text"] if j["results"] else j["error"]')
	api POST "/v1/sandboxes/$C/code" '{"code":"null.x","language":"javascript"}'
	js3=$(jget '"%s %s" % (j["error"]["name"], "<cell-" in j["error"]["traceback"])')
	check ci_javascript "node context: globals kept ($js2), an exception: $js3" \
		eval '[ "$js1" = True ] && [ "$js2" = 42 ] && [ "$js3" = "TypeError True" ]'
	# Top-level await: the last expression's value, and declarations that last to the next cell.
	api POST "/v1/sandboxes/$C/code" '{"code":"let ja = await new Promise(r => setTimeout(() => r(40), 10)); const jb = 2; await new Promise(r => setTimeout(() => r(ja + jb), 10))","language":"javascript"}'
	aw1=$(jget 'j["results"][0]["text"] if j["results"] else j["error"]')
	api POST "/v1/sandboxes/$C/code" '{"code":"ja + jb","language":"javascript"}'
	aw2=$(jget 'j["results"][0]["text"] if j["results"] else j["error"]')
	# envs in javascript: process.env and a child process, then gone.
	api POST "/v1/sandboxes/$C/code" '{"code":"[process.env.KJ, require(\"child_process\").execSync(\"echo $KJ\").toString()]","language":"javascript","envs":{"KJ":"js"}}'
	je1=$(jget 'j["results"][0]["text"] if j["results"] else j["error"]')
	api POST "/v1/sandboxes/$C/code" '{"code":"String(process.env.KJ)","language":"javascript"}'
	je2=$(jget 'j["results"][0]["text"] if j["results"] else j["error"]')
	check ci_javascript_await_envs "await: $aw1, then ja + jb: $aw2; envs: $je1, then $je2" \
		eval '[ "$aw1" = 42 ] && [ "$aw2" = 42 ] && [ "$je1" = "[ '"'"'js'"'"', '"'"'js\\n'"'"' ]" ] && [ "$je2" = "'"'"'undefined'"'"'" ]'
	# A context that dies is reported; the next cell has the preloads again.
	api POST "/v1/sandboxes/$C/code" '{"code":"import os; os._exit(3)"}'
	died=$(jget 'j["error"]["name"]')
	api POST "/v1/sandboxes/$C/code" '{"code":"import sys; (\"numpy\" in sys.modules, __import__(\"numpy\").ones(2).sum())"}'
	back=$(jget 'j["results"][0]["text"] if j["results"] else j["error"]')
	# The whole interpreter killed: kilnd starts the template's copy, with its preloads.
	api POST "/v1/sandboxes/$C/exec" '{"argv":["pkill","-9","-f","kiln_interp"]}'
	api POST "/v1/sandboxes/$C/code" '{"code":"import sys; \"pandas\" in sys.modules"}'
	again=$(jget 'j["results"][0]["text"] if j["results"] else j["error"]')
	api POST "/v1/sandboxes/$C/exec" '{"argv":["pgrep","-c","-f","python3 -u /usr/lib/kiln/kiln_interp.py (serve|worker)"]}'
	tmpl=$(jget 'j["stdout"].strip()')
	check ci_restart "os._exit: $died, then $back; interpreter killed: pandas preloaded $again, the template's server and worker: $tmpl" \
		eval '[ "$died" = InterpreterDied ] && [ "$back" = "(True, 2.0)" ] && [ "$again" = True ] && [ "$tmpl" = 2 ]'
	api DELETE "/v1/sandboxes/$C"
fi
api DELETE "/v1/sandboxes/$B"
alive alive_at_end
