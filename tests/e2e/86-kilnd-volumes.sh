#!/bin/bash
# Named volumes (docs/api.md "Volumes"): a volume is made (an ext4 file
# in DATA/volumes, root's alone), a sandbox gets it mounted at its path,
# what the guest fsync'ed survives kill -9 of the VMM and is seen by the
# next sandbox; one writer at a time (a second writer, or a reader beside
# a writer, is 409 naming the sandbox); read-only ones share, and their
# writes fail in the guest; a volume in use is not deleted; a sandbox with
# one hibernates and wakes with it mounted; a fork of a read-write one is
# refused, of a read-only one shares it; a snapshot is refused; volumes
# survive their sandbox, a kilnd restart and kill -9 of kilnd (what the
# guest fsync'ed before it is read by the next sandbox that mounts it; a
# restarted kilnd wakes a hibernated sandbox with its volume and lets
# the volume go when the sandbox is deleted); one is attached to and
# detached from a running sandbox (REST and the CLI), never unmounted
# from under a guest process unless the detach is forced (?force=true,
# --force: what holds the mount is killed, what it synced is kept); a template
# built without slots is 409 saying to rebuild it; bad requests are
# 400/404/409 with messages; the plan's volumes, volume_mib and
# storage_mib are 429; nothing is left at the end.
. "$(dirname "$0")/lib.sh"
have_kvm || { fail volumes_kvm "no KVM here: run it in tests/host/run"; exit 1; }

build_template minimal || exit 1
cat > "$T/plans.json" <<'EOF'
{"vtiny": {"volumes": 1, "volume_mib": 64}, "vstore": {"storage_mib": 100}}
EOF
"$KILND" --data "$DATA" --plans "$T/plans.json" workspace plan w-vtiny vtiny > /dev/null 2>&1
"$KILND" --data "$DATA" --plans "$T/plans.json" workspace plan w-vstore vstore > /dev/null 2>&1
kilnd_args=(--rate 0 --plans "$T/plans.json")
start_kilnd "${kilnd_args[@]}" || exit 1
KEY=$(new_key vols) TINY=$(new_key w-vtiny) STORE=$(new_key w-vstore)
MAIN=$KEY
at_exit 'KEY=$MAIN; for s in $(curl -s -H "Authorization: Bearer $KEY" $URL/v1/sandboxes | python3 -c "import json,sys; [print(s[\"id\"]) for s in json.load(sys.stdin)[\"sandboxes\"]]" 2>/dev/null); do api DELETE /v1/sandboxes/$s; done'

# gx ID CMD: run CMD in the sandbox's guest; OUT its stdout, ERR its stderr, RC its exit code.
gx() {
	api POST "/v1/sandboxes/$1/exec" "$(python3 -c 'import json,sys; print(json.dumps({"cmd": sys.argv[1]}))' "$2")"
	OUT=$(jget 'j["stdout"].strip()') ERR=$(jget 'j["stderr"].strip()') RC=$(jget 'j["exit_code"]')
}
msg() { jget 'j["error"]["message"]'; }

# ---- a volume, and a sandbox that writes to it ---------------------------------------
api POST /v1/volumes '{"name":"data","size_mib":64}'
V=$(jget 'j["id"]')
[ "$STATUS" = 201 ] && [[ "$V" == vol_* ]] && [ "$(jget 'j["size_mib"]')" = 64 ] &&
	[ "$(jget 'j["attached_to"]')" = "[]" ] && pass volume_create "$V: $BODY" || fail volume_create "$STATUS $BODY"
img=$DATA/volumes/$V.img
check volume_file "$(stat -c '%s bytes, mode %a, uid %u' "$img" 2>&1); directory mode $(stat -c %a "$DATA/volumes" 2>&1)" \
	[ "$(stat -c '%s %a %u' "$img" 2>/dev/null)" = "67108864 600 0" -a "$(stat -c %a "$DATA/volumes" 2>/dev/null)" = 700 ]
magic=$(python3 -c "import sys; f=open(sys.argv[1],'rb'); f.seek(1080); print(f.read(2).hex())" "$img" 2>&1)
check volume_ext4 "superblock magic $magic (ext4: 53ef)" [ "$magic" = 53ef ]
api GET "/v1/volumes/$V"
check volume_get "$STATUS name $(jget 'j["name"]')" [ "$STATUS" = 200 -a "$(jget 'j["name"]')" = data ]

