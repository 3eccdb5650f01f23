#!/bin/bash
# A template from an OCI image (docs/templates.md): the test writes an OCI
# image layout itself (tests/unit/oci_fixture.py: real sha256 digests; the
# minimal root's files, taken out of build/guest/rootfs-minimal.ext4 with
# debugfs, as the base layer, then two layers with whiteouts and an opaque
# directory), builds it with `kilnd template build ocitest --oci DIR:v1
# --vcpus 4 --memory 1024 --disk 1536`, creates a sandbox of it and checks,
# inside the guest, every file as the layers say, the image's Env and
# WorkingDir, the root's size (df), and the template's vCPUs and memory
# (nproc 4, MemTotal a little under 1 GiB). A workspace whose plan allows
# fewer vCPUs, or less memory, is refused a sandbox of it (429 naming the
# limit). A corrupted image is refused before anything boots, and nothing
# of it is put in service. Issue 14's OCI and 4-vCPU/1-GiB items: the
# quick tier runs it.
. "$(dirname "$0")/lib.sh"

MIN=$REPO/build/guest/rootfs-minimal.ext4
if [ ! -f "$MIN" ]; then
	fail oci_base "build/guest/rootfs-minimal.ext4 is missing: run 'make guest'"
	exit 0
fi
mkdir "$T/base"
debugfs -R "rdump / $T/base" "$MIN" > "$T/rdump.log" 2>&1
if [ ! -x "$T/base/bin/busybox" ]; then
	fail oci_base "debugfs rdump of $MIN: $(tail -2 "$T/rdump.log" | tr '\n' ' ')"
	exit 0
fi
python3 "$REPO/tests/unit/oci_fixture.py" layout "$T/img" --base "$T/base" > "$T/fixture.log" 2>&1 &&
	pass oci_layout "$(ls "$T/img/blobs/sha256" | wc -l) blobs" || { fail oci_layout "$(cat "$T/fixture.log")"; exit 0; }

# A corrupted layer: refused at the image step, naming the blob.
python3 "$REPO/tests/unit/oci_fixture.py" digest "$T/bad" > /dev/null 2>&1
"$KILND" --data "$DATA" template build ocibad --oci "$T/bad" > "$T/bad.log" 2>&1
st=$?
[ "$st" != 0 ] && grep -q 'step image failed: .*layer 1 (sha256:.*digest mismatch' "$T/bad.log" &&
	[ ! -e "$DATA/templates/ocibad/current" ] &&
	pass oci_corrupt_refused "$(tail -1 "$T/bad.log" | cut -c1-200)" || fail oci_corrupt_refused "status $st: $(tail -2 "$T/bad.log")"

"$KILND" --data "$DATA" template build ocitest --oci "$T/img:v1" --vcpus 4 --memory 1024 --disk 1536 > "$T/build.log" 2>&1
st=$?
[ "$st" = 0 ] && [ "$(readlink "$DATA/templates/ocitest/current")" = v1 ] &&
	pass oci_build "$(grep -o 'image: [0-9]* layers[^(]*' "$T/build.log" | head -1); $(tail -1 "$T/build.log")" ||
	{ fail oci_build "status $st: $(tail -4 "$T/build.log" | tr '\n' ' ')"; exit 0; }
"$KILND" --data "$DATA" template list > "$T/list.log" 2>&1
grep -q '^ocitest .*v1 .*4 vCPU, 1024 MiB' "$T/list.log" && pass oci_listed "$(grep ocitest "$T/list.log")" ||
	fail oci_listed "$(cat "$T/list.log")"

# Two workspaces on the free plan with a smaller size of one sandbox.
"$KILND" --data "$DATA" workspace plan oci-cpu free '{"vcpus": 2}' > "$T/ws.log" 2>&1 &&
	"$KILND" --data "$DATA" workspace plan oci-mem free '{"memory_mib": 512}' >> "$T/ws.log" 2>&1 ||
	fail oci_plans "$(cat "$T/ws.log")"
start_kilnd --rate 0 || exit 1
KEY=$(new_key oci)
api GET /v1/templates
[ "$(jget '[(t["vcpus"], t["memory_mib"], t["status"]) for t in j["templates"] if t["name"] == "ocitest"][0]')" = "(4, 1024, 'ready')" ] &&
	pass oci_template_api "GET /v1/templates: ocitest, 4 vCPUs, 1024 MiB" || fail oci_template_api "$BODY"
create_sandbox '{"template":"ocitest","env":{"EXTRA":"from-create"}}'
S=$SBX
[ -n "$S" ] && [ "$(jget 'j["vcpus"]')" = 4 ] && [ "$(jget 'j["memory_mib"]')" = 1024 ] &&
	pass oci_create "$S ready in $(jget 'round(j["ready_ms"], 1)') ms, 4 vCPUs, 1024 MiB" || { fail oci_create "$BODY"; exit 0; }

