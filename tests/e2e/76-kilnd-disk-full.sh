#!/bin/bash
# Disk space on the host (issue 15), with kilnd's data directory on a
# small ext4 of its own (a loop file on a disk filesystem): a sandbox's
# disk cannot grow past its size (the guest's own filesystem fills, ENOSPC
# inside); kilnd keeps --reserve-disk free on the data filesystem (a
# sandbox writing into it gets I/O errors, the host keeps its room); creates
# are refused with 503 while the room is not there, and admitted again
# once it is.
. "$(dirname "$0")/lib.sh"
have_kvm || { echo "SKIP kilnd_disk_full: no KVM"; exit 0; }
back=${KILN_SCRATCH:-/var/tmp}
case $(stat -f -c %T "$back" 2>/dev/null) in
tmpfs|ramfs|"") fail disk_full_fs "$back is not a disk filesystem (tests/host/run -s MIB gives one)"; exit 0 ;;
esac
img=$back/kiln-small.$$.ext4
truncate -s 1200M "$img" && mke2fs -q -t ext4 -m 0 "$img" || { fail disk_full_mkfs "cannot make $img"; exit 1; }
mkdir -p "$DATA"
modprobe -q loop 2>/dev/null
loopdev=$(losetup -f --show "$img" 2>"$T/losetup.err") && mount -t ext4 "$loopdev" "$DATA" 2>"$T/mount.err" ||
	{ fail disk_full_mount "cannot mount $img on ${loopdev:-a loop device}: $(cat "$T/losetup.err" "$T/mount.err" | tr '\n' ' ')"
	  [ -n "$loopdev" ] && losetup -d "$loopdev"; rm -f "$img"; exit 1; }
# Last of the cleanups: kilnd and its zygote go first, then the mount.
at_exit 'stop_kilnd; for z in "$DATA"/templates/*/v*/zygote.pid; do [ -f "$z" ] && kill -9 "$(cut -d" " -f1 "$z")"; done 2>/dev/null; sleep 0.5; umount "$DATA" || umount -l "$DATA"; losetup -d "$loopdev" 2>/dev/null; rm -f "$img"'
RESERVE=200
free_mib() { echo $(( $(stat -f -c '%a * %S' "$DATA") / 1048576 )); }

build_template --own minimal || exit 1
start_kilnd --rate 0 --net-pool 1 --reserve-disk $RESERVE || exit 1
KEY=$(new_key disk)
at_exit 'for s in $A $B; do api DELETE /v1/sandboxes/$s; done'
create_sandbox
A=$SBX
create_sandbox
B=$SBX
[ -n "$A" ] && [ -n "$B" ] || { fail disk_full_create "$STATUS $BODY"; exit 1; }
run_in() {   # run_in SBX CMD [TIMEOUT]: stdout and stderr of CMD in the guest
	api POST "/v1/sandboxes/$1/exec" "{\"cmd\":\"$2\",\"timeout_seconds\":${3:-120}}"
	jget '(j["stdout"] + j["stderr"]).strip()'
}

# ---- the sandbox's own disk fills: ENOSPC in the guest, the overlay no bigger than the disk ------
out=$(run_in "$A" 'dd if=/dev/zero of=/fill bs=1M count=200 2>&1; sync')
size=$(stat -c %s "$DATA/sandboxes/$A/disk")
api GET "/v1/sandboxes/$A"
check disk_full_guest_enospc "guest dd: '$(tail -c 120 <<<"$out" | tr '\n' ' ')'; overlay $((size >> 20)) MiB for a 64 MiB disk; status $(jget 'j["status"]')" \
	eval 'grep -q "No space left" <<<"$out" && [ "$size" -le $(( (64 + 2) << 20 )) ] && [ "$(jget '\''j["status"]'\'')" = running ]'

# ---- the host's reserve: fill the data filesystem to just above it --------------------------------
f=$(free_mib)
fallocate -l $(( (f - RESERVE - 24) << 20 )) "$DATA/filler" || { fail disk_full_filler "fallocate"; exit 1; }
before=$(free_mib)
out=$(run_in "$B" 'dd if=/dev/zero of=/root/x bs=1M count=48 conv=fsync 2>&1; echo rc=$?')
after=$(free_mib)
api GET "/v1/sandboxes/$B"
stB=$(jget 'j["status"]')
check disk_full_reserve_kept "free before $before MiB, after B wrote 48 MiB: $after MiB (reserve $RESERVE); guest: '$(tail -c 100 <<<"$out" | tr '\n' ' ')'; B $stB" \
	eval '[ "$after" -ge $((RESERVE - 2)) ] && grep -q "rc=[1-9]" <<<"$out" && [ "$stB" = running ]'

# ---- admission: no room, no create; room again, creates again ----------------------------------------
create_sandbox
check disk_full_refused "create with $(free_mib) MiB free: $STATUS $(jget 'j["error"]["message"]' | head -c 160)" \
	eval '[ "$STATUS" = 503 ] && grep -q "data filesystem" "$T/body"'
[ -n "$SBX" ] && api DELETE "/v1/sandboxes/$SBX"
rm -f "$DATA/filler"
create_sandbox
C=$SBX
check disk_full_admitted_again "create with $(free_mib) MiB free: $STATUS" [ -n "$C" ]
[ -n "$C" ] && api DELETE "/v1/sandboxes/$C"
alive disk_full_kilnd