create_sandbox '{"template":"minimal","volumes":[{"name":"data","path":"/data"}]}'
S1=$SBX
[ -n "$S1" ] && pass volume_sandbox "$S1" || { fail volume_sandbox "$STATUS $BODY"; exit 1; }
gx "$S1" 'grep " /data " /proc/mounts; echo hello > /data/f && sync /data/f && cat /data/f'
ok=; [ "$RC" = 0 ] && [[ "$OUT" == *" /data ext4 rw"*hello ]] && ok=1
check volume_mounted "rc $RC: $OUT $ERR" [ -n "$ok" ]
api GET /v1/volumes
check volume_list_attached "$(jget '[(v["name"], v["attached_to"]) for v in j["volumes"]]')" \
	[ "$(jget '[(a["sandbox_id"], a["path"], a["read_only"]) for a in j["volumes"][0]["attached_to"]]')" = "[('$S1', '/data', False)]" ]

# ---- the rules ----------------------------------------------------------------------------
api POST /v1/sandboxes '{"template":"minimal","volumes":[{"name":"data","path":"/data"}]}'
expect volume_second_writer 409 conflict && { [[ "$(msg)" == *"$S1"* ]] && pass volume_second_writer_names "$(msg)" || fail volume_second_writer_names "$(msg)"; }
api POST /v1/sandboxes '{"template":"minimal","volumes":[{"name":"data","path":"/data","read_only":true}]}'
expect volume_reader_beside_writer 409 conflict && { [[ "$(msg)" == *"$S1"* ]] && pass volume_reader_names "$(msg)" || fail volume_reader_names "$(msg)"; }
api DELETE "/v1/volumes/$V"
expect volume_delete_in_use 409 conflict && { [[ "$(msg)" == *"$S1"* ]] && pass volume_delete_in_use_names "$(msg)" || fail volume_delete_in_use_names "$(msg)"; }
api POST "/v1/sandboxes/$S1/snapshot" '{}'
expect volume_snapshot_refused 409 conflict && { [[ "$(msg)" == *"not part of a snapshot"* ]] && pass volume_snapshot_says "$(msg)" || fail volume_snapshot_says "$(msg)"; }
api POST "/v1/sandboxes/$S1/fork" '{"count":1}'
expect volume_fork_rw_refused 409 conflict && { [[ "$(msg)" == *"'data'"*read-write* ]] && pass volume_fork_says "$(msg)" || fail volume_fork_says "$(msg)"; }

# ---- hibernate and wake: mounted, with its data -----------------------------------------
api POST "/v1/sandboxes/$S1/hibernate" '{}'
[ "$STATUS" = 200 ] && [ "$(jget 'j["status"]')" = hibernated ] && pass volume_hibernate "hibernated" || fail volume_hibernate "$STATUS $BODY"
api GET "/v1/volumes/$V"
check volume_hibernated_holds "attached_to $(jget '[a["sandbox_id"] for a in j["attached_to"]]')" [ "$(jget '[a["sandbox_id"] for a in j["attached_to"]]')" = "['$S1']" ]
api POST "/v1/sandboxes/$S1/wake" '{}'
[ "$STATUS" = 200 ] && pass volume_wake "$(jget 'j["status"]')" || fail volume_wake "$STATUS $BODY"
gx "$S1" 'cat /data/f && echo after-wake > /data/g && sync && cat /data/g'
check volume_wake_data "rc $RC: $(echo $OUT) $ERR" [ "$RC" = 0 -a "$(echo $OUT)" = "hello after-wake" ]

# ---- kill -9 of the VMM: what was fsync'ed is there for the next sandbox ---------------
gx "$S1" 'dd if=/dev/urandom of=/data/big bs=1k count=256 conv=fsync 2>/dev/null && md5sum < /data/big | cut -d" " -f1'
want=$OUT
pid=$(cut -d' ' -f1 "$DATA/sandboxes/$S1/vmm.pid")
kill -9 "$pid"
seen=$(wait_status "$S1" failed 30)
check volume_vmm_killed "VMM $pid killed: $seen" [ "$seen" = failed ]
api GET "/v1/volumes/$V"
check volume_freed_by_failure "attached_to $(jget 'j["attached_to"]')" [ "$(jget 'j["attached_to"]')" = "[]" ]
create_sandbox '{"template":"minimal","volumes":[{"name":"data","path":"/mnt/vol"}]}'
S2=$SBX
gx "$S2" 'cat /mnt/vol/f; md5sum < /mnt/vol/big | cut -d" " -f1'
check volume_fsync_survives "want $want; got $(echo $OUT) $ERR" [ -n "$want" -a "$(echo $OUT)" = "hello $want" ]
api DELETE "/v1/sandboxes/$S1"
api DELETE "/v1/sandboxes/$S2"
check volume_sandbox_deleted "$STATUS" [ "$STATUS" = 204 -o "$STATUS" = 200 ]
api GET "/v1/volumes/$V"
check volume_survives_sandbox "$STATUS attached_to $(jget 'j["attached_to"]')" [ "$STATUS" = 200 -a "$(jget 'j["attached_to"]')" = "[]" ]