# A sandbox of it where the plan allows less: 429 naming the limit, its
# value and the plan, before anything boots.
OCI_KEY=$KEY
KEY=$(new_key oci-cpu)
api POST /v1/sandboxes '{"template":"ocitest"}'
r1="$STATUS $(jget 'j["error"]["code"], j["error"]["limit"], j["error"]["value"], j["error"]["plan"]')"
m1=$(jget 'j["error"]["message"]')
KEY=$(new_key oci-mem)
api POST /v1/sandboxes '{"template":"ocitest"}'
r2="$STATUS $(jget 'j["error"]["code"], j["error"]["limit"], j["error"]["value"], j["error"]["plan"]')"
KEY=$OCI_KEY
[ "$r1" = "429 ('limit_exceeded', 'vcpus', 2, 'free')" ] && [ "$r2" = "429 ('limit_exceeded', 'memory_mib', 512, 'free')" ] &&
	pass oci_over_plan "vcpus 2: $m1; memory_mib 512: $r2" || fail oci_over_plan "vcpus 2: $r1 $m1; memory_mib 512: $r2"

# The checks inside the guest, all in one exec (one exec each took 2 to 3
# s in the emulated host): add NAME CMD [WANT]. A command's answer is the
# last line it printed, as one exec's stdout would give it.
names=() cmds=() wants=()
add() { names+=("$1"); cmds+=("$2"); wants+=("${3-}"); }
# Layer 2 replaced etc/over and added etc/new; its whiteouts removed
# etc/old and del/, its opaque opq/ holds only its own c.
add oci_file_replaced 'cat /etc/over' two
add oci_file_added 'cat /etc/new' new
add oci_whiteout_file 'test ! -e /etc/old && echo gone' gone
add oci_whiteout_dir 'test ! -e /del && echo gone' gone
add oci_opaque_dir 'ls -A /opq | tr "\n" " "' c
add oci_kept 'cat /keep/k /hard | tr "\n" " "' 'kept kept'
add oci_symlink 'readlink /link' keep/k
add oci_fifo 'test -p /fifo && echo fifo' fifo
add oci_exec_bit '/bin/tool' tool
add oci_no_markers 'find / -xdev -name ".wh.*" | wc -l' 0
# The image config: Env under the create's env, WorkingDir for exec.
add oci_env 'echo "$KILN_OCI $EXTRA"' 'layered from-create'
add oci_workdir 'pwd' /keep
# The template's resources.
add oci_nproc 'nproc' 4
add oci_disk 'df -k / | tail -1'
add oci_memtotal "awk '/MemTotal/ { print \$2 }' /proc/meminfo"
script=
for i in "${!names[@]}"; do script+="echo @@${names[i]}; ( ${cmds[i]} ) 2>/dev/null"$'\n'; done
api POST "/v1/sandboxes/$S/exec" "$(python3 -c 'import json,sys; print(json.dumps({"cmd": sys.argv[1]}))' "$script")"
# NAME<tab>ANSWER a line.
jget '"\n".join(p[0] + "\t" + (p[1].strip().splitlines()[-1] if len(p) > 1 and p[1].strip() else "") for p in (s.split("\n", 1) for s in j["stdout"].split("@@")[1:]))' > "$T/answers"
answer() { awk -F'\t' -v n="$1" '$1 == n { print $2; exit }' "$T/answers"; }
for i in "${!names[@]}"; do
	[ -n "${wants[i]}" ] || continue
	got=$(answer "${names[i]}")
	[ "$STATUS" = 200 ] && [ "$got" = "${wants[i]}" ] && pass "${names[i]}" "$got" ||
		fail "${names[i]}" "wanted '${wants[i]}', got '$got': $STATUS $(head -c 300 <<<"$BODY")"
done
# --disk 1536: the root made at that size (without it: the files, a
# quarter more and 1 GiB, about 1030 MiB here).
OUT=$(answer oci_disk)
kb=$(awk '{print $2}' <<<"$OUT")
[ "${kb:-0}" -gt 1400000 ] && [ "${kb:-0}" -le 1572864 ] && grep -q "the root filesystem takes the whole disk: 1536 MiB" "$T/build.log" &&
	pass oci_disk "df /: $OUT" || fail oci_disk "df /: $OUT; $(grep -c 'whole disk' "$T/build.log") log lines"
# MemTotal: the 1024 MiB less what the kernel keeps (tens of MiB), more
# than 900 MiB: not a smaller memory file.
OUT=$(answer oci_memtotal)
[ -n "$OUT" ] && [ "$OUT" -gt $((900 * 1024)) ] && [ "$OUT" -le $((1024 * 1024)) ] &&
	pass oci_memtotal "MemTotal $OUT kB for 1024 MiB" || fail oci_memtotal "MemTotal '$OUT': $STATUS $(head -c 300 <<<"$BODY")"
api DELETE "/v1/sandboxes/$S"
alive alive_at_end
