#!/bin/bash
# tests/unit/context.sh [REPO [BUILD]]: what a template build sends
# (issue 14: the CLI and the SDKs must not upload what .dockerignore
# hides). One context with a .dockerignore of every kind of rule (a
# directory, `**`, a class, an exception under an ignored directory, the
# Dockerfile and .dockerignore named, which are sent anyway, a --file
# Dockerfile elsewhere) is listed by `kiln template context` and by the
# Python SDK's context_files, each against the list Docker's rules give
# by hand; then `kiln template build` and the Python SDK's build_template
# upload it to a real kilnd (no VM: the upload is unpacked and answered
# before a build could start), whose 202 counts the bytes it got: a
# 3 MiB file the .dockerignore hides must not be among them. A bad
# pattern is refused by the CLI naming its line, before anything is sent.
# Run by the unit loop as build/tests/unit_context.
name=context
. "$(dirname "$0")/apilib.sh"
kiln=$build/kiln
C=$dir/ctx
mkdir -p "$C/node_modules/lib" "$C/docs/old" "$C/src/a/b" "$C/keep" "$C/build"
echo FROM kiln/minimal > "$C/Dockerfile"
echo FROM kiln/minimal > "$C/build/Dockerfile.dev"
echo x > "$C/node_modules/lib/index.js"
echo s > "$C/.env"
echo n > "$C/docs/notes.txt"
echo o > "$C/docs/old/a.txt"
echo b > "$C/src/a/b/c.bak"
echo c > "$C/src/a/b/c.c"
echo 1 > "$C/src/log1.txt"
echo 9 > "$C/src/logx.txt"
echo k > "$C/keep/k.txt"
echo j > "$C/keep/j.txt"
head -c 3145728 /dev/urandom > "$C/big.bin"
cat > "$C/.dockerignore" <<'IGN'
# a comment, then rules of each kind
node_modules
/.env
docs/old/
**/*.bak
src/log[0-9].txt
keep
!keep/k.txt
*.bin
Dockerfile
.dockerignore
build
IGN
want='./.dockerignore
./Dockerfile
./docs
./docs/notes.txt
./keep/k.txt
./src
./src/a
./src/a/b
./src/a/b/c.c
./src/logx.txt'
got=$("$kiln" template context "$C" 2> "$dir/err")
check cli_lists_kept "$(tr '\n' ' ' <<<"$got") / $(cat "$dir/err")" [ "$got" = "$want" ]
check cli_counts_left_out "$(cat "$dir/err")" grep -q '10 paths to send, 8 left out' "$dir/err"
# --file: a Dockerfile in an ignored directory is sent (alone of it).
got=$("$kiln" template context "$C" --file build/Dockerfile.dev 2>/dev/null | grep build/)
check cli_file_sent "$got" [ "$got" = ./build/Dockerfile.dev ]
# Without an exception, an ignored directory is walked only for the Dockerfile it holds.
cp "$C/.dockerignore" "$dir/ign"
printf 'build\nnode_modules\n' > "$C/.dockerignore"
got=$("$kiln" template context "$C" --file build/Dockerfile.dev 2>/dev/null | grep -E 'build|node_modules' | tr '\n' ' ')
pyg=$(PYTHONPATH="$repo/sdk/python" python3 -c '
import sys
from kiln.templates import context_files
print(" ".join("./" + f for f in context_files(sys.argv[1], "build/Dockerfile.dev")[0] if f.startswith(("build", "node_modules"))) + " ")' "$C")
check dockerfile_in_ignored_dir "cli '$got', python '$pyg'" [ "$got" = "./build/Dockerfile.dev " -a "$pyg" = "$got" ]
cp "$dir/ign" "$C/.dockerignore"
py=$(PYTHONPATH="$repo/sdk/python" python3 -c '
import sys
from kiln.templates import context_files
files, left = context_files(sys.argv[1])
print("\n".join("./" + f for f in files)); print(left, file=sys.stderr)' "$C" 2> "$dir/pyerr")
check python_lists_kept "$(tr '\n' ' ' <<<"$py") / $(cat "$dir/pyerr")" [ "$py" = "$want" -a "$(cat "$dir/pyerr")" = 8 ]
# The uploads, to a real kilnd.
start_kilnd
key=$(kd keys create --workspace ctx 2>/dev/null)
out=$(KILN_API_URL=$API KILN_API_KEY=$key "$kiln" template build "$C" --name ctx --json 2>&1)
bytes=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["context_bytes"])' "$out" 2>/dev/null)
check cli_upload_small "context_bytes $bytes: $out" [ -n "$bytes" ] && [ "$bytes" -lt 100000 ]
out=$(PYTHONPATH="$repo/sdk/python" python3 -c '
import sys
from kiln import Client
print(Client(api_url=sys.argv[1], api_key=sys.argv[2]).build_template(sys.argv[3], "ctxpy")["context_bytes"])' \
	"$API" "$key" "$C" 2>&1)
check python_upload_small "context_bytes $out" [ "${out:-x}" -lt 100000 ] 2>/dev/null
# Without the rule, the same upload carries the 3 MiB: the check above
# could fail.
sed -i '/^\*\.bin$/d' "$C/.dockerignore"
out=$(KILN_API_URL=$API KILN_API_KEY=$key "$kiln" template build "$C" --name ctxbig --json 2>&1)
bytes=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["context_bytes"])' "$out" 2>/dev/null)
check cli_upload_unignored "context_bytes $bytes" [ -n "$bytes" ] && [ "$bytes" -gt 3000000 ]
printf 'ok\nsrc/[a-\n' > "$C/.dockerignore"
out=$(KILN_API_URL=$API KILN_API_KEY=$key "$kiln" template build "$C" --name ctxbad 2>&1); st=$?
check cli_bad_pattern "exit $st: $out" [ "$st" != 0 ] && grep -q 'line 2' <<<"$out"
# --disk and --build-net (CLI) and disk_mib and build_net (Python SDK)
# reach the build: no VM boots for either, since kilnd refuses a disk
# smaller than base's 4 GiB image before the first step, and a build
# network on a kilnd without one (--no-net) at the image step, each
# naming the value it got. Bad values are refused before the upload.
D=$dir/dctx
mkdir -p "$D" && printf 'FROM kiln/base\nRUN true\n' > "$D/Dockerfile"
kb() { KILN_API_URL=$API KILN_API_KEY=$key "$kiln" template build "$D" "$@"; }
out=$(kb --name cdisk --disk 1024 -f 2>&1); st=$?
check cli_disk_sent "exit $st: $(tail -1 <<<"$out")" [ "$st" = 1 ] && grep -q "disk 1024: smaller than the FROM image's 4096 MiB" <<<"$out"
out=$(kb --name cnet --build-net 203.0.113.10/32 -f 2>&1); st=$?
check cli_build_net_sent "exit $st: $(tail -1 <<<"$out")" [ "$st" = 1 ] &&
	grep -q "build-net 203.0.113.10/32: this host has no sandbox network" <<<"$out"
# --vcpus and --memory: the version's shape is in the log before the disk
# check ends the build.
out=$(kb --name cshape --disk 1024 --vcpus 3 --memory 384 -f 2>&1); st=$?
check cli_shape_sent "exit $st: $(grep -m1 'vCPUs and' <<<"$out")" [ "$st" = 1 ] &&
	grep -q "version 1: 3 vCPUs and 384 MiB" <<<"$out"
# Built again in another shape, the failed version in progress is
# started over, not resumed (docs/templates.md "vCPUs and memory").
out=$(kb --name cshape --disk 1024 --vcpus 2 --memory 384 -f 2>&1); st=$?
check cli_shape_starts_over "exit $st: $(grep -m1 'starting over' <<<"$out")" [ "$st" = 1 ] &&
	grep -q "was begun with 3 vCPUs and 384 MiB, asked for another: starting over" <<<"$out" &&
	grep -q "version 1: 2 vCPUs and 384 MiB" <<<"$out"
out=$(kb --name cbad --vcpus 9 2>&1); st=$?
check cli_vcpus_bad "exit $st: $(head -1 <<<"$out")" [ "$st" = 2 ] && grep -q -- "--vcpus: '9' is not a number from 1" <<<"$out"
out=$(curl -s -X POST -H "Authorization: Bearer $key" -H 'Content-Type: application/x-tar' \
	--data-binary x "$API/v1/templates?name=cbad&memory_mib=64")
check api_memory_bad "$out" grep -q "memory_mib '64': want a number of MiB from 128 to 65536" <<<"$out"
out=$(kb --name cbad --disk 10 2>&1); st=$?
check cli_disk_bad "exit $st: $(head -1 <<<"$out")" [ "$st" = 2 ] && grep -q -- "--disk: '10' is not a number from 64" <<<"$out"
out=$(kb --name cbad --build-net 10.0.0.0/33 2>&1); st=$?
check cli_build_net_bad "exit $st: $(head -1 <<<"$out")" [ "$st" = 125 ] && grep -q "build_net '10.0.0.0/33'" <<<"$out"
out=$(PYTHONPATH="$repo/sdk/python" python3 - "$API" "$key" "$D" 2>&1 <<'PY'
import sys
from kiln import Client, InvalidRequest
c = Client(api_url=sys.argv[1], api_key=sys.argv[2])
def ended(name, **kw):
    c.build_template(sys.argv[3], name, **kw)
    end = [e for e in c.template_logs(name, follow=True) if e["kind"] == "end"][0]
    c.delete_template(name)
    return "%s: %s" % (end["status"], end["error"])
for kw in ({"disk_mib": 10}, {"disk_mib": "1024"}, {"build_net": ""}, {"build_net": "10.0.0.0/8,"},
           {"vcpus": 0}, {"memory_mib": 100000}):
    try:
        c.build_template(sys.argv[3], "pybad", **kw)
        print("not refused:", kw)
    except ValueError as e:
        print("refused:", e)
try:
    c.build_template(sys.argv[3], "pybad", build_net="10.0.0.0/33")
    print("not refused: 10.0.0.0/33")
except InvalidRequest as e:
    print("400:", e)
print(ended("pydisk", disk_mib=1024))
c.build_template(sys.argv[3], "pyshape", disk_mib=1024, vcpus=2, memory_mib=512)
print("log:", [e["text"] for e in c.template_logs("pyshape", follow=True) if e["kind"] == "line" and "vCPUs and" in e["text"]])
c.delete_template("pyshape")
print(ended("pynet", build_net="203.0.113.10/32"))
PY
)
check python_disk_build_net "$(tr '\n' '|' <<<"$out")" [ "$(grep -c '^refused: \(disk_mib\|build_net\|vcpus\|memory_mib\)' <<<"$out")" = 6 ] &&
	grep -q "^log: .*version 1: 2 vCPUs and 512 MiB" <<<"$out" &&
	grep -q "^400: .*build_net '10.0.0.0/33'" <<<"$out" &&
	grep -q "^failed: .*disk 1024: smaller than the FROM image's 4096 MiB" <<<"$out" &&
	grep -q "^failed: .*build-net 203.0.113.10/32: this host has no sandbox network" <<<"$out"
stop_kilnd
exit $rc