# ---- read-only: shared, writes fail; a fork shares it ------------------------------------
create_sandbox '{"template":"minimal","volumes":[{"name":"data","path":"/ro","read_only":true}]}'
R1=$SBX
create_sandbox '{"template":"minimal","volumes":[{"name":"data","path":"/ro","read_only":true}]}'
R2=$SBX
check volume_readers "$R1 $R2" [ -n "$R1" -a -n "$R2" ]
gx "$R2" 'cat /ro/f; echo x > /ro/new'
ok=; [ "$RC" != 0 -a "$OUT" = hello ] && [[ "$ERR" == *"Read-only file system"* ]] && ok=1
check volume_ro_write_fails "rc $RC: $OUT / $ERR" [ -n "$ok" ]
api POST /v1/sandboxes '{"template":"minimal","volumes":[{"name":"data","path":"/data"}]}'
expect volume_writer_beside_readers 409 conflict
api POST "/v1/sandboxes/$R1/fork" '{"count":1}'
KID=$(jget 'j["sandboxes"][0]["id"]')
[ "$STATUS" = 201 ] && [ -n "$KID" ] && pass volume_fork_ro "child $KID" || fail volume_fork_ro "$STATUS $BODY"
gx "$KID" 'cat /ro/f'
check volume_fork_child_reads "child: $OUT $ERR" [ "$OUT" = hello ]
api GET "/v1/volumes/$V"
check volume_fork_recorded "attached_to $(jget 'sorted(a["sandbox_id"] for a in j["attached_to"])')" \
	[ "$(jget 'len(j["attached_to"])')" = 3 ]
for s in "$R1" "$R2" "$KID"; do api DELETE "/v1/sandboxes/$s"; done

# ---- kilnd restart and kill -9: the volume and a running sandbox's mount stay ------------
create_sandbox '{"template":"minimal","volumes":[{"name":"data","path":"/data"}]}'
S5=$SBX
stop_kilnd
start_kilnd "${kilnd_args[@]}" || exit 1
gx "$S5" 'cat /data/f'
api GET "/v1/volumes/$V"
check volume_restart "after a restart: $OUT; attached_to $(jget '[a["sandbox_id"] for a in j["attached_to"]]')" \
	[ "$OUT" = hello -a "$(jget '[a["sandbox_id"] for a in j["attached_to"]]')" = "['$S5']" ]
# What the guest fsync'ed just before kill -9 of kilnd is on the volume
# for a sandbox that mounts it afresh (L1, below: volume_kilnd_kill9_fsync).
gx "$S5" 'echo before-kill9 > /data/g && sync /data/g && cat /data/g'
g_written=$OUT
kill -9 "$KILND_PID"
wait "$KILND_PID" 2>/dev/null
KILND_PID=
start_kilnd "${kilnd_args[@]}" || exit 1
gx "$S5" 'echo after-kill9 > /data/h && sync && cat /data/h'
api GET "/v1/volumes/$V"
check volume_kilnd_kill9 "after kill -9 of kilnd: $OUT; volume $STATUS, attached_to $(jget '[a["sandbox_id"] for a in j["attached_to"]]')" \
	[ "$OUT" = after-kill9 -a "$STATUS" = 200 -a "$(jget '[a["sandbox_id"] for a in j["attached_to"]]')" = "['$S5']" ]
