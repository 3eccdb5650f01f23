#!/bin/bash
# A guest that writes to its own disk (issue 15): a `base` sandbox (512 MiB)
# writes one and a half times its memory (more than its VMM's cgroup has
# room for besides the guest's memory), from a program inside the guest
# and through the files API, reads it all back intact (checksums taken while writing,
# compared after the guest dropped its caches, and through GET in the full tier), and is
# still running: its VMM was not killed for the host memory its disk
# writes took (docs/kilnd.md "Memory of a VMM").
# WRITES_MEMORY=MIB: the sandbox is of a template built here from base's
# image with that much memory (its disk stays 4 GiB), so that a multiple
# of its memory is cheap to write; WRITES_TIMES: how many tenths of its
# memory are written in all (default 15; a third through the files API).
#
# Run by itself (data on tmpfs, 3.5 minutes) only in the full tier:
# `make test` runs it through 75-kilnd-writes-disk (data on ext4, where
# the VMM's page cache is at stake), which sources this file; the tmpfs
# case is what every other e2e test runs on.
if [ "${BASH_SOURCE[0]}" = "$0" ] && [ "${KILN_TEST_FULL:-}" != 1 ]; then
	echo "SKIP kilnd_writes_tmpfs: the tmpfs variant of 75-kilnd-writes-disk runs in the full tier (make test-full)"
	exit 0
fi
. "$(dirname "$0")/lib.sh"
have_kvm || { echo "SKIP kilnd_writes: no KVM"; exit 0; }
[ -f "$REPO/build/guest/rootfs-base.ext4" ] ||
	{ fail writes_image "build/guest/rootfs-base.ext4 is missing: run 'make templates'"; exit 0; }
CG=/sys/fs/cgroup/kiln

tmpl=base
if [ -n "${WRITES_MEMORY:-}" ]; then
	# In this test's own data directory, never through build_template's
	# link to the run's shared templates: there it outlived this test,
	# its layer naming a directory gone with it, and a later kilnd's pool
	# (84-kilnd-pool) kept making members of it that failed (a flaky
	# failure of CI runs 26 and 27).
	tmpl=wsmall
	# kilnd starts while the build runs in its data directory: the
	# build's network (its claim in DATA/net, held) must outlive kilnd's
	# start, which removes the claims no sandbox of its holds.
	"$KILND" --data "$DATA" template build wsmall --image "$REPO/build/guest/rootfs-base.ext4" \
		--memory "$WRITES_MEMORY" > "$T/wsmall.log" 2>&1 &
	bpid=$!
	for i in $(seq 600); do
		[ -n "$(ls "$DATA/net" 2>/dev/null)" ] && break
		kill -0 $bpid 2>/dev/null || break
		sleep 0.1
	done
	claimed=$(ls "$DATA/net" 2>/dev/null | tr '\n' ' ')
	start_kilnd --rate 0 || exit 1
	wait $bpid ||
		{ fail writes_template "a template of $WRITES_MEMORY MiB: $(tail -3 "$T/wsmall.log" | tr '\n' ' ')"; exit 1; }
	[ -L "$DATA/templates" ] && { fail writes_template "$DATA/templates is a link to shared templates"; exit 1; }
	check writes_build_beside_start "the build's network (slot ${claimed:-none}) kept by the kilnd that started during the build: $(grep -m1 'held by a template build' "$T/kilnd.log")" \
		grep -q 'held by a template build' "$T/kilnd.log"
else
	build_template base || exit 1
	start_kilnd --rate 0 || exit 1
fi
KEY=$(new_key writes)
create_sandbox "{\"template\":\"$tmpl\"}"
B=$SBX
[ -n "$B" ] || { fail writes_create "$STATUS $BODY"; exit 1; }
at_exit 'api DELETE /v1/sandboxes/$B'
mem=$(jget 'j["memory_mib"]')
run_in() {   # run_in CMD [TIMEOUT]: stdout of CMD in the guest (status in $STATUS)
	api POST "/v1/sandboxes/$B/exec" "{\"cmd\":\"$1\",\"timeout_seconds\":${2:-60}}"
	jget 'j["stdout"].strip()'
}
state() { api GET "/v1/sandboxes/$B"; jget 'j["status"]'; }
ooms() { sed -n 's/^oom_kill //p' "$CG/$B/memory.events" 2>/dev/null; }
mem_cg() {   # memory.max, memory.peak, and the file and shmem pages charged now (MiB)
	local c=$CG/$B
	echo "max $(( $(cat $c/memory.max) >> 20 )), peak $(( $(cat $c/memory.peak 2>/dev/null || echo 0) >> 20 )), file $(( $(awk '$1=="file"{print $2}' $c/memory.stat) >> 20 )), shmem $(( $(awk '$1=="shmem"{print $2}' $c/memory.stat) >> 20 )) MiB; data on $(stat -f -c %T "$DATA")"
}