# A restarted kilnd learns which sandboxes have volumes from the store:
# a hibernated one wakes with its volume, and a delete lets it go.
api POST "/v1/sandboxes/$S5/hibernate" '{}'
stop_kilnd
start_kilnd "${kilnd_args[@]}" || exit 1
api POST "/v1/sandboxes/$S5/wake" '{}'
gx "$S5" 'cat /data/h'
check volume_restart_wake "after a restart, woken: $OUT $ERR" [ "$OUT" = after-kill9 ]
api DELETE "/v1/sandboxes/$S5"
api GET "/v1/volumes/$V"
check volume_restart_freed "deleted after a restart: attached_to $(jget 'j["attached_to"]')" [ "$(jget 'j["attached_to"]')" = "[]" ]

# ---- attach and detach on a running sandbox ---------------------------------------------
# A sandbox made without volumes takes one; a second writer elsewhere is
# refused; a mount the guest uses is not pulled from under it; detached,
# the volume moves to another sandbox; a hibernated one lets go without
# waking; the template's two slots are all there is.
create_sandbox; L1=$SBX
create_sandbox; L2=$SBX
api POST "/v1/sandboxes/$L1/volumes" '{"name":"data","path":"/late"}'
check volume_attach_live "$STATUS: $(jget '[(a["sandbox_id"], a["path"], a["slot"]) for a in j["attached_to"]]')" \
	[ "$STATUS" = 200 -a "$(jget '[(a["sandbox_id"], a["path"]) for a in j["attached_to"]]')" = "[('$L1', '/late')]" ]
gx "$L1" 'grep " /late " /proc/mounts; cat /late/f; echo late > /late/l && sync /late/l'
ok=; [ "$RC" = 0 ] && [[ "$OUT" == *" /late ext4 rw"*hello ]] && ok=1
check volume_attach_mounted "rc $RC: $OUT $ERR" [ -n "$ok" ]
gx "$L1" 'cat /late/g /late/h'
check volume_kilnd_kill9_fsync "written '$g_written' before kill -9 of kilnd; a new mount reads: $(echo $OUT) $ERR" \
	[ "$g_written" = before-kill9 -a "$(echo $OUT)" = "before-kill9 after-kill9" ]
api POST "/v1/sandboxes/$L1/volumes" '{"name":"data","path":"/again"}'
expect volume_attach_twice 409 conflict && echo "  ($(msg))"
api POST "/v1/sandboxes/$L2/volumes" '{"name":"data","path":"/d","read_only":true}'
expect volume_attach_second_writer 409 conflict && { [[ "$(msg)" == *"$L1"* ]] && pass volume_attach_names_writer "$(msg)" || fail volume_attach_names_writer "$(msg)"; }
# A writer that synced its file and holds the mount (its cwd) and a
# second process with a file open on it.
api POST "/v1/sandboxes/$L1/processes" '{"cmd":"cd /late && echo forced > ff && sync ff && exec sleep 120"}'
api POST "/v1/sandboxes/$L1/processes" '{"cmd":"exec sleep 121 < /late/l"}'
sleep 1
api DELETE "/v1/sandboxes/$L1/volumes/data"
expect volume_detach_in_use 409 conflict && { [[ "$(msg)" == *"/late"*"in use by:"*"(sleep)"*"with force"* ]] && pass volume_detach_in_use_says "$(msg)" || fail volume_detach_in_use_says "$(msg)"; }
gx "$L1" 'cat /late/l; pidof sleep | wc -w'
check volume_detach_kept_mount "the guest still has it, and both holders run: $OUT" [ "$OUT" = "late
2" ]
api DELETE "/v1/sandboxes/$L1/volumes/data?force=maybe"
expect volume_detach_force_bad 400 invalid_request
# Forced: what holds the mount is killed, then it is synced and let go.
api DELETE "/v1/sandboxes/$L1/volumes/data?force=true"
st1=$STATUS
gx "$L1" 'grep -c " /late " /proc/mounts; pidof sleep | wc -w'
api GET "/v1/volumes/$V"
check volume_detach_forced "$st1; mounts of /late in the guest, sleeps left: $(echo $OUT); attached_to $(jget 'j["attached_to"]')" \
	[ "$st1" = 204 -a "$(echo $OUT)" = "0 0" -a "$(jget 'j["attached_to"]')" = "[]" ]
api POST "/v1/sandboxes/$L2/volumes" '{"name":"data","path":"/d","read_only":true}'
st1=$STATUS
gx "$L2" 'cat /d/l /d/ff'
check volume_moved "$st1: the next sandbox reads $(echo $OUT) (the killed writer's synced file too)" \
	[ "$st1" = 200 -a "$(echo $OUT)" = "late forced" ]
api POST "/v1/sandboxes/$L2/hibernate" '{}'
api DELETE "/v1/sandboxes/$L2/volumes/$V"
st1=$STATUS
api GET "/v1/sandboxes/$L2"
check volume_detach_hibernated "$st1 by id; the sandbox stays $(jget 'j["status"]')" [ "$st1" = 204 -a "$(jget 'j["status"]')" = hibernated ]
api DELETE "/v1/sandboxes/$L2/volumes/data"
expect volume_detach_not_attached 404 not_found
api POST "/v1/sandboxes/$L2/volumes" '{"name":"nope","path":"/x"}'
expect volume_attach_unknown 404 not_found
api POST "/v1/sandboxes/$L2/volumes" '{"name":"data"}'
expect volume_attach_no_path 400 invalid_request
# A path the guest cannot mount at: refused with the guest's words, at a
# create (the sandbox ended) and on a running one (the slot free again).
n0=$(sandbox_vmms | wc -l)
api POST /v1/sandboxes '{"template":"minimal","volumes":[{"name":"data","path":"/proc/x"}]}'
expect volume_mount_refused_create 400 invalid_request && { [[ "$(msg)" == *"mounting the volumes in the guest"* ]] && pass volume_mount_refused_says "$(msg)" || fail volume_mount_refused_says "$(msg)"; }
api POST "/v1/sandboxes/$L1/volumes" '{"name":"data","path":"/proc/y"}'
expect volume_mount_refused_attach 400 invalid_request
api GET "/v1/volumes/$V"
check volume_mount_refused_nothing_left "VMMs $n0 -> $(sandbox_vmms | wc -l); data attached_to $(jget '[a["sandbox_id"] for a in j["attached_to"]]')" \
	[ "$(sandbox_vmms | wc -l)" = "$n0" -a "$(jget 'j["attached_to"]')" = "[]" ]
api POST "/v1/sandboxes/sbx_nope/volumes" '{"name":"data","path":"/x"}'
expect volume_attach_no_sandbox 404 not_found
api POST /v1/volumes '{"name":"slot2","size_mib":8}'; V2=$(jget 'j["id"]')
api POST /v1/volumes '{"name":"slot3","size_mib":8}'; V3=$(jget 'j["id"]')
api POST "/v1/sandboxes/$L1/volumes" '{"name":"data","path":"/a","read_only":true}'; st1=$STATUS
api POST "/v1/sandboxes/$L1/volumes" '{"name":"slot2","path":"/b"}'; st2=$STATUS
api POST "/v1/sandboxes/$L1/volumes" '{"name":"slot3","path":"/c"}'
expect volume_attach_no_slot 409 conflict && { [ "$st1 $st2" = "200 200" ] && [[ "$(msg)" == *"no free volume slot"* ]] && pass volume_attach_slots_says "$(msg)" || fail volume_attach_slots_says "$st1 $st2 $(msg)"; }
# The CLI: kiln volume detach / attach.
export KILN_API_URL=$URL KILN_API_KEY=$MAIN
o1=$("$KILN" volume detach "$L1" slot2 --force 2>&1); s1=$?
o2=$("$KILN" volume attach "$L1" slot3:/c:ro 2>&1); s2=$?
mounts=$("$KILN" exec "$L1" 'grep -E " /(b|c) " /proc/mounts' 2>&1)
check volume_cli_attach_detach "detach $s1 '$o1', attach $s2 '$o2': $mounts" \
	eval '[ "$s1 $s2" = "0 0" ] && [[ "$mounts" == *" /c ext4 ro"* ]] && [[ "$mounts" != *" /b "* ]]'
o1=$("$KILN" volume attach "$L1" slot2 2>&1); s1=$?
check volume_cli_attach_usage "exit $s1: $o1" eval '[ $s1 != 0 ] && [[ "$o1" == *"NAME:/PATH"* ]]'
# A sandbox made from a snapshot has no volumes at create, and takes one
# once it runs (the snapshot's slots were empty).
create_sandbox; SP=$SBX
api POST "/v1/sandboxes/$SP/snapshot" '{}'; SNAPV=$(jget 'j["id"]')
api DELETE "/v1/sandboxes/$SP"
create_sandbox "{\"from_snapshot\":\"$SNAPV\"}"; FS=$SBX
api POST "/v1/sandboxes/$FS/volumes" '{"name":"slot2","path":"/s","read_only":true}'; st1=$STATUS
gx "$FS" 'grep " /s " /proc/mounts'
check volume_attach_from_snapshot "$FS from $SNAPV: $st1, $OUT" eval '[ "$st1" = 200 ] && [[ "$OUT" == *" /s ext4 ro"* ]]'
api DELETE "/v1/sandboxes/$FS"
api DELETE "/v1/snapshots/$SNAPV"
for s in "$L1" "$L2"; do api DELETE "/v1/sandboxes/$s"; done
for v in "$V2" "$V3"; do api DELETE "/v1/volumes/$v"; [ "$STATUS" = 204 ] || fail volume_attach_cleanup "$v: $STATUS $BODY"; done

# ---- bad requests -------------------------------------------------------------------------
api POST /v1/volumes '{"name":"x","size_mib":1,"colour":"red"}'
expect volume_unknown_field 400 invalid_request
api POST /v1/volumes '{"name":"Bad_Name","size_mib":1}'
expect volume_bad_name 400 invalid_request
api POST /v1/volumes '{"name":"zero","size_mib":0}'
expect volume_size_zero 400 invalid_request
api POST /v1/volumes '{"name":"huge","size_mib":70000}'
expect volume_size_huge 400 invalid_request
api POST /v1/volumes '{"name":"nosize"}'
expect volume_size_missing 400 invalid_request
api POST /v1/volumes '{"name":"data","size_mib":8}'
expect volume_name_taken 409 conflict
api POST /v1/volumes '{"name":"other","size_mib":8}'
expect volume_other 201 -
for p in '"data"' '"/"' '"/a/../etc"' '"/a b"' '5'; do
	api POST /v1/sandboxes "{\"template\":\"minimal\",\"volumes\":[{\"name\":\"data\",\"path\":$p}]}"
	expect "volume_bad_path_$(tr -dc 'a-z0-9' <<<"$p")" 400 invalid_request
done
api POST /v1/sandboxes '{"template":"minimal","volumes":[{"name":"data","path":"/a"},{"name":"other","path":"/a"}]}'
expect volume_duplicate_path 400 invalid_request
api POST /v1/sandboxes '{"template":"minimal","volumes":[{"name":"data","path":"/a"},{"name":"data","path":"/b"}]}'
expect volume_duplicate_name 400 invalid_request
api POST /v1/volumes '{"name":"third","size_mib":8}'
api POST /v1/sandboxes '{"template":"minimal","volumes":[{"name":"data","path":"/a"},{"name":"other","path":"/b"},{"name":"third","path":"/c"}]}'
expect volume_too_many 400 invalid_request && echo "  ($(msg))"
api POST /v1/sandboxes '{"template":"minimal","volumes":[{"name":"nope","path":"/a"}]}'
expect volume_unknown_name 404 not_found && { [ "$(msg)" = "volume nope not found" ] && pass volume_unknown_name_says "$(msg)" || fail volume_unknown_name_says "$(msg)"; }
api POST /v1/sandboxes '{"template":"minimal","volumes":[{"name":"data","path":"/a","rw":true}]}'
expect volume_entry_unknown_field 400 invalid_request
api GET /v1/volumes/vol_nope
expect volume_get_unknown 404 not_found
api DELETE /v1/volumes/vol_nope
expect volume_delete_unknown 404 not_found
KEY=$TINY
api GET "/v1/volumes/$V"
expect volume_other_workspace 404 not_found
KEY=$MAIN

# ---- plan limits --------------------------------------------------------------------------
KEY=$TINY
api POST /v1/volumes '{"name":"big","size_mib":128}'
# The body of every 429 limit_exceeded (reply_limit, as a create's): the
# limit, its value and the plan.
limit_body() { jget '(j["error"]["limit"], j["error"]["value"], j["error"]["plan"])'; }
expect volume_plan_size 429 limit_exceeded && { [ "$(limit_body)" = "('volume_mib', 64, 'vtiny')" ] && pass volume_plan_size_names "$(msg)" || fail volume_plan_size_names "$BODY"; }
api POST /v1/volumes '{"name":"one","size_mib":64}'
expect volume_plan_first 201 -
api POST /v1/volumes '{"name":"two","size_mib":1}'
expect volume_plan_count 429 limit_exceeded && { [ "$(limit_body)" = "('volumes', 1, 'vtiny')" ] && pass volume_plan_count_names "$(msg)" || fail volume_plan_count_names "$BODY"; }
api GET /v1/volumes
api DELETE "/v1/volumes/$(jget 'j["volumes"][0]["id"]')"
KEY=$STORE
api POST /v1/volumes '{"name":"a","size_mib":60}'
expect volume_plan_storage_first 201 -
A=$(jget 'j["id"]')
api POST /v1/volumes '{"name":"b","size_mib":60}'
expect volume_plan_storage 429 limit_exceeded && { [ "$(limit_body)" = "('storage_mib', 100, 'vstore')" ] && pass volume_plan_storage_names "$(msg)" || fail volume_plan_storage_names "$BODY"; }
api GET /v1/limits
check volume_counts_storage "in_use.storage_mib $(jget 'j["in_use"]["storage_mib"]'), volumes $(jget 'j["in_use"]["volumes"]')" \
	[ "$(jget 'j["in_use"]["storage_mib"]')" = 60 -a "$(jget 'j["in_use"]["volumes"]')" = 1 ]
api DELETE "/v1/volumes/$A"
KEY=$MAIN

# ---- the CLI: kiln volume create|ls|rm, kiln create --volume ------------------------------
export KILN_API_URL=$URL KILN_API_KEY=$MAIN
cv=$("$KILN" volume create cli-vol --size 8 2>&1)
check volume_cli_create "$cv" [ "${cv#vol_}" != "$cv" ]
cs=$("$KILN" create minimal --volume cli-vol:/cli:ro 2>&1)
mounts=$("$KILN" exec "$cs" 'grep " /cli " /proc/mounts' 2>&1)
ok=; [ "${cs#sbx_}" != "$cs" ] && [[ "$mounts" == *" /cli ext4 ro"* ]] && ok=1
check volume_cli_create_sandbox "$cs: $mounts" [ -n "$ok" ]
ls_out=$("$KILN" volume ls 2>&1)
check volume_cli_ls "$(grep cli-vol <<<"$ls_out")" grep -q "^$cv  *cli-vol  *8 .*$cs:/cli:ro" <<<"$ls_out"
"$KILN" volume rm "$cv" > "$T/cli.out" 2>&1
check volume_cli_rm_in_use "exit $?: $(cat "$T/cli.out")" grep -q "attached to sandbox $cs" "$T/cli.out"
"$KILN" rm "$cs" > /dev/null 2>&1
"$KILN" volume rm "$cv" > "$T/cli.out" 2>&1
check volume_cli_rm "exit $?: $(cat "$T/cli.out")" [ ! -e "$DATA/volumes/$cv.img" ]

# ---- a template built without slots ------------------------------------------------------
stop_kilnd
man=$(readlink -f "$DATA/templates/minimal/current")/manifest.json
# The template may be the run's (build_template): put its manifest back.
cp "$man" "$T/manifest.kept" && at_exit 'cp "$T/manifest.kept" "'"$man"'"'
python3 -c "import json,sys; m=json.load(open(sys.argv[1])); m.pop('volume_slots'); json.dump(m, open(sys.argv[1],'w'))" "$man"
start_kilnd "${kilnd_args[@]}" || exit 1
api POST /v1/sandboxes '{"template":"minimal","volumes":[{"name":"data","path":"/data"}]}'
expect volume_old_template 409 conflict && { [[ "$(msg)" == *minimal*rebuild* ]] && pass volume_old_template_says "$(msg)" || fail volume_old_template_says "$(msg)"; }

# ---- the end: volumes deleted, their files gone, no VMM left ----------------------------
api GET /v1/volumes
for id in $(jget '" ".join(v["id"] for v in j["volumes"])'); do
	api DELETE "/v1/volumes/$id"
	[ "$STATUS" = 204 ] || fail volume_delete "$id: $STATUS $BODY"
done
check volume_deleted "$STATUS; left in DATA/volumes: $(ls "$DATA/volumes" | tr '\n' ' ')" [ "$STATUS" = 204 -a -z "$(ls "$DATA/volumes")" ]
api GET "/v1/volumes/$V"
expect volume_gone 404 not_found
n=$(sandbox_vmms | wc -l)
check volume_no_vmms "sandbox VMMs left: $n" [ "$n" = 0 ]
alive volume_kilnd_alive