# ---- inside the guest: two thirds of it, in two files -------------------------------------
# The data are random (a 4 MiB block from /dev/urandom, then each 4 MiB
# with a sha256 chained in front: cheap, and no two blocks alike).
total=$(( mem * ${WRITES_TIMES:-15} / 10 ))
chunk=$(( total / 3 < 128 ? total / 3 : 128 ))	# files are at most 256 MiB
n=$(( (total / 3 + chunk - 1) / chunk ))
big=$(( (total - n * chunk) / 8 * 8 ))	# two files of whole 4 MiB blocks
cat > "$T/w.py" <<'PY'
import hashlib, os, sys
path, mib = sys.argv[1], int(sys.argv[2])
b = os.urandom(4 << 20)
h = hashlib.sha256()
with open(path, "wb") as o:
    for i in range(mib // 4):
        b = hashlib.sha256(b[:64]).digest() + b[32:]
        o.write(b)
        h.update(b)
print(h.hexdigest())
PY
api PUT "/v1/sandboxes/$B/files?path=/root/w.py" "" --data-binary "@$T/w.py" -H 'Content-Type: application/octet-stream'
for f in a b; do
	sum=$(run_in "python3 /root/w.py /root/$f $((big / 2))" 900)
	eval "sum_$f=\$sum"
	st=$(state)
	check "writes_dd_$f" "$((big / 2)) MiB to /root/$f: status $st, sha256 ${sum:0:12}, VMM OOM kills '$(ooms)'" \
		eval '[ "$st" = running ] && [ ${#sum} = 64 ]'
	echo "  VMM cgroup: $(mem_cg 2>/dev/null)"
	[ "$st" = running ] || { echo "  $(jget 'j.get("error")')"; exit 1; }
done

# ---- the files API: the last third, in n uploads of chunk MiB -----------------------------
up=$T/up
ok=1
for i in $(seq 1 $n); do
	head -c ${chunk}M /dev/urandom > "$up"
	want=$(sha256sum "$up" | cut -d' ' -f1)
	api PUT "/v1/sandboxes/$B/files?path=/root/up$i" "" --data-binary "@$up" -H 'Content-Type: application/octet-stream'
	[ "$STATUS" = 200 ] || { ok=0; fail "writes_upload_$i" "PUT: $STATUS $BODY; sandbox $(state): $(jget 'j.get("error")')"; break; }
	got=$(run_in "sync; echo 3 > /proc/sys/vm/drop_caches; sha256sum /root/up$i | cut -d' ' -f1" 300)
	# Through GET as well in the full tier (30 s a 128 MiB chunk in the
	# emulated host; the guest's own read above already reads it from
	# the disk through the VMM).
	back=$want
	full && back=$(curl -s -m 300 -H "Authorization: Bearer $KEY" "$URL/v1/sandboxes/$B/files?path=/root/up$i" | sha256sum | cut -d' ' -f1)
	[ "$got" = "$want" ] && [ "$back" = "$want" ] ||
		{ ok=0; fail "writes_upload_$i" "sha256 sent ${want:0:12}, in the guest ${got:0:12}, GET ${back:0:12}; sandbox $(state): $(jget 'j.get("error")')"; break; }
done
rm -f "$up"
st=$(state)
[ $ok = 1 ] && check writes_upload "$n uploads of $chunk MiB, each read back intact in the guest$(full && echo " and through GET"); status $st" \
	[ "$st" = running ]

# ---- everything read back, from the disk ---------------------------------------------------
got_a=$(run_in "sync; echo 3 > /proc/sys/vm/drop_caches; sha256sum /root/a | cut -d' ' -f1" 600)
got_b=$(run_in "sha256sum /root/b | cut -d' ' -f1" 600)
check writes_read_back "/root/a ${got_a:0:12} (written ${sum_a:0:12}), /root/b ${got_b:0:12} (written ${sum_b:0:12})" \
	eval '[ "$got_a" = "$sum_a" ] && [ "$got_b" = "$sum_b" ] && [ -n "$sum_a" ]'
st=$(state)
echo "  VMM cgroup: $(mem_cg 2>/dev/null)"
check writes_still_running "after $((big + n * chunk)) MiB written ($(( (big + n * chunk) * 10 / mem ))/10 of the guest's $mem MiB): status $st $(jget 'j.get("error") or ""'), VMM OOM kills '$(ooms)'" \
	eval '[ "$st" = running ] && [ "$(ooms)" = 0 ] && [ $(( (big + n * chunk) * 10 / mem )) -ge ${WRITES_TIMES:-15} ]'
alive writes_kilnd
